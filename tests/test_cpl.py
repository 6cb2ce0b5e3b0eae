"""The CPL engine (Numba kernels + orchestration) against the literal NumPy references."""
import functools

import numpy as np
import pytest

from fastfc._cpl import candidate_count, cpl, mcpl, weighted_kmodes

import reference_cpl as R
from conftest import load_split


def _blobs(rng, n, d, k, spread=4.0):
    centres = rng.normal(scale=spread, size=(k, d))
    return centres[rng.integers(k, size=n)] + rng.normal(size=(n, d))


def _update_weights(X, y, k, *, live=None, reference=False):
    """One call of the feature-weight kernel on labels ``y``, fresh uniform weights; returns
    ``(Mw, live)`` after the update."""
    from fastfc._kernels._cpl import cpl_feature_weights

    n, d = X.shape
    cnt = np.bincount(y, minlength=k).astype(np.int64)
    C = np.array([X[y == j].mean(0) if cnt[j] else np.zeros(d) for j in range(k)])
    Mw = np.full((k, d), 1.0 / d)
    live = np.ones(k, dtype=np.uint8) if live is None else np.asarray(live, dtype=np.uint8)
    wnan = np.zeros(k, dtype=np.uint8)
    bufs = [np.empty((k, d)) for _ in range(6)] + [np.empty((7, d)), np.empty((2, d), dtype=np.int64)]
    cpl_feature_weights(X, y.astype(np.int64), cnt, C, Mw, live, wnan, np.ones(k), int(reference), 1e-12,
                        *bufs)
    return Mw, live


@pytest.mark.parametrize("semantics", ["robust", "reference"])
@pytest.mark.parametrize("case", range(12))
def test_cpl_matches_reference_on_random_inputs(semantics, case):
    rng = np.random.default_rng(100 + case)
    n = int(rng.integers(8, 90))
    d = int(rng.integers(1, 12))
    X = _blobs(rng, n, d, int(rng.integers(1, 5)))
    k = candidate_count(0.5, n)
    seeds = rng.permutation(n)[:k]
    got = cpl(X, k, seeds=seeds, semantics=semantics)
    centers, labels, k_out, passes = R.reference_cpl(X, k, seeds, semantics=semantics)
    np.testing.assert_array_equal(got.labels, labels)
    assert got.n_clusters == k_out and got.n_passes == passes
    np.testing.assert_allclose(got.centers, centers, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("split", ["US", "VE"])
@pytest.mark.parametrize("semantics", ["robust", "reference"])
def test_cpl_matches_reference_on_published_clients(split, semantics):
    X_clients, _ = load_split(split)
    X = X_clients[0]
    rng = np.random.default_rng(7)
    k = candidate_count(0.5, len(X))
    seeds = rng.permutation(len(X))[:k]
    got = cpl(X, k, seeds=seeds, semantics=semantics)
    _, labels, k_out, _ = R.reference_cpl(X, k, seeds, semantics=semantics)
    np.testing.assert_array_equal(got.labels, labels)
    assert got.n_clusters == k_out


@pytest.mark.parametrize("case", range(5))
def test_objective_kernel_matches_reference(case):
    """GOLD's CPL objective (log-sum-exp kernel) against the naive linear-domain formula."""
    from fastfc._kernels._cpl import cpl_objective

    rng = np.random.default_rng(400 + case)
    n, d, k = 50, int(rng.integers(1, 10)), int(rng.integers(2, 6))
    X = _blobs(rng, n, d, k)
    y = rng.integers(k, size=n).astype(np.int64)
    C = rng.normal(size=(k, d))
    Mw = rng.random((k, d))
    Mw /= Mw.sum(1, keepdims=True)
    usable = np.ones(k, dtype=np.uint8)
    got = cpl_objective(X, y, C, Mw, usable, np.arange(k, dtype=np.int64))
    assert got == pytest.approx(R.reference_objective(X, y, C, Mw), rel=1e-12)


def test_single_cluster_objective_is_n():
    X = _blobs(np.random.default_rng(3), 60, 3, 3)
    one = cpl(X, 1, seeds=[0])
    assert one.n_clusters == 1 and one.objective == pytest.approx(60.0)


def test_float32_input_gives_float64_result_and_same_labels():
    rng = np.random.default_rng(5)
    X = _blobs(rng, 50, 4, 3).astype(np.float32)
    seeds = rng.permutation(50)[:25]
    a = cpl(X, 25, seeds=seeds)
    b = cpl(X.astype(np.float64), 25, seeds=seeds)
    assert a.centers.dtype == np.float64
    np.testing.assert_array_equal(a.labels, b.labels)


# ------------------------------------------------------------------ edge cases of the specs
def test_k_one_returns_the_mean_at_once():
    X = np.arange(12.0).reshape(6, 2)
    res = cpl(X, 1, seeds=[3])
    np.testing.assert_allclose(res.centers, X.mean(0, keepdims=True))
    assert res.n_passes == 0 and (res.labels == 0).all()


def test_more_candidates_than_rows_is_clamped():
    """k > n runs as k = n: the same result as asking for n candidates with the same seeds."""
    X = np.random.default_rng(0).normal(size=(7, 2))
    seeds = np.array([3, 0, 6, 1, 5, 2, 4])
    res, ref = cpl(X, 50, seeds=seeds), cpl(X, 7, seeds=seeds)
    np.testing.assert_array_equal(res.labels, ref.labels)
    assert res.n_clusters == ref.n_clusters and res.n_passes == ref.n_passes


@pytest.mark.parametrize("semantics", ["robust", "reference"])
def test_constant_features_and_duplicate_rows(semantics):
    rng = np.random.default_rng(11)
    X = _blobs(rng, 40, 3, 2)
    X[:, 1] = 2.5  # constant feature
    X[20:30] = X[0]  # duplicate rows
    seeds = rng.permutation(40)[:20]
    got = cpl(X, 20, seeds=seeds, semantics=semantics)
    _, labels, k_out, _ = R.reference_cpl(X, 20, seeds, semantics=semantics)
    np.testing.assert_array_equal(got.labels, labels)
    assert np.isfinite(got.centers).all()
    # duplicates always share a cluster
    assert len(np.unique(got.labels[20:30])) == 1


@pytest.mark.parametrize("semantics", ["robust", "reference"])
@pytest.mark.parametrize("case", range(6))
def test_converged_run_leaves_no_singleton_cluster(semantics, case):
    """fed_hire.md §3.1.6 (a) / §3.1.7 rule 2: a candidate with m_j <= 1 at a weight update is
    dead, its member moves in the next pass. So a run that stopped because a pass changed no
    label (after at least one weight update) has no cluster of exactly one row."""
    rng = np.random.default_rng(case)
    X = _blobs(rng, 80, 2, 3)
    seeds = rng.permutation(80)[:40]
    first = np.bincount(cpl(X, 40, seeds=seeds, semantics=semantics, max_passes=1).labels)
    assert (first == 1).sum() >= 5  # singletons do exist before the first update: the check below can fail
    res = cpl(X, 40, seeds=seeds, semantics=semantics)
    assert 1 < res.n_passes < 31  # converged, not stopped by the cap (no update after the last pass)
    sizes = np.bincount(res.labels)
    assert sizes.sum() == 80 and sizes.size == res.n_clusters
    assert sizes.min() >= 2, f"singleton clusters survived: sizes {sizes.tolist()}"


def test_singleton_rule_kills_every_singleton_but_never_the_last_live_candidate():
    """Robust rule 2 at the weight-update kernel: with one candidate of two rows the singletons
    die; when every live candidate is a singleton, the first live one stays (uniform weights)."""
    X = _blobs(np.random.default_rng(8), 6, 3, 2)
    y = np.array([0, 0, 1, 2, 3, 4])  # candidate 0 has two rows, 1..4 are singletons, 5 is empty and dead
    live = _update_weights(X, y, 6, live=[1, 1, 1, 1, 1, 0])[1]
    np.testing.assert_array_equal(live, [1, 0, 0, 0, 0, 0])
    y = np.array([1, 2, 3, 4, 5, 0])[:5]  # all live candidates are singletons; candidate 0 is dead
    Mw, live = _update_weights(X[:5], y, 6, live=[0, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(live, [0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(Mw[1], np.full(3, 1 / 3))


def test_cpl_bad_input():
    X = np.ones((10, 2))
    with pytest.raises(ValueError, match="distinct"):
        cpl(X, 3, seeds=[0, 0, 1])
    with pytest.raises(ValueError, match="row indices"):
        cpl(X, 3, seeds=[0, 1, 10])
    with pytest.raises(ValueError, match="NaN"):
        cpl(np.array([[np.nan, 1.0], [0, 0]]), 2, seeds=[0, 1])
    with pytest.raises(ValueError, match="semantics"):
        cpl(X, 3, seeds=[0, 1, 2], semantics="bogus")
    with pytest.raises(ValueError, match="seeds holds"):
        cpl(X, 3, seeds=[0, 1])


def test_candidate_count_rounds_half_to_even():
    assert candidate_count(0.5, 5) == 2  # round(2.5) = 2
    assert candidate_count(0.5, 7) == 4  # round(3.5) = 4
    assert candidate_count(0.5, 1) == 1
    assert candidate_count(0.5, 2) == 1


# --------------------------------------------------------------------------------- MCPL
def test_mcpl_levels_strictly_decrease():
    rng = np.random.default_rng(4)
    C = _blobs(rng, 120, 3, 5)
    for seed in range(5):
        g = np.random.default_rng(seed)
        levels = mcpl(C, draw_seeds=lambda n, k: g.permutation(n)[:k])
        sizes = [int(l.max()) + 1 for l in levels]
        assert levels and all(a > b for a, b in zip(sizes, sizes[1:]))
        assert all(l.shape == (120,) for l in levels)


def test_mcpl_with_tolerance_runs_at_least_as_many_stages():
    rng = np.random.default_rng(6)
    C = _blobs(rng, 100, 2, 4)
    calls = {"plain": 0, "tol": 0}

    def drawer(key, seed):
        g = np.random.default_rng(seed)

        def draw(n, k):
            calls[key] += 1
            return g.permutation(n)[:k]
        return draw

    mcpl(C, draw_seeds=drawer("plain", 0))
    mcpl(C, draw_seeds=drawer("tol", 0), tol=0.0)  # |dJ| < 0 never holds: runs to max_stages or k < 2
    assert calls["tol"] >= calls["plain"]


# ------------------------------------------------------------------------ weighted k-modes
@pytest.mark.parametrize("case", range(10))
def test_weighted_kmodes_matches_reference(case):
    rng = np.random.default_rng(200 + case)
    n = int(rng.integers(10, 120))
    L = int(rng.integers(1, 6))
    sizes = np.sort(rng.integers(2, 30, size=L))[::-1]
    Z = np.column_stack([rng.integers(s, size=n) for s in sizes])
    n_unique = np.unique(Z, axis=0).shape[0]
    k = int(min(n_unique, rng.integers(2, 8)))
    seed_rows = rng.choice(n_unique, k, replace=False)
    np.testing.assert_array_equal(
        weighted_kmodes(Z, k, seed_rows=seed_rows), R.reference_weighted_kmodes(Z, k, seed_rows)
    )


def test_weighted_kmodes_too_few_distinct_rows():
    Z = np.zeros((10, 2), dtype=np.int64)
    with pytest.raises(ValueError, match="distinct rows"):
        weighted_kmodes(Z, 2, seed_rows=[0, 1])


def test_weighted_kmodes_is_deterministic_and_labels_in_range():
    rng = np.random.default_rng(9)
    Z = np.column_stack([rng.integers(6, size=200), rng.integers(3, size=200)])
    a = weighted_kmodes(Z, 4, seed_rows=[0, 3, 5, 9])
    b = weighted_kmodes(Z, 4, seed_rows=[0, 3, 5, 9])
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0 and a.max() < 4


@pytest.mark.parametrize("semantics", ["robust", "reference"])
@pytest.mark.parametrize("case", range(6))
def test_feature_weight_kernel_matches_direct_formulas(semantics, case):
    rng = np.random.default_rng(300 + case)
    n, d, k = int(rng.integers(12, 80)), int(rng.integers(1, 9)), int(rng.integers(2, 7))
    X = _blobs(rng, n, d, k)
    if case % 2:
        X[:, 0] = 1.0  # a constant feature
    y = rng.integers(k, size=n).astype(np.int64)
    y[:k] = np.arange(k)  # every candidate has a member; some may be singletons
    Mw, live = _update_weights(X, y, k, reference=semantics == "reference")
    C = np.array([X[y == j].mean(0) for j in range(k)])
    Mw_ref, live_ref = R.reference_feature_weights(X, y, k, C, semantics)
    np.testing.assert_array_equal(live.astype(bool), live_ref)
    rows = live_ref
    np.testing.assert_allclose(Mw[rows], Mw_ref[rows], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(Mw[rows].sum(1), 1.0, rtol=1e-12)


@functools.lru_cache(maxsize=None)
def _jitted_drivers():
    """Numba drivers of the private distance kernels, compiled once per session (a driver
    defined inside each parametrised test compiled anew for every parameter: ~30 s)."""
    import numba

    from fastfc._kernels._cpl import _build_live_t, _live_dists_t, _sq_dist, _sq_dist_buf

    @numba.njit
    def both(X, C, Mw):
        tmp = np.empty(X.shape[1])
        stk = np.empty((3, 64), dtype=np.int64)
        stv = np.empty(64)
        out = np.empty((2, C.shape[0]))
        for j in range(C.shape[0]):
            out[0, j] = _sq_dist(X, 0, C, Mw, j)
            out[1, j] = _sq_dist_buf(X, 0, C, Mw, j, tmp, stk, stv)
        return out

    @numba.njit
    def dists(X, C, Mw, live_idx):
        k, d = C.shape
        n_live = live_idx.shape[0]
        CT = np.empty((d, k))
        MwT = np.empty((d, k))
        tpos = np.empty(k, dtype=np.int64)
        acc = np.empty((8, k))
        out = np.empty((X.shape[0], n_live))
        buf = np.empty(k)
        _build_live_t(C, Mw, live_idx, n_live, CT, MwT, tpos)
        for i in range(X.shape[0]):
            _live_dists_t(X, i, CT, MwT, n_live, acc, buf)
            out[i] = buf[:n_live]
        return out, tpos

    return both, dists


@pytest.mark.parametrize("d", [1, 7, 8, 13, 128, 129, 300, 777, 2100])
def test_distance_sums_follow_numpy_order_bit_for_bit(d):
    """The two weighted-distance kernels give exactly np.sum(Mw * (x - c) ** 2) for any d."""
    both = _jitted_drivers()[0]
    rng = np.random.default_rng(d)
    X = rng.normal(size=(1, d)) * 10 ** rng.uniform(-3, 3, size=d)
    C = rng.normal(size=(4, d))
    Mw = rng.random((4, d))
    ref = np.sum(Mw * (X[0] - C) ** 2, axis=1)
    got = both(X, C, Mw)
    np.testing.assert_array_equal(got[0], ref)
    np.testing.assert_array_equal(got[1], ref)


@pytest.mark.parametrize("d", [1, 5, 7, 8, 10, 13, 15, 16, 17, 23, 24, 31, 64, 128])
def test_transposed_live_distances_follow_numpy_order_bit_for_bit(d):
    """The candidate-vectorised kernel (d <= 128: register paths below 24 features, the
    accumulator array above) gives exactly np.sum(Mw * (x - c) ** 2), listed candidates only."""
    dists = _jitted_drivers()[1]
    rng = np.random.default_rng(1000 + d)
    X = rng.normal(size=(5, d)) * 10 ** rng.uniform(-3, 3, size=d)
    C = rng.normal(size=(37, d))
    Mw = rng.random((37, d))
    live_idx = np.sort(rng.choice(37, size=23, replace=False)).astype(np.int64)
    got, tpos = dists(X, C, Mw, live_idx)
    ref = np.stack([np.sum(Mw[live_idx] * (x - C[live_idx]) ** 2, axis=1) for x in X])
    np.testing.assert_array_equal(got, ref)
    expected_tpos = np.full(37, -1)
    expected_tpos[live_idx] = np.arange(23)
    np.testing.assert_array_equal(tpos, expected_tpos)


@pytest.mark.parametrize("semantics", ["robust", "reference"])
def test_cpl_matches_reference_above_128_features(semantics):
    """d > 128 takes the general pairwise-order distance path of the CPL pass."""
    rng = np.random.default_rng(77)
    X = _blobs(rng, 40, 140, 3, spread=1.0)
    seeds = rng.permutation(40)[:20]
    got = cpl(X, 20, seeds=seeds, semantics=semantics)
    _, labels, k_out, passes = R.reference_cpl(X, 20, seeds, semantics=semantics)
    np.testing.assert_array_equal(got.labels, labels)
    assert got.n_clusters == k_out and got.n_passes == passes


# ---------------------------------------------------------------- parallel inside a client
@pytest.mark.parametrize("d", [1, 5, 7, 8, 10, 13, 15, 16, 17, 23, 24, 31, 64, 128])
def test_block_and_single_candidate_distances_match_the_numpy_order(d):
    """The parallel pass's distances: a block of rows ahead (on two threads) and one candidate
    at a time (the centroids that moved) are both exactly np.sum(Mw * (x - c) ** 2)."""
    import numba

    from fastfc._kernels._cpl import _block_dists_t, _one_dist_t

    rng = np.random.default_rng(2000 + d)
    X = rng.normal(size=(9, d)) * 10 ** rng.uniform(-3, 3, size=d)
    C = rng.normal(size=(37, d))
    Mw = rng.random((37, d))
    ref = np.stack([np.sum(Mw * (x - C) ** 2, axis=1) for x in X])
    CT, MwT = np.ascontiguousarray(C.T), np.ascontiguousarray(Mw.T)
    out = np.full((9, 37), np.nan)
    prev = numba.get_num_threads()
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    try:
        _block_dists_t(X, 2, 7, CT, MwT, 37, np.empty((3, 8, 37)), out)
    finally:
        numba.set_num_threads(prev)
    np.testing.assert_array_equal(out[:7], ref[2:])
    single = np.array([[_one_dist_t(X, i, CT, MwT, t) for t in range(37)] for i in range(9)])
    np.testing.assert_array_equal(single, ref)
    from fastfc._kernels._cpl import _one_dist_tc

    called = np.array([[_one_dist_tc(X, i, CT, MwT, t) for t in range(37)] for i in range(9)])
    np.testing.assert_array_equal(called, ref)
    from fastfc._kernels._cpl import _one_dist_r

    rows = np.array([[_one_dist_r(X, i, C, Mw, j) for j in range(37)] for i in range(9)])
    np.testing.assert_array_equal(rows, ref)


@pytest.mark.parametrize("d", [3, 10, 50])
def test_block_lists_hold_the_largest_bounds(d):
    """The list pass's parallel block: the distances are NumPy's, and per row the lists hold
    the largest ``BLb - D/2`` and ``BUb - D/2`` (descending) with their positions."""
    import numba

    from fastfc._kernels import _cpl as K

    rng = np.random.default_rng(5000 + d)
    n, k, nl = 40, 30, 23
    X = rng.normal(size=(n, d))
    C = rng.normal(size=(k, d))
    Mw = rng.random((k, d))
    BLb = rng.normal(size=k) - 1.0
    BUb = BLb + rng.random(k)
    BLb[4] = BUb[4] = -np.inf  # a dead candidate
    ref = np.stack([np.sum(Mw[:nl] * (x - C[:nl]) ** 2, axis=1) for x in X])
    CT, MwT = np.ascontiguousarray(C[:nl].T), np.ascontiguousarray(Mw[:nl].T)
    i0, nb = 3, 31
    DB = np.full((nb, nl), np.nan)
    LOv, HIv = np.empty((nb, K._TOP_LO)), np.empty((nb, K._TOP_HI))
    LOt, HIt = np.empty((nb, K._TOP_LO), dtype=np.int64), np.empty((nb, K._TOP_HI), dtype=np.int64)
    prev = numba.get_num_threads()
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    try:
        K._block_lists_t(X, i0, nb, CT, MwT, nl, BLb, BUb, np.empty((2, 8, nl)), DB, LOv, LOt, HIv, HIt)
    finally:
        numba.set_num_threads(prev)
    np.testing.assert_array_equal(DB, ref[i0:i0 + nb])
    for r in range(nb):
        for B, V, T in ((BLb, LOv, LOt), (BUb, HIv, HIt)):
            vals = B[:nl] - 0.5 * DB[r]
            top = np.sort(vals[np.isfinite(vals)])[::-1][:V.shape[1]]
            np.testing.assert_array_equal(V[r, :top.size], top)
            np.testing.assert_array_equal(vals[T[r, :top.size]], top)
            assert (T[r, top.size:] == -1).all() and (V[r, top.size:] == -np.inf).all()


@pytest.mark.parametrize("semantics", ["robust", "reference"])
@pytest.mark.parametrize("d", [7, 10, 16, 30])
def test_cpl_is_bit_identical_on_two_threads(semantics, d):
    """n_threads=2 (distances computed a block ahead -- for d >= _HINT_MAX_D; below, the sequential
    hinted pass on both --, feature statistics split by feature, columns sorted in threads) gives
    the very same run as n_threads=1."""
    from fastfc._kernels import _cpl as K

    rng = np.random.default_rng(300 + d)
    n, k = 3000, 300
    assert k * d >= K._PAR_MIN_WORK and n >= K._PAR_MIN_ROWS  # the first passes take the parallel path
    X = _blobs(rng, n, d, 6, spread=2.0)
    seeds = rng.permutation(n)[:k]
    one = cpl(X, k, seeds=seeds, semantics=semantics, n_threads=1)
    two = cpl(X, k, seeds=seeds, semantics=semantics, n_threads=2)
    assert one.n_passes == two.n_passes > 1
    np.testing.assert_array_equal(one.labels, two.labels)
    np.testing.assert_array_equal(one.centers, two.centers)
    assert one.objective == two.objective


def _pass_case(rng, case, n_min, n_max, d_max, min_work):
    """``(X, k, seeds)`` of a random multi-pass case: clustered rows, with many ties (``case % 3 == 1``)
    or duplicated rows (``case % 3 == 2``), ``k`` candidates with ``k d`` above ``min_work``."""
    n = int(rng.integers(n_min, n_max))
    d = int(rng.integers(2, d_max))
    k = int(rng.integers(max(20, min_work // d + 1), 300))
    X = _blobs(rng, n, d, int(rng.integers(2, 12)), spread=float(rng.uniform(0.5, 4)))
    if case % 3 == 1:
        X = np.round(X)  # many ties
    elif case % 3 == 2:
        X[n // 2:] = X[:n - n // 2]  # duplicated rows
    return X, k, rng.permutation(n)[:k]


def _one_pass_state(X, k, seeds):
    """The state of :func:`fastfc._cpl.cpl` before its first pass (robust semantics)."""
    from fastfc._kernels._cpl import cpl_init_logw

    n, d = X.shape
    S = np.ascontiguousarray(X[seeds])
    y = np.full(n, -1, dtype=np.int64)
    y[seeds] = np.arange(k)
    logw = np.empty(k)
    cpl_init_logw(np.ones(k), logw)
    return dict(S=S, C=S.copy(), cnt=np.ones(k, dtype=np.int64), Mw=np.full((k, d), 1.0 / d),
                theta=np.ones(k), logw=logw, wins=np.ones(k), y=y, live=np.ones(k, dtype=np.uint8),
                live_idx=np.arange(k, dtype=np.int64))


@pytest.mark.parametrize("case", range(6))
def test_list_pass_equals_the_sequential_pass(case):
    """The parallel list pass (robust semantics) leaves every array of the state exactly as the
    sequential pass does: two passes from the same start, random clustered, tied (integer) and
    duplicated rows, feature weights updated in between."""
    import numba

    from fastfc._kernels import _cpl as K

    X, k, seeds = _pass_case(np.random.default_rng(700 + case), case, K._PAR_MIN_ROWS, 4000, 40, K._LIST_MIN_WORK)
    n, d = X.shape
    states = []
    for nt in (1, 2):
        st = _one_pass_state(X, k, seeds)
        n_live = k
        wsum = float(k)
        prev = numba.get_num_threads()
        numba.set_num_threads(min(nt, numba.config.NUMBA_NUM_THREADS))
        try:
            for p in range(2):
                args = (X, st["S"], st["C"], st["cnt"], st["Mw"], st["theta"], st["logw"], st["wins"], wsum,
                        st["y"], st["live"], st["live_idx"], n_live)
                if nt == 1:
                    ch, n_live = K.cpl_pass(*args, np.ones(k, dtype=np.uint8), np.zeros(k, dtype=np.uint8),
                                            0.05, 0, 1)
                else:
                    assert n_live * d >= K._LIST_MIN_WORK or p == 1
                    ch, n_live = K._cpl_pass_lists(*args, 0.05, 2)
                wsum += n
                bufs = [np.empty((k, d)) for _ in range(6)] + [np.empty((7, d)), np.empty((2, d), dtype=np.int64)]
                K.cpl_feature_weights(X, st["y"], st["cnt"], st["C"], st["Mw"], st["live"], np.zeros(k, np.uint8),
                                      st["theta"], 0, 1e-12, *bufs)
                n_live = K.cpl_compact_live(st["live"], st["live_idx"], np.ones(k, dtype=np.uint8))
        finally:
            numba.set_num_threads(prev)
        states.append(st)
    for key in states[0]:
        np.testing.assert_array_equal(states[0][key], states[1][key], err_msg=key)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("d", [1, 7, 10, 16, 23, 50, 128])
def test_overlapped_pass_distance_rows_and_moves_match_numpy(d, dtype):
    """The overlapped pass's kernels: the distances of a range of a block's rows computed on the
    calling thread (``_dist_rows_t``) are exactly np.sum(Mw * (x - c) ** 2) and leave the other
    rows alone, and a centroid's weighted move from a transposed snapshot column
    (``_moved_from_t``) is NumPy's sqrt(sum(Mw * (c - c0) ** 2)) up to rounding (it only
    bounds). Data drawn in ``dtype``; the CPL engine computes in float64 (float32 input is
    converted), so the kernels take float64."""
    from fastfc._kernels._cpl import _dist_rows_t, _moved_from_t

    rng = np.random.default_rng(4000 + d)
    X = (rng.normal(size=(12, d)) * 10 ** rng.uniform(-3, 3, size=d)).astype(dtype).astype(np.float64)
    C = rng.normal(size=(31, d)).astype(dtype).astype(np.float64)
    C0 = rng.normal(size=(31, d)).astype(dtype).astype(np.float64)
    Mw = rng.random((31, d)).astype(dtype).astype(np.float64)
    ref = np.stack([np.sum(Mw[:29] * (x - C[:29]) ** 2, axis=1) for x in X])
    CT, MwT = np.ascontiguousarray(C.T), np.ascontiguousarray(Mw.T)
    out = np.full((8, 31), np.nan)
    _dist_rows_t(X, 3, 2, 7, CT, MwT, 29, np.empty((8, 31)), out)
    np.testing.assert_array_equal(out[2:7, :29], ref[5:10])
    assert np.isnan(out[:2]).all() and np.isnan(out[7:]).all() and np.isnan(out[:, 29:]).all()
    C0T = np.ascontiguousarray(C0.T)
    for j in range(31):
        got = _moved_from_t(C, Mw, j, C0T, (j * 7) % 31)
        want = np.sqrt(np.sum(Mw[j] * (C[j] - C0[(j * 7) % 31]) ** 2))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert _moved_from_t(C, Mw, 4, CT, 4) == 0.0  # an unmoved column: exactly no move


@pytest.mark.parametrize("case", range(8))
def test_overlapped_pass_equals_the_sequential_pass(case):
    """The overlapped pass (robust semantics, two threads: the walk of one block beside the
    distances of the next, against a snapshot one block older) leaves every array of the state
    exactly as the sequential pass does: three passes from the same start, random clustered,
    tied (integer) and duplicated rows, feature weights updated in between."""
    import numba

    from fastfc._kernels import _cpl as K

    X, k, seeds = _pass_case(np.random.default_rng(1700 + case), case, K._PAR_MIN_ROWS, 6000, 60, K._PAR_MIN_WORK)
    n, d = X.shape
    states = []
    for nt in (1, 2):
        st = _one_pass_state(X, k, seeds)
        n_live = k
        wsum = float(k)
        prev = numba.get_num_threads()
        numba.set_num_threads(min(nt, numba.config.NUMBA_NUM_THREADS))
        try:
            for p in range(3):
                args = (X, st["S"], st["C"], st["cnt"], st["Mw"], st["theta"], st["logw"], st["wins"], wsum,
                        st["y"], st["live"], st["live_idx"], n_live)
                if nt == 1:
                    ch, n_live = K.cpl_pass(*args, np.ones(k, dtype=np.uint8), np.zeros(k, dtype=np.uint8),
                                            0.05, 0, 1)
                else:
                    ch, n_live = K._cpl_pass_ovd(*args, 0.05)
                wsum += n
                bufs = [np.empty((k, d)) for _ in range(6)] + [np.empty((7, d)), np.empty((2, d), dtype=np.int64)]
                K.cpl_feature_weights(X, st["y"], st["cnt"], st["C"], st["Mw"], st["live"], np.zeros(k, np.uint8),
                                      st["theta"], 0, 1e-12, *bufs)
                n_live = K.cpl_compact_live(st["live"], st["live_idx"], np.ones(k, dtype=np.uint8))
        finally:
            numba.set_num_threads(prev)
        states.append(st)
    for key in states[0]:
        np.testing.assert_array_equal(states[0][key], states[1][key], err_msg=key)


@pytest.mark.parametrize("q", [1, 4, 7])
def test_partial_distances_are_numpys_running_sums(q):
    """The hinted pass's bounds: ``_live_partial_t`` gives, for every listed candidate, the
    running sum of its first q weighted terms, exactly as a NumPy loop adds them (float64 only:
    the CPL engine converts every input to float64)."""
    from fastfc._kernels._cpl import _live_partial_t

    rng = np.random.default_rng(3000 + q)
    d = 10
    X = rng.normal(size=(3, d)) * 10 ** rng.uniform(-3, 3, size=d)
    C = rng.normal(size=(29, d))
    Mw = rng.random((29, d))
    CT, MwT = np.ascontiguousarray(C.T), np.ascontiguousarray(Mw.T)
    for i in range(3):
        out = np.full(29, np.nan)
        _live_partial_t(X, i, CT, MwT, 23, q, out)
        terms = Mw[:23] * (X[i] - C[:23]) ** 2
        ref = terms[:, 0].copy()
        for z in range(1, q):
            ref += terms[:, z]
        np.testing.assert_array_equal(out[:23], ref)
        assert np.isnan(out[23:]).all()


@pytest.mark.parametrize("case", range(6))
def test_row_hints_change_no_result(case):
    """The sequential pass's per-row hints (each row's last rival, ``rv``) only order the work:
    passes run with the hints they leave, with no hints, and with random (wrong) hints leave
    every array of the state bit-identical (clustered, tied and duplicated rows; d < 16, where
    the hints are used)."""
    from fastfc._kernels import _cpl as K

    rng = np.random.default_rng(900 + case)
    n = int(rng.integers(300, 2500))
    d = int(rng.integers(1, K._HINT_MAX_D))
    k = int(rng.integers(K._HINT_MIN_LIVE + 2, 150))
    X = _blobs(rng, n, d, int(rng.integers(2, 12)), spread=float(rng.uniform(0.5, 4)))
    if case % 3 == 1:
        X = np.round(X)  # many ties
    elif case % 3 == 2:
        X[n // 2:] = X[:n - n // 2]  # duplicated rows
    seeds = rng.permutation(n)[:k]
    states = []
    for mode in ("carried", "none", "random"):
        st = _one_pass_state(X, k, seeds)
        rv = np.full(n, -1, dtype=np.int32)
        n_live = k
        wsum = float(k)
        n_hinted = 0
        for p in range(6):
            if mode == "none":
                rv[:] = -1
            elif mode == "random":
                rv[:] = rng.integers(-1, k, size=n)
            n_hinted += int((rv >= 0).sum())
            args = (X, st["S"], st["C"], st["cnt"], st["Mw"], st["theta"], st["logw"], st["wins"], wsum,
                    st["y"], st["live"], st["live_idx"], n_live)
            ch, n_live = K.cpl_pass(*args, np.ones(k, dtype=np.uint8), np.zeros(k, dtype=np.uint8),
                                    0.05, 0, 1, rv)
            wsum += n
            bufs = [np.empty((k, d)) for _ in range(6)] + [np.empty((7, d)), np.empty((2, d), dtype=np.int64)]
            K.cpl_feature_weights(X, st["y"], st["cnt"], st["C"], st["Mw"], st["live"], np.zeros(k, np.uint8),
                                  st["theta"], 0, 1e-12, *bufs)
            n_live = K.cpl_compact_live(st["live"], st["live_idx"], np.ones(k, dtype=np.uint8))
        if mode != "none":
            assert n_hinted > 0
        states.append(st)
    for st in states[1:]:
        for key in states[0]:
            np.testing.assert_array_equal(states[0][key], st[key], err_msg=key)


@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cpl_is_bit_identical_on_two_threads_random(case, dtype):
    """Whole CPL runs on random shapes (float32 input is converted): one thread and two give
    the same labels, centres, pass count and objective."""
    rng = np.random.default_rng(60 + case)
    n = int(rng.integers(1100, 5000))
    d = int(rng.integers(2, 60))
    X = _blobs(rng, n, d, int(rng.integers(2, 15)), spread=float(rng.uniform(1, 5))).astype(dtype)
    k = int(rng.integers(50, 400))
    seeds = rng.permutation(n)[:k]
    one = cpl(X, k, seeds=seeds, n_threads=1)
    two = cpl(X, k, seeds=seeds, n_threads=2)
    assert one.n_passes == two.n_passes
    np.testing.assert_array_equal(one.labels, two.labels)
    np.testing.assert_array_equal(one.centers, two.centers)
    assert one.objective == two.objective


@pytest.mark.parametrize("reference", [0, 1])
def test_feature_weights_are_bit_identical_on_two_threads(reference):
    from fastfc._kernels._cpl import cpl_feature_weights
    import numba

    rng = np.random.default_rng(11)
    n, d, k = 2000, 9, 12
    X = _blobs(rng, n, d, 4)
    y = rng.integers(k, size=n).astype(np.int64)
    cnt = np.bincount(y, minlength=k).astype(np.int64)
    C = np.array([X[y == j].mean(0) for j in range(k)])
    outs = []
    for nt in (1, 2):
        Mw = np.full((k, d), 1.0 / d)
        live = np.ones(k, dtype=np.uint8)
        wnan = np.zeros(k, dtype=np.uint8)
        bufs = [np.empty((k, d)) for _ in range(6)] + [np.empty((7, d)), np.empty((2, d), dtype=np.int64)]
        prev = numba.get_num_threads()
        numba.set_num_threads(min(nt, numba.config.NUMBA_NUM_THREADS))
        try:
            cpl_feature_weights(X, y, cnt, C, Mw, live, wnan, np.ones(k), reference, 1e-12, *bufs, 0, nt)
        finally:
            numba.set_num_threads(prev)
        outs.append((Mw, live, wnan, bufs))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    for a, b in zip(outs[0][3], outs[1][3]):
        np.testing.assert_array_equal(a, b)
    assert np.isfinite(outs[0][0]).all()


@pytest.mark.parametrize("semantics", ["robust", "reference"])
@pytest.mark.parametrize("case", range(4))
def test_feature_weights_match_direct_formulas_with_ties(semantics, case):
    """Integer features (many ties; clusters and complements constant on a feature): the
    complement extremes taken from the clusters' own extremes give the direct formulas."""
    rng = np.random.default_rng(900 + case)
    n, d, k = int(rng.integers(30, 120)), int(rng.integers(2, 7)), int(rng.integers(2, 6))
    X = rng.integers(0, 3, size=(n, d)).astype(np.float64)
    y = rng.integers(k, size=n).astype(np.int64)
    y[:k] = np.arange(k)
    X[y == 0, 0] = 2.0  # cluster 0 constant on feature 0 at the global maximum
    X[y != 1, 1 % d] = 1.0  # the complement of cluster 1 constant on feature 1
    Mw, live = _update_weights(X, y, k, reference=semantics == "reference")
    C = np.array([X[y == j].mean(0) for j in range(k)])
    Mw_ref, live_ref = R.reference_feature_weights(X, y, k, C, semantics)
    np.testing.assert_array_equal(live.astype(bool), live_ref)
    np.testing.assert_allclose(Mw[live_ref], Mw_ref[live_ref], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", range(2))
def test_objective_is_bit_identical_on_two_threads(case):
    """Rows scored in parallel and summed in row order: the same bits as one thread, and the
    naive formula's value."""
    import numba

    from fastfc._kernels import _cpl as K

    rng = np.random.default_rng(40 + case)
    n, d, k = K._PAR_MIN_OBJ_ROWS + 123, 6, 5
    X = _blobs(rng, n, d, k)
    y = rng.integers(k, size=n).astype(np.int64)
    C = np.array([X[y == j].mean(0) for j in range(k)])
    Mw = rng.random((k, d))
    Mw /= Mw.sum(1, keepdims=True)
    usable = np.ones(k, dtype=np.uint8)
    act = np.arange(k, dtype=np.int64)
    one = K.cpl_objective(X, y, C, Mw, usable, act, 1)
    prev = numba.get_num_threads()
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    try:
        two = K.cpl_objective(X, y, C, Mw, usable, act, 2)
    finally:
        numba.set_num_threads(prev)
    assert one == two
    assert one == pytest.approx(R.reference_objective(X, y, C, Mw), rel=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(1, 3), (7, 1), (1000, 13), (5000, 64)])
def test_column_moments_and_shift_scale_match_numpy(shape, dtype):
    """The standardisation kernels give NumPy's bits: ``X.mean(0)``, ``X.var(0)`` and
    ``(X - mean) / scale`` (float32 rows are passed as float64, as ``standardize_rows`` does)."""
    from fastfc._kernels._cpl import col_moments, shift_scale_rows

    rng = np.random.default_rng(shape[0] + shape[1])
    X = (rng.normal(size=shape) * 10 ** rng.uniform(-4, 4, size=shape[1]) + 50.0).astype(dtype)
    X = np.ascontiguousarray(X, dtype=np.float64)
    mean, var = np.empty(shape[1]), np.empty(shape[1])
    col_moments(X, mean, var)
    np.testing.assert_array_equal(mean, X.mean(axis=0))
    np.testing.assert_array_equal(var, X.var(axis=0))
    scale = rng.uniform(0.1, 3.0, size=shape[1])
    Z = np.empty(shape)
    shift_scale_rows(X, mean, scale, Z)
    np.testing.assert_array_equal(Z, (X - mean) / scale)


@pytest.mark.parametrize("n", [1500, 12000])
@pytest.mark.parametrize("nt", [1, 2])
@pytest.mark.parametrize("reference", [0, 1])
def test_feature_weights_of_changed_clusters_only_equal_a_full_update(reference, nt, n):
    """A later pass's weights recompute only the clusters whose members changed (``dirty``),
    keeping the others' statistics from the previous call on the same buffers: the weights,
    flags and statistics are the same bits as a full update on fresh buffers (some clusters
    gain rows, some lose them, one empties, the rest are untouched). With two threads and
    12000 x 7 values (above ``_FW_SPLIT_MIN``) the update splits the changed clusters between
    the threads (:func:`_fw_clusters_par`); below, it splits the features."""
    from fastfc._kernels import _cpl as K
    from fastfc._kernels._cpl import cpl_feature_weights
    import numba

    assert (n * 7 >= K._FW_SPLIT_MIN) == (n == 12000)
    rng = np.random.default_rng(12 + reference)
    d, k = 7, 14
    X = _blobs(rng, n, d, 5)
    y0 = rng.integers(k, size=n).astype(np.int64)

    def state(y):
        cnt = np.bincount(y, minlength=k).astype(np.int64)
        C = np.array([X[y == j].mean(0) if cnt[j] else np.zeros(d) for j in range(k)])
        return cnt, C

    def run(y, cnt, C, bufs, dirty):
        Mw = np.full((k, d), 1.0 / d)
        live = (cnt > 0).astype(np.uint8)
        wnan = np.zeros(k, dtype=np.uint8)
        prev = numba.get_num_threads()
        numba.set_num_threads(min(nt, numba.config.NUMBA_NUM_THREADS))
        try:
            cpl_feature_weights(X, y, cnt, C, Mw, live, wnan, np.ones(k), reference, 1e-12, *bufs, 0, nt, dirty)
        finally:
            numba.set_num_threads(prev)
        return Mw, live, wnan

    def fresh():
        return [np.full((k, d), np.nan) for _ in range(6)] + [np.full((7, d), np.nan), np.zeros((2, d), np.int64)]

    cnt0, C0 = state(y0)
    kept = fresh()
    run(y0, cnt0, C0, kept, None)
    y1 = y0.copy()
    moved = rng.choice(np.flatnonzero((y0 >= 5) & (y0 <= 7)), size=60, replace=False)
    y1[moved] = rng.integers(0, 5, size=60)  # clusters 5..7 lose rows to 0..4
    y1[y1 == 9] = 10  # cluster 9 empties
    cnt1, C1 = state(y1)
    C1[cnt1 > 0] = np.where((np.bincount(y1[y1 != y0], minlength=k) + np.bincount(y0[y1 != y0], minlength=k))[:, None] > 0,
                            C1, C0)[cnt1 > 0]  # an unchanged cluster keeps its centroid's bits
    dirty = np.zeros(k, dtype=np.uint8)
    ch = y1 != y0
    dirty[y0[ch]] = 1
    dirty[y1[ch]] = 1
    assert 0 < dirty.sum() < k
    got = run(y1, cnt1, C1, kept, dirty)
    full_bufs = fresh()
    want = run(y1, cnt1, C1, full_bufs, None)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    used = cnt1 > 0
    for a, b in zip(kept[:6], full_bufs[:6]):
        np.testing.assert_array_equal(a[used], b[used])
    np.testing.assert_array_equal(kept[6], full_bufs[6])
    np.testing.assert_array_equal(kept[7], full_bufs[7])
