"""Numba kernels of the competitive penalized learning (CPL) engine of Fed-HIRE and GOLD.

Numeric work only. Every kernel takes validated, C-contiguous arrays of the exact dtype
(float64 data, int64 indices and counts, uint8 flags) plus preallocated buffers, never
validates, never allocates inside its hot loops, never touches an RNG, and releases the GIL
(``nogil=True``) so independent clients can run in threads. The orchestration (pass loop,
convergence, seeds, output) lives in :mod:`fastfc._cpl`.

Specs: ``shared/specs/fed_hire.md`` §3.1 (CPL), §3.5 (weighted k-modes), §4.3 (kernels) and
``shared/specs/gold.md`` §3.1 / §3.4.

Conventions shared by the CPL kernels (``k`` candidate slots, ``n`` samples, ``d`` features):

* ``S`` (k, d) running sums, ``C`` (k, d) running centroids ``S_j / cnt_j`` (valid where
  ``cnt_j > 0``), ``cnt`` (k,) int64 member counts.
* ``Mw`` (k, d) feature weights (``m_jz`` of the spec), ``theta`` (k,) raw cluster weights,
  ``logw`` (k,) ``log sigmoid(10 theta - 5)`` cached, ``wins`` (k,) float64 win counters.
* ``y`` (n,) int64 labels, ``-1`` = not yet assigned.
* ``live`` (k,) uint8: the candidate is scored. Robust semantics: not dead. Reference
  semantics: ``cnt > 0`` and a finite feature-weight row and a finite ``theta``.
* ``live_idx`` (k,) int64: compact list of candidate ids, increasing; its first ``n_live``
  entries are scanned. Candidates that die during a pass stay in the list (skipped through
  ``live``) until :func:`cpl_compact_live` rebuilds it between passes. ``inlist`` (k,) uint8
  marks the ids held in the list.
* ``wnan`` (k,) uint8, reference semantics only: the feature-weight row is NaN (§3.1.6).
"""
from __future__ import annotations

import math

import numba
import numba.core.cgutils
import numba.extending
import numpy as np

from fastfc._config import NUMBA_CACHE
from fastfc._kernels._fastexp import exp_nonpos

__all__ = [
    "log_sigmoid_weight",
    "cpl_init_logw",
    "cpl_pass",
    "cpl_compact_live",
    "cpl_feature_weights",
    "cpl_objective",
    "kmodes_stats",
    "kmodes_modes",
    "kmodes_weights",
    "kmodes_assign",
    "col_moments",
    "shift_scale_rows",
    "shift_weight_rows",
    "col_sums_rows",
    "col_sqdev_rows",
]


#: options of the small kernels a pass calls once per row (or per moved candidate): compiled
#: without Numba's reference counting (``_nrt=False``: they allocate nothing, and their callers
#: hold the arrays). With it, every such call increments and decrements the count of each array
#: argument, atomically: about 80 ns a call, as much as the distances to 30 candidates at
#: d = 10 (measured: the row-distance call 138 -> 66 ns at 24 candidates, 93 -> 15 ns at 0).
_NO_REFCOUNT = dict(cache=NUMBA_CACHE, nogil=True, error_model="numpy", _nrt=False)


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------
@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def log_sigmoid_weight(theta):
    """``log w`` with ``w = 1 / (1 + exp(-10 theta + 5))``, i.e. ``-softplus(5 - 10 theta)``.

    Stable for any finite ``theta``; NaN in, NaN out.
    """
    t = 5.0 - 10.0 * theta
    if t > 0.0:
        return -(t + math.log1p(math.exp(-t)))
    return -math.log1p(math.exp(t))


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def cpl_init_logw(theta, logw):
    """Fill ``logw`` (k,) OUT from ``theta`` (k,) IN with :func:`log_sigmoid_weight`."""
    for j in range(theta.shape[0]):
        logw[j] = log_sigmoid_weight(theta[j])


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _pw_leaf(X, i, C, Mw, j, s, n):
    """NumPy's pairwise-sum leaf (n <= 128) over the terms ``Mw[j, z] * (X[i, z] - C[j, z])**2``,
    ``z = s .. s+n-1``.

    The terms are written out rather than called through a helper: every call that Numba
    inlines at IR level repeats its type inference, and the 19 term sites of a leaf cost
    seconds of first-use compilation (``benchmarks/results/cold_start.md``).
    """
    if n < 8:
        res = 0.0
        for z in range(s, s + n):
            e = X[i, z] - C[j, z]
            res += Mw[j, z] * (e * e)
        return res
    e0 = X[i, s] - C[j, s]
    e1 = X[i, s + 1] - C[j, s + 1]
    e2 = X[i, s + 2] - C[j, s + 2]
    e3 = X[i, s + 3] - C[j, s + 3]
    e4 = X[i, s + 4] - C[j, s + 4]
    e5 = X[i, s + 5] - C[j, s + 5]
    e6 = X[i, s + 6] - C[j, s + 6]
    e7 = X[i, s + 7] - C[j, s + 7]
    r0 = Mw[j, s] * (e0 * e0)
    r1 = Mw[j, s + 1] * (e1 * e1)
    r2 = Mw[j, s + 2] * (e2 * e2)
    r3 = Mw[j, s + 3] * (e3 * e3)
    r4 = Mw[j, s + 4] * (e4 * e4)
    r5 = Mw[j, s + 5] * (e5 * e5)
    r6 = Mw[j, s + 6] * (e6 * e6)
    r7 = Mw[j, s + 7] * (e7 * e7)
    m = n - n % 8
    for t in range(8, m, 8):
        z = s + t
        e0 = X[i, z] - C[j, z]
        e1 = X[i, z + 1] - C[j, z + 1]
        e2 = X[i, z + 2] - C[j, z + 2]
        e3 = X[i, z + 3] - C[j, z + 3]
        e4 = X[i, z + 4] - C[j, z + 4]
        e5 = X[i, z + 5] - C[j, z + 5]
        e6 = X[i, z + 6] - C[j, z + 6]
        e7 = X[i, z + 7] - C[j, z + 7]
        r0 += Mw[j, z] * (e0 * e0)
        r1 += Mw[j, z + 1] * (e1 * e1)
        r2 += Mw[j, z + 2] * (e2 * e2)
        r3 += Mw[j, z + 3] * (e3 * e3)
        r4 += Mw[j, z + 4] * (e4 * e4)
        r5 += Mw[j, z + 5] * (e5 * e5)
        r6 += Mw[j, z + 6] * (e6 * e6)
        r7 += Mw[j, z + 7] * (e7 * e7)
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for z in range(s + m, s + n):
        e = X[i, z] - C[j, z]
        res += Mw[j, z] * (e * e)
    return res


# NumPy's pairwise summation halves blocks longer than 128 terms recursively. Numba cannot load
# a cached recursive function safely, so the recursion is unrolled into explicit levels: level m
# handles up to about 128 * 2**m terms exactly; the last level (d above ~2**19) sums its halves
# with leaves only, which is still deterministic but no longer NumPy's order. The twelve levels
# take most of a minute to compile, so no kernel of the CPL engine calls them (they use
# :func:`_sq_dist_any`); :func:`_sq_dist` stays as the buffer-free reference the tests compare
# :func:`_sq_dist_buf` with.
@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _pw_rec1(X, i, C, Mw, j, s, n):
    if n <= 128:
        return _pw_leaf(X, i, C, Mw, j, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_leaf(X, i, C, Mw, j, s, n2) + _pw_leaf(X, i, C, Mw, j, s + n2, n - n2)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _pw_rec2(X, i, C, Mw, j, s, n):
    if n <= 128:
        return _pw_leaf(X, i, C, Mw, j, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_rec1(X, i, C, Mw, j, s, n2) + _pw_rec1(X, i, C, Mw, j, s + n2, n - n2)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _pw_rec3(X, i, C, Mw, j, s, n):
    if n <= 128:
        return _pw_leaf(X, i, C, Mw, j, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_rec2(X, i, C, Mw, j, s, n2) + _pw_rec2(X, i, C, Mw, j, s + n2, n - n2)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _pw_rec4(X, i, C, Mw, j, s, n):
    if n <= 128:
        return _pw_leaf(X, i, C, Mw, j, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_rec3(X, i, C, Mw, j, s, n2) + _pw_rec3(X, i, C, Mw, j, s + n2, n - n2)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _pw_rec5(X, i, C, Mw, j, s, n):
    if n <= 128:
        return _pw_leaf(X, i, C, Mw, j, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_rec4(X, i, C, Mw, j, s, n2) + _pw_rec4(X, i, C, Mw, j, s + n2, n - n2)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _pw_rec6(X, i, C, Mw, j, s, n):
    if n <= 128:
        return _pw_leaf(X, i, C, Mw, j, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_rec5(X, i, C, Mw, j, s, n2) + _pw_rec5(X, i, C, Mw, j, s + n2, n - n2)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _pw_rec7(X, i, C, Mw, j, s, n):
    if n <= 128:
        return _pw_leaf(X, i, C, Mw, j, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_rec6(X, i, C, Mw, j, s, n2) + _pw_rec6(X, i, C, Mw, j, s + n2, n - n2)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _pw_rec8(X, i, C, Mw, j, s, n):
    if n <= 128:
        return _pw_leaf(X, i, C, Mw, j, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_rec7(X, i, C, Mw, j, s, n2) + _pw_rec7(X, i, C, Mw, j, s + n2, n - n2)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _pw_rec9(X, i, C, Mw, j, s, n):
    if n <= 128:
        return _pw_leaf(X, i, C, Mw, j, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_rec8(X, i, C, Mw, j, s, n2) + _pw_rec8(X, i, C, Mw, j, s + n2, n - n2)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _pw_rec10(X, i, C, Mw, j, s, n):
    if n <= 128:
        return _pw_leaf(X, i, C, Mw, j, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_rec9(X, i, C, Mw, j, s, n2) + _pw_rec9(X, i, C, Mw, j, s + n2, n - n2)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _pw_rec11(X, i, C, Mw, j, s, n):
    if n <= 128:
        return _pw_leaf(X, i, C, Mw, j, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_rec10(X, i, C, Mw, j, s, n2) + _pw_rec10(X, i, C, Mw, j, s + n2, n - n2)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _pw_rec12(X, i, C, Mw, j, s, n):
    if n <= 128:
        return _pw_leaf(X, i, C, Mw, j, s, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pw_rec11(X, i, C, Mw, j, s, n2) + _pw_rec11(X, i, C, Mw, j, s + n2, n - n2)


_pw_rec = _pw_rec12


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _sq_dist(X, i, C, Mw, j):
    """``D_j = sum_z Mw[j, z] (X[i, z] - C[j, z])^2``.

    Summed exactly as ``np.sum(Mw * (x - C) ** 2, axis=1)`` does (``0.0 +`` NumPy's pairwise
    summation: plain loop below 8 terms, 8 accumulators up to 128, recursive halving above),
    so the value is bit-identical to a NumPy implementation for every ``d``; the 8
    independent accumulators also give instruction-level parallelism.
    """
    d = X.shape[1]
    if d <= 128:
        return _pw_leaf(X, i, C, Mw, j, 0, d)
    return _pw_rec(X, i, C, Mw, j, 0, d)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _pw_sum(a, s, n):
    """NumPy's pairwise-sum leaf over ``a[s:s+n]`` (n <= 128): the order of ``np.sum``."""
    if n < 8:
        res = 0.0
        for z in range(s, s + n):
            res += a[z]
        return res
    r0 = a[s]
    r1 = a[s + 1]
    r2 = a[s + 2]
    r3 = a[s + 3]
    r4 = a[s + 4]
    r5 = a[s + 5]
    r6 = a[s + 6]
    r7 = a[s + 7]
    m = n - n % 8
    for t in range(s + 8, s + m, 8):
        r0 += a[t]
        r1 += a[t + 1]
        r2 += a[t + 2]
        r3 += a[t + 3]
        r4 += a[t + 4]
        r5 += a[t + 5]
        r6 += a[t + 6]
        r7 += a[t + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for z in range(s + m, s + n):
        res += a[z]
    return res


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _pw_sum_any(a, n, stk, stv):
    """NumPy's pairwise sum of ``a[0:n]`` for any ``n``, without recursion or calls.

    Blocks longer than 128 are halved (``n2 = n // 2``, rounded down to a multiple of 8) as
    NumPy does; the tree is walked with the explicit stacks ``stk`` (3, depth) int64
    (start, length, state) and ``stv`` (depth,) float64, depth 64.
    """
    if n <= 128:
        return _pw_sum(a, 0, n)
    top = 0
    stk[0, 0] = 0
    stk[1, 0] = n
    stk[2, 0] = 0
    result = 0.0
    while top >= 0:
        s = stk[0, top]
        m = stk[1, top]
        if m > 128:
            h = m // 2
            h -= h % 8
            stk[2, top] = 1  # waiting for its left half
            top += 1
            stk[0, top] = s
            stk[1, top] = h
            stk[2, top] = 0
            continue
        v = _pw_sum(a, s, m)
        top -= 1
        while top >= 0:
            if stk[2, top] == 1:  # left half done: keep it, descend into the right half
                stv[top] = v
                stk[2, top] = 2
                h = stk[1, top] // 2
                h -= h % 8
                top += 1
                stk[0, top] = stk[0, top - 1] + h
                stk[1, top] = stk[1, top - 1] - h
                stk[2, top] = 0
                break
            v = stv[top] + v  # both halves done
            top -= 1
        if top < 0:
            result = v
    return result


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _sq_dist_buf(X, i, C, Mw, j, tmp, stk, stv):
    """:func:`_sq_dist` through a scratch row ``tmp`` (d,): bit-identical, about 4x faster.

    The terms are written to ``tmp`` in one vectorisable loop and summed in NumPy's order
    with no function call: inside the large CPL pass a call in the candidate loop (as the
    recursive pairwise sum of :func:`_sq_dist` needs for d > 128) costs about 4x (measured
    50 ns against 12 ns per candidate at d = 10).
    """
    d = X.shape[1]
    for z in range(d):
        diff = X[i, z] - C[j, z]
        tmp[z] = Mw[j, z] * (diff * diff)
    return _pw_sum_any(tmp, d, stk, stv)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _sq_dist_any(X, i, C, Mw, j, tmp, stk, stv):
    """:func:`_sq_dist` for any ``d``, bit-identical: the leaf in registers for ``d <= 128``,
    :func:`_sq_dist_buf` through the scratch ``tmp`` (d,), ``stk`` (3, 64) int64 and ``stv``
    (64,) above (no recursive call chain to compile). A called function, not inlined: its
    callers (the rare reference-semantics decision, the once-per-run objective) are not hot,
    and each IR-level inline site would repeat its compilation."""
    if X.shape[1] <= 128:
        return _pw_leaf(X, i, C, Mw, j, 0, X.shape[1])
    return _sq_dist_buf(X, i, C, Mw, j, tmp, stk, stv)


@numba.njit(**_NO_REFCOUNT)
def _live_dists(X, i, C, Mw, live_idx, n_live, out, tmp, stk, stv):
    """``out[t] = D`` of row ``i`` to candidate ``live_idx[t]``, for ``t < n_live``, any d.

    Used for d > 128 (below, :func:`_live_dists_t` is faster). One call per sample, so the
    candidate loop is a small function with no call inside it (see :func:`_sq_dist_buf`).
    """
    for t in range(n_live):
        out[t] = _sq_dist_buf(X, i, C, Mw, live_idx[t], tmp, stk, stv)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _build_live_t(C, Mw, live_idx, n_live, CT, MwT, tpos):
    """Transposed copies ``CT``, ``MwT`` (d, k) of the listed candidates' rows; ``tpos[j]``
    is candidate ``j``'s column (``-1`` when not listed)."""
    k, d = C.shape
    for j in range(k):
        tpos[j] = -1
    for t in range(n_live):
        j = live_idx[t]
        tpos[j] = t
        for z in range(d):
            CT[z, t] = C[j, z]
            MwT[z, t] = Mw[j, z]


@numba.njit(**_NO_REFCOUNT)
def _live_dists_t(X, i, CT, MwT, n_live, acc, out):
    """``out[t] = D`` of row ``i`` to listed candidate ``t``, from the transposed copies.

    Loops run over candidates innermost (SIMD across candidates) and every candidate's sum
    keeps NumPy's pairwise order for d <= 128: a plain running sum below 8 features,
    otherwise 8 interleaved accumulators (``acc``, (8, k)) combined as NumPy combines them,
    then the tail. Bit-identical to :func:`_sq_dist`.
    """
    d = X.shape[1]
    if d < 8:
        for t in range(n_live):
            out[t] = 0.0
        for z in range(d):
            xz = X[i, z]
            for t in range(n_live):
                diff = xz - CT[z, t]
                out[t] += MwT[z, t] * (diff * diff)
        return
    m = d - d % 8
    tl = d - m
    if m <= 16:
        # 8 <= d < 24: the eight accumulators stay in registers (no round trip through acc).
        # A tail of 1 to 3 features is summed in the same loop (one pass over the candidates,
        # measured 2.3x faster at d = 10 and 24 candidates than a loop per tail feature): 3
        # tail terms always, the ones past d multiplied by 0.0 (their row clamped to d - 1).
        # Every term is finite and >= 0, so adding such a +0.0 leaves the sum's bits unchanged.
        x0 = X[i, 0]
        x1 = X[i, 1]
        x2 = X[i, 2]
        x3 = X[i, 3]
        x4 = X[i, 4]
        x5 = X[i, 5]
        x6 = X[i, 6]
        x7 = X[i, 7]
        if m == 8:
            y0 = x0
            y1 = x1
            y2 = x2
            y3 = x3
            y4 = x4
            y5 = x5
            y6 = x6
            y7 = x7
        else:
            y0 = X[i, 8]
            y1 = X[i, 9]
            y2 = X[i, 10]
            y3 = X[i, 11]
            y4 = X[i, 12]
            y5 = X[i, 13]
            y6 = X[i, 14]
            y7 = X[i, 15]
        if 1 <= tl <= 3:
            z1 = m
            z2 = min(m + 1, d - 1)
            z3 = min(m + 2, d - 1)
            u1 = X[i, z1]
            u2 = X[i, z2]
            u3 = X[i, z3]
            f2 = 1.0 if tl >= 2 else 0.0
            f3 = 1.0 if tl >= 3 else 0.0
            if m == 8:
                for t in range(n_live):
                    a0 = x0 - CT[0, t]
                    a1 = x1 - CT[1, t]
                    a2 = x2 - CT[2, t]
                    a3 = x3 - CT[3, t]
                    a4 = x4 - CT[4, t]
                    a5 = x5 - CT[5, t]
                    a6 = x6 - CT[6, t]
                    a7 = x7 - CT[7, t]
                    s = (((MwT[0, t] * (a0 * a0)) + (MwT[1, t] * (a1 * a1)))
                         + ((MwT[2, t] * (a2 * a2)) + (MwT[3, t] * (a3 * a3)))) + (
                         ((MwT[4, t] * (a4 * a4)) + (MwT[5, t] * (a5 * a5)))
                         + ((MwT[6, t] * (a6 * a6)) + (MwT[7, t] * (a7 * a7))))
                    c1 = u1 - CT[z1, t]
                    s += MwT[z1, t] * (c1 * c1)
                    c2 = u2 - CT[z2, t]
                    s += f2 * (MwT[z2, t] * (c2 * c2))
                    c3 = u3 - CT[z3, t]
                    s += f3 * (MwT[z3, t] * (c3 * c3))
                    out[t] = s
            else:
                for t in range(n_live):
                    a0 = x0 - CT[0, t]
                    a1 = x1 - CT[1, t]
                    a2 = x2 - CT[2, t]
                    a3 = x3 - CT[3, t]
                    a4 = x4 - CT[4, t]
                    a5 = x5 - CT[5, t]
                    a6 = x6 - CT[6, t]
                    a7 = x7 - CT[7, t]
                    b0 = y0 - CT[8, t]
                    b1 = y1 - CT[9, t]
                    b2 = y2 - CT[10, t]
                    b3 = y3 - CT[11, t]
                    b4 = y4 - CT[12, t]
                    b5 = y5 - CT[13, t]
                    b6 = y6 - CT[14, t]
                    b7 = y7 - CT[15, t]
                    s0 = MwT[0, t] * (a0 * a0) + MwT[8, t] * (b0 * b0)
                    s1 = MwT[1, t] * (a1 * a1) + MwT[9, t] * (b1 * b1)
                    s2 = MwT[2, t] * (a2 * a2) + MwT[10, t] * (b2 * b2)
                    s3 = MwT[3, t] * (a3 * a3) + MwT[11, t] * (b3 * b3)
                    s4 = MwT[4, t] * (a4 * a4) + MwT[12, t] * (b4 * b4)
                    s5 = MwT[5, t] * (a5 * a5) + MwT[13, t] * (b5 * b5)
                    s6 = MwT[6, t] * (a6 * a6) + MwT[14, t] * (b6 * b6)
                    s7 = MwT[7, t] * (a7 * a7) + MwT[15, t] * (b7 * b7)
                    s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
                    c1 = u1 - CT[z1, t]
                    s += MwT[z1, t] * (c1 * c1)
                    c2 = u2 - CT[z2, t]
                    s += f2 * (MwT[z2, t] * (c2 * c2))
                    c3 = u3 - CT[z3, t]
                    s += f3 * (MwT[z3, t] * (c3 * c3))
                    out[t] = s
            return
        if m == 8:
            for t in range(n_live):
                a0 = x0 - CT[0, t]
                a1 = x1 - CT[1, t]
                a2 = x2 - CT[2, t]
                a3 = x3 - CT[3, t]
                a4 = x4 - CT[4, t]
                a5 = x5 - CT[5, t]
                a6 = x6 - CT[6, t]
                a7 = x7 - CT[7, t]
                out[t] = (((MwT[0, t] * (a0 * a0)) + (MwT[1, t] * (a1 * a1)))
                          + ((MwT[2, t] * (a2 * a2)) + (MwT[3, t] * (a3 * a3)))) + (
                          ((MwT[4, t] * (a4 * a4)) + (MwT[5, t] * (a5 * a5)))
                          + ((MwT[6, t] * (a6 * a6)) + (MwT[7, t] * (a7 * a7))))
        else:
            for t in range(n_live):
                a0 = x0 - CT[0, t]
                a1 = x1 - CT[1, t]
                a2 = x2 - CT[2, t]
                a3 = x3 - CT[3, t]
                a4 = x4 - CT[4, t]
                a5 = x5 - CT[5, t]
                a6 = x6 - CT[6, t]
                a7 = x7 - CT[7, t]
                b0 = y0 - CT[8, t]
                b1 = y1 - CT[9, t]
                b2 = y2 - CT[10, t]
                b3 = y3 - CT[11, t]
                b4 = y4 - CT[12, t]
                b5 = y5 - CT[13, t]
                b6 = y6 - CT[14, t]
                b7 = y7 - CT[15, t]
                s0 = MwT[0, t] * (a0 * a0) + MwT[8, t] * (b0 * b0)
                s1 = MwT[1, t] * (a1 * a1) + MwT[9, t] * (b1 * b1)
                s2 = MwT[2, t] * (a2 * a2) + MwT[10, t] * (b2 * b2)
                s3 = MwT[3, t] * (a3 * a3) + MwT[11, t] * (b3 * b3)
                s4 = MwT[4, t] * (a4 * a4) + MwT[12, t] * (b4 * b4)
                s5 = MwT[5, t] * (a5 * a5) + MwT[13, t] * (b5 * b5)
                s6 = MwT[6, t] * (a6 * a6) + MwT[14, t] * (b6 * b6)
                s7 = MwT[7, t] * (a7 * a7) + MwT[15, t] * (b7 * b7)
                out[t] = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
        for z in range(m, d):
            xz = X[i, z]
            for t in range(n_live):
                diff = xz - CT[z, t]
                out[t] += MwT[z, t] * (diff * diff)
        return
    for b in range(8):
        xz = X[i, b]
        for t in range(n_live):
            diff = xz - CT[b, t]
            acc[b, t] = MwT[b, t] * (diff * diff)
    for z in range(8, m):
        b = z % 8
        xz = X[i, z]
        for t in range(n_live):
            diff = xz - CT[z, t]
            acc[b, t] += MwT[z, t] * (diff * diff)
    for t in range(n_live):
        out[t] = ((acc[0, t] + acc[1, t]) + (acc[2, t] + acc[3, t])) + ((acc[4, t] + acc[5, t]) + (acc[6, t] + acc[7, t]))
    for z in range(m, d):
        xz = X[i, z]
        for t in range(n_live):
            diff = xz - CT[z, t]
            out[t] += MwT[z, t] * (diff * diff)


@numba.njit(**_NO_REFCOUNT)
def _live_partial_t(X, i, CT, MwT, n_live, q, out):
    """``out[t]`` = a sum of the first ``q`` terms ``MwT[z, t] * (X[i, z] - CT[z, t])**2``
    (``z < q``), ``t < n_live``: with terms >= 0, a lower bound of the full distance up to
    rounding (the caller widens it by a relative 1e-12).

    ``q == 4`` (the pass's ``q_part`` for d >= 4): one loop over the candidates with the four
    terms in registers, added in the same order (the same bits); the loop per feature reads and
    writes ``out`` four times (a 10^4 x 10 client's passes: 3.73 -> 3.49 s CPU over 36 fits,
    with the branch-free survivor list of :func:`_cpl_pass_one`)."""
    if q == 4:
        x0 = X[i, 0]
        x1 = X[i, 1]
        x2 = X[i, 2]
        x3 = X[i, 3]
        for t in range(n_live):
            e0 = x0 - CT[0, t]
            e1 = x1 - CT[1, t]
            e2 = x2 - CT[2, t]
            e3 = x3 - CT[3, t]
            out[t] = ((MwT[0, t] * (e0 * e0) + MwT[1, t] * (e1 * e1)) + MwT[2, t] * (e2 * e2)) + MwT[3, t] * (e3 * e3)
        return
    xz = X[i, 0]
    for t in range(n_live):
        e = xz - CT[0, t]
        out[t] = MwT[0, t] * (e * e)
    for z in range(1, q):
        xz = X[i, z]
        for t in range(n_live):
            e = xz - CT[z, t]
            out[t] += MwT[z, t] * (e * e)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _one_dist_t(X, i, CT, MwT, t):
    """``D`` of row ``i`` to listed candidate ``t`` alone, bit-identical to ``out[t]`` of
    :func:`_live_dists_t` (the same operations in the same order, per candidate)."""
    d = X.shape[1]
    if d < 8:
        s = 0.0
        for z in range(d):
            diff = X[i, z] - CT[z, t]
            s += MwT[z, t] * (diff * diff)
        return s
    m = d - d % 8
    a0 = X[i, 0] - CT[0, t]
    a1 = X[i, 1] - CT[1, t]
    a2 = X[i, 2] - CT[2, t]
    a3 = X[i, 3] - CT[3, t]
    a4 = X[i, 4] - CT[4, t]
    a5 = X[i, 5] - CT[5, t]
    a6 = X[i, 6] - CT[6, t]
    a7 = X[i, 7] - CT[7, t]
    if m == 8:
        s = (((MwT[0, t] * (a0 * a0)) + (MwT[1, t] * (a1 * a1)))
             + ((MwT[2, t] * (a2 * a2)) + (MwT[3, t] * (a3 * a3)))) + (
             ((MwT[4, t] * (a4 * a4)) + (MwT[5, t] * (a5 * a5)))
             + ((MwT[6, t] * (a6 * a6)) + (MwT[7, t] * (a7 * a7))))
    elif m == 16:
        b0 = X[i, 8] - CT[8, t]
        b1 = X[i, 9] - CT[9, t]
        b2 = X[i, 10] - CT[10, t]
        b3 = X[i, 11] - CT[11, t]
        b4 = X[i, 12] - CT[12, t]
        b5 = X[i, 13] - CT[13, t]
        b6 = X[i, 14] - CT[14, t]
        b7 = X[i, 15] - CT[15, t]
        s0 = MwT[0, t] * (a0 * a0) + MwT[8, t] * (b0 * b0)
        s1 = MwT[1, t] * (a1 * a1) + MwT[9, t] * (b1 * b1)
        s2 = MwT[2, t] * (a2 * a2) + MwT[10, t] * (b2 * b2)
        s3 = MwT[3, t] * (a3 * a3) + MwT[11, t] * (b3 * b3)
        s4 = MwT[4, t] * (a4 * a4) + MwT[12, t] * (b4 * b4)
        s5 = MwT[5, t] * (a5 * a5) + MwT[13, t] * (b5 * b5)
        s6 = MwT[6, t] * (a6 * a6) + MwT[14, t] * (b6 * b6)
        s7 = MwT[7, t] * (a7 * a7) + MwT[15, t] * (b7 * b7)
        s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    else:
        s0 = MwT[0, t] * (a0 * a0)
        s1 = MwT[1, t] * (a1 * a1)
        s2 = MwT[2, t] * (a2 * a2)
        s3 = MwT[3, t] * (a3 * a3)
        s4 = MwT[4, t] * (a4 * a4)
        s5 = MwT[5, t] * (a5 * a5)
        s6 = MwT[6, t] * (a6 * a6)
        s7 = MwT[7, t] * (a7 * a7)
        for z in range(8, m, 8):
            a0 = X[i, z] - CT[z, t]
            s0 += MwT[z, t] * (a0 * a0)
            a1 = X[i, z + 1] - CT[z + 1, t]
            s1 += MwT[z + 1, t] * (a1 * a1)
            a2 = X[i, z + 2] - CT[z + 2, t]
            s2 += MwT[z + 2, t] * (a2 * a2)
            a3 = X[i, z + 3] - CT[z + 3, t]
            s3 += MwT[z + 3, t] * (a3 * a3)
            a4 = X[i, z + 4] - CT[z + 4, t]
            s4 += MwT[z + 4, t] * (a4 * a4)
            a5 = X[i, z + 5] - CT[z + 5, t]
            s5 += MwT[z + 5, t] * (a5 * a5)
            a6 = X[i, z + 6] - CT[z + 6, t]
            s6 += MwT[z + 6, t] * (a6 * a6)
            a7 = X[i, z + 7] - CT[z + 7, t]
            s7 += MwT[z + 7, t] * (a7 * a7)
        s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    for z in range(m, d):
        diff = X[i, z] - CT[z, t]
        s += MwT[z, t] * (diff * diff)
    return s


#: :func:`_one_dist_tc`: :func:`_one_dist_t` as a called function (no reference counting), for
#: the hinted row's two distances. Each IR-level inline site of the unrolled sum is compiled
#: again; inlined only at the pass's per-candidate site, the pass keeps its speed (measured: a
#: 10^4 x 10 client's passes 0.30 s with no site inlined, 0.275 s with one or both) and its
#: cold compile stays smaller
@numba.njit(**_NO_REFCOUNT)
def _one_dist_tc(X, i, CT, MwT, t):
    """:func:`_one_dist_t` (inlined here once), called."""
    return _one_dist_t(X, i, CT, MwT, t)


@numba.njit(**_NO_REFCOUNT)
def _one_dist_r(X, i, C, Mw, j):
    """:func:`_one_dist_t` from the row-major ``C``, ``Mw`` (candidate ``j``'s rows, read
    contiguously): the same operations in the same order, so the same bits."""
    d = X.shape[1]
    if d < 8:
        s = 0.0
        for z in range(d):
            diff = X[i, z] - C[j, z]
            s += Mw[j, z] * (diff * diff)
        return s
    m = d - d % 8
    a0 = X[i, 0] - C[j, 0]
    a1 = X[i, 1] - C[j, 1]
    a2 = X[i, 2] - C[j, 2]
    a3 = X[i, 3] - C[j, 3]
    a4 = X[i, 4] - C[j, 4]
    a5 = X[i, 5] - C[j, 5]
    a6 = X[i, 6] - C[j, 6]
    a7 = X[i, 7] - C[j, 7]
    if m == 8:
        s = (((Mw[j, 0] * (a0 * a0)) + (Mw[j, 1] * (a1 * a1)))
             + ((Mw[j, 2] * (a2 * a2)) + (Mw[j, 3] * (a3 * a3)))) + (
             ((Mw[j, 4] * (a4 * a4)) + (Mw[j, 5] * (a5 * a5)))
             + ((Mw[j, 6] * (a6 * a6)) + (Mw[j, 7] * (a7 * a7))))
    elif m == 16:
        b0 = X[i, 8] - C[j, 8]
        b1 = X[i, 9] - C[j, 9]
        b2 = X[i, 10] - C[j, 10]
        b3 = X[i, 11] - C[j, 11]
        b4 = X[i, 12] - C[j, 12]
        b5 = X[i, 13] - C[j, 13]
        b6 = X[i, 14] - C[j, 14]
        b7 = X[i, 15] - C[j, 15]
        s0 = Mw[j, 0] * (a0 * a0) + Mw[j, 8] * (b0 * b0)
        s1 = Mw[j, 1] * (a1 * a1) + Mw[j, 9] * (b1 * b1)
        s2 = Mw[j, 2] * (a2 * a2) + Mw[j, 10] * (b2 * b2)
        s3 = Mw[j, 3] * (a3 * a3) + Mw[j, 11] * (b3 * b3)
        s4 = Mw[j, 4] * (a4 * a4) + Mw[j, 12] * (b4 * b4)
        s5 = Mw[j, 5] * (a5 * a5) + Mw[j, 13] * (b5 * b5)
        s6 = Mw[j, 6] * (a6 * a6) + Mw[j, 14] * (b6 * b6)
        s7 = Mw[j, 7] * (a7 * a7) + Mw[j, 15] * (b7 * b7)
        s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    else:
        s0 = Mw[j, 0] * (a0 * a0)
        s1 = Mw[j, 1] * (a1 * a1)
        s2 = Mw[j, 2] * (a2 * a2)
        s3 = Mw[j, 3] * (a3 * a3)
        s4 = Mw[j, 4] * (a4 * a4)
        s5 = Mw[j, 5] * (a5 * a5)
        s6 = Mw[j, 6] * (a6 * a6)
        s7 = Mw[j, 7] * (a7 * a7)
        for z in range(8, m, 8):
            a0 = X[i, z] - C[j, z]
            s0 += Mw[j, z] * (a0 * a0)
            a1 = X[i, z + 1] - C[j, z + 1]
            s1 += Mw[j, z + 1] * (a1 * a1)
            a2 = X[i, z + 2] - C[j, z + 2]
            s2 += Mw[j, z + 2] * (a2 * a2)
            a3 = X[i, z + 3] - C[j, z + 3]
            s3 += Mw[j, z + 3] * (a3 * a3)
            a4 = X[i, z + 4] - C[j, z + 4]
            s4 += Mw[j, z + 4] * (a4 * a4)
            a5 = X[i, z + 5] - C[j, z + 5]
            s5 += Mw[j, z + 5] * (a5 * a5)
            a6 = X[i, z + 6] - C[j, z + 6]
            s6 += Mw[j, z + 6] * (a6 * a6)
            a7 = X[i, z + 7] - C[j, z + 7]
            s7 += Mw[j, z + 7] * (a7 * a7)
        s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    for z in range(m, d):
        diff = X[i, z] - C[j, z]
        s += Mw[j, z] * (diff * diff)
    return s




@numba.njit(parallel=True, cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _block_dists_t(X, i0, nb, CT, MwT, n_live, acc, out):
    """``out[r, :n_live]`` = :func:`_live_dists_t` of row ``i0 + r`` for ``r < nb``, on Numba's threads.

    ``acc`` (P, 8, k): one scratch per part; the ``nb`` rows are cut into ``P`` contiguous
    parts run in parallel (``prange``). Every row's distances are computed by the same code
    from the same inputs whatever ``P`` and the thread count, so they are bit-identical to
    the sequential ones.
    """
    P = acc.shape[0]
    for p in numba.prange(P):
        lo = p * nb // P
        hi = (p + 1) * nb // P
        for r in range(lo, hi):
            _live_dists_t(X, i0 + r, CT, MwT, n_live, acc[p], out[r])


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _nan_last_before(a, b):
    """True when score ``a`` sorts strictly before ``b`` in ``argsort(-s)`` (NaN last)."""
    return a == a and (b != b or a > b)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _reference_decision(X, i, C, cnt, Mw, theta, wins, W, wnan, tmp, stk, stv):
    """Winner, rival and penalty ratio of sample ``i``, computed literally as the reference does.

    Used by :func:`cpl_pass` in reference semantics only, for the rare samples where the
    log-domain fast path is not exact: no live candidate with a finite ``theta``, or the
    winner's linear-domain similarity ``exp(-D/2)`` underflows to 0. Linear domain:
    ``s_j = exp(-D_j / 2)`` (0 for empty candidates and NaN weight rows), normalised by
    ``sum_t s_t``; ``shat_j = (1 - wins_j / W) * w_j * s_j / sum`` (NaN when ``theta_j`` is NaN).
    Order = ``argsort(-shat)`` with NaN last and ties to the lowest index. If every ``s_j``
    is 0 the normalised vector is all NaN: ``v = 0``, ``r = 1`` and the ratio is NaN (the
    all-zero fallback of fed_hire.md §3.1.6). ``tmp``, ``stk``, ``stv``: the scratch of
    :func:`_sq_dist_any`.
    """
    k = cnt.shape[0]
    tot = 0.0
    for j in range(k):
        if cnt[j] > 0 and wnan[j] == 0:
            tot += math.exp(-0.5 * _sq_dist_any(X, i, C, Mw, j, tmp, stk, stv))
    if not tot > 0.0:
        return 0, 1, np.nan
    bv = -1
    br = -1
    hv = np.nan
    hr = np.nan
    for j in range(k):
        s = 0.0
        if cnt[j] > 0 and wnan[j] == 0:
            s = math.exp(-0.5 * _sq_dist_any(X, i, C, Mw, j, tmp, stk, stv))
        w = 1.0 / (1.0 + math.exp(-10.0 * theta[j] + 5.0))
        sh = ((1.0 - wins[j] / W) * w) * (s / tot)
        if bv < 0:
            bv = j
            hv = sh
        elif _nan_last_before(sh, hv):
            br = bv
            hr = hv
            bv = j
            hv = sh
        elif br < 0 or _nan_last_before(sh, hr):
            br = j
            hr = sh
    return bv, br, hr / hv


# --------------------------------------------------------------------------------------------
# CPL: one pass over the samples
# --------------------------------------------------------------------------------------------
#: samples between two refreshes of the score bounds of every listed candidate in
#: :func:`cpl_pass` (the bounds stay valid for that many increments of ``W``)
_BOUND_BLOCK = 64


#: parallel CPL passes: the fewest rows of a block of distances computed ahead, and the most
#: distances held ahead (rows x candidates, 8 MB)
_BLOCK_MIN = 64
_BLOCK_BUDGET = 1 << 20
#: a pass runs in parallel only when its listed candidates times features reach this and it
#: has at least _PAR_MIN_ROWS rows (below, the sequential per-row work dominates and the
#: parallel regions cost more than they save; 256: the converged last passes of a 10^5 x 50
#: client with 10 clusters, 0.038 -> 0.029 s main-thread CPU)
_PAR_MIN_WORK = 256
_PAR_MIN_ROWS = 1024
#: the sequential pass uses each row's hint (its label and last rival, see :func:`_cpl_pass_one`)
#: when at least this many candidates are listed (below, all distances cost about as much)
_HINT_MIN_LIVE = 8
#: ... and fewer than this many features (a 10^4 x 50 client's passes: 0.135 s without the
#: hints, 0.14-0.15 s with partial sums over 8, 16 or 24 features; 10^4 x 10: 0.120 -> 0.115 s)
_HINT_MAX_D = 16


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _moved_by(CT, CT0, MwT, t):
    """Weighted length ``sqrt(sum_z MwT[z, t] (CT[z, t] - CT0[z, t])^2)`` of column ``t``'s move."""
    s = 0.0
    for z in range(CT.shape[0]):
        e = CT[z, t] - CT0[z, t]
        s += MwT[z, t] * (e * e)
    return math.sqrt(s)


@numba.njit(**_NO_REFCOUNT)
def _moved_by_r(C, C0, Mw, j, t):
    """Weighted length ``sqrt(sum_z Mw[j, z] (C[j, z] - C0[t, z])^2)`` of candidate ``j``'s move
    from its block-start centroid ``C0[t]``."""
    s = 0.0
    for z in range(C.shape[1]):
        e = C[j, z] - C0[t, z]
        s += Mw[j, z] * (e * e)
    return math.sqrt(s)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _build_tpos(k, live_idx, n_live, tpos):
    """``tpos[j]`` = position of candidate ``j`` in ``live_idx`` (``-1`` when not listed)."""
    for j in range(k):
        tpos[j] = -1
    for t in range(n_live):
        tpos[live_idx[t]] = t


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _set_bounds(j, t, logw, wins, live, W, Wend, BL, BU):
    """Bounds at list position ``t`` of candidate ``j`` (see :func:`_refresh_bounds`)."""
    if live[j] != 0:
        wj = wins[j]
        BL[t] = logw[j] - wj / (W - wj)
        BU[t] = logw[j] - wj / Wend
    else:
        BL[t] = -np.inf
        BU[t] = -np.inf


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _refresh_bounds(logw, wins, live, live_idx, n_live, W, Wend, BL, BU):
    """Bounds of the score offsets ``log(1 - wins_j / W') + log w_j`` for ``W <= W' <= Wend``.

    ``log(1 - x)`` lies in ``[-x / (1 - x), -x]`` and both ends increase with ``W'``, so
    ``BL[t] = log w_j - wins_j / (W - wins_j)`` is a lower and ``BU[t] = log w_j - wins_j /
    Wend`` an upper bound while ``wins_j`` and ``log w_j`` do not change; ``-inf`` for a
    listed candidate that is dead.
    """
    for t in range(n_live):
        _set_bounds(live_idx[t], t, logw, wins, live, W, Wend, BL, BU)


# --------------------------------------------------------------------------------------------
# CPL: the parallel pass of robust semantics (block lists of the best bounds)
# --------------------------------------------------------------------------------------------
#: per row, the parallel block keeps the list positions of the largest score lower bounds
#: (_TOP_LO) and upper bounds (_TOP_HI) against the block's start; the sequential walk reads
#: them instead of scanning every candidate (and scans every candidate when they do not
#: suffice)
_TOP_LO = 4
_TOP_HI = 8
#: most rows of a block of the list pass, and the sequential work of a block (in units of one
#: feature of one distance) against which the cost of a parallel region is balanced
_LIST_BLOCK_MAX = 8192
_LIST_BLOCK_MIN = 16
_LIST_REGION_COST = 1 << 15
#: the list pass runs when its listed candidates times features reach this
_LIST_MIN_WORK = 400


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _top_insert(vals, pos, v, t):
    """Insert value ``v`` at position ``t`` into the descending list ``vals``/``pos`` (its
    length is kept; the smallest entry drops out). Only called when ``v > vals[-1]``."""
    e = vals.shape[0] - 1
    while e > 0 and v > vals[e - 1]:
        vals[e] = vals[e - 1]
        pos[e] = pos[e - 1]
        e -= 1
    vals[e] = v
    pos[e] = t


@numba.njit(parallel=True, cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _block_lists_t(X, i0, nb, CT, MwT, n_live, BLb, BUb, acc, DB, LOv, LOt, HIv, HIt):
    """For rows ``i0 + r``, ``r < nb``, on Numba's threads: ``DB[r, :n_live]`` =
    :func:`_live_dists_t` (bit-identical to the sequential distances), and the lists of the
    ``_TOP_LO`` largest lower bounds ``BLb[t] - DB[r, t] / 2`` (``LOv``, positions ``LOt``)
    and of the ``_TOP_HI`` largest upper bounds ``BUb[t] - DB[r, t] / 2`` (``HIv``, ``HIt``),
    descending; unused entries hold ``-inf`` and position ``-1``. ``acc`` (P, 8, k): one
    scratch per part; rows are cut into ``P`` contiguous parts. The lists only bound the
    scores: their order among equal values does not matter."""
    P = acc.shape[0]
    KL = LOv.shape[1]
    KH = HIv.shape[1]
    for p in numba.prange(P):
        lo = p * nb // P
        hi = (p + 1) * nb // P
        for r in range(lo, hi):
            row = DB[r]
            _live_dists_t(X, i0 + r, CT, MwT, n_live, acc[p], row)
            lv = LOv[r]
            lt = LOt[r]
            hv = HIv[r]
            ht = HIt[r]
            for e in range(KL):
                lv[e] = -np.inf
                lt[e] = -1
            for e in range(KH):
                hv[e] = -np.inf
                ht[e] = -1
            for t in range(n_live):
                h = 0.5 * row[t]
                a = BLb[t] - h
                if a > lv[KL - 1]:
                    _top_insert(lv, lt, a, t)
                b = BUb[t] - h
                if b > hv[KH - 1]:
                    _top_insert(hv, ht, b, t)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _push2(v, lo1, lo2):
    """The two largest of ``lo1 >= lo2`` and ``v``."""
    if v > lo2:
        if v > lo1:
            return v, lo1
        return lo1, v
    return lo1, lo2


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _below(h, lo2):
    """Upper bound ``h`` is below the second-largest lower bound ``lo2`` by more than rounding
    (relative margins far above it): that candidate is neither the winner nor the rival."""
    return h < lo2 - 1e-9 * (abs(h) + abs(lo2)) - 1e-12


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _cut_below(lo2):
    """A threshold ``c <= lo2`` such that an upper bound ``h < c`` is below ``lo2`` by far more
    than rounding: ``lo2 - 4e-9 |lo2| - 2e-12`` (``-inf`` for ``-inf``). Where ``h`` is near
    ``lo2`` this keeps at least what :func:`_below` keeps; a looser test is still sound, it
    only lets more candidates on to the exact scores."""
    return lo2 - 4e-9 * abs(lo2) - 2e-12


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy", inline="always")
def _top2(sc, j, best, bi, second, si):
    """``(best, bi, second, si)`` after candidate ``j`` with score ``sc`` is offered to the
    best and second-best scores so far (ids ``bi``, ``si``; ``-1``: none); ties go to the
    lowest id, so the result does not depend on the order of the offers."""
    if sc > best or (sc == best and j < bi):
        return sc, j, best, bi
    if sc > second or (sc == second and (si < 0 or j < si)):
        return best, bi, sc, j
    return best, bi, second, si


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _cpl_pass_lists(X, S, C, cnt, Mw, theta, logw, wins, wins_sum, y, live, live_idx, n_live,
                    eta, n_threads):
    """:func:`cpl_pass` in robust semantics on ``n_threads`` threads (``d <= 128``).

    Chosen by :func:`cpl_pass` on more than two threads only: on two, :func:`_cpl_pass_ovd`
    costs less on the main thread and in total.

    Rows are taken in blocks. At a block's start the distances of its rows to every listed
    candidate are computed on Numba's threads against the centroids of that moment, with, per
    row, the lists of the largest score lower and upper bounds (:func:`_block_lists_t`; the
    bounds of the offsets ``log(1 - wins_j / W') + log w_j`` hold over the whole block,
    ``W <= W' <= W + rows``, for every candidate that stays *untouched*). The sequential walk
    then keeps the candidates *touched* since the block's start (won, penalised, moved or
    emptied: at most two or three a row), with bounds of their own (a moved centroid's
    distance bounded from its block-start distance by the triangle inequality); per row it
    takes the second-largest lower bound ``lo2`` from the untouched head of the list and the
    touched candidates, and computes exact scores (as :func:`cpl_pass` does) only for the
    candidates whose upper bound reaches ``lo2``: the untouched ones from the head of the
    upper-bound list, the touched ones directly (a moved centroid's exact distance by
    :func:`_one_dist_r`). The lower-bound list only tightens ``lo2`` (the second largest of any
    candidates' lower bounds is sound: two scores reach it); when the upper-bound list does not
    reach far enough (its last entry still reaches ``lo2``), every candidate is scanned. Every bound is
    sound (relative margins absorb rounding), so the winner, the rival and every value used
    are those of the sequential pass, bit for bit, whatever the thread count and block
    lengths: the sequential work per row is about the touched candidates, not all ``k``.
    """
    n, d = X.shape
    k = cnt.shape[0]
    W = wins_sum
    changed = False
    CT = np.empty((d, k))
    MwT = np.empty((d, k))
    tpos = np.empty(k, dtype=np.int64)
    _build_live_t(C, Mw, live_idx, n_live, CT, MwT, tpos)
    blk_max = max(_LIST_BLOCK_MIN, min(n, _LIST_BLOCK_MAX, _BLOCK_BUDGET // max(1, n_live)))
    blk = min(blk_max, 64)
    DB = np.empty((blk_max, max(1, n_live)))
    LOv = np.empty((blk_max, _TOP_LO))
    LOt = np.empty((blk_max, _TOP_LO), dtype=np.int64)
    HIv = np.empty((blk_max, _TOP_HI))
    HIt = np.empty((blk_max, _TOP_HI), dtype=np.int64)
    accp = np.empty((n_threads, 8, k))
    BLb = np.empty(k)
    BUb = np.empty(k)
    # touched list positions (tlist, flag touched), their bounds (BLc, BUc) and, for those
    # whose centroid moved (flag moved), their block-start centroid (C0) and the length of the move
    touched = np.zeros(k, dtype=np.uint8)
    moved = np.zeros(k, dtype=np.uint8)
    tlist = np.empty(k, dtype=np.int64)
    n_t = 0
    BLc = np.empty(k)
    BUc = np.empty(k)
    C0 = np.empty((k, d))
    shift = np.zeros(k)
    dlow = np.empty(k)
    work = 0
    work_half = 0
    blk_start = 0
    blk_end = 0
    Wend = W
    for i in range(n):
        if i >= blk_end:
            if i > 0:
                # the sequential work that staleness adds (second half of the block against
                # the first: the touched candidates pile up) against the cost of a region
                grow = (work - work_half) - work_half
                if 4 * grow < _LIST_REGION_COST:
                    blk = min(2 * blk, blk_max)
                elif grow > _LIST_REGION_COST:
                    blk = max(blk // 2, _LIST_BLOCK_MIN)
            work = 0
            work_half = 0
            for q in range(n_t):
                t = tlist[q]
                if moved[t] != 0:
                    # the moved centroids' columns of the transposed copy, once per block
                    j = live_idx[t]
                    for z in range(d):
                        CT[z, t] = C[j, z]
                touched[t] = 0
                moved[t] = 0
            n_t = 0
            nb = min(blk, n - i)
            Wend = W + nb
            _refresh_bounds(logw, wins, live, live_idx, n_live, W, Wend, BLb, BUb)
            _block_lists_t(X, i, nb, CT, MwT, n_live, BLb, BUb, accp, DB, LOv, LOt, HIv, HIt)
            blk_start = i
            blk_end = i + nb
        r = i - blk_start
        if 2 * r == blk_end - blk_start:
            work_half = work
        dist = DB[r]
        yi = y[i]
        # Phase 1: two large lower bounds (the second of any subset of candidates' lower bounds
        # is a sound threshold: at least two scores reach it). Untouched: the head of the
        # row's list; the touched ones below, with their own bounds.
        lo1 = -np.inf
        lo2 = -np.inf
        found = 0
        for e in range(_TOP_LO):
            t = LOt[r, e]
            if t < 0:
                break
            if touched[t] != 0:
                continue
            lo1, lo2 = _push2(LOv[r, e], lo1, lo2)
            found += 1
            if found == 2:
                break
        # touched: own bounds (a moved centroid: triangle inequality from its block-start distance)
        n_mv = 0
        for q in range(n_t):
            t = tlist[q]
            if moved[t] != 0:
                r0 = math.sqrt(dist[t])
                sh = shift[t]
                lw = r0 - sh - 1e-9 * (r0 + sh)
                dlow[t] = lw * lw if lw > 0.0 else 0.0
                up = (r0 + sh) * (1.0 + 1e-9)
                lo1, lo2 = _push2(BLc[t] - 0.5 * (up * up), lo1, lo2)
                n_mv += 1
            else:
                dlow[t] = dist[t]
                lo1, lo2 = _push2(BLc[t] - 0.5 * dist[t], lo1, lo2)
        work += 4 * n_t + 16 * n_mv
        # Phase 2: exact scores of the candidates whose upper bound reaches lo2.
        best = -np.inf
        second = -np.inf
        bi = -1
        si = -1
        scan = lo2 == -np.inf or (HIt[r, _TOP_HI - 1] >= 0 and not _below(HIv[r, _TOP_HI - 1], lo2))
        if scan:
            for t in range(n_live):
                if touched[t] != 0 or _below(BUb[t] - 0.5 * dist[t], lo2):
                    continue
                j = live_idx[t]
                if live[j] == 0:
                    continue
                sc = (math.log(1.0 - wins[j] / W) + logw[j]) - 0.5 * dist[t]
                best, bi, second, si = _top2(sc, j, best, bi, second, si)
        else:
            for e in range(_TOP_HI):
                t = HIt[r, e]
                if t < 0 or _below(HIv[r, e], lo2):
                    break
                if touched[t] != 0:
                    continue
                j = live_idx[t]
                if live[j] == 0:
                    continue
                sc = (math.log(1.0 - wins[j] / W) + logw[j]) - 0.5 * dist[t]
                best, bi, second, si = _top2(sc, j, best, bi, second, si)
        for q in range(n_t):
            t = tlist[q]
            if _below(BUc[t] - 0.5 * dlow[t], lo2):
                continue
            j = live_idx[t]
            if live[j] == 0:
                continue
            if moved[t] != 0:
                D = _one_dist_r(X, i, C, Mw, j)
                work += d
            else:
                D = dist[t]
            sc = (math.log(1.0 - wins[j] / W) + logw[j]) - 0.5 * D
            best, bi, second, si = _top2(sc, j, best, bi, second, si)

        v = bi
        theta[v] += eta
        logw[v] = log_sigmoid_weight(theta[v])
        r_ = -1
        if si >= 0:
            r_ = si
            theta[r_] -= eta * math.exp(second - best)
            logw[r_] = log_sigmoid_weight(theta[r_])
        wins[v] += 1.0
        W += 1.0
        # the winner's wins and both weights changed: touched, with bounds valid from this W
        if r_ >= 0 and tpos[r_] >= 0:
            t = tpos[r_]
            if touched[t] == 0:
                touched[t] = 1
                tlist[n_t] = t
                n_t += 1
            _set_bounds(r_, t, logw, wins, live, W, Wend, BLc, BUc)
        pv = tpos[v]
        if pv >= 0:
            if touched[pv] == 0:
                touched[pv] = 1
                tlist[n_t] = pv
                n_t += 1
            _set_bounds(v, pv, logw, wins, live, W, Wend, BLc, BUc)

        if yi != v:
            if pv >= 0 and moved[pv] == 0:
                for z in range(d):
                    C0[pv, z] = C[v, z]
                moved[pv] = 1
            cnt[v] += 1
            cv = cnt[v]
            for z in range(d):
                S[v, z] += X[i, z]
                C[v, z] = S[v, z] / cv
            if pv >= 0:
                shift[pv] = _moved_by_r(C, C0, Mw, v, pv)
            if yi >= 0:
                cnt[yi] -= 1
                co = cnt[yi]
                po = tpos[yi]
                if po >= 0 and touched[po] == 0:
                    touched[po] = 1
                    tlist[n_t] = po
                    n_t += 1
                    _set_bounds(yi, po, logw, wins, live, W, Wend, BLc, BUc)
                if co > 0:
                    if po >= 0 and moved[po] == 0:
                        for z in range(d):
                            C0[po, z] = C[yi, z]
                        moved[po] = 1
                    for z in range(d):
                        S[yi, z] -= X[i, z]
                        C[yi, z] = S[yi, z] / co
                    if po >= 0:
                        shift[po] = _moved_by_r(C, C0, Mw, yi, po)
                else:
                    for z in range(d):
                        S[yi, z] -= X[i, z]
                    live[yi] = 0  # empty: dead at once
                    if po >= 0:
                        BLc[po] = -np.inf
                        BUc[po] = -np.inf
            y[i] = v
            changed = True
    return changed, n_live


# --------------------------------------------------------------------------------------------
# CPL: the overlapped pass of robust semantics (the walk of one block beside the distances of
# the next)
# --------------------------------------------------------------------------------------------
@numba.extending.intrinsic
def _cycles(typingctx):
    """The processor's cycle counter (``llvm.readcyclecounter``): only to balance work between
    two threads, never in a result."""
    from llvmlite import ir

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        fn = numba.core.cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])

    return numba.types.int64(), codegen


@numba.njit(**_NO_REFCOUNT)
def _moved_from_t(C, Mw, j, CT0, t):
    """Weighted length ``sqrt(sum_z Mw[j, z] (C[j, z] - CT0[z, t])^2)`` of candidate ``j``'s
    move from the column ``t`` of a transposed snapshot."""
    s = 0.0
    for z in range(C.shape[1]):
        e = C[j, z] - CT0[z, t]
        s += Mw[j, z] * (e * e)
    return math.sqrt(s)


#: the most distances a block of :func:`_cpl_pass_ovd` holds (rows x listed candidates, 512 KB):
#: the walk reads them while they are still in cache (10^5 x 50, 384 live candidates, two threads,
#: main-thread / process CPU ms: 2^20 (the budget of the other passes) 378 / 688, 2^16 313 / 620,
#: 2^15 317 / 631; 189 live: 159 / 297, 142 / 282, 140 / 280)
_OVD_BUDGET = 1 << 16


@numba.njit(**_NO_REFCOUNT)
def _dist_rows_t(X, i0, r_lo, r_hi, CT, MwT, n_live, acc, DB):
    """Rows ``i0 + r``, ``r_lo <= r < r_hi``, of :func:`_block_dists_t` on the calling thread."""
    for r in range(r_lo, r_hi):
        _live_dists_t(X, i0 + r, CT, MwT, n_live, acc, DB[r])


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _ovd_walk(X, S, C, cnt, Mw, theta, logw, wins, y, live, live_idx, tpos, eta, i0, nb, b, DB,
              CTs, BL, BU, cand, cand_hi, dirty, lm, dlist, shift, dlow, ist, fst):
    """The sequential walk of block ``b`` (rows ``i0 .. i0 + nb - 1``) of
    :func:`_cpl_pass_ovd`: :func:`_cpl_pass_one`'s walk with block-parallel distances
    (robust semantics), against distances computed one block earlier.

    ``DB`` holds the rows' distances to the listed candidates against the snapshot ``CTs``
    (d, k, transposed) of the centroids taken at the start of block ``b - 1``. A candidate is
    *dirty* when its centroid moved since then (``lm[t] >= b - 1``, the block index of its
    last move); its distance is bounded by the triangle inequality from the one to its
    snapshot column (``shift``: the weighted length of its move since the snapshot) and
    computed exactly (:func:`_one_dist_r`) when scored. The offset bounds ``BL``, ``BU`` are
    the walk's own (refreshed every ``_BOUND_BLOCK`` rows, as in :func:`_cpl_pass_one`), so
    the winner, the rival and every value used are the sequential pass's.

    ``ist`` int64 INOUT: ``[n_dirty, changed, work]``; ``fst`` float64 INOUT: ``[W, Wend]``.
    """
    d = X.shape[1]
    n_live = DB.shape[1]
    n_dirty = ist[0]
    changed = ist[1] != 0
    W = fst[0]
    Wend = fst[1]
    m = 0
    for q in range(n_dirty):
        t = dlist[q]
        if lm[t] >= b - 1:
            dlist[m] = t
            m += 1
            shift[t] = _moved_from_t(C, Mw, live_idx[t], CTs, t)
        else:
            dirty[t] = 0
    n_dirty = m
    work = 0
    for r in range(nb):
        i = i0 + r
        if i % _BOUND_BLOCK == 0:
            Wend = W + _BOUND_BLOCK
            _refresh_bounds(logw, wins, live, live_idx, n_live, W, Wend, BL, BU)
        dist = DB[r]
        yi = y[i]
        for q in range(n_dirty):
            t = dlist[q]
            r0 = math.sqrt(dist[t])
            sh = shift[t]
            lw = r0 - sh - 1e-9 * (r0 + sh)
            dlow[t] = lw * lw if lw > 0.0 else 0.0
            up = (r0 + sh) * (1.0 + 1e-9)
            dist[t] = up * up
        work += 4 * n_dirty
        lo1 = -np.inf
        lo2 = -np.inf
        cut = -np.inf
        n_c = 0
        for t in range(n_live):
            D = dist[t]
            lo = BL[t] - 0.5 * D
            if lo > lo2:
                if lo > lo1:
                    lo2 = lo1
                    lo1 = lo
                else:
                    lo2 = lo
                cut = _cut_below(lo2)
            if dirty[t] != 0:
                hi = BU[t] - 0.5 * dlow[t]
            else:
                hi = BU[t] - 0.5 * D
            if not hi < cut:
                cand[n_c] = t
                cand_hi[n_c] = hi
                n_c += 1
        best = -np.inf
        second = -np.inf
        bi = -1
        si = -1
        for q in range(n_c):
            if _below(cand_hi[q], lo2):
                continue
            t = cand[q]
            j = live_idx[t]
            if live[j] == 0:
                continue
            D = dist[t]
            if dirty[t] != 0:
                D = _one_dist_r(X, i, C, Mw, j)
                work += d
            sc = (math.log(1.0 - wins[j] / W) + logw[j]) - 0.5 * D
            best, bi, second, si = _top2(sc, j, best, bi, second, si)
        v = bi
        theta[v] += eta
        logw[v] = log_sigmoid_weight(theta[v])
        r_ = -1
        if si >= 0:
            r_ = si
            theta[r_] -= eta * math.exp(second - best)
            logw[r_] = log_sigmoid_weight(theta[r_])
        wins[v] += 1.0
        W += 1.0
        if r_ >= 0 and tpos[r_] >= 0:
            _set_bounds(r_, tpos[r_], logw, wins, live, W, Wend, BL, BU)
        pv = tpos[v]
        if pv >= 0:
            _set_bounds(v, pv, logw, wins, live, W, Wend, BL, BU)
        if yi != v:
            cnt[v] += 1
            cv = cnt[v]
            for z in range(d):
                S[v, z] += X[i, z]
                C[v, z] = S[v, z] / cv
            if pv >= 0:
                lm[pv] = b
                if dirty[pv] == 0:
                    dirty[pv] = 1
                    dlist[n_dirty] = pv
                    n_dirty += 1
                shift[pv] = _moved_from_t(C, Mw, v, CTs, pv)
            if yi >= 0:
                cnt[yi] -= 1
                co = cnt[yi]
                po = tpos[yi]
                if co > 0:
                    for z in range(d):
                        S[yi, z] -= X[i, z]
                        C[yi, z] = S[yi, z] / co
                    if po >= 0:
                        lm[po] = b
                        if dirty[po] == 0:
                            dirty[po] = 1
                            dlist[n_dirty] = po
                            n_dirty += 1
                        shift[po] = _moved_from_t(C, Mw, yi, CTs, po)
                else:
                    for z in range(d):
                        S[yi, z] -= X[i, z]
                    live[yi] = 0  # empty: dead at once
                    if po >= 0:
                        BL[po] = -np.inf
                        BU[po] = -np.inf
            y[i] = v
            changed = True
    ist[0] = n_dirty
    ist[1] = 1 if changed else 0
    ist[2] = work
    fst[0] = W
    fst[1] = Wend


@numba.njit(parallel=True, cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _ovd_region(X, S, C, cnt, Mw, theta, logw, wins, y, live, live_idx, tpos, eta, i0, nb, b, DB,
                CTs, BL, BU, cand, cand_hi, dirty, lm, dlist, shift, dlow, ist, fst,
                j0, nb2, m2, MwT, CT2, acc, DB2, cyc):
    """One parallel region of :func:`_cpl_pass_ovd`, two parts: the walk of block ``b``
    (:func:`_ovd_walk`) followed by the distances of rows ``m2 .. nb2 - 1`` of the next block
    (rows ``j0 ..`` against the snapshot ``CT2``), and beside them the distances of its rows
    ``0 .. m2 - 1``. The parts write disjoint arrays and the distances read only the snapshot.
    ``cyc`` (3,) OUT: cycles of the walk, of the first part's distances, of the second's."""
    for p in numba.prange(2):
        if p == 0:
            c0 = _cycles()
            _ovd_walk(X, S, C, cnt, Mw, theta, logw, wins, y, live, live_idx, tpos, eta, i0, nb, b,
                      DB, CTs, BL, BU, cand, cand_hi, dirty, lm, dlist, shift, dlow, ist, fst)
            c1 = _cycles()
            _dist_rows_t(X, j0, m2, nb2, CT2, MwT, DB2.shape[1], acc[0], DB2)
            cyc[0] = c1 - c0
            cyc[1] = _cycles() - c1
        else:
            c0 = _cycles()
            _dist_rows_t(X, j0, 0, m2, CT2, MwT, DB2.shape[1], acc[1], DB2)
            cyc[2] = _cycles() - c0


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _cpl_pass_ovd(X, S, C, cnt, Mw, theta, logw, wins, wins_sum, y, live, live_idx, n_live, eta):
    """:func:`cpl_pass` in robust semantics on two threads (``d <= 128``): the distances of
    the next block of rows computed while the current block is walked. Same arguments and
    result as :func:`_cpl_pass_lists`.

    Each parallel region (:func:`_ovd_region`) runs the walk of block ``b`` and, beside it,
    the distances of block ``b + 1`` against a snapshot of the centroids taken at the start of
    block ``b``; the walking thread computes a share of them after its walk, sized from the
    cycle counts of the previous region so that both parts end together. The walk treats as
    dirty every candidate moved since the snapshot of its block (two blocks back at most).
    The rows each thread computes, the block lengths and the timing change no value: every
    distance is the same code on the same inputs and every bound is sound, so the result is
    bit-identical to the sequential pass.
    """
    n, d = X.shape
    k = cnt.shape[0]
    MwT = np.empty((d, k))
    CTs = np.empty((2, d, k))
    tpos = np.empty(k, dtype=np.int64)
    _build_live_t(C, Mw, live_idx, n_live, CTs[0], MwT, tpos)
    CTs[1, :, :] = CTs[0]
    nl = max(1, n_live)
    blk_max = max(_BLOCK_MIN, min(n, _OVD_BUDGET // nl))
    blk = min(blk_max, _BLOCK_MIN * 4)
    DB = np.empty((2, blk_max, n_live))
    acc = np.empty((2, 8, k))
    BL = np.empty(k)
    BU = np.empty(k)
    cand = np.empty(k, dtype=np.int64)
    cand_hi = np.empty(k)
    dirty = np.zeros(k, dtype=np.uint8)
    lm = np.full(k, -10, dtype=np.int64)
    dlist = np.empty(k, dtype=np.int64)
    shift = np.zeros(k)
    dlow = np.empty(k)
    ist = np.zeros(3, dtype=np.int64)
    fst = np.empty(2)
    fst[0] = wins_sum
    fst[1] = wins_sum
    cyc = np.zeros(3, dtype=np.int64)
    nb = min(blk, n)
    _block_dists_t(X, 0, nb, CTs[0], MwT, n_live, acc, DB[0])
    i = 0
    b = 0
    walk_pr = 0.0  # cycles per row of the walk and of the distances (last region)
    dist_pr = 0.0
    while i < n:
        q = b % 2
        j0 = i + nb
        nb2 = min(blk, n - j0)
        if nb2 > 0:
            q2 = 1 - q
            # snapshot s_{b+1} (now) into the buffer of s_{b-1}: the columns moved since then
            # (in block b - 2 or b - 1: all in the dirty list)
            for e in range(ist[0]):
                t = dlist[e]
                if lm[t] >= b - 2:
                    j = live_idx[t]
                    for z in range(d):
                        CTs[q2, z, t] = C[j, z]
            m2 = nb2
            if dist_pr > 0.0:
                share = 0.5 * (nb2 - walk_pr * nb / dist_pr)
                m2 = nb2 - min(nb2, max(0, int(share)))
            _ovd_region(X, S, C, cnt, Mw, theta, logw, wins, y, live, live_idx, tpos, eta, i, nb, b,
                        DB[q, :nb], CTs[q], BL, BU, cand, cand_hi, dirty, lm, dlist, shift, dlow, ist,
                        fst, j0, nb2, m2, MwT, CTs[q2], acc, DB[q2], cyc)
            if nb > 0:
                walk_pr = cyc[0] / nb
            rows_d = 0
            c_d = 0
            if m2 > 0:
                rows_d += m2
                c_d += cyc[2]
            if nb2 - m2 > 0:
                rows_d += nb2 - m2
                c_d += cyc[1]
            if rows_d > 0:
                dist_pr = c_d / rows_d
        else:
            _ovd_walk(X, S, C, cnt, Mw, theta, logw, wins, y, live, live_idx, tpos, eta, i, nb, b,
                      DB[q, :nb], CTs[q], BL, BU, cand, cand_hi, dirty, lm, dlist, shift, dlow, ist, fst)
        # block length: longer while the dirty candidates' work is small against the block's
        # distances (as in :func:`_cpl_pass_one`)
        full = nb * n_live * d
        work = ist[2]
        if 8 * work <= full:
            blk = min(2 * blk, blk_max)
        elif 2 * work > full:
            blk = max(blk // 2, _BLOCK_MIN)
        i = j0
        nb = nb2
        b += 1
    return ist[1] != 0, n_live


def cpl_pass(X, S, C, cnt, Mw, theta, logw, wins, wins_sum, y, live, live_idx, n_live, inlist,
             wnan, eta, reference, n_threads=1, rv=None):
    """One CPL pass (epoch): :func:`_cpl_pass_ovd` or :func:`_cpl_pass_one` (same arguments).

    Robust semantics on two threads with ``d <= 128``, at least ``_PAR_MIN_ROWS`` rows and
    ``n_live * d >= _PAR_MIN_WORK`` run the overlapped pass (the distances of the next block
    of rows beside the walk of the current one; on more threads, with ``n_live * d >=
    _LIST_MIN_WORK``, the list pass :func:`_cpl_pass_lists`, whose distances use them all),
    except where the sequential pass uses its row hints (``d < _HINT_MAX_D``, at least
    ``_HINT_MIN_LIVE`` listed candidates: cheaper on the main thread than any parallel
    pass); everything else runs
    :func:`_cpl_pass_one`. The choice is made here, in Python, so that a first fit compiles
    only the kernels it runs (the parallel passes take most of a cold start's compile time
    and small clients never use them). Both give the same bits.

    (Per pass, 10^5 x 50, one client, two threads, ``OMP_WAIT_POLICY=passive``, main-thread /
    process CPU ms: 384 live candidates 313 / 620, list pass :func:`_cpl_pass_lists` 406 / 737,
    one thread 575; 189: 142 / 282, 181 / 321, 269; 10: 23.5 / 44, 39 / 64, 43.)

    ``rv`` (n,) int32 INOUT, or None (a fresh all ``-1`` array): each row's rival of its last
    sequential pass (``-1``: none), a hint for the next pass's bounds (:func:`_cpl_pass_one`);
    a wrong or stale hint costs time, never a different result.
    """
    n, d = X.shape
    if rv is None:
        rv = np.full(n, -1, dtype=np.int32)
    # (d < _HINT_MAX_D with enough candidates: the sequential pass's hinted rows cost less main-thread
    # time than the list pass's share of the distances plus its walk -- 10^5 x 10, 384 / 372 live
    # candidates: 143 / 90 ms serial against 167 / 132 ms on the main thread of the list pass)
    hinted = d < _HINT_MAX_D and n_live >= _HINT_MIN_LIVE
    if (reference == 0 and n_threads == 2 and d <= 128 and n_live * d >= _PAR_MIN_WORK
            and n >= _PAR_MIN_ROWS and not hinted):
        return _cpl_pass_ovd(X, S, C, cnt, Mw, theta, logw, wins, wins_sum, y, live, live_idx,
                             n_live, eta)
    # (more threads: the list pass splits the distances over all of them; the overlapped pass
    # uses two)
    if (reference == 0 and n_threads > 2 and d <= 128 and n_live * d >= _LIST_MIN_WORK
            and n >= _PAR_MIN_ROWS and not hinted):
        return _cpl_pass_lists(X, S, C, cnt, Mw, theta, logw, wins, wins_sum, y, live, live_idx,
                               n_live, eta, n_threads)
    # literal None arguments prune the branches a pass cannot reach, so that a first fit does not
    # compile them: robust semantics never reach the reference decision, d <= 128 never the
    # row-major distances, a serial pass never the block-parallel code
    ref_dec = True if reference != 0 else None
    wide = True if d > 128 else None
    if d <= 128 and n_threads > 1 and n_live * d >= _PAR_MIN_WORK and n >= _PAR_MIN_ROWS and not hinted:
        return _cpl_pass_one(X, S, C, cnt, Mw, theta, logw, wins, wins_sum, y, live, live_idx,
                             n_live, inlist, wnan, eta, reference, rv, n_threads, True, None,
                             ref_dec)
    # no block-parallel distances: None prunes that branch, so its kernel is never compiled
    return _cpl_pass_one(X, S, C, cnt, Mw, theta, logw, wins, wins_sum, y, live, live_idx, n_live,
                         inlist, wnan, eta, reference, rv, 1, None, wide, ref_dec)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _cpl_pass_one(X, S, C, cnt, Mw, theta, logw, wins, wins_sum, y, live, live_idx, n_live, inlist,
                  wnan, eta, reference, rv, n_threads=1, block_par=None, wide=None, ref_dec=None):
    """One CPL pass (epoch) over the samples in stored row order, with online updates.

    Parameters
    ----------
    X : ndarray of shape (n, d), float64, C-contiguous. IN.
    S, C : ndarray of shape (k, d), float64. INOUT (sums and centroids of the winner and of
        the sample's old cluster are updated at once).
    cnt : ndarray of shape (k,), int64. INOUT.
    Mw : ndarray of shape (k, d), float64. IN (frozen during a pass).
    theta, logw, wins : ndarray of shape (k,), float64. INOUT.
    wins_sum : float. IN, ``sum_t wins_t`` at the start of the pass (``k + passes * n``).
    y : ndarray of shape (n,), int64. INOUT.
    live, inlist : ndarray of shape (k,), uint8. INOUT.
    live_idx : ndarray of shape (k,), int64. INOUT.
    n_live : int. Number of valid entries of ``live_idx``.
    wnan : ndarray of shape (k,), uint8. IN (reference semantics; all zero otherwise).
    eta : float. Learning rate.
    reference : int. 1 = reference semantics, 0 = robust semantics.
    block_par : None or True, default None. ``None`` (a literal: Numba prunes the branch, so
        the parallel block kernel is not even compiled) runs every distance here in order;
        ``True`` allows the block-parallel distances below when ``n_threads`` and the sizes
        call for them (:func:`cpl_pass` passes it exactly then). Every test of ``par`` below
        starts with ``block_par is not None``, so a serial pass compiles none of that code.
    wide : None or True, default None. ``True`` exactly when ``d > 128`` (the row-major
        distances of :func:`_live_dists`); ``None`` (a literal) prunes that branch.
    ref_dec : None or True, default None. ``True`` exactly when ``reference != 0`` (the
        literal decision :func:`_reference_decision` and the revival of candidates); ``None``
        (a literal, robust semantics) prunes both.
    n_threads : int, default 1. Above 1 (and ``d <= 128``), robust semantics run
        :func:`_cpl_pass_lists` instead (chosen by :func:`cpl_pass`, when
        ``n_live * d >= _LIST_MIN_WORK``). Here (reference semantics, or a smaller pass):
        the distances of a block of rows to the candidates are computed ahead on Numba's
        threads (:func:`_block_dists_t`; the caller sets ``numba.set_num_threads``) against
        the centroids at the block's start;
        while the block is processed in order, the distances to the candidates whose centroid
        moved since then are recomputed (:func:`_one_dist_t`). Every distance used is thus
        the one the sequential pass computes: results are bit-identical for any thread count.

    Returns
    -------
    changed : bool
        Whether any label changed during the pass.
    n_live : int
        Entries of ``live_idx`` after the pass (grows only when reference semantics revive
        candidate 0 through the all-zero fallback).

    Notes
    -----
    Per sample, only the live candidates are scored, in the log domain:
    ``log shat_j = (log(1 - wins_j / W) + log w_j) - D_j / 2`` (the per-sample normalisation
    of the similarities cancels in the winner, the rival and the penalty ratio). A first
    scan computes the weighted distances ``D_j`` (summed in NumPy's pairwise order, see
    :func:`_sq_dist`) and, from per-candidate bounds of ``log(1 - wins_j / W) + log w_j``
    that stay valid over a block of samples (:func:`_refresh_bounds`; refreshed every
    ``_BOUND_BLOCK`` samples and at once for the winner and the rival), the second-largest
    lower bound ``lo2`` of the scores: two candidates score at least ``lo2``. The logarithm
    is then taken only for the candidates whose upper bound reaches ``lo2`` (relative margins
    absorb rounding): the winner and rival are exactly those of the full scan. Best and second
    best come from one scan, ties to the lowest index. Cost ``O(k_live d)`` per sample at
    most, with no division or logarithm per candidate; no ``n x k`` matrix, no sort.

    Hinted rows (sequential pass, ``d < _HINT_MAX_D``, at least ``_HINT_MIN_LIVE`` listed
    candidates): ``rv`` (n,) int32 INOUT holds each row's rival of its last sequential pass
    (written here for every row; ``-1``: none). When a row's label and that rival are two
    distinct live candidates, their exact distances give ``lo2`` before any other distance;
    the other candidates are bounded by the partial sums of their first 4 terms
    (:func:`_live_partial_t`; every term is >= 0, so the full distance is at least that up to
    rounding, widened by a relative 1e-12) and only those whose score bound reaches the
    running cut get their exact distance (one at a time, :func:`_one_dist_t`, or all at once
    when more than a third survive). The hint only orders the work: any two live candidates
    give a sound ``lo2``, so a stale or wrong hint gives the same result.
    """
    n, d = X.shape
    W = wins_sum
    changed = False
    k = cnt.shape[0]
    tmp = np.empty(d)
    dist = np.empty(k)
    stk = np.empty((3, 64), dtype=np.int64)
    stv = np.empty(64)
    BL = np.empty(k)
    BU = np.empty(k)
    cand = np.empty(k, dtype=np.int64)
    cand_hi = np.empty(k)
    # transposed copies of the listed candidates (d <= 128): distances vectorise across them
    small = d <= 128
    CT = np.empty((d, k))
    MwT = np.empty((d, k))
    tpos = np.empty(k, dtype=np.int64)
    acc = np.empty((8, k))
    if small:
        _build_live_t(C, Mw, live_idx, n_live, CT, MwT, tpos)
    else:
        _build_tpos(k, live_idx, n_live, tpos)
    # block-parallel distances: the block's distances, per-part scratch, and the list
    # positions whose centroid moved in the block. Blocks are long (few parallel regions) while
    # few centroids move, shorter when many do (each moved one is recomputed per row); the
    # block lengths change no result.
    par = small and n_threads > 1 and n_live * d >= _PAR_MIN_WORK and n >= _PAR_MIN_ROWS
    n_par = n_threads if par else 1
    blk_max = max(_BLOCK_MIN, min(n, _BLOCK_BUDGET // max(1, k))) if par else 1
    blk = min(blk_max, _BLOCK_MIN * 4)
    DB = np.empty((blk_max, k))
    accp = np.empty((n_par, 8, k))
    dirty = np.zeros(k, dtype=np.uint8)
    dlist = np.empty(k, dtype=np.int64)
    n_dirty = 0
    # moved centroids: their column at the block's start (CT0), the weighted length of their
    # move since then (shift) and, per row, a lower bound of their distance (dlow)
    CT0 = np.empty((d, k)) if par else np.empty((0, 0))
    shift = np.zeros(k)
    dlow = np.empty(k)
    work = 0
    blk_start = 0
    blk_end = 0
    Wend = W
    # hinted rows (sequential path, d <= 128): partial sums over the first q_part features
    hint = not par and d < _HINT_MAX_D and n_live >= _HINT_MIN_LIVE
    q_part = min(d, 4)
    dist_p = np.empty(k)
    surv = np.empty(k, dtype=np.int64)
    for i in range(n):
        if i % _BOUND_BLOCK == 0:
            Wend = W + _BOUND_BLOCK
            _refresh_bounds(logw, wins, live, live_idx, n_live, W, Wend, BL, BU)
        best = -np.inf
        second = -np.inf
        bi = -1
        si = -1
        dbest = 0.0
        yi = y[i]
        ha = -1
        hb = -1
        if hint:
            rj = rv[i]
            if yi >= 0 and rj >= 0 and rj != yi and live[yi] != 0 and live[rj] != 0:
                ha = tpos[yi]
                hb = tpos[rj]
                if hb < 0:
                    ha = -1
        # Phase 1: weighted distances of the listed candidates and the two largest lower
        # bounds of their scores (dead candidates have -inf bounds).
        if block_par is not None and par:
            if i >= blk_end:
                if i > 0:
                    # sequential work on moved centroids (exact distances ~ d, bounds ~ 4
                    # each) against the block's distances: longer blocks while it is small
                    full = (blk_end - blk_start) * n_live * d
                    if 8 * work <= full:
                        blk = min(2 * blk, blk_max)
                    elif 2 * work > full:
                        blk = max(blk // 2, _BLOCK_MIN)
                work = 0
                nb = min(blk, n - i)
                if block_par is not None:  # a literal None (serial callers) prunes this call
                    _block_dists_t(X, i, nb, CT, MwT, n_live, accp, DB)
                blk_start = i
                blk_end = i + nb
                for q in range(n_dirty):
                    dirty[dlist[q]] = 0
                n_dirty = 0
            dist = DB[i - blk_start]
            # a moved centroid's distance from the one to its block-start position (triangle
            # inequality of the weighted norm, widened by relative margins far above rounding):
            # dist holds an upper bound (phase 1), dlow a lower bound (phase 2 filter); the
            # exact distance is computed only for the candidates phase 2 scores
            for q in range(n_dirty):
                t = dlist[q]
                r0 = math.sqrt(dist[t])
                sh = shift[t]
                lw = r0 - sh - 1e-9 * (r0 + sh)
                dlow[t] = lw * lw if lw > 0.0 else 0.0
                up = (r0 + sh) * (1.0 + 1e-9)
                dist[t] = up * up
            work += 4 * n_dirty
        elif ha >= 0:
            # Hinted row (see the docstring): exact distances of its label's candidate and of
            # its last rival give a sound lo2 at once; every other candidate is first bounded
            # by a partial sum of its first q terms (all terms are >= 0), and its exact
            # distance is computed only when that bound's score reaches the running cut.
            lo1 = -np.inf
            lo2 = -np.inf
            n_c = 0
            for e in range(2):
                t = ha if e == 0 else hb
                D = _one_dist_tc(X, i, CT, MwT, t)
                dist[t] = D
                lo = BL[t] - 0.5 * D
                if lo > lo1:
                    lo2 = lo1
                    lo1 = lo
                else:
                    lo2 = lo
                cand[n_c] = t
                cand_hi[n_c] = BU[t] - 0.5 * D
                n_c += 1
            cut = _cut_below(lo2)
            _live_partial_t(X, i, CT, MwT, n_live, q_part, dist_p)
            # (branch free: which candidates survive is hard to predict, and a mispredicted
            # branch per candidate cost more than the bounds themselves)
            n_s = 0
            for t in range(n_live):
                surv[n_s] = t
                n_s += 0 if BU[t] - 0.5 * (dist_p[t] * (1.0 - 1e-12)) < cut else 1
            # many survivors (early passes: many candidates near the row): all distances at
            # once, vectorised, is cheaper than one at a time (the same bits either way)
            many = 3 * n_s > n_live
            if many:
                _live_dists_t(X, i, CT, MwT, n_live, acc, dist)
            for p_ in range(n_s):
                t = surv[p_]
                if t == ha or t == hb:
                    continue
                if many:
                    D = dist[t]
                else:
                    D = _one_dist_t(X, i, CT, MwT, t)
                    dist[t] = D
                lo = BL[t] - 0.5 * D
                if lo > lo2:
                    if lo > lo1:
                        lo2 = lo1
                        lo1 = lo
                    else:
                        lo2 = lo
                    cut = _cut_below(lo2)
                hi = BU[t] - 0.5 * D
                if not hi < cut:
                    cand[n_c] = t
                    cand_hi[n_c] = hi
                    n_c += 1
        elif small:
            _live_dists_t(X, i, CT, MwT, n_live, acc, dist)
        elif wide is not None:  # d > 128 (a literal None prunes this call, see cpl_pass)
            _live_dists(X, i, C, Mw, live_idx, n_live, dist, tmp, stk, stv)
        # One scan: the two largest lower bounds so far (lo1 >= lo2) and the candidates whose
        # upper bound reaches that running lo2. The running lo2 never exceeds the final one, so
        # every candidate the final lo2 keeps is collected (the others cannot be the winner
        # or the rival: two scores reach lo2); the collected ones are filtered again below.
        # The collection test compares with ``cut`` = lo2 less a relative margin (recomputed
        # only when lo2 grows): looser than :func:`_below` near lo2, far above rounding.
        if ha >= 0:
            pass
        elif block_par is not None and par:
            lo1 = -np.inf
            lo2 = -np.inf
            cut = -np.inf
            n_c = 0
            for t in range(n_live):
                D = dist[t]
                lo = BL[t] - 0.5 * D
                if lo > lo2:
                    if lo > lo1:
                        lo2 = lo1
                        lo1 = lo
                    else:
                        lo2 = lo
                    cut = _cut_below(lo2)
                if dirty[t] != 0:
                    hi = BU[t] - 0.5 * dlow[t]
                else:
                    hi = BU[t] - 0.5 * D
                if not hi < cut:
                    cand[n_c] = t
                    cand_hi[n_c] = hi
                    n_c += 1
        else:
            lo1 = -np.inf
            lo2 = -np.inf
            cut = -np.inf
            n_c = 0
            for t in range(n_live):
                D = dist[t]
                lo = BL[t] - 0.5 * D
                if lo > lo2:
                    if lo > lo1:
                        lo2 = lo1
                        lo1 = lo
                    else:
                        lo2 = lo
                    cut = _cut_below(lo2)
                hi = BU[t] - 0.5 * D
                if not hi < cut:
                    cand[n_c] = t
                    cand_hi[n_c] = hi
                    n_c += 1
        # Phase 2: exact scores (as the reference computes them) of the collected candidates
        # whose upper bound reaches the final lo2; ties to the lowest index whatever the order.
        for q in range(n_c):
            if _below(cand_hi[q], lo2):
                continue
            t = cand[q]
            j = live_idx[t]
            if live[j] == 0:
                continue
            D = dist[t]
            if block_par is not None and par and dirty[t] != 0:
                D = _one_dist_t(X, i, CT, MwT, t)
                work += d
            sc = (math.log(1.0 - wins[j] / W) + logw[j]) - 0.5 * D
            if sc > best or (sc == best and j < bi):
                dbest = D
            best, bi, second, si = _top2(sc, j, best, bi, second, si)

        r = -1
        if ref_dec is not None and reference != 0 and (bi < 0 or math.exp(-0.5 * dbest) == 0.0):
            v, r, ratio = _reference_decision(X, i, C, cnt, Mw, theta, wins, W, wnan, tmp, stk, stv)
            theta[v] += eta
            logw[v] = log_sigmoid_weight(theta[v])
            theta[r] -= eta * ratio
            logw[r] = log_sigmoid_weight(theta[r])
            if theta[r] != theta[r]:
                live[r] = 0
            if theta[v] != theta[v]:
                live[v] = 0
        else:
            v = bi
            theta[v] += eta
            logw[v] = log_sigmoid_weight(theta[v])
            if si >= 0:
                r = si
                theta[r] -= eta * math.exp(second - best)
                logw[r] = log_sigmoid_weight(theta[r])
        wins[v] += 1.0
        W += 1.0
        rv[i] = r
        # the winner's wins and both weights changed: their bounds again, valid from this W
        if r >= 0 and tpos[r] >= 0:
            _set_bounds(r, tpos[r], logw, wins, live, W, Wend, BL, BU)
        if tpos[v] >= 0:
            _set_bounds(v, tpos[v], logw, wins, live, W, Wend, BL, BU)

        if yi != v:
            cnt[v] += 1
            cv = cnt[v]
            for z in range(d):
                S[v, z] += X[i, z]
                C[v, z] = S[v, z] / cv
            if small and tpos[v] >= 0:
                pv = tpos[v]
                if block_par is not None and par and dirty[pv] == 0:
                    for z in range(d):
                        CT0[z, pv] = CT[z, pv]
                    dirty[pv] = 1
                    dlist[n_dirty] = pv
                    n_dirty += 1
                for z in range(d):
                    CT[z, pv] = C[v, z]
                if block_par is not None and par:
                    shift[pv] = _moved_by(CT, CT0, MwT, pv)
            if yi >= 0:
                cnt[yi] -= 1
                co = cnt[yi]
                if co > 0:
                    for z in range(d):
                        S[yi, z] -= X[i, z]
                        C[yi, z] = S[yi, z] / co
                    if small and tpos[yi] >= 0:
                        po = tpos[yi]
                        if block_par is not None and par and dirty[po] == 0:
                            for z in range(d):
                                CT0[z, po] = CT[z, po]
                            dirty[po] = 1
                            dlist[n_dirty] = po
                            n_dirty += 1
                        for z in range(d):
                            CT[z, po] = C[yi, z]
                        if block_par is not None and par:
                            shift[po] = _moved_by(CT, CT0, MwT, po)
                else:
                    for z in range(d):
                        S[yi, z] -= X[i, z]
                    live[yi] = 0  # empty: dead at once
                    if tpos[yi] >= 0:
                        BL[tpos[yi]] = -np.inf
                        BU[tpos[yi]] = -np.inf
            y[i] = v
            changed = True
            if (ref_dec is not None and reference != 0 and live[v] == 0 and wnan[v] == 0
                    and theta[v] == theta[v]):
                # all-zero fallback handed the sample to an empty candidate: it is back
                live[v] = 1
                if inlist[v] == 0:
                    ins = n_live
                    while ins > 0 and live_idx[ins - 1] > v:
                        live_idx[ins] = live_idx[ins - 1]
                        ins -= 1
                    live_idx[ins] = v
                    inlist[v] = 1
                    n_live += 1
                    if small:
                        _build_live_t(C, Mw, live_idx, n_live, CT, MwT, tpos)
                    else:
                        _build_tpos(k, live_idx, n_live, tpos)
                    # the list positions changed: the next row starts a new block
                    blk_end = i + 1
                _refresh_bounds(logw, wins, live, live_idx, n_live, W, Wend, BL, BU)
    return changed, n_live


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def cpl_compact_live(live, live_idx, inlist):
    """Rebuild the compact list of live candidates, in increasing id order.

    ``live`` (k,) uint8 IN; ``live_idx`` (k,) int64 OUT; ``inlist`` (k,) uint8 OUT.
    Returns the number of live candidates. ``O(k)``.
    """
    n_live = 0
    for j in range(live.shape[0]):
        if live[j] != 0:
            live_idx[n_live] = j
            inlist[j] = 1
            n_live += 1
        else:
            inlist[j] = 0
    return n_live


# --------------------------------------------------------------------------------------------
# CPL: feature weights (fed_hire.md §3.1.5, robust rules §3.1.7, reference NaN rules §3.1.6)
# --------------------------------------------------------------------------------------------
@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _fw_columns(X, y, cnt, C, b_sum, b_mu, b_q, b_g, b_min, b_max, b_feat, b_jext, z0, z1,
                dirty, full, j0=0, j1=-1, extremes=1):
    """The per-feature statistics of :func:`cpl_feature_weights` for features ``z0 .. z1-1``.

    Per cluster and feature: sums, minima, maxima, means, centred within sums of squares and
    Gaussian within scores; per feature: totals, mean, total centred sum of squares and the
    complement extremes (``b_feat``, ``b_jext``). Each statistic is accumulated over the rows
    in order and depends on its own feature only, so any split of the features gives the
    same bits.

    ``full`` 0: only the clusters with ``dirty[j] != 0`` are recomputed (rows of the others
    are skipped), and the per-feature totals, mean and total sum of squares (which do not
    depend on the labels) are kept from the buffers; the other clusters' rows of the buffers
    must hold their statistics from an earlier call with the same members and the same
    centroid ``C[j]`` (then they are the same bits: the same rows, in the same order).
    ``full`` 1: everything is computed (``dirty`` ignored).

    ``j0, j1`` (``full`` 0 only): only the changed clusters ``j0 <= j < j1`` are recomputed
    (``j1 = -1``: up to ``k``), so threads given disjoint cluster ranges write disjoint rows
    (:func:`_fw_clusters_par`); ``extremes`` 0 leaves the complement extremes to the caller.
    """
    n = X.shape[0]
    k = cnt.shape[0]
    if j1 < 0:
        j1 = k
    T = b_feat[0]
    mu_all = b_feat[1]
    Qall = b_feat[2]
    # the sums run in buffers local to this column range and are copied out at the end:
    # threads on neighbouring ranges would otherwise write the same cache lines every row
    w = z1 - z0
    l_sum = np.empty((k, w))
    l_q = np.empty((k, w))
    l_g = np.empty((k, w))
    l_mu = np.empty((k, w))
    l_min = np.empty((k, w))
    l_max = np.empty((k, w))
    # only the rows of the clusters that are recomputed are set and read (most of the k slots
    # are dead or unchanged after the first passes: filling all of them cost more than the sums)
    for j in range(j0, j1):
        if cnt[j] > 0 and (full != 0 or dirty[j] != 0):
            for c in range(w):
                l_sum[j, c] = 0.0
                l_q[j, c] = 0.0
                l_g[j, c] = 0.0
                l_min[j, c] = np.inf
                l_max[j, c] = -np.inf
    l_T = np.zeros(w)
    l_Q = np.zeros(w)
    l_mall = np.zeros(w)
    # pass A: sums, extremes, totals
    if full != 0:
        for i in range(n):
            j = y[i]
            for c in range(w):
                x = X[i, z0 + c]
                l_sum[j, c] += x
                l_T[c] += x
                if x < l_min[j, c]:
                    l_min[j, c] = x
                if x > l_max[j, c]:
                    l_max[j, c] = x
        for c in range(w):
            l_mall[c] = l_T[c] / n
    else:
        for i in range(n):
            j = y[i]
            if j < j0 or j >= j1 or dirty[j] == 0:
                continue
            for c in range(w):
                x = X[i, z0 + c]
                l_sum[j, c] += x
                if x < l_min[j, c]:
                    l_min[j, c] = x
                if x > l_max[j, c]:
                    l_max[j, c] = x
    for j in range(j0, j1):
        if cnt[j] > 0 and (full != 0 or dirty[j] != 0):
            m = cnt[j]
            for c in range(w):
                l_mu[j, c] = l_sum[j, c] / m
    # pass B: centred within sums of squares, Gaussian within scores, total spread (the
    # exponential is exp_nonpos: vectorised across the features, within 1 ulp of math.exp, which
    # cost half of a full call here)
    if full != 0:
        for i in range(n):
            j = y[i]
            for c in range(w):
                x = X[i, z0 + c]
                dv = x - l_mu[j, c]
                l_q[j, c] += dv * dv
                dc = x - C[j, z0 + c]
                l_g[j, c] += exp_nonpos(-0.5 * dc * dc)
                da = x - l_mall[c]
                l_Q[c] += da * da
    else:
        for i in range(n):
            j = y[i]
            if j < j0 or j >= j1 or dirty[j] == 0:
                continue
            for c in range(w):
                x = X[i, z0 + c]
                dv = x - l_mu[j, c]
                l_q[j, c] += dv * dv
                dc = x - C[j, z0 + c]
                l_g[j, c] += exp_nonpos(-0.5 * dc * dc)
    for j in range(j0, j1):
        if cnt[j] > 0 and (full != 0 or dirty[j] != 0):
            for c in range(w):
                z = z0 + c
                b_sum[j, z] = l_sum[j, c]
                b_mu[j, z] = l_mu[j, c]
                b_q[j, z] = l_q[j, c]
                b_g[j, z] = l_g[j, c]
                b_min[j, z] = l_min[j, c]
                b_max[j, z] = l_max[j, c]
    if full != 0:
        for c in range(w):
            T[z0 + c] = l_T[c]
            mu_all[z0 + c] = l_mall[c]
            Qall[z0 + c] = l_Q[c]
    if extremes != 0:
        _fw_extremes(cnt, b_min, b_max, b_feat, b_jext, z0, z1)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _fw_extremes(cnt, b_min, b_max, b_feat, b_jext, z0, z1):
    """The complement extremes of features ``z0 .. z1-1`` (``b_feat[3:7]``, ``b_jext``) from the
    non-empty clusters' own minima and maxima (``b_min``, ``b_max``). ``O(k)`` per feature."""
    k = cnt.shape[0]
    # complement extremes from the clusters' own extremes (O(k) per feature, no sort): the
    # complement of j holds the global minimum unless j is the first cluster holding it, whose
    # complement's minimum is the smallest minimum of the other non-empty clusters (NaN: none)
    for z in range(z0, z1):
        j1 = -1
        m1 = np.inf
        m2 = np.nan
        h1 = -1
        x1 = -np.inf
        x2 = np.nan
        for j in range(k):
            if cnt[j] > 0:
                v = b_min[j, z]
                if j1 < 0 or v < m1:
                    if j1 >= 0:
                        m2 = m1
                    m1 = v
                    j1 = j
                elif not v >= m2:  # m2 NaN (first other cluster) or v < m2
                    m2 = v
                v = b_max[j, z]
                if h1 < 0 or v > x1:
                    if h1 >= 0:
                        x2 = x1
                    x1 = v
                    h1 = j
                elif not v <= x2:
                    x2 = v
        b_jext[0, z] = j1
        b_feat[3, z] = m1
        b_feat[4, z] = m2
        b_jext[1, z] = h1
        b_feat[5, z] = x1
        b_feat[6, z] = x2


@numba.njit(parallel=True, cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _fw_columns_par(X, y, cnt, C, b_sum, b_mu, b_q, b_g, b_min, b_max, b_feat, b_jext, P, dirty, full):
    """:func:`_fw_columns` over all features, cut into ``P`` contiguous ranges run in parallel."""
    d = X.shape[1]
    for p in numba.prange(P):
        _fw_columns(X, y, cnt, C, b_sum, b_mu, b_q, b_g, b_min, b_max, b_feat, b_jext,
                    p * d // P, (p + 1) * d // P, dirty, full)


@numba.njit(parallel=True, cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _fw_clusters_par(X, y, cnt, C, b_sum, b_mu, b_q, b_g, b_min, b_max, b_feat, b_jext, bounds, dirty):
    """:func:`_fw_columns` of a later update (``full`` 0) over every feature, for the changed clusters
    of the ranges ``bounds[p] .. bounds[p+1]-1`` run in parallel (each range's rows are one thread's
    work; each cluster's statistics run over its rows in row order, the same bits as one thread),
    then the complement extremes of every feature."""
    d = X.shape[1]
    for p in numba.prange(bounds.shape[0] - 1):
        _fw_columns(X, y, cnt, C, b_sum, b_mu, b_q, b_g, b_min, b_max, b_feat, b_jext, 0, d, dirty, 0,
                    bounds[p], bounds[p + 1], 0)
    _fw_extremes(cnt, b_min, b_max, b_feat, b_jext, 0, d)


#: a later feature-weight update (changed clusters only) splits the clusters between its threads
#: when the client holds at least this many values (rows x features); below, the parallel region
#: costs about what it saves
_FW_SPLIT_MIN = 1 << 16


def _cluster_bounds(cnt, dirty, parts: int) -> np.ndarray:
    """``parts + 1`` non-decreasing cluster ids from 0 to ``k`` cutting the clusters into contiguous
    ranges that hold about equal numbers of rows of changed clusters."""
    k = cnt.shape[0]
    work = np.cumsum(np.where(dirty != 0, cnt, 0))
    total = float(work[-1])
    cuts = np.searchsorted(work, [total * p / parts for p in range(1, parts)], side="left") + 1
    return np.concatenate([[0], np.minimum(cuts, k), [k]]).astype(np.int64)


def cpl_feature_weights(X, y, cnt, C, Mw, live, wnan, theta, reference, eps,
                        b_sum, b_mu, b_q, b_g, b_min, b_max, b_feat, b_jext, keep_singletons=0,
                        n_threads=1, dirty=None):
    """Recompute the feature weights ``Mw`` from the current partition in ``O(n d + k d)``.

    The per-feature statistics come from :func:`_fw_clusters_par` (a later update, ``dirty``
    given, on ``n_threads > 1`` with at least ``_FW_SPLIT_MIN`` values: the changed clusters are
    split between the threads, each walking the rows of its own), :func:`_fw_columns_par`
    (otherwise on ``n_threads > 1`` and ``d > 1``: the features are split, every thread walks
    every row) or :func:`_fw_columns`, chosen here in Python so that a first fit compiles only
    the kernel it runs; :func:`_fw_weights` then turns them into ``Mw``. Every path gives the
    same bits. Parameters and notes: :func:`_fw_weights`.

    ``dirty`` (k,) uint8 or None: None (every statistic computed) or the clusters whose
    members changed since the previous call *with the same buffers* (the others' statistics
    are kept from it, see :func:`_fw_columns`; then ``O(d)`` per row of a changed cluster,
    ``O(1)`` per other row). The weights are the same bits either way.
    """
    d = X.shape[1]
    full = 1 if dirty is None else 0
    if dirty is None:
        dirty = np.ones(cnt.shape[0], dtype=np.uint8)
    if n_threads > 1 and full == 0 and X.shape[0] * d >= _FW_SPLIT_MIN:
        _fw_clusters_par(X, y, cnt, C, b_sum, b_mu, b_q, b_g, b_min, b_max, b_feat, b_jext,
                         _cluster_bounds(cnt, dirty, n_threads), dirty)
    elif n_threads > 1 and d > 1:
        _fw_columns_par(X, y, cnt, C, b_sum, b_mu, b_q, b_g, b_min, b_max, b_feat, b_jext,
                        min(n_threads, d), dirty, full)
    else:
        _fw_columns(X, y, cnt, C, b_sum, b_mu, b_q, b_g, b_min, b_max, b_feat, b_jext, 0, d, dirty, full)
    _fw_weights(X, y, cnt, C, Mw, live, wnan, theta, reference, eps,
                b_sum, b_mu, b_q, b_g, b_min, b_max, b_feat, b_jext, keep_singletons)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _fw_weights(X, y, cnt, C, Mw, live, wnan, theta, reference, eps,
                b_sum, b_mu, b_q, b_g, b_min, b_max, b_feat, b_jext, keep_singletons=0):
    """The feature weights ``Mw`` from the statistics :func:`_fw_columns` left in the buffers.

    Parameters
    ----------
    X : ndarray of shape (n, d), float64. IN.
    y : ndarray of shape (n,), int64. IN, every label in ``0..k-1`` (called after a pass).
    cnt : ndarray of shape (k,), int64. IN, ``cnt[j] == (y == j).sum()``.
    C : ndarray of shape (k, d), float64. IN, running centroids (used by the within score).
    Mw : ndarray of shape (k, d), float64. OUT for the rows that are recomputed. Robust:
        live rows only (dead rows are left untouched). Reference: every row; NaN rows are
        written as NaN.
    live : ndarray of shape (k,), uint8. INOUT. Robust: candidates with ``cnt <= 1`` are
        killed (never the last live one: if no live candidate has 2 members the
        lowest-index live one is kept, with uniform weights). Reference: set to
        ``cnt > 0 and not wnan and theta finite``.
    wnan : ndarray of shape (k,), uint8. OUT (reference): row is NaN.
    theta : ndarray of shape (k,), float64. IN.
    reference : int. 1 = reference semantics, 0 = robust.
    eps : float. Robust zero-variance threshold.
    b_sum, b_mu, b_q, b_g, b_min, b_max : ndarray of shape (k, d), float64. Scratch.
    b_feat : ndarray of shape (7, d), float64. Scratch.
    b_jext : ndarray of shape (2, d), int64. Scratch.
    keep_singletons : int, default 0. Robust only: 1 = a candidate with one member stays
        live (its weights follow the formulas, with variance 0 inside); 0 = it dies, as above.
    (:func:`cpl_feature_weights`'s ``n_threads``: above 1, the per-feature statistics run on
    Numba's threads, features split between them (:func:`_fw_columns_par`; the caller sets
    ``numba.set_num_threads``); every statistic is still accumulated over the rows in order,
    so the result is bit-identical for any thread count.)

    Notes
    -----
    One pass over the rows gives per-cluster sums, minima and maxima and the totals; a second
    gives the centred within sums of squares ``Q_j`` (two-pass, as ``var(ddof=1)``), the
    Gaussian within scores and the total centred sum of squares ``Q``. Out-of-cluster
    statistics come by subtraction: ``mean_out = (T - sum_j) / (n - m)`` and
    ``Q_out = Q - Q_j - m (n - m) / n * (mean_j - mean_out)^2`` (clamped at 0). A set whose
    values on a feature are all equal has variance exactly 0 and mean equal to that value
    (decided from the data, not from rounding): within a cluster from its min and max; for
    the complement from the smallest and largest of the other clusters' extremes (``O(k d)``,
    no sort of the rows).
    """
    n, d = X.shape
    k = cnt.shape[0]
    T = b_feat[0]
    mu_all = b_feat[1]
    Qall = b_feat[2]
    gmin = b_feat[3]
    altmin = b_feat[4]
    gmax = b_feat[5]
    altmax = b_feat[6]
    jlo = b_jext[0]
    jhi = b_jext[1]

    keep = -1
    if reference == 0:
        n_surv = 0
        for j in range(k):
            if live[j] != 0 and (cnt[j] >= 2 or (keep_singletons != 0 and cnt[j] == 1)):
                n_surv += 1
        if n_surv == 0:
            for j in range(k):
                if live[j] != 0:
                    keep = j
                    break

    inv_d = 1.0 / d
    for j in range(k):
        m = cnt[j]
        if reference == 0:
            if live[j] == 0:
                continue
            if m == 0 or (m == 1 and keep_singletons == 0):
                if j == keep:
                    for z in range(d):
                        Mw[j, z] = inv_d
                else:
                    live[j] = 0
                continue
            if n - m < 2:
                for z in range(d):
                    Mw[j, z] = inv_d
                continue
        else:
            if m <= 1 or n - m < 2:
                wnan[j] = 1
                for z in range(d):
                    Mw[j, z] = np.nan
                live[j] = 0
                continue
        no = n - m
        bad = False
        hs = 0.0
        for z in range(d):
            in_const = b_min[j, z] == b_max[j, z]
            if j == jlo[z]:
                cmin = altmin[z]
            else:
                cmin = gmin[z]
            if j == jhi[z]:
                cmax = altmax[z]
            else:
                cmax = gmax[z]
            out_const = cmin == cmax
            if in_const:
                mu = b_min[j, z]
                vi = 0.0
            else:
                mu = b_mu[j, z]
                vi = b_q[j, z] / (m - 1)
            if out_const:
                mub = cmin
                vo = 0.0
            else:
                mub = (T[z] - b_sum[j, z]) / no
                dm = mu - mub
                m2o = Qall[z] - b_q[j, z] - (m * no / n) * dm * dm
                if m2o < 0.0:
                    m2o = 0.0
                vo = m2o / (no - 1)
            vs = vi + vo
            dm = mu - mub
            if reference == 0:
                if vs <= eps:
                    # zero total variance: a = 1, as the reference mostly gets (see below)
                    a = 1.0
                else:
                    bc = math.sqrt(2.0 * math.sqrt(vi) * math.sqrt(vo) / vs) * math.exp(
                        -(dm * dm) / (4.0 * vs))
                    om = 1.0 - bc
                    if om < 0.0:
                        om = 0.0
                    elif om > 1.0:
                        om = 1.0
                    a = math.sqrt(om)
            else:
                if vs == 0.0:
                    # rule (d) of fed_hire.md §3.1.6 (a feature constant on both sides, e.g.
                    # constant in the client): in the authors' code the outcome turns on the
                    # rounding of NumPy's means. Mostly one side's variance comes out exactly
                    # 0 and the other's tiny but positive, so BC = 0 and a = 1; a NaN row
                    # (killing the candidate) is the exception. fastfc takes a = 1. Measured
                    # over seeds 0-39 against the authors' mean ARI (seeds 0-9): NaN rows
                    # give EC -0.09, CA -0.13 (whole clients collapse to one clusterlet);
                    # a = 0 gives YE -0.034; a = 1 gives YE +0.003, EC -0.009, CA +0.018.
                    h = b_g[j, z] / m
                    Mw[j, z] = h
                    hs += h
                    continue
                bc = math.sqrt(2.0 * math.sqrt(vi) * math.sqrt(vo) / vs) * math.exp(
                    -(dm * dm) / (4.0 * vs))
                om = 1.0 - bc
                if not om >= 0.0:
                    bad = True
                    break
                a = math.sqrt(om)
            h = a * (b_g[j, z] / m)
            Mw[j, z] = h
            hs += h
        if reference == 0:
            if hs > 0.0:
                for z in range(d):
                    Mw[j, z] = Mw[j, z] / hs
            else:
                for z in range(d):
                    Mw[j, z] = inv_d
        else:
            if bad or not hs > 0.0:
                wnan[j] = 1
                for z in range(d):
                    Mw[j, z] = np.nan
                live[j] = 0
            else:
                wnan[j] = 0
                for z in range(d):
                    Mw[j, z] = Mw[j, z] / hs
                live[j] = 1 if theta[j] == theta[j] else 0


# --------------------------------------------------------------------------------------------
# CPL: objective (GOLD Eq. 6 with the normalised similarity of Eq. 22)
# --------------------------------------------------------------------------------------------
@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _objective_rows(X, y, C, Mw, usable, act_idx, i0, i1, out):
    """``out[i]`` = row ``i``'s term of :func:`cpl_objective` (0 when it adds nothing), ``i0 <= i < i1``."""
    d = X.shape[1]
    small = d <= 128
    tmp = np.empty(d)
    stk = np.empty((3, 64), dtype=np.int64)
    stv = np.empty(64)
    for i in range(i0, i1):
        yi = y[i]
        mx = -np.inf
        acc = 0.0
        own = -np.inf
        for t in range(act_idx.shape[0]):
            j = act_idx[t]
            if small:
                lj = -0.5 * _pw_leaf(X, i, C, Mw, j, 0, d)
            else:
                lj = -0.5 * _sq_dist_any(X, i, C, Mw, j, tmp, stk, stv)
            if j == yi:
                own = lj
            if lj > mx:
                acc = acc * math.exp(mx - lj) + 1.0
                mx = lj
            else:
                acc += math.exp(lj - mx)
        if yi >= 0 and usable[yi] != 0 and acc > 0.0:
            out[i] = math.exp(own - mx) / acc
        else:
            out[i] = 0.0


@numba.njit(parallel=True, cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _objective_rows_par(X, y, C, Mw, usable, act_idx, P, out):
    """:func:`_objective_rows` over all rows, cut into ``P`` contiguous parts run in parallel."""
    n = X.shape[0]
    for p in numba.prange(P):
        _objective_rows(X, y, C, Mw, usable, act_idx, p * n // P, (p + 1) * n // P, out)


def cpl_objective(X, y, C, Mw, usable, act_idx, n_threads=1):
    """``J = sum_i s_(i, y_i) / sum_t s_(i, t)`` with ``s_(i, t) = exp(-D_(i, t) / 2)``.

    ``usable`` (k,) uint8 IN: candidates with members and a finite weight row (the others
    have ``s = 0``); ``act_idx`` (k_a,) int64 IN: the usable ids. Computed in the log domain
    (log-sum-exp), so it never underflows; a sample whose own cluster is not usable adds 0.
    ``O(n k_a d)``. ``n_threads`` above 1: the per-row terms are computed on Numba's threads
    (rows cut into contiguous parts; the caller sets ``numba.set_num_threads``) and summed
    afterwards in row order, so ``J`` is bit-identical for any thread count. The serial or
    parallel kernel is chosen here, in Python, so a first fit compiles only the one it runs.
    """
    n = X.shape[0]
    out = np.empty(n)
    if n_threads > 1 and n >= _PAR_MIN_OBJ_ROWS:
        _objective_rows_par(X, y, C, Mw, usable, act_idx, n_threads, out)
    else:
        _objective_rows(X, y, C, Mw, usable, act_idx, 0, n, out)
    return _sum_in_order(out)


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _sum_in_order(a):
    """``a[0] + a[1] + ...`` from the left (one running float64 sum)."""
    J = 0.0
    for i in range(a.shape[0]):
        J += a[i]
    return J


#: fewest rows for which :func:`cpl_objective` runs its rows in parallel
_PAR_MIN_OBJ_ROWS = 4096


# --------------------------------------------------------------------------------------------
# weighted k-modes (fed_hire.md §3.5, GOLD REMC §3.4)
# --------------------------------------------------------------------------------------------
@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def kmodes_stats(Z, labels, offsets, hist, first, counts, tot):
    """Per-cluster value histograms of every level.

    Parameters
    ----------
    Z : ndarray of shape (n, L), int64. IN, compact codes: column ``l`` in
        ``0..offsets[l+1]-offsets[l]-1``.
    labels : ndarray of shape (n,), int64. IN, in ``0..k-1``.
    offsets : ndarray of shape (L + 1,), int64. IN, histogram column of value ``v`` of
        level ``l`` is ``offsets[l] + v``.
    hist : ndarray of shape (k, V), int64. OUT, member counts per value.
    first : ndarray of shape (k, V), int64. OUT, smallest member row holding the value
        (``n`` when none).
    counts : ndarray of shape (k,), int64. OUT, cluster sizes.
    tot : ndarray of shape (V,), int64. OUT, counts over all rows.
    """
    n, L = Z.shape
    k, V = hist.shape
    for j in range(k):
        counts[j] = 0
        for c in range(V):
            hist[j, c] = 0
            first[j, c] = n
    for c in range(V):
        tot[c] = 0
    for i in range(n):
        j = labels[i]
        counts[j] += 1
        for l in range(L):
            c = offsets[l] + Z[i, l]
            if hist[j, c] == 0:
                first[j, c] = i
            hist[j, c] += 1
            tot[c] += 1


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def kmodes_modes(hist, first, offsets, counts, modes):
    """Mode of every level in every cluster; ``modes`` (k, L) int64 OUT.

    Most frequent value; ties go to the value whose first member row is smallest (Python
    ``statistics.mode`` on the members in increasing row order). Empty cluster: ``-1``
    everywhere (matches nothing).
    """
    k, L = modes.shape
    for j in range(k):
        if counts[j] == 0:
            for l in range(L):
                modes[j, l] = -1
            continue
        for l in range(L):
            best = -1
            bc = 0
            bf = 0
            for v in range(offsets[l + 1] - offsets[l]):
                c = hist[j, offsets[l] + v]
                f = first[j, offsets[l] + v]
                if c > 0 and (c > bc or (c == bc and f < bf)):
                    best = v
                    bc = c
                    bf = f
            modes[j, l] = best


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def kmodes_weights(hist, offsets, counts, tot, n, u):
    """Level weights ``u`` (k, L) float64 OUT (fed_hire.md §3.5 step 3).

    ``alpha = sqrt(1/2 sum_v (p_in - p_out)^2)``, ``beta = sum_v p_in^2``,
    ``u = alpha beta / (sum_t alpha_t beta_t + 1e-10)``; a cluster with 0 or ``n`` members
    gets a zero row. Sums run in value and level order.
    """
    k, L = u.shape
    for j in range(k):
        m = counts[j]
        if m == 0 or m == n:
            for l in range(L):
                u[j, l] = 0.0
            continue
        den = 0.0
        for l in range(L):
            s2 = 0.0
            bsum = 0.0
            for v in range(offsets[l + 1] - offsets[l]):
                c = offsets[l] + v
                pin = hist[j, c] / m
                pout = (tot[c] - hist[j, c]) / (n - m)
                dp = pin - pout
                s2 += dp * dp
                bsum += pin * pin
            ab = math.sqrt(0.5 * s2) * bsum
            u[j, l] = ab
            den += ab
        den += 1e-10
        for l in range(L):
            u[j, l] = u[j, l] / den


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def kmodes_assign(Z, modes, u, labels):
    """``labels[i] = argmax_j sum_l u[j, l] [Z[i, l] == modes[j, l]]``, ties to the lowest j.

    ``labels`` (n,) int64 OUT. Returns the number of labels that changed. ``O(n k L)``.
    """
    n, L = Z.shape
    k = modes.shape[0]
    n_changed = 0
    for i in range(n):
        best = -np.inf
        bj = 0
        for j in range(k):
            s = 0.0
            for l in range(L):
                if Z[i, l] == modes[j, l]:
                    s += u[j, l]
            if s > best:
                best = s
                bj = j
        if labels[i] != bj:
            n_changed += 1
            labels[i] = bj
    return n_changed


# --------------------------------------------------------------------------------------------
# a client's standardisation (fastfc._units.standardize_rows), in NumPy's order
# --------------------------------------------------------------------------------------------
@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def col_moments(X, mean, var):
    """``mean[z]``, ``var[z]`` (population) of every column of ``X`` (n, d) float64 C-contiguous IN,
    n >= 1, as ``X.mean(axis=0)`` and ``X.var(axis=0)`` compute them (the same bits): every column
    summed row by row from its first row (:func:`col_sums_rows` over all rows), divided by ``n``;
    the variance from the squared deviations to that mean (:func:`col_sqdev_rows`)."""
    n = X.shape[0]
    col_sums_rows(X, 0, n, mean)
    for z in range(X.shape[1]):
        mean[z] = mean[z] / n
    col_sqdev_rows(X, mean, 0, n, var)
    for z in range(X.shape[1]):
        var[z] = var[z] / n


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def col_sums_rows(X, i0, i1, out):
    """``out[z] = X[i0, z] + X[i0 + 1, z] + ... + X[i1 - 1, z]``, added row by row from row ``i0``
    (``X[i0:i1].sum(axis=0)``'s order for a C-contiguous ``X``). ``X`` (n, d) float64 C-contiguous IN,
    ``0 <= i0 < i1 <= n``; ``out`` (d,) float64 OUT. One part of a large client's moments
    (:func:`fastfc._units.col_moments_split`). The sums run in a local buffer."""
    d = X.shape[1]
    acc = np.empty(d)
    for z in range(d):
        acc[z] = X[i0, z]
    for i in range(i0 + 1, i1):
        for z in range(d):
            acc[z] += X[i, z]
    for z in range(d):
        out[z] = acc[z]


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def col_sqdev_rows(X, mean, i0, i1, out):
    """``out[z]`` = the sum over rows ``i0 <= i < i1`` of ``(X[i, z] - mean[z]) ** 2``, added row by row
    from row ``i0`` (``((X[i0:i1] - mean) ** 2).sum(axis=0)``'s values). ``X`` (n, d) float64
    C-contiguous IN, ``0 <= i0 < i1 <= n``; ``mean`` (d,) IN; ``out`` (d,) float64 OUT."""
    d = X.shape[1]
    acc = np.empty(d)
    for z in range(d):
        e = X[i0, z] - mean[z]
        acc[z] = e * e
    for i in range(i0 + 1, i1):
        for z in range(d):
            e = X[i, z] - mean[z]
            acc[z] += e * e
    for z in range(d):
        out[z] = acc[z]


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def shift_weight_rows(X, shift, weight, Z, i0, i1):
    """``Z[i, z] = (X[i, z] - shift[z]) * weight[z]`` for rows ``i0 <= i < i1``, in one pass (the values
    of NumPy's ``np.subtract(X, shift, out=Z); Z *= weight``: each step rounded as there). ``X``, ``Z``
    (n, d) float64 C-contiguous; ``shift``, ``weight`` (d,) float64."""
    d = X.shape[1]
    for i in range(i0, i1):
        for z in range(d):
            Z[i, z] = (X[i, z] - shift[z]) * weight[z]


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def _shift_scale(X, mean, scale, Z, i0, i1):
    """``Z[i, z] = (X[i, z] - mean[z]) / scale[z]`` for rows ``i0 <= i < i1`` (as NumPy)."""
    d = X.shape[1]
    for i in range(i0, i1):
        for z in range(d):
            Z[i, z] = (X[i, z] - mean[z]) / scale[z]


@numba.njit(cache=NUMBA_CACHE, nogil=True, error_model="numpy")
def shift_scale_rows(X, mean, scale, Z):
    """``Z[i, z] = (X[i, z] - mean[z]) / scale[z]`` (elementwise, as NumPy). ``Z`` (n, d) float64 OUT."""
    _shift_scale(X, mean, scale, Z, 0, X.shape[0])
