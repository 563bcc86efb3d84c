"""Which backend runs a fit."""

import logging

logger = logging.getLogger("paralingam")

BACKENDS = ("auto", "cpu", "cuda")
_auto_reported = False


def cuda_unavailable_reason():
    """Why the CUDA backend cannot run here, or None when it can.

    Never raises: a broken CUDA installation can fail with any exception
    (OSError from a missing libcuda, pycuda's own errors), and
    ``backend="auto"`` must then still run on the CPU.
    """
    try:
        from . import _cuda  # noqa: F401  (built by the GPU work)
    except Exception as exc:
        return f"the CUDA backend is not available ({type(exc).__name__}: {exc})"
    try:
        return _cuda.unavailable_reason()
    except Exception as exc:
        return f"checking for CUDA failed ({type(exc).__name__}: {exc})"


def resolve_backend(name):
    """Return ``"cpu"`` or ``"cuda"`` for a requested backend name.

    ``"auto"`` takes CUDA when it is usable and otherwise the CPU, saying so
    once per process through the ``paralingam`` logger.
    """
    global _auto_reported
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {name!r}")
    if name == "cpu":
        return "cpu"
    reason = cuda_unavailable_reason()
    if reason is None:
        return "cuda"
    if name == "cuda":
        raise RuntimeError(f"backend='cuda' cannot run: {reason}")
    if not _auto_reported:
        logger.info("paralingam: using the CPU backend: %s", reason)
        _auto_reported = True
    return "cpu"


def check_devices(devices, backend="auto"):
    """``devices=`` of ``fit`` checked without a GPU: None, ``"all"`` or a tuple of ids.

    Raises
    ------
    ValueError
        Naming the problem: not ``None``, ``"all"`` or a non-empty sequence
        of distinct non-negative device ids, or devices with ``backend="cpu"``.
    """
    import numbers

    if devices is None:
        return None
    if backend == "cpu":
        raise ValueError(f"devices={devices!r} selects GPUs, but backend='cpu'; "
                         "use backend='cuda' (or 'auto'), or leave devices=None")
    if isinstance(devices, str):
        if devices == "all":
            return "all"
        raise ValueError(f"devices must be None, 'all' or a list of GPU ids; got {devices!r}")
    if isinstance(devices, numbers.Integral) and not isinstance(devices, bool):
        raise ValueError(f"devices must be None, 'all' or a list of GPU ids; got the number "
                         f"{devices!r} (write devices=[{devices!r}])")
    try:
        ids = list(devices)
    except TypeError:
        raise ValueError(f"devices must be None, 'all' or a list of GPU ids; got {devices!r}") from None
    if not ids:
        raise ValueError("devices must name at least one GPU; got an empty list")
    for d in ids:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 0:
            raise ValueError(f"devices must be non-negative integer GPU ids; got {d!r} in {devices!r}")
    ids = [int(d) for d in ids]
    dup = sorted({d for d in ids if ids.count(d) > 1})
    if dup:
        raise ValueError(f"devices lists GPU {dup[0]} more than once: {ids}")
    return tuple(ids)
