"""Nearest-prototype assignment: the ``predict`` of every fastfc method.

Thin validating wrapper around the compiled kernel
:func:`fastfc._kernels._assign.assign_nearest_kernel`.
"""
from __future__ import annotations

import numpy as np

from ._kernels._assign import assign_nearest_gemm_kernel, assign_nearest_kernel, openmp_enabled
from ._parallel import effective_n_jobs, kernel_threads, limit_blas_threads

__all__ = ["assign_nearest", "openmp_enabled"]

#: rows per chunk; small enough that a chunk's rows stay in L2 for d <= 64
CHUNK_SIZE = 512
#: float32 rows compared with non-float32 prototypes are upcast to float64 this many
#: elements (rows x features) at a time (about 8 MB per block)
UPCAST_BLOCK = 1 << 20
#: rows per chunk of the BLAS-screened kernel (its product buffer is rows x prototypes)
GEMM_CHUNK_SIZE = 256
#: the BLAS screen pays off from about this many features x prototypes (and 8 features), per
#: dtype of the computation; below, the direct kernel (vectorised across rows, with its FMA
#: screen from SCREEN_MIN_FEATURES) is faster: CPU ms at 200000 rows, one thread, direct with
#: FMA screen / BLAS screen, float64: (64, 64) 36 / 72, (128, 256) 258 / 362, (256, 256) 817 / 617,
#: (512, 128) 842 / 656; float32: (128, 256) 152 / 252, (256, 256) 472 / 363 (thread CPU time,
#: medians of 5, one-off side-by-side runs at load ~7; the committed roofline table,
#: benchmarks/bench_kernels.py, shows the path each of its shapes takes)
GEMM_MIN_WORK = {"float64": 65536, "float32": 65536}
GEMM_MIN_FEATURES = 8
#: unweighted rows with at least this many features (per dtype of the computation; below the BLAS
#: screen's threshold) go through the direct kernel's FMA screen (``screen=True``: same labels and
#: distances; used on CPUs with AVX-512 and FMA, elsewhere the plain direct loop runs): CPU ms at
#: 200000 rows, k = 10, plain / screen, float64 d = 8 1.6 / 1.8, 10 2.5 / 2.3, 16 3.9 / 3.9,
#: 100 29 / 21; float32 d = 8 0.90 / 0.77, 10 1.24 / 1.07, 16 2.2 / 1.7, 100 16.5 / 12.9;
#: (36, 50) float64 30 / 17, float32 16 / 9 (one-off side-by-side run, load ~7). Two features take the
#: two-feature screen (labels only; with distances the kernel runs the exact two-feature loop): thread CPU ms at
#: 200000 rows, k = 15, labels buffer reused, exact loop / screen, float64 0.56 / 0.30, float32 0.33 / 0.26
#: (one-off side-by-side run, load ~3)
SCREEN_MIN_FEATURES = {"float64": 10, "float32": 8}


#: dtype -> its name, without ``np.dtype.name`` (a Python-level property, about 10 us a call: a
#: noticeable share of a small ``assign_nearest`` call, which looks two names up)
_DTYPE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}


def _dtype_name(dtype) -> str:
    dt = np.dtype(dtype)
    return _DTYPE_NAMES.get(dt) or dt.name


def use_screen(n_features: int, dtype=np.float64) -> bool:
    """Whether unweighted rows (below the BLAS threshold) take the direct kernel's FMA screen (two
    features: the two-feature screen, for labels only; with distances the kernel runs the exact loop)."""
    return n_features == 2 or n_features >= SCREEN_MIN_FEATURES[_dtype_name(dtype)]


def use_gemm(n_features: int, n_prototypes: int, dtype=np.float64) -> bool:
    """Whether the (unweighted) assignment takes the BLAS-screened kernel for this shape and
    dtype of the computation (float32 or float64)."""
    return (n_features >= GEMM_MIN_FEATURES
            and n_features * n_prototypes >= GEMM_MIN_WORK[_dtype_name(dtype)])


def gemm_norms(C: np.ndarray) -> tuple[np.ndarray, float]:
    """Squared norms of the prototypes and a bound of their largest norm (the BLAS screen's inputs).

    Parameters
    ----------
    C : ndarray of shape (n_prototypes, n_features), C-contiguous float32/float64

    Returns
    -------
    cn : ndarray of shape (n_prototypes,), dtype of ``C``
        ``||c_j||^2``.
    cmax : float
        ``max_j ||c_j||``, rounded up (float32 norms are computed in float32).
    """
    cn = np.einsum("ij,ij->i", C, C)
    cmax = float(np.sqrt(np.max(cn.astype(np.float64)))) * (1.0 + 1e-5) + 1e-30
    return cn, cmax


def _as_float_2d(name: str, A, dtype) -> np.ndarray:
    A = np.asarray(A)
    if A.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got an array of shape {A.shape}")
    if A.dtype.kind not in "fiub":
        raise TypeError(f"{name} must be numeric, got dtype {A.dtype}")
    A = np.ascontiguousarray(A, dtype=dtype)
    if not np.isfinite(A).all():
        raise ValueError(f"{name} contains NaN or infinity")
    return A


def _in_blocks(run, X: np.ndarray, dtype, labels: np.ndarray, dist, chunk: int) -> int:
    """``run(X_block, labels_block, dist_block)`` over all rows, upcasting X to ``dtype`` block by block.

    Without a cast it is one call. Each row's result is independent of the block it is in,
    and blocks are whole multiples of the kernel's chunk, so results match one call.
    ``dist`` may be None (then every ``dist_block`` is None). Returns the sum of what the
    calls return (the direct kernel's count of rows with a non-finite distance or label -1).
    """
    if X.dtype == dtype:
        return int(run(X, labels, dist) or 0)
    bad = 0
    rows = max(chunk, (UPCAST_BLOCK // max(X.shape[1], 1)) // chunk * chunk)
    for start in range(0, X.shape[0], rows):
        stop = min(start + rows, X.shape[0])
        bad += int(run(np.ascontiguousarray(X[start:stop], dtype=dtype), labels[start:stop],
                       None if dist is None else dist[start:stop]) or 0)
    return bad


def assign_nearest(
    X,
    centers,
    weights=None,
    *,
    n_jobs: int | None = None,
    return_distances: bool = False,
    check_finite: bool = True,
    row_scale=None,
):
    """Index of the nearest prototype of every row, under optional diagonal weights.

    The distance of row ``x`` to prototype ``k`` is
    ``sum_j weights[k, j] * (x[j] - centers[k, j]) ** 2`` (plain squared
    Euclidean distance when ``weights`` is None).  Ties go to the lowest index.
    The result does not depend on ``n_jobs``.

    Unweighted problems with many features and prototypes (``n_features >= 8``
    and ``n_features * n_prototypes >= GEMM_MIN_WORK``, 65536) first screen the prototypes with a
    BLAS matrix product and then compute the exact distance of every prototype a
    rounding-error bound cannot rule out; below that, unweighted problems with at
    least ``SCREEN_MIN_FEATURES`` (10 in float64, 8 in float32) features, or with two features when only
    labels are asked for, screen with fused multiply-adds inside the direct kernel (AVX-512 CPUs) the same
    way: labels and distances are the same as the direct computation's, only faster.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Rows to label. The computation is in float32 only when ``X``,
        ``centers`` (and ``weights``) are all float32; otherwise in float64, with
        float32 rows upcast block by block (exactly: every float32 is a
        float64), so float32 rows against float64 prototypes get the same labels
        and distances as the same rows in float64.
    centers : array-like of shape (n_prototypes, n_features)
    weights : array-like of shape (n_prototypes, n_features), default=None
        Non-negative per-prototype feature weights.
    n_jobs : int, default=None
        Threads of the compiled kernel (None = 1, -1 = all cores); one thread for fewer than
        :data:`fastfc._parallel.PARALLEL_MIN_WORK` rows x prototypes x features (the same result).
    return_distances : bool, default=False
        Also return the minimal (weighted) squared distance of each row.
    check_finite : bool, default=True
        Reject NaN/inf in ``X`` (prototypes and weights are always checked). The rows
        are checked only when a distance comes out non-finite (every row with NaN or
        infinity gives one), so a finite ``X`` is read once, by the kernel.
    row_scale : array-like of shape (n_features,), default=None
        Label the rows of ``X * row_scale`` (each feature times its factor, computed as NumPy's
        ``np.multiply`` does) instead of ``X``: the labels and distances of
        ``assign_nearest(X * row_scale, centers, ...)``, bit for bit. Unweighted problems off the
        BLAS-screened path scale each chunk of rows inside the kernel, without the (n, d) copy;
        the others make the copy. ``centers`` are in the scaled units.

    Returns
    -------
    labels : ndarray of shape (n_samples,), dtype=int32
    distances : ndarray of shape (n_samples,), dtype of the computation
        Only when ``return_distances`` is True.
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got an array of shape {X.shape}")
    if X.dtype.kind not in "fiub":
        raise TypeError(f"X must be numeric, got dtype {X.dtype}")
    all32 = X.dtype == np.float32 and np.asarray(centers).dtype == np.float32 and (
        weights is None or np.asarray(weights).dtype == np.float32) and (
        row_scale is None or np.asarray(row_scale).dtype == np.float32)
    dtype = np.float32 if all32 else np.float64
    S = None
    if row_scale is not None:
        S = np.ascontiguousarray(row_scale, dtype=dtype)
        if S.shape != (X.shape[1],):
            raise ValueError(f"row_scale must have shape ({X.shape[1]},), got {S.shape}")
        if weights is not None or use_gemm(X.shape[1], np.asarray(centers).shape[0], dtype):
            # the BLAS-screened and weighted paths take scaled rows only as a copy
            X = np.multiply(X, S, dtype=dtype)
            S = None
    # float32 rows against float64 prototypes stay float32 here and are upcast per block below
    X = np.ascontiguousarray(X, dtype=np.float32 if X.dtype == np.float32 else dtype)
    C = _as_float_2d("centers", centers, dtype)
    if C.shape[0] == 0:
        raise ValueError("centers is empty: at least one prototype is needed")
    if C.shape[1] != X.shape[1]:
        raise ValueError(f"X has {X.shape[1]} features but centers have {C.shape[1]}")
    W = None
    if weights is not None:
        W = _as_float_2d("weights", weights, dtype)
        if W.shape != C.shape:
            raise ValueError(f"weights must have the shape of centers {C.shape}, got {W.shape}")
        if (W < 0).any():
            raise ValueError("weights must be non-negative")
    n = X.shape[0]
    labels = np.empty(n, dtype=np.int32)
    d, k = C.shape[1], C.shape[0]
    n_threads = kernel_threads(n_jobs, n * k * d)  # a small pass on one thread (the same labels)
    if W is None and use_gemm(d, k, dtype):
        dist = np.empty(n, dtype=dtype)
        cn, cmax = gemm_norms(C)

        def run(Xb, lab, dst):
            assign_nearest_gemm_kernel(Xb, C, cn, cmax, lab, dst, n_threads, GEMM_CHUNK_SIZE)

        # the threads are ours (n_jobs); each runs its own small products on one BLAS thread
        with limit_blas_threads(1):
            _in_blocks(run, X, dtype, labels, dist, GEMM_CHUNK_SIZE)
        bad = not (np.isfinite(dist).all() and (labels >= 0).all()) if n else False
    else:
        # the direct kernel counts the rows with a non-finite distance (or label -1) itself, and
        # writes the distances only when they are asked for
        dist = np.empty(n, dtype=dtype) if return_distances else None
        # the direct kernel takes prototypes (and weights) transposed, (d, k)
        CT = np.ascontiguousarray(C.T)
        WT = CT if W is None else np.ascontiguousarray(W.T)

        screen = W is None and use_screen(d, dtype)

        def run(Xb, lab, dst):
            return assign_nearest_kernel(Xb, CT, WT, W is not None, lab, dst, n_threads, CHUNK_SIZE, screen, S)

        bad = _in_blocks(run, X, dtype, labels, dist, CHUNK_SIZE) > 0
    # a row with NaN or infinity has a non-finite distance (or, through the BLAS screen, no
    # candidate: label -1): the full finiteness check of X (a pass over n x d values and an
    # n x d temporary) runs only then
    if bad and check_finite and not np.isfinite(X if S is None else np.multiply(X, S, dtype=dtype)).all():
        raise ValueError("X contains NaN or infinity")
    if bad and (labels < 0).any():
        raise MemoryError("assign_nearest: could not allocate the per-chunk work buffer")
    if return_distances:
        return labels, dist
    return labels
