"""The sanity-suite generator builds what it promises: separated clusters, the split, the units."""
import numpy as np
import pytest

from fastfc.datasets import SanityCase, make_sanity_case, sanity_grid
from fastfc.datasets._sanity import SEPARATION


def _pooled(case):
    X_clients, y_clients = make_sanity_case(case)
    return X_clients, y_clients, np.vstack(X_clients), np.concatenate(y_clients)


@pytest.mark.parametrize("case", list(sanity_grid()), ids=lambda c: c.name)
def test_every_grid_case_has_its_clients_and_clusters(case):
    """Every case has n_clients non-empty clients of one feature count, and (unless degenerate) K clusters."""
    X_clients, y_clients, X, y = _pooled(case)
    assert len(X_clients) == case.n_clients
    assert all(len(x) >= 1 and x.shape[1] == case.n_features for x in X_clients)
    assert all(len(x) == len(t) for x, t in zip(X_clients, y_clients))
    assert np.isfinite(X).all()
    if case.degenerate != "identical":
        assert len(np.unique(y)) == case.n_clusters


@pytest.mark.parametrize("k,d", [(20, 2), (5, 10), (10, 100)])
def test_centres_are_separated_by_at_least_eight_standard_deviations(k, d):
    """The empirical cluster means (unit noise) lie at least SEPARATION minus sampling error apart."""
    _, _, X, y = _pooled(SanityCase(n_clusters=k, n_features=d, n_clients=1, rows_per_client=400 * k))
    means = np.array([X[y == c].mean(0) for c in range(k)])
    dist = np.sqrt(((means[:, None] - means[None]) ** 2).sum(-1))[np.triu_indices(k, 1)]
    assert dist.min() >= SEPARATION - 1.0  # each mean is within ~sqrt(d/400) of its centre


def test_units_scale_every_feature_and_spread_over_four_decades():
    """Global scale multiplies the data; feature_spread=1e4 gives per-feature spreads four decades apart."""
    base = _pooled(SanityCase())[2]
    scaled = _pooled(SanityCase(scale=1e6))[2]
    np.testing.assert_allclose(scaled, base * 1e6)
    spread = _pooled(SanityCase(feature_spread=1e4))[2]
    ratio = spread.std(0) / base.std(0)
    np.testing.assert_allclose(ratio.max() / ratio.min(), 1e4, rtol=1e-9)


def test_some_split_puts_every_class_on_only_some_clients():
    """split='some': each client holds max(1, K // 3) classes, so no class is on every client."""
    _, y_clients, _, _ = _pooled(SanityCase(n_clusters=9, split="some"))
    assert all(len(np.unique(t)) == 3 for t in y_clients)


def test_dirichlet_split_is_label_skewed_and_keeps_clients_of_2d_rows():
    """split='dirichlet' (alpha 0.1): most clients are dominated by one class; none is below 2·d rows."""
    case = SanityCase(split="dirichlet", n_clients=20)
    _, y_clients, _, _ = _pooled(case)
    top_share = [np.bincount(t).max() / len(t) for t in y_clients]
    assert np.median(top_share) > 0.7
    assert min(len(t) for t in y_clients) >= 2 * case.n_features


def test_degenerate_cases():
    """identical: every row the same; constant_feature: column 0 constant; one_row: one row per client."""
    X = _pooled(SanityCase(degenerate="identical"))[2]
    assert (X == X[0]).all()
    X = _pooled(SanityCase(degenerate="constant_feature"))[2]
    assert np.ptp(X[:, 0]) == 0 and np.ptp(X[:, 1]) > 0
    X_clients = make_sanity_case(SanityCase(degenerate="one_row"))[0]
    assert [len(x) for x in X_clients] == [1] * 10


def test_same_seed_same_data_and_other_seed_other_data():
    """The data is a pure function of the case (seed included)."""
    a, b = _pooled(SanityCase(seed=3))[2], _pooled(SanityCase(seed=3))[2]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, _pooled(SanityCase(seed=4))[2])
