"""Peak host memory of ``paralingam.fit`` against the input array, phase by phase (issue 21).

    python benchmarks/bench_prep_memory.py                      # p=100, n=200,000
    python benchmarks/bench_prep_memory.py --sizes 24x100000 --backends cpu cuda

For each size, input dtype (float64, float32) and backend: the peak of
numpy's host allocations (``tracemalloc``, as ``bench_pipeline.py`` measures
the preparation) over the input array's bytes, (a) from the start of the fit
to the start of the adjacency step (validation, the exact rescaling, the
search's input: the CPU backend's standardised rows and rounding noise, the
CUDA backend's upload) and (b) during the adjacency step (least squares), what the fit holds
included.
Native allocations (the search's C state, pycuda's page-locked blocks) are
not numpy's and are not counted. Prints a table and writes JSON.
"""

import sys
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import paralingam  # noqa: E402
from paralingam import _api  # noqa: E402
from paralingam.datasets import make_lingam_data  # noqa: E402
import _common  # noqa: E402


def fit_peaks(X, backend):
    """(peak before the adjacency step, peak during it) of one fit, in bytes."""
    peaks = {}
    adjacency = _api.adjacency

    def traced(*args, **kwargs):
        peaks["before_adjacency"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        out = adjacency(*args, **kwargs)
        peaks["adjacency"] = tracemalloc.get_traced_memory()[1]
        return out

    _api.adjacency = traced
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tracemalloc.start()
            tracemalloc.reset_peak()
            paralingam.fit(X, backend=backend, on_collinear="ignore")
            tracemalloc.stop()
    finally:
        _api.adjacency = adjacency
    return peaks


def main():
    ap = _common.parser("bench_prep_memory", __doc__.splitlines()[0],
                        sizes=["100x200000"])
    ap.add_argument("--backends", nargs="*", default=["cpu"], choices=["cpu", "cuda"])
    args = ap.parse_args()
    rows = []
    print(f"{'p':>5} {'n':>8} {'dtype':>8} {'backend':>7} {'input MB':>9} "
          f"{'to search':>10} {'adjacency':>10}  (peak / input)")
    for p, n in map(_common.parse_size, args.sizes):
        X64 = np.ascontiguousarray(make_lingam_data(p, n, density="sparse", random_state=3)[0])
        for dtype in ("float64", "float32"):
            X = X64 if dtype == "float64" else X64.astype(np.float32)
            for backend in args.backends:
                peaks = fit_peaks(X, backend)
                row = {"p": p, "n": n, "dtype": dtype, "backend": backend,
                       "input_bytes": X.nbytes,
                       **{f"{k}_over_input": v / X.nbytes for k, v in peaks.items()}}
                rows.append(row)
                print(f"{p:>5} {n:>8} {dtype:>8} {backend:>7} {X.nbytes / 1e6:9.1f} "
                      f"{row['before_adjacency_over_input']:10.2f} "
                      f"{row['adjacency_over_input']:10.2f}", flush=True)
            del X
    _common.write_result(args, {"rows": rows})


if __name__ == "__main__":
    main()
