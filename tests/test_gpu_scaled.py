"""The CUDA route reads float input scaled on the device (``ScaledData``); skipped without a GPU.

``fit`` sends float32 (and float64) input as it is and scales the columns by
their powers of two in the upload's transpose kernel (``kernels/prepare.cu``,
``transpose_scaled_*``). The device must then hold exactly what the upload
of the host's scaled float64 copy left there, and every fit must be the
one of that copy, and of the float32 input widened to float64 by numpy.
"""

import warnings

import numpy as np
import pytest

import paralingam
from paralingam._preparation import ScaledData
from paralingam._validation import _as_data_matrix
from paralingam.datasets import make_lingam_data
from test_gpu_upload import _device_rows as upload_rows
from test_scaled_data import _fit_as_before, _rank_deficient

pytestmark = pytest.mark.gpu


def _device_rows(data, block_bytes, monkeypatch):
    """X64 as the upload of ``data`` (an array or a ScaledData) leaves it: shape (p, ld)."""
    return upload_rows(data, block_bytes, monkeypatch)[0]


def _inputs(rng, n, p, dtype):
    scales = 10.0 ** rng.uniform(-30, 30, p)  # exponents of both signs, far from 0
    base = (rng.standard_normal((n, p)) * scales).astype(dtype)
    wide = (rng.standard_normal((2 * n + 1, p + 3)) * 1e-20).astype(dtype)
    return {"C": np.ascontiguousarray(base), "F": np.asfortranarray(base),
            "strided": wide[1::2, 2:p + 2]}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("n, p", [(1000, 37), (64, 1), (3, 2), (4099, 70)])
@pytest.mark.parametrize("block_bytes", [1 << 25, 1 << 12])
def test_scaled_upload_leaves_the_scaled_copy_on_the_device(dtype, layout, n, p, block_bytes,
                                                            monkeypatch):
    data = _inputs(np.random.default_rng(n + p), n, p, dtype)[layout]
    product, _, _ = _as_data_matrix(data, scaled="deferred")
    assert isinstance(product, ScaledData) and product.factors is not None
    got = _device_rows(product, block_bytes, monkeypatch)
    want = _device_rows(product.copy(), block_bytes, monkeypatch)
    assert got.tobytes() == want.tobytes()
    assert got[:, :n].tobytes() == np.ascontiguousarray(product.copy().T).tobytes()
    assert not got[:, n:].any()


def test_scaled_upload_refuses_factors_beyond_normal_powers_of_two(monkeypatch):
    X = np.random.default_rng(1).standard_normal((100, 3)) * 1e-305
    product, _, _ = _as_data_matrix(X, scaled="deferred")
    assert product.factors is None
    with pytest.raises(ValueError, match="ldexp"):
        _device_rows(product, 1 << 25, monkeypatch)


FITS = {
    "lingam": lambda: make_lingam_data(20, 4000, random_state=1)[0],
    "large scales": lambda: make_lingam_data(12, 3000, random_state=2)[0]
    * 10.0 ** np.arange(-18, 18, 3),
    "tiny (ldexp: the copy is sent)": lambda: make_lingam_data(6, 1500, random_state=4)[0] * 1e-305,
    "outliers": lambda: np.where(np.arange(1500)[:, None] % 500 == 7, 1e9,
                                 make_lingam_data(6, 1500, random_state=5)[0]),
    "rank deficient": lambda: _rank_deficient(1500, 6),
}


@pytest.mark.parametrize("name, input_dtype", [
    (name, t) for name in FITS for t in (np.float32, np.float64)
    if not (name.startswith("tiny") and t == np.float32)])  # (float32 has no such numbers)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cuda_fit_is_that_of_the_scaled_copy(name, input_dtype, dtype):
    X = FITS[name]().astype(input_dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = paralingam.fit(X, backend="cuda", dtype=dtype)
        want = _fit_as_before(X, backend="cuda", dtype=dtype)
        widened = paralingam.fit(X.astype(np.float64), backend="cuda", dtype=dtype)
    for other in (want, widened):
        assert got.causal_order == other.causal_order
        assert got.adjacency_matrix.tobytes() == other.adjacency_matrix.tobytes()
        assert got.stats["scores"] == other.stats["scores"]
        assert got.stats["explained"] == other.stats["explained"]


def test_cuda_fit_of_float32_input_matches_the_cpu_order():
    X = make_lingam_data(15, 5000, random_state=7)[0].astype(np.float32)
    gpu = paralingam.fit(X, backend="cuda", dtype="float64")
    cpu = paralingam.fit(X.astype(np.float64), backend="cpu", dtype="float64")
    assert gpu.causal_order == cpu.causal_order
    np.testing.assert_allclose(gpu.adjacency_matrix, cpu.adjacency_matrix, rtol=1e-9, atol=1e-12)


def test_cuda_search_reads_a_scaled_data_as_its_copy():
    from paralingam.search import _cuda

    X = (make_lingam_data(10, 3000, random_state=3)[0] * 1e12).astype(np.float32)
    product, _, _ = _as_data_matrix(X, scaled="deferred")
    kw = dict(threshold=True, gamma0=1e-4, c=2.0, dtype="float32", collinear_tol=1e-10,
              explained_tol=1e-10, drift_tol=1e-8)
    got = _cuda.search(product, times={}, **kw)
    want = _cuda.search(product.copy(), times={}, **kw)
    assert got[0] == want[0]
    assert got[2]["scores"] == want[2]["scores"]
    assert got[2]["column_std"].tobytes() == want[2]["column_std"].tobytes()
    assert got[2]["correlation"].tobytes() == want[2]["correlation"].tobytes()
