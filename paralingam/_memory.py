"""Memory estimates of each step, and the check that runs before it allocates.

Every step whose memory grows as ``n_features ** 2`` (or faster) asks
:func:`require` first, with the bytes it is about to allocate (estimated by
the functions below, one per step: the single place each formula lives).
When that exceeds the memory available, the step raises
:class:`InsufficientMemoryError` naming itself, the size, what is available
and what to change, instead of numpy's ``MemoryError`` (or the kernel's OOM
killer) part-way through. The estimates count the arrays a step allocates
on top of what is already held (available memory is read at the time of the
check, so held arrays are already accounted for), including the temporaries
alive at its peak; ``tests/test_memory.py`` compares them with the peaks
``tracemalloc`` measures.

Available host memory is the smallest of ``MemAvailable`` in
``/proc/meminfo`` (elsewhere ``psutil.virtual_memory().available``, where
psutil is installed) and the room left under the process's cgroup limit (v2
``memory.max - memory.current``, v1 ``memory.limit_in_bytes -
memory.usage_in_bytes``). Where none of these can be read, no check is made.
``PARALINGAM_MEMORY_CHECK=0`` turns the host checks off (for systems whose
reported memory is misleading, e.g. with large swap).
"""

import os

F8 = 8  # bytes of a float64
F4 = 4  # bytes of an int32 / float32
# Bytes of each of the CUDA upload's two page-locked blocks (search._cuda.upload).
UPLOAD_BLOCK_BYTES = 1 << 25
# Steps that need less than this are not checked: reading /proc/meminfo and
# the cgroup files costs ~0.1 ms, more than a small fit's whole step.
MIN_CHECKED = 64 << 20
ENV_SWITCH = "PARALINGAM_MEMORY_CHECK"


class InsufficientMemoryError(MemoryError):
    """A step of paralingam needs more memory than is available.

    Raised before the step allocates anything, so nothing is half-done.

    Attributes
    ----------
    step : str or None
        The step that would have run out of memory.
    needed, available : int or None
        Bytes the step needs, and bytes available when it was checked.
    """

    def __init__(self, message, *, step=None, needed=None, available=None):
        super().__init__(message)
        self.step, self.needed, self.available = step, needed, available


class GPUMemoryError(InsufficientMemoryError):
    """The problem does not fit in the GPU's free memory."""


def format_bytes(nbytes):
    """``nbytes`` in the largest binary unit that keeps it >= 1 (``'2.98 GiB'``)."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} PiB"  # pragma: no cover


# ---------------------------------------------------------------------------
# What is available
# ---------------------------------------------------------------------------

def _read_int(path):
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    if not text or text == "max":
        return None
    try:
        return int(text.split()[0])
    except ValueError:
        return None


def _meminfo_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room():
    """Bytes left under this process's cgroup memory limit, or None without a limit."""
    rooms = []
    paths = []
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3 and (parts[1] == "" or "memory" in parts[1].split(",")):
                    paths.append((parts[1] == "", parts[2]))
    except OSError:
        pass
    candidates = []
    for v2, rel in paths:
        root = "/sys/fs/cgroup" if v2 else "/sys/fs/cgroup/memory"
        candidates.append((v2, os.path.join(root, rel.lstrip("/"))))
    candidates += [(True, "/sys/fs/cgroup"), (False, "/sys/fs/cgroup/memory")]
    for v2, folder in candidates:
        if v2:
            limit = _read_int(os.path.join(folder, "memory.max"))
            used = _read_int(os.path.join(folder, "memory.current"))
        else:
            limit = _read_int(os.path.join(folder, "memory.limit_in_bytes"))
            used = _read_int(os.path.join(folder, "memory.usage_in_bytes"))
        # v1 reports "no limit" as a huge number (2**63 rounded to pages)
        if limit is not None and limit < 1 << 60:
            rooms.append(max(0, limit - (used or 0)))
    return min(rooms) if rooms else None


def available_host_bytes():
    """Host memory this process can still allocate, in bytes, or None when unknown.

    ``MemAvailable`` of ``/proc/meminfo`` where it can be read (Linux):
    psutil reports that same field there, and its ``virtual_memory()``
    reads every other field too (about 1.3 ms on a 2-core VM, against
    0.05 ms). Elsewhere, psutil where it is installed.
    """
    found = []
    value = _meminfo_available()
    if value is None:
        try:
            import psutil
        except ImportError:
            psutil = None
        if psutil is not None:
            try:
                value = int(psutil.virtual_memory().available)
            except Exception:  # psutil without support for this platform
                value = None
    if value is not None:
        found.append(value)
    room = _cgroup_room()
    if room is not None:
        found.append(room)
    return min(found) if found else None


def require(step, needed, advice):
    """Raise :class:`InsufficientMemoryError` when ``needed`` bytes of host memory are not available.

    Parameters
    ----------
    step : str
        What would allocate them (``"the adjacency step (adaptive lasso)"``).
    needed : int
        Bytes the step allocates at its peak, beyond what is already held.
    advice : str
        What the user can change.
    """
    ok, available = _room(needed)
    if ok:
        return
    raise InsufficientMemoryError(
        f"not enough memory for {step}: it needs about {format_bytes(needed)}, and "
        f"{format_bytes(available)} is available; {advice} (set {ENV_SWITCH}=0 to skip "
        "this check)", step=step, needed=int(needed), available=int(available))


def fits(needed):
    """Whether ``needed`` bytes of host memory are available, as :func:`require` judges it."""
    return _room(needed)[0]


def _room(needed):
    """``(fits, available)``: :func:`fits`'s answer and the bytes it read (None: not read)."""
    if needed < MIN_CHECKED or os.environ.get(ENV_SWITCH, "1") == "0":
        return True, None
    available = available_host_bytes()
    return available is None or needed <= available, available


def require_all(plan):
    """:func:`require` for each ``(step, needed, advice)`` of ``plan``."""
    for step, needed, advice in plan:
        require(step, needed, advice)


# ---------------------------------------------------------------------------
# Estimates, one per step (bytes at the step's peak, beyond what it is given)
# ---------------------------------------------------------------------------

FEWER = "use fewer variables (columns)"


def standardise_bytes(n, p):
    """``_api.standardise_rows``: the copy Z and ``Z * Z`` (and a third n x p
    of temporaries), then the covariance ``Z @ Z.T / n`` and its
    symmetrisation (three or four p x p arrays at once)."""
    return F8 * (3 * n * p + 4 * p * p)


def cpu_search_bytes(n, p, use_float=True, n_threads=1):
    """The CPU search (``_cpu.search_order``) after standardisation: its p x p
    state (int32 states and partners, float64 statistics; float32 searches add
    the error bounds and the re-decision's statistics), per-thread partner
    scratch, and the re-derivation of the covariance (``covariance_of_rows``)."""
    state = p * p * (F4 + F8 + F4) + (2 * F8 * p * p if use_float else 0)
    return state + F4 * n_threads * p + F8 * (n * p + 3 * p * p)


def cpu_fit_search_bytes(n, p, use_float=True, n_threads=1):
    """Standardisation's kept arrays (Z, the covariance and the first
    correlation matrix, kept for the adjacency step) and the search on top."""
    return F8 * (n * p + 2 * p * p) + cpu_search_bytes(n, p, use_float, n_threads)


def cuda_host_bytes(n, p, devices=1):
    """Host side of the CUDA search: the upload's two page-locked blocks
    (``_cuda.upload``; kept per device of a multi-GPU search) and the
    correlation read back, then the scatter matrix made from it (three p x
    p). (The device side is ``search._cuda_state.device_bytes``, derived from
    the state's layout.)"""
    return 2 * devices * min(UPLOAD_BLOCK_BYTES, F8 * n * p) + F8 * 4 * p * p


def scatter_bytes(n, p):
    """``adjacency._scatter``: the centred copy and ``Xc.T @ Xc`` symmetrised."""
    return F8 * (n * p + 3 * p * p)


def min_norm_bytes(n, p):
    """``adjacency._min_norm_rows`` and its data vectors, at most: the centred
    copy and its R factor (QR workspace as large), the basis U (d x cap), the
    coordinates C (cap x p) and Y (p x cap), the factor R (cap x cap) and the
    rows (p x p), with ``d = min(n, p)`` and ``cap <= max(d, 64)``."""
    d = min(n, p)
    cap = min(p, max(d, 64))
    return F8 * (3 * n * p + d * p + d * cap + 2 * cap * p + cap * cap + 2 * p * p)


def scatter_by_blocks_bytes(n, p):
    """``adjacency._scatter_by_blocks``: one block of rows (and the running
    sum's row), the product of a block with itself, the sum and its symmetrised copy."""
    from ._preparation import scatter_rows

    return F8 * ((min(n, scatter_rows(n, p)) + 1) * p + 3 * p * p)


def ols_bytes(n, p, scatter_given=False):
    """Least squares on the causal order (``adjacency._ols_adjacency``): the
    scatter matrix unless given (by blocks of rows), the covariance in causal
    order, the Cholesky factor, its inverse and the coefficient rows with
    their temporaries, the result; plus the minimum-norm rows where the
    covariance is singular (always when n <= p)."""
    own = 0 if scatter_given else scatter_by_blocks_bytes(n, p)
    need = own + F8 * 8 * p * p
    if n <= p + 1:
        need += min_norm_bytes(n, p)
    return need


def adaptive_lasso_bytes(n, p, n_threads=1, scatter_given=False):
    """``adjacency._adaptive_lasso_adjacency``: the scatter matrix unless given,
    it and the Gram matrix in causal order (the Gram matrix in the data's
    order too where scikit-learn's LARS takes targets), the least-squares
    factor (as :func:`ols_bytes`), three p x p results, the compiled LARS's
    k x k scratch per thread, and scikit-learn's LARS (data copies) for
    degenerate targets; an upper bound."""
    own = 0 if scatter_given else scatter_bytes(n, p)
    # 2 n p: scikit-learn's LARS for the rare degenerate targets (a copy of
    # the predictors and the target's data)
    return own + F8 * (2 * n * p + 12 * p * p + n_threads * p * p)


def adjacency_bytes(method, n, p, n_threads=1, scatter_given=False):
    """The adjacency step of ``method`` (``"ols"`` or ``"adaptive_lasso"``)."""
    if method == "adaptive_lasso":
        return adaptive_lasso_bytes(n, p, n_threads, scatter_given)
    return ols_bytes(n, p, scatter_given)


def total_effects_bytes(p):
    """``bootstrap.total_effects``: B in causal order (three temporaries), the
    effects in causal order and in column order, and the identity they start from."""
    return F8 * 7 * p * p


def bootstrap_result_bytes(n_sampling, n, p):
    """The bootstrap's results: adjacency matrices and total effects
    (n_sampling x p x p each) and the resampled row indices (n_sampling x n)."""
    return F8 * (2 * n_sampling * p * p + n_sampling * n)


def fit_plan(n, p, *, backend, use_float=True, n_threads=1, adjacency="ols", devices=1):
    """``(step, bytes, advice)`` of every large step of ``paralingam.fit``.

    Each entry is the step's own peak, beyond the data already held: the
    steps run one after another and free their arrays in between.
    ``devices``: the number of GPUs sharing a CUDA search.
    """
    threads = max(1, n_threads)
    plan = []
    if backend == "cpu":
        plan.append(("standardising the data and its covariance (n_features^2 float64)",
                     standardise_bytes(n, p), FEWER))
        plan.append(("the CPU order search (its n_features x n_features state)",
                     cpu_fit_search_bytes(n, p, use_float, threads),
                     FEWER + ("" if not use_float else
                              "; dtype='float64' needs 16 bytes less per pair")))
    else:
        plan.append(("the CUDA search's host buffers (upload and correlation matrix)",
                     cuda_host_bytes(n, p, devices), FEWER))
    name = "adaptive lasso" if adjacency == "adaptive_lasso" else "least squares"
    advice = FEWER
    if adjacency == "adaptive_lasso":
        advice += ", fewer threads (n_threads: each holds an n_features^2 scratch)"
        advice += ", or adjacency='ols'"
    plan.append((f"the adjacency step ({name})",
                 # (the scatter matrix comes from the search's correlation matrix)
                 adjacency_bytes(adjacency, n, p, threads, scatter_given=True), advice))
    return plan
