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
carries an error bound derived from ``_constants.MOMENT_ERR_GPU``, and an iteration
whose float scores cannot separate the root from a rival within those
bounds is re-decided in double for the rival candidates, so the order is
the double-precision order.
"""

import functools
import re
import time
import warnings

import numpy as np

from .. import _constants
from . import _cuda_state
from ._cuda_state import row_stride
from .policy import noise_and_std, noise_from_sums, sums_in_row_order

DEFAULT_WARPS = 8  # warps per worker block (threads_per_block = 256)
# Worker blocks per SM the register allocation must allow (0: compiler's
# choice). 4: 64 registers, the float worker's allocation before groups of
# warps shared a pair (the compiler alone now takes 80: 3 blocks per SM); an
# occupancy sweep found no bound better than another (docs/design/gpu_search.rst,
# "Workers").
DEFAULT_MIN_BLOCKS = 4
# Samples per warp a pair should keep when several warps share it: the
# default warps per pair is n // PAIR_SAMPLES_PER_WARP (a power of two, at
# most 4), so each of the 32 lanes of a warp sums at least 32 samples: more
# warps per pair cut the threshold's overshoot at large n, fewer keep more
# pairs in flight at small n (docs/design/gpu_search.rst, "Workers").
PAIR_SAMPLES_PER_WARP = 1024
# An iteration whose r (r - 1) / 2 pairs hold at most this many sample pairs
# (pairs times n) compares every pair in one round without a threshold
# (all_pairs_* kernels: no claims, locks or messages, no partner order, no
# second round). A threshold round pays those costs per pair and per round,
# so where the pairs are few or short the all-pairs round is the faster one.
# The order is the same either way (scores are index-ordered sums). With
# threshold=False every iteration takes an all-pairs round; 0 keeps the
# threshold rounds' engine throughout (with threshold=False, its claims walk
# the partners cyclically). Past about this bound a threshold round saves
# more pairs than an all-pairs round saves per-pair cost, so the all-pairs
# round is kept for iterations where threshold rounds are mostly fixed cost
# (docs/design/gpu_search.rst, "All-pairs rounds"; benchmarks/bench_gpu.py
# --mode all-pairs measures the bounds).
ALL_PAIRS_WORK = 1e7
# A re-decision in double on long rows splits its pairs among about this
# many blocks of pairs64 (_scheduler.redo_chunks): a few candidates' pairs
# alone leave most of the GPU idle, each block a long series of double exps
# (docs/design/gpu_search.rst, "Re-decisions split in chunks"). 0: one block a
# pair.
REDO_BLOCKS = 8192
# kernels/ headers that paralingam.cu includes, directly or through another
HEADERS = ("compare.cuh", "search_state.h", "pl_constants.h")
# Bytes of the data sent to the device at a time by ``upload`` (two such
# blocks in flight: one copied on the host, one over the bus); defined with
# the host memory plan that counts them.
from .._memory import UPLOAD_BLOCK_BYTES  # noqa: E402
# Sample rows of one upload block at most: the transposing kernel's grid
# has one row of 32 x 32 tiles per 32 samples (gridDim.y <= 65535).
UPLOAD_GRID_ROWS = 65535 * 32
# Host threads copying each upload block into its page-locked buffer, by row
# ranges (numpy's copy releases the GIL), when the data take several blocks.
# One thread copied at ~10 GB/s, slower than the bus (docs/design/pipeline.rst,
# "Tall data, the noise in compiled loops").
UPLOAD_COPY_THREADS = 4
# ... but only for data of at least this many bytes: starting the threads and
# handing them the blocks cost more than they save on smaller data
# (docs/design/pipeline.rst, "Copy threads on small data").
UPLOAD_COPY_THREADS_MIN_BYTES = 1 << 25
# Otherwise blocks contiguous on both sides are copied by up to this many
# OpenMP threads (search._staging: one team for the upload's blocks, ended
# after the last); 1: numpy's copy on the calling thread.
UPLOAD_STAGING_THREADS = 4
# Data of fewer bytes go in one block, through a device buffer of their own
# (the X32 halves hold a quarter of float64 data each), copied by the calling
# thread: each block's host calls, and starting and ending an OpenMP team,
# cost more than a core's copy of them and the bus's overlap save
# (docs/design/pipeline.rst, "Small uploads in one block"). 0: the blocks
# and threads above for every size (A/B runs, tests).
UPLOAD_ONE_BLOCK_BYTES = 1 << 21
# The rows' rounding noise and std are summed on a thread of their own
# while the upload runs, for data of at least this many bytes (one upload
# block); smaller data's fits gained nothing measurable from the thread
# (docs/design/pipeline.rst, "Copy threads on small data").
UPLOAD_NOISE_THREAD_MIN_BYTES = UPLOAD_BLOCK_BYTES
# Smaller data, which the host would sum after the upload, are summed on the
# device from the uploaded rows instead where the host sums each column in
# sample order (the same bits: kernels/prepare.cu, column_sums), not on one
# host thread (docs/design/pipeline.rst, "The noise sums on the device").
# False: the host's sums (A/B runs, tests).
DEVICE_NOISE_SUMS = True
# Fortran-ordered data go by whole variables (kernels/prepare.cu,
# variables_block): threads per block, and blocks per variable at most
# (each thread then copies several samples).
VARIABLE_THREADS = 256
VARIABLE_BLOCKS = 64
SUMS_THREADS = 128  # kernels/prepare.cu: SUMS_THREADS (column_sums, one block per variable)
# Launch each kernel so that it is scheduled while its predecessor still runs
# (programmatic dependent launch, compute capability >= 9.0): the next
# kernel's blocks are resident when its predecessor ends, which shortens the
# gaps between the short kernels of small searches (docs/design/gpu_search.rst,
# "The iteration's other kernels"). The kernels are correct either way; False
# gives plain stream-ordered launches.
PROGRAMMATIC_LAUNCH = True
# One search on several GPUs (devices=...): an iteration whose pairs hold at
# most this many sample pairs runs its rounds on the first device alone (its
# rounds are too short to gain from more engines than one GPU has, and each
# round on several devices waits for all of them); the others still update
# their replicas. The order is the same either way.
MULTI_SPREAD_WORK = ALL_PAIRS_WORK
# PROGRAMMATIC_LAUNCH for the kernels of a search on several GPUs, where the
# streams also wait on each other's events (a launch behind such a wait
# waits as any).
MULTI_PROGRAMMATIC_LAUNCH = True
# A search on several GPUs sends device 0's control block, remaining set and
# workers to the other devices with a kernel of device 0 that stores into
# their memory (copy_to_peers); False: the copy engine (cuMemcpyPeerAsync).
# Either way the replicas get the same bytes (docs/design/multi_gpu.rst).
MULTI_COPY_KERNEL = True
# At most this many blocks of device 0's select_root, which first sum the
# rows of the workers a round finished (a warp each); None: device 0's
# multiprocessors. The same results with any number.
MULTI_SELECT_BLOCKS = None


# The context and the fault state are shared with the other GPU steps
# (paralingam._gpu); GPUMemoryError is re-exported: paralingam.search._cuda.GPUMemoryError.
from .. import _gpu  # noqa: E402
from .._gpu import GPUMemoryError  # noqa: E402,F401
from .._gpu import context as _context  # noqa: E402
from .._gpu import note_fault as _note_fault  # noqa: E402,F401


def unavailable_reason():
    """Why the CUDA backend cannot run here, or None when it can (:func:`paralingam._gpu.unavailable_reason`)."""
    return _gpu.unavailable_reason()


def kernel_source(read=None):
    """``kernels/paralingam.cu`` with its headers (``HEADERS``) inlined.

    Each header replaces its first ``#include`` line and later includes of
    it are dropped (the headers have include guards), so the source PyCUDA
    compiles, and therefore its compile cache key, holds every header.
    ``read``: the text of a file of ``kernels/`` by name (default
    :func:`paralingam._constants.kernel_text`; benchmarks/bench_multi_gpu.py
    reads another tree's).
    """
    read = read or _constants.kernel_text
    src = read("paralingam.cu")
    for header in HEADERS:
        text = read(header)
        include = re.compile(rf'^#include "{re.escape(header)}"[^\n]*$', flags=re.M)
        seen = []

        def inline(_, text=text, header=header, seen=seen):
            seen.append(header)
            return text if len(seen) == 1 else f"// ({header}: inlined above)"

        src = include.sub(inline, src)
        if not seen:
            raise RuntimeError(f"the CUDA sources must include {header}")
    left = re.search(r'^#include "([^"]+)"', src, flags=re.M)
    if left:
        raise RuntimeError(f"kernel_source: {left.group(1)} is included but not in HEADERS")
    return src


@functools.lru_cache(maxsize=None)
def _module(ctx_handle, warps, min_blocks, programmatic, peers=False):
    """Compiled and loaded kernels for one context and worker block shape.

    ``peers``: the variant of a search over several devices (``PL_PEERS``),
    a module of its own, so that the single-device kernels stay as they are.
    """
    import pycuda.driver as drv

    from . import _scheduler

    cubin = compile_kernels(kernel_source(), warps, min_blocks, peers)
    major = drv.Context.get_device().compute_capability()[0]
    # Hopper and later: programmatic dependent launches (see _scheduler.Module)
    return _scheduler.Module(cubin, warps, programmatic=programmatic and major >= 9, peers=peers)


def compile_kernels(source, warps, min_blocks, peers=False, options=()):
    """The cubin of ``source`` (``kernel_source()``) for the current device.

    Compiled as the search's kernels are (``_module``), with ``options``
    added (paralingam._testing's variants).
    """
    flags = [f"-DWARPS={warps}", f"-DMIN_BLOCKS={min_blocks}", "-std=c++17", "-O3"]
    if peers:
        flags.append("-DPL_PEERS=1")
    return _gpu.cubin(source, flags + list(options), _gpu.arch())


def module(threads_per_block=None, min_blocks=None, ctx=None, peers=False):
    """The kernels for the current context (compiled or from the cache).

    ``peers``: the multi-device variant for context ``ctx`` (which must be
    current), launched as ``MULTI_PROGRAMMATIC_LAUNCH`` says.
    """
    ctx = ctx or _context()
    warps = (threads_per_block or DEFAULT_WARPS * 32) // 32
    if min_blocks is None:  # the default scaled to the block size: 40 warps per SM
        min_blocks = max(1, DEFAULT_MIN_BLOCKS * DEFAULT_WARPS // warps) if DEFAULT_MIN_BLOCKS else 0
    if peers:
        return _module(ctx.handle, warps, min(min_blocks, 2048 // (32 * warps)),
                       MULTI_PROGRAMMATIC_LAUNCH, True)
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
    """Device memory a search of p variables and n samples allocates (``_cuda_state``)."""
    return _cuda_state.device_bytes(n, p, use_float)


class _Workspace:
    """Device buffers of a search, kept for the next search of the same shape.

    ``dev`` maps each buffer's name to its device address: the buffers of
    ``_cuda_state.allocations`` (the layout of ``kernels/search_state.h``),
    and ``"status_dev"``, the status's address in mapped host memory.
    """

    def __init__(self, p, ld, use_float, multi=False, replica=False):
        """``multi``: the mirror buffers in one block (``dev["mirror"]``);
        ``replica``: only what a replica of a multi-device search needs (of
        the pair buffers only its partner orders: the others live on device 0)."""
        import pycuda.driver as drv

        self.p, self.ld = p, ld
        self.keep = []
        self.dev = {}
        self.copy_buf = None  # DeviceCopy's buffer, allocated on first use
        self.sums_buf = None  # _device_sums' output, allocated on first use
        self.upload_buf = None  # a small upload's one block (upload), allocated on first use
        self.upload_buf_half = 0  # ... and the bytes of each of its two halves
        self.copies = 0       # bumped by every copy and when the buffers are freed
        for block in _cuda_state.allocations(p, ld, use_float, multi, replica):
            buf = drv.mem_alloc(block.nbytes)
            self.keep.append(buf)
            self.dev[block.name] = int(buf)
            for name, offset in block.parts:
                self.dev[name] = int(buf) + offset
            if block.name == "mirror":
                self.dev["mirror_bytes"] = block.nbytes
        self.epochs = 0
        if multi or replica:  # the search's status word is the multi workspace's
            return
        self.status = drv.pagelocked_zeros(_cuda_state.STATUS_WORDS, np.int32,
                                           mem_flags=drv.host_alloc_flags.DEVICEMAP)
        self.dev["status_dev"] = int(self.status.base.get_device_pointer())

    def read(self, name, count):
        import pycuda.driver as drv

        out = np.empty(count, dtype=_cuda_state.DTYPES[name])
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


class DeviceCopy:
    """The search's data on device 0 as the upload left them, for the adjacency step.

    X64 before the search standardises it: exactly ``data.T`` as float64,
    one variable per row, ``ld`` doubles apart, at ``ptr``. The adjacency
    step's QR of rank-deficient data (``paralingam.adjacency._cuda_qr``)
    reads it instead of uploading the data again. It holds until the next
    search on the same buffers, or until they are freed: :meth:`valid`.
    ``factor_ahead``: that QR where the adjacency step started it ahead of
    its host steps (``_cuda_qr.start_factor_of_copy``), else None.
    """

    def __init__(self, ws, n):
        self._ws, self._generation = ws, ws.copies
        self.n, self.p, self.ld, self.ptr = n, ws.p, ws.ld, int(ws.copy_buf)
        self.factor_ahead = None

    def valid(self):
        """Whether the buffer still holds these data."""
        return self._ws.copies == self._generation


# Device memory left free beside a kept copy of the data: the QR that reads
# it allocates its own n x p array, a workspace and its slack.
COPY_SLACK_BYTES = 256 << 20


def _keep_copy(ws, n, stream):
    """Copy X64 (as the upload left it) into the workspace's copy buffer: a DeviceCopy, or None.

    None where the buffer and the QR that would read it (about as large
    again) do not fit in the free device memory: the adjacency step then
    uploads the data itself. The copy is queued on ``stream``.
    """
    import pycuda.driver as drv

    nbytes = 8 * ws.p * ws.ld
    if ws.copy_buf is None:
        if 2 * nbytes + COPY_SLACK_BYTES > drv.mem_get_info()[0]:
            return None
        ws.copy_buf = drv.mem_alloc(nbytes)
        ws.keep.append(ws.copy_buf)
    ws.copies += 1
    drv.memcpy_dtod_async(ws.copy_buf, ws.dev["X64"], nbytes, stream)
    return DeviceCopy(ws, n)


def _keep_copy_now(ws, n):
    """:func:`_keep_copy`, the copy made before it returns."""
    import pycuda.driver as drv

    stream = drv.Stream()
    device_copy = _keep_copy(ws, n, stream)
    stream.synchronize()
    return device_copy


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

    key = (_context().handle, p, row_stride(n), bool(use_float))
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
        from .._memory import format_bytes

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
    """Free the kept device buffers of every GPU step (re-allocated on the next fit)."""
    _gpu.clear_caches()


@_gpu.register_cache
def _drop_workspaces(after_fault=False):
    """Free this module's kept search buffers; after a fault, forget them and the modules."""
    global _LAST_MULTI
    _LAST_MULTI = None  # (its buffers are freed with it)
    for ws in _WORKSPACES.values():
        for part in getattr(ws, "parts", (ws,)):  # (a multi-device workspace: each device's)
            part.copies += 1  # (their DeviceCopy objects no longer hold)
        if not after_fault:
            for buf in ws.keep:
                buf.free()
    _WORKSPACES.clear()  # (after a fault their memory went with the context)
    if after_fault:
        _module.cache_clear()
        _prepare_kernels.cache_clear()


# ---------------------------------------------------------------- several devices

from ._devices import check_devices  # noqa: E402  (devices= without a GPU)

def resolve_devices(devices):
    """The device ordinals of a search, or None for the single-GPU search on device 0.

    ``"all"`` is every visible device; a list naming only device 0 is the
    single-GPU search (the same kernels as ``devices=None``).
    """
    import pycuda.driver as drv

    devices = check_devices(devices)
    if devices is None:
        return None
    _context()
    count = drv.Device.count()
    if devices == "all":
        devices = tuple(range(count))
    for d in devices:
        if d >= count:
            raise ValueError(f"devices={list(devices)} names GPU {d}, but {count} "
                             f"GPU{'s are' if count != 1 else ' is'} visible (ids 0..{count - 1})")
    if devices == (0,):
        return None
    if len(devices) == 1:
        raise ValueError(f"devices={list(devices)}: a search on one GPU runs on GPU 0; "
                         f"select GPU {devices[0]} with CUDA_VISIBLE_DEVICES={devices[0]} instead")
    return devices


@functools.lru_cache(maxsize=None)
def _device_context(device):
    """Device ``device``'s primary context (device 0: the one ``_context`` made current)."""
    import pycuda.driver as drv

    if device == 0:
        return _context()
    _context()
    return drv.Device(device).retain_primary_context()


def _peer_setup(devices):
    """Contexts of ``devices``, each of the others given access to the first one's
    memory, and the first one access to theirs.

    Raises RuntimeError naming the devices when a pair lacks peer access or
    native peer atomics (no fallback: the search shares its round state
    through them, and the first device stores the replicas' per-iteration
    state into the others' memory, ``copy_to_peers``).
    """
    from . import _scheduler

    ctxs = [_device_context(d) for d in devices]
    home = devices[0]
    for d, ctx in zip(devices[1:], ctxs[1:]):
        access, atomics = _scheduler.peer_support(d, home)
        back, _ = _scheduler.peer_support(home, d)
        if not access or not atomics or not back:
            what = (f"GPU {d} has no peer access to GPU {home}'s memory" if not access else
                    f"GPU {d} has no native atomics on GPU {home}'s memory" if not atomics else
                    f"GPU {home} has no peer access to GPU {d}'s memory")
            raise RuntimeError(
                f"devices={list(devices)}: {what}, which a search over several GPUs needs "
                "(GPUs joined by NVLink have both ways and atomics); use GPUs that do, or "
                "devices=None")
        _scheduler.enable_peer_access(ctx.handle, ctxs[0].handle)
        _scheduler.enable_peer_access(ctxs[0].handle, ctx.handle)
    return ctxs


def _in_context(context, fn, /, *args, **kwargs):
    """``fn(*args, **kwargs)`` with ``context`` current."""
    context.push()
    try:
        return fn(*args, **kwargs)
    finally:
        import pycuda.driver as drv

        drv.Context.pop()


def _multi_needed(i, p, n, use_float):
    """Device memory of the i-th device of a multi-device search."""
    return _cuda_state.device_bytes(n, p, use_float) if i == 0 else _cuda_state.replica_bytes(n, p)


def check_memory_multi(n, p, use_float, devices):
    """GPUMemoryError, before anything is allocated, when a device of ``devices`` cannot hold its part.

    The first device holds the whole search state, each other one a replica
    of the data and correlations (``_cuda_state.replica_bytes``).
    """
    import pycuda.driver as drv

    from .._memory import format_bytes

    ctxs = [_device_context(d) for d in devices]
    key = _multi_key(ctxs, p, n, use_float)
    if key in _WORKSPACES:
        return
    clear_cache()  # one search's memory is held at a time, as with one device
    for i, (d, ctx) in enumerate(zip(devices, ctxs)):
        free, total = _in_context(ctx, drv.mem_get_info)
        needed = _multi_needed(i, p, n, use_float)
        if needed > free:
            step = ("the CUDA order search (its device workspace)" if i == 0 else
                    "the CUDA order search (a replica of the data and correlations)")
            raise GPUMemoryError(
                f"not enough GPU memory on GPU {d} for {step}: it needs {needed:,} bytes "
                f"({format_bytes(needed)}) for {p} variables and {n} samples; {free:,} of "
                f"{total:,} bytes are free ({format_bytes(free)}); use fewer variables, other "
                "GPUs, free GPU memory held by other processes, or backend='cpu'",
                step=step, needed=int(needed), available=int(free))


def _multi_key(ctxs, p, n, use_float):
    return ("multi", tuple(ctx.handle for ctx in ctxs), p, row_stride(n), bool(use_float))


class _MultiWorkspace:
    """Buffers of a search over several devices: device 0's full workspace,
    a replica on each other device, and the status word every device writes
    (portable mapped memory: one device address per context)."""

    def __init__(self, ctxs, p, ld, use_float):
        import pycuda.driver as drv

        self.parts = []
        try:
            for i, ctx in enumerate(ctxs):
                self.parts.append(_in_context(ctx, _Workspace, p, ld, use_float,
                                              multi=True, replica=i > 0))
        except BaseException:
            for part in self.parts:
                for buf in part.keep:
                    buf.free()
            raise
        flags = drv.host_alloc_flags.PORTABLE | drv.host_alloc_flags.DEVICEMAP
        self.status = drv.pagelocked_zeros(_cuda_state.STATUS_WORDS, np.int32, mem_flags=flags)
        self.status_devs = [int(_in_context(ctx, self.status.base.get_device_pointer))
                            for ctx in ctxs]

    @property
    def keep(self):
        return [buf for part in self.parts for buf in part.keep]


_LAST_MULTI = None  # the last multi-device workspace (replica_arrays)
# The last multi-device search's loop counters (tests, benchmarks/bench_multi_gpu.py):
# float64 re-decisions shared among the devices, host seconds waiting for
# round statuses, rounds.
LAST_MULTI_RUN = None


def replica_arrays(names=("X64", "cov")):
    """Each device's copy of ``names`` after the last multi-device search (tests).

    Returns
    -------
    list of dict
        One per device, device 0 first: name -> float64 array (``X64``:
        p x ld, ``cov``: p x p, ``hx64_var``: p + 1).
    """
    import pycuda.driver as drv

    ws = _LAST_MULTI
    if ws is None:
        raise RuntimeError("no search over several GPUs has run in this process")
    out = []
    for part in ws.parts:
        got = {}
        for name in names:
            shape = {"X64": (part.p, part.ld), "hx64_var": (part.p + 1,)}.get(name, (part.p, part.p))
            arr = np.empty(shape)
            drv.memcpy_dtoh(arr, part.dev[name])  # (unified addressing: any context)
            got[name] = arr
        out.append(got)
    return out


def _search_multi_run(data, devices, cfg, threads_per_block, min_blocks, blocks, candidates,
                      times, progress=None, keep_copy=False, profile=False):
    """Compile, allocate, upload and run a search over ``devices``.

    Returns the :class:`_MultiWorkspace` (device 0's workspace first), the
    loop's output, the data's column std and a :class:`DeviceCopy` on
    device 0 or None, as the single-GPU search makes them (a copy only with ``keep_copy`` and where device 0, the
    first of ``devices``, is GPU 0).
    """
    import pycuda.driver as drv

    from . import _scheduler

    global _LAST_MULTI
    n, p = data.shape
    use_float = bool(cfg["use_float"])
    t0 = time.perf_counter()
    ctxs = _peer_setup(devices)
    mods = [_in_context(ctx, module, threads_per_block, min_blocks, ctx=ctx, peers=True)
            for ctx in ctxs]
    times["compile"] = time.perf_counter() - t0
    if cfg["group_warps"] is None:
        cfg["group_warps"] = warps_per_pair_for(n, mods[0].warps)
    t0 = time.perf_counter()
    key = _multi_key(ctxs, p, n, use_float)
    ws = _WORKSPACES.get(key)
    if ws is None:
        check_memory_multi(n, p, use_float, devices)
        ws = _WORKSPACES[key] = _MultiWorkspace(ctxs, p, cfg["ld"], use_float)
    _LAST_MULTI = ws

    def upload_all():  # each device's X64 exactly data.T, as on one GPU
        for ctx, part in zip(ctxs, ws.parts):
            _in_context(ctx, upload, part, data, ctx.handle)

    noise, column_std = _upload_with_noise(
        data, upload_all, lambda: _in_context(ctxs[0], _device_sums, ws.parts[0], n, ctxs[0].handle))
    grids, sms = [], []  # each device's worker grid and multiprocessors
    for ctx, part, mod in zip(ctxs, ws.parts, mods):
        def finish_upload(part=part, mod=mod):  # (the occupancy query in the module's context)
            drv.memcpy_htod(part.dev["noise"], noise)
            count = drv.Context.get_device().get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
            grid = int(blocks) if blocks is not None else count * mod.worker_blocks_per_sm(use_float)
            return grid, count
        grid, count = _in_context(ctx, finish_upload)
        grids.append(grid)
        sms.append(count)
    _in_context(ctxs[0], drv.memset_d32, ws.parts[0].dev["lock"], 0, p * p)
    for ctx, part in zip(ctxs, ws.parts):
        _in_context(ctx, drv.memset_d32, part.dev["it_pairs64"], 0, 2 * (p + 1))
    # device 0's data before the search standardises them, as on one GPU:
    # the adjacency step then takes the same route, with the same bits. Only
    # where the first device is GPU 0, the one the adjacency step's QR runs
    # on (paralingam._gpu.context()); GPU 0 may lack access to another's
    # memory, and the step then uploads the data itself.
    keep_copy = keep_copy and devices[0] == 0
    device_copy = _in_context(ctxs[0], _keep_copy_now, ws.parts[0], n) if keep_copy else None
    times["upload"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ctxs[0].push()
    try:
        out = _scheduler.search_multi(
            mods, [ctx.handle for ctx in ctxs], [part.dev for part in ws.parts], cfg, ws.status,
            ws.status_devs, grids, candidates=candidates, spread_work=float(MULTI_SPREAD_WORK),
            copy_kernel=MULTI_COPY_KERNEL, progress=progress, profile=profile,
            select_blocks=MULTI_SELECT_BLOCKS or sms[0])
    except _scheduler.CudaError as exc:
        sticky = False
        for ctx in ctxs:
            try:
                _in_context(ctx, drv.Context.synchronize)
            except drv.Error:
                sticky = True
        if sticky:
            raise _sticky_fault(exc) from exc
        raise
    finally:
        drv.Context.pop()
    times["search"] = time.perf_counter() - t0
    global LAST_MULTI_RUN
    LAST_MULTI_RUN = {"redo_spread": int(out["redo_spread"]),
                      "status_wait_s": float(out["status_wait_s"]),
                      "rounds": int(out["rounds"])}
    return ws, out, column_std, device_copy


PREPARE_OPTIONS = ("-std=c++17", "-O3")


@functools.lru_cache(maxsize=None)
def kernel_jobs():
    """The upload's kernels, as :func:`paralingam._gpu.compile_soon` takes them.

    (The search's own depend on the block shape: they compile when it starts.)
    """
    return ((_constants.kernel_text("prepare.cu"),
             PREPARE_OPTIONS),)


@functools.lru_cache(maxsize=None)
def _prepare_kernels(ctx_handle):
    """The upload's transposing kernels (``kernels/prepare.cu``) for one context, by input dtype."""
    import pycuda.driver as drv

    (src, options), = kernel_jobs()
    mod = drv.module_from_buffer(_gpu.cubin(src, options, _gpu.arch()))
    kernels = {"module": mod, "scaled": {}, "variables": {}}
    for dtype, name in ((np.float64, "transpose_f64"), (np.float32, "transpose_f32")):
        fn = mod.get_function(name)
        fn.prepare("PiiPqq")
        kernels[np.dtype(dtype)] = fn
        fn = mod.get_function(name.replace("transpose", "variables"))
        fn.prepare("PqPqiP")
        kernels["variables"][np.dtype(dtype)] = fn
        fn = mod.get_function(name.replace("transpose", "transpose_scaled"))
        fn.prepare("PiiPqqP")
        kernels["scaled"][np.dtype(dtype)] = fn
    kernels["column_sums"] = mod.get_function("column_sums")
    kernels["column_sums"].prepare("PqiiP")
    return kernels


def upload(ws, data, ctx_handle=None):
    """Copy ``data`` (n_samples, n_features) into the workspace's X64, one variable per row.

    ``data``: float64 or float32, any layout (C or Fortran order, strided
    views). Blocks of whole sample rows are copied as they are into one of
    two page-locked host buffers, sent to the device asynchronously (the
    host fills the next buffer meanwhile) and transposed there (converted to
    double: exact); the rows' padding up to the row stride is zero. X64
    then holds exactly ``data.T`` as float64. Fortran-ordered data go by
    blocks of whole variables instead (:func:`_upload_units`), each a
    contiguous range of the data, copied into X64's rows without a
    transpose.

    The device-side blocks use the float rows (X32), which the search writes
    only later, when it standardises X64: no extra device memory. Data under
    ``UPLOAD_ONE_BLOCK_BYTES`` go in one block instead, through a buffer of
    the workspace's own (twice that size, kept with its buffers), copied by
    the calling thread.

    ``data`` may be a :class:`paralingam._preparation.ScaledData` whose
    factors are powers of two (``factors`` not None): its source is sent as
    it is (float32 at half the bytes of a float64 copy) and the columns are
    scaled on the device, exactly as the host scales them, so that X64
    holds exactly ``data.copy().T``.

    ``ctx_handle``: the current context's handle where it is not the
    package's (a multi-device search's other devices), for the kernels.
    """
    import pycuda.driver as drv

    from .._preparation import ScaledData

    factors = None
    if isinstance(data, ScaledData):
        if data.factors is None:
            raise ValueError("upload scales columns by normal powers of two only; this "
                             "ScaledData needs ldexp: upload its copy()")
        data, factors = data.source, data.factors
    data = np.asarray(data)
    kernels = _prepare_kernels(_context().handle if ctx_handle is None else ctx_handle)
    if data.ndim != 2 or data.dtype not in kernels["scaled"]:
        raise ValueError(f"upload needs a 2-D float64 or float32 array; got {data.dtype} "
                         f"of shape {data.shape}")
    n, p = data.shape
    ld = ws.ld
    if ws.p != p or ld < n:
        raise ValueError(f"data of shape {data.shape} do not fit the workspace "
                         f"(p={ws.p}, row stride {ld})")
    stream = drv.Stream()
    if ld > n:
        drv.memset_d32_async(ws.dev["X64"], 0, p * ld * 2, stream)
    one_block = data.nbytes < UPLOAD_ONE_BLOCK_BYTES and _one_block_buffer(ws)
    if one_block:  # (two halves still, for an UPLOAD_BLOCK_BYTES set below the data's size)
        half = ws.upload_buf_half
        device_blocks = int(ws.upload_buf)
    else:
        half = p * ld * 2  # bytes of each device block: half of X32's p * ld * 4
        device_blocks = ws.dev["X32"]
    by_variables, source, unit_bytes, per_block = _upload_units(data, min(UPLOAD_BLOCK_BYTES, half))
    units = len(source)
    staging = getattr(ws, "_upload_staging", None)
    if staging is None or staging[0] < per_block * unit_bytes:
        staging = (per_block * unit_bytes,
                   [drv.pagelocked_empty(per_block * unit_bytes, np.uint8) for _ in range(2)],
                   [drv.Event() for _ in range(2)])
        ws._upload_staging = staging
    _, hosts, done = staging
    threads = _copy_threads(data.nbytes, units > per_block, per_block)
    scale = None
    if factors is not None:
        scale = drv.mem_alloc(max(1, p) * 8)
        drv.memcpy_htod(scale, np.ascontiguousarray(factors, dtype=np.float64))
    pool = None
    staging_threads = 1 if one_block else UPLOAD_STAGING_THREADS
    staged = threads == 1 and staging_threads > 1  # (_copy_rows' OpenMP copies)
    try:
        if threads > 1:
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(threads)
        for k, u0 in enumerate(range(0, units, per_block)):
            b = k % 2
            count = min(per_block, units - u0)
            if k >= 2:
                done[b].synchronize()  # this host buffer's last copy has left
            host = hosts[b][:count * unit_bytes].view(data.dtype).reshape(count, source.shape[1])
            _copy_rows(host, source[u0:u0 + count], pool, threads, staging_threads)
            dev = device_blocks + b * half
            drv.memcpy_htod_async(dev, host, stream)
            _place_block(kernels, by_variables, data.dtype, dev, u0, count, n, p, ws.dev["X64"],
                         ld, scale, stream)
            done[b].record(stream)
    finally:
        if pool is not None:
            pool.shutdown()
        if staged:
            from . import _staging

            _staging.release_team()
        stream.synchronize()  # (the factors stay until the last block is scaled)
        if scale is not None:
            scale.free()


def _one_block_buffer(ws):
    """Whether ``ws`` holds a small upload's buffer (two halves of ``UPLOAD_ONE_BLOCK_BYTES``),
    allocated here where it is missing or smaller; False where the device has no room for it
    (the upload then goes through X32's halves, which need no memory of their own)."""
    import pycuda.driver as drv

    half = UPLOAD_ONE_BLOCK_BYTES
    if ws.upload_buf is not None and ws.upload_buf_half < half:  # (the setting was raised)
        ws.keep.remove(ws.upload_buf)
        ws.upload_buf.free()
        ws.upload_buf = None
    if ws.upload_buf is None:
        try:
            ws.upload_buf = drv.mem_alloc(2 * half)
        except drv.MemoryError:
            return False
        ws.upload_buf_half = half
        ws.keep.append(ws.upload_buf)
    return True


def _upload_with_noise(data, upload_all, device_sums=None):
    """Run ``upload_all()`` and sum the rows' rounding noise and std of ``data``.

    Returns ``(noise, column_std)``: ``noise`` has p + 1 entries, the last
    zero (the search's buffer; paralingam.search.policy), ``column_std`` as
    :func:`~paralingam.search.policy.noise_and_std`. Data of at least
    ``UPLOAD_NOISE_THREAD_MIN_BYTES`` are summed on a thread while the blocks
    cross the bus (every device's upload, for a multi-GPU search). Smaller
    data are summed after the upload: by ``device_sums()`` (the uploaded
    rows' ``(mean, sq, dev)``, :func:`_device_sums`) where given,
    ``DEVICE_NOISE_SUMS`` is set and the host would sum each column in
    sample order (the same bits), else on the calling thread.
    """
    noise = np.zeros(data.shape[1] + 1)
    if data.nbytes < UPLOAD_NOISE_THREAD_MIN_BYTES:
        upload_all()
        if device_sums is not None and DEVICE_NOISE_SUMS and sums_in_row_order(data):
            noise[:-1], column_std = noise_from_sums(data.shape[0], *device_sums())
        else:
            noise[:-1], column_std = noise_and_std(data)
        return noise, column_std
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        sums = pool.submit(noise_and_std, data)
        upload_all()
        noise[:-1], column_std = sums.result()
    return noise, column_std


def _device_sums(ws, n, ctx_handle=None):
    """Each variable's mean, sum of squares and sum of squared deviations over X64's first ``n`` samples.

    ``(mean, sq, dev)``, float64 arrays of ``ws.p``, with the bits of the
    host's compiled sums of the data X64 holds (``kernels/prepare.cu``,
    ``column_sums``); read back before it returns. ``ctx_handle`` as for
    :func:`upload`.
    """
    import pycuda.driver as drv

    p = ws.p
    if ws.sums_buf is None:
        ws.sums_buf = drv.mem_alloc(3 * 8 * p)
        ws.keep.append(ws.sums_buf)
    fn = _prepare_kernels(_context().handle if ctx_handle is None else ctx_handle)["column_sums"]
    fn.prepared_call((p, 1), (SUMS_THREADS, 1, 1), ws.dev["X64"], np.int64(ws.ld), np.int32(n),
                     np.int32(p), ws.sums_buf)
    out = np.empty(3 * p)
    drv.memcpy_dtoh(out, ws.sums_buf)
    return out[:p], out[p:2 * p], out[2 * p:]


def _upload_units(data, block_bytes):
    """How ``upload`` cuts ``data`` into blocks of at most ``block_bytes``.

    Returns
    -------
    by_variables : bool
        Fortran-ordered data whose variables each fit a block: the units
        are whole variables, else whole sample rows.
    source : ndarray
        The data with one unit per row (``data.T`` by variables: C-ordered).
    unit_bytes : int
    per_block : int
        Units per block (at least 1; grid limits of the kernels).
    """
    n, p = data.shape
    by_variables = (data.flags.f_contiguous and not data.flags.c_contiguous
                    and n * data.dtype.itemsize <= block_bytes)
    if by_variables:
        source, unit_bytes, grid_limit = data.T, n * data.dtype.itemsize, 65535  # (grid y)
    else:
        source, unit_bytes, grid_limit = data, p * data.dtype.itemsize, UPLOAD_GRID_ROWS
    return by_variables, source, unit_bytes, min(max(1, block_bytes // unit_bytes), len(source),
                                                 grid_limit)


def _copy_threads(data_bytes, several_blocks, per_block):
    """Host threads copying each block of an upload of ``data_bytes`` (1: the calling thread)."""
    from .._validation import _usable_cores

    if not several_blocks or data_bytes < UPLOAD_COPY_THREADS_MIN_BYTES:
        return 1
    return min(UPLOAD_COPY_THREADS, _usable_cores(), per_block)


def _place_block(kernels, by_variables, dtype, dev, u0, count, n, p, x64, ld, scale, stream):
    """Queue the kernel that writes the block at ``dev`` (units ``u0:u0+count``) into X64."""
    if by_variables:
        kernels["variables"][dtype].prepared_async_call(
            (min(-(-n // VARIABLE_THREADS), VARIABLE_BLOCKS), count), (VARIABLE_THREADS, 1, 1),
            stream, dev, np.int64(n), x64, np.int64(ld), np.int32(u0),
            np.intp(int(scale) if scale is not None else 0))
        return
    fn = kernels[dtype] if scale is None else kernels["scaled"][dtype]
    extra = () if scale is None else (int(scale),)
    fn.prepared_async_call(((p + 31) // 32, (count + 31) // 32), (32, 8, 1), stream, dev,
                           np.int32(count), np.int32(p), x64, np.int64(ld), np.int64(u0), *extra)


def _copy_rows(dst, src, pool, threads, staging_threads=1):
    """``np.copyto(dst, src)`` by ``threads`` ranges of rows on ``pool``.

    Without a pool, contiguous blocks of one dtype go by up to
    ``staging_threads`` OpenMP threads (:mod:`._staging`), others by one
    numpy call.
    """
    if pool is None:
        if (staging_threads > 1 and dst.dtype == src.dtype and dst.shape == src.shape
                and dst.flags.c_contiguous and src.flags.c_contiguous):
            from .._validation import _usable_cores
            from . import _staging

            _staging.copy_bytes(dst.reshape(-1).view(np.uint8), src.reshape(-1).view(np.uint8),
                                min(staging_threads, _usable_cores()))
            return
        np.copyto(dst, src)
        return
    bounds = np.linspace(0, len(dst), threads + 1).astype(int).tolist()
    for part in [pool.submit(np.copyto, dst[a:b], src[a:b]) for a, b in zip(bounds, bounds[1:])]:
        part.result()


def warps_per_pair_for(n, warps):
    """Default warps comparing one pair: 1, 2 or 4 as n allows, dividing ``warps``."""
    g = 1
    while g < 4 and 2 * g * PAIR_SAMPLES_PER_WARP <= n:
        g *= 2
    while g > 1 and (warps % g or warps // g > 15):  # groups must tile the block
        g //= 2
    return g


@_gpu.exclusive
def search(data, *, threshold, gamma0, c, dtype, collinear_tol, explained_tol, drift_tol,
           times, threads_per_block=None, blocks=None, stop_on_dependence=False,
           profile=False, min_blocks=None, candidates=None,
           warps_per_pair=None, all_pairs_work=None, devices=None, progress=None,
           keep_copy=False):
    """Causal-order search of ``data`` (n_samples, n_features) on the GPU.

    ``candidates`` (prior knowledge, ``paralingam.prior``) is called with the
    remaining variables at the start of every iteration. ``warps_per_pair``
    warps of a worker block compare one pair together (default
    ``warps_per_pair_for(n, warps)``); it must divide the block's warps,
    in at most 15 groups when above 1 (named barriers). Iterations with at
    most ``all_pairs_work`` sample pairs (default ``ALL_PAIRS_WORK``; every
    iteration with ``threshold=False`` unless it is 0) compare every pair in
    one round. ``devices`` (``fit``'s): several GPUs share the search
    (``search_multi``; the same order as one GPU's). ``progress(n_ordered)``
    (optional) is called with the variables ordered so far, at most
    every 0.1 s, as iterations end. ``keep_copy``: keep the data on GPU 0
    for the adjacency step, where memory allows and (several GPUs) GPU 0 is
    the first of ``devices`` (``per_iteration["device_copy"]``, a
    :class:`DeviceCopy`; absent where none was kept).

    Returns
    -------
    order, explained, per_iteration, n_rederived
        As the CPU engine; ``per_iteration`` also has ``float64_redo``,
        ``float64_candidates``, ``float64_pairs`` (the pairs the re-decisions
        compared in double, per iteration: what needs the double arithmetic),
        ``float64_chunks`` (the blocks each re-decided pair was split among,
        ``_scheduler.redo_chunks``; 0 where none),
        ``all_pairs`` and ``correlation`` (the correlation matrix of
        the data, computed on the device, for the least-squares step); ``times`` gets ``compile``, ``upload``,
        ``search`` and (``profile=True``) ``gpu_<phase>`` (several GPUs:
        device 0's, and ``per_iteration["gpu_time_by_device"]``, a dict of
        ``_scheduler.MULTI_PHASES`` per device; ``per_iteration["gpu_rounds_s"]``
        is then device 0's worker kernels per iteration, without the
        selections that one GPU's rounds include).

    Raises
    ------
    paralingam.search.policy.LinearDependenceError
        With ``stop_on_dependence``, at the first exact dependence.
    """
    import pycuda.driver as drv

    from . import _scheduler

    use_float = dtype in (None, "float32", np.float32)
    devices = resolve_devices(devices) if devices is not None else None
    n, p = data.shape
    ld = row_stride(n)
    if devices is not None:
        warps = (threads_per_block or DEFAULT_WARPS * 32) // 32
        if warps_per_pair is not None and (
                warps_per_pair < 1 or warps % warps_per_pair
                or (warps_per_pair > 1 and warps // warps_per_pair > 15)):
            raise ValueError(
                f"warps_per_pair={warps_per_pair} must divide the worker block's {warps} warps "
                f"(threads_per_block={32 * warps}) into at most 15 groups")
    else:
        t0 = time.perf_counter()
        mod = module(threads_per_block, min_blocks)
        times["compile"] = time.perf_counter() - t0

        if warps_per_pair is None:
            warps_per_pair = warps_per_pair_for(n, mod.warps)
        elif (warps_per_pair < 1 or mod.warps % warps_per_pair
              or (warps_per_pair > 1 and mod.warps // warps_per_pair > 15)):
            raise ValueError(
                f"warps_per_pair={warps_per_pair} must divide the worker block's {mod.warps} warps "
                f"(threads_per_block={32 * mod.warps}) into at most 15 groups")
        t0 = time.perf_counter()
        ws = _workspace((_context().handle, p, ld, use_float), bytes_needed(p, n, use_float))
        t1 = time.perf_counter()
        _prepare_kernels(_context().handle)  # compiled on a machine's first fit: timed as such
        times["compile"] += time.perf_counter() - t1
        t0 += time.perf_counter() - t1
        noise, column_std = _upload_with_noise(data, lambda: upload(ws, data),
                                               lambda: _device_sums(ws, n))
        device_copy = _keep_copy_now(ws, n) if keep_copy else None  # (before the search standardises X64)
        drv.memcpy_htod(ws.dev["noise"], noise)
        drv.memset_d32(ws.dev["lock"], 0, p * p)  # epochs restart with every search
        drv.memset_d32(ws.dev["it_pairs64"], 0, 2 * (p + 1))  # (pairs64 adds to it)
        times["upload"] = time.perf_counter() - t0

    cfg = {
        "p": p, "n": n, "ld": ld,
        "gamma0": float(gamma0) if threshold else float("inf"), "c": float(c),
        "collinear_tol": collinear_tol, "explained_tol": explained_tol, "drift_tol": drift_tol,
        "moment_err": _constants.MOMENT_ERR_GPU if use_float else 0.0,
        "use_float": int(use_float), "stop_on_degenerate": int(stop_on_dependence),
        "use_prior": int(candidates is not None),
        "group_warps": None if warps_per_pair is None else int(warps_per_pair),
        "all_pairs_work": float(ALL_PAIRS_WORK if all_pairs_work is None else all_pairs_work),
        "redo_blocks": int(REDO_BLOCKS),
    }
    if not threshold and cfg["all_pairs_work"] > 0:
        cfg["all_pairs_work"] = float("inf")
    if devices is not None:
        multi, out, column_std, device_copy = _search_multi_run(
            data, devices, cfg, threads_per_block, min_blocks, blocks, candidates, times,
            progress=progress, keep_copy=keep_copy, profile=profile)
        return _read_result(multi.parts[0], out, p, times, column_std, device_copy,
                            counters=multi.parts)
    if blocks is None:
        blocks = device_properties()["multiprocessors"] * mod.worker_blocks_per_sm(use_float)
    t0 = time.perf_counter()
    try:
        out = _scheduler.search(mod, ws.dev, cfg, ws.status, worker_blocks=int(blocks),
                                profile=profile, candidates=candidates,
                                progress=progress)
    except _scheduler.CudaError as exc:
        try:
            drv.Context.synchronize()  # non-sticky errors leave the context usable
        except drv.Error:
            raise _sticky_fault(exc) from exc
        raise
    times["search"] = time.perf_counter() - t0
    return _read_result(ws, out, p, times, column_std, device_copy)


def _sticky_fault(exc):
    """Record the search's sticky kernel fault ``exc`` and return the error to raise in its place."""
    from . import _scheduler

    _note_fault(exc)
    return _scheduler.CudaError(
        f"{exc}; CUDA keeps such a fault for the rest of the process, so the CUDA "
        "backend is unavailable until Python restarts (backend='auto' now uses the CPU)",
        exc.code)


def _read_result(ws, out, p, times, column_std, device_copy=None, counters=None):
    """search's results from the workspace of device 0 (order, stats, correlation).

    ``column_std``: the data's ``std(axis=0)`` from the upload's sums (the
    scatter matrix is made from it); ``device_copy``: the data kept on the
    device for the adjacency step (:class:`DeviceCopy`), or None (then
    ``per_iteration`` has no ``"device_copy"``); ``counters``: the
    workspaces whose counts of double comparisons add up (several devices:
    each counts its share), by default ``[ws]``.
    """
    import pycuda.driver as drv

    from . import _scheduler

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
        "float64_pairs": sum(part.read("it_pairs64", iters) for part in counters or [ws]).tolist(),
        "scores": ws.read("it_score", iters).tolist(),
        "all_pairs": out["all_pairs"][:iters].astype(bool).tolist(),
        "float64_chunks": out["redo_chunks"][:iters].tolist(),
    }
    corr = np.empty((p, p))
    drv.memcpy_dtoh(corr, ws.dev["corr0"])
    per_iteration["correlation"] = corr
    per_iteration["column_std"] = column_std  # data.std(axis=0), for the scatter matrix
    if device_copy is not None:
        per_iteration["device_copy"] = device_copy
    times["readback"] = time.perf_counter() - t0
    if out["gpu_time"]:
        by_device = isinstance(out["gpu_time"], list)  # several GPUs: a dict per device
        if by_device:
            per_iteration["gpu_time_by_device"] = out["gpu_time"]
            if out["gpu_events_full"]:
                warnings.warn("the profiled search ran out of CUDA events; the time after a "
                              "device's last event is not counted", RuntimeWarning, stacklevel=2)
        for name, secs in (out["gpu_time"][0] if by_device else out["gpu_time"]).items():
            times[f"gpu_{name}"] = secs
        per_iteration["gpu_rounds_s"] = out["gpu_rounds"][0] if by_device else out["gpu_rounds"]
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
    if kind == _constants.DEP_EXPLAINED:  # by root b: the order ends with b and them
        k = order.index(b)
        return LinearDependenceError("explained", order[k + 1:], order[: k + 1])
    r = out["r"]
    alive, label = ws.read("alive", r), ws.read("label", r)
    first = label[np.flatnonzero(alive == a)[0]]
    return LinearDependenceError("collinear", alive[label == first].tolist(), order)
