# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled linear-algebra steps of the adjacency step that numpy and scipy lack.

``cholesky_add``: the rank-one update ``R^T R + x x^T`` of a triangular factor
by Givens rotations, O(m^2) where refactorising costs O(m^3).

``min_norm_variables``: the variable-by-variable loop of the minimum-norm
rows (``_min_norm._min_norm_rows``), whose small steps (a few projections,
two triangular solves, one rotation sweep per variable) cost less than the
Python calls that made them.

``qr_factor`` and ``fold_rows``: LAPACK's ``dgeqrf`` and ``dtpqrt`` (scipy's,
through ``scipy.linalg.cython_lapack``) without the GIL, so that the streaming
QR of the data's row segments runs on several threads at once, and the one
stream beside the scatter matrix (scipy's Python wrappers hold the GIL for
the whole call).
"""

import numpy as np

from libc.math cimport hypot, isfinite, sqrt
from scipy.linalg.cython_blas cimport dtrsv
from scipy.linalg.cython_lapack cimport dgeqrf, dtpqrt

# What min_norm_variables returns with: the block's variables are done; the
# factor R is singular at the variable reached (the caller solves it); the
# rest of the block goes to the blocks (none of its variables can join).
cdef enum:
    _DONE = 0
    _SINGULAR = 1
    _TO_BLOCKS = 2

MIN_NORM_DONE = _DONE
MIN_NORM_SINGULAR = _SINGULAR
MIN_NORM_TO_BLOCKS = _TO_BLOCKS


cdef void _cholesky_add(double[:, ::1] R, double[::1] x, Py_ssize_t m) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef double r, c, s, a, b
    for i in range(m):
        if x[i] == 0.0:
            continue
        r = hypot(R[i, i], x[i])
        c = R[i, i] / r
        s = x[i] / r
        R[i, i] = r
        for j in range(i + 1, m):
            a = R[i, j]
            b = x[j]
            R[i, j] = c * a + s * b
            x[j] = c * b - s * a


cdef inline bint _joins(double res2, double sq_norm, bint room, double tol) noexcept nogil:
    """``_min_norm._joins`` of one variable."""
    return room and res2 > tol * sq_norm and isfinite(res2)


def cholesky_add(double[:, ::1] R, double[::1] x, Py_ssize_t m):
    """Update ``R`` in place so that ``R^T R`` gains ``x x^T`` (leading m x m block).

    Parameters
    ----------
    R : ndarray, shape (>= m, >= m), C-contiguous
        Upper triangular; zero rows are allowed (a factor being grown: the
        update fills them where ``x`` is non-zero). Diagonal signs are kept
        as they come.
    x : ndarray, shape (>= m,)
        Overwritten (it ends as zeros up to rounding).
    m : int
        Size of the leading block to update.
    """
    with nogil:
        _cholesky_add(R, x, m)


def min_norm_variables(double[::1, :] U, double[:, ::1] C, double[:, ::1] R, double[:, ::1] Y,
                       double[::1, :] A, const double[:, ::1] L, const Py_ssize_t[::1] cols,
                       const double[::1] sq_norm, double[::1] rest2, bint track,
                       double[::1] l, Py_ssize_t i, Py_ssize_t m0, Py_ssize_t m, double tol,
                       bint solved=False):
    """Variables ``cols[i:]`` of a block, one at a time (``_min_norm._min_norm_rows``'s loop).

    For each variable ``k = cols[i]``: its residual ``A[:, i]`` on the basis
    as the block found it (``m0`` vectors; ``L[:, i]`` its coordinates there)
    is projected, twice, on the vectors added inside the block
    (``U[:, m0:m]``); its coordinates ``l`` solve ``R^T R y = l`` into
    ``Y[k, :m]``; a residual that keeps more than ``tol`` of the squared
    norm ``sq_norm[k]`` (and is finite, with fewer than ``d`` vectors)
    joins the basis as ``U[:, m]``; then ``C[:m, k] = l`` and ``R^T R``
    gains ``l l^T``. With ``track``, ``rest2[q]`` holds the squared residual
    of the block's later variables, which each new vector lowers; once none
    of them can join, the loop stops (:data:`MIN_NORM_TO_BLOCKS`).

    ``U`` and ``A`` are Fortran-ordered (the loops run down their columns).
    The arrays must have room for every variable of the block to join
    (``m + len(cols) - i`` columns of ``U``, up to ``min(d, p)``); ``l`` is
    the work vector of the coordinates (length ``U.shape[1]``). Where ``R``
    has an exact zero on its diagonal (LAPACK ``dtrtrs``'s singularity) the
    loop stops before the solve (:data:`MIN_NORM_SINGULAR`), with ``l`` the
    variable's coordinates and ``Y`` untouched; the caller solves that
    variable and calls again with ``solved=True``, which goes on from the
    basis test.

    Returns
    -------
    status, i, m : int
        :data:`MIN_NORM_DONE`, :data:`MIN_NORM_SINGULAR` (at variable ``i``)
        or :data:`MIN_NORM_TO_BLOCKS` (variables ``cols[:i]`` done); the
        basis's size.
    """
    cdef Py_ssize_t d = U.shape[0], b = cols.shape[0], cap = U.shape[1], k, j, t, q
    cdef int rep, n_solve, ld = <int>R.shape[1], one = 1
    cdef int status = _DONE
    cdef bint to_blocks
    cdef double s, res2, norm
    cdef char lower = b'L', no_trans = b'N', trans = b'T', non_unit = b'N'
    if l.shape[0] != cap or C.shape[0] != cap or R.shape[0] != cap or Y.shape[1] != cap:
        raise ValueError("min_norm_variables: U, C, R, Y and l disagree on the basis's room")
    if cap < min(m + b - i, d, C.shape[1]):
        raise ValueError("min_norm_variables: no room for the block's variables")
    step_arr = np.empty(max(1, cap))
    cdef double[::1] step = step_arr
    with nogil:
        while i < b:
            k = cols[i]
            if not solved:
                for j in range(cap):
                    l[j] = 0.0
                for j in range(m0):
                    l[j] = L[j, i]
                for rep in range(2):  # on the vectors added inside this block
                    for j in range(m0, m):
                        s = 0.0
                        for t in range(d):
                            s += U[t, j] * A[t, i]
                        step[j] = s
                    if m > m0:
                        for t in range(d):
                            s = 0.0
                            for j in range(m0, m):
                                s += U[t, j] * step[j]
                            A[t, i] -= s
                    for j in range(m0, m):
                        l[j] += step[j]
                if m:
                    for j in range(m):
                        if R[j, j] == 0.0:
                            status = _SINGULAR
                            break
                    if status == _SINGULAR:
                        break
                    # y = R^-1 R^-T l; C-ordered R is, for BLAS, its transpose (lower)
                    for j in range(m):
                        Y[k, j] = l[j]
                    n_solve = <int>m
                    dtrsv(&lower, &no_trans, &non_unit, &n_solve, &R[0, 0], &ld, &Y[k, 0], &one)
                    dtrsv(&lower, &trans, &non_unit, &n_solve, &R[0, 0], &ld, &Y[k, 0], &one)
            solved = False
            res2 = 0.0
            for t in range(d):
                res2 += A[t, i] * A[t, i]
            to_blocks = False
            if _joins(res2, sq_norm[k], m < d, tol):
                norm = sqrt(res2)
                l[m] = norm
                for t in range(d):
                    U[t, m] = A[t, i] / norm
                m += 1
                if track and i + 1 < b:
                    # the later variables lose their part along the new vector
                    to_blocks = True
                    for q in range(i + 1, b):
                        s = 0.0
                        for t in range(d):
                            s += U[t, m - 1] * A[t, q]
                        rest2[q] -= s * s
                        if _joins(rest2[q], sq_norm[cols[q]], m < d, tol):
                            to_blocks = False
            for j in range(m):
                C[j, k] = l[j]
            _cholesky_add(R, l, m)
            i += 1
            if to_blocks:
                status = _TO_BLOCKS
                break
    return status, i, m


def qr_factor(double[::1, :] A):
    """``R`` of the QR decomposition of ``A`` (m x p, Fortran order, m >= p), without the GIL.

    LAPACK ``dgeqrf`` in place; the result is ``A``'s leading p x p upper
    triangle as a new Fortran-ordered array (zeros below the diagonal).

    Raises
    ------
    numpy.linalg.LinAlgError
        If LAPACK reports an error.
    """
    cdef int m = <int>A.shape[0], p = <int>A.shape[1], lda = max(1, m), lwork = -1, info = 0
    cdef double query = 0.0
    if m < p:
        raise ValueError(f"qr_factor needs at least as many rows as columns; got {m} x {p}")
    tau = np.empty(max(1, p))
    cdef double[::1] tau_v = tau
    with nogil:
        dgeqrf(&m, &p, &A[0, 0], &lda, &tau_v[0], &query, &lwork, &info)
    lwork = max(1, <int>query)
    work = np.empty(lwork)
    cdef double[::1] work_v = work
    with nogil:
        dgeqrf(&m, &p, &A[0, 0], &lda, &tau_v[0], &work_v[0], &lwork, &info)
    if info != 0:
        raise np.linalg.LinAlgError(f"dgeqrf failed (info={info})")
    return np.asfortranarray(np.triu(np.asarray(A)[:p]))


def fold_rows(double[::1, :] R, double[::1, :] B, bint triangular=False, int block=32):
    """Fold the rows of ``B`` into the triangular factor ``R``, without the GIL.

    On return ``R``'s upper triangle is ``R'`` with ``R'^T R' = R^T R + B^T B``
    (one QR of ``[R; B]`` by LAPACK ``dtpqrt``, Householder reflections as
    ``dgeqrf``'s); ``B`` is overwritten.

    Parameters
    ----------
    R : ndarray, shape (p, p), Fortran order
        Upper triangular.
    B : ndarray, shape (m, p), Fortran order
        Rows to fold in; with ``triangular``, an upper triangular p x p
        factor (another segment's), whose zeros the QR then skips.
    triangular : bool
    block : int
        LAPACK's block size (``nb``), at most p.

    Raises
    ------
    numpy.linalg.LinAlgError
        If LAPACK reports an error.
    """
    cdef int p = <int>R.shape[0], m = <int>B.shape[0], info = 0
    if R.shape[1] != p or B.shape[1] != p:
        raise ValueError(f"fold_rows needs R p x p and B m x p; got {R.shape[0]} x {R.shape[1]} "
                         f"and {B.shape[0]} x {B.shape[1]}")
    if triangular and m != p:
        raise ValueError(f"a triangular B must be p x p; got {m} x {p}")
    if m == 0:
        return
    cdef int l = p if triangular else 0, nb = max(1, min(block, p))
    cdef int lda = max(1, p), ldb = max(1, m), ldt = nb
    T = np.empty((nb, p), order="F")
    work = np.empty(nb * p)
    cdef double[::1, :] T_v = T
    cdef double[::1] work_v = work
    with nogil:
        dtpqrt(&m, &p, &l, &nb, &R[0, 0], &lda, &B[0, 0], &ldb, &T_v[0, 0], &ldt,
               &work_v[0], &info)
    if info != 0:
        raise np.linalg.LinAlgError(f"dtpqrt failed (info={info})")
