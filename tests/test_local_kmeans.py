"""Issue 15: the local k-means of one client on its thread budget (``fastfc._local_kmeans``).

The seeding kernel against the NumPy reference of greedy k-means++ and the Numba kernel it
replaces (same seeds, bit for bit), the Lloyd loop against a NumPy Lloyd, and the same
seeds / centres / labels for 1 and 2 threads (kernels and estimators).
"""
from __future__ import annotations

import numpy as np
import pytest

from fastfc import FeCA, FedKMeans, FedKStarHC, KFed
from fastfc._kernels import _feca as K
from fastfc._local_kmeans import kmeanspp, lloyd, n_trials_for

from reference_feca import ref_kmeans_plusplus

DTYPES = [np.float32, np.float64]


def _blobs(n, d, k, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=6.0, size=(k, d))
    return (means[rng.integers(k, size=n)] + rng.normal(size=(n, d))).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, d, k", [(3000, 7, 9), (2500, 1, 4), (1031, 33, 20)])
def test_kmeanspp_matches_numpy_reference_and_numba(dtype, n, d, k):
    X = _blobs(n, d, 5, seed=n + d, dtype=dtype)
    X[:50] = X[0]  # duplicates
    nt = n_trials_for(k)
    u = np.random.default_rng(k).random(1 + (k - 1) * nt)
    ref = ref_kmeans_plusplus(X, u, nt, k)
    s_nb = np.empty(k, dtype=np.int64)
    cl_nb = np.empty(n)
    K.kmeans_plusplus(X, u, nt, s_nb, cl_nb, np.empty(n), np.empty(n), np.empty(n))
    for n_jobs in (1, 2, 3):
        got = kmeanspp(X, k, np.random.default_rng(k), n_jobs=n_jobs)
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(got, s_nb)
    # the row-by-row distance pass (large clients) draws the same seeds as the feature-major one
    from fastfc._kernels._seed import kmeanspp_kernel

    for threads in (1, 2):
        seeds = np.empty(k, dtype=np.int64)
        kmeanspp_kernel(np.ascontiguousarray(X), u, nt, seeds, np.empty(n), np.empty((nt, n)), np.empty(n), threads,
                        1024, False)
        np.testing.assert_array_equal(seeds, ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kmeanspp_closest_same_bits_for_any_threads(dtype):
    from fastfc._kernels._seed import kmeanspp_kernel

    X = _blobs(5000, 12, 6, seed=3, dtype=dtype)
    k, n = 15, 5000
    nt = n_trials_for(k)
    u = np.random.default_rng(0).random(1 + (k - 1) * nt)
    out = []
    # the feature-major pass (rows in vector lanes) and the row-by-row pass: the same bits
    for threads, chunk, cols in [(1, 1024, True), (2, 1024, True), (2, 7, True), (1, 7, True), (1, 1024, False),
                                 (2, 7, False)]:
        seeds, closest = np.empty(k, dtype=np.int64), np.empty(n)
        kmeanspp_kernel(X, u, nt, seeds, closest, np.empty((nt, n)), np.empty(n), threads, chunk, cols)
        out.append((seeds, closest))
    for seeds, closest in out[1:]:
        np.testing.assert_array_equal(seeds, out[0][0])
        np.testing.assert_array_equal(closest, out[0][1])
    # closest is each row's squared distance to its nearest seed (float64)
    X64 = X.astype(np.float64)
    d2 = ((X64[:, None, :] - X64[out[0][0]][None]) ** 2).sum(2).min(1)
    np.testing.assert_allclose(out[0][1], d2, rtol=1e-12, atol=0)


def test_kmeanspp_all_rows_identical_and_errors():
    seeds = kmeanspp(np.ones((10, 2)), 3, np.random.default_rng(0), n_jobs=2)
    assert seeds.shape == (3,) and ((seeds >= 0) & (seeds < 10)).all()
    with pytest.raises(ValueError, match="n_clusters"):
        kmeanspp(np.ones((3, 2)), 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="2-D"):
        kmeanspp(np.ones(3), 1, np.random.default_rng(0))


def _numpy_lloyd(X, init, max_iter, tol):
    """Plain NumPy Lloyd with the rules of ``fastfc._local_kmeans.lloyd`` (no empty clusters here)."""
    X = np.asarray(X, dtype=np.float64)
    C = np.array(init, dtype=np.float64)
    tol_abs = np.mean(np.var(X, axis=0)) * tol
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        lab = ((X[:, None, :] - C[None]) ** 2).sum(2).argmin(1)
        new = np.array([X[lab == j].mean(0) for j in range(len(C))])
        shift = ((new - C) ** 2).sum()
        C = new
        if shift <= tol_abs:
            break
    d2 = ((X[:, None, :] - C[None]) ** 2).sum(2)
    return C, d2.argmin(1), d2.min(1).sum(), n_iter


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [3, 20])
def test_lloyd_matches_numpy_reference(dtype, d):
    X = _blobs(4000, d, 6, seed=d, dtype=dtype)
    init = X[kmeanspp(X, 6, np.random.default_rng(1))]
    ref = _numpy_lloyd(X, init, 50, 1e-4)
    for n_jobs in (1, 2):
        C, lab, inertia, n_iter = lloyd(X, init, max_iter=50, tol=1e-4, n_jobs=n_jobs)
        assert C.dtype == np.float64 and lab.dtype == np.int32
        np.testing.assert_array_equal(lab, ref[1])
        np.testing.assert_allclose(C, ref[0], rtol=1e-12, atol=1e-12)
        assert inertia == pytest.approx(ref[2], rel=1e-12)
        assert n_iter == ref[3]


def test_lloyd_max_iter_and_tol_zero():
    X = _blobs(3000, 4, 8, seed=5)
    init = X[:8]
    C1, _, _, it1 = lloyd(X, init, max_iter=1, tol=0.0)
    ref = _numpy_lloyd(X, init, 1, 0.0)
    assert it1 == 1
    np.testing.assert_allclose(C1, ref[0], rtol=1e-12, atol=1e-12)


def test_lloyd_relocates_an_empty_cluster():
    X = _blobs(2000, 3, 3, seed=2)
    init = np.vstack([X[:3], np.full((1, 3), 1e6)])  # the far centre gets no rows
    d0 = ((X[:, None, :] - init[None, :3]) ** 2).sum(2).min(1)
    far = int(np.argmax(d0))
    C, lab, _, _ = lloyd(X, init, max_iter=1, tol=0.0, n_jobs=2)
    # after one iteration the empty cluster sits on the row farthest from its centre
    np.testing.assert_array_equal(C[3], X[far])
    assert lab[far] == 3
    C2, lab2, _, _ = lloyd(X, init, max_iter=100, tol=1e-4, n_jobs=1)
    assert np.bincount(lab2, minlength=4).min() > 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_lloyd_same_bits_for_any_threads(dtype):
    X = _blobs(30000, 10, 12, seed=7, dtype=dtype)
    init = X[kmeanspp(X, 12, np.random.default_rng(0))]
    a = lloyd(X, init, max_iter=20, n_jobs=1)
    b = lloyd(X, init, max_iter=20, n_jobs=2)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2] == b[2] and a[3] == b[3]


@pytest.mark.parametrize("Est, kw", [
    (FedKStarHC, dict(micro="kmeans")),
    (FeCA, {}),
    (KFed, {}),
    (FedKMeans, {}),
])
@pytest.mark.parametrize("threshold", ["real", 0])
def test_one_client_labels_same_for_n_jobs_1_and_2(Est, kw, threshold, monkeypatch):
    import fastfc._local_kmeans as lk

    if threshold == 0:  # every client on the threaded engine
        monkeypatch.setattr(lk, "THREADED_MIN_ELEMENTS", 0)
        X = _blobs(6000, 8, 5, seed=11)
    else:  # a client above the real threshold
        X = _blobs(lk.THREADED_MIN_ELEMENTS // 8 + 10, 8, 5, seed=11)
        assert lk.use_threaded_engine(*X.shape)
    a = Est(n_clusters=5, random_state=0, n_jobs=1, **kw).fit(X)
    b = Est(n_clusters=5, random_state=0, n_jobs=2, **kw).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)



def _proximity_ref(A, S):
    d2 = ((A[:, None, :] - S[None]) ** 2).sum(2)
    order = np.argsort(d2, axis=1, kind="stable")
    best = np.take_along_axis(d2, order[:, :1], 1)[:, 0]
    inside = 9.0 * best <= np.take_along_axis(d2, order[:, 1:2], 1)[:, 0] if S.shape[0] > 1 else np.ones(len(A), bool)
    counts = np.bincount(order[inside, 0], minlength=len(S))
    sums = np.zeros_like(S)
    np.add.at(sums, order[inside, 0], A[inside])
    return counts, sums


@pytest.mark.parametrize("k", [1, 2, 7])
def test_proximity_stats_matches_numpy_and_any_threads(k):
    from fastfc._kernels._seed import proximity_stats_kernel

    A = _blobs(9000, 5, 4, seed=k)
    S = A[np.random.default_rng(k).choice(len(A), k, replace=False)].copy()
    ref_counts, ref_sums = _proximity_ref(A, S)
    assert 0 < ref_counts.sum() <= len(A)
    out = []
    for block, threads in [(4096, 1), (4096, 2), (100, 2), (100, 1)]:
        counts, sums = np.zeros(k, dtype=np.int64), np.zeros((k, 5))
        assert proximity_stats_kernel(A, S, counts, sums, block, threads)
        np.testing.assert_array_equal(counts, ref_counts)
        np.testing.assert_allclose(sums, ref_sums, rtol=1e-12, atol=1e-9)
        out.append((block, sums))
    np.testing.assert_array_equal(out[0][1], out[1][1])  # same blocks: same bits for 1 and 2 threads
    np.testing.assert_array_equal(out[2][1], out[3][1])


def test_kfed_local_step_same_bits_for_any_threads():
    from fastfc.kfed import local_awasthi_sheffet

    X = _blobs(20000, 6, 5, seed=4)
    a = local_awasthi_sheffet(X, 5, np.random.default_rng(0), n_init=3, engine="threads", n_threads=1)
    b = local_awasthi_sheffet(X, 5, np.random.default_rng(0), n_init=3, engine="threads", n_threads=2)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    # the same local clustering as the published code's steps on separated blobs (other draws and roundings)
    c = local_awasthi_sheffet(X, 5, np.random.default_rng(0), n_init=3)
    from sklearn.metrics import adjusted_rand_score
    assert adjusted_rand_score(a[1], c[1]) == 1.0


def test_small_clients_keep_the_one_thread_scikit_learn_steps(monkeypatch):
    """Below the threshold (a function of the shape only) k-FED and Fed-k*-HC give the results they
    gave before issue 15; above it the threaded engine runs (other roundings and draws)."""
    import fastfc._local_kmeans as lk
    X = _blobs(3000, 5, 4, seed=9)
    assert not lk.use_threaded_engine(*X.shape)
    calls = []
    real = lk.lloyd
    monkeypatch.setattr(lk, "lloyd", lambda *a, **k: calls.append(1) or real(*a, **k))
    small = KFed(n_clusters=4, random_state=0, n_jobs=2).fit(X)
    FedKStarHC(n_clusters=4, micro="kmeans", random_state=0, n_jobs=2).fit(X)
    assert calls == []
    monkeypatch.setattr(lk, "THREADED_MIN_ELEMENTS", 0)
    big = KFed(n_clusters=4, random_state=0, n_jobs=2).fit(X)
    assert len(calls) == 6  # local_n_init=5 starts of local_start_iter=2 iterations, then the best one on
    FedKStarHC(n_clusters=4, micro="kmeans", random_state=0, n_jobs=2).fit(X)
    assert len(calls) == 7
    from sklearn.metrics import adjusted_rand_score
    assert adjusted_rand_score(small.labels_, big.labels_) == 1.0  # separated blobs: the same clustering


# ---------------------------------------------------------------- subsample restarts (large clients)
def test_subsample_size_depends_on_shape_and_k_only():
    """Large clients only: below SUBSAMPLE_MIN_ROWS (above every published split's 2,747 rows per
    client and the sanity grid's 2,000) nothing is subsampled, so those results stay as before."""
    import fastfc._local_kmeans as lk

    assert lk.SUBSAMPLE_MIN_ROWS > 2747
    for k in (1, 10, 50, 64):
        assert lk.subsample_size(lk.SUBSAMPLE_MIN_ROWS - 1, k) is None
        assert lk.subsample_size(2747, k) is None
        assert lk.subsample_size(10 ** 4, k) == max(lk.SUBSAMPLE_MIN, lk.SUBSAMPLE_PER_CLUSTER * k)
    m = lk.SUBSAMPLE_PER_CLUSTER * 500  # a large k needs twice its subsample
    assert lk.subsample_size(2 * m - 1, 500) is None and lk.subsample_size(2 * m, 500) == m
    rows = lk.subsample_rows(10 ** 5, 2048, np.random.default_rng(3))
    np.testing.assert_array_equal(rows, lk.subsample_rows(10 ** 5, 2048, np.random.default_rng(3)))
    assert rows.shape == (2048,) and np.unique(rows).size == 2048 and (np.diff(rows) > 0).all()
    assert rows[0] >= 0 and rows[-1] < 10 ** 5


def test_kfed_subsample_local_step_same_bits_for_any_threads_and_a_lloyd_fixed_point():
    """k-FED's starts on a subsample: the same bits for 1 and 2 threads; the returned centres are
    the Lloyd fixed point on all rows (labels = NumPy nearest centre, centres = their rows' means
    to within the tolerance) and find the blobs."""
    from sklearn.metrics import adjusted_rand_score

    from fastfc.kfed import local_awasthi_sheffet

    rng = np.random.default_rng(4)
    means = rng.normal(scale=8.0, size=(5, 6))
    truth = rng.integers(5, size=20000)
    X = means[truth] + rng.normal(size=(20000, 6))
    a = local_awasthi_sheffet(X, 5, np.random.default_rng(0), n_init=3, engine="threads", n_threads=1,
                              subsample=2048)
    b = local_awasthi_sheffet(X, 5, np.random.default_rng(0), n_init=3, engine="threads", n_threads=2,
                              subsample=2048)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    C, lab = a
    d2 = ((X[:, None, :] - C[None]) ** 2).sum(2)
    np.testing.assert_array_equal(lab, d2.argmin(1))
    means_now = np.array([X[lab == j].mean(0) for j in range(5)])
    assert ((means_now - C) ** 2).sum() <= 1e-4 * np.mean(np.var(X, axis=0))
    assert adjusted_rand_score(truth, lab) == 1.0
    # the subsample is drawn from the client's stream: another stream, another subsample (other draws)
    c = local_awasthi_sheffet(X, 5, np.random.default_rng(1), n_init=3, engine="threads", subsample=2048)
    assert adjusted_rand_score(truth, c[1]) == 1.0


def test_kstar_partition_subsample_equals_numpy_reference():
    """Fed-k*-HC's micro-partition of a large client: greedy k-means++ and Lloyd on the subsample
    drawn from the client's seed, then every row to its nearest centre (NumPy argmin, exact
    distances), relabelled 0..k'-1; the same labels for 1 and 2 threads."""
    import fastfc._local_kmeans as lk
    from fastfc._parallel import sklearn_seed
    from fastfc.fed_kstar_hc import kmeans_partition

    X = _blobs(12000, 4, 6, seed=21)
    k = 20
    m = lk.subsample_size(X.shape[0], k)
    assert m is not None and m < X.shape[0]
    got = [kmeans_partition(X, np.random.default_rng(5), k=k, n_threads=t) for t in (1, 2)]
    np.testing.assert_array_equal(got[0], got[1])
    gen = np.random.default_rng(sklearn_seed(np.random.default_rng(5)))
    Xs = X[lk.subsample_rows(X.shape[0], m, gen)]
    C = lloyd(Xs, Xs[kmeanspp(Xs, k, gen)], max_iter=30, tol=1e-4)[0]
    ref = ((X[:, None, :] - C[None]) ** 2).sum(2).argmin(1)
    np.testing.assert_array_equal(got[0], np.unique(ref, return_inverse=True)[1])


@pytest.mark.parametrize("Est, kw", [(KFed, {}), (FedKStarHC, dict(micro="kmeans")), (FeCA, {})])
def test_subsampled_clients_labels_same_for_n_jobs_1_and_2(Est, kw):
    """Two clients just above SUBSAMPLE_MIN_ROWS (below the threaded engine's 2**18 values): the
    subsample path, the same labels and centres for any n_jobs, and the blobs found."""
    import fastfc._local_kmeans as lk
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(8)
    means = rng.normal(scale=8.0, size=(5, 6))
    truth = rng.integers(5, size=2 * (lk.SUBSAMPLE_MIN_ROWS + 100))
    X = means[truth] + rng.normal(size=(truth.size, 6))
    half = truth.size // 2
    assert lk.subsample_size(half, 10) is not None and not lk.use_threaded_engine(half, 6)
    a = Est(n_clusters=5, random_state=0, n_jobs=1, **kw).fit_clients([X[:half], X[half:]])
    b = Est(n_clusters=5, random_state=0, n_jobs=2, **kw).fit_clients([X[:half], X[half:]])
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    assert adjusted_rand_score(truth, a.labels_) == 1.0


def test_nested_blas_limit_is_a_no_op_only_inside_the_same_limit():
    """``limit_blas_threads(n)`` inside this thread's own ``limit_blas_threads(n)`` does nothing; any
    other nesting still sets the limit, and every limit is undone on exit."""
    from threadpoolctl import threadpool_info

    from contextlib import nullcontext

    from fastfc._parallel import limit_blas_threads

    def blas_threads():
        return sorted({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})

    before = blas_threads()
    if not before:
        pytest.skip("no BLAS pool visible to threadpoolctl")
    with limit_blas_threads(1):
        assert blas_threads() == [1]
        inner = limit_blas_threads(1)
        assert isinstance(inner, nullcontext)
        with inner:
            assert blas_threads() == [1]
        assert blas_threads() == [1]
        with limit_blas_threads(2):
            assert blas_threads() == [2]
            assert not isinstance(limit_blas_threads(1), nullcontext)
        assert blas_threads() == [1]
    assert blas_threads() == before
    assert not isinstance(limit_blas_threads(1), nullcontext)


@pytest.mark.parametrize("shape", [(2048, 50), (30000, 10), (6000, 1), (70000, 7)])
def test_mean_feature_variance_same_bits_for_any_n_jobs(shape):
    """``mean_feature_variance`` takes two fixed column halves (threaded only for large X): the
    same bits for n_jobs 1, 2 and -1, equal to the mean of the halves' NumPy variances."""
    from fastfc._local_kmeans import mean_feature_variance

    X = np.random.default_rng(shape[0]).normal(size=shape) * 3.0
    d = shape[1]
    halves = [slice(0, d // 2), slice(d // 2, d)] if d >= 2 else [slice(0, d)]
    expect = float(np.mean(np.concatenate([np.var(X[:, sl], axis=0) for sl in halves])))
    for nj in (1, 2, -1):
        assert mean_feature_variance(X, nj) == expect
