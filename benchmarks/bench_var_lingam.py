"""VARLiNGAM: paralingam against lingam 1.13 in the same run (table + JSON).

    python benchmarks/bench_var_lingam.py                        # p=30, T=5000, lags=2
    python benchmarks/bench_var_lingam.py --p 5 --T 500 --repeats 1 --bootstrap 3   # a quick check

Run it on a quiet machine: both fits are timed back to back on the same data.
"""

import argparse
import json
import platform

import numpy as np

from _common import best_time  # (benchmarks/ is on sys.path when run as a script)


def series(T, p, lags, seed):
    rng = np.random.default_rng(seed)
    B0 = np.tril(rng.uniform(-0.5, 0.5, (p, p)) * (rng.random((p, p)) < 0.3), -1)
    perm = rng.permutation(p)
    B0 = B0[np.ix_(perm, perm)]
    Bs = rng.uniform(-0.2, 0.2, (lags, p, p)) * (rng.random((lags, p, p)) < 0.2)
    inv = np.linalg.inv(np.eye(p) - B0)
    X = np.zeros((T + 100, p))
    for t in range(lags, T + 100):
        X[t] = inv @ (sum(Bs[k] @ X[t - k - 1] for k in range(lags)) + rng.uniform(-1, 1, p))
    return X[100:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, default=30)
    ap.add_argument("--T", type=int, default=5000)
    ap.add_argument("--lags", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bootstrap", type=int, default=0, help="resamples to time (0: none)")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--json", default="bench_var_lingam.json")
    args = ap.parse_args()

    import lingam

    import paralingam

    X = series(args.T, args.p, args.lags, 0)
    paralingam.VARLiNGAM(lags=args.lags, backend=args.backend).fit(X[:200])  # imports, warm-up
    rows = []
    t_ours, ours = best_time(lambda: paralingam.VARLiNGAM(lags=args.lags, backend=args.backend).fit(X),
                         args.repeats)
    t_theirs, theirs = best_time(lambda: lingam.VARLiNGAM(lags=args.lags).fit(X), 1)
    same = ours.causal_order_ == [int(i) for i in theirs.causal_order_]
    diff = float(np.abs(np.asarray(ours.adjacency_matrices_)
                        - np.asarray(theirs.adjacency_matrices_)).max())
    rows.append({"step": "fit", "paralingam_s": t_ours, "lingam_s": t_theirs,
                 "ratio": t_theirs / t_ours, "same_order": same, "max_abs_diff": diff})
    if args.bootstrap:
        np.random.seed(1)
        t_ob, _ = best_time(lambda: paralingam.VARLiNGAM(lags=args.lags, backend=args.backend)
                        .bootstrap(X, args.bootstrap), 1)
        np.random.seed(1)
        t_tb, _ = best_time(lambda: lingam.VARLiNGAM(lags=args.lags).bootstrap(X, args.bootstrap), 1)
        rows.append({"step": f"bootstrap({args.bootstrap})", "paralingam_s": t_ob,
                     "lingam_s": t_tb, "ratio": t_tb / t_ob})

    print(f"VARLiNGAM p={args.p} T={args.T} lags={args.lags} backend={args.backend}")
    print(f"{'step':<16}{'paralingam s':>14}{'lingam s':>12}{'ratio':>9}")
    for r in rows:
        print(f"{r['step']:<16}{r['paralingam_s']:>14.3f}{r['lingam_s']:>12.3f}{r['ratio']:>9.1f}")
    print(f"same order: {same}, max |B diff|: {diff:.2e}")
    with open(args.json, "w") as fh:
        json.dump({"args": vars(args), "machine": platform.platform(),
                   "lingam": lingam.__version__, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
