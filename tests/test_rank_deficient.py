"""The adaptive lasso on linearly dependent predecessors (issue 21).

Past the first variable that is an exact combination of earlier ones, every
target's predecessors are dependent: its least-squares weights are the
minimum-norm solution (lingam's ``LinearRegression``, the reference engine's
``lstsq``). The compiled engine gets them from one Gram-Schmidt pass
(``_adaptive_lasso._min_norm_weights``) instead of handing each such target to
scikit-learn. Targets that are themselves exactly explained have a noise
variance of rounding size, so BIC's choice along their path is decided by
rounding in every implementation (lingam's too): there only the fit is
checked, not the support.
"""

import warnings

import numpy as np
import pytest
from lingam_cases import lingam_adjacency

import paralingam
from paralingam.adjacency import _adaptive_lasso, _common, _cuda_qr, _least_squares
from paralingam.adjacency import AdjacencyWarning, adaptive_lasso_adjacency, estimate_adjacency


def _lasso_built():
    try:
        import paralingam.adjacency._lasso  # noqa: F401
    except ImportError:
        return False
    return True


# (a marker, not importorskip: other test modules import this one's data helpers)
pytestmark = pytest.mark.skipif(not _lasso_built(),
                                reason="the compiled adaptive lasso is not built")


def rank_deficient(p, n, explained, seed, noise=None):
    """``p - explained`` LiNGAM variables plus exact combinations of 2-4 earlier
    ones, columns shuffled (as ``benchmarks/bench_pipeline.py`` builds them)."""
    from paralingam.datasets import make_lingam_data

    rng = np.random.default_rng(seed)
    X0 = make_lingam_data(p - explained, n, density="sparse", random_state=seed)[0]
    cols = [X0[:, j] for j in range(X0.shape[1])]
    for _ in range(explained):
        parents = rng.choice(len(cols), size=min(int(rng.integers(2, 5)), len(cols)),
                             replace=False)
        w = rng.choice([-1.0, 1.0], size=len(parents)) * rng.uniform(0.5, 1.5, len(parents))
        cols.append(sum(wi * cols[j] for wi, j in zip(w, parents)))
    X = np.column_stack(cols)
    if noise is not None:  # outliers: a few huge values in the free columns
        rows = rng.choice(n, size=noise, replace=False)
        X[rows, 0] *= 50.0
    return np.ascontiguousarray(X[:, rng.permutation(p)])


def order_of(X):
    return np.asarray(paralingam.fit(X, on_collinear="ignore").causal_order)


def standardised(X):
    """As sklearn's StandardScaler: a constant column keeps scale 1."""
    std = X.std(axis=0)
    std[std == 0.0] = 1.0
    return (X - X.mean(axis=0)) / std


def explained_targets(X, order):
    """Targets whose residual on their predecessors is rounding (standardised)."""
    Z = standardised(X)
    exact = np.zeros(X.shape[1], dtype=bool)
    for k in range(1, len(order)):
        P, y = Z[:, order[:k]], Z[:, order[k]]
        b = np.linalg.lstsq(P, y, rcond=None)[0]
        exact[order[k]] = np.sum((y - P @ b) ** 2) <= 1e-20 * max(np.sum(y ** 2), 1.0)
    return exact


def dependent_targets(X, order):
    """Targets whose predecessors are linearly dependent."""
    Z = standardised(X)
    return np.array([k > 0 and np.linalg.matrix_rank(Z[:, order[:k]]) < k
                     for k in np.argsort(order)])


def sklearn_fallbacks(monkeypatch):
    """Count the targets handed to scikit-learn's path."""
    calls = []
    original = _adaptive_lasso._adaptive_lasso_row_sklearn

    def counted(*args, **kwargs):
        calls.append(args[2])
        return original(*args, **kwargs)

    monkeypatch.setattr(_adaptive_lasso, "_adaptive_lasso_row_sklearn", counted)
    return calls


def assert_rows_fit(X, B, rows):
    """Each row of ``B`` reproduces its target to rounding (intercept aside)."""
    Xc = X - X.mean(axis=0)
    for i in np.flatnonzero(rows):
        residual = Xc[:, i] - Xc @ B[i]
        assert np.linalg.norm(residual) <= 1e-8 * np.linalg.norm(Xc[:, i]), i


@pytest.mark.parametrize("p, n, explained, seed", [
    (30, 400, 20, 301), (60, 300, 50, 302), (45, 1000, 20, 303), (80, 200, 74, 304),
    (40, 3000, 25, 305),
])
def test_dependent_predecessors_run_compiled_and_equal_the_reference(p, n, explained, seed,
                                                                     monkeypatch):
    X = rank_deficient(p, n, explained, seed)
    order = order_of(X)
    dependent = dependent_targets(X, order)
    exact = explained_targets(X, order)
    assert dependent.sum() > 5 and (dependent & ~exact).any()  # the case under test
    ref = adaptive_lasso_adjacency(X, order, engine="sklearn")
    calls = sklearn_fallbacks(monkeypatch)
    got = adaptive_lasso_adjacency(X, order, engine="compiled")
    # no target handed to scikit-learn, but for a rare exact combination:
    # its path is decided by rounding, which differs by CPU build (on an
    # AMD EPYC's x86-64-v3 build one such target of seed 305 met two
    # coefficients crossing zero at once, a branch the engine leaves to
    # scikit-learn)
    assert set(calls) <= set(np.flatnonzero(exact)) and len(calls) <= 1
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[~exact], ref[~exact], rtol=0, atol=1e-8)
    assert_rows_fit(X, got, exact)
    assert_rows_fit(X, ref, exact)


@pytest.mark.parametrize("p, n, explained, seed, outliers", [
    (15, 300, 6, 311, None), (25, 200, 15, 312, None), (20, 300, 10, 313, 5),
])
def test_dependent_predecessors_equal_lingam_where_defined(p, n, explained, seed, outliers):
    # a random order: the search puts the free variables first, and only a
    # wrong order gives unexplained targets dependent predecessors here
    X = rank_deficient(p, n, explained, seed, noise=outliers)
    order = np.random.default_rng(seed).permutation(p)
    exact = explained_targets(X, order)
    assert (dependent_targets(X, order) & ~exact).any()
    got = adaptive_lasso_adjacency(X, order, engine="compiled")
    np.testing.assert_allclose(got[~exact], lingam_adjacency(X, order)[~exact], rtol=0,
                               atol=1e-8)
    assert_rows_fit(X, got, exact)


def test_dependent_predecessors_with_outliers_and_prior_knowledge(monkeypatch):
    X = rank_deficient(40, 500, 25, 321, noise=5)
    order = order_of(X)
    exact = explained_targets(X, order)
    pk = -np.ones((40, 40))
    pk[order[-1], order[3]] = 0  # one target restricted: it solves its own weights
    ref = adaptive_lasso_adjacency(X, order, prior_knowledge=pk, engine="sklearn")
    got = adaptive_lasso_adjacency(X, order, prior_knowledge=pk, engine="compiled")
    np.testing.assert_allclose(got[~exact], ref[~exact], rtol=0, atol=1e-8)
    assert got[order[-1], order[3]] == 0.0
    assert_rows_fit(X, got, exact & (np.arange(40) != order[-1]))


@pytest.mark.parametrize("n, outliers, segmented", [(300, None, False), (30, None, False),
                                                    (300, 4, False), (3000, 6, False),
                                                    (3000, 6, True)])
def test_min_norm_weights_are_minimum_norm_least_squares(n, outliers, segmented):
    # Both vector routes (the QR factor of tall data, the centred columns of
    # wide data) give pinv-least squares on the standardised predecessors.
    X = rank_deficient(40, n, 28, 331, noise=outliers)
    order = order_of(X)
    n, p = X.shape
    _, S = _common._scatter(X)
    std = np.sqrt(np.diag(S) / n)
    gram = (S / np.outer(std, std))[np.ix_(order, order)]
    coef, rss, solved = _least_squares._ols_on_predecessors(gram)
    assert not solved.all()
    # (segmented: the data's QR in row segments, as after a CUDA search)
    coef2, rss2, filled = _adaptive_lasso._min_norm_weights(X, order, std, gram, coef.copy(),
                                                            rss.copy(), solved,
                                                            segmented=segmented)
    assert filled.all()
    np.testing.assert_array_equal(coef2[solved], coef[solved])
    Z = (X - X.mean(axis=0)) / std
    Z = Z[:, order]
    for k in np.flatnonzero(~solved):
        b = np.linalg.lstsq(Z[:, :k], Z[:, k], rcond=None)[0]
        np.testing.assert_allclose(coef2[k, :k], b, rtol=0, atol=1e-8 * max(1, abs(b).max()))
        assert not coef2[k, k:].any()
        # rss in the Gram matrix's scale, as the reference engine forms it
        assert abs(rss2[k] - (gram[k, k] - gram[k, :k] @ b)) <= 1e-8 * gram[k, k]


def test_full_rank_data_keep_the_factor_weights(monkeypatch):
    # nothing dependent: the minimum-norm route is not taken
    X = rank_deficient(20, 400, 0, 341)
    order = order_of(X)

    def unexpected(*args, **kwargs):
        raise AssertionError("minimum-norm weights on full-rank data")

    monkeypatch.setattr(_adaptive_lasso, "_min_norm_weights", unexpected)
    got = adaptive_lasso_adjacency(X, order, engine="compiled")
    np.testing.assert_allclose(got, lingam_adjacency(X, order), rtol=0, atol=1e-8)


def test_estimator_on_rank_deficient_data_runs_no_target_in_sklearn(monkeypatch):
    from paralingam.lingam.estimator import DirectLiNGAM

    X = rank_deficient(50, 400, 40, 351)
    calls = sklearn_fallbacks(monkeypatch)
    with pytest.warns(UserWarning):  # the search reports the exact dependence
        model = DirectLiNGAM().fit(X)
    assert calls == []
    exact = explained_targets(X, model.causal_order_)
    ref = adaptive_lasso_adjacency(X, model.causal_order_, engine="sklearn")
    np.testing.assert_allclose(model.adjacency_matrix_[~exact], ref[~exact], rtol=0, atol=1e-8)
    assert_rows_fit(X, model.adjacency_matrix_, exact)


def test_the_cuda_route_sends_dependent_targets_paths_to_the_gpu(monkeypatch):
    # The CUDA route's paths, with the GPU played by the CPU engine: every
    # target goes there with its weights, the minimum-norm ones for targets
    # past a dependent variable, and those it hands back run on the CPU; the
    # matrix is the CPU route's bit for bit (the GPU itself: test_gpu_adjacency).
    from paralingam import _isa

    lasso = _isa.load("adjacency._lasso")
    X = rank_deficient(40, 500, 30, 352, noise=3)
    order = order_of(X)
    sent = []

    def gpu_played_by_the_cpu(gram, scatter, targets, given, coef, rss, n, gamma, n_threads,
                              progress=None):
        sent.append((targets[given].copy(), coef.copy()))
        rows = np.flatnonzero(given)
        offsets = np.zeros(len(rows) + 1, dtype=np.intp)
        offsets[1:] = np.cumsum(targets[rows])
        preds = np.concatenate([np.arange(k) for k in targets[rows]]).astype(np.intp)
        B, fallback = lasso.adaptive_lasso_rows(gram, scatter, targets[rows], offsets, preds,
                                                float(n), float(gamma), 1, coef, rss,
                                                np.ones(len(rows), dtype=np.uint8))
        done = np.zeros(len(targets), dtype=bool)
        done[rows] = ~fallback
        done[rows[::3]] = False  # handed back: the CPU engine computes them again
        B[targets[rows[::3]]] = 0.0
        return B, done

    monkeypatch.setattr(_adaptive_lasso, "CUDA_LASSO_MIN_FEATURES", 0)
    monkeypatch.setattr(_adaptive_lasso, "_least_squares_factor",
                        lambda gram, on_gpu: _least_squares._ols_on_predecessors(gram))
    monkeypatch.setattr(_adaptive_lasso, "_adaptive_lasso_rows_cuda", gpu_played_by_the_cpu)
    monkeypatch.setattr(_cuda_qr, "suits", lambda n, p: False)  # the data's QR on the host
    got = adaptive_lasso_adjacency(X, order, backend="cuda", n_threads=1)
    (targets, coef), = sent
    assert sorted(targets) == list(range(1, 40))
    dependent = np.flatnonzero(dependent_targets(X, order)[order])  # positions in the order
    assert len(dependent) > 20
    # their weights are the minimum-norm least squares on the standardised data
    Z = standardised(X)[:, order]
    for k in dependent[:5]:
        np.testing.assert_allclose(coef[k, :k], np.linalg.lstsq(Z[:, :k], Z[:, k], rcond=None)[0],
                                   rtol=0, atol=1e-6)
    assert np.array_equal(got, adaptive_lasso_adjacency(X, order, backend="cpu", n_threads=1))


def test_near_copies_follow_sklearn_path_on_the_same_weights(monkeypatch):
    # Column 3 copies column 0 up to 1e-9 (1 - R^2 ~ 1e-18, below SINGULAR_TOL):
    # both count as one direction and get minimum-norm weights, equal for the
    # pair. The reference engine's weights (lstsq on the Gram matrix, whose
    # condition is the square of the data's) split the pair unevenly at 1e-10,
    # and which of the two LARS takes, or whether it meets a degenerate
    # regressor, follows that rounding. The compiled row must be sklearn's
    # path and refit on the minimum-norm weights.
    from paralingam.datasets import make_lingam_data

    X = np.array(make_lingam_data(8, 200, density="sparse", random_state=214)[0])
    X[:, 3] = X[:, 0] + 1e-9 * np.random.default_rng(0).standard_normal(200)
    order = np.array([0, 3, 1, 2, 4, 5, 6, 7])
    got = adaptive_lasso_adjacency(X, order, engine="compiled")
    assert np.isfinite(got).all()

    n, p = X.shape
    _, S = _common._scatter(X)
    std = np.sqrt(np.diag(S) / n)
    gram = S / np.outer(std, std)
    gram_ord = gram[np.ix_(order, order)]
    coef, rss, solved = _least_squares._ols_on_predecessors(gram_ord)
    coef, rss, filled = _adaptive_lasso._min_norm_weights(X, order, std, gram_ord, coef, rss,
                                                          solved)
    assert filled.all() and not solved.all()
    solve_spd = _adaptive_lasso._solve_spd
    for k in range(1, p):
        weights = iter([coef[k, :k]])  # the first solve is the weights, the next the refit

        def solve(A, b):
            return next(weights, None) if len(b) == k and A.shape == (k, k) and \
                np.array_equal(b, gram[order[:k], order[k]]) else solve_spd(A, b)

        monkeypatch.setattr(_adaptive_lasso, "_solve_spd", solve)
        kept, row, _ = _adaptive_lasso._adaptive_lasso_row_sklearn(gram, S, order[k],
                                                                   order[:k], n, 1.0)
        expected = np.zeros(p)
        expected[kept] = row
        np.testing.assert_allclose(got[order[k]], expected, rtol=0, atol=1e-10)


def test_constant_column_among_dependent_predecessors(monkeypatch):
    # a constant column: zero Gram row, weight 0 in both engines, its own row zero
    X = rank_deficient(20, 300, 10, 5)
    X[:, 4] = 3.0
    for order in (np.arange(20), np.random.default_rng(1).permutation(20)):
        exact = explained_targets(X, order)
        ref = adaptive_lasso_adjacency(X, order, engine="sklearn")
        calls = sklearn_fallbacks(monkeypatch)
        got = adaptive_lasso_adjacency(X, order, engine="compiled")
        assert calls == []
        assert np.isfinite(got).all() and not got[4].any() and not got[:, 4].any()
        np.testing.assert_allclose(got[~exact], ref[~exact], rtol=0, atol=1e-8)
        assert_rows_fit(X, got, exact)


# --------------------------------------------------------------------------
# scikit-learn's branches on dependent predictors, in the compiled engine
# --------------------------------------------------------------------------

def _sklearn_row(gram, S, order, k, weights, rss, n, rng=None):
    """The reference engine's row of target ``order[k]`` on the given weights and rss;
    with ``rng``, its Gram inputs perturbed by a few units of rounding."""
    from sklearn.linear_model import lars_path_gram

    eps = np.finfo(float).eps
    pred, target = order[:k], order[k]
    Gw = gram[np.ix_(pred, pred)] * np.outer(weights, weights)
    gw = gram[pred, target] * weights
    if rng is not None:
        E = rng.standard_normal(Gw.shape)
        Gw = Gw * (1 + 2 * eps * (E + E.T))
        gw = gw * (1 + 4 * eps * rng.standard_normal(k))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # sklearn's degenerate-path warnings
        _, _, path = lars_path_gram(gw, Gw, n_samples=n, max_iter=500, alpha_min=0.0,
                                    method="lasso", eps=eps)
        yy = gram[target, target]
        rss_path = yy - 2.0 * (gw @ path) + np.einsum("ik,ij,jk->k", path, Gw, path)
        noise = max(rss, eps * yy) / (n - k - 1)
        dof = (np.abs(path) > eps).sum(axis=0)
        bic = n * np.log(2 * np.pi * noise) + rss_path / noise + np.log(n) * dof
    kept = pred[np.abs(path[:, np.argmin(bic)] * weights) > 0]
    row = np.zeros(len(order))
    if len(kept):
        row[kept] = _adaptive_lasso._solve_spd(S[np.ix_(kept, kept)], S[kept, target])
    return row


@pytest.mark.parametrize("order_seed", [None, 0, 1, 4])
def test_compiled_engine_runs_sklearn_branches_on_dependent_predictors(ecoli, order_seed,
                                                                       monkeypatch):
    # E. coli fluxes (rank 24 of 87): the paths on the minimum-norm weights
    # meet degenerate regressors (sklearn drops them "for good", and the
    # correlations no longer match their positions), alphas that grow
    # through rounding (sklearn stops the path) and kept predictors that are
    # singular (the minimum-norm refit). The compiled engine takes all three
    # itself: no target goes to scikit-learn, and every row equals sklearn's
    # path on the same weights wherever sklearn's own row is decided by more
    # than rounding (unchanged when its Gram inputs move by a few units of
    # rounding) and the target is not exactly explained (its BIC then
    # compares rounding-sized residuals).
    from paralingam import _blas, _isa
    from paralingam.adjacency import AdjacencyWarning

    _lasso = _isa.load("adjacency._lasso")  # the build the estimator runs (rounding differs by build)

    X = ecoli[0]
    n, p = X.shape
    order = (order_of(X) if order_seed is None
             else np.random.default_rng(order_seed).permutation(p))
    # (under the public function's BLAS limits: the warned columns are
    # decided by rounding, which the BLAS threads change)
    with _blas.for_adjacency(p):
        _, S = _common._scatter(X)
        std = np.sqrt(np.diag(S) / n)
        gram = S / np.outer(std, std)
        g = np.ascontiguousarray(gram[np.ix_(order, order)])
        coef, rss, solved = _least_squares._ols_on_predecessors(g)
        coef, rss, filled = _adaptive_lasso._min_norm_weights(X, order, std, g, coef, rss,
                                                              solved)
        assert filled.all()
        targets = np.arange(1, p, dtype=np.intp)
        offsets = np.concatenate([[0], np.cumsum(targets)]).astype(np.intp)
        predictors = np.concatenate([np.arange(k) for k in targets]).astype(np.intp)
        flags = np.zeros(p - 1, dtype=np.uint8)
        _lasso.adaptive_lasso_rows(g, np.ascontiguousarray(S[np.ix_(order, order)]), targets,
                                   offsets, predictors, float(n), 1.0, 1, coef, rss,
                                   np.ones(p - 1, dtype=np.uint8), flags=flags)
    assert not (flags & 1).any()
    warned = np.zeros(p, dtype=bool)
    warned[order[1:]] = flags & _adaptive_lasso.WARNED > 0
    singular = np.zeros(p, dtype=bool)
    singular[order[1:]] = flags & _adaptive_lasso.SINGULAR_REFIT > 0

    calls = sklearn_fallbacks(monkeypatch)
    with pytest.warns(AdjacencyWarning, match="stopped early or dropped") as record:
        got = adaptive_lasso_adjacency(X, order, engine="compiled")
    assert calls == [] and np.isfinite(got).all()
    columns = sorted((int(c) for c in np.flatnonzero(warned)), key=list(order).index)
    assert f"columns {columns} stopped" in str(record[0].message)

    exact = explained_targets(X, order)
    rng = np.random.default_rng(5)
    compared = np.zeros(p, dtype=bool)
    for k in range(1, p):
        target = order[k]
        if exact[target]:
            continue
        weights = np.abs(coef[k, :k])
        want = _sklearn_row(gram, S, order, k, weights, rss[k], n)
        scale = max(1.0, np.abs(want).max())
        if any(np.abs(_sklearn_row(gram, S, order, k, weights, rss[k], n, rng) - want).max()
               > 1e-9 * scale for _ in range(3)):
            continue  # sklearn's own row is decided by rounding
        compared[target] = True
        np.testing.assert_allclose(got[target], want, rtol=0, atol=1e-9 * scale)
    assert (compared & warned).any()  # the comparison covers the ported branches

    # singular kept predictors: the minimum-norm refit, as the reference
    # engine's (and the same fitted values as lingam's LinearRegression)
    assert singular.any()
    Xc = X - X.mean(axis=0)
    for target in np.flatnonzero(singular):
        kept = np.flatnonzero(got[target])
        assert kept.size and set(kept) <= set(order[:list(order).index(target)])
        A = S[np.ix_(kept, kept)]
        # the minimum-norm solution of a singular system carries the rounding
        # of its range's conditioning (E. coli's near copies), which the
        # builds' FMA contractions change: the fitted values agree to
        # rounding, the coefficients to 1e-6 of the row
        want = _adaptive_lasso._solve_spd(A, S[kept, target])
        np.testing.assert_allclose(got[target, kept], want, rtol=0,
                                   atol=1e-6 * max(1.0, np.abs(got[target]).max()))
        np.testing.assert_allclose(Xc[:, kept] @ got[target, kept], Xc[:, kept] @ want, rtol=0,
                                   atol=1e-9 * np.linalg.norm(Xc[:, target]))
        with pytest.raises(np.linalg.LinAlgError):  # singular to SINGULAR_TOL
            L = np.linalg.cholesky(A)
            if (np.diag(L) ** 2 > _common.SINGULAR_TOL * np.diag(A)).all():
                raise AssertionError("kept predictors not singular")
            raise np.linalg.LinAlgError
        # lstsq on the data, its directions of rounding size (E. coli's exact
        # dependencies: singular values of 1e-13 of the largest and below)
        # cut: lstsq's default cutoff, eps max(n, k) = 2.2e-13 here, falls
        # among them, so its default answer is decided by rounding (a
        # direction at 2.3e-13 changed fitted values by 2% on the H100
        # host's build). 1e-8 lies in the gap between the data's directions
        # and the rounding ones, which is checked.
        sv = np.linalg.svd(Xc[:, kept], compute_uv=False)
        assert not ((sv > 1e-10 * sv[0]) & (sv < 1e-6 * sv[0])).any()
        b = np.linalg.lstsq(Xc[:, kept], Xc[:, target], rcond=1e-8)[0]
        np.testing.assert_allclose(Xc[:, kept] @ got[target, kept], Xc[:, kept] @ b, rtol=0,
                                   atol=1e-6 * np.linalg.norm(Xc[:, target]) / np.sqrt(n))


def _recorded_qr(monkeypatch):
    """Record the data's QR calls: ``(segmented, n_threads)`` of each one."""
    calls = []
    factor = _least_squares._centred_triangular_factor

    def recorded(*args, **kwargs):
        calls.append((kwargs.get("segmented", False), kwargs.get("n_threads")))
        return factor(*args, **kwargs)

    monkeypatch.setattr(_least_squares, "_centred_triangular_factor", recorded)
    return calls


def test_the_cpu_route_keeps_the_one_stream_qr(monkeypatch):
    # after a CPU search the data's QR is one stream, the bits it always had
    # (segments only after a CUDA search): fit's least squares and the
    # estimator's minimum-norm weights on tall rank-deficient data
    X = rank_deficient(30, 4096, 20, 351)
    assert _least_squares.tsqr_segments(*X.shape) > 1
    calls = _recorded_qr(monkeypatch)
    paralingam.fit(X, backend="cpu", on_collinear="ignore")
    with pytest.warns(paralingam.DegenerateDataWarning):  # (the exact combinations)
        paralingam.DirectLiNGAM(backend="cpu").fit(X)
    assert len(calls) >= 2 and not any(segmented for segmented, _ in calls)


def test_the_cuda_route_segments_the_qr_on_the_threads_given(monkeypatch):
    # backend="cuda": the QR in segments, on n_threads threads. Below
    # CUDA_LASSO_MIN_FEATURES the adaptive lasso's paths run on the host, and
    # least squares without a usable GPU warn and run on the host: both need
    # no GPU here.
    X = rank_deficient(30, 4096, 20, 352)
    order = order_of(X)
    assert X.shape[1] < _adaptive_lasso.CUDA_LASSO_MIN_FEATURES
    # (where CuPy is installed the QR runs on the GPU instead: tests/test_cuda_qr.py)
    monkeypatch.setattr(_cuda_qr, "suits", lambda n, p: False)
    calls = _recorded_qr(monkeypatch)
    got = adaptive_lasso_adjacency(X, order, backend="cuda", n_threads=3)
    assert calls == [(True, 3)]
    # rows of exact combinations are decided by rounding (the module's docstring):
    # they reproduce their target; the others equal the one stream's
    exact = explained_targets(X, order)
    one_stream = adaptive_lasso_adjacency(X, order, engine="compiled")
    np.testing.assert_allclose(got[~exact], one_stream[~exact], rtol=0, atol=1e-8)
    assert_rows_fit(X, got, exact)
    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (no GPU: computed on the CPU)
        B = estimate_adjacency(X, order, method="ols", backend="cuda", n_threads=2)
    assert calls == [(True, 2)]
    np.testing.assert_allclose(B, estimate_adjacency(X, order, method="ols"), rtol=0, atol=1e-9)


def _recorded_ahead(monkeypatch):
    """Record each start of the data's QR ahead of the scatter matrix (``_FactorAhead``)."""
    started = []
    ahead = _least_squares._FactorAhead

    def recorded(*args, **kwargs):
        started.append(1)
        return ahead(*args, **kwargs)

    monkeypatch.setattr(_least_squares, "_FactorAhead", recorded)
    return started


def _qr_threads():
    """The threads of a QR started ahead that still run."""
    import threading

    return [t for t in threading.enumerate() if t.name == "paralingam-qr-ahead" and t.is_alive()]


def test_the_qr_ahead_changes_no_result(monkeypatch):
    # the QR started beside the scatter matrix gives the same bits as the QR
    # after it: least squares with and without the hint, on rank-deficient
    # data (the factor used) and on full-rank data (a wrong hint: the factor
    # is stopped and dropped), and fit, whose search gives the hint
    deficient = rank_deficient(30, 4096, 20, 353)
    full = np.random.default_rng(354).laplace(size=(3000, 12))
    orders = [order_of(X) for X in (deficient, full)]
    started = _recorded_ahead(monkeypatch)
    for X, order in zip((deficient, full), orders):
        with_hint = _least_squares._ols_adjacency(X, order, backend="cpu", n_threads=2,
                                                  dependent=True)
        assert not _qr_threads()  # no thread outlives the step
        np.testing.assert_array_equal(
            with_hint, _least_squares._ols_adjacency(X, order, backend="cpu", n_threads=2))
    assert len(started) == 2
    got = paralingam.fit(deficient, backend="cpu", on_collinear="ignore", n_threads=2)
    assert len(started) == 3 and got.stats["explained"]
    monkeypatch.setattr(_least_squares, "qr_ahead", lambda *args: False)
    want = paralingam.fit(deficient, backend="cpu", on_collinear="ignore", n_threads=2)
    assert len(started) == 3
    np.testing.assert_array_equal(got.adjacency_matrix, want.adjacency_matrix)


def test_the_qr_starts_ahead_on_the_cpu_route_with_a_hint_and_two_threads(monkeypatch):
    X = rank_deficient(30, 4096, 20, 355)
    order = order_of(X)
    started = _recorded_ahead(monkeypatch)
    assert paralingam.fit(X, backend="cpu", on_collinear="ignore", n_threads=1).stats["explained"]
    assert not started  # one thread: none
    paralingam.fit(np.random.default_rng(356).laplace(size=(2000, 10)), backend="cpu",
                   n_threads=2)  # nothing explained: no hint
    assert not started
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (no GPU: computed on the CPU)
        _least_squares._ols_adjacency(X, order, backend="cuda", n_threads=2, dependent=True)
    assert not started  # after a CUDA search: the search's scatter matrix, the QR in segments
    _least_squares._ols_adjacency(X, order, backend="cpu", n_threads=2, dependent=True)
    assert started == [1]
    assert _least_squares.qr_ahead("cpu", True, 2) and not _least_squares.qr_ahead("cpu", False, 2)
    assert not _least_squares.qr_ahead("cpu", True, 1) and not _least_squares.qr_ahead("cuda", True, 8)


def test_ctrl_c_while_the_qr_runs_ahead_stops_it(monkeypatch, sigint_after):
    # Ctrl-C while least squares wait for the QR started ahead: KeyboardInterrupt
    # at once, and the QR's thread folds no further chunk and is gone
    import time

    X = rank_deficient(7, 20 * _least_squares.TSQR_CHUNK, 3, 357)
    order = order_of(X)
    folds = _slow_folds(monkeypatch, 0.1)
    t0 = time.perf_counter()
    with sigint_after(0.3), pytest.raises(KeyboardInterrupt):
        _least_squares._ols_adjacency(X, order, backend="cpu", n_threads=2, dependent=True)
    assert time.perf_counter() - t0 < 1.0  # not the 1.9 s of every fold
    # the step returned after the fold under way ended, and no other started
    # (is_alive is not to be trusted after an interrupted join before 3.13)
    at_return = list(folds)
    time.sleep(0.3)
    assert folds == at_return and 1 <= len(folds) <= 6 and not any(folds)
    assert not _qr_threads()


def _slow_folds(monkeypatch, seconds, fail=False):
    """Make the QR's folds take ``seconds`` each (or raise LinAlgError).

    Returns the list of started folds: 1 for each, turned to 0 when it ends.
    """
    import time

    from paralingam.adjacency import _linalg

    folds = []
    fold = _linalg.fold_rows

    def slow(*args, **kwargs):
        folds.append(1)
        if fail:
            raise np.linalg.LinAlgError("a planted failure of the QR")
        time.sleep(seconds)
        try:
            return fold(*args, **kwargs)
        finally:
            folds[-1] = 0

    monkeypatch.setattr(_linalg, "fold_rows", slow)
    return folds


def test_a_qr_ahead_that_is_not_needed_is_stopped(monkeypatch):
    # a wrong hint (full-rank data): the rows need no QR, which is stopped
    # at its next fold rather than run out, and its thread is gone
    import time

    X = np.random.default_rng(358).laplace(size=(20 * _least_squares.TSQR_CHUNK, 8))
    order = order_of(X)
    want = _least_squares._ols_adjacency(X, order, backend="cpu", n_threads=2)
    started = _recorded_ahead(monkeypatch)
    folds = _slow_folds(monkeypatch, 0.1)
    t0 = time.perf_counter()
    got = _least_squares._ols_adjacency(X, order, backend="cpu", n_threads=2, dependent=True)
    assert time.perf_counter() - t0 < 1.0  # not the 1.9 s of every fold
    assert started == [1] and not _qr_threads() and len(folds) <= 6
    np.testing.assert_array_equal(got, want)


def test_an_error_in_the_qr_ahead_reaches_the_caller(monkeypatch):
    X = rank_deficient(7, 4 * _least_squares.TSQR_CHUNK, 3, 359)
    order = order_of(X)
    _slow_folds(monkeypatch, 0.0, fail=True)
    with pytest.raises(np.linalg.LinAlgError, match="planted"):
        _least_squares._ols_adjacency(X, order, backend="cpu", n_threads=2, dependent=True)
    assert not _qr_threads()


def first_explained_position(X, order):
    """Position in ``order`` of the first variable its predecessors explain exactly."""
    return int(np.argmax(explained_targets(X, order)[order]))


def factor_sizes(monkeypatch):
    """The sizes of the Cholesky factors least squares and the adaptive lasso's weights
    ask for (made on the host)."""
    sizes = []
    factor = _least_squares._least_squares_factor
    spy = lambda gram, on_gpu: sizes.append(len(gram)) or factor(gram, False)  # noqa: E731
    monkeypatch.setattr(_least_squares, "_least_squares_factor", spy)
    monkeypatch.setattr(_adaptive_lasso, "_least_squares_factor", spy)
    return sizes


def test_the_cuda_route_factorises_only_up_to_the_first_explained_variable(monkeypatch):
    X = rank_deficient(300, 2000, 250, 41)  # rank 50: the first explained variable comes early
    order = np.random.default_rng(41).permutation(300)
    first = first_explained_position(X, order)
    assert 0 < first < _least_squares.CUDA_OLS_MIN_FEATURES
    _, scatter = _common._scatter_by_blocks(X, None)
    sizes = factor_sizes(monkeypatch)
    hinted = _least_squares._ols_adjacency(X, order, backend="cuda", scatter=scatter,
                                           first_explained=first)
    assert sizes == [first + 1]  # the leading block, on the host
    whole = _least_squares._ols_adjacency(X, order, backend="cuda", scatter=scatter)
    assert sizes == [first + 1, 300]  # without the hint: all the variables
    np.testing.assert_allclose(hinted, whole, rtol=0, atol=1e-12 * np.abs(whole).max())


def test_a_hint_the_pivots_do_not_confirm_changes_no_result(monkeypatch):
    # the search's explained variable is one whose pivot holds here (a looser
    # tolerance): the rows after the block still come from the data
    X = rank_deficient(300, 2000, 250, 42)
    order = np.random.default_rng(42).permutation(300)
    _, scatter = _common._scatter_by_blocks(X, None)
    first = first_explained_position(X, order)
    sizes = factor_sizes(monkeypatch)
    whole = _least_squares._ols_adjacency(X, order, backend="cuda", scatter=scatter)
    for hint in (first - 1, 1):
        sizes.clear()
        hinted = _least_squares._ols_adjacency(X, order, backend="cuda", scatter=scatter,
                                               first_explained=hint)
        # every pivot of the block holds: the whole factor, as without the hint
        assert sizes == [hint + 1, 300]
        np.testing.assert_array_equal(hinted, whole)


def cuda_route_lasso(X, order, hint):
    """The adaptive lasso on the CUDA route (its GPU steps fall back here, quietly)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no GPU: the host takes each step
        warnings.simplefilter("ignore", AdjacencyWarning)
        return _adaptive_lasso._adaptive_lasso_adjacency(X, order, backend="cuda", n_threads=2,
                                                         first_explained=hint)


def test_the_adaptive_lasso_factorises_its_weights_only_up_to_the_first_explained_variable(
        monkeypatch):
    X = rank_deficient(300, 2000, 250, 41)
    order = np.random.default_rng(41).permutation(300)
    first = first_explained_position(X, order)
    sizes = factor_sizes(monkeypatch)
    hinted = cuda_route_lasso(X, order, first)
    assert sizes == [first + 1]  # the leading block
    whole = cuda_route_lasso(X, order, None)
    assert sizes == [first + 1, 300]  # without the hint: all the variables
    # the same supports; the weights differ in rounding only
    np.testing.assert_array_equal(hinted != 0, whole != 0)
    np.testing.assert_allclose(hinted, whole, rtol=0, atol=1e-9 * np.abs(whole).max())


def test_an_adaptive_lasso_hint_the_pivots_do_not_confirm_changes_no_result(monkeypatch):
    X = rank_deficient(300, 2000, 250, 42)
    order = np.random.default_rng(42).permutation(300)
    first = first_explained_position(X, order)
    sizes = factor_sizes(monkeypatch)
    whole = cuda_route_lasso(X, order, None)
    for hint in (first - 1, 1):
        sizes.clear()
        hinted = cuda_route_lasso(X, order, hint)
        assert sizes == [hint + 1, 300]  # every pivot of the block holds: the whole factor
        np.testing.assert_array_equal(hinted, whole)


@pytest.mark.parametrize("hint", [0, 299])
def test_a_hint_at_either_end_makes_one_factor_of_all_the_variables(monkeypatch, hint):
    # position 0 has no predecessors to be explained by (no block); at p - 1
    # the block is the whole matrix, factorised once even where its last
    # pivot holds (full-rank data)
    X = rank_deficient(300, 2000, 250 if hint == 0 else 0, 42)
    order = np.random.default_rng(42).permutation(300)
    sizes = factor_sizes(monkeypatch)
    cuda_route_lasso(X, order, hint)
    _, scatter = _common._scatter_by_blocks(X, None)
    _least_squares._ols_adjacency(X, order, backend="cuda", scatter=scatter,
                                  first_explained=hint)
    assert sizes == [300, 300]


def test_the_cpu_route_ignores_the_hint_in_the_adaptive_lasso(monkeypatch):
    X = rank_deficient(40, 500, 20, 45)
    order = np.random.default_rng(45).permutation(40)
    sizes = factor_sizes(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AdjacencyWarning)
        _adaptive_lasso._adaptive_lasso_adjacency(X, order, backend="cpu", first_explained=3)
    assert sizes == [40]  # the whole factor, on the host


def test_fit_hands_the_first_explained_position_to_the_adjacency_step(monkeypatch):
    X = rank_deficient(40, 2000, 20, 43)
    seen = []
    estimate = paralingam._api._estimate_adjacency
    monkeypatch.setattr(paralingam._api, "_estimate_adjacency",
                        lambda *a, **kw: seen.append(kw["first_explained"]) or estimate(*a, **kw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        res = paralingam.fit(X, backend="cpu")
    order = np.asarray(res.causal_order)
    position = {int(v): int(np.flatnonzero(order == int(v))[0]) for v in res.stats["explained"]}
    assert seen == [min(position.values())]
    full_rank = np.random.default_rng(43).laplace(size=(500, 6))
    paralingam.fit(full_rank, backend="cpu")
    assert seen[-1] is None


def hinted_then_whole(monkeypatch, run):
    """``run()`` on 400 rank-60 variables with ``fit``'s hint, then without it (GPU).

    Returns both results and, per run, the sizes of the factors made on the GPU.
    """
    from paralingam.adjacency import _cuda_adjacency

    X = rank_deficient(400, 4096, 340, 44)  # rank 60
    calls = []
    gpu_factor = _cuda_adjacency.ols_on_predecessors
    monkeypatch.setattr(_cuda_adjacency, "ols_on_predecessors",
                        lambda gram, tol: calls.append(len(gram)) or gpu_factor(gram, tol))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        warnings.simplefilter("ignore", AdjacencyWarning)
        warnings.simplefilter("error", RuntimeWarning)
        hinted = run(X)
        hinted_calls = list(calls)
        monkeypatch.setattr(paralingam._api, "_first_explained", lambda found: None)
        whole = run(X)
    return X, hinted, whole, hinted_calls, calls[len(hinted_calls):]


@pytest.mark.gpu
def test_fit_on_the_gpu_skips_the_whole_factor_after_an_early_explained_variable(monkeypatch):
    from paralingam.adjacency import _cuda_low_rank

    monkeypatch.setattr(_cuda_low_rank, "ENABLED", False)  # (the host's route of least squares)
    X, hinted, whole, hinted_calls, whole_calls = hinted_then_whole(
        monkeypatch, lambda X: paralingam.fit(X, backend="cuda"))
    assert hinted_calls == []  # the leading block is small: the host's
    assert whole_calls == [400]
    assert hinted.causal_order == whole.causal_order
    scale = np.abs(whole.adjacency_matrix).max()
    np.testing.assert_allclose(hinted.adjacency_matrix, whole.adjacency_matrix, rtol=0,
                               atol=1e-9 * scale)


@pytest.mark.gpu
@pytest.mark.parametrize("from_basis", [False, True])
def test_the_estimator_on_the_gpu_skips_the_whole_factor_after_an_early_explained_variable(
        monkeypatch, from_basis):
    from paralingam.adjacency import _adaptive_lasso

    monkeypatch.setattr(_adaptive_lasso, "WEIGHTS_FROM_BASIS", from_basis)
    X, hinted, whole, hinted_calls, whole_calls = hinted_then_whole(
        monkeypatch, lambda X: paralingam.DirectLiNGAM(backend="cuda").fit(X))
    assert hinted_calls == []  # the weights' leading block is small: the host's
    # every row from the device's basis (the hint's explained set, which the
    # patched first position does not hide): no factor at all; else the
    # whole factor where the first explained position is not known (with
    # the basis both runs take one route: the comparison below is the old
    # order's)
    assert whole_calls == ([] if from_basis else [400])
    assert hinted.causal_order_ == whole.causal_order_
    # (an exactly explained target's path compares rounding-sized residuals)
    exact = explained_targets(X, np.asarray(whole.causal_order_))
    np.testing.assert_allclose(hinted.adjacency_matrix_[~exact], whole.adjacency_matrix_[~exact],
                               rtol=0, atol=1e-8)
