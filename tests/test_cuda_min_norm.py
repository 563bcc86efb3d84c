"""Minimum-norm rows of data of small rank on the GPU (``paralingam/adjacency/_cuda_min_norm.py``).

Each GPU test compares the device's rows with the host's
(``_min_norm._min_norm_rows`` on the host's factor of the same data), and
checks that the route declines, leaving the factor to the host, where it
must. The CPU tests check the route's choices on the host.
"""

import warnings

import numpy as np
import pytest

import paralingam
from paralingam.adjacency import _cuda_min_norm, _cuda_qr, _least_squares, _min_norm
from paralingam.adjacency._common import _column_means

from test_cuda_qr import assert_same_gram, needs_cupy
from test_rank_deficient import rank_deficient


def leading_independent(V):
    """The variables before the first whose diagonal entry of ``V`` fails the basis test."""
    joins = _min_norm._joins(np.diag(V) ** 2, np.einsum("ij,ij->j", V, V))
    return int(np.argmin(joins)) if not joins.all() else V.shape[1]


def gpu_route(X, order, first):
    """``(R, rows)`` of the data's QR on the GPU with the rows from ``first`` on."""
    rows_of = _least_squares._centred_rows(X, order, _column_means(X))
    return _cuda_qr.centred_triangular_factor(X.shape, rows_of, 1, first)


def test_the_guess_takes_the_callers_leading_variables_and_the_diagonal_test():
    diag2 = np.array([0.0, 1.0, 1e-12, 0.5, np.nan])
    sq_norm = np.ones(5)
    assert _cuda_min_norm.basis_guess(diag2, sq_norm, 1).tolist() == [True, True, False, True,
                                                                       False]


def test_fewer_variables_than_the_routes_least_leave_the_rows_to_the_host():
    # (before anything reaches the device: no driver, no cuSOLVER)
    p = _cuda_min_norm.MIN_FEATURES - 1
    assert _cuda_min_norm.rows_on_device(None, None, None, None, 1000, p, 10) is None


@pytest.fixture
def any_size(monkeypatch):
    """The route for data of any number of variables (the tests' small cases)."""
    monkeypatch.setattr(_cuda_min_norm, "MIN_FEATURES", 1)


def test_shared_memory_of_the_largest_basis_fits_an_h100_block():
    # 227 KiB: the most dynamic shared memory a block of an H100 may ask for
    assert _cuda_min_norm.shared_bytes(_cuda_min_norm.MAX_BASIS) <= 227 << 10
    assert _cuda_min_norm.shared_bytes(76) > _cuda_min_norm.DEFAULT_SHARED  # (asks for more)


@pytest.mark.gpu
@needs_cupy
@pytest.mark.parametrize("p, n, explained, seed", [(300, 4096, 240, 1), (120, 3000, 100, 2),
                                                   (300, 4096, 200, 3), (200, 4096, 72, 4)])
def test_gpu_rows_equal_the_hosts(any_size, p, n, explained, seed):
    X = rank_deficient(p, n, explained, seed)
    order = np.random.default_rng(seed).permutation(p)
    V = _least_squares._centred_triangular_factor(X, order)
    for first in (leading_independent(V), 1):
        R, rows = gpu_route(X, order, first)
        assert R is None, "the route declined"
        host = _min_norm._min_norm_rows(V, first)
        np.testing.assert_allclose(rows, host, rtol=0, atol=1e-9 * np.abs(host).max())


@pytest.mark.gpu
@needs_cupy
def test_gpu_rows_of_the_ecoli_fluxes_equal_the_hosts(any_size):
    from pathlib import Path

    with np.load(Path(__file__).parent / "data" / "ecoli_core_subset.npz") as f:
        X = np.ascontiguousarray(f["X"], dtype=np.float64)
    order = np.random.default_rng(5).permutation(X.shape[1])
    V = _least_squares._centred_triangular_factor(X, order)
    first = leading_independent(V)
    R, rows = gpu_route(X, order, first)
    assert R is None
    host = _min_norm._min_norm_rows(V, first)
    np.testing.assert_allclose(rows, host, rtol=0, atol=1e-9 * np.abs(host).max())


@pytest.mark.gpu
@needs_cupy
def test_a_basis_larger_than_the_limit_leaves_the_rows_to_the_host(any_size):
    X = rank_deficient(200, 4096, 71, 6)  # rank 129
    order = np.random.default_rng(6).permutation(200)
    V = _least_squares._centred_triangular_factor(X, order)
    R, rows = gpu_route(X, order, leading_independent(V))
    assert rows is None
    assert_same_gram(R, V)


@pytest.mark.gpu
@needs_cupy
def test_a_guess_the_residuals_contradict_leaves_the_rows_to_the_host(any_size, monkeypatch):
    X = rank_deficient(120, 3000, 100, 7)
    order = np.random.default_rng(7).permutation(120)
    V = _least_squares._centred_triangular_factor(X, order)
    first = leading_independent(V)
    guess = _cuda_min_norm.basis_guess

    def wrong(diag2, sq_norm, first):  # the first dependent variable taken into the basis
        joins = guess(diag2, sq_norm, first)
        joins[np.argmin(joins)] = True
        return joins

    monkeypatch.setattr(_cuda_min_norm, "basis_guess", wrong)
    R, rows = gpu_route(X, order, first)
    assert rows is None
    assert_same_gram(R, V)


@pytest.mark.gpu
@needs_cupy
def test_fit_takes_the_gpu_rows_and_equals_the_host_rows(monkeypatch):
    X = rank_deficient(400, 4096, 340, 8)  # rank 60
    taken, results = [], []
    on_device = _cuda_min_norm.rows_on_device

    def spy(*args):
        rows = on_device(*args)
        taken.append(rows is not None)
        return rows

    monkeypatch.setattr(_cuda_min_norm, "rows_on_device", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        warnings.simplefilter("error", RuntimeWarning)
        results.append(paralingam.fit(X, backend="cuda"))
        assert taken == [True]
        monkeypatch.setattr(_cuda_min_norm, "rows_on_device", lambda *args: None)
        results.append(paralingam.fit(X, backend="cuda"))
    gpu, host = results
    assert gpu.causal_order == host.causal_order
    scale = np.abs(host.adjacency_matrix).max()
    np.testing.assert_allclose(gpu.adjacency_matrix, host.adjacency_matrix, rtol=0,
                               atol=1e-9 * scale)


@pytest.mark.gpu
@needs_cupy
def test_gpu_rows_of_divided_columns_equal_the_hosts():
    X = rank_deficient(300, 4096, 240, 9)
    rng = np.random.default_rng(9)
    order = rng.permutation(300)
    divisor = rng.uniform(0.1, 10.0, 300)
    V = _least_squares._centred_triangular_factor(X, order)
    first = leading_independent(V)
    rows_of = _least_squares._centred_rows(X, order, _column_means(X))
    R, rows = _cuda_qr.centred_triangular_factor(X.shape, rows_of, 1, first, divisor)
    assert R is None
    host = _min_norm._min_norm_rows(V / divisor, first)
    np.testing.assert_allclose(rows, host, rtol=0, atol=1e-9 * np.abs(host).max())


@pytest.mark.gpu
@needs_cupy
def test_the_estimators_weights_take_the_gpu_rows(monkeypatch):
    from test_rank_deficient import explained_targets

    X = rank_deficient(300, 4096, 250, 10)  # rank 50
    taken, models = [], []
    on_device = _cuda_min_norm.rows_on_device

    def spy(*args):
        rows = on_device(*args)
        taken.append(rows is not None)
        return rows

    monkeypatch.setattr(_cuda_min_norm, "rows_on_device", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        warnings.simplefilter("error", RuntimeWarning)
        models.append(paralingam.DirectLiNGAM(backend="cuda").fit(X))
        assert taken and all(taken)
        monkeypatch.setattr(_cuda_min_norm, "rows_on_device", lambda *args: None)
        models.append(paralingam.DirectLiNGAM(backend="cuda").fit(X))
    gpu, host = models
    assert gpu.causal_order_ == host.causal_order_
    exact = explained_targets(X, np.asarray(host.causal_order_))
    np.testing.assert_allclose(gpu.adjacency_matrix_[~exact], host.adjacency_matrix_[~exact],
                               rtol=0, atol=1e-8)
