"""Plain NumPy references of FedCRef's Numba kernels (fastfc._kernels._fedcref), written from the
spec (shared/specs/fedcref.md §3.1, §3.3, §3.5) for the tests, without any of the kernels' fusion."""
from __future__ import annotations

import numpy as np


def association_score(e_own, e_ext, alpha):
    """Spec §3.3 Score: min-max normalised |difference|, alpha-th percentile (numpy linear)."""
    D = np.abs(np.asarray(e_own, np.float64) - np.asarray(e_ext, np.float64))
    lo, hi = D.min(), D.max()
    if hi - lo <= 1e-12 * max(hi, 1e-12):
        return 0.0
    return float(np.percentile((D - lo) / (hi - lo), alpha))


def ratio_score(e_own, e_ext):
    """The opt-in ratio test's score: median over the rows of e_ext / e_own (an exactly reconstructed
    own row counts 1 if the other model reconstructs it exactly too, +inf otherwise)."""
    o = np.asarray(e_own, np.float64)
    x = np.asarray(e_ext, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(o > 0, x / np.where(o > 0, o, 1.0), np.where(x <= 0, 1.0, np.inf))
    return float(np.median(r))


def cluster_refine(E, K):
    """Spec §3.5 Algorithm 2 with Python sets; returns (labels, sel) (sel -1 for unformed clusters)."""
    E = np.asarray(E, np.float64)
    n, m = E.shape
    R = list(range(n))
    avail = list(range(m))
    sel = []
    y = np.full(n, -1, dtype=np.int64)
    for p in range(K):
        if not R or not avail:
            break
        sub = E[np.ix_(R, avail)]
        b = np.asarray(avail)[np.argmin(sub, axis=1)]
        counts = np.array([(b == j).sum() for j in avail])
        js = avail[int(np.argmax(counts))]
        H = [k for k, bk in zip(R, b) if bk == js]
        y[H] = p
        sel.append(js)
        avail.remove(js)
        R = [k for k in R if k not in set(H)]
    for k in R:
        y[k] = int(np.argmin(E[k, sel]))
    return y, np.array(sel + [-1] * (K - len(sel)), dtype=np.int64)


def ae_forward(params_list, X):
    """Autoencoder forward from explicit (W, b) lists in float64: ReLU hidden, sigmoid output."""
    h = np.asarray(X, np.float64)
    for W, b in params_list[:-1]:
        h = np.maximum(h @ W + b, 0.0)
    W, b = params_list[-1]
    return 1.0 / (1.0 + np.exp(-(h @ W + b)))


def adam_keras(w, g, m, v, step, lr=1e-3, b1=0.9, b2=0.999, eps=1e-7):
    """One Keras Adam update in float64 (step is the 1-based update count)."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    lr_t = lr * np.sqrt(1 - b2 ** step) / (1 - b1 ** step)
    return w - lr_t * m / (np.sqrt(v) + eps), m, v
