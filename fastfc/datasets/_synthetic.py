"""Synthetic data: isotropic Gaussian mixtures for scalability runs (GOLD §IV-E)."""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from ._partition import _as_generator, _check_int

__all__ = ["make_gaussian_mixture"]

#: Rows are finished in blocks of about this many values, to bound temporaries.
_BLOCK_VALUES = 1 << 20


def _exact_counts(n: int, weights: np.ndarray) -> np.ndarray:
    """Split ``n`` into integer counts proportional to ``weights`` (largest remainders)."""
    raw = n * weights
    counts = np.floor(raw).astype(np.int64)
    short = n - int(counts.sum())
    if short:
        # stable order: ties go to the lower cluster index
        order = np.argsort(-(raw - counts), kind="stable")
        counts[order[:short]] += 1
    return counts


def make_gaussian_mixture(
    n_samples: int,
    n_features: int,
    n_clusters: int,
    *,
    cluster_std: float | ArrayLike = 1.0,
    center_box: tuple[float, float] = (-10.0, 10.0),
    weights: ArrayLike | None = None,
    random_state: int | np.random.Generator | None = None,
    dtype: DTypeLike = np.float64,
    return_centers: bool = False,
) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample an isotropic Gaussian mixture.

    Cluster ``k`` has centre ``mu_k``, drawn uniformly from the box
    ``center_box`` in every coordinate, and covariance
    ``cluster_std[k]**2 * I``. Cluster sizes are exactly proportional to
    ``weights`` (rounded by largest remainder) and the rows come in random
    order.

    Built for scale: noise is drawn directly in ``dtype`` with
    :meth:`numpy.random.Generator.standard_normal` into the output array,
    then scaled and shifted in place, block by block, so a
    ``10**6 x 100`` float32 sample needs little memory beyond its own 400 MB
    and takes about a second.

    Parameters
    ----------
    n_samples : int
        Number of rows ``n`` (>= 1).
    n_features : int
        Number of features ``d`` (>= 1).
    n_clusters : int
        Number of clusters ``K``, ``1 <= K <= n``.
    cluster_std : float or array-like of shape (n_clusters,), default=1.0
        Standard deviation of every coordinate, one value for all clusters or
        one per cluster; each >= 0.
    center_box : (float, float), default=(-10.0, 10.0)
        Bounds ``(low, high)``, ``low < high``, of the uniform centre draw.
    weights : array-like of shape (n_clusters,), optional
        Relative cluster sizes (non-negative, positive sum; normalised
        here). Default: equal sizes (±1). A cluster may get 0 rows when its
        weight is tiny.
    random_state : int, numpy Generator or None, default=None
        Seed or generator.
    dtype : {np.float64, np.float32}, default=np.float64
        Floating dtype of ``X`` (and of the centres).
    return_centers : bool, default=False
        Also return the centres.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), C-contiguous, ``dtype``
        The sample.
    y : ndarray of int64, shape (n_samples,)
        Cluster of each row, in ``0..n_clusters-1``.
    centers : ndarray of shape (n_clusters, n_features)
        Only when ``return_centers`` is True.

    Raises
    ------
    ValueError
        For non-positive sizes, ``n_clusters > n_samples``, negative or
        non-finite standard deviations, an empty ``center_box`` or invalid
        ``weights``.
    TypeError
        For non-integer sizes or a non-float ``dtype``.

    Examples
    --------
    >>> X, y = make_gaussian_mixture(1000, 5, 4, random_state=0, dtype=np.float32)
    >>> X.shape, X.dtype, np.bincount(y).tolist()
    ((1000, 5), dtype('float32'), [250, 250, 250, 250])
    """
    n = _check_int(n_samples, "n_samples", minimum=1)
    d = _check_int(n_features, "n_features", minimum=1)
    k = _check_int(n_clusters, "n_clusters", minimum=1)
    if k > n:
        raise ValueError(f"n_clusters={k} is larger than n_samples={n}")
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64, got {dt}")

    std = np.asarray(cluster_std, dtype=np.float64)
    if std.ndim == 0:
        std = np.full(k, float(std))
    elif std.shape != (k,):
        raise ValueError(f"cluster_std must be a number or have shape ({k},), got shape {std.shape}")
    if not np.all(np.isfinite(std)) or np.any(std < 0):
        raise ValueError(f"cluster_std must be finite and >= 0, got {cluster_std!r}")

    try:
        lo, hi = (float(v) for v in center_box)
    except (TypeError, ValueError):
        raise TypeError(f"center_box must be a pair of numbers (low, high), got {center_box!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"center_box must satisfy low < high (both finite), got {center_box!r}")

    if weights is None:
        w = np.full(k, 1.0 / k)
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (k,):
            raise ValueError(f"weights must have shape ({k},), got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError("weights must be finite, non-negative and have a positive sum")
        w = w / w.sum()

    rng = _as_generator(random_state)
    centers = rng.uniform(lo, hi, size=(k, d)).astype(dt, copy=False)
    y = rng.permutation(np.repeat(np.arange(k, dtype=np.int64), _exact_counts(n, w)))
    X = rng.standard_normal((n, d), dtype=dt)

    scale = std.astype(dt)
    same_std = bool(np.all(std == std[0]))
    if same_std and std[0] != 1.0:
        X *= scale[0]
    block = max(1, _BLOCK_VALUES // d)
    for start in range(0, n, block):
        stop = min(start + block, n)
        labels = y[start:stop]
        rows = X[start:stop]
        if not same_std:
            rows *= scale[labels][:, None]
        rows += centers[labels]
    if return_centers:
        return X, y, centers
    return X, y
