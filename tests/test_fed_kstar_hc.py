"""Fed-k*-HC: kernels against NumPy references, the spec's worked examples, the
estimator's behaviour, determinism and edge cases."""
import warnings

import numpy as np
import pytest
from reference_kstar import (
    density_gap_ref,
    gcs_adapt_ref,
    knn_lists_ref,
    merge_distance_ref,
    merge_ref,
    snc_ref,
    snp_epoch_ref,
)
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import pdist

from conftest import mixture_clients
from fastfc import FedKStarHC
from fastfc._kernels import _kstar
from fastfc.fed_kstar_hc import (
    FedKStarHCModel,
    FedKStarHCReply,
    FedKStarHCSummary,
    density_gap,
    enforce_min_size,
    gcs_nodes,
    knn_lists,
    merge_subclusters,
    snc,
    snp_partition,
    subcluster_statistics,
)
from fastfc.metrics import adjusted_rand_score, dcv, evaluate_kstar_hc, f_measure, inverse_purity
from fastfc.protocol import MessageError


def blobs(rng, centres, n_per, scale):
    centres = np.asarray(centres, dtype=float)
    X = np.vstack([rng.normal(c, scale, size=(n_per, centres.shape[1])) for c in centres])
    y = np.repeat(np.arange(len(centres)), n_per)
    return X, y


def substitutes_for(rng, k0, d, sizes=(2, 9)):
    counts = rng.integers(sizes[0], sizes[1], size=k0)
    centres = rng.uniform(0, 10, size=(k0, d))
    Xs = np.vstack([rng.normal(c, rng.uniform(0.2, 1.0), size=(n, d)) for c, n in zip(centres, counts)])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    C = np.add.reduceat(Xs, offsets[:-1], axis=0) / counts[:, None]
    S = np.vstack([Xs[offsets[q]:offsets[q + 1]].std(0, ddof=1) for q in range(k0)])
    r = np.array([np.sqrt(((Xs[offsets[q]:offsets[q + 1]] - C[q]) ** 2).sum(1)).mean() for q in range(k0)])
    return C, S, r, counts, Xs, offsets


# ------------------------------------------------------------------ kernels
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_snp_epoch_matches_reference(dtype):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3)).astype(dtype)
    M0 = rng.normal(size=(5, 3))
    w0 = rng.integers(0, 4, size=5).astype(np.int64)
    perm = rng.permutation(60).astype(np.int64)
    M, w = M0.copy(), w0.copy()
    _kstar.snp_epoch(X, perm, M, w, 0.1)
    M_ref, w_ref = snp_epoch_ref(X, perm, M0, w0, 0.1)
    np.testing.assert_array_equal(w, w_ref)
    np.testing.assert_allclose(M, M_ref, rtol=1e-12, atol=1e-12)
    assert w.sum() == w0.sum() + 60
    assert not np.allclose(M, M0)


def test_gcs_adapt_matches_reference():
    rng = np.random.default_rng(2)
    P = rng.normal(size=(40, 4))
    n = 6
    W = np.zeros((10, 4))
    W[:n] = rng.normal(size=(n, 4))
    E = np.zeros(10)
    E[:n] = rng.uniform(size=n)
    hits = np.zeros(10, dtype=np.int64)
    adj = np.zeros((10, 10), dtype=np.uint8)
    for a, b in [(0, 1), (1, 2), (0, 2), (2, 3), (3, 4), (4, 5), (3, 5)]:
        adj[a, b] = adj[b, a] = 1
    draws = rng.integers(40, size=150).astype(np.int64)
    W_ref, E_ref, h_ref = gcs_adapt_ref(P, draws, W, E, adj, hits, n, 0.06, 0.002, 5e-4)
    _kstar.gcs_adapt(P, draws, W, E, adj, hits, n, 0.06, 0.002, 5e-4)
    np.testing.assert_allclose(W, W_ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(E, E_ref, rtol=1e-10)
    np.testing.assert_array_equal(hits, h_ref)
    assert hits.sum() == 150


def test_gcs_nodes_budget_and_spread():
    rng = np.random.default_rng(3)
    P, _ = blobs(rng, [[0, 0], [10, 0], [0, 10]], 20, 0.5)
    W = gcs_nodes(P, np.random.default_rng(0), max_nodes=9, n_final_steps=3000)
    assert W.shape == (9, 2)
    # every blob is covered by at least one node
    d = np.sqrt(((W[:, None] - np.array([[0, 0], [10, 0], [0, 10]])[None]) ** 2).sum(-1))
    assert (d.min(0) < 2.0).all()


def test_pairwise_upper_matches_pdist():
    rng = np.random.default_rng(4)
    V = rng.normal(size=(37, 5))
    out = np.empty(37 * 36 // 2)
    _kstar.pairwise_upper(V, out, 2)
    np.testing.assert_allclose(out, pdist(V), rtol=1e-13)


@pytest.mark.parametrize("kind", ["random", "grid", "duplicates"])
@pytest.mark.parametrize("B", [1, 3, 7])
def test_knn_lists_match_reference(kind, B):
    rng = np.random.default_rng(5)
    if kind == "random":
        V = rng.normal(size=(50, 3))
    elif kind == "grid":  # many exact distance ties
        V = rng.integers(0, 4, size=(50, 2)).astype(float)
    else:
        V = np.repeat(rng.normal(size=(10, 2)), 5, axis=0)[rng.permutation(50)]
    nbr, nd = knn_lists(V, B)
    nbr_ref, nd_ref = knn_lists_ref(V, B)
    np.testing.assert_array_equal(nbr, nbr_ref)
    np.testing.assert_allclose(nd, nd_ref, rtol=1e-14)


def test_fig2_worked_example_strict_natural_neighbours():
    # spec Appendix A: the b=2 lists of Fig. 2 (A..J = 0..9), fed straight to the kernel
    A, B, C, D, E, F, G, H, I, J = range(10)
    lists = {A: [B, C], B: [A, D], C: [A, E], D: [A, B], E: [A, C], F: [G, H], G: [F, H], H: [I, J],
             I: [H, J], J: [H, I]}
    nbr = np.array([lists[i] for i in range(10)], dtype=np.int64)
    nd = np.ones((10, 2))
    pairs = np.empty((20, 2), dtype=np.int64)
    ranks = np.empty((20, 2), dtype=np.int64)
    dist = np.empty(20)
    m = _kstar.mutual_pairs(nbr, nd, pairs, ranks, dist)
    got = {tuple(p) for p in pairs[:m]}
    assert got == {(A, B), (A, C), (B, D), (C, E), (F, G), (H, I), (H, J), (I, J)}  # LNN(2)
    strict = {tuple(p) for p, r in zip(pairs[:m], ranks[:m]) if r[0] == r[1]}
    assert strict == got - {(A, C), (H, J)}  # AC and HJ have ranks (2, 1)

    def n_components(edges):
        e = np.array(sorted(edges))
        g = coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(10, 10))
        return connected_components(g, directed=False)[0]

    assert n_components(got) == 3  # the paper's "three clusters"
    assert n_components(strict) == 4  # {A,B,D}, {C,E}, {F,G}, {H,I,J}


def test_lnn_counts_matches_direct_count():
    rng = np.random.default_rng(6)
    ranks = rng.integers(1, 6, size=(80, 2)).astype(np.int64)
    dist = rng.uniform(size=80)
    nt = np.empty(7, dtype=np.int64)
    ns = np.empty(7, dtype=np.int64)
    _kstar.lnn_counts(ranks, dist, 0.4, nt, ns)
    mr = ranks.max(1)
    for b in range(7):
        assert nt[b] == (mr <= b).sum()
        assert ns[b] == ((mr <= b) & (dist < 0.4)).sum()


@pytest.mark.parametrize("kind", ["random", "blobs", "grid", "duplicates"])
@pytest.mark.parametrize("snn_mode", ["equal_rank", "mutual"])
@pytest.mark.parametrize("t", [20.0, 35.0])
def test_snc_matches_reference(kind, snn_mode, t):
    rng = np.random.default_rng(7)
    if kind == "random":
        V = rng.normal(size=(45, 3))
    elif kind == "blobs":
        V, _ = blobs(rng, [[0, 0], [6, 0], [0, 6], [6, 6]], 10, 0.7)
    elif kind == "grid":
        V = rng.integers(0, 5, size=(40, 2)).astype(float)
    else:
        V = np.repeat(rng.normal(size=(8, 2)), 3, axis=0)
    got = snc(V, t=t, snn_mode=snn_mode)
    ref = snc_ref(V, t=t, snn_mode=snn_mode)
    assert got["k"] == ref["k"]
    assert got["b_opt"] == ref["b_opt"]
    assert got["T"] == ref["T"]
    assert got["D_s"] == pytest.approx(ref["D_s"], rel=1e-12)
    np.testing.assert_allclose(got["p_curve"], ref["p_curve"], rtol=1e-14)


def test_snc_duplicates_follow_spec_edge_case():
    # 6 distinct positions, each 4 times: T = 0 so no pair is "short" (strict <), P_b = 0 never
    # declines and b_opt = b_max = N - 1 (spec §3.9)
    V = np.repeat(np.arange(6, dtype=float)[:, None] * [1.0, 2.0], 4, axis=0)
    out = snc(V, t=10.0)
    assert out["T"] == 0.0
    assert (out["p_curve"] == 0).all() and out["p_curve"].size == len(V) - 1
    assert out["b_opt"] == len(V) - 1
    ref = snc_ref(V, t=10.0)
    assert out["k"] == ref["k"] and out["D_s"] == pytest.approx(ref["D_s"])


def test_snc_b_cap_grows_beyond_16():
    # points on a line with slowly growing gaps: P_b stays 1 for many b, so b_opt > 16 needs the doubling
    rng = np.random.default_rng(8)
    V = np.cumsum(rng.uniform(1.0, 1.001, size=60))[:, None]
    got, ref = snc(V, t=99.0), snc_ref(V, t=99.0)
    assert got["b_opt"] == ref["b_opt"] and got["k"] == ref["k"]
    assert got["b_opt"] > 16


@pytest.mark.parametrize("beta,sim_norm", [(0.0, "l2"), (0.5, "l2"), (2.0, "l2"), (1.0, "l1")])
@pytest.mark.parametrize("n_clusters", [1, 4])
def test_merge_loop_matches_reference(beta, sim_norm, n_clusters):
    rng = np.random.default_rng(9)
    C, S, r, counts, Xs, offsets = substitutes_for(rng, 24, 3)
    got = merge_subclusters(C, S, r, counts, Xs, offsets, n_clusters, beta=beta, sim_norm=sim_norm)
    labels, merges, heights, C_ref, S_ref, r_ref, members = merge_ref(C, S, r, counts, Xs, offsets, n_clusters, beta, sim_norm)
    np.testing.assert_array_equal(got["merges"], merges)
    np.testing.assert_allclose(got["heights"], heights, rtol=1e-9)
    np.testing.assert_array_equal(got["labels"], labels)
    slots = sorted(members)
    np.testing.assert_allclose(got["centers"], C_ref[slots], rtol=1e-10)
    np.testing.assert_allclose(got["stds"], S_ref[slots], rtol=1e-9)
    np.testing.assert_allclose(got["radii"], r_ref[slots], rtol=1e-10)
    assert got["counts"].sum() == counts.sum()


def test_merge_loop_threads_do_not_change_result():
    rng = np.random.default_rng(10)
    C, S, r, counts, Xs, offsets = substitutes_for(rng, 300, 4)
    a = merge_subclusters(C, S, r, counts, Xs, offsets, 5, beta=0.5, n_threads=1)
    b = merge_subclusters(C, S, r, counts, Xs, offsets, 5, beta=0.5, n_threads=2)
    np.testing.assert_array_equal(a["merges"], b["merges"])
    np.testing.assert_array_equal(a["heights"], b["heights"])


@pytest.mark.parametrize("shift", [300, 480])  # (tiny scales differ: the r_i + r_j guard is an absolute 1e-12)
@pytest.mark.parametrize("beta", [0.5, 1.0, 2.0])
def test_merge_loop_at_any_scale_is_the_raw_merge(shift, beta):
    """Eq. (21) is a length to the power 1 + beta: in raw units it overflowed float64 beyond ~1e100 (a
    MessageError "merge_heights: contains NaN or inf" on valid data at 1e130) and underflowed at tiny scales.
    Inputs scaled by 2**shift now merge exactly as the unscaled ones: the same merges and labels, centres,
    stds and radii scaled by exactly 2**shift, heights by 2**(shift (1 + beta)) -- bit for bit, or the
    largest float64 with a RuntimeWarning where that overflows."""
    rng = np.random.default_rng(12)
    C, S, r, counts, Xs, offsets = substitutes_for(rng, 30, 3)
    if np.frexp(max(np.abs(a).max() for a in (C, S, r, Xs)))[1] % 2 == 0:
        # the scaled inputs' peak then has an odd exponent, which the merge rounds up to an even scale (the
        # fourth root of beta = 0.5 is exact only for those)
        C, S, r, Xs = (np.ldexp(a, 1) for a in (C, S, r, Xs))
    raw = merge_subclusters(C, S, r, counts, Xs, offsets, 3, beta=beta)
    grow = int(shift * (1 + beta))
    expected = np.ldexp(raw["heights"], grow)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        big = merge_subclusters(*(np.ldexp(a, shift) for a in (C, S, r)), counts, np.ldexp(Xs, shift), offsets, 3,
                                beta=beta)
    np.testing.assert_array_equal(big["merges"], raw["merges"])
    np.testing.assert_array_equal(big["labels"], raw["labels"])
    for name in ("centers", "stds", "radii"):
        np.testing.assert_array_equal(big[name], np.ldexp(raw[name], shift))
    over = ~np.isfinite(expected)
    np.testing.assert_array_equal(big["heights"][~over], expected[~over])
    assert (big["heights"][over] == np.finfo(np.float64).max).all()
    assert over.any() == (shift * (1 + beta) > 1000)  # the 2.0 ** 480 case with beta = 2 overflows
    assert [str(w.message) for w in caught if "merge heights exceed" in str(w.message)] == (
        [f"Fed-k*-HC (paper mode): {int(over.sum())} of {over.size} Eq. (21) merge heights exceed the largest "
         "float64 at this data scale and are returned as that largest float (merge_heights_); the merges "
         "themselves are exact"] if over.any() else [])


def test_paper_mode_fits_valid_data_at_the_largest_scales():
    """Data near the accepted bound (a mixture scaled by 2^460, ~1e138) fits in paper mode with the labels of
    the same data at unit scale (before: MessageError at the server from an overflowed merge height), and so
    does data at the bound itself, whose substitute means may exceed it (seeds 0-19)."""
    X_clients = [np.asarray(X) for X in mixture_clients(1, k=4)[0]]
    for k in (4, None):
        base = FedKStarHC(mode="paper", n_clusters=k, random_state=0).fit_clients(X_clients)
        big = FedKStarHC(mode="paper", n_clusters=k, random_state=0).fit_clients([np.ldexp(X, 460) for X in X_clients])
        for a, b in zip(base.client_labels_, big.client_labels_):
            np.testing.assert_array_equal(a, b)
    X = np.array([[1e150], [1e150], [1e150], [1e150], [0.0]])  # a subcluster at 0.8e150 with spread 0.45e150
    for seed in range(20):
        assert FedKStarHC(mode="paper", n_clusters=1, random_state=seed).fit(X).labels_.tolist() == [0] * 5


def test_merge_distance_reference_is_eq21():
    C = np.array([[0.0, 0.0], [3.0, 4.0]])
    S = np.array([[1.0, 1.0], [1.0, 4.0]])
    r = np.array([1.0, 1.5])
    d = merge_distance_ref(C, S, r, beta=2.0)
    # dist = 5, overlap = 5 / 2.5 = 2, sim = |(0, 3)|^2 = 9 -> 5 * 2 * 9
    assert d[0, 1] == pytest.approx(90.0)


def test_merging_hand_built_subclusters():
    # four subclusters on a line; 0 and 1 are close and alike; 2 is as close to 1 as 0 is but
    # has a very different spread, 3 is far. Eq. (21) merges (0,1), then ((0,1),2), then 3.
    rng = np.random.default_rng(11)
    spec = [((0.0, 0.0), 0.3), ((1.0, 0.0), 0.3), ((2.0, 0.0), 0.05), ((9.0, 0.0), 0.3)]
    parts = []
    for c, s in spec:
        z = rng.standard_normal((200, 2))
        z = (z - z.mean(0)) / z.std(0, ddof=1)
        parts.append(np.asarray(c) + s * z)
    Xs = np.vstack(parts)
    offsets = np.arange(0, 801, 200, dtype=np.int64)
    C = np.array([p.mean(0) for p in parts])
    S = np.array([p.std(0, ddof=1) for p in parts])
    r = np.array([np.sqrt(((p - p.mean(0)) ** 2).sum(1)).mean() for p in parts])
    counts = np.full(4, 200)
    out = merge_subclusters(C, S, r, counts, Xs, offsets, 1, beta=1.0)
    assert out["merges"].tolist() == [[0, 1], [0, 2], [0, 3]]
    two = merge_subclusters(C, S, r, counts, Xs, offsets, 2, beta=1.0)
    assert two["labels"].tolist() == [0, 0, 0, 1]
    np.testing.assert_allclose(two["centers"][0], Xs[:600].mean(0), atol=1e-12)
    np.testing.assert_allclose(two["stds"][0], Xs[:600].std(0, ddof=1))
    assert two["counts"].tolist() == [600, 200]
    # beta = 0 ignores spread: the closest pair by dist^2/(r_i + r_j) goes first
    d0 = merge_distance_ref(C, S, r, 0.0)
    np.fill_diagonal(d0, np.inf)
    first = np.unravel_index(np.argmin(np.triu(d0) + np.tril(np.full((4, 4), np.inf))), d0.shape)
    assert merge_subclusters(C, S, r, counts, Xs, offsets, 3, beta=0.0)["merges"][0].tolist() == list(first)


def test_merge_ties_take_smallest_pair():
    # identical subclusters: every pair ties; merges go (0,1), (0,2), ...
    Xs = np.tile(np.array([[0.0, 0.0], [1.0, 1.0]]), (5, 1))
    offsets = np.arange(0, 11, 2, dtype=np.int64)
    C = np.full((5, 2), 0.5)
    S = np.full((5, 2), np.sqrt(0.5))
    r = np.full(5, np.sqrt(0.5))
    out = merge_subclusters(C, S, r, np.full(5, 2), Xs, offsets, 1, beta=1.0)
    assert out["merges"].tolist() == [[0, 1], [0, 2], [0, 3], [0, 4]]


# ------------------------------------------------------------- client phase
def test_density_gap_matches_reference():
    rng = np.random.default_rng(12)
    for m in (3, 10, 40):
        P = np.vstack([rng.normal(0, 0.2, size=(m, 2)), rng.normal(3, 0.2, size=(m // 2 + 1, 2))])
        g, a = density_gap(P)
        g_ref, a_ref = density_gap_ref(P)
        assert a == a_ref
        assert g == pytest.approx(g_ref, rel=1e-10)
    assert density_gap(np.ones((5, 2))) == (0.0, -1)
    assert density_gap(np.zeros((2, 2))) == (0.0, -1)


def test_snp_partition_finds_subclusters_within_budget():
    rng = np.random.default_rng(13)
    X, y = blobs(rng, [[0, 0], [1, 0], [0, 1]], 40, 0.05)
    labels = snp_partition(X, np.random.default_rng(0), k_max=9)
    k = labels.max() + 1
    assert 3 <= k <= 9
    assert (np.bincount(labels) > 0).all()
    # micro-subclusters do not straddle the well-separated blobs
    for j in range(k):
        assert np.unique(y[labels == j]).size == 1


def test_snp_partition_threshold_is_scale_free():
    """Eq. (5)'s xi is in [0, 1]-scaled units: a power-of-two rescaling (exact in floating point)
    and a shift give the same subclusters, where an absolute threshold would run more epochs on
    the larger scale and end elsewhere."""
    rng = np.random.default_rng(15)
    X, _ = blobs(rng, [[0, 0], [1, 0], [0, 1]], 60, 0.15)
    base = snp_partition(X, np.random.default_rng(1), k_max=8)
    for scale in (1 / 64, 1024.0):
        np.testing.assert_array_equal(snp_partition(X * scale, np.random.default_rng(1), k_max=8), base)


def test_enforce_min_size():
    rng = np.random.default_rng(14)
    X = rng.normal(size=(100, 2))
    labels = np.arange(100) % 10
    labels[:3] = 10  # three rows in an 11th subcluster (and fewer elsewhere)
    out = enforce_min_size(X, labels, 9)
    assert np.bincount(out).min() >= 9
    assert out.shape == (100,)
    # impossible budget: one subcluster survives
    assert enforce_min_size(X, labels, 1000).max() == 0


def test_subcluster_statistics_and_substitutes():
    rng = np.random.default_rng(15)
    X = rng.normal(size=(90, 3))
    labels = np.repeat([2, 0, 1], 30)
    counts, means, radii, stds, subs = subcluster_statistics(X, labels, np.random.default_rng(0))
    assert counts.tolist() == [30, 30, 30]
    for g in range(3):
        P = X[labels == g]
        np.testing.assert_allclose(means[g], P.mean(0))
        np.testing.assert_allclose(stds[g], P.std(0, ddof=1))
        np.testing.assert_allclose(radii[g], np.sqrt(((P - P.mean(0)) ** 2).sum(1)).mean())
    assert subs.shape == X.shape
    # substitutes are N(mean, cov): with many draws their moments match
    big = rng.multivariate_normal([1, 2], [[1.0, 0.8], [0.8, 1.0]], size=20000)
    _, m, _, s, sb = subcluster_statistics(big, np.zeros(20000, dtype=np.int64), np.random.default_rng(1))
    np.testing.assert_allclose(sb.mean(0), m[0], atol=0.03)
    np.testing.assert_allclose(np.cov(sb.T), np.cov(big.T), atol=0.05)


def test_singular_covariance_and_singletons():
    X = np.array([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [5.0, 5.0]])
    with pytest.warns(RuntimeWarning, match="single row"):
        counts, means, radii, stds, subs = subcluster_statistics(X, np.array([0, 0, 0, 1]), np.random.default_rng(0))
    np.testing.assert_allclose(subs[:3], X[:3])  # zero covariance: substitutes equal the mean
    np.testing.assert_array_equal(subs[3], X[3])
    assert radii.tolist() == [0.0, 0.0] and (stds == 0).all()


# ---------------------------------------------------------------- messages
def _summary(rng, k=3, d=2):
    counts = np.array([2, 3, 1][:k])
    return FedKStarHCSummary(counts=counts, centers=rng.normal(size=(k, d)), radii=np.ones(k),
                             stds=np.ones((k, d)), substitutes=rng.normal(size=(counts.sum(), d)), n_features=d)


def test_summary_round_trip_and_validation():
    rng = np.random.default_rng(16)
    s = _summary(rng)
    back = FedKStarHCSummary.from_bytes(s.to_bytes())
    np.testing.assert_array_equal(back.substitutes, s.substitutes)
    with pytest.raises(MessageError, match="substitutes shape"):
        FedKStarHCSummary(counts=np.array([2, 3]), centers=np.zeros((2, 2)), radii=np.ones(2), stds=np.ones((2, 2)),
                          substitutes=np.zeros((4, 2)), n_features=2)
    with pytest.raises(MessageError, match="counts"):
        FedKStarHCSummary(counts=np.array([0, 3]), centers=np.zeros((2, 2)), radii=np.ones(2), stds=np.ones((2, 2)),
                          substitutes=np.zeros((3, 2)), n_features=2)
    with pytest.raises(MessageError, match="radii"):
        FedKStarHCSummary(counts=np.array([1]), centers=np.zeros((1, 2)), radii=-np.ones(1), stds=np.ones((1, 2)),
                          substitutes=np.zeros((1, 2)), n_features=2)
    with pytest.raises(MessageError, match="NaN"):
        FedKStarHCSummary(counts=np.array([1]), centers=np.zeros((1, 2)), radii=np.ones(1), stds=np.ones((1, 2)),
                          substitutes=np.array([[np.nan, 0.0]]), n_features=2)
    raw = bytearray(s.to_bytes())
    raw[-40] ^= 1
    with pytest.raises(MessageError, match="digest"):
        FedKStarHCSummary.from_bytes(bytes(raw))


def test_model_and_reply_validation():
    with pytest.raises(MessageError, match="at least one subcluster"):
        FedKStarHCModel(centers=np.zeros((2, 2)), counts=np.array([1, 1]), radii=np.zeros(2), stds=np.zeros((2, 2)),
                        subcluster_labels=np.array([0, 0, 0]), p_curve=np.zeros(0), n_nodes=-1, b_opt=-1,
                        threshold_t=-1.0, d_s=-1.0, estimated=False, n_features=2)
    with pytest.raises(MessageError, match="does not exist"):
        FedKStarHCReply(centers=np.zeros((2, 2)), local_to_global=np.array([0, 2]), n_features=2)


# --------------------------------------------------------------- estimator
@pytest.mark.parametrize("micro", ["kmeans", "snp"])
def test_recovers_separated_clusters_with_k_given(micro):
    rng = np.random.default_rng(17)
    X, y = blobs(rng, [[0, 0], [1, 0], [0, 1], [1, 1]], 150, 0.06)
    perm = rng.permutation(len(X))
    parts = np.array_split(perm, 3)
    est = FedKStarHC(n_clusters=4, micro=micro, beta=0.5, random_state=0).fit_clients([X[p] for p in parts])
    assert est.n_clusters_ == 4
    assert adjusted_rand_score(np.concatenate([y[p] for p in parts]), est.labels_) > 0.99
    assert est.cluster_centers_.shape == (4, 2)
    assert est.snc_ is None
    np.testing.assert_array_equal(est.predict(X[parts[0]]), est.client_labels_[0])


def _three_tight_blobs(seed):
    """Three blobs (std 0.03, >= 1 apart) over three clients, and their labels in client order."""
    rng = np.random.default_rng(18)
    X, y = blobs(rng, [[0, 0], [1, 0], [0.5, 1]], 200, 0.03)
    parts = np.array_split(rng.permutation(len(X)), 3)
    return [X[p] for p in parts], np.concatenate([y[p] for p in parts])


@pytest.mark.parametrize("seed", range(5))
def test_estimates_k_on_well_separated_clusters_with_raw_centroids(seed):
    """SNC on the raw subcluster centroids (use_gcs=False) with Fig. 2's mutual SNN finds k* = 3
    on three tight blobs and recovers them."""
    Xc, y = _three_tight_blobs(seed)
    est = FedKStarHC(mode="paper", micro="kmeans", beta=0.5, use_gcs=False, snn_mode="mutual", random_state=seed).fit_clients(Xc)
    assert est.snc_ is not None and est.snc_["n_nodes"] == est.n_subclusters_
    assert est.n_clusters_ == len(est.cluster_centers_) == np.unique(est.labels_).size
    assert est.n_clusters_ == 3
    assert adjusted_rand_score(y, est.labels_) > 0.99


def test_estimates_k_on_well_separated_clusters_with_default_settings():
    """The defaults (mode="robust": Ward tree, Calinski-Harabasz) find k* = 3 on the same three
    tight blobs for every seed 0-4 (the paper setting gave k* = 4, 4, 3, 3, 4)."""
    ks = []
    for seed in range(5):
        Xc, _ = _three_tight_blobs(seed)
        ks.append(FedKStarHC(random_state=seed).fit_clients(Xc).n_clusters_)
    assert ks == [3] * 5, ks


@pytest.mark.parametrize("micro", ["kmeans", "snp"])
def test_determinism_across_n_jobs(micro):
    rng = np.random.default_rng(19)
    X, _ = blobs(rng, [[0, 0], [2, 0], [0, 2]], 100, 0.3)
    parts = [X[:100], X[100:220], X[220:]]
    a = FedKStarHC(micro=micro, random_state=3, n_jobs=1).fit_clients(parts)
    b = FedKStarHC(micro=micro, random_state=3, n_jobs=2).fit_clients(parts)
    c = FedKStarHC(micro=micro, random_state=3, n_jobs=1).fit_clients(parts)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.labels_, c.labels_)
    assert a.n_clusters_ == b.n_clusters_


def test_one_client_and_fit_with_client_ids():
    rng = np.random.default_rng(20)
    X, y = blobs(rng, [[0, 0], [3, 3]], 80, 0.2)
    est = FedKStarHC(n_clusters=2, micro="kmeans", random_state=0).fit(X)
    assert adjusted_rand_score(y, est.labels_) == 1.0
    ids = np.arange(len(X)) % 2
    est2 = FedKStarHC(n_clusters=2, micro="kmeans", random_state=0).fit(X, client_ids=ids)
    assert adjusted_rand_score(y, est2.labels_) == 1.0


def test_tiny_clients_and_duplicate_rows():
    rng = np.random.default_rng(21)
    X, _ = blobs(rng, [[0, 0], [5, 5]], 30, 0.3)
    clients = [X[:58], X[58:59], X[59:60]]  # two clients with a single row
    with pytest.warns(RuntimeWarning, match="single row"):
        est = FedKStarHC(n_clusters=2, micro="kmeans", random_state=0).fit_clients(clients)
    assert [len(l) for l in est.client_labels_] == [58, 1, 1]
    dup = np.repeat(X[:5], 20, axis=0)  # 5 distinct rows, 100 samples
    est = FedKStarHC(micro="kmeans", random_state=0, min_frac=0.0).fit_clients([dup[:50], dup[50:]])
    assert est.labels_.shape == (100,)
    for v in np.unique(dup, axis=0):  # identical rows share a label within a client
        for lab, xc in zip(est.client_labels_, [dup[:50], dup[50:]]):
            rows = (xc == v).all(1)
            assert np.unique(lab[rows]).size <= 1


def test_errors_of_its_own_and_snp_leaves_inputs_untouched():
    """Fed-k*-HC's own errors (generic bad input, for every estimator: test_edge_cases.py)."""
    rng = np.random.default_rng(22)
    X = rng.normal(size=(60, 2))
    with pytest.raises(ValueError, match="subclusters the clients uploaded"):
        FedKStarHC(n_clusters=50, mode="paper", micro="kmeans", random_state=0).fit_clients([X[:30], X[30:]])
    with pytest.raises(ValueError, match="larger than the number of samples"):
        FedKStarHC(n_clusters=61, micro="kmeans").fit_clients([X[:30], X[30:]])
    with pytest.raises(ValueError, match="micro"):
        FedKStarHC(micro="bogus").fit_clients([X])
    before = X.copy()
    FedKStarHC(micro="snp", random_state=0).fit_clients([X[:30], X[30:]])
    np.testing.assert_array_equal(X, before)


def test_tampered_reply_is_rejected_by_client():
    rng = np.random.default_rng(23)
    X = rng.normal(size=(40, 2))
    est = FedKStarHC(n_clusters=2, micro="kmeans", random_state=0)
    s, state = est.client_summarize(X)
    _, replies = est.server_aggregate([s])
    short = FedKStarHCReply(centers=replies[0].centers, local_to_global=replies[0].local_to_global[:1], n_features=2)
    with pytest.raises(MessageError, match="does not fit"):
        est.client_assign(X, state, short)
    with pytest.raises(MessageError, match="summary 0"):
        est.server_aggregate([replies[0]])


def test_paper_metrics_reproduce_table6_fedms_row():
    # spec §6.3: sizes {398, 2} with the 2 rows from one class give F .6656, Acc .9950, NMI .0235, ARI .0001, DCV 1.4001
    y = np.repeat([0, 1], 200)
    p = np.zeros(400, dtype=int)
    p[:2] = 1
    s = evaluate_kstar_hc(y, p)
    assert round(s["f_measure"], 4) == 0.6656 == round(f_measure(y, p), 4)
    assert round(s["acc_paper"], 4) == 0.9950 == round(inverse_purity(y, p), 4)
    assert round(s["nmi"], 4) == 0.0235
    assert round(s["ari"], 4) == 0.0001
    assert round(s["dcv"], 4) == 1.4001 == round(dcv(y, p), 4)
    assert s["acc"] == pytest.approx(0.505)


def test_auto_micro_is_snp_on_small_clients_and_kmeans_on_large_ones():
    """``micro="auto"``: SNP up to SNP_MAX_ROWS rows per client, k-means above; the default
    (``"kmeans"``) budget is min(ceil(micro_scale * sqrt(n_z)), MICRO_BUDGET_CAP) subclusters."""
    from fastfc.fed_kstar_hc import MICRO_BUDGET_CAP, SNP_MAX_ROWS

    rng = np.random.default_rng(0)
    small = rng.normal(size=(300, 3))
    large = np.concatenate([rng.normal(size=(SNP_MAX_ROWS, 3)), rng.normal(loc=5.0, size=(20_000 - SNP_MAX_ROWS, 3))])
    for X, explicit in ((small, "snp"), (large, "kmeans")):
        auto = FedKStarHC(n_clusters=2, mode="paper", micro="auto", random_state=1).client_summarize(X)[0]
        same = FedKStarHC(n_clusters=2, mode="paper", micro=explicit, random_state=1).client_summarize(X)[0]
        np.testing.assert_array_equal(auto.counts, same.counts)
        np.testing.assert_array_equal(auto.centers, same.centers)
    # on the small client the choice matters, so the equality above is informative
    km = FedKStarHC(n_clusters=2, mode="paper", micro="kmeans", random_state=1).client_summarize(small)[0]
    snp = FedKStarHC(n_clusters=2, mode="paper", micro="snp", random_state=1).client_summarize(small)[0]
    assert not (km.counts.shape == snp.counts.shape and np.array_equal(km.centers, snp.centers))
    default = FedKStarHC(n_clusters=2, mode="paper", random_state=1).client_summarize(small)[0]
    np.testing.assert_array_equal(default.centers, km.centers)
    # 0.5 * sqrt(20 000) = 71 > cap: at most MICRO_BUDGET_CAP subclusters ...
    big = FedKStarHC(n_clusters=2, mode="paper", random_state=1).client_summarize(large)[0]
    assert 0.7 * MICRO_BUDGET_CAP < big.counts.size <= MICRO_BUDGET_CAP
    assert big.counts.sum() == large.shape[0]
    # ... below the cap the budget follows micro_scale * sqrt(n_z): 0.2 * 141.4 -> 29
    small_budget = FedKStarHC(n_clusters=2, mode="paper", micro_scale=0.2, random_state=1).client_summarize(large)[0]
    assert 20 < small_budget.counts.size <= 29
    # ... and a given n_clusters raises it to 2 * n_clusters
    floor = FedKStarHC(n_clusters=40, mode="paper", micro_scale=0.2, random_state=1).client_summarize(large)[0]
    assert MICRO_BUDGET_CAP < floor.counts.size <= 80


def _k_star_on_separated_blobs(seed, **params):
    """k* of FedKStarHC on three blobs 10 apart (std 1, 600 rows each) over three clients."""
    rng = np.random.default_rng(seed)
    C = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    X = np.vstack([c + rng.normal(size=(600, 2)) for c in C])
    Xc = np.array_split(X[rng.permutation(len(X))], 3)
    return FedKStarHC(random_state=seed, **params).fit_clients(Xc).n_clusters_


def test_pruning_dead_gcs_nodes_finds_k_more_often_on_separated_blobs():
    """Spec A13: isolated GCS nodes inflate k* (every component counts). Pruning nodes that never
    win (the default) finds k* = 3 on more of seeds 0-15 than the same settings without pruning
    (measured 12 against 2; pruning can shift T and D_s, so it is not monotone per seed)."""
    found = sum(_k_star_on_separated_blobs(s, mode="paper") == 3 for s in range(16))
    unpruned_found = sum(_k_star_on_separated_blobs(s, mode="paper", prune_dead_nodes=False) == 3 for s in range(16))
    assert found > unpruned_found


def test_default_k_star_is_exact_on_separated_blobs():
    """Three blobs 10 standard deviations apart: the default estimator (mode="robust") finds k* = 3
    on every seed 0-15 (the paper setting: 12 of 16; seeds 1, 5, 6, 7 give 5, 4, 4, 4)."""
    ks = [_k_star_on_separated_blobs(s) for s in range(16)]
    assert ks == [3] * 16, ks


@pytest.mark.parametrize("shape", [(3000, 5), (60000, 5), (60000, 3)])
def test_robust_state_keeps_the_std_that_assign_would_recompute(shape):
    """The robust summary phase keeps the rows' standard deviation in the client state (issue 15: the
    assignment phase recomputed it, a pass over the rows, for the rows set aside). It is the same bits as
    the assignment phase's own computation, and labels with and without it are the same (a large client, of
    any number of features, takes both from the two-half moments)."""
    from fastfc._state import ClientState
    from fastfc._units import col_moments_split, large_moments

    rng = np.random.default_rng(0)
    n, d = shape
    X = np.vstack([rng.normal(size=(n // 2, d)) * rng.uniform(0.5, 4, size=d),
                   rng.normal(size=(n - n // 2, d)) + 6.0])
    est = FedKStarHC(n_clusters=2, random_state=0, min_frac=0.9)  # pieces below 0.9 x the mean size: set aside
    s, state = est.client_summarize(X)
    _, replies = est.server_aggregate([s])
    own = np.sqrt(col_moments_split(X)[1]) if large_moments(X) else X.std(axis=0)
    np.testing.assert_array_equal(state["local_std"], own)
    assert (state["labels"] < 0).any()  # rows set aside: the kept value is used
    bare = ClientState(method=state.method, client=state.client, n_samples=state.n_samples,
                       n_features=state.n_features, values={"labels": state["labels"]}, round=state.round)
    np.testing.assert_array_equal(est.client_assign(X, state, replies[0]), est.client_assign(X, bare, replies[0]))


# ------------------------------------------------- kernels on random inputs (several seeds and shapes)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed, n, k, d", [(10, 25, 1, 2), (11, 40, 2, 1), (12, 7, 3, 4), (13, 120, 8, 7),
                                           (14, 90, 6, 10)])
def test_snp_epoch_matches_reference_on_random_inputs(seed, n, k, d, dtype):
    """One SNP pass (winner update, penalised rivals, win counts) equals the literal reference for
    float32 and float64 rows, with a single seed (no rivals), one feature and more seeds than rows."""
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(n, d)) * rng.uniform(0.5, 5.0)).astype(dtype)
    M0 = rng.normal(size=(k, d))
    w0 = rng.integers(0, 6, size=k).astype(np.int64)
    perm = rng.permutation(n).astype(np.int64)
    eta = float(rng.uniform(0.05, 0.5))
    M, w = M0.copy(), w0.copy()
    _kstar.snp_epoch(X, perm, M, w, eta)
    M_ref, w_ref = snp_epoch_ref(X, perm, M0, w0, eta)
    np.testing.assert_array_equal(w, w_ref)
    # same operations in double precision; the reference's NumPy sums (norms) may be ordered differently
    np.testing.assert_allclose(M, M_ref, rtol=1e-12, atol=1e-12)
    assert w.sum() == w0.sum() + n


@pytest.mark.parametrize("seed, k0, d, n_nodes, max_nodes, T, beta_err", [
    (20, 40, 4, 6, 10, 150, 5e-4), (21, 5, 1, 3, 3, 200, 5e-4), (22, 60, 7, 12, 20, 300, 5e-4),
    (23, 30, 3, 8, 8, 200, 0.02)])
def test_gcs_adapt_matches_reference_on_random_inputs(seed, k0, d, n_nodes, max_nodes, T, beta_err):
    """A block of GCS steps (BMU move, neighbour moves, hit counts, error accrual and decay folded
    through a running scale) equals the per-step reference; inactive nodes are left untouched."""
    rng = np.random.default_rng(seed)
    P = rng.normal(size=(k0, d)) * 3.0
    W = rng.normal(size=(max_nodes, d))  # rows >= n_nodes are inactive garbage: must stay as they are
    E = rng.uniform(size=max_nodes)
    hits = rng.integers(0, 3, size=max_nodes).astype(np.int64)
    adj = np.triu(rng.random((max_nodes, max_nodes)) < 0.4, 1).astype(np.uint8)
    adj[np.arange(n_nodes - 1), np.arange(1, n_nodes)] = 1  # a chain: every active node has a neighbour
    adj = (adj | adj.T).astype(np.uint8)
    draws = rng.integers(k0, size=T).astype(np.int64)
    W0, E0, h0 = W.copy(), E.copy(), hits.copy()
    W_ref, E_ref, h_ref = gcs_adapt_ref(P, draws, W, E, adj, hits, n_nodes, 0.06, 0.002, beta_err)
    _kstar.gcs_adapt(P, draws, W, E, adj, hits, n_nodes, 0.06, 0.002, beta_err)
    np.testing.assert_array_equal(hits, h_ref)
    np.testing.assert_allclose(W, W_ref, rtol=1e-12, atol=1e-14)
    # the kernel divides by the running decay and multiplies back once: a few roundings differ
    np.testing.assert_allclose(E, E_ref, rtol=1e-10)
    np.testing.assert_array_equal(W[n_nodes:], W0[n_nodes:])
    np.testing.assert_array_equal(E[n_nodes:], E0[n_nodes:])
    assert hits.sum() == h0.sum() + T


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("seed, N, d", [(30, 2, 1), (31, 3, 4), (32, 37, 5), (33, 150, 12)])
def test_pairwise_upper_matches_pdist_on_random_inputs(seed, N, d, n_threads):
    """pairwise_upper fills the condensed (pdist-order) distance vector, bit for bit the feature-order
    double sum of the module contract, on one or two threads (duplicate rows give exact zeros)."""
    from reference_kstar import dist_matrix

    rng = np.random.default_rng(seed)
    V = rng.normal(size=(N, d)) * rng.uniform(0.1, 10.0)
    if N > 2:
        V[N - 1] = V[0]  # a duplicate row: distance exactly 0
    out = np.full(N * (N - 1) // 2, np.nan)
    _kstar.pairwise_upper(V, out, n_threads)
    # the reference sums the squared differences in feature order in float64, as the kernel: identical bits
    np.testing.assert_array_equal(out, dist_matrix(V)[np.triu_indices(N, 1)])
    np.testing.assert_allclose(out, pdist(V), rtol=1e-13)  # scipy's own summation order differs


@pytest.mark.parametrize("seed, N, d, m", [(40, 2, 1, 3), (41, 20, 3, 50), (42, 80, 9, 400)])
def test_pair_dists_matches_reference_and_pairwise_upper_bit_for_bit(seed, N, d, m):
    """out[m] = ||V[p0] - V[p1]|| for arbitrary index pairs (either order, i == j, repeats), with the
    same bits as pairwise_upper gives that pair (the strict <= D_s test relies on it)."""
    from reference_kstar import dist_matrix

    rng = np.random.default_rng(seed)
    V = rng.normal(size=(N, d)) * rng.uniform(0.1, 10.0)
    pairs = rng.integers(N, size=(m, 2)).astype(np.int64)
    pairs[0] = [0, 0]
    pairs[1] = [N - 1, 0]
    out = np.full(m, np.nan)
    _kstar.pair_dists(V, pairs, out)
    Dm = dist_matrix(V)  # feature-order float64 sums and sqrt, as the kernel: identical bits
    np.testing.assert_array_equal(out, Dm[pairs[:, 0], pairs[:, 1]])
    assert out[0] == 0.0
    up = np.empty(N * (N - 1) // 2)
    _kstar.pairwise_upper(V, up, 1)
    i, j = pairs.min(1), pairs.max(1)
    off = i != j
    cond = i * N - i * (i + 1) // 2 + (j - i - 1)  # condensed index of (i, j), i < j
    np.testing.assert_array_equal(out[off], up[cond[off]])


def _mutual_pairs_loop(nbr, nd):
    """Every (i, j), i < j, with j in i's list and i in j's list: rows (i, j, rank_ij, rank_ji), D[i, j]."""
    N = nbr.shape[0]
    rank = [{int(j): a + 1 for a, j in enumerate(nbr[i]) if j >= 0} for i in range(N)]
    rows, dist = [], []
    for i in range(N):
        for j in range(i + 1, N):
            if j in rank[i] and i in rank[j]:
                rows.append((i, j, rank[i][j], rank[j][i]))
                dist.append(nd[i, rank[i][j] - 1])
    return np.array(rows, dtype=np.int64).reshape(-1, 4), np.array(dist, dtype=np.float64)


def _check_mutual_pairs(nbr, nd):
    N, B = nbr.shape
    pairs = np.full((N * B, 2), -7, dtype=np.int64)
    ranks = np.full((N * B, 2), -7, dtype=np.int64)
    dist = np.full(N * B, np.nan)
    cnt = _kstar.mutual_pairs(nbr, nd, pairs, ranks, dist)
    ref, ref_dist = _mutual_pairs_loop(nbr, nd)
    assert cnt == len(ref)
    got = np.hstack([pairs[:cnt], ranks[:cnt]])
    o = np.lexsort((got[:, 1], got[:, 0]))  # the pairs as a set: compare in (i, j) order
    np.testing.assert_array_equal(got[o], ref)
    np.testing.assert_array_equal(dist[:cnt][o], ref_dist)
    return cnt


@pytest.mark.parametrize("seed, N, d, B", [(50, 2, 1, 1), (51, 30, 2, 3), (52, 60, 4, 8), (53, 12, 3, 11)])
def test_mutual_pairs_matches_loop_reference_on_knn_lists(seed, N, d, B):
    """On exact B-NN lists of random points, mutual_pairs returns every pair i < j that are in each
    other's list (no other, none twice), both 1-based ranks and D[i, j]."""
    rng = np.random.default_rng(seed)
    V = rng.normal(size=(N, d))
    nbr, nd = knn_lists_ref(V, B)
    assert _check_mutual_pairs(np.ascontiguousarray(nbr), np.ascontiguousarray(nd)) >= 1


@pytest.mark.parametrize("seed", [60, 61, 62])
def test_mutual_pairs_matches_loop_reference_on_random_lists(seed):
    """On arbitrary neighbour lists (random order, asymmetric ranks, -1 padding at the tail of some
    rows) mutual_pairs still finds exactly the mutual pairs with their ranks and distances."""
    rng = np.random.default_rng(seed)
    N, B = 15, 6
    S = rng.uniform(size=(N, N))
    S = S + S.T  # a symmetric "distance" so D[i, j] is well defined
    nbr = np.empty((N, B), dtype=np.int64)
    for i in range(N):
        nbr[i] = rng.choice(np.delete(np.arange(N), i), size=B, replace=False)
        pad = int(rng.integers(0, 3)) if i % 3 == 0 else 0
        if pad:
            nbr[i, B - pad:] = -1
    nd = np.where(nbr >= 0, S[np.arange(N)[:, None], nbr], np.inf)
    assert _check_mutual_pairs(nbr, np.ascontiguousarray(nd)) >= 3


@pytest.mark.parametrize("k_select", ["bic_eff", "bic", "ch"])
def test_estimated_k_never_splits_copies_of_one_point(k_select):
    """With k* estimated, 3 distinct points repeated over 2 and 4 clients give at most 3 clusters and the
    copies of each point one label (the cut never exceeds the distinct subcluster means)."""
    for seed, n_clients in [(0, 2), (1, 4), (2, 4)]:
        P = np.random.default_rng(seed).normal(size=(3, 4)) * 5
        row = np.arange(300) % 3
        ids = np.random.default_rng(seed + 10).integers(0, n_clients, 300)
        est = FedKStarHC(n_clusters=None, k_select=k_select, random_state=seed).fit(P[row], client_ids=ids)
        assert est.n_clusters_ <= 3
        assert all(np.unique(est.labels_[row == r]).size == 1 for r in range(3))
