"""MultiGroupDirectLiNGAM against lingam 1.13."""

import numpy as np
import pytest

from paralingam.multi_group import MultiGroupDirectLiNGAM, multi_group_causal_order

lingam = pytest.importorskip("lingam")


def group_data(n, seed, p=6, noise="uniform", outliers=False):
    rng = np.random.default_rng(seed)
    B = np.tril(rng.uniform(0.5, 2.0, (p, p)) * np.sign(rng.uniform(-1, 1, (p, p)))
                * (rng.random((p, p)) < 0.5), -1)
    E = rng.uniform(size=(n, p)) if noise == "uniform" else rng.laplace(size=(n, p))
    X = E @ np.linalg.inv(np.eye(p) - B).T
    if outliers:
        X[rng.integers(0, n, 4)] *= 20.0
    return X[:, np.random.default_rng(0).permutation(p)]  # the same permutation in every group


@pytest.mark.parametrize("seed, noise, outliers", [(0, "uniform", False), (1, "laplace", False),
                                                   (2, "uniform", True), (3, "laplace", True)])
def test_fit_matches_lingam(seed, noise, outliers):
    Xs = [group_data(400, seed, noise=noise, outliers=outliers),
          group_data(250, seed + 100, noise=noise)]
    theirs = lingam.MultiGroupDirectLiNGAM().fit(Xs)
    ours = MultiGroupDirectLiNGAM(backend="cpu").fit(Xs)
    assert ours.causal_order_ == [int(i) for i in theirs.causal_order_]
    for a, b in zip(ours.adjacency_matrices_, theirs.adjacency_matrices_):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-8)
    np.testing.assert_allclose(ours.get_error_independence_p_values(Xs),
                               theirs.get_error_independence_p_values(Xs), rtol=1e-8, atol=1e-10)
    first, last = ours.causal_order_[0], ours.causal_order_[-1]
    np.testing.assert_allclose(ours.estimate_total_effect(Xs, first, last),
                               theirs.estimate_total_effect(Xs, first, last), rtol=1e-9)
    np.testing.assert_allclose(ours.estimate_total_effect2(first, last),
                               theirs.estimate_total_effect2(first, last), atol=1e-9)


def test_three_groups_of_different_sizes():
    Xs = [group_data(300, 5, p=5), group_data(150, 6, p=5), group_data(500, 7, p=5)]
    theirs = lingam.MultiGroupDirectLiNGAM().fit(Xs)
    assert multi_group_causal_order(Xs) == [int(i) for i in theirs.causal_order_]


@pytest.mark.parametrize("soft", [False, True])
def test_prior_knowledge_matches_lingam(soft):
    Xs = [group_data(400, 8), group_data(300, 9)]
    pk = lingam.utils.make_prior_knowledge(6, exogenous_variables=[1], no_paths=[(4, 2)],
                                           sink_variables=[5])
    theirs = lingam.MultiGroupDirectLiNGAM(prior_knowledge=pk,
                                           apply_prior_knowledge_softly=soft).fit(Xs)
    ours = MultiGroupDirectLiNGAM(prior_knowledge=pk, apply_prior_knowledge_softly=soft).fit(Xs)
    assert ours.causal_order_ == [int(i) for i in theirs.causal_order_]
    for a, b in zip(ours.adjacency_matrices_, theirs.adjacency_matrices_):
        np.testing.assert_allclose(a, b, atol=1e-8)


def test_groups_of_very_different_sizes():
    # the scores are weighted by each group's share of the samples
    Xs = [group_data(200, 10), group_data(2000, 11)]
    theirs = lingam.MultiGroupDirectLiNGAM().fit(Xs)
    assert multi_group_causal_order(Xs) == [int(i) for i in theirs.causal_order_]


def test_bootstrap_matches_lingam():
    Xs = [group_data(200, 12, p=4), group_data(150, 13, p=4)]
    np.random.seed(5)
    theirs = lingam.MultiGroupDirectLiNGAM()
    rt = theirs.bootstrap(Xs, 5)
    np.random.seed(5)
    model = MultiGroupDirectLiNGAM()
    ro = model.bootstrap(Xs, 5)
    assert len(ro) == len(rt) == 2
    assert model.causal_order_ == [int(i) for i in theirs.causal_order_]  # the last resample
    for a, b in zip(ro, rt):
        np.testing.assert_allclose(a.adjacency_matrices_, b.adjacency_matrices_, atol=1e-8)
        np.testing.assert_allclose(a.total_effects_, b.total_effects_, atol=1e-8)
        assert a.get_causal_direction_counts() == b.get_causal_direction_counts()


@pytest.mark.parametrize("X_list, match", [
    (np.zeros((3, 10, 2)), "must be a list"),
    ([np.random.default_rng(0).random((10, 3))], "at least two"),
    ([np.random.default_rng(0).random((10, 3)), np.random.default_rng(1).random((10, 2))],
     "same number of features"),
])
def test_bad_input(X_list, match):
    with pytest.raises(ValueError, match=match):
        MultiGroupDirectLiNGAM().fit(X_list)


def test_bad_parameters():
    Xs = [group_data(50, 0, p=3), group_data(50, 1, p=3)]
    with pytest.raises(ValueError, match="adjacency"):
        MultiGroupDirectLiNGAM(adjacency="nope").fit(Xs)
    with pytest.raises(ValueError, match="n_sampling"):
        MultiGroupDirectLiNGAM().bootstrap(Xs, -1)


@pytest.mark.gpu
def test_cuda_backend_matches_lingam():
    Xs = [group_data(1000, 20, p=8), group_data(800, 21, p=8)]
    theirs = lingam.MultiGroupDirectLiNGAM().fit(Xs)
    ours = MultiGroupDirectLiNGAM(backend="cuda").fit(Xs)
    assert ours.causal_order_ == [int(i) for i in theirs.causal_order_]
    for a, b in zip(ours.adjacency_matrices_, theirs.adjacency_matrices_):
        np.testing.assert_allclose(a, b, atol=1e-8)
