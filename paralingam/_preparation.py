"""Preparation of the data that the search and the adjacency step share.

Exact rescaling of the columns by powers of two (no rounding, no underflow
of tiny columns' squares) and the standardised rows with their correlation
matrix. ``paralingam.fit`` (:mod:`paralingam._api`), the CPU search and the
adjacency step (:mod:`paralingam.adjacency`) import it; it imports nothing of
the package.
"""

import numpy as np

# Entries standardised at once (a block of rows, 256 KiB).
STANDARDISE_BLOCK = 1 << 15
# Rows of the data transposed at a time (transposed_copy).
TRANSPOSE_ROWS = 256
# Byte boundary of the standardised rows' start (aligned_empty): one
# cache line, the width of an AVX-512 load. The first row starts there, and
# every row when n_samples is a multiple of 8.
ROW_ALIGN = 64
# Entries of the data read at a time by the adjacency step's means and
# scatter matrix (scatter_rows: 4 MiB of float64, at most a sixteenth of
# the data), and the fewest rows per block, so that each product of a
# block with itself stays an efficient BLAS call.
SCATTER_BLOCK = 1 << 19
SCATTER_MIN_ROWS = 256


def column_exponents(X, absmax=None):
    """Per column ``e`` with ``max |X[:, j]| * 2**-e[j]`` in [0.5, 1).

    Scaling the columns by ``2**-e`` is exact (no rounding), so the search,
    which standardises every variable, gives bit for bit the result it gives
    on ``X``, and least squares gives exactly scaled coefficients; but squares
    of tiny columns (|x| ~ 1e-170) can no longer underflow. The reference
    scales the same way.
    """
    if absmax is None:  # (as_data_matrix's, when given: the same maxima)
        absmax = np.abs(X).max(axis=0, initial=0.0)
    return np.frexp(absmax)[1]


def scale_columns(X, exponents):
    """``np.ldexp(X, -exponents, out=X)``: ``X``, its columns scaled by ``2**-exponents``, in place.

    A product by a power of two is rounded as ``ldexp`` rounds (both are
    exact, or correctly rounded into the subnormals), and runs several times
    faster; ``ldexp`` is left for factors that are not normal float64.
    """
    factors = scale_factors(exponents)
    if factors is not None:
        return np.multiply(X, factors, out=X)
    return np.ldexp(X, -np.asarray(exponents), out=X)


def scale_factors(exponents):
    """``2**-exponents`` as float64, or None where some factor is not a normal float64.

    A product by these factors is rounded as ``np.ldexp(x, -exponents)``
    rounds (:func:`scale_columns`); with None, ``ldexp`` itself must be used.
    """
    exponents = np.asarray(exponents)
    if exponents.size and np.abs(exponents).max() >= 1000:
        return None
    return np.ldexp(1.0, -exponents)


class ScaledData:
    """Data with column ``j`` multiplied by ``2**-exponents[j]``, without holding the product.

    The product is formed block by block where it is read: the standardised
    rows (:func:`standardise_rows`), the rounding noise
    (``paralingam.search.policy.noise_and_std``), the GPU upload and least
    squares (:func:`float_rows`) read it this way, and :meth:`copy` makes
    the whole array when a step needs it (the adaptive lasso).
    Every value is the one of ``copy()``: the product by a power of two does
    not depend on the layout or the block.

    Parameters
    ----------
    source : ndarray, shape (n_samples, n_features)
        Checked float data (float64 or narrower), any layout; read only.
    exponents : ndarray of int, shape (n_features,)
    """

    def __init__(self, source, exponents):
        self.source = source
        self.exponents = np.asarray(exponents)
        self.factors = scale_factors(self.exponents)
        self.shape = source.shape
        self.size = source.size
        self.nbytes = source.size * 8  # of the float64 product
        self.dtype = np.dtype(np.float64)

    def rows(self, r0, r1, j0=0, j1=None, out=None):
        """The scaled rows ``r0:r1`` of columns ``j0:j1``, float64, C-ordered (``out`` if given)."""
        j1 = self.shape[1] if j1 is None else j1
        block = self.source[r0:r1, j0:j1]
        if out is None:
            out = np.empty(block.shape)
        if self.factors is not None:
            return np.multiply(block, self.factors[j0:j1], out=out)
        out[...] = block
        return np.ldexp(out, -self.exponents[j0:j1], out=out)

    def copy(self, by_rows=None):
        """The whole product: a new C-ordered float64 array.

        ``by_rows(work, source)``, where given, runs ``work(r0, r1)`` over
        ranges of rows that cover them (``_validation._by_rows``: on threads
        for large data); by default one range.
        """
        data = np.empty(self.shape)

        def work(r0, r1):
            self.rows(r0, r1, out=data[r0:r1])

        if by_rows is None:
            work(0, self.shape[0])
        else:
            by_rows(work, self.source)
        return data

    def transposed(self):
        """The product transposed (one variable per row): :func:`transposed_copy` of :meth:`copy`.

        A C-ordered float64 source, or a Fortran-ordered one, is transposed
        first (by :func:`transposed_copy`'s blocks, or as one contiguous
        copy) and each row then scaled in place: a power of two scales every
        value exactly, in either order, and a contiguous row is scaled
        faster than the blocks of the transpose. Other sources (narrower
        C-ordered floats, strided views), which ``transposed_copy`` would
        copy in one pass against their order, are scaled block by block
        while their rows are in the cache.
        """
        src = self.source
        if not ((src.dtype == np.float64 and src.flags.c_contiguous) or src.flags.f_contiguous):
            n, p = self.shape
            buf = np.empty((min(n, TRANSPOSE_ROWS), p))
            return _transposed_by_blocks(n, p, lambda r0, r1: self.rows(r0, r1, out=buf[:r1 - r0]))
        Z = transposed_copy(src)
        if self.factors is not None:
            Z *= self.factors[:, None]
        else:
            np.ldexp(Z, -self.exponents[:, None], out=Z)
        return Z


def scatter_rows(n, p):
    """Rows per block of the adjacency step's pass over ``n x p`` data (``adjacency._common``).

    All rows at once for data of up to ``SCATTER_BLOCK`` entries; else about
    ``SCATTER_BLOCK`` entries, no more than a sixteenth of the rows, and no
    fewer than ``SCATTER_MIN_ROWS`` rows. It depends on the shape only, so
    that every layout and dtype of the same values gives the same sums.
    """
    if n * p <= SCATTER_BLOCK:
        return max(n, 1)
    return min(n, max(SCATTER_MIN_ROWS, min(SCATTER_BLOCK // max(p, 1), -(-n // 16))))


def float_rows(X, r0, r1, out=None, j0=0, j1=None):
    """Rows ``r0:r1`` of columns ``j0:j1`` of ``X`` (an array or :class:`ScaledData`) as float64.

    A float64 array's rows are a view unless ``out`` is given; other
    arrays' are converted (exactly: float32 and narrower widen without
    rounding), a ScaledData's scaled (:meth:`ScaledData.rows`).
    """
    if isinstance(X, ScaledData):
        return X.rows(r0, r1, j0, j1, out=out)
    block = X[r0:r1, j0:j1]
    if out is None:
        return block if block.dtype == np.float64 else block.astype(np.float64)
    np.copyto(out, block, casting="safe")
    return out


def column_sums(X, rows, j0=0, j1=None):
    """Sums over the rows of columns ``j0:j1`` of ``X`` (an array of any layout, or a :class:`ScaledData`).

    Read as float64 blocks of ``rows`` rows and added row after row, each
    block's sum starting from the previous total: the order in which numpy
    sums the first axis of a C-ordered float64 array of two or more columns
    (a single column it sums pairwise), so that the same values give the
    same bits in any form and with any block size.
    """
    n = X.shape[0]
    k = (X.shape[1] if j1 is None else j1) - j0
    buf = np.empty((min(rows, n) + 1, k))
    total = np.zeros(k)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        if r0 == 0:
            total = np.add.reduce(float_rows(X, r0, r1, buf[:r1 - r0], j0, j1), axis=0)
        else:
            buf[0] = total
            float_rows(X, r0, r1, buf[1:r1 - r0 + 1], j0, j1)
            total = np.add.reduce(buf[:r1 - r0 + 1], axis=0)
    return total


def standardise_rows(X):
    """Population-standardised copy of ``X`` with one variable per row.

    ``X``: an array, or :class:`ScaledData` (the rows are then made from
    its source, scaled on the way, with no copy of the whole product).

    Returns
    -------
    Z : ndarray, shape (n_features, n_samples), C-contiguous float64
    cov : ndarray, shape (n_features, n_features)
        ``Z @ Z.T / n``: the correlation matrix, unit diagonal.
    """
    Z = X.transposed() if isinstance(X, ScaledData) else transposed_copy(X)
    # Centre, square and scale by blocks of rows, each block while it is in
    # the cache: numpy computes each contiguous row's mean and sum of squares
    # alone, so every row gets the numbers the whole-array expressions give,
    # without their n x p temporary.
    rows = max(1, STANDARDISE_BLOCK // max(1, Z.shape[1]))
    for r0 in range(0, Z.shape[0], rows):
        block = Z[r0:r0 + rows]
        block -= block.mean(axis=1, keepdims=True)
        block /= np.sqrt((block * block).mean(axis=1, keepdims=True))
    cov = covariance_of_rows(Z)
    return Z, cov


def transposed_copy(X):
    """``X.T`` as a new C-contiguous float64 array (one variable per row).

    A C-ordered float64 ``X`` is copied by blocks of ``TRANSPOSE_ROWS`` rows:
    numpy's copy of the whole ``X.T`` reads ``X`` against its order, at
    several times the cost of a plain copy on tall data, while a block's
    rows stay in the cache. Other input is copied whole (an explicit
    copy: for a Fortran-ordered X, X.T is already C-contiguous and
    ascontiguousarray would return a view).
    """
    if X.dtype != np.float64 or not X.flags.c_contiguous or X.ndim != 2 or X.shape[1] < 2:
        Z = aligned_empty(X.shape[::-1])
        np.copyto(Z, X.T, casting="safe")
        return Z
    n, p = X.shape
    return _transposed_by_blocks(n, p, lambda r0, r1: X[r0:r1])


def _transposed_by_blocks(n, p, rows):
    """A new (p, n) array holding ``rows(r0, r1)`` (float64 rows of n x p data) transposed.

    ``TRANSPOSE_ROWS`` rows at a time, so that each block is read while it
    is in the cache (:func:`transposed_copy`).
    """
    Z = aligned_empty((p, n))
    for r0 in range(0, n, TRANSPOSE_ROWS):
        Z[:, r0:r0 + TRANSPOSE_ROWS] = rows(r0, min(n, r0 + TRANSPOSE_ROWS)).T
    return Z


def aligned_empty(shape):
    """An uninitialised C-contiguous float64 array whose data start on a ``ROW_ALIGN``-byte boundary.

    The CPU search reads the standardised rows with 64-byte vector loads;
    numpy's large arrays start where the allocator puts them (16 bytes past
    a page, typically), so with a row length that is a multiple of 8 every
    load would straddle two cache lines (other lengths misalign most rows
    whatever the start).
    """
    count = int(np.prod(shape))
    raw = np.empty(count + ROW_ALIGN // 8, dtype=np.float64)
    skip = (-raw.ctypes.data % ROW_ALIGN) // 8
    return raw[skip:skip + count].reshape(shape)


def covariance_of_rows(Z):
    """``Z @ Z.T / n`` with an exact unit diagonal, symmetric."""
    cov = Z @ Z.T / Z.shape[1]
    cov = 0.5 * (cov + cov.T)
    np.fill_diagonal(cov, 1.0)
    return cov
