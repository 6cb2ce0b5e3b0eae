#!/usr/bin/env python
"""Ablation of Fed-k*-HC's k* rules (``mode="robust"``, ``n_clusters=None``) on one set of trees.

Every federation is fitted once; the server's inputs (subcluster counts, means and sums of
squares in globally standardised units) and its Ward tree are kept, and every candidate rule
reads k* off the same tree:

* ``bic``: BIC with the rows as the sample (:func:`fastfc.fed_kstar_hc.select_k_bic`);
* ``bic_eff a=...``: BIC with the effective sample size ``k0**a * n**(1 - a)``
  (:func:`fastfc.fed_kstar_hc.bic_sample_size`; a = 0 is ``bic``, a = 1 the subclusters);
* ``ch``: Calinski-Harabasz (:func:`fastfc.fed_kstar_hc.select_k_ch`);
* ``gap``: the largest relative jump of Ward's merge cost, ``cost(k -> k-1) / cost(k+1 -> k)``
  over k = 2..sqrt(k0);
* ``gap>=3``: the largest k whose jump is at least 3 (1 when none is).

Suites: the paper's nine datasets and two non-IID sets, the ten published 8-client splits
(both as in ``kstar_modes.py``) and the sanity grid (``fastfc.datasets.sanity_grid``, every
case but identical rows). Per rule: runs with k* = K and the mean of |log2(k*/K)| (0 when exact,
1 for a factor of two). Choose constants on seeds 10-19, report on 0-9.

Usage::

    python benchmarks/kstar_select_ablation.py --seeds 10-19 --sanity-seeds 0,1,2 --out benchmarks/results/kstar_select_ablation.md
"""
from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's fastfc
from _provenance import run_with_out  # noqa: E402
from kstar_modes import SPLITS, federation  # noqa: E402
from reproduce_kstar_hc import DATASETS, NON_IID, parse_seeds  # noqa: E402

LEAF_EXPONENTS = (0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0)
GAP_THRESHOLD = 3.0


def server_inputs(X_clients: list[np.ndarray], seed: int) -> dict:
    """Fit the default estimator with K unknown; return the server's leaves and Ward tree."""
    import fastfc.fed_kstar_hc as fk

    kept = {}

    class Recording(fk.FedKStarHC):
        # a benchmark-only hook: keep what the server merged (the moments, already in its units)
        def _merge_robust(self, summaries, counts, d, n_threads):
            means = np.concatenate([np.asarray(s.centers, dtype=np.float64) for s in summaries])
            stds = np.concatenate([np.asarray(s.stds, dtype=np.float64) for s in summaries])
            _, std, m2 = fk.pooled_scale(counts, means, stds)
            unit = np.where(std > 0, std, 1.0)
            kept.update(counts=counts.copy(), centers=means / unit, m2=m2 / unit ** 2)
            return super()._merge_robust(summaries, counts, d, n_threads)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = Recording(n_clusters=None, random_state=seed).fit_clients(X_clients)
    if "counts" not in kept or est.merges_.shape[0] != kept["counts"].shape[0] - 1:
        return {}  # all rows identical: no tree
    kept["merges"] = np.asarray(est.merges_)
    return kept


def rules() -> list[str]:
    return ["bic", *[f"bic_eff a={a:g}" for a in LEAF_EXPONENTS], "ch", "gap", f"gap>={GAP_THRESHOLD:g}"]


def k_star(rule: str, t: dict) -> int:
    """k* of one rule on one recorded tree."""
    from fastfc.fed_kstar_hc import bic_sample_size, moment_tree, select_k_bic, select_k_ch

    counts, C, M2, merges = t["counts"], t["centers"], t["m2"], t["merges"]
    k0, n = counts.shape[0], float(counts.sum())
    if rule == "bic":
        return select_k_bic(merges, counts, C, M2)[0]
    if rule.startswith("bic_eff"):
        a = float(rule.split("=")[1])
        return select_k_bic(merges, counts, C, M2, sample_size=bic_sample_size(k0, n, leaf_exponent=a))[0]
    _, _, gain = moment_tree(counts, C, M2)
    if rule == "ch":
        nn = float(counts.sum())
        grand = (counts[:, None] * C).sum(0) / nn
        total = float(M2.sum() + (counts[:, None] * (C - grand) ** 2).sum())
        return select_k_ch(gain, total, float(M2.sum()), int(nn))[0]
    # cost of the merge from k to k - 1 clusters (k = 2..k0) is gain[k0 - k]
    cost = {k: gain[k0 - k] for k in range(2, k0 + 1)}
    jump = {k: cost[k] / cost[k + 1] for k in range(2, k0) if cost[k + 1] > 0}
    if rule == "gap":
        cand = {k: v for k, v in jump.items() if k <= max(2, int(math.sqrt(k0)))}
        return max(cand, key=lambda k: (cand[k], -k)) if cand else 1
    big = [k for k, v in jump.items() if v >= GAP_THRESHOLD]
    return max(big) if big else 1


def collect(suite: str, seeds: list[int]) -> list[tuple[str, int, dict]]:
    """(dataset, K, recorded tree) of every run of a suite."""
    out = []
    if suite == "sanity":
        from fastfc.datasets._sanity import make_sanity_case, sanity_grid

        for case in sanity_grid(seeds=tuple(seeds)):
            if case.degenerate == "identical":
                continue
            Xc, _ = make_sanity_case(case)
            out.append((case.name.split(" #")[0], case.n_clusters, server_inputs(Xc, case.seed)))
        return out
    names = SPLITS if suite == "splits" else DATASETS + NON_IID
    for name in names:
        for seed in seeds:
            Xc, y = federation(suite, name, seed)
            out.append((name, int(np.unique(y).size), server_inputs(Xc, seed)))
    return out


def table(suite: str, runs: list[tuple[str, int, dict]], seeds_text: str) -> list[str]:
    names = list(dict.fromkeys(r[0] for r in runs))
    per_name = suite != "sanity"
    head = "| rule | k* = K | mean abs log2(k*/K) |" + ("".join(f" {nm} (K={next(r[1] for r in runs if r[0] == nm)}) |" for nm in names) if per_name else "")
    sep = "|---|---|---|" + ("---|" * len(names) if per_name else "")
    lines = [f"\n### {suite}, seeds {seeds_text} ({len(runs)} runs)\n", head, sep]
    for rule in rules():
        ks = [k_star(rule, t) if t else 1 for _, _, t in runs]
        hits = sum(k == K for k, (_, K, _) in zip(ks, runs))
        lr = np.mean([abs(math.log2(k / K)) for k, (_, K, _) in zip(ks, runs)])
        cells = ""
        if per_name:
            for nm in names:
                sub = [(k, K) for k, (m, K, _) in zip(ks, runs) if m == nm]
                cells += f" {sum(k == K for k, K in sub)}: med {int(np.median([k for k, _ in sub]))} |"
        lines.append(f"| {rule} | {hits}/{len(runs)} | {lr:.2f} |{cells}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="10-19", help="seeds of the nine datasets and the splits")
    ap.add_argument("--sanity-seeds", default="0,1,2", help="seeds of the sanity grid ('' to skip)")
    ap.add_argument("--suites", default="nine,splits,sanity")
    return run_with_out(ap, argv, _run)


def _run(args) -> int:
    """Record every tree, score every rule, print the tables."""
    t0 = time.perf_counter()
    out = [f"Fed-k*-HC k* rules on the same Ward trees (mode=\"robust\"); cells per dataset: runs with k* = K, median k*"]
    for suite in args.suites.split(","):
        text = args.sanity_seeds if suite == "sanity" else args.seeds
        if not text:
            continue
        seeds = parse_seeds(text)
        out += table(suite, collect(suite, seeds), text)
        print(f"done {suite}", file=sys.stderr, flush=True)
    out.append(f"\n({time.perf_counter() - t0:.0f} s)")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
