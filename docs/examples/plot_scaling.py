"""
Scaling with the number of rows
===============================

Fit time against rows from the committed results table ``benchmarks/results/scaling.md``
(written by ``benchmarks/scaling.py``: whole fits on one thread, median of 3), log-log with a
slope-1 guide. The same plot from asv results: ``python benchmarks/plot_scaling.py --bench
bench_fedhire.FedHIREScaleN.time_fit``.
"""
from pathlib import Path

import matplotlib.pyplot as plt

from fastfc.plotting import plot_scaling, read_scaling_table

# the repository's results table, from the repository root or from docs/examples
here = Path.cwd().resolve()
table = next(d / "benchmarks" / "results" / "scaling.md" for d in (here, *here.parents)
             if (d / "benchmarks" / "results" / "scaling.md").is_file())
series = read_scaling_table(table)
# the series measured at two or more sizes
series = {label: pts for label, pts in series.items() if len(pts[0]) >= 2}
for label, (rows, seconds) in series.items():
    print(label, dict(zip(rows.astype(int).tolist(), seconds.tolist())))

ax = plot_scaling(series, title="whole fits, one thread (benchmarks/results/scaling.md)")
plt.show()
