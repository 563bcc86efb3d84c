"""GPU phase times of the causal-order search on the E. coli core fluxes.

The data (87 fluxes, rank 24, n=10000 samples) hold many exact linear
dependences, so the search spends its time on the degenerate-data policy's
measurements (``verify_band`` pairs of ``update_cov`` and the measured rows of
``update_data``, kernels/paralingam.cu) more than any synthetic case. This
script times the CUDA search with CUDA events around each phase (prepare,
rounds, redo, update; ``paralingam.search._cuda.search(profile=True)``) and without
them, and prints the medians with the order and comparison counts, so that
two commits can be compared on one machine (same call):

    python tools/profile_ecoli.py --repeats 7 --json $OUT/profile_ecoli.json

``--data`` names the ``.npz`` file (array ``X``, samples x variables); by
default the shared n=10000 sample, else the n=1000 subset in tests/data.
"""

import hashlib
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import _common  # noqa: E402

from paralingam import _api  # noqa: E402
from paralingam.search import _cuda  # noqa: E402


def load(path):
    candidates = [Path(path)] if path else [
        ROOT / ".gpu" / "data" / "ecoli_core_fluxes_n10000.npz",
        ROOT.parent / "shared" / "data" / "ecoli_core_fluxes_n10000.npz",
        Path("/work/shared/data/ecoli_core_fluxes_n10000.npz"),
        ROOT / "tests" / "data" / "ecoli_core_subset.npz",
    ]
    for c in candidates:
        if c.exists():
            with np.load(c, allow_pickle=False) as f:
                return np.ascontiguousarray(f["X"][:10000], dtype=np.float64), str(c)
    raise SystemExit(f"no E. coli data found (tried {', '.join(map(str, candidates))})")


def main():
    ap = _common.parser("profile_ecoli", __doc__, repeats=7, gpu=True)
    ap.add_argument("--data", help=".npz file with X (samples x variables)")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    args = ap.parse_args()

    X, source = load(args.data)
    n, p = X.shape
    kwargs = dict(threshold=True, gamma0=_api.default_gamma0(n), c=_api.DEFAULT_C,
                  dtype=args.dtype, collinear_tol=1e-10, explained_tol=1e-10,
                  drift_tol=_api.DRIFT_TOL)
    _cuda.search(X, times={}, **kwargs)  # compile and warm up
    profiled, plain, orders = [], [], set()
    last = None
    for _ in range(args.repeats):  # alternate the profiled and plain searches
        times = {}
        order, explained, per_it, n_rederived = _cuda.search(X, times=times, profile=True, **kwargs)
        profiled.append(times)
        orders.add(tuple(order))
        last = (order, explained, per_it, n_rederived)
        times = {}
        t0 = time.perf_counter()
        order, *_ = _cuda.search(X, times=times, **kwargs)
        times["wall"] = time.perf_counter() - t0
        plain.append(times)
        orders.add(tuple(order))
    order, explained, per_it, n_rederived = last
    phases = sorted(k for k in profiled[0] if k.startswith("gpu_"))
    gpu = {k[4:]: statistics.median(t[k] for t in profiled) for k in phases}
    result = {
        "data": source, "p": p, "n": n, "dtype": args.dtype, "repeats": args.repeats,
        "search_s": statistics.median(t["search"] for t in plain),
        "wall_s": statistics.median(t["wall"] for t in plain),
        "search_profiled_s": statistics.median(t["search"] for t in profiled),
        "gpu_s": gpu,
        "iterations": len(per_it["rounds"]),
        "compared": int(sum(per_it["compared"])),
        "rounds": int(sum(per_it["rounds"])),
        "float64_redo": int(sum(per_it["float64_redo"])),
        "n_rederived": int(n_rederived),
        "explained": len(explained),
        "order_sha1": hashlib.sha1(np.asarray(order, dtype=np.int64).tobytes()).hexdigest()[:12],
        "deterministic": len(orders) == 1,
        "order": [int(v) for v in order],
        "compared_per_iteration": [int(v) for v in per_it["compared"]],
    }
    print(f"E. coli {p} x {n} ({source}), dtype {args.dtype}, {_common._gpu_name()}, "
          f"medians of {args.repeats}")
    print(f"search {1e3 * result['search_s']:.2f} ms (wall {1e3 * result['wall_s']:.2f} ms; "
          f"profiled {1e3 * result['search_profiled_s']:.2f} ms)")
    print("| phase | GPU time (ms) |")
    print("|---|---|")
    for name, secs in gpu.items():
        print(f"| {name} | {1e3 * secs:.3f} |")
    print(f"iterations {result['iterations']}, comparisons {result['compared']}, rounds "
          f"{result['rounds']}, fp64 redo {result['float64_redo']}, re-derived "
          f"{result['n_rederived']}, explained {result['explained']}, order {result['order_sha1']}"
          f" ({'deterministic' if result['deterministic'] else 'ORDERS DIFFER between runs'})")
    _common.write_result(args, result)


if __name__ == "__main__":
    main()
