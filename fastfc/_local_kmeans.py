"""Local k-means of one client on the client's thread budget, deterministic for any thread count.

Two steps, each split over rows with a fixed partition and a fixed reduction order, so
that seeds, centres and labels are the same bits for every ``n_jobs``:

* :func:`kmeanspp` -- greedy k-means++ seeding (``2 + floor(ln k)`` candidates per step,
  the variant scikit-learn uses) in the compiled kernel
  :func:`fastfc._kernels._seed.kmeanspp_kernel` (the same seeds as the Numba kernel
  :func:`fastfc._kernels._feca.kmeans_plusplus` from the same uniforms).
* :func:`lloyd` -- Lloyd iterations from given centres, each one pass of the fused
  assign + accumulate kernel :func:`fastfc._lloyd.lloyd_stats` (exact float64 distances,
  float64 sums), then one labelling pass (:func:`fastfc._assign.assign_nearest`).

Large clients (at least 8192 rows, :func:`subsample_size`) run their seeding and restarts on a
uniform subsample (:func:`subsample_rows`); see k-FED's and Fed-k*-HC's Notes.

These are not scikit-learn's ``KMeans``: scikit-learn labels rows through
``||c||^2 - 2 x.c`` in the data's dtype and sums per-thread partials in a
thread-count-dependent order; here distances are exact float64 sums and the partial sums
are taken over blocks that depend on the shape only. Results therefore differ from
scikit-learn's in the last bits (and, through ties and near-ties, occasionally in labels),
but never between thread counts.
"""
from __future__ import annotations

import numpy as np

from ._assign import assign_nearest
from ._lloyd import lloyd_stats
from ._parallel import effective_n_jobs, kernel_threads, limit_blas_threads

__all__ = ["kmeanspp", "lloyd", "n_trials_for", "mean_feature_variance", "use_threaded_engine",
           "THREADED_MIN_ELEMENTS", "subsample_size", "subsample_rows", "SUBSAMPLE_MIN", "SUBSAMPLE_PER_CLUSTER",
           "SUBSAMPLE_MIN_ROWS"]

#: clients with at least this many values (rows x features) run their local k-means on these kernels;
#: smaller ones keep scikit-learn's one-thread steps (threads do not pay there, and the per-iteration
#: overhead of the kernels' validation would dominate). A function of the shape only, never of n_jobs.
THREADED_MIN_ELEMENTS = 1 << 18


def use_threaded_engine(n_samples: int, n_features: int) -> bool:
    """Whether a client of this shape runs its local k-means on this module's kernels.

    Depends on the shape only (``n_samples * n_features >= THREADED_MIN_ELEMENTS``), so a
    client's result never depends on ``n_jobs``.
    """
    return n_samples * n_features >= THREADED_MIN_ELEMENTS


#: rows of the uniform subsample on which large clients run their restarts (at least; see :func:`subsample_size`)
SUBSAMPLE_MIN = 1024
#: ... and at least this many rows per cluster of the local k-means
SUBSAMPLE_PER_CLUSTER = 40
#: clients with fewer rows never subsample (every published split and sanity-grid client is below it)
SUBSAMPLE_MIN_ROWS = 8192


def subsample_size(n_samples: int, n_clusters: int) -> int | None:
    """Rows of the uniform subsample a client of ``n_samples`` rows seeds and restarts on, or ``None``.

    ``m = max(SUBSAMPLE_MIN, SUBSAMPLE_PER_CLUSTER * n_clusters)`` rows (2048 for ``k <= 32``)
    when the client has at least ``max(SUBSAMPLE_MIN_ROWS, 2 m)`` rows (8192 for ``k <= 64``);
    ``None`` (no subsample: every step on all rows) for smaller clients. A function of the shape
    and ``k`` only, never of ``n_jobs``: every published split (at most 2,747 rows per client)
    and every sanity-grid client (at most 2,000 rows) stays below it.
    """
    m = max(SUBSAMPLE_MIN, SUBSAMPLE_PER_CLUSTER * int(n_clusters))
    return m if n_samples >= max(SUBSAMPLE_MIN_ROWS, 2 * m) else None


def subsample_rows(n_samples: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` distinct rows of ``0 .. n_samples - 1`` drawn uniformly from ``rng``, in increasing order.

    ``rng.choice(n_samples, size, replace=False)``, sorted (rows are then read in memory order).
    """
    return np.sort(rng.choice(n_samples, size=size, replace=False))


#: rows per chunk of the seeding kernel's distance pass (a chunk stays in cache across candidates)
SEED_CHUNK = 1024
#: a seeding step runs on several threads from this many multiply-adds (rows x features x candidates):
#: one step's region, with a serial part of about ``n (n_trials + 2)`` additions after it, so a lower
#: bound than :data:`fastfc._parallel.PARALLEL_MIN_WORK` (2,000 x 50 rows, k = 50, keep their threads)
SEED_PARALLEL_MIN_WORK = 1 << 18


def n_trials_for(n_clusters: int) -> int:
    """Candidates per greedy k-means++ step: ``2 + floor(ln k)`` (scikit-learn's)."""
    return 2 + int(np.log(n_clusters))


def kmeanspp(X: np.ndarray, n_clusters: int, rng: np.random.Generator, *, n_jobs=1,
             n_trials: int | None = None) -> np.ndarray:
    """Row indices of greedy k-means++ seeds, computed on ``n_jobs`` threads (same seeds for any).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64
        Converted to a C-contiguous float array when it is not one.
    n_clusters : int
        ``1 <= n_clusters <= n_samples``.
    rng : numpy.random.Generator
        Supplies ``1 + (n_clusters - 1) * n_trials`` uniforms (:func:`n_trials_for`).
    n_jobs : int or None, default=1
        Threads of the kernel.
    n_trials : int or None, default=None
        Candidates per step; ``None``: :func:`n_trials_for` (greedy); 1: plain k-means++.

    Returns
    -------
    seeds : ndarray of shape (n_clusters,), int64
        The row of each seed, in drawing order.
    """
    from ._kernels._seed import kmeanspp_kernel

    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    if X.dtype != np.float32:
        X = np.ascontiguousarray(X, dtype=np.float64)
    else:
        X = np.ascontiguousarray(X)
    n = X.shape[0]
    if not 1 <= n_clusters <= n:
        raise ValueError(f"n_clusters must be in 1 .. n_samples={n}, got {n_clusters}")
    n_trials = n_trials_for(n_clusters) if n_trials is None else int(n_trials)
    if not 1 <= n_trials <= 64:
        raise ValueError(f"n_trials must be in 1 .. 64, got {n_trials}")
    uniforms = rng.random(1 + (n_clusters - 1) * n_trials)
    seeds = np.empty(n_clusters, dtype=np.int64)
    closest = np.empty(n)
    cand = np.empty((n_trials, n))
    cum = np.empty(n)
    # each step is one parallel region over the rows' distances to its candidates: a step of a small
    # X (a subsample's 2,000 rows) runs on one thread (the seeds do not depend on it)
    n_threads = kernel_threads(n_jobs, n * X.shape[1] * n_trials, SEED_PARALLEL_MIN_WORK)
    kmeanspp_kernel(X, uniforms, n_trials, seeds, closest, cand, cum, n_threads, SEED_CHUNK)
    return seeds


def mean_feature_variance(X: np.ndarray, n_jobs=1) -> float:
    """``mean(var(X, axis=0))`` (scikit-learn's tolerance scale), the same bits for any ``n_jobs``.

    The features are cut into two fixed halves whose variances NumPy computes separately
    (on two threads when ``n_jobs >= 2`` and ``X`` has at least ``SPLIT_MIN_ELEMENTS`` values; NumPy
    releases the GIL), so the split, hence the
    result, does not depend on the thread count.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), n_samples >= 1
    n_jobs : int or None, default=1

    Returns
    -------
    float
    """
    from ._units import SPLIT_MIN_ELEMENTS, _run_parts

    d = X.shape[1]
    halves = [slice(0, d // 2), slice(d // 2, d)] if d >= 2 else [slice(0, d)]
    # the calling thread takes the first half, a pool thread the second, and only for a large X
    # (a subsample's 2048 x d rows cost less than starting a thread): the same halves either way
    parts = _run_parts(lambda sl: np.var(X[:, sl], axis=0), halves,
                       n_jobs if X.size >= SPLIT_MIN_ELEMENTS else 1)
    return float(np.mean(np.concatenate(parts)))


def _relocate_empty(X, centers, counts, sums, n_jobs) -> None:
    """Give every empty cluster the row farthest from its centre (scikit-learn's rule), in place.

    The rows are labelled by ``centers`` (the labels of :func:`lloyd_stats`); the
    ``n_empty`` rows of largest squared distance (ties: lowest row) are taken, in
    decreasing distance, by the empty clusters in increasing index, and moved out of
    their own cluster's ``counts`` and ``sums``.
    """
    empty = np.flatnonzero(counts == 0)
    labels, dist = assign_nearest(X, centers, n_jobs=n_jobs, return_distances=True, check_finite=False)
    far = np.argsort(-dist.astype(np.float64), kind="stable")[: empty.size]
    for j, r in zip(empty, far):
        row = np.asarray(X[r], dtype=np.float64)
        old = labels[r]
        if counts[old] > 1:  # never empty the cluster it leaves
            counts[old] -= 1
            sums[old] -= row
            counts[j] = 1
            sums[j] = row


def lloyd(X: np.ndarray, init: np.ndarray, *, max_iter: int = 300, tol: float = 1e-4, n_jobs=1,
          var_mean: float | None = None, labels: bool = True) -> tuple[np.ndarray, np.ndarray | None, float, int]:
    """Lloyd k-means from ``init`` on ``n_jobs`` threads; the same bits for any ``n_jobs``.

    Each iteration is one :func:`fastfc._lloyd.lloyd_stats` pass (nearest centre by exact
    float64 distance, ties to the lowest index; per-cluster counts and float64 sums), then
    every centre moves to its rows' mean; a cluster left empty takes the row farthest from
    its centre (scikit-learn's rule). It stops when the centres moved by at most
    ``tol * mean(var(X))`` in total squared distance (scikit-learn's tolerance) or after
    ``max_iter`` iterations; the labels and inertia are then those of the final centres.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64, finite
        Read as it is (never copied as a whole, never modified).
    init : ndarray of shape (n_clusters, n_features)
        Starting centres.
    max_iter : int, default=300
    tol : float, default=1e-4
        Relative tolerance (scikit-learn's ``KMeans`` semantics).
    n_jobs : int or None, default=1
        Threads of the kernels.
    var_mean : float or None, default=None
        :func:`mean_feature_variance` of ``X`` when the caller has it (several starts on one ``X``).
    labels : bool, default=True
        ``False``: no labelling pass after the last iteration; ``labels`` is then ``None`` and
        ``inertia`` that of the last iteration's pass (the centres before the final update; at
        convergence they moved by at most the tolerance), enough to rank starts.

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features), float64
    labels : ndarray of shape (n_samples,), int32, or None
        Nearest final centre of every row (``None`` with ``labels=False``).
    inertia : float
        Sum of the squared distances of the rows to their final centres (with
        ``labels=False``: to the centres of the last iteration's pass).
    n_iter : int
        Lloyd iterations run.
    """
    X = np.asarray(X)
    if X.dtype != np.float32 and X.dtype != np.float64:
        X = X.astype(np.float64)
    centers = np.array(init, dtype=np.float64, order="C", copy=True)
    if centers.ndim != 2 or centers.shape[1] != X.shape[1] or centers.shape[0] == 0:
        raise ValueError(f"init must have shape (n_clusters, {X.shape[1]}), got {centers.shape}")
    if tol == 0:
        tol_abs = 0.0
    else:
        tol_abs = (mean_feature_variance(X, n_jobs) if var_mean is None else float(var_mean)) * tol
    n_iter = 0
    want_labels = labels
    with limit_blas_threads(1):  # once for every pass (the kernels' own limits are then no-ops)
        for n_iter in range(1, max_iter + 1):
            counts, sums, inertia = lloyd_stats(X, centers, n_jobs=n_jobs)
            if not counts.all():
                _relocate_empty(X, centers, counts, sums, n_jobs)
            new = centers.copy()
            filled = counts > 0
            new[filled] = sums[filled] / counts[filled, None]
            shift = float(((new - centers) ** 2).sum())
            centers = new
            if shift <= tol_abs:
                break
        if not want_labels:
            return centers, None, float(inertia.sum()), n_iter
        labels, dist = assign_nearest(X, centers, n_jobs=n_jobs, return_distances=True, check_finite=False)
    return centers, labels, float(dist.sum(dtype=np.float64)), n_iter
