"""Every user-facing warning of fastfc points at the caller's code, not at fastfc's internals.

Each case below is a one-line call in this file that makes fastfc warn from one of its
warning sites (client phase, server phase, phase API, a helper called directly); the
warning's ``filename`` must be this file and its ``lineno`` that line -- whatever the
depth of the call inside fastfc, and also when clients run on worker threads.
"""
import sys
import warnings
from dataclasses import replace

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from fastfc import FeCA, FedHIRE, FedKStarHC, KFed
from fastfc._parallel import RandomStateWarning
from fastfc._units import ConstantFeatureWarning
from fastfc._warnings import carry_caller, warn_caller
from fastfc.datasets._sanity import SanityCase, make_sanity_case
from fastfc.feca import FewerGroupsWarning
from fastfc.fed_hire import DegenerateFederationWarning
from fastfc.fed_kstar_hc import subcluster_statistics
from fastfc.kfed import lloyd_from

SMALL = SanityCase(n_clusters=3, n_features=3, n_clients=4, rows_per_client=40)
IDENTICAL = make_sanity_case(replace(SMALL, degenerate="identical"))[0]
CONSTANT = make_sanity_case(replace(SMALL, degenerate="constant_feature"))[0]
ONE_ROW = make_sanity_case(replace(SMALL, degenerate="one_row"))[0]
TWO_POINTS = np.repeat(np.array([[0.0, 0.0], [10.0, 0.0]]), 50, axis=0)
_rng = np.random.default_rng(7)
BLOBS = np.vstack([_rng.normal(loc=c, size=(40, 4)) for c in (0.0, 6.0, 12.0)])
TILED = np.tile(np.array([1.5, -2.0, 3e6]), (200, 1))


# (id, category, message fragment, one-line call): keep each call on the line of its lambda
CASES = [
    ("hire-identical-server", DegenerateFederationWarning, "identical", lambda: FedHIRE(3, random_state=0).fit_clients(IDENTICAL)),
    ("hire-constant-server", DegenerateFederationWarning, "take one value", lambda: FedHIRE(3, random_state=0).fit_clients(CONSTANT)),
    ("hire-one-row-client", DegenerateFederationWarning, "single row", lambda: FedHIRE(3, random_state=0).fit_clients(ONE_ROW)),
    ("hire-one-row-threads", DegenerateFederationWarning, "single row", lambda: FedHIRE(3, random_state=0, n_jobs=2).fit_clients(ONE_ROW)),
    ("kfed-fit-identical", ConstantFeatureWarning, "identical", lambda: KFed(3, random_state=0).fit(np.concatenate(IDENTICAL), client_ids=np.arange(160) % 4)),
    ("feca-constant", ConstantFeatureWarning, "constant", lambda: FeCA(3, random_state=0).fit_clients(CONSTANT)),
    ("feca-fewer-groups", FewerGroupsWarning, "fewer than", lambda: FeCA(3, random_state=0).fit_clients([TWO_POINTS[::2], TWO_POINTS[1::2]])),
    ("kstar-identical-server", RuntimeWarning, "identical", lambda: FedKStarHC(3, random_state=0).fit_clients(np.array_split(TILED, 4))),
    ("kstar-client-boundaries", RuntimeWarning, "client boundaries", lambda: FedKStarHC(3, mode="paper", random_state=0).fit_clients(np.array_split(BLOBS, 8))),
    ("kstar-single-row-client", RuntimeWarning, "single row", lambda: FedKStarHC(2, micro="kmeans", random_state=0).fit_clients([BLOBS[:58], BLOBS[58:59], BLOBS[59:60]])),
    ("kstar-single-row-helper", RuntimeWarning, "single row", lambda: subcluster_statistics(BLOBS[:4], np.array([0, 0, 0, 1]), np.random.default_rng(0))),
    ("phase-api-random-state", RandomStateWarning, "will not agree", lambda: KFed(n_clusters=3).client_summarize(BLOBS)),
    ("lloyd-duplicates", ConvergenceWarning, "distinct clusters", lambda: lloyd_from(TWO_POINTS, TWO_POINTS[[0, 50, 1]], max_iter=10, tol=1e-4)),
]


@pytest.mark.parametrize("category, fragment, call", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_warning_points_at_the_callers_line(category, fragment, call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    ours = [w for w in caught if issubclass(w.category, category) and fragment in str(w.message)]
    assert ours, [str(w.message) for w in caught]
    for w in ours:
        assert (w.filename, w.lineno) == (__file__, call.__code__.co_firstlineno), str(w.message)


def test_warnings_from_worker_threads_obey_the_filters():
    """A client thread's warning goes through the same filters: ``error`` raises it in the caller."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateFederationWarning)
        with pytest.raises(DegenerateFederationWarning, match="single row"):
            FedHIRE(3, random_state=0, n_jobs=2).fit_clients(ONE_ROW)


def test_carry_caller_points_at_the_submitting_line_then_restores():
    """A wrapped call warns at the line that wrapped it; afterwards the thread has no origin left."""
    def inner():
        warn_caller("inner", UserWarning)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wrapped = carry_caller(inner); submit_line = sys._getframe().f_lineno  # noqa: E702
        wrapped()
        inner()
    assert [(str(w.message), w.filename) for w in caught] == [("inner", __file__)] * 2
    assert caught[0].lineno == submit_line
    assert caught[1].lineno == inner.__code__.co_firstlineno + 1  # no origin: the walk stops at inner itself
