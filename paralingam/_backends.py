"""Which backend runs a fit."""

import logging

logger = logging.getLogger("paralingam")

BACKENDS = ("auto", "cpu", "cuda")
_auto_reported = False


def cuda_unavailable_reason():
    """Why the CUDA backend cannot run here, or None when it can."""
    try:
        from . import _cuda  # noqa: F401  (built by the GPU work)
    except ImportError as exc:
        return f"the CUDA backend is not available ({exc})"
    return _cuda.unavailable_reason()


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
