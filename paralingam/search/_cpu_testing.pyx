# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Test and probe hooks of the CPU search's kernels (no product path imports this).

The moments of one pair as ``_cpu_kernels.h`` computes them inside the
search, compiled with the search's flags and in the same builds
(``paralingam._isa``), so a test of the float bound checks the code that
runs. Reached through :mod:`paralingam._testing`.
"""

from libc.math cimport sqrt

cdef extern from "_cpu_kernels.h" nogil:
    void pl_pair_moments(const double *xa, const double *xb, double rho,
                         double inv_s, Py_ssize_t n, double *out)
    void pl_residual_moments(const double *xa, const double *xb, double rho,
                             double inv_s, Py_ssize_t n, double *out)
    void pl_moments_f32(const double *xa, const double *xb, double rho, double inv_s,
                        Py_ssize_t n, int both, double *out)

# kernels/pl_constants.h: log 2, subtracted from the kernels' mean as the search does
cdef extern from "pl_constants.h" nogil:
    const double PL_LN2


def pair_moments(double[::1] xa, double[::1] xb, double rho, *, bint use_float=False,
                 bint both=True):
    """Mean moments of the standardised residuals of one pair, as the search computes them.

    Returns ``[mean log cosh u, mean u exp(-u^2/2)]`` of ``u = (xa - rho xb) / s``
    and, with ``both``, the same of ``v = (xb - rho xa) / s`` (for tests and
    ``MOMENT_ERR_CPU``'s probe).
    """
    cdef Py_ssize_t n = xa.shape[0]
    cdef double m[4]
    if xb.shape[0] != n or n == 0 or not (rho * rho < 1.0):
        raise ValueError("xa and xb must have the same nonzero length, and |rho| < 1")
    cdef double inv_s = 1.0 / sqrt(1.0 - rho * rho)
    if use_float:
        pl_moments_f32(&xa[0], &xb[0], rho, inv_s, n, both, m)
    elif both:
        pl_pair_moments(&xa[0], &xb[0], rho, inv_s, n, m)
    else:
        pl_residual_moments(&xa[0], &xb[0], rho, inv_s, n, m)
    out = [m[0] / n - PL_LN2, m[1] / n]
    if both:
        out += [m[2] / n - PL_LN2, m[3] / n]
    return out
