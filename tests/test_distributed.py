"""The bootstrap on a Dask cluster equals the serial bootstrap.

One CPU ``LocalCluster`` (2 worker processes of 1 thread each) is shared by
the module; the GPU test starts dask-cuda's ``LocalCUDACluster``.
"""

import concurrent.futures
import os
import re
import signal
import sys
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import cloudpickle  # noqa: E402  (a dependency of distributed)

import paralingam  # noqa: E402
from paralingam import _distributed  # noqa: E402

# Workers unpickle this module's functions and plugin by value: they need not
# import the test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

# Any wait on the cluster ends within this many seconds or the test fails.
DEADLINE_S = 120


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    c = distributed.Client(cluster)
    try:
        c.wait_for_workers(2, timeout=DEADLINE_S)
        # The workers import the paralingam under test, not another install.
        assert set(c.run(lambda: paralingam.__file__).values()) == {paralingam.__file__}
        yield c
    finally:
        c.close()
        cluster.close()


def assert_same(ours, ref):
    np.testing.assert_array_equal(ours.adjacency_matrices_, ref.adjacency_matrices_)
    np.testing.assert_array_equal(ours.total_effects_, ref.total_effects_)
    assert len(ours.resampled_indices_) == len(ref.resampled_indices_)
    for a, b in zip(ours.resampled_indices_, ref.resampled_indices_):
        np.testing.assert_array_equal(a, b)
    assert set(ours.timings_) == set(ref.timings_)


def our_keys(dask_scheduler, prefix):
    return [k for k in dask_scheduler.tasks if str(k).startswith(prefix)]


def wait_until_no_tasks(client, prefix):
    end = time.monotonic() + DEADLINE_S
    while client.run_on_scheduler(our_keys, prefix=prefix):
        assert time.monotonic() < end, "the cluster kept tasks of a finished run"
        time.sleep(0.05)


# ----------------------------------------------------------------------
# DirectLiNGAM.bootstrap(client=...)
# ----------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    {"random_state": 5},
    {"random_state": 6, "adjacency": "ols"},
    {"random_state": 7, "coef_threshold": 0.1, "fit_options": {"dtype": "float64"}},
])
def test_bootstrap_equals_serial(client, lingam_data, kwargs):
    X = lingam_data(7, 400, "dense", 901)[0]
    model = paralingam.DirectLiNGAM(backend="cpu", **kwargs)
    ref = model.bootstrap(X, 23)
    ours = model.bootstrap(X, 23, client=client)
    assert_same(ours, ref)
    # the resamples differ from each other: the comparison is not trivial
    assert len({B.tobytes() for B in ours.adjacency_matrices_}) > 1
    wait_until_no_tasks(client, "paralingam-")


def test_bootstrap_multithreaded_fits_equal_serial(client, lingam_data):
    """Fits of 2 OpenMP threads on the workers, of the default threads serially."""
    X = lingam_data(10, 1500, "sparse", 909)[0]
    assert X.size >= paralingam._api.SMALL_SEARCH  # the threaded search runs
    ref = paralingam.DirectLiNGAM(random_state=13).bootstrap(X, 5)
    model = paralingam.DirectLiNGAM(random_state=13, fit_options={"n_threads": 2})
    assert_same(model.bootstrap(X, 5, client=client), ref)


def test_task_threads_share_the_worker(monkeypatch):
    class Worker:
        class state:
            nthreads = 8

    assert _distributed.task_threads(4) == 1  # not in a worker
    monkeypatch.setattr(distributed, "get_worker", lambda: Worker)
    assert [_distributed.task_threads(c) for c in (1, 2, 3, 8, 20)] == [8, 4, 2, 1, 1]


def test_bootstrap_with_prior_knowledge_and_outliers_equals_serial(client, lingam_data):
    X, _, order = lingam_data(6, 300, "sparse", 902)
    X = X.copy()
    X[::37, 2] *= 40.0  # outliers
    pk = -np.ones((6, 6))
    pk[order[-1], order[0]] = 1
    pk[order[0], order[3]] = 0
    model = paralingam.DirectLiNGAM(random_state=8, prior_knowledge=pk)
    assert_same(model.bootstrap(X, 11, client=client), model.bootstrap(X, 11))


def test_bootstrap_global_random_state_equals_serial(client, lingam_data):
    """random_state=None draws from numpy's global state, as many draws as serially."""
    X = lingam_data(5, 200, "dense", 903)[0]
    model = paralingam.DirectLiNGAM()
    np.random.seed(12)
    ref = model.bootstrap(X, 9)
    after_ref = np.random.random()
    np.random.seed(12)
    ours = model.bootstrap(X, 9, client=client)
    assert np.random.random() == after_ref
    assert_same(ours, ref)


def test_bootstrap_dataframe_with_degenerate_column(client, lingam_data):
    """A column that is an exact copy of another: warnings and fits as serially."""
    pd = pytest.importorskip("pandas")
    X = lingam_data(5, 250, "dense", 904)[0].copy()
    X[:, 4] = 2.0 * X[:, 1]
    df = pd.DataFrame(X, columns=list("abcde"))
    model = paralingam.DirectLiNGAM(random_state=9, adjacency="ols")
    with pytest.warns(Warning):
        ref = model.bootstrap(df, 6)
    # the warnings are the workers'; the result must still be the serial one
    assert_same(model.bootstrap(df, 6, client=client), ref)


def test_bootstrap_constant_resample_raises_serial_error(client):
    """The first resample with a constant column is named, as serially."""
    rng = np.random.default_rng(905)
    X = rng.laplace(size=(30, 4))
    X[:, 3] = 0.0
    X[7, 3] = 1.0  # one row in 30: most resamples miss it sooner or later
    model = paralingam.DirectLiNGAM(random_state=10)
    with pytest.raises(ValueError, match="has constant columns") as serial:
        model.bootstrap(X, 40)
    with pytest.raises(ValueError, match=re.escape(str(serial.value))):
        model.bootstrap(X, 40, client=client)
    wait_until_no_tasks(client, "paralingam-")


def test_bootstrap_refuses_a_non_client(lingam_data):
    X = lingam_data(4, 100, "dense", 906)[0]
    with pytest.raises(ValueError, match="client must be a distributed.Client"):
        paralingam.DirectLiNGAM().bootstrap(X, 2, client="tcp://127.0.0.1:8786")


def test_package_import_does_not_import_distributed():
    import subprocess

    code = ("import sys, paralingam, paralingam.estimator, paralingam._distributed; "
            "assert 'distributed' not in sys.modules and 'dask' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd())


# ----------------------------------------------------------------------
# map_batches
# ----------------------------------------------------------------------

def _square(shared, batch, n_threads=1):
    return [shared["offset"] + v * v for v in batch], n_threads


@pytest.mark.parametrize("batch_size", [1, 3, 50])
def test_map_batches_keeps_batch_order(client, batch_size):
    batches = _distributed.split(17, client, batch_size)
    assert [i for r in batches for i in r] == list(range(17))
    out = _distributed.map_batches(client, _square, batches, shared={"offset": 100})
    assert [v for values, _ in out for v in values] == [100 + i * i for i in range(17)]
    # one thread per worker: one thread per task
    assert {threads for _, threads in out} == {1}


def _fail_on(shared, batch, n_threads=1):
    marker = os.path.join(shared, f"ran-{batch}-{os.getpid()}-{time.monotonic_ns()}")
    open(marker, "w").close()
    if batch in (3, 5):
        raise ValueError(f"batch {batch} is bad")
    return batch


def test_map_batches_raises_first_failure_without_retry(client, tmp_path):
    with pytest.raises(ValueError, match="batch 3 is bad"):
        _distributed.map_batches(client, _fail_on, list(range(8)), shared=str(tmp_path),
                                 retries=3)
    wait_until_no_tasks(client, "paralingam-batch")
    runs = [name.split("-")[1] for name in os.listdir(tmp_path)]
    assert runs.count("3") == 1  # a data error is not retried


def _flaky(shared, batch, n_threads=1):
    marker = os.path.join(shared, f"tried-{batch}")
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("transient")
    return batch * 10


def test_map_batches_retries_other_errors(client, tmp_path):
    out = _distributed.map_batches(client, _flaky, list(range(5)), shared=str(tmp_path),
                                   retries=1)
    assert out == [0, 10, 20, 30, 40]
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    with pytest.raises(RuntimeError, match="transient"):
        _distributed.map_batches(client, _flaky, [5], shared=str(fresh), retries=0)


def _slow(shared, batch, n_threads=1):
    open(os.path.join(shared, f"started-{batch}"), "w").close()
    time.sleep(0.5)
    return batch


def test_map_batches_interrupt_cancels_tasks(client, tmp_path):
    """Ctrl-C (KeyboardInterrupt) while waiting cancels the tasks not yet run."""
    def interrupt(i, value):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _distributed.map_batches(client, _slow, list(range(12)), shared=str(tmp_path),
                                 on_result=interrupt, name="paralingam-slow")
    wait_until_no_tasks(client, "paralingam-slow")
    time.sleep(1.5)  # uncancelled tasks would go on starting (2 per 0.5 s)
    started = len(os.listdir(tmp_path))
    assert 1 <= started <= 5, started


def test_map_batches_empty_and_bad_batch_size(client):
    assert _distributed.map_batches(client, _square, [], shared={"offset": 0}) == []
    with pytest.raises(ValueError, match="batch_size"):
        _distributed.split(5, client, 0)


# ----------------------------------------------------------------------
# A worker lost mid-run
# ----------------------------------------------------------------------

class KillOnce(distributed.WorkerPlugin):
    """SIGKILL the worker process as its second bootstrap task starts, once per test."""

    name = "paralingam-test-kill-once"

    def __init__(self, flag):
        self.flag = flag
        self.started = 0

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing" or not str(key).startswith("paralingam-bootstrap"):
            return
        self.started += 1
        if self.started < 2:
            return
        try:
            fd = os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:  # killed one already (this is its restarted worker)
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


def test_bootstrap_survives_a_killed_worker(client, lingam_data, tmp_path):
    X = lingam_data(8, 500, "dense", 907)[0]
    model = paralingam.DirectLiNGAM(random_state=11)
    ref = model.bootstrap(X, 32)
    flag = str(tmp_path / "killed")
    pids_before = set(client.run(os.getpid).values())
    client.register_plugin(KillOnce(flag))
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            ours = pool.submit(model.bootstrap, X, 32, client=client).result(timeout=DEADLINE_S)
    finally:
        client.unregister_worker_plugin(KillOnce.name)
        # the nanny restarts the killed worker: leave the cluster as it was
        client.wait_for_workers(2, timeout=DEADLINE_S)
    with open(flag) as f:
        killed = int(f.read())
    assert killed in pids_before
    assert killed not in set(client.run(os.getpid).values())
    assert_same(ours, ref)


# ----------------------------------------------------------------------
# One worker per GPU (dask-cuda)
# ----------------------------------------------------------------------

@pytest.mark.gpu
def test_bootstrap_on_local_cuda_cluster_equals_serial(lingam_data):
    dask_cuda = pytest.importorskip("dask_cuda")
    X = lingam_data(12, 1000, "dense", 908)[0]
    model = paralingam.DirectLiNGAM(random_state=12, backend="auto")
    ref = paralingam.DirectLiNGAM(random_state=12, backend="cuda").bootstrap(X, 24)
    with dask_cuda.LocalCUDACluster(dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        devices = c.run(lambda: os.environ["CUDA_VISIBLE_DEVICES"].split(",")[0])
        assert len(set(devices.values())) == len(devices) >= 1  # one GPU per worker
        from paralingam import _backends

        assert set(c.run(lambda: _backends.resolve_backend("auto")).values()) == {"cuda"}
        ours = model.bootstrap(X, 24, client=c)
    for a, b in zip(ours.resampled_indices_, ref.resampled_indices_):
        np.testing.assert_array_equal(a, b)
    # the same kernels on the same GPU model: the same graphs, the same weights
    # up to the GPU reductions' rounding
    np.testing.assert_array_equal(ours.adjacency_matrices_ != 0, ref.adjacency_matrices_ != 0)
    np.testing.assert_allclose(ours.adjacency_matrices_, ref.adjacency_matrices_,
                               rtol=0, atol=1e-10)
    np.testing.assert_allclose(ours.total_effects_, ref.total_effects_, rtol=0, atol=1e-10)
