"""lingam's VARLiNGAM and multi-group tutorials (examples/lingam_family_tutorials.py)
on lingam and, unchanged, on paralingam: the same printout and values."""

import contextlib
import importlib.util
import io
from pathlib import Path

import numpy as np
import pytest
from lingam_oracle import lingam_module, live_lingam

live_lingam()  # runs lingam's own tutorial code
pytest.importorskip("pandas")
pytest.importorskip("graphviz")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "lingam_family_tutorials.py"
N_SAMPLING = 20  # the tutorials' 100 would make lingam's side slow


def load_example():
    spec = importlib.util.spec_from_file_location("lingam_family_tutorials", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", params=["run_var", "run_multi_group"])
def runs(request):
    example = load_example()
    out = []
    for use_paralingam in (False, True):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            values = getattr(example, request.param)(example.import_lingam(use_paralingam),
                                                     n_sampling=N_SAMPLING)
        out.append((buffer.getvalue(), values))
    return out


def test_prints_the_same(runs):
    (theirs, _), (ours, _) = runs
    assert ours.splitlines() == theirs.splitlines()
    assert "DAG[0]" in ours and "<---" in ours


def test_values_are_the_same(runs):
    (_, theirs), (_, ours) = runs
    assert ours.keys() == theirs.keys()
    assert ours["causal_order"] == theirs["causal_order"]
    np.testing.assert_allclose(ours["adjacency_matrices"], theirs["adjacency_matrices"], atol=1e-8)
    np.testing.assert_allclose(ours["p_values"], theirs["p_values"], rtol=1e-8, atol=1e-10)
    assert ours["causal_direction_counts"] == theirs["causal_direction_counts"]
    assert ours["dag_counts"] == theirs["dag_counts"]
    for key in ("from", "to", "probability"):
        assert ours["total_effects"][key] == theirs["total_effects"][key]
    np.testing.assert_allclose(ours["total_effects"]["effect"], theirs["total_effects"]["effect"],
                               atol=1e-8)
    assert ours["paths"]["path"] == theirs["paths"]["path"]
    assert ours["paths"]["probability"] == theirs["paths"]["probability"]
    if "total_effect_3_1" in theirs:
        np.testing.assert_allclose(ours["total_effect_3_1"], theirs["total_effect_3_1"], rtol=1e-9)
