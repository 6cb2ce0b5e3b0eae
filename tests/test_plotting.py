"""fastfc.plotting: every picture renders to a non-trivial PNG on the Agg backend (issue 16).

Skipped as a whole when matplotlib is not installed (``pip install "fastfc[plot]"``),
except the test that a missing matplotlib is a clear error.
"""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from fastfc import GOLD, FedHIRE, FedKStarHC, KFed
from fastfc.datasets import make_gaussian_mixture
from fastfc.fed_kstar_hc import FedKStarHCModel
from fastfc.protocol import MessageError


@pytest.fixture(scope="module")
def plt():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


@pytest.fixture(scope="module")
def clients():
    """Five well-separated blobs over four clients that each hold only some of them."""
    X, y = make_gaussian_mixture(800, 4, 5, random_state=3)
    order = np.argsort(y, kind="stable")
    return np.array_split(X[order], 4), np.array_split(y[order], 4)


def _png_stats(path):
    """(height, width, distinct colours, share of non-white pixels) of a PNG file."""
    import matplotlib.image as mpimg

    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[2] in (3, 4), img.shape
    rgb = np.round(img[..., :3] * 255).astype(np.int64)
    codes = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    distinct = np.unique(codes).size
    ink = float((codes != 0xFFFFFF).mean())
    return img.shape[0], img.shape[1], distinct, ink


def _check_png(path, min_colors=8):
    assert path.is_file() and path.stat().st_size > 5000, path
    h, w, distinct, ink = _png_stats(path)
    assert h >= 300 and w >= 300
    assert distinct >= min_colors, f"{path.name}: only {distinct} colours"
    assert 0.02 < ink < 0.98, f"{path.name}: {ink:.3f} of the pixels are drawn"


@pytest.mark.parametrize("make", [
    lambda: FedHIRE(n_clusters=5, random_state=0),
    lambda: GOLD(n_clusters=5, random_state=0),
    lambda: FedKStarHC(random_state=0),
    lambda: FedKStarHC(mode="paper", random_state=0),
    lambda: KFed(n_clusters=5, random_state=0),
], ids=["fedhire", "gold", "kstar-robust", "kstar-paper", "kfed"])
def test_plot_run_writes_a_png(plt, clients, tmp_path, make):
    from fastfc.plotting import plot_run

    X_clients, _ = clients
    est = make().fit_clients(X_clients)
    path = tmp_path / "run.png"
    fig = plot_run(est, X_clients, path=path)
    _check_png(path, min_colors=20)
    # the four panels (Fed-HIRE/GOLD: the last one split in two), each with something drawn
    assert len(fig.axes) == (5 if isinstance(est, FedHIRE) else 4)
    assert all(ax.has_data() for ax in fig.axes)


def test_embedding_colours_and_centres(plt, clients, tmp_path):
    from fastfc.plotting import plot_embedding

    X_clients, _ = clients
    est = KFed(n_clusters=5, random_state=0).fit_clients(X_clients)
    ax = plot_embedding(est, X_clients, color_by="client")
    # one scatter per client plus the centres
    assert len(ax.collections) == len(X_clients) + 1
    ax = plot_embedding(est, X_clients, color_by="cluster", max_points=100)
    assert sum(c.get_offsets().shape[0] for c in ax.collections[:-1]) == 100
    ax.figure.savefig(tmp_path / "emb.png")
    _check_png(tmp_path / "emb.png")
    with pytest.raises(ValueError, match="color_by"):
        plot_embedding(est, X_clients, color_by="nope")
    with pytest.raises(ValueError, match="3 clients given"):
        plot_embedding(est, X_clients[:3])


@pytest.mark.slow  # scikit-learn's t-SNE: ~30 s on a loaded 2-core machine even on 80 rows
def test_embedding_tsne(plt, clients):
    from fastfc.plotting import plot_embedding

    X_clients, _ = clients
    est = KFed(n_clusters=5, random_state=0).fit_clients(X_clients)
    ax = plot_embedding(est, X_clients, method="tsne", max_points=80)
    assert len(ax.collections) == 5  # no centres with t-SNE
    assert ax.get_xlabel() == "t-SNE 1"


def test_pca_2d_matches_sklearn():
    from sklearn.decomposition import PCA

    from fastfc.plotting import pca_2d

    X, _ = make_gaussian_mixture(300, 6, 3, random_state=1)
    coords, mean, comps = pca_2d(X)
    ref = PCA(n_components=2).fit_transform(X)
    for j in range(2):
        assert np.allclose(np.abs(coords[:, j]), np.abs(ref[:, j]), atol=1e-8)
    assert np.allclose((X - mean) @ comps.T, coords)
    one, _, _ = pca_2d(X[:, :1])  # one feature: a zero second axis
    assert np.allclose(one[:, 1], 0.0)


def test_client_composition_counts(plt, clients):
    from fastfc.plotting import plot_client_composition

    X_clients, _ = clients
    est = KFed(n_clusters=5, random_state=0).fit_clients(X_clients)
    ax = plot_client_composition(est)
    k = est.n_clusters_
    assert len(ax.containers) == k
    heights = np.array([[bar.get_height() for bar in cont] for cont in ax.containers]).T  # (clients, k)
    expect = np.array([np.bincount(lab, minlength=k) for lab in est.client_labels_])
    assert np.array_equal(heights, expect)
    ax = plot_client_composition(est, normalize=True)
    tops = np.array([[bar.get_height() for bar in cont] for cont in ax.containers]).sum(axis=0)
    assert np.allclose(tops, 1.0)


def test_hierarchy_reads_the_levels(plt, clients, tmp_path):
    from fastfc.plotting import plot_hierarchy

    X_clients, _ = clients
    est = FedHIRE(n_clusters=5, random_state=0).fit_clients(X_clients)
    ax0, ax1 = plot_hierarchy(est)
    assert [p.get_height() for p in ax0.patches] == list(est.level_sizes_)
    Z = est.global_model_.granular_labels
    # every box of a level spans clusterlets that share that level's cluster; a level has at least its clusters
    assert len(ax1.patches) >= int(est.level_sizes_.sum()) + est.n_clusters_
    assert sum(p.get_width() for p in ax1.patches) == Z.shape[0] * (Z.shape[1] + 1)
    ax0.figure.savefig(tmp_path / "hier.png")
    _check_png(tmp_path / "hier.png")
    with pytest.raises(ValueError, match="another method"):
        plot_hierarchy(KFed(n_clusters=5, random_state=0).fit_clients(X_clients))


def test_kstar_curve_and_dendrogram(plt, clients, tmp_path):
    from fastfc.plotting import _tree_layout, plot_dendrogram, plot_kstar_curve

    X_clients, _ = clients
    robust = FedKStarHC(random_state=0).fit_clients(X_clients)
    k0 = robust.n_subclusters_
    assert robust.merges_.shape == (k0 - 1, 2) and robust.merge_heights_.shape == (k0 - 1,)
    ax = plot_kstar_curve(robust)
    assert np.allclose(ax.lines[0].get_ydata(), robust.k_scores_)
    ax = plot_dendrogram(robust)
    ax.figure.savefig(tmp_path / "tree.png")
    _check_png(tmp_path / "tree.png")
    children, h, x, roots, order = _tree_layout(robust.merges_, robust.merge_heights_, k0)
    assert len(roots) == 1 and np.array_equal(np.sort(order), np.arange(k0))
    # the leaves of every final cluster are contiguous in the drawing (the cut is a clean cut of the tree)
    lab = robust.subcluster_labels_[order]
    assert (np.diff(lab) != 0).sum() == robust.n_clusters_ - 1
    assert (h[k0:] >= np.maximum(h[children[:, 0]], h[children[:, 1]])).all()

    paper = FedKStarHC(mode="paper", random_state=0).fit_clients(X_clients)
    assert paper.merges_.shape == (paper.n_subclusters_ - paper.n_clusters_, 2)
    ax = plot_kstar_curve(paper)
    assert np.allclose(ax.lines[0].get_ydata(), paper.snc_["p_curve"])
    _, _, _, roots, _ = _tree_layout(paper.merges_, paper.merge_heights_, paper.n_subclusters_)
    assert len(roots) == paper.n_clusters_
    plot_dendrogram(paper, scale="linear")

    given = FedKStarHC(n_clusters=5, random_state=0).fit_clients(X_clients)
    with pytest.raises(ValueError, match="given n_clusters"):
        plot_kstar_curve(given)


def test_model_merges_travel_and_are_checked():
    def model(**change):
        kw = dict(centers=np.zeros((2, 2)), counts=np.array([2, 1]), radii=np.zeros(2), stds=np.zeros((2, 2)),
                  subcluster_labels=np.array([0, 0, 1]), p_curve=np.zeros(0), n_nodes=-1, b_opt=-1,
                  threshold_t=-1.0, d_s=-1.0, estimated=False, n_features=2,
                  merges=np.array([[0, 1]]), merge_heights=np.array([0.5]))
        kw.update(change)
        return FedKStarHCModel(**kw)

    back = FedKStarHCModel.from_bytes(model().to_bytes())
    assert np.array_equal(back.merges, [[0, 1]]) and np.array_equal(back.merge_heights, [0.5])
    assert model(merges=None, merge_heights=None).merges.shape == (0, 2)
    with pytest.raises(MessageError, match="p < q"):
        model(merges=np.array([[1, 0]]))
    with pytest.raises(MessageError, match="p < q"):
        model(merges=np.array([[0, 3]]))
    with pytest.raises(MessageError, match="merge_heights"):
        model(merge_heights=np.array([0.5, 1.0]))


def test_scaling_from_results_table_and_asv(plt, tmp_path):
    from pathlib import Path

    from fastfc.plotting import plot_scaling, read_asv_scaling, read_scaling_table

    table = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "scaling.md"
    if not table.is_file():
        pytest.skip("benchmarks/results/scaling.md is not in this checkout")
    series = read_scaling_table(table)
    kstar = series["FedKStarHC, defaults, k = 5 given"]
    assert len(kstar[0]) >= 2 and (np.diff(kstar[0]) > 0).all() and (kstar[1] > 0).all()
    ax = plot_scaling(series, title="scaling")
    assert len(ax.lines) == len(series) + 1  # and the slope-1 guide
    ax.figure.savefig(tmp_path / "scaling.png")
    _check_png(tmp_path / "scaling.png")

    # an asv >= 0.6 results tree: one benchmark over n x n_jobs, one failed point
    machine = tmp_path / "results" / "box"
    machine.mkdir(parents=True)
    (machine / "machine.json").write_text("{}")
    bench = "bench_x.ScaleN.time_fit"
    res = {"results": {bench: [[1.0, 0.6, 10.0, None], [["1000", "10000"], ["1", "2"]]]}, "date": 5}
    (machine / "abc.json").write_text(json.dumps(res))
    (tmp_path / "results" / "benchmarks.json").write_text(json.dumps({bench: {"param_names": ["n", "n_jobs"]}}))
    series = read_asv_scaling(tmp_path / "results", bench)
    assert set(series) == {"n_jobs=1", "n_jobs=2"}
    assert np.array_equal(series["n_jobs=1"][0], [1000, 10000]) and np.array_equal(series["n_jobs=1"][1], [1.0, 10.0])
    assert np.array_equal(series["n_jobs=2"][0], [1000])
    with pytest.raises(FileNotFoundError, match="no results"):
        read_asv_scaling(tmp_path / "results", "other.bench")
    with pytest.raises(ValueError, match="no table"):
        read_scaling_table(machine / "machine.json")


def test_cli_plot(plt, tmp_path, capsys):
    from fastfc.cli import main

    out = tmp_path / "run.png"
    assert main(["run", "fedhire", "--dataset", "iris", "--clients", "3", "--plot", str(out), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["plot"] == str(out)
    _check_png(out, min_colors=20)
    # an output directory that does not exist is refused before the fit, in one line
    assert main(["run", "kfed", "--dataset", "iris", "--plot", str(tmp_path / "nope" / "x.png")]) != 0
    err = capsys.readouterr().err
    assert "no directory" in err and "Traceback" not in err


def test_missing_matplotlib_is_a_clear_error(monkeypatch, capsys):
    from fastfc import plotting
    from fastfc.cli import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"fastfc\[plot\]"):
        plotting._require()
    # the CLI refuses before fitting, with one line (a user error, not a traceback)
    assert main(["run", "kfed", "--dataset", "iris", "--plot", "x.png"]) != 0
    err = capsys.readouterr().err
    assert "fastfc[plot]" in err and "Traceback" not in err
