#!/usr/bin/env python
"""FeCA on one client, fit by fit in a fresh process: the warm-up transient of ``n_jobs=2`` (issue 15).

The one-client table (``bench_kernels.py --table parallel``) takes medians of the first five fits
of a process; FeCA's ``n_jobs=2`` fits there were slower than its steady state. This script starts
a fresh Python process per (d, n_jobs) configuration and repeat, builds the same data as that table
(``make_gaussian_mixture(n, d, 10, random_state=0)``), warms the compiled kernels on ``X[:2000]``
as the table does (default ``n_jobs``), then fits ``FeCA(n_clusters=10, random_state=0,
n_jobs=nj).fit(X)`` ``--fits`` times and records, per fit: wall seconds, process CPU seconds (all
threads), main-thread CPU seconds and minor page faults (``getrusage`` ``ru_minflt``: the whole
process and the main thread alone; the difference is the other threads' -- the helper thread that
runs the normality test, OpenMP workers).

Besides processes that fit with one ``n_jobs`` only, a third kind alternates n_jobs=1 and 2 in one
process, as the one-client table does. Per mode it prints the medians over the repeats of: the
first fit, the median of fits 2-5, the median of fits 6-``--fits`` (steady state), and the table's
number (median of fits 1-5); then the n_jobs=2 vs 1 wall speed-ups and CPU ratios of each, whether
the labels are the same bits for every fit and ``n_jobs``, and the per-fit series. Processes of
the modes alternate (repeat r of each before repeat r+1).

Usage::

    python3 benchmarks/feca_warmup.py --out benchmarks/results/feca_warmup.md
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent


def worker(n: int, d: int, n_jobs: int, fits: int) -> None:
    """One fresh process: print one JSON line with the per-fit measurements.

    ``n_jobs`` 1 or 2: ``fits`` fits with it; 0: ``fits`` pairs alternating n_jobs=1 and 2, as the
    one-client table runs them (each row then carries its ``n_jobs``).
    """
    import hashlib
    import resource
    import time

    import fastfc
    from fastfc.datasets import make_gaussian_mixture

    X, _ = make_gaussian_mixture(n, d, 10, random_state=0)
    fastfc.FeCA(n_clusters=10, random_state=0).fit(X[:2000])  # compile / warm, as bench_kernels' table
    rows = []
    for nj in ([n_jobs] * fits if n_jobs else [1, 2] * fits):
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_THREAD)
        w0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        est = fastfc.FeCA(n_clusters=10, random_state=0, n_jobs=nj).fit(X)
        w1, c1, m1 = time.perf_counter(), time.process_time(), time.thread_time()
        r1, t1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_THREAD)
        rows.append(dict(wall=w1 - w0, cpu=c1 - c0, main=m1 - m0, flt=r1.ru_minflt - r0.ru_minflt,
                         flt_main=t1.ru_minflt - t0.ru_minflt, n_jobs=nj, sys=r1.ru_stime - r0.ru_stime,
                         sys_main=t1.ru_stime - t0.ru_stime,
                         labels=hashlib.sha1(np.ascontiguousarray(est.labels_).tobytes()).hexdigest()))
    print(json.dumps(rows))


def _run_worker(n: int, d: int, n_jobs: int, fits: int) -> list[dict]:
    env = dict(os.environ)
    repo = str(_HERE.parent)
    env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", str(n), str(d), str(n_jobs),
                          str(fits)], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _scheduling() -> str:
    """The nice value and the session's autogroup nice of this process (Linux): on a shared machine a
    run may be started with a higher priority (``setsid`` then ``echo -15 > /proc/self/autogroup``
    and ``nice -n -15``) so that its two threads do run at once, as on an idle machine."""
    try:
        auto = Path("/proc/self/autogroup").read_text().split()[-1]
    except (OSError, IndexError):
        auto = "unknown"
    return f"nice {os.getpriority(os.PRIO_PROCESS, 0)}, autogroup nice {auto}"


def _phase(rows: list[dict], key: str, lo: int, hi: int) -> float:
    """Median of ``key`` over fits ``lo..hi`` (1-based, inclusive)."""
    return float(np.median([r[key] for r in rows[lo - 1:hi]]))


def main(argv=None) -> int:
    """``python3 benchmarks/feca_warmup.py --out FILE``."""
    sys.path.insert(0, str(_HERE))
    from _provenance import run_with_out

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--ds", default="10,50", help="feature counts")
    ap.add_argument("--fits", type=int, default=20, help="fits per process (at least 6)")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per configuration")

    def body(a) -> int:
        ds = [int(x) for x in a.ds.split(",")]
        fits = max(6, a.fits)
        # modes: n_jobs=1 alone, n_jobs=2 alone, and both alternating in one process (alt: the table's order)
        modes = [("1", 1), ("2", 2), ("alt 1", 0), ("alt 2", 0)]
        runs = {(d, m): [] for d in ds for m, _ in modes}
        for _ in range(a.repeats):
            for d in ds:
                for m, nj in modes[:3]:
                    rows = _run_worker(a.n, d, nj, fits)
                    if nj:
                        runs[(d, m)].append(rows)
                    else:
                        runs[(d, "alt 1")].append([r for r in rows if r["n_jobs"] == 1])
                        runs[(d, "alt 2")].append([r for r in rows if r["n_jobs"] == 2])
        phases = [("fit 1", 1, 1), ("fits 2-5", 2, 5), (f"fits 6-{fits}", 6, fits), ("fits 1-5 (table)", 1, 5)]
        for rs in runs.values():
            for rows in rs:
                for r in rows:
                    r["flt_other"] = r["flt"] - r["flt_main"]
                    r["sys_other"] = r["sys"] - r["sys_main"]

        def stat(d, m, key, lo, hi):  # median over the fresh processes of each one's phase median
            return float(np.median([_phase(rows, key, lo, hi) for rows in runs[(d, m)]]))

        print("# FeCA one client: the n_jobs=2 warm-up, fit by fit in fresh processes\n")
        print(f"{a.n} rows x d features (10-cluster Gaussian mixture, seed 0), `FeCA(n_clusters=10, "
              f"random_state=0, n_jobs=nj).fit(X)` after a warm-up fit on `X[:2000]` (as the one-client table); "
              f"n_jobs `1` or `2`: {fits} fits with it per fresh process; `alt 1` / `alt 2`: the n_jobs=1 / 2 fits "
              f"of a fresh process that alternates them ({fits} each, n_jobs=1 first: the one-client table's "
              f"order). Medians over {a.repeats} processes per mode (alternating) of each process's median over "
              "the fits named. wall and CPU in ms; CPU = process CPU (all threads), main = main-thread CPU; "
              "faults = minor page faults of the process (`ru_minflt`), other-thread faults = process minus "
              f"main thread. OpenMP wait policy: {os.environ.get('OMP_WAIT_POLICY', 'unset')}. Scheduling of "
              f"these processes: {_scheduling()}.\n")
        print("| d | n_jobs | fits | wall (ms) | CPU (ms) | main CPU (ms) | sys (ms) | other-thread sys (ms) | faults "
              "| other-thread faults |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for d in ds:
            for m, _ in modes:
                for label, lo, hi in phases:
                    print(f"| {d} | {m} | {label} | {stat(d, m, 'wall', lo, hi) * 1e3:.1f} "
                          f"| {stat(d, m, 'cpu', lo, hi) * 1e3:.1f} | {stat(d, m, 'main', lo, hi) * 1e3:.1f} "
                          f"| {stat(d, m, 'sys', lo, hi) * 1e3:.1f} | {stat(d, m, 'sys_other', lo, hi) * 1e3:.1f} "
                          f"| {stat(d, m, 'flt', lo, hi):.0f} | {stat(d, m, 'flt_other', lo, hi):.0f} |")
        print("\nn_jobs=2 vs 1, ratios of the medians above: wall speed-up (target >= 1.7) and process-CPU ratio "
              "CPU(1) / CPU(2) (1.0 = no extra work on two threads); label identity over every fit of every "
              "process and mode:\n")
        print("| d | processes | " + " | ".join(f"wall {p[0]}" for p in phases) + " | "
              + " | ".join(f"CPU {p[0]}" for p in phases) + " | same labels |")
        print("|---" * (2 * len(phases) + 3) + "|")
        for d in ds:
            for one, two, what in (("1", "2", "separate"), ("alt 1", "alt 2", "alternating")):
                sp = [stat(d, one, "wall", lo, hi) / stat(d, two, "wall", lo, hi) for _, lo, hi in phases]
                cp = [stat(d, one, "cpu", lo, hi) / stat(d, two, "cpu", lo, hi) for _, lo, hi in phases]
                hashes = {r["labels"] for m, _ in modes for rows in runs[(d, m)] for r in rows}
                print(f"| {d} | {what} | " + " | ".join(f"{s:.2f}" for s in sp + cp) + f" | {len(hashes) == 1} |")
        for key, what in (("wall", "wall ms"), ("cpu", "process CPU ms"), ("sys_other", "other-thread sys ms"),
                          ("flt_other", "other-thread faults")):
            print(f"\nPer fit ({what}, median over the processes):\n")
            print("| d | n_jobs | " + " | ".join(str(i) for i in range(1, fits + 1)) + " |")
            print("|---" * (fits + 2) + "|")
            scale = 1 if key == "flt_other" else 1e3
            for d in ds:
                for m, _ in modes:
                    per = [float(np.median([rows[i][key] for rows in runs[(d, m)]])) * scale for i in range(fits)]
                    print(f"| {d} | {m} | " + " | ".join(f"{w:.0f}" for w in per) + " |")
        return 0

    return run_with_out(ap, argv, body)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*(int(x) for x in sys.argv[2:6]))
    else:
        raise SystemExit(main())
