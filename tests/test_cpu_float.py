"""The CPU backend's float32 comparisons: their error against double, and certified roots.

With ``dtype="float32"`` (the default) each comparison takes its exp and log
in float and carries an error bound derived from ``paralingam._constants.MOMENT_ERR_CPU``;
an iteration whose float scores cannot separate the root from a rival is
re-decided in double. The order must be the double search's on every case.
"""

import warnings

import numpy as np
import pytest

import paralingam
from paralingam import _constants, _isa, _testing
from paralingam.search import reference

_cpu = _isa.load("search._cpu")  # the build fit uses (paralingam._isa)

from test_prior_knowledge import prior_from_order

DISTRIBUTIONS = {
    "uniform": lambda rng, n: rng.uniform(-1, 1, n),
    "laplace": lambda rng, n: rng.laplace(size=n),
    "exponential": lambda rng, n: rng.exponential(size=n),
    "student-t 2.5": lambda rng, n: rng.standard_t(2.5, n),
    "binary": lambda rng, n: rng.integers(0, 2, n).astype(float),
    "tenths": lambda rng, n: np.round(rng.normal(size=n), 1),
    "one outlier": lambda rng, n: np.r_[rng.normal(size=n - 1), 60.0][rng.permutation(n)],
}


def standardise(x):
    x = x - x.mean()
    return x / np.sqrt((x * x).mean())


@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize("n", [5, 127, 128, 129, 1000, 4099])
def test_float_moments_are_within_a_tenth_of_the_bound(dist, n):
    rng = np.random.default_rng([n, len(dist)])
    worst = 0.0
    for rho in (0.0, 0.3, -0.8, 0.999, -0.999999):
        xa = standardise(DISTRIBUTIONS[dist](rng, n))
        xb = standardise(rho * xa + np.sqrt(max(0.0, 1 - rho * rho)) * rng.normal(size=n))
        r = float(np.mean(xa * xb))
        for both in (True, False):
            exact = _testing.pair_moments(xa, xb, r, both=both)
            approx = _testing.pair_moments(xa, xb, r, use_float=True, both=both)
            assert len(approx) == len(exact) == (4 if both else 2)
            worst = max(worst, np.abs(np.subtract(approx, exact)).max())
        # the moments themselves, from numpy, to be sure double is the reference
        u = (xa - r * xb) / np.sqrt(1 - r * r)
        np.testing.assert_allclose(
            _testing.pair_moments(xa, xb, r, both=False),
            [np.mean(np.log(np.cosh(u))), np.mean(u * np.exp(-u * u / 2))], atol=1e-12)
    assert worst < _constants.MOMENT_ERR_CPU / 10


def test_float_moments_of_huge_residuals_stay_finite():
    # near-collinear pairs give |u| up to 1e5: exp's argument is clamped
    rng = np.random.default_rng(7)
    xa = standardise(rng.laplace(size=300))
    xb = standardise(xa + 1e-5 * rng.normal(size=300))
    r = float(np.mean(xa * xb))
    exact = _testing.pair_moments(xa, xb, r)
    approx = _testing.pair_moments(xa, xb, r, use_float=True)
    assert np.isfinite(approx).all()
    np.testing.assert_allclose(approx, exact, atol=_constants.MOMENT_ERR_CPU / 10, rtol=1e-7)


def fit(X, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        return paralingam.fit(X, backend="cpu", **kwargs)


def mixed_data(p, n, seed):
    """A random DAG driven by noise of every distribution above."""
    rng = np.random.default_rng(seed)
    names = sorted(DISTRIBUTIONS)
    E = np.column_stack([standardise(DISTRIBUTIONS[names[k % len(names)]](rng, n))
                         for k in range(p)])
    B = np.tril(rng.uniform(-1.5, 1.5, (p, p)) * (rng.random((p, p)) < 0.4), -1)
    X = np.linalg.solve(np.eye(p) - B, E.T).T
    return X[:, rng.permutation(p)]


@pytest.mark.parametrize("p, n, seed", [(8, 64, 1), (15, 300, 2), (25, 1000, 3), (40, 2000, 4)])
@pytest.mark.parametrize("threshold", [True, False])
def test_float32_order_is_the_float64_order(p, n, seed, threshold):
    X = mixed_data(p, n, seed)
    exact = fit(X, dtype="float64", threshold=threshold)
    for k in (1, 2):
        res = fit(X, dtype="float32", threshold=threshold, n_threads=k)
        assert res.causal_order == exact.causal_order
        assert res.stats["explained"] == exact.stats["explained"]
        np.testing.assert_allclose(res.stats["scores"], exact.stats["scores"],
                                   rtol=1e-2, atol=1e-9)
    assert exact.causal_order == reference.causal_order(X)[0]
    assert not any(exact.stats["float64_redo"])


@pytest.fixture
def loose_bound(monkeypatch):
    """``loose_bound(err)``: CPU searches claim moments off by ``err``.

    A bound far above the real error makes most iterations uncertain: rivals
    that stopped at the threshold must work on, and the root is re-decided
    in double among many candidates.
    """
    search_order = _cpu.search_order

    def with_bound(err):
        monkeypatch.setattr(_cpu, "search_order", lambda *a, **k: search_order(
            *a, **dict(k, moment_err=err)))

    return with_bound


@pytest.mark.parametrize("err", [1e-4, 1e-2])
@pytest.mark.parametrize("p, n, seed", [(20, 500, 11), (35, 1500, 12)])
def test_uncertain_roots_are_re_decided_in_double(loose_bound, p, n, seed, err):
    X = mixed_data(p, n, seed)
    exact = fit(X, dtype="float64")
    certified = fit(X)
    loose_bound(err)
    res = fit(X)
    assert res.causal_order == exact.causal_order
    redo = res.stats["float64_redo"]
    candidates = res.stats["float64_candidates"]
    assert len(redo) == len(candidates) == len(res.stats["remaining"])
    assert sum(redo) > sum(certified.stats["float64_redo"])  # the bound really bit
    assert all((c > 1) == r for c, r in zip(candidates, redo))
    # the root's float score is reported either way
    assert res.stats["scores"] == certified.stats["scores"]


@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("seed", [21, 22])
def test_prior_knowledge_with_uncertain_roots(loose_bound, soft, seed):
    X = mixed_data(18, 600, seed)
    order = reference.causal_order(X)[0]
    pk = prior_from_order(order, np.random.default_rng(seed), 0.2)
    exact = fit(X, dtype="float64", prior_knowledge=pk, apply_prior_knowledge_softly=soft)
    loose_bound(1e-3)
    res = fit(X, prior_knowledge=pk, apply_prior_knowledge_softly=soft)
    assert res.causal_order == exact.causal_order


def test_degenerate_data_with_uncertain_roots(loose_bound, ecoli):
    X = ecoli[0][:500]
    exact = fit(X, dtype="float64")
    loose_bound(1e-3)
    res = fit(X)
    assert res.causal_order == exact.causal_order
    assert res.stats["explained"] == exact.stats["explained"]


def discrete_data(seed):
    """Small discrete data full of exact ties (I exactly 0 up to rounding)."""
    rng = np.random.default_rng(70_000 + seed)
    p, n, levels = int(rng.integers(2, 7)), int(rng.integers(6, 120)), int(rng.choice([2, 3, 4]))
    X = rng.integers(0, levels, (n, p)).astype(float)
    for j in range(1, p):
        if rng.random() < 0.6:
            k = rng.integers(0, j)
            X[:, j] = (X[:, j] + X[:, k] * (rng.random(n) < 0.7)) % levels
    return X[:, np.ptp(X, axis=0) > 0]


def test_exact_ties_are_re_decided_with_the_float64_bits():
    # Ties are decided by the rounding of the statistics; a re-decision must
    # use the float64 search's own bits (one compiled copy, pl_stat_f64).
    # Before that, 43 of 1499 such cases came out differently.
    X = np.array([[1, 1, 0, 0, 1, 0, 0, 1], [0, 0, 0, 1, 0, 0, 0, 1]], float).T
    res = fit(X, n_threads=1)
    assert res.stats["float64_redo"] == [True]
    assert res.causal_order == fit(X, dtype="float64", n_threads=1).causal_order
    for seed in range(300):
        X = discrete_data(seed)
        if X.shape[1] < 2:
            continue
        exact = fit(X, dtype="float64", n_threads=1).causal_order
        for kwargs in ({"n_threads": 1}, {"n_threads": 2, "threshold": False}):
            assert fit(X, **kwargs).causal_order == exact, seed
