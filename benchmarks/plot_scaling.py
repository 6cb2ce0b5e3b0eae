#!/usr/bin/env python
"""Plot fit time against n (log-log) from asv results, with a slope-1 guide.

Usage::

    asv run --bench FedHIREScaleN    # or, on the installed package:
    asv run --python=same --set-commit-hash $(git rev-parse HEAD) --bench FedHIREScaleN
    python benchmarks/plot_scaling.py --bench bench_fedhire.FedHIREScaleN.time_fit -o scaling.png

Reads every ``.asv/results/<machine>/*.json`` file, takes the newest result of the benchmark,
and draws one line per value of the other parameters (e.g. ``n_jobs``). Needs matplotlib
(``pip install fastfc[plot]``).
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path


def load(results_dir: Path, bench: str):
    newest, stamp = None, -1
    for path in results_dir.glob("*/*.json"):
        if path.name == "machine.json":
            continue
        data = json.loads(path.read_text())
        res = data.get("results", {}).get(bench)
        if res is None:
            continue
        date = data.get("date", 0) or 0
        if date > stamp:
            newest, stamp = (data, res), date
    if newest is None:
        raise SystemExit(f"no results for {bench!r} under {results_dir}")
    data, res = newest
    # asv >= 0.6 stores [result, params, ...]; older: {"result": ..., "params": ...}
    if isinstance(res, dict):
        values, params = res["result"], res["params"]
    else:
        values, params = res[0], res[1]
    return values, params


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default="bench_fedhire.FedHIREScaleN.time_fit")
    ap.add_argument("--results", default=".asv/results")
    ap.add_argument("-o", "--output", default="scaling.png")
    args = ap.parse_args(argv)
    values, params = load(Path(args.results), args.bench)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [float(n) for n in params[0]]
    others = list(itertools.product(*params[1:])) or [()]
    names: list[str] = []
    meta = Path(args.results) / "benchmarks.json"
    if meta.is_file():
        names = json.loads(meta.read_text()).get(args.bench, {}).get("param_names", [])[1:]
    fig, ax = plt.subplots(figsize=(5, 4))
    for j, other in enumerate(others):
        ys = [values[i * len(others) + j] for i in range(len(ns))]
        pts = [(n, y) for n, y in zip(ns, ys) if y is not None]
        if pts:
            label = ", ".join(f"{n}={v}" if n else str(v) for n, v in itertools.zip_longest(names, other))
            ax.loglog(*zip(*pts), "o-", label=label or "time")
    first = next((v for v in values if v is not None), None)
    if first is not None:
        ax.loglog(ns, [first * n / ns[0] for n in ns], "k--", lw=0.8, label="slope 1 (linear)")
    ax.set_xlabel("n samples")
    ax.set_ylabel("seconds")
    ax.set_title(args.bench.split(".")[-2])
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
