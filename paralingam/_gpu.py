"""The CUDA context and fault state that every GPU step shares.

The order search (:mod:`paralingam.search._cuda`), the adjacency step
(:mod:`paralingam.adjacency._cuda_adjacency`) and the HSIC tests run in one
primary context per device, made current on each thread that runs one by
:func:`context`. A kernel fault (illegal address, trap) is sticky in CUDA:
it poisons the context for the rest of the process. :func:`note_fault`
records it, so that later fits report it (:func:`unavailable_reason`)
instead of failing obscurely, and drops every kept device buffer.

Each GPU step keeps device buffers between fits (bootstrap resamples reuse
them) and registers the function that frees them with
:func:`register_cache`; :func:`clear_caches` frees them all. Every kernel
source is compiled through :func:`cubin` (PyCUDA's compile and its disk
cache, keyed by the source, the options and the compiler), and
:func:`compile_soon` starts compiles on threads ahead of their step. This
module imports no GPU step: they import it, so the import graph has no
circle.
"""

import atexit
import concurrent.futures
import functools
import threading

from ._memory import GPUMemoryError  # noqa: F401  (re-exported for the GPU steps)

__all__ = ["GPUMemoryError", "unavailable_reason", "context", "exclusive", "register_cache",
           "clear_caches", "note_fault", "guarded", "arch", "cubin", "compile_soon"]

# Set after a kernel fault: CUDA keeps such errors (illegal address, trap)
# for the rest of the process, so the backend is unusable until a restart.
_FAULT = None
# Functions ``clear(after_fault)`` that free a GPU step's kept buffers.
_CACHES = []


def unavailable_reason():
    """Why the CUDA backend cannot run here, or None when it can."""
    if _FAULT is not None:
        return (f"a GPU kernel fault earlier in this process left CUDA unusable until the "
                f"process restarts ({_FAULT})")
    try:
        import pycuda.driver as drv
    except ImportError as exc:
        return f"pycuda is not installed ({exc}); install paralingam[cuda]"
    try:
        drv.init()
        if drv.Device.count() == 0:
            return "no CUDA device found"
        from .search import _scheduler

        _scheduler.load_driver()
    except Exception as exc:  # driver missing or broken
        return f"the CUDA driver is not usable ({exc})"
    return None


class _PushedContexts:
    """The primary contexts one thread made current, popped when the thread ends.

    A CUDA context is current per thread, and PyCUDA aborts the whole process
    when a thread ends with a context still pushed ("A context was still
    active when the context stack was being cleaned up"), as the worker
    threads of a Dask worker do at shutdown. A thread's ``threading.local``
    values are deleted by that thread as it ends, before PyCUDA's per-thread
    cleanup, so :meth:`release` runs there; the main thread releases at exit.
    """

    def __init__(self):
        self.contexts = []

    def release(self):
        while self.contexts:
            ctx = self.contexts.pop()
            try:
                ctx.pop()  # (pops the thread's current context: the last pushed)
            except Exception:
                pass

    def __del__(self):
        self.release()


_THREAD = threading.local()


@functools.lru_cache(maxsize=None)
def _primary_context(device):
    import pycuda.driver as drv

    drv.init()
    return drv.Device(device).retain_primary_context()


def context(device=0):
    """The device's primary context, made current on the calling thread.

    Each thread that runs a GPU step pushes it once (the buffers and kernels
    kept between fits live in it and serve every thread); it is popped when
    the thread ends (see ``_PushedContexts``).
    """
    ctx = _primary_context(device)
    pushed = getattr(_THREAD, "pushed", None)
    if pushed is None:
        pushed = _THREAD.pushed = _PushedContexts()
        if threading.current_thread() is threading.main_thread():
            atexit.register(pushed.release)
    if ctx not in pushed.contexts:
        ctx.push()
        pushed.contexts.append(ctx)
    return ctx


# One GPU step at a time in a process: the steps keep their device buffers
# between fits (one workspace per problem shape), which the fits of two
# threads would otherwise share mid-run.
_STEP_LOCK = threading.RLock()


def exclusive(step):
    """Decorator: ``step`` runs alone among the process's GPU steps (other threads wait)."""
    @functools.wraps(step)
    def run_alone(*args, **kwargs):
        with _STEP_LOCK:
            return step(*args, **kwargs)
    return run_alone


def register_cache(clear):
    """Register ``clear(after_fault=False)``, which frees a GPU step's kept buffers.

    ``after_fault=True``: the context is gone, so the buffers are forgotten,
    not freed. Returns ``clear`` (usable as a decorator).
    """
    if clear not in _CACHES:
        _CACHES.append(clear)
    return clear


def clear_caches(after_fault=False):
    """Free (or, after a fault, forget) the kept buffers of every GPU step."""
    for clear in list(_CACHES):
        clear(after_fault=after_fault)


def note_fault(exc):
    """Record a sticky kernel fault: later fits report it instead of failing obscurely."""
    global _FAULT
    _FAULT = str(exc)
    clear_caches(after_fault=True)  # their memory went with the context


def guarded(launch, *args):
    """Run ``launch(*args)``; on a sticky CUDA error, record the fault; re-raise any error."""
    import pycuda.driver as drv

    try:
        return launch(*args)
    except drv.Error as exc:
        try:
            drv.Context.synchronize()  # non-sticky errors leave the context usable
        except drv.Error:
            note_fault(exc)  # sticky: the CUDA backend is unusable from now on
        raise


def in_order(drv, solver_call, *args, wait=True):
    """``solver_call(*args)`` (a cuSOLVER call through CuPy), in order with the PyCUDA work around it.

    PyCUDA's copies and kernels here run on the legacy default stream, but
    CuPy's binding may run the call on CuPy's current stream: a caller's
    non-blocking stream (``with cupy.cuda.Stream(non_blocking=True):``)
    neither waits for the default stream's work nor is waited for by it.
    The context is synchronised on both sides, which orders the call on any
    stream (about 10 us each, beside factorisations of milliseconds).
    ``wait=False`` leaves out the second: the call runs while the host goes
    on, and the caller synchronises the context before it reads the results
    (``paralingam.adjacency._cuda_qr``'s QR started ahead).
    """
    drv.Context.synchronize()
    solver_call(*args)
    if wait:
        drv.Context.synchronize()


def arch():
    """The current context's device as nvcc names its architecture (``"sm_90"``)."""
    import pycuda.driver as drv

    major, minor = drv.Context.get_device().compute_capability()
    return f"sm_{major}{minor}"


# Compiles started by compile_soon, by (source, options, arch): their futures.
_COMPILES = {}
_COMPILES_LOCK = threading.Lock()


def _nvcc(source, options, arch):
    from pycuda.compiler import compile as nvcc_compile

    return nvcc_compile(source, options=list(options), arch=arch, no_extern_c=True)


def cubin(source, options, arch):
    """The cubin of the CUDA ``source`` compiled with ``options`` for ``arch``.

    PyCUDA's compile, whose disk cache makes it a file read after the first
    process on a machine; or the result of the same compile that
    :func:`compile_soon` started (waited for).
    """
    key = (source, tuple(options), arch)
    with _COMPILES_LOCK:
        future = _COMPILES.get(key)
    if future is not None:
        try:
            return future.result()
        except Exception:
            pass  # compiled again here, where its error is raised
    return _nvcc(source, options, arch)


def compile_soon(jobs, arch):
    """Start compiling each ``(source, options)`` of ``jobs`` for ``arch`` on a thread of its own.

    The first fit on a machine compiles every GPU step's kernels, several
    seconds each (docs/user_guide/gpu.rst); started together they take about
    as long as the longest. :func:`cubin` then waits for the one it needs. A
    job is started once per process; with a warm disk cache it is a file read.
    The threads are not daemons: a process that ends soon after waits for its
    compiles, so that no cache file is left half written.
    """
    for source, options in jobs:
        key = (source, tuple(options), arch)
        with _COMPILES_LOCK:
            if key in _COMPILES:
                continue
            future = _COMPILES[key] = concurrent.futures.Future()

        def run(future=future, source=source, options=options):
            try:
                future.set_result(_nvcc(source, options, arch))
            except BaseException as exc:  # (raised again by cubin's own compile)
                future.set_exception(exc)

        threading.Thread(target=run, name="paralingam-nvcc").start()
