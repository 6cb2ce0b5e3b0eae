"""Shared fixtures and helpers. No seeding at import time: every test draws from its own Generator.

Shared data (the published splits, SIPU sets, reference results) lives outside the package, in
``FASTFC_SHARED`` (default: the ``shared`` folder next to the repository). Without it the tests
that need it are skipped with the path in the reason; in CI (``CI`` set) they fail instead, since
CI provides the folder and a skip there would hide that those tests never ran.
"""
import os
from pathlib import Path

import numpy as np
import pytest

SHARED = Path(os.environ.get("FASTFC_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
SPLITS = SHARED / "datasets" / "fedhire_splits"
REFERENCE = SHARED / "reference_results"

#: every skip for missing shared data carries this text (the CI hook below looks for it)
MISSING_SHARED = "shared data not found"


def in_ci() -> bool:
    """True when the ``CI`` environment variable is set to anything but ''/0/false/no."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def shared_file(*parts: str) -> Path:
    """Path of a file under ``SHARED``; skips the test when it is missing (fails under CI)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        reason = f"{MISSING_SHARED} at {path} (set FASTFC_SHARED)"
        if in_ci():
            pytest.fail(f"{reason}; CI is set and must provide the shared folder", pytrace=False)
        pytest.skip(reason)
    return path


def load_split(name: str):
    """Clients of one of the authors' published 8-client splits (shared/datasets/fedhire_splits)."""
    from fastfc.datasets import load_client_npz

    return load_client_npz(str(shared_file("datasets", "fedhire_splits", f"{name}.npz")))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI, a test stopped by missing shared data (a skip from any helper or test, or the
    failure of ``shared_file``) fails, also when it is marked xfail: that xfail is about the
    library, not about data that was never read."""
    outcome = yield
    report = outcome.get_result()
    exc = call.excinfo.value if call.excinfo is not None else None
    if exc is not None and in_ci() and MISSING_SHARED in str(exc):
        report.outcome = "failed"
        report.longrepr = f"missing shared data under CI: {exc}"
        if hasattr(report, "wasxfail"):
            del report.wasxfail


def mixture_clients(seed=0, sizes=(150, 220, 90, 180), d=5, k=6, std=1.6, box=6.0):
    """Overlapping Gaussian clusters over clients of the given sizes, each client with its own
    label mix (a Dirichlet(1) draw): a synthetic stand-in for a published split, where local
    k-means needs several iterations and different seeds give different solutions.

    Returns (X_clients, y_clients).
    """
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-box, box, size=(k, d))
    X_clients, y_clients = [], []
    for n in sizes:
        y = rng.choice(k, size=n, p=rng.dirichlet(np.ones(k)))
        X_clients.append(centres[y] + rng.normal(scale=std, size=(n, d)))
        y_clients.append(y)
    return X_clients, y_clients


def blob_clients(seed=0, n_per=40, scale=0.5):
    """Four well-separated 3-D blobs (10 apart, std ``scale``) over three clients; each client
    sees 2-3 of them. Returns (X_clients, y_clients)."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0, 0, 0], [10, 0, 0], [0, 10, 0], [0, 0, 10]], dtype=float)
    holdings = [(0, 1), (1, 2, 3), (0, 3)]
    X_clients, y_clients = [], []
    for held in holdings:
        ys = np.repeat(np.array(held), n_per)
        X_clients.append(centres[ys] + rng.normal(scale=scale, size=(len(ys), 3)))
        y_clients.append(ys)
    return X_clients, y_clients


@pytest.fixture
def federated_blobs():
    """``blob_clients(12345)``: four well-separated 3-D blobs over three clients."""
    return blob_clients(12345)


def make_all_estimators(n_clusters=4, random_state=0):
    """One instance of every estimator, keyed by name (FedKStarHC with k given)."""
    from fastfc import GOLD, FeCA, FedHIRE, FedKMeans, FedKStarHC, KFed

    return {
        "KFed": KFed(n_clusters=n_clusters, random_state=random_state),
        "FeCA": FeCA(n_clusters=n_clusters, random_state=random_state),
        "FedHIRE": FedHIRE(n_clusters=n_clusters, random_state=random_state),
        "GOLD": GOLD(n_clusters=n_clusters, random_state=random_state, mcpl_tol=1e-3),
        "FedKStarHC": FedKStarHC(n_clusters=n_clusters, random_state=random_state),
        "FedKMeans": FedKMeans(n_clusters=n_clusters, max_rounds=5, random_state=random_state),
        "FedHIRE+refine": FedHIRE(n_clusters=n_clusters, refine_rounds=3, random_state=random_state),
    }


ESTIMATOR_NAMES = ["KFed", "FeCA", "FedHIRE", "GOLD", "FedKStarHC", "FedKMeans", "FedHIRE+refine"]
