"""The CPU steps' BLAS limit covers scipy's BLAS from a process's first fit on."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from child_process import child_env

pytest.importorskip("threadpoolctl")

# A fresh process (scipy's LAPACK not loaded yet) records the BLAS libraries'
# threads inside its first CPU fit's adjacency step, after that step ran.
FIRST_FIT = """
import json, sys
import numpy as np
from threadpoolctl import threadpool_info
import paralingam
from paralingam import _api
assert "scipy.linalg._flapack" not in sys.modules
before = [i["filepath"] for i in threadpool_info() if i["user_api"] == "blas"]
seen = []
estimate = _api._estimate_adjacency
def recording(*args, **kwargs):
    B = estimate(*args, **kwargs)
    seen.extend((i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas")
    return B
_api._estimate_adjacency = recording
X = np.random.default_rng(0).laplace(size=(300, 6))
paralingam.fit(X, backend="cpu")
after = [(i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]
print(json.dumps({"before": before, "inside": seen, "after": after}))
"""


def test_first_fit_limits_scipy_blas_in_the_adjacency_step(tmp_path):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("BLAS runs one thread on one core: no limit to observe")
    # (run outside the checkout, on the paralingam this test imports)
    env = child_env(OPENBLAS_NUM_THREADS="3", OMP_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", FIRST_FIT], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    inside, after = seen["inside"], dict(seen["after"])
    scipy_blas = set(after) - set(seen["before"])  # loaded by the fit: scipy's own
    if not scipy_blas:
        pytest.skip("scipy uses numpy's BLAS here: no library of its own to limit")
    # every BLAS, scipy's too, ran on one thread in the step
    assert {path for path, _ in inside} >= scipy_blas
    assert all(threads == 1 for _, threads in inside), inside
    # and scipy's is back to its default afterwards (numpy's: the same settings)
    assert all(after[path] == after[seen["before"][0]] > 1 for path in scipy_blas), after


def test_blas_controller_is_made_again_once_scipy_lapack_is_loaded(monkeypatch):
    from threadpoolctl import threadpool_info

    from paralingam import _blas, _lapack

    monkeypatch.delitem(sys.modules, _lapack.MODULE, raising=False)
    monkeypatch.setattr(_blas, "_controller", None)
    monkeypatch.setattr(_blas, "_controller_libraries", None)
    first = _blas.controller()
    assert _lapack.MODULE not in sys.modules  # the controller does not load it (its threads spin)
    assert _blas.controller() is first  # made once while nothing changes
    _lapack.flapack()
    second = _blas.controller()
    assert second is not first and _blas.controller() is second
    blas = {os.path.realpath(i["filepath"]) for i in threadpool_info() if i["user_api"] == "blas"}
    assert {os.path.realpath(lib.filepath)
            for lib in second.select(user_api="blas").lib_controllers} == blas


@pytest.mark.parametrize("large, basis", [(False, None), (True, None), (True, "below"),
                                          (True, "at")])
def test_after_a_cuda_search_blas_threads_follow_the_problem_size(large, basis, monkeypatch):
    """numpy's and scipy's wheels each bring an OpenBLAS: after a CUDA search the
    adjacency step keeps scipy's on the calling thread (the two libraries' spinning
    workers fought for the cores), and numpy's too below THREADED_BLAS_MIN_FEATURES
    variables (its spinning workers held the adaptive lasso's OpenMP threads' cores)
    or where fewer than THREADED_BLAS_MIN_BASIS variables are not exactly explained
    (rank-deficient data: small products); else numpy's keeps its threads for the
    large products."""
    import dataclasses
    from types import SimpleNamespace

    from threadpoolctl import threadpool_info

    from paralingam import _api, _blas

    if (os.cpu_count() or 1) < 2:
        pytest.skip("BLAS runs one thread on one core: no limit to observe")
    p = _blas.THREADED_BLAS_MIN_FEATURES if large else _blas.THREADED_BLAS_MIN_FEATURES - 1
    X = np.zeros((3, p))  # (the step's own work is recorded, not run)
    settings = dataclasses.replace(_api.check_settings(p, None, backend="cpu", n_samples=300),
                                   backend="cuda")
    seen = {}

    def recording(*args, **kwargs):
        seen.update((i["filepath"], i["num_threads"]) for i in threadpool_info()
                    if i["user_api"] == "blas")
        return np.zeros((p, p))

    monkeypatch.setattr(_api, "_estimate_adjacency", recording)
    n_explained = {None: 0, "below": p - _blas.THREADED_BLAS_MIN_BASIS + 1,
                   "at": p - _blas.THREADED_BLAS_MIN_BASIS}[basis]
    found = SimpleNamespace(order=np.arange(p), correlation=None, column_std=None,
                            explained={int(j): None for j in range(n_explained)}, device_copy=None)
    _api.adjacency(X, found, settings, np.zeros(p, dtype=int), None, {})
    own = _blas.scipy_blas()
    if own is None:
        pytest.skip("scipy uses numpy's BLAS here: no library of its own to limit")
    scipy_paths = {lib.filepath for lib in own.lib_controllers}
    after = {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    assert all(seen[path] == 1 for path in scipy_paths), seen
    others = [path for path in seen if path not in scipy_paths]
    assert others, seen  # numpy's BLAS
    if large and basis != "below":
        assert all(seen[path] == after[path] > 1 for path in others), seen
    else:
        assert all(seen[path] == 1 for path in others), seen
    assert all(after[path] > 1 for path in after), after  # restored


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("function", ["ols_adjacency", "adaptive_lasso_adjacency",
                                      "estimate_adjacency"])
def test_the_public_adjacency_functions_limit_blas_as_fit_after_a_cuda_search(
        function, large, monkeypatch):
    # Called on their own, the two BLAS libraries' spinning workers fought
    # for the cores as after a CUDA search (rank-deficient p=300 on 2 cores:
    # several times slower): the same limits as that step
    from threadpoolctl import threadpool_info

    import paralingam.adjacency as adjacency
    from paralingam import _blas, _lapack
    from paralingam.adjacency import _adaptive_lasso, _least_squares

    if (os.cpu_count() or 1) < 2:
        pytest.skip("BLAS runs one thread on one core: no limit to observe")
    _lapack.flapack()  # scipy's own BLAS loaded, so that its limit is observed in every case
    p = _blas.THREADED_BLAS_MIN_FEATURES if large else 5
    seen = {}

    def recording(X, order, **kwargs):
        seen.update((i["filepath"], i["num_threads"]) for i in threadpool_info()
                    if i["user_api"] == "blas")
        return np.zeros((len(order), len(order)))

    for module, name in ((_least_squares, "_ols_adjacency"), (adjacency, "_estimate_adjacency"),
                         (_adaptive_lasso, "_adaptive_lasso_adjacency")):
        monkeypatch.setattr(module, name, recording)
    X = np.random.default_rng(1).laplace(size=(p + 5, p))
    getattr(adjacency, function)(X, np.arange(p))
    own = _blas.scipy_blas()
    scipy_paths = {lib.filepath for lib in own.lib_controllers} if own is not None else set()
    assert seen and all(seen[path] == 1 for path in scipy_paths), seen
    others = [path for path in seen if path not in scipy_paths]
    after = {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    if large:
        assert all(seen[path] == after[path] > 1 for path in others), seen
    else:
        assert all(seen[path] == 1 for path in others), seen
    assert all(threads > 1 for threads in after.values()), after  # restored


def test_overlapping_adjacency_calls_in_threads_restore_the_processs_blas_threads():
    # threadpoolctl's limits are process-wide: calls overlapping in several
    # threads share the first one's limits and the last one out restores
    # them (each restoring its own left BLAS at one thread for good)
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_info

    from paralingam import _lapack
    from paralingam.adjacency import ols_adjacency

    if (os.cpu_count() or 1) < 2:
        pytest.skip("BLAS runs one thread on one core: no limit to observe")
    _lapack.flapack()
    before = {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    X = np.random.default_rng(2).laplace(size=(200, 12))
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda k: ols_adjacency(X, np.roll(np.arange(12), k)), range(200)))
    after = {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    assert after == before


OVERLAP = """
import json, sys, threading
import numpy as np
from threadpoolctl import threadpool_info
import paralingam
from paralingam import _blas, _lapack

def threads():
    return sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

_lapack.flapack()
before = threads()
first, second = sys.argv[1:3]
if first == "bootstrap":  # (the review's case: DirectLiNGAM bootstraps in a thread pool)
    from concurrent.futures import ThreadPoolExecutor
    X = np.random.default_rng(0).uniform(size=(400, 6))
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda n: paralingam.DirectLiNGAM(backend="cpu").bootstrap(
            X, n, progress=False), [2, 6, 3, 5]))
else:  # thread A enters, thread B enters, A leaves, B leaves
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    def step(kind, entered, wait_for, then=None):
        with getattr(_blas, kind)():
            entered.set()
            assert wait_for.wait(10)
        if then is not None:
            then.set()
    a = threading.Thread(target=step, args=(first, a_in, b_in, a_out))
    b = threading.Thread(target=step, args=(second, b_in, a_out))
    a.start()
    assert a_in.wait(10)
    b.start()
    a.join(10)
    b.join(10)
print(json.dumps({"before": before, "after": threads()}))
"""


@pytest.mark.parametrize("first, second", [("in_this_thread", "in_this_thread"),
                                           ("in_this_thread", "scipy_in_this_thread"),
                                           ("scipy_in_this_thread", "in_this_thread"),
                                           ("bootstrap", "")])
def test_limits_that_overlap_in_threads_restore_the_processs_blas_threads(first, second,
                                                                          tmp_path):
    # Each step had a limit of its own, and threadpoolctl lets one thread at
    # a time set OpenBLAS's threads: the step that left last "restored" the
    # one thread it had found, and the process kept it (fits or bootstraps
    # in a thread pool left numpy's BLAS on one thread for good). The first
    # step's limit is shared and restored by it. (A fresh process: an
    # earlier test's leak would hide one.)
    if (os.cpu_count() or 1) < 2:
        pytest.skip("BLAS runs one thread on one core: no limit to observe")
    # (two BLAS threads to start with: distributed's nannies, started in this
    # process by the Dask tests, set OPENBLAS_NUM_THREADS=1 and its kin here)
    env = child_env(**{k: "2" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                        "MKL_NUM_THREADS")})
    # (cwd: not the source tree, whose package has no compiled extensions in CI)
    out = subprocess.run([sys.executable, "-c", OVERLAP, first, second], capture_output=True,
                         text=True, timeout=300, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert min(seen["before"]) > 1 and seen["after"] == seen["before"], seen
