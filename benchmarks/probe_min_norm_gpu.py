"""A/B of the minimum-norm rows on the GPU against the host's, in ``paralingam.fit``.

``host``: the route before the change: the data's QR on the GPU, ``R``
downloaded, the rows of the variables past the first dependent one on the
host (``adjacency._min_norm._min_norm_rows``). ``device``: the rows computed
where the QR left the data, for a basis of at most ``MAX_BASIS`` variables
(``adjacency._cuda_min_norm``). The two alternate in rounds in one process
(the host route by a stand-in of ``rows_on_device`` that declines at once);
the adjacency phase and the whole fit are timed (medians), the search too,
for the phase's share of it (#21's goal: at most 25%), and
``DirectLiNGAM().fit``, whose adaptive lasso takes the same rows for its
weights (#21's goal: at most 1.5x the fit). The orders must be
equal and the matrices equal to 1e-9 of their largest entry.

Usage: ``python probe_min_norm_gpu.py --cases rank_deficient_1000 rank_deficient_300 ecoli``
"""

import os
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import paralingam  # noqa: E402
from paralingam.adjacency import _cuda_min_norm  # noqa: E402
import _common  # noqa: E402
from bench_pipeline import CASES, make_data, median, timed  # noqa: E402

ON_DEVICE = _cuda_min_norm.rows_on_device


def use_route(route):
    _cuda_min_norm.rows_on_device = ON_DEVICE if route == "device" else (lambda *args: None)


def run_case(name, args):
    (p, n), _, _, _ = CASES[name]
    X = make_data(name, p, n, args.data_dir)
    row = {"case": name, "p": X.shape[1], "n": X.shape[0], "rounds": {}}
    results = {}
    for route in ("host", "device"):  # warm-up, and the results compared
        use_route(route)
        results[route] = paralingam.fit(X, backend="cuda", on_collinear="ignore")
        paralingam.DirectLiNGAM(backend="cuda").fit(X)
    a, b = results["host"], results["device"]
    scale = max(np.abs(a.adjacency_matrix).max(), 1e-300)
    row["same_order"] = bool(list(a.causal_order) == list(b.causal_order))
    row["max_difference_over_largest"] = float(
        np.abs(a.adjacency_matrix - b.adjacency_matrix).max() / scale)
    for _ in range(args.rounds):
        for route in ("host", "device"):
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
    use_route("device")
    row["medians"] = {route: {key: median([r[key] for r in rounds]) for key in rounds[0]}
                      for route, rounds in row["rounds"].items()}
    return row


def main():
    ap = _common.parser("probe_min_norm_gpu", __doc__, repeats=5, gpu=True)
    ap.add_argument("--cases", nargs="*", default=["rank_deficient_1000", "rank_deficient_300",
                                                   "ecoli"],
                    choices=[c for c, v in CASES.items() if "fresh" not in v[3]])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data-dir", default=os.environ.get("PARALINGAM_DATA", "/work/shared/data"))
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
            print(f"{'':>20} same order: {row['same_order']}, largest difference "
                  f"{row['max_difference_over_largest']:.1e} of the largest entry", flush=True)
            rows.append(row)
    _common.write_result(args, {"rounds": args.rounds, "repeats": args.repeats, "rows": rows})


if __name__ == "__main__":
    main()
