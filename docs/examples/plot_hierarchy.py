"""
The hierarchy of Fed-HIRE and GOLD
==================================

Fed-HIRE's server fuses the clients' clusterlet centroids level by level (MCPL), then clusters the
multi-granular label matrix into ``n_clusters`` global clusters. Left: the number of clusters of
every level. Right: the uploaded clusterlets (columns, sorted by their labels), one row per level
and a bottom row of the final global clusters; a cluster split into several boxes does not nest
in the level above.
"""
import matplotlib.pyplot as plt
import numpy as np

from fastfc import GOLD, FedHIRE
from fastfc.datasets import make_gaussian_mixture
from fastfc.plotting import plot_hierarchy

X, y = make_gaussian_mixture(900, 4, 6, cluster_std=1.5, random_state=1)
X_clients = np.array_split(X[np.random.default_rng(0).permutation(len(X))], 3)

est = FedHIRE(n_clusters=6, random_state=0).fit_clients(X_clients)
axes = plot_hierarchy(est)

# %%
# GOLD on the same clients: the same machinery with GOLD's stop rule and global model.

gold = GOLD(n_clusters=6, random_state=0).fit_clients(X_clients)
axes = plot_hierarchy(gold)
plt.show()
