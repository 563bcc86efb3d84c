"""The adaptive lasso's LARS paths on the GPU against the CPU engine and lingam.

Skipped without a usable GPU (the ``gpu`` marker, see conftest.py).
"""

import warnings

import numpy as np
import pytest
from lingam_cases import lingam_adjacency, random_prior_knowledge, tutorial_data

from paralingam import reference
from paralingam.adjacency import adaptive_lasso_adjacency

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def gpu_at_every_size(monkeypatch):
    """Send every size to the GPU (by default small problems stay on the CPU)."""
    from paralingam import adjacency

    monkeypatch.setattr(adjacency, "CUDA_LASSO_MIN_FEATURES", 0)


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
    p, n = 560, 1500
    X = mixed_data(p, n, 4)[:, np.random.default_rng(4).permutation(p)]
    gpu, cpu = both(X, list(range(p)))
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-10)


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
    np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-10)
    assert np.isfinite(gpu).all()


def test_estimator_on_cuda_equals_lingam(lingam_data):
    import paralingam

    X = lingam_data(20, 500, "sparse", 217)[0]
    model = paralingam.DirectLiNGAM(backend="cuda").fit(X)
    np.testing.assert_allclose(model.adjacency_matrix_,
                               lingam_adjacency(X, model.causal_order_), rtol=0, atol=1e-8)
