"""Refinement rounds: federated Lloyd on the global centres of any fastfc method.

After a method's one-shot fit (protocol round 0), ``refine_rounds = R > 0`` runs
up to ``R`` more rounds of federated Lloyd:

- round 1: every client labels its rows with the one-shot reply (the method's
  own labels) and uploads, per global cluster, the count and the sum of its rows
  (:class:`RefineStats`), plus its per-feature moments (count, mean, variance);
  the server replaces every centre by the exact mean of its cluster's rows;
- round ``r >= 2``: every client labels its rows by the nearest centre of the
  last broadcast (:class:`RefineCenters`) and uploads the counts, sums and
  within-cluster sums of squared distances of those labels
  (:func:`fastfc._lloyd.lloyd_stats` with ``exact_inertia=False``: one fused pass
  over the rows, exact labels and sums, the sums of squared distances from the
  clusters' moments within a stated rounding bound); the server updates the centres.

The server stops early when the centres moved by at most ``refine_tol`` (the
sum over centres of squared moves, relative to the mean per-feature variance,
as scikit-learn's ``KMeans(tol=...)``), and broadcasts the final centres; every
client then labels its rows by the nearest final centre.

Distances are measured in the estimator's units: the method's own federated
units when its model carries per-feature weights (KFed, FeCA), the federation's
standardised units (weights ``1 / std`` from the pooled round-1 moments) when
the method standardises (FedHIRE/GOLD with ``standardize``, Fed-k*-HC robust),
raw units otherwise. What crosses the wire per round is ``k (d + 2)`` numbers
up (plus ``3 d`` in round 1) and ``k d + d`` down per client: never rows or labels.

An empty cluster keeps its previous centre.

Parallel chains (``refine_n_init = s > 1``, scikit-learn's ``n_init`` for the
refinement): chain 0 is the one-shot centres, refined as above. After round 1
the server also seeds chains ``1 .. s-1`` by weighted k-means++ and weighted
Lloyd (scikit-learn ``KMeans(n_init=1)``, each chain with its own random
stream) on the round-1 uploads themselves -- every client's per-cluster means,
weighted by their counts, in the refinement units -- so the seeding costs the
clients nothing extra. From round 1 on the broadcasts are
:class:`RefineChainCenters` (the ``a k`` centres of the ``a`` chains still
running) and from round 2 on the uploads :class:`RefineChainStats` (counts,
sums and inertia of every running chain: ``a k (d + 2)`` numbers; one
:func:`fastfc._lloyd.lloyd_stats` pass per chain). A chain stops being sent once
its centres moved by at most the threshold (chain 0 is always sent in round 2,
so that it has a cost too). Each chain's cost is the federated k-means cost of
its final centres for its last labels: the sum of the clients' uploaded
inertias of the last broadcast centres, less the exact drop of the last centre
update (``n_j ||m_j - c_j||^2`` per cluster, in the refinement units). The
chain of lowest cost is kept (ties: the lowest chain index); the final
broadcast carries its centres only. With ``s = 1`` nothing of this runs: the
messages, centres and labels are the single-chain ones above.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _units
from ._limits import MAX_ABS_MEAN, MAX_COUNT
from .protocol import ArraySpec, Message

__all__ = ["RefineStats", "RefineCenters", "RefineChainStats", "RefineChainCenters", "RefineSetup", "client_stats",
           "clients_stats",
           "label_sums", "server_update", "setup_from_moments", "round1_seed_points", "round0_seed_points", "seed_chains", "chain_update"]


#: array specs shared by the refinement messages (each message lists its own in its wire order)
_COUNTS = ArraySpec("i", 1, min_value=0, max_abs=MAX_COUNT)
_SUMS = ArraySpec("f", 2)
_INERTIA = ArraySpec("f", 1, min_value=0.0)
_CHAINS = ArraySpec("i", 1, min_value=0)
_CENTERS = ArraySpec("f", 2, max_abs=MAX_ABS_MEAN)
_FEATURE_WEIGHT = ArraySpec("f", 1, min_value=0.0)


def _check_sums(message) -> None:
    """Each cluster's sum of rows is at most its count times the largest mean a client can have (a sum with
    no rows is 0): a larger one cannot come from valid data, and would overflow the server's update."""
    if not message.sums.size:
        return
    peak = np.abs(message.sums).max(axis=1)
    bound = message.counts.astype(np.float64) * MAX_ABS_MEAN
    bad = np.flatnonzero(peak > bound)
    if bad.size:
        j = int(bad[0])
        message._fail(f"sums: cluster {j} has a sum of magnitude {peak[j]:.3g} from {int(message.counts[j])} rows, "
                      f"more than valid client data gives (at most {bound[j]:.3g})")


class _CentersBroadcast:
    """What the two centre broadcasts (:class:`RefineCenters`, :class:`RefineChainCenters`) share.

    Optional per-feature weights (``feature_weight``: None is stored as empty,
    raw units), the checks of the centres and of the weights around the
    class's own row checks (:meth:`_check_rows`), and :attr:`weight`. A
    mixin without fields: each message keeps its own fields, hence its wire bytes.
    """

    def __post_init__(self) -> None:
        _units.fill_empty_array(self, "feature_weight", (0,))
        super().__post_init__()

    def _check_consistency(self) -> None:
        self._check_rows(self._check_centers())
        _units.check_unit_fields(self)

    def _check_rows(self, n_rows: int) -> None:
        """Checks of the ``n_rows`` rows of ``centers`` beyond their shape (none here)."""

    @property
    def weight(self) -> np.ndarray | None:
        """The feature weights, or None in raw units."""
        return np.asarray(self.feature_weight) if self.feature_weight.size else None


@dataclass(frozen=True, eq=False)
class RefineStats(Message):
    """One client's upload in a refinement round.

    Attributes
    ----------
    counts : ndarray of shape (k,), int
        Rows of the client in each global cluster.
    sums : ndarray of shape (k, n_features), float
        Sum of those rows (raw units).
    inertia : ndarray of shape (k,) or (0,), float
        Sum of the rows' squared (weighted) distances to their cluster's broadcast
        centre; empty in round 1 (labels come from the one-shot reply there).
    feature_stats : ndarray of shape (3, n_features) or (0, n_features), float
        Per-feature count, mean and variance of the client's rows (round 1 only), as the
        one-shot summaries' ``feature_stats`` (:func:`fastfc._units.feature_moments`).
    n_features : int
    """

    METHOD = "refine"
    KIND = "stats"
    ARRAYS = {"counts": _COUNTS, "sums": _SUMS, "inertia": _INERTIA, "feature_stats": ArraySpec("f", 2)}
    counts: np.ndarray
    sums: np.ndarray
    inertia: np.ndarray
    feature_stats: np.ndarray
    n_features: int

    def _check_consistency(self) -> None:
        k, d = self.counts.shape[0], self.n_features
        if k < 1:
            self._fail("counts must have one entry per global cluster (at least one)")
        self._check_shape("sums", (k, d))
        if self.inertia.shape not in ((k,), (0,)):
            self._fail(f"inertia shape {self.inertia.shape} must be ({k},) or (0,)")
        _check_sums(self)
        _units.check_unit_fields(self)
        if self.feature_stats.size and not (self.feature_stats[0] == self.feature_stats[0, 0]).all():
            self._fail("feature_stats: the count row must be the same for every feature")


@dataclass(frozen=True, eq=False)
class RefineCenters(_CentersBroadcast, Message):
    """The server's broadcast in a refinement round: the current global centres.

    Attributes
    ----------
    centers : ndarray of shape (k, n_features)
        Global centres (raw units).
    feature_weight : ndarray of shape (n_features,) or (0,)
        Per-feature distance weights (empty: raw units).
    n_features : int
    final : bool
        True for the last broadcast: clients label their rows by the nearest centre.
    """

    METHOD = "refine"
    KIND = "centers"
    ARRAYS = {"centers": _CENTERS, "feature_weight": _FEATURE_WEIGHT}
    centers: np.ndarray
    n_features: int
    feature_weight: np.ndarray | None = None
    final: bool = False


def _check_chains(message, n_rows: int) -> int:
    """``chains`` is a non-empty strictly increasing list of chain indices and ``n_rows`` is
    ``len(chains) * n_clusters``; returns ``len(chains)``."""
    chains = message.chains
    if chains.shape[0] < 1:
        message._fail("chains must name at least one chain")
    if chains.shape[0] > 1 and not (np.diff(chains) > 0).all():
        message._fail(f"chains must be strictly increasing (no chain twice), got {chains.tolist()}")
    if message.n_clusters < 1:
        message._fail(f"n_clusters must be >= 1, got {message.n_clusters}")
    if n_rows != chains.shape[0] * message.n_clusters:
        message._fail(f"{n_rows} rows do not match {chains.shape[0]} chain(s) x n_clusters={message.n_clusters}")
    return int(chains.shape[0])


@dataclass(frozen=True, eq=False)
class RefineChainStats(Message):
    """One client's upload in a refinement round with parallel chains (round >= 2).

    Attributes
    ----------
    chains : ndarray of shape (a,), int
        The chains the statistics are for (those of the last broadcast), increasing.
    counts : ndarray of shape (a * n_clusters,), int
        Rows of the client nearest to each centre of each chain (chain-major).
    sums : ndarray of shape (a * n_clusters, n_features), float
        Sum of those rows (raw units).
    inertia : ndarray of shape (a * n_clusters,), float
        Sum of the rows' squared (weighted) distances to their centre.
    n_clusters : int
    n_features : int
    """

    METHOD = "refine"
    KIND = "chain_stats"
    ARRAYS = {"chains": _CHAINS, "counts": _COUNTS, "sums": _SUMS, "inertia": _INERTIA}
    chains: np.ndarray
    counts: np.ndarray
    sums: np.ndarray
    inertia: np.ndarray
    n_clusters: int
    n_features: int

    def _check_consistency(self) -> None:
        rows = self.counts.shape[0]
        _check_chains(self, rows)
        self._check_shape("sums", (rows, self.n_features))
        self._check_shape("inertia", (rows,))
        _check_sums(self)


@dataclass(frozen=True, eq=False)
class RefineChainCenters(_CentersBroadcast, Message):
    """The server's broadcast in a refinement round with parallel chains (from round 1 on).

    Attributes
    ----------
    chains : ndarray of shape (a,), int
        The chains still running (the kept chain alone when ``final``), increasing.
    centers : ndarray of shape (a * n_clusters, n_features)
        Their centres, chain-major (raw units).
    feature_weight : ndarray of shape (n_features,) or (0,)
        Per-feature distance weights (empty: raw units).
    n_clusters : int
    n_features : int
    final : bool
        True for the last broadcast (one chain): clients label their rows by the nearest centre.
    """

    METHOD = "refine"
    KIND = "chain_centers"
    ARRAYS = {"chains": _CHAINS, "centers": _CENTERS, "feature_weight": _FEATURE_WEIGHT}
    chains: np.ndarray
    centers: np.ndarray
    n_clusters: int
    n_features: int
    feature_weight: np.ndarray | None = None
    final: bool = False

    def _check_rows(self, n_rows: int) -> None:
        a = _check_chains(self, n_rows)
        if self.final and a != 1:
            self._fail(f"a final broadcast carries one chain, got {a}")


#: the broadcasts that carry refined centres (a final one is what clients label their rows with)
CENTERS_CLASSES = (RefineCenters, RefineChainCenters)


# ------------------------------------------------------------ client side
def client_stats(X: np.ndarray, broadcast: Message, one_shot_labels, n_threads: int,
                 moments: np.ndarray | None = None) -> RefineStats:
    """A client's refinement upload.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    broadcast : RefineCenters, RefineChainCenters or the method's one-shot reply
        The last message the server sent this client.
    one_shot_labels : callable
        ``one_shot_labels()`` returns the method's labels of ``X`` from the one-shot
        reply (called only when ``broadcast`` is not a :class:`RefineCenters`).
    n_threads : int
        Threads of the compiled kernel.
    moments : ndarray of shape (3, n_features) or None, default=None
        :func:`fastfc._units.feature_moments` of ``X`` when the client already has them (its
        one-shot summary's ``feature_stats``): uploaded as they are instead of recomputed (the
        same values: the function of ``X`` alone). ``None``: computed here.

    Returns
    -------
    RefineStats or RefineChainStats
        The latter (one block of statistics per chain, one ``lloyd_stats`` pass each) for a
        :class:`RefineChainCenters` broadcast.
    """
    d = X.shape[1]
    if isinstance(broadcast, RefineChainCenters):
        from ._lloyd import lloyd_stats

        k = int(broadcast.n_clusters)
        parts = [lloyd_stats(X, broadcast.centers[i * k:(i + 1) * k], broadcast.weight, n_jobs=n_threads,
                             exact_inertia=False)
                 for i in range(broadcast.chains.shape[0])]
        return RefineChainStats(chains=broadcast.chains, counts=np.concatenate([p[0] for p in parts]),
                                sums=np.concatenate([p[1] for p in parts]),
                                inertia=np.concatenate([p[2] for p in parts]), n_clusters=k, n_features=d)
    if isinstance(broadcast, RefineCenters):
        from ._lloyd import lloyd_stats

        counts, sums, inertia = lloyd_stats(X, broadcast.centers, broadcast.weight, n_jobs=n_threads,
                                            exact_inertia=False)
        stats = np.zeros((0, d))
    else:
        k = int(broadcast.centers.shape[0])
        labels = np.asarray(one_shot_labels(), dtype=np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= k):
            raise RuntimeError(f"one-shot labels outside 0..{k - 1}")  # a method's programming error
        centers = np.ascontiguousarray(broadcast.centers, dtype=np.float64)
        # two independent one-thread passes (compiled, GIL released): beside each other when the client
        # has two threads and the rows are many (the same values either way)
        if moments is not None and np.shape(moments) == (3, d):
            counts, sums = label_sums(X, labels, centers, n_threads)
            stats = np.array(moments, dtype=np.float64)
        else:
            parts = [lambda: label_sums(X, labels, centers), lambda: _units.feature_moments(X)]
            (counts, sums), stats = _units._run_parts(
                lambda f: f(), parts, n_threads if X.size >= _units.SPLIT_MIN_ELEMENTS else 1)
        inertia = np.zeros(0)
    return RefineStats(counts=np.asarray(counts, dtype=np.int64), sums=sums, inertia=inertia, feature_stats=stats,
                       n_features=d)


def clients_stats(X_clients: list, broadcast: Message, n_threads: int, seconds: np.ndarray | None = None) -> list:
    """Every client's refinement upload for one centre broadcast shared by all of them, in one call.

    The in-process runner's many-clients path of a round ``r >= 2``: client ``i``'s upload is
    exactly ``client_stats(X_clients[i], broadcast, ..., n_threads)``'s (the same arrays, bit for
    bit), computed by :func:`fastfc._lloyd.lloyd_stats_clients` (the round's centre-side operands
    formed once, one compiled call over the clients' rows, no GIL held).

    Parameters
    ----------
    X_clients : list of ndarray of shape (n_i, n_features)
    broadcast : RefineCenters or RefineChainCenters
        The broadcast every client got (its centres and weights; the address is not read).
    n_threads : int
        Threads in all (over the clients).
    seconds : ndarray of shape (n_clients,), optional
        Each client's wall seconds of its own work are added to it.

    Returns
    -------
    list of RefineStats or RefineChainStats
        One per client, in client order (not addressed).
    """
    from ._lloyd import lloyd_stats_clients

    m = len(X_clients)
    d = int(broadcast.n_features)
    sec = np.zeros(m)
    if isinstance(broadcast, RefineChainCenters):
        k = int(broadcast.n_clusters)
        parts = []
        for i in range(broadcast.chains.shape[0]):
            t = np.zeros(m)
            parts.append(lloyd_stats_clients(X_clients, broadcast.centers[i * k:(i + 1) * k], broadcast.weight,
                                             n_jobs=n_threads, seconds=t))
            sec += t
        out = [RefineChainStats(chains=broadcast.chains, counts=np.concatenate([p[0][j] for p in parts]),
                                sums=np.concatenate([p[1][j] for p in parts]),
                                inertia=np.concatenate([p[2][j] for p in parts]), n_clusters=k, n_features=d)
               for j in range(m)]
    elif isinstance(broadcast, RefineCenters):
        counts, sums, inertia = lloyd_stats_clients(X_clients, broadcast.centers, broadcast.weight, n_jobs=n_threads,
                                                    seconds=sec)
        out = [RefineStats(counts=counts[j], sums=sums[j], inertia=inertia[j], feature_stats=np.zeros((0, d)),
                           n_features=d) for j in range(m)]
    else:
        raise TypeError(f"clients_stats needs a centre broadcast, got {type(broadcast).__name__}")
    if seconds is not None:
        seconds += sec
    return out


def label_sums(X: np.ndarray, labels: np.ndarray, centers: np.ndarray, n_jobs=1) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster row counts and sums of labelled rows, in one pass.

    The sums are accumulated as ``count * c + sum(x - c)`` around the given centres
    (FeCA's fused :func:`~fastfc._kernels._feca.cluster_stats` kernel), which keeps
    digits when the coordinates are large against the clusters' spread. A client of at least
    :data:`fastfc._units.SPLIT_MIN_ELEMENTS` values is cut into its two fixed row halves (a
    function of the shape only), whose counts and deviation sums are added in that order, the
    halves on up to two threads: the same bits for any ``n_jobs``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64
    labels : ndarray of shape (n_samples,), int64, in ``[0, k)``
    centers : ndarray of shape (k, n_features), float64
    n_jobs : int or None, default=1
        Threads of a large client's two halves.

    Returns
    -------
    counts : ndarray of shape (k,), int64
    sums : ndarray of shape (k, n_features), float64
    """
    from ._kernels._feca import cluster_stats

    X = np.ascontiguousarray(X) if X.dtype in (np.float32, np.float64) else np.ascontiguousarray(X, np.float64)
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    k, d = centers.shape

    def part(sl):
        counts = np.zeros(k, dtype=np.int64)
        dev = np.zeros((k, d))
        scratch = [np.zeros(k) for _ in range(3)]
        cluster_stats(X[sl], labels[sl], centers, counts, dev, *scratch)
        return counts, dev

    if _units.large_moments(X):
        (c0, d0), (c1, d1) = _units._run_parts(part, _units._row_halves(X.shape[0]), n_jobs)
        counts, dev = c0 + c1, d0 + d1  # the halves added in order
    else:
        counts, dev = part(slice(None))
    return counts, counts[:, None] * centers + dev


# ------------------------------------------------------------ server side
@dataclass(frozen=True)
class RefineSetup:
    """How the server refines: the units and the stop rule.

    Attributes
    ----------
    weight : ndarray of shape (n_features,) or None
        Distance weights (None: raw units).
    threshold : float
        Stop when the weighted sum of squared centre moves is at most this.
    """

    weight: np.ndarray | None
    threshold: float


def setup_from_moments(moments: list[np.ndarray], model_weight: np.ndarray | None, standardize: bool,
                       tol: float, who: str) -> RefineSetup:
    """Units and stop threshold from the pooled round-1 moments.

    ``model_weight`` (the method's own federated units) wins; else ``standardize``
    gives weights ``1 / std`` of the federation; else raw units. The threshold is
    ``tol`` times the mean per-feature variance in those units.
    """
    _, mean, var = _units.pool_moments(moments)
    if model_weight is not None and np.size(model_weight):
        weight = np.asarray(model_weight, dtype=np.float64)
    elif standardize:
        weight = _units.global_scaler(moments, who=who).weight
    else:
        weight = None
    wvar = var if weight is None else var * weight**2
    return RefineSetup(weight=weight, threshold=float(tol) * float(np.mean(wvar)) if wvar.size else 0.0)


def server_update(uploads: list[RefineStats], centers: np.ndarray, setup: RefineSetup
                  ) -> tuple[np.ndarray, float, float, int]:
    """One server update of the global centres.

    Parameters
    ----------
    uploads : list of RefineStats
        Every responding client's upload (client order).
    centers : ndarray of shape (k, n_features)
        The centres before the update.
    setup : RefineSetup

    Returns
    -------
    new_centers : ndarray of shape (k, n_features)
        Cluster means; an empty cluster keeps its centre.
    shift : float
        Weighted sum over centres of the squared moves.
    inertia : float
        Sum of squared (weighted) distances of all rows to their centre before the
        update (NaN when the uploads carry none, i.e. in round 1).
    n_empty : int
        Clusters without rows.
    """
    k = centers.shape[0]
    for u in uploads:
        if u.counts.shape[0] != k:
            raise ValueError(f"a refinement upload has {u.counts.shape[0]} clusters, the server has {k}")
    counts = np.zeros(k, dtype=np.int64)
    sums = np.zeros_like(centers, dtype=np.float64)
    for u in uploads:  # client order: deterministic
        counts += u.counts
        sums += u.sums
    have = counts > 0
    new = np.array(centers, dtype=np.float64, copy=True)
    new[have] = sums[have] / counts[have, None]
    diff = new - centers
    if setup.weight is not None:
        diff = diff * setup.weight
    shift = float(np.sum(diff * diff))
    inertia = float(sum(float(u.inertia.sum()) for u in uploads)) if all(u.inertia.size for u in uploads) else float("nan")
    return new, shift, inertia, int(k - have.sum())


def round1_seed_points(uploads: list[RefineStats]) -> tuple[np.ndarray, np.ndarray]:
    """Every client's per-cluster means of the round-1 uploads (non-empty clusters), weighted by their counts:
    points of shape (m, n_features) in raw units and weights of shape (m,)."""
    pts = np.concatenate([u.sums[u.counts > 0] / u.counts[u.counts > 0, None] for u in uploads])
    wts = np.concatenate([u.counts[u.counts > 0] for u in uploads]).astype(np.float64)
    return pts, wts


def round0_seed_points(uploads: list[RefineStats], local: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """Seeding points for chains ``1 .. s-1`` from the round-0 local centres the server already holds.

    Every client's local centres (its round-0 summary) with, as weight, its round-1 count of the
    global cluster the local centre was merged into, shared equally among the client's local
    centres merged into that cluster (the server knows no per-local-centre count; the shares add
    up to the client's rows). Local centres of a global cluster the client has no rows in are left out.

    Parameters
    ----------
    uploads : list of RefineStats
        Round-1 uploads (client order), each addressed to its client.
    local : dict
        Client index -> (centers of shape (n_local, n_features), local_to_global of shape (n_local,)),
        from the round-0 summaries and replies.

    Returns
    -------
    (points, weights) : ndarray of shape (m, n_features), ndarray of shape (m,), or None
        None when a responding client has no round-0 local centres on record (the caller then
        seeds from the round-1 uploads).
    """
    pts, wts = [], []
    for u in uploads:
        entry = local.get(u.client) if u.client is not None else None
        if entry is None:
            return None
        centers, l2g = entry
        k = u.counts.shape[0]
        if l2g.shape[0] != centers.shape[0] or (l2g.size and (l2g.min() < 0 or l2g.max() >= k)):
            return None
        mult = np.bincount(l2g, minlength=k)
        w = u.counts[l2g] / np.maximum(mult[l2g], 1)
        keep = w > 0
        pts.append(np.asarray(centers, dtype=np.float64)[keep])
        wts.append(w[keep].astype(np.float64))
    return np.concatenate(pts), np.concatenate(wts)


def seed_chains(uploads: list[RefineStats], setup: RefineSetup, n_chains: int, rng: np.random.Generator,
                points: tuple[np.ndarray, np.ndarray] | None = None) -> list[np.ndarray]:
    """Centres of chains ``1 .. n_chains - 1``, seeded from the round-1 uploads on the server.

    The points are every client's per-cluster means (``sums / counts`` of its non-empty
    clusters), weighted by their counts; each chain is scikit-learn's
    ``KMeans(n_init=1, init="k-means++")`` on them in the refinement units, with its own
    seed drawn from ``rng`` (the server's stream of round 1; chains in order).

    Parameters
    ----------
    uploads : list of RefineStats
        Round-1 uploads (client order).
    setup : RefineSetup
    n_chains : int
        Chains in all (chain 0 included).
    rng : numpy.random.Generator
    points : (ndarray of shape (m, n_features), ndarray of shape (m,)), optional
        Weighted seeding points in raw units used instead of the uploads' per-cluster means
        (:func:`round0_seed_points`); the uploads then give ``k`` only.

    Returns
    -------
    list of ndarray of shape (k, n_features)
        ``n_chains - 1`` centre sets in raw units; empty when the uploads hold fewer
        distinct points than ``k`` (only chain 0 runs then).
    """
    import warnings

    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning

    from ._parallel import sklearn_seed

    if n_chains <= 1:
        return []
    k = int(uploads[0].counts.shape[0])
    pts, wts = points if points is not None else round1_seed_points(uploads)
    w = setup.weight
    P = pts if w is None else pts * w
    if np.unique(P, axis=0).shape[0] < k:
        return []
    seeds = [sklearn_seed(rng) for _ in range(n_chains - 1)]
    out = []
    for seed in seeds:
        km = KMeans(n_clusters=k, init="k-means++", n_init=1, random_state=seed)
        with warnings.catch_warnings():  # one OpenMP thread (the pinned server worker): same for any n_jobs
            warnings.simplefilter("ignore", ConvergenceWarning)
            km.fit(P, sample_weight=wts)
        C = np.asarray(km.cluster_centers_, dtype=np.float64)
        if w is not None:  # back to raw units; a zero-weight feature takes the weighted mean of the points
            C = np.where(w > 0, C / np.where(w > 0, w, 1.0), 0.0)
            lab = km.labels_
            for j in range(k):
                sel = lab == j
                if sel.any():
                    C[j, w == 0] = np.average(pts[sel][:, w == 0], axis=0, weights=wts[sel])
        out.append(C)
    return out


def chain_update(stats: RefineChainStats | list, chain_pos: int, centers: np.ndarray, setup: RefineSetup
                 ) -> tuple[np.ndarray, float, float, float, int, int]:
    """One server update of one chain from every client's chain upload.

    Parameters
    ----------
    stats : list of RefineChainStats
        Every responding client's upload (client order).
    chain_pos : int
        Position of the chain in the uploads' ``chains``.
    centers : ndarray of shape (k, n_features)
        The chain's centres the clients labelled with.
    setup : RefineSetup

    Returns
    -------
    new_centers : ndarray of shape (k, n_features)
    shift : float
        Weighted sum over centres of the squared moves.
    inertia : float
        Federated inertia of ``centers`` (sum of the uploads).
    cost : float
        Federated k-means cost of ``new_centers`` for the same labels:
        ``inertia - sum_j n_j ||(m_j - c_j) w||^2`` (each cluster's term clipped at 0).
    n_empty, n_samples : int
    """
    k = centers.shape[0]
    sl = slice(chain_pos * k, (chain_pos + 1) * k)
    counts = np.zeros(k, dtype=np.int64)
    sums = np.zeros_like(centers, dtype=np.float64)
    inert = np.zeros(k, dtype=np.float64)
    for u in stats:  # client order: deterministic
        counts += u.counts[sl]
        sums += u.sums[sl]
        inert += u.inertia[sl]
    have = counts > 0
    new = np.array(centers, dtype=np.float64, copy=True)
    new[have] = sums[have] / counts[have, None]
    diff = new - centers
    if setup.weight is not None:
        diff = diff * setup.weight
    moves = np.sum(diff * diff, axis=1)
    cost = float(np.sum(np.maximum(inert - counts * moves, 0.0)))
    return new, float(np.sum(moves)), float(inert.sum()), cost, int(k - have.sum()), int(counts.sum())
