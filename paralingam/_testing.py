"""Test and profiling hooks, kept off the product's call paths.

No product module imports this one: the tests, ``tools/`` and the
benchmark probes do. Where a hook's implementation must stay inside a
compiled product module (it needs that module's C-level internals), the
hook is reached from here, so callers have one place to look and the
implementation can move without touching them:

* :func:`pair_moments`: the CPU kernels' moments of one pair
  (``search/_cpu_testing.pyx``, compiled like the search);
* :func:`search_with_fault`: a CUDA search that faults on purpose
  (``inject_fault`` of ``search._scheduler.search`` and the ``fault`` kernel
  of ``kernels/paralingam.cu``, which stay there while the multi-GPU
  scheduler is rewritten);
* :func:`launch_only` and :func:`empty_launch_and_poll`: the host cost of
  the scheduler's launches (``tools/profile_launch.py``; they use the
  scheduler's own launch path, so they live in ``search/_scheduler.pyx``).
"""

__all__ = ["pair_moments", "search_with_fault", "launch_only", "empty_launch_and_poll"]


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


def search_with_fault(data, where, **options):
    """``search._cuda.search`` of ``data`` that faults in its first iteration.

    ``where="launch"``: a launch fails (a non-sticky error; the context stays
    usable); ``where="kernel"``: a kernel writes an illegal address (sticky:
    CUDA is unusable for the rest of the process). ``options``: the keywords
    of ``search._cuda.search``.
    """
    if where not in ("launch", "kernel"):
        raise ValueError(f"where must be 'launch' or 'kernel'; got {where!r}")
    from .search import _cuda

    return _cuda.search(data, inject_fault=where, **options)


def launch_only(module, dev, repeats):
    """Host cost of one ``cuLaunchKernel`` of the scheduler (seconds; ``tools/profile_launch.py``)."""
    from .search import _scheduler

    return _scheduler.launch_only(module, dev, repeats)


def empty_launch_and_poll(module, dev, status_host, repeats):
    """Seconds per launch and status poll round trip of the scheduler (``tools/profile_launch.py``)."""
    from .search import _scheduler

    return _scheduler.empty_launch_and_poll(module, dev, status_host, repeats)
