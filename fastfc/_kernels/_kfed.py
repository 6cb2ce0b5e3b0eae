"""Numba kernels of k-FED's client step (the Awasthi–Sheffet start): D^2 seeding and the proximity step.

Numeric work only: every kernel takes validated, C-contiguous float64 arrays plus preallocated
outputs, never validates, never touches an RNG (uniforms are drawn by the caller, in the
published order) and releases the GIL. Orchestration lives in :mod:`fastfc.kfed`.

They replace NumPy passes that spent most of a small client's time in per-call overhead, and
they compute the same bits as those passes: a row's squared distance is summed in NumPy's
order (``((A - a) ** 2).sum(1)`` reduces each row with NumPy's pairwise summation, which
:func:`_row_sqdist` reproduces), cumulative sums are sequential as ``np.cumsum``, the draw is
``np.searchsorted(cum, u * total, side="right")``, and the proximity sums accumulate in row
order as ``np.add.at`` does.

* :func:`d2_seed_steps` -- k-means++ D^2 seeding steps (one candidate per step) from pre-drawn uniforms.
* :func:`proximity_sums` -- the 1/3-proximity sets of the seeds: their sizes and row sums.
"""
from __future__ import annotations

import numba
import numpy as np

from fastfc._config import NUMBA_CACHE
from fastfc._kernels._cpl import _pw_sum

__all__ = ["d2_seed_steps", "proximity_sums", "nearest_two_roots", "row_sqdist_to"]

#: NumPy's pairwise-summation block (``PW_BLOCKSIZE`` of its add reduction)
_PW_BLOCK = 128


# NumPy's pairwise-sum leaf over ``buf[lo:lo + n]`` (n <= 128): the CPL kernels' copy of it, the same algorithm
_pairwise_block = _pw_sum


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def _pairwise_sum(buf, lo, n):
    """NumPy's pairwise sum of ``buf[lo:lo + n]`` (float64 add reduction along a contiguous axis).

    Up to 128 terms one block (:func:`_pairwise_block`); above, NumPy splits at half (rounded
    down to a multiple of 8) and adds the two halves' sums. That recursion is evaluated here
    with an explicit stack (a cached Numba kernel cannot call itself); the sum of two values
    does not depend on which is computed first, so the result is NumPy's.
    """
    if n <= _PW_BLOCK:
        return _pairwise_block(buf, lo, n)
    st_lo = np.empty(256, dtype=np.int64)
    st_n = np.empty(256, dtype=np.int64)
    st_open = np.zeros(256, dtype=np.bool_)
    vals = np.empty(256, dtype=np.float64)
    top = 0
    nv = 0
    st_lo[0] = lo
    st_n[0] = n
    st_open[0] = False
    top = 1
    while top > 0:
        top -= 1
        a = st_lo[top]
        m = st_n[top]
        if m <= _PW_BLOCK:
            vals[nv] = _pairwise_block(buf, a, m)
            nv += 1
        elif st_open[top]:  # both halves summed: combine them
            nv -= 1
            vals[nv - 1] = vals[nv - 1] + vals[nv]
        else:
            m2 = m // 2
            m2 -= m2 % 8
            st_open[top] = True
            top += 1
            st_lo[top] = a
            st_n[top] = m2
            st_open[top] = False
            top += 1
            st_lo[top] = a + m2
            st_n[top] = m - m2
            st_open[top] = False
            top += 1
    return vals[0]


@numba.njit(cache=NUMBA_CACHE, nogil=True, inline="always")
def _row_sqdist(A, i, B, j, buf):
    """``((A[i] - B[j]) ** 2).sum()`` with NumPy's rounding.

    ``buf``: scratch of ``max(8, A.shape[1])`` floats. Rows of up to 128 values are one
    pairwise block, summed as they are squared (eight partial sums in ``buf[:8]``); longer
    rows are squared into ``buf`` and summed by :func:`_pairwise_sum`.
    """
    r = A.shape[1]
    if r < 8:
        res = 0.0
        for c in range(r):
            diff = A[i, c] - B[j, c]
            res += diff * diff
        return res
    if r <= _PW_BLOCK:
        m = r - r % 8
        for q in range(8):
            diff = A[i, q] - B[j, q]
            buf[q] = diff * diff
        for c in range(8, m, 8):
            for q in range(8):
                diff = A[i, c + q] - B[j, c + q]
                buf[q] += diff * diff
        res = ((buf[0] + buf[1]) + (buf[2] + buf[3])) + ((buf[4] + buf[5]) + (buf[6] + buf[7]))
        for c in range(m, r):
            diff = A[i, c] - B[j, c]
            res += diff * diff
        return res
    for c in range(r):
        diff = A[i, c] - B[j, c]
        buf[c] = diff * diff
    return _pairwise_sum(buf, 0, r)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def _sqdist_cols(At, m, b, out, S):
    """``out[i] = ((At[:, i] - b) ** 2).sum()`` for ``i < m``, with :func:`_row_sqdist`'s rounding.

    The same operations per row in the same order (up to 7 features: one running sum from 0;
    8 to 128: eight partial sums, combined pairwise, then the remainder), but each step runs
    over all ``m`` rows at once from the feature-major block ``At`` (r, >= m), so the rows'
    independent sums fill vector lanes instead of one row's chain of dependent additions
    (issue 15). ``S``: scratch (8, >= m). Only for r <= 128.
    """
    r = At.shape[0]
    if r < 8:
        for i in range(m):
            out[i] = 0.0
        for c in range(r):
            bc = b[c]
            for i in range(m):
                t = At[c, i] - bc
                out[i] += t * t
        return
    for q in range(8):
        bc = b[q]
        for i in range(m):
            t = At[q, i] - bc
            S[q, i] = t * t
    mm = r - r % 8
    for c in range(8, mm, 8):
        for q in range(8):
            bc = b[c + q]
            for i in range(m):
                t = At[c + q, i] - bc
                S[q, i] += t * t
    for i in range(m):
        out[i] = ((S[0, i] + S[1, i]) + (S[2, i] + S[3, i])) + ((S[4, i] + S[5, i]) + (S[6, i] + S[7, i]))
    for c in range(mm, r):
        bc = b[c]
        for i in range(m):
            t = At[c, i] - bc
            out[i] += t * t


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def row_sqdist_to(A, p, out, buf):
    """``out[i] = ((A[i] - A[p]) ** 2).sum()`` for every row (NumPy's rounding).

    Parameters
    ----------
    A : ndarray of shape (n, r), float64
    p : int
        Row of ``A`` to measure from.
    out : ndarray of shape (n,), float64
        Output.
    buf : ndarray of shape (max(8, r),), float64
        Scratch.
    """
    for i in range(A.shape[0]):
        out[i] = _row_sqdist(A, i, A, p, buf)


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def d2_seed_steps(A, idx, uniforms, closest, col, cum, buf):
    """D^2 seeding steps 1.. of :func:`fastfc.kfed.d2_seed_rows`, until one finds no mass.

    Parameters
    ----------
    A : ndarray of shape (n, r), float64
        Rows to seed from.
    idx : ndarray of shape (k,), intp
        Seed rows; ``idx[0]`` is set by the caller, ``idx[1:]`` are written here.
    uniforms : ndarray of shape (k - 1,), float64
        The uniform draw of each step, in order (step ``j`` uses ``uniforms[j - 1]``).
    closest, col, cum : ndarray of shape (n,), float64
        Scratch: on return ``closest`` holds every row's squared distance to its nearest seed
        of the steps done.
    buf : ndarray of shape (max(8, r),), float64
        Scratch.

    Returns
    -------
    done : int
        Number of seeds set (``k`` when every step found mass). When it is ``j < k``, step
        ``j`` found all remaining mass zero (duplicate rows) and drew nothing: the caller
        takes over from there, with ``uniforms[j - 1:]`` unused.
    """
    n = A.shape[0]
    k = idx.shape[0]
    r = A.shape[1]
    cols = r <= _PW_BLOCK  # every row's distance at once from a feature-major copy (the same bits)
    if cols:
        At = np.empty((r, n))  # feature-major copy of A
        for i in range(n):
            for c in range(r):
                At[c, i] = A[i, c]
        S = np.empty((8 if r >= 8 else 0, n))
        _sqdist_cols(At, n, A[idx[0]], closest, S)
    else:
        row_sqdist_to(A, idx[0], closest, buf)
    for j in range(1, k):
        acc = 0.0
        for i in range(n):  # np.cumsum: a sequential running sum
            acc += closest[i]
            cum[i] = acc
        total = cum[n - 1]
        if not total > 0.0:
            return j
        v = uniforms[j - 1] * total
        lo = 0
        hi = n
        while lo < hi:  # np.searchsorted(cum, v, side="right"): the first i with cum[i] > v
            mid = (lo + hi) >> 1
            if cum[mid] <= v:
                lo = mid + 1
            else:
                hi = mid
        pick = min(lo, n - 1)
        idx[j] = pick
        if cols:
            _sqdist_cols(At, n, A[pick], col, S)
        else:
            row_sqdist_to(A, pick, col, buf)
        for i in range(n):
            if col[i] < closest[i]:
                closest[i] = col[i]
    return k


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def nearest_two_roots(D, i, k):
    """Over the roots ``sqrt(D[:k, i])``: the first index of the smallest, the smallest, the second smallest.

    The same as one pass over the roots keeping the first strict minimum and the runner-up (a
    stable sort), with two square roots instead of ``k``: ``sqrt`` is monotone, so the roots
    of the two smallest squared values (as a multiset) are the two smallest roots; only the
    index needs care, as an earlier squared value just above the smallest can have the same
    root (only values within a relative ``2**-40`` can: roots of values ``2**-50`` apart
    relatively already differ), so those few are compared by their roots.

    Returns
    -------
    near : int
    best, second : float
        ``inf`` when there are fewer values.
    """
    s1 = np.inf
    s2 = np.inf
    near = 0
    for j in range(k):
        v = D[j, i]
        if v < s1:
            s2 = s1
            s1 = v
            near = j
        elif v < s2:
            s2 = v
    best = np.sqrt(s1)
    second = np.sqrt(s2)
    lim = s1 + s1 * 2.0 ** -40
    for j in range(near):
        v = D[j, i]
        if v <= lim and np.sqrt(v) == best:
            return j, best, second
    return near, best, second


@numba.njit(cache=NUMBA_CACHE, nogil=True)
def proximity_sums(A, seeds, counts, sums, buf, D):
    """Sizes and row sums of the 1/3-proximity sets of ``seeds`` (k-FED's Awasthi–Sheffet step).

    Row ``i`` joins the set of its nearest seed ``r`` (ties: the lowest index) when
    ``3 |a_i - nu_r| <= |a_i - nu_s|`` for the second-nearest ``s`` (every row when there is
    one seed). Distances are ``sqrt`` of NumPy-rounded squared distances, as the NumPy pass.

    Parameters
    ----------
    A : ndarray of shape (n, r), float64
    seeds : ndarray of shape (k, r), float64
    counts : ndarray of shape (k,), int64
        Output (overwritten).
    sums : ndarray of shape (k, r), float64
        Output (overwritten): rows added in row order.
    buf : ndarray of shape (max(8, r),), float64
        Scratch.
    D : ndarray of shape (k, b), float64, b >= 1
        Scratch: squared distances of a block of ``b`` rows to each seed (computed seed by
        seed over all the block's rows at once, from a feature-major copy of the block).
    """
    n = A.shape[0]
    k = seeds.shape[0]
    r = A.shape[1]
    b = D.shape[1]
    counts[:] = 0
    sums[:, :] = 0.0
    cols = r <= _PW_BLOCK  # a block's distances from a feature-major copy (the same bits, vector lanes)
    At = np.empty((r if cols else 0, b))
    S = np.empty((8 if cols and r >= 8 else 0, b))
    for s in range(0, n, b):
        e = min(n, s + b)
        if cols:
            for i in range(s, e):  # feature-major copy of the block
                for c in range(r):
                    At[c, i - s] = A[i, c]
            for j in range(k):
                _sqdist_cols(At, e - s, seeds[j], D[j], S)
        else:
            for j in range(k):
                for i in range(s, e):
                    D[j, i - s] = _row_sqdist(A, i, seeds, j, buf)
        for i in range(s, e):
            near, best, second = nearest_two_roots(D, i - s, k)
            if k == 1 or 3.0 * best <= second:
                counts[near] += 1
                for c in range(r):
                    sums[near, c] += A[i, c]
