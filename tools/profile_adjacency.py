"""Where the adjacency step of a benchmark case spends its time on the CUDA route (cProfile).

    python tools/profile_adjacency.py rank_deficient_1000

Two warm-up fits, the adjacency phase of five fits, then ``cProfile`` over
five more fits: the functions by cumulative and by own time. The figures
quoted on the design page (docs/design/adjacency.rst, "Minimum-norm rows on
the GPU") are transcribed, per fit, in
``benchmarks/results/profile_adjacency_h100.json``.
"""

import cProfile
import io
import pstats
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import paralingam  # noqa: E402
from bench_pipeline import CASES, make_data  # noqa: E402


def main():
    case = sys.argv[1] if len(sys.argv) > 1 else "rank_deficient_1000"
    (p, n), _, _, _ = CASES[case]
    X = make_data(case, p, n, None)
    warnings.simplefilter("ignore")
    for _ in range(2):
        paralingam.fit(X, backend="cuda")
    print(case, "adjacency (ms)",
          [round(paralingam.fit(X, backend="cuda").stats["time"]["adjacency"] * 1e3, 1)
           for _ in range(5)])
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(5):
        paralingam.fit(X, backend="cuda")
    profile.disable()
    for key, count in (("cumulative", 60), ("tottime", 30)):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(key).print_stats(count)
        print(out.getvalue())


if __name__ == "__main__":
    main()
