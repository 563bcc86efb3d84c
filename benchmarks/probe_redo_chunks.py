"""Re-decisions in double split in chunks, against one block a pair (an A/B in one process).

    python benchmarks/probe_redo_chunks.py                        # the whole-job benchmark's tall case
    python benchmarks/probe_redo_chunks.py --sizes 200x100000 --rounds 5 --blocks 0 8192 16384

On data of many samples nearly every iteration re-decides its root in
double (docs/design/gpu_search.rst), each pair of a few candidates by one
block of ``pairs64``: a few hundred long blocks, too few to fill the GPU.
``_cuda.REDO_BLOCKS`` splits the pairs of long rows into chunks until the
grid holds about that many blocks (``_scheduler.redo_chunks``; 0: one block
a pair). For each size (sparse LiNGAM data, ``bench_pipeline.synthetic``,
the tall case's seed) this times ``paralingam.fit``'s search phase with each
``--blocks`` value, alternated within each of ``--rounds`` rounds after one
warm-up fit of each, checks that every value gives the same order, and
then profiles one search of each value (CUDA events: the device time of
the re-decisions, ``gpu_redo``). Prints a table and writes JSON.
"""

import statistics
import warnings

import _common  # (benchmarks/ is on sys.path when run as a script)
import bench_pipeline
import paralingam
from paralingam.search import _cuda


def fit_with(X, blocks):
    _cuda.REDO_BLOCKS = blocks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        return paralingam.fit(X, backend="cuda")


def run_size(p, n, blocks, rounds, seed):
    X = bench_pipeline.synthetic(p, n, seed)
    default = _cuda.REDO_BLOCKS
    try:
        orders, searches = {}, {b: [] for b in blocks}
        for b in blocks:  # warm-up: compile, workspace
            orders[b] = fit_with(X, b).causal_order
        for _ in range(rounds):
            for b in blocks:
                res = fit_with(X, b)
                searches[b].append(res.stats["time"]["search"])
                if res.causal_order != orders[b]:
                    raise RuntimeError(f"REDO_BLOCKS={b}: the order changed between fits")
        redo = {}
        for b in blocks:
            _cuda.REDO_BLOCKS = b
            redo[b] = bench_pipeline.profiled_phases(X)["re_decisions"]
        stats = res.stats
    finally:
        _cuda.REDO_BLOCKS = default
    same = all(orders[b] == orders[blocks[0]] for b in blocks)
    return {"p": p, "n": n, "seed": seed, "same_order": same,
            "iterations_redecided": int(sum(stats["float64_redo"])),
            "double_pairs": int(sum(stats["float64_pairs"])),
            "rows": [{"redo_blocks": b, "search_s": statistics.median(searches[b]),
                      "searches_s": searches[b], "gpu_redo_s": redo[b]} for b in blocks]}


def main():
    ap = _common.parser("probe_redo_chunks", __doc__, sizes=["600x500000"], gpu=True)
    ap.add_argument("--blocks", nargs="*", type=int, default=[0, _cuda.REDO_BLOCKS],
                    help="REDO_BLOCKS values, alternated (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="fits of each value, alternated; the median is reported")
    ap.add_argument("--seed", type=int, default=list(bench_pipeline.CASES).index("tall") + 1,
                    help="the data's seed (default: the tall case's)")
    args = ap.parse_args()
    out = []
    for size in args.sizes:
        p, n = _common.parse_size(size)
        row = run_size(p, n, args.blocks, args.rounds, args.seed)
        out.append(row)
        base = row["rows"][0]
        print(f"p={p} n={n}: {row['iterations_redecided']} iterations re-decided, "
              f"{row['double_pairs']} pairs in double, same order: {row['same_order']}")
        print("| REDO_BLOCKS | search (median) | re-decisions (device) | search vs first |")
        print("|---|---|---|---|")
        for r in row["rows"]:
            print(f"| {r['redo_blocks']} | {r['search_s']:.3f} s | {r['gpu_redo_s']:.3f} s | "
                  f"{r['search_s'] / base['search_s']:.2f}x |", flush=True)
    _common.write_result(args, {"rounds": args.rounds, "sizes": out})


if __name__ == "__main__":
    main()
