"""Gross outliers are not exact linear dependence (issue 20, point 3).

One sample of a root's noise set to 1e4..1e10 dominates the variance of the
root and of its descendants, so ``1 - rho**2`` of a genuine residual falls
to 1e-14 (1e8) or 1e-18 (1e10). The degenerate-data policy used to take that
for exact dependence. It now judges the measured residual against its
rounding noise (``paralingam.search.policy``): such data get lingam's order, while
the E. coli flux samples (exact stoichiometric identities) keep the
explained variables and the order of the old fixed-fraction rule.
"""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from lingam_oracle import lingam_module

import paralingam
from paralingam.search import policy, reference

pytest.importorskip("paralingam.search._cpu", reason="the CPU extension is not built")
lingam = lingam_module("lingam", __name__)

BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
_ROOT = Path(__file__).resolve().parents[1]
FULL_ECOLI = [_ROOT.parent / "shared" / "data" / "ecoli_core_fluxes_n10000.npz",
              _ROOT / ".gpu" / "data" / "ecoli_core_fluxes_n10000.npz"]
SEEDS = range(12)


def with_outlier(seed, size, n=1000, p=5):
    """A random linear DAG with uniform noise; one sample of the root's noise is ``size``."""
    rng = np.random.default_rng(seed)
    B = np.tril(rng.uniform(0.5, 1.5, (p, p)) * rng.choice([-1, 1], (p, p)), -1)
    B *= rng.random((p, p)) < 0.6
    E = rng.uniform(-1, 1, (n, p))
    E[rng.integers(n), 0] = size
    X = np.linalg.solve(np.eye(p) - B, E.T).T
    return X[:, rng.permutation(p)]


def strict_fit(X, backend, **kwargs):
    """Fit with on_collinear="error" and any DegenerateDataWarning an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", paralingam.DegenerateDataWarning)
        return paralingam.fit(X, backend=backend, on_collinear="error", **kwargs)


def lingam_order(X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [int(v) for v in lingam.DirectLiNGAM().fit(X).causal_order_]


@pytest.mark.parametrize("size", [1e4, 1e5, 1e6, 1e7, 1e8])
def test_reference_gets_lingams_order_with_outliers(size):
    for seed in SEEDS:
        X = with_outlier(seed, size)
        order, explained = reference.causal_order(X, stop_on_dependence=True)
        assert explained == {}
        assert order == lingam_order(X), seed


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size", [1e4, 1e6, 1e8])
def test_backend_gets_lingams_order_with_outliers(backend, dtype, size):
    for seed in SEEDS:
        X = with_outlier(seed, size)
        res = strict_fit(X, backend, dtype=dtype)  # no dependence, no warning
        assert res.stats["explained"] == {}
        assert res.causal_order == lingam_order(X), seed
        assert np.isfinite(res.adjacency_matrix).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("size", [1e9, 1e10])
def test_larger_outliers_are_not_dependence(backend, size):
    # From 1e9 on, lingam's own order depends on rounding (it changes when
    # the rows are reversed in about half of these cases), so the order is
    # not compared with it; but no residual is taken for a dependence: the
    # fit equals the one with the policy switched off.
    for seed in SEEDS:
        X = with_outlier(seed, size)
        ref_order, explained = reference.causal_order(X, stop_on_dependence=True)
        assert explained == {}
        assert ref_order == reference.causal_order(X, 1e-300, 1e-300)[0]
        res = strict_fit(X, backend)
        off = paralingam.fit(X, backend=backend, collinear_tol=1e-300, explained_tol=1e-300)
        assert res.causal_order == off.causal_order, seed
        assert sorted(res.causal_order) == list(range(X.shape[1]))
        assert np.isfinite(res.stats["scores"]).all()


def test_a_sample_scaled_past_the_rounding_margin_reads_as_dependence():
    # The edge the user guide names ("Outliers"): one sample scaled in every
    # variable leaves the others' genuine residuals at about 1/scale of the
    # variables' scale. Up to 1e10 they stand far above the rounding test's
    # margin (ROUNDING_MARGIN times the noise); from 1e12 they fall within it
    # and variables read as fully explained, with the warning.
    rng = np.random.default_rng(0)
    Y = rng.uniform(-1, 1, size=(500, 4))
    Y[:, 1] += 0.8 * Y[:, 0]
    Y[:, 2] += 0.7 * Y[:, 1]
    Y[:, 3] += 0.6 * Y[:, 2]
    for scale, dependent in ((1e8, False), (1e10, False), (1e12, True), (1e13, True)):
        Z = Y.copy()
        Z[0] *= scale
        assert bool(reference.causal_order(Z)[1]) == dependent, scale
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", paralingam.DegenerateDataWarning)
            res = paralingam.fit(Z, backend="cpu")
        assert bool(res.stats["explained"]) == dependent, scale
        assert any(issubclass(w.category, paralingam.DegenerateDataWarning)
                   for w in caught) == dependent, scale


@pytest.mark.parametrize("size", [1e6, 1e8])
def test_outlier_was_taken_for_dependence_by_the_fixed_fraction(size, monkeypatch):
    # The cases above fail under the old rule (the fraction alone): the tests
    # can tell the rules apart.
    monkeypatch.setattr(policy, "ROUNDING_MARGIN", np.inf)
    hits = sum(bool(reference.causal_order(with_outlier(seed, size))[1]) for seed in SEEDS)
    assert hits > 0


def fixed_fraction_rule(X, monkeypatch):
    """The order and explained variables of the old rule (no rounding test)."""
    with monkeypatch.context() as m:
        m.setattr(policy, "ROUNDING_MARGIN", np.inf)
        return reference.causal_order(X)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ecoli_sample_unchanged(ecoli, backend, monkeypatch):
    X, _ = ecoli
    old_order, old_explained = fixed_fraction_rule(X, monkeypatch)
    assert len(old_explained) == X.shape[1] - 24  # rank 24: every dependent column
    order, explained = reference.causal_order(X)
    assert (order, explained) == (old_order, old_explained)
    for dtype in ("float32", "float64"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
            res = paralingam.fit(X, backend=backend, dtype=dtype)
        assert res.causal_order == old_order
        assert res.stats["explained"] == old_explained


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rows", [slice(0, 3000), slice(7000, 10000)], ids=["first3000", "last3000"])
def test_full_ecoli_unchanged(backend, rows, monkeypatch):
    path = next((f for f in FULL_ECOLI if f.exists()), None)
    if path is None:
        pytest.skip("the shared E. coli data (../shared/data) are not beside the clone")
    with np.load(path) as f:
        X = f["X"][rows]
    old_order, old_explained = fixed_fraction_rule(X, monkeypatch)
    assert old_explained
    assert reference.causal_order(X) == (old_order, old_explained)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        res = paralingam.fit(X, backend=backend)
    assert res.causal_order == old_order
    assert res.stats["explained"] == old_explained


def test_residual_fraction_resolves_below_eps():
    # x_b dominated by one sample of 1e10; x_a = x_b + e with e of unit
    # variance, orthogonal to x_b: the fraction is var(e) / var(x_a), about
    # 1e-17, far under eps, where 1 - rho**2 rounds to 0 or a few eps.
    rng = np.random.default_rng(7)
    n = 1000
    xb = rng.uniform(-1, 1, n)
    xb[3] = 1e10
    e = rng.standard_normal(n)
    bc = xb - xb.mean()
    e -= e.mean()
    e -= (e @ bc) / (bc @ bc) * bc
    xa = xb + e
    expected = e.var() / xa.var()
    assert expected < 1e-15
    assert policy.residual_fraction(xa, xb) == pytest.approx(expected, rel=1e-6)


def test_dependence_rule():
    eps = policy.EPS
    noise = policy.pair_noise(eps, eps)
    limit = (policy.ROUNDING_MARGIN * noise) ** 2
    assert policy.is_dependent(0.5 * limit, 1.0, 1e-10, noise)
    assert not policy.is_dependent(2.0 * limit, 1.0, 1e-10, noise)
    assert not policy.is_dependent(0.5 * limit, 1.0, 0.1 * limit, noise)  # tolerance: a cap
    # the fraction left (frac * f) is what the tolerance limits
    assert not policy.is_dependent(0.5 * limit, 1.0, 1e-300, noise)
    assert policy.is_dependent(0.0, 1.0, 1e-300, noise)
    assert policy.regressed_noise(noise, 1e-4) == pytest.approx(100 * noise)
    X = np.column_stack([np.arange(10.0), 1e6 + np.arange(10.0)])
    nu = policy.initial_noise(X)
    assert nu[1] > 1e5 * nu[0]  # far from zero relative to its spread: more rounding


def test_cuda_kernel_stores_non_collinear_correlations_below_one():
    # (the policy's constants themselves have one home: tests/test_constants.py)
    src = (_ROOT / "kernels" / "paralingam.cu").read_text()
    below = float(re.search(r"#define PL_BELOW_ONE ([0-9.]+)", src).group(1))
    assert below == np.nextafter(1.0, 0.0)
