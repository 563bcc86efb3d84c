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


FRESH = r"""
import json, sys
import numpy as np
import paralingam
rng = np.random.default_rng(0)
X = rng.laplace(size=(2000, 8))
X[:, 3] += X[:, 1]
r = paralingam.fit(X, backend="cpu")
loaded = "scipy.linalg" in sys.modules
masked = "numpy.ma" in sys.modules
from paralingam import _lapack
mine = _lapack.lapack("dpotrf", "dtrtri")
import scipy.linalg.lapack
same = mine == (scipy.linalg.lapack.dpotrf, scipy.linalg.lapack.dtrtri)
again = paralingam.fit(X, backend="cpu")  # with scipy.linalg imported
print(json.dumps({"scipy.linalg": loaded, "numpy.ma": masked, "phases": sorted(r.stats["time"]),
                  "same_routines": bool(same),
                  "same_result": r.adjacency_matrix.tobytes() == again.adjacency_matrix.tobytes()
                  and r.causal_order == again.causal_order}))
"""


def test_a_first_fit_times_its_loading_as_a_phase_of_its_own():
    out = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True,
                         check=True, cwd=Path(paralingam.__file__).resolve().parents[1])
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # the first fit's loading is a phase of its own, not the standardisation's
    assert "load" in got["phases"] and "standardise" in got["phases"]


def test_a_plain_fit_uses_scipys_lapack_without_importing_scipy_linalg():
    out = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True,
                         check=True, cwd=Path(paralingam.__file__).resolve().parents[1])
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert not got["scipy.linalg"]
    assert not got["numpy.ma"]  # (the check for masked arrays does not load numpy.ma)
    # scipy.linalg, imported afterwards, uses the very routines the fit used
    assert got["same_routines"] and got["same_result"]


def test_lapack_routines_are_scipys_in_a_process_that_imported_scipy_linalg():
    import scipy.linalg.lapack

    from paralingam import _lapack

    assert _lapack.lapack("dpotrf", "dtrtri") == (scipy.linalg.lapack.dpotrf,
                                                   scipy.linalg.lapack.dtrtri)


def test_lapack_falls_back_to_the_package_when_the_file_cannot_be_loaded(monkeypatch):
    import scipy.linalg.lapack

    from paralingam import _lapack

    def broken():
        raise ImportError("no such file")

    monkeypatch.delitem(sys.modules, _lapack.MODULE)
    monkeypatch.setattr(_lapack, "_load_alone", broken)
    assert _lapack.lapack("dpotrf")[0] is scipy.linalg.lapack.dpotrf


# ---------------------------------------------------------------------------
# input preparation: fewer passes, the same bits
# ---------------------------------------------------------------------------

def _standardise_rows_before(X):
    """The previous ``standardise_rows``: one n x p temporary for the squares."""
    Z = np.array(X.T, dtype=np.float64, order="C", copy=True)
    Z -= Z.mean(axis=1, keepdims=True)
    Z /= np.sqrt((Z * Z).mean(axis=1, keepdims=True))
    cov = Z @ Z.T / Z.shape[1]
    cov = 0.5 * (cov + cov.T)
    np.fill_diagonal(cov, 1.0)
    return Z, cov


def _prepared_before(X):
    """The previous preparation: float64 copy, exponents from |X|, ldexp."""
    data = np.array(X, dtype=np.float64, order="C", copy=True)
    e = np.frexp(np.abs(data).max(axis=0, initial=0.0))[1]
    return np.ldexp(data, -e, out=data), e


def _datasets():
    rng = np.random.default_rng(5)
    yield "lingam", make_lingam_data(12, 3000, random_state=1)[0]
    yield "outliers", np.where(rng.random((2000, 6)) < 0.01, 1e12, rng.laplace(size=(2000, 6)))
    tiny = rng.standard_normal((500, 4))
    tiny[:, 1] *= 1e-170
    tiny[:, 2] *= 1e-300  # products at the bottom of the normal range
    tiny[:, 3] *= 1e150
    yield "tiny_and_huge", tiny
    yield "float32", rng.standard_normal((1000, 5)).astype(np.float32)
    yield "int", rng.integers(-1000, 1000, (800, 4))
    yield "fortran", np.asfortranarray(rng.laplace(size=(700, 9)))
    yield "one_row_block", rng.standard_normal((3, 2))
    yield "float16", rng.standard_normal((300, 3)).astype(np.float16)
    yield "float32_fortran", np.asfortranarray(rng.laplace(size=(600, 4)).astype(np.float32))
    yield "strided", rng.laplace(size=(1001, 8))[::2, 1:7]
    yield "bool_and_small_ints", (rng.random((400, 3)) < 0.3).astype(np.int8) + np.arange(3)
    beyond = rng.standard_normal((200, 3))
    beyond[:, 0] *= 1e-310  # exponents beyond -1000: ldexp itself scales
    beyond[:, 1] *= 1e100
    yield "exponents_beyond_1000", beyond


@pytest.mark.parametrize("name,X", list(_datasets()), ids=[n for n, _ in _datasets()])
def test_preparation_is_bit_identical_to_before(name, X, monkeypatch):
    from paralingam import _preparation
    from paralingam._validation import _as_data_matrix, as_data_matrix

    data, _, absmax = _as_data_matrix(X)
    np.testing.assert_array_equal(absmax, np.abs(data).max(axis=0))
    assert np.array_equal(as_data_matrix(X)[0], data)
    e = _preparation.column_exponents(data, absmax)
    scaled = _preparation.scale_columns(data.copy(), e)
    want, want_e = _prepared_before(X)
    np.testing.assert_array_equal(e, want_e)
    assert np.array_equal(scaled, want) and scaled.tobytes() == want.tobytes()
    # fit's route: the checks on the input itself and one scaled copy, also
    # by blocks of rows on threads (forced here by tiny thresholds)
    from paralingam import _validation

    for block, per_thread in ((_validation.EXTREMES_BLOCK_BYTES, _validation.THREAD_BYTES),
                              (64, 256)):
        monkeypatch.setattr(_validation, "EXTREMES_BLOCK_BYTES", block)
        monkeypatch.setattr(_validation, "THREAD_BYTES", per_thread)
        direct, _, direct_e = _as_data_matrix(X, scaled=True)
        np.testing.assert_array_equal(direct_e, want_e)
        assert direct.flags.c_contiguous and direct.dtype == np.float64
        assert direct.tobytes() == want.tobytes()
    # by blocks of rows, and with a block of a single row
    for block, rows in ((_preparation.STANDARDISE_BLOCK, _preparation.TRANSPOSE_ROWS), (1, 1),
                        (1 << 10, 7)):
        monkeypatch.setattr(_preparation, "STANDARDISE_BLOCK", block)
        monkeypatch.setattr(_preparation, "TRANSPOSE_ROWS", rows)
        Z, cov = _preparation.standardise_rows(scaled)
        Z0, cov0 = _standardise_rows_before(scaled)
        assert Z.tobytes() == Z0.tobytes() and cov.tobytes() == cov0.tobytes()


@pytest.mark.parametrize("layout", ["C", "F", "strided", "float32"])
def test_transposed_copy_is_a_new_c_ordered_transpose(layout, monkeypatch):
    from paralingam import _preparation

    X = np.random.default_rng(2).laplace(size=(1001, 13))
    X = {"C": X, "F": np.asfortranarray(X), "strided": X[::3, 1:],
         "float32": X.astype(np.float32)}[layout]
    for rows in (256, 1, 1000, 5000):
        monkeypatch.setattr(_preparation, "TRANSPOSE_ROWS", rows)
        Z = _preparation.transposed_copy(X)
        assert Z.flags.c_contiguous and Z.dtype == np.float64 and not np.shares_memory(Z, X)
        assert Z.tobytes() == np.ascontiguousarray(X.T, dtype=np.float64).tobytes()


def test_scale_columns_equals_ldexp_into_the_subnormals():
    from paralingam import _preparation

    rng = np.random.default_rng(3)
    X = rng.standard_normal((2000, 3))
    X[:, 0] *= 1e-300
    X[:5, 1] = [1e300, 1e-300, 5e-324, -3e-310, 0.0]  # subnormal and zero results
    e = np.array([0, 900, -999])
    for exps in (e, np.array([1023, -1070, 5])):  # the last: ldexp itself
        with np.errstate(over="ignore"):
            want = np.ldexp(X, -exps)
            got = _preparation.scale_columns(X.copy(), exps)
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("seed", [0, 3])
def test_fit_is_bit_identical_to_the_previous_preparation(seed, monkeypatch):
    """The whole fit on the old preparation (copy, |X| maxima, ldexp, squares at once)."""
    from paralingam import _api, _preparation, _validation

    X = make_lingam_data(15, 2000, random_state=seed)[0]
    X[::97, 2] = 40.0  # outliers
    new = paralingam.fit(X, backend="cpu", n_threads=1)

    def old_as_data_matrix(X, names=None, *, allow_constant=False, scaled=False):
        assert scaled
        data, e = _prepared_before(X)
        return data, None, e

    monkeypatch.setattr(_api, "_as_data_matrix", old_as_data_matrix)
    monkeypatch.setattr(_preparation, "standardise_rows", _standardise_rows_before)
    old = paralingam.fit(X, backend="cpu", n_threads=1)
    assert list(new.causal_order) == list(old.causal_order)
    assert new.adjacency_matrix.tobytes() == old.adjacency_matrix.tobytes()
    assert new.stats["scores"] == old.stats["scores"]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bad", [None, np.nan, np.inf, -np.inf])
def test_column_extremes_by_blocks_and_threads_are_numpys(dtype, bad, monkeypatch):
    from paralingam import _validation

    rng = np.random.default_rng(4)
    X = (rng.standard_normal((3001, 7)) * 10.0 ** rng.uniform(-30, 30, 7)).astype(dtype)
    if bad is not None:
        X[1234, 3] = bad
        X[3000, 6] = bad
    monkeypatch.setattr(_validation, "EXTREMES_BLOCK_BYTES", 200)  # blocks of 3 to 7 rows
    for per_thread in (1 << 30, 4096, 1):  # one thread, a few, one per row
        monkeypatch.setattr(_validation, "THREAD_BYTES", per_thread)
        for src in (X, np.asfortranarray(X), X[::2, 1:]):
            hi, lo = _validation._column_extremes(src)
            with np.errstate(invalid="ignore"):
                want_hi, want_lo = src.max(axis=0), src.min(axis=0)
            assert hi.dtype == lo.dtype == np.float64
            assert hi.tobytes() == want_hi.astype(np.float64).tobytes()
            assert lo.tobytes() == want_lo.astype(np.float64).tobytes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int8])
@pytest.mark.parametrize("shape", [(7466, 11), (1000, 1), (1023, 3), (5, 300), (40, 1024),
                                   (300, 2000), (1, 4)])
def test_extremes_of_narrow_rows_in_a_wide_view_are_numpys(dtype, shape):
    # _max_min views k rows as one of EXTREMES_WIDTH entries, with leftover
    # rows (1023 = 3 * 341), single rows and rows wider than the view
    from paralingam import _validation

    rng = np.random.default_rng(sum(shape))
    X = (rng.standard_normal(shape) * 100).astype(dtype)
    if dtype in (np.float64, np.float32) and shape[0] > 3:
        X[shape[0] // 2, 0] = np.nan
        X[-1, -1] = -np.inf
        X[-2, -1] = np.nan
    with np.errstate(invalid="ignore"):
        hi, lo = _validation._max_min(X)
        want_hi, want_lo = X.max(axis=0), X.min(axis=0)
    assert hi.dtype == want_hi.dtype
    np.testing.assert_array_equal(hi, want_hi)  # (NaN where numpy's is NaN)
    np.testing.assert_array_equal(lo, want_lo)


@pytest.mark.parametrize("value,message", [
    (1e308, "too large to centre and square"),       # sums overflow; the entries are finite
    (np.inf, "NaN, missing or infinite"),
    (np.nan, "NaN, missing or infinite"),
])
def test_checks_behind_the_column_sums_still_name_the_problem(value, message):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 3))
    X[:60, 1] = value
    X[60:, 1] = -value if np.isfinite(value) else 0.0
    with pytest.raises(ValueError, match=message):
        paralingam.fit(X, backend="cpu")


def test_large_finite_values_whose_squares_fit_pass_as_before():
    # n * spread**2 overflows the cheap bound, so the exact check runs and clears them
    rng = np.random.default_rng(1)
    X = rng.laplace(size=(500, 3))
    X[:, 0] *= 1e150
    from paralingam._validation import as_data_matrix

    assert np.array_equal(as_data_matrix(X)[0], X)


def _initial_noise_formula(X):
    """``policy.initial_noise`` as the formula reads, with its n x p temporaries."""
    from paralingam.search import policy

    mean = X.mean(axis=0)
    rms = np.sqrt((X * X).mean(axis=0))
    return policy.EPS * (rms + np.abs(mean)) / X.std(axis=0)


@pytest.mark.parametrize("n, p, route", [
    (n, p, route) for n, p in [(5000, 2), (3001, 5), (2000, 37), (700, 300), (4, 3)]
    for route in ("compiled", "numpy")
    if not (route == "numpy" and n * p * 8 <= 512)])  # (numpy's small route is the formula)
@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_initial_noise_by_blocks_and_threads_is_the_formula_bit_for_bit(n, p, threads, route,
                                                                          monkeypatch):
    from paralingam.search import policy

    if route == "numpy":  # the blocks in numpy (input the compiled loops do not read)
        monkeypatch.setattr(policy, "_compiled_sums", lambda X, j0, j1: None)
    rng = np.random.default_rng(n + p)
    X = rng.standard_normal((n, p)) * 10.0 ** rng.uniform(-3, 3, (n, p)) + rng.uniform(-9, 9, p)
    X[::50, 0] = 1e6  # outliers
    want = _initial_noise_formula(X)
    monkeypatch.setattr(policy, "NOISE_BLOCK_BYTES", 512)  # blocks of 64 rows and more
    monkeypatch.setattr(policy, "NOISE_THREAD_BYTES", 1)  # a group of columns per thread
    got = policy.initial_noise(X, n_threads=threads)
    assert got.tobytes() == want.tobytes()
    noise, std = policy.noise_and_std(X, n_threads=threads)
    assert noise.tobytes() == want.tobytes() and std.tobytes() == X.std(axis=0).tobytes()
    # layouts the blocks do not serve (one column, Fortran order) take the formula
    assert policy.initial_noise(X[:, :1]).tobytes() == _initial_noise_formula(X[:, :1]).tobytes()
    F = np.asfortranarray(X)
    assert policy.initial_noise(F).tobytes() == _initial_noise_formula(F).tobytes()


@pytest.mark.parametrize("dtype, scaled, order", [
    (np.float64, False, "C"), (np.float64, True, "C"), (np.float32, True, "C"),
    # Fortran-ordered sources of scaled data (a pandas frame's values) by the column loops
    (np.float64, True, "F"), (np.float32, True, "F")])  # (float32 arrays are widened first)
def test_compiled_noise_sums_have_the_bits_of_the_numpy_blocks(dtype, scaled, order, monkeypatch):
    # paralingam._column_sums against policy's numpy blocks, column range by column range,
    # on columns of very different scales and centres, with an outlier row
    from paralingam import _preparation
    from paralingam.search import policy

    rng = np.random.default_rng(7 + scaled)
    n, p = 3001, 23
    X = (rng.standard_normal((n, p)) * 10.0 ** rng.integers(-5, 6, p)
         + rng.standard_normal(p) * 10.0 ** rng.integers(-3, 8, p))
    X[1234] *= 1e8
    X = X.astype(dtype, order=order)
    assert X.flags[f"{order}_CONTIGUOUS"]
    if scaled:
        data = _preparation.ScaledData(X, _preparation.column_exponents(X.astype(np.float64)))
        assert data.factors is not None
    else:
        data = X
    for j0, j1 in ((0, p), (0, 2), (5, 17), (21, 23)):
        got = policy._compiled_sums(data, j0, j1)
        assert got is not None  # the compiled route takes this input
        with monkeypatch.context() as m:
            m.setattr(policy, "_compiled_sums", lambda X, j0, j1: None)
            m.setattr(policy, "NOISE_BLOCK_BYTES", 4096)  # several numpy blocks
            want = policy._noise_sums(data, j0, j1)
        for a, b in zip(got, want):
            assert a.tobytes() == b.tobytes()
    if order == "F":  # the same bits as the data in C order
        C = _preparation.ScaledData(np.ascontiguousarray(X), data.exponents)
        for a, b in zip(policy.noise_and_std(data), policy.noise_and_std(C)):
            assert a.tobytes() == b.tobytes()
    from paralingam import _column_sums

    with pytest.raises(ValueError, match="two or more"):
        _column_sums.noise_sums(np.zeros((4, 3)), np.ones(3), 1, 2)
    with pytest.raises(ValueError, match="two or more"):
        _column_sums.noise_sums_by_columns(np.zeros((4, 3), order="F"), np.ones(3), 1, 2)


@pytest.mark.parametrize("layout", ["C", "F", "float32"])
@pytest.mark.parametrize("n", [1024, 1001])
def test_standardised_rows_start_on_a_cache_line(layout, n):
    # the CPU search's 64-byte loads of a row must not straddle two lines
    # (numpy's large arrays start 16 bytes past a page): the first row starts
    # on one, and every row does when n is a multiple of 8
    from paralingam import _preparation

    X = np.random.default_rng(3).standard_normal((n, 100))
    data = {"C": X, "F": np.asfortranarray(X), "float32": X.astype(np.float32)}[layout]
    Z, _ = _preparation.standardise_rows(data)
    assert Z.ctypes.data % _preparation.ROW_ALIGN == 0 and Z.flags.c_contiguous
    assert Z.shape == (100, n)
    want = data.T.astype(np.float64)
    want = (want - want.mean(axis=1, keepdims=True))
    want /= np.sqrt((want * want).mean(axis=1, keepdims=True))
    np.testing.assert_allclose(Z, want, rtol=1e-12, atol=1e-12)
