# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled adaptive-lasso rows: lingam's ``predict_adaptive_lasso`` for every target.

Per target (a variable and its predictors, the variables before it in the
causal order), from the Gram matrix of the standardised data and the scatter
matrix of the centred data:

1. least-squares weights ``w = |b| ** gamma`` (Cholesky solve);
2. the LARS lasso path of the weighted problem, a line-by-line port of
   scikit-learn's ``_lars_path_solver`` for a precomputed Gram matrix
   (``method="lasso"``, ``alpha_min=0``, LassoLarsIC's ``max_iter=500`` and
   ``eps``), with its tie rounding, tolerances, Cholesky updates and
   Givens-rotation downdates; each point of the path is scored with BIC as
   ``LassoLarsIC(criterion="bic")`` scores it, and the first best point is kept;
3. least squares on the kept predictors, original scale.

Provenance: step 2 is derived from scikit-learn's ``_lars_path_solver``
(``sklearn/linear_model/_least_angle.py``, BSD-3-Clause, Copyright (c) 2007-2024
The scikit-learn developers; licence text in ``LICENSES/scikit-learn.txt``). It
follows that code's decisions step for step because lingam's adjacency matrix
is defined by scikit-learn's path, and only an identical path reproduces it.

Targets run in parallel (OpenMP), without the GIL. Whenever scikit-learn would
take one of its rare branches (a degenerate regressor, alpha growing through
rounding, an ill-conditioned direction, two coefficients crossing zero at
once) or a matrix is not positive definite, the target is flagged and the
caller recomputes it with scikit-learn itself, so results never depend on a
port of those branches.
"""

import numpy as np

cimport openmp
from cython.parallel cimport prange
from libc.float cimport DBL_MAX, DBL_EPSILON, FLT_EPSILON, FLT_MIN
from libc.math cimport fabs, hypot, isfinite, log, pow, rint, sqrt, M_PI
from libc.stdlib cimport calloc, free

cdef double TINY32 = FLT_MIN            # np.finfo(np.float32).tiny
cdef double EQUALITY_TOL = FLT_EPSILON  # np.finfo(np.float32).eps
cdef double ROUND_SCALE = 1e15          # np.around(..., decimals=finfo(float64).precision)
cdef int MAX_ITER = 500                 # LassoLarsIC's default
# A least-squares system whose Cholesky pivot keeps less than this fraction of
# its diagonal (1 - R^2 of a predictor on the others) is left to the Python path
# (minimum-norm least squares); the same bound as adjacency.SINGULAR_TOL.
cdef double SINGULAR_TOL = 1e-10

# Below this many variables the targets run on one thread (threads cost more).
cdef Py_ssize_t SERIAL_BELOW_P = 64

# Flags returned per target.
DEF OK = 0
DEF FALLBACK = 1


cdef int cholesky(double* A, Py_ssize_t k) noexcept nogil:
    """In-place lower Cholesky factor of the k x k row-major ``A``.

    Returns 1 when ``A`` is not numerically positive definite: a pivot leaves
    less than ``SINGULAR_TOL`` of its diagonal entry (the variable is, to
    rounding, a combination of the earlier ones).
    """
    cdef Py_ssize_t i, j, l
    cdef double s, diag
    for j in range(k):
        diag = A[j * k + j]
        s = diag
        for l in range(j):
            s -= A[j * k + l] * A[j * k + l]
        if not (s > SINGULAR_TOL * diag) or not isfinite(s):
            return 1
        s = sqrt(s)
        A[j * k + j] = s
        for i in range(j + 1, k):
            for l in range(j):
                A[i * k + j] -= A[i * k + l] * A[j * k + l]
            A[i * k + j] /= s
    return 0


cdef void cholesky_solve(const double* L, Py_ssize_t ld, Py_ssize_t k, double* x) noexcept nogil:
    """Solve ``L L^T x = b`` in place (``x`` holds ``b``); ``L`` row-major, stride ``ld``."""
    cdef Py_ssize_t i, l
    for i in range(k):
        for l in range(i):
            x[i] -= L[i * ld + l] * x[l]
        x[i] /= L[i * ld + i]
    for i in range(k - 1, -1, -1):
        for l in range(i + 1, k):
            x[i] -= L[l * ld + i] * x[l]
        x[i] /= L[i * ld + i]


cdef double min_pos(const double* x, Py_ssize_t size) noexcept nogil:
    """Smallest positive entry, DBL_MAX if none (sklearn's ``arrayfuncs.min_pos``)."""
    cdef double best = DBL_MAX
    cdef Py_ssize_t i
    for i in range(size):
        if 0.0 < x[i] < best:
            best = x[i]
    return best


cdef void swap_rows_cols(double* G, Py_ssize_t k, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """Swap rows ``a``, ``b`` and then columns ``a``, ``b`` of the k x k ``G``."""
    cdef Py_ssize_t j
    cdef double t
    if a == b:
        return
    for j in range(k):
        t = G[a * k + j]
        G[a * k + j] = G[b * k + j]
        G[b * k + j] = t
    for j in range(k):
        t = G[j * k + a]
        G[j * k + a] = G[j * k + b]
        G[j * k + b] = t


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


cdef double bic_of(const double* coef, const Py_ssize_t* support, Py_ssize_t size,
                   const double* Gw, const double* gw, Py_ssize_t k, double yy, double n,
                   double noise_var) noexcept nogil:
    """LassoLarsIC's BIC of one path point, residuals from the Gram matrix.

    ``coef`` is zero outside ``support[:size]``.
    """
    cdef double lin = 0.0, quad = 0.0, row
    cdef Py_ssize_t a, b, i, dof = 0
    for a in range(size):
        i = support[a]
        if fabs(coef[i]) > DBL_EPSILON:
            dof += 1
        lin += gw[i] * coef[i]
        row = 0.0
        for b in range(size):
            row += Gw[i * k + support[b]] * coef[support[b]]
        quad += coef[i] * row
    return (n * log(2.0 * M_PI * noise_var) + (yy - 2.0 * lin + quad) / noise_var
            + log(n) * dof)


cdef int lars_bic(const double* Gw0, const double* gw, Py_ssize_t k, double yy, double n,
                  double noise_var, double* best, double* work) noexcept nogil:
    """LARS lasso path of (Gw0, gw); ``best`` gets the BIC-best point. FALLBACK on rare branches.

    ``work`` holds 3 k*k + 9 k doubles.
    """
    cdef double* G = work                 # Gram, rows/columns permuted as sklearn's
    cdef double* L = G + k * k            # Cholesky factor of the active block
    cdef double* cov = L + k * k          # correlations; positions >= n_active are "Cov"
    cdef double* coef = cov + k           # current path point (original indices)
    cdef double* new_coef = coef + k
    cdef double* ls = new_coef + k        # least squares / equiangular weights
    cdef double* corr = ls + k            # correlation of inactive with the direction
    cdef double* sign_active = corr + k
    cdef double* z = sign_active + k
    cdef double* tmp = z + k
    cdef Py_ssize_t* indices = <Py_ssize_t*> (tmp + k)   # k entries (fits in 2k doubles' room)
    cdef Py_ssize_t i, j, n_active = 0, n_iter = 0, c_idx, m, nn, ii, drop_var, n_drop
    cdef double C, C_, alpha, prev_alpha = 0.0, c_diag, v, diag, AA, s, g1, g2, gamma_, z_pos
    cdef double best_bic, b, temp
    cdef bint drop = False
    cdef double* swap_ptr

    for i in range(k * k):
        G[i] = Gw0[i]
    for i in range(k):
        cov[i] = gw[i]
        coef[i] = 0.0
        indices[i] = i
        sign_active[i] = 0.0
    # point 0 of the path: all coefficients zero
    best_bic = bic_of(coef, indices, 0, Gw0, gw, k, yy, n, noise_var)
    for i in range(k):
        best[i] = 0.0

    while True:
        if n_active < k:
            c_idx = 0
            C = fabs(cov[n_active])
            for i in range(1, k - n_active):
                if fabs(cov[n_active + i]) > C:
                    C = fabs(cov[n_active + i])
                    c_idx = i
            C_ = cov[n_active + c_idx]
        else:
            C = 0.0
        alpha = C / n
        if alpha <= EQUALITY_TOL:  # alpha_min = 0: stop, no interpolation
            break
        if n_iter >= MAX_ITER or n_active >= k:
            break

        if not drop:
            sign_active[n_active] = (C_ > 0) - (C_ < 0)
            m = n_active
            nn = c_idx + n_active
            temp = cov[n_active + c_idx]
            cov[n_active + c_idx] = cov[n_active]
            cov[n_active] = temp
            i = indices[nn]
            indices[nn] = indices[m]
            indices[m] = i
            swap_rows_cols(G, k, m, nn)
            c_diag = G[n_active * k + n_active]
            for j in range(n_active):
                L[n_active * k + j] = G[n_active * k + j]
            # forward substitution: L[:n, :n] w = L[n, :n]
            for i in range(n_active):
                s = L[n_active * k + i]
                for j in range(i):
                    s -= L[i * k + j] * L[n_active * k + j]
                L[n_active * k + i] = s / L[i * k + i]
            v = 0.0
            for j in range(n_active):
                v += L[n_active * k + j] * L[n_active * k + j]
            diag = sqrt(fabs(c_diag - v))
            if diag < DBL_EPSILON:
                diag = DBL_EPSILON
            L[n_active * k + n_active] = diag
            if diag < 1e-7:
                return FALLBACK  # degenerate regressor: sklearn drops it for good
            n_active += 1

        if n_iter > 0 and prev_alpha < alpha:
            return FALLBACK  # sklearn stops with a warning

        for i in range(n_active):
            ls[i] = sign_active[i]
        cholesky_solve(L, k, n_active, ls)
        if n_active == 1 and ls[0] == 0.0:
            return FALLBACK
        s = 0.0
        for i in range(n_active):
            s += ls[i] * sign_active[i]
        AA = 1.0 / sqrt(s)
        if not isfinite(AA):
            return FALLBACK
        for i in range(n_active):
            ls[i] *= AA

        # corr = G[:n_active, n_active:].T @ ls, row by row for contiguous access
        for j in range(k - n_active):
            corr[j] = 0.0
        for i in range(n_active):
            for j in range(k - n_active):
                corr[j] += G[i * k + n_active + j] * ls[i]
        for j in range(k - n_active):
            # np.around(corr_eq_dir, decimals=15), as sklearn rounds it
            corr[j] = rint(corr[j] * ROUND_SCALE) / ROUND_SCALE

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

        drop = False
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
            sign_active[ii] = -sign_active[ii]
            gamma_ = z_pos
            drop = True

        n_iter += 1
        for i in range(k):
            new_coef[i] = 0.0
        for i in range(n_active):
            new_coef[indices[i]] = coef[indices[i]] + gamma_ * ls[i]
        for j in range(k - n_active):
            cov[n_active + j] -= gamma_ * corr[j]

        # the new point is zero outside the active set of this step
        b = bic_of(new_coef, indices, n_active, Gw0, gw, k, yy, n, noise_var)

        if drop:
            cholesky_delete(L, k, <int> n_active, <int> ii)
            n_active -= 1
            drop_var = indices[ii]
            for i in range(ii, n_active):
                j = indices[i]
                indices[i] = indices[i + 1]
                indices[i + 1] = j
                swap_rows_cols(G, k, i, i + 1)
            temp = 0.0
            for j in range(k):
                temp += Gw0[drop_var * k + j] * new_coef[j]
            cov[n_active] = gw[drop_var] - temp
            for i in range(ii, n_active):
                sign_active[i] = sign_active[i + 1]
            sign_active[n_active] = 0.0

        if b < best_bic:  # np.argmin: the first best point
            best_bic = b
            for i in range(k):
                best[i] = new_coef[i]
        prev_alpha = alpha
        swap_ptr = coef
        coef = new_coef
        new_coef = swap_ptr
    return OK


cdef int one_target(const double[:, ::1] gram, const double[:, ::1] scatter,
                    const Py_ssize_t* pred, Py_ssize_t k, Py_ssize_t target, double n,
                    double gamma, double[:, ::1] B) noexcept nogil:
    """Adaptive-lasso row of ``target`` with predictors ``pred[:k]`` into ``B``."""
    cdef double* mem = <double*> calloc(7 * k * k + 16 * k + 16, sizeof(double))
    cdef double* G = mem                 # k*k, then its Cholesky factor
    cdef double* Gw = G + k * k          # k*k
    cdef double* b = Gw + k * k          # k
    cdef double* w = b + k
    cdef double* gw = w + k
    cdef double* best = gw + k
    cdef double* work = best + k         # 3 k*k + 11 k (lars_bic)
    cdef double* S = work + 3 * k * k + 11 * k   # k*k
    cdef Py_ssize_t i, j, kept
    cdef Py_ssize_t* keep
    cdef double yy, rss, noise_var, s
    cdef int status = OK
    if mem == NULL or n - k - 1 <= 0:
        free(mem)
        return FALLBACK
    keep = <Py_ssize_t*> calloc(k + 1, sizeof(Py_ssize_t))
    if keep == NULL:
        free(mem)
        return FALLBACK

    # 1. least-squares weights on the standardised data
    for i in range(k):
        for j in range(k):
            G[i * k + j] = gram[pred[i], pred[j]]
        b[i] = gram[pred[i], target]
        gw[i] = b[i]
    yy = gram[target, target]
    if cholesky(G, k):
        status = FALLBACK
    else:
        cholesky_solve(G, k, k, b)
        rss = yy
        for i in range(k):
            rss -= gw[i] * b[i]
            w[i] = pow(fabs(b[i]), gamma)
        if rss < DBL_EPSILON * yy:
            rss = DBL_EPSILON * yy  # an exact fit: keep the criterion finite
        noise_var = rss / (n - k - 1)

        # 2. LARS path of the weighted problem, scored by BIC
        for i in range(k):
            for j in range(k):
                Gw[i * k + j] = gram[pred[i], pred[j]] * (w[i] * w[j])
            gw[i] = gram[pred[i], target] * w[i]
        status = lars_bic(Gw, gw, k, yy, n, noise_var, best, work)

    if status == OK:
        # 3. least squares on the kept predictors, original scale
        kept = 0
        for i in range(k):
            if fabs(best[i] * w[i]) > 0.0:
                keep[kept] = pred[i]
                kept += 1
        if kept:
            for i in range(kept):
                for j in range(kept):
                    S[i * kept + j] = scatter[keep[i], keep[j]]
                b[i] = scatter[keep[i], target]
            if cholesky(S, kept):
                status = FALLBACK
            else:
                cholesky_solve(S, kept, kept, b)
                for i in range(kept):
                    if not isfinite(b[i]):
                        status = FALLBACK
                if status == OK:
                    for i in range(kept):
                        B[target, keep[i]] = b[i]
    free(keep)
    free(mem)
    return status


def adaptive_lasso_rows(const double[:, ::1] gram, const double[:, ::1] scatter,
                        const Py_ssize_t[::1] targets, const Py_ssize_t[::1] offsets,
                        const Py_ssize_t[::1] predictors, double n_samples, double gamma,
                        int n_threads=0):
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
    n_samples : float
    gamma : float
        Exponent of the adaptive weights.
    n_threads : int
        OpenMP threads; 0 for the runtime's default (``OMP_NUM_THREADS`` or
        all cores). Problems with fewer than 64 variables run on one thread:
        their whole adjacency takes a few milliseconds, less than waking threads
        costs on a busy machine.

    Returns
    -------
    B : ndarray, shape (p, p)
        The rows of the targets; zero elsewhere.
    fallback : ndarray of bool
        Per target: not computed here, to be recomputed with scikit-learn.
    """
    cdef Py_ssize_t p = gram.shape[0], t, n_targets = targets.shape[0]
    B_arr = np.zeros((p, p))
    fallback_arr = np.zeros(n_targets, dtype=np.uint8)
    cdef double[:, ::1] B = B_arr
    cdef unsigned char[::1] fallback = fallback_arr
    cdef int threads = n_threads if n_threads > 0 else openmp.omp_get_max_threads()
    if p < SERIAL_BELOW_P:
        threads = 1
    with nogil:
        for t in prange(n_targets, schedule="dynamic", num_threads=threads):
            fallback[t] = one_target(gram, scatter, &predictors[offsets[t]],
                                     offsets[t + 1] - offsets[t], targets[t], n_samples,
                                     gamma, B)
    return B_arr, fallback_arr.astype(bool)
