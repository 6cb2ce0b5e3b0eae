"""asv benchmarks of a whole Fed-HIRE fit (every client, the server, the labelling of all rows).

GOLD §IV-E scalability data: a 5-cluster, 10-feature isotropic Gaussian mixture. Scaling in n
(10^4 .. 10^6 rows over 10 clients) and in the number of clients (10 .. 1000 at 10^5 rows); time
and peak memory, plus a quality tracker. ``setup`` warms the Numba JIT (and its disk cache).
Plot the n-scaling with ``python benchmarks/plot_scaling.py``.
"""
import numpy as np

from fastfc import FedHIRE
from fastfc.datasets import make_gaussian_mixture
from fastfc.metrics import adjusted_rand_score

from ._shared import load_published_split


def _clients(n, n_clients, seed=0):
    X, y = make_gaussian_mixture(n, 10, 5, random_state=seed)
    parts = np.array_split(np.random.default_rng(seed).permutation(n), n_clients)
    return [X[p] for p in parts], np.concatenate([y[p] for p in parts])


def _warm():
    X, _ = make_gaussian_mixture(400, 10, 5, random_state=1)
    FedHIRE(n_clusters=5, random_state=0).fit_clients([X[:200], X[200:]])


class FedHIREScaleN:
    params = ([10_000, 30_000, 100_000, 300_000, 1_000_000], [1, 2])
    param_names = ["n_samples", "n_jobs"]
    timeout = 900

    def setup(self, n_samples, n_jobs):
        self.X_clients, self.y = _clients(n_samples, 10)
        _warm()

    def time_fit(self, n_samples, n_jobs):
        FedHIRE(n_clusters=5, random_state=0, n_jobs=n_jobs).fit_clients(self.X_clients)

    def peakmem_fit(self, n_samples, n_jobs):
        FedHIRE(n_clusters=5, random_state=0, n_jobs=n_jobs).fit_clients(self.X_clients)

    def track_ari(self, n_samples, n_jobs):
        est = FedHIRE(n_clusters=5, random_state=0, n_jobs=n_jobs).fit_clients(self.X_clients)
        return adjusted_rand_score(self.y, est.labels_)


class FedHIREScaleClients:
    params = [10, 100, 1000]
    param_names = ["n_clients"]
    timeout = 900

    def setup(self, n_clients):
        self.X_clients, self.y = _clients(100_000, n_clients)
        _warm()

    def time_fit(self, n_clients):
        FedHIRE(n_clusters=5, random_state=0, n_jobs=2).fit_clients(self.X_clients)

    def peakmem_fit(self, n_clients):
        FedHIRE(n_clusters=5, random_state=0, n_jobs=2).fit_clients(self.X_clients)


class FedHIREPublishedSplits:
    """Whole fits on the authors' larger 8-client splits (needs ../shared beside the repo)."""

    params = ["WI", "PE", "LA", "LE"]
    param_names = ["split"]
    timeout = 600

    def setup(self, split):
        self.X_clients, self.k = load_published_split(split)
        _warm()

    def time_fit(self, split):
        FedHIRE(n_clusters=self.k, random_state=0).fit_clients(self.X_clients)
