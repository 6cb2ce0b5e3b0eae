"""Does FedCRef's association test separate classes on clean Fashion-MNIST clusters at a given training budget?

Two simulated clients each hold clean clusters of classes 0, 1 and 7 (``--rows`` rows each); one AE of the
paper's architecture is trained per cluster for ``--epochs`` epochs (batch 32, Adam 1e-3, early stopping);
the table gives Score(own model on client 0's cluster c, client 1's model p on the same rows) (spec §3.3,
alpha = 75). Same-class pairs should fall below theta = 0.15 and different-class pairs above it.
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


def run(args) -> int:
    from fastfc import _ae
    from fastfc._kernels._fedcref import association_score
    from fastfc._parallel import limit_blas_threads
    from fastfc.datasets import load_fashion_mnist

    X, y = load_fashion_mnist(args.data)
    rng = np.random.default_rng(args.seed)
    lay = _ae.layout(784, (100, 64, 32, 64, 100))
    classes = (0, 1, 7)
    data, models = {}, {}
    t0 = time.perf_counter()
    with limit_blas_threads(1):
        for cl in range(2):
            for c in classes:
                idx = rng.choice(np.flatnonzero(y == c), args.rows, replace=False)
                data[(cl, c)] = X[idx]
                models[(cl, c)], _, _ = _ae.train(_ae.glorot_init(lay, rng), lay, X[idx], args.epochs, rng,
                                                  early_stopping=True)
        print(f"{args.epochs} epochs, {args.rows} rows per cluster; training took {time.perf_counter() - t0:.0f} s\n")
        print("| client 0 cluster \\ client 1 model | " + " | ".join(f"class {p}" for p in classes) + " |")
        print("|---|" + "---|" * len(classes))
        for c in classes:
            Eo = _ae.errors(models[(0, c)][None], lay, data[(0, c)])[:, 0]
            row = [association_score(Eo, _ae.errors(models[(1, p)][None], lay, data[(0, c)])[:, 0], 75.0)
                   for p in classes]
            print(f"| class {c} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", default=FASHION_MNIST)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
