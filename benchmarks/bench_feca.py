"""asv benchmarks of a whole FeCA fit (every client, the server, the labelling of all rows).

Data: a 10-cluster, 10-feature isotropic Gaussian mixture (fastfc.datasets.make_gaussian_mixture).
Scaling in n (10^4 .. 10^6 rows over 100 clients) and in the number of clients (10 .. 1000 at
10^6 rows); time and peak memory, plus a quality tracker. The headline target of issue 5 is
``FeCAScaleN.time_fit(1_000_000, 2)``: 10^6 rows of a 10-cluster mixture over 100 clients in
under 10 s. ``setup`` warms the Numba JIT (and its disk cache).
"""
import numpy as np

from fastfc import FeCA
from fastfc.datasets import make_gaussian_mixture
from fastfc.metrics import adjusted_rand_score

from ._shared import load_published_split

K = 10


def _clients(n, n_clients, seed=0):
    X, y = make_gaussian_mixture(n, 10, K, random_state=seed)
    parts = np.array_split(np.random.default_rng(seed).permutation(n), n_clients)
    return [X[p] for p in parts], np.concatenate([y[p] for p in parts])


def _warm():
    X, _ = make_gaussian_mixture(400, 10, K, random_state=1)
    FeCA(n_clusters=K, random_state=0).fit_clients([X[:200], X[200:]])


class FeCAScaleN:
    params = ([10_000, 100_000, 1_000_000], [1, 2])
    param_names = ["n_samples", "n_jobs"]
    timeout = 600

    def setup(self, n_samples, n_jobs):
        self.X_clients, self.y = _clients(n_samples, 100)
        _warm()

    def time_fit(self, n_samples, n_jobs):
        FeCA(n_clusters=K, random_state=0, n_jobs=n_jobs).fit_clients(self.X_clients)

    def peakmem_fit(self, n_samples, n_jobs):
        FeCA(n_clusters=K, random_state=0, n_jobs=n_jobs).fit_clients(self.X_clients)

    def track_ari(self, n_samples, n_jobs):
        est = FeCA(n_clusters=K, random_state=0, n_jobs=n_jobs).fit_clients(self.X_clients)
        return adjusted_rand_score(self.y, est.labels_)


class FeCAScaleClients:
    params = [10, 100, 1000]
    param_names = ["n_clients"]
    timeout = 600

    def setup(self, n_clients):
        self.X_clients, self.y = _clients(1_000_000, n_clients)
        _warm()

    def time_fit(self, n_clients):
        FeCA(n_clusters=K, random_state=0, n_jobs=2).fit_clients(self.X_clients)

    def peakmem_fit(self, n_clients):
        FeCA(n_clusters=K, random_state=0, n_jobs=2).fit_clients(self.X_clients)

    def track_ari(self, n_clients):
        est = FeCA(n_clusters=K, random_state=0, n_jobs=2).fit_clients(self.X_clients)
        return adjusted_rand_score(self.y, est.labels_)


class FeCAPublishedSplits:
    """Whole fits on the authors' 8-client splits (needs ../shared beside the repo)."""

    params = ["US", "YE", "CA", "PE", "LE"]
    param_names = ["split"]
    timeout = 300

    def setup(self, split):
        self.X_clients, self.k = load_published_split(split)
        _warm()

    def time_fit(self, split):
        FeCA(n_clusters=self.k, random_state=0).fit_clients(self.X_clients)
