"""Least squares of every variable on the variables before it in the causal order.

All rows come from one Cholesky factorisation of the covariance in causal
order (:func:`_ols_on_predecessors`), on the GPU where asked
(:func:`_least_squares_factor`); past the first dependent variable, from the
data (:mod:`._min_norm`); under prior knowledge, from the whole order's
inverse factor or a factorisation per restricted target (:mod:`._prior`).
"""

import threading
import warnings

import numpy as np

from .. import _blas, _memory
from .._validation import user_stacklevel
from .._preparation import float_rows
from ._common import (ADJACENCY_BACKENDS, SINGULAR_TOL, _EPS, _checked_inputs, _column_means,
                      _permuted, _placed, _scaled_back, _scatter_by_blocks)
from ._min_norm import _min_norm_rows
from ._prior import SCHUR_MAX_EXCLUDED, _inverse_factor, _row_without, allowed_predictors

# After a CUDA search, the Cholesky rows of the least squares run on the GPU
# from this many variables on (kernels/adjacency.cu); below it the host's
# LAPACK factor of the small covariance takes less than the GPU's launches,
# copies and allocations (docs/design/adjacency.rst, "Small covariances on
# the host").
CUDA_OLS_MIN_FEATURES = 256

# Rows per step of the streaming QR of the data (_centred_triangular_factor):
# a chunk of up to a few hundred columns stays in cache.
TSQR_CHUNK = 512

# The streaming QR splits the rows into segments, one thread each, and
# combines their factors pairwise (_centred_triangular_factor). A segment has
# at least TSQR_SEGMENT_ROWS rows and twice as many rows as columns: combining
# two p x p factors costs about 2p^3/3 flops, a fifth of the QR of a segment
# of 2p rows (about 10p^3/3). The number of segments depends on the data's
# shape only, never on the threads, so the factor has the same bits on any
# machine's core count.
TSQR_SEGMENT_ROWS = 1024
TSQR_MAX_SEGMENTS = 16


def ols_adjacency(X, causal_order, *, prior_knowledge=None, backend=None, scatter=None):
    """Least-squares regression of each variable on all earlier ones.

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features)
    causal_order : sequence of int
    prior_knowledge : array-like, shape (n_features, n_features), optional
        ``prior_knowledge[i, j] == 0`` removes ``j`` from the predictors of
        ``i`` (lingam's convention).
    backend : {None, "cpu", "cuda"}
        ``"cuda"``: from ``CUDA_OLS_MIN_FEATURES`` variables on, the
        Cholesky factor and the rows come from the GPU
        (``kernels/adjacency.cu``); when a pivot is singular to
        ``SINGULAR_TOL``, or the GPU cannot run (a warning says why), the
        host computes them. The O(n p^2) part, the scatter matrix, can come
        from the search through ``scatter``.
    scatter : ndarray, shape (n_features, n_features), optional
        The scatter matrix ``Xc.T @ Xc`` of the centred data when it is
        already known (``paralingam.fit`` passes the one it makes from the
        search's correlation matrix); by default it is computed from ``X``.

    Returns
    -------
    B : ndarray, shape (n_features, n_features)
        ``B[i, j]`` the coefficient of column ``j`` in the regression of
        column ``i``; zero where ``j`` is not before ``i``.

    Notes
    -----
    With the covariance in causal order factorised as ``L D L^T`` (unit lower
    ``L``), the regressions of all variables on their predecessors are
    ``I - L^{-1}``: one Cholesky factorisation gives every row. Rank-deficient
    data (a variable that is an exact combination of earlier ones: its pivot
    keeps no more than ``SINGULAR_TOL`` of its variance, as with wide data
    after n - 1 variables) has no Cholesky factor; then each row is the
    minimum-norm least-squares solution, all rows from one in-order basis of
    the data in O(p^2 r) for rank r (:func:`_min_norm_rows`).
    Targets whose predictors prior knowledge restricts take their row from
    the whole order's inverse factor when few predictors are excluded
    (:func:`_row_without`), else as the last row of the same computation on
    their kept predictors.

    numpy's and scipy's BLAS threads are limited during the call (see
    :mod:`paralingam.adjacency`).
    """
    X, order, scatter, exponents, names = _checked_inputs(X, causal_order, scatter)
    with _blas.for_adjacency(len(order)):  # (as fit's step after a CUDA search)
        B = _ols_adjacency(X, order, prior_knowledge=prior_knowledge, backend=backend,
                           scatter=scatter)
    return _scaled_back(B, exponents, names)


def _ols_adjacency(X, order, *, prior_knowledge=None, backend=None, scatter=None, n_threads=None,
                   dependent=False, first_explained=None, device_copy=None):
    """:func:`ols_adjacency` on checked input (``order`` a permutation).

    ``X``: float64 data, or a :class:`~paralingam._preparation.ScaledData`
    (``paralingam.fit`` passes the input with its columns' scaling, read
    block by block: no copy of the data). The data are read by blocks of
    rows (:func:`._common._scatter_by_blocks`; the minimum-norm rows'
    :func:`_centred_triangular_factor`): beyond the data the step holds one
    block and p x p matrices (two blocks while the QR runs ahead, below),
    and the same values give the same bits in either form. ``dependent``:
    the search found variables that others explain (``fit``'s hint): the
    data's QR, which their rows need, may then start on a thread of its own
    beside the scatter matrix (where made here) and the Cholesky factor
    (:func:`qr_ahead`); the hint changes when the
    QR runs, never a result. ``first_explained``: the position in
    ``order`` of the first variable the search found explained by the
    variables before it (``fit``'s hint, None for none): its Cholesky pivot
    fails, so on the CUDA route the rows up to it come from the factor of
    the covariance's leading block (:func:`_hinted_factor`) instead of a
    factor of all ``p`` variables on the GPU whose later rows would go
    unused; the rows after it come from the data as ever, and the hint
    changes results only in rounding. Where every pivot of that block holds
    (the search's tolerance looser than this step's), the whole factor is
    made as without the hint. ``device_copy``: the CUDA search's
    copy of ``X`` on the device, which the data's QR on the GPU then reads
    (:func:`_data_vectors`).
    """
    if backend not in ADJACENCY_BACKENDS:
        raise ValueError(f"backend must be one of {ADJACENCY_BACKENDS[1:]}; got {backend!r}")
    n, p = X.shape
    _memory.require("the adjacency step (least squares)",
                    _memory.ols_bytes(n, p, scatter_given=scatter is not None), _memory.FEWER)
    mean = None  # the columns' means, when the scatter matrix is made here
    ahead = None
    try:
        if n > p and qr_ahead(backend, dependent, n_threads) and _memory.fits(
                _memory.ols_bytes(n, p, scatter_given=scatter is not None)
                + _memory.min_norm_bytes(n, p)):
            mean = _column_means(X)
            ahead = _FactorAhead(X, order, mean)
        if scatter is None:
            mean, scatter = _scatter_by_blocks(X, mean)
        cov = _permuted(scatter, order, n_threads)
        cov /= X.shape[0]
        B_ord = None
        factor = None
        if backend == "cuda" and p >= CUDA_OLS_MIN_FEATURES:
            # the factor on the GPU; any failed pivot: the host's path
            factor = _hinted_factor(
                cov, first_explained,
                lambda block: _first_unsound_row(cov, block) <= first_explained)
            coef, rss, solved = factor
            if solved.all() and (rss > _pivot_noise(cov, coef)).all():
                B_ord = coef
        if B_ord is None:
            B_ord = _ols_rows_host(cov, X, order, factor, mean=mean,
                                   segmented=qr_in_segments(backend), n_threads=n_threads,
                                   ahead=ahead, on_gpu=backend == "cuda",
                                   device_copy=device_copy)
    finally:
        if ahead is not None:
            ahead.cancel()  # (done already where its factor was used)
    B = _placed(B_ord, order, p, n_threads)

    allowed = allowed_predictors(prior_knowledge, p)
    if allowed is not None:
        W = _inverse_factor(cov, B_ord)
        for k in range(1, p):
            target, earlier = order[k], order[:k]
            kept = allowed[target, earlier]
            if kept.all():
                continue  # nothing excluded: the Cholesky row stands
            B[target, :] = 0.0
            keep = earlier[kept]
            excluded = np.flatnonzero(~kept)
            if not len(keep):
                continue
            row = None
            if k <= len(W) and len(excluded) <= k * SCHUR_MAX_EXCLUDED:
                row = _row_without(W[:k, :k], cov[:k, :k], cov[:k, k], excluded)
            if row is not None:
                B[target, keep] = row[kept]
            else:  # the last row of the same solve on keep + [target]
                cols = np.append(keep, target)
                rows = _ols_rows_host(scatter[np.ix_(cols, cols)] / X.shape[0], X, cols,
                                      mean=mean)
                B[target, keep] = rows[-1, :-1]
    return B


def _ols_rows_host(cov, X, order, factor=None, mean=None, segmented=False, n_threads=None,
                   ahead=None, on_gpu=False, device_copy=None):
    """Row ``k``: least squares of variable ``k`` on ``0..k-1`` (``cov`` in causal order).

    One Cholesky factorisation of ``cov`` gives the rows up to the first
    dependent variable; the rows after it, where the predecessors are rank
    deficient, come from the data (:func:`_min_norm_rows`). ``factor``: the
    ``(coef, rss, solved)`` of that factorisation when already computed (on
    the GPU, which stops at the first failed pivot). ``mean``: the columns'
    means of ``X`` when known (:func:`._common._column_means`'s).
    ``segmented``: the data's QR in row segments on ``n_threads`` threads
    (:func:`_data_vectors`). ``ahead``: that QR already under way
    (:class:`_FactorAhead`, of the same ``X``, ``order`` and ``mean``).
    ``on_gpu``: that QR on the GPU where it can run there (:mod:`._cuda_qr`),
    from ``device_copy`` (the CUDA search's copy of ``X``) where given.
    """
    p = cov.shape[0]
    factor = factor if factor is not None else _ols_on_predecessors(cov)
    coef = factor[0]
    first = _first_unsound_row(cov, factor)
    if first < p:
        if ahead is not None:
            V = ahead.result()
        else:
            _memory.require("the adjacency step's minimum-norm least squares (dependent columns)",
                            _memory.min_norm_bytes(X.shape[0], p), _memory.FEWER)
            V, rows = _data_vectors(X, order, mean, segmented, n_threads, on_gpu=on_gpu,
                                    device_copy=device_copy, rows_from=first)
            if rows is not None:  # computed on the GPU
                coef[first:] = rows
                return coef
        first = min(first, V.shape[0])  # no more independent columns than rows
        coef[first:] = _min_norm_rows(V, first)
    return coef


def _pivot_noise(gram, coef):
    """Rounding error of each Cholesky pivot of ``gram`` (rows ``coef`` of the regressions).

    The pivot of an exact combination ``x_k = X a`` is not zero but the
    rounding of ``gram``, about ``eps (|x_k| + sum_i |a_i| |x_i|)^2`` per term:
    with ill-conditioned predecessors (large ``a``) that exceeds
    ``SINGULAR_TOL`` of the variance, and such a pivot must count as zero.
    """
    sd = np.sqrt(np.diag(gram))
    # row k: sum over i < k of |a_i| |x_i|. einsum's own loop, not BLAS: from
    # p = 1000 numpy's OpenBLAS keeps its threads in this step and ran the
    # product on all of them, which then spin; after a CUDA search of
    # full-rank data this was the step's only BLAS call, and the next fit's
    # validation and upload (a bootstrap's next resample) took 2-3 times as
    # long beside them (docs/design/adjacency.rst, "Spinning threads after the step").
    terms = np.einsum("ij,j->i", np.abs(np.tril(coef, -1)), sd)
    return np.maximum(np.arange(len(sd)), 1) * _EPS * (sd + terms) ** 2


def _data_vectors(X, order, mean=None, segmented=False, n_threads=None, stop=None,
                  on_gpu=False, device_copy=None, rows_from=None, divisor=None):
    """Columns whose inner products are the covariance of ``X[:, order]``.

    The centred data over ``sqrt(n)``, or, with more samples than variables,
    the triangular factor of their QR decomposition (same inner products,
    ``p`` rows instead of ``n``). ``X``: an array or a
    :class:`~paralingam._preparation.ScaledData`, read by blocks of rows;
    ``mean``: its columns' means when known (:func:`._common._column_means`'s).
    ``segmented``: that QR in row segments on ``n_threads`` threads
    (:func:`_centred_triangular_factor`; :func:`qr_in_segments`); ``stop``:
    as that function's. ``on_gpu``: that QR on the GPU where it can run
    there (:mod:`._cuda_qr`; after a CUDA search), else as above; the
    columns then come from ``device_copy`` (the CUDA search's copy of ``X``
    on the device, a ``paralingam.search._cuda.DeviceCopy``) while it holds
    ``X``'s shape and values, else from ``X``, uploaded. ``rows_from``:
    the result is then the pair ``(V, rows)``, where the GPU's QR may also
    give the minimum-norm rows of the variables from ``rows_from`` on
    (:mod:`._cuda_min_norm`: data of small rank); then ``V`` is None,
    else ``rows`` is. ``divisor``: those rows are then of ``V``'s columns
    divided by these (``V`` itself is returned as it is).
    """
    n, p = X.shape
    if n > p:
        if on_gpu:
            from . import _cuda_qr

            if _cuda_qr.suits(n, len(order)):
                if device_copy is not None and _cuda_qr.copy_holds(device_copy, X.shape):
                    out = _on_gpu(lambda: _cuda_qr.centred_triangular_factor_of_copy(
                        device_copy, order, rows_from, divisor), "the data's QR", "it")
                else:
                    from .._validation import default_threads

                    if mean is None:
                        mean = _column_means(X)
                    out = _on_gpu(lambda: _cuda_qr.centred_triangular_factor(
                        (n, len(order)), _centred_rows(X, order, mean),
                        n_threads or default_threads(), rows_from, divisor), "the data's QR",
                        "it")
                if out is not None:
                    return out
        V = _centred_triangular_factor(X, order, mean=mean, segmented=segmented,
                                       n_threads=n_threads, stop=stop)
    else:
        V = np.empty((n, len(order)))  # one copy in causal order, centred and scaled in place
        for r0 in range(0, n, TSQR_CHUNK):
            V[r0:r0 + TSQR_CHUNK] = float_rows(X, r0, min(n, r0 + TSQR_CHUNK))[:, order]
        V -= V.mean(axis=0)
        V /= np.sqrt(n)
    return V if rows_from is None else (V, None)


def _centred_triangular_factor(X, order, chunk=TSQR_CHUNK, mean=None, n_threads=None,
                               segmented=False, stop=None):
    """``R`` (p x p, upper) of the QR decomposition of ``X[:, order]`` centred, over ``sqrt(n)``.

    A streaming TSQR: the factor of the first rows, then each further chunk
    of rows folded in by one triangular-pentagonal QR (LAPACK ``dtpqrt``,
    Householder reflections as ``dgeqrf``'s, so as backward stable). A chunk
    stays in cache where ``dgeqrf`` on all ``n`` rows streams the tall panel
    from memory once per reflector, and no centred copy of the whole data is
    made. ``R`` may differ from ``numpy.linalg.qr``'s (the signs of its rows;
    past a zero pivot ``R`` is not unique), but ``R^T R``, the inner products
    every regression uses, is the same to rounding.

    With ``segmented``, data of many rows are split into
    :func:`tsqr_segments` segments, each streamed on its own thread (LAPACK
    without the GIL: ``_linalg``), and the segments' factors are combined
    pairwise in a fixed order. ``n_threads`` (default: ``fit``'s,
    :func:`paralingam._validation.default_threads`) changes only how many
    segments run at once, never the bits. ``stop``: a
    :class:`threading.Event` after which the one stream starts no further
    QR step and raises :class:`_Stopped` (:class:`_FactorAhead`).
    """
    from ._linalg import fold_rows

    n, p = X.shape[0], len(order)
    if mean is None:
        mean = _column_means(X)
    rows = _centred_rows(X, order, mean)
    segments = tsqr_segments(n, p) if segmented else 1
    if segments > 1:
        return _segmented_factor(rows, n, p, segments, chunk, n_threads)
    if stop is not None and stop.is_set():
        raise _Stopped
    head = min(n, max(chunk, p))
    R = np.asfortranarray(np.linalg.qr(rows(0, head), mode="r"))
    for start in range(head, n, chunk):
        if stop is not None and stop.is_set():
            raise _Stopped
        # dtpqrt without the GIL (_linalg; the same LAPACK routine and
        # arguments as scipy.linalg.lapack.dtpqrt, so the same bits), so that
        # the scatter matrix can be made beside it (_FactorAhead)
        fold_rows(R, rows(start, min(start + chunk, n)))  # (block 32, at most p)
    return np.triu(R)


def _centred_rows(X, order, mean):
    """``rows(start, stop)``: those rows of ``X[:, order]`` centred, over ``sqrt(n)``.

    Fortran-ordered float64 blocks, as LAPACK (and cuSOLVER) take them;
    ``mean``: the columns' means of ``X`` (:func:`._common._column_means`'s,
    the scatter matrix's, in any form of ``X``).
    """
    mean = mean[order]
    scale = 1.0 / np.sqrt(X.shape[0])

    def rows(start, stop):
        # (the columns gathered as rows of the transpose: one copy, already
        # in Fortran order, where a gather then a Fortran copy made two)
        block = float_rows(X, start, stop).T[order].T
        block -= mean
        block *= scale
        return block

    return rows


class _Stopped(Exception):
    """The data's QR was stopped (:class:`_FactorAhead`)."""


def qr_ahead(backend, dependent, n_threads=None):
    """Whether the adjacency step starts the data's QR beside the scatter matrix and Cholesky factor.

    Only where the search found dependent variables (``dependent``), whose
    rows need the QR, only on the CPU route, whose QR is one stream on one
    core (:func:`qr_in_segments`; after a CUDA search the QR takes every
    core already), and only with at least two threads (``n_threads``,
    default :func:`paralingam._validation.default_threads`). (After a
    search the scatter matrix comes from its correlation matrix, and the QR
    runs beside the Cholesky factor alone.)
    """
    from .._validation import default_threads

    return bool(dependent) and not qr_in_segments(backend) and (n_threads or default_threads()) > 1


class _FactorAhead:
    """The data's QR (:func:`_data_vectors`, one stream) on a thread of its own.

    Started before the scatter matrix (where the step makes it) and the
    Cholesky factor, so that they run at once (the QR's LAPACK calls run
    without the GIL); :meth:`result` waits for
    it. :meth:`cancel` stops it after its current chunk (or its first QR, of
    ``max(TSQR_CHUNK, p)`` rows, which cannot be stopped) and waits: when
    the factor is not needed, or on an error or Ctrl-C in the caller's
    thread, no thread outlives the step. The thread keeps the caller's
    floating-point error handling (``numpy.errstate``). Its end is waited for
    on an event, not by ``Thread.join``: before Python 3.13 a join that
    Ctrl-C interrupts marks the thread as ended while it still runs, and a
    second join then returns at once.
    """

    def __init__(self, X, order, mean):
        self._stop = threading.Event()
        self._done = threading.Event()
        self._out = {}
        self._thread = threading.Thread(target=self._run, args=(X, order, mean, np.geterr()),
                                        name="paralingam-qr-ahead", daemon=True)
        try:
            self._thread.start()
        except BaseException:  # (Ctrl-C while it starts: the thread does nothing)
            self._stop.set()
            raise

    def _run(self, X, order, mean, errors):
        try:
            with np.errstate(**errors):
                self._out["V"] = _data_vectors(X, order, mean, stop=self._stop)
        except BaseException as exc:  # handed to result(); _Stopped after cancel()
            self._out["error"] = exc
        finally:
            self._done.set()

    def result(self):
        """The factor (:func:`_data_vectors`'s), or the error its thread raised."""
        self._done.wait()
        if "error" in self._out:
            raise self._out["error"]
        return self._out["V"]

    def cancel(self):
        """Stop the QR after its current chunk, wait for its thread and drop its result."""
        self._stop.set()
        self._done.wait()
        self._thread.join()  # (its work is over: only the thread's own exit is left)
        self._out.clear()  # (an error's traceback holds the QR's arrays)


def qr_in_segments(backend):
    """Whether the adjacency step on ``backend`` takes the data's QR in row segments.

    After a CUDA search only: the host's cores are idle there, where after a
    CPU search its OpenMP threads still spin on them, and on two cores the
    segments gained nothing (docs/design/adjacency.rst, the paragraph "The
    data's QR in segments"). The CPU route keeps the one stream and its bits.
    """
    return backend == "cuda"


def tsqr_segments(n, p):
    """Row segments of the streaming QR of ``n`` rows and ``p`` columns (1: one stream).

    Each has at least ``max(TSQR_SEGMENT_ROWS, 2 p)`` rows; at most
    ``TSQR_MAX_SEGMENTS``.
    """
    return int(max(1, min(TSQR_MAX_SEGMENTS, n // max(TSQR_SEGMENT_ROWS, 2 * p))))


def _segmented_factor(rows, n, p, segments, chunk, n_threads=None):
    """:func:`_centred_triangular_factor` over ``segments`` row segments on threads.

    Segment ``i`` holds rows ``n i // segments`` to ``n (i + 1) // segments``;
    its factor is streamed as one stream's, and the factors are combined
    pairwise, (0, 1), (2, 3), ... then the results in turn, each by one QR
    of two stacked triangles (``dtpqrt`` with a triangular second block).
    """
    from concurrent.futures import ThreadPoolExecutor

    from .._validation import default_threads
    from ._linalg import fold_rows, qr_factor

    bounds = [n * i // segments for i in range(segments + 1)]

    def stream(i):  # one segment's factor
        start, stop = bounds[i], bounds[i + 1]
        head = start + p  # the fewest rows a p x p factor needs; dtpqrt folds the rest
        R = qr_factor(rows(start, head))
        for c0 in range(head, stop, chunk):
            fold_rows(R, rows(c0, min(c0 + chunk, stop)))
        return R

    def combine(pair):
        R, other = pair
        fold_rows(R, other, triangular=True)
        return R

    threads = min(segments, n_threads or default_threads())
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="paralingam-tsqr") as pool:
        factors = list(pool.map(stream, range(segments)))
        while len(factors) > 1:
            pairs = [(factors[i], factors[i + 1]) for i in range(0, len(factors) - 1, 2)]
            combined = list(pool.map(combine, pairs))
            factors = combined + factors[len(pairs) * 2:]
    return np.triu(factors[0])


def _ols_on_predecessors(gram):
    """Least squares of every variable on all variables before it, from one factor.

    With ``gram = L L^T`` (lower Cholesky), the regression of variable ``k`` on
    variables ``0..k-1`` has coefficients ``L[k, :k] @ inv(L[:k, :k])``, which
    is ``-L[k, k] * inv(L)[k, :k]`` (row ``k`` of ``L @ inv(L) = I``), and
    residual sum of squares ``L[k, k] ** 2``: one O(p^3) factorisation and
    triangular inverse replace a k x k solve per target.

    Returns
    -------
    coef : ndarray, shape (p, p)
        Row ``k``: the coefficients of variable ``k`` on ``0..k-1``.
    rss : ndarray, shape (p,)
    solved : ndarray of bool, shape (p,)
        Rows that hold: every pivot before ``k`` keeps more than
        ``SINGULAR_TOL`` of its diagonal (as a per-target Cholesky requires) and
        row ``k`` of the factor exists. Other targets solve their own system.
    """
    # scipy's LAPACK, not numpy's: the adaptive lasso's paths past max_iter
    # flip supports on rounding-level changes of these weights, so the factor
    # and inverse stay the routines every result so far was computed with
    # (loaded without the import of scipy.linalg: paralingam._lapack).
    from .._lapack import lapack

    dpotrf, dtrtri = lapack("dpotrf", "dtrtri")

    p = gram.shape[0]
    coef, rss, solved = np.zeros((p, p)), np.zeros(p), np.zeros(p, dtype=bool)
    L, info = dpotrf(gram, lower=1, clean=1)
    rows = p if info == 0 else max(info - 1, 0)  # rows of the factor LAPACK completed
    pivots = np.diag(L)[:rows] ** 2
    bad = ~(pivots > SINGULAR_TOL * np.diag(gram)[:rows]) | ~np.isfinite(pivots)
    good = int(np.argmax(bad)) if bad.any() else rows  # pivots 0..good-1 hold
    m = min(good + 1, rows)  # targets 0..m-1 have a valid row and valid earlier pivots
    if m <= 1:
        return coef, rss, solved
    Lm = L[:m, :m]
    Linv, info = dtrtri(Lm, lower=1)
    if info != 0 or not np.isfinite(Linv).all():
        return coef, rss, solved
    coef[:m, :m] = np.tril(Linv, -1) * -np.diag(Lm)[:, None]
    rss[:m] = np.diag(Lm) ** 2
    solved[:m] = np.isfinite(coef[:m]).all(axis=1)
    return coef, rss, solved


def _first_unsound_row(gram, factor):
    """The first row of ``factor`` (``_ols_on_predecessors``'s of ``gram``) that does not hold.

    A row holds where it is solved and its pivot keeps more than its rounding
    (:func:`_pivot_noise`) and ``SINGULAR_TOL`` of its variance; the rows
    from the first that does not come from the data (:func:`_min_norm_rows`).
    ``len(gram)`` where every row holds.
    """
    coef, rss, solved = factor
    rows = int(np.argmin(solved)) if not solved.all() else len(solved)
    noise = _pivot_noise(gram[:rows, :rows], coef[:rows, :rows])
    ok = rss[:rows] > np.maximum(noise, SINGULAR_TOL * np.diag(gram)[:rows])
    return rows if ok.all() else int(np.argmin(ok))


def _leading_factor(gram, lead):
    """:func:`_ols_on_predecessors` of the leading ``lead`` variables, as arrays of all of them.

    The rows after ``lead`` are not solved (``solved`` False): the caller
    takes them from the data (:func:`_min_norm_rows`). On the GPU where
    ``lead`` reaches ``CUDA_OLS_MIN_FEATURES``, as :func:`_least_squares_factor`.
    """
    p = gram.shape[0]
    head = _least_squares_factor(gram[:lead, :lead], lead >= CUDA_OLS_MIN_FEATURES)
    coef, rss, solved = np.zeros((p, p)), np.zeros(p), np.zeros(p, dtype=bool)
    coef[:lead, :lead], rss[:lead], solved[:lead] = head
    return coef, rss, solved


def _hinted_factor(gram, first_explained, confirms):
    """The GPU route's :func:`_ols_on_predecessors` of ``gram``, only as far as the search's hint.

    ``first_explained``: the position of the first variable the search found
    explained by those before it (None: none). Its pivot fails, so the rows
    after it come from the data and a factor of all ``p`` variables would
    go unused past it: the leading block's factor (:func:`_leading_factor`)
    is returned where ``confirms(factor)`` holds (the caller's test that the
    block's last pivot fails), or where the block is all of ``gram``;
    otherwise, and without a hint, the whole factor
    (:func:`_least_squares_factor` on the GPU). A block of fewer than
    ``CUDA_OLS_MIN_FEATURES`` variables is factorised on the host, which,
    as on the CPU route, also solves the explained variable's own row where
    LAPACK completed it (the GPU's factor leaves that row to the caller).
    """
    p = gram.shape[0]
    if first_explained is not None and 0 < first_explained < p:
        factor = _leading_factor(gram, first_explained + 1)
        if first_explained + 1 == p or confirms(factor):
            return factor
    return _least_squares_factor(gram, True)


def _pivot_holds(gram, factor, k):
    """Whether pivot ``k`` of ``factor`` passes :func:`_ols_on_predecessors`' test.

    Where it does, the factor of a larger leading block solves rows past
    ``k`` (on the host and the GPU alike: ``solved[k]`` and a pivot, ``rss[k]``,
    that keeps more than ``SINGULAR_TOL`` of its variance).
    """
    coef, rss, solved = factor
    return bool(solved[k] and np.isfinite(rss[k]) and rss[k] > SINGULAR_TOL * gram[k, k])


def _least_squares_factor(gram, on_gpu):
    """:func:`_ols_on_predecessors`, on the GPU when asked and usable, else on the host."""
    if on_gpu:
        from . import _cuda_adjacency

        out = _on_gpu(lambda: _cuda_adjacency.ols_on_predecessors(gram, SINGULAR_TOL),
                      "least squares", "them")
        if out is not None:
            return out
    return _ols_on_predecessors(gram)


def _on_gpu(call, step, pronoun):
    """``call()`` when the CUDA backend is usable; else None and a RuntimeWarning.

    The warning reads "<step> on the GPU failed (<why>); computing <pronoun> on
    the CPU" and points at the user's code (the first frame outside paralingam).
    """
    from .. import _gpu

    reason = _gpu.unavailable_reason()
    if reason is None:
        try:
            return call()
        except Exception as exc:  # out of memory, or a fault (recorded by _cuda_adjacency)
            reason = f"{type(exc).__name__}: {exc}"
    warnings.warn(f"{step} on the GPU failed ({reason}); computing {pronoun} on the CPU",
                  RuntimeWarning, stacklevel=user_stacklevel())
    return None
