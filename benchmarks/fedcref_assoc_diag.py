"""How often does FedCRef's first association graph link different classes, and which variant of the test
would not?  (issue 14 diagnosis, clean clusters, Fashion-MNIST, the paper's client simulation)

The paper's client simulation (``--clients`` clients, K_i in [2, 5] whole classes, ``--per-class`` rows per
class, training split), dirtiness ``--dirtiness`` (0: every local cluster is one true class; else the dirty-uniform labels of spec §3.8). One autoencoder per cluster is
trained as FedCRef's Phase 1 does (paper architecture, ``--epochs`` epochs, batch 32, Adam 1e-3, early
stopping with patience 4), and cached on disk (``--cache``) so variants of the test can be compared on the
same models. The error table (every model on every row) is then scored with several association tests:

- ``paper``: spec §3.3 (per-direction min-max normalised ``|E_own - E_ext|``, alpha-th percentile <= theta,
  both directions), with the match policies ``first`` (reference code), ``best`` (fastfc default) and ``all``.
- ``ratio`` (``FedCRef(association="ratio")``, not in the paper): per direction, the median over the owner's
  rows of ``E_ext / E_own`` (how many times worse the received model reconstructs the owner's typical row than
  the owner's own model), thresholded at each ``--ratio-theta``; and two cruder relatives, ``q-ratio``
  (``Q_alpha(E_ext) / Q_alpha(E_own)``) and ``median-ratio`` (``median(E_ext) / median(E_own)``), with the
  ``best`` match policy.

With ``--holdout h`` (issue 14, the calibrated tests) every AE is trained a second time on its cluster minus a
random share ``h`` of held-out rows, and two more statistics are thresholded at ``--heldout-theta``:

- ``heldout``: per direction, the median over the owner's *held-out* rows of ``E_ext / E_own``. Neither model
  has seen those rows, so the AE's generalisation gap (own model on its training rows vs. unseen rows), which
  sets the scale of ``ratio`` and grows for small or briefly trained AEs, cancels out.
- ``gap``: the median ratio over the own model's training rows divided by that model's measured gap
  (median ``E_own`` on held-out rows / on training rows).

``--dataset digits`` runs the same diagnosis on scikit-learn's digits (use the tests' tiny AE: ``--hidden
32,16,32 --epochs 40 --lr 5e-3``).

For every test: edges, wrong edges (endpoints of different classes) and their share, the share of the
same-class pairs that are linked (recall; a cluster's class is its Hungarian-matched true class), the graph's components with >= 2 vertices and how many of them
mix classes, and which class pairs the wrong edges join.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import run_with_out  # noqa: E402
from _shared import FASHION_MNIST  # noqa: E402

FMNIST = ("T-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot")


def _heldout_mask(n, frac, rng):
    """Held-out rows of a cluster of ``n`` rows: ``round(frac * n)`` of them (at least 1 when frac > 0 and n >= 2),
    drawn uniformly; the rest are the training rows."""
    m = np.zeros(n, bool)
    if frac > 0 and n >= 2:
        m[rng.permutation(n)[:min(n - 1, max(1, int(round(frac * n))))]] = True
    return m


def _train_all(X, labels, idx, sets, args, holdout=0.0):
    """One AE per (client, cluster); with ``holdout`` > 0 each is trained on its cluster's rows minus a random
    ``holdout`` share, which is returned as per-vertex masks (True = held out)."""
    from fastfc import _ae
    from fastfc._parallel import limit_blas_threads

    hidden = tuple(int(v) for v in args.hidden.split(","))
    lay = _ae.layout(X.shape[1], hidden)
    cfg = (args.clients, args.per_class, args.epochs, args.seed, args.sim_seed, args.dirtiness)
    if args.dataset != "fmnist" or holdout or hidden != (100, 64, 32, 64, 100) or args.lr != 1e-3:
        cfg = cfg + (args.dataset, holdout, hidden, args.lr)  # the cache names of the first runs stay valid
    key = hashlib.sha256(repr(cfg).encode()).hexdigest()[:16]
    path = Path(args.cache) / f"fedcref_diag_{key}.npz"
    jobs = [(c, q) for c, s in enumerate(sets) for q in range(len(s))]
    mrng = np.random.default_rng([args.seed, 7])
    masks = [_heldout_mask(int((labels[c] == q).sum()), holdout, mrng) for c, q in jobs]
    if path.exists():
        return lay, np.load(path)["models"], jobs, True, masks
    seeds = np.random.default_rng(args.seed).integers(0, 2**63 - 1, size=len(jobs))

    def one(t):
        c, k = jobs[t]
        rng = np.random.default_rng(seeds[t])
        rows = X[idx[c]][labels[c] == k][~masks[t]]
        with limit_blas_threads(1):
            return _ae.train(_ae.glorot_init(lay, rng), lay, rows, args.epochs, rng, early_stopping=True,
                             lr=args.lr)[0]

    with ThreadPoolExecutor(args.n_jobs) as ex:
        models = np.stack(list(ex.map(one, range(len(jobs)))))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, models=models)
    return lay, models, jobs, False, masks


def _components(n, edges):
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    if not edges:
        return np.arange(n)
    r, s = zip(*edges)
    return connected_components(coo_matrix((np.ones(len(r)), (r, s)), shape=(n, n)), directed=False)[1]


def _graph(S1, S2, theta, jobs, policy):
    """Edges (a, b) between vertices (a < b, different clients) for directional scores S1[a, b] (a's data)."""
    n = len(jobs)
    client = np.array([c for c, _ in jobs])
    edges = []
    for a in range(n):
        for cj in np.unique(client[client > client[a]]):
            cand = [(max(S1[a, b], S2[a, b]), b) for b in np.flatnonzero(client == cj)
                    if S1[a, b] <= theta and S2[a, b] <= theta]
            if not cand:
                continue
            if policy == "all":
                edges.extend((a, b) for _, b in cand)
            elif policy == "first":
                edges.append((a, cand[0][1]))
            else:
                edges.append((a, min(cand)[1]))
    return edges


def _report(name, edges, jobs, same_pairs, names):
    cls = np.array([k for _, k in jobs])
    wrong = [(a, b) for a, b in edges if cls[a] != cls[b]]
    linked_same = sum(1 for a, b in edges if cls[a] == cls[b])
    comp = _components(len(jobs), edges)
    groups = [np.flatnonzero(comp == g) for g in np.unique(comp)]
    groups = [g for g in groups if g.size >= 2]
    mixed = sum(1 for g in groups if np.unique(cls[g]).size > 1)
    largest = max((g.size for g in groups), default=0)
    pairs = {}
    for a, b in wrong:
        p = tuple(sorted((names[cls[a]], names[cls[b]])))
        pairs[p] = pairs.get(p, 0) + 1
    top = ", ".join(f"{a}/{b} {n}" for (a, b), n in sorted(pairs.items(), key=lambda t: -t[1])[:4])
    rate = 100 * len(wrong) / len(edges) if edges else float("nan")
    recall = 100 * linked_same / max(same_pairs, 1)
    print(f"| {name} | {len(edges)} | {len(wrong)} | {rate:.1f} | {recall:.1f} | "
          f"{len(groups)} | {mixed} | {largest} | {top or '-'} |")
    return rate, recall


def _load(args):
    if args.dataset == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return (X / 16.0).astype(np.float32), y.astype(np.int64), tuple(str(v) for v in range(10))
    from fastfc.datasets import load_fashion_mnist

    X, y = load_fashion_mnist(args.data)
    return X, y, FMNIST


def _errors(models, lay, X, idx, labels, jobs, n_jobs):
    from fastfc import _ae
    from fastfc._parallel import limit_blas_threads

    rows = [X[idx[c]][labels[c] == q] for c, q in jobs]
    with limit_blas_threads(n_jobs):
        return [_ae.errors(models, lay, r) for r in rows]  # E[v][:, m]: model m on v's rows


def run(args) -> int:
    from fastfc._kernels._fedcref import association_score, ratio_score
    from fastfc.datasets import dirty_labels, simulate_fedcref_clients
    from fastfc.fedcref import _matched_classes

    X, y, names = _load(args)
    idx, sets = simulate_fedcref_clients(y, args.clients, samples_per_class=args.per_class,
                                         random_state=args.sim_seed)
    t0 = time.perf_counter()
    rng = np.random.default_rng(1000 + args.sim_seed)
    labels = [dirty_labels(y[i], args.dirtiness, rng, s) for i, s in zip(idx, sets)]
    lay, models, jobs, cached, _ = _train_all(X, labels, idx, sets, args)
    if args.holdout > 0:
        _, models_h, _, cached_h, masks = _train_all(X, labels, idx, sets, args, holdout=args.holdout)
    matched = [_matched_classes(y[i], lab, len(s)) for i, lab, s in zip(idx, labels, sets)]
    acc = np.mean([np.mean(np.asarray(s)[lab] == y[i]) for i, lab, s in zip(idx, labels, sets)])
    print(f"{args.dataset}, dirtiness {args.dirtiness} (initial ACC {acc:.3f}), {args.clients} clients "
          f"(simulation seed {args.sim_seed}), K_i = {[len(s) for s in sets]} (sum {len(jobs)}), {args.per_class} "
          f"rows per class, AE {args.hidden}, {args.epochs} epochs, learning rate {args.lr:g}; models "
          f"{'from the cache' if cached else 'trained'}"
          + (f", held-out models ({100 * args.holdout:g} % of each cluster held out) "
             f"{'from the cache' if cached_h else 'trained'}" if args.holdout > 0 else "")
          + f" ({time.perf_counter() - t0:.0f} s)\n")
    n = len(jobs)
    E = _errors(models, lay, X, idx, labels, jobs, args.n_jobs)
    if args.holdout > 0:
        EH = _errors(models_h, lay, X, idx, labels, jobs, args.n_jobs)
    client = np.array([c for c, _ in jobs])
    cls = np.array([matched[c][q] for c, q in jobs])
    jobs = [(c, k) for c, k in zip(client, cls)]
    same_pairs = sum(1 for a in range(n) for b in range(a + 1, n) if client[a] != client[b] and cls[a] == cls[b])
    # directional statistics: S[a, b] = test of model b on a's rows, against a's own model
    P = np.full((n, n), np.inf)
    R = np.full((n, n), np.inf)
    R50 = np.full((n, n), np.inf)
    M = np.full((n, n), np.inf)
    H = np.full((n, n), np.inf)
    G = np.full((n, n), np.inf)
    gaps = np.ones(n)
    for a in range(n):
        own = E[a][:, a]
        qo = np.percentile(own, args.alpha)
        q50 = np.median(own)
        if args.holdout > 0:
            v, t = masks[a], ~masks[a]
            own_h = EH[a][:, a]
            gaps[a] = np.median(own_h[v]) / np.median(own_h[t])
        for b in range(n):
            if client[a] == client[b]:
                continue
            P[a, b] = association_score(own, E[a][:, b], float(args.alpha))
            R[a, b] = np.percentile(E[a][:, b], args.alpha) / qo
            R50[a, b] = np.median(E[a][:, b]) / q50
            M[a, b] = ratio_score(own, E[a][:, b])
            if args.holdout > 0:
                H[a, b] = ratio_score(own_h[v], EH[a][:, b][v])
                G[a, b] = ratio_score(own_h[t], EH[a][:, b][t]) / gaps[a]
    same = (cls[:, None] == cls[None, :]) & (client[:, None] != client[None, :])
    diff = (cls[:, None] != cls[None, :]) & (client[:, None] != client[None, :])
    stats = {"paper": P, "ratio": M, "q-ratio": R, "median-ratio": R50}
    if args.holdout > 0:
        stats.update({"heldout": H, "gap": G})
        print(f"held-out models: generalisation gap median(E_own on held-out rows) / median(E_own on training "
              f"rows) per cluster: median {np.median(gaps):.3f}, 10th-90th pct {np.percentile(gaps, 10):.3f}-"
              f"{np.percentile(gaps, 90):.3f}\n")
    for name, S in stats.items():
        both = np.maximum(S, S.T)
        print(f"{name}: max of both directions, same-class pairs median {np.median(both[same]):.3f} "
              f"(90th pct {np.percentile(both[same], 90):.3f}); different-class pairs 10th pct "
              f"{np.percentile(both[diff], 10):.3f}, median {np.median(both[diff]):.3f}")
    print()
    print("Tests: `paper` = spec §3.3 score (alpha-th percentile of min-max normalised |E_own - E_ext|); "
          "`ratio` = median over the owner's rows of E_ext / E_own (FedCRef(association=\"ratio\")); "
          "`q-ratio` = Q_alpha(E_ext) / Q_alpha(E_own); `median-ratio` = median(E_ext) / median(E_own)"
          + ("; `heldout` = median over the owner's held-out rows of E_ext / E_own, the own model trained on the "
             "cluster's other rows (both models unseen on those rows); `gap` = the median ratio over the own "
             "model's training rows divided by its generalisation gap (median E_own on held-out rows / on "
             "training rows)" if args.holdout > 0 else "")
          + ". All per direction on the owner's cluster; both directions must pass.\n")
    print("| test | edges | wrong | wrong (%) | same-class pairs linked (%) | groups | mixed groups | largest group | "
          "most frequent wrong class pairs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for pol in ("first", "best", "all"):
        _report(f"paper, alpha {args.alpha:g}, theta {args.theta:g}, {pol}", _graph(P, P.T, args.theta, jobs, pol),
                jobs, same_pairs, names)
    for th in [float(v) for v in args.extra_thetas.split(",") if v]:
        _report(f"paper, alpha {args.alpha:g}, theta {th:g}, best", _graph(P, P.T, th, jobs, "best"), jobs,
                same_pairs, names)
    tests = [(name, args.ratio_theta) for name in args.ratio_tests.split(",") if name]
    if args.holdout > 0:
        tests += [("heldout", args.heldout_theta), ("gap", args.heldout_theta)]
    for name, ths in tests:
        for th in [float(v) for v in ths.split(",") if v]:
            S = stats[name]
            _report(f"{name}, theta {th:g}, best", _graph(S, S.T, th, jobs, "best"), jobs, same_pairs, names)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=FASHION_MNIST)
    ap.add_argument("--cache", default=os.environ.get("FASTFC_DIAG_CACHE", "/tmp/fastfc_fedcref_diag"))
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--per-class", type=int, default=500)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--alpha", type=float, default=75.0)
    ap.add_argument("--theta", type=float, default=0.15)
    ap.add_argument("--extra-thetas", default="0.1,0.2")
    ap.add_argument("--ratio-theta", default="1.2,1.3,1.4,1.5,1.7")
    ap.add_argument("--ratio-tests", default="ratio,q-ratio,median-ratio",
                    help="which ratio statistics to threshold at --ratio-theta (comma list)")
    ap.add_argument("--holdout", type=float, default=0.0,
                    help="> 0: also train every AE on its cluster minus this share of held-out rows and report the "
                         "held-out tests (`heldout`, `gap`) at --heldout-theta")
    ap.add_argument("--heldout-theta", default="1.05,1.1,1.15,1.2,1.3")
    ap.add_argument("--dataset", default="fmnist", choices=("fmnist", "digits"),
                    help="digits: scikit-learn's 8x8 digits scaled to [0, 1] (use the tests' tiny AE: --hidden "
                         "32,16,32 --epochs 40 --lr 5e-3)")
    ap.add_argument("--hidden", default="100,64,32,64,100")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--dirtiness", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sim-seed", type=int, default=0)
    ap.add_argument("--n-jobs", type=int, default=2)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
