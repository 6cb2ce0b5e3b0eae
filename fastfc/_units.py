"""Federated units: per-feature standardisation agreed in one shot.

Euclidean clustering depends on the units of the features: with one feature in
metres and another in micrometres only the first carries distance. fastfc's
one-shot methods make their default mode unit-free without another round:

1. each client summarises its features by their per-feature moments
   (:func:`feature_moments`: count, mean, variance) and runs its local step in
   its *locally* standardised units (:func:`local_scaler`), uploading centres in
   raw units together with the moments;
2. the server pools the moments exactly (:func:`pool_moments`), standardises the
   uploaded centres with the *global* per-feature mean and standard deviation
   (:func:`global_scaler`), fuses them, and replies with centres in raw units and
   the per-feature weights ``1 / std``;
3. clients (and ``predict``) label rows by the nearest centre in those weighted
   units (:func:`nearest_weighted`).

A feature that is constant over the whole federation carries no distance: its
weight is 0 and :class:`ConstantFeatureWarning` names it.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ._limits import MAX_ABS_MEAN, MAX_COUNT, max_distance
from ._warnings import warn_caller

__all__ = [
    "standardize_rows",
    "ConstantFeatureWarning",
    "FeatureScaler",
    "feature_moments",
    "pool_moments",
    "local_scaler",
    "global_scaler",
    "nearest_weighted",
    "fill_empty_array",
    "check_unit_fields",
    "scale_ratio",
]

#: a feature whose standard deviation is at most this fraction of its mean magnitude is constant (the
#: cutoff of many rows; fewer rows get a smaller one, :func:`constant_cutoff`)
_REL_CONSTANT = 1e-9


def constant_cutoff(count) -> float:
    """Relative spread (standard deviation / mean magnitude) at or below which a feature of ``count`` rows is
    constant.

    A constant feature's moments carry rounding only: its mean, summed row by row, errs by at most
    ``count`` x 2^-53 of its magnitude, and that error is all of its computed spread (every deviation is the
    same). The cutoff is 8 times that bound, capped at :data:`_REL_CONSTANT` (reached at about 1.1 million
    rows). A fixed 1e-9 took real structure on a large common offset for a constant (3 clusters 30 apart at
    3e10: one cluster and a false "all rows are identical"), though float64 resolves it by far.
    """
    return min(_REL_CONSTANT, 8.0 * max(float(count), 1.0) * 2.0 ** -53)


class ConstantFeatureWarning(UserWarning):
    """Some features are constant over the federation; they carry no distance."""


#: clients with at least this many values (rows x features) split the moments' pass into two fixed
#: column halves (threaded when the budget allows); a function of the shape only, never of n_jobs
SPLIT_MIN_ELEMENTS = 1 << 18


def _run_parts(fn, parts: list, n_jobs) -> list:
    """``[fn(p) for p in parts]``, on up to ``n_jobs`` threads (NumPy and the compiled kernels release
    the GIL), in order: the calling thread runs parts ``0, w, 2w, ...`` itself and each of up to
    ``w - 1 = n_jobs - 1`` persistent helper threads (:func:`fastfc._parallel.helper_pool`) one of the
    other residues, so at most ``n_jobs`` threads work at once (in a helper thread: all inline)."""
    from ._parallel import effective_n_jobs, helper_pool

    n_workers = min(effective_n_jobs(n_jobs), len(parts))
    pool = helper_pool() if n_workers > 1 else None
    if pool is None:
        return [fn(p) for p in parts]
    from concurrent.futures import wait

    def share(j):
        return [fn(p) for p in parts[j::n_workers]]

    rest = [pool.submit(share, j) for j in range(1, n_workers)]
    try:
        shares = [share(0)]
    finally:
        wait(rest)  # the helpers write into the caller's buffers: never return (or raise) before them
    shares += [f.result() for f in rest]
    out = [None] * len(parts)
    for j, got in enumerate(shares):
        out[j::n_workers] = got
    return out


def _row_halves(n: int) -> list[slice]:
    """Two fixed row blocks of ``n`` rows (for elementwise work: any split gives the same values)."""
    return [slice(0, n // 2), slice(n // 2, n)]


def col_moments(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and population variance of a C-contiguous float64 ``X`` (n >= 1 rows) by the
    compiled column pass (:func:`fastfc._kernels._cpl.col_moments`: the same bits as
    ``X.mean(axis=0)``, ``X.var(axis=0)``).

    One thread: the pass streams ``X`` at about memory bandwidth (10^5 x 50: 3 ms for two
    passes over 40 MB), and keeping NumPy's order means every column is summed over all rows in
    order, so threads could only split the columns, and each would still stream all of ``X``
    (two column halves on two threads took longer than one pass; issue 15). Large clients
    therefore take :func:`col_moments_split` (two row halves, NumPy's values up to rounding).
    """
    from ._kernels._cpl import col_moments as kernel

    mean = np.empty(X.shape[1])
    var = np.empty(X.shape[1])
    kernel(X, mean, var)
    return mean, var


def col_moments_split(X: np.ndarray, n_jobs=1) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and population variance of a large client's rows, the row work split in two.

    For a C-contiguous float64 ``X`` of at least :data:`SPLIT_MIN_ELEMENTS` values (the caller
    checks; a function of the shape only). Each of two fixed row halves is summed row by row
    (:func:`fastfc._kernels._cpl.col_sums_rows`), ``mean = (sum_0 + sum_1) / n``; then each half's
    squared deviations from that mean (:func:`fastfc._kernels._cpl.col_sqdev_rows`),
    ``var = (sq_0 + sq_1) / n``. The halves run on up to two threads (``n_jobs``) and are added in
    that fixed order, so the bits are the same for any ``n_jobs``: those of the NumPy formula
    applied to the two halves (``(X[:h].sum(0) + X[h:].sum(0)) / n``, tested), which differ from
    :func:`col_moments` (one row-by-row sum over all rows) only in rounding.

    Why (issue 15): the one-sum pass, 30-120 ms at 10^6 x 10-50, was the largest step of a one-client
    fit that two threads could not share.
    """
    from ._kernels._cpl import col_sqdev_rows, col_sums_rows

    n, d = X.shape

    def sums(sl):
        out = np.empty(d)
        col_sums_rows(X, sl.start, sl.stop, out)
        return out

    mean = sum_of_halves(sums, n, n_jobs) / n

    def sqdev(sl):
        out = np.empty(d)
        col_sqdev_rows(X, mean, sl.start, sl.stop, out)
        return out

    return mean, sum_of_halves(sqdev, n, n_jobs) / n


def sum_of_halves(part, n: int, n_jobs=1):
    """``part(first half) + part(second half)`` of ``n`` rows (:func:`_row_halves`), the two on up to
    two threads (``n_jobs``) and added in that order: the same bits for any ``n_jobs``."""
    a, b = _run_parts(part, _row_halves(n), n_jobs)
    return a + b


def large_moments(X: np.ndarray) -> bool:
    """Whether a float64 client's moments take :func:`col_moments_split` (at least
    :data:`SPLIT_MIN_ELEMENTS` values and two rows): a function of the shape only."""
    return X.ndim == 2 and X.size >= SPLIT_MIN_ELEMENTS and X.shape[0] >= 2


def shift_scale_threads(X: np.ndarray, mean: np.ndarray, scale: np.ndarray, n_jobs=1) -> np.ndarray:
    """``(X - mean) / scale`` (a new C-contiguous float64 array) by the compiled elementwise pass
    (:func:`fastfc._kernels._cpl.shift_scale_rows`, NumPy's values), its two fixed row halves on
    up to two threads (``n_jobs``) for an ``X`` of at least :data:`SPLIT_MIN_ELEMENTS` values
    (elementwise: the same values for any split)."""
    from ._kernels._cpl import shift_scale_rows

    Z = np.empty(X.shape)
    # row blocks of C-contiguous arrays are C-contiguous: the kernel's one compiled specialisation
    halves = _row_halves(X.shape[0]) if X.size >= SPLIT_MIN_ELEMENTS else [slice(None)]
    _run_parts(lambda sl: shift_scale_rows(X[sl], mean, scale, Z[sl]), halves, n_jobs)
    return Z


def _moments_of(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and population variance of a float64 block (one (n, d) temporary)."""
    mean = X.mean(axis=0)
    dev = X - mean
    np.square(dev, out=dev)  # in place: the same values as (X - mean) ** 2, one temporary
    return mean, dev.mean(axis=0)


def feature_moments(X: np.ndarray, n_jobs=1) -> np.ndarray:
    """Per-feature count, mean and (population) variance of one client's rows.

    A client of at least 4 features takes them in one compiled pass
    (:func:`fastfc._kernels._cpl.col_moments`: every column accumulated row by row, as NumPy
    reduces a C-contiguous array along axis 0, hence the same bits as ``X.mean(axis=0)`` and
    ``((X - mean) ** 2).mean(axis=0)``, tested) without the (n, d) temporary of the NumPy
    formula: 7-10x faster at 10^5 x 10-50, and 62 -> 10 us at 1,000 x 10, where NumPy's per-call
    overhead dominates (issue 15). Fewer features use the NumPy formula. A client of at least
    :data:`SPLIT_MIN_ELEMENTS` values sums two fixed row halves instead, on up to two threads
    (:func:`col_moments_split`; the same bits for any ``n_jobs``, NumPy's up to rounding).
    The result does not depend on ``n_jobs``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    n_jobs : int or None, default=1
        Thread budget (the result does not depend on it).

    Returns
    -------
    moments : ndarray of shape (3, n_features), float64
        Rows: count (the same in every column), mean, variance (``ddof=0``).
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    if not n:
        return np.vstack([np.zeros(d), np.zeros(d), np.zeros(d)])
    if large_moments(X):
        mean, var = col_moments_split(np.ascontiguousarray(X), n_jobs)
    elif d >= 4:  # (fewer columns: NumPy may sum a column pairwise)
        mean, var = col_moments(np.ascontiguousarray(X))
    else:
        mean, var = _moments_of(X)
    return np.vstack([np.full(d, float(n)), mean, var])


def pool_moments(moments: list[np.ndarray]) -> tuple[float, np.ndarray, np.ndarray]:
    """Exact pooled count, mean and variance from per-client moments.

    Parameters
    ----------
    moments : list of ndarray of shape (3, n_features)
        :func:`feature_moments` of every client.

    Returns
    -------
    n : float
        Total row count.
    mean, var : ndarray of shape (n_features,)
        Mean and population variance of all rows together:
        ``var = sum_l n_l (var_l + (mean_l - mean)^2) / n``.
    """
    M = np.stack([np.asarray(m, dtype=np.float64) for m in moments])  # (L, 3, d)
    counts = M[:, 0, :]
    n = counts.sum(axis=0)
    safe = np.where(n > 0, n, 1.0)
    mean = (counts * M[:, 1, :]).sum(axis=0) / safe
    var = (counts * (M[:, 2, :] + (M[:, 1, :] - mean) ** 2)).sum(axis=0) / safe
    return float(n.max()) if n.size else 0.0, mean, var


@dataclass(frozen=True)
class FeatureScaler:
    """Affine per-feature map to standardised units; constant features map to 0.

    Attributes
    ----------
    shift : ndarray of shape (n_features,)
        Per-feature mean.
    scale : ndarray of shape (n_features,)
        Per-feature standard deviation (0 for a constant feature).
    weight : ndarray of shape (n_features,)
        ``1 / scale``, or 0 for a constant feature: the factor of each feature in distances.
    """

    shift: np.ndarray
    scale: np.ndarray
    weight: np.ndarray

    @classmethod
    def from_moments(cls, mean: np.ndarray, var: np.ndarray, count=None) -> FeatureScaler:
        """Scaler of the given per-feature mean and variance over ``count`` rows (None: many); a feature
        whose spread is within :func:`constant_cutoff` of its mean is constant."""
        mean = np.asarray(mean, dtype=np.float64)
        std = np.sqrt(np.maximum(np.asarray(var, dtype=np.float64), 0.0))
        constant = std <= (_REL_CONSTANT if count is None else constant_cutoff(count)) * np.abs(mean)
        constant |= ~(std > 0)  # zero (or NaN-free underflow) variance
        scale = np.where(constant, 0.0, std)
        weight = np.zeros_like(scale)
        np.divide(1.0, scale, out=weight, where=~constant)
        return cls(shift=mean, scale=scale, weight=weight)

    @property
    def constant(self) -> np.ndarray:
        """Boolean mask of the constant features."""
        return self.weight == 0.0

    def transform(self, X: np.ndarray, out: np.ndarray | None = None, n_jobs=1) -> np.ndarray:
        """Rows in standardised units: ``(X - shift) * weight`` (constant features become 0).

        ``out``: a float64 array of X's shape to write into (else one new array). ``n_jobs``:
        threads over two row halves for large ``X`` (elementwise: the same values for any). A
        large C-contiguous float64 ``X`` takes one compiled pass
        (:func:`fastfc._kernels._cpl.shift_weight_rows`) instead of NumPy's two (issue 15: at
        10^6 x 50, 180 ms of two read-write passes).
        """
        X = np.asarray(X)
        if out is None:
            out = np.empty(X.shape, dtype=np.float64)
        if X.ndim != 2 or X.size < SPLIT_MIN_ELEMENTS:
            blocks = [slice(None)]
        else:
            blocks = _row_halves(X.shape[0])

        fused = (X.ndim == 2 and X.dtype == np.float64 and X.flags.c_contiguous and out.dtype == np.float64
                 and out.flags.c_contiguous and X.size >= SPLIT_MIN_ELEMENTS)
        if fused:  # one compiled pass, the same values (each step rounded as NumPy's two)
            from ._kernels._cpl import shift_weight_rows

            shift = np.ascontiguousarray(self.shift, dtype=np.float64)
            weight = np.ascontiguousarray(self.weight, dtype=np.float64)

            def run(sl):
                shift_weight_rows(X, shift, weight, out, sl.start, sl.stop)
        else:
            def run(sl):
                Z = np.subtract(X[sl], self.shift, dtype=np.float64, out=out[sl])  # scaled in place
                Z *= self.weight

        _run_parts(run, blocks, n_jobs)
        return out

    def inverse(self, Z: np.ndarray) -> np.ndarray:
        """Rows back in raw units: ``shift + Z * scale`` (a constant feature gets its value)."""
        return self.shift + np.asarray(Z, dtype=np.float64) * self.scale


def standardize_rows(X: np.ndarray, bandwidth: float = 1.0, n_jobs=1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-feature standardisation ``(X - mean) / scale`` with ``scale = bandwidth * std``.

    The clients' local standardisation of FedHIRE/GOLD (CPL's kernel width in local standard
    deviations) and of Fed-k*-HC's robust micro-partition. An ``X`` of at least
    :data:`SPLIT_MIN_ELEMENTS` values runs compiled passes over two fixed row halves
    (:func:`col_moments_split`, :func:`fastfc._kernels._cpl.shift_scale_rows`), on up to two
    threads: the NumPy formula's values with the column sums taken per half and added (the same
    bits for any ``n_jobs``), in two passes over ``X`` and no temporary (3-4x faster than NumPy
    at 10^5 x 10-50 on one thread).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    bandwidth : float, default=1.0
        Multiplies the population standard deviation.
    n_jobs : int or None, default=1
        Threads of the moments and the shift of a large ``X`` (two fixed row halves,
        :func:`col_moments_split`, :func:`shift_scale_threads`); the result does not depend on it.

    Returns
    -------
    Xs : ndarray of shape (n_samples, n_features), C-contiguous float64
    mean : ndarray of shape (n_features,)
    scale : ndarray of shape (n_features,)
        ``bandwidth * std``; a feature whose std is 0 (or not a normal float) gets scale 1,
        so it stays constant (0) after the shift.
    """
    return standardize_rows_std(X, bandwidth, n_jobs)[:3]


def standardize_rows_std(X: np.ndarray, bandwidth: float = 1.0,
                         n_jobs=1) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`standardize_rows` and the per-feature population standard deviation it used: ``X.std(axis=0)``
    (a small ``X``) or the square root of :func:`col_moments_split`'s variance (a large one), unclipped."""
    X = np.asarray(X, dtype=np.float64)
    large = large_moments(X)
    if large:
        X = np.ascontiguousarray(X)
        mean, var = col_moments_split(X, n_jobs)
        std = np.sqrt(var)
    else:
        mean = X.mean(axis=0)
        std = X.std(axis=0)
    ok = np.isfinite(std) & (std > np.finfo(np.float64).tiny * 1e3) & (std > 1e-12 * np.abs(mean))
    scale = np.where(ok, bandwidth * np.where(ok, std, 1.0), 1.0)
    if large:
        return shift_scale_threads(X, mean, scale, n_jobs), mean, scale, std
    Z = X - mean
    Z /= scale  # in place: the same values as (X - mean) / scale, one temporary
    return np.ascontiguousarray(Z), mean, scale, std


def local_scaler(X: np.ndarray, n_jobs=1) -> tuple[FeatureScaler, np.ndarray]:
    """A client's own standardisation and its moments.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    n_jobs : int or None, default=1
        Thread budget of :func:`feature_moments` (the result does not depend on it).

    Returns
    -------
    scaler : FeatureScaler
        Local mean and standard deviation (features constant on this client get weight 0;
        no warning: they may vary elsewhere).
    moments : ndarray of shape (3, n_features)
        :func:`feature_moments` of ``X``, what the client uploads.
    """
    moments = feature_moments(X, n_jobs)
    return FeatureScaler.from_moments(moments[1], moments[2], X.shape[0]), moments


def global_scaler(moments: list[np.ndarray], *, who: str = "fastfc") -> FeatureScaler:
    """The federation's standardisation, pooled from every client's moments.

    Parameters
    ----------
    moments : list of ndarray of shape (3, n_features)
        Uploaded :func:`feature_moments` of every client.
    who : str, default="fastfc"
        Name used in the warning.

    Returns
    -------
    scaler : FeatureScaler

    Warns
    -----
    ConstantFeatureWarning
        When some feature is constant over all rows (it then carries no distance);
        the message names the features, or says that every row is identical.
    """
    count, mean, var = pool_moments(moments)
    scaler = FeatureScaler.from_moments(mean, var, count)
    const = np.flatnonzero(scaler.constant)
    if const.size == scaler.weight.size:
        warn_caller(
            f"{who}: every feature is constant over the federation, so all rows are identical; "
            "they form a single cluster", ConstantFeatureWarning,
        )
    elif const.size:
        shown = ", ".join(map(str, const[:10])) + (", ..." if const.size > 10 else "")
        warn_caller(
            f"{who}: feature(s) {shown} are constant over the federation and carry no distance",
            ConstantFeatureWarning,
        )
    return scaler


def nearest_weighted(X: np.ndarray, centers: np.ndarray, weight: np.ndarray | None, *, n_jobs: int | None = 1) -> np.ndarray:
    """Nearest centre of every row in per-feature weighted units.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    centers : ndarray of shape (n_centers, n_features)
    weight : ndarray of shape (n_features,) or None
        Factor of each feature in the distance, ``|| (x - c) * weight ||``; ``None``
        or an empty array means raw units (all ones).
    n_jobs : int or None, default=1

    Returns
    -------
    labels : ndarray of shape (n_samples,), int32
        Ties go to the lowest centre index.
    """
    from ._assign import assign_nearest

    if weight is None or np.size(weight) == 0:
        return assign_nearest(X, centers, n_jobs=n_jobs)
    w = np.asarray(weight, dtype=np.float64)
    Cw = np.ascontiguousarray(np.asarray(centers, dtype=np.float64) * w)
    # the rows X * w, scaled chunk by chunk inside the kernel (no weighted (n, d) copy of X): the
    # labels of assign_nearest(X * w, Cw) bit for bit
    return assign_nearest(X, Cw, n_jobs=n_jobs, row_scale=w)


def fill_empty_array(message, field: str, shape: tuple) -> None:
    """Set an optional array field of a frozen message to an empty array when it is None.

    The unit fields of summaries and replies (moments, weights) are empty in raw units.
    """
    if getattr(message, field) is None:
        object.__setattr__(message, field, np.empty(shape, dtype=np.float64))


def int_or_zero(value) -> int:
    """``value`` if it is an int (a message's ``n_features`` before validation), else 0."""
    return value if isinstance(value, int) else 0


def check_unit_fields(message) -> None:
    """Shape checks of a message's optional ``feature_stats`` / ``feature_weight`` arrays.

    ``feature_stats`` must be ``(3, n_features)`` (count, mean, variance; counts and
    variances >= 0, and no larger than valid client data gives: counts at most
    :data:`~fastfc._limits.MAX_COUNT`, means within :data:`~fastfc._limits.MAX_ABS_MEAN`,
    variances within its square) or empty; ``feature_weight`` ``(n_features,)`` or empty.
    """
    d = message.n_features
    stats = getattr(message, "feature_stats", None)
    if stats is not None:
        if stats.shape not in ((0, d), (3, d)):
            message._fail(f"feature_stats shape {stats.shape} is neither (3, {d}) nor empty")
        if stats.size and stats[[0, 2]].min() < 0:
            message._fail("feature_stats counts and variances must be >= 0")
        if stats.size:
            for row, what, bound in ((0, "count", MAX_COUNT), (1, "mean", MAX_ABS_MEAN), (2, "variance", MAX_ABS_MEAN ** 2)):
                peak = float(np.abs(stats[row]).max())
                if peak > bound:
                    message._fail(f"feature_stats: a {what} of magnitude {peak:.3g} exceeds {bound:.3g}, more than "
                                  "valid client data gives")
    weight = getattr(message, "feature_weight", None)
    if weight is not None and weight.shape not in ((0,), (d,)):
        message._fail(f"feature_weight shape {weight.shape} is neither ({d},) nor empty")


def check_distances(message, name: str) -> None:
    """Distances in array ``name`` (radii, spreads) are at most the largest distance between two points of
    valid client data in ``message.n_features`` dimensions (:func:`fastfc._limits.max_distance`)."""
    values = getattr(message, name)
    bound = max_distance(message.n_features)
    if values.size and float(values.max()) > bound:
        message._fail(f"{name}: a distance of {float(values.max()):.3g} exceeds {bound:.3g}, more than valid client "
                      "data gives")


def scale_ratio(stats: np.ndarray, weight: np.ndarray) -> float:
    """Factor that carries a length from a client's standardised units to the federation's.

    Parameters
    ----------
    stats : ndarray of shape (3, n_features)
        The client's :func:`feature_moments`.
    weight : ndarray of shape (n_features,)
        The federation's per-feature weights ``1 / std`` (0 for constant features).

    Returns
    -------
    ratio : float
        RMS over the features that vary both locally and globally of
        ``local std / global std``; exact for any vector when the ratio is the same for
        every feature (e.g. IID clients), 1.0 when no feature qualifies.
    """
    local_std = np.sqrt(np.maximum(stats[2], 0.0))
    use = (weight > 0) & (local_std > 0)
    if not use.any():
        return 1.0
    return float(np.sqrt(np.mean((local_std[use] * weight[use]) ** 2)))


#: a client's standardised rows of this many bytes or more (float64) are written into a buffer that the
#: next client of FeCA or k-FED in the same thread reuses (:func:`standardised_rows`); below, a new array each time
REUSE_MIN_BYTES = 1 << 22
#: ... and of at most this many bytes (the memory a thread keeps between fits); above, a new array each time
REUSE_MAX_BYTES = 1 << 26

#: per thread: the reusable buffer of :func:`standardised_rows` (absent while a client uses it)
_rows_buffer = threading.local()


@contextmanager
def standardised_rows(X: np.ndarray, scaler, n_threads: int):
    """``scaler.transform(X)`` (float64, C-contiguous) for the body of the ``with``, or ``X`` when
    ``scaler`` is None.

    Between :data:`REUSE_MIN_BYTES` and :data:`REUSE_MAX_BYTES` the rows are written into a buffer
    kept by the calling thread for its next client (it holds up to the largest such client's size
    between fits; a nested use in the thread while it is out gets a new array). A new array of
    this size is memory the kernel maps on first write: NumPy asks for huge pages above 4 MB, glibc
    maps (and unmaps on free) every block above 32 MB, and a 10^5 x 50 client's 40 MB of rows was
    written by two threads at once (the transform's two row halves with ``n_jobs=2``). That first
    write cost the helper thread's half 0-55 ms of system time (page faults), against 7 ms of CPU for
    the half on a mapped buffer, most often in a process's first fits: FeCA at ``n_jobs=2`` was then
    slower than at 1 in the one-client table (0.87x; issue 15; ``benchmarks/feca_warmup.py``), and
    k-FED's large clients write the same copy. A new buffer's first write here is on one thread. The values are the same whatever buffer holds
    them: the result does not depend on it.
    """
    if scaler is None:
        yield X
        return
    size = X.shape[0] * X.shape[1]
    if not REUSE_MIN_BYTES <= 8 * size <= REUSE_MAX_BYTES:
        yield scaler.transform(X, n_jobs=n_threads)
        return
    buf = getattr(_rows_buffer, "buf", None)
    _rows_buffer.buf = None  # in use: a nested client in this thread makes its own
    fresh = buf is None or buf.size < size
    if fresh:
        del buf
        buf = np.empty(size)
    try:
        Z = buf[:size].reshape(X.shape)
        yield scaler.transform(X, out=Z, n_jobs=1 if fresh else n_threads)
    finally:
        _rows_buffer.buf = buf
