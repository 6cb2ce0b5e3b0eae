"""Pictures of a federated clustering: embeddings, client composition, hierarchies, k* curves, scaling.

Needs matplotlib (``pip install "fastfc[plot]"``); it is imported only when a
function here draws, and a missing matplotlib is an :class:`ImportError` that
says how to install it. Every function takes an optional matplotlib ``ax``
(or ``axes``) to draw into and returns what it drew on, so the pieces compose
into one's own figures; :func:`plot_run` puts the usual four panels of a
fitted estimator on one figure and can write it to a file (``fastfc run ...
--plot out.png``).

The functions read only the fitted attributes of an estimator (and, for the
embeddings, the clients' rows, which never leave the caller): the global
labels per client (``client_labels_``), the global centres
(``cluster_centers_``), Fed-HIRE's and GOLD's multi-granular labels of the
uploaded clusterlets (``global_model_.granular_labels``, ``level_sizes_``) and
Fed-k*-HC's k* diagnostics (``snc_``, ``k_scores_``) and merge tree
(``merges_``, ``merge_heights_``).
"""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "pca_2d",
    "plot_embedding",
    "plot_client_composition",
    "plot_hierarchy",
    "plot_kstar_curve",
    "plot_dendrogram",
    "plot_scaling",
    "read_asv_scaling",
    "read_scaling_table",
    "plot_run",
]



def _require():
    """Import matplotlib, or raise an ImportError that says how to install it."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(
            f"fastfc.plotting needs matplotlib ({exc}); install it with: pip install 'fastfc[plot]'"
        ) from None
    return matplotlib


def _pyplot():
    """matplotlib's pyplot (see :func:`_require`)."""
    _require()
    import matplotlib.pyplot as plt

    return plt


def _colors(n: int) -> list:
    """``n`` distinct-looking colours (tab10 up to 10, else tab20, cycled)."""
    matplotlib = _require()
    cmap = matplotlib.colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _new_axes(ax, ncols: int = 1, figsize=(5.0, 4.0)):
    if ax is not None:
        return ax
    plt = _pyplot()
    _, axes = plt.subplots(1, ncols, figsize=figsize, layout="constrained")
    return axes


def _check_fitted(est, *attrs: str) -> None:
    missing = [a for a in attrs if not hasattr(est, a)]
    if missing:
        raise ValueError(
            f"{type(est).__name__} has no {', '.join(missing)}: fit it first (fit or fit_clients)"
            if not hasattr(est, "labels_") else
            f"{type(est).__name__} has no {', '.join(missing)}: this plot needs another method"
        )


# ------------------------------------------------------------------ embeddings
def pca_2d(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Project rows on their first two principal components (numpy SVD).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)

    Returns
    -------
    coords : ndarray of shape (n_samples, 2)
        The projected rows (a second column of zeros when there is one feature).
    mean : ndarray of shape (n_features,)
        The mean that was subtracted.
    components : ndarray of shape (2, n_features)
        The principal axes (rows); project other points with ``(P - mean) @ components.T``.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"pca_2d needs a non-empty 2-D array, got shape {X.shape}")
    mean = X.mean(axis=0)
    _, _, vt = np.linalg.svd(X - mean, full_matrices=False)
    comps = np.zeros((2, X.shape[1]))
    comps[: min(2, vt.shape[0])] = vt[:2]
    # sign convention: the largest loading of each axis is positive (stable pictures across runs)
    signs = np.sign(comps[np.arange(2), np.argmax(np.abs(comps), axis=1)])
    comps *= np.where(signs == 0, 1.0, signs)[:, None]
    return (X - mean) @ comps.T, mean, comps


def _stack_clients(est, X_clients: Sequence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, global labels and client index of every row (checks they match the fit)."""
    _check_fitted(est, "client_labels_")
    if len(X_clients) != len(est.client_labels_):
        raise ValueError(f"{len(X_clients)} clients given, but the estimator was fitted on {len(est.client_labels_)}")
    for i, (Xi, lab) in enumerate(zip(X_clients, est.client_labels_)):
        if np.shape(Xi)[0] != np.shape(lab)[0]:
            raise ValueError(f"client {i} has {np.shape(Xi)[0]} rows, but the estimator labelled {np.shape(lab)[0]}")
    X = np.concatenate([np.asarray(Xi, dtype=np.float64) for Xi in X_clients])
    labels = np.concatenate([np.asarray(lab) for lab in est.client_labels_]).astype(np.int64)
    client = np.repeat(np.arange(len(X_clients)), [np.shape(Xi)[0] for Xi in X_clients])
    return X, labels, client


def plot_embedding(est, X_clients: Sequence, *, color_by: str = "cluster", method: str = "pca", ax=None,
                   max_points: int = 5000, random_state: int = 0, show_centers: bool = True):
    """Scatter the clients' rows in two dimensions, coloured by global cluster or by client.

    Parameters
    ----------
    est : fitted fastfc estimator
        Fitted with ``fit_clients`` on ``X_clients`` (its ``client_labels_``
        are drawn).
    X_clients : sequence of array-like of shape (n_i, n_features)
        The clients' rows, in the order they were fitted.
    color_by : {"cluster", "client"}, default="cluster"
        Colour each row by its global cluster or by the client holding it.
    method : {"pca", "tsne"}, default="pca"
        ``"pca"``: the first two principal components of all rows
        (:func:`pca_2d`); ``"tsne"``: scikit-learn's t-SNE (slower; centres
        are then not drawn).
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure, constrained layout).
    max_points : int, default=5000
        Draw at most this many rows (a seeded uniform subsample beyond).
    random_state : int, default=0
        Seed of the subsample and of t-SNE.
    show_centers : bool, default=True
        Mark the global centres (``cluster_centers_``) with black crosses
        (PCA only).

    Returns
    -------
    ax : matplotlib Axes
    """
    if color_by not in ("cluster", "client"):
        raise ValueError(f"color_by must be 'cluster' or 'client', got {color_by!r}")
    if method not in ("pca", "tsne"):
        raise ValueError(f"method must be 'pca' or 'tsne', got {method!r}")
    X, labels, client = _stack_clients(est, X_clients)
    rng = np.random.default_rng(random_state)
    keep = np.sort(rng.choice(X.shape[0], max_points, replace=False)) if X.shape[0] > max_points else slice(None)
    X, labels, client = X[keep], labels[keep], client[keep]
    centers = None
    if method == "pca":
        coords, mean, comps = pca_2d(X)
        if show_centers and getattr(est, "cluster_centers_", None) is not None:
            C = np.asarray(est.cluster_centers_, dtype=np.float64)
            if C.ndim == 2 and C.shape[1] == X.shape[1]:
                centers = (C - mean) @ comps.T
        axis_names = ("PC 1", "PC 2")
    else:
        from sklearn.manifold import TSNE

        coords = TSNE(n_components=2, random_state=random_state, init="pca",
                      perplexity=min(30.0, max(2.0, (X.shape[0] - 1) / 3))).fit_transform(X)
        axis_names = ("t-SNE 1", "t-SNE 2")
    ax = _new_axes(ax)
    groups = labels if color_by == "cluster" else client
    values = np.unique(groups)
    colors = _colors(int(values.max()) + 1 if values.size else 0)
    for g in values:
        m = groups == g
        ax.scatter(coords[m, 0], coords[m, 1], s=6, color=colors[g], alpha=0.7, linewidths=0,
                   label=f"{color_by} {g}")
    if centers is not None:
        ax.scatter(centers[:, 0], centers[:, 1], marker="x", s=40, color="black", linewidths=1.5,
                   label="global centres")
    ax.set_xlabel(axis_names[0])
    ax.set_ylabel(axis_names[1])
    ax.set_title(f"{type(est).__name__}: rows by {color_by}")
    if values.size <= 12:
        ax.legend(fontsize="x-small", markerscale=2, loc="best", frameon=False)
    return ax


# ------------------------------------------------------------ client composition
def plot_client_composition(est, *, ax=None, normalize: bool = False):
    """Stacked bars: how many rows of each client fall in each global cluster.

    Parameters
    ----------
    est : fitted fastfc estimator
        Reads ``client_labels_``.
    ax : matplotlib Axes, optional
    normalize : bool, default=False
        Bars of each client's fractions instead of row counts.

    Returns
    -------
    ax : matplotlib Axes
    """
    _check_fitted(est, "client_labels_")
    labs = [np.asarray(lab, dtype=np.int64) for lab in est.client_labels_]
    k = max((int(lab.max()) + 1 for lab in labs if lab.size), default=0)
    counts = np.array([np.bincount(lab, minlength=k) for lab in labs], dtype=np.float64).reshape(len(labs), k)
    if normalize:
        counts /= np.maximum(counts.sum(axis=1, keepdims=True), 1.0)
    ax = _new_axes(ax)
    colors = _colors(k)
    x = np.arange(len(labs))
    bottom = np.zeros(len(labs))
    for j in range(k):
        ax.bar(x, counts[:, j], bottom=bottom, color=colors[j], width=0.8, label=f"cluster {j}")
        bottom += counts[:, j]
    ax.set_xlabel("client")
    ax.set_ylabel("fraction of rows" if normalize else "rows")
    ax.set_xticks(x if len(labs) <= 20 else x[:: max(1, len(labs) // 10)])
    ax.set_title("global clusters per client")
    if k <= 12:
        ax.legend(fontsize="x-small", frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax


# ------------------------------------------------------------- Fed-HIRE / GOLD
def plot_hierarchy(est, *, axes=None):
    """Fed-HIRE's or GOLD's hierarchy: cluster count per level and how the levels nest.

    Left: the number of clusters of every MCPL level (``level_sizes_``).
    Right: an icicle chart of the uploaded clusterlets (columns, sorted by
    their labels from the coarsest level down): one row per level, a box per
    run of clusterlets sharing a cluster of that level, and a bottom row of
    the final global clusters. A cluster that is split into several boxes
    does not nest in the level above it.

    Parameters
    ----------
    est : fitted FedHIRE or GOLD
        Reads ``level_sizes_`` and ``global_model_`` (its ``granular_labels``
        and ``clusterlet_labels``).
    axes : sequence of two matplotlib Axes, optional

    Returns
    -------
    axes : ndarray of two matplotlib Axes
    """
    _check_fitted(est, "level_sizes_", "global_model_")
    model = est.global_model_
    Z = np.asarray(model.granular_labels, dtype=np.int64)
    final = np.asarray(model.clusterlet_labels, dtype=np.int64)
    sizes = np.asarray(est.level_sizes_)
    if axes is None:
        plt = _pyplot()
        _, axes = plt.subplots(1, 2, figsize=(10.0, 4.0), gridspec_kw={"width_ratios": [1, 2.5]},
                               layout="constrained")
    ax0, ax1 = axes
    levels = np.arange(1, sizes.size + 1)
    ax0.bar(levels, sizes, color="tab:blue")
    for lv, s in zip(levels, sizes):
        ax0.annotate(str(int(s)), (lv, s), ha="center", va="bottom", fontsize="small")
    ax0.set_xlabel("level (1 = finest)")
    ax0.set_ylabel("clusters")
    ax0.set_xticks(levels)
    ax0.set_title(f"{type(est).__name__}: level sizes")

    rows = np.column_stack([Z, final])  # finest .. coarsest, then the final clusters
    order = np.lexsort(tuple(rows[:, j] for j in range(rows.shape[1])))  # coarsest level is the primary key
    n = rows.shape[0]
    colors = _colors(int(rows.max()) + 1 if rows.size else 0)
    names = [f"level {j + 1}" for j in range(Z.shape[1])] + ["global"]
    for y, j in enumerate(range(rows.shape[1] - 1, -1, -1)):
        lab = rows[order, j]
        starts = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
        ends = np.r_[starts[1:], n]
        for a, b in zip(starts, ends):
            ax1.add_patch(_rect((a, y), b - a, 0.9, colors[lab[a]]))
            if (b - a) >= max(1, n / 40):
                ax1.text((a + b) / 2, y + 0.45, str(lab[a]), ha="center", va="center", fontsize="x-small")
    ax1.set_xlim(0, n)
    ax1.set_ylim(rows.shape[1], 0)
    ax1.set_yticks(np.arange(rows.shape[1]) + 0.45)
    ax1.set_yticklabels([names[j] for j in range(rows.shape[1] - 1, -1, -1)])
    ax1.set_xlabel(f"uploaded clusterlets ({n})")
    ax1.set_title("nesting of the levels")
    return np.asarray(axes)


def _rect(xy, w, h, color):
    from matplotlib.patches import Rectangle

    return Rectangle(xy, w, h, facecolor=color, edgecolor="white", linewidth=0.5)


# ------------------------------------------------------------------ Fed-k*-HC
def plot_kstar_curve(est, *, ax=None):
    """Fed-k*-HC's choice of k*: the SNC curve P_b (``mode="paper"``) or the score along the tree.

    ``mode="paper"`` with k estimated draws P_b against b and marks b_opt
    (where k* was read off, spec §3.5); ``mode="robust"`` with k estimated
    draws the criterion (BIC, or Calinski-Harabasz with ``k_select="ch"``)
    against k and marks k*.

    Parameters
    ----------
    est : fitted FedKStarHC
        Fitted with ``n_clusters=None`` (reads ``snc_`` or ``k_scores_``).
    ax : matplotlib Axes, optional

    Returns
    -------
    ax : matplotlib Axes

    Raises
    ------
    ValueError
        When the estimator was fitted with a given ``n_clusters`` (no curve).
    """
    _check_fitted(est, "snc_", "k_scores_")
    if est.snc_ is not None:
        p = np.asarray(est.snc_["p_curve"])
        b = np.arange(1, p.size + 1)
        ax = _new_axes(ax)
        ax.plot(b, p, "o-", color="tab:blue", label="$P_b$")
        b_opt = int(est.snc_["b_opt"])
        if 1 <= b_opt <= p.size:
            ax.plot([b_opt], [p[b_opt - 1]], "o", ms=12, mfc="none", color="tab:red",
                    label=f"$b_{{opt}}$ = {b_opt} (k* = {est.n_clusters_})")
        ax.set_xlabel("b (neighbours)")
        ax.set_ylabel("$P_b$ (share of short pairs)")
        ax.set_title("Fed-k*-HC: SNC curve")
    elif est.k_scores_ is not None:
        s = np.asarray(est.k_scores_)
        ch = getattr(est, "k_select", "bic") == "ch"
        k = np.arange(2 if ch else 1, s.size + (2 if ch else 1))
        ax = _new_axes(ax)
        ax.plot(k, s, ".-", color="tab:blue", label="Calinski-Harabasz" if ch else "BIC")
        best = int(est.n_clusters_)
        if k[0] <= best <= k[-1]:
            ax.plot([best], [s[best - k[0]]], "o", ms=12, mfc="none", color="tab:red", label=f"k* = {best}")
        ax.set_xlabel("k (clusters along the merge tree)")
        ax.set_ylabel("score")
        ax.set_title("Fed-k*-HC: choice of k*")
    else:
        raise ValueError("no k* curve: the estimator was fitted with a given n_clusters")
    ax.legend(fontsize="small", frameon=False)
    return ax


def _tree_layout(merges: np.ndarray, heights: np.ndarray, k0: int):
    """Leaf order and node positions of a (possibly partial) merge sequence over k0 slots."""
    m = merges.shape[0]
    children = np.empty((m, 2), dtype=np.int64)
    node_h = np.zeros(k0 + m)
    slot_node = np.arange(k0)
    for i, (p, q) in enumerate(merges):
        a, b = slot_node[p], slot_node[q]
        children[i] = a, b
        # drawn heights never go below a child's (Eq. (21) costs need not be monotone)
        node_h[k0 + i] = max(float(heights[i]), node_h[a], node_h[b])
        slot_node[p] = k0 + i
        slot_node[q] = -1
    roots = [int(r) for r in slot_node if r >= 0]
    x = np.zeros(k0 + m)
    order: list[int] = []
    for root in roots:
        stack = [root]
        while stack:
            v = stack.pop()
            if v < k0:
                x[v] = len(order)
                order.append(v)
            else:
                stack.extend(children[v - k0][::-1])
    for i in range(m):  # children precede their parent in merge order
        a, b = children[i]
        x[k0 + i] = (x[a] + x[b]) / 2
    return children, node_h, x, roots, np.array(order, dtype=np.int64)


def plot_dendrogram(est, *, ax=None, scale: str = "sqrt"):
    """Fed-k*-HC's merge tree over the uploaded subclusters, coloured by final cluster.

    Leaves are the k0 subclusters the clients uploaded; every merge of the
    server is a link at its linkage cost (Ward's cost in standardised units
    by default, Eq. (21) in ``mode="paper"``). A branch whose subclusters all
    end in one global cluster takes that cluster's colour; links above the
    cut are black. ``mode="paper"`` stores only the merges down to the final
    clusters, so its picture is a forest of k* trees.

    Parameters
    ----------
    est : fitted FedKStarHC
        Reads ``merges_``, ``merge_heights_`` and ``subcluster_labels_``.
    ax : matplotlib Axes, optional
    scale : {"sqrt", "linear"}, default="sqrt"
        Height axis: the square root of the merge cost (Ward's cost grows
        with the square of the distance, so the low merges stay visible) or
        the cost itself.

    Returns
    -------
    ax : matplotlib Axes
    """
    if scale not in ("sqrt", "linear"):
        raise ValueError(f"scale must be 'sqrt' or 'linear', got {scale!r}")
    _check_fitted(est, "merges_", "merge_heights_", "subcluster_labels_")
    merges = np.asarray(est.merges_, dtype=np.int64).reshape(-1, 2)
    heights = np.asarray(est.merge_heights_, dtype=np.float64)
    if scale == "sqrt":
        heights = np.sqrt(np.maximum(heights, 0.0))
    final = np.asarray(est.subcluster_labels_, dtype=np.int64)
    k0 = final.shape[0]
    children, node_h, x, roots, _ = _tree_layout(merges, heights, k0)
    m = merges.shape[0]
    node_lab = np.concatenate([final, np.full(m, -1, dtype=np.int64)])
    for i in range(m):
        a, b = children[i]
        if node_lab[a] == node_lab[b]:
            node_lab[k0 + i] = node_lab[a]
    colors = _colors(int(final.max()) + 1 if k0 else 0)
    ax = _new_axes(ax, figsize=(8.0, 4.0))
    segs, seg_colors = [], []
    for i in range(m):
        v = k0 + i
        color = colors[node_lab[v]] if node_lab[v] >= 0 else (0.0, 0.0, 0.0, 1.0)
        for c in children[i]:
            segs.append([(x[c], node_h[c]), (x[c], node_h[v])])
            seg_colors.append(color)
        a, b = children[i]
        segs.append([(x[a], node_h[v]), (x[b], node_h[v])])
        seg_colors.append(color)
    from matplotlib.collections import LineCollection

    ax.add_collection(LineCollection(segs, colors=seg_colors, linewidths=0.8))
    ax.scatter(x[:k0], np.zeros(k0), s=4, c=[colors[c] for c in final], zorder=3)
    top = float(node_h.max()) if node_h.size else 1.0
    ax.set_xlim(-1, k0)
    ax.set_ylim(0, top * 1.05 if top > 0 else 1.0)
    n_final = int(final.max()) + 1 if k0 else 0
    cut = k0 - n_final  # merges below the cut
    if 0 < cut < m:
        y_cut = (node_h[k0 + cut - 1] + node_h[k0 + cut]) / 2
        ax.axhline(y_cut, color="black", ls="--", lw=0.8)
        ax.annotate(f"cut: {n_final} clusters", (0.005, y_cut), xycoords=("axes fraction", "data"),
                    ha="left", va="bottom", fontsize="small",
                    bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))
    ax.set_xticks([])
    ax.set_xlabel(f"uploaded subclusters ({k0}), coloured by final cluster")
    ax.set_ylabel("sqrt(merge cost)" if scale == "sqrt" else "merge cost")
    ax.set_title("Fed-k*-HC: server merge tree")
    return ax


# ------------------------------------------------------------------- scaling
def read_asv_scaling(results_dir: str | os.PathLike, bench: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Seconds against n for one parametrised asv benchmark (its newest result).

    Parameters
    ----------
    results_dir : path-like
        asv's results directory (``.asv/results``): ``<machine>/*.json``
        files and an optional ``benchmarks.json``.
    bench : str
        Benchmark name, e.g. ``"bench_fedhire.FedHIREScaleN.time_fit"``; its
        first parameter must be n.

    Returns
    -------
    series : dict of str to (ndarray, ndarray)
        One entry per value of the other parameters (label "name=value,
        ..."): the n values and their seconds (failed points dropped).

    Raises
    ------
    FileNotFoundError
        When no results file holds the benchmark.
    """
    import itertools
    import json

    root = Path(results_dir)
    newest, stamp = None, -1
    for path in root.glob("*/*.json"):
        if path.name == "machine.json":
            continue
        data = json.loads(path.read_text())
        res = data.get("results", {}).get(bench)
        if res is None:
            continue
        date = data.get("date", 0) or 0
        if date > stamp:
            newest, stamp = res, date
    if newest is None:
        raise FileNotFoundError(f"no results for {bench!r} under {root}")
    # asv >= 0.6 stores [result, params, ...]; older: {"result": ..., "params": ...}
    values, params = (newest["result"], newest["params"]) if isinstance(newest, dict) else (newest[0], newest[1])
    ns = np.array([float(n) for n in params[0]])
    others = list(itertools.product(*params[1:])) or [()]
    names: list[str] = []
    meta = root / "benchmarks.json"
    if meta.is_file():
        names = json.loads(meta.read_text()).get(bench, {}).get("param_names", [])[1:]
    series = {}
    for j, other in enumerate(others):
        ys = [values[i * len(others) + j] for i in range(len(ns))]
        pts = [(n, y) for n, y in zip(ns, ys) if y is not None]
        label = ", ".join(f"{n}={v}" if n else str(v) for n, v in itertools.zip_longest(names, other)) or "time"
        if pts:
            series[label] = (np.array([p[0] for p in pts]), np.array([p[1] for p in pts], dtype=np.float64))
    return series


def read_scaling_table(path: str | os.PathLike) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Seconds against rows from a scaling table written by ``benchmarks/scaling.py``.

    Parameters
    ----------
    path : path-like
        A markdown results file with columns ``method``, ``settings``,
        ``rows`` and ``seconds`` (e.g. ``benchmarks/results/scaling.md``).

    Returns
    -------
    series : dict of str to (ndarray, ndarray)
        One entry per (method, settings) pair, labelled ``"method, settings"``:
        its row counts and seconds, in the table's order.

    Raises
    ------
    ValueError
        When the file holds no table with those columns.
    """
    lines = Path(path).read_text().splitlines()
    header = None
    series: dict[str, tuple[list, list]] = {}
    for line in lines:
        if not line.startswith("|"):
            header = None if not line.strip() else header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        if not {"method", "settings", "rows", "seconds"} <= set(header):
            continue
        row = dict(zip(header, cells))
        try:
            n = float(re.sub(r"[,\s]", "", row["rows"]))
            sec = float(row["seconds"])
        except ValueError:
            continue
        key = f"{row['method']}, {row['settings']}"
        series.setdefault(key, ([], []))
        series[key][0].append(n)
        series[key][1].append(sec)
    if not series:
        raise ValueError(f"{path}: no table with the columns method, settings, rows and seconds")
    return {k: (np.array(v[0]), np.array(v[1])) for k, v in series.items()}


def plot_scaling(series: dict[str, tuple[Sequence[float], Sequence[float]]], *, ax=None, guide: bool = True,
                 title: str | None = None):
    """Log-log plot of fit time against rows, one line per series, with a slope-1 guide.

    Parameters
    ----------
    series : dict of str to (sequence of float, sequence of float)
        Label to (rows, seconds), e.g. from :func:`read_scaling_table` or
        :func:`read_asv_scaling`.
    ax : matplotlib Axes, optional
    guide : bool, default=True
        Draw a dashed line of slope 1 (time proportional to n) through the
        smallest-n point of the series spanning the widest range of n.
    title : str, optional

    Returns
    -------
    ax : matplotlib Axes
    """
    if not series:
        raise ValueError("plot_scaling needs at least one series")
    ax = _new_axes(ax, figsize=(6.0, 4.5))
    colors = _colors(len(series))
    anchor, span = None, 1.0
    for (label, (ns, secs)), color in zip(series.items(), colors):
        ns, secs = np.asarray(ns, dtype=np.float64), np.asarray(secs, dtype=np.float64)
        ax.loglog(ns, secs, "o-", color=color, label=label)
        if ns.size >= 2 and ns.max() / ns.min() > span:
            anchor, span = (ns, secs), ns.max() / ns.min()
    if guide and anchor is not None:
        ns = np.array([anchor[0].min(), anchor[0].max()])
        first = anchor[1][np.argmin(anchor[0])]
        ax.loglog(ns, first * ns / ns[0], "k--", lw=0.8, label="slope 1 (linear in n)")
    ax.set_xlabel("n (rows)")
    ax.set_ylabel("seconds")
    if title:
        ax.set_title(title)
    ax.legend(fontsize="x-small", frameon=False)
    return ax


# ---------------------------------------------------------------- one figure
def plot_run(est, X_clients: Sequence, *, path: str | os.PathLike | None = None, method: str = "pca",
             dpi: int = 110) -> Any:
    """The usual four panels of a fitted estimator on one figure, optionally written to a file.

    Panels: rows by client and rows by global cluster (:func:`plot_embedding`),
    clusters per client (:func:`plot_client_composition`), and one that
    depends on the method: the level nesting of Fed-HIRE and GOLD
    (:func:`plot_hierarchy`), the merge tree of Fed-k*-HC
    (:func:`plot_dendrogram`), or the size of every global cluster.

    Parameters
    ----------
    est : fitted fastfc estimator
        Fitted with ``fit_clients`` on ``X_clients``.
    X_clients : sequence of array-like of shape (n_i, n_features)
    path : path-like, optional
        Write the figure there (format from the extension: png, pdf, svg,
        ...), without a display (no pyplot window is opened).
    method : {"pca", "tsne"}, default="pca"
        The embedding of the first two panels.
    dpi : int, default=110
        Resolution of a raster file.

    Returns
    -------
    fig : matplotlib Figure
    """
    if path is not None:
        _require()
        from matplotlib.figure import Figure

        fig = Figure(figsize=(11.0, 8.5))
    else:
        fig = _pyplot().figure(figsize=(11.0, 8.5))
    axes = fig.subplots(2, 2)
    plot_embedding(est, X_clients, color_by="client", method=method, ax=axes[0, 0])
    plot_embedding(est, X_clients, color_by="cluster", method=method, ax=axes[0, 1])
    plot_client_composition(est, ax=axes[1, 0])
    last = axes[1, 1]
    if hasattr(est, "level_sizes_") and hasattr(est, "global_model_"):
        sub = last.get_subplotspec().subgridspec(1, 2, width_ratios=[1, 2.5])
        last.remove()
        plot_hierarchy(est, axes=[fig.add_subplot(sub[0, 0]), fig.add_subplot(sub[0, 1])])
    elif hasattr(est, "merges_") and np.asarray(est.merges_).size:
        plot_dendrogram(est, ax=last)
    else:
        labels = np.concatenate([np.asarray(lab, dtype=np.int64) for lab in est.client_labels_])
        sizes = np.bincount(labels) if labels.size else np.zeros(0, dtype=np.int64)
        last.bar(np.arange(sizes.size), sizes, color=_colors(sizes.size))
        last.set_xticks(np.arange(sizes.size) if sizes.size <= 20 else np.arange(0, sizes.size, max(1, sizes.size // 10)))
        last.set_xlabel("global cluster")
        last.set_ylabel("rows")
        last.set_title("cluster sizes")
    fig.suptitle(f"{type(est).__name__}: {sum(np.shape(X)[0] for X in X_clients)} rows, "
                 f"{len(X_clients)} clients, {getattr(est, 'n_clusters_', '?')} clusters")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=dpi)
    return fig
