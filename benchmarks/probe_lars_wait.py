"""The adaptive lasso's LARS paths on the GPU: the kernel alone, the host's wait for it, the whole call.

    python benchmarks/probe_lars_wait.py --cases rank_deficient_300 rank_deficient_1000

For each case (``bench_pipeline.CASES``' data) one ``DirectLiNGAM().fit``
records the inputs it hands ``_cuda_adjacency.lars_supports``; on them this
times the whole call (median of ``--repeats``), the ``lars_paths`` kernel
alone between two CUDA events, and ``wait_interruptibly``'s wait after the
same launch (alternated, ``--repeats`` each): the wait against the kernel
is what the host's polling adds. Then the adjacency step's host passes
(``_common``'s ``_permuted_gram``, ``_placed``, ``_scaled_back`` with zero
exponents) alone on one thread at the case's p, against a plain copy of
the p x p matrix. Needs the CUDA backend. Writes JSON.
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
    """The arguments ``DirectLiNGAM(backend="cuda").fit(X)`` passes to ``lars_supports``."""
    from paralingam.adjacency import _cuda_adjacency
    from paralingam.lingam.estimator import DirectLiNGAM

    seen = {}
    original = _cuda_adjacency.lars_supports

    def spy(*args, **kwargs):
        seen["args"] = args
        return original(*args, **kwargs)

    _cuda_adjacency.lars_supports = spy
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            DirectLiNGAM(backend="cuda").fit(X)
    finally:
        _cuda_adjacency.lars_supports = original
    return seen["args"]


def kernel_and_wait(args, repeats):
    """Median ms of the ``lars_paths`` kernel (events) and of ``wait_interruptibly`` after it."""
    import pycuda.driver as drv

    from paralingam import _gpu
    from paralingam.adjacency import _cuda_adjacency as ca

    gram, targets, coef, rss, n, gamma = args
    p = gram.shape[0]
    ca.lars_supports(*args)  # (the buffers of this shape, kept)
    (key, bufs), = ca._BUFFERS.items()
    _, blocks, m = key
    fn = ca._kernels(_gpu.context().handle)["lars_paths"]
    drv.memcpy_htod(bufs["gram"], np.ascontiguousarray(gram, dtype=np.float64))
    drv.memcpy_htod(bufs["coef"], np.ascontiguousarray(coef, dtype=np.float64))
    drv.memcpy_htod(bufs["rss"], np.ascontiguousarray(rss, dtype=np.float64))
    ordered = np.ascontiguousarray(np.sort(targets)[::-1], dtype=np.int32)
    kernel, wait = [], []
    for waited in (True, False) * repeats:
        drv.memcpy_htod(bufs["targets"], ordered)
        drv.memset_d32(bufs["next"], 0, 1)
        drv.memset_d8(bufs["kept"], 0, p * p)
        drv.memset_d32(bufs["status"], 1, len(ordered))
        start, end = drv.Event(), drv.Event()
        start.record()
        fn.prepared_call((int(blocks), 1, 1), (ca.THREADS, 1, 1), bufs["gram"], np.int32(p),
                         bufs["targets"], np.int32(len(ordered)), bufs["coef"], bufs["rss"],
                         np.float64(n), np.float64(gamma), np.int32(m), bufs["work"],
                         bufs["iwork"], bufs["next"], bufs["kept"], bufs["status"])
        end.record()
        t0 = time.perf_counter()
        if waited:
            ca.wait_interruptibly(bufs["next"])
            wait.append(time.perf_counter() - t0)
        else:
            end.synchronize()
        kernel.append(start.time_till(end) / 1e3)
    return 1e3 * statistics.median(kernel), 1e3 * statistics.median(wait), int(blocks), int(m)


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
        row = {"targets": len(inputs[1]),
               "lars_supports_ms": median_ms(lambda: _cuda_adjacency.lars_supports(*inputs),
                                             args.repeats)}
        row["kernel_ms"], row["wait_ms"], row["blocks"], row["m"] = kernel_and_wait(
            inputs, args.repeats)
        row.update(host_passes(inputs[0], inputs[4], args.repeats))
        cases[name] = row
        print(name, {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()},
              flush=True)
    _common.write_result(args, {"repeats": args.repeats, "cases": cases})


if __name__ == "__main__":
    main()
