"""Seeds and threads: one ``random_state`` feeds one seed sequence; each client
and the server get their own child stream, so results never depend on thread
scheduling or on the order in which clients answer.

The random_state rule: ``fit``/``fit_clients`` accept what scikit-learn does
(None, an int or a ``RandomState``, drawn from once per fit; see
:func:`resolve_entropy`); the phase API, whose parties must derive the same
streams independently, needs an int (see :func:`phase_entropy`)."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from numbers import Integral
from contextlib import contextmanager, nullcontext
from typing import Any, NamedTuple, TypeVar

import numpy as np

from ._warnings import carry_caller, warn_caller

__all__ = ["resolve_entropy", "phase_entropy", "RandomStateWarning", "client_rng", "server_rng", "sklearn_seed",
           "effective_n_jobs", "ThreadPlan", "plan_threads", "pinned_worker",
           "limit_blas_threads", "limit_openmp_this_thread", "map_clients", "helper_pool", "kernel_threads",
           "PARALLEL_MIN_WORK"]

T = TypeVar("T")
_CLIENT_STREAM = 0
_SERVER_STREAM = 1


class RandomStateWarning(UserWarning):
    """A phase of a federated run was given no seed: the parties will not agree on their random streams."""


def resolve_entropy(random_state) -> int:
    """Turn a scikit-learn style ``random_state`` into one integer of entropy (once per fit).

    ``None`` draws fresh entropy from the OS (results then differ run to run);
    an int (>= 0) is used as is; a ``RandomState`` is drawn from once. A
    ``numpy.random.Generator`` is rejected, as scikit-learn does.
    """
    if random_state is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(random_state, (Integral, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state}")
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, np.iinfo(np.int32).max))
    raise ValueError(
        f"random_state must be None, a non-negative int or a numpy RandomState; got {random_state!r}"
    )


def phase_entropy(random_state, where: str) -> int:
    """The entropy of one phase call (``client_summarize`` / ``server_aggregate``).

    Every party derives its stream from the same integer on its own, so the
    phase API needs an int. ``None`` draws fresh entropy with a
    :class:`RandomStateWarning` (the parties will not agree); a ``RandomState``
    or ``Generator`` would give each call, hence each party, different entropy
    and raises ``TypeError`` asking for an int.
    """
    if isinstance(random_state, (np.random.RandomState, np.random.Generator)):
        raise TypeError(
            f"{where}: random_state must be an int for the phase API (each party derives its random stream "
            f"from it on its own), got a {type(random_state).__name__}, which would give every call different "
            "entropy; pass the same int to every client and the server"
        )
    if random_state is None:
        warn_caller(
            f"{where}: random_state is None, so fresh entropy is drawn for this call: the clients and the "
            "server will not agree on their random streams and the run is not reproducible; pass the same "
            "int to every party",
            RandomStateWarning,
        )
    return resolve_entropy(random_state)


def client_rng(entropy: int, client_index: int, restart: int = 0, round: int = 0) -> np.random.Generator:
    """Independent stream of client ``client_index`` (a pure function of its arguments).

    ``restart > 0`` gives the fresh, independent stream of a whole-run restart;
    ``round > 0`` the stream of that protocol round (round 0 keeps the one-shot key).
    """
    key = (_CLIENT_STREAM, int(client_index)) + ((int(restart),) if restart or round else ())
    key += (int(round),) if round else ()
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=key))


def server_rng(entropy: int, restart: int = 0, round: int = 0) -> np.random.Generator:
    """Independent stream of the server (``restart > 0``: that restart's fresh stream; ``round > 0``:
    that protocol round's)."""
    key = (_SERVER_STREAM,) + ((int(restart),) if restart or round else ())
    key += (int(round),) if round else ()
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=key))


#: the bound of :func:`sklearn_seed`'s draw (``np.iinfo`` costs microseconds a call)
_INT32_MAX = int(np.iinfo(np.int32).max)


def sklearn_seed(rng: np.random.Generator) -> int:
    """An int seed for scikit-learn routines, drawn from ``rng``."""
    return int(rng.integers(0, _INT32_MAX))


def effective_n_jobs(n_jobs) -> int:
    """``None`` → 1, ``-1`` → all cores, ``-2`` → all but one, ... (joblib semantics)."""
    if n_jobs is None:
        return 1
    if not isinstance(n_jobs, (Integral, np.integer)) or isinstance(n_jobs, bool) or n_jobs == 0:
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
    if n_jobs < 0:
        return max(1, (os.cpu_count() or 1) + 1 + int(n_jobs))
    return int(n_jobs)


#: a compiled kernel's pass over a client's rows runs on more than one thread only from about this many
#: multiply-adds (rows x centres x features): below it a pass takes well under a millisecond on one
#: thread, and waking a second thread for it, then waiting for it at the region's end, costs about as
#: much as it saves on an idle machine and many times more under load (a thread that waits for a core
#: holds up the region: k-means++ seeding of a 2,000-row subsample, k = 50, took 72 ms on two threads
#: against 1.2 ms on one at load ~4; issue 15). The kernels' results do not depend on their thread
#: count, so the choice changes only the speed; it depends on the shape only.
PARALLEL_MIN_WORK = 1 << 20


def kernel_threads(n_jobs, work: int, min_work: int = PARALLEL_MIN_WORK) -> int:
    """Threads of one compiled pass of about ``work`` multiply-adds: ``effective_n_jobs(n_jobs)``
    from ``min_work`` on, else 1 (see :data:`PARALLEL_MIN_WORK`)."""
    n = effective_n_jobs(n_jobs)
    return n if n > 1 and work >= min_work else 1


class ThreadPlan(NamedTuple):
    """How ``n_jobs`` cores are shared: client threads, native threads of each, native threads of the server."""

    workers: int
    per_client: int
    server: int


def plan_threads(n_jobs, n_clients: int) -> ThreadPlan:
    """Split ``effective_n_jobs(n_jobs)`` cores: up to one thread per client, the rest to their kernels.

    A fit never uses more than ``n_jobs`` cores: ``workers`` client threads each
    give their native kernels ``n_jobs // workers`` threads; the server phase
    runs alone and gets all ``n_jobs``. Results do not depend on the split.
    """
    n = effective_n_jobs(n_jobs)
    workers = max(1, min(n, int(n_clients)))
    return ThreadPlan(workers=workers, per_client=max(1, n // workers), server=n)


@contextmanager
def pinned_worker() -> Iterator[None]:
    """Run the body with OpenMP pinned to one thread in the calling thread.

    Every phase of every method runs inside it (the estimator base wraps the
    worker callable of each client thread and of the server): libraries that
    size their OpenMP teams from the calling thread's setting (scikit-learn's
    Lloyd reduces per-thread partial sums in a thread-count-dependent order)
    then compute the same bits whatever ``n_jobs`` is. fastfc's own kernels get
    their thread count explicitly (OpenMP's ``num_threads``), which this limit
    does not cap. OpenMP limits are per calling thread, so each worker thread
    pins itself; BLAS limits are process-wide and set once by the driver.
    Nested uses in one thread are free: only the outermost sets and restores the
    limit (threadpoolctl's query and set cost about 15 us each time), so an in-process
    runner that runs its clients one after the other pins once around all of them.
    """
    if getattr(_pinned, "depth", 0):  # already pinned in this thread (a runner pins once around its phases)
        yield
        return
    with limit_openmp_this_thread(1):
        _pinned.depth = 1
        try:
            yield
        finally:
            _pinned.depth = 0


#: per thread: whether :func:`pinned_worker` holds the OpenMP limit in that thread
_pinned = threading.local()


def map_clients(
    fn: Callable[[int], T],
    n_clients: int,
    n_workers: int,
    progress: Callable[[int, int], Any] | None = None,
    order: list[int] | None = None,
) -> list[T]:
    """Run ``fn(i)`` for every client, on up to ``n_workers`` threads, results in client order.

    The numeric kernels release the GIL, so threads give real parallelism.
    ``progress(done, total)`` is called after each client finishes. ``order`` (a permutation
    of the clients) is the order in which the threads pick them up (default: client order);
    it changes only the schedule, never the results.
    """
    if order is not None and sorted(order) != list(range(n_clients)):
        raise ValueError(f"order must be a permutation of range({n_clients})")
    if n_workers <= 1 or n_clients <= 1:
        out = []
        for i in range(n_clients):
            out.append(fn(i))
            if progress is not None:
                progress(i + 1, n_clients)
        return out
    results: list[Any] = [None] * n_clients
    with ThreadPoolExecutor(max_workers=min(n_workers, n_clients)) as ex:
        run = carry_caller(fn)  # the workers' warnings point at the caller's code, as with one worker
        futures = {ex.submit(run, i): i for i in (range(n_clients) if order is None else order)}
        done = 0
        for fut in as_completed(futures):
            results[futures[fut]] = fut.result()
            done += 1
            if progress is not None:
                progress(done, n_clients)
    return results


#: the process's helper threads (:func:`helper_pool`), the pid that made them, and the helpers' mark
_helpers: ThreadPoolExecutor | None = None
_helpers_pid = -1
_helpers_lock = threading.Lock()
_in_helper = threading.local()


def _mark_helper() -> None:
    _in_helper.flag = True


def helper_pool() -> ThreadPoolExecutor | None:
    """The process's persistent helper threads for work a client hands off within its own budget
    (row halves of an elementwise pass, a test beside the local k-means), or ``None`` in a helper
    thread itself (nested hand-offs then run inline, so a helper never waits for another).

    Made once per process (again after a fork, whose child has none of its parent's threads) with
    up to ``os.cpu_count()`` threads, which stay idle between calls: a hand-off then costs a
    wake-up, not a thread start (a new pool per call cost a thread start and join each time, and
    under load the start waits for a core: 13 ms of a 100 ms FeCA fit at load ~4; issue 15).
    Callers bound how many tasks they submit at once (their share of ``n_jobs``).
    """
    global _helpers, _helpers_pid
    if getattr(_in_helper, "flag", False):
        return None
    pid = os.getpid()
    if _helpers is None or _helpers_pid != pid:
        with _helpers_lock:
            if _helpers is None or _helpers_pid != pid:
                _helpers = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1),
                                              thread_name_prefix="fastfc-helper", initializer=_mark_helper)
                _helpers_pid = pid
    return _helpers


_controller = None
_controller_lock = threading.Lock()


def _get_controller():
    """The process's threadpoolctl controller, built once (building scans the loaded libraries).

    The OpenMP runtimes that phases may use are loaded first (scikit-learn's, fastfc's
    kernels'), so the controller sees them even when no estimator using them ran yet.
    """
    global _controller
    if _controller is None:
        with _controller_lock:
            if _controller is None:
                import sklearn.utils._openmp_helpers  # noqa: F401  (loads scikit-learn's OpenMP runtime)
                from threadpoolctl import ThreadpoolController

                from ._kernels import _assign  # noqa: F401  (loads the kernels' OpenMP runtime)

                _controller = ThreadpoolController()
    return _controller


#: per thread: the BLAS limits this thread holds through :func:`limit_blas_threads`, innermost last
_blas_held = threading.local()


@contextmanager
def _held_blas_limit(n: int):
    stack = getattr(_blas_held, "stack", None)
    if stack is None:
        stack = _blas_held.stack = []
    with _get_controller().select(user_api="blas").limit(limits=n):
        stack.append(n)
        try:
            yield
        finally:
            stack.pop()


def limit_blas_threads(n_threads: int):
    """Context manager limiting the BLAS thread pools only (OpenMP untouched).

    Inside a limit to the same thread count that this thread already holds (a kernel's
    ``limit_blas_threads(1)`` inside a client's), it does nothing: threadpoolctl's look-up of
    the pools costs about 0.1 ms a call, which dominated the per-iteration cost of Lloyd on
    small clients (issue 15).
    """
    n = int(n_threads)
    stack = getattr(_blas_held, "stack", None)
    if stack and stack[-1] == n:
        return nullcontext()
    return _held_blas_limit(n)


def limit_openmp_this_thread(n_threads: int):
    """Context manager limiting OpenMP to ``n_threads`` in the calling thread.

    OpenMP's thread count is per calling thread (a worker thread starts at all cores even
    when the main thread was limited), unlike BLAS's, which is process-wide.
    """
    return _get_controller().limit(limits=int(n_threads), user_api="openmp")
