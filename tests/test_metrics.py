"""fastfc.metrics: hand-computed cases, brute-force references, invariances and error handling."""
import itertools

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.special import logsumexp
from sklearn import metrics as skm

from fastfc import metrics
from fastfc.metrics import (
    calinski_harabasz_score,
    clustering_accuracy,
    evaluate,
    non_icd_degree,
    purity_score,
    silhouette_score,
)


# ---------------------------------------------------------------------------
# purity and accuracy: hand-computed cases
# ---------------------------------------------------------------------------

HAND_CASES = [
    # y_true=[0,0,0,1,1,2], y_pred=[1,1,0,0,0,2]
    # contingency (rows: classes 0,1,2; cols: clusters 0,1,2)
    #        c0 c1 c2
    #   t0 [  1  2  0 ]
    #   t1 [  2  0  0 ]
    #   t2 [  0  0  1 ]
    # purity = column maxima 2+2+1 = 5 -> 5/6
    # accuracy: c1->t0 (2), c0->t1 (2), c2->t2 (1) = 5 -> 5/6
    ([0, 0, 0, 1, 1, 2], [1, 1, 0, 0, 0, 2], 5 / 6, 5 / 6),
    # more clusters than classes: y_true=[0,0,0,0,1,1], y_pred=[0,0,1,1,2,2]
    #        c0 c1 c2
    #   t0 [  2  2  0 ]
    #   t1 [  0  0  2 ]
    # purity = 2+2+2 = 6 -> 1.0 (every cluster is pure)
    # accuracy: only one of c0/c1 can take t0: 2 + (c2->t1) 2 = 4 -> 2/3
    ([0, 0, 0, 0, 1, 1], [0, 0, 1, 1, 2, 2], 1.0, 2 / 3),
    # equal counts, two clusters dominated by the same class: y_true=[0,0,0,0,0,1], y_pred=[0,0,0,1,1,1]
    #        c0 c1
    #   t0 [  3  2 ]
    #   t1 [  0  1 ]
    # purity = 3+2 = 5 -> 5/6
    # accuracy: (c0->t0, c1->t1) = 3+1 = 4 beats (c1->t0, c0->t1) = 2+0 -> 4/6
    ([0, 0, 0, 0, 0, 1], [0, 0, 0, 1, 1, 1], 5 / 6, 4 / 6),
    # the largest cell is not in the optimal matching: y_true=[0,0,0,0,0,0,1,1], y_pred=[0,0,0,1,1,1,0,0]
    #        c0 c1
    #   t0 [  3  3 ]
    #   t1 [  2  0 ]
    # purity = 3+3 = 6 -> 6/8
    # accuracy: (c0->t0, c1->t1) = 3+0 = 3 < (c1->t0, c0->t1) = 3+2 = 5 -> 5/8
    ([0, 0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 1, 0, 0], 6 / 8, 5 / 8),
    # fewer clusters than classes: y_true=[0,0,1,1,2,2], y_pred=[0,0,0,0,1,1]
    #        c0 c1
    #   t0 [  2  0 ]
    #   t1 [  2  0 ]
    #   t2 [  0  2 ]
    # purity = 2+2 = 4 -> 4/6; accuracy: c0->t0 or t1 (2) + c1->t2 (2) = 4 -> 4/6; one class is unmatched
    ([0, 0, 1, 1, 2, 2], [0, 0, 0, 0, 1, 1], 4 / 6, 4 / 6),
    # noise label -1 is an ordinary cluster: y_true=[0,0,1,1,1], y_pred=[-1,0,1,1,-1]
    #        c-1 c0 c1
    #   t0 [  1   1  0 ]
    #   t1 [  1   0  2 ]
    # purity = 1+1+2 = 4 -> 4/5; accuracy: c0->t0 (1) + c1->t1 (2) = 3 -> 3/5
    ([0, 0, 1, 1, 1], [-1, 0, 1, 1, -1], 4 / 5, 3 / 5),
]


@pytest.mark.parametrize("y_true, y_pred, purity, acc", HAND_CASES)
def test_hand_computed(y_true, y_pred, purity, acc):
    assert purity_score(y_true, y_pred) == pytest.approx(purity, abs=1e-12)
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(acc, abs=1e-12)


def test_contingency_table():
    C = metrics._contingency(np.array([0, 0, 0, 1, 1, 2]), np.array([1, 1, 0, 0, 0, 2]))
    np.testing.assert_array_equal(C, [[1, 2, 0], [2, 0, 0], [0, 0, 1]])


def test_perfect_clustering_is_one():
    y = np.array([3, 3, 1, 1, 1, 7, 7])
    renamed = np.array([0, 0, 5, 5, 5, 2, 2])  # same partition, other names
    for y_pred in (y, renamed):
        assert purity_score(y, y_pred) == 1.0
        assert clustering_accuracy(y, y_pred) == 1.0
        assert evaluate(y, y_pred) == {"purity": 1.0, "acc": 1.0, "ari": 1.0, "nmi": 1.0}


def test_single_cluster_and_singletons():
    y_true = np.array([0, 0, 0, 1, 2, 2])  # class sizes 3, 1, 2
    # one cluster: purity = accuracy = largest class / n
    assert purity_score(y_true, np.zeros(6)) == pytest.approx(3 / 6)
    assert clustering_accuracy(y_true, np.zeros(6)) == pytest.approx(3 / 6)
    # one cluster per sample: purity is 1, accuracy matches one sample per class
    assert purity_score(y_true, np.arange(6)) == 1.0
    assert clustering_accuracy(y_true, np.arange(6)) == pytest.approx(3 / 6)


@pytest.mark.parametrize("seed", range(3))
def test_label_permutation_invariance(seed):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 4, size=60)
    y_pred = rng.integers(0, 6, size=60)
    base = (purity_score(y_true, y_pred), clustering_accuracy(y_true, y_pred))
    perm_true = rng.permutation(4)
    perm_pred = rng.permutation(6) + 10
    names = np.array(["a", "b", "c", "d"])
    for yt, yp in [
        (perm_true[y_true], y_pred),
        (y_true, perm_pred[y_pred]),
        (perm_true[y_true], perm_pred[y_pred]),
        (names[y_true], perm_pred[y_pred]),  # string class names
    ]:
        assert purity_score(yt, yp) == pytest.approx(base[0], abs=1e-12)
        assert clustering_accuracy(yt, yp) == pytest.approx(base[1], abs=1e-12)
    # reordering the samples changes nothing either
    order = rng.permutation(60)
    assert purity_score(y_true[order], y_pred[order]) == pytest.approx(base[0], abs=1e-12)
    assert clustering_accuracy(y_true[order], y_pred[order]) == pytest.approx(base[1], abs=1e-12)


def _accuracy_bruteforce(y_true, y_pred):
    """Reference: try every one-to-one map of clusters to classes (padded to a square table)."""
    classes = np.unique(y_true)
    clusters = np.unique(y_pred)
    k = max(len(classes), len(clusters))
    C = np.zeros((k, k), dtype=int)
    for t, p in zip(y_true, y_pred):
        C[np.searchsorted(classes, t), np.searchsorted(clusters, p)] += 1
    best = max(sum(C[i, perm[i]] for i in range(k)) for perm in itertools.permutations(range(k)))
    return best / len(y_true)


def _purity_bruteforce(y_true, y_pred):
    total = 0
    for c in np.unique(y_pred):
        members = y_true[y_pred == c]
        total += max(np.sum(members == t) for t in np.unique(members))
    return total / len(y_true)


@pytest.mark.parametrize("seed", range(20))
def test_against_bruteforce(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 25))
    k_true, k_pred = rng.integers(1, 6, size=2)
    y_true = rng.integers(0, k_true, size=n)
    y_pred = rng.integers(0, k_pred, size=n)
    acc = clustering_accuracy(y_true, y_pred)
    purity = purity_score(y_true, y_pred)
    assert acc == pytest.approx(_accuracy_bruteforce(y_true, y_pred), abs=1e-12)
    assert purity == pytest.approx(_purity_bruteforce(y_true, y_pred), abs=1e-12)
    # one-to-one matching can only lose against "each cluster takes its majority class"
    assert 0 < acc <= purity + 1e-12 <= 1 + 1e-12


# ---------------------------------------------------------------------------
# silhouette and Calinski-Harabasz wrappers
# ---------------------------------------------------------------------------

def _two_blobs(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n, 2)), rng.normal(size=(n, 2)) + 6])
    return X, np.repeat([0, 1], n)


def test_internal_scores_match_sklearn():
    X, labels = _two_blobs()
    assert silhouette_score(X, labels) == pytest.approx(skm.silhouette_score(X, labels), rel=1e-12)
    expected_ch = skm.calinski_harabasz_score(X, labels)
    assert calinski_harabasz_score(X, labels) == pytest.approx(expected_ch, rel=1e-12)


def test_internal_scores_nan_when_undefined():
    X, _ = _two_blobs(n=5)
    for labels in (np.zeros(10, dtype=int), np.arange(10)):  # one cluster; one cluster per sample
        assert np.isnan(silhouette_score(X, labels))
        assert np.isnan(calinski_harabasz_score(X, labels))
    assert np.isnan(silhouette_score(X[:1], [0]))


def test_silhouette_subsamples_large_inputs(monkeypatch):
    assert metrics.SILHOUETTE_MAX_SAMPLES == 20000
    monkeypatch.setattr(metrics, "SILHOUETTE_MAX_SAMPLES", 30)  # stand-in for 20000 to keep the test fast
    X, labels = _two_blobs(n=50, seed=1)  # 100 rows > 30
    a = silhouette_score(X, labels, random_state=3)
    assert a == silhouette_score(X, labels, random_state=3)  # deterministic
    assert a != silhouette_score(X, labels, random_state=4)  # but really a subsample
    # the same rows scikit-learn draws for sample_size=30
    assert a == pytest.approx(skm.silhouette_score(X, labels, sample_size=30, random_state=3), rel=1e-12)
    # an explicit sample_size >= n gives the exact score
    assert silhouette_score(X, labels, sample_size=100) == pytest.approx(skm.silhouette_score(X, labels))


def test_silhouette_bad_arguments():
    X, labels = _two_blobs(n=5)
    with pytest.raises(ValueError, match="sample_size"):
        silhouette_score(X, labels, sample_size=0)
    with pytest.raises(ValueError, match="rows"):
        silhouette_score(X[:-1], labels)
    with pytest.raises(ValueError, match="rows"):
        calinski_harabasz_score(X, labels[:-1])


# ---------------------------------------------------------------------------
# evaluate
# ---------------------------------------------------------------------------

def test_evaluate_matches_individual_functions():
    rng = np.random.default_rng(7)
    X, y_true = _two_blobs(n=30, seed=7)
    y_pred = np.where(rng.random(60) < 0.1, 2, y_true)  # some noise in a third cluster
    scores = evaluate(y_true, y_pred)
    assert list(scores) == ["purity", "acc", "ari", "nmi"]
    full = evaluate(y_true, y_pred, X)
    assert list(full) == ["purity", "acc", "ari", "nmi", "silhouette", "calinski_harabasz"]
    expected = {
        "purity": purity_score(y_true, y_pred),
        "acc": clustering_accuracy(y_true, y_pred),
        "ari": skm.adjusted_rand_score(y_true, y_pred),
        "nmi": skm.normalized_mutual_info_score(y_true, y_pred, average_method="arithmetic"),
        "silhouette": skm.silhouette_score(X, y_pred),
        "calinski_harabasz": skm.calinski_harabasz_score(X, y_pred),
    }
    for key, value in full.items():
        assert isinstance(value, float)
        assert value == pytest.approx(expected[key], rel=1e-12)
        if key in scores:
            assert scores[key] == value
    assert full["acc"] < 1.0 and full["ari"] < 1.0


def test_evaluate_single_cluster_gives_nan_internal_scores():
    X, y_true = _two_blobs(n=5)
    scores = evaluate(y_true, np.zeros(10), X)
    assert scores["purity"] == 0.5 and scores["acc"] == 0.5
    assert np.isnan(scores["silhouette"]) and np.isnan(scores["calinski_harabasz"])


def test_reexports():
    assert metrics.adjusted_rand_score is skm.adjusted_rand_score
    assert metrics.normalized_mutual_info_score is skm.normalized_mutual_info_score
    for name in metrics.__all__:
        assert hasattr(metrics, name)


# ---------------------------------------------------------------------------
# errors on labels
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("func", [purity_score, clustering_accuracy, evaluate])
@pytest.mark.parametrize(
    "y_true, y_pred, match",
    [
        ([0, 1, 1], [0, 1], "different lengths"),
        ([], [], "empty"),
        ([[0, 1], [1, 0]], [[0, 1], [1, 0]], "1-D"),
        ([0, 1], [[0], [1]], "1-D"),
        (None, [0, 1], "None"),
    ],
    ids=["length", "empty", "2d", "column", "none"],
)
def test_label_errors(func, y_true, y_pred, match):
    with pytest.raises(ValueError, match=match):
        func(y_true, y_pred)


# ---------------------------------------------------------------------------
# Non-ICD degree
# ---------------------------------------------------------------------------

def _phi_reference(clients, h, points):
    """Direct NumPy transcription of Eqs. 1-4: Gaussian KDE, normalise, base-2 JS distance, mean over pairs."""
    d = points.shape[1]
    P = []
    for Xc in clients:
        sq = ((points[:, None, :] - Xc[None, :, :]) ** 2).sum(-1)
        dens = np.exp(-sq / (2 * h**2)).sum(1) / (len(Xc) * h**d * (2 * np.pi) ** (d / 2))
        P.append(dens / dens.sum())
    pairs = itertools.combinations(range(len(clients)), 2)
    return float(np.mean([jensenshannon(P[a], P[b], base=2) for a, b in pairs]))


def _overlap_clients(seed=0):
    """Three 2-D clients over blobs A, B, C (partial overlap).

    Client 0 holds A+B, client 1 B+C, client 2 A+C; 15 points per blob.
    """
    rng = np.random.default_rng(seed)
    centres = {"A": (0.0, 0.0), "B": (4.0, 0.0), "C": (0.0, 4.0)}
    holdings = [("A", "B"), ("B", "C"), ("A", "C")]
    return [np.vstack([rng.normal(size=(15, 2)) + centres[b] for b in held]) for held in holdings]


def test_phi_matches_direct_formula():
    clients = _overlap_clients()
    union = np.vstack(clients)
    expected = _phi_reference(clients, 0.7, union)
    assert non_icd_degree(clients, bandwidth=0.7) == pytest.approx(expected, rel=1e-9)
    grid = np.array([[0.0, 0.0], [2.0, 2.0], [4.0, 0.0]])
    got = non_icd_degree(clients, bandwidth=0.7, eval_points=grid)
    assert got == pytest.approx(_phi_reference(clients, 0.7, grid), rel=1e-9)


def test_phi_identical_clients_with_cv_bandwidth():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    # the one test of the cross-validated bandwidth: same data -> same bandwidth -> same density
    assert non_icd_degree([X, X.copy(), X[::-1].copy()]) < 0.05
    assert non_icd_degree([X, X.copy()], random_state=0) < 0.05


def test_phi_disjoint_clients_near_one():
    rng = np.random.default_rng(1)
    clients = [rng.normal(size=(25, 2)) + shift for shift in (0.0, 50.0, 100.0)]
    assert non_icd_degree(clients, bandwidth=0.5) > 0.9


def test_phi_partial_overlap_strictly_between():
    clients = _overlap_clients()
    phi = non_icd_degree(clients, bandwidth=0.7)
    same = non_icd_degree([clients[0], clients[0].copy()], bandwidth=0.7)
    apart = non_icd_degree([clients[0], clients[1] + 100.0], bandwidth=0.7)
    assert same < 0.05 and apart > 0.9
    assert 0.2 < phi < 0.8


def test_phi_symmetric_in_client_order():
    clients = _overlap_clients(seed=3)
    ref = non_icd_degree(clients, bandwidth=0.7)
    for order in itertools.permutations(range(3)):
        reordered = [clients[i] for i in order]
        assert non_icd_degree(reordered, bandwidth=0.7) == pytest.approx(ref, rel=1e-10)
    # per-client bandwidths travel with their clients
    bws = np.array([0.5, 0.7, 0.9])
    ref_bw = non_icd_degree(clients, bandwidth=bws)
    assert non_icd_degree(clients[::-1], bandwidth=bws[::-1]) == pytest.approx(ref_bw, rel=1e-10)


def test_phi_marginal_mode():
    clients = _overlap_clients()
    phi = non_icd_degree(clients, mode="marginal", bandwidth=0.7)
    assert 0.0 < phi < 1.0
    # the mean over features of the 1-D version
    per_feature = [non_icd_degree([c[:, [j]] for c in clients], bandwidth=0.7) for j in range(2)]
    assert phi == pytest.approx(np.mean(per_feature), rel=1e-10)
    # with one feature, marginal and joint coincide
    one_d = [c[:, :1] for c in clients]
    assert non_icd_degree(one_d, mode="marginal", bandwidth=0.7) == pytest.approx(
        non_icd_degree(one_d, bandwidth=0.7), rel=1e-12
    )


def test_phi_single_client_is_zero():
    assert non_icd_degree([np.ones((5, 2))]) == 0.0


def test_phi_js_helper_matches_scipy_and_handles_underflow():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(4, 30)) * 3
    logits[3, :15] = -2000.0  # densities that underflow to exactly 0 in linear space
    log_P = logits - logsumexp(logits, axis=1, keepdims=True)
    P = np.exp(log_P)
    expected = np.mean([jensenshannon(P[a], P[b], base=2) for a, b in itertools.combinations(range(4), 2)])
    assert metrics._mean_pairwise_js(log_P) == pytest.approx(expected, rel=1e-10)
    assert metrics._mean_pairwise_js(np.vstack([log_P[0], log_P[0]])) == 0.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mode="joint-ish"), "mode"),
        (dict(eval_points="global"), "eval_points"),
        (dict(eval_points=np.zeros((3, 5))), "features"),
        (dict(bandwidth=0.0), "bandwidth"),
        (dict(bandwidth=[0.5, 0.5, 0.5]), "bandwidth"),  # 3 values for 2 clients
        (dict(cv=1), "cv"),
    ],
)
def test_phi_bad_options(kwargs, match):
    clients = [np.zeros((4, 2)), np.ones((4, 2))]
    with pytest.raises(ValueError, match=match):
        non_icd_degree(clients, **kwargs)


def test_phi_bad_clients():
    with pytest.raises(ValueError, match="feature"):
        non_icd_degree([np.zeros((4, 2)), np.zeros((4, 3))], bandwidth=1.0)
    with pytest.raises(ValueError, match="empty"):
        non_icd_degree([], bandwidth=1.0)
    with pytest.raises(ValueError, match="empty"):
        non_icd_degree([np.zeros((4, 2)), np.zeros((0, 2))], bandwidth=1.0)
    with pytest.raises(ValueError, match="single row"):
        non_icd_degree([np.zeros((4, 2)), np.zeros((1, 2))])
    # a fixed bandwidth makes a one-row client fine
    assert 0.0 <= non_icd_degree([np.zeros((4, 2)), np.zeros((1, 2))], bandwidth=1.0) <= 1.0
