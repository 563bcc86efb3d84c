"""Time the adjacency step against the order search it follows, and lingam's own.

    python benchmarks/bench_adjacency.py                             # CPU, p=100..1000
    python benchmarks/bench_adjacency.py --backend cuda --sizes 500x4096 1000x8192

For each size (sparse synthetic data): the causal-order search
(``paralingam.fit`` on ``--backend``), the adjacency step of
``DirectLiNGAM(backend=...).fit`` (the default adaptive lasso: LARS paths on
the GPU for ``cuda``; also timed on the host's cores) and least squares
(``adjacency.ols_adjacency`` from the scatter matrix, as ``fit`` gives it: the
Cholesky factor and rows on ``--backend``, for ``cuda`` also on the host), medians of ``--repeats``, and the adjacency's
share of the whole fit. ``--lingam-sizes`` also times lingam 1.13's
``predict_adaptive_lasso`` loop on the same order and checks the matrices agree.
Prints a table and writes JSON. Speed is measured here, never in unit tests.

``--mode blas-threads`` times the host least squares (``_ols_adjacency`` on
the host) of rank-deficient and wide data with every BLAS unlimited, with
scipy's own BLAS (where its wheel ships one) on one thread, and with every
BLAS on one thread (``bench_pipeline``'s data; a random order):

    python benchmarks/bench_adjacency.py --mode blas-threads --data-dir .gpu/data

``--mode estimator-blas`` (CUDA) times the adjacency phase of
``DirectLiNGAM(backend="cuda").fit`` and of ``paralingam.fit`` on
``bench_pipeline``'s rank_deficient_300, E. coli and typical data with
scipy's own BLAS on one thread (numpy's unlimited) or every BLAS on one
thread, each with and without the adaptive lasso's LARS paths on the GPU
(``_adaptive_lasso.CUDA_LASSO_MIN_FEATURES``); medians of 7 (typical: 3):

    python benchmarks/bench_adjacency.py --mode estimator-blas --data-dir .gpu/data

``--mode tsqr-segments`` is the same-process A/B of the data's streaming QR
(the minimum-norm rows of rank-deficient data) in one stream against its row
segments on threads (each forced, whichever ``--backend`` takes by default:
segments after a CUDA search, one stream after a CPU search): the adjacency phase
of ``paralingam.fit`` and of ``DirectLiNGAM().fit`` on ``--backend``, on
``bench_pipeline``'s E. coli and rank-deficient cases, the two settings
alternated in ``--rounds`` rounds of ``--repeats`` fits (medians):

    python benchmarks/bench_adjacency.py --mode tsqr-segments --backend cuda --data-dir .gpu/data

``--mode qr-ahead`` is the same-process A/B of least squares on rank-deficient
data after a CPU search with the data's QR started on a thread of its own
beside the scatter matrix (``_least_squares.qr_ahead``, the search's hint)
against the QR after it: the adjacency phase of ``paralingam.fit`` on
``bench_pipeline``'s E. coli and rank-deficient p=300 cases, the two
settings alternated in ``--rounds`` rounds of ``--repeats`` fits (medians):

    python benchmarks/bench_adjacency.py --mode qr-ahead --repeats 7

``--mode gpu-qr`` (CUDA) is the same-process A/B of the data's QR on the GPU
(cuSOLVER through CuPy, ``adjacency._cuda_qr``) against the host's row
segments, and the GPU's with its row blocks prepared on one thread (the
calling one) against ``fit``'s threads: the adjacency phase of
``paralingam.fit`` and of ``DirectLiNGAM().fit`` on ``bench_pipeline``'s
E. coli and rank-deficient cases, alternated in ``--rounds`` rounds of
``--repeats`` fits (medians); each row counts the GPU factorisations, so that
a silent fallback shows:

    python benchmarks/bench_adjacency.py --mode gpu-qr --backend cuda --data-dir .gpu/data

``--mode device-copy`` (CUDA) is the same-process A/B of that QR's input:
the CUDA search's copy of the data on the device (``fit``'s route) against
the data uploaded again from the host, and the host's row segments; the
adjacency phases as above and ``fit``'s upload phase, which holds the
copy; each row counts the factorisations of either GPU route:

    python benchmarks/bench_adjacency.py --mode device-copy --backend cuda --data-dir .gpu/data

``--mode ols-factor`` (CUDA) is the same-process A/B of where ``fit``'s
least-squares Cholesky rows run after a CUDA search: the GPU's kernels
against the host's LAPACK, alternated on the Sachs-sized, E. coli,
rank-deficient p=300 and typical p=1000 cases (the adjacency phase of
``fit``), to place ``adjacency._least_squares.CUDA_OLS_MIN_FEATURES``:

    python benchmarks/bench_adjacency.py --mode ols-factor --backend cuda --data-dir .gpu/data

``--mode pivot-noise`` (CUDA) times back-to-back fits of p=1000, n=8192 (the
pipeline's ``typical`` data) with the least squares' pivot-noise bound summed
by a matrix-vector product on numpy's BLAS, as before, against the tree's
``einsum``: numpy's OpenBLAS runs that product on all its threads, which spin
after it beside the next fit's upload. ``--rounds`` rounds of ``--repeats``
fits, medians of each phase:

    python benchmarks/bench_adjacency.py --mode pivot-noise --repeats 7

``--mode threaded-blas`` (CUDA) is the same-process A/B of where numpy's BLAS
keeps its threads in the adjacency step after a CUDA search
(``paralingam._blas``): from ``THREADED_BLAS_MIN_FEATURES`` variables on
(``by_features``, the rule before ``THREADED_BLAS_MIN_BASIS``), the tree's
rule (``by_basis``: also a basis of ``THREADED_BLAS_MIN_BASIS`` variables
that are not exactly explained), and every BLAS on the calling thread at
every size (``one_thread``). Its cases
are the pipeline's rank-deficient p=1000 and typical data and wide data of
p=1500, n=1000 and p=2000, n=1500 (fits only: the adaptive lasso needs more
samples than variables); each repeat is a fit and then ``DirectLiNGAM().fit``, so a
fit's validation and upload follow the estimator's step, and the estimator
follows the fit's. Medians of the fit's wall time and phases and of the
estimator's wall time and adjacency phase:

    python benchmarks/bench_adjacency.py --mode threaded-blas --backend cuda --repeats 5
"""

import contextlib
import os
import platform
import statistics
import time
import warnings

import numpy as np

import paralingam
# the private steps, as fit and the estimator call them on checked data (the
# public functions add the input checks, an O(n p) pass)
from paralingam.adjacency._adaptive_lasso import (
    _adaptive_lasso_adjacency as adaptive_lasso_adjacency)
from paralingam.adjacency._common import _scatter
from paralingam.adjacency._least_squares import _ols_adjacency as ols_adjacency
from paralingam.datasets import make_lingam_data

import _common  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from _common import median_time  # noqa: E402


# The wide case of blas-threads and threaded-blas: bench_pipeline.synthetic's
# (p, n, seed).
WIDE = (2000, 1500, 5)


def lingam_adaptive_lasso(X, order):
    """lingam 1.13's adjacency step for a given order (its own code)."""
    import lingam

    model = lingam.DirectLiNGAM()
    model._causal_order = list(order)
    model._estimate_adjacency_matrix(X)
    return model.adjacency_matrix_


def parse_size(text):
    p, n = (int(v) for v in text.lower().split("x"))
    return p, n


def blas_threads(args):
    """The host least squares with each BLAS thread setting (see the module docstring)."""
    import bench_pipeline as bp
    from paralingam import _blas, _lapack

    _lapack.flapack()  # scipy's BLAS loaded, so that the controllers see it (as fit does)
    own = _blas.scipy_blas()
    own = [] if own is None else [lib.filepath for lib in own.lib_controllers]
    cases = [("ecoli", lambda: bp.ecoli(args.data_dir), 7),
             ("rank_deficient_300", lambda: bp.rank_deficient(300, 2048, 277, 9), 7),
             ("rank_deficient_1000", lambda: bp.rank_deficient(1000, 8192, 924, 8), 3),
             ("wide", lambda: bp.synthetic(*WIDE), 3),
             # bench_pipeline's wide_5000 (one run each: about 40 s on one thread)
             ("wide_5000", lambda: bp.make_data("wide_5000", 5000, 4096, None), 1)]
    chosen = args.cases or [name for name, _, _ in cases[:4]]
    rows = []
    for name, make, k in [c for c in cases if c[0] in chosen][:2 if args.quick else None]:
        X = np.ascontiguousarray(make(), dtype=np.float64)
        order = np.random.default_rng(0).permutation(X.shape[1])
        # the contexts of fit's adjacency step: after a CUDA search, after a CPU search
        settings = {"unlimited": contextlib.nullcontext,
                    "scipy_blas_1_thread": _blas.scipy_in_this_thread,
                    "all_blas_1_thread": _blas.in_this_thread}
        row = {"case": name, "p": X.shape[1], "n": X.shape[0]}
        for label, limit in settings.items():
            def run(limit=limit):
                with limit():
                    ols_adjacency(X, order, backend="cpu")
            run()
            row[label + "_s"] = median_time(run, k)[0]
        rows.append(row)
        print(f"{name} p={row['p']} n={row['n']}: host least squares " + "  ".join(
            f"{label} {row[label + '_s'] * 1e3:.1f} ms" for label in settings), flush=True)
    _common.write_result(args, {"scipy_own_blas": own, "rows": rows})


def estimator_blas(args):
    """The estimator's adjacency phase per BLAS thread setting after a CUDA search (see the module docstring)."""
    import bench_pipeline as bp
    from paralingam import _blas
    from paralingam.adjacency import _adaptive_lasso

    saved = _blas.THREADED_BLAS_MIN_FEATURES, _adaptive_lasso.CUDA_LASSO_MIN_FEATURES
    settings = {  # (every BLAS on one thread, LARS paths on the GPU)
        "scipy_blas_1_thread": (False, True), "scipy_blas_1_thread_no_gpu_lars": (False, False),
        "all_blas_1_thread": (True, True), "all_blas_1_thread_no_gpu_lars": (True, False)}
    rows = []
    cases = ("rank_deficient_300", "ecoli", "typical")
    for name in cases[:2] if args.quick else cases:
        p, n = bp.CASES[name][0]
        X = np.ascontiguousarray(bp.make_data(name, p, n, args.data_dir))
        repeats = 3 if name == "typical" else 7
        row = {"case": name, "p": p, "n": n}
        try:
            for label, (all_blas_1, gpu_lars) in settings.items():
                _blas.THREADED_BLAS_MIN_FEATURES = 10**9 if all_blas_1 else 0
                _adaptive_lasso.CUDA_LASSO_MIN_FEATURES = saved[1] if gpu_lars else 10**9
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    for _ in range(2):  # warm-up
                        paralingam.DirectLiNGAM(backend="cuda").fit(X)
                    est = [paralingam.DirectLiNGAM(backend="cuda").fit(X).fit_stats_["time"]["adjacency"]
                           for _ in range(repeats)]
                    fit = [paralingam.fit(X, backend="cuda").stats["time"]["adjacency"]
                           for _ in range(repeats)]
                row[label] = {"estimator_adjacency_s": statistics.median(est),
                              "fit_adjacency_s": statistics.median(fit)}
                print(f"{name:20s} {label:32s} estimator adjacency "
                      f"{statistics.median(est) * 1e3:8.1f} ms   fit adjacency "
                      f"{statistics.median(fit) * 1e3:8.1f} ms", flush=True)
        finally:
            _blas.THREADED_BLAS_MIN_FEATURES, _adaptive_lasso.CUDA_LASSO_MIN_FEATURES = saved
        rows.append(row)
    _common.write_result(args, {"rows": rows})


def alternated_settings(args, cases, settings, install, restore, estimator=True, fields=None,
                        phases=(), makers=None, walls=False):
    """Rows of adjacency phases under each of ``settings``, alternated in ``--rounds`` rounds.

    ``settings``: label -> value; ``install(value)`` puts one in place and
    ``restore()`` the tree's own. Each round times ``--repeats`` fits of
    ``bench_pipeline``'s case on ``--backend`` per setting (and of
    ``DirectLiNGAM``, with ``estimator``, where the adaptive lasso can run:
    more samples than variables + 1), after one warm-up fit; medians.
    ``fields(n, p)``: more entries of a case's row; ``phases``: more phases
    of the fits to record (``"<phase>_s"``), besides the adjacency and the
    search. ``makers``: name -> a function making the case's data, for cases
    that are not ``bench_pipeline``'s; ``walls``: also the fit's and the
    estimator's wall times (``fit_s``, ``estimator_s``).
    """
    import bench_pipeline as bp

    rows = []
    for name in cases:
        if makers and name in makers:
            X = np.ascontiguousarray(makers[name]())
            n, p = X.shape
        else:
            p, n = bp.CASES[name][0]
            X = np.ascontiguousarray(bp.make_data(name, p, n, args.data_dir))
        row = {"case": name, "p": p, "n": n, **(fields(n, p) if fields else {}),
               "backend": args.backend, "rounds": {label: [] for label in settings}}
        with_estimator = estimator and n > p + 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for _ in range(args.rounds):
                    for label, value in settings.items():
                        install(value)
                        paralingam.fit(X, backend=args.backend, on_collinear="ignore")  # warm-up
                        fit, est, more = [], [], {k: [] for k in phases}
                        fit_wall, est_wall = [], []
                        for _ in range(args.repeats):
                            t0 = time.perf_counter()
                            r = paralingam.fit(X, backend=args.backend, on_collinear="ignore")
                            fit_wall.append(time.perf_counter() - t0)
                            fit.append(r.stats["time"]["adjacency"])
                            for k in phases:
                                more[k].append(r.stats["time"][k])
                            if with_estimator:
                                t0 = time.perf_counter()
                                m = paralingam.DirectLiNGAM(backend=args.backend).fit(X)
                                est_wall.append(time.perf_counter() - t0)
                                est.append(m.fit_stats_["time"]["adjacency"])
                        got = {"fit_adjacency_s": statistics.median(fit),
                               "search_s": r.stats["time"]["search"],
                               **{f"{k}_s": statistics.median(v) for k, v in more.items()}}
                        if with_estimator:
                            got["estimator_adjacency_s"] = statistics.median(est)
                        if walls:
                            got["fit_s"] = statistics.median(fit_wall)
                            if with_estimator:
                                got["estimator_s"] = statistics.median(est_wall)
                        row["rounds"][label].append(got)
        finally:
            restore()
        rows.append(row)
        for label in settings:
            got = row["rounds"][label]
            print(f"{name:20s} {label:10s} fit adjacency " + ", ".join(
                f"{g['fit_adjacency_s'] * 1e3:.1f}" for g in got) + " ms; " + (
                "estimator adjacency " + ", ".join(
                    f"{g['estimator_adjacency_s'] * 1e3:.1f}" for g in got) + " ms; "
                if with_estimator else "") + "search " +
                ", ".join(f"{g['search_s'] * 1e3:.1f}" for g in got) + " ms", flush=True)
    return rows


def tsqr_segments(args):
    """The adjacency phases with the data's QR in one stream and in segments (see the module docstring)."""
    from paralingam.adjacency import _least_squares

    factor = _least_squares._centred_triangular_factor

    def forced(segmented):  # the QR with segments on or off, whatever the backend's default
        return lambda *a, **k: factor(*a, **{**k, "segmented": segmented})

    def install(qr):
        _least_squares._centred_triangular_factor = qr

    cases = ("ecoli", "rank_deficient_300", "rank_deficient_1000")
    rows = alternated_settings(
        args, args.cases or (cases[:2] if args.quick else cases),
        {"one_stream": forced(False), "segments": forced(True)}, install, lambda: install(factor),
        fields=lambda n, p: {"segments": _least_squares.tsqr_segments(n, p)})
    _common.write_result(args, {"rows": rows})


def qr_ahead(args):
    """The least squares' phase with the data's QR started ahead and after (see the module docstring)."""
    from paralingam.adjacency import _least_squares

    tree = _least_squares.qr_ahead

    def install(rule):
        _least_squares.qr_ahead = rule

    rows = alternated_settings(
        args, args.cases or ("ecoli", "rank_deficient_300"),
        {"after": lambda *a: False, "ahead": tree}, install, lambda: install(tree), estimator=False)
    _common.write_result(args, {"rows": rows})


def gpu_qr(args):
    """The adjacency phases with the data's QR on the GPU and on the host (see the module docstring)."""
    from paralingam.adjacency import _cuda_qr

    if args.backend != "cuda":
        raise SystemExit("--mode gpu-qr compares two CUDA routes: pass --backend cuda")
    if _cuda_qr._cusolver() is None:
        raise SystemExit("--mode gpu-qr needs CuPy (cupy_backends' cuSOLVER)")
    suits, factor = _cuda_qr.suits, _cuda_qr.centred_triangular_factor
    counts = {"gpu": 0}

    def counted(*a):
        counts["gpu"] += 1
        return factor(*a)

    def one_thread(shape, rows_of, n_threads=1):  # the blocks prepared on the calling thread
        return counted(shape, rows_of, 1)

    def install(setting):
        _cuda_qr.suits, _cuda_qr.centred_triangular_factor = setting

    def restore():
        _cuda_qr.suits, _cuda_qr.centred_triangular_factor = suits, factor

    cases = ("ecoli", "rank_deficient_300", "rank_deficient_1000")
    rows = alternated_settings(
        args, args.cases or (cases[:2] if args.quick else cases),
        {"host_segments": (lambda n, p: False, counted), "gpu_one_thread": (suits, one_thread),
         "gpu": (suits, counted)}, install, restore)
    counts_at_end = counts["gpu"]
    for row in rows:  # (every fit of the GPU settings must have factorised there)
        row["gpu_factorisations_total"] = counts_at_end
    _common.write_result(args, {"rows": rows})


def device_copy(args):
    """The data's QR on the GPU from the search's copy of the data and from an upload (see the module docstring)."""
    from paralingam import _api
    from paralingam.adjacency import _cuda_qr

    if args.backend != "cuda" or _cuda_qr._cusolver() is None:
        raise SystemExit("--mode device-copy compares CUDA routes: pass --backend cuda, with CuPy")
    tree = (_cuda_qr.suits, _api._keeps_copy, _cuda_qr.centred_triangular_factor,
            _cuda_qr.centred_triangular_factor_of_copy)
    counts = {"upload": 0, "copy": 0}

    def counted(route, factor):
        def call(*a):
            counts[route] += 1
            return factor(*a)
        return call

    def install(setting):
        suits, keeps = setting
        _cuda_qr.suits, _api._keeps_copy = suits, keeps
        _cuda_qr.centred_triangular_factor = counted("upload", tree[2])
        _cuda_qr.centred_triangular_factor_of_copy = counted("copy", tree[3])

    def restore():
        (_cuda_qr.suits, _api._keeps_copy, _cuda_qr.centred_triangular_factor,
         _cuda_qr.centred_triangular_factor_of_copy) = tree

    cases = ("ecoli", "rank_deficient_300", "rank_deficient_1000")
    no_copy = lambda data: False  # noqa: E731
    rows = alternated_settings(
        args, args.cases or (cases[:2] if args.quick else cases),
        {"host_segments": (lambda n, p: False, no_copy), "gpu_upload": (tree[0], no_copy),
         "gpu_device_copy": (tree[0], tree[1])}, install, restore, phases=("upload",))
    for row in rows:  # (every fit of the GPU settings must have factorised there)
        row["gpu_factorisations_total"] = dict(counts)
    _common.write_result(args, {"rows": rows})


def ols_factor(args):
    """fit's least squares with the Cholesky rows on the GPU and on the host (see the module docstring)."""
    from paralingam.adjacency import _least_squares

    if args.backend != "cuda":
        raise SystemExit("--mode ols-factor compares CUDA routes: pass --backend cuda")
    tree = _least_squares.CUDA_OLS_MIN_FEATURES

    def install(min_features):
        _least_squares.CUDA_OLS_MIN_FEATURES = min_features

    rows = alternated_settings(
        args, args.cases or ("sachs_p_values", "ecoli", "rank_deficient_300", "typical"),
        {"gpu": 0, "host": 1 << 30}, install, lambda: install(tree), estimator=False)
    _common.write_result(args, {"rows": rows, "cuda_ols_min_features": tree})


def pivot_noise(args):
    """Back-to-back CUDA fits with the noise bound on BLAS and without (see the module docstring)."""
    import bench_pipeline as bp
    from paralingam.adjacency import _least_squares

    tree = _least_squares._pivot_noise

    def on_blas(gram, coef):  # the bound as it was summed before (numpy's BLAS)
        sd = np.sqrt(np.diag(gram))
        terms = np.abs(np.tril(coef, -1)) @ sd
        return np.maximum(np.arange(len(sd)), 1) * _least_squares._EPS * (sd + terms) ** 2

    settings = {"matvec_on_blas": on_blas, "einsum": tree}
    p, n = bp.CASES["typical"][0]
    X = np.ascontiguousarray(bp.make_data("typical", p, n, args.data_dir))
    phases = ("validate", "upload", "search", "adjacency")
    row = {"case": "typical", "p": p, "n": n, "rounds": {label: [] for label in settings}}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            paralingam.fit(X, backend="cuda")
            for _ in range(args.rounds):
                for label, bound in settings.items():
                    _least_squares._pivot_noise = bound
                    paralingam.fit(X, backend="cuda")  # its adjacency step precedes the first timed fit
                    got = {k: [] for k in ("fit",) + phases}
                    for _ in range(args.repeats):
                        t0 = time.perf_counter()
                        st = paralingam.fit(X, backend="cuda").stats["time"]
                        got["fit"].append(time.perf_counter() - t0)
                        for k in phases:
                            got[k].append(st[k])
                    med = {f"{k}_s": statistics.median(v) for k, v in got.items()}
                    row["rounds"][label].append(med)
                    print(f"{label:15s} " + " | ".join(f"{k[:-2]} {v * 1e3:.1f}" for k, v in med.items())
                          + " ms", flush=True)
    finally:
        _least_squares._pivot_noise = tree
    _common.write_result(args, {"rows": [row]})


def threaded_blas(args):
    """Back-to-back fits and estimator fits with numpy's BLAS threaded by the rule before
    THREADED_BLAS_MIN_BASIS (``by_features``), by the tree's (``by_basis``) and never
    (``one_thread``; see the module docstring)."""
    import bench_pipeline as bp
    from paralingam import _blas

    if args.backend != "cuda":
        raise SystemExit("--mode threaded-blas times the step after a CUDA search: pass --backend cuda")
    tree = _blas.THREADED_BLAS_MIN_FEATURES, _blas.THREADED_BLAS_MIN_BASIS
    settings = {"by_features": (tree[0], 0),  # (the rule before THREADED_BLAS_MIN_BASIS)
                "by_basis": tree, "one_thread": (1 << 30, tree[1])}

    def install(value):
        _blas.THREADED_BLAS_MIN_FEATURES, _blas.THREADED_BLAS_MIN_BASIS = value

    makers = {"wide_1500": lambda: bp.synthetic(1500, 1000, 5), "wide": lambda: bp.synthetic(*WIDE)}
    cases = ("rank_deficient_1000", "typical", "wide_1500", "wide")
    rows = alternated_settings(args, [c for c in cases if c in (args.cases or cases)], settings,
                               install, lambda: install(tree), phases=("validate", "upload"),
                               makers=makers, walls=True)
    _common.write_result(args, {"rows": rows, "settings": settings})


def main():
    ap = _common.parser("bench_adjacency", __doc__, modes=("steps", "blas-threads", "estimator-blas",
                                                             "tsqr-segments", "qr-ahead",
                                                             "pivot-noise", "gpu-qr",
                                                             "device-copy", "ols-factor",
                                                             "threaded-blas"),
                        quick="blas-threads, estimator-blas, tsqr-segments: the two small cases only")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--sizes", nargs="*", default=["100x1024", "200x2048", "500x4096", "1000x8192"],
                    metavar="PxN")
    ap.add_argument("--lingam-sizes", nargs="*", default=["100x1024"], metavar="PxN",
                    help="sizes on which lingam's adaptive lasso runs too (it is slow)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3,
                    help="tsqr-segments, qr-ahead, pivot-noise, gpu-qr, device-copy: rounds "
                         "of the A/B")
    ap.add_argument("--data-dir", default=_common.DATA_DIR,
                    help="folder of ecoli_core_fluxes_n10000.npz (blas-threads, estimator-blas)")
    ap.add_argument("--cases", nargs="+", default=None,
                    choices=("ecoli", "rank_deficient_300", "rank_deficient_1000", "wide", "wide_5000",
                             "sachs_p_values", "typical", "wide_1500"),
                    help="blas-threads, tsqr-segments, qr-ahead, threaded-blas: the cases to "
                         "time (default: blas-threads all but wide_5000, tsqr-segments E. coli "
                         "and the rank-deficient ones, qr-ahead E. coli and rank-deficient "
                         "p=300, threaded-blas rank_deficient_1000, typical, wide_1500 and wide; "
                         "wide_1500 is threaded-blas's alone)")
    args = ap.parse_args()
    other_modes = {"blas-threads": blas_threads, "estimator-blas": estimator_blas,
                   "tsqr-segments": tsqr_segments, "qr-ahead": qr_ahead,
                   "pivot-noise": pivot_noise, "gpu-qr": gpu_qr, "device-copy": device_copy,
                   "ols-factor": ols_factor, "threaded-blas": threaded_blas}
    if args.mode in other_modes:
        other_modes[args.mode](args)
        return

    rows = []
    print(f"host {platform.node()}, {os.cpu_count()} cores, search on {args.backend}", flush=True)
    for k, size in enumerate(args.sizes):
        p, n = parse_size(size)
        X, _, _ = make_lingam_data(p, n, density="sparse", random_state=300 + k)
        X = np.ascontiguousarray(X)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
            paralingam.fit(X, backend=args.backend)  # warm-up (compile cache, buffers)
            search, _, result = median_time(lambda: paralingam.fit(X, backend=args.backend),
                                         args.repeats)
        search = result.stats["time"].get("search", search) if args.backend == "cuda" else search
        order = np.asarray(result.causal_order, dtype=np.intp)
        # the estimator's fit: search, then the adaptive lasso where the search ran
        fits = [paralingam.DirectLiNGAM(backend=args.backend).fit(X)
                for _ in range(args.repeats + 1)][1:]  # the first one warms up
        lasso_s = statistics.median(m.fit_stats_["time"]["adjacency"] for m in fits)
        B = fits[0].adjacency_matrix_
        # least squares from a known scatter matrix (fit passes the search's):
        # the Cholesky factor and the rows, on the backend
        scatter = _scatter(X)[1]
        ols_s, _, B_ols = median_time(
            lambda: ols_adjacency(X, order, backend=args.backend, scatter=scatter), args.repeats)
        row = {"case": f"sparse p={p} n={n}", "p": p, "n": n, "search_s": search,
               "adaptive_lasso_s": lasso_s, "ols_s": ols_s,
               "lasso_share_of_fit": lasso_s / (search + lasso_s)}
        if args.backend == "cuda":  # the same steps on the host's cores, same data
            row["adaptive_lasso_host_s"], _, B_host = median_time(
                lambda: adaptive_lasso_adjacency(X, order, backend="cpu"), args.repeats)
            row["gpu_vs_host_max_abs_diff"] = float(np.abs(B_host - B).max())
            row["ols_host_s"], _, B_ols_host = median_time(
                lambda: ols_adjacency(X, order, backend="cpu", scatter=scatter), args.repeats)
            row["ols_gpu_vs_host_max_abs_diff"] = float(np.abs(B_ols_host - B_ols).max())
        if size in args.lingam_sizes:
            t0 = time.perf_counter()
            ref = lingam_adaptive_lasso(X, order)
            row["lingam_adaptive_lasso_s"] = time.perf_counter() - t0
            row["lingam_max_abs_diff"] = float(np.abs(ref - B).max())
        rows.append(row)
        print(f"{row['case']:>22}: search {search:8.3f} s  adaptive lasso {lasso_s:8.3f} s "
              f"({100 * row['lasso_share_of_fit']:.0f}% of fit)  OLS {ols_s:7.3f} s"
              + (f"  host CPU {row['adaptive_lasso_host_s']:.3f} s (max |diff| "
                 f"{row['gpu_vs_host_max_abs_diff']:.1e}), OLS {row['ols_host_s']:.3f} s "
                 f"(max |diff| {row['ols_gpu_vs_host_max_abs_diff']:.1e})"
                 if "adaptive_lasso_host_s" in row else "")
              + (f"  lingam lasso {row['lingam_adaptive_lasso_s']:.2f} s "
                 f"(max |diff| {row['lingam_max_abs_diff']:.1e})" if "lingam_adaptive_lasso_s" in row
                 else ""), flush=True)

    print(f"\n| case | search ({args.backend}) | adaptive lasso ({args.backend}) | share of fit | "
          f"adaptive lasso (host CPU) | OLS ({args.backend}) | OLS (host CPU) | "
          f"lingam's adaptive lasso |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        lin = (f"{r['lingam_adaptive_lasso_s']:.2f} s ({r['lingam_adaptive_lasso_s'] / r['adaptive_lasso_s']:.0f}x)"
               if "lingam_adaptive_lasso_s" in r else "")
        host = f"{r['adaptive_lasso_host_s']:.3f} s" if "adaptive_lasso_host_s" in r else ""
        ols_host = f"{r['ols_host_s']:.3f} s" if "ols_host_s" in r else ""
        print(f"| {r['case']} | {r['search_s']:.3f} s | {r['adaptive_lasso_s']:.3f} s | "
              f"{100 * r['lasso_share_of_fit']:.0f}% | {host} | {r['ols_s']:.3f} s | {ols_host} | "
              f"{lin} |")
    _common.write_result(args, {"host": platform.node(), "cores": os.cpu_count(),
                                "backend": args.backend, "repeats": args.repeats, "rows": rows})


if __name__ == "__main__":
    main()
