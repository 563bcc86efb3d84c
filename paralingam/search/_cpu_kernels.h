/* Inner loops and atomics of the CPU backend (paralingam/search/_cpu.pyx).
 *
 * Kept in C so that the sample loops are plain pointer loops the compiler
 * vectorises: built with -O3 -ffast-math, GCC calls glibc's vector math
 * (libmvec: exp, log) on 4 doubles at a time. -ffast-math is safe here
 * because every input is finite and standardised (checked in Python), and
 * it is only a compile flag: it is never passed to the linker, so loading
 * the module does not switch the process to flush-to-zero.
 */
#ifndef PARALINGAM_CPU_KERNELS_H
#define PARALINGAM_CPU_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "_runtime.h"  /* flags, clock, fork handler */
#include "pl_constants.h"  /* kernels/: the constants shared with CUDA and Python */

/* log cosh u = |u| + log(1 + exp(-2|u|)) - log 2 never overflows. The sums
 * of log(1 + e), e in (0, 1], take one log per PL_FACTORS terms: the factors
 * 1 + e of a chunk are multiplied lane by lane (at most 2^PL_FACTORS, no
 * overflow) and each lane's product takes one log. libmvec's log costs about
 * four exps, so one log per chunk instead of a log1p per term is what makes
 * the pair loop fast (docs/design/cpu_search.rst, "The pair loop"); each product or 1 + e rounds by eps/2 relative, an
 * absolute error of about eps per term, the order of the sum's own rounding. */
#define PL_LANES 8
#define PL_FACTORS 8
#define PL_CHUNK (PL_LANES * PL_FACTORS)

/* sum(log(t[k])) over one chunk of factors t[k] in [1, 2]. */
static inline double pl_chunk_log_sum(const double *t)
{
    double prod[PL_LANES];
    for (int j = 0; j < PL_LANES; ++j) prod[j] = t[j];
    for (int i = 1; i < PL_FACTORS; ++i)
        for (int j = 0; j < PL_LANES; ++j) prod[j] *= t[i * PL_LANES + j];
    double s = 0.0;
    for (int j = 0; j < PL_LANES; ++j) s += log(prod[j]);
    return s;
}

/* Moments of both standardised residuals of a pair of standardised rows:
 * r_ab = (x_a - rho x_b) * inv_s and r_ba = (x_b - rho x_a) * inv_s, where
 * inv_s = 1 / sqrt(1 - rho^2) is the inverse std of either residual.
 * out[0..1] are the moments of r_ab, out[2..3] those of r_ba. */
static inline void pl_pair_moments(const double *xa, const double *xb, double rho,
                                   double inv_s, Py_ssize_t n, double *out)
{
    double lc_ab = 0.0, g_ab = 0.0, lc_ba = 0.0, g_ba = 0.0;
    double tu[PL_CHUNK], tv[PL_CHUNK];
    for (Py_ssize_t k0 = 0; k0 < n; k0 += PL_CHUNK) {
        const Py_ssize_t m = n - k0 < PL_CHUNK ? n - k0 : PL_CHUNK;
        const double *a = xa + k0, *b = xb + k0;
        for (Py_ssize_t k = 0; k < m; ++k) {
            double u = (a[k] - rho * b[k]) * inv_s;
            double v = (b[k] - rho * a[k]) * inv_s;
            double au = fabs(u), av = fabs(v);
            lc_ab += au;
            lc_ba += av;
            tu[k] = 1.0 + exp(-2.0 * au);
            tv[k] = 1.0 + exp(-2.0 * av);
            g_ab += u * exp(-0.5 * u * u);
            g_ba += v * exp(-0.5 * v * v);
        }
        for (Py_ssize_t k = m; k < PL_CHUNK; ++k) tu[k] = tv[k] = 1.0;
        lc_ab += pl_chunk_log_sum(tu);
        lc_ba += pl_chunk_log_sum(tv);
    }
    out[0] = lc_ab;
    out[1] = g_ab;
    out[2] = lc_ba;
    out[3] = g_ba;
}

/* Moments of the standardised residual r_ab = (x_a - rho x_b) * inv_s alone,
 * as out[0..1] of pl_pair_moments (prior knowledge: a partner in V_j needs
 * no residual of its own). */
static inline void pl_residual_moments(const double *xa, const double *xb, double rho,
                                       double inv_s, Py_ssize_t n, double *out)
{
    double lc = 0.0, g = 0.0;
    double t[PL_CHUNK];
    for (Py_ssize_t k0 = 0; k0 < n; k0 += PL_CHUNK) {
        const Py_ssize_t m = n - k0 < PL_CHUNK ? n - k0 : PL_CHUNK;
        const double *a = xa + k0, *b = xb + k0;
        for (Py_ssize_t k = 0; k < m; ++k) {
            double u = (a[k] - rho * b[k]) * inv_s;
            double au = fabs(u);
            lc += au;
            t[k] = 1.0 + exp(-2.0 * au);
            g += u * exp(-0.5 * u * u);
        }
        for (Py_ssize_t k = m; k < PL_CHUNK; ++k) t[k] = 1.0;
        lc += pl_chunk_log_sum(t);
    }
    out[0] = lc;
    out[1] = g;
}

/* Moments of the maximum-entropy approximation for one standardised row:
 * out[0] = sum(log cosh u) + n log 2 (the log 2 is subtracted by the caller),
 * out[1] = sum(u exp(-u^2 / 2)): the residual of x on nothing (rho = 0). */
static inline void pl_row_moments(const double *x, Py_ssize_t n, double *out)
{
    pl_residual_moments(x, x, 0.0, 1.0, n, out);
}

/* Hyvarinen's maximum-entropy approximation (pl_constants.h): H = H_gauss -
 * K1 (E log cosh u - BETA)^2 - K2 (E u exp(-u^2/2))^2, with E log cosh u =
 * lc / n - log 2 from the sums of pl_pair_moments over n samples. */

static inline double pl_entropy(double lc, double g, Py_ssize_t n)
{
    const double a = lc / n - PL_LN2 - PL_BETA, b = g / n;
    return PL_H_GAUSS - PL_K1 * a * a - PL_K2 * b * b;
}

/* Bound on the error of pl_entropy when each mean moment errs by at most D
 * (dtype float32): |a_f^2 - a^2| <= D (2 |a_f| + D), the same for b. */
static inline double pl_entropy_bound(double lc, double g, Py_ssize_t n, double D)
{
    const double a = lc / n - PL_LN2 - PL_BETA, b = g / n;
    return 2.0 * PL_K1 * fabs(a) * D + 2.0 * PL_K2 * fabs(b) * D + (PL_K1 + PL_K2) * D * D;
}

/* The float64 statistic I(a, b) = (H(x_b) + H(r_a^(b))) - (H(x_a) + H(r_b^(a)))
 * of two standardised rows with entropies hxa, hxb; with both == 0 (a
 * partner in V_j, prior knowledge) x_b stands in for its own residual:
 * (H(x_b) + H(r_a^(b))) - (H(x_a) + H(x_b)).
 *
 * One compiled copy (no inlining, no cloning): with -ffast-math the compiler
 * may contract and reorder each inlined copy differently, and the float32
 * search re-decides its uncertain roots with this very function, so it must
 * give the float64 search's bits (exact ties are decided by them). */
#if defined(__GNUC__) && !defined(__clang__)
#define PL_ONE_COPY __attribute__((noinline, noipa))
#else
#define PL_ONE_COPY __attribute__((noinline))
#endif
static PL_ONE_COPY double pl_stat_f64(const double *xa, const double *xb, double rho,
                                      double inv_s, Py_ssize_t n, double hxa, double hxb,
                                      int both)
{
    double m[4];
    if (both) {
        pl_pair_moments(xa, xb, rho, inv_s, n, m);
        return (hxb + pl_entropy(m[0], m[1], n)) - (hxa + pl_entropy(m[2], m[3], n));
    }
    pl_residual_moments(xa, xb, rho, inv_s, n, m);
    return (hxb + pl_entropy(m[0], m[1], n)) - (hxa + hxb);
}

/* A worker's score from its row of statistics: sum of weight[j] min(0, I)^2
 * in index order. One compiled copy, for the same reason as pl_stat_f64: the
 * search's scores and a re-decision's must tie exactly where they tie. */
static PL_ONE_COPY double pl_score_f64(const double *stat, const double *weight, int r)
{
    double total = 0.0;
    for (int j = 0; j < r; ++j)
        if (stat[j] < 0.0)
            total += weight[j] * stat[j] * stat[j];
    return total;
}

/* ---- dtype "float32": double residuals, float special functions ----
 *
 * The residual u is formed in double from the double rows and rounded once
 * to float; sum |u| stays in double. exp and log run in float, 16 lanes at a
 * time, inline (pl_expf_neg, pl_lane_log_sum_f32), faster than the double
 * loop (docs/design/cpu_search.rst, "Float32 comparisons with certified
 * roots"). Each lane multiplies PL_FACTORS
 * factors 1 + exp(-2|u|) and sums PL_FACTORS terms u exp(-u^2 / 2) in float;
 * the lanes' logs and sums are added in double. Worst case per term, in
 * absolute value: the log part (rounding of u, the exp's error of a few
 * ulps, the rounding of 1 + e, of the product and of the lane log) stays
 * under 5e-7, and the g part (the same plus the float sums of 8 terms of at
 * most 0.61) under 6e-7: PL_MOMENT_ERR_CPU (pl_constants.h) bounds each mean by
 * 1e-6. */
#define PL_FLANES 16
#define PL_FCHUNK (PL_FLANES * PL_FACTORS)

/* exp(x) in float for x <= 0, inline so that the chunk loop vectorises
 * without calls (a call to libmvec's expf spills every vector register,
 * which loses most of float's gain). x = k ln 2 + r with k = rint(x /
 * ln 2) and r in [-0.347, 0.347] (ln 2 split in two for the subtraction),
 * exp(r) by its Taylor polynomial of degree 7 (truncation under 8e-9
 * relative; Horner's roundings about 1 ulp), times 2^k from the exponent
 * bits. x is clamped at -87, where exp(x) < 2^-125: the terms it feeds (1 +
 * exp(-2|u|), u exp(-u^2/2)) lose nothing that float could hold. */
static inline __attribute__((always_inline)) float pl_expf_neg(float x)
{
    x = x < -87.0f ? -87.0f : x;
    const float k = rintf(x * 1.44269504f);
    const float r = (x - k * 0.693145752f) - k * 1.42860677e-6f;  /* ln 2 = hi + lo */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t bits = ((int32_t)k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* sum(log(p[j])) over the PL_FLANES lanes' products p[j] in [1, 2^8], inline
 * (GCC leaves a logf call per lane scalar): p = 2^e m with m in
 * [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <=
 * 0.172, by its series to s^9 (truncation under 1e-9). The integer parts
 * are summed exactly and scaled by log 2 in double. */
static inline double pl_lane_log_sum_f32(const float *p)
{
    float esum = 0.0f, lsum = 0.0f;
    for (int j = 0; j < PL_FLANES; ++j) {
        int32_t bits;
        memcpy(&bits, &p[j], sizeof bits);
        const int32_t e = (bits - 0x3f3504f3) >> 23;  /* 0x3f3504f3: sqrt(1/2) */
        const int32_t mbits = bits - (e << 23);
        float m;
        memcpy(&m, &mbits, sizeof m);
        const float s = (m - 1.0f) / (m + 1.0f), z = s * s;
        esum += (float)e;
        lsum += s * (2.0f + z * (2.0f / 3.0f + z * (2.0f / 5.0f + z * (2.0f / 7.0f + z * (2.0f / 9.0f)))));
    }
    return PL_LN2 * (double)esum + (double)lsum;
}

/* Sums {|u|, log(1 + exp(-2|u|)), u exp(-u^2/2)} over one chunk of
 * PL_FCHUNK samples of r_ab = (x_a - rho x_b) * inv_s and, with `both`, of
 * r_ba: added to t[0..2] for r_ab, t[3..5] for r_ba. Always inlined with a
 * constant `both`, so each use compiles to one branch-free loop. */
static inline __attribute__((always_inline)) void pl_chunk_sums_f32(
    const double *a, const double *b, double rho, double inv_s, const int both, double *t)
{
    double su[PL_FLANES], sv[PL_FLANES];
    float pu[PL_FLANES], pv[PL_FLANES], gu[PL_FLANES], gv[PL_FLANES];
    for (int j = 0; j < PL_FLANES; ++j) {
        su[j] = sv[j] = 0.0;
        pu[j] = pv[j] = 1.0f;
        gu[j] = gv[j] = 0.0f;
    }
    for (int i = 0; i < PL_FACTORS; ++i)
        for (int j = 0; j < PL_FLANES; ++j) {
            const double x = a[i * PL_FLANES + j], y = b[i * PL_FLANES + j];
            const double u = (x - rho * y) * inv_s;
            const float uf = (float)u;
            su[j] += fabs(u);
            pu[j] *= 1.0f + pl_expf_neg(-2.0f * fabsf(uf));
            gu[j] += uf * pl_expf_neg(-0.5f * uf * uf);
            if (both) {
                const double v = (y - rho * x) * inv_s;
                const float vf = (float)v;
                sv[j] += fabs(v);
                pv[j] *= 1.0f + pl_expf_neg(-2.0f * fabsf(vf));
                gv[j] += vf * pl_expf_neg(-0.5f * vf * vf);
            }
        }
    t[1] += pl_lane_log_sum_f32(pu);
    if (both)
        t[4] += pl_lane_log_sum_f32(pv);
    for (int j = 0; j < PL_FLANES; ++j) {
        t[0] += su[j];
        t[2] += gu[j];
        if (both) {
            t[3] += sv[j];
            t[5] += gv[j];
        }
    }
}

/* pl_pair_moments (both) or pl_residual_moments (r_ab alone) in float. The
 * last m < PL_FCHUNK samples are padded with zeros: a zero residual adds
 * nothing to the |u| and g sums and an exact factor 2 to a lane's product,
 * whose log 2 is taken back out in double. */
static inline void pl_moments_f32(const double *xa, const double *xb, double rho, double inv_s,
                                  Py_ssize_t n, int both, double *out)
{
    double t[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    Py_ssize_t k0 = 0;
    if (both)
        for (; k0 + PL_FCHUNK <= n; k0 += PL_FCHUNK)
            pl_chunk_sums_f32(xa + k0, xb + k0, rho, inv_s, 1, t);
    else
        for (; k0 + PL_FCHUNK <= n; k0 += PL_FCHUNK)
            pl_chunk_sums_f32(xa + k0, xb + k0, rho, inv_s, 0, t);
    const Py_ssize_t m = n - k0;
    if (m > 0) {
        double a[PL_FCHUNK], b[PL_FCHUNK];
        for (Py_ssize_t k = 0; k < PL_FCHUNK; ++k) {
            a[k] = k < m ? xa[k0 + k] : 0.0;
            b[k] = k < m ? xb[k0 + k] : 0.0;
        }
        if (both)
            pl_chunk_sums_f32(a, b, rho, inv_s, 1, t);
        else
            pl_chunk_sums_f32(a, b, rho, inv_s, 0, t);
        t[1] -= (double)(PL_FCHUNK - m) * PL_LN2;
        t[4] -= both ? (double)(PL_FCHUNK - m) * PL_LN2 : 0.0;
    }
    out[0] = t[0] + t[1];
    out[1] = t[2];
    out[2] = t[3] + t[4];
    out[3] = t[5];
}

/* The float32 statistic (pl_moments_f32, then as pl_stat_f64) and in err
 * the bound on its error when each mean moment errs by at most D. One
 * compiled copy, as pl_stat_f64: with -ffast-math each inlined copy may
 * round differently, so the search's statistics would depend on what the
 * compiler inlines where. */
static PL_ONE_COPY double pl_stat_f32(const double *xa, const double *xb, double rho,
                                      double inv_s, Py_ssize_t n, double hxa, double hxb,
                                      int both, double D, double *err)
{
    double m[4];
    pl_moments_f32(xa, xb, rho, inv_s, n, both, m);
    err[0] = pl_entropy_bound(m[0], m[1], n, D);
    if (!both)
        return (hxb + pl_entropy(m[0], m[1], n)) - (hxa + hxb);
    err[0] += pl_entropy_bound(m[2], m[3], n, D);
    return (hxb + pl_entropy(m[0], m[1], n)) - (hxa + pl_entropy(m[2], m[3], n));
}

/* x <- (x - rho * xr) * inv_s, returning sum(x), sum(x^2) and sum(x * xr) of
 * the new row so the caller can check it is still standardised and
 * orthogonal to the root (the covariance-drift monitor). */
static inline void pl_regress_row(double *x, const double *xr, double rho, double inv_s,
                                  Py_ssize_t n, double *out)
{
    double s = 0.0, ss = 0.0, sr = 0.0;
    for (Py_ssize_t k = 0; k < n; ++k) {
        double v = (x[k] - rho * xr[k]) * inv_s;
        x[k] = v;
        s += v;
        ss += v * v;
        sr += v * xr[k];
    }
    out[0] = s;
    out[1] = ss;
    out[2] = sr;
}

/* Correlation of two rows computed from the data (one pass; the rows are
 * standardised to within the drift tolerance, so the centring terms are
 * tiny). The updated covariance loses accuracy for near-collinear
 * variables: each update divides its errors by 1 - rho^2 with the root. The
 * decisions of the degenerate-data policy therefore use this instead.
 * Returns 0 for a row without variance. */
static inline double pl_row_corr(const double *xa, const double *xb, Py_ssize_t n)
{
    double sa = 0.0, sb = 0.0, sab = 0.0, saa = 0.0, sbb = 0.0;
    for (Py_ssize_t k = 0; k < n; ++k) {
        double a = xa[k], b = xb[k];
        sa += a;
        sb += b;
        sab += a * b;
        saa += a * a;
        sbb += b * b;
    }
    double ma = sa / n, mb = sb / n;
    double cab = sab / n - ma * mb, caa = saa / n - ma * ma, cbb = sbb / n - mb * mb;
    if (!(caa > 0.0) || !(cbb > 0.0))
        return 0.0;
    double rho = cab / sqrt(caa * cbb);
    return rho > 1.0 ? 1.0 : (rho < -1.0 ? -1.0 : rho);
}

/* Residual fraction of row xa on row xb (paralingam.search.policy.residual_fraction):
 * the variance of xa - beta xb over that of xa, with the least-squares beta,
 * from centred rows. Unlike 1 - rho^2 (absolute rounding error about eps)
 * it resolves fractions far below eps, as left by an outlier that dominates
 * the variance, and does not depend on how exactly the rows are
 * standardised. Three passes; used only for pairs within the verify band. */
static inline double pl_residual_fraction(const double *xa, const double *xb, Py_ssize_t n)
{
    double sa = 0.0, sb = 0.0;
    for (Py_ssize_t k = 0; k < n; ++k) {
        sa += xa[k];
        sb += xb[k];
    }
    const double ma = sa / n, mb = sb / n;
    double sab = 0.0, saa = 0.0, sbb = 0.0;
    for (Py_ssize_t k = 0; k < n; ++k) {
        const double a = xa[k] - ma, b = xb[k] - mb;
        sab += a * b;
        saa += a * a;
        sbb += b * b;
    }
    if (!(saa > 0.0))
        return 0.0;
    if (!(sbb > 0.0))
        return 1.0;
    const double beta = sab / sbb;
    double see = 0.0;
    for (Py_ssize_t k = 0; k < n; ++k) {
        const double e = (xa[k] - ma) - beta * (xb[k] - mb);
        see += e * e;
    }
    return see / saa;
}

/* Exact dependence (paralingam.search.policy.is_dependent): the fraction left,
 * frac * f, within tol and the residual at most `margin` times its rounding
 * noise. Written as the policy writes it, so that the decisions agree. */
static inline int pl_dependent(double f, double frac, double tol, double noise, double margin)
{
    const double m = margin * noise;
    return frac * f <= tol && f <= m * m;
}

/* ---- atomics: pair locks, messages to partner scores, done counters ---- */

/* Claim a free pair (0 -> 1). Returns 1 when this thread won it. */
static inline int pl_claim(int *state)
{
    int expected = 0;
    return __atomic_compare_exchange_n(state, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_RELAXED);
}

static inline void pl_add_int(int *p, int v) { __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }

static inline double pl_load_double(const double *p)
{
    uint64_t bits = __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static inline void pl_add_double(double *p, double v)
{
    uint64_t *bits = (uint64_t *)p;
    uint64_t old = __atomic_load_n(bits, __ATOMIC_RELAXED), new_bits;
    do {
        double cur;
        memcpy(&cur, &old, sizeof cur);
        cur += v;
        memcpy(&new_bits, &cur, sizeof cur);
    } while (!__atomic_compare_exchange_n(bits, &old, new_bits, 1, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
}

static inline void pl_count(long long *p) { __atomic_fetch_add(p, 1, __ATOMIC_RELAXED); }

/* First of the next `chunk` tasks of a hand-made dynamic schedule. */
static inline int pl_next_tasks(int *counter, int chunk)
{
    return __atomic_fetch_add(counter, chunk, __ATOMIC_RELAXED);
}

/* ---- clocks of the thread-count check (see _cpu.pyx, BUSY_MARGIN) ---- */

/* (wall-clock seconds: pl_wall_seconds, _runtime.h) */

/* CPU seconds of the calling thread: time it ran, not time it waited for a
 * core. Returns -1 where the platform has no such clock (no check then). */
static inline double pl_thread_seconds(void)
{
#ifdef CLOCK_THREAD_CPUTIME_ID
    struct timespec t;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) == 0)
        return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
#endif
    return -1.0;
}

/* Partner order of one worker: the other workers by decreasing |correlation|
 * (ties to the lower index). A strongly correlated partner gives a large
 * |I|, so a worker that is not the root usually passes the threshold after
 * its first few comparisons; the order changes which pairs are compared,
 * never the root (the threshold test is exact in any order).
 *
 * |correlation| is quantised to PL_ORDER_BUCKETS steps and the partners,
 * taken in index order, are placed by one stable counting pass: O(r), and
 * the order of the CUDA backend (kernels/paralingam.cu, order_partners).
 * Finer steps compare no fewer pairs, and with 256 buckets one counting pass
 * is a stable sort (docs/design/cpu_search.rst, "Partner order"). */

static inline unsigned pl_order_bucket(double rho)
{
    const double q = fabs(rho) * PL_ORDER_BUCKETS;  /* bucket 0: the largest |correlation| */
    return PL_ORDER_BUCKETS - 1u - (q < PL_ORDER_BUCKETS - 1.0 ? (unsigned)q : PL_ORDER_BUCKETS - 1u);
}

/* out[0..r-2]: the partners of worker w; idx maps workers to rows of the
 * (p, p) correlation matrix cov; scratch holds r unsigned ints. */
static inline void pl_order_partners(const double *cov, Py_ssize_t p, const int *idx, int r,
                                     int w, unsigned *scratch, int *out)
{
    const double *row = cov + (Py_ssize_t)idx[w] * p;
    int start[PL_ORDER_BUCKETS] = {0};
    for (int t = 0; t < r; ++t) {
        if (t == w) continue;
        scratch[t] = pl_order_bucket(row[idx[t]]);
        ++start[scratch[t]];
    }
    for (int b = 0, sum = 0; b < PL_ORDER_BUCKETS; ++b) { const int c = start[b]; start[b] = sum; sum += c; }
    for (int t = 0; t < r; ++t)
        if (t != w) out[start[scratch[t]]++] = t;
}

#endif
