"""The fused federated-Lloyd statistics kernel (``fastfc._lloyd.lloyd_stats``) against NumPy.

Rounding bounds used below (``u = 2**-53``, float64 unit roundoff; float32 rows are
upcast exactly). For cluster ``c`` with ``n_c`` rows:

* counts are exact: they must equal ``np.bincount`` of
  ``fastfc._units.nearest_weighted``'s labels (the definition of the labels).
* sums: ours and the reference (``np.add.at``) add the same ``n_c`` float64 values in
  different orders; any order errs by at most ``gamma_{n_c-1} sum |x_ij|`` from the exact
  sum, so ``|ours - ref| <= 2 n_c u sum_i |x_ij|``.
* inertia: per row, ours sums ``(fl(x_j w_j) - fl(c_j w_j))^2`` sequentially, the reference
  ``((x_j - c_j) w_j)^2`` in NumPy's order. With ``s_j = |x_j w_j| + |c_j w_j|`` each term
  errs by at most ``5 u s_j^2 (1 + O(u))`` (operand roundings, the subtraction, the square)
  and the sum of ``d`` non-negative terms adds ``gamma_{d-1}``, so each row's distance is
  within ``(d + 5) u S_i`` of the exact one, ``S_i = sum_j s_j^2``. Adding the ``n_c``
  distances in two different orders adds ``2 n_c u sum_i D_i``:
  ``|ours - ref| <= 2 u ((d + 5) sum_i S_i + n_c sum_i D_i)``.

Both bounds are multiplied by 1.01 only to cover the rounding of evaluating them.
"""
import numpy as np
import pytest

import fastfc._lloyd as lloyd_mod
from fastfc._lloyd import LLOYD_CHUNK, MAX_BLOCKS, lloyd_stats, n_blocks
from fastfc._units import nearest_weighted

from reference import lloyd_stats_ref

U = 2.0 ** -53
#: covers the rounding of evaluating a bound (not a tolerance on the result)
EVAL = 1.01


def _bounds(X, C, w, labels, D):
    """Per-entry bounds of |ours - reference| for sums (k, d) and inertia (k,) (module docstring)."""
    X64 = np.asarray(X, dtype=np.float64)
    k, d = C.shape
    w = np.ones(d) if w is None else np.asarray(w, dtype=np.float64)
    nc = np.bincount(labels, minlength=k).astype(np.float64)
    A = np.zeros((k, d))
    np.add.at(A, labels, np.abs(X64))
    sums_bound = 2 * U * nc[:, None] * A * EVAL
    S = ((np.abs(X64 * w) + np.abs(C[labels] * w)) ** 2).sum(axis=1)
    Dl = D[np.arange(len(X64)), labels]
    inertia_bound = 2 * U * ((d + 5) * np.bincount(labels, weights=S, minlength=k)
                             + nc * np.bincount(labels, weights=Dl, minlength=k)) * EVAL
    return sums_bound, inertia_bound, S


def _check_against_reference(X, C, w, n_jobs=1):
    counts, sums, inertia = lloyd_stats(X, C, w, n_jobs=n_jobs)
    k, d = C.shape
    assert counts.dtype == np.int64 and counts.shape == (k,)
    assert sums.dtype == np.float64 and sums.shape == (k, d)
    assert inertia.dtype == np.float64 and inertia.shape == (k,)
    labels = nearest_weighted(X, C, w)
    # counts are exact, and they are those of nearest_weighted's labels
    np.testing.assert_array_equal(counts, np.bincount(labels, minlength=k))
    ref_labels, _, ref_sums, ref_inertia, D = lloyd_stats_ref(X, C, w, labels=labels)
    sums_bound, inertia_bound, S = _bounds(X, C, w, labels, D)
    assert (np.abs(sums - ref_sums) <= sums_bound).all()
    assert (np.abs(inertia - ref_inertia) <= inertia_bound).all()
    # the labels are the brute-force argmin wherever the runner-up is farther than twice a
    # row's distance error bound (elsewhere either centre is a correct nearest one); a centre
    # equal to an earlier one never wins (ties go to the lowest index), so it is left out
    dup = np.array([any((C[j] == C[i]).all() for i in range(j)) for j in range(k)])
    D = np.where(dup, np.inf, D)
    brute = D.argmin(axis=1)
    if k - dup.sum() > 1:
        part = np.partition(D, 1, axis=1)
        clear = part[:, 1] - part[:, 0] > 2 * (d + 5) * U * S * EVAL
        assert clear.mean() > 0.99
        np.testing.assert_array_equal(labels[clear], brute[clear])
    return counts, sums, inertia


SHAPES = [
    (1000, 3, 4),      # direct loop
    (700, 2, 40),      # direct loop, many centres
    (1000, 16, 20),    # BLAS screen (d >= 8), d * k >= 256
    (900, 10, 5),      # BLAS screen, d * k < 256
    (2500, 33, 17),    # several blocks, n not a multiple of the chunk
    (200, 12, 5),      # n < chunk
    (1, 9, 3),         # one row
    (257, 10, 1),      # k = 1, one row past a chunk
    (513, 64, 64),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "n%d-d%d-k%d" % s)
def test_matches_reference(dtype, weighted, shape):
    n, d, k = shape
    rng = np.random.default_rng(n * 1000 + d * 10 + k)
    X = rng.normal(size=(n, d)).astype(dtype)
    C = rng.normal(size=(k, d))
    w = rng.random(d) * 3 if weighted else None
    if weighted and d > 2:
        w[1] = 0.0  # a feature that carries no distance
    _check_against_reference(X, C, w)


@pytest.mark.parametrize("screen", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_both_labelling_paths_bit_identical(monkeypatch, screen, weighted):
    """The direct loop and the BLAS screen give the same counts, sums and inertia, bit for bit."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 12))
    C = rng.normal(size=(6, 12))
    C[4] = C[1]  # a tie
    w = rng.random(12) + 0.5 if weighted else None
    monkeypatch.setattr(lloyd_mod, "use_screen", lambda d, k: screen)
    got = lloyd_stats(X, C, w)
    monkeypatch.setattr(lloyd_mod, "use_screen", lambda d, k: not screen)
    other = lloyd_stats(X, C, w)
    for a, b in zip(got, other):
        np.testing.assert_array_equal(a, b)
    _check_against_reference(X, C, w)


def _near_ties(rng, n, d, k, offset, scale):
    """Rows within about float32 rounding of the bisector of two centres, far from the origin."""
    C = offset + rng.normal(size=(k, d)) * scale
    a, b = rng.integers(0, k, size=n), rng.integers(0, k, size=n)
    b = np.where(a == b, (b + 1) % k, b)
    mid = (C[a] + C[b]) / 2
    X = mid + (C[b] - C[a]) * rng.normal(size=(n, 1)) * 1e-7 + rng.normal(size=(n, d)) * scale * 1e-6
    return X, C


@pytest.mark.parametrize("case", ["near-ties", "near-ties-offset", "huge", "tiny", "mixed-chunks"])
@pytest.mark.parametrize("weighted", [False, True])
def test_float32_screen_same_as_float64_screen(monkeypatch, case, weighted):
    """Float32 rows are screened in float32 (centred at the centres' mean); the candidates'
    exact float64 distances decide, so counts, sums and inertia equal, bit for bit, those of
    the float64 screen and of the direct loop, also on rows within float32 rounding of a tie,
    far from the origin, near the float32 overflow (chunks that fall back to float64) and
    near underflow."""
    rng = np.random.default_rng(14)
    n, d, k = 3000, 24, 12
    if case == "near-ties":
        X, C = _near_ties(rng, n, d, k, 0.0, 1.0)
    elif case == "near-ties-offset":
        X, C = _near_ties(rng, n, d, k, 1e4, 1.0)
    elif case == "huge":
        X, C = _near_ties(rng, n, d, k, 0.0, 1e19)
    elif case == "tiny":
        X, C = _near_ties(rng, n, d, k, 0.0, 1e-30)
    else:  # some chunks normal, some with rows of huge norm
        X, C = _near_ties(rng, n, d, k, 0.0, 1.0)
        X[1000:1300] *= 1e25
    X32 = X.astype(np.float32)
    w = (rng.random(d) + 0.5) if weighted else None
    results = []
    for max_norm, screen in ((lloyd_mod.F32_SCREEN_MAX_NORM, True), (0.0, True), (0.0, False)):
        monkeypatch.setattr(lloyd_mod, "F32_SCREEN_MAX_NORM", max_norm)
        monkeypatch.setattr(lloyd_mod, "use_screen", lambda d, k, s=screen: s)
        results.append(lloyd_stats(X32, C, w, n_jobs=2))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(results[0][0], np.bincount(nearest_weighted(X32, C, w), minlength=k))


@pytest.mark.parametrize("d", [3, 20])
def test_empty_clusters_and_duplicate_centres(d):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(800, d))
    C = rng.normal(size=(5, d))
    C[3] = C[1]           # duplicate: ties go to the lowest index, so centre 3 gets nothing
    C[4] = 1e3            # far away: empty
    counts, sums, inertia = _check_against_reference(X, C, None)
    assert counts[3] == 0 and counts[4] == 0 and counts[1] > 0
    assert (sums[3:] == 0).all() and (inertia[3:] == 0).all()
    assert counts.sum() == len(X)


@pytest.mark.parametrize("d", [3, 8])
def test_exact_ties_lowest_index(d):
    X = np.zeros((300, d))
    C = np.zeros((4, d))
    C[0, 0], C[1, 1], C[2, 2], C[3, 0] = 1.0, 1.0, 1.0, -1.0  # all at distance 1
    counts, sums, inertia = lloyd_stats(X, C)
    np.testing.assert_array_equal(counts, [300, 0, 0, 0])
    assert inertia[0] == 300.0 and (sums == 0).all()
    # with a weight, feature 0 counts double: centre 1 (on feature 1) is the nearest
    w = np.ones(d)
    w[0] = 2.0
    counts, _, inertia = lloyd_stats(X, C, w)
    np.testing.assert_array_equal(counts, [0, 300, 0, 0])
    assert inertia[1] == 300.0


def test_k1_sums_are_column_sums():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1000, 9)).astype(np.float32)
    counts, sums, inertia = lloyd_stats(X, np.zeros((1, 9)))
    assert counts[0] == 1000
    X64 = X.astype(np.float64)
    bound = 2 * U * 1000 * np.abs(X64).sum(axis=0) * EVAL
    assert (np.abs(sums[0] - X64.sum(axis=0)) <= bound).all()
    _check_against_reference(X, np.zeros((1, 9)), None)


@pytest.mark.parametrize("shape", [(100_003, 16, 10), (50_001, 3, 7), (40_000, 50, 64)])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_deterministic_over_n_jobs(shape, weighted, dtype):
    n, d, k = shape
    rng = np.random.default_rng(7)
    X = rng.normal(size=(n, d)).astype(dtype)
    C = rng.normal(size=(k, d))
    w = rng.random(d) + 0.1 if weighted else None
    base = lloyd_stats(X, C, w, n_jobs=1)
    for n_jobs in (2, -1, 3):
        got = lloyd_stats(X, C, w, n_jobs=n_jobs)
        for a, b in zip(base, got):
            np.testing.assert_array_equal(a, b)


def test_n_blocks_depend_on_shape_only():
    assert n_blocks(0, 10, 50) == 0
    assert n_blocks(1, 10, 50) == 1
    assert n_blocks(LLOYD_CHUNK * 3 + 1, 10, 50) == 1
    assert n_blocks(LLOYD_CHUNK * 16 + 1, 10, 50) == 5
    assert n_blocks(10**6, 10, 50) == MAX_BLOCKS
    # partial sums stay within the memory budget (and at least 2 blocks)
    assert n_blocks(10**6, 1000, 1000) == 4
    assert n_blocks(10**6, 10**4, 10**4) == 2


@pytest.mark.parametrize("layout", ["fortran", "strided", "reversed", "readonly"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_any_layout_same_result_and_caller_arrays_unchanged(layout, dtype):
    rng = np.random.default_rng(8)
    base = rng.normal(size=(1500, 24)).astype(dtype)
    if layout == "fortran":
        X = np.asfortranarray(base[:, :12])
    elif layout == "strided":
        X = base[::2, ::2]
    elif layout == "reversed":
        X = base[::-1, :12]
    else:
        X = base[:, :12].copy()
        X.flags.writeable = False
    C = rng.normal(size=(7, 12))
    w = rng.random(12) + 0.2
    X_before, C_before, w_before = X.copy(), C.copy(), w.copy()
    for weight in (None, w):
        got = lloyd_stats(X, C, weight, n_jobs=2)
        want = lloyd_stats(np.ascontiguousarray(X), C, weight, n_jobs=1)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(X, X_before)
    np.testing.assert_array_equal(C, C_before)
    np.testing.assert_array_equal(w, w_before)


def test_other_input_dtypes():
    rng = np.random.default_rng(9)
    Xi = rng.integers(-5, 5, size=(600, 4))
    C32 = rng.normal(size=(3, 4)).astype(np.float32)
    got = lloyd_stats(Xi, C32, [1, 2, 0.5, 1])
    want = lloyd_stats(Xi.astype(np.float64), C32.astype(np.float64), np.array([1, 2, 0.5, 1.0]))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    # an empty weight means raw units
    for a, b in zip(lloyd_stats(Xi, C32, np.empty(0)), lloyd_stats(Xi, C32)):
        np.testing.assert_array_equal(a, b)


def test_empty_rows_give_zeros():
    counts, sums, inertia = lloyd_stats(np.empty((0, 3), dtype=np.float32), np.ones((2, 3)))
    assert counts.shape == (2,) and sums.shape == (2, 3) and inertia.shape == (2,)
    assert counts.dtype == np.int64 and not counts.any() and not sums.any() and not inertia.any()


def test_one_step_is_the_centralized_m_step():
    """New centres ``sums / counts`` are the NumPy M-step's within the sums bound."""
    rng = np.random.default_rng(10)
    X = rng.normal(size=(5000, 20)) + rng.integers(0, 4, size=(5000, 1)) * 3.0
    C0 = X[rng.choice(len(X), 6, replace=False)]
    counts, sums, _ = lloyd_stats(X, C0, n_jobs=2)
    labels = nearest_weighted(X, C0, None)
    ref_centres = np.stack([X[labels == c].mean(axis=0) for c in range(6)])
    np.testing.assert_array_equal(counts, np.bincount(labels, minlength=6))
    _, _, ref_sums, _, D = lloyd_stats_ref(X, C0, labels=labels)
    sums_bound, _, _ = _bounds(X, C0, None, labels, D)
    assert (np.abs(sums - ref_sums) <= sums_bound).all()
    # the mean: our sum's bound, divided by n_c, plus one rounding of each division and of NumPy's mean
    # (pairwise sum, within the same n_c u sum|x| bound)
    mean_bound = sums_bound / counts[:, None] + 2 * U * np.abs(ref_centres) * EVAL
    assert (np.abs(sums / counts[:, None] - ref_centres) <= mean_bound).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_iterated_equals_sklearn_lloyd(dtype):
    """r rounds of lloyd_stats from C0 give scikit-learn's Lloyd labels after r iterations.

    Assumption: the data are well separated (8 tight blobs, centre spacing >> spread) and
    C0 has one row of each blob, so no row is within rounding of a tie at any iteration
    and no cluster empties; then both runs take the same labels at every step, although
    scikit-learn centres the data and sums in another order (and in float32 for float32).
    """
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(11)
    means = rng.normal(size=(8, 5)) * 20
    y = rng.integers(0, 8, size=4000)
    X = (means[y] + rng.normal(size=(4000, 5))).astype(dtype)
    C0 = np.stack([X[np.flatnonzero(y == c)[0]] for c in range(8)]).astype(np.float64)
    C0 = C0 + rng.normal(size=C0.shape) * 2.0  # start off the blob centres
    for r in (1, 2, 5):
        C = C0.copy()
        for _ in range(r):
            counts, sums, _ = lloyd_stats(X, C)
            assert (counts > 0).all()
            C = sums / counts[:, None]
        km = KMeans(n_clusters=8, init=C0.astype(dtype), n_init=1, max_iter=r, algorithm="lloyd", tol=0).fit(X)
        np.testing.assert_array_equal(nearest_weighted(X, C, None), km.labels_)
        np.testing.assert_allclose(C, km.cluster_centers_, rtol=0, atol=1e-4 if dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("bad, err, match", [
    (lambda X, C: (X.ravel(), C, None), ValueError, "X must be 2-D"),
    (lambda X, C: (X[None], C, None), ValueError, "X must be 2-D"),
    (lambda X, C: (X.astype(str), C, None), TypeError, "X must be numeric"),
    (lambda X, C: (X, C[:, :3], None), ValueError, "features"),
    (lambda X, C: (X, C[:0], None), ValueError, "centers is empty"),
    (lambda X, C: (X, C.ravel(), None), ValueError, "centers must be 2-D"),
    (lambda X, C: (X, np.where(C > 0, np.nan, C), None), ValueError, "centers contains NaN"),
    (lambda X, C: (X, C, -np.ones(4)), ValueError, "non-negative"),
    (lambda X, C: (X, C, np.ones(3)), ValueError, "weight must have shape"),
    (lambda X, C: (X, C, np.ones((1, 4))), ValueError, "weight must have shape"),
    (lambda X, C: (X, C, np.array([1, np.nan, 1, 1])), ValueError, "weight contains NaN"),
    (lambda X, C: (X, C, np.array(["a"] * 4)), TypeError, "weight must be numeric"),
])
def test_bad_inputs_raise(bad, err, match):
    rng = np.random.default_rng(12)
    X, C = rng.normal(size=(50, 4)), rng.normal(size=(3, 4))
    with pytest.raises(err, match=match):
        lloyd_stats(*bad(X, C))


@pytest.mark.parametrize("d", [3, 12])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_rows_raise(d, value, weighted, dtype):
    rng = np.random.default_rng(13)
    X = rng.normal(size=(600, d)).astype(dtype)
    X[517, d - 1] = value
    w = np.zeros(d) if weighted else None  # even where the feature carries no distance
    with pytest.raises(ValueError, match="X contains NaN or infinity"):
        lloyd_stats(X, rng.normal(size=(4, d)), w)


def test_overflow_raises():
    X = np.full((10, 3), 1e200)
    with pytest.raises(ValueError, match="overflow"):
        lloyd_stats(X, np.zeros((2, 3)))


def test_bad_n_jobs():
    with pytest.raises(ValueError, match="n_jobs"):
        lloyd_stats(np.ones((3, 2)), np.ones((1, 2)), n_jobs=0)


# ------------------------------------------------------------------ exact_inertia=False (refinement rounds)
def _check_moment_mode(X, C, w, n_jobs=1):
    """``exact_inertia=False``: counts and sums bit for bit those of the exact mode (the same labels,
    the same additions), the inertia within ``moment_inertia_bound`` of the exact mode's sums of
    exact distances, and within that bound plus the module's reference bound of NumPy's inertia."""
    from fastfc._lloyd import moment_inertia_bound

    exact = lloyd_stats(X, C, w, n_jobs=1)
    got = lloyd_stats(X, C, w, n_jobs=n_jobs, exact_inertia=False)
    np.testing.assert_array_equal(got[0], exact[0])
    np.testing.assert_array_equal(got[1], exact[1])
    assert got[2].dtype == np.float64 and (got[2] >= 0).all()
    labels = nearest_weighted(X, C, w)
    bound = moment_inertia_bound(X, C, w, labels) * EVAL
    assert (np.abs(got[2] - exact[2]) <= bound).all()
    _, _, _, ref_inertia, D = lloyd_stats_ref(X, C, w, labels=labels)
    _, inertia_bound, _ = _bounds(X, C, w, labels, D)
    assert (np.abs(got[2] - ref_inertia) <= inertia_bound + bound).all()
    return got


@pytest.mark.parametrize("offset", [0.0, 300.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "n%d-d%d-k%d" % s)
def test_moment_inertia_mode_matches_exact_mode_and_reference(offset, dtype, weighted, shape):
    n, d, k = shape
    rng = np.random.default_rng(n * 1000 + d * 10 + k + 1)
    X = (rng.normal(size=(n, d)) + offset).astype(dtype)
    C = rng.normal(size=(k, d)) + offset
    w = rng.random(d) * 3 if weighted else None
    if weighted and d > 2:
        w[1] = 0.0
    _check_moment_mode(X, C, w, n_jobs=2)


@pytest.mark.parametrize("case", ["near-ties", "near-ties-offset", "huge", "tiny", "mixed-chunks"])
@pytest.mark.parametrize("weighted", [False, True])
def test_moment_inertia_mode_float32_screen_labels_exact(monkeypatch, case, weighted):
    """Float32 rows screened in float32 on the raw rows (against float32 (c - mu) w): the candidates the
    bound cannot exclude are decided by exact float64 distances, so counts and sums equal, bit for bit,
    those of the float64 screen, of the direct loop and of the exact mode, also within float32 rounding
    of a tie, far from the origin, near the float32 overflow (chunks falling back to float64) and near
    underflow."""
    rng = np.random.default_rng(15)
    n, d, k = 3000, 24, 12
    if case == "near-ties":
        X, C = _near_ties(rng, n, d, k, 0.0, 1.0)
    elif case == "near-ties-offset":
        X, C = _near_ties(rng, n, d, k, 1e4, 1.0)
    elif case == "huge":
        X, C = _near_ties(rng, n, d, k, 0.0, 1e19)
    elif case == "tiny":
        X, C = _near_ties(rng, n, d, k, 0.0, 1e-30)
    else:
        X, C = _near_ties(rng, n, d, k, 0.0, 1.0)
        X[1000:1300] *= 1e25
    X32 = X.astype(np.float32)
    w = (rng.random(d) + 0.5) if weighted else None
    exact = lloyd_stats(X32, C, w)
    for max_norm in (lloyd_mod.F32_SCREEN_MAX_NORM, 0.0):
        monkeypatch.setattr(lloyd_mod, "F32_SCREEN_MAX_NORM", max_norm)
        got = lloyd_stats(X32, C, w, n_jobs=2, exact_inertia=False)
        np.testing.assert_array_equal(got[0], exact[0])
        np.testing.assert_array_equal(got[1], exact[1])
    np.testing.assert_array_equal(exact[0], np.bincount(nearest_weighted(X32, C, w), minlength=k))


@pytest.mark.parametrize("shape", [(100_003, 16, 10), (40_000, 50, 64)])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_moment_inertia_mode_deterministic_over_n_jobs(shape, weighted, dtype):
    n, d, k = shape
    rng = np.random.default_rng(17)
    X = rng.normal(size=(n, d)).astype(dtype)
    C = rng.normal(size=(k, d))
    w = rng.random(d) + 0.1 if weighted else None
    base = lloyd_stats(X, C, w, n_jobs=1, exact_inertia=False)
    for n_jobs in (2, -1, 3):
        got = lloyd_stats(X, C, w, n_jobs=n_jobs, exact_inertia=False)
        for a, b in zip(base, got):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("layout", ["fortran", "strided", "reversed"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_moment_inertia_mode_any_layout(layout, dtype):
    rng = np.random.default_rng(18)
    base = rng.normal(size=(1500, 24)).astype(dtype)
    X = {"fortran": lambda: np.asfortranarray(base[:, :12]), "strided": lambda: base[::2, ::2],
         "reversed": lambda: base[::-1, :12]}[layout]()
    C = rng.normal(size=(7, 12))
    X_before = X.copy()
    for weight in (None, rng.random(12) + 0.2):
        got = lloyd_stats(X, C, weight, n_jobs=2, exact_inertia=False)
        want = lloyd_stats(np.ascontiguousarray(X), C, weight, exact_inertia=False)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(X, X_before)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_moment_inertia_mode_rejects_nan(dtype):
    X = np.random.default_rng(19).normal(size=(600, 12)).astype(dtype)
    X[300, 4] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        lloyd_stats(X, np.zeros((3, 12)) + np.arange(3)[:, None], exact_inertia=False)


# ------------------------------------------------------------------ the refinement round's FMA screen
def _fma_cases():
    rng = np.random.default_rng(21)
    out = []
    for name, (n, d, k, offset, scale) in {
        "near-ties": (3000, 24, 12, 0.0, 1.0),
        "near-ties-offset": (3000, 24, 12, 1e4, 1.0),
        "near-ties-d50": (2000, 50, 10, 0.0, 1.0),
        "near-ties-d10-k3": (2000, 10, 3, 0.0, 1.0),
        "near-ties-d9-k17": (1500, 9, 17, 5.0, 1.0),
        "huge": (3000, 24, 12, 0.0, 1e19),
        "tiny": (3000, 24, 12, 0.0, 1e-30),
        "very-huge": (1000, 16, 5, 0.0, 1e120),
    }.items():
        X, C = _near_ties(rng, n, d, k, offset, scale)
        out.append((name, X, C))
    X, C = _near_ties(rng, 3000, 24, 12, 0.0, 1.0)
    X[1000:1300] *= 1e25  # some chunks past the float32 screen's range, the rest not
    out.append(("mixed-chunks", X, C))
    X = rng.normal(size=(2000, 20))
    C = X[:6].copy()
    C[3] = C[1]  # duplicated centre: exact ties, the lowest index wins
    X[:50] = C[1]  # rows on the duplicated centres
    out.append(("duplicate-centres", X, C))
    return out


@pytest.mark.skipif(not __import__("fastfc._kernels._assign", fromlist=["x"]).fma_screen_available(),
                    reason="the FMA screen needs a CPU with AVX-512 and FMA")
@pytest.mark.parametrize("case", _fma_cases(), ids=lambda c: c[0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
def test_round_fma_screen_same_as_blas_screen(monkeypatch, case, dtype, weighted):
    """The refinement round's FMA screen (rows in vector lanes, fused multiply-adds, float32 rows
    in float32) only decides rows whose nearest centre its rounding-error bound proves and leaves
    the others to exact float64 distances over all centres: counts, sums and inertia equal, bit for
    bit, those of the BLAS screen, and counts and sums those of the exact mode, also within
    rounding of a tie, on duplicated centres (ties to the lowest index), far from the origin, near
    the float32 overflow and beyond (chunks falling back to the BLAS screen) and near underflow,
    for n_jobs 1 and 2 and F-ordered rows."""
    name, X, C = case
    if name == "very-huge" and dtype == np.float32:
        pytest.skip("beyond the float32 range")
    X = X.astype(dtype)
    rng = np.random.default_rng(22)
    w = (rng.random(X.shape[1]) + 0.5) if weighted else None
    exact = lloyd_stats(X, C, w)
    monkeypatch.setattr(lloyd_mod, "use_fma_screen", lambda d, k: False)
    blas = lloyd_stats(X, C, w, exact_inertia=False)
    monkeypatch.setattr(lloyd_mod, "use_fma_screen", lambda d, k: True)
    for n_jobs, Xl in ((1, X), (2, X), (2, np.asfortranarray(X))):
        got = lloyd_stats(Xl, C, w, n_jobs=n_jobs, exact_inertia=False)
        for g, b in zip(got, blas):
            np.testing.assert_array_equal(g, b)
        np.testing.assert_array_equal(got[0], exact[0])
        np.testing.assert_array_equal(got[1], exact[1])


def test_use_fma_screen_threshold():
    """The FMA screen up to 128 features, and past that only below FMA_SCREEN_MAX_DK features x centres."""
    assert lloyd_mod.use_fma_screen(8, 2) and lloyd_mod.use_fma_screen(128, 4096)
    assert lloyd_mod.use_fma_screen(200, 300)
    assert not lloyd_mod.use_fma_screen(256, 256)


# ------------------------------------------------------------------ many clients in one call (the runner's round)
def _clients_case(seed, dtype, weighted, offset=0.0):
    """Clients of a round: uneven sizes (one empty, one of one row, several blocks), float32/float64 rows in
    C order, Fortran order, strided and reversed views; centres from the rows, two of them equal."""
    rng = np.random.default_rng(seed)
    d, k = 24, 9
    sizes = [0, 1, 255, 257, 1300, 5000, 20_000, 700]
    Xs = []
    for i, n in enumerate(sizes):
        X = (rng.normal(size=(2 * n, d)) * (1 + i) + offset).astype(dtype)
        Xs.append([X[:n], np.asfortranarray(X[:n]), X[::2], X[::-1][:n]][i % 4])
    C = np.vstack([x[:2] for x in Xs if len(x) >= 2]).astype(np.float64)[:k] + 0.01
    C[3] = C[2]
    w = (rng.random(d) * 2 + 0.1) if weighted else None
    if weighted:
        w[5] = 0.0
    return Xs, C, w


@pytest.mark.parametrize("offset", [0.0, 1e4])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clients_round_bit_identical_to_per_client_calls(dtype, weighted, offset):
    """lloyd_stats_clients (one compiled call over the clients, the centre-side operands formed once) gives
    every client exactly its own lloyd_stats(exact_inertia=False): counts, sums and inertia bit for bit,
    for any n_jobs (also more threads than clients: the per-client fallback), whatever the layout."""
    from fastfc._lloyd import lloyd_stats_clients

    Xs, C, w = _clients_case(31, dtype, weighted, offset)
    want = [lloyd_stats(X, C, w, exact_inertia=False) for X in Xs]
    for n_jobs in (1, 2, 3, 16):
        seconds = np.zeros(len(Xs))
        counts, sums, inertia = lloyd_stats_clients(Xs, C, w, n_jobs=n_jobs, seconds=seconds)
        assert counts.shape == (len(Xs), 9) and sums.shape == (len(Xs), 9, 24) and inertia.shape == (len(Xs), 9)
        for i, (c, s, e) in enumerate(want):
            np.testing.assert_array_equal(counts[i], c)
            np.testing.assert_array_equal(sums[i], s)
            np.testing.assert_array_equal(inertia[i], e)
        assert (seconds >= 0).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clients_round_against_numpy_reference(dtype):
    """The many-clients kernel against plain NumPy: each client's counts are np.bincount of the nearest
    centres and its sums within the module's bound of np.add.at's (float32 and float64 rows)."""
    from fastfc._lloyd import lloyd_stats_clients

    Xs, C, w = _clients_case(32, dtype, True)
    counts, sums, _ = lloyd_stats_clients(Xs, C, w, n_jobs=2)
    k = C.shape[0]
    for i, X in enumerate(Xs):
        labels = nearest_weighted(X, C, w)
        np.testing.assert_array_equal(counts[i], np.bincount(labels, minlength=k))
        ref_sums = np.zeros((k, X.shape[1]))
        np.add.at(ref_sums, labels, np.asarray(X, dtype=np.float64))
        if len(X):
            _, _, ref_s, _, D = lloyd_stats_ref(X, C, w, labels=labels)
            sums_bound, _, _ = _bounds(X, C, w, labels, D)
            assert (np.abs(sums[i] - ref_sums) <= sums_bound).all()
        else:
            assert not sums[i].any()


def test_clients_round_mixed_dtypes_and_direct_path():
    """Float32 and float64 clients in one call (one set of operands per dtype), and shapes on the direct loop
    (fewer than 8 features: one lloyd_stats call per client): the per-client results, bit for bit."""
    from fastfc._lloyd import lloyd_stats_clients

    rng = np.random.default_rng(33)
    for d in (12, 3):
        Xs = [rng.normal(size=(n, d)).astype(t) for n, t in [(900, np.float32), (300, np.float64), (2000, np.float32)]]
        C = rng.normal(size=(5, d))
        got = lloyd_stats_clients(Xs, C, n_jobs=2)
        for i, X in enumerate(Xs):
            for a, b in zip((g[i] for g in got), lloyd_stats(X, C, exact_inertia=False)):
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clients_round_rejects_nan_and_bad_shapes(dtype):
    from fastfc._lloyd import lloyd_stats_clients

    rng = np.random.default_rng(34)
    Xs = [rng.normal(size=(600, 12)).astype(dtype) for _ in range(3)]
    C = np.zeros((3, 12)) + np.arange(3)[:, None]
    Xs[1][300, 4] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        lloyd_stats_clients(Xs, C, n_jobs=2)
    with pytest.raises(ValueError, match="features"):
        lloyd_stats_clients([Xs[0], Xs[2][:, :11]], C)
    with pytest.raises(ValueError, match="weight"):
        lloyd_stats_clients([Xs[0], Xs[2]], C, -np.ones(12))
