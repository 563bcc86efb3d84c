"""paralingam.utils against lingam.utils (lingam 1.13)."""

import itertools
import signal
import sys
import time

import numpy as np
import pytest
from lingam_oracle import lingam_module

from paralingam import utils

lingam_utils = lingam_module("lingam.utils", __name__)


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
    from paralingam.lingam.bootstrap import BootstrapResult

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


def test_total_effect_equals_the_sum_over_paths_on_random_dags():
    from paralingam.lingam.bootstrap import find_all_paths

    rng = np.random.default_rng(602)
    for _ in range(60):
        p = int(rng.integers(2, 8))
        B = np.tril(rng.normal(size=(p, p)) * (rng.random((p, p)) < 0.7), -1)
        perm = rng.permutation(p)
        B = B[np.ix_(perm, perm)]  # not in index order
        B[rng.integers(p), rng.integers(p)] = np.nan  # NaN: no edge
        for frm, to in itertools.permutations(range(p), 2):
            want = sum(find_all_paths(B, frm, to)[1])
            got = utils.calculate_total_effect(B, frm, to)
            assert got == pytest.approx(want, rel=1e-12, abs=1e-15)
            assert got == pytest.approx(lingam_utils.calculate_total_effect(B, frm, to),
                                        rel=1e-12, abs=1e-15)
            if want == 0 and not find_all_paths(B, frm, to)[0]:
                assert got == 0.0  # no path: exactly zero


def test_total_effect_errors_on_cycles_and_discrete_variables_are_kept():
    # a cycle reachable from from_index (before to_index) is an error, as in the
    # path search; one through to_index, or elsewhere, is not
    B = np.zeros((4, 4))
    B[1, 0] = B[2, 1] = B[1, 2] = B[3, 2] = 1.0  # 0 -> 1 <-> 2 -> 3
    with pytest.raises(ValueError, match="cyclic graph"):
        utils.calculate_total_effect(B, 0, 3)
    assert utils.calculate_total_effect(B, 0, 2) == 1.0  # paths stop at 2
    assert utils.calculate_total_effect(B, 3, 0) == 0.0  # 3 reaches nothing
    B = np.tril(np.ones((4, 4)), -1)
    with pytest.raises(ValueError, match="continuous"):
        utils.calculate_total_effect(B, 1, 3, is_continuous=[True, True, False, True])
    # a discrete variable off every path from 1 to 3 is fine
    assert utils.calculate_total_effect(B, 1, 3, is_continuous=[False, True, True, True]) == 2.0


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_total_effect_of_a_dense_dag_is_fast():
    # Listing the paths took 1.6 s at p=20 and doubles with every variable
    # (2**38 paths here): the closed form takes milliseconds.
    p = 40
    B = np.tril(np.random.default_rng(603).uniform(-0.5, 0.5, (p, p)), -1)

    def too_slow(signum, frame):
        raise TimeoutError("calculate_total_effect took over 10 s")

    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.setitimer(signal.ITIMER_REAL, 10.0)
    try:
        start = time.perf_counter()
        effect = utils.calculate_total_effect(B, 0, p - 1)
        elapsed = time.perf_counter() - start
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)
    # the sum over all directed paths: entry [to, from] of (I - B)^{-1}
    assert effect == pytest.approx(np.linalg.inv(np.eye(p) - B)[p - 1, 0], rel=1e-10)
    assert elapsed < 1.0


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
