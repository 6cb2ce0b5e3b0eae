"""asv benchmarks of FedCRef's hot loops at the paper's architecture (784-100-64-32-64-100-784, 174,840
float32 parameters; spec ``shared/specs/fedcref.md`` §4).

``AEEpoch`` times one training epoch of one autoencoder on a 500-row cluster at batch 32 (BLAS pinned to
one thread, as when models train concurrently). ``CrossEvaluation`` times the error table of M models on
the rows of one client (M = 3.5 N, N = 10 / 25 / 40 clients, 1750 rows: the quadratic step of one
iteration, per client), with its peak memory.

Against the number of clients (10 / 25 / 40), on a small federation that runs in asv's quick mode
(synthetic 64-feature data in [0, 1], 3-4 clusters of 100 rows per client, AE (32, 16, 32), 10 local
epochs, 2 FedAvg rounds, FedCRef's default association test, under which groups form): ``FederationCrossEvaluation`` times the
whole cross-evaluation step of one iteration (every client's error table against the model set of all clients, and its association
scores, through the public round API), ``WholeIteration`` one whole FedCRef iteration (local
training, cross-evaluation and association, FedAvg, refinement; ``max_iter=1``), both with peak
memory.
"""
import numpy as np

from fastfc import FedCRef, _ae
from fastfc._parallel import limit_blas_threads

LAY = _ae.layout(784, (100, 64, 32, 64, 100))


class AEEpoch:
    timeout = 300

    def setup(self):
        rng = np.random.default_rng(0)
        self.X = (rng.random((500, 784)) < 0.3).astype(np.float32)
        self.w0 = _ae.glorot_init(LAY, rng)
        with limit_blas_threads(1):  # builds the thread-pool controller once (seconds), outside the timing
            _ae.train(self.w0, LAY, self.X[:64], 1, np.random.default_rng(1))  # compile the kernels

    def time_one_epoch_500_rows(self):
        with limit_blas_threads(1):
            _ae.train(self.w0, LAY, self.X, 1, np.random.default_rng(1), batch_size=32)


class CrossEvaluation:
    params = [10, 25, 40]
    param_names = ["n_clients"]
    timeout = 600

    def setup(self, n_clients):
        rng = np.random.default_rng(0)
        self.X = (rng.random((1750, 784)) < 0.3).astype(np.float32)
        self.models = np.stack([_ae.glorot_init(LAY, rng) for _ in range(int(3.5 * n_clients))])
        with limit_blas_threads(1):
            _ae.errors(self.models[:1], LAY, self.X[:8])  # compile the kernels

    def time_error_table(self, n_clients):
        with limit_blas_threads(1):
            _ae.errors(self.models, LAY, self.X)

    def peakmem_error_table(self, n_clients):
        _ae.errors(self.models, LAY, self.X)


SMALL = dict(hidden_layer_sizes=(32, 16, 32), local_epochs=10, fl_rounds=2, fl_epochs=1, fl_first_epochs=1,
             learning_rate=5e-3, n_jobs=1)


def _small_federation(n_clients, seed=0):
    """``n_clients`` clients of 3-4 clusters (of 12 shared prototypes) with 100 rows each, 64 features."""
    rng = np.random.default_rng(seed)
    protos = rng.random((12, 64))
    X_clients, init = [], []
    for _ in range(n_clients):
        cls = rng.choice(12, size=int(rng.integers(3, 5)), replace=False)
        y = np.repeat(np.arange(cls.size), 100)
        X = np.clip(protos[cls][y] + 0.1 * rng.standard_normal((y.size, 64)), 0, 1).astype(np.float32)
        X_clients.append(X)
        init.append(y)
    return X_clients, init


class FederationCrossEvaluation:
    params = [10, 25, 40]
    param_names = ["n_clients"]
    timeout = 600

    def setup(self, n_clients):
        self.X_clients, init = _small_federation(n_clients)
        self.est = FedCRef(init_labels=init, cache_errors=False, **SMALL)
        ups, self.states = [], []
        for i, X in enumerate(self.X_clients):
            u, s = self.est.client_round(X, round=0, client_index=i, random_state=0)
            ups.append(u)
            self.states.append(s)
        self.broadcasts, _, _ = self.est.server_round(ups, round=0, random_state=0)
        self._step()  # compile the kernels

    def _step(self):
        for X, s, b in zip(self.X_clients, self.states, self.broadcasts):
            self.est.client_round(X, s, b, round=1, random_state=0)

    def time_cross_evaluation(self, n_clients):
        self._step()

    def peakmem_cross_evaluation(self, n_clients):
        self._step()


class WholeIteration:
    params = [10, 25, 40]
    param_names = ["n_clients"]
    timeout = 600

    def setup(self, n_clients):
        self.X_clients, self.init = _small_federation(n_clients)
        FedCRef(init_labels=self.init[:2], max_iter=1, **SMALL).fit_clients(self.X_clients[:2])  # compile

    def _fit(self):
        return FedCRef(init_labels=self.init, max_iter=1, random_state=0, **SMALL).fit_clients(self.X_clients)

    def time_one_iteration(self, n_clients):
        self._fit()

    def peakmem_one_iteration(self, n_clients):
        self._fit()
