"""``paralingam.fit``: validate, standardise, search the order, estimate edges."""

import contextlib
import sys
import time

import numpy as np

from . import _backends, _isa, _memory
from ._progress import Progress, check_progress
from ._result import FitResult
from ._validation import (CUDA_BLOCKS, MAX_THREADS, WARPS_PER_PAIR, _as_data_matrix, check_bool,
                          check_choice, check_dtype, check_int, check_positive, default_threads,
                          user_stacklevel)
from .adjacency import _ols_adjacency, _scaled_back
from .policy import COLLINEAR_TOL, EXPLAINED_TOL, LinearDependenceError, initial_noise
from .prior import PriorKnowledge

DEFAULT_GAMMA0 = 1e-4
DEFAULT_C = 2.0
MIN_C = 1.000001
DRIFT_TOL = 1e-8
# CPU searches with fewer sample-variable products than this run on one
# thread unless n_threads says otherwise: two threads do not speed them up
# (2 cores, back-to-back fits: p=10, n=1024 0.53 ms on one, 0.49 on two;
# from p=12 two win: 0.93 and 0.73 ms), and their many short parallel regions
# stall when another process holds a core (a 50-resample bootstrap of p=10,
# n=500 with one core busy: 0.21 s on two threads, 0.05 s on one).
SMALL_SEARCH = 12288
# Entries squared at once when standardising (a block of rows, 512 KiB).
STANDARDISE_BLOCK = 1 << 16
ON_COLLINEAR = ("warn", "ignore", "error")


def default_gamma0(n_samples):
    """First threshold of each iteration when ``fit`` is given none.

    ``DEFAULT_GAMMA0`` up to 1024 samples, scaled by ``1024 / n_samples``
    above: the root's score (the noise in its statistics) shrinks as n grows,
    and a threshold near it stops the other workers soonest. With 8192
    samples it saved 26% of the CPU search at p=200 (4.63 -> 3.40 s; the
    GPU's in benchmarks/NOTES.md).
    """
    return DEFAULT_GAMMA0 * min(1.0, 1024.0 / max(1, n_samples))


def column_exponents(X, absmax=None):
    """Per column ``e`` with ``max |X[:, j]| * 2**-e[j]`` in [0.5, 1).

    Scaling the columns by ``2**-e`` is exact (no rounding), so the search,
    which standardises every variable, gives bit for bit the result it gives
    on ``X``, and least squares gives exactly scaled coefficients; but squares
    of tiny columns (|x| ~ 1e-170) can no longer underflow. The reference
    scales the same way.
    """
    if absmax is None:  # (as_data_matrix's, when given: the same maxima)
        absmax = np.abs(X).max(axis=0, initial=0.0)
    return np.frexp(absmax)[1]


def scale_columns(X, exponents):
    """``np.ldexp(X, -exponents, out=X)``: ``X``, its columns scaled by ``2**-exponents``, in place.

    A product by a power of two is rounded as ``ldexp`` rounds (both are
    exact, or correctly rounded into the subnormals), and runs several times
    faster; ``ldexp`` is left for factors that are not normal float64.
    """
    exponents = np.asarray(exponents)
    if exponents.size and np.abs(exponents).max() < 1000:
        return np.multiply(X, np.ldexp(1.0, -exponents), out=X)
    return np.ldexp(X, -exponents, out=X)


def standardise_rows(X):
    """Population-standardised copy of ``X`` with one variable per row.

    Returns
    -------
    Z : ndarray, shape (n_features, n_samples), C-contiguous float64
    cov : ndarray, shape (n_features, n_features)
        ``Z @ Z.T / n``: the correlation matrix, unit diagonal.
    """
    # An explicit copy: for a Fortran-ordered X, X.T is already C-contiguous
    # and ascontiguousarray would return a view that the lines below modify.
    Z = np.array(X.T, dtype=np.float64, order="C", copy=True)
    Z -= Z.mean(axis=1, keepdims=True)
    # (Z * Z).mean(axis=1) by blocks of rows: each row's sum is the same
    # (numpy sums each contiguous row alone), without an n x p temporary.
    sq = np.empty((Z.shape[0], 1))
    rows = max(1, STANDARDISE_BLOCK // max(1, Z.shape[1]))
    for r0 in range(0, Z.shape[0], rows):
        block = Z[r0:r0 + rows]
        sq[r0:r0 + rows, 0] = (block * block).mean(axis=1)
    Z /= np.sqrt(sq)
    cov = covariance_of_rows(Z)
    return Z, cov


def covariance_of_rows(Z):
    """``Z @ Z.T / n`` with an exact unit diagonal, symmetric."""
    cov = Z @ Z.T / Z.shape[1]
    cov = 0.5 * (cov + cov.T)
    np.fill_diagonal(cov, 1.0)
    return cov


def fit(
    X,
    *,
    backend="auto",
    threshold=True,
    gamma0=None,
    c=None,
    dtype=None,
    collinear_tol=COLLINEAR_TOL,
    explained_tol=EXPLAINED_TOL,
    n_threads=None,
    threads_per_block=None,
    blocks=None,
    warps_per_pair=None,
    prior_knowledge=None,
    apply_prior_knowledge_softly=False,
    on_collinear="warn",
    feature_names=None,
    progress=False,
    _adjacency=None,
    _adjacency_method="ols",
    _adjacency_threads=1,
):
    """Learn a causal order and edge weights with ParaLiNGAM.

    The order is identical to lingam 1.13's ``DirectLiNGAM`` (``pwling``)
    wherever that is defined; degenerate data follow the documented policy
    of :mod:`paralingam.policy`.

    Parameters
    ----------
    X : array-like or pandas.DataFrame, shape (n_samples, n_features)
        Observations, one column per variable.
    backend : {"auto", "cpu", "cuda"}
        ``"auto"`` uses CUDA when pycuda and a GPU are usable, else the CPU.
    threshold : bool
        Use the threshold mechanism (early stopping of workers). The order is
        the same either way; ``False`` compares every pair.
    gamma0 : float, optional
        First threshold of each iteration, a normal float64 > 2.2e-308
        (default 1e-4, times 1024 / n_samples above 1024 samples).
    c : float, optional
        Factor by which the threshold is raised, > 1.000001 (default 2).
    dtype : {None, "float64", "float32"}
        Arithmetic of the comparisons (default float32). With float32 the
        special functions run in float and every statistic carries an error
        bound; where the bounds cannot separate the root from a rival, the
        iteration is re-decided in float64, so the order is the float64
        order either way (``stats["float64_redo"]``). ``"float64"`` computes
        every comparison in double.
    collinear_tol, explained_tol : float
        Tolerances of the degenerate-data policy (:mod:`paralingam.policy`):
        upper limits on the fraction of variance an exact dependence leaves;
        whether a residual is exact is decided against its rounding noise,
        so no tolerance makes a genuine residual (e.g. of outlier data) a
        dependence. ``1e-300`` switches the policy off.
    n_threads : int, optional
        CPU threads, 1..1024 (default: all cores, or ``OMP_NUM_THREADS`` up
        to the number of cores; one for a search with n_samples * n_features
        < 12288, which threads do not speed up; and by default the search halves its threads, down
        to one, while other work keeps them waiting for cores, for up to a
        second at a time and across later fits of the process, then steps
        back up: ``stats["threads"]`` gives the threads of each iteration).
        A number given here is used throughout.
    threads_per_block : int, optional
        CUDA backend: threads per block of the worker kernel (a multiple of
        32 up to 1024; default 256).
    blocks : int, optional
        CUDA backend: blocks of the persistent worker kernel (default: as
        many as are resident at once, from the device's occupancy).
    warps_per_pair : {1, 2, 4, 8, 16, 32}, optional
        CUDA backend: warps that compare one pair together, dividing the
        block's warps (default: 1 below 2048 samples, 2 below 4096, else 4).
    prior_knowledge : array-like, shape (n_features, n_features), optional
        Prior knowledge of the causal order, with the rules of lingam's
        ``DirectLiNGAM(prior_knowledge=...)`` (:mod:`paralingam.prior`).
        ``prior_knowledge[i, j]`` is ``1`` when column ``j`` has a directed
        path to column ``i`` (``j`` comes before ``i``), ``0`` when column
        ``j`` has no directed path to column ``i``, and ``-1`` (or NaN) when
        this is unknown. (This is the orientation of lingam's code, of
        ``lingam.utils.make_prior_knowledge`` and of ``adjacency_matrix``.)
        A DataFrame labelled with the data's column names is matched by
        label. It restricts the causal order only; the adjacency matrix is
        the least-squares fit on that order. A fully explained variable
        (:mod:`paralingam.policy`) can break a strict rule;
        ``stats["prior_knowledge_unmet"]`` then lists the broken
        ``(before, after)`` rules.
    apply_prior_knowledge_softly : bool
        ``False`` (default): the known paths and no-paths are strict partial
        orders. ``True``: lingam's soft rule: the next root is chosen among
        the remaining variables known to be exogenous, else among those not
        known to be endogenous or sinks (:mod:`paralingam.prior`).
    on_collinear : {"warn", "ignore", "error"}
        What to do with exact linear dependencies (:mod:`paralingam.policy`):
        ``"warn"`` applies the policy and emits one ``DegenerateDataWarning``
        naming the fully explained variables; ``"ignore"`` applies it
        silently; ``"error"`` raises ``LinearDependenceError`` at the first
        dependence found (a collinear group among the remaining variables, or
        a fully explained variable), naming the variables and the roots
        already regressed out.
    feature_names : sequence of str, optional
        One name per column, used in the result and in error messages
        (default: a DataFrame's column names).
    progress : bool or {"auto"}, default False
        A bar of the search's iterations (variables ordered) on stderr, on
        both backends: ``True`` always, ``"auto"`` when stderr is a terminal
        and the search has run for a second, ``False`` never (the default,
        so that the fits of a bootstrap or a script's loop stay silent; the
        command line passes ``"auto"``).

    Returns
    -------
    FitResult
        ``causal_order``, ``adjacency_matrix`` (least squares on the order),
        ``names`` and ``stats`` (``stats["scores"]``: the root's score of every
        search iteration).

    Raises
    ------
    ValueError
        On invalid data or parameters, including prior knowledge of the
        wrong shape, with values other than -1, 0, 1 and NaN, or that is
        inconsistent; the message names the problem.
    paralingam.policy.LinearDependenceError
        (a ValueError) With ``on_collinear="error"``, on exact dependence.
    RuntimeError
        When ``backend="cuda"`` cannot run here.
    paralingam.InsufficientMemoryError
        (a MemoryError) Before any large allocation, when a step needs more
        memory than is available (host or GPU); the message names the step,
        the size and what to change.
    """
    times = {}
    t0 = time.perf_counter()
    data, names, absmax = _as_data_matrix(X, feature_names)
    threshold = check_bool("threshold", threshold)
    # The threshold is raised by repeated multiplication: a subnormal gamma0,
    # or a factor closer to 1, could leave it stuck (or moving one ulp at a
    # time): a hang.
    gamma0 = check_positive("gamma0", default_gamma0(data.shape[0]) if gamma0 is None else gamma0,
                            above=np.finfo(np.float64).tiny)
    c = check_positive("c", DEFAULT_C if c is None else c, above=MIN_C)
    # 1 - rho**2 and the remaining-variance fraction lie in [0, 1].
    collinear_tol = check_positive("collinear_tol", collinear_tol, below=1.0)
    explained_tol = check_positive("explained_tol", explained_tol, below=1.0)
    if n_threads is not None:
        n_threads = check_int("n_threads", n_threads, high=MAX_THREADS)
    dtype = check_dtype(dtype)
    if threads_per_block is not None:
        threads_per_block = check_int("threads_per_block", threads_per_block, CUDA_BLOCKS)
    if blocks is not None:
        blocks = check_int("blocks", blocks)
    if warps_per_pair is not None:
        warps_per_pair = check_int("warps_per_pair", warps_per_pair, WARPS_PER_PAIR)
    on_collinear = check_choice("on_collinear", on_collinear, ON_COLLINEAR)
    progress = check_progress(progress)
    apply_prior_knowledge_softly = check_bool("apply_prior_knowledge_softly",
                                              apply_prior_knowledge_softly)
    candidates = prior = None
    if prior_knowledge is not None:
        prior = PriorKnowledge(
            _aligned_prior(prior_knowledge, names), data.shape[1],
            soft=apply_prior_knowledge_softly)
        candidates = prior.candidates
    name = _backends.resolve_backend(backend)
    stop = on_collinear == "error"
    # Every large step's memory, checked before the first runs: a fit that
    # cannot finish fails now, not after a long search.
    n, p = data.shape
    use_float = dtype != "float64"
    if name != "cpu":  # pragma: no cover - needs a GPU
        from . import _cuda

        _cuda.check_memory(n, p, use_float)
    _memory.require_all(_memory.fit_plan(
        n, p, backend=name, use_float=use_float, adjacency=_adjacency_method,
        n_threads=max(n_threads or 1, _adjacency_threads)))
    # Search and regress on exactly rescaled columns (same result, no
    # underflow), then scale the coefficients back. (A pass over the data:
    # timed with the checks, as the preparation of the input.)
    exponents = column_exponents(data, absmax)
    search_data = scale_columns(data, exponents)
    times["validate"] = time.perf_counter() - t0
    try:
        if name == "cpu":
            order, explained, per_it, n_rederived = _search_cpu(
                search_data, threshold, gamma0, c, collinear_tol, explained_tol, n_threads,
                times, stop, candidates, use_float=dtype != "float64", progress=progress)
        else:  # pragma: no cover - needs a GPU
            from . import _cuda
            with Progress(p, progress, desc="search", unit="variable") as bar:
                order, explained, per_it, n_rederived = _cuda.search(
                    search_data, threshold=threshold, gamma0=gamma0, c=c,
                    dtype=dtype or "float32", collinear_tol=collinear_tol,
                    explained_tol=explained_tol, drift_tol=DRIFT_TOL, times=times,
                    threads_per_block=threads_per_block, blocks=blocks,
                    warps_per_pair=warps_per_pair, stop_on_dependence=stop,
                    candidates=candidates, progress=_monotonic(bar))
                bar.update_to(p)
    except LinearDependenceError as exc:
        raise exc.with_names(names) from None

    t0 = time.perf_counter()
    with np.errstate(over="ignore"):
        scatter = None
        if "correlation" in per_it:  # the CUDA backend's: no X.T @ X on the host
            sd = search_data.std(axis=0)
            scatter = search_data.shape[0] * per_it.pop("correlation") * np.outer(sd, sd)
        # ``_adjacency`` (private: DirectLiNGAM's adjacency step) replaces least
        # squares; it gets the scatter matrix the CUDA search already has.
        step = _adjacency or (lambda data, order, scatter, backend:
                              _ols_adjacency(data, order, scatter=scatter, backend=backend))
        # BLAS beside the CPU search's spinning threads: see _blas_in_this_thread
        with _blas_in_this_thread() if name == "cpu" else contextlib.nullcontext():
            B = step(search_data, np.asarray(order, dtype=np.intp), scatter, name)
    B = _scaled_back(B, exponents, names)
    times["adjacency"] = time.perf_counter() - t0

    pairs = [r * (r - 1) // 2 for r in per_it["remaining"]]
    total_pairs = sum(pairs)
    stats = {
        "backend": name,
        "explained": explained,
        "remaining": per_it["remaining"],
        "compared": per_it["compared"],
        "pairs": pairs,
        "gamma": per_it["gamma"],
        "rounds": per_it["rounds"],
        "comparisons_saved": 1.0 - sum(per_it["compared"]) / total_pairs if total_pairs else 0.0,
        "n_rederived": n_rederived,
        "scores": per_it["scores"],
        "float64_redo": per_it.get("float64_redo", []),
        "float64_candidates": per_it.get("float64_candidates", []),
        "threads": per_it.get("threads", []),
        "all_pairs": per_it.get("all_pairs", []),
        "time": times,
    }
    # A fully explained variable is placed right after the root that
    # completed it, which can put it before a variable that strict prior
    # knowledge orders first (the search itself never breaks a rule).
    unmet = prior.unmet(order) if prior is not None else []
    if unmet:
        stats["prior_knowledge_unmet"] = unmet
    if explained and on_collinear == "warn":
        _warn_explained(explained, names, unmet)
    return FitResult(order, B, names, stats)


_blas_controller = None
_blas_controller_libraries = None


def _blas_in_this_thread():
    """A context in which numpy's BLAS runs in the calling thread only.

    After each multi-threaded call OpenBLAS's worker threads spin for about
    0.1 s before they sleep: after the covariance product they took the
    cores the CPU search's OpenMP threads need (p=200, n=1024 on 2 cores: the
    search 20% slower), and the search's own threads, spinning after it, slow
    multi-threaded BLAS in the adjacency step. The controller is made once
    (threadpool_limits scans the loaded libraries on every call: 0.8 ms) and
    again when scipy's linear algebra, with its own BLAS, has been loaded
    since: it sees the libraries loaded when it was made. It does not load
    scipy itself: that import (50-300 ms) would be most of a small first fit,
    whose steps use numpy's BLAS alone.
    """
    return _blas_threads().limit(limits=1, user_api="blas")


def _blas_threads():
    """The threadpoolctl controller of the BLAS libraries loaded now (made once per set)."""
    global _blas_controller, _blas_controller_libraries
    libraries = "scipy.linalg" in sys.modules
    if _blas_controller is None or libraries != _blas_controller_libraries:
        from threadpoolctl import ThreadpoolController

        _blas_controller = ThreadpoolController()
        _blas_controller_libraries = libraries
    return _blas_controller


def _search_cpu(data, threshold, gamma0, c, collinear_tol, explained_tol, n_threads, times,
                stop_on_dependence, candidates=None, use_float=True, progress=False):
    # What the first fit of a process loads (the compiled search, the BLAS
    # controller) is timed apart: it is no part of any step.
    t0 = time.perf_counter()
    _cpu = _isa.load("_cpu")

    _blas_threads()
    times["load"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    n, p = data.shape
    threads = n_threads or (1 if data.size < SMALL_SEARCH else default_threads())
    _memory.require("standardising the data and its covariance (n_features^2 float64)",
                    _memory.standardise_bytes(n, p), _memory.FEWER)
    with _blas_in_this_thread():
        Z, cov = standardise_rows(data)
    times["standardise"] = time.perf_counter() - t0
    _memory.require("the CPU order search (its n_features x n_features state)",
                    _memory.cpu_search_bytes(n, p, use_float, threads), _memory.FEWER)

    def rederive(alive):
        # Re-standardise the remaining rows from the data and recompute
        # their covariance block: the update algebra drifted.
        rows = Z[alive]
        rows -= rows.mean(axis=1, keepdims=True)
        rows /= np.sqrt((rows * rows).mean(axis=1, keepdims=True))
        Z[alive] = rows
        with _blas_in_this_thread():
            cov[np.ix_(alive, alive)] = covariance_of_rows(rows)

    t0 = time.perf_counter()
    with Progress(p, progress, desc="search", unit="variable") as bar:
        result = _cpu.search_order(
            Z, cov, threshold=threshold, gamma0=gamma0, c=c, collinear_tol=collinear_tol,
            explained_tol=explained_tol, drift_tol=DRIFT_TOL,
            n_threads=threads, adapt_threads=n_threads is None, rederive=rederive,
            stop_on_dependence=stop_on_dependence, candidates=candidates, use_float=use_float,
            noise=initial_noise(data), progress=_monotonic(bar))
        bar.update_to(p)
    times["search"] = time.perf_counter() - t0
    return result


def _monotonic(bar):
    """A ``progress(done)`` callback for ``bar`` (None when it is disabled).

    Counts only go forward: a caller that reports a lower bound of the work
    done (the GPU's started tasks, say) never moves the bar back.
    """
    if not bar.enabled:
        return None

    def report(done):
        if done > bar.n:
            bar.update_to(min(done, bar.total))

    return report


def _aligned_prior(pk, names):
    """``pk`` with a DataFrame's rows and columns put in the data's column order.

    A DataFrame labelled with the data's column names is matched by label (a
    reordered copy means the same knowledge); one with the default 0..p-1
    labels, or any matrix when the data have no names, is read by position.
    Other labels are an error naming them, rather than a silent positional
    reading of knowledge meant for other columns.
    """
    if not hasattr(pk, "columns") or not hasattr(pk, "index"):
        return pk
    import pandas as pd

    p = pk.shape[1]
    positional = pd.RangeIndex(p)
    if pk.index.equals(positional) and pk.columns.equals(positional):
        return pk
    if names is None:
        raise ValueError(
            "prior_knowledge is a DataFrame with labels, but the data have no column "
            "names to match them to: pass the data as a DataFrame or feature_names, or "
            "the prior knowledge as an array (read by position)")
    labels = list(names)
    wanted = set(labels)
    for axis, got in (("rows", pk.index), ("columns", pk.columns)):
        present = set(got)
        if not got.is_unique or present != wanted:
            missing = [x for x in labels if x not in present]
            extra = [x for x in got if x not in wanted]
            raise ValueError(
                f"the prior_knowledge DataFrame's {axis} must be the data's column names "
                f"(in any order){'' if got.is_unique else ', each once'}; missing: "
                f"{missing[:10]}, unknown: {extra[:10]}")
    return pk.loc[labels, labels]


def _warn_explained(explained, names, unmet=()):
    import warnings

    label = (lambda i: str(i)) if names is None else (lambda i: f"{names[i]!r}")
    pairs = ", ".join(f"{label(v)} (after {label(r)})" for v, r in explained.items())
    broken = ""
    if unmet:
        rules = ", ".join(f"{label(a)} before {label(b)}" for a, b in unmet)
        broken = (f" This breaks {len(unmet)} rule(s) of the prior knowledge: {rules} "
                  "(stats['prior_knowledge_unmet']).")
    warnings.warn(
        f"{len(explained)} variable(s) are fully explained by earlier ones (exact linear "
        f"dependence) and were placed right after the root that completed them: {pairs}."
        f"{broken} See paralingam.policy.",
        DegenerateDataWarning,
        stacklevel=user_stacklevel(),
    )


class DegenerateDataWarning(UserWarning):
    """Some variables are exact linear combinations of others."""
