"""Seeds and threads: one ``random_state`` feeds one seed sequence; each client
and the server get their own child stream, so results never depend on thread
scheduling or on the order in which clients answer."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from numbers import Integral
from typing import Any, TypeVar

import numpy as np

__all__ = ["resolve_entropy", "client_rng", "server_rng", "sklearn_seed", "effective_n_jobs", "limit_native_threads",
           "limit_blas_threads", "limit_openmp_this_thread", "map_clients"]

T = TypeVar("T")
_CLIENT_STREAM = 0
_SERVER_STREAM = 1


def resolve_entropy(random_state) -> int:
    """Turn a scikit-learn style ``random_state`` into one integer of entropy.

    ``None`` draws fresh entropy from the OS (results then differ run to run);
    an int is used as is; a ``RandomState`` or ``Generator`` is drawn from once.
    """
    if random_state is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(random_state, (Integral, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state}")
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, np.iinfo(np.int32).max))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, np.iinfo(np.int64).max))
    raise ValueError(
        f"random_state must be None, a non-negative int, a RandomState or a Generator; got {random_state!r}"
    )


def client_rng(entropy: int, client_index: int, restart: int = 0) -> np.random.Generator:
    """Independent stream of client ``client_index`` (a pure function of its arguments).

    ``restart > 0`` gives the fresh, independent stream of a whole-run restart.
    """
    key = (_CLIENT_STREAM, int(client_index)) + ((int(restart),) if restart else ())
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=key))


def server_rng(entropy: int, restart: int = 0) -> np.random.Generator:
    """Independent stream of the server (``restart > 0``: that restart's fresh stream)."""
    key = (_SERVER_STREAM,) + ((int(restart),) if restart else ())
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=key))


def sklearn_seed(rng: np.random.Generator) -> int:
    """An int seed for scikit-learn routines, drawn from ``rng``."""
    return int(rng.integers(0, np.iinfo(np.int32).max))


def effective_n_jobs(n_jobs) -> int:
    """``None`` → 1, ``-1`` → all cores, ``-2`` → all but one, ... (joblib semantics)."""
    if n_jobs is None:
        return 1
    if not isinstance(n_jobs, (Integral, np.integer)) or isinstance(n_jobs, bool) or n_jobs == 0:
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
    n_cpu = os.cpu_count() or 1
    if n_jobs < 0:
        return max(1, n_cpu + 1 + int(n_jobs))
    return int(n_jobs)


def map_clients(
    fn: Callable[[int], T],
    n_clients: int,
    n_workers: int,
    progress: Callable[[int, int], Any] | None = None,
) -> list[T]:
    """Run ``fn(i)`` for every client, on up to ``n_workers`` threads, results in client order.

    The numeric kernels release the GIL, so threads give real parallelism.
    ``progress(done, total)`` is called after each client finishes.
    """
    if n_workers <= 1 or n_clients <= 1:
        out = []
        for i in range(n_clients):
            out.append(fn(i))
            if progress is not None:
                progress(i + 1, n_clients)
        return out
    results: list[Any] = [None] * n_clients
    with ThreadPoolExecutor(max_workers=min(n_workers, n_clients)) as ex:
        futures = {ex.submit(fn, i): i for i in range(n_clients)}
        done = 0
        for fut in as_completed(futures):
            results[futures[fut]] = fut.result()
            done += 1
            if progress is not None:
                progress(done, n_clients)
    return results


_controller = None
_controller_lock = threading.Lock()


def _get_controller():
    global _controller
    if _controller is None:
        with _controller_lock:
            if _controller is None:
                from threadpoolctl import ThreadpoolController

                _controller = ThreadpoolController()
    return _controller


def limit_blas_threads(n_threads: int):
    """Context manager limiting the BLAS thread pools only (OpenMP untouched)."""
    return _get_controller().select(user_api="blas").limit(limits=int(n_threads))


def limit_openmp_this_thread(n_threads: int):
    """Context manager limiting OpenMP to ``n_threads`` in the calling thread.

    OpenMP's thread count is per calling thread (a worker thread starts at all cores even
    when the main thread was limited), unlike BLAS's, which is process-wide.
    """
    return _get_controller().limit(limits=int(n_threads), user_api="openmp")


def limit_native_threads(n_threads: int):
    """Context manager limiting every native thread pool (BLAS, OpenMP) to ``n_threads``.

    The threadpoolctl controller is built once per process (building it scans
    the loaded libraries and costs milliseconds; applying a limit does not).
    """
    return _get_controller().limit(limits=int(n_threads))
