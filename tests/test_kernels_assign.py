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
def test_blas_screen_is_identical_to_direct_kernel(dtype, case):
    """Above GEMM_MIN_WORK the BLAS-screened path must give the direct kernel's labels and
    distances bit for bit, also where a plain ||c||^2 - 2 x.c would pick the wrong one."""
    from fastfc import _assign as A

    rng = np.random.default_rng(11)
    n, d, k = 3001, 24, 40
    assert d >= A.GEMM_MIN_FEATURES and d * k >= A.GEMM_MIN_WORK
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
def test_blas_screen_same_result_for_any_thread_count(dtype):
    rng = np.random.default_rng(8)
    X = rng.normal(size=(20_011, 30)).astype(dtype)
    C = rng.normal(size=(25, 30)).astype(dtype)
    base, bd = assign_nearest(X, C, n_jobs=1, return_distances=True)
    for n_jobs in (2, 3, -1):
        lab, dist = assign_nearest(X, C, n_jobs=n_jobs, return_distances=True)
        np.testing.assert_array_equal(lab, base)
        np.testing.assert_array_equal(dist, bd)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("d,k,weighted,dtypes", [
    (3, 4, False, ("float64", "float64")),
    (3, 4, True, ("float32", "float32")),
    (16, 40, False, ("float64", "float64")),   # BLAS screen
    (16, 40, False, ("float32", "float32")),
    (16, 40, False, ("float32", "float64")),   # upcast block by block
    (16, 40, True, ("float64", "float64")),
])
def test_non_finite_rows_are_rejected_wherever_they_are(bad, d, k, weighted, dtypes):
    """The rows are checked only when a distance comes out non-finite: every NaN/inf row
    (in any feature, any chunk, either kernel) must still raise."""
    from fastfc._assign import assign_nearest

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
