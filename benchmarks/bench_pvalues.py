"""Time ``DirectLiNGAM.get_error_independence_p_values``: paralingam and lingam 1.13.

    python benchmarks/bench_pvalues.py                       # n = 1000, 2000, 7466; p = 11
    python benchmarks/bench_pvalues.py --full                # lingam at every n (minutes)
    python benchmarks/bench_pvalues.py --backend cpu cuda    # and the GPU path (kernels/hsic.cu)
    python benchmarks/bench_pvalues.py --n 500 --lingam-max-n 500   # a quick check

Synthetic Sachs-like data (11 variables, a sparse random DAG, non-Gaussian
noise: ``paralingam.datasets.make_lingam_data``). Each size is fitted once by
paralingam on the CPU; every backend and lingam then compute the p-values of
the same adjacency matrix (lingam's estimator gets paralingam's matrix), so
the rows compare the same work. lingam runs only up to ``--lingam-max-n`` samples unless
``--full``: at n = 7466 it takes minutes and about 2 n^2 doubles per pair.

The CPU path uses every usable core (limit them with ``taskset``).
Columns: seconds for paralingam (median of ``--repeats``), the peak memory
paralingam's call allocated through numpy (tracemalloc, a separate run),
lingam's seconds, the speed-up, and the largest relative difference of the
p-values (entries above 1e-300). Prints a table and writes JSON (``--json``,
default ``bench_pvalues_<host>.json`` in the current folder).

Speed is only measured here, never in the unit tests.
"""

import argparse
import json
import os
import platform
import socket
import sys
import time
import warnings

import numpy as np


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 2000, 7466],
                    help="sample sizes (default 1000 2000 7466)")
    ap.add_argument("--p", type=int, default=11, help="variables (default 11, as Sachs)")
    ap.add_argument("--backend", nargs="+", default=["cpu"], choices=["auto", "cpu", "cuda"],
                    help="paralingam backends to time (default cpu)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs; the median is reported")
    ap.add_argument("--lingam-max-n", type=int, default=2000,
                    help="lingam only up to this many samples (default 2000)")
    ap.add_argument("--full", action="store_true", help="lingam at every size")
    ap.add_argument("--json", default=None, help="output file")
    return ap.parse_args(argv)


def data(p, n, seed):
    from paralingam.datasets import make_lingam_data

    return np.ascontiguousarray(make_lingam_data(p, n, density="sparse", random_state=seed)[0])


def time_paralingam(model, X, repeats):
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        P = model.get_error_independence_p_values(X, progress=False)
        runs.append(time.perf_counter() - t0)
    return float(np.median(runs)), sorted(runs), P


def peak_memory(model, X):
    """Peak bytes allocated (numpy buffers included) during one call."""
    import tracemalloc

    tracemalloc.start()
    try:
        model.get_error_independence_p_values(X, progress=False)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def time_lingam(B, X):
    import lingam

    theirs = lingam.DirectLiNGAM()
    theirs._adjacency_matrix = np.array(B)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NaN p-values of exactly explained errors
        P = theirs.get_error_independence_p_values(X)
    return time.perf_counter() - t0, P


def max_rel_diff(P, Q):
    mask = (np.abs(Q) > 1e-300) & np.isfinite(Q)
    if not mask.any():
        return 0.0
    return float(np.max(np.abs(P[mask] - Q[mask]) / np.abs(Q[mask])))


def main(argv=None):
    args = parse_args(argv)
    import paralingam

    from paralingam.search import _backends

    backends = list(dict.fromkeys(_backends.resolve_backend(b) for b in args.backend))
    rows = []
    first_call = {}
    for n in args.n:
        X = data(args.p, n, args.seed)
        model = paralingam.DirectLiNGAM(backend="cpu").fit(X)
        lingam_s = Q = None
        if args.full or n <= args.lingam_max_n:
            lingam_s, Q = time_lingam(model.adjacency_matrix_, X)
        for backend in backends:
            model.set_params(backend=backend)
            if backend not in first_call:  # imports; on the GPU the context and the kernels
                t0 = time.perf_counter()
                model.get_error_independence_p_values(X[:50], progress=False)
                first_call[backend] = time.perf_counter() - t0
            ours_s, ours_runs, P = time_paralingam(model, X, args.repeats)
            row = {"n": n, "p": args.p, "backend": backend, "paralingam_s": ours_s,
                   "paralingam_runs_s": ours_runs, "peak_bytes": peak_memory(model, X),
                   "lingam_s": lingam_s, "speedup": None, "max_rel_diff": None}
            if Q is not None:
                row.update(speedup=lingam_s / ours_s, max_rel_diff=max_rel_diff(P, Q))
            rows.append(row)
            print_row(row, header=len(rows) == 1)

    out = {
        "benchmark": "bench_pvalues",
        "argv": sys.argv[1:] if argv is None else list(argv),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "paralingam": getattr(paralingam, "__version__", None),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "first_call_s": first_call,
        "rows": rows,
    }
    path = args.json or f"bench_pvalues_{socket.gethostname()}.json"
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    for backend, seconds in first_call.items():
        print(f"first call on {backend} (imports; CUDA context and kernels): {seconds:.3f} s")
    print(f"wrote {path}")


def print_row(row, header):
    if header:
        print(f"{'n':>6} {'p':>3} {'backend':>7} {'paralingam s':>12} {'peak MiB':>9} "
              f"{'lingam s':>9} {'speed-up':>8} {'max rel diff':>12}")

    def fmt(v, spec):
        return format(v, spec) if v is not None else "-"

    print(f"{row['n']:>6} {row['p']:>3} {row['backend']:>7} {row['paralingam_s']:>12.3f} "
          f"{row['peak_bytes'] / 2**20:>9.1f} {fmt(row['lingam_s'], '>9.2f'):>9} "
          f"{fmt(row['speedup'], '>8.1f'):>8} {fmt(row['max_rel_diff'], '>12.1e'):>12}",
          flush=True)


if __name__ == "__main__":
    main()
