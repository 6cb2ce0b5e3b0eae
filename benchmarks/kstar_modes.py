#!/usr/bin/env python
"""Fed-k*-HC's default (``mode="robust"``, its k* rules) against its paper setting (``mode="paper"``) on real data.

Two suites, each fitted with K given and with ``n_clusters=None``:

* the paper's nine datasets and two non-IID sets (``shared/datasets/kstar_hc``; per-feature
  min-max scaling of the whole set, Z = 3 IID clients or the spec's label skew; the paper
  setting uses the paper's per-dataset beta, as ``reproduce_kstar_hc.py`` does);
* the ten published 8-client splits (``shared/datasets/fedhire_splits``).

Prints, per dataset, mean ARI with K given, the estimated k* of every seed, how many equal K
and mean ARI at k*; then totals. Scores: adjusted Rand index on every row.

Usage::

    python benchmarks/kstar_modes.py --seeds 0-9 --out benchmarks/results/kstar_modes.md

``--modes`` (default ``robust,robust:bic_eff,robust:bic,robust:ch,paper``): ``robust`` is the
default (``k_select="bic_corr"``), ``robust:RULE`` the robust mode with ``k_select=RULE``
(``bic_eff``: the default before).
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's fastfc
from _provenance import run_with_out  # noqa: E402
from reproduce_kstar_hc import DATASETS, NON_IID, PAPER_BETA, PAPER_KSTAR, SHARED, label_skew, load, parse_seeds  # noqa: E402

SPLITS = ["US", "EC", "YE", "VE", "EP", "CA", "WI", "PE", "LA", "LE"]


def federation(suite: str, name: str, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Client matrices and the concatenated true labels of one (suite, dataset, seed)."""
    if suite == "splits":
        from fastfc.datasets import load_client_npz

        Xc, yc = load_client_npz(str(SHARED / "datasets" / "fedhire_splits" / f"{name}.npz"))
        return Xc, np.concatenate(yc)
    if name in NON_IID:
        X, y = load(name[: -len("_non_iid")])
        parts = label_skew(y, 3, seed)
    else:
        X, y = load(name)
        parts = np.array_split(np.random.default_rng(seed).permutation(len(X)), 3)
    return [X[p] for p in parts], np.concatenate([y[p] for p in parts])


def params(mode: str, suite: str, name: str) -> dict:
    """Estimator parameters of a mode: ``paper``, ``robust`` (the default k* rule) or
    ``robust:RULE`` (``mode="robust"`` with ``k_select=RULE``)."""
    if mode == "paper":
        beta = PAPER_BETA.get(name, 0.5) if suite == "nine" else 1.0
        return dict(mode="paper", beta=beta)
    base, _, rule = mode.partition(":")
    return dict(mode=base, k_select=rule) if rule else dict(mode=base)


def run(suite: str, names: list[str], mode: str, seeds: list[int]) -> list[str]:
    from sklearn.metrics import adjusted_rand_score

    from fastfc import FedKStarHC

    rows, hits, runs, a_given, a_est = [], 0, 0, [], []
    for name in names:
        ks, ag, ae = [], [], []
        for seed in seeds:
            Xc, y = federation(suite, name, seed)
            K = int(np.unique(y).size)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    est = FedKStarHC(n_clusters=K, random_state=seed, **params(mode, suite, name)).fit_clients(Xc)
                    ag.append(adjusted_rand_score(y, est.labels_))
                except ValueError:  # the paper setting: more clusters than uploaded subclusters
                    ag.append(float("nan"))
                est = FedKStarHC(n_clusters=None, random_state=seed, **params(mode, suite, name)).fit_clients(Xc)
            ks.append(est.n_clusters_)
            ae.append(adjusted_rand_score(y, est.labels_))
        h = sum(k == K for k in ks)
        hits, runs = hits + h, runs + len(ks)
        a_given += ag
        a_est += ae
        paper_k = f" | {PAPER_KSTAR[name]}" if suite == "nine" else ""
        rows.append(f"| {name} | {K}{paper_k} | {np.nanmean(ag):.3f} | {','.join(map(str, ks))} | {h}/{len(ks)} | {np.mean(ae):.3f} |")
        print(f"done {suite} {mode} {name}", file=sys.stderr, flush=True)
    head = "| dataset | K" + (" | paper k* (Table 7)" if suite == "nine" else "") + " | ARI, K given | k* per seed | k* = K | ARI at k* |"
    sep = "|---|---" + ("|---" if suite == "nine" else "") + "|---|---|---|---|"
    failed = int(np.isnan(a_given).sum())
    total = (f"\nk* = K in {hits}/{runs} runs; mean ARI with K given {np.nanmean(a_given):.3f}"
             + (f" ({failed} runs failed)" if failed else "") + f"; mean ARI at k* {np.mean(a_est):.3f}\n")
    label = f"mode={mode}" + (f" (default k_select={FedKStarHC().k_select!r})" if mode == "robust" else "")
    return [f"\n### {suite}, {label}\n", head, sep, *rows, total]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--modes", default="robust,robust:bic_eff,robust:bic,robust:ch,paper",
                    help="comma-separated: robust (default k_select), robust:RULE (k_select=RULE), paper")
    ap.add_argument("--suites", default="nine,splits")
    return run_with_out(ap, argv, _run)


def _run(args) -> int:
    """Fit every suite in every mode and print the tables."""
    seeds = parse_seeds(args.seeds)
    t0 = time.perf_counter()
    out = [f"Fed-k*-HC modes, seeds {args.seeds}, {platform.machine()}, Python {platform.python_version()}"]
    for suite in args.suites.split(","):
        names = DATASETS + NON_IID if suite == "nine" else SPLITS
        for mode in args.modes.split(","):
            out += run(suite, names, mode, seeds)
    out.append(f"({time.perf_counter() - t0:.0f} s)")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
