"""pytest-benchmark: nearest-prototype kernel vs scikit-learn's pairwise_distances_argmin.

Run with ``python -m pytest benchmarks/test_bench_kernels.py --benchmark-enable``.
"""
import numpy as np
import pytest
from sklearn.metrics import pairwise_distances_argmin

from fastfc._assign import assign_nearest

SHAPES = [(100_000, 16, 10), (100_000, 100, 10), (100_000, 2, 15), (100_000, 36, 50), (100_000, 64, 64)]


@pytest.fixture(scope="module", params=SHAPES, ids=lambda s: "n%d-d%d-k%d" % s)
def data(request):
    n, d, k = request.param
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, d)), rng.standard_normal((k, d))


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_fastfc(benchmark, data, n_jobs):
    X, C = data
    labels = benchmark(assign_nearest, X, C, n_jobs=n_jobs)
    assert labels.shape == (len(X),)


def test_sklearn(benchmark, data):
    X, C = data
    labels = benchmark(pairwise_distances_argmin, X, C)
    assert labels.shape == (len(X),)


LLOYD_SHAPE = (1_000_000, 50, 10)


@pytest.fixture(scope="module", params=["float64", "float32"])
def lloyd_data(request):
    n, d, k = LLOYD_SHAPE
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d)).astype(request.param)
    return X, np.asarray(X[rng.choice(n, k, replace=False)], dtype=np.float64)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_lloyd_stats_fastfc(benchmark, lloyd_data, n_jobs):
    """One round's client statistics (counts, sums, inertia) on 10^6 x 50 rows, k = 10."""
    from fastfc._lloyd import lloyd_stats

    X, C = lloyd_data
    counts, sums, inertia = benchmark(lloyd_stats, X, C, n_jobs=n_jobs)
    assert counts.sum() == len(X)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_lloyd_iteration_sklearn(benchmark, lloyd_data, n_jobs):
    """One scikit-learn Lloyd iteration on the same rows (see benchmarks/lloyd_pass.py)."""
    from benchmarks.lloyd_pass import sklearn_iteration

    X, C = lloyd_data
    run, _ = sklearn_iteration(X, C, n_jobs)
    benchmark(run)
