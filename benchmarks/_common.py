"""The command line and result files shared by the benchmark scripts.

Every script takes ``--json PATH`` (where to write its result; default
``<benchmark>_<machine>.json`` in the current folder), ``--machine LABEL``
(the machine kind in that name, e.g. ``h100`` or ``vm_2cores``; default: the
GPU's short name for GPU benchmarks, else ``<cores>cores``) and, where it
times fits, ``--repeats N``, ``--sizes PxN ...`` and ``--quick`` (small
sizes for a smoke run). A script with several modes (``--mode``) writes each
mode but its main one into a section of the same result file, so that
``benchmarks/results/`` keeps one current file per benchmark and machine kind:
a run replaces its own part of the file and leaves the other modes' sections.
The file, and each section, starts with a ``provenance`` record (commit,
machine, command line, versions) so that a number quoted in the
documentation can be traced to its run; rows carried over from an earlier
run name their own ``commit``. ``python benchmarks/report.py`` renders the
documentation's tables and plots from them.
"""

import argparse
import ast
import contextlib
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The folder of the E. coli flux sample (ecoli_core_fluxes_n10000.npz): the
# benchmarks' --data-dir default (.gpu/data on the GPU machine).
DATA_DIR = os.environ.get("PARALINGAM_DATA", "/work/shared/data")


def parse_size(text):
    """``"500x1024"`` -> ``(500, 1024)`` (variables, samples)."""
    try:
        p, n = text.lower().split("x")
        return int(p), int(n)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected PxN such as 500x1024, got {text!r}") from None


def parser(name, description, *, sizes=None, repeats=None, gpu=False, quick=None, modes=None):
    """An argument parser with the options every benchmark shares.

    Parameters
    ----------
    name : str
        The benchmark's name, the first part of the default result file name.
    description : str
        Shown by ``--help``.
    sizes : list of str, optional
        Default ``--sizes`` (``PxN`` strings); None leaves the option out.
    repeats : int, optional
        Default ``--repeats``; None leaves the option out.
    gpu : bool
        Whether the machine label defaults to the GPU's name.
    quick : str, optional
        What ``--quick`` does (help text); None leaves the option out.
    modes : list of str, optional
        The ``--mode`` choices, the first the default (the main result); the
        others are written as sections of the result file. None leaves the
        option out.
    """
    ap = argparse.ArgumentParser(description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.set_defaults(_benchmark=name, _gpu=gpu)
    ap.add_argument("--json", metavar="PATH",
                    help="result file (default: <benchmark>_<machine>.json here)")
    ap.add_argument("--machine", metavar="LABEL",
                    help="machine kind in the result's name and provenance")
    if sizes is not None:
        ap.add_argument("--sizes", nargs="*", default=list(sizes), metavar="PxN",
                        help="cases as variables x samples (default: %(default)s)")
    if repeats is not None:
        ap.add_argument("--repeats", type=int, default=repeats,
                        help="timed runs per case; the median is reported (default: %(default)s)")
    if quick is not None:
        ap.add_argument("--quick", action="store_true", help=quick)
    if modes is not None:
        ap.add_argument("--mode", choices=list(modes), default=modes[0],
                        help="what to measure (default: %(default)s); other modes than the "
                             "default write their own section of the result file")
        ap.set_defaults(_modes=list(modes))
    return ap


def _git(*args):
    try:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _gpu_name():
    try:
        import pycuda.driver as drv

        drv.init()
        return drv.Device(0).name()
    except Exception:
        return None


def machine_label(args):
    """The ``--machine`` label, or a default from the GPU or the core count."""
    if getattr(args, "machine", None):
        return args.machine
    if getattr(args, "_gpu", False):
        name = _gpu_name()
        if name:
            return name.replace("NVIDIA ", "").split()[0].lower()
    return f"{os.cpu_count()}cores"


def commit():
    """The commit measured: ``PARALINGAM_COMMIT`` where the caller sets it (the
    copy of .git beside a device machine's tree may lag it), else git's short
    HEAD, with ``+dirty`` when tracked files differ from it."""
    known = os.environ.get("PARALINGAM_COMMIT")
    if known:
        return known
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    return _git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")


def provenance(args):
    """Where and how a result was measured (commit, machine, versions, command)."""
    import numpy as np

    try:
        import paralingam

        version = paralingam.__version__
    except Exception:
        version = None
    return {
        "commit": commit(),
        "machine": machine_label(args),
        "gpu": _gpu_name() if getattr(args, "_gpu", False) else None,
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "paralingam": version,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    }


def write_result(args, payload, section=None):
    """Write ``payload`` with its provenance to the result file; return the path.

    A section is a top-level entry of the file with its own ``provenance``
    (another mode's result, or a tool's such as ``tools/ab_cpu_builds.sh``'s
    ``builds``). With ``--mode`` other than the script's first mode, the
    payload replaces only the section named after the mode (``-`` read as
    ``_``) of an existing file, and with ``section`` the section of that
    name; otherwise it replaces everything but the sections.
    """
    path = Path(args.json or f"{args._benchmark}_{machine_label(args)}.json")
    record = {"provenance": provenance(args), **payload}
    old = json.loads(path.read_text()) if path.exists() else {}
    sections = {k: v for k, v in old.items() if isinstance(v, dict) and "provenance" in v}
    modes = getattr(args, "_modes", None)
    if section is None and modes and args.mode != modes[0]:
        section = args.mode.replace("-", "_")
    if section is not None:
        record = {**old, section: record}
    else:
        record = {**record, **{k: v for k, v in sections.items() if k not in record}}
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")
    return path


def fit_search_settings(n):
    """The keyword arguments ``paralingam.fit`` gives the CUDA search by default
    (``paralingam.search._cuda.search``), for data of ``n`` samples."""
    from paralingam import _api

    return dict(threshold=True, gamma0=_api.default_gamma0(n), c=_api.DEFAULT_C,
                dtype="float32", collinear_tol=_api.COLLINEAR_TOL,
                explained_tol=_api.EXPLAINED_TOL, drift_tol=_api.DRIFT_TOL)


# The paper's synthetic grid. A size's data have the seed 100 + its position
# here (7 off the grid), in every tool that times grid cases.
GRID = [(p, n) for p in (100, 200, 500, 1000) for n in (1024, 2048, 4096, 8192)]


def grid_data(p, n, density="sparse"):
    """The grid's data of size (p, n): an (n, p) array.

    Uses only ``paralingam.datasets.make_lingam_data``, which every tree
    since 0cb7114 has, so that fit_case.py times older trees in A/B runs.
    """
    from paralingam.datasets import make_lingam_data

    seed = 100 + GRID.index((p, n)) if (p, n) in GRID else 7
    return make_lingam_data(p, n, density=density, random_state=seed)[0]


def ecoli_full():
    """The E. coli core flux sample (n=10,000) and its label, or the tests' subset where it is missing."""
    import numpy as np

    for path in (ROOT / ".gpu" / "data" / "ecoli_core_fluxes_n10000.npz",
                 ROOT.parent / "shared" / "data" / "ecoli_core_fluxes_n10000.npz"):
        if path.exists():
            with np.load(path, allow_pickle=False) as f:
                return np.array(f["X"], dtype=np.float64), "n=10000"
    with np.load(ROOT / "tests" / "data" / "ecoli_core_subset.npz") as f:
        return np.array(f["X"], dtype=np.float64), "n=1000 (subset: the full sample is missing)"


def best_time(func, repeats):
    """Least wall time of ``repeats`` calls of ``func()``, and the last result."""
    _, times, out = median_time(func, repeats)
    return min(times), out


def median_time(func, repeats):
    """Median wall time of ``repeats`` calls of ``func()``, all the times, and the last result."""
    times = []
    out = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = func()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, out


def parse_variants(specs, example):
    """``--variant LABEL=OPTIONS`` strings as {label: compile options}, in order.

    Raises SystemExit naming a malformed spec or a label given twice (or the
    reserved ``default``: the kernels as they are); ``example`` is shown
    as the form to use.
    """
    variants = {}
    for spec in specs:
        label, eq, options = spec.partition("=")
        if not eq or not label or not options.split():
            raise SystemExit(f"--variant {spec!r}: give LABEL=OPTIONS, e.g. {example}")
        if label == "default" or label in variants:
            raise SystemExit(f"--variant {spec!r}: the label {label!r} is taken (default: the "
                             "kernels as they are)")
        variants[label] = tuple(options.split())
    return variants


def host_settings(options):
    """A variant's options as (compile options, {name: value} of the host loop's
    ``MULTI_*`` settings in ``paralingam.search._cuda``).

    An option ``MULTI_NAME=VALUE`` (a Python literal) is such a setting; the
    others are compile options. Raises SystemExit naming a setting ``_cuda``
    lacks or a value that is not a literal.
    """
    from paralingam.search import _cuda

    compile_options, settings = [], {}
    for option in options:
        if not (option.startswith("MULTI_") and "=" in option):
            compile_options.append(option)
            continue
        name, value = module_setting(_cuda, option, "--variant")
        settings[name] = value
    return tuple(compile_options), settings


def module_setting(module, option, flag):
    """``option``, ``"NAME=VALUE"``, as (NAME, the Python literal VALUE) of a
    constant that ``module`` has (an A/B's setting, set on the module).

    Raises SystemExit naming the command line's ``flag`` and a name the
    module lacks or a value that is not a literal.
    """
    name, _, value = option.partition("=")
    if not hasattr(module, name):
        raise SystemExit(f"{flag}: {module.__name__} has no setting {name}")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise SystemExit(f"{flag}: {option!r} needs a Python literal after '='") from None


@contextlib.contextmanager
def compile_hook(change):
    """While active, the search's kernels compile as ``change(source, peers)`` says.

    ``change`` returns the source to compile (the argument, or another
    tree's) and the compile options to add; ``peers`` is whether the module
    is the multi-GPU one. The loaded modules are dropped on entry and exit,
    so that each search loads those of the kernels it asks for (from the
    compile cache after the first).
    """
    from paralingam.search import _cuda

    original = _cuda.compile_kernels

    def compile_kernels(source, warps, min_blocks, peers=False, options=()):
        source, added = change(source, peers)
        return original(source, warps, min_blocks, peers, tuple(options) + tuple(added))

    _cuda.compile_kernels = compile_kernels  # (_cuda._module looks it up at each call)
    _cuda._module.cache_clear()
    try:
        yield
    finally:
        _cuda.compile_kernels = original
        _cuda._module.cache_clear()


def engine_alive_share(stats, threshold_rounds, search_s, clock_hz):
    """The engines' alive time over the search's, per engine (``PL_ENGINE_STATS`` sums).

    ``stats``: one device's sums (``bench_multi_gpu.ENGINE_STATS``);
    ``threshold_rounds``: the rounds whose worker kernels the sums count;
    ``clock_hz``: the clock rate the cycles are converted with (the device's
    reported one, so the share is an estimate).
    """
    engines_per_round = stats["engines"] / max(threshold_rounds, 1)
    return stats["alive_cycles"] / clock_hz / engines_per_round / search_s
