"""The memory- and overhead-lean code paths of issue 15 against the plain computations they replace."""
import math
import warnings

import numpy as np
import pytest
from sklearn.cluster import KMeans

from fastfc.fed_kstar_hc import BIC_PSEUDO_ROWS, _distinct_rows_up_to, moment_tree, select_k_bic, subcluster_statistics
from fastfc.kfed import lloyd_from


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("in_place", [False, True])
def test_lloyd_from_is_kmeans_fit(dtype, in_place):
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(3000, 4)) + rng.integers(0, 3, 3000)[:, None] * 4).astype(dtype)
    init = X[[0, 10, 20]].astype(np.float64) + 0.1
    km = KMeans(n_clusters=3, init=init, n_init=1, max_iter=300, tol=1e-4).fit(X)
    work = X.copy()
    centers, labels, inertia = lloyd_from(work, init, max_iter=300, tol=1e-4, in_place=in_place)
    np.testing.assert_array_equal(centers, km.cluster_centers_)
    np.testing.assert_array_equal(labels, km.labels_)
    assert inertia == km.inertia_
    if not in_place:
        np.testing.assert_array_equal(work, X)


def test_lloyd_from_warns_like_kmeans_on_duplicates():
    X = np.repeat(np.array([[0.0, 0.0], [1.0, 1.0]]), 20, axis=0)
    init = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    with pytest.warns(Warning, match="Number of distinct clusters"):
        lloyd_from(X, init, max_iter=10, tol=1e-4)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n,d", [(1200, 36), (300, 8), (40, 30), (30000, 10), (6000, 50), (9, 1)])
def test_principal_axes_are_numpy_svd_axes_up_to_sign(n, d, dtype):
    """FeCA's normality test takes its axes from the scatter matrix's leading eigenvectors (LAPACK
    syevr, issue 15): the leading right singular vectors of the centred rows, as NumPy's SVD gives
    them, up to sign and rounding (distinct singular values here)."""
    from fastfc.feca import _principal_axes

    rng = np.random.default_rng(n + d)
    Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
    P = (rng.normal(size=(n, d)) * np.geomspace(5.0, 0.1, d) @ Q + rng.normal(size=d) * 10).astype(dtype)
    C = np.subtract(P, P.mean(axis=0), dtype=np.float64)
    ref = np.linalg.svd(C, full_matrices=False)[2][: min(2, d)]
    got = _principal_axes(C.T @ C, 2)
    assert got.shape == (d, min(2, d))
    signs = np.sign((got.T * ref).sum(1))
    np.testing.assert_allclose(got.T * signs[:, None], ref, atol=1e-8)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gaussian_check_is_anderson_darling_on_the_two_svd_axes(dtype):
    """``_looks_gaussian(P, 2)`` is the Anderson-Darling test (scipy's statistic) at the 15% level of the rows'
    projections on the two leading right singular vectors (NumPy's SVD), both passing: random
    pieces, Gaussian and not, small (one centred copy) and large (blocked)."""
    import scipy.stats

    from fastfc.feca import _looks_gaussian

    rng = np.random.default_rng(11)
    agree = 0
    for trial in range(40):
        n = int(rng.choice([20, 150, 1200, 30000]))
        d = int(rng.integers(2, 40)) if n < 30000 else 12
        Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
        Z = rng.normal(size=(n, d))
        if trial % 2:  # two clusters along a random direction: fails on its leading axis
            Z[: n // 2, 0] += float(rng.uniform(1.0, 6.0))
        if trial % 4 == 3:  # uniform along the second axis
            Z[:, 1] = rng.uniform(-2.0, 2.0, n)
        P = (Z * np.geomspace(4.0, 0.5, d) @ Q).astype(dtype)
        C = np.subtract(P, P.mean(axis=0), dtype=np.float64)
        vt = np.linalg.svd(C, full_matrices=False)[2][:2]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            results = [scipy.stats.anderson(C @ v) for v in vt]
        # Stephens' 15% critical value for estimated mean and variance (scipy's statistic; its tabled
        # critical values are rounded)
        expected = all(r.statistic < 0.576 / (1.0 + 4.0 / n - 25.0 / n / n) for r in results)
        assert _looks_gaussian(P, n_axes=2) == expected, (trial, n, d)
        agree += expected
    assert 0 < agree < 40  # both outcomes occur


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n,d", [(30000, 10), (6000, 50), (100000, 3)])
def test_blocked_scatter_and_projections_of_large_pieces_match_one_centred_copy(n, d, dtype):
    """Pieces of at least 2**18 values centre block by block (issue 15, no (n, d) temporary): the
    scatter matrix and the projections equal the one-centred-copy NumPy formulas to rounding."""
    from fastfc.feca import _GRAM_MIN_ELEMENTS, _centred_projections, _scatter

    assert n * d >= _GRAM_MIN_ELEMENTS
    rng = np.random.default_rng(n + d)
    P = (rng.normal(size=(n, d)) * rng.uniform(0.1, 5.0, d) + rng.normal(size=d) * 10).astype(dtype)
    mean = P.mean(axis=0)
    C = np.subtract(P, mean, dtype=np.float64)
    np.testing.assert_allclose(_scatter(P, mean), C.T @ C, rtol=1e-10)
    V = np.linalg.qr(rng.normal(size=(d, d)))[0][:, :2]
    got = _centred_projections(P, mean, V)
    assert got.shape == (n, 2)
    ref = C @ V
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


def plain_subcluster_statistics(X, labels, rng, n_substitutes=None):
    """The all-rows-at-once version (before issue 15)."""
    Xf = np.asarray(X, dtype=np.float64)
    k = int(labels.max()) + 1
    d = Xf.shape[1]
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=k).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    Xs = Xf[order]
    means = np.add.reduceat(Xs, starts[:-1], axis=0) / counts[:, None]
    dev = Xs - np.repeat(means, counts, axis=0)
    radii = np.add.reduceat(np.sqrt((dev * dev).sum(1)), starts[:-1]) / counts
    denom = np.maximum(counts - 1, 1).astype(np.float64)
    stds = np.sqrt(np.add.reduceat(dev * dev, starts[:-1], axis=0) / denom[:, None])
    stds[counts == 1] = 0.0
    n_sub = counts if n_substitutes is None else np.minimum(counts, int(n_substitutes))
    sub_starts = np.concatenate([[0], np.cumsum(n_sub)])
    subs = np.empty((int(sub_starts[-1]), d))
    for g in range(k):
        a, b = starts[g], starts[g + 1]
        lo, hi = sub_starts[g], sub_starts[g + 1]
        if hi == lo:
            continue
        z = rng.standard_normal((hi - lo, d))
        if b - a == 1:
            subs[lo:hi] = means[g]
            continue
        cov = dev[a:b].T @ dev[a:b] / (b - a - 1)
        lam, V = np.linalg.eigh(cov)
        subs[lo:hi] = means[g] + z @ (V * np.sqrt(np.clip(lam, 0.0, None))).T
    return counts, means, radii, stds, subs


@pytest.mark.parametrize("n,d,k,m", [(6000, 10, 50, None), (20000, 30, 80, 0), (500, 3, 40, 5), (300, 2, 150, None)])
def test_subcluster_statistics_bitwise(n, d, k, m):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(n, d)) * 3
    labels = rng.integers(0, k, n)
    labels[:k] = np.arange(k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # single-row subclusters
        got = subcluster_statistics(X, labels, np.random.default_rng(1), n_substitutes=m)
    want = plain_subcluster_statistics(X, labels, np.random.default_rng(1), n_substitutes=m)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def plain_bic(merges, counts, centers, m2):
    """BIC along the tree with every cut scored from scratch (before issue 15)."""
    n_leaf = np.asarray(counts, dtype=np.float64)
    k0 = n_leaf.shape[0]
    n = float(n_leaf.sum())
    C, M2 = np.array(centers, dtype=np.float64), np.array(m2, dtype=np.float64)
    grand = (n_leaf[:, None] * C).sum(0) / n
    gvar = (M2.sum(0) + (n_leaf[:, None] * (C - grand) ** 2).sum(0)) / n
    live = gvar > 0
    d = int(live.sum())
    C, M2, gvar = C[:, live], M2[:, live], gvar[live]
    w, alive = n_leaf.copy(), np.ones(k0, dtype=bool)
    bic = np.full(k0, -np.inf)

    def score(k):
        nn = w[alive]
        v = (M2[alive] + BIC_PSEUDO_ROWS * gvar) / (nn[:, None] + BIC_PSEUDO_ROWS)
        ll = float((nn * np.log(nn / n)).sum() - 0.5 * (nn[:, None] * np.log(v)).sum())
        return ll - 0.5 * (k - 1 + 2 * k * d) * math.log(n)

    k = k0
    bic[k - 1] = score(k)
    for p, q in merges:
        diff = C[p] - C[q]
        tot = w[p] + w[q]
        M2[p] += M2[q] + (w[p] * w[q] / tot) * diff * diff
        C[p] = (w[p] * C[p] + w[q] * C[q]) / tot
        w[p] = tot
        alive[q] = False
        k -= 1
        bic[k - 1] = score(k)
    return int(np.argmax(bic)) + 1, bic


@pytest.mark.parametrize("k0,d", [(300, 10), (120, 40), (40, 2)])
def test_select_k_bic_bitwise(k0, d):
    rng = np.random.default_rng(k0)
    counts = rng.integers(1, 40, k0).astype(float)
    centers = rng.normal(size=(k0, d)) * 3
    m2 = rng.uniform(0, 5, (k0, d)) * (counts[:, None] - 1)
    centers[:, 0] = 1.0
    m2[:, 0] = 0.0  # a constant feature is left out
    merges = moment_tree(counts, centers, m2)[0]
    k, bic = select_k_bic(merges, counts, centers, m2)
    k_ref, bic_ref = plain_bic(merges, counts, centers, m2)
    assert k == k_ref
    np.testing.assert_array_equal(bic, bic_ref)


def test_distinct_rows_up_to():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 3, size=(5000, 2)).astype(float)  # 9 distinct rows
    for k in (1, 5, 9, 10, 50):
        assert _distinct_rows_up_to(X, k) == min(k, np.unique(X, axis=0).shape[0])
    Y = rng.normal(size=(3000, 3))
    assert _distinct_rows_up_to(Y, 2000) == 2000
    assert _distinct_rows_up_to(np.ones((7, 2)), 3) == 1


def test_distinct_rows_up_to_quick_path_is_np_unique():
    """The byte-count of the first 2k rows (issue 15) gives ``min(k, distinct rows)`` as ``np.unique(axis=0)``
    would: zeros of either sign are one value, float32 and strided rows included."""
    rng = np.random.default_rng(3)
    for t in range(1500):
        n, d, k = int(rng.integers(1, 200)), int(rng.integers(1, 4)), int(rng.integers(1, 100))
        X = rng.integers(-2, 3, size=(n, d)).astype(np.float64 if t % 2 else np.float32)
        if t % 3 == 0:
            X = X * 0.0 * rng.choice([-1.0, 1.0], size=(n, d))  # +0 and -0 only: one distinct value a feature
        if t % 5 == 0:
            X = np.asfortranarray(X)
        assert _distinct_rows_up_to(X, k) == min(k, np.unique(X, axis=0).shape[0])


@pytest.mark.parametrize("n,d,k", [(5, 2, 5), (300, 3, 7), (1000, 10, 50), (2000, 17, 120), (3000, 7, 2),
                                   (700, 130, 3), (400, 300, 2), (70000, 2, 3), (9, 8, 1)])
def test_subcluster_moments_kernel_is_numpys_segment_reductions(n, d, k):
    """The compiled moments (``_kstar.subcluster_moments``, issue 15) have the bits of NumPy's segment
    reductions over the rows sorted by subcluster (``plain_subcluster_statistics``), on one and two
    threads: segments of 1, fewer than 8, up to 128 and more than 128 rows (several halvings at
    70000 / 3), row norms over fewer than 8, up to 128 and more than 128 features, and values of
    very different magnitudes and signs."""
    from fastfc._kernels import _kstar

    rng = np.random.default_rng(n + d + k)
    X = rng.normal(size=(n, d)) * rng.uniform(0.01, 100, d) * 10.0 ** rng.integers(-6, 7, d) + rng.uniform(-50, 50, d)
    labels = rng.integers(0, k, n)
    labels[:k] = np.arange(k)
    want = plain_subcluster_statistics(X, labels, np.random.default_rng(1), n_substitutes=0)
    counts = np.bincount(labels, minlength=k)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    order = np.empty(n, dtype=np.int64)
    _kstar.stable_order(labels.astype(np.int64), starts, order)
    np.testing.assert_array_equal(order, np.argsort(labels, kind="stable"))
    for nt in (1, 2):
        means, radii, stds = np.empty((k, d)), np.empty(k), np.empty((k, d))
        _kstar.subcluster_moments(X, order, starts, means, radii, stds, nt)
        stds[counts == 1] = 0.0
        np.testing.assert_array_equal(means, want[1])
        np.testing.assert_array_equal(radii, want[2])
        np.testing.assert_array_equal(stds, want[3])


@pytest.mark.parametrize("n,d,k", [(1, 1, 1), (500, 3, 7), (20000, 50, 20), (3000, 130, 2)])
def test_label_row_sums_is_add_at(n, d, k):
    """``_kstar.label_row_sums`` over a row range has the bits of ``np.add.at(sums, labels, X)`` on those
    rows -- each label's rows added in row order -- with a label without rows; Fed-k*-HC's piece means
    (``_means``, issue 15) are those sums over the count, of the two fixed row halves added in order for a
    large client, the same bits for n_threads 1 and 2."""
    from fastfc import _units
    from fastfc._kernels import _kstar
    from fastfc.fed_kstar_hc import _means

    rng = np.random.default_rng(n + d)
    X = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-5, 6, d) + rng.uniform(-1e3, 1e3, d)
    labels = rng.integers(0, k, n)
    if k > 1:
        labels[labels == k - 1] = 0  # the last label has no row: its sums stay zero
    cuts = [(0, n), (0, n // 2), (n // 2, n)]
    for i0, i1 in cuts:
        want = np.zeros((k, d))
        np.add.at(want, labels[i0:i1], X[i0:i1])
        got = np.zeros((k, d))
        _kstar.label_row_sums(X, labels, got, i0, i1)
        np.testing.assert_array_equal(got, want)
    halves = _units.large_moments(X)
    sums = np.zeros((k, d))
    for i0, i1 in (cuts[1:] if halves else cuts[:1]):
        part = np.zeros((k, d))
        np.add.at(part, labels[i0:i1], X[i0:i1])
        sums = sums + part
    want = sums / np.maximum(np.bincount(labels, minlength=k), 1)[:, None]
    for nt in (1, 2):
        np.testing.assert_array_equal(_means(X, labels, k, nt), want)


def test_dense_labels_is_unique_inverse():
    from fastfc.fed_kstar_hc import _dense_labels

    rng = np.random.default_rng(5)
    for _ in range(200):
        k = int(rng.integers(1, 60))
        labels = rng.choice(rng.choice(k, size=int(rng.integers(1, k + 1)), replace=False), size=300).astype(np.int32)
        got = _dense_labels(labels, k)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, np.unique(labels, return_inverse=True)[1])
