"""Sanity cases: federated data whose right answer is obvious.

A user's first test of a clustering library is data whose answer nobody can
doubt: well-separated Gaussian clusters. :func:`make_sanity_case` builds one
such federation from a :class:`SanityCase` (number of clusters, dimension,
clients, split, client size, units) and :func:`sanity_grid` lists the grid
that fastfc's estimators are held to (``benchmarks/sanity_suite.py`` runs all
of it; the tests run a fast subset). Degenerate federations (identical rows, a
constant feature, one row per client) are cases too: their answer is not a
partition but a warning that says what happened.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

import numpy as np

from ._partition import partition_classes_per_client, partition_dirichlet, partition_iid
from ._synthetic import _place_centers

__all__ = ["SanityCase", "make_sanity_case", "sanity_grid", "SEPARATION", "SPLITS", "DEGENERATE"]

#: minimum distance between two cluster centres, in units of the cluster standard deviation
SEPARATION = 8.0
#: how rows are spread over clients: uniformly, Dirichlet(0.1) label skew, or every class on only some clients
SPLITS = ("iid", "dirichlet", "some")
#: degenerate federations: all rows identical, one constant feature, one row per client
DEGENERATE = ("identical", "constant_feature", "one_row")


@dataclass(frozen=True)
class SanityCase:
    """One federation of well-separated Gaussian clusters.

    Parameters
    ----------
    n_clusters : int
        Number of clusters ``K`` (the true labels have ``K`` values).
    n_features : int
        Dimension ``d``.
    n_clients : int
        Number of clients.
    rows_per_client : int
        Mean client size; the data has ``n_clients * rows_per_client`` rows
        (at least ``K`` rows per cluster: small clients get more rows in total
        rather than empty clusters).
    split : {"iid", "dirichlet", "some"}
        ``"iid"``: uniform; ``"dirichlet"``: label skew with Dirichlet(0.1)
        class shares; ``"some"``: every client holds ``max(1, K // 3)`` classes,
        so each class lives on only some clients.
    scale : float
        Global unit factor applied to every feature (``1e-6`` … ``1e6``).
    feature_spread : float
        Ratio of the largest to the smallest per-feature unit (1 = same units;
        ``1e4``: feature units spread log-uniformly over four decades).
    degenerate : str or None
        One of :data:`DEGENERATE` for a degenerate federation (then the
        cluster parameters only set the shape).
    seed : int
        Seed of the data (centres, noise, split).
    """

    n_clusters: int = 5
    n_features: int = 10
    n_clients: int = 10
    rows_per_client: int = 200
    split: str = "iid"
    scale: float = 1.0
    feature_spread: float = 1.0
    degenerate: str | None = None
    seed: int = 0

    @property
    def name(self) -> str:
        """A short unique label such as ``K5 d10 L10x200 iid s1 f1``."""
        base = (f"K{self.n_clusters} d{self.n_features} L{self.n_clients}x{self.rows_per_client} {self.split} "
                f"s{self.scale:g} f{self.feature_spread:g}")
        return base + (f" {self.degenerate}" if self.degenerate else "") + f" #{self.seed}"

    def as_dict(self) -> dict:
        """The case's parameters as a JSON-serialisable dict."""
        return asdict(self)


def _centres(k: int, d: int, rng: np.random.Generator) -> np.ndarray:
    # Centres in a box small enough that the clusters are not trivially far apart (mean pairwise
    # distance about 20 standard deviations) yet large enough to place k centres SEPARATION apart.
    half = max(10.0 / math.sqrt(d / 6.0), SEPARATION * k ** (1.0 / d))
    return _place_centers(k, d, SEPARATION, (-half, half), rng)


def make_sanity_case(case: SanityCase) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Build the federation of one sanity case.

    Parameters
    ----------
    case : SanityCase

    Returns
    -------
    X_clients : list of ndarray of shape (n_l, n_features), float64
        One matrix per client, in the case's units.
    y_clients : list of ndarray of shape (n_l,), int64
        True cluster of every row (all zeros for degenerate cases).
    """
    rng = np.random.default_rng(case.seed)
    k, d, L = case.n_clusters, case.n_features, case.n_clients
    n = max(L * case.rows_per_client, k * max(2, L if case.split != "iid" else 2))
    if case.degenerate == "identical":
        X = np.broadcast_to(rng.normal(size=d), (L * case.rows_per_client, d)).copy()
        y = np.zeros(len(X), dtype=np.int64)
        parts = partition_iid(len(X), L, random_state=rng)
    elif case.degenerate == "one_row":
        centres = _centres(k, d, rng)
        y = np.arange(L, dtype=np.int64) % k
        X = centres[y] + rng.standard_normal((L, d))
        parts = [np.array([i]) for i in range(L)]
    else:
        centres = _centres(k, d, rng)
        y = rng.permutation(np.arange(n, dtype=np.int64) % k)
        X = centres[y] + rng.standard_normal((n, d))
        if case.degenerate == "constant_feature":
            X[:, 0] = 3.0
        elif case.degenerate is not None:
            raise ValueError(f"unknown degenerate case {case.degenerate!r}; expected one of {DEGENERATE}")
        if case.split == "iid":
            parts = partition_iid(n, L, random_state=rng)
        elif case.split == "dirichlet":
            parts = partition_dirichlet(y, L, alpha=0.1, min_size=min(2 * d, n // L), random_state=rng)
        elif case.split == "some":
            parts = partition_classes_per_client(y, L, classes_per_client=max(1, k // 3), random_state=rng)
        else:
            raise ValueError(f"unknown split {case.split!r}; expected one of {SPLITS}")
    units = case.scale * np.logspace(0.0, math.log10(case.feature_spread), d) if d > 1 else np.full(1, case.scale)
    units = rng.permutation(units)
    return [X[p] * units for p in parts], [y[p] for p in parts]


def sanity_grid(*, seeds: tuple[int, ...] = (0,)) -> Iterator[SanityCase]:
    """The sanity grid: one factor at a time around a base case, plus hard corners.

    Every factor of the grid is varied on its own around the base case
    (K=5, d=10, 10 clients of 200 rows, IID, unit scale): K in {2, 3, 5, 10,
    20}, d in {2, 10, 50, 100}, clients in {1, 3, 10, 100, 1000} (clients of at
    least 2·d rows), splits IID / Dirichlet(0.1) / some-classes-per-client,
    global scales 1e-6 … 1e6 and a per-feature unit spread of 1e4; then the
    corners that combine many small clients, high dimension, label skew and
    units; then the degenerate cases.

    Parameters
    ----------
    seeds : tuple of int, default=(0,)
        Data seeds; every case is repeated for each.

    Yields
    ------
    SanityCase
    """
    base = SanityCase()
    variants: list[SanityCase] = [base]
    variants += [replace(base, n_clusters=k) for k in (2, 3, 10, 20)]
    variants += [replace(base, n_features=d, rows_per_client=max(200, 4 * d)) for d in (2, 50, 100)]
    variants += [replace(base, n_clients=L, rows_per_client=r) for L, r in ((1, 2000), (3, 700), (100, 20), (1000, 20))]
    variants += [replace(base, split=s) for s in ("dirichlet", "some")]
    variants += [replace(base, scale=s) for s in (1e-6, 1e-3, 1e-1, 1e1, 1e3, 1e6)]
    variants += [replace(base, feature_spread=1e4)]
    corners = [
        SanityCase(n_clusters=10, n_features=50, n_clients=100, rows_per_client=100, split="iid"),
        SanityCase(n_clusters=10, n_features=10, n_clients=100, rows_per_client=100, split="dirichlet"),
        SanityCase(n_clusters=20, n_features=100, n_clients=100, rows_per_client=200, split="some"),
        SanityCase(n_clusters=3, n_features=10, n_clients=1000, rows_per_client=20, split="iid", scale=1e3),
        SanityCase(n_clusters=5, n_features=50, n_clients=10, rows_per_client=100, split="iid",
                   scale=1e-6, feature_spread=1e4),
        SanityCase(n_clusters=10, n_features=2, n_clients=10, rows_per_client=200, split="some", scale=1e6),
    ]
    degenerate = [replace(base, degenerate=g, n_clusters=3) for g in DEGENERATE]
    seen = set()
    for case, seed in itertools.product(variants + corners + degenerate, seeds):
        case = replace(case, seed=seed)
        if case not in seen:
            seen.add(case)
            yield case
