"""Property-based fuzzing of ``paralingam.fit`` on the CPU backend.

Whatever the data (tiny shapes, extreme scales, integers, booleans, exact
and scaled copies, linear combinations, NaN/inf anywhere, constant and
near-constant columns) and the options, ``fit`` either returns a clean result
(a permutation, finite adjacency, finite scores) or raises one of the
documented ValueErrors with a message naming the problem. Anything else (a
crash, NaN output, IndexError, ZeroDivisionError, a numpy RuntimeWarning
about invalid values) fails.

The profile is derandomized and database-free so CI runs the same examples
every time; it takes well under a minute on two cores.
"""

import faulthandler
import re
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import paralingam  # noqa: E402
from paralingam import LinearDependenceError  # noqa: E402
from paralingam.search import reference

pytest.importorskip("paralingam.search._cpu", reason="the CPU extension is not built")

FUZZ = settings(max_examples=400, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Column operations, "keep" weighted up so that most examples are valid data.
OPS = ["keep"] * 4 + ["scale", "scale", "copy", "scaled_copy", "combo", "constant",
                      "near_constant", "huge"]
# The documented data errors (paralingam/_validation.py); each names a column.
DATA_ERRORS = [
    r"NaN, missing or infinite values in columns: column \d+: ",
    r"constant columns \(zero variance\): column \d+",
    r"values too large to centre and square in float64 in columns: column \d+",
    r"the edge weight of column \d+ on column \d+ exceeds float64",
]


@st.composite
def fuzz_cases(draw):
    n = draw(st.one_of(st.integers(3, 10), st.integers(30, 80)))
    p = draw(st.integers(1, 8))
    kind = draw(st.sampled_from(["float", "float", "int", "bool"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "float":  # a random linear non-Gaussian model
        E = rng.laplace(size=(n, p)) * rng.uniform(0.5, 2, p)
        B = np.triu(rng.uniform(-1, 1, (p, p)) * (rng.random((p, p)) < 0.5), 1)
        X = E @ np.linalg.inv(np.eye(p) - B)
    elif kind == "int":
        X = rng.integers(-3, 4, size=(n, p))
    else:
        X = rng.random((n, p)) < rng.uniform(0.1, 0.9, p)

    ops = draw(st.lists(st.sampled_from(OPS), min_size=p, max_size=p))
    if any(op != "keep" for op in ops):
        X = X.astype(np.float64)
    for j, op in enumerate(ops):
        k, k2 = draw(st.integers(0, p - 1)), draw(st.integers(0, p - 1))
        if op == "scale":
            X[:, j] *= 10.0 ** draw(st.integers(-150, 150))
        elif op == "huge":  # may be too large to square: a documented error
            X[:, j] *= 10.0 ** draw(st.integers(150, 300))
        elif op == "copy":
            X[:, j] = X[:, k]
        elif op == "scaled_copy":
            X[:, j] = draw(st.sampled_from([-2.5, 1e-3, 7.0, 1e5])) * X[:, k] + 3.0
        elif op == "combo":
            X[:, j] = X[:, k] - 2.0 * X[:, k2] + 0.5
        elif op == "constant":
            X[:, j] = draw(st.sampled_from([0.0, 1.5, -1e10, 1e-300]))
        elif op == "near_constant":
            level = draw(st.sampled_from([1.0, -3e7, 1e-200]))
            rel = draw(st.sampled_from([1e-16, 1e-15, 1e-13, 1e-9, 1e-6]))
            X[:, j] = level * (1.0 + rel * rng.standard_normal(n))

    holes = draw(st.one_of(st.just([]), st.lists(
        st.tuples(st.integers(0, n - 1), st.integers(0, p - 1),
                  st.sampled_from([np.nan, np.inf, -np.inf])), min_size=1, max_size=3)))
    if holes:
        X = X.astype(np.float64)
        for i, j, v in holes:
            X[i, j] = v

    options = draw(st.fixed_dictionaries({
        "threshold": st.booleans(),
        "n_threads": st.sampled_from([1, 2]),
        "on_collinear": st.sampled_from(["warn", "ignore", "error"]),
        "gamma0": st.sampled_from([1e-8, 1e-4, 1.0]),
        "c": st.sampled_from([1.5, 2.0, 10.0]),
    }))
    exact_ops = set(ops) <= {"keep", "scale", "copy", "scaled_copy", "combo"}
    comparable = kind == "float" and n >= 30 and not holes and exact_ops
    return X, options, comparable


def check_data_error(X, msg):
    """The message is documented, and what it says about the columns is true."""
    assert any(re.match(pat, msg) for pat in DATA_ERRORS), msg
    X = np.asarray(X, dtype=np.float64)
    if msg.startswith("NaN"):
        for j, what in re.findall(r"column (\d+): ([^,]+(?:, \d+ infinite)?)", msg):
            col = X[:, int(j)]
            nan = re.search(r"(\d+) NaN/missing", what)
            inf = re.search(r"(\d+) infinite", what)
            assert (int(nan.group(1)) if nan else 0) == np.isnan(col).sum(), msg
            assert (int(inf.group(1)) if inf else 0) == np.isinf(col).sum(), msg
        named = {int(j) for j in re.findall(r"column (\d+):", msg)}
        assert named == set(np.flatnonzero(~np.isfinite(X).all(axis=0))) or "more" in msg
    elif msg.startswith("constant"):
        for j in map(int, re.findall(r"column (\d+)", msg)):
            col = X[:, j]
            assert np.ptp(col) <= 1e-14 * max(np.abs(col).max(), 1e-300), (j, col)
    elif msg.startswith("values too large"):
        for j in map(int, re.findall(r"column (\d+)", msg)):
            assert np.abs(X[:, j]).max() > 1e150


@FUZZ
@given(case=fuzz_cases())
def test_fit_returns_a_clean_result_or_a_documented_error(case):
    X, options, comparable = case
    p = X.shape[1]
    faulthandler.dump_traceback_later(60, exit=True)  # a hang fails loudly, not forever
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
            warnings.simplefilter("error", RuntimeWarning)  # overflow/invalid inside fit
            try:
                res = paralingam.fit(X, backend="cpu", **options)
            except LinearDependenceError as err:
                assert options["on_collinear"] == "error"
                assert err.kind in ("collinear", "explained")
                assert err.variables and set(err.variables).isdisjoint(err.roots)
                assert all(0 <= v < p for v in err.variables + err.roots)
                assert str(err).startswith("exact linear dependence: column ")
                event("LinearDependenceError")
                return
            except ValueError as err:
                check_data_error(X, str(err))
                event(f"ValueError: {str(err).split(':')[0]}")
                return
    finally:
        faulthandler.cancel_dump_traceback_later()

    event(f"fitted ({'with' if res.stats['explained'] else 'no'} explained)")
    order = res.causal_order
    assert sorted(order) == list(range(p))
    assert all(isinstance(v, int) for v in order)
    assert res.adjacency_matrix.shape == (p, p) and np.isfinite(res.adjacency_matrix).all()
    scores = res.stats["scores"]
    assert len(scores) == len(res.stats["remaining"]) <= max(p - 1, 0)
    assert np.isfinite(scores).all() and all(s >= 0.0 for s in scores)
    pos = {v: k for k, v in enumerate(order)}
    for var, root in res.stats["explained"].items():
        assert pos[root] < pos[var]
    if options["on_collinear"] == "error":
        assert res.stats["explained"] == {}
    if comparable:  # continuous data with exact dependencies only: the reference's order
        ref_order, ref_explained = reference.causal_order(X)
        assert order == ref_order and res.stats["explained"] == ref_explained
