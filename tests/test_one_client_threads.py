"""One client, several threads (issue 15, "parallel inside a client"): the threaded paths of a
single large client -- the split standardisation, the CPL pass choice, the subcluster statistics on
two threads, the shift of the units -- give the very bits of ``n_jobs=1`` for every estimator."""
import numpy as np
import pytest

import fastfc
from fastfc.fed_kstar_hc import subcluster_statistics


def _mixture(n, d, k, seed):
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=6.0, size=(k, d))
    return means[rng.integers(k, size=n)] + rng.normal(size=(n, d))


@pytest.mark.parametrize("name", ["FeCA", "KFed", "FedKMeans", "FedKStarHC", "FedHIRE", "GOLD"])
def test_one_large_client_same_labels_for_n_jobs_1_2_all(name):
    """``fit(X)`` of one client of 30000 x 10 (above every split threshold: 2**18 values, the
    CPL's parallel row minimum, the subcluster statistics' two-thread split): n_jobs 1, 2 and -1
    give the same labels and centres."""
    X = _mixture(30000, 10, 6, 3)
    Est = getattr(fastfc, name)
    fits = [Est(n_clusters=6, random_state=2, n_jobs=nj).fit(X) for nj in (1, 2, -1)]
    for f in fits[1:]:
        np.testing.assert_array_equal(fits[0].labels_, f.labels_)
        np.testing.assert_array_equal(fits[0].cluster_centers_, f.cluster_centers_)


@pytest.mark.parametrize("shape", [(60000, 10), (120000, 12), (5000, 30), (300000, 2)])
@pytest.mark.parametrize("n_sub", [0, 2])
def test_subcluster_statistics_rows_and_threads_same_bits(shape, n_sub):
    """The statistics of the kept rows given by index (``rows``) on one or two threads are the bits
    of the statistics of the copy ``X[kept]`` on one thread (the compiled moments on one and two
    threads; with substitutes the draws stay in order)."""
    rng = np.random.default_rng(shape[0] + shape[1])
    X = rng.normal(size=shape) * rng.uniform(0.1, 10, size=shape[1])
    labels = rng.integers(37, size=shape[0])
    labels[::5] = -1
    kept = labels >= 0
    want = subcluster_statistics(X[kept], labels[kept], np.random.default_rng(4), n_substitutes=n_sub)
    for nt in (1, 2):
        got = subcluster_statistics(X, labels[kept], np.random.default_rng(4), n_substitutes=n_sub,
                                    rows=np.flatnonzero(kept), n_threads=nt)
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_shift_scale_threads_is_numpys_formula(dtype):
    """The compiled shift on two fixed row halves is ``(X - mean) / scale`` of NumPy, for any n_jobs."""
    from fastfc._units import SPLIT_MIN_ELEMENTS, shift_scale_threads

    rng = np.random.default_rng(5)
    X = (rng.normal(size=(40000, 9)) * 50 + 3).astype(dtype).astype(np.float64)
    assert X.size >= SPLIT_MIN_ELEMENTS
    mean, scale = X.mean(axis=0), X.std(axis=0) * 0.3
    for nj in (1, 2, -1):
        np.testing.assert_array_equal(shift_scale_threads(X, mean, scale, nj), (X - mean) / scale)


@pytest.mark.parametrize("shape", [(40000, 7), (6000, 50), (262145, 1)])
def test_threads_engine_gram_is_the_sum_of_two_fixed_halves(shape):
    """k-FED's ``"threads"`` engine takes a large client's Gram matrix as ``G_0 + G_1`` of two fixed row
    halves (issue 15): those bits for n_threads 1 and 2, and ``X^T X`` up to rounding; a small client
    keeps the one call."""
    from fastfc._units import SPLIT_MIN_ELEMENTS
    from fastfc.kfed import _gram_threads

    rng = np.random.default_rng(shape[1])
    X = rng.normal(size=shape) * rng.uniform(0.5, 20, size=shape[1]) + 3.0
    assert X.size >= SPLIT_MIN_ELEMENTS
    h = shape[0] // 2
    want = X[:h].T @ X[:h] + X[h:].T @ X[h:]
    for nt in (1, 2):
        np.testing.assert_array_equal(_gram_threads(X, nt), want)
    np.testing.assert_allclose(want, X.T @ X, rtol=1e-10, atol=1e-10 * np.abs(X.T @ X).max())
    small = X[:100, :50]
    np.testing.assert_array_equal(_gram_threads(small, 2), small.T @ small)


def test_run_parts_in_order_within_the_budget_and_nested_inline():
    """``_run_parts`` returns the parts' results in order for any budget and number of parts, runs at
    most ``n_jobs`` of them at once (the caller and ``n_jobs - 1`` helper threads), and a hand-off from
    a helper thread runs inline (it never waits for another helper, so it cannot deadlock)."""
    import threading
    import time

    from fastfc._units import _run_parts

    for n_jobs in (1, 2, 3, -1):
        for n_parts in (1, 2, 3, 5):
            assert _run_parts(lambda p: p * p, list(range(n_parts)), n_jobs) == [p * p for p in range(n_parts)]
    lock = threading.Lock()
    running = [0, 0]  # now, most at once

    def work(p):
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return p

    assert _run_parts(work, list(range(6)), 2) == list(range(6))
    assert running[1] == 2
    outer = _run_parts(lambda p: (threading.current_thread().name,
                                  _run_parts(lambda q: threading.current_thread().name, [0, 1], 2)), [0, 1], 2)
    helper_name, inner = outer[1]
    assert helper_name.startswith("fastfc-helper") and inner == [helper_name, helper_name]


def test_run_parts_waits_for_its_helpers_before_raising():
    """An error in the caller's own part is raised only after the helpers' parts finished (they write
    into the caller's buffers); an error in a helper's part is raised to the caller."""
    import time

    from fastfc._units import _run_parts

    done = []

    def work(p):
        if p == 0:
            raise KeyError("own part")
        time.sleep(0.05)
        done.append(p)

    with pytest.raises(KeyError):
        _run_parts(work, [0, 1], 2)
    assert done == [1]
    with pytest.raises(ZeroDivisionError):
        _run_parts(lambda p: 1 / p, [1, 0], 2)


def test_helper_pool_works_in_a_forked_child():
    """A child forked after the helper threads started gets its own (the parent's are gone there):
    a threaded pass in the child finishes with the right result."""
    import os

    from fastfc._units import _run_parts

    assert _run_parts(lambda p: p + 1, [1, 2], 2) == [2, 3]  # the parent's helpers exist
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        ok = False
        try:
            ok = _run_parts(lambda p: p * 10, [1, 2, 3], 2) == [10, 20, 30]
        finally:
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    os.close(r)
    assert got == b"1"


def test_kernel_threads_small_passes_on_one_thread():
    """A compiled pass below the work threshold runs on one thread whatever ``n_jobs`` is; from the
    threshold on it gets ``n_jobs``; ``n_jobs`` is validated either way."""
    from fastfc._parallel import PARALLEL_MIN_WORK, kernel_threads

    assert kernel_threads(2, PARALLEL_MIN_WORK - 1) == 1
    assert kernel_threads(2, PARALLEL_MIN_WORK) == 2
    assert kernel_threads(None, 10**9) == 1
    assert kernel_threads(1, 10**9) == 1
    with pytest.raises(ValueError):
        kernel_threads(0, 10)


@pytest.mark.parametrize("shape", [(2000, 10, 50), (2048, 10, 10), (8000, 10, 50), (2000, 50, 50)])
def test_small_and_large_passes_same_bits_for_any_n_jobs(shape):
    """Seeding, one Lloyd pass and the labelling on both sides of the work thresholds (a 2,000-row
    subsample at d = 10 runs on one thread, at d = 50 on two) give the same bits for n_jobs 1 and 2."""
    from fastfc._assign import assign_nearest
    from fastfc._lloyd import lloyd_stats
    from fastfc._local_kmeans import kmeanspp

    n, d, k = shape
    X = _mixture(n, d, 7, n + d)
    C = X[:: n // k][:k].copy()
    want = (kmeanspp(X, k, np.random.default_rng(3), n_jobs=1), lloyd_stats(X, C, n_jobs=1),
            assign_nearest(X, C, n_jobs=1, return_distances=True))
    got = (kmeanspp(X, k, np.random.default_rng(3), n_jobs=2), lloyd_stats(X, C, n_jobs=2),
           assign_nearest(X, C, n_jobs=2, return_distances=True))
    np.testing.assert_array_equal(want[0], got[0])
    for a, b in zip(want[1] + want[2], got[1] + got[2]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_label_sums_halves_for_any_n_jobs(dtype):
    """A large client's refinement sums (``_refine.label_sums``) are its two fixed row halves' deviation
    sums added in order -- the same bits for n_jobs 1, 2 and -1 -- and NumPy's per-cluster sums up to
    rounding; a small client is one pass."""
    from fastfc import _units
    from fastfc._refine import label_sums

    rng = np.random.default_rng(11)
    centers = rng.normal(scale=50.0, size=(7, 9))
    for n in (50000, 300):
        labels = rng.integers(7, size=n)
        X = (centers[labels] + rng.normal(size=(n, 9))).astype(dtype)
        assert _units.large_moments(X) == (n == 50000)
        got = [label_sums(X, labels, centers, nj) for nj in (1, 2, -1)]
        for c, s in got[1:]:
            np.testing.assert_array_equal(c, got[0][0])
            np.testing.assert_array_equal(s, got[0][1])
        counts, sums = got[0]
        np.testing.assert_array_equal(counts, np.bincount(labels, minlength=7))
        want = np.stack([X[labels == j].astype(np.float64).sum(axis=0) for j in range(7)])
        np.testing.assert_allclose(sums, want, rtol=1e-12, atol=1e-9 * np.abs(want).max())
        if n == 50000:  # the halves' deviation sums (the one-pass kernel's), added in order
            from fastfc._kernels._feca import cluster_stats

            devs = []
            for sl in (slice(0, n // 2), slice(n // 2, n)):
                c, dev = np.zeros(7, dtype=np.int64), np.zeros((7, 9))
                cluster_stats(np.ascontiguousarray(X[sl]), labels[sl].astype(np.int64), centers, c, dev,
                              *[np.zeros(7) for _ in range(3)])
                devs.append(dev)
            np.testing.assert_array_equal(sums, counts[:, None] * centers + (devs[0] + devs[1]))
