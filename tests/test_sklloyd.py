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
