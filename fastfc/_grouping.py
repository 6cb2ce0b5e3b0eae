"""Deterministic grouping of many weighted points into at most m compact groups.

Servers that run an O(n^2) agglomeration on what the clients uploaded (Fed-k*-HC's merge
tree over subclusters, Fed-HIRE's Ward linkage over clusterlet centroids) first group the
uploads when there are too many of them. :func:`variance_split_groups` does it by recursive
variance splits: start from one group of all points, repeatedly cut the group of largest
weighted scatter in two at its weighted mean along its feature of largest weighted variance.
A group holding points of two separated clusters has a large scatter along the axis that
separates them, so it is cut before any compact group. No random numbers, no dependence on
the thread count, O(n d log m).
"""
from __future__ import annotations

import heapq

import numpy as np

__all__ = ["variance_split_groups"]


def variance_split_groups(points: np.ndarray, weights: np.ndarray | None, max_groups: int) -> np.ndarray:
    """Labels of at most ``max_groups`` compact groups of the points (recursive variance splits).

    Parameters
    ----------
    points : ndarray of shape (n, n_features)
        Finite values.
    weights : ndarray of shape (n,) or None
        Positive weights (e.g. the rows a subcluster stands for); None: all 1.
    max_groups : int
        At most this many groups (at least 1). Fewer when no group has any scatter left.

    Returns
    -------
    labels : ndarray of shape (n,), int64
        Group of every point, numbered ``0 .. m-1`` in the order of each group's smallest
        point index.
    """
    Z = np.ascontiguousarray(points, dtype=np.float64)
    n_pts = Z.shape[0]
    w_all = np.ones(n_pts) if weights is None else np.asarray(weights, dtype=np.float64)
    if max_groups < 1:
        raise ValueError(f"max_groups must be at least 1, got {max_groups}")
    if n_pts == 0:
        return np.zeros(0, dtype=np.int64)

    def scatter(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = w_all[idx]
        P = Z[idx]
        mu = (w @ P) / w.sum()
        return mu, w @ (P - mu) ** 2

    groups = [np.arange(n_pts)]
    stats = {0: scatter(groups[0])}  # (mean, per-feature scatter) of the groups still in the heap
    heap = [(-float(stats[0][1].sum()), 0)]
    while len(groups) < max_groups and heap:
        neg, gid = heapq.heappop(heap)
        mu, var = stats.pop(gid)
        if -neg <= 0.0:
            break
        idx = groups[gid]
        f = int(np.argmax(var))
        left = Z[idx, f] <= mu[f]
        a, b = idx[left], idx[~left]
        if a.size == 0 or b.size == 0:  # rounding left nothing to cut: leave the group whole
            continue
        groups[gid] = a
        groups.append(b)
        for g_id, part in ((gid, a), (len(groups) - 1, b)):
            if part.size > 1:
                stats[g_id] = scatter(part)
                heapq.heappush(heap, (-float(stats[g_id][1].sum()), g_id))
    # number the groups by their smallest point index
    order = np.argsort([int(idx[0]) for idx in groups], kind="stable")  # idx arrays stay increasing
    labels = np.empty(n_pts, dtype=np.int64)
    for new_id, g_id in enumerate(order):
        labels[groups[g_id]] = new_id
    return labels
