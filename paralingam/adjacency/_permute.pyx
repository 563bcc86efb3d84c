# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The adjacency step's passes over square matrices, compiled and threaded.

The adjacency step works in causal order: the covariance comes in the
data's order and the edges go back to it. ``permuted`` and ``placed`` make
each row of the result in one pass over a row of the source, where numpy's
indexing of both axes (``M[np.ix_(order, order)]``) takes several times as
long, entry by entry. ``scaled_products``, ``permuted_gram`` and
``scaled_back`` are the elementwise steps around them (the scatter matrix
from the search's correlations, the standardised Gram matrix, the edges on
the data's scale), each in one pass. Every entry is computed as numpy
computes it (the same operations in the same order, no contraction), so
the results are numpy's bits; the rows are split over ``n_threads``
OpenMP threads. (A module of its own: ``_linalg`` loads scipy.linalg,
which a plain fit does not import.)
"""

import numpy as np

from cython.parallel cimport prange
from libc.math cimport isfinite, ldexp
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy


cdef int _check_order(const Py_ssize_t[::1] order, Py_ssize_t p) except -1:
    """ValueError unless every entry of ``order`` indexes one of ``p`` rows."""
    cdef Py_ssize_t i
    for i in range(order.shape[0]):
        if order[i] < 0 or order[i] >= p:
            raise ValueError(f"order holds {order[i]}, not a row of a {p} x {p} matrix")
    return 0


cdef bint _distinct(const Py_ssize_t[::1] order, Py_ssize_t p) except -1:
    """Whether the entries of ``order`` (each below ``p``: ``_check_order``) are distinct.

    (One pass with a mark per row; ``np.unique`` would sort.)
    """
    seen_arr = np.zeros(p, dtype=np.uint8)
    cdef unsigned char[::1] seen = seen_arr
    cdef Py_ssize_t i
    for i in range(order.shape[0]):
        if seen[order[i]]:
            return False
        seen[order[i]] = 1
    return True


cdef int _check_square(Py_ssize_t rows, Py_ssize_t columns, str what) except -1:
    if rows != columns:
        raise ValueError(f"{what} takes a square matrix; got {rows} x {columns}")
    return 0


cdef int _check_length(Py_ssize_t length, Py_ssize_t p, str name) except -1:
    if length != p:
        raise ValueError(f"{name} has {length} entries for a {p} x {p} matrix")
    return 0


def permuted(const double[:, ::1] M, const Py_ssize_t[::1] order, int n_threads=1):
    """``M[np.ix_(order, order)]``: a new C-ordered array of the same values, without the GIL.

    Parameters
    ----------
    M : ndarray of float64, shape (p, p), C-ordered
    order : ndarray of intp, shape (k,)
        Indices of rows (and columns) of ``M``.
    n_threads : int
        OpenMP threads over the rows.

    Returns
    -------
    ndarray, shape (k, k)
    """
    cdef Py_ssize_t p = M.shape[0], k = order.shape[0], i, j
    _check_square(M.shape[0], M.shape[1], "permuted")
    _check_order(order, p)
    out = np.empty((k, k))
    cdef double[:, ::1] o = out
    cdef const double* row
    for i in prange(k, nogil=True, schedule="static", num_threads=max(n_threads, 1)):
        row = &M[order[i], 0]
        for j in range(k):
            o[i, j] = row[order[j]]
    return out


def permuted_gram(const double[:, ::1] S, const Py_ssize_t[::1] order,
                  const double[::1] std, int n_threads=1):
    """``S`` in ``order`` and the Gram matrix of the standardised variables, in one pass.

    Parameters
    ----------
    S : ndarray of float64, shape (p, p), C-ordered
        A scatter matrix in the data's order.
    order : ndarray of intp, shape (k,)
    std : ndarray of float64, shape (p,)
        The columns' scales, in the data's order.
    n_threads : int

    Returns
    -------
    S_ord : ndarray, shape (k, k)
        ``S[np.ix_(order, order)]``.
    G_ord : ndarray, shape (k, k)
        ``S_ord / np.outer(std[order], std[order])`` (numpy's bits: each
        entry divided by the product of its two scales).
    """
    cdef Py_ssize_t p = S.shape[0], k = order.shape[0], i, j
    cdef double si, s
    _check_square(S.shape[0], S.shape[1], "permuted_gram")
    _check_length(std.shape[0], p, "std")
    _check_order(order, p)
    S_ord, G_ord = np.empty((k, k)), np.empty((k, k))
    cdef double[:, ::1] so = S_ord, go = G_ord
    cdef const double* row
    for i in prange(k, nogil=True, schedule="static", num_threads=max(n_threads, 1)):
        row = &S[order[i], 0]
        si = std[order[i]]
        for j in range(k):
            s = row[order[j]]
            so[i, j] = s
            go[i, j] = s / (si * std[order[j]])
    return S_ord, G_ord


def scaled_products(const double[:, ::1] C, double n, const double[::1] sd, int n_threads=1):
    """``n * C * np.outer(sd, sd)`` (numpy's bits: ``(C[i, j] * n) * (sd[i] * sd[j])``).

    The scatter matrix of the rescaled data from the search's correlation
    matrix ``C`` and the columns' standard deviations ``sd``; an entry past
    float64 is infinite, as numpy's.

    Returns
    -------
    ndarray, shape (p, p)
    """
    cdef Py_ssize_t p = C.shape[0], i, j
    cdef double si
    _check_square(C.shape[0], C.shape[1], "scaled_products")
    _check_length(sd.shape[0], p, "sd")
    out = np.empty((p, p))
    cdef double[:, ::1] o = out
    for i in prange(p, nogil=True, schedule="static", num_threads=max(n_threads, 1)):
        si = sd[i]
        for j in range(p):
            o[i, j] = (C[i, j] * n) * (si * sd[j])
    return out


def placed(const double[:, ::1] A, const Py_ssize_t[::1] order, Py_ssize_t p,
           int n_threads=1):
    """A p x p array of zeros with ``out[np.ix_(order, order)] = A``, without the GIL.

    Parameters
    ----------
    A : ndarray of float64, shape (k, k), C-ordered
    order : ndarray of intp, shape (k,)
        Distinct indices below ``p`` (a repeated index keeps its last entry,
        as numpy's assignment does; it is then placed on one thread).
    p : int
    n_threads : int

    Returns
    -------
    ndarray, shape (p, p)
    """
    cdef Py_ssize_t k = order.shape[0], i, j
    if A.shape[0] != k or A.shape[1] != k:
        raise ValueError(f"placed takes a {k} x {k} matrix for {k} indices; "
                         f"got {A.shape[0]} x {A.shape[1]}")
    _check_order(order, p)
    if not _distinct(order, p):
        n_threads = 1  # two threads would write one row: numpy's last-wins needs one
    out = np.zeros((p, p))
    cdef double[:, ::1] o = out
    cdef double* row
    for i in prange(k, nogil=True, schedule="static", num_threads=max(n_threads, 1)):
        row = &o[order[i], 0]
        for j in range(k):
            row[order[j]] = A[i, j]
    return out


cdef inline double _exact_ldexp(double v, int d) noexcept nogil:
    """``ldexp(v, d)``: the exponent field moved by ``d`` where ``v`` and the result are
    normal (then exact, as ldexp), zero as it is, else libm's ``ldexp`` (subnormals,
    overflow, inf and NaN), which costs several times a product."""
    cdef uint64_t bits
    cdef int e
    memcpy(&bits, &v, 8)
    if (bits << 1) == 0:
        return v  # (+-0)
    e = <int>((bits >> 52) & 0x7ff)
    if e != 0 and e != 0x7ff and 0 < e + d < 0x7ff:
        bits += (<uint64_t>(<int64_t>d)) << 52  # (modulo 2**64: a negative d subtracts)
        memcpy(&v, &bits, 8)
        return v
    return ldexp(v, d)


cdef inline int _clamped(long long d) noexcept nogil:
    """``d`` within +-4000: a difference past that scales any double to 0 or inf as itself,
    and clamped it stays an int."""
    return <int>(4000 if d > 4000 else (-4000 if d < -4000 else d))


cdef Py_ssize_t _product_row(const double* b, double* o, const double* factors, double fi,
                             Py_ssize_t p) noexcept nogil:
    """``o[j] = b[j] * (fi * factors[j])`` for a row whose every ``fi * factors[j]`` is a
    normal power of two; returns how many results are not finite."""
    cdef Py_ssize_t j, bad = 0
    cdef double v
    for j in range(p):
        v = b[j] * (fi * factors[j])
        o[j] = v
        bad += not isfinite(v)
    return bad


def scaled_back(const double[:, ::1] B, const int[::1] exponents, int n_threads=1):
    """``np.ldexp(B, exponents[:, None] - exponents[None, :])`` and whether it is all finite.

    ``ldexp`` is exact (or rounds once into the subnormals, as numpy's), and
    so is a product by a power of two that is a normal number: a row whose
    every factor ``2**(e_i - e_j)`` is one (``2**e_i`` times ``2**-e_j``,
    each normal) is scaled by products, which the compiler vectorises.
    Other rows (scales more than float64's normal range apart) go by
    :func:`_exact_ldexp`. Either way the bits are numpy's.

    Returns
    -------
    out : ndarray, shape (p, p)
    finite : bool
        Whether every entry of ``out`` is finite.
    """
    cdef Py_ssize_t p = B.shape[0], i, j
    cdef long long ei, lo = 0, hi = -1
    cdef double v
    cdef Py_ssize_t bad = 0
    _check_square(B.shape[0], B.shape[1], "scaled_back")
    _check_length(exponents.shape[0], p, "exponents")
    e = np.asarray(exponents, dtype=np.int64)
    factors_arr = np.ones(1)
    if p and -int(e.max()) >= -1022 and -int(e.min()) <= 1023:  # every 2**-e_j normal
        factors_arr = np.ldexp(1.0, -e)  # (made only then: no overflow or underflow flag)
        # rows whose every 2**(e_i - e_j) is normal, 2**e_i itself normal
        lo = max(int(e.max()) - 1022, -1022)
        hi = min(int(e.min()) + 1023, 1023)
    cdef const double[::1] factors = factors_arr
    out = np.empty((p, p))
    cdef double[:, ::1] o = out
    for i in prange(p, nogil=True, schedule="static", num_threads=max(n_threads, 1)):
        ei = exponents[i]
        if lo <= ei <= hi:
            bad += _product_row(&B[i, 0], &o[i, 0], &factors[0], ldexp(1.0, <int>ei), p)
        else:
            for j in range(p):
                v = _exact_ldexp(B[i, j], _clamped(ei - exponents[j]))
                o[i, j] = v
                if not isfinite(v):
                    bad += 1
    return out, bad == 0
