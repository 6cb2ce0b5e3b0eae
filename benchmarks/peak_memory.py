#!/usr/bin/env python
"""Peak memory of whole fits, as a multiple of the data's size, one fresh process per fit.

How it measures (Linux): each fit runs in its own subprocess. The child imports fastfc,
warms the JIT with a small fit, builds the data, then reads its resident set size
(``VmRSS`` in ``/proc/self/status``, which includes the data), resets the kernel's
high-water mark (``echo 5 > /proc/self/clear_refs``) and fits. After the fit it reads the
high-water mark ``VmHWM``: the largest resident set while fitting, whatever allocated it
(NumPy, Numba, Cython, BLAS, scikit-learn). The ratio reported is

    (VmHWM - VmRSS before the fit + size(X)) / size(X),

i.e. the data itself counts 1.0 and everything a fit adds on top is measured; the
interpreter and libraries are not. The table also shows ``added / size(X)`` (the ratio
without the data itself; issue 15's "peak memory" numbers, e.g. pooled KMeans 2.0-2.6x,
are of this kind). (``tracemalloc`` would miss Cython/Numba/BLAS buffers, and
``ru_maxrss`` cannot be reset after the warm-up; the high-water mark can.)

Data: ``fastfc.datasets.make_gaussian_mixture(n, d, 10)`` in float64. Modes:

* ``list``: ``fit_clients`` on a list of client matrices (a random split into equal clients);
  size(X) = the sum of the clients' bytes;
* ``ids``: ``fit(X, client_ids=ids)`` with ``ids`` drawn at random per row (every client's rows
  interleaved: the gather case); size(X) = X's bytes;
* ``blocks``: ``fit(X, client_ids=ids)`` with each client's rows contiguous (views, no gather).

Pooled ``sklearn.cluster.KMeans(n_clusters=10, n_init=1)`` on the same stacked rows is the
reference row.

Usage::

    python benchmarks/peak_memory.py --out benchmarks/results/peak_memory.md
    python benchmarks/peak_memory.py --methods KFed,FeCA --n 100000 --d 10 --clients 1,10
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks._provenance import run_with_out  # noqa: E402
from benchmarks._shared import proc_status, reset_peak_rss  # noqa: E402

METHODS = ["KMeans", "KFed", "FeCA", "FedKStarHC", "FedKMeans", "FedHIRE", "GOLD"]



def make(method: str, n_jobs: int):
    """A fresh estimator with its defaults and 10 clusters.

    Parameters
    ----------
    method : str
        One of :data:`METHODS`.
    n_jobs : int
        Threads.

    Returns
    -------
    estimator
    """
    if method == "KMeans":
        from sklearn.cluster import KMeans

        return KMeans(n_clusters=10, n_init=1, random_state=0)
    import fastfc

    return getattr(fastfc, method)(n_clusters=10, random_state=0, n_jobs=n_jobs)


def child(cfg: dict) -> dict:
    """Measure one fit in this process (see the module docstring).

    Parameters
    ----------
    cfg : dict
        ``method``, ``n``, ``d``, ``clients``, ``mode``, ``n_jobs``.

    Returns
    -------
    dict
        ``cfg`` plus ``data_bytes``, ``added_bytes``, ``ratio``, ``seconds``.
    """
    from fastfc.datasets import make_gaussian_mixture

    method, n, d, n_clients, mode = cfg["method"], cfg["n"], cfg["d"], cfg["clients"], cfg["mode"]
    Xw, _ = make_gaussian_mixture(3000, d, 10, random_state=1)  # JIT warm-up (same code paths, small)
    est = make(method, cfg["n_jobs"])
    if method == "KMeans":
        est.fit(Xw)
    else:
        est.fit(Xw, client_ids=np.arange(3000) % min(n_clients, 3))
    del est, Xw
    X, _ = make_gaussian_mixture(n, d, 10, random_state=0)
    rng = np.random.default_rng(0)
    ids = None
    if mode == "list":
        parts = np.array_split(rng.permutation(n), n_clients)
        X_clients = [X[p] for p in parts]
        del X, parts
        data_bytes = sum(x.nbytes for x in X_clients)
    else:
        ids = rng.integers(0, n_clients, n) if mode == "ids" else np.repeat(np.arange(n_clients), -(-n // n_clients))[:n]
        data_bytes = X.nbytes
    if method == "KMeans" and mode == "list":  # the pooled reference fits the stacked rows
        X = np.concatenate(X_clients)
        del X_clients
        data_bytes = X.nbytes
    gc.collect()
    est = make(method, cfg["n_jobs"])
    base = proc_status("VmRSS")
    reset_peak_rss()
    t0 = time.perf_counter()
    if method == "KMeans":
        est.fit(X)
    elif mode == "list":
        est.fit_clients(X_clients)
    else:
        est.fit(X, client_ids=ids)
    seconds = time.perf_counter() - t0
    peak = proc_status("VmHWM")
    added = max(peak - base, 0)
    return dict(cfg, data_bytes=data_bytes, added_bytes=added, ratio=(added + data_bytes) / data_bytes,
                seconds=seconds)


def measure(cfg: dict) -> dict:
    """Run :func:`child` in a fresh interpreter and return its result (``error`` on failure)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(cfg)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return dict(cfg, error=proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(args) -> int:
    """Measure every configuration and print one markdown table.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed command line.

    Returns
    -------
    int
        Exit status: 0.
    """
    methods = args.methods.split(",")
    modes = args.modes.split(",")
    print("Peak memory of one whole fit (fresh process, JIT warm, float64, 10-cluster Gaussian mixture, "
          f"n_jobs={args.n_jobs}): peak resident set while fitting minus the resident set before it, plus the "
          "data, over the data's size (see the script's docstring). `list` = `fit_clients`, `ids` = "
          "`fit(X, client_ids=...)` with clients interleaved at random, `blocks` = contiguous clients.\n")
    print("| method | rows | d | clients | mode | size(X) MB | added MB | added / size(X) | (X + added) / size(X) "
          "| seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in [int(float(v)) for v in args.n.split(",")]:
        for d in [int(v) for v in args.d.split(",")]:
            for c in [int(v) for v in args.clients.split(",")]:
                for method in methods:
                    for mode in (["list"] if method == "KMeans" else modes):
                        r = measure(dict(method=method, n=n, d=d, clients=c, mode=mode, n_jobs=args.n_jobs))
                        if "error" in r:
                            print(f"| {method} | {n:,} | {d} | {c} | {mode} | — | — | error: {r['error']} | — | — |",
                                  flush=True)
                            continue
                        print(f"| {method} | {n:,} | {d} | {c} | {mode} | {r['data_bytes'] / 1e6:.0f} | "
                              f"{r['added_bytes'] / 1e6:.0f} | {r['added_bytes'] / r['data_bytes']:.2f} | "
                              f"{r['ratio']:.2f} | {r['seconds']:.2f} |", flush=True)
    return 0


def main(argv=None) -> int:
    """Command line (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ", ".join(METHODS))
    ap.add_argument("--n", default="1e6", help="comma-separated row counts")
    ap.add_argument("--d", default="10,50", help="comma-separated feature counts")
    ap.add_argument("--clients", default="1,10,100", help="comma-separated client counts")
    ap.add_argument("--modes", default="list,ids", help="comma-separated subset of list, ids, blocks")
    ap.add_argument("--n-jobs", type=int, default=1, help="threads per fit")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    if argv is None:
        argv = sys.argv[1:]
    if "--child" in argv:
        args = ap.parse_args(argv)
        print(json.dumps(child(json.loads(args.child))))
        return 0
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    sys.exit(main())
