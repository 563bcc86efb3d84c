"""One causal-order search on one GPU and on several GPUs of the host: same data, same run.

For each case, the median CUDA search time (``stats["time"]["search"]``,
float32 with certified roots) on GPU 0 alone (``devices=None``) and on
``--devices`` (default: every visible GPU), alternated within each repeat,
the speedup, and whether the orders (and adjacency matrices) are identical.
Prints a table and writes JSON.

    python benchmarks/bench_multi_gpu.py                # p=2000 n=8192, p=5000 n=4096
    python benchmarks/bench_multi_gpu.py --quick        # a small smoke case
    python benchmarks/bench_multi_gpu.py --large        # also p=10000 n=10000
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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        return paralingam.fit(X, backend="cuda", **kwargs)


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

    from paralingam import _cuda, _scheduler

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
    rows = []
    for size in sizes:
        p, n = _common.parse_size(size)
        X = make_lingam_data(p, n, density="sparse", random_state=1000 * p + n)[0]
        one = fit_once(X)  # warm-up: compilation and buffers
        many = fit_once(X, devices=devices)
        t_one, t_many = [], []
        for _ in range(args.repeats):  # alternated, so drifts of the clocks hit both alike
            r1 = fit_once(X)
            t_one.append(r1.stats["time"]["search"])
            rm = fit_once(X, devices=devices)
            t_many.append(rm.stats["time"]["search"])
            same = (r1.causal_order == one.causal_order == rm.causal_order == many.causal_order)
            one, many = r1, rm
        row = {
            "case": f"sparse p={p} n={n}", "p": p, "n": n, "devices": devices,
            "one_gpu_s": statistics.median(t_one), "multi_gpu_s": statistics.median(t_many),
            "one_gpu_times": t_one, "multi_gpu_times": t_many,
            "same_order": bool(same),
            "same_adjacency": bool(np.array_equal(one.adjacency_matrix, many.adjacency_matrix)),
            "spread_iterations": int(sum(r * (r - 1) // 2 * n > _cuda.MULTI_SPREAD_WORK
                                         for r in many.stats["remaining"])),
            "rounds": int(sum(many.stats["rounds"])),
            "float64_redo": int(sum(many.stats["float64_redo"])),
        }
        row["speedup"] = row["one_gpu_s"] / row["multi_gpu_s"]
        rows.append(row)
        print(f"{row['case']:>24}: 1 GPU {row['one_gpu_s']:8.3f} s  {len(devices)} GPUs "
              f"{row['multi_gpu_s']:8.3f} s  speedup {row['speedup']:.2f}x  "
              f"same order {row['same_order']}  same adjacency {row['same_adjacency']}", flush=True)
        _common.write_result(args, {"gpus": names, "peers": {k: list(v) for k, v in peers.items()},
                                    "rows": rows})  # so far: a long case may be cut off
        del X
        time.sleep(0.5)

    print(f"\n| case | 1 GPU | {len(devices)} GPUs | speedup | same order |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['one_gpu_s']:.3f} s | {r['multi_gpu_s']:.3f} s | "
              f"{r['speedup']:.2f}x | {r['same_order']} |")


if __name__ == "__main__":
    main()
