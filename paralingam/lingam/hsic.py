"""HSIC independence test with the gamma approximation (Gretton et al., 2008).

The statistic, kernel widths and null moments are those of lingam 1.13's
``hsic_test_gamma`` with its default bandwidth (median distance between the
first 100 samples), so p-values agree with lingam's. What differs is the
bookkeeping: lingam builds two ``n x n`` Gram matrices per pair of variables;
here no ``n x n`` matrix is ever held. The Gaussian-kernel Gram matrices are
computed tile by tile, twice: a first pass accumulates their row sums (which
the centring ``H K H`` needs), a second builds the centred tiles of every
variable and accumulates, for all pairs at once, the two sums the test needs,
``sum(Kc * Lc)`` and ``sum((Kc * Lc)**2)``, with one matrix product of the
stacked tiles. Memory is ``O(n p + p b^2)`` for tiles of ``b x b`` samples.
docs/design/p_values.rst derives the algebra.

On the CUDA backend the same sums come from ``kernels/hsic.cu``.
"""

import collections
import contextlib
import functools
import math
import os
import threading

import numpy as np

from .. import _constants, _gpu
from .._progress import Progress as _Progress
from .._progress import check_progress

# The gamma approximation's null variance carries the factor (n - 4)(n - 5) /
# ((n - 2)(n - 3)) (lingam's hsic_test_gamma): at n = 4 or 5 it is zero and the
# p-value NaN, at n = 3 it divides by zero. Six samples is the least it needs.
MIN_SAMPLES = 6

# Doubles in one stacked tile (variables x b x b): 2**18 (2 MiB) keeps the
# tile's repeated elementwise passes in the cache (b = 128 at 11 variables).
# Between b = 128 and 512 the time changed little (docs/design/p_values.rst).
_TILE_DOUBLES = 2**18
_MIN_BLOCK, _MAX_BLOCK = 32, 1024



def kernel_width(x):
    """Median-heuristic bandwidth of a Gaussian kernel.

    ``sqrt(median / 2)`` of the positive squared distances between the first
    100 samples (or all, when fewer).

    Parameters
    ----------
    x : ndarray, shape (n_samples,) or (n_samples, n_dims)

    Returns
    -------
    float
        NaN when no distance is positive (the samples are equal up to
        rounding): no Gaussian kernel fits them.
    """
    x = _as_columns(x)[:100]
    # The squared distances are expanded as |a|^2 + |b|^2 - 2 a.b, as in lingam:
    # which near-zero distances count as "positive" depends on this rounding,
    # and the median must pick the same element.
    sq = np.sum(x * x, axis=1)[:, None]
    dists = sq + sq.T - 2.0 * (x @ x.T)
    upper = dists[np.triu_indices(len(x), k=1)]
    positive = upper[upper > 0]
    if positive.size == 0:
        return float("nan")
    return float(np.sqrt(0.5 * np.median(positive)))


def centred_gram(x, width):
    """Gaussian-kernel Gram matrix and its doubly centred form (dense, ``n x n``).

    A reference for small ``n``; the tests themselves never form these.

    Parameters
    ----------
    x : ndarray, shape (n_samples,) or (n_samples, n_dims)
    width : float

    Returns
    -------
    K, Kc : ndarray, shape (n_samples, n_samples)
        ``K[a, b] = exp(-|x_a - x_b|^2 / (2 width^2))`` and ``H K H`` with
        the centring matrix ``H``.
    """
    x = _as_columns(x)
    diff = x[:, None, :] - x[None, :, :]
    K = np.exp(-np.sum(diff * diff, axis=2) / (2.0 * width**2))
    n = len(x)
    col = K.sum(axis=0)
    row = K.sum(axis=1)
    Kc = K - (col[None, :] + row[:, None]) / n + row.sum() / n**2
    return K, Kc


def hsic_test_gamma(X, Y, *, block_size=None):
    """HSIC test of independence between ``X`` and ``Y``, gamma approximation.

    Parameters
    ----------
    X, Y : ndarray, shape (n_samples,) or (n_samples, n_dims)
    block_size : int, optional
        Samples per side of a Gram-matrix tile (default: chosen from the
        number of variables; see :func:`independence_p_values`).

    Returns
    -------
    test_stat : float
        ``n`` times the biased HSIC estimate.
    p_value : float
        Upper tail of the gamma law fitted to the statistic's null mean and
        variance; 1 when ``X`` or ``Y`` is constant (see
        :func:`independence_p_values`).

    Raises
    ------
    ValueError
        When ``X`` and ``Y`` have different numbers of samples, or fewer than
        ``MIN_SAMPLES`` (6).
    """
    X, Y = _as_columns(X), _as_columns(Y)
    n = len(X)
    if len(Y) != n:
        raise ValueError(f"X and Y need the same number of samples; got {n} and {len(Y)}")
    _check_samples(n)
    width_x, width_y = kernel_width(X), kernel_width(Y)
    if np.isnan(width_x) or np.isnan(width_y):
        return 0.0, 1.0
    variables = [_scaled(X, width_x), _scaled(Y, width_y)]
    block = _block_size(block_size, 2, n)
    _check_host_memory(n, variables, block)
    stat, var_sum, mu = _sums_cpu(variables, block, False)
    p = _gamma_p_values(stat[0, 1], var_sum[0, 1], mu[0], mu[1], n)
    return float(stat[0, 1]), float(p)


def independence_p_values(E, constant=None, *, backend="cpu", progress=False,
                          block_size=None, n_threads=None):
    """p-values of pairwise HSIC independence tests between the columns of ``E``.

    A constant column is independent of every other: its p-values are 1.
    Such are the columns in ``constant`` (the errors of fully explained
    variables, zero up to rounding) and those whose kernel width is
    undefined (no two of the samples that set it differ), where the test
    itself would give NaN.

    Parameters
    ----------
    E : ndarray, shape (n_samples, n_features)
    constant : array-like of bool, shape (n_features,), optional
        Columns to treat as constant.
    backend : {"cpu", "cuda", "auto"}, default "cpu"
        Where the Gram-matrix sums are computed. ``"auto"`` takes the GPU
        when the CUDA backend is usable.
    progress : bool or {"auto"}, default False
        Report progress on stderr: ``True`` always, ``"auto"`` when stderr
        is a terminal (drawn after a second), ``False`` never. Uses tqdm
        when it is installed, else a plain line (:mod:`paralingam._progress`).
    block_size : int, optional
        Samples per side of a Gram-matrix tile on the CPU (default: about
        ``sqrt(2**18 / n_features)``, between 32 and 1024). Results do not
        depend on it beyond rounding.
    n_threads : int, optional
        Threads of the CPU path (default: the usable cores). The tiles are
        cut into the same tasks and their sums combined in the same order
        whatever the number, so results are bit for bit the same.

    Returns
    -------
    ndarray, shape (n_features, n_features)
        Symmetric, zero diagonal; entry ``[i, j]`` is the p-value of the test
        of independence between columns ``i`` and ``j``.

    Raises
    ------
    ValueError
        With two or more columns and fewer than ``MIN_SAMPLES`` (6) rows,
        non-finite values, a ``constant`` of the wrong length, or a bad
        ``backend``, ``progress``, ``block_size`` or ``n_threads``.
    MemoryError
        When the ``O(n_samples * n_features)`` working arrays do not fit in
        the available memory (checked before anything is allocated).
    """
    from ..search import _backends

    check_progress(progress)
    E = np.asarray(E, dtype=np.float64)
    if E.ndim != 2:
        raise ValueError(f"E must be a 2-D array (samples x variables); got {E.ndim} dimensions")
    n, p = E.shape
    backend = _backends.resolve_backend(backend)
    n_threads = _thread_count(n_threads)
    if constant is not None:
        constant = np.asarray(constant, dtype=bool)
        if constant.shape != (p,):
            raise ValueError(f"constant must have one entry per column of E ({p}); "
                             f"got shape {constant.shape}")
    P = np.zeros((p, p))
    if p < 2:
        return P
    _check_samples(n)
    if not np.isfinite(E).all():
        raise ValueError("E contains NaN or infinite values; the HSIC test needs finite data")
    widths = np.array([kernel_width(E[:, i]) for i in range(p)])
    flat = np.isnan(widths)
    if constant is not None:
        flat |= constant
    keep = np.flatnonzero(~flat)
    if len(keep) > 1:
        variables = [_scaled(E[:, i], widths[i]) for i in keep]
        sub = np.zeros((len(keep), len(keep)))
        if backend == "cuda":
            _gpu_check_memory(n, len(keep))
            stat, var_sum, mu = _sums_cuda(np.vstack(variables), progress)
        else:
            block = _block_size(block_size, len(keep), n)
            _check_host_memory(n, variables, block, n_threads)
            stat, var_sum, mu = _sums_cpu(variables, block, progress, n_threads)
        iu = np.triu_indices(len(keep), k=1)
        sub[iu] = _gamma_p_values(stat[iu], var_sum[iu], mu[iu[0]], mu[iu[1]], n)
        sub.T[iu] = sub[iu]
        P[np.ix_(keep, keep)] = sub
    P[flat, :] = 1.0
    P[:, flat] = 1.0
    np.fill_diagonal(P, 0.0)
    return P


def error_p_values(X, B, *, backend="cpu", progress=False):
    """p-values of HSIC tests between the errors ``E = X - X B^T`` of a fitted model.

    The models' ``get_error_independence_p_values`` (lingam's test of the
    errors). The errors are computed on columns scaled by powers of two, as
    :func:`paralingam.fit` scales them: they are then the errors scaled the
    same way (exactly), and neither the test nor its p-values depend on a
    column's scale, whereas on the data's own scale the variances and
    kernel widths of tiny columns (``|x| ~ 1e-170``) underflow to zero. The
    error of a fully explained variable (variance at most
    ``paralingam.search.policy.EXPLAINED_TOL`` times the variable's) is zero
    up to rounding: it counts as constant (p-values 1).

    Parameters
    ----------
    X : ndarray of float64, shape (n_samples, n_features)
        The data (or a VAR's residuals); overwritten (scaled).
    B : ndarray, shape (n_features, n_features)
        The model's adjacency matrix on the data's scale.
    backend, progress
        As :func:`independence_p_values`.

    Returns
    -------
    ndarray, shape (n_features, n_features)
    """
    from .._preparation import column_exponents, scale_columns
    from ..search.policy import EXPLAINED_TOL

    exponents = column_exponents(X)
    X = scale_columns(X, exponents)
    B = np.ldexp(B, exponents[None, :] - exponents[:, None])
    E = X - X @ B.T
    constant = E.var(axis=0) <= EXPLAINED_TOL * X.var(axis=0)
    return independence_p_values(E, constant, backend=backend, progress=progress)


# ----------------------------------------------------------------------
# the sums, tile by tile on the CPU
# ----------------------------------------------------------------------

def _scaled(x, width):
    """``x / (sqrt(2) width)`` with one variable's dimensions as rows.

    The kernel is then ``exp(-|z_a - z_b|^2)``: lingam's
    ``exp(-|x_a - x_b|^2 / 2 / width^2)`` up to a few roundings of the
    exponent.
    """
    z = _as_columns(x).T * (1.0 / (math.sqrt(2.0) * width))
    return np.ascontiguousarray(z)


def _block_size(block_size, q, n):
    if block_size is None:
        b = int(math.sqrt(_TILE_DOUBLES / q))
        b = 1 << max(0, b.bit_length() - 1)  # a power of two
        return max(1, min(n, max(_MIN_BLOCK, min(_MAX_BLOCK, b))))
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)) \
            or block_size < 1:
        raise ValueError(f"block_size must be a positive integer; got {block_size!r}")
    return min(int(block_size), n)


class _Moments:
    """What the centring and the null mean need from the row sums."""

    def __init__(self, rows_sum):
        q, n = rows_sum.shape
        self.n = n
        total = rows_sum.sum(axis=1)
        # lingam: Kc = K - (colsums[None, :] + rowsums[:, None]) / n + allsum / n**2
        self.u = rows_sum / n
        self.c = total / n**2
        # lingam zeroes the diagonal (exp(0) = 1) before summing K
        self.mu = (total - n) / n / (n - 1)
        # the centred diagonal, Kc[a, a] = 1 - 2 u[a] + c, evaluated as a tile evaluates it
        self.diag = (1.0 - (self.u + self.u)) + self.c[:, None]

    def statistics(self, G1, G2):
        """Statistics ``sum(Kc * Lc) / n`` and ``sum_{a != b} (Kc Lc)^2``, all pairs.

        ``G1``, ``G2``: sums over all ``(a, b)``, the diagonal included.
        """
        dd = self.diag * self.diag
        return G1 / self.n, G2 - dd @ dd.T


# Tiles per task of the thread pool: tens of milliseconds of work, so a
# stop request (Ctrl-C) is answered quickly and partial sums stay small.
_TILES_PER_TASK = 16


def _segments(n, b):
    """Tasks ``(r0, c_starts)``: runs of tiles along one block row, upper block triangle.

    Fixed by ``n`` and ``b`` alone, and combined in this order, so the sums do
    not depend on the number of threads.
    """
    for r0 in range(0, n, b):
        c_starts = list(range(r0, n, b))
        for k in range(0, len(c_starts), _TILES_PER_TASK):
            yield r0, c_starts[k:k + _TILES_PER_TASK]


def _n_tiles(n, b):
    m = -(-n // b)
    return m * (m + 1) // 2


def _kernel_tile(z, rows, cols, out, scratch):
    """``out = exp(-|z_a - z_b|^2)`` for ``a`` in ``rows``, ``b`` in ``cols``."""
    np.subtract.outer(z[0, rows], z[0, cols], out=out)
    np.multiply(out, out, out=out)
    for k in range(1, len(z)):
        np.subtract.outer(z[k, rows], z[k, cols], out=scratch)
        np.multiply(scratch, scratch, out=scratch)
        out += scratch
    np.negative(out, out=out)
    np.exp(out, out=out)


class _Buffers(threading.local):
    """Each thread's tile buffers, made on first use."""

    def get(self, q, b):
        if getattr(self, "key", None) != (q, b):
            self.key = (q, b)
            self.stack = np.empty(q * b * b)
            self.shift = np.empty(b * b)
            self.scratch = np.empty(b * b)
        return self.stack, self.shift, self.scratch


def _row_sums_task(variables, b, r0, c_starts, buffers, stop):
    """Row sums of one run of tiles: the rows' part and, by symmetry, the columns'.

    ``K`` is symmetric: a tile off the diagonal blocks gives the row sums of
    its rows and, through its column sums, of its columns.
    """
    q, n = len(variables), variables[0].shape[1]
    stack, _, scratch = buffers.get(q, b)
    r = slice(r0, min(r0 + b, n))
    c_lo, c_hi = c_starts[0], min(c_starts[-1] + b, n)
    row_part = np.zeros((q, r.stop - r.start))
    col_part = np.zeros((q, c_hi - c_lo))
    for c0 in c_starts:
        if stop.is_set():
            return None
        c = slice(c0, min(c0 + b, n))
        shape = (r.stop - r.start, c.stop - c.start)
        t = stack[:shape[0] * shape[1]].reshape(shape)
        s = scratch[:t.size].reshape(shape)
        for i, z in enumerate(variables):
            _kernel_tile(z, r, c, t, s)
            row_part[i] += t.sum(axis=1)
            if c0 != r0:
                col_part[i, c0 - c_lo:c.stop - c_lo] += t.sum(axis=0)
    return r, slice(c_lo, c_hi), row_part, col_part


def _pair_sums_task(variables, moments, b, r0, c_starts, buffers, stop):
    """Pair sums of one run of tiles: ``(G1, G2)`` of the diagonal tile and of the others.

    Per tile the centred tiles of all variables are stacked as rows of one
    (q, tile size) matrix ``F``; ``F @ F.T`` gives every pair's part of
    ``sum(Kc_i * Kc_j)``, and of ``sum(Kc_i^2 * Kc_j^2)`` after squaring ``F``
    in place.
    """
    q, n = len(variables), variables[0].shape[1]
    u, c = moments.u, moments.c
    stack, shift, scratch = buffers.get(q, b)
    r = slice(r0, min(r0 + b, n))
    G_diag = np.zeros((2, q, q))
    G_off = np.zeros((2, q, q))
    for c0 in c_starts:
        if stop.is_set():
            return None
        col = slice(c0, min(c0 + b, n))
        shape = (r.stop - r.start, col.stop - col.start)
        size = shape[0] * shape[1]
        F = stack[:q * size].reshape(q, size)
        v = shift[:size].reshape(shape)
        s = scratch[:size].reshape(shape)
        for i, z in enumerate(variables):
            t = F[i].reshape(shape)
            _kernel_tile(z, r, col, t, s)
            np.add.outer(u[i, r], u[i, col], out=v)
            t -= v
            t += c[i]
        G = G_diag if c0 == r0 else G_off
        G[0] += F @ F.T
        np.multiply(F, F, out=F)
        G[1] += F @ F.T
    return G_diag, G_off


def _run_tasks(task, segments, combine, n_threads, reporter):
    """Run ``task(r0, c_starts, buffers, stop)`` on every segment; combine the results in order.

    On an exception in the calling thread (KeyboardInterrupt included) the
    workers stop at their next tile and are joined before it propagates.
    """
    buffers = _Buffers()
    stop = threading.Event()
    if n_threads == 1:
        for r0, c_starts in segments:
            combine(task(r0, c_starts, buffers, stop))
            reporter.update(len(c_starts))
        return
    from concurrent.futures import ThreadPoolExecutor

    pending = collections.deque()
    with ThreadPoolExecutor(max_workers=n_threads, thread_name_prefix="paralingam-hsic") as ex:
        try:
            for r0, c_starts in segments:
                pending.append((ex.submit(task, r0, c_starts, buffers, stop), len(c_starts)))
                while len(pending) > 2 * n_threads:
                    future, tiles = pending.popleft()
                    combine(future.result())
                    reporter.update(tiles)
            while pending:
                future, tiles = pending.popleft()
                combine(future.result())
                reporter.update(tiles)
        except BaseException:
            stop.set()
            for future, _ in pending:
                future.cancel()
            raise


def _sums_cpu(variables, block, progress, n_threads=1):
    """Statistics, variance sums and null means of all pairs, on the CPU."""
    q, n = len(variables), variables[0].shape[1]
    tiles = _n_tiles(n, block)
    if tiles <= _TILES_PER_TASK:
        n_threads = 1  # one task per pass
    reporter = _Progress(2 * tiles, progress, desc="p-values", unit="tile")
    rows_sum = np.zeros((q, n))
    G = np.zeros((2, 2, q, q))  # [diagonal tiles, others][G1, G2]

    def add_rows(result):
        r, c, row_part, col_part = result
        rows_sum[:, r] += row_part
        rows_sum[:, c] += col_part

    def add_pairs(result):
        G[0] += result[0]
        G[1] += result[1]

    with _blas_single_threaded(n_threads):
        try:
            _run_tasks(functools.partial(_row_sums_task, variables, block),
                       _segments(n, block), add_rows, n_threads, reporter)
            moments = _Moments(rows_sum)
            _run_tasks(functools.partial(_pair_sums_task, variables, moments, block),
                       _segments(n, block), add_pairs, n_threads, reporter)
        finally:
            reporter.close()
    # a tile off the diagonal blocks stands for its mirror image too
    G1, G2 = G[0] + 2.0 * G[1]
    stat, var_sum = moments.statistics(G1, G2)
    return stat, var_sum, moments.mu


def _blas_single_threaded(n_threads):
    """One BLAS thread while several of ours run products side by side."""
    if n_threads == 1:
        return contextlib.nullcontext()
    from .. import _blas

    return _blas.in_this_thread()


def _thread_count(n_threads):
    if n_threads is None:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            return max(1, os.cpu_count() or 1)
    if isinstance(n_threads, bool) or not isinstance(n_threads, (int, np.integer)) \
            or n_threads < 1:
        raise ValueError(f"n_threads must be a positive integer; got {n_threads!r}")
    return int(n_threads)


def _host_bytes_needed(n, variables, block, n_threads=1):
    q = len(variables)
    dims = sum(len(z) for z in variables)
    # scaled copies, row sums and their 1/n multiples, the centred diagonal;
    # per thread one stacked tile and two single-tile buffers; the partial
    # sums of the tasks in flight (at most 2 per thread, and one being combined)
    per_task = q * block * (_TILES_PER_TASK + 1) + 4 * q * q
    return 8 * (dims * n + 3 * q * n + n_threads * block * block * (q + 2)
                + (2 * n_threads + 1) * per_task)


def _available_host_memory():
    """Bytes the kernel says are available (Linux), else None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _check_host_memory(n, variables, block, n_threads=1):
    need = _host_bytes_needed(n, variables, block, n_threads)
    avail = _available_host_memory()
    if avail is not None and need > avail:
        raise MemoryError(
            f"the HSIC p-values of {len(variables)} variables on {n} samples need "
            f"{need / 2**20:.0f} MiB of memory; {avail / 2**20:.0f} MiB are available. "
            f"Use fewer samples or test fewer variables at a time.")


# ----------------------------------------------------------------------
# the sums on the GPU (kernels/hsic.cu)
# ----------------------------------------------------------------------

_GPU_THREADS = 256          # kernels/hsic.cu: TPB
# kernel evaluations (rows x columns x variables or pairs) per launch: a few
# milliseconds of GPU time, so that Ctrl-C is answered between launches
_GPU_LAUNCH_WORK = 2**31
_GPU_MAX_PAIRS = 65535      # grid.y limit
_GPU_PARTIAL_DOUBLES = 2**23


@functools.lru_cache(maxsize=None)
def _gpu_kernels(ctx_handle):
    """The compiled ``kernels/hsic.cu`` for one context (pycuda caches the cubin on disk)."""
    import pycuda.driver as drv

    src = _constants.kernel_text("hsic.cu")
    mod = drv.module_from_buffer(_gpu.cubin(src, ["-O3"], _gpu.arch()))
    fns = {"module": mod}
    for name, sig in (("hsic_row_sums", "PiiP"), ("hsic_pair_sums", "PPPiPPiiPP")):
        fns[name] = mod.get_function(name)
        fns[name].prepare(sig)
    return fns


def _gpu_bytes_needed(n, q):
    # z and u (q x n each), c, the pair lists, the per-launch partial sums
    return 16 * q * n + 8 * q + 8 * min(q * q, 2 * _GPU_MAX_PAIRS) + 16 * _GPU_PARTIAL_DOUBLES


def _gpu_check_memory(n, q):
    import pycuda.driver as drv

    _gpu.context()
    free, _ = drv.mem_get_info()
    need = _gpu_bytes_needed(n, q) + (64 << 20)
    if need > free:
        raise _gpu.GPUMemoryError(
            f"the HSIC p-values of {q} variables on {n} samples need {need / 2**20:.0f} MiB "
            f"of GPU memory; {max(free, 0) / 2**20:.0f} MiB are free. Use backend='cpu' "
            f"or fewer samples.")


@_gpu.exclusive
def _sums_cuda(Z, progress):
    """Statistics, variance sums and null means of all pairs, on the GPU.

    ``Z``: the scaled variables, shape (q, n). Row sums come from
    ``hsic_row_sums``; ``hsic_pair_sums`` then sums ``Kc_i Kc_j`` and its
    square over the strict upper triangle (``b > a``) for each pair; the
    diagonal is added here and the mirror image counted twice.
    """
    ctx = _gpu.context()
    fns = _gpu_kernels(ctx.handle)
    return _gpu.guarded(_cuda_launches, fns, np.ascontiguousarray(Z), progress)


def _cuda_launches(fns, Z, progress):
    import pycuda.driver as drv

    q, n = Z.shape
    pairs_i, pairs_j = np.triu_indices(q, k=1)
    n_pairs = len(pairs_i)
    row_chunk = max(1, min(n, _GPU_LAUNCH_WORK // (n * q)))
    row_launches = -(-n // row_chunk)
    pair_batch = min(n_pairs, _GPU_MAX_PAIRS)
    pair_rows = max(1, min(n, _GPU_LAUNCH_WORK // (n * pair_batch),
                           _GPU_PARTIAL_DOUBLES // pair_batch))
    pair_launches = -(-n_pairs // pair_batch) * -(-n // pair_rows)
    reporter = _Progress(row_launches + pair_launches, progress, desc="p-values",
                         unit="launch")
    try:
        d_z = drv.to_device(Z)
        d_rows = drv.mem_alloc(8 * q * n)
        for r0 in range(0, n, row_chunk):
            rows = min(row_chunk, n - r0)
            for i0 in range(0, q, _GPU_MAX_PAIRS):  # grid.y: at most 65535 variables
                fns["hsic_row_sums"].prepared_call(
                    (rows, min(q - i0, _GPU_MAX_PAIRS), 1), (_GPU_THREADS, 1, 1),
                    int(d_z) + 8 * i0 * n, np.int32(n), np.int32(r0), int(d_rows) + 8 * i0 * n)
            drv.Context.synchronize()
            reporter.update()
        rows_sum = np.empty((q, n))
        drv.memcpy_dtoh(rows_sum, d_rows)
        d_rows.free()
        moments = _Moments(rows_sum)
        d_u = drv.to_device(np.ascontiguousarray(moments.u))
        d_c = drv.to_device(np.ascontiguousarray(moments.c))
        S1 = np.zeros(n_pairs)
        S2 = np.zeros(n_pairs)
        d_out1 = drv.mem_alloc(8 * pair_batch * pair_rows)
        d_out2 = drv.mem_alloc(8 * pair_batch * pair_rows)
        out1 = np.empty(pair_batch * pair_rows)
        out2 = np.empty(pair_batch * pair_rows)
        for k0 in range(0, n_pairs, pair_batch):
            k1 = min(n_pairs, k0 + pair_batch)
            d_pi = drv.to_device(pairs_i[k0:k1].astype(np.int32))
            d_pj = drv.to_device(pairs_j[k0:k1].astype(np.int32))
            for r0 in range(0, n, pair_rows):
                rows = min(pair_rows, n - r0)
                fns["hsic_pair_sums"].prepared_call(
                    (rows, k1 - k0, 1), (_GPU_THREADS, 1, 1), d_z, d_u, d_c, np.int32(n),
                    d_pi, d_pj, np.int32(r0), np.int32(rows), d_out1, d_out2)
                m = (k1 - k0) * rows
                drv.memcpy_dtoh(out1[:m], d_out1)  # synchronises with the launch
                drv.memcpy_dtoh(out2[:m], d_out2)
                S1[k0:k1] += out1[:m].reshape(k1 - k0, rows).sum(axis=1)
                S2[k0:k1] += out2[:m].reshape(k1 - k0, rows).sum(axis=1)
                reporter.update()
    finally:
        reporter.close()
    d = moments.diag
    G1 = d @ d.T
    G1[pairs_i, pairs_j] += 2.0 * S1
    G1[pairs_j, pairs_i] = G1[pairs_i, pairs_j]
    var_sum = np.zeros((q, q))
    var_sum[pairs_i, pairs_j] = var_sum[pairs_j, pairs_i] = 2.0 * S2
    return G1 / n, var_sum, moments.mu


# ----------------------------------------------------------------------
# shared
# ----------------------------------------------------------------------

def _check_samples(n):
    """ValueError unless ``n`` samples are enough for the gamma approximation."""
    if n < MIN_SAMPLES:
        raise ValueError(
            f"the HSIC gamma test needs at least {MIN_SAMPLES} samples (its null variance "
            f"has the factor (n - 4)(n - 5)); got {n}")


def _gamma_p_values(stat, var_sum, mu_x, mu_y, n):
    """Gamma-approximation p-values from the statistics and null moments."""
    from scipy.stats import gamma

    # var_sum is sum_{a != b} (Kc[a, b] Lc[a, b])^2; the 1/36 is lingam's (1/6)^2.
    var = var_sum / 36.0 / n / (n - 1)
    var = 72.0 * (n - 4) * (n - 5) / n / (n - 1) / (n - 2) / (n - 3) * var
    mean = (1.0 + mu_x * mu_y - mu_x - mu_y) / n
    shape = mean**2 / var
    scale = var * n / mean
    return gamma.sf(stat, shape, scale=scale)


def _as_columns(x):
    x = np.asarray(x, dtype=np.float64)
    return x.reshape(-1, 1) if x.ndim == 1 else x
