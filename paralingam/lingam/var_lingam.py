"""``VARLiNGAM``: lingam 1.13's VAR-LiNGAM on paralingam's DirectLiNGAM.

VAR-LiNGAM (Hyvarinen, Zhang, Shimizu and Hoyer, JMLR 2010) fits a vector
autoregression, runs DirectLiNGAM on its residuals for the instantaneous
effects ``B0`` and derives the lagged effects ``B_tau = (I - B0) M_tau``,
optionally pruned by lingam's adaptive lasso on the lagged design.

:class:`VARLiNGAM` has lingam 1.13's interface and gives its results (the same
causal order; matrices to rounding) with three parts replaced:

* the VAR is fitted with numpy, reproducing statsmodels' ``VAR.fit(trend="n")``
  and its information criteria (the same least-squares call, the same
  formulas), so statsmodels is not needed;
* the order search and adjacency step of the residuals are
  :class:`paralingam.DirectLiNGAM`'s (``backend`` chooses CPU or CUDA);
* the pruning regressions of all variables run as one adaptive-lasso
  adjacency over the lagged design (:mod:`paralingam.adjacency`), instead of
  one sklearn ``LassoLarsIC`` per variable on a design lingam builds row by row.
"""

import numbers
import time

import numpy as np

from .._validation import as_data_matrix
from .bootstrap import (BootstrapResult, _simulate, _var_total_effects, find_all_paths,
                        regression_effect, warn_if_order_reversed)

__all__ = ["VARLiNGAM", "VARBootstrapResult", "fit_var", "var_residuals"]

CRITERIA = ("aic", "fpe", "hqic", "bic")

# Resamples simulated at once in the bootstrap: the recursion over time runs
# once per batch with a (batch, n_features) state, and a batch of
# (batch, n_samples, n_features) float64 stays small.
_SIMULATION_BATCH = 64


def _var_design(X, lags):
    """statsmodels' ``get_var_endog(X, lags, trend="n")``: row ``t`` is
    ``[x_{t-1}, x_{t-2}, ..., x_{t-lags}]`` for ``t = lags .. T-1``."""
    T = X.shape[0]
    return np.hstack([X[lags - tau:T - tau] for tau in range(1, lags + 1)])


def fit_var(X, lags, *, criteria=True):
    """Least-squares VAR(``lags``) without trend, as statsmodels fits it.

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features)
    lags : int
        Number of lags, >= 1.
    criteria : bool
        Compute the information criteria (else the third value is None).

    Returns
    -------
    coefs : ndarray, shape (lags, n_features, n_features)
        ``coefs[tau - 1]`` the matrix ``M_tau`` of ``x_t = sum_tau M_tau x_{t-tau} + e_t``.
    resid : ndarray, shape (n_samples - lags, n_features)
        The residuals ``e_t`` for ``t = lags .. n_samples - 1``.
    criteria : dict or None
        statsmodels' ``VARResults.info_criteria``: ``aic``, ``bic``, ``hqic``
        and ``fpe`` (Lutkepohl's definitions, on ``n_samples - lags``
        observations); NaN where the residuals' covariance is singular.
    """
    T, k = X.shape
    z = _var_design(X, lags)
    y = X[lags:]
    # statsmodels' call, so that the coefficients are the same to the last bit
    params = np.linalg.lstsq(z, y, rcond=1e-15)[0]
    resid = y - z @ params
    coefs = params.reshape((lags, k, k)).swapaxes(1, 2).copy()
    if not criteria:
        return coefs, resid, None

    nobs = T - lags
    df_model = k * lags
    df_resid = nobs - df_model
    free_params = lags * k * k
    ld = _log_det_mle_cov(resid, df_resid, nobs) if df_resid else -np.inf
    with np.errstate(over="ignore"):  # (fpe of a huge series: inf, as statsmodels')
        fpe = ((nobs + df_model) / df_resid) ** k * np.exp(ld) if df_resid else np.inf
    return coefs, resid, {
        "aic": ld + (2.0 / nobs) * free_params,
        "bic": ld + (np.log(nobs) / nobs) * free_params,
        "hqic": ld + (2.0 * np.log(np.log(nobs)) / nobs) * free_params,
        "fpe": fpe,
    }


def _log_det_mle_cov(resid, df_resid, nobs):
    """``log det(resid^T resid / nobs)`` by Cholesky, as statsmodels computes it;
    NaN where that matrix is not positive definite.

    Where the Cholesky fails on the residuals' own scale, their columns are
    scaled by powers of two first (exactly) and the scales added back to the
    log: tiny series (|x| ~ 1e-200) have covariances that underflow to zero.
    """
    from scipy.linalg import LinAlgError, cho_factor

    from .._preparation import column_exponents

    exponents = np.zeros(resid.shape[1], dtype=int)
    for attempt in range(2):
        if attempt:  # (the data's own scale failed)
            exponents = column_exponents(resid)
            resid = np.ldexp(resid, -exponents)
        with np.errstate(all="ignore"):
            sse = resid.T @ resid
            sigma = (sse / df_resid) * df_resid / nobs  # (statsmodels' sigma_u_mle, bit for bit)
        if not np.isfinite(sigma).all():
            continue
        try:
            c, _ = cho_factor(sigma, lower=True)
        except LinAlgError:
            continue
        return 2 * np.sum(np.log(c.diagonal())) + 2 * np.log(2.0) * np.sum(exponents)
    return np.nan


def var_residuals(X, coefs):
    """Residuals ``x_t - sum_tau M_tau x_{t-tau}`` for ``t = lags .. n_samples - 1``.

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features)
    coefs : ndarray, shape (lags, n_features, n_features)

    Returns
    -------
    ndarray, shape (n_samples - lags, n_features)
    """
    lags = coefs.shape[0]
    T = X.shape[0]
    estimated = np.zeros((T - lags, X.shape[1]))
    for tau in range(1, lags + 1):
        estimated += X[lags - tau:T - tau] @ coefs[tau - 1].T
    return X[lags:] - estimated


def _check_lags(lags):
    if isinstance(lags, bool) or not isinstance(lags, (numbers.Integral, np.integer)) or lags < 1:
        raise ValueError(f"lags must be an integer >= 1; got {lags!r}")
    return int(lags)


class VARLiNGAM:
    """VAR-LiNGAM with the instantaneous order searched by ParaLiNGAM.

    A drop-in replacement for ``lingam.VARLiNGAM`` (lingam 1.13): the same
    parameters, attributes, methods and results.

    Parameters
    ----------
    lags : int
        Number of lags (the largest tried when ``criterion`` is set).
    criterion : {"aic", "fpe", "hqic", "bic", None}
        Information criterion that picks the number of lags in ``1..lags``;
        ``None`` (or any other value, as in lingam) uses ``lags``.
    prune : bool
        Prune the adjacency matrices with lingam's adaptive lasso on the
        lagged design.
    ar_coefs : array-like, shape (lags, n_features, n_features), optional
        VAR coefficients to use instead of fitting the VAR.
    lingam_model : object, optional
        Model for the residuals, with ``fit``, ``causal_order_`` and
        ``adjacency_matrix_`` (a ``paralingam.DirectLiNGAM`` or a lingam
        model). Default: ``paralingam.DirectLiNGAM(backend=backend,
        fit_options=fit_options)``.
    random_state : int, numpy.random.RandomState or None
        Seeds the resamples of :meth:`bootstrap`. ``None`` draws from numpy's
        global random state as lingam does (lingam ignores this parameter).
    backend : {"auto", "cpu", "cuda"}
        Backend of the default DirectLiNGAM and of the pruning's adaptive
        lasso (not a lingam parameter).
    fit_options : dict, optional
        Further :func:`paralingam.fit` options of the default DirectLiNGAM
        (not a lingam parameter); ``n_threads`` also sets the threads of
        the pruning.

    Attributes
    ----------
    causal_order_ : list of int
        Causal order of the instantaneous effects.
    adjacency_matrices_ : ndarray, shape (1 + lags, n_features, n_features)
        ``B0, B1, ..., B_lags``; ``B_tau[i, j]`` the effect of ``x_j(t - tau)``
        on ``x_i(t)``.
    residuals_ : ndarray, shape (n_samples - lags, n_features)
        Residuals of the VAR.

    Notes
    -----
    As in lingam, ``fit`` keeps the lags it selected and the VAR coefficients
    it used: a later ``fit`` or ``bootstrap`` on the same object reuses those
    coefficients (it only recomputes the residuals), and ``bootstrap`` leaves
    the model fitted on its last resample. Create a new object to refit the
    VAR.
    """

    def __init__(self, lags=1, criterion="bic", prune=True, ar_coefs=None, lingam_model=None,
                 random_state=None, backend="auto", fit_options=None):
        self._lags = lags
        self._criterion = criterion
        self._prune = prune
        self._ar_coefs = None if ar_coefs is None else self._checked_ar_coefs(ar_coefs)
        self._lingam_model = lingam_model
        self._random_state = random_state
        self._backend = backend
        self._fit_options = fit_options
        self._causal_order = None
        self._adjacency_matrices = None
        self._residuals = None

    @staticmethod
    def _checked_ar_coefs(ar_coefs):
        M = np.array(ar_coefs, dtype=np.float64)
        if M.ndim != 3 or M.shape[1] != M.shape[2] or M.shape[0] < 1:
            raise ValueError("ar_coefs must have shape (lags, n_features, n_features); "
                             f"got {M.shape}")
        if not np.isfinite(M).all():
            raise ValueError("ar_coefs must be finite")
        return M

    # ------------------------------------------------------------------
    # fit
    # ------------------------------------------------------------------

    def fit(self, X):
        """Fit the model to the time series ``X``.

        Parameters
        ----------
        X : array-like or pandas.DataFrame, shape (n_samples, n_features)
            One row per time point, oldest first.

        Returns
        -------
        self : VARLiNGAM
        """
        self._causal_order = None
        self._adjacency_matrices = None
        X = self._checked_data(X)
        model = self._model()
        M_taus = self._ar_coefs
        if M_taus is None:
            M_taus, lags, residuals = self._estimate_var_coefs(X)
        else:
            if M_taus.shape[1] != X.shape[1]:
                raise ValueError(f"ar_coefs is for {M_taus.shape[1]} variables; X has "
                                 f"{X.shape[1]} columns")
            lags = M_taus.shape[0]
            if X.shape[0] <= lags:
                raise ValueError(f"X has {X.shape[0]} samples: not more than the {lags} lags")
            residuals = var_residuals(X, M_taus)
        self._ar_coefs = M_taus
        self._lags = lags
        self._residuals = residuals

        model.fit(residuals)
        order = [int(i) for i in model.causal_order_]
        B0 = np.asarray(model.adjacency_matrix_, dtype=np.float64)
        B_taus = self._calc_b(B0, M_taus)
        if self._prune:
            B_taus = self._pruning(X, B_taus, order)
        self._causal_order = order
        self._adjacency_matrices = B_taus
        return self

    def _checked_data(self, X):
        data, _ = as_data_matrix(X)
        if data.shape[1] < 2:
            raise ValueError(f"VARLiNGAM needs at least 2 variables; X has shape {data.shape}")
        return data

    def _model(self):
        model = self._lingam_model
        if model is None:
            from .estimator import DirectLiNGAM

            return DirectLiNGAM(backend=self._backend, fit_options=self._fit_options)
        if not callable(getattr(model, "fit", None)):
            raise ValueError("lingam_model must be a LiNGAM model with fit, causal_order_ and "
                             f"adjacency_matrix_ (such as DirectLiNGAM); got {model!r}")
        return model

    def _estimate_var_coefs(self, X):
        """lingam's VAR step: ``(coefs, lags, residuals)``."""
        max_lags = _check_lags(self._lags)
        if X.shape[0] <= max_lags * (X.shape[1] + 1):
            raise ValueError(
                f"X has {X.shape[0]} samples: too few to fit a VAR with {max_lags} lags of "
                f"{X.shape[1]} variables (more than lags * (n_features + 1) are needed)")
        if self._criterion not in CRITERIA:
            coefs, resid, _ = fit_var(X, max_lags, criteria=False)
            return coefs, max_lags, resid
        best = None
        min_value = float("inf")
        # lingam fits each number of lags on its own sample (n_samples - lag rows)
        for lag in range(1, max_lags + 1):
            coefs, resid, criteria = fit_var(X, lag)
            value = criteria[self._criterion]
            if value < min_value:
                min_value = value
                best = coefs, lag, resid
        if best is None:
            raise ValueError(f"the {self._criterion} criterion is not a number for any lag "
                             f"in 1..{max_lags}: the VAR residuals are degenerate")
        return best

    @staticmethod
    def _calc_b(B0, M_taus):
        n = B0.shape[0]
        return np.concatenate([B0[None], np.einsum("ij,tjk->tik", np.eye(n) - B0, M_taus)])

    def _pruning(self, X, B_taus, causal_order):
        """lingam's pruning: each ``x_i(t)`` regressed (adaptive lasso) on its
        instantaneous ancestors and every lagged variable.

        The design puts the lagged variables first, then ``x(t)`` in causal
        order; the lagged columns are made exogenous, so one adjacency call
        gives exactly lingam's regressions, with the rows in lingam's order
        (latest time first).
        """
        from ..adjacency import adaptive_lasso_adjacency

        n = X.shape[1]
        lags = self._lags
        T = X.shape[0]
        # row r: time t = T - 1 - r, for t = T-1 down to lags (lingam's blocks)
        rev = X[::-1]
        lagged = np.hstack([rev[tau:T - lags + tau] for tau in range(1, lags + 1)])
        current = rev[:T - lags]
        design = np.hstack([lagged, current])
        m = n * lags
        order = list(range(m)) + [m + i for i in causal_order]
        pk = -np.ones((m + n, m + n))
        pk[:m, :] = 0  # lagged columns are not regressed
        options = self._fit_options or {}
        backend = None if self._backend == "auto" else self._backend
        if backend == "cuda":
            from ..search import _backends

            backend = _backends.resolve_backend("cuda")
        B = adaptive_lasso_adjacency(design, order, prior_knowledge=pk,
                                     n_threads=options.get("n_threads"), backend=backend)
        for i in range(n):
            k = causal_order.index(i)
            ancestors = causal_order[:k]
            B_taus[0][i, ancestors] = B[m + i, [m + a for a in ancestors]]
            for tau in range(lags):
                B_taus[tau + 1][i, :] = B[m + i, n * tau:n * (tau + 1)]
        return B_taus

    # ------------------------------------------------------------------
    # analysis
    # ------------------------------------------------------------------

    def estimate_total_effect(self, X, from_index, to_index, from_lag=0):
        """Total effect of ``x_from(t - from_lag)`` on ``x_to(t)``, by regression.

        As lingam: the regression of ``x_to`` on ``x_from`` (shifted by
        ``from_lag``) and the parents of ``from_index`` in the concatenated
        adjacency matrices, on the data and its circular shifts
        (``numpy.roll``, lingam's construction).

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
            Original data.
        from_index, to_index : int
        from_lag : int

        Returns
        -------
        float
        """
        self._check_fitted()
        X = as_data_matrix(X)[0]
        n_features = X.shape[1]
        if from_lag == 0:
            warn_if_order_reversed(self._causal_order, from_index, to_index, from_index, to_index)
        X_joined = np.hstack([np.roll(X, p, axis=0)
                              for p in range(1 + self._lags + from_lag)])
        am = np.concatenate([*self._adjacency_matrices], axis=1)
        parents = np.where(np.abs(am[from_index]) > 0)[0]
        from_col = from_index + n_features * from_lag
        predictors = np.concatenate([[from_col], parents + n_features * from_lag]).astype(np.intp)
        return regression_effect(X_joined, predictors, to_index)

    def estimate_total_effect2(self, n_features, from_index, to_index, from_lag=0):
        """Total effect from the adjacency matrices: the sum over directed paths.

        Parameters
        ----------
        n_features : int
        from_index, to_index : int
        from_lag : int

        Returns
        -------
        float
        """
        from ..utils import calculate_total_effect

        self._check_fitted()
        if from_lag == 0:
            warn_if_order_reversed(self._causal_order, from_index, to_index, from_index, to_index)
        am = np.concatenate([*self._adjacency_matrices], axis=1)
        am = np.pad(am, [(0, am.shape[1] - am.shape[0]), (0, 0)])
        return calculate_total_effect(am, from_index + n_features * from_lag, to_index)

    def get_error_independence_p_values(self):
        """p-values of HSIC independence tests between the error variables.

        The errors are ``(I - B0)`` applied to the VAR residuals; each pair
        gets lingam's ``hsic_test_gamma``
        (:func:`paralingam.lingam.hsic.error_p_values`: on any scale, and
        with p-values 1 for the error of a fully explained variable).

        Returns
        -------
        ndarray, shape (n_features, n_features)
        """
        from .hsic import error_p_values

        self._check_fitted()
        residuals = np.array(self._residuals, dtype=np.float64, order="C", copy=True)
        return error_p_values(residuals, self._adjacency_matrices[0])

    # ------------------------------------------------------------------
    # bootstrap
    # ------------------------------------------------------------------

    def bootstrap(self, X, n_sampling, *, progress="auto", client=None):
        """Bootstrap of the VAR residuals (lingam's scheme).

        The model is fitted once (with the lags fixed, no criterion);
        ``n_sampling`` series are simulated from the fitted VAR driven by
        residuals resampled with replacement, and each is fitted. Resamples
        are drawn as lingam draws them (``sklearn.utils.resample``, from
        numpy's global random state unless ``random_state`` is set).

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
        n_sampling : int
            Number of resamples, > 0.
        progress : bool or {"auto"}, default "auto"
            Report progress on stderr: ``True`` always, ``"auto"`` when
            stderr is a terminal, ``False`` never (as
            :meth:`paralingam.DirectLiNGAM.bootstrap`).
        client : distributed.Client, optional
            Fit the resamples on the workers of this Dask cluster (see the
            user guide's "Distributed bootstrap"). The resamples are drawn
            and simulated as without a client, so the result is the same;
            the residuals go to each worker once. Needs
            ``pip install "paralingam[dask]"``.

        Returns
        -------
        VARBootstrapResult
            ``adjacency_matrices_`` of shape (n_sampling, n_features,
            n_features * (1 + lags)) and ``total_effects_`` of the same
            shape (``[k, to, from + n_features * lag]``); also ``timings_``
            (seconds simulating and fitting).
        """
        from sklearn import config_context
        from sklearn.utils import check_random_state, resample

        from .. import _blas
        from .._progress import check_progress
        from .estimator import _bootstrap_progress

        if isinstance(n_sampling, bool) or not isinstance(n_sampling, (numbers.Integral, np.integer)) \
                or n_sampling <= 0:
            raise ValueError(f"n_sampling must be an integer greater than 0; got {n_sampling!r}")
        check_progress(progress)
        if client is not None:
            from ._distributed import check_client

            check_client(client)  # before the first fit
        X = self._checked_data(X)
        n_samples, n_features = X.shape
        rng = check_random_state(self._random_state)

        ar_coefs, lags = self._ar_coefs, self._lags
        criterion = self._criterion
        self._criterion = None
        timings = {"simulate": 0.0, "fit": 0.0, "total_effects": 0.0}
        try:
            self.fit(X)
            fitted_ar_coefs = self._ar_coefs
            residuals = self._residuals
            n_lags = self._lags
            if client is not None:
                from ._distributed import bootstrap_varlingam

                # What each resample's fit starts from: the lags and
                # coefficients given, no criterion, not fitted.
                template = VARLiNGAM(lags=lags, criterion=None, prune=self._prune,
                                     lingam_model=self._lingam_model,
                                     backend=self._backend, fit_options=self._fit_options)
                template._ar_coefs = ar_coefs
                with _bootstrap_progress(n_sampling, progress) as reporter:
                    adjacency_matrices, effects, timings, last = bootstrap_varlingam(
                        template, fitted_ar_coefs, residuals, n_samples, n_sampling, rng,
                        client, reporter, _SIMULATION_BATCH)
                # the state the serial loop leaves: fitted on the last resample
                (self._ar_coefs, self._lags, self._residuals, self._causal_order,
                 self._adjacency_matrices) = last
                result = VARBootstrapResult(adjacency_matrices, effects)
                result.timings_ = timings
                return result
            effects = np.zeros((n_sampling, n_features, n_features * (1 + n_lags)))
            adjacency_matrices = np.zeros_like(effects)
            index = np.arange(len(residuals))
            with _blas.in_this_thread(), \
                    _bootstrap_progress(n_sampling, progress) as reporter:
                for start in range(0, n_sampling, _SIMULATION_BATCH):
                    t0 = time.perf_counter()
                    batch = range(start, min(start + _SIMULATION_BATCH, n_sampling))
                    with config_context(skip_parameter_validation=True):
                        rows = [resample(index, n_samples=n_samples, random_state=rng)
                                for _ in batch]
                    series = _simulate(fitted_ar_coefs, residuals[np.stack(rows)])
                    timings["simulate"] += time.perf_counter() - t0
                    for b, k in enumerate(batch):
                        t0 = time.perf_counter()
                        self._ar_coefs, self._lags = ar_coefs, lags
                        self.fit(series[b])
                        t1 = time.perf_counter()
                        adjacency_matrices[k] = np.concatenate([*self._adjacency_matrices], axis=1)
                        effects[k] = _var_total_effects(self._adjacency_matrices,
                                                        self._causal_order)
                        timings["fit"] += t1 - t0
                        timings["total_effects"] += time.perf_counter() - t1
                        reporter.update(1)
        finally:
            self._criterion = criterion
        result = VARBootstrapResult(adjacency_matrices, effects)
        result.timings_ = timings
        return result

    # ------------------------------------------------------------------
    # attributes
    # ------------------------------------------------------------------

    def _check_fitted(self):
        if self._adjacency_matrices is None:
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this VARLiNGAM instance is not fitted yet; call fit(X) first")

    @property
    def causal_order_(self):
        """list of int: causal order of the instantaneous effects (None before fit)."""
        return self._causal_order

    @property
    def adjacency_matrices_(self):
        """ndarray, shape (1 + lags, n_features, n_features): ``B0, B1, ...`` (None before fit)."""
        return self._adjacency_matrices

    @property
    def residuals_(self):
        """ndarray, shape (n_samples - lags, n_features): residuals of the VAR."""
        return self._residuals


class VARBootstrapResult(BootstrapResult):
    """The result of :meth:`VARLiNGAM.bootstrap`, lingam's ``VARBootstrapResult``.

    Parameters
    ----------
    adjacency_matrices : ndarray, shape (n_sampling, n_features, n_features * (1 + lags))
        ``[B0 B1 ... B_lags]`` of each resample.
    total_effects : ndarray, shape (n_sampling, n_features, n_features * (1 + lags))
    """

    def __init__(self, adjacency_matrices, total_effects):
        super().__init__(np.asarray(adjacency_matrices), np.asarray(total_effects))

    def get_paths(self, from_index, to_index, from_lag=0, to_lag=0, min_causal_effect=None):
        """All directed paths from ``x_from(t - from_lag)`` to ``x_to(t - to_lag)``.

        Parameters
        ----------
        from_index, to_index : int
        from_lag, to_lag : int
            ``from_lag >= to_lag``.
        min_causal_effect : float, optional
            Follow only edges with ``|weight| > min_causal_effect`` (> 0).

        Returns
        -------
        dict
            ``{"path": [...], "effect": [...], "probability": [...]}``, most
            probable first; nodes numbered ``index + n_features * lag``.
        """
        if min_causal_effect is None:
            min_causal_effect = 0.0
        elif not 0.0 < min_causal_effect:
            raise ValueError("min_causal_effect must be an value greater than 0.")
        if to_lag > from_lag:
            raise ValueError("from_lag should be greater than or equal to to_lag.")
        if to_lag == from_lag and to_index == from_index:
            raise ValueError("The same variable is specified for from and to.")

        keys, effects = [], []
        for am in self._adjacency_matrices:
            n = am.shape[0]
            n_lags = am.shape[1] // n - 1
            # the graph over all time slices: slice i (lag i) receives from slice j >= i
            expansion = np.zeros((am.shape[1], am.shape[1]))
            for i in range(n_lags + 1):
                for j in range(i, n_lags + 1):
                    lag = n * (j - i)
                    expansion[n * i:n * (i + 1), n * j:n * (j + 1)] = am[:, lag:lag + n]
            paths, path_effects = find_all_paths(expansion, int(n * from_lag + from_index),
                                                 int(n * to_lag + to_index), min_causal_effect)
            keys.extend("_".join(map(str, p)) for p in paths)
            effects.extend(path_effects)
        keys, effects = np.array(keys), np.array(effects)
        unique, counts = np.unique(keys, axis=0, return_counts=True)
        order = np.argsort(-counts)
        unique = unique[order]
        return {
            "path": [[int(v) for v in key.split("_")] for key in unique],
            "effect": [np.median(effects[np.where(keys == key)]) for key in unique],
            "probability": (counts[order] / len(self._adjacency_matrices)).tolist(),
        }

