"""Data read scaled block by block (``_preparation.ScaledData``) give the bits of the scaled copy.

``fit`` validates float input without copying it; the search's standardised
rows, the rounding noise and the GPU upload read it scaled by the columns'
powers of two, block by block, and the scaled copy for least squares is made
after the search. Every value must be the one of the copy that
``_as_data_matrix(..., scaled=True)`` made before, and every fit the same.
"""

import warnings

import numpy as np
import pytest

import paralingam
from paralingam import _api, _preparation
from paralingam._preparation import ScaledData, column_exponents, standardise_rows
from paralingam._validation import _as_data_matrix
from paralingam.datasets import make_lingam_data
from paralingam.search import policy


def _plain_scaled(X):
    """The scaled copy by the plainest route: float64, then ldexp by the exponents."""
    data = np.array(X, dtype=np.float64)
    e = column_exponents(data)
    return np.ldexp(data, -e), e


def _cases():
    rng = np.random.default_rng(5)
    n, p = 3000, 7
    base = rng.standard_normal((n, p)) * 10.0 ** rng.uniform(-3, 3, p)
    outliers = base.copy()
    outliers[rng.integers(0, n, 5), rng.integers(0, p, 5)] = 1e12
    tiny = base * 1e-300  # factors beyond 2**1000: ldexp, subnormal inputs included
    tiny[:, 0] *= 1e-15
    huge = base * 1e150
    wide = rng.standard_normal((2 * n + 1, p + 3))
    return {
        "float64 C": np.ascontiguousarray(base),
        "float64 F": np.asfortranarray(base),
        "float64 strided": wide[1::2, 2:p + 2],
        "float32 C": base.astype(np.float32),
        "float32 F": np.asfortranarray(base.astype(np.float32)),
        "float32 outliers": outliers.astype(np.float32),
        "float16": np.clip(base, -6e4, 6e4).astype(np.float16),
        "outliers": outliers,
        "tiny": tiny,
        "huge": huge,
        "integer-valued": np.round(base * 100),
        "two columns": np.ascontiguousarray(base[:, :2]),
        "one column": np.ascontiguousarray(base[:, :1]),
    }


CASES = _cases()


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("name", list(CASES))
def test_validation_deferred_copy_is_the_scaled_copy(name):
    X = CASES[name]
    copy, _, e = _as_data_matrix(X, scaled=True)
    product, _, e2 = _as_data_matrix(X, scaled="deferred")
    plain, e3 = _plain_scaled(X)
    _same(e, e2)
    _same(e, e3)
    assert isinstance(product, ScaledData)
    assert product.source is X  # no copy of float input
    _same(copy, plain)
    _same(product.copy(), plain)
    assert copy.flags.c_contiguous


def test_validation_deferred_of_integer_input_is_the_scaled_array():
    X = np.random.default_rng(0).integers(-50, 50, (500, 4))
    data, _, e = _as_data_matrix(X, scaled="deferred")
    assert isinstance(data, np.ndarray)
    _same(data, _plain_scaled(X)[0])


@pytest.mark.parametrize("name", list(CASES))
def test_standardised_rows_from_the_product_are_those_of_the_copy(name, monkeypatch):
    X = CASES[name]
    product, _, _ = _as_data_matrix(X, scaled="deferred")
    copy = product.copy()
    for rows in (_preparation.TRANSPOSE_ROWS, 37):  # whole blocks and a ragged last one
        monkeypatch.setattr(_preparation, "TRANSPOSE_ROWS", rows)
        Z, cov = standardise_rows(product)
        Z0, cov0 = standardise_rows(copy)
        _same(Z, Z0)
        _same(cov, cov0)
        _same(product.transposed(), np.ascontiguousarray(copy.T))


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("block_bytes, thread_bytes, threads, route", [
    (1 << 18, 1 << 24, 1, "compiled"),  # the module's settings: small data, one compiled call
    (4096, 1 << 24, 1, "compiled"),     # one group of columns
    (4096, 1 << 10, 3, "compiled"),     # columns in groups on threads
    (4096, 1 << 24, 1, "numpy"),        # numpy's blocks, one group of columns
    (4096, 1 << 10, 3, "numpy"),        # numpy's blocks, groups on threads
])  # (numpy's route for small data is the formula itself, on both sides here)
def test_noise_from_the_product_is_that_of_the_copy(name, block_bytes, thread_bytes, threads, route,
                                                    monkeypatch):
    if route == "numpy":  # the blocks in numpy (input the compiled loops do not read)
        monkeypatch.setattr(policy, "_compiled_sums", lambda X, j0, j1: None)
    monkeypatch.setattr(policy, "NOISE_BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(policy, "NOISE_THREAD_BYTES", thread_bytes)
    X = CASES[name]
    product, _, _ = _as_data_matrix(X, scaled="deferred")
    copy = product.copy()
    noise, std = policy.noise_and_std(product, threads)
    noise0, std0 = policy.noise_and_std(copy, threads)
    _same(noise, noise0)
    _same(std, std0)
    # and the formula itself, on the whole copy
    with np.errstate(all="ignore"):
        _same(std, copy.std(axis=0))
        ref = policy.EPS * (np.sqrt((copy * copy).mean(axis=0)) + np.abs(copy.mean(axis=0))) / std
    _same(noise, ref)


def _fit_as_before(X, **kw):
    """fit's phases on the scaled copy made up front (the route before ScaledData)."""
    times = {}
    data, names, exponents = _as_data_matrix(X, None, scaled=True)
    settings = _api.check_settings(data.shape[1], names, n_samples=data.shape[0], **kw)
    data, exponents = _api.prepare(data, None, settings, exponents=exponents)
    found = _api.search(data, settings, names, times)
    B = _api.adjacency(data, found, settings, exponents, names, times)
    return _api.fit_result(found, B, names, settings, times)


def _rank_deficient(n, seed):
    X = make_lingam_data(6, n, random_state=seed)[0]
    return np.column_stack([X, X[:, 0] - 2 * X[:, 3]])


FITS = {
    "lingam": make_lingam_data(8, 2000, random_state=1)[0],
    "lingam float32": make_lingam_data(8, 2000, random_state=2)[0].astype(np.float32),
    "lingam Fortran": np.asfortranarray(make_lingam_data(8, 2000, random_state=3)[0]),
    "tiny": make_lingam_data(6, 1500, random_state=4)[0] * 1e-305,
    "outliers": np.where(np.arange(1500)[:, None] % 500 == 7, 1e9,
                         make_lingam_data(6, 1500, random_state=5)[0]),
    "rank deficient": _rank_deficient(1500, 6),
}


@pytest.mark.parametrize("name", list(FITS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fit_is_unchanged(name, dtype):
    X = FITS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = paralingam.fit(X, backend="cpu", dtype=dtype)
        want = _fit_as_before(X, backend="cpu", dtype=dtype)
    assert got.causal_order == want.causal_order
    _same(got.adjacency_matrix, want.adjacency_matrix)
    assert got.stats["scores"] == want.stats["scores"]
    assert got.stats["explained"] == want.stats["explained"]


def test_fit_of_float32_input_is_that_of_its_float64_widening():
    X = make_lingam_data(10, 3000, random_state=8)[0].astype(np.float32)
    a = paralingam.fit(X, backend="cpu")
    b = paralingam.fit(X.astype(np.float64), backend="cpu")
    assert a.causal_order == b.causal_order
    _same(a.adjacency_matrix, b.adjacency_matrix)


@pytest.mark.parametrize("devices", [None, [0, 1]])
def test_the_gpu_search_reads_scaled_input_as_it_is_on_one_gpu_or_several(devices):
    # each device's upload scales the blocks (tests/test_gpu_scaled.py,
    # tests/test_multi_gpu.py); only ldexp factors need the host copy
    from types import SimpleNamespace

    settings = SimpleNamespace(backend="cuda", devices=devices)
    X = np.random.default_rng(5).standard_normal((50, 3)) * [1e-30, 1.0, 1e30]
    product, _, _ = _as_data_matrix(X, scaled="deferred")
    assert product.factors is not None and _api._readable_by_search(product, settings) is product
    tiny, _, _ = _as_data_matrix(X[:, 1:] * 1e-305, scaled="deferred")
    assert tiny.factors is None
    copy = _api._readable_by_search(tiny, settings)
    assert isinstance(copy, np.ndarray)
    np.testing.assert_array_equal(copy, tiny.copy())


def test_fit_leaves_the_input_unchanged():
    X = make_lingam_data(6, 1000, random_state=9)[0] * 1e-200
    before = X.copy()
    paralingam.fit(X, backend="cpu")
    _same(X, before)


@pytest.mark.parametrize("X, message", [
    (np.array([[1.0, np.nan], [2.0, 1.0], [3.0, 2.0]], dtype=np.float32), "NaN"),
    (np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0]], dtype=np.float32), "constant"),
])
def test_bad_float32_input_is_refused_by_name(X, message):
    with pytest.raises(ValueError, match=message):
        paralingam.fit(X, backend="cpu")
