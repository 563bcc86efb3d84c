// One pairwise comparison of ParaLiNGAM, computed by one warp or a group of
// warps, and the entropy moments of one row, computed by a block.
//
// For standardised rows x_a, x_b with correlation rho, the two standardised
// residuals are u = (x_a - rho x_b) / s and v = (x_b - rho x_a) / s with
// s = sqrt(1 - rho^2) (paper Sec. 4.5: no pass over the data is needed to
// normalise them). The entropy approximation of a series needs
//   m1 = mean(log cosh u)  and  m2 = mean(u exp(-u^2 / 2)).
// log cosh u = |u| + log(1 + exp(-2|u|)) - log 2 never overflows.
//
// Float: exp and log go to the special-function unit through
// ex2.approx.ftz / lg2.approx.ftz: 3 such operations per residual sample,
// 6 per sample pair (the issue's floor), except in the pair loop, which takes
// one log per 8 samples of a residual (pl_terms_deferred): 4.25 per sample
// pair. Their error is a few 1e-7 absolute per term, which the
// certified-root check bounds (PL_MOMENT_ERR_GPU, kernels/pl_constants.h).
// Double (dtype="float64", and the re-decisions of uncertain float roots):
// libdevice exp, with the log deferred as in float (PlSums64): the factors
// 1 + exp(-2|u|) of PL_LOG_CHUNK64 samples are multiplied and one log taken.
//
// Accumulation: each lane sums chunks of 8 samples in registers and adds
// each chunk to Kahan-compensated running sums, so the float rounding of a
// sum of n terms stays at a few ulps instead of growing with n / 32.
#ifndef PARALINGAM_COMPARE_CUH
#define PARALINGAM_COMPARE_CUH

#include "pl_constants.h"  // the entropy approximation's constants

__device__ __forceinline__ float pl_ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float pl_lg2(float x)
{
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Terms of one residual sample: a = |u|, l = log(1 + exp(-2|u|)) (float: in
// log2 units, converted by the caller), g = u exp(-u^2 / 2).
__device__ __forceinline__ void pl_terms(float u, float &a, float &l, float &g)
{
    const float au = fabsf(u);
    a += au;
    l += pl_lg2(1.0f + pl_ex2(-2.8853900817779268f * au));  // -2 log2(e)
    g += u * pl_ex2(-0.72134752044448170f * (u * u));       // -log2(e) / 2
}

// The same terms for the pair loop, with the log deferred: p *= 1 + exp(-2|u|)
// (each factor in (1, 2]), and the caller takes one lg2 of the product of 8
// factors (at most 2^8) per chunk: 2 + 1/8 special-function operations per
// residual sample instead of 3. The product adds at most 7 roundings of
// 2^-24 relative (< 6e-7 in log2 units per chunk, less than the 8 lg2.approx
// errors of ~2^-22.6 absolute per chunk it replaces); benchmarks/probe_float.py
// measures the moments against double (docs/design/gpu_search.rst).
__device__ __forceinline__ void pl_terms_deferred(float u, float &a, float &p, float &g)
{
    const float au = fabsf(u);
    a += au;
    p *= 1.0f + pl_ex2(-2.8853900817779268f * au);      // -2 log2(e)
    g += u * pl_ex2(-0.72134752044448170f * (u * u));  // -log2(e) / 2
}

// Samples of a double series whose factors 1 + exp(-2|u|) (each in (1, 2])
// share one log: the product is at most 2^32. libdevice's log1p (with its
// division) costs more double arithmetic than the sample's two exps. Each
// sample adds two roundings of 2^-53 relative (1 + e, and the product) and
// each chunk one of the log: about 2 eps absolute per sample in the sum of
// logs, the order of the sum's own rounding (a factor that rounds to 1,
// exp(-2|u|) < 2^-53, loses less than that).
#define PL_LOG_CHUNK64 32

// Running entropy sums of one double series fed a sample at a time:
// a = sum |u|, l = sum log(1 + exp(-2|u|)) (natural log), g = sum u exp(-u^2/2).
// Call flush() once after the last sample.
struct PlSums64 {
    double a = 0, l = 0, g = 0, prod = 1;
    int k = 0;
    __device__ __forceinline__ void add(double u)
    {
        const double au = fabs(u);
        a += au;
        prod *= 1.0 + exp(-2.0 * au);
        g += u * exp(-0.5 * u * u);
        if (++k == PL_LOG_CHUNK64) flush();
    }
    __device__ __forceinline__ void flush()
    {
        l += log(prod);
        prod = 1.0;
        k = 0;
    }
};

// Unit of the l sums: log2 for float, natural log for double.
__device__ __forceinline__ double pl_l_unit(float) { return PL_LN2; }
__device__ __forceinline__ double pl_l_unit(double) { return 1.0; }

// Kahan-compensated running sum.
template <typename T>
struct PlKahan {
    T s = 0, c = 0;
    __device__ __forceinline__ void add(T x)
    {
        const T y = x - c;
        const T t = s + y;
        c = (t - s) - y;
        s = t;
    }
    __device__ __forceinline__ double value() const { return (double)s - (double)c; }
};

__device__ __forceinline__ double pl_warp_sum(double v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;  // every lane holds the (identical) total
}

// Entropy approximation from the sums of a series of n samples.
__device__ __forceinline__ double pl_entropy(double a, double l, double g, double l_unit, int n)
{
    const double m1 = (a + l_unit * l) / n - PL_LN2;
    const double m2 = g / n;
    return PL_H_GAUSS - PL_K1 * (m1 - PL_BETA) * (m1 - PL_BETA) - PL_K2 * m2 * m2;
}

// Block sums of N values at once (one pair of barriers for all of them);
// sh holds 32 N doubles. Every thread gets the totals.
template <int N>
__device__ __forceinline__ void block_sums(double (&v)[N], double *sh)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = pl_warp_sum(v[k]);
    __syncthreads();
    if (lane == 0) {
#pragma unroll
        for (int k = 0; k < N; ++k) sh[warp * N + k] = v[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = pl_warp_sum(lane < nwarp ? sh[lane * N + k] : 0.0);
}

__device__ __forceinline__ double block_sum(double v, double *sh)
{
    double t[1] = {v};
    block_sums(t, sh);
    return t[0];
}

// Running entropy sums of one float series fed a sample at a time: groups of
// 8 samples summed in registers, each group added to Kahan sums (the
// accumulation of block_series_moments, for loops that visit samples in
// another order).
struct PlSeriesSums {
    PlKahan<float> a, l, g;
    float sa = 0, sl = 0, sg = 0;
    int k = 0;
    __device__ __forceinline__ void add(float x)
    {
        pl_terms(x, sa, sl, sg);
        if (++k == 8) flush();
    }
    __device__ __forceinline__ void flush()
    {
        a.add(sa); l.add(sl); g.add(sg);
        sa = sl = sg = 0;
        k = 0;
    }
};

// Moments {m1, m2} of a series from its three block-summed sums (l in log2 units).
__device__ __forceinline__ void pl_series_moments_of(const double t[3], int n, double out[2])
{
    out[0] = (t[0] + PL_LN2 * t[1]) / n - PL_LN2;
    out[1] = t[2] / n;
}

// Moments {mean log cosh, mean u exp(-u^2/2)} of one row by the whole block:
// thread t takes the sample pairs (2q, 2q + 1) for q = t, t + blockDim, ...
// (8-byte loads; rows are 16-byte aligned) into PlSeriesSums, then a double
// block sum (sh: 32 * 3 doubles). update_data accumulates the rows it writes
// in the same order (rows updated in chunks: each chunk so, the chunks'
// sums added in chunk order). Every thread gets the result.
__device__ void block_series_moments(const float *__restrict__ x, int n, double out[2], double *sh)
{
    PlSeriesSums h;
    const float2 *x2 = reinterpret_cast<const float2 *>(x);
    for (int q = threadIdx.x; q < (n >> 1); q += blockDim.x) {
        const float2 v = x2[q];
        h.add(v.x);
        h.add(v.y);
    }
    if ((n & 1) && threadIdx.x == 0) h.add(x[n - 1]);
    h.flush();
    double t[3] = {h.a.value(), h.l.value(), h.g.value()};
    block_sums(t, sh);
    pl_series_moments_of(t, n, out);
}

__device__ void block_series_moments(const double *__restrict__ x, int n, double out[2], double *sh)
{
    PlSums64 h;
    for (int k = threadIdx.x; k < n; k += blockDim.x) h.add(x[k]);
    h.flush();
    double t[3] = {h.a, h.l, h.g};
    block_sums(t, sh);
    out[0] = (t[0] + t[1]) / n - PL_LN2;
    out[1] = t[2] / n;
}

// Sums of both residuals of the pair (x_a, x_b) over the samples of one
// slice of lanes: lane `lane` of `lanes` (a multiple of 32; a group of warps
// shares a pair when lanes > 32). out = {sum |u|, sum l(u), sum g(u),
// sum |v|, sum l(v), sum g(v)} (l in log2 units for float), summed over the
// calling warp's 32 lanes: every lane of the warp gets the warp's totals.
// x rows are 16-byte aligned (the row stride is a multiple of 32 floats).
// rho arrives in double and is split as rho_hi + rho_lo (two floats): the
// rounding of rho to float would otherwise shift every residual sample by a
// multiple of the partner row, a systematic error amplified by 1 / s.
__device__ __forceinline__ void pl_pair_sums(const float *__restrict__ xa,
                                             const float *__restrict__ xb, double rho64,
                                             float inv_s, int n, int lane, int lanes, double out[6])
{
    const float rho = (float)rho64, rlo = (float)(rho64 - (double)rho);
    PlKahan<float> a_u, l_u, g_u, a_v, l_v, g_v;
    const float4 *va4 = reinterpret_cast<const float4 *>(xa);
    const float4 *vb4 = reinterpret_cast<const float4 *>(xb);
    const int n8 = n >> 3;  // chunks of 8 samples: two float4 per row
    for (int c = lane; c < n8; c += lanes) {
        const float4 a0 = __ldg(va4 + 2 * c), a1 = __ldg(va4 + 2 * c + 1);
        const float4 b0 = __ldg(vb4 + 2 * c), b1 = __ldg(vb4 + 2 * c + 1);
        const float xs[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const float ys[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
        float au = 0, pu = 1, gu = 0, av = 0, pv = 1, gv = 0;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            pl_terms_deferred(fmaf(-rlo, ys[q], fmaf(-rho, ys[q], xs[q])) * inv_s, au, pu, gu);
            pl_terms_deferred(fmaf(-rlo, xs[q], fmaf(-rho, xs[q], ys[q])) * inv_s, av, pv, gv);
        }
        a_u.add(au); l_u.add(pl_lg2(pu)); g_u.add(gu);
        a_v.add(av); l_v.add(pl_lg2(pv)); g_v.add(gv);
    }
    for (int k = (n8 << 3) + lane; k < n; k += lanes) {  // tail: n % 8 samples
        float au = 0, lu = 0, gu = 0, av = 0, lv = 0, gv = 0;
        pl_terms(fmaf(-rlo, xb[k], fmaf(-rho, xb[k], xa[k])) * inv_s, au, lu, gu);
        pl_terms(fmaf(-rlo, xa[k], fmaf(-rho, xa[k], xb[k])) * inv_s, av, lv, gv);
        a_u.add(au); l_u.add(lu); g_u.add(gu);
        a_v.add(av); l_v.add(lv); g_v.add(gv);
    }
    out[0] = pl_warp_sum(a_u.value()); out[1] = pl_warp_sum(l_u.value());
    out[2] = pl_warp_sum(g_u.value()); out[3] = pl_warp_sum(a_v.value());
    out[4] = pl_warp_sum(l_v.value()); out[5] = pl_warp_sum(g_v.value());
}

__device__ __forceinline__ void pl_pair_sums(const double *__restrict__ xa,
                                             const double *__restrict__ xb, double rho,
                                             double inv_s, int n, int lane, int lanes, double out[6])
{
    PlSums64 u, v;
    for (int k = lane; k < n; k += lanes) {
        const double x = xa[k], y = xb[k];
        u.add((x - rho * y) * inv_s);
        v.add((y - rho * x) * inv_s);
    }
    u.flush();
    v.flush();
    out[0] = pl_warp_sum(u.a); out[1] = pl_warp_sum(u.l); out[2] = pl_warp_sum(u.g);
    out[3] = pl_warp_sum(v.a); out[4] = pl_warp_sum(v.l); out[5] = pl_warp_sum(v.g);
}

// Ill-conditioned float pairs (1 - rho^2 small): the residual is formed in
// double from the double rows, so cancellation does not amplify the float
// rounding of the data; the special functions stay in float (l in log2 units).
__device__ __forceinline__ void pl_pair_sums_wide(const double *__restrict__ xa,
                                                  const double *__restrict__ xb, double rho,
                                                  double inv_s, int n, int lane, int lanes,
                                                  double out[6])
{
    PlKahan<float> a_u, l_u, g_u, a_v, l_v, g_v;
    for (int k = lane; k < n; k += lanes) {
        const double x = xa[k], y = xb[k];
        float au = 0, lu = 0, gu = 0, av = 0, lv = 0, gv = 0;
        pl_terms((float)((x - rho * y) * inv_s), au, lu, gu);
        pl_terms((float)((y - rho * x) * inv_s), av, lv, gv);
        a_u.add(au); l_u.add(lu); g_u.add(gu);
        a_v.add(av); l_v.add(lv); g_v.add(gv);
    }
    out[0] = pl_warp_sum(a_u.value()); out[1] = pl_warp_sum(l_u.value());
    out[2] = pl_warp_sum(g_u.value()); out[3] = pl_warp_sum(a_v.value());
    out[4] = pl_warp_sum(l_v.value()); out[5] = pl_warp_sum(g_v.value());
}

// Moments {m1(u), m2(u), m1(v), m2(v)} of a pair from its six sums; l_unit
// converts the l sums to natural log (pl_l_unit).
__device__ __forceinline__ void pl_pair_moments_of(const double sums[6], double l_unit, int n,
                                                   double out[4])
{
    out[0] = (sums[0] + l_unit * sums[1]) / n - PL_LN2;
    out[1] = sums[2] / n;
    out[2] = (sums[3] + l_unit * sums[4]) / n - PL_LN2;
    out[3] = sums[5] / n;
}

// Moments of both residuals of the pair by one warp: out = {m1(u), m2(u),
// m1(v), m2(v)} in every lane.
template <typename T>
__device__ __forceinline__ void pl_pair_moments(const T *__restrict__ xa, const T *__restrict__ xb,
                                                double rho, T inv_s, int n, double out[4])
{
    double sums[6];
    pl_pair_sums(xa, xb, rho, inv_s, n, threadIdx.x & 31, 32, sums);
    pl_pair_moments_of(sums, pl_l_unit(T(0)), n, out);
}

__device__ __forceinline__ void pl_pair_moments_wide(const double *__restrict__ xa,
                                                     const double *__restrict__ xb, double rho,
                                                     double inv_s, int n, double out[4])
{
    double sums[6];
    pl_pair_sums_wide(xa, xb, rho, inv_s, n, threadIdx.x & 31, 32, sums);
    pl_pair_moments_of(sums, PL_LN2, n, out);
}

#endif
