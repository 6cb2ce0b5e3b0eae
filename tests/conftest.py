"""Shared fixtures. No seeding at import time: every test draws from its own Generator."""
import os
from pathlib import Path

import numpy as np
import pytest

SHARED = Path(os.environ.get("FASTFC_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
SPLITS = SHARED / "datasets" / "fedhire_splits"
REFERENCE = SHARED / "reference_results"


def load_split(name: str):
    """Clients of one of the authors' published 8-client splits (shared/datasets/fedhire_splits)."""
    path = SPLITS / f"{name}.npz"
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (set FASTFC_SHARED)")
    from fastfc.datasets import load_client_npz

    return load_client_npz(str(path))


@pytest.fixture
def federated_blobs():
    """Four well-separated 3-D blobs over three clients; each client sees 2-3 of them.

    Returns (X_clients, y_clients).
    """
    rng = np.random.default_rng(12345)
    centres = np.array([[0, 0, 0], [10, 0, 0], [0, 10, 0], [0, 0, 10]], dtype=float)
    holdings = [(0, 1), (1, 2, 3), (0, 3)]
    X_clients, y_clients = [], []
    for held in holdings:
        ys = np.repeat(np.array(held), 40)
        X_clients.append(centres[ys] + rng.normal(scale=0.5, size=(len(ys), 3)))
        y_clients.append(ys)
    return X_clients, y_clients
