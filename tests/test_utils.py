"""paralingam.utils against lingam.utils (lingam 1.13)."""

import sys

import numpy as np
import pytest

from paralingam import utils

lingam_utils = pytest.importorskip("lingam.utils")


def test_make_prior_knowledge_equals_lingam():
    cases = [
        {"n_variables": 4},
        {"n_variables": 6, "exogenous_variables": [3], "sink_variables": [1, 4]},
        {"n_variables": 5, "paths": [(0, 1), (2, 4)], "no_paths": [(1, 0), (4, 2), (3, 3)]},
        {"n_variables": 5, "exogenous_variables": [0], "sink_variables": [0],
         "paths": [(1, 0)], "no_paths": [(0, 2)]},  # overrides in lingam's order
    ]
    for kwargs in cases:
        np.testing.assert_array_equal(utils.make_prior_knowledge(**kwargs),
                                      lingam_utils.make_prior_knowledge(**kwargs))


def bootstrap_counts():
    from paralingam.bootstrap import BootstrapResult

    rng = np.random.default_rng(601)
    mats = np.tril(rng.normal(size=(10, 4, 4)) * (rng.random((10, 4, 4)) < 0.6), -1)
    return BootstrapResult(mats, mats)


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("labels", [None, ["a", "b", "c", "d"]])
def test_printers_equal_lingam(capsys, split, labels):
    result = bootstrap_counts()
    cdc = result.get_causal_direction_counts(split_by_causal_effect_sign=split)
    dagc = result.get_directed_acyclic_graph_counts(n_dags=3, split_by_causal_effect_sign=split)
    assert cdc["count"] and dagc["count"]
    outputs = []
    for module in (utils, lingam_utils):
        module.print_causal_directions(cdc, 10, labels=labels)
        module.print_dagc(dagc, 10, labels=labels)
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert "<---" in outputs[0]


def test_make_dot_source_equals_lingam():
    B = np.array([[0.0, 0.0, 0.5], [1.234, 0.0, 0.0], [0.0, 0.0, 0.0]])
    B_nan = B.copy()
    B_nan[2, 1] = np.nan
    for matrix, kwargs in [(B, {}), (B, {"labels": ["u", "v", "w"], "lower_limit": 0.6}),
                           (B_nan, {})]:
        assert utils.make_dot(matrix, **kwargs).source == \
            lingam_utils.make_dot(matrix, **kwargs).source
    # lingam-only drawing options go to lingam's make_dot
    assert utils.make_dot(B, path=(2, 1)).source == lingam_utils.make_dot(B, path=(2, 1)).source
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        utils.make_dot(B, colour="red")
    with pytest.raises(ValueError, match="not square"):
        utils.make_dot(np.zeros((2, 3)))


def test_make_dot_without_graphviz_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz now fails
    with pytest.raises(ImportError, match=r"pip install 'paralingam\[plot\]'"):
        utils.make_dot(np.zeros((2, 2)))


def test_total_effect_helpers_equal_lingam():
    B = np.array([[0, 0, 0, 0], [2.0, 0, 0, 0], [0.5, -1.0, 0, 0], [0, 3.0, 0.25, 0]])
    for frm, to in [(0, 3), (0, 2), (1, 3), (3, 0)]:
        assert utils.calculate_total_effect(B, frm, to) == pytest.approx(
            lingam_utils.calculate_total_effect(B, frm, to), rel=1e-14)
    with pytest.raises(ValueError, match="mustn't be the same"):
        utils.calculate_total_effect(B, 1, 1)
    with pytest.raises(ValueError, match="continuous"):
        utils.calculate_total_effect(B, 0, 3, is_continuous=[True, False, True, True])
    assert utils.get_sink_variables(B) == lingam_utils.get_sink_variables(B) == [3]
    assert utils.get_exo_variables(B) == lingam_utils.get_exo_variables(B) == [0]
