"""Names every route of the adjacency step shares, and the checks of its input.

The public functions (:func:`~paralingam.adjacency.estimate_adjacency`,
:func:`~paralingam.adjacency.ols_adjacency`,
:func:`~paralingam.adjacency.adaptive_lasso_adjacency`) check their input as
``paralingam.fit`` does (a 2-D table of finite numbers; constant columns are
allowed here) and that ``causal_order`` lists every column once, with errors
that name the problem; ``fit`` and the estimator call the private ones on
checked data. Like ``fit``, they regress on columns rescaled by powers of two
(exactly, see :func:`_column_exponents`) and scale the coefficients back
(:func:`_scaled_back`), so that tiny data (``|x|`` ~ 1e-170, whose squares
underflow) give the coefficients of the same data at ordinary scale.
"""

import numpy as np

from .._preparation import column_exponents, column_sums, float_rows, scale_columns, scatter_rows
from .._validation import (MAX_THREADS, _list, _name, as_data_matrix, check_int, check_order,
                           default_threads)


ADJACENCY_METHODS = ("adaptive_lasso", "ols")

# The public functions rescale columns within 2**SHARED_SCALE_SPAN of the
# largest by its power of two (see _column_exponents): after scaling, their
# centred values (a spread of at least 8 eps of their maximum, else they are
# constant) stay above 2**-450 and their squares above 2**-900, clear of
# float64's smallest normal number, 2**-1022.
SHARED_SCALE_SPAN = 400

# Backends of the adjacency step: "cuda" factorises the covariance (least
# squares, the adaptive lasso's weights) and runs the LARS paths on the GPU.
ADJACENCY_BACKENDS = (None, "cpu", "cuda")

# Least-squares systems whose Cholesky pivot keeps no more than this fraction
# of its diagonal (1 - R^2 of a predictor on the others) are solved as
# minimum-norm least squares instead: the same bound as the order search's
# collinear_tol (paralingam.search.policy).
SINGULAR_TOL = 1e-10

_EPS = np.finfo(np.float64).eps


class AdjacencyWarning(UserWarning):
    """A regression of the adjacency step was numerically degenerate."""


def _checked_inputs(X, causal_order, scatter, n_threads=None):
    """Checked input of the public functions, with ``X``'s columns rescaled.

    The public functions take user input; ``paralingam.fit`` and the
    estimator pass data they have already checked (and rescaled) to the
    private ones. Constant columns are accepted here: as predictors they get
    coefficient zero, as targets a zero row. ``n_threads``, where given, must
    be an integer in 1..``MAX_THREADS``.

    Returns
    -------
    data : ndarray of float64
        ``X`` with column ``j`` scaled by ``2**-exponents[j]`` (exactly; see
        :func:`_column_exponents`): the scatter matrix of columns ~1e-170
        would underflow to zero, and with it every coefficient.
    order : ndarray of intp
        ``causal_order``, a permutation of the columns.
    scatter : ndarray or None
        The given scatter matrix, rescaled as ``data``.
    exponents : ndarray of int
        For :func:`_scaled_back`.
    names : list of str or None
        The column names, for messages.
    """
    if n_threads is not None:  # 0 or -1 would be OpenMP's default, 10**6 a crash
        check_int("n_threads", n_threads, high=MAX_THREADS)
    data, names = as_data_matrix(X, allow_constant=True)
    order = check_order(causal_order, data.shape[1])
    if scatter is not None:
        scatter = _checked_scatter(scatter, data.shape[1])
    exponents = _column_exponents(data)
    data = scale_columns(data, exponents)  # as_data_matrix's copy: ours to change
    if scatter is not None:
        scatter = np.ldexp(scatter, -(exponents[:, None] + exponents[None, :]))
    return data, order, scatter, exponents, names


def _checked_scatter(scatter, p):
    """A given scatter matrix as float64, checked to be (p, p) and finite."""
    try:
        S = np.asarray(scatter, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"scatter must be a numeric (n_features, n_features) matrix: "
                         f"{exc}") from None
    if S.shape != (p, p):
        raise ValueError(f"scatter must have shape (n_features, n_features) = "
                         f"({p}, {p}); got {S.shape}")
    # NaN reached LAPACK: a LinAlgError, and a "DLASCL" line on stderr
    bad = ~np.isfinite(S)
    if bad.any():
        where = [f"[{i}, {j}] = {float(S[i, j])!r}" for i, j in zip(*np.nonzero(bad))]
        raise ValueError(f"scatter must hold finite numbers; got NaN or infinite entries at "
                         f"{_list(where)}")
    return S


def _column_exponents(X):
    """Per column ``e``: ``X[:, j] * 2**-e[j]`` is ``X`` rescaled without underflow.

    Scaling by powers of two is exact. ``paralingam.fit`` scales every column
    to a maximum in [0.5, 1); here all columns within
    ``2**SHARED_SCALE_SPAN`` of the largest share its exponent, because one
    power of two for all changes no least-squares solution, while separate
    ones change the minimum-norm rows of rank-deficient (wide) data, whose
    norm depends on the columns' relative scales and which
    :func:`ols_adjacency` matches to ``numpy.linalg.lstsq`` on the data. Only
    smaller columns, whose squares would underflow, get their own exponent.
    """
    own = column_exponents(X)  # max |X[:, j]| * 2**-own[j] in [0.5, 1)
    if own.size == 0:
        return own
    shared = own.max()
    return np.where(own >= shared - SHARED_SCALE_SPAN, shared, own)


# Square matrices of at least this many entries (p=512) are passed over on
# all the step's threads (paralingam.adjacency._permute); smaller ones on
# one. At p=1000 the threads gained on a 16-core H200 host and on the 2-core
# VM; at p=300 they gained nothing on the H200 host and lost on the VM, beside
# the other libraries' spinning workers (docs/design/adjacency.rst, "Passes
# over p x p matrices").
THREADED_ENTRIES = 1 << 18


def _pass_threads(p, n_threads=None):
    """OpenMP threads of a pass over a ``p x p`` matrix: the step's ``n_threads`` (default
    :func:`~paralingam._validation.default_threads`) from :data:`THREADED_ENTRIES` entries on."""
    return (n_threads or default_threads()) if p * p >= THREADED_ENTRIES else 1


def _permuted(M, order, n_threads=None):
    """``M[np.ix_(order, order)]`` (the same values, C-ordered), several times faster.

    (:func:`paralingam.adjacency._permute.permuted`: a pass over rows, where
    numpy's indexing of both axes goes entry by entry.) ``n_threads``: the
    step's threads (:func:`_pass_threads`), as for the passes below.
    """
    from ._permute import permuted

    return permuted(np.ascontiguousarray(M, dtype=np.float64),
                    np.ascontiguousarray(order, dtype=np.intp),
                    _pass_threads(len(order), n_threads))


def _permuted_gram(S, order, std, n_threads=None):
    """``(_permuted(S, order), S_ord / np.outer(std[order], std[order]))`` in one pass (the
    same bits): the scatter matrix in causal order and its standardised Gram matrix."""
    from ._permute import permuted_gram

    return permuted_gram(np.ascontiguousarray(S, dtype=np.float64),
                         np.ascontiguousarray(order, dtype=np.intp),
                         np.ascontiguousarray(std, dtype=np.float64),
                         _pass_threads(len(order), n_threads))


def _residual_sums(gram, rows, first=0):
    """``yy - g.b`` of each variable from position ``first`` on, ``rows`` its regression on its
    predecessors: residual sums of squares in ``gram``'s scale (a Gram or covariance matrix in
    causal order)."""
    return np.diag(gram)[first:] - np.einsum("ij,ij->i", rows, gram[first:])


def _scaled_products(C, n, sd, n_threads=None):
    """``n * C * np.outer(sd, sd)`` (the same bits; an entry past float64 is infinite)."""
    from ._permute import scaled_products

    return scaled_products(np.ascontiguousarray(C, dtype=np.float64), float(n),
                           np.ascontiguousarray(sd, dtype=np.float64),
                           _pass_threads(len(sd), n_threads))


def _placed(A, order, p, n_threads=None):
    """A ``p x p`` array of zeros with ``A`` at ``np.ix_(order, order)``: :func:`_permuted` undone."""
    from ._permute import placed

    return placed(np.ascontiguousarray(A, dtype=np.float64),
                  np.ascontiguousarray(order, dtype=np.intp), p, _pass_threads(p, n_threads))


def _scaled_back(B, exponents, names, n_threads=None):
    """Coefficients on rescaled columns (:func:`_checked_inputs`) on the data's scale.

    Each entry ``B[i, j] * 2**(e_i - e_j)`` with the bits of ``np.ldexp``
    (exact, or one rounding into the subnormals), in one threaded pass
    (:func:`paralingam.adjacency._permute.scaled_back`: products where the
    factors are normal numbers, else the exponent field and ``ldexp``).

    Raises
    ------
    ValueError
        When a coefficient exceeds float64 (columns whose scales are more
        than float64's range apart), naming the two columns.
    """
    from ._permute import scaled_back

    B, finite = scaled_back(np.ascontiguousarray(B, dtype=np.float64),
                            np.ascontiguousarray(exponents, dtype=np.intc),
                            _pass_threads(len(B), n_threads))
    if not finite:
        i, j = np.argwhere(~np.isfinite(B))[0]
        raise ValueError(
            f"the edge weight of {_name(names, j)} on {_name(names, i)} exceeds float64: their "
            "scales differ by more than float64's range; rescale them")
    return B


def _scatter(X):
    """Column means and the scatter matrix ``Xc.T @ Xc`` of the centred data.

    With a centred copy of the whole data (the adaptive lasso's route);
    least squares uses :func:`_scatter_by_blocks`.
    """
    mean = X.mean(axis=0)
    Xc = X - mean
    S = Xc.T @ Xc
    return mean, 0.5 * (S + S.T)


def _column_means(X):
    """The columns' means of ``X`` (an array or a :class:`~paralingam._preparation.ScaledData`).

    A C-ordered float64 array's are ``X.mean(axis=0)``; other forms' are
    summed by blocks of rows in numpy's order (:func:`~paralingam._preparation.column_sums`),
    so that the same values give the same means in any form (a ScaledData
    those of its ``copy()``, without the copy; tests/test_adjacency_memory.py
    checks the bits).
    """
    if isinstance(X, np.ndarray) and X.dtype == np.float64 and X.flags.c_contiguous:
        return X.mean(axis=0)
    n, p = X.shape
    return column_sums(X, scatter_rows(n, p)) / n


def _scatter_by_blocks(X, mean=None):
    """Column means and the scatter matrix ``Xc.T @ Xc``, without a centred copy of the data.

    ``X``: an array (any float dtype and layout) or a
    :class:`~paralingam._preparation.ScaledData`; ``mean``: its
    :func:`_column_means`, when already known. The rows are read in
    blocks of :func:`~paralingam._preparation.scatter_rows`, centred into
    one buffer and their products summed: the step holds one block besides
    the data (:func:`_scatter`'s centred copy was as large as the data).
    Every centred value is that of ``X - mean``; only the order of the
    products' sums differs, so ``S`` is :func:`_scatter`'s to rounding.
    """
    n, p = X.shape
    rows = scatter_rows(n, p)
    if mean is None and rows < n:
        mean = _column_means(X)
    buf = np.empty((min(rows, n), p))
    S = np.zeros((p, p))
    for r0 in range(0, n, rows):
        block = float_rows(X, r0, min(n, r0 + rows), out=buf[:min(n, r0 + rows) - r0])
        if mean is None:
            # one block: its sums are column_sums' (its first block's), so
            # that the data are read once
            mean = np.add.reduce(block, axis=0) / n
        block -= mean
        S += block.T @ block  # numpy's symmetric product (syrk): exactly symmetric
    return mean, 0.5 * (S + S.T)
