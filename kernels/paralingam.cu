// ParaLiNGAM on the GPU (paper Sec. 5, Algs. 6-7), compiled at run time by PyCUDA.
//
// Compile-time constants (passed as -D by paralingam/_cuda.py):
//   BLOCK  threads per block (a power of two, 64..1024)
//   REAL   float or double: the arithmetic of the comparisons. The data are
//          kept in both precisions; the covariance, scores and messages are
//          always double.
// Fast intrinsics: with REAL=float the entropy terms use __expf/__logf (the
// special-function unit: 3 operations per residual sample, 6 per sample pair).
// Their absolute error (~1e-7 per term) is far below what the certified-root
// check of the host scheduler allows for; REAL=double uses exp/log1p.
//
// Layout: X rows are variables (row stride ld), cov is p x p (original
// variable indices). Per iteration, worker w in [0, r) stands for variable
// idx[w] and carries weight[w] (the size of its collinear group). Pair locks
// and results are r x r, upper triangle (a < b), row stride r.

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef REAL
#define REAL float
#endif

#define K1 79.047
#define K2 7.4129
#define GAMMA_H 0.37457
#define LOG2 0.6931471805599453

__device__ __forceinline__ float log_cosh_term(float a) { return a + __logf(1.0f + __expf(-2.0f * a)); }
__device__ __forceinline__ float gauss_term(float u) { return u * __expf(-0.5f * u * u); }
__device__ __forceinline__ double log_cosh_term(double a) { return a + log1p(exp(-2.0 * a)); }
__device__ __forceinline__ double gauss_term(double u) { return u * exp(-0.5 * u * u); }

__device__ __forceinline__ double entropy_from_moments(double lc, double g, int n)
{
    const double h_gauss = 0.5 * (1.0 + log(2.0 * 3.141592653589793));
    double a = lc / n - LOG2 - GAMMA_H;
    double b = g / n;
    return h_gauss - K1 * a * a - K2 * b * b;
}

// Sum `v` over the block; the result is valid in thread 0.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T *shared)
{
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = (threadIdx.x < BLOCK / 32) ? shared[threadIdx.x] : (T)0;
    if (warp == 0)
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// ---- entropy of each worker's variable ----
extern "C" __global__ void row_entropy(const REAL *X, int ld, int n, const int *idx, double *hx)
{
    __shared__ REAL sh[32];
    const REAL *x = X + (size_t)idx[blockIdx.x] * ld;
    REAL lc = 0, g = 0;
    for (int k = threadIdx.x; k < n; k += BLOCK) {
        REAL u = x[k];
        lc += log_cosh_term(u < 0 ? -u : u);
        g += gauss_term(u);
    }
    lc = block_sum(lc, sh);
    g = block_sum(g, sh);
    if (threadIdx.x == 0) hx[blockIdx.x] = entropy_from_moments((double)lc, (double)g, n);
}

// ---- the worker kernel: one block per worker (paper Alg. 7) ----
// A worker checks its score against gamma, takes its next free partner
// (atomicCAS on the pair lock: each unordered pair is compared once), compares
// the pair in the orientation (lower worker, higher worker), stores I and
// messages both scores. It leaves when its score passes gamma, when it has
// all r - 1 results, or when every remaining pair is held by other workers
// (their results arrive as messages). finish[0] is raised when a worker holds
// all its results with a score at or under gamma.
// Ill-conditioned pairs (1 - rho^2 < WIDE_F, the residual amplifies rounding
// of the data by more than 1 / sqrt(WIDE_F)) are computed from the double
// rows X64 whatever REAL is, so float32 errors stay bounded.
#define WIDE_F 0.01

template <typename T>
__device__ __forceinline__ void pair_moments(const T *xa, const T *xb, T rr, T inv_s, int n,
                                             T *sh, double m[4])
{
    T lc_ab = 0, g_ab = 0, lc_ba = 0, g_ba = 0;
    for (int k = threadIdx.x; k < n; k += BLOCK) {
        T va = xa[k], vb = xb[k];
        T u = (va - rr * vb) * inv_s;
        T v = (vb - rr * va) * inv_s;
        lc_ab += log_cosh_term(u < 0 ? -u : u);
        g_ab += gauss_term(u);
        lc_ba += log_cosh_term(v < 0 ? -v : v);
        g_ba += gauss_term(v);
    }
    m[0] = (double)block_sum(lc_ab, sh);
    m[1] = (double)block_sum(g_ab, sh);
    m[2] = (double)block_sum(lc_ba, sh);
    m[3] = (double)block_sum(g_ba, sh);
}

extern "C" __global__ void __launch_bounds__(BLOCK) worker(
    const REAL *X, const double *X64, int ld, int n, const int *idx, const double *weight,
    const double *hx, const double *cov, int p, int r, int *state, double *stat, double *score,
    double *absneg, int *ndone, int *cursor, double gamma, double collinear_tol,
    volatile int *finish, unsigned long long *compared)
{
    __shared__ int s_partner;
    const int w = blockIdx.x;
    for (;;) {
        if (threadIdx.x == 0) {
            int partner = -1;
            double sc = atomicAdd(&score[w], 0.0);
            int done = atomicAdd(&ndone[w], 0);
            if (done >= r - 1) {
                if (sc <= gamma) *finish = 1;
            } else if (sc <= gamma) {
                while (cursor[w] < r - 1) {
                    int t = (w + 1 + cursor[w]) % r;
                    cursor[w] += 1;
                    int a = min(w, t), b = max(w, t);
                    int *lock = &state[(size_t)a * r + b];
                    if (*(volatile int *)lock == 0 && atomicCAS(lock, 0, 1) == 0) {
                        partner = t;
                        break;
                    }
                }
            }
            s_partner = partner;
        }
        __syncthreads();
        const int t = s_partner;
        __syncthreads();
        if (t < 0) return;

        const int a = min(w, t), b = max(w, t);
        const int ia = idx[a], ib = idx[b];
        const double rho = cov[(size_t)ia * p + ib];
        const double f = 1.0 - rho * rho;
        double I = 0.0;
        if (f > collinear_tol) {
            __shared__ REAL sh[32];
            __shared__ double sh64[32];
            double m[4];
            if (sizeof(REAL) < sizeof(double) && f < WIDE_F)
                pair_moments<double>(X64 + (size_t)ia * ld, X64 + (size_t)ib * ld, rho,
                                     1.0 / sqrt(f), n, sh64, m);
            else
                pair_moments<REAL>(X + (size_t)ia * ld, X + (size_t)ib * ld, (REAL)rho,
                                   (REAL)(1.0 / sqrt(f)), n, sh, m);
            if (threadIdx.x == 0)
                I = (hx[b] + entropy_from_moments(m[0], m[1], n)) -
                    (hx[a] + entropy_from_moments(m[2], m[3], n));
        }
        if (threadIdx.x == 0) {
            stat[(size_t)a * r + b] = I;
            stat[(size_t)b * r + a] = -I;
            __threadfence();
            atomicExch(&state[(size_t)a * r + b], 2);
            if (I < 0.0) {
                atomicAdd(&score[a], weight[b] * I * I);
                atomicAdd(&absneg[a], -weight[b] * I);
            } else if (I > 0.0) {
                atomicAdd(&score[b], weight[a] * I * I);
                atomicAdd(&absneg[b], weight[a] * I);
            }
            // Message the partner; if this completes it under gamma, say so
            // for it (it may already have left the kernel).
            int other = (a == w) ? b : a;
            int done_other = atomicAdd(&ndone[other], 1) + 1;
            atomicAdd(&ndone[w], 1);
            if (done_other >= r - 1 && atomicAdd(&score[other], 0.0) <= gamma) *finish = 1;
            atomicAdd(compared, 1ull);
        }
        __syncthreads();
    }
}

// ---- root selection: one block ----
// Finished workers' scores summed in index order (deterministic), argmin with
// ties to the lowest worker, and the smallest partial score of unfinished
// workers (to raise gamma). Certification: with |I| known to within eps, a
// score S built from negative I's of total weighted size A is known to within
// E = 2 eps A + eps^2 W. The root is certain when every other worker's lower
// bound (S - E; partial scores only grow) exceeds the root's upper bound.
// out: [best, min_unfinished], iout: [root, n_finished, certain].
extern "C" __global__ void select_root(const double *stat, const double *weight,
                                       const double *score, const double *absneg,
                                       const int *ndone, int r, double eps, double wsum,
                                       double *out, int *iout, double *final_score)
{
    for (int w = threadIdx.x; w < r; w += BLOCK) {
        double total = -1.0;
        if (ndone[w] >= r - 1) {
            total = 0.0;
            for (int j = 0; j < r; ++j) {
                double v = stat[(size_t)w * r + j];
                if (v < 0.0) total += weight[j] * v * v;
            }
        }
        final_score[w] = total;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double best = 1e300, min_unf = 1e300;
        int root = -1, nfin = 0;
        for (int w = 0; w < r; ++w) {
            double v = final_score[w];
            if (v >= 0.0) {
                ++nfin;
                if (v < best) { best = v; root = w; }
            } else if (score[w] < min_unf) {
                min_unf = score[w];
            }
        }
        int certain = 1;
        if (root >= 0 && eps > 0.0) {
            double upper = best + 2.0 * eps * absneg[root] + eps * eps * wsum;
            for (int w = 0; w < r && certain; ++w) {
                if (w == root) continue;
                double s = final_score[w] >= 0.0 ? final_score[w] : score[w];
                double lower = s - 2.0 * eps * absneg[w] - eps * eps * wsum;
                // ties go to the lower index: a lower-index rival must be
                // strictly worse, a higher-index one at least as bad.
                if (w < root ? lower <= upper : lower < upper) certain = 0;
            }
        }
        out[0] = best; out[1] = min_unf;
        iout[0] = root; iout[1] = nfin; iout[2] = certain;
    }
}

// ---- UpdateData (Alg. 5) in both precisions, with the drift monitor ----
// One block per remaining variable k (alive[k] != root). frac and explained
// are per original variable. drift[k] = max(|mean|, |var - 1|, |corr(x, root)|).
extern "C" __global__ void update_data(double *X64, float *X32, int ld, int n, const int *alive,
                                       int root, const double *cov, int p, double *frac,
                                       double explained_tol, int *explained, double *drift)
{
    __shared__ double sh[32];
    const int i = alive[blockIdx.x];
    if (i == root) { if (threadIdx.x == 0) { explained[blockIdx.x] = 0; drift[blockIdx.x] = 0.0; } return; }
    const double rho = cov[(size_t)i * p + root];
    double f = 1.0 - rho * rho;
    if (f < 0.0) f = 0.0;
    const double fr = frac[i] * f;
    if (fr <= explained_tol) {
        if (threadIdx.x == 0) { frac[i] = fr; explained[blockIdx.x] = 1; drift[blockIdx.x] = 0.0; }
        return;
    }
    const double inv_s = 1.0 / sqrt(f);
    double *x = X64 + (size_t)i * ld;
    const double *xr = X64 + (size_t)root * ld;
    double s = 0.0, ss = 0.0, sr = 0.0;
    for (int k = threadIdx.x; k < n; k += BLOCK) {
        double v = (x[k] - rho * xr[k]) * inv_s;
        x[k] = v;
        X32[(size_t)i * ld + k] = (float)v;
        s += v; ss += v * v; sr += v * xr[k];
    }
    s = block_sum(s, sh);
    ss = block_sum(ss, sh);
    sr = block_sum(sr, sh);
    if (threadIdx.x == 0) {
        frac[i] = fr;
        explained[blockIdx.x] = 0;
        double mean = s / n, var = ss / n - mean * mean, corr = sr / n;
        double d = fabs(mean);
        d = fmax(d, fabs(var - 1.0));
        d = fmax(d, fabs(corr));
        drift[blockIdx.x] = d;
    }
}

// ---- UpdateCovMat (Alg. 6) and the collinear scan of the new block ----
// Thread per (k, j), k < j < r over the remaining variables alive[0..r).
// Collinear pairs (1 - rho^2 <= tol) are appended to pairs (capacity cap).
extern "C" __global__ void update_cov(double *cov, int p, const int *alive, int r, int root,
                                      double collinear_tol, int *n_pairs, int *pairs, int cap)
{
    const int k = blockIdx.y * blockDim.y + threadIdx.y;
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= r || j >= r || j <= k) return;
    const int ia = alive[k], ib = alive[j];
    double v = cov[(size_t)ia * p + ib];
    if (root >= 0) {
        const double ra = cov[(size_t)ia * p + root], rb = cov[(size_t)ib * p + root];
        v = (v - ra * rb) / sqrt((1.0 - ra * ra) * (1.0 - rb * rb));
    }
    if (1.0 - v * v <= collinear_tol) {
        int slot = atomicAdd(n_pairs, 1);
        if (slot < cap) { pairs[2 * slot] = k; pairs[2 * slot + 1] = j; }
    }
    if (root >= 0) {
        // write after every thread of this launch has read the root column:
        // the root's own row/column is never written (root is not alive).
        cov[(size_t)ia * p + ib] = v;
        cov[(size_t)ib * p + ia] = v;
    }
}

// ---- initial standardisation and covariance ----
// One block per variable: population mean/std of row i of X64 (n samples),
// standardised in place, float copy written.
extern "C" __global__ void standardise(double *X64, float *X32, int ld, int n)
{
    __shared__ double sh[32];
    double *x = X64 + (size_t)blockIdx.x * ld;
    double s = 0.0;
    for (int k = threadIdx.x; k < n; k += BLOCK) s += x[k];
    s = block_sum(s, sh);
    __shared__ double s_mean, s_inv;
    if (threadIdx.x == 0) s_mean = s / n;
    __syncthreads();
    const double mean = s_mean;
    double ss = 0.0;
    for (int k = threadIdx.x; k < n; k += BLOCK) { double d = x[k] - mean; ss += d * d; }
    ss = block_sum(ss, sh);
    if (threadIdx.x == 0) s_inv = 1.0 / sqrt(ss / n);
    __syncthreads();
    const double inv = s_inv;
    for (int k = threadIdx.x; k < n; k += BLOCK) {
        double v = (x[k] - mean) * inv;
        x[k] = v;
        X32[(size_t)blockIdx.x * ld + k] = (float)v;
    }
}

// cov[ia, ib] = <x_ia, x_ib> / n for the listed rows; 16 x 16 tiles.
extern "C" __global__ void covariance(const double *X64, int ld, int n, const int *rows, int m,
                                      double *cov, int p)
{
    __shared__ double ta[16][17], tb[16][17];
    const int bi = blockIdx.y * 16, bj = blockIdx.x * 16;
    if (bj + 15 < bi) return;  // lower triangle of tiles: mirrored below
    const int ty = threadIdx.y, tx = threadIdx.x;
    double acc = 0.0;
    for (int k0 = 0; k0 < n; k0 += 16) {
        int ra = bi + ty, rb = bj + ty, kk = k0 + tx;
        ta[ty][tx] = (ra < m && kk < n) ? X64[(size_t)rows[ra] * ld + kk] : 0.0;
        tb[ty][tx] = (rb < m && kk < n) ? X64[(size_t)rows[rb] * ld + kk] : 0.0;
        __syncthreads();
#pragma unroll
        for (int q = 0; q < 16; ++q) acc += ta[ty][q] * tb[tx][q];
        __syncthreads();
    }
    const int i = bi + ty, j = bj + tx;
    if (i < m && j < m && i <= j) {
        double v = (i == j) ? 1.0 : acc / n;
        cov[(size_t)rows[i] * p + rows[j]] = v;
        cov[(size_t)rows[j] * p + rows[i]] = v;
    }
}
