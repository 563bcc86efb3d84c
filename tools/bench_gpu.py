"""Benchmark the CUDA backend on the paper's synthetic grid and the E. coli core sample.

Prints median search times, comparisons saved, and the achieved sample-pair
rate against the special-function floor measured on this GPU (a sample pair
costs 6 special-function-unit operations: exp, log and exp per residual), and
writes everything to JSON. ``--quick`` runs a small part of the grid;
``--peers`` adds lingam and culingam on the sizes they finish in minutes.
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

import paralingam
import paralingam._cuda
from paralingam.datasets import make_lingam_data

FLOOR_SRC = r"""
extern "C" __global__ void mufu(float *out, int iters, float a)
{
    float x = threadIdx.x * 1e-3f, y = 0.5f, z = 0.25f, w = 0.125f;
    for (int i = 0; i < iters; ++i) {
        x = __expf(-x * a); y = __logf(1.0f + y); z = __expf(-z * a);
        w = __expf(-w * a); x += __logf(1.0f + w); y += __expf(-y * a);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = x + y + z + w;
}
"""


def mufu_floor():
    """Measured special-function throughput: sample pairs per second (6 ops each)."""
    import pycuda.driver as drv
    from pycuda.compiler import SourceModule

    paralingam._cuda._context()
    fn = SourceModule(FLOOR_SRC, no_extern_c=True, options=["-O3"]).get_function("mufu")
    dev = drv.Context.get_device()
    sms = dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    blocks, threads, iters = sms * 8, 256, 4096
    out = drv.mem_alloc(blocks * threads * 4)
    start, stop = drv.Event(), drv.Event()
    times = []
    for _ in range(5):
        start.record()
        fn(out, np.int32(iters), np.float32(0.7), block=(threads, 1, 1), grid=(blocks, 1))
        stop.record()
        stop.synchronize()
        times.append(stop.time_since(start) * 1e-3)
    ops = blocks * threads * iters * 6
    return ops / statistics.median(times) / 6


def run_case(X, repeats, dtype="float32"):
    paralingam.fit(X, backend="cuda", dtype=dtype)  # warm-up: compile cache, context
    results = [paralingam.fit(X, backend="cuda", dtype=dtype) for _ in range(repeats)]
    search = statistics.median(r.stats["time"]["search"] for r in results)
    total = statistics.median(sum(r.stats["time"].values()) for r in results)
    st = results[0].stats
    sample_pairs = sum(st["compared"]) * X.shape[0]
    return {
        "search_s": search, "fit_s": total, "saved": st["comparisons_saved"],
        "sample_pairs": sample_pairs, "rate": sample_pairs / search,
        "float64_redo": int(sum(st["float64_redo"])), "order": results[0].causal_order,
        "deterministic": all(r.causal_order == results[0].causal_order for r in results),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--peers", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default="bench_gpu.json")
    args = ap.parse_args()

    floor = mufu_floor()
    print(f"special-function floor: {floor:.3e} sample-pairs/s")
    grid = [(p, n) for p in (100, 200, 500, 1000) for n in (1024, 2048, 4096, 8192)]
    if args.quick:
        grid = [(100, 1024), (200, 2048), (500, 4096), (1000, 8192)]
    rows = []
    for density in ("sparse",) if args.quick else ("sparse", "dense"):
        for k, (p, n) in enumerate(grid):
            X, _, _ = make_lingam_data(p, n, density=density, random_state=100 + k)
            row = {"case": f"{density} p={p} n={n}", "p": p, "n": n}
            row.update(run_case(X, args.repeats))
            rows.append(row)
            print(f"{row['case']:>24}: {row['search_s'] * 1e3:9.1f} ms  saved {100 * row['saved']:4.0f}%  "
                  f"{row['rate']:.2e} pairs/s ({100 * row['rate'] / floor:4.1f}% of floor)  "
                  f"fp64 redo {row['float64_redo']}", flush=True)
    ecoli = Path(__file__).resolve().parents[1] / "tests" / "data" / "ecoli_core_subset.npz"
    shared = Path(__file__).resolve().parents[2] / "shared" / "data" / "ecoli_core_fluxes_n10000.npz"
    if shared.exists():
        X = np.load(shared, allow_pickle=True)["X"]
    else:
        X = np.load(ecoli)["X"]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        row = {"case": f"E. coli core n={X.shape[0]}", "p": X.shape[1], "n": X.shape[0]}
        row.update(run_case(X, args.repeats))
    rows.append(row)
    print(f"{row['case']:>24}: {row['search_s'] * 1e3:9.1f} ms  saved {100 * row['saved']:4.0f}%")

    print("\n| case | search (median) | comparisons saved | sample-pairs/s | % of floor | fp64 redo |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['search_s'] * 1e3:.1f} ms | {100 * r['saved']:.0f}% | "
              f"{r['rate']:.2e} | {100 * r['rate'] / floor:.1f}% | {r['float64_redo']} |")
    for r in rows:
        r.pop("order")
    Path(args.json).write_text(json.dumps({"floor_sample_pairs_per_s": floor, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
