"""fastfc.datasets: bundled data, synthetic mixtures, federated splits and client files."""

import numpy as np
import pytest

from fastfc import datasets
from fastfc.datasets import (
    dataset_info,
    list_datasets,
    load_client_npz,
    load_dataset,
    make_gaussian_mixture,
    partition,
    partition_classes_per_client,
    partition_dirichlet,
    partition_iid,
    partition_non_icd,
    save_client_npz,
)

# (n, d, K) from shared/datasets/README.md and sklearn's documentation
EXPECTED_SHAPES = {
    "ecoli": (336, 7, 8),
    "yeast": (1484, 8, 10),
    "glass": (214, 9, 6),
    "vehicle": (846, 18, 4),
    "winequality_red": (1599, 11, 6),
    "landsat": (6435, 36, 6),
    "pendigits": (10992, 16, 10),
    "letter": (20000, 16, 26),
    "iris": (150, 4, 3),
    "wine": (178, 13, 3),
    "breast_cancer": (569, 30, 2),
    "digits": (1797, 64, 10),
}


def _labels(rng, n=300, k=5):
    """Labels with every class present and unequal class sizes."""
    y = np.concatenate([np.arange(k), rng.integers(0, k, size=n - k)])
    return rng.permutation(y)


def _assert_valid_parts(parts, n_clients, n_samples, *, disjoint=True):
    assert len(parts) == n_clients
    for p in parts:
        assert p.dtype == np.int64 and p.ndim == 1
        assert p.size > 0
        assert np.all(np.diff(p) > 0), "indices must be sorted and unique within a client"
        assert p.min() >= 0 and p.max() < n_samples
    if disjoint:
        allidx = np.concatenate(parts)
        assert np.array_equal(np.sort(allidx), np.arange(n_samples)), "every row exactly once"


# ---------------------------------------------------------------------------
# bundled datasets
# ---------------------------------------------------------------------------


def test_list_datasets_sorted_and_complete():
    names = list_datasets()
    assert names == sorted(names)
    assert set(names) == set(EXPECTED_SHAPES)


@pytest.mark.parametrize("name", sorted(EXPECTED_SHAPES))
def test_every_bundled_dataset_loads(name):
    n, d, k = EXPECTED_SHAPES[name]
    X, y = load_dataset(name)
    assert X.shape == (n, d) and X.dtype == np.float64 and X.flags.c_contiguous
    assert y.shape == (n,) and y.dtype == np.int64
    assert np.array_equal(np.unique(y), np.arange(k))
    assert np.all(np.isfinite(X))
    info = dataset_info(name)
    assert (info["n_samples"], info["n_features"], info["n_classes"]) == (n, d, k)
    assert info["source"] == ("scikit-learn" if name in {"iris", "wine", "breast_cancer", "digits"} else "UCI (CC BY 4.0)")


def test_bundled_files_and_attribution_are_in_the_package():
    from importlib import resources

    data = resources.files("fastfc.datasets").joinpath("data")
    text = data.joinpath("ATTRIBUTION.md").read_text(encoding="utf-8")
    assert "CC BY 4.0" in text and "UCI Machine Learning Repository" in text
    for name in EXPECTED_SHAPES:
        if dataset_info(name)["source"].startswith("UCI"):
            assert data.joinpath(f"{name}.npz").is_file()
            assert f"`{name}.npz`" in text


def test_standardize_zscores_and_keeps_constant_features_finite():
    X, _ = load_dataset("yeast", standardize=True)
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(X.std(axis=0), 1.0, atol=1e-10)
    # digits has pixels that are always 0: they must come out as 0, not NaN
    Xd, _ = load_dataset("digits", standardize=True)
    assert np.all(np.isfinite(Xd))
    const = Xd.std(axis=0) == 0
    assert const.any() and np.all(Xd[:, const] == 0)
    np.testing.assert_allclose(Xd.std(axis=0)[~const], 1.0, atol=1e-10)


def test_load_dataset_dtype_names_and_fresh_copies():
    X32, y = load_dataset("Iris", dtype=np.float32)
    assert X32.dtype == np.float32 and y.dtype == np.int64
    X_a, _ = load_dataset("winequality-red")
    X_b, _ = load_dataset("winequality_red")
    X_a[0, 0] = -1e9
    assert X_b[0, 0] != -1e9
    with pytest.raises(TypeError, match="floating"):
        load_dataset("iris", dtype=np.int32)


def test_unknown_dataset_error_lists_names():
    with pytest.raises(ValueError, match=r"unknown dataset 'nosuch'; available: .*iris.*letter"):
        load_dataset("nosuch")
    with pytest.raises(ValueError, match="unknown dataset"):
        dataset_info("nosuch")


# ---------------------------------------------------------------------------
# IID / Dirichlet / classes-per-client
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, params",
    [("iid", {}), ("dirichlet", {"alpha": 0.3}), ("dirichlet", {"alpha": 100.0}), ("classes", {"classes_per_client": 2})],
)
def test_partitions_cover_every_row_once_and_are_deterministic(method, params):
    rng = np.random.default_rng(7)
    y = _labels(rng, n=400, k=6)
    parts = partition(y, 7, method, random_state=3, **params)
    _assert_valid_parts(parts, 7, y.size)
    again = partition(y, 7, method, random_state=3, **params)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    other = partition(y, 7, method, random_state=4, **params)
    assert any(not np.array_equal(a, b) for a, b in zip(parts, other))


def test_generator_random_state_is_accepted_and_advanced():
    y = np.repeat(np.arange(4), 25)
    gen = np.random.default_rng(0)
    first = partition_iid(y, 4, random_state=gen)
    second = partition_iid(y, 4, random_state=gen)
    assert any(not np.array_equal(a, b) for a, b in zip(first, second))
    again = partition_iid(y, 4, random_state=np.random.default_rng(0))
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_iid_sizes_balanced_and_int_input():
    parts = partition_iid(103, 10, random_state=0)
    _assert_valid_parts(parts, 10, 103)
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    with pytest.raises(ValueError, match="5 samples over 8 clients"):
        partition_iid(5, 8)
    with pytest.raises(ValueError, match="n_clients must be >= 1"):
        partition_iid(5, 0)
    with pytest.raises(TypeError, match="n_clients must be an integer"):
        partition_iid(5, 2.5)


def _label_skew(y, parts):
    """Mean total-variation distance between each client's label distribution and the global one."""
    k = y.max() + 1
    glob = np.bincount(y, minlength=k) / y.size
    tv = [0.5 * np.abs(np.bincount(y[p], minlength=k) / p.size - glob).sum() for p in parts]
    return float(np.mean(tv))


def test_dirichlet_small_alpha_skews_labels_more():
    rng = np.random.default_rng(11)
    y = rng.integers(0, 10, size=5000)
    skew_small = np.mean([_label_skew(y, partition_dirichlet(y, 10, alpha=0.1, random_state=s)) for s in range(5)])
    skew_large = np.mean([_label_skew(y, partition_dirichlet(y, 10, alpha=100.0, random_state=s)) for s in range(5)])
    assert skew_small > 0.4 > 0.1 > skew_large


def test_dirichlet_min_size_is_met_even_when_draws_fail():
    rng = np.random.default_rng(2)
    y = _labels(rng, n=200, k=3)
    # 3 classes over 50 clients with tiny alpha: most draws leave clients empty -> repair path
    parts = partition_dirichlet(y, 50, alpha=0.01, min_size=2, random_state=0)
    _assert_valid_parts(parts, 50, 200)
    assert min(map(len, parts)) >= 2
    with pytest.raises(ValueError, match="at least 3 sample"):
        partition_dirichlet(y, 100, min_size=3)
    with pytest.raises(ValueError, match="alpha must be a positive"):
        partition_dirichlet(y, 3, alpha=0.0)


def test_classes_per_client_exact_count_and_coverage():
    rng = np.random.default_rng(5)
    y = _labels(rng, n=500, k=10)
    for c in (1, 2, 3, 10):
        parts = partition_classes_per_client(y, 12, classes_per_client=c, random_state=c)
        _assert_valid_parts(parts, 12, y.size)
        assert all(np.unique(y[p]).size == c for p in parts)
    # a class's rows are shared out evenly among its holders
    parts = partition_classes_per_client(y, 12, classes_per_client=3, random_state=0)
    for cls in range(10):
        sizes = [np.sum(y[p] == cls) for p in parts if np.any(y[p] == cls)]
        assert max(sizes) - min(sizes) <= 1


def test_classes_per_client_with_tiny_classes_and_errors():
    y = np.array([0, 1] + [2] * 50)  # classes 0 and 1 can each go to one client only
    for seed in range(5):  # 2 clients x 2 classes fits only as {0, 2} and {1, 2}
        parts = partition_classes_per_client(y, 2, classes_per_client=2, random_state=seed)
        _assert_valid_parts(parts, 2, y.size)
        assert sorted(tuple(np.unique(y[p])) for p in parts) == [(0, 2), (1, 2)]
    with pytest.raises(ValueError, match="at most n clients"):
        partition_classes_per_client(y, 3, classes_per_client=2)
    with pytest.raises(ValueError, match="exceeds the number of classes"):
        partition_classes_per_client(y, 2, classes_per_client=4)


def test_classes_per_client_fewer_slots_than_classes():
    y = np.repeat(np.arange(10), 10)
    parts = partition_classes_per_client(y, 2, classes_per_client=2, random_state=0)
    _assert_valid_parts(parts, 2, y.size, disjoint=False)
    held = np.concatenate(parts)
    assert np.unique(held).size == held.size == 40  # 4 whole classes, no row twice
    assert np.unique(y[held]).size == 4


# ---------------------------------------------------------------------------
# Non-ICD simulator (GOLD §5.1)
# ---------------------------------------------------------------------------


def _blobs_with_subclusters(rng, k=5, sub=3, per=30):
    """k classes, each made of `sub` far-apart blobs of `per` points (2-D)."""
    X, y, blob = [], [], []
    for c in range(k):
        for s in range(sub):
            centre = np.array([100.0 * c, 100.0 * s])
            X.append(centre + rng.normal(scale=0.5, size=(per, 2)))
            y.append(np.full(per, c))
            blob.append(np.full(per, c * sub + s))
    return np.vstack(X), np.concatenate(y), np.concatenate(blob)


def test_non_icd_default_properties():
    rng = np.random.default_rng(0)
    X, y, _ = _blobs_with_subclusters(rng, k=6)
    parts = partition_non_icd(X, y, 20, random_state=1)
    _assert_valid_parts(parts, 20, y.size, disjoint=False)
    n_classes = [np.unique(y[p]).size for p in parts]
    assert min(n_classes) >= 2 and max(n_classes) <= 6  # Step 1: k_l in {2..K}
    assert len(set(n_classes)) > 1
    # independent clients: some rows are shared, the total can exceed n
    counts = np.bincount(np.concatenate(parts), minlength=y.size)
    assert counts.max() > 1


def test_non_icd_steps_follow_the_spec():
    rng = np.random.default_rng(3)
    X, y, blob = _blobs_with_subclusters(rng, k=5, sub=3, per=30)
    # Steps 1-2 fixed at 3 classes; Step 3 splits every class into its 3 blobs (k-means++
    # seeding recovers such separated blobs); Step 5 keeps the whole pool. Each client then
    # holds whole blobs only, and 1..3 of the 3 blobs of each of its classes (Step 4).
    parts = partition_non_icd(
        X, y, 30, classes_range=(3, 3), subclusters_range=(3, 3), sample_fraction=(1.0, 1.0),
        kmeans_init="k-means++", random_state=4,
    )
    kept_counts = set()
    for p in parts:
        assert np.unique(y[p]).size == 3
        blobs, sizes = np.unique(blob[p], return_counts=True)
        assert np.all(sizes == 30), "a client must hold whole k-means sub-clusters"
        for c in np.unique(y[p]):
            kept_counts.add(int(np.sum(blobs // 3 == c)))
    assert kept_counts == {1, 2, 3}
    # one sub-cluster, keep everything, sample everything: the client is its classes, whole
    parts = partition_non_icd(X, y, 5, subclusters_range=(1, 1), sample_fraction=(1.0, 1.0), random_state=0)
    for p in parts:
        assert np.array_equal(p, np.flatnonzero(np.isin(y, np.unique(y[p]))))


def test_non_icd_random_init_kmeans_splits_classes():
    """Default (random-init) k-means: with m_j = 2 and q_j = 1 a client keeps part of each class."""
    rng = np.random.default_rng(8)
    X, y, _ = _blobs_with_subclusters(rng, k=3, sub=2, per=40)
    parts = partition_non_icd(
        X, y, 10, classes_range=(3, 3), subclusters_range=(2, 2), keep_range=(1, 1),
        sample_fraction=(1.0, 1.0), kmeans_n_init=3, random_state=0,
    )
    for p in parts:
        per_class = np.bincount(y[p], minlength=3)
        assert np.all((per_class > 0) & (per_class < 80))


def test_non_icd_sample_fraction_bounds_client_size():
    rng = np.random.default_rng(4)
    X, y, _ = _blobs_with_subclusters(rng, k=4, sub=2, per=25)
    # one sub-cluster per class: the pool is every row of the client's classes
    for seed in range(5):
        for p in partition_non_icd(X, y, 6, subclusters_range=(1, 1), sample_fraction=(0.5, 0.5), random_state=seed):
            pool = np.sum(np.isin(y, np.unique(y[p])))
            assert p.size == int(np.ceil(0.5 * pool))


def test_non_icd_deterministic_and_seed_dependent():
    X, y = load_dataset("ecoli", standardize=True)
    a = partition(y, 8, "non-icd", X=X, random_state=5)
    b = partition(y, 8, "non-icd", X=X, random_state=5)
    c = partition(y, 8, "non-icd", X=X, random_state=6)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert any(not np.array_equal(u, v) for u, v in zip(a, c))


def test_non_icd_degree_higher_than_iid():
    from fastfc.metrics import non_icd_degree

    X, y = load_dataset("iris", standardize=True)
    iid = [X[p] for p in partition(y, 4, "iid", random_state=0)]
    phi_iid = non_icd_degree(iid, bandwidth=0.5)
    phis = [non_icd_degree([X[p] for p in partition(y, 4, "non-icd", X=X, random_state=s)], bandwidth=0.5) for s in range(3)]
    assert np.mean(phis) > phi_iid + 0.1


def test_non_icd_errors():
    X = np.zeros((10, 2))
    y = np.repeat([0, 1], 5)
    with pytest.raises(ValueError, match="needs the data X"):
        partition(y, 2, "non-icd")
    with pytest.raises(ValueError, match="X has 10 rows but y has 9"):
        partition_non_icd(X, y[:9], 2)
    with pytest.raises(ValueError, match="sample_fraction"):
        partition_non_icd(X, y, 2, sample_fraction=(0.0, 1.0))
    with pytest.raises(ValueError, match="classes_range"):
        partition_non_icd(X, y, 2, classes_range=(3, 2))
    with pytest.raises(ValueError, match="NaN"):
        partition_non_icd(np.full((10, 2), np.nan), y, 2)
    with pytest.raises(ValueError, match="kmeans_init"):
        partition_non_icd(X, y, 2, kmeans_init="bogus")


def test_non_icd_handles_duplicate_rows_and_single_class():
    X = np.zeros((12, 3))  # all rows identical: k-means cannot make distinct sub-clusters
    y = np.zeros(12, dtype=int)
    parts = partition_non_icd(X, y, 3, subclusters_range=(5, 5), random_state=0)
    _assert_valid_parts(parts, 3, 12, disjoint=False)


# ---------------------------------------------------------------------------
# dispatcher
# ---------------------------------------------------------------------------


def test_partition_dispatcher_errors_and_aliases():
    y = np.repeat(np.arange(3), 10)
    with pytest.raises(ValueError, match="unknown partition method 'bogus'; available: iid, dirichlet, classes, non-icd"):
        partition(y, 3, "bogus")
    with pytest.raises(ValueError, match="no parameter.*alpha"):
        partition(y, 3, "classes", alpha=0.5)
    with pytest.raises(ValueError, match="X has 5 rows but y has 30"):
        partition(y, 3, "iid", X=np.zeros((5, 2)))
    a = partition(y, 3, "Classes_Per_Client", classes_per_client=1, random_state=0)
    b = partition_classes_per_client(y, 3, classes_per_client=1, random_state=0)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert len(partition(None, 3, "iid", X=np.zeros((30, 2)), random_state=0)) == 3
    assert set(datasets.PARTITION_METHODS) == {"iid", "dirichlet", "classes", "non-icd", "dirichlet-hsu", "subsample"}


# ---------------------------------------------------------------------------
# Gaussian mixtures
# ---------------------------------------------------------------------------


def test_gaussian_mixture_shapes_dtypes_and_determinism():
    X, y = make_gaussian_mixture(1001, 7, 4, random_state=0)
    assert X.shape == (1001, 7) and X.dtype == np.float64 and X.flags.c_contiguous
    assert y.dtype == np.int64 and np.bincount(y).tolist() == [251, 250, 250, 250]
    X2, y2 = make_gaussian_mixture(1001, 7, 4, random_state=0)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    X3, _ = make_gaussian_mixture(1001, 7, 4, random_state=1)
    assert not np.array_equal(X, X3)
    X32, y32 = make_gaussian_mixture(500, 3, 2, random_state=0, dtype=np.float32)
    assert X32.dtype == np.float32 and y32.dtype == np.int64


def test_gaussian_mixture_statistics():
    X, y, centers = make_gaussian_mixture(
        20000, 3, 3, cluster_std=[0.5, 1.0, 2.0], weights=[1, 2, 1], center_box=(-50, 50), random_state=3,
        return_centers=True,
    )
    assert np.bincount(y).tolist() == [5000, 10000, 5000]
    assert centers.shape == (3, 3) and np.all(np.abs(centers) <= 50)
    for k, s in enumerate([0.5, 1.0, 2.0]):
        np.testing.assert_allclose(X[y == k].mean(axis=0), centers[k], atol=6 * s / np.sqrt(np.sum(y == k)))
        np.testing.assert_allclose(X[y == k].std(axis=0), s, rtol=0.05)
    # labels are shuffled, not in blocks
    assert np.unique(y[:100]).size == 3


@pytest.mark.parametrize("cluster_std", [1.0, 2.0, [0.5, 1, 2, 1, 1, 1, 1, 1, 1, 1]])
def test_gaussian_mixture_large_is_built_in_place(cluster_std):
    """The docstring's scale claim: noise is drawn directly in ``dtype`` into the output and
    shifted in place block by block, so generating needs little memory beyond X itself (a
    float64 draw or a full-size temporary would at least double the peak). Speed is the
    benchmarks' business, not asserted here."""
    import tracemalloc

    tracemalloc.start()
    try:
        X, y = make_gaussian_mixture(200_000, 50, 10, cluster_std=cluster_std, random_state=0, dtype=np.float32)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert X.shape == (200_000, 50) and X.dtype == np.float32 and np.all(np.isfinite(X))
    assert peak < 1.3 * X.nbytes, peak / X.nbytes


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"n_samples": 0}, ValueError, "n_samples must be >= 1"),
        ({"n_clusters": 20, "n_samples": 10}, ValueError, "larger than n_samples"),
        ({"cluster_std": -1.0}, ValueError, "cluster_std"),
        ({"cluster_std": [1.0, 2.0]}, ValueError, r"shape \(3,\)"),
        ({"center_box": (1, 1)}, ValueError, "center_box"),
        ({"weights": [1, 0, -1]}, ValueError, "weights"),
        ({"dtype": np.int64}, TypeError, "float32 or float64"),
        ({"n_features": 2.0}, TypeError, "n_features must be an integer"),
    ],
)
def test_gaussian_mixture_validation(kwargs, exc, match):
    args = {"n_samples": 100, "n_features": 2, "n_clusters": 3, **kwargs}
    with pytest.raises(exc, match=match):
        make_gaussian_mixture(**args)


# ---------------------------------------------------------------------------
# client .npz files
# ---------------------------------------------------------------------------


def test_client_npz_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    Xs = [rng.normal(size=(n, 4)) for n in (3, 7, 1)]
    ys = [rng.integers(0, 3, size=n) for n in (3, 7, 1)]
    path = tmp_path / "clients.npz"
    save_client_npz(path, Xs, ys)
    Xl, yl = load_client_npz(str(path))
    assert len(Xl) == 3 and len(yl) == 3
    for a, b in zip(Xs, Xl):
        assert np.array_equal(a, b) and b.dtype == np.float64
    for a, b in zip(ys, yl):
        assert np.array_equal(a, b) and b.dtype == np.int64
    # without labels
    save_client_npz(tmp_path / "nolabels.npz", [x.astype(np.float32) for x in Xs])
    Xl, yl = load_client_npz(tmp_path / "nolabels.npz")
    assert yl is None and all(x.dtype == np.float32 for x in Xl)


def test_client_npz_reads_split_from_partition(tmp_path):
    X, y = load_dataset("wine", standardize=True)
    parts = partition(y, 4, "dirichlet", alpha=1.0, random_state=0)
    save_client_npz(tmp_path / "w.npz", [X[p] for p in parts], [y[p] for p in parts], compress=False)
    Xl, yl = load_client_npz(tmp_path / "w.npz")
    assert sum(len(x) for x in Xl) == len(X)
    assert np.array_equal(np.concatenate(yl), np.concatenate([y[p] for p in parts]))


def test_client_npz_missing_file():
    with pytest.raises(FileNotFoundError, match="nowhere/clients.npz"):
        load_client_npz("nowhere/clients.npz")


def _write(path, **arrays):
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize(
    "arrays, match",
    [
        ({"X0": np.zeros((2, 3)), "X2": np.zeros((2, 3))}, "missing X1"),
        ({"X0": np.zeros((2, 3)), "X1": np.zeros((2, 4))}, "different feature counts"),
        ({"X0": np.zeros((2, 3)), "y0": np.zeros(3, int)}, "3 labels but its client has 2 rows"),
        ({"X0": np.zeros((2, 3)), "X1": np.zeros((2, 3)), "y0": np.zeros(2, int)}, "labels for every client or none"),
        ({"X0": np.zeros((2, 3)), "y1": np.zeros(2, int)}, "missing y0"),
        ({"X0": np.zeros(3)}, "must be 2-D"),
        ({"X0": np.zeros((0, 3))}, "empty"),
        ({"X0": np.zeros((2, 3)), "y0": np.array([0.5, 1.0])}, "integer labels"),
        ({"X0": np.array([["a", "b"]])}, "non-numeric"),
        ({"data": np.zeros((2, 3))}, "no client arrays X0"),
    ],
)
def test_client_npz_invalid(tmp_path, arrays, match):
    path = _write(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=match):
        load_client_npz(path)


def test_client_npz_rejects_pickled_object_arrays(tmp_path):
    obj = np.empty(2, dtype=object)
    obj[0] = np.zeros((2, 3))
    obj[1] = {"a": 1}
    path = tmp_path / "pickled.npz"
    np.savez(path, X0=np.zeros((2, 3)), X1=obj)
    with pytest.raises(ValueError, match="pickled object array"):
        load_client_npz(path)


def test_client_npz_not_an_archive(tmp_path):
    path = tmp_path / "plain.npy"
    np.save(path, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="not an .npz archive"):
        load_client_npz(path)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="cannot read"):
        load_client_npz(junk)


def test_save_client_npz_validation(tmp_path):
    with pytest.raises(ValueError, match="different feature counts"):
        save_client_npz(tmp_path / "a.npz", [np.zeros((2, 3)), np.zeros((2, 2))])
    with pytest.raises(ValueError, match="2 data arrays but 1 label"):
        save_client_npz(tmp_path / "a.npz", [np.zeros((2, 3)), np.zeros((2, 3))], [np.zeros(2, int)])
    with pytest.raises(ValueError, match="empty"):
        save_client_npz(tmp_path / "a.npz", [])
    with pytest.raises(TypeError, match="list of 2-D arrays"):
        save_client_npz(tmp_path / "a.npz", np.zeros((2, 3)))
