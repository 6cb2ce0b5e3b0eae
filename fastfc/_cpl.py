"""Competitive penalized learning (CPL) engine shared by Fed-HIRE and GOLD.

Thin Python orchestration over the Numba kernels of :mod:`fastfc._kernels._cpl`:

* :func:`cpl` -- one CPL run (FCPL on a client, or one MCPL stage on the server),
  fed_hire.md §3.1;
* :func:`mcpl` -- the server's multi-granular CPL (fed_hire.md §3.3), with GOLD's optional
  objective tolerance (gold.md §3.3);
* :func:`weighted_kmodes` -- the weighted k-modes on the multi-granular label matrix
  (fed_hire.md §3.5 = GOLD's REMC, gold.md §3.4).

Randomness never enters here: callers draw the seed indices (``rng.permutation(n)[:k]``, or
a legacy ``RandomState.choice(range(n), k, replace=False)`` for parity) and pass them in, so
the same seeds always give the same output, whatever the thread count.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np

from fastfc._validation import check_client_data
from fastfc._kernels._cpl import (
    cpl_compact_live,
    cpl_feature_weights,
    cpl_init_logw,
    cpl_objective,
    cpl_pass,
    kmodes_assign,
    kmodes_modes,
    kmodes_stats,
    kmodes_weights,
)

__all__ = ["CPLResult", "cpl", "mcpl", "weighted_kmodes", "candidate_count"]

_SEMANTICS = ("robust", "reference")


class CPLResult(NamedTuple):
    """Output of one CPL run.

    Attributes
    ----------
    centers : ndarray of shape (n_clusters, n_features), float64
        Centroid ``S_j / m_j`` (running sum over count) of every surviving candidate, in
        increasing original-candidate order.
    labels : ndarray of shape (n_samples,), int64
        Cluster of every sample, in ``0..n_clusters-1`` (surviving candidates relabelled in
        increasing original index).
    n_clusters : int
        Number of surviving candidates ``k'`` (candidates with at least one member).
    n_passes : int
        Passes over the data that were run (0 when ``k = 1`` is returned at once).
    objective : float
        GOLD's CPL objective (gold.md Eq. 6 with the normalised similarity of Eq. 22) at the
        final state: ``J = sum_i s(x_i, c_{y_i}) / sum_t s(x_i, c_t)``, with
        ``s(x, c_t) = exp(-1/2 sum_z m_tz (x_z - c_tz)^2)`` over the surviving candidates,
        using the feature weights of the last pass. ``0 <= J <= n_samples``.
    """

    centers: np.ndarray
    labels: np.ndarray
    n_clusters: int
    n_passes: int
    objective: float


@contextmanager
def numba_threads(n_threads: int):
    """Numba's thread count in the calling thread set to ``n_threads`` (capped by Numba's pool)
    for the body; yields the count the kernels are told to use (1: no parallel region).

    Numba's count is per calling thread, so concurrent client threads do not interfere. The
    ``workqueue`` threading layer is not safe to enter from several threads at once: there,
    the parallel regions of concurrent callers are serialised by a lock.
    """
    n_threads = int(n_threads) if n_threads else 1
    if n_threads <= 1:
        yield 1
        return
    import numba

    nt = max(1, min(n_threads, numba.config.NUMBA_NUM_THREADS))
    if nt <= 1:
        yield 1
        return
    prev = numba.get_num_threads()
    lock = _WORKQUEUE_LOCK if _may_use_workqueue() else nullcontext()
    with lock:
        numba.set_num_threads(nt)
        try:
            yield nt
        finally:
            numba.set_num_threads(prev)


def _may_use_workqueue() -> bool:
    """Whether Numba may run parallel regions on its ``workqueue`` layer (no safe layer available)."""
    global _WORKQUEUE
    if _WORKQUEUE is None:
        import importlib

        import numba

        layer = str(numba.config.THREADING_LAYER)
        safe = {"omp": ("omppool",), "tbb": ("tbbpool",)}.get(layer, ("tbbpool", "omppool"))
        ok = False
        if layer != "workqueue":
            for mod in safe:
                try:
                    importlib.import_module(f"numba.np.ufunc.{mod}")
                    ok = True
                    break
                except ImportError:
                    pass
        _WORKQUEUE = not ok
    return _WORKQUEUE


_WORKQUEUE: bool | None = None
_WORKQUEUE_LOCK = threading.Lock()


def candidate_count(ratio: float, n: int) -> int:
    """Number of CPL candidates for ``n`` rows: ``max(1, min(n, round(ratio * n)))``.

    NumPy rounding (half to even), as the reference code; fed_hire.md §3.1.8 and A8.
    """
    return int(max(1, min(n, int(np.round(ratio * n)))))


def _check_data(X) -> np.ndarray:
    return check_client_data(X, dtype=(np.float64,))


def _check_params(eta, max_passes, semantics, eps) -> None:
    if not isinstance(eta, Real) or not np.isfinite(eta) or eta < 0:
        raise ValueError(f"eta must be a finite number >= 0, got {eta!r}")
    if not isinstance(max_passes, Integral) or max_passes < 1:
        raise ValueError(f"max_passes must be an integer >= 1, got {max_passes!r}")
    if semantics not in _SEMANTICS:
        raise ValueError(f"semantics must be one of {_SEMANTICS}, got {semantics!r}")
    if not isinstance(eps, Real) or not eps >= 0:
        raise ValueError(f"eps must be a number >= 0, got {eps!r}")


def _single_cluster(X: np.ndarray) -> CPLResult:
    n = X.shape[0]
    center = np.add.reduce(X, axis=0) / n
    return CPLResult(center[None, :].copy(), np.zeros(n, dtype=np.int64), 1, 0, float(n))


def cpl(
    X,
    n_candidates: int,
    *,
    eta: float = 0.05,
    max_passes: int = 31,
    seeds,
    semantics: str = "robust",
    eps: float = 1e-12,
    keep_singletons: bool = False,
    n_threads: int = 1,
    objective: bool = True,
) -> CPLResult:
    """Run competitive penalized learning (CPL) once.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Data, finite. Computed in float64 (float32 input is converted).
    n_candidates : int
        Initial number of candidate clusters ``k``; clamped to ``max(1, min(n, k))``. With
        ``k = 1`` one cluster is returned at once (its centre is the mean).
    eta : float, default=0.05
        Learning rate of the reward and of the rival penalty.
    max_passes : int, default=31
        Cap on the number of passes (the reference stops when ``passes > 30``).
    seeds : array-like of int
        Distinct row indices in ``0..n-1``, drawn by the caller; the first ``k`` are the
        initial candidates (candidate ``j`` starts as the single member ``seeds[j]``).
        Ignored when ``k = 1``.
    semantics : {"robust", "reference"}, default="robust"
        ``"robust"``: fed_hire.md §3.1.7 explicit rules (singletons killed at each weight
        update but never the last live candidate, uniform weights when ``n - m_j < 2`` or
        when all scores are 0, the ``eps`` zero-variance rule, ``1 - BC`` clipped to
        ``[0, 1]``, ties to the lowest index). ``"reference"``: the authors' implicit NaN
        behaviour of §3.1.6 as explicit rules (NaN weight rows for ``m_j <= 1``,
        ``m_j >= n - 1``, ``1 - BC < 0``, zero row sum; empty candidates die; the
        all-zero fallback; ties to the lowest index).

        Zero total variance (a feature constant on both sides of a candidate, e.g. constant
        in the client), both semantics: the Hellinger term is ``a = 1``. The spec gives
        ``a = 0`` (robust) or a NaN row (reference); the authors' code mostly computes
        ``a = 1`` there (one side's rounded variance is exactly 0, the other's not), and
        ``a = 1`` is what matches their published quality (see the kernel's comment).
    eps : float, default=1e-12
        Robust zero-variance threshold on ``sigma^2 + sigma_out^2`` (ignored by reference).
    keep_singletons : bool, default=False
        Robust semantics only: a candidate left with one member is not killed at the
        weight update (it still dies when it loses its member). Fed-HIRE/GOLD's robust
        client default (a client's only row of a class would otherwise join another
        class's clusterlet); ignored in reference semantics.
    n_threads : int, default=1
        Threads of the kernels (the caller's share of ``n_jobs``): the distances of each
        pass (a block of rows ahead, see :func:`fastfc._kernels._cpl.cpl_pass`), the feature
        weights' per-feature statistics and the per-feature sort run in parallel. The result
        is bit-identical for any thread count.
    objective : bool, default=True
        Compute :attr:`CPLResult.objective` (``O(n k' d)``, one exponential per row and
        surviving candidate); ``False`` returns NaN there (a client's FCPL does not use it).

    Returns
    -------
    CPLResult
        ``(centers, labels, n_clusters, n_passes, objective)``.

    Notes
    -----
    Exact per-sample semantics of fed_hire.md §3.1.3: samples in stored order, winner and
    rival on ``shat_j = gamma_j w_j s_j`` (computed in the log domain), reward, penalty
    ``eta * shat_r / shat_v``, win counts, online updates of the sums of the winner and of the
    old cluster. After a pass without a label change the run stops (no weight update);
    otherwise the feature weights are recomputed, except after the last allowed pass (that
    update would never be used).

    Only live candidates are scored (``O(n k_live d)`` per pass) and the live list is
    compacted between passes. The feature-weight update is ``O(n d + k d)``.

    In reference semantics a sample whose fast-path winner is missing or whose linear-domain
    similarity underflows (``exp(-D/2) == 0``) is decided literally in the linear domain,
    which reproduces the all-zero fallback (``v = 0``, ``r = 1``, ``theta_1`` NaN, the sample
    goes to candidate 0, which revives it if it was empty). The reference sorts with
    ``argsort(-shat)`` (quicksort, arbitrary among ties); ties here go to the lowest index.
    A feature whose values are all equal on a set has variance exactly 0 there (decided from
    the data, not from rounding); the reference's own behaviour in that case depends on the
    rounding of the means (fed_hire.md §3.1.6 (d)).
    """
    X = _check_data(X)
    _check_params(eta, max_passes, semantics, eps)
    if not isinstance(n_candidates, Integral):
        raise TypeError(f"n_candidates must be an integer, got {n_candidates!r}")
    n, d = X.shape
    k = int(max(1, min(n, int(n_candidates))))
    if k == 1:
        return _single_cluster(X)

    seeds = np.asarray(seeds)
    if seeds.ndim != 1 or (seeds.size and seeds.dtype.kind not in "iu"):
        raise ValueError("seeds must be a 1-D array of integer row indices")
    if seeds.shape[0] < k:
        raise ValueError(f"seeds holds {seeds.shape[0]} indices; {k} candidates need {k}")
    seeds = seeds[:k].astype(np.int64)
    if seeds.min() < 0 or seeds.max() >= n:
        raise ValueError(f"seeds must be row indices in [0, {n})")
    if np.unique(seeds).shape[0] != k:
        raise ValueError("seeds must be distinct row indices")

    reference = 1 if semantics == "reference" else 0
    S = np.ascontiguousarray(X[seeds])
    C = S.copy()
    cnt = np.ones(k, dtype=np.int64)
    y = np.full(n, -1, dtype=np.int64)
    y[seeds] = np.arange(k, dtype=np.int64)
    Mw = np.full((k, d), 1.0 / d)
    theta = np.ones(k)
    logw = np.empty(k)
    cpl_init_logw(theta, logw)
    wins = np.ones(k)
    live = np.ones(k, dtype=np.uint8)
    inlist = np.ones(k, dtype=np.uint8)
    live_idx = np.arange(k, dtype=np.int64)
    n_live = k
    wnan = np.zeros(k, dtype=np.uint8)
    rv = np.full(n, -1, dtype=np.int32)  # each row's last rival: a hint for the next pass
    bufs = None

    wins_sum = float(k)
    n_passes = 0
    # feature weights of a later pass recompute only the candidates whose members changed
    # since the previous weights (the others' statistics are the same bits)
    y_prev = np.empty(n, dtype=np.int64)
    dirty = np.zeros(k, dtype=np.uint8)
    fw_done = False
    with numba_threads(n_threads) as nt:
        for p in range(1, max_passes + 1):
            if fw_done:
                y_prev[:] = y
            changed, n_live = cpl_pass(X, S, C, cnt, Mw, theta, logw, wins, wins_sum, y, live,
                                       live_idx, n_live, inlist, wnan, float(eta), reference, nt, rv)
            wins_sum += n
            n_passes = p
            if not changed or p >= max_passes:
                break
            if bufs is None:
                bufs = [np.empty((k, d)) for _ in range(6)]
                bufs.append(np.empty((7, d)))
                bufs.append(np.empty((2, d), dtype=np.int64))
            if fw_done:
                dirty[:] = 0
                moved = y_prev != y
                dirty[y_prev[moved]] = 1
                dirty[y[moved]] = 1
            cpl_feature_weights(X, y, cnt, C, Mw, live, wnan, theta, reference, float(eps), *bufs,
                                int(bool(keep_singletons) and not reference), nt,
                                dirty if fw_done else None)
            fw_done = True
            n_live = cpl_compact_live(live, live_idx, inlist)

    act = np.flatnonzero(cnt > 0)
    remap = np.full(k, -1, dtype=np.int64)
    remap[act] = np.arange(act.shape[0], dtype=np.int64)
    labels = remap[y]
    centers = S[act] / cnt[act][:, None]
    J = np.nan
    if objective:
        usable = ((cnt > 0) & (wnan == 0)).astype(np.uint8)
        with numba_threads(n_threads) as nt:
            J = cpl_objective(X, y, C, Mw, usable, np.flatnonzero(usable).astype(np.int64), nt)
    return CPLResult(np.ascontiguousarray(centers), labels, int(act.shape[0]), n_passes, float(J))


def mcpl(
    C,
    *,
    server_ratio: float = 0.5,
    eta: float = 0.05,
    max_passes: int = 31,
    draw_seeds: Callable[[int, int], np.ndarray],
    semantics: str = "robust",
    tol: float | None = None,
    max_stages: int = 50,
    max_candidates: int | None = None,
) -> list[np.ndarray]:
    """Multi-granular CPL on the stacked clusterlet centroids (fed_hire.md §3.3).

    Parameters
    ----------
    C : array-like of shape (n_s, n_features)
        Stacked centroids uploaded by the clients (not rescaled).
    server_ratio : float, default=0.5
        The first stage starts from ``max(1, min(n_s, round(server_ratio * n_s)))``
        candidates; each later stage from the previous stage's survivor count.
    eta, max_passes, semantics
        As in :func:`cpl`, for every stage.
    draw_seeds : callable ``(n, k) -> ndarray of k distinct ints in [0, n)``
        Called once per stage (also when ``k = 1``), so the caller controls the RNG stream
        (e.g. ``lambda n, k: rng.permutation(n)[:k]``).
    tol : float or None, default=None
        ``None``: Fed-HIRE's stop rule. A float: GOLD's additional objective condition, see
        Notes.
    max_stages : int, default=50
        Cap on the number of stages (only reachable with ``tol``).
    max_candidates : int or None, default=None
        Cap on the first stage's candidate count (None: no cap, as the reference).

    Returns
    -------
    levels : list of ndarray of shape (n_s,), int64
        Labels of every stored level, fine to coarse; their cluster counts strictly decrease.
        Never empty.

    Notes
    -----
    Fed-HIRE (``tol=None``, the reference code): every stage reseeds and resets everything and
    inherits only the count. A stage that removes a candidate is stored and sets the next
    count. A stage that removes none stops the loop and is dropped, except in stage 1, whose
    level is kept. The loop also stops as soon as a stored level has fewer than 2 clusters.
    So ``17 -> 10 -> 6 -> 6`` stores ``[10, 6]``, ``17 -> 17`` stores ``[17]`` and ``5 -> 1``
    stores ``[1]``.

    GOLD (``tol`` a float; gold.md §3.3, "k stable **and** ``|J(s) - J(s-1)| < eps``"), read
    as: a stage that removes no candidate stops the loop only if the absolute change of the
    CPL objective ``J`` (:attr:`CPLResult.objective`) from the previous stage is below
    ``tol``; otherwise another stage runs with the same count and fresh seeds. Such stages
    are never stored (their count equals the last stored one), except stage 1 as above.
    Stage 1 has no previous objective, so it never satisfies the condition. ``J`` is the sum
    over the ``n_s`` rows of the normalised similarity to the own cluster (0..n_s).
    """
    C = _check_data(C)
    _check_params(eta, max_passes, semantics, 0.0)
    if not isinstance(server_ratio, Real) or not server_ratio > 0:
        raise ValueError(f"server_ratio must be a number > 0, got {server_ratio!r}")
    if tol is not None and (not isinstance(tol, Real) or not tol >= 0):
        raise ValueError(f"tol must be None or a number >= 0, got {tol!r}")
    if not isinstance(max_stages, Integral) or max_stages < 1:
        raise ValueError(f"max_stages must be an integer >= 1, got {max_stages!r}")
    n_s = C.shape[0]
    k = candidate_count(server_ratio, n_s)
    if max_candidates is not None:
        k = min(k, int(max_candidates))
    levels: list[np.ndarray] = []
    prev_obj = None
    for stage in range(1, max_stages + 1):
        # the objective is read only by GOLD's rule (tol): Fed-HIRE's stages skip computing it
        res = cpl(C, k, eta=eta, max_passes=max_passes, seeds=draw_seeds(n_s, k), semantics=semantics,
                  objective=tol is not None)
        if res.n_clusters == k:
            if stage == 1:
                levels.append(res.labels)
            if tol is None or (prev_obj is not None and abs(res.objective - prev_obj) < tol):
                break
            prev_obj = res.objective
        else:
            levels.append(res.labels)
            k = res.n_clusters
            prev_obj = res.objective
        if res.n_clusters < 2:
            break
    return levels


def weighted_kmodes(Z, n_clusters: int, *, seed_rows, max_iter: int = 31) -> np.ndarray:
    """Weighted k-modes on the multi-granular label matrix (fed_hire.md §3.5, GOLD REMC).

    Parameters
    ----------
    Z : array-like of shape (n_s, n_levels), int
        Non-negative categorical codes (column ``l`` = cluster id of each row at level ``l``).
    n_clusters : int
        Number of clusters ``k*``.
    seed_rows : array-like of int, shape (n_clusters,)
        Distinct indices into the lexicographically sorted unique rows of ``Z``
        (``np.unique(Z, axis=0)``), chosen by the caller (the reference:
        ``choice(n_unique, k*, replace=False)``); those rows are the initial modes.
    max_iter : int, default=31
        Cap on the number of update iterations (the reference stops when ``iter > 30``).

    Returns
    -------
    labels : ndarray of shape (n_s,), int64
        Cluster of every row in ``0..n_clusters-1``; some clusters may end empty.

    Raises
    ------
    ValueError
        If ``Z`` has fewer distinct rows than ``n_clusters`` (the reference fails with
        'error' here; the caller decides whether to retry), or on invalid input.

    Notes
    -----
    Initial level weights ``1/L``; assignment to the highest weighted match
    ``sum_l u_jl [z_il == o_jl]`` (ties to the lowest j). Then, each iteration, from the same
    previous partition: modes (ties to the value met first in increasing row order, empty
    cluster -> ``-1``, matching nothing), weights ``u = alpha beta / (sum alpha beta + 1e-10)``
    and a new assignment; stop when no label changes. Each column is recoded to compact codes
    first (order preserving), which changes no result.
    """
    Z = np.asarray(Z)
    if Z.ndim != 2 or Z.shape[0] < 1 or Z.shape[1] < 1:
        raise ValueError(f"Z must be a non-empty 2-D array (n_s, n_levels), got shape {Z.shape}")
    if Z.dtype.kind not in "iub":
        raise TypeError(f"Z must hold integer codes, got dtype {Z.dtype}")
    if (Z < 0).any():
        raise ValueError("Z must hold non-negative codes")
    if not isinstance(n_clusters, Integral) or n_clusters < 1:
        raise ValueError(f"n_clusters must be an integer >= 1, got {n_clusters!r}")
    if not isinstance(max_iter, Integral) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    Z = Z.astype(np.int64)
    n, L = Z.shape
    U = np.unique(Z, axis=0)
    if U.shape[0] < n_clusters:
        raise ValueError(
            f"Z has {U.shape[0]} distinct rows, fewer than n_clusters={n_clusters}; "
            "weighted k-modes cannot be initialised (the reference reruns with new randomness)"
        )
    seed_rows = np.asarray(seed_rows)
    if seed_rows.shape != (n_clusters,) or (seed_rows.size and seed_rows.dtype.kind not in "iu"):
        raise ValueError(f"seed_rows must be {n_clusters} integer indices into the unique rows")
    if seed_rows.min() < 0 or seed_rows.max() >= U.shape[0] or np.unique(seed_rows).shape[0] != n_clusters:
        raise ValueError(f"seed_rows must be distinct indices in [0, {U.shape[0]})")

    Zc = np.empty((n, L), dtype=np.int64)
    modes = np.empty((n_clusters, L), dtype=np.int64)
    sizes = np.empty(L, dtype=np.int64)
    init = U[seed_rows]
    for l in range(L):
        vals, inv = np.unique(Z[:, l], return_inverse=True)
        Zc[:, l] = inv.reshape(-1)
        modes[:, l] = np.searchsorted(vals, init[:, l])
        sizes[l] = vals.shape[0]
    offsets = np.zeros(L + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(sizes)
    V = int(offsets[-1])

    u = np.full((n_clusters, L), 1.0 / L)
    labels = np.zeros(n, dtype=np.int64)
    kmodes_assign(Zc, modes, u, labels)
    hist = np.empty((n_clusters, V), dtype=np.int64)
    first = np.empty((n_clusters, V), dtype=np.int64)
    counts = np.empty(n_clusters, dtype=np.int64)
    tot = np.empty(V, dtype=np.int64)
    for _ in range(max_iter):
        kmodes_stats(Zc, labels, offsets, hist, first, counts, tot)
        kmodes_modes(hist, first, offsets, counts, modes)
        kmodes_weights(hist, offsets, counts, tot, n, u)
        if kmodes_assign(Zc, modes, u, labels) == 0:
            break
    return labels
