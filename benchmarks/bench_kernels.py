"""asv benchmarks of the compiled kernels against their closest public counterpart.

Nearest-prototype assignment (the ``predict`` of every method): ours, serial and
on two threads, next to ``sklearn.metrics.pairwise_distances_argmin`` on the
same float64 data, for n up to 10^6 rows.
"""
import numpy as np
from sklearn.metrics import pairwise_distances_argmin

from fastfc._assign import assign_nearest


class AssignNearest:
    params = ([10_000, 100_000, 1_000_000], [(16, 10), (100, 10), (36, 50)], ["fastfc-1", "fastfc-2", "sklearn"])
    param_names = ["n_samples", "d_k", "impl"]
    timeout = 300

    def setup(self, n_samples, d_k, impl):
        d, k = d_k
        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((n_samples, d))
        self.C = rng.standard_normal((k, d))
        assign_nearest(self.X[:10], self.C)  # load the extension

    def _run(self, impl):
        if impl == "sklearn":
            return pairwise_distances_argmin(self.X, self.C)
        return assign_nearest(self.X, self.C, n_jobs=int(impl[-1]))

    def time_assign(self, n_samples, d_k, impl):
        self._run(impl)

    def peakmem_assign(self, n_samples, d_k, impl):
        self._run(impl)


class AssignWeighted:
    params = ([100_000, 1_000_000], [1, 2])
    param_names = ["n_samples", "n_jobs"]
    timeout = 300

    def setup(self, n_samples, n_jobs):
        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((n_samples, 16)).astype(np.float32)
        self.C = rng.standard_normal((10, 16)).astype(np.float32)
        self.W = rng.random((10, 16)).astype(np.float32)

    def time_assign_weighted_float32(self, n_samples, n_jobs):
        assign_nearest(self.X, self.C, self.W, n_jobs=n_jobs)


class LloydRound:
    """One federated-Lloyd round's client statistics (``lloyd_stats``) vs one scikit-learn Lloyd iteration.

    Same rows (10^6 x 50, standard normal), 10 centres, float64 and float32, 1 and 2
    threads; scikit-learn's iteration (``lloyd_iter_chunked_dense``, labels and new
    centres in the rows' dtype) under a one-thread BLAS limit as ``KMeans`` runs it.
    ``benchmarks/lloyd_pass.py`` writes the side-by-side table.
    """

    params = (["float64", "float32"], [1, 2], ["fastfc", "sklearn"])
    param_names = ["dtype", "n_jobs", "impl"]
    timeout = 600

    def setup(self, dtype, n_jobs, impl):
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from lloyd_pass import sklearn_iteration

        from fastfc._lloyd import lloyd_stats

        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((1_000_000, 50)).astype(dtype)
        self.C = np.asarray(self.X[rng.choice(len(self.X), 10, replace=False)], dtype=np.float64)
        if impl == "sklearn":
            self.run, _ = sklearn_iteration(self.X, self.C, n_jobs)
        else:
            self.run = lambda: lloyd_stats(self.X, self.C, n_jobs=n_jobs)
        self.run()  # warm up

    def time_round(self, dtype, n_jobs, impl):
        self.run()
