"""Deterministic grouping of many weighted points into at most m compact groups.

Servers that run an O(n^2) agglomeration on what the clients uploaded (Fed-k*-HC's merge
tree over subclusters, Fed-HIRE's Ward linkage over clusterlet centroids) first group the
uploads when there are too many of them. :func:`variance_split_groups` does it by recursive
variance splits: start from one group of all points, repeatedly cut the group of largest
weighted scatter in two at its weighted mean along its feature of largest weighted variance.
A group holding points of two separated clusters has a large scatter along the axis that
separates them, so it is cut before any compact group. No random numbers, no dependence on
the thread count, O(n d log m).

:func:`ward_cut` is ``scipy.cluster.hierarchy.cut_tree(linkage(points, "ward"), n_clusters)``
with the same labels, in half the memory (the agglomeration overwrites the one condensed
distance matrix instead of a copy of it) and without ``cut_tree``'s per-merge Python loop.
"""
from __future__ import annotations

import heapq

import numpy as np

__all__ = ["near_duplicate_groups", "variance_split_groups", "ward_cut"]

#: uploads whose every coordinate differs by at most this fraction of the feature's largest magnitude
#: over the uploads are one point (:func:`near_duplicate_groups`): means of identical rows, formed on
#: different clients, in other orders or through a client's standardisation, differ by rounding only
#: (measured up to 1.2e-13 of the largest magnitude on 10^5-row clients of duplicated rows), while
#: float64 itself resolves 1.1e-16 of it
DUPLICATE_RTOL = 1e-10

#: what a warning about near-duplicate uploads adds: the tolerance cannot tell rounding from real gaps that
#: small against a large common offset (3 clusters 30 apart at 1e12)
DUPLICATE_HINT = (f"equal up to {DUPLICATE_RTOL:g} of each feature's largest magnitude: identical rows, or "
                  "clusters whose gaps are that small against a large common offset, which subtracting the "
                  "offset from the data resolves")


def near_duplicate_groups(points: np.ndarray, rtol: float = DUPLICATE_RTOL) -> tuple[np.ndarray, np.ndarray]:
    """Group the points that are equal up to rounding.

    Two points are linked when every coordinate ``c`` differs by at most ``rtol * M_c``, ``M_c`` the
    largest ``|value|`` of feature ``c`` over the points; groups are the points chained by such
    links coordinate by coordinate (sorted by the group so far, then by the coordinate, a gap above
    the tolerance starts a new group), so two linked points always share a group. ``O(d n log n)``
    at most; data without near-duplicates stops after the first coordinates that separate every
    point. Deterministic, no random numbers.

    Parameters
    ----------
    points : ndarray of shape (n, n_features)
        Finite values, at least one row.
    rtol : float, default=DUPLICATE_RTOL
        Tolerance relative to each feature's largest magnitude.

    Returns
    -------
    labels : ndarray of shape (n,), int64
        Group of every point, numbered ``0 .. m-1`` in the order of each group's first point.
    first : ndarray of shape (m,), int64
        The first point of every group (its representative), increasing.
    """
    P = np.asarray(points, dtype=np.float64)
    n, d = P.shape
    tol = rtol * np.abs(P).max(axis=0) if n else np.zeros(d)
    block = np.zeros(n, dtype=np.int64)
    n_blocks = 1 if n else 0
    for c in range(d):
        if n_blocks == n:
            break
        order = np.argsort(P[:, c], kind="stable") if n_blocks == 1 else np.lexsort((P[:, c], block))
        b = block[order]
        v = P[order, c]
        new = np.empty(n, dtype=bool)
        new[0] = True
        new[1:] = (b[1:] != b[:-1]) | (np.diff(v) > tol[c])
        ids = np.cumsum(new) - 1
        block = np.empty(n, dtype=np.int64)
        block[order] = ids
        n_blocks = int(ids[-1]) + 1
    # number the groups by their first point
    first_of_block = np.full(n_blocks, n, dtype=np.int64)
    np.minimum.at(first_of_block, block, np.arange(n, dtype=np.int64))
    rank = np.empty(n_blocks, dtype=np.int64)
    rank[np.argsort(first_of_block, kind="stable")] = np.arange(n_blocks, dtype=np.int64)
    return rank[block], np.sort(first_of_block)


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
        P = Z[idx]  # a copy: centred and squared in place (the values of (P - mu) ** 2, one buffer)
        mu = (w @ P) / w.sum()
        P -= mu
        np.multiply(P, P, out=P)
        return mu, w @ P

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


def _label_merges(Z: np.ndarray, n: int) -> None:
    """Renumber the slots of merges sorted by height into cluster ids, in place (``linkage``'s output).

    Row ``r`` of ``Z`` gets the ids of the clusters it joins (leaves ``0..n-1``, the cluster of
    row ``r`` is ``n + r``), the smaller first, and its size.
    """
    parent = np.arange(2 * n - 1)
    size = np.ones(2 * n - 1, dtype=np.int64)

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for r in range(n - 1):
        a, b = find(int(Z[r, 0])), find(int(Z[r, 1]))
        if a > b:
            a, b = b, a
        Z[r, 0], Z[r, 1] = a, b
        parent[a] = parent[b] = n + r
        size[n + r] = size[a] + size[b]
        Z[r, 3] = size[n + r]


def _cut_labels(Z: np.ndarray, n: int, n_clusters: int) -> np.ndarray | None:
    """``cut_tree(Z, n_clusters=n_clusters)``'s labels from a linkage matrix, or None where they may differ.

    ``cut_tree`` applies the merges in order of height, equal heights in the reverse of a
    breadth-first walk from the root (right child first), and numbers the clusters of the cut
    by their smallest member. When every merge it applies finds both its parts already formed
    (always, unless a rounding makes a merge lower than one of its parts), that is the union of
    those merges, numbered by smallest member, which is what this computes; otherwise None.
    """
    n_merge = n - n_clusters
    bfs = np.empty(n - 1, dtype=np.int64)  # breadth-first position of each merge
    queue = [2 * n - 2]
    pos = 0
    while pos < len(queue):
        node = queue[pos]
        bfs[node - n] = pos
        pos += 1
        for child in (int(Z[node - n, 1]), int(Z[node - n, 0])):
            if child >= n:
                queue.append(child)
    order = np.lexsort((-bfs, Z[:, 2]))[:n_merge]
    done = np.zeros(n - 1, dtype=bool)
    parent = np.arange(2 * n - 1)
    for r in order.tolist():
        a, b = int(Z[r, 0]), int(Z[r, 1])
        if (a >= n and not done[a - n]) or (b >= n and not done[b - n]):
            return None
        done[r] = True
        parent[a] = parent[b] = n + r
    root = parent
    while True:  # pointer jumping to each leaf's top applied merge
        nxt = root[root]
        if np.array_equal(nxt, root):
            break
        root = nxt
    _, first, inv = np.unique(root[:n], return_index=True, return_inverse=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    return rank[inv.reshape(-1)]


def ward_cut(points: np.ndarray, n_clusters: int) -> np.ndarray:
    """Labels of the Ward linkage of the points cut at ``n_clusters`` groups.

    The same labels as ``cut_tree(linkage(points, method="ward"), n_clusters=n_clusters)``
    (SciPy; ``reshape(-1)``), with one condensed distance matrix (``n (n - 1) / 2`` float64)
    instead of two and an ``O(n log n)`` cut.

    Parameters
    ----------
    points : ndarray of shape (n, n_features)
        Finite values, at least 2 rows.
    n_clusters : int
        Groups of the cut, ``1 <= n_clusters``.

    Returns
    -------
    labels : ndarray of shape (n,), int64
        Groups numbered by their smallest point index.
    """
    from scipy.cluster.hierarchy import cut_tree, linkage
    from scipy.spatial.distance import pdist

    from ._kernels._ward import ward_chain

    P = np.ascontiguousarray(points, dtype=np.float64)
    n = P.shape[0]
    if n < 2 or n_clusters >= n or not np.isfinite(P).all():  # SciPy's own answers and errors
        return cut_tree(linkage(P, method="ward"), n_clusters=n_clusters).reshape(-1).astype(np.int64)
    D = pdist(P)  # what linkage computes first, the same bits
    Z = np.empty((n - 1, 4))
    ward_chain(D, n, Z)
    del D
    Z = Z[np.argsort(Z[:, 2], kind="mergesort")]
    _label_merges(Z, n)
    labels = _cut_labels(Z, n, n_clusters)
    if labels is None:
        labels = cut_tree(Z, n_clusters=n_clusters).reshape(-1)
    return labels.astype(np.int64)
