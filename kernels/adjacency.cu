// Kernels of the adjacency step (paralingam/adjacency/_cuda_adjacency.py), double precision:
//
//   chol_panel, chol_trailing   blocked Cholesky factor of the Gram (or
//                               covariance) matrix in causal order, 32 columns
//                               per panel; stops at the first pivot that keeps
//                               no more than SINGULAR_TOL of its diagonal
//   ols_rows                    least squares of every variable on all earlier
//                               ones from that factor (one backward solve each)
//   lars_paths                  the adaptive lasso's LARS paths, one block per
//                               target, all targets in one launch
//   refit_rows                  the refit of each target on the predictors its
//                               path kept (after lars_paths, on its stream)
//   gather_centred              the data's columns in causal order, centred and
//                               scaled, from the CUDA search's copy of the data
//                               (the QR of the minimum-norm rows, _cuda_qr.py)
//   upper_columns, divided_columns, sums_of_squares, min_norm_rows, placed_scaled
//                               the minimum-norm rows of data of small rank
//                               (_cuda_min_norm.py, _cuda_low_rank.py)
//
// lars_paths follows the CPU port (paralingam/adjacency/_lasso.pyx, itself scikit-learn's
// _lars_path_solver for a precomputed Gram matrix, method="lasso",
// alpha_min=0, max_iter=500) decision for decision: the entering predictor
// (first maximum), sklearn's rounding of the direction's correlations, the
// step length, drops, the BIC of every path point. Sums are reduced in a
// different order than on the CPU, so values agree to rounding, not bitwise.
// Wherever the CPU port hands a target to scikit-learn (degenerate regressor,
// alpha growing, several coefficients crossing zero, an ill-conditioned
// direction), the block marks the target FALLBACK and the host recomputes it.
//
// Data: `gram` is the Gram matrix of the standardised data in causal order
// (p x p, double); target k regresses on positions 0..k-1. `ols_coef` row k
// and `ols_rss[k]` are its least-squares coefficients and residual sum of
// squares (ols_rows). Output: `kept` row k marks the predictors of the
// BIC-best path point; the host refits them.
//
// The triangular solves with the Cholesky factor of the active block (up to
// 500 x 500, in global memory) go in panels of 32 rows: the whole block forms
// the panel's dot products with the rows already solved, one warp then
// solves the 32 x 32 diagonal block with shuffles. That keeps the serial
// chain at one memory latency per panel rather than per row.
#include <cuda_runtime.h>

#define TPB 256
// Resident blocks per SM the register allocation must allow (targets run
// concurrently: one block each).
#ifndef LARS_MIN_BLOCKS
#define LARS_MIN_BLOCKS 4
#endif
#define NWARPS (TPB / 32)
#define MAX_ITER 500
#define PANEL 32
#define FULL_MASK 0xffffffffu

#define LARS_OK 0
#define LARS_FALLBACK 1
#define REFIT_FAILED 2

#define TINY32 1.1754943508222875e-38       // np.finfo(np.float32).tiny
#define EQUALITY_TOL 1.1920928955078125e-07 // np.finfo(np.float32).eps
#define DBL_EPS 2.220446049250313e-16
#define ROUND_SCALE 1e15                    // np.around(..., decimals=15)

struct Scratch {
    double val[NWARPS];
    int idx[NWARPS];
    double bcast;
    int ibcast;
};

__device__ __forceinline__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// Sum over the block; every thread gets the result.
__device__ double block_sum(double v, Scratch &sh)
{
    v = warp_sum(v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh.val[threadIdx.x >> 5] = v;
    __syncthreads();
    double s = 0.0;
    for (int w = 0; w < NWARPS; ++w) s += sh.val[w];
    return s;
}

// Smallest value over the block (exact: independent of the order).
__device__ double block_min(double v, Scratch &sh)
{
    for (int o = 16; o > 0; o >>= 1) v = fmin(v, __shfl_xor_sync(FULL_MASK, v, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh.val[threadIdx.x >> 5] = v;
    __syncthreads();
    double m = sh.val[0];
    for (int w = 1; w < NWARPS; ++w) m = fmin(m, sh.val[w]);
    return m;
}

// Largest value and, among equal ones, the smallest index (np.argmax).
__device__ void block_argmax(double v, int i, Scratch &sh, double &best, int &best_i)
{
    for (int o = 16; o > 0; o >>= 1) {
        double v2 = __shfl_xor_sync(FULL_MASK, v, o);
        int i2 = __shfl_xor_sync(FULL_MASK, i, o);
        if (v2 > v || (v2 == v && i2 < i)) { v = v2; i = i2; }
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) { sh.val[threadIdx.x >> 5] = v; sh.idx[threadIdx.x >> 5] = i; }
    __syncthreads();
    best = sh.val[0];
    best_i = sh.idx[0];
    for (int w = 1; w < NWARPS; ++w)
        if (sh.val[w] > best || (sh.val[w] == best && sh.idx[w] < best_i)) { best = sh.val[w]; best_i = sh.idx[w]; }
}

// Rows start..end-1 of L y = b, in place in `vec` (shared; rows < start are
// already solved). L row-major lower, stride m.
__device__ void forward_solve(const double *L, int m, int start, int end, double *vec,
                              double (*diag)[PANEL + 1], double *acc)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int i0 = start; i0 < end; i0 += PANEL) {
        const int rows = min(PANEL, end - i0);
        // dot products of the panel's rows with the solved entries
        for (int r = warp; r < rows; r += NWARPS) {
            const double *row = L + (size_t)(i0 + r) * m;
            double s = 0.0;
            for (int j = lane; j < i0; j += 32) s += row[j] * vec[j];
            s = warp_sum(s);
            if (lane == 0) acc[r] = vec[i0 + r] - s;
        }
        for (int e = threadIdx.x; e < PANEL * PANEL; e += TPB) {
            const int r = e / PANEL, c = e % PANEL;
            if (r < rows && c <= r) diag[r][c] = L[(size_t)(i0 + r) * m + i0 + c];
        }
        __syncthreads();
        if (warp == 0) {
            double a = lane < rows ? acc[lane] : 0.0, mine = 0.0;
            for (int c = 0; c < rows; ++c) {
                const double xc = __shfl_sync(FULL_MASK, a, c) / diag[c][c];
                if (lane == c) mine = xc;
                if (lane > c && lane < rows) a -= diag[lane][c] * xc;
            }
            if (lane < rows) vec[i0 + lane] = mine;
        }
        __syncthreads();
    }
}

// L^T x = y for rows 0..k-1, in place in `vec` (shared).
__device__ void backward_solve(const double *L, int m, int k, double *vec,
                               double (*diag)[PANEL + 1])
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int i1 = k; i1 > 0; i1 -= PANEL) {
        const int i0 = max(i1 - PANEL, 0), rows = i1 - i0;
        for (int e = threadIdx.x; e < PANEL * PANEL; e += TPB) {
            const int r = e / PANEL, c = e % PANEL;
            if (r < rows && c <= r) diag[r][c] = L[(size_t)(i0 + r) * m + i0 + c];
        }
        __syncthreads();
        if (warp == 0) {
            double a = lane < rows ? vec[i0 + lane] : 0.0, mine = 0.0;
            for (int c = rows - 1; c >= 0; --c) {
                const double xc = __shfl_sync(FULL_MASK, a, c) / diag[c][c];
                if (lane == c) mine = xc;
                if (lane < c) a -= diag[c][lane] * xc;
            }
            if (lane < rows) vec[i0 + lane] = mine;
        }
        __syncthreads();
        // the solved panel's contribution to the rows above it
        for (int j = threadIdx.x; j < i0; j += TPB) {
            double s = 0.0;
            for (int r = 0; r < rows; ++r) s += L[(size_t)(i0 + r) * m + j] * vec[i0 + r];
            vec[j] -= s;
        }
        __syncthreads();
    }
}

// Remove row/column `go_out` from the n x n factor (sklearn's cholesky_delete).
__device__ void cholesky_delete(double *L, int m, int n, int go_out, Scratch &sh)
{
    for (int i = go_out; i < n - 1; ++i) {
        for (int j = threadIdx.x; j < i + 2; j += TPB) L[(size_t)i * m + j] = L[(size_t)(i + 1) * m + j];
        __syncthreads();
    }
    for (int i = go_out; i < n - 1; ++i) {
        double *row = L + (size_t)i * m;
        if (threadIdx.x == 0) {
            // BLAS drotg on (row[i], row[i + 1]), then a non-negative diagonal
            double a = row[i], b = row[i + 1], c, s;
            const double roe = fabs(b) >= fabs(a) ? b : a;
            double r = hypot(a, b);
            if (r == 0.0) { c = 1.0; s = 0.0; }
            else { if (roe < 0) r = -r; c = a / r; s = b / r; a = r; }
            if (a < 0) { a = fabs(a); c = -c; s = -s; }
            row[i] = a;
            row[i + 1] = 0.0;
            sh.val[0] = c;
            sh.val[1] = s;
        }
        __syncthreads();
        const double c = sh.val[0], s = sh.val[1];
        for (int r = threadIdx.x; r < n - i - 2; r += TPB) {
            double *below = L + (size_t)(i + 1 + r) * m;
            const double x = below[i], y = below[i + 1];
            below[i] = c * x + s * y;
            below[i + 1] = c * y - s * x;
        }
        __syncthreads();
    }
}

__device__ __forceinline__ double bic(double rss, int dof, double n, double noise_var)
{
    return n * log(2.0 * 3.141592653589793 * noise_var) + rss / noise_var + log(n) * dof;
}

struct Shared {
    double sign[MAX_ITER];   // by active position
    double ls[MAX_ITER];     // least squares / equiangular weights
    double fw[MAX_ITER];     // L^{-1} sign, rows 0..n_fw-1 valid
    double vec[MAX_ITER];    // new factor row; then w * ls of the actives
    int act[MAX_ITER];       // predictor of each active position (indices[:n_active])
    double diag[PANEL][PANEL + 1];
    double acc[PANEL];
    Scratch red;
    int flag;
};

// One target's path; returns LARS_OK or LARS_FALLBACK. Every thread returns the same.
__device__ int lars_target(const double *__restrict__ gram, int p, int k, const double *ols_b,
                           double ols_rss, double n, double gamma, int m, double *ws, int *iws,
                           unsigned char *kept, Shared &sh)
{
    double *L = ws;                           // m x m
    double *w = L + (size_t)m * m;            // p each below, first k used
    double *gw = w + p;
    double *cov = gw + p;                     // by position
    double *coef = cov + p;                   // original order
    double *new_coef = coef + p;
    double *full = new_coef + p;              // G_w[:, active] @ ls, original order
    double *best = full + p;
    int *indices = iws;                       // position -> predictor
    const int tid = threadIdx.x;

    const double yy = gram[(size_t)k * p + k];
    for (int j = tid; j < k; j += TPB) {
        // gamma = 1 (lingam's default) skips pow: the weights are then the
        // host's bit for bit (libdevice and libm pow may differ by an ulp)
        w[j] = gamma == 1.0 ? fabs(ols_b[j]) : pow(fabs(ols_b[j]), gamma);
        gw[j] = gram[(size_t)j * p + k] * w[j];
        cov[j] = gw[j];
        coef[j] = 0.0;
        new_coef[j] = 0.0;
        best[j] = 0.0;
        indices[j] = j;
    }
    double rss_ols = ols_rss;
    if (rss_ols < DBL_EPS * yy) rss_ols = DBL_EPS * yy;  // an exact fit: keep BIC finite
    const double noise_var = rss_ols / (n - k - 1);
    double best_bic = bic(yy, 0, n, noise_var);
    int n_active = 0, n_iter = 0, n_fw = 0;
    bool drop = false;
    double prev_alpha = 0.0;
    __syncthreads();

    while (true) {
        double C = 0.0, C_ = 0.0;
        if (n_active < k) {
            double v = -1.0;
            int pos = k;
            for (int q = n_active + tid; q < k; q += TPB) {
                const double a = fabs(cov[q]);
                if (a > v) { v = a; pos = q; }
            }
            int best_pos;
            block_argmax(v, pos, sh.red, C, best_pos);
            C_ = cov[best_pos];
            __syncthreads();  // everyone read cov[best_pos] before thread 0 swaps
            if (!drop && threadIdx.x == 0) sh.red.ibcast = best_pos;
        }
        const double alpha = C / n;
        if (alpha <= EQUALITY_TOL) break;  // alpha_min = 0: stop, no interpolation
        if (n_iter >= MAX_ITER || n_active >= k) break;

        if (!drop) {
            if (tid == 0) {
                const int nn = sh.red.ibcast;
                sh.sign[n_active] = (C_ > 0) - (C_ < 0);
                const double t = cov[nn]; cov[nn] = cov[n_active]; cov[n_active] = t;
                const int i = indices[nn]; indices[nn] = indices[n_active]; indices[n_active] = i;
                sh.act[n_active] = i;
            }
            __syncthreads();
            const int jn = sh.act[n_active];
            const double wj = w[jn];
            for (int a = tid; a < n_active; a += TPB) {
                const int ia = sh.act[a];
                sh.vec[a] = gram[(size_t)ia * p + jn] * (w[ia] * wj);
            }
            __syncthreads();
            forward_solve(L, m, 0, n_active, sh.vec, sh.diag, sh.acc);
            double part = 0.0;
            for (int a = tid; a < n_active; a += TPB) {
                part += sh.vec[a] * sh.vec[a];
                L[(size_t)n_active * m + a] = sh.vec[a];
            }
            const double v = block_sum(part, sh.red);
            double dg = sqrt(fabs(gram[(size_t)jn * p + jn] * (wj * wj) - v));
            if (dg < DBL_EPS) dg = DBL_EPS;
            if (tid == 0) L[(size_t)n_active * m + n_active] = dg;
            if (dg < 1e-7) return LARS_FALLBACK;  // degenerate regressor: sklearn drops it for good
            ++n_active;
            __syncthreads();
        }
        if (n_iter > 0 && prev_alpha < alpha) return LARS_FALLBACK;  // sklearn stops with a warning

        // direction: L L^T ls = sign, the forward half kept row by row
        for (int i = n_fw + tid; i < n_active; i += TPB) sh.fw[i] = sh.sign[i];
        __syncthreads();
        forward_solve(L, m, n_fw, n_active, sh.fw, sh.diag, sh.acc);
        n_fw = n_active;
        for (int i = tid; i < n_active; i += TPB) sh.ls[i] = sh.fw[i];
        __syncthreads();
        backward_solve(L, m, n_active, sh.ls, sh.diag);
        double part = 0.0;
        for (int i = tid; i < n_active; i += TPB) part += sh.ls[i] * sh.sign[i];
        const double s = block_sum(part, sh.red);
        if (n_active == 1 && sh.ls[0] == 0.0) return LARS_FALLBACK;
        const double AA = 1.0 / sqrt(s);
        if (!isfinite(AA)) return LARS_FALLBACK;
        __syncthreads();
        for (int i = tid; i < n_active; i += TPB) {
            sh.ls[i] *= AA;
            sh.vec[i] = sh.ls[i] * w[sh.act[i]];
        }
        __syncthreads();

        // full[j] = sum_a G[act_a, j] w[act_a] ls[a]: Gram rows, coalesced
        for (int j = tid; j < k; j += TPB) {
            double f = 0.0;
            for (int a = 0; a < n_active; ++a) f += gram[(size_t)sh.act[a] * p + j] * sh.vec[a];
            full[j] = f;
        }
        __syncthreads();

        // step length: the next predictor to enter, or the end of the path
        double g1 = INFINITY, g2 = INFINITY;
        for (int q = n_active + tid; q < k; q += TPB) {
            const int j = indices[q];
            const double corr = rint(full[j] * w[j] * ROUND_SCALE) / ROUND_SCALE;
            const double t1 = (C - cov[q]) / (AA - corr + TINY32);
            const double t2 = (C + cov[q]) / (AA + corr + TINY32);
            if (t1 > 0.0) g1 = fmin(g1, t1);
            if (t2 > 0.0) g2 = fmin(g2, t2);
        }
        double gamma_ = fmin(block_min(g1, sh.red), block_min(g2, sh.red));
        if (C / AA < gamma_) gamma_ = C / AA;
        if (!(gamma_ < INFINITY)) gamma_ = 1.79769313486231570815e+308;  // min_pos: DBL_MAX

        // a coefficient crossing zero first: drop it
        double zmin = INFINITY;
        for (int i = tid; i < n_active; i += TPB) {
            const double z = -coef[sh.act[i]] / (sh.ls[i] + TINY32);
            if (z > 0.0) zmin = fmin(zmin, z);
        }
        const double z_pos = block_min(zmin, sh.red);
        drop = false;
        int ii = -1;
        if (z_pos < gamma_) {
            if (tid == 0) { sh.flag = 0; sh.red.ibcast = -1; }
            __syncthreads();
            for (int i = tid; i < n_active; i += TPB) {
                const double z = -coef[sh.act[i]] / (sh.ls[i] + TINY32);
                if (z == z_pos) { atomicAdd(&sh.flag, 1); atomicMax(&sh.red.ibcast, i); }
            }
            __syncthreads();
            if (sh.flag > 1) return LARS_FALLBACK;  // several coefficients cross zero at once
            ii = sh.red.ibcast;
            gamma_ = z_pos;
            drop = true;
        }

        // the new point and its residual sum of squares (see _lasso.pyx)
        ++n_iter;
        for (int j = tid; j < k; j += TPB) new_coef[j] = 0.0;
        __syncthreads();
        double lin = 0.0, sdot = 0.0, dof = 0.0;
        for (int i = tid; i < n_active; i += TPB) {
            const int j = sh.act[i];
            const double b = coef[j] + gamma_ * sh.ls[i];
            new_coef[j] = b;
            lin += gw[j] * b;
            sdot += sh.sign[i] * b;
            if (fabs(b) > DBL_EPS) dof += 1.0;
        }
        lin = block_sum(lin, sh.red);
        sdot = block_sum(sdot, sh.red);
        dof = block_sum(dof, sh.red);
        const double rss = yy - lin - (C - gamma_ * AA) * sdot;
        for (int q = n_active + tid; q < k; q += TPB) {
            const int j = indices[q];
            const double corr = rint(full[j] * w[j] * ROUND_SCALE) / ROUND_SCALE;
            cov[q] -= gamma_ * corr;
        }
        const double b_now = bic(rss, (int)dof, n, noise_var);
        if (b_now < best_bic) {  // np.argmin: the first best point
            best_bic = b_now;
            for (int j = tid; j < k; j += TPB) best[j] = 0.0;
            __syncthreads();
            for (int i = tid; i < n_active; i += TPB) best[sh.act[i]] = new_coef[sh.act[i]];
        }
        __syncthreads();

        if (drop) {
            const int drop_var = sh.act[ii];
            double t = 0.0;
            for (int i = tid; i < n_active; i += TPB) {
                const int j = sh.act[i];
                t += gram[(size_t)drop_var * p + j] * (w[drop_var] * w[j]) * new_coef[j];
            }
            t = block_sum(t, sh.red);
            cholesky_delete(L, m, n_active, ii, sh.red);
            if (tid == 0) {
                --n_active;
                for (int i = ii; i < n_active; ++i) {
                    const int x = indices[i]; indices[i] = indices[i + 1]; indices[i + 1] = x;
                    sh.act[i] = indices[i];
                    sh.sign[i] = sh.sign[i + 1];
                }
                sh.sign[n_active] = 0.0;
                cov[n_active] = gw[drop_var] - t;
            } else {
                --n_active;
            }
            n_fw = ii;  // rows above the dropped one are unchanged
            __syncthreads();
        }
        prev_alpha = alpha;
        double *sw = coef; coef = new_coef; new_coef = sw;
    }

    for (int j = tid; j < k; j += TPB) kept[j] = fabs(best[j] * w[j]) > 0.0;
    return LARS_OK;
}

// The next task of a persistent block: one atomicAdd on `next`, the same value
// in every thread.
__device__ int block_next_task(unsigned int *next)
{
    __shared__ int task;
    if (threadIdx.x == 0) task = atomicAdd(next, 1u);
    __syncthreads();
    const int t = task;
    __syncthreads();  // read by all before the next call overwrites it
    return t;
}

// Targets are taken from `next` (largest first, as the host orders them), so
// a block reuses its workspace: the grid need not cover every target.
extern "C" __global__ void __launch_bounds__(TPB, LARS_MIN_BLOCKS) lars_paths(
    const double *__restrict__ gram, int p, const int *__restrict__ targets, int n_targets,
    const double *__restrict__ ols_coef, const double *__restrict__ ols_rss, double n,
    double gamma, int m, double *work, int *iwork, unsigned int *next,
    unsigned char *kept, int *status)
{
    __shared__ Shared sh;
    double *ws = work + (size_t)blockIdx.x * ((size_t)m * m + 8 * (size_t)p);
    int *iws = iwork + (size_t)blockIdx.x * p;
    while (true) {
        const int t = block_next_task(next);
        if (t >= n_targets) return;
        const int k = targets[t];
        const int st = lars_target(gram, p, k, ols_coef + (size_t)k * p, ols_rss[k], n, gamma, m,
                                   ws, iws, kept + (size_t)k * p, sh);
        if (threadIdx.x == 0) status[t] = st;
        __syncthreads();
    }
}

// The refit after the paths (the host's _lasso refit): for every target whose
// path succeeded (status[t] == LARS_OK), the least squares on the original
// scale, `scatter` (p x p, causal order), of k = targets[t] on the predictors
// `kept` row k marks (ascending), into row k of `B` (zero elsewhere, as the
// host set it). Cholesky of their scatter (right-looking, in the block's
// `work`, stride q for q kept predictors), then the panelled solves.
// status[t] becomes REFIT_FAILED where a pivot keeps no more than `tol` of its
// diagonal entry or a coefficient is not finite (the host then computes the
// target, whose least squares it solves by minimum norm). Sums run in another
// order than the host's, so the coefficients agree to rounding. Blocks take
// targets from `next`; `work` holds `stride` doubles per block (q*q <= m*m).
extern "C" __global__ void __launch_bounds__(TPB) refit_rows(
    const double *__restrict__ scatter, int p, const int *__restrict__ targets, int n_targets,
    const unsigned char *__restrict__ kept, double tol, double *work, long long stride,
    unsigned int *next, double *B, int *status)
{
    __shared__ int act[MAX_ITER];
    __shared__ double vec[MAX_ITER], diag0[MAX_ITER];
    __shared__ double diag[PANEL][PANEL + 1];
    __shared__ double acc[PANEL];
    __shared__ int q, failed;
    double *S = work + (long long)blockIdx.x * stride;
    const int tid = threadIdx.x, lane = tid & 31;
    while (true) {
        const int t = block_next_task(next);
        if (t >= n_targets) return;
        if (status[t] != LARS_OK) continue;
        const int k = targets[t];
        const unsigned char *mark = kept + (size_t)k * p;
        if (tid < 32) {  // the kept predictors, ascending (ballots)
            int count = 0;
            for (int j0 = 0; j0 < k; j0 += 32) {
                const int j = j0 + lane;
                const bool keep = j < k && mark[j];
                const unsigned bits = __ballot_sync(FULL_MASK, keep);
                const int at = count + __popc(bits & ((1u << lane) - 1u));
                if (keep && at < MAX_ITER) act[at] = j;
                count += __popc(bits);
            }
            // (q <= MAX_ITER and q * q <= stride hold for the paths' kept sets;
            // a set past either goes back to the host rather than overrun)
            if (lane == 0) {
                q = count;
                failed = count > MAX_ITER || (long long)count * count > stride;
            }
        }
        __syncthreads();
        const int n = q;
        if (failed) {
            if (tid == 0) status[t] = REFIT_FAILED;
            __syncthreads();
            continue;
        }
        for (int e = tid; e < n * n; e += TPB)
            S[e] = scatter[(size_t)act[e / n] * p + act[e % n]];
        for (int i = tid; i < n; i += TPB) {
            vec[i] = scatter[(size_t)act[i] * p + k];
            diag0[i] = scatter[(size_t)act[i] * p + act[i]];
        }
        __syncthreads();
        // (every thread leaves by the break after the barrier: a read of
        // `failed` before it would race with thread 0's write for column j)
        for (int j = 0; j < n; ++j) {
            if (tid == 0) {
                const double s = S[j * n + j];
                if (!(s > tol * diag0[j]) || !isfinite(s)) failed = 1;
                else S[j * n + j] = sqrt(s);
            }
            __syncthreads();
            if (failed) break;
            const double piv = S[j * n + j];
            for (int i = j + 1 + tid; i < n; i += TPB) S[i * n + j] /= piv;
            __syncthreads();
            const int r = n - j - 1;  // the trailing lower triangle
            for (int e = tid; e < r * r; e += TPB) {
                const int a = j + 1 + e / r, b = j + 1 + e % r;
                if (b <= a) S[a * n + b] -= S[a * n + j] * S[b * n + j];
            }
            __syncthreads();
        }
        if (!failed) {
            forward_solve(S, n, 0, n, vec, diag, acc);
            backward_solve(S, n, n, vec, diag);
            if (tid == 0)
                for (int i = 0; i < n; ++i) failed |= !isfinite(vec[i]);
            __syncthreads();
            if (!failed)
                for (int i = tid; i < n; i += TPB) B[(size_t)k * p + act[i]] = vec[i];
        }
        if (tid == 0 && failed) status[t] = REFIT_FAILED;
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------
// Least squares of every variable on all earlier ones: blocked Cholesky, then
// one backward solve per variable (b_k = L[:k, :k]^-T L[k, :k]^T).

// Factor the 32 columns from j0 on (their entries already hold the updates of
// all earlier panels): the diagonal block by one warp, the rows below by one
// thread each. A pivot that keeps no more than `tol` of its original diagonal
// (`diag0`) stops the factorisation: *info becomes its index.
extern "C" __global__ void __launch_bounds__(TPB) chol_panel(double *A, int p, int j0,
                                                             const double *diag0, double tol,
                                                             int *info)
{
    __shared__ double d[PANEL][PANEL + 1];
    __shared__ int fail;
    if (*info >= 0) return;
    const int rows = min(PANEL, p - j0), j1 = j0 + rows, lane = threadIdx.x & 31;
    for (int e = threadIdx.x; e < PANEL * PANEL; e += TPB) {
        const int r = e / PANEL, c = e % PANEL;
        if (r < rows && c <= r) d[r][c] = A[(size_t)(j0 + r) * p + j0 + c];
    }
    if (threadIdx.x == 0) fail = -1;
    __syncthreads();
    if (threadIdx.x < 32) {
        for (int c = 0; c < rows; ++c) {
            const double piv = d[c][c];
            if (!(piv > tol * diag0[j0 + c]) || !isfinite(piv)) {
                if (lane == 0) fail = j0 + c;
                break;
            }
            const double s = sqrt(piv);
            __syncwarp();
            if (lane == c) d[c][c] = s;
            if (lane > c && lane < rows) d[lane][c] /= s;
            __syncwarp();
            if (lane > c && lane < rows)
                for (int c2 = c + 1; c2 <= lane; ++c2) d[lane][c2] -= d[lane][c] * d[c2][c];
            __syncwarp();
        }
    }
    __syncthreads();
    // written back even after a failed pivot: the rows above it are final,
    // and ols_rows solves them from this block
    for (int e = threadIdx.x; e < PANEL * PANEL; e += TPB) {
        const int r = e / PANEL, c = e % PANEL;
        if (r < rows && c <= r) A[(size_t)(j0 + r) * p + j0 + c] = d[r][c];
    }
    if (fail >= 0) {
        if (threadIdx.x == 0) *info = fail;
        return;
    }
    // rows below: L[i, j0:j1] = A[i, j0:j1] L_dd^-T
    for (int i = j1 + threadIdx.x; i < p; i += TPB) {
        double *row = A + (size_t)i * p + j0;
        double x[PANEL];
        for (int c = 0; c < rows; ++c) {
            double a = row[c];
            for (int c2 = 0; c2 < c; ++c2) a -= x[c2] * d[c][c2];
            x[c] = a / d[c][c];
        }
        for (int c = 0; c < rows; ++c) row[c] = x[c];
    }
}

// Trailing update of the lower triangle after the panel at j0: one 32 x 32
// tile per block, A[i, j] -= L[i, j0:j0+32] . L[j, j0:j0+32].
extern "C" __global__ void __launch_bounds__(TPB) chol_trailing(double *A, int p, int j0,
                                                                const int *info)
{
    __shared__ double Li[PANEL][PANEL + 1], Lj[PANEL][PANEL + 1];
    if (*info >= 0) return;
    const int ti = blockIdx.y, tj = blockIdx.x;
    if (tj > ti) return;
    const int j1 = j0 + PANEL, r0 = j1 + ti * PANEL, c0 = j1 + tj * PANEL;
    for (int e = threadIdx.x; e < PANEL * PANEL; e += TPB) {
        const int r = e / PANEL, c = e % PANEL;
        Li[r][c] = r0 + r < p ? A[(size_t)(r0 + r) * p + j0 + c] : 0.0;
        Lj[r][c] = c0 + r < p ? A[(size_t)(c0 + r) * p + j0 + c] : 0.0;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < PANEL * PANEL; e += TPB) {
        const int r = e / PANEL, c = e % PANEL, i = r0 + r, j = c0 + c;
        if (i < p && j <= i) {
            double s = 0.0;
            for (int q = 0; q < PANEL; ++q) s += Li[r][q] * Lj[c][q];
            A[(size_t)i * p + j] -= s;
        }
    }
}

// Least squares of variable k on 0..k-1 for every k below the first failed
// pivot (*info, or p): coef row k and rss[k] = L[k, k]^2 (rss[0] too). Blocks take
// variables from `next`, largest first; `ws` holds p doubles per block.
extern "C" __global__ void __launch_bounds__(TPB, LARS_MIN_BLOCKS) ols_rows(
    const double *__restrict__ L, int p, const int *info, double *coef, double *rss,
    double *ws, unsigned int *next)
{
    __shared__ double diag[PANEL][PANEL + 1];
    const int limit = *info >= 0 ? *info : p;
    double *vec = ws + (size_t)blockIdx.x * p;
    if (blockIdx.x == 0 && threadIdx.x == 0 && limit > 0) rss[0] = L[0] * L[0];
    while (true) {
        const int k = p - 1 - block_next_task(next);
        if (k < 1) return;
        if (k >= limit) continue;
        for (int j = threadIdx.x; j < k; j += TPB) vec[j] = L[(size_t)k * p + j];
        __syncthreads();
        backward_solve(L, p, k, vec, diag);
        for (int j = threadIdx.x; j < k; j += TPB) coef[(size_t)k * p + j] = vec[j];
        if (threadIdx.x == 0) rss[k] = L[(size_t)k * p + k] * L[(size_t)k * p + k];
        __syncthreads();
    }
}

// Column k of the column-major n x (gridDim.x) array A: variable order[k] of
// the search's copy of the data (one variable per row, ld doubles apart),
// minus its mean, times `scale` (1/sqrt(n)), as the host's _centred_rows
// computes it. One block per column; the mean's sum runs in a fixed order
// (thread-strided partial sums, then shuffles), so a run gives the same bits
// every time.
extern "C" __global__ void __launch_bounds__(TPB) gather_centred(
    const double *__restrict__ X, long long ld, int n, const int *__restrict__ order,
    double *__restrict__ A, double scale)
{
    __shared__ double part[NWARPS];
    const double *x = X + (long long)order[blockIdx.x] * ld;
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += TPB) s += x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(FULL_MASK, s, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < NWARPS ? part[threadIdx.x] : 0.0;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(FULL_MASK, s, o);
        if (threadIdx.x == 0) part[0] = s / n;
    }
    __syncthreads();
    const double mean = part[0];
    double *a = A + (long long)blockIdx.x * n;
    for (int i = threadIdx.x; i < n; i += TPB) a[i] = (x[i] - mean) * scale;
}

// ---------------------------------------------------------------------------
// Minimum-norm rows of data of small rank (paralingam/adjacency/_cuda_min_norm.py),
// from the data's triangular factor V (p x p, column-major, ld p; the QR's R).
// The host picks the basis (the variables that join it, in causal order),
// cuSOLVER turns V into the basis's coordinates C = Q^T V, and:

// Column j of the p x p column-major array `out` (ld p): the upper part (rows
// 0..src_col) of column src_col of A (column-major, ld `lda`), zeros below;
// src_col = cols[j], or j where `cols` is null; divided by divisor[src_col]
// where `divisor` is not null (the host's V / std). One block per column.
extern "C" __global__ void __launch_bounds__(TPB) upper_columns(
    const double *__restrict__ A, long long lda, int p, const int *__restrict__ cols,
    const double *__restrict__ divisor, double *__restrict__ out)
{
    const int src = cols ? cols[blockIdx.x] : blockIdx.x;
    const double *a = A + (long long)src * lda;
    double *o = out + (long long)blockIdx.x * p;
    const double d = divisor ? divisor[src] : 1.0;  // (a division by 1 is exact)
    for (int i = threadIdx.x; i < p; i += TPB) o[i] = i <= src ? a[i] / d : 0.0;
}

// Column j of A (column-major, ld `lda`, its first n entries) divided by
// divisor[j], in place: the adaptive lasso's standardised variables (the
// host's V / std) from the centred columns. One block per column.
extern "C" __global__ void __launch_bounds__(TPB) divided_columns(
    double *__restrict__ A, long long lda, int n, const double *__restrict__ divisor)
{
    double *a = A + (long long)blockIdx.x * lda;
    const double d = divisor[blockIdx.x];
    for (int i = threadIdx.x; i < n; i += TPB) a[i] = a[i] / d;
}

// out[j] = sum of A[i, j]^2 over rows lo[j] <= i < hi[j] (A column-major, ld
// `lda`). One block per column, a fixed order of the sum (the same bits every run).
extern "C" __global__ void __launch_bounds__(TPB) sums_of_squares(
    const double *__restrict__ A, long long lda, const int *__restrict__ lo,
    const int *__restrict__ hi, double *__restrict__ out)
{
    __shared__ Scratch sh;
    const double *a = A + (long long)blockIdx.x * lda;
    double s = 0.0;
    for (int i = lo[blockIdx.x] + threadIdx.x; i < hi[blockIdx.x]; i += TPB) s += a[i] * a[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

#define MN_TILE 32  // columns of C per shared-memory tile (min_norm_rows)

// Row k - first of `coef` (ld p) for every variable k >= first (one block
// each): the minimum-norm least squares of k on the variables before it,
// C_k^T y with (C_k C_k^T) y = l_k, where C_k holds the coordinates of the
// variables before k on the `before[k]` basis vectors that precede k (column
// j of C, ldc doubles apart, its first width[j] entries: the rest are
// rounding) and l_k the first
// before[k] coordinates of k. G = C_k C_k^T is formed in shared memory
// (a fixed order of the sums), factorised (Cholesky) and solved there. A
// pivot that is not positive and finite sets status[k - first] = 1 (the
// host then computes every row). Dynamic shared memory: 8 (m^2 + (MN_TILE + 3) m)
// bytes for m the largest before[k].
extern "C" __global__ void __launch_bounds__(TPB) min_norm_rows(
    const double *__restrict__ C, long long ldc, int p, int first,
    const int *__restrict__ before, const int *__restrict__ width, double *__restrict__ coef,
    int *__restrict__ status)
{
    extern __shared__ double sh[];
    const int k = first + blockIdx.x, m = before[k];
    double *row = coef + (long long)blockIdx.x * p;
    if (m == 0) {  // every variable before k is zero: no coefficient
        for (int j = threadIdx.x; j < p; j += TPB) row[j] = 0.0;
        return;
    }
    double *G = sh;                 // m x m, column-major; the lower triangle
    double *T = G + m * m;          // a tile: MN_TILE columns of C, m entries each
    double *y = T + MN_TILE * m;    // l_k, then the solutions
    double *z = y + m;
    double *dg = z + m;             // the factor's diagonal
    for (int e = threadIdx.x; e < m * m; e += TPB) G[e] = 0.0;
    for (int j0 = 0; j0 < k; j0 += MN_TILE) {
        const int cols = min(MN_TILE, k - j0);
        __syncthreads();
        for (int e = threadIdx.x; e < cols * m; e += TPB) {
            const int c = e / m, a = e % m;
            T[e] = a < width[j0 + c] ? C[(j0 + c) * ldc + a] : 0.0;
        }
        __syncthreads();
        for (int e = threadIdx.x; e < m * m; e += TPB) {
            const int a = e % m, b = e / m;
            if (a < b) continue;
            double s = G[e];
            for (int c = 0; c < cols; ++c) s += T[c * m + a] * T[c * m + b];
            G[e] = s;
        }
    }
    for (int a = threadIdx.x; a < m; a += TPB) y[a] = C[k * ldc + a];
    // Cholesky, right-looking, column c at a time (G's lower triangle: L)
    for (int c = 0; c < m; ++c) {
        __syncthreads();
        const double piv = G[c + c * m];
        if (!(piv > 0.0) || !isfinite(piv)) {  // (the same value in every thread)
            if (threadIdx.x == 0) status[blockIdx.x] = 1;
            return;
        }
        const double s = sqrt(piv);
        if (threadIdx.x == 0) dg[c] = s;
        for (int a = c + 1 + threadIdx.x; a < m; a += TPB) G[a + c * m] /= s;
        __syncthreads();
        const int rest = m - c - 1;
        for (int e = threadIdx.x; e < rest * rest; e += TPB) {
            const int a = c + 1 + e % rest, b = c + 1 + e / rest;
            if (a >= b) G[a + b * m] -= G[a + c * m] * G[b + c * m];
        }
    }
    __syncthreads();
    // L z = l, then L^T x = z (x into y)
    for (int c = 0; c < m; ++c) {
        const double zc = y[c] / dg[c];
        if (threadIdx.x == 0) z[c] = zc;
        for (int a = c + 1 + threadIdx.x; a < m; a += TPB) y[a] -= G[a + c * m] * zc;
        __syncthreads();
    }
    for (int c = m - 1; c >= 0; --c) {
        const double xc = z[c] / dg[c];
        if (threadIdx.x == 0) y[c] = xc;
        for (int a = threadIdx.x; a < c; a += TPB) z[a] -= G[c + a * m] * xc;
        __syncthreads();
    }
    // row: coefficient of j < k is c_j . x (one warp per variable)
    const int lane = threadIdx.x & 31;
    for (int j = threadIdx.x >> 5; j < p; j += NWARPS) {
        double s = 0.0;
        if (j < k)
            for (int a = lane; a < width[j]; a += 32) s += C[j * ldc + a] * y[a];
        s = warp_sum(s);
        if (lane == 0) row[j] = s;
    }
}

// Row order[k] of the p x p row-major array `out`, in the data's order, for
// every position k of the causal order (one block each): row k of `coef`
// (p x p, row-major, in causal order) placed at the columns order[j] and
// scaled back to the data's scale, ldexp(b, e[order[k]] - e[order[j]]) as the
// host's _scaled_back (exact, or correctly rounded into the subnormals); the
// entries j >= k are zero. A coefficient that is not finite, before or after
// the scaling, sets status[0] = 1 (the host then computes the step).
extern "C" __global__ void __launch_bounds__(TPB) placed_scaled(
    const double *__restrict__ coef, int p, const int *__restrict__ order,
    const int *__restrict__ exponents, double *__restrict__ out, int *__restrict__ status)
{
    const int k = blockIdx.x, i = order[k];
    const double *c = coef + (long long)k * p;
    double *o = out + (long long)i * p;
    bool bad = false;
    for (int j = threadIdx.x; j < p; j += TPB) {
        const int col = order[j];
        const double b = j < k ? c[j] : 0.0;
        const double w = ldexp(b, exponents[i] - exponents[col]);
        bad |= !isfinite(b) || !isfinite(w);
        o[col] = w;
    }
    if (bad) status[0] = 1;
}
