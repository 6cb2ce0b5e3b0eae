"""Synthetic data: isotropic Gaussian mixtures for scalability runs (GOLD §IV-E) and FeCA's
Stochastic Ball Model / separated mixtures (``specs/feca.md`` §7.4)."""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from ._partition import _as_generator, _check_int

__all__ = ["make_gaussian_mixture", "make_stochastic_ball", "make_separated_gaussian_mixture", "sbm_theorem_separation"]

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


# ---------------------------------------------------------------------------
# FeCA's synthetic models: the Stochastic Ball Model and separated Gaussian mixtures
# ---------------------------------------------------------------------------

#: Rejection-sampling attempts per centre in :func:`_place_centers`.
_PLACE_TRIES = 10_000


def sbm_theorem_separation(n_clusters: int, radius: float = 1.0, *, lam: float = 3.0, eta: float = 5.0) -> float:
    """Smallest equal centre spacing that meets FeCA's Theorem 4.1 under the Stochastic Ball Model.

    With all pairwise centre distances equal to ``Delta`` (``Delta_min = Delta_max``), the
    conditions ``Delta_max >= 4 lam^2 k^4 r`` and ``Delta_min >= 10 eta lam k^2 sqrt(r Delta_max)``
    hold iff ``Delta >= max(4 lam^2 k^4 r, (10 eta lam k^2)^2 r)``.

    Parameters
    ----------
    n_clusters : int
        ``k``.
    radius : float, default=1.0
        Ball radius ``r``.
    lam, eta : float, default=3.0, 5.0
        The theorem's constants (``lam >= 3``, ``eta >= 5``).

    Returns
    -------
    separation : float

    Examples
    --------
    >>> sbm_theorem_separation(3, 1.0)
    1822500.0
    """
    k = _check_int(n_clusters, "n_clusters", minimum=1)
    if not (radius > 0 and lam >= 3 and eta >= 5):
        raise ValueError(f"need radius > 0, lam >= 3, eta >= 5; got {radius}, {lam}, {eta}")
    return float(max(4 * lam**2 * k**4 * radius, (10 * eta * lam * k**2) ** 2 * radius))


def _place_centers(k: int, d: int, min_separation: float, box: tuple[float, float], rng: np.random.Generator) -> np.ndarray:
    """``k`` centres uniform in ``box^d``, each at least ``min_separation`` from the others."""
    lo, hi = box
    centers = np.empty((k, d))
    for j in range(k):
        for _ in range(_PLACE_TRIES):
            c = rng.uniform(lo, hi, size=d)
            if j == 0 or np.sqrt(((centers[:j] - c) ** 2).sum(1)).min() >= min_separation:
                centers[j] = c
                break
        else:
            raise ValueError(
                f"could not place {k} centres {min_separation} apart in the box {box!r} in {d} dimension(s); "
                "enlarge center_box or lower min_separation"
            )
    return centers


def _check_generator_args(n_samples, n_features, n_clusters, scale, name, min_separation, center_box):
    n = _check_int(n_samples, "n_samples", minimum=1)
    d = _check_int(n_features, "n_features", minimum=1)
    k = _check_int(n_clusters, "n_clusters", minimum=1)
    if k > n:
        raise ValueError(f"n_clusters={k} is larger than n_samples={n}")
    scale = float(scale)
    if not (math.isfinite(scale) and scale >= 0):
        raise ValueError(f"{name} must be finite and >= 0, got {scale}")
    if isinstance(min_separation, str):
        if min_separation != "simplex":
            raise ValueError(f"min_separation must be a number or 'simplex', got {min_separation!r}")
    else:
        min_separation = float(min_separation)
        if not (math.isfinite(min_separation) and min_separation >= 0):
            raise ValueError(f"min_separation must be finite and >= 0, got {min_separation}")
    lo, hi = (float(v) for v in center_box)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"center_box must satisfy low < high (both finite), got {center_box!r}")
    return n, d, k, scale, min_separation, (lo, hi)


def _centers_for(k, d, min_separation, box, separation, rng):
    if min_separation == "simplex":
        if d < k:
            raise ValueError(f"simplex centres need n_features >= n_clusters ({d} < {k})")
        centers = np.zeros((k, d))
        centers[np.arange(k), np.arange(k)] = separation / math.sqrt(2.0)
        return centers
    return _place_centers(k, d, min_separation, box, rng)


def make_stochastic_ball(
    n_samples: int,
    n_features: int,
    n_clusters: int,
    *,
    radius: float = 1.0,
    min_separation: float | str = 4.0,
    separation: float | None = None,
    center_box: tuple[float, float] = (-10.0, 10.0),
    random_state: int | np.random.Generator | None = None,
    return_centers: bool = False,
):
    """Sample the Stochastic Ball Model of FeCA's theory (uniform points in disjoint balls).

    Density ``f = (1/k) sum_s Unif(ball(theta_s, radius))``: cluster sizes are equal (±1,
    largest remainders) and a point of cluster ``s`` is ``theta_s + radius * u^(1/d) g/||g||``
    with ``g ~ N(0, I)``, ``u ~ U(0, 1)`` (``specs/feca.md`` §7.4). Rows come in random order.

    Parameters
    ----------
    n_samples, n_features, n_clusters : int
        ``n``, ``d``, ``k`` (``1 <= k <= n``).
    radius : float, default=1.0
        Ball radius ``r``.
    min_separation : float or "simplex", default=4.0
        Centres are drawn uniformly in ``center_box`` and rejected when closer than this to
        an earlier one (use ``> 2 radius`` for disjoint balls). ``"simplex"`` puts centre
        ``s`` at ``separation / sqrt(2) * e_s`` so all pairs are exactly ``separation``
        apart (needs ``d >= k``), e.g. with :func:`sbm_theorem_separation`.
    separation : float, optional
        Spacing of the ``"simplex"`` centres; default ``sbm_theorem_separation(k, radius)``.
    center_box : (float, float), default=(-10.0, 10.0)
    random_state : int, numpy Generator or None, default=None
    return_centers : bool, default=False

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), int64
    centers : ndarray of shape (n_clusters, n_features)
        Only when ``return_centers``.

    Examples
    --------
    >>> X, y, c = make_stochastic_ball(300, 2, 3, radius=1.0, min_separation=5.0, random_state=0,
    ...                                return_centers=True)
    >>> bool((np.linalg.norm(X - c[y], axis=1) <= 1.0).all())
    True
    """
    n, d, k, r, min_sep, box = _check_generator_args(
        n_samples, n_features, n_clusters, radius, "radius", min_separation, center_box)
    rng = _as_generator(random_state)
    sep = sbm_theorem_separation(k, r if r > 0 else 1.0) if separation is None else float(separation)
    centers = _centers_for(k, d, min_sep, box, sep, rng)
    y = rng.permutation(np.repeat(np.arange(k, dtype=np.int64), _exact_counts(n, np.full(k, 1.0 / k))))
    g = rng.standard_normal((n, d))
    norms = np.linalg.norm(g, axis=1)
    norms[norms == 0] = 1.0
    u = rng.uniform(size=n) ** (1.0 / d)
    X = centers[y] + (r * u / norms)[:, None] * g
    if return_centers:
        return X, y, centers
    return X, y


def make_separated_gaussian_mixture(
    n_samples: int,
    n_features: int,
    n_clusters: int,
    *,
    cluster_std: float = 1.0,
    min_separation: float | str = 10.0,
    separation: float | None = None,
    center_box: tuple[float, float] = (-50.0, 50.0),
    random_state: int | np.random.Generator | None = None,
    return_centers: bool = False,
):
    """Isotropic Gaussian mixture with a minimum centre separation (FeCA's GMM setting).

    ``x ~ N(theta_s, cluster_std^2 I)``, equal cluster sizes (±1), random row order;
    centres as in :func:`make_stochastic_ball`. ``min_separation / cluster_std >= 10`` is the
    well-separated regime of ``specs/feca.md`` §7.4; smaller ratios give S-sets-like overlap.

    Parameters
    ----------
    n_samples, n_features, n_clusters : int
    cluster_std : float, default=1.0
    min_separation : float or "simplex", default=10.0
    separation : float, optional
        Spacing of ``"simplex"`` centres; default ``10 * cluster_std``.
    center_box : (float, float), default=(-50.0, 50.0)
    random_state : int, numpy Generator or None, default=None
    return_centers : bool, default=False

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), int64
    centers : ndarray of shape (n_clusters, n_features)
        Only when ``return_centers``.

    Examples
    --------
    >>> X, y = make_separated_gaussian_mixture(100, 3, 4, random_state=0)
    >>> X.shape, np.bincount(y).tolist()
    ((100, 3), [25, 25, 25, 25])
    """
    n, d, k, std, min_sep, box = _check_generator_args(
        n_samples, n_features, n_clusters, cluster_std, "cluster_std", min_separation, center_box)
    rng = _as_generator(random_state)
    sep = 10.0 * std if separation is None else float(separation)
    centers = _centers_for(k, d, min_sep, box, sep, rng)
    y = rng.permutation(np.repeat(np.arange(k, dtype=np.int64), _exact_counts(n, np.full(k, 1.0 / k))))
    X = centers[y] + std * rng.standard_normal((n, d))
    if return_centers:
        return X, y, centers
    return X, y
