# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled linear-algebra steps of the adjacency step that numpy and scipy lack.

``cholesky_add``: the rank-one update ``R^T R + x x^T`` of a triangular factor
by Givens rotations, O(m^2) where refactorising costs O(m^3).

``qr_factor`` and ``fold_rows``: LAPACK's ``dgeqrf`` and ``dtpqrt`` (scipy's,
through ``scipy.linalg.cython_lapack``) without the GIL, so that the streaming
QR of the data's row segments runs on several threads at once, and the one
stream beside the scatter matrix (scipy's Python wrappers hold the GIL for
the whole call).
"""

import numpy as np

from libc.math cimport hypot
from scipy.linalg.cython_lapack cimport dgeqrf, dtpqrt


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
    cdef Py_ssize_t i, j
    cdef double r, c, s, a, b
    with nogil:
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
