# cython: language_level=3
"""Numeric kernels of Fed-k*-HC (spec ``shared/specs/fed_kstar_hc.md``).

Numeric work only; inputs are validated and laid out by
:mod:`fastfc.fed_kstar_hc`. Plain NumPy references live in
``tests/reference_kstar.py``.

* :func:`snp_epoch` - one online pass of SNP competitive learning (Eqs. 1-2).
* :func:`gcs_adapt` - a block of Growing-Cell-Structures adaptation steps.
* :func:`pairwise_upper` - the upper triangle of the Euclidean distance matrix.
* :func:`knn_refine` - exact k-NN lists (ties to the lowest index) from
  KD-tree candidate lists.
* :func:`mutual_pairs` - mutual (loose natural neighbour) pairs with both ranks.
* :func:`lnn_counts` - N_total(b) and N_short(b) for every b in one pass.
* :func:`pair_dists` - distances of given index pairs.
* :func:`merge_loop` - agglomerative merging with Eq. (21) and cached row minima.

Every distance is ``sqrt(sum_f (u_f - v_f)**2)`` summed in feature order in
double precision, so the same pair always gets the same bits whichever kernel
computes it (needed for the strict ``< T`` and ``<= D_s`` comparisons).
"""
cimport cython
import numpy as np
from cython.parallel cimport prange
from libc.math cimport sqrt, pow, fabs, INFINITY
from libc.stdint cimport int64_t, uint8_t
from libc.stdlib cimport malloc, free

from fastfc._kernels._pairwise cimport pairwise_sum

ctypedef fused floating:
    float
    double


cdef inline double _dist_rows(const double[:, ::1] A, Py_ssize_t i, const double[:, ::1] B, Py_ssize_t j) noexcept nogil:
    cdef Py_ssize_t f
    cdef double s = 0.0, t
    for f in range(A.shape[1]):
        t = A[i, f] - B[j, f]
        s = s + t * t
    return sqrt(s)


cdef inline Py_ssize_t _nearest_row(const floating[:, ::1] X, Py_ssize_t i, const double[:, ::1] M,
                                    Py_ssize_t k, double* dist) noexcept nogil:
    """Row of ``M[:k]`` nearest to ``X[i]`` (squared Euclidean summed in feature order, ties to
    the lowest row); its squared distance goes to ``dist``."""
    cdef Py_ssize_t j, f, c = 0
    cdef double best = INFINITY, acc, diff
    for j in range(k):
        acc = 0.0
        for f in range(M.shape[1]):
            diff = X[i, f] - M[j, f]
            acc = acc + diff * diff
        if acc < best:
            best = acc
            c = j
    dist[0] = best
    return c


# --------------------------------------------------------------------- SNP
@cython.boundscheck(False)
@cython.wraparound(False)
def snp_epoch(
    const floating[:, ::1] X,     # IN  (n, d) client rows
    const int64_t[::1] perm,      # IN  (n,) visiting order
    double[:, ::1] M,             # INOUT (k, d) seeds
    int64_t[::1] wins,            # INOUT (k,) cumulative wins
    double eta,                   # IN  penalty strength
):
    """One online pass of SNP (spec 3.1.2 lines 6-12), sequential by nature.

    For each row x (in ``perm`` order): the winner c = argmin ||x - M_j||^2
    (ties to the lowest j) gains a win, moves by delta = alpha (x - M_c) with
    alpha = 1/(w_c + 1); every other seed j moves by
    -eta * beta_j * delta, beta_j = min(1, ||x - M_c|| / max(||M_j - M_c||, 1e-12))
    (M_c already updated).
    """
    cdef Py_ssize_t n = perm.shape[0], k = M.shape[0], d = M.shape[1]
    cdef Py_ssize_t t, i, j, f, c
    cdef double best, acc, diff, alpha, nx, nm, beta
    cdef double[::1] delta = np.empty(max(d, 1), dtype=np.float64)
    with nogil:
        for t in range(n):
            i = perm[t]
            c = _nearest_row(X, i, M, k, &best)
            wins[c] += 1
            alpha = 1.0 / (wins[c] + 1.0)
            for f in range(d):
                delta[f] = alpha * (X[i, f] - M[c, f])
                M[c, f] = M[c, f] + delta[f]
            if k > 1:
                nx = 0.0
                for f in range(d):
                    diff = X[i, f] - M[c, f]
                    nx = nx + diff * diff
                nx = sqrt(nx)
                for j in range(k):
                    if j != c:
                        nm = 0.0
                        for f in range(d):
                            diff = M[j, f] - M[c, f]
                            nm = nm + diff * diff
                        nm = sqrt(nm)
                        if nm < 1e-12:
                            nm = 1e-12
                        beta = nx / nm
                        if beta > 1.0:
                            beta = 1.0
                        for f in range(d):
                            M[j, f] = M[j, f] - eta * beta * delta[f]


# --------------------------------------------------------------------- GCS
@cython.boundscheck(False)
@cython.wraparound(False)
def gcs_adapt(
    const double[:, ::1] P,       # IN  (k0, d) input signals (centroids)
    const int64_t[::1] draws,     # IN  (T,) indices of the signals of this block
    double[:, ::1] W,             # INOUT (max_nodes, d) node positions
    double[::1] E,                # INOUT (max_nodes,) resource counters
    const uint8_t[:, ::1] adj,    # IN  (max_nodes, max_nodes) adjacency
    int64_t[::1] hits,            # INOUT (max_nodes,) best-matching-unit counts
    Py_ssize_t n_nodes,           # IN  active nodes 0..n_nodes-1
    double eps_b, double eps_n, double beta_err,
):
    """``len(draws)`` GCS adaptation steps (spec 3.3 lines 4-6 and 12).

    Error decay ``E *= (1 - beta_err)`` after each step is applied through a
    running scale factor and folded back at the end of the block. Precondition: the factor
    ``(1 - beta_err) ** len(draws)`` stays far from underflow (the caller's blocks are at most
    ``GCS_LAMBDA`` = 200 steps with ``beta_err`` = 5e-4: at least 0.90); a block long enough for it to
    reach 0 would turn ``E`` into NaN.
    """
    cdef Py_ssize_t T = draws.shape[0], d = W.shape[1]
    cdef Py_ssize_t step, i, s, c, f
    cdef double best, acc, diff, g = 1.0, keep = 1.0 - beta_err
    with nogil:
        for step in range(T):
            i = draws[step]
            s = _nearest_row(P, i, W, n_nodes, &best)
            hits[s] += 1
            E[s] = E[s] + best / g
            for f in range(d):
                W[s, f] = W[s, f] + eps_b * (P[i, f] - W[s, f])
            for c in range(n_nodes):
                if adj[s, c]:
                    for f in range(d):
                        W[c, f] = W[c, f] + eps_n * (P[i, f] - W[c, f])
            g = g * keep
        for c in range(n_nodes):
            E[c] = E[c] * g


# ---------------------------------------------------------- SNC: distances
@cython.boundscheck(False)
@cython.wraparound(False)
def pairwise_upper(const double[:, ::1] V, double[::1] out, int n_threads=1):
    """Fill ``out`` (N(N-1)/2,) with D[i, j], i < j, row-major (scipy ``pdist`` order)."""
    cdef Py_ssize_t N = V.shape[0], i, j, base
    cdef int nt = max(n_threads, 1)
    for i in prange(N, nogil=True, schedule="dynamic", num_threads=nt):
        base = i * N - (i * (i + 1)) // 2
        for j in range(i + 1, N):
            out[base + (j - i - 1)] = _dist_rows(V, i, V, j)


@cython.boundscheck(False)
@cython.wraparound(False)
def pair_dists(const double[:, ::1] V, const int64_t[:, ::1] pairs, double[::1] out):
    """``out[m] = ||V[pairs[m, 0]] - V[pairs[m, 1]]||``."""
    cdef Py_ssize_t m
    with nogil:
        for m in range(pairs.shape[0]):
            out[m] = _dist_rows(V, pairs[m, 0], V, pairs[m, 1])


@cython.boundscheck(False)
@cython.wraparound(False)
def knn_refine(
    const double[:, ::1] V,       # IN  (N, d) points
    const int64_t[::1] rows,      # IN  (R,) which points to refine
    const int64_t[:, ::1] cand,   # IN  (R, K) candidate neighbours (may contain the row itself; <0 = none)
    bint complete,                # IN  True when the candidates are all points within their largest distance
    int64_t[:, ::1] nbr,          # OUT (N, B) neighbour lists (rows ``rows`` written)
    double[:, ::1] nd,            # OUT (N, B) their distances
    uint8_t[::1] boundary_tie,    # OUT (R,) 1 when an uncandidated point could tie with the B-th neighbour
):
    """Exact B-NN lists from candidate lists: distances recomputed, the point
    itself removed, sorted by (distance, index), the first B kept.

    The candidates of a row are assumed to be its K nearest points (a KD-tree
    query). Every other point is then at least as far as the largest
    candidate; when the B-th kept distance equals that largest distance and
    ``complete`` is False, a point outside the candidates could tie and win
    on index, so the row is flagged for an exact ball query by the caller.
    Rows with fewer than B candidates get ``-1`` / ``inf`` padding.
    """
    cdef Py_ssize_t R = rows.shape[0], K = cand.shape[1], B = nbr.shape[1]
    cdef Py_ssize_t r, i, a, b, m, j
    cdef double dj, dmax
    cdef double[::1] bufd = np.empty(max(K, 1), dtype=np.float64)
    cdef int64_t[::1] bufi = np.empty(max(K, 1), dtype=np.int64)
    with nogil:
        for r in range(R):
            i = rows[r]
            m = 0
            dmax = -1.0
            for a in range(K):
                j = cand[r, a]
                if j < 0 or j == i:
                    continue
                dj = _dist_rows(V, i, V, j)
                if dj > dmax:
                    dmax = dj
                b = m
                while b > 0 and (bufd[b - 1] > dj or (bufd[b - 1] == dj and bufi[b - 1] > j)):
                    bufd[b] = bufd[b - 1]
                    bufi[b] = bufi[b - 1]
                    b = b - 1
                bufd[b] = dj
                bufi[b] = j
                m = m + 1
            for b in range(B):
                if b < m:
                    nbr[i, b] = bufi[b]
                    nd[i, b] = bufd[b]
                else:
                    nbr[i, b] = -1
                    nd[i, b] = INFINITY
            if (not complete) and B >= 1 and m >= B and bufd[B - 1] == dmax:
                boundary_tie[r] = 1
            else:
                boundary_tie[r] = 0


@cython.boundscheck(False)
@cython.wraparound(False)
def mutual_pairs(
    const int64_t[:, ::1] nbr,    # IN  (N, B) neighbour lists, rank a+1 at column a
    const double[:, ::1] nd,      # IN  (N, B) their distances
    int64_t[:, ::1] pairs,        # OUT (N*B, 2) i < j
    int64_t[:, ::1] ranks,        # OUT (N*B, 2) R[i, j], R[j, i] (1-based)
    double[::1] dist,             # OUT (N*B,) D[i, j]
):
    """All pairs (i < j) that are in each other's B-NN list (loose natural
    neighbours at level B), with both ranks. Returns the number of pairs.
    O(N B^2)."""
    cdef Py_ssize_t N = nbr.shape[0], B = nbr.shape[1]
    cdef Py_ssize_t i, a, a2, j, cnt = 0
    with nogil:
        for i in range(N):
            for a in range(B):
                j = nbr[i, a]
                if j <= i:
                    continue
                for a2 in range(B):
                    if nbr[j, a2] == i:
                        pairs[cnt, 0] = i
                        pairs[cnt, 1] = j
                        ranks[cnt, 0] = a + 1
                        ranks[cnt, 1] = a2 + 1
                        dist[cnt] = nd[i, a]
                        cnt += 1
                        break
    return cnt


@cython.boundscheck(False)
@cython.wraparound(False)
def lnn_counts(
    const int64_t[:, ::1] ranks,  # IN  (m, 2) ranks of the mutual pairs
    const double[::1] dist,       # IN  (m,) their distances
    double T,                     # IN  short-distance threshold (strict <)
    int64_t[::1] n_total,         # OUT (B+1,) N_total(b), b = 0..B (cumulative)
    int64_t[::1] n_short,         # OUT (B+1,) N_short(b)
):
    """One pass over the mutual pairs: a pair is an LNN pair at every level
    b >= max(R[i,j], R[j,i]); histogram that level, then prefix-sum, so
    P_b = N_short(b) / N_total(b) is available for every b at once."""
    cdef Py_ssize_t m = ranks.shape[0], B = n_total.shape[0] - 1, p, b, mr
    with nogil:
        for b in range(B + 1):
            n_total[b] = 0
            n_short[b] = 0
        for p in range(m):
            mr = ranks[p, 0]
            if ranks[p, 1] > mr:
                mr = ranks[p, 1]
            if mr > B:
                continue
            n_total[mr] += 1
            if dist[p] < T:
                n_short[mr] += 1
        for b in range(1, B + 1):
            n_total[b] += n_total[b - 1]
            n_short[b] += n_short[b - 1]


# ------------------------------------------------------------------- merge
cdef inline double _merge_d(
    const double[:, ::1] C, const double[:, ::1] S, const double[::1] r,
    Py_ssize_t i, Py_ssize_t j, double beta, bint l1, double eps,
) noexcept nogil:
    # Eq. (21): ||c_i - c_j||^2 * ||s_i - s_j||^beta / (r_i + r_j).
    # pow() dominates the cost, so the common exponents 1, 2 and 0.5 are computed
    # with sqrt / products (same value up to rounding); 0^0 = 1.
    cdef Py_ssize_t f, d = C.shape[1]
    cdef double dc2 = 0.0, ds = 0.0, t, sim, rr
    for f in range(d):
        t = C[i, f] - C[j, f]
        dc2 = dc2 + t * t
    if beta == 0.0:
        sim = 1.0
    elif l1:
        for f in range(d):
            ds = ds + fabs(S[i, f] - S[j, f])
        if beta == 1.0:
            sim = ds
        elif beta == 2.0:
            sim = ds * ds
        elif beta == 0.5:
            sim = sqrt(ds)
        else:
            sim = pow(ds, beta)
    else:
        for f in range(d):
            t = S[i, f] - S[j, f]
            ds = ds + t * t  # squared L2 norm
        if beta == 1.0:
            sim = sqrt(ds)
        elif beta == 2.0:
            sim = ds
        elif beta == 0.5:
            sim = sqrt(sqrt(ds))
        else:
            sim = pow(ds, 0.5 * beta)
    rr = r[i] + r[j]
    if rr < eps:
        rr = eps
    return dc2 * sim / rr


cdef inline double _ward_d(const double[:, ::1] C, const double[::1] cnt, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    # Ward's merge cost: growth of the within-cluster sum of squares, n_i n_j / (n_i + n_j) ||c_i - c_j||^2
    cdef Py_ssize_t f
    cdef double dc2 = 0.0, t
    for f in range(C.shape[1]):
        t = C[i, f] - C[j, f]
        dc2 = dc2 + t * t
    return cnt[i] * cnt[j] / (cnt[i] + cnt[j]) * dc2


cdef inline double _pair_d(
    const double[:, ::1] C, const double[:, ::1] S, const double[::1] r, const double[::1] cnt,
    Py_ssize_t i, Py_ssize_t j, double beta, bint l1, double eps, bint ward,
) noexcept nogil:
    if ward:
        return _ward_d(C, cnt, i, j)
    return _merge_d(C, S, r, i, j, beta, l1, eps)


cdef inline void _row_min(
    const double[:, ::1] C, const double[:, ::1] S, const double[::1] r, const double[::1] cnt,
    const uint8_t[::1] active, Py_ssize_t i, double beta, bint l1, double eps, bint ward,
    double[::1] rowmin, int64_t[::1] rowarg,
) noexcept nogil:
    cdef Py_ssize_t j, k0 = C.shape[0]
    cdef double best = INFINITY, v
    cdef int64_t arg = -1
    for j in range(i + 1, k0):
        if active[j]:
            v = _pair_d(C, S, r, cnt, i, j, beta, l1, eps, ward)
            if v < best or arg < 0:
                best = v
                arg = j
    rowmin[i] = best
    rowarg[i] = arg


@cython.boundscheck(False)
@cython.wraparound(False)
def merge_loop(
    double[:, ::1] C,             # INOUT (k0, d) centres used in Eq. (21)
    double[:, ::1] S,             # INOUT (k0, d) per-feature std vectors
    double[::1] r,                # INOUT (k0,) radii
    double[::1] cnt,              # INOUT (k0,) sizes n
    double[:, ::1] Msub,          # INOUT (k0, d) means of the substitute rows
    double[:, ::1] M2,            # INOUT (k0, d) sums of squared deviations of the substitute rows
    const double[:, ::1] Xsub,    # IN  (n, d) stacked substitute rows, subcluster q owns offsets[q]:offsets[q+1]
    const int64_t[::1] offsets,   # IN  (k0+1,)
    Py_ssize_t n_target,          # IN  clusters to keep
    double beta, bint l1, double eps,
    int64_t[::1] owner,           # OUT (k0,) final slot (smallest member id) of each subcluster
    int64_t[:, ::1] merges,       # OUT (k0-n_target, 2) merged pairs (p, q), p < q, in order
    double[::1] heights,          # OUT (k0-n_target,) their Eq. (21) distances
    int n_threads=1,
    bint ward=False,              # IN  Ward's cost instead of Eq. (21); the radius pass is skipped
    bint rms_radius=False,        # IN  r = sqrt(sum_f M2 / n) (from the moments) instead of the substitute pass
):
    """Agglomerative merging of spec 3.6 until ``n_target`` clusters remain.

    Each step merges the lexicographically smallest pair (p, q) of minimal
    Eq. (21) distance into slot p: Chan's combine updates the substitute
    mean and M2 (so c and s are those of the union's substitute rows), the
    radius is one pass over the union's substitute rows, and the cached
    per-row minima (over j > i) are updated: row p is recomputed, rows whose
    cached argmin was p or q are recomputed, every other row i < p only
    compares its cached minimum with the new d(i, p). No step recomputes
    all pairs. The initial row minima run on ``n_threads`` OpenMP threads
    (each row is independent, so results do not depend on it); the merges
    are sequential.

    With ``ward`` the pair cost is Ward's ``n_i n_j / (n_i + n_j) ||c_i - c_j||^2``
    (``S``, ``r`` and the substitute rows are not read; ``r`` is left as given).
    With ``rms_radius`` the radius of a union is its root-mean-square distance
    to the centre, ``sqrt(sum_f M2 / n)``, exact from the moments, and the
    substitute rows are not read.
    """
    cdef Py_ssize_t k0 = C.shape[0], d = C.shape[1]
    cdef Py_ssize_t i, j, f, step, n_steps = k0 - n_target, p, q, g, a
    cdef double best, v, na, nb, nm, delta, acc, t, rsum
    cdef int nt = max(n_threads, 1)
    cdef double[::1] rowmin = np.empty(max(k0, 1), dtype=np.float64)
    cdef int64_t[::1] rowarg = np.empty(max(k0, 1), dtype=np.int64)
    cdef int64_t[::1] head = np.empty(max(k0, 1), dtype=np.int64)
    cdef int64_t[::1] tail = np.empty(max(k0, 1), dtype=np.int64)
    cdef int64_t[::1] nxt = np.empty(max(k0, 1), dtype=np.int64)
    cdef uint8_t[::1] active = np.empty(max(k0, 1), dtype=np.uint8)
    if k0 == 0:
        return
    with nogil:
        for i in range(k0):
            head[i] = i
            tail[i] = i
            nxt[i] = -1
            active[i] = 1
        for i in prange(k0, schedule="dynamic", num_threads=nt):
            _row_min(C, S, r, cnt, active, i, beta, l1, eps, ward, rowmin, rowarg)
        for step in range(n_steps):
            # global argmin over the row minima; ties -> smallest row, then smallest column
            p = -1
            best = INFINITY
            for i in range(k0):
                if active[i] and rowarg[i] >= 0 and (p < 0 or rowmin[i] < best):
                    best = rowmin[i]
                    p = i
            q = rowarg[p]
            merges[step, 0] = p
            merges[step, 1] = q
            heights[step] = best
            # Chan's parallel combine of (n, mean, M2) on substitute rows
            na = cnt[p]
            nb = cnt[q]
            nm = na + nb
            for f in range(d):
                delta = Msub[q, f] - Msub[p, f]
                Msub[p, f] = Msub[p, f] + delta * nb / nm
                M2[p, f] = M2[p, f] + M2[q, f] + delta * delta * na * nb / nm
                C[p, f] = Msub[p, f]
                S[p, f] = sqrt(M2[p, f] / (nm - 1.0)) if nm > 1.0 else 0.0
            cnt[p] = nm
            nxt[tail[p]] = head[q]
            tail[p] = tail[q]
            active[q] = 0
            # radius: mean distance of the union's substitute rows to the new centre
            if rms_radius:
                acc = 0.0
                for f in range(d):
                    acc = acc + M2[p, f]
                r[p] = sqrt(acc / nm)
            elif not ward:
                rsum = 0.0
                g = head[p]
                while g >= 0:
                    for a in range(offsets[g], offsets[g + 1]):
                        acc = 0.0
                        for f in range(d):
                            t = Xsub[a, f] - C[p, f]
                            acc = acc + t * t
                        rsum = rsum + sqrt(acc)
                    g = nxt[g]
                r[p] = rsum / nm
            # cached row minima
            _row_min(C, S, r, cnt, active, p, beta, l1, eps, ward, rowmin, rowarg)
            # sequential: a parallel region per merge (k0 of them) costs more than it saves,
            # and collapses when a core is busy (each barrier waits for a descheduled thread)
            for i in range(q):
                if not active[i] or i == p:
                    pass
                elif rowarg[i] == q or (i < p and rowarg[i] == p):
                    _row_min(C, S, r, cnt, active, i, beta, l1, eps, ward, rowmin, rowarg)
                elif i < p:
                    v = _pair_d(C, S, r, cnt, i, p, beta, l1, eps, ward)
                    if v < rowmin[i] or (v == rowmin[i] and p < rowarg[i]):
                        rowmin[i] = v
                        rowarg[i] = p
        for i in range(k0):
            if active[i]:
                g = head[i]
                while g >= 0:
                    owner[g] = i
                    g = nxt[g]


# ---------------------------------------------------- subcluster statistics
cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define FASTFC_PREFETCH(p) __builtin_prefetch((const void *)(p))
    #else
    #define FASTFC_PREFETCH(p) ((void)0)
    #endif
    """
    void FASTFC_PREFETCH(const double* p) noexcept nogil

#: cache lines (of 8 doubles) a gather keeps requested ahead of the row it reads (the rows of a
#: subcluster are scattered over X: without the hint each one is a wait on memory); at least 2 rows
cdef enum:
    _PREFETCH_LINES = 128

cdef inline double _row_values(const double[:, ::1] X, const int64_t[::1] order, Py_ssize_t t,
                               const double* mean, double* val) noexcept nogil:
    """``val = X[r]`` (``mean`` NULL), else ``val = (X[r] - mean) ** 2``, for the row ``r = order[t]``,
    returning ``sqrt(val.sum())`` summed as NumPy's ``(dev * dev).sum(1)`` (0 when ``mean`` is NULL).
    The cache lines of a row a few places later in ``order`` are requested from memory meanwhile."""
    cdef Py_ssize_t z, d = X.shape[1], r = order[t], ahead, ra
    cdef double e
    ahead = t + max(2, min(16, _PREFETCH_LINES // max(1, (d + 7) // 8)))
    if ahead < order.shape[0]:
        ra = order[ahead]
        for z in range(0, d, 8):
            FASTFC_PREFETCH(&X[ra, z])
        FASTFC_PREFETCH(&X[ra, d - 1])
    if mean == NULL:
        for z in range(d):
            val[z] = X[r, z]
        return 0.0
    for z in range(d):
        e = X[r, z] - mean[z]
        val[z] = e * e
    return sqrt(pairwise_sum(val, d))


cdef void _pw_rows(const double[:, ::1] X, const int64_t[::1] order, Py_ssize_t s, Py_ssize_t n,
                   const double* mean, double* out, double* acc, double* stk) noexcept nogil:
    """NumPy's pairwise sum over the rows ``order[s:s+n]`` (n >= 1) of every column of their values
    (:func:`_row_values`), the order ``np.add.reduceat`` uses along axis 0 after a segment's first row,
    into ``out[0:d]``; with ``mean``, ``out[d]`` gets the same sum of the rows' norms. ``acc``: scratch
    of 9 (d + 1) values; ``stk``: (d + 1) values per halving level below this one."""
    cdef Py_ssize_t d = X.shape[1], w = X.shape[1] + 1, j, t, z, m, n2
    cdef double* val = acc + 8 * w
    if n < 8:
        for z in range(w):
            out[z] = 0.0
        for t in range(s, s + n):
            val[d] = _row_values(X, order, t, mean, val)
            for z in range(w):
                out[z] = out[z] + val[z]
        return
    if n <= 128:
        for j in range(8):
            acc[j * w + d] = _row_values(X, order, s + j, mean, acc + j * w)
        m = n - n % 8
        for t in range(s + 8, s + m, 8):
            for j in range(8):
                val[d] = _row_values(X, order, t + j, mean, val)
                for z in range(w):
                    acc[j * w + z] = acc[j * w + z] + val[z]
        for z in range(w):
            out[z] = (((acc[z] + acc[w + z]) + (acc[2 * w + z] + acc[3 * w + z]))
                      + ((acc[4 * w + z] + acc[5 * w + z]) + (acc[6 * w + z] + acc[7 * w + z])))
        for t in range(s + m, s + n):
            val[d] = _row_values(X, order, t, mean, val)
            for z in range(w):
                out[z] = out[z] + val[z]
        return
    n2 = n // 2
    n2 = n2 - n2 % 8
    _pw_rows(X, order, s, n2, mean, out, acc, stk + w)
    _pw_rows(X, order, s + n2, n - n2, mean, stk, acc, stk + w)
    for z in range(w):
        out[z] = out[z] + stk[z]


cdef void _one_subcluster(const double[:, ::1] X, const int64_t[::1] order, Py_ssize_t a, Py_ssize_t m,
                          double[:, ::1] means, double[::1] radii, double[:, ::1] stds, Py_ssize_t g,
                          double* buf) noexcept nogil:
    cdef Py_ssize_t d = X.shape[1], w = X.shape[1] + 1, z
    cdef double* first = buf
    cdef double* rest = buf + w
    cdef double* acc = buf + 2 * w
    cdef double* stk = buf + 11 * w
    cdef double* mu = buf + 75 * w
    cdef double denom = <double>(m - 1) if m > 1 else 1.0
    # means: the segment's first row plus the pairwise sum of the others, over the count
    first[d] = _row_values(X, order, a, NULL, first)
    if m > 1:
        _pw_rows(X, order, a + 1, m - 1, NULL, rest, acc, stk)
        for z in range(d):
            first[z] = first[z] + rest[z]
    for z in range(d):
        mu[z] = first[z] / <double>m
        means[g, z] = mu[z]
    # squared deviations (per feature) and row norms, summed the same way
    first[d] = _row_values(X, order, a, mu, first)
    if m > 1:
        _pw_rows(X, order, a + 1, m - 1, mu, rest, acc, stk)
        for z in range(w):
            first[z] = first[z] + rest[z]
    radii[g] = first[d] / <double>m
    for z in range(d):
        stds[g, z] = sqrt(first[z] / denom)


@cython.boundscheck(False)
@cython.wraparound(False)
def subcluster_moments(const double[:, ::1] X, const int64_t[::1] order, const int64_t[::1] starts,
                       double[:, ::1] means, double[::1] radii, double[:, ::1] stds, int n_threads=1):
    """Mean, mean distance to the mean and per-feature standard deviation (ddof 1) of every subcluster.

    Subcluster ``g`` holds the rows ``order[starts[g]:starts[g + 1]]`` (at least one) of ``X``. Each
    value has the bits of NumPy's segment reductions over the rows gathered in that order
    (``Xs = X[order]``, ``seg = starts[:-1]``): ``means = np.add.reduceat(Xs, seg, axis=0) / counts``,
    ``dev = Xs - np.repeat(means, counts, axis=0)``, ``radii = np.add.reduceat(np.sqrt((dev * dev).sum(1)),
    seg) / counts``, ``stds = np.sqrt(np.add.reduceat(dev * dev, seg, axis=0) / max(counts - 1, 1))``
    (a segment's first row, plus NumPy's pairwise sum of its other rows), without gathering the rows.
    Subclusters run in parallel on up to ``n_threads`` OpenMP threads, each on one thread: the
    result does not depend on the thread count. ``means``, ``stds`` (k, d) and ``radii`` (k,) OUT.
    """
    cdef Py_ssize_t k = starts.shape[0] - 1, w = X.shape[1] + 1, g
    cdef int nt = max(n_threads, 1)
    cdef double* buf
    cdef bint failed = False
    with nogil:
        for g in prange(k, schedule="dynamic", num_threads=nt):
            # scratch: the segment's sums (w), the rest's (w), 9 w accumulators, 64 halving levels, the mean
            buf = <double*>malloc(76 * w * sizeof(double))
            if buf == NULL:
                failed = True
            else:
                _one_subcluster(X, order, starts[g], starts[g + 1] - starts[g], means, radii, stds, g, buf)
                free(buf)
    if failed:
        raise MemoryError("subcluster_moments: could not allocate a scratch buffer")


@cython.boundscheck(False)
@cython.wraparound(False)
def stable_order(const int64_t[::1] labels, const int64_t[::1] starts, int64_t[::1] order):
    """``order = np.argsort(labels, kind="stable")`` by one counting pass: ``starts`` (k + 1,) are the
    offsets of each label's run (``concatenate([[0], cumsum(bincount(labels))])``). ``order`` (n,) OUT."""
    cdef Py_ssize_t n = labels.shape[0], k = starts.shape[0] - 1, i, g
    cdef int64_t[::1] pos = np.empty(max(k, 1), dtype=np.int64)
    with nogil:
        for g in range(k):
            pos[g] = starts[g]
        for i in range(n):
            g = labels[i]
            order[pos[g]] = i
            pos[g] += 1


@cython.boundscheck(False)
@cython.wraparound(False)
def label_row_sums(const double[:, ::1] X, const int64_t[::1] labels, double[:, ::1] sums, Py_ssize_t i0,
                   Py_ssize_t i1):
    """``sums[labels[i]] += X[i]`` for the rows ``i0 <= i < i1`` in increasing order (``sums`` (k, d)
    INOUT, usually zeros): the bits of ``np.add.at(sums, labels[i0:i1], X[i0:i1])``. One streaming
    pass (``np.add.at`` on rows is about 15 times slower); the GIL is released."""
    cdef Py_ssize_t d = X.shape[1], i, z, g
    with nogil:
        for i in range(i0, i1):
            g = labels[i]
            for z in range(d):
                sums[g, z] = sums[g, z] + X[i, z]
