"""paralingam.DirectLiNGAM against lingam.DirectLiNGAM (lingam 1.13), and its API."""

import inspect
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
from lingam_cases import random_prior_knowledge, tutorial_data
from lingam_oracle import lingam_module, live_lingam

import paralingam
from paralingam import DirectLiNGAM
from paralingam.adjacency import ols_adjacency

lingam = lingam_module("lingam", __name__)

# Small cases: lingam's own search is slow.
CASES = [(5, 200, "sparse", 501), (7, 300, "dense", 502)]
# Single-threaded search: these problems are too small to gain from threads.
FAST = {"n_threads": 1}



def model(**kwargs):
    kwargs.setdefault("fit_options", FAST)
    return DirectLiNGAM(backend="cpu", **kwargs)


@pytest.fixture(scope="module")
def fitted_pair(lingam_data):
    """lingam's and our model fitted on the same data: ``(X, theirs, ours)``."""
    X = lingam_data(*CASES[1])[0]
    return X, lingam.DirectLiNGAM().fit(X), model().fit(X)


# --------------------------------------------------------------------------
# Results equal lingam's
# --------------------------------------------------------------------------

@pytest.mark.parametrize("p, n, density, seed", CASES)
def test_fit_equals_lingam(lingam_data, p, n, density, seed):
    X = lingam_data(p, n, density, seed)[0]
    theirs = lingam.DirectLiNGAM().fit(X)
    ours = model().fit(X)
    assert ours.causal_order_ == [int(i) for i in theirs.causal_order_]
    np.testing.assert_allclose(ours.adjacency_matrix_, theirs.adjacency_matrix_, rtol=0, atol=1e-8)


def test_fit_equals_lingam_on_tutorial_data():
    X = tutorial_data()
    theirs = lingam.DirectLiNGAM().fit(X)
    ours = model().fit(X)
    assert ours.causal_order_ == [3, 0, 2, 1, 4, 5] == list(theirs.causal_order_)
    np.testing.assert_allclose(ours.adjacency_matrix_, theirs.adjacency_matrix_, rtol=0, atol=1e-8)


def test_p_values_equal_lingam(fitted_pair):
    X, theirs, ours = fitted_pair
    np.testing.assert_allclose(ours.get_error_independence_p_values(X),
                               theirs.get_error_independence_p_values(X), rtol=1e-8, atol=1e-10)


def test_p_values_of_a_fully_explained_variable_are_one(lingam_data):
    # its error is zero up to rounding: independent of the others (the test
    # itself would give NaN, with numpy warnings, or rounding noise)
    X = np.array(lingam_data(4, 300, "sparse", 512)[0])
    Y = np.column_stack([X, X[:, 1] - 0.5 * X[:, 3]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = model().fit(Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P = fitted.get_error_independence_p_values(Y)
    assert np.isfinite(P).all()
    np.testing.assert_array_equal(P[4, :4], 1.0)
    np.testing.assert_array_equal(P[:4, 4], 1.0)
    assert P[4, 4] == 0.0
    # the other pairs are the test's, as lingam computes it on their errors
    P_rest = paralingam.lingam.hsic.independence_p_values(
        (Y - Y @ fitted.adjacency_matrix_.T)[:, :4])
    np.testing.assert_allclose(P[:4, :4], P_rest, rtol=1e-12, atol=0)


@pytest.mark.parametrize("scale", [1e-170, 1e-300, (1.0, 1e-200, 1.0, 1.0)],
                         ids=["1e-170", "1e-300", "column-1e-200"])
def test_p_values_of_tiny_columns_are_those_at_ordinary_scale(lingam_data, scale):
    # the errors' variances and kernel widths underflowed: every p-value was 1
    X = np.array(lingam_data(4, 300, "sparse", 513)[0])
    s = np.broadcast_to(np.asarray(scale, dtype=np.float64), (4,))
    base = model().fit(X).get_error_independence_p_values(X)
    assert base[np.triu_indices(4, 1)].min() < 0.9
    P = model().fit(X * s).get_error_independence_p_values(X * s)
    np.testing.assert_allclose(P, base, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_p_values_of_fewer_than_six_samples_are_refused(n):
    # lingam's formula divides by zero at n=3 and gives NaN at n=4, 5
    X = np.random.RandomState(0).uniform(size=(n, 3))
    # (3 samples in 3 variables: the third is explained by the first two)
    fitted = paralingam.DirectLiNGAM(
        adjacency="ols", fit_options={"n_threads": 1, "on_collinear": "ignore"}).fit(X)
    with pytest.raises(ValueError, match=f"at least 6 samples.*got {n}"):
        fitted.get_error_independence_p_values(X)


def test_total_effects_equal_lingam(fitted_pair):
    X, theirs, ours = fitted_pair
    order = ours.causal_order_
    for frm, to in [(order[0], order[-1]), (order[1], order[3]), (order[2], order[-1])]:
        assert ours.estimate_total_effect(X, frm, to) == pytest.approx(
            theirs.estimate_total_effect(X, frm, to), rel=1e-10, abs=1e-12)


def test_total_effect_against_the_order_warns_as_lingam(fitted_pair):
    X, theirs, ours = fitted_pair
    late, early = ours.causal_order_[-1], ours.causal_order_[0]
    with pytest.warns(UserWarning, match="may be incorrect"):
        got = ours.estimate_total_effect(X, late, early)
    with pytest.warns(UserWarning, match="may be incorrect"):
        ref = theirs.estimate_total_effect(X, late, early)
    assert got == pytest.approx(ref, rel=1e-10, abs=1e-12)


def test_bootstrap_equals_lingam_on_the_same_seed(lingam_data):
    X = lingam_data(5, 150, "dense", 503)[0]
    np.random.seed(7)
    theirs = lingam.DirectLiNGAM().bootstrap(X, n_sampling=8)
    np.random.seed(7)
    ours = model().bootstrap(X, n_sampling=8)
    for a, b in zip(ours.resampled_indices_, theirs.resampled_indices_):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(ours.adjacency_matrices_, theirs.adjacency_matrices_,
                               rtol=0, atol=1e-8)
    np.testing.assert_allclose(ours.total_effects_, theirs.total_effects_, rtol=0, atol=1e-8)
    kw = {"min_causal_effect": 0.01, "split_by_causal_effect_sign": True}
    assert ours.get_causal_direction_counts(**kw) == theirs.get_causal_direction_counts(**kw)
    assert ours.get_directed_acyclic_graph_counts(**kw) == \
        theirs.get_directed_acyclic_graph_counts(**kw)
    np.testing.assert_array_equal(ours.get_probabilities(0.01), theirs.get_probabilities(0.01))


def test_prior_knowledge_equals_lingam(lingam_data):
    X = lingam_data(6, 300, "sparse", 504)[0]
    pk = random_prior_knowledge(6, 504, frac_no_path=0.2)
    for softly in (False, True):
        theirs = lingam.DirectLiNGAM(prior_knowledge=pk, apply_prior_knowledge_softly=softly).fit(X)
        ours = model(prior_knowledge=pk, apply_prior_knowledge_softly=softly).fit(X)
        assert ours.causal_order_ == [int(i) for i in theirs.causal_order_]
        np.testing.assert_allclose(ours.adjacency_matrix_, theirs.adjacency_matrix_,
                                   rtol=0, atol=1e-8)


# --------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------

def test_constructor_arguments_keep_lingams_names_and_positions():
    ours = list(inspect.signature(DirectLiNGAM).parameters)
    assert ours[:4] == list(inspect.signature(live_lingam().DirectLiNGAM).parameters)


def test_ols_adjacency_and_coef_threshold(lingam_data):
    X = lingam_data(8, 400, "dense", 506)[0]
    ours = model(adjacency="ols").fit(X)
    np.testing.assert_allclose(ours.adjacency_matrix_, ols_adjacency(X, ours.causal_order_),
                               rtol=1e-12, atol=1e-15)
    B = ours.adjacency_matrix_
    cut = model(adjacency="ols", coef_threshold=0.2).fit(X).adjacency_matrix_
    assert (np.abs(B) < 0.2).any() and (np.abs(B) >= 0.2).any()
    np.testing.assert_array_equal(cut, np.where(np.abs(B) < 0.2, 0.0, B))


def test_fit_options_reach_paralingam_fit(lingam_data):
    X = lingam_data(6, 200, "sparse", 507)[0]
    ours = model(fit_options={"threshold": False, "n_threads": 1}).fit(X)
    assert ours.fit_stats_["backend"] == "cpu"
    # threshold=False compares every pair
    assert ours.fit_stats_["compared"] == ours.fit_stats_["pairs"]
    assert ours.causal_order_ == model().fit(X).causal_order_


def test_bootstrap_random_state_and_fitted_model(lingam_data):
    X = lingam_data(5, 120, "sparse", 508)[0]
    est = model(random_state=3, adjacency="ols").fit(X)
    before = est.adjacency_matrix_.copy()
    first = est.bootstrap(X, 4)
    np.random.seed(0)  # an int random_state ignores numpy's global state
    second = est.bootstrap(X, 4)
    np.testing.assert_array_equal(first.adjacency_matrices_, second.adjacency_matrices_)
    np.testing.assert_array_equal(est.adjacency_matrix_, before)  # left as fitted
    rows = first.resampled_indices_[2]
    again = model(adjacency="ols").fit(X[rows])
    np.testing.assert_array_equal(first.adjacency_matrices_[2], again.adjacency_matrix_)
    third = model(random_state=4, adjacency="ols").bootstrap(X, 4)
    assert not np.array_equal(third.resampled_indices_[0], first.resampled_indices_[0])


def test_bootstrap_draws_from_the_input_itself_whatever_its_float_layout(lingam_data,
                                                                        monkeypatch):
    # float input is not copied to float64 as a whole: each resample is its
    # rows, made float64, with the values (hence results) of the copy's rows
    import pandas as pd
    from paralingam.lingam import bootstrap as bootstrap_module

    X = np.ascontiguousarray(lingam_data(5, 150, "sparse", 510)[0])
    X32 = X.astype(np.float32)
    sources = []
    fit_resample = bootstrap_module.fit_resample

    def spy(model, data, *args):
        sources.append(data)
        return fit_resample(model, data, *args)

    monkeypatch.setattr(paralingam.lingam.estimator, "fit_resample", spy)
    cases = {"float64": X, "Fortran": np.asfortranarray(X), "float32": X32,
             "frame": pd.DataFrame(X32), "int": np.round(X * 100).astype(np.int64)}
    for name, data in cases.items():
        sources.clear()
        got = model(random_state=7, adjacency="ols").bootstrap(data, 3)
        copy = np.asarray(data, dtype=np.float64)  # the values the resamples had before
        want = [model(adjacency="ols").fit(copy[rows]).adjacency_matrix_
                for rows in got.resampled_indices_]
        np.testing.assert_array_equal(got.adjacency_matrices_, np.array(want), err_msg=name)
        if name not in ("int", "frame"):  # (those come as a float64 copy, as fit reads them)
            assert all(np.shares_memory(s, data) for s in sources), name


def test_bootstrap_names_a_column_constant_in_a_resample(lingam_data):
    # A column with one odd row is constant in most resamples: the error
    # names the resample and the column, not just "constant columns".
    import pandas as pd

    X = np.array(lingam_data(4, 40, "sparse", 509)[0])
    X[:, 2] = 0.1
    X[3, 2] = 1.1
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    est = model(random_state=0, adjacency="ols").fit(frame)  # X itself is fine
    with pytest.raises(ValueError, match=r"bootstrap resample \d+ \(0-based\) has constant "
                       r"columns: column 2 \('c'\) \(the resample drew only rows where it is "
                       r"0\.1: 39 of the data's 40 rows\)"):
        est.bootstrap(frame, 20)
    # three distinct values in three rows: the value the resample drew, once in the data
    with pytest.raises(ValueError, match=r"column 0 \(the resample drew only rows where it is "
                       r"-?[\d.e+-]+: 1 of the data's 3 rows\)"):
        from paralingam._validation import constant_in_resample

        constant_in_resample(X[:3], X[[1, 1, 1]], 0)


def test_bootstrap_progress_goes_to_stderr(lingam_data, capsys):
    X = lingam_data(4, 100, "sparse", 509)[0]
    model(adjacency="ols").bootstrap(X, 3, progress=True)
    captured = capsys.readouterr()
    assert "bootstrap" in captured.err and captured.out == ""
    model(adjacency="ols").bootstrap(X, 3)
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------
# scikit-learn conventions
# --------------------------------------------------------------------------

def test_get_params_set_params_clone(lingam_data):
    from sklearn.base import clone

    est = DirectLiNGAM()
    params = est.get_params()
    assert params == {
        "random_state": None, "prior_knowledge": None, "apply_prior_knowledge_softly": False,
        "measure": "pwling", "backend": "auto", "adjacency": "adaptive_lasso",
        "coef_threshold": None, "fit_options": None, "devices": None,
    }

    assert est.set_params(adjacency="ols", random_state=5) is est
    assert est.get_params()["adjacency"] == "ols"
    with pytest.raises(ValueError, match="Invalid parameter"):
        est.set_params(gamma=2)

    X = lingam_data(5, 150, "sparse", 510)[0]
    est.set_params(backend="cpu", fit_options=FAST).fit(X)
    copy = clone(est)
    assert copy.get_params() == est.get_params()
    assert not hasattr(copy, "causal_order_")
    assert copy.fit(X).causal_order_ == est.causal_order_


def test_parameters_are_stored_verbatim_and_checked_in_fit(lingam_data):
    X = lingam_data(4, 100, "sparse", 511)[0]
    est = DirectLiNGAM(measure="kernel", adjacency="nope")  # no error yet
    assert est.measure == "kernel"
    with pytest.raises(ValueError, match=r"measure must be one of \('pwling',\); got 'kernel'.*"
                                          r"not implemented in paralingam"):
        est.fit(X)
    bad = [
        ({"measure": "pwling_fast"}, "pwling_fast"),
        ({"measure": "entropy"}, "measure must be one of"),
        ({"adjacency": "lasso"}, r"adjacency must be one of \('adaptive_lasso', 'ols'\)"),
        ({"backend": "gpu"}, "backend must be one of"),
        ({"coef_threshold": -1.0}, "coef_threshold must be None or a finite number >= 0"),
        ({"apply_prior_knowledge_softly": "yes"}, "apply_prior_knowledge_softly must be"),
        ({"fit_options": {"gamma": 1}}, r"paralingam.fit does not take: \['gamma'\]"),
        ({"fit_options": {"backend": "cpu"}}, r"must not set \['backend'\]"),
        ({"prior_knowledge": np.zeros((3, 3))}, r"shape \(4, 4\) .*; got shape \(3, 3\)"),
        ({"prior_knowledge": np.full((4, 4), 2)}, r"must be -1 or NaN .*invalid at \[0, 0\] = 2\.0,"),
        # random_state: what bootstrap's RandomState resampling can use, checked in fit
        ({"random_state": "x"}, r"random_state must be None, an int or a numpy.random.RandomState; got 'x'"),
        ({"random_state": 1.5}, r"random_state must be .*; got 1.5"),
        ({"random_state": True}, r"random_state must be .*; got True"),
        ({"random_state": -1}, r"random_state must be in \[0, 2\*\*32 - 1\]; got -1"),
        ({"random_state": 2**32}, r"random_state must be in \[0, 2\*\*32 - 1\]"),
        ({"random_state": np.random.default_rng(0)}, r"pass an int seed instead of a Generator"),
    ]
    for params, message in bad:
        with pytest.raises(ValueError, match=message):
            DirectLiNGAM(**params).fit(X)


def test_bad_calls_name_the_problem(fitted_pair):
    X, _, ours = fitted_pair
    for bad in (0, -2, 1.5, True, "10"):
        with pytest.raises(ValueError, match="n_sampling must be an integer greater than 0"):
            ours.bootstrap(X, bad)
    with pytest.raises(ValueError, match="progress must be"):
        ours.bootstrap(X, 2, progress="yes")
    with pytest.raises(ValueError, match=r"X has 3 columns but the model was fitted on 7"):
        ours.get_error_independence_p_values(X[:, :3])
    with pytest.raises(ValueError, match=r"column index must be an int in \[0, 7\); got 7"):
        ours.estimate_total_effect(X, 0, 7)
    with pytest.raises(AttributeError, match="not fitted"):
        DirectLiNGAM().estimate_total_effect(X, 0, 1)
    with pytest.raises(AttributeError):
        DirectLiNGAM().causal_order_


def test_dataframe_names(lingam_data):
    pd = pytest.importorskip("pandas")
    X = lingam_data(5, 200, "sparse", 512)[0]
    names = ["a", "b", "c", "d", "e"]
    df = pd.DataFrame(X, columns=names)
    est = model().fit(df)
    np.testing.assert_array_equal(est.feature_names_in_, names)
    assert est.n_features_in_ == 5
    assert est.causal_order_names_ == [names[i] for i in est.causal_order_]
    first, last = est.causal_order_[0], est.causal_order_[-1]
    assert est.estimate_total_effect(df, names[first], names[last]) == \
        est.estimate_total_effect(X, first, last)
    with pytest.raises(ValueError, match="unknown column 'z'"):
        est.estimate_total_effect(df, "z", "a")
    with pytest.raises(ValueError, match="column names differ from those seen in fit: 'q' != 'a'"):
        est.get_error_independence_p_values(df.rename(columns={"a": "q"}))

    est.fit(pd.DataFrame(X))  # integer column names: none kept, as in scikit-learn
    assert not hasattr(est, "feature_names_in_")
    est.fit(df)
    est.fit(X)  # refitted on an array: no names any more
    assert not hasattr(est, "feature_names_in_")
    assert est.causal_order_names_ == [f"x{i}" for i in est.causal_order_]


def test_import_paralingam_stays_light():
    code = ("import sys, paralingam; heavy = [m for m in ('sklearn', 'scipy', 'pandas', "
            "'graphviz', 'lingam') if m in sys.modules]; assert not heavy, heavy; "
            "assert paralingam.DirectLiNGAM.__name__ == 'DirectLiNGAM'; "
            "assert 'sklearn' in sys.modules; paralingam.utils.print_dagc")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_warnings_do_not_leak_from_a_clean_fit(lingam_data):
    X = lingam_data(6, 300, "dense", 513)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model().fit(X)


@pytest.mark.parametrize("options", ["abc", ["n_threads"], 1, [("n_threads", 1)]])
def test_fit_options_must_be_a_dict(lingam_data, options):
    X = lingam_data(4, 100, "sparse", 511)[0]
    with pytest.raises(ValueError, match=r"fit_options must be None or a dict of paralingam.fit "
                                         r"keyword arguments, such as \{'n_threads': 1\}; got "
                                         + re.escape(repr(options))):
        DirectLiNGAM(backend="cpu", fit_options=options).fit(X)
    # keys of mixed types are listed, not compared ("'<' not supported")
    with pytest.raises(ValueError, match=r"does not take: \['x', 1\]"):
        DirectLiNGAM(backend="cpu", fit_options={"x": 0, 1: 0}).fit(X)


def test_fitted_attributes_raise_not_fitted_before_fit(lingam_data):
    from sklearn.exceptions import NotFittedError

    est = DirectLiNGAM()
    # was an AttributeError about n_features_in_
    with pytest.raises(NotFittedError, match="not fitted yet; call fit"):
        est.causal_order_names_
    with pytest.raises(NotFittedError, match="not fitted yet; call fit"):
        est.estimate_total_effect(lingam_data(4, 100, "sparse", 511)[0], 0, 1)
    assert not hasattr(est, "causal_order_names_") and not hasattr(est, "causal_order_")


def test_degenerate_data_warnings_point_at_the_callers_line(lingam_data):
    X = np.array(lingam_data(4, 300, "sparse", 905)[0])
    X[:, 3] = X[:, 0] + X[:, 1]
    calls = {
        "DirectLiNGAM.fit": lambda: model(adjacency="ols").fit(X),
        "DirectLiNGAM.bootstrap": lambda: model(adjacency="ols").bootstrap(X, 1),
        "paralingam.fit": lambda: paralingam.fit(X, backend="cpu", n_threads=1),
    }
    for what, call in calls.items():
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            call()
        found = [w for w in record if issubclass(w.category, paralingam.DegenerateDataWarning)]
        assert found, what
        assert {w.filename for w in found} == {__file__}, (what, found[0].filename)


@pytest.mark.parametrize("shape", [(20, 40), (8, 8)])
def test_the_adaptive_lasso_refuses_too_few_samples_before_the_search(shape, monkeypatch,
                                                                     tmp_path, capsys):
    # Without prior knowledge the last variable of any order has p - 1
    # predictors, and the lasso's BIC needs n > p: the search ran in full
    # (32 s at p=4000, n=20) before the per-target check refused its result
    from paralingam import _api, cli

    def no_search(*args, **kwargs):
        raise AssertionError("searched")

    monkeypatch.setattr(_api, "search", no_search)
    X = np.random.default_rng(0).laplace(size=shape)
    message = "needs more samples than predictors + 1"
    with pytest.raises(ValueError, match=f"{re.escape(message)}.*use adjacency='ols'"):
        paralingam.DirectLiNGAM(backend="cpu").fit(X)
    with pytest.raises(ValueError, match=re.escape(message)):
        paralingam.DirectLiNGAM(backend="cpu").bootstrap(X, 2, progress=False)
    np.savetxt(tmp_path / "x.csv", X, delimiter=",")
    assert cli.main(["fit", str(tmp_path / "x.csv"), "--no-header", "--backend", "cpu"]) == 2
    assert "use --adjacency ols" in capsys.readouterr().err
    # (prior knowledge can leave the last variable fewer predictors: the
    # per-target check after the search decides there)
    pk = -np.ones((shape[1], shape[1]))
    monkeypatch.undo()
    with pytest.raises(ValueError, match=re.escape(message)):
        paralingam.DirectLiNGAM(backend="cpu", prior_knowledge=pk).fit(X)
