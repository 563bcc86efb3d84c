"""The HSIC gamma test against lingam 1.13's ``hsic_test_gamma``."""

import itertools

import numpy as np
import pytest

from paralingam import hsic

lingam_hsic = pytest.importorskip("lingam.hsic")


def errors(n, p, seed):
    """Non-Gaussian columns, some of them dependent."""
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((n, p)) ** 3
    E[:, 1] += 0.5 * np.abs(E[:, 0])
    E[:, 2] = np.round(E[:, 2], 1)  # ties: zero distances in the bandwidth
    return E


def lingam_p_values(E):
    n, p = E.shape
    P = np.zeros((p, p))
    for i, j in itertools.combinations(range(p), 2):
        P[i, j] = P[j, i] = lingam_hsic.hsic_test_gamma(E[:, [i]], E[:, [j]])[1]
    return P


@pytest.mark.parametrize("n, seed", [(40, 301), (150, 302), (400, 303)])
def test_single_test_equals_lingam(n, seed):
    E = errors(n, 3, seed)
    for i, j in [(0, 1), (0, 2), (1, 2)]:
        stat, p = hsic.hsic_test_gamma(E[:, i], E[:, j])
        ref_stat, ref_p = lingam_hsic.hsic_test_gamma(E[:, [i]], E[:, [j]])
        assert stat == pytest.approx(ref_stat, rel=1e-10)
        assert p == pytest.approx(ref_p, rel=1e-8, abs=1e-10)


def test_two_dimensional_inputs_equal_lingam():
    E = errors(120, 4, 304)
    stat, p = hsic.hsic_test_gamma(E[:, :2], E[:, 2:])
    ref_stat, ref_p = lingam_hsic.hsic_test_gamma(E[:, :2], E[:, 2:])
    assert stat == pytest.approx(ref_stat, rel=1e-10)
    assert p == pytest.approx(ref_p, rel=1e-8, abs=1e-10)


@pytest.mark.parametrize("n, p, seed", [(200, 5, 305), (500, 4, 306)])
def test_p_value_matrix_equals_lingam(n, p, seed):
    E = errors(n, p, seed)
    P = hsic.independence_p_values(E)
    np.testing.assert_allclose(P, lingam_p_values(E), rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(P, P.T)
    assert P[0, 1] < 1e-6 < P[0, 3]  # the dependent pair is found


def test_pairwise_fallback_equals_all_pairs_at_once(monkeypatch):
    E = errors(150, 4, 307)
    at_once = hsic.independence_p_values(E)
    monkeypatch.setattr(hsic, "_GRAM_MEMORY_BYTES", 0)
    np.testing.assert_allclose(hsic.independence_p_values(E), at_once, rtol=1e-9, atol=1e-12)


def test_kernel_width_uses_the_first_100_samples():
    x = np.concatenate([np.linspace(0, 1, 100), np.full(50, 1e6)])
    assert hsic.kernel_width(x) == pytest.approx(lingam_hsic.get_kernel_width(x[:, None]))
    assert hsic.kernel_width(x) < 1.0


def test_one_variable_has_no_pairs():
    E = np.random.default_rng(308).standard_normal((30, 1))
    np.testing.assert_array_equal(hsic.independence_p_values(E), np.zeros((1, 1)))


def test_constant_columns_are_independent_of_every_column():
    # no kernel fits a constant: the test would divide 0 by 0
    E = errors(120, 4, 309)
    E[:, 2] = 0.0
    P = hsic.independence_p_values(E)
    assert np.isfinite(P).all()
    np.testing.assert_array_equal(P[2, [0, 1, 3]], 1.0)
    np.testing.assert_array_equal(P[[0, 1, 3], 2], 1.0)
    np.testing.assert_array_equal(np.diag(P), 0.0)
    keep = [0, 1, 3]
    np.testing.assert_allclose(P[np.ix_(keep, keep)], lingam_p_values(E[:, keep]), rtol=1e-9)
    assert np.isnan(hsic.kernel_width(E[:, 2]))
    assert hsic.hsic_test_gamma(E[:, 2], E[:, 0]) == (0.0, 1.0)


def test_columns_named_constant_get_p_value_one():
    E = errors(80, 3, 310)
    P = hsic.independence_p_values(E, constant=[False, True, False])
    np.testing.assert_array_equal(P[1, [0, 2]], 1.0)
    assert P[0, 2] == pytest.approx(lingam_p_values(E)[0, 2], rel=1e-9)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_fewer_than_six_samples_are_refused(n):
    # (n - 4)(n - 5) / (n - 3) in the null variance: division by zero at n=3,
    # a zero variance (NaN p-values) at n=4, 5
    E = errors(n, 3, 311)
    with pytest.raises(ValueError, match=f"at least 6 samples.*got {n}"):
        hsic.independence_p_values(E)
    with pytest.raises(ValueError, match=f"at least 6 samples.*got {n}"):
        hsic.hsic_test_gamma(E[:, 0], E[:, 1])


def test_six_samples_give_finite_p_values():
    E = errors(6, 3, 312)
    P = hsic.independence_p_values(E)
    assert np.isfinite(P).all()
    np.testing.assert_allclose(P, lingam_p_values(E), rtol=1e-8, atol=1e-10)
