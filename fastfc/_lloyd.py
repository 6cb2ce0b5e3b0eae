"""Per-client statistics of one round of federated Lloyd (k-means) refinement.

Each round every client labels its rows by the nearest current global centre and
uploads, per cluster, the row count, the sum of the rows and the sum of their
squared distances; the server adds them up and moves every centre to
``sum / count``. :func:`lloyd_stats` computes one client's statistics in one
pass over its rows with the compiled kernel
:func:`fastfc._kernels._assign.lloyd_stats_kernel` (assignment and accumulation
fused per chunk of rows, ``nogil``, deterministic for any thread count); this
module only validates.
"""
from __future__ import annotations

import contextlib
import math
import time

import numpy as np

from ._assign import GEMM_MIN_FEATURES, _as_float_2d, gemm_norms
from ._kernels._assign import lloyd_round_clients_kernel, lloyd_round_kernel, lloyd_stats_kernel
from ._parallel import kernel_threads, limit_blas_threads

__all__ = ["lloyd_stats", "lloyd_stats_clients", "n_blocks", "use_fma_screen", "use_screen"]

#: rows per chunk: a chunk's rows (float64) and its distance products stay in L2
LLOYD_CHUNK = 256
#: at most this many blocks (partial statistics) per call
MAX_BLOCKS = 64
#: a block holds at least this many chunks (unless the rows are fewer)
MIN_CHUNKS_PER_BLOCK = 4
#: the partial sums of all blocks hold at most about this many float64 values (32 MB)
PARTIAL_BUDGET = 1 << 22
#: float32 rows are screened in float32 when the centred centres' norms are below this
#: (products of float32 operands then stay far below the float32 range; the kernel
#: checks the rows' norms chunk by chunk and falls back to float64 where needed)
F32_SCREEN_MAX_NORM = 1e17
#: past 128 features, refinement rounds screen with fused multiply-adds (not BLAS) below this many
#: features x centres
FMA_SCREEN_MAX_DK = 65536


def use_screen(n_features: int, n_clusters: int) -> bool:
    """Whether rows are labelled through the BLAS screen rather than the direct loop.

    Both give the same labels and distances bit for bit (see
    :func:`fastfc._assign.assign_nearest`); only speed differs. Fused with the
    accumulation, the screen is the faster one from 8 features and 2 centres on
    (``benchmarks/lloyd_pass.py``), a lower threshold than ``assign_nearest``'s.
    """
    return n_features >= GEMM_MIN_FEATURES and n_clusters >= 2


def use_fma_screen(n_features: int, n_clusters: int) -> bool:
    """Whether a refinement round screens with fused multiply-adds rather than with BLAS.

    The FMA screen (``lloyd_round_kernel``'s ``fma``: the rows in the lanes of AVX-512
    vectors, the products by fused multiply-adds, on CPUs with AVX-512 and FMA; elsewhere
    the kernel keeps the BLAS screen) gives the same labels, counts, sums and inertia; only
    speed differs. It is the faster one up to 128 features and, past that, below
    ``FMA_SCREEN_MAX_DK`` features x centres, where small BLAS products spend much of their time
    packing the rows (CPU time, one thread: 20000 x 256 rows, 256 centres: FMA 1.35x / 1.17x BLAS's
    in float64 / float32; 128 features, 512 centres 0.82x / 0.62x; 100 features, 64 centres
    0.73x / 0.63x; 16 features, 256 centres 0.23x / 0.15x).
    """
    return n_features <= 128 or n_features * n_clusters < FMA_SCREEN_MAX_DK


def n_blocks(n_samples: int, n_clusters: int, n_features: int) -> int:
    """Number of blocks (independent partial statistics) the rows are cut into.

    It depends on the shape only, never on the thread count, so the summation
    order, hence every bit of the result, is the same for any ``n_jobs``.

    Parameters
    ----------
    n_samples, n_clusters, n_features : int

    Returns
    -------
    int
        ``min(ceil(n_chunks / 4), 64, max(2, 2**22 // (n_clusters * n_features)))`` with
        ``n_chunks = ceil(n_samples / 256)`` (blocks of at least 4 chunks, so that small
        clients do not pay for many partials); 0 when there are no rows.
    """
    n_chunks = -(-n_samples // LLOYD_CHUNK)
    return min(-(-n_chunks // MIN_CHUNKS_PER_BLOCK), MAX_BLOCKS,
               max(2, PARTIAL_BUDGET // max(n_clusters * n_features, 1)))


def lloyd_stats(X, centers, weight=None, *, n_jobs=1, exact_inertia=True
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-cluster counts, sums and inertia of the rows for the given centres (one Lloyd step).

    Row ``x`` belongs to the centre ``c`` minimising ``|| (x - c) * weight ||^2``
    (ties to the lowest index): exactly the labels of
    :func:`fastfc._units.nearest_weighted` ``(X, centers, weight)`` for float64
    ``centers``. One pass over the rows: per chunk of 256 rows, the chunk is
    copied to a small float64 buffer (multiplied by ``weight``), labelled with
    the same arithmetic as :func:`fastfc._assign.assign_nearest` (the direct
    loop, or from 8 features a BLAS screen that keeps every centre a rigorous
    rounding bound cannot exclude and decides by the exact distances; float32
    rows are screened in float32 on coordinates centred at the centres' mean),
    and added to its block's partial statistics; the (at most 64) blocks depend
    on the shape only and are added in order, so the result is bit-identical
    for any ``n_jobs``.

    The distances and the labels are the float64 ones even for float32 rows;
    the sums are float64 sums of the raw values.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The client's rows; float32 and float64 are read as they are (any
        strides, never copied as a whole, never modified), other numeric
        dtypes are converted to float64.
    centers : array-like of shape (n_clusters, n_features)
        Current centres in raw units; converted to float64.
    weight : array-like of shape (n_features,), optional
        Non-negative finite factor of each feature in distances; ``None`` or an
        empty array means raw units.
    n_jobs : int or None, default=1
        Threads of the kernel (``None`` = 1, ``-1`` = all cores; one thread for fewer than
        :data:`fastfc._parallel.PARALLEL_MIN_WORK` rows x centres x features). BLAS is held
        to one thread meanwhile (a process-wide limit: callers running several
        clients in threads should hold ``fastfc._parallel.limit_blas_threads(1)``
        around them, as fastfc's estimators do).
    exact_inertia : bool, default=True
        False: the refinement rounds' faster variant (on the screen paths, from
        8 features and 2 centres; the direct loop is unchanged; on CPUs with AVX-512
        and FMA the screen runs in vector lanes with fused multiply-adds, see
        :func:`use_fma_screen`, else with BLAS). Labels, counts and sums stay bit-identical; a row the screen decides alone gets no exact
        distance, and ``inertia[c]`` is derived from the cluster's moments,
        ``Q_c - 2 (c_c - mu) . (w S_c - n_c mu) + n_c ||c_c - mu||^2`` (``Q_c``: the
        rows' ``||x w - mu||^2``, ``S_c`` their raw sum, ``mu`` the centres' mean,
        all in distance units; clipped at 0), within the rounding bound of
        :func:`moment_inertia_bound` of the exact sum.

    Returns
    -------
    counts : ndarray of shape (n_clusters,), int64
        Rows nearest to each centre.
    sums : ndarray of shape (n_clusters, n_features), float64
        Sum of those rows in raw units (not weighted), accumulated in float64.
    inertia : ndarray of shape (n_clusters,), float64
        Sum of their minimal (weighted) squared distances.

    Raises
    ------
    ValueError
        Wrong dimensions, mismatched ``n_features``, no centres, NaN/infinity
        in ``X``, ``centers`` or ``weight``, a negative weight or a weight of
        the wrong shape, or a float64 overflow of the sums or distances.
    TypeError
        Non-numeric ``X``, ``centers`` or ``weight``.
    """
    X = _check_rows(X)
    C = _as_float_2d("centers", centers, np.float64)
    n, d = X.shape
    k = C.shape[0]
    C, w, weighted = _check_centers_weight(C, d, weight)
    n_threads = kernel_threads(n_jobs, n * k * d)  # a small pass on one thread (the same bits)
    counts = np.zeros(k, dtype=np.int64)
    sums = np.zeros((k, d), dtype=np.float64)
    inertia = np.zeros(k, dtype=np.float64)
    if n == 0:
        return counts, sums, inertia
    if not exact_inertia and use_screen(d, k):
        return _round_stats(X, C, w, weighted, n_threads)
    path = 0
    cn, cmax = np.zeros(k), 0.0
    mu, mu_norm, Cs32, cns, cmaxs = np.zeros(d), 0.0, np.zeros((k, d), dtype=np.float32), np.zeros(k), 0.0
    if use_screen(d, k):
        path = 1
        cn, cmax = gemm_norms(C)
        if X.dtype == np.float32:
            # float32 rows: screen in float32 on coordinates centred at the centres' mean
            mu = C.mean(axis=0)
            Cs = C - mu
            cns, cmaxs = gemm_norms(Cs)
            if cmaxs < F32_SCREEN_MAX_NORM:
                path = 2
                Cs32 = Cs.astype(np.float32)
                mu_norm = float(np.sqrt(mu @ mu)) * (1.0 + 1e-5) + 1e-30
    CT = np.ascontiguousarray(C.T)
    # the kernel's threads are ours (n_jobs); each runs its own small products on one BLAS thread
    with limit_blas_threads(1) if path else contextlib.nullcontext():
        ok = lloyd_stats_kernel(X, C, CT, cn, cmax, mu, mu_norm, Cs32, cns, cmaxs, w, weighted, path,
                                counts, sums, inertia, n_blocks(n, k, d), n_threads, LLOYD_CHUNK)
    if not ok:
        raise MemoryError("lloyd_stats: could not allocate the per-block work buffers")
    # every row is added to exactly one cluster's sums, so a NaN/inf in X shows up there:
    # the full finiteness check of X runs only then (one pass over the rows otherwise)
    if not (np.isfinite(sums).all() and np.isfinite(inertia).all()):
        if not np.isfinite(X).all():
            raise ValueError("X contains NaN or infinity")
        raise ValueError("lloyd_stats: the sums or squared distances overflow float64; rescale the data")
    return counts, sums, inertia


def _round_stats(X, C, w, weighted, n_threads):
    """:func:`lloyd_stats` with ``exact_inertia=False`` on a screen path (C already in distance units)."""
    n, d = X.shape
    k = C.shape[0]
    ops = _round_operands(C, w, weighted, X.dtype == np.float32)
    counts = np.zeros(k, dtype=np.int64)
    sums = np.zeros((k, d), dtype=np.float64)
    qsum = np.zeros(k, dtype=np.float64)
    with limit_blas_threads(1):
        ok = lloyd_round_kernel(X, ops.args, counts, sums, qsum, n_blocks(n, k, d), n_threads, LLOYD_CHUNK)
    if not ok:
        raise MemoryError("lloyd_stats: could not allocate the per-block work buffers")
    if not (np.isfinite(sums).all() and np.isfinite(qsum).all()):
        _raise_not_finite(X)
    # sum of (x w - mu) per cluster (counts cast to float64 first: the values of int64 * float64, faster)
    dev = np.multiply(counts.astype(np.float64)[:, None], ops.mu)
    np.subtract(sums * w if weighted else sums, dev, out=dev)
    inertia = qsum - 2.0 * np.einsum("ij,ij->i", ops.Cs, dev) + counts * ops.cns
    return counts, sums, np.maximum(inertia, 0.0)


def _raise_not_finite(X):
    if not np.isfinite(X).all():
        raise ValueError("X contains NaN or infinity")
    raise ValueError("lloyd_stats: the sums or squared distances overflow float64; rescale the data")


class _RoundOperands:
    """The centre-side operands of :func:`fastfc._kernels._assign.lloyd_round_kernel` for one round and one row
    dtype: ``args`` (the kernel's ``ops`` tuple), and ``mu``, ``Cs``
    (the centred centres) and ``cns`` (their squared norms) for the inertia."""

    __slots__ = ("args", "mu", "Cs", "cns")

    def __init__(self, args, mu, Cs, cns):
        self.args, self.mu, self.Cs, self.cns = args, mu, Cs, cns


def _round_operands(C, w, weighted, f32: bool) -> _RoundOperands:
    """The operands of a round for centres ``C`` (distance units) and float32 (``f32``) or float64 rows: a
    function of the centres, the weights and the rows' dtype alone, so one round prepares them once for all
    its clients."""
    k = C.shape[0]
    B64 = np.ascontiguousarray(C * w) if weighted else C
    # gemm_norms(C), gemm_norms(C - mu) and C.mean(axis=0), inlined (the same operations, hence bits)
    e64 = np.einsum("ij,ij->i", C, C)
    cmax = math.sqrt(e64.max()) * (1.0 + 1e-5) + 1e-30
    mu = np.add.reduce(C, axis=0) / k
    Cs = C - mu
    cns = np.einsum("ij,ij->i", Cs, Cs)
    cmaxs = math.sqrt(cns.max()) * (1.0 + 1e-5) + 1e-30
    mu_norm = math.sqrt(mu @ mu) * (1.0 + 1e-5) + 1e-30
    path = 1
    B32, e32, BT32, e32f = _NO_B32, _NO_E32, _NO_B32, _NO_E32F
    if f32 and cmaxs < F32_SCREEN_MAX_NORM:
        Bs = Cs * w if weighted else Cs
        nz = Bs[Bs != 0]
        # the float32 screen's bound assumes its operand rounds with a relative error (no underflow)
        if not nz.size or np.abs(nz).min() >= 1e-30:
            path = 2
            B32 = Bs.astype(np.float32)
            e32 = cns + 2.0 * (Cs @ mu)
            BT32 = np.ascontiguousarray(B32.T)
            e32f = e32.astype(np.float32)
    # the FMA screen's operands: the BLAS screen's, transposed (and e32 in float32, far from overflow)
    fma = use_fma_screen(C.shape[1], k) and (cmax < 1e100 if path == 1 else cmaxs * (cmaxs + 2 * mu_norm) < 1e36)
    BT64 = np.ascontiguousarray(B64.T)
    args = (C, B64, e64, cmax, mu, mu_norm, B32, e32, cmaxs, w, weighted, path, BT64, BT32, e32f, fma)
    return _RoundOperands(args, mu, Cs, cns)


def _check_centers_weight(C, d, weight):
    """(centres in distance units, weights, weighted) as :func:`lloyd_stats` checks and forms them."""
    if C.shape[0] == 0:
        raise ValueError("centers is empty: at least one centre is needed")
    if C.shape[1] != d:
        raise ValueError(f"X has {d} features but centers have {C.shape[1]}")
    weighted = weight is not None and np.size(weight) != 0
    if weighted:
        w = np.asarray(weight)
        if w.dtype.kind not in "fiub":
            raise TypeError(f"weight must be numeric, got dtype {w.dtype}")
        w = np.ascontiguousarray(w, dtype=np.float64)
        if w.shape != (d,):
            raise ValueError(f"weight must have shape ({d},) (one factor per feature) or be empty, got {w.shape}")
        if not np.isfinite(w).all():
            raise ValueError("weight contains NaN or infinity")
        if (w < 0).any():
            raise ValueError("weight must be non-negative")
        C = np.ascontiguousarray(C * w)  # the same product as nearest_weighted's
    else:
        w = np.zeros(0, dtype=np.float64)
    return C, w, weighted


def _check_rows(X):
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got an array of shape {X.shape}")
    if X.dtype.kind not in "fiub":
        raise TypeError(f"X must be numeric, got dtype {X.dtype}")
    if X.dtype != np.float32 and X.dtype != np.float64:
        X = X.astype(np.float64)
    return X


def lloyd_stats_clients(X_clients, centers, weight=None, *, n_jobs=1, seconds=None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`lloyd_stats` with ``exact_inertia=False`` for many clients and the same centres, in one call.

    Client ``i``'s ``counts[i]``, ``sums[i]`` and ``inertia[i]`` are bit for bit those of
    ``lloyd_stats(X_clients[i], centers, weight, exact_inertia=False)`` (for any ``n_jobs`` of
    either): the centre-side operands of the round are formed once per row dtype, and on the
    screen paths (:func:`use_screen`) one compiled call
    (:func:`fastfc._kernels._assign.lloyd_round_clients_kernel`, no GIL) runs every client's
    own blocks in its own order, each client on one thread, the ``n_jobs`` threads taking the
    clients largest first. With fewer clients than threads, or on the direct loop, each client
    is one :func:`lloyd_stats` call with all the threads. This is the in-process runner's
    path for a refinement round over many clients; the clients stay separate parties (none
    of their numbers mix).

    Parameters
    ----------
    X_clients : sequence of array-like of shape (n_i, n_features)
        As ``X`` of :func:`lloyd_stats` (float32 and float64 read as they are, any strides).
    centers, weight, n_jobs :
        As in :func:`lloyd_stats`; ``n_jobs`` threads in all.
    seconds : ndarray of shape (n_clients,), optional
        Filled with each client's wall seconds (of its own compiled work, or of its own call).

    Returns
    -------
    counts : ndarray of shape (n_clients, n_clusters), int64
    sums : ndarray of shape (n_clients, n_clusters, n_features), float64
    inertia : ndarray of shape (n_clients, n_clusters), float64

    Raises
    ------
    ValueError, TypeError, MemoryError
        As :func:`lloyd_stats` (for the first client in client order that fails).
    """
    Xs = [_check_rows(X) for X in X_clients]
    C0 = _as_float_2d("centers", centers, np.float64)
    m = len(Xs)
    k = C0.shape[0]
    d = C0.shape[1]
    for X in Xs:
        if X.shape[1] != d:
            _check_centers_weight(C0, X.shape[1], weight)  # raises lloyd_stats' error
    counts = np.zeros((m, k), dtype=np.int64)
    sums = np.zeros((m, k, d), dtype=np.float64)
    inertia = np.zeros((m, k), dtype=np.float64)
    if m == 0:
        return counts, sums, inertia
    C, w, weighted = _check_centers_weight(C0, d, weight)
    # a small round on one thread (scheduling only: each client's bits do not depend on it)
    n_threads = kernel_threads(n_jobs, sum(X.shape[0] for X in Xs) * k * d)
    if seconds is None:
        seconds = np.zeros(m)
    if not use_screen(d, k) or m < n_threads:
        for i, X in enumerate(Xs):
            t0 = time.perf_counter()
            counts[i], sums[i], inertia[i] = lloyd_stats(X, C0, weight, n_jobs=n_threads, exact_inertia=False)
            seconds[i] = time.perf_counter() - t0
        return counts, sums, inertia
    qsum = np.zeros((m, k), dtype=np.float64)
    for f32 in (False, True):
        idx = [i for i, X in enumerate(Xs) if (X.dtype == np.float32) == f32]
        if not idx:
            continue
        ops = _round_operands(C, w, weighted, f32)
        sel = np.asarray(idx)
        part = [Xs[i] for i in idx]
        rows = np.array([X.shape[0] for X in part], dtype=np.intp)
        order = np.argsort(-rows, kind="stable").astype(np.intp)  # largest first (a schedule only)
        cnt, sm, qs, sec = (counts, sums, qsum, seconds) if len(idx) == m else (
            np.zeros((len(idx), k), dtype=np.int64), np.zeros((len(idx), k, d)), np.zeros((len(idx), k)),
            np.zeros(len(idx)))
        with limit_blas_threads(1):
            ok = lloyd_round_clients_kernel(
                np.array([X.__array_interface__["data"][0] for X in part], dtype=np.int64), rows,
                np.array([X.strides[0] for X in part], dtype=np.intp),
                np.array([X.strides[1] for X in part], dtype=np.intp), f32, ops.args, cnt, sm, qs,
                np.array([n_blocks(n, k, d) for n in rows], dtype=np.intp), order, sec, n_threads, LLOYD_CHUNK)
        if not ok:
            raise MemoryError("lloyd_stats: could not allocate the per-block work buffers")
        # sum of (x w - mu) per cluster, as _round_stats
        dev = np.multiply(cnt.astype(np.float64)[:, :, None], ops.mu)
        np.subtract(sm * w if weighted else sm, dev, out=dev)
        inert = qs - 2.0 * np.einsum("ij,mij->mi", ops.Cs, dev) + cnt * ops.cns
        # a NaN or infinity in the sums or in qsum makes the inertia non-finite (NaN and infinities propagate
        # through dev, the products with Cs and the sum): only then the full checks of lloyd_stats run
        if not np.isfinite(inert).all():
            for j, i in enumerate(idx):
                if not (np.isfinite(sm[j]).all() and np.isfinite(qs[j]).all()):
                    _raise_not_finite(Xs[i])
        inert = np.maximum(inert, 0.0)
        if len(idx) == m:
            inertia = inert
        else:
            counts[sel], sums[sel], inertia[sel], seconds[sel] = cnt, sm, inert, sec
    return counts, sums, inertia


#: placeholders of the float32 screen's operands when it is not used (never read by the kernel)
_NO_B32 = np.zeros((1, 1), dtype=np.float32)
_NO_E32 = np.zeros(1)
_NO_E32F = np.zeros(1, dtype=np.float32)


def moment_inertia_bound(X, centers, weight, labels) -> np.ndarray:
    """Per-cluster bound of ``|inertia - exact|`` for :func:`lloyd_stats` with ``exact_inertia=False``.

    ``exact`` is the sum of the rows' exact (direct-loop) distances. Each term of the
    moment identity carries relative rounding errors of at most ``(d + n_c + 8) u``
    (sequential sums of ``n_c`` rows, ``d``-term norms and products, ``u = eps / 2``)
    and each exact distance errs by ``(d + 4) u (||x w|| + ||c||)^2``: the bound is
    ``(d + n_c + 8) eps (Q_c + 2 ||c_c - mu|| R_c + n_c ||c_c - mu||^2 + T_c)`` with
    ``R_c = sum ||x w - mu|| + ||w S_c - n_c mu||`` and ``T_c = sum (||x w|| + ||c_c||)^2``.

    Parameters
    ----------
    X : ndarray (n, d); centers : ndarray (k, d) raw; weight : ndarray (d,) or None;
    labels : ndarray (n,) int

    Returns
    -------
    ndarray of shape (k,)
    """
    X = np.asarray(X, dtype=np.float64)
    w = np.ones(X.shape[1]) if weight is None or np.size(weight) == 0 else np.asarray(weight, dtype=np.float64)
    C = np.asarray(centers, dtype=np.float64) * w
    Xw = X * w
    mu = C.mean(axis=0)
    k, d = C.shape
    out = np.zeros(k)
    for c in range(k):
        R = Xw[labels == c]
        n_c = R.shape[0]
        cs = np.linalg.norm(C[c] - mu)
        dev = np.linalg.norm(R - mu, axis=1)
        q = float(np.sum(dev ** 2))
        r = float(dev.sum()) + float(np.linalg.norm(R.sum(axis=0) - n_c * mu))
        t = float(np.sum((np.linalg.norm(R, axis=1) + np.linalg.norm(C[c])) ** 2))
        out[c] = (d + n_c + 8) * np.finfo(np.float64).eps * (q + 2 * cs * r + n_c * cs * cs + t)
    return out
