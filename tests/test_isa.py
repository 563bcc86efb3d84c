"""Runtime choice of the compiled CPU build (paralingam._isa)."""

import importlib

import numpy as np
import pytest

import paralingam
from paralingam import _isa
from paralingam.search import reference
from paralingam.datasets import make_lingam_data

pytest.importorskip("paralingam.search._cpu", reason="the CPU extension is not built")


def _builds():
    """The builds this installation has and this processor runs."""
    flags = _isa._cpu_flags()
    found = [_isa.BASELINE]
    for level, needed in _isa.LEVELS.items():
        if needed <= flags:
            try:
                importlib.import_module(f"paralingam.search._cpu_{level}")
            except ImportError:
                continue
            found.append(level)
    return found


@pytest.fixture
def build(monkeypatch):
    def use(level):
        monkeypatch.setenv("PARALINGAM_CPU_BUILD", level)
        _isa.level.cache_clear()
    yield use
    _isa.level.cache_clear()
    _isa._load.cache_clear()


def test_the_best_build_the_processor_runs_is_chosen(monkeypatch):
    monkeypatch.delenv("PARALINGAM_CPU_BUILD", raising=False)
    _isa.level.cache_clear()
    try:
        flags = _isa._cpu_flags()
        want = next((lv for lv, needed in _isa.LEVELS.items() if needed <= flags), _isa.BASELINE)
        assert _isa.level() == want
        module = _isa.load("search._cpu")
        if want in _builds():
            assert module.__name__ == f"paralingam.search._cpu_{want}" or want == _isa.BASELINE
    finally:
        _isa.level.cache_clear()


def test_every_build_gives_the_same_result(build):
    X = np.asarray(make_lingam_data(25, 800, density="sparse", random_state=5)[0])
    X[:3, 0] = 1e6  # an outlier, as the degenerate-data policy must see it alike
    want = reference.causal_order(X)[0]
    results = {}
    for level in _builds():
        build(level)
        assert _isa.load("search._cpu").__name__.endswith(level if level != _isa.BASELINE else "_cpu")
        fit = paralingam.fit(X, backend="cpu")
        model = paralingam.DirectLiNGAM(backend="cpu").fit(X)
        assert list(fit.causal_order) == list(want), level
        assert list(model.causal_order_) == list(want), level
        results[level] = (fit.adjacency_matrix, model.adjacency_matrix_)
    base_ols, base_lasso = results[_isa.BASELINE]
    for level, (ols, lasso) in results.items():
        # builds differ in rounding (FMA contraction, vector widths) only
        np.testing.assert_allclose(ols, base_ols, rtol=0, atol=1e-10, err_msg=level)
        np.testing.assert_allclose(lasso, base_lasso, rtol=0, atol=1e-8, err_msg=level)


def test_multi_group_and_lasso_builds_load(build):
    for level in _builds():
        build(level)
        for name in ("adjacency._lasso", "search._multi_group", "search._cpu_testing"):
            module = _isa.load(name)
            suffix = "" if level == _isa.BASELINE else f"_{level}"
            assert module.__name__ == f"paralingam.{name}{suffix}"


def test_unknown_forced_build_is_refused(build):
    build("avx9000")
    with pytest.raises(ValueError, match="PARALINGAM_CPU_BUILD='avx9000'"):
        _isa.level()


def test_missing_level_build_falls_back_to_the_baseline(build, monkeypatch):
    build("x86_64_v4")
    real = importlib.import_module

    def without_levels(name, *args):
        if name.endswith("_x86_64_v4"):
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(_isa.importlib, "import_module", without_levels)
    _isa._load.cache_clear()
    assert _isa.load("search._cpu").__name__ == "paralingam.search._cpu"
