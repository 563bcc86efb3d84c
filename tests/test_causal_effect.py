"""CausalEffect against lingam 1.13."""

import numpy as np
import pytest
from lingam_oracle import lingam_module

import paralingam
from paralingam.lingam.causal_effect import CausalEffect

lingam = lingam_module("lingam", __name__)
linear_model = pytest.importorskip("sklearn.linear_model")


def data(seed=0, n=500):
    rng = np.random.default_rng(seed)
    x3 = rng.uniform(size=n)
    x0 = 3.0 * x3 + rng.uniform(size=n)
    x2 = 6.0 * x3 + rng.uniform(size=n)
    x1 = 3.0 * x0 + 2.0 * x2 + rng.uniform(size=n)
    x5 = 4.0 * x0 + rng.uniform(size=n)
    x4 = 8.0 * x0 - 1.0 * x2 + rng.uniform(size=n)
    return np.array([x0, x1, x2, x3, x4, x5]).T


@pytest.mark.parametrize("seed", [0, 1])
def test_effects_on_prediction_match_lingam(seed):
    X = data(seed)
    model = paralingam.DirectLiNGAM().fit(X)
    target = 1
    features = [i for i in range(6) if i != target]
    reg = linear_model.LinearRegression().fit(X[:, features], X[:, target])
    ours = CausalEffect(model).estimate_effects_on_prediction(X, target, reg)
    theirs = lingam.CausalEffect(lingam.DirectLiNGAM().fit(X)).estimate_effects_on_prediction(
        X, target, reg)
    np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-10)
    clf = linear_model.LogisticRegression().fit(X[:, features], X[:, target] > np.median(X[:, 1]))
    np.testing.assert_allclose(CausalEffect(model).estimate_effects_on_prediction(X, target, clf),
                               lingam.CausalEffect(model.adjacency_matrix_)
                               .estimate_effects_on_prediction(X, target, clf), atol=1e-8)


def test_optimal_intervention_matches_lingam():
    X = data(2)
    model = paralingam.DirectLiNGAM().fit(X)
    features = [i for i in range(6) if i != 1]
    reg = linear_model.LinearRegression().fit(X[:, features], X[:, 1])
    np.random.seed(0)
    ours = CausalEffect(model).estimate_optimal_intervention(X, 1, reg, 3, 15)
    np.random.seed(0)
    theirs = lingam.CausalEffect(model.adjacency_matrix_).estimate_optimal_intervention(
        X, 1, reg, 3, 15)
    assert ours == pytest.approx(theirs, rel=1e-10)


def test_matrix_model_and_errors():
    B = np.array([[0, 0, 0], [2.0, 0, 0], [0, 1.5, 0]])
    ce = CausalEffect(B[[2, 0, 1]][:, [2, 0, 1]])
    ce._check_init_params()
    assert ce._causal_order == [1, 2, 0]
    with pytest.raises(ValueError, match="lower triangular"):
        CausalEffect(np.ones((3, 3))).estimate_effects_on_prediction(data()[:, :3], 0, None)
    with pytest.raises(ValueError, match="square"):
        CausalEffect(np.ones((2, 3)))._check_init_params()
    with pytest.raises(ValueError, match="cannot be used"):
        CausalEffect("model")._check_init_params()
    with pytest.raises(ValueError, match="no prediction method"):
        CausalEffect(B).estimate_effects_on_prediction(data()[:, :3], 2, object())
