"""Fit one synthetic case of the benchmark grid: a small target for profilers.

Runs ``paralingam.fit`` on the paper-style data of ``benchmarks/bench_gpu.py``
(same generator, same seeds) and prints the search time and the comparison
counts, so that Nsight Compute can be pointed at a real search:

    python benchmarks/fit_case.py 500 1024                      # sparse p=500, n=1024
    python benchmarks/fit_case.py ecoli                         # the E. coli core sample (n=10000)
    python benchmarks/fit_case.py 500 1024 --repeats 3 --no-threshold
    ncu --launch-skip 800 --launch-count 20 python benchmarks/fit_case.py 500 1024

With ``--repeats`` above 1 (the A/B runs of tools/ab_builds.sh), untimed fits
run first for ``--warm-up`` seconds: the first fit of a process compiles or
loads the kernels and loads scipy's LAPACK, whose OpenBLAS worker threads then
spin for about 0.1 s and take cores from the next fits (a CPU search's
OpenMP threads), whichever tree is measured. The first fit is printed apart.
"""

import argparse
import hashlib
import statistics
import time
import warnings

import numpy as np

import paralingam

from _common import ecoli_full, grid_data  # benchmarks/ is on sys.path when run as a script


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("p", help="variables, or 'ecoli' for the E. coli core sample")
    ap.add_argument("n", type=int, nargs="?", help="samples (synthetic cases)")
    ap.add_argument("--density", choices=("sparse", "dense"), default="sparse")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--no-threshold", action="store_true", help="compare every pair")
    ap.add_argument("--warps-per-pair", type=int, help="CUDA: warps comparing one pair")
    ap.add_argument("--gamma0", type=float, help="first threshold of each iteration")
    ap.add_argument("--warm-up", type=float, default=0.5, metavar="SECONDS",
                    help="with --repeats > 1: untimed fits for this long first (see above)")
    args = ap.parse_args()

    if args.p == "ecoli":
        X, label = ecoli_full()
        case = f"E. coli core {label}"
    else:
        p, n = int(args.p), args.n
        if n is None:
            ap.error("synthetic cases need p and n")
        X = grid_data(p, n, args.density)
        case = f"{args.density} p={p} n={n}"
    kwargs = dict(backend=args.backend, threshold=not args.no_threshold)
    if args.warps_per_pair:
        kwargs["tuning"] = {"warps_per_pair": args.warps_per_pair}
    if args.gamma0:
        kwargs["gamma0"] = args.gamma0
    times = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        first = None
        if args.repeats > 1:
            t0 = time.perf_counter()
            first = paralingam.fit(X, **kwargs).stats["time"]["search"]
            while time.perf_counter() - t0 < args.warm_up:
                paralingam.fit(X, **kwargs)
        for _ in range(args.repeats):
            res = paralingam.fit(X, **kwargs)
            times.append(res.stats["time"]["search"])
    st = res.stats
    # the result's fingerprint: builds that must agree bit for bit print the same
    result = hashlib.sha1(np.asarray(res.causal_order, dtype=np.int64).tobytes()
                          + np.asarray(st["scores"], dtype=np.float64).tobytes()).hexdigest()[:10]
    print(f"{case} threshold={not args.no_threshold} "
          f"warps_per_pair={args.warps_per_pair or 'default'} gamma0={args.gamma0 or 'default'}: "
          f"search {statistics.median(times) * 1e3:.3f} ms (median of {len(times)}), "
          f"compared {sum(st['compared'])}, saved {100 * st['comparisons_saved']:.0f}%, "
          f"order and scores {result}"
          + (f", first fit's search {first * 1e3:.1f} ms" if first is not None else ""))


if __name__ == "__main__":
    main()
