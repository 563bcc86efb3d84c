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
from paralingam.adjacency import _cuda_low_rank, _cuda_min_norm, _cuda_qr, _least_squares, _min_norm
from paralingam.adjacency._common import _column_means

from test_cuda_qr import FakeCusolver, assert_same_gram, fake_gpu, needs_cupy  # noqa: F401
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


# --- the route on numpy stand-ins of its kernels and of cuSOLVER (CI has no GPU) ------------------

def _ints(device, ptr, count):
    start = int(ptr) - device.BASE
    return device.memory[start:start + 4 * count].view(np.int32)


class FakeKernels:
    """``upper_columns``, ``sums_of_squares`` and ``min_norm_rows`` of kernels/adjacency.cu in numpy."""

    def __init__(self, device):
        self.device, self.shared, self.launch_shared = device, [], []

    def kernels(self):
        def launcher(fn, attribute=False):
            ns = type("Kernel", (), {"prepared_call": staticmethod(fn)})()
            if attribute:
                ns.set_attribute = lambda attr, value: self.shared.append(value)
            return ns

        return {"upper_columns": launcher(self.upper_columns),
                "sums_of_squares": launcher(self.sums_of_squares),
                "min_norm_rows": launcher(self.min_norm_rows, attribute=True),
                "placed_scaled": launcher(self.placed_scaled),
                "divided_columns": launcher(self.divided_columns)}

    def divided_columns(self, grid, block, A, lda, n, divisor):
        p, lda, n = grid[0], int(lda), int(n)
        a = self.device.doubles(int(A), lda * p).reshape((lda, p), order="F")
        a[:n] /= self.device.doubles(int(divisor), p)

    def upper_columns(self, grid, block, A, lda, p, cols, divisor, out):
        ncols, lda, p = grid[0], int(lda), int(p)
        src = _ints(self.device, cols, ncols) if int(cols) else np.arange(ncols)
        width = int(src.max()) + 1
        a = self.device.doubles(int(A), lda * width).reshape((lda, width), order="F")
        o = self.device.doubles(int(out), p * ncols).reshape((p, ncols), order="F")
        o[:] = 0.0
        for j, c in enumerate(src):
            o[:c + 1, j] = a[:c + 1, c]
            if int(divisor):
                o[:c + 1, j] /= self.device.doubles(int(divisor), width)[c]

    def sums_of_squares(self, grid, block, A, lda, lo, hi, out):
        p, lda = grid[0], int(lda)
        a = self.device.doubles(int(A), lda * p).reshape((lda, p), order="F")
        lo, hi = _ints(self.device, lo, p), _ints(self.device, hi, p)
        self.device.doubles(int(out), p)[:] = [np.sum(a[lo[j]:hi[j], j] ** 2) for j in range(p)]

    def min_norm_rows(self, grid, block, C, ldc, p, first, before, width, coef, status,
                      shared_size=0):
        self.launch_shared.append(shared_size)
        ldc, p, first = int(ldc), int(p), int(first)
        c = self.device.doubles(int(C), ldc * p).reshape((ldc, p), order="F")
        before, width = _ints(self.device, before, p), _ints(self.device, width, p)
        rows = self.device.doubles(int(coef), (p - first) * p).reshape((p - first, p))
        flags = _ints(self.device, status, p - first)
        for k in range(first, p):
            m, row = before[k], rows[k - first]
            row[:] = 0.0
            if m == 0:
                continue
            Ck = np.zeros((m, k))
            for j in range(k):
                Ck[:width[j], j] = c[:width[j], j]
            try:
                L = np.linalg.cholesky(Ck @ Ck.T)
            except np.linalg.LinAlgError:
                flags[k - first] = 1
                continue
            y = np.linalg.solve(L.T, np.linalg.solve(L, c[:m, k]))
            row[:k] = Ck.T @ y

    def placed_scaled(self, grid, block, coef, p, order, exponents, out, status):
        p = int(p)
        B = np.tril(self.device.doubles(int(coef), p * p).reshape((p, p)), -1)
        order = _ints(self.device, order, p)
        e = _ints(self.device, exponents, p)
        with np.errstate(over="ignore"):
            placed = np.zeros((p, p))
            placed[np.ix_(order, order)] = B
            scaled = np.ldexp(placed, e[:, None] - e[None, :])
        self.device.doubles(int(out), p * p)[:] = scaled.reshape(-1)
        if not (np.isfinite(placed).all() and np.isfinite(scaled).all()):
            _ints(self.device, status, 1)[0] = 1


class FakeQRCusolver(FakeCusolver):
    """``dgeqrf`` as the stand-in's, keeping each array's ``Q``; ``dormqr`` applies ``Q^T``."""

    def __init__(self, device):
        super().__init__(device)
        self.q = {}

    def dgeqrf(self, handle, m, n, a, lda, tau, work, lwork, info):
        A = self.device.doubles(a, lda * n).reshape((lda, n), order="F")
        self.q[a] = np.linalg.qr(A[:m], mode="complete")[0]
        super().dgeqrf(handle, m, n, a, lda, tau, work, lwork, info)

    def dormqr_bufferSize(self, handle, side, trans, m, n, k, a, lda, tau, c, ldc):
        return 64 * n

    def dormqr(self, handle, side, trans, m, n, k, a, lda, tau, c, ldc, work, lwork, info):
        assert (side, trans) == (0, 1)  # Q^T from the left
        self.calls.append(("dormqr", m, n, k))
        self.device.log.append("dormqr")
        C = self.device.doubles(c, ldc * n).reshape((ldc, n), order="F")
        C[:m] = self.q[a].T @ C[:m]
        self.device.memory[info - self.device.BASE:info - self.device.BASE + 4] = 0


@pytest.fixture
def fake_route(fake_gpu, monkeypatch):
    """The route on the stand-ins: (driver, cusolver, kernels), for data of any size."""
    from paralingam.adjacency import _cuda_adjacency

    drv, _ = fake_gpu
    cusolver = FakeQRCusolver(drv.device)
    monkeypatch.setattr(_cuda_qr, "_cusolver", lambda: cusolver)
    kernels = FakeKernels(drv.device)
    gather = _cuda_adjacency._kernels(1)["gather_centred"]
    monkeypatch.setattr(_cuda_adjacency, "_kernels",
                        lambda handle: {**kernels.kernels(), "gather_centred": gather})
    drv.function_attribute = type("FunctionAttribute", (),
                                  {"MAX_DYNAMIC_SHARED_SIZE_BYTES": 8})
    drv.Error = RuntimeError
    monkeypatch.setattr(_cuda_min_norm, "MIN_FEATURES", 1)
    monkeypatch.setattr(_cuda_low_rank, "OLS_MIN_FEATURES", 1)
    return drv, cusolver, kernels


@pytest.mark.parametrize("p, n, explained, seed", [(60, 600, 45, 21), (90, 900, 20, 22)])
def test_the_route_on_stand_ins_gives_the_hosts_rows_and_frees_its_buffers(fake_route, monkeypatch,
                                                                            p, n, explained, seed):
    drv, cusolver, kernels = fake_route
    monkeypatch.setattr(_cuda_min_norm, "DEFAULT_SHARED", 0)  # (every launch asks for its size)
    X = rank_deficient(p, n, explained, seed)
    rng = np.random.default_rng(seed)
    order = rng.permutation(p)
    V = _least_squares._centred_triangular_factor(X, order)
    first = leading_independent(V)
    for divisor in (None, rng.uniform(0.5, 2.0, p)):
        rows_of = _least_squares._centred_rows(X, order, _column_means(X))
        R, rows = _cuda_qr.centred_triangular_factor(X.shape, rows_of, 1, first, divisor)
        assert R is None
        host = _min_norm._min_norm_rows(V if divisor is None else V / divisor, first)
        np.testing.assert_allclose(rows, host, rtol=0, atol=1e-9 * np.abs(host).max())
    assert ("dormqr", p, p, p - explained) in cusolver.calls
    assert kernels.shared == kernels.launch_shared
    assert all(0 < size <= _cuda_min_norm.shared_bytes(p - explained) for size in kernels.shared)
    assert sorted(drv.device.freed) == sorted(drv.device.allocated)


def test_every_cusolver_call_is_fenced_by_synchronisations(fake_route):
    # CuPy's binding may run a call on a caller's non-blocking stream, which
    # the default stream's copies and kernels neither wait for nor hold up
    drv, cusolver, kernels = fake_route
    X = rank_deficient(60, 600, 45, 21)
    order = np.random.default_rng(21).permutation(60)
    V = _least_squares._centred_triangular_factor(X, order)
    rows_of = _least_squares._centred_rows(X, order, _column_means(X))
    R, rows = _cuda_qr.centred_triangular_factor(X.shape, rows_of, 1, leading_independent(V))
    assert R is None  # the route ran: the data's QR, then the basis's QR and Q^T V
    log = drv.device.log
    calls = [i for i, entry in enumerate(log) if entry != "synchronize"]
    assert [log[i] for i in calls] == ["dgeqrf", "dgeqrf", "dormqr"]
    assert all(log[i - 1] == log[i + 1] == "synchronize" for i in calls)


def test_the_route_on_stand_ins_declines_to_the_hosts_factor(fake_route, monkeypatch):
    drv, cusolver, kernels = fake_route
    X = rank_deficient(60, 600, 45, 23)
    order = np.random.default_rng(23).permutation(60)
    V = _least_squares._centred_triangular_factor(X, order)
    first = leading_independent(V)
    guess = _cuda_min_norm.basis_guess

    def wrong(diag2, sq_norm, first):
        joins = guess(diag2, sq_norm, first)
        joins[np.argmin(joins)] = True
        return joins

    cases = [("MAX_BASIS", 10), ("basis_guess", wrong)]
    for name, value in cases:
        with monkeypatch.context() as m:
            m.setattr(_cuda_min_norm, name, value)
            R, rows = _cuda_qr.centred_triangular_factor(
                X.shape, _least_squares._centred_rows(X, order, _column_means(X)), 1, first)
        assert rows is None
        assert_same_gram(R, V)
    # a failed pivot in a block: the host's rows
    with monkeypatch.context() as m:
        failing = kernels.min_norm_rows

        def fail(grid, block, C, ldc, p, first, before, width, coef, status, shared_size=0):
            failing(grid, block, C, ldc, p, first, before, width, coef, status, shared_size)
            _ints(drv.device, status, 1)[0] = 1

        m.setattr(kernels, "min_norm_rows", fail)
        R, rows = _cuda_qr.centred_triangular_factor(
            X.shape, _least_squares._centred_rows(X, order, _column_means(X)), 1, first)
    assert rows is None
    assert_same_gram(R, V)
    assert sorted(drv.device.freed) == sorted(drv.device.allocated)


def test_without_dormqr_the_route_declines_before_any_launch(fake_gpu):
    drv, cusolver = fake_gpu  # (the QR's stand-in has no dormqr)
    X = rank_deficient(60, 600, 45, 24)
    order = np.arange(60)
    R, rows = _cuda_qr.centred_triangular_factor(
        X.shape, _least_squares._centred_rows(X, order, _column_means(X)), 1, 5)
    assert rows is None and R is not None


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


def device_then_host(monkeypatch, run):
    """``run()`` with the route, then with the route declining at once.

    Returns the two results and, per call of the route in the first run,
    whether it gave the rows. No RuntimeWarning (a fallback) is allowed.
    """
    taken = []
    on_device = _cuda_min_norm.rows_on_device

    def spy(*args):
        rows = on_device(*args)
        taken.append(rows is not None)
        return rows

    monkeypatch.setattr(_cuda_min_norm, "rows_on_device", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        warnings.simplefilter("error", RuntimeWarning)
        device = run()
        monkeypatch.setattr(_cuda_min_norm, "rows_on_device", lambda *args: None)
        host = run()
    return device, host, taken


@pytest.mark.gpu
@needs_cupy
def test_fit_takes_the_gpu_rows_and_equals_the_host_rows(monkeypatch):
    from paralingam.adjacency import _cuda_low_rank

    monkeypatch.setattr(_cuda_low_rank, "ENABLED", False)  # (fit's route past the search's hint)
    X = rank_deficient(400, 4096, 340, 8)  # rank 60
    gpu, host, taken = device_then_host(monkeypatch, lambda: paralingam.fit(X, backend="cuda"))
    assert taken == [True]
    assert gpu.causal_order == host.causal_order
    scale = np.abs(host.adjacency_matrix).max()
    np.testing.assert_allclose(gpu.adjacency_matrix, host.adjacency_matrix, rtol=0,
                               atol=1e-9 * scale)


@pytest.mark.gpu
@needs_cupy
def test_fit_under_a_callers_non_blocking_cupy_stream_gives_the_same_result():
    import cupy

    X = rank_deficient(400, 4096, 340, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        warnings.simplefilter("error", RuntimeWarning)
        plain = paralingam.fit(X, backend="cuda")
        with cupy.cuda.Stream(non_blocking=True):
            on_stream = paralingam.fit(X, backend="cuda")
    assert on_stream.causal_order == plain.causal_order
    np.testing.assert_array_equal(on_stream.adjacency_matrix, plain.adjacency_matrix)


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
    from paralingam.adjacency import _cuda_low_rank

    from test_rank_deficient import explained_targets

    # (the whole QR's rows: the basis's QR would give these weights first)
    monkeypatch.setattr(_cuda_low_rank, "ENABLED", False)
    X = rank_deficient(300, 4096, 250, 10)  # rank 50
    gpu, host, taken = device_then_host(
        monkeypatch, lambda: paralingam.DirectLiNGAM(backend="cuda").fit(X))
    assert taken and all(taken)
    assert gpu.causal_order_ == host.causal_order_
    exact = explained_targets(X, np.asarray(host.causal_order_))
    np.testing.assert_allclose(gpu.adjacency_matrix_[~exact], host.adjacency_matrix_[~exact],
                               rtol=0, atol=1e-8)


def test_no_rows_to_compute_need_no_device():
    rows = _cuda_min_norm.rows_on_device(None, None, None, None, 1000, 300, 300)
    assert rows.shape == (0, 300)


def test_a_failed_allocation_or_cusolver_call_declines_and_frees_the_buffers(fake_route,
                                                                            monkeypatch):
    drv, cusolver, kernels = fake_route
    X = rank_deficient(60, 600, 45, 25)
    order = np.random.default_rng(25).permutation(60)
    V = _least_squares._centred_triangular_factor(X, order)
    first = leading_independent(V)

    def refuse(*args):
        raise RuntimeError("CUSOLVER_STATUS_INTERNAL_ERROR")  # (CUSOLVERError's base)

    with monkeypatch.context() as m:
        m.setattr(cusolver, "dormqr", refuse)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            R, rows = _cuda_qr.centred_triangular_factor(
                X.shape, _least_squares._centred_rows(X, order, _column_means(X)), 1, first)
    assert rows is None
    assert_same_gram(R, V)  # the QR stands: no warning, no second QR on the host
    assert sorted(drv.device.freed) == sorted(drv.device.allocated)
