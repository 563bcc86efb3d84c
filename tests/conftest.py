"""Shared fixtures and the ``gpu`` marker of the paralingam test suite."""

import functools
import os
import sys
from pathlib import Path

import numpy as np
import pytest

DATA_DIR = Path(__file__).parent / "data"

# PARALINGAM_LINGAM_FIXTURES=replay: run as where lingam cannot be installed
# (its import fails; the comparisons use the recorded fixtures).
if os.environ.get("PARALINGAM_LINGAM_FIXTURES") == "replay":
    for _name in [m for m in sys.modules if m == "lingam" or m.startswith("lingam.")]:
        del sys.modules[_name]
    sys.modules["lingam"] = None  # "import lingam" raises ImportError


@functools.lru_cache(maxsize=1)
def _cuda_reason():
    from paralingam.search import _backends

    return _backends.cuda_unavailable_reason()


def pytest_collection_modifyitems(config, items):
    """Skip ``@pytest.mark.gpu`` tests unless the CUDA backend can run."""
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = _cuda_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"needs the CUDA backend: {reason}")
    for item in gpu_items:
        item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    """Write lingam's recorded results (tools/record_lingam_fixtures.py; tests/lingam_oracle.py)."""
    import lingam_oracle

    lingam_oracle.save_all()


@pytest.fixture(scope="session")
def ecoli():
    """E. coli core flux samples (first 1000 rows): ``(X, names)``."""
    with np.load(DATA_DIR / "ecoli_core_subset.npz") as f:  # no pickle needed
        X = np.array(f["X"], dtype=np.float64)
        names = [str(s) for s in f["names"]]
    assert X.shape == (1000, 87) and len(names) == 87
    return X, names


@functools.lru_cache(maxsize=None)
def _lingam_data(p, n, density, seed):
    from paralingam.datasets import make_lingam_data

    X, B, order = make_lingam_data(p, n, density=density, random_state=seed)
    # make_lingam_data returns a Fortran-ordered array; keep a C-ordered copy.
    X = np.ascontiguousarray(X)
    for a in (X, B, order):
        a.setflags(write=False)
    return X, B, order


@functools.lru_cache(maxsize=None)
def _reference_on(p, n, density, seed):
    from paralingam.search import reference

    order, explained = reference.causal_order(_lingam_data(p, n, density, seed)[0])
    return order, explained


@pytest.fixture(scope="session")
def lingam_data():
    """``lingam_data(p, n, density, seed) -> (X, B, true_order)``, read-only, cached."""
    return _lingam_data


@pytest.fixture(scope="session")
def reference_on():
    """``reference_on(p, n, density, seed) -> (order, explained)``, cached."""
    return _reference_on


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt during the test, also where the runner ignores it
    (a shell's background job starts with SIGINT ignored, and Python then keeps it so)."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def sigint_after(sigint_raises):
    """``with sigint_after(seconds): ...`` sends SIGINT to the main thread after
    ``seconds`` (a timer thread, cancelled on leaving), where it raises
    KeyboardInterrupt (:func:`sigint_raises`)."""
    import contextlib
    import signal
    import threading

    @contextlib.contextmanager
    def after(seconds):
        timer = threading.Timer(seconds, signal.pthread_kill,
                                (threading.main_thread().ident, signal.SIGINT))
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            timer.join()

    return after
