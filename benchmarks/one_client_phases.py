"""Where one client's fit spends its time, on one thread and on two (issue 15, "parallel inside a client").

For each estimator, one client (``fit(X)``) of a 10-cluster Gaussian mixture, ``n_clusters=10``,
``random_state=0``: the fit is profiled (``cProfile`` with ``time.thread_time`` as its clock, so
every number is CPU time of the thread that runs the fit, robust to other processes' load) with
``n_jobs=1`` and ``n_jobs=2``, and the functions of largest self time are listed with their share of
the one-thread fit. A function's self time is the time in its own code, including the compiled
kernels it calls (Numba and Cython kernels are not profiled inside), so the shares add up to the
fit. With two threads, work handed to another thread (a kernel's OpenMP/Numba team, a pool thread)
is not counted: the main-thread column shows what stays on the critical path.

Usage::

    python3 benchmarks/one_client_phases.py --n 100000 --d 10 --out benchmarks/results/one_client_phases_d10.md
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np

ESTIMATORS = ["FeCA", "KFed", "FedKMeans", "FedKStarHC", "FedHIRE", "GOLD"]


def _profile(Est, X, n_jobs: int, repeats: int):
    """Self and cumulative main-thread CPU seconds per function (mean over ``repeats`` fits), the
    fit's main-thread and process CPU seconds."""
    Est(n_clusters=10, random_state=0, n_jobs=n_jobs).fit(X)  # warm (compiled kernels, pools)
    pr = cProfile.Profile(time.thread_time)
    t0, c0 = time.thread_time(), time.process_time()
    pr.enable()
    for _ in range(repeats):
        Est(n_clusters=10, random_state=0, n_jobs=n_jobs).fit(X)
    pr.disable()
    main, proc = (time.thread_time() - t0) / repeats, (time.process_time() - c0) / repeats
    stats = pstats.Stats(pr).stats
    own = {k: v[2] / repeats for k, v in stats.items()}
    return own, main, proc


def _name(key) -> str:
    path, line, fn = key
    if path == "~":
        return fn
    return f"{Path(path).name}:{line}({fn})"


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _provenance import run_with_out

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--top", type=int, default=12, help="functions listed per estimator")
    ap.add_argument("--estimators", default=",".join(ESTIMATORS))

    def body(a):
        import fastfc
        from fastfc.datasets import make_gaussian_mixture

        X, _ = make_gaussian_mixture(a.n, a.d, 10, random_state=0)
        print("# One client: where the fit's time goes, n_jobs=1 and n_jobs=2\n")
        print(f"{a.n} rows x {a.d} features (10-cluster Gaussian mixture, seed 0), one client (`fit(X)`), "
              f"`n_clusters=10`, `random_state=0`; means of {a.repeats} profiled fits after a warm-up fit. "
              "Times are CPU milliseconds of the thread that runs the fit (`cProfile` on `time.thread_time`); "
              "`self` = time in the function's own code and the compiled kernels it calls. `share` = self time "
              "(n_jobs=1) / the one-thread fit. With n_jobs=2 the work other threads do is not counted: what is "
              "left is the critical path. `est.` = main-thread CPU(n_jobs=1) / max(main-thread CPU(n_jobs=2), "
              "process CPU(n_jobs=2) / 2), the idle-machine speed-up estimate of `bench_kernels.py --table "
              "parallel`; profiling adds a little Python overhead to both.\n")
        for name in a.estimators.split(","):
            Est = getattr(fastfc, name)
            Est(n_clusters=10, random_state=0).fit(X[:2000])  # compile
            own1, m1, p1 = _profile(Est, X, 1, a.repeats)
            own2, m2, p2 = _profile(Est, X, 2, a.repeats)
            print(f"## {name}\n")
            print(f"main-thread CPU {m1 * 1e3:.1f} ms (n_jobs=1), {m2 * 1e3:.1f} ms (n_jobs=2); process CPU "
                  f"{p1 * 1e3:.1f} / {p2 * 1e3:.1f} ms; est. {m1 / max(m2, p2 / 2):.2f}\n")
            print("| function | self n_jobs=1 (ms) | share | self n_jobs=2, main thread (ms) |")
            print("|---|---|---|---|")
            # the largest self times of either run (a two-thread path may call other functions)
            top = sorted(set(own1) | set(own2), key=lambda k: -max(own1.get(k, 0.0), own2.get(k, 0.0)))[:a.top]
            for k in top:
                s1 = own1.get(k, 0.0)
                print(f"| `{_name(k)}` | {s1 * 1e3:.1f} | {s1 / m1:.0%} | {own2.get(k, 0.0) * 1e3:.1f} |")
            rest1 = m1 - sum(own1.get(k, 0.0) for k in top)
            rest2 = m2 - sum(own2.get(k, 0.0) for k in top)
            print(f"| (everything else) | {rest1 * 1e3:.1f} | {rest1 / m1:.0%} | {rest2 * 1e3:.1f} |\n", flush=True)
        return 0

    return run_with_out(ap, argv, body)


if __name__ == "__main__":
    raise SystemExit(main())
