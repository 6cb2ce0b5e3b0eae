#!/usr/bin/env python
"""Run a fastfc method on the ten published 8-client splits and compare with the reference results.

Prints a markdown table: our mean±std Purity / ARI / NMI / ACC over seeds and the median
wall time of a whole fit (every client, the server and the labelling of all rows, JIT warm),
next to the reference implementation's numbers from ``shared/reference_results`` and the
time ratio (reference median / ours).

Usage::

    python benchmarks/compare_reference.py kfed --preset reference --seeds 0-9
    python benchmarks/compare_reference.py kfed --preset default --splits US,EC --json out.json
    python benchmarks/compare_reference.py fedhire --preset reference --out benchmarks/results/compare_fedhire_reference.md

``--out FILE`` also writes the printed tables to FILE under the provenance header of
``benchmarks/_provenance.py`` (command, git revision, date, machine, load, versions).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from _provenance import run_with_out
from _shared import SHARED, parse_seeds

SPLITS = ["US", "EC", "YE", "VE", "EP", "CA", "WI", "PE", "LA", "LE"]
METRICS = ["purity", "ari", "nmi", "acc"]
REFERENCE_FILE = {"kfed": "kfed_ref.jsonl", "fedhire": "fedhire_ref.jsonl", "gold": "fedhire_ref.jsonl",
                  "feca": "kfed_ref.jsonl"}  # FeCA is compared with k-FED, its baseline
#: methods without a reference run of their own: show these references' ARI/NMI for context
CONTEXT_REFERENCES = {"fedkstarhc": ["kfed", "fedhire", "ffcm"]}
CONTEXT_FILE = {"ffcm": "ffcm_ref.jsonl"}


def presets(method: str, preset: str, n_classes: int, n_features: int) -> dict:
    """Estimator parameters of a named preset for one split.

    Parameters
    ----------
    method : str
        ``fastfc.experiment`` method name.
    preset : str
        ``default``, ``reference``, ``capN`` / ``capnone``, ``ninitN``, ``kmeans`` or ``snp``.
    n_classes, n_features : int
        Number of classes and of features of the split.

    Returns
    -------
    dict
        Keyword arguments of the estimator.
    """
    if preset == "default":
        return {}
    if method == "kfed" and preset == "reference":
        # the published code as run for shared/reference_results: k' = min(K, d), client 0 seeds
        # the farthest-first traversal, Lloyd to convergence at the server, nearest-centre labels
        return dict(n_local_clusters=min(n_classes, n_features), seed_client="first", server_init="farthest-first",
                    server_max_iter=None, assign="nearest", units=None, local_n_init=1)
    if method in ("fedhire", "gold") and preset == "reference":
        # the authors' behaviour: NaN elimination rules made explicit, 0.5 n candidates uncapped
        return dict(semantics="reference")
    if method == "fedkstarhc" and preset in ("kmeans", "snp"):
        # Fed-k*-HC's paper setting with k given (the splits' K) and the chosen micro-partitioner
        return dict(mode="paper", micro=preset)
    if method in ("fedhire", "gold") and preset.startswith("cap"):
        # robust semantics with another candidate cap, e.g. "cap64"; "capnone" = uncapped
        cap = preset[3:]
        return dict(max_candidates=None if cap == "none" else int(cap))
    if method == "feca" and preset.startswith("ninit"):
        # several local k-means starts instead of the paper's one, e.g. "ninit10"
        return dict(n_init=int(preset[5:]))
    raise SystemExit(f"no preset {preset!r} for method {method!r}")


def load_reference(method: str) -> dict[str, dict[str, list[float]]]:
    """Per-split lists of the reference run's scores and times.

    Parameters
    ----------
    method : str
        Method whose reference file (:data:`REFERENCE_FILE`, :data:`CONTEXT_FILE`) to read.

    Returns
    -------
    dict
        ``ref[split][metric]`` = one value per seed (metrics of :data:`METRICS` and ``seconds``);
        empty when the file is missing.
    """
    fname = REFERENCE_FILE.get(method, CONTEXT_FILE.get(method, ""))
    path = SHARED / "reference_results" / fname
    ref: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    if not path.is_file():
        return ref
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        for key in METRICS + ["seconds"]:
            ref[rec["dataset"]][key].append(rec[key])
    return ref


#: the clock of our fits: wall time (``--clock wall``, default) or the process's CPU time
#: (``--clock cpu``: every thread's, so with ``n_jobs=1`` about the wall time of an idle machine,
#: and far less disturbed by other processes on a loaded one)
_CLOCK = [time.perf_counter]


def run_split(method: str, split: str, preset: str, seeds: list[int], n_jobs: int | None, repeats: int) -> dict:
    """Fit ``method`` on one published split for every seed and score it.

    Parameters
    ----------
    method, split, preset : str
        Method, split name and parameter preset (:func:`presets`).
    seeds : list of int
        Seeds (``random_state`` of the estimator).
    n_jobs : int or None
        Threads of each fit.
    repeats : int
        Timed fits per seed; the median is kept.

    Returns
    -------
    dict
        ``{metric: [one value per seed]}`` for the metrics of ``fastfc.metrics.evaluate`` and
        ``seconds`` (median wall time of a whole fit, after one warm-up fit).
    """
    from fastfc.datasets import load_client_npz
    from fastfc.experiment import make_estimator
    from fastfc.metrics import evaluate

    X_clients, y_clients = load_client_npz(str(SHARED / "datasets" / "fedhire_splits" / f"{split}.npz"))
    y = np.concatenate(y_clients)
    k = int(np.unique(y).size)
    params = presets(method, preset, k, X_clients[0].shape[1])
    make_estimator(method, n_clusters=k, random_state=0, n_jobs=n_jobs, **params).fit_clients(X_clients)  # warm-up
    scores: dict[str, list[float]] = defaultdict(list)
    for seed in seeds:
        times = []
        for _ in range(repeats):
            est = make_estimator(method, n_clusters=k, random_state=seed, n_jobs=n_jobs, **params)
            t0 = _CLOCK[0]()
            est.fit_clients(X_clients)
            times.append(_CLOCK[0]() - t0)
        scores["seconds"].append(float(np.median(times)))
        for key, value in evaluate(y, est.labels_).items():
            scores[key].append(float(value))
    return {k: v for k, v in scores.items()}


def fmt(values: list[float]) -> str:
    """``mean±std`` with three decimals (``—`` for no values).

    Parameters
    ----------
    values : list of float
        Values over seeds.

    Returns
    -------
    str
        The table cell.
    """
    return f"{np.mean(values):.3f}±{np.std(values):.3f}" if values else "—"


def main(argv=None) -> int:
    """Command line: run one method on the splits and print the comparison table (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("method")
    ap.add_argument("--preset", default="default",
                    help="parameter preset: default | reference | capN / capnone (fedhire, gold) | ninitN (feca) | kmeans / snp (fedkstarhc)")
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3, help="timed fits per seed (median taken)")
    ap.add_argument("--json", default=None, help="also write the raw per-seed numbers here")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="our fits' clock: wall time, or the process's CPU time (robust to other load)")
    return run_with_out(ap, argv, run_tables)


def run_tables(args) -> int:
    """Run the comparison the parsed command line ``args`` asks for; returns 0."""
    seeds = parse_seeds(args.seeds)
    _CLOCK[0] = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.method.lower().replace("-", "").replace("_", "") in CONTEXT_REFERENCES:
        return main_context(args, seeds)
    return main_reference(args, seeds)


def main_reference(args, seeds: list[int]) -> int:
    """Print the table of a method against its reference run and a summary of the differences.

    ``args`` is the parsed command line, ``seeds`` the seeds to run; returns 0.
    """
    ref = load_reference(args.method)
    deltas, ratios = {}, {}
    rows, raw = [], {}
    for split in args.splits.split(","):
        ours = run_split(args.method, split, args.preset, seeds, args.n_jobs, args.repeats)
        raw[split] = ours
        r = ref.get(split, {})
        d_ari = np.mean(ours["ari"]) - np.mean(r["ari"]) if r.get("ari") else float("nan")
        d_nmi = np.mean(ours["nmi"]) - np.mean(r["nmi"]) if r.get("nmi") else float("nan")
        t_ours = float(np.median(ours["seconds"]))
        t_ref = float(np.median(r["seconds"])) if r.get("seconds") else float("nan")
        deltas[split], ratios[split] = (d_ari, d_nmi), t_ref / t_ours
        rows.append(
            f"| {split} | " + " | ".join(fmt(ours[m]) for m in METRICS)
            + f" | {fmt(r.get('ari', []))} | {fmt(r.get('nmi', []))} | {d_ari:+.3f} | {d_nmi:+.3f}"
            + f" | {t_ours * 1e3:.2f} | {t_ref * 1e3:.2f} | {t_ref / t_ours:.1f}× |"
        )
        print(f"done {split}", file=sys.stderr)
    print(f"{args.method} (preset {args.preset}), seeds {args.seeds}, n_jobs={args.n_jobs}; "
          f"time = median over seeds of the median of {args.repeats} whole fits (JIT warm; "
          f"{'process CPU time' if args.clock == 'cpu' else 'wall time'}); "
          f"ms (ref) = median of the reference's recorded `seconds` (shared/reference_results, "
          f"{REFERENCE_FILE[args.method]}), taken on another run of the same 2-core machine\n")
    print("| split | Purity | ARI | NMI | ACC | ref ARI | ref NMI | ΔARI | ΔNMI | ms (ours) | ms (ref) | ref/ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    n = len(deltas)
    below = [f"{s} {d[0]:+.3f} ARI / {d[1]:+.3f} NMI" for s, d in deltas.items() if min(d) < -0.02]
    above = [f"{s} {d[0]:+.3f} ARI / {d[1]:+.3f} NMI" for s, d in deltas.items() if max(d) > 0.02]
    print(f"\nSummary: mean ARI and mean NMI within 0.02 of the reference (|Δ| ≤ 0.02 both) on "
          f"{sum(max(abs(d[0]), abs(d[1])) <= 0.02 for d in deltas.values())} of {n} splits; "
          f"not below it by more than 0.02 (Δ ≥ −0.02 both) on {n - len(below)} of {n}; "
          f"below by more than 0.02: {', '.join(below) or 'none'}; above by more than 0.02: {', '.join(above) or 'none'}; "
          f"mean ARI at least the reference's on {sum(d[0] >= 0 for d in deltas.values())} of {n}.")
    print("Time ratio ref/ours: " + ", ".join(f"{s} {v:.0f}×" if v >= 10 else f"{s} {v:.1f}×" for s, v in ratios.items())
          + f" (min {min(ratios.values()):.1f}×, max {max(ratios.values()):.1f}×).")
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))
    return 0


def main_context(args, seeds: list[int]) -> int:
    """Print the table of a method with no reference run of its own.

    Our scores and time, with the other methods' reference ARI/NMI on the same splits for
    context. ``args`` is the parsed command line, ``seeds`` the seeds to run; returns 0.
    """
    method = args.method.lower().replace("-", "").replace("_", "")
    others = CONTEXT_REFERENCES[method]
    refs = {o: load_reference(o) for o in others}
    rows, raw = [], {}
    for split in args.splits.split(","):
        ours = run_split(method, split, args.preset, seeds, args.n_jobs, args.repeats)
        raw[split] = ours
        cells = " | ".join(f"{fmt(refs[o].get(split, {}).get('ari', []))} / {fmt(refs[o].get(split, {}).get('nmi', []))}"
                           for o in others)
        rows.append(f"| {split} | " + " | ".join(fmt(ours[m]) for m in METRICS)
                    + f" | {float(np.median(ours['seconds'])) * 1e3:.1f} | {cells} |")
        print(f"done {split}", file=sys.stderr)
    print(f"{method} (preset {args.preset}), seeds {args.seeds}, n_jobs={args.n_jobs}; no reference implementation exists: the last "
          f"columns are other methods' reference ARI / NMI on the same splits, for context; time = median over seeds "
          f"of the median of {args.repeats} whole fits\n")
    print("| split | Purity | ARI | NMI | ACC | ms (ours) | " + " | ".join(f"{o} ref ARI / NMI" for o in others) + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(others))
    print("\n".join(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
