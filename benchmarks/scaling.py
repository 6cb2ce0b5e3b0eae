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

``--what ratio`` (not in the default set) writes a different table: each estimator of
``--methods`` side by side with pooled ``KMeans(n_init=1)`` on the same rows, one fresh process
per configuration (``--n`` rows x ``--d`` features x ``--clients``, 10-cluster mixture, random
equal split; the estimator's ``n_clusters`` = 10): seconds (median of ``--repeats`` whole fits
after warm-up fits on small and on two 10,000-row clients), pooled KMeans seconds (median of as many fits) and their ratio, ARI of
both, peak memory of the first timed fit over size(X) (the resident-set high-water mark,
reset before the fit, minus the resident set before it, over the data's bytes: what the fit
adds, as in ``benchmarks/peak_memory.py``), and the log-log slopes of seconds in n (at the
smallest client count) and in clients (at the largest n).

Usage::

    python benchmarks/scaling.py --out benchmarks/results/scaling.md
    python benchmarks/scaling.py --what fedhire,feca --repeats 3
    python benchmarks/scaling.py --what ratio --n 1e4,1e5,1e6 --clients 10,100 --out benchmarks/results/scaling_ratio.md
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from _provenance import run_with_out
from _shared import proc_status, reset_peak_rss

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


def measure_fit(make, X_clients, y, repeats: int) -> tuple[float, float]:
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



def ratio_child(cfg: dict) -> dict:
    """One ``ratio`` configuration, measured in this (fresh) process.

    Parameters
    ----------
    cfg : dict
        ``method``, ``n``, ``d``, ``clients``, ``repeats``, ``n_jobs``.

    Returns
    -------
    dict
        ``cfg`` plus ``seconds``, ``kmeans_seconds``, ``ari``, ``kmeans_ari``, ``peak_ratio``.
    """
    import fastfc
    from fastfc.datasets import make_gaussian_mixture
    from fastfc.metrics import adjusted_rand_score
    from sklearn.cluster import KMeans

    n, d, c, reps = cfg["n"], cfg["d"], cfg["clients"], cfg["repeats"]

    def make():
        return getattr(fastfc, cfg["method"])(n_clusters=10, random_state=0, n_jobs=cfg["n_jobs"])

    Xw, _ = make_gaussian_mixture(4000, d, 10, random_state=1)
    make().fit(Xw, client_ids=np.arange(4000) % min(c, 4))
    KMeans(10, n_init=1, random_state=0).fit(Xw)
    # and two clients of 10,000 rows: the large-client paths' kernels are warm too (subsampled
    # starts from 8192 rows, blocked passes), whatever the state of the Numba cache
    Xw, _ = make_gaussian_mixture(20000, d, 10, random_state=2)
    make().fit(Xw, client_ids=np.arange(20000) % 2)
    X, y = make_gaussian_mixture(n, d, 10, random_state=0)
    if cfg.get("float32"):
        X = X.astype(np.float32)
    parts = np.array_split(np.random.default_rng(0).permutation(n), c)
    X_clients = [X[p] for p in parts]
    y = np.concatenate([y[p] for p in parts])
    del X, parts
    size = sum(x.nbytes for x in X_clients)
    times, cpu = [], []
    peak = None
    for r in range(reps):
        est = make()
        base = proc_status("VmRSS")
        if r == 0:
            reset_peak_rss()
        t0, c0 = time.perf_counter(), time.process_time()
        est.fit_clients(X_clients)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        if r == 0:
            peak = (proc_status("VmHWM") - base) / size
    ari = float(adjusted_rand_score(y, est.labels_))
    Xp = np.concatenate(X_clients)
    del X_clients
    ktimes, kcpu = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        km = KMeans(10, n_init=1, random_state=0).fit(Xp)
        ktimes.append(time.perf_counter() - t0)
        kcpu.append(time.process_time() - c0)
    return dict(cfg, seconds=float(np.median(times)), kmeans_seconds=float(np.median(ktimes)), ari=ari,
                cpu_seconds=float(np.median(cpu)), kmeans_cpu_seconds=float(np.median(kcpu)),
                kmeans_ari=float(adjusted_rand_score(y, km.labels_)), peak_ratio=peak)


def _slope(xs, ys) -> float:
    """Least-squares slope of log(ys) against log(xs) (NaN with fewer than two points)."""
    if len(xs) < 2:
        return float("nan")
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def run_ratio(args) -> int:
    """The ``ratio`` table (see the module docstring): one fresh process per configuration.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
        Exit status 0.
    """
    ns = [int(float(v)) for v in args.n.split(",")]
    cs = [int(v) for v in args.clients.split(",")]
    ds = [int(v) for v in args.d.split(",")]
    print(f"Whole fits (`fit_clients`, n_jobs={args.n_jobs}, JIT warm) side by side with pooled "
          f"`KMeans(n_clusters=10, n_init=1)` on the same rows, one fresh process per row; 10-cluster Gaussian "
          f"mixture (`make_gaussian_mixture`), random equal split; seconds = median of {args.repeats} fits; "
          "ratio = seconds / KMeans seconds; CPU = the process's CPU seconds (all threads; KMeans runs on "
          "scikit-learn's default OpenMP threads) and their ratio, far less disturbed by other load than wall "
          "time; peak = resident-set high-water mark of the first fit minus the resident set before it, over "
          "size(X) (what the fit adds)"
          + (f"; rows are float32 from n = {int(float(args.float32_from)):,} on (both fastfc and KMeans), "
             "float64 below" if args.float32_from is not None else "; rows are float64") + ".\n")
    print("| method | rows | d | clients | seconds | KMeans s | ratio | CPU s | KMeans CPU s | CPU ratio | ARI "
          "| KMeans ARI | peak / size(X) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    results = []
    configs = [(n, d, cs[0]) for d in ds for n in ns] + [(ns[-1], d, c) for d in ds for c in cs[1:]]
    for method in args.methods.split(","):
        for n, d, c in configs:
            cfg = dict(method=method, n=n, d=d, clients=c, repeats=args.repeats, n_jobs=args.n_jobs,
                       float32=args.float32_from is not None and n >= float(args.float32_from))
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--ratio-child", json.dumps(cfg)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                err = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
                print(f"| {method} | {n:,} | {d} | {c} | error: {err} | | | | | | | | |", flush=True)
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            results.append(r)
            print(f"| {method} | {n:,} | {d} | {c} | {r['seconds']:.3f} | {r['kmeans_seconds']:.3f} | "
                  f"{r['seconds'] / r['kmeans_seconds']:.2f} | {r['cpu_seconds']:.3f} | {r['kmeans_cpu_seconds']:.3f} | "
                  f"{r['cpu_seconds'] / r['kmeans_cpu_seconds']:.2f} | {r['ari']:.3f} | {r['kmeans_ari']:.3f} | "
                  f"{r['peak_ratio']:.2f} |", flush=True)
    print("\nLog-log slopes of seconds (least squares): in n at clients = "
          f"{cs[0]}, and in clients at n = {ns[-1]:,}.\n")
    print("| method | d | slope in n | slope in clients | KMeans slope in n | CPU slope in n | CPU slope in clients |")
    print("|---|---|---|---|---|---|---|")
    for method in args.methods.split(","):
        for d in ds:
            by_n = [r for r in results if r["method"] == method and r["d"] == d and r["clients"] == cs[0]]
            by_c = [r for r in results if r["method"] == method and r["d"] == d and r["n"] == ns[-1]]
            sn = _slope([r["n"] for r in by_n], [r["seconds"] for r in by_n])
            sc = _slope([r["clients"] for r in by_c], [r["seconds"] for r in by_c])
            sk = _slope([r["n"] for r in by_n], [r["kmeans_seconds"] for r in by_n])
            cn = _slope([r["n"] for r in by_n], [r["cpu_seconds"] for r in by_n])
            cc = _slope([r["clients"] for r in by_c], [r["cpu_seconds"] for r in by_c])
            print(f"| {method} | {d} | {sn:.2f} | {sc:.2f} | {sk:.2f} | {cn:.2f} | {cc:.2f} |")
    return 0


def main(argv=None) -> int:
    """Run the requested timings and print one markdown table (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--what", default=",".join(ALL), help="comma-separated subset of " + ", ".join(ALL) + ", or ratio")
    ap.add_argument("--repeats", type=int, default=3, help="timed fits per row (median taken)")
    ap.add_argument("--methods", default="KFed,FeCA,FedKStarHC", help="ratio: estimators")
    ap.add_argument("--n", default="1e4,1e5,1e6", help="ratio: comma-separated row counts")
    ap.add_argument("--d", default="10", help="ratio: comma-separated feature counts")
    ap.add_argument("--clients", default="10,100", help="ratio: client counts (the first for the slope in n)")
    ap.add_argument("--n-jobs", type=int, default=1, help="ratio: threads per fit")
    ap.add_argument("--float32-from", default=None, metavar="N",
                    help="ratio: rows are float32 (fastfc and KMeans alike) for n >= N, float64 below")
    ap.add_argument("--ratio-child", help=argparse.SUPPRESS)
    if argv is None:
        argv = sys.argv[1:]
    if "--ratio-child" in argv:
        print(json.dumps(ratio_child(json.loads(ap.parse_args(argv).ratio_child))))
        return 0

    def body(args):
        if args.what == "ratio":
            return run_ratio(args)
        return run(args.what.split(","), args.repeats)

    return run_with_out(ap, argv, body)


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
            s, ari = measure_fit(lambda: FedHIRE(n_clusters=5, random_state=0, n_jobs=1), Xc, y, repeats)
            print(row("FedHIRE", "defaults, k = 5", n, 10, s, repeats, ari), flush=True)
    if "feca" in what:
        Xw, yw = clients(2000, 10, 2, seed=1)
        FeCA(n_clusters=10, random_state=0).fit_clients(Xw)
        Xc, y = clients(1_000_000, 10, 100)
        s, ari = measure_fit(lambda: FeCA(n_clusters=10, random_state=0, n_jobs=1), Xc, y, max(repeats, 5))
        print(row("FeCA", "defaults, k = 10", 1_000_000, 100, s, max(repeats, 5), ari), flush=True)
    if "kstar" in what:
        Xw, yw = clients(2000, 5, 2, seed=1)
        FedKStarHC(n_clusters=5, random_state=0).fit_clients(Xw)
        for n in (10_000, 100_000, 300_000, 1_000_000):
            Xc, y = clients(n, 5, 10)
            s, ari = measure_fit(lambda: FedKStarHC(n_clusters=5, random_state=0, n_jobs=1), Xc, y, repeats)
            print(row("FedKStarHC", "defaults, k = 5 given", n, 10, s, repeats, ari), flush=True)
            s, ari = measure_fit(lambda: FedKStarHC(n_clusters=None, random_state=0, n_jobs=1), Xc, y, 1)
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
