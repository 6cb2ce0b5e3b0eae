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
