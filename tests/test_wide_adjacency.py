"""Least squares on wide and rank-deficient data: the BLAS-3 routes of
``_min_norm._min_norm_rows`` against ``numpy.linalg.lstsq``, scikit-learn's
``LinearRegression`` (lingam's least squares) and the row-by-row route."""

import numpy as np
import pytest

from paralingam.adjacency import SINGULAR_TOL, _least_squares, _linalg, _min_norm
from paralingam.adjacency._linalg import cholesky_add
from paralingam.adjacency import ols_adjacency

EPS = np.finfo(float).eps


def _lstsq_rows(X, order, rows):
    """Minimum-norm least squares of ``order[k]`` on ``order[:k]``, with its error bound."""
    Xc = X - X.mean(axis=0)
    for k in rows:
        want, _, rank, sv = np.linalg.lstsq(Xc[:, order[:k]], Xc[:, order[k]], rcond=None)
        kappa = sv[0] / sv[rank - 1]
        # normal equations: eps kappa^2 (as tests/test_adjacency.py)
        yield k, want, min(1e-8 + EPS * kappa**2, 1e-4) * max(1.0, np.abs(want).max())


def _wide(n, p, seed, outliers=False):
    rng = np.random.default_rng(seed)
    X = rng.laplace(size=(n, p))
    if outliers:  # a few samples 1e3 times the rest
        X[rng.choice(n, 3, replace=False)] *= 1e3
    return X, rng.permutation(p)


def _spy(monkeypatch):
    """Count the calls of _dependent_block and _independent_rows, and their refusals."""
    calls = {"block": 0, "refused": 0, "lead": 0}
    block, lead = _min_norm._dependent_block, _min_norm._independent_rows

    def spy_block(*args, **kwargs):
        Y = block(*args, **kwargs)
        calls["block"] += 1
        calls["refused"] += Y is None
        return Y

    def spy_lead(*args, **kwargs):
        calls["lead"] += 1
        return lead(*args, **kwargs)

    monkeypatch.setattr(_min_norm, "_dependent_block", spy_block)
    monkeypatch.setattr(_min_norm, "_independent_rows", spy_lead)
    return calls


@pytest.mark.parametrize("n, p, seed, outliers", [(40, 700, 301, False), (90, 400, 302, False),
                                                  (60, 500, 303, True)])
def test_wide_blocks_equal_lstsq_and_the_row_by_row_route(n, p, seed, outliers, monkeypatch):
    # several blocks of dependent variables (p - n > 256), every row checked
    X, order = _wide(n, p, seed, outliers)
    calls = _spy(monkeypatch)
    B = ols_adjacency(X, order)
    assert calls["block"] >= 2 and calls["refused"] == 0
    for k, want, tol in _lstsq_rows(X, order, range(1, p, 3)):
        np.testing.assert_allclose(B[order[k], order[:k]], want, rtol=0, atol=tol)
        assert not B[order[k], order[k:]].any()
    monkeypatch.setattr(_min_norm, "_dependent_block", lambda *a, **k: None)
    B_loop = ols_adjacency(X, order)
    np.testing.assert_allclose(B, B_loop, rtol=0, atol=1e-9 * max(1.0, np.abs(B).max()))


def test_wide_least_squares_equal_linear_regression():
    # lingam's least squares is scikit-learn's LinearRegression (scipy's lstsq)
    from sklearn.linear_model import LinearRegression

    X, order = _wide(30, 320, 304)
    B = ols_adjacency(X, order)
    for k in (1, 15, 28, 29, 30, 31, 100, 319):
        want = LinearRegression().fit(X[:, order[:k]], X[:, order[k]]).coef_
        np.testing.assert_allclose(B[order[k], order[:k]], want, rtol=0,
                                   atol=1e-8 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("first", [1, 7, 20])
def test_independent_run_from_one_qr_equals_lstsq(first, monkeypatch):
    # the caller vouches for `first` variables; the independent ones after
    # them come from one QR, the dependent ones from blocks
    X, order = _wide(40, 330, 305)
    calls = _spy(monkeypatch)
    V = _least_squares._data_vectors(X, order)
    rows = _min_norm._min_norm_rows(V, first)
    assert calls["lead"] == 1 and calls["block"] >= 1 and calls["refused"] == 0
    for k, want, tol in _lstsq_rows(X, order, range(first, 330, 7)):
        np.testing.assert_allclose(rows[k - first, :k], want, rtol=0, atol=tol)
        assert not rows[k - first, k:].any()


def test_dependent_block_equals_direct_minimum_norm_solutions():
    # y_k solves (C0 C0^T + W_<i W_<i^T) y = w_i for each column i
    rng = np.random.default_rng(306)
    m, k0, b = 30, 45, 20
    C0, W = rng.standard_normal((m, k0)), rng.standard_normal((m, b))
    G0 = C0 @ C0.T
    R0 = np.linalg.qr(C0.T, mode="r")
    Y = _min_norm._dependent_block(R0, G0, W)
    for i in range(b):
        Gk = G0 + W[:, :i] @ W[:, :i].T
        np.testing.assert_allclose(Y[:, i], np.linalg.solve(Gk, W[:, i]), rtol=0,
                                   atol=1e-10 * np.abs(Y[:, i]).max())


def test_dependent_block_refuses_a_singular_start():
    rng = np.random.default_rng(307)
    R0 = np.triu(rng.standard_normal((10, 10)))
    R0[4, 4] = 0.0  # not a factor of a positive definite matrix
    W = rng.standard_normal((10, 6))
    assert _min_norm._dependent_block(R0, R0.T @ R0, W) is None


def test_refused_blocks_fall_back_to_the_row_by_row_route(monkeypatch):
    # a block refused (here the first) goes to the loop; later blocks start
    # from the factor the loop updated, with the same rows as all-loop
    X, order = _wide(30, 700, 308)
    block, seen = _min_norm._dependent_block, []

    def refuse_first(*args, **kwargs):
        seen.append(1)
        return None if len(seen) == 1 else block(*args, **kwargs)

    monkeypatch.setattr(_min_norm, "_dependent_block", refuse_first)
    B = ols_adjacency(X, order)
    assert len(seen) >= 2
    monkeypatch.setattr(_min_norm, "_dependent_block", lambda *a, **k: None)
    B_loop = ols_adjacency(X, order)
    np.testing.assert_allclose(B, B_loop, rtol=0, atol=1e-9 * max(1.0, np.abs(B).max()))
    for k, want, tol in _lstsq_rows(X, order, range(25, 700, 23)):
        np.testing.assert_allclose(B[order[k], order[:k]], want, rtol=0, atol=tol)


def test_exact_combinations_after_a_full_basis_take_blocks(monkeypatch):
    # tall data: 150 free variables, then 300 exact combinations of them
    rng = np.random.default_rng(309)
    free = rng.uniform(-1, 1, size=(400, 150))
    X = np.hstack([free, free @ rng.standard_normal((150, 300))])
    order = np.arange(450)
    calls = _spy(monkeypatch)
    B = ols_adjacency(X, order)
    assert calls["block"] >= 1 and calls["refused"] == 0
    for k, want, tol in _lstsq_rows(X, order, list(range(149, 160)) + [300, 449]):
        np.testing.assert_allclose(B[order[k], order[:k]], want, rtol=0, atol=tol)


@pytest.mark.parametrize("block", [8, 11])
def test_dependent_variables_after_the_last_independent_take_blocks(block, monkeypatch):
    # wide data (rank n - 1 = 39): the block holding the last independent
    # variables goes to the loop, which hands the combinations after them
    # back to the blocks; every dependent row comes from a block
    X, order = _wide(40, 100, 310)
    V = _least_squares._data_vectors(X, order)
    widths = []
    block_fn = _min_norm._dependent_block

    def spy(R0, G0, W, *args, **kwargs):
        widths.append(W.shape[1])
        return block_fn(R0, G0, W, *args, **kwargs)

    monkeypatch.setattr(_min_norm, "_dependent_block", spy)
    rows = _min_norm._min_norm_rows(V, 1, block=block)
    assert sum(widths) == 100 - 39
    for k, want, tol in _lstsq_rows(X, order, range(1, 100)):
        np.testing.assert_allclose(rows[k - 1, :k], want, rtol=0, atol=tol)
        assert not rows[k - 1, k:].any()
    monkeypatch.setattr(_min_norm, "_dependent_block", lambda *a, **k: None)
    np.testing.assert_allclose(rows, _min_norm._min_norm_rows(V, 1, block=block), rtol=0,
                               atol=1e-9 * max(1.0, np.abs(rows).max()))


def test_a_factor_that_stopped_early_is_not_computed_again(monkeypatch):
    # the CUDA route's factor stops at the first dependent variable; the host
    # keeps its rows and computes only the minimum-norm rows after them
    X, order = _wide(40, 120, 311)
    want = ols_adjacency(X, order)
    from paralingam.adjacency._common import _scatter_by_blocks

    cov = _scatter_by_blocks(X)[1][np.ix_(order, order)] / X.shape[0]
    coef, rss, solved = _least_squares._ols_on_predecessors(cov)
    stop = int(np.argmin(solved))
    gpu_like = (coef, rss, solved & (np.arange(len(solved)) < stop - 1))  # the GPU's: fewer rows

    def no_second_factor(gram):
        raise AssertionError("the covariance was factorised again")

    monkeypatch.setattr(_least_squares, "CUDA_OLS_MIN_FEATURES", 0)  # (the GPU's rows at p=40)
    monkeypatch.setattr(_least_squares, "_least_squares_factor", lambda gram, on_gpu: gpu_like)
    monkeypatch.setattr(_least_squares, "_ols_on_predecessors", no_second_factor)
    got = ols_adjacency(X, order, backend="cuda")
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * max(1.0, np.abs(want).max()))


@pytest.mark.gpu
def test_wide_fit_on_cuda_equals_cpu():
    import paralingam

    X, _ = _wide(48, 400, 310)
    cpu = paralingam.fit(X, backend="cpu", on_collinear="ignore")
    gpu = paralingam.fit(X, backend="cuda", on_collinear="ignore")
    np.testing.assert_array_equal(gpu.causal_order, cpu.causal_order)
    np.testing.assert_allclose(gpu.adjacency_matrix, cpu.adjacency_matrix, rtol=0,
                               atol=1e-9 * max(1.0, np.abs(cpu.adjacency_matrix).max()))


@pytest.mark.parametrize("n, p, chunk, cols", [(2000, 6, 512, None), (1537, 40, 100, None),
                                              (900, 30, 64, [5, 2, 29, 0]), (50, 40, 512, None)])
def test_streaming_qr_of_the_data_equals_numpy_qr(n, p, chunk, cols):
    # the data vectors of the minimum-norm rows: R of the centred data in
    # causal order (its rows may differ from numpy's, its inner products not)
    rng = np.random.default_rng(n + p)
    X = rng.standard_normal((n, p)) * rng.uniform(0.01, 100, p) + rng.uniform(-5, 5, p)
    X[:, 3] = X[:, 1] - 2 * X[:, 4]  # an exact combination: R has a zero pivot
    X[:7] *= 1e3  # outlying rows
    order = rng.permutation(p) if cols is None else np.array(cols)
    R = _least_squares._centred_triangular_factor(X, order, chunk=chunk)
    Xc = X[:, order] - X[:, order].mean(axis=0)
    want = np.linalg.qr(Xc / np.sqrt(n), mode="r")
    assert R.shape == (len(order), len(order)) and not np.tril(R, -1).any()
    # (past the zero pivot R is not unique: only its inner products are)
    np.testing.assert_allclose(R.T @ R, want.T @ want, rtol=0,
                               atol=1e-12 * np.abs(want.T @ want).max())
    # float32 input is centred in float64, as the plain copy was
    R32 = _least_squares._centred_triangular_factor(X.astype(np.float32), order, chunk=chunk)
    X32 = X.astype(np.float32).astype(np.float64)[:, order]
    want32 = np.linalg.qr((X32 - X32.mean(axis=0)) / np.sqrt(n), mode="r")
    np.testing.assert_allclose(R32.T @ R32, want32.T @ want32, rtol=0,
                               atol=1e-12 * np.abs(want32.T @ want32).max())


@pytest.mark.parametrize("n, p, chunk", [(2000, 6, 512), (1537, 40, 100), (3000, 32, 512),
                                         (3000, 33, 256), (1900, 300, 512)])
def test_the_one_streams_folds_are_scipys_dtpqrt_bit_for_bit(n, p, chunk):
    # the one stream folds its chunks with _linalg.fold_rows, without the GIL
    # (so that the scatter matrix can be made beside it): the same LAPACK
    # routine and arguments as scipy.linalg.lapack.dtpqrt, which it called
    # before, so the factor keeps its bits
    from scipy.linalg.lapack import dtpqrt

    from paralingam._preparation import float_rows

    rng = np.random.default_rng(n + p + chunk)
    X = rng.standard_normal((n, p)) * rng.uniform(0.01, 100, p) + rng.uniform(-5, 5, p)
    X[:, 3] = X[:, 1] - 2 * X[:, 4]  # an exact combination: R has a zero pivot
    X[:7] *= 1e3  # outlying rows
    order = rng.permutation(p)
    mean = X.mean(axis=0)[order]

    def rows(start, stop):
        block = float_rows(X, start, stop).T[order].T
        block -= mean
        block *= 1.0 / np.sqrt(n)
        return block

    head = min(n, max(chunk, p))
    R = np.asfortranarray(np.linalg.qr(rows(0, head), mode="r"))
    for start in range(head, n, chunk):
        R, _, _, info = dtpqrt(0, max(1, min(32, p)), R, rows(start, min(start + chunk, n)),
                               overwrite_a=1, overwrite_b=1)
        assert info == 0
    np.testing.assert_array_equal(_least_squares._centred_triangular_factor(X, order, chunk=chunk),
                                  np.triu(R))


@pytest.mark.parametrize("n, p", [(5000, 40), (3100, 200), (20000, 7), (4096, 512)])
def test_segmented_streaming_qr_has_the_same_bits_on_any_number_of_threads(n, p):
    # many rows: segments on threads, combined pairwise in a fixed order
    # (an odd count too: 3100 rows make 3); the factor depends on the
    # data's shape only, and its inner products are the centred data's
    rng = np.random.default_rng(n + p)
    X = rng.standard_normal((n, p)) * rng.uniform(0.01, 100, p) + rng.uniform(-5, 5, p)
    X[:, 3] = X[:, 1] - 2 * X[:, 4]  # an exact combination: R has a zero pivot
    X[:7] *= 1e3  # outlying rows
    order = rng.permutation(p)
    segments = _least_squares.tsqr_segments(n, p)
    assert segments > 1
    factors = [_least_squares._centred_triangular_factor(X, order, n_threads=t, segmented=True)
               for t in sorted({1, 2, 3, segments})]
    for R in factors[1:]:
        np.testing.assert_array_equal(R, factors[0])
    R = factors[0]
    assert R.shape == (p, p) and not np.tril(R, -1).any()
    # without segments (after a CPU search): the one stream, as before
    one = _least_squares._centred_triangular_factor(X, order)
    assert not np.array_equal(one, R)
    Xc = X[:, order] - X[:, order].mean(axis=0)
    want = np.linalg.qr(Xc / np.sqrt(n), mode="r")
    np.testing.assert_allclose(R.T @ R, want.T @ want, rtol=0,
                               atol=1e-12 * np.abs(want.T @ want).max())


def test_ctrl_c_in_a_segmented_qr_starts_no_more_segments(monkeypatch, sigint_after):
    # Ctrl-C while the segments run: KeyboardInterrupt at once, and the
    # segments not started are dropped (Executor.map cancels its pending
    # calls) rather than run out: 16 segments of 0.2 s on one thread
    import time

    from paralingam.adjacency import _linalg

    X = np.random.default_rng(3).standard_normal((20000, 7))
    assert _least_squares.tsqr_segments(*X.shape) == 16
    started = []
    factor = _linalg.qr_factor

    def slow(A):
        started.append(1)
        time.sleep(0.2)
        return factor(A)

    monkeypatch.setattr(_linalg, "qr_factor", slow)
    t0 = time.perf_counter()
    with sigint_after(0.3), pytest.raises(KeyboardInterrupt):
        _least_squares._centred_triangular_factor(X, np.arange(7), n_threads=1, segmented=True)
    assert time.perf_counter() - t0 < 1.5  # not the 3.2 s of every segment
    time.sleep(0.5)  # the segment running at the interrupt ends; no other starts
    assert len(started) <= 3


def test_segment_count_depends_on_the_shape_only():
    segments = _least_squares.tsqr_segments
    assert segments(2047, 5) == 1 and segments(2048, 5) == 2  # TSQR_SEGMENT_ROWS rows each
    assert segments(10_000, 87) == 9
    assert segments(8192, 1000) == 4  # at least 2 p rows each
    assert segments(10 ** 7, 50) == _least_squares.TSQR_MAX_SEGMENTS
    assert segments(100, 300) == 1


def test_nogil_qr_steps_check_their_shapes():
    from paralingam.adjacency._linalg import fold_rows, qr_factor

    with pytest.raises(ValueError, match="at least as many rows"):
        qr_factor(np.zeros((3, 5), order="F"))
    with pytest.raises(ValueError, match="p x p"):
        fold_rows(np.eye(3, order="F"), np.zeros((4, 2), order="F"))
    with pytest.raises(ValueError, match="triangular B"):
        fold_rows(np.eye(3, order="F"), np.zeros((4, 3), order="F"), triangular=True)
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((9, 4)), rng.standard_normal((6, 4))
    R = qr_factor(np.asfortranarray(A))
    fold_rows(R, np.asfortranarray(B))
    R = np.triu(R)
    np.testing.assert_allclose(R.T @ R, A.T @ A + B.T @ B, rtol=0, atol=1e-12)


def loop_in_numpy(U, C, R, Y, A, L, cols, sq_norm, rest2, m0, m):
    """The variable-by-variable loop of _min_norm_rows as numpy wrote it (the oracle)."""
    from scipy.linalg import solve_triangular

    d = U.shape[0]
    joins = _min_norm._joins
    for i, k in enumerate(cols):
        a = A[:, i]
        l = np.zeros(U.shape[1])
        l[:m0] = L[:, i]
        for _ in range(2):
            step = U[:, m0:m].T @ a
            a -= U[:, m0:m] @ step
            l[m0:m] += step
        if m:
            w = solve_triangular(R[:m, :m], l[:m], trans="T")
            Y[k, :m] = solve_triangular(R[:m, :m], w)
        res2 = a @ a
        to_blocks = False
        if joins(res2, sq_norm[k], m < d):
            l[m] = np.sqrt(res2)
            U[:, m] = a / l[m]
            m += 1
            if rest2 is not None and i + 1 < len(cols):
                rest2[i + 1:] -= (U[:, m - 1] @ A[:, i + 1:]) ** 2
                to_blocks = not joins(rest2[i + 1:], sq_norm[cols[i + 1:]], m < d).any()
        C[:m, k] = l[:m]
        cholesky_add(R, l, m)
        if to_blocks:
            return _linalg.MIN_NORM_TO_BLOCKS, i + 1, m
    return _linalg.MIN_NORM_DONE, len(cols), m


def loop_case(seed, d=60, p=40, m0=5, track=False):
    """A block of variables 10..p-1 on a basis of the first m0 vectors: some join, some not."""
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((d, p))
    for j in range(12, p, 3):  # every third an exact combination of earlier ones
        V[:, j] = V[:, :j] @ (rng.standard_normal(j) * (rng.random(j) < 0.2))
    cap = p
    Q, T = np.linalg.qr(V[:, :10])
    U, C = np.zeros((d, cap), order="F"), np.zeros((cap, p))
    R, Y = np.zeros((cap, cap)), np.zeros((p, cap))
    U[:, :m0] = Q[:, :m0]
    C[:m0, :10] = T[:m0]
    R[:m0, :m0] = np.linalg.qr(C[:m0, :10].T, mode="r")
    cols = np.arange(10, p)
    A = V[:, cols].copy()
    L = U[:, :m0].T @ A
    A -= U[:, :m0] @ L
    sq_norm = np.einsum("ij,ij->j", V, V)
    rest2 = np.einsum("ij,ij->j", A, A) if track else None
    return U, C, R, Y, A, L, cols, sq_norm, rest2, m0


@pytest.mark.parametrize("seed, track", [(1, False), (2, False), (3, True), (4, True)])
def test_the_compiled_loop_is_the_numpy_loop(seed, track):
    ref = [a.copy(order="K") if isinstance(a, np.ndarray) else a for a in loop_case(seed, track=track)]
    got = [a.copy(order="K") if isinstance(a, np.ndarray) else a for a in loop_case(seed, track=track)]
    status_ref, i_ref, m_ref = loop_in_numpy(*ref, ref[-1])
    U, C, R, Y, A, L, cols, sq_norm, rest2, m0 = got
    l = np.zeros(U.shape[1])
    status, i, m = _linalg.min_norm_variables(
        U, C, R, Y, np.asfortranarray(A), L, cols, sq_norm,
        rest2 if rest2 is not None else np.zeros(0), track, l, 0, m0, m0, SINGULAR_TOL)
    assert (status, i, m) == (status_ref, i_ref, m_ref)
    assert m > m0 and (status == _linalg.MIN_NORM_TO_BLOCKS) == (i < len(cols))
    for name, a, b in zip("UCRY", (U, C, R, Y), ref[:4]):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10 * max(1.0, np.abs(b).max()),
                                   err_msg=name)


def test_the_compiled_loop_stops_at_a_singular_factor_and_resumes():
    # an exact zero on R's diagonal (dtrtrs's singularity): the loop stops
    # before the solve with the variable's coordinates in l and Y untouched;
    # called again with solved=True it goes on from the basis test
    U, C, R, Y, A, L, cols, sq_norm, _, m0 = loop_case(5)
    R[2, 2] = 0.0
    A = np.asfortranarray(A)
    l = np.zeros(U.shape[1])
    args = (U, C, R, Y, A, L, cols, sq_norm, np.zeros(0), False, l)
    status, i, m = _linalg.min_norm_variables(*args, 0, m0, m0, SINGULAR_TOL)
    assert (status, i, m) == (_linalg.MIN_NORM_SINGULAR, 0, m0)
    assert not Y.any()
    np.testing.assert_array_equal(l[:m0], L[:, 0])
    status, i, m = _linalg.min_norm_variables(*args, 0, m0, m0, SINGULAR_TOL, True)
    assert i >= 1 and not Y[cols[0]].any()  # (the caller's row, not the loop's)
    assert C[:m0, cols[0]].tolist() == L[:, 0].tolist()


def test_the_compiled_loop_needs_room_for_every_variable_to_join():
    U, C, R, Y, A, L, cols, sq_norm, _, m0 = loop_case(6)
    small = [np.ascontiguousarray(a[:, :m0 + 3]) for a in (U, Y)] + [C[:m0 + 3], R[:m0 + 3, :m0 + 3]]
    with pytest.raises(ValueError, match="room"):
        _linalg.min_norm_variables(np.asfortranarray(small[0]), np.ascontiguousarray(small[2]),
                                   np.ascontiguousarray(small[3]), small[1],
                                   np.asfortranarray(A), L, cols, sq_norm, np.zeros(0), False,
                                   np.zeros(m0 + 3), 0, m0, m0, SINGULAR_TOL)


@pytest.mark.parametrize("m, width", [(0, 64), (23, 64), (64, 64), (100, 100), (256, 256),
                                      (4000, 256)])
def test_blocks_are_about_as_wide_as_the_basis(m, width):
    assert _min_norm._block_width(m) == width
    assert _min_norm._block_width(m, block=32) == 32
