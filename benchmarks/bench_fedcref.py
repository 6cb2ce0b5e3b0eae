"""asv benchmarks of FedCRef's hot loops at the paper's architecture (784-100-64-32-64-100-784, 174,840
float32 parameters; spec ``shared/specs/fedcref.md`` §4).

``AEEpoch`` times one training epoch of one autoencoder on a 500-row cluster at batch 32 (BLAS pinned to
one thread, as when models train concurrently). ``CrossEvaluation`` times the error table of M models on
the rows of one client (M = 3.5 N, N = 10 / 25 / 40 clients, 1750 rows: the quadratic step of one
iteration, per client), with its peak memory.
"""
import numpy as np

from fastfc import _ae
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
