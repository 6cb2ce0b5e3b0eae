"""Federated Lloyd statistics (interim NumPy version; replaced by the fused kernel)."""
from __future__ import annotations

import numpy as np

from ._units import nearest_weighted

__all__ = ["lloyd_stats"]


def lloyd_stats(X, centers, weight=None, *, n_jobs=1):
    X = np.asarray(X)
    C = np.asarray(centers, dtype=np.float64)
    k, d = C.shape
    labels = nearest_weighted(X, C, weight, n_jobs=n_jobs).astype(np.int64)
    Xd = np.asarray(X, dtype=np.float64)
    counts = np.bincount(labels, minlength=k).astype(np.int64)
    sums = np.zeros((k, d))
    np.add.at(sums, labels, Xd)
    diff = Xd - C[labels]
    if weight is not None and np.size(weight):
        diff = diff * np.asarray(weight)
    inertia = np.bincount(labels, weights=(diff * diff).sum(axis=1), minlength=k)
    return counts, sums, inertia
