"""Why does FedCRef lower the ACC of a perfect (dirtiness 0) partition on Fashion-MNIST when no group forms?

With |G| = 0, ClusterRefine's candidates are a client's own K_i local AEs only, and Algorithm 2 then
puts every row on its lowest-error own model (spec §3.5). So the ACC after one refinement of a clean
partition is the accuracy of the "lowest reconstruction error" classifier made of the client's
per-class AEs, on the rows they were trained on. This script simulates the clients as
``fedcref_repro.py`` does (same seed, dirtiness 0), trains each client's local AEs at two budgets
(rows per class, epochs) exactly as FedCRef's Phase 1 does (paper architecture, batch 32, Adam 1e-3,
early stopping), and reports per client: that ACC, the mean final training loss, and the largest
difference between fastfc's float32 error table and an independent float64 NumPy forward pass
(checks the error kernel, not the training).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import run_with_out  # noqa: E402
from _shared import FASHION_MNIST  # noqa: E402


def _errors64(w, lay, X):
    Ws, bs = lay.views(w)
    h = X.astype(np.float64)
    for layer, (W, b) in enumerate(zip(Ws, bs)):
        a = h @ W.astype(np.float64) + b.astype(np.float64)
        h = np.maximum(a, 0.0) if layer < len(Ws) - 1 else 1.0 / (1.0 + np.exp(-a))
    return ((h - X) ** 2).mean(axis=1)


def run(args) -> int:
    from fastfc import _ae
    from fastfc._kernels._fedcref import cluster_refine
    from fastfc._parallel import limit_blas_threads
    from fastfc.datasets import load_fashion_mnist, simulate_fedcref_clients
    from fastfc.metrics import clustering_accuracy

    X, y = load_fashion_mnist(args.data)
    lay = _ae.layout(784, (100, 64, 32, 64, 100))
    budgets = [tuple(int(v) for v in b.split("x")) for b in args.budgets.split(",")]
    print("# FedCRef refinement of a clean partition with the client's own AEs only (|G| = 0)\n")
    print(f"{args.clients} simulated clients (seed {args.seed}); budget = rows per class x local epochs. "
          "ACC = Hungarian ACC of the lowest-error-own-AE partition against the true classes "
          "(1.0 would mean the refinement keeps the clean partition).\n")
    print("| budget | client classes | ACC after refinement | mean final train loss | max \\|E32 - E64\\| | "
          "train s |")
    print("|---|---|---|---|---|---|")
    means = {}
    for per, ep in budgets:
        idx, sets = simulate_fedcref_clients(y, args.clients, samples_per_class=per, random_state=args.seed)
        accs = []
        for i, (rows, s) in enumerate(zip(idx, sets)):
            Xi, yi = X[rows], y[rows]
            lab = np.searchsorted(s, yi)
            rng = np.random.default_rng([args.seed, i])
            t0 = time.perf_counter()
            models, losses = [], []
            with limit_blas_threads(1):
                for q in range(len(s)):
                    w, _, hist = _ae.train(_ae.glorot_init(lay, rng), lay, Xi[lab == q], ep, rng, early_stopping=True)
                    models.append(w)
                    losses.append(hist[-1])
                M = np.stack(models)
                E = _ae.errors(M, lay, Xi)
            secs = time.perf_counter() - t0
            E64 = np.stack([_errors64(w, lay, Xi) for w in M], axis=1)
            new = np.empty(len(Xi), np.int64)
            sel = np.empty(len(s), np.int64)
            cluster_refine(E, len(s), new, sel)
            acc = clustering_accuracy(yi, new)
            accs.append(acc)
            print(f"| {per} x {ep} | {', '.join(str(int(c)) for c in s)} | {acc:.3f} | {np.mean(losses):.4f} | "
                  f"{np.abs(E - E64).max():.1e} | {secs:.1f} |", flush=True)
        means[(per, ep)] = float(np.mean(accs))
    print("\n| budget | mean ACC over clients |\n|---|---|")
    for (per, ep), m in means.items():
        print(f"| {per} x {ep} | {m:.3f} |")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=FASHION_MNIST)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--budgets", default="200x10,500x30")
    ap.add_argument("--seed", type=int, default=0)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
