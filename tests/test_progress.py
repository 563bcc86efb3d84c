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
