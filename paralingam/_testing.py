"""Test and profiling hooks, kept off the product's call paths.

No product module imports this one: the tests, ``tools/`` and the
benchmark probes do. Hooks that need a compiled module's C-level internals
are compiled apart from it and reached from here, so callers have one place
to look:

* :func:`pair_moments`: the CPU kernels' moments of one pair
  (``search/_cpu_testing.pyx``, compiled like the search);
* :func:`search_with_fault`: a CUDA search that faults on purpose, run
  with a module whose round kernels fail to launch or fault
  (``kernels/testing.cu``); the product search has no fault switch;
* :func:`launch_only` and :func:`empty_launch_and_poll`: the host cost of
  the scheduler's launches (``tools/profile_launch.py``;
  ``search/_scheduler_testing.pyx``, which cimports the scheduler's own
  launch and status wait);
* :func:`fit_memory_peaks`: the traced host memory of a fit before and
  during its adjacency step (tests/test_adjacency_memory.py,
  ``benchmarks/bench_prep_memory.py``).
"""

__all__ = ["pair_moments", "search_with_fault", "launch_only", "empty_launch_and_poll",
           "fit_memory_peaks"]


def fit_memory_peaks(X, **fit_options):
    """Peaks of the host memory ``paralingam.fit(X, **fit_options)`` allocates (tracemalloc), in bytes.

    Returns
    -------
    dict
        ``held``: what the fit holds when its adjacency step starts;
        ``before_adjacency``: its peak up to then; ``adjacency``: the peak
        during the step.
    """
    import tracemalloc

    import paralingam

    from . import _api

    peaks = {}
    adjacency = _api.adjacency

    def traced(*args, **kwargs):
        peaks["held"], peaks["before_adjacency"] = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        out = adjacency(*args, **kwargs)
        peaks["adjacency"] = tracemalloc.get_traced_memory()[1]
        return out

    _api.adjacency = traced
    try:
        tracemalloc.start()
        tracemalloc.reset_peak()
        paralingam.fit(X, **fit_options)
    finally:
        tracemalloc.stop()
        _api.adjacency = adjacency
    return peaks


def pair_moments(xa, xb, rho, *, use_float=False, both=True):
    """Mean moments of the standardised residuals of one pair, as the CPU search computes them.

    In the build of the CPU extensions this process uses (``paralingam._isa``).

    Parameters
    ----------
    xa, xb : ndarray of float64, shape (n,)
        Two standardised variables (C-contiguous).
    rho : float
        Their correlation, ``|rho| < 1``.
    use_float : bool
        The float kernels' moments (the default search's arithmetic).
    both : bool
        Also the moments of the other residual.

    Returns
    -------
    list of float
        ``[mean log cosh u, mean u exp(-u^2/2)]`` of ``u = (xa - rho xb) / s``
        and, with ``both``, the same of ``v = (xb - rho xa) / s``.
    """
    from . import _isa

    return _isa.load("search._cpu_testing").pair_moments(xa, xb, rho, use_float=use_float,
                                                         both=both)


# The kernels of a threshold round, which the kernel-fault variant replaces
# by the faulting kernels of kernels/testing.cu (renamed on the command line).
PL_TESTING_RENAMED = ("worker_f32", "worker_f64", "all_pairs_f32", "all_pairs_f64")


def search_with_fault(data, where, **options):
    """``search._cuda.search`` of ``data`` that faults in its first threshold round.

    ``where="launch"``: the round kernel's launch fails (more threads per
    block than any device allows: a non-sticky error; the context stays
    usable); ``where="kernel"``: the round kernel writes an illegal address
    once the host waits for its status (sticky: CUDA is unusable for the
    rest of the process). ``options``: the keywords of
    ``search._cuda.search`` (one GPU).

    The search runs as in production, with a module of its own: while it
    runs, ``search._cuda.module`` gives that module instead of the
    search's kernels.
    """
    if where not in ("launch", "kernel"):
        raise ValueError(f"where must be 'launch' or 'kernel'; got {where!r}")
    if options.get("devices") is not None:
        raise ValueError("search_with_fault runs the single-GPU search (devices=None)")
    from ._constants import kernel_text
    from .search import _cuda, _scheduler

    real = _cuda.module(options.get("threads_per_block"), options.get("min_blocks"))
    if where == "launch":
        # The kernels as compiled, with 128 warps (4096 threads) per worker
        # block: the first round's launch is refused. Its own grid, as
        # occupancy has no answer for such a block.
        faulty = _scheduler.Module(real.image, 128, programmatic=False)
        options.setdefault("blocks", 1)
    else:
        source = _cuda.kernel_source() + "\n" + kernel_text("testing.cu")
        renames = [f"-D{name}=pl_product_{name}" for name in PL_TESTING_RENAMED]
        cubin = _cuda.compile_kernels(source, real.warps, 0, options=renames)
        faulty = _scheduler.Module(cubin, real.warps, programmatic=real.programmatic)
    product_module = _cuda.module
    _cuda.module = lambda *args, **kwargs: faulty
    try:
        return _cuda.search(data, **options)
    finally:
        _cuda.module = product_module
        faulty.unload()  # (after a sticky fault this fails, unnoticed: the context is gone)


def launch_only(module, dev, repeats):
    """Host cost of one ``cuLaunchKernel`` of the scheduler (seconds; ``tools/profile_launch.py``)."""
    from .search import _scheduler_testing

    return _scheduler_testing.launch_only(module, dev, repeats)


def empty_launch_and_poll(module, dev, status_host, repeats):
    """Seconds per launch and status poll round trip of the scheduler (``tools/profile_launch.py``)."""
    from .search import _scheduler_testing

    return _scheduler_testing.empty_launch_and_poll(module, dev, status_host, repeats)


def module_global(module, name):
    """Device address and size of a loaded module's ``__device__`` variable (the engines'
    diagnostic sums, ``benchmarks/bench_multi_gpu.py --mode engine-stats``)."""
    from .search import _scheduler_testing

    return _scheduler_testing.module_global(module, name)
