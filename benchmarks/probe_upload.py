"""The CUDA upload alone: page-locked blocks and the device transpose against the old host route.

    python benchmarks/probe_upload.py                          # the issue's sizes (GPU machine)
    python benchmarks/probe_upload.py --sizes 600x500000 --repeats 5
    python benchmarks/probe_upload.py --sizes 600x500000 --no-old --copy-threads 1 4 1 4
    python benchmarks/probe_upload.py --sizes 11x7466 87x10000 --dtypes float64 --no-old --fits \
        --repeats 15 --noise-thread-min 33554432 1048576 33554432 1048576

For each size (p x n) and input dtype: ``_cuda.upload`` (blocks of rows
through two page-locked buffers, transposed on the device), the rows'
noise and standard deviations (``policy.noise_and_std``, on the host), and
the upload beside the noise (as a fit's upload phase runs them: the noise
on a thread of its own), and the route the upload replaced (a padded,
transposed float64 copy on the host and one pageable copy), each the median
of ``--repeats`` after a warm-up, with the bytes per second of the input.
``--copy-threads`` repeats each size with these numbers of host threads
copying the blocks into page-locked memory (``_cuda.UPLOAD_COPY_THREADS``),
in the order given: an A/B of that setting in one process;
``--noise-thread-min`` the same for ``_cuda.UPLOAD_NOISE_THREAD_MIN_BYTES``
(the smallest data whose noise a fit sums on a thread beside the upload;
it changes only the ``--fits`` columns). ``--layouts``
sends the data in C order, Fortran order (a pandas frame's values), or
both; the upload and the noise then read them as a fit does (scaled by
powers of two, ``ScaledData``). ``--fits`` adds the upload and search
phases of whole ``paralingam.fit`` calls on the same layout (a sparse
random DAG, ``_common.grid_data``). Prints a table and writes JSON (commit,
machine, device).

    python benchmarks/probe_upload.py --sizes 30x1024 100x1024 87x10000 1000x8192 \
        --layouts C F --no-old --fits --repeats 15
"""

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

import _common  # (benchmarks/ is on sys.path when run as a script)
from paralingam.search import _cuda, policy


def timed(call, repeats):
    call()  # warm-up: page-locked buffers, kernels, first touches
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def old_route(ws, data):
    """What the upload did before: host transpose into a padded array, one pageable copy."""
    import pycuda.driver as drv

    n, p = data.shape
    X = np.zeros((p, ws.ld))
    X[:, :n] = data.T
    drv.memcpy_htod(ws.dev["X64"], X)


def upload_with_noise(ws, data):
    """A fit's upload phase: the noise's sums on a thread of their own while the blocks go."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        sums = pool.submit(policy.noise_and_std, data)
        _cuda.upload(ws, data)
        sums.result()


def probe(p, n, dtype, repeats, old, copy_threads, layout="C", fits=False,
          noise_thread_min=None):
    import pycuda.driver as drv

    from paralingam._validation import _as_data_matrix

    _cuda._context()
    _cuda.UPLOAD_COPY_THREADS = copy_threads
    if noise_thread_min is not None:
        _cuda.UPLOAD_NOISE_THREAD_MIN_BYTES = noise_thread_min
    rng = np.random.default_rng(0)
    data = np.asarray(rng.standard_normal((n, p)), dtype=dtype, order=layout)
    product = _as_data_matrix(data, scaled="deferred")[0]  # as fit reads it
    ld = (n + 31) // 32 * 32
    ws = _cuda._Workspace(p, ld, True)
    try:
        row = {"p": p, "n": n, "dtype": np.dtype(dtype).name, "layout": layout,
               "bytes": data.nbytes, "copy_threads": copy_threads,
               "noise_thread_min_bytes": _cuda.UPLOAD_NOISE_THREAD_MIN_BYTES}
        row["upload"] = timed(lambda: _cuda.upload(ws, product), repeats)
        row["noise_and_std"] = timed(lambda: policy.noise_and_std(product), repeats)
        row["upload_with_noise"] = timed(lambda: upload_with_noise(ws, product), repeats)
        if old:
            data64 = np.ascontiguousarray(data, dtype=np.float64)
            row["old_route"] = timed(lambda: old_route(ws, data64), repeats)
        drv.Context.synchronize()
    finally:
        for buf in ws.keep:
            buf.free()
    if fits:
        row.update(fit_phases(p, n, dtype, layout, repeats))
    return row


def fit_phases(p, n, dtype, layout, repeats):
    """Median upload and search phases of ``paralingam.fit`` (CUDA) on a sparse DAG's data."""
    import warnings

    import paralingam

    X = np.asarray(_common.grid_data(p, n, "sparse"), dtype=dtype, order=layout)
    phases = {"fit_upload": [], "fit_search": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        paralingam.fit(X, backend="cuda")  # warm-up
        for _ in range(repeats):
            times = paralingam.fit(X, backend="cuda").stats["time"]
            phases["fit_upload"].append(times["upload"])
            phases["fit_search"].append(times["search"])
    return {k: statistics.median(v) for k, v in phases.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", default=["600x500000", "24x400000", "1000x8192",
                                                   "87x10000"])
    ap.add_argument("--dtypes", nargs="*", default=["float64", "float32"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-old", action="store_true", help="skip the old host route")
    ap.add_argument("--copy-threads", nargs="*", type=int, default=[_cuda.UPLOAD_COPY_THREADS],
                    help="host threads copying the blocks (each value a row of its own)")
    ap.add_argument("--noise-thread-min", nargs="*", type=int,
                    default=[_cuda.UPLOAD_NOISE_THREAD_MIN_BYTES],
                    help="_cuda.UPLOAD_NOISE_THREAD_MIN_BYTES (each value a row of its own)")
    ap.add_argument("--layouts", nargs="*", default=["C"], choices=["C", "F"],
                    help="the data's order: C, or F (a pandas frame's values)")
    ap.add_argument("--fits", action="store_true",
                    help="also the upload and search phases of whole fits")
    ap.add_argument("--json", default="probe_upload.json")
    args = ap.parse_args()
    device = _cuda.device_properties()["name"]
    meta = {"commit": _common.commit(), "machine": platform.node(), "cores": os.cpu_count(),
            "device": device, "repeats": args.repeats,
            "upload_block_bytes": _cuda.UPLOAD_BLOCK_BYTES}
    print(f"commit {meta['commit']}, {meta['machine']} ({meta['cores']} cores), {device}; "
          f"medians of {args.repeats} (seconds; GB/s of the input)")
    print(f"{'p':>6} {'n':>8} {'dtype':>8} {'order':>5} {'MB':>8} {'copiers':>7} {'upload':>14} "
          f"{'noise+std':>14} {'both at once':>14} {'old route':>14} {'fit: upload':>14} "
          f"{'fit: search':>14} {'noise thread from':>17}")
    rows = []
    for size in args.sizes:
        p, n = (int(v) for v in size.split("x"))
        for dtype in args.dtypes:
            for layout in args.layouts:
                for copy_threads, noise_min in [(c, m) for c in args.copy_threads
                                                for m in args.noise_thread_min]:
                    row = probe(p, n, dtype, args.repeats,
                                not args.no_old and dtype == "float64", copy_threads, layout,
                                args.fits, noise_min)
                    rows.append(row)
                    gb = row["bytes"] / 1e9

                    def cell(key):
                        return (f"{row[key]:7.4f} ({gb / row[key]:4.1f})" if key in row
                                else f"{'-':>14}")

                    print(f"{p:>6} {n:>8} {row['dtype']:>8} {layout:>5} "
                          f"{row['bytes'] / 1e6:8.1f} {copy_threads:>7} {cell('upload')} "
                          f"{cell('noise_and_std')} {cell('upload_with_noise')} "
                          f"{cell('old_route')} {cell('fit_upload')} {cell('fit_search')} "
                          f"{noise_min:>17}", flush=True)
    with open(args.json, "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
