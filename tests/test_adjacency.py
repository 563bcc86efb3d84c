"""Edge estimators against lingam 1.13 and scikit-learn, on fresh random data."""

import numpy as np
import pytest
from lingam_oracle import lingam_module
from lingam_cases import lingam_adjacency, random_prior_knowledge, tutorial_data

from paralingam import adjacency
from paralingam.adjacency import _adaptive_lasso, _least_squares
from paralingam.search import reference
from paralingam.adjacency import (
    adaptive_lasso_adjacency,
    estimate_adjacency,
    ols_adjacency,
)


CASES = [  # (p, n, density, seed): small, lingam's adaptive lasso is slow
    (5, 60, "sparse", 201),
    (8, 400, "dense", 202),
    (12, 300, "sparse", 203),
    (20, 200, "dense", 204),
]


def order_of(X):
    return reference.causal_order(X)[0]


def sklearn_ols(X, order, prior_knowledge=None):
    from sklearn.linear_model import LinearRegression

    p = X.shape[1]
    B = np.zeros((p, p))
    for k in range(1, p):
        target = order[k]
        predictors = [j for j in order[:k]
                      if prior_knowledge is None or prior_knowledge[target, j] != 0]
        if predictors:
            B[target, predictors] = LinearRegression().fit(
                X[:, predictors], X[:, target]).coef_
    return B


@pytest.mark.parametrize("p, n, density, seed", CASES)
def test_adaptive_lasso_equals_lingam(lingam_data, p, n, density, seed):
    X = lingam_data(p, n, density, seed)[0]
    order = order_of(X)
    B = adaptive_lasso_adjacency(X, order)
    np.testing.assert_allclose(B, lingam_adjacency(X, order), rtol=0, atol=1e-8)
    assert 0 < np.count_nonzero(B) < p * (p - 1) / 2  # the lasso did prune


def test_adaptive_lasso_equals_lingam_on_near_exact_fits():
    # The tutorial data, and resamples of it: LARS paths stop on sklearn's
    # alpha tolerance, which depends on the scale of the Gram matrix.
    X = tutorial_data()
    rng = np.random.RandomState(0)
    for rows in [np.arange(len(X))] + [rng.randint(0, len(X), len(X)) for _ in range(6)]:
        Xr = X[rows]
        order = order_of(Xr)
        np.testing.assert_allclose(adaptive_lasso_adjacency(Xr, order),
                                   lingam_adjacency(Xr, order), rtol=0, atol=1e-8)


def test_adaptive_lasso_on_a_wrong_order_equals_lingam(lingam_data):
    # The adjacency step must not rely on the order being right.
    X = lingam_data(10, 300, "dense", 205)[0]
    order = list(np.random.default_rng(5).permutation(10))
    np.testing.assert_allclose(adaptive_lasso_adjacency(X, order),
                               lingam_adjacency(X, order), rtol=0, atol=1e-8)


@pytest.mark.parametrize("p, n, density, seed", CASES[1:3])
def test_prior_knowledge_excludes_predictors_as_lingam(lingam_data, p, n, density, seed):
    X = lingam_data(p, n, density, seed)[0]
    order = order_of(X)
    pk = random_prior_knowledge(p, seed)
    B = adaptive_lasso_adjacency(X, order, prior_knowledge=pk)
    np.testing.assert_allclose(B, lingam_adjacency(X, order, pk), rtol=0, atol=1e-8)
    assert not B[pk == 0].any()

    B_ols = ols_adjacency(X, order, prior_knowledge=pk)
    np.testing.assert_allclose(B_ols, sklearn_ols(X, order, pk), rtol=0, atol=1e-10)
    assert not B_ols[pk == 0].any()


@pytest.mark.parametrize("p, n, density, seed", CASES)
def test_ols_equals_linear_regression(lingam_data, p, n, density, seed):
    X = lingam_data(p, n, density, seed)[0]
    order = order_of(X)
    np.testing.assert_allclose(ols_adjacency(X, order), sklearn_ols(X, order),
                               rtol=0, atol=1e-10)


def test_coef_threshold_zeroes_small_coefficients(lingam_data):
    X = lingam_data(10, 500, "dense", 206)[0]
    order = order_of(X)
    full = estimate_adjacency(X, order, method="ols")
    cut = estimate_adjacency(X, order, method="ols", coef_threshold=0.1)
    small = np.abs(full) < 0.1
    assert small.any() and (~small & (full != 0)).any()
    assert not cut[small].any()
    np.testing.assert_array_equal(cut[~small], full[~small])


def test_estimate_adjacency_dispatches(lingam_data):
    X = lingam_data(6, 200, "sparse", 207)[0]
    order = order_of(X)
    np.testing.assert_array_equal(estimate_adjacency(X, order, method="ols"),
                                  ols_adjacency(X, order))
    np.testing.assert_array_equal(estimate_adjacency(X, order),
                                  adaptive_lasso_adjacency(X, order))


def test_bad_arguments_name_the_problem(lingam_data):
    X = lingam_data(6, 200, "sparse", 208)[0]
    order = order_of(X)
    with pytest.raises(ValueError, match="adjacency must be one of"):
        estimate_adjacency(X, order, method="lasso")
    # the message of fit and DirectLiNGAM
    with pytest.raises(ValueError, match=r"prior_knowledge must be of shape \(6, 6\) "
                                         r"\(n_features, n_features\); got shape \(5, 6\)"):
        adaptive_lasso_adjacency(X, order, prior_knowledge=np.zeros((5, 6)))
    with pytest.raises(ValueError, match="backend must be one of"):
        ols_adjacency(X, order, backend="tpu")
    with pytest.raises(ValueError, match="column .* has 5 predictors and there are 6 samples"):
        adaptive_lasso_adjacency(X[:6], order)


def test_rank_deficient_data_give_finite_coefficients(lingam_data):
    X = np.array(lingam_data(6, 300, "sparse", 209)[0])
    X[:, 5] = X[:, 0] - 2.0 * X[:, 1]  # an exact combination of earlier columns
    order = [0, 1, 2, 3, 4, 5]
    for method in ("ols", "adaptive_lasso"):
        B = estimate_adjacency(X, order, method=method)
        assert np.isfinite(B).all()
        residual = X[:, 5] - X @ B[5]
        assert residual.std() < 1e-8 * X[:, 5].std()  # the combination is found


# --------------------------------------------------------------------------
# The compiled engine (a port of sklearn's LARS path) against sklearn's
# --------------------------------------------------------------------------

_lasso = pytest.importorskip("paralingam.adjacency._lasso", reason="the compiled adaptive lasso is not built")


@pytest.mark.parametrize("p, n, density, seed", [
    (10, 100, "dense", 210), (25, 300, "sparse", 211), (45, 200, "dense", 212),
    (60, 400, "sparse", 213),
])
def test_compiled_engine_equals_sklearn_engine(lingam_data, p, n, density, seed):
    X = lingam_data(p, n, density, seed)[0]
    rng = np.random.default_rng(seed)
    orders = [order_of(X), list(rng.permutation(p))]
    for order in orders:
        ref = adaptive_lasso_adjacency(X, order, engine="sklearn")
        for threads in (1, 2):
            got = adaptive_lasso_adjacency(X, order, engine="compiled", n_threads=threads)
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)
    pk = random_prior_knowledge(p, seed)
    np.testing.assert_allclose(
        adaptive_lasso_adjacency(X, orders[0], prior_knowledge=pk, engine="compiled"),
        adaptive_lasso_adjacency(X, orders[0], prior_knowledge=pk, engine="sklearn"),
        rtol=0, atol=1e-10)
    np.testing.assert_allclose(
        adaptive_lasso_adjacency(X, orders[0], gamma=2.0, engine="compiled"),
        adaptive_lasso_adjacency(X, orders[0], gamma=2.0, engine="sklearn"), rtol=0, atol=1e-10)


def test_compiled_engine_on_tutorial_resamples():
    X = tutorial_data()
    rng = np.random.RandomState(1)
    for _ in range(15):
        Xr = X[rng.randint(0, len(X), len(X))]
        order = order_of(Xr)
        np.testing.assert_allclose(adaptive_lasso_adjacency(Xr, order, engine="compiled"),
                                   adaptive_lasso_adjacency(Xr, order, engine="sklearn"),
                                   rtol=0, atol=1e-10)


def test_compiled_engine_hands_degenerate_targets_to_sklearn(lingam_data, monkeypatch):
    # Column 3 copies column 0 up to 1e-9: least squares on both is singular to
    # rounding, so the engine's own Cholesky solve of the weights fails. Those
    # targets are flagged and recomputed by the Python path, where sklearn's
    # LARS also drops a degenerate regressor (the AdjacencyWarning).
    # (Weights solved per target, as the engine does without the minimum-norm
    # rows: with them this path takes no degenerate branch, see
    # test_rank_deficient.py::test_near_copies_follow_sklearn_path_on_the_same_weights;
    # the engine's own degenerate branches:
    # test_rank_deficient.py::test_compiled_engine_runs_sklearn_branches_on_dependent_predictors.)
    from paralingam.adjacency import AdjacencyWarning
    from paralingam.adjacency._common import _scatter

    monkeypatch.setattr(_adaptive_lasso, "_min_norm_weights",
                        lambda X, order, std, gram, coef, rss, solved, **_: (coef, rss, solved))
    X = np.array(lingam_data(8, 200, "sparse", 214)[0])
    X[:, 3] = X[:, 0] + 1e-9 * np.random.default_rng(0).standard_normal(200)
    order = [0, 3, 1, 2, 4, 5, 6, 7]
    with pytest.warns(AdjacencyWarning, match="columns"):
        ref = adaptive_lasso_adjacency(X, order, engine="sklearn")
    with pytest.warns(AdjacencyWarning, match="columns") as record:
        got = adaptive_lasso_adjacency(X, order, engine="compiled")
    assert record[0].filename == __file__  # the user's line, not paralingam's
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)
    assert np.isfinite(got).all()

    _, S = _scatter(X)
    std = np.sqrt(np.diag(S) / len(X))
    targets = np.array(order[1:], dtype=np.intp)
    offsets = np.arange(len(order), dtype=np.intp).cumsum()
    predictors = np.concatenate([order[:k] for k in range(1, len(order))]).astype(np.intp)
    _, flagged = _lasso.adaptive_lasso_rows(S / np.outer(std, std), S, targets, offsets,
                                            predictors, float(len(X)), 1.0)
    assert flagged[order.index(2) - 1] and not flagged[0]


def test_engine_argument_is_checked(lingam_data):
    X = lingam_data(4, 50, "sparse", 215)[0]
    with pytest.raises(ValueError, match="engine must be"):
        adaptive_lasso_adjacency(X, [0, 1, 2, 3], engine="fast")


def _mixed_data(p, n, seed):
    """Strongly correlated columns: their lasso paths drop predictors."""
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((p, p)) * (rng.random((p, p)) < 0.3) + np.eye(p)
    return rng.laplace(size=(n, p)) @ M


def _path_drops(X, order):
    """How many times sklearn's LARS paths of the adaptive lasso drop a predictor."""
    from sklearn.linear_model import lars_path_gram

    from paralingam.adjacency._common import _scatter

    n = len(X)
    S = _scatter(X)[1]
    std = np.sqrt(np.diag(S) / n)
    G = S / np.outer(std, std)
    drops = 0
    for k in range(1, len(order)):
        pred, target = list(order[:k]), order[k]
        w = np.abs(np.linalg.solve(G[np.ix_(pred, pred)], G[pred, target]))
        _, _, path = lars_path_gram(G[pred, target] * w, G[np.ix_(pred, pred)] * np.outer(w, w),
                                    n_samples=n, max_iter=500, alpha_min=0.0, method="lasso",
                                    eps=np.finfo(float).eps)
        drops += int((np.diff((path != 0).sum(axis=0)) < 0).sum())
    return drops


def test_compiled_engine_follows_sklearn_through_drops():
    # The lasso branch that removes a predictor whose coefficient crosses zero
    # (Cholesky downdate, index shuffle, recomputed correlation).
    X = _mixed_data(30, 200, 3)
    order = list(range(30))
    assert _path_drops(X, order) > 0  # the case exercises the branch
    np.testing.assert_allclose(adaptive_lasso_adjacency(X, order, engine="compiled"),
                               adaptive_lasso_adjacency(X, order, engine="sklearn"),
                               rtol=0, atol=1e-10)
    pk = random_prior_knowledge(30, 3)  # predictor subsets: the gathered Gram rows
    np.testing.assert_allclose(
        adaptive_lasso_adjacency(X, order, prior_knowledge=pk, engine="compiled"),
        adaptive_lasso_adjacency(X, order, prior_knowledge=pk, engine="sklearn"),
        rtol=0, atol=1e-10)


def test_compiled_engine_past_max_iter_equals_sklearn():
    # Targets with more than 500 predictors: the path stops at LassoLarsIC's
    # max_iter with 500 active predictors at most.
    from paralingam.adjacency._adaptive_lasso import _adaptive_lasso_row_sklearn
    from paralingam.adjacency._common import _scatter

    p, n = 520, 1200
    X = _mixed_data(p, n, 4)[:, np.random.default_rng(4).permutation(p)]
    order = np.arange(p)
    got = adaptive_lasso_adjacency(X, order, engine="compiled")
    S = _scatter(X)[1]
    std = np.sqrt(np.diag(S) / n)
    for k in (505, p - 1):
        kept, coef, _ = _adaptive_lasso_row_sklearn(S / np.outer(std, std), S, order[k],
                                                    order[:k], n, 1.0)
        want = np.zeros(p)
        want[kept] = coef
        np.testing.assert_allclose(got[order[k]], want, rtol=0, atol=1e-10)
        assert np.count_nonzero(want)


def _shuffled_combinations(n, p, rng):
    """Every third column an exact combination of four earlier ones, columns shuffled.

    In a random causal order the exact combinations then follow nearly
    dependent variables: an in-order basis taken from the covariance lost
    the rows here (up to 1.0 off), one from the data does not.
    """
    X = rng.laplace(size=(n, p))
    for j in range(4, p, 3):
        X[:, j] = X[:, rng.choice(j, 4, replace=False)] @ rng.standard_normal(4)
    return X[:, rng.permutation(p)]


@pytest.mark.parametrize("p, n, seed, kind, segmented", [
    (40, 12, 231, "wide", False), (120, 30, 232, "wide", False), (30, 200, 233, "planted", False),
    (120, 40, 234, "ill", False), (60, 200, 235, "ill", False), (400, 500, 3, "shuffled", False),
    (250, 300, 2, "shuffled", False),
    # many rows, the data's QR in row segments (as after a CUDA search)
    (60, 4000, 236, "ill", True), (50, 3000, 4, "shuffled", True)])
def test_ols_on_rank_deficient_data_is_minimum_norm_least_squares(p, n, seed, kind, segmented,
                                                                  monkeypatch):
    # Wide data (rank n - 1) and tall data with exact combinations: every row
    # is the minimum-norm least-squares fit on its predecessors.
    # ill: the last independent column is nearly a combination of the others
    # (1 - R^2 ~ 1e-9), and with tall data every later column is an exact
    # combination: their residuals must count as zero, that column's not.
    rng = np.random.default_rng(seed)
    X = rng.laplace(size=(n, p))
    if kind == "planted":
        X[:, 7] = X[:, 2] - 0.5 * X[:, 5]
        X[:, 20] = 3.0 * X[:, 7] + X[:, 11]
        X[:, 21] = X[:, 20]
    elif kind == "shuffled":
        X = _shuffled_combinations(n, p, rng)
    order = rng.permutation(p)
    if kind == "ill":
        r = min(n, p) - 2
        X[:, order[r]] = 0.1 * X[:, order[:r]] @ rng.standard_normal(r) + \
            1e-4 * rng.standard_normal(n)
        for k in range(r + 1, p if n > p else 0):
            X[:, order[k]] = X[:, order[:k - 1]] @ rng.standard_normal(k - 1)
    if segmented:
        assert _least_squares.tsqr_segments(n, p) > 1
        factor = _least_squares._centred_triangular_factor
        monkeypatch.setattr(_least_squares, "_centred_triangular_factor",
                            lambda *a, **k: factor(*a, **{**k, "segmented": True}))
    B = ols_adjacency(X, order)
    Xc = X - X.mean(axis=0)
    for k in range(1, p):
        target, earlier = order[k], order[:k]
        want, _, rank, sv = np.linalg.lstsq(Xc[:, earlier], Xc[:, target], rcond=None)
        # least squares from the covariance, like the normal equations, is
        # accurate to eps kappa^2 (kappa: the predecessors' condition number);
        # the shuffled combinations reach kappa ~ 1e7 on some rows
        kappa = sv[0] / sv[rank - 1]
        tol = min(1e-8 + np.finfo(float).eps * kappa**2, 1e-4)
        np.testing.assert_allclose(B[target, earlier], want, rtol=0,
                                   atol=tol * max(1.0, np.abs(want).max()))
        assert not B[target, order[k:]].any()


@pytest.mark.parametrize("p, n, seed", [(60, 15, 236), (40, 300, 237)])
def test_ols_under_prior_knowledge_over_dependent_predictors(p, n, seed):
    # Targets whose predictors prior knowledge restricts are solved one by
    # one; once their kept predictors are dependent (wide data, or exact
    # combinations among them) the row is the minimum-norm fit on the data.
    rng = np.random.default_rng(seed)
    X = rng.laplace(size=(n, p))
    if n > p:
        for j in range(3, p, 3):
            X[:, j] = X[:, rng.choice(j, 3, replace=False)] @ rng.standard_normal(3)
    order = rng.permutation(p)
    pk = random_prior_knowledge(p, seed)
    B = ols_adjacency(X, order, prior_knowledge=pk)
    Xc = X - X.mean(axis=0)
    restricted = 0
    for k in range(1, p):
        target, earlier = order[k], order[:k]
        keep = earlier[pk[target, earlier] != 0]
        if len(keep) == k:
            continue
        restricted += 1
        want = np.zeros(p)
        if len(keep):
            want[keep] = np.linalg.lstsq(Xc[:, keep], Xc[:, target], rcond=None)[0]
        np.testing.assert_allclose(B[target], want, rtol=0,
                                   atol=1e-8 * max(1.0, np.abs(want).max()))
    assert restricted > p // 2


@pytest.mark.parametrize("copy_noise", [None, 1e-2, 3e-3])
def test_ols_under_prior_knowledge_few_exclusions_from_the_whole_factor(copy_noise, monkeypatch):
    # One "no outgoing path" column: every later target excludes one
    # predecessor, and its row comes from the inverse factor of the whole
    # order (a Schur complement), not from a factorisation of its own. When
    # the excluded column is a near copy of a kept one (1 - R^2 down to
    # ~5e-6) the rows must hold whichever path they take.
    rng = np.random.default_rng(238)
    n, p = 600, 60
    X = rng.laplace(size=(n, p))
    order = rng.permutation(p)
    if copy_noise is not None:
        X[:, order[5]] = X[:, order[2]] + copy_noise * rng.standard_normal(n)
    pk = -np.ones((p, p))
    pk[:, order[5]] = 0
    pk[order[5], order[5]] = -1
    calls = []
    host_rows = _least_squares._ols_rows_host
    monkeypatch.setattr(_least_squares, "_ols_rows_host",
                        lambda *a, **k: calls.append(1) or host_rows(*a, **k))
    B = ols_adjacency(X, order, prior_knowledge=pk)
    if copy_noise is None:
        # the whole order, and the targets where one exclusion is too large a share
        direct = sum(1 > k * adjacency.SCHUR_MAX_EXCLUDED for k in range(6, p))
        assert direct < 3 and len(calls) == 1 + direct
    Xc = X - X.mean(axis=0)
    for k in range(6, p):
        target, earlier = order[k], order[:k]
        keep = earlier[earlier != order[5]]
        want = np.linalg.lstsq(Xc[:, keep], Xc[:, target], rcond=None)[0]
        np.testing.assert_allclose(B[target, keep], want, rtol=0,
                                   atol=1e-9 * max(1.0, np.abs(want).max()))
        assert B[target, order[5]] == 0.0


def test_ols_under_prior_knowledge_ill_conditioned_predecessors_refuse_the_schur_path(
        monkeypatch):
    # Every pivot keeps more than SCHUR_MIN_PIVOT, yet the predecessors'
    # covariance has condition ~4e11 (two nested near copies) while the kept
    # ones have ~1: the Schur route was 1.7e-5 off here (a helper's review);
    # its residual check now sends the target to its own factorisation.
    rng = np.random.default_rng(0)
    n, p = 2000, 9
    X = rng.standard_normal((n, p))
    X[:, 1] = X[:, 0] + 10**-2.5 * X[:, 1]
    X[:, 2] = (X[:, 1] - X[:, 0]) / 10**-2.5 + 1e-3 * X[:, 2]
    X[:, 8] += X[:, :8].sum(axis=1)
    pk = -np.ones((p, p))
    pk[8, 1] = 0
    calls = []
    host_rows = _least_squares._ols_rows_host
    monkeypatch.setattr(_least_squares, "_ols_rows_host",
                        lambda *a, **k: calls.append(1) or host_rows(*a, **k))
    B = ols_adjacency(X, np.arange(p), prior_knowledge=pk)
    assert len(calls) == 2  # the whole order, then target 8 on its own
    Xc = X - X.mean(axis=0)
    keep = [0, 2, 3, 4, 5, 6, 7]
    want = np.linalg.lstsq(Xc[:, keep], Xc[:, 8], rcond=None)[0]
    np.testing.assert_allclose(B[8, keep], want, rtol=0, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("seed", range(6))
def test_ols_under_prior_knowledge_exact_combination_of_near_copies(seed):
    # x2 = x1 - x0 exactly, with x1 a near copy of x0 (kappa ~ 1e4): the
    # Cholesky pivot of x2 is its rounding, ~1e-7 of its variance, far above
    # SINGULAR_TOL; the restricted target must still get the minimum-norm row.
    rng = np.random.default_rng(seed)
    n, p = 2000, 6
    X = rng.integers(-10**6, 10**6 + 1, size=(n, p)).astype(float)
    X[:, 1] = X[:, 0] + rng.integers(-100, 101, size=n)
    X[:, 2] = X[:, 1] - X[:, 0]
    pk = -np.ones((p, p))
    pk[4, 3] = 0  # target 4 keeps {0, 1, 2}
    B = ols_adjacency(X, np.arange(p), prior_knowledge=pk)
    Xc = X - X.mean(axis=0)
    want = np.linalg.lstsq(Xc[:, :3], Xc[:, 4], rcond=None)[0]
    np.testing.assert_allclose(B[4, :3], want, rtol=0, atol=1e-8 * np.abs(want).max())
    assert not B[4, 3:].any()


def test_least_squares_on_predecessors_from_one_factor():
    from paralingam.adjacency._least_squares import _ols_on_predecessors

    rng = np.random.default_rng(7)
    X = rng.standard_normal((300, 12))
    X[:, 8] = X[:, 2] - 0.5 * X[:, 5]  # exact: pivot 8 fails
    G = X.T @ X
    coef, rss, solved = _ols_on_predecessors(G)
    # Row 8 of the factor does not exist (its pivot rounds to <= 0) and rows
    # after it rest on that pivot: those targets solve their own systems.
    np.testing.assert_array_equal(solved, np.arange(12) < 8)
    for k in range(1, 8):
        b, res, *_ = np.linalg.lstsq(X[:, :k], X[:, k], rcond=None)
        np.testing.assert_allclose(coef[k, :k], b, rtol=0, atol=1e-10)
        np.testing.assert_allclose(rss[k], res[0] if len(res) else 0.0, rtol=1e-8,
                                   atol=1e-9 * G[k, k])


def test_compiled_engine_weights_from_the_factor_equal_per_target_solves(lingam_data):
    from paralingam.adjacency._least_squares import _ols_on_predecessors
    from paralingam.adjacency._common import _scatter

    X, _, order = lingam_data(70, 500, "dense", 216)
    X = np.asarray(X)[:, order]
    n, p = X.shape
    S = _scatter(X)[1]
    std = np.sqrt(np.diag(S) / n)
    G = np.ascontiguousarray(S / np.outer(std, std))
    targets = np.arange(1, p, dtype=np.intp)
    offsets = np.concatenate([[0], np.cumsum(targets)]).astype(np.intp)
    predictors = np.concatenate([np.arange(k) for k in targets]).astype(np.intp)
    own, flagged_own = _lasso.adaptive_lasso_rows(G, S, targets, offsets, predictors,
                                                  float(n), 1.0)
    coef, rss, solved = _ols_on_predecessors(G)
    given = solved[targets].astype(np.uint8)
    assert given.all()
    shared, flagged = _lasso.adaptive_lasso_rows(G, S, targets, offsets, predictors,
                                                 float(n), 1.0, 2, coef, rss, given)
    assert not flagged.any() and not flagged_own.any()
    np.testing.assert_allclose(shared, own, rtol=0, atol=1e-10)
    assert np.count_nonzero(shared)


def _lars_path_drops(X, y):
    """sklearn's lasso path of y on the adaptively weighted X has a coefficient leave it."""
    from sklearn.linear_model import LinearRegression, lars_path

    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    ys = (y - y.mean()) / y.std()
    w = np.abs(LinearRegression().fit(Xs, ys).coef_)
    _, _, coefs = lars_path(Xs * w, ys, method="lasso")
    nonzero = coefs != 0
    return bool((nonzero[:, :-1] & ~nonzero[:, 1:]).any())


@pytest.mark.parametrize("seed", [3, 6, 10, 13])
def test_compiled_engine_follows_sklearn_where_the_path_drops_a_predictor(seed, monkeypatch):
    # correlated predictors: a coefficient crosses zero and leaves the
    # active set (the compiled path's lars_drop), which random sparse data
    # rarely do; the compiled engine must run it itself (no fallback)
    rng = np.random.default_rng(seed)
    n, k = 60, 8
    X = rng.standard_normal((n, 3)) @ rng.standard_normal((3, k)) + 0.3 * rng.standard_normal((n, k))
    y = 0.3 * X @ rng.standard_normal(k) + rng.laplace(size=n)
    assert _lars_path_drops(X, y)
    data = np.column_stack([X, y])
    lasso = _adaptive_lasso._compiled_lasso()
    fallbacks = []

    def recording(*args, **kwargs):
        B, fallback = lasso.adaptive_lasso_rows(*args, **kwargs)
        fallbacks.append(np.asarray(fallback).copy())
        return B, fallback

    class Recording:
        adaptive_lasso_rows = staticmethod(recording)

    monkeypatch.setattr(_adaptive_lasso, "_compiled_lasso", lambda: Recording)
    order = list(range(k + 1))
    got = adaptive_lasso_adjacency(data, order, engine="compiled", n_threads=1)
    assert fallbacks and not np.concatenate(fallbacks).any()
    ref = adaptive_lasso_adjacency(data, order, engine="sklearn")
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)
    assert np.count_nonzero(got[k]) > 0


@pytest.mark.parametrize("p", [1, 7, 300, 513])
@pytest.mark.parametrize("threads", [1, 3])
def test_the_adaptive_lassos_gram_in_causal_order_has_the_bits_of_numpys_division(p, threads,
                                                                                  monkeypatch):
    # the scatter matrix in causal order and its Gram matrix in one pass,
    # without the p x p outer product: the same bits as numpy's indexing and
    # scatter / outer(std, std), on any number of threads, for scales from
    # the subnormals' edge to float64's top (products that overflow: 0 or inf)
    from paralingam.adjacency import _common

    monkeypatch.setattr(_common, "default_threads", lambda: threads)
    rng = np.random.default_rng(p)
    X = rng.standard_normal((p + 50, p)) * 10.0 ** rng.uniform(-3, 3, p)
    scatter = X.T @ X
    std = np.sqrt(np.diag(scatter) / len(X))
    std[::5] *= 2.0 ** rng.integers(-540, 540, std[::5].size)
    order = rng.permutation(p)
    with np.errstate(over="ignore", under="ignore"):
        want = (scatter / np.outer(std, std))[np.ix_(order, order)]
    scatter_ord, got = _common._permuted_gram(scatter, order, std)
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()
    assert scatter_ord.tobytes() == np.ascontiguousarray(scatter[np.ix_(order, order)]).tobytes()
    with pytest.raises(ValueError, match=f"std has {p + 1} entries for a {p} x {p} matrix"):
        _common._permuted_gram(scatter, order, np.ones(p + 1))


@pytest.mark.parametrize("p,k", [(1, 1), (7, 7), (300, 300), (300, 120), (1000, 1000)])
@pytest.mark.parametrize("threads", [1, 4])
def test_permuted_and_placed_are_numpys_indexing_of_both_axes(p, k, threads, monkeypatch):
    from paralingam.adjacency import _common
    from paralingam.adjacency._common import _permuted, _placed

    monkeypatch.setattr(_common, "default_threads", lambda: threads)
    rng = np.random.default_rng(p + k)
    M = rng.standard_normal((p, p))
    order = rng.permutation(p)[:k]
    assert np.array_equal(_permuted(M, order), M[np.ix_(order, order)])
    assert np.array_equal(_permuted(np.asfortranarray(M), order.astype(np.int32)),
                          M[np.ix_(order, order)])
    A = rng.standard_normal((k, k))
    B = np.zeros((p, p))
    B[np.ix_(order, order)] = A
    assert np.array_equal(_placed(A, order, p), B)
    # a repeated index keeps its last entry, as numpy's assignment (on any threads)
    repeated = np.concatenate([order, order[:1]])
    A = rng.standard_normal((k + 1, k + 1))
    B = np.zeros((p, p))
    B[np.ix_(repeated, repeated)] = A
    assert np.array_equal(_placed(A, repeated, p), B)


def test_permuted_and_placed_refuse_indices_out_of_range():
    from paralingam.adjacency._common import _permuted, _placed

    M = np.eye(4)
    for bad in ([0, 4], [-1, 2]):
        with pytest.raises(ValueError, match="not a row of a 4 x 4 matrix"):
            _permuted(M, bad)
        with pytest.raises(ValueError, match="not a row of a 4 x 4 matrix"):
            _placed(np.eye(2), bad, 4)
    with pytest.raises(ValueError, match="square"):
        _permuted(np.ones((2, 3)), [0, 1])
    with pytest.raises(ValueError, match="2 x 2 matrix for 2 indices"):
        _placed(np.eye(3), [0, 1], 4)


def test_the_compiled_scaling_back_has_numpys_ldexp_bits_at_every_edge():
    # moving the exponent field where input and result are normal; libm's
    # ldexp into and out of the subnormals, past float64, and for inf and NaN
    from paralingam.adjacency._permute import scaled_back

    values = np.array([0.0, -0.0, 5e-324, -2.2e-308, 2.2250738585072014e-308, 1.0, -3.5,
                       1.7976931348623157e308, 1e-300, 1.5e-323, np.inf, -np.inf, np.nan])
    for d in (-2000, -1100, -1074, -1022, -60, -1, 0, 1, 60, 1023, 1100, 2000):
        exponents = np.array([d, 0], dtype=np.intc)
        for v in values:
            B = np.full((2, 2), v)
            with np.errstate(over="ignore"):
                want = np.ldexp(B, exponents[:, None] - exponents[None, :])
            got, finite = scaled_back(B, exponents, 1)
            assert got.tobytes() == want.tobytes(), (v, d)
            assert finite == bool(np.isfinite(want).all())


@pytest.mark.parametrize("spread", [600, 1021, 1100, 2100])
def test_scaled_back_by_products_and_by_the_exponent_field_keeps_numpys_bits(spread):
    # rows whose factors 2**(e_i - e_j) are all normal go by products (into
    # the subnormals, to zero, past float64), the others by the exponent
    # field and ldexp; entries from the smallest subnormal to the largest double
    from paralingam.adjacency._permute import scaled_back

    rng = np.random.default_rng(spread)
    for threads in (1, 3):
        for _ in range(40):
            B = rng.standard_normal((13, 13)) * 2.0 ** rng.integers(-1074, 1023, (13, 13))
            B[rng.random((13, 13)) < 0.2] = rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan])
            e = rng.integers(-spread, spread, 13).astype(np.intc)
            with np.errstate(over="ignore", invalid="ignore"):
                want = np.ldexp(B, e[:, None] - e[None, :])
            with np.errstate(all="raise"):  # (no stray overflow of the factors either)
                got, finite = scaled_back(B, e, threads)
            assert got.tobytes() == want.tobytes()
            assert finite == bool(np.isfinite(want).all())


def test_the_passes_take_the_steps_threads_and_find_a_non_finite_entry_on_any_thread(
        monkeypatch):
    from paralingam.adjacency import _common, _permute
    from paralingam.adjacency._common import _pass_threads, _scaled_back

    assert _pass_threads(512, 2) == 2 and _pass_threads(511, 2) == 1
    monkeypatch.setattr(_common, "default_threads", lambda: 5)
    assert _pass_threads(1000) == 5
    # the step's n_threads reaches every pass
    monkeypatch.setattr(_common, "THREADED_ENTRIES", 1)
    seen = []
    for name in ("permuted", "placed", "scaled_back"):
        original = getattr(_permute, name)
        monkeypatch.setattr(_permute, name,
                            lambda *args, _f=original, _n=name: seen.append((_n, args[-1]))
                            or _f(*args))
    rng = np.random.default_rng(7)
    X = rng.laplace(size=(200, 12))
    estimate_adjacency(X, list(range(12)), method="ols", n_threads=2)
    assert {n for n, _ in seen} == {"permuted", "placed", "scaled_back"}
    assert all(threads == 2 for _, threads in seen)
    # an entry past float64 in the last rows only (the last thread's): still found
    B = rng.standard_normal((9, 9))
    e = np.zeros(9, dtype=np.int32)
    e[8] = 1100
    with pytest.raises(ValueError, match="edge weight of column 0 on column 8 exceeds float64"):
        _scaled_back(B, e, None, n_threads=3)


@pytest.mark.parametrize("p", [1, 255, 257, 700])
@pytest.mark.parametrize("threads", [1, 3])
def test_scaled_back_and_the_scatter_matrix_keep_the_bits_of_their_whole_array_forms(p, threads,
                                                                                     monkeypatch):
    """Compiled passes on threads (without p x p temporaries), the same bits as numpy's
    one-expression forms."""
    from types import SimpleNamespace

    from paralingam._api import _scatter_matrix
    from paralingam.adjacency import _common
    from paralingam.adjacency._common import _scaled_back

    monkeypatch.setattr(_common, "default_threads", lambda: threads)

    rng = np.random.default_rng(p)
    B = rng.standard_normal((p, p))
    e = rng.integers(-500, 500, p).astype(np.int32)
    with np.errstate(over="ignore"):
        expected = np.ldexp(B, e[:, None] - e[None, :])
    if np.isfinite(expected).all():
        assert np.array_equal(_scaled_back(B, e, None), expected)
    small = rng.integers(-40, 40, p).astype(np.int32)
    assert np.array_equal(_scaled_back(B, small, None), np.ldexp(B, small[:, None] - small[None, :]))

    # products into the subnormals, to zero and near the top of float64: a
    # product by the power of two rounds as ldexp does (and both routes,
    # factors within 1000 binary orders and beyond)
    B[::3] *= 2.0 ** -1000
    B[1::7] = np.where(B[1::7] > 0, 0.0, -0.0)
    for low, high in ((-500, 400), (-30, 1010), (-1010, 5)):
        e = rng.integers(low, high, p).astype(np.int32)
        e[0] = high - 1
        with np.errstate(over="ignore"):
            expected = np.ldexp(B, e[:, None] - e[None, :])
        finite = np.isfinite(expected)
        if finite.all():
            got = _scaled_back(B, e, None)
            assert np.array_equal(got, expected)
            assert np.array_equal(np.signbit(got), np.signbit(expected))
        else:
            i, j = np.argwhere(~finite)[0]
            with pytest.raises(ValueError, match=f"edge weight of column {j} on column {i} exceeds float64"):
                _scaled_back(B, e, None)

    corr = rng.uniform(-1, 1, (p, p))
    sd = rng.uniform(0.1, 10, p) * 2.0 ** rng.integers(-300, 300, p)
    found = SimpleNamespace(correlation=corr, column_std=sd)
    data = SimpleNamespace(shape=(8191, p))
    with np.errstate(over="ignore", under="ignore"):
        expected = 8191 * corr * np.outer(sd, sd)
    assert np.array_equal(_scatter_matrix(data, found), expected)
