"""
Fed-k*-HC: choosing k* and the merge tree
=========================================

Fed-k*-HC estimates the number of clusters. By default (``mode="robust"``) the server merges the
uploaded micro-subclusters with Ward's cost and takes k* at the maximum of BIC along the merge
tree; the paper's setting (``mode="paper"``) reads k* off the SNC curve P_b. Both the curves and
the server's merge tree are stored on the fitted estimator.
"""
import matplotlib.pyplot as plt
import numpy as np

from fastfc import FedKStarHC
from fastfc.datasets import make_gaussian_mixture
from fastfc.plotting import plot_dendrogram, plot_kstar_curve

X, y = make_gaussian_mixture(900, 5, 4, random_state=2)
X_clients = np.array_split(X[np.random.default_rng(0).permutation(len(X))], 3)

est = FedKStarHC(random_state=0).fit_clients(X_clients)
print(f"k* = {est.n_clusters_} from {est.n_subclusters_} uploaded subclusters (4 generated clusters)")

fig, axes = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1, 2]})
plot_kstar_curve(est, ax=axes[0])
axes[0].set_xlim(0, 20)
plot_dendrogram(est, ax=axes[1])
fig.tight_layout()

# %%
# The paper's setting: P_b against b, where b_opt is its first decline. Its merge tree stops at k*,
# so it is a forest of k* trees.

paper = FedKStarHC(mode="paper", random_state=0).fit_clients(X_clients)
print(f"paper setting: k* = {paper.n_clusters_}")
fig, axes = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1, 2]})
plot_kstar_curve(paper, ax=axes[0])
plot_dendrogram(paper, ax=axes[1])
fig.tight_layout()
plt.show()
