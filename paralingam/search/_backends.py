"""Which backend runs a fit."""

import logging

from ._devices import check_devices  # noqa: F401  (re-exported for fit's checks)

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
