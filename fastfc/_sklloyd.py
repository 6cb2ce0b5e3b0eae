"""scikit-learn's Lloyd (``_kmeans_single_lloyd``) with its per-call and per-iteration overhead cut, same bits.

k-FED's local step (best of 5 starts per client), its server (10 starts on the pooled local
centres) and FeCA's local k-means run scikit-learn's Lloyd many times on a few dozen to a
few thousand rows; there scikit-learn's Python-level iteration loop, its per-call thread
limit and its per-iteration allocations and OpenMP region cost more than the arithmetic
(issue 15, "Small data"). :func:`single_lloyd` runs the whole loop in the compiled kernel
:func:`fastfc._kernels._sklloyd.lloyd_single`, which performs scikit-learn's operations in
scikit-learn's order (the same BLAS ``gemm`` calls on the same chunks, the same sums), so
its labels, centres, inertia and iteration count are bit-identical to
``_kmeans_single_lloyd(..., n_threads=1)`` (tested against it on random problems, float32
and float64, weights, empty clusters). Where the kernel does not apply (more than one
OpenMP thread, other dtypes or layouts, or scikit-learn's private routines missing) it
calls scikit-learn's routine itself.
"""
from __future__ import annotations

import numpy as np

from ._parallel import limit_blas_threads

__all__ = ["single_lloyd", "HAVE_KERNEL"]

from sklearn.cluster._kmeans import _kmeans_single_lloyd  # the fallback (k-FED and FeCA used it before)

try:
    from sklearn.cluster._k_means_common import _relocate_empty_clusters_dense

    from ._kernels._sklloyd import lloyd_single

    #: whether the compiled path is available (scikit-learn's private routines and the kernel import)
    HAVE_KERNEL = True
except ImportError:  # pragma: no cover - private API moved or kernel not built
    HAVE_KERNEL = False


def _applies(X, sample_weight, centers_init, n_threads) -> bool:
    return (HAVE_KERNEL and n_threads == 1 and isinstance(X, np.ndarray) and X.ndim == 2
            and X.dtype in (np.float32, np.float64) and X.flags.c_contiguous and X.shape[0] > 0
            and isinstance(sample_weight, np.ndarray) and sample_weight.dtype == X.dtype
            and sample_weight.flags.c_contiguous and sample_weight.shape == (X.shape[0],)
            and isinstance(centers_init, np.ndarray) and centers_init.dtype == X.dtype
            and centers_init.flags.c_contiguous and centers_init.ndim == 2 and centers_init.shape[0] > 0
            and centers_init.shape[1] == X.shape[1])


def single_lloyd(X: np.ndarray, sample_weight: np.ndarray, centers_init: np.ndarray, *, max_iter: int = 300,
                 tol: float = 1e-4, n_threads: int = 1):
    """``_kmeans_single_lloyd(X, sample_weight, centers_init, max_iter=max_iter, tol=tol, n_threads=n_threads)``.

    The same values, bit for bit; on one thread computed by the compiled kernel (see the
    module docstring) under one BLAS thread, as scikit-learn's routine sets. Like it,
    ``centers_init`` may be overwritten (it is a work buffer).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64
        Dense, C-contiguous for the compiled path (else scikit-learn's routine).
    sample_weight : ndarray of shape (n_samples,), X's dtype
    centers_init : ndarray of shape (n_clusters, n_features), X's dtype
    max_iter : int, default=300
    tol : float, default=1e-4
        Absolute tolerance on the summed squared centre shift (scikit-learn passes
        ``tol * mean(var(X))``).
    n_threads : int, default=1
        OpenMP threads of scikit-learn's routine; the kernel runs only for 1.

    Returns
    -------
    labels : ndarray of shape (n_samples,), int32
    inertia : float
    centers : ndarray of shape (n_clusters, n_features)
    n_iter : int
    """
    if not _applies(X, sample_weight, centers_init, n_threads):
        return _kmeans_single_lloyd(X, sample_weight, centers_init, max_iter=max_iter, tol=tol, n_threads=n_threads)
    with limit_blas_threads(1):  # free when the caller (a client or the server phase) already holds it
        return lloyd_single(X, sample_weight, centers_init, int(max_iter), float(tol), _relocate_empty_clusters_dense)
