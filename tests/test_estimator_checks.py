"""scikit-learn's estimator checks on every fastfc estimator.

Checks that cannot apply are listed in ``EXPECTED_FAILED`` with the reason; they are
reported as xfail by scikit-learn, not silently skipped.
"""
from sklearn.utils.estimator_checks import parametrize_with_checks

from fastfc import KFed

# check name -> why it cannot apply
EXPECTED_FAILED = {}


def _expected_failed_checks(estimator):
    return EXPECTED_FAILED.get(type(estimator).__name__, {})


@parametrize_with_checks(
    [KFed(random_state=0)],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
