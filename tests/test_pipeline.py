"""The steps around the search (issue 21): same results, fewer passes, no scipy in a plain fit."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.linalg.lapack import dpotrf, dtrtri

import paralingam
from paralingam import adjacency
from paralingam.datasets import make_lingam_data

ROOT = Path(__file__).resolve().parents[1]


def _ols_on_predecessors_scipy(gram):
    """The previous ``_ols_on_predecessors``: scipy's dpotrf and dtrtri."""
    p = gram.shape[0]
    coef, rss, solved = np.zeros((p, p)), np.zeros(p), np.zeros(p, dtype=bool)
    L, info = dpotrf(gram, lower=1, clean=1)
    rows = p if info == 0 else max(info - 1, 0)
    pivots = np.diag(L)[:rows] ** 2
    bad = ~(pivots > adjacency.SINGULAR_TOL * np.diag(gram)[:rows]) | ~np.isfinite(pivots)
    good = int(np.argmax(bad)) if bad.any() else rows
    m = min(good + 1, rows)
    if m <= 1:
        return coef, rss, solved
    Lm = L[:m, :m]
    Linv, info = dtrtri(Lm, lower=1)
    coef[:m, :m] = np.tril(Linv, -1) * -np.diag(Lm)[:, None]
    rss[:m] = np.diag(Lm) ** 2
    solved[:m] = np.isfinite(coef[:m]).all(axis=1)
    return coef, rss, solved


def _gram(X):
    Xc = X - X.mean(axis=0)
    return Xc.T @ Xc


@pytest.mark.parametrize("p", [1, 2, 5, 31, 32, 33, 64, 100, 257])
def test_lower_inverse_equals_lapack_dtrtri(p):
    rng = np.random.default_rng(p)
    L = np.tril(rng.standard_normal((p, p))) + np.diag(rng.uniform(1, 3, p))
    want, info = dtrtri(L, lower=1)
    assert info == 0
    got = adjacency._lower_inverse(L)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    assert not np.triu(got, 1).any()


@pytest.mark.parametrize("case", ["random", "ill_conditioned", "dependent", "outliers", "tiny"])
def test_ols_on_predecessors_equals_the_scipy_route(case):
    rng = np.random.default_rng(11)
    n, p = 400, 40
    if case == "random":
        X = make_lingam_data(p, n, random_state=3)[0]
    elif case == "ill_conditioned":
        X = rng.standard_normal((n, p))
        X[:, 7] = X[:, 3] + 1e-6 * rng.standard_normal(n)  # a near copy
    elif case == "dependent":
        X = rng.standard_normal((n, p))
        X[:, 20] = X[:, 2] - 0.5 * X[:, 5]  # exact: scipy's partial factor
    elif case == "outliers":
        X = rng.laplace(size=(n, p))
        X[rng.integers(0, n, 5), rng.integers(0, p, 5)] = 1e6
    else:
        X = rng.standard_normal((n, 3))
        p = 3
    G = _gram(X)
    coef, rss, solved = adjacency._ols_on_predecessors(G)
    want_coef, want_rss, want_solved = _ols_on_predecessors_scipy(G)
    np.testing.assert_array_equal(solved, want_solved)
    scale = max(1.0, np.abs(want_coef).max())
    tol = 1e-9 if case == "ill_conditioned" else 1e-12
    np.testing.assert_allclose(coef, want_coef, rtol=0, atol=tol * scale)
    np.testing.assert_allclose(rss, want_rss, rtol=1e-10, atol=1e-12 * np.diag(G).max())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_adjacency_equals_the_scipy_route(seed, monkeypatch):
    X = make_lingam_data(30, 1000, random_state=seed)[0]
    new = paralingam.fit(X, backend="cpu")
    monkeypatch.setattr(adjacency, "_ols_on_predecessors", _ols_on_predecessors_scipy)
    old = paralingam.fit(X, backend="cpu")
    assert list(new.causal_order) == list(old.causal_order)
    np.testing.assert_allclose(new.adjacency_matrix, old.adjacency_matrix, rtol=0, atol=1e-12)


FRESH = r"""
import json, sys
import numpy as np
import paralingam
rng = np.random.default_rng(0)
X = rng.laplace(size=(2000, 8))
X[:, 3] += X[:, 1]
r = paralingam.fit(X, backend="cpu")
print(json.dumps({"scipy.linalg": "scipy.linalg" in sys.modules,
                  "phases": sorted(r.stats["time"])}))
"""


def test_a_cpu_fit_in_a_fresh_process_does_not_import_scipy_linalg():
    out = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["scipy.linalg"] is False
    # the first fit's loading is a phase of its own, not the standardisation's
    assert "load" in got["phases"] and "standardise" in got["phases"]


def test_blas_controller_is_made_again_once_scipy_blas_is_loaded(monkeypatch):
    from paralingam import _api

    import scipy.linalg  # noqa: F401  (scipy's BLAS is loaded in this process)

    first = _api._blas_threads()
    assert _api._blas_threads() is first  # made once per set of libraries
    # a controller made before scipy.linalg was loaded does not see its BLAS
    monkeypatch.setattr(_api, "_blas_controller_libraries", False)
    again = _api._blas_threads()
    assert again is not first and _api._blas_controller_libraries is True
    assert _api._blas_threads() is again
