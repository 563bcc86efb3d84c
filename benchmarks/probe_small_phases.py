"""Where a small fit's time goes besides its search: the phases, and a profile of them.

    python benchmarks/probe_small_phases.py --backend cuda
    python benchmarks/probe_small_phases.py --backend cpu --cases sachs_p_values ecoli

On the GPU a search of a few thousand samples takes milliseconds, so the
fixed costs of the steps around it (checks, upload, least squares, reading
results back) decide the whole job's time (``bench_pipeline.py``'s 25% rule).
For each case (``bench_pipeline.CASES``' data at their full size) this runs
``--repeats`` warm fits and prints the median of each ``stats["time"]`` phase,
then profiles ``--profiled`` more fits with :mod:`cProfile` and prints, per
fit, the functions with the most time of their own and the most time in all
they call (the profiler slows Python code down, so read the profile for where
the time goes and the phases for how much). Writes JSON.
"""

import cProfile
import pstats
import statistics
import warnings

import _common  # (benchmarks/ is on sys.path when run as a script)
import bench_pipeline
import paralingam

SMALL_CASES = ("sachs_p_values", "ecoli", "rank_deficient_300", "rank_deficient_1000")


def fit(X, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return paralingam.fit(X, backend=backend, on_collinear="ignore")


def top(stats, key, fits, count):
    """The ``count`` functions with the most ``key`` time ("tottime" or "cumtime"), per fit."""
    rows = []
    for (path, line, name), (_, calls, tottime, cumtime, _) in stats.stats.items():
        rows.append({"function": f"{path.split('paralingam/')[-1]}:{line}({name})",
                     "calls_per_fit": calls / fits, "own_ms": 1e3 * tottime / fits,
                     "cumulative_ms": 1e3 * cumtime / fits})
    field = {"tottime": "own_ms", "cumtime": "cumulative_ms"}[key]
    return sorted(rows, key=lambda r: -r[field])[:count]


def run_case(name, backend, repeats, profiled, count, data_dir):
    (p, n), _, _, _ = bench_pipeline.CASES[name]
    X = bench_pipeline.make_data(name, p, n, data_dir)
    fit(X, backend)  # warm-up: compile, workspaces
    phases = {}
    for _ in range(repeats):
        for key, value in fit(X, backend).stats["time"].items():
            phases.setdefault(key, []).append(value)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(profiled):
        fit(X, backend)
    profiler.disable()
    stats = pstats.Stats(profiler)
    return {"case": name, "p": p, "n": n,
            "phases_ms": {k: 1e3 * statistics.median(v) for k, v in phases.items()},
            "own": top(stats, "tottime", profiled, count),
            "cumulative": top(stats, "cumtime", profiled, count)}


def main():
    ap = _common.parser("probe_small_phases", __doc__, repeats=20, gpu=True)
    ap.add_argument("--backend", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--cases", nargs="*", default=list(SMALL_CASES),
                    choices=list(bench_pipeline.CASES))
    ap.add_argument("--profiled", type=int, default=20, help="fits under the profiler")
    ap.add_argument("--top", type=int, default=40, help="functions listed per table")
    ap.add_argument("--data-dir", default=_common.DATA_DIR)
    args = ap.parse_args()
    rows = []
    for name in args.cases:
        row = run_case(name, args.backend, args.repeats, args.profiled, args.top, args.data_dir)
        rows.append(row)
        search = row["phases_ms"]["search"]
        print(f"\n== {name} (p={row['p']}, n={row['n']}, {args.backend}): phases, ms "
              "(share of the search)")
        print("  ".join(f"{k} {v:.3f} ({v / search:.0%})" for k, v in row["phases_ms"].items()))
        for table, field in (("own", "own_ms"), ("cumulative", "cumulative_ms")):
            print(f"-- profile, {table} time per fit (ms), calls per fit")
            for r in row[table]:
                print(f"{r[field]:9.3f} {r['calls_per_fit']:8.1f}  {r['function']}")
    _common.write_result(args, {"backend": args.backend, "repeats": args.repeats,
                                "profiled": args.profiled, "cases": rows})


if __name__ == "__main__":
    main()
