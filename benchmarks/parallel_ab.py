#!/usr/bin/env python
"""The one-client n_jobs table (``bench_kernels.py --table parallel``) of two checkouts side by side.

One worker process per checkout (each imports the ``fastfc`` of its own tree, as
``ab_timing.py`` does); for every estimator the two are asked in turn, the order swapped every
round, to fit one client (``fit(X)``, a 10-cluster Gaussian mixture, ``n_clusters=10``,
``random_state=0``, JIT warm; ``--clients C``: the rows cut into ``C`` equal consecutive clients,
``fit_clients``) with ``n_jobs=1`` and then ``n_jobs=2``. Each cell is the median
over the rounds of: wall seconds, process CPU seconds (all threads) and main-thread CPU seconds
(the thread that runs the fit). Alternating in one run puts both checkouts under the same load,
which on this shared machine changes from minute to minute; the CPU columns are the ones to
read under load (a thread waiting for a core costs wall time, not CPU time). Also checks that
both thread counts of both checkouts give the same labels and centres (one hash per fit).

Usage::

    git worktree add --detach /tmp/old main && (cd /tmp/old && python setup.py -q build_ext --inplace)
    python benchmarks/parallel_ab.py --old /tmp/old --new . --d 10 --rounds 5
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from _provenance import run_with_out
from _shared import add_checkout_args, checkout_workers

ESTIMATORS = ["FeCA", "KFed", "FedKMeans", "FedKStarHC"]

#: the worker: reads "estimator n d clients", fits n_jobs=1 then 2, answers JSON {nj: [wall, cpu, main, hash]}
_WORKER = r"""
import hashlib, json, sys, time
import numpy as np
import fastfc
from fastfc.datasets import make_gaussian_mixture
data = {}
for line in sys.stdin:
    name, n, d, c = line.split()
    key = (int(n), int(d))
    if key not in data:
        data[key] = make_gaussian_mixture(key[0], key[1], 10, random_state=0)[0]
    X = data[key]
    Xc = np.array_split(X, int(c)) if int(c) > 1 else None
    Est = getattr(fastfc, name)
    if name not in data:
        data[name] = Est(n_clusters=10, random_state=0).fit(X[:2000])  # compile / warm
        for nj in (1, 2):
            Est(n_clusters=10, random_state=0, n_jobs=nj).fit(X)
    out = {}
    for nj in (1, 2):
        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        est = Est(n_clusters=10, random_state=0, n_jobs=nj)
        est = est.fit(X) if Xc is None else est.fit_clients(Xc)
        t = [time.perf_counter() - t0, time.process_time() - c0, time.thread_time() - m0]
        h = hashlib.sha1(np.ascontiguousarray(est.labels_).tobytes()
                         + np.ascontiguousarray(est.cluster_centers_).tobytes()).hexdigest()[:12]
        out[nj] = t + [h]
    print(json.dumps(out), flush=True)
"""


def run(args) -> int:
    """Time both checkouts as ``args`` asks and print the table; returns 0 (1 when some hash differs)."""
    status = 0
    with checkout_workers(args.old, args.new, _WORKER) as (trees, ask):
        who = "one client (`fit(X)`)" if args.clients == 1 else f"{args.clients} equal clients (`fit_clients`)"
        print(f"# {'One client' if args.clients == 1 else f'{args.clients} clients'}, n_jobs=2 against n_jobs=1: "
              "two checkouts side by side\n")
        print(f"old = {args.old_label} ({trees['old']}), new = this revision ({trees['new']}). {args.n} rows x "
              f"{args.d} features (10-cluster Gaussian mixture, seed 0), {who}, `n_clusters=10`, "
              f"`random_state=0`, JIT warm; the two checkouts alternate (order swapped every round), medians of "
              f"{args.rounds} rounds. wall, CPU (process, all threads) and main-thread CPU in ms for n_jobs=1 / "
              "n_jobs=2; `speed-up` = wall(1) / wall(2) (target >= 1.7); `bounded est.` = main(1) / max(main(2), "
              "CPU(2) / 2), the idle-machine estimate of `bench_kernels.py --table parallel` (on two cores the wall "
              "time is at least half the process CPU); `same` = every fit of both checkouts and both thread counts "
              "gave the same labels and centres (hash).\n")
        print("| estimator | tree | wall 1 | wall 2 | speed-up | CPU 1 | CPU 2 | main 1 | main 2 | bounded est. | same |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name in args.estimators.split(","):
            res = ask(f"{name} {args.n} {args.d} {args.clients}", args.rounds)
            hashes = {x[nj][3] for tree in res for x in res[tree] for nj in ("1", "2")}
            same = len(hashes) == 1
            status |= not same
            for tree in ("old", "new"):
                med = {nj: [float(np.median([x[nj][i] for x in res[tree]])) * 1e3 for i in range(3)]
                       for nj in ("1", "2")}
                (w1, c1, m1), (w2, c2, m2) = med["1"], med["2"]
                print(f"| {name} | {tree} | {w1:.1f} | {w2:.1f} | {w1 / w2:.2f} | {c1:.1f} | {c2:.1f} | {m1:.1f} "
                      f"| {m2:.1f} | {m1 / max(m2, c2 / 2):.2f} | {same} |", flush=True)
    return status


def main(argv=None) -> int:
    """Command line (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkout_args(ap)
    ap.add_argument("--estimators", default=",".join(ESTIMATORS))
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--clients", type=int, default=1, help="1: fit(X); more: fit_clients of equal parts")
    ap.add_argument("--rounds", type=int, default=5)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    sys.exit(main())
