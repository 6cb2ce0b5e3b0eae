#!/usr/bin/env python
"""Cold start: the first whole fit of every method in a new process with an empty Numba cache (issue 15).

For every configuration, a fresh temporary directory becomes ``NUMBA_CACHE_DIR`` and the
same small fit runs in two new processes one after the other:

- ``cold``: the first process, nothing cached: every Numba kernel the fit reaches is compiled
  (what a fresh install pays on its first fit);
- ``warm``: a second process with the cache the first one wrote.

With ``NUMBA_CACHE_DIR`` set, Numba's first cache locator (the user-provided directory) takes
every ``cache=True`` function, so the ``__pycache__`` next to this checkout's sources (warm
from earlier runs) is never read; the ``compiled`` column confirms it (a run that hit the
in-tree cache would compile nothing).

Columns: ``import s`` is ``import fastfc`` (plus Numba) in that process; ``fit s`` the fit
itself; ``process s`` the wall time of the whole child process as the parent saw it;
``compiled`` the number of kernel specialisations the process compiled (Numba cache misses
summed over every dispatcher of fastfc); ``loaded`` the number loaded from the cache.
``--warmup`` first runs ``fastfc warmup`` into the empty cache (the install / node-start step)
and then measures the first fit.

Example::

    python3 benchmarks/cold_start.py --out benchmarks/results/cold_start.md
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

#: configuration -> (estimator name, keyword arguments); every fit runs on the same small data
CONFIGS: dict[str, tuple[str, dict]] = {
    "KFed": ("KFed", dict(n_clusters=3)),
    "KFed refine_rounds=2": ("KFed", dict(n_clusters=3, refine_rounds=2)),
    "FeCA": ("FeCA", dict(n_clusters=3)),
    "FedHIRE": ("FedHIRE", dict(n_clusters=3)),
    "GOLD": ("GOLD", dict(n_clusters=3)),
    "FedKStarHC": ("FedKStarHC", dict(n_clusters=3)),
    "FedKMeans": ("FedKMeans", dict(n_clusters=3)),
    "FedCRef (tiny)": ("FedCRef", dict(n_local_clusters=3, hidden_layer_sizes=(16, 8, 16), local_epochs=5,
                                       fl_rounds=2, fl_epochs=3, fl_first_epochs=2, max_iter=2)),
}


def _data(dtype: str, unit: bool = False):
    """Three clients of 200 rows, 5 features, three Gaussian clusters (the same every run).

    ``unit`` rescales every feature to [0, 1] over the pooled rows (FedCRef's autoencoders
    have a sigmoid output).
    """
    import numpy as np

    rng = np.random.default_rng(0)
    centres = rng.normal(scale=6.0, size=(3, 5))
    Xc = []
    for _ in range(3):
        y = rng.integers(0, 3, size=200)
        Xc.append(centres[y] + rng.normal(size=(200, 5)))
    if unit:
        lo = np.min([x.min(axis=0) for x in Xc], axis=0)
        hi = np.max([x.max(axis=0) for x in Xc], axis=0)
        Xc = [(x - lo) / (hi - lo) for x in Xc]
    return [x.astype(dtype) for x in Xc]


def _numba_stats() -> tuple[int, int, list[str]]:
    """Cache misses (compilations) and hits summed over every Numba dispatcher in fastfc's modules."""
    from numba.core.registry import CPUDispatcher

    misses = hits = 0
    names = []
    seen = set()
    for modname, mod in list(sys.modules.items()):
        if not modname.startswith("fastfc") or mod is None:
            continue
        for obj in vars(mod).values():
            if isinstance(obj, CPUDispatcher) and id(obj) not in seen:
                seen.add(id(obj))
                m = sum(obj._cache_misses.values())
                h = sum(obj._cache_hits.values())
                misses += m
                hits += h
                if m:
                    names.append(f"{obj.py_func.__module__.rsplit('.', 1)[-1]}.{obj.py_func.__name__}x{m}")
    return misses, hits, sorted(names)


def _child(config: str, dtype: str, warmup_only: bool) -> None:
    """Run one fit (or ``fastfc warmup``) in this process and print its timings as JSON."""
    t0 = time.perf_counter()
    import fastfc

    t_import = time.perf_counter() - t0
    if warmup_only:
        from fastfc.warmup import warmup

        t1 = time.perf_counter()
        warmup()
        t_fit = time.perf_counter() - t1
    else:
        name, kwargs = CONFIGS[config]
        Xc = _data(dtype, unit=name == "FedCRef")
        t1 = time.perf_counter()
        getattr(fastfc, name)(random_state=0, **kwargs).fit_clients(Xc)
        t_fit = time.perf_counter() - t1
    misses, hits, names = _numba_stats()
    print(json.dumps(dict(import_s=t_import, fit_s=t_fit, compiled=misses, loaded=hits, kernels=names)))


def _run_child(config: str, dtype: str, cache: str, warmup_only: bool = False) -> dict:
    """Run :func:`_child` in a new process with ``NUMBA_CACHE_DIR=cache``; return its record."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(_REPO))
    env.pop("FASTFC_NUMBA_CACHE", None)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", config, "--dtype", dtype]
    if warmup_only:
        cmd.append("--warmup-only")
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=str(_REPO))
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{config}: child failed\n{out.stderr}")
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    rec["process_s"] = wall
    return rec


def _body(args) -> int:
    if args.child is not None:
        _child(args.child, args.dtype, args.warmup_only)
        return 0
    configs = list(CONFIGS) if not args.configs else args.configs.split(",")
    print(f"# Cold start (issue 15): first fit in a new process with an empty Numba cache\n")
    print(f"Data: 3 clients x 200 rows x 5 features, 3 Gaussian clusters, {args.dtype} (rescaled to [0, 1] for FedCRef); "
          f"estimator defaults plus `random_state=0` and the arguments shown; one new process per cell"
          + ("; `fastfc warmup` ran into the empty cache first" if args.warmup else "") + ".\n")
    if args.warmup:
        cache = tempfile.mkdtemp(prefix="fastfc-cold-")
        try:
            w = _run_child("", args.dtype, cache, warmup_only=True)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        print(f"`fastfc warmup` into an empty cache: {w['process_s']:.1f} s process "
              f"({w['fit_s']:.1f} s compiling, {w['compiled']} specialisations).\n")
    print("| configuration | cold fit s | cold process s | compiled | warm fit s | warm process s | warm compiled "
          "| warm loaded | import s (cold) |")
    print("|---|---|---|---|---|---|---|---|---|")
    details = []
    for config in configs:
        cache = tempfile.mkdtemp(prefix="fastfc-cold-")
        try:
            if args.warmup:
                _run_child("", args.dtype, cache, warmup_only=True)
            cold = _run_child(config, args.dtype, cache)
            warm = _run_child(config, args.dtype, cache)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        print(f"| {config} | {cold['fit_s']:.1f} | {cold['process_s']:.1f} | {cold['compiled']} | {warm['fit_s']:.2f} "
              f"| {warm['process_s']:.1f} | {warm['compiled']} | {warm['loaded']} | {cold['import_s']:.1f} |",
              flush=True)
        details.append((config, cold["kernels"]))
    print("\nKernels compiled by the cold process (module.kernel x specialisations):\n")
    for config, names in details:
        print(f"- {config}: {', '.join(names) if names else 'none'}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="", help="comma-separated subset of: " + ", ".join(CONFIGS))
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--warmup", action="store_true",
                        help="run `fastfc warmup` into each empty cache before the first fit")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--warmup-only", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    if "--child" in argv:
        return _body(parser.parse_args(argv))
    from benchmarks._provenance import run_with_out

    return run_with_out(parser, argv, _body)


if __name__ == "__main__":
    sys.exit(main())
