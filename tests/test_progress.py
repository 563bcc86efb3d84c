"""The progress helper (paralingam/_progress.py) and its users."""

import re
import sys
import types

import numpy as np
import pytest

import paralingam
from paralingam import _progress
from paralingam._progress import Progress
from paralingam.datasets import make_lingam_data
from child_process import child_env


class FakeTqdm:
    """Records what a tqdm bar is asked to do."""

    bars = []

    def __init__(self, total, initial=0, **kwargs):
        self.total, self.n, self.kwargs, self.closed = total, initial, kwargs, False
        FakeTqdm.bars.append(self)

    def update(self, k):
        self.n += k

    def close(self):
        self.closed = True


@pytest.fixture
def fake_tqdm(monkeypatch):
    FakeTqdm.bars = []
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeTqdm))
    return FakeTqdm


@pytest.fixture
def no_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # "import tqdm" raises ImportError


@pytest.fixture
def terminal(monkeypatch):
    """Standard error seen as a terminal, and "auto" drawing at once."""
    monkeypatch.setattr(_progress, "stderr_is_terminal", lambda: True)
    monkeypatch.setattr(_progress, "AUTO_DELAY_S", 0.0)


def _count(k=5, **kw):
    with Progress(k, **kw) as bar:
        for _ in range(k):
            bar.update()
    return bar


# ----------------------------------------------------------------------
# the helper
# ----------------------------------------------------------------------

@pytest.mark.parametrize("progress", ["auto", False])
def test_not_a_terminal_is_silent(no_tqdm, capsys, progress):
    assert not sys.stderr.isatty()  # pytest's capture
    bar = _count(progress=progress, desc="work")
    assert bar.n == 5 and not bar.enabled
    assert capsys.readouterr() == ("", "")


def test_forced_true_writes_the_plain_line_on_stderr(no_tqdm, capsys):
    _count(7, progress=True, desc="work", unit="resample")
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("\r") and err.endswith("\n")
    assert "work: 7/7 resamples (100%)" in err
    assert "\x1b[" not in err  # no terminal escapes when stderr is not a terminal


def test_auto_on_a_terminal_shows_the_bar(no_tqdm, terminal, capsys):
    _count(3, progress="auto", desc="work", unit="tile")
    assert "work: 3/3 tiles (100%)" in capsys.readouterr().err


def test_auto_waits_its_delay_before_drawing(no_tqdm, terminal, capsys, monkeypatch):
    monkeypatch.setattr(_progress, "AUTO_DELAY_S", 3600.0)
    bar = _count(4, progress="auto", desc="work")  # quick work leaves no line
    assert bar.enabled and bar.delay == 3600.0
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(_progress, "AUTO_DELAY_S", 0.0)
    _count(4, progress="auto", desc="work")
    assert "work: 4/4" in capsys.readouterr().err
    _count(4, progress=True, desc="work")  # True draws at once
    assert "work: 4/4" in capsys.readouterr().err


def test_tqdm_is_used_when_installed(fake_tqdm, capsys):
    _count(6, progress=True, desc="bootstrap", unit="resample")
    (bar,) = fake_tqdm.bars
    assert bar.total == bar.n == 6 and bar.closed
    assert bar.kwargs["desc"] == "bootstrap" and bar.kwargs["unit"] == "resample"
    assert bar.kwargs["file"] is sys.stderr
    assert capsys.readouterr().err == ""  # the (fake) bar writes, not the plain line


def test_tqdm_is_not_imported_when_nothing_is_shown(monkeypatch):
    class Refuse:
        def __getattr__(self, name):
            raise AssertionError("tqdm imported for a silent bar")

    monkeypatch.setitem(sys.modules, "tqdm", Refuse())
    _count(progress=False)
    _count(progress="auto")  # not a terminal


def test_update_to_and_close_on_an_error(no_tqdm, capsys):
    with pytest.raises(KeyboardInterrupt):
        with Progress(10, True, desc="work") as bar:
            bar.update_to(4)
            raise KeyboardInterrupt
    err = capsys.readouterr().err
    assert "work: 4/10" in err and err.endswith("\n")  # the terminal's line is ended
    bar.close()  # idempotent
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("bad", ["yes", 1, 0, 1.5, None, "Auto"])
def test_bad_modes_are_refused(bad):
    with pytest.raises(ValueError, match="progress must be True, False or 'auto'"):
        Progress(3, bad)


def test_numpy_bool_is_a_bool():
    assert _progress.check_progress(np.bool_(True)) is True


def test_auto_follows_stderr_isatty(monkeypatch):
    class Terminal:
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    assert _progress.progress_enabled("auto") is True
    monkeypatch.setattr(sys, "stderr", None)  # pythonw, closed streams
    assert _progress.progress_enabled("auto") is False


# ----------------------------------------------------------------------
# its users: the same results with and without a bar
# ----------------------------------------------------------------------

def _var_series(T, p, seed):
    rng = np.random.default_rng(seed)
    X = np.zeros((T, p))
    E = rng.uniform(-1, 1, size=(T, p))
    for t in range(1, T):
        X[t] = 0.4 * X[t - 1] + E[t]
        X[t, 1] += 0.7 * X[t, 0]
    return X


def test_bootstraps_give_the_same_result_with_a_bar(lingam_data, no_tqdm, capsys):
    X = lingam_data(4, 150, "sparse", 611)[0]
    model = paralingam.DirectLiNGAM(random_state=3, adjacency="ols", backend="cpu")
    shown = model.bootstrap(X, 4, progress=True)
    assert "bootstrap: 4/4 resamples (100%)" in capsys.readouterr().err
    silent = model.bootstrap(X, 4)
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(shown.adjacency_matrices_, silent.adjacency_matrices_)
    np.testing.assert_array_equal(shown.total_effects_, silent.total_effects_)

    series = _var_series(200, 3, 612)
    a = paralingam.VARLiNGAM(random_state=1, backend="cpu").bootstrap(series, 3, progress=True)
    assert "bootstrap: 3/3 resamples" in capsys.readouterr().err
    b = paralingam.VARLiNGAM(random_state=1, backend="cpu").bootstrap(series, 3, progress=False)
    np.testing.assert_array_equal(a.adjacency_matrices_, b.adjacency_matrices_)

    groups = [lingam_data(3, n, "sparse", s)[0] for n, s in ((120, 613), (90, 614))]
    a = paralingam.MultiGroupDirectLiNGAM(random_state=2).bootstrap(groups, 3, progress=True)
    assert "bootstrap: 3/3 resamples" in capsys.readouterr().err
    b = paralingam.MultiGroupDirectLiNGAM(random_state=2).bootstrap(groups, 3)
    assert capsys.readouterr().err == ""
    for ra, rb in zip(a, b):
        np.testing.assert_array_equal(ra.adjacency_matrices_, rb.adjacency_matrices_)


def test_p_values_give_the_same_result_with_a_bar(lingam_data, no_tqdm, capsys):
    X = lingam_data(4, 300, "sparse", 615)[0]
    model = paralingam.DirectLiNGAM(backend="cpu").fit(X)
    shown = model.get_error_independence_p_values(X, progress=True)
    assert re.search(r"p-values: (\d+)/\1 tiles \(100%\)", capsys.readouterr().err)
    np.testing.assert_array_equal(shown, model.get_error_independence_p_values(X))
    assert capsys.readouterr().err == ""


def test_cpu_search_reports_its_iterations_and_keeps_its_result(capsys):
    import paralingam

    X = np.asarray(make_lingam_data(12, 400, density="sparse", random_state=3)[0])
    quiet = paralingam.fit(X, backend="cpu", progress=False)
    assert capsys.readouterr().err == ""
    shown = paralingam.fit(X, backend="cpu", progress=True)
    err = capsys.readouterr().err
    assert "search" in err and "12/12" in err
    assert list(shown.causal_order) == list(quiet.causal_order)
    np.testing.assert_array_equal(shown.adjacency_matrix, quiet.adjacency_matrix)


def test_fit_refuses_a_bad_progress_value():
    import paralingam

    X = np.asarray(make_lingam_data(4, 100, random_state=1)[0])
    with pytest.raises(ValueError, match="progress must be True, False or 'auto'"):
        paralingam.fit(X, backend="cpu", progress="yes")


def test_fit_feeds_the_cuda_search_progress_to_its_bar(monkeypatch):
    from paralingam import _api

    calls = []

    def search(data, **kwargs):  # the CUDA search's contract, without a GPU
        p = data.shape[1]
        for done in (0, 3, 3, p - 1):
            kwargs["progress"](done)
        calls.append(p)
        return list(range(p)), {}, {"remaining": [], "compared": [], "gamma": [],
                                   "rounds": [], "scores": []}, 0

    # the bar's counts as fit feeds them from the search's callback
    X = np.asarray(make_lingam_data(6, 200, random_state=4)[0])
    seen = []
    monkeypatch.setattr(_api._backends, "resolve_backend", lambda backend: "cuda")
    monkeypatch.setattr(_api, "_estimate_adjacency", lambda data, order, **kw: np.zeros((6, 6)))
    import paralingam.search._cuda as cuda_module

    monkeypatch.setattr(cuda_module, "search", search)
    monkeypatch.setattr(cuda_module, "check_memory", lambda *a: None)
    original = Progress.update_to
    monkeypatch.setattr(Progress, "update_to",
                        lambda self, done: (seen.append(done), original(self, done))[1])
    paralingam.fit(X, progress=True)
    assert calls == [6]
    assert seen == sorted(seen) and seen[-1] == 6  # never back, ends at the total


@pytest.mark.gpu
def test_cuda_search_reports_its_iterations_and_keeps_its_result(no_tqdm, capsys):
    from paralingam.search import _cuda
    from paralingam._api import DEFAULT_C, DRIFT_TOL, default_gamma0
    from paralingam.search.policy import COLLINEAR_TOL, EXPLAINED_TOL

    X = np.asarray(make_lingam_data(300, 2048, density="sparse", random_state=5)[0])
    quiet = paralingam.fit(X, backend="cuda", progress=False)
    assert capsys.readouterr().err == ""
    shown = paralingam.fit(X, backend="cuda", progress=True)
    assert "search: 300/300 variables (100%)" in capsys.readouterr().err
    assert list(shown.causal_order) == list(quiet.causal_order)
    # the scheduler's own callback: increasing counts of ordered variables
    calls = []
    order, *_ = _cuda.search(X, threshold=True, gamma0=default_gamma0(2048), c=DEFAULT_C,
                             dtype="float32", collinear_tol=COLLINEAR_TOL,
                             explained_tol=EXPLAINED_TOL, drift_tol=DRIFT_TOL, times={},
                             progress=calls.append)
    # (the first report may come before any variable is ordered; throttled to
    # 0.1 s, a short search reports little more)
    assert calls and calls == sorted(calls) and 0 <= calls[0] and calls[-1] <= 300
    assert order == list(quiet.causal_order)


# ----------------------------------------------------------------------
# the adjacency step (the adaptive lasso's targets)
# ----------------------------------------------------------------------

def _order_and_data(p, n, seed):
    X, _, order = make_lingam_data(p, n, density="sparse", random_state=seed)
    return np.ascontiguousarray(X), list(order)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_cpu_adjacency_shows_its_targets_and_keeps_its_result(no_tqdm, capsys, n_threads):
    from paralingam.adjacency import estimate_adjacency

    X, order = _order_and_data(70, 400, 21)  # 64 variables and more use the threads
    quiet = estimate_adjacency(X, order, n_threads=n_threads)
    assert capsys.readouterr().err == ""
    shown = estimate_adjacency(X, order, n_threads=n_threads, progress=True)
    assert "adjacency: 69/69 targets (100%)" in capsys.readouterr().err
    np.testing.assert_array_equal(shown, quiet)
    with pytest.raises(ValueError, match="progress must be True, False or 'auto'"):
        estimate_adjacency(X, order, progress="yes")


def test_compiled_lasso_calls_progress_and_raises_what_it_raises():
    from paralingam import _isa

    lasso = _isa.load("adjacency._lasso")
    X, order = _order_and_data(20, 300, 22)
    Z = X[:, order]
    gram = Z.T @ Z
    targets = np.arange(1, 20, dtype=np.intp)
    offsets = np.concatenate([[0], np.cumsum(targets)]).astype(np.intp)
    predictors = np.concatenate([np.arange(k) for k in targets]).astype(np.intp)
    args = (gram, gram, targets, offsets, predictors, 300.0, 1.0, 1)
    calls = []
    B, _ = lasso.adaptive_lasso_rows(*args, progress=calls.append)
    # one thread: the first target is reported at once, then every 0.1 s
    assert calls and calls[0] == 1 and calls == sorted(calls) and calls[-1] <= 19
    np.testing.assert_array_equal(B, lasso.adaptive_lasso_rows(*args)[0])

    def interrupted(done):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lasso.adaptive_lasso_rows(*args, progress=interrupted)


@pytest.mark.gpu
def test_gpu_adjacency_shows_its_targets_and_keeps_its_result(no_tqdm, capsys):
    from paralingam.adjacency import CUDA_LASSO_MIN_FEATURES, estimate_adjacency

    p = max(CUDA_LASSO_MIN_FEATURES, 200)
    X, order = _order_and_data(p, 2000, 23)
    quiet = estimate_adjacency(X, order, backend="cuda")
    shown = estimate_adjacency(X, order, backend="cuda", progress=True)
    assert f"adjacency: {p - 1}/{p - 1} targets (100%)" in capsys.readouterr().err
    np.testing.assert_array_equal(shown, quiet)


@pytest.mark.gpu
def test_gpu_lars_progress_counts_up_to_the_targets():
    from paralingam.adjacency import _cuda_adjacency
    from test_gpu_adjacency import lars_inputs

    X, order = _order_and_data(400, 2000, 24)
    inputs = lars_inputs(X, order)
    targets = inputs[2]
    calls = []
    rows, ok = _cuda_adjacency.lars_rows(*inputs, progress=calls.append)
    assert calls == sorted(calls) and calls[-1] == len(targets) and min(calls) >= 0
    rows0, ok0 = _cuda_adjacency.lars_rows(*inputs)
    np.testing.assert_array_equal(rows, rows0)
    np.testing.assert_array_equal(ok, ok0)


# ----------------------------------------------------------------------
# the command line on a real terminal (a pseudo-terminal)
# ----------------------------------------------------------------------

def _cli_stderr(args, tty, tmp_path):
    import os
    import subprocess

    # the plain line these tests read: tqdm, where installed, draws its own
    # bar, and on a pseudo-terminal without a size (openpty's) nothing but "\r"
    code = ("import sys; sys.modules['tqdm'] = None; "
            "import paralingam._progress as p; p.AUTO_DELAY_S = 0.0; "
            "from paralingam.cli import main; sys.exit(main(sys.argv[1:]))")
    env = child_env()  # the paralingam this process imported
    if not tty:
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              cwd=tmp_path, env=env, timeout=300)
        return done.returncode, done.stderr.decode()
    import pty

    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL,
                                stderr=follower, cwd=tmp_path, env=env)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed (EIO) when the process ended
                break
            if not chunk:
                break
            chunks.append(chunk)
        rc = proc.wait(timeout=300)
    finally:
        os.close(leader)
    return rc, b"".join(chunks).decode(errors="replace")


def test_command_line_draws_bars_on_a_terminal_only(tmp_path):
    pytest.importorskip("pty")
    X, _ = _order_and_data(6, 300, 25)
    np.save(tmp_path / "x.npy", X)
    args = ["fit", "x.npy", "--backend", "cpu", "--threads", "1", "-o", "out.json"]
    rc, err = _cli_stderr(args, True, tmp_path)
    assert rc == 0, err
    assert "search: 6/6 variables (100%)" in err
    assert "adjacency: 5/5 targets (100%)" in err
    rc, err = _cli_stderr(args, False, tmp_path)  # a pipe: no bar
    assert rc == 0 and "variables (" not in err and "targets (" not in err, err
    rc, err = _cli_stderr(args + ["--quiet"], True, tmp_path)  # --quiet on a terminal
    assert rc == 0 and "variables (" not in err and "targets (" not in err, err


def test_waiting_for_the_adjacency_kernels_spins_then_sleeps_a_share_of_the_wait(monkeypatch):
    # wait_interruptibly queries back to back for SPIN_SECONDS (small problems'
    # kernels end within it, and any sleep would have been added to them),
    # then sleeps at most LATE_SHARE of the time waited and at most its
    # interval: a kernel's end is seen late by at most about that share
    from paralingam.adjacency import _cuda_adjacency

    clock = [0.0]
    ends = 0.02  # the kernel's end (s)
    polls = []

    class Event:
        def __init__(self, flags):
            pass

        def record(self):
            pass

        def query(self):
            polls.append(clock[0])
            clock[0] += 1e-5  # each query's own time
            return polls[-1] >= ends

    driver = types.SimpleNamespace(Event=Event, event_flags=types.SimpleNamespace(DISABLE_TIMING=2))
    package = types.ModuleType("pycuda")
    package.driver = driver
    monkeypatch.setitem(sys.modules, "pycuda", package)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    sleeps = []

    def sleep(seconds):
        sleeps.append((clock[0], seconds))
        clock[0] += seconds

    monkeypatch.setattr(_cuda_adjacency.time, "sleep", sleep)
    monkeypatch.setattr(_cuda_adjacency.time, "perf_counter", lambda: clock[0])
    interval = 1e-3
    _cuda_adjacency.wait_interruptibly(interval=interval)
    spin, share = _cuda_adjacency.SPIN_SECONDS, _cuda_adjacency.LATE_SHARE
    assert 0 < spin < ends and sleeps
    assert all(at >= spin for at, _ in sleeps)  # none while spinning
    # back to back until then: one query per query's own time
    assert sum(1 for t in polls if t < spin) == pytest.approx(spin / 1e-5, abs=2)
    assert all(s <= share * at + 1e-12 and s <= interval for at, s in sleeps)
    assert max(s for _, s in sleeps) == interval  # long waits sleep the whole interval
    assert polls[-1] - ends <= min(share * polls[-1], interval) + 1e-5


class WritingTqdm(FakeTqdm):
    """A bar that writes to its file as tqdm does (tqdm fails on a None or closed one)."""

    def __init__(self, total, initial=0, file=None, **kwargs):
        super().__init__(total, initial, **kwargs)
        self.file = file
        self.file.write("")

    def update(self, k):
        super().update(k)
        self.file.write("\r")

    def close(self):
        super().close()
        self.file.write("\n")


@pytest.mark.parametrize("stderr", ["none", "closed"])
@pytest.mark.parametrize("bar", ["tqdm", "plain"])
def test_an_unwritable_stderr_leaves_the_work_alone(monkeypatch, stderr, bar):
    # pythonw, "2>&-" or a service: sys.stderr None or closed. With tqdm
    # installed progress=True raised (AttributeError, ValueError) from tqdm;
    # progress is optional, the work goes on without it
    import io

    FakeTqdm.bars = []
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=WritingTqdm)
                        if bar == "tqdm" else None)
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stderr", None if stderr == "none" else closed)
    assert _count(5, progress=True).n == 5
    X = make_lingam_data(5, 300, random_state=3)[0]
    expected = paralingam.fit(X, backend="cpu", progress=False).causal_order
    assert paralingam.fit(X, backend="cpu", progress=True).causal_order == expected


def test_a_bar_whose_stream_fails_later_stops_drawing(monkeypatch):
    class Failing(FakeTqdm):
        def update(self, k):
            raise ValueError("I/O operation on closed file")

    FakeTqdm.bars = []
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=Failing))
    bar = _count(4, progress=True)
    assert bar.n == 4 and not bar.enabled
