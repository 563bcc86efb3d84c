"""MultiGroupDirectLiNGAM: paralingam against lingam 1.13 in the same run (table + JSON).

    python benchmarks/bench_multi_group.py                          # the default sizes
    python benchmarks/bench_multi_group.py --sizes 8x500x2 --repeats 1   # a quick check

Each size ``PxNxG`` is P variables, G groups of about N samples (unequal:
N, N/2, 3N/2, ...). Rows: the whole ``fit`` of each package, and the order
search alone of paralingam on its compiled engine (``engine="cpu"``) and on
the numpy reference (``engine="numpy"``). Run it on a quiet machine: the fits
are timed back to back on the same data.
"""

import argparse
import json
import platform

import numpy as np

from _common import best_time  # (benchmarks/ is on sys.path when run as a script)


def groups(p, n, G, seed):
    rng = np.random.default_rng(seed)
    B = np.tril(rng.uniform(0.5, 1.5, (p, p)) * np.sign(rng.uniform(-1, 1, (p, p)))
                * (rng.random((p, p)) < 0.3), -1)
    perm = rng.permutation(p)
    A = np.linalg.inv(np.eye(p) - B).T
    sizes = [max(20, int(n * f)) for f in (1.0, 0.5, 1.5, 0.75, 1.25)[:G]] + [n] * max(0, G - 5)
    return [(rng.uniform(size=(m, p)) @ A)[:, perm] for m in sizes]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["10x500x2", "20x1000x3"],
                    help="PxNxG: variables, samples of the first group, groups")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="paralingam's n_threads")
    ap.add_argument("--json", default="bench_multi_group.json")
    args = ap.parse_args()

    import lingam

    import paralingam
    from paralingam.lingam.multi_group import multi_group_causal_order

    paralingam.MultiGroupDirectLiNGAM().fit(groups(4, 100, 2, 0))  # imports, thread start
    rows = []
    for size in args.sizes:
        p, n, G = (int(v) for v in size.split("x"))
        Xs = groups(p, n, G, 1)
        t_ours, ours = best_time(lambda: paralingam.MultiGroupDirectLiNGAM(
            n_threads=args.threads).fit(Xs), args.repeats)
        t_theirs, theirs = best_time(lambda: lingam.MultiGroupDirectLiNGAM().fit(Xs), 1)
        t_cpu, order_cpu = best_time(lambda: multi_group_causal_order(
            Xs, engine="cpu", n_threads=args.threads), args.repeats)
        t_np, order_np = best_time(lambda: multi_group_causal_order(Xs, engine="numpy"), args.repeats)
        theirs_order = [int(i) for i in theirs.causal_order_]
        diff = max(float(np.abs(a - b).max())
                   for a, b in zip(ours.adjacency_matrices_, theirs.adjacency_matrices_))
        rows.append({"p": p, "n": n, "groups": G, "samples": sum(len(X) for X in Xs),
                     "fit_paralingam_s": t_ours, "fit_lingam_s": t_theirs,
                     "fit_ratio": t_theirs / t_ours,
                     "search_cpu_s": t_cpu, "search_numpy_s": t_np,
                     "search_ratio_numpy_over_cpu": t_np / t_cpu,
                     "same_order": ours.causal_order_ == theirs_order == order_cpu == order_np,
                     "max_abs_diff": diff})

    print(f"MultiGroupDirectLiNGAM, threads={args.threads or 'default'}")
    print(f"{'p':>4}{'n':>6}{'G':>3}{'fit ours s':>12}{'lingam s':>10}{'ratio':>8}"
          f"{'search cpu s':>14}{'numpy s':>10}{'ratio':>8}  same  max|dB|")
    for r in rows:
        print(f"{r['p']:>4}{r['n']:>6}{r['groups']:>3}{r['fit_paralingam_s']:>12.3f}"
              f"{r['fit_lingam_s']:>10.3f}{r['fit_ratio']:>8.1f}{r['search_cpu_s']:>14.4f}"
              f"{r['search_numpy_s']:>10.4f}{r['search_ratio_numpy_over_cpu']:>8.1f}"
              f"  {str(r['same_order']):<5} {r['max_abs_diff']:.1e}")
    with open(args.json, "w") as fh:
        json.dump({"args": vars(args), "machine": platform.platform(),
                   "python": platform.python_version(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
