"""BootstrapResult and total effects against lingam 1.13 on the same matrices."""

import numpy as np
import pytest
from lingam_oracle import lingam_module

from paralingam.lingam.bootstrap import BootstrapResult, find_all_paths, total_effects

lingam = lingam_module("lingam", __name__)
lingam_utils = lingam_module("lingam.utils", __name__)


def random_dag(p, rng, density=0.5):
    """A weighted DAG with a random causal order, weights of both signs."""
    order = rng.permutation(p)
    B = np.zeros((p, p))
    for k in range(1, p):
        parents = order[:k][rng.random(k) < density]
        B[order[k], parents] = rng.choice([-1, 1], len(parents)) * rng.uniform(0.005, 2, len(parents))
    return B, list(order)


def lingam_total_effects(B, order):
    T = np.zeros_like(B)
    for c, frm in enumerate(order):
        for to in order[c + 1:]:
            T[to, frm] = lingam_utils.calculate_total_effect(B, frm, to)
    return T


@pytest.fixture(scope="module")
def resamples():
    """Twenty adjacency matrices of 5 variables that share most edges: counts tie often."""
    rng = np.random.default_rng(401)
    base, order = random_dag(5, rng)
    mats, effects = [], []
    for _ in range(20):
        B = base * (rng.random(base.shape) < 0.8) * rng.uniform(0.9, 1.1, base.shape)
        mats.append(B)
        effects.append(lingam_total_effects(B, order))
    return np.array(mats), np.array(effects)


def both(resamples):
    mats, effects = resamples
    return (BootstrapResult(mats, effects, resampled_indices=[np.arange(3)] * len(mats)),
            lingam.BootstrapResult(mats, effects, resampled_indices=[np.arange(3)] * len(mats)))


@pytest.mark.parametrize("seed", [402, 403, 404])
def test_total_effects_equal_lingam_path_sums(seed):
    rng = np.random.default_rng(seed)
    B, order = random_dag(7, rng, density=0.3)
    got, ref = total_effects(B, order), lingam_total_effects(B, order)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    # no directed path: exactly zero, as lingam's path sums (counted as "no effect")
    np.testing.assert_array_equal(got == 0, ref == 0)
    later = [(to, frm) for c, frm in enumerate(order) for to in order[c + 1:]]
    assert any(ref[to, frm] == 0 for to, frm in later)  # the case is exercised


def test_find_all_paths_equals_lingam():
    rng = np.random.default_rng(405)
    B, order = random_dag(6, rng, density=0.7)
    for frm, to in [(order[0], order[-1]), (order[1], order[4]), (order[3], order[0])]:
        for threshold in (0.0, 0.5):
            paths, effects = find_all_paths(B, frm, to, threshold)
            ref_paths, ref_effects = lingam_utils.find_all_paths(B, frm, to, threshold)
            assert paths == ref_paths
            np.testing.assert_allclose(effects, ref_effects, rtol=1e-14)
    assert len(find_all_paths(B, order[0], order[-1])[0]) > 1


@pytest.mark.parametrize("kwargs", [
    {},
    {"n_directions": 5},
    {"min_causal_effect": 0.3},
    {"n_directions": 8, "min_causal_effect": 0.01, "split_by_causal_effect_sign": True},
    {"min_causal_effect": 100.0, "split_by_causal_effect_sign": True},  # nothing left
])
def test_causal_direction_counts_equal_lingam(resamples, kwargs):
    ours, theirs = both(resamples)
    assert ours.get_causal_direction_counts(**kwargs) == theirs.get_causal_direction_counts(**kwargs)


@pytest.mark.parametrize("kwargs", [
    {},
    {"n_dags": 3},
    {"n_dags": 3, "min_causal_effect": 0.01, "split_by_causal_effect_sign": True},
])
def test_dag_counts_equal_lingam(resamples, kwargs):
    ours, theirs = both(resamples)
    got = ours.get_directed_acyclic_graph_counts(**kwargs)
    assert got == theirs.get_directed_acyclic_graph_counts(**kwargs)
    assert sum(got["count"]) <= 20 and len(got["dag"]) == len(got["count"])


@pytest.mark.parametrize("threshold", [None, 0.2])
def test_probabilities_and_total_causal_effects_equal_lingam(resamples, threshold):
    ours, theirs = both(resamples)
    np.testing.assert_array_equal(ours.get_probabilities(threshold),
                                  theirs.get_probabilities(threshold))
    got = ours.get_total_causal_effects(threshold)
    ref = theirs.get_total_causal_effects(threshold)
    assert got.keys() == ref.keys()
    for key in ("from", "to", "probability"):
        assert got[key] == ref[key]
    np.testing.assert_allclose(got["effect"], ref["effect"], rtol=1e-14)


@pytest.mark.parametrize("threshold", [None, 0.3])
def test_paths_equal_lingam(resamples, threshold):
    ours, theirs = both(resamples)
    mats = resamples[0]
    p = mats.shape[1]
    pairs = [(i, j) for i in range(p) for j in range(p) if i != j]
    found = 0
    for frm, to in pairs:
        got = ours.get_paths(frm, to, threshold)
        ref = theirs.get_paths(frm, to, threshold)
        assert got["path"] == ref["path"] and got["probability"] == ref["probability"]
        np.testing.assert_allclose(got["effect"], ref["effect"], rtol=1e-14)
        found += len(got["path"])
    assert found > 0


def test_bad_arguments_raise_like_lingam(resamples):
    ours, _ = both(resamples)
    for bad in (0, -1, 2.5, "3"):
        with pytest.raises(ValueError, match="n_directions must be an integer greater than 0"):
            ours.get_causal_direction_counts(n_directions=bad)
        with pytest.raises(ValueError, match="n_dags must be an integer greater than 0"):
            ours.get_directed_acyclic_graph_counts(n_dags=bad)
    for method in ("get_probabilities", "get_total_causal_effects"):
        with pytest.raises(ValueError, match="min_causal_effect"):
            getattr(ours, method)(min_causal_effect=-0.1)
    with pytest.raises(ValueError, match="min_causal_effect"):
        ours.get_paths(0, 1, min_causal_effect=0.0)
    # a path's ends: two different variables (lingam: IndexError on a variable
    # to itself, a bare TypeError on names)
    p = ours.adjacency_matrices_.shape[1]
    for frm, to, bad in ((1, 1, "mustn't be the same"), ("a", 1, "from_index must be"),
                         (0, p, "to_index must be"), (-1, 0, "from_index must be"),
                         (True, 0, "from_index must be")):
        with pytest.raises(ValueError, match=bad):
            ours.get_paths(frm, to)
        with pytest.raises(ValueError, match=bad):
            find_all_paths(ours.adjacency_matrices_[0], frm, to)
    with pytest.raises(ValueError, match="square matrix"):
        find_all_paths(np.zeros((3, 2)), 0, 1)


def test_attributes(resamples):
    ours, _ = both(resamples)
    assert ours.adjacency_matrices_ is resamples[0]
    assert ours.total_effects_ is resamples[1]
    assert len(ours.resampled_indices_) == 20


def test_integer_data_make_one_float64_copy_for_the_resamples():
    import tracemalloc

    from paralingam.lingam.bootstrap import resample_source

    X = np.random.default_rng(5).integers(-1000, 1000, size=(200_000, 5))
    tracemalloc.start()
    try:
        source, _ = resample_source(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(source, X.astype(np.float64))
    assert peak < 1.5 * source.nbytes  # the scaled copy is gone before the float64 one
