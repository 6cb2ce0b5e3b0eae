"""Numba kernels of FeCA (Federated Centroid Aggregation): what k-means libraries do not do.

Numeric work only. Every kernel takes validated, C-contiguous arrays (data float32 or
float64, everything else float64 / int64 / bool) plus preallocated output buffers, never
validates, never allocates inside its hot loop, never touches an RNG, and releases the GIL
(``nogil=True``) so clients can run in threads. Orchestration lives in :mod:`fastfc.feca`;
plain NumPy references of every kernel are in ``tests/reference_feca.py``.

Spec: ``shared/specs/feca.md`` Algorithms 2-5 and §11.

* :func:`kmeans_plusplus` -- greedy k-means++ seeding (the variant scikit-learn uses) from
  pre-drawn uniforms, without the per-step Python overhead that dominates on small clients.
* :func:`cluster_stats` -- one fused pass over a client's rows after k-means: per-cluster
  count, deviation sum ``sum(x - c)``, cost ``G_i = sum ||x - c||^2`` (eq. 3), extent
  ``r'_i = max ||x - c||`` and ``sum ||x - c||``, all with exact differences (S-sets
  coordinates are ~1e6, the ``||x||^2 - 2x.c + ||c||^2`` expansion would lose digits).
* :func:`refine_centroids` -- ClientUpdate (Alg. 2): the one-fit-many / many-fit-one test
  over centroid pairs, deleting centroids while ``G_i >= G_j``.
* :func:`empirical_radii` -- RadiusAssign, empirical variant (Alg. 4).
* :func:`theoretical_radius` -- RadiusAssign, theoretical variant (Alg. 3).
* :func:`group_by_radius` -- ServerAggregation grouping (Alg. 5).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from fastfc._config import NUMBA_CACHE

__all__ = [
    "kmeans_plusplus",
    "cluster_stats",
    "merged_cost",
    "refine_centroids",
    "empirical_radii",
    "theoretical_radius",
    "group_by_radius",
]


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def _pair_sqdist(A, a, B, b):
    """Squared Euclidean distance of rows ``A[a]`` and ``B[b]``, summed in float64 in feature order."""
    s = 0.0
    for f in range(A.shape[1]):
        diff = np.float64(A[a, f]) - np.float64(B[b, f])
        s += diff * diff
    return s


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def _sqdist_to_row(X, r, out):
    for i in range(X.shape[0]):
        out[i] = _pair_sqdist(X, i, X, r)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def _draw(cum, total, u):
    """Index of the first cumulative weight above ``u * total`` (clipped to the last row)."""
    target = u * total
    lo = 0
    hi = cum.shape[0]
    while lo < hi:  # first index with cum > target (numpy searchsorted side="right")
        mid = (lo + hi) // 2
        if cum[mid] <= target:
            lo = mid + 1
        else:
            hi = mid
    return min(lo, cum.shape[0] - 1)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def kmeans_plusplus(X, uniforms, n_trials, seeds, closest, cand, best_d, cum):
    """Greedy k-means++ seeding (Arthur & Vassilvitskii 2007, greedy variant).

    The first seed is row ``floor(u_0 n)``; every next one is the best, by resulting
    potential ``sum_x min_c ||x - c||^2``, of ``n_trials`` rows drawn with probability
    proportional to the current squared distance to the nearest seed (ties: first drawn).

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64          # IN
    uniforms : ndarray of shape (1 + (k - 1) * n_trials,)     # IN  U(0, 1) draws, float64
    n_trials : int                                           # IN
    seeds : ndarray of shape (k,), int64                      # OUT row index of each seed
    closest : ndarray of shape (n,), float64                  # OUT squared distance to nearest seed
    cand, best_d, cum : ndarrays of shape (n,), float64       # work buffers
    """
    n = X.shape[0]
    k = seeds.shape[0]
    first = min(int(uniforms[0] * n), n - 1)
    seeds[0] = first
    _sqdist_to_row(X, first, closest)
    for c in range(1, k):
        total = 0.0
        for i in range(n):
            total += closest[i]
            cum[i] = total
        best_pot = np.inf
        best_row = -1
        for t in range(n_trials):
            if total > 0.0:
                row = _draw(cum, total, uniforms[1 + (c - 1) * n_trials + t])
            else:  # every row sits on a seed: any row will do
                row = min(int(uniforms[1 + (c - 1) * n_trials + t] * n), n - 1)
            _sqdist_to_row(X, row, cand)
            pot = 0.0
            for i in range(n):
                if closest[i] < cand[i]:
                    cand[i] = closest[i]
                pot += cand[i]
            if pot < best_pot:
                best_pot = pot
                best_row = row
                for i in range(n):
                    best_d[i] = cand[i]
        seeds[c] = best_row
        for i in range(n):
            closest[i] = best_d[i]


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def cluster_stats(X, labels, centers, counts, dev, cost, extent, dist_sum):
    """Per-cluster statistics of a labelled client, in one pass over its rows.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64            # IN
    labels : ndarray of shape (n,), int32 or int64, in [0, k)   # IN
    centers : ndarray of shape (k, d), float64                  # IN
    counts : ndarray of shape (k,), int64                       # OUT  n_i
    dev : ndarray of shape (k, d), float64                      # OUT  sum_{x in D_i} (x - c_i)
    cost : ndarray of shape (k,), float64                       # OUT  G_i = sum ||x - c_i||^2
    extent : ndarray of shape (k,), float64                     # OUT  r'_i = max ||x - c_i|| (0 if empty)
    dist_sum : ndarray of shape (k,), float64                   # OUT  sum ||x - c_i||
    """
    n, d = X.shape
    k = centers.shape[0]
    for j in range(k):
        counts[j] = 0
        cost[j] = 0.0
        extent[j] = 0.0
        dist_sum[j] = 0.0
        for f in range(d):
            dev[j, f] = 0.0
    for i in range(n):
        j = labels[i]
        s = 0.0
        for f in range(d):
            diff = np.float64(X[i, f]) - centers[j, f]
            dev[j, f] += diff
            s += diff * diff
        counts[j] += 1
        cost[j] += s
        if s > extent[j]:
            extent[j] = s  # squared for now
        dist_sum[j] += math.sqrt(s)
    for j in range(k):
        extent[j] = math.sqrt(extent[j])


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def merged_cost(centers, counts, dev, cost, p, q):
    """Cost ``G_j`` (eq. 4) of the hypothetical merge of clusters ``p`` and ``q``.

    ``G_j = sum_{x in D_p u D_q} ||x - c_j||^2`` with ``c_j`` the mean of ``D_p u D_q``,
    from the per-cluster statistics alone: for ``a`` in ``{p, q}``,
    ``sum_{x in D_a} ||x - c_j||^2 = G_a + 2 (c_a - c_j).e_a + n_a ||c_a - c_j||^2`` with
    ``e_a = sum (x - c_a)`` (zero when ``c_a`` is the exact mean). ``c_a - c_j`` is formed
    from centroid differences, never from large absolute coordinates.
    """
    d = centers.shape[1]
    n_p = np.float64(counts[p])
    n_q = np.float64(counts[q])
    n_j = n_p + n_q
    g = cost[p] + cost[q]
    for f in range(d):
        delta = centers[p, f] - centers[q, f]
        e = dev[p, f] + dev[q, f]
        dp = (n_q * delta - e) / n_j  # c_p - c_j
        dq = (-n_p * delta - e) / n_j  # c_q - c_j
        g += 2.0 * dp * dev[p, f] + n_p * dp * dp + 2.0 * dq * dev[q, f] + n_q * dq * dq
    return max(g, 0.0)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def refine_centroids(centers, counts, dev, cost, spread, active, trace):
    """ClientUpdate (FeCA Algorithm 2): delete one-fit-many centroids.

    Repeatedly takes the active cluster ``i`` of largest ``spread`` (ties: smallest index)
    and the closest active centroid pair ``(p, q)``, ``p < q`` (ties: lexicographic). If
    ``G_i >= G_j`` (eqs. 3, 4; ``G_j`` the cost of the hypothetical merge of ``p`` and
    ``q``) centroid ``i`` and its cluster are deleted; otherwise the loop stops. It also
    stops when fewer than two active centroids remain. ``i`` may be ``p`` or ``q`` (then
    the test fails by itself when centroids are exact means); the merge is never applied.

    Parameters
    ----------
    centers : ndarray of shape (k, d), float64           # IN
    counts : ndarray of shape (k,), int64                # IN
    dev, cost : ndarrays (k, d) and (k,), float64         # IN  from :func:`cluster_stats`
    spread : ndarray of shape (k,), float64              # IN  sigma_i
    active : ndarray of shape (k,), bool                 # INOUT  True = kept; enter with
                                                         #        the non-empty clusters
    trace : ndarray of shape (k, 5), float64             # OUT  one row per test:
                                                         #      i, p, q, G_i, G_j

    Returns
    -------
    n_tests : int
        Rows of ``trace`` written; every test but possibly the last deleted its ``i``.
    """
    k = centers.shape[0]
    # pairwise squared distances, computed once (deletions never change the others)
    D = np.empty((k, k))
    for a in range(k):
        D[a, a] = 0.0
        for b in range(a + 1, k):
            s = _pair_sqdist(centers, a, centers, b)
            D[a, b] = s
            D[b, a] = s
    n_tests = 0
    while True:
        n_active = 0
        i = -1
        for a in range(k):
            if active[a]:
                n_active += 1
                if i < 0 or spread[a] > spread[i]:
                    i = a
        if n_active < 2:
            break
        p = -1
        q = -1
        best = np.inf
        for a in range(k):
            if not active[a]:
                continue
            for b in range(a + 1, k):
                if active[b] and D[a, b] < best:
                    best = D[a, b]
                    p = a
                    q = b
        g_j = merged_cost(centers, counts, dev, cost, p, q)
        trace[n_tests, 0] = i
        trace[n_tests, 1] = p
        trace[n_tests, 2] = q
        trace[n_tests, 3] = cost[i]
        trace[n_tests, 4] = g_j
        n_tests += 1
        if cost[i] >= g_j:
            active[i] = False
        else:
            break
    return n_tests


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def empirical_radii(centers, extent, radii):
    """RadiusAssign, empirical variant (FeCA Algorithm 4) over one client's kept centroids.

    ``r_a = min(r'_a, 0.5 * min_{b != a} ||c_a - c_b||)``; with a single centroid ``r = r'``.

    Parameters
    ----------
    centers : ndarray of shape (m, d), float64    # IN  the kept (refined) centroids
    extent : ndarray of shape (m,), float64       # IN  r'_a
    radii : ndarray of shape (m,), float64        # OUT
    """
    m = centers.shape[0]
    for a in range(m):
        nearest = np.inf
        for b in range(m):
            if b == a:
                continue
            s = _pair_sqdist(centers, a, centers, b)
            if s < nearest:
                nearest = s
        half = 0.5 * math.sqrt(nearest) if nearest < np.inf else np.inf
        radii[a] = min(extent[a], half)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def theoretical_radius(centers, extent):
    """RadiusAssign, theoretical variant (FeCA Algorithm 3): one radius for a client.

    Walks the kept centroids in index order, skipping those already removed; centroid
    ``a`` and its nearest remaining neighbour ``b`` are both removed from the tentative set
    when their balls overlap (``r'_a + r'_b > ||c_a - c_b||``). The radius is half the
    minimum pairwise distance of what remains.

    Parameters
    ----------
    centers : ndarray of shape (m, d), float64    # IN
    extent : ndarray of shape (m,), float64       # IN  r'_a

    Returns
    -------
    radius : float
        ``-1.0`` when fewer than two centroids remain (undefined in the paper; the caller
        falls back to the empirical radii, spec §11 A6).
    """
    m = centers.shape[0]
    keep = np.ones(m, dtype=np.bool_)
    n_keep = m
    for a in range(m):
        if not keep[a]:
            continue
        if n_keep < 2:
            break
        b_best = -1
        best = np.inf
        for b in range(m):
            if b == a or not keep[b]:
                continue
            s = _pair_sqdist(centers, a, centers, b)
            if s < best:
                best = s
                b_best = b
        if extent[a] + extent[b_best] > math.sqrt(best):
            keep[a] = False
            keep[b_best] = False
            n_keep -= 2
    if n_keep < 2:
        return -1.0
    best = np.inf
    for a in range(m):
        if not keep[a]:
            continue
        for b in range(a + 1, m):
            if not keep[b]:
                continue
            s = _pair_sqdist(centers, a, centers, b)
            if s < best:
                best = s
    return 0.5 * math.sqrt(best)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def group_by_radius(C, radii, order, group_of):
    """ServerAggregation grouping (FeCA Algorithm 5, lines 1-8).

    Seeds are taken in ``order`` (all pairs by radius, descending, stable), skipping pairs
    already grouped; a seed's group is every ungrouped centroid ``t`` with
    ``||c_t - c_seed||^2 <= r_seed^2`` (closed ball, the seed itself included).

    Parameters
    ----------
    C : ndarray of shape (T, d), float32 or float64     # IN  all uploaded centroids
    radii : ndarray of shape (T,), same dtype as C       # IN
    order : ndarray of shape (T,), int64                 # IN  argsort of -radii, stable
    group_of : ndarray of shape (T,), int64              # OUT group of each pair, numbered
                                                         #     in creation order

    Returns
    -------
    n_groups : int
    """
    T = C.shape[0]
    for t in range(T):
        group_of[t] = -1
    g = 0
    for o in range(T):
        s = order[o]
        if group_of[s] >= 0:
            continue
        r2 = np.float64(radii[s]) * np.float64(radii[s])
        group_of[s] = g
        for t in range(T):
            if group_of[t] >= 0:
                continue
            if _pair_sqdist(C, t, C, s) <= r2:
                group_of[t] = g
        g += 1
    return g
