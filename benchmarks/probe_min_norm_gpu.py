"""A/B of the adjacency step's routes on rank-deficient data after a CUDA search.

``host``: the route before the minimum-norm rows moved to the GPU: the
data's QR on the GPU, ``R`` downloaded, the rows of the variables past the
first dependent one on the host (``adjacency._min_norm._min_norm_rows``),
and the Cholesky rows from a factor of all the variables on the GPU.
``device``: the minimum-norm rows computed where the QR left the data, for a
basis of at most ``MAX_BASIS`` variables (``adjacency._cuda_min_norm``).
``leading``: besides, only the covariance's leading block up to the first
variable the search found explained is factorised (``fit``'s hint,
``_least_squares._hinted_factor``; the adaptive lasso's weights take it
too): what ``fit`` and ``DirectLiNGAM().fit`` run now. The routes
alternate in rounds in one process (by stand-ins of ``rows_on_device`` and
of ``fit``'s hint that decline at once); the adjacency phase and the whole
fit are timed (medians), the search too, for the phase's share of it (#21's
goal: at most 25%), and ``DirectLiNGAM().fit``, whose adaptive lasso takes
the same minimum-norm rows for its weights (#21's goal: at most 1.5x the
fit). The orders must be equal and the matrices equal to 1e-9 of their
largest entry (the largest difference from the first route is reported,
for the estimator's matrix too, with whether its edges are the same).

Usage: ``python probe_min_norm_gpu.py --cases rank_deficient_1000 rank_deficient_300``
"""

import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import paralingam  # noqa: E402
from paralingam import _api  # noqa: E402
from paralingam.adjacency import _cuda_min_norm  # noqa: E402
import _common  # noqa: E402
from bench_pipeline import CASES, make_data, median, timed  # noqa: E402

ON_DEVICE = _cuda_min_norm.rows_on_device
FIRST_EXPLAINED = _api._first_explained
ROUTES = ("host", "device", "leading")


def use_route(route):
    _cuda_min_norm.rows_on_device = ON_DEVICE if route != "host" else (lambda *args: None)
    _api._first_explained = FIRST_EXPLAINED if route == "leading" else (lambda found: None)


def run_case(name, args):
    (p, n), _, _, _ = CASES[name]
    X = make_data(name, p, n, args.data_dir)
    row = {"case": name, "p": X.shape[1], "n": X.shape[0], "rounds": {}}
    results, estimated = {}, {}
    for route in args.routes:  # warm-up, and the results compared
        use_route(route)
        results[route] = paralingam.fit(X, backend="cuda", on_collinear="ignore")
        estimated[route] = paralingam.DirectLiNGAM(backend="cuda").fit(X).adjacency_matrix_
    first = args.routes[0]
    base, base_estimated = results[first], estimated[first]
    scale = max(np.abs(base.adjacency_matrix).max(), 1e-300)
    estimated_scale = max(np.abs(base_estimated).max(), 1e-300)
    row["compared_with"] = first
    row["same_order"] = all(list(r.causal_order) == list(base.causal_order)
                            for r in results.values())
    row["max_difference_over_largest"] = {
        route: float(np.abs(r.adjacency_matrix - base.adjacency_matrix).max() / scale)
        for route, r in results.items() if route != first}
    row["estimator_max_difference_over_largest"] = {
        route: float(np.abs(B - base_estimated).max() / estimated_scale)
        for route, B in estimated.items() if route != first}
    row["estimator_same_edges"] = {route: bool(np.array_equal(B != 0, base_estimated != 0))
                                   for route, B in estimated.items() if route != first}
    for _ in range(args.rounds):
        for route in args.routes:
            use_route(route)
            walls, fits = zip(*[timed(lambda: paralingam.fit(X, backend="cuda",
                                                              on_collinear="ignore"))
                                for _ in range(args.repeats)])
            estimator_s = median([timed(lambda: paralingam.DirectLiNGAM(backend="cuda").fit(X))[0]
                                  for _ in range(args.repeats)])
            row["rounds"].setdefault(route, []).append({
                "fit_s": median(walls), "estimator_s": estimator_s,
                "adjacency_s": median([f.stats["time"]["adjacency"] for f in fits]),
                "search_s": median([f.stats["time"]["search"] for f in fits])})
    use_route("leading")
    row["medians"] = {route: {key: median([r[key] for r in rounds]) for key in rounds[0]}
                      for route, rounds in row["rounds"].items()}
    return row


def main():
    ap = _common.parser("probe_min_norm_gpu", __doc__, repeats=5, gpu=True)
    ap.add_argument("--cases", nargs="*", default=["rank_deficient_1000", "rank_deficient_300"],
                    choices=[c for c, v in CASES.items() if "fresh" not in v[3]])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--routes", nargs="+", default=list(ROUTES), choices=ROUTES)
    ap.add_argument("--data-dir", default=_common.DATA_DIR)
    args = ap.parse_args()
    print(f"rounds of {args.repeats} CUDA fits each (medians); adjacency phase, its share of the "
          "search, and the fit")
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        for name in args.cases:
            row = run_case(name, args)
            for route, m in row["medians"].items():
                print(f"{name:>20} {route:>6}: adjacency {m['adjacency_s'] * 1e3:7.1f} ms "
                      f"({m['adjacency_s'] / m['search_s']:.0%} of the search, "
                      f"{m['search_s'] * 1e3:.1f} ms), fit {m['fit_s'] * 1e3:7.1f} ms, "
                      f"DirectLiNGAM().fit {m['estimator_s'] * 1e3:7.1f} ms "
                      f"({m['estimator_s'] / m['fit_s']:.2f}x)", flush=True)
            diffs = ", ".join(f"{route} {d:.1e}"
                              for route, d in row["max_difference_over_largest"].items())
            estimator = ", ".join(
                f"{route} {d:.1e} (same edges: {row['estimator_same_edges'][route]})"
                for route, d in row["estimator_max_difference_over_largest"].items())
            print(f"{'':>20} same order: {row['same_order']}; largest difference from "
                  f"{row['compared_with']} (of the largest entry): fit {diffs}; "
                  f"estimator {estimator}", flush=True)
            rows.append(row)
    _common.write_result(args, {"rounds": args.rounds, "repeats": args.repeats,
                                "routes": args.routes, "rows": rows})


if __name__ == "__main__":
    main()
