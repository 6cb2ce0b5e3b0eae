"""asv benchmarks of Fed-k*-HC (spec shared/specs/fed_kstar_hc.md).

* ``FedKStarHCScaleN``: a whole fit (every client, the server, the labelling of all rows) on a
  5-cluster, 10-feature isotropic Gaussian mixture over 10 clients, n = 10^4 .. 10^6, with the
  k-means micro-partitioner and 100 subclusters per client (``"kmeans100"``, linear in n) and with
  the estimator's defaults (``"default"``: k-means with min(ceil(0.5 sqrt(n_z)), 50) subclusters
  per client, at least 2k; linear from 10^4 rows per client on).
* ``FedKStarHCServer``: the server phase alone on 10 000 uploaded subclusters (10 clients x 1000,
  10 substitute rows each, d = 10), with k given (merge only) and with k* estimated (GCS + SNC +
  merge).
"""
import numpy as np

from fastfc import FedKStarHC
from fastfc.datasets import make_gaussian_mixture
from fastfc.fed_kstar_hc import FedKStarHCSummary
from fastfc.metrics import adjusted_rand_score


def _clients(n, n_clients, seed=0):
    X, y = make_gaussian_mixture(n, 10, 5, random_state=seed)
    parts = np.array_split(np.random.default_rng(seed).permutation(n), n_clients)
    return [X[p] for p in parts], np.concatenate([y[p] for p in parts])


def synthetic_summaries(n_subclusters=10_000, n_clients=10, n_features=10, n_true=5, per=10, seed=0):
    """Uploads of ``n_subclusters`` subclusters around ``n_true`` centres (statistics exact)."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 10, size=(n_true, n_features))
    out = []
    m = n_subclusters // n_clients
    for _ in range(n_clients):
        mu = centres[rng.integers(n_true, size=m)] + rng.normal(0, 1.0, size=(m, n_features))
        subs = np.repeat(mu, per, axis=0) + rng.normal(0, 0.3, size=(m * per, n_features))
        starts = np.arange(0, m * per, per)
        means = np.add.reduceat(subs, starts) / per
        dev = subs - np.repeat(means, per, axis=0)
        out.append(FedKStarHCSummary(
            counts=np.full(m, per), centers=means, radii=np.add.reduceat(np.sqrt((dev ** 2).sum(1)), starts) / per,
            stds=np.sqrt(np.add.reduceat(dev ** 2, starts) / (per - 1)), substitutes=subs, n_features=n_features))
    return out


class FedKStarHCScaleN:
    # "kmeans100": k-means with 100 subclusters per client; "default": the estimator's defaults
    params = ([10_000, 30_000, 100_000, 300_000, 1_000_000], ["kmeans100", "default"])
    param_names = ["n_samples", "config"]
    timeout = 1200

    def setup(self, n_samples, config):
        self.X_clients, self.y = _clients(n_samples, 10)

    def _est(self, config):
        if config == "default":
            return FedKStarHC(n_clusters=5, random_state=0, n_jobs=1)
        return FedKStarHC(n_clusters=5, micro="kmeans", n_micro=100, random_state=0, n_jobs=1)

    def time_fit(self, n_samples, config):
        self._est(config).fit_clients(self.X_clients)

    def peakmem_fit(self, n_samples, config):
        self._est(config).fit_clients(self.X_clients)

    def track_ari(self, n_samples, config):
        return adjusted_rand_score(self.y, self._est(config).fit_clients(self.X_clients).labels_)


class FedKStarHCServer:
    params = ([5, None], [1, 2])
    param_names = ["n_clusters", "n_jobs"]
    timeout = 600

    def setup(self, n_clusters, n_jobs):
        self.summaries = synthetic_summaries()

    def time_server(self, n_clusters, n_jobs):
        FedKStarHC(n_clusters=n_clusters, random_state=0, n_jobs=n_jobs).server_aggregate(self.summaries)

    def peakmem_server(self, n_clusters, n_jobs):
        FedKStarHC(n_clusters=n_clusters, random_state=0, n_jobs=n_jobs).server_aggregate(self.summaries)
