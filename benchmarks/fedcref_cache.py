"""FedCRef's cross-evaluation cache: the same fit with and without it, and the work it saves.

Each configuration is fitted twice with the same seed, ``cache_errors=True`` and ``False``. The
script checks that the two fits are the same bits (local and global labels, |G|, history, edges,
group models) and reports, per phase (cross-evaluation = association, and refinement), the
model x row reconstruction errors computed and served by the cache (``FedCRef.error_evals_``)
and the wall time of the phase (``phase_seconds_``; noisy on a shared machine, the counts are
exact). Savings come from (a) the models of frozen clients, unchanged since the last
cross-evaluation, and (b) a client's own models in its refinement, just cross-evaluated.

Configurations:

- ``digits``: scikit-learn digits, 6 clients with 2-4 classes each, 80 rows per class,
  AE (32, 16, 32), one clean client (it freezes early), the others dirty-uniform d = 0.3; tau = 0.95
  and plateau_window = 5 so that the run goes on after the first clients freeze (the case the
  cache is for).
- ``fmnist``: Fashion-MNIST with the paper's simulation (``--clients``, ``--per-class``, K_i in
  [2, 5]), dirty-uniform d = ``--dirtiness``, the paper's AE (100, 64, 32, 64, 100), FedCRef's default association test,
  ``--epochs`` local epochs, ``--fl-rounds`` FedAvg rounds.

Usage::

    python3 benchmarks/fedcref_cache.py --out benchmarks/results/fedcref_cache.md
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


def _digits(seed: int):
    from sklearn.datasets import load_digits

    from fastfc.datasets import dirty_labels

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    rng = np.random.default_rng(seed)
    sets = ((0, 1, 2), (0, 1), (1, 2, 3), (2, 3), (0, 3, 4), (1, 4))
    Xc, yc, init = [], [], []
    for c, s in enumerate(sets):
        idx = rng.permutation(np.concatenate([rng.choice(np.flatnonzero(y == k), 80, replace=False) for k in s]))
        Xc.append(X[idx])
        yc.append(y[idx])
        init.append(np.unique(y[idx], return_inverse=True)[1] if c == 0 else dirty_labels(y[idx], 0.3, rng))
    params = dict(hidden_layer_sizes=(32, 16, 32), local_epochs=40, fl_rounds=3, fl_epochs=10, fl_first_epochs=5,
                  max_iter=6, learning_rate=5e-3, tau=0.95, plateau_window=5)
    return Xc, init, params


def _fmnist(seed: int, args):
    from fastfc.datasets import dirty_labels, load_fashion_mnist, simulate_fedcref_clients

    X, y = load_fashion_mnist(args.data)
    idx, sets = simulate_fedcref_clients(y, args.clients, samples_per_class=args.per_class, random_state=seed)
    rng = np.random.default_rng(1000 + seed)
    init = [dirty_labels(y[i], args.dirtiness, rng, s) for i, s in zip(idx, sets)]
    params = dict(local_epochs=args.epochs, fl_rounds=args.fl_rounds, max_iter=args.max_iter)
    return [X[i] for i in idx], init, params


def _same(a, b) -> bool:
    ok = all(np.array_equal(p, q) for p, q in zip(a.local_labels_, b.local_labels_))
    ok &= np.array_equal(a.labels_, b.labels_) and a.n_distributions_ == b.n_distributions_
    ok &= all(np.array_equal(a.history_[k], b.history_[k]) for k in a.history_)
    ok &= np.array_equal(a.edges_, b.edges_) and a.group_models_.tobytes() == b.group_models_.tobytes()
    return bool(ok)


def run(args) -> int:
    from fastfc import FedCRef

    print("# FedCRef cross-evaluation cache: same fit, less work\n")
    print("Errors = model x row reconstruction errors over the whole run, summed over clients; "
          "'cached' ones were copied from the client's cache instead of computed. Times are the "
          f"protocol phases' wall time (n_jobs = {args.n_jobs}, shared machine: noisy).\n")
    for name in args.configs.split(","):
        print("| config | cache | same bits as no cache | iterations | frozen (last it.) | cross-eval errors computed "
              "/ cached (M) | refine errors computed / cached (M) | association (s) | refinement (s) | total (s) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        Xc, init, params = _digits(args.seed) if name == "digits" else _fmnist(args.seed, args)
        fits = {}
        for cache in (False, True):
            t0 = time.perf_counter()
            fits[cache] = FedCRef(init_labels=init, random_state=args.seed, n_jobs=args.n_jobs, cache_errors=cache,
                                  **params).fit_clients(Xc)
            fits[cache]._total = time.perf_counter() - t0
        same = _same(fits[True], fits[False])
        for cache in (False, True):
            e = fits[cache]
            ev, ph = e.error_evals_, e.phase_seconds_
            label = name if name == "digits" else f"fmnist d={args.dirtiness}"
            print(f"| {label} ({len(Xc)} clients, {sum(len(x) for x in Xc)} rows) | {'on' if cache else 'off'} | "
                  f"{'yes' if same else 'NO'} | {e.n_iter_} | {e.history_['n_frozen'][-1]} | "
                  f"{ev['cross_eval_computed'] / 1e6:.3f} / {ev['cross_eval_reused'] / 1e6:.3f} | "
                  f"{ev['refine_computed'] / 1e6:.3f} / {ev['refine_reused'] / 1e6:.3f} | {ph['association']:.2f} | "
                  f"{ph['refinement']:.2f} | {e._total:.1f} |", flush=True)
        on, off = fits[True].error_evals_, fits[False].error_evals_
        for phase in ("cross_eval", "refine"):
            tot = off[f"{phase}_computed"]
            print(f"\n{name}: {phase} errors computed with the cache: {on[f'{phase}_computed']} of {tot} "
                  f"({100 * (1 - on[f'{phase}_computed'] / max(tot, 1)):.1f} % saved)", flush=True)
        print()
        if not same:
            print(f"**{name}: the fits with and without the cache differ**")
            return 1
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="digits,fmnist")
    ap.add_argument("--data", default=FASHION_MNIST)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--per-class", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--fl-rounds", type=int, default=3)
    ap.add_argument("--max-iter", type=int, default=8)
    ap.add_argument("--dirtiness", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-jobs", type=int, default=1)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
