# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""A square matrix's rows and columns put in an order, and back, compiled.

The adjacency step works in causal order: the covariance comes in the
data's order and the edges go back to it. ``permuted`` and ``placed`` make
each row of the result in one pass over a row of the source, where numpy's
indexing of both axes (``M[np.ix_(order, order)]``) takes several times as
long, entry by entry. (A module of its own: ``_linalg`` loads scipy.linalg,
which a plain fit does not import.)
"""

import numpy as np


cdef int _check_order(const Py_ssize_t[::1] order, Py_ssize_t p) except -1:
    """ValueError unless every entry of ``order`` indexes one of ``p`` rows."""
    cdef Py_ssize_t i
    for i in range(order.shape[0]):
        if order[i] < 0 or order[i] >= p:
            raise ValueError(f"order holds {order[i]}, not a row of a {p} x {p} matrix")
    return 0


def permuted(const double[:, ::1] M, const Py_ssize_t[::1] order):
    """``M[np.ix_(order, order)]``: a new C-ordered array of the same values, without the GIL.

    Parameters
    ----------
    M : ndarray of float64, shape (p, p), C-ordered
    order : ndarray of intp, shape (k,)
        Indices of rows (and columns) of ``M``.

    Returns
    -------
    ndarray, shape (k, k)
    """
    cdef Py_ssize_t p = M.shape[0], k = order.shape[0], i, j
    if M.shape[1] != p:
        raise ValueError(f"permuted takes a square matrix; got {M.shape[0]} x {M.shape[1]}")
    _check_order(order, p)
    out = np.empty((k, k))
    cdef double[:, ::1] o = out
    cdef const double* row
    with nogil:
        for i in range(k):
            row = &M[order[i], 0]
            for j in range(k):
                o[i, j] = row[order[j]]
    return out


def placed(const double[:, ::1] A, const Py_ssize_t[::1] order, Py_ssize_t p):
    """A p x p array of zeros with ``out[np.ix_(order, order)] = A``, without the GIL.

    Parameters
    ----------
    A : ndarray of float64, shape (k, k), C-ordered
    order : ndarray of intp, shape (k,)
        Distinct indices below ``p`` (a repeated index keeps its last entry,
        as numpy's assignment does).
    p : int

    Returns
    -------
    ndarray, shape (p, p)
    """
    cdef Py_ssize_t k = order.shape[0], i, j
    if A.shape[0] != k or A.shape[1] != k:
        raise ValueError(f"placed takes a {k} x {k} matrix for {k} indices; "
                         f"got {A.shape[0]} x {A.shape[1]}")
    _check_order(order, p)
    out = np.zeros((p, p))
    cdef double[:, ::1] o = out
    cdef double* row
    with nogil:
        for i in range(k):
            row = &o[order[i], 0]
            for j in range(k):
                row[order[j]] = A[i, j]
    return out
