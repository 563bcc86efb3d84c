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
import warnings

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import cloudpickle  # noqa: E402  (a dependency of distributed)

import paralingam  # noqa: E402
from paralingam.lingam import _distributed  # noqa: E402

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

    code = ("import sys, paralingam, paralingam.lingam.estimator, paralingam.lingam._distributed; "
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
# VARLiNGAM.bootstrap(client=...)
# ----------------------------------------------------------------------

def var_series(T, p, lags, seed):
    """A VAR-LiNGAM series with Laplace noise: x_t = B0 x_t + sum_tau B_tau x_{t-tau} + e_t."""
    rng = np.random.default_rng(seed)
    B0 = np.tril(rng.uniform(-0.6, 0.6, (p, p)) * (rng.random((p, p)) < 0.6), -1)
    perm = rng.permutation(p)
    B0 = B0[np.ix_(perm, perm)]
    Bs = [rng.uniform(-0.3, 0.3, (p, p)) * (rng.random((p, p)) < 0.5) / (1 + t)
          for t in range(lags)]
    inv = np.linalg.inv(np.eye(p) - B0)
    X = np.zeros((T + 30, p))
    for t in range(lags, T + 30):
        X[t] = inv @ (sum(Bs[k] @ X[t - k - 1] for k in range(lags)) + rng.laplace(size=p))
    return X[30:]


def assert_same_var(ours, ref, model_ours, model_ref):
    np.testing.assert_array_equal(ours.adjacency_matrices_, ref.adjacency_matrices_)
    np.testing.assert_array_equal(ours.total_effects_, ref.total_effects_)
    assert set(ours.timings_) == set(ref.timings_)
    # both leave the model fitted on the last resample
    assert model_ours.causal_order_ == model_ref.causal_order_
    np.testing.assert_array_equal(model_ours.adjacency_matrices_, model_ref.adjacency_matrices_)
    np.testing.assert_array_equal(model_ours.residuals_, model_ref.residuals_)
    assert model_ours._lags == model_ref._lags
    np.testing.assert_array_equal(model_ours._ar_coefs, model_ref._ar_coefs)
    assert model_ours._criterion == model_ref._criterion


@pytest.mark.parametrize("kwargs, chunk, max_batch", [
    # lags > 1 with pruning; chunks of 8 cut into tasks of 1 resample: each
    # task simulates its whole chunk (a series simulated alone differs in the
    # last bits: numpy's vector-matrix product is not its matrix product)
    ({"lags": 3, "criterion": None, "prune": True, "random_state": 21}, 8, 1),
    ({"lags": 2, "criterion": "bic", "prune": True, "random_state": 22}, 8, None),
    ({"lags": 1, "criterion": "aic", "prune": False, "random_state": 23}, 64, None),
])
def test_varlingam_bootstrap_equals_serial(client, monkeypatch, kwargs, chunk, max_batch):
    from paralingam.lingam import var_lingam

    monkeypatch.setattr(var_lingam, "_SIMULATION_BATCH", chunk)
    if max_batch is not None:
        monkeypatch.setattr(_distributed, "MAX_BATCH_SIZE", max_batch)
    X = var_series(250, 4, kwargs["lags"], 920)
    serial = paralingam.VARLiNGAM(**kwargs)
    ref = serial.bootstrap(X, 19)
    ours_model = paralingam.VARLiNGAM(**kwargs)
    ours = ours_model.bootstrap(X, 19, client=client)
    assert ours.adjacency_matrices_.shape == (19, 4, 4 * (1 + kwargs["lags"]))
    assert_same_var(ours, ref, ours_model, serial)
    assert len({B.tobytes() for B in ours.adjacency_matrices_}) > 1
    wait_until_no_tasks(client, "paralingam-")


def test_varlingam_bootstrap_given_coefs_model_and_global_state_equal_serial(client):
    """ar_coefs and a lingam_model given; random_state=None draws numpy's global state."""
    X = var_series(200, 3, 2, 921)
    X[::41, 1] *= 25.0  # outliers
    coefs = paralingam.lingam.var_lingam.fit_var(X, 2)[0]

    def model():
        return paralingam.VARLiNGAM(lags=2, ar_coefs=coefs,
                                    lingam_model=paralingam.DirectLiNGAM(adjacency="ols"))

    serial, ours_model = model(), model()
    np.random.seed(31)
    ref = serial.bootstrap(X, 7)
    after_ref = np.random.random()
    np.random.seed(31)
    ours = ours_model.bootstrap(X, 7, client=client)
    assert np.random.random() == after_ref
    assert_same_var(ours, ref, ours_model, serial)


def test_varlingam_bootstrap_checks_client_before_fitting():
    X = var_series(100, 3, 1, 922)
    model = paralingam.VARLiNGAM()
    with pytest.raises(ValueError, match="client must be a distributed.Client"):
        model.bootstrap(X, 2, client=object())
    assert model.adjacency_matrices_ is None


@pytest.mark.parametrize("chunk, batch_size", [(64, 64), (64, 3), (8, 3), (8, 20), (5, 1)])
def test_chunk_batches_stay_inside_chunks(client, chunk, batch_size):
    batches = _distributed.chunk_batches(37, chunk, client, batch_size)
    assert [i for _, r in batches for i in r] == list(range(37))
    for start, r in batches:
        assert start % chunk == 0 and start <= r.start and r.stop <= start + chunk
        assert 1 <= len(r) <= batch_size


# ----------------------------------------------------------------------
# MultiGroupDirectLiNGAM.bootstrap(client=...)
# ----------------------------------------------------------------------

def groups(sizes, p, seed):
    """Groups of one LiNGAM (the same order), each with its own weights."""
    rng = np.random.default_rng(seed)
    mask = np.tril(rng.random((p, p)) < 0.6, -1)
    perm = rng.permutation(p)
    out = []
    for n in sizes:
        B = mask * rng.uniform(0.5, 1.5, (p, p)) * rng.choice([-1, 1], (p, p))
        X = rng.laplace(size=(n, p)) @ np.linalg.inv(np.eye(p) - B).T
        out.append(np.ascontiguousarray(X[:, perm]))
    return out


@pytest.mark.parametrize("kwargs", [
    {"random_state": 41},
    {"random_state": 42, "adjacency": "ols", "coef_threshold": 0.05},
])
def test_multigroup_bootstrap_equals_serial(client, kwargs):
    Xs = groups([220, 160], 5, 930)
    serial = paralingam.MultiGroupDirectLiNGAM(**kwargs)
    ref = serial.bootstrap(Xs, 13)
    ours_model = paralingam.MultiGroupDirectLiNGAM(**kwargs)
    ours = ours_model.bootstrap(Xs, 13, client=client)
    assert len(ours) == len(ref) == 2
    for a, b in zip(ours, ref):
        np.testing.assert_array_equal(a.adjacency_matrices_, b.adjacency_matrices_)
        np.testing.assert_array_equal(a.total_effects_, b.total_effects_)
        assert len({B.tobytes() for B in a.adjacency_matrices_}) > 1
    # both leave the model fitted on the last resample
    assert ours_model.causal_order_ == serial.causal_order_
    for a, b in zip(ours_model.adjacency_matrices_, serial.adjacency_matrices_):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ours_model.adjacency_matrix_, serial.adjacency_matrix_)
    wait_until_no_tasks(client, "paralingam-")


def test_multigroup_bootstrap_prior_knowledge_three_groups_equals_serial(client):
    Xs = groups([150, 300, 90], 4, 931)
    Xs[1][::23, 2] *= 30.0  # outliers in one group
    pk = -np.ones((4, 4))
    pk[0, 1] = 0
    model = paralingam.MultiGroupDirectLiNGAM(random_state=43, prior_knowledge=pk)
    ref = model.bootstrap(Xs, 6)
    ours = model.bootstrap(Xs, 6, client=client)
    for a, b in zip(ours, ref):
        np.testing.assert_array_equal(a.adjacency_matrices_, b.adjacency_matrices_)
        np.testing.assert_array_equal(a.total_effects_, b.total_effects_)
    assert all((a.adjacency_matrices_[:, 0, 1] == 0).all() for a in ours)


def test_multigroup_bootstrap_degenerate_resamples_equal_serial(client):
    """A column constant in some resamples of a group: what serially comes out, comes out."""
    Xs = groups([120, 80], 3, 932)
    Xs[1][:, 2] = 0.0
    Xs[1][5, 2] = 1.0  # one row in 80: about a third of the resamples miss it
    # the serial draws (each resample: group 0, then group 1): some miss the row
    from sklearn.utils import resample

    rng = np.random.RandomState(44)
    missed = 0
    for _ in range(8):
        resample(np.arange(120), random_state=rng)
        missed += 5 not in resample(np.arange(80), random_state=rng)
    assert 1 <= missed < 8
    model = paralingam.MultiGroupDirectLiNGAM(random_state=44)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ref = model.bootstrap(Xs, 8)
    ours = model.bootstrap(Xs, 8, client=client)
    for a, b in zip(ours, ref):
        np.testing.assert_array_equal(a.adjacency_matrices_, b.adjacency_matrices_)
        np.testing.assert_array_equal(a.total_effects_, b.total_effects_)


# ----------------------------------------------------------------------
# progress=
# ----------------------------------------------------------------------

@pytest.mark.parametrize("use_client", [False, True])
def test_var_and_multigroup_progress_go_to_stderr(request, capsys, monkeypatch, use_client):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # the plain line, with or without tqdm
    kw = {"client": request.getfixturevalue("client")} if use_client else {}
    paralingam.VARLiNGAM(random_state=1).bootstrap(var_series(120, 3, 1, 933), 3,
                                                   progress=True, **kw)
    err = capsys.readouterr().err
    assert "bootstrap: 3/3 resamples" in err
    paralingam.MultiGroupDirectLiNGAM(random_state=2).bootstrap(groups([90, 70], 3, 934), 4,
                                                                progress=True, **kw)
    assert "bootstrap: 4/4 resamples" in capsys.readouterr().err
    paralingam.MultiGroupDirectLiNGAM(random_state=2).bootstrap(groups([90, 70], 3, 934), 2,
                                                                **kw)
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="progress must be"):
        paralingam.VARLiNGAM().bootstrap(var_series(120, 3, 1, 933), 2, progress="yes")
    with pytest.raises(ValueError, match="progress must be"):
        paralingam.MultiGroupDirectLiNGAM().bootstrap(groups([90, 70], 3, 934), 2,
                                                      progress="yes")


def test_varlingam_bootstrap_survives_a_killed_worker(client, monkeypatch, tmp_path):
    from paralingam.lingam import var_lingam

    monkeypatch.setattr(var_lingam, "_SIMULATION_BATCH", 6)  # several chunks, several tasks
    X = var_series(200, 3, 2, 923)
    serial = paralingam.VARLiNGAM(lags=2, random_state=24)
    ref = serial.bootstrap(X, 16)
    flag = str(tmp_path / "killed")
    pids_before = set(client.run(os.getpid).values())
    client.register_plugin(KillOnce(flag))
    ours_model = paralingam.VARLiNGAM(lags=2, random_state=24)
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            ours = pool.submit(ours_model.bootstrap, X, 16,
                               client=client).result(timeout=DEADLINE_S)
    finally:
        client.unregister_worker_plugin(KillOnce.name)
        client.wait_for_workers(2, timeout=DEADLINE_S)
    with open(flag) as f:
        assert int(f.read()) in pids_before
    assert_same_var(ours, ref, ours_model, serial)


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
        from paralingam.search import _backends

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


@pytest.mark.gpu
def test_var_and_multigroup_bootstrap_on_local_cuda_cluster_equal_serial():
    dask_cuda = pytest.importorskip("dask_cuda")
    X = var_series(600, 6, 2, 924)
    Xs = groups([500, 400], 6, 935)
    # backend="cuda" both ways: the same order search and pruning on each GPU
    var_ref = paralingam.VARLiNGAM(lags=2, random_state=25, backend="cuda").bootstrap(X, 20)
    mg_ref = paralingam.MultiGroupDirectLiNGAM(random_state=45, backend="cuda").bootstrap(Xs, 10)
    with dask_cuda.LocalCUDACluster(dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        var_ours = paralingam.VARLiNGAM(lags=2, random_state=25, backend="cuda").bootstrap(
            X, 20, client=c)
        mg_ours = paralingam.MultiGroupDirectLiNGAM(random_state=45, backend="cuda").bootstrap(
            Xs, 10, client=c)
    # the same kernels on the same GPU model: the same graphs, the same weights
    # up to the GPU reductions' rounding
    pairs = [(var_ours, var_ref)] + list(zip(mg_ours, mg_ref))
    for ours, ref in pairs:
        np.testing.assert_array_equal(ours.adjacency_matrices_ != 0, ref.adjacency_matrices_ != 0)
        np.testing.assert_allclose(ours.adjacency_matrices_, ref.adjacency_matrices_,
                                   rtol=0, atol=1e-10)
        np.testing.assert_allclose(ours.total_effects_, ref.total_effects_, rtol=0, atol=1e-10)
