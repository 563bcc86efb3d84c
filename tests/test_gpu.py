"""CUDA backend against the numpy reference (skipped without a usable GPU).

Run on the GPU machine with ``bash tools/gpu_check.sh``. The cases are the
CPU backend's seeded grid (tests/test_cpu_backend.py), the E. coli core flux
sample, planted degenerate data and p = 500 (where the CPU backend, itself
tested against the reference, stands in for the reference: the numpy
reference would take hours there).
"""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from lingam_oracle import lingam_module

import paralingam
from paralingam.search import reference
from test_cpu_backend import GRID, near_copy, planted_degenerate_data

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["threshold", "all_pairs"])
def round_kind(request, monkeypatch):
    """Run a test with threshold rounds in every iteration, then all-pairs rounds.

    By default an iteration with few or short pairs compares every pair in
    one all-pairs round (``_cuda.ALL_PAIRS_WORK``), which covers most of the
    small cases below; each kind of round must give the reference's order.
    """
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "ALL_PAIRS_WORK", 0.0 if request.param == "threshold" else float("inf"))
    return request.param


TUNING = ("threads_per_block", "blocks", "warps_per_pair")


def fit(X, **kwargs):
    """``paralingam.fit`` on the GPU; launch settings among ``kwargs`` go in ``tuning``."""
    kwargs.setdefault("backend", "cuda")
    tuning = {k: kwargs.pop(k) for k in TUNING if kwargs.get(k) is not None}
    for k in TUNING:
        kwargs.pop(k, None)
    if tuning:
        kwargs["tuning"] = tuning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        res = paralingam.fit(X, **kwargs)
    assert res.stats["backend"] == kwargs["backend"]
    assert sorted(res.causal_order) == list(range(np.shape(X)[1]))
    assert np.isfinite(res.adjacency_matrix).all()
    assert all(np.isfinite(res.stats["scores"]))
    return res


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p, n, density, seed", GRID)
def test_cuda_order_equals_reference(lingam_data, reference_on, p, n, density, seed, dtype,
                                     round_kind):
    X = lingam_data(p, n, density, seed)[0]
    ref_order, ref_explained = reference_on(p, n, density, seed)
    res = fit(X, dtype=dtype)
    assert res.causal_order == ref_order
    assert res.stats["explained"] == ref_explained
    assert len(res.stats["remaining"]) == p - 1
    assert all(0 <= k <= r * (r - 1) // 2 for k, r in zip(res.stats["compared"], res.stats["remaining"]))
    assert res.stats["all_pairs"] == [round_kind == "all_pairs"] * (p - 1)
    if round_kind == "all_pairs":  # one round per iteration, every pair once
        assert res.stats["compared"] == res.stats["pairs"]
        assert set(res.stats["rounds"]) <= {0, 1}


def test_cuda_switches_to_all_pairs_rounds_below_the_work_bound(lingam_data, monkeypatch):
    # Iterations with at most 40 remaining variables compare every pair in
    # one round; the larger ones use threshold rounds, which on one block
    # (8 warps) leave pairs uncompared. Same order as the CPU.
    from paralingam.search import _cuda

    p, n = 90, 1024
    X = lingam_data(p, n, "sparse", 871)[0]
    monkeypatch.setattr(_cuda, "ALL_PAIRS_WORK", 40 * 39 / 2 * n)
    res = fit(X, blocks=1)
    assert res.causal_order == fit(X, backend="cpu").causal_order
    st = res.stats
    assert st["all_pairs"] == [r <= 40 for r in st["remaining"]]
    small = [(k, r, rounds) for k, r, rounds in zip(st["compared"], st["remaining"], st["rounds"])
             if r <= 40]
    assert len(small) == 39
    assert all(k == r * (r - 1) // 2 and rounds == 1 for k, r, rounds in small)
    large = [(k, r) for k, r in zip(st["compared"], st["remaining"]) if r > 40]
    assert sum(k for k, _ in large) < sum(r * (r - 1) // 2 for _, r in large)


def check_double_pair_counts(stats):
    """``float64_pairs``: none outside the re-decided iterations, at most each candidate
    against every other remaining variable, and some in all (a candidate's pairs that
    the float rounds found positive beyond their error bound need no double value)."""
    pairs, cand = stats["float64_pairs"], stats["float64_candidates"]
    assert len(pairs) == len(cand) == len(stats["remaining"]) == len(stats["float64_chunks"])
    for k, c, r, chunks in zip(pairs, cand, stats["remaining"], stats["float64_chunks"]):
        assert 0 <= k <= c * (r - 1)
        assert (chunks > 0) == (c > 0)  # the blocks a pair was split among, where re-decided
    assert sum(pairs) > 0


def test_cuda_long_rows_redecide_with_their_updates_double_entropies():
    # Rows of HX64_IN_UPDATE_MIN_N samples and more: update_data_h64 (and the
    # first standardisation, and a re-standardisation after drift) compute
    # the rows' double entropies, which a re-decision then reads instead of
    # entropy64's pass over the rows. Same order as the CPU and the double
    # search; with drift_tol=0 every update re-standardises the rows.
    from paralingam import _constants
    from paralingam.search import _cuda
    from paralingam.datasets import make_lingam_data

    n = _constants.HX64_IN_UPDATE_MIN_N + 999
    X = make_lingam_data(40, n, density="sparse", random_state=41)[0]
    res = fit(X)
    assert any(res.stats["float64_redo"])
    check_double_pair_counts(res.stats)
    cpu = fit(X, backend="cpu").causal_order
    assert res.causal_order == fit(X, dtype="float64").causal_order == cpu
    kw = dict(threshold=True, gamma0=1e-4 * 1024 / n, c=2.0, collinear_tol=1e-10, explained_tol=1e-10)
    always = _cuda.search(X, times={}, dtype="float32", drift_tol=0.0, **kw)
    assert always[3] >= len(always[2]["remaining"]) - 1  # re-standardised at (nearly) every step
    assert any(always[2]["float64_redo"])  # re-decisions read the re-standardised entropies
    assert list(always[0]) == cpu


def test_cuda_long_rows_redecide_in_chunks(monkeypatch):
    # Long rows' re-decisions split each pair among several blocks of pairs64
    # (_scheduler.redo_chunks), whose sums select64 adds in chunk order: the
    # same orders and pairs compared in double as one block a pair
    # (REDO_BLOCKS = 0), as the double search and the CPU.
    from paralingam import _constants
    from paralingam.search import _cuda, _cuda_state, _scheduler
    from paralingam.datasets import make_lingam_data

    p, n = 40, 3 * _constants.REDO_CHUNK_MIN + 77
    X = make_lingam_data(p, n, density="sparse", random_state=43)[0]
    chunked = fit(X)
    st = chunked.stats
    check_double_pair_counts(st)
    part = p * _cuda_state.chunk_parts(_cuda_state.row_stride(n))
    assert any(chunks > 1 for chunks in st["float64_chunks"])  # what the scheduler launched
    for c, chunks in zip(st["float64_candidates"], st["float64_chunks"]):
        # at most the formula's split of all the remaining variables' pairs (nw <= r)
        assert c == 0 or 1 <= chunks <= _scheduler.redo_chunks(c, 2, n, part, _cuda.REDO_BLOCKS)
    monkeypatch.setattr(_cuda, "REDO_BLOCKS", 0)
    whole = fit(X)
    assert set(whole.stats["float64_chunks"]) <= {0, 1}
    assert whole.causal_order == chunked.causal_order
    assert whole.stats["float64_candidates"] == st["float64_candidates"]
    assert chunked.causal_order == fit(X, dtype="float64").causal_order == fit(X, backend="cpu").causal_order


@pytest.mark.parametrize("seed", [531, 532])
def test_cuda_long_rows_updated_in_chunks_equal_reference(lingam_data, seed):
    # Rows of UPDATE_SPLIT_MIN_N samples and more are updated in chunks
    # (update_sums, update_rows, update_finish): planted exact dependencies
    # (variables explained by a root: update_finish's explained path), a near
    # copy (1 - rho^2 ~ 1e-6, in the verify band: update_finish's one-block
    # path) and an odd n (the last chunk's tail sample). The reference's order
    # and explained variables, float and double comparisons; bit for bit again.
    from paralingam import _constants
    from paralingam.search import _scheduler

    n = _constants.UPDATE_SPLIT_MIN_N + 2 * _constants.UPDATE_CHUNK + 777
    assert _scheduler.update_chunks(n) == 5 and n % 2 == 1
    X, n_planted = planted_degenerate_data(lingam_data(12, n, "sparse", seed)[0])
    X = near_copy(X, 4, 1e-6)
    ref_order, ref_explained = reference.causal_order(X)
    assert len(ref_explained) == n_planted
    for dtype in ("float32", "float64"):
        first, again = fit(X, dtype=dtype), fit(X, dtype=dtype)
        assert first.causal_order == ref_order
        assert first.stats["explained"] == ref_explained
        assert again.stats["scores"] == first.stats["scores"]


def test_cuda_all_pairs_round_redecided_in_double(monkeypatch):
    # bench_gpu's sparse p=100 n=1024 case: every iteration is an all-pairs
    # round by default, and three of them are re-decided in float64 (whose
    # pairs64 reuses the all-pairs round's float values where they settle a
    # pair).
    from paralingam.search import _cuda
    from paralingam.datasets import make_lingam_data

    X = make_lingam_data(100, 1024, density="sparse", random_state=100)[0]
    res = fit(X)
    assert all(res.stats["all_pairs"])
    assert any(res.stats["float64_redo"])
    check_double_pair_counts(res.stats)
    # every pair of an all-pairs round is compared in float: the same pairs need double
    assert fit(X).stats["float64_pairs"] == res.stats["float64_pairs"]
    assert res.causal_order == fit(X, dtype="float64").causal_order == fit(X, backend="cpu").causal_order
    monkeypatch.setattr(_cuda, "ALL_PAIRS_WORK", 0.0)
    threshold_rounds = fit(X)
    assert not any(threshold_rounds.stats["all_pairs"])
    assert threshold_rounds.causal_order == res.causal_order
    assert threshold_rounds.stats["scores"] == res.stats["scores"]  # index-ordered sums: same bits


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p, n, density, seed", [(30, 1000, "sparse", 201), (60, 500, "dense", 202)])
def test_cuda_threshold_on_and_off_give_the_same_order(lingam_data, p, n, density, seed, dtype,
                                                       monkeypatch):
    from paralingam.search import _cuda

    X = lingam_data(p, n, density, seed)[0]
    on = fit(X, dtype=dtype)  # (all-pairs rounds: these cases are small)
    off = fit(X, dtype=dtype, threshold=False)
    assert on.causal_order == off.causal_order == fit(X, backend="cpu").causal_order
    assert off.stats["compared"] == off.stats["pairs"]  # every pair exactly once
    # With thousands of resident warps and a few hundred pairs, the first
    # round claims every pair before a score can pass gamma; one block of
    # eight warps shows the threshold at work.
    assert all(off.stats["all_pairs"])
    # The threshold rounds' engine without a threshold: claims walk the
    # partners cyclically.
    monkeypatch.setattr(_cuda, "ALL_PAIRS_WORK", 0.0)
    claims = fit(X, dtype=dtype, threshold=False)
    assert not any(claims.stats["all_pairs"])
    assert claims.stats["compared"] == claims.stats["pairs"]
    assert claims.causal_order == on.causal_order
    narrow = fit(X, dtype=dtype, blocks=1)
    assert narrow.causal_order == on.causal_order
    assert narrow.stats["comparisons_saved"] > 0.0


def test_cuda_float_and_double_give_the_same_order(lingam_data):
    for seed in (801, 802, 803):
        X = lingam_data(120, 700, "dense" if seed % 2 else "sparse", seed)[0]
        f32 = fit(X, dtype="float32")
        f64 = fit(X, dtype="float64")
        assert f32.causal_order == f64.causal_order
        assert not any(f64.stats["float64_redo"])
        np.testing.assert_allclose(f32.stats["scores"], f64.stats["scores"], rtol=1e-3, atol=1e-9)


@pytest.mark.parametrize("kwargs", [
    {"threads_per_block": 64}, {"threads_per_block": 128}, {"threads_per_block": 512},
    {"blocks": 1}, {"blocks": 3}, {"gamma0": 1e-8, "c": 1.5}, {"gamma0": 10.0, "c": 10.0},
    {"warps_per_pair": 2}, {"warps_per_pair": 4}, {"warps_per_pair": 8},
    {"warps_per_pair": 4, "dtype": "float64"}, {"warps_per_pair": 4, "threshold": False},
    {"threads_per_block": 128, "warps_per_pair": 2}, {"threads_per_block": 1024, "warps_per_pair": 4},
])
def test_cuda_tuning_does_not_change_the_order(lingam_data, reference_on, kwargs, round_kind):
    X = lingam_data(40, 2048, "dense", 108)[0]
    assert fit(X, **kwargs).causal_order == reference_on(40, 2048, "dense", 108)[0]


def test_cuda_warps_per_pair_must_divide_the_block(lingam_data):
    X = lingam_data(10, 500, "dense", 109)[0]
    for kwargs in ({"threads_per_block": 64, "warps_per_pair": 4},   # 2 warps
                   {"threads_per_block": 1024, "warps_per_pair": 2}):  # 16 groups
        with pytest.raises(ValueError, match="warps_per_pair"):
            fit(X, **kwargs)


@pytest.mark.parametrize("density, seed", [("sparse", 811), ("dense", 812)])
def test_cuda_large_p_equals_cpu(lingam_data, density, seed):
    X = lingam_data(500, 1024, density, seed)[0]
    cpu = fit(X, backend="cpu")
    for dtype in ("float32", "float64"):
        assert fit(X, dtype=dtype).causal_order == cpu.causal_order


def test_cuda_large_n_equals_cpu(lingam_data):
    # n = 8192: by default four warps compare each pair
    from paralingam.search import _cuda

    assert [_cuda.warps_per_pair_for(n, 8) for n in (1024, 2048, 4096, 8192)] == [1, 2, 4, 4]
    X = lingam_data(120, 8192, "sparse", 813)[0]
    cpu = fit(X, backend="cpu")
    for dtype in ("float32", "float64"):
        assert fit(X, dtype=dtype).causal_order == cpu.causal_order


def test_cuda_more_than_1024_variables_equals_cpu(lingam_data):
    # More workers than setup's 512 threads: order_partners places the
    # partners in three tiles in the first iterations, fewer later
    X = lingam_data(1060, 1536, "sparse", 815)[0]
    assert fit(X).causal_order == fit(X, backend="cpu").causal_order


def ecoli_full():
    """The whole E. coli core sample (n=10000) when this machine has it."""
    for path in (os.environ.get("PARALINGAM_ECOLI_FULL"),
                 ROOT / ".gpu" / "data" / "ecoli_core_fluxes_n10000.npz",
                 ROOT.parent / "shared" / "data" / "ecoli_core_fluxes_n10000.npz"):
        if path and Path(path).exists():
            with np.load(path, allow_pickle=False) as f:
                return np.array(f["X"], dtype=np.float64)
    return None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cuda_ecoli_subset_equals_reference(ecoli, dtype, round_kind):
    X = ecoli[0]
    ref_order, ref_explained = reference.causal_order(X)
    res = fit(X, dtype=dtype)
    assert res.causal_order == ref_order
    assert res.stats["explained"] == ref_explained
    assert len(ref_explained) == 87 - 24


def test_cuda_ecoli_full_equals_reference():
    X = ecoli_full()
    if X is None:
        pytest.fail("the full E. coli sample is missing: copy ../shared/data into .gpu/data "
                    "(tools/gpu_check.sh does) or set PARALINGAM_ECOLI_FULL")
    ref_order, ref_explained = reference.causal_order(X)
    for dtype in ("float32", "float64"):
        res = fit(X, dtype=dtype)
        assert res.causal_order == ref_order
        assert res.stats["explained"] == ref_explained


@pytest.mark.parametrize("density, seed", [("sparse", 501), ("dense", 502)])
def test_cuda_planted_dependencies_equal_reference(lingam_data, density, seed, round_kind):
    X, n_planted = planted_degenerate_data(lingam_data(12, 500, density, seed)[0])
    ref_order, ref_explained = reference.causal_order(X)
    for dtype, group in (("float32", None), ("float64", None), ("float32", 2)):
        res = fit(X, dtype=dtype, warps_per_pair=group)
        assert res.causal_order == ref_order
        assert res.stats["explained"] == ref_explained
        assert len(ref_explained) == n_planted


@pytest.mark.parametrize("unexplained", [1e-6, 1e-14])
def test_cuda_near_collinear_columns_equal_reference(lingam_data, unexplained, round_kind):
    X = near_copy(lingam_data(10, 500, "dense", 522)[0], 4, unexplained)
    ref_order, ref_explained = reference.causal_order(X)
    # (4 warps per pair: the group path of the double residuals of near copies)
    for dtype, group in (("float32", None), ("float64", None), ("float32", 4)):
        res = fit(X, dtype=dtype, warps_per_pair=group)
        assert res.causal_order == ref_order
        assert res.stats["explained"] == ref_explained


def test_cuda_runs_repeat(lingam_data):
    X = lingam_data(80, 1024, "dense", 821)[0]
    runs64 = [fit(X, dtype="float64") for _ in range(3)]
    runs32 = [fit(X, dtype="float32") for _ in range(3)]
    for runs in (runs64, runs32):
        assert all(r.causal_order == runs[0].causal_order for r in runs)
    # every score is an index-ordered sum of deterministic terms: bit for bit
    for runs in (runs64, runs32):
        assert all(r.stats["scores"] == runs[0].stats["scores"] for r in runs)
    np.testing.assert_allclose(runs32[0].stats["scores"], runs64[0].stats["scores"],
                               rtol=1e-3, atol=1e-9)
    cpu = fit(X, backend="cpu", dtype="float64")  # double on both: scores to rounding
    assert cpu.causal_order == runs64[0].causal_order
    np.testing.assert_allclose(runs64[0].stats["scores"], cpu.stats["scores"], rtol=1e-9, atol=1e-15)
    cpu32 = fit(X, backend="cpu")  # float32 on both: the same certified order
    assert cpu32.causal_order == runs32[0].causal_order


def test_cuda_rederiving_at_every_step_gives_the_same_order(lingam_data):
    # drift_tol=0: every update counts as drift, so the last update_data block
    # re-standardises the rows and update_cov recomputes the covariance from
    # the data at every step (the CPU backend's stand-in oracle, test_cpu_backend).
    from paralingam.search import _cuda

    X = lingam_data(60, 500, "dense", 611)[0]
    kw = dict(threshold=True, gamma0=1e-4, c=2.0, collinear_tol=1e-10, explained_tol=1e-10)
    cpu = fit(X, backend="cpu").causal_order
    for dtype in ("float32", "float64"):
        always = _cuda.search(X, times={}, dtype=dtype, drift_tol=0.0, **kw)
        never = _cuda.search(X, times={}, dtype=dtype, drift_tol=1e-8, **kw)
        assert always[3] >= len(always[2]["remaining"]) - 1  # re-derived at (nearly) every step
        assert list(always[0]) == list(never[0]) == cpu


def test_cuda_problem_larger_than_memory_is_refused():
    from paralingam.search import _cuda

    p, n = 200_000, 64  # p^2 state alone is ~1 TB
    props = _cuda.device_properties()
    assert _cuda.bytes_needed(p, n, True) > props["total"]
    X = np.random.default_rng(0).standard_normal((n, p))
    with pytest.raises(_cuda.GPUMemoryError, match=r"needs [\d,]+ bytes .* bytes are free"):
        paralingam.fit(X, backend="cuda")
    # nothing was left behind: a normal fit still runs
    fit(np.random.default_rng(1).laplace(size=(300, 6)))


@pytest.mark.parametrize("all_pairs_work, kernel", [(None, "all_pairs_f32"), (0, "worker_f32")])
def test_cuda_launch_errors_name_the_kernel_and_leave_the_backend_usable(lingam_data,
                                                                         all_pairs_work, kernel):
    # The first round's launch fails (paralingam._testing): its kernel is
    # named, and the next fits run on the same context.
    from paralingam import _testing
    from paralingam.search import _cuda, _scheduler

    X = lingam_data(12, 400, "sparse", 831)[0]
    expected = fit(X).causal_order
    product_module = _cuda.module
    with pytest.raises(_scheduler.CudaError, match=f"^{kernel}: CUDA_ERROR_INVALID_VALUE"):
        _testing.search_with_fault(X, "launch", threshold=True, gamma0=1e-4, c=2.0,
                                   dtype="float32", collinear_tol=1e-10, explained_tol=1e-10,
                                   drift_tol=1e-8, times={}, all_pairs_work=all_pairs_work)
    assert _cuda.module is product_module  # the hook put the search's kernels back
    assert fit(X).causal_order == expected


@pytest.mark.parametrize("p, n, seed, several_rounds", [(60, 500, 832, False),
                                                       (500, 1024, 901, True)])
def test_cuda_profiled_search_gives_the_same_order_and_phase_times(lingam_data, p, n, seed,
                                                                   several_rounds):
    # profile=True records CUDA events between phases (tools/profile_launch.py).
    # The second case is profile_launch's sparse p=500 n=1024, whose
    # iterations take up to 4 threshold rounds on the H100.
    from paralingam.search import _cuda

    X = lingam_data(p, n, "sparse", seed)[0]
    kw = dict(threshold=True, gamma0=1e-4, c=2.0, dtype="float32", collinear_tol=1e-10,
              explained_tol=1e-10, drift_tol=1e-8)
    plain = _cuda.search(X, times={}, **kw)
    times = {}
    order, _, per_it, _ = _cuda.search(X, times=times, profile=True, **kw)
    assert list(order) == list(plain[0]) == fit(X, backend="cpu").causal_order
    assert all(times[f"gpu_{phase}"] > 0 for phase in ("prepare", "rounds", "update"))
    assert len(per_it["gpu_rounds_s"]) >= len(per_it["remaining"])
    assert all(t > 0 for t in per_it["gpu_rounds_s"][: len(per_it["remaining"])])
    if several_rounds:  # the case exercises multi-round iterations
        assert max(per_it["rounds"]) > 1


KERNEL_FAULT = """
import numpy as np, pytest, paralingam
from paralingam import _testing
from paralingam.search import _scheduler
X = np.random.default_rng(3).laplace(size=(400, 8))
expected = paralingam.fit(X, backend="cpu").causal_order
# found while the host waits for the round's status, named after the kernels in flight
match = (r"^CUDA error in one of the kernels \\[[^\\]]*\\b{}\\b[^\\]]*\\]: CUDA_ERROR_\\w+; "
         r"CUDA keeps such a fault .* until Python restarts").format(KERNEL)
with pytest.raises(_scheduler.CudaError, match=match):
    _testing.search_with_fault(X, "kernel", threshold=True, gamma0=1e-4, c=2.0, dtype="float32",
                               collinear_tol=1e-10, explained_tol=1e-10, drift_tol=1e-8, times={},
                               all_pairs_work=ALL_PAIRS_WORK)
with pytest.raises(RuntimeError, match="kernel fault earlier in this process"):
    paralingam.fit(X, backend="cuda")
res = paralingam.fit(X)  # auto: falls back to the CPU
assert res.stats["backend"] == "cpu" and res.causal_order == expected
print("ok")
"""


@pytest.mark.parametrize("all_pairs_work, kernel", [(None, "all_pairs_f32"), (0, "worker_f32")])
def test_cuda_kernel_fault_is_reported_and_auto_falls_back_to_cpu(all_pairs_work, kernel):
    # A fault is sticky for the whole process (CUDA's rule): run it in its own.
    code = f"ALL_PAIRS_WORK = {all_pairs_work!r}\nKERNEL = {kernel!r}\n" + KERNEL_FAULT
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")


def test_cuda_kernels_are_compiled_once_per_machine(tmp_path):
    # A second process finds the cubin in PyCUDA's disk cache: no new entry.
    code = ("import numpy as np, paralingam; "
            "paralingam.fit(np.random.default_rng(0).laplace(size=(200, 5)), backend='cuda')")
    env = dict(os.environ, PYCUDA_CACHE_DIR=str(tmp_path))
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    first = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    second = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert first and first == second


def test_cuda_repeated_fits_reuse_module_and_buffers(lingam_data):
    from paralingam.search import _cuda

    X = lingam_data(20, 512, "sparse", 841)[0]
    fit(X)
    ws = dict(_cuda._WORKSPACES)
    hits = _cuda._module.cache_info().hits
    fit(X)
    assert dict(_cuda._WORKSPACES) == ws  # same buffers
    assert _cuda._module.cache_info().hits == hits + 1  # same loaded module


def test_cuda_programmatic_and_plain_launches_give_the_same_order(lingam_data, monkeypatch):
    # Programmatic dependent launch (Hopper and later) overlaps a kernel's
    # start with its predecessor's end; plain launches must agree with it.
    import pycuda.driver as drv

    from paralingam.search import _cuda

    X = lingam_data(300, 1024, "sparse", 842)[0]
    kw = dict(threshold=True, gamma0=1e-4, c=2.0, dtype="float32", collinear_tol=1e-10,
              explained_tol=1e-10, drift_tol=1e-8)
    programmatic = _cuda.search(X, times={}, **kw)[0]
    assert _cuda.module().programmatic == (drv.Context.get_device().compute_capability()[0] >= 9)
    monkeypatch.setattr(_cuda, "PROGRAMMATIC_LAUNCH", False)
    assert not _cuda.module().programmatic
    plain = _cuda.search(X, times={}, **kw)[0]
    assert list(plain) == list(programmatic) == fit(X, backend="cpu").causal_order


# --------------------------------------------------------------------------
# Prior knowledge (the cases of tests/test_prior_knowledge.py)
# --------------------------------------------------------------------------

from test_prior_knowledge import (  # noqa: E402
    LINGAM_CASES, degenerate_priors, make_prior, prior_from_order, soft_prior, swapped, with_copies)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p, n, density, seed, kind, soft", LINGAM_CASES)
def test_cuda_prior_knowledge_equals_reference(lingam_data, p, n, density, seed, kind, soft, dtype,
                                               round_kind):
    X, B, order = lingam_data(p, n, density, seed)
    pk = make_prior(kind, B, order, np.random.default_rng(seed), soft)
    kwargs = dict(prior_knowledge=pk, apply_prior_knowledge_softly=soft)
    try:
        ref_order, ref_explained = reference.causal_order(X, **kwargs)
    except ValueError as exc:  # lingam's rules leave no candidate: the same error
        with pytest.raises(ValueError, match=str(exc)[:30]):
            paralingam.fit(X, backend="cuda", dtype=dtype, **kwargs)
        return
    res = fit(X, dtype=dtype, **kwargs)
    assert res.causal_order == ref_order
    assert res.stats["explained"] == ref_explained


@pytest.mark.parametrize("soft", [False, True], ids=["strong", "soft"])
def test_cuda_prior_knowledge_larger_case(lingam_data, soft):
    from paralingam.prior import PriorKnowledge

    p, seed = 50, 1131 + soft
    X, B, order = lingam_data(p, 500, "sparse", seed)
    rng = np.random.default_rng(seed)
    pk = soft_prior(B, order, rng) if soft else prior_from_order(swapped(order, rng, 5), rng, 0.02)
    kwargs = dict(prior_knowledge=pk, apply_prior_knowledge_softly=soft)
    ref_order, _ = reference.causal_order(X, **kwargs)
    runs = {(t, d): fit(X, threshold=t, dtype=d, **kwargs)
            for t in (True, False) for d in ("float32", "float64")}
    for res in runs.values():
        assert res.causal_order == ref_order
    # Threshold off: a pair of candidates is compared once (messaging), a
    # candidate with a non-candidate by the candidate alone.
    expected, alive, prior = [], list(range(p)), PriorKnowledge(pk, soft=soft)
    for root in ref_order[:-1]:
        c = int(prior.candidates(alive)[0].sum())
        expected.append(0 if c == 1 else c * (c - 1) // 2 + c * (len(alive) - c))
        alive.remove(root)
    assert runs[(False, "float64")].stats["compared"] == expected


@pytest.mark.parametrize("density, seed", [("sparse", 1141), ("dense", 1142)])
def test_cuda_planted_copies_with_prior_knowledge(lingam_data, density, seed, round_kind):
    p = 9
    X = with_copies(lingam_data(p, 500, density, seed)[0])
    for label, pk, soft in degenerate_priors(p):
        kwargs = dict(prior_knowledge=pk, apply_prior_knowledge_softly=soft)
        ref_order, ref_explained = reference.causal_order(X, **kwargs)
        # (4 warps per pair: the group path of collinear pairs of different statuses)
        for dtype, group in (("float32", None), ("float64", None), ("float32", 4), ("float64", 4)):
            res = fit(X, dtype=dtype, warps_per_pair=group, **kwargs)
            assert res.causal_order == ref_order, label
            assert res.stats["explained"] == ref_explained, label


# --------------------------------------------------------------------------
# The estimator on the GPU against lingam itself
# --------------------------------------------------------------------------

def test_cuda_estimator_and_bootstrap_equal_lingam(lingam_data):
    lingam = lingam_module("lingam", __name__)
    X = lingam_data(8, 500, "dense", 851)[0]
    theirs = lingam.DirectLiNGAM().fit(X)
    ours = paralingam.DirectLiNGAM(backend="cuda").fit(X)
    assert ours.causal_order_ == [int(v) for v in theirs.causal_order_]
    np.testing.assert_allclose(ours.adjacency_matrix_, theirs.adjacency_matrix_, rtol=0, atol=1e-8)
    np.random.seed(3)
    b_theirs = lingam.DirectLiNGAM().bootstrap(X, n_sampling=10)
    np.random.seed(3)
    b_ours = paralingam.DirectLiNGAM(backend="cuda").bootstrap(X, n_sampling=10)
    kw = {"min_causal_effect": 0.01, "split_by_causal_effect_sign": True}
    assert b_ours.get_causal_direction_counts(**kw) == b_theirs.get_causal_direction_counts(**kw)
    np.testing.assert_allclose(b_ours.adjacency_matrices_, b_theirs.adjacency_matrices_, atol=1e-8)


@pytest.mark.parametrize("n", [1001, 2085])
def test_band_pairs_take_their_correlation_from_the_rows(n):
    # Pairs within the verify band are recomputed by one warp each (warp_row_sums,
    # loads batched per lane) and, near collinearity, their residual fraction
    # measured (warp_residual_fraction, means from the same sums); n leaves a
    # partial batch. Exact copies are stored as +-1, every other pair as the
    # rows' correlation.
    from paralingam import _api
    from paralingam.search import _cuda

    rng = np.random.default_rng(n)
    base = rng.laplace(size=(n, 5))
    X = np.column_stack([base[:, 0], 3.0 * base[:, 0] + 1.0, -2.0 * base[:, 0],
                         base[:, 1], base[:, 1] + 1e-3 * base[:, 2], base[:, 3], base[:, 4]])
    order, explained, per_it, _ = _cuda.search(
        np.ascontiguousarray(X), times={}, threshold=True, gamma0=_api.default_gamma0(n),
        c=_api.DEFAULT_C, dtype="float32", collinear_tol=1e-10, explained_tol=1e-10,
        drift_tol=_api.DRIFT_TOL)
    corr = per_it["correlation"]
    ref = np.corrcoef(X.T)
    assert corr[0, 1] == 1.0 and corr[0, 2] == -1.0 and corr[1, 2] == -1.0
    assert 1e-7 < 1.0 - ref[3, 4] ** 2 < 1e-4  # a band pair, not collinear
    other = np.ones_like(ref, dtype=bool)
    other[np.ix_([0, 1, 2], [0, 1, 2])] = False
    np.testing.assert_allclose(corr[other], ref[other], rtol=0, atol=1e-12)
    cpu = paralingam.fit(X, backend="cpu", on_collinear="warn")
    assert order == cpu.causal_order
    assert explained == cpu.stats["explained"]
