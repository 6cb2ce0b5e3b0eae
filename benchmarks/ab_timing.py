#!/usr/bin/env python
"""Time whole fits of two checkouts of fastfc side by side, alternating, on the published splits.

One worker process per checkout (each imports the ``fastfc`` of its own tree); for every method
and split the two are asked in turn, the order swapped every round, to time ``--seeds`` whole
fits each (``fit_clients``, n_jobs=1, JIT warm, process CPU time). The table gives the median
over all timed fits of each checkout and the ratio old/new. Alternating in one run puts both
under the same machine load.

Usage::

    git worktree add /tmp/old <revision> && (cd /tmp/old && python setup.py -q build_ext --inplace)
    python benchmarks/ab_timing.py --old /tmp/old --new . --methods kfed,feca --rounds 3 --seeds 5
    python benchmarks/ab_timing.py --old /tmp/old --new . --methods kfed --splits '' --mixture 1e6:10:1000
    python benchmarks/ab_timing.py --old /tmp/old --new . --methods fedhire --params '{"semantics": "reference"}'

``--mixture N:D:CLIENTS`` adds a row on ``scaling.py --what ratio``'s data (a 10-cluster Gaussian mixture of
N rows x D features split at random into CLIENTS equal clients, ``n_clusters=10``).

``--out FILE`` writes the table under the provenance header (the new checkout's revision;
give the old one's in ``--old-label``).
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from _provenance import run_with_out
from _shared import SHARED, add_checkout_args, checkout_workers

SPLITS = ["US", "EC", "YE", "VE", "EP", "CA", "WI", "PE", "LA", "LE"]

#: the worker: reads "method split n_seeds" lines, answers a JSON list of CPU seconds per fit
_WORKER = r"""
import json, sys, time
import numpy as np
from fastfc.datasets import load_client_npz
from fastfc.experiment import make_estimator
data = {}
for line in sys.stdin:
    method, path, seeds, params = line.split(maxsplit=3)
    params = json.loads(params)
    if path not in data and path.startswith("mixture:"):  # scaling.py --what ratio's data: n rows x d, c clients
        from fastfc.datasets import make_gaussian_mixture
        n, d, c = (int(float(v)) for v in path.split(":")[1:])
        X, _ = make_gaussian_mixture(n, d, 10, random_state=0)
        data[path] = ([X[p] for p in np.array_split(np.random.default_rng(0).permutation(n), c)], 10)
        del X
    if path not in data:
        Xc, yc = load_client_npz(path)
        data[path] = (Xc, int(np.unique(np.concatenate(yc)).size))
    Xc, k = data[path]
    make_estimator(method, n_clusters=k, random_state=0, n_jobs=1, **params).fit_clients(Xc)  # warm (JIT, caches)
    out = []
    for s in range(int(seeds)):
        est = make_estimator(method, n_clusters=k, random_state=s, n_jobs=1, **params)
        t0 = time.process_time()
        est.fit_clients(Xc)
        out.append(time.process_time() - t0)
    print(json.dumps(out), flush=True)
"""


def run(args) -> int:
    """Time both checkouts as ``args`` (the parsed command line) asks and print the table; returns 0."""
    params = json.loads(args.params)
    if not isinstance(params, dict):
        raise SystemExit(f"--params must be a JSON object, got {args.params!r}")
    with checkout_workers(args.old, args.new, _WORKER) as (trees, ask):
        extra = f", parameters {json.dumps(params)}" if params else ""
        print(f"old = {args.old_label} ({trees['old']}), new = this revision ({trees['new']}); per cell: median of "
              f"{args.rounds} rounds x {args.seeds} seeds whole fits (process CPU ms, n_jobs=1, JIT warm{extra}), the "
              "two checkouts alternating in one run\n")
        print("| method | split | ms (old) | ms (new) | old/new |")
        print("|---|---|---|---|---|")
        for method in args.methods.split(","):
            splits = [s for s in args.splits.split(",") if s]
            for split in splits + [f"mixture:{m}" for m in args.mixture]:
                path = split if split.startswith("mixture:") else SHARED / "datasets" / "fedhire_splits" / f"{split}.npz"
                answers = ask(f"{method} {path} {args.seeds} {json.dumps(params)}", args.rounds)
                old, new = (np.median([x for res in answers[t] for x in res]) * 1e3 for t in ("old", "new"))
                print(f"| {method} | {split} | {old:.2f} | {new:.2f} | {old / new:.2f}× |", flush=True)
    return 0


def main(argv=None) -> int:
    """Command line (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_checkout_args(ap)
    ap.add_argument("--methods", default="kfed,feca")
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--params", default="{}", metavar="JSON",
                    help='estimator parameters for every method, a JSON object, e.g. \'{"semantics": "reference"}\'')
    ap.add_argument("--mixture", action="append", default=[], metavar="N:D:CLIENTS",
                    help="also time scaling.py --what ratio's data (10-cluster mixture, N rows x D features, random "
                         "equal split over CLIENTS clients, n_clusters=10); repeatable; --splits '' for these alone")
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    sys.exit(main())
