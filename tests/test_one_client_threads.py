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
    of the statistics of the copy ``X[kept]`` on one thread (segmented and per-subcluster paths;
    with substitutes the draws stay in order)."""
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
