"""Bootstrap throughput (resamples/s): serial against Dask clusters.

    python benchmarks/bench_bootstrap_dask.py                         # serial, then cpu:<cores>x1
    python benchmarks/bench_bootstrap_dask.py --cluster cpu:2x1 --cluster cpu:1x2
    python benchmarks/bench_bootstrap_dask.py --backend auto --cluster cuda --cluster cuda:1
    python benchmarks/bench_bootstrap_dask.py --cluster tcp://scheduler:8786

``--cluster`` (repeatable) names the clusters to time: ``cpu:WxT`` a
``LocalCluster`` of W worker processes with T threads each; ``cuda`` a
dask-cuda ``LocalCUDACluster`` with one worker per visible GPU, ``cuda:N``
one on the first N GPUs; anything with ``://`` the address of a running
scheduler. ``serial`` is ``DirectLiNGAM.bootstrap`` in this process with
``--backend`` (``auto``: the GPU where there is one).

Each cluster runs a warm-up bootstrap first (imports on the workers, CUDA
contexts and kernel compilation), then ``--repeats`` timed ones; the median
is reported. Every result is compared with the serial one (identical
adjacency matrices, total effects and resampled indices on the CPU; on GPUs
the largest difference is reported). Prints a table and writes JSON
(``--json``, default ``bench_bootstrap_dask_<machine>.json``; ``--machine``
as in every benchmark).

Speed is only measured here, never in the unit tests; run it on a quiet machine.
"""

import os
import platform
import socket
import time

import numpy as np

import _common  # benchmarks/ is on sys.path when run as a script


def parse_args(argv=None):
    ap = _common.parser("bench_bootstrap_dask", __doc__, repeats=1, gpu=True,
                        quick="p=10, n=200, 8 resamples")
    ap.add_argument("--p", type=int, default=100, help="variables (default 100)")
    ap.add_argument("--n", type=int, default=1000, help="samples (default 1000)")
    ap.add_argument("--n-sampling", type=int, default=200, help="resamples (default 200)")
    ap.add_argument("--backend", default="cpu", choices=["auto", "cpu", "cuda"],
                    help="backend of the fits, serial and on the workers (default cpu)")
    ap.add_argument("--adjacency", default="adaptive_lasso", choices=["adaptive_lasso", "ols"])
    ap.add_argument("--density", default="sparse", choices=["sparse", "dense"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cluster", action="append", default=None,
                    help="cpu:WxT, cuda, cuda:N or a scheduler address (repeatable; "
                         "default cpu:<cores>x1)")
    ap.add_argument("--skip-serial", action="store_true",
                    help="no serial run (then nothing to compare with)")
    args = ap.parse_args(argv)
    if args.quick:
        args.p, args.n, args.n_sampling = 10, 200, 8
    return args


def timed(run, repeats):
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = run()
        runs.append((time.perf_counter() - t0, result))
    runs.sort(key=lambda r: r[0])
    return runs[len(runs) // 2], sorted(r[0] for r in runs)


def compare(ours, ref):
    """Identity with the serial result, and the largest difference."""
    same_rows = all(np.array_equal(a, b) for a, b in
                    zip(ours.resampled_indices_, ref.resampled_indices_))
    return {
        "identical": bool(same_rows
                          and np.array_equal(ours.adjacency_matrices_, ref.adjacency_matrices_)
                          and np.array_equal(ours.total_effects_, ref.total_effects_)),
        "same_resamples": bool(same_rows),
        "same_edges": bool(np.array_equal(ours.adjacency_matrices_ != 0,
                                          ref.adjacency_matrices_ != 0)),
        "max_abs_diff": float(np.max(np.abs(ours.adjacency_matrices_ - ref.adjacency_matrices_))),
    }


def start_cluster(spec):
    """``(client, closers, description)`` for one ``--cluster`` value."""
    import distributed

    if "://" in spec:
        client = distributed.Client(spec)
        return client, [client], {"kind": "address", "address": spec}
    if spec == "cuda" or spec.startswith("cuda:"):
        from dask_cuda import LocalCUDACluster

        kwargs = {"dashboard_address": None}
        if spec.startswith("cuda:"):
            kwargs["CUDA_VISIBLE_DEVICES"] = list(range(int(spec.split(":", 1)[1])))
        cluster = LocalCUDACluster(**kwargs)
        client = distributed.Client(cluster)
        return client, [client, cluster], {"kind": "LocalCUDACluster"}
    if spec.startswith("cpu:"):
        workers, threads = (int(v) for v in spec.split(":", 1)[1].lower().split("x"))
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=threads,
                                           processes=True, dashboard_address=None)
        client = distributed.Client(cluster)
        client.wait_for_workers(workers)
        return client, [client, cluster], {"kind": "LocalCluster", "workers": workers,
                                           "threads_per_worker": threads}
    raise SystemExit(f"--cluster {spec!r}: expected cpu:WxT, cuda, cuda:N or an address")


def main(argv=None):
    args = parse_args(argv)
    import paralingam
    from paralingam.datasets import make_lingam_data

    clusters = args.cluster or [f"cpu:{os.cpu_count()}x1"]
    X = np.ascontiguousarray(make_lingam_data(args.p, args.n, density=args.density,
                                              random_state=args.seed)[0])
    model = paralingam.DirectLiNGAM(backend=args.backend, adjacency=args.adjacency,
                                    random_state=args.seed)
    report = {
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "paralingam": paralingam.__version__,
        "args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
        "runs": [],
    }

    ref = None
    if not args.skip_serial:
        backend = model.fit(X).fit_stats_["backend"]  # warm-up: imports, CUDA context, kernels
        (seconds, ref), all_runs = timed(lambda: model.bootstrap(X, args.n_sampling), args.repeats)
        report["runs"].append({"config": f"serial ({backend})", "workers": 1, "threads": None,
                               "seconds": seconds, "all_runs_s": all_runs,
                               "resamples_per_s": args.n_sampling / seconds,
                               "phases_s": dict(ref.timings_)})

    for spec in clusters:
        client, closers, description = start_cluster(spec)
        try:
            info = client.scheduler_info()["workers"]
            workers = len(info)
            threads = sum(w["nthreads"] for w in info.values())
            model.bootstrap(X, max(2, 2 * threads), client=client)  # warm-up on every worker
            (seconds, ours), all_runs = timed(
                lambda: model.bootstrap(X, args.n_sampling, client=client), args.repeats)
            run = {"config": spec, **description, "workers": workers, "threads": threads,
                   "seconds": seconds, "all_runs_s": all_runs,
                   "resamples_per_s": args.n_sampling / seconds,
                   "phases_s": dict(ours.timings_)}
            if ref is not None:
                run.update(compare(ours, ref))
            report["runs"].append(run)
        finally:
            for closer in closers:
                closer.close()

    serial_rate = report["runs"][0]["resamples_per_s"] if ref is not None else None
    print(f"bootstrap throughput on {report['host']} ({report['cpus']} CPUs), commit "
          f"{_common.commit()}: p={args.p}, n={args.n}, {args.n_sampling} resamples, "
          f"backend={args.backend}, adjacency={args.adjacency}")
    print("| configuration | workers | threads | seconds | resamples/s | vs serial | identical |")
    print("|---|---|---|---|---|---|---|")
    for run in report["runs"]:
        speedup = f"{run['resamples_per_s'] / serial_rate:.2f}x" if serial_rate else "-"
        same = {True: "yes", False: f"no (max diff {run.get('max_abs_diff', 0):.1e})",
                None: "-"}[run.get("identical")]
        print(f"| {run['config']} | {run['workers']} | {run['threads'] or '-'} "
              f"| {run['seconds']:.2f} | {run['resamples_per_s']:.1f} | {speedup} | {same} |")

    _common.write_result(args, report)


if __name__ == "__main__":
    main()
