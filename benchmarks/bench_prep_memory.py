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

``--mode adjacency-time`` times the host least squares of ``fit``'s CPU
route on float64 data, interleaved in one process (medians of
``--repeats``, BLAS in the calling thread as in ``fit``): the route before
the change (the scaled copy of the data, the scatter matrix of its centred
copy: ``_common._scatter``) against the blocks of rows read from the
``ScaledData`` (``_common._scatter_by_blocks``), with the traced peak of each
over the input and the largest difference of their weights:

    python benchmarks/bench_prep_memory.py --mode adjacency-time --sizes 24x100000 1000x8192
"""

import statistics
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from paralingam import _api, _blas, _testing  # noqa: E402
from paralingam.datasets import make_lingam_data  # noqa: E402
import _common  # noqa: E402


def fit_peaks(X, backend):
    """(peak before the adjacency step, peak during it) of one fit, in bytes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _testing.fit_memory_peaks(X, backend=backend, on_collinear="ignore")


def adjacency_routes(X):
    """The host least squares of ``fit``'s CPU route on ``X``, before and after: name -> call."""
    from paralingam._validation import _as_data_matrix
    from paralingam.adjacency._common import _scatter
    from paralingam.adjacency._least_squares import _ols_adjacency

    product, _, _ = _as_data_matrix(X, scaled="deferred")
    order = np.random.default_rng(0).permutation(X.shape[1])

    def copy_and_centred_copy():  # the scaled copy, then _scatter's centred copy
        data = product.copy(_api._by_rows)
        return _ols_adjacency(data, order, scatter=_scatter(data)[1])

    def blocks():
        return _ols_adjacency(product, order)

    return {"copy_and_centred_copy": copy_and_centred_copy, "blocks": blocks}


def traced_peak(call):
    """The peak of numpy's allocations during ``call()`` (bytes), and its result."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        out = call()
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


def adjacency_time(args):
    sizes = args.sizes or ["24x100000", "1000x8192"]
    from paralingam import _lapack

    _lapack.flapack()  # loaded before the BLAS limit, as fit's adjacency step does
    rows = []
    print(f"{'p':>5} {'n':>8} {'before s':>9} {'after s':>9} {'after/before':>13} "
          f"{'peak before':>12} {'peak after':>11} {'max |dB|':>9}")
    for p, n in map(_common.parse_size, sizes):
        X = np.ascontiguousarray(make_lingam_data(p, n, density="sparse", random_state=3)[0])
        routes = adjacency_routes(X)
        names = list(routes)
        with _blas.in_this_thread():
            results = {k: routes[k]() for k in names}  # warm-up, and the weights compared
            times = {k: [] for k in names}
            for r in range(args.repeats):  # interleaved, alternating which goes first
                for k in (names if r % 2 == 0 else names[::-1]):
                    t0 = time.perf_counter()
                    routes[k]()
                    times[k].append(time.perf_counter() - t0)
            peaks = {k: traced_peak(routes[k])[0] / X.nbytes for k in names}
        med = {k: statistics.median(v) for k, v in times.items()}
        before, after = names
        scale = np.abs(results[before]).max()
        diff = float(np.abs(results[after] - results[before]).max() / scale)
        row = {"p": p, "n": n, "input_bytes": X.nbytes, "repeats": args.repeats,
               **{f"{k}_s": med[k] for k in names}, **{f"{k}_times_s": times[k] for k in names},
               "after_over_before": med[after] / med[before],
               **{f"{k}_peak_over_input": peaks[k] for k in names},
               "max_weight_difference_relative": diff}
        rows.append(row)
        print(f"{p:>5} {n:>8} {med[before]:9.4f} {med[after]:9.4f} {row['after_over_before']:13.2f} "
              f"{peaks[before]:12.2f} {peaks[after]:11.2f} {diff:9.1e}", flush=True)
    _common.write_result(args, {"before": "copy_and_centred_copy", "after": "blocks",
                                "blas_threads": 1, "rows": rows})


def main():
    ap = _common.parser("bench_prep_memory", __doc__.splitlines()[0],
                        sizes=[], repeats=9, modes=("fit", "adjacency-time"))
    ap.add_argument("--backends", nargs="*", default=["cpu"], choices=["cpu", "cuda"])
    args = ap.parse_args()
    if args.mode == "adjacency-time":
        return adjacency_time(args)
    args.sizes = args.sizes or ["100x200000"]
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
