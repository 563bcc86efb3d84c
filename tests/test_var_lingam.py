"""VARLiNGAM against lingam 1.13: the same lags, order, matrices, effects, bootstrap."""

import warnings

import numpy as np
import pytest
from lingam_oracle import lingam_module

from paralingam.lingam.var_lingam import VARBootstrapResult, VARLiNGAM, fit_var, var_residuals

lingam = lingam_module("lingam", __name__)


def var_data(T, p, lags, seed, noise="uniform", outliers=False):
    """A VAR-LiNGAM series: x_t = B0 x_t + sum_tau B_tau x_{t-tau} + e_t."""
    rng = np.random.default_rng(seed)
    B0 = np.tril(rng.uniform(-0.6, 0.6, (p, p)) * (rng.random((p, p)) < 0.5), -1)
    perm = rng.permutation(p)
    B0 = B0[np.ix_(perm, perm)]
    Bs = [rng.uniform(-0.3, 0.3, (p, p)) * (rng.random((p, p)) < 0.4) / (1 + t)
          for t in range(lags)]
    inv = np.linalg.inv(np.eye(p) - B0)
    burn = 50
    X = np.zeros((T + burn, p))
    for t in range(lags, T + burn):
        e = rng.uniform(-1, 1, p) if noise == "uniform" else rng.laplace(size=p)
        X[t] = inv @ (sum(Bs[k] @ X[t - k - 1] for k in range(lags)) + e)
    X = X[burn:]
    if outliers:
        X[rng.integers(0, T, 5)] *= 15.0
    return X


CASES = [  # (T, p, lags, criterion, seed, noise, outliers)
    (400, 4, 1, "bic", 0, "uniform", False),
    (600, 5, 3, "aic", 1, "laplace", False),
    (500, 5, 2, "hqic", 2, "uniform", True),
    (500, 4, 3, "fpe", 3, "uniform", False),
    (300, 3, 2, None, 4, "laplace", False),
]


@pytest.mark.parametrize("case", CASES)
def test_fit_matches_lingam(case):
    T, p, lags, criterion, seed, noise, outliers = case
    X = var_data(T, p, min(lags, 2), seed, noise, outliers)
    theirs = lingam.VARLiNGAM(lags=lags, criterion=criterion).fit(X)
    ours = VARLiNGAM(lags=lags, criterion=criterion, backend="cpu").fit(X)
    assert ours._lags == theirs._lags
    assert ours.causal_order_ == [int(i) for i in theirs.causal_order_]
    np.testing.assert_allclose(ours.adjacency_matrices_, theirs.adjacency_matrices_,
                               rtol=0, atol=1e-8)
    np.testing.assert_allclose(ours.residuals_, theirs.residuals_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(ours.get_error_independence_p_values(),
                               theirs.get_error_independence_p_values(), rtol=1e-8, atol=1e-10)
    first, last = ours.causal_order_[0], ours.causal_order_[-1]
    assert ours.estimate_total_effect(X, first, last) == pytest.approx(
        theirs.estimate_total_effect(X, first, last), rel=1e-9, abs=1e-12)
    assert ours.estimate_total_effect(X, last, first, from_lag=1) == pytest.approx(
        theirs.estimate_total_effect(X, last, first, from_lag=1), rel=1e-9, abs=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ours.estimate_total_effect2(p, last, first) == pytest.approx(
            theirs.estimate_total_effect2(p, last, first), abs=1e-10)


def test_no_prune_and_given_ar_coefs_match_lingam():
    X = var_data(400, 4, 2, 5)
    theirs = lingam.VARLiNGAM(lags=2, prune=False).fit(X)
    ours = VARLiNGAM(lags=2, prune=False, backend="cpu").fit(X)
    np.testing.assert_allclose(ours.adjacency_matrices_, theirs.adjacency_matrices_, atol=1e-10)
    M = np.array(theirs._ar_coefs)
    theirs = lingam.VARLiNGAM(ar_coefs=M).fit(X)
    ours = VARLiNGAM(ar_coefs=M, backend="cpu").fit(X)
    assert ours.causal_order_ == list(theirs.causal_order_)
    np.testing.assert_allclose(ours.adjacency_matrices_, theirs.adjacency_matrices_, atol=1e-8)


def test_lingam_model_is_used():
    X = var_data(300, 3, 1, 6)
    ours = VARLiNGAM(lingam_model=lingam.DirectLiNGAM()).fit(X)
    theirs = lingam.VARLiNGAM().fit(X)
    np.testing.assert_allclose(ours.adjacency_matrices_, theirs.adjacency_matrices_, atol=1e-8)


def test_var_fit_matches_statsmodels():
    VAR = pytest.importorskip("statsmodels.tsa.vector_ar.var_model").VAR
    X = var_data(200, 3, 2, 7, outliers=True)
    for lags in (1, 2, 4):
        res = VAR(X).fit(maxlags=lags, ic=None, trend="n")
        coefs, resid, criteria = fit_var(X, lags)
        np.testing.assert_allclose(coefs, res.coefs, rtol=0, atol=1e-12)
        np.testing.assert_allclose(resid, res.resid, rtol=0, atol=1e-12)
        np.testing.assert_allclose(var_residuals(X, coefs), resid, atol=1e-12)
        for name in ("aic", "bic", "hqic", "fpe"):
            assert criteria[name] == pytest.approx(getattr(res, name), rel=1e-12)


@pytest.mark.parametrize("fitted_first", [False, True])
def test_bootstrap_matches_lingam(fitted_first):
    X = var_data(300, 4, 2, 8)
    theirs, ours = lingam.VARLiNGAM(lags=2), VARLiNGAM(lags=2, backend="cpu")
    if fitted_first:  # lingam then keeps the fitted VAR coefficients for the bootstrap
        theirs.fit(X)
        ours.fit(X)
    np.random.seed(11)
    rt = theirs.bootstrap(X, 6)
    np.random.seed(11)
    ro = ours.bootstrap(X, 6)
    assert isinstance(ro, VARBootstrapResult)
    np.testing.assert_allclose(ro.adjacency_matrices_, np.array(rt.adjacency_matrices_),
                               atol=1e-8)
    np.testing.assert_allclose(ro.total_effects_, rt.total_effects_, atol=1e-8)
    assert ours.causal_order_ == list(theirs.causal_order_)  # both left on the last resample
    kw = dict(min_causal_effect=0.05, split_by_causal_effect_sign=True)
    assert ro.get_causal_direction_counts(**kw) == rt.get_causal_direction_counts(**kw)
    assert ro.get_directed_acyclic_graph_counts(n_dags=3, **kw) == \
        rt.get_directed_acyclic_graph_counts(n_dags=3, **kw)
    for a, b in zip(ro.get_probabilities(0.05), rt.get_probabilities(0.05)):
        np.testing.assert_array_equal(a, b)
    po, pt = ro.get_paths(1, 2, from_lag=1), rt.get_paths(1, 2, from_lag=1)
    assert po["path"] == pt["path"] and po["probability"] == pt["probability"]
    np.testing.assert_allclose(po["effect"], pt["effect"], atol=1e-8)


def test_bootstrap_seeded_is_reproducible():
    X = var_data(200, 3, 1, 9)
    a = VARLiNGAM(random_state=3).bootstrap(X, 3)
    b = VARLiNGAM(random_state=3).bootstrap(X, 3)
    np.testing.assert_array_equal(a.adjacency_matrices_, b.adjacency_matrices_)


def test_get_paths_checks_like_lingam():
    X = var_data(200, 3, 1, 10)
    r = VARLiNGAM().bootstrap(X, 2)
    with pytest.raises(ValueError, match="from_lag"):
        r.get_paths(0, 1, from_lag=0, to_lag=1)
    with pytest.raises(ValueError, match="same variable"):
        r.get_paths(0, 0)
    with pytest.raises(ValueError, match="min_causal_effect"):
        r.get_paths(0, 1, 1, 0, min_causal_effect=-1)


@pytest.mark.parametrize("kwargs, X, match", [
    ({"lags": 0}, None, "lags"),
    ({"lags": 30}, None, "too few"),
    ({}, np.arange(50.0)[:, None], "at least 2 variables"),
    ({"ar_coefs": np.zeros((1, 2, 2))}, None, "ar_coefs is for 2"),
    ({"lingam_model": object()}, None, "lingam_model"),
])
def test_bad_input(kwargs, X, match):
    X = var_data(100, 3, 1, 11) if X is None else X
    with pytest.raises(ValueError, match=match):
        VARLiNGAM(**kwargs).fit(X)
    with pytest.raises(ValueError, match="n_sampling"):
        VARLiNGAM().bootstrap(var_data(100, 3, 1, 11), 0)


def test_not_fitted():
    with pytest.raises(AttributeError, match="not fitted"):
        VARLiNGAM().get_error_independence_p_values()


@pytest.mark.gpu
def test_cuda_backend_matches_lingam():
    X = var_data(2000, 8, 2, 12)
    theirs = lingam.VARLiNGAM(lags=2).fit(X)
    ours = VARLiNGAM(lags=2, backend="cuda").fit(X)
    assert ours.causal_order_ == list(theirs.causal_order_)
    np.testing.assert_allclose(ours.adjacency_matrices_, theirs.adjacency_matrices_, atol=1e-8)
    np.random.seed(2)
    rt = lingam.VARLiNGAM(lags=2).bootstrap(X, 3)
    np.random.seed(2)
    ro = VARLiNGAM(lags=2, backend="cuda").bootstrap(X, 3)
    np.testing.assert_allclose(ro.adjacency_matrices_, np.array(rt.adjacency_matrices_), atol=1e-8)


def test_no_criterion_fits_short_series_whose_residual_covariance_is_singular():
    # 13 samples, 2 lags of 4 variables: 11 residual rows against 8 lagged
    # predictors leave the residuals' covariance singular. The criteria need
    # its Cholesky factor, but without a criterion (and in every bootstrap
    # resample, which fixes the lags) they are not computed: this raised
    # scipy's LinAlgError, where lingam fits
    X = np.random.default_rng(0).uniform(-1, 1, (13, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the degenerate residuals' DegenerateDataWarning)
        model = VARLiNGAM(lags=2, criterion=None, prune=False).fit(X)
        result = VARLiNGAM(lags=2, criterion=None, prune=False, random_state=0).bootstrap(
            X, 2, progress=False)
    assert sorted(model.causal_order_) == [0, 1, 2, 3]
    assert np.isfinite(model.adjacency_matrices_).all()
    assert np.isfinite(result.adjacency_matrices_).all()
    assert fit_var(X, 2, criteria=False)[2] is None
    assert np.isnan(fit_var(X, 2)[2]["bic"])  # (singular: no number, not an exception)


@pytest.mark.parametrize("scale", [1e-200, 1e150])
def test_a_tiny_or_huge_series_gives_the_same_model(scale):
    # The criteria's log-determinant is taken on residual columns scaled by
    # powers of two where the data's own scale underflows (the Cholesky of a
    # 1e-400 covariance failed with LinAlgError); the p-values test errors
    # scaled the same way
    X = var_data(500, 4, 2, 5)
    ref = VARLiNGAM(lags=2).fit(X)
    model = VARLiNGAM(lags=2).fit(X * scale)
    assert model.causal_order_ == ref.causal_order_
    np.testing.assert_allclose(model.adjacency_matrices_, ref.adjacency_matrices_,
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.get_error_independence_p_values(),
                               ref.get_error_independence_p_values(), rtol=0, atol=1e-9)
    for lag in (1, 2):
        expected = fit_var(X, lag)[2]
        got = fit_var(X * scale, lag)[2]
        for name, value in expected.items():  # (the log-determinant moves by log(scale**(2k)))
            if name != "fpe":
                assert got[name] == pytest.approx(value + 2 * 4 * np.log(scale), rel=1e-12)
