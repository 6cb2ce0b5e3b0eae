"""Slow, deliberately naive NumPy references for the CPL engine (test-only, never shipped).

Written literally from shared/specs/fed_hire.md §3.1 and §3.5, with no attempt at speed:

* the centroids are recomputed as ``S / m`` for every sample;
* reference semantics: similarities in the LINEAR domain, NaN -> 0, normalised by their sum,
  ``shat = (1 - wins / sum(wins)) * w * s`` with NaNs propagating exactly as in the authors'
  code, winner and rival from a sort of ``-shat`` (stable: NaN last, ties to the lowest index);
* robust semantics (§3.1.7): log-domain scores of the live candidates, stable sort;
* the feature weights use the direct ``O(k n d)`` formulas of §3.1.5 on the member and
  non-member sets, recomputed from scratch.

The one convention shared with the kernels that is not literal floating point: a feature whose
values are all equal on a set has variance exactly 0 and mean equal to that value (see
``_mean_var``); the authors' result there depends on rounding.
"""
from __future__ import annotations

import math
import statistics

import numpy as np


def sigmoid_w(theta):
    return 1.0 / (1.0 + np.exp(-10.0 * np.asarray(theta, dtype=float) + 5.0))


def log_sigmoid_w(theta):
    """log w = -softplus(5 - 10 theta), evaluated stably (math module, scalar)."""
    t = 5.0 - 10.0 * theta
    if t > 0.0:
        return -(t + math.log1p(math.exp(-t)))
    return -math.log1p(math.exp(t))


def _mean_var(v):
    """Mean and sample variance (ddof=1) of a 1-D set; exactly (v0, 0) when constant."""
    if v.shape[0] > 0 and np.all(v == v[0]):
        return float(v[0]), 0.0
    with np.errstate(all="ignore"):
        return float(np.mean(v)), float(np.var(v, ddof=1))


def gaussian_hellinger(mu1, v1, mu2, v2):
    """Hellinger distance between N(mu1, v1) and N(mu2, v2) (variances), no safeguards."""
    with np.errstate(all="ignore"):
        vs = v1 + v2
        if vs == 0:
            # fastfc's reading of rule (d): both sides constant -> a = 1, no NaN row (see the kernel)
            return 1.0
        bc = math.sqrt(2.0 * math.sqrt(v1) * math.sqrt(v2) / vs) * math.exp(-((mu1 - mu2) ** 2) / (4.0 * vs))
        return math.sqrt(1.0 - bc) if 1.0 - bc >= 0 else float("nan")


def reference_feature_weights(X, y, k, C, semantics="robust", eps=1e-12, live=None, keep_singletons=False):
    """Direct O(k n d) feature weights (§3.1.5), plus the robust (§3.1.7) or NaN (§3.1.6) rules.

    Returns ``(Mw, live_after)`` where ``Mw`` is (k, d): robust rows of dead candidates are
    NaN here (the kernel leaves them untouched; compare live rows only), reference NaN rows are
    NaN. ``live_after`` is the live mask after the update (robust: singletons killed, never the
    last live one; reference: finite rows with members). ``keep_singletons`` (robust only):
    a candidate with one member stays live and gets the formula's weights.
    """
    X = np.asarray(X, dtype=float)
    n, d = X.shape
    Mw = np.full((k, d), np.nan)
    min_live = 1 if keep_singletons else 2
    if live is None:
        live = np.ones(k, dtype=bool)
    live = np.asarray(live, dtype=bool).copy()
    counts = np.array([(y == j).sum() for j in range(k)])
    if semantics == "robust":
        surv = [j for j in range(k) if live[j] and counts[j] >= min_live]
        keep = None
        if not surv:
            cand = [j for j in range(k) if live[j]]
            keep = cand[0] if cand else None
    for j in range(k):
        m = counts[j]
        if semantics == "robust":
            if not live[j]:
                continue
            if m < min_live:
                if j == keep:
                    Mw[j] = 1.0 / d
                else:
                    live[j] = False
                continue
            if n - m < 2:
                Mw[j] = 1.0 / d
                continue
        else:
            if m <= 1 or n - m < 2:
                live[j] = False
                continue
        inside = X[y == j]
        outside = X[y != j]
        h = np.empty(d)
        bad = False
        for z in range(d):
            mu, vi = _mean_var(inside[:, z])
            mub, vo = _mean_var(outside[:, z])
            if semantics == "robust":
                if vi + vo <= eps:
                    a = 1.0
                else:
                    bc = math.sqrt(2.0 * math.sqrt(vi) * math.sqrt(vo) / (vi + vo)) * math.exp(
                        -((mu - mub) ** 2) / (4.0 * (vi + vo)))
                    a = math.sqrt(min(1.0, max(0.0, 1.0 - bc)))
            else:
                a = gaussian_hellinger(mu, vi, mub, vo)
                if not a == a:
                    bad = True
            b = np.mean(np.exp(-0.5 * (inside[:, z] - C[j, z]) ** 2))
            h[z] = a * b
        hs = 0.0
        for z in range(d):
            hs += h[z]
        if semantics == "robust":
            Mw[j] = h / hs if hs > 0 else 1.0 / d
        else:
            if bad or not hs > 0:
                live[j] = False
            else:
                Mw[j] = h / hs
    return Mw, live


def _wdist(x, C, Mw):
    """D_j for every row of C: the plain NumPy expression."""
    return np.sum(Mw * (x - C) ** 2, axis=1)


def reference_cpl(X, k, seeds, eta=0.05, max_passes=31, semantics="robust", eps=1e-12, keep_singletons=False):
    """Literal CPL run. Returns ``(centers, labels, n_clusters, n_passes)`` like ``cpl``."""
    X = np.asarray(X, dtype=float)
    n, d = X.shape
    k = max(1, min(n, int(k)))
    if k == 1:
        return X.sum(axis=0, keepdims=True) / n, np.zeros(n, dtype=np.int64), 1, 0
    seeds = np.asarray(seeds)[:k]
    S = X[seeds].copy()
    m = np.ones(k)
    y = np.full(n, -1)
    y[seeds] = np.arange(k)
    Mw = np.full((k, d), 1.0 / d)
    theta = np.ones(k)
    wins = np.ones(k)
    alive = np.ones(k, dtype=bool)  # robust only
    passes = 0
    with np.errstate(all="ignore"):
        while True:
            changed = False
            for i in range(n):
                x = X[i]
                C = S / m[:, None]
                D = _wdist(x, C, Mw)
                if semantics == "reference":
                    s = np.exp(-D / 2.0)
                    s[np.isnan(s)] = 0.0
                    s = s / s.sum()
                    shat = (1.0 - wins / wins.sum()) * sigmoid_w(theta) * s
                    order = np.argsort(-shat, kind="stable")
                    v, r = int(order[0]), int(order[1])
                    ratio = shat[r] / shat[v]
                    theta[v] += eta
                    theta[r] -= eta * ratio
                else:
                    # §3.1.2 [R]: log shat_j = log gamma_j - softplus(5 - 10 theta_j) - D_j / 2
                    lg = np.full(k, -np.inf)
                    W = wins.sum()
                    for j in range(k):
                        if alive[j]:
                            lg[j] = math.log(1.0 - wins[j] / W) + log_sigmoid_w(theta[j]) - D[j] / 2
                    order = np.argsort(-lg, kind="stable")
                    v, r = int(order[0]), int(order[1])
                    theta[v] += eta
                    if alive[r]:
                        theta[r] -= eta * math.exp(lg[r] - lg[v])
                wins[v] += 1
                if y[i] != v:
                    S[v] += x
                    m[v] += 1
                    if y[i] != -1:
                        S[y[i]] -= x
                        m[y[i]] -= 1
                        if m[y[i]] == 0:
                            alive[y[i]] = False
                    y[i] = v
                    changed = True
            passes += 1
            if not changed or passes >= max_passes:
                break
            C = S / m[:, None]
            Mw_new, live = reference_feature_weights(X, y, k, C, semantics, eps, live=alive,
                                                     keep_singletons=keep_singletons)
            if semantics == "robust":
                Mw = np.where(live[:, None], Mw_new, Mw)
                alive = live
            else:
                Mw = Mw_new
    act = np.flatnonzero(m > 0)
    remap = np.full(k, -1)
    remap[act] = np.arange(act.shape[0])
    return S[act] / m[act][:, None], remap[y].astype(np.int64), int(act.shape[0]), passes


def assert_cpl_matches(X, k, seeds, **params):
    """``fastfc._cpl.cpl`` and :func:`reference_cpl` agree: labels, count, passes, centres."""
    from fastfc._cpl import cpl

    got = cpl(X, k, seeds=seeds, **params)
    centers, labels, k_out, passes = reference_cpl(X, k, seeds, **params)
    np.testing.assert_array_equal(got.labels, labels)
    assert got.n_clusters == k_out and got.n_passes == passes
    np.testing.assert_allclose(got.centers, centers, rtol=1e-10, atol=1e-12)


def reference_objective(X, labels, centers, Mw_active):
    """GOLD objective: sum_i s(x_i, c_{y_i}) / sum_t s(x_i, c_t), naive (linear domain)."""
    J = 0.0
    for i in range(X.shape[0]):
        s = np.exp(-0.5 * _wdist(X[i], centers, Mw_active))
        J += s[labels[i]] / s.sum()
    return J


# ---------------------------------------------------------------------------------------------
# weighted k-modes (§3.5), literal
# ---------------------------------------------------------------------------------------------
def _score(row, mode, wrow):
    s = 0.0
    for l in range(len(row)):
        s += wrow[l] * (1.0 if row[l] == mode[l] else 0.0)
    return s


def reference_assign(Z, modes, u):
    n = Z.shape[0]
    out = np.zeros(n, dtype=np.int64)
    for i in range(n):
        scores = [_score(Z[i], modes[j], u[j]) for j in range(modes.shape[0])]
        best = scores[0]
        bj = 0
        for j in range(1, len(scores)):
            if scores[j] > best:
                best, bj = scores[j], j
        out[i] = bj
    return out


def reference_modes(Z, labels, k):
    L = Z.shape[1]
    modes = np.full((k, L), -1, dtype=np.int64)
    for j in range(k):
        members = np.flatnonzero(labels == j)
        if members.size == 0:
            continue
        for l in range(L):
            modes[j, l] = statistics.mode([int(v) for v in Z[members, l]])
    return modes


def reference_level_weights(Z, labels, k):
    n, L = Z.shape
    u = np.zeros((k, L))
    for j in range(k):
        inside = labels == j
        m = int(inside.sum())
        if m == 0 or m == n:
            continue
        ab = np.zeros(L)
        for l in range(L):
            vmax = int(Z[:, l].max())
            s2 = 0.0
            beta = 0.0
            for v in range(vmax + 1):
                pin = np.count_nonzero(Z[inside, l] == v) / m
                pout = np.count_nonzero(Z[~inside, l] == v) / (n - m)
                s2 += (pin - pout) ** 2
                beta += pin ** 2
            ab[l] = math.sqrt(0.5 * s2) * beta
        den = 0.0
        for l in range(L):
            den += ab[l]
        u[j] = ab / (den + 1e-10)
    return u


def reference_weighted_kmodes(Z, k, seed_rows, max_iter=31):
    Z = np.asarray(Z, dtype=np.int64)
    U = np.unique(Z, axis=0)
    modes = U[np.asarray(seed_rows)].copy()
    u = np.full((k, Z.shape[1]), 1.0 / Z.shape[1])
    labels = reference_assign(Z, modes, u)
    for _ in range(max_iter):
        prev = labels
        modes = reference_modes(Z, prev, k)
        u = reference_level_weights(Z, prev, k)
        labels = reference_assign(Z, modes, u)
        if np.array_equal(labels, prev):
            break
    return labels
