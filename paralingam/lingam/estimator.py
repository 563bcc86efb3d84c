"""``DirectLiNGAM``: a scikit-learn estimator with lingam 1.13's interface.

``paralingam.DirectLiNGAM`` is meant as a drop-in replacement for
``lingam.DirectLiNGAM``: the same constructor arguments, attributes and methods
(``fit``, ``bootstrap``, ``estimate_total_effect``,
``get_error_independence_p_values``), with the causal order searched by
:func:`paralingam.fit` and the edges estimated by
:mod:`paralingam.adjacency`.
"""

import functools
import inspect
import numbers
import time
from collections.abc import Mapping

import numpy as np
from sklearn import config_context
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state, resample

from .. import _api, _blas, _memory
from ..search import _backends
from .._progress import Progress, check_progress
from .._validation import _as_data_matrix, as_data_matrix, check_coef_threshold, default_threads
from ..adjacency import ADJACENCY_METHODS
from .bootstrap import (BOOTSTRAP_PHASES, BootstrapResult, fit_resample, regression_effect,
                        resample_source, warn_if_order_reversed)
from .hsic import error_p_values
from ..prior import PriorKnowledge

MEASURES = ("pwling",)
# lingam's other measures, which paralingam does not implement.
_LINGAM_ONLY_MEASURES = ("kernel", "pwling_fast")


def _check_random_state(random_state):
    """Refuse a ``random_state`` that :meth:`DirectLiNGAM.bootstrap` could not use."""
    if random_state is None or isinstance(random_state, np.random.RandomState):
        return
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, (bool, np.bool_)):
        if 0 <= random_state < 2**32:
            return
        raise ValueError(f"random_state must be in [0, 2**32 - 1]; got {random_state!r}")
    hint = (" (the bootstrap draws its resamples as lingam does, with a RandomState: "
            "pass an int seed instead of a Generator)"
            if isinstance(random_state, np.random.Generator) else "")
    raise ValueError("random_state must be None, an int or a numpy.random.RandomState; "
                     f"got {random_state!r}{hint}")


@functools.lru_cache(maxsize=None)
def _fit_keywords():
    """The public keyword arguments of :func:`paralingam.fit` (what ``fit_options`` may set)."""
    return frozenset(k for k in inspect.signature(_api.fit).parameters if not k.startswith("_"))


class DirectLiNGAM(BaseEstimator):
    """DirectLiNGAM with the causal order searched by ParaLiNGAM.

    A drop-in replacement for ``lingam.DirectLiNGAM`` (lingam 1.13): the same
    causal order (``measure="pwling"``), the same adjacency matrix (lingam's
    adaptive lasso by default) and the same result API, much faster.

    Parameters
    ----------
    random_state : int, numpy.random.RandomState or None
        Seeds the draws of :meth:`bootstrap`. ``None`` draws from numpy's
        global random state exactly as lingam does, so that after the same
        ``np.random.seed(...)`` both draw the same resamples. (lingam accepts
        but ignores ``random_state``; here an int makes the bootstrap
        reproducible whatever the global state.)
    prior_knowledge : array-like, shape (n_features, n_features), optional
        lingam's prior-knowledge matrix: ``prior_knowledge[i, j]`` is ``0``
        when ``x_j`` has no directed path to ``x_i``, ``1`` when it has one,
        ``-1`` when unknown. A DataFrame labelled with the data's column
        names is matched by label, as in :func:`paralingam.fit`.
    apply_prior_knowledge_softly : bool
        Apply the prior knowledge softly (lingam's option).
    measure : {"pwling"}
        Independence measure. Only lingam's default ``"pwling"`` is
        implemented; ``"kernel"`` and ``"pwling_fast"`` raise ValueError.
    backend : {"auto", "cpu", "cuda"}
        Where the causal order is searched (see :func:`paralingam.fit`).
    adjacency : {"adaptive_lasso", "ols"}
        Edge estimator: lingam's adaptive lasso (default, sparse) or least
        squares on all earlier variables (dense, fastest).
    coef_threshold : float, optional
        Coefficients with ``|b| < coef_threshold`` are set to zero after the
        adjacency step.
    fit_options : dict, optional
        Further keyword arguments of :func:`paralingam.fit` (``threshold``,
        ``gamma0``, ``c``, ``dtype``, ``n_threads``, ...). ``n_threads`` also
        sets the threads of the adaptive lasso.
    devices : None, "all" or list of int, optional
        CUDA backend: the GPUs that share each causal-order search (see
        :func:`paralingam.fit`; default: one GPU). (``fit_options`` may
        carry it instead, as VARLiNGAM's ``fit_options`` do.)

    Attributes
    ----------
    causal_order_ : list of int
        Column indices, root first.
    adjacency_matrix_ : ndarray, shape (n_features, n_features)
        ``B[i, j]`` the direct effect of column ``j`` on column ``i``.
    n_features_in_ : int
        Number of columns seen in ``fit``.
    feature_names_in_ : ndarray of str, shape (n_features,)
        Column names; only when ``fit`` got a DataFrame whose column names
        are all strings (scikit-learn's rule).
    causal_order_names_ : list of str
        The causal order as column names: ``feature_names_in_`` when fitted
        on a DataFrame, else lingam's labels ``"x0", "x1", ...``.
    fit_stats_ : dict
        ``paralingam.fit``'s statistics of the search (backend, timings, ...).

    Notes
    -----
    Differences from lingam, all deliberate: attributes ending in ``_`` exist
    only after ``fit`` (scikit-learn's convention; lingam returns None);
    parameters are checked in ``fit``, not in the constructor; ``bootstrap``
    leaves the fitted model as it was (lingam leaves the last resample's fit
    in it).
    """

    def __init__(
        self,
        random_state=None,
        prior_knowledge=None,
        apply_prior_knowledge_softly=False,
        measure="pwling",
        backend="auto",
        adjacency="adaptive_lasso",
        coef_threshold=None,
        fit_options=None,
        devices=None,
    ):
        self.random_state = random_state
        self.prior_knowledge = prior_knowledge
        self.apply_prior_knowledge_softly = apply_prior_knowledge_softly
        self.measure = measure
        self.backend = backend
        self.adjacency = adjacency
        self.coef_threshold = coef_threshold
        self.fit_options = fit_options
        self.devices = devices

    # ------------------------------------------------------------------
    # fit
    # ------------------------------------------------------------------

    def fit(self, X, y=None):
        """Learn the causal order and the adjacency matrix of ``X``.

        Parameters
        ----------
        X : array-like or pandas.DataFrame, shape (n_samples, n_features)
            Observations, one column per variable.
        y : None
            Ignored (scikit-learn convention).

        Returns
        -------
        self : DirectLiNGAM
        """
        # the one check of the data on this path; float input comes as a
        # ScaledData over the input itself, as in paralingam.fit: no float64
        # copy of the data (memory, and a pass over it) unless a step needs one
        data, names, exponents = _as_data_matrix(X, scaled="deferred")
        settings = self._checked_settings(data.shape[1], names)
        self._check_samples(data.shape, settings)
        order, B, stats = self._fit_data(data, settings, settings["backend"],
                                         exponents=exponents)
        self.n_features_in_ = data.shape[1]
        columns = list(getattr(X, "columns", []))
        if names is not None and all(isinstance(c, str) for c in columns):
            # scikit-learn's rule: names only when every column name is a string
            self.feature_names_in_ = np.asarray(columns, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.causal_order_ = order
        self.adjacency_matrix_ = B
        self.fit_stats_ = stats
        return self

    @property
    def causal_order_names_(self):
        """The causal order as column names (lingam's ``x0, x1, ...`` without names)."""
        self._check_fitted()
        labels = self._labels()
        return [labels[i] for i in self.causal_order_]

    def _labels(self):
        names = getattr(self, "feature_names_in_", None)
        if names is not None:
            return [str(v) for v in names]
        return [f"x{i}" for i in range(self.n_features_in_)]

    def _checked_settings(self, n_features, names=None):
        """Validate the parameters for data with ``n_features`` columns named
        ``names`` (or None): a labelled prior-knowledge DataFrame is matched to
        them by label, as :func:`paralingam.fit` matches it."""
        if self.measure not in MEASURES:
            hint = (f"; lingam's {self.measure!r} measure is not implemented in paralingam, "
                    "use lingam.DirectLiNGAM for it") if self.measure in _LINGAM_ONLY_MEASURES else ""
            raise ValueError(f"measure must be one of {MEASURES}; got {self.measure!r}{hint}")
        if self.adjacency not in ADJACENCY_METHODS:
            raise ValueError(
                f"adjacency must be one of {ADJACENCY_METHODS}; got {self.adjacency!r}")
        if self.backend not in _backends.BACKENDS:
            raise ValueError(f"backend must be one of {_backends.BACKENDS}; got {self.backend!r}")
        coef_threshold = check_coef_threshold(self.coef_threshold)
        if not isinstance(self.apply_prior_knowledge_softly, (bool, np.bool_)):
            raise ValueError("apply_prior_knowledge_softly must be True or False; got "
                             f"{self.apply_prior_knowledge_softly!r}")
        _check_random_state(self.random_state)
        if self.fit_options is not None and not isinstance(self.fit_options, Mapping):
            # dict("abc") fails with "dictionary update sequence element #0"
            raise ValueError("fit_options must be None or a dict of paralingam.fit keyword "
                             f"arguments, such as {{'n_threads': 1}}; got {self.fit_options!r}")
        options = dict(self.fit_options or {})
        reserved = {"backend", "prior_knowledge", "apply_prior_knowledge_softly"} & set(options)
        if reserved:
            raise ValueError(
                f"fit_options must not set {sorted(reserved)}: they are DirectLiNGAM parameters")
        public = _fit_keywords()
        if "feature_names" in options:
            raise ValueError("fit_options must not set feature_names: pass a pandas DataFrame "
                             "to name the columns (they become feature_names_in_)")
        unknown = set(options) - public
        if unknown:
            raise ValueError(f"fit_options has keys that paralingam.fit does not take: "
                             f"{sorted(unknown, key=repr)}")
        pk = None
        if self.prior_knowledge is not None:  # validated once, by paralingam.prior
            pk = PriorKnowledge(_api._aligned_prior(self.prior_knowledge, names), n_features,
                                soft=bool(self.apply_prior_knowledge_softly)).matrix
        if self.devices is not None:
            if options.get("devices") is not None:
                raise ValueError("devices is set twice, as a parameter and in fit_options; "
                                 "set it once")
            options["devices"] = self.devices  # checked by paralingam.fit
        return {
            "prior_knowledge": pk,
            "backend": self.backend,
            "fit_options": options,
            "coef_threshold": coef_threshold,
        }

    def _check_samples(self, shape, settings):
        """Refuse, before the search, data the adjacency method cannot fit in any order."""
        if self.adjacency == "adaptive_lasso":
            from ..adjacency._adaptive_lasso import check_samples_before_search

            check_samples_before_search(*shape, settings["prior_knowledge"])

    def _fit_data(self, data, settings, backend, absmax=None, exponents=None):
        """Order search and adjacency on validated data: ``(order, B, stats)``.

        ``data`` is a validated float64 copy, which this overwrites (its
        columns are rescaled exactly); ``absmax``, its columns' largest
        ``|x|`` where known. With ``exponents``, ``data`` come scaled by
        them already: ``_as_data_matrix(..., scaled="deferred")``'s data (a
        ``ScaledData`` over the input, or a scaled copy), which this only
        reads. The phases of :func:`paralingam.fit`, with this
        estimator's adjacency method: it runs where the search ran (the
        adaptive lasso's paths on the GPU with the CUDA backend) and takes
        its scatter matrix from the search's correlation matrix.
        """
        options = dict(settings["fit_options"])
        tuning = _api._tuning_with_deprecated(
            options.pop("tuning", None), **{k: options.pop(k, None)
                                            for k in ("threads_per_block", "blocks", "warps_per_pair")})
        pk = settings["prior_knowledge"]
        if pk is not None:
            options["prior_knowledge"] = pk
            options["apply_prior_knowledge_softly"] = bool(self.apply_prior_knowledge_softly)
        n_threads = options.get("n_threads")
        t0 = time.perf_counter()
        fit_settings = _api.check_settings(data.shape[1], None, backend=backend, tuning=tuning,
                                           n_samples=data.shape[0], **options)
        result = _api.fit_checked(data, None, fit_settings, t0, exponents=exponents,
                                  absmax=absmax, method=self.adjacency,
                                  adjacency_threads=n_threads or default_threads(),
                                  n_threads=n_threads, prior_knowledge=pk)
        B = result.adjacency_matrix
        if settings["coef_threshold"] is not None:  # on the data's own scale
            B[np.abs(B) < settings["coef_threshold"]] = 0.0
        return [int(i) for i in result.causal_order], B, result.stats

    # ------------------------------------------------------------------
    # lingam's analysis methods
    # ------------------------------------------------------------------

    def estimate_total_effect(self, X, from_index, to_index):
        """Total effect of one variable on another, by regression.

        The regression of ``X[:, to_index]`` on ``X[:, from_index]`` and the
        parents of ``from_index`` (non-zero entries of its row of
        ``adjacency_matrix_``), with intercept; the coefficient of
        ``from_index`` is the total effect. Warns, as lingam does, when
        ``to_index`` comes before ``from_index`` in the causal order.

        Parameters
        ----------
        X : array-like or pandas.DataFrame, shape (n_samples, n_features)
            Original data.
        from_index, to_index : int or str
            Column indices, or column names when fitted on a DataFrame.

        Returns
        -------
        float
        """
        data = self._checked_data(X)
        frm, to = self._column_index(from_index), self._column_index(to_index)
        warn_if_order_reversed(self.causal_order_, frm, to, from_index, to_index)
        parents = np.flatnonzero(np.abs(self.adjacency_matrix_[frm]) > 0)
        predictors = np.concatenate([[frm], parents]).astype(np.intp)
        return regression_effect(data, predictors, to)

    def get_error_independence_p_values(self, X, *, progress="auto"):
        """p-values of HSIC tests of independence between the error variables.

        The errors are ``E = X - X B^T``; each pair of columns of ``E`` gets
        the HSIC test with the gamma approximation (lingam's
        ``hsic_test_gamma``). The error of a fully explained variable (its
        variance at most ``paralingam.search.policy.EXPLAINED_TOL`` times the
        variable's) is zero up to rounding, so independent of the others:
        its p-values are 1 where the test would give NaN or rounding noise.

        Parameters
        ----------
        X : array-like or pandas.DataFrame, shape (n_samples, n_features)
            Original data.
        progress : bool or {"auto"}, default "auto"
            Report progress on stderr: ``True`` always, ``"auto"`` when
            stderr is a terminal, ``False`` never. Uses tqdm when it is
            installed (see the user guide's "Progress").

        Returns
        -------
        ndarray, shape (n_features, n_features)
            Symmetric, zero diagonal.

        Raises
        ------
        ValueError
            When ``X`` has fewer than 6 samples (and two or more columns):
            the gamma approximation needs 6 (``paralingam.lingam.hsic.MIN_SAMPLES``).
        MemoryError
            When the working arrays (``O(n_samples * n_features)``; no
            ``n x n`` matrix is formed) do not fit.

        Notes
        -----
        The Gram matrices are summed tile by tile (docs/user_guide/p_values.rst),
        on the GPU when this estimator's ``backend`` resolves to CUDA.
        """
        data = self._checked_data(X)
        return error_p_values(data, self.adjacency_matrix_, backend=self.backend, progress=progress)

    # ------------------------------------------------------------------
    # bootstrap
    # ------------------------------------------------------------------

    def bootstrap(self, X, n_sampling, *, progress="auto", client=None):
        """Fit ``n_sampling`` bootstrap resamples of ``X``.

        Resamples are drawn as lingam draws them (``sklearn.utils.resample``
        with this estimator's ``random_state``; ``None`` is numpy's global
        state, as in lingam), so that the same seed gives the same resamples
        and hence the same counts. The fitted model itself is left unchanged.

        Parameters
        ----------
        X : array-like or pandas.DataFrame, shape (n_samples, n_features)
            Training data.
        n_sampling : int
            Number of resamples, > 0.
        progress : bool or {"auto"}, default "auto"
            Report progress on stderr: ``True`` always, ``"auto"`` when
            stderr is a terminal (not in pipelines, logs or notebooks),
            ``False`` never. Uses tqdm when it is installed, else a plain
            line (see the user guide's "Progress").
        client : distributed.Client, optional
            Fit the resamples on the workers of this Dask cluster (one worker
            per GPU, or CPU workers; see the user guide's "Distributed
            bootstrap"). The resamples are drawn here as without a client,
            so the result is the same; the data go to each worker once.
            Needs ``pip install "paralingam[dask]"``.

        Returns
        -------
        BootstrapResult
            ``adjacency_matrices_``, ``total_effects_`` (``[k, to, from]``,
            sums over directed paths, as lingam 1.13) and
            ``resampled_indices_``; also ``timings_``, the seconds spent
            resampling, searching orders, estimating adjacency matrices and
            total effects, summed over the resamples.
        """
        if isinstance(n_sampling, bool) or not isinstance(n_sampling, (numbers.Integral, np.integer)) \
                or n_sampling <= 0:
            raise ValueError(f"n_sampling must be an integer greater than 0; got {n_sampling!r}")
        check_progress(progress)
        data, names = resample_source(X)
        return self._bootstrap(data, names, n_sampling, progress, client)

    def _bootstrap(self, data, names, n_sampling, progress, client=None):
        """:meth:`bootstrap` of checked data (``resample_source``'s) with the columns' ``names``.

        The command line gives the names of its file's header here, for the
        messages (a resample's constant columns, say).
        """
        p = data.shape[1]
        settings = self._checked_settings(p, names)
        self._check_samples(data.shape, settings)
        if client is not None:
            from ._distributed import bootstrap_directlingam

            with _bootstrap_progress(n_sampling, progress) as reporter:
                return bootstrap_directlingam(self, data, names, n_sampling, settings, client,
                                              reporter)
        # Resolve "auto" once: every resample then runs on the same backend,
        # whose caches (CUDA context, compiled kernels) stay warm between them.
        backend = _backends.resolve_backend(settings["backend"])
        rng = check_random_state(self.random_state)
        self._check_bootstrap_memory(data.shape[0], p, n_sampling, settings, backend)

        adjacency_matrices = np.zeros((n_sampling, p, p))
        effects = np.zeros((n_sampling, p, p))
        resampled_indices = []
        timings = dict.fromkeys(BOOTSTRAP_PHASES, 0.0)
        # Per resample the linear algebra is small (p x p solves, one n x p
        # product): BLAS threads gain nothing there and, next to the search's own
        # threads, cost more than the work itself. One BLAS thread for the loop.
        with _blas.in_this_thread(), _bootstrap_progress(n_sampling, progress) as reporter:
            self._bootstrap_loop(data, names, n_sampling, settings, backend, rng,
                                 adjacency_matrices, effects, resampled_indices, timings,
                                 reporter)
        result = BootstrapResult(adjacency_matrices, effects, resampled_indices=resampled_indices)
        # Not in lingam's result: where the time went, in seconds over all resamples.
        result.timings_ = timings
        return result

    def _check_bootstrap_memory(self, n, p, n_sampling, settings, backend):
        """InsufficientMemoryError before the bootstrap allocates its results.

        The results (two n_sampling x p x p arrays) are held while every
        resample is fitted: they and the largest step of one fit must fit
        together.
        """
        threads = settings["fit_options"].get("n_threads") or default_threads()
        dtype = settings["fit_options"].get("dtype")
        fit_peak = max(need for _, need, _ in _memory.fit_plan(
            n, p, backend=backend, use_float=dtype != "float64", n_threads=threads,
            adjacency=self.adjacency))
        results = _memory.bootstrap_result_bytes(n_sampling, n, p)
        _memory.require(
            f"the bootstrap's results ({n_sampling} resamples x 2 x n_features^2 float64: "
            f"{_memory.format_bytes(results)}) and one resample's fit "
            f"({_memory.format_bytes(fit_peak)})",
            results + fit_peak, "use fewer resamples (n_sampling; run several bootstraps "
            "and concatenate their adjacency_matrices_) or fewer variables")

    def _bootstrap_loop(self, data, names, n_sampling, settings, backend, rng,
                        adjacency_matrices, effects, resampled_indices, timings, reporter):
        index = np.arange(data.shape[0])
        for k in range(n_sampling):
            t0 = time.perf_counter()
            # lingam's draw: sklearn's resample with this random state.
            with config_context(skip_parameter_validation=True):
                rows = resample(index, random_state=rng)
            timings["resample"] += time.perf_counter() - t0
            adjacency_matrices[k], effects[k] = fit_resample(
                self, data, rows, k, names, settings, backend, timings)
            resampled_indices.append(rows)
            reporter.update(1)

    # ------------------------------------------------------------------
    # helpers
    # ------------------------------------------------------------------

    def _check_fitted(self):
        """NotFittedError (an AttributeError and a ValueError) before ``fit``."""
        if not hasattr(self, "causal_order_"):
            raise NotFittedError(
                "this DirectLiNGAM instance is not fitted yet; call fit(X) first")

    def _checked_data(self, X):
        """Validated data for a fitted model: same number (and names) of columns."""
        self._check_fitted()
        data, names = as_data_matrix(X)
        if data.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {data.shape[1]} columns but the model was fitted on "
                f"{self.n_features_in_} (shape {data.shape})")
        fitted = getattr(self, "feature_names_in_", None)
        if names is not None and fitted is not None and list(names) != list(fitted):
            diff = [f"{a!r} != {b!r}" for a, b in zip(names, fitted) if a != b]
            raise ValueError(f"X's column names differ from those seen in fit: {', '.join(diff[:5])}")
        return data

    def _column_index(self, key):
        """A column index from an int or, when fitted on a DataFrame, a column name."""
        names = getattr(self, "feature_names_in_", None)
        if isinstance(key, str):
            if names is None or key not in list(names):
                raise ValueError(f"unknown column {key!r}")
            return list(names).index(key)
        if isinstance(key, (numbers.Integral, np.integer)) and not isinstance(key, bool) \
                and 0 <= key < self.n_features_in_:
            return int(key)
        raise ValueError(f"column index must be an int in [0, {self.n_features_in_}); got {key!r}")


def _bootstrap_progress(n_sampling, progress):
    """The bootstraps' progress bar (:mod:`paralingam._progress`)."""
    return Progress(n_sampling, progress, desc="bootstrap", unit="resample")
