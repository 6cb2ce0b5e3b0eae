"""Where the shared data lives, for the benchmarks that read it (``../shared`` beside the repo)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

#: the workspace's shared folder (datasets, reference results); ``FASTFC_SHARED`` overrides it
SHARED = Path(os.environ.get("FASTFC_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))


def load_published_split(split: str) -> tuple[list[np.ndarray], int]:
    """One of the authors' 8-client splits: the client matrices and the number of classes.

    Raises ``NotImplementedError`` (asv's "skip this benchmark") when the data is not there.
    """
    from fastfc.datasets import load_client_npz

    path = SHARED / "datasets" / "fedhire_splits" / f"{split}.npz"
    if not path.exists():
        raise NotImplementedError(f"{path} not found")
    X_clients, y_clients = load_client_npz(str(path))
    return X_clients, int(np.unique(np.concatenate(y_clients)).size)
