"""The HSIC gamma test against lingam 1.13's ``hsic_test_gamma``."""

import itertools
import re
import threading

import numpy as np
import pytest
from lingam_oracle import lingam_module

from paralingam.lingam import hsic

lingam_hsic = lingam_module("lingam.hsic", __name__)


def errors(n, p, seed):
    """Non-Gaussian columns, some of them dependent."""
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((n, p)) ** 3
    E[:, 1] += 0.5 * np.abs(E[:, 0])
    E[:, 2] = np.round(E[:, 2], 1)  # ties: zero distances in the bandwidth
    return E


def lingam_p_values(E):
    n, p = E.shape
    P = np.zeros((p, p))
    for i, j in itertools.combinations(range(p), 2):
        P[i, j] = P[j, i] = lingam_hsic.hsic_test_gamma(E[:, [i]], E[:, [j]])[1]
    return P


@pytest.mark.parametrize("n, seed", [(40, 301), (150, 302), (400, 303)])
def test_single_test_equals_lingam(n, seed):
    E = errors(n, 3, seed)
    for i, j in [(0, 1), (0, 2), (1, 2)]:
        stat, p = hsic.hsic_test_gamma(E[:, i], E[:, j])
        ref_stat, ref_p = lingam_hsic.hsic_test_gamma(E[:, [i]], E[:, [j]])
        assert stat == pytest.approx(ref_stat, rel=1e-10)
        assert p == pytest.approx(ref_p, rel=1e-8, abs=1e-10)


def test_two_dimensional_inputs_equal_lingam():
    E = errors(120, 4, 304)
    stat, p = hsic.hsic_test_gamma(E[:, :2], E[:, 2:])
    ref_stat, ref_p = lingam_hsic.hsic_test_gamma(E[:, :2], E[:, 2:])
    assert stat == pytest.approx(ref_stat, rel=1e-10)
    assert p == pytest.approx(ref_p, rel=1e-8, abs=1e-10)


@pytest.mark.parametrize("n, p, seed", [(200, 5, 305), (500, 4, 306)])
def test_p_value_matrix_equals_lingam(n, p, seed):
    E = errors(n, p, seed)
    P = hsic.independence_p_values(E)
    np.testing.assert_allclose(P, lingam_p_values(E), rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(P, P.T)
    assert P[0, 1] < 1e-6 < P[0, 3]  # the dependent pair is found


def test_kernel_width_uses_the_first_100_samples():
    x = np.concatenate([np.linspace(0, 1, 100), np.full(50, 1e6)])
    assert hsic.kernel_width(x) == pytest.approx(lingam_hsic.get_kernel_width(x[:, None]))
    assert hsic.kernel_width(x) < 1.0


def test_one_variable_has_no_pairs():
    E = np.random.default_rng(308).standard_normal((30, 1))
    np.testing.assert_array_equal(hsic.independence_p_values(E), np.zeros((1, 1)))


def test_constant_columns_are_independent_of_every_column():
    # no kernel fits a constant: the test would divide 0 by 0
    E = errors(120, 4, 309)
    E[:, 2] = 0.0
    P = hsic.independence_p_values(E)
    assert np.isfinite(P).all()
    np.testing.assert_array_equal(P[2, [0, 1, 3]], 1.0)
    np.testing.assert_array_equal(P[[0, 1, 3], 2], 1.0)
    np.testing.assert_array_equal(np.diag(P), 0.0)
    keep = [0, 1, 3]
    np.testing.assert_allclose(P[np.ix_(keep, keep)], lingam_p_values(E[:, keep]), rtol=1e-9)
    assert np.isnan(hsic.kernel_width(E[:, 2]))
    assert hsic.hsic_test_gamma(E[:, 2], E[:, 0]) == (0.0, 1.0)


def test_columns_named_constant_get_p_value_one():
    E = errors(80, 3, 310)
    P = hsic.independence_p_values(E, constant=[False, True, False])
    np.testing.assert_array_equal(P[1, [0, 2]], 1.0)
    assert P[0, 2] == pytest.approx(lingam_p_values(E)[0, 2], rel=1e-9)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_fewer_than_six_samples_are_refused(n):
    # (n - 4)(n - 5) / (n - 3) in the null variance: division by zero at n=3,
    # a zero variance (NaN p-values) at n=4, 5
    E = errors(n, 3, 311)
    with pytest.raises(ValueError, match=f"at least 6 samples.*got {n}"):
        hsic.independence_p_values(E)
    with pytest.raises(ValueError, match=f"at least 6 samples.*got {n}"):
        hsic.hsic_test_gamma(E[:, 0], E[:, 1])


def test_six_samples_give_finite_p_values():
    E = errors(6, 3, 312)
    P = hsic.independence_p_values(E)
    assert np.isfinite(P).all()
    np.testing.assert_allclose(P, lingam_p_values(E), rtol=1e-8, atol=1e-10)


# --------------------------------------------------------------------------
# The tiled sums: equal to lingam and to the dense n x n computation
# --------------------------------------------------------------------------

def with_outliers(n, p, seed):
    """``errors`` with gross outliers of 1e4 to 1e8 in single samples."""
    E = errors(n, p, seed)
    rng = np.random.default_rng(seed + 1)
    rows = rng.choice(n, size=p, replace=False)
    for j, (row, size) in enumerate(zip(rows, [1e4, -1e6, 1e8, 3e5, -2e7][:p])):
        E[row, j] = size
    E[rng.integers(n), 0] = -5e4  # a second outlier in one column
    return E


@pytest.mark.parametrize("n, p, block, seed", [
    (257, 4, 64, 320),    # n not a multiple of the block
    (300, 3, 7, 321),     # small odd blocks: many partial tiles
    (101, 5, 1, 322),     # one sample per block
    (90, 3, 500, 323),    # one tile, larger than n
    (7, 3, 3, 324),       # tiny n
])
def test_tiled_p_values_equal_lingam(n, p, block, seed):
    E = errors(n, p, seed)
    P = hsic.independence_p_values(E, block_size=block)
    np.testing.assert_allclose(P, lingam_p_values(E), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("block", [None, 16, 100])
def test_outliers_equal_lingam(block):
    E = with_outliers(400, 5, 325)
    P = hsic.independence_p_values(E, block_size=block)
    np.testing.assert_allclose(P, lingam_p_values(E), rtol=1e-8, atol=1e-10)


def test_block_size_changes_only_rounding():
    E = errors(300, 4, 326)
    P = hsic.independence_p_values(E)
    for block in (3, 13, 128, 299, 300, 10_000):
        np.testing.assert_allclose(hsic.independence_p_values(E, block_size=block), P,
                                   rtol=1e-11, atol=1e-300)


def test_tile_sums_equal_the_dense_sums():
    # the statistic, sum_{a != b} (Kc Lc)^2 and the null means, against n x n matrices
    E = with_outliers(150, 4, 327)
    widths = [hsic.kernel_width(E[:, i]) for i in range(4)]
    variables = [hsic._scaled(E[:, i], w) for i, w in enumerate(widths)]
    stat, var_sum, mu = hsic._sums_cpu(variables, 32, False)
    grams = [hsic.centred_gram(E[:, i], w) for i, w in enumerate(widths)]
    n = len(E)
    for i, j in itertools.combinations(range(4), 2):
        Kc, Lc = grams[i][1], grams[j][1]
        prod = (Kc * Lc) ** 2
        assert stat[i, j] == pytest.approx(np.sum(Kc * Lc) / n, rel=1e-11)
        assert var_sum[i, j] == pytest.approx(prod.sum() - np.trace(prod), rel=1e-11)
        assert stat[i, j] == stat[j, i] and var_sum[i, j] == var_sum[j, i]
    for i in range(4):
        K = grams[i][0]
        assert mu[i] == pytest.approx((K.sum() - np.trace(K)) / n / (n - 1), rel=1e-12)


def test_single_test_with_small_blocks_equals_lingam():
    E = with_outliers(203, 3, 328)
    stat, p = hsic.hsic_test_gamma(E[:, 0], E[:, 1], block_size=10)
    ref_stat, ref_p = lingam_hsic.hsic_test_gamma(E[:, [0]], E[:, [1]])
    assert stat == pytest.approx(ref_stat, rel=1e-10)
    assert p == pytest.approx(ref_p, rel=1e-8, abs=1e-10)


def test_estimator_p_values_equal_lingam_with_explained_variables():
    # two exactly explained variables: their p-values are 1 (lingam's test
    # gives NaN or rounding noise there); every other pair is lingam's
    import warnings

    from paralingam import DirectLiNGAM

    rng = np.random.default_rng(329)
    n = 300
    X = rng.uniform(-1, 1, size=(n, 4))
    X[:, 1] += 0.8 * X[:, 0]
    X[:, 3] += 0.5 * X[:, 1] - 0.3 * X[:, 2]
    Y = np.column_stack([X, X[:, 0] - X[:, 2], 2.0 * X[:, 3]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = DirectLiNGAM(backend="cpu").fit(Y)
    P = ours.get_error_independence_p_values(Y, progress=False)
    explained = [4, 5]
    others = [0, 1, 2, 3]
    for k in explained:
        np.testing.assert_array_equal(P[k, [i for i in range(6) if i != k]], 1.0)
    assert np.isfinite(P).all()
    # lingam's get_error_independence_p_values on these residuals: its tests
    # of the other pairs (its own tests of an explained variable's zero
    # residual are NaN or rounding noise, which differs by machine)
    E = Y - (ours.adjacency_matrix_ @ Y.T).T  # (lingam's residuals)
    ref = lingam_p_values(E[:, others])
    np.testing.assert_allclose(P[np.ix_(others, others)], ref, rtol=1e-8, atol=1e-10)


# --------------------------------------------------------------------------
# Memory, progress, Ctrl-C, bad options
# --------------------------------------------------------------------------

def test_memory_stays_far_below_n_squared():
    import tracemalloc

    E = errors(3000, 3, 330)
    # a first call's imports (scipy.stats) are allocations too: not traced
    hsic.independence_p_values(E[:100], n_threads=2)
    tracemalloc.start()
    try:
        # each thread holds its own tiles (O(block^2)): two threads, so that
        # the bound holds on any machine (16 threads peaked at 33 MB here)
        hsic.independence_p_values(E, n_threads=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # one n x n Gram matrix would be 72 MB; numpy reports its buffers to tracemalloc
    assert peak < 8 * 3000 * 3000 / 8


def test_memory_is_checked_before_allocating(monkeypatch):
    monkeypatch.setattr(hsic, "_available_host_memory", lambda: 10_000)
    E = errors(500, 3, 331)
    with pytest.raises(MemoryError, match=r"HSIC p-values of 3 variables on 500 samples need"):
        hsic.independence_p_values(E)


def test_progress_true_reports_on_stderr(capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "tqdm", None)  # the plain line
    E = errors(120, 3, 332)
    P = hsic.independence_p_values(E, progress=True, block_size=16)
    err = capsys.readouterr().err
    assert re.search(r"p-values: (\d+)/\1 tiles \(100%\)", err) and err.endswith("\n")
    np.testing.assert_array_equal(P, hsic.independence_p_values(E, block_size=16))
    hsic.independence_p_values(E, progress=False)
    hsic.independence_p_values(E, progress="auto")  # not a terminal here, and short
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("bad", [{"progress": "yes"}, {"progress": 1.5}, {"block_size": 0},
                                 {"block_size": 2.5}, {"block_size": True},
                                 {"backend": "gpu"}, {"n_threads": 0}, {"n_threads": 1.0}])
def test_bad_options_are_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        hsic.independence_p_values(errors(50, 3, 333), **bad)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_ctrl_c_stops_at_once_and_leaves_the_module_usable(monkeypatch, sigint_raises, n_threads):
    import os
    import signal

    E = errors(400, 3, 334)
    expected = hsic.independence_p_values(E, block_size=20, n_threads=1)
    calls = []
    step = hsic._Progress.update

    def step_and_interrupt(self, k=1):
        step(self, k)
        calls.append(self.n)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C would

    monkeypatch.setattr(hsic._Progress, "update", step_and_interrupt)
    with pytest.raises(KeyboardInterrupt):
        hsic.independence_p_values(E, block_size=20, n_threads=n_threads)
    assert len(calls) == 3  # raised before the next task's result was taken
    assert calls[-1] < 2 * 210  # of 2 x 210 tiles
    assert not [t for t in threading.enumerate() if t.name.startswith("paralingam-hsic")]
    monkeypatch.setattr(hsic._Progress, "update", step)
    np.testing.assert_array_equal(
        hsic.independence_p_values(E, block_size=20, n_threads=n_threads), expected)


@pytest.mark.parametrize("n, block", [(600, 16), (257, 64), (1000, None)])
def test_results_are_bitwise_the_same_for_any_thread_count(n, block):
    E = with_outliers(n, 4, 335)
    one = hsic.independence_p_values(E, block_size=block, n_threads=1)
    for threads in (2, 3, 8):
        np.testing.assert_array_equal(
            hsic.independence_p_values(E, block_size=block, n_threads=threads), one)


# --------------------------------------------------------------------------
# The GPU path (kernels/hsic.cu) against the CPU path and lingam
# --------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("n, p, seed", [(6, 3, 340), (257, 4, 341), (1000, 6, 342)])
def test_gpu_p_values_equal_cpu_and_lingam(n, p, seed):
    E = errors(n, p, seed)
    P_gpu = hsic.independence_p_values(E, backend="cuda")
    P_cpu = hsic.independence_p_values(E, backend="cpu")
    np.testing.assert_allclose(P_gpu, P_cpu, rtol=1e-10, atol=1e-300)
    np.testing.assert_array_equal(P_gpu, P_gpu.T)
    np.testing.assert_allclose(P_gpu, lingam_p_values(E), rtol=1e-8, atol=1e-10)


@pytest.mark.gpu
def test_gpu_sums_equal_cpu_sums_over_many_launches(monkeypatch):
    # launches of a few rows and of fewer pairs than there are: every chunk
    # boundary of _cuda_launches is crossed, n is no multiple of any chunk
    E = with_outliers(301, 5, 343)
    widths = [hsic.kernel_width(E[:, i]) for i in range(5)]
    Z = np.vstack([hsic._scaled(E[:, i], w) for i, w in enumerate(widths)])
    cpu = hsic._sums_cpu(list(Z[:, None, :]), 64, False)
    whole = hsic._sums_cuda(Z, False)
    monkeypatch.setattr(hsic, "_GPU_LAUNCH_WORK", 301 * 5 * 7)   # row sums: 7 rows a launch
    monkeypatch.setattr(hsic, "_GPU_MAX_PAIRS", 3)               # 10 pairs in 4 batches
    monkeypatch.setattr(hsic, "_GPU_PARTIAL_DOUBLES", 3 * 11)    # 11 rows a pair launch
    chunked = hsic._sums_cuda(Z, False)
    iu = np.triu_indices(5, k=1)  # the pairs (the diagonals are not used)
    for stat, var_sum, mu in (whole, chunked):
        np.testing.assert_allclose(stat[iu], cpu[0][iu], rtol=1e-11, atol=0)
        np.testing.assert_allclose(var_sum[iu], cpu[1][iu], rtol=1e-11, atol=0)
        np.testing.assert_allclose(mu, cpu[2], rtol=1e-12, atol=0)
        np.testing.assert_array_equal(stat[iu], stat.T[iu])
        np.testing.assert_array_equal(var_sum[iu], var_sum.T[iu])


@pytest.mark.gpu
def test_gpu_outliers_and_constant_columns():
    E = with_outliers(500, 5, 344)
    E[:, 3] = 2.5  # constant: p-values 1
    P = hsic.independence_p_values(E, backend="cuda")
    np.testing.assert_array_equal(P[3, [0, 1, 2, 4]], 1.0)
    keep = [0, 1, 2, 4]
    np.testing.assert_allclose(P[np.ix_(keep, keep)], lingam_p_values(E[:, keep]),
                               rtol=1e-8, atol=1e-10)


@pytest.mark.gpu
def test_gpu_estimator_p_values_equal_cpu_after_ctrl_c(monkeypatch, sigint_raises):
    import os
    import signal

    from paralingam import DirectLiNGAM

    rng = np.random.default_rng(345)
    X = rng.uniform(-1, 1, size=(2000, 4))
    X[:, 1] += 0.8 * X[:, 0]
    X[:, 3] += 0.5 * X[:, 1] - 0.3 * X[:, 2]
    model = DirectLiNGAM(backend="cuda").fit(X)
    cpu = model.set_params(backend="cpu").get_error_independence_p_values(X)
    model.set_params(backend="cuda")
    step = hsic._Progress.update

    def step_and_interrupt(self, k=1):
        step(self, k)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(hsic, "_GPU_LAUNCH_WORK", 2000 * 6 * 50)
    monkeypatch.setattr(hsic._Progress, "update", step_and_interrupt)
    with pytest.raises(KeyboardInterrupt):
        model.get_error_independence_p_values(X)
    monkeypatch.setattr(hsic._Progress, "update", step)
    # the context stays usable and the result is the CPU path's on the same errors
    P = model.get_error_independence_p_values(X)
    np.testing.assert_allclose(P, cpu, rtol=1e-10, atol=1e-300)


@pytest.mark.gpu
def test_gpu_memory_is_checked_before_allocating(monkeypatch):
    from paralingam.search import _cuda

    monkeypatch.setattr(hsic, "_gpu_bytes_needed", lambda n, q: 1 << 60)
    with pytest.raises(_cuda.GPUMemoryError, match="HSIC p-values of 3 variables on 200 samples"):
        hsic.independence_p_values(errors(200, 3, 346), backend="cuda")
    monkeypatch.undo()
    assert np.isfinite(hsic.independence_p_values(errors(200, 3, 346), backend="cuda")).all()


def test_progress_uses_tqdm_when_installed(monkeypatch):
    import sys
    import types

    bars = []

    class FakeTqdm:
        def __init__(self, total, initial, **kwargs):
            self.total, self.n, self.closed = total, initial, False
            bars.append(self)

        def update(self, k):
            self.n += k

        def close(self):
            self.closed = True

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeTqdm))
    hsic.independence_p_values(errors(200, 3, 347), progress=True, block_size=10, n_threads=2)
    assert len(bars) == 1 and bars[0].closed
    assert bars[0].n == bars[0].total == 2 * 210  # both passes over the 20 x 21 / 2 tiles


def test_progress_auto_shows_on_a_terminal_only(monkeypatch, capsys):
    import sys

    from paralingam import _progress

    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setattr(_progress, "AUTO_DELAY_S", 0.0)
    monkeypatch.setattr(_progress, "stderr_is_terminal", lambda: False)
    hsic.independence_p_values(errors(200, 3, 348), progress="auto", block_size=10)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(_progress, "stderr_is_terminal", lambda: True)
    hsic.independence_p_values(errors(200, 3, 348), progress="auto", block_size=10)
    assert "p-values: 420/420 tiles (100%)" in capsys.readouterr().err


def test_non_finite_errors_and_bad_constant_flags_are_refused():
    E = errors(50, 3, 349)
    with pytest.raises(ValueError, match="constant must have one entry per column of E"):
        hsic.independence_p_values(E, constant=[True, False])
    E[7, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        hsic.independence_p_values(E)
