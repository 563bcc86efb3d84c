"""One causal-order search on several GPUs (``fit(devices=...)``).

The GPU tests (marked ``gpu``) need two or more GPUs with peer access and
skip otherwise; each compares a search over every visible GPU with the
single-GPU search (``devices=None``), which tests/test_gpu.py checks against
the numpy reference: the same order, adjacency, explained variables and
root scores (index-ordered sums: the same bits), and replicas that stayed
bitwise equal. Most run with ``MULTI_SPREAD_WORK = 0``, so that every round
of these small problems really runs on every GPU. Run them with
``bash tools/multi_gpu_check.sh`` on a machine with several GPUs.

The CPU tests check the argument ``devices`` without a GPU.
"""

import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import paralingam
from paralingam.search import reference
from paralingam.datasets import make_lingam_data
from child_process import child_env
from test_cpu_backend import near_copy, planted_degenerate_data
from test_cuda_qr import needs_cupy, record_routes
from test_rank_deficient import rank_deficient
from test_runtime import INTERRUPT_BOUND


def _gpu_count():
    try:
        import pycuda.driver as drv

        drv.init()
        return drv.Device.count()
    except Exception:
        return 0


@pytest.fixture
def gpus():
    """The visible GPUs' ids (skips unless there are two or more)."""
    count = _gpu_count()
    if count < 2:
        pytest.skip(f"needs two or more GPUs; {count} visible")
    return list(range(count))


@pytest.fixture(params=["spread", "default"])
def spread(request, monkeypatch):
    """Every round on every GPU ("spread"), or only the rounds of large iterations."""
    from paralingam.search import _cuda

    if request.param == "spread":
        monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    return request.param


@pytest.fixture(params=["threshold", "all_pairs"])
def round_kind(request, monkeypatch):
    """Threshold rounds in every iteration, then all-pairs rounds (as tests/test_gpu.py)."""
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "ALL_PAIRS_WORK", 0.0 if request.param == "threshold" else float("inf"))
    return request.param


def fit(X, **kwargs):
    kwargs.setdefault("backend", "cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        return paralingam.fit(X, **kwargs)


def assert_same_as_one_gpu(X, **kwargs):
    """Fit on one GPU and on all of them; the results must agree exactly."""
    from paralingam.search import _cuda

    one = fit(X, **kwargs)
    many = fit(X, devices="all", **kwargs)
    assert many.stats["devices"] == list(range(_gpu_count()))
    assert one.stats["devices"] == [0]
    assert many.causal_order == one.causal_order
    assert many.stats["explained"] == one.stats["explained"]
    assert many.stats["scores"] == one.stats["scores"]
    assert np.array_equal(many.adjacency_matrix, one.adjacency_matrix)
    replicas = _cuda.replica_arrays(("X64", "cov"))
    assert len(replicas) == len(many.stats["devices"])
    for k, rep in enumerate(replicas[1:], 1):
        for name in ("X64", "cov"):
            assert np.array_equal(rep[name], replicas[0][name]), f"replica {k}: {name} differs"
    return one, many


CASES = [
    # (p, n, density, seed)
    (60, 2048, "sparse", 2401),
    (100, 1024, "dense", 2402),
    (250, 4096, "sparse", 2403),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p, n, density, seed", CASES)
def test_multi_gpu_order_equals_one_gpu(gpus, lingam_data, p, n, density, seed, dtype, spread,
                                        round_kind):
    X = lingam_data(p, n, density, seed)[0]
    one, many = assert_same_as_one_gpu(X, dtype=dtype)
    if round_kind == "all_pairs":
        assert all(many.stats["all_pairs"])


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["C", "F"])
def test_multi_gpu_of_scaled_float32_input_equals_one_gpu(gpus, layout, spread):
    # columns 1e-30..1e30 apart: the input is scaled by powers of two, on
    # each device by the upload's kernels (a C-ordered block transposed, a
    # Fortran-ordered one copied by variables), as on one GPU
    rng = np.random.default_rng(2431)
    X = make_lingam_data(40, 3000, density="sparse", random_state=2431)[0]
    X = (X * 10.0 ** rng.uniform(-30, 30, 40)).astype(np.float32)
    X = np.asfortranarray(X) if layout == "F" else np.ascontiguousarray(X)
    one, many = assert_same_as_one_gpu(X)
    widened = fit(X.astype(np.float64), devices="all")
    assert widened.causal_order == many.causal_order


@pytest.mark.gpu
def test_multi_gpu_small_case_equals_reference(gpus, lingam_data, reference_on, monkeypatch):
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    monkeypatch.setattr(_cuda, "ALL_PAIRS_WORK", 0.0)
    X = lingam_data(30, 1000, "dense", 104)[0]
    res = fit(X, devices="all")
    ref_order, ref_explained = reference_on(30, 1000, "dense", 104)
    assert res.causal_order == ref_order
    assert res.stats["explained"] == ref_explained


@pytest.mark.gpu
def test_multi_gpu_large_iterations_spread_and_small_ones_not(gpus):
    # p=400, n=8192: the first iterations hold more than MULTI_SPREAD_WORK
    # sample pairs (their rounds run on every GPU), the last ones less
    X = make_lingam_data(400, 8192, density="sparse", random_state=2411)[0]
    assert_same_as_one_gpu(X)


@pytest.mark.gpu
@pytest.mark.parametrize("density, seed", [("sparse", 2421), ("dense", 2422)])
def test_multi_gpu_planted_dependencies(gpus, lingam_data, density, seed, round_kind, monkeypatch):
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    X, n_planted = planted_degenerate_data(lingam_data(12, 500, density, seed)[0])
    for dtype, group in (("float32", None), ("float64", None), ("float32", 2)):
        one, _ = assert_same_as_one_gpu(X, dtype=dtype, tuning={"warps_per_pair": group})
        assert len(one.stats["explained"]) == n_planted  # explained variables were found
    ref_order, ref_explained = reference.causal_order(X)
    assert one.causal_order == ref_order and one.stats["explained"] == ref_explained


@pytest.mark.gpu
@pytest.mark.parametrize("unexplained", [1e-6, 1e-14])
def test_multi_gpu_near_collinear_columns(gpus, lingam_data, unexplained, round_kind, monkeypatch):
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    X = near_copy(lingam_data(10, 500, "dense", 522)[0], 4, unexplained)
    for dtype, group in (("float32", None), ("float64", None), ("float32", 4)):
        assert_same_as_one_gpu(X, dtype=dtype, tuning={"warps_per_pair": group})


@pytest.mark.gpu
def test_multi_gpu_long_rows_redecide_in_chunks(gpus, monkeypatch):
    # Long rows: each re-decided pair split among several blocks
    # (_scheduler.redo_chunks, the same split on any number of GPUs), the
    # devices' chunk sums added by device 0's select64 in chunk order: the
    # same results as one GPU, bit for bit
    from paralingam import _constants
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    X = make_lingam_data(40, 3 * _constants.REDO_CHUNK_MIN + 77, density="sparse",
                         random_state=43)[0]
    one, many = assert_same_as_one_gpu(X)
    assert any(chunks > 1 for chunks in many.stats["float64_chunks"])
    assert many.stats["float64_chunks"] == one.stats["float64_chunks"]
    assert _cuda.LAST_MULTI_RUN["redo_spread"] == sum(many.stats["float64_redo"]) > 0
    assert sum(many.stats["float64_pairs"]) > 0


@pytest.mark.gpu
def test_multi_gpu_redecided_in_double(gpus, monkeypatch):
    # tests/test_gpu.py's case with float64 re-decisions (near ties in float)
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    X = make_lingam_data(100, 1024, density="sparse", random_state=100)[0]
    one, many = assert_same_as_one_gpu(X)
    assert all(many.stats["all_pairs"])
    assert any(many.stats["float64_redo"])  # all-pairs rounds: the same re-decisions
    assert many.stats["float64_redo"] == one.stats["float64_redo"]
    # the devices' shares of the double comparisons add up to one GPU's
    assert many.stats["float64_pairs"] == one.stats["float64_pairs"]
    assert sum(many.stats["float64_pairs"]) > 0
    # every iteration was spread, so every re-decision was shared among the GPUs
    assert _cuda.LAST_MULTI_RUN["redo_spread"] == sum(many.stats["float64_redo"])
    monkeypatch.setattr(_cuda, "ALL_PAIRS_WORK", 0.0)  # threshold rounds
    _, threshold_rounds = assert_same_as_one_gpu(X)
    assert threshold_rounds.causal_order == one.causal_order
    assert _cuda.LAST_MULTI_RUN["redo_spread"] == sum(threshold_rounds.stats["float64_redo"])


@pytest.mark.gpu
@pytest.mark.parametrize("copy_kernel", [True, False], ids=["copy_kernel", "copy_engine"])
@pytest.mark.parametrize("programmatic", [True, False], ids=["programmatic", "plain"])
def test_multi_gpu_replica_copies_and_launch_kinds(gpus, lingam_data, copy_kernel, programmatic,
                                                   round_kind, monkeypatch):
    # Device 0's control block, remaining set and workers reach the replicas
    # by its copy_to_peers kernel or by the copy engine, and the kernels are
    # launched programmatically or not: every way, the same results and
    # replicas (float64 re-decisions included, every iteration spread)
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "MULTI_COPY_KERNEL", copy_kernel)
    monkeypatch.setattr(_cuda, "MULTI_PROGRAMMATIC_LAUNCH", programmatic)
    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    X = make_lingam_data(100, 1024, density="sparse", random_state=100)[0]
    _, many = assert_same_as_one_gpu(X)
    if round_kind == "all_pairs":  # (test_multi_gpu_redecided_in_double's case)
        assert any(many.stats["float64_redo"])
    assert _cuda.LAST_MULTI_RUN["redo_spread"] == sum(many.stats["float64_redo"])
    assert_same_as_one_gpu(lingam_data(250, 4096, "sparse", 2403)[0])


@pytest.mark.gpu
@pytest.mark.parametrize("select_blocks", [1, 3, None], ids=["one_block", "three", "default"])
def test_multi_gpu_select_root_blocks_give_the_same_results(gpus, lingam_data, select_blocks,
                                                            monkeypatch):
    # In threshold rounds select_root's blocks first sum the rows of the
    # workers the round finished (a warp each), then the last selects: any
    # number of blocks, the same scores and order (every iteration spread;
    # all-pairs rounds finalize in their engines). (Rounds and re-decisions
    # may differ from one GPU's: how far past gamma a round goes is timing.)
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "MULTI_SELECT_BLOCKS", select_blocks)
    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    monkeypatch.setattr(_cuda, "ALL_PAIRS_WORK", 0.0)
    for X in (lingam_data(250, 4096, "sparse", 2403)[0],
              make_lingam_data(100, 1024, density="sparse", random_state=100)[0]):
        _, many = assert_same_as_one_gpu(X)
        assert not any(many.stats["all_pairs"])


@pytest.mark.gpu
def test_multi_gpu_profiled_search_gives_the_same_order_and_each_devices_phases(gpus, round_kind,
                                                                               monkeypatch):
    # profile=True over several GPUs: CUDA events on every device's stream;
    # each device's phases cover its part of the search, and the order is
    # the one-GPU one (float64 re-decisions shared, every iteration spread)
    from paralingam.search import _cuda, _scheduler

    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    X = make_lingam_data(100, 1024, density="sparse", random_state=100)[0]
    kw = dict(threshold=True, gamma0=1e-4, c=2.0, dtype="float32", collinear_tol=1e-10,
              explained_tol=1e-10, drift_tol=1e-8)
    one = _cuda.search(X, times={}, **kw)
    times = {}
    order, _, per_it, _ = _cuda.search(X, times=times, profile=True, devices="all", **kw)
    assert list(order) == list(one[0])
    by_device = per_it["gpu_time_by_device"]
    assert len(by_device) == len(gpus)
    for d, phases in enumerate(by_device):
        assert set(phases) == set(_scheduler.MULTI_PHASES)
        assert all(t >= 0 for t in phases.values())
        # (the other devices' setup, their "prepare", is absent in all-pairs
        # rounds, and an all-pairs round has no more blocks than its pairs
        # need, filling device 0's grid first: on more than two GPUs the last
        # ones may get none at p=100)
        busy = ("update",) + (("prepare", "select", "copy") if d == 0 else ("wait",))
        if d == 0 or round_kind == "threshold":
            busy += ("rounds",)
        assert all(phases[name] > 0 for name in busy), (d, phases)
        # the events span the search on each device, and no more
        assert 0.3 * times["search"] < sum(phases.values()) <= times["search"], (d, phases)
    assert by_device[1]["rounds"] > 0  # (the rounds were spread)
    assert by_device[0]["redo"] > 0 if any(per_it["float64_redo"]) else True
    assert {f"gpu_{name}": t for name, t in by_device[0].items()} == {
        k: v for k, v in times.items() if k.startswith("gpu_")}
    # device 0's worker kernels per pass of the loop (an iteration, and at
    # most one last pass that finds the order complete)
    rounds_s = per_it["gpu_rounds_s"]
    assert len(per_it["remaining"]) - 1 <= len(rounds_s) <= len(per_it["remaining"]) + 1
    assert all(t >= 0 for t in rounds_s) and sum(rounds_s) > 0
    assert sum(rounds_s) == pytest.approx(by_device[0]["rounds"], rel=1e-6)
    # unprofiled again: the same order, and nothing is recorded
    again = _cuda.search(X, times={}, devices="all", **kw)
    assert list(again[0]) == list(order) and "gpu_time_by_device" not in again[2]


@pytest.mark.gpu
def test_multi_gpu_long_rows_redecide_with_their_updates_double_entropies(gpus, spread):
    # Rows of HX64_IN_UPDATE_MIN_N samples and more: every device's
    # update_data_h64 writes its replica's double entropies (hx64_var), which
    # the spread re-decisions read on each device. Independent uniform
    # variables: near ties in float, re-decided with several candidates.
    from paralingam import _constants
    from paralingam.search import _cuda

    X = np.random.default_rng(12).uniform(-1.0, 1.0, (_constants.HX64_IN_UPDATE_MIN_N + 999, 24))
    one, many = assert_same_as_one_gpu(X)
    assert sum(many.stats["float64_redo"]) >= 3
    assert many.stats["float64_candidates"] == one.stats["float64_candidates"]
    if spread == "spread":
        assert _cuda.LAST_MULTI_RUN["redo_spread"] == sum(many.stats["float64_redo"])
    p = X.shape[1]
    replicas = _cuda.replica_arrays(("hx64_var",))  # (entry p is padding, never written)
    for k, rep in enumerate(replicas[1:], 1):
        assert np.array_equal(rep["hx64_var"][:p], replicas[0]["hx64_var"][:p]), \
            f"replica {k}: hx64_var differs"


@pytest.mark.gpu
def test_multi_gpu_redecisions_with_several_candidates(gpus, round_kind, monkeypatch):
    # Independent uniform variables: every one is a root, their scores are
    # near ties in float, and re-decisions have several candidates, whose
    # partners are split between the GPUs (pairs64 on each, select64 on the
    # first). The scores and order must be one GPU's, bit for bit.
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    most = 0
    for seed in (7, 8, 9):
        X = np.random.default_rng(seed).uniform(-1.0, 1.0, (2048, 40))
        one, many = assert_same_as_one_gpu(X)
        assert many.stats["float64_candidates"] == one.stats["float64_candidates"]
        assert _cuda.LAST_MULTI_RUN["redo_spread"] == sum(many.stats["float64_redo"])
        most = max(most, max(many.stats["float64_candidates"]))
    assert most >= 3  # (the CPU's float engine finds up to 4 on the first seed)

    # spread bound above every iteration: the re-decisions stay on the first GPU
    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", float("inf"))
    one, many = assert_same_as_one_gpu(X)
    assert _cuda.LAST_MULTI_RUN["redo_spread"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("soft", [False, True], ids=["strong", "soft"])
def test_multi_gpu_prior_knowledge(gpus, lingam_data, soft, round_kind, monkeypatch):
    from paralingam.search import _cuda
    from test_prior_knowledge import prior_from_order, soft_prior, swapped

    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    p, seed = 50, 1131 + soft
    X, B, order = lingam_data(p, 500, "sparse", seed)
    rng = np.random.default_rng(seed)
    pk = soft_prior(B, order, rng) if soft else prior_from_order(swapped(order, rng, 5), rng, 0.02)
    for dtype in ("float32", "float64"):
        one, _ = assert_same_as_one_gpu(X, dtype=dtype, prior_knowledge=pk,
                                        apply_prior_knowledge_softly=soft)
    ref_order, _ = reference.causal_order(X, prior_knowledge=pk, apply_prior_knowledge_softly=soft)
    assert one.causal_order == ref_order


@pytest.mark.gpu
def test_multi_gpu_prior_knowledge_with_copies(gpus, lingam_data, monkeypatch):
    from paralingam.search import _cuda
    from test_prior_knowledge import degenerate_priors, with_copies

    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    X = with_copies(lingam_data(9, 500, "dense", 1142)[0])
    for label, pk, soft in degenerate_priors(9):
        assert_same_as_one_gpu(X, prior_knowledge=pk, apply_prior_knowledge_softly=soft)


@pytest.mark.gpu
def test_multi_gpu_stop_on_dependence_raises_the_same_error(gpus, lingam_data, monkeypatch):
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    X, _ = planted_degenerate_data(lingam_data(12, 500, "sparse", 2431)[0])
    errors = []
    for devices in (None, "all"):
        with pytest.raises(paralingam.LinearDependenceError) as info:
            fit(X, on_collinear="error", devices=devices)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


@pytest.mark.gpu
def test_multi_gpu_device_lists(gpus, lingam_data):
    X = lingam_data(40, 2048, "sparse", 107)[0]
    base = fit(X)
    first = fit(X, devices=[0])  # one GPU: the single-GPU search itself
    assert first.stats["devices"] == [0] and first.causal_order == base.causal_order
    two = fit(X, devices=[1, 0])  # GPU 1 holds the state
    assert two.stats["devices"] == [1, 0] and two.causal_order == base.causal_order
    with pytest.raises(ValueError, match=f"names GPU {len(gpus)}"):
        fit(X, devices=[0, len(gpus)])
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES=1"):
        fit(X, devices=[1])


@pytest.mark.gpu
def test_multi_gpu_estimator_equals_one_gpu(gpus, lingam_data):
    X = lingam_data(30, 1000, "sparse", 103)[0]
    one = paralingam.DirectLiNGAM(backend="cuda").fit(X)
    many = paralingam.DirectLiNGAM(backend="cuda", devices="all").fit(X)
    assert many.causal_order_ == one.causal_order_
    assert np.array_equal(many.adjacency_matrix_, one.adjacency_matrix_)
    assert many.fit_stats_["devices"] == gpus


@pytest.mark.gpu
def test_multi_gpu_problem_larger_than_memory_is_refused(gpus):
    X = np.random.default_rng(0).standard_normal((40, 120_000))  # 115 GB of correlations
    with pytest.raises(paralingam.InsufficientMemoryError, match="GPU memory on GPU"):
        paralingam.fit(X, backend="cuda", devices="all")


# An interrupted search over every GPU (SIGINT a second into a long one), then
# the same process's next searches give the orders of before.
CHILD = textwrap.dedent('''
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np
    import paralingam
    from paralingam.datasets import make_lingam_data

    big = np.ascontiguousarray(make_lingam_data(1500, 16384, density="sparse", random_state=10)[0])
    small = np.ascontiguousarray(make_lingam_data(40, 2048, density="sparse", random_state=7)[0])
    opts = dict(backend="cuda", dtype="float64")
    before = list(paralingam.fit(small, **opts).causal_order)
    warm = list(paralingam.fit(small, devices="all", **opts).causal_order)  # (compiled now)
    print("ready", flush=True)
    try:
        paralingam.fit(big, threshold=False, devices="all", **opts)
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    ok = (warm == before and list(paralingam.fit(small, devices="all", **opts).causal_order) == before
          and list(paralingam.fit(small, **opts).causal_order) == before)
    print("after", "ok" if ok else "wrong", flush=True)
''')


@pytest.mark.gpu
@pytest.mark.skipif(sys.platform != "linux", reason="SIGINT semantics of Linux")
def test_multi_gpu_search_stops_on_ctrl_c_and_the_next_fit_is_right(gpus, tmp_path):
    env = child_env()  # the paralingam this test imports
    # cwd: "python -c" puts the working folder first on sys.path, and a source
    # checkout there has no compiled extensions where the package is installed
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()[-3000:]
        time.sleep(1.0)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = proc.stdout.readline().strip()
        assert line == "interrupted", f"{line!r}: {proc.stderr.read()[-3000:]}"
        assert time.monotonic() - t0 < INTERRUPT_BOUND
        assert proc.stdout.readline().strip() == "after ok"
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- without a GPU


@pytest.mark.parametrize("devices, message", [
    ("first", "None, 'all' or a list of GPU ids"),
    (1, r"the number 1 \(write devices=\[1\]\)"),
    ([], "at least one GPU"),
    ([0, 1, 0], "GPU 0 more than once"),
    ([0, -1], "non-negative integer GPU ids; got -1"),
    ([0, 1.0], "non-negative integer GPU ids; got 1.0"),
    ([True], "non-negative integer GPU ids; got True"),
    (object(), "None, 'all' or a list of GPU ids"),
])
def test_bad_devices_are_refused_naming_the_problem(devices, message):
    X = make_lingam_data(5, 200, random_state=0)[0]
    with pytest.raises(ValueError, match=message):
        paralingam.fit(X, devices=devices)


@pytest.mark.parametrize("devices", [[0], [0, 1], "all"])
def test_devices_with_the_cpu_backend_are_refused(devices):
    X = make_lingam_data(5, 200, random_state=0)[0]
    with pytest.raises(ValueError, match="selects GPUs, but backend='cpu'"):
        paralingam.fit(X, backend="cpu", devices=devices)
    with pytest.raises(ValueError, match="selects GPUs, but backend='cpu'"):
        paralingam.DirectLiNGAM(backend="cpu", devices=devices).fit(X)


def test_devices_is_an_estimator_parameter_or_a_fit_option_once():
    X = make_lingam_data(5, 200, random_state=0)[0]
    for model in (paralingam.DirectLiNGAM(backend="cpu", fit_options={"devices": [0, 1]}),
                  paralingam.VARLiNGAM(backend="cpu", fit_options={"devices": [0, 1]})):
        with pytest.raises(ValueError, match="selects GPUs, but backend='cpu'"):
            model.fit(X)  # (it reached paralingam.fit)
    both = paralingam.DirectLiNGAM(devices=[0, 1], fit_options={"devices": "all"})
    with pytest.raises(ValueError, match="devices is set twice"):
        both.fit(X)
    assert paralingam.DirectLiNGAM(devices=[0, 1]).get_params()["devices"] == [0, 1]


def test_devices_none_on_the_cpu_reports_no_devices():
    X = make_lingam_data(5, 200, random_state=0)[0]
    assert paralingam.fit(X, backend="cpu").stats["devices"] is None


def test_devices_without_a_usable_gpu_name_the_reason(monkeypatch):
    from paralingam.search import _backends

    monkeypatch.setattr(_backends, "cuda_unavailable_reason", lambda: "no CUDA device found")
    X = make_lingam_data(5, 200, random_state=0)[0]
    with pytest.raises(RuntimeError, match=r"devices=\[0, 1\] needs the CUDA backend.*no CUDA device"):
        paralingam.fit(X, devices=[0, 1])
    assert paralingam.fit(X).stats["backend"] == "cpu"  # (auto without devices: the CPU)


@pytest.mark.parametrize("support, message", [
    ({(1, 0): (False, False), (0, 1): (True, True)}, "GPU 1 has no peer access to GPU 0's memory"),
    ({(1, 0): (True, False), (0, 1): (True, True)}, "GPU 1 has no native atomics on GPU 0's memory"),
    ({(1, 0): (True, True), (0, 1): (False, False)}, "GPU 0 has no peer access to GPU 1's memory"),
])
def test_gpus_without_peer_access_either_way_are_refused_naming_them(support, message,
                                                                     monkeypatch):
    # The other GPUs reach device 0's state, and device 0 stores each
    # iteration's state into theirs (copy_to_peers): both ways are checked
    # before any peer access is enabled (the driver calls are stand-ins)
    from types import SimpleNamespace

    from paralingam.search import _cuda, _scheduler

    enabled = []
    monkeypatch.setattr(_cuda, "_device_context", lambda d: SimpleNamespace(handle=100 + d))
    monkeypatch.setattr(_scheduler, "peer_support", lambda a, b: support[(a, b)])
    monkeypatch.setattr(_scheduler, "enable_peer_access", lambda *pair: enabled.append(pair))
    with pytest.raises(RuntimeError, match=rf"devices=\[0, 1\]: {message}.*devices=None"):
        _cuda._peer_setup([0, 1])
    assert enabled == []
    support = {pair: (True, True) for pair in support}
    assert [c.handle for c in _cuda._peer_setup([0, 1])] == [100, 101]
    assert enabled == [(101, 100), (100, 101)]  # (1 -> 0, then 0 -> 1)


@pytest.mark.gpu
def test_multi_gpu_search_reports_progress_and_keeps_its_result(gpus, monkeypatch, capsys):
    from paralingam.search import _cuda
    from paralingam._api import DEFAULT_C, DRIFT_TOL, default_gamma0
    from paralingam.search.policy import COLLINEAR_TOL, EXPLAINED_TOL

    monkeypatch.setitem(sys.modules, "tqdm", None)  # the plain line, on standard error
    X = np.asarray(make_lingam_data(300, 2048, density="sparse", random_state=5)[0])
    one = paralingam.fit(X, backend="cuda")
    shown = paralingam.fit(X, backend="cuda", devices=gpus, progress=True)
    assert "search: 300/300 variables (100%)" in capsys.readouterr().err
    assert list(shown.causal_order) == list(one.causal_order)
    calls = []
    order, *_ = _cuda.search(X, threshold=True, gamma0=default_gamma0(2048), c=DEFAULT_C,
                             dtype="float32", collinear_tol=COLLINEAR_TOL,
                             explained_tol=EXPLAINED_TOL, drift_tol=DRIFT_TOL, times={},
                             devices=gpus, progress=calls.append)
    # the scheduler's callback: increasing counts of ordered variables
    assert calls and calls == sorted(calls) and 0 <= calls[0] and calls[-1] <= 300
    assert order == list(one.causal_order)


@pytest.mark.gpu
@needs_cupy
@pytest.mark.parametrize("route", ["small rank", "whole QR"])
def test_multi_gpu_rank_deficient_adjacency_takes_device_0s_copy(gpus, monkeypatch, route):
    # rank-deficient data: the adjacency step reads device 0's copy of the
    # data, as after a one-GPU search, so both give the same bits: the least
    # squares of small rank wholly on the GPU, or (that route off) the
    # data's whole QR
    from paralingam.adjacency import _cuda_low_rank
    from paralingam.search import _cuda

    monkeypatch.setattr(_cuda, "MULTI_SPREAD_WORK", 0.0)
    X = rank_deficient(120, 2048, 60, 2431)
    routes = record_routes(monkeypatch)
    taken, real = [], _cuda_low_rank.ols_of_copy

    def spy(*args):
        B = real(*args)
        taken.append(B is not None)
        return B

    monkeypatch.setattr(_cuda_low_rank, "ols_of_copy", spy)
    if route == "whole QR":
        monkeypatch.setattr(_cuda_low_rank, "ENABLED", False)
    one, many = assert_same_as_one_gpu(X, on_collinear="ignore")
    if route == "whole QR":
        assert routes == ["copy", "copy"] and taken == [False, False]
    else:
        assert routes == [] and taken == [True, True]
    assert len(many.stats["explained"]) == 60


@pytest.mark.gpu
@pytest.mark.parametrize("first", [0, 1])
def test_multi_gpu_noise_of_small_data_comes_from_device_0_with_the_hosts_bits(gpus, lingam_data,
                                                                             monkeypatch, first):
    # data below the noise thread's threshold: the search's first device
    # sums the noise from its rows (in its own context, also where it is not
    # GPU 0), with the host's bits, and the search agrees with one GPU
    from paralingam.search import _cuda

    X = np.ascontiguousarray(lingam_data(40, 3000, "sparse", 2441)[0])
    assert X.nbytes < _cuda.UPLOAD_NOISE_THREAD_MIN_BYTES
    calls, real = [], _cuda._device_sums
    monkeypatch.setattr(_cuda, "_device_sums", lambda *a: calls.append(1) or real(*a))
    devices = [first, 1 - first]
    kw = dict(threshold=True, gamma0=1e-4, c=2.0, dtype="float32", collinear_tol=1e-10,
              explained_tol=1e-10, drift_tol=1e-8)
    order, _, per_it, _ = _cuda.search(X, times={}, devices=devices, **kw)
    assert calls == [1]
    assert per_it["column_std"].tobytes() == X.std(axis=0).tobytes()
    assert list(order) == fit(X).causal_order


@pytest.mark.gpu
@needs_cupy
@pytest.mark.parametrize("small_rank_route", [True, False])
def test_multi_gpu_from_another_first_gpu_uploads_for_the_adjacency_step(gpus, monkeypatch,
                                                                         small_rank_route):
    # devices=[1, 0]: device 0 of the search is GPU 1, whose memory the
    # adjacency step's QR (on GPU 0) should not read: no copy is kept, the
    # step uploads the data for the whole QR, and its edges agree to
    # rounding with one GPU's (which read its copy: on the small-rank route,
    # or on the whole QR with that route off)
    from paralingam.adjacency import _cuda_low_rank

    monkeypatch.setattr(_cuda_low_rank, "ENABLED", small_rank_route)
    X = rank_deficient(120, 2048, 60, 2432)
    routes = record_routes(monkeypatch)
    one = fit(X, on_collinear="ignore")
    other_first = fit(X, devices=[1, 0], on_collinear="ignore")
    assert routes == (["upload"] if small_rank_route else ["copy", "upload"])
    assert other_first.stats["devices"] == [1, 0]
    assert other_first.causal_order == one.causal_order
    scale = np.abs(one.adjacency_matrix).max()
    np.testing.assert_allclose(other_first.adjacency_matrix, one.adjacency_matrix, rtol=0,
                               atol=1e-9 * scale)
