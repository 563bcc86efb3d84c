"""The lingam.utils additions for the lingam family, against lingam 1.13."""

import contextlib
import io

import numpy as np
import pytest

import paralingam
import paralingam.utils as pu

lingam = pytest.importorskip("lingam")


def mixed(seed=0, n=300, outliers=False):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 5))
    X[:, 2] += 2 * X[:, 0]
    X[:, 4] += X[:, 2] - X[:, 1]
    if outliers:
        X[rng.integers(0, n, 3)] *= 30
    return X


@pytest.mark.parametrize("outliers", [False, True])
def test_remove_effect(outliers):
    X = mixed(1, outliers=outliers)
    for removed in ([0], [0, 3], [4, 1, 2]):
        a, ca = lingam.utils.remove_effect(X, removed, return_coefs=True)
        b, cb = pu.remove_effect(X, removed, return_coefs=True)
        np.testing.assert_allclose(b, a, atol=1e-10)
        assert ca.keys() == cb.keys()
        for k in ca:
            np.testing.assert_allclose(cb[k], ca[k], rtol=1e-9)
    with pytest.raises(ValueError, match="column indices"):
        pu.remove_effect(X, [7])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_predict_adaptive_lasso(seed):
    X = mixed(seed, outliers=seed == 2)
    for predictors, target in (([0, 1, 2, 3], 4), ([3, 0], 2), ([1], 0), ([4, 0, 1], 2)):
        np.testing.assert_allclose(pu.predict_adaptive_lasso(X, predictors, target),
                                   lingam.utils.predict_adaptive_lasso(X, predictors, target),
                                   atol=1e-9)
    np.testing.assert_allclose(pu.predict_adaptive_lasso(X, [0, 1], 2, gamma=2.0),
                               lingam.utils.predict_adaptive_lasso(X, [0, 1], 2, gamma=2.0),
                               atol=1e-9)
    with pytest.raises(ValueError, match="target"):
        pu.predict_adaptive_lasso(X, [0, 2], 2)


def results_with_nan():
    rng = np.random.default_rng(3)
    out = []
    for g in range(2):
        ams = rng.choice([0.0, 0.5, -1.0, np.nan], size=(6, 4, 4), p=[0.5, 0.2, 0.2, 0.1])
        out.append(paralingam.BootstrapResult(ams, np.zeros_like(ams)))
    return out


@pytest.mark.parametrize("mode", ["across", "per"])
def test_common_edges(mode):
    Xs = [mixed(4), mixed(5)[::-1] * 2]
    np.random.seed(0)
    for results in (paralingam.MultiGroupDirectLiNGAM().bootstrap(Xs, 4), results_with_nan()):
        a = lingam.utils.get_common_edge_probabilities(results, mode)
        b = pu.get_common_edge_probabilities(results, mode)
        np.testing.assert_array_equal(b, a)
        for level in (0.0, 0.2, 0.5):
            out = []
            for fn in (lingam.utils.print_common_edge_directions, pu.print_common_edge_directions):
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    fn(a, level, labels=["a", "b", "c", "d", "e"][:a.shape[1]])
                out.append(buf.getvalue())
            assert out[0] == out[1]
    with pytest.raises(ValueError, match="mode"):
        pu.get_common_edge_probabilities(results, "both")
    with pytest.raises(ValueError, match="confidence_level"):
        pu.print_common_edge_directions(a, 1.5)


def test_forwarded_names_are_lingams():
    for name in pu.LINGAM_FORWARDED:
        assert getattr(pu, name) is getattr(lingam.utils, name)
    from paralingam.utils import make_dot_highlight

    assert make_dot_highlight is lingam.utils.make_dot_highlight
    with pytest.raises(AttributeError):
        pu.no_such_function


def test_every_lingam_util_exists():
    missing = [name for name in lingam.utils.__all__ if not hasattr(pu, name)]
    assert missing == []
