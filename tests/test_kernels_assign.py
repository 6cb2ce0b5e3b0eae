"""Cython nearest-prototype kernel against the NumPy reference."""
import numpy as np
import pytest
from sklearn.metrics import pairwise_distances_argmin

from fastfc._assign import assign_nearest, openmp_enabled

from reference import assign_nearest_ref

DTYPES = [np.float32, np.float64]
RTOL = {np.float32: 1e-4, np.float64: 1e-10}


def _unambiguous(D, labels, dtype):
    """Rows whose best distance beats the runner-up by more than rounding."""
    part = np.partition(D, 1, axis=1)
    gap = part[:, 1] - part[:, 0]
    return gap > RTOL[dtype] * (1 + np.abs(part[:, 0]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 3, 1), (1000, 5, 8), (2500, 33, 17), (600, 2, 40)])
def test_matches_reference(dtype, weighted, shape):
    n, d, k = shape
    rng = np.random.default_rng(n * 1000 + d * 10 + k)
    X = rng.normal(size=(n, d)).astype(dtype)
    C = rng.normal(size=(k, d)).astype(dtype)
    W = rng.random((k, d)).astype(dtype) * 3 if weighted else None
    labels, dist = assign_nearest(X, C, W, return_distances=True)
    ref_labels, ref_dist, D = assign_nearest_ref(X, C, W)
    assert labels.dtype == np.int32 and dist.dtype == dtype
    ok = _unambiguous(D, ref_labels, dtype) if k > 1 else np.ones(n, bool)
    assert ok.mean() > 0.95
    np.testing.assert_array_equal(labels[ok], ref_labels[ok])
    # whatever the label, its distance is the minimum up to rounding
    np.testing.assert_allclose(dist, ref_dist, rtol=RTOL[dtype] * 10, atol=RTOL[dtype])
    np.testing.assert_allclose(D[np.arange(n), labels], ref_dist, rtol=RTOL[dtype] * 10, atol=RTOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_agrees_with_sklearn(dtype):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 12)).astype(dtype)
    C = rng.normal(size=(10, 12)).astype(dtype)
    _, _, D = assign_nearest_ref(X, C)
    ok = _unambiguous(D, None, dtype)
    np.testing.assert_array_equal(assign_nearest(X, C)[ok], pairwise_distances_argmin(X, C)[ok])


def test_ties_go_to_lowest_index():
    X = np.zeros((5, 3))
    C = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [-1.0, 0, 0]])
    assert (assign_nearest(X, C) == 0).all()
    W = np.array([[2.0, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1]])
    assert (assign_nearest(X, C, W) == 1).all()


def test_zero_weights_ignore_features():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4))
    C = rng.normal(size=(3, 4))
    W = np.ones((3, 4))
    W[:, 2:] = 0.0
    np.testing.assert_array_equal(assign_nearest(X, C, W), assign_nearest(X[:, :2], C[:, :2]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_same_result_for_any_thread_count(dtype):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(20_011, 9)).astype(dtype)
    C = rng.normal(size=(13, 9)).astype(dtype)
    W = rng.random((13, 9)).astype(dtype)
    base, bd = assign_nearest(X, C, W, n_jobs=1, return_distances=True)
    for n_jobs in (2, 3, -1):
        lab, dist = assign_nearest(X, C, W, n_jobs=n_jobs, return_distances=True)
        np.testing.assert_array_equal(lab, base)
        np.testing.assert_array_equal(dist, bd)  # bitwise: same summation order


def test_inputs_not_modified_and_non_contiguous_ok():
    rng = np.random.default_rng(2)
    X = np.asfortranarray(rng.normal(size=(300, 6)))
    C = rng.normal(size=(4, 12))[:, ::2]
    X0, C0 = X.copy(), C.copy()
    lab = assign_nearest(X, C)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(C, C0)
    np.testing.assert_array_equal(lab, assign_nearest_ref(np.ascontiguousarray(X), C)[0])


def test_int_input_is_promoted():
    X = np.array([[0, 0], [10, 10]])
    assert assign_nearest(X, np.array([[9, 9], [1, 1]])).tolist() == [1, 0]


def test_empty_rows():
    lab, dist = assign_nearest(np.empty((0, 3)), np.ones((2, 3)), return_distances=True)
    assert lab.shape == (0,) and dist.shape == (0,)


@pytest.mark.parametrize(
    "X, C, W, exc, match",
    [
        (np.ones((3, 2)), np.ones((2, 3)), None, ValueError, "X has 2 features but centers have 3"),
        (np.ones(3), np.ones((2, 3)), None, ValueError, "2-D"),
        (np.array([[np.nan, 1.0]]), np.ones((2, 2)), None, ValueError, "NaN"),
        (np.ones((3, 2)), np.array([[np.inf, 1.0]]), None, ValueError, "centers contains NaN"),
        (np.ones((3, 2)), np.ones((2, 2)), -np.ones((2, 2)), ValueError, "non-negative"),
        (np.ones((3, 2)), np.ones((2, 2)), np.ones((3, 2)), ValueError, "shape of centers"),
        (np.ones((3, 2)), np.empty((0, 2)), None, ValueError, "empty"),
        (np.array([["a", "b"]]), np.ones((2, 2)), None, TypeError, "numeric"),
    ],
)
def test_bad_input(X, C, W, exc, match):
    with pytest.raises(exc, match=match):
        assign_nearest(X, C, W)


def test_openmp_flag_is_bool():
    assert isinstance(openmp_enabled(), bool)


@pytest.fixture
def low_screen_threshold(monkeypatch):
    """The BLAS screen from d * k >= 256 in both dtypes (the direct kernel is faster up to
    8192 / 32768, the defaults), so that these tests' moderate shapes exercise the screen."""
    from fastfc import _assign as A

    monkeypatch.setattr(A, "GEMM_MIN_WORK", {"float64": 256, "float32": 256})


def _direct(X, C):
    """The direct (exhaustive) compiled kernel, bypassing the BLAS screen."""
    from fastfc._kernels._assign import assign_nearest_kernel

    CT = np.ascontiguousarray(C.T)
    labels = np.empty(len(X), dtype=np.int32)
    dist = np.empty(len(X), dtype=X.dtype)
    assign_nearest_kernel(np.ascontiguousarray(X), CT, CT, False, labels, dist, 1, 512)
    return labels, dist


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["random", "offset", "near_duplicates", "exact_ties", "rows_on_prototypes"])
def test_blas_screen_is_identical_to_direct_kernel(dtype, case, low_screen_threshold):
    """Above GEMM_MIN_WORK the BLAS-screened path must give the direct kernel's labels and
    distances bit for bit, also where a plain ||c||^2 - 2 x.c would pick the wrong one."""
    from fastfc import _assign as A

    rng = np.random.default_rng(11)
    n, d, k = 3001, 24, 40
    assert A.use_gemm(d, k, dtype)
    C = rng.normal(size=(k, d))
    X = rng.normal(size=(n, d))
    if case == "offset":  # far from the origin: the expansion cancels catastrophically
        shift = 3e3 if dtype == np.float32 else 3e7
        C += shift
        X += shift
    elif case == "near_duplicates":
        C[1::2] = C[0::2] + rng.normal(scale=1e-9, size=(k // 2, d))
        X[: n // 2] = C[rng.integers(k, size=n // 2)] + rng.normal(scale=1e-6, size=(n // 2, d))
    elif case == "exact_ties":
        C[k // 2:] = C[: k // 2]  # every prototype twice: ties must go to the lower index
    elif case == "rows_on_prototypes":
        X[:k] = C
    X = X.astype(dtype)
    C = C.astype(dtype)
    labels, dist = assign_nearest(X, C, return_distances=True)
    ref_labels, ref_dist = _direct(X, C)
    np.testing.assert_array_equal(labels, ref_labels)
    np.testing.assert_array_equal(dist, ref_dist)
    if case == "offset":  # the plain expansion gets rows wrong here, so the recheck matters
        naive = (np.einsum("ij,ij->i", C, C)[None, :] - 2 * (X @ C.T)).argmin(axis=1)
        assert (naive != ref_labels).mean() > 0.05
    if case == "exact_ties":
        assert (labels < k // 2).all()
    if case == "rows_on_prototypes" and dtype == np.float64:
        np.testing.assert_array_equal(labels[:k], np.arange(k))


@pytest.mark.parametrize("dtype", DTYPES)
def test_blas_screen_same_result_for_any_thread_count(dtype, low_screen_threshold):
    from fastfc import _assign as A

    assert A.use_gemm(30, 25, dtype)
    rng = np.random.default_rng(8)
    X = rng.normal(size=(20_011, 30)).astype(dtype)
    C = rng.normal(size=(25, 30)).astype(dtype)
    base, bd = assign_nearest(X, C, n_jobs=1, return_distances=True)
    for n_jobs in (2, 3, -1):
        lab, dist = assign_nearest(X, C, n_jobs=n_jobs, return_distances=True)
        np.testing.assert_array_equal(lab, base)
        np.testing.assert_array_equal(dist, bd)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("screen", [False, True])
@pytest.mark.parametrize("d,k,weighted,dtypes", [
    (3, 4, False, ("float64", "float64")),
    (3, 4, True, ("float32", "float32")),
    (16, 40, False, ("float64", "float64")),   # BLAS screen when screen, else direct
    (16, 40, False, ("float32", "float32")),
    (16, 40, False, ("float32", "float64")),   # upcast block by block
    (16, 40, True, ("float64", "float64")),
])
def test_non_finite_rows_are_rejected_wherever_they_are(bad, d, k, weighted, dtypes, screen, monkeypatch):
    """The rows are checked only when a distance comes out non-finite: every NaN/inf row
    (in any feature, any chunk, either kernel) must still raise."""
    from fastfc import _assign as A
    from fastfc._assign import assign_nearest

    if screen:  # (16, 40) unweighted through the BLAS screen, else the direct kernel
        monkeypatch.setattr(A, "GEMM_MIN_WORK", {"float64": 256, "float32": 256})
    rng = np.random.default_rng(4)
    X = rng.standard_normal((3000, d)).astype(dtypes[0])
    C = rng.standard_normal((k, d)).astype(dtypes[1])
    W = rng.random((k, d)).astype(dtypes[1]) if weighted else None
    if weighted:
        W[:, 0] = 0.0  # a zero weight on the bad feature: 0 * inf is NaN, still caught
    for row, col in [(0, 0), (1777, d - 1), (2999, d // 2)]:
        Xb = X.copy()
        Xb[row, col] = bad
        with pytest.raises(ValueError, match="NaN or infinity"):
            assign_nearest(Xb, C, W)
        lab = assign_nearest(Xb[np.arange(3000) != row], C, W)  # the same rows without it: fine
        np.testing.assert_array_equal(lab, assign_nearest(X, C, W)[np.arange(3000) != row])


def _sequential_ref(X, C, W=None):
    """Labels and distances of the exact (direct) kernel's arithmetic, in NumPy: each distance
    summed over features in the order 0 .. d-1 in the dtype of X (``acc = acc + t * t``, or
    ``acc + w * (t * t)``), ties to the lowest index."""
    n, d = X.shape
    acc = np.zeros((n, C.shape[0]), dtype=X.dtype)
    for j in range(d):
        t = X[:, j, None] - C[None, :, j]
        acc = acc + (t * t if W is None else W[None, :, j] * (t * t))
    labels = np.argmin(acc, axis=1) if len(C) else np.zeros(n, np.intp)
    return labels.astype(np.int32), acc[np.arange(n), labels]


def _direct_kernel(X, C, W=None, n_threads=1, chunk=512, with_dist=True):
    from fastfc._kernels._assign import assign_nearest_kernel

    CT = np.ascontiguousarray(C.T)
    WT = CT if W is None else np.ascontiguousarray(W.T)
    labels = np.full(len(X), -7, dtype=np.int32)
    dist = np.full(len(X), -7, dtype=X.dtype) if with_dist else None
    bad = assign_nearest_kernel(np.ascontiguousarray(X), CT, WT, W is not None, labels, dist, n_threads, chunk)
    return labels, dist, bad


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weighted", [False, True])
def test_direct_kernel_is_bit_identical_to_sequential_reference(dtype, weighted):
    """The direct kernel sums several rows at a time in vector lanes (blocks of 32 float64 / 64
    float32 rows, transposed): every row's distance must still be the per-row sequential sum to
    the bit, and its label the first minimum -- for any n (block tails, n below one block),
    any d (tiled transposes from 8 features, the d = 2 split, the element-by-element rest),
    exact ties, thread counts and chunk sizes."""
    rng = np.random.default_rng(1234 + weighted)
    shapes = [(n, d, k) for n in (1, 5, 31, 32, 33, 63, 64, 65, 129, 700)
              for d, k in ((1, 3), (2, 15), (3, 4), (7, 9), (8, 5), (9, 2), (10, 10), (16, 10), (17, 33), (40, 7))]
    for trial, (n, d, k) in enumerate(shapes):
        if trial % 2:  # small integers: many exact ties between different prototypes
            X = rng.integers(-3, 4, size=(n, d)).astype(dtype)
            C = rng.integers(-3, 4, size=(k, d)).astype(dtype)
        else:
            X = (rng.standard_normal((n, d)) * 10 ** rng.uniform(-3, 3)).astype(dtype)
            C = rng.standard_normal((k, d)).astype(dtype)
            if k > 2:
                C[k - 1] = C[0]  # a duplicated prototype: the tie goes to index 0
                X[: n // 3] = C[rng.integers(0, k, n // 3)]  # rows on prototypes (distance 0)
        W = (rng.random((k, d)) * 2).astype(dtype) if weighted else None
        if weighted and trial % 3 == 0:
            W[:, 0] = 0
        ref_labels, ref_dist = _sequential_ref(X, C, W)
        for n_threads, chunk in ((1, 512), (2, 7), (2, 64)):
            labels, dist, bad = _direct_kernel(X, C, W, n_threads, chunk)
            np.testing.assert_array_equal(labels, ref_labels, err_msg=f"{(n, d, k, n_threads, chunk)}")
            np.testing.assert_array_equal(dist.view(np.uint8), ref_dist.view(np.uint8),
                                          err_msg=f"{(n, d, k, n_threads, chunk)}")
            assert bad == 0
        labels, dist, bad = _direct_kernel(X, C, W, with_dist=False)  # distances not asked for
        np.testing.assert_array_equal(labels, ref_labels)
        assert dist is None and bad == 0


def _two_feature_case(rng, case, n, k, dtype):
    """Rows and prototypes (d = 2) of one case of the two-feature tests, and the rows made NaN/infinite:
    standard normal, or small integers (exact ties), duplicated prototypes (rows on them), one-ulp near
    ties (and, from k = 4, rows on the bisector of two prototypes: an exact tie), NaN/inf rows, offsets
    (||c||^2 - 2 x.c cancels), magnitudes near float32 overflow / in its subnormal range, float64 rows or
    prototypes beyond float32's range."""
    X = rng.standard_normal((n, 2))
    C = rng.standard_normal((k, 2))
    if case == "integer_ties":
        X = rng.integers(-2, 3, size=(n, 2)).astype(float)
        C = rng.integers(-2, 3, size=(k, 2)).astype(float)
    elif case == "duplicates" and k > 1:
        C[k // 2:] = C[: k - k // 2]
        X[: n // 4] = C[rng.integers(k, size=n // 4)]
    elif case == "offset":  # ||c||^2 - 2 x.c cancels: float32 orders close rows wrongly
        shift = 3e3 if dtype == np.float32 else 3e5
        X = X * 1e-2 + shift
        C = C * 1e-2 + shift
    elif case == "huge":  # squares near float32's largest value
        X *= 4e18
        C *= 4e18
    elif case == "tiny":  # float32 products in the subnormal range
        X *= 1e-21
        C *= 1e-21
    elif case == "beyond_float32" and dtype == np.float64:  # some rows, or all prototypes, past float32
        X[rng.integers(n, size=max(1, n // 50))] *= 1e40
        if k % 2:
            C *= 1e30
    X = X.astype(dtype)
    C = C.astype(dtype)
    if case == "near_ties" and k > 1:
        C[1] = np.nextafter(C[0], C[0] + 1)  # one ulp from prototype 0 in both features
        X[: n // 2] = C[0] + (rng.standard_normal((n // 2, 2)) * 1e-3).astype(dtype)
        if k > 3:  # and an exact tie between 2 and 3 at the middle of rows on their bisector
            C[3] = C[2] + np.array([1, 0], dtype=dtype)
            X[n // 2: n // 2 + 20] = C[2] + np.array([0.5, 0], dtype=dtype)
    bad_rows = []
    if case == "non_finite":
        bad_rows = sorted({0, min(63, n - 1), min(64, n - 1), n // 2, n - 1})
        X[bad_rows, rng.integers(2, size=len(bad_rows))] = [np.nan, np.inf, -np.inf, np.nan, np.inf][: len(bad_rows)]
    return X, C, bad_rows


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset", [False, True])
@pytest.mark.parametrize("n,d,k", [(300, 256, 256), (200, 8, 8192), (97, 512, 128)])
def test_blas_screened_path_at_default_thresholds_equals_sequential_reference(dtype, offset, n, d, k):
    """The public ``assign_nearest`` on shapes that take the BLAS-screened kernel with the shipped
    thresholds (no monkeypatching) gives, bit for bit, the labels and distances of the plain NumPy
    reference of the exact kernel's arithmetic -- also far from the origin, where ``||c||^2 - 2 x.c``
    cancels catastrophically and only the screen's recheck keeps the labels right."""
    from fastfc import _assign as A

    assert A.use_gemm(d, k, dtype)
    rng = np.random.default_rng(n + d + k + offset)
    X = rng.normal(size=(n, d))
    C = rng.normal(size=(k, d))
    if offset:
        shift = 3e3 if dtype == np.float32 else 3e7
        X += shift
        C += shift
    X = X.astype(dtype)
    C = C.astype(dtype)
    labels, dist = assign_nearest(X, C, return_distances=True)
    ref_labels, ref_dist = _sequential_ref(X, C)
    np.testing.assert_array_equal(labels, ref_labels)
    np.testing.assert_array_equal(dist.view(np.uint8), ref_dist.view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["random", "integer_ties", "duplicates", "near_ties", "non_finite"])
def test_two_feature_direct_loop_is_bit_identical_to_numpy(dtype, case):
    """The direct kernel's two-feature loop (unweighted d = 2: rows split straight into registers,
    software prefetch a few blocks ahead) must give the plain NumPy loop's labels and distances to the
    bit -- (x_0 - c_0)^2 + (x_1 - c_1)^2 in the dtype, the first minimum -- over many blocks (the
    prefetching stretch and the tail), with exact ties, duplicated prototypes, near ties one unit in the
    last place apart, and NaN/infinite rows (counted, never the best: the other rows unaffected)."""
    rng = np.random.default_rng(2015)
    for n, k in ((4099, 15), (1000, 1), (777, 2), (2048, 64)):
        X, C, bad_rows = _two_feature_case(rng, case, n, k, dtype)
        # the plain NumPy loop (one rounding per operation, no fused multiply-add)
        D = (X[:, 0, None] - C[None, :, 0]) ** 2 + (X[:, 1, None] - C[None, :, 1]) ** 2
        ok = np.setdiff1d(np.arange(n), bad_rows)
        ref = np.argmin(D[ok], axis=1)
        for n_threads, chunk in ((1, 1 << 20), (1, 512), (2, 100)):
            labels, dist, bad = _direct_kernel(X, C, None, n_threads, chunk)
            assert bad == len(bad_rows)
            np.testing.assert_array_equal(labels[ok], ref, err_msg=f"{(n, k, n_threads, chunk)}")
            np.testing.assert_array_equal(dist[ok].view(np.uint8), D[ok, ref].view(np.uint8))
            np.testing.assert_array_equal(_direct_kernel(X, C, None, n_threads, chunk, False)[0][ok], ref)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["random", "integer_ties", "duplicates", "near_ties", "non_finite", "offset",
                                  "huge", "tiny", "beyond_float32"])
def test_two_feature_screen_is_bit_identical_to_numpy(dtype, case):
    """The two-feature screen (``screen=True``, unweighted d = 2, labels only; AVX-512 CPUs) decides rows
    by float32 multiply-adds with the prototype's index packed into the low bits and a rounding-error
    bound, and leaves the close calls to the plain loop: its labels must be the plain NumPy loop's first
    minimum to the bit -- exact ties (integers, duplicated prototypes: the lowest index), near ties one
    unit in the last place apart, NaN/infinite rows (counted), offsets where the screen's own values order
    the prototypes wrongly, magnitudes near float32 overflow and in the subnormal range, float64 rows
    beyond float32's range, k from 1 to 257 (past the screen's limit: the exact loop), block tails and
    threads. With distances asked for the kernel takes the exact loop: same labels and distances. (The
    screen runs for 2 <= k <= 32 float32 / 64 float64: k = 32 and 64 are its widest packings.)"""
    from fastfc._kernels._assign import assign_nearest_kernel

    rng = np.random.default_rng(2016)
    for n, k in ((4099, 15), (1000, 1), (777, 2), (2048, 16), (333, 17), (900, 32), (1100, 64), (1500, 256),
                 (200, 257), (63, 5), (65, 5)):
        X, C, bad_rows = _two_feature_case(rng, case, n, k, dtype)
        with np.errstate(over="ignore", invalid="ignore"):
            D = (X[:, 0, None] - C[None, :, 0]) ** 2 + (X[:, 1, None] - C[None, :, 1]) ** 2
        ok = np.setdiff1d(np.arange(n), bad_rows)
        ref = np.argmin(D[ok], axis=1)
        CT = np.ascontiguousarray(C.T)
        for n_threads, chunk in ((1, 1 << 20), (1, 512), (2, 100)):
            labels = np.full(n, -7, dtype=np.int32)
            bad = assign_nearest_kernel(X, CT, CT, False, labels, None, n_threads, chunk, True)
            assert bad == len(bad_rows) + int((~np.isfinite(D[ok, ref])).sum()), (n, k, case)
            np.testing.assert_array_equal(labels[ok], ref, err_msg=f"{(n, k, case, n_threads, chunk)}")
            dist = np.full(n, -7, dtype=dtype)
            labels = np.full(n, -7, dtype=np.int32)
            assign_nearest_kernel(X, CT, CT, False, labels, dist, n_threads, chunk, True)
            np.testing.assert_array_equal(labels[ok], ref)
            np.testing.assert_array_equal(dist[ok].view(np.uint8), D[ok, ref].view(np.uint8))


def test_assign_nearest_two_features_is_the_exact_loop():
    """assign_nearest takes the two-feature screen for unweighted d = 2 (use_screen(2)); its labels (and,
    with distances, the exact loop's labels and distances) are the exact kernel's in both dtypes."""
    from fastfc import _assign as A

    assert A.use_screen(2, np.float32) and A.use_screen(2, np.float64) and not A.use_screen(3)
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        X = rng.normal(size=(3000, 2)).astype(dtype)
        C = rng.normal(size=(15, 2)).astype(dtype)
        C[7] = C[3]
        X[:100] = C[3]
        ref_labels, ref_dist = _sequential_ref(X, C)
        for n_jobs in (1, 2):
            np.testing.assert_array_equal(assign_nearest(X, C, n_jobs=n_jobs), ref_labels)
            labels, dist = assign_nearest(X, C, n_jobs=n_jobs, return_distances=True)
            np.testing.assert_array_equal(labels, ref_labels)
            np.testing.assert_array_equal(dist, ref_dist)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [2, 5, 12])
def test_direct_kernel_counts_non_finite_rows(dtype, d):
    """The kernel's return value (rows with a NaN/infinite distance) is what assign_nearest's
    finiteness check relies on: every bad row in any lane of any block must be counted."""
    rng = np.random.default_rng(d)
    X = rng.standard_normal((101, d)).astype(dtype)
    C = rng.standard_normal((6, d)).astype(dtype)
    bad_rows = [0, 31, 32, 63, 64, 100]
    X[bad_rows, d - 1] = [np.nan, np.inf, -np.inf, np.nan, np.inf, np.nan]
    for n_threads, chunk in ((1, 512), (2, 10)):
        for with_dist in (True, False):
            assert _direct_kernel(X, C, None, n_threads, chunk, with_dist)[2] == len(bad_rows)
    ok = np.setdiff1d(np.arange(101), bad_rows)
    labels, dist, _ = _direct_kernel(X, C)
    ref_labels, ref_dist = _sequential_ref(X[ok], C)
    np.testing.assert_array_equal(labels[ok], ref_labels)
    np.testing.assert_array_equal(dist[ok], ref_dist)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["random", "offset", "near_duplicates", "exact_ties", "huge", "tiny"])
def test_fma_screen_is_bit_identical_to_sequential_reference(dtype, case):
    """The direct kernel's FMA screen (``screen=True``) decides rows by a rounding-error bound
    and leaves the close calls to the plain loop: labels and distances must be the plain loop's
    to the bit, including where the screen's own values order the prototypes wrongly
    (offsets: catastrophic cancellation), near-duplicate and duplicated prototypes (ties to the
    lowest index), magnitudes near float overflow and underflow, block tails and threads."""
    rng = np.random.default_rng(99)
    shapes = [(1, 16, 1), (5, 8, 3), (65, 10, 9), (130, 20, 33), (777, 36, 50), (300, 64, 8), (257, 100, 10),
              (200, 2, 15), (129, 9, 4)]
    for n, d, k in shapes:
        C = rng.normal(size=(k, d))
        X = rng.normal(size=(n, d))
        if case == "offset":
            shift = 3e3 if dtype == np.float32 else 3e7
            C += shift
            X += shift
        elif case == "near_duplicates" and k > 1:
            C[1::2] = C[0::2][: k // 2] + rng.normal(scale=1e-7, size=(k // 2, d))
            X[: n // 2] = C[rng.integers(k, size=n // 2)] + rng.normal(scale=1e-6, size=(n // 2, d))
        elif case == "exact_ties" and k > 1:
            C[k // 2:] = C[: k - k // 2]
            X[: n // 3] = C[rng.integers(k, size=n // 3)]
        elif case == "huge":  # squares near the largest finite value of the dtype
            scale = 1e18 if dtype == np.float32 else 1e152
            X *= scale
            C *= scale
        elif case == "tiny":  # products in the subnormal range
            scale = 1e-21 if dtype == np.float32 else 1e-160
            X *= scale
            C *= scale
        X = X.astype(dtype)
        C = C.astype(dtype)
        ref_labels, ref_dist = _sequential_ref(X, C)
        for n_threads, chunk in ((1, 512), (2, 31)):
            CT = np.ascontiguousarray(C.T)
            from fastfc._kernels._assign import assign_nearest_kernel

            labels = np.full(n, -7, dtype=np.int32)
            dist = np.full(n, -7, dtype=dtype)
            bad = assign_nearest_kernel(X, CT, CT, False, labels, dist, n_threads, chunk, True)
            np.testing.assert_array_equal(labels, ref_labels, err_msg=f"{(n, d, k, case)}")
            np.testing.assert_array_equal(dist.view(np.uint8), ref_dist.view(np.uint8), err_msg=f"{(n, d, k)}")
            assert bad == int((~np.isfinite(ref_dist)).sum())
            labels2 = np.full(n, -7, dtype=np.int32)
            assign_nearest_kernel(X, CT, CT, False, labels2, None, n_threads, chunk, True)
            np.testing.assert_array_equal(labels2, ref_labels)
        if case == "offset" and k > 1:  # the expansion alone orders some rows wrongly here
            naive = (np.einsum("ij,ij->i", C, C)[None, :] - 2 * (X @ C.T)).argmin(axis=1)
            assert (naive != ref_labels).any() or n < 100


def test_assign_nearest_results_are_the_direct_kernels_around_the_fma_screen_threshold():
    """assign_nearest passes screen=True for unweighted rows with >= SCREEN_MIN_FEATURES
    features below the BLAS threshold; its results are the direct kernel's either way."""
    from fastfc import _assign as A

    rng = np.random.default_rng(3)
    assert not A.use_screen(7, np.float32) and A.use_screen(8, np.float32)
    assert not A.use_screen(9, np.float64) and A.use_screen(10, np.float64)
    for d, k, weighted in ((7, 10, False), (8, 10, False), (9, 10, False), (10, 10, False), (16, 10, False),
                           (40, 12, True), (100, 10, False)):
        for dtype in DTYPES:
            X = rng.normal(size=(1000, d)).astype(dtype)
            C = rng.normal(size=(k, d)).astype(dtype)
            W = rng.random((k, d)).astype(dtype) if weighted else None
            assert not A.use_gemm(d, k, dtype)
            labels, dist = assign_nearest(X, C, W, return_distances=True)
            ref_labels, ref_dist = _sequential_ref(X, C, W)
            np.testing.assert_array_equal(labels, ref_labels)
            np.testing.assert_array_equal(dist, ref_dist)
            np.testing.assert_array_equal(assign_nearest(X, C, W), ref_labels)


def test_threaded_screened_assignment_frees_its_scratch():
    """The threaded FMA-screen path frees every chunk's scratch (it leaked about 25 KB a chunk of
    512 rows at d = 50, k = 10: 2.4 MB per call at 10^5 rows): 150 calls on 20000 rows would add
    about 70 MB to the peak resident size; allowed: 16 MB."""
    import resource

    from fastfc._assign import assign_nearest, use_screen

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20000, 50))
    C = X[:10].copy()
    assert use_screen(50)
    first = assign_nearest(X, C, n_jobs=2)
    for _ in range(3):
        assign_nearest(X, C, n_jobs=2)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(150):
        labels = assign_nearest(X, C, n_jobs=2)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    np.testing.assert_array_equal(labels, first)
    assert grown_mb < 16, grown_mb


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(20000, 50, 10), (3001, 10, 6), (513, 3, 4), (700, 128, 600), (100, 20, 1)])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_row_scale_same_bits_as_scaled_copy(dtype, shape, n_jobs):
    """``assign_nearest(X, C, row_scale=w)`` gives the labels and distances of
    ``assign_nearest(X * w, C)`` bit for bit (what :func:`fastfc._units.nearest_weighted` did with
    its weighted copy of X), on the direct, screened and BLAS-screened ((128, 600): the copy) paths,
    float32 rows included (upcast exactly), zero weights included."""
    from fastfc._assign import assign_nearest

    n, d, k = shape
    rng = np.random.default_rng(n + d + k)
    X = (rng.normal(size=(n, d)) * rng.uniform(0.01, 100, size=d)).astype(dtype)
    w = rng.uniform(0, 3, size=d)
    w[0] = 0.0
    C = np.ascontiguousarray(X[rng.choice(n, k, replace=False)] * w + rng.normal(size=(k, d)) * 0.01)
    ref_l, ref_d = assign_nearest(np.multiply(X, w, dtype=np.float64), C, n_jobs=1, return_distances=True)
    lab, dist = assign_nearest(X, C, n_jobs=n_jobs, row_scale=w, return_distances=True)
    np.testing.assert_array_equal(lab, ref_l)
    np.testing.assert_array_equal(dist, ref_d)
    np.testing.assert_array_equal(assign_nearest(X, C, n_jobs=n_jobs, row_scale=w), ref_l)


def test_nearest_weighted_same_labels_as_weighted_copy():
    """:func:`fastfc._units.nearest_weighted` (rows scaled inside the kernel) labels as the previous
    code did: ``assign_nearest(X * w, C * w)`` on a weighted copy."""
    from fastfc._assign import assign_nearest
    from fastfc._units import nearest_weighted

    rng = np.random.default_rng(5)
    for n, d in [(60000, 10), (12000, 50), (300, 7)]:
        X = rng.normal(size=(n, d)) * rng.uniform(0.1, 10, size=d)
        C = X[:8] + 0.1
        w = 1 / X.std(axis=0)
        ref = assign_nearest(np.ascontiguousarray(X * w), np.ascontiguousarray(C * w), n_jobs=1)
        for nj in (1, 2):
            np.testing.assert_array_equal(nearest_weighted(X, C, w, n_jobs=nj), ref)


def test_row_scale_rejects_non_finite_rows_and_bad_shape():
    """A NaN row, or a finite row that overflows once scaled, is rejected as with the scaled
    copy; a ``row_scale`` of the wrong length is an error."""
    from fastfc._assign import assign_nearest

    X = np.ones((2000, 12))
    C = np.zeros((3, 12))
    X[7, 3] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        assign_nearest(X, C, row_scale=np.ones(12), n_jobs=2)
    X[7, 3] = 1e308
    with pytest.raises(ValueError, match="NaN or infinity"):
        assign_nearest(X, C, row_scale=np.full(12, 10.0))
    with pytest.raises(ValueError, match="row_scale"):
        assign_nearest(np.ones((5, 12)), C, row_scale=np.ones(11))
