"""asv benchmarks of the rounds protocol: refinement rounds (federated Lloyd) and FedKMeans.

``RefineRound`` times one whole refinement round (every client's fused Lloyd statistics pass and the
server's update) at 10^5 and 10^6 rows x 50 features over 100 clients, through the same calls the
in-process runner makes, next to one scikit-learn Lloyd iteration on the pooled rows (same thread
count): the issue's target is a round at about the cost of one Lloyd pass. ``FedKMeansFit`` times a
whole FedKMeans fit (seeding round plus Lloyd rounds) and tracks its ARI.
"""
import numpy as np

from fastfc import FedKMeans, KFed
from fastfc._parallel import plan_threads
from fastfc.metrics import adjusted_rand_score


def _mixture(n, d, k, seed):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, size=(k, d))
    y = rng.integers(k, size=n)
    X = centres[y] + 3.0 * rng.standard_normal((n, d))
    return X, y


class RefineRound:
    params = ([100_000, 1_000_000], [1, 2])
    param_names = ["n_samples", "n_jobs"]
    timeout = 600

    def setup(self, n_samples, n_jobs):
        X, _ = _mixture(n_samples, 50, 10, 0)
        self.X = X
        self.X_clients = [X[p] for p in np.array_split(np.arange(n_samples), 100)]
        est = KFed(n_clusters=10, units=None, refine_rounds=3, refine_tol=0.0, random_state=0, n_jobs=n_jobs)
        self.est = est
        # rounds 0 and 1 through the public API; keep what round 2 needs
        ups, states = [], []
        for i, x in enumerate(self.X_clients):
            u, s = est.client_round(x, round=0, client_index=i, random_state=0)
            ups.append(u)
            states.append(s)
        bc, sst, _ = est.server_round(ups, round=0, random_state=0)
        out = [est.client_round(x, states[i], bc[i], round=1, random_state=0) for i, x in enumerate(self.X_clients)]
        self.bc, self.sst, _ = est.server_round([u for u, _ in out], sst, round=1, random_state=0)
        self.states = [s for _, s in out]
        self.plan = plan_threads(n_jobs, len(self.X_clients))
        from sklearn.cluster._k_means_lloyd import lloyd_iter_chunked_dense

        self._sk_iter = lloyd_iter_chunked_dense
        self.C = np.ascontiguousarray(self.bc[0].centers)
        self.n_jobs = n_jobs
        self.time_round(n_samples, n_jobs)  # warm up

    def time_round(self, n_samples, n_jobs):
        """Round 2: every client's statistics pass (clients on the runner's threads), then the server update."""
        from fastfc._parallel import map_clients

        out = map_clients(
            lambda i: self.est._run_client_round(self.X_clients[i], self.states[i], self.bc[i], i, 0, 0, 2,
                                                 self.plan.per_client),
            len(self.X_clients), self.plan.workers)
        self.est._run_server_round([u for u, _ in out], self.sst, 0, 0, 2, self.plan.server)

    def time_sklearn_lloyd_iteration(self, n_samples, n_jobs):
        """One scikit-learn Lloyd iteration (assignment and centre update) on the pooled rows."""
        k = self.C.shape[0]
        self._sk_iter(self.X, np.ones(self.X.shape[0]), self.C, np.empty_like(self.C), np.zeros(k),
                      np.empty(self.X.shape[0], dtype=np.int32), np.zeros(k), n_jobs, update_centers=True)


class FedKMeansFit:
    params = ([100_000, 1_000_000],)
    param_names = ["n_samples"]
    timeout = 600

    def setup(self, n_samples):
        X, self.y = _mixture(n_samples, 10, 10, 1)
        self.X_clients = [X[p] for p in np.array_split(np.arange(n_samples), 10)]
        FedKMeans(n_clusters=10, max_rounds=2, random_state=0).fit_clients([x[:500] for x in self.X_clients])

    def time_fit(self, n_samples):
        FedKMeans(n_clusters=10, max_rounds=10, random_state=0).fit_clients(self.X_clients)

    def peakmem_fit(self, n_samples):
        FedKMeans(n_clusters=10, max_rounds=10, random_state=0).fit_clients(self.X_clients)

    def track_ari(self, n_samples):
        est = FedKMeans(n_clusters=10, max_rounds=10, random_state=0).fit_clients(self.X_clients)
        return adjusted_rand_score(self.y, est.labels_)
