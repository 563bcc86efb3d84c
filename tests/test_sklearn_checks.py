"""scikit-learn's estimator checks, every one, on paralingam.DirectLiNGAM."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

import paralingam


@parametrize_with_checks([paralingam.DirectLiNGAM()])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_all_checks_are_collected():
    # the four checks that once failed are among those run above
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(paralingam.DirectLiNGAM(), on_fail=None)
    names = {r["check_name"] for r in results}
    assert {"check_dtype_object", "check_complex_data", "check_estimators_empty_data_messages",
            "check_fit2d_1sample"} <= names
    failed = [(r["check_name"], r["exception"]) for r in results if r["status"] == "failed"]
    assert not failed
    # only scikit-learn's own environment skips (array API without SCIPY_ARRAY_API)
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= {"check_array_api_input"}, skipped
