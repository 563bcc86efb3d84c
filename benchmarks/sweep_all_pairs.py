"""Sweep the CUDA backend's all-pairs bound (``_cuda.ALL_PAIRS_WORK``).

An iteration whose pairs hold at most that many sample pairs (r (r - 1) / 2
times n) compares every pair in one round instead of threshold rounds. This
times the search on grid cases (``benchmarks/bench_gpu.py``'s data and seeds) for
several bounds, alternating the bounds within each repeat so that drift of
the machine hits them alike, checks that every bound gives the same order,
and prints medians (``stats["time"]["search"]``) with the comparison counts.

    python benchmarks/sweep_all_pairs.py --json sweep.json
    python benchmarks/sweep_all_pairs.py --bounds 0 2e7 4e7 --sizes 100x1024 500x1024
"""

import argparse
import json
import statistics
import warnings
from pathlib import Path

import _common  # benchmarks/ is on sys.path when run as a script
import paralingam
from paralingam.search import _cuda

from bench_gpu import ecoli_full, grid_data  # benchmarks/ is on sys.path when run as a script


def main():
    ap = _common.parser("sweep_all_pairs", __doc__, gpu=True)
    ap.add_argument("--bounds", nargs="*", type=float, default=[0.0, 1e7, 2e7, 4e7, 8e7, 1.6e8])
    ap.add_argument("--sizes", nargs="*", default=["100x1024", "200x2048", "500x1024", "500x4096",
                                                   "1000x2048", "1000x8192", "ecoli"])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    rows = []
    for size in args.sizes:
        if size == "ecoli":
            X, label = ecoli_full()
            case = f"E. coli core {label}"
        else:
            p, n = (int(v) for v in size.lower().split("x"))
            X = grid_data(p, n)
            case = f"sparse p={p} n={n}"
        times = {b: [] for b in args.bounds}
        info = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
            paralingam.fit(X, backend="cuda")  # warm-up: compile cache, buffers
            for _ in range(args.repeats):
                for bound in args.bounds:
                    _cuda.ALL_PAIRS_WORK = bound
                    res = paralingam.fit(X, backend="cuda")
                    times[bound].append(res.stats["time"]["search"])
                    info[bound] = (res.causal_order, sum(res.stats["compared"]),
                                   sum(res.stats["rounds"]) / max(1, len(res.stats["rounds"])),
                                   sum(res.stats["float64_redo"]))
        orders = {tuple(v[0]) for v in info.values()}
        for bound in args.bounds:
            order, compared, rounds, redo = info[bound]
            rows.append({"case": case, "bound": bound, "search_s": statistics.median(times[bound]),
                         "search_all_s": times[bound], "compared": compared,
                         "rounds_per_iteration": rounds, "float64_redo": redo,
                         "same_order": len(orders) == 1})
            print(f"{case:>22} bound {bound:8.1e}: {1e3 * rows[-1]['search_s']:8.2f} ms  "
                  f"compared {compared:>10}  rounds/it {rounds:.2f}  fp64 redo {redo}  "
                  f"same order {len(orders) == 1}", flush=True)

    dev = _cuda.device_properties()["name"]
    print(f"\n{dev}; search medians of {args.repeats}, bounds alternated")
    print("| case | " + " | ".join(f"{b:.0e}" for b in args.bounds) + " |")
    print("|---|" + "---|" * len(args.bounds))
    for case in dict.fromkeys(r["case"] for r in rows):
        cells = [f"{1e3 * r['search_s']:.2f}" for r in rows if r["case"] == case]
        print(f"| {case} | " + " | ".join(cells) + " ms |")
    _common.write_result(args, {"device": dev, "rows": rows})


if __name__ == "__main__":
    main()
