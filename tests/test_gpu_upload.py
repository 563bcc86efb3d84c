"""The CUDA backend's upload (``_cuda.upload``, ``kernels/prepare.cu``); skipped without a GPU.

The search reads X64, one variable per row: whatever the input's dtype and
layout, the upload must leave exactly ``data.T`` in float64 there (and zeros
in the rows' padding), so that the search's results cannot depend on how the
data were sent.
"""

import warnings

import numpy as np
import pytest

import paralingam

pytestmark = pytest.mark.gpu


def _device_rows(data, block_bytes, monkeypatch, garbage=True, one_block=True):
    """X64 as the upload of ``data`` leaves it: shape (p, ld), with ld and n.

    ``one_block``: small data through the upload's own device buffer (the
    default), else through X32's halves as larger data go.
    """
    import pycuda.driver as drv

    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "UPLOAD_BLOCK_BYTES", block_bytes)
    if not one_block:
        monkeypatch.setattr(_cuda, "UPLOAD_ONE_BLOCK_BYTES", 0)
    _cuda._context()
    n, p = data.shape
    ld = (n + 31) // 32 * 32
    ws = _cuda._Workspace(p, ld, True)
    try:
        if garbage:  # NaN bit patterns: every entry must be written
            drv.memset_d32(ws.dev["X64"], 0xFFFFFFFF, p * ld * 2)
        _cuda.upload(ws, data)
        # (the route taken: the one block's own buffer only for data whose bytes sent are
        # under the threshold: a ScaledData sends its source, float32 at half its nbytes)
        sent = getattr(data, "source", data).nbytes
        assert (ws.upload_buf is not None) == (sent < _cuda.UPLOAD_ONE_BLOCK_BYTES)
        rows = np.empty((p, ld))
        drv.memcpy_dtoh(rows, ws.dev["X64"])
    finally:
        for buf in ws.keep:
            buf.free()
    return rows, n


def _layouts(rng, n, p, dtype):
    base = rng.standard_normal((n, p)) * 10.0 ** rng.uniform(-3, 3, p)
    base = base.astype(dtype)
    wide = rng.standard_normal((2 * n + 1, p + 3)).astype(dtype)
    return {
        "C": np.ascontiguousarray(base),
        "F": np.asfortranarray(base),
        "strided": wide[1::2, 2:p + 2],  # every other row, inner columns
    }


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("n, p", [(1000, 37), (64, 1), (3, 2), (4099, 70), (96, 600)])
@pytest.mark.parametrize("block_bytes", [1 << 25, 1 << 12])  # one block; many (buffers reused)
@pytest.mark.parametrize("one_block", [True, False])
def test_upload_leaves_the_transposed_data_on_the_device(dtype, layout, n, p, block_bytes,
                                                         one_block, monkeypatch):
    rng = np.random.default_rng(n * 1000 + p)
    data = _layouts(rng, n, p, dtype)[layout]
    rows, n = _device_rows(data, block_bytes, monkeypatch, one_block=one_block)
    expected = data.T.astype(np.float64)
    assert rows[:, :n].tobytes() == np.ascontiguousarray(expected).tobytes()
    assert (rows[:, n:] == 0).all() and not np.signbit(rows[:, n:]).any()


def test_upload_of_more_rows_than_one_grid_block(monkeypatch):
    # Blocks of UPLOAD_GRID_ROWS rows at most: the kernel's grid has a row
    # of tiles per 32 samples (gridDim.y <= 65535).
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "UPLOAD_GRID_ROWS", 96)
    data = np.random.default_rng(5).standard_normal((1000, 3))
    for one_block in (True, False):
        rows, n = _device_rows(data, 1 << 25, monkeypatch, one_block=one_block)
        assert rows[:, :n].tobytes() == np.ascontiguousarray(data.T).tobytes()


def test_upload_refuses_other_dtypes_and_shapes(monkeypatch):
    import pycuda.driver as drv  # noqa: F401

    from paralingam.search import _cuda

    _cuda._context()
    ws = _cuda._Workspace(4, 32, True)
    try:
        with pytest.raises(ValueError, match="float64 or float32"):
            _cuda.upload(ws, np.ones((10, 4), dtype=np.int64))
        with pytest.raises(ValueError, match="do not fit the workspace"):
            _cuda.upload(ws, np.ones((10, 5)))
        with pytest.raises(ValueError, match="do not fit the workspace"):
            _cuda.upload(ws, np.ones((33, 4)))
    finally:
        for buf in ws.keep:
            buf.free()


def _fit(X, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        return paralingam.fit(X, **kwargs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_cuda_fit_of_any_layout_equals_the_cpu_fit(lingam_data, dtype, layout):
    X0 = lingam_data(30, 3000, "sparse", 1201)[0]
    wide = np.zeros((2 * X0.shape[0], X0.shape[1] + 2), dtype=dtype)
    wide[::2, 1:-1] = X0
    X = {"C": np.ascontiguousarray(X0, dtype=dtype), "F": np.asfortranarray(X0, dtype=dtype),
         "strided": wide[::2, 1:-1]}[layout]
    cpu = _fit(X, backend="cpu")
    for search_dtype in ("float32", "float64"):
        gpu = _fit(X, backend="cuda", dtype=search_dtype)
        assert gpu.causal_order == cpu.causal_order
        np.testing.assert_allclose(gpu.adjacency_matrix, cpu.adjacency_matrix, rtol=0, atol=1e-8)


def test_cuda_fit_is_the_same_with_many_upload_blocks(lingam_data, monkeypatch):
    from paralingam.search import _cuda

    X = lingam_data(40, 5000, "dense", 1202)[0]
    assert X.nbytes < _cuda.UPLOAD_ONE_BLOCK_BYTES
    one = _fit(X, backend="cuda")
    monkeypatch.setattr(_cuda, "UPLOAD_ONE_BLOCK_BYTES", 0)  # through X32's halves
    halves = _fit(X, backend="cuda")
    monkeypatch.setattr(_cuda, "UPLOAD_BLOCK_BYTES", 1 << 14)  # 51 rows a block: 98 blocks
    many = _fit(X, backend="cuda")
    for other in (halves, many):
        assert other.causal_order == one.causal_order
        assert other.stats["scores"] == one.stats["scores"]
        assert other.adjacency_matrix.tobytes() == one.adjacency_matrix.tobytes()


@pytest.mark.parametrize("bad, what", [(np.nan, "NaN"), (np.inf, "infinite"),
                                       (-np.inf, "infinite")])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cuda_fit_refuses_nan_and_inf(bad, what, dtype):
    X = np.random.default_rng(3).standard_normal((200, 4)).astype(dtype)
    X[17, 2] = bad
    with pytest.raises(ValueError, match=f"column 2: 1 {what}"):
        paralingam.fit(X, backend="cuda")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("form", ["C", "scaled C", "scaled F"])
@pytest.mark.parametrize("n, p", [(3, 2), (1000, 37), (4099, 70), (7466, 11)])
def test_the_devices_noise_sums_have_the_hosts_bits(dtype, form, n, p):
    # column_sums over X64 after the upload: the bits of the host's compiled
    # sums of the same data (sample order, every operation rounded), on
    # columns of scales 1e-150..1e150, offsets and an outlier
    from paralingam._preparation import ScaledData
    from paralingam.search import _cuda, policy

    rng = np.random.default_rng(n + p)
    X = rng.standard_normal((n, p)) * 10.0 ** rng.uniform(-150, 150, p) + rng.uniform(-5, 5, p)
    X[n // 2, 0] *= 1e12
    if dtype == np.float32:
        X = rng.standard_normal((n, p)) * 10.0 ** rng.uniform(-20, 20, p) + 3.0
    X = X.astype(dtype)
    if form == "C":
        data = np.ascontiguousarray(X)
    else:
        source = np.asfortranarray(X) if form == "scaled F" else np.ascontiguousarray(X)
        data = ScaledData(source, rng.integers(-60, 60, p))
    assert policy.sums_in_row_order(data)
    _cuda._context()
    ws = _cuda._Workspace(p, (n + 31) // 32 * 32, True)
    try:
        _cuda.upload(ws, data)
        got = _cuda._device_sums(ws, n)
    finally:
        for buf in ws.keep:
            buf.free()
    for a, b in zip(got, policy._compiled_sums(data, 0, p)):
        assert a.tobytes() == b.tobytes()


def test_a_small_fits_noise_comes_from_the_device_with_the_hosts_bits(lingam_data, monkeypatch):
    # the search of data below the noise thread's threshold takes the
    # device's sums, and its noise, std and order are those of the host's
    from paralingam.search import _cuda

    X = np.ascontiguousarray(lingam_data(30, 3000, "sparse", 1204)[0])
    assert X.nbytes < _cuda.UPLOAD_NOISE_THREAD_MIN_BYTES
    kw = dict(threshold=True, gamma0=1e-4, c=2.0, dtype="float32", collinear_tol=1e-10,
              explained_tol=1e-10, drift_tol=1e-8)
    calls, real = [], _cuda._device_sums
    monkeypatch.setattr(_cuda, "_device_sums", lambda *a: calls.append(1) or real(*a))
    noise = {}
    for on in (True, False):
        monkeypatch.setattr(_cuda, "DEVICE_NOISE_SUMS", on)
        order, _, per_it, _ = _cuda.search(X, times={}, **kw)
        ws = next(w for k, w in _cuda._WORKSPACES.items() if k[1] == X.shape[1])
        noise[on] = (ws.read("noise", X.shape[1] + 1).tobytes(), per_it["column_std"].tobytes(),
                     list(order))
    assert calls == [1]
    assert noise[True] == noise[False]
    assert noise[True][1] == X.std(axis=0).tobytes()


@pytest.mark.parametrize("block_bytes", [1 << 25, 1 << 14])  # beside the upload or after it
def test_cuda_search_returns_the_columns_std_and_uploads_their_noise(lingam_data, block_bytes,
                                                                      monkeypatch):
    # the scatter matrix of the adjacency step uses data.std(axis=0): the upload's
    # noise sums give the same bits (blocked and threaded above NOISE_BLOCK_BYTES;
    # on a thread beside the upload for data of an upload block or more)
    from paralingam.search import _cuda, policy

    monkeypatch.setattr(_cuda, "UPLOAD_BLOCK_BYTES", block_bytes)
    X = np.ascontiguousarray(lingam_data(40, 5000, "sparse", 1203)[0])
    assert X.nbytes > policy.NOISE_BLOCK_BYTES
    kw = dict(threshold=True, gamma0=1e-4, c=2.0, dtype="float32", collinear_tol=1e-10,
              explained_tol=1e-10, drift_tol=1e-8)
    order, _, per_it, _ = _cuda.search(X, times={}, **kw)
    assert per_it["column_std"].tobytes() == X.std(axis=0).tobytes()
    assert list(order) == _fit(X, backend="cpu").causal_order
