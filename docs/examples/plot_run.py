"""
One figure per run (``fastfc run ... --plot``)
==============================================

:func:`fastfc.plotting.plot_run` puts the usual four panels on one figure: the rows by client and
by global cluster, the clusters per client, and the method's own structure. It is what
``fastfc run METHOD ... --plot run.png`` writes; here GOLD on the bundled wine data split over
five clients with a Dirichlet label skew (``fastfc run gold --dataset wine --clients 5 --split
dirichlet --alpha 0.5 --plot run.png`` draws the same run), then k-FED, whose last panel is the
size of every global cluster.
"""
import matplotlib.pyplot as plt
import numpy as np

from fastfc import GOLD, KFed
from fastfc.datasets import load_dataset, partition
from fastfc.metrics import evaluate
from fastfc.plotting import plot_run

X, y = load_dataset("wine", standardize=True)
parts = partition(y, n_clients=5, method="dirichlet", alpha=0.5, random_state=0)
X_clients = [X[p] for p in parts]

y_all = np.concatenate([y[p] for p in parts])
est = GOLD(n_clusters=3, random_state=0).fit_clients(X_clients)
print("GOLD:", {k: round(v, 3) for k, v in evaluate(y_all, est.labels_).items()})
fig = plot_run(est, X_clients)

# %%
# k-FED on the same clients.

est = KFed(n_clusters=3, random_state=0).fit_clients(X_clients)
print("k-FED:", {k: round(v, 3) for k, v in evaluate(y_all, est.labels_).items()})
fig = plot_run(est, X_clients)
plt.show()
