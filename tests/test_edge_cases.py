"""Bad input gets an error naming the problem; odd but valid input works; caller arrays are never modified."""
import numpy as np
import pytest

from fastfc import FeCA, KFed

ESTIMATORS = [lambda: KFed(n_clusters=3, random_state=0), lambda: FeCA(n_clusters=3, random_state=0)]


def _clients(rng, sizes=(30, 40, 25), d=4):
    return [rng.normal(size=(n, d)) + 3 * i for i, n in enumerate(sizes)]


@pytest.mark.parametrize("make", ESTIMATORS)
@pytest.mark.parametrize("bad, match", [(np.nan, "NaN"), (np.inf, "infinity"), (-np.inf, "infinity")])
def test_non_finite_rejected(make, bad, match):
    Xs = _clients(np.random.default_rng(0))
    Xs[1][3, 2] = bad
    with pytest.raises(ValueError, match=match):
        make().fit_clients(Xs)
    with pytest.raises(ValueError, match=match):
        make().fit(np.concatenate(Xs))


@pytest.mark.parametrize("make", ESTIMATORS)
def test_one_dimensional_rejected(make):
    with pytest.raises(ValueError, match="2D array"):
        make().fit(np.arange(10.0))
    with pytest.raises(ValueError, match="2D array"):
        make().fit_clients([np.ones((5, 2)), np.arange(5.0)])


@pytest.mark.parametrize("make", ESTIMATORS)
def test_empty_client_rejected(make):
    Xs = _clients(np.random.default_rng(0))
    Xs[2] = np.empty((0, 4))
    with pytest.raises(ValueError, match="client 2 is empty"):
        make().fit_clients(Xs)
    with pytest.raises(ValueError, match="at least one client"):
        make().fit_clients([])


@pytest.mark.parametrize("make", ESTIMATORS)
def test_mismatched_feature_counts(make):
    Xs = _clients(np.random.default_rng(0))
    Xs[1] = Xs[1][:, :3]
    with pytest.raises(ValueError, match=r"different feature counts \(client 0: 4, client 1: 3, client 2: 4\)"):
        make().fit_clients(Xs)


@pytest.mark.parametrize("make", ESTIMATORS)
def test_too_many_clusters(make):
    Xs = [np.ones((2, 3)), np.zeros((1, 3))]
    with pytest.raises(ValueError, match=r"n_clusters=\d+ is larger than the number of samples \(3\)"):
        make().set_params(n_clusters=4).fit_clients(Xs)


@pytest.mark.parametrize("make", ESTIMATORS)
def test_non_numeric_rejected(make):
    X = np.array([["a", "b"], ["c", "d"], ["e", "f"]])
    with pytest.raises((TypeError, ValueError), match="non-numeric|string"):
        make().fit(X)
    with pytest.raises((TypeError, ValueError), match="non-numeric|string"):
        make().fit_clients([np.ones((3, 2)), X])


@pytest.mark.parametrize("make", ESTIMATORS)
def test_single_array_instead_of_list(make):
    with pytest.raises(TypeError, match="list of 2-D arrays"):
        make().fit_clients(np.ones((10, 3)))


@pytest.mark.parametrize("make", ESTIMATORS)
@pytest.mark.parametrize("sizes", [(30, 40, 25), (30, 30, 30)])
def test_list_of_clients_given_to_fit(make, sizes):
    # ragged (would be NumPy's "inhomogeneous shape") or equal-sized (would be a 3-D array)
    with pytest.raises(TypeError, match="list of 3 2-D arrays.*fit_clients"):
        make().fit(_clients(np.random.default_rng(0), sizes=sizes))


@pytest.mark.parametrize("make", ESTIMATORS)
def test_client_ids_length_checked(make):
    with pytest.raises(ValueError, match="client_ids must be 1-D of length n_samples=10"):
        make().fit(np.random.default_rng(0).normal(size=(10, 2)), client_ids=np.zeros(9))


@pytest.mark.parametrize("make", ESTIMATORS)
def test_bad_parameters_named(make):
    with pytest.raises(ValueError, match="n_clusters"):
        make().set_params(n_clusters=0).fit_clients(_clients(np.random.default_rng(0)))
    with pytest.raises(ValueError, match="n_jobs"):
        make().set_params(n_jobs=0).fit_clients(_clients(np.random.default_rng(0)))


@pytest.mark.parametrize("make", ESTIMATORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_caller_arrays_not_modified(make, dtype):
    rng = np.random.default_rng(1)
    Xs = [np.asfortranarray(x.astype(dtype)) for x in _clients(rng)]
    Xs.append(rng.normal(size=(40, 8)).astype(dtype)[:, ::2])  # non-contiguous view
    copies = [x.copy() for x in Xs]
    est = make().fit_clients(Xs)
    for x, c in zip(Xs, copies):
        np.testing.assert_array_equal(x, c)
        assert x.dtype == dtype
    X = np.concatenate(copies)
    X_copy = X.copy()
    est.fit(X, client_ids=np.repeat(np.arange(4), [len(c) for c in copies]))
    est.predict(X)
    np.testing.assert_array_equal(X, X_copy)


@pytest.mark.parametrize("make", ESTIMATORS)
def test_one_client_and_duplicates(make):
    rng = np.random.default_rng(2)
    X = np.repeat(rng.normal(size=(5, 3)), 10, axis=0)  # 5 distinct points, each 10 times
    est = make().fit(X)
    assert est.labels_.shape == (50,)
    # identical rows always share a label
    for i in range(5):
        assert len(set(est.labels_[i * 10:(i + 1) * 10])) == 1


@pytest.mark.parametrize("make", ESTIMATORS)
def test_tiny_clients(make):
    """Clients with fewer rows than local clusters upload their rows as they are."""
    rng = np.random.default_rng(3)
    Xs = [rng.normal(size=(1, 2)), rng.normal(size=(2, 2)) + 5, rng.normal(size=(30, 2)) - 5]
    est = make().fit_clients(Xs)
    assert [len(l) for l in est.client_labels_] == [1, 2, 30]


@pytest.mark.parametrize("make", ESTIMATORS)
def test_predict_checks_features(make):
    est = make().fit_clients(_clients(np.random.default_rng(0)))
    with pytest.raises(ValueError, match="4 features"):
        est.predict(np.ones((3, 5)))
