"""Where the adjacency step of a benchmark case spends its time on the CUDA route (cProfile).

    python tools/profile_adjacency.py rank_deficient_1000 [--estimator]

Two warm-up fits, the adjacency phase of five fits, then ``cProfile`` over
five more fits: the functions by cumulative and by own time. With
``--estimator``, the fits are ``DirectLiNGAM(backend="cuda").fit`` (the
adaptive lasso) and their wall times are printed instead. The figures
quoted on the design page (docs/design/adjacency.rst, "Minimum-norm rows on
the GPU") are transcribed, per fit, in
``benchmarks/results/profile_adjacency_h100.json``.
"""

import argparse
import cProfile
import io
import pstats
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import paralingam  # noqa: E402
from bench_pipeline import CASES, make_data  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", nargs="?", default="rank_deficient_1000", choices=sorted(CASES))
    ap.add_argument("--estimator", action="store_true",
                    help="profile DirectLiNGAM(backend='cuda').fit instead of paralingam.fit")
    args = ap.parse_args()
    (p, n), _, _, _ = CASES[args.case]
    X = make_data(args.case, p, n, None)
    warnings.simplefilter("ignore")
    if args.estimator:
        def run():
            paralingam.DirectLiNGAM(backend="cuda").fit(X)

        def seconds():
            t0 = time.perf_counter()
            run()
            return time.perf_counter() - t0
        label = "DirectLiNGAM().fit"
    else:
        def run():
            paralingam.fit(X, backend="cuda")

        def seconds():
            return paralingam.fit(X, backend="cuda").stats["time"]["adjacency"]
        label = "adjacency"
    for _ in range(2):
        run()
    print(args.case, label, "(ms)", [round(seconds() * 1e3, 1) for _ in range(5)])
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(5):
        run()
    profile.disable()
    for key, count in (("cumulative", 60), ("tottime", 30)):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(key).print_stats(count)
        print(out.getvalue())


if __name__ == "__main__":
    main()
