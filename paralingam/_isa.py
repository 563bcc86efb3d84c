"""Choose the build of a compiled CPU extension for the processor it runs on.

The CPU extensions (``search._cpu``, ``adjacency._lasso``,
``search._multi_group``) are compiled for
the portable x86-64 baseline and, on x86-64, also for the micro-architecture
levels x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512) as modules of their own
(``_cpu_x86_64_v4`` ...; see ``setup.py``). :func:`load` imports the best
build the processor runs, so one installation (a wheel too) is portable and
still uses the wide vectors the float32 search's exp and log need: without
them the baseline build's search is several times slower
(docs/design/cpu_builds.rst). ``PARALINGAM_CPU_BUILD`` (``baseline``,
``x86_64_v3`` or ``x86_64_v4``) forces a build, for tests and comparisons.

The builds differ only in rounding (FMA contraction, vector widths), as
builds on different machines do: orders agree unless two candidates'
float64 scores tie to the last bits, and edge weights agree to rounding.
"""

import functools
import importlib
import os

__all__ = ["LEVELS", "load", "level"]

# Best first: the processor flags (as /proc/cpuinfo names them) each level needs.
LEVELS = {
    "x86_64_v4": {"avx2", "fma", "bmi1", "bmi2", "f16c", "movbe", "avx512f", "avx512bw",
                  "avx512cd", "avx512dq", "avx512vl"},
    "x86_64_v3": {"avx2", "fma", "bmi1", "bmi2", "f16c", "movbe"},
}
BASELINE = "baseline"


def _cpu_flags():
    """The processor's feature flags from /proc/cpuinfo (empty where it is absent)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@functools.lru_cache(maxsize=None)
def level():
    """The build level this process uses: a key of :data:`LEVELS` or ``"baseline"``.

    Raises
    ------
    ValueError
        When ``PARALINGAM_CPU_BUILD`` names no known build.
    """
    forced = os.environ.get("PARALINGAM_CPU_BUILD")
    if forced:
        if forced != BASELINE and forced not in LEVELS:
            raise ValueError(f"PARALINGAM_CPU_BUILD={forced!r}: expected one of "
                             f"{[BASELINE, *LEVELS]}")
        return forced
    flags = _cpu_flags()
    for name, needed in LEVELS.items():
        if needed <= flags:
            return name
    return BASELINE


def load(name):
    """Import the compiled extension ``paralingam.<name>`` in its best build.

    Falls back to the baseline build where the level's build is missing (a
    build with ``PARALINGAM_NATIVE=1``, or a platform without levels).

    Parameters
    ----------
    name : str
        The module's name within the package: ``"search._cpu"``,
        ``"adjacency._lasso"``, ``"search._multi_group"`` or
        ``"search._cpu_testing"``.

    Raises
    ------
    ImportError
        When not even the baseline build exists.
    """
    return _load(name, level())


@functools.lru_cache(maxsize=None)
def _load(name, chosen):
    """The module :func:`load` gives for level ``chosen``, remembered.

    A fit asks for its extension each time, and a failed import of a missing
    level (a native build has none) searches the import path again each time.
    """
    if chosen != BASELINE:
        try:
            return importlib.import_module(f"paralingam.{name}_{chosen}")
        except ImportError:
            pass
    return importlib.import_module(f"paralingam.{name}")
