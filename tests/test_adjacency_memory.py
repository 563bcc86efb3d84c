"""Least squares reads the data by blocks of rows (issue 21): same weights, a small peak.

The scatter matrix is summed over blocks of centred rows
(``_common._scatter_by_blocks``) instead of one product of a centred copy
of the whole data, and ``fit`` hands least squares the input with its
columns' scaling (a ``ScaledData``) instead of a scaled copy. Every centred
value is the one of the whole-array route; only the order of the products'
sums differs. The weights must stay those of per-target least squares
(``numpy.linalg.lstsq``) and of the route before, the same values must give
the same bits in any form (array or ScaledData, float32 or its widening,
C or Fortran order, any block size), and the step must hold no more than a
block beyond the data.
"""

import warnings

import numpy as np
import pytest

import paralingam
from paralingam import _memory, _preparation, _testing
from paralingam._validation import _as_data_matrix
from paralingam.adjacency import ols_adjacency
from paralingam.adjacency._common import _column_means, _scatter, _scatter_by_blocks
from paralingam.adjacency._least_squares import _ols_adjacency
from paralingam.datasets import make_lingam_data

EPS = np.finfo(np.float64).eps


@pytest.fixture(params=["one block", "blocks of 7 rows"])
def blocks(request, monkeypatch):
    """The default blocks (one for these small data), or many blocks with a short last one."""
    if request.param != "one block":
        monkeypatch.setattr(_preparation, "SCATTER_BLOCK", 1)
        monkeypatch.setattr(_preparation, "SCATTER_MIN_ROWS", 7)
    return request.param


def _cases():
    rng = np.random.default_rng(21)
    lingam = make_lingam_data(8, 1000, random_state=21)[0]
    outliers = lingam.copy()
    outliers[rng.integers(0, 1000, 6), rng.integers(0, 8, 6)] = 1e9
    constant = lingam.copy()
    constant[:, 3] = 2.5
    dependent = lingam.copy()  # tall, rank deficient: the minimum-norm rows' TSQR
    dependent[:, 5] = dependent[:, 1] - 2.0 * dependent[:, 6]
    wide = rng.laplace(size=(12, 30))  # n <= p: the minimum-norm rows on the centred copy
    scales = lingam * 10.0 ** rng.uniform(-6, 6, 8)  # columns of very different scales
    tiny = lingam * 1e-305  # factors beyond 2**1000: ldexp, subnormal inputs
    return {"lingam": lingam, "outliers": outliers, "constant column": constant,
            "rank deficient": dependent, "wide": wide, "scales": scales, "tiny": tiny}


CASES = _cases()


def _product(X):
    """``fit``'s form of ``X``: a ScaledData over it (``_as_data_matrix(scaled="deferred")``)."""
    product, _, _ = _as_data_matrix(X, allow_constant=True, scaled="deferred")
    assert isinstance(product, _preparation.ScaledData)
    return product


def _same(a, b):
    np.testing.assert_array_equal(a, b, strict=True)


def _order(p, seed=0):
    return np.random.default_rng(seed).permutation(p)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_means_of_scaled_data_are_those_of_its_copy(name, dtype, blocks):
    product = _product(CASES[name].astype(dtype))
    copy = product.copy()
    _same(_column_means(product), copy.mean(axis=0))
    _same(_column_means(copy), copy.mean(axis=0))


@pytest.mark.parametrize("name", list(CASES))
def test_scatter_by_blocks_is_the_centred_copys_to_rounding(name, blocks):
    X = _product(CASES[name]).copy()
    mean, S = _scatter_by_blocks(X)
    mean0, S0 = _scatter(X)
    _same(mean, mean0)
    _same(S, S.T)
    # products of n centred values: a few eps per term of |x_i| |x_j|
    Xc = X - mean0
    bound = 4 * X.shape[0] * EPS * (np.abs(Xc).T @ np.abs(Xc))
    assert (np.abs(S - S0) <= bound).all()


@pytest.mark.parametrize("name", list(CASES))
def test_scatter_by_blocks_gives_the_same_bits_in_every_form(name, blocks):
    X = CASES[name]
    product = _product(X)
    copy = product.copy()
    want = _scatter_by_blocks(copy)
    for form in (product, np.asfortranarray(copy), _product(np.asfortranarray(X))):
        got = _scatter_by_blocks(form)
        _same(got[0], want[0])
        _same(got[1], want[1])
    # float32 data and their float64 widening
    narrow = _product(X.astype(np.float32))
    widened = _product(X.astype(np.float32).astype(np.float64))
    _same(_scatter_by_blocks(narrow)[1], _scatter_by_blocks(widened.copy())[1])


@pytest.mark.parametrize("name", list(CASES))
def test_scatter_by_blocks_without_the_means_reads_them_with_the_same_bits(name, blocks):
    # one block: the means come from the block the scatter matrix reads (one
    # pass over the data); else from _column_means first. Same bits as with
    # the means given.
    X = CASES[name]
    for form in (_product(X), _product(X).copy(), np.asfortranarray(X), X.astype(np.float32)):
        given = _column_means(form)
        mean, S = _scatter_by_blocks(form)
        _same(mean, given)
        _same(S, _scatter_by_blocks(form, given)[1])


@pytest.mark.parametrize("name", list(CASES))
def test_least_squares_on_scaled_data_is_that_on_its_copy(name, blocks):
    product = _product(CASES[name])
    copy = product.copy()
    p = copy.shape[1]
    order = _order(p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _ols_adjacency(copy, order)
        # the scatter matrix and the minimum-norm rows' factor share one mean
        for form in (product, np.asfortranarray(copy)):
            _same(_ols_adjacency(form, order), want)
        # a given scatter matrix (the CUDA search's): the data are read only
        # for the minimum-norm rows
        S = _scatter(copy)[1]
        _same(_ols_adjacency(product, order, scatter=S), _ols_adjacency(copy, order, scatter=S))
        # prior knowledge: targets solved on their kept predictors
        pk = -np.ones((p, p), dtype=int)
        pk[order[-1], order[:p // 2]] = 0
        pk[order[p // 2], order[0]] = 0
        _same(_ols_adjacency(product, order, prior_knowledge=pk),
              _ols_adjacency(copy, order, prior_knowledge=pk))


def _lstsq_rows(X, order, prior_knowledge=None):
    """Per target: minimum-norm least squares on its (kept) predecessors, and the tolerance."""
    p = X.shape[1]
    Xc = X - X.mean(axis=0)
    B, tol = np.zeros((p, p)), np.zeros(p)
    for k in range(1, p):
        target = order[k]
        keep = [j for j in order[:k]
                if prior_knowledge is None or prior_knowledge[target, j] != 0]
        if not keep:
            continue
        coef, _, rank, sv = np.linalg.lstsq(Xc[:, keep], Xc[:, target], rcond=None)
        B[target, keep] = coef
        # least squares from the covariance: accurate to eps kappa^2
        kappa = sv[0] / sv[rank - 1] if rank else 1.0
        tol[target] = min(1e-9 + EPS * kappa ** 2, 1e-4) * max(1.0, np.abs(coef).max())
    return B, tol


@pytest.mark.parametrize("name", [n for n in CASES if n != "tiny"])
def test_least_squares_by_blocks_is_per_target_lstsq(name, blocks):
    X = CASES[name]
    order = _order(X.shape[1], seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        B = ols_adjacency(X, order)
    want, tol = _lstsq_rows(X, order)
    assert (np.abs(B - want) <= tol[:, None]).all(), np.abs(B - want).max()
    # and the route before (the scatter matrix of a centred copy), to rounding
    data = _product(X).copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before = _ols_adjacency(data, order, scatter=_scatter(data)[1])
        after = _ols_adjacency(data, order)
    scale = np.ldexp(1.0, _preparation.column_exponents(X))  # back to the data's scale
    assert (np.abs(after - before) * scale[:, None] / scale[None, :] <= tol[:, None]).all()


def test_tiny_data_give_the_weights_of_the_same_data_at_ordinary_scale(blocks):
    X = CASES["lingam"]
    order = _order(X.shape[1], seed=2)
    np.testing.assert_allclose(ols_adjacency(X * 1e-305, order), ols_adjacency(X, order),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fit_weights_are_per_target_lstsq(dtype, blocks):
    X = CASES["outliers"].astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = paralingam.fit(X, backend="cpu")
    want, tol = _lstsq_rows(X.astype(np.float64), result.causal_order)
    assert (np.abs(result.adjacency_matrix - want) <= tol[:, None]).all()


def _fit_peaks(X):
    """Traced peaks of a CPU ``fit`` before and during the adjacency step, and what it held then."""
    return _testing.fit_memory_peaks(X, backend="cpu")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_least_squares_holds_a_block_beyond_the_data(dtype):
    n, p = 120_000, 6
    X = np.ascontiguousarray(make_lingam_data(p, n, random_state=22)[0]).astype(dtype)
    paralingam.fit(X[:2000], backend="cpu")  # first calls load modules: not the step's memory
    peaks = _fit_peaks(X)
    # the block of rows (a sixteenth of them) and p x p matrices, not a copy
    # of the data (before: a scaled copy and a centred copy, 2x float64)
    rows = _preparation.scatter_rows(n, p)
    assert rows <= -(-n // 16)
    # (numpy's iteration buffers and Python's objects: a few hundred KiB at most)
    assert peaks["adjacency"] - peaks["held"] <= _memory.ols_bytes(n, p) + (256 << 10)
    assert _memory.ols_bytes(n, p) + (256 << 10) < 0.15 * 8 * n * p
    if dtype == "float64":  # issue 21: the whole fit within 1.5x the input
        assert max(peaks["before_adjacency"], peaks["adjacency"]) <= 1.5 * X.nbytes, peaks


@pytest.mark.parametrize("n, p", [(1, 3), (1000, 1), (2000, 300), (10 ** 6, 24), (500_000, 600)])
def test_scatter_blocks_cover_the_rows(n, p):
    rows = _preparation.scatter_rows(n, p)
    assert 1 <= rows <= n
    if n * p > _preparation.SCATTER_BLOCK:
        assert rows * p <= max(_preparation.SCATTER_BLOCK, _preparation.SCATTER_MIN_ROWS * p)
        assert rows >= min(n, _preparation.SCATTER_MIN_ROWS)
    else:
        assert rows == n


@pytest.mark.parametrize("adjacency", ["adaptive_lasso", "ols"])
def test_the_estimator_reads_float_input_without_a_copy(adjacency):
    # DirectLiNGAM reads the input as paralingam.fit does (issue 21): no
    # float64 copy of the data before the search, nor for the adaptive
    # lasso, whose scatter matrix comes from the search
    import tracemalloc

    from paralingam.lingam.estimator import DirectLiNGAM

    n, p = 120_000, 6
    X = np.ascontiguousarray(make_lingam_data(p, n, random_state=23)[0])
    before = X.copy()
    model = DirectLiNGAM(backend="cpu", adjacency=adjacency)
    model.fit(X[:2000])  # first calls load modules: not the fit's memory
    tracemalloc.start()
    try:
        model.fit(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 1.5 * X.nbytes, (peak, X.nbytes)
    np.testing.assert_array_equal(X, before)
    reference = DirectLiNGAM(backend="cpu", adjacency=adjacency).fit(X.copy(order="F"))
    assert model.causal_order_ == reference.causal_order_
    np.testing.assert_array_equal(model.adjacency_matrix_, reference.adjacency_matrix_)


@pytest.mark.parametrize("adjacency", ["adaptive_lasso", "ols"])
def test_the_command_line_reads_the_table_without_a_copy(adjacency, tmp_path, capsys):
    # the command line's fit reads the table it loaded as paralingam.fit
    # reads its input: the table and the CPU search's standardised rows
    # (one float64 array each), no scaled copy of the table besides
    import tracemalloc

    from paralingam.cli import main

    n, p = 120_000, 6
    X = np.ascontiguousarray(make_lingam_data(p, n, random_state=24)[0])
    path = tmp_path / "x.npy"
    np.save(path, X)
    args = ["fit", str(path), "--backend", "cpu", "--adjacency", adjacency]
    assert main(args + ["-o", str(tmp_path / "first.json")]) == 0  # modules loaded
    tracemalloc.start()
    try:
        assert main(args + ["-o", str(tmp_path / "out.json")]) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    capsys.readouterr()
    assert peak <= 2.5 * X.nbytes, (peak, X.nbytes)  # 3.17x with the copy
