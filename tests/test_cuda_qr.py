"""The data's QR on the GPU (``paralingam/adjacency/_cuda_qr.py``).

The first tests run everywhere: they drive the module's copies and its
cuSOLVER call through numpy stand-ins of PyCUDA and cuSOLVER (the same
column-major layout, pitches and pointers), and check how the adjacency
step chooses and falls back. The ``gpu`` tests run the real thing against
the host's QR.
"""

import warnings

import numpy as np
import pytest

import paralingam
from paralingam import _gpu
from paralingam.adjacency import (_adaptive_lasso, _cuda_adjacency, _cuda_min_norm, _cuda_qr,
                                  _least_squares)
from paralingam.adjacency._common import _column_means

from test_rank_deficient import explained_targets, rank_deficient


def host_factor(X, order):
    return _least_squares._centred_triangular_factor(X, order)


def assert_same_gram(R, R_host):
    """``R^T R`` equal (the signs of R's rows are free), and R upper triangular."""
    assert np.array_equal(R, np.triu(R))
    scale = np.abs(R_host.T @ R_host).max()
    np.testing.assert_allclose(R.T @ R, R_host.T @ R_host, rtol=0, atol=1e-12 * scale)


# --- numpy stand-ins of PyCUDA's driver and CuPy's cuSOLVER binding -----------------------------

class FakeDevice:
    """Device memory as one byte array; pointers are offsets (plus a base, never 0)."""

    BASE = 1 << 20

    def __init__(self, size=1 << 26):
        self.memory = np.zeros(size, dtype=np.uint8)
        self.next = 0
        self.allocated = {}
        self.freed = []
        self.log = []  # the cuSOLVER calls and the context's synchronisations, in order

    def doubles(self, ptr, count):
        start = ptr - self.BASE
        assert start % 8 == 0 and 0 <= start and start + 8 * count <= len(self.memory)
        return self.memory[start:start + 8 * count].view(np.float64)


class FakeBuffer:
    def __init__(self, device, nbytes):
        self.device, self.ptr = device, device.BASE + device.next
        device.next += -(-nbytes // 256) * 256
        device.allocated[self.ptr] = nbytes

    def __int__(self):
        return self.ptr

    def free(self):
        self.device.freed.append(self.ptr)


class FakeDriver:
    def __init__(self, device, free_bytes=1 << 40):
        self.device, self.free_bytes = device, free_bytes
        outer = self

        class Memcpy2D:
            def set_src_host(self, a):
                self.src = ("host", a)

            def set_dst_host(self, a):
                self.dst = ("host", a)

            def set_src_device(self, ptr):
                self.src = ("device", ptr)

            def set_dst_device(self, ptr):
                self.dst = ("device", ptr)

            def __call__(self, aligned=False):
                assert self.width_in_bytes % 8 == 0
                for col in range(self.height):
                    src = outer.view(self.src, self.src_pitch, col, self.width_in_bytes)
                    dst = outer.view(self.dst, self.dst_pitch, col, self.width_in_bytes)
                    dst[:] = src

        self.Memcpy2D = Memcpy2D

        class Context:
            @staticmethod
            def synchronize():
                device.log.append("synchronize")

        self.Context = Context

    def view(self, end, pitch, col, width):
        kind, what = end
        if kind == "host":  # a contiguous 1-D float64 array, its columns at `pitch`
            assert what.ndim == 1 and what.flags.c_contiguous and what.dtype == np.float64
            return what[col * pitch // 8:(col * pitch + width) // 8]
        start = what + col * pitch
        return self.device.doubles(start, width // 8)

    def mem_get_info(self):
        return self.free_bytes, 1 << 40

    def mem_alloc(self, nbytes):
        return FakeBuffer(self.device, nbytes)

    def memcpy_dtoh(self, host, buf):
        start = int(buf) - self.device.BASE
        host.view(np.uint8).reshape(-1)[:] = self.device.memory[start:start + host.nbytes]

    def to_device(self, host):
        buf = FakeBuffer(self.device, host.nbytes)
        self.memcpy_htod(buf, host)
        return buf

    def memcpy_htod(self, buf, host):
        start = int(buf) - self.device.BASE
        self.device.memory[start:start + host.nbytes] = np.ascontiguousarray(host).view(np.uint8)


class FakePool:
    """PyCUDA's ``DeviceMemoryPool`` holding nothing: each block is the driver's, freed with it."""

    def __init__(self, drv):
        self.drv = drv

    def allocate(self, nbytes):
        return self.drv.mem_alloc(nbytes)

    def free_held(self):
        pass


class FakeGather:
    """``gather_centred`` of kernels/adjacency.cu in numpy (the mean summed as numpy sums)."""

    def __init__(self, device):
        self.device, self.launches = device, []

    def prepared_call(self, grid, block, X, ld, n, order, A, scale):
        p, ld, n = grid[0], int(ld), int(n)
        self.launches.append((p, n))
        start = int(order) - self.device.BASE
        cols = self.device.memory[start:start + 4 * p].view(np.int32)
        rows = self.device.doubles(X, ld * (int(cols.max()) + 1)).reshape(-1, ld)[cols, :n]
        out = self.device.doubles(int(A), n * p).reshape((n, p), order="F")
        out[:] = ((rows - rows.mean(axis=1, keepdims=True)) * float(scale)).T


class FakeCopy:
    """A ``search._cuda.DeviceCopy`` of ``X`` on the fake device: one variable per row, ``ld`` apart."""

    def __init__(self, device, X, ld):
        n, p = X.shape
        self.n, self.p, self.ld, self.holds = n, p, ld, True
        self.factor_ahead = None
        buf = FakeBuffer(device, 8 * p * ld)
        self.ptr = int(buf)
        rows = device.doubles(self.ptr, p * ld).reshape(p, ld)
        rows[:] = 0.0
        rows[:, :n] = X.T

    def valid(self):
        return self.holds


class FakeCusolver:
    """``dgeqrf`` as LAPACK's: R in the upper triangle of the column-major array."""

    def __init__(self, device):
        self.device, self.calls = device, []

    def create(self):
        return 7

    def destroy(self, handle):
        pass

    def dgeqrf_bufferSize(self, handle, m, n, a, lda):
        return 64 * n

    def dgeqrf(self, handle, m, n, a, lda, tau, work, lwork, info):
        self.calls.append((m, n, lda))
        self.device.log.append("dgeqrf")
        A = self.device.doubles(a, lda * n).reshape((lda, n), order="F")
        R = np.linalg.qr(A[:m], mode="r")
        A[:n, :] = R
        self.device.memory[info - self.device.BASE:info - self.device.BASE + 4] = 0


@pytest.fixture
def fake_gpu(monkeypatch):
    """``_cuda_qr`` on the stand-ins: (driver, cusolver)."""
    device = FakeDevice()
    drv, cusolver = FakeDriver(device), FakeCusolver(device)

    class Context:
        handle = 1

    monkeypatch.setattr(_cuda_qr, "_cusolver", lambda: cusolver)
    monkeypatch.setattr(_gpu, "context", lambda device=0: Context())
    monkeypatch.setattr(_gpu, "guarded", lambda launch, *args: launch(*args))
    monkeypatch.setattr(_cuda_qr, "_HANDLES", {})
    monkeypatch.setattr(_cuda_qr, "_driver", lambda: drv)
    monkeypatch.setattr(_cuda_min_norm, "_pool", lambda: FakePool(drv))
    gather = FakeGather(device)
    monkeypatch.setattr(_cuda_adjacency, "_kernels", lambda handle: {"gather_centred": gather})
    drv.gather = gather
    return drv, cusolver


@pytest.mark.parametrize("n, p, upload_bytes", [(500, 7, 8 * 7 * 64), (1000, 40, 8 * 40 * 333),
                                               (300, 299, 1 << 20)])
def test_blocks_land_where_the_factorisation_reads_them(fake_gpu, monkeypatch, n, p,
                                                        upload_bytes):
    # row blocks (the last one short) copied into the column-major array at
    # their rows, and the top p rows copied back: the host's R to rounding
    # (with threads, blocks of PREPARE_BYTES prepared ahead: the same values land)
    drv, cusolver = fake_gpu
    monkeypatch.setattr(_cuda_qr, "UPLOAD_BYTES", upload_bytes)
    monkeypatch.setattr(_cuda_qr, "PREPARE_BYTES", 8 * p * 50)  # (threads from 100 rows on)
    rng = np.random.default_rng(n + p)
    X = rng.laplace(size=(n, p)) @ rng.standard_normal((p, p)) + 3.0
    order = rng.permutation(p)
    factors = [_cuda_qr.centred_triangular_factor(
        X.shape, _least_squares._centred_rows(X, order, _column_means(X)), n_threads)
        for n_threads in (1, 3)]
    assert cusolver.calls == [(n, p, n)] * 2
    assert_same_gram(factors[0], host_factor(X, order))
    assert np.array_equal(factors[0], factors[1])  # the same bits on any number of threads
    assert sorted(drv.device.freed) == sorted(drv.device.allocated)  # every buffer freed


def test_an_error_preparing_a_block_reaches_the_caller_and_frees_the_buffers(fake_gpu,
                                                                           monkeypatch):
    drv, cusolver = fake_gpu
    monkeypatch.setattr(_cuda_qr, "PREPARE_BYTES", 8 * 10 * 50)
    X = np.random.default_rng(1).standard_normal((2000, 10))
    rows = _least_squares._centred_rows(X, np.arange(10), _column_means(X))

    def rows_of(start, stop):
        if start >= 1000:
            raise MemoryError("no room for a block")
        return rows(start, stop)

    with pytest.raises(MemoryError, match="no room"):
        _cuda_qr.centred_triangular_factor(X.shape, rows_of, 4)
    assert not cusolver.calls
    assert sorted(drv.device.freed) == sorted(drv.device.allocated)


@pytest.mark.parametrize("n, threads_used", [(1000, False), (100000, True)])
def test_only_data_of_more_than_two_blocks_are_prepared_on_threads(fake_gpu, monkeypatch, n,
                                                                   threads_used):
    # (on E. coli's 7 MB the thread pool cost more than it saved)
    import threading

    monkeypatch.setattr(_cuda_qr, "PREPARE_BYTES", 8 * 10 * 20000)  # 20,000 rows of 10
    X = np.random.default_rng(n).standard_normal((n, 10))
    rows = _least_squares._centred_rows(X, np.arange(10), _column_means(X))
    threads = set()

    def rows_of(start, stop):
        threads.add(threading.get_ident())
        return rows(start, stop)

    _cuda_qr.centred_triangular_factor(X.shape, rows_of, 4)
    assert (threads != {threading.get_ident()}) == threads_used


@pytest.mark.parametrize("n, p, columns", [(500, 7, "all"), (1000, 40, "all"), (300, 299, "all"),
                                           (1000, 40, "some")])
def test_the_searchs_copy_is_gathered_in_order_centred_and_factorised(fake_gpu, n, p, columns):
    # the kernel's columns: variable order[k], centred, over sqrt(n); R as the host's
    drv, cusolver = fake_gpu
    rng = np.random.default_rng(n + p)
    X = rng.laplace(size=(n, p)) @ rng.standard_normal((p, p)) + 3.0
    order = rng.permutation(p)[: p if columns == "all" else p // 2]
    copy = FakeCopy(drv.device, X, ld=n + 32 - n % 32)
    allocated = set(drv.device.allocated)
    R = _cuda_qr.centred_triangular_factor_of_copy(copy, order)
    assert drv.gather.launches == [(len(order), n)]
    assert cusolver.calls == [(n, len(order), n)]
    assert_same_gram(R, host_factor(X, order))
    assert sorted(drv.device.freed) == sorted(set(drv.device.allocated) - allocated)


def test_the_data_vectors_read_the_searchs_copy_while_it_holds_these_data(fake_gpu, gpu_usable,
                                                                          monkeypatch):
    drv, cusolver = fake_gpu
    X = rank_deficient(30, 4096, 20, 368)
    order = np.random.default_rng(0).permutation(30)
    copy = FakeCopy(drv.device, X, ld=4096)
    uploads = []
    upload = _cuda_qr.centred_triangular_factor
    monkeypatch.setattr(_cuda_qr, "centred_triangular_factor",
                        lambda *args: uploads.append(1) or upload(*args))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        V = _least_squares._data_vectors(X, order, on_gpu=True, device_copy=copy)
        assert len(drv.gather.launches) == 1 and not uploads
        assert_same_gram(V, host_factor(X, order))
        # a copy of other data (another shape), or one a later search replaced: uploaded
        _least_squares._data_vectors(X[:4000], order, on_gpu=True, device_copy=copy)
        copy.holds = False
        _least_squares._data_vectors(X, order, on_gpu=True, device_copy=copy)
    assert len(drv.gather.launches) == 1 and len(uploads) == 2
    assert len(cusolver.calls) == 3


def test_a_device_copy_holds_until_the_next_copy_or_the_buffers_are_freed(monkeypatch):
    from types import SimpleNamespace

    from paralingam.search import _cuda

    ws = SimpleNamespace(p=5, ld=64, copy_buf=4096, copies=1, keep=[])
    copy = _cuda.DeviceCopy(ws, 50)
    assert copy.valid() and (copy.n, copy.p, copy.ld, copy.ptr) == (50, 5, 64, 4096)
    ws.copies += 1  # (_keep_copy: the next search's)
    assert not copy.valid()
    copy = _cuda.DeviceCopy(ws, 50)
    monkeypatch.setattr(_cuda, "_WORKSPACES", {"key": ws})
    _cuda._drop_workspaces(after_fault=True)
    assert not copy.valid()


def test_freeing_the_buffers_of_a_multi_device_search_too(monkeypatch):
    # _drop_workspaces also frees a search over several devices, whose
    # workspace holds one per device (a multi-device fit failed on every
    # later fit when it met one)
    from types import SimpleNamespace

    from paralingam.search import _cuda

    freed = []
    buf = SimpleNamespace(free=lambda: freed.append(1))
    parts = [SimpleNamespace(copies=3, keep=[buf]), SimpleNamespace(copies=3, keep=[buf, buf])]
    multi = _cuda._MultiWorkspace.__new__(_cuda._MultiWorkspace)  # (no devices here)
    multi.parts = parts
    single = SimpleNamespace(p=5, ld=64, copy_buf=4096, copies=1, keep=[buf])
    copy = _cuda.DeviceCopy(single, 50)
    monkeypatch.setattr(_cuda, "_WORKSPACES", {"one": single, "several": multi})
    _cuda._drop_workspaces()
    assert len(freed) == 4 and not copy.valid()
    assert [part.copies for part in parts] == [4, 4] and not _cuda._WORKSPACES


def test_too_little_device_memory_is_a_gpu_memory_error(fake_gpu):
    drv, _ = fake_gpu
    drv.free_bytes = 8 * 1000 * 40  # the data alone, without workspace and slack
    X = np.random.default_rng(0).standard_normal((1000, 40))
    with pytest.raises(_gpu.GPUMemoryError, match="the data's QR"):
        _cuda_qr.centred_triangular_factor(
            X.shape, _least_squares._centred_rows(X, np.arange(40), _column_means(X)))
    assert not drv.device.allocated  # checked before anything was allocated


def test_suits_tall_data_of_32_bit_sizes_with_cupy(monkeypatch):
    monkeypatch.setattr(_cuda_qr, "_cusolver", lambda: object())
    assert _cuda_qr.suits(1001, 1000)
    assert not _cuda_qr.suits(1000, 1000)  # no QR: the data are used directly
    assert not _cuda_qr.suits(2**31 // 100 + 1, 100)
    monkeypatch.setattr(_cuda_qr, "_cusolver", lambda: None)  # no CuPy
    assert not _cuda_qr.suits(1001, 1000)


# --- how the adjacency step uses it ----------------------------------------------------------------

@pytest.fixture
def gpu_usable(monkeypatch):
    monkeypatch.setattr(_gpu, "unavailable_reason", lambda: None)


@pytest.mark.parametrize("p, on_gpu", [(20, False), (300, True)])
def test_the_cuda_routes_cholesky_rows_run_on_the_gpu_from_a_size_on(gpu_usable, monkeypatch, p,
                                                                     on_gpu):
    # below CUDA_OLS_MIN_FEATURES the host's LAPACK factor of the small
    # covariance beats the GPU's launches: the same rows as the CPU route
    calls = []

    def factor(gram, gpu):  # (a stand-in of the GPU's factor: the host's)
        calls.append(gpu)
        return _least_squares._ols_on_predecessors(gram)

    monkeypatch.setattr(_least_squares, "_least_squares_factor", factor)
    X = np.random.default_rng(p).laplace(size=(2 * p + 50, p))
    order = np.random.default_rng(0).permutation(p)
    got = _least_squares._ols_adjacency(X, order, backend="cuda")
    assert calls == ([True] if on_gpu else [])
    assert (p >= _least_squares.CUDA_OLS_MIN_FEATURES) == on_gpu
    np.testing.assert_allclose(got, _least_squares._ols_adjacency(X, order), rtol=0, atol=1e-12)


def test_the_cuda_route_takes_the_gpu_factor(fake_gpu, gpu_usable):
    # fit's least squares after a CUDA search: rows of targets that are not
    # exact combinations equal the host route's; exact ones reproduce them
    _, cusolver = fake_gpu
    X = rank_deficient(30, 4096, 20, 361)
    order = np.asarray(paralingam.fit(X, backend="cpu", on_collinear="ignore").causal_order)
    mean, scatter = _least_squares._scatter_by_blocks(X)
    cov = scatter[np.ix_(order, order)] / X.shape[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = _least_squares._ols_rows_host(cov, X, order, mean=mean, on_gpu=True)
    assert len(cusolver.calls) == 1
    host = _least_squares._ols_rows_host(cov, X, order, mean=mean, segmented=True)
    np.testing.assert_allclose(got, host, rtol=0, atol=1e-9)


def test_the_estimators_weights_take_the_gpu_factor(fake_gpu, gpu_usable):
    _, cusolver = fake_gpu
    X = rank_deficient(30, 4096, 20, 362)
    order = np.asarray(paralingam.fit(X, backend="cpu", on_collinear="ignore").causal_order)
    assert X.shape[1] < _adaptive_lasso.CUDA_LASSO_MIN_FEATURES  # (paths on the host)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = _adaptive_lasso.adaptive_lasso_adjacency(X, order, backend="cuda")
    assert len(cusolver.calls) == 1
    exact = explained_targets(X, order)
    host = _adaptive_lasso.adaptive_lasso_adjacency(X, order, backend="cpu")
    np.testing.assert_allclose(got[~exact], host[~exact], rtol=0, atol=1e-8)


def test_a_failed_gpu_factor_warns_and_the_host_computes_it(gpu_usable, monkeypatch):
    def fails(*args):
        raise _gpu.GPUMemoryError("the data's QR (4096 x 30) needs 1 MiB; 0 MiB are free")

    monkeypatch.setattr(_cuda_qr, "suits", lambda n, p: True)
    monkeypatch.setattr(_cuda_qr, "centred_triangular_factor", fails)
    X = rank_deficient(30, 4096, 20, 363)
    order = np.arange(30)
    with pytest.warns(RuntimeWarning, match=r"the data's QR on the GPU failed \(GPUMemoryError"):
        V = _least_squares._data_vectors(X, order, segmented=True, on_gpu=True)
    # the host's segments, bit for bit
    assert np.array_equal(V, _least_squares._data_vectors(X, order, segmented=True))


def test_without_cupy_the_host_factor_is_silent(monkeypatch):
    monkeypatch.setattr(_cuda_qr, "_cusolver", lambda: None)
    X = rank_deficient(30, 4096, 20, 364)
    order = np.arange(30)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        V = _least_squares._data_vectors(X, order, segmented=True, on_gpu=True)
    assert np.array_equal(V, _least_squares._data_vectors(X, order, segmented=True))


# --- on the GPU ------------------------------------------------------------------------------------

needs_cupy = pytest.mark.skipif(_cuda_qr._cusolver() is None,
                                reason="CuPy (cupy_backends' cuSOLVER) is not installed")


@pytest.mark.gpu
@needs_cupy
@pytest.mark.parametrize("n, p, dtype", [(4096, 300, np.float64), (20000, 87, np.float64),
                                         (3000, 200, np.float32), (301, 300, np.float64)])
def test_gpu_factor_equals_the_hosts(n, p, dtype):
    rng = np.random.default_rng(n)
    X = (rng.laplace(size=(n, p)) @ rng.standard_normal((p, p)) + 5.0).astype(dtype)
    order = rng.permutation(p)
    mean = _column_means(X)
    R = _cuda_qr.centred_triangular_factor(X.shape, _least_squares._centred_rows(X, order, mean))
    assert_same_gram(R, host_factor(X, order))


def record_routes(monkeypatch):
    """Record which route each GPU QR takes: ``"copy"`` (the search's copy) or ``"upload"``."""
    routes = []
    upload, copy = _cuda_qr.centred_triangular_factor, _cuda_qr.centred_triangular_factor_of_copy
    monkeypatch.setattr(_cuda_qr, "centred_triangular_factor",
                        lambda *args: routes.append("upload") or upload(*args))
    monkeypatch.setattr(_cuda_qr, "centred_triangular_factor_of_copy",
                        lambda *args: routes.append("copy") or copy(*args))
    return routes


@pytest.mark.gpu
@needs_cupy
@pytest.mark.parametrize("n, p, dtype", [(4096, 300, np.float64), (20000, 87, np.float32),
                                         (301, 300, np.float64)])
def test_gpu_factor_of_the_searchs_copy_equals_the_hosts(n, p, dtype):
    from paralingam.search import _cuda

    rng = np.random.default_rng(n + 1)
    X = (rng.laplace(size=(n, p)) @ rng.standard_normal((p, p)) + 5.0).astype(dtype)
    order = rng.permutation(p)
    data = X.astype(np.float64)  # (the device's copy: float32 data converted exactly)
    times = {}
    kw = dict(threshold=True, gamma0=1e-4, c=2.0, dtype="float32", collinear_tol=1e-10,
              explained_tol=1e-10, drift_tol=1e-8, keep_copy=True)
    _, _, per_it, _ = _cuda.search(X, times=times, **kw)
    copy = per_it["device_copy"]
    assert copy is not None and _cuda_qr.copy_holds(copy, X.shape)
    R = _cuda_qr.centred_triangular_factor_of_copy(copy, order)
    assert_same_gram(R, host_factor(data, order))
    sub = order[: p // 3]
    assert_same_gram(_cuda_qr.centred_triangular_factor_of_copy(copy, sub), host_factor(data, sub))
    # the next search's copy replaces it
    _cuda.search(X, times={}, **kw)
    assert not copy.valid()


@pytest.mark.gpu
@needs_cupy
def test_fit_on_rank_deficient_data_takes_the_gpu_factor_of_the_searchs_copy(monkeypatch):
    X = rank_deficient(300, 4096, 150, 365)
    routes = record_routes(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = paralingam.fit(X, backend="cuda", on_collinear="ignore")
    assert routes == ["copy"]
    # without the copy (a search that kept none): the upload route
    monkeypatch.setattr(paralingam._api, "_keeps_copy", lambda data: False)
    uploaded = paralingam.fit(X, backend="cuda", on_collinear="ignore")
    assert routes == ["copy", "upload"]
    monkeypatch.setattr(_cuda_qr, "suits", lambda n, p: False)
    host = paralingam.fit(X, backend="cuda", on_collinear="ignore")
    assert routes == ["copy", "upload"]
    assert res.causal_order == uploaded.causal_order == host.causal_order
    scale = np.abs(host.adjacency_matrix).max()
    for other in (uploaded, host):
        np.testing.assert_allclose(res.adjacency_matrix, other.adjacency_matrix, rtol=0,
                                   atol=1e-9 * scale)


@pytest.mark.gpu
@needs_cupy
def test_estimator_on_rank_deficient_float32_data_takes_the_gpu_factor(monkeypatch):
    X = rank_deficient(120, 6000, 60, 366).astype(np.float32)
    routes = record_routes(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        warnings.simplefilter("error", RuntimeWarning)
        est = paralingam.DirectLiNGAM(backend="cuda").fit(X)
    assert routes == ["copy"]
    order = np.asarray(est.causal_order_)
    exact = explained_targets(X.astype(np.float64), order)
    monkeypatch.setattr(_cuda_qr, "suits", lambda n, p: False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        host = paralingam.DirectLiNGAM(backend="cuda").fit(X)
    assert host.causal_order_ == est.causal_order_
    np.testing.assert_allclose(est.adjacency_matrix_[~exact], host.adjacency_matrix_[~exact],
                               rtol=0, atol=1e-8)


@pytest.mark.gpu
@needs_cupy
def test_gpu_factor_short_of_memory_falls_back_to_the_host(monkeypatch):
    monkeypatch.setattr(_cuda_qr, "SLACK_BYTES", 1 << 50)
    X = rank_deficient(60, 4096, 30, 367)
    order = np.arange(60)
    with pytest.warns(RuntimeWarning, match="the data's QR on the GPU failed"):
        V = _least_squares._data_vectors(X, order, segmented=True, on_gpu=True)
    assert np.array_equal(V, _least_squares._data_vectors(X, order, segmented=True))


# --- the QR started ahead of the adjacency step's host work ---------------------------------------

def test_a_qr_started_ahead_is_queued_without_a_wait_and_taken_with_the_same_bits(fake_gpu):
    drv, cusolver = fake_gpu
    rng = np.random.default_rng(3)
    X = rng.laplace(size=(700, 30)) @ rng.standard_normal((30, 30))
    order = rng.permutation(30)
    copy = FakeCopy(drv.device, X, ld=704)
    allocated = set(drv.device.allocated)
    plain = _cuda_qr.centred_triangular_factor_of_copy(copy, order)
    assert drv.device.log[-2:] == ["dgeqrf", "synchronize"]  # (in_order's wait)
    drv.device.log.clear()
    assert _cuda_qr.start_factor_of_copy(copy, order)
    assert drv.device.log == ["synchronize", "dgeqrf"]  # queued; the host goes on
    assert copy.factor_ahead is not None
    # another order: its own QR, and the one ahead stays
    assert_same_gram(_cuda_qr.centred_triangular_factor_of_copy(copy, order[::-1]),
                     host_factor(X, order[::-1]))
    assert copy.factor_ahead is not None and len(cusolver.calls) == 3
    R, rows = _cuda_qr.centred_triangular_factor_of_copy(copy, list(order), rows_from=5)
    assert rows is None and np.array_equal(R, plain)  # (p < MIN_FEATURES: no rows on the device)
    assert copy.factor_ahead is None and len(cusolver.calls) == 3  # taken, not run again
    assert len(drv.gather.launches) == 3
    assert sorted(drv.device.freed) == sorted(set(drv.device.allocated) - allocated)


def test_a_qr_ahead_that_the_step_did_not_take_is_freed_when_dropped(fake_gpu):
    drv, cusolver = fake_gpu
    X = np.random.default_rng(4).standard_normal((300, 12))
    copy = FakeCopy(drv.device, X, ld=320)
    allocated = set(drv.device.allocated)
    assert _cuda_qr.start_factor_of_copy(copy, np.arange(12))
    assert not _cuda_qr.start_factor_of_copy(copy, np.arange(12))  # one at a time
    _cuda_qr.drop_factor_ahead(copy)
    assert copy.factor_ahead is None and drv.device.log[-1] == "synchronize"
    assert sorted(drv.device.freed) == sorted(set(drv.device.allocated) - allocated)
    _cuda_qr.drop_factor_ahead(copy)  # (nothing held: nothing to do)
    _cuda_qr.drop_factor_ahead(object())  # (a copy from before the attribute)


def test_no_qr_ahead_where_it_cannot_run(fake_gpu, monkeypatch):
    drv, cusolver = fake_gpu
    X = np.random.default_rng(5).standard_normal((300, 12))
    copy = FakeCopy(drv.device, X, ld=320)
    allocated = set(drv.device.allocated)
    copy.holds = False  # a later search replaced the copy
    assert not _cuda_qr.start_factor_of_copy(copy, np.arange(12))
    copy.holds = True
    monkeypatch.setattr(_cuda_qr, "START_AHEAD", False)
    assert not _cuda_qr.start_factor_of_copy(copy, np.arange(12))
    monkeypatch.setattr(_cuda_qr, "START_AHEAD", True)
    drv.free_bytes = 1 << 20  # too little device memory: the step meets it itself
    assert not _cuda_qr.start_factor_of_copy(copy, np.arange(12))
    assert copy.factor_ahead is None and not cusolver.calls
    assert sorted(drv.device.freed) == sorted(set(drv.device.allocated) - allocated)


@pytest.mark.gpu
@needs_cupy
@pytest.mark.parametrize("estimator", [False, True])
def test_fit_on_rank_deficient_data_takes_the_qr_started_ahead_with_the_same_bits(monkeypatch,
                                                                                 estimator):
    X = rank_deficient(300, 4096, 150, 367)
    taken = []
    take = _cuda_qr._take_ahead
    monkeypatch.setattr(_cuda_qr, "_take_ahead",
                        lambda copy, order: taken.append(take(copy, order)) or taken[-1])

    def run():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if estimator:
                model = paralingam.DirectLiNGAM(backend="cuda").fit(X)
                got = model.causal_order_, model.adjacency_matrix_
            else:
                res = paralingam.fit(X, backend="cuda", on_collinear="ignore")
                got = res.causal_order, res.adjacency_matrix
        runtime = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)
                   and not issubclass(w.category, paralingam.DegenerateDataWarning)]
        assert not runtime, f"RuntimeWarnings: {runtime}"
        return got

    order, B = run()
    assert taken, "the step ran no QR of the search's copy"
    assert all(t is not None for t in taken), f"QRs not started ahead: {taken}"
    monkeypatch.setattr(_cuda_qr, "START_AHEAD", False)
    taken.clear()
    order_after, B_after = run()
    assert taken and all(t is None for t in taken), f"takes without START_AHEAD: {taken}"
    assert list(order) == list(order_after)
    differ = ~((B == B_after) | (np.isnan(B) & np.isnan(B_after)))
    assert not differ.any(), (f"{differ.sum()} entries differ, at most "
                              f"{np.nanmax(np.abs(B - B_after)):.3g}")
