# cython: language_level=3
"""Greedy k-means++ seeding over the rows of one client, threads over rows, deterministic.

Numeric work only: inputs are validated by :func:`fastfc._local_kmeans.kmeanspp`.

The seeding is the greedy variant of k-means++ that scikit-learn uses (``n_trials``
candidates drawn per step with probability proportional to the squared distance to the
nearest seed so far; the candidate of lowest resulting potential wins, ties to the first
drawn), from pre-drawn uniforms, with the arithmetic of the Numba kernel
:func:`fastfc._kernels._feca.kmeans_plusplus`: every squared distance is the float64 sum,
in feature order, of squared float64 differences; the cumulative weights and each
candidate's potential are summed serially in row order. Its seeds are therefore the same.

Parallelism.  The expensive part, the squared distance of every row to every candidate of
a step (``n * n_trials * d`` operations), is cut into fixed chunks of rows spread over
OpenMP threads (``prange``, ``nogil``); each row's values are written to its own slots, so
they do not depend on the thread count. The serial parts (the cumulative weights and the
potentials, ``n * (n_trials + 2)`` additions per step) keep their order. Seeds are
bit-identical for any number of threads.

Vector lanes (issue 15).  A client of at most ``2**20`` values is first copied feature-major
(float64); the distance pass then runs over rows in vector lanes (``fastfc_cand_cols``,
compiled for AVX-512 / AVX2 / baseline, no fused multiply-adds), each row's sum with the same
operations in the same order as the row-by-row pass, so the same values (tested) at about
1.5-1.8x the speed on small clients (FeCA's seeding; 1,000 rows x 10 features, k = 10:
225 -> 126 us a call at load ~8).
"""
cimport cython
from cython.parallel cimport prange
from libc.stdlib cimport calloc, free, malloc

cdef extern from *:
    """
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(_WIN32)
    #define FASTFC_SEED_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
    #else
    #define FASTFC_SEED_CLONES
    #endif
    /* out[i] = sum_f (Xt[f * n + i] - c[f])^2 for lo <= i < hi, each row's sum from 0.0 in feature order
       (Xt: the rows feature-major, in double), then min(closest[i], out[i]) when closest is given: the
       rows side by side in vector lanes, each with the same operations in the same order as one row
       alone (no contraction into fused multiply-adds), so the same values */
    FASTFC_SEED_CLONES static void fastfc_cand_cols(const double* __restrict Xt, Py_ssize_t n, Py_ssize_t d,
                                                    Py_ssize_t lo, Py_ssize_t hi, const double* __restrict c,
                                                    const double* __restrict closest, double* __restrict out) {
        for (Py_ssize_t i = lo; i < hi; ++i) out[i] = 0.0;
        for (Py_ssize_t f = 0; f < d; ++f) {
            const double cf = c[f];
            const double* __restrict xf = Xt + f * n;
            for (Py_ssize_t i = lo; i < hi; ++i) {
                const double t = xf[i] - cf;
                out[i] = out[i] + t * t;
            }
        }
        if (closest)
            for (Py_ssize_t i = lo; i < hi; ++i) out[i] = closest[i] < out[i] ? closest[i] : out[i];
    }
    """
    void fastfc_cand_cols(const double* Xt, Py_ssize_t n, Py_ssize_t d, Py_ssize_t lo, Py_ssize_t hi,
                          const double* c, const double* closest, double* out) noexcept nogil

cdef extern from *:
    """
    #include <math.h>
    #include <stdlib.h>
    /* k-FED's starts (fastfc.kfed._start_inits): rows' squared distances with the rounding of the Numba
       kernels fastfc._kernels._kfed (NumPy's ((A - b) ** 2).sum(1) for r <= 128 features): up to 7 features
       one running sum from 0 in feature order; 8 to 128 eight partial sums (lane q < 8 sums the squares of
       features q, q + 8, ... below r - r % 8), combined ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)),
       then the last r % 8 features added in order. At: the rows feature-major (feature c of row i at
       At[c * n + i]), so rows sit side by side in vector lanes, each with its own operations in that order
       (no fused multiply-adds): the same values as one row alone. */
    #if defined(__GNUC__) && !defined(__clang__)
    #define FASTFC_KS_NOFMA __attribute__((optimize("fp-contract=off")))
    #define FASTFC_KS_INLINE static inline __attribute__((always_inline))
    #else
    #define FASTFC_KS_NOFMA
    #define FASTFC_KS_INLINE static inline
    #endif
    #define FASTFC_KS_LANES 64
    #define FASTFC_KS_BLOCK 256

    /* one row's squared distance, r < 16 features (a constant where it is inlined): x = At + i */
    FASTFC_KS_INLINE double fastfc_ks_d(const double* __restrict x, Py_ssize_t n, const double* __restrict b,
                                        const int r) {
        double o = 0.0;
        int c = 0;
        if (r >= 8) {
            double s[8];
            for (int q = 0; q < 8; ++q) {
                const double t = x[q * n] - b[q];
                s[q] = t * t;
            }
            o = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
            c = 8;
        }
        for (; c < r; ++c) {
            const double t = x[c * n] - b[c];
            o = o + t * t;
        }
        return o;
    }

    /* out[i] = squared distance of row lo + i to b, i < m, for r >= 16 features (eight partial sums per row
       in a block of lanes, then the combination and the remainder) */
    FASTFC_SEED_CLONES static void fastfc_ks_dist_wide(const double* __restrict At, Py_ssize_t n, Py_ssize_t r,
                                                      Py_ssize_t lo, Py_ssize_t m_all, const double* __restrict b,
                                                      double* __restrict out) {
        const double* __restrict X = At + lo;
        const Py_ssize_t mm = r - r % 8;
        double S[8][FASTFC_KS_LANES];
        for (Py_ssize_t i0 = 0; i0 < m_all; i0 += FASTFC_KS_LANES) {
            const Py_ssize_t m = m_all - i0 < FASTFC_KS_LANES ? m_all - i0 : FASTFC_KS_LANES;
            for (int q = 0; q < 8; ++q) {
                const double bc = b[q];
                const double* __restrict x = X + q * n + i0;
                for (Py_ssize_t i = 0; i < m; ++i) {
                    const double t = x[i] - bc;
                    S[q][i] = t * t;
                }
            }
            for (Py_ssize_t c = 8; c < mm; c += 8)
                for (int q = 0; q < 8; ++q) {
                    const double bc = b[c + q];
                    const double* __restrict x = X + (c + q) * n + i0;
                    for (Py_ssize_t i = 0; i < m; ++i) {
                        const double t = x[i] - bc;
                        S[q][i] = S[q][i] + t * t;
                    }
                }
            double* __restrict o = out + i0;
            for (Py_ssize_t i = 0; i < m; ++i)
                o[i] = ((S[0][i] + S[1][i]) + (S[2][i] + S[3][i])) + ((S[4][i] + S[5][i]) + (S[6][i] + S[7][i]));
            for (Py_ssize_t c = mm; c < r; ++c) {
                const double bc = b[c];
                const double* __restrict x = X + c * n + i0;
                for (Py_ssize_t i = 0; i < m; ++i) {
                    const double t = x[i] - bc;
                    o[i] = o[i] + t * t;
                }
            }
        }
    }

    #define FASTFC_KS_SWITCH(r, BODY) switch (r) { \
        case 1: BODY(1); break; case 2: BODY(2); break; case 3: BODY(3); break; case 4: BODY(4); break; \
        case 5: BODY(5); break; case 6: BODY(6); break; case 7: BODY(7); break; case 8: BODY(8); break; \
        case 9: BODY(9); break; case 10: BODY(10); break; case 11: BODY(11); break; case 12: BODY(12); break; \
        case 13: BODY(13); break; case 14: BODY(14); break; case 15: BODY(15); break; default: break; }

    /* a seeding step's distance pass: closest[i] = d(i, b) (first), else the smaller of the two (d < closest
       replaces it, as the Numba kernel); col: scratch of n values for r >= 16 */
    FASTFC_SEED_CLONES static void fastfc_ks_dmin(const double* __restrict At, Py_ssize_t n, Py_ssize_t r,
                                                 const double* __restrict b, double* __restrict closest, int first,
                                                 double* __restrict col) {
        #define FASTFC_KS_DMIN(R) \
            if (first) { for (Py_ssize_t i = 0; i < n; ++i) closest[i] = fastfc_ks_d(At + i, n, b, R); } \
            else for (Py_ssize_t i = 0; i < n; ++i) { \
                const double v = fastfc_ks_d(At + i, n, b, R); \
                closest[i] = v < closest[i] ? v : closest[i]; }
        if (r < 16) {
            FASTFC_KS_SWITCH(r, FASTFC_KS_DMIN)
            return;
        }
        #undef FASTFC_KS_DMIN
        fastfc_ks_dist_wide(At, n, r, 0, n, b, first ? closest : col);
        if (!first)
            for (Py_ssize_t i = 0; i < n; ++i) closest[i] = col[i] < closest[i] ? col[i] : closest[i];
    }

    /* a proximity block's distances: D[j * FASTFC_KS_BLOCK + i] = d(lo + i, S_j) for every seed j, with the
       smallest s1[i] (first index near[i]) and the runner-up s2[i] (as a multiset: a repeated smallest is
       its own runner-up) taken as they come */
    FASTFC_SEED_CLONES static void fastfc_ks_dnear(const double* __restrict At, Py_ssize_t n, Py_ssize_t r,
                                                  Py_ssize_t lo, Py_ssize_t m, const double* __restrict S,
                                                  Py_ssize_t k, double* __restrict D, double* __restrict s1,
                                                  double* __restrict s2, int* __restrict near) {
        for (Py_ssize_t i = 0; i < m; ++i) {
            s1[i] = INFINITY;
            s2[i] = INFINITY;
            near[i] = 0;
        }
        for (Py_ssize_t j = 0; j < k; ++j) {
            const double* __restrict b = S + j * r;
            double* __restrict dj = D + j * FASTFC_KS_BLOCK;
            #define FASTFC_KS_DNEAR(R) \
                for (Py_ssize_t i = 0; i < m; ++i) dj[i] = fastfc_ks_d(At + lo + i, n, b, R);
            if (r < 16) {
                FASTFC_KS_SWITCH(r, FASTFC_KS_DNEAR)
            } else {
                fastfc_ks_dist_wide(At, n, r, lo, m, b, dj);
            }
            #undef FASTFC_KS_DNEAR
            const int jj = (int)j;
            for (Py_ssize_t i = 0; i < m; ++i) {
                const double v = dj[i];
                const double a = s1[i], c = s2[i];
                const int lt = v < a;
                s2[i] = lt ? a : (v < c ? v : c);
                s1[i] = lt ? v : a;
                near[i] = lt ? jj : near[i];
            }
        }
    }

    /* eight running sums side by side (np.cumsum of each: a sequential sum from 0 in row order) over
       c[t * n ...] into o[t * n ...]: the chains are independent, so their additions overlap instead of
       waiting on each other */
    static void fastfc_ks_cumsum8(const double* __restrict c, double* __restrict o, Py_ssize_t n) {
        double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0, a4 = 0.0, a5 = 0.0, a6 = 0.0, a7 = 0.0;
        for (Py_ssize_t i = 0; i < n; ++i) {
            a0 = a0 + c[i];
            a1 = a1 + c[n + i];
            a2 = a2 + c[2 * n + i];
            a3 = a3 + c[3 * n + i];
            a4 = a4 + c[4 * n + i];
            a5 = a5 + c[5 * n + i];
            a6 = a6 + c[6 * n + i];
            a7 = a7 + c[7 * n + i];
            o[i] = a0;
            o[n + i] = a1;
            o[2 * n + i] = a2;
            o[3 * n + i] = a3;
            o[4 * n + i] = a4;
            o[5 * n + i] = a5;
            o[6 * n + i] = a6;
            o[7 * n + i] = a7;
        }
    }

    /* np.searchsorted(cum, v, side="right") capped at n - 1: the first i with cum[i] > v */
    static Py_ssize_t fastfc_ks_search(const double* cum, Py_ssize_t n, double v) {
        Py_ssize_t lo = 0, hi = n;
        while (lo < hi) {
            const Py_ssize_t mid = (lo + hi) >> 1;
            if (cum[mid] <= v) lo = mid + 1;
            else hi = mid;
        }
        return lo < n - 1 ? lo : n - 1;
    }

    /* The 1/3-proximity step of seeds S (k x r, row-major), rows in blocks of FASTFC_KS_BLOCK: per row the
       nearest seed near and best = sqrt(s1), second = sqrt(s2); an earlier seed whose squared distance
       has the same root wins (only possible within a relative 2**-40 of s1, hence only when
       s2 <= s1 + s1 * 2**-40); the row joins the set of near when k == 1 or 3 best <= second: count + 1 and
       its values added (rows in order). The Numba kernel fastfc._kernels._kfed.proximity_sums with
       nearest_two_roots, the same values. */
    FASTFC_KS_NOFMA static void fastfc_ks_proximity(const double* A, const double* At, Py_ssize_t n, Py_ssize_t r,
                                                    const double* S, Py_ssize_t k, double* D, double* s1, double* s2,
                                                    int* near, long long* counts, double* sums) {
        for (Py_ssize_t j = 0; j < k; ++j) counts[j] = 0;
        for (Py_ssize_t j = 0; j < k * r; ++j) sums[j] = 0.0;
        for (Py_ssize_t lo = 0; lo < n; lo += FASTFC_KS_BLOCK) {
            const Py_ssize_t m = n - lo < FASTFC_KS_BLOCK ? n - lo : FASTFC_KS_BLOCK;
            fastfc_ks_dnear(At, n, r, lo, m, S, k, D, s1, s2, near);
            for (Py_ssize_t i = 0; i < m; ++i) {
                const double a = s1[i];
                const double best = sqrt(a);
                if (!(k == 1 || 3.0 * best <= sqrt(s2[i]))) continue;
                int nr = near[i];
                const double lim = a + a * 0x1p-40;
                if (s2[i] <= lim)  /* another value within 2**-40 of the smallest: an earlier one of the same root */
                    for (int j = 0; j < nr; ++j) {
                        const double v = D[j * FASTFC_KS_BLOCK + i];
                        if (v <= lim && sqrt(v) == best) {
                            nr = j;
                            break;
                        }
                    }
                const double* __restrict row = A + (lo + i) * r;
                double* __restrict sm = sums + nr * r;
                counts[nr] += 1;
                for (Py_ssize_t c = 0; c < r; ++c) sm[c] = sm[c] + row[c];
            }
        }
    }

    /* All starts of one client: D^2 seeding (one candidate a step) from first[s] and the uniforms
       u[s * (k - 1) + j - 1] of step j, then the proximity step of the seeds. Returns 0, or -1 when a work
       buffer cannot be allocated (nothing is then valid). done[s] = k, or the step j that found no mass
       (its proximity step is not run). */
    static int fastfc_ks_run(const double* A, Py_ssize_t n, Py_ssize_t r, Py_ssize_t k, Py_ssize_t n_init,
                             const long long* first, const double* u, long long* idx, long long* counts,
                             double* sums, long long* done) {
        enum { G = 8 };
        const Py_ssize_t n_pad = (n_init + G - 1) / G * G;
        int status = -1;
        double* At = (double*)malloc(sizeof(double) * (size_t)(r * n));
        double* closest = (double*)calloc((size_t)(n_pad * n), sizeof(double));
        double* cum = (double*)malloc(sizeof(double) * (size_t)((G + 1) * n));
        double* D = (double*)malloc(sizeof(double) * (size_t)(k * FASTFC_KS_BLOCK));
        double* S = (double*)malloc(sizeof(double) * (size_t)(k * r));
        double* s12 = (double*)malloc(sizeof(double) * 2 * FASTFC_KS_BLOCK);
        int* near = (int*)malloc(sizeof(int) * FASTFC_KS_BLOCK);
        double* col;
        Py_ssize_t g0, g1, s, j, c, i;
        if (!At || !closest || !cum || !D || !S || !s12 || !near) goto out;
        col = cum + G * n;
        for (i = 0; i < n; ++i)
            for (c = 0; c < r; ++c) At[c * n + i] = A[i * r + c];
        for (s = 0; s < n_init; ++s) {
            idx[s * k] = first[s];
            done[s] = k;
            fastfc_ks_dmin(At, n, r, A + first[s] * r, closest + s * n, 1, col);
        }
        /* the starts in groups of eight, in lock step: each step's running sums of the group side by side
           (the spare chains of a short group sum zeros; their outputs are not read) */
        for (g0 = 0; g0 < n_init; g0 += G) {
            g1 = n_init - g0 < G ? n_init : g0 + G;
            for (j = 1; j < k; ++j) {
                fastfc_ks_cumsum8(closest + g0 * n, cum, n);
                for (s = g0; s < g1; ++s) {
                    const double* cs = cum + (s - g0) * n;
                    double total;
                    Py_ssize_t pick;
                    if (done[s] != k) continue;
                    total = cs[n - 1];
                    if (!(total > 0.0)) {
                        done[s] = j;
                        continue;
                    }
                    pick = fastfc_ks_search(cs, n, u[s * (k - 1) + j - 1] * total);
                    idx[s * k + j] = pick;
                    fastfc_ks_dmin(At, n, r, A + pick * r, closest + s * n, 0, col);
                }
            }
        }
        for (s = 0; s < n_init; ++s) {
            if (done[s] != k) continue;
            for (j = 0; j < k; ++j)
                for (c = 0; c < r; ++c) S[j * r + c] = A[idx[s * k + j] * r + c];
            fastfc_ks_proximity(A, At, n, r, S, k, D, s12, s12 + FASTFC_KS_BLOCK, near, counts + s * k,
                                sums + s * k * r);
        }
        status = 0;
    out:
        free(At); free(closest); free(cum); free(D); free(S); free(s12); free(near);
        return status;
    }
    """
    int fastfc_ks_run(const double* A, Py_ssize_t n, Py_ssize_t r, Py_ssize_t k, Py_ssize_t n_init,
                      const long long* first, const double* u, long long* idx, long long* counts,
                      double* sums, long long* done) noexcept nogil


#: clients of at most this many values (rows x features) get a feature-major copy for the distance pass
cdef Py_ssize_t _COLS_MAX_ELEMS = 1 << 20

ctypedef fused floating:
    float
    double


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef inline double _sqdist_rows(const floating* a, const floating* b, Py_ssize_t d) noexcept nogil:
    """``sum_f (double(a[f]) - double(b[f]))**2``, summed in the order f = 0 .. d-1."""
    cdef double s = 0.0
    cdef double t
    cdef Py_ssize_t f
    for f in range(d):
        t = <double>a[f] - <double>b[f]
        s = s + t * t
    return s


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef inline Py_ssize_t _draw(const double* cum, Py_ssize_t n, double total, double u) noexcept nogil:
    """First index with ``cum[i] > u * total`` (NumPy ``searchsorted(side="right")``), at most n - 1."""
    cdef double target = u * total
    cdef Py_ssize_t lo = 0
    cdef Py_ssize_t hi = n
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) // 2
        if cum[mid] <= target:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < n - 1 else n - 1


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _candidate_dists(
    const floating* X,
    Py_ssize_t lo,
    Py_ssize_t hi,
    Py_ssize_t n,
    Py_ssize_t d,
    const Py_ssize_t* rows,
    Py_ssize_t n_rows,
    const double* closest,
    double* cand,
    const double* Xt,
) noexcept nogil:
    """``cand[t * n + i] = min(closest[i], ||x_i - x_rows[t]||^2)`` for rows ``lo <= i < hi``.

    With ``closest == NULL``: ``cand[t * n + i] = ||x_i - x_rows[t]||^2``.
    """
    cdef Py_ssize_t i, t, f
    cdef double v, a0, a1, a2, a3, t0, t1, t2, t3, cf
    cdef const floating* c
    cdef const floating* x0
    cdef double* out
    cdef double cbuf[512]
    if Xt != NULL and d <= 512:  # the rows in vector lanes (fastfc_cand_cols): the same values
        for t in range(n_rows):
            for f in range(d):
                cbuf[f] = Xt[f * n + rows[t]]
            fastfc_cand_cols(Xt, n, d, lo, hi, cbuf, closest, cand + t * n)
        return
    for t in range(n_rows):
        c = X + rows[t] * d
        out = cand + t * n
        i = lo
        # four rows side by side (independent chains), each summed in feature order
        while i + 4 <= hi:
            x0 = X + i * d
            a0 = 0.0
            a1 = 0.0
            a2 = 0.0
            a3 = 0.0
            for f in range(d):
                cf = <double>c[f]
                t0 = <double>x0[f] - cf
                t1 = <double>x0[d + f] - cf
                t2 = <double>x0[2 * d + f] - cf
                t3 = <double>x0[3 * d + f] - cf
                a0 = a0 + t0 * t0
                a1 = a1 + t1 * t1
                a2 = a2 + t2 * t2
                a3 = a3 + t3 * t3
            out[i] = a0
            out[i + 1] = a1
            out[i + 2] = a2
            out[i + 3] = a3
            i = i + 4
        while i < hi:
            out[i] = _sqdist_rows(X + i * d, c, d)
            i = i + 1
        if closest != NULL:
            for i in range(lo, hi):
                if closest[i] < out[i]:
                    out[i] = closest[i]


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef inline void _four_sums(const double* c, Py_ssize_t n, double* out) noexcept nogil:
    """``out[t] = sum_i c[t * n + i]`` for t = 0..3, each summed serially in row order (from 0.0)."""
    cdef const double* c1 = c + n
    cdef const double* c2 = c1 + n
    cdef const double* c3 = c2 + n
    cdef double a0 = 0.0
    cdef double a1 = 0.0
    cdef double a2 = 0.0
    cdef double a3 = 0.0
    cdef Py_ssize_t i
    for i in range(n):
        a0 = a0 + c[i]
        a1 = a1 + c1[i]
        a2 = a2 + c2[i]
        a3 = a3 + c3[i]
    out[0] = a0
    out[1] = a1
    out[2] = a2
    out[3] = a3


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _all_candidate_dists(
    const floating* X,
    Py_ssize_t n,
    Py_ssize_t d,
    const Py_ssize_t* rows,
    Py_ssize_t n_rows,
    const double* closest,
    double* cand,
    int n_threads,
    Py_ssize_t chunk_size,
    const double* Xt,
) noexcept nogil:
    """:func:`_candidate_dists` over all rows, chunks of ``chunk_size`` rows spread over threads."""
    cdef Py_ssize_t n_chunks = (n + chunk_size - 1) // chunk_size
    cdef Py_ssize_t ch, lo, hi
    if n_threads <= 1 or n_chunks <= 1:
        # chunk by chunk as well: a chunk's rows stay in cache across the candidates
        for ch in range(n_chunks):
            lo = ch * chunk_size
            hi = lo + chunk_size
            if hi > n:
                hi = n
            _candidate_dists(X, lo, hi, n, d, rows, n_rows, closest, cand, Xt)
        return
    for ch in prange(n_chunks, schedule="static", num_threads=n_threads):
        lo = ch * chunk_size
        hi = lo + chunk_size
        if hi > n:
            hi = n
        _candidate_dists(X, lo, hi, n, d, rows, n_rows, closest, cand, Xt)


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
def kmeanspp_kernel(
    const floating[:, ::1] X,
    const double[::1] uniforms,
    int n_trials,
    long long[::1] seeds,
    double[::1] closest,
    double[:, ::1] cand,
    double[::1] cum,
    int n_threads=1,
    Py_ssize_t chunk_size=1024,
    bint feature_major=True,
):
    """Greedy k-means++ seeds of the rows of ``X`` (row indices), from pre-drawn uniforms.

    The first seed is row ``min(floor(u_0 n), n - 1)``; every next one is the best, by the
    resulting potential ``sum_x min_c ||x - c||^2``, of ``n_trials`` rows drawn with
    probability proportional to the current squared distance to the nearest seed (ties:
    the first drawn; when every row sits on a seed, rows ``floor(u n)``).

    Parameters
    ----------
    X : (n, d) C-contiguous float32/float64, n >= 1
    uniforms : (1 + (k - 1) * n_trials,) float64 U(0, 1) draws
    n_trials : int, >= 1
    seeds : (k,) int64 output, the row of each seed in drawing order
    closest : (n,) float64 output, squared distance of every row to its nearest seed
    cand : (n_trials, n) float64 work buffer
    cum : (n,) float64 work buffer
    n_threads : int
        OpenMP threads (ignored in a serial build).
    chunk_size : int
        Rows per chunk of the distance pass.
    feature_major : bool, default=True
        Clients of at most ``2**20`` values (rows x features) copy their rows feature-major (in
        float64) so that the distance pass puts rows side by side in vector lanes, each row's
        sum with the same operations in the same order (the same values; tested). ``False``
        (or a larger client): the row-by-row pass, which needs no copy.
    """
    cdef Py_ssize_t n = X.shape[0]
    cdef Py_ssize_t d = X.shape[1]
    cdef Py_ssize_t k = seeds.shape[0]
    cdef Py_ssize_t c, t, i, best_t
    cdef Py_ssize_t rows[64]
    cdef double pots[64]
    cdef double total, pot, best_pot
    cdef double* cp
    cdef double* Xt = NULL
    cdef Py_ssize_t f
    if n == 0 or k == 0:
        return
    if n_trials < 1 or n_trials > 64:
        raise ValueError("n_trials must be in 1 .. 64")
    if chunk_size < 1:
        chunk_size = 1
    if feature_major and n * d <= _COLS_MAX_ELEMS and d <= 512:
        # small clients: the rows feature-major in double, so the distance pass puts rows in vector lanes
        # (the same values; without the copy, as when it cannot be allocated, the row-by-row pass)
        Xt = <double*> malloc(n * d * sizeof(double))
        if Xt != NULL:
            with nogil:
                for i in range(n):
                    for f in range(d):
                        Xt[f * n + i] = <double>X[i, f]
    try:
        _kmeanspp_steps(X, uniforms, n_trials, seeds, closest, cand, cum, n_threads, chunk_size, Xt)
    finally:
        free(Xt)


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _kmeanspp_steps(const floating[:, ::1] X, const double[::1] uniforms, int n_trials, long long[::1] seeds,
                          double[::1] closest, double[:, ::1] cand, double[::1] cum, int n_threads,
                          Py_ssize_t chunk_size, const double* Xt) noexcept:
    """The seeding steps of :func:`kmeanspp_kernel` (inputs checked there; ``Xt``: feature-major rows or NULL)."""
    cdef Py_ssize_t n = X.shape[0]
    cdef Py_ssize_t d = X.shape[1]
    cdef Py_ssize_t k = seeds.shape[0]
    cdef Py_ssize_t c, t, i, best_t
    cdef Py_ssize_t rows[64]
    cdef double pots[64]
    cdef double total, pot, best_pot
    cdef double* cp
    with nogil:
        rows[0] = <Py_ssize_t>(uniforms[0] * n)
        if rows[0] > n - 1:
            rows[0] = n - 1
        seeds[0] = rows[0]
        _all_candidate_dists(&X[0, 0], n, d, rows, 1, NULL, &cand[0, 0], n_threads, chunk_size, Xt)
        for i in range(n):
            closest[i] = cand[0, i]
        for c in range(1, k):
            total = 0.0
            for i in range(n):
                total = total + closest[i]
                cum[i] = total
            for t in range(n_trials):
                if total > 0.0:
                    rows[t] = _draw(&cum[0], n, total, uniforms[1 + (c - 1) * n_trials + t])
                else:  # every row sits on a seed: any row will do
                    rows[t] = <Py_ssize_t>(uniforms[1 + (c - 1) * n_trials + t] * n)
                    if rows[t] > n - 1:
                        rows[t] = n - 1
            _all_candidate_dists(&X[0, 0], n, d, rows, n_trials, &closest[0], &cand[0, 0], n_threads, chunk_size, Xt)
            # each candidate's potential summed serially in row order; four candidates' sums side by side
            # (independent chains, each in its own order: the same values, about four times the throughput
            # of one chain at a time, whose additions wait on each other)
            t = 0
            while t + 4 <= n_trials:
                _four_sums(&cand[t, 0], n, &pots[t])
                t = t + 4
            while t < n_trials:
                cp = &cand[t, 0]
                pot = 0.0
                for i in range(n):
                    pot = pot + cp[i]
                pots[t] = pot
                t = t + 1
            best_pot = 0.0
            best_t = -1
            for t in range(n_trials):
                pot = pots[t]
                if best_t < 0 or pot < best_pot:
                    best_pot = pot
                    best_t = t
            seeds[c] = rows[best_t]
            cp = &cand[best_t, 0]
            for i in range(n):
                closest[i] = cp[i]


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _proximity_block(
    const double* A,
    Py_ssize_t lo,
    Py_ssize_t hi,
    Py_ssize_t r,
    const double* S,
    Py_ssize_t k,
    double* acc,
    long long* counts,
    double* sums,
) noexcept nogil:
    """Rows ``lo <= i < hi`` of :func:`proximity_stats_kernel`, added to one block's partials."""
    cdef Py_ssize_t i, j, f
    cdef double t, best, second
    cdef int arg
    cdef const double* a
    for i in range(lo, hi):
        a = A + i * r
        for j in range(k):
            acc[j] = 0.0
            for f in range(r):
                t = a[f] - S[j * r + f]
                acc[j] = acc[j] + t * t
        best = acc[0]
        arg = 0
        for j in range(1, k):
            if acc[j] < best:
                best = acc[j]
                arg = <int>j
        if k > 1:
            second = -1.0
            for j in range(k):
                if j != arg and (second < 0.0 or acc[j] < second):
                    second = acc[j]
            # 3 |a - nu_arg| <= |a - nu_s| for every s != arg, on squared distances
            if not (9.0 * best <= second):
                continue
        counts[arg] += 1
        for f in range(r):
            sums[arg * r + f] += a[f]


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
def proximity_stats_kernel(
    const double[:, ::1] A,
    const double[:, ::1] S,
    long long[::1] counts,
    double[:, ::1] sums,
    Py_ssize_t block_rows,
    int n_threads=1,
):
    """Counts and sums of the 1/3-proximity sets of the seeds ``S`` (Awasthi–Sheffet).

    Row ``a`` belongs to the set of its nearest seed ``r`` (squared distances summed in
    feature order, ties to the lowest index) when ``9 ||a - S_r||^2 <= ||a - S_s||^2`` for
    every other seed ``s`` (with one seed, every row). Rows are cut into blocks of
    ``block_rows`` (a function of the shape only); each block adds its rows in order into
    its own partials, which are then added in block order: the same bits for any thread
    count.

    Parameters
    ----------
    A : (n, r) C-contiguous float64 rows
    S : (k, r) C-contiguous float64 seeds
    counts : (k,) int64 zeroed output
    sums : (k, r) float64 zeroed output
    block_rows : int, >= 1
    n_threads : int
        OpenMP threads (ignored in a serial build).

    Returns
    -------
    ok : bool
        False when a work buffer could not be allocated.
    """
    cdef Py_ssize_t n = A.shape[0]
    cdef Py_ssize_t r = A.shape[1]
    cdef Py_ssize_t k = S.shape[0]
    cdef Py_ssize_t n_blocks, b, j, f, lo, hi
    cdef long long* cpart
    cdef double* spart
    cdef double* acc
    cdef char* bad
    cdef bint failed = False
    if n == 0 or k == 0:
        return True
    if block_rows < 1:
        block_rows = 1
    n_blocks = (n + block_rows - 1) // block_rows
    cpart = <long long*>calloc(n_blocks * k, sizeof(long long))
    spart = <double*>calloc(n_blocks * k * r + 1, sizeof(double))
    bad = <char*>calloc(n_blocks, sizeof(char))
    if cpart == NULL or spart == NULL or bad == NULL:
        free(cpart)
        free(spart)
        free(bad)
        return False
    if n_threads < 1:
        n_threads = 1
    if n_threads > n_blocks:
        n_threads = <int>n_blocks
    for b in prange(n_blocks, schedule="dynamic", nogil=True, num_threads=n_threads):
        lo = b * block_rows
        hi = lo + block_rows
        if hi > n:
            hi = n
        acc = <double*>malloc(k * sizeof(double))
        if acc == NULL:
            bad[b] = 1
        else:
            _proximity_block(&A[0, 0], lo, hi, r, &S[0, 0], k, acc, cpart + b * k, spart + b * k * r)
            free(acc)
    for b in range(n_blocks):
        if bad[b]:
            failed = True
    if not failed:
        with nogil:
            for b in range(n_blocks):
                for j in range(k):
                    counts[j] += cpart[b * k + j]
                    for f in range(r):
                        sums[j, f] += spart[(b * k + j) * r + f]
    free(cpart)
    free(spart)
    free(bad)
    return not failed


@cython.boundscheck(False)
@cython.wraparound(False)
def kfed_starts_kernel(
    const double[:, ::1] A,
    const long long[::1] first,
    const double[:, ::1] uniforms,
    long long[:, ::1] idx,
    long long[:, ::1] counts,
    double[:, :, ::1] sums,
    long long[::1] done,
):
    """Every local start of one k-FED client up to its Lloyd run: D^2 seeding and the 1/3-proximity step.

    Start ``s`` seeds by plain k-means++ (one candidate a step) from row ``first[s]``, step ``j`` drawing
    ``searchsorted(cumsum(closest), uniforms[s, j - 1] * total, side="right")`` (at most ``n - 1``), then
    takes the sizes and row sums of the 1/3-proximity sets of its seeds; the same values, step for step,
    as the Numba kernels :func:`fastfc._kernels._kfed.d2_seed_steps` and
    :func:`fastfc._kernels._kfed.proximity_sums` (squared distances with their rounding, for ``r <= 128``).
    The starts run side by side (each one's running sums beside three others', their distance passes
    from one feature-major copy of ``A``), which is where the time goes on small clients: the running
    sums are chains of dependent additions.

    Parameters
    ----------
    A : (n, r) C-contiguous float64, 1 <= r <= 128
    first : (n_init,) int64, rows in ``0 .. n - 1``
    uniforms : (n_init, k - 1) float64
    idx : (n_init, k) int64 output, the seeds' rows in drawing order
    counts : (n_init, k) int64 output
    sums : (n_init, k, r) float64 output
    done : (n_init,) int64 output
        ``k``, or the step ``j`` at which start ``s`` found no mass left (duplicate rows): its rows
        ``idx[s, :j]`` are set and its proximity outputs are not.

    Returns
    -------
    status : int
        0; -1 when a work buffer could not be allocated (no output is valid).
    """
    cdef Py_ssize_t n = A.shape[0]
    cdef Py_ssize_t r = A.shape[1]
    cdef Py_ssize_t n_init = first.shape[0]
    cdef Py_ssize_t k = idx.shape[1]
    cdef Py_ssize_t s
    cdef int status
    if n < 1 or r < 1 or r > 128 or k < 1 or n_init < 1:
        raise ValueError("kfed_starts_kernel needs 1 <= r <= 128 features and at least one row, seed and start")
    if (idx.shape[0] != n_init or counts.shape[0] != n_init or counts.shape[1] != k or sums.shape[0] != n_init
            or sums.shape[1] != k or sums.shape[2] != r or done.shape[0] != n_init or uniforms.shape[0] != n_init
            or uniforms.shape[1] != k - 1):
        raise ValueError("kfed_starts_kernel: inconsistent shapes")
    for s in range(n_init):
        if first[s] < 0 or first[s] >= n:
            raise ValueError("kfed_starts_kernel: a first seed is not a row")
    with nogil:
        status = fastfc_ks_run(&A[0, 0], n, r, k, n_init, &first[0], &uniforms[0, 0] if k > 1 else NULL,
                               &idx[0, 0], &counts[0, 0], &sums[0, 0, 0], &done[0])
    return status
