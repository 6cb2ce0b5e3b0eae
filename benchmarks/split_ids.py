#!/usr/bin/env python
"""Time ``split_by_client_ids`` (fit(X, client_ids=...)'s grouping) against the sort-based one it replaced.

For each kind of id (dense integers at random, sparse integers, contiguous blocks, short strings,
long strings) at ``--n`` rows over ``--clients`` clients: the median of ``--repeats`` calls of
``fastfc._validation.split_by_client_ids`` and of the previous implementation
(``np.unique(ids, return_inverse=True)``, a stable argsort, ``searchsorted``), and whether both
give the same clients and rows. Neither copies X; the old ``fit`` then also copied every row
(``X[rows]`` per client), the new one hands out views or gathers one client at a time.

Usage::

    python benchmarks/split_ids.py --out benchmarks/results/split_ids.md
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks._provenance import run_with_out  # noqa: E402


def old_split(n_samples: int, client_ids) -> tuple[list[np.ndarray], np.ndarray]:
    """The sort-based grouping fastfc used before issue 15.

    Parameters
    ----------
    n_samples : int
    client_ids : array-like of shape (n_samples,)

    Returns
    -------
    rows : list of ndarray
    unique_ids : ndarray
    """
    ids = np.asarray(client_ids)
    uniq, inverse = np.unique(ids, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
    return [order[bounds[i]:bounds[i + 1]].astype(np.intp) for i in range(len(uniq))], uniq


def median_seconds(fn, repeats: int) -> tuple[float, object]:
    """Median wall time of ``repeats`` calls of ``fn`` and the last result."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def run(args) -> int:
    """Print the table (see the module docstring).

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    int
        Exit status 0.
    """
    from fastfc._validation import split_by_client_ids

    n, c = int(float(args.n)), args.clients
    rng = np.random.default_rng(0)
    codes = rng.integers(0, c, n)
    cases = {
        "integers 0..c-1, random order": codes,
        "sparse integers (id * 10^12), random order": codes * 10 ** 12,
        "integers in contiguous blocks": np.sort(codes),
        "short strings (<U2: hashed as integers), random order": codes.astype("U2"),
        "long strings ('client-<i>': np.unique's sort), random order": np.char.add("client-", codes.astype("U2")),
    }
    print(f"`split_by_client_ids` at {n:,} rows over {c} clients; seconds = median of {args.repeats} calls.\n")
    print("| ids | new seconds | old (sort-based) seconds | speed-up | same clients and rows |")
    print("|---|---|---|---|---|")
    for name, ids in cases.items():
        t_new, (rows, uniq) = median_seconds(lambda: split_by_client_ids(n, ids), args.repeats)
        t_old, (rows_old, uniq_old) = median_seconds(lambda: old_split(n, ids), args.repeats)
        same = np.array_equal(uniq, uniq_old) and all(
            np.array_equal(np.arange(n)[r] if isinstance(r, slice) else r, o) for r, o in zip(rows, rows_old))
        print(f"| {name} | {t_new:.3f} | {t_old:.3f} | {t_old / t_new:.1f}× | {'yes' if same else 'NO'} |", flush=True)
    return 0


def main(argv=None) -> int:
    """Command line (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="1e7")
    ap.add_argument("--clients", type=int, default=100, help="at most 100 (the short-string case is 2 characters)")
    ap.add_argument("--repeats", type=int, default=3)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    sys.exit(main())
