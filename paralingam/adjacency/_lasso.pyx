# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled adaptive-lasso rows: lingam's ``predict_adaptive_lasso`` for every target.

Per target (a variable and its predictors, the variables before it in the
causal order), from the Gram matrix of the standardised data and the scatter
matrix of the centred data:

1. least-squares weights ``w = |b| ** gamma`` (given by the caller from one
   factorisation of the whole Gram matrix, or solved here by Cholesky);
2. the LARS lasso path of the weighted problem, a port of scikit-learn's
   ``_lars_path_solver`` for a precomputed Gram matrix (``method="lasso"``,
   ``alpha_min=0``, LassoLarsIC's ``max_iter=500`` and ``eps``), with its tie
   rounding, tolerances, Cholesky updates and Givens-rotation downdates; each
   point of the path is scored with BIC as ``LassoLarsIC(criterion="bic")``
   scores it, and the first best point is kept;
3. least squares on the kept predictors, original scale.

All targets read one shared Gram matrix: the weighted Gram entries
``G[i, j] w[i] w[j]`` are formed on the fly, so no target copies or permutes a
k x k matrix (sklearn permutes its Gram copy; here an index array records the
same permutation, which decides ties identically). A path point's residual sum
of squares comes from the equal correlations of the active set in O(active)
instead of a quadratic form.

Provenance: step 2 is derived from scikit-learn's ``_lars_path_solver``
(``sklearn/linear_model/_least_angle.py``, BSD-3-Clause, Copyright (c) 2007-2024
The scikit-learn developers; licence text in ``LICENSES/scikit-learn.txt``). It
follows that code's decisions step for step because lingam's adjacency matrix
is defined by scikit-learn's path, and only the same path reproduces it.

Targets run in parallel (OpenMP), largest first, without the GIL. The two
branches scikit-learn takes with a warning on linearly dependent predictors
are ported as it runs them: a degenerate regressor is "dropped for good" and
an alpha that grows through rounding ends the path; such a target is flagged
``WARNED``. Where the kept predictors are singular to ``SINGULAR_TOL``, the
caller can take the refit itself (``mark_singular``: the row holds NaN at the
kept predictors, flag ``SINGULAR_REFIT``), as it needs the minimum-norm
least squares. Whenever scikit-learn would take one of its remaining rare
branches (an ill-conditioned direction, two coefficients crossing zero at
once) or a matrix is not positive definite, the target is flagged
``FALLBACK`` and the caller recomputes it with scikit-learn itself, so results
never depend on a port of those branches.
"""

import threading

import numpy as np

cimport openmp
from cpython.exc cimport PyErr_Fetch, PyErr_Restore
from cpython.ref cimport PyObject, Py_XDECREF
from cython.parallel cimport parallel
from libc.float cimport DBL_MAX, DBL_EPSILON, FLT_EPSILON, FLT_MIN
from libc.math cimport NAN, fabs, hypot, isfinite, log, pow, rint, sqrt, M_PI
from libc.stdlib cimport calloc, free


cdef extern from "_lasso_kernels.h" nogil:
    double pl_dot(const double* x, const double* y, Py_ssize_t n)
    void pl_axpy(double a, const double* x, double* y, Py_ssize_t n)
    void pl_axpy4(double a0, const double* x0, double a1, const double* x1,
                  double a2, const double* x2, double a3, const double* x3,
                  double* y, Py_ssize_t n)
    void pl_axpy_gather(double a, const double* row, const Py_ssize_t* idx, double* y,
                        Py_ssize_t n)
    Py_ssize_t pl_next_task(Py_ssize_t* counter)
    int pl_load_int(const int* p)
    void pl_store_int(int* p, int v)
    double pl_wall_seconds()
    int pl_register_fork_handler()
    int pl_threads_usable()

cdef extern from "Python.h":
    # progress(done): the C call, so that an exception is fetched, not printed
    PyObject* pl_call_n "PyObject_CallFunction" (PyObject* callable, const char* fmt,
                                                  Py_ssize_t arg)

include "_interrupts.pxi"  # Ctrl-C: Interrupt, poll_signals, raise_stopped

# Fork: as the search (paralingam/search/_cpu.pyx, docs/design/runtime.rst).
pl_register_fork_handler()


cdef double TINY32 = FLT_MIN            # np.finfo(np.float32).tiny
cdef double EQUALITY_TOL = FLT_EPSILON  # np.finfo(np.float32).eps
cdef double ROUND_SCALE = 1e15          # np.around(..., decimals=finfo(float64).precision)
cdef Py_ssize_t MAX_ITER = 500          # LassoLarsIC's default
# A least-squares system whose Cholesky pivot keeps less than this fraction of
# its diagonal (1 - R^2 of a predictor on the others) is left to the Python path
# (minimum-norm least squares); the same bound as adjacency.SINGULAR_TOL.
cdef double SINGULAR_TOL = 1e-10

# Below this many variables the targets run on one thread (threads cost more).
cdef Py_ssize_t SERIAL_BELOW_P = 64

# Flags returned per target (bits).
DEF OK = 0
DEF FALLBACK = 1         # not computed: the caller runs scikit-learn's path
DEF WARNED = 2           # the path took a branch on which scikit-learn warns
DEF SINGULAR_REFIT = 4   # kept predictors singular: the row marks them with NaN
DEF DEGENERATE = 8       # lars_add: the candidate was dropped for good (internal)


cdef struct Problem:
    # One target's regression, read from the shared Gram matrix.
    const double* gram        # p x p, row-major
    Py_ssize_t p
    const Py_ssize_t* pred    # the k predictors (indices into gram)
    Py_ssize_t k
    Py_ssize_t target
    bint contiguous           # pred[i] == pred[0] + i: Gram rows read as plain vectors


cdef inline double gram_at(const Problem* P, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    """Unweighted Gram entry of predictors ``i``, ``j`` (positions in ``pred``)."""
    return P.gram[P.pred[i] * P.p + P.pred[j]]


cdef inline double gram_y(const Problem* P, Py_ssize_t i) noexcept nogil:
    """Unweighted Gram entry of predictor ``i`` and the target."""
    return P.gram[P.pred[i] * P.p + P.target]


cdef inline void gram_row_axpy(const Problem* P, Py_ssize_t i, double a,
                               double* y) noexcept nogil:
    """``y[j] += a * G[i, j]`` for every predictor ``j``."""
    cdef const double* row = P.gram + P.pred[i] * P.p
    if P.contiguous:
        pl_axpy(a, row + P.pred[0], y, P.k)
    else:
        pl_axpy_gather(a, row, P.pred, y, P.k)


cdef void gram_rows_times(const Problem* P, const Py_ssize_t* rows, const double* a,
                          Py_ssize_t count, double* y) noexcept nogil:
    """``y[j] = sum_r a[r] * G[rows[r], j]`` for every predictor ``j``."""
    cdef Py_ssize_t j, r = 0
    cdef const double* base = P.gram + P.pred[0]
    cdef Py_ssize_t p = P.p
    for j in range(P.k):
        y[j] = 0.0
    if P.contiguous:
        while r + 4 <= count:
            pl_axpy4(a[r], base + P.pred[rows[r]] * p,
                     a[r + 1], base + P.pred[rows[r + 1]] * p,
                     a[r + 2], base + P.pred[rows[r + 2]] * p,
                     a[r + 3], base + P.pred[rows[r + 3]] * p, y, P.k)
            r += 4
    while r < count:
        gram_row_axpy(P, rows[r], a[r], y)
        r += 1


cdef int cholesky(double* A, Py_ssize_t k) noexcept nogil:
    """In-place lower Cholesky factor of the k x k row-major ``A``.

    Returns 1 when ``A`` is not numerically positive definite: a pivot leaves
    less than ``SINGULAR_TOL`` of its diagonal entry (the variable is, to
    rounding, a combination of the earlier ones).
    """
    cdef Py_ssize_t i, j
    cdef double s, diag
    for j in range(k):
        diag = A[j * k + j]
        s = diag - pl_dot(A + j * k, A + j * k, j)
        if not (s > SINGULAR_TOL * diag) or not isfinite(s):
            return 1
        s = sqrt(s)
        A[j * k + j] = s
        for i in range(j + 1, k):
            A[i * k + j] = (A[i * k + j] - pl_dot(A + i * k, A + j * k, j)) / s
    return 0


cdef void forward_solve(const double* L, Py_ssize_t ld, Py_ssize_t k, double* x) noexcept nogil:
    """Solve ``L y = b`` in place (``x`` holds ``b``); ``L`` row-major lower, stride ``ld``."""
    cdef Py_ssize_t i
    for i in range(k):
        x[i] = (x[i] - pl_dot(L + i * ld, x, i)) / L[i * ld + i]


cdef void backward_solve(const double* L, Py_ssize_t ld, Py_ssize_t k, double* x) noexcept nogil:
    """Solve ``L^T x = y`` in place (``x`` holds ``y``); ``L`` row-major lower, stride ``ld``."""
    cdef Py_ssize_t i
    # by columns of L^T, i.e. rows of L: contiguous updates
    for i in range(k - 1, -1, -1):
        x[i] /= L[i * ld + i]
        pl_axpy(-x[i], L + i * ld, x, i)


cdef void cholesky_solve(const double* L, Py_ssize_t ld, Py_ssize_t k, double* x) noexcept nogil:
    """Solve ``L L^T x = b`` in place (``x`` holds ``b``); ``L`` row-major, stride ``ld``."""
    forward_solve(L, ld, k, x)
    backward_solve(L, ld, k, x)


cdef double min_pos(const double* x, Py_ssize_t size) noexcept nogil:
    """Smallest positive entry, DBL_MAX if none (sklearn's ``arrayfuncs.min_pos``)."""
    cdef double best = DBL_MAX
    cdef Py_ssize_t i
    for i in range(size):
        if 0.0 < x[i] < best:
            best = x[i]
    return best


cdef void givens(double* a, double* b, double* c, double* s) noexcept nogil:
    """BLAS drotg: the rotation zeroing ``b``; ``a`` becomes ``r`` (``b`` is not used after)."""
    cdef double roe = b[0] if fabs(b[0]) >= fabs(a[0]) else a[0]
    cdef double r = hypot(a[0], b[0])
    if r == 0.0:
        c[0] = 1.0
        s[0] = 0.0
        return
    if roe < 0:
        r = -r
    c[0] = a[0] / r
    s[0] = b[0] / r
    a[0] = r


cdef void cholesky_delete(double* L, Py_ssize_t ld, int n, int go_out) noexcept nogil:
    """Remove row/column ``go_out`` from the n x n factor ``L`` (sklearn's arrayfuncs).

    The rows below ``go_out`` move up one; Givens rotations then restore the
    lower-triangular shape, with a non-negative diagonal.
    """
    cdef double* L1 = L + go_out * ld
    cdef double c, s, x, y
    cdef int i, j, r
    for i in range(go_out, n - 1):
        for j in range(i + 2):
            L1[j] = L1[ld + j]
        L1 += ld
    L1 = L + go_out * ld
    for i in range(go_out, n - 1):
        givens(L1 + i, L1 + i + 1, &c, &s)
        if L1[i] < 0:
            L1[i] = fabs(L1[i])
            c = -c
            s = -s
        L1[i + 1] = 0.0
        L1 += ld
        # BLAS drot on columns i and i + 1 of the n - i - 2 rows below
        for r in range(n - i - 2):
            x = L1[r * ld + i]
            y = L1[r * ld + i + 1]
            L1[r * ld + i] = c * x + s * y
            L1[r * ld + i + 1] = c * y - s * x


cdef inline double bic(double rss, Py_ssize_t dof, double n, double noise_var) noexcept nogil:
    """LassoLarsIC's criterion (BIC) of one path point."""
    return n * log(2.0 * M_PI * noise_var) + rss / noise_var + log(n) * dof


cdef struct Lars:
    # one LARS lasso path of the weighted problem (lars_bic): the problem,
    # the workspace and the state of the path
    const Problem* P
    const double* w         # adaptive weights (original order)
    Py_ssize_t k            # predictors
    Py_ssize_t m            # bound on the active set, row stride of L
    double* L               # m x m: Cholesky factor of the active block
    double* gw              # weighted X^T y (original order)
    double* cov             # correlations by position; >= n_active: inactive
    double* coef            # current path point (original order)
    double* new_coef        # the next one
    double* full            # G_w[:, active] @ ls (original order)
    double* corr            # the same for inactive positions, rounded
    double* tmp
    double* sign_active     # by position
    Py_ssize_t* indices     # position -> predictor
    double* ls              # m: least squares / equiangular weights
    double* z
    double* lrow
    # L^{-1} sign_active, rows 0..n_fw-1 valid: a new active predictor appends a
    # row, a drop invalidates the rows from its position (the forward half of
    # each direction solve, computed once per row instead of once per step)
    double* fw
    Py_ssize_t n_fw
    Py_ssize_t n_active
    Py_ssize_t c_idx        # inactive position (from n_active) of the largest |correlation|
    double C                # that |correlation|
    double C_               # with its sign
    double AA               # the equiangular direction's normalisation
    double gamma_           # the step length
    Py_ssize_t ii           # the active position that crosses zero (drop)
    bint drop
    # after a degenerate regressor the correlations no longer match their
    # positions (sklearn's state, ported as is), so the active set's equal
    # correlation is not C - gamma * AA: rss from the quadratic form instead
    bint quad_rss


cdef void lars_start(Lars* t, const Problem* P, const double* w, double* work,
                     Py_ssize_t m) noexcept nogil:
    """Lay the workspace out (``m * m + 9 * k + 4 * m`` doubles) and start at point 0."""
    cdef Py_ssize_t k = P.k
    cdef Py_ssize_t i
    t.P = P
    t.w = w
    t.k = k
    t.m = m
    t.L = work
    t.gw = t.L + m * m
    t.cov = t.gw + k
    t.coef = t.cov + k
    t.new_coef = t.coef + k
    t.full = t.new_coef + k
    t.corr = t.full + k
    t.tmp = t.corr + k
    t.sign_active = t.tmp + k
    t.indices = <Py_ssize_t*> (t.sign_active + k)
    t.ls = t.sign_active + 2 * k
    t.z = t.ls + m
    t.lrow = t.z + m
    t.fw = t.lrow + m
    t.n_fw = 0
    t.n_active = 0
    t.drop = False
    t.quad_rss = False
    for i in range(k):
        t.gw[i] = gram_y(P, i) * w[i]
        t.cov[i] = t.gw[i]
        t.coef[i] = 0.0
        t.new_coef[i] = 0.0
        t.indices[i] = i
        t.sign_active[i] = 0.0


cdef inline double lars_max_corr(Lars* t) noexcept nogil:
    """The largest |correlation| of an inactive predictor (0 when none is left)."""
    cdef const double* cov = t.cov
    cdef Py_ssize_t n_active = t.n_active, k = t.k
    cdef Py_ssize_t i, c_idx
    cdef double C
    if n_active < k:
        c_idx = 0
        C = fabs(cov[n_active])
        for i in range(1, k - n_active):
            if fabs(cov[n_active + i]) > C:
                C = fabs(cov[n_active + i])
                c_idx = i
        t.C_ = cov[n_active + c_idx]
        t.c_idx = c_idx
    else:
        C = 0.0
    t.C = C
    return C


cdef inline int lars_add(Lars* t) noexcept nogil:
    """Move the predictor of lars_max_corr into the active set: a new row of L."""
    cdef const Problem* P = t.P
    cdef const double* w = t.w
    cdef double* L = t.L
    cdef double* cov = t.cov
    cdef double* lrow = t.lrow
    cdef Py_ssize_t* indices = t.indices
    cdef Py_ssize_t m = t.m, n_active = t.n_active
    cdef Py_ssize_t nn, i, a
    cdef double temp, wj, c_diag, v, diag
    cdef double C_ = t.C_
    t.sign_active[n_active] = (C_ > 0) - (C_ < 0)
    nn = t.c_idx + n_active
    temp = cov[nn]
    cov[nn] = cov[n_active]
    cov[n_active] = temp
    i = indices[nn]
    indices[nn] = indices[n_active]
    indices[n_active] = i
    # new row of the factor: L[:n, :n] l = G_w[active, new]
    wj = w[i]
    c_diag = gram_at(P, i, i) * (wj * wj)
    for a in range(n_active):
        lrow[a] = gram_at(P, indices[a], i) * (w[indices[a]] * wj)
    forward_solve(L, m, n_active, lrow)
    v = pl_dot(lrow, lrow, n_active)
    for a in range(n_active):
        L[n_active * m + a] = lrow[a]
    diag = sqrt(fabs(c_diag - v))
    if diag < DBL_EPSILON:
        diag = DBL_EPSILON
    L[n_active * m + n_active] = diag
    if diag < 1e-7:
        # A degenerate regressor: sklearn "drops it for good" (with a
        # warning) by zeroing its correlation and swapping the correlations
        # back, while its permutation of the predictors (indices here, its
        # Gram copy there) stays swapped. The correlation at position
        # n_active then belongs, by position, to the candidate, and the zero
        # to the predictor it swapped with; the path goes on from that state
        # exactly as sklearn's does. The row written to L is overwritten by
        # the next addition.
        cov[n_active] = 0.0
        temp = cov[nn]
        cov[nn] = cov[n_active]
        cov[n_active] = temp
        return DEGENERATE
    t.n_active = n_active + 1
    return OK


cdef inline int lars_direction(Lars* t) noexcept nogil:
    """The equiangular direction ``ls`` of the active set and its normalisation ``AA``."""
    cdef const double* L = t.L
    cdef double* fw = t.fw
    cdef double* ls = t.ls
    cdef const double* sign_active = t.sign_active
    cdef Py_ssize_t m = t.m, n_active = t.n_active
    cdef Py_ssize_t i
    cdef double s, AA
    for i in range(t.n_fw, n_active):
        fw[i] = (sign_active[i] - pl_dot(L + i * m, fw, i)) / L[i * m + i]
    t.n_fw = n_active
    for i in range(n_active):
        ls[i] = fw[i]
    backward_solve(L, m, n_active, ls)
    if n_active == 1 and ls[0] == 0.0:
        return FALLBACK
    s = pl_dot(ls, sign_active, n_active)
    AA = 1.0 / sqrt(s)
    if not isfinite(AA):
        return FALLBACK
    for i in range(n_active):
        ls[i] *= AA
    t.AA = AA
    return OK


cdef inline void lars_inactive_corr(Lars* t) noexcept nogil:
    """``corr`` = G_w[inactive, active] @ ls, rounded as sklearn rounds it.

    Built from whole Gram rows of the active predictors (contiguous reads of
    the shared matrix).
    """
    cdef const double* w = t.w
    cdef const double* ls = t.ls
    cdef const double* full = t.full
    cdef double* z = t.z
    cdef double* corr = t.corr
    cdef const Py_ssize_t* indices = t.indices
    cdef Py_ssize_t n_active = t.n_active, k = t.k
    cdef Py_ssize_t a, i, j
    for a in range(n_active):
        z[a] = ls[a] * w[indices[a]]
    gram_rows_times(t.P, indices, z, n_active, t.full)
    for j in range(k - n_active):
        i = indices[n_active + j]
        # np.around(corr_eq_dir, decimals=15), as sklearn rounds it
        corr[j] = rint(full[i] * w[i] * ROUND_SCALE) / ROUND_SCALE


cdef inline int lars_step_length(Lars* t) noexcept nogil:
    """The step ``gamma_`` to the next event: a predictor joins or a coefficient crosses zero."""
    cdef const double* cov = t.cov
    cdef const double* corr = t.corr
    cdef const double* ls = t.ls
    cdef const double* coef = t.coef
    cdef const Py_ssize_t* indices = t.indices
    cdef double* tmp = t.tmp
    cdef double* z = t.z
    cdef Py_ssize_t n_active = t.n_active, k = t.k
    cdef Py_ssize_t i, j, ii, n_drop
    cdef double C = t.C, AA = t.AA
    cdef double g1, g2, gamma_, z_pos
    for j in range(k - n_active):
        tmp[j] = (C - cov[n_active + j]) / (AA - corr[j] + TINY32)
    g1 = min_pos(tmp, k - n_active)
    for j in range(k - n_active):
        tmp[j] = (C + cov[n_active + j]) / (AA + corr[j] + TINY32)
    g2 = min_pos(tmp, k - n_active)
    gamma_ = g1
    if g2 < gamma_:
        gamma_ = g2
    if C / AA < gamma_:
        gamma_ = C / AA

    t.drop = False
    for i in range(n_active):
        z[i] = -coef[indices[i]] / (ls[i] + TINY32)
    z_pos = min_pos(z, n_active)
    ii = -1
    if z_pos < gamma_:
        n_drop = 0
        for i in range(n_active):
            if z[i] == z_pos:
                n_drop += 1
                ii = i
        if n_drop > 1:
            return FALLBACK  # several coefficients cross zero at once
        gamma_ = z_pos
        t.drop = True
    t.ii = ii
    t.gamma_ = gamma_
    return OK


cdef double active_quadratic_form(const Lars* t, const double* b) noexcept nogil:
    """``b.G_w.b`` over the active predictors (``b`` zero elsewhere, original order)."""
    cdef const Problem* P = t.P
    cdef const double* w = t.w
    cdef const Py_ssize_t* indices = t.indices
    cdef Py_ssize_t a, c, i
    cdef double q = 0.0, s
    for a in range(t.n_active):
        i = indices[a]
        s = 0.0
        for c in range(t.n_active):
            s += gram_at(P, i, indices[c]) * w[indices[c]] * b[indices[c]]
        q += w[i] * b[i] * s
    return q


cdef inline double lars_move(Lars* t, double yy, Py_ssize_t* dof_out) noexcept nogil:
    """Step to the next point ``new_coef``; its residual sum of squares and degrees of freedom.

    The new point is zero outside the active set of this step. With c = G_w
    b - g_w the residual correlations, rss = yy - g_w.b - c.b, and every
    active c equals sign * (C - gamma * AA) after the step (unless
    ``quad_rss``: then rss = yy - 2 g_w.b + b.G_w.b, O(active^2)).
    """
    cdef const double* gw = t.gw
    cdef const double* coef = t.coef
    cdef const double* ls = t.ls
    cdef const double* corr = t.corr
    cdef const Py_ssize_t* indices = t.indices
    cdef double* new_coef = t.new_coef
    cdef double* cov = t.cov
    cdef double* sign_active = t.sign_active
    cdef Py_ssize_t n_active = t.n_active, k = t.k
    cdef Py_ssize_t i, j
    cdef Py_ssize_t dof = 0
    cdef double gamma_ = t.gamma_
    cdef double lin = 0.0
    cdef double sdot = 0.0
    cdef double rss
    for i in range(k):
        new_coef[i] = 0.0
    for i in range(n_active):
        j = indices[i]
        new_coef[j] = coef[j] + gamma_ * ls[i]
        lin += gw[j] * new_coef[j]
        sdot += sign_active[i] * new_coef[j]
        if fabs(new_coef[j]) > DBL_EPSILON:
            dof += 1
    if t.quad_rss:
        rss = yy - 2.0 * lin + active_quadratic_form(t, new_coef)
    else:
        rss = yy - lin - (t.C - gamma_ * t.AA) * sdot
    for j in range(k - n_active):
        cov[n_active + j] -= gamma_ * corr[j]
    if t.drop:
        sign_active[t.ii] = -sign_active[t.ii]  # sklearn flips it before moving on
    dof_out[0] = dof
    return rss


cdef inline void lars_drop(Lars* t) noexcept nogil:
    """Remove the predictor whose coefficient crossed zero from the active set."""
    cdef const Problem* P = t.P
    cdef const double* w = t.w
    cdef const double* new_coef = t.new_coef
    cdef Py_ssize_t* indices = t.indices
    cdef double* sign_active = t.sign_active
    cdef Py_ssize_t ii = t.ii, n_active = t.n_active
    cdef Py_ssize_t i, j, drop_var
    cdef double temp
    drop_var = indices[ii]
    # sklearn recomputes the dropped correlation from the Gram matrix
    temp = 0.0
    for i in range(n_active):
        j = indices[i]
        temp += gram_at(P, drop_var, j) * (w[drop_var] * w[j]) * new_coef[j]
    cholesky_delete(t.L, t.m, <int> n_active, <int> ii)
    t.n_fw = ii  # rows above the dropped one are unchanged
    n_active -= 1
    for i in range(ii, n_active):
        j = indices[i]
        indices[i] = indices[i + 1]
        indices[i + 1] = j
    t.cov[n_active] = t.gw[drop_var] - temp
    for i in range(ii, n_active):
        sign_active[i] = sign_active[i + 1]
    sign_active[n_active] = 0.0
    t.n_active = n_active


cdef int lars_bic(const Problem* P, const double* w, double yy, double n, double noise_var,
                  double* best, double* work, Py_ssize_t m) noexcept nogil:
    """LARS lasso path of the weighted problem; ``best`` gets the BIC-best point.

    Positions ``0..n_active-1`` of ``indices`` are the active predictors, the
    rest inactive, permuted exactly as sklearn permutes its Gram matrix.
    ``m`` bounds the active set (``min(k, MAX_ITER)``). ``work`` holds
    ``m * m + 9 * k + 4 * m`` doubles. Returns FALLBACK on sklearn's rare
    branches not ported, else OK or WARNED (a branch on which sklearn warns:
    a degenerate regressor dropped, or the path stopped as alpha grew).
    """
    cdef Lars t
    cdef Py_ssize_t i, dof
    cdef Py_ssize_t n_iter = 0
    cdef int added, warned = OK
    cdef double alpha, rss, temp, best_bic
    cdef double prev_alpha = 0.0
    cdef double* swap_ptr
    lars_start(&t, P, w, work, m)
    for i in range(P.k):
        best[i] = 0.0
    best_bic = bic(yy, 0, n, noise_var)  # point 0 of the path: all coefficients zero

    while True:
        alpha = lars_max_corr(&t) / n
        if alpha <= EQUALITY_TOL:  # alpha_min = 0: stop, no interpolation
            break
        if n_iter >= MAX_ITER or t.n_active >= t.k:
            break
        if not t.drop:
            added = lars_add(&t)
            if added == DEGENERATE:
                # sklearn's `continue`: the next candidate, from the top
                # (n_iter, prev_alpha and drop unchanged)
                warned = WARNED
                t.quad_rss = True
                continue
        if n_iter > 0 and prev_alpha < alpha:
            warned = WARNED  # sklearn stops with a warning; the path so far stands
            break
        if lars_direction(&t) != OK:
            return FALLBACK
        lars_inactive_corr(&t)
        if lars_step_length(&t) != OK:
            return FALLBACK
        n_iter += 1
        rss = lars_move(&t, yy, &dof)
        temp = bic(rss, dof, n, noise_var)
        if temp < best_bic:  # np.argmin: the first best point
            best_bic = temp
            for i in range(P.k):
                best[i] = 0.0
            for i in range(t.n_active):
                best[t.indices[i]] = t.new_coef[t.indices[i]]
        if t.drop:
            lars_drop(&t)
        prev_alpha = alpha
        swap_ptr = t.coef
        t.coef = t.new_coef
        t.new_coef = swap_ptr
    return warned


cdef int one_target(const double* gram, const double* scatter, Py_ssize_t p,
                    const Py_ssize_t* pred, Py_ssize_t k, Py_ssize_t target, double n,
                    double gamma, const double* ols_b, double ols_rss,
                    double* B, bint mark_singular) noexcept nogil:
    """Adaptive-lasso row of ``target`` with predictors ``pred[:k]`` into ``B`` (p x p).

    ``ols_b`` (length k) and ``ols_rss`` are the least-squares coefficients and
    residual sum of squares of the target on its predictors in the Gram
    matrix's scale, or NULL to solve them here. Returns the target's flags
    (FALLBACK, or WARNED and SINGULAR_REFIT); with ``mark_singular``, kept
    predictors singular to SINGULAR_TOL leave NaN in their entries of the row
    for the caller's minimum-norm refit, else the target falls back.
    """
    cdef Problem P
    cdef Py_ssize_t m = k if k < MAX_ITER else MAX_ITER
    cdef Py_ssize_t i, j, kept
    cdef double yy, rss, noise_var
    cdef int status = OK
    cdef int warned = OK
    cdef double* mem
    cdef double* w
    cdef double* b
    cdef double* best
    cdef double* work
    cdef double* S = NULL
    cdef Py_ssize_t* keep
    if n - k - 1 <= 0:
        return FALLBACK
    P.gram = gram
    P.p = p
    P.pred = pred
    P.k = k
    P.target = target
    P.contiguous = True
    for i in range(k):
        if pred[i] != pred[0] + i:
            P.contiguous = False
            break
    mem = <double*> calloc(3 * k + m * m + 9 * k + 4 * m + 16, sizeof(double))
    keep = <Py_ssize_t*> calloc(k + 1, sizeof(Py_ssize_t))
    if mem == NULL or keep == NULL:
        free(mem)
        free(keep)
        return FALLBACK
    w = mem
    b = w + k
    best = b + k
    work = best + k
    yy = gram[target * p + target]

    # 1. least-squares weights on the standardised data
    if ols_b != NULL:
        for i in range(k):
            b[i] = ols_b[i]
        rss = ols_rss
    else:
        S = <double*> calloc(k * k, sizeof(double))
        if S == NULL:
            status = FALLBACK
        else:
            for i in range(k):
                for j in range(k):
                    S[i * k + j] = gram_at(&P, i, j)
                b[i] = gram_y(&P, i)
            if cholesky(S, k):
                status = FALLBACK
            else:
                cholesky_solve(S, k, k, b)
                rss = yy
                for i in range(k):
                    rss -= gram_y(&P, i) * b[i]
            free(S)
            S = NULL
    if status == OK:
        for i in range(k):
            w[i] = fabs(b[i]) if gamma == 1.0 else pow(fabs(b[i]), gamma)  # as the GPU
        if rss < DBL_EPSILON * yy:
            rss = DBL_EPSILON * yy  # an exact fit: keep the criterion finite
        noise_var = rss / (n - k - 1)
        # 2. LARS path of the weighted problem, scored by BIC
        status = lars_bic(&P, w, yy, n, noise_var, best, work, m)
        if status == WARNED:
            warned = WARNED
            status = OK

    if status == OK:
        # 3. least squares on the kept predictors, original scale
        kept = 0
        for i in range(k):
            if fabs(best[i] * w[i]) > 0.0:
                keep[kept] = pred[i]
                kept += 1
        status = refit(scatter, p, keep, kept, target, b, B)
        if status != OK and mark_singular:
            for i in range(kept):
                B[target * p + keep[i]] = NAN
            status = SINGULAR_REFIT
    free(keep)
    free(mem)
    return status if status == FALLBACK else status | warned


cdef int thread_count(int n_threads, Py_ssize_t p):
    """OpenMP threads for the targets of a p-variable problem (see ``SERIAL_BELOW_P``).

    One in the thread that survived a fork (its OpenMP team did not).
    """
    if p < SERIAL_BELOW_P or not pl_threads_usable():
        return 1
    return n_threads if n_threads > 0 else openmp.omp_get_max_threads()


cdef struct Job:
    # The targets of adaptive_lasso_rows.
    Py_ssize_t n_targets
    const double* gram
    const double* scatter
    Py_ssize_t p
    const Py_ssize_t* targets
    const Py_ssize_t* offsets
    const Py_ssize_t* predictors
    double n_samples
    double gamma
    const double* ols_coef     # NULL: every target solves its own
    Py_ssize_t ols_ld          # row stride of ols_coef
    const double* ols_rss
    const unsigned char* ols_given
    bint mark_singular         # SINGULAR_REFIT instead of FALLBACK (one_target)
    double* B
    unsigned char* flag        # per target: FALLBACK
    Py_ssize_t next_task
    Interrupt intr             # Ctrl-C (_interrupts.pxi)
    PyObject* progress         # progress(done) or NULL (the caller holds the reference)
    Py_ssize_t n_done          # targets finished (atomic)
    double next_report         # wall time of the next progress call


cdef void run_target(Job* j, Py_ssize_t r) noexcept nogil:
    """Task ``r``: targets are taken from the last (the largest, in causal order)."""
    cdef Py_ssize_t t = j.n_targets - 1 - r
    cdef Py_ssize_t target = j.targets[t]
    cdef bint given
    given = j.ols_given != NULL and j.ols_given[t]
    j.flag[t] = one_target(
        j.gram, j.scatter, j.p, j.predictors + j.offsets[t], j.offsets[t + 1] - j.offsets[t],
        target, j.n_samples, j.gamma, j.ols_coef + target * j.ols_ld if given else NULL,
        j.ols_rss[target] if given else 0.0, j.B, j.mark_singular)


# progress(done) is called at most this often, by the caller's thread
cdef double PROGRESS_INTERVAL = 0.1


cdef void report_progress(Job* j, Py_ssize_t done) noexcept nogil:
    """``j.progress(done)`` every PROGRESS_INTERVAL; an exception it raises stops the job."""
    cdef double now = pl_wall_seconds()
    cdef PyObject* out
    if now < j.next_report or pl_load_int(&j.intr.stop):
        return
    j.next_report = now + PROGRESS_INTERVAL
    with gil:
        out = pl_call_n(j.progress, b"n", done)
        if out == NULL:  # kept as a signal handler's exception is (_interrupts.pxi)
            PyErr_Fetch(&j.intr.exc_type, &j.intr.exc_value, &j.intr.exc_tb)
            pl_store_int(&j.intr.stop, 1)
        else:
            Py_XDECREF(out)


cdef void run_targets(Job* j, int tid) noexcept nogil:
    """This thread's share of the targets (a dynamic schedule by hand)."""
    cdef Py_ssize_t r = pl_next_task(&j.next_task)
    cdef Py_ssize_t done
    while r < j.n_targets:
        if tid == 0:
            poll_signals(&j.intr)
        if pl_load_int(&j.intr.stop):
            return
        run_target(j, r)
        done = pl_next_task(&j.n_done) + 1  # (an atomic snapshot for the report)
        if tid == 0 and j.progress != NULL:
            report_progress(j, done)
        r = pl_next_task(&j.next_task)


cdef int run_job(Job* j, int threads) except -1:
    """Every target of ``j`` on ``threads`` threads; raise what a signal handler raised.

    The thread of the caller checks for signals between its targets (a
    target takes at most a fraction of a second); on an exception every
    thread leaves at its next target and the region ends before it is raised.
    One thread runs the targets itself, outside OpenMP.
    """
    j.next_task = 0
    j.n_done = 0
    j.next_report = 0.0
    interrupt_start(&j.intr)
    with nogil:
        if threads <= 1:
            run_targets(j, 0)
        else:
            with parallel(num_threads=threads):
                run_targets(j, openmp.omp_get_thread_num())
    if j.intr.stop:
        raise_stopped(&j.intr)
    return 0


cdef int refit(const double* scatter, Py_ssize_t p, const Py_ssize_t* keep, Py_ssize_t kept,
               Py_ssize_t target, double* b, double* B) noexcept nogil:
    """Least squares of ``target`` on ``keep[:kept]`` (scatter scale) into row ``target`` of ``B``.

    ``b`` is scratch of length ``kept``. FALLBACK (and ``B`` untouched) when the
    system is singular to ``SINGULAR_TOL``.
    """
    cdef Py_ssize_t i, j
    cdef int status = OK
    cdef double* S
    if kept == 0:
        return OK
    S = <double*> calloc(kept * kept, sizeof(double))
    if S == NULL:
        return FALLBACK
    for i in range(kept):
        for j in range(kept):
            S[i * kept + j] = scatter[keep[i] * p + keep[j]]
        b[i] = scatter[keep[i] * p + target]
    if cholesky(S, kept):
        status = FALLBACK
    else:
        cholesky_solve(S, kept, kept, b)
        for i in range(kept):
            if not isfinite(b[i]):
                status = FALLBACK
        if status == OK:
            for i in range(kept):
                B[target * p + keep[i]] = b[i]
    free(S)
    return status


def adaptive_lasso_rows(const double[:, ::1] gram, const double[:, ::1] scatter,
                        const Py_ssize_t[::1] targets, const Py_ssize_t[::1] offsets,
                        const Py_ssize_t[::1] predictors, double n_samples, double gamma,
                        int n_threads=0, const double[:, ::1] ols_coef=None,
                        const double[::1] ols_rss=None, const unsigned char[::1] ols_given=None,
                        progress=None, unsigned char[::1] flags=None):
    """Adaptive-lasso rows of ``B`` for many targets at once.

    Parameters
    ----------
    gram : ndarray, shape (p, p)
        ``Z.T @ Z`` of the standardised data.
    scatter : ndarray, shape (p, p)
        ``Xc.T @ Xc`` of the centred data.
    targets : ndarray of intp
        The targets, one per row to estimate.
    offsets, predictors : ndarray of intp
        Target ``t``'s predictors are ``predictors[offsets[t]:offsets[t + 1]]``.
        Targets are scheduled from the last (the largest, in causal order) to
        the first.
    n_samples : float
    gamma : float
        Exponent of the adaptive weights.
    n_threads : int
        OpenMP threads; 0 for the runtime's default (``OMP_NUM_THREADS`` or
        all cores). Problems with fewer than 64 variables run on one thread:
        their whole adjacency takes a few milliseconds, less than waking threads
        costs on a busy machine.
    ols_coef, ols_rss, ols_given : ndarray, optional
        Where ``ols_given[t]``: ``ols_coef[targets[t], :k]`` are target ``t``'s
        least-squares coefficients on its ``k`` predictors (in their order) and
        ``ols_rss[targets[t]]`` its residual sum of squares, both in ``gram``'s
        scale. Other targets solve their own.
    progress : callable, optional
        ``progress(done)``: targets finished so far, called from this thread
        at most every 0.1 s while the targets run.
    flags : ndarray of uint8, shape (n_targets,), optional
        Filled with each target's flags: 1 not computed (``fallback``), 2 the
        path took a branch on which scikit-learn warns (a degenerate
        regressor dropped, or alpha grew and the path stopped), 4 the kept
        predictors are singular to ``SINGULAR_TOL``: the row holds NaN at
        them, for the caller's minimum-norm refit. Without ``flags`` such a
        target falls back instead.

    Returns
    -------
    B : ndarray, shape (p, p)
        The rows of the targets; zero elsewhere.
    fallback : ndarray of bool
        Per target: not computed here, to be recomputed with scikit-learn.
    """
    cdef Py_ssize_t p = gram.shape[0], t, r, n_targets = targets.shape[0]
    if scatter.shape[0] != p or scatter.shape[1] != p or gram.shape[1] != p:
        raise ValueError("gram and scatter must both be p x p")
    if offsets.shape[0] != n_targets + 1:
        raise ValueError("offsets must have one entry more than targets")
    cdef bint given = ols_given is not None
    if given and (ols_coef is None or ols_rss is None or ols_given.shape[0] != n_targets
                  or ols_coef.shape[0] != p or ols_rss.shape[0] != p):
        raise ValueError("ols_coef (p x p), ols_rss (p) and ols_given (targets) go together")
    if flags is not None and flags.shape[0] != n_targets:
        raise ValueError("flags must have one entry per target")
    B_arr = np.zeros((p, p))
    fallback_arr = np.zeros(n_targets, dtype=np.uint8)
    cdef double[:, ::1] B = B_arr
    cdef unsigned char[::1] fallback = fallback_arr
    cdef int threads = thread_count(n_threads, p)
    cdef Job job
    if n_targets == 0:
        return B_arr, fallback_arr.astype(bool)
    job.mark_singular = flags is not None
    job.n_targets = n_targets
    job.gram = &gram[0, 0]
    job.scatter = &scatter[0, 0]
    job.p = p
    job.targets = &targets[0]
    job.offsets = &offsets[0]
    job.predictors = &predictors[0] if predictors.shape[0] > 0 else NULL
    job.n_samples = n_samples
    job.gamma = gamma
    job.ols_coef = &ols_coef[0, 0] if given else NULL
    job.ols_ld = ols_coef.shape[1] if given else 0
    job.ols_rss = &ols_rss[0] if given else NULL
    job.ols_given = &ols_given[0] if given else NULL
    job.B = &B[0, 0]
    job.flag = &fallback[0]
    job.progress = <PyObject*>progress if progress is not None else NULL
    run_job(&job, threads)
    if flags is not None:
        flags[:] = fallback
    return B_arr, (fallback_arr & FALLBACK).astype(bool)
