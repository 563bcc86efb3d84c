"""Least squares of data of small rank wholly on the GPU (``paralingam/adjacency/_cuda_low_rank.py``).

The CPU tests drive the route on numpy stand-ins of its kernels and of
cuSOLVER (CI has no GPU) and compare its matrix with the host's route on the
same rescaled data; the GPU tests compare ``fit`` with the route and without
it, and the placing kernel's bits with the host's scaling.
"""

import warnings

import numpy as np
import pytest

import paralingam
from paralingam import _preparation
from paralingam.adjacency import _cuda_low_rank, _cuda_min_norm, _least_squares
from paralingam.adjacency import AdjacencyWarning
from paralingam.adjacency._common import _scaled_back

from test_cuda_min_norm import fake_route  # noqa: F401
from test_cuda_qr import FakeCopy, fake_gpu, needs_cupy  # noqa: F401
from test_rank_deficient import rank_deficient


def hinted_case(p, n, explained, seed, spread=0):
    """Rank-deficient data with the CPU search's order and explained variables.

    Returns ``(X, order, explained, exponents, Xs)``: ``Xs`` the columns
    rescaled by ``2**-exponents`` (the search's copy), ``spread``: columns
    multiplied by powers of ten up to ``10**spread`` first.
    """
    X = rank_deficient(p, n, explained, seed)
    if spread:
        X = X * 10.0 ** np.random.default_rng(seed).integers(-spread, spread + 1, p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        res = paralingam.fit(X, backend="cpu", on_collinear="ignore")
    exponents = _preparation.column_exponents(X)
    Xs = np.ldexp(X, -exponents)
    return X, np.asarray(res.causal_order), list(res.stats["explained"]), exponents, Xs


def host_matrix(Xs, order, exponents):
    """The host route's least-squares matrix on the data's scale."""
    return _scaled_back(_least_squares._ols_adjacency(Xs, order), exponents, None)


def on_stand_ins(drv, Xs, order, explained, exponents):
    copy = FakeCopy(drv.device, Xs, ld=Xs.shape[0] + 3)
    del drv.device.allocated[copy.ptr]  # (the search's buffer, not the route's to free)
    return _cuda_low_rank.ols_of_copy(copy, order, explained, exponents)


@pytest.mark.parametrize("p, n, explained, seed, spread", [(40, 500, 30, 31, 0),
                                                           (50, 400, 20, 32, 12)])
def test_the_route_on_stand_ins_gives_the_host_routes_matrix(fake_route, p, n, explained, seed,
                                                             spread):
    drv, cusolver, kernels = fake_route
    X, order, hint, exponents, Xs = hinted_case(p, n, explained, seed, spread)
    assert len(hint) == explained
    B = on_stand_ins(drv, Xs, order, hint, exponents)
    assert B is not None, "the route declined"
    host = host_matrix(Xs, order, exponents)
    assert not np.array_equal(exponents, np.zeros(p)) and np.abs(host).max() > 0
    unscaled = [np.ldexp(A, exponents[None, :] - exponents[:, None]) for A in (B, host)]
    np.testing.assert_allclose(unscaled[0], unscaled[1], rtol=0,
                               atol=1e-9 * np.abs(unscaled[1]).max())
    position = np.empty(p, dtype=int)
    position[order] = np.arange(p)
    assert not B[position[:, None] <= position[None, :]].any()  # nothing on or after a target
    m = p - explained
    assert cusolver.calls[0] == (n, m, n)  # the basis's QR: n x m, not n x p
    assert ("dormqr", n, p, m) in cusolver.calls
    assert sorted(drv.device.freed) == sorted(drv.device.allocated)


def test_every_cusolver_call_of_the_route_is_fenced_by_synchronisations(fake_route):
    drv, cusolver, kernels = fake_route
    X, order, hint, exponents, Xs = hinted_case(40, 500, 30, 33)
    assert on_stand_ins(drv, Xs, order, hint, exponents) is not None
    log = drv.device.log
    calls = [i for i, entry in enumerate(log) if entry != "synchronize"]
    assert [log[i] for i in calls] == ["dgeqrf", "dormqr"]
    assert all(log[i - 1] == log[i + 1] == "synchronize" for i in calls)


def test_the_route_declines_where_it_cannot_hold(fake_route, monkeypatch):
    drv, cusolver, kernels = fake_route
    X, order, hint, exponents, Xs = hinted_case(40, 500, 30, 34)
    position = {v: k for k, v in enumerate(order)}
    first = min(position[v] for v in hint)
    cases = {
        # a hint that misses an explained variable: the check of its residual fails
        "a hint short of one": (hint[1:], None),
        # a hint that calls an independent variable explained
        "a hint with one more": (hint + [int(order[first - 1])] if first > 1 else None, None),
        "the root explained": ([int(order[0])] + hint, None),
        "no explained variable": ([], None),
        "a basis over the limit": (hint, ("MAX_BASIS", 5)),
        "too few variables": (hint, ("OLS_MIN_FEATURES", 41)),
        "switched off": (hint, ("ENABLED", False)),
        "too little memory": (hint, ("SLACK_BYTES", 1 << 50)),
    }
    for what, (given, setting) in cases.items():
        if given is None:
            continue
        with monkeypatch.context() as m:
            if setting is not None:
                module = _cuda_low_rank if hasattr(_cuda_low_rank, setting[0]) else _cuda_min_norm
                m.setattr(module, *setting)
            assert on_stand_ins(drv, Xs, order, given, exponents) is None, what
    assert sorted(drv.device.freed) == sorted(drv.device.allocated)


def test_between_the_two_thresholds_fit_takes_the_route_and_the_lasso_weights_do_not(
        fake_route, monkeypatch):
    # OLS_MIN_FEATURES <= p < MIN_FEATURES: fit's least squares run here, the
    # adaptive lasso's weights (whose paths move with the rows' rounding) and
    # the choice of the whole QR ahead (applies) keep the host's route
    drv, cusolver, kernels = fake_route
    monkeypatch.setattr(_cuda_low_rank, "OLS_MIN_FEATURES", 30)
    monkeypatch.setattr(_cuda_min_norm, "MIN_FEATURES", 41)
    X, order, hint, exponents, Xs = hinted_case(40, 500, 30, 39)
    assert on_stand_ins(drv, Xs, order, hint, exponents) is not None
    std = Xs[:, order].std(axis=0)
    assert weights_on_stand_ins(drv, Xs, order, hint, std, 0) is None
    assert not _cuda_low_rank.applies(FakeCopy(drv.device, Xs, ld=Xs.shape[0]), order, hint)
    monkeypatch.setattr(_cuda_min_norm, "MIN_FEATURES", 40)
    assert weights_on_stand_ins(drv, Xs, order, hint, std, 0) is not None


def test_a_coefficient_past_float64_after_the_scaling_declines(fake_route):
    # the host's route then raises its error naming the two columns
    drv, cusolver, kernels = fake_route
    X, order, hint, exponents, Xs = hinted_case(40, 500, 30, 35)
    wide = exponents.copy()
    wide[order[-1]] += 2000  # (a column 2**2000 times larger than its data)
    assert on_stand_ins(drv, Xs, order, hint, wide) is None
    with pytest.raises(ValueError, match="exceeds float64"):
        host_matrix(Xs, order, wide)


def test_a_failed_pivot_or_cusolver_call_declines_and_frees_the_buffers(fake_route, monkeypatch):
    drv, cusolver, kernels = fake_route
    X, order, hint, exponents, Xs = hinted_case(40, 500, 30, 36)
    failing = kernels.min_norm_rows

    def fail(grid, block, C, ldc, p, first, before, width, coef, status, shared_size=0):
        failing(grid, block, C, ldc, p, first, before, width, coef, status, shared_size)
        drv.device.memory[int(status) - drv.device.BASE] = 1

    with monkeypatch.context() as m:
        m.setattr(kernels, "min_norm_rows", fail)
        assert on_stand_ins(drv, Xs, order, hint, exponents) is None

    def raises(*args):
        raise RuntimeError("cuSOLVER failed")  # (the stand-in driver's drv.Error)

    with monkeypatch.context() as m:
        m.setattr(cusolver, "dormqr", raises)
        assert on_stand_ins(drv, Xs, order, hint, exponents) is None
    assert sorted(drv.device.freed) == sorted(drv.device.allocated)


def standardised(Xs, order):
    """The adaptive lasso's standardised variables in causal order (columns centred, over
    sqrt(n), divided by their population std) and that std."""
    n = Xs.shape[0]
    Xc = Xs[:, order] - Xs[:, order].mean(axis=0)
    std = np.sqrt(np.einsum("ij,ij->j", Xc, Xc) / n)
    return Xc / np.sqrt(n) / std, std


def weights_on_stand_ins(drv, Xs, order, explained, std, rows_from):
    copy = FakeCopy(drv.device, Xs, ld=Xs.shape[0] + 5)
    del drv.device.allocated[copy.ptr]  # (the search's buffer, not the route's to free)
    out = np.full((len(order) - rows_from, len(order)), np.nan)
    got = _cuda_low_rank.weights_of_copy(copy, order, explained, std, rows_from, out)
    assert got is None or got is out
    return got


@pytest.mark.parametrize("p, n, explained, seed, spread", [(40, 500, 30, 37, 0),
                                                           (50, 400, 20, 38, 8)])
def test_the_lasso_weights_on_stand_ins_are_the_hosts_minimum_norm_rows(fake_route, p, n,
                                                                        explained, seed, spread):
    from paralingam.adjacency._min_norm import _min_norm_rows

    drv, cusolver, kernels = fake_route
    X, order, hint, exponents, Xs = hinted_case(p, n, explained, seed, spread)
    V, std = standardised(Xs, order)
    position = {v: k for k, v in enumerate(order)}
    first = min(position[v] for v in hint)
    # (the host's rows take the variables before their first as independent)
    host_rows = _min_norm_rows(V, first)
    for rows_from in (first, first + 1):
        got = weights_on_stand_ins(drv, Xs, order, hint, std, rows_from)
        assert got is not None, "the route declined"
        host = host_rows[rows_from - first:]
        assert np.abs(host).max() > 0
        np.testing.assert_allclose(got, host, rtol=0, atol=1e-9 * np.abs(host).max())
        # (not the rows of the columns before the division: those differ)
        unscaled = _min_norm_rows(V * std, first)[rows_from - first:]
        assert not np.allclose(got, unscaled, rtol=0, atol=1e-6 * np.abs(host).max())
    m = p - explained
    assert cusolver.calls[0] == (n, m, n)  # the basis's QR: n x m, not n x p
    assert sorted(drv.device.freed) == sorted(drv.device.allocated)


def test_the_lasso_weights_decline_where_the_hint_or_the_device_fail(fake_route, monkeypatch):
    drv, cusolver, kernels = fake_route
    X, order, hint, exponents, Xs = hinted_case(40, 500, 30, 39)
    V, std = standardised(Xs, order)
    position = {v: k for k, v in enumerate(order)}
    first = min(position[v] for v in hint)
    assert weights_on_stand_ins(drv, Xs, order, hint[1:], std, first) is None
    assert weights_on_stand_ins(drv, Xs, order, [], std, first) is None
    with monkeypatch.context() as m:
        m.setattr(_cuda_low_rank, "ENABLED", False)
        assert weights_on_stand_ins(drv, Xs, order, hint, std, first) is None
    bad = std.copy()
    bad[-1] = 0.0  # (a division by zero: not finite, the host's route)
    assert weights_on_stand_ins(drv, Xs, order, hint, bad, first) is None
    with pytest.raises(ValueError, match="out must be a C-ordered"):
        _cuda_low_rank.weights_of_copy(FakeCopy(drv.device, Xs, ld=Xs.shape[0]), order, hint,
                                       std, first, np.empty((3, 3)))
    assert _cuda_low_rank.applies(FakeCopy(drv.device, Xs, ld=Xs.shape[0]), order, hint)
    assert not _cuda_low_rank.applies(None, order, hint)
    assert not _cuda_low_rank.applies(FakeCopy(drv.device, Xs, ld=Xs.shape[0]), order, [])


def lasso_weights_case(seed):
    """A hinted rank-deficient case (p=40, n=500, 30 explained) as the adaptive lasso's weights
    take it: ``(Xs, order, hint, std, gram, factor)``, ``gram`` the standardised Gram matrix in
    causal order and ``factor`` the host's ``_ols_on_predecessors`` of it."""
    from paralingam.adjacency import _common

    X, order, hint, exponents, Xs = hinted_case(40, 500, 30, seed)
    _, S = _common._scatter(Xs)
    std = np.sqrt(np.diag(S) / Xs.shape[0])
    gram = (S / np.outer(std, std))[np.ix_(order, order)]
    return Xs, order, hint, std, gram, _least_squares._ols_on_predecessors(gram)


def test_the_adaptive_lassos_weights_take_the_route_in_place(fake_route, monkeypatch):
    # _min_norm_weights on the GPU with the search's copy and hint: the route's
    # rows land in the weights themselves, as the host's route computes them
    from paralingam import _gpu
    from paralingam.adjacency import _adaptive_lasso

    drv, cusolver, kernels = fake_route
    monkeypatch.setattr(_gpu, "unavailable_reason", lambda: None)
    Xs, order, hint, std, gram, (coef, rss, solved) = lasso_weights_case(40)
    n = Xs.shape[0]
    m = int(np.argmin(solved))
    host = _adaptive_lasso._min_norm_weights(Xs, order, std, gram, coef.copy(), rss.copy(),
                                             solved)
    taken = []
    route = _cuda_low_rank.weights_of_copy
    monkeypatch.setattr(_cuda_low_rank, "weights_of_copy",
                        lambda *args: taken.append(route(*args)) or taken[-1])
    copy = FakeCopy(drv.device, Xs, ld=n + 2)
    got = _adaptive_lasso._min_norm_weights(Xs, order, std, gram, coef, rss, solved, on_gpu=True,
                                            device_copy=copy, explained=hint)
    assert len(taken) == 1 and taken[0] is not None
    assert got[0] is coef and np.shares_memory(taken[0], coef)  # (in place)
    assert got[2].all() and host[2].all()
    np.testing.assert_allclose(got[0][m:], host[0][m:], rtol=0,
                               atol=1e-9 * np.abs(host[0][m:]).max())
    np.testing.assert_allclose(got[1], host[1], rtol=1e-7, atol=1e-9 * np.abs(host[1]).max())


def test_the_adaptive_lassos_weights_come_wholly_from_the_basis(fake_route, monkeypatch):
    # _basis_weights: every row from the route (those before the first
    # explained variable too), equal to the host factor's and minimum-norm
    # rows to rounding, with rss = yy - g.b; None where switched off, without
    # a hint or where the route declines
    from paralingam import _gpu
    from paralingam.adjacency import _adaptive_lasso

    drv, cusolver, kernels = fake_route
    monkeypatch.setattr(_gpu, "unavailable_reason", lambda: None)
    Xs, order, hint, std, gram, (coef, rss, solved) = lasso_weights_case(42)
    n, p = Xs.shape
    host = _adaptive_lasso._min_norm_weights(Xs, order, std, gram, coef, rss, solved)
    copy = FakeCopy(drv.device, Xs, ld=n + 2)
    got = _adaptive_lasso._basis_weights(copy, order, hint, std, gram)
    assert got is not None and got[2].all() and host[2].all()
    m = int(np.argmin(solved))
    first = min(int(np.flatnonzero(order == v)[0]) for v in hint)
    assert 1 < first < m < p  # the host's factor's rows before m, minimum-norm ones after
    np.testing.assert_allclose(got[0], host[0], rtol=0, atol=1e-9 * np.abs(host[0]).max())
    # (the explained variable's own rss is rounding-sized either way)
    np.testing.assert_allclose(got[1][:first], host[1][:first], rtol=1e-9)
    np.testing.assert_allclose(got[1], host[1], rtol=1e-7, atol=1e-9 * np.abs(host[1]).max())
    assert _adaptive_lasso._basis_weights(copy, order, [], std, gram) is None
    assert _adaptive_lasso._basis_weights(None, order, hint, std, gram) is None
    monkeypatch.setattr(_adaptive_lasso, "WEIGHTS_FROM_BASIS", False)
    assert _adaptive_lasso._basis_weights(copy, order, hint, std, gram) is None
    monkeypatch.setattr(_adaptive_lasso, "WEIGHTS_FROM_BASIS", True)
    monkeypatch.setattr(_cuda_low_rank, "weights_of_copy", lambda *args: None)
    assert _adaptive_lasso._basis_weights(copy, order, hint, std, gram) is None


def test_a_non_finite_weight_after_the_download_declines(fake_route, monkeypatch):
    drv, cusolver, kernels = fake_route
    X, order, hint, exponents, Xs = hinted_case(40, 500, 30, 41)
    V, std = standardised(Xs, order)
    first = min(int(np.flatnonzero(order == v)[0]) for v in hint)
    solve = kernels.min_norm_rows

    def overflowing(grid, block, C, ldc, p, first_row, before, width, coef, status, shared_size=0):
        solve(grid, block, C, ldc, p, first_row, before, width, coef, status, shared_size)
        drv.device.doubles(int(coef), int(p) * (int(p) - int(first_row)))[-1] = np.inf

    monkeypatch.setattr(kernels, "min_norm_rows", overflowing)
    assert weights_on_stand_ins(drv, Xs, order, hint, std, first) is None
    assert sorted(drv.device.freed) == sorted(drv.device.allocated)


# --- on the GPU ------------------------------------------------------------------------------------

def fits_with_and_without(monkeypatch, X, **kw):
    """``fit(X)`` with the route and without it; the route's results (not None) per call."""
    given = []
    route = _cuda_low_rank.ols_of_copy

    def spy(*args):
        given.append(route(*args))
        return given[-1]

    monkeypatch.setattr(_cuda_low_rank, "ols_of_copy", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        warnings.simplefilter("error", RuntimeWarning)
        device = paralingam.fit(X, backend="cuda", on_collinear="ignore", **kw)
        monkeypatch.setattr(_cuda_low_rank, "ENABLED", False)
        host = paralingam.fit(X, backend="cuda", on_collinear="ignore", **kw)
    return device, host, [g is not None for g in given]


@pytest.mark.gpu
@needs_cupy
@pytest.mark.parametrize("p, n, explained, seed, spread, dtype", [
    (400, 4096, 340, 8, 0, np.float64), (300, 2048, 250, 41, 0, np.float64),
    (1000, 8192, 924, 42, 0, np.float64), (300, 4096, 240, 43, 30, np.float64),
    (260, 3000, 200, 44, 0, np.float32), (80, 4000, 56, 45, 0, np.float64),
    (64, 3000, 40, 46, 20, np.float64), (20, 3000, 14, 47, 0, np.float64)])
def test_fit_takes_the_route_and_equals_the_host_route(monkeypatch, p, n, explained, seed, spread,
                                                       dtype):
    X = rank_deficient(p, n, explained, seed)
    if spread:
        X = X * 10.0 ** np.random.default_rng(seed).integers(-spread, spread + 1, p)
    X = X.astype(dtype)
    device, host, taken = fits_with_and_without(monkeypatch, X)
    assert taken == [True, False]  # (switched off, the route declines at once)
    assert device.causal_order == host.causal_order
    B, B_host = device.adjacency_matrix, host.adjacency_matrix
    # on the rescaled columns' scale, where both routes compute (in the
    # spread case a coefficient at rounding level there is multiplied by up
    # to 2**200 on the data's scale)
    e = _preparation.column_exponents(X.astype(np.float64))
    unscaled = [np.ldexp(A, e[None, :] - e[:, None]) for A in (B, B_host)]
    np.testing.assert_allclose(unscaled[0], unscaled[1], rtol=0,
                               atol=1e-9 * np.abs(unscaled[1]).max())
    position = np.empty(p, dtype=int)
    position[device.causal_order] = np.arange(p)
    assert not B[position[:, None] <= position[None, :]].any()


@pytest.mark.gpu
@needs_cupy
def test_the_routes_buffers_return_to_a_pool_that_keeps_small_calls_only(monkeypatch):
    # a second fit's step takes its buffers from the pool (none allocated),
    # with the same bits; past POOL_KEPT_BYTES the held blocks are released
    # (a search of a new shape clears the caches, the pool with them: the
    # pool is looked up after each fit)
    X = rank_deficient(300, 2048, 250, 41)
    matrices, held = [], []
    for kept in (_cuda_min_norm.POOL_KEPT_BYTES, _cuda_min_norm.POOL_KEPT_BYTES, 0):
        monkeypatch.setattr(_cuda_min_norm, "POOL_KEPT_BYTES", kept)
        device, _, taken = fits_with_and_without(monkeypatch, X)
        monkeypatch.setattr(_cuda_low_rank, "ENABLED", True)
        assert taken[0]
        matrices.append(device.adjacency_matrix.tobytes())
        pool = _cuda_min_norm._pool()
        held.append((pool.held_blocks, pool.active_blocks))
    assert held[0][0] > 0 and held[1] == held[0] and held[0][1] == 0
    assert held[2] == (0, 0)
    assert matrices[0] == matrices[1] == matrices[2]


@pytest.mark.gpu
@needs_cupy
def test_fit_of_the_ecoli_fluxes_takes_the_route_and_equals_the_host_route(monkeypatch, ecoli):
    # real fluxes of rank 24 in 87 columns (over OLS_MIN_FEATURES), with
    # scales from 0.04 to 286 and near copies
    X = ecoli[0]
    device, host, taken = fits_with_and_without(monkeypatch, X)
    assert taken == [True, False]
    assert device.causal_order == host.causal_order
    e = _preparation.column_exponents(X)
    unscaled = [np.ldexp(A, e[None, :] - e[:, None])
                for A in (device.adjacency_matrix, host.adjacency_matrix)]
    np.testing.assert_allclose(unscaled[0], unscaled[1], rtol=0,
                               atol=1e-9 * np.abs(unscaled[1]).max())


def estimator_on_gpu(X):
    """``DirectLiNGAM(backend="cuda").fit(X)``, failing on a RuntimeWarning (a route that fell
    back to the host)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        warnings.simplefilter("ignore", AdjacencyWarning)
        warnings.simplefilter("error", RuntimeWarning)
        return paralingam.DirectLiNGAM(backend="cuda").fit(X)


def assert_same_off_exact_targets(X, model, reference, at_least):
    """The two estimators' orders equal, and their matrices to 1e-8 of the largest coefficient
    on the rows of targets that are not exactly explained (at least ``at_least`` of them): an
    exactly explained target's path compares rounding-sized residuals."""
    from test_rank_deficient import explained_targets

    assert model.causal_order_ == reference.causal_order_
    exact = explained_targets(X.astype(np.float64), np.asarray(reference.causal_order_))
    assert (~exact).sum() >= at_least
    B, B_ref = model.adjacency_matrix_[~exact], reference.adjacency_matrix_[~exact]
    assert np.abs(B_ref).max() > 0
    np.testing.assert_allclose(B, B_ref, rtol=0, atol=1e-8 * max(np.abs(B_ref).max(), 1.0))


@pytest.mark.gpu
@needs_cupy
@pytest.mark.parametrize("p, n, explained, seed, spread, dtype", [
    (300, 2048, 250, 51, 0, np.float64), (400, 4096, 340, 52, 0, np.float64),
    (300, 4096, 240, 53, 30, np.float64), (260, 3000, 200, 54, 0, np.float32)])
def test_the_estimator_takes_the_lasso_weights_route_and_equals_the_whole_qrs(
        monkeypatch, p, n, explained, seed, spread, dtype):
    from paralingam.adjacency import _cuda_qr

    X = rank_deficient(p, n, explained, seed)
    if spread:
        X = X * 10.0 ** np.random.default_rng(seed).integers(-spread, spread + 1, p)
    X = X.astype(dtype)
    given, started = [], []
    route, ahead = _cuda_low_rank.weights_of_copy, _cuda_qr.start_factor_of_copy
    monkeypatch.setattr(_cuda_low_rank, "weights_of_copy",
                        lambda *args: given.append(route(*args)) or given[-1])
    monkeypatch.setattr(_cuda_qr, "start_factor_of_copy",
                        lambda *args: started.append(1) or ahead(*args))
    device = estimator_on_gpu(X)
    assert not started  # (no whole QR ahead where the basis's gives the weights)
    monkeypatch.setattr(_cuda_low_rank, "ENABLED", False)
    host = estimator_on_gpu(X)
    assert started  # (switched off: the whole QR, started ahead)
    assert [g is not None for g in given] == [True, False]
    assert_same_off_exact_targets(X, device, host, p - explained)


@pytest.mark.gpu
@needs_cupy
@pytest.mark.parametrize("p, n, explained, seed", [(300, 2048, 277, 2), (400, 4096, 340, 52)])
def test_the_estimators_weights_wholly_from_the_basis_equal_the_host_factors(
        monkeypatch, p, n, explained, seed):
    # The rows before the first explained variable from the basis (no host
    # factor) against the host's factor there, the basis's rows after it
    from paralingam.adjacency import _adaptive_lasso

    X = rank_deficient(p, n, explained, seed)
    factored = []
    hinted = _adaptive_lasso._hinted_factor
    monkeypatch.setattr(_adaptive_lasso, "_hinted_factor",
                        lambda *args: factored.append(1) or hinted(*args))
    basis = estimator_on_gpu(X)
    assert not factored
    monkeypatch.setattr(_adaptive_lasso, "WEIGHTS_FROM_BASIS", False)
    factor = estimator_on_gpu(X)
    assert factored
    assert_same_off_exact_targets(X, basis, factor, p - explained)


@pytest.mark.gpu
@needs_cupy
def test_a_basis_over_the_limit_prior_knowledge_or_the_lasso_keep_the_host_route(monkeypatch):
    X = rank_deficient(300, 4096, 150, 45)  # basis 150
    device, host, taken = fits_with_and_without(monkeypatch, X)
    assert taken == [False, False]
    np.testing.assert_array_equal(device.adjacency_matrix, host.adjacency_matrix)
    X = rank_deficient(300, 4096, 250, 46)
    monkeypatch.setattr(_cuda_low_rank, "ENABLED", True)
    called = []
    route = _cuda_low_rank.ols_of_copy
    monkeypatch.setattr(_cuda_low_rank, "ols_of_copy",
                        lambda *args: called.append(1) or route(*args))
    pk = -np.ones((300, 300))
    pk[0, 1] = 0  # (prior knowledge that removes a predictor: the host's route applies it)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        paralingam.DirectLiNGAM(backend="cuda", adjacency="ols", prior_knowledge=pk).fit(X)
        paralingam.DirectLiNGAM(backend="cuda").fit(X)  # (the adaptive lasso)
        assert not called
        paralingam.DirectLiNGAM(backend="cuda", adjacency="ols").fit(X)
    assert called == [1]


@pytest.mark.gpu
@needs_cupy
def test_a_hint_the_data_contradict_declines_on_the_gpu():
    from paralingam.search import _cuda

    X = rank_deficient(300, 4096, 250, 47)
    exponents = _preparation.column_exponents(X)
    Xs = np.ldexp(X, -exponents)
    kw = dict(threshold=True, gamma0=1e-4, c=2.0, dtype="float32", collinear_tol=1e-10,
              explained_tol=1e-10, drift_tol=1e-8, keep_copy=True)
    order, explained, per_it, _ = _cuda.search(Xs, times={}, **kw)
    copy = per_it["device_copy"]
    explained = list(explained)
    assert len(explained) == 250
    B = _cuda_low_rank.ols_of_copy(copy, order, explained, exponents)
    host = host_matrix(Xs, np.asarray(order), exponents)
    np.testing.assert_allclose(B, host, rtol=0, atol=1e-9 * np.abs(host).max())
    assert _cuda_low_rank.ols_of_copy(copy, order, explained[1:], exponents) is None


@pytest.mark.gpu
@pytest.mark.parametrize("low, high", [(-40, 40), (-1070, 1000)])
def test_the_placing_kernel_scales_back_with_the_hosts_bits(low, high):
    import pycuda.driver as drv

    from paralingam.adjacency._common import _placed

    rng = np.random.default_rng(48)
    p = 300
    order = rng.permutation(p).astype(np.int32)
    coef = np.tril(rng.standard_normal((p, p)) * 10.0 ** rng.integers(-5, 5, (p, p)), -1)
    coef[5, :3] = [5e-324, -2.5e-308, 3.0]  # (subnormals, and rounding into them below)
    exponents = rng.integers(low, high, p).astype(np.int32)
    exponents[order[5]] = -60
    dev = _cuda_min_norm.DeviceWork(drv)
    try:
        d_coef, d_out = dev.upload(coef), dev.alloc(8 * p * p)
        d_status = dev.upload(np.zeros(1, dtype=np.int32))
        dev.launch("placed_scaled", p, d_coef, np.int32(p), dev.upload(order),
                   dev.upload(exponents), d_out, d_status)
        out, status = np.empty((p, p)), np.empty(1, dtype=np.int32)
        drv.memcpy_dtoh(out, d_out)
        drv.memcpy_dtoh(status, d_status)
    finally:
        dev.free()
    with np.errstate(over="ignore"):
        expected = np.ldexp(_placed(coef, order, p),
                            exponents[:, None] - exponents[None, :])
    finite = np.isfinite(expected).all()
    assert finite == (high < 100)  # (the narrow exponents: no overflow)
    assert bool(status[0]) == (not finite)
    both = np.isfinite(expected)
    assert np.array_equal(out[both].view(np.int64), expected[both].view(np.int64))
    if finite:
        np.testing.assert_array_equal(out, _scaled_back(_placed(coef, order, p), exponents, None))


def test_a_failed_basis_route_warns_once_and_the_host_computes_the_weights(fake_route,
                                                                           monkeypatch):
    # the route raises inside _basis_weights: one RuntimeWarning, and the
    # weights' fallback (the minimum-norm rows after the host's factor) does
    # not ask the same route again; the matrix is the CPU backend's
    from paralingam import _gpu
    from paralingam.adjacency import _adaptive_lasso

    drv, cusolver, kernels = fake_route
    monkeypatch.setattr(_gpu, "unavailable_reason", lambda: None)
    Xs, order, hint, std, gram, _ = lasso_weights_case(43)
    n, p = Xs.shape
    copy = FakeCopy(drv.device, Xs, ld=n + 2)
    calls = []

    def broken(*args):
        calls.append(args)
        raise ValueError("a stand-in fault")

    monkeypatch.setattr(_cuda_low_rank, "weights_of_copy", broken)
    with pytest.warns(RuntimeWarning, match="a stand-in fault"):
        got = _adaptive_lasso._basis_weights(copy, order, hint, std, gram)
    assert got is _adaptive_lasso._ROUTE_FAILED
    calls.clear()
    # the LARS paths on the host (the stand-in GPU does not run them)
    monkeypatch.setattr(_adaptive_lasso, "CUDA_LASSO_MIN_FEATURES", 2)
    monkeypatch.setattr(_adaptive_lasso, "_adaptive_lasso_rows_cuda",
                        lambda gram, scatter, targets, given, *rest:
                        (np.zeros((p, p)), np.zeros(len(targets), dtype=bool)))
    first = min(int(np.flatnonzero(order == v)[0]) for v in hint)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _adaptive_lasso._adaptive_lasso_adjacency(
            Xs, order, backend="cuda", first_explained=first, device_copy=copy, explained=hint)
        want = _adaptive_lasso._adaptive_lasso_adjacency(Xs, order, backend="cpu")
    failed = [w for w in caught if "the adaptive lasso's weights on the GPU failed" in
              str(w.message)]
    assert len(calls) == 1 and len(failed) == 1, [str(w.message) for w in caught]
    assert "a stand-in fault" in str(failed[0].message)
    from test_rank_deficient import explained_targets

    exact = explained_targets(Xs, np.asarray(order))
    np.testing.assert_allclose(got[~exact], want[~exact], rtol=0, atol=1e-8)
