#!/usr/bin/env python
"""Does Fed-k*-HC's server phase grow with the rows per subcluster? (issue 15)

The clients' subcluster count is held fixed (``n_micro`` pieces per client, so the server
always merges ``clients x n_micro`` subclusters) while the rows per client grow; only the
server phase (``server_aggregate`` on the clients' summaries) is timed, median of
``--repeats`` runs, k given (10) and k* estimated. Data: ``make_gaussian_mixture(n, d, 10)``
split at random into equal clients.

* ``mode="robust"`` (the default) merges from the subclusters' moments only (Ward's cost, or
  Eq. 21 with the root-mean-square radius, both exact from the moments): its time should not
  depend on the rows.
* ``mode="paper"`` is the published algorithm: every client uploads as many substitute rows
  as it has rows, and after each merge the radius of the union is the mean distance of its
  substitute rows to the new centre (not a function of the moments), so each merge reads
  the union's rows: its time grows with the rows. It is kept as the reference behaviour.

Usage::

    python benchmarks/kstar_server_rows.py --out benchmarks/results/kstar_server_rows.md
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks._provenance import run_with_out  # noqa: E402


def server_seconds(est, summaries, repeats: int) -> float:
    """Median wall time of ``est.server_aggregate(summaries)``.

    Parameters
    ----------
    est : FedKStarHC
    summaries : list of Message
    repeats : int

    Returns
    -------
    float
    """
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        est.server_aggregate(summaries, random_state=0)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def run(args) -> int:
    """Print the table (see the module docstring).

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
        Exit status 0.
    """
    import warnings

    from fastfc import FedKStarHC
    from fastfc.datasets import make_gaussian_mixture

    warnings.simplefilter("ignore", RuntimeWarning)  # min_frac=0 leaves a few single-row subclusters (fine here)

    ns = [int(float(v)) for v in args.n.split(",")]
    c, d, m = args.clients, args.d, args.n_micro
    print(f"Fed-k*-HC server phase alone (`server_aggregate`), {c} clients x n_micro={m} subclusters, d = {d}, "
          f"one thread; seconds = median of {args.repeats} runs.\n")
    print("| mode | k | rows | rows per subcluster | subclusters | substitute rows | server seconds |")
    print("|---|---|---|---|---|---|---|")
    slopes = {}
    for mode in ("robust", "paper"):
        for k in (10, None):
            xs, ys = [], []
            for n in ns:
                X, _ = make_gaussian_mixture(n, d, 10, random_state=0)
                parts = np.array_split(np.random.default_rng(0).permutation(n), c)
                est = FedKStarHC(n_clusters=k, mode=mode, n_micro=m, min_frac=0.0, random_state=0, n_jobs=1)
                summaries = [est.client_summarize(X[p], client_index=i, random_state=0)[0] for i, p in enumerate(parts)]
                k0 = sum(int(s.counts.shape[0]) for s in summaries)
                n_subs = sum(int(np.asarray(s.substitutes).shape[0]) for s in summaries)
                est.server_aggregate(summaries, random_state=0)  # warm
                sec = server_seconds(est, summaries, args.repeats)
                xs.append(n)
                ys.append(sec)
                print(f"| {mode} | {k if k else 'k*'} | {n:,} | {n / k0:.0f} | {k0} | {n_subs:,} | {sec:.3f} |",
                      flush=True)
            slopes[(mode, k)] = float(np.polyfit(np.log(xs), np.log(ys), 1)[0]) if len(xs) > 1 else float("nan")
    print("\nLog-log slope of the server seconds in the rows (subclusters fixed):\n")
    print("| mode | k | slope |")
    print("|---|---|---|")
    for (mode, k), s in slopes.items():
        print(f"| {mode} | {k if k else 'k*'} | {s:.2f} |")
    return 0


def main(argv=None) -> int:
    """Command line (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="1e4,1e5,1e6", help="comma-separated total rows")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--n-micro", type=int, default=50, help="subclusters per client (fixed)")
    ap.add_argument("--repeats", type=int, default=3)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    sys.exit(main())
