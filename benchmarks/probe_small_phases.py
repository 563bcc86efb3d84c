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
the time goes and the phases for how much). ``--timers`` wraps named
functions (``module:function``, looked up on the module at each call) with a
clock and a count of the process's minor page faults, reported per fit over
the ``--repeats`` fits (nested functions count in each). ``--qr-floor``
times cuSOLVER's ``dgeqrf`` alone on an array of each case's shape (the
data's QR that the adjacency step of rank-deficient data runs on the GPU):
what that step cannot go below on this route. ``--ab MODULE:NAME=VALUE ...``
sets those module constants on every other fit of an extra ``--repeats``
rounds (alternated in this process, after the runs above) and reports the
phases of both. ``--estimator`` does all of this for ``DirectLiNGAM().fit``
(the adaptive lasso) instead of ``paralingam.fit``. ``--rank-deficient
PxN ...`` adds rank-deficient cases of those shapes (as
``bench_pipeline``'s, named ``rank_deficient_PxN``), for thresholds in
the number of variables. ``--set MODULE:NAME=VALUE ...`` sets module
constants for the whole run (an A/B across processes, for settings whose
effect outlives a fit: kept buffers, pools). Writes JSON.
"""

import cProfile
import functools
import importlib
import pstats
import resource
import statistics
import time
import types
import warnings

import _common  # (benchmarks/ is on sys.path when run as a script)
import bench_pipeline
import paralingam

SMALL_CASES = ("sachs_p_values", "ecoli", "rank_deficient_300", "rank_deficient_1000")


def fit(X, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return paralingam.fit(X, backend=backend, on_collinear="ignore")


def estimator_fit(X, backend):
    """``DirectLiNGAM(backend=backend).fit(X)`` (the adaptive lasso), as a result with
    ``causal_order`` and ``stats`` like :func:`fit`'s."""
    from paralingam.lingam.estimator import DirectLiNGAM

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DirectLiNGAM(backend=backend).fit(X)
    return types.SimpleNamespace(causal_order=model.causal_order_, stats=model.fit_stats_)


def phases_of(fitter, X, backend, repeats):
    """Median ``stats["time"]`` phases (s) of ``repeats`` fits by ``fitter``."""
    phases = {}
    for _ in range(repeats):
        for key, value in fitter(X, backend).stats["time"].items():
            phases.setdefault(key, []).append(value)
    return {k: statistics.median(v) for k, v in phases.items()}


def top(stats, key, fits, count):
    """The ``count`` functions with the most ``key`` time ("tottime" or "cumtime"), per fit."""
    rows = []
    for (path, line, name), (_, calls, tottime, cumtime, _) in stats.stats.items():
        rows.append({"function": f"{path.split('paralingam/')[-1]}:{line}({name})",
                     "calls_per_fit": calls / fits, "own_ms": 1e3 * tottime / fits,
                     "cumulative_ms": 1e3 * cumtime / fits})
    field = {"tottime": "own_ms", "cumtime": "cumulative_ms"}[key]
    return sorted(rows, key=lambda r: -r[field])[:count]


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Timers:
    """Clocks and page-fault counts around named functions (``"module:function"``)."""

    def __init__(self, names):
        self.names, self.totals, self._saved = list(names), {}, []

    def __enter__(self):
        for name in self.names:
            module_name, attr = name.split(":")
            module = importlib.import_module(module_name)
            original = getattr(module, attr)
            self._saved.append((module, attr, original))
            setattr(module, attr, self._wrap(name, original))
        return self

    def _wrap(self, name, original):
        @functools.wraps(original)
        def timed(*args, **kwargs):
            t0, f0 = time.perf_counter(), minor_faults()
            try:
                return original(*args, **kwargs)
            finally:
                total = self.totals.setdefault(name, [0, 0.0, 0])
                total[0] += 1
                total[1] += time.perf_counter() - t0
                total[2] += minor_faults() - f0
        return timed

    def __exit__(self, *exc):
        for module, attr, original in reversed(self._saved):
            setattr(module, attr, original)

    def per_fit(self, fits):
        return {name: {"calls": c / fits, "ms": 1e3 * s / fits, "minor_faults": f / fits}
                for name, (c, s, f) in self.totals.items()}


def qr_floor(n, p, repeats=5):
    """Median seconds of cuSOLVER's ``dgeqrf`` alone on an ``n x p`` device array (synchronised)."""
    import numpy as np
    import pycuda.driver as drv

    from paralingam import _gpu
    from paralingam.adjacency import _cuda_qr

    _gpu.context()
    cusolver = _cuda_qr._cusolver()
    handle = cusolver.create()
    A = np.asfortranarray(np.random.default_rng(0).standard_normal((n, p)))
    d_a = drv.mem_alloc(A.nbytes)
    lwork = cusolver.dgeqrf_bufferSize(handle, n, p, int(d_a), n)
    d_tau, d_work, d_info = drv.mem_alloc(8 * p), drv.mem_alloc(8 * lwork), drv.mem_alloc(8)
    times = []
    try:
        for _ in range(repeats + 1):  # (the first: warm-up)
            drv.memcpy_htod(d_a, A)
            drv.Context.synchronize()
            t0 = time.perf_counter()
            cusolver.dgeqrf(handle, n, p, int(d_a), n, int(d_tau), int(d_work), lwork,
                            int(d_info))
            drv.Context.synchronize()
            times.append(time.perf_counter() - t0)
    finally:
        for buf in (d_a, d_tau, d_work, d_info):
            buf.free()
        cusolver.destroy(handle)
    return statistics.median(times[1:])


def run_case(name, backend, repeats, profiled, count, data_dir, timer_names=(), fitter=fit):
    (p, n), _, _, _ = bench_pipeline.CASES[name]
    X = bench_pipeline.make_data(name, p, n, data_dir)
    fitter(X, backend)  # warm-up: compile, workspaces (outside the timers)
    with Timers(timer_names) as timers:
        f0 = minor_faults()
        phases = phases_of(fitter, X, backend, repeats)
        faults = (minor_faults() - f0) / repeats
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(profiled):
        fitter(X, backend)
    profiler.disable()
    stats = pstats.Stats(profiler) if profiled else None
    return {"case": name, "p": p, "n": n,
            "phases_ms": {k: 1e3 * v for k, v in phases.items()},
            "minor_faults_per_fit": faults, "timers": timers.per_fit(repeats),
            "own": top(stats, "tottime", profiled, count) if stats else [],
            "cumulative": top(stats, "cumtime", profiled, count) if stats else []}


def parse_setting(text):
    """``"paralingam.search.policy:NOISE_THREAD_BYTES=4194304"`` -> (module, name, value).

    Raises SystemExit for a name the module lacks or a value that is not a
    Python literal (``_common.module_setting``).
    """
    module_name, _, option = text.partition(":")
    module = importlib.import_module(module_name)
    return (module, *_common.module_setting(module, option, "--ab"))


def ab_case(name, backend, repeats, data_dir, settings, fitter=fit):
    """Median phases (ms) of fits with the defaults (A) and with ``settings`` (B), alternated."""
    (p, n), _, _, _ = bench_pipeline.CASES[name]
    X = bench_pipeline.make_data(name, p, n, data_dir)
    defaults = [(module, attr, getattr(module, attr)) for module, attr, _ in settings]
    phases = {"A": {}, "B": {}}
    orders = {}
    try:
        for _ in range(repeats + 1):  # (the first round: warm-up, not counted)
            for variant, values in (("A", defaults), ("B", settings)):
                for module, attr, value in values:
                    setattr(module, attr, value)
                result = fitter(X, backend)
                orders.setdefault(variant, result.causal_order)
                if result.causal_order != orders[variant]:
                    raise RuntimeError(f"{name}: the order changed between fits")
                for key, value in result.stats["time"].items():
                    phases[variant].setdefault(key, []).append(value)
    finally:
        for module, attr, value in defaults:
            setattr(module, attr, value)
    return {"case": name, "same_order": orders["A"] == orders["B"],
            **{f"phases_ms_{v}": {k: 1e3 * statistics.median(t[1:]) for k, t in ph.items()}
               for v, ph in phases.items()}}


def add_rank_deficient(shapes):
    """Rank-deficient cases ``rank_deficient_PxN`` in ``bench_pipeline.CASES``; their names."""
    names = []
    for shape in shapes:
        p, n = (int(v) for v in shape.lower().split("x"))
        name = f"rank_deficient_{p}x{n}"
        bench_pipeline.CASES[name] = ((p, n), (p, n), "rank_deficient", ())
        names.append(name)
    return names


def main():
    ap = _common.parser("probe_small_phases", __doc__, repeats=20, gpu=True)
    ap.add_argument("--backend", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--cases", nargs="*", default=list(SMALL_CASES),
                    choices=list(bench_pipeline.CASES))
    ap.add_argument("--rank-deficient", nargs="*", default=[], metavar="PxN",
                    help="rank-deficient cases of these shapes, after --cases")
    ap.add_argument("--profiled", type=int, default=20, help="fits under the profiler")
    ap.add_argument("--top", type=int, default=40, help="functions listed per table")
    ap.add_argument("--data-dir", default=_common.DATA_DIR)
    ap.add_argument("--qr-floor", action="store_true",
                    help="also time cuSOLVER's dgeqrf alone on each case's shape (CUDA)")
    ap.add_argument("--timers", nargs="*", default=[], metavar="MODULE:FUNCTION",
                    help="functions to clock over the --repeats fits")
    ap.add_argument("--ab", nargs="*", default=[], metavar="MODULE:NAME=VALUE",
                    help="module constants of variant B of an A/B alternated in this process")
    ap.add_argument("--estimator", action="store_true",
                    help="fit with DirectLiNGAM (the adaptive lasso) instead of paralingam.fit")
    ap.add_argument("--set", nargs="*", default=[], metavar="MODULE:NAME=VALUE",
                    help="module constants set for the whole run")
    args = ap.parse_args()
    for module, attr, value in (parse_setting(text) for text in args.set):
        setattr(module, attr, value)
    fitter = estimator_fit if args.estimator else fit
    settings = [parse_setting(text) for text in args.ab]
    args.cases = list(args.cases) + add_rank_deficient(args.rank_deficient)
    rows = []
    for name in args.cases:
        row = run_case(name, args.backend, args.repeats, args.profiled, args.top, args.data_dir,
                       args.timers, fitter)
        if args.qr_floor and args.backend == "cuda":
            row["qr_floor_ms"] = 1e3 * qr_floor(row["n"], row["p"])
        rows.append(row)
        search = row["phases_ms"]["search"]
        print(f"\n== {name} (p={row['p']}, n={row['n']}, {args.backend}): phases, ms "
              "(share of the search)")
        print("  ".join(f"{k} {v:.3f} ({v / search:.0%})" for k, v in row["phases_ms"].items()))
        print(f"minor page faults per fit: {row['minor_faults_per_fit']:.0f}")
        if "qr_floor_ms" in row:
            print(f"cuSOLVER dgeqrf alone on {row['n']} x {row['p']}: {row['qr_floor_ms']:.3f} ms")
        for timer, t in row["timers"].items():
            print(f"  {timer}: {t['ms']:.3f} ms in {t['calls']:.1f} calls, "
                  f"{t['minor_faults']:.0f} minor faults")
        for table, field in (("own", "own_ms"), ("cumulative", "cumulative_ms")):
            print(f"-- profile, {table} time per fit (ms), calls per fit")
            for r in row[table]:
                print(f"{r[field]:9.3f} {r['calls_per_fit']:8.1f}  {r['function']}")
    ab = []
    for name in args.cases if settings else ():
        row = ab_case(name, args.backend, args.repeats, args.data_dir, settings, fitter)
        ab.append(row)
        print(f"\n== A/B {name}: B = {' '.join(args.ab)}; same order: {row['same_order']}")
        for key in row["phases_ms_A"]:
            a, b = row["phases_ms_A"][key], row["phases_ms_B"][key]
            print(f"  {key:>10}: A {a:9.3f} ms  B {b:9.3f} ms  ({b / a if a else float('nan'):.2f}x)")
    _common.write_result(args, {"backend": args.backend, "estimator": args.estimator,
                                "repeats": args.repeats,
                                "profiled": args.profiled, "cases": rows,
                                **({"ab": {"b_settings": args.ab, "cases": ab}} if ab else {})})


if __name__ == "__main__":
    main()
