"""Benchmark: paralingam's CPU backend against lingam.DirectLiNGAM, same data, same run.

Times paralingam's fit and its search (float32 comparisons with certified
roots, the default, and dtype="float64" in the same run) and lingam's
causal-order loop (its adjacency step is excluded by timing the loop through
``_search_causal_order`` the way ``fit`` runs it). Prints a table of medians
and ratios, checks the orders are identical, and writes the numbers to JSON.

    python benchmarks/bench_cpu.py                       # p=30, n=1024 (the issue's case)
    python benchmarks/bench_cpu.py --sizes 30x1024 50x1024 --repeats 5 --json out.json

``--mode busy`` times the CPU search with idle cores and with one core busy,
per thread setting (section ``busy`` of the result file). Each setting (the
default, which drops threads while other processes hold them up; each count
of ``--threads``, default 2 and 1, given as ``n_threads``, which turns the
check off; and the first count with OMP_WAIT_POLICY=PASSIVE) runs in a
fresh process, since OpenMP reads its wait policy at start-up: median search
time of ``--fits`` fits with a 0.1 s pause between them. "Busy" runs a Python
busy loop in another process meanwhile. The busy numbers vary a lot from run
to run (the scheduler decides how long a waiting thread stays off a core).

    python benchmarks/bench_cpu.py --mode busy                 # p=30 and p=100, n=1024
    python benchmarks/bench_cpu.py --mode busy --sizes 300x1024 --threads 16 15 8   # 16 cores

Section ``builds`` holds ``tools/ab_cpu_builds.sh``'s comparison of builds
(each timed through this script).
"""

import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

import _common  # benchmarks/ is on sys.path when run as a script
import paralingam
from _common import median_time
from paralingam.datasets import make_lingam_data


def lingam_order(X, measure="pwling"):
    """lingam 1.13's DirectLiNGAM causal-order loop (no adjacency step).

    ``measure="pwling_fast"`` runs culingam (lingam's GPU measure).
    """
    import lingam

    model = lingam.DirectLiNGAM(measure=measure)
    model._Aknw = None
    U = np.arange(X.shape[1])
    K = []
    X_ = np.copy(X)
    for _ in range(X.shape[1]):
        if measure == "pwling_fast":
            m = model._search_causal_order_gpu(X_.astype(np.float64), U.astype(np.int32))
        else:
            m = model._search_causal_order(X_, U)
        for i in U:
            if i != m:
                X_[:, i] = model._residual(X_[:, i], X_[:, m])
        K.append(int(m))
        U = U[U != m]
    return K


ONE_SETTING = """
import sys, time, statistics
import numpy as np, paralingam
from paralingam.datasets import make_lingam_data
p, n, threads, fits = (int(v) for v in sys.argv[1:5])
X = np.asarray(make_lingam_data(p, n, random_state=0)[0])
times, threads_used = [], []
for _ in range(fits):
    time.sleep(0.1)
    stats = paralingam.fit(X, backend="cpu", n_threads=threads or None).stats
    times.append(stats["time"]["search"])
    threads_used.append(statistics.mean(stats["threads"]))
print(statistics.median(times), statistics.mean(threads_used))
"""



def settings(counts):
    """The default, each thread count given, and the first count with passive waits."""
    out = [("default", 0, {})]
    out += [(f"{k} thread{'s' if k > 1 else ''}", k, {}) for k in counts]
    out.append((f"{counts[0]} passive", counts[0], {"OMP_WAIT_POLICY": "PASSIVE"}))
    return out


def search_time(p, n, threads, fits, env):
    out = subprocess.run([sys.executable, "-c", ONE_SETTING, str(p), str(n), str(threads),
                          str(fits)], env={**os.environ, **env}, capture_output=True,
                         text=True, check=True)
    median, threads = out.stdout.strip().splitlines()[-1].split()
    return float(median), float(threads)


def busy_cores(args):
    """``--mode busy``: each thread setting with idle cores and with one core busy."""
    rows = []
    for load in ("idle", "busy"):
        busy = None
        if load == "busy":
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            time.sleep(1.0)
        try:
            for size in args.sizes:
                p, n = _common.parse_size(size)
                for label, threads, env in settings(args.threads):
                    t, used = search_time(p, n, threads, args.fits, env)
                    rows.append({"cores": load, "p": p, "n": n, "setting": label, "search_s": t,
                                 "mean_threads": used})
                    print(f"{load:5} p={p:<4} n={n:<6} {label:10} {t * 1e3:9.1f} ms"
                          f"   threads per iteration {used:4.2f}", flush=True)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    _common.write_result(args, {"cpus": os.cpu_count(), "fits": args.fits, "rows": rows})


def main():
    ap = _common.parser("bench_cpu", __doc__, sizes=[], repeats=5, modes=("lingam", "busy"),
                        quick="p=30, n=1024 only, 3 repeats, 3 fits per busy setting")
    ap.add_argument("--density", choices=("sparse", "dense"), default="sparse")
    ap.add_argument("--lingam-repeats", type=int, default=3)
    ap.add_argument("--no-lingam", action="store_true", help="skip the lingam peer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fits", type=int, default=7, help="busy: fits per setting (median)")
    ap.add_argument("--threads", nargs="+", type=int, default=[2, 1], metavar="N",
                    help="busy: thread counts to run besides the default (given as n_threads)")
    ap.set_defaults(sizes=None)
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.repeats, args.lingam_repeats, args.fits = ["30x1024"], 3, 1, 3
    if not args.sizes:
        args.sizes = ["30x1024"] if args.mode == "lingam" else ["30x1024", "100x1024"]
    if args.mode == "busy":
        busy_cores(args)
        return

    rows = []
    for k, size in enumerate(args.sizes):
        p, n = (int(v) for v in size.lower().split("x"))
        X, _, _ = make_lingam_data(p, n, density=args.density, random_state=args.seed + k)
        paralingam.fit(X, backend="cpu")  # warm-up: thread pool, page faults
        t_para, all_para, res = median_time(lambda: paralingam.fit(X, backend="cpu"), args.repeats)
        t_search = statistics.median(
            paralingam.fit(X, backend="cpu").stats["time"]["search"] for _ in range(args.repeats))
        runs64 = [paralingam.fit(X, backend="cpu", dtype="float64") for _ in range(args.repeats)]
        t_search64 = statistics.median(r.stats["time"]["search"] for r in runs64)
        t_full, _, res_full = median_time(
            lambda: paralingam.fit(X, backend="cpu", threshold=False), args.repeats)
        row = {
            "p": p, "n": n, "density": args.density,
            "paralingam_fit_s": t_para, "paralingam_search_s": t_search,
            "paralingam_no_threshold_fit_s": t_full,
            "paralingam_search_float64_s": t_search64,
            "float64_redo_iterations": int(sum(res.stats["float64_redo"])),
            "iterations": len(res.stats["remaining"]),
            "same_order_float64": runs64[0].causal_order == res.causal_order,
            "comparisons_saved": res.stats["comparisons_saved"],
            "same_order_threshold_off": res_full.causal_order == res.causal_order,
        }
        if not args.no_lingam:
            t_lin, _, lin_order = median_time(lambda: lingam_order(X), args.lingam_repeats)
            row.update(lingam_order_s=t_lin, speedup=t_lin / t_para,
                       identical_order=lin_order == res.causal_order)
        rows.append(row)

    print(f"\nCPU backend vs lingam 1.13 (causal-order search), {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores; medians of {args.repeats} (paralingam) / {args.lingam_repeats} (lingam) runs")
    print(f"{'p':>5} {'n':>6} {'density':>7} {'paralingam':>11} {'search':>9} {'f64 search':>10} "
          f"{'f64/f32':>7} {'redo':>7} {'no-thresh':>10} {'saved':>6} "
          f"{'lingam':>9} {'speedup':>8} {'same order':>10}")
    for r in rows:
        lin = f"{r['lingam_order_s']:8.2f}s" if "lingam_order_s" in r else f"{'-':>9}"
        spd = f"{r['speedup']:7.0f}x" if "speedup" in r else f"{'-':>8}"
        same = str(r.get("identical_order", "-")) + ("" if r["same_order_float64"] else " (f64 differs!)")
        print(f"{r['p']:>5} {r['n']:>6} {r['density']:>7} {r['paralingam_fit_s'] * 1e3:9.1f}ms "
              f"{r['paralingam_search_s'] * 1e3:7.1f}ms {r['paralingam_search_float64_s'] * 1e3:8.1f}ms "
              f"{r['paralingam_search_float64_s'] / r['paralingam_search_s']:6.2f}x "
              f"{r['float64_redo_iterations']:>3}/{r['iterations']:<3} "
              f"{r['paralingam_no_threshold_fit_s'] * 1e3:8.1f}ms {100 * r['comparisons_saved']:5.0f}% "
              f"{lin} {spd} {same:>10}")
    _common.write_result(args, {"machine": platform.platform(), "cores": os.cpu_count(), "rows": rows})


if __name__ == "__main__":
    main()
