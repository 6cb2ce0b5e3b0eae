#!/usr/bin/env python
"""One client, n_jobs=1 and 2, two checkouts side by side (issue 15, "parallel inside a client").

One worker process per checkout (each imports the ``fastfc`` of its own tree, extensions built in
place). For every estimator the two are asked in turn, the order swapped every round, to fit one
client (``fit(X)``, a 10-cluster Gaussian mixture, ``n_clusters=10``, ``random_state=0``, JIT
warm) ``--fits`` times with n_jobs=1 and n_jobs=2 alternating. Per fit: wall seconds, process CPU
seconds (all threads) and CPU seconds of the thread that runs the fit. The table gives medians
over all timed fits. On a loaded machine the wall time mostly measures the load; the process CPU
shows the work (and the spinning) of every thread, the main-thread CPU the critical path.

Usage::

    git worktree add /tmp/old <revision> && (cd /tmp/old && python setup.py -q build_ext --inplace)
    python benchmarks/one_client_ab.py --old /tmp/old --new . --d 50 --rounds 3 --fits 3
"""
from __future__ import annotations

import argparse

import numpy as np

from _provenance import run_with_out
from _shared import add_checkout_args, checkout_workers

ESTIMATORS = ["FeCA", "KFed", "FedKMeans", "FedKStarHC", "FedHIRE", "GOLD"]

#: the worker: reads "estimator n d fits" lines, answers JSON {n_jobs: [[wall, cpu, main], ...]}
_WORKER = r"""
import json, sys, time
import numpy as np
import fastfc
from fastfc.datasets import make_gaussian_mixture
data = {}
for line in sys.stdin:
    name, n, d, fits = line.split()
    n, d, fits = int(n), int(d), int(fits)
    if (n, d) not in data:
        data[(n, d)] = make_gaussian_mixture(n, d, 10, random_state=0)[0]
    X = data[(n, d)]
    Est = getattr(fastfc, name)
    labels = {}
    for nj in (1, 2):
        labels[nj] = Est(n_clusters=10, random_state=0, n_jobs=nj).fit(X).labels_  # warm
    out = {1: [], 2: []}
    for _ in range(fits):
        for nj in (1, 2):
            w, c, m = time.perf_counter(), time.process_time(), time.thread_time()
            Est(n_clusters=10, random_state=0, n_jobs=nj).fit(X)
            out[nj].append([time.perf_counter() - w, time.process_time() - c, time.thread_time() - m])
    out["same"] = bool(np.array_equal(labels[1], labels[2]))
    print(json.dumps(out), flush=True)
"""


def run(args) -> int:
    with checkout_workers(args.old, args.new, _WORKER) as (trees, ask):
        print("# One client: n_jobs=2 against n_jobs=1, two checkouts side by side\n")
        print(f"old = {args.old_label} ({trees['old']}), new = this revision ({trees['new']}). {args.n} rows x "
              f"{args.d} features (10-cluster Gaussian mixture, seed 0), one client, `n_clusters=10`, "
              f"`random_state=0`; per cell the median of {args.rounds} rounds x {args.fits} fits, the checkouts "
              "alternating (order swapped every round), n_jobs 1 and 2 alternating within a checkout. Times in ms: "
              "wall, process CPU (all threads), main = CPU of the thread that runs the fit. `speed-up` = wall(1) / "
              "wall(2). The load average is in the header: on a loaded machine wall time is mostly the load; "
              "compare the CPU columns. `same` = labels of n_jobs 1 and 2 identical.\n")
        print("| estimator | tree | wall 1 | wall 2 | speed-up | CPU 1 | CPU 2 | CPU 2 / CPU 1 | main 1 | main 2 "
              "| same |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name in args.estimators.split(","):
            answers = ask(f"{name} {args.n} {args.d} {args.fits}", args.rounds)
            for t in ("old", "new"):
                a = np.median(np.array([x for res in answers[t] for x in res["1"]]), axis=0) * 1e3
                b = np.median(np.array([x for res in answers[t] for x in res["2"]]), axis=0) * 1e3
                same = all(res["same"] for res in answers[t])
                print(f"| {name} | {t} | {a[0]:.1f} | {b[0]:.1f} | {a[0] / b[0]:.2f} | {a[1]:.1f} | {b[1]:.1f} | "
                      f"{b[1] / a[1]:.2f} | {a[2]:.1f} | {b[2]:.1f} | {same} |", flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkout_args(ap)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--estimators", default=",".join(ESTIMATORS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fits", type=int, default=3)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
