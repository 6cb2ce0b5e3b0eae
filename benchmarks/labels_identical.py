#!/usr/bin/env python
"""Check that a code change leaves the estimators' fits bit-identical on the published splits.

``--save FILE`` fits every method below on the ten published 8-client splits for each seed and
stores the labels and the global centres (``.npz``); ``--check FILE`` refits with the current code
and compares bit for bit, printing every difference. Run ``--save`` on the old code, ``--check``
on the new one (both from the repository root, so the ``fastfc`` of the working tree is imported).

Usage::

    python benchmarks/labels_identical.py --save /tmp/before.npz --seeds 0-9
    python benchmarks/labels_identical.py --check /tmp/before.npz --seeds 0-9 --out benchmarks/results/x.md

``--cases`` picks cases by name (default: all of :data:`CASES`); ``--check`` prints, per case, how
many split x seed fits have bit-identical labels and centres, and ``--out`` writes that under the
provenance header. To compare against an older revision, run this file (it only needs the
``fastfc`` it imports and ``_shared``) with that revision's tree first on ``PYTHONPATH``.

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
    ("fedhire-default", "fedhire", {}),
    ("gold-default", "gold", {}),
    ("fedhire-reference", "fedhire", dict(semantics="reference")),
    ("gold-reference", "gold", dict(semantics="reference")),
    ("fedkstarhc-default", "fedkstarhc", {}),
    ("fedkstarhc-paper", "fedkstarhc", dict(mode="paper")),
    # refinement rounds (federated Lloyd after the one-shot fit; issue 13)
    ("kfed-refine10", "kfed", dict(refine_rounds=10)),
    ("feca-refine10", "feca", dict(refine_rounds=10)),
    ("fedhire-refine10", "fedhire", dict(refine_rounds=10)),
    ("gold-refine10", "gold", dict(refine_rounds=10)),
    ("fedkstarhc-refine10", "fedkstarhc", dict(refine_rounds=10)),
    ("fedkmeans-default", "fedkmeans", {}),
]


def fit_all(seeds: list[int], splits: list[str], cases: list[str] | None = None, n_jobs: int = 1
            ) -> dict[str, np.ndarray]:
    """Labels and centres of every case, split and seed, keyed ``case/split/seed/{labels,centers}``."""
    from fastfc.experiment import make_estimator

    out = {}
    for split in splits:
        X_clients, k = load_published_split(split)
        for name, method, params in CASES:
            if cases is not None and name not in cases:
                continue
            p = dict(params)
            if name == "kfed-reference":
                p["n_local_clusters"] = min(k, X_clients[0].shape[1])
            for seed in seeds:
                est = make_estimator(method, n_clusters=k, random_state=seed, n_jobs=n_jobs, **p).fit_clients(X_clients)
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
    ap.add_argument("--cases", default=",".join(name for name, _, _ in CASES),
                    help="comma-separated case names (default: all)")
    ap.add_argument("--out", default=None, help="with --check: also write the summary to this results file")
    ap.add_argument("--n-jobs", type=int, default=1, help="threads of every fit (default 1)")
    args = ap.parse_args(argv)
    cases = args.cases.split(",")
    unknown = sorted(set(cases) - {name for name, _, _ in CASES})
    if unknown:
        ap.error(f"unknown cases {unknown}")
    if args.out:
        import _provenance  # noqa: F401  (imported before the fits: the header's load at start is read on import)
    seeds, splits = parse_seeds(args.seeds), args.splits.split(",")
    got = fit_all(seeds, splits, cases, args.n_jobs)
    if args.save:
        np.savez_compressed(args.save, **got)
        print(f"saved {len(got)} arrays to {args.save}")
        return 0
    if args.out:
        from _provenance import tee_results

        with tee_results(args.out, argv):
            return _check(args.check, got, cases, seeds, splits, args.n_jobs)
    return _check(args.check, got, cases, seeds, splits, args.n_jobs)


def _check(path: str, got: dict, cases: list[str], seeds: list[int], splits: list[str], n_jobs: int = 1) -> int:
    """Compare ``got`` with the saved file bit for bit, print every difference and a per-case table."""
    import hashlib

    with open(path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()[:16]
    print(f"Fits of this checkout against `{path}` (SHA-256 {digest}...), splits {','.join(splits)}, "
          f"seeds {seeds[0]}-{seeds[-1]}, n_jobs={n_jobs}; a fit is identical when its labels and global centres are "
          "the same bytes.\n")
    with np.load(path) as ref:
        missing = sorted(set(got) - set(ref.files))
        differ = [key for key in got if key in ref.files and not (
            got[key].dtype == ref[key].dtype and got[key].shape == ref[key].shape
            and np.array_equal(got[key].view(np.uint8), ref[key].view(np.uint8)))]
    for key in missing:
        print(f"not in {path}: {key}")
    for key in differ:
        print(f"DIFFERS: {key}")
    bad = set(differ) | set(missing)
    print("\n| case | fits | identical | differ (split/seed) |")
    print("|---|---|---|---|")
    for name in cases:
        keys = [k for k in got if k.startswith(name + "/") and k.endswith("/labels")]
        off = [k.rsplit("/", 1)[0] for k in keys if k in bad or k.replace("/labels", "/centers") in bad]
        shown = ", ".join(o.split("/", 1)[1] for o in off[:12]) + (" ..." if len(off) > 12 else "")
        print(f"| {name} | {len(keys)} | {len(keys) - len(off)} | {shown or '-'} |")
    print()
    n_fits = sum(key.endswith("/labels") for key in got)
    print(f"{n_fits} fits: {len(got) - len(differ) - len(missing)} of {len(got)} arrays (labels and centres) "
          f"bit-identical, {len(differ)} differ, {len(missing)} not in the saved file")
    return 0 if not differ and not missing else 1


if __name__ == "__main__":
    sys.exit(main())
