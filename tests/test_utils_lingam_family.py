"""The lingam.utils additions for the lingam family, against lingam 1.13."""

import contextlib
import io
import sys

import numpy as np
import pytest
from lingam_oracle import lingam_module, live_lingam

import paralingam
import paralingam.utils as pu

lingam = lingam_module("lingam", __name__)


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
    assert set(pu.LINGAM_FORWARDED) == {"evaluate_model_fit", "visualize_nonlinear_causal_effect",
                                        "MGGD", "MGGDEstimator"}
    lingam_utils = live_lingam("lingam.utils")  # the same objects, not equal results
    for name in pu.LINGAM_FORWARDED:
        assert getattr(pu, name) is getattr(lingam_utils, name)
    with pytest.raises(AttributeError):
        pu.no_such_function


def test_every_lingam_util_exists():
    # (the forwarded names import lingam: test_forwarded_names_are_lingams)
    missing = [name for name in lingam.utils.__all__
               if name not in pu.LINGAM_FORWARDED and not hasattr(pu, name)]
    assert missing == []


NATIVE = ["make_dot", "make_dot_highlight", "make_dot_ancestors", "make_dot_descendants",
          "make_dot_paths", "make_dot_for_nan_probability_matrix", "extract_ancestors",
          "calculate_distance_from_root_nodes", "f_correlation", "likelihood_i",
          "log_p_super_gaussian", "variance_i", "bic_select_logistic_l1"]


def test_ported_functions_are_not_lingams():
    lingam_utils = live_lingam("lingam.utils")
    for name in NATIVE:
        fn = getattr(pu, name)
        assert fn is not getattr(lingam_utils, name)
        assert fn.__module__.startswith("paralingam"), (name, fn.__module__)
        assert name in pu.__all__


@pytest.fixture
def without_lingam(monkeypatch):
    """Make ``import lingam`` fail, as for a user who has only paralingam."""
    for mod in list(sys.modules):
        if mod == "lingam" or mod.startswith("lingam."):
            monkeypatch.setitem(sys.modules, mod, None)
    monkeypatch.setitem(sys.modules, "lingam", None)
    monkeypatch.setitem(sys.modules, "lingam.utils", None)


def test_native_utils_run_without_lingam(without_lingam):
    with pytest.raises(ImportError):
        import lingam.utils  # noqa: F401
    B = np.array([[0, 0, 0], [0.7, 0, 0], [0.3, -1.2, 0]])
    P = np.abs(B) / 2 + 0.4
    assert "x2" in pu.make_dot_highlight(B, 1).source
    assert "->" in pu.make_dot(B, path=(0, 2), detect_cycle=True).source
    assert "x3" in pu.make_dot_ancestors(P, 2).source
    assert "x3" in pu.make_dot_descendants(P, 0).source
    assert "x3" in pu.make_dot_paths(P, 0, 2).source
    assert "dir=both" in pu.make_dot_for_nan_probability_matrix(P + P.T).source
    assert pu.calculate_distance_from_root_nodes(B) == {0: [0], 1: [1, 2]}
    X = mixed(7)
    assert 0 <= pu.f_correlation(X[:, 0], X[:, 2]) <= 1
    assert np.isfinite(pu.likelihood_i(X.T, 2, np.eye(5)[0] * 2, 0.0))
    assert len(pu.extract_ancestors(X[:80, :3], MLHSICR=False)) == 3


@pytest.mark.parametrize("name", ["evaluate_model_fit", "MGGD",
                                  "visualize_nonlinear_causal_effect"])
def test_forwarded_without_lingam_says_what_to_install(without_lingam, name):
    with pytest.raises(ImportError, match="pip install lingam") as info:
        getattr(pu, name)
    assert pu.LINGAM_FORWARDED[name] in str(info.value)


def random_adjacency(seed):
    rng = np.random.default_rng(seed)
    acyclic = seed % 2 == 1
    # cyclic graphs stay small: lingam lists their simple paths one by one
    n = int(rng.integers(2, 14 if acyclic else 8))
    B = rng.normal(size=(n, n)) * (rng.random((n, n)) < rng.uniform(0.1, 0.5))
    if acyclic:
        B = np.tril(B, -1)
    if seed % 5 == 0:
        B[rng.random((n, n)) < 0.05] = 1e-9  # within np.isclose of 0: no edge for highlight
    return rng, B


def same_dot(ours, theirs):
    assert ours.source == theirs.source


@pytest.mark.parametrize("seed", range(24))
def test_make_dot_highlight_equals_lingam(seed):
    rng, B = random_adjacency(seed)
    n = len(B)
    node = int(rng.integers(n))
    path = (int(rng.integers(n)), int(rng.integers(n)))
    labels = [f"v{i}" for i in range(n)]
    for kwargs in ({}, {"max_dsc": 1, "max_anc": 2}, {"lower_limit": 0.5, "draw_others": False},
                   {"detect_cycle": True, "path": path, "labels": labels},
                   {"cmap": "viridis", "path": path, "path_color": "red", "vmargin": 3.5}):
        same_dot(pu.make_dot_highlight(B, node, **kwargs),
                 lingam.utils.make_dot_highlight(B, node, **kwargs))


@pytest.mark.parametrize("seed", range(24))
def test_make_dot_options_equal_lingam(seed):
    rng, B = random_adjacency(seed)
    n = len(B)
    if seed % 3 == 0:
        B[rng.integers(n), rng.integers(n)] = np.nan
        B[rng.integers(n), rng.integers(n)] = np.nan
    path = (int(rng.integers(n)), int(rng.integers(n)))
    labels = [f"v{i}" for i in range(n)]
    feats = [int(i) for i in rng.choice(n, size=2, replace=False)]
    for kwargs in ({}, {"path": path}, {"detect_cycle": True},
                   {"path": path, "detect_cycle": True, "path_color": "blue", "labels": labels},
                   {"prediction_feature_indices": feats},
                   {"prediction_feature_indices": feats, "prediction_coefs": [0.5, -0.001],
                    "prediction_target_label": "y", "prediction_line_color": "green"},
                   {"prediction_feature_indices": feats,
                    "prediction_feature_importance": [3, 1]}):
        same_dot(pu.make_dot(B, **kwargs), lingam.utils.make_dot(B, **kwargs))


def test_make_dot_var_lingam_hstack_equals_lingam():
    rng = np.random.default_rng(5)
    B = np.hstack([np.tril(rng.normal(size=(3, 3)), -1), rng.normal(size=(3, 3))])
    labels = ["a(t)", "b(t)", "c(t)", "a(t-1)", "b(t-1)", "c(t-1)"]
    same_dot(pu.make_dot(B, labels=labels, ignore_shape=True, lower_limit=0.3),
             lingam.utils.make_dot(B, labels=labels, ignore_shape=True, lower_limit=0.3))
    with pytest.raises(ValueError, match="square"):
        pu.make_dot(B, labels=labels)


@pytest.mark.parametrize("seed", range(20))
def test_probability_drawings_equal_lingam(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 12 if seed % 2 else 8))
    P = rng.random((n, n))
    if seed % 4 == 0:
        P[rng.random((n, n)) < 0.1] = np.nan
    r = [int(v) for v in rng.choice(n, size=2, replace=False)]
    t = int(rng.integers(n))
    for kwargs in ({}, {"alpha": 0.3}, {"alpha": 0.8, "labels": [f"v{i}" for i in range(n)]}):
        for depth in (None, 0, 1, 2):
            same_dot(pu.make_dot_ancestors(P, r, treatment_vars=t, max_anc=depth, **kwargs),
                     lingam.utils.make_dot_ancestors(P, r, treatment_vars=t, max_anc=depth,
                                                     **kwargs))
            same_dot(pu.make_dot_descendants(P, r, max_dsc=depth, **kwargs),
                     lingam.utils.make_dot_descendants(P, r, max_dsc=depth, **kwargs))
        if n <= 8 or kwargs.get("alpha", 0.6) >= 0.6:
            same_dot(pu.make_dot_paths(P, r[0], [r[1]], **kwargs),
                     lingam.utils.make_dot_paths(P, r[0], [r[1]], **kwargs))
    S = rng.random((n, n))
    S = (S + S.T) / 2
    S[rng.random((n, n)) < 0.3] = 0
    path = (int(rng.integers(n)), int(rng.integers(n)))
    for kwargs in ({}, {"path": path}, {"lower_limit": 0.4, "path": path, "path_color": "red"}):
        same_dot(pu.make_dot_for_nan_probability_matrix(S, **kwargs),
                 lingam.utils.make_dot_for_nan_probability_matrix(S, **kwargs))


def test_common_edge_drawing_equals_lingam():
    np.random.seed(1)
    results = paralingam.MultiGroupDirectLiNGAM().bootstrap([mixed(4), mixed(5)[::-1] * 2], 4)
    probs = pu.get_common_edge_probabilities(results)
    same_dot(pu.make_dot_for_nan_probability_matrix(probs[1], lower_limit=0.0),
             lingam.utils.make_dot_for_nan_probability_matrix(probs[1], lower_limit=0.0))
    same_dot(pu.make_dot(probs[0], lower_limit=0.0),
             lingam.utils.make_dot(probs[0], lower_limit=0.0))


@pytest.mark.parametrize("seed", range(30))
def test_distance_from_root_nodes_equals_lingam(seed):
    _, B = random_adjacency(seed)
    if seed % 4 == 0:
        B[B != 0] = np.abs(B[B != 0])
        B[0, :] = np.nan  # NaN counts as no edge
    try:
        expected = lingam.utils.calculate_distance_from_root_nodes(B)
    except ValueError as exc:
        assert "no root" in str(exc)
        with pytest.raises(ValueError, match="no root"):
            pu.calculate_distance_from_root_nodes(B)
        return
    ours = pu.calculate_distance_from_root_nodes(B)
    assert ours == expected
    assert list(ours) == list(expected)  # key order too
    for d in (1, 2):
        assert (pu.calculate_distance_from_root_nodes(B, max_distance=d)
                == lingam.utils.calculate_distance_from_root_nodes(B, max_distance=d))


@pytest.mark.parametrize("seed", range(4))
def test_statistics_equal_lingam(seed):
    rng = np.random.default_rng(seed)
    for n in (40, 300, 1100):  # lingam changes f_correlation's constants past 1000
        x = rng.uniform(size=n)
        y = x**2 + 0.3 * rng.normal(size=n) if seed % 2 else rng.laplace(size=n)
        if seed == 3:
            y[:3] *= 50  # outliers
        assert abs(pu.f_correlation(x, y) - lingam.utils.f_correlation(x, y)) < 1e-10
    X = rng.laplace(size=(4, 200))
    b = rng.normal(size=4)
    b[1] = 0
    assert abs(pu.likelihood_i(X, 1, b, 0.3) - lingam.utils.likelihood_i(X, 1, b, 0.3)) < 1e-10
    assert abs(pu.variance_i(X, 1, b) - lingam.utils.variance_i(X, 1, b)) < 1e-12
    np.testing.assert_allclose(pu.log_p_super_gaussian(X),
                               lingam.utils.log_p_super_gaussian(X), atol=1e-14)


@pytest.mark.parametrize("seed", range(3))
def test_bic_select_logistic_l1_equals_lingam(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(150, 4))
    y = (X[:, 0] - X[:, 2] + rng.logistic(size=150) > 0).astype(int)
    Cs = 8 if seed else np.logspace(-2, 2, 6)
    np.random.seed(seed)  # saga draws its sample order from numpy's global generator
    ours = pu.bic_select_logistic_l1(X, y, Cs=Cs)
    np.random.seed(seed)
    theirs = lingam.utils.bic_select_logistic_l1(X, y, Cs=Cs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), atol=1e-10)
    with pytest.raises(ValueError, match="binary"):
        pu.bic_select_logistic_l1(X, np.arange(150) % 3)


def rcd_data(seed, n=300):
    """lingam's RCD tutorial model: two latent confounders, cubed-normal noise."""
    rng = np.random.default_rng(seed)

    def e():
        return rng.normal(0, 0.5, n) ** 3

    x5, x6 = e(), e()
    x1 = 0.6 * x5 + e()
    x3 = 0.5 * x5 + e()
    x0 = x1 + x3 + e()
    x2 = 0.8 * x0 - 0.6 * x6 + e()
    x4 = x0 - 0.5 * x6 + e()
    return np.c_[x0, x1, x2, x3, x4]


@pytest.mark.parametrize("seed, bw_method", [(0, "mdbs"), (2, "mdbs"), (1, "silverman"),
                                             (2, "scott")])
def test_extract_ancestors_equals_lingam(seed, bw_method):
    X = rcd_data(seed)
    for mlhsicr in (False, True):
        expected = lingam.utils.extract_ancestors(X, bw_method=bw_method, MLHSICR=mlhsicr)
        assert any(expected)  # the data exercise the regressions and tests
        assert pu.extract_ancestors(X, bw_method=bw_method, MLHSICR=mlhsicr) == expected
    kwargs = {"max_explanatory_num": 1, "cor_alpha": 0.05, "ind_alpha": 0.05}
    assert pu.extract_ancestors(X, **kwargs) == lingam.utils.extract_ancestors(X, **kwargs)


def test_extract_ancestors_mlhsicr_changes_the_answer():
    # seed 2 is data where the HSIC-minimising regression finds an ancestor
    # that least squares misses; equal to lingam in both modes above
    X = rcd_data(2)
    assert (pu.extract_ancestors(X, MLHSICR=True)
            != pu.extract_ancestors(X, MLHSICR=False))


def test_bad_input_errors():
    B = np.array([[0, 0, 0], [0.7, 0, 0], [0.3, -1.2, 0]])
    with pytest.raises(ValueError, match="square"):
        pu.make_dot_highlight(np.ones((2, 3)), 0)
    with pytest.raises(ValueError, match="node_index"):
        pu.make_dot_highlight(B, 3)
    with pytest.raises(ValueError, match="NaN"):
        pu.make_dot_highlight(np.full((3, 3), np.nan), 0)
    with pytest.raises(ValueError, match="labels"):
        pu.make_dot_highlight(B, 0, labels=["a"])
    with pytest.raises(ValueError, match="vmargin"):
        pu.make_dot_highlight(B, 0, vmargin=0.5)
    with pytest.raises(TypeError, match="path"):
        pu.make_dot_highlight(B, 0, path=[0, 1])
    with pytest.raises(ValueError, match="path end"):
        pu.make_dot(B, path=(0, 7))
    with pytest.raises(ValueError, match="path_color"):
        pu.make_dot(B, path=(0, 2), path_color="not-a-colour")
    with pytest.raises(TypeError, match="detect_cycle"):
        pu.make_dot(B, detect_cycle="yes")
    with pytest.raises(ValueError, match="prediction_coefs"):
        pu.make_dot(B, prediction_feature_indices=[0, 1], prediction_coefs=[1.0])
    with pytest.raises(ValueError, match="alpha"):
        pu.make_dot_ancestors(B, 0, alpha=1.5)
    with pytest.raises(ValueError, match="out of range"):
        pu.make_dot_descendants(B, [0, 5])
    with pytest.raises(ValueError, match="max_anc"):
        pu.make_dot_ancestors(B, 0, max_anc=-1)
    with pytest.raises(ValueError, match="different"):
        pu.make_dot_paths(B, 1, 1)
    with pytest.raises(ValueError, match="single"):
        pu.make_dot_paths(B, [0, 1], 2)
    with pytest.raises(ValueError, match="no root"):
        pu.calculate_distance_from_root_nodes(np.ones((3, 3)))
    with pytest.raises(ValueError, match="max_distance"):
        pu.calculate_distance_from_root_nodes(B, max_distance=0)
    with pytest.raises(ValueError, match="same size"):
        pu.f_correlation(np.arange(5.0), np.arange(6.0))
    with pytest.raises(ValueError, match="bw_method"):
        pu.extract_ancestors(mixed(0), bw_method="median")
    with pytest.raises(ValueError, match="max_explanatory_num"):
        pu.extract_ancestors(mixed(0), max_explanatory_num=0)
    with pytest.raises(ValueError, match="NaN"):
        pu.extract_ancestors(np.full((10, 3), np.nan))
