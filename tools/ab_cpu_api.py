"""Time ``paralingam.fit(X, backend="cpu")`` through the public API only, for A/B runs of two trees.

    python tools/ab_cpu_api.py --sizes 30x1024 100x1024 200x2048 --fits 7 --json out.json
    bash tools/ab_trees.sh /work/wt/base . 3 tools/ab_cpu_api.py --sizes 30x1024 100x1024

Uses nothing but ``paralingam.fit`` and its ``stats`` (which every tree since
the thread record has), with data made here from a seed (the same bits on
both trees), so two source trees of different layouts can be compared by
running this one file in each (``tools/ab_trees.sh`` alternates them round by
round). Per size: warm-up fits for at least ``--warm-up`` seconds, then
``--fits`` fits back to back; prints the median fit and search times, the
mean threads per iteration and a hash of the causal order (equal across
trees when the orders are), and the process's first fit on its own.
Writes JSON with ``--json``.

Why a timed warm-up: the first fit of a process loads scipy's LAPACK, whose
OpenBLAS starts worker threads that spin for about 0.1 s before they sleep.
Fits inside that window find a core taken and run slower (on two cores, on
one thread); which fit pays depends on where a tree loads the library (0cb7114
in its first search, later trees in the first adjacency step). The warm-up
moves every tree past it, so the timed fits compare steady states; the
one-time cost is the ``first_fit_s`` column.
"""

import argparse
import hashlib
import json
import os
import platform
import statistics
import time

import numpy as np

import paralingam


def lingam_data(p, n, seed):
    """Sparse linear non-Gaussian data with a random causal order (independent of paralingam)."""
    rng = np.random.default_rng(seed)
    B = np.tril(rng.uniform(0.5, 1.5, (p, p)) * rng.choice([-1.0, 1.0], (p, p)), -1)
    B *= rng.uniform(size=(p, p)) < min(1.0, 3.0 / max(1, p - 1))
    E = rng.uniform(-1.0, 1.0, (n, p)) * rng.uniform(0.5, 1.5, p)
    X = np.linalg.solve(np.eye(p) - B, E.T).T  # x = B x + e
    perm = rng.permutation(p)
    return np.ascontiguousarray(X[:, perm])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["30x1024", "100x1024", "200x2048"],
                    metavar="PxN")
    ap.add_argument("--fits", type=int, default=7, help="timed fits per size (after the warm-up fits)")
    ap.add_argument("--pause", type=float, default=0.0,
                    help="seconds between fits (0: back to back, as a loop of fits runs)")
    ap.add_argument("--warm-up", type=float, default=0.5, metavar="SECONDS",
                    help="fit for at least this long before the timed fits (see above)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args()
    if args.fits < 1:
        ap.error("--fits must be at least 1")

    rows = []
    for k, size in enumerate(args.sizes):
        p, n = (int(v) for v in size.lower().split("x"))
        X = lingam_data(p, n, args.seed + k)
        t0 = time.perf_counter()
        paralingam.fit(X, backend="cpu")  # warm-up: extensions, thread pool, page faults
        first_fit_s = time.perf_counter() - t0
        while time.perf_counter() - t0 < args.warm_up:
            paralingam.fit(X, backend="cpu")
        fit_s, search_s, threads = [], [], []
        orders = set()
        for _ in range(args.fits):
            if args.pause:
                time.sleep(args.pause)
            t0 = time.perf_counter()
            res = paralingam.fit(X, backend="cpu")
            fit_s.append(time.perf_counter() - t0)
            search_s.append(res.stats["time"]["search"])
            used = res.stats["threads"]
            threads.append(statistics.mean(used) if used else 0.0)
            orders.add(hashlib.sha1(np.asarray(res.causal_order, np.int64).tobytes()).hexdigest()[:12])
        row = {"p": p, "n": n, "fit_s": statistics.median(fit_s),
               "search_s": statistics.median(search_s), "mean_threads": statistics.mean(threads),
               "order": sorted(orders), "first_fit_s": first_fit_s,
               "fit_times_s": fit_s}
        rows.append(row)
        print(f"p={p:<4} n={n:<6} fit {row['fit_s'] * 1e3:8.2f} ms  search "
              f"{row['search_s'] * 1e3:8.2f} ms  threads/iteration {row['mean_threads']:4.2f}  "
              f"order {','.join(row['order'])}  first fit {first_fit_s * 1e3:8.2f} ms", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"script": "tools/ab_cpu_api.py", "paralingam": paralingam.__file__,
                       "machine": platform.platform(), "cores": os.cpu_count(),
                       "load_average": os.getloadavg(), "fits": args.fits, "pause": args.pause,
                       "warm_up_s": args.warm_up,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
