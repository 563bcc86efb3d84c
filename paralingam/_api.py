"""``paralingam.fit``: validate, prepare, search the order, estimate edges.

:func:`fit` reads top-down through its phases, each a function of its own:
:func:`check_settings` (the parameters), :func:`prepare` (the memory plan and
the exact rescaling of the columns), :func:`search` (the causal order on one
backend), :func:`adjacency` (edge weights on that order) and
:func:`fit_result`. ``DirectLiNGAM`` and the command line validate the data
once and call the same phases with their own adjacency method; nothing calls
back into them.
"""

import itertools
import time
from dataclasses import dataclass

import numpy as np

from . import _blas, _isa, _memory, _preparation
from ._progress import Progress, check_progress
from ._result import FitResult
from ._validation import (MAX_THREADS, _as_data_matrix, _by_rows, check_bool, check_choice,
                          check_dtype, check_int, check_positive, default_threads,
                          user_stacklevel)
from .adjacency import _estimate_adjacency
from .adjacency._common import _scaled_back, _scaled_products
from .search import _backends
from .search._tuning import Tuning, check_tuning
from .search.policy import COLLINEAR_TOL, EXPLAINED_TOL, LinearDependenceError, noise_and_std
from .prior import PriorKnowledge

DEFAULT_GAMMA0 = 1e-4
DEFAULT_C = 2.0
MIN_C = 1.000001
DRIFT_TOL = 1e-8
# CPU searches with fewer sample-variable products than this run on one
# thread unless n_threads says otherwise: two threads do not speed them up,
# and their many short parallel regions stall when another process holds a
# core (docs/design/cpu_search.rst, "Busy cores").
SMALL_SEARCH = 12288
ON_COLLINEAR = ("warn", "ignore", "error")


def default_gamma0(n_samples):
    """First threshold of each iteration when ``fit`` is given none.

    ``DEFAULT_GAMMA0`` up to 1024 samples, scaled by ``1024 / n_samples``
    above: the root's score (the noise in its statistics) shrinks as n grows,
    and a threshold near it stops the other workers soonest
    (docs/design/gpu_search.rst, "Workers": first threshold).
    """
    return DEFAULT_GAMMA0 * min(1.0, 1024.0 / max(1, n_samples))


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
    prior_knowledge=None,
    apply_prior_knowledge_softly=False,
    on_collinear="warn",
    feature_names=None,
    progress=False,
    devices=None,
    tuning=None,
    threads_per_block=None,
    blocks=None,
    warps_per_pair=None,
):
    """Learn a causal order and edge weights with ParaLiNGAM.

    The order is identical to lingam 1.13's ``DirectLiNGAM`` (``pwling``)
    wherever that is defined; degenerate data follow the documented policy
    of :mod:`paralingam.search.policy`.

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
        Tolerances of the degenerate-data policy (:mod:`paralingam.search.policy`):
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
        (:mod:`paralingam.search.policy`) can break a strict rule;
        ``stats["prior_knowledge_unmet"]`` then lists the broken
        ``(before, after)`` rules.
    apply_prior_knowledge_softly : bool
        ``False`` (default): the known paths and no-paths are strict partial
        orders. ``True``: lingam's soft rule: the next root is chosen among
        the remaining variables known to be exogenous, else among those not
        known to be endogenous or sinks (:mod:`paralingam.prior`).
    on_collinear : {"warn", "ignore", "error"}
        What to do with exact linear dependencies (:mod:`paralingam.search.policy`):
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
        command line passes ``"auto"``), a search over several GPUs
        (``devices``) too.
    devices : None, "all" or list of int, optional
        CUDA backend: the GPUs of one host that share the causal-order
        search (``None``, the default: GPU 0 alone; ``"all"``: every visible
        GPU). The first GPU listed holds the search state; every other one
        needs peer access with native atomics to it, and it peer access to
        them (NVLink). The order is
        the one a single GPU finds. ``stats["devices"]`` lists the GPUs used.
    tuning : paralingam.Tuning or dict, optional
        CUDA backend: the worker kernel's launch settings
        (``threads_per_block``, ``blocks``, ``warps_per_pair``; see
        :class:`paralingam.Tuning`), apart from the model's parameters: none
        of them changes the order. The CPU backend ignores them.
    threads_per_block, blocks, warps_per_pair : int, optional
        Deprecated: pass them in ``tuning`` (a DeprecationWarning says so).

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
    paralingam.search.policy.LinearDependenceError
        (a ValueError) With ``on_collinear="error"``, on exact dependence.
    RuntimeError
        When ``backend="cuda"`` cannot run here, or ``devices`` names GPUs
        without peer access to the first one (or the first one without
        access to them).
    paralingam.InsufficientMemoryError
        (a MemoryError) Before any large allocation, when a step needs more
        memory than is available (host or GPU); the message names the step,
        the size and what to change.
    """
    tuning = _tuning_with_deprecated(tuning, threads_per_block=threads_per_block, blocks=blocks,
                                     warps_per_pair=warps_per_pair)
    t0 = time.perf_counter()
    # The data's columns are rescaled exactly (column_exponents); float input
    # comes as a ScaledData over the input itself, which the search and
    # least squares read scaled block by block: no scaled copy (peak host memory).
    data, names, exponents = _as_data_matrix(X, feature_names, scaled="deferred")
    settings = check_settings(
        data.shape[1], names, backend=backend, threshold=threshold, gamma0=gamma0, c=c,
        dtype=dtype, collinear_tol=collinear_tol, explained_tol=explained_tol,
        n_threads=n_threads, prior_knowledge=prior_knowledge,
        apply_prior_knowledge_softly=apply_prior_knowledge_softly, on_collinear=on_collinear,
        progress=progress, devices=devices, tuning=tuning, n_samples=data.shape[0])
    return fit_checked(data, names, settings, t0, exponents=exponents,
                       n_threads=settings.n_threads)


def fit_checked(data, names, settings, t0, *, exponents=None, absmax=None, method="ols",
                adjacency_threads=1, n_threads=None, prior_knowledge=None, progress=False):
    """The phases of a fit after its checks: prepare, search, adjacency; the ``FitResult``.

    :func:`fit`, ``DirectLiNGAM`` (its adjacency method) and the command
    line run these steps here, in this order.

    Parameters
    ----------
    data : ndarray or ScaledData
        Checked data (:func:`_as_data_matrix`'s), with ``exponents`` where
        they come scaled already, else with their columns' largest ``|x|``
        in ``absmax`` where known (:func:`prepare`).
    names : list of str or None
    settings : Settings
        :func:`check_settings`' for these data.
    t0 : float
        ``time.perf_counter()`` when the caller's checks began: the
        "validate" phase runs from it to the end of :func:`prepare`.
    method : {"ols", "adaptive_lasso"}
        The adjacency step (:func:`adjacency`); ``adjacency_threads``, the
        threads :func:`prepare` plans its memory for.
    n_threads, prior_knowledge, progress
        :func:`adjacency`'s.
    """
    times = {}
    search_data, exponents = prepare(data, absmax, settings, adjacency=method,
                                     adjacency_threads=adjacency_threads, exponents=exponents)
    times["validate"] = time.perf_counter() - t0
    found = search(search_data, settings, names, times)
    # least squares reads a ScaledData block by block too (no copy of the data)
    B = adjacency(search_data, found, settings, exponents, names, times, method=method,
                  prior_knowledge=prior_knowledge, n_threads=n_threads, progress=progress)
    return fit_result(found, B, names, settings, times)


def _readable_by_search(data, settings):
    """``data``, or where the search cannot read that ScaledData as it is, its copy.

    The CPU search reads a ScaledData; so does the GPU upload (which scales
    the blocks on the device, exactly; on each device of a multi-GPU search)
    of float64 or float32 input whose scaling is a product by normal powers
    of two. Other ScaledData are copied (the same values).
    """
    if not isinstance(data, _preparation.ScaledData) or settings.backend == "cpu":
        return data
    if data.factors is not None and data.source.dtype in (np.float64, np.float32):
        return data
    return data.copy(_by_rows)


@dataclass(frozen=True)
class Settings:
    """The checked parameters of one fit (:func:`check_settings`)."""

    backend: str  # "cpu" or "cuda": resolved
    threshold: bool
    gamma0: float
    c: float
    dtype: object  # None, "float64" or "float32"
    collinear_tol: float
    explained_tol: float
    n_threads: object  # None or int
    prior: object  # PriorKnowledge or None
    on_collinear: str
    progress: object
    tuning: Tuning
    devices: object = None  # None (one GPU, or the CPU) or the list of GPUs sharing the search

    @property
    def use_float(self):
        return self.dtype != "float64"


@dataclass
class Found:
    """What the order search found (:func:`search`)."""

    order: np.ndarray  # of intp
    explained: dict
    per_iteration: dict
    n_rederived: int
    correlation: object = None  # the rescaled data's correlation matrix, from the search
    column_std: object = None  # its columns' std, from the same search
    device_copy: object = None  # the CUDA search's data on the device (search._cuda.DeviceCopy)


def _tuning_with_deprecated(tuning, **launch):
    """``tuning`` with the deprecated launch keywords of ``fit`` merged in (a DeprecationWarning)."""
    given = {k: v for k, v in launch.items() if v is not None}
    if not given:
        return tuning
    import warnings

    warnings.warn(f"fit({', '.join(f'{k}=...' for k in given)}) is deprecated: pass "
                  f"tuning={{{', '.join(repr(k) + ': ...' for k in given)}}} (or a "
                  "paralingam.Tuning) instead", DeprecationWarning, stacklevel=user_stacklevel())
    if tuning is None:
        return given
    both = dict(vars(check_tuning(tuning)))
    clash = [k for k in given if both[k] is not None]
    if clash:
        raise ValueError(f"{clash} given both in tuning and as keywords: pass them in tuning")
    both.update(given)
    return both


def check_settings(n_features, names, *, backend="auto", threshold=True, gamma0=None, c=None,
                   dtype=None, collinear_tol=COLLINEAR_TOL, explained_tol=EXPLAINED_TOL,
                   n_threads=None, prior_knowledge=None, apply_prior_knowledge_softly=False,
                   on_collinear="warn", progress=False, devices=None, tuning=None,
                   n_samples=1):
    """The parameters of :func:`fit` checked, with defaults filled in and the backend chosen.

    Returns
    -------
    Settings

    Raises
    ------
    ValueError
        Naming the parameter and the value given.
    RuntimeError
        When ``backend="cuda"`` cannot run here, or ``devices`` is given and
        the CUDA backend cannot run.
    """
    threshold = check_bool("threshold", threshold)
    # The threshold is raised by repeated multiplication: a subnormal gamma0,
    # or a factor closer to 1, could leave it stuck (or moving one ulp at a
    # time): a hang.
    gamma0 = check_positive("gamma0", default_gamma0(n_samples) if gamma0 is None else gamma0,
                            above=np.finfo(np.float64).tiny)
    c = check_positive("c", DEFAULT_C if c is None else c, above=MIN_C)
    # 1 - rho**2 and the remaining-variance fraction lie in [0, 1].
    collinear_tol = check_positive("collinear_tol", collinear_tol, below=1.0)
    explained_tol = check_positive("explained_tol", explained_tol, below=1.0)
    if n_threads is not None:
        n_threads = check_int("n_threads", n_threads, high=MAX_THREADS)
    dtype = check_dtype(dtype)
    tuning = check_tuning(tuning)
    on_collinear = check_choice("on_collinear", on_collinear, ON_COLLINEAR)
    progress = check_progress(progress)
    soft = check_bool("apply_prior_knowledge_softly", apply_prior_knowledge_softly)
    prior = None
    if prior_knowledge is not None:
        prior = PriorKnowledge(_aligned_prior(prior_knowledge, names), n_features, soft=soft)
    devices = _backends.check_devices(devices, backend)
    name = _backends.resolve_backend(backend)
    if devices is not None and name == "cpu":
        raise RuntimeError(f"devices={devices if devices == 'all' else list(devices)} needs the "
                           "CUDA backend, which cannot run here: "
                           f"{_backends.cuda_unavailable_reason()}")
    if devices is not None:  # pragma: no cover - needs a GPU
        from .search import _cuda

        devices = _cuda.resolve_devices(devices)
    return Settings(backend=name, threshold=threshold,
                    gamma0=gamma0, c=c, dtype=dtype, collinear_tol=collinear_tol,
                    explained_tol=explained_tol, n_threads=n_threads, prior=prior,
                    on_collinear=on_collinear, progress=progress, tuning=tuning,
                    devices=devices)


def prepare(data, absmax, settings, *, adjacency="ols", adjacency_threads=1, exponents=None):
    """Check every large step's memory, then rescale ``data``'s columns exactly, in place.

    The memory of every step (of the adjacency method ``adjacency`` too) is
    checked before the first runs: a fit that cannot finish fails now, not
    after a long search. The search and the regressions run on columns
    scaled by powers of two (the same result, no underflow); the
    coefficients are scaled back at the end. With ``exponents`` given,
    ``data`` come rescaled by them already (``_as_data_matrix(...,
    scaled=True)``, or a ``ScaledData`` with ``scaled="deferred"``) and are
    returned as they are, except a ScaledData the search cannot read, which
    is copied (:func:`_readable_by_search`).

    Returns
    -------
    search_data : ndarray or ScaledData
        ``data``, its columns rescaled (the same array), or ``data`` itself
        (a ScaledData) or its copy.
    exponents : ndarray of int
        The columns' exponents, for scaling the coefficients back.
    """
    n, p = data.shape
    if settings.backend != "cpu":  # pragma: no cover - needs a GPU
        from .search import _cuda

        if settings.devices is None:
            _cuda.check_memory(n, p, settings.use_float)
        else:
            _cuda.check_memory_multi(n, p, settings.use_float, settings.devices)
        _compile_gpu_kernels_soon()
    _memory.require_all(_memory.fit_plan(
        n, p, backend=settings.backend, use_float=settings.use_float, adjacency=adjacency,
        n_threads=max(settings.n_threads or 1, adjacency_threads),
        devices=len(settings.devices or (0,))))
    if exponents is not None:
        return _readable_by_search(data, settings), exponents
    exponents = _preparation.column_exponents(data, absmax)
    return _preparation.scale_columns(data, exponents), exponents


def _compile_gpu_kernels_soon():  # pragma: no cover - needs a GPU
    """Start compiling the upload's and the adjacency step's kernels on threads.

    The first fit on a machine compiles every GPU step's kernels; these then
    compile while the search's compile in this thread
    (:func:`paralingam._gpu.compile_soon`: once per process, later a file
    read). Only where CUDA runs: a stand-in for the CUDA search (the tests')
    has no GPU to compile for.
    """
    from . import _gpu

    if _gpu.unavailable_reason() is not None:
        return
    from .adjacency import _cuda_adjacency
    from .search import _cuda

    _cuda._context()
    _gpu.compile_soon(_cuda.kernel_jobs() + _cuda_adjacency.kernel_jobs(), _gpu.arch())


def search(search_data, settings, names, times):
    """The causal order of the rescaled data on the settings' backend.

    Returns
    -------
    Found

    Raises
    ------
    paralingam.LinearDependenceError
        With ``on_collinear="error"``, naming the variables.
    """
    stop = settings.on_collinear == "error"
    candidates = settings.prior.candidates if settings.prior is not None else None
    try:
        if settings.backend == "cpu":
            order, explained, per_it, n_rederived = _search_cpu(
                search_data, settings.threshold, settings.gamma0, settings.c,
                settings.collinear_tol, settings.explained_tol, settings.n_threads, times, stop,
                candidates, use_float=settings.use_float, progress=settings.progress)
        else:  # pragma: no cover - needs a GPU
            from .search import _cuda
            tuning = settings.tuning
            p = search_data.shape[1]
            with Progress(p, settings.progress, desc="search", unit="variable") as bar:
                order, explained, per_it, n_rederived = _cuda.search(
                    search_data, threshold=settings.threshold, gamma0=settings.gamma0,
                    c=settings.c, dtype=settings.dtype or "float32",
                    collinear_tol=settings.collinear_tol, explained_tol=settings.explained_tol,
                    drift_tol=DRIFT_TOL, times=times, threads_per_block=tuning.threads_per_block,
                    blocks=tuning.blocks, warps_per_pair=tuning.warps_per_pair,
                    stop_on_dependence=stop, candidates=candidates, devices=settings.devices,
                    progress=_monotonic(bar), keep_copy=_keeps_copy(search_data))
                bar.update_to(p)
    except LinearDependenceError as exc:
        raise exc.with_names(names) from None
    return Found(np.asarray(order, dtype=np.intp), explained, per_it, n_rederived,
                 per_it.pop("correlation", None), per_it.pop("column_std", None),
                 per_it.pop("device_copy", None))


def _scatter_matrix(search_data, found, n_threads=None):
    """The scatter matrix ``Xc.T @ Xc`` of the rescaled data from the search's
    correlation matrix and the columns' std: ``n D C D`` (None without them).

    No pass over the data: every search route gives both (the std from the
    sums of its rounding noise).
    """
    if found.correlation is None:
        return None
    return _scaled_products(found.correlation, search_data.shape[0], found.column_std, n_threads)


def _keeps_copy(search_data):  # pragma: no cover - needs a GPU
    """Whether the CUDA search keeps the data on the device for the adjacency step's QR.

    Data the QR on the GPU takes (``adjacency._cuda_qr.suits``), on one GPU
    or several (the copy is on GPU 0, and only where the search's first
    device is GPU 0: ``search._cuda.search``): rank-deficient data's
    minimum-norm rows then need no second upload.
    """
    from .adjacency import _cuda_qr

    return _cuda_qr.suits(*search_data.shape)


def _start_qr_ahead(search_data, found, settings, method):  # pragma: no cover - needs a GPU
    """Start the data's QR on the GPU before the adjacency step's host work, where it needs it.

    After a CUDA search that found explained variables and kept its copy of
    the data (:func:`_keeps_copy`), both methods need the QR of that copy in
    causal order for the rows after the first explained variable:
    cuSOLVER then factorises while the host makes the scatter matrix, the
    covariance in causal order and its leading factor
    (``adjacency._cuda_qr.start_factor_of_copy``). Returns whether it
    started; the caller drops it where the step did not take it. Not for
    the adaptive lasso's weights where the QR of the basis alone gives them
    (``adjacency._cuda_low_rank.weights_of_copy``).
    """
    copy = _copy_of_dependent_data(found, settings)
    if copy is None:
        return False
    from .adjacency import _cuda_low_rank, _cuda_qr

    if method == "adaptive_lasso" and _cuda_low_rank.applies(copy, found.order, found.explained):
        return False

    n, p = search_data.shape
    if n <= p or not _cuda_qr.copy_holds(found.device_copy, (n, p)):
        return False
    return _cuda_qr.start_factor_of_copy(found.device_copy, found.order)


def _least_squares_on_device(found, settings, exponents):  # pragma: no cover - needs a GPU
    """``fit``'s least squares wholly on the GPU, on the data's scale, where they can run there.

    After a CUDA search that found explained variables and kept its copy of
    the data, with a basis small enough
    (``adjacency._cuda_low_rank.ols_of_copy``); else None, and the step
    runs on the host's route.
    """
    copy = _copy_of_dependent_data(found, settings)
    if copy is None:
        return None
    from .adjacency import _cuda_low_rank

    return _cuda_low_rank.ols_of_copy(copy, found.order, found.explained, exponents)


def _copy_of_dependent_data(found, settings):
    """The CUDA search's copy of the data (:func:`_keeps_copy`) where it found explained
    variables, whose rows the adjacency step then computes from it; else None."""
    if settings.backend == "cpu" or not found.explained:
        return None
    return found.device_copy


def _first_explained(found):
    """Position in the causal order of the first variable the search found explained, or None."""
    if not found.explained:
        return None
    position = np.empty(found.order.size, dtype=np.intp)
    position[found.order] = np.arange(found.order.size)
    return int(position[np.fromiter(found.explained, dtype=np.intp)].min())


def adjacency(search_data, found, settings, exponents, names, times, *, method="ols",
              prior_knowledge=None, n_threads=None, progress=False):
    """Edge weights on the found order (``method`` of :mod:`paralingam.adjacency`), on the data's scale.

    It runs where the search ran (the adaptive lasso's paths on the GPU with
    the CUDA backend), with the scatter matrix from the search's correlation
    matrix (:func:`_scatter_matrix`, timed here). Least squares of data of
    small rank after a CUDA search run wholly on the GPU where they can
    (:func:`_least_squares_on_device`).
    No ``coef_threshold``: the estimator applies it on the data's scale.
    ``progress``: a bar of the adaptive lasso's targets
    (:func:`paralingam.adjacency.estimate_adjacency`).
    """
    t0 = time.perf_counter()
    if method == "ols" and prior_knowledge is None:
        B = _least_squares_on_device(found, settings, exponents)
        if B is not None:
            times["adjacency"] = time.perf_counter() - t0
            return B
    ahead = _start_qr_ahead(search_data, found, settings, method)
    try:
        scatter = _scatter_matrix(search_data, found, n_threads)
        if (method != "ols" and scatter is None
                and isinstance(search_data, _preparation.ScaledData)):
            # the adaptive lasso makes the scatter matrix from whole columns;
            # given it, it reads a ScaledData by blocks of rows, as least squares does
            search_data = search_data.copy(_by_rows)
        with np.errstate(over="ignore"):
            # (paralingam._blas: beside the CPU search's spinning threads, or the
            # two BLAS libraries' workers)
            with _blas.for_adjacency(found.order.size, settings.backend == "cpu",
                                     len(found.explained)):
                B = _estimate_adjacency(search_data, found.order, method=method,
                                        prior_knowledge=prior_knowledge,
                                        backend=settings.backend, n_threads=n_threads,
                                        scatter=scatter, progress=progress,
                                        dependent=bool(found.explained),
                                        first_explained=_first_explained(found),
                                        device_copy=found.device_copy,
                                        explained=found.explained)
    finally:
        if ahead:  # (not taken: another route, or an error)
            from .adjacency import _cuda_qr

            _cuda_qr.drop_factor_ahead(found.device_copy)
    B = _scaled_back(B, exponents, names, n_threads)
    times["adjacency"] = time.perf_counter() - t0
    return B


def fit_result(found, B, names, settings, times):
    """The :class:`FitResult`: order, edges and the search's statistics; warns of explained variables."""
    per_it = found.per_iteration
    order = [int(v) for v in found.order]
    pairs = [r * (r - 1) // 2 for r in per_it["remaining"]]
    total_pairs = sum(pairs)
    stats = {
        "backend": settings.backend,
        "explained": found.explained,
        "remaining": per_it["remaining"],
        "compared": per_it["compared"],
        "pairs": pairs,
        "gamma": per_it["gamma"],
        "rounds": per_it["rounds"],
        "comparisons_saved": 1.0 - sum(per_it["compared"]) / total_pairs if total_pairs else 0.0,
        "n_rederived": found.n_rederived,
        "scores": per_it["scores"],
        "float64_redo": per_it.get("float64_redo", []),
        "float64_candidates": per_it.get("float64_candidates", []),
        "float64_pairs": per_it.get("float64_pairs", []),
        "float64_chunks": per_it.get("float64_chunks", []),
        "threads": per_it.get("threads", []),
        "all_pairs": per_it.get("all_pairs", []),
        "devices": None if settings.backend == "cpu" else list(settings.devices or (0,)),
        "time": times,
    }
    # A fully explained variable is placed right after the root that
    # completed it, which can put it before a variable that strict prior
    # knowledge orders first (the search itself never breaks a rule).
    unmet = settings.prior.unmet(order) if settings.prior is not None else []
    if unmet:
        stats["prior_knowledge_unmet"] = unmet
    if found.explained and settings.on_collinear == "warn":
        _warn_explained(found.explained, names, unmet)
    return FitResult(order, B, names, stats)


def _search_cpu(data, threshold, gamma0, c, collinear_tol, explained_tol, n_threads, times,
                stop_on_dependence, candidates=None, use_float=True, progress=False):
    # What the first fit of a process loads (the compiled search, the BLAS
    # controller) is timed apart: it is no part of any step.
    t0 = time.perf_counter()
    _cpu = _isa.load("search._cpu")

    _blas.controller()
    times["load"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    n, p = data.shape
    threads = n_threads or (1 if data.size < SMALL_SEARCH else default_threads())
    _memory.require("standardising the data and its covariance (n_features^2 float64)",
                    _memory.standardise_bytes(n, p), _memory.FEWER)
    with _blas.in_this_thread():
        Z, cov = _preparation.standardise_rows(data)
    # The data's correlation matrix, before the search updates cov in place:
    # the adjacency step's scatter matrix follows from it and the columns'
    # std (search()), as after a CUDA search, instead of another pass over
    # the data.
    correlation = cov.copy()
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
        with _blas.in_this_thread():
            cov[np.ix_(alive, alive)] = _preparation.covariance_of_rows(rows)

    t0 = time.perf_counter()
    noise, column_std = noise_and_std(data, threads)  # (the std: the scatter matrix's, above)
    with Progress(p, progress, desc="search", unit="variable") as bar:
        result = _cpu.search_order(
            Z, cov, threshold=threshold, gamma0=gamma0, c=c, collinear_tol=collinear_tol,
            explained_tol=explained_tol, drift_tol=DRIFT_TOL,
            n_threads=threads, adapt_threads=n_threads is None, rederive=rederive,
            stop_on_dependence=stop_on_dependence, candidates=candidates, use_float=use_float,
            noise=noise, progress=_monotonic(bar))
        bar.update_to(p)
    times["search"] = time.perf_counter() - t0
    result[2].update(correlation=correlation, column_std=column_std)
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
    pairs = _listed([f"{label(v)} (after {label(r)})"
                     for v, r in itertools.islice(explained.items(), _LISTED + 1)],
                    "stats['explained']", total=len(explained))
    broken = ""
    if unmet:
        rules = _listed([f"{label(a)} before {label(b)}" for a, b in unmet])
        broken = (f" This breaks {len(unmet)} rule(s) of the prior knowledge: {rules} "
                  "(stats['prior_knowledge_unmet']).")
    warnings.warn(
        f"{len(explained)} variable(s) are fully explained by earlier ones (exact linear "
        f"dependence) and were placed right after the root that completed them: {pairs}."
        f"{broken} See paralingam.search.policy.",
        DegenerateDataWarning,
        stacklevel=user_stacklevel(),
    )


# _listed names at most this many items
_LISTED = 20


def _listed(items, where=None, limit=_LISTED, total=None):
    """``items`` joined by commas, the first ``limit`` of them and a count of the
    rest (a warning over thousands of variables stays readable; ``where``, if
    given, is named as having them all). ``total``: how many there are, where
    ``items`` holds only the first of them."""
    total = len(items) if total is None else total
    if total <= limit:
        return ", ".join(items)
    return (", ".join(items[:limit]) + f", ... and {total - limit} more"
            + (f" ({where})" if where else ""))


class DegenerateDataWarning(UserWarning):
    """Some variables are exact linear combinations of others."""
