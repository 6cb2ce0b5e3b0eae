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
