#!/usr/bin/env python
"""Where a k-FED default fit spends its time on the published 8-client splits (issue 15, "Small data").

For each split: ``--seeds`` whole default fits (``KFed(n_clusters=K, random_state=seed,
n_jobs=1).fit_clients``, JIT warm), process CPU time, with the fit's parts timed by wrappers
around the functions that do them:

* ``proj``: each client's projection (the top eigenvectors of its Gram matrix);
* ``starts``: each local start's D^2 seeding and 1/3-proximity step (:func:`fastfc.kfed._start_init`);
* ``lloyd``: the local Lloyd runs of every start (:func:`fastfc.kfed.lloyd_best_of`; ``runs`` and
  ``iters`` count the runs and their iterations per fit);
* ``server``: the server's k-means on the pooled local centres (k-means++ and Lloyd, 10 starts);
* ``assign``: the clients' nearest-centre labels;
* ``rest``: everything else (validation, units, messages, states, the runner).

The wrappers add a few microseconds per call (included in ``total``). ``ref ms`` is the median of
the published k-FED code's recorded ``seconds`` (``shared/reference_results/kfed_ref.jsonl``, wall
time on another run of this machine).

Usage::

    python benchmarks/kfed_time_split.py --seeds 10 --out benchmarks/results/kfed_time_split.md
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

import numpy as np

from _provenance import run_with_out
from _shared import SHARED, load_published_split

SPLITS = ["US", "EC", "YE", "VE", "EP", "CA", "WI", "PE", "LA", "LE"]
PARTS = ["proj", "starts", "lloyd", "server", "assign"]


def _instrument(acc: Counter):
    """Wrap the parts' functions (module attributes, looked up at call time) to add their CPU time to ``acc``."""
    import fastfc.kfed as kf

    def wrap(owner, name, part):
        f = getattr(owner, name)

        def timed(*a, **kw):
            t = time.process_time()
            try:
                return f(*a, **kw)
            finally:
                acc[part] += time.process_time() - t

        setattr(owner, name, timed)

    wrap(kf, "_top_eigenvectors", "proj")
    wrap(kf, "_start_init", "starts")
    wrap(kf, "lloyd_best_of", "lloyd")
    wrap(kf, "server_kmeans", "server")
    wrap(kf.KFed, "_assign", "assign")
    lloyd = kf.single_lloyd

    def counted(*a, **kw):  # the local runs (the server's are called through the same name: counted apart)
        out = lloyd(*a, **kw)
        acc["runs"] += 1
        acc["iters"] += out[3]
        return out

    kf.single_lloyd = counted
    _orig_server = kf.server_kmeans

    def server(*a, **kw):  # runs inside the server are not local runs
        before = (acc["runs"], acc["iters"])
        try:
            return _orig_server(*a, **kw)
        finally:
            acc["runs"], acc["iters"] = before

    kf.server_kmeans = server


def _ref_ms() -> dict[str, float]:
    path = SHARED / "reference_results" / "kfed_ref.jsonl"
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {s: 1e3 * float(np.median([r["seconds"] for r in rows if r["dataset"] == s]))
            for s in {r["dataset"] for r in rows}}


def run(args) -> int:
    """Time the splits as ``args`` asks and print the table; returns 0."""
    from fastfc import KFed

    acc: Counter = Counter()
    _instrument(acc)
    ref = _ref_ms()
    print(f"KFed default, n_jobs=1, {args.seeds} fits per split (seeds 0-{args.seeds - 1}, JIT warm); "
          "ms per fit of process CPU time (mean over the fits); runs / iters: local Lloyd runs and their "
          "iterations per fit\n")
    print("| split | K | total ms | proj | starts | lloyd | server | assign | rest | runs | iters | ref ms | ref/ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for split in args.splits.split(","):
        X_clients, k = load_published_split(split)
        KFed(n_clusters=k, random_state=0, n_jobs=1).fit_clients(X_clients)  # warm
        acc.clear()
        t0 = time.process_time()
        for seed in range(args.seeds):
            KFed(n_clusters=k, random_state=seed, n_jobs=1).fit_clients(X_clients)
        total = (time.process_time() - t0) / args.seeds * 1e3
        part = {p: acc[p] / args.seeds * 1e3 for p in PARTS}
        rest = total - sum(part.values())
        r = ref.get(split)
        print(f"| {split} | {k} | {total:.2f} | " + " | ".join(f"{part[p]:.2f}" for p in PARTS)
              + f" | {rest:.2f} | {acc['runs'] / args.seeds:.0f} | {acc['iters'] / args.seeds:.0f} | "
              + (f"{r:.2f} | {r / total:.2f}× |" if r else "- | - |"))
        sys.stdout.flush()
    return 0


def main(argv=None) -> int:
    """Command line (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument("--seeds", type=int, default=10)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    sys.exit(main())
