"""Kernel-launch delays of the CUDA backend, and a per-phase breakdown of a fit.

Measures on the current GPU:

* host cost of one launch: PyCUDA ``prepared_call`` against ``cuLaunchKernel``
  called from the Cython scheduler, both launching the same kernel
  (``select_root`` on a finished search, which only republishes the status);
* the launch + poll round trip the scheduler pays per threshold round:
  PyCUDA launch + ``Context.synchronize()``, PyCUDA launch + a Python spin on
  the mapped status, and the Cython launch + C spin the backend uses;
* a real fit with CUDA events around each phase (prepare: prep + entropy;
  rounds: worker, whose last block selects the root; redo: double re-decisions; update: UpdateData
  + UpdateCovMat), with rounds per iteration.

Prints tables and writes JSON. Run on the GPU machine:
``python tools/profile_launch.py --json $OUT/profile.json``.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import paralingam
from paralingam import _testing
from paralingam.search import _cuda
from paralingam.datasets import make_lingam_data

# The benchmarks' shared command line and the grid's floor (benchmarks/ is not a package).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _common  # noqa: E402


def median_of(fn, repeats=7):
    return statistics.median(fn() for _ in range(repeats))


def launch_costs(reps):
    import pycuda.driver as drv

    X, _, _ = make_lingam_data(8, 256, random_state=0)
    paralingam.fit(X, backend="cuda")  # leaves a finished search state on the device
    ws = next(iter(_cuda._WORKSPACES.values()))
    mod = _cuda.module()
    pyc = drv.module_from_buffer(mod.image)  # the same cubin the backend loaded
    fn = pyc.get_function("select_root")
    fn.prepare("P")
    search = np.uintp(ws.dev["search"])
    status = ws.status

    def pycuda_launch():
        t0 = time.perf_counter()
        for _ in range(reps):
            fn.prepared_call((1, 1), (1024, 1, 1), search)
        dt = time.perf_counter() - t0
        drv.Context.synchronize()
        return dt / reps

    def pycuda_sync():
        t0 = time.perf_counter()
        for _ in range(reps):
            fn.prepared_call((1, 1), (1024, 1, 1), search)
            drv.Context.synchronize()
        return (time.perf_counter() - t0) / reps

    def pycuda_poll():
        t0 = time.perf_counter()
        for _ in range(reps):
            seq = int(status[0])
            fn.prepared_call((1, 1), (1024, 1, 1), search)
            while int(status[0]) == seq:
                pass
        return (time.perf_counter() - t0) / reps

    rows = {
        "PyCUDA prepared_call (host cost)": median_of(pycuda_launch),
        "Cython cuLaunchKernel (host cost)": median_of(lambda: _testing.launch_only(mod, ws.dev, reps)),
        "PyCUDA launch + Context.synchronize": median_of(pycuda_sync),
        "PyCUDA launch + Python spin on mapped status": median_of(pycuda_poll),
        "Cython launch + C spin on mapped status (used)": median_of(
            lambda: _testing.empty_launch_and_poll(mod, ws.dev, status, reps)),
    }
    return rows


def phase_breakdown(p, n, density, seed):
    X, _, _ = make_lingam_data(p, n, density=density, random_state=seed)
    kwargs = _common.fit_search_settings(n)
    data = np.ascontiguousarray(X)
    _cuda.search(data, times={}, **kwargs)  # warm-up
    times = {}
    t0 = time.perf_counter()
    order, _, per_it, _ = _cuda.search(data, times=times, profile=True, **kwargs)
    wall = time.perf_counter() - t0
    times_plain = {}
    t0 = time.perf_counter()
    _cuda.search(data, times=times_plain, **kwargs)
    wall_plain = time.perf_counter() - t0
    rounds = per_it["rounds"]
    # efficiency of the rounds by remaining variables: sample pairs compared
    # per second of round time, against the floor (filled in by main)
    r = np.array(per_it["remaining"])
    comp = np.array(per_it["compared"], dtype=float) * n
    secs = np.array(per_it["gpu_rounds_s"][: len(r)])  # the last pass only finds r <= 1
    buckets = []
    for lo, hi in ((2, 50), (50, 100), (100, 200), (200, 400), (400, 700), (700, 10**9)):
        m = (r >= lo) & (r < hi)
        if m.any():
            buckets.append({"r": f"{lo}-{hi if hi < 10**9 else ''}", "iterations": int(m.sum()),
                            "rounds_s": float(secs[m].sum()), "sample_pairs": float(comp[m].sum()),
                            "float64_redo": int((np.array(per_it["float64_candidates"])[m] > 0).sum()),
                            "mean_candidates": float(np.mean([c for c in np.array(per_it["float64_candidates"])[m] if c] or [0]))})
    return {
        "case": f"{density} p={p} n={n}", "wall_profiled_s": wall, "wall_s": wall_plain,
        "search_s": times_plain["search"],
        "gpu": {k[4:]: v for k, v in times.items() if k.startswith("gpu_")},
        "iterations": len(rounds), "rounds_per_iteration": float(np.mean(rounds)) if rounds else 0.0,
        "max_rounds": int(max(rounds, default=0)), "float64_redo": int(sum(per_it["float64_redo"])),
        "buckets": buckets,
        "comparisons_saved": 1.0 - sum(per_it["compared"]) / max(1, sum(r * (r - 1) // 2 for r in per_it["remaining"])),
    }


def main():
    ap = _common.parser("profile_launch", __doc__, gpu=True)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--cases", nargs="*", default=["sparse:100:1024", "sparse:500:4096", "sparse:1000:8192"],
                    help="density:p:n fits to break down by phase")
    args = ap.parse_args()

    costs = launch_costs(args.reps)
    print(f"\nlaunch costs on {_cuda.device_properties()['name']} (median of 7 x {args.reps})")
    for name, secs in costs.items():
        print(f"  {name:50s} {secs * 1e6:7.2f} us")
    phases = []
    for k, case in enumerate(args.cases):
        density, p, n = case.split(":")
        row = phase_breakdown(int(p), int(n), density, 900 + k)
        phases.append(row)
    print("\n| case | search | prepare | rounds | redo | update | iterations | rounds/it | fp64 redo | saved |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in phases:
        g = r["gpu"]
        print(f"| {r['case']} | {r['search_s'] * 1e3:.1f} ms | {g['prepare'] * 1e3:.1f} ms | "
              f"{g['rounds'] * 1e3:.1f} ms | {g['redo'] * 1e3:.1f} ms | {g['update'] * 1e3:.1f} ms | "
              f"{r['iterations']} | {r['rounds_per_iteration']:.1f} (max {r['max_rounds']}) | "
              f"{r['float64_redo']} | {100 * r['comparisons_saved']:.0f}% |")
    floor = None
    try:
        import bench_gpu  # noqa: E402 (benchmarks/ put on sys.path above)
        floor = bench_gpu.mufu_floor()
    except Exception:
        pass
    for r in phases:
        print(f"\n{r['case']}: rounds by remaining variables r")
        print("| r | iterations | round time | % of floor | fp64 redo | mean candidates |")
        print("|---|---|---|---|---|---|")
        for b in r["buckets"]:
            eff = b["sample_pairs"] / b["rounds_s"] / floor if floor and b["rounds_s"] else float("nan")
            print(f"| {b['r']} | {b['iterations']} | {b['rounds_s'] * 1e3:.1f} ms | {100 * eff:.0f}% | "
                  f"{b['float64_redo']} | {b['mean_candidates']:.1f} |")
    _common.write_result(args, {"launch_costs_s": costs, "phases": phases})


if __name__ == "__main__":
    main()
