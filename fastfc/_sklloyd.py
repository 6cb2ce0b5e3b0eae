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

import threading

import numpy as np

from ._parallel import limit_blas_threads

__all__ = ["single_lloyd", "kmeans_plusplus", "kmeans_fit", "random_state_of", "HAVE_KERNEL"]

from sklearn.cluster._kmeans import _kmeans_single_lloyd  # the fallback (k-FED and FeCA used it before)

try:
    from sklearn.cluster._k_means_common import _relocate_empty_clusters_dense

    from ._kernels._sklloyd import kmeanspp_greedy, lloyd_single

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


#: per thread: one MT19937 re-seeded by :func:`random_state_of` (building one costs ~0.7 ms: it seeds from the OS)
_MT = threading.local()


def random_state_of(seed: int) -> np.random.RandomState:
    """``np.random.RandomState(seed)`` for an int seed in ``[0, 2**32)``: the same state, without its cost.

    ``RandomState(seed)`` first builds an ``MT19937`` seeded from the OS (a ``SeedSequence`` expanded
    to 624 words, about 0.7 ms) and then overwrites that state with the legacy seeding of ``seed``;
    here the legacy seeding (``MT19937._legacy_seeding``, what ``RandomState(seed)`` calls) re-seeds
    one generator kept per thread, which gives the same state (tested) in microseconds. That was
    a fifth of a Fed-k*-HC client's time (one ``KMeans`` seed per client; issue 15). The returned
    object shares that generator: use it before the next call in the same thread and do not keep it.
    Other seeds, or NumPy without the private method: ``RandomState(seed)`` itself.
    """
    bg = getattr(_MT, "bg", None)
    if bg is None:
        bg = np.random.MT19937()
        if not hasattr(bg, "_legacy_seeding"):  # pragma: no cover - private method gone
            return np.random.RandomState(seed)
        _MT.bg = bg
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or not 0 <= int(seed) < 2 ** 32:
        return np.random.RandomState(seed)
    bg._legacy_seeding(int(seed))
    return np.random.RandomState(bg)


def kmeans_plusplus(X: np.ndarray, n_clusters: int, random_state: np.random.RandomState, x_squared_norms: np.ndarray,
                    sample_weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_kmeans_plusplus(X, n_clusters, random_state, x_squared_norms, sample_weight)``: the same seeds, bit for bit.

    scikit-learn's greedy k-means++ (``2 + int(ln k)`` candidates a step) with the same draws
    from ``random_state``; on dense C-contiguous float64 data computed by the kernel
    :func:`fastfc._kernels._sklloyd.kmeanspp_greedy` (NumPy's own BLAS and einsum calls, the
    element-wise steps between them compiled; tested against scikit-learn), otherwise by
    scikit-learn's routine.

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features)
    indices : ndarray of shape (n_clusters,), intp
    """
    if not (HAVE_KERNEL and isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64
            and X.flags.c_contiguous and 1 <= n_clusters <= X.shape[0]
            and isinstance(x_squared_norms, np.ndarray) and x_squared_norms.dtype == np.float64
            and x_squared_norms.shape == (X.shape[0],) and x_squared_norms.flags.c_contiguous
            and isinstance(sample_weight, np.ndarray) and sample_weight.dtype == np.float64
            and sample_weight.shape == (X.shape[0],) and sample_weight.flags.c_contiguous
            and isinstance(random_state, np.random.RandomState)):
        from sklearn.cluster._kmeans import _kmeans_plusplus

        return _kmeans_plusplus(X, n_clusters, random_state=random_state, x_squared_norms=x_squared_norms,
                                sample_weight=sample_weight)
    return kmeanspp_greedy(X, x_squared_norms, sample_weight, int(n_clusters), random_state,
                           2 + int(np.log(n_clusters)), np.matmul)


def kmeans_fit(X: np.ndarray, n_clusters: int, *, max_iter: int = 300, tol: float = 1e-4, random_state: int = 0,
               copy_x: bool = True) -> tuple[np.ndarray, np.ndarray, float, int]:
    """``KMeans(n_clusters, n_init=1, max_iter, tol, random_state, copy_x).fit(X)``, its steps called directly.

    The same operations as the estimator's ``fit`` for dense C-contiguous float64 ``X`` with
    ``init="k-means++"``, ``n_init=1`` and Lloyd (``tol * mean(var(X))``; the rows centred on
    their mean, in place when ``copy_x=False`` and put back afterwards as scikit-learn does;
    squared row norms; greedy k-means++ from ``RandomState(random_state)``
    (:func:`kmeans_plusplus`); scikit-learn's Lloyd on its OpenMP thread count
    (:func:`single_lloyd`); the same ConvergenceWarning when clusters end empty), without the
    estimator's parameter and data validation and its per-step array-API dispatch, which cost
    more than the arithmetic on clients of a few thousand rows (Fed-k*-HC's micro-partition
    at k = 50 on 1,000-row clients: issue 15). Any other ``X`` (float32, not C-contiguous, not
    an ndarray), or scikit-learn's private routines missing: the estimator itself.

    Returns
    -------
    labels : ndarray of shape (n_samples,), int32
    centers : ndarray of shape (n_clusters, n_features)
    inertia : float
    n_iter : int
    """
    if not (HAVE_KERNEL and isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64
            and X.flags.c_contiguous and 1 <= n_clusters <= X.shape[0]):
        from sklearn.cluster import KMeans

        km = KMeans(n_clusters=n_clusters, n_init=1, max_iter=max_iter, tol=tol, random_state=random_state,
                    copy_x=copy_x).fit(X)
        return km.labels_, km.cluster_centers_, float(km.inertia_), int(km.n_iter_)
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.utils._openmp_helpers import _openmp_effective_n_threads

    Xw = X.copy() if copy_x else X
    tol_abs = np.mean(np.var(Xw, axis=0)) * tol if tol != 0 else 0
    rs = random_state_of(random_state)  # np.random.RandomState(random_state), cheaper
    sample_weight = np.ones(Xw.shape[0], dtype=Xw.dtype)
    n_threads = _openmp_effective_n_threads()
    X_mean = Xw.mean(axis=0)
    Xw -= X_mean
    x_squared_norms = np.einsum("ij,ij->i", Xw, Xw)
    centers0, _ = kmeans_plusplus(Xw, n_clusters, rs, x_squared_norms, sample_weight)
    labels, inertia, centers, n_iter = single_lloyd(Xw, sample_weight, centers0, max_iter=max_iter, tol=tol_abs,
                                                    n_threads=n_threads)
    if not copy_x:
        Xw += X_mean
    centers += X_mean
    distinct = int(np.count_nonzero(np.bincount(labels, minlength=n_clusters)))
    if distinct < n_clusters:
        warnings.warn(
            f"Number of distinct clusters ({distinct}) found smaller than n_clusters ({n_clusters}). "
            "Possibly due to duplicate points in X.", ConvergenceWarning, stacklevel=2,
        )
    return labels, centers, float(inertia), int(n_iter)
