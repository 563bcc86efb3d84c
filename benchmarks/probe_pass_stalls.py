"""The adjacency step's threaded passes: how often they stall, and under which OpenMP wait policy.

    python benchmarks/probe_pass_stalls.py --case rank_deficient_1000 --rounds 15

The adjacency step's four passes over p x p matrices (``_api._scatter_matrix``,
``_adaptive_lasso._permuted_gram``, ``_placed`` as the adaptive lasso and
least squares call it, ``_api._scaled_back``; OpenMP,
:mod:`paralingam.adjacency._permute`) take
about 0.3 ms each at p=1000 on 32 cores, and some calls take 4-9 ms. This
runs ``paralingam.fit`` and ``DirectLiNGAM().fit`` alternated (``--rounds``
each, after two warm-ups each) in one child process per setting of
``--policies`` (``default``: OMP_WAIT_POLICY unset, whatever the
caller's environment holds; ``passive``: set to passive before the child
starts, as OpenMP reads it only then), and records per fit its wall time and phases, and per pass
its time and the threads that ran during it (``/proc/self/task/*/schedstat``,
grouped by when they appeared: numpy's and scipy's BLAS workers, the main
thread's OpenMP team, later ones). A pass is counted as stalled where it
took over ``STALL_FACTOR`` times that pass's fastest call in the same
child. Then the first two passes alone, ``--alone`` times, at the case's
p. Linux only (``/proc``). Writes JSON.

The fits' walls hold the probe's own reads of ``/proc`` around each pass
(1-2 ms a pass with some 100 threads), so compare the policies with each
other here, and the estimator with ``fit`` in ``bench_pipeline.py``. The
passes' times are their own, but the reads also lengthen the time between
the passes, in which an OpenMP team spins under the default policy: the
probe can change how often what it measures happens.
"""

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

import _common  # (benchmarks/ is on sys.path when run as a script)

PASSES = [("paralingam._api", "_scatter_matrix"),
          ("paralingam.adjacency._adaptive_lasso", "_permuted_gram"),
          ("paralingam.adjacency._adaptive_lasso", "_placed"),
          ("paralingam.adjacency._least_squares", "_placed"),
          ("paralingam._api", "_scaled_back")]
STALL_FACTOR = 4.0
POLICIES = {"default": None, "passive": "passive"}


def _threads():
    return set(os.listdir("/proc/self/task"))


def _run_times():
    """Each thread's time on a CPU so far, in ns (schedstat; the kernel's tick may round it)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[tid] = int(f.read().split()[0])
        except OSError:  # (a thread that ended meanwhile)
            pass
    return out


def child(args):
    """One setting's measurement, in this process; prints its record as JSON."""
    groups = {"start": _threads()}
    import numpy as np

    groups["numpy"] = _threads() - set().union(*groups.values())
    import bench_pipeline

    import paralingam
    from paralingam import _lapack, _validation
    from paralingam.adjacency import _permute
    from paralingam.lingam.estimator import DirectLiNGAM

    _lapack.flapack()  # (scipy's BLAS, as the adjacency step loads it)
    groups["scipy_and_imports"] = _threads() - set().union(*groups.values())
    threads = _validation.default_threads()
    (p, n), _, _, _ = bench_pipeline.CASES[args.case]
    rng = np.random.default_rng(0)
    C, sd = rng.standard_normal((p, p)), rng.uniform(0.5, 2.0, p)
    order = rng.permutation(p).astype(np.intp)
    _permute.scaled_products(C, float(n), sd, threads)
    groups["openmp_team"] = _threads() - set().union(*groups.values())

    def group_of(tid):
        return next((g for g, members in groups.items() if tid in members), "later")

    calls = []

    def timed(module, name):
        func = getattr(module, name)

        def wrapper(*a, **k):
            before = _run_times()
            t0 = time.perf_counter()
            try:
                return func(*a, **k)
            finally:
                ms = 1e3 * (time.perf_counter() - t0)
                ran = {}
                for tid, ns in _run_times().items():
                    d = (ns - before.get(tid, 0)) / 1e6
                    if d > 0.05:
                        count, total = ran.get(group_of(tid), (0, 0.0))
                        ran[group_of(tid)] = (count + 1, round(total + d, 2))
                calls.append({"pass": name, "ms": round(ms, 3), "ran": ran})

        setattr(module, name, wrapper)

    for module_name, name in PASSES:
        timed(importlib.import_module(module_name), name)
    X = bench_pipeline.make_data(args.case, p, n, args.data_dir)
    runs = {"fit": lambda: paralingam.fit(X, backend=args.backend, on_collinear="ignore"),
            "estimator": lambda: DirectLiNGAM(backend=args.backend).fit(X)}
    record = {name: {"walls_ms": [], "phases_ms": []} for name in runs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for run in runs.values():
            run()
            run()
        calls.clear()
        for _ in range(args.rounds):
            for name, run in runs.items():
                t0 = time.perf_counter()
                result = run()
                record[name]["walls_ms"].append(round(1e3 * (time.perf_counter() - t0), 2))
                stats = result.stats if name == "fit" else result.fit_stats_
                record[name]["phases_ms"].append({k: round(1e3 * v, 3)
                                                  for k, v in stats["time"].items()})
    alone = []
    for _ in range(args.alone):
        t0 = time.perf_counter()
        _permute.scaled_products(C, float(n), sd, threads)
        _permute.permuted_gram(C, order, sd, threads)
        alone.append(round(1e3 * (time.perf_counter() - t0), 3))
    record.update(calls=calls, alone_ms=alone, threads=threads,
                  groups={g: len(members) for g, members in groups.items()},
                  omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"))
    print(json.dumps(record))


def summary(record):
    """Medians, the estimator's ratio, and each pass's stalls, of one setting's record."""
    fit = statistics.median(record["fit"]["walls_ms"])
    est = statistics.median(record["estimator"]["walls_ms"])
    passes = {}
    for name in dict.fromkeys(name for _, name in PASSES):  # (_placed: two callers, one pass)
        times = [c["ms"] for c in record["calls"] if c["pass"] == name]
        if not times:
            continue
        fastest = min(times)
        stalled = [c for c in record["calls"] if c["pass"] == name
                   and c["ms"] > STALL_FACTOR * fastest]
        others = {}  # threads outside the OpenMP team that ran during its stalls
        for c in stalled:
            for g, (count, total) in c["ran"].items():
                if g not in ("openmp_team", "start"):
                    others[g] = round(others.get(g, 0.0) + total, 2)
        passes[name] = {"calls": len(times), "fastest_ms": fastest,
                        "median_ms": statistics.median(times), "max_ms": max(times),
                        "stalled": len(stalled), "others_ran_in_stalls_ms": others}
    alone = sorted(record["alone_ms"])
    return {"fit_ms": fit, "estimator_ms": est, "estimator_over_fit": est / fit,
            "estimator_max_ms": max(record["estimator"]["walls_ms"]), "passes": passes,
            "alone": {"calls": len(alone), "median_ms": statistics.median(alone),
                      "max_ms": alone[-1],
                      "stalled": sum(t > STALL_FACTOR * alone[0] for t in alone)}}


def main():
    ap = _common.parser("probe_pass_stalls", __doc__, gpu=True)
    ap.add_argument("--case", default="rank_deficient_1000")
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--alone", type=int, default=300)
    ap.add_argument("--policies", nargs="*", default=list(POLICIES), choices=list(POLICIES))
    ap.add_argument("--data-dir", default=_common.DATA_DIR)
    ap.add_argument("--section", help="write the result as this section of the file")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    import bench_pipeline  # noqa: F401  (the repository on sys.path: the provenance's version)

    settings = {}
    for policy in args.policies:
        env = dict(os.environ)
        env.pop("OMP_WAIT_POLICY", None)
        if POLICIES[policy]:
            env["OMP_WAIT_POLICY"] = POLICIES[policy]
        command = [sys.executable, __file__, "--child", "--case", args.case,
                   "--backend", args.backend, "--rounds", str(args.rounds),
                   "--alone", str(args.alone), "--data-dir", str(args.data_dir)]
        out = subprocess.run(command, env=env, capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"the {policy} child failed (exit {out.returncode}):\n{out.stderr}")
        record = json.loads(out.stdout.strip().splitlines()[-1])  # (its last line)
        settings[policy] = {"summary": summary(record), "record": record}
        s = settings[policy]["summary"]
        print(f"{args.case} {args.backend} {policy:8s} fit {s['fit_ms']:8.2f} ms  "
              f"estimator {s['estimator_ms']:8.2f} ms ({s['estimator_over_fit']:.2f}x, "
              f"max {s['estimator_max_ms']:.1f})", flush=True)
        for name, row in s["passes"].items():
            print(f"    {name:16s} median {row['median_ms']:6.2f} ms  max {row['max_ms']:6.2f}  "
                  f"stalled {row['stalled']:3d}/{row['calls']}  others {row['others_ran_in_stalls_ms']}")
        a = s["alone"]
        print(f"    two passes alone median {a['median_ms']:.3f} ms  max {a['max_ms']:.2f}  "
              f"stalled {a['stalled']}/{a['calls']}")
    payload = {"case": args.case, "backend": args.backend, "rounds": args.rounds,
               "stall_factor": STALL_FACTOR, "settings": settings}
    _common.write_result(args, payload, section=args.section)


if __name__ == "__main__":
    main()
