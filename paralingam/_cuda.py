"""CUDA backend: PyCUDA owns the context, memory and compilation.

The kernels (``kernels/paralingam.cu`` with its headers, shipped as the
package ``paralingam.kernels``) are compiled at run time with PyCUDA's
``compile``, whose disk cache is keyed by the source, the options and the
nvcc version: a second process does not recompile. The two headers are
inlined first, so the key covers their text without PyCUDA running the
preprocessor on every call. Loaded modules are memoized per context and
block size, and the device buffers of a search are kept per problem shape,
so repeated fits (bootstrap resamples) reuse both. The per-iteration loop
runs in the Cython scheduler (``_scheduler.pyx``).

Float comparisons (the default) are certified: every pairwise statistic
carries an error bound derived from ``FLOAT_MOMENT_ERR``, and an iteration
whose float scores cannot separate the root from a rival within those
bounds is re-decided in double for the rival candidates, so the order is
the double-precision order.
"""

import functools
import re
import time
from importlib import resources

import numpy as np

from .policy import initial_noise

# Bound on |float - double| of one entropy moment (mean log cosh u, or mean
# u exp(-u^2/2)) as the float kernels compute them. tools/probe_float.py
# measured at most 1.0e-7 (pairs) and 1.8e-7 (single rows, before the
# compensated sums) over 20 000 pairs of six distributions with n from 300
# to 32768 on an H100; the bound keeps a factor of about 3 over that. The
# rows' moments by one block (standardise and update_data, 256 threads; the
# same sums by 512), probed at 312e09f: at most 4.2e-8
# (benchmarks/probe_float_h100_series_pairs.json).
FLOAT_MOMENT_ERR = 5e-7
DEFAULT_WARPS = 8  # warps per worker block (threads_per_block = 256)
# Worker blocks per SM the register allocation must allow (0: compiler's
# choice). 4: 64 registers, the float worker's allocation before groups of
# warps shared a pair (the compiler alone now takes 80: 3 blocks per SM).
# Before the groups, the sweep in tools/bench_gpu.py found no difference
# between 0, 4 and 5 at p=1000, n=8192 (benchmarks/NOTES.md).
DEFAULT_MIN_BLOCKS = 4
# Samples per warp a pair should keep when several warps share it: the
# default warps per pair is n // PAIR_SAMPLES_PER_WARP (a power of two, at
# most 4), so each of the 32 lanes of a warp sums at least 32 samples. H100
# (benchmarks/ab_warps_per_pair_h100.log, sparse, medians of 4): 1, 2, 4 warps
# per pair took 55.6, 52.0, 54.8 ms at p=500 n=2048; 75.7, 66.1, 63.2 ms at
# p=500 n=4096; 295.8, 275.5, 288.1 ms at p=1000 n=4096; 471.8, 416.4,
# 400.1 ms at p=1000 n=8192.
PAIR_SAMPLES_PER_WARP = 1024
# An iteration whose r (r - 1) / 2 pairs hold at most this many sample pairs
# (pairs times n) compares every pair in one round without a threshold
# (all_pairs_* kernels: no claims, locks or messages, no partner order, no
# second round). A threshold round pays those costs per pair and per round,
# so where the pairs are few or short the all-pairs round is the faster one.
# The order is the same either way (scores are index-ordered sums). With
# threshold=False every iteration takes an all-pairs round; 0 keeps the
# threshold rounds' engine throughout (with threshold=False, its claims walk
# the partners cyclically). H100, tools/sweep_all_pairs.py (sparse, medians
# of 5, bounds alternated; benchmarks/sweep_all_pairs_h100.log), bound 0 /
# 1e7 / 4e7: p=100 n=1024 5.58 / 4.35 / 4.30 ms, p=200 n=2048 12.64 / 11.98 /
# 15.17, p=500 n=1024 52.29 / 50.25 / 52.13, p=500 n=4096 49.67 / 49.15 /
# 51.38, p=1000 n=2048 182.8 / 182.1 / 181.5, p=1000 n=8192 247.5 / 246.9 /
# 247.5 (a second sweep at 5789cee within 1%): a threshold round saves more
# pairs than an all-pairs round saves per-pair cost once the pairs pass
# ~1e7 sample pairs, so the all-pairs round wins where threshold rounds are
# mostly fixed cost (benchmarks/NOTES.md, "All-pairs rounds").
ALL_PAIRS_WORK = 1e7
HEADERS = ("compare.cuh", "search_state.h")
# Launch each kernel so that it is scheduled while its predecessor still runs
# (programmatic dependent launch, compute capability >= 9.0): 3-6% off a
# search at p <= 500 on the H100 (benchmarks/ab_pdl_h100.log). The kernels
# are correct either way; False gives plain stream-ordered launches.
PROGRAMMATIC_LAUNCH = True


# The problem does not fit in the GPU's free memory (an InsufficientMemoryError,
# so a MemoryError; defined with the host's checks in _memory).
from ._memory import GPUMemoryError  # noqa: E402  (re-exported: paralingam._cuda.GPUMemoryError)


# Set after a kernel fault: CUDA keeps such errors (illegal address, trap)
# for the rest of the process, so the backend is unusable until a restart.
_FAULT = None


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
        from . import _scheduler

        _scheduler.load_driver()
    except Exception as exc:  # driver missing or broken
        return f"the CUDA driver is not usable ({exc})"
    return None


@functools.lru_cache(maxsize=None)
def _context(device=0):
    """Make the device's primary context current (once per process)."""
    import atexit

    import pycuda.driver as drv

    drv.init()
    ctx = drv.Device(device).retain_primary_context()
    ctx.push()

    def _pop():
        try:
            ctx.pop()
        except Exception:
            pass

    atexit.register(_pop)
    return ctx


def kernel_source():
    """``kernels/paralingam.cu`` with its two headers inlined."""
    pkg = resources.files("paralingam.kernels")
    src = pkg.joinpath("paralingam.cu").read_text()
    for header in HEADERS:
        text = pkg.joinpath(header).read_text()
        src, count = re.subn(rf'^#include "{re.escape(header)}"$', lambda _: text, src, flags=re.M)
        if count != 1:
            raise RuntimeError(f"kernels/paralingam.cu must include {header} exactly once")
    return src


@functools.lru_cache(maxsize=None)
def _module(ctx_handle, warps, min_blocks, programmatic):
    """Compiled and loaded kernels for one context and worker block shape."""
    import pycuda.driver as drv
    from pycuda.compiler import compile as nvcc_compile

    from . import _scheduler

    major, minor = drv.Context.get_device().compute_capability()
    cubin = nvcc_compile(
        kernel_source(),
        options=[f"-DWARPS={warps}", f"-DMIN_BLOCKS={min_blocks}", "-std=c++17", "-O3"],
        arch=f"sm_{major}{minor}",
        no_extern_c=True,
    )
    # Hopper and later: programmatic dependent launches (see _scheduler.Module)
    return _scheduler.Module(cubin, warps, programmatic=programmatic and major >= 9)


def module(threads_per_block=None, min_blocks=None):
    """The kernels for the current context (compiled or from the cache)."""
    ctx = _context()
    warps = (threads_per_block or DEFAULT_WARPS * 32) // 32
    if min_blocks is None:  # the default scaled to the block size: 40 warps per SM
        min_blocks = max(1, DEFAULT_MIN_BLOCKS * DEFAULT_WARPS // warps) if DEFAULT_MIN_BLOCKS else 0
    return _module(ctx.handle, warps, min(min_blocks, 2048 // (32 * warps)), PROGRAMMATIC_LAUNCH)


def device_properties():
    """Multiprocessor count and free/total memory of the current device."""
    import pycuda.driver as drv

    _context()
    dev = drv.Context.get_device()
    free, total = drv.mem_get_info()
    return {
        "name": dev.name(),
        "multiprocessors": dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT),
        "free": free,
        "total": total,
    }


def bytes_needed(p, n, use_float):
    """Device memory a search of p variables and n samples allocates."""
    from ._memory import cuda_device_bytes

    return cuda_device_bytes(n, p, use_float)


class _Workspace:
    """Device buffers of a search, kept for the next search of the same shape."""

    # name: dtype of a buffer of p + 1 entries
    PER_VARIABLE = {
        "alive": np.int32, "gone": np.int32, "frac": np.float64, "noise": np.float64,
        "linked": np.int32,
        "order": np.int32, "explained_by": np.int32, "pk_status": np.int8,
        "label": np.int32, "scratch": np.int32, "idx": np.int32, "weight": np.float64,
        "kind": np.int32, "hx_var": np.float64, "hx_var_err": np.float64,
        "hx": np.float64, "hx_err": np.float64, "hx64": np.float64, "score": np.float64,
        "err": np.float64, "ndone": np.int32, "cursor": np.int32, "live": np.uint32,
        "active": np.int32, "final_score": np.float64, "final_err": np.float64,
        "cand": np.int32, "it_r": np.int32, "it_rounds": np.int32, "it_redo": np.int32,
        "it_compared": np.int64, "it_gamma": np.float64, "it_score": np.float64,
    }

    def __init__(self, p, ld, use_float):
        import pycuda.driver as drv

        from . import _scheduler

        self.p, self.ld = p, ld
        self.keep = []
        self.dev = {}

        def alloc(name, nbytes):
            buf = drv.mem_alloc(max(int(nbytes), 8))
            self.keep.append(buf)
            self.dev[name] = int(buf)

        alloc("X64", p * ld * 8)
        alloc("X32", p * ld * 4)
        alloc("cov", p * p * 8)
        alloc("corr0", p * p * 8)  # the first correlation matrix, for least squares
        alloc("lock", p * p * 4)
        alloc("partner", p * p * 4)
        alloc("stat", p * p * 8)
        alloc("stat_err", p * p * 8 if use_float else 8)
        for name, dt in self.PER_VARIABLE.items():
            alloc(name, (p + 1) * np.dtype(dt).itemsize)
        alloc("ctl", 256)
        alloc("search", 2 * _scheduler.layout_size())
        self.status = drv.pagelocked_zeros(16, np.int32, mem_flags=drv.host_alloc_flags.DEVICEMAP)
        self.dev["status_dev"] = int(self.status.base.get_device_pointer())
        self.epochs = 0

    def read(self, name, count):
        import pycuda.driver as drv

        out = np.empty(count, dtype=self.PER_VARIABLE[name])
        if count:
            drv.memcpy_dtoh(out, self.dev[name])
        return out


_WORKSPACES = {}


def _workspace(key, needed):
    """The buffers for ``key = (context, p, ld, use_float)``, allocated once.

    Buffers of other shapes are freed first, so one search's memory is held
    at a time; a shape that does not fit raises GPUMemoryError.
    """
    ws = _WORKSPACES.get(key)
    if ws is not None:
        return ws
    clear_cache()
    _check_device(key, needed)
    ws = _WORKSPACES[key] = _Workspace(key[1], key[2], key[3])
    return ws


def check_memory(n, p, use_float):
    """GPUMemoryError, before anything is allocated, when a search of this shape cannot fit.

    Buffers kept for other shapes (and the adjacency step's) are freed first
    when that makes the difference, as the search itself would. Without
    pycuda nothing is checked (the search reports that itself).
    """
    try:
        import pycuda.driver as drv
    except ImportError:
        return

    key = (_context().handle, p, (n + 31) // 32 * 32, bool(use_float))
    if key in _WORKSPACES:
        return
    needed = bytes_needed(p, n, use_float)
    if needed > drv.mem_get_info()[0]:
        clear_cache()
        _check_device(key, needed)


def _check_device(key, needed):
    """GPUMemoryError when ``needed`` bytes exceed the device's free memory."""
    import pycuda.driver as drv

    free, total = drv.mem_get_info()
    if needed > free:
        from ._memory import format_bytes

        props = device_properties()
        _, p, ld, use_float = key
        step = "the CUDA order search (its device workspace)"
        smaller = "dtype='float64' (8 bytes less per pair), " if use_float else ""
        raise GPUMemoryError(
            f"not enough GPU memory for {step}: it needs {needed:,} bytes "
            f"({format_bytes(needed)}) for {p} variables (row stride {ld} samples, "
            f"{'float' if use_float else 'double'} comparisons); {free:,} of {total:,} bytes "
            f"are free on {props['name']} ({format_bytes(free)}); use fewer variables, "
            f"{smaller}free GPU memory held by other processes, or backend='cpu'",
            step=step, needed=int(needed), available=int(free))


def clear_cache():
    """Free the kept device buffers (they are re-allocated on the next fit)."""
    for ws in _WORKSPACES.values():
        for buf in ws.keep:
            buf.free()
    _WORKSPACES.clear()
    from . import _cuda_adjacency

    _cuda_adjacency.clear_cache()


def _note_fault(exc):
    """Record a sticky kernel fault: later fits report it instead of failing obscurely."""
    global _FAULT
    _FAULT = str(exc)
    _WORKSPACES.clear()  # their memory went with the context
    from . import _cuda_adjacency

    _cuda_adjacency.clear_cache(after_fault=True)
    _module.cache_clear()


def warps_per_pair_for(n, warps):
    """Default warps comparing one pair: 1, 2 or 4 as n allows, dividing ``warps``."""
    g = 1
    while g < 4 and 2 * g * PAIR_SAMPLES_PER_WARP <= n:
        g *= 2
    while g > 1 and (warps % g or warps // g > 15):  # groups must tile the block
        g //= 2
    return g


def search(data, *, threshold, gamma0, c, dtype, collinear_tol, explained_tol, drift_tol,
           times, threads_per_block=None, blocks=None, stop_on_dependence=False,
           profile=False, inject_fault="", min_blocks=None, candidates=None,
           warps_per_pair=None, all_pairs_work=None, progress=None):
    """Causal-order search of ``data`` (n_samples, n_features) on the GPU.

    ``candidates`` (prior knowledge, ``paralingam.prior``) is called with the
    remaining variables at the start of every iteration. ``warps_per_pair``
    warps of a worker block compare one pair together (default
    ``warps_per_pair_for(n, warps)``); it must divide the block's warps,
    in at most 15 groups when above 1 (named barriers). Iterations with at
    most ``all_pairs_work`` sample pairs (default ``ALL_PAIRS_WORK``; every
    iteration with ``threshold=False`` unless it is 0) compare every pair in
    one round. ``progress(n_ordered)`` (optional) is called with the
    variables ordered so far, at most every 0.1 s, as iterations end.

    Returns
    -------
    order, explained, per_iteration, n_rederived
        As the CPU engine; ``per_iteration`` also has ``float64_redo``,
        ``float64_candidates``, ``all_pairs`` and ``correlation`` (the correlation matrix of
        the data, computed on the device, for the least-squares step); ``times`` gets ``compile``, ``upload``,
        ``search`` and (``profile=True``) ``gpu_<phase>``.

    Raises
    ------
    paralingam.policy.LinearDependenceError
        With ``stop_on_dependence``, at the first exact dependence.
    """
    import pycuda.driver as drv

    from . import _scheduler

    use_float = dtype in (None, "float32", np.float32)
    t0 = time.perf_counter()
    mod = module(threads_per_block, min_blocks)
    times["compile"] = time.perf_counter() - t0

    n, p = data.shape
    if warps_per_pair is None:
        warps_per_pair = warps_per_pair_for(n, mod.warps)
    elif (warps_per_pair < 1 or mod.warps % warps_per_pair
          or (warps_per_pair > 1 and mod.warps // warps_per_pair > 15)):
        raise ValueError(
            f"warps_per_pair={warps_per_pair} must divide the worker block's {mod.warps} warps "
            f"(threads_per_block={32 * mod.warps}) into at most 15 groups")
    ld = (n + 31) // 32 * 32
    t0 = time.perf_counter()
    ws = _workspace((_context().handle, p, ld, use_float), bytes_needed(p, n, use_float))
    from ._memory import F8, require

    require("the CUDA search's upload buffer", F8 * p * ld, "use fewer variables")
    X = np.zeros((p, ld))
    X[:, :n] = data.T
    drv.memcpy_htod(ws.dev["X64"], X)
    noise = np.zeros(p + 1)  # the rows' rounding noise (paralingam.policy)
    noise[:p] = initial_noise(data)
    drv.memcpy_htod(ws.dev["noise"], noise)
    drv.memset_d32(ws.dev["lock"], 0, p * p)  # epochs restart with every search
    times["upload"] = time.perf_counter() - t0

    cfg = {
        "p": p, "n": n, "ld": ld,
        "gamma0": float(gamma0) if threshold else float("inf"), "c": float(c),
        "collinear_tol": collinear_tol, "explained_tol": explained_tol, "drift_tol": drift_tol,
        "moment_err": FLOAT_MOMENT_ERR if use_float else 0.0,
        "use_float": int(use_float), "stop_on_degenerate": int(stop_on_dependence),
        "use_prior": int(candidates is not None), "group_warps": int(warps_per_pair),
        "all_pairs_work": float(ALL_PAIRS_WORK if all_pairs_work is None else all_pairs_work),
    }
    if not threshold and cfg["all_pairs_work"] > 0:
        cfg["all_pairs_work"] = float("inf")
    if blocks is None:
        blocks = device_properties()["multiprocessors"] * mod.worker_blocks_per_sm(use_float)
    t0 = time.perf_counter()
    try:
        out = _scheduler.search(mod, ws.dev, cfg, ws.status, worker_blocks=int(blocks),
                                profile=profile, inject_fault=inject_fault, candidates=candidates,
                                progress=progress)
    except _scheduler.CudaError as exc:
        try:
            drv.Context.synchronize()  # non-sticky errors leave the context usable
        except drv.Error:
            _note_fault(exc)
            raise _scheduler.CudaError(
                f"{exc}; CUDA keeps such a fault for the rest of the process, so the CUDA "
                "backend is unavailable until Python restarts (backend='auto' now uses the CPU)",
                exc.code) from exc
        raise
    times["search"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    iters = out["iterations"]
    n_order = out["n_order"]
    order = ws.read("order", n_order)
    redo = ws.read("it_redo", iters)
    explained_by = ws.read("explained_by", p)
    per_iteration = {
        "remaining": ws.read("it_r", iters).tolist(),
        "compared": ws.read("it_compared", iters).tolist(),
        "gamma": ws.read("it_gamma", iters).tolist(),
        "rounds": ws.read("it_rounds", iters).tolist(),
        "float64_redo": (redo > 0).tolist(),
        "float64_candidates": redo.tolist(),
        "scores": ws.read("it_score", iters).tolist(),
        "all_pairs": out["all_pairs"][:iters].astype(bool).tolist(),
    }
    corr = np.empty((p, p))
    drv.memcpy_dtoh(corr, ws.dev["corr0"])
    per_iteration["correlation"] = corr
    times["readback"] = time.perf_counter() - t0
    if out["gpu_time"]:
        for name, secs in out["gpu_time"].items():
            times[f"gpu_{name}"] = secs
        per_iteration["gpu_rounds_s"] = out["gpu_rounds"]
    explained = {int(v): int(explained_by[v]) for v in np.flatnonzero(explained_by >= 0)}
    if out["state"] == _scheduler.STATE_DEGENERATE:
        raise _dependence_error(ws, out, order)
    if out["state"] == _scheduler.STATE_FAILED:
        raise RuntimeError("the GPU search found no candidate for the root in iteration "
                           f"{iters}; please report this")
    if out["state"] != _scheduler.STATE_FINISHED or n_order != p:
        raise RuntimeError(f"the GPU search ended in state {out['state']} with "
                           f"{n_order} of {p} variables ordered")
    return [int(v) for v in order], explained, per_iteration, out["n_rederived"]


def _dependence_error(ws, out, order):
    """The LinearDependenceError of a search stopped by stop_on_dependence.

    As the CPU engine: "collinear" names the first collinear group (of the
    first collinear pair) and the roots so far; "explained" names the
    variables the last root completed and the roots including it.
    """
    from .policy import LinearDependenceError

    kind, a, b = out["detail"]
    order = [int(v) for v in order]
    if kind == 2:  # explained by root b: the order ends with b and them
        k = order.index(b)
        return LinearDependenceError("explained", order[k + 1:], order[: k + 1])
    r = out["r"]
    alive, label = ws.read("alive", r), ws.read("label", r)
    first = label[np.flatnonzero(alive == a)[0]]
    return LinearDependenceError("collinear", alive[label == first].tolist(), order)
