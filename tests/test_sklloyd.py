"""The compiled one-thread Lloyd (``fastfc._kernels._sklloyd``) and the direct k-means++ of k-FED's server.

Claims protected:

* :func:`fastfc._sklloyd.single_lloyd` returns the same labels, centres, inertia and
  iteration count, bit for bit, as scikit-learn's ``_kmeans_single_lloyd(..., n_threads=1)``
  (the published-split results of k-FED and FeCA rest on it), over random problems in
  float32 and float64: unit and non-unit weights, clusters that end empty (relocation),
  ``tol=0``, ``max_iter=1`` and chunk boundaries (256 rows).
* it is Lloyd's algorithm: against a plain NumPy Lloyd on well-separated data (no near-ties,
  so the labels must agree exactly and the centres to rounding).
* :func:`fastfc.kfed.kmeanspp_direct` draws the same seeds as scikit-learn's
  ``_kmeans_plusplus`` from the same ``RandomState`` and leaves it in the same state.
* :func:`fastfc.kfed.lloyd_best_of` is the best of :func:`fastfc.kfed.lloyd_from` over the starts.
"""
import numpy as np
import pytest

from fastfc._sklloyd import HAVE_KERNEL, single_lloyd
from fastfc._parallel import pinned_worker

pytestmark = pytest.mark.skipif(not HAVE_KERNEL, reason="scikit-learn's private Lloyd routines not available")


def _problem(rng, dtype):
    n = int(rng.integers(1, 700))
    d = int(rng.integers(1, 40))
    k = int(rng.integers(1, min(n, 30) + 1))
    m = int(rng.integers(1, 6))
    X = (rng.normal(size=(m, d)) * rng.uniform(1, 8))[rng.integers(m, size=n)] + rng.normal(size=(n, d))
    if rng.random() < 0.15:
        X = np.round(X)  # duplicate rows: clusters end empty
    X = X.astype(dtype)
    X -= X.mean(axis=0)
    w = np.ones(n, dtype) if rng.random() < 0.7 else rng.uniform(0.5, 2.0, size=n).astype(dtype)
    init = X[rng.choice(n, k, replace=False)].copy()
    if rng.random() < 0.1:
        init[:] = init[0]  # every start on one point: empties from the first iteration
    tol = float(rng.choice([0.0, 1e-6, 1e-4, 1e-2])) * float(np.mean(np.var(X, axis=0)))
    max_iter = int(rng.choice([1, 2, 5, 300]))
    return X, w, init, max_iter, tol


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_single_lloyd_is_sklearn_lloyd_bit_for_bit(dtype):
    from sklearn.cluster._kmeans import _kmeans_single_lloyd

    rng = np.random.default_rng(7 if dtype is np.float64 else 8)
    with pinned_worker():
        for _ in range(300):
            X, w, init, max_iter, tol = _problem(rng, dtype)
            ref = _kmeans_single_lloyd(X, w, init.copy(), max_iter=max_iter, tol=tol, n_threads=1)
            got = single_lloyd(X, w, init.copy(), max_iter=max_iter, tol=tol)
            np.testing.assert_array_equal(got[0], ref[0])
            assert got[0].dtype == np.int32
            assert got[1] == ref[1]
            np.testing.assert_array_equal(got[2], ref[2])
            assert got[2].dtype == ref[2].dtype
            assert got[3] == ref[3]


@pytest.mark.parametrize("n", [255, 256, 257, 512, 513, 1000])
def test_single_lloyd_chunk_boundaries(n):
    from sklearn.cluster._kmeans import _kmeans_single_lloyd

    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, 7)) + rng.integers(0, 4, n)[:, None] * 2.0
    X -= X.mean(axis=0)
    w = np.ones(n)
    init = X[:5].copy()
    with pinned_worker():
        ref = _kmeans_single_lloyd(X, w, init.copy(), max_iter=300, tol=1e-6, n_threads=1)
        got = single_lloyd(X, w, init.copy(), max_iter=300, tol=1e-6)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[2], ref[2])
    assert (got[1], got[3]) == (ref[1], ref[3])


def _numpy_lloyd(X, init, max_iter, tol):
    """Plain Lloyd: nearest centre by exact distance, means, stop on unchanged labels or shift <= tol."""
    C = init.astype(np.float64)
    X64 = X.astype(np.float64)
    old = None
    for it in range(max_iter):
        labels = ((X64[:, None, :] - C[None]) ** 2).sum(-1).argmin(1)
        new = np.array([X64[labels == j].mean(0) for j in range(len(C))])
        shift = ((new - C) ** 2).sum()
        C = new
        if old is not None and np.array_equal(labels, old):
            break
        if shift <= tol:
            break
        old = labels
    labels = ((X64[:, None, :] - C[None]) ** 2).sum(-1).argmin(1)
    return labels, C


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_single_lloyd_is_lloyd_on_separated_data(dtype):
    rng = np.random.default_rng(3)
    means = rng.normal(size=(4, 5)) * 50
    y = rng.integers(0, 4, 600)
    y[:4] = np.arange(4)
    X = (means[y] + rng.normal(size=(600, 5))).astype(dtype)
    X -= X.mean(axis=0)
    init = X[:4].copy()  # one row of each cluster: no cluster ends empty
    with pinned_worker():
        labels, inertia, centers, _ = single_lloyd(X, np.ones(600, dtype), init.copy(), max_iter=300, tol=0.0)
    ref_labels, ref_centers = _numpy_lloyd(X, init, 300, 0.0)
    np.testing.assert_array_equal(labels, ref_labels)
    rtol = 1e-5 if dtype is np.float32 else 1e-12
    np.testing.assert_allclose(centers, ref_centers, rtol=rtol, atol=rtol * np.abs(ref_centers).max())
    ref_inertia = ((X.astype(np.float64) - ref_centers[ref_labels]) ** 2).sum()
    assert inertia == pytest.approx(ref_inertia, rel=1e-4 if dtype is np.float32 else 1e-10)


@pytest.mark.parametrize("case", ["strided", "threads", "int"])
def test_single_lloyd_falls_back_off_its_domain(case, monkeypatch):
    """Non-contiguous or non-float data, or several OpenMP threads: scikit-learn's routine itself."""
    import fastfc._sklloyd as mod

    calls = []
    monkeypatch.setattr(mod, "_kmeans_single_lloyd", lambda *a, **kw: calls.append(kw) or "sklearn")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 8))
    n_threads = 1
    if case == "strided":
        X = X[:, ::2]
    elif case == "threads":
        n_threads = 2
    else:
        X = np.round(X * 10).astype(np.int64)
    w = np.ones(300, dtype=X.dtype)
    init = np.ascontiguousarray(X[:3])
    assert single_lloyd(X, w, init, max_iter=50, tol=1e-4, n_threads=n_threads) == "sklearn"
    assert calls == [dict(max_iter=50, tol=1e-4, n_threads=n_threads)]


def test_kmeanspp_direct_is_sklearn_kmeans_plusplus():
    from sklearn.cluster._kmeans import _kmeans_plusplus
    from sklearn.utils.extmath import row_norms

    from fastfc.kfed import kmeanspp_direct

    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(2, 300))
        d = int(rng.integers(1, 30))
        k = int(rng.integers(1, min(n, 30) + 1))
        X = rng.normal(size=(n, d)) * rng.uniform(0.1, 10)
        if rng.random() < 0.2:
            X = np.round(X)
        X -= X.mean(axis=0)
        norms = row_norms(X, squared=True)
        w = np.ones(n) if rng.random() < 0.8 else rng.uniform(0.2, 3.0, size=n)
        seed = int(rng.integers(1 << 30))
        rs_ref, rs_got = np.random.RandomState(seed), np.random.RandomState(seed)
        ref = _kmeans_plusplus(X, k, random_state=rs_ref, x_squared_norms=norms, sample_weight=w)
        got = kmeanspp_direct(X, k, rs_got, norms, w)
        np.testing.assert_array_equal(got[0], ref[0])
        np.testing.assert_array_equal(got[1], ref[1])
        assert rs_got.randint(1 << 30) == rs_ref.randint(1 << 30)


@pytest.mark.parametrize("in_place", [False, True])
def test_lloyd_best_of_is_best_lloyd_from(in_place):
    from fastfc.kfed import lloyd_best_of, lloyd_from

    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 6)) + rng.integers(0, 5, 500)[:, None] * 1.5
    inits = [X[rng.choice(500, 5, replace=False)] for _ in range(5)]
    runs = [lloyd_from(X, init, max_iter=300, tol=1e-4) for init in inits]
    best = min(range(5), key=lambda s: (runs[s][2], s))
    work = X.copy()
    got = lloyd_best_of(work, inits, max_iter=300, tol=1e-4, in_place=in_place)
    np.testing.assert_array_equal(got[0], runs[best][0])
    np.testing.assert_array_equal(got[1], runs[best][1])
    assert got[2] == runs[best][2]
    if not in_place:
        np.testing.assert_array_equal(work, X)


def test_top_eigenvectors_is_scipy_eigh_subset():
    """k-FED's projection: the direct LAPACK call gives eigh's eigenvectors bit for bit."""
    import scipy.linalg

    from fastfc.kfed import _top_eigenvectors

    rng = np.random.default_rng(2)
    for _ in range(300):
        n, d = int(rng.integers(2, 200)), int(rng.integers(2, 40))
        r = int(rng.integers(1, d + 1))
        X = rng.normal(size=(n, d)) * rng.uniform(0.1, 5.0, size=d)
        if rng.random() < 0.2:
            X[:, 0] = X[:, 1]  # a repeated eigenvalue
        gram = X.T @ X
        ref = scipy.linalg.eigh(gram, subset_by_index=[d - r, d - 1])[1]
        got = _top_eigenvectors(gram, r)
        assert got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)


def _pp_problem(rng):
    n = int(rng.integers(1, 1500))
    d = int(rng.integers(1, 30))
    k = int(rng.integers(1, min(n, 60) + 1))
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 10, size=d)
    if rng.random() < 0.2:
        X = np.round(X)  # ties in the distances and duplicate rows
    if rng.random() < 0.1:
        X[: n // 2] = X[0]  # many rows on one point: zero potentials
    X -= X.mean(axis=0)
    w = np.ones(n) if rng.random() < 0.7 else rng.uniform(0.2, 3.0, size=n)
    return X, k, w


def test_kmeans_plusplus_kernel_is_sklearn_kmeans_plusplus():
    """The compiled greedy k-means++ (Fed-k*-HC's micro-partition, k-FED's server) draws scikit-learn's
    seeds from the same RandomState, leaves it in the same state, and equals the plain NumPy steps of
    :func:`fastfc.kfed.kmeanspp_direct` (its reference)."""
    from sklearn.cluster._kmeans import _kmeans_plusplus
    from sklearn.utils.extmath import row_norms

    from fastfc._sklloyd import kmeans_plusplus
    from fastfc.kfed import kmeanspp_direct

    rng = np.random.default_rng(11)
    for _ in range(300):
        X, k, w = _pp_problem(rng)
        norms = row_norms(X, squared=True)
        seed = int(rng.integers(1 << 30))
        rs_ref, rs_got, rs_np = (np.random.RandomState(seed) for _ in range(3))
        ref = _kmeans_plusplus(X, k, random_state=rs_ref, x_squared_norms=norms, sample_weight=w)
        got = kmeans_plusplus(X, k, rs_got, norms, w)
        plain = kmeanspp_direct(X, k, rs_np, norms, w)
        for a in (got, plain):
            np.testing.assert_array_equal(a[0], ref[0])
            np.testing.assert_array_equal(a[1], ref[1])
        assert rs_got.randint(1 << 30) == rs_ref.randint(1 << 30) == rs_np.randint(1 << 30)


def test_kmeans_plusplus_falls_back_off_its_domain():
    """float32 rows (and a Generator, which scikit-learn's routine rejects itself) go to scikit-learn."""
    from sklearn.cluster._kmeans import _kmeans_plusplus
    from sklearn.utils.extmath import row_norms

    from fastfc._sklloyd import kmeans_plusplus

    X = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
    norms, w = row_norms(X, squared=True), np.ones(200, np.float32)
    ref = _kmeans_plusplus(X, 7, random_state=np.random.RandomState(3), x_squared_norms=norms, sample_weight=w)
    got = kmeans_plusplus(X, 7, np.random.RandomState(3), norms, w)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])


@pytest.mark.parametrize("copy_x", [True, False])
def test_kmeans_fit_is_sklearn_kmeans_fit(copy_x):
    """``kmeans_fit`` (Fed-k*-HC's micro-partition of small clients) = ``KMeans(n_init=1).fit``: labels,
    centres, inertia, iterations, the in-place change of ``X`` with ``copy_x=False``, and the
    ConvergenceWarning on duplicate rows."""
    import warnings

    from sklearn.cluster import KMeans

    from fastfc._sklloyd import kmeans_fit

    rng = np.random.default_rng(12 + copy_x)
    warned = 0
    with pinned_worker():
        for i in range(80):
            X, k, _ = _pp_problem(rng)
            X += rng.normal(size=X.shape[1]) * 5  # not centred
            if i % 10 == 0 and X.shape[0] >= 4:
                X = X[rng.integers(0, 3, size=X.shape[0])]  # three distinct rows: clusters end empty
                k = max(k, 4)
            max_iter = int(rng.choice([1, 5, 30, 300]))
            X_ref, X_got = X.copy(), X.copy()
            with warnings.catch_warnings(record=True) as w_ref:
                warnings.simplefilter("always")
                km = KMeans(n_clusters=k, n_init=1, max_iter=max_iter, random_state=i, copy_x=copy_x).fit(X_ref)
            with warnings.catch_warnings(record=True) as w_got:
                warnings.simplefilter("always")
                labels, centers, inertia, n_iter = kmeans_fit(X_got, k, max_iter=max_iter, random_state=i,
                                                              copy_x=copy_x)
            np.testing.assert_array_equal(labels, km.labels_)
            np.testing.assert_array_equal(centers, km.cluster_centers_)
            assert inertia == km.inertia_ and n_iter == km.n_iter_
            np.testing.assert_array_equal(X_got, X_ref)  # copy_x=False: the same rounding left in X
            assert [(type(m.message), str(m.message)) for m in w_got] == \
                [(type(m.message), str(m.message)) for m in w_ref]
            warned += bool(w_ref)
    assert warned  # the warning case was exercised


def test_random_state_of_is_randomstate_of_the_seed():
    """``random_state_of(seed)`` (one re-seeded generator per thread) has RandomState(seed)'s state and stream,
    also after an earlier one was used, and in another thread at the same time."""
    import threading

    from fastfc._sklloyd import random_state_of

    def same(a, b):
        sa, sb = a.get_state(), b.get_state()
        return all(np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y for x, y in zip(sa, sb))

    seeds = [0, 1, 7, 123456, 2 ** 31 - 2, 2 ** 32 - 1, np.int64(99)]
    for s in seeds:
        got, ref = random_state_of(s), np.random.RandomState(s)
        assert same(got, ref)
        np.testing.assert_array_equal(got.random_sample(50), ref.random_sample(50))
        assert got.choice(10, p=np.full(10, 0.1)) == ref.choice(10, p=np.full(10, 0.1))
        np.testing.assert_array_equal(got.standard_normal(3), ref.standard_normal(3))
    for bad in (None, -1, 2 ** 32):  # not a legacy int seed: RandomState's own behaviour (or error)
        if bad is None:
            assert isinstance(random_state_of(bad), np.random.RandomState)
        else:
            with pytest.raises(ValueError):
                random_state_of(bad)
    out = {}

    def draw(i):
        rs = random_state_of(1000 + i)
        out[i] = [rs.random_sample(200) for _ in range(50)]

    threads = [threading.Thread(target=draw, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        ref = np.random.RandomState(1000 + i)
        for a in out[i]:
            np.testing.assert_array_equal(a, ref.random_sample(200))
