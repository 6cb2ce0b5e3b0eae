"""Fed-k*-HC's server with many subclusters: grouping before the tree (``max_tree_leaves``).

Claims protected:

- :func:`compress_leaves` returns the exact moments of its groups (against a NumPy
  pooling of the leaves), its merges reproduce the grouping and their heights add up to
  the within-group scatter of the leaves' centres;
- it never puts the subclusters of two well-separated clusters in one group;
- :func:`cut_tree` (union-find) gives the labels of the plain relabelling loop it replaced;
- the estimator with more subclusters than ``max_tree_leaves`` still finds well-separated
  clusters exactly, its model passes the message checks, its labels do not depend on
  ``n_jobs``, and with a cap at or above k0 the results are those of ``max_tree_leaves=None``.
"""
from __future__ import annotations

import numpy as np
import pytest

from fastfc import FedKStarHC
from fastfc.datasets import make_gaussian_mixture
from fastfc.fed_kstar_hc import FedKStarHCModel, compress_leaves, cut_tree
from fastfc.metrics import adjusted_rand_score


def _leaves(rng, k0, d, n_blobs=0, sep=50.0):
    counts = rng.integers(1, 30, size=k0).astype(np.float64)
    centers = rng.normal(size=(k0, d))
    if n_blobs:
        blob = rng.integers(0, n_blobs, size=k0)
        centers += sep * rng.normal(size=(n_blobs, d))[blob]
    else:
        blob = np.zeros(k0, dtype=np.int64)
    m2 = rng.random((k0, d)) * np.maximum(counts - 1, 0)[:, None]
    return counts, centers, m2, blob


def _groups_of(reps, pre, k0):
    return cut_tree(pre, k0, reps.size)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compress_leaves_moments_and_merges_match_numpy(seed):
    rng = np.random.default_rng(seed)
    k0, d, cap = 500, 4, 37
    counts, centers, m2, _ = _leaves(rng, k0, d)
    reps, gn, gc, gm2, pre, pre_h = compress_leaves(counts, centers, m2, cap)
    assert reps.size == cap and (np.diff(reps) > 0).all()
    assert pre.shape == (k0 - cap, 2) and (pre[:, 0] < pre[:, 1]).all()
    assert np.unique(pre[:, 1]).size == k0 - cap  # every non-representative merged exactly once
    g = _groups_of(reps, pre, k0)
    # groups numbered by smallest slot = reps order
    assert np.array_equal(np.array([np.flatnonzero(g == j).min() for j in range(cap)]), reps)
    total_scatter = 0.0
    for j in range(cap):
        idx = g == j
        n = counts[idx].sum()
        mu = (counts[idx, None] * centers[idx]).sum(0) / n
        ref_m2 = m2[idx].sum(0) + (counts[idx, None] * (centers[idx] - mu) ** 2).sum(0)
        assert gn[j] == pytest.approx(n)
        np.testing.assert_allclose(gc[j], mu, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gm2[j], ref_m2, rtol=1e-10, atol=1e-10)
        total_scatter += float((counts[idx, None] * (centers[idx] - mu) ** 2).sum())
    assert pre_h.sum() == pytest.approx(total_scatter, rel=1e-10)
    assert (pre_h >= 0).all()


def test_compress_leaves_keeps_separated_clusters_apart():
    rng = np.random.default_rng(5)
    counts, centers, m2, blob = _leaves(rng, 3000, 6, n_blobs=12)
    reps, *_, pre, _ = compress_leaves(counts, centers, m2, 64)
    g = _groups_of(reps, pre, 3000)
    for j in range(reps.size):
        assert np.unique(blob[g == j]).size == 1, f"group {j} mixes separated clusters"


def test_compress_leaves_identical_centres_stop_early():
    counts = np.ones(50)
    centers = np.zeros((50, 3))
    reps, gn, gc, gm2, pre, pre_h = compress_leaves(counts, centers, np.zeros((50, 3)), 10)
    assert reps.size == 1 and gn[0] == 50 and pre.shape == (49, 2) and (pre_h == 0).all()


def _cut_tree_loop(merges, k0, k):
    owner = np.arange(k0)
    for p, q in merges[: k0 - k]:
        owner[owner == q] = p
    return np.unique(owner, return_inverse=True)[1]


@pytest.mark.parametrize("seed", range(4))
def test_cut_tree_union_find_matches_relabelling_loop(seed):
    rng = np.random.default_rng(seed)
    k0 = 60
    alive = list(range(k0))
    merges = []
    while len(alive) > 1:
        a, b = sorted(rng.choice(len(alive), size=2, replace=False))
        p, q = alive[a], alive[b]
        merges.append((min(p, q), max(p, q)))
        alive.remove(max(p, q))
    merges = np.array(merges, dtype=np.int64)
    for k in (1, 2, 7, 30, k0):
        np.testing.assert_array_equal(cut_tree(merges, k0, k), _cut_tree_loop(merges, k0, k))


def _clients(n_clients, n, seed=0):
    X, y = make_gaussian_mixture(n, 5, 6, random_state=seed)
    parts = np.array_split(np.random.default_rng(seed).permutation(n), n_clients)
    return [X[p] for p in parts], np.concatenate([y[p] for p in parts])


@pytest.mark.parametrize("n_clusters", [6, None])
def test_estimator_with_grouped_leaves_finds_separated_clusters(n_clusters):
    Xc, y = _clients(40, 6000)
    est = FedKStarHC(n_clusters=n_clusters, max_tree_leaves=128, random_state=0, n_jobs=1).fit_clients(Xc)
    k0 = est.subcluster_labels_.size
    assert k0 > 128  # the cap is in force
    assert est.merges_.shape == (k0 - 1, 2)
    assert adjusted_rand_score(y, est.labels_) == 1.0
    assert est.labels_.max() + 1 == 6
    # the model crosses the wire and is checked like any other
    model = est.global_model_
    assert FedKStarHCModel.from_bytes(model.to_bytes()).merges.shape == (k0 - 1, 2)


def test_grouped_leaves_same_labels_for_any_n_jobs():
    Xc, _ = _clients(40, 6000, seed=3)
    a = FedKStarHC(n_clusters=None, max_tree_leaves=100, random_state=1, n_jobs=1).fit_clients(Xc)
    b = FedKStarHC(n_clusters=None, max_tree_leaves=100, random_state=1, n_jobs=2).fit_clients(Xc)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.merges_, b.merges_)


def test_cap_at_or_above_k0_is_the_exact_tree():
    Xc, _ = _clients(12, 3000, seed=4)
    exact = FedKStarHC(n_clusters=None, max_tree_leaves=None, random_state=2, n_jobs=1).fit_clients(Xc)
    k0 = exact.subcluster_labels_.size
    capped = FedKStarHC(n_clusters=None, max_tree_leaves=k0, random_state=2, n_jobs=1).fit_clients(Xc)
    np.testing.assert_array_equal(exact.labels_, capped.labels_)
    np.testing.assert_array_equal(exact.merges_, capped.merges_)
    np.testing.assert_array_equal(exact.k_scores_, capped.k_scores_)


# ---------------------------------------------------------------- the shared grouping
def test_variance_split_groups_numbering_and_cap():
    from fastfc._grouping import variance_split_groups

    rng = np.random.default_rng(7)
    P = rng.normal(size=(400, 3))
    lab = variance_split_groups(P, None, 25)
    assert lab.max() + 1 == 25 and np.bincount(lab).min() >= 1
    firsts = np.array([np.flatnonzero(lab == j)[0] for j in range(25)])
    assert (np.diff(firsts) > 0).all()  # numbered by smallest point index
    assert (variance_split_groups(P, None, 1) == 0).all()
    # same input, same groups; reordering the points regroups the same sets
    np.testing.assert_array_equal(lab, variance_split_groups(P, None, 25))
    perm = rng.permutation(400)
    lab_p = variance_split_groups(P[perm], None, 25)
    same = {frozenset(perm[lab_p == j]) for j in range(25)}
    assert same == {frozenset(np.flatnonzero(lab == j)) for j in range(25)}


def test_fedhire_linkage_pregrouping_keeps_separated_clusters():
    """Above 4096 centroids Fed-HIRE's linkage runs on variance-split groups: separated blobs stay whole."""
    from fastfc.fed_hire import linkage_fusion

    rng = np.random.default_rng(11)
    blob = rng.integers(0, 8, size=9000)
    C = rng.normal(size=(9000, 5)) + 40.0 * rng.normal(size=(8, 5))[blob]
    lab = linkage_fusion(C, 8)
    assert adjusted_rand_score(blob, lab) == 1.0
