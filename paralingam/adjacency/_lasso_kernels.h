/* Vector loops of the compiled adaptive lasso (paralingam/adjacency/_lasso.pyx).
 *
 * `omp simd` lets the compiler vectorise the reductions without -ffast-math
 * for the whole extension: only these sums are reassociated (as BLAS does),
 * every other operation rounds in program order.
 */
#ifndef PARALINGAM_LASSO_KERNELS_H
#define PARALINGAM_LASSO_KERNELS_H

#include <Python.h>  /* Py_ssize_t */

/* sum_i x[i] * y[i]. Kept out of line: GCC inlined into the triangular
 * solves of the LARS path, it lowered the `omp simd` reduction to a scalar
 * loop over per-lane sums (the same sums, so the same result, but slower),
 * whereas the out-of-line copy is vectorised. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static double pl_dot(const double *x, const double *y, Py_ssize_t n)
{
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (Py_ssize_t i = 0; i < n; ++i)
        s += x[i] * y[i];
    return s;
}

/* y[i] += a * x[i] */
static inline void pl_axpy(double a, const double *x, double *y, Py_ssize_t n)
{
#pragma omp simd
    for (Py_ssize_t i = 0; i < n; ++i)
        y[i] += a * x[i];
}

/* y[i] += a0 * x0[i] + a1 * x1[i] + a2 * x2[i] + a3 * x3[i]: four rows per pass
 * over y, so y is loaded and stored once per four rows */
static inline void pl_axpy4(double a0, const double *x0, double a1, const double *x1,
                            double a2, const double *x2, double a3, const double *x3,
                            double *y, Py_ssize_t n)
{
#pragma omp simd
    for (Py_ssize_t i = 0; i < n; ++i)
        y[i] += a0 * x0[i] + a1 * x1[i] + a2 * x2[i] + a3 * x3[i];
}

/* y[i] += a * row[idx[i]]: a Gram row restricted to a predictor set */
static inline void pl_axpy_gather(double a, const double *row, const Py_ssize_t *idx,
                                  double *y, Py_ssize_t n)
{
#pragma omp simd
    for (Py_ssize_t i = 0; i < n; ++i)
        y[i] += a * row[idx[i]];
}

/* ---- task counter; flags, clock and fork handler from _runtime.h ---- */

#include "_runtime.h"

static inline Py_ssize_t pl_next_task(Py_ssize_t *counter)
{
    return __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

#endif
