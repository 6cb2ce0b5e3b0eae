"""The server's Ward linkage (``fastfc._grouping.ward_cut`` on the ``_ward`` kernel).

Claims: (1) the kernel's merges are SciPy's ``linkage(..., "ward")`` bit for bit, so Fed-HIRE's and
GOLD's labels do not change; (2) ``ward_cut`` gives ``cut_tree``'s labels for every cut, ties
included; (3) both agree with a plain NumPy Ward agglomeration (float32 and float64 points);
(4) the agglomeration holds one condensed distance matrix, not two.
"""
import os

import numpy as np
import pytest
from scipy.cluster.hierarchy import cut_tree, linkage
from scipy.spatial.distance import pdist

from fastfc._grouping import _cut_labels, _label_merges, ward_cut
from fastfc._kernels._ward import ward_chain
from reference_ward import ward_merges_ref


def _points(kind, n, d, rng):
    if kind == "normal":
        return rng.normal(size=(n, d))
    if kind == "grid":  # many equal distances and duplicate points
        return rng.integers(0, 3, size=(n, d)).astype(np.float64)
    if kind == "duplicates":
        return np.repeat(rng.normal(size=(n // 3 + 1, d)), 3, axis=0)[:n]
    return rng.normal(size=(n, d)) * 10.0 ** rng.uniform(-8, 8)  # scales


def _kernel_linkage(P):
    n = P.shape[0]
    D = pdist(np.asarray(P, dtype=np.float64))
    Z = np.empty((n - 1, 4))
    ward_chain(D, n, Z)
    Z = Z[np.argsort(Z[:, 2], kind="mergesort")]
    _label_merges(Z, n)
    return Z


@pytest.mark.parametrize("kind", ["normal", "grid", "duplicates", "scales"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ward_chain_is_scipy_linkage_bit_for_bit(kind, dtype):
    rng = np.random.default_rng([["normal", "grid", "duplicates", "scales"].index(kind), np.dtype(dtype).itemsize])
    for _ in range(15):
        n = int(rng.integers(2, 160))
        P = _points(kind, n, int(rng.integers(1, 6)), rng).astype(dtype)
        np.testing.assert_array_equal(_kernel_linkage(P), linkage(P, method="ward"))


@pytest.mark.parametrize("kind", ["normal", "grid", "duplicates"])
def test_ward_cut_is_cut_tree(kind):
    rng = np.random.default_rng(3 + len(kind))
    for _ in range(12):
        n = int(rng.integers(2, 120))
        P = _points(kind, n, int(rng.integers(1, 4)), rng)
        Zs = linkage(P, method="ward")
        for k in sorted({1, 2, 3, 7, n - 1, n, n + 2, int(rng.integers(1, n + 1))}):
            np.testing.assert_array_equal(ward_cut(P, k), cut_tree(Zs, n_clusters=k).reshape(-1))
    assert ward_cut(P, 3).dtype == np.int64


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ward_matches_plain_numpy_reference(dtype):
    rng = np.random.default_rng(21)
    P = rng.normal(size=(60, 3)).astype(dtype)  # continuous: no equal heights
    heights, partitions = ward_merges_ref(P)
    Z = _kernel_linkage(P)
    np.testing.assert_allclose(Z[:, 2], heights, rtol=1e-12)
    for k in range(1, 61):
        np.testing.assert_array_equal(ward_cut(P, k), partitions[60 - k])


def test_cut_labels_only_where_cut_tree_agrees():
    """Non-monotone trees (centroid linkage) can make cut_tree apply a merge before its parts:
    the fast cut then declines (None) and ward_cut falls back to cut_tree; elsewhere it agrees."""
    rng = np.random.default_rng(5)
    declined = 0
    for _ in range(60):
        n = int(rng.integers(3, 40))
        Z = linkage(rng.normal(size=(n, 2)), method="centroid")
        for k in range(1, n + 1):
            lab = _cut_labels(Z, n, k)
            if lab is None:
                declined += 1
            else:
                np.testing.assert_array_equal(lab, cut_tree(Z, n_clusters=k).reshape(-1))
    assert declined > 0  # the fallback's condition is reachable


def _rss(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc to read peak RSS")
def test_ward_cut_one_distance_matrix():
    """Peak memory of the linkage: one condensed matrix (SciPy's linkage holds it twice; its
    second copy is not a NumPy array, so tracemalloc would not see it: resident-set peak)."""
    n = 3000
    P = np.random.default_rng(1).normal(size=(n, 4))
    condensed = n * (n - 1) // 2 * 8
    ward_cut(P[:50], 5)  # imports and first-call allocations outside the measurement
    base = _rss("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset the high-water mark
    ward_cut(P, 5)
    assert _rss("VmHWM") - base < 1.5 * condensed


@pytest.mark.parametrize("seed", range(6))
def test_near_duplicate_groups_keeps_every_rounding_pair_together(seed):
    """``near_duplicate_groups``: two points whose every coordinate differs by at most ``rtol`` times the
    feature's largest magnitude always share a group (checked against all pairs); copies perturbed by a
    few ulps form one group per original point; points further apart than the longest possible chain of
    such steps stay apart; groups are numbered by their first point, which is their representative."""
    from fastfc._grouping import DUPLICATE_RTOL, near_duplicate_groups

    rng = np.random.default_rng(seed)
    m, d = int(rng.integers(1, 12)), int(rng.integers(1, 6))
    base = rng.normal(size=(m, d)) * 10.0 ** rng.integers(-3, 4, size=d)
    which = rng.integers(0, m, size=60)
    P = base[which] * (1 + rng.integers(-4, 5, size=(60, d)) * np.finfo(np.float64).eps)
    labels, first = near_duplicate_groups(P)
    tol = DUPLICATE_RTOL * np.abs(P).max(axis=0)
    linked = (np.abs(P[:, None, :] - P[None, :, :]) <= tol).all(axis=2)
    assert (labels[:, None] == labels[None, :])[linked].all()
    # the copies of one base point are one group, different base points different groups
    _, ref = np.unique(which, return_inverse=True)
    assert (labels[:, None] == labels[None, :]).tolist() == (ref[:, None] == ref[None, :]).tolist()
    assert first.tolist() == sorted(np.unique(labels, return_index=True)[1].tolist())
    assert labels[first].tolist() == list(range(first.size))
    # all distinct: one group each, in order
    Q = rng.normal(size=(50, d))
    labels, first = near_duplicate_groups(Q)
    assert labels.tolist() == list(range(50)) and first.tolist() == list(range(50))
