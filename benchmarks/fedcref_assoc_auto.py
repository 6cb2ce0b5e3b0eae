"""Can FedCRef's ratio threshold be derived from label-free statistics instead of fixed?  (issue 14)

``FedCRef(association="ratio")`` links two clusters when, in both directions, the median over the owner's
rows of ``E_ext / E_own`` is ``<= ratio_threshold`` (1.2 by default). The value that links most same-class
pairs without a wrong edge depends on the AE and the data: 1.2 on Fashion-MNIST with the paper's AE, 1.5
for the tests' tiny AE on digits. This script measures, on the first association graph of the calibration
cases of ``fedcref_assoc_diag.py`` (same simulation, same cached AEs: ``--cache``), statistics a FedCRef
run can measure without labels, and the threshold window each case allows:

Label-free (measurable by the clients / server from the scores they already compute):

- ``sib min`` / ``sib p10``: the smallest / 10th percentile over every client's pairs of its *own* clusters
  (``max`` of both directions of the median ratio of sibling cluster q' 's model on cluster q's rows). A
  client's clusters are meant to be different distributions, so these are known-different pairs.
- ``best foreign``: the median over clusters of the smallest ratio against another client's model (the
  typical same-class level when classes are shared).
- ``own spread``: the median over clusters of ``Q75(E_own) / median(E_own)`` on the cluster's rows.

With labels (for the window only): ``safe max`` = the largest threshold (0.01 grid) at which the graph
(``best`` match policy, both directions) has no wrong edge; ``ref`` = ``--ref-threshold``, the fixed
threshold the case is compared with (1.2 on Fashion-MNIST, the tests' 1.5 on digits). A rule that keeps 0
wrong edges and links at least as many same-class pairs as ``ref`` must give a threshold in about
[ref, safe max].

Candidate rules (the threshold each gives, its wrong edges and the share of same-class pairs linked):

- ``sqrt(sib min)``: the geometric midpoint between 1 (same model) and the closest known-different pair.
- ``max(1.2, sqrt(sib min))``: the same, never below the default.
- ``sqrt(sib p10)``.
- ``client sqrt(sib min)``: per cluster q (client-side, no server statistic), ``sqrt`` of the smallest
  ratio of q's siblings on q; a pair passes when each direction is below its owner's threshold.

Usage::

    python3 benchmarks/fedcref_assoc_auto.py --dataset digits --clients 10 --per-class 80 --hidden 32,16,32 \\
        --epochs 40 --lr 5e-3 --ref-threshold 1.5 --cache /tmp/i14assoc2_cache --out FILE
    python3 benchmarks/fedcref_assoc_auto.py --clients 25 --ref-threshold 1.2 --out FILE
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fedcref_assoc_diag as diag  # noqa: E402
from _provenance import run_with_out  # noqa: E402
from _shared import FASHION_MNIST  # noqa: E402


def _case(args, d, s):
    """(M, client, cls, spread): M[a, b] = median ratio of model b on a's rows (inf within a vertex)."""
    from fastfc._kernels._fedcref import ratio_score
    from fastfc.datasets import dirty_labels, simulate_fedcref_clients
    from fastfc.fedcref import _matched_classes

    a = copy.copy(args)
    a.dirtiness, a.seed, a.sim_seed = d, s, s
    X, y, _ = diag._load(a)
    idx, sets = simulate_fedcref_clients(y, a.clients, samples_per_class=a.per_class, random_state=s)
    rng = np.random.default_rng(1000 + s)
    labels = [dirty_labels(y[i], d, rng, ss) for i, ss in zip(idx, sets)]
    lay, models, jobs, cached, _ = diag._train_all(X, labels, idx, sets, a)
    matched = [_matched_classes(y[i], lab, len(ss)) for i, lab, ss in zip(idx, labels, sets)]
    client = np.array([c for c, _ in jobs])
    cls = np.array([matched[c][q] for c, q in jobs])
    key = hashlib.sha256(models.tobytes()).hexdigest()[:16]
    path = Path(args.cache) / f"fedcref_auto_M_{key}.npz"
    if path.exists():
        z = np.load(path)
        return z["M"], client, cls, z["spread"], cached, True
    E = diag._errors(models, lay, X, idx, labels, jobs, args.n_jobs)
    n = len(jobs)
    M = np.full((n, n), np.inf)
    spread = np.empty(n)
    for i in range(n):
        own = E[i][:, i]
        spread[i] = np.percentile(own, 75) / np.median(own)
        for j in range(n):
            if i != j:
                M[i, j] = ratio_score(own, E[i][:, j])
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, M=M, spread=spread)
    return M, client, cls, spread, cached, False


def _edges(M, client, cls, th):
    """Graph with per-vertex thresholds th (scalar or (n,)): a-b passes when M[a, b] <= th[a], M[b, a] <= th[b]."""
    n = len(cls)
    th = np.broadcast_to(np.asarray(th, float), (n,))
    S = M / th[:, None]  # passes iff S <= 1 in both directions
    return diag._graph(S, S.T, 1.0, list(zip(client, cls)), "best")


def _score(M, client, cls, th, same_pairs):
    e = _edges(M, client, cls, th)
    wrong = sum(1 for a, b in e if cls[a] != cls[b])
    return wrong, 100 * (len(e) - wrong) / max(same_pairs, 1)


def run(args) -> int:
    print(f"# Label-free ratio thresholds on the first association graph: {args.dataset}\n")
    print(f"{args.clients} clients, {args.per_class} rows per class, AE {args.hidden}, {args.epochs} epochs, learning "
          f"rate {args.lr:g}; AEs of fedcref_assoc_diag.py (cache {args.cache}). Reference threshold "
          f"{args.ref_threshold:g}. Cells of the rules: threshold → wrong edges / same-class pairs linked (%).\n")
    print("| dirtiness | seed | sib min | sib p10 | best foreign | own spread | safe max | ref: wrong / linked % | "
          "1.2: wrong / linked % | sqrt(sib min) | max(1.2, sqrt(sib min)) | sqrt(sib p10) | client sqrt(sib min) | "
          "time (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for d in [float(v) for v in args.dirtiness.split(",")]:
        for s in [int(v) for v in args.seeds.split(",")]:
            t0 = time.perf_counter()
            M, client, cls, spread, _, _ = _case(args, d, s)
            n = len(cls)
            B = np.maximum(M, M.T)
            sib = (client[:, None] == client[None, :]) & ~np.eye(n, dtype=bool)
            cross = client[:, None] != client[None, :]
            same_pairs = int(np.triu(cross & (cls[:, None] == cls[None, :]), 1).sum())
            sib_min, sib_p10 = float(B[sib].min()), float(np.percentile(B[sib], 10))
            best = float(np.median(np.where(cross, B, np.inf).min(1)))
            safe = 1.0
            for t in np.arange(1.0, 4.0001, 0.01):
                if _score(M, client, cls, t, same_pairs)[0]:
                    break
                safe = t
            # per-vertex (client-side): sqrt of the smallest ratio of a sibling model on the vertex's rows
            per = np.sqrt(np.array([M[a, sib[a]].min() if sib[a].any() else np.inf for a in range(n)]))

            def cell(th, show=True):
                w, r = _score(M, client, cls, th, same_pairs)
                return (f"{th:.3f} → " if show else "") + f"{w} / {r:.1f}"

            print(f"| {d:g} | {s} | {sib_min:.3f} | {sib_p10:.3f} | {best:.3f} | {np.median(spread):.3f} | "
                  f"{safe:.2f} | {cell(args.ref_threshold, False)} | {cell(1.2, False)} | "
                  f"{cell(np.sqrt(sib_min))} | {cell(max(1.2, np.sqrt(sib_min)))} | {cell(np.sqrt(sib_p10))} | "
                  f"{np.median(per):.3f} (median) → {cell(per, False)} | {time.perf_counter() - t0:.0f} |",
                  flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=FASHION_MNIST)
    ap.add_argument("--cache", default=os.environ.get("FASTFC_DIAG_CACHE", "/tmp/fastfc_fedcref_diag"))
    ap.add_argument("--dataset", default="fmnist", choices=("fmnist", "digits"))
    ap.add_argument("--clients", type=int, default=25)
    ap.add_argument("--per-class", type=int, default=500)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--hidden", default="100,64,32,64,100")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--dirtiness", default="0,0.3")
    ap.add_argument("--seeds", default="0,1,2", help="simulation seeds (= AE seeds, as in the calibration files)")
    ap.add_argument("--ref-threshold", type=float, default=1.2)
    ap.add_argument("--n-jobs", type=int, default=1)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
