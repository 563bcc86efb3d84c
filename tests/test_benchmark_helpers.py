"""The A/B helpers the benchmark scripts share (benchmarks/_common.py).

A variant's compile options that leaked past its A/B, or a malformed
``--variant`` taken as an empty one, would time the wrong kernels without
a sign; these run without a GPU (the kernel compile is a stand-in).
"""

import importlib.util
from pathlib import Path

import pytest

from paralingam.search import _cuda

COMMON = Path(__file__).resolve().parents[1] / "benchmarks" / "_common.py"


@pytest.fixture(scope="module")
def common():
    spec = importlib.util.spec_from_file_location("benchmarks_common", COMMON)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def compiles(monkeypatch):
    calls = []

    def fake(source, warps, min_blocks, peers=False, options=()):
        calls.append((source, peers, tuple(options)))
        return b"cubin"

    monkeypatch.setattr(_cuda, "compile_kernels", fake)
    return calls


def test_compile_hook_adds_the_variant_and_restores_the_compile(common, compiles):
    plain = _cuda.compile_kernels
    active = ["peers only"]

    def change(source, peers):
        if active[0] == "peers only":
            return ("other source" if peers else source), (("-DA=1",) if peers else ())
        return source, ("-DB",)

    with common.compile_hook(change):
        assert _cuda.compile_kernels is not plain
        _cuda.compile_kernels("src", 8, 5, True, ("-O3",))
        _cuda.compile_kernels("src", 8, 5, False, ("-O3",))
        active[0] = "every module"
        _cuda.compile_kernels("src", 8, 5, False)
    assert _cuda.compile_kernels is plain
    assert compiles == [("other source", True, ("-O3", "-DA=1")), ("src", False, ("-O3",)),
                        ("src", False, ("-DB",))]


def test_compile_hook_restores_the_compile_after_an_error(common, compiles):
    plain = _cuda.compile_kernels
    with pytest.raises(RuntimeError, match="a search failed"):
        with common.compile_hook(lambda source, peers: (source, ("-DX",))):
            raise RuntimeError("a search failed")
    assert _cuda.compile_kernels is plain


def test_parse_variants_keeps_order_and_splits_options(common):
    assert common.parse_variants(["both=-DA=1 -DB=1", "one=-DC"], "x=-DY") == {
        "both": ("-DA=1", "-DB=1"), "one": ("-DC",)}
    assert common.parse_variants([], "x=-DY") == {}


@pytest.mark.parametrize("specs, says", [
    (["nolabel"], "give LABEL=OPTIONS"),
    (["=-DA"], "give LABEL=OPTIONS"),
    (["empty=  "], "give LABEL=OPTIONS"),
    (["default=-DA"], "is taken"),
    (["a=-DA", "a=-DB"], "is taken"),
])
def test_parse_variants_refuses_malformed_or_taken_labels(common, specs, says):
    with pytest.raises(SystemExit, match=says):
        common.parse_variants(specs, "x=-DY")


def test_engine_alive_share_is_alive_time_over_engines_and_search_time(common):
    # 100 engines per round alive 0.5 s each at 2 GHz over a 1 s search: half
    stats = {"engines": 100 * 4, "alive_cycles": 100 * 2e9 * 0.5}
    assert common.engine_alive_share(stats, 4, 1.0, 2e9) == pytest.approx(0.5)


def test_host_settings_splits_multi_settings_from_compile_options(common):
    options, settings = common.host_settings(
        ("-DPL_CLAIM_BATCH=2", "MULTI_COPY_KERNEL=False", "MULTI_SPREAD_WORK=1e7"))
    assert options == ("-DPL_CLAIM_BATCH=2",)
    assert settings == {"MULTI_COPY_KERNEL": False, "MULTI_SPREAD_WORK": 1e7}
    assert common.host_settings(("-O3",)) == (("-O3",), {})


@pytest.mark.parametrize("option, says", [("MULTI_NO_SUCH=1", "no setting MULTI_NO_SUCH"),
                                          ("MULTI_COPY_KERNEL=yes", "Python literal")])
def test_host_settings_refuses_unknown_settings_and_non_literals(common, option, says):
    with pytest.raises(SystemExit, match=says):
        common.host_settings((option,))
