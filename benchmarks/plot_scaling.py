#!/usr/bin/env python
"""Plot fit time against n (log-log) from asv results or a scaling table, with a slope-1 guide.

Usage::

    asv run --bench FedHIREScaleN    # or, on the installed package:
    asv run --python=same --set-commit-hash $(git rev-parse HEAD) --bench FedHIREScaleN
    python benchmarks/plot_scaling.py --bench bench_fedhire.FedHIREScaleN.time_fit -o scaling.png
    # the table of benchmarks/scaling.py instead of asv results:
    python benchmarks/plot_scaling.py --table benchmarks/results/scaling.md -o scaling.png

asv: reads every ``.asv/results/<machine>/*.json`` file, takes the newest result of the
benchmark, and draws one line per value of the other parameters (e.g. ``n_jobs``). The
reading and drawing are :func:`fastfc.plotting.read_asv_scaling`,
:func:`fastfc.plotting.read_scaling_table` and :func:`fastfc.plotting.plot_scaling`.
Needs matplotlib (``pip install fastfc[plot]``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:  # this checkout's fastfc, as the other benchmark scripts
    sys.path.insert(0, str(_REPO))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default="bench_fedhire.FedHIREScaleN.time_fit")
    ap.add_argument("--results", default=".asv/results")
    ap.add_argument("--table", default=None, help="a results table of benchmarks/scaling.py instead of asv results")
    ap.add_argument("-o", "--output", default="scaling.png")
    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    from fastfc.plotting import plot_scaling, read_asv_scaling, read_scaling_table

    if args.table:
        series = {k: v for k, v in read_scaling_table(args.table).items() if len(v[0]) >= 2}
        title = "whole fits, one thread"
    else:
        try:
            series = read_asv_scaling(args.results, args.bench)
        except FileNotFoundError as exc:
            raise SystemExit(str(exc)) from None
        title = args.bench.split(".")[-2]
    ax = plot_scaling(series, title=title)
    ax.figure.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
