"""FedCRef's ``ratio_threshold="auto"`` against the fixed 1.2, whole fits on small data (issue 14).

``"auto"`` tests every association graph against ``max(1.2, sqrt(s))``, ``s`` the smallest two-way median
error ratio between two clusters of one client (:func:`fastfc.fedcref.sibling_ratio_min`). The first-graph
study (``fedcref_assoc_auto.py``) measured the rule on cached AEs; this script runs whole fits, both
thresholds on the same clients, and reports what a user sees:

- ``blobs``: the user audit's base case -- three IID clients of three well-separated 4-D Gaussian blobs (30 sd
  apart, 100 rows each, min-max scaled), ``n_local_clusters=3``, data seeds 0-5;
- ``close pair``: the rule's risk -- clients whose own classes are far apart (40 sd) while two classes that
  never share a client are close (``gap`` sd apart: 3, 5, 8): clients {0, 1}, {2, 3}, {0, 1}, classes 0 and 2
  close, data seeds 0-2;
- ``digits``: scikit-learn's digits (features / 16), 80 rows per class and client (55 for ``iid``, whose
  classes three clients share), the estimator's default AE, class sets ``iid`` (three clients of 0-4), ``disjoint`` ({0,1}, {2,3}, {4,5}, {6,7}: no class shared),
  ``chain`` ({0,1,2}, {2,3,4}, {4,5,6}, {6,7,0}) and ``alike apart`` ({3,0}, {5,6}, {8,4}, {9,7}: 3/5/8/9 look
  alike and never share a client).

- ``README example``: the README's FedCRef example (digits, four clients holding 2-3 of the digits 0-2, 30 %
  dirty initial partitions, the tiny AE 32-16-32 trained 40 epochs at learning rate 5e-3), thresholds 1.2, 1.5
  (the example's) and ``"auto"``, with the local ACC before and after.

Per fit: the thresholds of the graphs (``association_thresholds_``), ARI of ``labels_`` against the true
classes, groups found / ideal (classes held by >= 2 clients), wrong associations (% of the last graph's edges
joining clusters matched to different classes, ``fedcref_scores``), isolated clusters at the end.

Usage::

    python3 benchmarks/fedcref_auto_threshold.py --out benchmarks/results/fedcref_auto_threshold.md
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import run_with_out  # noqa: E402

THRESHOLDS = (1.2, "auto")


def _minmax(parts):
    allx = np.vstack(parts)
    lo, hi = allx.min(0), allx.max(0)
    return [(x - lo) / np.where(hi > lo, hi - lo, 1.0) for x in parts]


def blob_case(seed):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), 100)
    centres = np.zeros((3, 4))
    centres[[0, 1, 2], [0, 1, 2]] = 30.0
    X = centres[y] + rng.normal(size=(300, 4))
    ids = np.arange(300) % 3
    parts = _minmax([X[ids == c] for c in range(3)])
    return parts, [y[ids == c] for c in range(3)], 3


def close_pair_case(gap, seed):
    rng = np.random.default_rng(seed)
    C = np.zeros((4, 4))
    C[1, 0], C[2, 1], C[3, 2] = 40.0, gap, 40.0
    parts, ys = [], []
    for cls in ((0, 1), (2, 3), (0, 1)):
        y = np.repeat(cls, 100)
        parts.append(C[y] + rng.normal(size=(200, 4)))
        ys.append(y)
    return _minmax(parts), ys, 2


DIGIT_SETS = {
    "iid": [(0, 1, 2, 3, 4)] * 3,
    "disjoint": [(0, 1), (2, 3), (4, 5), (6, 7)],
    "chain": [(0, 1, 2), (2, 3, 4), (4, 5, 6), (6, 7, 0)],
    "alike apart": [(3, 0), (5, 6), (8, 4), (9, 7)],
}


def digits_case(name, seed):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    rng = np.random.default_rng(seed)
    pools = {c: list(rng.permutation(np.flatnonzero(y == c))) for c in range(10)}
    parts, ys = [], []
    for cls in DIGIT_SETS[name]:
        per = 55 if name == "iid" else 80  # digits has 174-183 rows per class
        rows = np.concatenate([[pools[c].pop() for _ in range(per)] for c in cls])
        parts.append(X[rows])
        ys.append(y[rows])
    return parts, ys, [len(c) for c in DIGIT_SETS[name]]


def readme_example():
    """The README's FedCRef example: its clients, dirty initial partitions and AE settings."""
    from sklearn.datasets import load_digits

    from fastfc.datasets import dirty_labels

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    rng = np.random.default_rng(0)
    parts, ys, init = [], [], []
    for classes in [(0, 1), (0, 1, 2), (1, 2), (0, 2)]:
        rows = rng.permutation(np.concatenate([rng.choice(np.flatnonzero(y == c), 80, replace=False)
                                               for c in classes]))
        parts.append(X[rows])
        ys.append(y[rows])
        init.append(dirty_labels(y[rows], 0.3, rng))
    params = dict(init_labels=init, hidden_layer_sizes=(32, 16, 32), local_epochs=40, fl_rounds=3, fl_epochs=10,
                  fl_first_epochs=5, learning_rate=5e-3, max_iter=6)
    return parts, ys, params


def fit_row(parts, ys, k, threshold, seed, n_jobs, **params):
    from sklearn.metrics import adjusted_rand_score

    from fastfc.fedcref import FedCRef, fedcref_scores

    if k is not None:
        params["n_local_clusters"] = k
    est = FedCRef(ratio_threshold=threshold, random_state=seed, n_jobs=n_jobs, **params)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        est.fit_clients(parts)
    sc = fedcref_scores(est, ys)
    unlinked = any(type(w.message).__name__ == "UnlinkedClustersWarning" for w in rec)
    wrong = "n/a" if np.isnan(sc["wrong_association_rate"]) else f"{100 * sc['wrong_association_rate']:.1f}"
    ari = adjusted_rand_score(np.concatenate(ys), est.labels_)
    return (f"{', '.join(f'{t:.3g}' for t in est.association_thresholds_)} | {ari:.3f} | {sc['n_groups']} / "
            f"{sc['ideal_groups']} | {wrong} | {sc['n_isolated']} | {'yes' if unlinked else ''}"), ari, sc


def run(args) -> int:
    print("# FedCRef: ratio_threshold 'auto' against the fixed 1.2, whole fits\n")
    print(f"Cases of the module docstring; `n_jobs={args.n_jobs}`, estimator defaults otherwise (paper AE "
          "100-64-32-64-100, 20 local epochs, 15 FedAvg rounds). Per fit: thresholds of the association "
          "graphs, ARI of `labels_`, groups found / ideal, wrong associations (% of the last graph's edges), "
          "isolated clusters at the end, whether `UnlinkedClustersWarning` fired.\n")
    print("| case | seed | threshold | thresholds used | ARI | groups / ideal | wrong ass. (%) | isolated | "
          "unlinked warning |")
    print("|---|---|---|---|---|---|---|---|---|")
    cases = [("blobs", s, lambda s=s: blob_case(s)) for s in range(6)]
    cases += [(f"close pair, gap {g:g}", s, lambda g=g, s=s: close_pair_case(g, s)) for g in (3.0, 5.0, 8.0)
              for s in range(3)]
    cases += [(f"digits {n}", 0, lambda n=n: digits_case(n, 0)) for n in DIGIT_SETS]
    tally = {t: {"ari": [], "wrong": 0, "fits": 0} for t in THRESHOLDS}
    for name, seed, make in cases:
        parts, ys, k = make()
        for t in THRESHOLDS:
            row, ari, sc = fit_row(parts, ys, k, t, 0, args.n_jobs)
            print(f"| {name} | {seed} | {t} | {row} |", flush=True)
            tally[t]["ari"].append(ari)
            tally[t]["fits"] += 1
            tally[t]["wrong"] += int(sc["wrong_association_rate"] > 0)
    print("\n## The README example\n")
    print("| threshold | thresholds used | ARI | groups / ideal | wrong ass. (%) | isolated | unlinked warning | "
          "ACC init → end |")
    print("|---|---|---|---|---|---|---|---|")
    parts, ys, params = readme_example()
    for t in (1.2, 1.5, "auto"):
        row, _, sc = fit_row(parts, ys, None, t, 0, args.n_jobs, **params)
        print(f"| {t} | {row} | {sc['acc_init']:.3f} → {sc['acc_end']:.3f} |", flush=True)
    print("\n## Summary (the cases of the first table)\n")
    print("| threshold | fits | mean ARI | fits with ARI >= 0.99 | fits with a wrong association |")
    print("|---|---|---|---|---|")
    for t, v in tally.items():
        a = np.array(v["ari"])
        print(f"| {t} | {v['fits']} | {a.mean():.3f} | {int((a >= 0.99).sum())} | {v['wrong']} |")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-jobs", type=int, default=2)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
