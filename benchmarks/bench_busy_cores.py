"""Time the CPU search with idle cores and with one core busy, per thread setting.

    python benchmarks/bench_busy_cores.py                  # p=30 and p=100, n=1024
    python benchmarks/bench_busy_cores.py --sizes 30x1024 --fits 9
    python benchmarks/bench_busy_cores.py --sizes 300x1024 --threads 16 15 8   # a 16-core host

Each setting (the default, which drops threads while other processes hold
them up; each count of ``--threads``, default 2 and 1, given as ``n_threads``,
which turns the check off; and the first count with OMP_WAIT_POLICY=PASSIVE)
runs in a fresh process, since OpenMP reads its wait policy at start-up:
median search time of ``--fits`` fits with a 0.1 s pause between them. "Busy"
runs a Python busy loop in another process meanwhile. Prints a table and
writes JSON. The busy numbers vary a lot from run to run (the scheduler
decides how long a waiting thread stays off a core).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import _common  # benchmarks/ is on sys.path when run as a script

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


def main():
    ap = _common.parser("bench_busy_cores", __doc__, sizes=["30x1024", "100x1024"])
    ap.add_argument("--fits", type=int, default=7)
    ap.add_argument("--threads", nargs="+", type=int, default=[2, 1], metavar="N",
                    help="thread counts to run besides the default (given as n_threads)")
    args = ap.parse_args()

    rows = []
    for load in ("idle", "busy"):
        busy = None
        if load == "busy":
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            time.sleep(1.0)
        try:
            for size in args.sizes:
                p, n = (int(v) for v in size.lower().split("x"))
                for label, threads, env in settings(args.threads):
                    t, used = search_time(p, n, threads, args.fits, env)
                    rows.append({"cores": load, "p": p, "n": n, "setting": label, "search_s": t,
                                 "mean_threads": used})
                    print(f"{load:5} p={p:<4} n={n:<6} {label:10} {t * 1e3:9.1f} ms"
                          f"   threads per iteration {used:4.2f}", flush=True)
        finally:
            if busy is not None:
                busy.kill()
    _common.write_result(args, {"cpus": os.cpu_count(), "fits": args.fits, "rows": rows})


if __name__ == "__main__":
    main()
