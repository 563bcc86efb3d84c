# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""Candidate scores of the multi-group order search on the CPU (OpenMP).

One iteration of lingam's ``MultiGroupDirectLiNGAM`` search scores each
candidate root ``i`` by ``sum_g w_g sum_j min(0, I_g(i, j))**2`` over the
groups ``g`` (``w_g``: the group's share of the samples) and the other
remaining variables ``j``. This module computes those scores from the
standardised rows of every group with the float64 statistic of the compiled
single-data-set search (``pl_stat_f64`` of ``_cpu_kernels.h``), the
degenerate-data policy of :func:`paralingam.search.reference.pairwise_statistics`
(a collinear pair compares as ``I = 0``) and lingam's prior-knowledge rule
(a partner in ``V_j`` stands in for its own residual). The numpy driver
(:func:`paralingam.lingam.multi_group.multi_group_causal_order`) picks the root and
regresses it out, as before.

Determinism: each (group, pair) task writes its own entries of the
statistics array, whichever thread runs it, and the scores are summed
afterwards in a fixed order (partners by index within a group, then groups in
order), so results never depend on the thread count or timing.

Fork and Ctrl-C as in ``paralingam.search._cpu`` (docs/design/runtime.rst): a
process forked from one that ran a region runs its regions on one thread
without OpenMP, and the calling thread runs Python's signal handlers every
``POLL_INTERVAL`` while the region runs; an exception from a handler stops
every thread at its next task and is raised.
"""

import threading

import numpy as np
cimport numpy as cnp
from cpython.exc cimport PyErr_Fetch, PyErr_Restore
from cpython.ref cimport PyObject
from cython.parallel cimport parallel
from libc.math cimport sqrt
from libc.float cimport DBL_EPSILON
cimport openmp

from .policy import EPS, MEASURE_SLACK, ROUNDING_MARGIN, STEP_ROUNDING

cnp.import_array()

cdef extern from "_cpu_kernels.h" nogil:
    void pl_row_moments(const double *x, Py_ssize_t n, double *out)
    double pl_stat_f64(const double *xa, const double *xb, double rho, double inv_s,
                       Py_ssize_t n, double hxa, double hxb, int both)
    double pl_entropy(double lc, double g, Py_ssize_t n)
    double pl_row_corr(const double *xa, const double *xb, Py_ssize_t n)
    double pl_residual_fraction(const double *xa, const double *xb, Py_ssize_t n)
    int pl_dependent(double f, double frac, double tol, double noise, double margin)
    int pl_load_int(const int *p)
    void pl_store_int(int *p, int v)
    int pl_next_tasks(int *counter, int chunk)
    double pl_wall_seconds()
    int pl_register_fork_handler()
    int pl_threads_usable()

include "_interrupts.pxi"  # Ctrl-C: Interrupt, poll_signals, raise_stopped

# Each extension has its own copy of the header's fork state: register ours.
pl_register_fork_handler()

# Regions with fewer sample-pair products than this run on one thread unless
# n_threads says otherwise: about a millisecond of work, where starting the
# team costs a noticeable share, and where a region stalls for a whole time
# slice when another process holds one of its cores (the reason of
# paralingam._api.SMALL_SEARCH for the single-data-set search).
SMALL_REGION = 1 << 17


cdef struct Job:
    const double *Z       # all groups' rows: group g, local variable k at Z + off[g] + k * n[g]
    const Py_ssize_t *off
    const Py_ssize_t *n
    int r                 # remaining variables
    const int *ta         # pair tasks: I(ta, tb), local indices
    const int *tb
    const int *both       # 0: tb is in V_j (x_b stands in for its residual)
    const int *mirror     # 1: also store I(tb, ta) = -I(ta, tb)
    int n_pairs
    double *hx            # (G, r) entropy of each row
    double *stat          # (G, r, r) I_g(a, b)
    double collinear_tol
    double band           # pairs with 1 - rho**2 above it cannot be collinear
    double noise          # rounding noise of a pair's residual (STEP_ROUNDING * eps)
    double margin         # ROUNDING_MARGIN
    Interrupt intr        # Ctrl-C (_interrupts.pxi)


cdef void entropy_task(Job *s, int task) noexcept nogil:
    """Entropy of row task % r of group task // r."""
    cdef int g = task // s.r
    cdef int k = task % s.r
    cdef double m[2]
    pl_row_moments(s.Z + s.off[g] + k * s.n[g], s.n[g], m)
    s.hx[g * s.r + k] = pl_entropy(m[0], m[1], s.n[g])


cdef void pair_task(Job *s, int task) noexcept nogil:
    """Statistic ``I(a, b)`` of pair task % n_pairs in group task // n_pairs.

    With ``mirror`` (two candidates, neither in ``V_j``: the statistic is
    antisymmetric) ``I(b, a) = -I(a, b)`` is stored too, as the compiled
    single-data-set search does.
    """
    cdef int g = task // s.n_pairs
    cdef int t = task % s.n_pairs
    cdef int a = s.ta[t]
    cdef int b = s.tb[t]
    cdef int r = s.r
    cdef Py_ssize_t n = s.n[g]
    cdef const double *xa = s.Z + s.off[g] + a * n
    cdef const double *xb = s.Z + s.off[g] + b * n
    cdef double *stat = s.stat + <Py_ssize_t>g * r * r
    cdef double rho = pl_row_corr(xa, xb, n)
    cdef double f = 1.0 - rho * rho
    cdef double v
    if f <= s.band:
        # paralingam.search.reference.collinear_pairs: the later column on the
        # earlier one, judged against its rounding noise
        if pl_dependent(pl_residual_fraction(xb, xa, n) if a < b else
                        pl_residual_fraction(xa, xb, n), 1.0, s.collinear_tol,
                        s.noise, s.margin):
            return  # I = 0 both ways (the array starts at zero)
        if f < DBL_EPSILON:
            f = DBL_EPSILON
    v = pl_stat_f64(xa, xb, rho, 1.0 / sqrt(f), n, s.hx[g * r + a], s.hx[g * r + b],
                    s.both[t])
    stat[a * r + b] = v
    if s.mirror[t]:
        stat[b * r + a] = -v


cdef void run_tasks(Job *s, int what, int count, int *next_task, int tid) noexcept nogil:
    cdef int task = pl_next_tasks(next_task, 1)
    while task < count:
        if tid == 0:
            poll_signals(&s.intr)
        if pl_load_int(&s.intr.stop):
            return
        if what == 0:
            entropy_task(s, task)
        else:
            pair_task(s, task)
        task = pl_next_tasks(next_task, 1)


cdef void run_region(Job *s, int what, int count, int nt) noexcept nogil:
    """``count`` tasks on ``nt`` threads (one thread: outside OpenMP, see pl_threads_usable)."""
    cdef int next_task = 0
    if nt <= 1:
        run_tasks(s, what, count, &next_task, 0)
    else:
        with parallel(num_threads=nt):
            run_tasks(s, what, count, &next_task, openmp.omp_get_thread_num())


def pair_statistics(list rows, int[::1] ta, int[::1] tb, int[::1] both, int[::1] mirror, *,
                    double collinear_tol=1e-10, double band=1e-4, int n_threads=0,
                    int max_threads=0):
    """Statistics ``I_g(a, b)`` of every group ``g`` for the given unordered pairs.

    Parameters
    ----------
    rows : list of ndarray, each (r, n_g), float64, C-contiguous
        Population-standardised rows of the remaining variables of each group.
    ta, tb : ndarray of int32, shape (n_pairs,)
        Local indices of the ordered pairs ``(a, b)``, ``a != b``: ``I(a, b)``
        is computed (``a`` is a candidate root, ``b`` its partner).
    both : ndarray of int32, shape (n_pairs,)
        0 where ``tb`` is in ``V_j`` (prior knowledge): ``x_b`` stands in
        for its own residual, ``I(a, b) = H(r_a^(b)) - H(x_a)``.
    mirror : ndarray of int32, shape (n_pairs,)
        1 where ``I(b, a) = -I(a, b)`` is stored too (both candidates, both
        flags 1).
    collinear_tol : float
        Tolerance of :func:`paralingam.search.reference.collinear_pairs`.
    band : float
        Pairs with ``1 - rho**2`` above this are not measured for
        collinearity (:func:`paralingam.search.reference.verify_band`).
    n_threads : int
        Threads; 0: ``max_threads``, but one thread for a region of fewer
        than ``SMALL_REGION`` sample-pair products.
    max_threads : int
        Threads given ``n_threads=0`` (0: OpenMP's default).

    Returns
    -------
    stat : ndarray, shape (G, r, r)
        ``stat[g, a, b] = I_g(a, b)`` for each listed pair (and its mirror);
        zero elsewhere and for collinear pairs.
    """
    cdef int G = len(rows)
    cdef int r, g, nt
    cdef Job s
    if G == 0:
        raise ValueError("rows must hold at least one group")
    r = rows[0].shape[0]
    if not (ta.shape[0] == tb.shape[0] == both.shape[0] == mirror.shape[0]):
        raise ValueError("ta, tb, both and mirror must have the same length")
    n_arr = np.empty(G, dtype=np.intp)
    off_arr = np.empty(G, dtype=np.intp)
    total = 0
    for g in range(G):
        Zg = rows[g]
        if Zg.dtype != np.float64 or Zg.ndim != 2 or not Zg.flags.c_contiguous \
                or Zg.shape[0] != r or Zg.shape[1] < 1:
            raise ValueError(f"rows[{g}] must be a C-contiguous float64 array of {r} rows")
        n_arr[g] = Zg.shape[1]
        off_arr[g] = total
        total += Zg.size
    Z_arr = np.concatenate([np.ravel(Zg) for Zg in rows]) if G > 1 else np.ravel(rows[0])
    if ta.shape[0] and (min(np.min(ta), np.min(tb)) < 0 or max(np.max(ta), np.max(tb)) >= r
                        or np.any(np.asarray(ta) == np.asarray(tb))):
        raise ValueError(f"pairs must be of two different local indices in [0, {r})")
    hx_arr = np.zeros((G, r))
    stat_arr = np.zeros((G, r, r))
    cdef double[::1] Z = Z_arr
    cdef Py_ssize_t[::1] off = off_arr
    cdef Py_ssize_t[::1] nn = n_arr
    cdef double[:, ::1] hx = hx_arr
    cdef double[:, :, ::1] stat = stat_arr
    if r == 0:
        return stat_arr
    s.Z = &Z[0]
    s.off = &off[0]
    s.n = &nn[0]
    s.r = r
    s.n_pairs = ta.shape[0]
    s.ta = &ta[0] if s.n_pairs else NULL
    s.tb = &tb[0] if s.n_pairs else NULL
    s.both = &both[0] if s.n_pairs else NULL
    s.mirror = &mirror[0] if s.n_pairs else NULL
    s.hx = &hx[0, 0]
    s.stat = &stat[0, 0, 0]
    s.collinear_tol = collinear_tol
    s.band = band
    s.noise = STEP_ROUNDING * EPS  # pair_noise(0, 0): the reference's noise=None
    s.margin = ROUNDING_MARGIN
    interrupt_start(&s.intr)
    cdef int nt_rows, nt_pairs
    nt = n_threads if n_threads > 0 else (max_threads if max_threads > 0
                                          else openmp.omp_get_max_threads())
    if not pl_threads_usable():
        nt = 1  # this thread survived a fork: no OpenMP team
    nt_rows = min(nt, G * r)
    nt_pairs = min(nt, G * s.n_pairs)
    if n_threads <= 0:
        if total < SMALL_REGION:
            nt_rows = 1
        if total // r * s.n_pairs < SMALL_REGION:
            nt_pairs = 1
    with nogil:
        run_region(&s, 0, G * r, nt_rows)
        if not pl_load_int(&s.intr.stop) and s.n_pairs:
            run_region(&s, 1, G * s.n_pairs, nt_pairs)
    if s.intr.stop:
        raise_stopped(&s.intr)
    return stat_arr
