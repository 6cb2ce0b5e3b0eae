"""Fed-HIRE: one-shot hierarchical federated clustering (Cai et al.).

Client phase (FCPL): competitive penalized learning (CPL) from many candidate
clusters prunes itself to a few compact *clusterlets*; the client uploads
their centroids once. Server phase (MCPL + weighted k-modes): CPL is
restarted level after level over the stacked centroids, giving a
multi-granular hierarchy; each centroid's labels over the levels form a
categorical row, and a weighted k-modes on those rows gives every clusterlet
one of ``n_clusters`` global labels. Each client receives the global label
(and the granular labels) of its own clusterlets and labels its rows through
their clusterlet.

Robust default (``semantics="robust"``) on top of the published algorithm: clients
run CPL on rows standardised with their own statistics and the server standardises
the uploaded centroids (unit-free, still one shot), and the last step adds a Ward
linkage level with exactly ``n_clusters`` groups from which the weighted k-modes
starts (:func:`linkage_fusion`). ``semantics="reference"`` keeps the authors'
behaviour for parity studies.

Specs: ``shared/specs/fed_hire.md`` (per-sample semantics checked against the
authors' code) and ``shared/specs/gold.md`` (GOLD, :mod:`fastfc.gold`).
The numeric engine is :mod:`fastfc._cpl` on the Numba kernels of
:mod:`fastfc._kernels._cpl`.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ._cpl import candidate_count, cpl, mcpl, weighted_kmodes
from ._grouping import DUPLICATE_HINT, near_duplicate_groups, variance_split_groups, ward_cut
from ._limits import MAX_ABS_MEAN
from ._state import ClientState
from ._units import fill_empty_array, standardize_rows
from ._warnings import warn_caller
from .base import BaseFederatedClusterer
from .protocol import ArraySpec, CentersSummary, Message, MessageError

__all__ = [
    "FedHIRE",
    "FedHIRESummary",
    "FedHIREModel",
    "FedHIREReply",
    "KModesInitError",
    "DegenerateFederationWarning",
    "DEFAULT_MAX_CANDIDATES",
    "DEFAULT_CANDIDATE_BUDGET",
    "auto_candidate_cap",
    "DEFAULT_SERVER_MAX_CANDIDATES",
    "fcpl_client",
    "server_hierarchy",
    "standardize_rows",
    "linkage_fusion",
]

#: Default caps on the initial CPL candidates in robust mode, of a client and of the
#: server's first hierarchy level (see :class:`FedHIRE`, ``max_candidates`` and
#: ``server_max_candidates``). A client's cap is ``max(DEFAULT_MAX_CANDIDATES,
#: DEFAULT_CANDIDATE_BUDGET // n_l)``: a first CPL pass of at most 2**20 sample-candidate
#: distance evaluations, or 384 candidates, whichever allows more.
DEFAULT_MAX_CANDIDATES = 384
DEFAULT_CANDIDATE_BUDGET = 1 << 20
DEFAULT_SERVER_MAX_CANDIDATES = 256


def auto_candidate_cap(n_samples: int) -> int:
    """The robust default cap on a client's CPL candidates for ``n_samples`` rows.

    ``max(384, 2**20 // n_samples)``: clients of up to 1448 rows keep the published
    ``round(0.5 n)`` candidates; larger clients get at least 384, and the first pass costs
    at most ``max(2**20, 384 n)`` distance evaluations, linear in ``n`` for large clients.
    """
    return max(DEFAULT_MAX_CANDIDATES, DEFAULT_CANDIDATE_BUDGET // max(int(n_samples), 1))


# ----------------------------------------------------------------- messages
@dataclass(frozen=True, eq=False)
class FedHIRESummary(CentersSummary):
    """What a Fed-HIRE/GOLD client uploads: its clusterlet centroids, nothing else.

    Attributes
    ----------
    centers : ndarray of shape (n_clusterlets, n_features)
    n_features : int
    """

    METHOD = "fedhire"
    KIND = "summary"


@dataclass(frozen=True, eq=False)
class FedHIREModel(Message):
    """The server's result.

    Attributes
    ----------
    centers : ndarray of shape (``n_clusters_``, n_features)
        Global centroids: unweighted mean of the clusterlet centroids of each
        non-empty global cluster.
    clusterlet_labels : ndarray of shape (n_s,), int64
        Global cluster of every uploaded centroid (clients stacked in order).
    granular_labels : ndarray of shape (n_s, n_levels), int64
        Label of every uploaded centroid at every hierarchy level, fine to coarse.
    level_sizes : ndarray of shape (n_levels,), int64
        Cluster count of each level (strictly decreasing).
    n_features : int
    n_retries : int
        Server restarts after a failed k-modes initialisation.
    predict_weight : ndarray of shape (n_features,) or (0,)
        Per-feature distance weights of the units the server merged in (``1 / scale`` of its
        standardisation of the uploaded centroids), so that ``predict`` measures distances as the
        fit did; empty: raw units (``standardize=False``).
    """

    METHOD = "fedhire"
    KIND = "model"
    ARRAYS = {
        "centers": ArraySpec("f", 2, max_abs=MAX_ABS_MEAN),
        "clusterlet_labels": ArraySpec("i", 1, min_value=0),
        "granular_labels": ArraySpec("i", 2, min_value=0),
        "level_sizes": ArraySpec("i", 1, min_value=1),
        "predict_weight": ArraySpec("f", 1, min_value=0.0),
    }
    centers: np.ndarray
    clusterlet_labels: np.ndarray
    granular_labels: np.ndarray
    level_sizes: np.ndarray
    n_features: int
    n_retries: int
    predict_weight: np.ndarray | None = None

    def __post_init__(self) -> None:
        fill_empty_array(self, "predict_weight", (0,))
        super().__post_init__()

    def _check_consistency(self) -> None:
        k = self._check_centers()
        n_s = self.clusterlet_labels.shape[0]
        if self.granular_labels.shape != (n_s, self.level_sizes.shape[0]):
            self._fail(
                f"granular_labels shape {self.granular_labels.shape} does not match "
                f"({n_s} clusterlets, {self.level_sizes.shape[0]} levels)"
            )
        if n_s and self.clusterlet_labels.max() >= k:
            self._fail("clusterlet_labels refer to a global cluster that does not exist")
        if self.level_sizes.size and (
            (self.granular_labels.max(axis=0) >= self.level_sizes).any() if n_s else False
        ):
            self._fail("granular_labels exceed their level's cluster count")


@dataclass(frozen=True, eq=False)
class FedHIREReply(Message):
    """What the server sends back to one client.

    Attributes
    ----------
    labels : ndarray of shape (n_clusterlets,), int64
        Global cluster of each of this client's clusterlets.
    granular_labels : ndarray of shape (n_clusterlets, n_levels), int64
        Hierarchy labels of each of this client's clusterlets.
    centers : ndarray of shape (``n_clusters_``, n_features)
        Global centroids (for labelling new rows).
    n_features : int
    """

    METHOD = "fedhire"
    KIND = "reply"
    ARRAYS = {
        "labels": ArraySpec("i", 1, min_value=0),
        "granular_labels": ArraySpec("i", 2, min_value=0),
        "centers": ArraySpec("f", 2, max_abs=MAX_ABS_MEAN),
    }
    labels: np.ndarray
    granular_labels: np.ndarray
    centers: np.ndarray
    n_features: int

    def _check_consistency(self) -> None:
        self._check_centers()
        if self.granular_labels.shape[0] != self.labels.shape[0]:
            self._fail(
                f"granular_labels has {self.granular_labels.shape[0]} rows for {self.labels.shape[0]} clusterlets"
            )
        if self.labels.size and self.labels.max() >= self.centers.shape[0]:
            self._fail("labels refer to a global cluster that does not exist")


# ------------------------------------------------------------ client phase
def fcpl_client(
    X: np.ndarray,
    rng: np.random.Generator,
    *,
    ratio: float = 0.5,
    max_candidates: int | None = None,
    eta: float = 0.05,
    max_passes: int = 31,
    semantics: str = "robust",
    standardize: bool = False,
    n_threads: int = 1,
    objective: bool = True,
):
    """FCPL on one client: CPL from ``min(round(ratio * n), max_candidates)`` candidates.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The client's validated rows.
    rng : numpy.random.Generator
        Draws the candidate seeds (distinct rows, uniformly).
    ratio, max_candidates, eta, max_passes, semantics
        See :class:`FedHIRE`.
    standardize : bool, default=False
        Run CPL on the rows standardised with this client's own statistics
        (:func:`standardize_rows`, local scale ``_CLIENT_BANDWIDTH``) and map the
        centroids back to the original units, so the clusterlets do not depend on
        the units of any feature.
    n_threads : int, default=1
        Threads of the CPL kernels (results do not depend on it).
    objective : bool, default=True
        Compute the CPL objective of the result (:func:`fastfc._cpl.cpl`); the estimators'
        client phase does not use it and passes ``False`` (NaN).

    Returns
    -------
    result : fastfc._cpl.CPLResult
        ``centers`` (n_clusterlets, n_features, original units) and local ``labels``
        (n_samples,).
    """
    n = X.shape[0]
    if n == 1:
        warn_caller(
            "a client holds a single row: its upload is that row itself, and the server clusters it "
            "as one point",
            DegenerateFederationWarning,
        )
    k = candidate_count(ratio, n)
    if max_candidates is not None:
        k = min(k, int(max_candidates))
    robust = semantics == "robust"
    if robust:
        k = max(k, min(n, _MIN_CANDIDATES))
    seeds = rng.permutation(n)[:k] if k > 1 else np.zeros(1, dtype=np.int64)
    if not standardize:
        return cpl(X, k, eta=eta, max_passes=max_passes, seeds=seeds, semantics=semantics, keep_singletons=robust and n < _KEEP_SINGLETONS_BELOW,
                   n_threads=n_threads, objective=objective)
    Xs, mean, scale = standardize_rows(X, _CLIENT_BANDWIDTH, n_jobs=n_threads)
    res = cpl(Xs, k, eta=eta, max_passes=max_passes, seeds=seeds, semantics=semantics, keep_singletons=robust and n < _KEEP_SINGLETONS_BELOW,
              n_threads=n_threads, objective=objective)
    return res._replace(centers=np.ascontiguousarray(res.centers * scale + mean))


#: Kernel bandwidth of the client's CPL in units of the client's own per-feature standard
#: deviation (``standardize``). CPL scores with a unit-bandwidth Gaussian kernel, so its result
#: depends on the units of the data; on rows standardised and divided by this it does not.
#: Evidence (robust default otherwise, sanity grid seed 0 / ten published splits seeds 0-9,
#: mean ARI minus the authors'): 1.0 lets clients merge nearby clusters (K=20: 0.842, d=2:
#: 0.914, clients' clusterlet purity 0.84-0.93); 0.3: 30 of 30 sanity cells, splits mean
#: +0.052, worst CA -0.019; 0.1: splits YE -0.050, WI -0.045 (more, smaller clusterlets).
_CLIENT_BANDWIDTH = 0.3
#: the same for the server's MCPL, in units of the standard deviation of the uploaded centroids
_SERVER_BANDWIDTH = 1.0
#: Robust client rule: at least ``min(n_l, 16)`` CPL candidates. With ``round(0.5 n_l)``, a
#: 20-row client holding 5 classes often seeds no candidate in some class, whose rows then join
#: another class (sanity K5 100 clients x 20 rows: 0.973 -> 1.000).
_MIN_CANDIDATES = 16
#: Robust client rule: clients of fewer rows keep one-member CPL candidates (``keep_singletons``),
#: so a class with one or two rows in a small client is not pushed into another class's
#: clusterlet (sanity 100 clients x 20 rows: 0.886 -> 1.000; Dirichlet 100 x 100: 0.984 ->
#: 1.000). Larger clients keep the published rule: kept there too, pendigits (10 clients of
#: 1100 rows) uploads 5217 instead of 2704 centroids and fits in 6.9 s instead of 2.2 s, with
#: the ten published splits unchanged on average (mean ARI minus the authors' +0.052 / +0.056).
_KEEP_SINGLETONS_BELOW = 128


# ------------------------------------------------------------ server phase
class KModesInitError(ValueError):
    """The multi-granular label matrix has fewer distinct rows than ``n_clusters``."""


class DegenerateFederationWarning(UserWarning):
    """The uploads cannot support the requested clustering as asked (identical rows, ...)."""


def linkage_fusion(C: np.ndarray, n_clusters: int) -> np.ndarray:
    """Robust last level: Ward linkage of the uploaded centroids down to ``n_clusters`` groups.

    Parameters
    ----------
    C : ndarray of shape (n_s, n_features)
        Standardised clusterlet centroids, at least ``n_clusters`` distinct rows.
    n_clusters : int
        ``k*``.

    Returns
    -------
    labels : ndarray of shape (n_s,), int64
        A partition of the centroids into exactly ``n_clusters`` groups.

    Notes
    -----
    The hierarchy levels are independent CPL runs: they need not be nested and need not
    pass through ``n_clusters`` groups. On well-separated data the fine levels are pure but
    the hierarchy often stops above ``n_clusters`` (no level merges two pure groups of one
    cluster) or jumps below it (a level merges two clusters), and a k-modes over label codes
    cannot merge pure groups that share no code: the missing information is geometric.
    Ward linkage on the (standardised) centroids supplies it. Above 4096 centroids the
    ``O(n_s^2)`` linkage runs on the means of at most 4096 compact groups of the centroids
    (recursive variance splits, :func:`fastfc._grouping.variance_split_groups`; a
    ``KMeans(4096)`` pre-grouping before, whose k-means++ seeding alone took about 10 s of
    the 20 s CPU of a 1000-client fit of 2 10^5 rows).
    """
    n_s = C.shape[0]
    if n_clusters >= n_s or n_clusters <= 1:
        return np.arange(n_s, dtype=np.int64) if n_clusters >= n_s else np.zeros(n_s, dtype=np.int64)
    if n_s > _LINK_MAX_POINTS:
        base = variance_split_groups(C, None, _LINK_MAX_POINTS)
        m = int(base.max()) + 1
        G = np.zeros((m, C.shape[1]))
        np.add.at(G, base, C)
        G /= np.bincount(base, minlength=m)[:, None]
    else:
        base, G = np.arange(n_s, dtype=np.int64), C
    return ward_cut(G, n_clusters)[base]


def server_hierarchy(
    C: np.ndarray,
    n_clusters: int,
    rng: np.random.Generator,
    *,
    ratio: float = 0.5,
    eta: float = 0.05,
    max_passes: int = 31,
    kmodes_max_iter: int = 31,
    semantics: str = "robust",
    tol: float | None = None,
    max_stages: int = 50,
    max_candidates: int | None = None,
    fusion: str = "kmodes",
):
    """MCPL hierarchy then weighted k-modes on the stacked centroids (one attempt).

    Parameters
    ----------
    C : ndarray of shape (n_s, n_features)
        Stacked clusterlet centroids, clients in order.
    n_clusters : int
        ``k*``.
    rng : numpy.random.Generator
        Draws each stage's seeds, then the k-modes initial modes.
    ratio, eta, max_passes, kmodes_max_iter, semantics
        See :class:`FedHIRE`.
    tol, max_stages
        GOLD's MCPL objective tolerance (``None`` = Fed-HIRE's rule).
    max_candidates : int or None
        Cap on the first level's candidates.
    fusion : {"kmodes", "linkage"}, default="kmodes"
        ``"kmodes"``: the published last step, weighted k-modes on the levels from
        ``k*`` distinct label rows drawn at random. ``"linkage"``: the levels with at
        least ``k*`` groups plus the :func:`linkage_fusion` level with exactly ``k*``
        groups, and the weighted k-modes starts from that level's groups (see
        :class:`FedHIRE`, ``fusion``).

    Returns
    -------
    labels : ndarray of shape (n_s,), int64
        Global cluster (``0..n_clusters-1``, some may be empty) of each centroid.
    Z : ndarray of shape (n_s, n_levels), int64
        Multi-granular label matrix.

    Raises
    ------
    KModesInitError
        When ``Z`` has fewer distinct rows than ``n_clusters``.
    """
    levels = mcpl(
        C, server_ratio=ratio, eta=eta, max_passes=max_passes, semantics=semantics, tol=tol,
        max_stages=max_stages, max_candidates=max_candidates, draw_seeds=lambda n, k: rng.permutation(n)[:k],
    )
    Z = np.ascontiguousarray(np.column_stack(levels).astype(np.int64))
    if fusion == "linkage":
        return _linkage_kmodes(C, levels, n_clusters, kmodes_max_iter), Z
    n_unique = np.unique(Z, axis=0).shape[0]
    if n_unique < n_clusters:
        raise KModesInitError(
            f"the {len(levels)}-level hierarchy over {C.shape[0]} centroids has {n_unique} distinct label rows, "
            f"fewer than n_clusters={n_clusters}"
        )
    seed_rows = rng.choice(n_unique, n_clusters, replace=False)
    labels = weighted_kmodes(Z, n_clusters, seed_rows=seed_rows, max_iter=kmodes_max_iter)
    return labels, Z


#: above this many uploaded centroids the Ward linkage runs on k-means groups of them
_LINK_MAX_POINTS = 4096


def _server_view(C: np.ndarray, standardize: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The centroids as the server's MCPL sees them: standardised by their own spread (robust),
    and the per-feature distance weights of those units (``1 / scale``; None: raw units)."""
    if not standardize:
        return C, None
    Cs, _, scale = standardize_rows(C, _SERVER_BANDWIDTH)
    const = np.flatnonzero(np.ptp(C, axis=0) == 0)
    if const.size and const.size < C.shape[1]:
        warn_caller(
            f"feature(s) {const[:10].tolist()}{' ...' if const.size > 10 else ''} take one value in every "
            "client's upload: they carry no information and are ignored",
            DegenerateFederationWarning,
        )
    return Cs, 1.0 / scale


def _has_distinct_rows(C: np.ndarray, k: int) -> bool:
    """Whether ``C`` has at least ``k`` distinct rows (``np.unique(C, axis=0)``'s count ``>= k``).

    Decided on a leading block of rows first (its distinct rows are distinct rows of ``C``), which
    grows only while it falls short: with many uploads one small ``unique`` instead of a sort of
    every centroid.
    """
    n = C.shape[0]
    m = min(n, max(256, 8 * k))
    while True:
        if np.unique(C[:m], axis=0).shape[0] >= k:
            return True
        if m == n:
            return False
        m = min(n, 8 * m)


def _degenerate_fusion(C: np.ndarray, n_clusters: int, near: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """One global cluster per distinct uploaded centroid, with a warning (fewer than ``k*``); ``near``: ``C``
    holds one representative of each group of near-duplicate uploads, and the warning says so."""
    U, inv = np.unique(C, axis=0, return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64)
    if near:
        what = (f"the clients' uploads are {'one point' if U.shape[0] == 1 else f'only {U.shape[0]} points'} "
                f"({DUPLICATE_HINT})")
    else:
        what = ("all rows of all clients are identical" if U.shape[0] == 1
                else f"the clients' uploads hold only {U.shape[0]} distinct points")
    warn_caller(
        f"{what}: returning {U.shape[0]} cluster(s) instead of "
        f"n_clusters={n_clusters} (no clustering structure to split further)",
        DegenerateFederationWarning,
    )
    return inv, inv[:, None].copy()


def _linkage_kmodes(C, levels: list[np.ndarray], n_clusters: int, max_iter: int) -> np.ndarray:
    """Weighted k-modes on the levels with ``> n_clusters`` groups plus the linkage level,
    started from the linkage level's groups (each group's most frequent label row)."""
    top = linkage_fusion(C, n_clusters)
    kept = [lv for lv in levels if int(lv.max()) + 1 > n_clusters]
    Z = np.ascontiguousarray(np.column_stack(kept + [top]).astype(np.int64))
    U, inv = np.unique(Z, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    seed_rows = np.array([np.bincount(inv[top == g]).argmax() for g in range(n_clusters)], dtype=np.int64)
    return weighted_kmodes(Z, n_clusters, seed_rows=seed_rows, max_iter=max_iter)


# -------------------------------------------------------------- estimator
class FedHIRE(BaseFederatedClusterer):
    """Fed-HIRE: one-shot hierarchical federated clustering (Cai et al.).

    Parameters
    ----------
    n_clusters : int, default=8
        Number of global clusters ``k*`` (the last, k-modes, stage). Clients
        and the hierarchy choose their own counts.
    eta : float, default=0.05
        CPL learning rate (reward and rival penalty), clients and server.
    client_ratio : float, default=0.5
        A client starts CPL from ``round(client_ratio * n_l)`` candidates.
    server_ratio : float, default=0.5
        The first hierarchy level starts from ``round(server_ratio * n_s)``
        candidates (``n_s`` = number of uploaded centroids).
    max_candidates : int, None or "auto", default="auto"
        Cap on a client's initial CPL candidates. The first CPL pass costs
        O(n_l k d), so without a cap the client phase is quadratic in the
        client size. ``"auto"``: in robust semantics a work budget,
        ``max(384, 2**20 // n_l)`` (:func:`auto_candidate_cap`): clients of
        up to 1448 rows keep the published ``round(0.5 n_l)`` candidates, a
        larger client gets at least 384 and its first pass at most
        ``max(2**20, 384 n_l)`` distance evaluations, so the client phase is
        linear in ``n_l`` for large clients. No cap in reference semantics.
        ``None``: no cap. Evidence from the published splits (mean ARI minus
        the authors'): a flat cap of 384 cost PE -0.052 on seeds 0-9 (-0.017
        on the held-out seeds 100-139; caps 512 and 640: -0.075 and +0.006 on
        seeds 0-9, PE varies by 0.04-0.13 over seeds), while PE's clients (at
        most 1359 rows) uncapped give +0.047 (seeds 0-9) and -0.002 (100-139). With the budget rule, which
        caps only the largest clients of LA and LE, all ten splits are within
        0.02 on seeds 0-9, and LE/LA stay at +0.010/+0.022 on seeds 100-139
        (flat 384: +0.010/+0.035). 100 000 rows over 10 clients (10 000 rows
        each, 384 candidates) fit in about 2.3 s on 2 cores.
    server_max_candidates : int, None or "auto", default="auto"
        The same cap for the server's first hierarchy level (``round(0.5
        n_s)`` candidates over the ``n_s`` uploaded centroids), which keeps
        the server linear in the number of clients. ``"auto"``: 256 in robust
        semantics (no published split uploads enough centroids to reach it),
        no cap in reference semantics.
    max_passes : int, default=31
        Cap on CPL passes per run (the authors' code stops after 31).
    kmodes_max_iter : int, default=31
        Cap on weighted k-modes iterations.
    semantics : {"robust", "reference"}, default="robust"
        ``"robust"``: the explicit elimination rules of fed_hire.md §3.1.7,
        except that in clients of fewer than 128 rows a candidate with one
        member is kept (it still dies when empty: a small client's only row of
        a class would otherwise join another class's clusterlet), a client
        starts from at least ``min(n_l, 16)`` candidates, and ``standardize``
        and ``fusion`` as above. ``"reference"``: the authors' implicit NaN rules of §3.1.6 made
        explicit, uncapped candidates, raw units, random k-modes start, for
        parity studies (the labels of main's reference mode, unchanged).
    on_init_failure : {"restart", "retry-server", "raise"}, default="restart"
        When the hierarchy has fewer distinct label rows than ``n_clusters``
        the k-modes cannot start. ``"restart"`` reruns the whole one-shot fit
        (clients and server) with fresh randomness, as the authors' driver
        does (in-process runner only; ``n_restarts_`` counts them).
        ``"retry-server"`` reruns only the server phase with fresh
        randomness (for deployments where clients cannot run again).
        ``"raise"`` raises at once.
    max_retries : int, default=20
        Restarts or server retries before giving up with a ValueError.
    standardize : bool or "auto", default="auto"
        Make the fit independent of the units of the data (robust default;
        ``"auto"`` = True in robust, False in reference semantics). CPL scores
        rows with a Gaussian kernel of fixed unit bandwidth, so unstandardised
        it depends on the units (main: ARI 0.00 at scale 1e-6, 0.25 at 10,
        0.34 at 1e6 on the sanity grid). With ``standardize``, still one shot
        and with no extra upload: every client runs CPL on its rows
        standardised with its *own* per-feature mean and standard deviation
        (bandwidth 0.3 local standard deviations) and uploads its centroids
        mapped back to the original units; the server standardises the
        stacked centroids with their own per-feature mean and standard
        deviation before the hierarchy and the last step. Both are affine per
        feature, so rescaling or shifting any feature leaves the labels
        unchanged. A feature constant in a client (or in every upload) keeps
        scale 1 there; one constant in every upload is reported by a
        :class:`DegenerateFederationWarning`.
    fusion : {"auto", "linkage", "kmodes"}, default="auto"
        The last step, which turns the hierarchy into ``n_clusters`` global
        clusters (``"auto"`` = ``"linkage"`` in robust, ``"kmodes"`` in
        reference semantics). ``"kmodes"``: the published weighted k-modes on
        the hierarchy codes from ``n_clusters`` distinct code rows drawn at
        random. ``"linkage"``: Ward linkage on the (standardised) centroids
        cut at ``n_clusters`` groups is added as a last hierarchy level, the
        levels coarser than ``n_clusters`` are left out, and the weighted
        k-modes starts from the linkage groups. On well-separated clusters
        the hierarchy's fine levels are pure but it often stops above
        ``n_clusters`` or jumps below it, and a k-modes over codes cannot
        merge pure groups that share no code; see :func:`linkage_fusion`.
        Fewer distinct centroids than ``n_clusters`` (e.g. identical rows):
        one cluster per distinct centroid and a
        :class:`DegenerateFederationWarning`.
    random_state : int, RandomState instance or None, default=None
        Seeds every client's and the server's random stream.
        ``fit``/``fit_clients`` draw from it once per fit (a ``Generator`` is
        rejected, as in scikit-learn); the phase API (``client_summarize``,
        ``server_aggregate``) needs an int, the same for every party.
    n_jobs : int or None, default=None
        Threads over clients. Labels do not depend on it.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,), dtype=int32
        Global cluster of every row (input order for ``fit``, client order
        for ``fit_clients``); clusters are numbered ``0..n_clusters_-1``.
    client_labels_ : list of ndarray of shape (n_samples_l,)
    client_granular_labels_ : list of ndarray of shape (n_samples_l, n_levels)
        Hierarchy labels of every row, fine to coarse.
    client_n_clusterlets_ : ndarray of shape (n_clients,)
        Clusterlets each client uploaded.
    cluster_centers_ : ndarray of shape (``n_clusters_``, n_features)
        Unweighted mean of the clusterlet centroids of each global cluster.
    n_clusters_ : int
        Non-empty global clusters (``<= n_clusters``).
    level_sizes_ : ndarray of shape (n_levels,)
        Cluster count of each hierarchy level.
    n_retries_ : int
        Server-phase retries (``on_init_failure="retry-server"``).
    n_restarts_ : int
        Whole-run restarts (``on_init_failure="restart"``).
    client_summaries_, global_model_, timings_, n_features_in_
        As in every fastfc estimator.

    Notes
    -----
    Each client uploads ``k_l x d`` floats once and receives ``k_l`` global
    labels, ``k_l x n_levels`` granular labels and the global centroids. Rows
    get the global label of their clusterlet; no row is reassigned after the
    client's CPL. Global labels are renumbered compactly (in increasing order)
    when k-modes leaves a cluster empty, so ``n_clusters_`` can be smaller
    than ``n_clusters``.

    Cost: a client's first CPL pass is O(n_l k d) with ``k`` initial
    candidates; later passes score only live candidates, and the feature
    weights cost O(n_l d + k d) per pass. With the default cap the client
    phase is linear in n_l.

    References
    ----------
    Cai, Yang, Lu, Li, Ji, Zhang, Cheung. One-Shot Hierarchical Federated
    Clustering (Fed-HIRE).

    Examples
    --------
    >>> import numpy as np
    >>> from fastfc import FedHIRE
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(m, 0.3, size=(60, 2)) for m in (0, 4, 8)])
    >>> est = FedHIRE(n_clusters=3, random_state=0).fit_clients([X[::2], X[1::2]])
    >>> est.labels_.shape
    (180,)
    """

    _parameter_constraints: dict = {
        **BaseFederatedClusterer._parameter_constraints,
        "eta": [Interval(Real, 0, None, closed="left")],
        "client_ratio": [Interval(Real, 0, None, closed="neither")],
        "server_ratio": [Interval(Real, 0, None, closed="neither")],
        "max_candidates": [None, StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "server_max_candidates": [None, StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "max_passes": [Interval(Integral, 1, None, closed="left")],
        "kmodes_max_iter": [Interval(Integral, 1, None, closed="left")],
        "semantics": [StrOptions({"robust", "reference"})],
        "on_init_failure": [StrOptions({"restart", "retry-server", "raise"})],
        "max_retries": [Interval(Integral, 0, None, closed="left")],
        "standardize": ["boolean", StrOptions({"auto"})],
        "fusion": [StrOptions({"auto", "kmodes", "linkage"})],
    }
    _summary_cls = FedHIRESummary
    _reply_cls = FedHIREReply
    #: GOLD's MCPL objective tolerance; ``None`` for Fed-HIRE.
    _mcpl_tol: float | None = None
    _mcpl_max_stages: int = 50

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        eta: float = 0.05,
        client_ratio: float = 0.5,
        server_ratio: float = 0.5,
        max_candidates: int | str | None = "auto",
        server_max_candidates: int | str | None = "auto",
        max_passes: int = 31,
        kmodes_max_iter: int = 31,
        semantics: str = "robust",
        on_init_failure: str = "restart",
        max_retries: int = 20,
        standardize: bool | str = "auto",
        fusion: str = "auto",
        refine_rounds: int = 0,
        refine_tol: float = 1e-4,
        refine_n_init: int = 1,
        random_state=None,
        n_jobs: int | None = None,
    ):
        self.n_clusters = n_clusters
        self.eta = eta
        self.client_ratio = client_ratio
        self.server_ratio = server_ratio
        self.max_candidates = max_candidates
        self.server_max_candidates = server_max_candidates
        self.max_passes = max_passes
        self.kmodes_max_iter = kmodes_max_iter
        self.semantics = semantics
        self.on_init_failure = on_init_failure
        self.max_retries = max_retries
        self.standardize = standardize
        self.fusion = fusion
        self.random_state = random_state
        self.refine_rounds = refine_rounds
        self.refine_tol = refine_tol
        self.refine_n_init = refine_n_init
        self.n_jobs = n_jobs

    _restart_on = (KModesInitError,)

    def _relabel_clusterlets(self, C: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Hook after the last step: the global label of every uploaded centroid.

        Fed-HIRE keeps the last step's labels (``C``: the centroids as the server clusters them,
        shape (n_s, n_features); ``labels``: shape (n_s,)). GOLD overrides it.
        """
        return labels

    def _max_restarts(self) -> int:
        return self.max_retries if self.on_init_failure == "restart" else 0

    def _candidate_cap(self, n_samples: int) -> int | None:
        if self.max_candidates == "auto":
            return None if self.semantics == "reference" else auto_candidate_cap(n_samples)
        return self.max_candidates

    def _server_candidate_cap(self) -> int | None:
        if self.server_max_candidates == "auto":
            return None if self.semantics == "reference" else DEFAULT_SERVER_MAX_CANDIDATES
        return self.server_max_candidates

    def _refine_standardize(self) -> bool:
        return self._standardize()

    def _standardize(self) -> bool:
        return self.semantics != "reference" if self.standardize == "auto" else bool(self.standardize)

    def _fusion(self) -> str:
        if self.fusion == "auto":
            return "kmodes" if self.semantics == "reference" else "linkage"
        return self.fusion

    # phases -----------------------------------------------------------------
    def _summarize(self, X: np.ndarray, rng: np.random.Generator, n_threads: int) -> tuple[FedHIRESummary, dict]:
        res = fcpl_client(
            X, rng, ratio=self.client_ratio, max_candidates=self._candidate_cap(X.shape[0]), eta=self.eta,
            max_passes=self.max_passes, semantics=self.semantics, standardize=self._standardize(),
            n_threads=n_threads, objective=False,
        )
        return FedHIRESummary(centers=res.centers, n_features=X.shape[1]), {"labels": res.labels}

    def _aggregate(self, summaries: list[FedHIRESummary], rng: np.random.Generator, n_threads: int):
        sizes = np.array([s.centers.shape[0] for s in summaries], dtype=np.int64)
        C = np.ascontiguousarray(np.concatenate([np.asarray(s.centers, dtype=np.float64) for s in summaries]))
        n_s = C.shape[0]
        if n_s < self.n_clusters:
            raise ValueError(
                f"the clients uploaded {n_s} clusterlet centroids in total, fewer than n_clusters={self.n_clusters}; "
                "lower n_clusters or add data"
            )
        Cs, weight = _server_view(C, self._standardize())
        attempts = 1 + (self.max_retries if self.on_init_failure == "retry-server" else 0)
        fusion = self._fusion()
        # robust semantics: uploads equal up to rounding (means of identical rows on several clients, or
        # twin clusterlets of one client) are copies of one point. When fewer than n_clusters points are
        # left, one cluster per point (with a warning) instead of splitting copies to reach n_clusters;
        # otherwise every copy takes its first copy's global label, so identical rows never end in
        # different global clusters (the published code, reference semantics, labels every upload alone)
        dup, reps = (near_duplicate_groups(C) if self.semantics != "reference"
                     else (np.arange(n_s, dtype=np.int64), np.arange(n_s, dtype=np.int64)))
        # (robust: fewer near-distinct uploads than n_clusters implies fewer exact ones; reference: exact only)
        too_few = fusion == "linkage" and (reps.shape[0] < self.n_clusters if self.semantics != "reference"
                                           else not _has_distinct_rows(Cs, self.n_clusters))
        for attempt in range(attempts):
            if too_few:
                # (the hint on near-duplicates only when some merged uploads are not exactly equal)
                near = self.semantics != "reference" and np.unique(C, axis=0).shape[0] > reps.shape[0]
                labels, Z = _degenerate_fusion(Cs[reps], self.n_clusters, near=near)
                labels, Z = labels[dup], np.ascontiguousarray(Z[dup])
                break
            try:
                labels, Z = server_hierarchy(
                    Cs, self.n_clusters, rng, ratio=self.server_ratio, eta=self.eta, max_passes=self.max_passes,
                    kmodes_max_iter=self.kmodes_max_iter, semantics=self.semantics, tol=self._mcpl_tol,
                    max_stages=self._mcpl_max_stages, max_candidates=self._server_candidate_cap(),
                    fusion=fusion,
                )
                labels = self._relabel_clusterlets(Cs, labels)
                labels = labels[reps][dup]
                break
            except KModesInitError as exc:
                if attempt == attempts - 1:
                    raise KModesInitError(
                        f"{exc}: the uploaded centroids do not support n_clusters={self.n_clusters} "
                        "(lower n_clusters, or raise max_retries)"
                    ) from None
        # compact global labels (k-modes may leave clusters empty), then centroids
        used = np.unique(labels)
        labels = np.searchsorted(used, labels).astype(np.int64)
        k = used.shape[0]
        counts = np.bincount(labels, minlength=k).astype(np.float64)
        centers = np.zeros((k, C.shape[1]))
        np.add.at(centers, labels, C)
        centers /= counts[:, None]
        level_sizes = (Z.max(axis=0) + 1).astype(np.int64)
        d = C.shape[1]
        model = FedHIREModel(
            centers=centers, clusterlet_labels=labels, granular_labels=Z, level_sizes=level_sizes,
            n_features=d, n_retries=attempt, predict_weight=weight,
        )
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        replies = [
            FedHIREReply(
                labels=labels[offsets[i]:offsets[i + 1]], granular_labels=Z[offsets[i]:offsets[i + 1]],
                centers=centers, n_features=d,
            )
            for i in range(len(summaries))
        ]
        return model, replies

    def _assign(self, X: np.ndarray, state: ClientState, reply: FedHIREReply, n_threads: int) -> np.ndarray:
        local = state["labels"]
        if reply.labels.shape[0] != (int(local.max()) + 1 if local.size else 0):
            raise MessageError(
                f"the server's reply labels {reply.labels.shape[0]} clusterlets, "
                f"but this client has {int(local.max()) + 1}"
            )
        return reply.labels[local]

    def _set_model_attributes(self, model: FedHIREModel) -> None:
        super()._set_model_attributes(model)
        # predict labels new rows by the nearest centre in the units the server merged in
        # (refinement rounds, when run, replace these by their own units)
        weight = getattr(model, "predict_weight", None)
        self.feature_weight_ = np.array(weight) if weight is not None and weight.size else None
        self.level_sizes_ = np.array(model.level_sizes)
        self.n_retries_ = int(model.n_retries)

    def _set_client_attributes(self, states: list[ClientState], replies: list[FedHIREReply]) -> None:
        self.client_granular_labels_ = [np.asarray(r.granular_labels)[s["labels"]] for s, r in zip(states, replies)]
        self.client_n_clusterlets_ = np.array([r.labels.shape[0] for r in replies], dtype=np.int64)
