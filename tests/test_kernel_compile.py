"""The one compile entry of the GPU steps (paralingam._gpu.cubin) and the compiles it starts ahead.

No GPU needed: PyCUDA's compile is replaced by a stand-in that records its calls.
"""

import threading

import pytest

from paralingam import _gpu


@pytest.fixture
def nvcc(monkeypatch):
    calls = []
    monkeypatch.setattr(_gpu, "_COMPILES", {})

    def fake(source, options, arch):
        calls.append((source, tuple(options), arch))
        if source.startswith("bad"):
            raise RuntimeError(f"nvcc failed on {source}")
        return f"cubin of {source} {' '.join(options)} {arch}".encode()

    monkeypatch.setattr(_gpu, "_nvcc", fake)
    return calls


def test_cubin_compiles_each_source_with_its_options_and_arch(nvcc):
    assert _gpu.cubin("a", ["-O3"], "sm_90") == b"cubin of a -O3 sm_90"
    assert _gpu.cubin("a", ("-O2",), "sm_80") == b"cubin of a -O2 sm_80"
    assert nvcc == [("a", ("-O3",), "sm_90"), ("a", ("-O2",), "sm_80")]


def test_compiles_started_ahead_run_at_once_and_are_used_once(nvcc, monkeypatch):
    both_running = threading.Barrier(2, timeout=10)
    fake = _gpu._nvcc

    def together(source, options, arch):  # returns only if the other compile runs meanwhile
        both_running.wait()
        return fake(source, options, arch)

    monkeypatch.setattr(_gpu, "_nvcc", together)
    _gpu.compile_soon([("a", ("-O3",)), ("b", ["-O3"])], "sm_90")
    assert _gpu.cubin("a", ["-O3"], "sm_90") == b"cubin of a -O3 sm_90"
    assert _gpu.cubin("b", ("-O3",), "sm_90") == b"cubin of b -O3 sm_90"
    _gpu.compile_soon([("a", ("-O3",))], "sm_90")  # started once per process
    assert sorted(nvcc) == [("a", ("-O3",), "sm_90"), ("b", ("-O3",), "sm_90")]
    # another arch or other options are other compiles
    monkeypatch.setattr(_gpu, "_nvcc", fake)
    assert _gpu.cubin("a", ["-O3"], "sm_80") == b"cubin of a -O3 sm_80"
    assert len(nvcc) == 3


def test_a_failed_compile_ahead_is_compiled_again_and_its_error_raised(nvcc):
    _gpu.compile_soon([("bad source", ())], "sm_90")
    with pytest.raises(RuntimeError, match="nvcc failed on bad source"):
        _gpu.cubin("bad source", [], "sm_90")
    assert nvcc == [("bad source", (), "sm_90")] * 2
