"""Plain NumPy references for the compiled kernels (slow, obvious, trusted)."""
import numpy as np


def assign_nearest_ref(X, centers, weights=None):
    """Labels (lowest index on ties) and minimal distances, by brute force."""
    X = np.asarray(X)
    C = np.asarray(centers, dtype=X.dtype)
    diff = X[:, None, :] - C[None, :, :]
    sq = diff * diff
    if weights is not None:
        sq = sq * np.asarray(weights, dtype=X.dtype)[None, :, :]
    D = sq.sum(axis=2)
    labels = D.argmin(axis=1)  # argmin returns the first minimum
    return labels.astype(np.int32), D[np.arange(len(X)), labels], D


def lloyd_stats_ref(X, centers, weight=None, labels=None):
    """Per-cluster counts, raw sums and inertia of one Lloyd step, by brute force in float64.

    Labels are the argmin of the exact-formula distances ``sum_j ((x_j - c_j) w_j)^2``
    (first minimum on ties) unless ``labels`` is given. Returns
    ``labels, counts, sums, inertia, D`` with ``D`` the (n, k) distance matrix.
    """
    X64 = np.asarray(X, dtype=np.float64)
    C = np.asarray(centers, dtype=np.float64)
    n, d = X64.shape
    k = C.shape[0]
    w = np.ones(d) if weight is None or np.size(weight) == 0 else np.asarray(weight, dtype=np.float64)
    D = (((X64[:, None, :] - C[None, :, :]) * w) ** 2).sum(axis=2)
    if labels is None:
        labels = D.argmin(axis=1)
    labels = np.asarray(labels, dtype=np.intp)
    counts = np.bincount(labels, minlength=k).astype(np.int64)
    sums = np.zeros((k, d))
    np.add.at(sums, labels, X64)
    inertia = np.bincount(labels, weights=D[np.arange(n), labels], minlength=k)
    return labels, counts, sums, inertia, D
