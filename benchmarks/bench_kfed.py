"""asv benchmarks of a whole k-FED fit (every client, the server and the labelling of all rows).

Scaling in n (10^4 .. 10^6 rows, 10 clients) and in the number of clients (10 .. 1000 at 10^5
rows), time and peak memory, plus a quality tracker so a speed-up that breaks the result shows.
"""
import numpy as np

from fastfc import KFed
from fastfc.metrics import adjusted_rand_score


def _mixture(n, d, k, seed):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, size=(k, d))
    y = rng.integers(k, size=n)
    X = centres[y] + rng.standard_normal((n, d))
    return X, y


def _split(n, n_clients):
    return np.array_split(np.arange(n), n_clients)


class KFedScaleN:
    params = ([10_000, 100_000, 1_000_000], [1, 2])
    param_names = ["n_samples", "n_jobs"]
    timeout = 300

    def setup(self, n_samples, n_jobs):
        X, self.y = _mixture(n_samples, 10, 5, 0)
        self.X_clients = [X[p] for p in _split(n_samples, 10)]
        KFed(n_clusters=5, random_state=0).fit_clients([x[:200] for x in self.X_clients])  # warm up

    def time_fit(self, n_samples, n_jobs):
        KFed(n_clusters=5, random_state=0, n_jobs=n_jobs).fit_clients(self.X_clients)

    def peakmem_fit(self, n_samples, n_jobs):
        KFed(n_clusters=5, random_state=0, n_jobs=n_jobs).fit_clients(self.X_clients)

    def track_ari(self, n_samples, n_jobs):
        est = KFed(n_clusters=5, random_state=0, n_jobs=n_jobs).fit_clients(self.X_clients)
        return adjusted_rand_score(self.y, est.labels_)


class KFedScaleClients:
    params = ([10, 100, 1000],)
    param_names = ["n_clients"]
    timeout = 300

    def setup(self, n_clients):
        X, _ = _mixture(100_000, 10, 5, 1)
        self.X_clients = [X[p] for p in _split(100_000, n_clients)]
        KFed(n_clusters=5, random_state=0).fit_clients(self.X_clients[:3])

    def time_fit(self, n_clients):
        KFed(n_clusters=5, random_state=0).fit_clients(self.X_clients)

    def peakmem_fit(self, n_clients):
        KFed(n_clusters=5, random_state=0).fit_clients(self.X_clients)
