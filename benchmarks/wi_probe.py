#!/usr/bin/env python
"""Why does refined KFed miss centralised k-means on the WI split? Units or local optimum (issue 13).

On the published WI split (8 clients), for every seed: centralised ``KMeans`` (10 and 1 starts) on the
pooled rows in raw units and in the federation-standardised units (rows x ``1 / std`` of the pooled
rows, KFed's ``units='federated'``), and refined KFed (``refine_rounds=10``) in both units with 1, 4 and
10 parallel chains (``refine_n_init``). Reports mean ARI and the k-means cost of every partition in
both units, relative to the 10-start centralised k-means of that unit's objective (1.000 = as good as
it; below 1 = a better optimum than it found).

    python benchmarks/wi_probe.py --seeds 0-9 --out benchmarks/results/wi_probe.md
"""
from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from _provenance import run_with_out
from _shared import parse_seeds
from refine_study import load_ffcm, load_split, partition_cost, score


def body(args) -> int:
    """Run the probe; returns 0."""
    import fastfc
    from sklearn.cluster import KMeans

    seeds = parse_seeds(args.seeds)
    split = args.split
    X_clients, y, k = load_split(split)
    X = np.vstack(X_clients).astype(np.float64)
    std = X.std(axis=0)
    w_fed = np.where(std > 0, 1.0 / np.where(std > 0, std, 1.0), 0.0)
    ffcm = load_ffcm()[split]
    rows = []  # (name, units of its distances, factory(seed) -> labels)

    def km(n_init, w):
        return lambda s: KMeans(n_clusters=k, n_init=n_init, random_state=s).fit(X if w is None else X * w).labels_

    def kfed(units, chains):
        return lambda s: fastfc.KFed(n_clusters=k, units=units, refine_rounds=10, refine_n_init=chains,
                                     random_state=s, n_jobs=1).fit_clients(X_clients).labels_

    def kfed0(units):
        return lambda s: fastfc.KFed(n_clusters=k, units=units, random_state=s, n_jobs=1).fit_clients(X_clients).labels_

    rows = [("KMeans(n_init=10), raw units", km(10, None)), ("KMeans(n_init=1), raw units", km(1, None)),
            ("KMeans(n_init=10), standardised units", km(10, w_fed)),
            ("KMeans(n_init=1), standardised units", km(1, w_fed)),
            ("KFed one-shot, raw", kfed0(None)), ("KFed one-shot, federated", kfed0("federated"))]
    rows += [(f"KFed R=10 refine_n_init={c}, {'raw' if u is None else 'federated'}", kfed(u, c))
             for u in (None, "federated") for c in (1, 4, 10)]
    acc = defaultdict(lambda: defaultdict(list))
    for s in seeds:
        ref_raw = partition_cost(X, km(10, None)(s), None)
        ref_fed = partition_cost(X, km(10, w_fed)(s), w_fed)
        for name, fn in rows:
            lab = fn(s)
            acc[name]["ari"].append(score(y, lab)[0])
            acc[name]["raw"].append(partition_cost(X, lab, None) / ref_raw)
            acc[name]["fed"].append(partition_cost(X, lab, w_fed) / ref_fed)
    print(f"## {split}: k-means in raw and standardised units vs refined KFed, seeds {seeds[0]}-{seeds[-1]}\n")
    print(f"{split}: {X.shape[0]} rows x {X.shape[1]} features, K = {k}, {len(X_clients)} clients; feature std "
          f"min {std.min():.3g}, max {std.max():.3g}. FFCM mean ARI {ffcm:.3f}. Standardised units: rows x 1/std of "
          "the pooled rows (what units='federated' computes from the clients' moments). cost raw / cost std: "
          "k-means objective of the partition in raw / standardised units over that of KMeans(n_init=10) in "
          "the same units and seed. ARI and cost ratios: mean over seeds (min-max of ARI in brackets).\n")
    print("| method | mean ARI (min-max) | cost raw | cost std |")
    print("|---|---|---|---|")
    for name, _ in rows:
        a = acc[name]
        print(f"| {name} | {np.mean(a['ari']):.3f} ({min(a['ari']):.3f}-{max(a['ari']):.3f}) "
              f"| {np.mean(a['raw']):.3f} | {np.mean(a['fed']):.3f} |")
    print()
    return 0


def main(argv=None) -> int:
    """Command line; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="WI")
    ap.add_argument("--seeds", default="0-9")
    return run_with_out(ap, argv, body)


if __name__ == "__main__":
    raise SystemExit(main())
