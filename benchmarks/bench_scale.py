"""Time the CUDA search beyond the paper's grid: thousands of variables, and wide data.

For each size, the median CUDA search time (float32 with certified roots),
the comparisons saved, the device memory the search allocates, and whether
the float64 search and, on ``--cpu-sizes``, the CPU backend (all cores,
timed once) give the same order. Sizes are PxN; N < P is wide
data (gene expression), where every variable left after N - 1 roots is
explained. Writes JSON.

    python benchmarks/bench_scale.py                                # the default sizes
    python benchmarks/bench_scale.py --sizes 2000x1024 --repeats 3 --cpu-sizes
"""

import argparse
import json
import platform
import time
import warnings
from pathlib import Path

import _common  # benchmarks/ is on sys.path when run as a script
import paralingam
from paralingam.search import _cuda
from paralingam.datasets import make_lingam_data

from bench_gpu import run_case  # benchmarks/ is on sys.path when run as a script

DEFAULT_SIZES = ["2000x200", "2000x1024", "2000x4096", "4000x1024"]
# The CPU backend on 16 cores of the H100 host: 19 s at p=2000, n=200, and
# more than 150 s at p=2000, n=1024.
DEFAULT_CPU_SIZES = ["2000x200"]


def fit_once(X, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        t0 = time.perf_counter()
        res = paralingam.fit(X, **kwargs)
    return res, time.perf_counter() - t0


def write_json(args, props, density, rows):
    _common.write_result(args, {
        "device": props["name"], "host": platform.node(), "density": density,
        "rows": [{k: v for k, v in r.items() if k != "order"} for r in rows]})


def main():
    ap = _common.parser("bench_scale", __doc__, gpu=True)
    ap.add_argument("--sizes", nargs="*", default=DEFAULT_SIZES, metavar="PxN")
    ap.add_argument("--density", choices=("sparse", "dense"), default="sparse")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpu-sizes", nargs="*", default=DEFAULT_CPU_SIZES, metavar="PxN",
                    help="sizes to run the CPU backend on too")
    args = ap.parse_args()

    props = _cuda.device_properties()
    print(f"{props['name']}, {props['total'] / 2**30:.0f} GiB; {args.density}; "
          f"CUDA medians of {args.repeats}", flush=True)
    rows = []
    for size in args.sizes:
        p, n = (int(v) for v in size.lower().split("x"))
        # the seed depends on the size only, so every call times the same data
        X, _, _ = make_lingam_data(p, n, density=args.density, random_state=1000 * p + n)
        row = {"case": f"{args.density} p={p} n={n}", "p": p, "n": n,
               "gpu_bytes": _cuda.bytes_needed(p, n, True)}
        row.update(run_case(X, args.repeats))
        res64, t64 = fit_once(X, backend="cuda", dtype="float64")
        row["float64_s"] = res64.stats["time"]["search"]
        row["float64_same_order"] = res64.causal_order == row["order"]
        row["explained"] = len(res64.stats["explained"])
        if size.lower() in [c.lower() for c in args.cpu_sizes]:
            cpu, _ = fit_once(X, backend="cpu")
            row["cpu_s"] = cpu.stats["time"]["search"]
            row["cpu_same_order"] = cpu.causal_order == row["order"]
        rows.append(row)
        print(f"{row['case']:>22}: {row['search_s']:8.3f} s  saved {100 * row['saved']:4.1f}%  "
              f"float64 {row['float64_s']:.3f} s same={row['float64_same_order']}  "
              f"cpu {row.get('cpu_s', float('nan')):.1f} s same={row.get('cpu_same_order', '-')}  "
              f"explained {row['explained']}", flush=True)
        write_json(args, props, args.density, rows)  # so far: a long size may be cut off

    print(f"\n| case | CUDA search (float32) | float64 | CPU backend ({platform.node()}) | "
          "same order (float64 / CPU) | comparisons saved | adjacency (OLS) | GPU memory |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        cpu = f"{r['cpu_s']:.1f} s" if "cpu_s" in r else "-"
        print(f"| {r['case']} | {r['search_s']:.3f} s | {r['float64_s']:.3f} s | {cpu} | "
              f"{r['float64_same_order']} / {r.get('cpu_same_order', '-')} | "
              f"{100 * r['saved']:.1f}% | {r['adjacency_s']:.2f} s | {r['gpu_bytes'] / 2**20:.0f} MiB |")


if __name__ == "__main__":
    main()
