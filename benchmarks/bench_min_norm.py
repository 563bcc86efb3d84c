"""Time and check least squares on rank-deficient data (wide data, exact combinations).

    python benchmarks/bench_min_norm.py                      # the default cases below
    python benchmarks/bench_min_norm.py --cases wide:4000x1024 --check-rows 50

For each case, ``adjacency.ols_adjacency`` (minimum-norm rows from the
in-order basis of the data, as ``fit`` runs it), medians of ``--repeats``;
``--check-rows`` rows, spread over the order, are compared with
``numpy.linalg.lstsq`` on the centred data: the worst relative difference,
and the worst in units of the row's bound ``1e-8 + eps kappa^2`` (kappa: the
condition number of its predecessors). Where exact combinations are exact
only to their own rounding (built in floating point, as real data are), the
two answers differ by that rounding times kappa^2, not eps times kappa^2. Cases: ``wide`` (Laplace noise, n < p)
and ``shuffled`` (a third of the columns exact combinations of four earlier
ones, columns shuffled: exact combinations follow nearly dependent variables).
``--loop`` also times the row-by-row route for blocks of dependent variables
(one rotation sweep of the basis factor per variable, the only route before
blocks of dependent variables were solved in BLAS-3 by
``adjacency._min_norm._dependent_block``), on the same data in the same process.
``--widths`` also times blocks of 256 variables always (the width before
blocks became about as wide as the basis: ``MIN_NORM_MIN_BLOCK``), alternated
with the default in ``--repeats`` rounds, and prints the largest difference
of the rows relative to the matrix's largest entry. Case kind ``explained``:
``bench_pipeline.py``'s rank-deficient data (92.4% of the variables exact
combinations of two to four others). ``--blas-threads`` (default 1, as
``fit`` runs this step after a CPU search).
Prints a table and writes JSON. Speed is measured here, never in unit tests.
"""

import os
import platform

import numpy as np

from paralingam.adjacency import _min_norm
from paralingam.adjacency._common import _scatter
# fit's step, on checked data
from paralingam.adjacency._least_squares import _ols_adjacency as ols_adjacency

import _common  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from _common import median_time  # noqa: E402

DEFAULT_CASES = ["wide:2000x200", "wide:2000x1024", "wide:4000x1024",
                 "shuffled:400x500", "shuffled:1000x5000", "shuffled:2000x4000"]


def make_case(kind, p, n, seed):
    """Data and a random causal order for one case."""
    rng = np.random.default_rng(seed)
    if kind == "explained":
        from bench_pipeline import EXPLAINED_FRACTION, rank_deficient

        return rank_deficient(p, n, int(round(EXPLAINED_FRACTION * p)), seed), rng.permutation(p)
    X = rng.laplace(size=(n, p))
    if kind == "shuffled":
        for j in range(4, p, 3):
            X[:, j] = X[:, rng.choice(j, 4, replace=False)] @ rng.standard_normal(4)
        X = X[:, rng.permutation(p)]
    elif kind != "wide":
        raise ValueError(f"case kind must be 'wide', 'shuffled' or 'explained'; got {kind!r}")
    return X, rng.permutation(p)


def worst_row_error(X, order, B, rows):
    """Worst relative ``|B - lstsq|`` over ``rows``, also in units of ``1e-8 + eps kappa^2``."""
    Xc = X - X.mean(axis=0)
    worst = worst_units = 0.0
    for k in rows:
        target, earlier = order[k], order[:k]
        want, _, rank, sv = np.linalg.lstsq(Xc[:, earlier], Xc[:, target], rcond=None)
        bound = 1e-8 + np.finfo(float).eps * (sv[0] / sv[rank - 1]) ** 2
        diff = np.abs(B[target, earlier] - want).max() / max(1.0, np.abs(want).max())
        worst, worst_units = max(worst, diff), max(worst_units, diff / bound)
    return worst, worst_units


def main():
    ap = _common.parser("bench_min_norm", __doc__)
    ap.add_argument("--cases", nargs="+", default=DEFAULT_CASES,
                    help="KIND:PxN, KIND one of wide, shuffled")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--check-rows", type=int, default=20)
    ap.add_argument("--loop", action="store_true",
                    help="also time the row-by-row route for dependent variables")
    ap.add_argument("--widths", action="store_true",
                    help="also time blocks of 256 variables always, alternated with the default")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="BLAS threads (fit runs this step on one after a CPU search)")
    args = ap.parse_args()
    from threadpoolctl import threadpool_limits

    with threadpool_limits(args.blas_threads, user_api="blas"):
        run(args)


def run(args):

    results = []
    print(f"{'case':<22} {'rank':>6} {'least squares':>14} {'worst rel diff':>15} "
          f"{'worst / bound':>14}" + (f" {'row by row':>12} {'max |diff|':>10}"
                                      if args.loop else ""))
    for case in args.cases:
        kind, size = case.split(":")
        p, n = (int(v) for v in size.lower().split("x"))
        X, order = make_case(kind, p, n, seed=1000 * p + n)
        scatter = _scatter(X)[1]
        med, times, B = median_time(lambda: ols_adjacency(X, order, scatter=scatter),
                                    args.repeats)
        rows = np.unique(np.linspace(1, p - 1, args.check_rows).astype(int))
        worst, worst_units = worst_row_error(X, order, B, rows)
        rank = int(np.linalg.matrix_rank(X - X.mean(axis=0)))
        row = {"case": case, "p": p, "n": n, "rank": rank, "median_s": med,
               "times_s": times, "rows_checked": len(rows),
               "worst_relative_difference": worst, "worst_over_bound": worst_units}
        line = f"{case:<22} {rank:>6} {med:>12.3f} s {worst:>15.2e} {worst_units:>14.2e}"
        if args.loop:
            blocks = _min_norm._dependent_block
            _min_norm._dependent_block = lambda *a, **k: None  # the loop for every block
            try:
                loop_med, loop_times, B_loop = median_time(
                    lambda: ols_adjacency(X, order, scatter=scatter), args.repeats)
            finally:
                _min_norm._dependent_block = blocks
            row.update(row_by_row_median_s=loop_med, row_by_row_times_s=loop_times,
                       max_abs_difference_to_row_by_row=float(np.abs(B - B_loop).max()))
            line += f" {loop_med:>10.3f} s {row['max_abs_difference_to_row_by_row']:>10.1e}"
        if args.widths:
            row.update(widths_ab(X, order, scatter, args.repeats, B))
            line += (f"  width 256: {row['width_256_median_s'] * 1e3:.1f} ms, default "
                     f"{row['width_default_median_s'] * 1e3:.1f} ms, rows moved "
                     f"{row['width_max_relative_difference']:.1e}")
        print(line, flush=True)
        results.append(row)
        _common.write_result(args, {"machine": platform.node(), "cores": os.cpu_count(),
                                    "results": results})


def widths_ab(X, order, scatter, repeats, B):
    """Blocks of 256 variables always against the default widths, alternated ``repeats`` times."""
    import time

    times = {"256": [], "default": []}
    low = _min_norm.MIN_NORM_MIN_BLOCK
    B_wide = None
    try:
        for _ in range(max(repeats, 1)):
            for name, width in (("256", _min_norm.MIN_NORM_BLOCK), ("default", low)):
                _min_norm.MIN_NORM_MIN_BLOCK = width
                t0 = time.perf_counter()
                out = ols_adjacency(X, order, scatter=scatter)
                times[name].append(time.perf_counter() - t0)
                if name == "256":
                    B_wide = out
    finally:
        _min_norm.MIN_NORM_MIN_BLOCK = low
    return {"width_256_median_s": float(np.median(times["256"])),
            "width_default_median_s": float(np.median(times["default"])),
            "width_256_times_s": times["256"], "width_default_times_s": times["default"],
            "width_max_relative_difference": float(np.abs(B - B_wide).max()
                                                   / max(np.abs(B_wide).max(), 1e-300))}


if __name__ == "__main__":
    main()
