"""``MultiGroupDirectLiNGAM``: lingam 1.13's joint DirectLiNGAM over several data sets.

Shimizu (Neurocomputing 2012): the groups share one causal order, searched
with DirectLiNGAM's pwling statistic where the score of a candidate root is
the sum over the groups of its score in each, weighted by the group's share of
the samples; each group then gets its own adjacency matrix on that order.

The candidates' scores of each iteration come from the compiled CPU engine
(:mod:`paralingam.search._multi_group`: the float64 pair statistic of the
single-data-set CPU search, OpenMP over the pairs of every group, summed in a
fixed order), with the degenerate-data rule of
:func:`paralingam.search.reference.pairwise_statistics` (a collinear pair compares
as ``I = 0``) and lingam's prior-knowledge rules (:mod:`paralingam.prior`);
``engine="numpy"`` computes them with the reference instead (the same order).
This driver picks the root and regresses it out of every group as lingam
does. The adjacency matrices come from :mod:`paralingam.adjacency` (lingam's
adaptive lasso by default).
"""

import contextlib
import numbers
import warnings

import numpy as np

from .. import _preparation
from .._validation import MAX_THREADS, as_data_matrix, check_coef_threshold, check_int
from .bootstrap import BootstrapResult, regression_effect, total_effects, warn_if_order_reversed
from ..search.policy import COLLINEAR_TOL
from ..prior import PriorKnowledge

__all__ = ["MultiGroupDirectLiNGAM", "multi_group_causal_order", "multi_group_scores"]


ENGINES = ("cpu", "numpy")


def _pair_tasks(status):
    """Pairs of one iteration for the compiled scores: ``(ta, tb, both, mirror)``.

    Every candidate ``a`` needs ``I(a, b)`` for every other remaining ``b``.
    Two candidates (never in ``V_j``) form an antisymmetric pair, computed
    once as ``(lower, higher)`` and mirrored; a candidate and a non-candidate
    are computed in the orientation (candidate, partner), with the partner's
    own values for its residual when it is in ``V_j``.
    """
    from ..search.reference import CANDIDATE, IN_VJ

    r = len(status)
    a, b = np.triu_indices(r, 1)
    ca, cb = status[a] == CANDIDATE, status[b] == CANDIDATE
    both_c = ca & cb
    one = ca ^ cb  # one candidate: orient (candidate, partner)
    ta = np.concatenate([a[both_c], np.where(ca, a, b)[one]])
    tb = np.concatenate([b[both_c], np.where(ca, b, a)[one]])
    both = (status[tb] != IN_VJ).astype(np.int32)
    mirror = np.concatenate([np.ones(both_c.sum(), np.int32), np.zeros(one.sum(), np.int32)])
    return (ta.astype(np.int32), tb.astype(np.int32), both, mirror)


def multi_group_scores(Z_list, weights, status, collinear_tol=COLLINEAR_TOL, engine="cpu",
                       n_threads=None):
    """Score of every remaining variable in one iteration of the multi-group search.

    Parameters
    ----------
    Z_list : list of ndarray, each (n_samples_g, r)
        Population-standardised remaining variables of each group.
    weights : sequence of float
        Each group's share of the samples.
    status : ndarray of int, shape (r,)
        Prior-knowledge status of each variable (``paralingam.search.reference``'s
        ``CANDIDATE``, ``IN_VJ`` or ``OTHER``).
    collinear_tol : float
    engine : {"cpu", "numpy"}
        ``"cpu"``: the compiled statistic (:mod:`paralingam.search._multi_group`,
        OpenMP over the pairs of all groups); ``"numpy"``:
        :func:`paralingam.search.reference.pairwise_statistics` per group.
    n_threads : int, optional
        Threads of the compiled engine (default: as the order search).

    Returns
    -------
    ndarray, shape (r,)
        ``sum_g w_g sum_j min(0, I_g(i, j))**2`` for each candidate ``i``;
        non-candidates get 0 with ``"cpu"`` (only candidates are compared).
    """
    from ..search.reference import CANDIDATE, IN_VJ, pairwise_statistics, verify_band

    r = len(status)
    in_vj = status == IN_VJ
    if engine == "numpy":
        score = np.zeros(r)
        for Z, w in zip(Z_list, weights):
            stat = pairwise_statistics(Z, collinear_tol, in_vj if in_vj.any() else None)
            score += (np.minimum(0.0, stat) ** 2).sum(axis=1) * w
        return score
    from .._validation import default_threads

    from .. import _isa

    try:
        _multi_group = _isa.load("search._multi_group")
    except ImportError as exc:
        raise RuntimeError("the compiled multi-group engine (paralingam.search._multi_group) is not "
                           "built: rebuild paralingam (pip install .), or pass engine='numpy'"
                           ) from exc

    ta, tb, both, mirror = _pair_tasks(status)
    rows = [np.ascontiguousarray(Z.T) for Z in Z_list]
    stat = _multi_group.pair_statistics(rows, ta, tb, both, mirror, collinear_tol=collinear_tol,
                                        band=verify_band(collinear_tol),
                                        n_threads=n_threads or 0, max_threads=default_threads())
    score = np.zeros(r)
    for S, w in zip(stat, weights):  # groups in order: deterministic
        score += (np.minimum(0.0, S) ** 2).sum(axis=1) * w
    score[status != CANDIDATE] = 0.0
    return score


def multi_group_causal_order(X_list, prior_knowledge=None, apply_prior_knowledge_softly=False,
                             collinear_tol=COLLINEAR_TOL, *, engine="cpu", n_threads=None,
                             return_scores=False):
    """The causal order shared by several data sets (lingam's multi-group search).

    Parameters
    ----------
    X_list : list of ndarray, each (n_samples_g, n_features)
    prior_knowledge : array-like, shape (n_features, n_features), optional
        lingam's prior-knowledge matrix.
    apply_prior_knowledge_softly : bool
    collinear_tol : float
        Pairs of a group with an exact dependence (residual fraction at most
        ``collinear_tol`` and at rounding level) compare as ``I(i, j) = 0``
        (:func:`paralingam.search.reference.pairwise_statistics`).
    engine : {"cpu", "numpy"}
        Where the pair statistics are computed: the compiled CPU engine
        (default; OpenMP over the pairs of all groups, float64) or the plain
        numpy reference. Both give the same order.
    n_threads : int, optional
        Threads of the compiled engine.
    return_scores : bool
        Also return the root's score of each iteration that compared.

    Returns
    -------
    order : list of int
    scores : list of float
        Only with ``return_scores``.
    """
    from ..search.reference import CANDIDATE, statuses

    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}; got {engine!r}")
    if n_threads is not None:
        n_threads = check_int("n_threads", n_threads, high=MAX_THREADS)
    p = X_list[0].shape[1]
    prior = None
    if prior_knowledge is not None:
        prior = PriorKnowledge(prior_knowledge, p, soft=apply_prior_knowledge_softly)
    # Each group's columns scaled by powers of two (exact: the residuals are
    # those of the data scaled the same way, and the standardised statistics
    # the same bits), so that the variances of tiny columns (|x| ~ 1e-170)
    # cannot underflow, as in paralingam.fit's search.
    data = [np.array(X, dtype=np.float64, copy=True) for X in X_list]
    for X in data:
        _preparation.scale_columns(X, _preparation.column_exponents(X))
    total = sum(len(X) for X in data)
    weights = [len(X) / total for X in data]
    remaining = list(range(p))
    order, root_scores = [], []
    warned = set()
    while remaining:
        if len(remaining) == 1:
            order.append(remaining.pop())
            break
        status = statuses(prior, remaining)
        cands = np.flatnonzero(status == CANDIDATE)
        if len(cands) == 1:
            best = cands[0]
        else:
            Z_list, empty = _standardised(data, remaining, warned)
            # (NaN columns, already named: numpy's engine would warn again per pair)
            with np.errstate(invalid="ignore") if empty else contextlib.nullcontext():
                score = multi_group_scores(Z_list, weights, status, collinear_tol, engine,
                                           n_threads)
            best = cands[int(np.argmin(score[cands]))]  # first minimum, as lingam's argmax
            root_scores.append(float(score[best]))
        root = remaining[best]
        order.append(root)
        remaining.remove(root)
        for X in data:  # lingam's _residual: xi - cov(xi, xr) / var(xr) * xr
            xr = X[:, root]
            rest = X[:, remaining]
            cov = ((rest - rest.mean(axis=0)) * (xr - xr.mean())[:, None]).mean(axis=0)
            X[:, remaining] = rest - (cov / np.var(xr))[None, :] * xr[:, None]
    if return_scores:
        return order, root_scores
    return order


def _standardised(data, remaining, warned):
    """Each group's remaining columns standardised, warning once for a column with no variance left.

    Returns the standardised groups and whether any column has no variance
    left (its values are then NaN).

    Such a column is an exact combination of the variables already ordered
    (in that group): lingam divides by zero there, and so does this search
    (its scores are then NaN), which does not apply the single-group
    degenerate-data policy. numpy's bare "invalid value" warning becomes a
    :class:`paralingam.DegenerateDataWarning` naming the columns and groups.
    """
    from .._api import DegenerateDataWarning
    from ..search.reference import standardise

    Z_list, empty, new = [], False, {}
    for g, X in enumerate(data):
        with np.errstate(invalid="ignore", divide="ignore"):
            Z = standardise(X[:, remaining])
        Z_list.append(Z)
        for k in np.flatnonzero(~np.isfinite(Z).all(axis=0)):
            empty = True
            if remaining[k] not in warned:
                new.setdefault(remaining[k], []).append(g)
    if new:
        warned.update(new)
        cols = ", ".join(f"column {j} (group{'s' if len(groups) > 1 else ''} "
                         f"{', '.join(map(str, groups))})" for j, groups in sorted(new.items()))
        warnings.warn(
            f"multi-group DirectLiNGAM: no variance left in {cols} once the variables already "
            "ordered are regressed out (exact linear dependence); this search, like lingam's, "
            "divides by zero there, so such a column's place in the order means nothing. Remove "
            "exact duplicates and combinations of columns first", DegenerateDataWarning,
            stacklevel=4)
    return Z_list, empty


class MultiGroupDirectLiNGAM:
    """DirectLiNGAM on several data sets with one causal order (lingam's interface).

    A drop-in replacement for ``lingam.MultiGroupDirectLiNGAM`` (lingam
    1.13): the same parameters, attributes, methods and results.

    Parameters
    ----------
    random_state : int, numpy.random.RandomState or None
        Seeds the resamples of :meth:`bootstrap`; ``None`` draws from numpy's
        global random state as lingam does.
    prior_knowledge : array-like, shape (n_features, n_features), optional
        lingam's prior-knowledge matrix, shared by the groups. A DataFrame
        labelled with the groups' column names (those of the first group
        given as a DataFrame) is matched by label, as in :func:`paralingam.fit`.
    apply_prior_knowledge_softly : bool
    backend : {"auto", "cpu", "cuda"}
        Where the adaptive lasso of the adjacency step runs (from
        ``paralingam.adjacency.CUDA_LASSO_MIN_FEATURES`` variables on the GPU
        with ``"cuda"``). The order search runs on the compiled CPU engine on
        every backend, ``"cuda"`` included (the GPU search scores one data
        set only).
    adjacency : {"adaptive_lasso", "ols"}
        Edge estimator (lingam's adaptive lasso by default).
    coef_threshold : float, optional
        Coefficients with ``|b| < coef_threshold`` are set to zero.
    n_threads : int, optional
        Threads of the order search and of the adaptive lasso (default:
        OpenMP's, at most the usable cores).

    Attributes
    ----------
    causal_order_ : list of int
    adjacency_matrices_ : list of ndarray, each (n_features, n_features)
        One matrix per group.
    adjacency_matrix_ : ndarray
        The last group's matrix (lingam inherits it from DirectLiNGAM).
    """

    def __init__(self, random_state=None, prior_knowledge=None, apply_prior_knowledge_softly=False,
                 backend="auto", adjacency="adaptive_lasso", coef_threshold=None, n_threads=None):
        self.random_state = random_state
        self.prior_knowledge = prior_knowledge
        self.apply_prior_knowledge_softly = apply_prior_knowledge_softly
        self.backend = backend
        self.adjacency = adjacency
        self.coef_threshold = coef_threshold
        self.n_threads = n_threads

    # ------------------------------------------------------------------

    def _check_X_list(self, X_list, with_names=False):
        """The groups as checked float64 arrays (and, ``with_names``, the
        column names of the first group given as a DataFrame, or None)."""
        if not isinstance(X_list, list):
            raise ValueError(f"X_list must be a list of data sets; got {type(X_list).__name__}")
        if len(X_list) < 2:
            raise ValueError("X_list must be a list containing at least two items")
        checked = []
        for g, X in enumerate(X_list):
            try:
                checked.append(as_data_matrix(X))
            except ValueError as exc:  # (and DataTypeError): which group, as well as what
                raise type(exc)(f"X_list[{g}]: {exc}") from None
        out = [X for X, _ in checked]
        p = out[0].shape[1]
        bad = [g for g, X in enumerate(out) if X.shape[1] != p]
        if bad:
            raise ValueError(f"X_list must be a list with the same number of features: group 0 has "
                             f"{p}, groups {bad} have {[out[g].shape[1] for g in bad]}")
        if with_names:
            return out, next((names for _, names in checked if names is not None), None)
        return out

    def _settings(self, p, names=None):
        """The checked prior knowledge (a labelled DataFrame matched to the
        groups' column ``names`` by label, as in :func:`paralingam.fit`) and
        coefficient threshold."""
        from .. import _api
        from ..search import _backends
        from ..adjacency import ADJACENCY_METHODS

        if self.adjacency not in ADJACENCY_METHODS:
            raise ValueError(f"adjacency must be one of {ADJACENCY_METHODS}; got {self.adjacency!r}")
        if self.backend not in _backends.BACKENDS:
            raise ValueError(f"backend must be one of {_backends.BACKENDS}; got {self.backend!r}")
        if self.n_threads is not None:
            check_int("n_threads", self.n_threads, high=MAX_THREADS)
        pk = None
        if self.prior_knowledge is not None:
            pk = PriorKnowledge(_api._aligned_prior(self.prior_knowledge, names), p,
                                soft=bool(self.apply_prior_knowledge_softly)).matrix
        return pk, check_coef_threshold(self.coef_threshold)

    def _fit_groups(self, data, pk, coef_threshold, backend):
        from ..adjacency import estimate_adjacency

        order = multi_group_causal_order(data, pk, bool(self.apply_prior_knowledge_softly),
                                         n_threads=self.n_threads)
        matrices = []
        for X in data:
            B = estimate_adjacency(X, order, method=self.adjacency, prior_knowledge=pk,
                                   backend=backend, n_threads=self.n_threads)
            if coef_threshold is not None:
                B[np.abs(B) < coef_threshold] = 0.0
            matrices.append(B)
        return [int(i) for i in order], matrices

    @staticmethod
    def _adjacency_backend(backend):
        from ..search import _backends

        resolved = _backends.resolve_backend(backend)
        return resolved if resolved in ("cpu", "cuda") else None

    def fit(self, X_list):
        """Fit the model to several data sets with the same variables.

        Parameters
        ----------
        X_list : list of array-like, each (n_samples_g, n_features)

        Returns
        -------
        self : MultiGroupDirectLiNGAM
        """
        data, names = self._check_X_list(X_list, with_names=True)
        pk, coef_threshold = self._settings(data[0].shape[1], names)
        order, matrices = self._fit_groups(data, pk, coef_threshold,
                                           self._adjacency_backend(self.backend))
        self.n_features_in_ = data[0].shape[1]
        self.causal_order_ = order
        self.adjacency_matrices_ = matrices
        self.adjacency_matrix_ = matrices[-1]
        return self

    def bootstrap(self, X_list, n_sampling, *, progress="auto", client=None):
        """Bootstrap: each group resampled with replacement, then fitted jointly.

        Resamples are drawn as lingam draws them (``sklearn.utils.resample``
        of each group in turn). As in lingam, the model is left fitted on the
        last resample.

        Parameters
        ----------
        X_list : list of array-like
        n_sampling : int
        progress : bool or {"auto"}, default "auto"
            Report progress on stderr: ``True`` always, ``"auto"`` when
            stderr is a terminal, ``False`` never (as
            :meth:`paralingam.DirectLiNGAM.bootstrap`).
        client : distributed.Client, optional
            Fit the resamples on the workers of this Dask cluster (see the
            user guide's "Distributed bootstrap"). The resamples are drawn
            here as without a client, so the result is the same; the groups
            go to each worker once. Needs ``pip install "paralingam[dask]"``.

        Returns
        -------
        list of BootstrapResult
            One per group (``adjacency_matrices_``, ``total_effects_``).
        """
        from sklearn import config_context
        from sklearn.utils import check_random_state, resample

        from .. import _blas
        from .._progress import check_progress
        from .estimator import _bootstrap_progress

        data, names = self._check_X_list(X_list, with_names=True)
        if isinstance(n_sampling, bool) or not isinstance(n_sampling, (numbers.Integral, np.integer)) \
                or n_sampling <= 0:
            raise ValueError(f"n_sampling must be an integer greater than 0; got {n_sampling!r}")
        check_progress(progress)
        p = data[0].shape[1]
        pk, coef_threshold = self._settings(p, names)
        rng = check_random_state(self.random_state)
        G = len(data)
        if client is not None:
            from ._distributed import bootstrap_multigroup

            template = MultiGroupDirectLiNGAM(
                prior_knowledge=self.prior_knowledge,
                apply_prior_knowledge_softly=self.apply_prior_knowledge_softly,
                backend=self.backend, adjacency=self.adjacency,
                coef_threshold=self.coef_threshold, n_threads=self.n_threads)
            with _bootstrap_progress(n_sampling, progress) as reporter:
                ams, tes, order = bootstrap_multigroup(template, data, pk, coef_threshold,
                                                       n_sampling, rng, client, reporter)
            matrices = [ams[g, -1].copy() for g in range(G)]
        else:
            backend = self._adjacency_backend(self.backend)
            ams = np.zeros((G, n_sampling, p, p))
            tes = np.zeros((G, n_sampling, p, p))
            indices = [np.arange(len(X)) for X in data]
            with _blas.in_this_thread(), \
                    _bootstrap_progress(n_sampling, progress) as reporter:
                for k in range(n_sampling):
                    with config_context(skip_parameter_validation=True):
                        rows = [resample(idx, random_state=rng) for idx in indices]
                    order, matrices = self._fit_groups([X[r] for X, r in zip(data, rows)], pk,
                                                       coef_threshold, backend)
                    for g, B in enumerate(matrices):
                        ams[g, k] = B
                        tes[g, k] = total_effects(B, order)
                    reporter.update(1)
        self.n_features_in_ = p
        self.causal_order_ = order
        self.adjacency_matrices_ = matrices
        self.adjacency_matrix_ = matrices[-1]
        return [BootstrapResult(am, te) for am, te in zip(ams, tes)]

    def estimate_total_effect(self, X_list, from_index, to_index):
        """Total effect in each group, by regression on ``from_index`` and its parents.

        Returns
        -------
        list of float
            One effect per group.
        """
        self._check_fitted()
        data = self._check_X_list(X_list)
        warn_if_order_reversed(self.causal_order_, from_index, to_index, from_index, to_index)
        effects = []
        for X, am in zip(data, self.adjacency_matrices_):
            parents = np.where(np.abs(am[from_index]) > 0)[0]
            predictors = np.concatenate([[from_index], parents]).astype(np.intp)
            effects.append(regression_effect(X, predictors, to_index))
        return effects

    def estimate_total_effect2(self, from_index, to_index):
        """Total effect in each group from its adjacency matrix (sum over paths)."""
        from ..utils import calculate_total_effect

        self._check_fitted()
        warn_if_order_reversed(self.causal_order_, from_index, to_index, from_index, to_index)
        return [calculate_total_effect(am, from_index, to_index)
                for am in self.adjacency_matrices_]

    def get_error_independence_p_values(self, X_list):
        """HSIC p-values between the error variables of each group.

        Returns
        -------
        ndarray, shape (n_groups, n_features, n_features)
        """
        from .hsic import error_p_values

        self._check_fitted()
        data = self._check_X_list(X_list)
        return np.array([error_p_values(X, am) for X, am in zip(data, self.adjacency_matrices_)])

    def _check_fitted(self):
        if not hasattr(self, "causal_order_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this MultiGroupDirectLiNGAM instance is not fitted yet; "
                                 "call fit(X_list) first")

