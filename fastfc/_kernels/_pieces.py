"""Numba kernel of FeCA's piece merging (:func:`fastfc.feca.merge_pieces`): window counts of every pair.

Numeric work only: validated C-contiguous inputs, preallocated output, no RNG, GIL released.
The NumPy loop it replaces projected the rows of each pair of clusters in turn (one set of
NumPy calls per pair, ``k^2 / 2`` of them); this is one pass over the rows, O(n k d).
"""
from __future__ import annotations

import numba
import numpy as np

from fastfc._config import NUMBA_CACHE

__all__ = ["pair_window_counts", "pair_window_counts_from_products"]


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def pair_window_counts(X, labels, centers, length2, window, counts):
    """Rows of each pair of clusters near the middle and the two ends of the segment between their centres.

    For every pair ``i < j`` the rows of clusters ``i`` and ``j`` are projected onto the
    segment ``c_i -> c_j``: ``t = (x - c_i) . (c_j - c_i) / length2[i, j]`` (``c_i`` at 0,
    ``c_j`` at 1), and counted when ``|t - a| <= window`` at ``a`` = 0.5, 0 and 1.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64
    labels : ndarray of shape (n,), int64 in [0, k)
    centers : ndarray of shape (k, d), float64
    length2 : ndarray of shape (k, k), float64
        ``|c_j - c_i|^2``; pairs with 0 are skipped (the caller treats them as pieces).
    window : float
    counts : ndarray of shape (k, k, 3), int64
        Output (overwritten): ``counts[i, j]`` for ``i < j`` holds the middle, ``c_i``-end and
        ``c_j``-end counts of the pair; other entries are 0.
    """
    n, d = X.shape
    k = centers.shape[0]
    counts[:, :, :] = 0
    for r in range(n):
        lab = labels[r]
        for m in range(k):
            if m == lab:
                continue
            i = min(lab, m)
            j = max(lab, m)
            if length2[i, j] == 0.0:
                continue
            s = 0.0
            for f in range(d):
                s += (np.float64(X[r, f]) - centers[i, f]) * (centers[j, f] - centers[i, f])
            t = s / length2[i, j]
            if abs(t - 0.5) <= window:
                counts[i, j, 0] += 1
            if abs(t) <= window:
                counts[i, j, 1] += 1
            if abs(t - 1.0) <= window:
                counts[i, j, 2] += 1


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def pair_window_counts_from_products(G, labels, cc, length2, window, counts):
    """:func:`pair_window_counts` from inner products: the same windows, ``counts`` accumulated.

    With ``G[r, m] = x_r . c_m`` and ``cc[i, j] = c_i . c_j`` (any common origin of rows and
    centres), the projection of row ``r`` on the segment ``c_i -> c_j`` is
    ``t = (G[r, j] - G[r, i] - cc[i, j] + cc[i, i]) / length2[i, j]`` (the same value as
    :func:`pair_window_counts`' ``(x - c_i) . (c_j - c_i) / length2[i, j]`` up to rounding).

    Parameters
    ----------
    G : ndarray of shape (n, k), float64
    labels : ndarray of shape (n,), int64 in [0, k)
    cc : ndarray of shape (k, k), float64
    length2 : ndarray of shape (k, k), float64
        ``|c_j - c_i|^2``; pairs with 0 are skipped.
    window : float
    counts : ndarray of shape (k, k, 3), int64
        Added to (not overwritten): ``counts[i, j]`` for ``i < j`` gains the middle, ``c_i``-end
        and ``c_j``-end counts of the pair over these rows.
    """
    n = G.shape[0]
    k = G.shape[1]
    for r in range(n):
        lab = labels[r]
        for m in range(k):
            if m == lab:
                continue
            i = min(lab, m)
            j = max(lab, m)
            if length2[i, j] == 0.0:
                continue
            t = (G[r, j] - G[r, i] - cc[i, j] + cc[i, i]) / length2[i, j]
            # branch-free (about half the rows fall in some window: the branches would mispredict)
            counts[i, j, 0] += np.int64(abs(t - 0.5) <= window)
            counts[i, j, 1] += np.int64(abs(t) <= window)
            counts[i, j, 2] += np.int64(abs(t - 1.0) <= window)
