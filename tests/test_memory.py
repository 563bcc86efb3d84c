"""Memory checks: every large step estimates its memory and refuses, clearly, before allocating."""

import time
import tracemalloc

import numpy as np
import pytest

import paralingam
from paralingam import _api, _memory, _preparation, adjacency
from paralingam.adjacency import _adaptive_lasso, _least_squares
from paralingam.lingam import bootstrap
from paralingam._memory import InsufficientMemoryError

GiB = 1 << 30


@pytest.fixture
def memory(monkeypatch):
    """Set the available host memory (bytes); every step is checked, however small."""
    monkeypatch.setattr(_memory, "MIN_CHECKED", 0)

    def set_available(nbytes):
        monkeypatch.setattr(_memory, "available_host_bytes", lambda: nbytes)

    return set_available


def _peak_while(call):
    """Peak of traced (numpy) allocations while ``call()`` runs, and its result or error."""
    tracemalloc.start()
    try:
        try:
            out = call()
        except Exception as exc:  # noqa: BLE001 - returned for the caller's assertions
            out = exc
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, out


def test_issue_case_p20000_n5_refused_fast_with_a_clear_message(memory):
    memory(2 * GiB)
    X = np.random.default_rng(0).standard_normal((5, 20_000))
    t0 = time.perf_counter()
    # (the CPU route's first step; on a GPU machine "auto" would refuse the
    # CUDA search's host buffers first, with its own message)
    peak, exc = _peak_while(lambda: paralingam.fit(X, backend="cpu"))
    assert isinstance(exc, InsufficientMemoryError) and isinstance(exc, MemoryError)
    msg = str(exc)
    size = _memory.format_bytes(_memory.standardise_bytes(5, 20_000))  # 11.92 GiB
    assert "standardising the data" in msg and f"needs about {size}" in msg
    assert "2.00 GiB is available" in msg
    assert "fewer variables" in msg and "Unable to allocate" not in msg
    assert exc.step.startswith("standardising") and exc.needed > exc.available == 2 * GiB
    assert peak < 20 * X.nbytes  # refused before any n_features^2 array
    assert time.perf_counter() - t0 < 30  # not the minutes a search of 20000 variables takes


@pytest.mark.parametrize("kind", ["int64", "int8", "object", "frame_mixed", "frame_int"])
def test_input_converted_to_float64_is_refused_before_its_copy(memory, kind):
    # Input that is not float32 or float64 is converted (a float64 copy of
    # n x p) before it is checked: the copy itself is checked first, and
    # refused without being made (nothing n x p allocated)
    import pandas as pd

    n, p = 4000, 50
    data = np.random.default_rng(2).integers(-100, 100, size=(n, p))
    X = {"int64": lambda: data, "int8": lambda: data.astype(np.int8),
         "object": lambda: data.astype(object),
         "frame_mixed": lambda: pd.DataFrame(data).astype({0: np.float32}),
         "frame_int": lambda: pd.DataFrame(data)}[kind]()
    memory(8 * n * p - 1)
    peak, exc = _peak_while(lambda: paralingam.fit(X, backend="cpu"))
    assert isinstance(exc, InsufficientMemoryError), exc
    assert exc.step.startswith("a float64 copy of the data") and exc.needed == 8 * n * p
    assert "float64 or float32 data" in str(exc)
    assert peak < 8 * n * p / 2  # refused before the copy
    memory(100 * GiB)
    assert paralingam.fit(X, backend="cpu").causal_order  # with room, the same input fits


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_input_is_not_refused_for_a_copy_it_does_not_need(memory, monkeypatch, dtype):
    # float32 and float64 arrays and float64 frames are read as they are: no
    # check for a float64 copy (only the fit's own steps are checked)
    import pandas as pd

    X = np.random.default_rng(3).standard_normal((2000, 8)).astype(dtype)
    asked = []
    real = _memory.require
    monkeypatch.setattr(_memory, "require", lambda step, *a: (asked.append(step), real(step, *a)))
    memory(100 * GiB)
    paralingam.fit(X, backend="cpu")
    if dtype == np.float64:
        paralingam.fit(pd.DataFrame(X), backend="cpu")
    assert asked and not any(step.startswith("a float64 copy") for step in asked)


def test_real_memory_reader_refuses_a_problem_no_machine_holds():
    # 400 000 variables: the covariance alone is 1.28 TB (16 MB of data)
    available = _memory.available_host_bytes()
    assert available is not None and available > 0
    needed = _memory.standardise_bytes(5, 400_000)
    assert needed > available
    X = np.random.default_rng(1).standard_normal((5, 400_000))
    size = _memory.format_bytes(needed)
    with pytest.raises(InsufficientMemoryError, match=rf"standardising .* needs about {size}"):
        paralingam.fit(X, backend="cpu")  # (the CPU route's step, on any machine)


def test_available_memory_reader_agrees_with_proc_meminfo():
    meminfo = _memory._meminfo_available()
    found = _memory.available_host_bytes()
    if meminfo is None:  # pragma: no cover - non-Linux
        pytest.fail("no /proc/meminfo on this test machine")
    assert 0 < found <= meminfo * 1.5  # psutil, where installed, reads the same field


def test_cgroup_limits_are_read(tmp_path, monkeypatch):
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.max").write_text("1073741824\n")
    (v2 / "memory.current").write_text("268435456\n")
    real_join = _memory.os.path.join

    def join(root, *rest):  # the cgroup folders, redirected to tmp_path
        if root.startswith("/sys/fs/cgroup"):
            return real_join(str(v2), *rest)
        return real_join(root, *rest)

    monkeypatch.setattr(_memory.os.path, "join", join)
    assert _memory._cgroup_room() == (1 << 30) - (1 << 28)
    (v2 / "memory.max").write_text("max\n")
    assert _memory._cgroup_room() is None


def test_switch_turns_the_check_off(memory, monkeypatch):
    memory(0)
    with pytest.raises(InsufficientMemoryError):
        _memory.require("a step", 10, "advice")
    monkeypatch.setenv(_memory.ENV_SWITCH, "0")
    _memory.require("a step", 10, "advice")


def _data(n, p, seed=0):
    return np.random.default_rng(seed).laplace(size=(n, p))


@pytest.mark.parametrize("level, step", [
    (0, "standardising the data"),
    (1, "the CPU order search"),
    (2, r"the adjacency step \(least squares\)"),
])
def test_fit_checks_every_step_before_the_first_runs(memory, monkeypatch, level, step):
    # n <= p: the adjacency step's minimum-norm rows make it the largest (its
    # scatter matrix comes from the search's correlation matrix)
    n, p = 30, 40
    needs = [need for _, need, _ in _memory.fit_plan(n, p, backend="cpu")]
    assert needs == sorted(needs)  # here each step needs more than the one before
    memory(needs[level] - 1)  # the steps before pass, this one fails
    ran = []
    monkeypatch.setattr(_api, "_search_cpu", lambda *a, **k: ran.append(1))
    with pytest.raises(InsufficientMemoryError, match=step):
        paralingam.fit(_data(n, p), backend="cpu")
    assert not ran  # refused before the search started


def test_the_cuda_host_plan_counts_each_devices_upload_blocks():
    # a multi-GPU search keeps the upload's two page-locked blocks per device
    n, p = 100_000, 300
    one = dict((step, need) for step, need, _ in _memory.fit_plan(n, p, backend="cuda"))
    two = dict((step, need) for step, need, _ in _memory.fit_plan(n, p, backend="cuda", devices=2))
    step = "the CUDA search's host buffers (upload and correlation matrix)"
    assert two[step] - one[step] == 2 * _memory.UPLOAD_BLOCK_BYTES


def test_each_step_checks_itself(memory):
    n, p = 60, 30
    X = _data(n, p)
    order = np.arange(p)
    memory(0)
    # (the step's validated float64 copy of X is checked first)
    with pytest.raises(InsufficientMemoryError, match=r"a float64 copy of the data: .* fewer samples"):
        adjacency.estimate_adjacency(X, order, method="ols")
    memory(X.nbytes)  # room for that copy, not for the step
    with pytest.raises(InsufficientMemoryError, match=r"adjacency step \(least squares\)"):
        adjacency.estimate_adjacency(X, order, method="ols")
    with pytest.raises(InsufficientMemoryError, match=r"adjacency step \(adaptive lasso\).*"
                                                      r"adjacency='ols'"):
        adjacency.estimate_adjacency(X, order, method="adaptive_lasso")
    memory(0)
    with pytest.raises(InsufficientMemoryError, match="total effects"):
        bootstrap.total_effects(np.tril(np.ones((p, p)), -1), order)
    # the standardisation inside the CPU search, and then its state
    n = 10
    data = np.ascontiguousarray(X[:n])
    with pytest.raises(InsufficientMemoryError, match="standardising"):
        _api._search_cpu(data, True, 1e-4, 2.0, 1e-10, 1e-10, 1, {}, False)
    assert _memory.cpu_search_bytes(n, p) > _memory.standardise_bytes(n, p)
    memory(_memory.standardise_bytes(n, p))
    with pytest.raises(InsufficientMemoryError, match="CPU order search"):
        _api._search_cpu(data, True, 1e-4, 2.0, 1e-10, 1e-10, 1, {}, False)


def test_minimum_norm_rows_check_themselves(memory):
    n, p = 400, 10
    X = _data(n, p)
    X[:, 5] = X[:, 0] + X[:, 1]  # exact dependence: the minimum-norm rows run
    assert _memory.min_norm_bytes(n, p) > _memory.ols_bytes(n, p)
    memory(_memory.ols_bytes(n, p))
    with pytest.raises(InsufficientMemoryError, match="minimum-norm"):
        adjacency.estimate_adjacency(X, np.arange(p), method="ols")


def test_estimator_checks_its_adjacency_before_the_search(memory, monkeypatch):
    n, p = 60, 30
    plan = _memory.fit_plan(n, p, backend="cpu", adjacency="adaptive_lasso",
                            n_threads=paralingam._validation.default_threads())
    lasso = plan[-1][1]
    assert lasso > max(need for _, need, _ in plan[:-1])
    memory(lasso - 1)
    ran = []
    monkeypatch.setattr(_api, "_search_cpu", lambda *a, **k: ran.append(1))
    with pytest.raises(InsufficientMemoryError, match="adaptive lasso"):
        paralingam.DirectLiNGAM(backend="cpu").fit(_data(n, p))  # (the CPU plan above)
    assert not ran


def test_bootstrap_checks_its_result_arrays(memory):
    X = _data(100, 5)
    memory(GiB)
    model = paralingam.DirectLiNGAM(random_state=0)
    peak, exc = _peak_while(lambda: model.bootstrap(X, n_sampling=10_000_000))
    assert isinstance(exc, InsufficientMemoryError)
    assert "10000000 resamples" in str(exc) and "n_sampling" in str(exc)
    assert peak < 10 << 20  # the 4 GB of results were never allocated
    memory(1 << 40)
    assert model.bootstrap(X, n_sampling=3).adjacency_matrices_.shape == (3, 5, 5)


def test_command_line_writes_nothing_when_memory_is_short(memory, tmp_path, capsys):
    from paralingam import cli

    data = tmp_path / "data.csv"
    np.savetxt(data, _data(50, 20), delimiter=",")
    out = tmp_path / "out.json"
    memory(1 << 10)
    code = cli.main(["fit", str(data), "-o", str(out)])  # an error message, not a traceback
    assert code != 0 and not out.exists()
    assert "needs about" in capsys.readouterr().err


@pytest.mark.parametrize("n, p, singular", [(2000, 60, False), (40, 80, True), (500, 40, True)])
def test_estimates_bound_the_measured_peaks(n, p, singular):
    """Each estimate is at least the step's traced peak, and within a small factor of it."""
    X = _data(n, p, seed=p)
    if singular and n > p:
        X[:, 7] = X[:, 1] - 2 * X[:, 2]
    data = np.ascontiguousarray(X)
    order = np.arange(p)

    def ratio(estimate, call):
        call()  # first calls import modules (scipy, scikit-learn): not the step's memory
        peak, out = _peak_while(call)
        assert not isinstance(out, Exception), out
        assert peak <= estimate, (peak, estimate)
        return estimate / peak

    ratios = {
        "standardise": ratio(_memory.standardise_bytes(n, p), lambda: _preparation.standardise_rows(data)),
        "search": ratio(_memory.standardise_bytes(n, p) + _memory.cpu_search_bytes(n, p),
                        lambda: _api._search_cpu(data.copy(), True, 1e-4, 2.0, 1e-10, 1e-10, 1,
                                                 {}, False)),
        "ols": ratio(_memory.ols_bytes(n, p) + (_memory.min_norm_bytes(n, p) if singular else 0),
                     lambda: _least_squares._ols_adjacency(data, order)),
        "lasso": ratio(_memory.adaptive_lasso_bytes(n, p, 1),
                       lambda: _adaptive_lasso._adaptive_lasso_adjacency(data, order, n_threads=1))
        if n > p + 1 else 1.0,
        "total effects": ratio(_memory.total_effects_bytes(p),
                               lambda: bootstrap.total_effects(np.tril(np.ones((p, p)), -1),
                                                               order)),
    }
    assert all(r < 8 for r in ratios.values()), ratios


def test_bootstrap_estimate_bounds_the_result_arrays():
    n, p, k = 80, 6, 7
    peak, result = _peak_while(
        lambda: paralingam.DirectLiNGAM(random_state=0).bootstrap(_data(n, p), n_sampling=k))
    held = result.adjacency_matrices_.nbytes + result.total_effects_.nbytes
    assert held + sum(r.nbytes for r in result.resampled_indices_) <= \
        _memory.bootstrap_result_bytes(k, n, p)


@pytest.mark.gpu
def test_cuda_problem_too_big_for_the_card_gets_the_clear_error(monkeypatch):
    from paralingam.search import _cuda

    monkeypatch.setattr(_memory, "available_host_bytes", lambda: 1 << 60)  # the host: no limit
    n, p = 64, 80_000  # the device workspace alone: ~256 GB
    total = _cuda.device_properties()["total"]
    assert _cuda.bytes_needed(p, n, True) > total
    X = np.random.default_rng(0).standard_normal((n, p))
    with pytest.raises(_cuda.GPUMemoryError) as info:
        paralingam.fit(X, backend="cuda")
    exc = info.value
    assert isinstance(exc, InsufficientMemoryError) and isinstance(exc, MemoryError)
    assert "CUDA order search" in str(exc) and "backend='cpu'" in str(exc)
    assert exc.needed == _cuda.bytes_needed(p, n, True) and exc.available <= total
    # float64 comparisons need less, but still too much: the advice changes, the error stays
    with pytest.raises(_cuda.GPUMemoryError, match="double comparisons"):
        paralingam.fit(X, backend="cuda", dtype="float64")
    Y = np.random.default_rng(1).laplace(size=(300, 6))
    assert paralingam.fit(Y, backend="cuda").causal_order == \
        paralingam.fit(Y, backend="cpu").causal_order


def test_psutil_serves_only_where_proc_meminfo_cannot_be_read(monkeypatch):
    import sys
    import types

    calls = []
    fake = types.SimpleNamespace(virtual_memory=lambda: calls.append(1) or types.SimpleNamespace(
        available=123 << 20))
    monkeypatch.setitem(sys.modules, "psutil", fake)
    monkeypatch.setattr(_memory, "_cgroup_room", lambda: None)
    monkeypatch.setattr(_memory, "_meminfo_available", lambda: 456 << 20)
    assert _memory.available_host_bytes() == 456 << 20 and calls == []
    monkeypatch.setattr(_memory, "_meminfo_available", lambda: None)
    assert _memory.available_host_bytes() == 123 << 20 and calls == [1]
