"""Plain NumPy references of the Fed-k*-HC kernels (slow, obvious, trusted).

Each follows the spec's pseudo-code (shared/specs/fed_kstar_hc.md) literally:
dense matrices, full recomputation, no caching.
"""
import math

import numpy as np
from scipy.sparse.csgraph import connected_components


def dist_matrix(V):
    """Euclidean distances, summed in feature order (the kernels' formula)."""
    V = np.asarray(V, dtype=np.float64)
    N, d = V.shape
    acc = np.zeros((N, N))
    for f in range(d):
        t = V[:, None, f] - V[None, :, f]
        acc = acc + t * t
    return np.sqrt(acc)


def snp_epoch_ref(X, perm, M, wins, eta):
    """One SNP pass (spec §3.1.2 lines 6-12), returns new (M, wins)."""
    M = np.array(M, dtype=np.float64)
    wins = np.array(wins)
    Xd = np.asarray(X)
    for i in perm:
        x = Xd[i].astype(np.float64)  # float32 -> float64 is exact, as in the kernel
        d2 = np.array([sum((float(x[f]) - M[j, f]) ** 2 for f in range(M.shape[1])) for j in range(M.shape[0])])
        c = int(np.argmin(d2))
        wins[c] += 1
        alpha = 1.0 / (wins[c] + 1.0)
        delta = alpha * (x - M[c])
        M[c] = M[c] + delta
        nx = math.sqrt(((x - M[c]) ** 2).sum())
        for j in range(M.shape[0]):
            if j == c:
                continue
            nm = max(math.sqrt(((M[j] - M[c]) ** 2).sum()), 1e-12)
            beta = min(1.0, nx / nm)
            M[j] = M[j] - eta * beta * delta
    return M, wins


def gcs_adapt_ref(P, draws, W, E, adj, hits, n_nodes, eps_b, eps_n, beta_err):
    """GCS adaptation steps (spec §3.3 lines 4-6, 12), literal per-step decay."""
    W, E, hits = W.copy(), E.copy(), hits.copy()
    for i in draws:
        d2 = ((W[:n_nodes] - P[i]) ** 2).sum(1)
        s = int(np.argmin(d2))
        hits[s] += 1
        E[s] += d2[s]
        W[s] += eps_b * (P[i] - W[s])
        for c in np.flatnonzero(adj[s, :n_nodes]):
            W[c] += eps_n * (P[i] - W[c])
        E[:n_nodes] *= 1 - beta_err
    return W, E, hits


def rank_matrix(D):
    """R[i, j] = 1-based rank of j in i's order (distance asc, index asc); R[i, i] = 0."""
    N = D.shape[0]
    R = np.zeros((N, N), dtype=np.int64)
    for i in range(N):
        others = [j for j in range(N) if j != i]
        order = sorted(others, key=lambda j: (D[i, j], j))
        for rank, j in enumerate(order, start=1):
            R[i, j] = rank
    return R


def knn_lists_ref(V, B):
    D = dist_matrix(V)
    R = rank_matrix(D)
    N = D.shape[0]
    nbr = np.empty((N, B), dtype=np.int64)
    for i in range(N):
        for j in range(N):
            if j != i and R[i, j] <= B:
                nbr[i, R[i, j] - 1] = j
    return nbr, np.take_along_axis(D, nbr, 1)


def snc_ref(V, t=35.0, b_max=None, snn_mode="equal_rank", min_component_size=1):
    """SNC, spec §3.5 pseudo-code line by line (dense D and R)."""
    V = np.asarray(V, dtype=np.float64)
    N = V.shape[0]
    if N == 1:
        return dict(k=1, b_opt=0, T=0.0, D_s=0.0, p_curve=np.zeros(0))
    D = dist_matrix(V)
    iu = np.triu_indices(N, 1)
    m = N * (N - 1) // 2
    srt = np.sort(D[iu])
    idx = min(max(math.ceil(t * m / 100.0), 1), m)
    T = srt[idx - 1]
    R = rank_matrix(D)
    bmax = N - 1 if b_max is None else min(b_max, N - 1)
    mr = np.maximum(R, R.T)
    P_prev, b_opt, curve = None, bmax, []
    for b in range(1, bmax + 1):
        lnn = (mr[iu] <= b)
        ntot = int(lnn.sum())
        nshort = int((lnn & (D[iu] < T)).sum())
        P = (nshort, ntot)
        curve.append(nshort / ntot)
        if P_prev is not None and P_prev[0] * P[1] > P[0] * P_prev[1]:
            b_opt = b - 1
            break
        P_prev = P
    if snn_mode == "equal_rank":
        S = (R[iu] == R.T[iu]) & (R[iu] <= b_opt)
    else:
        S = mr[iu] <= b_opt
    D_s = D[iu][S].mean()
    A = (D <= D_s) & ~np.eye(N, dtype=bool)
    k, lab = connected_components(A.astype(np.int8), directed=False)
    if min_component_size > 1:
        k = max(1, int((np.bincount(lab) >= min_component_size).sum()))
    return dict(k=int(k), b_opt=int(b_opt), T=float(T), D_s=float(D_s), p_curve=np.array(curve))


def merge_distance_ref(C, S, r, beta, sim_norm="l2", eps=1e-12):
    """Eq. (21) for all pairs: ||c_i - c_j||^2 ||s_i - s_j||^beta / max(r_i + r_j, eps)."""
    dc2 = dist_matrix(C) ** 2
    if sim_norm == "l1":
        ds = np.abs(S[:, None, :] - S[None, :, :]).sum(2)
    else:
        ds = dist_matrix(S)
    sim = np.ones_like(ds) if beta == 0 else ds ** beta
    rr = np.maximum(r[:, None] + r[None, :], eps)
    return dc2 * sim / rr


def merge_ref(C, S, r, counts, Xsub, offsets, n_clusters, beta, sim_norm="l2"):
    """Alg. 3 literally: full matrix every step, statistics recomputed from the
    union's substitute rows. Returns (labels numbered by smallest member, merges, heights)."""
    C, S, r = np.array(C, float), np.array(S, float), np.array(r, float)
    k0 = C.shape[0]
    members = {q: [q] for q in range(k0)}
    merges, heights = [], []
    while len(members) > n_clusters:
        act = sorted(members)
        Dm = merge_distance_ref(C[act], S[act], r[act], beta, sim_norm)
        Dm[np.tril_indices(len(act))] = np.inf
        a = int(np.argmin(Dm))  # row-major first minimum = lexicographically smallest pair
        i, j = divmod(a, len(act))
        p, q = act[i], act[j]
        merges.append((p, q))
        heights.append(Dm[i, j])
        members[p] = members[p] + members.pop(q)
        rows = np.concatenate([Xsub[offsets[g]:offsets[g + 1]] for g in members[p]])
        C[p] = rows.mean(0)
        S[p] = rows.std(0, ddof=1)
        r[p] = np.sqrt(((rows - C[p]) ** 2).sum(1)).mean()
    labels = np.empty(k0, dtype=np.int64)
    for new, p in enumerate(sorted(members)):
        labels[members[p]] = new
    return labels, np.array(merges, dtype=np.int64).reshape(-1, 2), np.array(heights), C, S, r, members


def density_gap_ref(P):
    """Eq. (3) with the spec §3.1.3 choices, by loops."""
    P = np.asarray(P, float)
    m = len(P)
    if m < 3:
        return 0.0, -1
    D = dist_matrix(P)
    pd = D[np.triu_indices(m, 1)]
    dbar = pd.mean()
    if dbar == 0:
        return 0.0, -1
    dc = np.quantile(pd, 0.02)
    if dc == 0:
        dc = pd[pd > 0].min()
    rho = np.array([sum(math.exp(-(D[i, k] / dc) ** 2) for k in range(m) if k != i) for i in range(m)])

    def denser(a, b):
        return rho[a] > rho[b] or (rho[a] == rho[b] and a < b)

    peak = [i for i in range(m) if all(denser(i, k) for k in range(m) if k != i)][0]
    best, arg = -1.0, -1
    for i in range(m):
        if i == peak:
            continue
        g = min(D[i, k] for k in range(m) if denser(k, i)) / dbar
        if g > best:
            best, arg = g, i
    return best, arg
