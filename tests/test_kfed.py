"""k-FED: building blocks against references, the estimator end to end, and parity with the published code."""
import json
import warnings
from collections import defaultdict

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, v_measure_score

from fastfc import KFed
from fastfc.kfed import KFedReply, KFedSummary, d2_seeding, farthest_first_seeds, local_awasthi_sheffet
from fastfc.protocol import MessageError, decode_message

from conftest import load_split, shared_file


def test_farthest_first_on_a_line():
    U = np.array([[0.0], [1.0], [10.0], [4.0], [9.0]])
    # start from point 0; farthest is 10 (idx 2); then farthest from {0, 10}: 4 (dist 4) vs 1 (1) vs 9 (1) -> idx 3
    np.testing.assert_array_equal(farthest_first_seeds(U, np.array([0]), 3), [0, 2, 3])
    # the whole first client is kept even when it has several centres
    np.testing.assert_array_equal(farthest_first_seeds(U, np.array([1, 4]), 3), [1, 4, 3])


def test_farthest_first_matches_bruteforce():
    rng = np.random.default_rng(0)
    U = rng.normal(size=(40, 3))
    got = farthest_first_seeds(U, np.array([5, 6]), 10)
    chosen = [5, 6]
    while len(chosen) < 10:
        rest = [i for i in range(40) if i not in chosen]
        dmin = [min(np.sum((U[i] - U[c]) ** 2) for c in chosen) for i in rest]
        chosen.append(rest[int(np.argmax(dmin))])
    np.testing.assert_array_equal(got, chosen)


def test_d2_seeding_distances_and_duplicates():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(50, 3))
    seeds, sq = d2_seeding(A, 5, rng)
    ref = ((A[:, None, :] - seeds[None]) ** 2).sum(2)
    np.testing.assert_allclose(sq, ref, rtol=1e-12, atol=1e-12)
    assert len({tuple(s) for s in seeds}) == 5  # distinct rows: D^2 never re-picks a seed
    # all rows identical: seeding still returns k (duplicate) seeds without dividing by zero
    seeds, sq = d2_seeding(np.ones((6, 2)), 3, rng)
    assert seeds.shape == (3, 2) and np.all(sq == 0)


def test_d2_seeding_follows_d2_distribution():
    """Second seed probabilities are proportional to squared distance to the first."""
    A = np.array([[0.0], [1.0], [3.0]])
    counts = np.zeros(3)
    rng = np.random.default_rng(2)
    n = 6000
    for _ in range(n):
        seeds, _ = d2_seeding(A, 2, rng)
        if seeds[0, 0] == 0.0:
            counts[int(np.where(A[:, 0] == seeds[1, 0])[0][0])] += 1
    p = counts / counts.sum()
    # from x=0: squared distances 0, 1, 9 -> probabilities 0, 0.1, 0.9
    np.testing.assert_allclose(p, [0.0, 0.1, 0.9], atol=0.03)


def test_local_as_recovers_blobs(federated_blobs):
    X_clients, y_clients = federated_blobs
    rng = np.random.default_rng(0)
    centers, labels = local_awasthi_sheffet(X_clients[1], 3, rng)
    assert centers.shape == (3, 3)
    assert v_measure_score(y_clients[1], labels) == pytest.approx(1.0)


def test_local_as_small_client_returns_rows():
    X = np.arange(6.0).reshape(3, 2)
    centers, labels = local_awasthi_sheffet(X, 4, np.random.default_rng(0))
    np.testing.assert_array_equal(centers, X)
    np.testing.assert_array_equal(labels, [0, 1, 2])


@pytest.mark.parametrize("assign", ["induced", "nearest"])
def test_kfed_recovers_blobs(federated_blobs, assign):
    X_clients, y_clients = federated_blobs
    # induced labels inherit the local clustering, which federated units run in each client's own
    # standardised units: a client holding two blobs that differ in one feature over-weights the others
    units = None if assign == "induced" else "federated"
    est = KFed(n_clusters=4, n_local_clusters=3, assign=assign, units=units, random_state=0).fit_clients(X_clients)
    y = np.concatenate(y_clients)
    assert v_measure_score(y, est.labels_) == pytest.approx(1.0)
    assert est.cluster_centers_.shape == (4, 3)
    assert [len(l) for l in est.client_labels_] == [len(x) for x in X_clients]
    assert est.labels_.dtype == np.int32
    assert set(est.timings_) == {"client", "server", "assign", "total"}


def test_fit_with_client_ids_matches_fit_clients(federated_blobs):
    X_clients, _ = federated_blobs
    X = np.concatenate(X_clients)
    ids = np.repeat(np.array(["a", "b", "c"]), [len(x) for x in X_clients])
    perm = np.random.default_rng(3).permutation(len(X))
    Xp, idp = X[perm], ids[perm]
    # fit() keeps each client's rows in their input order, so the same clients in that
    # order through fit_clients give the same model; labels come back in input order
    a = KFed(n_clusters=4, random_state=7).fit_clients([Xp[idp == c] for c in ("a", "b", "c")])
    b = KFed(n_clusters=4, random_state=7).fit(Xp, client_ids=idp)
    np.testing.assert_array_equal(b.cluster_centers_, a.cluster_centers_)
    for c, lab in zip(("a", "b", "c"), a.client_labels_):
        np.testing.assert_array_equal(b.labels_[idp == c], lab)


def test_protocol_phases_over_bytes_match_fit_clients(federated_blobs):
    """Run the three phases by hand with every message serialised: the labels are the in-process ones."""
    X_clients, _ = federated_blobs
    est = KFed(n_clusters=4, random_state=11)
    ref = KFed(n_clusters=4, random_state=11).fit_clients(X_clients)
    ups, states = [], []
    for i, X in enumerate(X_clients):
        summary, state = est.client_summarize(X, client_index=i)
        ups.append(KFedSummary.from_bytes(summary.to_bytes()))
        states.append(state)
    model, replies = est.server_aggregate(ups)
    for i, X in enumerate(X_clients):
        reply = decode_message(replies[i].to_bytes(), method="kfed", kind="reply")
        np.testing.assert_array_equal(est.client_assign(X, states[i], reply), ref.client_labels_[i])
    np.testing.assert_array_equal(model.centers, ref.cluster_centers_)


def test_reply_for_another_client_rejected(federated_blobs):
    X_clients, _ = federated_blobs
    est = KFed(n_clusters=4, random_state=0)
    summary, state = est.client_summarize(X_clients[0], client_index=0)
    bad = KFedReply(centers=np.zeros((4, 3)), local_to_global=np.array([0]), n_features=3)
    with pytest.raises(MessageError, match="local_to_global"):
        est.client_assign(X_clients[0], state, bad)
    with pytest.raises(MessageError, match="summary 0 is a KFedReply"):
        est.server_aggregate([bad])


def test_determinism_and_thread_invariance():
    rng = np.random.default_rng(5)
    X_clients = [rng.normal(size=(200, 6)) + i for i in range(5)]
    runs = [KFed(n_clusters=6, random_state=3, n_jobs=j).fit_clients(X_clients) for j in (1, 2, 1, -1)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r.labels_, runs[0].labels_)
        np.testing.assert_array_equal(r.cluster_centers_, runs[0].cluster_centers_)
    other = KFed(n_clusters=6, random_state=4).fit_clients(X_clients)
    assert not np.array_equal(other.cluster_centers_, runs[0].cluster_centers_)


def test_centres_bit_identical_for_any_n_jobs_on_multi_chunk_clients():
    """Clients large enough for scikit-learn's Lloyd to split its work over OpenMP threads
    (whose count is per calling thread): centres must still not depend on n_jobs. Without
    pinning the k-means to one OpenMP thread they differ in the last bits here."""
    rng = np.random.default_rng(5)
    X_clients = [rng.normal(size=(3000, 6)) + i for i in range(3)]
    runs = [KFed(n_clusters=6, random_state=3, n_jobs=j).fit_clients(X_clients) for j in (1, 2, 3)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r.labels_, runs[0].labels_)
        np.testing.assert_array_equal(r.cluster_centers_, runs[0].cluster_centers_)


def test_predict_nearest_matches_labels(federated_blobs):
    X_clients, _ = federated_blobs
    est = KFed(n_clusters=4, assign="nearest", random_state=0).fit_clients(X_clients)
    np.testing.assert_array_equal(est.predict(np.concatenate(X_clients)), est.labels_)


def test_reference_semantics_single_client_equals_kmeans_of_local_centres():
    """One client with k' = k: the server Lloyd on k local centres returns them unchanged."""
    rng = np.random.default_rng(8)
    X = np.vstack([rng.normal(c, 0.2, size=(30, 2)) for c in (0, 4, 8)])
    est = KFed(n_clusters=3, n_local_clusters=3, seed_client="first", server_max_iter=None, random_state=0).fit(X)
    np.testing.assert_allclose(np.sort(est.cluster_centers_[:, 0]), np.sort(est.client_summaries_[0].centers[:, 0]))


def test_too_few_local_centres():
    X_clients = [np.random.default_rng(0).normal(size=(30, 2)) for _ in range(2)]
    with pytest.raises(ValueError, match="at least n_clusters=5 local centres"):
        KFed(n_clusters=5, n_local_clusters=2).fit_clients(X_clients)
    # k' > k is allowed (local over-clustering)
    assert KFed(n_clusters=2, n_local_clusters=3, random_state=0).fit_clients(X_clients).cluster_centers_.shape == (2, 2)


def _reference_means():
    path = shared_file("reference_results", "kfed_ref.jsonl")
    out = defaultdict(list)
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        out[rec["dataset"]].append(rec["ari"])
    return {k: float(np.mean(v)) for k, v in out.items()}


@pytest.mark.parametrize("split", ["US", "EC", "VE", "EP", "CA"])
def test_parity_with_published_kfed(split):
    """Mean ARI over 40 seeds, settings of the published code, within 0.02 of its mean over seeds 0-9.

    40 seeds (not 10) because the seed-to-seed std of ARI on these splits is 0.02-0.06, which
    makes a 10-seed mean itself uncertain by up to +-0.02; the published code's own RNG stream
    cannot be reproduced, so only the distributions can be compared.
    """
    ref = _reference_means()[split]
    X_clients, y_clients = load_split(split)
    y = np.concatenate(y_clients)
    k = int(np.unique(y).size)
    aris = []
    for seed in range(40):
        est = KFed(k, n_local_clusters=min(k, X_clients[0].shape[1]), seed_client="first", server_init="farthest-first",
                   server_max_iter=None, assign="nearest", units=None, local_n_init=1, random_state=seed)
        aris.append(adjusted_rand_score(y, est.fit_clients(X_clients).labels_))
    assert abs(np.mean(aris) - ref) <= 0.02, (np.mean(aris), ref)  # neither worse nor a different algorithm


@pytest.mark.parametrize("case", range(12))
def test_server_kmeans_direct_path_equals_the_estimator(case):
    # the server's k-means without KMeans' per-call validation: the same bits as KMeans.fit
    from fastfc.kfed import server_kmeans

    rng = np.random.default_rng(case)
    k, d = int(rng.integers(1, 9)), int(rng.integers(1, 8))
    U = rng.normal(size=(int(rng.integers(k, 60)), d)) * 10 ** float(rng.integers(-3, 4))
    if case % 4 == 0:
        U[: U.shape[0] // 2] = U[0]  # duplicates: clusters may end empty (the same ConvergenceWarning)
    init = U[rng.choice(U.shape[0], size=k, replace=False)] if case % 2 else "k-means++"
    params = dict(n_init=1 if case % 2 else 10, max_iter=300 if case % 3 else 1, tol=1e-4 if case % 3 else 0.0,
                  random_state=case)
    with warnings.catch_warnings(record=True) as w_direct:
        warnings.simplefilter("always")
        got = server_kmeans(U, k, init, **params)
    with warnings.catch_warnings(record=True) as w_est:
        warnings.simplefilter("always")
        ref = server_kmeans(U, k, init, use_estimator=True, **params)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
    assert got[2] == ref[2]
    assert [type(w.message) for w in w_direct] == [type(w.message) for w in w_est]
