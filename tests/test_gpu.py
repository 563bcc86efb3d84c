"""CUDA backend against the numpy reference (skipped without a usable GPU)."""

import numpy as np
import pytest

import paralingam
from paralingam import reference
from paralingam._backends import cuda_unavailable_reason
from paralingam.datasets import make_lingam_data

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(cuda_unavailable_reason() is not None,
                       reason=f"CUDA backend unavailable: {cuda_unavailable_reason()}"),
]

CASES = [(10, 500, "sparse", 1), (25, 1024, "dense", 2), (40, 2048, "sparse", 3),
         (60, 1000, "dense", 4)]


@pytest.mark.parametrize("p,n,density,seed", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cuda_order_equals_reference(p, n, density, seed, dtype):
    X, _, _ = make_lingam_data(p, n, density=density, random_state=seed)
    expected, _ = reference.causal_order(X)
    res = paralingam.fit(X, backend="cuda", dtype=dtype)
    assert res.stats["backend"] == "cuda"
    assert res.causal_order == expected


@pytest.mark.parametrize("p,n,density,seed", CASES[:2])
def test_cuda_threshold_off_and_block_sizes_same_order(p, n, density, seed):
    X, _, _ = make_lingam_data(p, n, density=density, random_state=seed)
    base = paralingam.fit(X, backend="cuda").causal_order
    assert paralingam.fit(X, backend="cuda", threshold=False).causal_order == base
    for block in (64, 512):
        assert paralingam.fit(X, backend="cuda", threads_per_block=block).causal_order == base
    assert paralingam.fit(X, backend="cpu").causal_order == base


def test_cuda_large_p_equals_cpu():
    # p >= 500: the CPU backend equals the reference on the same seeded grid
    # (tests/test_cpu_backend.py); the reference itself is too slow here.
    X, _, _ = make_lingam_data(500, 1024, density="sparse", random_state=11)
    cpu = paralingam.fit(X, backend="cpu")
    for dtype in ("float32", "float64"):
        gpu = paralingam.fit(X, backend="cuda", dtype=dtype)
        assert gpu.causal_order == cpu.causal_order


def test_cuda_ecoli_core(ecoli_full_or_subset):
    X = ecoli_full_or_subset
    ref_order, ref_expl = reference.causal_order(X[:1000])
    with pytest.warns(paralingam.DegenerateDataWarning):
        res = paralingam.fit(X[:1000], backend="cuda")
    assert res.causal_order == ref_order
    assert res.stats["explained"] == ref_expl
    assert np.isfinite(res.adjacency_matrix).all()


def test_cuda_deterministic():
    X, _, _ = make_lingam_data(50, 1024, density="dense", random_state=5)
    runs = [paralingam.fit(X, backend="cuda").causal_order for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]


@pytest.fixture
def ecoli_full_or_subset():
    from pathlib import Path

    data = np.load(Path(__file__).parent / "data" / "ecoli_core_subset.npz")
    return data["X"]
