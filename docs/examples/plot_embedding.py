"""
Rows by client and by global cluster
====================================

Four clients each hold some of five Gaussian clusters (a label-skewed federation). k-FED
clusters them in one round; the rows, projected on their first two principal components, are
coloured by the client that holds them and by the global cluster they were given, with the
global centres as crosses. The bars show which global clusters each client holds.
"""
import matplotlib.pyplot as plt
import numpy as np

from fastfc import KFed
from fastfc.datasets import make_gaussian_mixture
from fastfc.plotting import plot_client_composition, plot_embedding

X, y = make_gaussian_mixture(800, 6, 5, random_state=0)
# label skew: sort by class, then cut into four clients (each sees two or three clusters)
order = np.argsort(y, kind="stable")
X_clients = np.array_split(X[order], 4)

est = KFed(n_clusters=5, random_state=0).fit_clients(X_clients)

fig, axes = plt.subplots(1, 2, figsize=(10, 4))
plot_embedding(est, X_clients, color_by="client", ax=axes[0])
plot_embedding(est, X_clients, color_by="cluster", ax=axes[1])
fig.tight_layout()

# %%
# Which global clusters each client holds (row counts; ``normalize=True`` for fractions):

ax = plot_client_composition(est)
plt.show()
