"""Fed-HIRE and GOLD defaults on the sanity grid (issue 12): quality, units, degenerate inputs.

A fast subset of :func:`fastfc.datasets.sanity_grid` (``benchmarks/sanity_suite.py`` runs all
of it), unit invariance of the robust default, the degenerate-federation warning, the GOLD
stop rule, the ``keep_singletons`` CPL rule against the NumPy reference, and the labels of
``semantics="reference"`` frozen before the robust default changed.
"""
import json
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fastfc import GOLD, FedHIRE
from fastfc._cpl import candidate_count, cpl
from fastfc.datasets._sanity import SanityCase, make_sanity_case
from fastfc.fed_hire import DegenerateFederationWarning
from fastfc.metrics import adjusted_rand_score

import reference_cpl as R
from conftest import load_split

ESTIMATORS = [FedHIRE, GOLD]
BASE = SanityCase()
FAST_CASES = {
    "base": BASE,
    "K10": replace(BASE, n_clusters=10),
    "scale1e-6": replace(BASE, scale=1e-6),
    "scale1e6": replace(BASE, scale=1e6),
    "feature_spread1e4": replace(BASE, feature_spread=1e4),
    "100clients": replace(BASE, n_clients=100, rows_per_client=20),
    "d2": replace(BASE, n_features=2),
    "dirichlet": replace(BASE, split="dirichlet"),
    "one_client": replace(BASE, n_clients=1, rows_per_client=2000),
}


def _fit(cls, X_clients, k, **params):
    params.setdefault("random_state", 0)
    return cls(n_clusters=k, **params).fit_clients(X_clients)


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("name", list(FAST_CASES))
def test_default_separates_sanity_clusters(cls, name):
    case = FAST_CASES[name]
    X_clients, y_clients = make_sanity_case(case)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateFederationWarning)  # nothing degenerate here
        est = _fit(cls, X_clients, case.n_clusters)
    assert adjusted_rand_score(np.concatenate(y_clients), est.labels_) >= 0.99


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_labels_do_not_depend_on_units(cls):
    case = replace(BASE, n_clusters=4, n_clients=5, rows_per_client=120, seed=2)
    X_clients, _ = make_sanity_case(case)
    units = np.logspace(-3, 3, case.n_features)[np.random.default_rng(1).permutation(case.n_features)]
    base = _fit(cls, X_clients, 4).labels_
    for factor in (1e-6, 1e3, units):
        other = _fit(cls, [x * factor for x in X_clients], 4).labels_
        assert adjusted_rand_score(base, other) == 1.0


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_identical_rows_give_one_cluster_and_a_warning(cls):
    X_clients, _ = make_sanity_case(replace(BASE, n_clusters=3, degenerate="identical"))
    with pytest.warns(DegenerateFederationWarning, match="all rows of all clients are identical"):
        est = _fit(cls, X_clients, 3)
    assert est.n_clusters_ == 1 and (est.labels_ == 0).all()


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_constant_feature_is_reported_and_ignored(cls):
    X_clients, y_clients = make_sanity_case(replace(BASE, n_clusters=3, degenerate="constant_feature"))
    with pytest.warns(DegenerateFederationWarning, match=r"feature\(s\) \[0\] take one value"):
        est = _fit(cls, X_clients, 3)
    assert adjusted_rand_score(np.concatenate(y_clients), est.labels_) >= 0.99


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_one_row_per_client_is_clustered(cls):
    X_clients, y_clients = make_sanity_case(replace(BASE, n_clusters=3, degenerate="one_row"))
    with pytest.warns(DegenerateFederationWarning, match="a client holds a single row"):
        est = _fit(cls, X_clients, 3)
    assert adjusted_rand_score(np.concatenate(y_clients), est.labels_) >= 0.99


def test_gold_default_runs_golds_stop_rule():
    """GOLD() runs GOLD's stop rule (another stage while the objective moves), so its hierarchy
    differs from Fed-HIRE's; with ``mcpl_tol=None`` the two estimators are the same."""
    assert GOLD().mcpl_tol == "auto" and GOLD()._mcpl_tol == 0.1
    assert GOLD(semantics="reference")._mcpl_tol is None
    X_clients, y_clients = load_split("YE")
    k = int(np.unique(np.concatenate(y_clients)).size)
    hire = [_fit(FedHIRE, X_clients, k, random_state=s) for s in range(3)]
    gold = [_fit(GOLD, X_clients, k, random_state=s).level_sizes_ for s in range(3)]
    assert any(not np.array_equal(g, h.level_sizes_) for g, h in zip(gold, hire))
    plain = _fit(GOLD, X_clients, k, random_state=2, mcpl_tol=None, assign="remc")
    np.testing.assert_array_equal(plain.level_sizes_, hire[2].level_sizes_)
    np.testing.assert_array_equal(plain.labels_, hire[2].labels_)


def test_gold_default_labels_clusterlets_by_its_global_centroids():
    """GOLD() gives every uploaded centroid the label of its nearest global centroid (the
    unweighted mean of REMC's groups, in the server's standardised units: gold.md §3.5 and the
    centroid-inheritance step of §6), so its labels are GOLD's, not Fed-HIRE's: recomputed here
    by hand from REMC's labels (``assign="remc"``, same randomness)."""
    from fastfc._units import standardize_rows

    assert GOLD()._assign_rule() == "centroids" and GOLD(semantics="reference")._assign_rule() == "remc"
    X_clients, y_clients = load_split("EC")
    k = int(np.unique(np.concatenate(y_clients)).size)
    n_differ = 0
    for seed in range(3):
        gold = _fit(GOLD, X_clients, k, random_state=seed)
        remc = _fit(GOLD, X_clients, k, random_state=seed, assign="remc")
        C = np.concatenate([s.centers for s in remc.client_summaries_])
        Cs = standardize_rows(C)[0]
        z = remc.global_model_.clusterlet_labels
        G = np.array([Cs[z == j].mean(axis=0) for j in range(z.max() + 1)])
        nearest = ((Cs[:, None, :] - G[None]) ** 2).sum(axis=-1).argmin(axis=1)
        expected = np.searchsorted(np.unique(nearest), nearest)
        np.testing.assert_array_equal(gold.global_model_.clusterlet_labels, expected)
        hire = _fit(FedHIRE, X_clients, k, random_state=seed)
        n_differ += adjusted_rand_score(gold.labels_, hire.labels_) < 1.0
    assert n_differ >= 2  # on EC GOLD's default partition differs from Fed-HIRE's (seeds 0-9: 10 of 10)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_reference_semantics_labels_unchanged(cls):
    """``semantics="reference"`` gives the labels it gave before the robust default changed."""
    expected = json.loads((Path(__file__).parent / "hire_reference_labels.json").read_text())
    X_clients, _ = make_sanity_case(SanityCase(n_clusters=4, n_features=5, n_clients=4, rows_per_client=60, seed=3))
    name = cls.__name__.lower()
    for seed in (0, 1):
        est = cls(n_clusters=4, semantics="reference", random_state=seed).fit_clients(X_clients)
        np.testing.assert_array_equal(est.labels_, expected[f"{name}-reference-seed{seed}"])
    est = cls(n_clusters=4, semantics="reference", random_state=0).fit_clients([x * 10 for x in X_clients])
    np.testing.assert_array_equal(est.labels_, expected[f"{name}-reference-x10-seed0"])


@pytest.mark.parametrize("case", range(10))
def test_keep_singletons_matches_reference(case):
    rng = np.random.default_rng(300 + case)
    n = int(rng.integers(8, 70))
    d = int(rng.integers(1, 9))
    centres = rng.normal(scale=4.0, size=(int(rng.integers(1, 6)), d))
    X = centres[rng.integers(len(centres), size=n)] + rng.normal(size=(n, d))
    k = candidate_count(0.5, n)
    R.assert_cpl_matches(X, k, rng.permutation(n)[:k], keep_singletons=True)


def test_keep_singletons_changes_something_and_is_ignored_by_reference():
    rng = np.random.default_rng(5)
    X = np.vstack([rng.normal(size=(30, 2)), [[12.0, 12.0]]])  # one far row: a singleton
    seeds = np.concatenate([[30], rng.permutation(30)[:14]])
    kept = cpl(X, 15, seeds=seeds, keep_singletons=True)
    killed = cpl(X, 15, seeds=seeds)
    assert (kept.labels == kept.labels[30]).sum() == 1
    assert (killed.labels == killed.labels[30]).sum() > 1
    a = cpl(X, 15, seeds=seeds, semantics="reference", keep_singletons=True)
    b = cpl(X, 15, seeds=seeds, semantics="reference")
    np.testing.assert_array_equal(a.labels, b.labels)
