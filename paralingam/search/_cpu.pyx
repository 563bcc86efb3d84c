# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
"""ParaLiNGAM causal-order search on the CPU (paper Algs. 3-4, Sec. 4.5).

One worker per remaining variable. Workers run in OpenMP threads; a worker
compares itself with its next uncompared partner (a pair lock taken with an
atomic compare-and-swap makes sure each unordered pair is compared exactly
once), sends the partner its result ``-I`` (messaging), and stops as soon as
its score passes the threshold ``gamma``. Between rounds the scheduler raises
``gamma`` by the factor ``c`` until a worker finishes all its comparisons at
or under it; that worker set contains the root.

The data are standardised once and the covariance computed once; after each
root the data and the covariance are updated with the algebra of Sec. 4.5
(no pass over the samples is needed for the covariance). The data update also
returns the mean, variance and correlation with the root of every updated
row; if any drifts from (0, 1, 0) by more than ``drift_tol`` the covariance
and the standardisation are re-derived from the data.

Prior knowledge (``candidates``, see ``paralingam.prior``): only candidate
groups get a worker and can give the root; every other remaining group is
still a partner of each candidate. A candidate-candidate pair is compared
under the pair lock with messaging as above; a candidate-non-candidate pair
is compared by the candidate's worker alone (no lock, no message: the
partner has no score), always in the orientation (candidate, partner) and
with the partner's own values standing in for its residual when it is in
``V_j``. Collinear groups only form among variables of the same status. A
single candidate group is the root with no comparison.

Determinism: which worker computes a pair depends on timing, but each pair is
always computed in the orientation (lower index, higher index), and the
scores that pick the root are summed in index order after the rounds, so the
root never depends on thread timing (see ``PL_STOP_MARGIN`` for the one place
where the timing-dependent partial sums are used).
"""

import threading

import numpy as np
cimport numpy as cnp
from cpython.exc cimport PyErr_CheckSignals, PyErr_Fetch, PyErr_Restore
from cpython.ref cimport PyObject
from cython.parallel cimport prange, parallel
from libc.math cimport sqrt, fabs, INFINITY
from libc.float cimport DBL_EPSILON
cimport openmp

from .policy import EPS, LinearDependenceError, MEASURE_SLACK, ROUNDING_MARGIN, STEP_ROUNDING

cnp.import_array()

cdef extern from "_cpu_kernels.h" nogil:
    void pl_row_moments(const double *x, Py_ssize_t n, double *out)
    void pl_pair_moments(const double *xa, const double *xb, double rho,
                         double inv_s, Py_ssize_t n, double *out)
    void pl_residual_moments(const double *xa, const double *xb, double rho,
                             double inv_s, Py_ssize_t n, double *out)
    void pl_moments_f32(const double *xa, const double *xb, double rho, double inv_s,
                        Py_ssize_t n, int both, double *out)
    double pl_stat_f64(const double *xa, const double *xb, double rho, double inv_s,
                       Py_ssize_t n, double hxa, double hxb, int both)
    double pl_stat_f32(const double *xa, const double *xb, double rho, double inv_s,
                       Py_ssize_t n, double hxa, double hxb, int both, double D, double *err)
    double pl_score_f64(const double *stat, const double *weight, int r)
    double pl_entropy(double lc, double g, Py_ssize_t n)
    double pl_entropy_bound(double lc, double g, Py_ssize_t n, double D)
    void pl_regress_row(double *x, const double *xr, double rho, double inv_s,
                        Py_ssize_t n, double *out)
    double pl_row_corr(const double *xa, const double *xb, Py_ssize_t n)
    double pl_residual_fraction(const double *xa, const double *xb, Py_ssize_t n)
    int pl_dependent(double f, double frac, double tol, double noise, double margin)
    int pl_claim(int *state)
    int pl_load_int(const int *p)
    void pl_store_int(int *p, int v)
    void pl_add_int(int *p, int v)
    double pl_load_double(const double *p)
    void pl_add_double(double *p, double v)
    void pl_count(long long *p)
    int pl_next_tasks(int *counter, int chunk)
    double pl_wall_seconds()
    double pl_thread_seconds()
    void pl_order_partners(const double *cov, Py_ssize_t p, const int *idx, int r, int w,
                           unsigned int *scratch, int *out)
    int pl_register_fork_handler()
    int pl_threads_usable()
    void pl_release_team()

# kernels/pl_constants.h (through _cpu_kernels.h): the constants shared with
# the CUDA kernels and Python, written there once
cdef extern from "pl_constants.h" nogil:
    # prior-knowledge status of a variable (as paralingam.search.reference); only
    # CANDIDATE groups have a worker
    enum:
        OTHER "PL_OTHER"
        IN_VJ "PL_IN_VJ"
        CANDIDATE "PL_CANDIDATE"
    const double PL_LN2
    const double PL_STOP_MARGIN
    const double PL_VERIFY_BAND
    const double PL_VERIFY_BAND_TOL
    const double PL_MOMENT_ERR_CPU

include "_interrupts.pxi"  # Ctrl-C: Interrupt, poll_signals, raise_stopped

# Fork (docs/design/runtime.rst): the thread that survives a fork runs serially.
pl_register_fork_handler()


# A worker stops once its partial score, accumulated with atomics in an order
# that depends on thread timing, passes the threshold; the root is then
# picked from the index-ordered sums of the finished workers when the best is
# <= gamma. The two sums of the same terms differ by rounding (relative error
# under r * 2**-53), so a worker whose ordered score is exactly gamma could
# show a partial sum a hair above gamma, stop, and lose the root to timing.
# Stopping only above gamma * (1 + PL_STOP_MARGIN) rules that out: a stopped
# worker's ordered score then exceeds gamma >= best, for r up to ~1e6.

# The covariance update (Sec. 4.5) divides the errors of a pair's entry by
# sqrt((1 - rho_a**2) (1 - rho_b**2)) with the root: after a root that is
# nearly collinear with a and b, exact copies a, b can show 1 - rho**2 ~ 1e-10
# instead of 1e-16 and escape their group. The policy's decisions are
# therefore taken on correlations computed from the data rows, as the
# reference does: every correlation with the root (O(n) per remaining row,
# like the data update itself), and every pair whose updated 1 - rho**2 is
# within PL_VERIFY_BAND (or PL_VERIFY_BAND_TOL collinear_tol) of
# collinearity, far wider than the covariance error that re-derivation
# allows (< 1e-6). Within the band a
# pair's residual fraction is measured from the rows (pl_residual_fraction)
# and judged against its rounding noise (paralingam.search.policy.is_dependent):
# 1 - rho**2 has an absolute rounding error of about eps, too coarse for the
# genuine residuals an outlier leaves (1e-18 of the variance at 1e10).
# The same band as paralingam.search.reference.verify_band.

# dtype float32: a pair's residuals are formed in double and their exp and log
# taken in float (pl_moments_f32, faster than the double loop:
# docs/design/cpu_search.rst, "Float32 comparisons with certified roots").
# Each mean moment (mean log cosh u, mean u exp(-u^2/2)) is then off by at
# most PL_MOMENT_ERR_CPU (kernels/pl_constants.h says why). Every
# statistic carries the bound it implies, every score the sum of its terms'
# bounds, and an iteration whose float scores cannot separate the root from
# a rival within them is re-decided in double for the rivals only, so the
# order is the double search's (as the CUDA backend's certified roots).

# Threads held up by other work. OpenMP's regions end at a barrier, so when
# another process (or another thread pool of this one) takes a core from one
# of the search's threads, the region waits until the thread gets it back:
# with a core busy, most iterations run as on idle cores and a few stall for
# a time slice of the other process, enough to make two threads slower than
# one (docs/design/cpu_search.rst, "Busy cores"). With ``adapt_threads`` the
# search clocks its
# parallel regions (run_region): their wall time W against the CPU time C its
# threads spent on tasks, which is what one thread would have needed. The
# iterations of all searches of the process (less the first BUSY_SKIP of
# each, which start the threads in a new process) are judged in
# windows of BUSY_WINDOW on one thread count. A window with W > BUSY_RATIO C
# + BUSY_MARGIN per iteration halves the threads for a quiet period
# (BUSY_QUIET_FACTOR times the time lost per iteration, at least
# BUSY_QUIET_MIN, doubled while the trouble lasts, at most BUSY_QUIET_MAX).
# After it the threads double again on trial, one step per clean window,
# back to all threads, where each clean window halves the quiet period
# until it falls under BUSY_QUIET_MIN and the episode ends. During an
# episode, on trial or on all threads, a single iteration that loses more
# than BUSY_STALL fails at once (a stall costs a time slice of the other
# process, longer than an idle machine's hiccups). Iterations on one thread
# are not judged. On idle cores W / C stays under 1 per iteration after the
# first two. The constants trade the cost on idle cores (trials and false
# alarms) against the cost on busy ones (iterations on too many threads):
# docs/design/cpu_search.rst, "Busy cores", has the measurements that set
# them. The order never depends on the thread count.
cdef double BUSY_RATIO = 1.5
cdef double BUSY_MARGIN = 1e-3
cdef int BUSY_WINDOW = 4
cdef int BUSY_SKIP = 2
cdef double BUSY_STALL = 5e-3
cdef double BUSY_QUIET_FACTOR = 10.0
cdef double BUSY_QUIET_MIN = 0.02
cdef double BUSY_QUIET_MAX = 1.0
cdef int ALL_THREADS = 1 << 30


class _BusyCores:
    """The process's record of threads held up by other work (see BUSY_RATIO)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.cap = ALL_THREADS   # the most threads a search may use now
        self.until = 0.0         # end of the quiet period (pl_wall_seconds)
        self.quiet = 0.0         # its length; 0 when no trouble is recorded
        self.trial = False       # the current cap is on trial after a quiet period
        self.window = []         # (wall, cpu) of iterations on window_threads threads
        self.window_threads = 0

    def threads(self, nthreads, now):
        """Threads for the next iteration of a search that could use ``nthreads``."""
        if self.cap < nthreads and now >= self.until and not self.trial:
            self.cap = min(nthreads, 2 * self.cap)  # quiet period over: one step up
            self.trial = True
        return max(1, min(self.cap, nthreads))

    def record(self, nt, nthreads, wall, cpu, margin, now):
        """Judge an iteration that ran on ``nt`` > 1 threads."""
        if nt != self.window_threads:
            self.window = []
            self.window_threads = nt
        self.window.append((wall, cpu))
        # During an episode, on trial or on all threads, one stalled
        # iteration is enough: waiting for a full window would cost three
        # more stalls.
        lost_now = wall - BUSY_RATIO * cpu
        if self.quiet > 0.0 and (self.trial or nt >= nthreads) and lost_now > BUSY_STALL:
            self._slow(nt, lost_now, now)
            return
        if len(self.window) < BUSY_WINDOW:
            return
        lost = sum([w for w, _ in self.window]) - BUSY_RATIO * sum([c for _, c in self.window])
        self.window = []
        if lost > margin * BUSY_WINDOW:  # the threads waited for cores
            self._slow(nt, lost / BUSY_WINDOW, now)
        elif nt >= nthreads:  # clean on all threads: the episode fades
            self.cap = ALL_THREADS
            self.trial = False
            self.quiet = self.quiet / 2.0 if self.quiet / 2.0 >= BUSY_QUIET_MIN else 0.0
        elif self.trial:  # clean on trial: the next step up
            self.trial = False
            self.until = now

    def _slow(self, nt, lost_per_iteration, now):
        """Halve the threads for a quiet period after a stalled window or iteration."""
        self.cap = max(1, nt // 2)
        self.quiet = min(max(2.0 * self.quiet, BUSY_QUIET_FACTOR * lost_per_iteration,
                             BUSY_QUIET_MIN), BUSY_QUIET_MAX)
        self.until = now + self.quiet
        self.trial = False
        self.window = []


busy_cores = _BusyCores()


def reset_busy_state():
    """Forget that threads were held up (for tests): the next search uses all threads."""
    busy_cores.reset()


cdef inline double square_bound(double v, double e) noexcept nogil:
    """Bound on |min(0, I)^2 - min(0, v)^2| when |I - v| <= e."""
    if v >= e:
        return 0.0
    return 2.0 * (-v if v < 0.0 else 0.0) * e + e * e


cdef struct Search:
    # problem
    double *X          # (p, n) standardised rows, original variable index
    double *cov        # (p, p) covariance (= correlation) of the rows
    Py_ssize_t n
    Py_ssize_t p
    double collinear_tol
    # exact dependence (paralingam.search.policy): rounding noise of each row in its
    # standard deviations (original index), the band within which pairs are
    # measured from the rows, ROUNDING_MARGIN and STEP_ROUNDING * eps
    double *noise
    double band
    double measure_limit
    double margin
    double step_noise
    # per-iteration worker state, local index 0..r-1 (stride p)
    int *idx           # group -> original index of its first member, ascending
    double *weight     # size of the collinear group each worker represents
    int *kind          # prior-knowledge status of each: CANDIDATE, IN_VJ or OTHER
    int r              # number of groups (the CANDIDATE ones have workers)
    int *state         # (r, r) pair lock: 0 free, 1 claimed, 2 done (upper triangle)
    double *stat       # (r, r) I(a, b); stat[b, a] = -stat[a, b]
    double *score      # partial scores, updated by atomics
    int *ndone         # comparisons known to each worker
    int *cursor        # next partner offset of each worker
    int *partner       # (r, r - 1) partners of each worker in visiting order (stride p)
    bint ordered       # partner holds the orders (else: cyclic from w + 1)
    double *hx         # entropy of each remaining variable
    long long compared # pairs computed in this iteration (atomic)
    # tasks of the parallel regions (run_region)
    int *active        # workers of a round
    double gamma_stop  # a round's workers stop above this score
    unsigned int *order_scratch  # p entries per thread for pl_order_partners
    double *moments    # (p, 4) scratch, one row per task
    int *alive         # remaining variables (original index), ascending
    # collinear groups (form_groups), per alive position
    int *status        # prior-knowledge status: CANDIDATE (without prior knowledge), IN_VJ, OTHER
    int *parent        # union-find parent; then a group's worker-local index
    int *group         # the group: its first member's position
    int first_worker   # the first candidate group's local index
    int root           # the root just found (original index)
    double *frac       # variance of each variable left unexplained so far
    int *gone          # 1 once ordered, 2 when just explained
    double *drift      # per alive position: drift of the updated row from (0, 1, 0)
    double explained_tol
    # dtype float32 (see PL_MOMENT_ERR_CPU)
    bint use_float     # the comparisons' special functions in float
    double moment_err  # PL_MOMENT_ERR_CPU
    double *stat_err   # (r, r) bound on |I_float - I_double| (stride p)
    double *err        # bound on each partial score's error (atomics)
    int *cand          # rivals of the root to re-decide in double, ascending
    int n_cand
    double *redo_stat  # (n_cand, r) their statistics in double (stride p)
    # clocks of the iteration's regions (see BUSY_MARGIN)
    double wall        # wall time of the regions
    double cpu         # CPU time the threads spent on their tasks
    Interrupt intr     # Ctrl-C (_interrupts.pxi)


cdef inline double pair_fraction(Search *s, int ia, int ib) noexcept nogil:
    """Measured residual fraction of rows ia, ib: the later index on the earlier one."""
    if ia < ib:
        return pl_residual_fraction(s.X + ib * s.n, s.X + ia * s.n, s.n)
    return pl_residual_fraction(s.X + ia * s.n, s.X + ib * s.n, s.n)


cdef inline bint pair_collinear(Search *s, int ia, int ib, double f) noexcept nogil:
    """Rows ia, ib with measured residual fraction f are collinear (paralingam.search.policy)."""
    return pl_dependent(f, 1.0, s.collinear_tol,
                        s.noise[ia] + s.noise[ib] + s.step_noise, s.margin) != 0


cdef inline double pair_stat(Search *s, int a, int b, int both, bint use_float,
                             double *err) noexcept nogil:
    """I(a, b) of local variables a and b, and its error bound in ``err``.

    I(a, b) = H(x_b) + H(r_a^(b)) - H(x_a) - H(r_b^(a)). Without ``both``
    (b is a non-candidate in V_j, prior knowledge) x_b stands in for its own
    residual, as in lingam: I(a, b) = H(x_b) + H(r_a^(b)) - H(x_a) - H(x_b).
    """
    cdef int ia = s.idx[a]
    cdef int ib = s.idx[b]
    cdef double rho = s.cov[ia * s.p + ib]
    cdef double f = 1.0 - rho * rho
    cdef double inv_s
    err[0] = 0.0
    # decided on the rows, as the groups were: a pair of one status has its
    # correlation from the rows (the group scan), so only pairs that can be
    # dependent are measured; others may carry the update's error: the band
    if f <= (s.measure_limit if s.kind[a] == s.kind[b] else s.band):
        if pair_collinear(s, ia, ib, pair_fraction(s, ia, ib)):
            return 0.0
        # not collinear: 1 - rho**2 at least 2**-52, as the CUDA backend's
        # stored correlations (|rho| <= 1 - 2**-53) give
        if f < DBL_EPSILON:
            f = DBL_EPSILON
    inv_s = 1.0 / sqrt(f)
    if not use_float:  # one compiled copy for the search and the re-decision
        return pl_stat_f64(s.X + ia * s.n, s.X + ib * s.n, rho, inv_s, s.n, s.hx[a], s.hx[b],
                           both)
    return pl_stat_f32(s.X + ia * s.n, s.X + ib * s.n, rho, inv_s, s.n, s.hx[a], s.hx[b],
                       both, s.moment_err, err)


cdef inline void add_term(Search *s, int w, int partner, double v, double e) noexcept nogil:
    """Add partner's term min(0, v)^2 (weighted) to w's score, and its bound to w's error."""
    if v < 0.0:
        pl_add_double(&s.score[w], s.weight[partner] * v * v)
    if e > 0.0 and v < e:
        pl_add_double(&s.err[w], s.weight[partner] * square_bound(v, e))


cdef inline void compare_partner(Search *s, int w, int t) noexcept nogil:
    """Compare candidate w with non-candidate t: I(w, t), for w's score only.

    Only w's worker computes this pair, so it needs no lock and sends no
    message.
    """
    cdef double e
    cdef double stat = pair_stat(s, w, t, s.kind[t] != IN_VJ, s.use_float, &e)
    s.stat[w * s.p + t] = stat
    if s.use_float:
        s.stat_err[w * s.p + t] = e
    add_term(s, w, t, stat, e)
    pl_add_int(&s.ndone[w], 1)
    pl_count(&s.compared)


cdef inline void compare_pair(Search *s, int a, int b) noexcept nogil:
    """Compare local pair a < b, store I(a, b) and message both workers."""
    cdef double e
    cdef double stat = pair_stat(s, a, b, 1, s.use_float, &e)
    s.stat[a * s.p + b] = stat
    s.stat[b * s.p + a] = -stat
    if s.use_float:
        s.stat_err[a * s.p + b] = e
        s.stat_err[b * s.p + a] = e
    pl_store_int(&s.state[a * s.p + b], 2)
    add_term(s, a, b, stat, e)
    add_term(s, b, a, -stat, e)
    pl_add_int(&s.ndone[a], 1)
    pl_add_int(&s.ndone[b], 1)
    pl_count(&s.compared)


cdef void redo_stat(Search *s, int task) noexcept nogil:
    """Statistic ``task`` of a re-decision in double: rival task // r against partner task % r.

    The same function and orientation as the double search, so each value is
    the one that search would have computed, bit for bit.
    """
    cdef int ci = task // s.r
    cdef int j = task % s.r
    cdef int w = s.cand[ci]
    cdef double e, v = 0.0
    if j == w:
        v = 0.0
    elif s.kind[j] != CANDIDATE:
        v = pair_stat(s, w, j, s.kind[j] != IN_VJ, False, &e)
    elif w < j:
        v = pair_stat(s, w, j, 1, False, &e)
    else:
        v = -pair_stat(s, j, w, 1, False, &e)
    s.redo_stat[ci * s.p + j] = v


cdef void run_worker(Search *s, int w, double gamma_stop, int tid) noexcept nogil:
    """Compare worker w with its partners until it passes gamma_stop or runs out.

    With a threshold, partners are visited in w's partner order (decreasing
    |correlation|, see pl_order_partners) instead of the paper's cyclic
    C = [2..r, 1]: a worker that is not the root then passes gamma after
    fewer comparisons. Without one, every pair is compared in any order.
    A partner whose pair is claimed or done is skipped for good: its result
    arrives as a message. A worker that finds no free pair returns; the
    scheduler runs it again in the next round if it is still unfinished.
    Thread ``tid`` 0 checks for signals every few pairs (a worker can run
    for long at large n), and every thread leaves once one stopped the search.
    """
    cdef int r = s.r
    cdef int t, a, b
    cdef int pairs = 0
    while True:
        if pl_load_int(&s.intr.stop):
            return
        if tid == 0:
            pairs = pairs + 1
            if pairs & 7 == 0:
                poll_signals(&s.intr)
        if pl_load_double(&s.score[w]) > gamma_stop:
            return
        if pl_load_int(&s.ndone[w]) >= r - 1:
            return
        while s.cursor[w] < r - 1:
            if s.ordered:
                t = s.partner[w * s.p + s.cursor[w]]
            else:
                t = (w + 1 + s.cursor[w]) % r
            s.cursor[w] += 1
            if s.kind[t] != CANDIDATE:  # w's own pair: no lock needed
                compare_partner(s, w, t)
                break
            if t < w:
                a = t
                b = w
            else:
                a = w
                b = t
            if pl_load_int(&s.state[a * s.p + b]) == 0 and pl_claim(&s.state[a * s.p + b]):
                compare_pair(s, a, b)
                break
        else:
            return


cdef void prepare_worker(Search *s, int k) noexcept nogil:
    """Entropy of worker k's variable; reset its state and order its partners."""
    cdef double *m = s.moments + 4 * k
    cdef int j
    pl_row_moments(s.X + s.idx[k] * s.n, s.n, m)
    s.hx[k] = pl_entropy(m[0], m[1], s.n)
    s.score[k] = 0.0
    s.err[k] = 0.0
    s.ndone[k] = 0
    s.cursor[k] = 0
    for j in range(s.r):
        s.state[k * s.p + j] = 0
        s.stat[k * s.p + j] = 0.0
    if s.use_float:
        for j in range(s.r):
            s.stat_err[k * s.p + j] = 0.0
    if s.ordered and s.kind[k] == CANDIDATE:
        pl_order_partners(s.cov, s.p, s.idx, s.r, k,
                          s.order_scratch + openmp.omp_get_thread_num() * s.p,
                          s.partner + k * s.p)


cdef void update_row(Search *s, int k) noexcept nogil:
    """UpdateData (Alg. 5) of the variable at alive position k: regress the root out.

    Marks the variable explained (``gone`` 2) when the root leaves it no more
    than ``explained_tol`` of its variance and the residual is at the level
    of its rounding noise (paralingam.search.policy), else stores the drift of the
    updated row's mean, variance and correlation with the root.
    """
    cdef int i = s.alive[k]
    cdef double *m = s.moments + 4 * k
    cdef double rho, f, mean, var, corr, drift, noise
    s.drift[k] = 0.0
    if i == s.root:
        return
    rho = pl_row_corr(s.X + i * s.n, s.X + s.root * s.n, s.n)  # see PL_VERIFY_BAND
    s.cov[i * s.p + s.root] = rho
    s.cov[s.root * s.p + i] = rho
    f = 1.0 - rho * rho
    if f <= s.band:  # 1 - rho**2 is too coarse here: measure it
        f = pl_residual_fraction(s.X + i * s.n, s.X + s.root * s.n, s.n)
    noise = s.noise[i] + s.noise[s.root] + s.step_noise
    if pl_dependent(f, s.frac[i], s.explained_tol, noise, s.margin):
        s.gone[i] = 2
        return
    s.frac[i] = s.frac[i] * f
    s.noise[i] = noise / sqrt(f)
    pl_regress_row(s.X + i * s.n, s.X + s.root * s.n, rho, 1.0 / sqrt(f), s.n, m)
    mean = m[0] / s.n
    var = m[1] / s.n - mean * mean
    corr = m[2] / s.n
    drift = fabs(mean)
    if fabs(var - 1.0) > drift:
        drift = fabs(var - 1.0)
    if fabs(corr) > drift:
        drift = fabs(corr)
    # The covariance update divides this row's entries by sqrt(f): their
    # rounding (about eps) then grows to eps / f, which counts as drift. Rows
    # that an outlier of the root left with a tiny f thus get their
    # covariance from the data, not from the update (see PL_VERIFY_BAND).
    if DBL_EPSILON / f > drift:
        drift = DBL_EPSILON / f
    s.drift[k] = drift


cdef void update_cov_row(Search *s, int k) noexcept nogil:
    """UpdateCovMat (Alg. 6): row k of the remaining block after the root."""
    cdef double *cov = s.cov
    cdef const int *alive = s.alive
    cdef Py_ssize_t p = s.p
    cdef int ia = alive[k]
    cdef int ib, j
    cdef int r = s.r
    # the root's correlations from its row, contiguous (cov is symmetric)
    cdef const double *with_root = cov + s.root * p
    cdef double ra = with_root[ia]
    cdef double sa = 1.0 - ra * ra
    cdef double v
    for j in range(k + 1, r):
        ib = alive[j]
        v = (cov[ia * p + ib] - ra * with_root[ib]) / sqrt(
            sa * (1.0 - with_root[ib] * with_root[ib]))
        cov[ia * p + ib] = v
        cov[ib * p + ia] = v


cdef enum:
    PREPARE = 0
    ROUND = 1
    UPDATE_DATA = 2
    UPDATE_COV = 3
    REDO = 4


cdef void run_tasks(Search *s, int what, int count, int chunk, int *next_task,
                    int tid) noexcept nogil:
    """Take tasks of a region from ``next_task`` and run them until none is left.

    Thread ``tid`` 0 checks for signals between chunks; every thread leaves
    once one stopped the search (see POLL_INTERVAL).
    """
    cdef int first, end, task
    first = pl_next_tasks(next_task, chunk)
    while first < count:
        if tid == 0:
            poll_signals(&s.intr)
        if pl_load_int(&s.intr.stop):
            return
        end = min(first + chunk, count)
        for task in range(first, end):
            if what == PREPARE:
                prepare_worker(s, task)
            elif what == ROUND:
                run_worker(s, s.active[task], s.gamma_stop, tid)
            elif what == UPDATE_DATA:
                update_row(s, task)
            elif what == REDO:
                redo_stat(s, task)
            else:
                update_cov_row(s, task)
        first = pl_next_tasks(next_task, chunk)


cdef void run_region(Search *s, int what, int count, int nt) noexcept nogil:
    """Run ``count`` tasks of one kind on ``nt`` threads; add to ``s.wall`` and ``s.cpu``.

    A dynamic schedule by hand (an atomic task counter), so that each thread
    reads its CPU clock after its last task, before the region's barrier:
    ``s.cpu`` is then the work alone, what one thread would have needed.
    Workers (ROUND) and pairs (REDO) are taken one at a time, as their
    lengths differ widely;
    rows in chunks of about count / (8 nt), since the counter itself costs
    as much as a short row of the covariance update. Tasks write disjoint
    rows, so the thread that runs a task never changes a result. One thread
    runs the tasks itself, outside OpenMP (see pl_threads_usable). After an
    interrupt (``s.intr.stop``) the tasks are left unfinished.
    """
    cdef int next_task = 0
    cdef int chunk = 1 if what == ROUND or what == REDO else max(1, count // (8 * nt))
    cdef double t_cpu = 0.0
    cdef double t_wall = pl_wall_seconds()
    if nt <= 1:
        t_cpu = pl_thread_seconds()
        run_tasks(s, what, count, chunk, &next_task, 0)
        pl_add_double(&s.cpu, pl_thread_seconds() - t_cpu)
    else:
        with parallel(num_threads=nt):
            t_cpu = pl_thread_seconds()
            run_tasks(s, what, count, chunk, &next_task, openmp.omp_get_thread_num())
            pl_add_double(&s.cpu, pl_thread_seconds() - t_cpu)
    s.wall = s.wall + (pl_wall_seconds() - t_wall)


cdef double ordered_score(Search *s, int w) noexcept nogil:
    """Score of a finished worker, summed in index order (deterministic)."""
    return pl_score_f64(s.stat + w * s.p, s.weight, s.r)


cdef double ordered_err(Search *s, int w) noexcept nogil:
    """Error bound of ordered_score (dtype float32), summed in index order."""
    cdef double total = 0.0
    cdef int j
    for j in range(s.r):
        total += s.weight[j] * square_bound(s.stat[w * s.p + j], s.stat_err[w * s.p + j])
    return total


cdef double certify(Search *s, int best_w, double best) noexcept nogil:
    """Rivals of the float root ``best_w`` (score ``best``) within the error bounds.

    A candidate is a rival when its score could be at or under the root's
    (ties go to the lower index, as in the double search). Finished rivals
    go to ``s.cand`` (with the root, ascending). An unfinished rival (one that
    stopped at the threshold) is not settled yet: the return value is then
    the threshold under which every such rival works on, else -1.
    """
    cdef double upper = best + ordered_err(s, best_w)
    cdef double target = -1.0, lower, e
    cdef bint finished, rival
    cdef int k
    s.n_cand = 0
    for k in range(s.r):
        if s.kind[k] != CANDIDATE:
            continue
        finished = s.ndone[k] >= s.r - 1
        if k == best_w:
            rival = True
        elif finished:
            e = ordered_err(s, k)
            lower = ordered_score(s, k) - e
            rival = lower <= upper if k < best_w else lower < upper
        else:
            e = pl_load_double(&s.err[k])
            lower = pl_load_double(&s.score[k]) - e
            rival = lower <= upper if k < best_w else lower < upper
            if rival and upper + e > target:
                target = upper + e
            continue
        if rival:
            s.cand[s.n_cand] = k
            s.n_cand = s.n_cand + 1
    if target >= 0.0:
        return target * (1.0 + 1e-6)
    return -1.0


cdef int redecide(Search *s, int nt) noexcept nogil:
    """The root among the rivals ``s.cand``, by their scores in double."""
    cdef double best = INFINITY, total
    cdef int best_w = -1, ci
    run_region(s, REDO, s.n_cand * s.r, nt)
    for ci in range(s.n_cand):
        total = pl_score_f64(s.redo_stat + ci * s.p, s.weight, s.r)  # ordered_score's code
        if total < best:
            best = total
            best_w = s.cand[ci]
    return best_w


cdef inline int find_group(int *parent, int k) noexcept nogil:
    while parent[k] != k:
        parent[k] = parent[parent[k]]
        k = parent[k]
    return k


cdef inline void *data_of(cnp.ndarray a) noexcept:
    return cnp.PyArray_DATA(a)


cdef dict allocate(Search *s, double[:, ::1] X, double[:, ::1] cov, int nthreads,
                   bint use_float, noise):
    """The search's arrays, with their addresses in ``s`` (the fields of Search).

    The returned dict owns the arrays; Python reads ``alive``, ``status``,
    ``group`` and ``gone`` (prior knowledge, dependence errors).
    """
    cdef Py_ssize_t p = X.shape[0]
    side = p if use_float else 1  # the float search's bounds and re-decision
    a = {
        "alive": np.arange(p, dtype=np.intc),
        "status": np.full(p, CANDIDATE, dtype=np.intc),
        "parent": np.zeros(p, dtype=np.intc),
        "group": np.zeros(p, dtype=np.intc),
        "idx": np.zeros(p, dtype=np.intc),
        "weight": np.zeros(p, dtype=np.float64),
        "kind": np.zeros(p, dtype=np.intc),
        "state": np.zeros((p, p), dtype=np.intc),
        "stat": np.zeros((p, p), dtype=np.float64),
        "score": np.zeros(p, dtype=np.float64),
        "ndone": np.zeros(p, dtype=np.intc),
        "cursor": np.zeros(p, dtype=np.intc),
        "partner": np.zeros((p, p), dtype=np.intc),
        "hx": np.zeros(p, dtype=np.float64),
        "frac": np.ones(p, dtype=np.float64),
        "noise": (np.zeros(p, dtype=np.float64) if noise is None else
                  np.ascontiguousarray(np.array(noise, dtype=np.float64, copy=True).reshape(p))),
        "active": np.zeros(p, dtype=np.intc),
        "drift": np.zeros(p, dtype=np.float64),
        "gone": np.zeros(p, dtype=np.intc),
        "moments": np.zeros((p, 4), dtype=np.float64),
        "err": np.zeros(p, dtype=np.float64),
        "cand": np.zeros(p, dtype=np.intc),
        "stat_err": np.zeros((side, side), dtype=np.float64),
        "redo_stat": np.zeros((side, side), dtype=np.float64),
        "order_scratch": np.empty(max(nthreads, 1) * max(p, 1), dtype=np.uint32),
    }
    s.X = &X[0, 0]
    s.cov = &cov[0, 0]
    s.n = X.shape[1]
    s.p = p
    s.alive = <int *> data_of(a["alive"])
    s.status = <int *> data_of(a["status"])
    s.parent = <int *> data_of(a["parent"])
    s.group = <int *> data_of(a["group"])
    s.idx = <int *> data_of(a["idx"])
    s.weight = <double *> data_of(a["weight"])
    s.kind = <int *> data_of(a["kind"])
    s.state = <int *> data_of(a["state"])
    s.stat = <double *> data_of(a["stat"])
    s.score = <double *> data_of(a["score"])
    s.ndone = <int *> data_of(a["ndone"])
    s.cursor = <int *> data_of(a["cursor"])
    s.partner = <int *> data_of(a["partner"])
    s.hx = <double *> data_of(a["hx"])
    s.frac = <double *> data_of(a["frac"])
    s.noise = <double *> data_of(a["noise"])
    s.active = <int *> data_of(a["active"])
    s.drift = <double *> data_of(a["drift"])
    s.gone = <int *> data_of(a["gone"])
    s.moments = <double *> data_of(a["moments"])
    s.err = <double *> data_of(a["err"])
    s.cand = <int *> data_of(a["cand"])
    s.stat_err = <double *> data_of(a["stat_err"])
    s.redo_stat = <double *> data_of(a["redo_stat"])
    s.order_scratch = <unsigned int *> data_of(a["order_scratch"])
    return a


cdef int form_groups(Search *s, int r) noexcept nogil:
    """Collinear groups of the ``r`` remaining variables, one worker-local variable each.

    Pairs within the band are decided on correlations recomputed from the
    rows (see PL_VERIFY_BAND); only variables of one prior-knowledge status
    are linked. Sets ``s.r`` (the groups), ``idx``, ``weight`` and ``kind``
    of each group (its first member; ascending) and ``s.first_worker``;
    returns the number of candidate groups (the workers).
    """
    cdef int *parent = s.parent
    cdef Py_ssize_t n = s.n
    cdef Py_ssize_t p = s.p
    cdef int k, j, ia, ib, ga, gb
    cdef int nw = 0
    cdef double rho
    for k in range(r):
        parent[k] = k
    for k in range(r):
        ia = s.alive[k]
        for j in range(k + 1, r):
            if s.status[j] != s.status[k]:  # groups share one prior-knowledge rule
                continue
            ib = s.alive[j]
            rho = s.cov[ia * p + ib]
            if 1.0 - rho * rho > s.band:
                continue
            # decide it on the data
            rho = pl_row_corr(s.X + ia * n, s.X + ib * n, n)
            s.cov[ia * p + ib] = rho
            s.cov[ib * p + ia] = rho
            if 1.0 - rho * rho > s.measure_limit:  # cannot be dependent
                continue
            ga = find_group(parent, k)
            gb = find_group(parent, j)
            if ga == gb:  # linked already: this pair cannot change the groups
                continue
            if pair_collinear(s, ia, ib, pair_fraction(s, ia, ib)):
                if ga < gb:
                    parent[gb] = ga
                elif gb < ga:
                    parent[ga] = gb
    for k in range(r):
        s.group[k] = find_group(parent, k)  # its first member
    s.r = 0
    s.first_worker = 0
    for k in range(r):
        if s.group[k] == k:
            parent[k] = s.r  # now: the local index of group k
            s.idx[s.r] = s.alive[k]
            s.weight[s.r] = 0.0
            s.kind[s.r] = s.status[k]
            if s.status[k] == CANDIDATE:
                if nw == 0:
                    s.first_worker = s.r
                nw = nw + 1
            s.r = s.r + 1
    for k in range(r):
        s.weight[parent[s.group[k]]] += 1.0
    return nw


cdef struct Choice:
    # the outcome of one iteration's scheduler (choose_root)
    int root_local     # the root's worker-local index
    double best        # its score, summed in index order
    double gamma       # the threshold of the last round
    int rounds         # threshold rounds run
    int n_redo         # rivals re-decided in double (0: none)


cdef void choose_root(Search *s, int nw, int nt, double gamma0, double c, bint threshold,
                      Choice *out) noexcept nogil:
    """The root among the ``s.r`` groups (``nw`` of them candidates), in ``out``.

    The paper's Alg. 4 with the GPU relaxation of Sec. 5.3: every worker's
    entropy, then threshold rounds, gamma raised by ``c`` until a finished
    worker at or under gamma beats every other; with float comparisons the
    root is certified (see certify). A single candidate group is the root
    with no comparison. After an interrupt (``s.intr.stop``) it returns
    early.
    """
    cdef double gamma, best, v, min_unfinished, settle
    cdef int k, n_active
    cdef int rounds = 0
    cdef int n_redo = 0
    cdef int root_local = s.first_worker
    # Entropy of every worker's variable; reset worker state.
    run_region(s, PREPARE, s.r, nt)
    if pl_load_int(&s.intr.stop):
        nw = 0  # interrupted: no rounds
    s.compared = 0
    gamma = gamma0 if threshold else INFINITY
    best = 0.0  # the score of a lone candidate group: no comparison
    while nw > 1:
        n_active = 0
        min_unfinished = INFINITY
        s.gamma_stop = gamma * (1.0 + PL_STOP_MARGIN)
        for k in range(s.r):
            if s.kind[k] != CANDIDATE:  # no worker (prior knowledge)
                continue
            if s.ndone[k] < s.r - 1:
                if s.score[k] <= s.gamma_stop:
                    s.active[n_active] = k
                    n_active = n_active + 1
                elif s.score[k] < min_unfinished:
                    min_unfinished = s.score[k]
        if n_active == 0:
            # Every worker is finished or above gamma. A finished worker at
            # or under gamma beats every other: stop.
            best = INFINITY
            root_local = -1
            for k in range(s.r):
                if s.ndone[k] >= s.r - 1 and s.kind[k] == CANDIDATE:
                    v = ordered_score(s, k)
                    if v < best:
                        best = v
                        root_local = k
            if root_local >= 0 and (best <= gamma or min_unfinished == INFINITY):
                if not s.use_float:
                    break
                settle = certify(s, root_local, best)
                if settle < 0.0:  # every rival finished: decide
                    if s.n_cand > 1:
                        n_redo = s.n_cand
                        root_local = redecide(s, nt)
                        best = ordered_score(s, root_local)
                    break
                # rivals that stopped at the threshold work on first
                while gamma < settle:
                    gamma = gamma * c
                continue
            while min_unfinished > gamma:
                gamma = gamma * c
            continue
        rounds = rounds + 1
        run_region(s, ROUND, n_active, nt)
        if pl_load_int(&s.intr.stop):
            break
    out.root_local = root_local
    out.best = best
    out.gamma = gamma
    out.rounds = rounds
    out.n_redo = n_redo


cdef int drop_ordered(Search *s, int r, list order, dict explained, double *drift):
    """After UpdateData: order the variables the root explained, compact ``alive``.

    Returns the number of variables left; ``drift`` gets the largest drift
    of their updated rows.
    """
    cdef int k, i
    cdef int j = 0
    cdef double largest = 0.0
    for k in range(r):
        i = s.alive[k]
        if s.gone[i] == 2:
            s.gone[i] = 1
            order.append(i)
            explained[i] = s.root
        elif s.gone[i] == 0:
            if s.drift[k] > largest:
                largest = s.drift[k]
            s.alive[j] = i
            j = j + 1
    drift[0] = largest
    return j


def search_order(double[:, ::1] X, double[:, ::1] cov, *, bint threshold=True,
                 double gamma0=1e-4, double c=2.0, double collinear_tol=1e-10,
                 double explained_tol=1e-10, double drift_tol=1e-8,
                 int n_threads=0, rederive=None, bint stop_on_dependence=False,
                 candidates=None, bint adapt_threads=False, double busy_margin=BUSY_MARGIN,
                 bint use_float=False, double moment_err=PL_MOMENT_ERR_CPU, noise=None,
                 progress=None):
    """Causal order of standardised rows ``X`` (p, n) with covariance ``cov``.

    Both arrays are modified in place. ``rederive(alive)`` is called with the
    original indices of the remaining variables when the covariance drifts; it
    must re-standardise those rows of ``X`` and recompute their block of
    ``cov`` from the data. With ``stop_on_dependence`` the search raises
    :class:`~paralingam.search.policy.LinearDependenceError` at the first collinear
    group or fully explained variable instead of applying the policy.

    ``candidates(alive)`` (prior knowledge, e.g.
    ``paralingam.prior.PriorKnowledge.candidates``; None for none) is called
    once per iteration with the original indices of the remaining variables,
    ascending, and returns two bool arrays aligned with them: which may be
    the root, and which are in ``V_j``.

    ``progress(done)`` (None for none) is called at the start of every
    iteration with the number of variables ordered so far.

    ``n_threads`` threads (0: OpenMP's default). With ``adapt_threads`` the
    search uses fewer of them while other work holds its threads up (see
    ``BUSY_RATIO``; ``busy_margin`` overrides ``BUSY_MARGIN``, for tests).

    With ``use_float`` the comparisons take their exp and log in float, and
    roots that the float scores cannot certify are re-decided in double (see
    ``paralingam._constants.MOMENT_ERR_CPU``; ``moment_err`` overrides it, for tests): the order
    is the same, and the scores are the float ones.

    ``noise`` (p,): the rounding noise of each row of the data as given, in
    its standard deviations (``paralingam.search.policy.initial_noise`` of the
    data); zeros if None. The degenerate-data decisions judge residuals
    against it (``paralingam.search.policy``).

    Returns
    -------
    order : list of int
    explained : dict
        ``{variable: root}`` for fully explained variables.
    per_iteration : dict of lists
        ``remaining``, ``compared``, ``gamma``, ``rounds``, ``scores``
        (the root's score, summed in index order), ``threads``,
        ``float64_redo`` (the root was re-decided in double) and
        ``float64_candidates`` (the rivals re-decided, 0 without) per
        iteration.
    n_rederived : int
        How many times the covariance was re-derived.
    """
    cdef Py_ssize_t p = X.shape[0]
    cdef Search s
    cdef Choice it
    cdef int k, r, root, nw, nthreads, nt
    cdef bint team = False  # a region of this search ran on several threads
    cdef double drift

    nthreads = n_threads if n_threads > 0 else openmp.omp_get_max_threads()
    if not pl_threads_usable():
        nthreads = 1  # this thread survived a fork: no OpenMP team (pl_threads_usable)
    nt = nthreads  # threads of the current iteration
    if pl_thread_seconds() < 0.0:
        adapt_threads = False  # no thread CPU clock on this platform
    arrays = allocate(&s, X, cov, nthreads, use_float, noise)
    alive_arr, status_arr, group_arr, gone_arr = (
        arrays["alive"], arrays["status"], arrays["group"], arrays["gone"])
    s.collinear_tol = collinear_tol
    s.band = max(PL_VERIFY_BAND, PL_VERIFY_BAND_TOL * collinear_tol)
    s.measure_limit = collinear_tol + MEASURE_SLACK
    s.margin = ROUNDING_MARGIN
    s.step_noise = STEP_ROUNDING * EPS
    s.ordered = threshold
    s.explained_tol = explained_tol
    s.use_float = use_float
    s.moment_err = moment_err
    interrupt_start(&s.intr)

    order = []
    explained = {}
    per_iteration = {"remaining": [], "compared": [], "gamma": [], "rounds": [], "scores": [],
                     "threads": [], "float64_redo": [], "float64_candidates": []}
    n_rederived = 0
    r = <int>p

    while r > 0:
        PyErr_CheckSignals()  # (compiled code: the interpreter does not check here)
        if progress is not None:
            progress(<int>p - r)  # variables ordered so far
        if r == 1:
            order.append(s.alive[0])
            break
        if candidates is not None:
            is_candidate, in_vj = candidates(alive_arr[:r])
            if not np.any(is_candidate):
                raise ValueError("prior knowledge left no candidate for the root")
            status_arr[:r] = np.where(is_candidate, CANDIDATE, np.where(in_vj, IN_VJ, OTHER))

        with nogil:
            nw = form_groups(&s, r)
        if stop_on_dependence and s.r < r:
            sizes = np.bincount(group_arr[:r], minlength=r)
            first = np.flatnonzero(sizes > 1)[0]  # the group of the first collinear pair
            raise LinearDependenceError(
                "collinear", alive_arr[:r][group_arr[:r] == first], order)

        if adapt_threads:
            nt = busy_cores.threads(nthreads, pl_wall_seconds())
        team = team or nt > 1
        s.wall = 0.0
        s.cpu = 0.0
        with nogil:
            choose_root(&s, nw, nt, gamma0, c, threshold, &it)
        if s.intr.stop:
            raise_stopped(&s.intr)

        root = s.idx[it.root_local]
        order.append(root)
        s.gone[root] = 1
        per_iteration["remaining"].append(r)
        per_iteration["compared"].append(s.compared)
        per_iteration["gamma"].append(it.gamma)
        per_iteration["rounds"].append(it.rounds)
        per_iteration["scores"].append(it.best)
        per_iteration["threads"].append(nt)
        per_iteration["float64_redo"].append(it.n_redo > 0)
        per_iteration["float64_candidates"].append(it.n_redo)

        # UpdateData (Alg. 5): regress the root out, detect explained rows.
        s.root = root
        with nogil:
            run_region(&s, UPDATE_DATA, r, nt)
        if s.intr.stop:
            raise_stopped(&s.intr)
        if stop_on_dependence and (gone_arr[alive_arr[:r]] == 2).any():
            raise LinearDependenceError(
                "explained", [i for i in alive_arr[:r] if gone_arr[i] == 2], order)
        r = drop_ordered(&s, r, order, explained, &drift)

        # UpdateCovMat (Alg. 6) on the remaining block.
        s.r = r
        with nogil:
            run_region(&s, UPDATE_COV, r, nt)
        if s.intr.stop:
            raise_stopped(&s.intr)
        if adapt_threads and nt > 1 and len(per_iteration["threads"]) > BUSY_SKIP:
            busy_cores.record(nt, nthreads, s.wall, s.cpu, busy_margin, pl_wall_seconds())
        for k in range(r):
            s.cov[s.alive[k] * p + s.alive[k]] = 1.0

        if drift > drift_tol and r > 1 and rederive is not None:
            rederive(alive_arr[:r].copy())
            n_rederived += 1

    if team:
        # (its threads would spin on the cores the next step needs). Only
        # after a region of this search on several threads: a thread whose
        # team came from elsewhere, say from before a fork that preceded the
        # import of this module, would wait for that team's threads here.
        with nogil:
            pl_release_team()
    return [int(v) for v in order], explained, per_iteration, n_rederived
