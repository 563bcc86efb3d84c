"""The adjacency step on the GPU (least squares, the adaptive lasso's paths)
against the host's computations and lingam.

Skipped without a usable GPU (the ``gpu`` marker, see conftest.py).
"""

import warnings

import numpy as np
import pytest
from lingam_cases import lingam_adjacency, random_prior_knowledge, tutorial_data
from test_rank_deficient import explained_targets, order_of, rank_deficient

from paralingam.search import reference
from paralingam.adjacency import _least_squares, adaptive_lasso_adjacency, ols_adjacency

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def gpu_at_every_size(monkeypatch):
    """Send every size to the GPU (by default small problems stay on the CPU)."""
    from paralingam.adjacency import _adaptive_lasso

    monkeypatch.setattr(_adaptive_lasso, "CUDA_LASSO_MIN_FEATURES", 0)


def mixed_data(p, n, seed):
    """Strongly correlated columns: their lasso paths drop predictors."""
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((p, p)) * (rng.random((p, p)) < 0.3) + np.eye(p)
    return rng.laplace(size=(n, p)) @ M


def both(X, order, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the GPU path must not fall back silently
        gpu = adaptive_lasso_adjacency(X, order, backend="cuda", **kwargs)
    cpu = adaptive_lasso_adjacency(X, order, backend="cpu", **kwargs)
    return gpu, cpu


@pytest.mark.parametrize("p, n, density, seed", [
    (10, 100, "dense", 210), (25, 300, "sparse", 211), (45, 200, "dense", 212),
    (60, 400, "sparse", 213), (150, 1000, "sparse", 214), (120, 600, "dense", 215),
])
def test_gpu_paths_equal_cpu_engine(lingam_data, p, n, density, seed):
    X = lingam_data(p, n, density, seed)[0]
    order = reference.causal_order(X)[0] if p <= 60 else list(range(p))
    gpu, cpu = both(X, order)
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-10)
    assert np.count_nonzero(gpu)
    shuffled = list(np.random.default_rng(seed).permutation(p))
    gpu, cpu = both(X, shuffled, gamma=2.0)
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-10)


@pytest.mark.parametrize("p, n, seed", [(30, 200, 3), (80, 300, 5)])
def test_gpu_paths_with_drops_equal_cpu_engine(p, n, seed):
    X = mixed_data(p, n, seed)
    gpu, cpu = both(X, list(range(p)))
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-10)


def test_gpu_paths_past_max_iter_equal_cpu_engine():
    # Past LassoLarsIC's max_iter (500 steps) the late LARS steps choose
    # between nearly tied predictors, so a rounding-level difference (the GPU
    # contracts a*b+c into FMAs, a portable CPU build does not, a native one
    # does) can flip a support, and the refit then changes that whole row:
    # here the native and the portable CPU builds differ in 11 of the rows
    # with more than 500 predictors. Rows before max_iter must agree, and a
    # wrong max_iter rule would change most rows past it.
    p, n = 560, 1500
    X = mixed_data(p, n, 4)[:, np.random.default_rng(4).permutation(p)]
    gpu, cpu = both(X, list(range(p)))
    rows = np.flatnonzero((np.abs(gpu - cpu) > 1e-10).any(axis=1))
    assert rows.size == 0 or rows.min() > 500, f"rows {rows} differ"
    assert rows.size <= 20, f"{rows.size} of the {p - 501} rows past max_iter differ"


def test_gpu_paths_equal_lingam_on_the_tutorial_resamples():
    X = tutorial_data()
    rng = np.random.RandomState(2)
    for rows in [np.arange(len(X))] + [rng.randint(0, len(X), len(X)) for _ in range(5)]:
        Xr = X[rows]
        order = reference.causal_order(Xr)[0]
        gpu = adaptive_lasso_adjacency(Xr, order, backend="cuda")
        np.testing.assert_allclose(gpu, lingam_adjacency(Xr, order), rtol=0, atol=1e-8)


def test_gpu_with_prior_knowledge_and_degenerate_targets(lingam_data):
    # Restricted targets run on the CPU; a near copy sends targets through the
    # fallbacks. The matrix must still equal the CPU engine's.
    X = np.array(lingam_data(12, 300, "sparse", 216)[0])
    pk = random_prior_knowledge(12, 216)
    order = reference.causal_order(X)[0]
    gpu, cpu = both(X, order, prior_knowledge=pk)
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-10)
    X[:, 3] = X[:, 0] + 1e-9 * np.random.default_rng(0).standard_normal(300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpu = adaptive_lasso_adjacency(X, list(range(12)), backend="cuda")
        cpu = adaptive_lasso_adjacency(X, list(range(12)), backend="cpu")
    assert np.isfinite(gpu).all()
    # columns 0 and 3 are copies to 1e-9: which of the two a later row keeps
    # is decided by rounding (their minimum-norm weights come from the data's
    # QR, on the GPU or the host), and either predicts the same; merged, the
    # rows must agree
    def merged(B):
        B = B.copy()
        B[4:, 0] += B[4:, 3]
        B[4:, 3] = 0.0
        return B

    np.testing.assert_allclose(merged(gpu), merged(cpu), rtol=0, atol=1e-9)
    np.testing.assert_allclose(gpu[:4], cpu[:4], rtol=0, atol=1e-10)


@pytest.mark.parametrize("p, n, explained, seed, outliers", [
    (60, 400, 40, 231, None), (150, 1000, 120, 232, 5), (300, 2048, 277, 233, None),
])
def test_gpu_paths_over_dependent_predecessors_equal_cpu_engine(p, n, explained, seed,
                                                                outliers, monkeypatch):
    # Rank-deficient data: nearly every target's predecessors are linearly
    # dependent, and their minimum-norm weights go to the GPU's paths with
    # the Cholesky rows' (not target by target to the CPU engine).
    from paralingam.adjacency import _cuda_adjacency

    X = rank_deficient(p, n, explained, seed, noise=outliers)
    order = order_of(X)
    sent = []
    original = _cuda_adjacency.lars_rows

    def recorded(gram, scatter, targets, *args, **kwargs):
        rows, ok = original(gram, scatter, targets, *args, **kwargs)
        sent.append((np.asarray(targets).copy(), ok.copy()))
        return rows, ok

    monkeypatch.setattr(_cuda_adjacency, "lars_rows", recorded)
    gpu, cpu = both(X, order)
    (targets, ok), = sent
    assert sorted(targets) == list(range(1, p))  # every target's path, dependent ones too
    assert ok.mean() >= 0.9, f"{np.count_nonzero(~ok)} of {p - 1} paths handed back"
    # A target its predecessors explain exactly has many exact fits, and which
    # one the path ends on (or whether it stops short of one, its correlations
    # under LARS's tolerance, as lingam's may) is decided by rounding, as
    # between the data's QR on the GPU and on the host (tests/test_cuda_qr.py).
    # Every other row equals the CPU engine's; an exact target's row equals
    # it, or fits its target as well (or to 1e-8 of the target's norm).
    exact = explained_targets(X, order)
    assert exact.any() and not exact.all()
    np.testing.assert_allclose(gpu[~exact], cpu[~exact], rtol=0, atol=1e-9)
    Xc = X - X.mean(axis=0)
    for i in np.flatnonzero(exact):
        if np.allclose(gpu[i], cpu[i], rtol=0, atol=1e-9):
            continue
        residual = [np.linalg.norm(Xc[:, i] - Xc @ B[i]) for B in (gpu, cpu)]
        assert residual[0] <= max(residual[1] * (1 + 1e-6), 1e-8 * np.linalg.norm(Xc[:, i])), i


def lars_inputs(X, order):
    """``lars_rows``' arguments for every target of ``X`` in ``order`` (full-rank data)."""
    from paralingam.adjacency import SINGULAR_TOL, _cuda_adjacency

    Xc = X - X.mean(axis=0)
    Z = Xc / X.std(axis=0)
    gram = np.ascontiguousarray((Z.T @ Z)[np.ix_(order, order)])
    scatter = np.ascontiguousarray((Xc.T @ Xc)[np.ix_(order, order)])
    coef, rss, solved = _cuda_adjacency.ols_on_predecessors(gram, SINGULAR_TOL)
    assert solved.all()
    return gram, scatter, np.arange(1, X.shape[1]), coef, rss, X.shape[0], 1.0, SINGULAR_TOL


@pytest.mark.parametrize("p, n, seed", [(40, 400, 241), (300, 2000, 242)])
def test_gpu_refit_is_least_squares_on_the_kept_predictors(lingam_data, p, n, seed):
    # Each row the kernel returns is the least squares of its target, on the
    # scatter's scale, on the predictors its path kept (the paths' kernel's
    # output, read back from the device), as the host's refit computes it;
    # nothing else in the row, and the rows of targets before it are zero.
    import pycuda.driver as drv

    from paralingam.adjacency import _cuda_adjacency

    X = lingam_data(p, n, "sparse", seed)[0]
    gram, scatter, targets, *rest = lars_inputs(X, list(range(p)))
    rows, ok = _cuda_adjacency.lars_rows(gram, scatter, targets, *rest)
    (key, bufs), = _cuda_adjacency._BUFFERS.items()
    kept = np.empty((p, p), dtype=np.uint8)
    drv.memcpy_dtoh(kept, bufs["kept"])
    assert ok.mean() > 0.9
    assert not rows[0].any() and not np.triu(rows).any()
    for k in targets[ok]:
        keep = np.flatnonzero(kept[k])
        np.testing.assert_array_equal(np.flatnonzero(rows[k]), keep)
        if len(keep):
            want = np.linalg.solve(scatter[np.ix_(keep, keep)], scatter[keep, k])
            np.testing.assert_allclose(rows[k, keep], want, rtol=0,
                                       atol=1e-9 * np.abs(want).max())
    assert sum(np.count_nonzero(kept[k]) for k in targets[ok]) > p


def test_gpu_refit_hands_back_singular_kept_predictors(lingam_data):
    # A scatter matrix of zeros makes every kept set singular: those targets
    # come back not done (the host computes them) with zero rows; a target
    # that keeps no predictor is done, its row zero either way.
    from paralingam.adjacency import _cuda_adjacency

    X = lingam_data(40, 400, "sparse", 243)[0]
    gram, scatter, targets, *rest = lars_inputs(X, list(range(40)))
    rows, ok = _cuda_adjacency.lars_rows(gram, scatter, targets, *rest)
    kept_any = np.array([rows[k].any() for k in targets])
    assert kept_any.sum() > 10
    nan_scatter = scatter.copy()
    nan_scatter[5, :] = np.nan
    for bad in (np.zeros_like(scatter), nan_scatter):
        got, got_ok = _cuda_adjacency.lars_rows(gram, bad, targets, *rest)
        if not np.isnan(bad).any():
            np.testing.assert_array_equal(got_ok, ok & ~kept_any)
            assert not got.any()
        else:  # only the targets that keep predictor 5 read its row
            touched = rows[targets, 5] != 0
            np.testing.assert_array_equal(got_ok, ok & ~touched)
            np.testing.assert_array_equal(got[targets[got_ok]], rows[targets[got_ok]])
            assert not got[targets[~got_ok]].any()


def test_gpu_estimator_rows_the_gpu_hands_back_come_from_the_cpu_engine(lingam_data, monkeypatch):
    # Targets whose refit the kernel hands back are computed whole by the
    # CPU engine: the matrix equals the CPU engine's.
    from paralingam.adjacency import _cuda_adjacency

    X = lingam_data(60, 500, "sparse", 244)[0]
    order = list(range(60))
    original = _cuda_adjacency.lars_rows
    handed = []

    def no_refit(gram, scatter, targets, *args, **kwargs):  # every kept set singular
        rows, ok = original(gram, np.zeros_like(scatter), targets, *args, **kwargs)
        handed.append(np.count_nonzero(~ok))
        return rows, ok

    monkeypatch.setattr(_cuda_adjacency, "lars_rows", no_refit)
    gpu, cpu = both(X, order)
    assert handed and handed[0] > 10
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-10)


def test_gpu_paths_keep_their_buffers_and_free_large_arrays(lingam_data, monkeypatch):
    # lars_rows keeps its buffers between calls: a second call on the
    # same shape allocates nothing and gives the same paths; arrays above
    # KEPT_ARRAYS_BYTES are freed after each call (the work buffers stay),
    # and the next call allocates them again, with the same paths
    import pycuda.driver as drv

    from paralingam.adjacency import _cuda_adjacency

    X = lingam_data(40, 400, "dense", 219)[0]
    order = list(range(40))
    first, cpu = both(X, order)
    np.testing.assert_allclose(first, cpu, rtol=0, atol=1e-10)
    (key, bufs), = _cuda_adjacency._BUFFERS.items()
    assert set(bufs) == set(_cuda_adjacency._sizes(key))
    held = {name: int(buf) for name, buf in bufs.items()}
    allocs = []
    alloc, paths = drv.mem_alloc, _cuda_adjacency.lars_rows

    def counted(*args, **kwargs):  # (the allocations of lars_rows alone)
        monkeypatch.setattr(drv, "mem_alloc", lambda nbytes: allocs.append(nbytes) or alloc(nbytes))
        try:
            return paths(*args, **kwargs)
        finally:
            monkeypatch.setattr(drv, "mem_alloc", alloc)

    monkeypatch.setattr(_cuda_adjacency, "lars_rows", counted)
    again = adaptive_lasso_adjacency(X, order, backend="cuda")
    assert not allocs and {name: int(buf) for name, buf in bufs.items()} == held
    np.testing.assert_array_equal(again, first)
    monkeypatch.setattr(_cuda_adjacency, "KEPT_ARRAYS_BYTES", 0)
    for _ in range(2):
        freed = adaptive_lasso_adjacency(X, order, backend="cuda")
        np.testing.assert_array_equal(freed, first)
        assert set(_cuda_adjacency._BUFFERS[key]) == {"work", "iwork"}
    assert sorted(allocs) == sorted(max(b, 8) for b in _cuda_adjacency._array_sizes(40).values())


def test_estimator_on_cuda_equals_lingam(lingam_data):
    import paralingam

    X = lingam_data(20, 500, "sparse", 217)[0]
    model = paralingam.DirectLiNGAM(backend="cuda").fit(X)
    np.testing.assert_allclose(model.adjacency_matrix_,
                               lingam_adjacency(X, model.causal_order_), rtol=0, atol=1e-8)


@pytest.mark.parametrize("p, n, seed", [(2, 30, 4), (3, 30, 5), (5, 50, 1), (70, 400, 2),
                                        (333, 2000, 3)])
def test_gpu_least_squares_factor_equals_host(p, n, seed):
    from paralingam.adjacency import _cuda_adjacency
    from paralingam.adjacency import SINGULAR_TOL
    from paralingam.adjacency._least_squares import _ols_on_predecessors

    X = mixed_data(p, n, seed)
    G = X.T @ X
    coef, rss, solved = _cuda_adjacency.ols_on_predecessors(G, SINGULAR_TOL)
    want_coef, want_rss, want_solved = _ols_on_predecessors(G)
    assert solved.all() and want_solved.all()
    np.testing.assert_allclose(coef, want_coef, rtol=0, atol=1e-9 * np.abs(want_coef).max())
    np.testing.assert_allclose(rss, want_rss, rtol=1e-9)


def test_gpu_least_squares_factor_stops_at_a_singular_pivot():
    from paralingam.adjacency import _cuda_adjacency
    from paralingam.adjacency import SINGULAR_TOL
    from paralingam.adjacency._least_squares import _ols_on_predecessors

    rng = np.random.default_rng(8)
    X = rng.standard_normal((500, 90))
    X[:, 40] = X[:, 3] - 2.0 * X[:, 33]  # exact: pivot 40 fails (second panel)
    G = X.T @ X
    coef, rss, solved = _cuda_adjacency.ols_on_predecessors(G, SINGULAR_TOL)
    np.testing.assert_array_equal(solved, np.arange(90) < 40)
    want_coef, want_rss, _ = _ols_on_predecessors(G)
    np.testing.assert_allclose(coef[:40], want_coef[:40], rtol=0, atol=1e-10)
    np.testing.assert_allclose(rss[:40], want_rss[:40], rtol=1e-9)


@pytest.mark.parametrize("p, n, density, seed", [(12, 300, "sparse", 220), (100, 800, "dense", 221)])
def test_gpu_ols_adjacency_equals_host(lingam_data, p, n, density, seed, monkeypatch):
    monkeypatch.setattr(_least_squares, "CUDA_OLS_MIN_FEATURES", 0)  # (the GPU's rows at any size)
    X = lingam_data(p, n, density, seed)[0]
    order = list(np.random.default_rng(seed).permutation(p))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        gpu = ols_adjacency(X, order, backend="cuda")
    np.testing.assert_allclose(gpu, ols_adjacency(X, order), rtol=0, atol=1e-10)
    pk = random_prior_knowledge(p, seed)
    np.testing.assert_allclose(ols_adjacency(X, order, backend="cuda", prior_knowledge=pk),
                               ols_adjacency(X, order, prior_knowledge=pk), rtol=0, atol=1e-10)
    # rank-deficient: the GPU's factor stops, the host's minimum-norm rows stand
    Xd = np.array(X)
    Xd[:, order[5]] = Xd[:, order[1]] + Xd[:, order[2]]
    np.testing.assert_allclose(ols_adjacency(Xd, order, backend="cuda"),
                               ols_adjacency(Xd, order), rtol=0, atol=1e-10)


def test_fit_on_cuda_gives_least_squares_from_the_gpu(lingam_data, monkeypatch):
    import paralingam
    from paralingam.adjacency import _cuda_adjacency

    monkeypatch.setattr(_least_squares, "CUDA_OLS_MIN_FEATURES", 40)  # (X has 40 variables)

    calls = []
    factor = _cuda_adjacency.ols_on_predecessors

    def spy(gram, tol):
        out = factor(gram, tol)
        calls.append(bool(out[2].all()))
        return out

    monkeypatch.setattr(_cuda_adjacency, "ols_on_predecessors", spy)
    X = lingam_data(40, 1000, "sparse", 222)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = paralingam.fit(X, backend="cuda")
    assert calls == [True]  # one factorisation, on the GPU, every row solved there
    np.testing.assert_allclose(result.adjacency_matrix, ols_adjacency(X, result.causal_order),
                               rtol=0, atol=1e-9)


@pytest.mark.parametrize("p, bad", [(70, 0), (70, 31), (70, 32), (70, 63), (20, 7), (20, 19)])
def test_gpu_least_squares_factor_panel_edges(p, bad):
    # a failed pivot at the first column, the last column of a panel and the
    # first of the next, and inside a single short panel: rows before it are
    # solved, the rest left to the host
    from paralingam.adjacency import _cuda_adjacency
    from paralingam.adjacency import SINGULAR_TOL
    from paralingam.adjacency._least_squares import _ols_on_predecessors

    rng = np.random.default_rng(bad)
    X = rng.laplace(size=(400, p))
    X[:, bad] = 0.0 if bad == 0 else X[:, :bad] @ rng.standard_normal(bad)
    G = X.T @ X
    coef, rss, solved = _cuda_adjacency.ols_on_predecessors(G, SINGULAR_TOL)
    np.testing.assert_array_equal(solved, np.arange(p) < bad)
    want_coef, want_rss, _ = _ols_on_predecessors(G)
    np.testing.assert_allclose(coef[:bad], want_coef[:bad], rtol=0,
                               atol=1e-9 * max(1.0, np.abs(want_coef[:bad]).max(initial=0)))
    np.testing.assert_allclose(rss[:bad], want_rss[:bad], rtol=1e-9)


@pytest.mark.parametrize("p", [1, 2])
def test_gpu_ols_adjacency_of_one_or_two_variables(p, monkeypatch):
    monkeypatch.setattr(_least_squares, "CUDA_OLS_MIN_FEATURES", 0)
    X = np.random.default_rng(p).laplace(size=(50, p)) @ np.triu(np.ones((p, p)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        gpu = ols_adjacency(X, list(range(p))[::-1], backend="cuda")
    np.testing.assert_allclose(gpu, ols_adjacency(X, list(range(p))[::-1]), rtol=0, atol=1e-12)
