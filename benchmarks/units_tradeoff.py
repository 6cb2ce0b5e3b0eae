"""Per-feature units for clustering: what each scale estimate does to pooled k-means (an experiment).

Every fastfc default standardises each feature by its spread over the federation, so that features
in any units count alike (``benchmarks/user_audit.py``: features in units 1e-9..1e9 give ARI 1.000).
The same step shrinks a feature whose spread comes from well-separated clusters to unit spread, so
clusters separated in 2 of 50 features are lost (ARI 0.00-0.57). This script asks which per-feature
scale keeps both, on pooled rows (no federation, so only the units differ): scikit-learn's
``KMeans(n_init=10, random_state=0)`` on ``X / scale`` with

- ``raw``: scale 1;
- ``std``: the standard deviation (what the defaults use, up to federation);
- ``mad``: 1.4826 x the median absolute deviation from the median;
- ``kspacing``: the median over sorted values of ``v[i + m] - v[i]`` with ``m = ceil(0.02 n)``, a
  local spread that grows with the gaps inside a cluster, not with the gaps between clusters
  (a feature of K equal well-separated clusters gets about K x its within-cluster spacing); 0 (ties)
  falls back to ``std``.

Cases: the user audit's cases with a true partition (data seeds 0-2, lowest ARI shown) and the ten
published 8-client splits (rows pooled, true classes; mean over KMeans seeds 0-2).

Usage::

    python benchmarks/units_tradeoff.py --out benchmarks/results/units_tradeoff.md
"""
from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sklearn.cluster import KMeans  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402

from _provenance import run_with_out  # noqa: E402

SCALES = ("raw", "std", "mad", "kspacing")
SPLITS = ("US", "EC", "YE", "VE", "EP", "CA", "WI", "PE", "LA", "LE")


def feature_scale(X: np.ndarray, how: str) -> np.ndarray:
    """Per-feature scale of ``X`` (n, d) by the rule ``how`` (see the module docstring)."""
    X = np.asarray(X, dtype=np.float64)
    std = X.std(axis=0)
    if how == "raw":
        return np.ones(X.shape[1])
    if how == "std":
        s = std
    elif how == "mad":
        s = 1.4826 * np.median(np.abs(X - np.median(X, axis=0)), axis=0)
    elif how == "kspacing":
        n = X.shape[0]
        m = max(1, min(n - 1, math.ceil(0.02 * n)))
        v = np.sort(X, axis=0)
        s = np.median(v[m:] - v[:-m], axis=0) if n > 1 else np.zeros(X.shape[1])
    else:
        raise ValueError(how)
    s = np.where(s > 0, s, std)
    return np.where(s > 0, s, 1.0)


def pooled_ari(X, y, k: int, how: str, seed: int = 0) -> float:
    X = np.asarray(X, dtype=np.float64)
    Z = X / feature_scale(X, how)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(Z)
    return float(adjusted_rand_score(y, labels))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--no-splits", action="store_true", help="skip the published splits")
    return run_with_out(parser, argv, run)


def run(args) -> int:
    """Run the cases the parsed command line ``args`` asks for and print the tables; returns 0."""
    from user_audit import make_cases

    by_seed = {s: make_cases(s) for s in args.seeds}
    rows = []
    for i, case in enumerate(by_seed[args.seeds[0]]):
        if case.bad or case.y is None:
            continue
        cells = []
        for how in SCALES:
            cells.append(min(pooled_ari(by_seed[s][i].X, by_seed[s][i].y, case.k, how) for s in args.seeds))
        rows.append(f"| {case.name} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
        print(rows[-1], file=sys.stderr, flush=True)
    split_rows = []
    if not args.no_splits:
        from fastfc.datasets import load_client_npz
        from _shared import SHARED

        for split in SPLITS:
            path = SHARED / "datasets" / "fedhire_splits" / f"{split}.npz"
            if not path.exists():
                continue
            Xc, yc = load_client_npz(str(path))
            X, y = np.vstack(Xc), np.concatenate(yc)
            k = int(np.unique(y).size)
            cells = [float(np.mean([pooled_ari(X, y, k, how, seed=s) for s in args.seeds])) for how in SCALES]
            split_rows.append(f"| {split} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
            print(split_rows[-1], file=sys.stderr, flush=True)
    head = "| case | " + " | ".join(SCALES) + " |\n|---" * 1 + "|---" * len(SCALES) + "|"
    body = [
        "# Per-feature units: pooled k-means under four scale estimates",
        "",
        "scikit-learn `KMeans(n_init=10, random_state=0)` on all rows pooled, each feature divided by its "
        "scale (module docstring of `benchmarks/units_tradeoff.py`). Audit cases: lowest ARI over data seeds "
        f"{', '.join(map(str, args.seeds))}; published splits: mean ARI over KMeans seeds "
        f"{', '.join(map(str, args.seeds))} against the true classes.",
        "",
        "## User-audit cases",
        "",
        head,
        *rows,
    ]
    if split_rows:
        body += ["", "## Published 8-client splits (rows pooled)", "", head.replace("| case |", "| split |"),
                 *split_rows]
    print("\n".join(body))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
