// ParaLiNGAM on the GPU (paper Sec. 5), compiled at run time by PyCUDA.
//
// Every kernel takes the search state (kernels/search_state.h) and keeps it on
// the device; the Cython host scheduler (paralingam/search/_scheduler.pyx)
// only launches kernels and, after each threshold round, waits for the status
// that `select_root` publishes in mapped host memory. One iteration:
//
//   prep          append the last root (and the variables it explained) to the
//                 order, compact the remaining set, form collinear groups,
//                 reset the workers            (1 block)
//   setup_*       H(x) of every worker's variable (float: computed by the
//                 kernel that last wrote the row) and its partner order
//   worker_*      one threshold round (persistent grid, see below), or
//   all_pairs_*   every pair in one round (iterations with few or short pairs)
//   select_root   decide the root, or raise gamma and pick the next round's
//                 workers; certify float roots; publish the status (1 block;
//                 PL_PEERS: a grid, whose blocks first finalize the workers
//                 a threshold round finished, and whose last block selects)
//   [entropy64, pairs64, select64: re-decide an uncertain float root]
//   update_data   regress the root out of the remaining rows (Alg. 5) and
//                 measure their drift from (mean 0, var 1, corr 0), with
//                 the float entropies of the new rows; the last block
//                 re-standardises the rows if they drifted
//   update_cov    covariance update (Alg. 6), or recomputation after drift,
//                 and the collinear scan; where few variables remain,
//                 update_data_fused's last block does it instead (one kernel)
//
// Compile-time constants: WARPS, warps per block of the worker kernel, and
// MIN_BLOCKS (see below).
//
// The worker kernel is the paper's Alg. 7 with a persistent grid: every
// group of group_warps warps is a comparison engine that takes the next
// active worker in round robin, checks its score against the threshold,
// claims its next uncompared partner (by decreasing |correlation|, see
// order_partners, where the paper walks them cyclically; pair lock by
// atomicCAS or atomicMax, PL_LOCK_MAX: each unordered pair is compared once
// in an iteration), compares
// the pair and messages both sides (score atomics; the partner receives -I).
// Several groups can serve one worker at once, so a worker with many
// comparisons left (the root, typically) is spread over the whole GPU
// instead of running one comparison at a time.
#include "compare.cuh"

extern "C" {
#include "search_state.h"
}

#ifndef WARPS
#define WARPS 8
#endif
// Compile-time constant MIN_BLOCKS: worker blocks per SM the register
// allocation must allow (0: let the compiler choose).
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 0
#endif
#define FULL 0xffffffffu
// Scores are summed by atomics in an order that depends on timing, and again
// in index order once a worker is finished. Threshold tests on the atomic
// sums carry the relative margin PL_STOP_MARGIN (pl_constants.h) so that
// rounding can never stop the true root (whose ordered score is <= gamma).
// Float pairs with 1 - rho^2 under this value form their residuals in double.
#define WIDE_F 0.01

// ---------------------------------------------------------------- helpers

template <typename T>
__device__ __forceinline__ T ld_volatile(const T *p) { return *(const volatile T *)p; }

// One search on several GPUs (compiled with -DPL_PEERS=1; docs/design/multi_gpu.rst):
// the state the threshold rounds share lives on device 0, and the worker
// kernels of every device claim pairs and message scores in it through peer
// memory, as the blocks of one larger GPU would. What they share is then
// ordered at system scope: fences, atomics and loads of state another
// device writes (volatile loads are relaxed at system scope; __ldcg could
// serve a stale line). Without PL_PEERS every macro below is the plain
// single-GPU code, token for token.
#ifdef PL_PEERS
#define PL_FENCE() __threadfence_system()
#define PL_SYS(atomic) atomic##_system
#define PL_SHARED(lvalue) ld_volatile(&(lvalue))
#define PL_LDCG(ptr) ld_volatile(ptr)
// The worker kernels' place among the worker blocks of every device.
#define PL_GRID_PARAMS , int pl_block0, int pl_blocks
#define PL_GRID_ARGS , pl_block0, pl_blocks
#define PL_BLOCK (blockIdx.x + (unsigned)pl_block0)
#define PL_BLOCKS ((unsigned)pl_blocks)
#define PL_DEFER_FINALIZE true
// Partners an engine claims per trip to the shared state (worker_body).
#ifndef PL_CLAIM_BATCH
#define PL_CLAIM_BATCH 4
#endif
static_assert(PL_CLAIM_BATCH >= 1 && PL_CLAIM_BATCH <= 32, "a lane claims each partner of a batch");
// Batches only where the last iteration compared at least this many pairs
// per engine of every device (worker_body).
#ifndef PL_CLAIM_BATCH_MIN_PAIRS
#define PL_CLAIM_BATCH_MIN_PAIRS 64
#endif
// Whether device 0's engines claim in batches too, under the same rule
// (1), or one partner at a time (0: only the other devices batch).
#ifndef PL_CLAIM_BATCH_ALL
#define PL_CLAIM_BATCH_ALL 1
#endif
#else
#define PL_FENCE() __threadfence()
#define PL_SYS(atomic) atomic
#define PL_SHARED(lvalue) lvalue
#define PL_LDCG(ptr) __ldcg(ptr)
#define PL_GRID_PARAMS
#define PL_GRID_ARGS
#define PL_BLOCK blockIdx.x
#define PL_BLOCKS gridDim.x
#define PL_DEFER_FINALIZE false
#endif

// How an engine claims a pair (worker_body). PL_KNOWN_WORKER: an engine that
// stays on its worker keeps the worker's index (active[] does not change
// within a round) and skips the live bit, which the score test and the
// cursor check again anyway (a worker out of work moves the engine on as
// before). PL_LOCK_MAX: a pair's lock is taken with one atomicMax, where
// the one-device default loads it and takes it with atomicCAS only when
// free. Over several devices every access to the shared state is a link
// trip, so both are on there; on one device they are options (A/B).
#ifdef PL_PEERS
#if defined(PL_KNOWN_WORKER) || defined(PL_LOCK_MAX)
#error "PL_KNOWN_WORKER and PL_LOCK_MAX are always on with PL_PEERS"
#endif
#define PL_KNOWN_WORKER 1
#define PL_LOCK_MAX 1
#endif
#ifndef PL_KNOWN_WORKER
#define PL_KNOWN_WORKER 0
#endif
#ifndef PL_LOCK_MAX
#define PL_LOCK_MAX 0
#endif

// The engines' diagnostic sums (kernels/engine_stats.cu, prepended to this
// source by the diagnostic build, which defines PL_ENGINE_STATS): nothing
// in the product's build.
#ifndef PL_ENGINE_STATS
#define PL_ENGINE_CLOCK
#define PL_LAP(k) ((void)0)
#define PL_ENGINE_LEAVE(pairs) ((void)0)
#define PL_ALL_PAIRS_STAT(pairs) ((void)0)
#define PL_LAUNCH_BEGIN() ((void)0)
#define PL_LAUNCH_END() ((void)0)
#endif

// Dynamic shared memory of update_data (its row cache).
extern __shared__ __align__(16) unsigned char pl_dyn_smem[];

// Bytes of dynamic shared memory the host gave this launch.
__device__ __forceinline__ unsigned dynamic_smem_bytes()
{
    unsigned bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
    return bytes;
}

// Programmatic dependent launch (sm_90 and later; the host asks for it, see
// paralingam/search/_scheduler.pyx): a kernel may be launched while its
// predecessor in the stream still runs, so its blocks are resident when the
// predecessor ends instead of being launched then. Every kernel starts with
// pl_enter: let the successor be launched now (it waits in turn), then wait
// until the predecessor has finished and its writes are visible. Every block
// must wait before it returns: a kernel whose blocks all returned early would
// count as finished while its predecessor still ran.
__device__ __forceinline__ void pl_enter()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether this block is the last of the grid to get here, counted on
// `counter` (reset by that block for the next launch). Every thread of every
// block must call it. Release: each block's writes are visible before its
// count; acquire: the last block sees every block's writes.
__device__ bool last_block_done(int *counter)
{
    __shared__ int s_last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();  // release: this block's results before the count
        s_last = atomicAdd(counter, 1) == (int)gridDim.x - 1;
        if (s_last) __threadfence();  // acquire: every block's results after it
    }
    __syncthreads();
    if (s_last && threadIdx.x == 0) *counter = 0;  // for the next launch
    return s_last;
}

// Barrier `id` (1..15; 0 is __syncthreads) among `threads` threads (whole warps).
__device__ __forceinline__ void named_barrier(int id, int threads)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Exclusive prefix sum of flag over 0..count-1 by one block; out[k] = number
// of flags before k. Returns the total (all threads).
__device__ int block_scan(const int *flag, int *out, int count)
{
    __shared__ int warp_tot[32];
    __shared__ int carry;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
    for (int base = 0; base < count; base += blockDim.x) {
        const int k = base + threadIdx.x;
        const int f = (k < count) ? flag[k] : 0;
        int v = f;
        for (int off = 1; off < 32; off <<= 1) {
            const int t = __shfl_up_sync(FULL, v, off);
            if (lane >= off) v += t;
        }
        if (lane == 31) warp_tot[warp] = v;
        __syncthreads();
        if (warp == 0) {
            int w = (lane < nwarp) ? warp_tot[lane] : 0;
            for (int off = 1; off < 32; off <<= 1) {
                const int t = __shfl_up_sync(FULL, w, off);
                if (lane >= off) w += t;
            }
            if (lane < nwarp) warp_tot[lane] = w;
        }
        __syncthreads();
        const int before = carry + (warp > 0 ? warp_tot[warp - 1] : 0) + v - f;
        if (k < count) out[k] = before;
        __syncthreads();
        if (threadIdx.x == 0) carry += warp_tot[nwarp - 1];
        __syncthreads();
    }
    return carry;
}

// Correlation from the five sums of two rows (0 for a constant row).
__device__ __forceinline__ double corr_from_sums(double sa, double sb, double sab, double saa,
                                                 double sbb, int n)
{
    const double ma = sa / n, mb = sb / n;
    const double cab = sab / n - ma * mb, caa = saa / n - ma * ma, cbb = sbb / n - mb * mb;
    if (!(caa > 0.0) || !(cbb > 0.0)) return 0.0;
    return cab / sqrt(caa * cbb);
}

// Entropy approximation from its two moments.
__device__ __forceinline__ double entropy_of(double m1, double m2)
{
    return PL_H_GAUSS - PL_K1 * (m1 - PL_BETA) * (m1 - PL_BETA) - PL_K2 * m2 * m2;
}

// Bound on |H_float - H_double| when each moment is off by at most D.
__device__ __forceinline__ double entropy_bound(double m1, double m2, double D)
{
    return 2.0 * PL_K1 * fabs(m1 - PL_BETA) * D + 2.0 * PL_K2 * fabs(m2) * D + (PL_K1 + PL_K2) * D * D;
}

// Bound on |min(0, I)^2 - min(0, I~)^2| when |I - I~| <= e (e = 0: exact).
__device__ __forceinline__ double square_bound(double v, double e)
{
    return (v < e) ? 2.0 * fmax(0.0, -v) * e + e * e : 0.0;
}

__device__ __forceinline__ bool is_float(float) { return true; }
__device__ __forceinline__ bool is_float(double) { return false; }

// The policy's decisions are taken on correlations computed from the data
// rows, as the reference and the CPU backend do (paralingam/search/_cpu.pyx,
// VERIFY_BAND): the update algebra divides a pair's errors by
// sqrt((1 - rho_a^2)(1 - rho_b^2)) with the root, so near a collinear root
// exact copies can drift out of their group. Pairs whose updated 1 - rho^2
// is within this band are recomputed from the data.
__device__ __forceinline__ double verify_band(const PlSearch *s)
{
    return fmax(PL_VERIFY_BAND, PL_VERIFY_BAND_TOL * s->collinear_tol);
}

// Exact dependence (paralingam.search.policy.is_dependent, the CPU's pl_dependent):
// the fraction left, frac * f, within tol and the measured residual
// fraction f at most ROUNDING_MARGIN times its rounding noise, where each
// row's noise is s->noise and a regression adds STEP_ROUNDING * eps
// (the constants: pl_constants.h).
#define PL_STEP_NOISE (PL_STEP_ROUNDING * DBL_EPSILON)
// A pair found collinear is stored with correlation exactly +-1, every other
// pair with |correlation| at most PL_BELOW_ONE (the largest double below 1):
// the decisions then read `rho * rho >= 1.0`, and 1 - rho^2 stays >= 2^-52.
#define PL_BELOW_ONE 0.99999999999999988898

__device__ __forceinline__ bool dependent(double f, double frac, double tol, double noise)
{
    const double m = PL_ROUNDING_MARGIN * noise;
    return frac * f <= tol && f <= m * m;
}

__device__ __forceinline__ bool is_collinear(double rho) { return rho * rho >= 1.0; }

// Samples each lane of a warp loads at once in the strided loops below. One
// warp walking n samples is bound by memory latency (E. coli's tiles hold
// up to 240 pairs near collinearity, each walked 3 times), so the loads of
// a batch are issued together; each lane still adds its samples k = lane,
// lane + 32, ... one at a time in that order, so the sums are bitwise those
// of the plain loop, whatever the batch.
#define PL_WARP_BATCH 16

// Sums of rows xa, xb by one warp (lane: the caller's lane): t = (sum a,
// sum b, sum ab, sum aa, sum bb), every lane gets them.
__device__ void warp_row_sums(const double *xa, const double *xb, int n, int lane, double (&t)[5])
{
    double sa = 0.0, sb = 0.0, sab = 0.0, saa = 0.0, sbb = 0.0;
    for (int k0 = lane; k0 < n; k0 += 32 * PL_WARP_BATCH) {
        double va[PL_WARP_BATCH], vb[PL_WARP_BATCH];
#pragma unroll
        for (int u = 0; u < PL_WARP_BATCH; ++u) {
            const int k = k0 + 32 * u;
            va[u] = k < n ? xa[k] : 0.0;
            vb[u] = k < n ? xb[k] : 0.0;
        }
#pragma unroll
        for (int u = 0; u < PL_WARP_BATCH; ++u) {
            if (k0 + 32 * u < n) {
                const double a = va[u], b = vb[u];
                sa += a; sb += b; sab += a * b; saa += a * a; sbb += b * b;
            }
        }
    }
    t[0] = pl_warp_sum(sa);
    t[1] = pl_warp_sum(sb);
    t[2] = pl_warp_sum(sab);
    t[3] = pl_warp_sum(saa);
    t[4] = pl_warp_sum(sbb);
}

// Residual fraction of row xa on row xb by one warp (the CPU's
// pl_residual_fraction: the variance of xa - beta xb over that of xa, from
// centred rows; it resolves fractions far below eps, which 1 - rho^2
// cannot), given the rows' means ma, mb (from warp_row_sums: the same sums
// its own first pass took). Every lane gets the result.
__device__ double warp_residual_fraction(const double *xa, const double *xb, double ma, double mb,
                                         int n, int lane)
{
    double sab = 0.0, saa = 0.0, sbb = 0.0;
    for (int k0 = lane; k0 < n; k0 += 32 * PL_WARP_BATCH) {
        double va[PL_WARP_BATCH], vb[PL_WARP_BATCH];
#pragma unroll
        for (int u = 0; u < PL_WARP_BATCH; ++u) {
            const int k = k0 + 32 * u;
            va[u] = k < n ? xa[k] : 0.0;
            vb[u] = k < n ? xb[k] : 0.0;
        }
#pragma unroll
        for (int u = 0; u < PL_WARP_BATCH; ++u) {
            if (k0 + 32 * u < n) {
                const double a = va[u] - ma, b = vb[u] - mb;
                sab += a * b; saa += a * a; sbb += b * b;
            }
        }
    }
    sab = pl_warp_sum(sab); saa = pl_warp_sum(saa); sbb = pl_warp_sum(sbb);
    if (!(saa > 0.0)) return 0.0;
    if (!(sbb > 0.0)) return 1.0;
    const double beta = sab / sbb;
    double see = 0.0;
    for (int k0 = lane; k0 < n; k0 += 32 * PL_WARP_BATCH) {
        double va[PL_WARP_BATCH], vb[PL_WARP_BATCH];
#pragma unroll
        for (int u = 0; u < PL_WARP_BATCH; ++u) {
            const int k = k0 + 32 * u;
            va[u] = k < n ? xa[k] : 0.0;
            vb[u] = k < n ? xb[k] : 0.0;
        }
#pragma unroll
        for (int u = 0; u < PL_WARP_BATCH; ++u) {
            if (k0 + 32 * u < n) {
                const double e = (va[u] - ma) - beta * (vb[u] - mb);
                see += e * e;
            }
        }
    }
    return pl_warp_sum(see) / saa;
}

// The correlation v of variables a and b, stored both ways; a collinear
// pair (v = +-1, see PL_BELOW_ONE) is flagged for the groups of the next
// iteration.
__device__ __forceinline__ void store_corr(PlSearch *s, int a, int b, double v)
{
    const size_t p = s->p;
    s->cov[a * p + b] = v;
    s->cov[b * p + a] = v;
    if (is_collinear(v)) { s->linked[a] = 1; s->linked[b] = 1; s->ctl->collinear = 1; }
}

// Pairs of a 16 x 16 tile whose correlation must come from the data (see
// verify_band): the threads that find them list them, then the block's
// warps compute them, a warp per pair. (One thread per pair walked n samples
// alone; on E. coli's near-copies that was most of the search.)
struct BandPairs {
    int count;
    int a[256], b[256];
};

__device__ __forceinline__ void band_add(BandPairs &band, int a, int b)
{
    const int slot = atomicAdd(&band.count, 1);
    band.a[slot] = a;
    band.b[slot] = b;
}

// Every thread of the block (16 x 16, or more rows: update_cov) calls it,
// after the listing. A tile with band pairs records the iteration, which the
// status passes to the host (update_cov_rows).
__device__ void band_resolve(PlSearch *s, BandPairs &band)
{
    __syncthreads();
    const int tid = threadIdx.y * blockDim.x + threadIdx.x, lane = tid & 31;
    if (tid == 0 && band.count > 0) s->ctl->band_at = s->ctl->iteration;
    const int nwarp = (blockDim.x * blockDim.y) >> 5;
    const size_t ld = s->ld;
    for (int q = tid >> 5; q < band.count; q += nwarp) {
        const int a = band.a[q], b = band.b[q];
        const int n = (int)s->n;
        double t[5];
        warp_row_sums(s->X64 + a * ld, s->X64 + b * ld, n, lane, t);
        const double v = corr_from_sums(t[0], t[1], t[2], t[3], t[4], n);
        // the exact-dependence decision, on the later row's residual on the earlier's
        const int lo = min(a, b), hi = max(a, b);
        const bool maybe = 1.0 - v * v <= s->collinear_tol + PL_MEASURE_SLACK;  // warp-uniform
        const double m_hi = (hi == a ? t[0] : t[1]) / n, m_lo = (hi == a ? t[1] : t[0]) / n;
        const double f = maybe ? warp_residual_fraction(s->X64 + hi * ld, s->X64 + lo * ld,
                                                        m_hi, m_lo, n, lane) : 1.0;
        if (lane == 0) {
            const bool dep = maybe && dependent(f, 1.0, s->collinear_tol,
                                                s->noise[a] + s->noise[b] + PL_STEP_NOISE);
            store_corr(s, a, b, dep ? copysign(1.0, v) : fmax(-PL_BELOW_ONE, fmin(PL_BELOW_ONE, v)));
        }
    }
}

// ---------------------------------------------------------------- set-up

extern "C" __global__ void init_search(PlSearch *s)
{
    pl_enter();
    if (s->magic != PL_MAGIC) __trap();  // host and device disagree on the state layout
    const int p = (int)s->p;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < p; k += gridDim.x * blockDim.x) {
        s->alive[k] = k;
        s->gone[k] = 0;
        s->frac[k] = 1.0;
        s->linked[k] = 0;
        s->explained_by[k] = -1;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        PlControl *c = s->ctl;
        c->r = p; c->nw = 0; c->epoch = 0; c->iteration = 0; c->n_order = 0;
        c->done = 0; c->state = PL_RUNNING; c->root = -1; c->n_cand = 0; c->rounds = 0;
        c->collinear = 0; c->n_rederived = 0; c->seq = 0; c->ordered = 0; c->blocks_done = 0;
        c->workers_done = 0; c->all_pairs = 0; c->band_at = -1000;
        c->drift_bits = 0; c->compared = 0; c->gamma = s->gamma0;
        c->n_active = 0;
    }
}

// Population-standardise one row in double, in place, with its float copy
// (the whole block). Reads through L2 (__ldcg): after drift the row was just
// written by another block of the same launch.
__device__ void standardise_row(double *x, float *x32, int n)
{
    __shared__ double sh[32];
    __shared__ double s_mean, s_inv;
    double acc = 0.0;
    for (int k = threadIdx.x; k < n; k += blockDim.x) acc += __ldcg(x + k);
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0) s_mean = acc / n;
    __syncthreads();
    const double mean = s_mean;
    acc = 0.0;
    for (int k = threadIdx.x; k < n; k += blockDim.x) { const double d = __ldcg(x + k) - mean; acc += d * d; }
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0) s_inv = 1.0 / sqrt(acc / n);
    __syncthreads();
    const double inv = s_inv;
    for (int k = threadIdx.x; k < n; k += blockDim.x) {
        const double v = (x[k] - mean) * inv;
        x[k] = v;
        x32[k] = (float)v;
    }
}

// Float entropy H(x) of variable i (and its error bound) from its float row
// (the whole block; the row's writes are visible to it).
__device__ void row_entropy32(PlSearch *s, int i)
{
    __shared__ double sh[32 * 3];
    __syncthreads();  // the row was just written by this block
    double m[2];
    block_series_moments(s->X32 + (size_t)i * s->ld, (int)s->n, m, sh);
    if (threadIdx.x == 0) {
        s->hx_var[i] = entropy_of(m[0], m[1]);
        s->hx_var_err[i] = entropy_bound(m[0], m[1], s->moment_err);
    }
}

// Whether the rows' double entropies come from the passes that write them
// (PL_HX64_IN_UPDATE_MIN_N) rather than from entropy64.
__device__ __forceinline__ bool hx64_in_update(const PlSearch *s)
{
    return s->use_float && s->n >= PL_HX64_IN_UPDATE_MIN_N;
}

// Double entropy of variable i's row into hx64_var (the whole block).
__device__ void row_entropy64(PlSearch *s, int i)
{
    __shared__ double sh[32 * 3];
    __syncthreads();  // the row was just written by this block
    double m[2];
    block_series_moments(s->X64 + (size_t)i * s->ld, (int)s->n, m, sh);
    if (threadIdx.x == 0) s->hx64_var[i] = entropy_of(m[0], m[1]);
}

// Standardise variable i's row (double and float) and, with float
// comparisons, compute its float entropy for setup_f32 (the whole block),
// and its double entropy where the re-decisions take it from here.
__device__ void standardise_variable(PlSearch *s, int i)
{
    standardise_row(s->X64 + (size_t)i * s->ld, s->X32 + (size_t)i * s->ld, (int)s->n);
    if (s->use_float) row_entropy32(s, i);
    if (hx64_in_update(s)) row_entropy64(s, i);
}

// One block per row: the data as given, standardised.
extern "C" __global__ void standardise(PlSearch *s) { pl_enter(); standardise_variable(s, blockIdx.x); }

// cov[i, j] = <x_i, x_j> / n for the remaining variables i, j (positions
// alive[0..r)) of the 16 x 16 tile of positions at rows bi, columns bj, the
// calling thread at (ty, tx) in it; rows that left the search (gone != 0, or
// `skip`) are left alone. Used for the first covariance and to re-derive it
// after drift, a tile per block (covariance_tile) or, in update_data_fused,
// the tiles one after another by one block. Threads past 16 rows (update_cov's
// larger blocks, see there) only help decide the band. Every thread of the
// block calls it.
__device__ __forceinline__ void covariance_tile_at(PlSearch *s, int r, int skip, int bi, int bj,
                                                   int ty, int tx, double (*ta)[17],
                                                   double (*tb)[17], BandPairs &band)
{
    const int n = (int)s->n;
    const bool in_tile = ty < 16;
    if (tx == 0 && ty == 0) band.count = 0;  // (the loop's barriers order it)
    const size_t ld = s->ld;
    const int ra = in_tile && bi + ty < r ? s->alive[bi + ty] : -1;
    const int rb = in_tile && bj + ty < r ? s->alive[bj + ty] : -1;
    double acc = 0.0;
    for (int k0 = 0; k0 < n; k0 += 16) {
        const int kk = k0 + tx;
        if (in_tile) {
            ta[ty][tx] = (ra >= 0 && kk < n) ? s->X64[ra * ld + kk] : 0.0;
            tb[ty][tx] = (rb >= 0 && kk < n) ? s->X64[rb * ld + kk] : 0.0;
        }
        __syncthreads();
        if (in_tile) {
#pragma unroll
            for (int q = 0; q < 16; ++q) acc += ta[ty][q] * tb[tx][q];
        }
        __syncthreads();
    }
    const int i = bi + ty, j = bj + tx;
    if (in_tile && i < r && j < r && j >= i) {
        const int vi = s->alive[i], vj = s->alive[j];
        if (vi != skip && vj != skip && !s->gone[vi] && !s->gone[vj]) {
            const double v = acc / n;
            if (i == j) s->cov[vi * s->p + vi] = 1.0;
            else if (1.0 - v * v <= verify_band(s)) band_add(band, vi, vj);
            else store_corr(s, vi, vj, v);
        }
    }
    band_resolve(s, band);
}

__device__ void covariance_tile(PlSearch *s, int r, int skip)
{
    __shared__ double ta[16][17], tb[16][17];
    __shared__ BandPairs band;
    const int bi = blockIdx.y * 16, bj = blockIdx.x * 16;
    if (bj + 15 < bi) return;  // lower triangle: mirrored
    covariance_tile_at(s, r, skip, bi, bj, threadIdx.y, threadIdx.x, ta, tb, band);
}

extern "C" __global__ void covariance(PlSearch *s) { pl_enter(); covariance_tile(s, (int)s->p, -1); }

// ---------------------------------------------------------------- iteration start

// Label propagation over the remaining variables that have a collinear
// partner: every position ends with the smallest position of its group.
__device__ void collinear_groups(PlSearch *s, int r)
{
    __shared__ int changed;
    __shared__ int m;
    const size_t p = s->p;
    int *flag = s->cursor;      // free until the workers are reset
    int *pos = s->scratch;
    for (int k = threadIdx.x; k < r; k += blockDim.x) flag[k] = s->linked[s->alive[k]];
    __syncthreads();
    const int total = block_scan(flag, pos, r);
    // list of linked positions in `ndone` (free until the reset)
    int *list = s->ndone;
    for (int k = threadIdx.x; k < r; k += blockDim.x)
        if (flag[k]) list[pos[k]] = k;
    if (threadIdx.x == 0) m = total;
    __syncthreads();
    const int mm = m;
    do {
        __syncthreads();
        if (threadIdx.x == 0) changed = 0;
        __syncthreads();
        for (long long q = threadIdx.x; q < (long long)mm * mm; q += blockDim.x) {
            const int x = (int)(q / mm), y = (int)(q % mm);
            if (y <= x) continue;
            const int a = list[x], b = list[y];
            if (s->use_prior && s->pk_status[a] != s->pk_status[b]) continue;  // one rule per group
            const double v = s->cov[(size_t)s->alive[a] * p + s->alive[b]];
            if (!is_collinear(v)) continue;
            const int la = ld_volatile(&s->label[a]), lb = ld_volatile(&s->label[b]);
            if (la != lb) {
                const int lo = min(la, lb);
                atomicMin(&s->label[a], lo);
                atomicMin(&s->label[b], lo);
                changed = 1;
            }
        }
        __syncthreads();
    } while (changed);
}

// First pair of remaining variables that is collinear (on_collinear="error").
__device__ void first_collinear_pair(PlSearch *s, int r, int *out)
{
    if (threadIdx.x != 0) return;
    const size_t p = s->p;
    for (int a = 0; a < r; ++a) {
        if (!s->linked[s->alive[a]]) continue;
        for (int b = a + 1; b < r; ++b) {
            if (s->use_prior && s->pk_status[a] != s->pk_status[b]) continue;
            const double v = s->cov[(size_t)s->alive[a] * p + s->alive[b]];
            if (is_collinear(v)) { out[0] = s->alive[a]; out[1] = s->alive[b]; return; }
        }
    }
}

// Mark active positions 0..n_active-1 live (one block).
__device__ void set_live(PlSearch *s, int n_active)
{
    for (int q = threadIdx.x; q < (n_active + 31) / 32; q += blockDim.x) {
        const int left = n_active - 32 * q;
        s->live[q] = left >= 32 ? 0xffffffffu : (1u << left) - 1u;
    }
}

__device__ void stop_degenerate(PlSearch *s, int kind, int a, int b)
{
    PlControl *c = s->ctl;
    c->done = 1;
    c->state = PL_DEGENERATE;
    PlStatus *st = s->status;
    st->detail[0] = kind; st->detail[1] = a; st->detail[2] = b;
}

__device__ __forceinline__ void take_entropy32(PlSearch *s, int w);

// The phases of prep, in the order it runs them. Each gets the control
// block c from prep (reloading s->ctl after a store to the search state
// would be a second load) and is inlined, so prep compiles as one body: the
// same machine code as the kernel written in one piece (check a change with
// tools/same_single_gpu_cubin.sh).

// Step 1a: the previous root, then the variables it explained (gone == 1),
// join the order at base = c->n_order; they leave the search (gone = 2).
// Returns the number explained (c->n_order is left to the caller);
// first_explained (shared) gets the first of them, or -1.
__device__ __forceinline__ int join_order(PlSearch *s, PlControl *c, int r, int root, int *flag,
                                          int *pos, int &base, int &first_explained)
{
    for (int k = threadIdx.x; k < r; k += blockDim.x) {
        const int v = s->alive[k];
        flag[k] = (v != root && s->gone[v] == 1);
    }
    __syncthreads();
    const int n_expl = block_scan(flag, pos, r);
    base = c->n_order;
    if (threadIdx.x == 0) {
        s->order[base] = root;
        s->gone[root] = 2;
        first_explained = -1;
    }
    __syncthreads();
    for (int k = threadIdx.x; k < r; k += blockDim.x) {
        if (!flag[k]) continue;
        const int v = s->alive[k];
        s->order[base + 1 + pos[k]] = v;
        s->explained_by[v] = root;
        s->gone[v] = 2;
        if (pos[k] == 0) first_explained = v;
    }
    __syncthreads();
    return n_expl;
}

// Step 1b: compact alive[0..r) to the variables still searching (gone ==
// 0), order preserved. Returns their number.
__device__ __forceinline__ int compact_alive(PlSearch *s, int r, int *flag, int *pos)
{
    for (int k = threadIdx.x; k < r; k += blockDim.x) flag[k] = (s->gone[s->alive[k]] == 0);
    __syncthreads();
    const int r_new = block_scan(flag, pos, r);
    int *tmp = s->label;
    for (int k = threadIdx.x; k < r; k += blockDim.x)
        if (flag[k]) tmp[pos[k]] = s->alive[k];
    __syncthreads();
    for (int k = threadIdx.x; k < r_new; k += blockDim.x) s->alive[k] = tmp[k];
    return r_new;
}

// Step 1: the previous root (if any) and the variables it explained join
// the order, and the next iteration starts on the rest (r is updated).
// Returns false when the search stopped: a root explained a variable and
// degenerate data stop the search.
__device__ __forceinline__ bool retire_root(PlSearch *s, PlControl *c, int &r, int &first_explained)
{
    const int root = c->root;
    if (root >= 0) {
        int *flag = s->cursor, *pos = s->scratch;  // free until the workers are reset
        int base;
        const int n_expl = join_order(s, c, r, root, flag, pos, base, first_explained);
        if (s->stop_on_degenerate && n_expl > 0) {
            if (threadIdx.x == 0) {
                c->n_order = base + 1 + n_expl;  // order: ..., root, the variables it explained
                stop_degenerate(s, PL_DEP_EXPLAINED, first_explained, root);
            }
            return false;
        }
        const int r_new = compact_alive(s, r, flag, pos);
        if (threadIdx.x == 0) {
            c->n_order = base + 1 + n_expl;
            c->r = r_new;
            c->root = -1;
            c->iteration += 1;  // iteration k searches the (k+1)-th root
        }
        __syncthreads();
        r = r_new;
    }
    return true;
}

// Step 2: with at most one variable left the search is finished (the last
// one joins the order). Returns whether it is.
__device__ __forceinline__ bool finish_if_done(PlSearch *s, PlControl *c, int r)
{
    if (r <= 1) {
        if (threadIdx.x == 0) {
            if (r == 1) { s->order[c->n_order] = s->alive[0]; s->gone[s->alive[0]] = 2; c->n_order += 1; c->r = 0; }
            c->done = 1;
            c->state = PL_FINISHED;
        }
        return true;
    }
    return false;
}

// Step 3: label[k] = the first position of k's collinear group (k itself
// when no pair is collinear). Returns false when the search stopped: a
// collinear pair with on_collinear="error" (the host reads the first group
// from label).
__device__ __forceinline__ bool label_groups(PlSearch *s, PlControl *c, int r)
{
    for (int k = threadIdx.x; k < r; k += blockDim.x) s->label[k] = k;
    __syncthreads();
    if (c->collinear) {
        collinear_groups(s, r);
        __syncthreads();
        if (s->stop_on_degenerate) {
            __shared__ int pair[2];
            pair[0] = -1;
            __syncthreads();
            first_collinear_pair(s, r, pair);
            __syncthreads();
            if (threadIdx.x == 0 && pair[0] >= 0) stop_degenerate(s, PL_DEP_COLLINEAR, pair[0], pair[1]);
            __syncthreads();
            if (pair[0] >= 0) return false;
        }
    }
    return true;
}

// Step 4: the workers, one per group, its first member (every variable
// when no pair is collinear), with the group's size as weight and the
// group's prior-knowledge status. Returns their number.
__device__ __forceinline__ int make_workers(PlSearch *s, PlControl *c, int r)
{
    int nw = r;
    if (c->collinear) {
        int *is_rep = s->cursor, *wnum = s->scratch;
        for (int k = threadIdx.x; k < r; k += blockDim.x) is_rep[k] = (s->label[k] == k);
        __syncthreads();
        nw = block_scan(is_rep, wnum, r);
        for (int k = threadIdx.x; k < r; k += blockDim.x) {
            if (!is_rep[k]) continue;
            s->idx[wnum[k]] = s->alive[k];
            s->weight[wnum[k]] = 0.0;
            s->kind[wnum[k]] = s->use_prior ? s->pk_status[k] : PL_CANDIDATE;
        }
        __syncthreads();
        for (int k = threadIdx.x; k < r; k += blockDim.x) atomicAdd(&s->weight[wnum[s->label[k]]], 1.0);
    } else {
        for (int k = threadIdx.x; k < r; k += blockDim.x) {
            s->idx[k] = s->alive[k];
            s->weight[k] = 1.0;
            s->kind[k] = s->use_prior ? s->pk_status[k] : PL_CANDIDATE;
        }
    }
    __syncthreads();
    return nw;
}

// Step 5a: reset the nw workers' scores and counters and list the
// candidates as active (every candidate works in the first round); in an
// all-pairs float iteration also take their entropies. Clears the
// collinearity flags of the r variables. Returns the number active.
__device__ __forceinline__ int reset_workers(PlSearch *s, int r, int nw, bool all_pairs)
{
    int *flag = s->scratch, *pos = s->label;
    for (int w = threadIdx.x; w < nw; w += blockDim.x) {
        s->score[w] = 0.0; s->err[w] = 0.0; s->ndone[w] = 0; s->cursor[w] = 0;
        s->final_score[w] = -1.0; s->final_err[w] = 0.0;
        flag[w] = s->kind[w] == PL_CANDIDATE;
    }
    if (all_pairs && s->use_float)
        for (int w = threadIdx.x; w < nw; w += blockDim.x) take_entropy32(s, w);
    __syncthreads();
    const int n_active = block_scan(flag, pos, nw);
    for (int w = threadIdx.x; w < nw; w += blockDim.x)
        if (flag[w]) s->active[pos[w]] = w;
    set_live(s, n_active);
    for (int k = threadIdx.x; k < r; k += blockDim.x) s->linked[s->alive[k]] = 0;
    __syncthreads();
    return n_active;
}

// Step 5b (thread 0): the control block of the new iteration. One
// candidate group is the root at once, with no comparison.
__device__ __forceinline__ void start_iteration(PlSearch *s, PlControl *c, int nw, int n_active,
                                                bool all_pairs)
{
    c->all_pairs = all_pairs;
    c->nw = nw; c->epoch += 1; c->gamma = s->gamma0; c->n_active = n_active;
    c->rounds = 0; c->compared = 0; c->drift_bits = 0; c->collinear = 0; c->n_cand = 0;
    c->done = 0; c->state = PL_RUNNING;
    if (n_active == 1) {
        c->done = 1; c->state = PL_DECIDED; c->root = s->idx[s->active[0]];
        s->it_score[c->iteration] = 0.0; s->it_gamma[c->iteration] = s->gamma0;
        s->it_rounds[c->iteration] = 0; s->it_compared[c->iteration] = 0; s->it_redo[c->iteration] = 0;
    }
}

// mode 1: steps 1-2 (order, remaining set); mode 2: steps 3-5 (workers);
// mode 3: both. With prior knowledge the host runs mode 1, reads the
// remaining set, writes pk_status and runs mode 2. With PL_PREP_ALL_PAIRS
// the iteration compares every pair in one round (see all_pairs_body); with
// float comparisons prep then also takes the workers' entropies, so the host
// skips setup_f32, which would only sort partners nobody walks.
extern "C" __global__ void __launch_bounds__(1024) prep(PlSearch *s, int mode)
{
    pl_enter();
    PlControl *c = s->ctl;
    __shared__ int s_first_explained, s_stop;
    if (threadIdx.x == 0) {  // (both tests taken, no branch: they are cheap)
        const int state = c->state;
        s_stop = (state == PL_DEGENERATE) | (!(mode & 1) & (state == PL_FINISHED));
    }
    __syncthreads();
    if (s_stop) return;  // keep the final report for the host
    int r = c->r;
    if (mode & 1) {
        if (!retire_root(s, c, r, s_first_explained)) return;   // 1.
        if (threadIdx.x == 0) s->it_r[c->iteration] = r;
        if (finish_if_done(s, c, r)) return;                    // 2.
        if (!(mode & 2)) return;
    }
    if (!label_groups(s, c, r)) return;                         // 3.
    const int nw = make_workers(s, c, r);                       // 4.
    const bool all_pairs = (mode & PL_PREP_ALL_PAIRS) != 0;
    const int n_active = reset_workers(s, r, nw, all_pairs);    // 5.
    if (threadIdx.x == 0) start_iteration(s, c, nw, n_active, all_pairs);
}

// Bucket of a partner with correlation rho: |rho| in PL_ORDER_BUCKETS steps,
// bucket 0 the largest (paralingam/search/_cpu_kernels.h, pl_order_bucket).
__device__ __forceinline__ int order_bucket(double rho)
{
    const double q = fabs(rho) * PL_ORDER_BUCKETS;
    return PL_ORDER_BUCKETS - 1 - (q < PL_ORDER_BUCKETS - 1.0 ? (int)q : PL_ORDER_BUCKETS - 1);
}

// Partner order of worker w (the whole block, at most 16 warps): the other
// workers by decreasing |correlation| in PL_ORDER_BUCKETS steps, ties to the
// lower index, as the CPU backend orders them. A strongly correlated partner
// gives a large |I|, so a worker that is not the root usually passes the
// threshold after its first few comparisons. The order decides which pairs
// are compared, never the root: the threshold test is exact in any order.
//
// One stable counting pass: a histogram of the buckets, their offsets, then
// the partners placed tile by tile in index order. Within a tile a partner's
// rank among its bucket's earlier members is its rank in its warp
// (__match_any_sync) plus the counts of the tile's earlier warps; O(nw) work
// and three barriers per tile of blockDim partners. setup_* launch at most
// 512 threads (__launch_bounds__), hence 16 rows of tile counts.
__device__ void order_partners(PlSearch *s, int w, int nw)
{
    __shared__ int next[PL_ORDER_BUCKETS];  // next free slot of each bucket
    __shared__ unsigned short tile_count[512 / 32][PL_ORDER_BUCKETS];  // per warp of the tile
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
    const size_t p = s->p;
    const double *row = s->cov + (size_t)s->idx[w] * p;
    for (int b = threadIdx.x; b < PL_ORDER_BUCKETS; b += blockDim.x) next[b] = 0;
    for (int b = lane; b < PL_ORDER_BUCKETS; b += 32) tile_count[warp][b] = 0;
    __syncthreads();
    for (int t = threadIdx.x; t < nw; t += blockDim.x)
        if (t != w) atomicAdd(&next[order_bucket(row[s->idx[t]])], 1);
    __syncthreads();
    if (warp == 0) {  // exclusive scan of the counts: 8 buckets per lane
        constexpr int per = PL_ORDER_BUCKETS / 32;
        int c[per], sum = 0;
#pragma unroll
        for (int q = 0; q < per; ++q) { c[q] = next[lane * per + q]; sum += c[q]; }
        int incl = sum;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const int v = __shfl_up_sync(FULL, incl, off);
            if (lane >= off) incl += v;
        }
        int at = incl - sum;
#pragma unroll
        for (int q = 0; q < per; ++q) { next[lane * per + q] = at; at += c[q]; }
    }
    __syncthreads();
    int *out = s->partner + (size_t)w * p;
    const unsigned below = (1u << lane) - 1u;
    for (int base = 0; base < nw; base += blockDim.x) {  // the same trip count for every thread
        const int t = base + threadIdx.x;
        const bool valid = t < nw && t != w;
        const int b = valid ? order_bucket(row[s->idx[t]]) : -1;
        const unsigned peers = __match_any_sync(FULL, b);
        const int rank = __popc(peers & below);
        if (valid && rank == 0) tile_count[warp][b] = (unsigned short)__popc(peers);
        __syncthreads();
        if (valid) {
            int at = next[b] + rank;
            for (int q = 0; q < warp; ++q) at += tile_count[q][b];
            out[at] = t;
        }
        __syncthreads();
        for (int c = threadIdx.x; c < PL_ORDER_BUCKETS; c += blockDim.x) {  // advance past the tile
            int sum = 0;
            for (int q = 0; q < nwarp; ++q) { sum += tile_count[q][c]; tile_count[q][c] = 0; }
            next[c] += sum;
        }
        __syncthreads();
    }
    static_assert(PL_ORDER_BUCKETS % 32 == 0, "the offsets scan takes whole buckets per lane");
}

// The float entropy of worker w's variable, computed by update_data (or
// standardise) from the row it wrote.
__device__ __forceinline__ void take_entropy32(PlSearch *s, int w)
{
    const int i = s->idx[w];
    s->hx[w] = s->hx_var[i];
    s->hx_err[w] = s->hx_var_err[i];
}

// One block per worker (at most 512 threads): its entropy (float: from
// update_data; double: computed here) and, with a threshold, its partner
// order (without one every pair is compared, in any order: the workers
// walk their partners cyclically).
template <typename T>
__device__ void setup_body(PlSearch *s)
{
    __shared__ double sh[32 * 3];
    PlControl *c = s->ctl;
    const int w = blockIdx.x, nw = c->nw;
    if (c->done || w >= nw) return;
    const bool ordered = s->gamma0 < INFINITY;
    if (w == 0 && threadIdx.x == 0) c->ordered = ordered;
    if (is_float(T(0))) {
        if (threadIdx.x == 0) take_entropy32(s, w);
    } else {
        double m[2];
        block_series_moments(s->X64 + (size_t)s->idx[w] * s->ld, (int)s->n, m, sh);
        if (threadIdx.x == 0) {
            s->hx[w] = entropy_of(m[0], m[1]);
            s->hx_err[w] = 0.0;
        }
    }
    if (ordered && !c->all_pairs && s->kind[w] == PL_CANDIDATE) order_partners(s, w, nw);
}

extern "C" __global__ void __launch_bounds__(512) setup_f32(PlSearch *s) { pl_enter(); setup_body<float>(s); }
extern "C" __global__ void __launch_bounds__(512) setup_f64(PlSearch *s) { pl_enter(); setup_body<double>(s); }
// Double entropies for a re-decision: one block per worker, because a
// warp alone on a row is bound by the latency of the double special functions.
extern "C" __global__ void __launch_bounds__(256) entropy64(PlSearch *s)
{
    pl_enter();
    __shared__ double sh[32 * 3];
    const int w = blockIdx.x, n = (int)s->n;
    if (w >= s->ctl->nw) return;
    if (hx64_in_update(s)) {  // computed by the pass that last wrote the row
        if (threadIdx.x == 0) s->hx64[w] = s->hx64_var[s->idx[w]];
        return;
    }
    const double *x = s->X64 + (size_t)s->idx[w] * s->ld;
    PlSums64 h;
    for (int k = threadIdx.x; k < n; k += blockDim.x) h.add(x[k]);
    h.flush();
    double t[3] = {h.a, h.l, h.g};
    block_sums(t, sh);
    if (threadIdx.x == 0) s->hx64[w] = entropy_of((t[0] + t[1]) / n - PL_LN2, t[2] / n);
}

// ---------------------------------------------------------------- the worker kernel

// I(a, b) of workers a < b and its error bound, and the entropies hu, hv of
// the residuals of a on b and of b on a, by a group of G warps (the calling
// warp is warp g of its group; gsum: the group's shared scratch, 6 G
// doubles; G > 1 synchronises the group with named barrier `bar`). Every
// lane of warp 0 of the group gets them (of every warp when G = 1).
template <typename T>
__device__ __forceinline__ void compare_pair(const PlSearch *s, int a, int b, const double *hx,
                                             int g, int G, int bar, double *gsum,
                                             double &I, double &e, double &hu, double &hv)
{
    const size_t p = s->p, ld = s->ld;
    const int n = (int)s->n;
    const int ia = s->idx[a], ib = s->idx[b];
    const double rho = s->cov[ia * p + ib];
    const double f = 1.0 - rho * rho;
    I = 0.0;
    e = 0.0;
    hu = hv = 0.0;
    if (is_collinear(rho)) {  // collinear: contributes nothing (paralingam.search.policy)
        if (G > 1) named_barrier(bar, 32 * G);  // the group leaves together, as below
        return;
    }
    const double inv_s = 1.0 / sqrt(f);
    const int lane = g * 32 + (threadIdx.x & 31), lanes = 32 * G;
    double sums[6];
    double l_unit = 1.0;
    if (is_float(T(0))) {
        l_unit = PL_LN2;
        if (f < WIDE_F)
            pl_pair_sums_wide(s->X64 + ia * ld, s->X64 + ib * ld, rho, inv_s, n, lane, lanes, sums);
        else
            pl_pair_sums(s->X32 + ia * ld, s->X32 + ib * ld, rho, (float)inv_s, n, lane, lanes, sums);
    } else {
        pl_pair_sums(s->X64 + ia * ld, s->X64 + ib * ld, rho, inv_s, n, lane, lanes, sums);
    }
    if (G > 1) {  // warp 0 adds the group's warps in a fixed order
        if ((threadIdx.x & 31) == 0)
            for (int k = 0; k < 6; ++k) gsum[6 * g + k] = sums[k];
        named_barrier(bar, lanes);
        if (g != 0) return;
        for (int k = 0; k < 6; ++k) {
            double t = gsum[k];
            for (int q = 1; q < G; ++q) t += gsum[6 * q + k];
            sums[k] = t;
        }
    }
    double m[4];
    pl_pair_moments_of(sums, l_unit, n, m);
    if (is_float(T(0)))
        e = s->hx_err[a] + s->hx_err[b] + entropy_bound(m[0], m[1], s->moment_err) +
            entropy_bound(m[2], m[3], s->moment_err);
    // I(a, b) = H(x_b) + H(r_a^(b)) - H(x_a) - H(r_b^(a))
    hu = entropy_of(m[0], m[1]);
    hv = entropy_of(m[2], m[3]);
    I = (hx[b] + hu) - (hx[a] + hv);
}

// I(w, t) seen from candidate w when t is not a candidate (prior knowledge):
// the usual statistic, except that a partner in V_j stands in for its own
// residual: I(w, t) = H(x_t) + H(r_w^(t)) - H(x_w) - H(x_t) (lingam).
__device__ __forceinline__ double partner_stat(const PlSearch *s, int w, int t, double I_ab,
                                               double hu, double hv, const double *hx)
{
    const bool w_first = w < t;  // (a, b) = (w, t): r_w^(t) is u; else it is v
    if (s->kind[t] == PL_IN_VJ) return (w_first ? hu : hv) - hx[w];
    return w_first ? I_ab : -I_ab;
}

// One partner's term of a worker's score (S) and of its error bound (E),
// weight w, statistic v and its error e. (A macro: as an inline function it
// changed the engines' code, if not their sums.)
#define PL_ADD_SCORE_TERM(S, E, w, v, e) \
    do { if ((v) < 0.0) S += (w) * (v) * (v); E += (w) * square_bound((v), (e)); } while (0)

// Score of a finished worker x summed in index order over its partners
// (lane-strided, fixed reduction tree: the same on every run).
__device__ void finalize(PlSearch *s, int x)
{
    const int nw = PL_SHARED(s->ctl->nw), lane = threadIdx.x & 31;
    const size_t p = s->p;
    double S = 0.0, E = 0.0;
    for (int j = lane; j < nw; j += 32) {
        if (j == x) continue;
        const double v = PL_LDCG(&s->stat[x * p + j]);
        const double e = s->use_float ? PL_LDCG(&s->stat_err[(size_t)min(x, j) * p + max(x, j)]) : 0.0;
        PL_ADD_SCORE_TERM(S, E, s->weight[j], v, e);
    }
    S = pl_warp_sum(S);
    E = pl_warp_sum(E);
    if (lane == 0) { s->final_err[x] = E; PL_FENCE(); s->final_score[x] = S; }
}

#ifdef PL_PEERS
// finalize's sum (the same terms in the same order, so the same bits), for
// select_root: after the kernel boundary every device's statistics are in
// device 0's memory, so the loads need not be volatile (__ldcg), and each
// lane loads PL_FINALIZE_BATCH of its partners' statistics (and weights)
// before adding them. With
// one load in flight per lane, a row of thousands of partners took a warp
// over a hundred memory round trips, on the path of every round.
#define PL_FINALIZE_BATCH 4
__device__ void finalize_loaded(PlSearch *s, int x)
{
    const int nw = s->ctl->nw, lane = threadIdx.x & 31;
    const size_t p = s->p;
    double S = 0.0, E = 0.0;
    for (int j0 = lane; j0 < nw; j0 += 32 * PL_FINALIZE_BATCH) {
        double v[PL_FINALIZE_BATCH], e[PL_FINALIZE_BATCH], w[PL_FINALIZE_BATCH];
#pragma unroll
        for (int u = 0; u < PL_FINALIZE_BATCH; ++u) {
            const int j = j0 + 32 * u;
            const bool in = j < nw && j != x;
            v[u] = in ? __ldcg(&s->stat[x * p + j]) : 0.0;
            e[u] = in && s->use_float ? __ldcg(&s->stat_err[(size_t)min(x, j) * p + max(x, j)]) : 0.0;
            w[u] = in ? s->weight[j] : 0.0;
        }
#pragma unroll
        for (int u = 0; u < PL_FINALIZE_BATCH; ++u) {
            const int j = j0 + 32 * u;
            if (j < nw && j != x) PL_ADD_SCORE_TERM(S, E, w[u], v[u], e[u]);
        }
    }
    S = pl_warp_sum(S);
    E = pl_warp_sum(E);
    if (lane == 0) { s->final_err[x] = E; PL_FENCE(); s->final_score[x] = S; }
}
#endif

// Message side x (value v = I(x, y)) with partner y.
__device__ __forceinline__ void message(PlSearch *s, int x, int y, double v, double e)
{
    if (v < 0.0) PL_SYS(atomicAdd)(&s->score[x], s->weight[y] * v * v);
    if (s->use_float && v < e) PL_SYS(atomicAdd)(&s->err[x], s->weight[y] * square_bound(v, e));
}

// First live position at or after `from` (cyclically), or -1 when no active
// worker has work left. The whole warp reads 32 words of the bitmask at once.
__device__ __forceinline__ int next_live(const unsigned *live, int n_active, int from)
{
    const int lane = threadIdx.x & 31;
    const int nwords = (n_active + 31) >> 5, w0 = from >> 5;
    for (int base = 0; base <= nwords; base += 32) {
        const int k = base + lane;  // word k after w0; k == nwords: w0 again, bits before `from`
        unsigned bits = 0;
        if (k <= nwords) {
            int q = w0 + k;
            if (q >= nwords) q -= nwords;
            bits = ld_volatile(&live[q]);
            if (k == 0) bits &= ~0u << (from & 31);
            if (k == nwords) bits &= (1u << (from & 31)) - 1u;
        }
        const unsigned any = __ballot_sync(FULL, bits != 0);
        if (any) {
            const int first = __ffs(any) - 1;
            const unsigned b = __shfl_sync(FULL, bits, first);
            int q = w0 + base + first;
            if (q >= nwords) q -= nwords;
            return (q << 5) + __ffs(b) - 1;
        }
    }
    return -1;
}

// Pair k of the all-pairs enumeration (0 <= k < nw (nw - 1) / 2) as
// (lo, hi), lo < hi, with k = hi (hi - 1) / 2 + lo. (The host launches an
// all-pairs round only with fewer than 2^31 pairs, so k fits 32 bits.)
__device__ __forceinline__ void pair_of_index(unsigned k, int &lo, int &hi)
{
    unsigned long long h = (unsigned long long)((1.0 + sqrt(1.0 + 8.0 * (double)k)) * 0.5);
    while (h * (h - 1) / 2 > k) --h;      // (the square root may round up)
    while ((h + 1) * h / 2 <= k) ++h;     // (or down)
    hi = (int)h;
    lo = (int)(k - h * (h - 1) / 2);
}

// The leader's lane 0 stores pair (a, b)'s statistic for its candidate
// side(s), messages partial scores (threshold rounds) and counts the pair
// for each side; returns bit 1 (a) / bit 2 (b) for a side that this pair
// finished, whose score the calling warp must then finalize.
// DEFERRED (the PL_PEERS threshold rounds): the counts are not read back and
// nothing is returned; select_root finalizes the workers whose every pair is
// counted, after every device's workers have ended (the kernel boundary then
// orders the statistics before the counts). A pair thus waits for no
// system-scope fence and no count's round trip over the link: on device 0 as
// on the others, a system-scope fence per pair cost more than a link round
// trip (docs/design/multi_gpu.rst).
template <bool DEFERRED>
__device__ __forceinline__ int record_pair(PlSearch *s, int a, int b, double I, double e,
                                           double hu, double hv, bool messages)
{
    const size_t p = s->p;
    // (deferred: no count is compared, and on another device the load of nw
    // would be a link round trip per pair)
    const int nw = DEFERRED ? 0 : PL_SHARED(s->ctl->nw);
    if (s->use_float) s->stat_err[a * p + b] = e;
    if (s->kind[a] == PL_CANDIDATE && s->kind[b] == PL_CANDIDATE) {
        s->stat[a * p + b] = I;
        s->stat[b * p + a] = -I;
        if (!DEFERRED) PL_FENCE();  // results visible before anyone counts them
        if (messages) {
            message(s, a, b, I, e);
            message(s, b, a, -I, e);
        }
        if (DEFERRED) {
            PL_SYS(atomicAdd)(&s->ndone[a], 1);
            PL_SYS(atomicAdd)(&s->ndone[b], 1);
            return 0;
        }
        return (PL_SYS(atomicAdd)(&s->ndone[a], 1) + 1 == nw - 1) |
               ((PL_SYS(atomicAdd)(&s->ndone[b], 1) + 1 == nw - 1) << 1);
    }
    // prior knowledge: only the candidate's side counts
    const int w = s->kind[a] == PL_CANDIDATE ? a : b, t = a + b - w;
    const double v = partner_stat(s, w, t, I, hu, hv, s->hx);
    s->stat[w * p + t] = v;
    if (!DEFERRED) PL_FENCE();
    if (messages) message(s, w, t, v, e);
    if (DEFERRED) {
        PL_SYS(atomicAdd)(&s->ndone[w], 1);
        return 0;
    }
    if (PL_SYS(atomicAdd)(&s->ndone[w], 1) + 1 == nw - 1) return (w == a) ? 1 : 2;
    return 0;
}

// The comparison engines are groups of G = group_warps consecutive warps of
// a block (G = 1: every warp is one). Warp 0 of a group (its leader) finds
// work, claims pairs and messages results; all G warps compare the pair,
// each on its share of the samples, so a pair takes 1/G of the time and
// G times fewer pairs are in flight (less threshold overshoot) when n is
// large enough to keep every lane busy.
template <typename T>
__device__ void worker_body(PlSearch *s PL_GRID_PARAMS)
{
    __shared__ double gsum_all[WARPS * 6];  // per warp: its 6 partial sums
    __shared__ int gpair[WARPS][2];         // per group: the claimed pair (a = -2: leave)
    PlControl *c = s->ctl;
    if (ld_volatile(&c->done)) return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int G = (int)s->group_warps, g = warp % G, group = warp / G;
    const int bar = 1 + group;  // named barrier of the group (G > 1)
    double *gsum = gsum_all + 6 * (warp - g);
    const int nw = PL_SHARED(c->nw), n_active = PL_SHARED(c->n_active);
    const size_t p = s->p;
    const double stop = PL_SHARED(c->gamma) * (1.0 + PL_STOP_MARGIN);
    const unsigned busy = 2u * (unsigned)PL_SHARED(c->epoch);
    const int ordered = PL_SHARED(c->ordered);
    if (n_active <= 0) return;
    // Groups start spread over the active workers and stay on one until it is
    // out of work (score above gamma, or every partner claimed), then move
    // to the next live one.
    int pos = (PL_BLOCK * (blockDim.x >> 5) / G + group) % n_active;
    unsigned long long compared = 0;  // pairs this group compared (leader, lane 0)
    PL_ENGINE_CLOCK;
#if PL_KNOWN_WORKER
    int known = -1;   // position this engine stays on (warp-uniform), else -1
    int w_known = 0;  // its worker (lane 0)
#endif
#if defined(PL_PEERS) && PL_CLAIM_BATCH > 1
    // An engine claims up to PL_CLAIM_BATCH partners of its worker per trip
    // (over the link, on another device): one cursor step for all of them, their
    // locks taken at once by as many lanes; it then compares the pairs it
    // won before claiming again. Which worker's pairs are compared, and each
    // pair once, does not change; only how far past gamma a worker may go.
    // Where the last iteration gave each engine few pairs, a round is short
    // and its end waits for the engines still comparing the rest of their
    // batch: one partner per trip is then the faster (the first iteration
    // batches; docs/design/multi_gpu.rst, "Claim batches").
    const int it = PL_SHARED(c->iteration);
    const long long engines = (long long)PL_BLOCKS * ((blockDim.x >> 5) / G);
    const bool many = it == 0 || PL_SHARED(s->it_compared[it - 1]) >= PL_CLAIM_BATCH_MIN_PAIRS * engines;
    const int kb = ((PL_CLAIM_BATCH_ALL || pl_block0 > 0) && many) ? PL_CLAIM_BATCH : 1;
    unsigned q_mask = 0;       // the claimed pairs left to compare (leader warp)
    int q_lo = -1, q_hi = -1;  // lane j: the j-th claimed pair
#endif
    for (;;) {
        int a = -1, b = -1;
#if defined(PL_PEERS) && PL_CLAIM_BATCH > 1
        if (g == 0) {
            while (q_mask == 0) {  // find a live worker and claim its next partners
                if (pos != known) {
                    pos = next_live(s->live, n_active, pos);
                    if (pos < 0) { a = -2; break; }
                }
                int cur = nw, w = 0;
                if (lane == 0) {
                    if (pos != known) w_known = PL_SHARED(s->active[pos]);
                    w = w_known;
                    if (ld_volatile(&s->score[w]) <= stop) cur = atomicAdd_system(&s->cursor[w], kb);
                }
                cur = __shfl_sync(FULL, cur, 0);
                w = __shfl_sync(FULL, w, 0);
                const int move = cur >= nw - 1;
                if (move) {
                    if (lane == 0) atomicAnd_system(&s->live[pos >> 5], ~(1u << (pos & 31)));
                } else {
                    bool owned = false;
                    const int at = cur + lane;
                    if (lane < kb && at < nw - 1) {
                        int t;
                        if (ordered) {
                            t = PL_SHARED(s->partner[(size_t)w * p + at]);
                        } else {
                            t = w + 1 + at;
                            if (t >= nw) t -= nw;
                        }
                        q_lo = min(w, t);
                        q_hi = max(w, t);
                        // (else the partner holds the pair: its result arrives as a message)
                        owned = atomicMax_system(&s->lock[q_lo * p + q_hi], busy) < busy;
                    }
                    q_mask = __ballot_sync(FULL, owned);
                }
                known = move ? -1 : pos;
                if (move) pos = (pos + 1 == n_active) ? 0 : pos + 1;
            }
            if (a != -2) {  // the next claimed pair, in partner order
                const int j = __ffs(q_mask) - 1;
                a = __shfl_sync(FULL, q_lo, j);
                b = __shfl_sync(FULL, q_hi, j);
                q_mask &= q_mask - 1;
            }
            if (G > 1 && lane == 0) { gpair[group][0] = a; gpair[group][1] = b; }
        }
#else
        if (g == 0) {
            for (;;) {  // find a live worker and claim its next partner
#if PL_KNOWN_WORKER
                if (pos != known) {
                    pos = next_live(s->live, n_active, pos);
                    if (pos < 0) { a = -2; break; }
                }
#else
                pos = next_live(s->live, n_active, pos);
                if (pos < 0) { a = -2; break; }
#endif
                int move = 0;
                if (lane == 0) {
#if PL_KNOWN_WORKER
                    if (pos != known) w_known = PL_SHARED(s->active[pos]);
                    const int w = w_known;
#else
                    const int w = PL_SHARED(s->active[pos]);
#endif
                    int cur = nw;
                    if (ld_volatile(&s->score[w]) <= stop) cur = PL_SYS(atomicAdd)(&s->cursor[w], 1);
                    if (cur >= nw - 1) {
                        PL_SYS(atomicAnd)(&s->live[pos >> 5], ~(1u << (pos & 31)));  // out of work this round
                        move = 1;
                    } else {
                        int t;
                        if (ordered) {
                            t = PL_SHARED(s->partner[(size_t)w * p + cur]);  // by decreasing |correlation|
                        } else {
                            t = w + 1 + cur;  // cyclically from w + 1 (paper: C = [2..r, 1])
                            if (t >= nw) t -= nw;
                        }
                        const int lo = min(w, t), hi = max(w, t);
#if PL_LOCK_MAX
                        // one atomic: the pair is this engine's if its lock was
                        // below this iteration's mark (locks never exceed it)
                        if (PL_SYS(atomicMax)(&s->lock[lo * p + hi], busy) < busy) { a = lo; b = hi; }
#else
                        unsigned *lk = &s->lock[lo * p + hi];
                        const unsigned old = ld_volatile(lk);
                        if (old < busy && PL_SYS(atomicCAS)(lk, old, busy) == old) { a = lo; b = hi; }
#endif
                        // else the partner holds the pair: its result arrives as a message
                    }
                }
                move = __shfl_sync(FULL, move, 0);
                a = __shfl_sync(FULL, a, 0);
                b = __shfl_sync(FULL, b, 0);
#if PL_KNOWN_WORKER
                known = move ? -1 : pos;
#endif
                if (move) pos = (pos + 1 == n_active) ? 0 : pos + 1;
                else if (a >= 0) break;
            }
            if (G > 1 && lane == 0) { gpair[group][0] = a; gpair[group][1] = b; }
        }
#endif
        if (G > 1) {
            named_barrier(bar, 32 * G);
            a = gpair[group][0];
            b = gpair[group][1];
        }
        PL_LAP(0);
        if (a == -2) {
            if (g == 0 && lane == 0 && compared) PL_SYS(atomicAdd)(&c->compared, compared);
            if (g == 0 && lane == 0) PL_ENGINE_LEAVE(compared);
            return;
        }
        double I, e, hu, hv;
        compare_pair<T>(s, a, b, s->hx, g, G, bar, gsum, I, e, hu, hv);
        PL_LAP(1);
        if (g != 0) continue;  // the leader reports the pair
        int finished = 0;
        if (lane == 0) {
            finished = record_pair<PL_DEFER_FINALIZE>(s, a, b, I, e, hu, hv, true);
            ++compared;  // added to the iteration's count once, on leaving
        }
        PL_LAP(2);
        if (PL_DEFER_FINALIZE) continue;  // (select_root finalizes)
        finished = __shfl_sync(FULL, finished, 0);
        if (finished) PL_FENCE();
        if (finished & 1) finalize(s, a);
        if (finished & 2) finalize(s, b);
    }
}

// An all-pairs round (the all_pairs_* kernels, which the host launches where
// that round is the cheaper one: few or short pairs) has no threshold: group
// q of the grid's Q groups compares the candidates' pairs q, q + Q, q + 2Q,
// ... of the enumeration of pair_of_index (every warp of a group walks the
// same pairs, so nothing is broadcast), with no claims, locks or score
// messages, and every candidate finishes in this one round. Its scores are
// the same index-ordered sums (finalize), so the root is too.
template <typename T>
__device__ void all_pairs_body(PlSearch *s PL_GRID_PARAMS)
{
    __shared__ double gsum_all[WARPS * 6];  // per warp: its 6 partial sums
    PlControl *c = s->ctl;
    if (ld_volatile(&c->done) || PL_SHARED(c->n_active) <= 0) return;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int G = (int)s->group_warps, g = warp % G, group = warp / G;
    const int bar = 1 + group;  // named barrier of the group (G > 1)
    double *gsum = gsum_all + 6 * (warp - g);
    const int nw = PL_SHARED(c->nw);
    const unsigned n_pairs = (unsigned)((long long)nw * (nw - 1) / 2);
    const unsigned n_groups = PL_BLOCKS * ((blockDim.x >> 5) / G);
    unsigned long long compared = 0;  // pairs this group compared (leader, lane 0)
    for (unsigned k = PL_BLOCK * ((blockDim.x >> 5) / G) + group; k < n_pairs; k += n_groups) {
        int a, b;
        pair_of_index(k, a, b);
        if (s->kind[a] != PL_CANDIDATE && s->kind[b] != PL_CANDIDATE) continue;  // (prior knowledge)
        // The leader reads the group's partial sums of the last pair after
        // compare_pair's barrier: the others must not write this pair's yet.
        if (G > 1) named_barrier(bar, 32 * G);
        double I, e, hu, hv;
        compare_pair<T>(s, a, b, s->hx, g, G, bar, gsum, I, e, hu, hv);
        if (g != 0) continue;  // the leader reports the pair
        int finished = 0;
        if (lane == 0) {
            finished = record_pair<false>(s, a, b, I, e, hu, hv, false);
            ++compared;
        }
        finished = __shfl_sync(FULL, finished, 0);
        if (finished) PL_FENCE();
        if (finished & 1) finalize(s, a);
        if (finished & 2) finalize(s, b);
    }
    if (g == 0 && lane == 0 && compared) PL_SYS(atomicAdd)(&c->compared, compared);
    if (g == 0 && lane == 0) PL_ALL_PAIRS_STAT(compared);
}

__device__ void select_after_workers(PlSearch *s PL_GRID_PARAMS);

// (PL_PEERS: two more parameters, the first block's index among the worker
// blocks of every device and their number)
extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS) worker_f32(PlSearch *s PL_GRID_PARAMS)
{
    pl_enter();
    PL_LAUNCH_BEGIN();
    worker_body<float>(s PL_GRID_ARGS);
    PL_LAUNCH_END();
    select_after_workers(s PL_GRID_ARGS);
}
// (double comparisons need more registers: the compiler's choice)
extern "C" __global__ void __launch_bounds__(WARPS * 32) worker_f64(PlSearch *s PL_GRID_PARAMS)
{
    pl_enter();
    PL_LAUNCH_BEGIN();
    worker_body<double>(s PL_GRID_ARGS);
    PL_LAUNCH_END();
    select_after_workers(s PL_GRID_ARGS);
}
extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS) all_pairs_f32(PlSearch *s PL_GRID_PARAMS)
{
    pl_enter();
    all_pairs_body<float>(s PL_GRID_ARGS);
    select_after_workers(s PL_GRID_ARGS);
}
extern "C" __global__ void __launch_bounds__(WARPS * 32) all_pairs_f64(PlSearch *s PL_GRID_PARAMS)
{
    pl_enter();
    all_pairs_body<double>(s PL_GRID_ARGS);
    select_after_workers(s PL_GRID_ARGS);
}

// ---------------------------------------------------------------- root selection

// (value, index) minimum with ties to the lower index, over one block.
__device__ void block_argmin(double &v, int &i)
{
    __shared__ double sv[32];
    __shared__ int si[32];
    for (int off = 16; off > 0; off >>= 1) {
        const double ov = __shfl_xor_sync(FULL, v, off);
        const int oi = __shfl_xor_sync(FULL, i, off);
        if (ov < v || (ov == v && oi < i)) { v = ov; i = oi; }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) { sv[warp] = v; si[warp] = i; }
    __syncthreads();
    v = lane < nwarp ? sv[lane] : INFINITY;
    i = lane < nwarp ? si[lane] : 0x7fffffff;
    for (int off = 16; off > 0; off >>= 1) {
        const double ov = __shfl_xor_sync(FULL, v, off);
        const int oi = __shfl_xor_sync(FULL, i, off);
        if (ov < v || (ov == v && oi < i)) { v = ov; i = oi; }
    }
}

__device__ void publish(PlSearch *s)
{
    PlControl *c = s->ctl;
    PlStatus *st = s->status;
    st->state = c->done ? c->state : PL_RUNNING;
    st->iteration = c->iteration;
    st->r = c->r;
    st->nw = c->nw;
    st->n_cand = c->n_cand;
    st->root = (c->state == PL_DECIDED) ? c->root : -1;
    st->n_rederived = c->n_rederived;
    st->n_order = c->n_order;
    st->band_at = c->band_at;
    __threadfence_system();  // the fields reach the host before the sequence number
    c->seq += 1;
    *(volatile int *)&st->seq = c->seq;
    // No fence after this store: it would only hold the block (and so the
    // next kernel) until the host can see it; the store is not held back by
    // the block leaving, and the kernel's end flushes it at the latest.
}

__device__ void record_iteration(PlSearch *s, double score, int redo)
{
    PlControl *c = s->ctl;
    const int it = c->iteration;
    s->it_score[it] = score;
    s->it_gamma[it] = c->gamma;
    s->it_rounds[it] = c->rounds;
    s->it_compared[it] = (long long)PL_SHARED(c->compared);
    s->it_redo[it] = redo;
}

// After a round (1 block): the paper's scheduler (Alg. 4 with the GPU
// relaxation of Sec. 5.3). Publishes the status in every case.
//
// Float comparisons: a decided root is certified against every other worker
// whose score could be below it within the error bounds. Rivals that did not
// finish are settled in float first: gamma is raised past the root's upper
// bound plus their error and another round runs, so their partial scores
// grow (or they finish). Only finished rivals that stay too close are
// re-decided in double (PL_REDO).
__device__ void select_root_body(PlSearch *s)
{
    PlControl *c = s->ctl;
    __shared__ int s_done;
    if (threadIdx.x == 0) s_done = PL_SHARED(c->done);
    __syncthreads();
    if (s_done) {
        if (threadIdx.x == 0) publish(s);
        return;
    }
    const int nw = PL_SHARED(c->nw);
    const double gamma = PL_SHARED(c->gamma);
    // Finished workers (ordered scores) and the least partial score of the others.
    double best = INFINITY, min_unf = INFINITY;
    int best_w = 0x7fffffff, unf_w = 0x7fffffff;
    for (int w = threadIdx.x; w < nw; w += blockDim.x) {
        if (s->kind[w] != PL_CANDIDATE) continue;  // prior knowledge: never the root
        const double f = PL_SHARED(s->final_score[w]);
        if (f >= 0.0) {
            if (f < best) { best = f; best_w = w; }
        } else {
            const double sc = PL_SHARED(s->score[w]);
            if (sc < min_unf) { min_unf = sc; unf_w = w; }
        }
    }
    block_argmin(best, best_w);
    block_argmin(min_unf, unf_w);
    __shared__ int s_decide, s_unsettled;
    __shared__ double s_best, s_target;
    __shared__ unsigned long long s_max_err;
    if (threadIdx.x == 0) {
        c->rounds += 1;
        const bool any_fin = best_w != 0x7fffffff, any_unf = unf_w != 0x7fffffff;
        // Every unfinished worker stopped above gamma (or above min_unf): a
        // finished worker at or under either bound beats all of them.
        s_decide = any_fin && (best <= gamma || !any_unf || best < min_unf * (1.0 - PL_STOP_MARGIN));
        s_best = best;
        s_target = min_unf;  // a round must include the least unfinished worker
        s_unsettled = 0;
        s_max_err = 0ull;
    }
    __syncthreads();
    int n_cand = 1;
    if (s_decide && s->use_float) {
        // Certify: another worker is a candidate if its score could be at or
        // below the root's within the bounds (ties go to the lower index).
        const double upper = s_best + PL_SHARED(s->final_err[best_w]);
        int *flag = s->label, *pos = s->scratch;  // label: free once the groups are formed
        for (int w = threadIdx.x; w < nw; w += blockDim.x) {
            const double fs = PL_SHARED(s->final_score[w]);
            const bool fin = fs >= 0.0;
            const double lower = fin ? fs - PL_SHARED(s->final_err[w])
                                     : PL_SHARED(s->score[w]) - PL_SHARED(s->err[w]);
            flag[w] = (w == best_w) ||
                      (s->kind[w] == PL_CANDIDATE && (w < best_w ? lower <= upper : lower < upper));
            if (flag[w] && !fin) {
                atomicAdd(&s_unsettled, 1);
                atomicMax(&s_max_err, (unsigned long long)__double_as_longlong(PL_SHARED(s->err[w])));
            }
        }
        __syncthreads();
        n_cand = block_scan(flag, pos, nw);
        if (s_unsettled) {
            if (threadIdx.x == 0) {
                s_decide = 0;  // settle the unfinished rivals in float first
                s_target = (upper + __longlong_as_double((long long)s_max_err)) * (1.0 + 1e-6);
            }
        } else {
            for (int w = threadIdx.x; w < nw; w += blockDim.x)
                if (flag[w]) s->cand[pos[w]] = w;
        }
        __syncthreads();
    }
    if (s_decide) {
        if (threadIdx.x == 0) {
            c->done = 1;
            c->n_cand = n_cand;
            if (n_cand > 1) {
                c->state = PL_REDO;
                c->root = best_w;  // a worker: select64 decides
                record_iteration(s, s_best, n_cand);
            } else {
                c->state = PL_DECIDED;
                c->root = s->idx[best_w];
                record_iteration(s, s_best, 0);
            }
            publish(s);
        }
        return;
    }
    // Raise gamma by c until the target is under it; the unfinished workers
    // under gamma work next. No finite target means no candidate at all:
    // report it rather than loop.
    __shared__ double s_gamma;
    if (threadIdx.x == 0) {
        if (!(s_target < INFINITY)) {
            c->done = 1;
            c->state = PL_FAILED;
            publish(s);
        } else {
            double g = gamma;
            while (s_target > g) g *= s->c;
            c->gamma = g;
        }
        s_gamma = c->gamma;
    }
    __syncthreads();
    if (PL_SHARED(c->state) == PL_FAILED) return;
    const double next = s_gamma * (1.0 + PL_STOP_MARGIN);
    int *flag = s->scratch, *pos = s->label;
    for (int w = threadIdx.x; w < nw; w += blockDim.x)
        flag[w] = s->kind[w] == PL_CANDIDATE && PL_SHARED(s->final_score[w]) < 0.0 &&
                  PL_SHARED(s->score[w]) <= next;
    __syncthreads();
    const int n_active = block_scan(flag, pos, nw);
    for (int w = threadIdx.x; w < nw; w += blockDim.x)
        if (flag[w]) s->active[pos[w]] = w;
    set_live(s, n_active);
    __syncthreads();
    if (threadIdx.x == 0) {
        c->n_active = n_active;
        publish(s);
    }
}

#ifdef PL_PEERS
// The workers a threshold round finished, which its engines left to the
// selection (record_pair<true>; an all-pairs round's engines finalized
// theirs): block b takes workers b, b + gridDim.x, ..., a thread each
// lists those finished, then a warp each sums one. A round can finish
// hundreds of workers, and one block summing their rows alone was most of
// the selection's time at thousands of variables.
__device__ void finalize_finished(PlSearch *s)
{
    __shared__ int s_fin[1024];
    __shared__ int s_nfin;
    if (PL_SHARED(s->ctl->done)) return;  // (the selection only publishes)
    const int nw = PL_SHARED(s->ctl->nw);
    for (int t0 = 0; (int)blockIdx.x + (int)gridDim.x * t0 < nw; t0 += blockDim.x) {
        if (threadIdx.x == 0) s_nfin = 0;
        __syncthreads();
        const int w = (int)blockIdx.x + (int)gridDim.x * (t0 + (int)threadIdx.x);
        if (w < nw && nw > 1 && PL_SHARED(s->final_score[w]) < 0.0 &&
            PL_SHARED(s->ndone[w]) == nw - 1)
            s_fin[atomicAdd(&s_nfin, 1)] = w;
        __syncthreads();
        for (int k = threadIdx.x >> 5; k < s_nfin; k += blockDim.x >> 5)
            finalize_loaded(s, s_fin[k]);
        __syncthreads();
    }
}
#endif

// The same, as a kernel of its own: tools/profile_launch.py's launch and
// poll round trip (one block), and every round of a search over several
// devices (PL_PEERS; on one device the search runs it at the end of the
// worker kernel). With PL_PEERS the grid's blocks first finalize the
// round's finished workers, and the last block to finish selects (the
// worker kernels' counter, which they leave alone there).
extern "C" __global__ void __launch_bounds__(1024) select_root(PlSearch *s)
{
    pl_enter();
#ifdef PL_PEERS
    finalize_finished(s);
    if (!last_block_done(&s->ctl->workers_done)) return;
#endif
    select_root_body(s);
}

// The end of a worker kernel: the last block to finish selects the root, so
// a round is one kernel (one start and one drain fewer than a select_root
// launch). Every warp of the block must have left the comparisons.
__device__ void select_after_workers(PlSearch *s PL_GRID_PARAMS)
{
#ifndef PL_PEERS
    if (last_block_done(&s->ctl->workers_done)) select_root_body(s);
#endif
    // (PL_PEERS: device 0 launches select_root once every device's workers
    // have finished, so that the selection, and the finalizing of the
    // workers a threshold round finished, read the round's state in its own
    // memory rather than over the link from whichever block ends last)
}

// ---------------------------------------------------------------- re-deciding in double

// Whether candidate x's pair with partner j needs its statistic in double.
// A pair the float round(s) compared (its lock taken in this iteration, or
// an all-pairs round) with I~ >= e (its error bound) needs no double value:
// I >= 0 then, and it adds nothing to the score in either precision.
__device__ __forceinline__ bool needs_double(const PlSearch *s, const PlControl *c, int x, int j)
{
    const size_t p = s->p;
    const int lo = min(x, j), hi = max(x, j);
    const bool compared = c->all_pairs || ld_volatile(&s->lock[lo * p + hi]) == 2u * (unsigned)c->epoch;
    return !(j != x && compared && s->stat[x * p + j] >= s->stat_err[lo * p + hi]);
}

// I(x, j) as seen from x from the double sums t of the residuals of the
// pair's lower worker on the higher (t[0..2]) and of the higher on the
// lower (t[3..5]).
__device__ __forceinline__ double stat_from_sums64(const PlSearch *s, int x, int j, const double *t)
{
    const int lo = min(x, j), hi = max(x, j), n = (int)s->n;
    // I(lo, hi) = H(x_hi) + H(r_lo^(hi)) - H(x_lo) - H(r_hi^(lo))
    const double hu = entropy_of((t[0] + t[1]) / n - PL_LN2, t[2] / n);
    const double hv = entropy_of((t[3] + t[4]) / n - PL_LN2, t[5] / n);
    const double I = (s->hx64[hi] + hu) - (s->hx64[lo] + hv);
    return partner_stat(s, x, j, I, hu, hv, s->hx64);
}

// Whether the pair has a statistic to compute (not x itself, nor a
// collinear partner: I = 0), and its correlation.
__device__ __forceinline__ bool pair_rho64(const PlSearch *s, int x, int j, double &rho)
{
    const size_t p = s->p;
    const int lo = min(x, j), hi = max(x, j);
    rho = s->cov[(size_t)s->idx[lo] * p + s->idx[hi]];
    return j != x && !is_collinear(rho);
}

// Where chunk z of pair slot (candidate k, partner j) keeps its six sums:
// upd_part, free between one update and the next.
__device__ __forceinline__ double *chunk_sums64(const PlSearch *s, int k, int j, int nw, int z, int S)
{
    return s->upd_part + (((size_t)k * nw + j) * S + z) * 6;
}

// Candidate cand[k] against partner blockIdx.x: I in double, by one block
// per pair (see entropy64), or by S = gridDim.y / n_cand blocks a pair
// (the scheduler's redo_chunks; blockIdx.y = k S + chunk), each summing a
// chunk of the samples into upd_part for select64 to add up. Blocks of
// pairs that need no double value (needs_double) leave the float one.
// (PL_PEERS: the partners are shared among the devices, partner
// pl_block0 + blockIdx.x here; every device reads its own data and double
// entropies and writes the statistic, or its chunk sums, into device 0's
// stat or upd_part.)
extern "C" __global__ void __launch_bounds__(256) pairs64(PlSearch *s PL_GRID_PARAMS)
{
    pl_enter();
    __shared__ double sh[32 * 6];
    PlControl *c = s->ctl;
    const int n_cand = c->n_cand, S = max(1, (int)gridDim.y / max(1, n_cand));
    const int k = blockIdx.y / S, z = blockIdx.y % S, j = PL_BLOCK;
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
        c->redo_chunks = S;  // (every device: the same S)
#ifdef PL_PEERS
        __threadfence_system();  // (for device 0's select64, as the statistics below)
#endif
    }
    if (k >= n_cand || j >= c->nw) return;
    const int x = s->cand[k];
    if (!needs_double(s, c, x, j)) return;
    const size_t p = s->p, ld = s->ld;
    const int lo = min(x, j), hi = max(x, j), n = (int)s->n;
    double rho;
    if (!pair_rho64(s, x, j, rho)) {
        if (S == 1 && threadIdx.x == 0) {
            s->stat[x * p + j] = 0.0;
#ifdef PL_PEERS
            __threadfence_system();
#endif
        }
        return;
    }
    // (a count for the benchmarks' double floor: benchmarks/bench_pipeline.py)
    if (z == 0 && threadIdx.x == 0) atomicAdd((unsigned long long *)&s->it_pairs64[c->iteration], 1ull);
    const int per = (n + S - 1) / S, q0 = z * per, q1 = min(n, q0 + per);
    // (rho^2 rounded on its own, not fused into the subtraction: the bits of
    // the residuals before the chunks, when is_collinear shared the product)
    const double inv_s = 1.0 / sqrt(1.0 - __dmul_rn(rho, rho));
    const double *xa = s->X64 + (size_t)s->idx[lo] * ld, *xb = s->X64 + (size_t)s->idx[hi] * ld;
    PlSums64 u, v;
    for (int q = q0 + threadIdx.x; q < q1; q += blockDim.x) {
        const double va = xa[q], vb = xb[q];
        u.add((va - rho * vb) * inv_s);
        v.add((vb - rho * va) * inv_s);
    }
    u.flush();
    v.flush();
    double t[6] = {u.a, u.l, u.g, v.a, v.l, v.g};
    block_sums(t, sh);
    // stat rows of candidates are overwritten: this iteration's float
    // results are no longer needed.
    if (threadIdx.x == 0) {
        if (S == 1) {
            s->stat[x * p + j] = stat_from_sums64(s, x, j, t);
        } else {
            double *out = chunk_sums64(s, k, j, c->nw, z, S);
#pragma unroll
            for (int i = 0; i < 6; ++i) out[i] = t[i];
        }
    }
#ifdef PL_PEERS
    // (another device's statistic or sums, for device 0's select64: ordered
    // before the kernel's end at system scope)
    if (threadIdx.x == 0) __threadfence_system();
#endif
}

// The statistics of pairs64's chunked pairs: each pair's chunk sums added
// in chunk order, a thread a pair (the block's threads then read them).
__device__ void finish_chunked_pairs(PlSearch *s, const PlControl *c, int S)
{
    const int n_cand = c->n_cand, nw = c->nw;
    const size_t p = s->p;
    for (int q = threadIdx.x; q < n_cand * nw; q += blockDim.x) {
        const int k = q / nw, j = q % nw, x = s->cand[k];
        if (!needs_double(s, c, x, j)) continue;
        double I = 0.0, rho;
        if (pair_rho64(s, x, j, rho)) {
            double t[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
            for (int z = 0; z < S; ++z) {
                const double *part = chunk_sums64(s, k, j, nw, z, S);
#pragma unroll
                for (int i = 0; i < 6; ++i) t[i] += part[i];
            }
            I = stat_from_sums64(s, x, j, t);
        }
        s->stat[x * p + j] = I;
    }
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(1024) select64(PlSearch *s)
{
    pl_enter();
    PlControl *c = s->ctl;
    const int n_cand = c->n_cand, nw = c->nw, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t p = s->p;
    if (c->redo_chunks > 1) finish_chunked_pairs(s, c, c->redo_chunks);
    __shared__ double total[1024 / 32];
    double best = INFINITY;
    int best_k = 0x7fffffff;
    for (int k0 = 0; k0 < n_cand; k0 += blockDim.x >> 5) {
        const int k = k0 + warp;
        double S = 0.0;
        if (k < n_cand) {
            const int x = s->cand[k];
            for (int j = lane; j < nw; j += 32) {
                const double v = s->stat[x * p + j];
                if (j != x && v < 0.0) S += s->weight[j] * v * v;
            }
        }
        S = pl_warp_sum(S);
        __syncthreads();
        if (lane == 0) total[warp] = k < n_cand ? S : INFINITY;
        __syncthreads();
        if (threadIdx.x == 0)
            for (int q = 0; q < (int)(blockDim.x >> 5) && k0 + q < n_cand; ++q)
                if (total[q] < best) { best = total[q]; best_k = k0 + q; }  // candidates ascending: ties to the first
    }
    if (threadIdx.x == 0) {
        c->root = s->idx[s->cand[best_k]];
        c->state = PL_DECIDED;
        // Report the root's float score, as for a certified root: every
        // candidate is a finished worker, so it exists and is an index-ordered
        // sum of deterministic terms; the scores do not depend on whether
        // timing led to a re-decision.
        s->it_score[c->iteration] = s->final_score[s->cand[best_k]];
    }
}

#ifdef PL_PEERS
// Device 0's buffers to the other devices' (PlCopies): each block's threads
// store a stride of words of job blockIdx.y into the peer's memory: on the
// critical path of every round, where a copy engine's peer copy arrives
// later than a kernel's stores (docs/design/multi_gpu.rst, "The replicas'
// copies").
extern "C" __global__ void __launch_bounds__(PL_COPY_THREADS) copy_to_peers(const PlCopies jobs)
{
    pl_enter();
    const int j = blockIdx.y;
    if (j >= jobs.n) return;
    const unsigned *src = (const unsigned *)jobs.src[j];
    unsigned *dst = (unsigned *)jobs.dst[j];
    const long long words = jobs.words[j];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < words;
         i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
#endif

// ---------------------------------------------------------------- UpdateData and UpdateCovMat

// UpdateData (Alg. 5) regresses the root out of every remaining row, in
// double and float; detects a fully explained variable; measures the drift
// max(|mean|, |var - 1|, |corr(x, root)|) of the updated row; and with float
// comparisons computes the entropy moments of the new float row, for
// setup_f32, and of long rows the double entropy, for a re-decision
// (hx64_in_update). Rows of fewer than PL_UPDATE_SPLIT_MIN_N samples take
// one block each (update_data*, regress_root_out); longer rows are split
// into chunks of PL_UPDATE_CHUNK samples over three kernels (update_sums,
// update_rows*, update_finish). The pieces below are their shared
// arithmetic.
//
// The rows are 16-byte aligned (the row stride is a multiple of 32), so
// both passes move two samples per load and store; the loops are unrolled
// to keep several loads in flight: the passes are bound by memory.

// This thread's share (stride blockDim.x) of the sums {a, b, ab, aa, bb} of
// row x2 (a) against the root's row xr2 (b) over the sample pairs
// q0 <= q < q1; with `cache`, each pair of the row is stored there too.
__device__ __forceinline__ void add_root_sums(const double2 *x2, const double2 *__restrict__ xr2,
                                              int q0, int q1, double2 *cache, double sum[5])
{
#pragma unroll 4
    for (int q = q0 + threadIdx.x; q < q1; q += blockDim.x) {
        const double2 a = x2[q], b = __ldg(xr2 + q);
        if (cache) cache[q] = a;
        sum[0] += a.x + a.y; sum[1] += b.x + b.y; sum[2] += a.x * b.x + a.y * b.y;
        sum[3] += a.x * a.x + a.y * a.y; sum[4] += b.x * b.x + b.y * b.y;
    }
}

// The odd last sample of an odd n in the sums above (the calling thread).
__device__ __forceinline__ void add_root_sums_tail(const double *x, const double *xr, int n,
                                                   double sum[5])
{
    const double a = x[n - 1], b = xr[n - 1];
    sum[0] += a; sum[1] += b; sum[2] += a * b; sum[3] += a * a; sum[4] += b * b;
}

// Block sums of one row's regression: {v, v^2, v y} and the float (and, H64,
// double) entropy series sums of the new values v.
template <bool H64>
using RegressSums = double[H64 ? 9 : 6];

// Row x's new values v = (a - rho y) / sqrt(f) (inv_s = 1 / sqrt(f), y the
// root's row xr) over the sample pairs q0 <= q < q1, and with `tail` the
// odd last sample n - 1, written to the row (x) and its float copy (x32),
// and their block sums t (every thread gets them). src2: where the old
// values are read (the row, or the block's cache of it).
template <bool H64>
__device__ void regress_pairs(double *x, float *x32, const double *xr, const double2 *src2, int q0,
                              int q1, bool tail, int n, double rho, double inv_s, bool want_h,
                              RegressSums<H64> &t, double *sh)
{
    const double2 *xr2 = reinterpret_cast<const double2 *>(xr);
    PlSeriesSums h;
    PlSums64 hd;  // (H64) the double entropy of the new row
    double mom[3] = {0.0, 0.0, 0.0};  // v, v^2, v y
    double2 *w2 = reinterpret_cast<double2 *>(x);
    float2 *w32 = reinterpret_cast<float2 *>(x32);
    // Each thread loads its next pair before it computes and stores this
    // one: the stores go to the row, where src2 may point too, so the
    // compiler would not move a load above them itself, and a thread would
    // otherwise have one pair's loads in flight at a time.
    const int stride = blockDim.x;
    int q = q0 + threadIdx.x;
    double2 a_next = make_double2(0.0, 0.0), y_next = make_double2(0.0, 0.0);
    if (q < q1) { a_next = src2[q]; y_next = __ldg(xr2 + q); }
    for (; q < q1; q += stride) {
        const double2 a = a_next, y = y_next;
        if (q + stride < q1) { a_next = src2[q + stride]; y_next = __ldg(xr2 + q + stride); }
        const double2 v = make_double2((a.x - rho * y.x) * inv_s, (a.y - rho * y.y) * inv_s);
        const float2 v32 = make_float2((float)v.x, (float)v.y);
        w2[q] = v;
        w32[q] = v32;
        mom[0] += v.x + v.y; mom[1] += v.x * v.x + v.y * v.y; mom[2] += v.x * y.x + v.y * y.y;
        if (want_h) { h.add(v32.x); h.add(v32.y); }
        if (H64) { hd.add(v.x); hd.add(v.y); }
    }
    if (tail && threadIdx.x == 0) {
        const double y = xr[n - 1], v = (x[n - 1] - rho * y) * inv_s;
        x[n - 1] = v;
        x32[n - 1] = (float)v;
        mom[0] += v; mom[1] += v * v; mom[2] += v * y;
        if (want_h) h.add((float)v);
        if (H64) hd.add(v);
    }
    h.flush();
    hd.flush();
    t[0] = mom[0]; t[1] = mom[1]; t[2] = mom[2];
    t[3] = h.a.value(); t[4] = h.l.value(); t[5] = h.g.value();
    if constexpr (H64) {
        t[6] = hd.a;
        t[7] = hd.l;
        t[8] = hd.g;
    }
    block_sums(t, sh);
}

// Thread 0's record of regressed variable i from its sums t: its
// remaining-variance fraction fr, rounding noise, the drift, and the
// entropies of its new row. eps_drift: DBL_EPSILON / f, where the
// covariance update divides this row's entries (rounding ~eps) by sqrt(f),
// which counts as drift (the CPU's update_row).
template <bool H64>
__device__ void record_regressed(PlSearch *s, int i, double fr, double noise_after,
                                 double eps_drift, const RegressSums<H64> &t)
{
    const int n = (int)s->n;
    s->frac[i] = fr;
    s->noise[i] = noise_after;
    const double mean = t[0] / n, var = t[1] / n - mean * mean, corr = t[2] / n;
    const double drift = fmax(fmax(fabs(mean), fmax(fabs(var - 1.0), fabs(corr))), eps_drift);
    atomicMax(&s->ctl->drift_bits, (unsigned long long)__double_as_longlong(drift));
    if (s->use_float) {
        double m[2];
        pl_series_moments_of(t + 3, n, m);
        s->hx_var[i] = entropy_of(m[0], m[1]);
        s->hx_var_err[i] = entropy_bound(m[0], m[1], s->moment_err);
    }
    if constexpr (H64) s->hx64_var[i] = entropy_of((t[6] + t[7]) / n - PL_LN2, t[8] / n);
}

// Thread 0 stores rho, variable i's correlation with the root, in both
// of their entries of cov (p: s->p; regress_root_out reads it before its
// passes, so that the load is off its tail).
__device__ __forceinline__ void store_root_corr(PlSearch *s, size_t p, int i, int root, double rho)
{
    if (threadIdx.x == 0) {
        s->cov[(size_t)i * p + root] = rho;
        s->cov[(size_t)root * p + i] = rho;
    }
}

// Whether variable i, with remaining-variance fraction f after the root's
// regression, is fully explained (dependent); if so thread 0 marks it gone
// with its fraction, and its row is not regressed. tol: explained_tol.
// Block-uniform.
__device__ __forceinline__ bool mark_if_explained(PlSearch *s, int i, double f, double frac_i,
                                                  double tol, double noise)
{
    if (!dependent(f, frac_i, tol, noise)) return false;
    if (threadIdx.x == 0) { s->frac[i] = frac_i * f; s->gone[i] = 1; }
    return true;
}

// Regress the root out of the row at position k: one block, the whole row.
template <bool H64>
__device__ void regress_root_out(PlSearch *s, int k, double *sh)
{
    PlControl *c = s->ctl;
    const int root = c->root, i = s->alive[k];
    if (i == root) return;
    const size_t p = s->p, ld = s->ld;
    const int n = (int)s->n, n2 = n >> 1;
    double *x = s->X64 + i * ld;
    float *x32 = s->X32 + i * ld;
    const double *xr = s->X64 + (size_t)root * ld;
    // The correlation with the root from the data (see verify_band), which
    // UpdateCovMat then uses too. When the host gave the block shared memory
    // for the row, the update reads it from there: the row is read from
    // global memory once (rows can exceed the L2 cache: p=1000, n=8192 is
    // 65 MB of them).
    double2 *xs2 = reinterpret_cast<double2 *>(pl_dyn_smem);
    const bool cached = (size_t)n * sizeof(double) <= dynamic_smem_bytes();
    // The row's state, read before the first pass so that these loads
    // overlap its loads: after block_sums' barrier they would be a chain of
    // dependent global loads on every block's path (short rows: about a
    // tenth of the kernel). Only this block writes frac[i] and noise[i],
    // after the passes; no block writes the root's.
    const double frac_i = s->frac[i], noise_i = s->noise[i], noise_root = s->noise[root];
    const double band = verify_band(s), tol = s->explained_tol;
    double sum[5] = {0.0, 0.0, 0.0, 0.0, 0.0};  // a, b, ab, aa, bb
    add_root_sums(reinterpret_cast<const double2 *>(x), reinterpret_cast<const double2 *>(xr), 0,
                  n2, cached ? xs2 : nullptr, sum);
    if ((n & 1) && threadIdx.x == 0) add_root_sums_tail(x, xr, n, sum);  // odd n: the last sample
    block_sums(sum, sh);  // every thread gets the same sums
    const double rho = corr_from_sums(sum[0], sum[1], sum[2], sum[3], sum[4], n);
    store_root_corr(s, p, i, root, rho);
    double f = fmax(0.0, 1.0 - rho * rho);
    if (f <= band) {  // 1 - rho^2 is too coarse here: measure it (block-uniform)
        const double ma = sum[0] / n, mb = sum[1] / n;
        double cs[3] = {0.0, 0.0, 0.0};  // ab, aa, bb (centred)
        for (int q = threadIdx.x; q < n; q += blockDim.x) {
            const double a = x[q] - ma, b = xr[q] - mb;
            cs[0] += a * b; cs[1] += a * a; cs[2] += b * b;
        }
        block_sums(cs, sh);
        if (!(cs[1] > 0.0)) {
            f = 0.0;
        } else if (!(cs[2] > 0.0)) {
            f = 1.0;
        } else {
            const double beta = cs[0] / cs[2];
            double see[1] = {0.0};
            for (int q = threadIdx.x; q < n; q += blockDim.x) {
                const double e = (x[q] - ma) - beta * (xr[q] - mb);
                see[0] += e * e;
            }
            block_sums(see, sh);
            f = see[0] / cs[1];
        }
    }
    const double noise = noise_i + noise_root + PL_STEP_NOISE;
    if (mark_if_explained(s, i, f, frac_i, tol, noise)) return;
    // thread 0's last values, computed here so that their divisions overlap
    // the pass below instead of lengthening every block's tail
    const double noise_after = noise / sqrt(f), eps_drift = DBL_EPSILON / f;
    RegressSums<H64> t;
    regress_pairs<H64>(x, x32, xr, cached ? xs2 : reinterpret_cast<const double2 *>(x), 0, n2,
                       n & 1, n, rho, 1.0 / sqrt(f), s->use_float, t, sh);
    if (threadIdx.x == 0) record_regressed<H64>(s, i, frac_i * f, noise_after, eps_drift, t);
}

__device__ __forceinline__ bool drifted(const PlSearch *s)
{
    return ld_volatile(&s->ctl->drift_bits) > (unsigned long long)__double_as_longlong(s->drift_tol);
}

// The update algebra (Alg. 6) on the 16 x 16 tile of remaining positions at
// rows bi, columns bj, the calling thread at (ty, tx) in it: the correlation
// of the updated rows k < j from their correlations with the root, or from
// the data within the verify band; and the collinear scan. Every thread of
// the block calls it: update_cov a tile per block, update_data_fused the
// tiles one after another.
__device__ __forceinline__ void update_cov_tile_at(PlSearch *s, int r, int root, int bi, int bj,
                                                   int ty, int tx, BandPairs &band)
{
    if (tx == 0 && ty == 0) band.count = 0;
    __syncthreads();
    const int k = bi + ty, j = bj + tx;
    if (ty < 16 && k < r && j < r && j > k) {
        const int ia = s->alive[k], ib = s->alive[j];
        if (ia != root && ib != root && !s->gone[ia] && !s->gone[ib]) {
            const size_t p = s->p;
            // the root's row and column are only read: no write races with them
            const double ra = s->cov[ia * p + root], rb = s->cov[ib * p + root];
            const double v = (s->cov[ia * p + ib] - ra * rb) / sqrt((1.0 - ra * ra) * (1.0 - rb * rb));
            if (1.0 - v * v <= verify_band(s)) band_add(band, ia, ib);  // decide it on the data
            else store_corr(s, ia, ib, v);
        }
    }
    band_resolve(s, band);
}

// update_cov's work by one block of 256 threads (update_data_fused's last
// block, PL_FUSED_COV_MAX_R): its tiles one after another, with the same
// arithmetic per pair, so the same values. Its shared buffers take the
// dynamic shared memory (PL_FUSED_COV_SMEM bytes at least), which the
// block's own row no longer needs.
constexpr unsigned PL_FUSED_BAND_BYTES = (sizeof(BandPairs) + 15) / 16 * 16;
static_assert(PL_FUSED_BAND_BYTES + 2 * 16 * 17 * sizeof(double) <= PL_FUSED_COV_SMEM,
              "update_data_fused's shared buffers exceed PL_FUSED_COV_SMEM");

__device__ void update_cov_by_block(PlSearch *s, int r, int root, bool drift)
{
    BandPairs &band = *reinterpret_cast<BandPairs *>(pl_dyn_smem);
    double (*ta)[17] = reinterpret_cast<double (*)[17]>(pl_dyn_smem + PL_FUSED_BAND_BYTES);
    double (*tb)[17] = ta + 16;
    const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
    const int tiles = (r + 15) / 16;
    for (int ti = 0; ti < tiles; ++ti) {
        for (int tj = ti; tj < tiles; ++tj) {  // (the kernels skip the lower tiles)
            __syncthreads();  // the previous tile's band pairs are resolved
            if (drift) covariance_tile_at(s, r, root, ti * 16, tj * 16, ty, tx, ta, tb, band);
            else update_cov_tile_at(s, r, root, ti * 16, tj * 16, ty, tx, band);
        }
    }
}

// After an update (the last block of its last kernel, all rows written): if
// any updated row drifted, re-standardise every remaining row from its data
// (rare; one block is enough, and no launch is spent on the common case),
// with their float entropies and, where hx64_in_update holds, their double
// ones. Returns whether it did.
__device__ bool restandardise_if_drifted(PlSearch *s, int r)
{
    PlControl *c = s->ctl;
    if (!drifted(s)) return false;
    if (threadIdx.x == 0) c->n_rederived += 1;
    for (int k = 0; k < r; ++k) {
        const int i = s->alive[k];
        if (i == c->root || ld_volatile(&s->gone[i])) continue;
        standardise_variable(s, i);
    }
    return true;
}

// One block per remaining position (grid: at least r blocks): UpdateData of
// rows shorter than PL_UPDATE_SPLIT_MIN_N. The last block to finish checks
// the drift. FUSED (update_data_fused): the last block then also does
// update_cov's work (update_cov_by_block), and the host launches no
// update_cov.
template <bool H64, bool FUSED>
__device__ void update_data_body(PlSearch *s)
{
    __shared__ double sh[32 * (H64 ? 9 : 6)];  // regress_root_out's block sums
    PlControl *c = s->ctl;
    if (c->state != PL_DECIDED) return;
    const int r = c->r;
    if (blockIdx.x < r) regress_root_out<H64>(s, blockIdx.x, sh);
    if (!last_block_done(&c->blocks_done)) return;
    const bool drift = restandardise_if_drifted(s, r);
    if constexpr (FUSED) update_cov_by_block(s, r, c->root, drift);
}

// Two kernels, so that the double sums' registers do not cut the occupancy
// of the update that caches its (shorter) rows: the host launches
// update_data_h64 where hx64_in_update holds (_scheduler.update_data_kernel).
// And update_data_fused, with the covariance update, where few variables
// remain (_scheduler.update_plan): a kernel boundary costs more than the
// update of a few tiles.
extern "C" __global__ void update_data(PlSearch *s) { pl_enter(); update_data_body<false, false>(s); }
extern "C" __global__ void update_data_h64(PlSearch *s) { pl_enter(); update_data_body<true, false>(s); }
extern "C" __global__ void update_data_fused(PlSearch *s) { pl_enter(); update_data_body<false, true>(s); }

// Rows of PL_UPDATE_SPLIT_MIN_N samples and more, in chunks of
// PL_UPDATE_CHUNK samples: a grid of (positions, chunks) blocks, so that
// every multiprocessor streams rows however few remain. One block per row
// of half a million samples left most multiprocessors idle: a few hundred
// rows, each streamed by one block, in one or two waves. The kernels:
//
//   update_sums    each chunk's sums against the root, into upd_part
//   update_rows    each block adds its row's chunk sums in chunk order (every
//                  block of the row alike, so they agree on rho) and
//                  regresses its chunk; its block sums into upd_part
//   update_finish  one block per row: rho again from the same sums, the
//                  covariance entries, a fully explained variable, the
//                  record from the chunks' sums; a row whose 1 - rho^2 falls
//                  in the verify band (update_rows left it) is measured and
//                  regressed there by the one-block path (regress_root_out).
//                  Its last block checks the drift.
//
// upd_part holds PL_UPDATE_PARTS doubles per chunk of each position: the 5
// sums against the root, then update_rows' block sums.

__device__ __forceinline__ int update_chunks(const PlSearch *s)
{
    return (int)((s->n + PL_UPDATE_CHUNK - 1) / PL_UPDATE_CHUNK);
}

__device__ __forceinline__ double *update_part(const PlSearch *s, int k, int chunk)
{
    return s->upd_part + ((size_t)k * update_chunks(s) + chunk) * PL_UPDATE_PARTS;
}

// Position k's chunk sums at offset `at` of each chunk's part, added in one
// fixed order (the block's threads over the chunks, then block_sums): every
// block of 256 threads that calls it gets the same totals.
template <int N>
__device__ void add_chunk_parts(const PlSearch *s, int k, int at, double (&v)[N], double *sh)
{
    const int chunks = update_chunks(s);
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = 0.0;
    for (int chunk = threadIdx.x; chunk < chunks; chunk += blockDim.x) {
        const double *part = update_part(s, k, chunk) + at;
#pragma unroll
        for (int j = 0; j < N; ++j) v[j] += part[j];
    }
    block_sums(v, sh);
}

// The sample pairs [q0, q1) of chunk `chunk`, and whether it ends with an odd n's last sample.
__device__ __forceinline__ void chunk_range(const PlSearch *s, int chunk, int &q0, int &q1, bool &tail)
{
    const int n = (int)s->n;
    q0 = chunk * (PL_UPDATE_CHUNK / 2);
    q1 = min(n >> 1, q0 + PL_UPDATE_CHUNK / 2);
    tail = (n & 1) && chunk == update_chunks(s) - 1;
}

// The row a block of update_sums or update_rows works on: position k's
// variable i and the root, once a root is decided; false where the block
// has no row (k beyond the remaining positions, or the root's own).
__device__ __forceinline__ bool chunk_block_row(const PlSearch *s, int k, int &root, int &i)
{
    const PlControl *c = s->ctl;
    if (c->state != PL_DECIDED || k >= c->r) return false;
    root = c->root;
    i = s->alive[k];
    return i != root;
}

extern "C" __global__ void update_sums(PlSearch *s)
{
    pl_enter();
    __shared__ double sh[32 * 5];
    const int k = blockIdx.x, chunk = blockIdx.y;
    int root, i;
    if (!chunk_block_row(s, k, root, i)) return;
    const size_t ld = s->ld;
    const double *x = s->X64 + i * ld, *xr = s->X64 + (size_t)root * ld;
    int q0, q1;
    bool tail;
    chunk_range(s, chunk, q0, q1, tail);
    double sum[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
    add_root_sums(reinterpret_cast<const double2 *>(x), reinterpret_cast<const double2 *>(xr), q0,
                  q1, nullptr, sum);
    if (tail && threadIdx.x == 0) add_root_sums_tail(x, xr, (int)s->n, sum);
    block_sums(sum, sh);
    if (threadIdx.x == 0) {
        double *part = update_part(s, k, chunk);
#pragma unroll
        for (int j = 0; j < 5; ++j) part[j] = sum[j];
    }
}

// Position k's correlation with the root from its chunks' sums.
__device__ double chunked_rho(const PlSearch *s, int k, double *sh)
{
    double sum[5];
    add_chunk_parts(s, k, 0, sum, sh);
    return corr_from_sums(sum[0], sum[1], sum[2], sum[3], sum[4], (int)s->n);
}

template <bool H64>
__device__ void update_rows_body(PlSearch *s)
{
    __shared__ double sh[32 * (H64 ? 9 : 6)];
    const int k = blockIdx.x, chunk = blockIdx.y;
    int root, i;
    if (!chunk_block_row(s, k, root, i)) return;
    const double frac_i = s->frac[i], noise = s->noise[i] + s->noise[root] + PL_STEP_NOISE;
    const double rho = chunked_rho(s, k, sh);
    const double f = fmax(0.0, 1.0 - rho * rho);
    // the verify band: update_finish measures f on the whole row; explained: no new row
    if (f <= verify_band(s) || dependent(f, frac_i, s->explained_tol, noise)) return;
    const size_t ld = s->ld;
    double *x = s->X64 + i * ld;
    int q0, q1;
    bool tail;
    chunk_range(s, chunk, q0, q1, tail);
    RegressSums<H64> t;
    regress_pairs<H64>(x, s->X32 + i * ld, s->X64 + (size_t)root * ld,
                       reinterpret_cast<const double2 *>(x), q0, q1, tail, (int)s->n, rho,
                       1.0 / sqrt(f), s->use_float, t, sh);
    if (threadIdx.x == 0) {
        double *part = update_part(s, k, chunk) + 5;
#pragma unroll
        for (int j = 0; j < (H64 ? 9 : 6); ++j) part[j] = t[j];
    }
}

extern "C" __global__ void update_rows(PlSearch *s) { pl_enter(); update_rows_body<false>(s); }
extern "C" __global__ void update_rows_h64(PlSearch *s) { pl_enter(); update_rows_body<true>(s); }

template <bool H64>
__device__ void finish_chunked_row(PlSearch *s, int k, double *sh)
{
    PlControl *c = s->ctl;
    const int root = c->root, i = s->alive[k];
    if (i == root) return;
    const double rho = chunked_rho(s, k, sh);
    const double f = fmax(0.0, 1.0 - rho * rho);
    if (f <= verify_band(s)) {  // update_rows left the row: the one-block path measures f
        regress_root_out<H64>(s, k, sh);
        return;
    }
    const double frac_i = s->frac[i], noise = s->noise[i] + s->noise[root] + PL_STEP_NOISE;
    store_root_corr(s, s->p, i, root, rho);
    if (mark_if_explained(s, i, f, frac_i, s->explained_tol, noise)) return;
    RegressSums<H64> t;
    add_chunk_parts(s, k, 5, t, sh);
    if (threadIdx.x == 0)
        record_regressed<H64>(s, i, frac_i * f, noise / sqrt(f), DBL_EPSILON / f, t);
}

// One block per remaining position (grid: at least r blocks).
extern "C" __global__ void update_finish(PlSearch *s)
{
    pl_enter();
    __shared__ double sh[32 * 9];
    PlControl *c = s->ctl;
    if (c->state != PL_DECIDED) return;
    const int r = c->r;
    if (blockIdx.x < r) {
        if (hx64_in_update(s)) finish_chunked_row<true>(s, blockIdx.x, sh);
        else finish_chunked_row<false>(s, blockIdx.x, sh);
    }
    if (!last_block_done(&c->blocks_done)) return;
    restandardise_if_drifted(s, r);
}

// 16 x 16 tiles of remaining positions: the covariance of the updated rows,
// by the update algebra (Alg. 6) or, after drift, from the data; and the
// collinear scan. (The first covariance, kernel `covariance`, scans too.)
// A block has 16 rows of threads, one per row of its tile, or a multiple
// of 16 when a recent pass listed band pairs and the tiles are too few to
// fill the GPU (the scheduler's update_cov_rows): the band pairs, each a
// walk over the samples by a warp, are then shared by more warps, which is
// where near-copies of variables (E. coli) spend the search's time.
extern "C" __global__ void __launch_bounds__(1024) update_cov(PlSearch *s)
{
    pl_enter();
    __shared__ BandPairs band;
    PlControl *c = s->ctl;
    const int r = c->r;
    if (c->state != PL_DECIDED) return;
    const int root = c->root;
    if (drifted(s)) {
        covariance_tile(s, r, root);
        return;
    }
    if (blockIdx.x * 16 + 15 <= blockIdx.y * 16) return;  // no pair j > k in the tile
    update_cov_tile_at(s, r, root, blockIdx.y * 16, blockIdx.x * 16, threadIdx.y, threadIdx.x, band);
}
