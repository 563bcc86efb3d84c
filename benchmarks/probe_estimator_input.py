"""A/B of how ``DirectLiNGAM.fit`` reads float input: the scaled copy against none.

``copy``: the estimator's route before issue 21's change, a validated float64
copy of the data whose columns are then rescaled in place (what the
bootstrap's resamples and the command line still take: ``_fit_data`` with
``absmax``). ``deferred``: ``DirectLiNGAM().fit`` now, which reads the input
as ``paralingam.fit`` does (a ``ScaledData`` over it, no copy). Both run the
same search and adaptive lasso, alternated in rounds in one process, with
``paralingam.fit`` in each round for the estimator's ratio to it (#21's goal
on rank-deficient data: at most 1.5x). Orders and matrices are checked equal.

Usage: ``python probe_estimator_input.py --backend cuda --cases rank_deficient_1000``
"""

import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import paralingam  # noqa: E402
from paralingam._validation import _as_data_matrix  # noqa: E402
from paralingam.lingam.estimator import DirectLiNGAM  # noqa: E402
import _common  # noqa: E402
from bench_pipeline import CASES, make_data, median, timed  # noqa: E402


def copy_route(X, backend):
    """The estimator's fit through the float64 copy (the route before the change)."""
    model = DirectLiNGAM(backend=backend)
    data, names, absmax = _as_data_matrix(X)
    settings = model._checked_settings(data.shape[1], names)
    model._check_samples(data.shape, settings)
    return model._fit_data(data, settings, settings["backend"], absmax)


def deferred_route(X, backend):
    model = DirectLiNGAM(backend=backend).fit(X)
    return model.causal_order_, model.adjacency_matrix_, model.fit_stats_


ROUTES = {"copy": copy_route, "deferred": deferred_route}


def run_case(name, backend, args):
    full, quick, _, _ = CASES[name]
    p, n = quick if args.quick else full
    X = make_data(name, p, n, args.data_dir)
    row = {"case": name, "p": X.shape[1], "n": X.shape[0], "backend": backend, "rounds": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = {route: fn(X, backend) for route, fn in ROUTES.items()}  # warm-up
        paralingam.fit(X, backend=backend, on_collinear="ignore")
        a, b = results["copy"], results["deferred"]
        row["same_result"] = bool(list(a[0]) == list(b[0]) and np.array_equal(a[1], b[1]))
        for _ in range(args.rounds):
            fit_s = median([timed(lambda: paralingam.fit(X, backend=backend,
                                                         on_collinear="ignore"))[0]
                            for _ in range(args.repeats)])
            for route, fn in ROUTES.items():
                est_s = median([timed(lambda: fn(X, backend))[0] for _ in range(args.repeats)])
                row["rounds"].setdefault(route, []).append(
                    {"estimator_s": est_s, "fit_s": fit_s, "estimator_over_fit": est_s / fit_s})
    row["median_over_fit"] = {route: median([r["estimator_over_fit"] for r in rounds])
                              for route, rounds in row["rounds"].items()}
    row["median_estimator_s"] = {route: median([r["estimator_s"] for r in rounds])
                                 for route, rounds in row["rounds"].items()}
    return row


def main():
    ap = _common.parser("probe_estimator_input", __doc__, repeats=3,
                        quick="small sizes (a 2-core VM)")
    ap.add_argument("--cases", nargs="*", default=["rank_deficient_1000", "rank_deficient_300"],
                    choices=[c for c, v in CASES.items() if "fresh" not in v[3]])
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data-dir", default=_common.DATA_DIR)
    args = ap.parse_args()
    print(f"rounds of {args.repeats} fits each (medians), {args.backend} backend; "
          "DirectLiNGAM().fit / paralingam.fit")
    rows = []
    for name in args.cases:
        row = run_case(name, args.backend, args)
        est = row["median_estimator_s"]
        ratio = row["median_over_fit"]
        print(f"{name:>20} p={row['p']} n={row['n']}: copy {est['copy'] * 1e3:8.1f} ms "
              f"({ratio['copy']:.2f}x), no copy {est['deferred'] * 1e3:8.1f} ms "
              f"({ratio['deferred']:.2f}x); same result: {row['same_result']}", flush=True)
        rows.append(row)
    _common.write_result(args, {"rounds": args.rounds, "repeats": args.repeats, "rows": rows})


if __name__ == "__main__":
    main()
