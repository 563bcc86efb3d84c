"""The numpy reference (the oracle of every other test) against lingam itself."""

import numpy as np
import pytest
from lingam_oracle import lingam_module

from paralingam.search import reference


@pytest.mark.parametrize(
    "p, n, density, seed",
    [
        (5, 200, "sparse", 11),
        (8, 500, "dense", 12),
        (12, 1000, "sparse", 13),
        (15, 400, "dense", 14),
        (10, 300, "sparse", 15),
    ],
)
def test_reference_matches_lingam_directlingam(lingam_data, p, n, density, seed):
    lingam = lingam_module("lingam", __name__)
    X = lingam_data(p, n, density, seed)[0]
    model = lingam.DirectLiNGAM()  # measure="pwling"
    model.fit(np.array(X))
    order, explained = reference.causal_order(X)
    assert order == [int(v) for v in model.causal_order_]
    assert explained == {}


def test_reference_order_is_a_permutation_and_does_not_touch_input(lingam_data):
    X = np.array(lingam_data(12, 300, "sparse", 21)[0])
    X0 = X.copy()
    order, explained = reference.causal_order(X)
    assert sorted(order) == list(range(12))
    assert explained == {}
    np.testing.assert_array_equal(X, X0)


def test_reference_recovers_true_order_with_many_samples(lingam_data):
    # Small sparse model, many samples: DirectLiNGAM is consistent.
    X, B, _ = lingam_data(6, 20000, "sparse", 22)
    order, _ = reference.causal_order(X)
    pos = np.empty(6, dtype=int)
    pos[order] = np.arange(6)
    for i, j in zip(*np.nonzero(B)):  # edge j -> i
        assert pos[j] < pos[i], f"edge {j}->{i} contradicts order {order}"


def test_entropy_of_gaussian_is_gaussian_entropy():
    rng = np.random.default_rng(31)
    u = rng.standard_normal(1_000_000)
    h = reference.entropy(u)
    assert reference.H_GAUSS == pytest.approx(0.5 * (1.0 + np.log(2.0 * np.pi)))
    assert h == pytest.approx(0.5 * (1.0 + np.log(2.0 * np.pi)), abs=1e-3)


@pytest.mark.parametrize("dist", ["uniform", "laplace", "exponential"])
def test_entropy_of_non_gaussian_is_smaller(dist):
    # The Gaussian maximises entropy at unit variance.
    rng = np.random.default_rng(32)
    u = getattr(rng, dist)(size=200_000)
    u = (u - u.mean()) / u.std()
    assert reference.entropy(u) < reference.H_GAUSS - 1e-3


def test_entropy_is_vectorised_over_rows():
    rng = np.random.default_rng(33)
    U = rng.standard_normal((3, 1000))
    h = reference.entropy(U)
    assert h.shape == (3,)
    for k in range(3):
        assert h[k] == pytest.approx(reference.entropy(U[k]), rel=1e-15)


def test_entropy_stays_finite_for_huge_values():
    # log(cosh(u)) computed naively overflows for |u| > 710.
    u = np.array([1e3, -1e3, 1e5, -1e5, 0.0, 0.5])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        h = reference.entropy(u)
    assert np.isfinite(h)
    log_cosh = np.abs(u) - np.log(2.0)
    log_cosh[4:] = np.log(np.cosh(u[4:]))
    g = u * np.exp(-0.5 * u * u)
    expected = (
        reference.H_GAUSS
        - reference.K1 * (log_cosh.mean() - reference.GAMMA) ** 2
        - reference.K2 * g.mean() ** 2
    )
    assert h == pytest.approx(expected, rel=1e-12)


def test_entropy_is_even_in_sign():
    rng = np.random.default_rng(34)
    u = rng.exponential(size=5000)
    u = (u - u.mean()) / u.std()
    assert reference.entropy(-u) == pytest.approx(reference.entropy(u), rel=1e-13)


def test_collinear_groups_link_chains_to_their_first_member():
    rng = np.random.default_rng(35)
    a, b, c = rng.standard_normal((3, 500))
    # columns: a, b, -a, c, 3a (chain of copies), b + noise (1 - rho**2 ~ 1e-4: not linked)
    X = np.column_stack([a, b, -a, c, 3 * a + 1, b + 1e-2 * rng.standard_normal(500)])
    group = reference.collinear_groups(reference.standardise(X))
    np.testing.assert_array_equal(group, [0, 1, 0, 3, 0, 5])
