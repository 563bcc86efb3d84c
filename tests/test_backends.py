"""Backend choice without a usable GPU: auto falls back once, cuda refuses clearly.

These tests make CUDA unusable on purpose (pycuda absent, failing, or the
check itself crashing), so they run on every machine, GPU or not.
"""

import logging
import sys
import types

import numpy as np
import pytest

import paralingam
from paralingam.search import _backends

pytest.importorskip("paralingam.search._cpu", reason="the CPU extension is not built")


@pytest.fixture
def X():
    rng = np.random.default_rng(901)
    e = rng.uniform(-1, 1, size=(200, 3))
    e[:, 1] += 0.8 * e[:, 0]
    e[:, 2] += 0.5 * e[:, 1]
    return e


@pytest.fixture
def fresh_auto(monkeypatch):
    """Forget that the auto fallback was already reported in this process."""
    monkeypatch.setattr(_backends, "_auto_reported", False)


def no_cuda(monkeypatch, reason="no CUDA device found (test)"):
    monkeypatch.setattr(_backends, "cuda_unavailable_reason", lambda: reason)
    return reason


def fallback_records(caplog):
    return [r for r in caplog.records
            if r.name == "paralingam" and "using the CPU backend" in r.getMessage()]


def test_auto_without_cuda_uses_cpu_and_says_so_once(monkeypatch, caplog, fresh_auto, X):
    reason = no_cuda(monkeypatch)
    caplog.set_level(logging.INFO, logger="paralingam")
    first = paralingam.fit(X)
    second = paralingam.fit(X, backend="auto")
    assert first.stats["backend"] == second.stats["backend"] == "cpu"
    assert first.causal_order == second.causal_order == paralingam.fit(X, backend="cpu").causal_order
    records = fallback_records(caplog)
    assert len(records) == 1
    assert reason in records[0].getMessage()
    assert records[0].levelno == logging.INFO


def test_cpu_backend_never_logs_the_fallback(monkeypatch, caplog, fresh_auto, X):
    no_cuda(monkeypatch)
    caplog.set_level(logging.DEBUG, logger="paralingam")
    paralingam.fit(X, backend="cpu")
    assert fallback_records(caplog) == []


def test_cuda_without_cuda_raises_runtime_error_saying_why(monkeypatch, X):
    no_cuda(monkeypatch, "no CUDA device found (test)")
    with pytest.raises(RuntimeError, match=r"backend='cuda' cannot run: no CUDA device found \(test\)"):
        paralingam.fit(X, backend="cuda")


def hide_pycuda(monkeypatch):
    # A None entry in sys.modules makes "import pycuda" raise ImportError.
    for mod in [m for m in sys.modules if m == "pycuda" or m.startswith("pycuda.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)


def test_pycuda_absent(monkeypatch, caplog, fresh_auto, X):
    hide_pycuda(monkeypatch)
    reason = _backends.cuda_unavailable_reason()
    assert reason is not None and "pycuda" in reason
    with pytest.raises(RuntimeError, match="backend='cuda' cannot run: .*pycuda"):
        paralingam.fit(X, backend="cuda")
    caplog.set_level(logging.INFO, logger="paralingam")
    assert paralingam.fit(X).stats["backend"] == "cpu"
    assert len(fallback_records(caplog)) == 1


def test_pycuda_failing_to_initialise(monkeypatch, fresh_auto, X):
    # pycuda imports, but the driver cannot start (no device, broken driver).
    def init():
        raise RuntimeError("cuInit failed: no CUDA-capable device is detected")

    driver = types.ModuleType("pycuda.driver")
    driver.init = init
    pycuda = types.ModuleType("pycuda")
    pycuda.driver = driver
    monkeypatch.setitem(sys.modules, "pycuda", pycuda)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    reason = _backends.cuda_unavailable_reason()
    assert reason is not None and "cuInit failed" in reason
    with pytest.raises(RuntimeError, match="cannot run: .*cuInit failed"):
        paralingam.fit(X, backend="cuda")
    assert paralingam.fit(X).stats["backend"] == "cpu"


@pytest.mark.parametrize("exc", [OSError("libcuda.so.1: cannot open shared object file"),
                                 RuntimeError("driver version mismatch")])
def test_crashing_cuda_check_still_falls_back(monkeypatch, fresh_auto, X, exc):
    # Broken installations fail in unexpected ways; the check must not crash.
    from paralingam.search import _cuda

    def check():
        raise exc

    monkeypatch.setattr(_cuda, "unavailable_reason", check)
    reason = _backends.cuda_unavailable_reason()
    assert type(exc).__name__ in reason and str(exc) in reason
    assert paralingam.fit(X).stats["backend"] == "cpu"
    with pytest.raises(RuntimeError, match=type(exc).__name__):
        paralingam.fit(X, backend="cuda")


def test_cuda_module_import_failure(monkeypatch, fresh_auto, X):
    monkeypatch.setitem(sys.modules, "paralingam.search._cuda", None)
    monkeypatch.delattr(paralingam.search, "_cuda", raising=False)
    reason = _backends.cuda_unavailable_reason()
    assert reason.startswith("the CUDA backend is not available")
    assert paralingam.fit(X).stats["backend"] == "cpu"
    with pytest.raises(RuntimeError, match="not available"):
        paralingam.fit(X, backend="cuda")


def test_unknown_backend_is_named(X):
    with pytest.raises(ValueError, match=r"backend must be one of .*got 'opencl'"):
        paralingam.fit(X, backend="opencl")


def test_both_dtypes_run_on_the_cpu_with_the_same_order(monkeypatch, fresh_auto, X):
    # float32 (the default) certifies its roots; float64 computes in double.
    no_cuda(monkeypatch)
    res = paralingam.fit(X, dtype="float32")
    assert res.stats["backend"] == "cpu"
    for dtype in (None, "float64", np.float32, np.float64):
        assert paralingam.fit(X, backend="cpu", dtype=dtype).causal_order == res.causal_order


def _fake_driver(sticky):
    """A stand-in ``pycuda.driver`` whose launches fail; sticky faults persist."""
    drv = types.ModuleType("pycuda.driver")

    class Error(Exception):
        pass

    class LaunchError(Error):
        pass

    class Device:
        def get_attribute(self, _):
            return 4

    class Context:
        @staticmethod
        def get_device():
            return Device()

        @staticmethod
        def synchronize():
            if sticky:
                raise LaunchError("cuCtxSynchronize failed: unspecified launch failure")

    drv.Error, drv.LaunchError, drv.Context = Error, LaunchError, Context
    drv.device_attribute = types.SimpleNamespace(MULTIPROCESSOR_COUNT=0)
    drv.mem_get_info = lambda: (1 << 34, 1 << 34)
    drv.mem_alloc = lambda nbytes: types.SimpleNamespace(free=lambda: None)
    return drv


@pytest.mark.parametrize("sticky", [True, False])
@pytest.mark.parametrize("failing", ["_ols_launch", "_launch"])
def test_gpu_adjacency_fault_falls_back_and_records_sticky_faults(monkeypatch, sticky, failing):
    # No GPU needed: one of the two GPU steps of the adaptive lasso (least
    # squares, LARS paths) raises as a faulting kernel would. A sticky fault
    # ("unspecified launch failure") must make the CUDA backend report itself
    # unusable; a non-sticky one must not. Either way the matrix comes from
    # the CPU engine, with a warning.
    from paralingam import _gpu, adjacency
    from paralingam.adjacency import _adaptive_lasso, _cuda_adjacency, _least_squares

    drv = _fake_driver(sticky)
    pycuda = types.ModuleType("pycuda")
    pycuda.driver = drv
    monkeypatch.setitem(sys.modules, "pycuda", pycuda)
    monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
    monkeypatch.setattr(_gpu, "_FAULT", None)
    monkeypatch.setattr(_cuda_adjacency, "_BUFFERS", {})
    monkeypatch.setattr(_gpu, "unavailable_reason",
                        lambda: f"fault: {_gpu._FAULT}" if _gpu._FAULT else None)
    monkeypatch.setattr(_gpu, "context", lambda: types.SimpleNamespace(handle=1))
    monkeypatch.setattr(_cuda_adjacency, "_kernels", lambda handle: {"lars_paths": None})
    rng = np.random.default_rng(3)
    X = rng.laplace(size=(200, 6)) @ np.triu(rng.uniform(0.5, 1.0, (6, 6)))
    expected = adjacency.adaptive_lasso_adjacency(X, list(range(6)))
    calls = []

    def failing_launch(*args):
        calls.append(failing)
        raise drv.LaunchError("cuMemcpyDtoH failed: unspecified launch failure")

    def host_least_squares(fns, gram, tol, blocks):
        calls.append("_ols_launch")
        coef, rss, solved = _least_squares._ols_on_predecessors(gram)
        return coef, rss, solved

    def no_paths(fn, gram, scatter, targets, *args):
        calls.append("_launch")
        rows, ok = args[-2:]
        rows[:] = 0.0  # (the device's rows, zero where no target was done)
        return rows, ok  # every target handed back to the CPU engine

    monkeypatch.setattr(_cuda_adjacency, "_ols_launch", host_least_squares)
    monkeypatch.setattr(_cuda_adjacency, "_launch", no_paths)
    monkeypatch.setattr(_cuda_adjacency, failing, failing_launch)
    monkeypatch.setattr(_adaptive_lasso, "CUDA_LASSO_MIN_FEATURES", 0)
    step = "least squares" if failing == "_ols_launch" else "adaptive lasso"
    with pytest.warns(RuntimeWarning) as record:
        got = adjacency.adaptive_lasso_adjacency(X, list(range(6)), backend="cuda")
    messages = [str(w.message) for w in record]
    assert any(m.startswith(f"{step} on the GPU failed") and "launch failure" in m
               for m in messages), messages
    # after a sticky fault the next GPU step is not tried; otherwise it runs
    assert all("launch failure" in m for m in messages), messages
    assert ("_launch" in calls) == (failing == "_launch" or not sticky)
    np.testing.assert_array_equal(got, expected)
    assert failing in calls
    assert (_gpu._FAULT is not None) == sticky
    # a sticky fault drops the kept buffers (their memory went with the context)
    if failing == "_launch":
        assert bool(_cuda_adjacency._BUFFERS) != sticky


def test_shared_memory_requests_fit_what_the_device_granted():
    # The CUDA scheduler's launch sizes (it builds and imports without CUDA):
    # a device that refused the opt-in beyond 48 KB gets requests within it,
    # and update_data falls back to reading its rows twice.
    from paralingam.search import _scheduler

    opt_in, default = 98304, 45056
    assert _scheduler.row_cache_bytes(8192, opt_in) == 8192 * 8
    assert _scheduler.row_cache_bytes(12289, opt_in) == 0
    assert _scheduler.row_cache_bytes(8192, default) == 0
    assert _scheduler.row_cache_bytes(5000, default) == 5000 * 8


def test_long_rows_are_updated_in_chunks_that_cover_them():
    # UpdateData splits rows of UPDATE_SPLIT_MIN_N samples and more into
    # chunks of UPDATE_CHUNK samples (a block each, the grid's y): every
    # sample in exactly one chunk, the chunk sums in the [p x chunks] buffer,
    # and a grid the device takes (y at most 65535).
    from paralingam import _constants
    from paralingam.search import _cuda_state, _scheduler

    split, chunk = _constants.UPDATE_SPLIT_MIN_N, _constants.UPDATE_CHUNK
    most = _constants.UPDATE_MAX_CHUNKS
    assert chunk % 32 == 0 and split >= chunk and most <= 65535
    assert _scheduler.update_chunks(split - 1) == 0
    for n in (split, split + 1, split + chunk - 1, 500_000, 2_000_001, most * chunk):
        chunks = _scheduler.update_chunks(n)
        assert (chunks - 1) * chunk < n <= chunks * chunk, n
        ld = _cuda_state.row_stride(n)
        assert _cuda_state.chunk_parts(ld) == chunks * _constants.UPDATE_PARTS
    assert _cuda_state.chunk_parts(_cuda_state.row_stride(split - 32)) == 0  # (a placeholder)
    # longer rows: a block each again (no buffer); n beyond 32-bit ints too
    for n in (most * chunk + 1, 65535 * chunk + 1, 2**31 + 5):
        assert _scheduler.update_chunks(n) == 0
        assert _cuda_state.chunk_parts(_cuda_state.row_stride(n)) == 0


def test_a_redecision_splits_its_pairs_where_they_are_few_and_the_rows_long():
    # _scheduler.redo_chunks: pairs64's blocks per pair. About redo_blocks
    # blocks in all, chunks of at least REDO_CHUNK_MIN samples, the chunk
    # sums (6 doubles) within upd_part, the grid's y (n_cand chunks) at most
    # 65535; one block a pair where there is no room or no need.
    from paralingam import _constants
    from paralingam.search import _cuda_state, _scheduler

    def chunks(n_cand, nw, n, target=8192, p=600):
        return _scheduler.redo_chunks(n_cand, nw, n, p * _cuda_state.chunk_parts(
            _cuda_state.row_stride(n)), target)

    least = _constants.REDO_CHUNK_MIN
    assert chunks(1, 600, 500_000) == 14  # ceil(8192 / 600)
    assert chunks(2, 599, 500_000) == 7
    assert chunks(1, 40, 500_000) == 500_000 // least  # chunks of at least REDO_CHUNK_MIN
    assert chunks(1, 40, 17_383, p=40) == 2
    assert chunks(14, 600, 500_000) == 1  # enough blocks already
    assert chunks(1, 600, 500_000, target=0) == 1  # (REDO_BLOCKS = 0: one block a pair)
    assert chunks(1, 40, 8192, p=40) == 1  # short rows: no upd_part to keep the sums
    # the sums fit upd_part: p = 40 rows of 3 chunks (1680 doubles) hold 280 sums
    assert _scheduler.redo_chunks(1, 100, 10**6, 1680, 8192) == 1680 // 600
    assert _scheduler.redo_chunks(40_000, 2, 10**9, 10**12, 10**9) == 1  # grid y: 65535 // 40000
    for n_cand, nw, n in ((1, 2, 10**6), (3, 500, 16_384), (7, 60, 300_001)):
        s = chunks(n_cand, nw, n)
        part = 600 * _cuda_state.chunk_parts(_cuda_state.row_stride(n))
        assert s == 1 or (s * least <= n and 6 * n_cand * nw * s <= part and n_cand * s <= 65535)


def test_an_iterations_update_launches_follow_the_rows_and_devices():
    # _scheduler.update_plan, which both launchers (one GPU, each device of
    # several) run: the chunked UpdateData for long rows, the fused kernel
    # for few positions on one GPU only, UpdateCovMat after any other.
    from paralingam import _constants as k
    from paralingam.search import _scheduler

    def names(n, r, use_float=True, fused=True, smem=98304):
        plan = _scheduler.update_launches(_scheduler.update_data_kernel(n, use_float), r, n,
                                          smem, False, fused)
        return [launch[0] for launch in plan], plan

    long_n, r = k.UPDATE_SPLIT_MIN_N, 500
    got, plan = names(long_n, r)
    chunks = _scheduler.update_chunks(long_n)
    assert got == ["update_sums", "update_rows_h64", "update_finish", "update_cov"]
    assert [launch[1:3] for launch in plan[:3]] == [(r, chunks), (r, chunks), (r, 1)]
    assert names(long_n, r, use_float=False)[0][1] == "update_rows"
    assert names(long_n, 3)[0][:3] == ["update_sums", "update_rows_h64", "update_finish"]
    # short rows: a block per row, its shared memory the row where it fits
    got, plan = names(8192, r)
    assert got == ["update_data", "update_cov"] and plan[0][5] == 8192 * 8
    assert names(8192, r, smem=1024)[1][0][5] == 0
    tiles = (r + 15) // 16
    assert plan[1][1:5] == (tiles, tiles, 16, _scheduler.update_cov_rows(r, False))
    assert all(launch[3:5] == (256, 1) for launch in names(long_n, r)[1][:3] + [plan[0]])
    # after band pairs: update_cov's rows per block as update_cov_rows says
    k_update = _scheduler.update_data_kernel(8192, True)
    for band in (False, True):
        for fused in (False, True):
            last = _scheduler.update_launches(k_update, 40, 8192, 98304, band, fused)[-1]
            assert last[0] == "update_cov" and last[4] == _scheduler.update_cov_rows(40, band)
    # few positions: one fused kernel on one GPU, two kernels on several
    few = k.FUSED_COV_MAX_R
    got, plan = names(1024, few)
    assert got == ["update_data_fused"] and plan[0][5] >= k.FUSED_COV_SMEM
    assert names(1024, few, fused=False)[0] == ["update_data", "update_cov"]
    assert names(1024, few + 1)[0] == ["update_data", "update_cov"]


def test_update_cov_blocks_are_shapes_the_kernel_handles():
    # update_cov (kernels/paralingam.cu) maps its tile's 16 rows to threadIdx.y
    # < 16 and shares band pairs among whole warps: a block needs at least 16
    # rows of 16 threads, whole warps, and no more threads than its
    # __launch_bounds__. Larger blocks only with band pairs and few tiles.
    import re
    from importlib import resources

    from paralingam.search import _scheduler

    source = resources.files("paralingam.kernels").joinpath("paralingam.cu").read_text()
    bound = int(re.search(r"__launch_bounds__\((\d+)\)\s+update_cov\(", source).group(1))
    for r in range(1, 2000):
        assert _scheduler.update_cov_rows(r, False) == 16
        rows = _scheduler.update_cov_rows(r, True)
        assert rows >= 16 and rows % 2 == 0 and 16 * rows <= bound, (r, rows)
        tiles = (r + 15) // 16
        if tiles * (tiles + 1) // 2 > 256:
            assert rows == 16, r
        assert rows <= _scheduler.update_cov_rows(max(r - 1, 1), True)  # fewer as r grows


def test_a_sticky_search_fault_is_recorded_and_named(monkeypatch):
    # both search paths (one GPU, several) turn a sticky kernel fault into this error
    from paralingam.search import _cuda, _scheduler

    noted = []
    monkeypatch.setattr(_cuda, "_note_fault", noted.append)
    exc = _scheduler.CudaError("an illegal memory access was encountered", 700)
    err = _cuda._sticky_fault(exc)
    assert noted == [exc]
    assert isinstance(err, _scheduler.CudaError) and err.code == 700
    assert str(err).startswith("an illegal memory access was encountered; CUDA keeps such a fault")
    assert "unavailable until Python restarts" in str(err)


def test_profiled_phases_sum_by_phase_and_start_an_iteration_after_its_rounds():
    # _scheduler.sum_phases groups the intervals between profiling events:
    # one GPU's stream (prepare, rounds, update, ...), and a search over
    # several GPUs, where device 0's prepare is split by its copies and a
    # device's first mark may be a wait
    from paralingam.search import _scheduler

    names = _scheduler.MULTI_PHASES
    P, R, D, U, W, S, C, I = (names.index(n) for n in
                              ("prepare", "rounds", "redo", "update", "wait", "select", "copy", "idle"))
    # one GPU: two iterations, the first of two rounds and a re-decision
    one = [(P, 1.0), (R, 2.0), (U, 0.5), (R, 3.0), (D, 0.25), (U, 0.5), (P, 1.0), (R, 4.0), (U, 0.5)]
    t, rounds = _scheduler.sum_phases([s for _, s in one], [p for p, _ in one])
    assert t == {"prepare": 2.0, "rounds": 9.0, "redo": 0.25, "update": 1.5}
    assert rounds == [5.0, 4.0]
    # device 0 of several: prepare, copy, prepare again (its setup) in each iteration
    dev0 = [(P, 1.0), (C, 0.1), (P, 0.5), (R, 2.0), (W, 0.2), (S, 0.3), (C, 0.1), (U, 0.5), (I, 0.05),
            (R, 3.0), (W, 0.2), (S, 0.3), (C, 0.1), (U, 0.5), (I, 0.05),
            (P, 1.0), (C, 0.1), (P, 0.5), (R, 4.0), (W, 0.2), (S, 0.3), (C, 0.1), (U, 0.5)]
    t, rounds = _scheduler.sum_phases([s for _, s in dev0], [p for p, _ in dev0], names)
    assert rounds == [5.0, 4.0]
    assert t["prepare"] == 3.0 and t["copy"] == pytest.approx(0.5) and t["idle"] == pytest.approx(0.1)
    assert sum(t.values()) == pytest.approx(sum(s for _, s in dev0))
    # another device: its first mark a wait, then its setup (prepare)
    dev1 = [(W, 0.3), (P, 0.5), (R, 2.0), (W, 0.5), (U, 0.5), (I, 0.1), (R, 3.0), (W, 0.5), (U, 0.5),
            (I, 0.1), (W, 0.2), (P, 0.5), (R, 4.0)]
    t, rounds = _scheduler.sum_phases([s for _, s in dev1], [p for p, _ in dev1], names)
    assert rounds == [5.0, 4.0] and t["wait"] == 1.5
    assert _scheduler.sum_phases([], []) == ({n: 0.0 for n in _scheduler.PHASES}, [])
