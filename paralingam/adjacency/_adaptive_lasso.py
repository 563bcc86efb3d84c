"""lingam's adaptive-lasso adjacency matrix, from one scatter matrix.

The rows of all targets run in the compiled engine (``_lasso``, OpenMP), on
the GPU from ``CUDA_LASSO_MIN_FEATURES`` variables on
(:func:`_adaptive_lasso_rows_cuda`), and with sklearn's LARS path
(:func:`_adaptive_lasso_row_sklearn`) where the engine is not built or hands
a target back. The adaptive weights are least squares on all predecessors:
one factor for all targets (:mod:`._least_squares`), minimum-norm rows past
a dependent variable (:func:`_min_norm_weights`).
"""

import warnings

import numpy as np

from .. import _blas, _memory
from .._progress import Progress
from .._validation import check_positive, default_threads, user_stacklevel
from ._common import (ADJACENCY_BACKENDS, SINGULAR_TOL, AdjacencyWarning, _checked_inputs,
                      _permuted, _permuted_gram, _placed, _residual_sums, _scaled_back, _scatter)
from ._least_squares import (_data_vectors, _hinted_factor, _least_squares_factor, _on_gpu,
                             _pivot_holds, qr_in_segments)
from ._min_norm import _min_norm_rows
from ._prior import allowed_predictors


# The GPU runs the adaptive lasso (weights factor and paths) from this many
# variables on: one block per target wins once paths are long, while for
# fewer variables the host's paths are faster (docs/design/adjacency.rst,
# "On the GPU").
CUDA_LASSO_MIN_FEATURES = 256

# Flags of the compiled engine's targets (paralingam.adjacency._lasso).
WARNED, SINGULAR_REFIT = 2, 4

# sklearn's LassoLarsIC defaults, which lingam uses unchanged.
_LARS_MAX_ITER = 500

_LARS_EPS = np.finfo(np.float64).eps


def adaptive_lasso_adjacency(X, causal_order, *, prior_knowledge=None, gamma=1.0,
                             n_threads=None, engine="auto", backend=None, scatter=None):
    """lingam's adaptive-lasso adjacency matrix, computed from one scatter matrix.

    For each variable (after the first) in the causal order, with the earlier
    variables as predictors, on standardised data:

    1. least squares gives weights ``w = |b_ols| ** gamma``;
    2. the lasso path of the target on the weighted predictors (LARS) is
       scored with BIC (noise variance from the least-squares fit), and the
       predictors active at the best point are kept;
    3. the target is regressed on the kept predictors on the original scale.

    This is lingam 1.13's ``predict_adaptive_lasso`` step for step (sklearn's
    ``LassoLarsIC(criterion="bic")`` path and criterion), but the data are
    standardised once and every regression is solved from the scatter matrix
    instead of from the samples: the LARS path takes the Gram matrix sklearn
    would compute itself, and the residual sums of squares along the path come
    from the Gram matrix too.

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features)
    causal_order : sequence of int
    prior_knowledge : array-like, shape (n_features, n_features), optional
        ``prior_knowledge[i, j] == 0`` removes ``j`` from the predictors of ``i``.
    gamma : float
        Exponent of the adaptive weights, a finite number > 0 (lingam's
        default 1).
    n_threads : int, optional
        Threads of the compiled engine, 1..1024 (default: all cores, or
        ``OMP_NUM_THREADS`` up to the number of cores).
    engine : {"auto", "compiled", "sklearn"}
        ``"compiled"``: paralingam's port of sklearn's LARS path
        (``paralingam.adjacency._lasso``), all targets in parallel threads; the rare
        targets where sklearn would take a degenerate branch are recomputed
        with sklearn. ``"sklearn"``: sklearn's ``lars_path_gram`` for every
        target (the reference). ``"auto"``: compiled when built, else sklearn.
    backend : {None, "cpu", "cuda"}
        ``"cuda"``: from ``CUDA_LASSO_MIN_FEATURES`` variables on, the LARS
        paths of the compiled engine and the least-squares refits after them
        run on the GPU, one block per target (``kernels/adjacency.cu``), for
        every target whose predictors are all earlier variables; targets
        under prior knowledge and those the GPU hands back (a rare branch of
        the path, or kept predictors singular to ``SINGULAR_TOL``) run on
        the CPU. Without a usable GPU this warns and runs on the CPU.
    scatter : ndarray, shape (n_features, n_features), optional
        The scatter matrix ``Xc.T @ Xc`` of the centred data when it is
        already known (``paralingam.fit`` passes the CUDA search's); by
        default it is computed from ``X``.

    Returns
    -------
    B : ndarray, shape (n_features, n_features)

    Raises
    ------
    ValueError
        When a target has ``n_samples <= n_predictors + 1``: BIC's noise
        variance cannot be estimated (lingam raises there too).

    Notes
    -----
    numpy's and scipy's BLAS threads are limited during the call (see
    :mod:`paralingam.adjacency`).
    """
    # NaN failed deep in sklearn; inf gave weights of 0 or inf, hence a zero matrix
    gamma = check_positive("gamma", gamma)
    X, order, scatter, exponents, names = _checked_inputs(X, causal_order, scatter, n_threads)
    with _blas.for_adjacency(len(order)):  # (as fit's step after a CUDA search)
        B = _adaptive_lasso_adjacency(X, order, prior_knowledge=prior_knowledge, gamma=gamma,
                                      n_threads=n_threads, engine=engine, backend=backend,
                                      scatter=scatter)
    return _scaled_back(B, exponents, names, n_threads)


def check_samples_before_search(n_samples, n_features, prior_knowledge):
    """ValueError where the adaptive lasso must fail whatever the order.

    Without prior knowledge the last variable of any order has every other
    one as a predictor, and the lasso's BIC needs more samples than
    predictors + 1 (the check in :func:`_adaptive_lasso_rows_all`, made per
    target after the search): a fit of ``n_samples <= n_features`` is
    refused before a search whose result could not be used.
    """
    if prior_knowledge is None and n_features > 1 and n_samples <= n_features:
        raise ValueError(
            f"the adaptive lasso needs more samples than predictors + 1 to estimate the noise "
            f"variance for BIC: the last variable of the order has {n_features - 1} predictors "
            f"and there are {n_samples} samples; use adjacency='ols'")


def _adaptive_lasso_adjacency(X, order, *, prior_knowledge=None, gamma=1.0, n_threads=None,
                              engine="auto", backend=None, scatter=None, progress=False,
                              first_explained=None, device_copy=None, explained=()):
    """:func:`adaptive_lasso_adjacency` on checked input (float64 ``X``, ``order``
    a permutation); ``progress``: a bar of the targets (:func:`estimate_adjacency`);
    ``first_explained``, ``device_copy`` and ``explained``: the search's hint,
    the CUDA search's copy of ``X`` and its explained variables
    (``_estimate_adjacency``'s)."""
    with Progress(max(X.shape[1] - 1, 0), progress, desc="adjacency", unit="target") as bar:
        return _adaptive_lasso_rows_all(X, order, prior_knowledge, gamma, n_threads, engine,
                                        backend, scatter, bar, first_explained, device_copy,
                                        explained)


def _adaptive_lasso_rows_all(X, order, prior_knowledge, gamma, n_threads, engine, backend,
                             scatter, bar, first_explained=None, device_copy=None, explained=()):
    """The body of :func:`_adaptive_lasso_adjacency`, counting its targets on ``bar``."""
    if engine not in ("auto", "compiled", "sklearn"):
        raise ValueError(f"engine must be 'auto', 'compiled' or 'sklearn'; got {engine!r}")
    if backend not in ADJACENCY_BACKENDS:
        raise ValueError(f"backend must be one of {ADJACENCY_BACKENDS[1:]}; got {backend!r}")
    n, p = X.shape
    threads = n_threads or default_threads()  # (OpenMP's own default is not capped)
    _memory.require(
        "the adjacency step (adaptive lasso)",
        _memory.adaptive_lasso_bytes(n, p, threads, scatter_given=scatter is not None),
        _memory.FEWER + ", fewer threads (n_threads: each holds an n_features^2 scratch), "
        "or adjacency='ols'")
    if scatter is None:
        scatter = _scatter(X)[1]
    # The Gram matrix Z.T @ Z of the standardised data Z (sklearn's StandardScaler:
    # population std), i.e. n times the correlation matrix. The LARS path and its
    # stopping tolerance depend on this scale. A constant column keeps scale 1, as
    # in StandardScaler.
    std = np.sqrt(np.diag(scatter) / n)
    std[std == 0.0] = 1.0
    allowed = allowed_predictors(prior_knowledge, p)

    # Work in causal order: target k's predictors are then positions 0..k-1
    # (a subset of them under prior knowledge), rows of the Gram matrix the
    # compiled engine reads as plain vectors. The Gram matrix in the data's
    # order is made only for the targets the sklearn engine takes (below).
    scatter_ord, gram_ord = _permuted_gram(scatter, order, std, threads)
    targets, sizes, predictors_of = _targets(allowed, order)
    too_few = np.flatnonzero(n <= sizes + 1)
    if len(too_few):
        k = int(targets[too_few[0]])
        raise ValueError(
            f"the adaptive lasso needs more samples than predictors + 1 to estimate "
            f"the noise variance for BIC: column {order[k]} has "
            f"{sizes[too_few[0]]} predictors and there are {n} samples; "
            "use adjacency='ols'")
    if len(targets):
        bar.total = len(targets)  # exogenous variables are no work (drawn lazily: not yet)

    B = np.zeros((p, p))
    todo = range(len(targets))
    degenerate = []  # (position in the order, column): paths on which sklearn warns
    lasso = _compiled_lasso() if engine != "sklearn" else None
    if engine == "compiled" and lasso is None:
        raise RuntimeError("the compiled adaptive lasso (paralingam.adjacency._lasso) is not built")
    if lasso is not None and len(targets):
        on_gpu = backend == "cuda" and p >= CUDA_LASSO_MIN_FEATURES
        # every row from the basis on the device where the search's hint
        # allows (the rows before its first explained variable too, whose
        # least squares on independent predecessors are the minimum-norm
        # ones): no factor on the host
        weights = _basis_weights(device_copy, order, explained, std, gram_ord) if on_gpu \
            else None
        if weights is _ROUTE_FAILED:  # (warned once: the rows below do not ask the route again)
            weights, explained = None, ()
        if weights is not None:
            ols_coef, ols_rss, solved = weights
        elif on_gpu:
            # the weights' factor only up to the search's first explained
            # variable where its pivot fails here too (_pivot_holds is the
            # factor's own test): the rows after it come from the data
            # either way (_min_norm_weights)
            ols_coef, ols_rss, solved = _hinted_factor(
                gram_ord, first_explained,
                lambda block: not _pivot_holds(gram_ord, block, first_explained))
        else:
            ols_coef, ols_rss, solved = _least_squares_factor(gram_ord, False)
        full = sizes == targets  # (on all earlier positions)
        given = full & solved[targets]
        if (full & ~given).any():
            # predecessors linearly dependent: minimum-norm weights, as
            # sklearn's lstsq gives them, before the paths, so that those
            # targets' paths run on the GPU too (on rank-deficient data they
            # are nearly all of them)
            ols_coef, ols_rss, filled = _min_norm_weights(
                X, order, std, gram_ord, ols_coef, ols_rss, solved,
                segmented=qr_in_segments(backend), n_threads=threads,
                on_gpu=backend == "cuda", device_copy=device_copy, explained=explained)
            given = full & filled[targets]
        on_cpu = np.ones(len(targets), dtype=bool)
        # each route's rows are zero outside its own targets: their sum is both
        B_ord = None
        if on_gpu and given.any():
            B_gpu, done = _adaptive_lasso_rows_cuda(gram_ord, scatter_ord, targets, given,
                                                    ols_coef, ols_rss, n, gamma, _ahead(bar, 0))
            B_ord = B_gpu
            on_cpu &= ~done
        if on_cpu.any():
            rows = np.flatnonzero(on_cpu)
            sets = [predictors_of(t) for t in rows]
            sub_offsets = np.zeros(len(rows) + 1, dtype=np.intp)
            sub_offsets[1:] = np.cumsum([len(s) for s in sets])
            flags = np.zeros(len(rows), dtype=np.uint8)
            B_cpu, fallback = lasso.adaptive_lasso_rows(
                gram_ord, scatter_ord, targets[rows], sub_offsets,
                np.concatenate(sets).astype(np.intp), float(n), float(gamma),
                threads, ols_coef, ols_rss, given[rows].astype(np.uint8),
                progress=_ahead(bar, len(targets) - len(rows)), flags=flags)
            _singular_refits(B_cpu, scatter_ord, targets[rows][flags & SINGULAR_REFIT > 0])
            B_ord = B_cpu if B_ord is None else B_ord + B_cpu
            todo = rows[fallback]
            degenerate += [(k, int(order[k])) for k in targets[rows][flags & WARNED > 0]]
        else:
            todo = []
        B = _placed(B_ord, order, p, threads)

    report = _ahead(bar, len(targets) - len(todo))
    # (gram_ord back in the data's order: the same entries, no second p x p pass of scatter)
    gram = _permuted(gram_ord, np.argsort(order), threads) if len(todo) else None
    for i, t in enumerate(todo):
        if report is not None:
            report(i)
        target, predictors = order[targets[t]], order[predictors_of(t)]
        B[target] = 0.0
        kept, coef, warned = _adaptive_lasso_row_sklearn(gram, scatter, target, predictors,
                                                         n, gamma)
        B[target, kept] = coef
        if warned:
            degenerate.append((int(targets[t]), int(target)))
    if degenerate:
        degenerate = [column for _, column in sorted(degenerate)]
        warnings.warn(
            f"adaptive lasso: the LARS path of columns {degenerate} stopped early or "
            "dropped a regressor (nearly collinear predictors); their coefficients come "
            "from the shortened path, as in lingam.",
            AdjacencyWarning,
            stacklevel=user_stacklevel(),
        )
    if len(targets) and bar.enabled:
        bar.update_to(bar.total)
    return B


def _targets(allowed, order):
    """The positions of the causal order that have predictors, and theirs.

    Returns
    -------
    targets : ndarray of intp
        Positions ``k`` whose allowed predictors among positions ``0..k-1``
        are not empty (every ``k >= 1`` without prior knowledge: ``allowed``
        None).
    sizes : ndarray of intp
        Their numbers of predictors.
    predictors_of : callable
        ``predictors_of(t)``: the positions ``targets[t]`` regresses on,
        ascending.
    """
    p = len(order)
    positions = np.arange(p)  # (each target's predictors: a view of it)
    if allowed is None:
        targets = positions[1:]
        sizes = targets

        def predictors_of(t):
            return positions[:targets[t]]
    else:
        below = np.tril(allowed[np.ix_(order, order)], -1)  # [k, j]: j < k may predict k
        counts = below.sum(axis=1)
        targets = np.flatnonzero(counts)
        sizes = counts[targets]

        def predictors_of(t):
            return np.flatnonzero(below[targets[t]])
    return targets, sizes, predictors_of


def _singular_refits(B, scatter, targets):
    """Step 3 of the targets whose kept predictors are singular, in place.

    The compiled engine marks their kept predictors with NaN in the row
    (``flags=``); their least squares on the original scale is the
    minimum-norm one, :func:`_solve_spd` as :func:`_adaptive_lasso_row_sklearn`
    solves it.
    """
    for t in targets:
        kept = np.flatnonzero(np.isnan(B[t]))
        B[t] = 0.0
        B[t, kept] = _solve_spd(scatter[np.ix_(kept, kept)], scatter[kept, t])


def _ahead(bar, base):
    """``progress(done)`` moving ``bar`` to ``base + done`` (never back); None when disabled."""
    if not bar.enabled:
        return None

    def report(done):
        done = min(base + done, bar.total)
        if done > bar.n:
            bar.update_to(done)

    return report


def _adaptive_lasso_rows_cuda(gram, scatter, targets, given, ols_coef, ols_rss, n, gamma,
                              progress=None):
    """LARS paths and refits of the ``given`` targets on the GPU.

    Returns the rows computed (in ``gram``'s positions) and, per target,
    whether it was done here; the others (not given, a path the GPU hands
    back, or kept predictors singular to ``SINGULAR_TOL``) go to the CPU
    engine. When the GPU cannot run, nothing is done here and a warning
    says why.
    """
    from . import _cuda_adjacency

    p = gram.shape[0]
    done = np.zeros(len(targets), dtype=bool)
    out = _on_gpu(lambda: _cuda_adjacency.lars_rows(gram, scatter, targets[given], ols_coef,
                                                    ols_rss, n, gamma, SINGULAR_TOL,
                                                    progress=progress),
                  "adaptive lasso", "it")
    if out is None:
        return np.zeros((p, p)), done
    B, ok = out
    done[np.flatnonzero(given)[ok]] = True
    return B, done


def _min_norm_weights(X, order, std, gram, coef, rss, solved, segmented=False, n_threads=None,
                      on_gpu=False, device_copy=None, explained=()):
    """Least squares of every variable on all before it, past the Cholesky factor's rows.

    :func:`_ols_on_predecessors` solves the rows up to the first dependent
    variable (``solved``); every later row gets the minimum-norm solution over
    its predecessors on the standardised scale -- what least squares through
    the pseudo-inverse (``np.linalg.lstsq``, sklearn's ``LinearRegression``)
    gives -- from one Gram-Schmidt pass over the data (:func:`_min_norm_rows`)
    instead of a factorisation per target. The residual sum of squares is
    ``yy - g.b`` in ``gram``'s scale, as :func:`_adaptive_lasso_row_sklearn`
    computes it.

    Parameters
    ----------
    X : ndarray, shape (n_samples, p)
    order : ndarray of int
    std : ndarray, shape (p,)
        The columns' population standard deviations (1 for a constant column).
    gram : ndarray, shape (p, p)
        The standardised Gram matrix in causal order.
    coef, rss, solved : ndarray
        :func:`_ols_on_predecessors` of ``gram``; ``coef`` and ``rss`` are
        filled in place (a copy of ``coef`` is p x p).
    segmented : bool
        The data's QR in row segments on threads (after a CUDA search:
        :func:`._least_squares._data_vectors`).
    n_threads : int, optional
        Those threads (default: :func:`paralingam._validation.default_threads`).
    on_gpu : bool
        The data's QR on the GPU where it can run there (after a CUDA
        search: :mod:`._cuda_qr`).
    device_copy : paralingam.search._cuda.DeviceCopy, optional
        The CUDA search's copy of ``X`` on the device, which that QR then
        reads (:func:`._least_squares._data_vectors`).
    explained : collection of int
        The variables the CUDA search found explained by earlier ones: with
        ``on_gpu`` and ``device_copy``, the rows come from the QR of the
        others' columns alone where it can run
        (:func:`._cuda_low_rank.weights_of_copy`), else as above.

    Returns
    -------
    coef, rss : ndarray
        ``coef`` and ``rss``, with the rows after the solved ones filled in.
    filled : ndarray of bool, shape (p,)
        Rows (positions in causal order) that hold.
    """
    p = gram.shape[0]
    filled = solved.copy()
    m = int(np.argmin(solved)) if not solved.all() else p  # rows 0..m-1 hold
    if m == p:
        return coef, rss, filled
    _memory.require("the adaptive lasso's minimum-norm least squares (dependent columns)",
                    _memory.min_norm_bytes(X.shape[0], p), _memory.FEWER)
    # rows 0..m-1 hold: their pivots 0..m-2 keep more than SINGULAR_TOL.
    # The data's vectors as the least squares take them (p rows from a
    # streaming QR when n > p): _min_norm_rows works in the vectors' length
    # (a QR of its leading columns, projections on the basis), so fewer rows
    # cost less at any rank
    if on_gpu and _low_rank_weights(device_copy, order, explained, std[order], m, coef[m:]):
        rows = coef[m:]
    else:
        first = max(m - 1, 0)
        # the standardised variables' vectors (lstsq's scale): V / std, whose
        # rows the GPU computes itself where it can (data of small rank)
        V, rows = _data_vectors(X, order, segmented=segmented, n_threads=n_threads,
                                on_gpu=on_gpu, device_copy=device_copy, rows_from=first,
                                divisor=std[order])
        if rows is None:
            V /= std[order]
            first = min(first, V.shape[0])
            rows = _min_norm_rows(V, first)
        rows = rows[m - first:]
        coef[m:] = rows
    rss[m:] = _residual_sums(gram, rows, m)
    filled[m:] = np.isfinite(rows).all(axis=1) & np.isfinite(rss[m:])
    return coef, rss, filled


# Whether the adaptive lasso's weights after a CUDA search come wholly from
# the basis on the device where they can (_basis_weights; False: the host's
# factor up to the first explained variable, the basis's rows after it, as
# before; for A/B runs and tests).
WEIGHTS_FROM_BASIS = True


# What _basis_weights returns where the device's route raised or the GPU is
# unusable (either way a RuntimeWarning said so).
_ROUTE_FAILED = object()


def _basis_weights(device_copy, order, explained, std, gram):
    """``(coef, rss, solved)`` of every row from :func:`._cuda_low_rank.weights_of_copy`, None,
    or ``_ROUTE_FAILED``.

    The least squares of each variable on all before it (standardised
    scale), rows from position 0 on, where the route takes the search's hint
    and every row and residual sum of squares is finite; ``rss`` is ``yy -
    g.b`` in ``gram``'s scale, as :func:`_min_norm_weights` computes it for
    the rows it fills. None: the caller's factor and rows, as without a hint.
    ``_ROUTE_FAILED``: the route raised or the GPU is unusable, and a
    RuntimeWarning said so.
    """
    from . import _cuda_low_rank

    if not (WEIGHTS_FROM_BASIS and _cuda_low_rank.applies(device_copy, order, explained)):
        return None
    p = gram.shape[0]
    coef = np.empty((p, p))
    written = _low_rank_weights(device_copy, order, explained, std[order], 0, coef)
    if not written:
        return _ROUTE_FAILED if written is None else None
    rss = _residual_sums(gram, coef)
    if not np.isfinite(rss).all():
        return None
    return coef, rss, np.ones(p, dtype=bool)


def _low_rank_weights(device_copy, order, explained, divisor, m, out):
    """Whether :func:`._cuda_low_rank.weights_of_copy` wrote the rows from ``m`` on into ``out``.

    True: written; False: the route declined (or there is no hint); None:
    it raised or the GPU is unusable, and a RuntimeWarning said so
    (:func:`._least_squares._on_gpu`).
    """
    if device_copy is None or not explained:
        return False
    from . import _cuda_low_rank

    return _on_gpu(lambda: _cuda_low_rank.weights_of_copy(device_copy, order, explained, divisor,
                                                          m, out) is not None,
                   "the adaptive lasso's weights", "them")


def _compiled_lasso():
    from .. import _isa

    try:
        return _isa.load("adjacency._lasso")
    except ImportError:  # not built: sklearn's path for every target
        return None


def _adaptive_lasso_row_sklearn(gram, scatter, target, predictors, n, gamma):
    """One target with sklearn's LARS path: ``(kept, coef, warned)``."""
    # Lazy: sklearn is heavy to import.
    from sklearn import config_context
    from sklearn.linear_model import lars_path_gram

    m = len(predictors)
    G = gram[np.ix_(predictors, predictors)]
    g = gram[predictors, target]
    yy = gram[target, target]

    # 1. adaptive weights from least squares on the standardised data
    b_ols = _solve_spd(G, g)
    weight = np.abs(b_ols) ** gamma

    # 2. lasso path of the weighted problem, scored by BIC
    Gw = G * np.outer(weight, weight)
    gw = g * weight
    # The inputs are ours and valid: skip sklearn's per-call parameter checks.
    with warnings.catch_warnings(record=True) as caught, \
            config_context(skip_parameter_validation=True):
        warnings.simplefilter("always")
        _, _, path = lars_path_gram(
            gw, Gw, n_samples=n, max_iter=_LARS_MAX_ITER, alpha_min=0.0,
            method="lasso", eps=_LARS_EPS)
    rss_path = yy - 2.0 * (gw @ path) + np.einsum("ik,ij,jk->k", path, Gw, path)
    # Noise variance of the least-squares fit (sklearn: fit on the centred
    # data, divided by n - m - 1); floored so an exact fit stays finite.
    rss_ols = max(yy - g @ b_ols, _LARS_EPS * yy)
    noise_var = rss_ols / (n - m - 1)
    dof = (np.abs(path) > _LARS_EPS).sum(axis=0)
    # a constant target (yy = 0) has no noise: every BIC is NaN and argmin
    # takes the path's start, no predictor, as it should
    with np.errstate(divide="ignore", invalid="ignore"):
        bic = n * np.log(2.0 * np.pi * noise_var) + rss_path / noise_var + np.log(n) * dof
    best = path[:, np.argmin(bic)]
    kept = predictors[np.abs(best * weight) > 0.0]

    # 3. least squares on the kept predictors, original scale
    coef = np.zeros(0)
    if len(kept):
        coef = _solve_spd(scatter[np.ix_(kept, kept)], scatter[kept, target])
    return kept, coef, bool(caught)


def _solve_spd(A, b):
    """Solve ``A x = b`` for a covariance-like ``A``; min-norm least squares if singular.

    ``A`` counts as singular when a Cholesky pivot keeps no more than
    ``SINGULAR_TOL`` of its diagonal entry: some variable is, to rounding, a
    linear combination of the others, and the Cholesky solution would be
    noise. (The compiled engine applies the same bound.)
    """
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    try:
        factor = cho_factor(A, lower=True, check_finite=False)
        pivots = np.diag(factor[0]) ** 2
        if (pivots > SINGULAR_TOL * np.diag(A)).all():
            x = cho_solve(factor, b, check_finite=False)
            if np.isfinite(x).all():
                return x
    except LinAlgError:
        pass
    return _lstsq(A, b)


def _lstsq(A, b):
    return np.linalg.lstsq(A, b, rcond=None)[0]
