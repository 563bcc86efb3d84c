"""The adaptive lasso's LARS paths on the GPU: the kernel alone, the host's wait for it, the whole call.

    python benchmarks/probe_lars_wait.py --cases rank_deficient_300 rank_deficient_1000

For each case (``bench_pipeline.CASES``' data) one ``DirectLiNGAM().fit``
records the inputs it hands ``_cuda_adjacency.lars_rows``; on them this
times the whole call (median of ``--repeats``), the ``lars_paths`` kernel
alone between two CUDA events, and ``wait_interruptibly``'s wait after the
same launch (alternated, ``--repeats`` each): the wait against the kernel
is what the host's polling adds. Then the adjacency step's host passes
(``_common``'s ``_permuted_gram``, ``_placed``, ``_scaled_back`` with zero
exponents) alone on one thread at the case's p, against a plain copy of
the p x p matrix. The refits (``refit_rows``, queued after the paths) are
timed between events too, and their rows compared with numpy's least
squares on the predictors each path kept. Needs the CUDA backend. Writes
JSON.
"""

import statistics
import time
import warnings

import numpy as np

import _common  # (benchmarks/ is on sys.path when run as a script)
import bench_pipeline


def median_ms(func, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def lars_inputs(X):
    """The arguments ``DirectLiNGAM(backend="cuda").fit(X)`` passes to ``lars_rows``."""
    from paralingam.adjacency import _cuda_adjacency
    from paralingam.lingam.estimator import DirectLiNGAM

    seen = {}
    original = _cuda_adjacency.lars_rows

    def spy(*args, **kwargs):
        seen["args"] = args
        return original(*args, **kwargs)

    _cuda_adjacency.lars_rows = spy
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            DirectLiNGAM(backend="cuda").fit(X)
    finally:
        _cuda_adjacency.lars_rows = original
    return seen["args"]


def _launch(fns, bufs, args, blocks, m, ordered):
    """One launch of this tree's ``lars_paths`` and ``refit_rows`` on ``args``
    (``lars_rows``' arguments) from fresh counters; returns three events: before the
    paths, between the two kernels, after the refits."""
    import pycuda.driver as drv

    from paralingam.adjacency import _cuda_adjacency as ca

    gram, scatter, targets, coef, rss, n, gamma, tol = args
    drv.memcpy_htod(bufs["targets"], ordered)
    events = [drv.Event() for _ in range(3)]
    ca._queue_kernels(fns, bufs, gram.shape[0], len(ordered), n, gamma, tol, m, blocks, events)
    return events


def _uploaded(args):
    """``lars_rows(*args)`` once (the buffers of this shape, kept), its inputs left in them:
    ``(fns, bufs, blocks, m, ordered)``."""
    import pycuda.driver as drv

    from paralingam import _gpu
    from paralingam.adjacency import _cuda_adjacency as ca

    gram, scatter, targets, coef, rss = args[:5]
    ca.lars_rows(*args)
    (key, bufs), = ca._BUFFERS.items()
    _, blocks, m = key
    fns = ca._kernels(_gpu.context().handle)
    for name, array in (("gram", gram), ("scatter", scatter), ("coef", coef), ("rss", rss)):
        drv.memcpy_htod(bufs[name], np.ascontiguousarray(array, dtype=np.float64))
    ordered = np.ascontiguousarray(np.sort(targets)[::-1], dtype=np.int32)
    return fns, bufs, blocks, m, ordered


def kernel_and_wait(args, repeats):
    """Medians (ms) of the ``lars_paths`` kernel and of ``refit_rows`` after it (events),
    and of ``wait_interruptibly`` after the launch; the refits' rows against numpy."""
    import pycuda.driver as drv

    from paralingam.adjacency import _cuda_adjacency as ca

    scatter = args[1]
    fns, bufs, blocks, m, ordered = _uploaded(args)
    p = scatter.shape[0]
    paths, refits, wait = [], [], []
    for waited in (True, False) * repeats:
        events = _launch(fns, bufs, args, blocks, m, ordered)
        t0 = time.perf_counter()
        if waited:
            ca.wait_interruptibly(bufs["next"])
            wait.append(time.perf_counter() - t0)
        else:
            events[2].synchronize()
        paths.append(events[0].time_till(events[1]))
        refits.append(events[1].time_till(events[2]))
    status = np.empty(len(ordered), dtype=np.int32)
    kept = np.empty((p, p), dtype=np.uint8)
    rows = np.empty((p, p))
    for out, name in ((status, "status"), (kept, "kept"), (rows, "rows")):
        drv.memcpy_dtoh(out, bufs[name])
    differences = []  # per refit: largest |row - numpy's| over numpy's largest |coefficient|
    bitwise, sizes = 0, []
    for k in ordered[status == 0]:
        keep = np.flatnonzero(kept[k])
        if len(keep):
            want = np.linalg.solve(scatter[np.ix_(keep, keep)], scatter[keep, k])
            got = rows[k, keep]
            bitwise += bool(np.array_equal(got, want))
            sizes.append(len(keep))
            differences.append(float(np.max(np.abs(got - want))
                                     / max(np.max(np.abs(want)), 1e-300)))
    differences = np.array(differences)
    finite = differences[np.isfinite(differences)]
    return {"kernel_ms": statistics.median(paths), "refit_ms": statistics.median(refits),
            "wait_ms": 1e3 * statistics.median(wait), "blocks": int(blocks), "m": int(m),
            "paths_handed_back": int((status == 1).sum()),
            "refits_failed": int((status == 2).sum()),
            "largest_kept": int(kept.sum(axis=1).max()),
            "refits_compared": len(differences),
            "refits_not_finite_against_numpy": int((~np.isfinite(differences)).sum()),
            "largest_relative_difference_from_numpy": float(np.max(finite, initial=0.0)),
            "median_relative_difference_from_numpy": float(np.median(finite)) if len(finite)
            else None,
            "refits_bitwise_equal_to_numpy": bitwise,
            "median_kept_set_compared": float(np.median(sizes)) if sizes else None}


def host_passes(gram, n, repeats):
    """Median ms of the host passes on one thread at ``gram``'s p, and of a plain copy."""
    from paralingam.adjacency import _common as passes

    p = gram.shape[0]
    S = np.array(gram)
    order = np.random.default_rng(0).permutation(p)
    std = np.sqrt(np.diag(S) / n)
    zero = np.zeros(p, dtype=np.int32)
    return {"permuted_gram_ms": median_ms(lambda: passes._permuted_gram(S, order, std, 1), repeats),
            "placed_ms": median_ms(lambda: passes._placed(S, order, p, 1), repeats),
            "scaled_back_ms": median_ms(lambda: passes._scaled_back(S, zero, None, 1), repeats),
            "copy_ms": median_ms(S.copy, repeats)}


def main():
    ap = _common.parser("probe_lars_wait", __doc__, repeats=15, gpu=True)
    ap.add_argument("--cases", nargs="*", default=["rank_deficient_300", "rank_deficient_1000"],
                    choices=list(bench_pipeline.CASES))
    ap.add_argument("--data-dir", default=_common.DATA_DIR)
    args = ap.parse_args()
    from paralingam.adjacency import _cuda_adjacency

    cases = {}
    for name in args.cases:
        (p, n), _, _, _ = bench_pipeline.CASES[name]
        inputs = lars_inputs(bench_pipeline.make_data(name, p, n, args.data_dir))
        row = {"targets": len(inputs[2]),
               "lars_rows_ms": median_ms(lambda: _cuda_adjacency.lars_rows(*inputs),
                                         args.repeats)}
        row.update(kernel_and_wait(inputs, args.repeats))
        row.update(host_passes(inputs[0], inputs[5], args.repeats))
        cases[name] = row
        print(name, {k: float(f"{v:.3g}") if isinstance(v, float) else v for k, v in row.items()},
              flush=True)
    _common.write_result(args, {"repeats": args.repeats, "cases": cases})


if __name__ == "__main__":
    main()
