"""Batches of fits on a Dask ``distributed`` cluster.

:func:`map_batches` is the generic part: it sends one shared object (the
data) to every worker once, runs a module-level function on each batch of
work (a few resamples, say), reports each finished batch, and returns the
batches' results in their order. Bootstraps build on it:
:func:`bootstrap_directlingam`, :func:`bootstrap_varlingam` and
:func:`bootstrap_multigroup` are the ``bootstrap(..., client=...)`` of
``DirectLiNGAM``, ``VARLiNGAM`` and ``MultiGroupDirectLiNGAM``; other models'
bootstraps can pass their own batch function.

``distributed`` is imported here only, and only when a client is given; the
package itself never imports it.

Fault tolerance comes from Dask: when a worker dies, the scheduler runs its
tasks (and recomputes results that were held only by it) on the other
workers, up to ``distributed.scheduler.allowed-failures`` times per task.
Batches are pure functions of the shared data and their small arguments (the
resamples' row indices are drawn on the client), so a re-run returns the same
result and the bootstrap is identical to the serial one.
"""

import itertools
import math
import time
import uuid

import numpy as np

from .. import _blas

__all__ = ["map_batches", "split", "chunk_batches", "check_client", "bootstrap_directlingam",
           "bootstrap_varlingam", "bootstrap_multigroup"]

# Errors that a batch raises because of its data (a resample with a constant
# column, say): running it again gives the same error, so it is not retried.
NO_RETRY = (ValueError,)
# Re-runs of a batch that raised another exception (a CUDA or memory error of
# one worker, say) before the error reaches the caller.
DEFAULT_RETRIES = 2
# Batches per thread of the cluster: several, so that a fast worker takes more
# of them and a lost worker's share is small, yet each task holds enough fits
# to amortise Dask's per-task overhead (~1 ms).
BATCHES_PER_THREAD = 4
# At most this many resamples per batch, so progress moves and a lost batch
# costs little.
MAX_BATCH_SIZE = 64


def check_client(client):
    """Refuse anything but a synchronous ``distributed.Client``.

    Parameters
    ----------
    client : distributed.Client

    Raises
    ------
    ImportError
        When ``distributed`` is not installed.
    ValueError
        When ``client`` is not a ``distributed.Client``, or is asynchronous.
    """
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - a client implies distributed
        raise ImportError("client= needs Dask's distributed package: "
                          "pip install 'paralingam[dask]'") from exc
    if not isinstance(client, Client):
        raise ValueError(f"client must be a distributed.Client or None; got {client!r}")
    if client.asynchronous:
        raise ValueError("client must be a synchronous distributed.Client "
                         "(Client(..., asynchronous=False))")
    if client.status not in ("running", "newly-created"):
        raise ValueError(f"client is not connected (status {client.status!r})")


def cluster_threads(client):
    """``(workers, threads)`` the scheduler knows now; at least ``(1, 1)``."""
    workers = client.scheduler_info().get("workers", {})
    threads = sum(int(w.get("nthreads", 1)) for w in workers.values())
    return max(1, len(workers)), max(1, threads)


def split(n_items, client, batch_size=None):
    """Consecutive ``range`` batches covering ``range(n_items)``.

    Parameters
    ----------
    n_items : int
    client : distributed.Client
        Its threads set the default batch size.
    batch_size : int, optional
        Items per batch; default: enough batches for ``BATCHES_PER_THREAD``
        per thread of the cluster, at most ``MAX_BATCH_SIZE`` items each.

    Returns
    -------
    list of range
    """
    if batch_size is None:
        _, threads = cluster_threads(client)
        batch_size = min(MAX_BATCH_SIZE, max(1, math.ceil(n_items / (BATCHES_PER_THREAD * threads))))
    elif isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1; got {batch_size!r}")
    return [range(s, min(s + batch_size, n_items)) for s in range(0, n_items, batch_size)]


class _Failed:
    """A batch's :data:`NO_RETRY` error, returned as a value so Dask does not retry it."""

    def __init__(self, exc):
        self.exc = exc


def _run_batch(func, shared, batch, concurrency):
    """Worker side of :func:`map_batches`: ``func(shared, batch, n_threads=...)``."""
    n_threads = task_threads(concurrency)
    try:
        with _one_blas_thread():
            return func(shared, batch, n_threads=n_threads)
    except NO_RETRY as exc:
        return _Failed(exc)


def task_threads(concurrency):
    """CPU threads for one task on this worker.

    A worker with ``nthreads`` threads runs up to that many tasks at once;
    when it is expected to run ``concurrency`` tasks, each gets
    ``nthreads // min(nthreads, concurrency)`` threads, so the worker's
    threads are used and not oversubscribed (a worker of one thread: 1).
    """
    try:
        from distributed import get_worker

        nthreads = int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):  # not inside a worker
        return 1
    return max(1, nthreads // max(1, min(nthreads, concurrency)))


def _one_blas_thread():
    """One BLAS thread while a task runs (as the serial bootstrap); the
    tasks in the threads of one worker share one limit
    (``_blas.in_this_thread``)."""
    return _blas.in_this_thread()


def map_batches(client, func, batches, *, shared=None, retries=DEFAULT_RETRIES, on_result=None,
                name="paralingam-batch"):
    """Run ``func(shared, batch, n_threads=k)`` for every batch on the client's workers.

    Parameters
    ----------
    client : distributed.Client
    func : callable
        A module-level function (workers import it by name), pure: the same
        arguments give the same result, since Dask may run a batch again
        when its worker is lost. ``n_threads`` is the number of CPU threads
        the call may use (see :func:`task_threads`).
    batches : sequence
        One small, picklable argument per task (row indices of a few
        resamples, say).
    shared : object
        Sent to every worker once, before the tasks
        (``client.scatter(..., broadcast=True)``), and passed to every call:
        the data, the estimator's settings.
    retries : int
        Re-runs of a task that raised an exception other than
        :data:`NO_RETRY` (a lost worker's tasks are re-run by the scheduler
        in any case).
    on_result : callable, optional
        ``on_result(index, result)`` on the caller's thread as each batch
        finishes (in any order): collect results, report progress.
    name : str
        Prefix of the tasks' keys, shown on Dask's dashboard.

    Returns
    -------
    list
        The batches' results in the order of ``batches`` (``None`` where
        ``on_result`` was given: it got them).

    Raises
    ------
    Exception
        The error of the first failing batch in the order of ``batches``, as
        a serial loop would raise it; the other tasks are cancelled.
    KeyboardInterrupt
        After cancelling the tasks (Ctrl-C while waiting).
    """
    from distributed import as_completed

    check_client(client)
    batches = list(batches)
    if not batches:
        return []
    workers, _ = cluster_threads(client)
    concurrency = math.ceil(len(batches) / workers)
    token = uuid.uuid4().hex[:12]
    [shared_future] = client.scatter([shared], broadcast=True, hash=False)
    futures = []
    results = [None] * len(batches)
    index_of = {}
    failed = {}
    try:
        for i, batch in enumerate(batches):
            fut = client.submit(_run_batch, func, shared_future, batch, concurrency,
                                key=f"{name}-{token}-{i}", retries=retries, pure=False)
            futures.append(fut)
            index_of[fut.key] = i
        pending = set(range(len(batches)))
        for fut in as_completed(futures):
            i = index_of[fut.key]
            pending.discard(i)
            if fut.status == "error":
                failed[i] = fut.exception()
                value = None
            else:
                value = fut.result()
            fut.release()
            if isinstance(value, _Failed):
                failed[i] = value.exc
            elif i not in failed:
                if on_result is not None:
                    on_result(i, value)
                else:
                    results[i] = value
            if failed:
                first = min(failed)
                # A serial loop stops at the first failure: wait only for the
                # batches before it (one of them may fail first).
                if not any(j < first for j in pending):
                    raise failed[first]
        return results
    except BaseException:  # Ctrl-C included: free the workers
        client.cancel([f for f in futures if not f.done()] + [shared_future], force=True)
        raise
    finally:
        client.cancel([shared_future])


# ----------------------------------------------------------------------
# DirectLiNGAM.bootstrap
# ----------------------------------------------------------------------

def bootstrap_directlingam(model, data, names, n_sampling, settings, client, reporter):
    """``DirectLiNGAM.bootstrap(X, n_sampling, client=client)``.

    The resamples' rows are drawn here, on the caller, exactly as the serial
    bootstrap draws them (lingam's ``sklearn.utils.resample`` calls on the
    model's ``random_state``); the fits run on the workers.

    Parameters
    ----------
    model : paralingam.DirectLiNGAM
        Its parameters are sent (as an unfitted clone), not its fit.
    data : ndarray, shape (n_samples, n_features)
        The checked data, sent to every worker once.
    names : list of str or None
        Column names, for error messages.
    n_sampling : int
    settings : dict
        ``model._checked_settings(n_features, names)``; its backend is resolved on
        each worker ("auto": the worker's GPU where it has one).
    client : distributed.Client
    reporter : object
        ``reporter.update_to(done)`` after each resample, ``reporter.close()``.

    Returns
    -------
    BootstrapResult
        As the serial bootstrap's, with ``timings_`` summed over the workers.
    """
    from sklearn import config_context
    from sklearn.base import clone
    from sklearn.utils import check_random_state, resample

    from .bootstrap import BOOTSTRAP_PHASES, BootstrapResult

    check_client(client)
    timings = dict.fromkeys(BOOTSTRAP_PHASES, 0.0)
    t0 = time.perf_counter()
    rng = check_random_state(model.random_state)
    index = np.arange(data.shape[0])
    with config_context(skip_parameter_validation=True):
        rows = [resample(index, random_state=rng) for _ in range(n_sampling)]
    timings["resample"] += time.perf_counter() - t0

    p = data.shape[1]
    adjacency_matrices = np.zeros((n_sampling, p, p))
    effects = np.zeros((n_sampling, p, p))
    # int32 rows halve the transfer; data[rows] is the same either way.
    index_dtype = np.int32 if data.shape[0] < 2**31 else np.intp
    batches = [(r.start, np.array(rows[r.start:r.stop], dtype=index_dtype))
               for r in split(n_sampling, client)]
    done = itertools.count(1)

    def collect(i, value):
        start, B, T, batch_timings = value
        adjacency_matrices[start:start + len(B)] = B
        effects[start:start + len(B)] = T
        for key, dt in batch_timings.items():
            timings[key] += dt
        for _ in range(len(B)):
            reporter.update_to(next(done))

    shared = {"model": clone(model), "data": data, "names": names, "settings": settings}
    try:
        map_batches(client, _directlingam_batch, batches, shared=shared, on_result=collect,
                    name="paralingam-bootstrap")
    finally:
        reporter.close()
    result = BootstrapResult(adjacency_matrices, effects, resampled_indices=rows)
    result.timings_ = timings
    return result


def _directlingam_batch(shared, batch, n_threads=1):
    """Fit the resamples of one batch (worker side), each as the serial bootstrap does.

    (Both call :func:`~paralingam.lingam.bootstrap.fit_resample`.)
    """
    from .. import _api
    from ..search import _backends
    from .bootstrap import BOOTSTRAP_PHASES, fit_resample

    model, data, names = shared["model"], shared["data"], shared["names"]
    settings = dict(shared["settings"])
    if "n_threads" not in settings["fit_options"]:
        # Explicit, so that the search's adaptive thread count (a clock shared
        # by the fits of a process) stays off beside the worker's other tasks;
        # small searches on one thread, as fit's default.
        n_threads = 1 if data.size < _api.SMALL_SEARCH else n_threads
        settings["fit_options"] = dict(settings["fit_options"], n_threads=n_threads)
    backend = _backends.resolve_backend(settings["backend"])
    if backend == "cuda":
        _cuda_context_in_this_thread()
    start, rows = batch
    m, p = len(rows), data.shape[1]
    B_all, T_all = np.zeros((m, p, p)), np.zeros((m, p, p))
    timings = dict.fromkeys(BOOTSTRAP_PHASES, 0.0)
    for j in range(m):
        B_all[j], T_all[j] = fit_resample(model, data, rows[j], start + j, names, settings,
                                          backend, timings)
    return start, B_all, T_all, timings


def _cuda_context_in_this_thread():
    """Make the CUDA backend's context current in this worker thread.

    The backend pushes its context once per process, in the thread of the
    first fit; a worker may run a later task on another of its threads.
    """
    import pycuda.driver as drv

    from .. import _gpu

    ctx = _gpu.context()
    current = drv.Context.get_current()
    if current is None or current.handle != ctx.handle:
        ctx.push()


# ----------------------------------------------------------------------
# VARLiNGAM.bootstrap
# ----------------------------------------------------------------------

def _index_dtype(n_rows):
    """int32 row indices (half the transfer) where they fit; the rows drawn are the same."""
    return np.int32 if n_rows < 2**31 else np.intp


def _worker_n_threads(n_threads, size):
    """Threads of one fit on a worker: 1 for small data (fit's default), else the task's share."""
    from .. import _api

    return 1 if size < _api.SMALL_SEARCH else n_threads


def _cuda_context_if(backend):
    """Push the CUDA context in this worker thread when ``backend`` resolves to CUDA."""
    from ..search import _backends

    resolved = _backends.resolve_backend(backend)
    if resolved == "cuda":
        _cuda_context_in_this_thread()
    return resolved


def chunk_batches(n_items, chunk, client, batch_size=None):
    """``(chunk_start, range)`` batches that never straddle a multiple of ``chunk``.

    Each chunk ``[c, c + chunk)`` is cut into near-equal consecutive pieces
    of at most ``batch_size`` items (default: :func:`split`'s), so that a
    task's items all belong to one chunk.

    Returns
    -------
    list of (int, range)
    """
    if batch_size is None:
        batch_size = len(split(n_items, client)[0]) if n_items else 1
    out = []
    for c in range(0, n_items, chunk):
        stop = min(c + chunk, n_items)
        pieces = math.ceil((stop - c) / batch_size)
        bounds = [c + (stop - c) * i // pieces for i in range(pieces + 1)]
        out.extend((c, range(a, b)) for a, b in zip(bounds[:-1], bounds[1:]))
    return out


def bootstrap_varlingam(template, coefs, residuals, n_samples, n_sampling, rng, client, reporter,
                        chunk):
    """The resamples of ``VARLiNGAM.bootstrap(X, n_sampling, client=client)``.

    The serial bootstrap draws the residuals' rows of ``chunk`` resamples,
    simulates those series together (one recursion over time for the chunk)
    and fits each. Here the rows are drawn on the caller in the same order
    from ``rng``; each task gets the rows of one chunk, simulates the whole
    chunk as the serial loop does (the matrix products of the recursion are
    then the same shape, so the series are the same to the bit) and fits its
    own part of it.

    Parameters
    ----------
    template : paralingam.VARLiNGAM
        Unfitted, with the lags, ``ar_coefs`` and criterion (``None``) that
        every resample's fit starts from.
    coefs : ndarray, shape (lags, n_features, n_features)
        The VAR fitted to the data, which the series are simulated from.
    residuals : ndarray, shape (n_samples - lags, n_features)
        Its residuals, which are resampled; sent to every worker once.
    n_samples, n_sampling : int
    rng : numpy.random.RandomState
    client : distributed.Client
    reporter : object
        ``reporter.update_to(done)`` after each resample, ``reporter.close()``.
    chunk : int
        Resamples the serial bootstrap simulates together.

    Returns
    -------
    adjacency_matrices, total_effects : ndarray
        Shape (n_sampling, n_features, n_features * (1 + lags)).
    timings : dict
        Seconds simulating, fitting and computing total effects, summed over
        the tasks (a chunk split over several tasks is simulated by each).
    last : tuple
        ``(ar_coefs, lags, residuals, causal_order, adjacency_matrices)`` of
        the last resample's fit: the state the serial bootstrap leaves.
    """
    from sklearn import config_context
    from sklearn.utils import resample

    check_client(client)
    timings = {"simulate": 0.0, "fit": 0.0, "total_effects": 0.0}
    t0 = time.perf_counter()
    index = np.arange(len(residuals))
    rows = np.empty((n_sampling, n_samples), dtype=_index_dtype(len(residuals)))
    with config_context(skip_parameter_validation=True):
        for k in range(n_sampling):
            rows[k] = resample(index, n_samples=n_samples, random_state=rng)
    timings["simulate"] += time.perf_counter() - t0  # the serial loop counts its draws there
    n_features = residuals.shape[1]
    width = n_features * (1 + coefs.shape[0])
    adjacency_matrices = np.zeros((n_sampling, n_features, width))
    effects = np.zeros_like(adjacency_matrices)
    batches = [(c, rows[c:c + chunk], r.start - c, r.stop - c)
               for c, r in chunk_batches(n_sampling, chunk, client)]
    done = itertools.count(1)
    last = []

    def collect(i, value):
        start, B, T, batch_timings, state = value
        adjacency_matrices[start:start + len(B)] = B
        effects[start:start + len(B)] = T
        for key, dt in batch_timings.items():
            timings[key] += dt
        if state is not None:
            last.append(state)
        for _ in range(len(B)):
            reporter.update_to(next(done))

    shared = {"model": template, "coefs": coefs, "residuals": residuals,
              "n_sampling": n_sampling}
    try:
        map_batches(client, _varlingam_batch, batches, shared=shared, on_result=collect,
                    name="paralingam-bootstrap")
    finally:
        reporter.close()
    return adjacency_matrices, effects, timings, last[0]


def _varlingam_batch(shared, batch, n_threads=1):
    """Simulate one chunk and fit its part ``[lo, hi)`` (worker side); mirrors
    the loop of ``VARLiNGAM.bootstrap``."""
    import copy

    from .bootstrap import _simulate, _var_total_effects

    template, coefs, residuals = shared["model"], shared["coefs"], shared["residuals"]
    chunk_start, rows, lo, hi = batch
    model = copy.copy(template)
    if model._lingam_model is not None:
        # The worker's threads share ``shared``: each task fits its own copy.
        model._lingam_model = copy.deepcopy(model._lingam_model)
    options = dict(model._fit_options or {})
    if "n_threads" not in options:
        # Explicit, as for DirectLiNGAM's tasks: the search's adaptive thread
        # count stays off beside the worker's other tasks, and the pruning
        # does not take every core of the machine.
        options["n_threads"] = _worker_n_threads(n_threads, rows.shape[1] * residuals.shape[1])
        model._fit_options = options
    _cuda_context_if(model._backend)
    timings = {"simulate": 0.0, "fit": 0.0, "total_effects": 0.0}
    t0 = time.perf_counter()
    series = _simulate(coefs, residuals[rows])
    timings["simulate"] += time.perf_counter() - t0
    ar_coefs, lags = template._ar_coefs, template._lags
    n = hi - lo
    B_all = np.zeros((n, residuals.shape[1], residuals.shape[1] * (1 + coefs.shape[0])))
    T_all = np.zeros_like(B_all)
    for j, b in enumerate(range(lo, hi)):
        t0 = time.perf_counter()
        model._ar_coefs, model._lags = ar_coefs, lags
        model.fit(series[b])
        t1 = time.perf_counter()
        B_all[j] = np.concatenate([*model._adjacency_matrices], axis=1)
        T_all[j] = _var_total_effects(model._adjacency_matrices, model._causal_order)
        timings["fit"] += t1 - t0
        timings["total_effects"] += time.perf_counter() - t1
    state = None
    if chunk_start + hi == shared["n_sampling"]:
        state = (model._ar_coefs, model._lags, model._residuals, model._causal_order,
                 model._adjacency_matrices)
    return chunk_start + lo, B_all, T_all, timings, state


# ----------------------------------------------------------------------
# MultiGroupDirectLiNGAM.bootstrap
# ----------------------------------------------------------------------

def bootstrap_multigroup(template, data, pk, coef_threshold, n_sampling, rng, client, reporter):
    """The resamples of ``MultiGroupDirectLiNGAM.bootstrap(X_list, n_sampling, client=client)``.

    The rows of every group of every resample are drawn on the caller in the
    serial bootstrap's order (for each resample, each group in turn, from
    ``rng``); the workers fit them.

    Parameters
    ----------
    template : paralingam.MultiGroupDirectLiNGAM
        Unfitted copy with the model's parameters.
    data : list of ndarray
        The checked groups, sent to every worker once.
    pk : ndarray or None
        The checked prior-knowledge matrix.
    coef_threshold : float or None
    n_sampling : int
    rng : numpy.random.RandomState
    client : distributed.Client
    reporter : object

    Returns
    -------
    adjacency_matrices, total_effects : ndarray
        Shape (n_groups, n_sampling, n_features, n_features).
    last_order : list of int
        The causal order of the last resample.
    """
    from sklearn import config_context
    from sklearn.utils import resample

    check_client(client)
    indices = [np.arange(len(X)) for X in data]
    dtype = _index_dtype(max(len(X) for X in data))
    with config_context(skip_parameter_validation=True):
        rows = [[resample(idx, random_state=rng).astype(dtype) for idx in indices]
                for _ in range(n_sampling)]
    G, p = len(data), data[0].shape[1]
    ams = np.zeros((G, n_sampling, p, p))
    tes = np.zeros((G, n_sampling, p, p))
    orders = [None] * n_sampling
    batches = [(r.start, rows[r.start:r.stop]) for r in split(n_sampling, client)]
    done = itertools.count(1)

    def collect(i, value):
        start, batch_orders, B, T = value
        m = len(batch_orders)
        ams[:, start:start + m] = B
        tes[:, start:start + m] = T
        orders[start:start + m] = batch_orders
        for _ in range(m):
            reporter.update_to(next(done))

    shared = {"model": template, "data": data, "pk": pk, "coef_threshold": coef_threshold}
    try:
        map_batches(client, _multigroup_batch, batches, shared=shared, on_result=collect,
                    name="paralingam-bootstrap")
    finally:
        reporter.close()
    return ams, tes, orders[-1]


def _multigroup_batch(shared, batch, n_threads=1):
    """Fit the resamples of one batch (worker side).

    Mirrors the loop of ``MultiGroupDirectLiNGAM.bootstrap``.
    """
    import copy

    from .bootstrap import total_effects

    model, data = shared["model"], shared["data"]
    if model.n_threads is None:
        # The adaptive lasso's default is every core of the machine: share
        # the worker's threads among its tasks instead.
        model = copy.copy(model)
        model.n_threads = _worker_n_threads(n_threads, data[0].size)
    backend = model._adjacency_backend(model.backend)
    if backend == "cuda":
        _cuda_context_in_this_thread()
    start, rows = batch
    G, p = len(data), data[0].shape[1]
    B_all = np.zeros((G, len(rows), p, p))
    T_all = np.zeros_like(B_all)
    orders = []
    for j, group_rows in enumerate(rows):
        order, matrices = model._fit_groups([X[r] for X, r in zip(data, group_rows)],
                                            shared["pk"], shared["coef_threshold"], backend)
        for g, B in enumerate(matrices):
            B_all[g, j] = B
            T_all[g, j] = total_effects(B, order)
        orders.append(order)
    return start, orders, B_all, T_all
