"""The whole job, phase by phase: where a fit's time goes besides the search (issue 21).

    python benchmarks/bench_pipeline.py --quick                      # small sizes, 2-core VM
    python benchmarks/bench_pipeline.py --backends cpu cuda          # the issue's sizes
    python benchmarks/bench_pipeline.py --cases typical ecoli first_fit --repeats 5

For each case and backend: ``paralingam.fit`` (the phases of
``result.stats["time"]``: validate, standardise, compile, upload, search,
adjacency; their medians over ``--repeats`` fits after one warm-up fit), the
wall time of the whole fit, ``DirectLiNGAM().fit`` (adaptive lasso, own
timer) and, where the case asks for it, ``get_error_independence_p_values``
(own timer). Every phase other than the search is also printed as a fraction
of the search. The ``first_fit`` case runs a fresh Python process per repeat
and times its first and second fit there (imports done before the timer: the
first fit pays for what the fit itself loads). ``tall`` and ``tall_small``
also time one plain numpy pass (copy to float64, finiteness check,
standardise) against the preparation (validate, and the CPU's standardise or
the CUDA backend's upload), and the peak host memory of the preparation
against the input array; on the CUDA backend ``tall`` also reports the
search's sample pairs per second against the special-function floor
(``bench_gpu.mufu_floor``, measured in the same run), and each part of the
search (float rounds, double re-decisions, row updates; one profiled
search) against a floor of its own (:func:`search_floors`).

Prints a table and writes JSON (commit, machine, backend, medians). Speed is
measured here, never in unit tests; this machine's load is recorded with it
(``os.getloadavg``), as shared machines give noisy numbers.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import paralingam  # noqa: E402
from paralingam.datasets import make_lingam_data  # noqa: E402
from paralingam.lingam.estimator import DirectLiNGAM  # noqa: E402
import _common  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

PHASES = ("validate", "load", "standardise", "compile", "upload", "search", "adjacency")


def rank_deficient(p, n, explained, seed):
    """LiNGAM data of ``p - explained`` variables plus ``explained`` exact combinations.

    Each explained variable is a random combination of two to four of the
    variables before it (in a shuffled column order), as stoichiometric
    fluxes are: exactly explained, rank ``p - explained``.
    """
    free = p - explained
    rng = np.random.default_rng(seed)
    X0, _, _ = make_lingam_data(free, n, density="sparse", random_state=seed)
    cols = [X0[:, j] for j in range(free)]
    for _ in range(explained):
        k = int(rng.integers(2, 5))
        parents = rng.choice(len(cols), size=min(k, len(cols)), replace=False)
        w = rng.choice([-1.0, 1.0], size=len(parents)) * rng.uniform(0.5, 1.5, len(parents))
        cols.append(sum(wi * cols[j] for wi, j in zip(w, parents)))
    X = np.column_stack(cols)
    return np.ascontiguousarray(X[:, rng.permutation(p)])


def ecoli(data_dir):
    path = Path(data_dir) / "ecoli_core_fluxes_n10000.npz"
    with np.load(path, allow_pickle=True) as d:
        return np.ascontiguousarray(d["X"])


def synthetic(p, n, seed):
    return np.ascontiguousarray(make_lingam_data(p, n, density="sparse", random_state=seed)[0])


# name: (full (p, n), quick (p, n), how to make the data, what to time)
CASES = {
    "tall": ((600, 500_000), (40, 50_000), "synthetic", ("plain_pass", "floor")),
    "tall_small": ((24, 400_000), (24, 100_000), "synthetic", ("plain_pass",)),
    "typical": ((1000, 8192), (100, 2048), "synthetic", ()),
    "ecoli": ((87, 10_000), (87, 10_000), "ecoli", ()),
    "wide_5000": ((5000, 4096), (300, 256), "synthetic", ()),
    "wide_10000": ((10_000, 2000), (400, 200), "synthetic", ()),
    "rank_deficient_1000": ((1000, 8192), (100, 1024), "rank_deficient", ()),
    "rank_deficient_300": ((300, 2048), (60, 512), "rank_deficient", ()),
    "sachs_p_values": ((11, 7466), (11, 1000), "synthetic", ("p_values",)),
    "first_fit": ((11, 7466), (11, 7466), "synthetic", ("fresh",)),
    # CUDA only: the first process on a machine (an empty kernel cache: the
    # compilation) and the processes after it (the cache loaded)
    "first_fit_cold": ((11, 7466), (11, 7466), "synthetic", ("fresh", "cold")),
}
# explained variables of the rank-deficient cases: 924 of 1000 as in the issue
EXPLAINED_FRACTION = 0.924


def make_data(name, p, n, data_dir, seed=None):
    """Case ``name``'s data of size (n, p); ``seed`` by default the case's own
    (its position in ``CASES`` plus one), as every benchmark that times the case uses."""
    if seed is None:
        seed = list(CASES).index(name) + 1
    kind = CASES[name][2]
    if kind == "ecoli":
        return ecoli(data_dir)
    if kind == "rank_deficient":
        return rank_deficient(p, n, int(round(EXPLAINED_FRACTION * p)), seed)
    return synthetic(p, n, seed)


def median(values):
    return statistics.median(values) if values else None


def timed(call):
    t0 = time.perf_counter()
    out = call()
    return time.perf_counter() - t0, out


def fit_phases(X, backend, repeats, warm_up=True):
    """Medians of the wall time and of each ``stats["time"]`` phase, after a warm-up fit
    (``warm_up=False``: none, for long cases after others in the same process), and the
    last fit's ``stats`` (the searches compare the same pairs every repeat)."""
    if warm_up:
        paralingam.fit(X, backend=backend, on_collinear="ignore")
    walls, phases = [], {}
    for _ in range(repeats):
        wall, result = timed(lambda: paralingam.fit(X, backend=backend, on_collinear="ignore"))
        walls.append(wall)
        for key, value in result.stats["time"].items():
            phases.setdefault(key, []).append(value)
    return median(walls), {k: median(v) for k, v in phases.items()}, result.stats


def estimator_fit(X, backend, repeats, warm_up=True):
    """Median wall time of ``DirectLiNGAM(backend=backend).fit(X)``, and the last model.

    The warm-up fit takes what a process pays once (the adaptive lasso's
    modules, its GPU kernels' compile), as ``fit_phases``'s does for ``fit``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if warm_up:
            DirectLiNGAM(backend=backend).fit(X)
        times = []
        for _ in range(repeats):
            wall, model = timed(lambda: DirectLiNGAM(backend=backend).fit(X))
            times.append(wall)
    return median(times), model


def p_values(model, X, repeats, warm_up=True):
    """Median seconds of ``get_error_independence_p_values``, after one untimed call
    (``warm_up``: on a fresh GPU machine the first call compiles the HSIC kernels)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if warm_up:
            model.get_error_independence_p_values(X)
        return median([timed(lambda: model.get_error_independence_p_values(X))[0]
                       for _ in range(repeats)])


def plain_pass(X, repeats):
    """One plain numpy pass: copy to float64, check finiteness, standardise."""
    def one():
        Z = np.array(X, dtype=np.float64)
        if not np.isfinite(Z).all():
            raise ValueError
        Z -= Z.mean(axis=0)
        Z /= Z.std(axis=0)
        return Z
    return median([timed(one)[0] for _ in range(repeats)])


def preparation_peak(X, backend):
    """Peak host memory (numpy's allocations) of ``fit``'s preparation of X, in bytes.

    As ``fit`` prepares float input: checked without a copy, read scaled
    block by block (``_preparation.ScaledData``) for the rows' rounding
    noise and, on the CPU backend, its standardised rows and their
    covariance (the scaled copy for least squares comes after the search:
    ``bench_prep_memory.py`` measures that step). (The CUDA upload's two
    page-locked blocks, at most 2 x ``_cuda.UPLOAD_BLOCK_BYTES``, are
    pycuda's allocations, not numpy's.)
    """
    from paralingam._preparation import standardise_rows
    from paralingam._validation import _as_data_matrix
    from paralingam.search.policy import initial_noise

    tracemalloc.start()
    tracemalloc.reset_peak()
    data, _, _ = _as_data_matrix(X, scaled="deferred")
    if backend == "cpu":
        standardise_rows(data)
    initial_noise(data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


FRESH = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import paralingam
from paralingam.datasets import make_lingam_data
X = np.ascontiguousarray(make_lingam_data(int(sys.argv[2]), int(sys.argv[3]), random_state=7)[0])
out = {}
for which in ("first", "second", "third"):
    t0 = time.perf_counter()
    r = paralingam.fit(X, backend=sys.argv[4])
    out[which] = time.perf_counter() - t0
    out[which + "_phases"] = r.stats["time"]
out["modules"] = sorted(m for m in ("scipy", "scipy.linalg", "sklearn", "threadpoolctl")
                        if m in sys.modules)
print(json.dumps(out))
"""


def first_fit(p, n, backend, repeats, cold=False):
    """Fresh processes' first and warm fits; ``cold``: the first process starts
    from an empty kernel cache (PyCUDA's, under ``XDG_CACHE_HOME``) and the
    others use what it compiled (the row's ``cold_*`` keys)."""
    runs = []
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        if cold:
            env["XDG_CACHE_HOME"] = cache
        for _ in range(repeats + cold):
            out = subprocess.run([sys.executable, "-c", FRESH, str(ROOT), str(p), str(n), backend],
                                 capture_output=True, text=True, check=True, env=env)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    cold_row = {}
    if cold:
        first = runs.pop(0)
        cold_row = {"cold_first": first["first"],
                    "cold_compile": first["first_phases"].get("compile", 0.0),
                    "cached_compile": median([r["first_phases"].get("compile", 0.0) for r in runs])}
    row = {"first": median([r["first"] for r in runs]),
           "warm": median([min(r["second"], r["third"]) for r in runs]),
           "modules_loaded_by_fit": runs[-1]["modules"],
           "first_phases": {k: median([r["first_phases"].get(k, 0.0) for r in runs])
                            for k in runs[-1]["first_phases"]}}
    row["goal"] = 3 * row["warm"] + 0.010
    row.update(cold_row)
    return row


def run_case(name, backend, args):
    full, quick, _, extras = CASES[name]
    p, n = quick if args.quick else full
    row = {"case": name, "backend": backend}
    if "fresh" in extras:
        row.update(p=p, n=n, **first_fit(p, n, backend, args.repeats, cold="cold" in extras))
        return row
    X = make_data(name, p, n, args.data_dir)
    row.update(n=X.shape[0], p=X.shape[1])
    row["fit"], row["phases"], stats = fit_phases(X, backend, args.repeats,
                                                  warm_up=not args.no_warm_up)
    search = row["phases"].get("search")
    row["fraction_of_search"] = {k: v / search for k, v in row["phases"].items()
                                 if k != "search" and search}
    if backend == "cuda" and "floor" in extras:
        row.update(search_floors(X, stats, search))
    if not args.no_estimator:
        # (every repeat on fits of under a second: one estimator fit of a few
        # milliseconds is too noisy a ratio)
        est_repeats = args.repeats if row["fit"] < 1.0 else max(1, args.repeats // 2)
        row["estimator_fit"], model = estimator_fit(X, backend, est_repeats,
                                                    warm_up=not args.no_warm_up)
        row["estimator_over_fit"] = row["estimator_fit"] / row["fit"]
        if "p_values" in extras:
            row["p_values"] = p_values(model, X, 1, warm_up=not args.no_warm_up)
            row["fraction_of_search"]["p_values"] = row["p_values"] / search
    if "plain_pass" in extras:
        row["plain_pass"] = plain_pass(X, args.repeats)
        # the CPU's standardise, the CUDA backend's upload (with the noise)
        prep = sum(row["phases"].get(k, 0) for k in ("validate", "standardise", "upload"))
        row["preparation_over_plain_pass"] = prep / row["plain_pass"]
        row["preparation_peak_over_input"] = preparation_peak(X, backend) / X.nbytes
        # the other backend's route too (its host side needs no GPU)
        other = "cuda" if backend == "cpu" else "cpu"
        row[f"preparation_peak_over_input_{other}_route"] = preparation_peak(X, other) / X.nbytes
    return row


# Device memory bytes the update moves per sample of each row it regresses
# on the root, on long rows (kernels/paralingam.cu: update_sums, then
# update_rows): the double row read twice and written once, its float copy
# written. The root's row, which every block of an iteration reads, is
# left out (the L2 serves most of it).
UPDATE_BYTES_PER_SAMPLE = 8 + 8 + 8 + 4


def search_floors(X, stats, search):
    """The CUDA search against the hardware's floors, measured in this run (bench_gpu.py).

    #21's measure, ``search_fraction_of_floor``: the float comparisons'
    sample pairs at the special-function floor, against the search. The
    search also re-decides near ties in double and updates the rows on
    every root; ``floor_s`` gives each of the three its own floor, and
    ``search_fraction_of_hardware_floor`` their sum against the search
    (they run one after another: each needs the one before):

    * rounds: the float comparisons' sample pairs at the special-function
      floor;
    * re_decisions: the pairs compared in double (``stats["float64_pairs"]``)
      at the double arithmetic's floor (``bench_gpu.double_floor``);
    * updates: the rows regressed, each sample's ``UPDATE_BYTES_PER_SAMPLE``
      at the memory bandwidth, or the double and float entropies of the
      rows at their floors (a series is half a pair), whichever is longest.

    ``gpu_s``: one profiled search's device time in each (CUDA events).
    """
    import bench_gpu

    n = X.shape[0]
    mufu, double, bandwidth = bench_gpu.mufu_floor(), bench_gpu.double_floor(), \
        bench_gpu.bandwidth_floor()
    compared = sum(stats["compared"]) * n
    double_pairs = sum(stats["float64_pairs"]) * n
    regressed = sum(stats["remaining"][1:]) * n  # the rows left after each root
    floors = {"rounds": compared / mufu, "re_decisions": double_pairs / double,
              "updates": max(regressed * UPDATE_BYTES_PER_SAMPLE / bandwidth,
                             regressed / 2 / double, regressed / 2 / mufu)}
    return {"sample_pairs": compared, "double_sample_pairs": double_pairs,
            "regressed_row_samples": regressed,
            "floor_sample_pairs_per_s": mufu, "double_floor_sample_pairs_per_s": double,
            "bandwidth_bytes_per_s": bandwidth,
            "search_fraction_of_floor": compared / search / mufu,
            "floor_s": floors, "gpu_s": profiled_phases(X),
            "search_fraction_of_hardware_floor": sum(floors.values()) / search}


def profiled_phases(X):
    """Device seconds of one CUDA search of ``X`` (``fit``'s settings) in its
    rounds, re-decisions and updates (CUDA events around each)."""
    from paralingam.search import _cuda

    times = {}
    _cuda.search(np.ascontiguousarray(X), times=times, profile=True,
                 **_common.fit_search_settings(X.shape[0]))
    return {"rounds": times["gpu_rounds"], "re_decisions": times["gpu_redo"],
            "updates": times["gpu_update"], "prepare": times["gpu_prepare"]}


def show(row):
    if "first" in row:
        print(f"{row['case']:>20} {row['backend']:>4}  p={row['p']} n={row['n']}: first fit "
              f"{row['first'] * 1e3:.1f} ms, warm {row['warm'] * 1e3:.1f} ms (goal <= "
              f"{row['goal'] * 1e3:.1f} ms); first-fit phases "
              + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in row["first_phases"].items())
              + f"; modules the fit loaded: {row['modules_loaded_by_fit'] or 'none'}", flush=True)
        if "cold_first" in row:
            print(f"{'':>20} empty kernel cache: first fit {row['cold_first']:.2f} s (compile "
                  f"{row['cold_compile']:.2f} s); later processes' compile phase "
                  f"{row['cached_compile'] * 1e3:.0f} ms (the cache loaded)", flush=True)
        return
    ph = row["phases"]
    cells = " ".join(f"{ph.get(k, 0.0):8.4f}" for k in PHASES)
    extra = ""
    if "estimator_fit" in row:
        extra += f" est {row['estimator_fit']:8.3f} ({row['estimator_over_fit']:.2f}x)"
    if "p_values" in row:
        extra += f" pval {row['p_values']:8.3f}"
    print(f"{row['case']:>20} {row['backend']:>4} {row['p']:>6} {row['n']:>7} "
          f"{row['fit']:8.4f} {cells}{extra}", flush=True)
    fr = ", ".join(f"{k} {v:.0%}" for k, v in row["fraction_of_search"].items())
    print(f"{'':>20} of the search: {fr}", flush=True)
    if "plain_pass" in row:
        print(f"{'':>20} plain numpy pass {row['plain_pass']:.4f} s; preparation "
              f"= {row['preparation_over_plain_pass']:.2f}x; peak memory "
              f"{row['preparation_peak_over_input']:.2f}x the input (the other backend's "
              f"route: {[v for k, v in row.items() if k.endswith('_route')][0]:.2f}x)", flush=True)
    if "search_fraction_of_floor" in row:
        print(f"{'':>20} search: {row['sample_pairs']:.2e} sample pairs, "
              f"{row['search_fraction_of_floor']:.0%} of the special-function floor "
              f"({row['floor_sample_pairs_per_s']:.2e} pairs/s)", flush=True)
    if "floor_s" in row:
        print(f"{'':>20} its three parts: "
              + ", ".join(f"{k} {row['gpu_s'][k]:.3f} s on the device against a floor of "
                          f"{v:.3f} s" for k, v in row["floor_s"].items())
              + f"; {row['double_sample_pairs']:.2e} sample pairs in double "
              f"({row['double_floor_sample_pairs_per_s']:.2e} pairs/s), "
              f"{row['bandwidth_bytes_per_s']:.2e} B/s; the search at "
              f"{row['search_fraction_of_hardware_floor']:.0%} of their sum", flush=True)


def cuda_usable():
    try:
        from paralingam.search import _cuda
        return _cuda.unavailable_reason() is None
    except Exception:  # pragma: no cover - depends on the machine
        return False


def main():
    ap = _common.parser("bench_pipeline", __doc__, repeats=3, gpu=True,
                        quick="small sizes (a 2-core VM)")
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    ap.add_argument("--backends", nargs="*", default=None, choices=["cpu", "cuda"],
                    help="default: cpu, and cuda when usable")
    ap.add_argument("--no-warm-up", action="store_true",
                    help="no warm-up fit before the timed ones (for long cases listed after "
                         "short ones: the kernels are compiled by then)")
    ap.add_argument("--no-estimator", action="store_true",
                    help="skip DirectLiNGAM().fit and the p-values")
    ap.add_argument("--data-dir", default=_common.DATA_DIR,
                    help="folder of ecoli_core_fluxes_n10000.npz (.gpu/data on the GPU machine)")
    args = ap.parse_args()
    backends = args.backends or (["cpu", "cuda"] if cuda_usable() else ["cpu"])

    meta = {"commit": _common.commit(), "machine": platform.node(), "cores": os.cpu_count(),
            "load_before": os.getloadavg(), "quick": args.quick, "repeats": args.repeats}
    print(f"commit {meta['commit']}, {meta['machine']}, {meta['cores']} cores, load "
          f"{meta['load_before'][0]:.1f}; medians of {args.repeats} (seconds)")
    print(f"{'case':>20} {'':>4} {'p':>6} {'n':>7} {'fit':>8} "
          + " ".join(f"{k[:8]:>8}" for k in PHASES))
    rows = []
    for backend in backends:
        for name in args.cases:
            if name == "ecoli" and not (Path(args.data_dir)
                                        / "ecoli_core_fluxes_n10000.npz").exists():
                print(f"{name:>20} {backend:>4}  skipped: no data in {args.data_dir}")
                continue
            if name == "first_fit_cold" and backend != "cuda":
                continue  # a kernel cache is the CUDA backend's
            row = run_case(name, backend, args)
            show(row)
            rows.append(row)
    # The provenance (commit, machine, cores, gpu, versions) is _common's; the run's own facts:
    _common.write_result(args, {"quick": args.quick, "repeats": args.repeats,
                                "load_before": meta["load_before"], "load_after": os.getloadavg(),
                                "rows": rows})


if __name__ == "__main__":
    main()
