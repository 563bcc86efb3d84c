"""CUDA backend: PyCUDA owns the context, memory and compilation.

The kernels (``kernels/paralingam.cu``, shipped as ``paralingam.kernels``) are
compiled at run time with PyCUDA's ``compile``, whose disk cache is keyed by
the source, the options and the nvcc version, so a second process does not
recompile. Loaded modules are memoized per context, precision and block size.
The per-iteration loop runs in the Cython scheduler (``_scheduler.pyx``).
"""

import functools
import time
from importlib import resources

import numpy as np

# |I| error bound of a float32 comparison (see kernels/paralingam.cu,
# select_root): iterations whose root is not certain under it are redone in
# float64.
FLOAT32_EPS = 5e-5
DEFAULT_BLOCK = 256
PAIR_CAP_PER_VARIABLE = 8


def unavailable_reason():
    """Why the CUDA backend cannot run here, or None when it can."""
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
    return resources.files("paralingam.kernels").joinpath("paralingam.cu").read_text()


@functools.lru_cache(maxsize=None)
def _module(ctx_handle, real, block):
    """Compiled and loaded kernels for one context, precision and block size."""
    import pycuda.driver as drv
    from pycuda.compiler import compile as nvcc_compile

    from . import _scheduler

    major, minor = drv.Context.get_device().compute_capability()
    cubin = nvcc_compile(
        kernel_source(),
        options=[f"-DREAL={real}", f"-DBLOCK={block}", "-std=c++17", "-O3"],
        arch=f"sm_{major}{minor}",
        no_extern_c=True,
    )
    return _scheduler.Module(cubin, block)


def modules(dtype, block):
    """(module for the comparisons, float64 module) in the current context."""
    ctx = _context()
    m64 = _module(ctx.handle, "double", block)
    if dtype in ("float64", np.float64):
        return m64, m64
    return _module(ctx.handle, "float", block), m64


def _mapped(shape, dtype):
    import pycuda.driver as drv

    arr = drv.pagelocked_zeros(shape, dtype, mem_flags=drv.host_alloc_flags.DEVICEMAP)
    return arr, int(arr.base.get_device_pointer())


def search(data, *, threshold, gamma0, c, dtype, collinear_tol, explained_tol, drift_tol,
           times, threads_per_block=None):
    """Causal-order search of ``data`` (n_samples, n_features) on the GPU."""
    import pycuda.driver as drv

    from . import _scheduler

    block = threads_per_block or DEFAULT_BLOCK
    if block not in (32, 64, 128, 256, 512, 1024):
        raise ValueError(f"threads_per_block must be a power of two in 32..1024; got {block}")
    t0 = time.perf_counter()
    m32, m64 = modules(dtype, block)
    times["compile"] = time.perf_counter() - t0

    n, p = data.shape
    ld = (n + 31) // 32 * 32
    needed = p * ld * 12 + p * p * 20 + p * 64
    free, total = drv.mem_get_info()
    if needed > free:
        raise MemoryError(
            f"the CUDA backend needs {needed / 2**20:.0f} MiB of GPU memory for "
            f"{p} variables x {n} samples; {free / 2**20:.0f} MiB of {total / 2**20:.0f} MiB "
            "are free")

    t0 = time.perf_counter()
    X64_host = np.zeros((p, ld))
    X64_host[:, :n] = data.T
    X64 = drv.to_device(X64_host)
    X32 = drv.mem_alloc(p * ld * 4)
    cov = drv.mem_alloc(p * p * 8)
    rows = drv.to_device(np.arange(p, dtype=np.int32))
    m64.launch("standardise", (p,), (block,), [("p", int(X64)), ("p", int(X32)), ("i", ld), ("i", n)])
    tiles = (p + 15) // 16

    def covariance(rows_dev, m):
        g = (m + 15) // 16
        m64.launch("covariance", (g, g), (16, 16), [
            ("p", int(X64)), ("i", ld), ("i", n), ("p", int(rows_dev)), ("i", m),
            ("p", int(cov)), ("i", p)])

    covariance(rows, p)
    drv.Context.synchronize()
    times["standardise"] = time.perf_counter() - t0
    del tiles

    dev = {"X32": int(X32), "X64": int(X64), "cov": int(cov)}
    keep = [X64, X32, cov, rows]
    for name, nbytes in [("idx", 4 * p), ("weight", 8 * p), ("alive", 4 * p), ("hx", 8 * p),
                         ("state", 4 * p * p), ("stat", 8 * p * p), ("score", 8 * p),
                         ("absneg", 8 * p), ("ndone", 4 * p), ("cursor", 4 * p),
                         ("final_score", 8 * p)]:
        buf = drv.mem_alloc(max(nbytes, 8))
        keep.append(buf)
        dev[name] = int(buf)
    frac = drv.to_device(np.ones(p))
    keep.append(frac)
    dev["frac"] = int(frac)

    pair_cap = PAIR_CAP_PER_VARIABLE * p
    host = {}
    for name, shape, dt in [("finish", 1, np.int32), ("out", 2, np.float64),
                            ("iout", 3, np.int32), ("compared", 1, np.uint64),
                            ("explained", p, np.int32), ("drift", p, np.float64),
                            ("n_pairs", 1, np.int32), ("pairs", 2 * pair_cap, np.int32)]:
        host[name], host[name + "_dev"] = _mapped(shape, dt)

    def rederive(alive):
        # The update algebra drifted: re-standardise the remaining rows from
        # the data and recompute their covariance block.
        Xh = drv.from_device(X64, (p, ld), np.float64)
        sub = Xh[alive, :n]
        sub -= sub.mean(axis=1, keepdims=True)
        sub /= np.sqrt((sub * sub).mean(axis=1, keepdims=True))
        Xh[alive, :n] = sub
        drv.memcpy_htod(X64, Xh)
        drv.memcpy_htod(X32, Xh.astype(np.float32))
        rows_dev = drv.to_device(np.asarray(alive, dtype=np.int32))
        covariance(rows_dev, len(alive))
        drv.Context.synchronize()

    t0 = time.perf_counter()
    eps = 0.0 if m32 is m64 else FLOAT32_EPS
    result = _scheduler.search(
        m32, m64, dev, host, p, n, ld, threshold=threshold, gamma0=gamma0, c=c,
        collinear_tol=collinear_tol, explained_tol=explained_tol, drift_tol=drift_tol,
        eps=eps, pair_cap=pair_cap, rederive=rederive)
    times["search"] = time.perf_counter() - t0
    del keep
    return result
