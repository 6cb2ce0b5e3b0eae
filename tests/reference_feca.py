"""Slow, obviously-correct NumPy references of the FeCA kernels (test-only).

Each follows the paper's pseudo-code literally (``shared/specs/feca.md`` Algorithms 2-5):
merged costs by a direct pass over the merged rows, sets instead of masks, recomputation
instead of caching.
"""
import numpy as np


def ref_cluster_stats(X, labels, centers):
    X = np.asarray(X, dtype=np.float64)
    k = centers.shape[0]
    counts = np.zeros(k, dtype=np.int64)
    dev = np.zeros((k, X.shape[1]))
    cost = np.zeros(k)
    extent = np.zeros(k)
    dist_sum = np.zeros(k)
    for j in range(k):
        P = X[labels == j]
        counts[j] = len(P)
        if len(P):
            diff = P - centers[j]
            dist = np.sqrt((diff**2).sum(1))
            dev[j] = diff.sum(0)
            cost[j] = (dist**2).sum()
            extent[j] = dist.max()
            dist_sum[j] = dist.sum()
    return counts, dev, cost, extent, dist_sum


def ref_merged_cost(X, labels, p, q):
    """G_j of eq. (4) by a direct pass over D_p u D_q around their mean."""
    P = np.asarray(X, dtype=np.float64)[(labels == p) | (labels == q)]
    return float(((P - P.mean(0)) ** 2).sum())


def ref_client_update(X, labels, centers, spread):
    """Algorithm 2, literally: returns (kept indices, list of (i, p, q, G_i, G_j))."""
    X = np.asarray(X, dtype=np.float64)
    A = [a for a in range(centers.shape[0]) if np.any(labels == a)]
    cost = {a: float(((X[labels == a] - centers[a]) ** 2).sum()) for a in A}
    trace = []
    while len(A) >= 2:
        i = max(A, key=lambda a: (spread[a], -a))  # largest spread, ties to the smallest index
        pairs = [(a, b) for a in A for b in A if a < b]
        p, q = min(pairs, key=lambda ab: (((centers[ab[0]] - centers[ab[1]]) ** 2).sum(), ab))
        g_j = ref_merged_cost(X, labels, p, q)
        trace.append((i, p, q, cost[i], g_j))
        if cost[i] >= g_j:
            A.remove(i)
        else:
            break
    return np.array(A, dtype=np.int64), trace


def ref_empirical_radii(C, extent):
    m = len(C)
    out = np.empty(m)
    for a in range(m):
        others = [np.linalg.norm(C[a] - C[b]) for b in range(m) if b != a]
        out[a] = min(extent[a], 0.5 * min(others)) if others else extent[a]
    return out


def ref_theoretical_radius(C, extent):
    """Algorithm 3 with the sequential resolution of spec §11 A6; None when undefined."""
    m = len(C)
    keep = list(range(m))
    for a in range(m):
        if a not in keep:
            continue
        if len(keep) < 2:
            break
        others = [b for b in keep if b != a]
        b = min(others, key=lambda b: (np.linalg.norm(C[a] - C[b]), b))
        if extent[a] + extent[b] > np.linalg.norm(C[a] - C[b]):
            keep.remove(a)
            keep.remove(b)
    if len(keep) < 2:
        return None
    return 0.5 * min(np.linalg.norm(C[a] - C[b]) for a in keep for b in keep if a < b)


def ref_server_aggregation(C, r, k):
    """Algorithm 5, literally: returns (centres largest group first, group sizes, groups as index lists)."""
    C = np.asarray(C, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    remaining = list(range(len(C)))
    groups = []
    while remaining:
        i = max(remaining, key=lambda t: (r[t], -t))  # largest radius among ungrouped, ties to smallest t
        S = [t for t in remaining if ((C[t] - C[i]) ** 2).sum() <= r[i] ** 2]
        groups.append(S)
        remaining = [t for t in remaining if t not in S]
    ranked = sorted(range(len(groups)), key=lambda g: (-len(groups[g]), g))[:k]
    kept = [groups[g] for g in ranked]
    centres = np.array([C[S].mean(0) for S in kept])
    return centres, np.array([len(S) for S in kept]), kept


def ref_kmeans_plusplus(X, uniforms, n_trials, k):
    """Greedy k-means++ from given uniforms, with NumPy (searchsorted side='right')."""
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    seeds = [min(int(uniforms[0] * n), n - 1)]
    closest = ((X - X[seeds[0]]) ** 2).sum(1)
    for c in range(1, k):
        cum = np.cumsum(closest)
        best = None
        for t in range(n_trials):
            u = uniforms[1 + (c - 1) * n_trials + t]
            row = min(int(np.searchsorted(cum, u * cum[-1], side="right")), n - 1) if cum[-1] > 0 else min(int(u * n), n - 1)
            cand = np.minimum(closest, ((X - X[row]) ** 2).sum(1))
            if best is None or cand.sum() < best[0]:
                best = (cand.sum(), row, cand)
        seeds.append(best[1])
        closest = best[2]
    return np.array(seeds)


def ref_merge_pieces(X, centers, labels, *, window=0.1, dip=0.5):
    """:func:`fastfc.feca.merge_pieces` as one loop over the pairs of clusters (its NumPy version before the kernel)."""
    from fastfc.feca import _MIN_AD_ROWS, _looks_gaussian

    k = centers.shape[0]
    if k > 1 and X.shape[0] >= _MIN_AD_ROWS and _looks_gaussian(X, n_axes=2):
        return np.zeros(k, dtype=np.int64)
    members = [np.flatnonzero(labels == i) for i in range(k)]
    parent = np.arange(k)

    def root(a):
        while parent[a] != a:
            a = parent[a]
        return a

    for i in range(k):
        for j in range(i + 1, k):
            if members[i].size == 0 or members[j].size == 0:
                continue
            u = centers[j] - centers[i]
            length2 = float(u @ u)
            rows = np.concatenate([members[i], members[j]])
            if length2 == 0.0:
                pieces = True
            else:
                t = ((X[rows] - centers[i]) @ u) / length2
                mid = np.count_nonzero(np.abs(t - 0.5) <= window)
                end_i = np.count_nonzero(np.abs(t) <= window)
                end_j = np.count_nonzero(np.abs(t - 1.0) <= window)
                pieces = mid >= max(2.0, dip * min(end_i, end_j))
            if pieces:
                ri, rj = root(i), root(j)
                parent[max(ri, rj)] = min(ri, rj)
    roots = np.array([root(i) for i in range(k)])
    for r in np.unique(roots):
        parts = np.flatnonzero(roots == r)
        if parts.size > 1 and not _looks_gaussian(X[np.concatenate([members[i] for i in parts])], n_axes=2):
            roots[parts] = parts
    return np.unique(roots, return_inverse=True)[1].astype(np.int64)
