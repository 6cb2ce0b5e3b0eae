#!/usr/bin/env python
"""Wall time of whole fits on synthetic Gaussian mixtures, for the README's scaling numbers.

Each row times a whole federated fit (every client, the server and the labelling of all
rows; ``fit_clients``) on one thread (``n_jobs=1``) after a warm-up fit (Numba JIT and its
cache warm), and reports the median of ``--repeats`` fits and the ARI of the last fit.
The data are the asv suites' (``benchmarks/bench_*.py``): an isotropic Gaussian mixture
(``fastfc.datasets.make_gaussian_mixture``, 10 features) split at random into equal clients.

* ``fedhire``: Fed-HIRE, 5 clusters over 10 clients, n = 10^4 and 10^5;
* ``feca``: FeCA, 10 clusters over 100 clients, n = 10^6;
* ``kstar``: Fed-k*-HC with its defaults and k given, 5 clusters over 10 clients,
  n = 10^4, 10^5, 3·10^5, 10^6, plus one fit with k* estimated at every n;
* ``kstar_server``: Fed-k*-HC's server phase alone on 10 000 synthetic subclusters
  (``bench_fed_kstar_hc.synthetic_summaries``), k given and k* estimated.

Usage::

    python benchmarks/scaling.py --out benchmarks/results/scaling.md
    python benchmarks/scaling.py --what fedhire,feca --repeats 3
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from _provenance import run_with_out

ALL = ["fedhire", "feca", "kstar", "kstar_server"]


def clients(n: int, n_clusters: int, n_clients: int, seed: int = 0):
    """A ``n_clusters``-cluster, 10-feature mixture of ``n`` rows split at random over clients.

    Parameters
    ----------
    n, n_clusters, n_clients : int
        Rows, mixture components and clients.
    seed : int
        Seed of the data and of the split.

    Returns
    -------
    X_clients : list of ndarray
        One matrix per client.
    y : ndarray
        The true labels in the order of ``np.concatenate(X_clients)``.
    """
    from fastfc.datasets import make_gaussian_mixture

    X, y = make_gaussian_mixture(n, 10, n_clusters, random_state=seed)
    parts = np.array_split(np.random.default_rng(seed).permutation(n), n_clients)
    return [X[p] for p in parts], np.concatenate([y[p] for p in parts])


def time_fit(make, X_clients, y, repeats: int) -> tuple[float, float]:
    """Median wall time of ``repeats`` whole fits and the ARI of the last.

    Parameters
    ----------
    make : callable
        Returns a fresh estimator.
    X_clients : list of ndarray
        The clients' data.
    y : ndarray
        True labels of ``np.concatenate(X_clients)``.
    repeats : int
        Timed fits.

    Returns
    -------
    seconds : float
        Median wall time of one fit.
    ari : float
        ARI of the last fit's labels.
    """
    from fastfc.metrics import adjusted_rand_score

    times = []
    for _ in range(repeats):
        est = make()
        t0 = time.perf_counter()
        est.fit_clients(X_clients)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), float(adjusted_rand_score(y, est.labels_))


def row(method: str, config: str, n: int, n_clients: int, seconds: float, repeats: int, ari: float) -> str:
    """One markdown table row.

    Parameters
    ----------
    method, config : str
        Estimator and its settings.
    n, n_clients : int
        Rows and clients.
    seconds : float
        Median wall time.
    repeats : int
        Timed runs.
    ari : float
        ARI of the last run (NaN when not applicable).

    Returns
    -------
    str
        The row.
    """
    ari_cell = "—" if np.isnan(ari) else f"{ari:.3f}"
    return f"| {method} | {config} | {n:,} | {n_clients} | {seconds:.3f} | {repeats} | {ari_cell} |"


def main(argv=None) -> int:
    """Run the requested timings and print one markdown table (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--what", default=",".join(ALL), help="comma-separated subset of " + ", ".join(ALL))
    ap.add_argument("--repeats", type=int, default=3, help="timed fits per row (median taken)")
    return run_with_out(ap, argv, lambda args: run(args.what.split(","), args.repeats))


def run(what: list[str], repeats: int) -> int:
    """Time the requested groups (see the module docstring) and print the table.

    Parameters
    ----------
    what : list of str
        Groups of :data:`ALL` to run.
    repeats : int
        Timed fits per row.

    Returns
    -------
    int
        Exit status 0.
    """
    from fastfc import FeCA, FedHIRE, FedKStarHC

    print(f"Whole fits on one thread (n_jobs=1), JIT warm; seconds = median of {repeats} fits "
          "(k* estimated: one fit); ARI of the last fit against the mixture's labels.\n")
    print("| method | settings | rows | clients | seconds | fits | ARI |")
    print("|---|---|---|---|---|---|---|")
    if "fedhire" in what:
        Xw, yw = clients(2000, 5, 2, seed=1)
        FedHIRE(n_clusters=5, random_state=0).fit_clients(Xw)
        for n in (10_000, 100_000):
            Xc, y = clients(n, 5, 10)
            s, ari = time_fit(lambda: FedHIRE(n_clusters=5, random_state=0, n_jobs=1), Xc, y, repeats)
            print(row("FedHIRE", "defaults, k = 5", n, 10, s, repeats, ari), flush=True)
    if "feca" in what:
        Xw, yw = clients(2000, 10, 2, seed=1)
        FeCA(n_clusters=10, random_state=0).fit_clients(Xw)
        Xc, y = clients(1_000_000, 10, 100)
        s, ari = time_fit(lambda: FeCA(n_clusters=10, random_state=0, n_jobs=1), Xc, y, max(repeats, 5))
        print(row("FeCA", "defaults, k = 10", 1_000_000, 100, s, max(repeats, 5), ari), flush=True)
    if "kstar" in what:
        Xw, yw = clients(2000, 5, 2, seed=1)
        FedKStarHC(n_clusters=5, random_state=0).fit_clients(Xw)
        for n in (10_000, 100_000, 300_000, 1_000_000):
            Xc, y = clients(n, 5, 10)
            s, ari = time_fit(lambda: FedKStarHC(n_clusters=5, random_state=0, n_jobs=1), Xc, y, repeats)
            print(row("FedKStarHC", "defaults, k = 5 given", n, 10, s, repeats, ari), flush=True)
            s, ari = time_fit(lambda: FedKStarHC(n_clusters=None, random_state=0, n_jobs=1), Xc, y, 1)
            print(row("FedKStarHC", "defaults, k* estimated", n, 10, s, 1, ari), flush=True)
    if "kstar_server" in what:
        from benchmarks.bench_fed_kstar_hc import synthetic_summaries

        summaries = synthetic_summaries()
        for k, label in ((5, "server phase, k = 5 given"), (None, "server phase, k* estimated")):
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                FedKStarHC(n_clusters=k, random_state=0, n_jobs=1).server_aggregate(summaries)
                times.append(time.perf_counter() - t0)
            print(row("FedKStarHC", label + ", 10 000 subclusters", 100_000, 10, float(np.median(times)), repeats,
                      float("nan")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
