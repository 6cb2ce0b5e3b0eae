"""Which clusters does FedCRef's association test link when the local partitions are dirty?

Two simulated clients hold whole Fashion-MNIST classes (``--classes0`` and ``--classes1``, ``--rows`` rows
each), start from dirty-uniform labels (``--dirtiness``, spec §3.8) and train one AE per local cluster as
FedCRef's Phase 1 does (paper architecture, ``--epochs`` epochs, batch 32, Adam 1e-3, early stopping). Each
cell is ``s1 / s2``: Score(client 0's own model, client 1's model p on client 0's cluster q) and the reverse
direction on client 1's cluster p (spec §3.3, alpha = 75); ``*`` marks pairs that pass both directions at
``--theta``. Rows and columns are named by the cluster's true majority class (the dirty clusters are
numbered after the sorted true classes).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import run_with_out  # noqa: E402
from _shared import FASHION_MNIST  # noqa: E402


def run(args) -> int:
    from fastfc import _ae
    from fastfc._kernels._fedcref import association_score
    from fastfc._parallel import limit_blas_threads
    from fastfc.datasets import dirty_labels, load_fashion_mnist

    X, y = load_fashion_mnist(args.data)
    sets = [tuple(int(c) for c in args.classes0.split(",")), tuple(int(c) for c in args.classes1.split(","))]
    rng = np.random.default_rng(args.seed)
    lay = _ae.layout(784, (100, 64, 32, 64, 100))
    clients = []
    for s in sets:
        idx = rng.permutation(np.concatenate([rng.choice(np.flatnonzero(y == c), args.rows, replace=False)
                                              for c in s]))
        lab = dirty_labels(y[idx], args.dirtiness, rng)
        with limit_blas_threads(1):
            M = np.stack([_ae.train(_ae.glorot_init(lay, rng), lay, X[idx][lab == q], args.epochs, rng,
                                    early_stopping=True)[0] for q in range(len(s))])
        clients.append((X[idx], lab, M, s))
    (X0, l0, M0, s0), (X1, l1, M1, s1) = clients
    with limit_blas_threads(1):
        E0 = _ae.errors(np.vstack([M0, M1]), lay, X0)
        E1 = _ae.errors(np.vstack([M1, M0]), lay, X1)
    print(f"dirtiness {args.dirtiness}, {args.rows} rows per class, {args.epochs} epochs, theta {args.theta}\n")
    print("| client 0 cluster \\ client 1 cluster | " + " | ".join(f"class {c}" for c in s1) + " |")
    print("|---|" + "---|" * len(s1))
    n_same = n_diff = pass_same = pass_diff = 0
    for q in range(len(s0)):
        cells = []
        for p in range(len(s1)):
            a = association_score(E0[l0 == q, q], E0[l0 == q, len(s0) + p], 75.0)
            b = association_score(E1[l1 == p, p], E1[l1 == p, len(s1) + q], 75.0)
            ok = max(a, b) <= args.theta
            cells.append(f"{a:.3f} / {b:.3f}" + (" *" if ok else ""))
            if s0[q] == s1[p]:
                n_same, pass_same = n_same + 1, pass_same + ok
            else:
                n_diff, pass_diff = n_diff + 1, pass_diff + ok
        print(f"| class {s0[q]} | " + " | ".join(cells) + " |")
    print(f"\nPassing both directions: {pass_same} of {n_same} same-class pairs, {pass_diff} of {n_diff} "
          "different-class pairs.")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=FASHION_MNIST)
    ap.add_argument("--classes0", default="0,2,3,6,8")
    ap.add_argument("--classes1", default="2,4,6")
    ap.add_argument("--dirtiness", type=float, default=0.3)
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--theta", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=1)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
