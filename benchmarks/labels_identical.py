#!/usr/bin/env python
"""Check that a code change leaves KFed's, FeCA's and FedKStarHC's fits bit-identical on the published splits.

``--save FILE`` fits every method below on the ten published 8-client splits for each seed and
stores the labels and the global centres (``.npz``); ``--check FILE`` refits with the current code
and compares bit for bit, printing every difference. Run ``--save`` on the old code, ``--check``
on the new one (both from the repository root, so the ``fastfc`` of the working tree is imported).

Usage::

    python benchmarks/labels_identical.py --save /tmp/before.npz --seeds 0-9
    python benchmarks/labels_identical.py --check /tmp/before.npz --seeds 0-9

Exit status 0 when everything is identical (``--check``), 1 otherwise.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from _shared import load_published_split, parse_seeds

SPLITS = ["US", "EC", "YE", "VE", "EP", "CA", "WI", "PE", "LA", "LE"]

#: (name, estimator method, parameters besides n_clusters / random_state / n_jobs)
CASES = [
    ("kfed-default", "kfed", {}),
    ("kfed-reference", "kfed", dict(seed_client="first", server_init="farthest-first", server_max_iter=None,
                                     assign="nearest", units=None, local_n_init=1)),
    ("feca-default", "feca", {}),
    ("fedkstarhc-default", "fedkstarhc", {}),
]


def fit_all(seeds: list[int], splits: list[str]) -> dict[str, np.ndarray]:
    """Labels and centres of every case, split and seed, keyed ``case/split/seed/{labels,centers}``."""
    from fastfc.experiment import make_estimator

    out = {}
    for split in splits:
        X_clients, k = load_published_split(split)
        for name, method, params in CASES:
            p = dict(params)
            if name == "kfed-reference":
                p["n_local_clusters"] = min(k, X_clients[0].shape[1])
            for seed in seeds:
                est = make_estimator(method, n_clusters=k, random_state=seed, n_jobs=1, **p).fit_clients(X_clients)
                out[f"{name}/{split}/{seed}/labels"] = est.labels_
                out[f"{name}/{split}/{seed}/centers"] = est.cluster_centers_
        print(f"done {split}", file=sys.stderr)
    return out


def main(argv=None) -> int:
    """Command line (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--save", metavar="FILE")
    mode.add_argument("--check", metavar="FILE")
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--splits", default=",".join(SPLITS))
    args = ap.parse_args(argv)
    got = fit_all(parse_seeds(args.seeds), args.splits.split(","))
    if args.save:
        np.savez_compressed(args.save, **got)
        print(f"saved {len(got)} arrays to {args.save}")
        return 0
    with np.load(args.check) as ref:
        missing = sorted(set(got) - set(ref.files))
        differ = [key for key in got if key in ref.files and not (
            got[key].dtype == ref[key].dtype and got[key].shape == ref[key].shape
            and np.array_equal(got[key].view(np.uint8), ref[key].view(np.uint8)))]
    for key in missing:
        print(f"not in {args.check}: {key}")
    for key in differ:
        print(f"DIFFERS: {key}")
    n_fits = sum(key.endswith("/labels") for key in got)
    print(f"{n_fits} fits: {len(got) - len(differ) - len(missing)} of {len(got)} arrays (labels and centres) "
          f"bit-identical, {len(differ)} differ, {len(missing)} not in the saved file")
    return 0 if not differ and not missing else 1


if __name__ == "__main__":
    sys.exit(main())
