"""Time ``DirectLiNGAM.bootstrap``: paralingam, and lingam side by side.

    python benchmarks/bench_bootstrap.py                          # p=100, n=1000, 100 resamples
    python benchmarks/bench_bootstrap.py --backend cuda --adjacency ols
    python benchmarks/bench_bootstrap.py --lingam-p 0             # skip lingam

Prints a table and writes JSON (``--json``, default
``bench_bootstrap_<host>.json`` in the current folder). For paralingam the
time is split into resampling, order search, adjacency and total effects
(``BootstrapResult.timings_``), and the adaptive lasso's cost per resample is
reported on its own. lingam runs on a smaller case (``--lingam-p``,
``--lingam-n``, ``--lingam-sampling``) where it finishes in minutes;
paralingam runs that case too, so the two columns compare like with like.

Speed is only measured here, never in the unit tests.
"""

import os
import platform
import socket
import time

import numpy as np

import _common  # benchmarks/ is on sys.path when run as a script


def parse_args(argv=None):
    ap = _common.parser("bench_bootstrap", __doc__)
    ap.add_argument("--backend", default="cpu", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--adjacency", default="adaptive_lasso", choices=["adaptive_lasso", "ols"])
    ap.add_argument("--p", type=int, default=100, help="variables (default 100)")
    ap.add_argument("--n", type=int, default=1000, help="samples (default 1000)")
    ap.add_argument("--n-sampling", type=int, default=100, help="resamples (default 100)")
    ap.add_argument("--density", default="sparse", choices=["sparse", "dense"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-threads", type=int, default=None,
                    help="CPU threads of the search and the adaptive lasso (default: all)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="timed bootstrap runs of the main case; the median is reported")
    ap.add_argument("--lingam-p", type=int, default=10, help="lingam's case: variables (0 skips)")
    ap.add_argument("--lingam-n", type=int, default=1000, help="lingam's case: samples")
    ap.add_argument("--lingam-sampling", type=int, default=20, help="lingam's case: resamples")
    return ap.parse_args(argv)


def data(p, n, density, seed):
    from paralingam.datasets import make_lingam_data

    return np.ascontiguousarray(make_lingam_data(p, n, density=density, random_state=seed)[0])


def time_paralingam(X, n_sampling, backend, adjacency, seed, repeats=1, n_threads=None):
    import paralingam

    options = {"n_threads": n_threads} if n_threads else None
    model = paralingam.DirectLiNGAM(backend=backend, adjacency=adjacency, random_state=seed,
                                    fit_options=options)
    backend_used = model.fit(X).fit_stats_["backend"]  # warm-up: imports, CUDA context, kernels
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = model.bootstrap(X, n_sampling)
        runs.append((time.perf_counter() - t0, result))
    runs.sort(key=lambda r: r[0])
    total, result = runs[len(runs) // 2]
    return {
        "total_s": total,
        "per_resample_ms": 1e3 * total / n_sampling,
        "phases_s": dict(result.timings_),
        "all_runs_s": sorted(r[0] for r in runs),
        "backend": backend_used,
        "edges_mean": float(np.mean([np.count_nonzero(B) for B in result.adjacency_matrices_])),
    }


def time_adjacency_engines(X, n_threads=None):
    """One adaptive-lasso adjacency of ``X`` per engine: seconds (median of repeats)."""
    import paralingam
    # the private step, as fit runs it on checked data
    from paralingam.adjacency._adaptive_lasso import (_adaptive_lasso_adjacency as
                                                      adaptive_lasso_adjacency, _compiled_lasso)

    order = np.asarray(paralingam.fit(X, backend="cpu").causal_order, dtype=np.intp)
    runs = [("sklearn", {"engine": "sklearn"}, 1)]
    if _compiled_lasso() is not None:
        runs += [("compiled, 1 thread", {"engine": "compiled", "n_threads": 1}, 5),
                 (f"compiled, {n_threads or os.cpu_count()} threads",
                  {"engine": "compiled", "n_threads": n_threads}, 5)]
    out = {}
    for name, kwargs, repeats in runs:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            adaptive_lasso_adjacency(X, order, **kwargs)
            times.append(time.perf_counter() - t0)
        out[name] = float(np.median(times))
    return out


def time_lingam(X, n_sampling, seed):
    import lingam

    np.random.seed(seed)
    t0 = time.perf_counter()
    result = lingam.DirectLiNGAM().bootstrap(X, n_sampling)
    total = time.perf_counter() - t0
    return {"total_s": total, "per_resample_ms": 1e3 * total / n_sampling,
            "edges_mean": float(np.mean([np.count_nonzero(B) for B in result.adjacency_matrices_]))}


def main(argv=None):
    args = parse_args(argv)
    import paralingam

    report = {
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "paralingam": paralingam.__version__,
        "args": vars(args),
        "cases": [],
    }
    rows = []

    X = data(args.p, args.n, args.density, args.seed)
    ours = time_paralingam(X, args.n_sampling, args.backend, args.adjacency, args.seed,
                           args.repeats, args.n_threads)
    case = {"p": args.p, "n": args.n, "n_sampling": args.n_sampling, "paralingam": ours}
    report["cases"].append(case)
    rows.append((case, ours, None))

    if args.adjacency == "adaptive_lasso":
        report["adaptive_lasso_engines_s"] = time_adjacency_engines(X, args.n_threads)

    if args.lingam_p > 0:
        Xs = data(args.lingam_p, args.lingam_n, args.density, args.seed + 1)
        small_ours = time_paralingam(Xs, args.lingam_sampling, args.backend, args.adjacency,
                                     args.seed, n_threads=args.n_threads)
        theirs = time_lingam(Xs, args.lingam_sampling, args.seed)
        small = {"p": args.lingam_p, "n": args.lingam_n, "n_sampling": args.lingam_sampling,
                 "paralingam": small_ours, "lingam": theirs,
                 "speedup": theirs["total_s"] / small_ours["total_s"]}
        report["cases"].append(small)
        rows.append((small, small_ours, theirs))

    print(f"bootstrap timings on {report['host']} ({report['cpus']} CPUs), "
          f"adjacency={args.adjacency}")
    print("| p | n | resamples | backend | paralingam total | per resample | resample | search "
          "| adjacency | total effects | lingam total | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case, ours_, theirs_ in rows:
        ph = ours_["phases_s"]
        lingam_cells = (f"{theirs_['total_s']:.2f} s | {case['speedup']:.0f}x"
                        if theirs_ else "- | -")
        print(f"| {case['p']} | {case['n']} | {case['n_sampling']} | {ours_['backend']} "
              f"| {ours_['total_s']:.2f} s | {ours_['per_resample_ms']:.1f} ms "
              f"| {ph['resample']:.3f} s | {ph['search']:.2f} s | {ph['adjacency']:.2f} s "
              f"| {ph['total_effects']:.3f} s | {lingam_cells} |")
    main_case = report["cases"][0]["paralingam"]
    per = 1e3 * main_case["phases_s"]["adjacency"] / args.n_sampling
    print(f"{args.adjacency} adjacency: {per:.1f} ms per resample at p={args.p}, n={args.n}")

    for name, seconds in report.get("adaptive_lasso_engines_s", {}).items():
        print(f"adaptive lasso, one resample, {name}: {1e3 * seconds:.1f} ms")

    _common.write_result(args, report)


if __name__ == "__main__":
    main()
