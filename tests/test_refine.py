"""Refinement rounds (federated Lloyd after any one-shot method) and FedKMeans."""
from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from fastfc import FeCA, FedHIRE, FedKMeans, FedKStarHC, GOLD, KFed
from fastfc._refine import RefineCenters, RefineChainCenters, RefineChainStats, RefineStats
from fastfc.base import ClientState
from fastfc.datasets import SanityCase, make_sanity_case
from fastfc.protocol import MessageError, decode_message

ESTIMATORS = [KFed, FeCA, FedHIRE, GOLD, FedKStarHC]
EPS = np.finfo(np.float64).eps


def _blobs(seed=0, n=900, d=4, k=5, spread=1.6, scales=None):
    """Overlapping Gaussian blobs (Lloyd has work to do), optionally with per-feature units."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 4, (k, d))
    y = rng.integers(0, k, n)
    X = centers[y] + rng.normal(0, spread, (n, d))
    if scales is not None:
        X = X * scales
    return X, y


def _split(X, n_clients, seed=0):
    cid = np.random.default_rng(seed).integers(0, n_clients, X.shape[0])
    return [X[cid == i] for i in range(n_clients)]


def _nearest(X, C, w=None):
    """Exact nearest centre (ties to the lowest index), in weighted units."""
    diff = X[:, None, :] - C[None, :, :]
    if w is not None:
        diff = diff * w
    return np.argmin((diff * diff).sum(axis=2), axis=1)


def _reference_refinement(Xc, one_shot, rounds, weight):
    """Centralised Lloyd on the pooled rows, as the refinement defines it: round 1 = the means of the
    one-shot clusters; each later round = nearest centre, then means (an empty cluster keeps its centre)."""
    X = np.vstack(Xc)
    labels = np.concatenate(one_shot)
    C = None
    for r in range(1, rounds + 1):
        if r > 1:
            labels = _nearest(X, C, weight)
        k = C.shape[0] if C is not None else int(labels.max()) + 1
        newC = np.zeros((k, X.shape[1])) if C is None else C.copy()
        for c in range(k):
            if (labels == c).any():
                newC[c] = X[labels == c].mean(axis=0)
        C = newC
    return C, _nearest(X, C, weight)


@pytest.mark.parametrize("n_clients", [1, 4])
@pytest.mark.parametrize("units", [None, "federated"])
def test_refinement_equals_centralised_lloyd_from_the_same_start(n_clients, units):
    """KFed + R refinement rounds equals R centralised Lloyd steps on the pooled rows started from
    KFed's one-shot clusters: the same labels, and centres equal up to the summation order.

    Bound: the federated sum of a cluster's n_c rows and NumPy's differ only in the order of the
    additions; any order of recursive summation errs by at most (n_c - 1) * u * sum|x| <= n_c^2 * u * max|x|
    (u = eps / 2), so the two means differ by at most n_c * eps * max|x| per coordinate, plus the
    rounding of the division. With identical labels every round starts from the same partition, so
    errors do not accumulate across rounds; we check n * 8 * eps * max|x| (n >= n_c, 8 covers the
    division and the centred accumulation of round 1)."""
    X, _ = _blobs(1)
    Xc = _split(X, n_clients, 1)
    one = KFed(n_clusters=5, units=units, random_state=2).fit_clients(Xc)
    est = KFed(n_clusters=5, units=units, refine_rounds=6, refine_tol=0.0, random_state=2).fit_clients(Xc)
    R = est.n_refine_rounds_
    assert R >= 2  # the one-shot start is not a Lloyd fixed point on these overlapping blobs
    C, labels = _reference_refinement(Xc, one.client_labels_, R, est.feature_weight_)
    np.testing.assert_array_equal(np.concatenate(est.client_labels_), labels)
    bound = 8 * EPS * np.abs(X).max() * X.shape[0]
    assert np.abs(est.cluster_centers_ - C).max() <= bound
    # the refinement moved the centres and lowered the (weighted) inertia round after round
    inertia = est.refine_history_["inertia"][1:]
    assert np.isnan(est.refine_history_["inertia"][0])
    assert np.all(np.diff(inertia) <= 1e-9 * inertia[0])


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_refinement_zero_is_the_one_shot_fit(cls):
    X, _ = _blobs(2, n=400)
    Xc = _split(X, 3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = cls(n_clusters=5, random_state=0).fit_clients(Xc)
        b = cls(n_clusters=5, refine_rounds=0, random_state=0).fit_clients(Xc)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.n_rounds_ == 1 and not hasattr(a, "refine_history_")
    # one-shot accounting: one upload and one reply per client
    assert a.bytes_up_.shape == (1, 3)
    np.testing.assert_array_equal(a.bytes_up_[0], [s.wire_size for s in a.client_summaries_])
    np.testing.assert_array_equal(a.bytes_up_[0], [len(s.to_bytes()) for s in a.client_summaries_])


@pytest.mark.parametrize("cls", ESTIMATORS + [FedKMeans])
def test_refinement_keeps_well_separated_clusters_whatever_the_units(cls):
    """Sanity (issue 12) survives refinement: per-feature units spread over 10^4, label skew."""
    Xc, yc = make_sanity_case(SanityCase(n_clusters=5, n_features=10, n_clients=10, rows_per_client=60,
                                         split="dirichlet", scale=1e3, feature_spread=1e4, degenerate=None, seed=0))
    kw = {"max_rounds": 5} if cls is FedKMeans else {"refine_rounds": 5}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = cls(n_clusters=5, random_state=0, **kw).fit_clients(Xc)
    assert adjusted_rand_score(np.concatenate(yc), est.labels_) >= 0.99
    # predict uses the refined centres and units: the fitted rows get their labels back
    np.testing.assert_array_equal(est.predict(np.vstack(Xc)), est.labels_)


def test_stop_rule_and_wire_contents():
    X, _ = _blobs(3)
    Xc = _split(X, 5, 3)
    loose = KFed(n_clusters=5, refine_rounds=10, refine_tol=1e6, random_state=0).fit_clients(Xc)
    assert loose.n_refine_rounds_ == 1 and loose.n_rounds_ == 2
    tight = KFed(n_clusters=5, refine_rounds=50, refine_tol=0.0, random_state=0).fit_clients(Xc)
    # with tol 0 the server stops exactly when no centre moves any more (Lloyd converges in finitely many steps)
    assert tight.n_refine_rounds_ < 50 and tight.refine_history_["center_shift"][-1] == 0.0
    # what crosses per refinement round: k (d + 2) numbers up plus 3 d moments in round 1; k d + d down
    k, d = 5, X.shape[1]
    up1 = RefineStats(counts=np.zeros(k, np.int64), sums=np.zeros((k, d)), inertia=np.zeros(0),
                      feature_stats=np.zeros((3, d)), n_features=d).addressed(client=0, round=1)
    assert (tight.bytes_up_[1] == up1.wire_size).all()
    assert (tight.bytes_up_[1] - 8 * (k + k * d + 3 * d) < 400).all()  # a few hundred bytes of header
    assert (tight.bytes_up_[2:] < tight.bytes_up_[1]).all()


def test_refinement_over_the_public_round_api_and_bytes():
    X, _ = _blobs(4)
    Xc = _split(X, 3, 4)
    est = FeCA(n_clusters=5, refine_rounds=3, random_state=7)
    fitted = FeCA(n_clusters=5, refine_rounds=3, random_state=7).fit_clients(Xc)
    ups, states = [], []
    for i, x in enumerate(Xc):
        u, s = est.client_round(x, round=0, client_index=i, random_state=7)
        ups.append(decode_message(u.to_bytes()))
        states.append(ClientState.from_bytes(s.to_bytes()))
    bc, sst, done = est.server_round(ups, round=0, random_state=7)
    r = 0
    while not done:
        r += 1
        out = [est.client_round(x, states[i], decode_message(bc[i].to_bytes()), round=r, random_state=7)
               for i, x in enumerate(Xc)]
        states = [ClientState.from_bytes(s.to_bytes()) for _, s in out]
        bc, sst, done = est.server_round([decode_message(u.to_bytes()) for u, _ in out], sst, round=r,
                                         random_state=7)
    assert isinstance(bc[0], RefineCenters) and bc[0].final
    labels = [est.client_assign(x, states[i], decode_message(bc[i].to_bytes())) for i, x in enumerate(Xc)]
    np.testing.assert_array_equal(np.concatenate(labels), fitted.labels_)
    assert r == fitted.n_rounds_ - 1


@pytest.mark.parametrize("cls", [KFed, FedHIRE, FedKMeans])
def test_refinement_is_deterministic_for_any_thread_count(cls):
    X, _ = _blobs(5, n=1200)
    Xc = _split(X, 4, 5)
    kw = {"max_rounds": 4} if cls is FedKMeans else {"refine_rounds": 4}
    a = cls(n_clusters=5, random_state=1, n_jobs=1, **kw).fit_clients(Xc)
    b = cls(n_clusters=5, random_state=1, n_jobs=2, **kw).fit_clients(Xc)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)


def test_fedkmeans_seeding_from_another_method_equals_its_refinement():
    X, _ = _blobs(6)
    Xc = _split(X, 4, 6)
    a = FedKMeans(n_clusters=5, init=FeCA(n_clusters=99), max_rounds=3, tol=0.0, random_state=3).fit_clients(Xc)
    b = FeCA(n_clusters=5, refine_rounds=3, refine_tol=0.0, random_state=3).fit_clients(Xc)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    with pytest.raises(TypeError, match="init must be"):
        FedKMeans(init=FedKMeans()).fit_clients(Xc)


@pytest.mark.parametrize("init", ["k-means++", FeCA(n_init=2)], ids=["kmeans++", "FeCA"])
def test_fed_kmeans_builds_its_seeder_once_per_fit(init, monkeypatch):
    """One seeder serves every phase of a fit; the result is the one of a fresh seeder per phase call."""
    X, _ = _blobs(8, n=300)
    Xc = _split(X, 3, 8)
    make = FedKMeans._make_seeder
    built = []
    monkeypatch.setattr(FedKMeans, "_make_seeder", lambda self: built.append(1) or make(self))
    params = dict(n_clusters=5, init=init, max_rounds=4, n_init=2, random_state=4, n_jobs=2)
    a = FedKMeans(**params).fit_clients(Xc)
    assert len(built) == 1
    assert not hasattr(a, "_fit_seeder")  # nothing of the fit's seeder outlives the fit
    monkeypatch.setattr(FedKMeans, "_seeder", lambda self: make(self))  # the former way: a seeder per call
    b = FedKMeans(**params).fit_clients(Xc)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    assert a.global_model_.to_bytes() == b.global_model_.to_bytes()
    np.testing.assert_array_equal(a.bytes_up_, b.bytes_up_)
    np.testing.assert_array_equal(a.bytes_down_, b.bytes_down_)


def test_final_broadcast_is_rejected_by_client_round_and_early_one_by_client_assign():
    X, _ = _blobs(7, n=300)
    Xc = _split(X, 2, 7)
    est = KFed(n_clusters=3, refine_rounds=2, random_state=0)
    ups, states = zip(*[est.client_round(x, round=0, client_index=i, random_state=0) for i, x in enumerate(Xc)])
    bc, sst, _ = est.server_round(list(ups), round=0, random_state=0)
    out = [est.client_round(x, states[i], bc[i], round=1, random_state=0) for i, x in enumerate(Xc)]
    bc1, sst1, done = est.server_round([u for u, _ in out], sst, round=1, random_state=0)
    from fastfc.protocol import MessageError

    if not done:
        with pytest.raises(MessageError, match="not final"):
            est.client_assign(Xc[0], out[0][1], bc1[0])
    final = RefineCenters(centers=bc1[0].centers, n_features=bc1[0].n_features, final=True).addressed(client=0, round=1)
    with pytest.raises(MessageError, match="final"):
        est.client_round(Xc[0], out[0][1], final, round=2, random_state=0)


def test_fedkmeans_default_finds_twenty_clusters():
    """Sanity grid, K = 20, seed 1: with one local start most clients merge the closest pair of clusters and
    Lloyd rounds do not split it again (ARI 0.949); the default seeding keeps the best of five local starts."""
    Xc, yc = make_sanity_case(SanityCase(n_clusters=20, seed=1))
    est = FedKMeans(n_clusters=20, random_state=1).fit_clients(Xc)
    assert adjusted_rand_score(np.concatenate(yc), est.labels_) >= 0.99


def test_server_round_names_the_client_whose_upload_does_not_fit():
    """A well-formed refinement upload with the wrong number of clusters is that client's fault, with a clear error."""
    from fastfc.protocol import MessageError

    X, _ = _blobs(8, n=300)
    Xc = _split(X, 2, 8)
    est = KFed(n_clusters=3, refine_rounds=2, random_state=0)
    ups, states = zip(*[est.client_round(x, round=0, client_index=i, random_state=0) for i, x in enumerate(Xc)])
    bc, sst, _ = est.server_round(list(ups), round=0, random_state=0)
    out = [est.client_round(x, states[i], bc[i], round=1, random_state=0)[0] for i, x in enumerate(Xc)]
    u = out[1]
    bad = RefineStats(counts=np.append(u.counts, 0), sums=np.vstack([u.sums, np.zeros((1, u.n_features))]),
                      inertia=u.inertia, feature_stats=u.feature_stats, n_features=u.n_features).addressed(client=1, round=1)
    with pytest.raises(MessageError, match="client 1: its round-1 refinement upload has 4 clusters"):
        est.server_round([out[0], bad], sst, round=1, random_state=0)
    no_moments = RefineStats(counts=u.counts, sums=u.sums, inertia=u.inertia, feature_stats=np.zeros((0, u.n_features)),
                             n_features=u.n_features).addressed(client=1, round=1)
    with pytest.raises(MessageError, match="client 1: its first refinement upload carries no feature moments"):
        est.server_round([out[0], no_moments], sst, round=1, random_state=0)


# ------------------------------------------------------------ parallel chains (refine_n_init)
def _chain_run(est, Xc, seed):
    """A fit through the public round API with wire round trips: (broadcasts of every round, uploads of every
    round, labels, rounds)."""
    ups, states = [], []
    for i, x in enumerate(Xc):
        u, s = est.client_round(x, round=0, client_index=i, random_state=seed)
        ups.append(decode_message(u.to_bytes()))
        states.append(ClientState.from_bytes(s.to_bytes()))
    bc, sst, done = est.server_round(ups, round=0, random_state=seed)
    all_bc, all_up, r = [bc], [ups], 0
    while not done:
        r += 1
        out = [est.client_round(x, states[i], decode_message(bc[i].to_bytes()), round=r, random_state=seed)
               for i, x in enumerate(Xc)]
        states = [s for _, s in out]
        ups = [decode_message(u.to_bytes()) for u, _ in out]
        bc, sst, done = est.server_round(ups, sst, round=r, random_state=seed)
        all_bc.append(bc)
        all_up.append(ups)
    labels = [est.client_assign(x, states[i], decode_message(bc[i].to_bytes())) for i, x in enumerate(Xc)]
    return all_bc, all_up, np.concatenate(labels), r


@pytest.mark.parametrize("cls", ESTIMATORS + [FedKMeans])
def test_one_chain_is_the_single_chain_refinement(cls):
    """refine_n_init=1 (FedKMeans: n_init=1) is today's refinement: the same labels, centres, history and wire
    bytes as without the parameter, single-chain messages, no chain attributes."""
    X, _ = _blobs(11)
    Xc = _split(X, 3, 11)
    name, rounds = ("n_init", "max_rounds") if cls is FedKMeans else ("refine_n_init", "refine_rounds")
    a = cls(n_clusters=5, random_state=4, **{rounds: 5}).fit_clients(Xc)
    b = cls(n_clusters=5, random_state=4, **{rounds: 5, name: 1}).fit_clients(Xc)
    assert a.get_params()[name] == 1
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.bytes_up_, b.bytes_up_)
    np.testing.assert_array_equal(a.bytes_down_, b.bytes_down_)
    for key in a.refine_history_:
        np.testing.assert_array_equal(a.refine_history_[key], b.refine_history_[key])
    assert not hasattr(b, "refine_chain_")
    assert b._upload_cls(2) is RefineStats and b._broadcast_cls(2) is RefineCenters


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("units", [None, "federated"])
def test_refinement_on_the_blas_screen_equals_centralised_lloyd(dtype, units, monkeypatch):
    """As test_refinement_equals_centralised_lloyd_from_the_same_start, with 12 features: the rounds'
    labels come from the BLAS screen (float32 rows: the float32 screen) and their inertia from the
    clusters' moments (``lloyd_stats(exact_inertia=False)``). The labels are still the exact nearest
    centres every round (the same labels), the centres within the same bound, and the federated
    inertia of each round within 1e-9 (relative) of the exact inertia of the broadcast centres."""
    import fastfc._lloyd as lloyd_mod

    X, _ = _blobs(3, n=2400, d=12, k=6, spread=2.4)
    X = X.astype(dtype)
    Xc = _split(X, 4, 3)
    one = KFed(n_clusters=6, units=units, random_state=4).fit_clients(Xc)
    calls = []
    real = lloyd_mod._round_stats
    monkeypatch.setattr(lloyd_mod, "_round_stats", lambda *a: calls.append(1) or real(*a))
    # the runner's many-clients path: one compiled call over the clients (len(a[0]) clients each)
    real_many = lloyd_mod.lloyd_round_clients_kernel
    monkeypatch.setattr(lloyd_mod, "lloyd_round_clients_kernel", lambda *a: calls.extend([1] * len(a[0])) or real_many(*a))
    est = KFed(n_clusters=6, units=units, refine_rounds=6, refine_tol=0.0, random_state=4).fit_clients(Xc)
    R = est.n_refine_rounds_
    assert R >= 2
    assert len(calls) >= 4 * (R - 1)  # every client, every round from round 2 on, took the moment path
    X64 = np.vstack(Xc).astype(np.float64)
    Xc64 = [x.astype(np.float64) for x in Xc]
    C, labels = _reference_refinement(Xc64, one.client_labels_, R, est.feature_weight_)
    np.testing.assert_array_equal(np.concatenate(est.client_labels_), labels)
    bound = 8 * EPS * np.abs(X64).max() * X64.shape[0]
    assert np.abs(est.cluster_centers_ - C).max() <= bound
    # round r >= 2 uploads the inertia of the centres broadcast after round r - 1
    w = est.feature_weight_
    for r in range(2, R + 1):
        Cr, _ = _reference_refinement(Xc64, one.client_labels_, r - 1, w)
        lab = _nearest(X64, Cr, w)
        diff = (X64 - Cr[lab]) * (1.0 if w is None else w)
        np.testing.assert_allclose(est.refine_history_["inertia"][r - 1], float((diff * diff).sum()), rtol=1e-9)



def _lloyd_chain(X, C, w, updates):
    """Centralised Lloyd from centres C: at most ``updates`` (nearest centre, then means) steps, stopping after
    a step that moved no centre; returns (centres, labels of the last step, k-means cost of the centres for
    those labels, steps)."""
    for step in range(1, updates + 1):
        labels = _nearest(X, C, w)
        new = C.copy()
        for c in range(C.shape[0]):
            if (labels == c).any():
                new[c] = X[labels == c].mean(axis=0)
        moved = not np.array_equal(new, C)
        C = new
        if not moved:
            break
    diff = (X - C[labels]) * (1.0 if w is None else w)
    return C, labels, float((diff * diff).sum()), step


@pytest.mark.parametrize("n_clients", [1, 4])
@pytest.mark.parametrize("units", [None, "federated"])
def test_chains_equal_centralised_lloyd_from_the_same_starts(n_clients, units):
    """All rows present (on one client or four): every chain is centralised Lloyd on the pooled rows from
    its start (chain 0: the means of the one-shot clusters, chains 1..: the server's seeding, both read
    from the round-1 broadcast), its cost is the k-means cost of its final centres for its last labels,
    and the kept chain is the one of least cost. Bounds: as
    test_refinement_equals_centralised_lloyd_from_the_same_start (identical labels every step; centres
    within n * 8 * eps * max|x|); costs to 1e-9 relative (the federated cost is the uploaded inertia less
    the exact drop of the update, rounded).

    With one client the seeding points are that client's k cluster means, so every seeded chain starts
    at chain 0's round-1 centres (all chains agree); with four non-IID clients (4 k points) they differ."""
    X, _ = _blobs(12, n=1500, k=6, spread=2.2)
    X = X[np.argsort(X[:, 0], kind="stable")]
    Xc = np.array_split(X, n_clients)  # clients hold slices along feature 0: non-IID, the chains differ
    R, s = 10, 6
    est = KFed(n_clusters=6, units=units, refine_rounds=R, refine_n_init=s, refine_tol=0.0, random_state=5)
    bcs, _, labels, rounds = _chain_run(est, Xc, 5)
    fitted = KFed(n_clusters=6, units=units, refine_rounds=R, refine_n_init=s, refine_tol=0.0,
                  random_state=5).fit_clients(Xc)
    np.testing.assert_array_equal(labels, fitted.labels_)
    first = bcs[1][0]
    assert first.chains.tolist() == list(range(s))
    w = fitted.feature_weight_
    ref = [_lloyd_chain(X, np.array(first.centers[c * 6:(c + 1) * 6]), w, R - 1) for c in range(s)]
    costs = np.array([r[2] for r in ref])
    np.testing.assert_allclose(fitted.refine_chain_cost_, costs, rtol=1e-9)
    np.testing.assert_array_equal(fitted.refine_chain_rounds_, [1 + ref[0][3]] + [r[3] for r in ref[1:]])
    kept = fitted.refine_chain_
    assert costs[kept] <= costs.min() * (1 + 1e-9)
    if n_clients == 1:
        np.testing.assert_allclose(costs, costs[0], rtol=1e-9)
    else:
        assert len({round(c, 6) for c in costs}) > 1  # the chains do not all end in one optimum here
    np.testing.assert_array_equal(fitted.labels_, _nearest(X, fitted.cluster_centers_, w))
    bound = X.shape[0] * 8 * EPS * np.abs(X).max()
    np.testing.assert_allclose(fitted.cluster_centers_, ref[kept][0], rtol=0, atol=bound)
    assert rounds == fitted.n_refine_rounds_ == max(1 + ref[0][3], max(r[3] for r in ref[1:]) + 1)


@pytest.mark.parametrize("cls", [KFed, FedHIRE, FedKMeans])
def test_kept_chain_has_least_cost_and_chains_stop_when_converged(cls):
    X, _ = _blobs(13, n=1500, k=6, spread=2.0)
    Xc = np.array_split(X[np.argsort(X[:, 1], kind="stable")], 4)  # non-IID clients: the chains differ
    kw = {"max_rounds": 10, "n_init": 5} if cls is FedKMeans else {"refine_rounds": 10, "refine_n_init": 5}
    est = cls(n_clusters=6, random_state=3, **kw)
    bcs, ups, labels, rounds = _chain_run(est, Xc, 3)
    fitted = cls(n_clusters=6, random_state=3, **kw).fit_clients(Xc)
    np.testing.assert_array_equal(labels, fitted.labels_)
    cost = fitted.refine_chain_cost_
    assert np.isfinite(cost).all()
    # the least cost; chains within rounding of it (one partition reached twice) tie, the lowest index wins
    assert fitted.refine_chain_ == int(np.flatnonzero(cost <= cost.min() * (1 + 1e-12))[0])
    # the kept cost is the cost of the final centres for the last labels: at least their nearest-centre cost
    w = fitted.feature_weight_
    diff = (X - fitted.cluster_centers_[_nearest(X, fitted.cluster_centers_, w)]) * (1.0 if w is None else w)
    assert float((diff * diff).sum()) <= cost[fitted.refine_chain_] * (1 + 1e-12)
    # chains that converged stop being sent: the running chains broadcast only shrink, and the uploads
    # follow them; the final broadcast carries the kept chain, which may be one that converged and
    # stopped before the last running chain hit the round limit (the module's protocol)
    sent = [b[0].chains.tolist() for b in bcs[1:]]
    assert all(set(later) <= set(earlier) for earlier, later in zip(sent[:-1], sent[1:-1]))
    assert len(sent[-1]) == 1 and bcs[-1][0].final and sent[-1] == [fitted.refine_chain_]
    assert not any(b[0].final for b in bcs[1:-1])
    for r in range(2, rounds + 1):
        for u in ups[r]:
            assert u.chains.tolist() == sent[r - 2] and u.counts.shape == (len(sent[r - 2]) * 6,)
    # bytes are the real wire sizes of what crossed
    for r in range(rounds + 1):
        assert fitted.bytes_up_[r].tolist() == [u.wire_size for u in ups[r]]
        assert fitted.bytes_down_[r].tolist() == [b.wire_size for b in bcs[r]]
    assert fitted.n_refine_rounds_ == rounds


@pytest.mark.parametrize("cls", [KFed, FedKMeans])
def test_chains_are_deterministic_for_any_thread_count(cls):
    X, _ = _blobs(14, n=1200)
    Xc = _split(X, 4, 14)
    kw = {"max_rounds": 6, "n_init": 4} if cls is FedKMeans else {"refine_rounds": 6, "refine_n_init": 4}
    a = cls(n_clusters=5, random_state=1, n_jobs=1, **kw).fit_clients(Xc)
    b = cls(n_clusters=5, random_state=1, n_jobs=2, **kw).fit_clients(Xc)
    c = cls(n_clusters=5, random_state=1, n_jobs=2, **kw).fit_clients(Xc)
    for other in (b, c):
        np.testing.assert_array_equal(a.labels_, other.labels_)
        np.testing.assert_array_equal(a.cluster_centers_, other.cluster_centers_)
        np.testing.assert_array_equal(a.refine_chain_cost_, other.refine_chain_cost_)
        np.testing.assert_array_equal(a.bytes_up_, other.bytes_up_)


def test_chain_count_is_validated():
    from sklearn.utils._param_validation import InvalidParameterError

    X, _ = _blobs(15, n=200)
    with pytest.raises(InvalidParameterError, match="refine_n_init"):
        KFed(n_clusters=3, refine_rounds=2, refine_n_init=0).fit(X)
    with pytest.raises(InvalidParameterError, match="n_init"):
        FedKMeans(n_clusters=3, n_init=True).fit(X)


def test_malformed_and_tampered_chain_messages_are_rejected():
    from fastfc._refine import RefineChainCenters, RefineChainStats
    from fastfc.protocol import MessageError

    k, d = 3, 2
    good = dict(chains=np.array([0, 2]), counts=np.ones(2 * k, np.int64), sums=np.zeros((2 * k, d)),
                inertia=np.zeros(2 * k), n_clusters=k, n_features=d)
    RefineChainStats(**good)
    with pytest.raises(MessageError, match="strictly increasing"):
        RefineChainStats(**{**good, "chains": np.array([2, 0])})
    with pytest.raises(MessageError, match="strictly increasing"):
        RefineChainStats(**{**good, "chains": np.array([1, 1])})
    with pytest.raises(MessageError, match="at least one chain"):
        RefineChainStats(**{**good, "chains": np.zeros(0, np.int64)})
    with pytest.raises(MessageError, match=r"6 rows do not match 3 chain\(s\) x n_clusters=3"):
        RefineChainStats(**{**good, "chains": np.array([0, 1, 2])})
    with pytest.raises(MessageError, match="inertia shape"):
        RefineChainStats(**{**good, "inertia": np.zeros(0)})
    with pytest.raises(MessageError, match="values must be >= 0"):
        RefineChainStats(**{**good, "chains": np.array([-1, 0])})
    with pytest.raises(MessageError, match="a final broadcast carries one chain"):
        RefineChainCenters(chains=np.array([0, 1]), centers=np.zeros((2 * k, d)), n_clusters=k, n_features=d,
                           final=True)
    # tampered on the wire (digest recomputed): the reader rejects it with the same message
    from protocol_examples import rewrite_header

    data = RefineChainStats(**good).addressed(client=0, round=2).to_bytes()
    with pytest.raises(MessageError, match=r"6 rows do not match 2 chain\(s\) x n_clusters=2"):
        decode_message(rewrite_header(data, lambda h: h["scalars"].update(n_clusters=2)))
    centers = RefineChainCenters(chains=np.array([4]), centers=np.zeros((k, d)), n_clusters=k, n_features=d,
                                 final=True).to_bytes()
    with pytest.raises(MessageError, match=r"3 rows do not match 1 chain\(s\) x n_clusters=1"):
        decode_message(rewrite_header(centers, lambda h: h["scalars"].update(n_clusters=1)))


def test_server_names_the_client_whose_chain_upload_does_not_fit():
    from fastfc._refine import RefineChainStats
    from fastfc.protocol import MessageError

    X, _ = _blobs(16, n=600)
    Xc = _split(X, 2, 16)
    est = KFed(n_clusters=3, refine_rounds=4, refine_n_init=3, random_state=0)
    ups, states = zip(*[est.client_round(x, round=0, client_index=i, random_state=0) for i, x in enumerate(Xc)])
    bc, sst, _ = est.server_round(list(ups), round=0, random_state=0)
    out = [est.client_round(x, states[i], bc[i], round=1, random_state=0) for i, x in enumerate(Xc)]
    bc1, sst1, done = est.server_round([u for u, _ in out], sst, round=1, random_state=0)
    assert not done and bc1[0].chains.tolist() == [0, 1, 2]
    with pytest.raises(MessageError, match="expects a RefineChainCenters broadcast, got RefineCenters"):
        plain = RefineCenters(centers=bc1[0].centers[:3], n_features=bc1[0].n_features).addressed(client=0, round=1)
        est.client_round(Xc[0], out[0][1], plain, round=2, random_state=0)
    out2 = [est.client_round(x, out[i][1], bc1[i], round=2, random_state=0)[0] for i, x in enumerate(Xc)]
    u = out2[1]
    fewer = RefineChainStats(chains=u.chains[:2], counts=u.counts[:6], sums=u.sums[:6], inertia=u.inertia[:6],
                             n_clusters=3, n_features=u.n_features).addressed(client=1, round=2)
    with pytest.raises(MessageError, match=r"client 1: its round-2 chain upload is for chains \[0, 1\], the server "
                                           r"broadcast chains \[0, 1, 2\]"):
        est.server_round([out2[0], fewer], sst1, round=2, random_state=0)
    other_k = RefineChainStats(chains=u.chains, counts=np.zeros(6, np.int64), sums=np.zeros((6, u.n_features)),
                               inertia=np.zeros(6), n_clusters=2, n_features=u.n_features).addressed(client=1, round=2)
    with pytest.raises(MessageError, match="client 1: its round-2 chain upload has 2 clusters x 4 features per chain"):
        est.server_round([out2[0], other_k], sst1, round=2, random_state=0)
    single = RefineStats(counts=u.counts[:3], sums=u.sums[:3], inertia=u.inertia[:3],
                         feature_stats=np.zeros((0, u.n_features)), n_features=u.n_features).addressed(client=1, round=2)
    with pytest.raises(MessageError, match="upload 1 of round 2 is a RefineStats, expected RefineChainStats"):
        est.server_round([out2[0], single], sst1, round=2, random_state=0)


# ------------------------------------------------------------ chain seeding from the round-0 local centres
def test_round0_seed_points_are_the_local_centres_weighted_by_their_share_of_the_counts():
    from fastfc._refine import round0_seed_points

    C0 = np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0]])  # client 0: locals 0 and 1 merged into global 0
    C1 = np.array([[9.0, 9.0], [4.0, 4.0]])  # client 1: local 0 -> global 2 (no rows there), local 1 -> global 1
    up0 = RefineStats(counts=np.array([10, 7, 0]), sums=np.zeros((3, 2)), inertia=np.zeros(0),
                      feature_stats=np.zeros((0, 2)), n_features=2).addressed(client=0)
    up1 = RefineStats(counts=np.array([0, 6, 0]), sums=np.zeros((3, 2)), inertia=np.zeros(0),
                      feature_stats=np.zeros((0, 2)), n_features=2).addressed(client=1)
    local = {0: (C0, np.array([0, 0, 1])), 1: (C1, np.array([2, 1]))}
    pts, wts = round0_seed_points([up0, up1], local)
    np.testing.assert_array_equal(pts, np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0], [4.0, 4.0]]))
    np.testing.assert_array_equal(wts, [5.0, 5.0, 7.0, 6.0])
    assert round0_seed_points([up0, up1], {0: local[0]}) is None  # a client without local centres: fall back


@pytest.mark.parametrize("seeding", ["round0", "both"])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_round0_seeding_keeps_chain_0_and_gives_one_client_distinct_chains(n_jobs, seeding):
    """Seeding chains 1.. from the round-0 local centres (k' = 2k of them on one client; "both": with the
    round-1 cluster means added) leaves chain 0 as it
    is, seeds chains at other starts than chain 0 (with round-1 seeding one client's k cluster means make every
    chain start at chain 0), and is deterministic for any thread count."""
    X, _ = _blobs(15, n=1500, k=6, spread=2.2)
    kw = dict(n_clusters=6, n_local_clusters=12, refine_rounds=6, refine_n_init=4, random_state=2)
    old = KFed(**kw)
    new = KFed(**kw)
    new._chain_seeding = seeding
    bo, _, lo, _ = _chain_run(old, [X], 2)
    bn, _, ln, _ = _chain_run(new, [X], 2)
    np.testing.assert_array_equal(bo[1][0].centers[:6], bn[1][0].centers[:6])
    starts = np.asarray(bn[1][0].centers).reshape(4, 6, -1)
    assert all(not np.allclose(np.sort(starts[c], axis=0), np.sort(starts[0], axis=0)) for c in range(1, 4))
    a = KFed(n_jobs=n_jobs, **kw)
    a._chain_seeding = seeding
    a.fit_clients([X])
    np.testing.assert_array_equal(a.labels_, ln)


# ------------------------------------------------- the refinement messages' wire bytes and checks
def _unchecked(cls, **fields):
    """A message built without its cross-field checks (the arrays still pass their specs), to encode the
    recorded messages that later rules refuse."""
    msg = object.__new__(cls)
    for name, value in fields.items():
        spec = cls.ARRAYS.get(name)
        object.__setattr__(msg, name, spec.check(cls.__name__, name, value) if spec else value)
    object.__setattr__(msg, "client", None)
    object.__setattr__(msg, "round", 0)
    return msg


#: recorded messages that the bound on refinement sums (a cluster without rows sums to 0) now refuses on reading
REFUSED_SINCE_RECORDING = {"stats-round1": "sums: cluster 1 has a sum of magnitude",
                           "chain-stats": "sums: cluster 0 has a sum of magnitude"}


def _fixed_refine_messages():
    rng = np.random.default_rng(20261125)
    k, d = 3, 4
    w = np.array([0.5, 0.0, 2.0, 1.25])
    fs = np.vstack([np.full(d, 7.0), rng.normal(size=d), rng.uniform(0.1, 2, d)])
    return {
        "stats-round1": _unchecked(RefineStats, counts=np.array([3, 0, 4]), sums=rng.normal(size=(k, d)),
                                   inertia=np.zeros(0), feature_stats=fs, n_features=d).addressed(client=2, round=1),
        "stats-round2": RefineStats(counts=np.array([1, 5, 1]), sums=rng.normal(size=(k, d)),
                                    inertia=rng.uniform(0, 3, k), feature_stats=np.zeros((0, d)), n_features=d),
        "centers": RefineCenters(centers=rng.normal(size=(k, d)), n_features=d).addressed(client=0, round=2),
        "centers-weighted-final": RefineCenters(centers=rng.normal(size=(k, d)).astype(np.float32), n_features=d,
                                                feature_weight=w, final=True).addressed(client=1, round=5),
        "chain-stats": _unchecked(RefineChainStats, chains=np.array([0, 2]), counts=np.arange(2 * k),
                                  sums=rng.normal(size=(2 * k, d)), inertia=rng.uniform(0, 1, 2 * k), n_clusters=k,
                                  n_features=d).addressed(client=3, round=2),
        "chain-centers": RefineChainCenters(chains=np.array([1, 2, 4]), centers=rng.normal(size=(3 * k, d)), n_clusters=k,
                                            n_features=d, feature_weight=w).addressed(client=0, round=3),
        "chain-centers-final": RefineChainCenters(chains=np.array([2]), centers=rng.normal(size=(k, d)), n_clusters=k,
                                                  n_features=d, final=True),
    }


#: SHA-256 of ``to_bytes()`` of each message above, recorded on main (fec0e4c) before the classes were refactored
REFINE_MESSAGE_SHA256 = {
    "stats-round1": "3a1a70819a2d52c12619971a14dee3667570a1cddf97e696a0c9b0fd0ce77da0",
    "stats-round2": "7c6a516f4af1585e35db6c10731ef93835ec6b057f441921e805629c967ec4c4",
    "centers": "fa140caa8f9020faaa7b6c98850dd269d0b1f944068f726b86afd213a1c0d147",
    "centers-weighted-final": "0fbba8d02b9a7828f5c340660eab56e78880a75e80df3c3ce8f01e42c21aa05d",
    "chain-stats": "d0b23dbb8b6029031ebc5353512a3bb60db6c20f7a491757ed17d980c6daaecc",
    "chain-centers": "ed424664750b2542581b858c4629137efed46202071525421c2581809c0eacc5",
    "chain-centers-final": "cb8b5a913e0b6c03dd86dbe69510cb2b9c0c22e7f2f98dd0775985260222fd66",
}

_K, _D = 2, 3


def _stats(**kw):
    base = dict(counts=np.ones(_K, int), sums=np.zeros((_K, _D)), inertia=np.zeros(0),
                feature_stats=np.zeros((0, _D)), n_features=_D)
    return RefineStats(**{**base, **kw})


def _chain_stats(rows=_K, **kw):
    base = dict(chains=np.array([0]), counts=np.zeros(rows, int), sums=np.zeros((rows, _D)), inertia=np.zeros(rows),
                n_clusters=_K, n_features=_D)
    return RefineChainStats(**{**base, **kw})


def _chain_centers(rows=_K, **kw):
    return RefineChainCenters(**{**dict(chains=np.array([0]), centers=np.zeros((rows, _D)), n_clusters=_K,
                                        n_features=_D), **kw})


#: invalid constructions of the refinement messages (their MessageError: REFINE_REJECTIONS)
BAD_REFINE_MESSAGES = {
    "stats-no-cluster": lambda: _stats(counts=np.zeros(0, int), sums=np.zeros((0, _D))),
    "stats-sums-shape": lambda: _stats(sums=np.zeros((_K, _D + 1))),
    "stats-inertia-shape": lambda: _stats(inertia=np.zeros(_K + 1)),
    "stats-count-row": lambda: _stats(feature_stats=np.array([[1.0, 2, 1], [0, 0, 0], [1, 1, 1]])),
    "stats-negative-count": lambda: _stats(counts=np.array([1, -1])),
    "centers-shape": lambda: RefineCenters(centers=np.zeros((_K, _D + 1)), n_features=_D),
    "centers-weight-shape": lambda: RefineCenters(centers=np.zeros((_K, _D)), n_features=_D,
                                                  feature_weight=np.ones(_D + 1)),
    "centers-negative-weight": lambda: RefineCenters(centers=np.zeros((_K, _D)), n_features=_D,
                                                     feature_weight=-np.ones(_D)),
    "chain-stats-no-chain": lambda: _chain_stats(rows=0, chains=np.zeros(0, int)),
    "chain-stats-order": lambda: _chain_stats(rows=2 * _K, chains=np.array([2, 1])),
    "chain-stats-rows": lambda: _chain_stats(rows=_K + 1),
    "chain-stats-zero-k": lambda: _chain_stats(rows=0, n_clusters=0),
    "chain-stats-inertia": lambda: _chain_stats(inertia=np.zeros(_K - 1)),
    "chain-centers-final-two": lambda: _chain_centers(rows=2 * _K, chains=np.array([0, 1]), final=True),
    "chain-centers-rows": lambda: _chain_centers(chains=np.array([0, 1])),
    "chain-centers-weight": lambda: _chain_centers(feature_weight=np.ones(2)),
}

#: the MessageError of each, recorded on main (fec0e4c) before the classes were refactored
REFINE_REJECTIONS = {
    'stats-no-cluster': 'RefineStats: counts must have one entry per global cluster (at least one)',
    'stats-sums-shape': 'RefineStats: sums shape (2, 4) does not match (2, 3)',
    'stats-inertia-shape': 'RefineStats: inertia shape (3,) must be (2,) or (0,)',
    'stats-count-row': 'RefineStats: feature_stats: the count row must be the same for every feature',
    'stats-negative-count': 'RefineStats.counts: values must be >= 0, found -1',
    'centers-shape': 'RefineCenters: centers shape (2, 4) does not match (k >= 1, n_features=3)',
    'centers-weight-shape': 'RefineCenters: feature_weight shape (4,) is neither (3,) nor empty',
    'centers-negative-weight': 'RefineCenters.feature_weight: values must be >= 0.0, found -1.0',
    'chain-stats-no-chain': 'RefineChainStats: chains must name at least one chain',
    'chain-stats-order': 'RefineChainStats: chains must be strictly increasing (no chain twice), got [2, 1]',
    'chain-stats-rows': 'RefineChainStats: 3 rows do not match 1 chain(s) x n_clusters=2',
    'chain-stats-zero-k': 'RefineChainStats: n_clusters must be >= 1, got 0',
    'chain-stats-inertia': 'RefineChainStats: inertia shape (1,) does not match (2,)',
    'chain-centers-final-two': 'RefineChainCenters: a final broadcast carries one chain, got 2',
    'chain-centers-rows': 'RefineChainCenters: 2 rows do not match 2 chain(s) x n_clusters=2',
    'chain-centers-weight': 'RefineChainCenters: feature_weight shape (2,) is neither (3,) nor empty',
}


def test_refine_messages_encode_to_the_recorded_bytes():
    """The four refinement message kinds encode exactly as recorded (the wire format is fixed) and read back;
    the two recorded uploads whose empty clusters have non-zero sums are now refused on reading, by name."""
    messages = _fixed_refine_messages()
    assert {name: hashlib.sha256(m.to_bytes()).hexdigest() for name, m in messages.items()} == REFINE_MESSAGE_SHA256
    for name, m in messages.items():
        if name in REFUSED_SINCE_RECORDING:
            with pytest.raises(MessageError, match=REFUSED_SINCE_RECORDING[name]):
                decode_message(m.to_bytes())
        else:
            assert decode_message(m.to_bytes()).to_bytes() == m.to_bytes()


@pytest.mark.parametrize("name", sorted(BAD_REFINE_MESSAGES))
def test_refine_messages_reject_as_recorded(name):
    """Each invalid refinement message is refused with the message recorded before the refactoring."""
    make, expected = BAD_REFINE_MESSAGES[name], REFINE_REJECTIONS[name]
    with pytest.raises(MessageError) as info:
        make()
    assert str(info.value) == expected


@pytest.mark.parametrize("seeder", ["k-means++", FeCA(n_clusters=4)], ids=["kmeans++", "FeCA"])
def test_fed_kmeans_round_one_reuses_the_summary_moments(seeder, monkeypatch):
    """FedKMeans keeps its summary's feature moments in the client state and the first refinement
    round uploads them instead of recomputing them: no second ``feature_moments`` pass, and the
    very fit (labels, centres) of the recomputing path."""
    from fastfc import _refine, _units

    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(loc=6 * i, size=(3000, 6)) for i in range(4)]) * rng.uniform(0.5, 5, size=6)
    reused = FedKMeans(n_clusters=4, init=seeder, random_state=1).fit(X)
    calls = []
    real = _units.feature_moments
    monkeypatch.setattr(_units, "feature_moments", lambda *a, **k: calls.append(1) or real(*a, **k))
    FedKMeans(n_clusters=4, init=seeder, random_state=1).fit(X)
    assert len(calls) == 1  # the summary's only
    real_stats = _refine.client_stats
    monkeypatch.setattr(_refine, "client_stats",
                        lambda X, b, lab, nt, moments=None: real_stats(X, b, lab, nt, moments=None))
    recomputed = FedKMeans(n_clusters=4, init=seeder, random_state=1).fit(X)
    assert len(calls) == 3  # this fit: the summary's and the recomputed one
    np.testing.assert_array_equal(reused.labels_, recomputed.labels_)
    np.testing.assert_array_equal(reused.cluster_centers_, recomputed.cluster_centers_)


@pytest.mark.parametrize("n_jobs", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_init", [1, 3])
def test_many_clients_round_path_same_fit_as_one_by_one(monkeypatch, n_jobs, dtype, n_init):
    """The in-process runner runs a default refinement round over many clients in one call
    (``_run_client_rounds``): the fit is exactly the one of running the clients one by one (labels, centres,
    history, chain costs and bytes), single chain and parallel chains, any n_jobs."""
    from fastfc.base import BaseFederatedClusterer

    X, _ = _blobs(5, n=3000, d=12, k=5, spread=2.0)
    Xc = _split(X.astype(dtype), 9, 5)

    def fit():
        return KFed(n_clusters=5, units="federated", refine_rounds=5, refine_tol=0.0, refine_n_init=n_init,
                    random_state=6, n_jobs=n_jobs).fit_clients(Xc)

    used = []
    real = BaseFederatedClusterer._run_client_rounds
    monkeypatch.setattr(BaseFederatedClusterer, "_run_client_rounds",
                        lambda self, *a: used.append(1) or real(self, *a))
    fast = fit()
    assert fast.n_refine_rounds_ >= 2 and len(used) >= 1
    monkeypatch.setattr(BaseFederatedClusterer, "_run_client_rounds", lambda self, *a: None)
    slow = fit()
    for a, b in zip(fast.client_labels_, slow.client_labels_):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(fast.cluster_centers_, slow.cluster_centers_)
    assert fast.n_refine_rounds_ == slow.n_refine_rounds_
    for key in fast.refine_history_:
        np.testing.assert_array_equal(np.asarray(fast.refine_history_[key]), np.asarray(slow.refine_history_[key]))
    if n_init > 1:
        assert fast.refine_chain_ == slow.refine_chain_
        np.testing.assert_array_equal(fast.refine_chain_cost_, slow.refine_chain_cost_)
        np.testing.assert_array_equal(fast.refine_chain_rounds_, slow.refine_chain_rounds_)
    np.testing.assert_array_equal(fast.bytes_up_, slow.bytes_up_)
    np.testing.assert_array_equal(fast.bytes_down_, slow.bytes_down_)
    assert (fast.client_seconds_ > 0).all()
