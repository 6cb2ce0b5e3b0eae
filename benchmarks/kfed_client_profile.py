#!/usr/bin/env python
"""Where a default k-FED fit of many small clients spends its CPU time (issue 15: 10^6 rows over 1000 clients).

One process, ``--fits`` whole default fits (``KFed(n_clusters=10, random_state=0, n_jobs=1).fit_clients``,
JIT warm, after a warm-up fit) on ``scaling.py --what ratio``'s data: a 10-cluster Gaussian mixture
(``make_gaussian_mixture(n, d, 10, random_state=0)``) split at random into ``--clients`` equal clients.
Process CPU time of each part, taken by wrappers around the functions that do it (module or class
attributes looked up at call time; a part whose function a checkout does not have reads 0):

* ``client``: each client's whole phase 1 (``_run_summarize``: stream, summary, state, addressing), of which
  ``moments`` (local feature moments, ``_units.local_scaler``), ``proj`` (top eigenvectors), ``starts``
  (every local start's seeding and proximity step: ``_start_init`` one start a call, or ``_start_inits``
  all starts of a client in one call), ``lloyd`` (the local Lloyd runs, ``lloyd_best_of``) and
  ``summary`` (building the ``KFedSummary`` message);
* compiled kernels inside them: ``k:seed`` (D^2 seeding steps), ``k:prox`` (proximity sums),
  ``k:starts`` (the batched starts kernel), ``k:lloyd`` (scikit-learn's Lloyd kernel, local runs only);
* ``server`` (``_run_aggregate``), ``assign`` (``_run_assign``), ``wire`` (``Message.wire_size``: the bytes
  the runner accounts for every message) and ``rest`` (total minus client, server, assign and wire:
  validation, thread set-up, the runner's lists, fitted attributes).

``py`` = client minus the compiled kernels: the Python work per client (validation, NumPy calls on
small arrays, messages, random draws). Each wrapper adds about a microsecond per call (in its part).
Milliseconds per fit (mean over the fits) and microseconds per client.

Usage::

    python benchmarks/kfed_client_profile.py --n 1e6 --d 10 --clients 1000 --out benchmarks/results/kfed_client_profile.md
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

import numpy as np

from _provenance import run_with_out

CLIENT_PARTS = ["moments", "proj", "starts", "lloyd", "summary"]
KERNELS = ["k:seed", "k:prox", "k:starts", "k:lloyd"]
TOP = ["client", "server", "assign", "wire"]


def _wrap(owner, name: str, part: str, acc: Counter, *, prop: bool = False) -> None:
    """Replace ``owner.name`` by a wrapper adding each call's process CPU time to ``acc[part]`` (absent: nothing)."""
    f = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
    if f is None:
        return
    fn = f.fget if prop else f

    def timed(*a, **kw):
        t = time.process_time()
        try:
            return fn(*a, **kw)
        finally:
            acc[part] += time.process_time() - t

    setattr(owner, name, property(timed) if prop else timed)


def _instrument(acc: Counter) -> None:
    import fastfc._units as units
    import fastfc.kfed as kf
    from fastfc.base import BaseFederatedClusterer
    from fastfc.protocol import Message

    _wrap(BaseFederatedClusterer, "_run_summarize", "client", acc)
    _wrap(BaseFederatedClusterer, "_run_aggregate", "server", acc)
    _wrap(BaseFederatedClusterer, "_run_assign", "assign", acc)
    _wrap(Message, "wire_size", "wire", acc, prop=True)
    _wrap(units, "local_scaler", "moments", acc)
    _wrap(kf, "_top_eigenvectors", "proj", acc)
    _wrap(kf, "_start_init", "starts", acc)
    _wrap(kf, "_start_inits", "starts", acc)
    _wrap(kf, "lloyd_best_of", "lloyd", acc)
    _wrap(kf, "KFedSummary", "summary", acc)
    kernels = kf._kfed_kernels()
    _wrap(kernels, "d2_seed_steps", "k:seed", acc)
    _wrap(kernels, "proximity_sums", "k:prox", acc)
    _wrap(kf, "_starts_kernel", "k:starts", acc)
    # the local Lloyd runs: the names lloyd_best_of calls (the server's runs are taken out below)
    _wrap(kf, "single_lloyd", "k:lloyd", acc)
    server = kf.server_kmeans

    def server_kmeans(*a, **kw):
        before = acc["k:lloyd"]
        try:
            return server(*a, **kw)
        finally:
            acc["k:lloyd"] = before

    kf.server_kmeans = server_kmeans


def run(args) -> int:
    """Time the fits as ``args`` asks and print the table; returns 0."""
    import fastfc
    from fastfc.datasets import make_gaussian_mixture

    n, d, c = int(float(args.n)), args.d, args.clients
    X, _ = make_gaussian_mixture(n, d, 10, random_state=0)
    parts = np.array_split(np.random.default_rng(0).permutation(n), c)
    X_clients = [X[p] for p in parts]
    del X, parts

    def fit():
        return fastfc.KFed(n_clusters=10, random_state=0, n_jobs=1).fit_clients(X_clients)

    fit()  # warm (JIT, caches)
    t0 = time.process_time()
    for _ in range(args.fits):
        fit()
    plain = (time.process_time() - t0) / args.fits
    acc: Counter = Counter()
    _instrument(acc)
    fit()
    acc.clear()
    t0 = time.process_time()
    for _ in range(args.fits):
        fit()
    total = (time.process_time() - t0) / args.fits
    ms = {p: acc[p] / args.fits * 1e3 for p in TOP + CLIENT_PARTS + KERNELS}
    ms["rest"] = total * 1e3 - sum(ms[p] for p in TOP)
    ms["py"] = ms["client"] - sum(ms[p] for p in KERNELS)
    print(f"KFed default (n_clusters=10, n_jobs=1), {n:,} rows x {d} features over {c} clients "
          f"({n // c:,} rows each), {args.fits} fits after a warm-up; process CPU per fit: "
          f"{plain * 1e3:.0f} ms without the wrappers, {total * 1e3:.0f} ms with them.\n")
    print("| part | ms per fit | us per client | share |")
    print("|---|---|---|---|")
    for p in TOP + ["rest"] + CLIENT_PARTS + KERNELS + ["py"]:
        name = p if p in TOP + ["rest"] else f"&nbsp;&nbsp;{p}"
        print(f"| {name} | {ms[p]:.1f} | {ms[p] * 1e3 / c:.1f} | {ms[p] / (total * 1e3):.0%} |")
    return 0


def main(argv=None) -> int:
    """Command line (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="1e6")
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--fits", type=int, default=3)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    sys.exit(main())
