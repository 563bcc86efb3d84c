"""One causal-order search on one GPU and on several GPUs of the host: same data, same run.

For each case, the median CUDA search time (``stats["time"]["search"]``,
float32 with certified roots; the fits skip the adjacency step) on GPU 0
alone (``devices=None``) and on ``--devices`` (default: every visible GPU)
for each ``--spread-work`` bound (``_cuda.MULTI_SPREAD_WORK``: iterations
with fewer sample pairs run on the first GPU alone), alternated within each
repeat; the speedups, and whether the orders are identical. Prints a table
and writes JSON.

    python benchmarks/bench_multi_gpu.py                # p=2000 n=8192, p=5000 n=4096
    python benchmarks/bench_multi_gpu.py --quick        # a small smoke case
    python benchmarks/bench_multi_gpu.py --large        # also p=10000 n=10000
    python benchmarks/bench_multi_gpu.py --spread-work 1e7 1e8
    python benchmarks/bench_multi_gpu.py --memory       # device memory per GPU (formula, no GPU)
"""

import statistics
import time
import warnings

import numpy as np

import _common  # benchmarks/ is on sys.path when run as a script
import paralingam
from paralingam import _memory
from paralingam.datasets import make_lingam_data

DEFAULT_SIZES = ["2000x8192", "5000x4096"]
LARGE_SIZES = ["10000x10000"]
QUICK_SIZES = ["400x4096"]
MEMORY_SIZES = ["2000x8192", "5000x4096", "10000x10000", "20000x10000"]


def fit_once(X, **kwargs):
    p = X.shape[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        # (the search alone: no adjacency step, which is the same either way)
        return paralingam.fit(X, backend="cuda", _adjacency=lambda *args: np.zeros((p, p)), **kwargs)


def memory_rows(sizes):
    """Device memory of one search per GPU, from paralingam._memory's formulas."""
    rows = []
    for size in sizes:
        p, n = _common.parse_size(size)
        rows.append({
            "p": p, "n": n,
            "one_gpu_float32_bytes": _memory.cuda_device_bytes(n, p, True),
            "one_gpu_float64_bytes": _memory.cuda_device_bytes(n, p, False),
            "other_gpus_bytes": _memory.cuda_replica_bytes(n, p),
        })
    return rows


def print_memory(rows):
    gib = 2.0 ** 30
    print("| p | n | one GPU or the first of several, float32 | float64 | each other GPU |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['p']} | {r['n']} | {r['one_gpu_float32_bytes'] / gib:.1f} GiB | "
              f"{r['one_gpu_float64_bytes'] / gib:.1f} GiB | {r['other_gpus_bytes'] / gib:.1f} GiB |")


def main():
    ap = _common.parser("bench_multi_gpu", __doc__, repeats=3, gpu=True)
    ap.add_argument("--sizes", nargs="*", default=None, metavar="PxN",
                    help=f"cases as variables x samples (default: {' '.join(DEFAULT_SIZES)})")
    ap.add_argument("--devices", nargs="*", type=int, default=None,
                    help="GPU ids of the multi-GPU search (default: all)")
    ap.add_argument("--spread-work", nargs="*", type=float, default=None, metavar="PAIRS",
                    help="MULTI_SPREAD_WORK bounds to time the multi-GPU search with "
                         "(default: the package's)")
    ap.add_argument("--quick", action="store_true", help=f"only {' '.join(QUICK_SIZES)}")
    ap.add_argument("--large", action="store_true", help=f"add {' '.join(LARGE_SIZES)}")
    ap.add_argument("--memory", action="store_true",
                    help="only print (and write) the device memory per GPU of "
                         f"{' '.join(MEMORY_SIZES)} (no GPU needed)")
    args = ap.parse_args()

    if args.memory:
        rows = memory_rows(MEMORY_SIZES)
        print_memory(rows)
        _common.write_result(args, {"kind": "memory (paralingam._memory formulas)",
                                    "memory": rows})
        return

    import pycuda.driver as drv

    from paralingam.search import _cuda, _scheduler

    sizes = QUICK_SIZES if args.quick else (args.sizes or DEFAULT_SIZES)
    if args.large:
        sizes = list(sizes) + LARGE_SIZES
    _cuda._context()
    count = drv.Device.count()
    devices = args.devices if args.devices is not None else list(range(count))
    if len(devices) < 2:
        raise SystemExit(f"needs two or more GPUs; {count} visible")
    names = [drv.Device(d).name() for d in devices]
    peers = {f"{d}->{devices[0]}": _scheduler.peer_support(d, devices[0]) for d in devices[1:]}
    print(f"GPUs {devices}: {', '.join(names)}; peer (access, native atomics) {peers}; "
          f"medians of {args.repeats}", flush=True)
    bounds = args.spread_work or [_cuda.MULTI_SPREAD_WORK]
    rows = []
    for size in sizes:
        p, n = _common.parse_size(size)
        X = make_lingam_data(p, n, density="sparse", random_state=1000 * p + n)[0]
        ref = fit_once(X)  # warm-up: compilation and buffers
        t_one, t_many, same = [], {b: [] for b in bounds}, True
        stats_many = {}
        for b in bounds:
            _cuda.MULTI_SPREAD_WORK = b
            same &= fit_once(X, devices=devices).causal_order == ref.causal_order  # (warm-up)
        for _ in range(args.repeats):  # alternated, so drifts of the clocks hit all alike
            r1 = fit_once(X)
            t_one.append(r1.stats["time"]["search"])
            same &= r1.causal_order == ref.causal_order
            for b in bounds:
                _cuda.MULTI_SPREAD_WORK = b
                rm = fit_once(X, devices=devices)
                t_many[b].append(rm.stats["time"]["search"])
                same &= rm.causal_order == ref.causal_order
                stats_many[b] = rm.stats
        row = {
            "case": f"sparse p={p} n={n}", "p": p, "n": n, "devices": devices,
            "one_gpu_s": statistics.median(t_one), "one_gpu_times": t_one,
            "multi_gpu": [{"spread_work": b, "s": statistics.median(t_many[b]), "times": t_many[b],
                           "speedup": statistics.median(t_one) / statistics.median(t_many[b]),
                           # comparisons and rounds of the last run: the threshold's
                           # overshoot and the rounds may differ from one GPU's
                           "compared": int(sum(stats_many[b]["compared"])),
                           "rounds": int(sum(stats_many[b]["rounds"])),
                           "spread_iterations": int(sum(r * (r - 1) // 2 * n > b
                                                        for r in ref.stats["remaining"]))}
                          for b in bounds],
            "same_order": bool(same),
            "iterations": len(ref.stats["remaining"]),
            "rounds_one_gpu": int(sum(ref.stats["rounds"])),
            "compared_one_gpu": int(sum(ref.stats["compared"])),
        }
        rows.append(row)
        multi = "  ".join(f"spread>{m['spread_work']:.0e}: {m['s']:.3f} s ({m['speedup']:.2f}x)"
                          for m in row["multi_gpu"])
        print(f"{row['case']:>24}: 1 GPU {row['one_gpu_s']:8.3f} s  {len(devices)} GPUs {multi}  "
              f"same order {row['same_order']}", flush=True)
        _common.write_result(args, {"gpus": names, "peers": {k: list(v) for k, v in peers.items()},
                                    "rows": rows})  # so far: a long case may be cut off
        del X
        time.sleep(0.5)

    print(f"\n| case | 1 GPU | {len(devices)} GPUs (spread bound) | speedup | same order |")
    print("|---|---|---|---|---|")
    for r in rows:
        for m in r["multi_gpu"]:
            print(f"| {r['case']} | {r['one_gpu_s']:.3f} s | {m['s']:.3f} s ({m['spread_work']:.0e}) | "
                  f"{m['speedup']:.2f}x | {r['same_order']} |")


if __name__ == "__main__":
    main()
