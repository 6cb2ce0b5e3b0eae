"""Plain NumPy reference of the Ward kernel (:mod:`fastfc._kernels._ward`): slow, obvious, trusted.

The textbook agglomeration: a dense square matrix of cluster distances, merge the closest pair
(lowest indices among equal distances), update with Ward's Lance-Williams formula, repeat.
"""
import numpy as np


def ward_merges_ref(P):
    """Merge heights (increasing) and the partition after every merge, of Ward's agglomeration.

    Returns ``(heights, partitions)``: ``partitions[m]`` labels the points after ``m`` merges,
    numbered by smallest member (``partitions[0]`` = every point alone).
    """
    P = np.asarray(P, dtype=np.float64)
    n = P.shape[0]
    diff = P[:, None, :] - P[None, :, :]
    D = np.sqrt((diff * diff).sum(axis=2))
    np.fill_diagonal(D, np.inf)
    size = np.ones(n)
    alive = np.ones(n, dtype=bool)
    owner = np.arange(n)  # cluster slot of every point
    heights, partitions = [], [np.arange(n)]
    for _ in range(n - 1):
        M = np.where(alive[:, None] & alive[None, :], D, np.inf)
        flat = int(np.argmin(M))
        x, y = divmod(flat, n)
        x, y = min(x, y), max(x, y)
        h = D[x, y]
        nx, ny = size[x], size[y]
        ni = size
        t = 1.0 / (nx + ny + ni)
        new = np.sqrt((ni + nx) * t * D[x] ** 2 + (ni + ny) * t * D[y] ** 2 - ni * t * h * h)
        D[y, :] = new
        D[:, y] = new
        D[y, y] = np.inf
        alive[x] = False
        size[y] = nx + ny
        owner[owner == x] = y
        heights.append(h)
        _, first, inv = np.unique(owner, return_index=True, return_inverse=True)
        rank = np.empty(first.shape[0], dtype=np.int64)
        rank[np.argsort(first)] = np.arange(first.shape[0])
        partitions.append(rank[inv.reshape(-1)])
    return np.array(heights), partitions
