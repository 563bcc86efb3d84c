"""Benchmark the CUDA backend on the paper's synthetic grid and the E. coli core sample.

Prints median causal-order search times (``stats["time"]["search"]``: the
GPU search from the uploaded data to the finished order), comparisons saved
by the threshold, and the achieved sample-pair rate on the comparisons
actually performed against the special-function floor measured in the same
run (6 MUFU operations per sample pair: exp and log for log cosh, exp for
u exp(-u^2/2), for each of the two residuals). ``--peers`` adds lingam 1.13
(CPU) and culingam (lingam's ``pwling_fast`` GPU measure) on sizes they
finish in minutes, with their orders compared to ours. Writes JSON.

    python benchmarks/bench_gpu.py --json bench.json            # full grid
    python benchmarks/bench_gpu.py --quick                      # one n per p
    python benchmarks/bench_gpu.py --sizes 500x1024 1000x2048   # some sizes of the grid

``--mode all-pairs`` sweeps the all-pairs bound (``_cuda.ALL_PAIRS_WORK``):
an iteration whose pairs hold at most that many sample pairs (r (r - 1) / 2
times n) compares every pair in one round instead of threshold rounds. It
times the search on grid cases for several ``--bounds``, alternating the
bounds within each repeat, checks that every bound gives the same order, and
prints medians with the comparison counts (section ``all_pairs``).

``--mode scale`` times the search beyond the paper's grid: thousands of
variables, and wide data (N < P, gene expression, where every variable left
after N - 1 roots is explained): the median CUDA search time, the
comparisons saved, the device memory the search allocates, and whether the
float64 search and, on ``--cpu-sizes``, the CPU backend (all cores, timed
once) give the same order (section ``scale``).

``--mode options-ab`` times the one-GPU search with this tree's kernels as
they are against the same kernels compiled with each ``--variant
LABEL=OPTIONS`` (e.g. ``known=-DPL_KNOWN_WORKER=1``), alternated within each
repeat on the same data after one warm-up search of each: medians, each
variant's pairs compared and rounds, and whether the orders are identical
(section ``options_ab``).

    python benchmarks/bench_gpu.py --mode all-pairs --bounds 0 2e7 4e7 --sizes 100x1024 500x1024
    python benchmarks/bench_gpu.py --mode scale --sizes 2000x1024 --repeats 3 --cpu-sizes
    python benchmarks/bench_gpu.py --mode options-ab --variant max=-DPL_LOCK_MAX=1 --sizes 1000x8192
"""

import platform
import statistics
import time
import warnings

import numpy as np

import _common  # benchmarks/ is on sys.path when run as a script
from _common import GRID, ecoli_full, grid_data
import paralingam
from paralingam.search import _cuda
from paralingam.datasets import make_lingam_data

from bench_cpu import lingam_order  # benchmarks/ is on sys.path when run as a script

FLOOR_SRC = r"""
__device__ __forceinline__ float ex2(float x) { float y; asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float lg2(float x) { float y; asm volatile("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
extern "C" __global__ void mufu(float *out, int iters)
{
    float x = threadIdx.x * 1e-3f, y = 0.5f, z = 0.25f, w = 0.125f, s = 0.3f, t = 0.7f;
    for (int i = 0; i < iters; ++i) {
        x = ex2(x); y = lg2(y + 1.0f); z = ex2(z);
        w = ex2(w); s = lg2(s + 1.0f); t = ex2(t);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = x + y + z + w + s + t;
}
"""


def _timed(launch, rounds=7):
    """Median seconds of ``rounds`` calls of ``launch()`` (work queued on the
    default stream), timed by CUDA events around each."""
    import pycuda.driver as drv

    start, stop = drv.Event(), drv.Event()
    times = []
    for _ in range(rounds):
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        times.append(stop.time_since(start) * 1e-3)
    return statistics.median(times)


def mufu_floor():
    """Measured special-function throughput in sample pairs per second (6 ops each)."""
    import pycuda.driver as drv
    from pycuda.compiler import SourceModule

    _cuda._context()
    fn = SourceModule(FLOOR_SRC, no_extern_c=True, options=["-O3"]).get_function("mufu")
    sms = _cuda.device_properties()["multiprocessors"]
    blocks, threads, iters = sms * 8, 256, 8192
    out = drv.mem_alloc(blocks * threads * 4)
    return blocks * threads * iters / _timed(
        lambda: fn(out, np.int32(iters), block=(threads, 1, 1), grid=(blocks, 1)))


# The re-decisions' arithmetic alone: each thread feeds one pair's two
# residual series to PlSums64 (kernels/compare.cuh, the code pairs64 runs:
# libdevice exp, the log deferred) from registers, with no memory traffic,
# as the special-function floor above times the float arithmetic alone.
DOUBLE_FLOOR_SRC = r"""
extern "C" __global__ void __launch_bounds__(256) double_pairs(double *out, int iters)
{
    const double rho = 0.3, inv_s = 1.0 / sqrt(1.0 - rho * rho);
    double va = 0.1 + threadIdx.x * 1e-4, vb = -0.2 + blockIdx.x * 1e-5;
    PlSums64 u, v;
    for (int i = 0; i < iters; ++i) {
        u.add((va - rho * vb) * inv_s);
        v.add((vb - rho * va) * inv_s);
        va += 1.3e-4;
        vb -= 0.7e-4;
    }
    u.flush();
    v.flush();
    out[blockIdx.x * blockDim.x + threadIdx.x] = u.a + u.l + u.g + v.a + v.l + v.g;
}
"""


def double_floor():
    """Measured rate of the re-decisions' double arithmetic, in sample pairs per second.

    ``PlSums64`` of both residuals of a pair, as ``pairs64`` computes them,
    from registers at full occupancy: the double counterpart of
    :func:`mufu_floor`.
    """
    import pycuda.driver as drv
    from pycuda.compiler import SourceModule

    _cuda._context()
    fn = SourceModule('#include "compare.cuh"\n' + DOUBLE_FLOOR_SRC, no_extern_c=True,
                      options=["-O3", "-std=c++17"],
                      include_dirs=[str(_common.ROOT / "kernels")]).get_function("double_pairs")
    sms = _cuda.device_properties()["multiprocessors"]
    blocks, threads, iters = sms * 16, 256, 1024
    out = drv.mem_alloc(blocks * threads * 8)
    return blocks * threads * iters / _timed(
        lambda: fn(out, np.int32(iters), block=(threads, 1, 1), grid=(blocks, 1)))


def bandwidth_floor():
    """Measured device memory bandwidth in bytes per second (read plus written).

    A device-to-device copy of 1 GiB: each byte is read once and written
    once.
    """
    import pycuda.driver as drv

    _cuda._context()
    size = 1 << 30
    src, dst = drv.mem_alloc(size), drv.mem_alloc(size)
    try:
        return 2 * size / _timed(lambda: drv.memcpy_dtod(dst, src, size))
    finally:
        src.free()
        dst.free()


def run_case(X, repeats, threshold=True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        paralingam.fit(X, backend="cuda", threshold=threshold)  # warm-up: compile cache, buffers
        results = [paralingam.fit(X, backend="cuda", threshold=threshold) for _ in range(repeats)]
    search = [r.stats["time"]["search"] for r in results]
    st = results[0].stats
    sample_pairs = sum(st["compared"]) * X.shape[0]
    med = statistics.median(search)
    return {
        "search_s": med, "search_all_s": search,
        "fit_s": statistics.median(sum(v for k, v in r.stats["time"].items() if not k.startswith("gpu_"))
                                   for r in results),
        "adjacency_s": statistics.median(r.stats["time"]["adjacency"] for r in results),
        "saved": st["comparisons_saved"], "sample_pairs": sample_pairs, "rate": sample_pairs / med,
        "rounds_per_iteration": float(np.mean(st["rounds"])) if st["rounds"] else 0.0,
        "float64_redo": int(sum(st["float64_redo"])), "order": results[0].causal_order,
        "deterministic": all(r.causal_order == results[0].causal_order for r in results),
    }


def all_pairs(args):
    """``--mode all-pairs``: search times for several ``_cuda.ALL_PAIRS_WORK`` bounds.

    The bounds alternate within each repeat so that drift of the machine
    hits them alike; every bound must give the same order.
    """
    args.sizes = args.sizes or ["100x1024", "200x2048", "500x1024", "500x4096",
                                "1000x2048", "1000x8192", "ecoli"]
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



# The CPU backend on 16 cores of the H100 host: 19 s at p=2000, n=200, and
# more than 150 s at p=2000, n=1024.
SCALE_CPU_SIZES = ["2000x200"]


def fit_once(X, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        t0 = time.perf_counter()
        res = paralingam.fit(X, **kwargs)
    return res, time.perf_counter() - t0


def write_scale(args, props, rows):
    _common.write_result(args, {
        "device": props["name"], "host": platform.node(), "density": args.density,
        "rows": [{k: v for k, v in r.items() if k != "order"} for r in rows]})


def scale(args):
    """``--mode scale``: thousands of variables, and wide data (n < p)."""
    args.sizes = args.sizes or ["2000x200", "2000x1024", "2000x4096", "4000x1024"]
    args.repeats = args.repeats or 3
    args.cpu_sizes = SCALE_CPU_SIZES if args.cpu_sizes is None else args.cpu_sizes
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
        write_scale(args, props, rows)  # so far: a long size may be cut off

    print(f"\n| case | CUDA search (float32) | float64 | CPU backend ({platform.node()}) | "
          "same order (float64 / CPU) | comparisons saved | adjacency (OLS) | GPU memory |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        cpu = f"{r['cpu_s']:.1f} s" if "cpu_s" in r else "-"
        print(f"| {r['case']} | {r['search_s']:.3f} s | {r['float64_s']:.3f} s | {cpu} | "
              f"{r['float64_same_order']} / {r.get('cpu_same_order', '-')} | "
              f"{100 * r['saved']:.1f}% | {r['adjacency_s']:.2f} s | {r['gpu_bytes'] / 2**20:.0f} MiB |")



def options_ab(args):
    """``--mode options-ab``: the one-GPU kernels with other compile options, alternated."""
    variants = {"default": (), **_common.parse_variants(args.variant, "max=-DPL_LOCK_MAX=1")}
    if len(variants) < 2:
        raise SystemExit("--mode options-ab needs one or more --variant LABEL=OPTIONS")
    args.repeats = args.repeats or 5
    sizes = args.sizes or ["1000x8192"]
    active = ["default"]

    def search_with(label, X):
        active[0] = label
        _cuda._module.cache_clear()  # load the module of these kernels (disk cache)
        return fit_once(X, backend="cuda")[0]

    props = _cuda.device_properties()
    print(f"{props['name']}; medians of {args.repeats}", flush=True)
    rows = []
    with _common.compile_hook(lambda source, peers: (source, variants[active[0]])):
        for size in sizes:
            p, n = _common.parse_size(size)
            X = make_lingam_data(p, n, density=args.density, random_state=1000 * p + n)[0]
            ref = search_with("default", X).causal_order
            same = all([search_with(k, X).causal_order == ref for k in variants])  # warm-ups
            times, counts = {k: [] for k in variants}, {}
            for _ in range(args.repeats):
                for k in variants:
                    r = search_with(k, X)
                    times[k].append(r.stats["time"]["search"])
                    same &= r.causal_order == ref
                    counts[k] = {"compared": int(sum(r.stats["compared"])),
                                 "rounds": int(sum(r.stats["rounds"]))}
            medians = {k: statistics.median(v) for k, v in times.items()}
            row = {"case": f"{args.density} p={p} n={n}", "p": p, "n": n,
                   "repeats": args.repeats, "times": times, "medians_s": medians,
                   "counts": counts, "same_order": bool(same),
                   "change_by_variant": {k: medians[k] / medians["default"] - 1.0
                                         for k in variants if k != "default"}}
            rows.append(row)
            print(f"{row['case']}: " + ", ".join(
                f"{k} {1e3 * medians[k]:.1f} ms ({counts[k]['compared']} pairs, "
                f"{counts[k]['rounds']} rounds)" for k in variants) + f"; same order {same}",
                flush=True)
            _common.write_result(args, {"device": props["name"],
                                        "variants": {k: list(v) for k, v in variants.items()},
                                        "rows": rows})


def main():
    ap = _common.parser("bench_gpu", __doc__, gpu=True,
                        modes=("grid", "all-pairs", "scale", "options-ab"),
                        quick="grid: one n per p, sparse only; all-pairs, scale: the first size")
    ap.add_argument("--peers", nargs="*", default=[], metavar="PxN",
                    help="sizes to run lingam and culingam on (e.g. 50x1024)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed searches per case (default: 5; scale: 3)")
    ap.add_argument("--sweep", action="store_true",
                    help="also time p=1000, n=8192 for worker block shapes (threads, min blocks/SM)")
    ap.add_argument("--sizes", nargs="*", metavar="PxN",
                    help="grid: only these sizes of the grid (sparse and dense, the grid's data); "
                         "all-pairs: grid sizes or 'ecoli'; scale: any sizes (N < P: wide data)")
    ap.add_argument("--bounds", nargs="*", type=float, default=[0.0, 1e7, 2e7, 4e7, 8e7, 1.6e8],
                    help="all-pairs: the bounds, in sample pairs (default: %(default)s)")
    ap.add_argument("--density", choices=("sparse", "dense"), default="sparse", help="scale: the graphs")
    ap.add_argument("--cpu-sizes", nargs="*", default=None, metavar="PxN",
                    help=f"scale: sizes to run the CPU backend on too (default: {' '.join(SCALE_CPU_SIZES)})")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=OPTIONS",
                    help="options-ab: compile options of a variant of the one-GPU kernels "
                         "(e.g. max=-DPL_LOCK_MAX=1); repeatable")
    ap.add_argument("--no-threshold", action="store_true",
                    help="compare every pair (threshold=False: all-pairs rounds unless "
                         "_cuda.ALL_PAIRS_WORK is 0)")
    args = ap.parse_args()
    if args.variant and args.mode != "options-ab":
        ap.error("--variant is for --mode options-ab")
    if args.quick and args.mode != "grid":
        args.sizes = (args.sizes or {"all-pairs": ["100x1024"], "scale": ["2000x200"],
                                     "options-ab": ["200x2048"]}[args.mode])[:1]
    if args.mode == "all-pairs":
        all_pairs(args)
        return
    if args.mode == "scale":
        scale(args)
        return
    if args.mode == "options-ab":
        options_ab(args)
        return
    args.repeats = args.repeats or 5

    props = _cuda.device_properties()
    floor = mufu_floor()
    print(f"{props['name']}: special-function floor {floor:.3e} sample-pairs/s "
          f"({6 * floor:.3e} MUFU op/s)", flush=True)
    grid, densities, quick_seeds = GRID, ("sparse", "dense"), None
    if args.quick:  # its own seeds, as in earlier logs
        grid, densities = [(100, 1024), (200, 2048), (500, 4096), (1000, 8192)], ("sparse",)
        quick_seeds = {size: 100 + k for k, size in enumerate(grid)}
    if args.sizes:  # the full grid's data
        grid = [tuple(int(v) for v in size.lower().split("x")) for size in args.sizes]
        quick_seeds = None
    rows = []
    for density in densities:
        for p, n in grid:
            if quick_seeds:
                X, _, _ = make_lingam_data(p, n, density=density, random_state=quick_seeds[(p, n)])
            else:
                X = grid_data(p, n, density)
            row = {"case": f"{density} p={p} n={n}" + (" all pairs" if args.no_threshold else ""),
                   "p": p, "n": n, "threshold": not args.no_threshold}
            row.update(run_case(X, args.repeats, threshold=not args.no_threshold))
            rows.append(row)
            print(f"{row['case']:>24}: {row['search_s'] * 1e3:9.1f} ms  saved {100 * row['saved']:4.0f}%  "
                  f"{row['rate']:.2e} pairs/s ({100 * row['rate'] / floor:5.1f}% of floor)  "
                  f"rounds/it {row['rounds_per_iteration']:.1f}  fp64 redo {row['float64_redo']}", flush=True)
    X, label = ecoli_full()
    row = {"case": f"E. coli core {label}", "p": X.shape[1], "n": X.shape[0]}
    row.update(run_case(X, args.repeats))
    rows.append(row)
    print(f"{row['case']:>24}: {row['search_s'] * 1e3:9.1f} ms", flush=True)

    sweep = []
    if args.sweep:
        X, _, _ = make_lingam_data(1000, 8192, density="sparse", random_state=103)
        data = np.ascontiguousarray(X)
        kw = dict(threshold=True, gamma0=paralingam._api.default_gamma0(X.shape[0]), c=paralingam._api.DEFAULT_C,
                  dtype="float32", collinear_tol=1e-10, explained_tol=1e-10,
                  drift_tol=paralingam._api.DRIFT_TOL)
        for threads, min_blocks in ((256, 0), (256, 4), (256, 5), (128, 10), (512, 2)):
            ts = []
            for _ in range(3):
                times = {}
                _cuda.search(data, times=times, threads_per_block=threads, min_blocks=min_blocks, **kw)
                ts.append(times["search"])
            entry = {"threads_per_block": threads, "min_blocks": min_blocks,
                     "search_s": statistics.median(ts)}
            sweep.append(entry)
            print(f"sweep p=1000 n=8192 threads={threads} min_blocks={min_blocks}: "
                  f"{entry['search_s'] * 1e3:.1f} ms", flush=True)

    peers = []
    for size in args.peers:
        p, n = (int(v) for v in size.lower().split("x"))
        X, _, _ = make_lingam_data(p, n, density="sparse", random_state=7)
        ours = run_case(X, args.repeats)
        entry = {"case": f"sparse p={p} n={n}", "paralingam_s": ours["search_s"]}
        for name, measure in (("lingam", "pwling"), ("culingam", "pwling_fast")):
            try:
                t0 = time.perf_counter()
                order = lingam_order(X, measure)
                entry[f"{name}_s"] = time.perf_counter() - t0
                entry[f"{name}_same_order"] = order == ours["order"]
            except Exception as exc:  # peer missing or failing: say so in the table
                entry[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
        peers.append(entry)
        print(f"peers {entry}", flush=True)

    print(f"\n{props['name']}, floor {floor:.3e} sample-pairs/s; medians of {args.repeats} searches")
    print("| case | search (median) | adjacency (OLS) | comparisons saved | sample-pairs/s | % of floor | rounds/it | fp64 redo |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['search_s'] * 1e3:.1f} ms | {r['adjacency_s'] * 1e3:.1f} ms | "
              f"{100 * r['saved']:.0f}% | {r['rate']:.2e} | {100 * r['rate'] / floor:.1f}% | "
              f"{r['rounds_per_iteration']:.1f} | {r['float64_redo']} |")
    if peers:
        print("\n| case | paralingam | lingam 1.13 (CPU) | culingam (GPU) | same order |")
        print("|---|---|---|---|---|")
        for e in peers:
            lin = f"{e['lingam_s']:.1f} s" if "lingam_s" in e else e.get("lingam_error", "-")
            cul = f"{e['culingam_s']:.1f} s" if "culingam_s" in e else e.get("culingam_error", "-")
            same = f"{e.get('lingam_same_order', '-')} / {e.get('culingam_same_order', '-')}"
            ratio = (f" ({e['lingam_s'] / e['paralingam_s']:.0f}x / {e['culingam_s'] / e['paralingam_s']:.0f}x)"
                     if "lingam_s" in e and "culingam_s" in e else "")
            print(f"| {e['case']} | {e['paralingam_s'] * 1e3:.1f} ms{ratio} | {lin} | {cul} | {same} |")
    for r in rows:
        r.pop("order")
    _common.write_result(args, {
        "device": props["name"], "host": platform.node(), "floor_sample_pairs_per_s": floor,
        "rows": rows, "peers": peers, "sweep": sweep})


if __name__ == "__main__":
    main()
