"""Numba kernels of FedCRef (federated cluster refinement): the fused element-wise steps of the
autoencoder, the association score and the greedy refinement.

Numeric work only. The element-wise AE kernels compile with ``error_model="numpy"``: their
divisions never see a zero divisor (``1 + exp(-z) >= 1``, ``sqrt(v) + eps > 0``), so the only effect
is that LLVM may drop Python's zero-division branch and vectorise the loops (Adam's ``sqrt`` and
division become packed instructions: same IEEE-rounded results, bit for bit). Every kernel takes validated, C-contiguous arrays (activations and
parameters float32, indices int64) plus preallocated outputs where it writes more than a
scalar, never validates, never touches an RNG, and releases the GIL (``nogil=True``) so
models and clients can run in threads. Orchestration lives in :mod:`fastfc._ae` and
:mod:`fastfc.fedcref`; the plain NumPy references the kernels are tested against are in
``tests/reference_fedcref.py`` (the AE forward pass, the association and ratio scores, the refinement) and
in ``tests/test_fedcref_ae.py`` (the fused element-wise steps, per kernel).

Spec: ``shared/specs/fedcref.md`` §3.1 (AE), §3.3 (association score), §3.5 (Algorithm 2),
§4.2 (hot loops).

* :func:`bias_relu` -- ``A += b; A = max(A, 0)`` in place (hidden layers, forward).
* :func:`relu_mask` -- ``D *= (H > 0)`` in place (hidden layers, backward; ``H > 0`` iff ``A > 0``).
* :func:`bias_sigmoid_mse_grad` -- output layer, forward and backward in one pass: adds the
  bias, applies the sigmoid, accumulates the batch MSE and writes
  ``delta = 2/(B d) (x_hat - x) x_hat (1 - x_hat)`` in place of the pre-activation.
* :func:`bias_sigmoid_row_mse` -- output layer for evaluation: per-row mean squared
  reconstruction error, without materialising ``x_hat``.
* :func:`adam_step` -- one Keras-style Adam update of a flat float32 parameter buffer.
* :func:`association_score` -- ``Q_alpha(minmax(|e_own - e_ext|))`` of one (cluster, model) pair.
* :func:`ratio_score` -- ``median(e_ext / e_own)`` of one (cluster, model) pair (FedCRef's default
  ``association="ratio"`` test, not in the paper).
* :func:`cluster_scores` -- the score of every (own cluster, model) pair of a client, either test.
* :func:`cluster_refine` -- Algorithm 2 (greedy model selection, leftovers to the best selected).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from fastfc._config import NUMBA_CACHE

__all__ = [
    "bias_relu",
    "relu_mask",
    "bias_sigmoid_mse_grad",
    "bias_sigmoid_row_mse",
    "adam_step",
    "association_score",
    "ratio_score",
    "cluster_scores",
    "cluster_refine",
]


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def bias_relu(A, b):
    """Add the bias and apply ReLU, in place.

    Parameters
    ----------
    A : ndarray of shape (n_rows, n_units), float32, C-contiguous
        Pre-activations ``h W``; overwritten with ``max(h W + b, 0)``.
    b : ndarray of shape (n_units,), float32
    """
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            v = A[i, j] + b[j]
            A[i, j] = v if v > 0 else np.float32(0.0)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def relu_mask(D, H):
    """Zero the gradient where the ReLU was inactive, in place: ``D *= (H > 0)``.

    Parameters
    ----------
    D : ndarray of shape (n_rows, n_units), float32
        Gradient with respect to the layer's output; overwritten with the gradient with
        respect to its pre-activation.
    H : ndarray of shape (n_rows, n_units), float32
        The layer's ReLU output (``H > 0`` exactly where the pre-activation was > 0).
    """
    n, m = D.shape
    for i in range(n):
        for j in range(m):
            if not H[i, j] > 0:
                D[i, j] = np.float32(0.0)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def bias_sigmoid_mse_grad(A, b, X):
    """Output layer of a training step: bias, sigmoid, batch MSE and its gradient, fused.

    Parameters
    ----------
    A : ndarray of shape (B, d), float32
        Output pre-activations without bias (``h5 W6``); overwritten with
        ``delta6 = dL/dA = (2 / (B d)) (x_hat - x) x_hat (1 - x_hat)``.
    b : ndarray of shape (d,), float32
    X : ndarray of shape (B, d), float32
        The batch (the reconstruction target).

    Returns
    -------
    loss : float
        ``mean((x_hat - x)^2)`` over the batch and the features (accumulated in float64).
    """
    n, d = A.shape
    scale = np.float32(2.0 / (n * d))
    total = 0.0
    for i in range(n):
        row = A[i]
        # two passes per row: the sigmoids (independent exp calls, no loop-carried sum), then the
        # loss (float64 sum in the same row-major order) and the delta; same operations, same bits
        for j in range(d):
            row[j] = np.float32(1.0) / (np.float32(1.0) + np.exp(-(row[j] + b[j])))
        for j in range(d):
            xh = row[j]
            r = xh - X[i, j]
            total += np.float64(r) * np.float64(r)
            row[j] = scale * r * xh * (np.float32(1.0) - xh)
    return total / (n * d)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def bias_sigmoid_row_mse(A, b, X, out):
    """Output layer for evaluation: per-row mean squared error of ``sigmoid(A + b)`` against ``X``.

    Parameters
    ----------
    A : ndarray of shape (n_rows, d), float32
        Output pre-activations without bias; not modified.
    b : ndarray of shape (d,), float32
    X : ndarray of shape (n_rows, d), float32
    out : ndarray of shape (n_rows,), float32
        Receives ``mean_f (x_f - sigmoid(a_f + b_f))^2`` (accumulated in float64).
    """
    n, d = A.shape
    for i in range(n):
        s = 0.0
        for j in range(d):
            z = A[i, j] + b[j]
            xh = np.float32(1.0) / (np.float32(1.0) + np.exp(-z))
            r = xh - X[i, j]
            s += np.float64(r) * np.float64(r)
        out[i] = s / d


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def adam_step(w, g, m, v, lr_t, beta1, beta2, eps):
    """One Adam update in the Keras form, in place on flat float32 buffers.

    ``m += (g - m)(1 - beta1)``, ``v += (g^2 - v)(1 - beta2)``, ``w -= lr_t m / (sqrt(v) + eps)``
    where the caller passes the bias-corrected rate ``lr_t = lr sqrt(1 - beta2^s) / (1 - beta1^s)``.

    Parameters
    ----------
    w, g, m, v : ndarray of shape (n_params,), float32
        Parameters, gradient, first and second moments.
    lr_t, beta1, beta2, eps : float
    """
    b1 = np.float32(1.0 - beta1)
    b2 = np.float32(1.0 - beta2)
    lr = np.float32(lr_t)
    ep = np.float32(eps)
    for k in range(w.shape[0]):
        gk = g[k]
        mk = m[k] + (gk - m[k]) * b1
        vk = v[k] + (gk * gk - v[k]) * b2
        m[k] = mk
        v[k] = vk
        w[k] -= lr * mk / (np.sqrt(vk) + ep)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def _percentile_of(v, p):
    """The ``p``-quantile (``p`` in [0, 1]) of ``v`` (n >= 1) with linear interpolation, as NumPy's
    default; sorts a copy. Equal neighbours give that value exactly (which keeps ``inf - inf`` out)."""
    n = v.shape[0]
    s = np.sort(v)
    pos = p * (n - 1)
    k = int(math.floor(pos))
    frac = pos - k
    if k + 1 >= n or frac == 0.0 or s[k + 1] == s[k]:
        return s[k]
    return s[k] + (s[k + 1] - s[k]) * frac


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def _score(e_own, e_ext, idx, alpha, buf):
    """Score of the rows ``idx`` of two error columns (see :func:`association_score`)."""
    n = idx.shape[0]
    lo = np.inf
    hi = -np.inf
    for t in range(n):
        dv = abs(np.float64(e_own[idx[t]]) - np.float64(e_ext[idx[t]]))
        buf[t] = dv
        if dv < lo:
            lo = dv
        if dv > hi:
            hi = dv
    if hi - lo <= 1e-12 * max(hi, 1e-12):
        return 0.0
    q = _percentile_of(buf[:n], alpha / 100.0)
    return (q - lo) / (hi - lo)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def association_score(e_own, e_ext, alpha):
    """One direction of the FedCRef association test (spec §3.3, Eq. 2).

    ``D = |e_own - e_ext|``, min-max normalised to [0, 1] (0 when all differences are
    equal), and its ``alpha``-th percentile with linear interpolation (NumPy's default).

    Parameters
    ----------
    e_own : ndarray of shape (n,), float32
        Per-sample errors of the data owner's model on the owner's cluster (n >= 1).
    e_ext : ndarray of shape (n,), float32
        Per-sample errors of the received model on the same samples.
    alpha : float
        Percentile in [0, 100].

    Returns
    -------
    score : float
        In [0, 1]; the pair passes this direction when ``score <= theta``.
    """
    n = e_own.shape[0]
    idx = np.arange(n)
    buf = np.empty(n, dtype=np.float64)
    return _score(e_own, e_ext, idx, alpha, buf)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def _ratio(e_own, e_ext, idx, buf):
    """Median ratio of the rows ``idx`` of two error columns (see :func:`ratio_score`)."""
    n = idx.shape[0]
    for t in range(n):
        o = np.float64(e_own[idx[t]])
        x = np.float64(e_ext[idx[t]])
        if o > 0.0:
            buf[t] = x / o
        else:  # the own model reconstructs the row exactly: equal iff the other one does too
            buf[t] = 1.0 if x <= 0.0 else np.inf
    return _percentile_of(buf[:n], 0.5)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def ratio_score(e_own, e_ext):
    """One direction of the ratio association test, FedCRef's default (``association="ratio"``; not in
    the paper): the median over the owner's rows of ``e_ext / e_own``.

    How many times worse the received model reconstructs the owner's rows than the owner's own model,
    for the typical row (the median, with NumPy's linear interpolation). A row the own model
    reconstructs exactly counts 1 if the received model does too, +inf otherwise.

    Parameters
    ----------
    e_own : ndarray of shape (n,), float32
        Per-sample errors of the data owner's model on the owner's cluster (n >= 1).
    e_ext : ndarray of shape (n,), float32
        Per-sample errors of the received model on the same samples.

    Returns
    -------
    score : float
        >= 0; the pair passes this direction when ``score <= ratio_threshold``.
    """
    n = e_own.shape[0]
    idx = np.arange(n)
    buf = np.empty(n, dtype=np.float64)
    return _ratio(e_own, e_ext, idx, buf)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def cluster_scores(E, order, starts, own_col, ext_cols, alpha, out, test=0):
    """Scores of every (own cluster, received model) pair of one client.

    Parameters
    ----------
    E : ndarray of shape (n_samples, n_models), float32
        Per-sample reconstruction errors of every model on the client's rows.
    order : ndarray of shape (n_samples,), int64
        Row indices sorted by local cluster.
    starts : ndarray of shape (n_clusters + 1,), int64
        Cluster ``q``'s rows are ``order[starts[q]:starts[q + 1]]``.
    own_col : ndarray of shape (n_clusters,), int64
        Column of ``E`` holding cluster ``q``'s own model (-1: no model, row skipped).
    ext_cols : ndarray of shape (n_ext,), int64
        Columns of ``E`` of the received models to score against.
    alpha : float
        Percentile in [0, 100] (``test=0`` only).
    out : ndarray of shape (n_clusters, n_ext), float64
        Receives the scores; rows of clusters without a model or without rows are left untouched.
    test : int, default=0
        0: the paper's score (:func:`association_score`); 1: the median ratio (:func:`ratio_score`).
    """
    k = starts.shape[0] - 1
    m = ext_cols.shape[0]
    for t in range(k * m):
        q = t // m
        j = t - q * m
        n = starts[q + 1] - starts[q]
        if own_col[q] < 0 or n == 0:
            continue
        idx = order[starts[q]:starts[q + 1]]
        buf = np.empty(n, dtype=np.float64)
        if test == 1:
            out[q, j] = _ratio(E[:, own_col[q]], E[:, ext_cols[j]], idx, buf)
        else:
            out[q, j] = _score(E[:, own_col[q]], E[:, ext_cols[j]], idx, alpha, buf)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def cluster_refine(E, n_clusters, labels, sel):
    """Algorithm 2 of FedCRef (ClusterRefine, spec §3.5): greedy model selection.

    For ``p = 0..K-1``: every unassigned row votes for its lowest-error model among the
    models not yet selected (ties: lowest column); the model with most votes (ties: lowest
    column, so local models win) is selected and its voters form cluster ``p``. Rows left
    unassigned go to the selected model with the lowest error.

    Parameters
    ----------
    E : ndarray of shape (n_samples, n_models), float32
        Per-sample errors of the candidate models (local models first).
    n_clusters : int
        K, the number of clusters to form (>= 1).
    labels : ndarray of shape (n_samples,), int64
        Receives the cluster of each row in ``0..K-1``.
    sel : ndarray of shape (n_clusters,), int64
        Receives the model selected for each cluster, -1 for clusters left empty (when the
        rows or the models ran out first).

    Returns
    -------
    n_selected : int
        Number of clusters formed (the first ``n_selected`` entries of ``sel``).
    """
    n, m = E.shape
    avail = np.ones(m, dtype=np.bool_)
    assigned = np.zeros(n, dtype=np.bool_)
    best = np.empty(n, dtype=np.int64)
    counts = np.zeros(m, dtype=np.int64)
    for p in range(n_clusters):
        sel[p] = -1
    for i in range(n):
        labels[i] = -1
    n_left = n
    n_sel = 0
    for p in range(n_clusters):
        if n_left == 0 or n_sel == m:
            break
        for j in range(m):
            counts[j] = 0
        for i in range(n):
            if assigned[i]:
                continue
            bj = -1
            bv = np.inf
            for j in range(m):
                if avail[j] and E[i, j] < bv:
                    bv = E[i, j]
                    bj = j
            if bj < 0:  # every available error is NaN/inf: lowest available column
                for j in range(m):
                    if avail[j]:
                        bj = j
                        break
            best[i] = bj
            counts[bj] += 1
        js = -1
        cmax = -1
        for j in range(m):
            if avail[j] and counts[j] > cmax:
                cmax = counts[j]
                js = j
        for i in range(n):
            if not assigned[i] and best[i] == js:
                assigned[i] = True
                labels[i] = p
                n_left -= 1
        sel[p] = js
        avail[js] = False
        n_sel += 1
    if n_left > 0:
        for i in range(n):
            if assigned[i]:
                continue
            bp = 0
            bv = np.inf
            for p in range(n_sel):
                e = E[i, sel[p]]
                if e < bv:
                    bv = e
                    bp = p
            labels[i] = bp
    return n_sel
