"""FedCRef: federated cluster refinement with per-cluster autoencoders (Nardi, Valerio, Passarella,
arXiv 2408.10664; spec ``shared/specs/fedcref.md``), on the rounds protocol.

Every client trains one small autoencoder (AE) per local cluster; all models are relayed to all
clients; each client scores its clusters against every received model (by default the median
error ratio ``E_ext / E_own``, not in the paper; ``association="paper"``: the paper's
normalised-difference percentile test, §3.3) and the server links two clusters when the test
passes in both directions. Connected components with >= 2 clusters are federated groups; each trains a shared AE
with FedAvg over its members' cluster data. Every active client then re-partitions its rows into
its K_i clusters with its own and all group models (Algorithm 2); a client whose partition agrees
with the previous one (self-ACC >= ``tau``) becomes stable and, one iteration later, frozen. The
run stops when no client is active, when ``|G|`` and ``|I|`` plateau, or at ``max_iter``.

One FedCRef iteration over protocol rounds (what crosses the wire: AE parameters as flat float32
arrays, scores, small counters -- never rows):

========================  =====================================  ======================================
client uploads            from                                   server answers
========================  =====================================  ======================================
``FedCRefModels``         round 0 (init + local AEs), or after   ``FedCRefModelSet``: every model to
                          ``FedCRefProceed`` (fresh local AEs)   every client
``FedCRefScores``         the model set (cross-evaluation)       association graph, groups; a
                                                                 ``FedCRefTrainTask`` (FedAvg round 1)
                                                                 or, without groups, the group models
``FedCRefTrainUpdate``    a train task                           FedAvg; the next task, or after
                                                                 ``fl_rounds`` ``FedCRefGroupModels``
``FedCRefStatus``         the group models (refinement,          stop? ``FedCRefFinal`` (labels) :
                          self-ACC, stability)                   ``FedCRefProceed``
========================  =====================================  ======================================

Final labels (:attr:`FedCRef.labels_`) are global distribution ids by provenance (spec §3.7):
a cluster explained by group model ``g`` gets id ``g``; one explained by a local model whose cluster
was in group ``g`` of the last graph gets ``g``; any other gets a fresh id (>= ``n_distributions_``).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _ae
from ._kernels._fedcref import cluster_refine, cluster_scores
from ._limits import MAX_COUNT
from ._parallel import client_rng, limit_blas_threads, pinned_worker
from ._state import StateError, require_array, require_int
from .base import BaseFederatedClusterer, ClientState
from ._warnings import warn_caller
from .protocol import ArraySpec, Message, MessageError

__all__ = [
    "FedCRef", "fedcref_scores", "fedcref_perfect_baseline", "self_accuracy", "plateau",
    "FedCRefModels", "FedCRefModelSet", "FedCRefScores", "FedCRefTrainTask", "FedCRefTrainUpdate",
    "FedCRefGroupModels", "FedCRefStatus", "FedCRefProceed", "FedCRefFinal", "UnlinkedClustersWarning",
    "sibling_ratio_min", "auto_ratio_threshold", "RATIO_FLOOR",
]


class UnlinkedClustersWarning(UserWarning):
    """FedCRef's last association graph left local clusters without a partner in another client."""


# ----------------------------------------------------------------------------- messages
#: most local epochs a FedAvg task may ask of a client (the paper runs 2-30): a larger value in a message
#: is refused rather than trained for ever
MAX_TASK_EPOCHS = 100_000


def _check_n_features(msg: Message) -> None:
    n_features = getattr(msg, "n_features", None)
    if n_features is not None and n_features < 1:
        msg._fail(f"n_features must be >= 1, got {n_features}")


class FedCRefUpload(Message):
    """Base of every FedCRef client upload (not registered itself: no ``KIND``).

    Which upload a round carries depends on the server's state (local models, scores, a FedAvg
    round, a status), so the rounds protocol and the Flower driver expect this family."""

    METHOD = "fedcref"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_n_features(self)


class FedCRefBroadcast(Message):
    """Base of every FedCRef server broadcast (not registered itself: no ``KIND``), the final one
    (:class:`FedCRefFinal`) included."""

    METHOD = "fedcref"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_n_features(self)


def _check_rows(msg: Message, name: str, rows: int, what: str) -> None:
    if getattr(msg, name).shape[0] != rows:
        msg._fail(f"{name} has {getattr(msg, name).shape[0]} rows, expected {rows} ({what})")


@dataclass(frozen=True, eq=False)
class FedCRefModels(FedCRefUpload):
    """A client's local autoencoders (one per non-empty local cluster) and its cluster sizes.

    Attributes
    ----------
    params : ndarray of shape (n_models, n_params), float32
        Flat parameters (layout of :func:`fastfc._ae.layout`); 0 rows when ``changed`` is False.
    clusters : ndarray of shape (n_models,), int
        Local cluster of each model.
    sizes : ndarray of shape (n_local_clusters,), int
        Rows in each local cluster.
    changed : bool
        False for a frozen client: its models are the ones it sent before.
    n_features : int
    """

    METHOD = "fedcref"
    KIND = "models"
    ARRAYS = {"params": ArraySpec("f", 2), "clusters": ArraySpec("i", 1, min_value=0),
              "sizes": ArraySpec("i", 1, min_value=0, max_abs=MAX_COUNT)}
    params: np.ndarray
    clusters: np.ndarray
    sizes: np.ndarray
    changed: bool
    n_features: int

    def _check_consistency(self) -> None:
        _check_rows(self, "clusters", self.params.shape[0], "one per model")
        if self.clusters.size and self.clusters.max() >= self.sizes.shape[0]:
            self._fail("a model's cluster id is not a local cluster")
        if self.changed and set(self.clusters.tolist()) != set(np.flatnonzero(self.sizes).tolist()):
            self._fail("a changed upload must carry exactly one model per non-empty cluster")


@dataclass(frozen=True, eq=False)
class FedCRefModelSet(FedCRefBroadcast):
    """Every client's models, relayed to every client (the exchange of Phase 2).

    Attributes
    ----------
    params : ndarray of shape (n_models, n_params), float32
    owners, clusters : ndarray of shape (n_models,), int
        Client and local cluster of each model.
    versions : ndarray of shape (n_models,), int
        Iteration in which the owner trained the model (>= 1): a model with the same (owner,
        cluster, version) as one a client evaluated before has the same parameters (a frozen
        client's), so the client reuses its errors (``cache_errors``).
    n_features : int
    """

    METHOD = "fedcref"
    KIND = "model_set"
    ARRAYS = {"params": ArraySpec("f", 2), "owners": ArraySpec("i", 1, min_value=0),
              "clusters": ArraySpec("i", 1, min_value=0), "versions": ArraySpec("i", 1, min_value=1)}
    params: np.ndarray
    owners: np.ndarray
    clusters: np.ndarray
    versions: np.ndarray
    n_features: int

    def _check_consistency(self) -> None:
        _check_rows(self, "owners", self.params.shape[0], "one per model")
        _check_rows(self, "clusters", self.params.shape[0], "one per model")
        _check_rows(self, "versions", self.params.shape[0], "one per model")


@dataclass(frozen=True, eq=False)
class FedCRefScores(FedCRefUpload):
    """A client's association scores: row ``q`` = its cluster ``q`` against every model of the set.

    Attributes
    ----------
    scores : ndarray of shape (n_local_clusters, n_models), float
        ``Score(E_own, E_ext)``: in [0, 1] for the paper's test, the median error ratio (>= 0) for
        ``association="ratio"``; rows of clusters without a model are 1 (paper) or the largest float (ratio).
    oracle_classes : ndarray of shape (0,) or (n_local_clusters,), int
        Empty, except in the perfect-association baseline (``oracle_labels``, experiments only):
        the true class Hungarian-matched to each local cluster (-1: none), from which the server
        builds the oracle graph.
    n_features : int
    """

    METHOD = "fedcref"
    KIND = "scores"
    ARRAYS = {"scores": ArraySpec("f", 2, min_value=0.0), "oracle_classes": ArraySpec("i", 1, min_value=-1)}
    scores: np.ndarray
    oracle_classes: np.ndarray
    n_features: int

    def _check_consistency(self) -> None:
        if self.oracle_classes.shape[0] not in (0, self.scores.shape[0]):
            self._fail(f"oracle_classes has {self.oracle_classes.shape[0]} entries, expected 0 or "
                       f"{self.scores.shape[0]} (one per local cluster)")


@dataclass(frozen=True, eq=False)
class FedCRefTrainTask(FedCRefBroadcast):
    """One FedAvg round for a client: train each listed (group, own cluster) from the group's weights.

    Attributes
    ----------
    params : ndarray of shape (n_tasks, n_params), float32
        The groups' current global weights, one row per task.
    groups, clusters : ndarray of shape (n_tasks,), int
        Group and the client's member cluster of each task.
    epochs : int
        Local epochs of this round.
    fl_round : int
        1-based FedAvg round (round 1 starts fresh optimiser states).
    n_features : int
    """

    METHOD = "fedcref"
    KIND = "train_task"
    ARRAYS = {"params": ArraySpec("f", 2), "groups": ArraySpec("i", 1, min_value=0),
              "clusters": ArraySpec("i", 1, min_value=0)}
    params: np.ndarray
    groups: np.ndarray
    clusters: np.ndarray
    epochs: int
    fl_round: int
    n_features: int

    def _check_consistency(self) -> None:
        _check_rows(self, "groups", self.params.shape[0], "one per task")
        _check_rows(self, "clusters", self.params.shape[0], "one per task")
        if not 0 <= self.epochs <= MAX_TASK_EPOCHS or self.fl_round < 1:
            self._fail(f"epochs must be in [0, {MAX_TASK_EPOCHS}] and fl_round >= 1")


@dataclass(frozen=True, eq=False)
class FedCRefTrainUpdate(FedCRefUpload):
    """A client's locally trained weights of every task, with the rows each was trained on.

    Attributes
    ----------
    params : ndarray of shape (n_tasks, n_params), float32
    counts : ndarray of shape (n_tasks,), int
    n_features : int
    """

    METHOD = "fedcref"
    KIND = "train_update"
    ARRAYS = {"params": ArraySpec("f", 2), "counts": ArraySpec("i", 1, min_value=0, max_abs=MAX_COUNT)}
    params: np.ndarray
    counts: np.ndarray
    n_features: int

    def _check_consistency(self) -> None:
        _check_rows(self, "counts", self.params.shape[0], "one per task")


@dataclass(frozen=True, eq=False)
class FedCRefGroupModels(FedCRefBroadcast):
    """The group models after FedAvg, broadcast to every client for refinement (Phase 4).

    Attributes
    ----------
    params : ndarray of shape (n_groups, n_params), float32
    n_features : int
    """

    METHOD = "fedcref"
    KIND = "group_models"
    ARRAYS = {"params": ArraySpec("f", 2)}
    params: np.ndarray
    n_features: int


@dataclass(frozen=True, eq=False)
class FedCRefStatus(FedCRefUpload):
    """A client's state after refinement.

    Attributes
    ----------
    stable, frozen : bool
    n_refine : int
        Refinements made so far.
    self_acc : float
        ACC between its previous and new partition (1.0 when frozen).
    n_features : int
    """

    METHOD = "fedcref"
    KIND = "status"
    stable: bool
    frozen: bool
    n_refine: int
    self_acc: float
    n_features: int


@dataclass(frozen=True, eq=False)
class FedCRefProceed(FedCRefBroadcast):
    """Start the next iteration: train fresh local models (clients not frozen).

    Attributes
    ----------
    iteration : int
        The iteration that starts (>= 2).
    n_features : int
    """

    METHOD = "fedcref"
    KIND = "proceed"
    iteration: int
    n_features: int


@dataclass(frozen=True, eq=False)
class FedCRefFinal(FedCRefBroadcast):
    """The server is done: the global id of each of the client's local clusters in the last graph.

    Attributes
    ----------
    cluster_global : ndarray of shape (n_local_clusters,), int
        Group id (< ``n_groups``), a fresh singleton id (>= ``n_groups``), or -1 (no vertex).
    n_groups : int
    n_features : int
    """

    METHOD = "fedcref"
    KIND = "final"
    ARRAYS = {"cluster_global": ArraySpec("i", 1, min_value=-1)}
    cluster_global: np.ndarray
    n_groups: int
    n_features: int


# ----------------------------------------------------------------------------- helpers
def self_accuracy(a: np.ndarray, b: np.ndarray, n_clusters: int) -> float:
    """Hungarian ACC between two labelings of the same rows with labels in ``0..n_clusters-1``."""
    if a.size == 0:
        return 1.0
    C = np.zeros((n_clusters, n_clusters), dtype=np.int64)
    np.add.at(C, (a, b), 1)
    r, c = linear_sum_assignment(C, maximize=True)
    return float(C[r, c].sum() / a.size)


def plateau(history, tol: float, window: int) -> bool:
    """True when each of the last ``window`` changes of ``history`` is at most ``tol`` relative
    (``|h[t] - h[t-1]| / max(h[t-1], 1)``), spec §3.2."""
    h = list(history)
    if len(h) < window + 1:
        return False
    return all(abs(h[t] - h[t - 1]) / max(h[t - 1], 1) <= tol for t in range(len(h) - window, len(h)))


def _map_threads(fn, n_items: int, n_threads: int) -> list:
    """``[fn(i) for i in range(n_items)]`` on up to ``n_threads`` threads (BLAS pinned to one each)."""
    with limit_blas_threads(1):
        if n_threads <= 1 or n_items <= 1:
            return [fn(i) for i in range(n_items)]
    with limit_blas_threads(1), ThreadPoolExecutor(max_workers=min(n_threads, n_items)) as ex:
        return list(ex.map(fn, range(n_items)))


def _errors(models: np.ndarray, lay: _ae.Layout, X: np.ndarray, n_threads: int) -> np.ndarray:
    """Error table ``(n_rows, n_models)``, models split over threads (same bits for any split)."""
    E = np.empty((X.shape[0], models.shape[0]), dtype=np.float32)
    if models.shape[0] == 0 or X.shape[0] == 0:
        return E
    parts = np.array_split(np.arange(models.shape[0]), max(1, min(n_threads, models.shape[0])))

    def one(k):
        idx = parts[k]
        E[:, idx] = _ae.errors(models[idx], lay, X)

    _map_threads(one, len(parts), n_threads)
    return E


def _cached_errors(models: np.ndarray, lay: _ae.Layout, X: np.ndarray, n_threads: int, keys: np.ndarray,
                   cached_keys: np.ndarray | None, table: np.ndarray | None) -> tuple[np.ndarray, int]:
    """Error table of ``models`` on ``X`` reusing the columns of models already evaluated on ``X``.

    A per-sample error depends on the model's parameters and the row only (spec §4.2, cache), so
    the column of a model whose key (owner, cluster, version) was evaluated before is copied from
    ``table``; only the others are computed (:func:`_errors` gives each model the same bits
    whatever else is in the batch).

    Parameters
    ----------
    models : ndarray of shape (n_models, n_params), float32
    lay : Layout
    X : ndarray of shape (n_rows, n_features), float32
        The same rows ``table`` was computed on.
    n_threads : int
    keys : ndarray of shape (n_models, 3), int
        (owner, cluster, version) of each model; a row with a negative version is never cached.
    cached_keys : ndarray of shape (n_cached, 3), int, or None
        Keys of the cached columns (None: no cache).
    table : ndarray of shape (n_rows, n_cached), float32, or None

    Returns
    -------
    E : ndarray of shape (n_rows, n_models), float32
    n_reused : int
        Models whose column came from the cache.
    """
    E = np.empty((X.shape[0], models.shape[0]), dtype=np.float32)
    hit = np.full(models.shape[0], -1, np.int64)
    if cached_keys is not None and table is not None and cached_keys.shape[0] and table.shape[0] == X.shape[0]:
        where = {tuple(k): t for t, k in enumerate(cached_keys.tolist()) if k[2] >= 1}
        hit = np.array([where.get(tuple(k), -1) for k in np.asarray(keys).tolist()], dtype=np.int64)
    reuse = hit >= 0
    if reuse.any():
        E[:, reuse] = table[:, hit[reuse]]
    miss = np.flatnonzero(~reuse)
    if miss.size:
        E[:, miss] = _errors(models[miss], lay, X, n_threads)
    return E, int(reuse.sum())


#: ``ratio_threshold="auto"`` never goes below this (the fixed threshold that makes no wrong edge with the
#: paper's AE on Fashion-MNIST, clean or dirty clusters)
RATIO_FLOOR = 1.2


def sibling_ratio_min(scores: dict, clients: list, eligible: dict, col: dict) -> float:
    """Smallest two-way median error ratio between two clusters of one client (``inf`` if none).

    Parameters
    ----------
    scores : dict of client -> ndarray of shape (n_local_clusters, n_models)
        Each client's median ``E_ext / E_own`` of every model of the model set on each of its clusters.
    clients : list
        The clients that scored.
    eligible : dict of client -> set of int
        The clusters of each client that take part in association (``>= min_assoc_size`` rows).
    col : dict of (owner, cluster) -> int
        The model-set column of each cluster's model.

    Returns
    -------
    float
        ``min over clients c and clusters q != p of c of max(scores[c][q, col[c, p]],
        scores[c][p, col[c, q]])``: how alike the two most alike clusters of one client look to each
        other's models. A client's clusters are meant to be different distributions, so this is a
        label-free level of "different" measured with the same AEs and data as the association test.
    """
    best = np.inf
    for c in clients:
        qs = sorted(eligible[c])
        S = scores[c]
        for a_pos, q in enumerate(qs):
            for p in qs[a_pos + 1:]:
                if (c, q) in col and (c, p) in col:
                    best = min(best, max(float(S[q, col[(c, p)]]), float(S[p, col[(c, q)]])))
    return best


def auto_ratio_threshold(sibling_min: float) -> float:
    """``ratio_threshold="auto"``: ``max(RATIO_FLOOR, sqrt(sibling_min))`` -- the geometric midpoint
    between 1 (a cluster against a model of the same distribution, up to the AEs' generalisation gap)
    and the closest pair known to differ (:func:`sibling_ratio_min`), never below the fixed default;
    ``RATIO_FLOOR`` when there is no such pair (every client one cluster) or it is not finite."""
    if not np.isfinite(sibling_min) or sibling_min <= 0:
        return RATIO_FLOOR
    return float(max(RATIO_FLOOR, np.sqrt(sibling_min)))


def _cluster_index(labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(labels, kind="stable").astype(np.int64)
    starts = np.searchsorted(labels[order], np.arange(k + 1)).astype(np.int64)
    return order, starts


# ----------------------------------------------------------------------------- estimator
class FedCRef(BaseFederatedClusterer):
    """FedCRef: federated cluster refinement with per-cluster autoencoders (multi-round).

    Parameters
    ----------
    n_local_clusters : int, list of int, dict of int to int or None, default=None
        K_i, the clusters of each client (one int for all, one per client, or a mapping client
        index -> K_i). None: from ``init_labels`` (``max + 1`` per client).
    init_labels : list of array-like, dict of int to array-like or None, default=None
        Initial local labels of each client (values in ``0..K_i-1``), e.g. the paper's
        dirty-uniform simulation (:func:`fastfc.datasets.dirty_labels`); a list (client order)
        or a mapping client index -> labels. None: k-means (k-means++, 10 starts) on each
        client's rows.

        Deployments: as run parameters over :mod:`fastfc.flower`, lists reach every node (each
        client reads only its own entry), so every node would see every client's K_i and
        initial labels -- fine for simulations, not for private data. The per-node route keeps
        them local: a SuperNode's node config ``init-labels-path`` (a ``.npy`` of its rows'
        labels) and ``n-local-clusters`` (its K_i) are set by
        :class:`fastfc.flower.ClientWorker` as ``{client_index: value}`` on that client only;
        the run parameters then leave these two unset (or an int ``n_local_clusters`` as a
        default for nodes that give none).
    alpha : float, default=75
        Percentile of the paper's association test (``association="paper"`` only), in [0, 100].
    theta : float, default=0.2
        Threshold of the paper's association test (``association="paper"`` only; the paper uses
        0.15 on Fashion-MNIST).
    tau : float, default=0.8
        A client is stable when the ACC between its consecutive partitions is >= ``tau``.
    match_policy : {"best", "first", "all"}, default="best"
        Which of client j's passing clusters a cluster of client i links to (spec §8 A3).
    association : {"ratio", "paper"}, default="ratio"
        The pairwise association test (Phase 2), applied in both directions (each client on its
        own cluster, with its own model and the received one); a pair is linked only when both
        directions pass.

        - ``"ratio"`` (default, **not in the paper**): the median over the cluster's rows of
          ``E_ext / E_own`` is ``<= ratio_threshold``, i.e. the received model reconstructs the
          typical row at most ``ratio_threshold`` times worse than the owner's own model.
        - ``"paper"``: the paper's test (spec §3.3, Eq. 2), kept for parity with the paper and its
          code: the ``alpha``-th percentile of the min-max normalised ``|E_own - E_ext|`` is
          ``<= theta``.

        Why the ratio test is the default: the paper's score is scale-free, so it only asks whether
        ``|E_own - E_ext|`` has a heavy right tail, not whether the two errors are close. On
        Fashion-MNIST with the paper's simulation (25 clients, 30 epochs; first association graph,
        ``benchmarks/results/fedcref_assoc_diag_d00.md``, ``_d03.md``, ``fedcref_assoc_cal_fmnist_*.md``)
        it links different upper-body classes (T-shirt, shirt, pullover, coat): 3.6-6.8 % wrong edges
        on clean clusters and 15-25 % on dirtiness-0.3 clusters (three simulation seeds), which chain
        into components of up to most of the clusters. The median ratio at 1.2 makes no wrong edge
        on the same models (every seed and dirtiness), nor on digits with tiny AEs
        (``fedcref_assoc_cal_digits_*.md``), and it fails safe: a threshold too small for the AE
        leaves clusters unlinked instead of merging classes.
    ratio_threshold : float or "auto", default="auto"
        Threshold of ``association="ratio"`` (unused by the paper's test). Same-class ratios sit
        above 1 by the AEs' generalisation gap (own model on its training rows, received model
        on unseen ones) and by the spread between independently trained models, so the best fixed
        value depends on the AE, its training and the data: 1.2 suits the paper's AE on
        Fashion-MNIST (same-class median 1.14, different-class 10th percentile 1.74 on clean
        clusters; 1.20 and 1.44 at dirtiness 0.3), while tiny, quickly trained AEs (the digits
        tests': 64 features, hidden 32-16-32, ~80 rows per cluster) show same-class ratios of
        1.2-1.6, and small low-dimensional data far more (three clients of well-separated 4-D blobs,
        33 rows per cluster: 1.3-1.7, so 1.2 left 9 of 9 clusters unlinked).

        ``"auto"`` (default, **not in the paper**) derives it, every iteration and without labels,
        from the scores the clients already send: ``max(RATIO_FLOOR, sqrt(s))`` (``RATIO_FLOOR`` =
        1.2), where ``s`` is the smallest two-way ratio between two clusters of one client
        (:func:`sibling_ratio_min`): a client's clusters are meant to differ, so ``s`` is the level
        of "different" for these AEs on this data, and the threshold sits at the geometric midpoint
        between it and 1. On clean clusters it rises (1.20-1.23 on Fashion-MNIST with the paper's
        AE, 1.69-1.80 on digits with tiny AEs, 7-9 on the blobs above) and links more same-class
        pairs with no wrong edge on the measured cases (first graph:
        ``benchmarks/results/fedcref_assoc_auto_*.md``; whole fits:
        ``benchmarks/results/fedcref_auto_threshold.md``); on dirty clusters, whose siblings look
        alike, it stays at the floor, the fixed default before. Its risk: when two classes that are
        close never share a client while every client's own clusters are far apart, ``s`` says
        nothing about them; that case made no wrong edge in the measured cases, but a fixed float
        is the safer choice where it is likely. A float fixes the threshold for every iteration
        (1.2 reproduces the previous default). :attr:`association_thresholds_` records the values.
    max_iter : int, default=30
        Most FedCRef iterations.
    local_epochs : int, default=20
        Epochs of the fresh local AE of every cluster (Phase 1), with early stopping on the
        epoch loss (patience 4) when ``early_stopping``.
    fl_rounds : int, default=15
        FedAvg rounds per group and iteration.
    fl_epochs : int, default=7
        Local epochs of each FedAvg round after the first.
    fl_first_epochs : int, default=2
        Local epochs of FedAvg round 1.
    hidden_layer_sizes : tuple of int, default=(100, 64, 32, 64, 100)
        AE hidden layers (ReLU); the output layer is a sigmoid of ``n_features`` units, so
        the features should lie in [0, 1].
    batch_size : int, default=32
    learning_rate : float, default=1e-3
        Adam step size (Keras defaults otherwise).
    early_stopping : bool, default=True
    min_assoc_size : int, default=10
        Clusters with fewer rows take no part in association.
    tol_G, tol_I : float, default=0.1
        Plateau tolerances of ``|G|`` and ``|I|`` (stop when both hold over ``plateau_window``).
    plateau_window : int, default=3
    max_mean_refinements : int or None, default=10
        Stop when the mean number of refinements per client reaches it (None: no cap).
    max_group_size : int or None, default=None
        Cap on FedAvg members per group (the first in (client, cluster) order).
    cache_errors : bool, default=True
        Reuse per-(model, sample) reconstruction errors of models that did not change since a
        client last evaluated them (the models of frozen clients in cross-evaluation, and a
        client's own models, just cross-evaluated, in its refinement; spec §4.2). A model is named
        by (owner, cluster, version), the version being the iteration its owner trained it in
        (the model set carries it; a client keeps the version of its own models). Labels,
        groups and history are the same bits either way (a model's error column does not depend
        on the other models of the batch); only the work differs (:attr:`error_evals_`).
    oracle_labels : list of array-like or None, default=None
        **Experiments only -- the paper's perfect-association baseline (Tables 6, 9, 10).** True
        classes of each client's rows. When given, the association test is not used: every
        iteration, each client names each of its current clusters by the true class
        Hungarian-matched to it, and the server links two clusters (of different clients, both
        with >= ``min_assoc_size`` rows) iff their classes are equal. FedAvg, refinement and
        stopping are unchanged. It needs ground truth, so it is no clustering method; see
        :func:`fedcref_perfect_baseline`.
    random_state : int, RandomState instance or None, default=None
    n_jobs : int or None, default=None
        Threads: clients in parallel, and models of a client in parallel, BLAS pinned to one
        thread per model. Labels do not depend on it.

    Attributes
    ----------
    labels_, client_labels_ : ndarray, list of ndarray
        Global distribution id of every row (spec §3.7).
    local_labels_ : list of ndarray
        Each client's final local partition (``0..K_i-1``).
    init_local_labels_ : list of ndarray
        Each client's initial partition.
    n_distributions_ : int
        ``|G|`` of the last association graph: the estimated number of global distributions.
    n_clusters_ : int
        Global ids in use: the groups plus the isolated clusters of the last graph (each gets a
        fresh id), so ``labels_`` lie in ``0..n_clusters_-1``.
    group_models_ : ndarray of shape (``n_distributions_``, n_params), float32
        The FedAvg model of each group (layout :func:`fastfc._ae.layout`).
    cluster_global_ : list of ndarray
        Global id of each client's local cluster in the last graph (-1: no vertex).
    edges_ : ndarray of shape (n_edges, 4), int
        The last graph's associations ``(client i, cluster q, client j, cluster p)``.
    isolated_clusters_ : ndarray of shape (n_isolated, 3), int
        The last graph's clusters without a partner: ``(client, cluster, rows)``. Their rows keep a
        global id of their own, so with more than one client a fit that leaves any warns
        (:class:`UnlinkedClustersWarning`): a cluster unique to its client is isolated rightly, but
        clusters of one distribution that the association test failed to link split it by client.
    isolated_scores_ : ndarray of shape (n_isolated,), float
        Each isolated cluster's closest two-way score (the larger of the two directions) to a
        cluster of another client under the association test in use; ``inf`` when none was scored
        (fewer than ``min_assoc_size`` rows, or the perfect-association baseline).
    association_thresholds_ : ndarray of shape (n_iterations,), float
        The threshold each association graph was tested against: ``theta`` (paper's test), the fixed
        ``ratio_threshold``, or the one ``ratio_threshold="auto"`` derived from that iteration's scores.
    association_threshold_ : float
        The last of them (NaN before any association).
    history_ : dict of ndarray
        Per iteration (ACC-free): ``n_groups``, ``n_isolated``, ``n_edges``, ``n_active``
        (clients not stable after the refinement), ``n_refined`` (clients that refined),
        ``n_frozen``.
    n_iter_ : int
        FedCRef iterations run.
    error_evals_ : dict of int
        Model-row reconstruction errors over the run, summed over clients:
        ``cross_eval_computed`` / ``cross_eval_reused`` (Phase 2) and ``refine_computed`` /
        ``refine_reused`` (Phase 4); reused ones came from the cache (``cache_errors``).
    phase_seconds_ : dict of float
        Wall time of the protocol rounds by phase (``local_training``, ``association``,
        ``fedavg``, ``refinement``).
    n_rounds_, bytes_up_, bytes_down_, round_seconds_
        As every multi-round estimator.
    """

    _parameter_constraints: dict = {
        "n_local_clusters": [None, Interval(Integral, 1, None, closed="left"), list, tuple, dict],
        "init_labels": [None, list, tuple, dict],
        "alpha": [Interval(Real, 0, 100, closed="both")],
        "theta": [Interval(Real, 0, None, closed="left")],
        "tau": [Interval(Real, 0, 1, closed="both")],
        "match_policy": [StrOptions({"best", "first", "all"})],
        "association": [StrOptions({"ratio", "paper"})],
        "ratio_threshold": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "local_epochs": [Interval(Integral, 0, None, closed="left")],
        "fl_rounds": [Interval(Integral, 1, None, closed="left")],
        "fl_epochs": [Interval(Integral, 0, None, closed="left")],
        "fl_first_epochs": [Interval(Integral, 0, None, closed="left")],
        "hidden_layer_sizes": [list, tuple],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "early_stopping": ["boolean"],
        "min_assoc_size": [Interval(Integral, 1, None, closed="left")],
        "tol_G": [Interval(Real, 0, None, closed="left")],
        "tol_I": [Interval(Real, 0, None, closed="left")],
        "plateau_window": [Interval(Integral, 1, None, closed="left")],
        "max_mean_refinements": [None, Interval(Integral, 1, None, closed="left")],
        "max_group_size": [None, Interval(Integral, 2, None, closed="left")],
        "cache_errors": ["boolean"],
        "oracle_labels": [None, list, tuple],
        "random_state": ["random_state"],
        "n_jobs": [None, Integral],
    }
    _summary_cls = FedCRefModels
    _reply_cls = FedCRefModelSet
    #: fedcref_scores reads the partition each client's last association was scored on
    _saved_private_attributes = ("_assoc_labels",)
    #: parameters a node may set for itself only ({client_index: value}), see fastfc.flower.ClientWorker
    _per_client_params = ("init_labels", "n_local_clusters")

    def __init__(self, n_local_clusters=None, *, init_labels=None, alpha: float = 75.0, theta: float = 0.2,
                 tau: float = 0.8, match_policy: str = "best", association: str = "ratio",
                 ratio_threshold: float | str = "auto", max_iter: int = 30, local_epochs: int = 20,
                 fl_rounds: int = 15, fl_epochs: int = 7, fl_first_epochs: int = 2,
                 hidden_layer_sizes=(100, 64, 32, 64, 100), batch_size: int = 32, learning_rate: float = 1e-3,
                 early_stopping: bool = True, min_assoc_size: int = 10, tol_G: float = 0.1, tol_I: float = 0.1,
                 plateau_window: int = 3, max_mean_refinements: int | None = 10, max_group_size: int | None = None,
                 cache_errors: bool = True, oracle_labels=None, random_state=None, n_jobs: int | None = None):
        self.n_local_clusters = n_local_clusters
        self.init_labels = init_labels
        self.alpha = alpha
        self.theta = theta
        self.tau = tau
        self.match_policy = match_policy
        self.association = association
        self.ratio_threshold = ratio_threshold
        self.max_iter = max_iter
        self.local_epochs = local_epochs
        self.fl_rounds = fl_rounds
        self.fl_epochs = fl_epochs
        self.fl_first_epochs = fl_first_epochs
        self.hidden_layer_sizes = hidden_layer_sizes
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.early_stopping = early_stopping
        self.min_assoc_size = min_assoc_size
        self.tol_G = tol_G
        self.tol_I = tol_I
        self.plateau_window = plateau_window
        self.max_mean_refinements = max_mean_refinements
        self.max_group_size = max_group_size
        self.cache_errors = cache_errors
        self.oracle_labels = oracle_labels
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------- protocol plumbing
    def _multi_round(self) -> bool:
        return True

    def _max_rounds(self) -> int:
        return int(self.max_iter) * (int(self.fl_rounds) + 3)

    def _broadcast_cls(self, round: int):
        return FedCRefBroadcast

    def _upload_cls(self, round: int):
        return FedCRefUpload

    def _check_round_upload(self, upload, server_state, round: int) -> None:
        """One upload fits the run: the run's feature count and model size, the kind of upload the server's
        last broadcast asked for, and (by kind) scores for every model of the set from each of the client's
        clusters, an update for each task it was given, models for the clusters it has."""
        who = f"client {upload.client}" if upload.client is not None else "an upload"
        if round == 0:
            self._check_models_upload(upload, who, upload.n_features, None)
            return
        v = server_state.values
        d = int(v["n_features"])
        if upload.n_features != d:
            raise MessageError(f"{who}: its upload is for {upload.n_features} features, the run has {d}")
        if not isinstance(upload, v["expect"]):
            raise MessageError(f"{who}: sent a {type(upload).__name__} in round {round}, where the server's last "
                               f"broadcast asked for a {v['expect'].__name__}")
        known = v["cache"].get(upload.client)
        if known is None:
            raise MessageError(f"{who} did not upload models in round 0, so it has no place in the run")
        n_local = known[2].shape[0]
        if isinstance(upload, FedCRefScores):
            expected = (n_local, v["model_set"].params.shape[0])
            if upload.scores.shape != expected:
                raise MessageError(f"{who}: its scores have shape {upload.scores.shape}, expected {expected} (its "
                                   "local clusters x the models of the set)")
            if (upload.oracle_classes.shape[0] > 0) != (self.oracle_labels is not None):
                raise MessageError(f"{who}: its scores {'carry' if upload.oracle_classes.shape[0] else 'lack'}"
                                   " oracle classes, but the perfect-association baseline (oracle_labels) is "
                                   f"{'off' if self.oracle_labels is None else 'on'}")
        elif isinstance(upload, FedCRefTrainUpdate):
            if upload.client not in v["task_clients"]:
                raise MessageError(f"{who}: sent a train update, but was given no training task")
            expected = (sum(cc == upload.client for m in v["members"] for cc, _ in m), self._layout(d).n_params)
            if upload.params.shape != expected:
                raise MessageError(f"{who}: its train update has parameters of shape {upload.params.shape}, its task "
                                   f"asked for {expected}")
        elif isinstance(upload, FedCRefModels):
            self._check_models_upload(upload, who, d, n_local)

    def _check_models_upload(self, upload, who: str, n_features: int, n_local: int | None) -> None:
        """A models upload: (round 0) a changed one; the run's model size; the client's cluster count."""
        if not isinstance(upload, FedCRefModels):  # pragma: no cover - the batch check admits only these
            raise MessageError(f"{who}: round 0 takes a FedCRefModels upload, got {type(upload).__name__}")
        if n_local is None and not upload.changed:
            raise MessageError(f"{who}: says its models are unchanged, but it has sent none before")
        n_params = self._layout(n_features).n_params
        if upload.params.shape[1] != n_params and upload.params.shape[0]:
            raise MessageError(f"{who}: its models have {upload.params.shape[1]} parameters each, the run's "
                               f"autoencoder ({n_features} features, hidden layers {self._check_hidden()}) has "
                               f"{n_params}")
        if n_local is not None and upload.sizes.shape[0] != n_local:
            raise MessageError(f"{who}: its models upload has {upload.sizes.shape[0]} local clusters, it had "
                               f"{n_local}")

    def _check_state_values(self, state: ClientState) -> None:
        """Every value a FedCRef client keeps fits the others and the rows (StateError otherwise): K_i, the
        per-row labels in [0, K_i), one model slot per cluster of the run's size, Adam moments per task, the
        error cache with one column per key."""
        n = state.n_samples
        k = require_int(state, "K", 1, 2 ** 31)
        for name in ("labels", "init_labels", "assoc_labels"):
            require_array(state, name, "i", (n,), min_value=0, max_value=k - 1)
        n_params = self._layout(state.n_features).n_params
        require_array(state, "models", "f", (k, n_params))
        require_array(state, "has_model", "b", (k,))
        require_array(state, "sel_local", "i", (k,), min_value=-1, max_value=k - 1)
        require_array(state, "sel_group", "i", (k,), min_value=-1)
        t = require_array(state, "fl_step", "i", (None,), min_value=0).shape[0]
        for name in ("fl_m", "fl_v"):
            require_array(state, name, "f", (t, n_params))
        m = require_array(state, "ce_keys", "i", (None, 3)).shape[0]
        require_array(state, "ce_table", "f", (n, m))
        for name in ("stable", "frozen"):
            if not isinstance(state[name], bool):
                raise StateError(f"the FedCRef client state of client {state.client}: {name!r} must be a bool")
        require_int(state, "n_refine", 0, 2 ** 31)
        require_int(state, "models_version", 1, 2 ** 31)
        for name in ("ce_computed", "ce_reused", "rf_computed", "rf_reused"):
            require_int(state, name, 0, 2 ** 62)

    def _check_broadcast(self, broadcast, state, round):
        if isinstance(broadcast, FedCRefFinal):
            raise MessageError("the broadcast is final: label the rows with client_assign")
        return super()._check_broadcast(broadcast, state, round)

    def _check_reply(self, reply, state: ClientState) -> Message:
        if not isinstance(reply, FedCRefFinal):
            raise MessageError(f"client_assign needs the server's FedCRefFinal broadcast, got {type(reply).__name__}"
                               " (the server has not finished: run client_round on it)")
        if reply.client is not None and reply.client != state.client:
            raise MessageError(f"the reply is addressed to client {reply.client}, but this is client {state.client} "
                               "(per its state): replies were routed to the wrong client")
        if reply.cluster_global.shape[0] != int(state["K"]):
            raise MessageError(f"the final broadcast maps {reply.cluster_global.shape[0]} local clusters, the "
                               f"client has {int(state['K'])}")
        return reply

    def _check_hidden(self) -> tuple[int, ...]:
        h = tuple(self.hidden_layer_sizes)
        if not h or not all(isinstance(v, (Integral, np.integer)) and not isinstance(v, bool) and v >= 1 for v in h):
            raise ValueError(f"hidden_layer_sizes must be a non-empty sequence of integers >= 1, got {h!r}")
        return tuple(int(v) for v in h)

    def _layout(self, n_features: int) -> _ae.Layout:
        return _ae.layout(n_features, self._check_hidden())

    def _client_k(self, index: int, n_rows: int) -> tuple[int, np.ndarray | None]:
        """(K_i, initial labels or None) of client ``index``."""
        init = None
        if self.init_labels is not None:
            if isinstance(self.init_labels, dict):
                if index not in self.init_labels:
                    raise ValueError(f"init_labels has entries for clients {sorted(self.init_labels)}, none for "
                                     f"client {index}")
            elif index >= len(self.init_labels):
                raise ValueError(f"init_labels has {len(self.init_labels)} entries, no entry for client {index}")
            init = np.asarray(self.init_labels[index])
            if init.ndim != 1 or init.shape[0] != n_rows:
                raise ValueError(f"init_labels[{index}] has shape {init.shape}, expected ({n_rows},)")
            if init.size and (init.dtype.kind not in "iu" or init.min() < 0):
                raise ValueError(f"init_labels[{index}] must hold integers >= 0")
            init = init.astype(np.int64)
        nk = self.n_local_clusters
        if nk is None:
            if init is None:
                raise ValueError("FedCRef needs n_local_clusters (K_i) or init_labels")
            k = int(init.max()) + 1 if init.size else 1
        elif isinstance(nk, (list, tuple, dict)):
            if isinstance(nk, dict) and index not in nk:
                raise ValueError(f"n_local_clusters has entries for clients {sorted(nk)}, none for client {index}")
            if not isinstance(nk, dict) and index >= len(nk):
                raise ValueError(f"n_local_clusters has {len(nk)} entries, no entry for client {index}")
            k = nk[index]
            if not isinstance(k, (Integral, np.integer)) or isinstance(k, bool) or k < 1:
                raise ValueError(f"n_local_clusters[{index}] must be an integer >= 1, got {k!r}")
            k = int(k)
        else:
            k = int(nk)
        if init is not None and init.size and init.max() >= k:
            raise ValueError(f"init_labels[{index}] has label {int(init.max())}, but client {index} has K_i = {k}")
        if init is None and k > n_rows:
            raise ValueError(f"client {index} has {n_rows} rows, fewer than its K_i = {k}")
        return k, init

    def _client_oracle(self, index: int, n_rows: int) -> np.ndarray | None:
        """True classes of client ``index`` (perfect-association baseline), or None."""
        if self.oracle_labels is None:
            return None
        if index >= len(self.oracle_labels):
            raise ValueError(f"oracle_labels has {len(self.oracle_labels)} entries, no entry for client {index}")
        y = np.asarray(self.oracle_labels[index])
        if y.ndim != 1 or y.shape[0] != n_rows:
            raise ValueError(f"oracle_labels[{index}] has shape {y.shape}, expected ({n_rows},)")
        if y.size and (y.dtype.kind not in "iu" or y.min() < 0):
            raise ValueError(f"oracle_labels[{index}] must hold integer classes >= 0")
        return y.astype(np.int64)

    def _check_clients_vs_params(self, X_clients: list[np.ndarray]) -> None:
        self._check_hidden()
        if self.oracle_labels is not None:
            for i, X in enumerate(X_clients):
                self._client_oracle(i, X.shape[0])
        for name in ("init_labels", "n_local_clusters", "oracle_labels"):
            v = getattr(self, name)
            if isinstance(v, (list, tuple)) and len(v) != len(X_clients):
                raise ValueError(f"{name} has {len(v)} entries for {len(X_clients)} clients")
        for i, X in enumerate(X_clients):
            self._client_k(i, X.shape[0])
            if X.size and (X.min() < 0 or X.max() > 1):
                raise ValueError(f"FedCRef's autoencoders have a sigmoid output: features must lie in [0, 1] "
                                 f"(client {i} has values in [{X.min():g}, {X.max():g}]); scale them first")

    # ------------------------------------------------------------- client work
    def _train_local(self, X: np.ndarray, labels: np.ndarray, k: int, rng: np.random.Generator,
                     n_threads: int) -> tuple[np.ndarray, np.ndarray]:
        """Fresh AE per non-empty cluster (Phase 1): (models (k, P), has_model (k,))."""
        lay = self._layout(X.shape[1])
        seeds = rng.integers(0, np.iinfo(np.int64).max, size=k)
        present = np.bincount(labels, minlength=k) > 0
        todo = np.flatnonzero(present)
        models = np.zeros((k, lay.n_params), dtype=np.float32)

        def one(t):
            q = todo[t]
            mrng = np.random.default_rng(seeds[q])
            w0 = _ae.glorot_init(lay, mrng)
            w, _, _ = _ae.train(w0, lay, X[labels == q], self.local_epochs, mrng, batch_size=self.batch_size,
                                lr=self.learning_rate, early_stopping=self.early_stopping)
            return w

        for q, w in zip(todo, _map_threads(one, len(todo), n_threads)):
            models[q] = w
        return models, present

    def _cached_errors(self, models, keys, lay, X32, n_threads, values: dict, counter: str) -> np.ndarray:
        """Error table of ``models`` on the client's rows, through the client's cache when
        ``cache_errors``; counts computed / reused columns (x rows) in ``values``. The cross-evaluation
        (``counter="ce"``) replaces the cache with its table; the refinement only reads it."""
        n = X32.shape[0]
        if self.cache_errors:
            E, n_reused = _cached_errors(models, lay, X32, n_threads, keys, np.asarray(values["ce_keys"]),
                                         np.asarray(values["ce_table"]))
            if counter == "ce":
                values["ce_keys"], values["ce_table"] = np.asarray(keys, np.int64), E
        else:
            E, n_reused = _errors(models, lay, X32, n_threads), 0
        values[f"{counter}_computed"] = int(values[f"{counter}_computed"]) + n * (models.shape[0] - n_reused)
        values[f"{counter}_reused"] = int(values[f"{counter}_reused"]) + n * n_reused
        return E

    def _models_upload(self, X, labels, k, models, has_model, changed) -> FedCRefModels:
        sizes = np.bincount(labels, minlength=k)
        idx = np.flatnonzero(has_model) if changed else np.zeros(0, np.int64)
        return FedCRefModels(params=models[idx], clusters=idx, sizes=sizes, changed=changed, n_features=X.shape[1])

    def _run_summarize(self, X, index, entropy, restart, n_threads):
        with pinned_worker():
            rng = client_rng(entropy, index, restart)
            k, init = self._client_k(index, X.shape[0])
            X32 = np.ascontiguousarray(X, dtype=np.float32)
            if init is None:
                from sklearn.cluster import KMeans

                km = KMeans(n_clusters=k, n_init=10, random_state=int(rng.integers(0, 2**31 - 1)))
                init = km.fit_predict(X32).astype(np.int64)
            models, has_model = self._train_local(X32, init, k, rng, n_threads)
            upload = self._models_upload(X, init, k, models, has_model, True)
        private = {
            "K": k, "labels": init, "init_labels": init.copy(), "assoc_labels": init.copy(), "models": models,
            "has_model": has_model, "stable": False, "frozen": False, "n_refine": 0,
            "sel_local": np.arange(k, dtype=np.int64), "sel_group": np.full(k, -1, np.int64),
            "fl_m": np.zeros((0, models.shape[1]), np.float32), "fl_v": np.zeros((0, models.shape[1]), np.float32),
            "fl_step": np.zeros(0, np.int64),
            "ce_keys": np.zeros((0, 3), np.int64), "models_version": 1, "ce_table": np.zeros((X.shape[0], 0), np.float32),
            "ce_computed": 0, "ce_reused": 0, "rf_computed": 0, "rf_reused": 0,
        }
        state = ClientState(method=self._state_method(), client=index, n_samples=X.shape[0],
                            n_features=X.shape[1], values=private)
        return upload.addressed(client=index), state

    def _summarize(self, X, rng, n_threads):  # pragma: no cover - _run_summarize is overridden
        raise NotImplementedError("FedCRef's round 0 needs the client index: see _run_summarize")

    def _client_round(self, X, state, broadcast, rng, n_threads, round):
        values = dict(state.values)
        X32 = np.ascontiguousarray(X, dtype=np.float32)
        k = int(values["K"])
        labels = np.asarray(values["labels"])
        lay = self._layout(X.shape[1])
        d = X.shape[1]
        if isinstance(broadcast, FedCRefModelSet):  # Phase 2: cross-evaluation and scores
            if broadcast.params.shape[1] != lay.n_params:
                raise MessageError(f"model set has {broadcast.params.shape[1]} parameters per model, this "
                                   f"estimator's AE has {lay.n_params}")
            oracle = self._client_oracle(state.client, X.shape[0])
            if oracle is not None:  # perfect-association baseline: no test, the server links by true class
                cls = _matched_classes(oracle, labels, k)
                cls[cls < 0] = -1
                values["assoc_labels"] = labels.copy()
                scores = np.ones((k, broadcast.params.shape[0]), dtype=np.float64)
                return FedCRefScores(scores=scores, oracle_classes=cls, n_features=d), values
            keys = np.stack([broadcast.owners, broadcast.clusters, broadcast.versions], axis=1)
            E = self._cached_errors(broadcast.params, keys, lay, X32, n_threads, values, "ce")
            own = np.full(k, -1, np.int64)
            mine = np.flatnonzero(broadcast.owners == state.client)
            if mine.size and broadcast.clusters[mine].max() >= k:
                raise MessageError(f"FedCRefModelSet names a local cluster {int(broadcast.clusters[mine].max())} of "
                                   f"client {state.client}, which has {k}")
            own[broadcast.clusters[mine]] = mine
            own[~np.asarray(values["has_model"])] = -1
            order, starts = _cluster_index(labels, k)
            ratio = self.association == "ratio"
            big = np.finfo(np.float64).max  # the wire format takes finite scores only
            scores = np.full((k, broadcast.params.shape[0]), big if ratio else 1.0, dtype=np.float64)
            cluster_scores(E, order, starts, own, np.arange(E.shape[1], dtype=np.int64), float(self.alpha), scores,
                           1 if ratio else 0)
            values["assoc_labels"] = labels.copy()
            return FedCRefScores(scores=np.clip(scores, 0.0, big), oracle_classes=np.zeros(0, np.int64),
                                 n_features=d), values
        if isinstance(broadcast, FedCRefTrainTask):  # Phase 3: one FedAvg round
            n_t = broadcast.params.shape[0]
            if broadcast.fl_round == 1 or values["fl_m"].shape[0] != n_t:
                values["fl_m"] = np.zeros((n_t, lay.n_params), np.float32)
                values["fl_v"] = np.zeros((n_t, lay.n_params), np.float32)
                values["fl_step"] = np.zeros(n_t, np.int64)
            # one copy of the moments (the previous state's arrays stay untouched); each task's Adam
            # then updates its rows of the copy in place, so nothing is copied per task
            m_all, v_all = np.array(values["fl_m"]), np.array(values["fl_v"])
            steps = np.array(values["fl_step"])
            seeds = rng.integers(0, np.iinfo(np.int64).max, size=n_t)
            if n_t and broadcast.clusters.max() >= k:
                raise MessageError("a train task names a cluster this client does not have")

            def one(t):
                opt = _ae.Adam.on_buffers(m_all[t], v_all[t], lr=self.learning_rate, step=int(steps[t]))
                w, opt, _ = _ae.train(broadcast.params[t], lay, X32[labels == broadcast.clusters[t]],
                                      broadcast.epochs, np.random.default_rng(seeds[t]), batch_size=self.batch_size,
                                      opt=opt)
                return w, opt

            out = _map_threads(one, n_t, n_threads)
            params = np.zeros((n_t, lay.n_params), np.float32)
            for t, (w, opt) in enumerate(out):
                params[t], steps[t] = w, opt.step
            values.update(fl_m=m_all, fl_v=v_all, fl_step=steps)
            counts = np.array([(labels == q).sum() for q in broadcast.clusters], dtype=np.int64)
            return FedCRefTrainUpdate(params=params, counts=counts, n_features=d), values
        if isinstance(broadcast, FedCRefGroupModels):  # Phase 4: refinement and stability
            values["fl_m"] = np.zeros((0, lay.n_params), np.float32)
            values["fl_v"] = np.zeros((0, lay.n_params), np.float32)
            values["fl_step"] = np.zeros(0, np.int64)
            if values["stable"]:
                values["frozen"] = True
            acc = 1.0
            if values["frozen"]:  # its models were trained on its final partition: cluster p <-> model p
                values["sel_local"] = np.arange(k, dtype=np.int64)
                values["sel_group"] = np.full(k, -1, np.int64)
            else:
                has = np.flatnonzero(values["has_model"])
                cands = np.vstack([np.asarray(values["models"])[has], broadcast.params]) if broadcast.params.size \
                    else np.asarray(values["models"])[has]
                keys = np.zeros((cands.shape[0], 3), np.int64)  # own models: (this client, cluster, version)
                keys[:, 0] = state.client
                keys[:has.size, 1] = has
                keys[:has.size, 2] = int(values["models_version"])
                keys[has.size:, 2] = -1  # the group models are new every iteration: never cached
                E = self._cached_errors(cands, keys, lay, X32, n_threads, values, "rf")
                new = np.empty(X.shape[0], np.int64)
                sel = np.empty(k, np.int64)
                cluster_refine(E, k, new, sel)
                acc = self_accuracy(labels, new, k)
                n_loc = has.size
                values["sel_local"] = np.where((sel >= 0) & (sel < n_loc), has[np.clip(sel, 0, max(n_loc - 1, 0))]
                                               if n_loc else -1, -1).astype(np.int64)
                values["sel_group"] = np.where(sel >= n_loc, sel - n_loc, -1).astype(np.int64)
                values["labels"] = new
                values["n_refine"] = int(values["n_refine"]) + 1
                values["stable"] = bool(acc >= self.tau)
            return FedCRefStatus(stable=bool(values["stable"]), frozen=bool(values["frozen"]),
                                 n_refine=int(values["n_refine"]), self_acc=float(acc), n_features=d), values
        if isinstance(broadcast, FedCRefProceed):  # Phase 1 of the next iteration
            if values["frozen"]:
                return self._models_upload(X, labels, k, values["models"], values["has_model"], False), values
            models, has_model = self._train_local(X32, labels, k, rng, n_threads)
            values.update(models=models, has_model=has_model, models_version=int(broadcast.iteration))
            return self._models_upload(X, labels, k, models, has_model, True), values
        raise MessageError(f"FedCRef clients do not handle a {type(broadcast).__name__}")  # pragma: no cover

    def _round_costs(self, X_clients, states, broadcasts):
        """Rows x epochs (training) or rows x models (evaluation) of each client's next round: the
        FedAvg and local-training rounds start the clients with the most training first."""
        costs = []
        for X, st, b in zip(X_clients, states, broadcasts):
            n = X.shape[0]
            v = st.values
            if isinstance(b, FedCRefTrainTask):
                labels = np.asarray(v["labels"])
                costs.append(float(b.epochs) * sum(int((labels == q).sum()) for q in b.clusters))
            elif isinstance(b, FedCRefProceed):
                costs.append(0.0 if v["frozen"] else float(self.local_epochs) * n)
            elif isinstance(b, (FedCRefModelSet, FedCRefGroupModels)):
                costs.append(float(n) * b.params.shape[0])
            else:
                costs.append(0.0)
        return costs

    def _assign(self, X, state, reply, n_threads):
        cg = np.asarray(reply.cluster_global, dtype=np.int64)
        sel_local, sel_group = np.asarray(state["sel_local"]), np.asarray(state["sel_group"])
        if sel_group.size and sel_group.max() >= reply.n_groups:
            raise StateError(f"the FedCRef client state of client {state.client} selects group "
                             f"{int(sel_group.max())}, but the final broadcast has {reply.n_groups} groups")
        mapping = np.where(sel_group >= 0, sel_group, np.where(sel_local >= 0, cg[np.clip(sel_local, 0, None)], -1))
        return mapping[np.asarray(state["labels"])]

    # ------------------------------------------------------------- server work
    def _aggregate(self, summaries, rng, n_threads):
        cache = {}
        for s in summaries:
            cache[s.client if s.client is not None else len(cache)] = (np.asarray(s.params), np.asarray(s.clusters),
                                                                     np.asarray(s.sizes), 1)
        model_set = self._model_set(cache, summaries[0].n_features)
        return model_set, [model_set] * len(summaries)

    @staticmethod
    def _model_set(cache: dict, n_features: int) -> FedCRefModelSet:
        clients = sorted(cache)
        params = np.concatenate([cache[c][0] for c in clients], axis=0)
        owners = np.concatenate([np.full(cache[c][0].shape[0], c, np.int64) for c in clients])
        clusters = np.concatenate([cache[c][1] for c in clients])
        versions = np.concatenate([np.full(cache[c][0].shape[0], cache[c][3], np.int64) for c in clients])
        return FedCRefModelSet(params=params, owners=owners, clusters=clusters, versions=versions,
                               n_features=n_features)

    def _run_server_start(self, model, replies, summaries, entropy, restart, n_threads):
        broadcasts, state, done = super()._run_server_start(model, replies, summaries, entropy, restart, n_threads)
        cache = {s.client: (np.asarray(s.params), np.asarray(s.clusters), np.asarray(s.sizes), 1) for s in summaries}
        n_clusters = sum(int(s.sizes.shape[0]) for s in summaries)
        values = {
            "replies": [], "clients": [s.client for s in summaries], "cache": cache, "model_set": model,
            "iteration": 1, "hist_G": [0], "hist_I": [n_clusters], "history": [], "phases": ["local_training"],
            "n_features": int(summaries[0].n_features), "expect": FedCRefScores,
        }
        return broadcasts, type(state)(method=state.method, round=0, model=None, values=values), False

    def _threshold(self, scores: dict, clients: list, eligible: dict, col: dict) -> float:
        """The association test's threshold for this graph: ``theta`` (paper), a fixed ``ratio_threshold``,
        or ``"auto"``: ``max(RATIO_FLOOR, sqrt(s))`` with ``s`` the smallest two-way median error ratio
        between two clusters of one client (:func:`sibling_ratio_min`; ``RATIO_FLOOR`` when no client has
        two clusters to compare)."""
        if self.association != "ratio":
            return float(self.theta)
        if self.ratio_threshold != "auto":
            return float(self.ratio_threshold)
        return auto_ratio_threshold(sibling_ratio_min(scores, clients, eligible, col))

    def _associate(self, uploads, values):
        """Graph of Phase 2-3 from the clients' scores: (edges list, groups list of vertex lists, cluster_global).

        Also sets ``values["isolated"]``: ``(client, cluster, rows, closest two-way score)`` of every
        cluster left without a partner.
        """
        ms: FedCRefModelSet = values["model_set"]
        cache = values["cache"]
        col = {(int(o), int(c)): j for j, (o, c) in enumerate(zip(ms.owners, ms.clusters))}
        scores = {u.client: np.asarray(u.scores) for u in uploads}
        clients = sorted(c for c in scores if c in cache)
        eligible = {c: {int(q) for q in cache[c][1] if cache[c][2][q] >= self.min_assoc_size} for c in clients}
        theta = self._threshold(scores, clients, eligible, col)
        values["thresholds"] = list(values.get("thresholds", [])) + [theta]
        edges = []
        oracle = {u.client: np.asarray(u.oracle_classes) for u in uploads} if self.oracle_labels is not None \
            else None
        for a_pos, i in enumerate(clients):
            for j in clients[a_pos + 1:]:
                if oracle is not None:  # perfect-association baseline: linked iff the same true class
                    edges.extend((i, q, j, p) for q in sorted(eligible[i]) for p in sorted(eligible[j])
                                 if oracle[i][q] >= 0 and oracle[i][q] == oracle[j][p])
                    continue
                for q in sorted(eligible[i]):
                    passing = []
                    for p in sorted(eligible[j]):
                        s1 = scores[i][q, col[(j, p)]]
                        s2 = scores[j][p, col[(i, q)]]
                        if s1 <= theta and s2 <= theta:
                            passing.append((max(s1, s2), p))
                    if not passing:
                        continue
                    if self.match_policy == "all":
                        chosen = [p for _, p in passing]
                    elif self.match_policy == "first":
                        chosen = [passing[0][1]]
                    else:
                        chosen = [min(passing)[1]]
                    edges.extend((i, q, j, p) for p in chosen)
        vertices = [(c, int(q)) for c in clients for q in sorted(int(v) for v in cache[c][1])]
        vid = {v: t for t, v in enumerate(vertices)}
        nv = len(vertices)
        if edges:
            r = [vid[(i, q)] for i, q, _, _ in edges]
            s = [vid[(j, p)] for _, _, j, p in edges]
            graph = coo_matrix((np.ones(len(edges)), (r, s)), shape=(nv, nv))
        else:
            graph = coo_matrix((nv, nv))
        _, comp = connected_components(graph, directed=False)
        members: dict[int, list] = {}
        for t, cmp in enumerate(comp):
            members.setdefault(int(cmp), []).append(vertices[t])
        comps = sorted(members.values(), key=lambda m: m[0])  # vertices are in (client, cluster) order
        groups = [m for m in comps if len(m) >= 2]
        singles = [m for m in comps if len(m) == 1]
        cluster_global = {c: np.full(int(cache[c][2].shape[0]), -1, np.int64) for c in cache}
        for g, m in enumerate(groups + singles):
            for c, q in m:
                cluster_global[c][q] = g
        # each isolated cluster's closest two-way score to a cluster of another client (inf: none
        # could be scored): what the end-of-fit warning reports, so a user sees how far the test missed
        isolated = []
        for (c, q), in singles:
            best = np.inf
            if oracle is None and q in eligible.get(c, ()):
                for j in clients:
                    if j == c:
                        continue
                    for p in eligible[j]:
                        best = min(best, max(float(scores[c][q, col[(j, p)]]), float(scores[j][p, col[(c, q)]])))
            isolated.append((int(c), int(q), int(cache[c][2][q]), best))
        values["isolated"] = isolated
        return edges, groups, singles, cluster_global

    def _train_tasks(self, values, round_fl: int, params: np.ndarray, clients, n_features: int) -> list[Message]:
        out = []
        epochs = self.fl_first_epochs if round_fl == 1 else self.fl_epochs
        for c in clients:
            rows = [(g, q) for g, m in enumerate(values["members"]) for (cc, q) in m if cc == c]
            g_idx = np.array([g for g, _ in rows], np.int64)
            out.append(FedCRefTrainTask(params=params[g_idx] if rows else np.zeros((0, params.shape[1]), np.float32),
                                        groups=g_idx, clusters=np.array([q for _, q in rows], np.int64),
                                        epochs=int(epochs), fl_round=round_fl, n_features=n_features))
        return out

    def _server_round(self, uploads, server_state, rng, n_threads, round):
        values = dict(server_state.values)
        kind = values["expect"]  # every upload is of it (_check_round_upload, run on each before this)
        d = int(uploads[0].n_features)
        clients = [u.client for u in uploads]
        values["history"] = [dict(h) for h in values["history"]]
        if kind is FedCRefScores:
            values["phases"] = values["phases"] + ["association"]
            edges, groups, singles, cluster_global = self._associate(uploads, values)
            values["hist_G"] = values["hist_G"] + [len(groups)]
            values["hist_I"] = values["hist_I"] + [len(singles)]
            values["history"].append({"n_groups": len(groups), "n_isolated": len(singles), "n_edges": len(edges)})
            values.update(edges=edges, groups=groups, singles=singles, cluster_global=cluster_global)
            members = [m[:self.max_group_size] if self.max_group_size else m for m in groups]
            values["members"] = members
            lay = self._layout(d)
            if not groups:
                values["group_params"] = np.zeros((0, lay.n_params), np.float32)
                values["expect"] = FedCRefStatus
                return [FedCRefGroupModels(params=values["group_params"], n_features=d)] * len(uploads), values, False
            params = np.stack([_ae.glorot_init(lay, rng) for _ in groups])
            values.update(group_params=params, fl_round=1, task_clients=clients, expect=FedCRefTrainUpdate)
            return self._train_tasks(values, 1, params, clients, d), values, False
        if kind is FedCRefTrainUpdate:
            values["phases"] = values["phases"] + ["fedavg"]
            params = np.array(values["group_params"])
            num = np.zeros(params.shape, np.float64)
            den = np.zeros(params.shape[0], np.float64)
            sent = {c: t for c, t in zip(values["task_clients"], self._train_tasks(
                values, values["fl_round"], params, values["task_clients"], d))}
            for u in uploads:
                task = sent[u.client]  # each update answers its task (_check_round_upload)
                for t, g in enumerate(task.groups):
                    num[g] += float(u.counts[t]) * u.params[t].astype(np.float64)
                    den[g] += float(u.counts[t])
            ok = den > 0
            params[ok] = (num[ok] / den[ok, None]).astype(np.float32)
            values["group_params"] = params
            if values["fl_round"] < self.fl_rounds:
                values["fl_round"] = values["fl_round"] + 1
                values["task_clients"] = clients
                return self._train_tasks(values, values["fl_round"], params, clients, d), values, False
            values["expect"] = FedCRefStatus
            return [FedCRefGroupModels(params=params, n_features=d)] * len(uploads), values, False
        if kind is FedCRefStatus:
            values["phases"] = values["phases"] + ["refinement"]
            h = values["history"][-1]
            h.update(n_active=sum(not u.stable for u in uploads), n_refined=sum(not u.frozen for u in uploads),
                     n_frozen=sum(u.frozen for u in uploads))
            it = int(values["iteration"])
            mean_ref = float(np.mean([u.n_refine for u in uploads]))
            done = (all(u.stable for u in uploads)
                    or (plateau(values["hist_G"], self.tol_G, self.plateau_window)
                        and plateau(values["hist_I"], self.tol_I, self.plateau_window))
                    or (self.max_mean_refinements is not None and mean_ref >= self.max_mean_refinements)
                    or it >= self.max_iter)
            if done:
                ng = len(values["groups"])
                cg = values["cluster_global"]
                out = [FedCRefFinal(cluster_global=cg[c], n_groups=ng, n_features=d) for c in clients]
                return out, values, True
            values["iteration"] = it + 1
            values["expect"] = FedCRefModels
            return [FedCRefProceed(iteration=it + 1, n_features=d)] * len(uploads), values, False
        if kind is FedCRefModels:
            values["phases"] = values["phases"] + ["local_training"]
            cache = dict(values["cache"])
            for u in uploads:
                if u.changed:
                    cache[u.client] = (np.asarray(u.params), np.asarray(u.clusters), np.asarray(u.sizes),
                                       int(values["iteration"]))
            values["cache"] = cache
            values["expect"] = FedCRefScores
            ms = self._model_set({c: cache[c] for c in clients}, d)
            values["model_set"] = ms
            return [ms] * len(uploads), values, False
        raise MessageError(f"FedCRef's server does not handle {kind.__name__} uploads")  # pragma: no cover

    def _check_loaded(self) -> None:
        """What the fitted attributes promise each other, checked after :func:`fastfc.load` (what
        :func:`fedcref_scores` and a reader of the attributes index with): one entry per client in every
        per-client list, per-client partitions of the client's rows within its K_i, ``labels_`` the
        clients' labels stacked, edges between existing clusters of two clients, one group model per
        discovered distribution."""
        super()._check_loaded()
        K = getattr(self, "n_local_clusters_", None)
        if not isinstance(K, np.ndarray) or K.ndim != 1 or K.dtype.kind not in "iu" or not K.size or K.min() < 1:
            raise ValueError("n_local_clusters_ must be a non-empty 1-D array of integers >= 1")
        n_clients = K.shape[0]
        rows = None
        for name in ("client_labels_", "local_labels_", "init_local_labels_", "_assoc_labels"):
            value = getattr(self, name, None)
            if not isinstance(value, list) or len(value) != n_clients or not all(
                    isinstance(a, np.ndarray) and a.ndim == 1 and a.dtype.kind in "iu" for a in value):
                raise ValueError(f"{name} must be a list of {n_clients} 1-D integer arrays (one per client)")
            sizes = [a.shape[0] for a in value]
            if rows is not None and sizes != rows:
                raise ValueError(f"{name} has {sizes} rows per client, client_labels_ has {rows}")
            rows = sizes
            if name != "client_labels_" and any(a.size and (a.min() < 0 or a.max() >= k) for a, k in zip(value, K)):
                raise ValueError(f"{name} must hold local clusters in 0..K_i - 1 of each client")
        if self.labels_.shape[0] != sum(rows):
            raise ValueError(f"labels_ has {self.labels_.shape[0]} rows, the clients {sum(rows)}")
        edges = getattr(self, "edges_", None)
        if not isinstance(edges, np.ndarray) or edges.ndim != 2 or edges.shape[1] != 4 or edges.dtype.kind not in "iu":
            raise ValueError("edges_ must be an integer array of shape (n_edges, 4)")
        for c, q in ((0, 1), (2, 3)):
            if edges.size and (edges[:, c].min() < 0 or edges[:, c].max() >= n_clients or edges[:, q].min() < 0
                               or (edges[:, q] >= K[edges[:, c]]).any()):
                raise ValueError("edges_ must join existing local clusters (client, cluster) of the fit's clients")
        n_dist = getattr(self, "n_distributions_", None)
        if not isinstance(n_dist, int) or isinstance(n_dist, bool) or n_dist < 0:
            raise ValueError(f"n_distributions_ must be an integer >= 0, got {n_dist!r}")
        models = getattr(self, "group_models_", None)
        if not isinstance(models, np.ndarray) or models.ndim != 2 or models.dtype.kind != "f" or \
                models.shape[0] != n_dist or not np.isfinite(models).all():
            raise ValueError(f"group_models_ must be a finite float array with one row per distribution ({n_dist})")

    def predict(self, X):
        """Not available: FedCRef keeps no global centres to label new rows with.

        Its labels are those of the clients' own rows (``labels_``, ``client_labels_``),
        from the per-cluster models each client keeps.

        Raises
        ------
        NotImplementedError
            Always.
        """
        raise NotImplementedError("FedCRef keeps no global centres, so it has no predict for new rows: its labels "
                                  "are those of the clients' own rows (labels_, client_labels_)")

    # ------------------------------------------------------------- fitted attributes
    def _set_model_attributes(self, model) -> None:
        pass

    def _set_client_attributes(self, states, replies) -> None:
        self.local_labels_ = [np.asarray(s["labels"]).astype(np.int32) for s in states]
        self.init_local_labels_ = [np.asarray(s["init_labels"]).astype(np.int32) for s in states]
        self._assoc_labels = [np.asarray(s["assoc_labels"]).astype(np.int32) for s in states]
        self.n_local_clusters_ = np.array([int(s["K"]) for s in states], dtype=np.int64)
        self.error_evals_ = {f"{name}_{what}": int(sum(int(s[f"{key}_{what}"]) for s in states))
                             for key, name in (("ce", "cross_eval"), ("rf", "refine"))
                             for what in ("computed", "reused")}

    def _set_rounds_attributes(self, server_state) -> None:
        v = server_state.values
        self.n_distributions_ = len(v.get("groups", []))
        self.n_clusters_ = self.n_distributions_ + len(v.get("singles", []))
        self.group_models_ = np.array(v.get("group_params", np.zeros((0, 0), np.float32)))
        cg = v.get("cluster_global", {})
        self.cluster_global_ = [np.array(cg[c]) for c in sorted(cg)]
        self.edges_ = np.array(v.get("edges", []), dtype=np.int64).reshape(-1, 4)
        self.isolated_clusters_ = np.array([r[:3] for r in v.get("isolated", [])], dtype=np.int64).reshape(-1, 3)
        self.isolated_scores_ = np.array([r[3] for r in v.get("isolated", [])], dtype=np.float64)
        self.association_thresholds_ = np.array(v.get("thresholds", []), dtype=np.float64)
        self.association_threshold_ = (float(self.association_thresholds_[-1]) if self.association_thresholds_.size
                                       else float(np.nan))
        keys = ("n_groups", "n_isolated", "n_edges", "n_active", "n_refined", "n_frozen")
        self.history_ = {k: np.array([h.get(k, -1) for h in v["history"]], dtype=np.int64) for k in keys}
        self.n_iter_ = len(v["history"])
        phases = v["phases"]
        secs = getattr(self, "round_seconds_", np.zeros(len(phases)))
        self.phase_seconds_ = {p: float(sum(s for s, q in zip(secs, phases) if q == p))
                               for p in ("local_training", "association", "fedavg", "refinement")}


    def _check_rounds_result(self, client_labels) -> None:
        """Warn when the last graph left clusters without a partner whose rows keep client-specific ids."""
        n_iso = self.isolated_clusters_.shape[0]
        n_clients = len(self.cluster_global_)
        if n_iso == 0 or n_clients < 2:
            return
        n_all = sum(int(c.shape[0]) for c in self.cluster_global_)
        if client_labels is not None:
            n_rows = int(sum(int(np.count_nonzero(np.asarray(lab) >= self.n_distributions_)) for lab in client_labels))
            if n_rows == 0:  # every row of the isolated clusters went to a group model in the refinement
                return
            split = (f"{n_rows} of {sum(len(lab) for lab in client_labels)} rows carry a global id that only their "
                     "own client uses, so labels_ splits them by client")
        else:
            split = "the rows that a client's own model explains in them carry a global id only that client uses"
        small = int(np.sum(self.isolated_clusters_[:, 2] < self.min_assoc_size))
        scored = self.isolated_scores_[np.isfinite(self.isolated_scores_)]
        used = self.association_threshold_
        if self.association == "ratio":
            if self.ratio_threshold == "auto":
                test = f"ratio_threshold='auto' (= {used:.3g} here; median error ratio)"
                knob = f"set ratio_threshold above {used:.3g}"
            else:
                test, knob = f"ratio_threshold={used:g} (median error ratio)", "raise ratio_threshold"
        else:
            test, knob = f"theta={self.theta:g} (the paper's test)", "raise theta"
        msg = (f"FedCRef: {n_iso} of {n_all} local clusters found no partner in another client, and {split} "
               f"(n_distributions_={self.n_distributions_}, n_clusters_={self.n_clusters_}).")
        if scored.size:
            msg += (f" The closest of them to a cluster of another client scored {scored.min():.3g} against "
                    f"{test}: a cluster unique to its client is rightly alone, but if these share a distribution "
                    f"with another client's cluster, {knob} or train the autoencoders longer (isolated_scores_ "
                    "lists each one's closest score).")
        passed = int(np.sum(scored <= used)) if self.oracle_labels is None else 0
        if passed and self.match_policy != "all":
            msg += (f" {passed} of them passed the test with a cluster of another client and still got no edge: "
                    f"match_policy={self.match_policy!r} links each cluster to one partner per other client, so "
                    "a second cluster of one client that matches the same partner stays alone "
                    "(match_policy='all' links every passing pair).")
        if small:
            msg += f" {small} of them had fewer than min_assoc_size={self.min_assoc_size} rows and were not tested."
        warn_caller(msg, UnlinkedClustersWarning)


# ----------------------------------------------------------------------------- evaluation
def _matched_classes(y: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """True class Hungarian-matched to each local cluster (-1 - q for an unmatched cluster q)."""
    classes, yi = np.unique(y, return_inverse=True)
    C = np.zeros((k, classes.size), np.int64)
    np.add.at(C, (labels, yi), 1)
    r, c = linear_sum_assignment(C, maximize=True)
    out = -1 - np.arange(k, dtype=np.int64)
    out[r] = classes[c]
    return out


def fedcref_perfect_baseline(X_clients, y_clients, **params) -> FedCRef:
    """The paper's perfect-association baseline (**experiments only**: it needs the true classes).

    FedCRef with the association graph replaced by the oracle graph: two clusters of different
    clients are linked iff the true classes Hungarian-matched to them are equal (spec §6.2,
    reference code ``use_perfect``). Local training, FedAvg, refinement and stopping run
    unchanged, through the same protocol rounds (``FedCRef(oracle_labels=y_clients)``).

    Parameters
    ----------
    X_clients : list of ndarray of shape (n_i, n_features)
    y_clients : list of array-like of shape (n_i,)
        True classes of each client's rows.
    **params
        Any other :class:`FedCRef` parameter (``init_labels``, ``theta``, ...).

    Returns
    -------
    est : FedCRef
        Fitted; score it with :func:`fedcref_scores` like FedCRef itself.
    """
    if "oracle_labels" in params:
        raise TypeError("fedcref_perfect_baseline sets oracle_labels from y_clients")
    return FedCRef(oracle_labels=[np.asarray(y) for y in y_clients], **params).fit_clients(X_clients)


def fedcref_scores(est: FedCRef, y_clients) -> dict:
    """Label-based diagnostics of a fitted FedCRef (spec §6.2; evaluation only).

    Parameters
    ----------
    est : FedCRef
        Fitted with :meth:`~FedCRef.fit_clients` (or ``fit``).
    y_clients : list of array-like
        True classes of each client's rows (client order).

    Returns
    -------
    scores : dict
        ``acc_init`` / ``acc_end``: mean over clients of the Hungarian ACC of the initial / final
        local partition; ``wrong_association_rate``: share of the last graph's edges whose two
        clusters are Hungarian-matched to different classes (NaN without edges);
        ``n_edges``; ``n_groups``; ``n_isolated``; ``ideal_groups``: classes held by >= 2 clients.
    """
    from .metrics import clustering_accuracy

    check_is_fitted(est, "local_labels_")
    y_clients = [np.asarray(y) for y in y_clients]
    if len(y_clients) != len(est.local_labels_):
        raise ValueError(f"y_clients has {len(y_clients)} clients, the fit had {len(est.local_labels_)}")
    acc_init = [clustering_accuracy(y, lab) for y, lab in zip(y_clients, est.init_local_labels_)]
    acc_end = [clustering_accuracy(y, lab) for y, lab in zip(y_clients, est.local_labels_)]
    matched = [_matched_classes(y, lab, int(k))
               for y, lab, k in zip(y_clients, est._assoc_labels, est.n_local_clusters_)]
    wrong = [matched[i][q] != matched[j][p] for i, q, j, p in est.edges_]
    holders: dict = {}
    for i, y in enumerate(y_clients):
        for c in np.unique(y):
            holders[c] = holders.get(c, 0) + 1
    return {
        "acc_init": float(np.mean(acc_init)), "acc_end": float(np.mean(acc_end)),
        "wrong_association_rate": float(np.mean(wrong)) if wrong else float("nan"),
        "n_edges": int(len(est.edges_)), "n_groups": int(est.n_distributions_),
        "n_isolated": int(est.history_["n_isolated"][-1]) if est.n_iter_ else 0,
        "ideal_groups": int(sum(v >= 2 for v in holders.values())),
    }
