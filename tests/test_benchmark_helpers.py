"""The A/B helpers the benchmark scripts share (benchmarks/_common.py), and
the wrapped clocks and alternated constants of benchmarks/probe_small_phases.py.

A variant's compile options that leaked past its A/B, or a malformed
``--variant`` taken as an empty one, would time the wrong kernels without
a sign; these run without a GPU (the kernel compile is a stand-in).
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
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


@pytest.fixture(scope="module")
def probe():
    # Its own imports (_common, bench_pipeline) need benchmarks/ on the path, and
    # bench_pipeline puts the source tree first, as a script run from it wants:
    # the path is restored whole, or later tests' subprocesses and workers would
    # import the uninstalled source tree instead of the package under test.
    saved = list(sys.path)
    sys.path.insert(0, str(COMMON.parent))
    try:
        spec = importlib.util.spec_from_file_location("probe_small_phases",
                                                      COMMON.parent / "probe_small_phases.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


def test_timers_clock_named_functions_and_put_them_back(probe):
    from paralingam.adjacency import _common as adjacency_common

    original = adjacency_common._permuted
    with probe.Timers(["paralingam.adjacency._common:_permuted"]) as timers:
        assert adjacency_common._permuted is not original
        adjacency_common._permuted(np.eye(3), [2, 0, 1])
        adjacency_common._permuted(np.eye(3), [0, 1, 2])
    assert adjacency_common._permuted is original
    got = timers.per_fit(2)["paralingam.adjacency._common:_permuted"]
    assert got["calls"] == 1.0 and got["ms"] >= 0.0 and got["minor_faults"] >= 0.0


def test_ab_alternates_the_constants_and_restores_them_after_an_error(probe, monkeypatch):
    from paralingam.adjacency import _common as adjacency_common

    seen = []

    def fake_fit(X, backend):
        seen.append(adjacency_common.THREADED_ENTRIES)
        if len(seen) == 5:
            raise RuntimeError("stop")
        return type("R", (), {"causal_order": [0, 1], "stats": {"time": {"search": 1.0}}})()

    monkeypatch.setattr(probe.bench_pipeline, "make_data", lambda *args, **kw: None)
    setting = probe.parse_setting("paralingam.adjacency._common:THREADED_ENTRIES=7")
    with pytest.raises(RuntimeError, match="stop"):
        probe.ab_case("sachs_p_values", "cpu", 3, "", [setting], fake_fit)
    default = 1 << 18
    assert seen == [default, 7, default, 7, default]  # A, B, A, B, ...
    assert adjacency_common.THREADED_ENTRIES == default
    with pytest.raises(SystemExit, match="--ab: paralingam.adjacency._common has no setting "
                                         "THREADED_ENTRY$"):
        probe.parse_setting("paralingam.adjacency._common:THREADED_ENTRY=7")
    with pytest.raises(SystemExit, match="--ab: 'THREADED_ENTRIES=seven' needs a Python literal"):
        probe.parse_setting("paralingam.adjacency._common:THREADED_ENTRIES=seven")


def test_write_result_puts_a_named_section_beside_the_main_result(common, tmp_path, monkeypatch):
    import argparse
    import json

    monkeypatch.setenv("PARALINGAM_COMMIT", "abc1234")
    path = tmp_path / "result.json"
    args = argparse.Namespace(json=str(path), machine="box", _benchmark="probe", _gpu=False)
    common.write_result(args, {"value": 1})
    common.write_result(args, {"value": 2}, section="other")
    data = json.loads(path.read_text())
    assert data["value"] == 1 and data["other"]["value"] == 2
    assert data["other"]["provenance"]["commit"] == "abc1234"
    common.write_result(args, {"value": 3})  # the main result again: the section stays
    data = json.loads(path.read_text())
    assert data["value"] == 3 and data["other"]["value"] == 2
    # a mode other than the script's first writes the mode's section, as before
    moded = argparse.Namespace(**vars(args), _modes=["main", "busy-cores"], mode="busy-cores")
    common.write_result(moded, {"value": 4})
    assert json.loads(path.read_text())["busy_cores"]["value"] == 4
