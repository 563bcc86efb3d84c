"""Probe the float comparison on the GPU: accuracy against double, and speed.

Measures, with the comparison code the CUDA backend uses (kernels/compare.cuh):

* the largest |float - double| error of the entropy moments m1 = mean log cosh
  and m2 = mean u exp(-u^2/2) over many pairs of standardised rows drawn from
  varied distributions (uniform, Laplace, exponential, Student t(3), bimodal,
  paper-style LiNGAM data), for several n and correlations. These errors set
  the certified-root bound PL_MOMENT_ERR_GPU in kernels/pl_constants.h;
* the throughput of the float pair loop in sample pairs per second against
  the special-function floor (6 MUFU operations per sample pair, measured
  with a kernel that does nothing else), and of the double loop.

Prints a table and writes JSON (``--json``). Run on the GPU machine:
``python benchmarks/probe_float.py --json $OUT/probe.json``.
"""

import statistics
from pathlib import Path

import numpy as np

import _common  # benchmarks/ is on sys.path when run as a script

KERNELS = Path(__file__).resolve().parents[1] / "kernels"

SRC = r"""
#include "compare.cuh"

extern "C" __global__ void moments32(const float *X, int ld, int n, const int *pa, const int *pb,
                                     const double *rho, double *out, int npairs)
{
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (warp >= npairs) return;
    const double r = rho[warp];
    double m[4];
    pl_pair_moments(X + (size_t)pa[warp] * ld, X + (size_t)pb[warp] * ld, r,
                    (float)(1.0 / sqrt(1.0 - r * r)), n, m);
    if ((threadIdx.x & 31) == 0) for (int q = 0; q < 4; ++q) out[4 * warp + q] = m[q];
}

extern "C" __global__ void moments_wide(const double *X, int ld, int n, const int *pa,
                                        const int *pb, const double *rho, double *out, int npairs)
{
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (warp >= npairs) return;
    const double r = rho[warp];
    double m[4];
    pl_pair_moments_wide(X + (size_t)pa[warp] * ld, X + (size_t)pb[warp] * ld, r,
                         1.0 / sqrt(1.0 - r * r), n, m);
    if ((threadIdx.x & 31) == 0) for (int q = 0; q < 4; ++q) out[4 * warp + q] = m[q];
}

extern "C" __global__ void moments64(const double *X, int ld, int n, const int *pa, const int *pb,
                                     const double *rho, double *out, int npairs)
{
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (warp >= npairs) return;
    const double r = rho[warp];
    double m[4];
    pl_pair_moments(X + (size_t)pa[warp] * ld, X + (size_t)pb[warp] * ld, r,
                    1.0 / sqrt(1.0 - r * r), n, m);
    if ((threadIdx.x & 31) == 0) for (int q = 0; q < 4; ++q) out[4 * warp + q] = m[q];
}

// One block per row, as the engine computes H(x) (standardise, update_data).
extern "C" __global__ void series32(const float *X, int ld, int n, double *out, int rows)
{
    __shared__ double sh[32 * 3];
    if (blockIdx.x >= rows) return;
    double m[2];
    block_series_moments(X + (size_t)blockIdx.x * ld, n, m, sh);
    if (threadIdx.x == 0) { out[2 * blockIdx.x] = m[0]; out[2 * blockIdx.x + 1] = m[1]; }
}

extern "C" __global__ void series64(const double *X, int ld, int n, double *out, int rows)
{
    __shared__ double sh[32 * 3];
    if (blockIdx.x >= rows) return;
    double m[2];
    block_series_moments(X + (size_t)blockIdx.x * ld, n, m, sh);
    if (threadIdx.x == 0) { out[2 * blockIdx.x] = m[0]; out[2 * blockIdx.x + 1] = m[1]; }
}

// Persistent version for timing: warps stride over the pair list.
extern "C" __global__ void __launch_bounds__(256) throughput32(
    const float *X, int ld, int n, const int *pa, const int *pb, const double *rho,
    double *out, int npairs)
{
    const int nwarps = (gridDim.x * blockDim.x) >> 5;
    for (int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < npairs; w += nwarps) {
        const double r = rho[w];
        double m[4];
        pl_pair_moments(X + (size_t)pa[w] * ld, X + (size_t)pb[w] * ld, r,
                        (float)(1.0 / sqrt(1.0 - r * r)), n, m);
        if ((threadIdx.x & 31) == 0) out[w] = m[0] + m[1] + m[2] + m[3];
    }
}

extern "C" __global__ void throughput64(const double *X, int ld, int n, const int *pa,
                                        const int *pb, const double *rho, double *out, int npairs)
{
    const int nwarps = (gridDim.x * blockDim.x) >> 5;
    for (int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < npairs; w += nwarps) {
        const double r = rho[w];
        double m[4];
        pl_pair_moments(X + (size_t)pa[w] * ld, X + (size_t)pb[w] * ld, r,
                        1.0 / sqrt(1.0 - r * r), n, m);
        if ((threadIdx.x & 31) == 0) out[w] = m[0] + m[1] + m[2] + m[3];
    }
}

"""


def make_rows(kind, n, rng):
    if kind == "uniform":
        x = rng.uniform(-1, 1, n)
    elif kind == "laplace":
        x = rng.laplace(size=n)
    elif kind == "exponential":
        x = rng.exponential(size=n)
    elif kind == "t3":
        x = rng.standard_t(3, size=n)
    elif kind == "bimodal":
        x = rng.normal(size=n) * 0.3 + rng.choice([-1.0, 1.0], n)
    elif kind == "gauss":
        x = rng.normal(size=n)
    else:
        raise ValueError(kind)
    return x


def standardise(X):
    X = X - X.mean(axis=1, keepdims=True)
    return X / np.sqrt((X * X).mean(axis=1, keepdims=True))


def dense_rounds(mod, rng):
    """Time of one launch that compares all r(r-1)/2 pairs of r rows, warp per pair.

    The lower bound on a round of the engine that compares every pair: its
    launch, the pair loop and the drain, with no claims, locks or messages.
    """
    import pycuda.driver as drv

    import bench_gpu  # benchmarks/ is on sys.path when run as a script

    floor = bench_gpu.mufu_floor()
    sms = drv.Context.get_device().get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    fn = mod.get_function("throughput32")
    start, stop = drv.Event(), drv.Event()
    report = {"floor_sample_pairs_per_s": floor, "rows": []}
    print(f"MUFU floor: {floor:.3e} sample-pairs/s")
    print("| n | r | pairs | one launch (us) | % of floor |")
    print("|---|---|---|---|---|")
    for n in (1024, 2048, 4096, 8192):
        ld = (n + 31) // 32 * 32
        X = standardise(rng.laplace(size=(400, n)))
        X32 = np.zeros((400, ld), dtype=np.float32)
        X32[:, :n] = X
        d_x = drv.to_device(X32)
        for r in (30, 60, 100, 200, 400):
            pa, pb = (a.astype(np.int32) for a in np.triu_indices(r, 1))
            npairs = len(pa)
            rho = np.full(npairs, 0.3)
            d_pa, d_pb, d_rho = drv.to_device(pa), drv.to_device(pb), drv.to_device(rho)
            d_out = drv.mem_alloc(npairs * 8)
            grid = (min(sms * 8, (npairs * 32 + 255) // 256), 1)
            args = (d_x, np.int32(ld), np.int32(n), d_pa, d_pb, d_rho, d_out, np.int32(npairs))
            fn(*args, block=(256, 1, 1), grid=grid)
            ts = []
            for _ in range(21):
                start.record()
                fn(*args, block=(256, 1, 1), grid=grid)
                stop.record()
                stop.synchronize()
                ts.append(stop.time_since(start) * 1e-3)
            t = statistics.median(ts)
            pct = 100 * npairs * n / t / floor
            report["rows"].append({"n": n, "r": r, "pairs": npairs, "seconds": t, "pct_floor": pct})
            print(f"| {n} | {r} | {npairs} | {t * 1e6:.1f} | {pct:.1f}% |")
    return report


def main():
    ap = _common.parser("probe_float", __doc__, gpu=True, modes=("accuracy", "dense"))
    ap.add_argument("--pairs", type=int, default=4000)
    args = ap.parse_args()  # dense: one launch comparing all pairs of r rows (a round without a
    # threshold, claims or messages) for several r and n, the section "dense"

    import pycuda.driver as drv
    from pycuda.compiler import SourceModule

    import bench_gpu  # benchmarks/ is on sys.path when run as a script
    from paralingam.search import _cuda

    _cuda._context()  # the backend's context, which bench_gpu's floor kernel uses

    mod = SourceModule(SRC, no_extern_c=True, include_dirs=[str(KERNELS)],
                       options=["-O3", "-std=c++17"], arch="sm_90")
    rng = np.random.default_rng(7)
    if args.mode == "dense":
        report = dense_rounds(mod, rng)
        _common.write_result(args, report)
        return
    kinds = ["uniform", "laplace", "exponential", "t3", "bimodal", "gauss"]
    report = {"accuracy": [], "throughput": {}}

    worst = {"m1": 0.0, "m2": 0.0, "m1_wide": 0.0, "m2_wide": 0.0, "s1": 0.0, "s2": 0.0}
    for n in (300, 1024, 4099, 10000, 32768):
        ld = (n + 31) // 32 * 32
        rows = 96
        X = np.stack([make_rows(kinds[k % len(kinds)], n, rng) for k in range(rows)])
        # mix rows so that correlations span 0..0.999999
        mix = rng.normal(size=(rows, rows)) * (rng.random((rows, rows)) < 0.05)
        X = X + mix @ X * 0.5
        for k in range(0, 12):
            t = 10.0 ** -rng.uniform(1, 6)
            X[k + 12] = X[k] + t * X[k + 40]  # near copies: 1 - rho^2 down to ~1e-12
        X = standardise(X)
        X64 = np.zeros((rows, ld)); X64[:, :n] = X
        X32 = X64.astype(np.float32)
        cov = X @ X.T / n
        pa, pb = np.triu_indices(rows, 1)
        sel = rng.choice(len(pa), size=min(args.pairs, len(pa)), replace=False)
        pa, pb = pa[sel].astype(np.int32), pb[sel].astype(np.int32)
        rho = cov[pa, pb].copy()
        keep = 1.0 - rho**2 > 1e-10
        pa, pb, rho = pa[keep], pb[keep], rho[keep]
        npairs = len(pa)
        d_x32, d_x64 = drv.to_device(X32), drv.to_device(X64)
        d_pa, d_pb, d_rho = drv.to_device(pa), drv.to_device(pb), drv.to_device(rho)
        out32 = np.zeros((npairs, 4)); out64 = np.zeros((npairs, 4)); outw = np.zeros((npairs, 4))
        grid = ((npairs * 32 + 255) // 256, 1)
        mod.get_function("moments32")(d_x32, np.int32(ld), np.int32(n), d_pa, d_pb, d_rho,
                                      drv.Out(out32), np.int32(npairs), block=(256, 1, 1), grid=grid)
        mod.get_function("moments64")(d_x64, np.int32(ld), np.int32(n), d_pa, d_pb, d_rho,
                                      drv.Out(out64), np.int32(npairs), block=(256, 1, 1), grid=grid)
        mod.get_function("moments_wide")(d_x64, np.int32(ld), np.int32(n), d_pa, d_pb, d_rho,
                                         drv.Out(outw), np.int32(npairs), block=(256, 1, 1), grid=grid)
        s32 = np.zeros((rows, 2)); s32_256 = np.zeros((rows, 2)); s64 = np.zeros((rows, 2))
        g2 = (rows, 1)  # one block per row: 256 threads (standardise, update_data), and 512
        mod.get_function("series32")(d_x32, np.int32(ld), np.int32(n), drv.Out(s32), np.int32(rows),
                                     block=(512, 1, 1), grid=g2)
        mod.get_function("series32")(d_x32, np.int32(ld), np.int32(n), drv.Out(s32_256),
                                     np.int32(rows), block=(256, 1, 1), grid=g2)
        mod.get_function("series64")(d_x64, np.int32(ld), np.int32(n), drv.Out(s64), np.int32(rows),
                                     block=(512, 1, 1), grid=g2)
        # numpy check of the double kernel
        k0 = 0
        u = (X[pa[k0]] - rho[k0] * X[pb[k0]]) / np.sqrt(1 - rho[k0] ** 2)
        m1_np = np.mean(np.logaddexp(u, -u) - np.log(2.0))
        assert abs(m1_np - out64[k0, 0]) < 1e-12, (m1_np, out64[k0, 0])
        f = 1.0 - rho**2
        for lo, hi, label in ((0.01, 2.0, ""), (1e-10, 0.01, "_ill")):
            m = (f >= lo) & (f < hi)
            if not m.any():
                continue
            e1 = np.abs(out32[m][:, [0, 2]] - out64[m][:, [0, 2]]).max()
            e2 = np.abs(out32[m][:, [1, 3]] - out64[m][:, [1, 3]]).max()
            w1 = np.abs(outw[m][:, [0, 2]] - out64[m][:, [0, 2]]).max()
            w2 = np.abs(outw[m][:, [1, 3]] - out64[m][:, [1, 3]]).max()
            row = {"n": n, "pairs": int(m.sum()), "f_range": [lo, hi], "float_m1": e1, "float_m2": e2,
                   "wide_m1": w1, "wide_m2": w2}
            report["accuracy"].append(row)
            print(f"n={n:6d} 1-rho^2 in [{lo:g},{hi:g}) pairs={m.sum():5d}  float |dm1|={e1:.2e} "
                  f"|dm2|={e2:.2e}   wide |dm1|={w1:.2e} |dm2|={w2:.2e}")
            if label == "":
                worst["m1"] = max(worst["m1"], e1); worst["m2"] = max(worst["m2"], e2)
            worst["m1_wide"] = max(worst["m1_wide"], w1); worst["m2_wide"] = max(worst["m2_wide"], w2)
        for s_float in (s32, s32_256):
            worst["s1"] = max(worst["s1"], np.abs(s_float[:, 0] - s64[:, 0]).max())
            worst["s2"] = max(worst["s2"], np.abs(s_float[:, 1] - s64[:, 1]).max())
    report["worst"] = worst
    print("worst:", {k: f"{v:.2e}" for k, v in worst.items()})

    # ---- throughput ----
    dev = drv.Context.get_device()
    sms = dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    start, stop = drv.Event(), drv.Event()

    def timed(fn, *a, block, grid, reps=7):
        fn(*a, block=block, grid=grid)
        ts = []
        for _ in range(reps):
            start.record(); fn(*a, block=block, grid=grid); stop.record(); stop.synchronize()
            ts.append(stop.time_since(start) * 1e-3)
        return statistics.median(ts)

    floor = bench_gpu.mufu_floor()  # the floor every benchmark uses
    report["throughput"]["floor_sample_pairs_per_s"] = floor
    print(f"MUFU floor: {floor:.3e} sample-pairs/s ({6 * floor:.3e} MUFU op/s, {sms} SMs)")

    for n in (1024, 8192):
        rows = 1000
        ld = (n + 31) // 32 * 32
        X = standardise(rng.laplace(size=(rows, n)))
        X64 = np.zeros((rows, ld)); X64[:, :n] = X
        d_x32, d_x64 = drv.to_device(X64.astype(np.float32)), drv.to_device(X64)
        npairs = 40000
        pa = rng.integers(0, rows, npairs).astype(np.int32)
        pb = ((pa + 1 + rng.integers(0, rows - 1, npairs)) % rows).astype(np.int32)
        rho = np.full(npairs, 0.3)
        d_pa, d_pb, d_rho = drv.to_device(pa), drv.to_device(pb), drv.to_device(rho)
        d_out = drv.mem_alloc(npairs * 8)
        for threads, bps in ((256, 2), (256, 4), (256, 8), (128, 8)):
            grid = (sms * bps, 1)
            t = timed(mod.get_function("throughput32"), d_x32, np.int32(ld), np.int32(n), d_pa, d_pb,
                      d_rho, d_out, np.int32(npairs), block=(threads, 1, 1), grid=grid)
            rate = npairs * n / t
            key = f"float n={n} block={threads} blocks/SM={bps}"
            report["throughput"][key] = rate
            print(f"{key:40s}: {rate:.3e} sample-pairs/s = {100 * rate / floor:5.1f}% of floor")
        npairs64 = 4000
        t = timed(mod.get_function("throughput64"), d_x64, np.int32(ld), np.int32(n), d_pa, d_pb,
                  d_rho, d_out, np.int32(npairs64), block=(256, 1, 1), grid=(sms * 4, 1), reps=3)
        rate = npairs64 * n / t
        report["throughput"][f"double n={n}"] = rate
        print(f"{'double n=' + str(n):40s}: {rate:.3e} sample-pairs/s = {100 * rate / floor:5.1f}% of floor")
    _common.write_result(args, report)


if __name__ == "__main__":
    main()
