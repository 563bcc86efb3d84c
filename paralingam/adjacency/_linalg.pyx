# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled linear-algebra steps of the adjacency step that numpy and scipy lack.

``cholesky_add``: the rank-one update ``R^T R + x x^T`` of a triangular factor
by Givens rotations, O(m^2) where refactorising costs O(m^3).
"""

from libc.math cimport hypot


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
