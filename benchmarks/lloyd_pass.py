#!/usr/bin/env python
"""One federated-Lloyd refinement round against one scikit-learn Lloyd iteration.

The target of issue 13: a refinement round costs at most about one Lloyd pass over the
pooled rows. For each shape, dtype and thread count this times, in the same process
and alternating (one run of each in turn, ``--repeats`` times, medians reported):

* ``fastfc``: :func:`fastfc._lloyd.lloyd_stats` with ``exact_inertia=False`` (what a
  refinement round's client runs) on all rows at once (one client holding the pooled
  data: per-cluster counts, raw sums and inertia);
* ``exact inertia``: the same with ``exact_inertia=True`` (every row's exact distance, the
  one-shot local k-means' variant), for context;
* ``fastfc 100 clients``: the same rows cut into 100 contiguous clients, every client's
  statistics as fastfc's in-process rounds runner computes them
  (:func:`fastfc._lloyd.lloyd_stats_clients`: the round's centre-side operands once, one
  compiled call over the clients, each client on one of the ``n_jobs`` threads, results bit
  for bit those of its own ``lloyd_stats`` call), plus the server's sum of their statistics
  and the centre update (what a round computes, without messaging);
* ``100 clients one by one``: the same with one ``lloyd_stats(exact_inertia=False)`` call per
  client, as a client that runs alone (Flower) does, scheduled as fastfc ran clients before
  (``fastfc._parallel.plan_threads``/``map_clients``: with ``n_jobs=2``, two client threads,
  each kernel single-threaded), for context;
* ``sklearn``: one Lloyd iteration of scikit-learn on the pooled rows,
  ``sklearn.cluster._k_means_lloyd.lloyd_iter_chunked_dense`` (labels and new centres,
  in the rows' dtype), under ``threadpool_limits(1, "blas")`` as ``KMeans`` runs it;
  if that private function is missing, ``KMeans(init=C, n_init=1, max_iter=1)``'s fit.

Data: standard normal rows, centres drawn from the rows (seed 0). The ratio is
fastfc's median over sklearn's (below 1: fastfc faster).

Usage::

    python benchmarks/lloyd_pass.py --out benchmarks/results/lloyd_pass.md
    python benchmarks/lloyd_pass.py --shapes 100000x50x10 --repeats 3
"""
from __future__ import annotations

import argparse
import time

import numpy as np

SHAPES = [(10**6, 50, 10), (10**6, 10, 10), (10**5, 100, 64)]
N_CLIENTS = 100


def sklearn_iteration(X: np.ndarray, C: np.ndarray, n_jobs: int):
    """A callable running one scikit-learn Lloyd iteration on ``X`` from centres ``C``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), C-contiguous float32/float64
    C : ndarray of shape (n_clusters, n_features)
    n_jobs : int
        OpenMP threads of scikit-learn's kernel.

    Returns
    -------
    run : callable
        No arguments; one iteration per call.
    how : str
        Which scikit-learn entry point is timed.
    """
    from threadpoolctl import threadpool_limits

    n, d = X.shape
    k = C.shape[0]
    Cd = np.ascontiguousarray(C, dtype=X.dtype)
    try:
        from sklearn.cluster._k_means_lloyd import lloyd_iter_chunked_dense
    except ImportError:
        from sklearn.cluster import KMeans

        def run():
            KMeans(n_clusters=k, init=Cd, n_init=1, max_iter=1, algorithm="lloyd", tol=0).fit(X)

        return run, "KMeans(max_iter=1).fit"
    sw = np.ones(n, dtype=X.dtype)
    new = np.empty_like(Cd)
    wic = np.empty(k, dtype=X.dtype)
    labels = np.empty(n, dtype=np.int32)
    shift = np.empty(k, dtype=X.dtype)

    def run():
        with threadpool_limits(limits=1, user_api="blas"):
            lloyd_iter_chunked_dense(X, sw, Cd, new, wic, labels, shift, n_jobs)

    return run, "lloyd_iter_chunked_dense"


def fastfc_round(X: np.ndarray, C: np.ndarray, n_jobs: int, n_clients: int, one_by_one: bool = False):
    """A callable computing one refinement round over ``n_clients`` contiguous clients.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    C : ndarray of shape (n_clusters, n_features)
    n_jobs : int
    n_clients : int
    one_by_one : bool, default=False
        False: the runner's many-clients call (``lloyd_stats_clients``); True: one ``lloyd_stats``
        call per client on ``map_clients`` threads.

    Returns
    -------
    run : callable
        No arguments; returns the new centres, shape (n_clusters, n_features).
    """
    from fastfc._lloyd import lloyd_stats, lloyd_stats_clients
    from fastfc._parallel import limit_blas_threads, map_clients, plan_threads

    bounds = np.linspace(0, len(X), n_clients + 1).astype(int)
    parts = [X[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    plan = plan_threads(n_jobs, n_clients)

    if not one_by_one:
        def run_many():
            with limit_blas_threads(1):
                c, s, _ = lloyd_stats_clients(parts, C, n_jobs=n_jobs)
            counts = np.zeros(c.shape[1], dtype=np.int64)
            sums = np.zeros(s.shape[1:])
            for i in range(n_clients):  # the server adds the uploads in client order
                counts += c[i]
                sums += s[i]
            return np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], C)

        return run_many

    def run():
        # as fastfc's estimators run clients: plan.workers client threads, each kernel on
        # plan.per_client threads, BLAS limited once for the whole round by the driver
        with limit_blas_threads(1):
            stats = map_clients(lambda i: lloyd_stats(parts[i], C, n_jobs=plan.per_client, exact_inertia=False),
                                n_clients, plan.workers)
        counts = sum(s[0] for s in stats)
        sums = sum(s[1] for s in stats)
        return np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], C)

    return run


def median_times(runs: dict, repeats: int) -> tuple[dict, dict]:
    """Median wall and CPU time of each callable, run alternately ``repeats`` times after one warm-up each.

    Parameters
    ----------
    runs : dict of str to callable
    repeats : int

    Returns
    -------
    wall, cpu : dict of str to float
        Seconds; CPU time is the process's (all its threads), which other processes on a
        loaded machine inflate less than wall time.
    """
    for f in runs.values():
        f()
    wall = {name: [] for name in runs}
    cpu = {name: [] for name in runs}
    for _ in range(repeats):
        for name, f in runs.items():
            c0, t0 = time.process_time(), time.perf_counter()
            f()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return ({name: float(np.median(ts)) for name, ts in wall.items()},
            {name: float(np.median(ts)) for name, ts in cpu.items()})


def run(shapes, dtypes, jobs, repeats: int) -> int:
    """Time every configuration and print one markdown table; returns the exit status."""
    from fastfc._lloyd import lloyd_stats, use_screen

    print("# One federated-Lloyd round vs one scikit-learn Lloyd iteration\n")
    print(f"Medians of {repeats} alternating runs; wall seconds; ratio = fastfc / sklearn (wall), "
          "CPU ratio = the same with the process's CPU time (all threads), less sensitive to other "
          f"processes on a loaded machine. fastfc: `lloyd_stats(exact_inertia=False)`, a refinement round's "
          f"client kernel. `100 clients`: the rows cut into {N_CLIENTS} contiguous clients, their statistics "
          "as the in-process rounds runner computes them (`lloyd_stats_clients`: one compiled call over the "
          "clients, each client's results bit for bit its own call's) plus the server's sum and centre update. "
          "`one by one`: one `lloyd_stats` call per client on `map_clients` threads (a client running alone), "
          "for context. `exact`: `lloyd_stats` with every row's exact distance (the one-shot local k-means' "
          "variant), for context.\n")
    print("| n | d | k | dtype | n_jobs | fastfc path | fastfc (s) | fastfc 100 clients (s) | sklearn (s) "
          "| ratio | ratio 100 clients | CPU ratio | CPU ratio 100 clients | CPU ratio 100 one by one "
          "| CPU ratio exact |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    how = None
    for n, d, k in shapes:
        rng = np.random.default_rng(0)
        X64 = rng.standard_normal((n, d))
        C = X64[rng.choice(n, k, replace=False)].copy()
        for dtype in dtypes:
            X = X64.astype(dtype)
            for n_jobs in jobs:
                sk, how = sklearn_iteration(X, C, n_jobs)
                runs = {
                    "fastfc": lambda: lloyd_stats(X, C, n_jobs=n_jobs, exact_inertia=False),
                    "exact": lambda: lloyd_stats(X, C, n_jobs=n_jobs),
                    "clients": fastfc_round(X, C, n_jobs, N_CLIENTS),
                    "one_by_one": fastfc_round(X, C, n_jobs, N_CLIENTS, one_by_one=True),
                    "sklearn": sk,
                }
                t, c = median_times(runs, repeats)
                path = "direct" if not use_screen(d, k) else (
                    "float32 screen" if np.dtype(dtype) == np.float32 else "float64 screen")
                print(f"| {n} | {d} | {k} | {np.dtype(dtype).name} | {n_jobs} | {path} | {t['fastfc']:.4f} "
                      f"| {t['clients']:.4f} | {t['sklearn']:.4f} | {t['fastfc'] / t['sklearn']:.2f} "
                      f"| {t['clients'] / t['sklearn']:.2f} | {c['fastfc'] / c['sklearn']:.2f} "
                      f"| {c['clients'] / c['sklearn']:.2f} | {c['one_by_one'] / c['sklearn']:.2f} "
                      f"| {c['exact'] / c['sklearn']:.2f} |", flush=True)
    print(f"\nscikit-learn entry point timed: `{how}`.")
    return 0


def _shape(s: str) -> tuple[int, int, int]:
    n, d, k = (int(float(v)) for v in s.lower().split("x"))
    return n, d, k


def main(argv=None) -> int:
    """Parse the arguments (``sys.argv[1:]`` when ``argv`` is None), run, return the exit status."""
    from _provenance import run_with_out  # a script's sibling (also importable as benchmarks.lloyd_pass)

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=",".join("x".join(map(str, s)) for s in SHAPES),
                    help="comma-separated NxDxK shapes")
    ap.add_argument("--dtypes", default="float64,float32", help="comma-separated row dtypes")
    ap.add_argument("--jobs", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--repeats", type=int, default=7, help="timed runs of each (median taken), at least 5 advised")
    return run_with_out(ap, argv, lambda a: run([_shape(s) for s in a.shapes.split(",")],
                                                [np.dtype(t).type for t in a.dtypes.split(",")],
                                                [int(j) for j in a.jobs.split(",")], a.repeats))


if __name__ == "__main__":
    raise SystemExit(main())
