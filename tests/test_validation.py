"""Input and parameter validation: every mistake gets a ValueError naming it."""

import itertools
import re
import warnings
from fractions import Fraction

import numpy as np
import pytest

import paralingam
from paralingam.search import reference
from paralingam._validation import as_data_matrix

pytest.importorskip("paralingam.search._cpu", reason="the CPU extension is not built")


def fit_cpu(X, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paralingam.DegenerateDataWarning)
        return paralingam.fit(X, backend="cpu", **kwargs)


@pytest.fixture(scope="module")
def small(lingam_data):
    """A (300, 6) sample and its reference order."""
    X = np.array(lingam_data(6, 300, "dense", 801)[0])
    return X, reference.causal_order(X)[0]


def raises(match, X, **kwargs):
    with pytest.raises(ValueError, match=match) as info:
        fit_cpu(X, **kwargs)
    return str(info.value)


# --------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------

@pytest.mark.parametrize("X, match", [
    (np.arange(5.0), r"2-D .*shape \(5,\).*reshape\(-1, 1\)"),
    (np.zeros((4, 3, 2)), r"2-D .*shape \(4, 3, 2\)"),
    (np.float64(3.0), r"2-D .*got a float64"),
    (None, r"2-D .*got a NoneType"),
    ("abc", r"2-D .*got a str"),
    ([], r"2-D .*shape \(0,\)"),
    (np.zeros((0, 3)), r"at least 3 samples; got 0 \(shape \(0, 3\)\)"),
    (np.ones((2, 3)), r"at least 3 samples; got 2 \(shape \(2, 3\)\)"),
    (np.zeros((10, 0)), r"no variables \(shape \(10, 0\)\)"),
    ([[1.0, 2.0], [3.0], [4.0, 5.0]], r"ragged.*different lengths \(1, 2\)"),
    (np.array([[1.0, 2.0], [3.0], [4.0, 5.0]], dtype=object), r"ragged.*lengths \(1, 2\)"),
    ([[[1.0], [2.0]], [[3.0], 4.0]], r"cannot be read as a 2-D numeric table"),
], ids=["1-D", "3-D", "scalar", "None", "str", "empty-list", "no-rows", "2-rows", "no-columns",
        "ragged-list", "ragged-object-array", "ragged-deep"])
def test_bad_shapes_are_named(X, match):
    raises(match, X)


def test_one_variable_and_three_samples_are_enough():
    assert fit_cpu(np.array([[1.0], [2.0], [4.0]])).causal_order == [0]
    res = fit_cpu(np.array([[1.0, 2.0], [2.0, 1.0], [4.0, 9.0]]))
    assert sorted(res.causal_order) == [0, 1]
    assert np.isfinite(res.stats["scores"]).all()


# --------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------

def test_lists_ints_bools_and_numeric_objects_are_accepted(small):
    X, order = small
    assert fit_cpu(X.tolist()).causal_order == order
    assert fit_cpu(X.astype(object)).causal_order == order
    assert fit_cpu(np.asfortranarray(X)).causal_order == order
    rng = np.random.default_rng(802)
    ints = rng.integers(-50, 50, size=(200, 4))
    ref_order = reference.causal_order(ints)[0]
    for arr in (ints, ints.astype(np.int8), (ints + 50).astype(np.uint16)):
        assert fit_cpu(arr).causal_order == ref_order
    bools = rng.random((200, 4)) < [0.2, 0.5, 0.7, 0.9]
    res = fit_cpu(bools)
    assert sorted(res.causal_order) == [0, 1, 2, 3]
    assert res.causal_order == reference.causal_order(bools)[0]


@pytest.mark.parametrize("X, match", [
    (np.array([["1", "2"], ["3", "4"], ["5", "7"]]), r"non-numeric columns: column 0, column 1 \(dtype <U1\)"),
    (np.array([[1.0, "a"], [2.0, "b"], [3.0, "c"]], dtype=object), r"non-numeric columns: column 1: 'a' in row 0$"),
    (np.array([[1.0, 2.0], [2.0, None], [3.0, 1.0]], dtype=object), r"non-numeric columns: column 1: None in row 1$"),
    (np.array(["2020-01-01", "2020-01-02", "2020-01-05"], dtype="datetime64[D]").reshape(3, 1),
     r"non-numeric columns: column 0 \(dtype datetime64\[D\]\)"),
    (np.ones((5, 2)) + 1j * np.arange(10.0).reshape(5, 2), r"must be real; got complex"),
    (np.array([[1.0, 2j], [2.0, 1.0], [3.0, 5.0]], dtype=object), r"must be real; got complex"),
], ids=["strings", "object-strings", "object-None", "datetime", "complex", "object-complex"])
def test_non_numeric_input_is_named(X, match):
    raises(match, X)


# --------------------------------------------------------------------------
# NaN, inf, masked values
# --------------------------------------------------------------------------

def test_nan_and_inf_name_the_columns_and_counts(small):
    X = small[0].copy()
    X[[3, 7], 2] = np.nan
    X[11, 4] = -np.inf
    X[12, 4] = np.nan
    msg = raises("NaN, missing or infinite", X)
    assert "column 2: 2 NaN/missing" in msg
    assert "column 4: 1 NaN/missing, 1 infinite" in msg
    assert not re.search(r"column [0135]", msg)
    # float32 and object input too
    raises(r"column 2: 2 NaN/missing", X.astype(np.float32))
    obj = small[0].astype(object)
    obj[0, 1] = float("inf")
    raises(r"column 1: 1 infinite", obj)


def test_many_bad_columns_are_summarised(small):
    X = np.tile(small[0], (1, 3))
    X[0, :] = np.nan
    msg = raises("NaN", X)
    assert msg.endswith("and 8 more")


def test_masked_values_are_named(small):
    X = np.ma.masked_array(small[0], mask=np.zeros(small[0].shape, bool))
    assert fit_cpu(X).causal_order == small[1]  # no masked entry: fine
    X.mask[[0, 5, 9], 3] = True
    raises(r"masked \(missing\) values in columns: column 3: 3 masked", X)


# --------------------------------------------------------------------------
# Constant columns and extreme values
# --------------------------------------------------------------------------

def test_constant_columns_are_named(small):
    X = small[0].copy()
    X[:, 1] = 7.25
    X[:, 4] = 1e-300
    raises(r"constant columns \(zero variance\): column 1, column 4$", X)
    # Constant up to one ulp is constant.
    X = small[0].copy()
    X[:, 0] = 1.0
    X[::2, 0] = np.nextafter(1.0, 2.0)
    raises(r"constant columns \(zero variance\): column 0$", X)
    raises("constant columns", np.column_stack([small[0][:, :2], np.ones(300, bool)]))


def test_near_constant_column_is_data(small):
    # A relative spread of 1e-11 is well above rounding: legal data.
    X = small[0].copy()
    X[:, 2] = 1e6 + 1e-5 * X[:, 2]
    res = fit_cpu(X)
    assert sorted(res.causal_order) == list(range(6))
    assert np.isfinite(res.adjacency_matrix).all() and np.isfinite(res.stats["scores"]).all()


def test_values_too_large_to_square_in_float64_are_refused(small):
    X = small[0].copy()
    X[:, 3] *= 1e200
    raises(r"too large to centre and square in float64 in columns: column 3 \(rescale", X)
    # A column at 1e150 still squares fine.
    X = small[0].copy()
    X[:, 3] *= 1e150
    assert fit_cpu(X).causal_order == small[1]


def test_float32_input_near_its_overflow_gives_the_reference_order(lingam_data):
    # Values near +-3.4e38 are finite float32 numbers, but centring and
    # squaring them in float32 overflows. The pipeline converts to float64
    # before centring, so these data are fine.
    X = np.array(lingam_data(6, 400, "sparse", 803)[0])
    X32 = (X / np.abs(X).max(axis=0) * 3.3e38).astype(np.float32)
    assert np.isfinite(X32).all() and np.abs(X32).max() > 3.2e38
    with np.errstate(over="ignore"):
        c32 = X32 - X32.mean(axis=0, dtype=np.float32)
        assert not np.isfinite((c32 * c32).sum(axis=0, dtype=np.float32)).any()
    ref_order, _, ref_scores = reference.causal_order(X32, return_scores=True)
    res = fit_cpu(X32)
    assert res.causal_order == ref_order
    np.testing.assert_allclose(res.stats["scores"], ref_scores, rtol=1e-6, atol=1e-15)
    assert np.isfinite(res.adjacency_matrix).all()
    # the order is that of the same data at ordinary scale
    assert res.causal_order == fit_cpu(X32.astype(np.float64) / 1e38).causal_order


def test_tiny_columns_do_not_underflow(small):
    # Squares of values ~1e-170 underflow to 0 in float64: the search works on
    # exactly rescaled columns, so the order is that of the unscaled data.
    X, order = small
    for scale in (1e-170, 1e-250, 1e-300):
        Xs = X.copy()
        Xs[:, [1, 4]] *= scale
        res = fit_cpu(Xs)
        assert res.causal_order == order, scale
        assert reference.causal_order(Xs)[0] == order, scale
        assert np.isfinite(res.adjacency_matrix).all()


def test_adjacency_of_rescaled_columns_is_rescaled(small):
    # Least squares on columns ~1e-170 used to underflow (X.T @ X) and lose
    # the edges of those columns; the coefficients scale with the columns.
    X = small[0]
    base = fit_cpu(X).adjacency_matrix
    s = np.ones(6)
    s[[1, 4]] = 1e-170
    s[2] = 1e100  # every weight stays a normal float64 (ratios down to 1e-270)
    res = fit_cpu(X * s)
    np.testing.assert_allclose(res.adjacency_matrix * s[None, :] / s[:, None], base,
                               rtol=1e-9, atol=1e-12)
    assert np.count_nonzero(base) == np.count_nonzero(res.adjacency_matrix)


def test_edge_weights_beyond_float64_are_named():
    rng = np.random.default_rng(804)
    a = rng.uniform(-1, 1, 500) ** 3
    b = a + 0.1 * rng.laplace(size=500)
    X = np.column_stack([a * 1e-300, b * 1e150])  # weight of column 0 on 1: ~1e450
    assert reference.causal_order(X)[0] == [0, 1]
    raises(r"edge weight of column 0 on column 1 exceeds float64", X)


@pytest.mark.skipif(np.finfo(np.longdouble).max <= np.finfo(np.float64).max,
                    reason="long double is float64 on this platform")
def test_long_double_beyond_float64_is_named(small):
    X = small[0].astype(np.longdouble)
    X[:, 5] *= np.longdouble(10) ** 400
    raises(r"too large for float64 in columns: column 5$", X)


def test_python_integers_beyond_float64_are_named(small):
    X = small[0].astype(object)
    X[4, 2] = 10**400
    raises(r"too large for float64 in columns: column 2$", X)


def test_sparse_like_input_gets_a_hint():
    class Sparse:  # what np.asarray makes of a scipy.sparse matrix: a 0-d object
        def toarray(self):
            return np.eye(3)

    raises(r"got a Sparse \(a sparse matrix: pass X.toarray\(\)\)", Sparse())


# --------------------------------------------------------------------------
# pandas
# --------------------------------------------------------------------------

def test_feature_names_reach_messages_and_results(small):
    X, order = small
    cols = [f"g{k}" for k in range(6)]
    res = fit_cpu(X, feature_names=cols)
    assert res.names == cols and res.causal_order_names == [cols[k] for k in order]
    X2 = X.copy()
    X2[:, 2] = 1.0
    with pytest.raises(ValueError, match=r"constant columns \(zero variance\): column 2 \('g2'\)$"):
        fit_cpu(X2, feature_names=cols)
    with pytest.raises(ValueError, match="one name per column: X has 6 columns, got 5 names"):
        fit_cpu(X, feature_names=cols[:5])
    with pytest.raises(ValueError, match="got a string"):
        fit_cpu(X, feature_names="abcdef")
    with pytest.raises(ValueError, match=r"column names must be unique: 'g1' \(columns 1, 4\), "
                                         r"'g2' \(columns 2, 3, 5\) repeated"):
        fit_cpu(X, feature_names=["g0", "g1", "g2", "g2", "g1", "g2"])


def test_feature_names_may_be_any_iterable(small):
    X, order = small
    cols = [f"g{k}" for k in range(6)]
    res = fit_cpu(X, feature_names=(c for c in cols), n_threads=1)  # had "no len()"
    assert res.names == cols and res.causal_order_names == [cols[k] for k in order]
    assert fit_cpu(X, feature_names=np.array(cols), n_threads=1).names == cols
    with pytest.raises(ValueError, match="X has 6 columns, got 5 names"):
        fit_cpu(X, feature_names=iter(cols[:5]))
    with pytest.raises(ValueError, match="feature_names must be a sequence of names, one per "
                                         "column; got 6"):
        fit_cpu(X, feature_names=6)


def test_labels_equal_as_text_are_shown_by_their_reprs(small):
    # 1 and "1" are different labels: the message shows both, not '1' twice
    pd = pytest.importorskip("pandas")
    X = small[0]
    expected = (r"column names must be unique: '1' \(columns 0 = 1, 2 = '1'\) repeated "
                r"\(labels are compared as text\)")
    raises(expected, pd.DataFrame(X, columns=[1, "a", "1", "b", "c", "d"]))
    raises(expected, X, feature_names=[1, "a", "1", "b", "c", "d"])
    # the same label twice is shown as before
    raises(r"unique: '1' \(columns 0, 2\) repeated$", X,
           feature_names=[1, "a", 1, "b", "c", "d"])


def test_dataframe_names_reach_messages_and_results(small):
    pd = pytest.importorskip("pandas")
    X, order = small
    cols = [f"v{k}" for k in range(6)]
    df = pd.DataFrame(X, columns=cols)
    res = fit_cpu(df)
    assert res.causal_order == order and res.names == cols
    assert res.causal_order_names == [cols[k] for k in order]
    df2 = df.copy()
    df2.iloc[[1, 2], 3] = np.nan
    raises(r"column 3 \('v3'\): 2 NaN/missing", df2)
    df3 = df.copy()
    df3["v1"] = 5.0
    raises(r"constant columns \(zero variance\): column 1 \('v1'\)$", df3)
    raises(r"column names must be unique: 'v0' \(columns 0, 2\) repeated",
           df.set_axis(["v0", "v1", "v0", "v3", "v4", "v5"], axis=1))


def test_dataframe_column_types(small):
    pd = pytest.importorskip("pandas")
    X, order = small
    df = pd.DataFrame(X, columns=list("abcdef"))
    # Nullable numeric, boolean and numeric object columns are numbers.
    nullable = df.astype({"a": "Float64", "b": "object"})
    nullable["g"] = pd.array(X[:, 0] > 0, dtype="boolean")
    nullable["h"] = (X[:, 1] > 0)
    nullable["i"] = pd.array(np.round(X[:, 2] * 10).astype(int), dtype="Int64")
    res = fit_cpu(nullable)
    expected = reference.causal_order(nullable.to_numpy(dtype=float))[0]
    assert res.causal_order == expected
    assert sorted(res.causal_order) == list(range(9))

    # pd.NA in nullable columns is missing data.
    na = nullable.copy()
    na.loc[3, "i"] = pd.NA
    na.loc[[4, 5], "g"] = pd.NA
    msg = raises("NaN, missing", na)
    assert "column 6 ('g'): 2 NaN/missing" in msg and "column 8 ('i'): 1 NaN/missing" in msg

    bad = df.copy()
    bad["cat"] = pd.Categorical(np.where(X[:, 0] > 0, "hi", "lo"))
    bad["txt"] = "x"
    bad["when"] = pd.Timestamp("2024-01-01") + pd.to_timedelta(np.arange(300), unit="D")
    bad["obj"] = pd.Series([1.0, "2"] * 150, dtype=object)
    msg = raises("non-numeric columns", bad)
    for col in ("'cat'): category dtype", "'txt'): ", "'when'): datetime64", "'obj'): object dtype"):
        assert col in msg, col
    assert "'a'" not in msg

    huge = df.astype({"a": object})
    huge.loc[0, "a"] = 10**400
    raises(r"too large for float64 in columns: column 0 \('a'\)$", huge)
    raises(r"at least 3 samples; got 2", df.iloc[:2])
    raises(r"no variables", df.iloc[:, :0])


# --------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------

BAD_PARAMETERS = [
    ("backend", "gpu"), ("backend", None), ("backend", "CPU"),
    ("threshold", "yes"), ("threshold", None), ("threshold", 1),
    ("gamma0", 0.0), ("gamma0", -1e-4), ("gamma0", float("nan")), ("gamma0", float("inf")),
    ("gamma0", "1e-4"), ("gamma0", True), ("gamma0", 5e-324), ("gamma0", 1e-310),
    # real numbers numpy has no dtype for: np.isfinite raised TypeError
    ("gamma0", 10**400), ("gamma0", Fraction(1, 10**400)), ("c", 10**400),
    ("c", Fraction(1, 2)), ("collinear_tol", Fraction(3, 2)), ("explained_tol", -10**400),
    ("c", 1.0), ("c", 0.5), ("c", 1.0 + 2.0**-52), ("c", 1.0000005), ("c", float("nan")), ("c", float("inf")), ("c", [2.0]),
    ("collinear_tol", 0.0), ("collinear_tol", 1.0), ("collinear_tol", -1e-10),
    ("collinear_tol", float("nan")),
    ("explained_tol", 0.0), ("explained_tol", 2.0), ("explained_tol", "1e-10"),
    ("n_threads", 0), ("n_threads", -2), ("n_threads", 2.0), ("n_threads", True),
    ("n_threads", "4"), ("n_threads", 10**6),
    ("dtype", "float16"), ("dtype", "int64"), ("dtype", "double precision"), ("dtype", object),
    ("on_collinear", "raise"), ("on_collinear", None), ("on_collinear", True),
    ("apply_prior_knowledge_softly", "False"), ("apply_prior_knowledge_softly", 1),
    ("apply_prior_knowledge_softly", None),
]


def _short(value):
    """A test id for ``value``: 10**400 has 401 digits."""
    r = repr(value)
    return r if len(r) <= 30 else r[:12] + "..." + r[-12:]


@pytest.mark.parametrize("name, value", BAD_PARAMETERS,
                         ids=[f"{n}={_short(v)}" for n, v in BAD_PARAMETERS])
def test_bad_parameters_are_named(small, name, value):
    with pytest.raises(ValueError) as info:
        paralingam.fit(small[0], **{name: value})
    msg = str(info.value)
    assert msg.startswith(f"{name} must be"), msg
    assert repr(value) in msg, msg


BAD_TUNING = [
    ("threads_per_block", 48), ("threads_per_block", 0), ("threads_per_block", 2048),
    ("threads_per_block", 64.0), ("threads_per_block", True), ("blocks", 0), ("blocks", 1.5),
    ("warps_per_pair", 3), ("warps_per_pair", 0), ("warps_per_pair", 2.0), ("warps_per_pair", 64),
]


@pytest.mark.parametrize("name, value", BAD_TUNING, ids=[f"{n}={v!r}" for n, v in BAD_TUNING])
def test_bad_tuning_is_named(small, name, value):
    # as a dict, as a Tuning (refused where it is made) and as the deprecated keyword
    for call in (lambda: paralingam.fit(small[0], tuning={name: value}),
                 lambda: paralingam.Tuning(**{name: value})):
        with pytest.raises(ValueError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith(f"{name} must be"), msg
        assert repr(value) in msg, msg
    with pytest.warns(DeprecationWarning, match=f"{name}=.*deprecated.*tuning="), \
            pytest.raises(ValueError, match=f"^{name} must be"):
        paralingam.fit(small[0], **{name: value})


@pytest.mark.parametrize("tuning", ["fast", 256, {"threads": 256}, [("blocks", 2)]])
def test_tuning_of_the_wrong_kind_is_named(small, tuning):
    with pytest.raises(ValueError, match="tuning"):
        paralingam.fit(small[0], tuning=tuning)


def test_deprecated_launch_keywords_still_work(small):
    X, order = small
    tuned = fit_cpu(X, tuning=paralingam.Tuning(threads_per_block=128, warps_per_pair=2))
    with pytest.warns(DeprecationWarning, match="threads_per_block=..., warps_per_pair=.*tuning="):
        old = fit_cpu(X, threads_per_block=128, warps_per_pair=2)
    assert old.causal_order == tuned.causal_order == order
    np.testing.assert_array_equal(old.adjacency_matrix, tuned.adjacency_matrix)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="both in tuning"):
        fit_cpu(X, tuning={"blocks": 2}, blocks=3)
    # the estimator's fit_options accept them too, with the same warning
    with pytest.warns(DeprecationWarning, match="blocks=.*deprecated"):
        model = paralingam.DirectLiNGAM(fit_options={"blocks": 2, "n_threads": 1}).fit(X)
    assert model.causal_order_ == order


def test_good_parameter_types_are_accepted(small):
    X, order = small
    res = fit_cpu(X, gamma0=np.float32(1e-3), c=3, n_threads=np.int64(2),
                  collinear_tol=np.float64(1e-12), explained_tol=1e-12,
                  tuning={"threads_per_block": np.int32(128)}, dtype=np.float64,
                  threshold=np.bool_(True))
    assert res.causal_order == order
    # any real number, as a float (np.isfinite raised TypeError for a Fraction)
    res = fit_cpu(X, gamma0=Fraction(1, 1000), c=Fraction(3), collinear_tol=Fraction(1, 10**12),
                  n_threads=1)
    assert res.causal_order == order


def test_extreme_threshold_parameters_terminate(small):
    # The smallest accepted gamma0 with the finest accepted factor: the
    # threshold climbs ~6e8 steps from 3e-308 to a root score (~1 s).
    X, order = small
    res = fit_cpu(X, gamma0=np.finfo(np.float64).tiny * 1.5, c=1.0000011)
    assert res.causal_order == order
    assert max(res.stats["scores"]) > 1e-6 and max(res.stats["gamma"]) > 1e-6  # it climbed


@pytest.mark.parametrize("dtype", ["float16", "int32", "double precision", 32])
def test_unknown_dtype_is_named(small, dtype):
    with pytest.raises(ValueError, match="dtype must be None, 'float64' or 'float32'"):
        paralingam.fit(small[0], backend="cpu", dtype=dtype)


# --------------------------------------------------------------------------
# The adjacency functions of paralingam.adjacency, called directly
# --------------------------------------------------------------------------

def _adjacency_functions():
    from paralingam.adjacency import adaptive_lasso_adjacency, estimate_adjacency, ols_adjacency

    return {"ols_adjacency": ols_adjacency,
            "adaptive_lasso_adjacency": adaptive_lasso_adjacency,
            "estimate_adjacency": estimate_adjacency}


def _chain(n=200, seed=7):
    rng = np.random.default_rng(seed)
    X = rng.laplace(size=(n, 4))
    X[:, 1] += 0.8 * X[:, 0]
    X[:, 2] += -0.6 * X[:, 1]
    X[:, 3] += 0.5 * X[:, 0] + 0.7 * X[:, 2]
    return X


@pytest.mark.parametrize("name", ["ols_adjacency", "adaptive_lasso_adjacency",
                                  "estimate_adjacency"])
@pytest.mark.parametrize("order, message", [
    ([0, 1, 1, 3], "each of the 4 columns once; repeated 1 and missing 2"),
    ([0, 1, 2], "each of the 4 columns once; missing 3"),
    ([0, 1, 2, 4], r"outside 0\.\.3 \(X has 4 columns\): 4"),
    ([0, 1, 2, -1], r"outside 0\.\.3 \(X has 4 columns\): -1"),
    ([0.0, 1.5, 2.0, 3.0], "integer column indices; got 0.0, 1.5"),
    ([[0, 1], [2, 3]], r"1-D sequence of column indices; got shape \(2, 2\)"),
])
def test_adjacency_functions_refuse_a_bad_order(name, order, message):
    with pytest.raises(ValueError, match=message):
        _adjacency_functions()[name](_chain(), order)


@pytest.mark.parametrize("name", ["ols_adjacency", "adaptive_lasso_adjacency",
                                  "estimate_adjacency"])
def test_adjacency_functions_refuse_bad_data(name):
    f = _adjacency_functions()[name]
    X = _chain()
    X[5, 2] = np.nan
    with pytest.raises(ValueError, match="NaN, missing or infinite values in columns: column 2"):
        f(X, [0, 1, 2, 3])
    with pytest.raises(ValueError, match="X must be 2-D"):
        f(_chain()[:, 0], [0])
    with pytest.raises(ValueError, match=r"scatter must have shape .* \(4, 4\); got \(3, 3\)"):
        f(_chain(), [0, 1, 2, 3], scatter=np.eye(3))


_ONE_THREAD = {"ols_adjacency": {}, "adaptive_lasso_adjacency": {"n_threads": 1},
               "estimate_adjacency": {"n_threads": 1}}


@pytest.mark.parametrize("name", ["ols_adjacency", "adaptive_lasso_adjacency",
                                  "estimate_adjacency"])
@pytest.mark.parametrize("scale", [1e-170, 1e-300, (1.0, 1.0, 1e-200, 1.0)],
                         ids=["1e-170", "1e-300", "column-1e-200"])
def test_adjacency_functions_of_tiny_columns_are_rescaled(name, scale):
    # Squares of values ~1e-170 underflow: the scatter matrix was zero and so
    # was every coefficient. The columns are rescaled by powers of two, as in fit.
    f, kwargs = _adjacency_functions()[name], _ONE_THREAD[name]
    X, order = _chain(), [0, 1, 2, 3]
    s = np.broadcast_to(np.asarray(scale, dtype=np.float64), (4,))
    base = f(X, order, **kwargs)
    B = f(X * s, order, **kwargs)
    assert np.count_nonzero(base) >= 3
    np.testing.assert_allclose(B * s[None, :] / s[:, None], base, rtol=1e-9, atol=1e-12)
    assert np.count_nonzero(B) == np.count_nonzero(base)


@pytest.mark.parametrize("name", ["ols_adjacency", "adaptive_lasso_adjacency",
                                  "estimate_adjacency"])
def test_adjacency_functions_rescale_a_given_scatter_matrix(name):
    from paralingam.adjacency._common import _scatter

    f, kwargs = _adjacency_functions()[name], _ONE_THREAD[name]
    X = _chain() * np.array([1.0, 1e100, 1e-100, 3.0])
    B = f(X, [0, 1, 2, 3], **kwargs)
    np.testing.assert_allclose(f(X, [0, 1, 2, 3], scatter=_scatter(X)[1], **kwargs), B,
                               rtol=1e-9, atol=0)


def test_rescaling_keeps_the_minimum_norm_rows_of_wide_data():
    # Columns of ordinary scale share one power of two: a power per column
    # would change the norm that rank-deficient rows minimise (here rows up
    # to 36x off numpy.linalg.lstsq on the data).
    from paralingam.adjacency import ols_adjacency

    rng = np.random.default_rng(231)
    X = rng.laplace(size=(12, 40)) * rng.uniform(0.1, 10, size=40)
    order = rng.permutation(40)
    B = ols_adjacency(X, order)
    Xc = X - X.mean(axis=0)
    for k in range(1, 40):
        target, earlier = order[k], order[:k]
        want, _, rank, sv = np.linalg.lstsq(Xc[:, earlier], Xc[:, target], rcond=None)
        tol = 1e-8 + np.finfo(float).eps * (sv[0] / sv[rank - 1]) ** 2  # normal equations
        np.testing.assert_allclose(B[target, earlier], want, rtol=0,
                                   atol=tol * max(1.0, np.abs(want).max()))


def test_adjacency_functions_name_edge_weights_beyond_float64():
    from paralingam.adjacency import ols_adjacency

    rng = np.random.default_rng(804)
    a = rng.uniform(-1, 1, 500) ** 3
    X = np.column_stack([a * 1e-300, (a + 0.1 * rng.laplace(size=500)) * 1e150])
    with pytest.raises(ValueError, match="edge weight of column 0 on column 1 exceeds float64"):
        ols_adjacency(X, [0, 1])


@pytest.mark.parametrize("name", ["adaptive_lasso_adjacency", "estimate_adjacency"])
@pytest.mark.parametrize("value", [0, -1, 1.5, 10**6, True, "4"])
def test_adjacency_functions_refuse_bad_thread_counts(name, value):
    with pytest.raises(ValueError, match=re.escape(
            f"n_threads must be an integer >= 1 and <= 1024; got {value!r}")):
        _adjacency_functions()[name](_chain(), [0, 1, 2, 3], n_threads=value)


def test_default_threads_are_capped_at_the_cores(tmp_path):
    # OpenMP's default is OMP_NUM_THREADS unchecked: 100000 threads crashed
    # the order search and the adaptive lasso (p >= 64 runs its targets in
    # threads) with a segfault
    import os
    import subprocess
    import sys

    script = tmp_path / "many_threads.py"
    script.write_text(
        "import numpy as np, paralingam\n"
        "from paralingam.adjacency import adaptive_lasso_adjacency\n"
        "rng = np.random.default_rng(0)\n"
        "res = paralingam.fit(rng.laplace(size=(2000, 10)), backend='cpu')\n"
        "B = adaptive_lasso_adjacency(rng.laplace(size=(300, 70)), list(range(70)))\n"
        "assert np.isfinite(B).all()\n"
        "from paralingam._validation import _usable_cores, default_threads\n"
        "assert max(res.stats['threads']) <= _usable_cores(), res.stats['threads']\n"
        "assert 1 <= default_threads() <= min(_usable_cores(), 1024)\n"
        "print('done')\n")
    env = dict(os.environ, OMP_NUM_THREADS="100000",
               PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr


def test_default_threads_follow_threadpool_limits():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from paralingam._validation import default_threads

    with threadpoolctl.threadpool_limits(1, user_api="openmp"):
        assert default_threads() == 1


@pytest.mark.parametrize("name", ["ols_adjacency", "adaptive_lasso_adjacency"])
def test_adjacency_functions_take_lists_float32_frames_and_integral_floats(name):
    pd = pytest.importorskip("pandas")
    f = _adjacency_functions()[name]
    X = _chain()
    B = f(X, [0, 1, 2, 3])
    assert abs(B[3, 2]) > 0.3 and B[0].tolist() == [0.0] * 4  # a real graph, not zeros
    np.testing.assert_array_equal(f(X.tolist(), [0, 1, 2, 3]), B)
    np.testing.assert_array_equal(f(pd.DataFrame(X, columns=list("abcd")), (0, 1, 2, 3)), B)
    np.testing.assert_array_equal(f(X, np.array([0.0, 1.0, 2.0, 3.0])), B)
    X32 = X.astype(np.float32)
    np.testing.assert_allclose(f(X32, [0, 1, 2, 3]), f(X32.astype(np.float64), [0, 1, 2, 3]),
                               rtol=0, atol=0)


def test_min_norm_rows_survive_columns_1e16_apart():
    # Wide data with one column ~1e16 larger: the basis's Cholesky factor
    # lost rank in floating point and solve_triangular raised LinAlgError
    # for 44 of the 120 orders; such rows now come from lstsq directly.
    X = np.array([[-0.467, 0.236, 0.760, -1.649, 1.022e16],
                  [1.225, -0.298, -0.811, 0.752, 1.018e16],
                  [0.896, -0.345, -1.482, -0.110, -1.791e16],
                  [0.775, 0.194, -1.631, -1.195, 3.550e16]])
    Xc = X - X.mean(axis=0)
    for order in itertools.permutations(range(5)):
        B = paralingam.adjacency.ols_adjacency(X, list(order))
        assert np.isfinite(B).all()
        first = order[0]
        for k in order[1:2]:  # one predecessor: plain least squares
            b = (Xc[:, first] @ Xc[:, k]) / (Xc[:, first] @ Xc[:, first])
            assert B[k, first] == pytest.approx(b, rel=1e-9)


@pytest.mark.parametrize("value", ["0.1", -1, -0.5, float("nan"), float("inf"), True,
                                   10**400, [0.1]], ids=_short)
def test_estimate_adjacency_checks_coef_threshold_as_the_estimator(value):
    from paralingam.adjacency import estimate_adjacency

    with pytest.raises(ValueError, match=re.escape(
            f"coef_threshold must be None or a finite number >= 0; got {value!r}")):
        estimate_adjacency(_chain(), [0, 1, 2, 3], method="ols", coef_threshold=value)
    with pytest.raises(ValueError, match="coef_threshold must be None or a finite number >= 0"):
        paralingam.DirectLiNGAM(coef_threshold=value, fit_options={"n_threads": 1}).fit(_chain())


def test_estimate_adjacency_takes_any_real_coef_threshold():
    from fractions import Fraction

    from paralingam.adjacency import estimate_adjacency

    X, order = _chain(), [0, 1, 2, 3]
    want = estimate_adjacency(X, order, method="ols", coef_threshold=0.55)
    got = estimate_adjacency(X, order, method="ols", coef_threshold=Fraction(11, 20))
    np.testing.assert_array_equal(got, want)
    assert 0 < np.count_nonzero(want) < np.count_nonzero(estimate_adjacency(X, order, method="ols"))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 0, "1", None, True])
def test_adaptive_lasso_checks_gamma(value):
    from paralingam.adjacency import adaptive_lasso_adjacency

    with pytest.raises(ValueError, match=re.escape(
            f"gamma must be a finite number greater than 0.0; got {value!r}")):
        adaptive_lasso_adjacency(_chain(), [0, 1, 2, 3], gamma=value, n_threads=1)


@pytest.mark.parametrize("name", ["ols_adjacency", "adaptive_lasso_adjacency",
                                  "estimate_adjacency"])
@pytest.mark.parametrize("value, message", [
    (2.0, r"invalid at \[1, 0\] = 2\.0"),
    (0.5, r"invalid at \[1, 0\] = 0\.5"),
    ("x", "prior_knowledge must be a numeric matrix"),
])
def test_adjacency_functions_check_prior_knowledge_as_fit(name, value, message):
    # 2.0 and 0.5 silently kept the predictor; fit and DirectLiNGAM refuse them
    pk = np.full((4, 4), -1.0).tolist()
    pk[1][0] = value
    f, kwargs = _adjacency_functions()[name], _ONE_THREAD[name]
    with pytest.raises(ValueError, match=message):
        f(_chain(), [0, 1, 2, 3], prior_knowledge=pk, **kwargs)
    with pytest.raises(ValueError, match=r"shape \(4, 4\) .*got shape \(3, 3\)"):
        f(_chain(), [0, 1, 2, 3], prior_knowledge=np.zeros((3, 3)), **kwargs)


@pytest.mark.parametrize("name", ["ols_adjacency", "adaptive_lasso_adjacency",
                                  "estimate_adjacency"])
def test_adjacency_functions_refuse_a_scatter_that_is_not_finite(name, capfd):
    from paralingam.adjacency._common import _scatter

    f, kwargs = _adjacency_functions()[name], _ONE_THREAD[name]
    with pytest.raises(ValueError, match=r"scatter must hold finite numbers; got NaN or "
                                         r"infinite entries at \[0, 0\] = nan, \[0, 1\] = nan"):
        f(_chain(), [0, 1, 2, 3], scatter=np.full((4, 4), np.nan), **kwargs)
    S = _scatter(_chain())[1]
    S[2, 1] = np.inf
    with pytest.raises(ValueError, match=r"at \[2, 1\] = inf$"):
        f(_chain(), [0, 1, 2, 3], scatter=S, **kwargs)
    with pytest.raises(ValueError, match="scatter must be a numeric"):
        f(_chain(), [0, 1, 2, 3], scatter=[["a"] * 4] * 4, **kwargs)
    assert "DLASCL" not in capfd.readouterr().err  # LAPACK's complaint about NaN


# ---------------------------------------------------------------------------
# scikit-learn's conventions (issue 20.6) and integers beyond float64 (20.7)
# ---------------------------------------------------------------------------

def test_non_numeric_and_complex_data_are_type_errors_and_value_errors():
    from paralingam._validation import DataTypeError

    X = np.random.default_rng(0).uniform(size=(6, 3)).astype(object)
    X[0, 0] = {"foo": "bar"}
    for bad, pattern in [
        (X, r"column 0: \{'foo': 'bar'\} in row 0 \(float\(\) argument must be a string or a"),
        (np.ones((5, 2)) + 1j, r"must be real; got complex values \(Complex data not supported\)"),
        (np.array([["a", "b"]] * 4), r"non-numeric columns"),
    ]:
        for kind in (TypeError, ValueError, DataTypeError):
            with pytest.raises(kind, match=pattern):
                as_data_matrix(bad)


def test_empty_and_single_sample_messages_use_sklearn_wording():
    with pytest.raises(ValueError, match=r"0 feature\(s\) \(shape=\(12, 0\)\) while a minimum of 1"):
        as_data_matrix(np.empty((12, 0)))
    with pytest.raises(ValueError, match=r"at least 3 samples; got 1 .*1 sample\(s\)"):
        as_data_matrix(np.ones((1, 10)))


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, object])
def test_large_integer_columns_that_vary_are_not_called_constant(dtype):
    top = 2**63 - 1 if dtype is not np.uint64 else 2**64 - 1
    step = 2048 if dtype is not np.uint64 else 4096  # float64's spacing just below 2**63, 2**64
    rng = np.random.default_rng(3)
    big = [top - int(v) for v in rng.integers(0, 1000, 50)]  # varies by < 1000; float64 steps 2048
    other = rng.standard_normal(50).round(3) * 1000
    X = np.empty((50, 2), dtype=dtype)
    X[:, 0] = other.astype(np.int64)
    X[:, 1] = big
    with pytest.raises(ValueError, match=r"integer columns whose spread float64 cannot represent: "
                                         r"column 1 \(from \d+ to \d+: a spread of \d+, where "
                                         rf"float64 steps by {step}\)") as info:
        as_data_matrix(X)
    assert "constant" not in str(info.value)


def test_large_integer_column_with_coarse_float64_values():
    # varies by ~1e5 near 2**62: float64 keeps steps of 1024, ~100 levels
    rng = np.random.default_rng(4)
    col = (2**62 + rng.integers(0, 100_000, 200)).astype(np.int64)
    X = np.column_stack([rng.integers(0, 1000, 200), col])
    with pytest.raises(ValueError, match=r"column 1 .* float64 steps by 1024"):
        as_data_matrix(X)
    # with a wide enough spread the same magnitude is fine
    X[:, 1] = 2**62 + rng.integers(0, 2**40, 200)
    assert as_data_matrix(X)[0].shape == (200, 2)
    # a truly constant large column is still reported as constant
    X[:, 1] = 2**62
    with pytest.raises(ValueError, match=r"constant columns \(zero variance\): column 1$"):
        as_data_matrix(X)


def test_large_integer_dataframe_columns():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"a": rng.standard_normal(40),
                       "t": np.int64(2**63 - 5000) + rng.integers(0, 1000, 40)})
    with pytest.raises(ValueError, match=r"spread float64 cannot represent: column 1 \('t'\)"):
        as_data_matrix(df)


@pytest.mark.parametrize("route", ["fit", "estimator", "cli"])
def test_the_data_are_checked_once_per_fit(small, monkeypatch, tmp_path, route):
    # the estimator and the command line call fit's phases on data they checked,
    # instead of checking them again in paralingam.fit
    from paralingam import _validation, cli

    X, order = small
    calls = []
    real = _validation._check_shape

    def counting(arr, X):
        calls.append(arr.shape)
        return real(arr, X)

    monkeypatch.setattr(_validation, "_check_shape", counting)
    if route == "fit":
        assert paralingam.fit(X, backend="cpu").causal_order == order
    elif route == "estimator":
        model = paralingam.DirectLiNGAM(backend="cpu", adjacency="ols").fit(X)
        assert model.causal_order_ == order
    else:
        path = tmp_path / "data.csv"
        np.savetxt(path, X, delimiter=",", header=",".join(f"x{i}" for i in range(X.shape[1])),
                   comments="")
        assert cli.main(["fit", str(path), "--backend", "cpu", "--quiet",
                         "--output", str(tmp_path / "out.json")]) == 0
    assert calls == [X.shape]
