# cython: language_level=3
"""Nearest-prototype assignment, optionally under per-prototype diagonal weights.

For every row ``x`` of ``X`` the kernel finds

    argmin_k  sum_j w[k, j] * (x[j] - c[k, j])**2        (w = 1 when unweighted)

and that minimum.  Numeric work only: inputs are validated by
:func:`fastfc._assign.assign_nearest`.

Layout.  Prototypes and weights are passed *transposed*, ``(d, k)`` C-contiguous.
Every distance is summed over features in the fixed order ``j = 0 .. d-1``
(``acc = acc + t * t``, ``t = x_j - c_j``; ``acc + w_j * (t * t)`` when weighted), in the
dtype of ``X``; ties go to the lowest prototype index.  The direct loop
(``FASTFC_DIRECT``) vectorises across *rows*: a block of 32 (float64) / 64 (float32)
rows is transposed to ``d x block`` and each vector lane sums one row's distance in
that order, so the bits are those of the plain per-row loop; it is compiled for
AVX-512, AVX2 and the baseline (target clones), and the module is built with
``-ffp-contract=off`` so that no clone fuses a multiply-add; unweighted rows with two
features take a specialised loop of the same arithmetic (``FASTFC_DIRECT_D2``: no
transposed buffer, no feature loop).  Unweighted rows with
many features may instead go through an FMA screen in the same kernel
(``FASTFC_SCREEN``): it decides rows whose best prototype a rounding-error bound
proves, and leaves the others, and every distance, to the plain loop; it prefetches
the rows a few blocks ahead, a few cache lines per step of its product loop.  Unweighted
rows with two features, labels only, take its two-feature form (``FASTFC_SCREEN_D2``:
float32 lanes of 16 rows, the prototype's index packed into the low bits of the screened
value, the close calls to the plain loop), which needs fewer vector operations than the
exact two-feature loop.  Results do not depend on the number of threads.

Parallelism.  Rows are cut into fixed chunks; chunks are spread over OpenMP
threads (``prange``, ``nogil``) when the extension was built with OpenMP, and
run one after another otherwise.  Each chunk owns a private scratch buffer.

Many features and prototypes.  :func:`assign_nearest_gemm_kernel` (unweighted
only) screens the prototypes of a chunk of rows with one BLAS matrix product,
``||c||^2 - 2 x.c``, and then computes the exact distance, exactly as above,
of every prototype that a rigorous rounding-error bound cannot exclude.  Its
labels and distances are therefore identical to the direct kernel's.

Shared helpers.  Both kernels work on contiguous runs of rows through pointer-based
helpers: :func:`_nearest_direct` (the direct loop) and :func:`_nearest_gemm` (the
BLAS screen: :func:`_screen_row` picks the candidates, :func:`_exact_candidates`
computes their exact distances, summed like the direct loop's).

Federated Lloyd.  :func:`lloyd_stats_kernel` (wrapped by
:func:`fastfc._lloyd.lloyd_stats`) fuses the assignment with the accumulation of
per-cluster counts, raw sums and inertia: per chunk of rows, a float64 copy (scaled
by the feature weights) is labelled by the same helpers (or by
:func:`_nearest_gemm_f32`, a float32 screen on centred coordinates with the same
exact float64 decision) and added to its block's partial statistics; blocks depend
on the shape only and are reduced in order, so results do not depend on threads.
:func:`lloyd_round_kernel` (refinement rounds) gives the same labels, counts and sums;
on AVX-512 + FMA CPUs it screens with the FMA screen's core (``FASTFC_ROUND_SCREEN``,
rows in vector lanes, the rows' dtype) instead of BLAS, and only the rows it cannot
decide get exact distances.
"""
cimport cython
from cython.parallel cimport parallel, prange
from libc.math cimport ldexp, sqrt
from libc.float cimport DBL_EPSILON, FLT_EPSILON
from libc.stdlib cimport calloc, malloc, free
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemm, sgemm

ctypedef fused floating:
    float
    double


def openmp_enabled():
    """True when this extension was compiled with OpenMP."""
    return _OPENMP


def fma_screen_available():
    """True when the FMA screens (``FASTFC_SCREEN``, ``FASTFC_SCREEN_D2``, ``FASTFC_ROUND_SCREEN``) run on this CPU
    (AVX-512 and FMA)."""
    return bool(fastfc_has_avx512_fma())


cdef extern from *:
    """
    #ifdef _OPENMP
    #define FASTFC_OPENMP 1
    #else
    #define FASTFC_OPENMP 0
    #endif
    """
    int FASTFC_OPENMP

_OPENMP = bool(FASTFC_OPENMP)

#: the smallest positive float32 (subnormal), 2^-149: the absolute error of a float32 underflow
cdef double F32_TINY = ldexp(1.0, -149)


cdef inline int _threads_for(int n_threads, Py_ssize_t n_chunks) noexcept:
    """Threads to use: at least 1, at most one per chunk."""
    if n_threads < 1:
        return 1
    if n_threads > n_chunks:
        return <int>n_chunks
    return n_threads


cdef extern from *:
    """
    /* The direct loop, vectorised across rows: a block of RB rows is transposed (d x RB) and, per
       prototype, RB distances are summed at once, each over features j = 0 .. d-1 in order, so every
       row's distance has the bits of the plain per-row loop (t = x_j - c_j; acc = acc + t * t, or
       acc + w_j * (t * t)); the lanes hold different rows. Ties go to the lowest prototype (strict <);
       a NaN distance never replaces the best, as in the plain loop. GCC vector types (64 bytes) are
       lowered to what the clone's target has (AVX-512, AVX2 or SSE2); the module is built with
       -ffp-contract=off, so no clone fuses a multiply-add: all clones give the same bits. */
    #include <stdint.h>
    #include <string.h>
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && __GNUC__ >= 8
    #define FASTFC_DCLONES __attribute__((target_clones("avx512f", "avx2", "default")))
    #else
    #define FASTFC_DCLONES
    #endif
    typedef double fastfc_v8d __attribute__((vector_size(64)));
    typedef long long fastfc_v8l __attribute__((vector_size(64)));
    typedef float fastfc_v16f __attribute__((vector_size(64)));
    typedef int fastfc_v16i __attribute__((vector_size(64)));
    /* vectors of 64 bytes per row block: RB = 4 x lanes rows (32 float64, 64 float32) */
    #define FASTFC_NV 4
    #ifndef FASTFC_PF
    #define FASTFC_PF 4
    #endif
    /* the FMA screen's prefetch distance (blocks); its prefetches are spread over the product loop */
    #ifndef FASTFC_SPF
    #define FASTFC_SPF 2
    #endif
    /* bytes of the scratch a direct call needs for d features (one transposed block, aligned) */
    static Py_ssize_t fastfc_direct_scratch(Py_ssize_t d) { return 64 * FASTFC_NV * (d > 0 ? d : 1) + 64; }
    /* Transposes of a block of rows into the d x RB buffer (pure data movement: no rounding).
       8 x 8 tiles by shuffles of 8-lane vectors (three stages of two-input shuffles); the last
       tile of a row overlaps the previous one when 8 does not divide d (it rewrites the same
       values). d = 2: one even/odd split per two vectors. Other blocks (d < 8 but 2, the last,
       partial block): element by element, the unused lanes set to 0. */
    typedef double fastfc_v8dt __attribute__((vector_size(64)));
    typedef float fastfc_v8f __attribute__((vector_size(32)));
    typedef int fastfc_v8i __attribute__((vector_size(32)));
    #define FASTFC_TILE8(NAME, T, V8, M8)                                                         \\
    static inline __attribute__((always_inline)) void NAME(const T* x, Py_ssize_t ld, T* out,      \\
                                                           Py_ssize_t ldo) {                       \\
        V8 r[8], t[8], u[8], o[8];                                                               \\
        for (int q = 0; q < 8; q++) memcpy(&r[q], x + q * ld, sizeof(V8));                       \\
        for (int q = 0; q < 8; q += 2) {                                                         \\
            t[q] = __builtin_shuffle(r[q], r[q + 1], (M8){0, 8, 2, 10, 4, 12, 6, 14});           \\
            t[q + 1] = __builtin_shuffle(r[q], r[q + 1], (M8){1, 9, 3, 11, 5, 13, 7, 15});       \\
        }                                                                                        \\
        for (int q = 0; q < 8; q += 4)                                                           \\
            for (int h = 0; h < 2; h++) {                                                        \\
                u[q + h] = __builtin_shuffle(t[q + h], t[q + h + 2], (M8){0, 1, 8, 9, 4, 5, 12, 13}); \\
                u[q + h + 2] = __builtin_shuffle(t[q + h], t[q + h + 2], (M8){2, 3, 10, 11, 6, 7, 14, 15}); \\
            }                                                                                    \\
        for (int q = 0; q < 4; q++) {                                                            \\
            o[q] = __builtin_shuffle(u[q], u[q + 4], (M8){0, 1, 2, 3, 8, 9, 10, 11});            \\
            o[q + 4] = __builtin_shuffle(u[q], u[q + 4], (M8){4, 5, 6, 7, 12, 13, 14, 15});      \\
        }                                                                                        \\
        for (int q = 0; q < 8; q++) memcpy(out + q * ldo, &o[q], sizeof(V8));                    \\
    }
    FASTFC_TILE8(fastfc_tile8_f64, double, fastfc_v8dt, fastfc_v8l)
    FASTFC_TILE8(fastfc_tile8_f32, float, fastfc_v8f, fastfc_v8i)
    #define FASTFC_TRANSPOSE(NAME, T, TILE, V, M, L)                                             \\
    static inline __attribute__((always_inline)) void NAME(const T* xb, Py_ssize_t nb,            \\
                                                           Py_ssize_t d, T* XT) {                 \\
        enum { RB = FASTFC_NV * L };                                                             \\
        if (nb == RB && d >= 8) {                                                                \\
            for (Py_ssize_t b = 0; b < RB; b += 8)                                               \\
                for (Py_ssize_t j0 = 0; j0 < d; j0 += 8) {                                       \\
                    Py_ssize_t jj = j0 + 8 <= d ? j0 : d - 8;                                    \\
                    TILE(xb + b * d + jj, d, XT + jj * RB + b, RB);                              \\
                }                                                                                \\
        } else if (nb == RB && d == 2) {                                                         \\
            for (Py_ssize_t b = 0; b < RB; b += L) {                                             \\
                V v0, v1, e, o;                                                                  \\
                memcpy(&v0, xb + 2 * b, sizeof(V));                                              \\
                memcpy(&v1, xb + 2 * b + L, sizeof(V));                                          \\
                e = __builtin_shuffle(v0, v1, FASTFC_EVEN_##L);                                  \\
                o = __builtin_shuffle(v0, v1, FASTFC_ODD_##L);                                   \\
                memcpy(XT + b, &e, sizeof(V));                                                   \\
                memcpy(XT + RB + b, &o, sizeof(V));                                              \\
            }                                                                                    \\
        } else {                                                                                 \\
            for (Py_ssize_t j = 0; j < d; j++) {                                                 \\
                T* col = XT + j * RB;                                                            \\
                for (Py_ssize_t b = 0; b < nb; b++) col[b] = xb[b * d + j];                      \\
                if (nb < RB)                                                                     \\
                    for (Py_ssize_t b = nb; b < RB; b++) col[b] = 0;                             \\
            }                                                                                    \\
        }                                                                                        \\
    }
    #define FASTFC_EVEN_8 ((fastfc_v8l){0, 2, 4, 6, 8, 10, 12, 14})
    #define FASTFC_ODD_8 ((fastfc_v8l){1, 3, 5, 7, 9, 11, 13, 15})
    #define FASTFC_EVEN_16 ((fastfc_v16i){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
    #define FASTFC_ODD_16 ((fastfc_v16i){1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31})
    FASTFC_TRANSPOSE(fastfc_transpose_f64, double, fastfc_tile8_f64, fastfc_v8d, fastfc_v8l, 8)
    FASTFC_TRANSPOSE(fastfc_transpose_f32, float, fastfc_tile8_f32, fastfc_v16f, fastfc_v16i, 16)
    /* The direct loop for two features, unweighted (FASTFC_DIRECT calls it): the same sums in the same
       order, (x_0 - c_0)^2 + (x_1 - c_1)^2, hence the same bits, labels and distances, without the
       transposed buffer and the loop over features: a block's two coordinates are split (even / odd)
       straight from the rows into registers, each prototype's two coordinates are broadcast once per block,
       and the prototype loop carries only the distance, compare and select (the general loop's per-prototype
       feature loop, weighted test and buffer loads cost more than the arithmetic at d = 2). */
    /* The end of a direct block (FASTFC_DIRECT_D2, FASTFC_DIRECT): the labels of its nb rows from the
       lanes of arg, the count of rows whose best distance is NaN or infinite added to bad, and, when
       mindist is not NULL, the best distances. */
    #define FASTFC_BLOCK_STORE(T, IT, RB, best, arg, i0, nb, labels, mindist, bad) do {             \\
        T bo_[RB];                                                                               \\
        IT ao_[RB];                                                                              \\
        memcpy(bo_, (best), sizeof(bo_));                                                        \\
        memcpy(ao_, (arg), sizeof(ao_));                                                         \\
        for (Py_ssize_t b_ = 0; b_ < (nb); b_++) {                                               \\
            (labels)[(i0) + b_] = (int)ao_[b_];                                                  \\
            (bad) += !(bo_[b_] - bo_[b_] == 0); /* NaN or infinity */                            \\
        }                                                                                        \\
        if ((mindist) != NULL)                                                                   \\
            for (Py_ssize_t b_ = 0; b_ < (nb); b_++) (mindist)[(i0) + b_] = bo_[b_];             \\
    } while (0)
    #ifndef FASTFC_D2PF
    #define FASTFC_D2PF 8
    #endif
    #define FASTFC_DIRECT_D2(NAME, T, VT, VI, IT, L)                                                 \\
    static inline __attribute__((always_inline)) Py_ssize_t NAME(const T* X, Py_ssize_t m,        \\
                                                                 Py_ssize_t k, const T* CT,       \\
                                                                 int* labels, T* mindist) {       \\
        enum { RB = FASTFC_NV * L };                                                             \\
        Py_ssize_t bad = 0;                                                                      \\
        for (Py_ssize_t i0 = 0; i0 < m; i0 += RB) {                                              \\
            Py_ssize_t nb = m - i0 < RB ? m - i0 : RB;                                           \\
            VT x0[FASTFC_NV], x1[FASTFC_NV];                                                     \\
            if (i0 + (FASTFC_D2PF + 1) * RB <= m) {                                              \\
                /* software prefetch of a later block (its first touch of a page, too) */        \\
                const char* pf = (const char*)(X + 2 * (i0 + FASTFC_D2PF * RB));                 \\
                for (Py_ssize_t o = 0; o < (Py_ssize_t)(2 * RB * sizeof(T)); o += 64)            \\
                    __builtin_prefetch(pf + o);                                                  \\
            }                                                                                    \\
            if (nb == RB) {                                                                      \\
                for (int v = 0; v < FASTFC_NV; v++) {                                            \\
                    VT a, b;                                                                     \\
                    memcpy(&a, X + 2 * (i0 + v * L), sizeof(VT));                                \\
                    memcpy(&b, X + 2 * (i0 + v * L) + L, sizeof(VT));                            \\
                    x0[v] = __builtin_shuffle(a, b, FASTFC_EVEN_##L);                            \\
                    x1[v] = __builtin_shuffle(a, b, FASTFC_ODD_##L);                             \\
                }                                                                                \\
            } else {                                                                             \\
                T t0[RB], t1[RB];                                                                \\
                for (Py_ssize_t b = 0; b < RB; b++) {                                            \\
                    t0[b] = b < nb ? X[2 * (i0 + b)] : 0;                                        \\
                    t1[b] = b < nb ? X[2 * (i0 + b) + 1] : 0;                                    \\
                }                                                                                \\
                memcpy(x0, t0, sizeof(t0));                                                      \\
                memcpy(x1, t1, sizeof(t1));                                                      \\
            }                                                                                    \\
            VT best[FASTFC_NV];                                                                  \\
            VI arg[FASTFC_NV];                                                                   \\
            {                                                                                    \\
                /* prototype 0: 0 + t * t is t * t (a square is never -0) */                     \\
                T c0 = CT[0], c1 = CT[k];                                                        \\
                for (int v = 0; v < FASTFC_NV; v++) {                                            \\
                    VT t = x0[v] - c0, u = x1[v] - c1;                                           \\
                    best[v] = t * t + u * u;                                                     \\
                    arg[v] = (VI){0};                                                            \\
                }                                                                                \\
            }                                                                                    \\
            for (Py_ssize_t c = 1; c < k; c++) {                                                 \\
                T c0 = CT[c], c1 = CT[k + c];                                                    \\
                VI cv = (VI){0} + (IT)c;  /* one broadcast of the index per prototype */          \\
                for (int v = 0; v < FASTFC_NV; v++) {                                            \\
                    VT t = x0[v] - c0, u = x1[v] - c1;                                           \\
                    VT a = t * t + u * u;                                                        \\
                    VI lt = (VI)(a < best[v]);                                                   \\
                    best[v] = (VT)(((VI)a & lt) | ((VI)best[v] & ~lt));                          \\
                    arg[v] = (arg[v] & ~lt) | (lt & cv);                                         \\
                }                                                                                \\
            }                                                                                    \\
            FASTFC_BLOCK_STORE(T, IT, RB, best, arg, i0, nb, labels, mindist, bad);              \\
        }                                                                                        \\
        return bad;                                                                              \\
    }
    FASTFC_DIRECT_D2(fastfc_direct_d2_f64, double, fastfc_v8d, fastfc_v8l, long long, 8)
    FASTFC_DIRECT_D2(fastfc_direct_d2_f32, float, fastfc_v16f, fastfc_v16i, int, 16)
    #define FASTFC_DIRECT(NAME, T, VT, VI, IT, L, TRANSPOSE, D2)                                             \\
    FASTFC_DCLONES static Py_ssize_t NAME(const T* X, Py_ssize_t m, Py_ssize_t d, Py_ssize_t k,   \\
                                    const T* CT, const T* WT, int weighted, void* scratch,        \\
                                    int* labels, T* mindist) {                                    \\
        enum { RB = FASTFC_NV * L };                                                             \\
        if (d == 2 && !weighted) return D2(X, m, k, CT, labels, mindist);                        \\
        T* XT = (T*)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);                                \\
        Py_ssize_t bad = 0;                                                                      \\
        for (Py_ssize_t i0 = 0; i0 < m; i0 += RB) {                                              \\
            Py_ssize_t nb = m - i0 < RB ? m - i0 : RB;                                           \\
            if (i0 + (FASTFC_PF + 1) * RB <= m) {                                                \\
                /* software prefetch of a later block (the rows stream in from memory) */        \\
                const char* pf = (const char*)(X + (i0 + FASTFC_PF * RB) * d);                   \\
                for (Py_ssize_t o = 0; o < (Py_ssize_t)(RB * d * sizeof(T)); o += 64)            \\
                    __builtin_prefetch(pf + o);                                                  \\
            }                                                                                    \\
            TRANSPOSE(X + i0 * d, nb, d, XT);                                                    \\
            VT best[FASTFC_NV];                                                                  \\
            VI arg[FASTFC_NV];                                                                   \\
            for (Py_ssize_t c = 0; c < k; c++) {                                                 \\
                VT acc[FASTFC_NV];                                                               \\
                for (int v = 0; v < FASTFC_NV; v++) acc[v] = (VT){0};                            \\
                if (weighted) {                                                                  \\
                    for (Py_ssize_t j = 0; j < d; j++) {                                         \\
                        const VT* xr = (const VT*)(XT + j * RB);                                 \\
                        T cj = CT[j * k + c];                                                    \\
                        T wj = WT[j * k + c];                                                    \\
                        for (int v = 0; v < FASTFC_NV; v++) {                                    \\
                            VT t = xr[v] - cj;                                                   \\
                            acc[v] = acc[v] + wj * (t * t);                                      \\
                        }                                                                        \\
                    }                                                                            \\
                } else if (d > 0) {                                                              \\
                    /* 0 + t * t is t * t (a square is never -0): start from the first term */   \\
                    const VT* xr = (const VT*)XT;                                                \\
                    T c0 = CT[c];                                                                \\
                    for (int v = 0; v < FASTFC_NV; v++) {                                        \\
                        VT t = xr[v] - c0;                                                       \\
                        acc[v] = t * t;                                                          \\
                    }                                                                            \\
                    for (Py_ssize_t j = 1; j < d; j++) {                                         \\
                        xr = (const VT*)(XT + j * RB);                                           \\
                        T cj = CT[j * k + c];                                                    \\
                        for (int v = 0; v < FASTFC_NV; v++) {                                    \\
                            VT t = xr[v] - cj;                                                   \\
                            acc[v] = acc[v] + t * t;                                             \\
                        }                                                                        \\
                    }                                                                            \\
                }                                                                                \\
                if (c == 0) {                                                                    \\
                    for (int v = 0; v < FASTFC_NV; v++) { best[v] = acc[v]; arg[v] = (VI){0}; }  \\
                } else {                                                                         \\
                    for (int v = 0; v < FASTFC_NV; v++) {                                        \\
                        VI lt = (VI)(acc[v] < best[v]);                                          \\
                        best[v] = (VT)(((VI)acc[v] & lt) | ((VI)best[v] & ~lt));                 \\
                        arg[v] = (arg[v] & ~lt) | (lt & (IT)c);                                  \\
                    }                                                                            \\
                }                                                                                \\
            }                                                                                    \\
            FASTFC_BLOCK_STORE(T, IT, RB, best, arg, i0, nb, labels, mindist, bad);              \\
        }                                                                                        \\
        return bad;                                                                              \\
    }
    FASTFC_DIRECT(fastfc_direct_f64, double, fastfc_v8d, fastfc_v8l, long long, 8, fastfc_transpose_f64,
                  fastfc_direct_d2_f64)
    FASTFC_DIRECT(fastfc_direct_f32, float, fastfc_v16f, fastfc_v16i, int, 16, fastfc_transpose_f32,
                  fastfc_direct_d2_f32)
    /* The direct kernel with an FMA screen (unweighted, AVX-512 + FMA machines, many features):
       per block of rows (transposed as above) and prototype pair, s = x.c with fused
       multiply-adds, a = ||c||^2 - 2 s; per row the smallest a (its prototype) and the second
       smallest. a approximates ||x - c||^2 - ||x||^2 within (d + 2) u (||x|| + ||c||)^2 and the
       exact distance errs by at most (d + 1) u (...)^2, so when the second smallest a exceeds
       the smallest by more than 2 (d + 6) eps (||x|| + max ||c||)^2 (u = eps / 2; the extra
       terms cover the roundings of the bound itself and of ||x||) the exact argmin is that one
       prototype, alone: the label of the plain loop. Other rows (close calls, ties, NaN,
       magnitudes near overflow) take the plain loop (FASTFC_EXACT_ROW). The distance, when asked
       for, is the plain loop's sum for the chosen prototype (FASTFC_EXACT_ONE): no FMA reaches
       a label or a distance (those helpers are separate functions without contraction). The
       underflow term of the bound is 8 (d + 2) times the smallest normal number of the dtype (larger
       than the subnormal spacing it covers; a subnormal operand would cost a microcode assist).
       The decision is vectorised over the block, with (||x|| + max ||c||)^2 bounded by
       2 (||x||^2 + max ||c||^2), so no square root. The rows FASTFC_SPF blocks ahead are prefetched
       inside the product loop, a few cache lines per feature step (a burst of a block's prefetches
       at once stalls on the line-fill buffers; spread out, the loads overlap the multiply-adds:
       CPU ms at 200000 x 100, k = 10, one thread, 12.7 -> 9.7 float32, 21.9 -> 18.2 float64). */
    #include <math.h>
    #include <float.h>
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && __GNUC__ >= 8
    #define FASTFC_AVX512_FMA __attribute__((target("avx512f,fma"), optimize("fp-contract=fast"), noinline))
    #else
    #define FASTFC_AVX512_FMA __attribute__((noinline))
    #endif
    static Py_ssize_t fastfc_screen_scratch(Py_ssize_t d, Py_ssize_t k) {
        return 64 * FASTFC_NV * (d > 0 ? d : 1) + 64 + 8 * (k + 8);
    }
    static int fastfc_has_avx512_fma(void);
    #define FASTFC_SEL(VT, VI, m, a, b) ((VT)(((VI)(a) & (m)) | ((VI)(b) & ~(m))))
    /* The FMA screen's core, shared by the assignment kernel (FASTFC_SCREEN) and the refinement
       round (FASTFC_ROUND_SCREEN): for one transposed block XT (d x RB) and prototypes CT (d x k,
       transposed) with "norms" cn, a = cn[c] - 2 x.c (x.c by fused multiply-adds when the caller
       is compiled with contraction, two prototypes per pass); per lane (row) the smallest a (b1),
       its prototype (a1, the lowest on ties) and the second smallest (b2; +inf when k = 1).
       Inlined into its callers (their target and contraction apply). */
    #define FASTFC_SCREEN_CORE(NAME, T, VT, VI, IT, L)                                           \\
    static inline __attribute__((always_inline)) void NAME(const T* XT, Py_ssize_t d, Py_ssize_t k, \\
                                                           const T* CT, const T* cn, VT* b1,       \\
                                                           VT* b2, VI* a1, const char* pf,         \\
                                                           Py_ssize_t npf) {                       \\
        enum { RB = FASTFC_NV * L };                                                             \\
        /* npf > 0: prefetch the npf cache lines from pf, a few per feature step of the product loop */ \\
        Py_ssize_t pq = 0;                                                                       \\
        const Py_ssize_t prate = npf > 0 ? (npf + ((k + 1) / 2) * d - 1) / (((k + 1) / 2) * d) : 0; \\
        for (int v = 0; v < FASTFC_NV; v++) {                                                    \\
            b1[v] = (VT){0} + (T)INFINITY;                                                       \\
            b2[v] = b1[v];                                                                       \\
            a1[v] = (VI){0};                                                                     \\
        }                                                                                        \\
        for (Py_ssize_t c0 = 0; c0 < k; c0 += 2) {                                           \\
            Py_ssize_t c1 = c0 + 1 < k ? c0 + 1 : c0;                                        \\
            VT s0[FASTFC_NV], s1[FASTFC_NV];                                                 \\
            for (int v = 0; v < FASTFC_NV; v++) { s0[v] = (VT){0}; s1[v] = (VT){0}; }        \\
            for (Py_ssize_t j = 0; j < d; j++) {                                             \\
                const VT* xr = (const VT*)(XT + j * RB);                                     \\
                T p0 = CT[j * k + c0], p1 = CT[j * k + c1];                                  \\
                if (pq < npf)                                                                \\
                    for (Py_ssize_t z = 0; z < prate; z++, pq++)                             \\
                        __builtin_prefetch(pf + 64 * pq);                                    \\
                for (int v = 0; v < FASTFC_NV; v++) {                                        \\
                    s0[v] = s0[v] + xr[v] * p0;                                              \\
                    s1[v] = s1[v] + xr[v] * p1;                                              \\
                }                                                                            \\
            }                                                                                \\
            for (int h = 0; h < 2; h++) {                                                    \\
                Py_ssize_t c = h ? c1 : c0;                                                  \\
                if (h && c1 == c0) break;                                                    \\
                for (int v = 0; v < FASTFC_NV; v++) {                                        \\
                    VT s = h ? s1[v] : s0[v];                                                \\
                    VT a = cn[c] - (s + s);                                                  \\
                    VI lt = (VI)(a < b1[v]);                                                 \\
                    VI lt2 = (VI)(a < b2[v]);                                                \\
                    VT nb2 = FASTFC_SEL(VT, VI, lt2, a, b2[v]);                              \\
                    b2[v] = FASTFC_SEL(VT, VI, lt, b1[v], nb2);                              \\
                    b1[v] = FASTFC_SEL(VT, VI, lt, a, b1[v]);                                \\
                    a1[v] = (a1[v] & ~lt) | (lt & (IT)c);                                    \\
                }                                                                            \\
            }                                                                                \\
        }                                                                                    \\
    }
    FASTFC_SCREEN_CORE(fastfc_screen_core_f64, double, fastfc_v8d, fastfc_v8l, long long, 8)
    FASTFC_SCREEN_CORE(fastfc_screen_core_f32, float, fastfc_v16f, fastfc_v16i, int, 16)
    #define FASTFC_SCREEN(NAME, DIRECT, ONE, ROW, CORE, T, VT, VI, IT, L, TRANSPOSE, EPS, TINY, BIG)    \\
    static __attribute__((noinline)) T ONE(const T* x, Py_ssize_t d, Py_ssize_t k, const T* CT,  \\
                                           Py_ssize_t c) {                                        \\
        T a = 0;                                                                                 \\
        for (Py_ssize_t j = 0; j < d; j++) { T t = x[j] - CT[j * k + c]; a = a + t * t; }        \\
        return a;                                                                                \\
    }                                                                                            \\
    static __attribute__((noinline)) int ROW(const T* x, Py_ssize_t d, Py_ssize_t k, const T* CT, \\
                                             T* best_out) {                                       \\
        T best = ONE(x, d, k, CT, 0);                                                            \\
        int arg = 0;                                                                             \\
        for (Py_ssize_t c = 1; c < k; c++) {                                                     \\
            T a = ONE(x, d, k, CT, c);                                                           \\
            if (a < best) { best = a; arg = (int)c; }                                            \\
        }                                                                                        \\
        *best_out = best;                                                                        \\
        return arg;                                                                              \\
    }                                                                                            \\
    FASTFC_AVX512_FMA static Py_ssize_t NAME##_avx512(const T* X, Py_ssize_t m, Py_ssize_t d, Py_ssize_t k,         \\
                                    const T* CT, void* scratch, int* labels, T* mindist) {         \\
        enum { RB = FASTFC_NV * L };                                                             \\
        T* XT = (T*)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);                                \\
        T* cn = XT + (d > 0 ? d : 1) * RB;                                                       \\
        double cmax2 = 0;                                                                        \\
        for (Py_ssize_t c = 0; c < k; c++) {                                                     \\
            T s = 0;                                                                             \\
            for (Py_ssize_t j = 0; j < d; j++) s = s + CT[j * k + c] * CT[j * k + c];            \\
            cn[c] = s;                                                                           \\
            if ((double)s > cmax2) cmax2 = (double)s;                                            \\
        }                                                                                        \\
        const double cmax = sqrt(cmax2) * (1.0 + 1e-6);                                          \\
        const double coef = 2.0 * (double)(d + 6) * (EPS) * (1.0 + 1e-6);                        \\
        const double tiny = 8.0 * (double)(d + 2) * (TINY);                                      \\
        /* the bound's factors in the dtype (rounding up relative 1e-6 covers their roundings) */ \\
        const T cm2 = (T)(cmax * cmax * (1.0 + 1e-6));                                           \\
        const T cf = (T)(2.0 * coef * (1.0 + 1e-6));                                             \\
        const T tn = (T)(tiny * (1.0 + 1e-6));                                                   \\
        const T big = (T)((BIG) / 8);                                                            \\
        Py_ssize_t bad = 0;                                                                      \\
        for (Py_ssize_t i0 = 0; i0 < m; i0 += RB) {                                              \\
            Py_ssize_t nb = m - i0 < RB ? m - i0 : RB;                                           \\
            const T* xb = X + i0 * d;                                                            \\
            TRANSPOSE(xb, nb, d, XT);                                                            \\
            VT x2[FASTFC_NV], b1[FASTFC_NV], b2[FASTFC_NV];                                      \\
            VI a1[FASTFC_NV];                                                                    \\
            for (int v = 0; v < FASTFC_NV; v++) x2[v] = (VT){0};                                 \\
            for (Py_ssize_t j = 0; j < d; j++) {                                                 \\
                const VT* xr = (const VT*)(XT + j * RB);                                         \\
                for (int v = 0; v < FASTFC_NV; v++) x2[v] = x2[v] + xr[v] * xr[v];               \\
            }                                                                                    \\
            CORE(XT, d, k, CT, cn, b1, b2, a1, (const char*)(X + (i0 + FASTFC_SPF * RB) * d),   \\
                 i0 + (FASTFC_SPF + 1) * RB <= m ? (Py_ssize_t)(RB * d * sizeof(T) / 64) : 0);   \\
            /* decided rows: S' = 2 (||x||^2 + max ||c||^2) >= (||x|| + max ||c||)^2 (no square root), */\\
            /* below overflow, and second smallest > smallest + coef S' + tiny (NaN: not decided) */\\
            IT dm[RB], ao[RB];                                                                   \\
            VI alld = (VI){0} - 1;                                                               \\
            for (int v = 0; v < FASTFC_NV; v++) {                                                \\
                VT q = x2[v] + cm2;                                                              \\
                VT sl = cf * q + tn;                                                             \\
                VI dec = (VI)(q < big) & (VI)(b2[v] > b1[v] + sl);                               \\
                alld = alld & dec;                                                               \\
                memcpy(dm + v * L, &dec, sizeof(VI));                                            \\
                memcpy(ao + v * L, &a1[v], sizeof(VI));                                          \\
            }                                                                                    \\
            if (nb == RB && mindist == NULL) {                                                   \\
                /* the usual case, every row of a full block decided: its labels without the */  \\
                /* row-by-row branch */                                                          \\
                IT ad[L], every = -1;                                                            \\
                memcpy(ad, &alld, sizeof(VI));                                                  \\
                for (int b = 0; b < L; b++) every &= ad[b];                                      \\
                if (every) {                                                                     \\
                    for (int b = 0; b < RB; b++) labels[i0 + b] = (int)ao[b];                    \\
                    continue;                                                                    \\
                }                                                                                \\
            }                                                                                    \\
            for (Py_ssize_t b = 0; b < nb; b++) {                                                \\
                const T* x = xb + b * d;                                                         \\
                if (dm[b]) {                                                                     \\
                    labels[i0 + b] = (int)ao[b];                                                 \\
                    if (mindist != NULL) mindist[i0 + b] = ONE(x, d, k, CT, (Py_ssize_t)ao[b]);  \\
                } else {                                                                         \\
                    T best;                                                                      \\
                    labels[i0 + b] = ROW(x, d, k, CT, &best);                                    \\
                    bad += !(best - best == 0);                                                  \\
                    if (mindist != NULL) mindist[i0 + b] = best;                                 \\
                }                                                                                \\
            }                                                                                    \\
        }                                                                                        \\
        return bad;                                                                              \\
    }                                                                                            \\
    /* Distances asked for: the screen labels the rows, then a plain pass here (outside the    */ \\
    /* AVX-512 function) takes each row's distance to its prototype by ONE, the bits the direct */ \\
    /* loop and ROW give. Calling ONE row by row from inside the AVX-512 function cost about   */ \\
    /* 180 ns a row (issue 15: 270 ms instead of 14 ms for 10^6 x 10 against 10 prototypes).  */ \\
    static Py_ssize_t NAME(const T* X, Py_ssize_t m, Py_ssize_t d, Py_ssize_t k, const T* CT,     \\
                           void* scratch, int* labels, T* mindist) {                              \\
        if (fastfc_has_avx512_fma()) {                                                           \\
            Py_ssize_t bad = NAME##_avx512(X, m, d, k, CT, scratch, labels, NULL);               \\
            if (mindist == NULL) return bad;                                                     \\
            bad = 0;                                                                             \\
            for (Py_ssize_t i = 0; i < m; i++) {                                                 \\
                T a = ONE(X + i * d, d, k, CT, (Py_ssize_t)labels[i]);                           \\
                mindist[i] = a;                                                                  \\
                bad += !(a - a == 0);                                                            \\
            }                                                                                    \\
            return bad;                                                                          \\
        }                                                                                        \\
        return DIRECT(X, m, d, k, CT, CT, 0, scratch, labels, mindist);                          \\
    }
    /* The refinement round's FMA screen (_round_block): the core above on m rows (row stride d, the
       rows' dtype) against the screen operand BT (d x k, transposed) with values e; per row the
       smallest screened value (best), the second smallest (second; both converted exactly to
       float64), the prototype of the smallest (arg) and, from the same transposed block, the
       centred squared norm (sq, SQN); rows up to m_ahead (>= m) may be read ahead (software
       prefetch FASTFC_RPF blocks ahead, never used). No decision here: _round_block compares
       second - best with its own rounding-error bound and computes the exact distances of the rows
       it cannot decide. Returns 0 (nothing written) on CPUs without AVX-512 and FMA. */
    /* prefetch distance (blocks), stride (bytes) and locality of the round screen (0: no prefetch) */
    #ifndef FASTFC_RPF
    #define FASTFC_RPF 4
    #endif
    #ifndef FASTFC_RPF_STEP
    #define FASTFC_RPF_STEP 64
    #endif
    #ifndef FASTFC_RPF_LOC
    #define FASTFC_RPF_LOC 3
    #endif
    /* The refinement round's centred squared norms ||x w - mu||^2 of a transposed block (d x RB, the
       rows in the lanes), with the bits of fastfc_sqnorms_* (defined below, row by row): per row eight
       float64 partial sums s[z mod 8] over the features z < 8 floor(d / 8), the rest into s[0], then
       ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)); t = (double)x * w - mu (x - mu unweighted), s += t * t.
       A separate function without contraction (the module is built with -ffp-contract=off), so no
       multiply-add is fused; writes out[0:nb]. */
    #include <immintrin.h>
    /* eight lanes of a transposed block as float64 (float32: converted, exactly) */
    static inline __attribute__((always_inline, target("avx512f"))) fastfc_v8d fastfc_ld8_f64(const double* p) {
        fastfc_v8d v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    static inline __attribute__((always_inline, target("avx512f"))) fastfc_v8d fastfc_ld8_f32(const float* p) {
        return (fastfc_v8d)_mm512_cvtps_pd(_mm256_loadu_ps(p));
    }
    #define FASTFC_SQN_LANES(NAME, T, L, LD8)                                                   \\
    __attribute__((target("avx512f"), noinline)) static void NAME(const T* XT, Py_ssize_t nb,     \\
                                                                  Py_ssize_t d, const double* w,   \\
                                                                  int weighted, const double* mu,  \\
                                                                  double* out) {                   \\
        enum { RB = FASTFC_NV * L };                                                             \\
        for (Py_ssize_t g = 0; g < nb; g += 8) {                                                 \\
            fastfc_v8d s[8];                                                                     \\
            for (int l = 0; l < 8; l++) s[l] = (fastfc_v8d){0};                                  \\
            Py_ssize_t z = 0;                                                                    \\
            if (weighted) {                                                                      \\
                for (; z + 8 <= d; z += 8)                                                       \\
                    for (int l = 0; l < 8; l++) {                                                \\
                        fastfc_v8d t = LD8(XT + (z + l) * RB + g) * w[z + l] - mu[z + l];        \\
                        s[l] = s[l] + t * t;                                                     \\
                    }                                                                            \\
                for (; z < d; z++) {                                                             \\
                    fastfc_v8d t = LD8(XT + z * RB + g) * w[z] - mu[z];                          \\
                    s[0] = s[0] + t * t;                                                         \\
                }                                                                                \\
            } else {                                                                             \\
                for (; z + 8 <= d; z += 8)                                                       \\
                    for (int l = 0; l < 8; l++) {                                                \\
                        fastfc_v8d t = LD8(XT + (z + l) * RB + g) - mu[z + l];                   \\
                        s[l] = s[l] + t * t;                                                     \\
                    }                                                                            \\
                for (; z < d; z++) {                                                             \\
                    fastfc_v8d t = LD8(XT + z * RB + g) - mu[z];                                 \\
                    s[0] = s[0] + t * t;                                                         \\
                }                                                                                \\
            }                                                                                    \\
            fastfc_v8d v = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));    \\
            double tmp[8];                                                                       \\
            memcpy(tmp, &v, sizeof(v));                                                          \\
            for (Py_ssize_t b = 0; b < 8 && g + b < nb; b++) out[g + b] = tmp[b];                \\
        }                                                                                        \\
    }
    FASTFC_SQN_LANES(fastfc_sqn_lanes_f64, double, 8, fastfc_ld8_f64)
    FASTFC_SQN_LANES(fastfc_sqn_lanes_f32, float, 16, fastfc_ld8_f32)
    #define FASTFC_ROUND_SCREEN(NAME, CORE, SQN, T, VT, VI, IT, L, TRANSPOSE)                   \\
    FASTFC_AVX512_FMA static void NAME##_avx512(const T* X, Py_ssize_t m, Py_ssize_t m_ahead,    \\
                                                Py_ssize_t d, Py_ssize_t k, const T* BT,         \\
                                                const T* e, void* scratch, double* best,         \\
                                                double* second, int* arg, const double* w,       \\
                                                int weighted, const double* mu, double* sq) {    \\
        enum { RB = FASTFC_NV * L };                                                             \\
        T* XT = (T*)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);                                \\
        for (Py_ssize_t i0 = 0; i0 < m; i0 += RB) {                                              \\
            Py_ssize_t nb = m - i0 < RB ? m - i0 : RB;                                           \\
            if (FASTFC_RPF > 0 && i0 + (FASTFC_RPF + 1) * RB <= m_ahead) {                       \\
                /* software prefetch of a later block, also past this call's rows (the next chunk) */ \\
                const char* pf = (const char*)(X + (i0 + FASTFC_RPF * RB) * d);                  \\
                for (Py_ssize_t o = 0; o < (Py_ssize_t)(RB * d * sizeof(T)); o += FASTFC_RPF_STEP) \\
                    __builtin_prefetch(pf + o, 0, FASTFC_RPF_LOC);                               \\
            }                                                                                    \\
            TRANSPOSE(X + i0 * d, nb, d, XT);                                                    \\
            SQN(XT, nb, d, w, weighted, mu, sq + i0);                                            \\
            VT b1[FASTFC_NV], b2[FASTFC_NV];                                                     \\
            VI a1[FASTFC_NV];                                                                    \\
            CORE(XT, d, k, BT, e, b1, b2, a1, NULL, 0);                                          \\
            T t1[RB], t2[RB];                                                                    \\
            IT ta[RB];                                                                           \\
            for (int v = 0; v < FASTFC_NV; v++) {                                                \\
                memcpy(t1 + v * L, &b1[v], sizeof(VT));                                          \\
                memcpy(t2 + v * L, &b2[v], sizeof(VT));                                          \\
                memcpy(ta + v * L, &a1[v], sizeof(VI));                                          \\
            }                                                                                    \\
            for (Py_ssize_t b = 0; b < nb; b++) {                                                \\
                best[i0 + b] = (double)t1[b];                                                    \\
                second[i0 + b] = (double)t2[b];                                                  \\
                arg[i0 + b] = (int)ta[b];                                                        \\
            }                                                                                    \\
        }                                                                                        \\
    }                                                                                            \\
    static int NAME(const T* X, Py_ssize_t m, Py_ssize_t m_ahead, Py_ssize_t d, Py_ssize_t k,     \\
                    const T* BT, const T* e, void* scratch, double* best, double* second,        \\
                    int* arg, const double* w, int weighted, const double* mu, double* sq) {     \\
        if (!fastfc_has_avx512_fma()) return 0;                                                  \\
        NAME##_avx512(X, m, m_ahead, d, k, BT, e, scratch, best, second, arg, w, weighted, mu, sq); \\
        return 1;                                                                                \\
    }
    static int fastfc_has_avx512_fma(void) {
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && __GNUC__ >= 8
        static int known = -1;
        if (known < 0) known = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
        return known;
    #else
        return 0;
    #endif
    }
    FASTFC_SCREEN(fastfc_screen_f64, fastfc_direct_f64, fastfc_exact_one_f64, fastfc_exact_row_f64,
                  fastfc_screen_core_f64, double,
                  fastfc_v8d, fastfc_v8l, long long, 8, fastfc_transpose_f64, DBL_EPSILON, DBL_MIN, DBL_MAX)
    FASTFC_SCREEN(fastfc_screen_f32, fastfc_direct_f32, fastfc_exact_one_f32, fastfc_exact_row_f32,
                  fastfc_screen_core_f32, float,
                  fastfc_v16f, fastfc_v16i, int, 16, fastfc_transpose_f32, FLT_EPSILON, FLT_MIN, FLT_MAX)
    FASTFC_ROUND_SCREEN(fastfc_round_screen_f64, fastfc_screen_core_f64, fastfc_sqn_lanes_f64, double, fastfc_v8d, fastfc_v8l, long long, 8,
                        fastfc_transpose_f64)
    FASTFC_ROUND_SCREEN(fastfc_round_screen_f32, fastfc_screen_core_f32, fastfc_sqn_lanes_f32, float, fastfc_v16f, fastfc_v16i, int, 16,
                        fastfc_transpose_f32)
    /* The two-feature screen (unweighted d = 2, labels only, AVX-512 + FMA CPUs; FASTFC_DIRECT_D2's
       8 vector operations per prototype and lane of rows are 16 rows in float32 but only 8 in float64):
       per block of 64 rows, in float32 lanes of 16 rows (float64 rows rounded to float32),
       s_c = fma(x_1, -2 c_1, fma(x_0, -2 c_0, ||c||^2)) approximates T_c = ||c||^2 - 2 x.c, and
       ||x - c||^2 = ||x||^2 + T_c. The prototype's index is packed into the B = ceil(log2 k) low bits
       of s_c's float32 representation (one bitwise select), so one min gives the smallest packed value
       and its prototype, and min(second, max(smallest, s)) the second smallest: 2 FMAs + 4 operations
       per prototype and 16 rows. Error bound, with Q = (||x|| + max ||c||)^2 <= 2 (||x||^2 + max ||c||^2),
       u = 2^-24: |packed s_c - T_c| <= E = (24 + 2^(B+1)) u Q (the roundings of x, c, ||c||^2 to float32
       and of the two FMAs, the packing: fewer than 2^B units in the last place, the comparison's own
       sum) plus an absolute underflow term below 2^-100; the exact distance (the plain loop's, in the rows'
       dtype with unit roundoff u_in) errs by F <= 4.01 u_in Q. When second - smallest > 2 E + 2 F
       (computed as cf (||x||^2 + max ||c||^2) + 2^-100, cf = 4 (1.001) (E + F) / Q), every other
       prototype's true distance exceeds the smallest's by more than 2 F, so its exact distance is
       strictly larger: the packed prototype is the exact loop's label, alone (no tie). Rows not decided
       (close calls, NaN or infinity, ||x||^2 + max ||c||^2 not below FLT_MAX / 64) take the plain
       per-row loop (FASTFC_EXACT_ROW), the block tail and problems with k < 2, k > KMAX or prototypes
       beyond float32's range the exact two-feature loop; nothing a label depends on is approximate.
       KMAX = 64 (float64 rows), 32 (float32): the screen's 6 operations per prototype and 16 rows run at
       about 1.5 a cycle against the exact loop's 2, and more packed bits widen the bound (more close calls
       left to the plain loop): thread CPU ms at 200000 rows, exact / screen, float64 k = 64 2.36 / 1.24,
       96 3.50 / 2.72, 128 4.56 / 4.23, 256 8.97 / 15.6; float32 k = 15 0.33 / 0.28, 32 0.62 / 0.58,
       40 0.78 / 0.82, 64 1.20 / 1.45 (one-off run, load ~5). */
    #ifndef FASTFC_SD2PF
    #define FASTFC_SD2PF 4
    #endif
    /* 16 rows of a float64 block as float32 lanes: x_0 and x_1 of rows 0..15 */
    static inline __attribute__((always_inline, target("avx512f"))) void fastfc_sd2_load_f64(
            const double* x, __m512* x0, __m512* x1) {
        const __m512i ev = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
        const __m512i od = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
        __m512d a = _mm512_loadu_pd(x), b = _mm512_loadu_pd(x + 8);
        __m512d c = _mm512_loadu_pd(x + 16), d = _mm512_loadu_pd(x + 24);
        __m256 e0 = _mm512_cvtpd_ps(_mm512_permutex2var_pd(a, ev, b));
        __m256 e1 = _mm512_cvtpd_ps(_mm512_permutex2var_pd(c, ev, d));
        __m256 o0 = _mm512_cvtpd_ps(_mm512_permutex2var_pd(a, od, b));
        __m256 o1 = _mm512_cvtpd_ps(_mm512_permutex2var_pd(c, od, d));
        *x0 = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(e0)),
                                                  _mm256_castps_pd(e1), 1));
        *x1 = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(o0)),
                                                  _mm256_castps_pd(o1), 1));
    }
    static inline __attribute__((always_inline, target("avx512f"))) void fastfc_sd2_load_f32(
            const float* x, __m512* x0, __m512* x1) {
        const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
        *x0 = _mm512_permutex2var_ps(a, ev, b);
        *x1 = _mm512_permutex2var_ps(a, od, b);
    }
    #define FASTFC_SCREEN_D2(NAME, T, DIRECT, ROW, LOAD, UIN, KMAX)                                          \\
    FASTFC_AVX512_FMA static Py_ssize_t NAME(const T* X, Py_ssize_t m, Py_ssize_t k, const T* CT,  \\
                                             int* labels) {                                          \\
        enum { SB = 64, NS = 4 };                                                                \\
        float A[KMAX], B[KMAX], E[KMAX];                                                            \\
        int I[256];  /* the indices, broadcast from memory (a load, not a shuffle port) */       \\
        double cmax2 = 0;                                                                        \\
        if (k < 2 || k > KMAX) return DIRECT(X, m, 2, k, CT, CT, 0, NULL, labels, NULL);                              \\
        for (Py_ssize_t c = 0; c < k; c++) {                                                     \\
            double c0 = (double)CT[c], c1 = (double)CT[k + c];                                   \\
            double e = c0 * c0 + c1 * c1;                                                        \\
            if (!(e <= (double)FLT_MAX / 256)) return DIRECT(X, m, 2, k, CT, CT, 0, NULL, labels, NULL);             \\
            A[c] = -2.0f * (float)c0;                                                            \\
            B[c] = -2.0f * (float)c1;                                                            \\
            E[c] = (float)e;                                                                     \\
            I[c] = (int)c;                                                                       \\
            if (e > cmax2) cmax2 = e;                                                            \\
        }                                                                                        \\
        int bits = 0;                                                                            \\
        while (((Py_ssize_t)1 << bits) < k) bits++;                                              \\
        const double u = ldexp(1.0, -24);                                                        \\
        const double erel = (24.0 + 2.0 * (double)(1 << bits)) * u;                              \\
        const double frel = 4.01 * (UIN);                                                        \\
        const __m512 cf = _mm512_set1_ps((float)(4.0 * 1.001 * (erel + frel)));                  \\
        const __m512 cm2 = _mm512_set1_ps((float)(cmax2 * (1.0 + 1e-6)));                        \\
        const __m512 tn = _mm512_set1_ps(ldexpf(1.0f, -100));                                    \\
        const __m512 big = _mm512_set1_ps(FLT_MAX / 64);                                         \\
        const __m512i low = _mm512_set1_epi32((1 << bits) - 1);                                  \\
        Py_ssize_t bad = 0;                                                                      \\
        Py_ssize_t i0 = 0;                                                                       \\
        for (; i0 + SB <= m; i0 += SB) {                                                         \\
            if (i0 + (FASTFC_SD2PF + 1) * SB <= m) {                                             \\
                const char* pf = (const char*)(X + 2 * (i0 + FASTFC_SD2PF * SB));                \\
                for (Py_ssize_t o = 0; o < (Py_ssize_t)(2 * SB * sizeof(T)); o += 64)            \\
                    __builtin_prefetch(pf + o);                                                  \\
                /* and the labels they will take, for writing */                                \\
                const char* pl = (const char*)(labels + i0 + FASTFC_SD2PF * SB);                 \\
                for (Py_ssize_t o = 0; o < (Py_ssize_t)(SB * sizeof(int)); o += 64)              \\
                    __builtin_prefetch(pl + o, 1);                                               \\
            }                                                                                    \\
            __m512 x0[NS], x1[NS], m1[NS], m2[NS];                                               \\
            for (int v = 0; v < NS; v++) LOAD(X + 2 * (i0 + 16 * v), &x0[v], &x1[v]);            \\
            {                                                                                    \\
                const __m512 a = _mm512_set1_ps(A[0]), b = _mm512_set1_ps(B[0]);                 \\
                const __m512 e = _mm512_set1_ps(E[0]);                                           \\
                for (int v = 0; v < NS; v++) {                                                   \\
                    __m512 s = _mm512_fmadd_ps(x1[v], b, _mm512_fmadd_ps(x0[v], a, e));          \\
                    /* (s & ~low) | 0: the index 0 packed */                                     \\
                    m1[v] = _mm512_castsi512_ps(_mm512_andnot_si512(low, _mm512_castps_si512(s))); \\
                    m2[v] = _mm512_set1_ps(INFINITY);                                            \\
                }                                                                                \\
            }                                                                                    \\
            for (Py_ssize_t c = 1; c < k; c++) {                                                 \\
                const __m512 a = _mm512_set1_ps(A[c]), b = _mm512_set1_ps(B[c]);                 \\
                const __m512 e = _mm512_set1_ps(E[c]);                                           \\
                const __m512i cv = _mm512_set1_epi32(I[c]);                                      \\
                for (int v = 0; v < NS; v++) {                                                   \\
                    __m512 s = _mm512_fmadd_ps(x1[v], b, _mm512_fmadd_ps(x0[v], a, e));          \\
                    /* (s & ~low) | c: imm 0xBA is (A & ~B) | C of (A, B, C) = (s, low, cv) */   \\
                    __m512 p = _mm512_castsi512_ps(                                              \\
                        _mm512_ternarylogic_epi32(_mm512_castps_si512(s), low, cv, 0xBA));       \\
                    m2[v] = _mm512_min_ps(m2[v], _mm512_max_ps(m1[v], p));                       \\
                    m1[v] = _mm512_min_ps(m1[v], p);                                             \\
                }                                                                                \\
            }                                                                                    \\
            for (int v = 0; v < NS; v++) {                                                       \\
                __m512 q = _mm512_fmadd_ps(x0[v], x0[v], _mm512_fmadd_ps(x1[v], x1[v], cm2));    \\
                __m512 slack = _mm512_fmadd_ps(cf, q, tn);                                       \\
                __mmask16 dec = _mm512_cmp_ps_mask(q, big, _CMP_LT_OQ)                           \\
                                & _mm512_cmp_ps_mask(m2[v], _mm512_add_ps(m1[v], slack), _CMP_GT_OQ); \\
                _mm512_storeu_si512((void*)(labels + i0 + 16 * v),                               \\
                                    _mm512_and_si512(_mm512_castps_si512(m1[v]), low));          \\
                if (dec != 0xFFFF) {                                                             \\
                    for (int b = 0; b < 16; b++)                                                 \\
                        if (!((dec >> b) & 1)) {                                                 \\
                            T best;                                                              \\
                            Py_ssize_t r = i0 + 16 * v + b;                                      \\
                            labels[r] = ROW(X + 2 * r, 2, k, CT, &best);                         \\
                            bad += !(best - best == 0);                                          \\
                        }                                                                        \\
                }                                                                                \\
            }                                                                                    \\
        }                                                                                        \\
        if (i0 < m) bad += DIRECT(X + 2 * i0, m - i0, 2, k, CT, CT, 0, NULL, labels + i0, NULL);                     \\
        return bad;                                                                              \\
    }
    FASTFC_SCREEN_D2(fastfc_screen_d2_f64, double, fastfc_direct_f64, fastfc_exact_row_f64,
                     fastfc_sd2_load_f64, ldexp(1.0, -53), 64)
    FASTFC_SCREEN_D2(fastfc_screen_d2_f32, float, fastfc_direct_f32, fastfc_exact_row_f32,
                     fastfc_sd2_load_f32, ldexp(1.0, -24), 32)
    """
    Py_ssize_t fastfc_direct_scratch(Py_ssize_t d) noexcept nogil
    int fastfc_has_avx512_fma() noexcept nogil
    int fastfc_round_screen_f64(const double* X, Py_ssize_t m, Py_ssize_t m_ahead, Py_ssize_t d, Py_ssize_t k,
                                const double* BT,
                                const double* e, void* scratch, double* best, double* second,
                                int* arg, const double* w, int weighted, const double* mu,
                                double* sq) noexcept nogil
    int fastfc_round_screen_f32(const float* X, Py_ssize_t m, Py_ssize_t m_ahead, Py_ssize_t d, Py_ssize_t k,
                                const float* BT,
                                const float* e, void* scratch, double* best, double* second,
                                int* arg, const double* w, int weighted, const double* mu,
                                double* sq) noexcept nogil
    Py_ssize_t fastfc_screen_scratch(Py_ssize_t d, Py_ssize_t k) noexcept nogil
    Py_ssize_t fastfc_screen_d2_f64(const double* X, Py_ssize_t m, Py_ssize_t k, const double* CT,
                                    int* labels) noexcept nogil
    Py_ssize_t fastfc_screen_d2_f32(const float* X, Py_ssize_t m, Py_ssize_t k, const float* CT,
                                    int* labels) noexcept nogil
    Py_ssize_t fastfc_screen_f64(const double* X, Py_ssize_t m, Py_ssize_t d, Py_ssize_t k, const double* CT,
                                 void* scratch, int* labels, double* mindist) noexcept nogil
    Py_ssize_t fastfc_screen_f32(const float* X, Py_ssize_t m, Py_ssize_t d, Py_ssize_t k, const float* CT,
                                 void* scratch, int* labels, float* mindist) noexcept nogil
    Py_ssize_t fastfc_direct_f64(const double* X, Py_ssize_t m, Py_ssize_t d, Py_ssize_t k, const double* CT,
                           const double* WT, int weighted, void* scratch, int* labels,
                           double* mindist) noexcept nogil
    Py_ssize_t fastfc_direct_f32(const float* X, Py_ssize_t m, Py_ssize_t d, Py_ssize_t k, const float* CT,
                           const float* WT, int weighted, void* scratch, int* labels,
                           float* mindist) noexcept nogil


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef Py_ssize_t _nearest_direct(
    const floating* X,
    Py_ssize_t m,
    Py_ssize_t d,
    Py_ssize_t k,
    const floating* CT,
    const floating* WT,
    bint weighted,
    void* scratch,
    int* labels,
    floating* mindist,
) noexcept nogil:
    """Nearest prototype of ``m`` contiguous rows ``X`` (row stride ``d``), directly.

    ``CT``/``WT``: (d, k) C-contiguous prototypes/weights, transposed (``WT`` is read
    only when ``weighted``); ``scratch``: ``fastfc_direct_scratch(d)`` bytes; writes
    ``labels[0:m]`` and ``mindist[0:m]`` (``mindist`` may be NULL: not written); returns the
    number of rows whose distance is NaN or infinite. Every distance is summed over features in the
    order 0 .. d-1 (``acc = acc + t * t``, ``acc + w * (t * t)`` when weighted, from 0 in
    the dtype of ``X``), several rows at a time in the lanes of vectors (``FASTFC_DIRECT``);
    ties go to the lowest index.
    """
    if floating is double:
        return fastfc_direct_f64(X, m, d, k, CT, WT, weighted, scratch, labels, mindist)
    else:
        return fastfc_direct_f32(X, m, d, k, CT, WT, weighted, scratch, labels, mindist)


cdef inline Py_ssize_t _nearest_screen(
    const floating* X,
    Py_ssize_t m,
    Py_ssize_t d,
    Py_ssize_t k,
    const floating* CT,
    void* scratch,
    int* labels,
    floating* mindist,
) noexcept nogil:
    """:func:`_nearest_direct` (unweighted) through the FMA screen (``FASTFC_SCREEN``): the same
    labels, distances and count; ``scratch``: ``fastfc_screen_scratch(d, k)`` bytes. Two features
    take the two-feature screen (``FASTFC_SCREEN_D2``) when only labels are asked for, else the exact
    two-feature loop (the general screen costs more than that loop at d = 2)."""
    if d == 2:
        if mindist == NULL and fastfc_has_avx512_fma():
            if floating is double:
                return fastfc_screen_d2_f64(X, m, k, CT, labels)
            else:
                return fastfc_screen_d2_f32(X, m, k, CT, labels)
        return _nearest_direct(X, m, d, k, CT, CT, False, scratch, labels, mindist)
    if floating is double:
        return fastfc_screen_f64(X, m, d, k, CT, scratch, labels, mindist)
    else:
        return fastfc_screen_f32(X, m, d, k, CT, scratch, labels, mindist)


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
def assign_nearest_kernel(
    const floating[:, ::1] X,
    const floating[:, ::1] CT,
    const floating[:, ::1] WT,
    bint weighted,
    int[::1] labels,
    floating[::1] mindist,
    int n_threads=1,
    Py_ssize_t chunk_size=1024,
    bint screen=False,
    const floating[::1] rowscale=None,
):
    """Fill ``labels`` (int32, shape (n,)) and ``mindist`` (shape (n,)).

    Parameters
    ----------
    X : (n, d) C-contiguous float32/float64
    CT : (d, k) prototypes, transposed, same dtype as X
    WT : (d, k) weights, transposed (ignored unless ``weighted``; pass any
        (d, k) array, e.g. ``CT``)
    weighted : bool
    labels : (n,) int32 output
    mindist : (n,) output, dtype of X, or None (distances not written)
    n_threads : int
        OpenMP threads (ignored in a serial build).
    chunk_size : int
        Rows per chunk.
    screen : bool
        Unweighted only: decide most rows with an FMA screen (``FASTFC_SCREEN``, on CPUs with
        AVX-512 and FMA; elsewhere ignored) and the others, and every distance, with the plain
        loop: the same labels and distances, fewer operations for many features.
    rowscale : (d,) same dtype as X, or None
        When given, the rows are those of ``X * rowscale`` (each feature multiplied by its
        factor, one rounding, as NumPy's ``np.multiply``): every chunk's rows are scaled into a
        private buffer of ``chunk_size`` rows and labelled from there, so the result has the
        bits of this kernel on the array ``X * rowscale`` without that (n, d) copy (a row's
        result does not depend on the chunk it is in). ``CT`` are then the scaled prototypes.

    Returns
    -------
    n_bad : int
        Rows whose distance is NaN or infinite (a row with NaN or infinity) or whose label
        is -1 (a chunk's scratch could not be allocated): 0 when all is well.
    """
    if rowscale is not None:
        return _assign_scaled_rows(X, CT, WT, weighted, labels, mindist, n_threads, chunk_size, screen,
                                   rowscale)
    cdef Py_ssize_t n = X.shape[0]
    cdef Py_ssize_t d = CT.shape[0]
    cdef Py_ssize_t k = CT.shape[1]
    cdef Py_ssize_t n_chunks, ch, start, stop, r
    cdef Py_ssize_t bad = 0
    cdef void* acc
    cdef floating* md = NULL
    if n == 0:
        return 0
    if mindist is not None:
        md = &mindist[0]
    if chunk_size < 1:
        chunk_size = 1
    n_chunks = (n + chunk_size - 1) // chunk_size
    n_threads = _threads_for(n_threads, n_chunks)
    screen = screen and not weighted
    if n_threads == 1:
        acc = malloc(fastfc_screen_scratch(d, k))
        if acc == NULL:
            raise MemoryError()
        try:
            with nogil:
                if screen:
                    bad = _nearest_screen(&X[0, 0], n, d, k, &CT[0, 0], acc, &labels[0], md)
                else:
                    bad = _nearest_direct(&X[0, 0], n, d, k, &CT[0, 0], &WT[0, 0], weighted, acc, &labels[0], md)
        finally:
            free(acc)
        return bad
    for ch in prange(n_chunks, schedule="static", nogil=True, num_threads=n_threads):
        start = ch * chunk_size
        stop = start + chunk_size
        if stop > n:
            stop = n
        # one small private scratch per chunk (a transposed block of rows)
        acc = malloc(fastfc_screen_scratch(d, k))
        if acc == NULL:
            # the caller sees -1 and raises MemoryError
            for r in range(start, stop):
                labels[r] = -1
            bad += stop - start
        else:
            if screen:
                bad += _nearest_screen(&X[start, 0], stop - start, d, k, &CT[0, 0], acc, &labels[start],
                                       NULL if md == NULL else md + start)
            else:
                bad += _nearest_direct(&X[start, 0], stop - start, d, k, &CT[0, 0], &WT[0, 0], weighted, acc,
                                       &labels[start], NULL if md == NULL else md + start)
            free(acc)  # both paths (the screened one leaked its scratch, 2.4 MB a call at 10^5 x 50)
    return bad


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef Py_ssize_t _scaled_chunk(
    const floating* X,
    Py_ssize_t m,
    Py_ssize_t d,
    Py_ssize_t k,
    const floating* CT,
    const floating* WT,
    bint weighted,
    bint screen,
    const floating* scale,
    int* labels,
    floating* mindist,
) noexcept nogil:
    """One chunk of ``m`` rows of :func:`assign_nearest_kernel` with ``rowscale``: the rows times
    ``scale`` into a private buffer, then the direct (or screened) loop on it; -1 labels and ``m``
    bad rows when a buffer cannot be allocated."""
    cdef Py_ssize_t r, j
    cdef Py_ssize_t bad
    cdef floating* buf = <floating*>malloc(m * d * sizeof(floating))
    cdef void* acc = malloc(fastfc_screen_scratch(d, k))
    if buf == NULL or acc == NULL:
        free(buf)
        free(acc)
        for r in range(m):
            labels[r] = -1
        return m
    for r in range(m):
        for j in range(d):
            buf[r * d + j] = X[r * d + j] * scale[j]
    if screen:
        bad = _nearest_screen(buf, m, d, k, CT, acc, labels, mindist)
    else:
        bad = _nearest_direct(buf, m, d, k, CT, WT, weighted, acc, labels, mindist)
    free(acc)
    free(buf)
    return bad


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef Py_ssize_t _assign_scaled_rows(
    const floating[:, ::1] X,
    const floating[:, ::1] CT,
    const floating[:, ::1] WT,
    bint weighted,
    int[::1] labels,
    floating[::1] mindist,
    int n_threads,
    Py_ssize_t chunk_size,
    bint screen,
    const floating[::1] rowscale,
) except -1:
    """:func:`assign_nearest_kernel` on the rows ``X * rowscale``, chunk by chunk (see there)."""
    cdef Py_ssize_t n = X.shape[0]
    cdef Py_ssize_t d = CT.shape[0]
    cdef Py_ssize_t k = CT.shape[1]
    cdef Py_ssize_t n_chunks, ch, start, stop
    cdef Py_ssize_t bad = 0
    cdef floating* md = NULL
    if rowscale.shape[0] != d or X.shape[1] != d:
        raise ValueError("rowscale must have one factor per feature")
    if n == 0:
        return 0
    if mindist is not None:
        md = &mindist[0]
    if chunk_size < 1:
        chunk_size = 1
    n_chunks = (n + chunk_size - 1) // chunk_size
    n_threads = _threads_for(n_threads, n_chunks)
    screen = screen and not weighted
    if n_threads == 1:
        with nogil:
            for ch in range(n_chunks):
                start = ch * chunk_size
                stop = start + chunk_size
                if stop > n:
                    stop = n
                bad += _scaled_chunk(&X[start, 0], stop - start, d, k, &CT[0, 0], &WT[0, 0], weighted, screen,
                                     &rowscale[0], &labels[start], NULL if md == NULL else md + start)
        return bad
    for ch in prange(n_chunks, schedule="static", nogil=True, num_threads=n_threads):
        start = ch * chunk_size
        stop = start + chunk_size
        if stop > n:
            stop = n
        bad += _scaled_chunk(&X[start, 0], stop - start, d, k, &CT[0, 0], &WT[0, 0], weighted, screen,
                             &rowscale[0], &labels[start], NULL if md == NULL else md + start)
    return bad


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef inline floating _norm(const floating* x, Py_ssize_t d) noexcept nogil:
    """``||x||``, the squares summed in four partial sums (any order of non-negative terms
    errs by at most (d - 1) u, like the sequential one)."""
    cdef floating s0 = 0
    cdef floating s1 = 0
    cdef floating s2 = 0
    cdef floating s3 = 0
    cdef Py_ssize_t z = 0
    while z + 4 <= d:
        s0 = s0 + x[z] * x[z]
        s1 = s1 + x[z + 1] * x[z + 1]
        s2 = s2 + x[z + 2] * x[z + 2]
        s3 = s3 + x[z + 3] * x[z + 3]
        z = z + 4
    while z < d:
        s0 = s0 + x[z] * x[z]
        z = z + 1
    return sqrt((s0 + s1) + (s2 + s3))


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef inline Py_ssize_t _screen_row(
    floating* a,
    Py_ssize_t k,
    floating slack,
    Py_ssize_t base,
    int* pidx,
    Py_ssize_t n_pairs,
) noexcept nogil:
    """Append to ``pidx`` (as ``base + j``) every ``j`` with ``a[j] <= min(a) + slack``.

    ``a``: one row's k screened values. Branch-free: ``pidx`` needs room for k more
    entries. Returns the new number of entries; with a NaN row, none is appended.
    """
    cdef Py_ssize_t j
    cdef floating best_a = a[0]
    cdef floating t, thr
    for j in range(1, k):
        t = a[j]
        best_a = t if t < best_a else best_a
    thr = best_a + slack
    for j in range(k):
        pidx[n_pairs] = <int>(base + j)
        n_pairs = n_pairs + (a[j] <= thr)
    return n_pairs


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _exact_candidates(
    const floating* X,
    Py_ssize_t m,
    Py_ssize_t d,
    Py_ssize_t k,
    const floating* C,
    const int* pidx,
    Py_ssize_t n_pairs,
    floating* D,
    int* labels,
    floating* mindist,
) noexcept nogil:
    """Exact distance of every candidate ``pidx[p] = r * k + j`` and, per row, the smallest.

    Each distance is summed over features in the order 0 .. d-1 like
    :func:`_nearest_direct`'s; four candidates at a time (independent chains, for
    instruction-level parallelism), into ``D[p]`` (room for ``n_pairs``). Candidates come
    in increasing ``(r, j)``, so ties go to the lowest index. A row without candidates
    (NaN) gets label -1.
    """
    cdef Py_ssize_t p, r, z
    cdef floating t0, t1, t2, t3, a0, a1, a2, a3
    cdef const floating* x0
    cdef const floating* x1
    cdef const floating* x2
    cdef const floating* x3
    cdef const floating* c0
    cdef const floating* c1
    cdef const floating* c2
    cdef const floating* c3
    p = 0
    while p + 4 <= n_pairs:
        x0 = X + (pidx[p] // k) * d
        x1 = X + (pidx[p + 1] // k) * d
        x2 = X + (pidx[p + 2] // k) * d
        x3 = X + (pidx[p + 3] // k) * d
        c0 = C + (pidx[p] % k) * d
        c1 = C + (pidx[p + 1] % k) * d
        c2 = C + (pidx[p + 2] % k) * d
        c3 = C + (pidx[p + 3] % k) * d
        a0 = 0
        a1 = 0
        a2 = 0
        a3 = 0
        for z in range(d):
            t0 = x0[z] - c0[z]
            t1 = x1[z] - c1[z]
            t2 = x2[z] - c2[z]
            t3 = x3[z] - c3[z]
            a0 = a0 + t0 * t0
            a1 = a1 + t1 * t1
            a2 = a2 + t2 * t2
            a3 = a3 + t3 * t3
        D[p] = a0
        D[p + 1] = a1
        D[p + 2] = a2
        D[p + 3] = a3
        p = p + 4
    while p < n_pairs:
        x0 = X + (pidx[p] // k) * d
        c0 = C + (pidx[p] % k) * d
        a0 = 0
        for z in range(d):
            t0 = x0[z] - c0[z]
            a0 = a0 + t0 * t0
        D[p] = a0
        p = p + 1
    for r in range(m):
        labels[r] = -1
        mindist[r] = 0
    for p in range(n_pairs):
        r = pidx[p] // k
        if labels[r] < 0 or D[p] < mindist[r]:
            labels[r] = pidx[p] - <int>(r * k)
            mindist[r] = D[p]


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _nearest_gemm(
    const floating* X,
    int m,
    int d,
    int k,
    const floating* C,
    const floating* cn,
    floating cmax,
    floating* G,
    int* pidx,
    int* labels,
    floating* mindist,
) noexcept nogil:
    """Nearest prototype of ``m`` contiguous rows ``X`` (row stride ``d``) through a BLAS screen.

    ``C``: (k, d) C-contiguous prototypes; ``cn``: their squared norms; ``cmax``: a bound
    of their norms; ``G``: m * k scratch values; ``pidx``: m * k scratch ints. Writes
    ``labels[0:m]`` and ``mindist[0:m]``, identical to :func:`_nearest_direct`'s
    (unweighted); a row with NaN gets label -1. BLAS must be single-threaded.

    Three steps: the product ``G = X C^T``; per row, the candidate prototypes that the
    rounding-error bound cannot exclude (:func:`_screen_row`); their exact distances and
    the smallest (:func:`_exact_candidates`, over ``G``, no longer needed by then).
    """
    cdef char transa = b'T'
    cdef char transb = b'N'
    cdef floating one = 1.0
    cdef floating zero = 0.0
    cdef Py_ssize_t r, j, n_pairs
    cdef floating xn, eps
    cdef floating* row
    if m <= 0:
        return
    # column-major view: G (k x m) = C (d x k)^T @ X_chunk (d x m), i.e. row-major
    # G[r, j] = x_r . c_j
    if floating is double:
        eps = DBL_EPSILON
        dgemm(&transa, &transb, &k, &m, &d, &one, <double*>C, &d,
              <double*>X, &d, &zero, G, &k)
    else:
        eps = FLT_EPSILON
        sgemm(&transa, &transb, &k, &m, &d, &one, <float*>C, &d,
              <float*>X, &d, &zero, G, &k)
    n_pairs = 0
    for r in range(m):
        row = G + r * k
        # the screened values ||c_j||^2 - 2 x.c_j, in place
        for j in range(k):
            row[j] = cn[j] - 2 * row[j]
        xn = _norm(X + r * d, d)
        # ||x - c_j||^2 - ||x||^2 = ||c_j||^2 - 2 x.c_j; the screened value and the exact
        # (sequentially summed) distance each err by at most (d + 2) u (||x|| + ||c_j||)^2,
        # u = eps / 2: candidates within twice (d + 4) eps (||x|| + max ||c||)^2 of the
        # smallest screened value contain the exact argmin (and all its ties).
        n_pairs = _screen_row(row, k, 2 * (d + 4) * eps * (xn + cmax) * (xn + cmax), r * k, pidx, n_pairs)
    _exact_candidates(X, m, d, k, C, pidx, n_pairs, G, labels, mindist)


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _nearest_gemm_f32(
    const double* X,
    int m,
    int d,
    int k,
    const double* C,
    const double* cn,
    double cmax,
    const double* mu,
    double mu_norm,
    const float* Cs32,
    const double* cns,
    double cmaxs,
    float* X32,
    float* G32,
    double* G,
    int* pidx,
    int* labels,
    double* mindist,
) noexcept nogil:
    """:func:`_nearest_gemm` (float64) with the screen in float32, on centred coordinates.

    Same labels and distances as :func:`_nearest_gemm`/:func:`_nearest_direct` on ``X``
    and ``C``: only the candidate set differs (wider), and it provably contains the
    exact argmin and its ties. ``mu`` (d,): a centre of the prototypes; ``mu_norm``:
    a bound of ``||mu||``; ``Cs32``: ``float32(C - mu)`` (k, d); ``cns``: float64 squared
    norms of ``C - mu``; ``cmaxs``: a bound of their norms. Scratch: ``X32`` m * d,
    ``G32`` and ``G`` m * k, ``pidx`` m * k. A chunk whose magnitudes could overflow
    float32 products takes the float64 screen instead.
    """
    cdef char transa = b'T'
    cdef char transb = b'N'
    cdef float one = 1.0
    cdef float zero = 0.0
    cdef Py_ssize_t r, j, z, n_pairs
    cdef double xs, t, t1, t2, t3, ss0, ss1, ss2, ss3, xmax, slack
    cdef const double* x
    cdef float* x32
    cdef double* row
    cdef const float* g
    if m <= 0:
        return
    # centred rows in float32, their (float64) norms kept in mindist meanwhile
    xmax = 0
    for r in range(m):
        x = X + r * d
        x32 = X32 + r * d
        # four independent partial sums (instruction-level parallelism)
        ss0 = 0
        ss1 = 0
        ss2 = 0
        ss3 = 0
        z = 0
        while z + 4 <= d:
            t = x[z] - mu[z]
            t1 = x[z + 1] - mu[z + 1]
            t2 = x[z + 2] - mu[z + 2]
            t3 = x[z + 3] - mu[z + 3]
            ss0 = ss0 + t * t
            ss1 = ss1 + t1 * t1
            ss2 = ss2 + t2 * t2
            ss3 = ss3 + t3 * t3
            x32[z] = <float>t
            x32[z + 1] = <float>t1
            x32[z + 2] = <float>t2
            x32[z + 3] = <float>t3
            z = z + 4
        while z < d:
            t = x[z] - mu[z]
            ss0 = ss0 + t * t
            x32[z] = <float>t
            z = z + 1
        xs = sqrt((ss0 + ss1) + (ss2 + ss3))
        mindist[r] = xs
        xmax = xs if xs > xmax else xmax
    # every float32 product and partial sum is at most ||x - mu|| ||c - mu|| (Cauchy-Schwarz);
    # keep that far below FLT_MAX (and NaN rows, where the comparison fails, go to float64)
    if not (xmax < 1e18 and xmax * cmaxs < 1e36):
        _nearest_gemm(X, m, d, k, C, cn, cmax, G, pidx, labels, mindist)
        return
    sgemm(&transa, &transb, &k, &m, &d, &one, <float*>Cs32, &d, X32, &d, &zero, G32, &k)
    n_pairs = 0
    for r in range(m):
        row = G + r * k
        g = G32 + r * k
        for j in range(k):
            row[j] = cns[j] - 2 * <double>g[j]
        xs = mindist[r]
        # The screened value approximates a_j = ||c_j - mu||^2 - 2 (x - mu).(c_j - mu)
        # = ||x - c_j||^2 - ||x - mu||^2 within E = (d + 3) eps32 ||x - mu|| ||c_j - mu||
        # (+ float64 roundings and float32 underflow, 2^-149 per operand and product), and
        # the exact float64 distance errs by at most e = (d + 2) u64 (||x|| + ||c_j||)^2,
        # ||x|| <= ||x - mu|| + ||mu||: candidates within 2E + 2e of the smallest screened
        # value contain the exact argmin and its ties. E is bounded by
        # (d + 6) eps32 (xs + cmaxs)^2 / 2 and 2e by 2 (d + 4) eps64 (xs + ||mu|| + cmax)^2.
        slack = ((d + 6) * <double>FLT_EPSILON * (xs + cmaxs) * (xs + cmaxs)
                 + 2 * (d + 4) * DBL_EPSILON * (xs + mu_norm + cmax) * (xs + mu_norm + cmax)
                 + 8 * (d * (xs + cmaxs) + d) * F32_TINY)
        n_pairs = _screen_row(row, k, slack, r * k, pidx, n_pairs)
    _exact_candidates(X, m, d, k, C, pidx, n_pairs, G, labels, mindist)


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
def assign_nearest_gemm_kernel(
    const floating[:, ::1] X,
    const floating[:, ::1] C,
    const floating[::1] cn,
    double cmax,
    int[::1] labels,
    floating[::1] mindist,
    int n_threads=1,
    Py_ssize_t chunk_size=256,
):
    """Unweighted nearest prototype through a BLAS screen; same results as the direct kernel.

    Parameters
    ----------
    X : (n, d) C-contiguous float32/float64
    C : (k, d) prototypes, C-contiguous, same dtype as X
    cn : (k,) squared norms of the prototypes
    cmax : float
        An upper bound of the prototypes' norms (``sqrt(max(cn))`` or more).
    labels : (n,) int32 output
    mindist : (n,) output, dtype of X
    n_threads : int
        OpenMP threads (ignored in a serial build). BLAS must be single-threaded
        while this runs (the caller limits it).
    chunk_size : int
        Rows per chunk (fixed by the caller, so results do not depend on threads).
    """
    cdef Py_ssize_t n = X.shape[0]
    cdef Py_ssize_t k = C.shape[0]
    cdef int d = <int>C.shape[1]
    cdef Py_ssize_t n_chunks, ch, start, stop, r
    cdef floating* G
    cdef int* pidx
    cdef floating cm = <floating>cmax
    if n == 0:
        return
    if chunk_size < 1:
        chunk_size = 1
    n_chunks = (n + chunk_size - 1) // chunk_size
    n_threads = _threads_for(n_threads, n_chunks)
    if n_threads == 1:
        G = <floating*>malloc(chunk_size * k * sizeof(floating))
        pidx = <int*>malloc(chunk_size * k * sizeof(int))
        if G == NULL or pidx == NULL:
            free(G)
            free(pidx)
            raise MemoryError()
        try:
            with nogil:
                for ch in range(n_chunks):
                    start = ch * chunk_size
                    stop = start + chunk_size
                    if stop > n:
                        stop = n
                    _nearest_gemm(&X[start, 0], <int>(stop - start), d, <int>k, &C[0, 0], &cn[0], cm, G, pidx,
                                  &labels[start], &mindist[start])
        finally:
            free(G)
            free(pidx)
        return
    for ch in prange(n_chunks, schedule="static", nogil=True, num_threads=n_threads):
        start = ch * chunk_size
        stop = start + chunk_size
        if stop > n:
            stop = n
        G = <floating*>malloc(chunk_size * k * sizeof(floating))
        pidx = <int*>malloc(chunk_size * k * sizeof(int))
        if G == NULL or pidx == NULL:
            for r in range(start, stop):
                labels[r] = -1
        else:
            _nearest_gemm(&X[start, 0], <int>(stop - start), d, <int>k, &C[0, 0], &cn[0], cm, G, pidx,
                          &labels[start], &mindist[start])
        free(G)
        free(pidx)


# --------------------------------------------------------------------------------------
# Fused federated-Lloyd statistics: assignment and accumulation in one pass over the rows
# --------------------------------------------------------------------------------------

ctypedef fused rowfloat:
    float
    double


cdef struct LloydProblem:
    # prototypes (k, d) in the units of the distance, transposed (d, k), squared norms, norm bound
    const double* C
    const double* CT
    const double* cn
    double cmax
    # float32 screen: centre mu (d,), bound of ||mu||, float32(C - mu) (k, d), its norms and bound
    const double* mu
    double mu_norm
    const float* Cs32
    const double* cns
    double cmaxs
    # feature weights (d,)
    const double* w
    Py_ssize_t d
    Py_ssize_t k
    bint weighted
    int path  # 0 direct loop, 1 float64 BLAS screen, 2 float32 BLAS screen


cdef struct LloydWork:
    double* buf    # chunk x d: the chunk's rows in float64 (weighted units)
    float* buf32   # chunk x d (float32 screen)
    double* G      # chunk x k (or k for the direct loop)
    float* G32     # chunk x k (float32 screen)
    int* pidx      # chunk x k (screens)
    int* lab       # chunk
    double* dist   # chunk


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _lloyd_block(
    const rowfloat[:, :] X,
    Py_ssize_t row_start,
    Py_ssize_t row_stop,
    LloydProblem* P,
    bint direct_rows,
    Py_ssize_t chunk_size,
    LloydWork* W,
    long long* counts,
    double* sums,
    double* inertia,
) noexcept nogil:
    """Accumulate rows ``row_start:row_stop`` into one block's partial statistics.

    Chunk by chunk: the chunk's rows are copied (upcast, and multiplied by ``w`` when
    weighted) into ``W.buf`` (chunk_size x d float64) unless ``direct_rows`` (unweighted
    C-contiguous float64 rows, used in place); their nearest prototypes come from
    :func:`_nearest_direct`, :func:`_nearest_gemm` or :func:`_nearest_gemm_f32` (same
    labels and distances); then each row, in order, adds 1 to ``counts[c]``, its raw
    values to ``sums[c, :]`` and its distance to ``inertia[c]``.
    """
    cdef Py_ssize_t d = P.d
    cdef Py_ssize_t k = P.k
    cdef Py_ssize_t start, stop, m, r, j, i
    cdef Py_ssize_t s0 = X.strides[0]
    cdef Py_ssize_t s1 = X.strides[1]
    cdef bint by_column = (s0 if s0 >= 0 else -s0) < (s1 if s1 >= 0 else -s1)
    cdef bint unit_stride = s1 == sizeof(rowfloat)
    cdef const char* base = <const char*>&X[0, 0]
    cdef const rowfloat* xr
    cdef bint weighted = P.weighted
    cdef const double* w = P.w
    cdef const double* rows
    cdef double* buf = W.buf
    cdef double* srow
    cdef double* brow
    cdef int* lab = W.lab
    cdef double* dist = W.dist
    cdef int c
    start = row_start
    while start < row_stop:
        stop = start + chunk_size
        if stop > row_stop:
            stop = row_stop
        m = stop - start
        if direct_rows:
            rows = <const double*>&X[start, 0]
        else:
            if by_column:  # column-major input: read each column's run of rows in order
                for j in range(d):
                    if weighted:
                        for r in range(m):
                            buf[r * d + j] = (<double>X[start + r, j]) * w[j]
                    else:
                        for r in range(m):
                            buf[r * d + j] = <double>X[start + r, j]
            elif unit_stride:  # rows with contiguous features: plain (vectorisable) loops
                for r in range(m):
                    brow = buf + r * d
                    xr = <const rowfloat*>(base + (start + r) * s0)
                    if weighted:
                        for j in range(d):
                            brow[j] = (<double>xr[j]) * w[j]
                    else:
                        for j in range(d):
                            brow[j] = <double>xr[j]
            else:
                for r in range(m):
                    brow = buf + r * d
                    if weighted:
                        for j in range(d):
                            brow[j] = (<double>X[start + r, j]) * w[j]
                    else:
                        for j in range(d):
                            brow[j] = <double>X[start + r, j]
            rows = buf
        if P.path == 2:
            _nearest_gemm_f32(rows, <int>m, <int>d, <int>k, P.C, P.cn, P.cmax, P.mu, P.mu_norm, P.Cs32, P.cns,
                              P.cmaxs, W.buf32, W.G32, W.G, W.pidx, lab, dist)
        elif P.path == 1:
            _nearest_gemm(rows, <int>m, <int>d, <int>k, P.C, P.cn, P.cmax, W.G, W.pidx, lab, dist)
        else:
            _nearest_direct(rows, m, d, k, P.CT, P.CT, False, W.G, lab, dist)
        for r in range(m):
            c = lab[r]
            if c < 0:  # a row with NaN: it makes sums[0] NaN, which the caller reports
                c = 0
            counts[c] += 1
            inertia[c] += dist[r]
            srow = sums + c * d
            if weighted and unit_stride:  # sums are in raw units
                xr = <const rowfloat*>(base + (start + r) * s0)
                for j in range(d):
                    srow[j] += <double>xr[j]
            elif weighted:
                i = start + r
                for j in range(d):
                    srow[j] += <double>X[i, j]
            else:
                brow = <double*>rows + r * d
                for j in range(d):
                    srow[j] += brow[j]
        start = stop


cdef void _free_work(LloydWork* W) noexcept nogil:
    free(W.buf)
    free(W.buf32)
    free(W.G)
    free(W.G32)
    free(W.pidx)
    free(W.lab)
    free(W.dist)


cdef bint _alloc_work(LloydWork* W, Py_ssize_t chunk, Py_ssize_t d, Py_ssize_t k, int path) noexcept nogil:
    """Allocate one block's work buffers (sizes + 1 so that none is 0); False on failure."""
    W.buf = <double*>malloc((chunk * d + 1) * sizeof(double))
    W.buf32 = <float*>malloc(((chunk * d if path == 2 else 0) + 1) * sizeof(float))
    W.G = <double*>malloc((chunk * k if path > 0 else fastfc_direct_scratch(d) // sizeof(double)) * sizeof(double)
                          + sizeof(double))
    W.G32 = <float*>malloc(((chunk * k if path == 2 else 0) + 1) * sizeof(float))
    W.pidx = <int*>malloc(((chunk * k if path > 0 else 0) + 1) * sizeof(int))
    W.lab = <int*>malloc(chunk * sizeof(int))
    W.dist = <double*>malloc(chunk * sizeof(double))
    return not (W.buf == NULL or W.buf32 == NULL or W.G == NULL or W.G32 == NULL or W.pidx == NULL
                or W.lab == NULL or W.dist == NULL)


# --------------------------------------------------------------------------------------
# Federated-Lloyd round statistics: the same labels, counts and sums as lloyd_stats_kernel,
# the inertia from per-cluster moments (no exact distance for rows the screen decides)
# --------------------------------------------------------------------------------------

cdef extern from *:
    """
    /* Row loops of the refinement-round kernel, also compiled for AVX-512 and AVX2 where the compiler can
       (function clones picked at load time by the CPU; no FMA is enabled, so every sum and product
       is rounded as in the baseline build: the clones give the same bits). */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && __GNUC__ >= 8
    #define FASTFC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
    #else
    #define FASTFC_CLONES
    #endif
    #define FASTFC_SQNORMS(NAME, T)                                                              \
    FASTFC_CLONES static double NAME(const T* X, Py_ssize_t m, Py_ssize_t d, const double* w,   \
                                     int weighted, const double* mu, double* out) {             \
        double xmax = 0.0;                                                                       \
        for (Py_ssize_t r = 0; r < m; r++) {                                                     \
            const T* x = X + r * d;                                                              \
            double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                              \
            Py_ssize_t z = 0;                                                                    \
            if (weighted) {                                                                      \
                for (; z + 8 <= d; z += 8)                                                       \
                    for (int l = 0; l < 8; l++) {                                                \
                        double t = (double)x[z + l] * w[z + l] - mu[z + l];                      \
                        s[l] += t * t;                                                           \
                    }                                                                            \
                for (; z < d; z++) { double t = (double)x[z] * w[z] - mu[z]; s[0] += t * t; }   \
            } else {                                                                             \
                for (; z + 8 <= d; z += 8)                                                       \
                    for (int l = 0; l < 8; l++) {                                                \
                        double t = (double)x[z + l] - mu[z + l];                                 \
                        s[l] += t * t;                                                           \
                    }                                                                            \
                for (; z < d; z++) { double t = (double)x[z] - mu[z]; s[0] += t * t; }          \
            }                                                                                    \
            double v = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));       \
            out[r] = v;                                                                          \
            if (v > xmax) xmax = v;                                                              \
        }                                                                                        \
        return xmax;                                                                             \
    }
    #define FASTFC_ACCUMULATE(NAME, T)                                                           \
    FASTFC_CLONES static void NAME(const T* X, Py_ssize_t m, Py_ssize_t d, const int* lab,      \
                                   double* sums) {                                               \
        for (Py_ssize_t r = 0; r < m; r++) {                                                     \
            const T* x = X + r * d;                                                              \
            double* srow = sums + (Py_ssize_t)lab[r] * d;                                        \
            for (Py_ssize_t z = 0; z < d; z++) srow[z] += (double)x[z];                          \
        }                                                                                        \
    }
    FASTFC_SQNORMS(fastfc_sqnorms_f32, float)
    FASTFC_SQNORMS(fastfc_sqnorms_f64, double)
    FASTFC_ACCUMULATE(fastfc_accumulate_f32, float)
    FASTFC_ACCUMULATE(fastfc_accumulate_f64, double)
    """
    double fastfc_sqnorms_f32(const float* X, Py_ssize_t m, Py_ssize_t d, const double* w, int weighted,
                              const double* mu, double* out) noexcept nogil
    double fastfc_sqnorms_f64(const double* X, Py_ssize_t m, Py_ssize_t d, const double* w, int weighted,
                              const double* mu, double* out) noexcept nogil
    void fastfc_accumulate_f32(const float* X, Py_ssize_t m, Py_ssize_t d, const int* lab,
                               double* sums) noexcept nogil
    void fastfc_accumulate_f64(const double* X, Py_ssize_t m, Py_ssize_t d, const int* lab,
                               double* sums) noexcept nogil


cdef struct RoundProblem:
    const double* C      # (k, d) prototypes in the units of the distance (weighted centres)
    const double* B64    # (k, d) C * w (C when unweighted): the float64 screen's operand on raw rows
    const double* e64    # (k,) ||C_j||^2
    double cmax          # bound of ||C_j||
    const double* mu     # (d,) a centre of the prototypes (distance units)
    double mu_norm       # bound of ||mu||
    const float* B32     # (k, d) float32((C - mu) * w): the float32 screen's operand on raw rows
    const double* e32    # (k,) ||C_j - mu||^2 + 2 mu.(C_j - mu)
    double cmaxs         # bound of ||C_j - mu||
    const double* w      # (d,) feature weights
    Py_ssize_t d
    Py_ssize_t k
    bint weighted
    int path             # 1 float64 screen, 2 float32 screen (float32 rows only)
    bint fma             # screen with fastfc_round_screen_* (FMA) instead of BLAS where the chunk allows
    const double* BT64   # (d, k) B64 transposed (FMA screen, float64 rows)
    const float* BT32    # (d, k) B32 transposed (FMA screen, float32 rows)
    const float* e32f    # (k,) float32(e32) (FMA screen, float32 rows)


cdef struct RoundWork:
    char* rows     # chunk x d in the rows' dtype (rows not C-contiguous) 
    double* rows64 # chunk x d float64 copy (float32 rows on the float64 screen)
    double* G      # chunk x k
    float* G32     # chunk x k
    int* pidx      # chunk x k
    double* sq     # chunk: ||x w - mu||^2 of each row
    int* lab       # chunk: the rows' labels
    double* b1     # chunk: FMA screen, each row's smallest screened value
    double* b2     # chunk: FMA screen, each row's second smallest
    void* scr      # FMA screen scratch (one transposed block of rows)


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef inline double _exact_dist(const rowfloat* x, const double* c, const double* w, bint weighted,
                               Py_ssize_t d) noexcept nogil:
    """``sum_z (fl(x_z w_z) - c_z)^2`` summed over z = 0 .. d-1 in order: the direct loop's distance."""
    cdef double a = 0
    cdef double t
    cdef Py_ssize_t z
    if weighted:
        for z in range(d):
            t = (<double>x[z]) * w[z] - c[z]
            a = a + t * t
    else:
        for z in range(d):
            t = (<double>x[z]) - c[z]
            a = a + t * t
    return a


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _round_gemm64(const rowfloat* rows, Py_ssize_t m, Py_ssize_t d, Py_ssize_t k, const double* B64,
                        RoundWork* W) noexcept nogil:
    """``W.G`` (m x k) = rows (m x d, upcast to float64 when float32) times ``B64`` (k x d) transposed."""
    cdef char transa = b'T'
    cdef char transb = b'N'
    cdef double one = 1.0
    cdef double zero = 0.0
    cdef int di = <int>d
    cdef int ki = <int>k
    cdef int mi = <int>m
    cdef Py_ssize_t r
    cdef double* x64
    if rowfloat is float:
        for r in range(m * d):
            W.rows64[r] = <double>rows[r]
        x64 = W.rows64
    else:
        x64 = <double*>rows
    # row-major G (m x k, G[r k + j] = x_r . B_j), i.e. column-major B64 (d x k)^T rows (d x m)
    dgemm(&transa, &transb, &ki, &mi, &di, &one, <double*>B64, &di, x64, &di, &zero, W.G, &ki)


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef bint _round_chunk_fma(
    const rowfloat* rows,
    Py_ssize_t m,
    Py_ssize_t m_ahead,
    RoundProblem* P,
    RoundWork* W,
    long long* counts,
    double* sums,
    double* qsum,
) noexcept nogil:
    """:func:`_round_block` on one chunk (``m`` contiguous rows; ``m_ahead`` >= ``m`` of them readable, for
    prefetching) through the FMA screen; False: nothing done (the caller's BLAS screen then runs).

    The chunk is done here when the CPU has AVX-512 and FMA and the chunk's magnitudes keep every
    screened value far from overflow (else the caller's BLAS screen runs: infinite rows and
    near-overflow magnitudes keep their old handling). ``fastfc_round_screen_*`` gives, per row,
    the centred squared norm (with the bits of ``fastfc_sqnorms_*``, which the BLAS path uses)
    and the screen's smallest and second smallest value (on the raw rows against
    ``BT64``/``BT32``, the BLAS path's operands transposed). A row whose second smallest value exceeds the smallest
    by more than the rounding-error bound (the BLAS path's slack for the same operands, plus, in
    float32, the roundings of ``e32`` and of the subtraction) takes the screen's prototype; any
    other row takes the least exact distance (:func:`_exact_dist`) over all prototypes, ties to
    the lowest index. Both are the exact argmin, the BLAS path's label; counts, ``qsum`` and sums
    are then added in row order exactly as there.
    """
    cdef Py_ssize_t d = P.d
    cdef Py_ssize_t k = P.k
    cdef Py_ssize_t r, j, best_j
    cdef const rowfloat* x
    cdef double infl = 1.0 + (d + 4) * DBL_EPSILON
    cdef double xmax, xs, slack, best_d, dd, c1, c2, c3, c4, cadd
    cdef int c
    if rowfloat is float:
        if P.path != 2:
            return False
        if not fastfc_round_screen_f32(rows, m, m_ahead, d, k, P.BT32, P.e32f, W.scr, W.b1, W.b2, W.lab,
                                       P.w, P.weighted, P.mu, W.sq):
            return False
    else:
        if not fastfc_round_screen_f64(rows, m, m_ahead, d, k, P.BT64, P.e64, W.scr, W.b1, W.b2, W.lab,
                                       P.w, P.weighted, P.mu, W.sq):
            return False
    xmax = 0.0  # the largest squared norm (as fastfc_sqnorms_* returns it: a NaN row is skipped)
    for r in range(m):
        xmax = W.sq[r] if W.sq[r] > xmax else xmax
    xmax = sqrt(xmax) * infl + P.mu_norm  # bound of ||x w|| over the chunk (NaN: not below anything)
    if rowfloat is float:
        # float32 products and screened values stayed far below FLT_MAX (|x.B32_j| <= ||x w|| ||C_j - mu||;
        # the caller bounds ||C_j - mu||^2 + 2 ||mu|| ||C_j - mu||, hence |e32f_j|)
        if not (xmax < 1e18 and xmax * P.cmaxs < 1e36):
            return False
        # the BLAS path's float32 slack (products, float64 roundings, float32 underflow), plus the
        # float32 roundings of e32 and of e32f - 2 s: twice eps32 (|e32_j| + |s_j|) per pair of values
        # (doubled again for the roundings of the bound), and their underflow
        c1 = 2 * (d + 3) * <double>FLT_EPSILON * P.cmaxs
        c2 = P.cmax + P.cmaxs
        c4 = 4 * <double>FLT_EPSILON * P.cmaxs
        cadd = 8 * (d + 1) * F32_TINY + 4 * <double>FLT_EPSILON * P.cmaxs * (P.cmaxs + 2 * P.mu_norm) + 8 * F32_TINY
    else:
        if not xmax < 1e100:
            return False
        # the BLAS path's float64 slack: the screened value (any summation order, fused or not) and
        # the exact distance each within (d + 5) u (||x w|| + ||C_j||)^2
        c1 = 0.0
        c2 = P.cmax
        c4 = 0.0
        cadd = 0.0
    c3 = 2 * (d + 6) * DBL_EPSILON
    for r in range(m):
        xs = sqrt(W.sq[r]) * infl + P.mu_norm
        slack = (c1 + c4) * xs + c3 * (xs + c2) * (xs + c2) + cadd
        if not (W.b2[r] > W.b1[r] + slack):
            x = rows + r * d
            best_j = 0
            best_d = _exact_dist(x, P.C, P.w, P.weighted, d)
            for j in range(1, k):
                dd = _exact_dist(x, P.C + j * d, P.w, P.weighted, d)
                if dd < best_d:
                    best_d = dd
                    best_j = j
            W.lab[r] = <int>best_j
        c = W.lab[r]
        counts[c] += 1
        qsum[c] += W.sq[r]
    if rowfloat is float:
        fastfc_accumulate_f32(rows, m, d, W.lab, sums)
    else:
        fastfc_accumulate_f64(rows, m, d, W.lab, sums)
    return True


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _round_block(
    const rowfloat* X,
    Py_ssize_t rs,
    Py_ssize_t cs,
    Py_ssize_t row_start,
    Py_ssize_t row_stop,
    RoundProblem* P,
    bint rows_in_place,
    Py_ssize_t chunk_size,
    RoundWork* W,
    long long* counts,
    double* sums,
    double* qsum,
) noexcept nogil:
    """Accumulate rows ``row_start:row_stop`` into one block's counts, raw sums and ``sum ||x w - mu||^2``.

    ``X`` points at the first row; ``rs`` and ``cs`` are the row and column strides in bytes.

    Per chunk: the centred (weighted) squared norm of every row; the screen's products
    with BLAS on the raw rows (float32 rows against ``B32`` when ``P.path == 2`` and the
    chunk's magnitudes allow it, else float64 rows against ``B64``); per row the candidates
    the rounding-error bound cannot exclude; a row with one candidate takes it, a row with
    several takes the one of least exact distance (:func:`_exact_dist`, ties to the lowest
    index) -- the labels of the direct loop; then in row order the counts, sums and squared
    norms of each cluster.
    """
    cdef Py_ssize_t d = P.d
    cdef Py_ssize_t k = P.k
    cdef int di = <int>d
    cdef int ki = <int>k
    cdef int mi
    cdef Py_ssize_t start, stop, m, r, j, z, p, n_pairs, q, best_j
    cdef const rowfloat* rows
    cdef const rowfloat* x
    cdef rowfloat* dst
    cdef double* srow
    cdef double* grow
    cdef const float* g32
    cdef double t0, t1, t2, t3, s0, s1, s2, s3, xs, xn, xmax, slack, best_d, dd, c1, c2, c3, cadd
    cdef bint f32
    cdef char transa = b'T'
    cdef char transb = b'N'
    cdef double one = 1.0
    cdef double zero = 0.0
    cdef float onef = 1.0
    cdef float zerof = 0.0
    cdef int c
    cdef const double* w = P.w
    cdef const double* mu = P.mu
    cdef bint weighted = P.weighted
    cdef double infl = 1.0 + (d + 4) * DBL_EPSILON
    start = row_start
    while start < row_stop:
        stop = start + chunk_size
        if stop > row_stop:
            stop = row_stop
        m = stop - start
        mi = <int>m
        if rows_in_place:
            rows = <const rowfloat*>(<const char*>X + start * rs)
        else:
            dst = <rowfloat*>W.rows
            for r in range(m):
                for z in range(d):
                    dst[r * d + z] = (<const rowfloat*>(<const char*>X + (start + r) * rs + z * cs))[0]
            rows = dst
        if P.fma and _round_chunk_fma(rows, m, row_stop - start if rows_in_place else m, P, W, counts, sums,
                                      qsum):
            start = stop
            continue
        # the products first (BLAS streams the rows in), the norms then read them from the cache
        f32 = False
        if rowfloat is float:
            f32 = P.path == 2
        if f32:
            sgemm(&transa, &transb, &ki, &mi, &di, &onef, <float*>P.B32, &di, <float*>rows, &di, &zerof,
                  W.G32, &ki)
        else:
            _round_gemm64(rows, m, d, k, P.B64, W)
        # centred weighted squared norms (eight partial sums: any order errs by (d - 1) u at most)
        if rowfloat is float:
            xmax = fastfc_sqnorms_f32(rows, m, d, w, weighted, mu, W.sq)
        else:
            xmax = fastfc_sqnorms_f64(rows, m, d, w, weighted, mu, W.sq)
        xmax = sqrt(xmax) * infl + P.mu_norm  # bound of ||x w|| over the chunk
        # float32 products stay far below FLT_MAX: |x_z B32_jz| <= ||x w|| ||C_j - mu|| (Cauchy-Schwarz);
        # a NaN chunk fails the test: the float64 screen then replaces the float32 one
        if f32 and not (xmax < 1e18 and xmax * P.cmaxs < 1e36):
            f32 = False
            _round_gemm64(rows, m, d, k, P.B64, W)
        # screen: a_j = e_j - 2 x.B_j equals ||x w - C_j||^2 - ||x w (- mu)||^2 up to rounding; per row
        # xs >= ||x w|| and the slack (see the coefficients below); rows with one candidate are labelled
        if f32:
            # screened value within (d + 2) eps32 ||x w|| ||C_j - mu|| + float64 roundings and float32
            # underflow (2^-150 per operation); exact distances within (d + 4) u64 (||x w|| + ||C_j||)^2
            c1 = 2 * (d + 3) * <double>FLT_EPSILON * P.cmaxs
            c2 = P.cmax + P.cmaxs
            cadd = 8 * (d + 1) * F32_TINY
        else:
            # screened value and exact distance each within (d + 5) u (||x w|| + ||C_j||)^2
            c1 = 0.0
            c2 = P.cmax
            cadd = 0.0
        c3 = 2 * (d + 6) * DBL_EPSILON
        # row by row: each row's k screened values are contiguous; rows with one candidate need no exact distance
        n_pairs = 0
        for r in range(m):
            grow = W.G + r * k
            if f32:
                g32 = W.G32 + r * k
                for j in range(k):
                    grow[j] = P.e32[j] - 2 * <double>g32[j]
            else:
                for j in range(k):
                    grow[j] = P.e64[j] - 2 * grow[j]
            xs = sqrt(W.sq[r]) * infl + P.mu_norm
            slack = c1 * xs + c3 * (xs + c2) * (xs + c2) + cadd
            n_pairs = _screen_row(grow, k, slack, r * k, W.pidx, n_pairs)
        p = 0
        for r in range(m):
            q = p
            while q < n_pairs and W.pidx[q] < (r + 1) * k:
                q = q + 1
            if q - p == 1:
                c = W.pidx[p] - <int>(r * k)
            elif q == p:  # NaN row: sums[0] becomes NaN, the caller reports it
                c = 0
            else:
                x = rows + r * d
                best_j = W.pidx[p] - r * k
                best_d = _exact_dist(x, P.C + best_j * d, w, weighted, d)
                for j in range(p + 1, q):
                    dd = _exact_dist(x, P.C + (W.pidx[j] - r * k) * d, w, weighted, d)
                    if dd < best_d:
                        best_d = dd
                        best_j = W.pidx[j] - r * k
                c = <int>best_j
            p = q
            W.lab[r] = c
            counts[c] += 1
            qsum[c] += W.sq[r]
        if rowfloat is float:
            fastfc_accumulate_f32(rows, m, d, W.lab, sums)
        else:
            fastfc_accumulate_f64(rows, m, d, W.lab, sums)
        start = stop


cdef void _free_round_work(RoundWork* W) noexcept nogil:
    free(W.rows)
    free(W.rows64)
    free(W.G)
    free(W.G32)
    free(W.pidx)
    free(W.sq)
    free(W.lab)
    free(W.b1)
    free(W.b2)
    free(W.scr)


cdef bint _alloc_round_work(RoundWork* W, Py_ssize_t chunk, Py_ssize_t d, Py_ssize_t k) noexcept nogil:
    """Allocate one block's work buffers (sizes + 1 so that none is 0); False on failure."""
    W.rows = <char*>malloc((chunk * d + 1) * sizeof(double))
    W.rows64 = <double*>malloc((chunk * d + 1) * sizeof(double))
    W.G = <double*>malloc((chunk * k + 1) * sizeof(double))
    W.G32 = <float*>malloc((chunk * k + 1) * sizeof(float))
    W.pidx = <int*>malloc((chunk * k + 1) * sizeof(int))
    W.sq = <double*>malloc((chunk + 1) * sizeof(double))
    W.lab = <int*>malloc((chunk + 1) * sizeof(int))
    W.b1 = <double*>malloc((chunk + 1) * sizeof(double))
    W.b2 = <double*>malloc((chunk + 1) * sizeof(double))
    W.scr = malloc(fastfc_direct_scratch(d))
    return not (W.rows == NULL or W.rows64 == NULL or W.G == NULL or W.G32 == NULL or W.pidx == NULL
                or W.sq == NULL or W.lab == NULL or W.b1 == NULL or W.b2 == NULL or W.scr == NULL)


# --------------------------------------------------------------------------------------
# The chunk/block driver shared by lloyd_stats_kernel and lloyd_round_kernel
# --------------------------------------------------------------------------------------

#: which block function the driver runs: lloyd_stats_kernel's (exact distances) or lloyd_round_kernel's
cdef enum:
    _STATS = 0
    _ROUND = 1


cdef void _del_work(int kind, void* W) noexcept nogil:
    """Free one block's work buffers made by :func:`_new_work` (NULL allowed)."""
    if W == NULL:
        return
    if kind == _STATS:
        _free_work(<LloydWork*>W)
    else:
        _free_round_work(<RoundWork*>W)
    free(W)


cdef void* _new_work(int kind, Py_ssize_t chunk, Py_ssize_t d, Py_ssize_t k, int path) noexcept nogil:
    """One block's work buffers (a ``LloydWork`` or a ``RoundWork``); NULL on failure."""
    cdef void* W
    cdef bint ok
    if kind == _STATS:
        W = calloc(1, sizeof(LloydWork))
        ok = W != NULL and _alloc_work(<LloydWork*>W, chunk, d, k, path)
    else:
        W = calloc(1, sizeof(RoundWork))
        ok = W != NULL and _alloc_round_work(<RoundWork*>W, chunk, d, k)
    if not ok:
        _del_work(kind, W)
        return NULL
    return W


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef inline void _one_block(
    int kind,
    const rowfloat[:, :] X,
    Py_ssize_t b,
    Py_ssize_t B,
    Py_ssize_t chunk_size,
    void* P,
    bint rows_in_place,
    void* W,
    Py_ssize_t d,
    Py_ssize_t k,
    long long* counts_part,
    double* sums_part,
    double* extra_part,
) noexcept nogil:
    """Block ``b`` of ``B`` (chunks ``b * n_chunks // B`` to ``(b + 1) * n_chunks // B``) into its partials."""
    cdef Py_ssize_t n = X.shape[0]
    cdef Py_ssize_t n_chunks = (n + chunk_size - 1) // chunk_size
    cdef Py_ssize_t lo = (b * n_chunks // B) * chunk_size
    cdef Py_ssize_t hi = ((b + 1) * n_chunks // B) * chunk_size
    if hi > n:
        hi = n
    if kind == _STATS:
        _lloyd_block(X, lo, hi, <LloydProblem*>P, rows_in_place, chunk_size, <LloydWork*>W,
                     counts_part + b * k, sums_part + b * k * d, extra_part + b * k)
    else:
        _round_block(&X[0, 0], X.strides[0], X.strides[1], lo, hi, <RoundProblem*>P, rows_in_place, chunk_size,
                     <RoundWork*>W,
                     counts_part + b * k, sums_part + b * k * d, extra_part + b * k)


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef bint _blocked_stats(
    int kind,
    const rowfloat[:, :] X,
    void* P,
    bint rows_in_place,
    int path,
    Py_ssize_t d,
    Py_ssize_t k,
    long long[::1] counts,
    double[:, ::1] sums,
    double[::1] extra,
    Py_ssize_t n_blocks,
    int n_threads,
    Py_ssize_t chunk_size,
):
    """Counts, raw sums and a per-cluster ``extra`` (inertia or squared norms) of all rows, block by block.

    Rows are cut into ``B = n_blocks`` blocks of whole chunks; each block accumulates its rows
    in order (through the ``kind``'s block function, :func:`_lloyd_block` or :func:`_round_block`)
    into its own partials, which are then added in block order. Threads only change which
    thread computes which block, so results do not depend on them. Returns False when a work
    buffer could not be allocated (outputs then invalid).
    """
    cdef Py_ssize_t n = X.shape[0]
    cdef Py_ssize_t B = n_blocks
    cdef Py_ssize_t b, c, j
    cdef int failed = 0
    cdef void* Wp = NULL
    cdef bint ok_work
    cdef char* block_failed
    cdef long long* counts_part
    cdef double* sums_part
    cdef double* extra_part
    if n == 0 or B < 1:
        return True
    if chunk_size < 1:
        chunk_size = 1
    counts_part = <long long*>calloc(B * k, sizeof(long long))
    sums_part = <double*>calloc(B * k * d + 1, sizeof(double))
    extra_part = <double*>calloc(B * k, sizeof(double))
    block_failed = <char*>calloc(B, sizeof(char))
    if counts_part == NULL or sums_part == NULL or extra_part == NULL or block_failed == NULL:
        free(counts_part)
        free(sums_part)
        free(extra_part)
        free(block_failed)
        return False
    n_threads = _threads_for(n_threads, B)
    if n_threads == 1:
        # one set of work buffers for all blocks, no OpenMP region
        Wp = _new_work(kind, chunk_size, d, k, path)
        if Wp == NULL:
            failed = 1
        else:
            with nogil:
                for b in range(B):
                    _one_block(kind, X, b, B, chunk_size, P, rows_in_place, Wp, d, k,
                               counts_part, sums_part, extra_part)
            _del_work(kind, Wp)
    else:
        with nogil, parallel(num_threads=n_threads):
            # one set of work buffers per thread (pointers assigned in the block are thread-private)
            Wp = _new_work(kind, chunk_size, d, k, path)
            ok_work = Wp != NULL
            for b in prange(B, schedule="dynamic"):
                if ok_work:
                    _one_block(kind, X, b, B, chunk_size, P, rows_in_place, Wp, d, k,
                               counts_part, sums_part, extra_part)
                else:
                    block_failed[b] = 1
            _del_work(kind, Wp)
        for b in range(B):
            if block_failed[b]:
                failed = 1
    free(block_failed)
    if not failed:
        with nogil:
            for b in range(B):
                for c in range(k):
                    counts[c] += counts_part[b * k + c]
                    extra[c] += extra_part[b * k + c]
                    for j in range(d):
                        sums[c, j] += sums_part[(b * k + c) * d + j]
    free(counts_part)
    free(sums_part)
    free(extra_part)
    return not failed


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
def lloyd_stats_kernel(
    const rowfloat[:, :] X,
    const double[:, ::1] C,
    const double[:, ::1] CT,
    const double[::1] cn,
    double cmax,
    const double[::1] mu,
    double mu_norm,
    const float[:, ::1] Cs32,
    const double[::1] cns,
    double cmaxs,
    const double[::1] w,
    bint weighted,
    int path,
    long long[::1] counts,
    double[:, ::1] sums,
    double[::1] inertia,
    Py_ssize_t n_blocks,
    int n_threads=1,
    Py_ssize_t chunk_size=256,
):
    """Per-cluster counts, raw sums and inertia of the rows of ``X``, fused with the assignment.

    Rows are cut into ``B = n_blocks`` blocks of whole chunks (block ``b`` holds chunks
    ``b * n_chunks // B`` to ``(b + 1) * n_chunks // B``); each block accumulates its rows
    in order into its own partial; the partials are then added in block order. Threads
    only change which thread computes which block, so results do not depend on them.

    Parameters
    ----------
    X : (n, d) float32/float64, any strides
    C : (k, d) C-contiguous float64 prototypes (multiplied by ``w`` when weighted)
    CT : (d, k) C-contiguous, ``C`` transposed (the direct loop's layout)
    cn : (k,) squared norms of ``C`` (screens)
    cmax : float
        An upper bound of the norms of ``C`` (screens).
    mu : (d,) a centre of the prototypes (float32 screen)
    mu_norm : float
        An upper bound of ``||mu||`` (float32 screen).
    Cs32 : (k, d) float32, ``C - mu`` rounded to float32 (float32 screen)
    cns : (k,) float64 squared norms of ``C - mu`` (float32 screen)
    cmaxs : float
        An upper bound of the norms of ``C - mu`` (float32 screen).
    w : (d,) feature weights (read only when ``weighted``)
    weighted : bool
    path : int
        0: direct loop; 1: float64 BLAS screen; 2: float32 BLAS screen (float64 for
        chunks whose magnitudes could overflow float32). All give the same labels.
    counts, sums, inertia : (k,), (k, d), (k,) zeroed outputs
    n_blocks : int
        Blocks (partial statistics), a function of the shape only.
    n_threads : int
        OpenMP threads (ignored in a serial build). BLAS must be single-threaded.
    chunk_size : int
        Rows per chunk.

    Returns
    -------
    ok : bool
        False when a work buffer could not be allocated (outputs then invalid).
    """
    cdef Py_ssize_t d = C.shape[1]
    cdef Py_ssize_t k = C.shape[0]
    cdef LloydProblem P
    cdef bint direct_rows
    P.C = &C[0, 0]
    P.CT = &CT[0, 0]
    P.cn = &cn[0]
    P.cmax = cmax
    P.mu = &mu[0]
    P.mu_norm = mu_norm
    P.Cs32 = &Cs32[0, 0]
    P.cns = &cns[0]
    P.cmaxs = cmaxs
    P.w = &w[0]
    P.d = d
    P.k = k
    P.weighted = weighted
    P.path = path
    # unweighted C-contiguous float64 rows are labelled in place
    direct_rows = (rowfloat is double and not weighted and d > 0
                   and X.strides[1] == sizeof(double) and X.strides[0] == d * <Py_ssize_t>sizeof(double))
    return _blocked_stats(_STATS, X, <void*>&P, direct_rows, path, d, k, counts, sums, inertia, n_blocks, n_threads,
                          chunk_size)


cdef Py_ssize_t _fill_round_problem(RoundProblem* P, tuple ops) except -1:
    """Point ``P`` at a round's centre-side operands ``ops`` (the caller keeps the tuple alive); returns ``path``.

    ``ops`` = ``(C, B64, e64, cmax, mu, mu_norm, B32, e32, cmaxs, w, weighted, path, BT64, BT32, e32f, fma)``:

    - ``C`` (k, d) C-contiguous float64 prototypes in distance units (multiplied by ``w`` when weighted);
    - ``B64`` (k, d) ``C * w`` (``C`` unweighted); ``e64`` (k,) ``||C_j||^2``; ``cmax`` a bound of the
      norms of ``C``;
    - ``mu`` (d,) a centre of the prototypes (distance units); ``mu_norm`` a bound of ``||mu||``;
    - ``B32`` (k, d) float32 ``(C - mu) * w`` (float32 screen; no entry may underflow); ``e32`` (k,)
      float64 ``||C_j - mu||^2 + 2 mu.(C_j - mu)``; ``cmaxs`` a bound of the norms of ``C - mu``;
    - ``w`` (d,) feature weights (read only when ``weighted``); ``weighted`` bool;
    - ``path`` 1: float64 screen; 2: float32 screen (float32 rows; chunks whose magnitudes could
      overflow float32 take the float64 one). Both give the same labels;
    - ``BT64`` (d, k) ``B64`` transposed, ``BT32`` (d, k) ``B32`` transposed (float32 rows on path 2),
      ``e32f`` (k,) ``e32`` rounded to float32 (``|e32|`` below about 1e36): the FMA screen's;
    - ``fma`` bool: screen with fused multiply-adds on the rows in the lanes of vectors (AVX-512 and
      FMA CPUs only; elsewhere, and for chunks with NaN, infinite or very large values, the BLAS
      screen runs): the same labels, counts, sums and ``qsum``.
    """
    cdef const double[:, ::1] C = ops[0]
    cdef const double[:, ::1] B64 = ops[1]
    cdef const double[::1] e64 = ops[2]
    cdef const double[::1] mu = ops[4]
    cdef const float[:, ::1] B32 = ops[6]
    cdef const double[::1] e32 = ops[7]
    cdef const double[::1] w = ops[9]
    cdef const double[:, ::1] BT64 = ops[12]
    cdef const float[:, ::1] BT32 = ops[13]
    cdef const float[::1] e32f = ops[14]
    if len(ops) != 16:
        raise ValueError(f"a round's operands are 16 values, got {len(ops)}")
    P.C = &C[0, 0]
    P.B64 = &B64[0, 0]
    P.e64 = &e64[0]
    P.cmax = ops[3]
    P.mu = &mu[0]
    P.mu_norm = ops[5]
    P.B32 = &B32[0, 0]
    P.e32 = &e32[0]
    P.cmaxs = ops[8]
    P.w = &w[0]
    P.d = C.shape[1]
    P.k = C.shape[0]
    P.weighted = ops[10]
    P.path = ops[11]
    P.fma = ops[15]
    P.BT64 = &BT64[0, 0]
    P.BT32 = &BT32[0, 0]
    P.e32f = &e32f[0]
    return P.path


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
def lloyd_round_kernel(
    const rowfloat[:, :] X,
    tuple ops,
    long long[::1] counts,
    double[:, ::1] sums,
    double[::1] qsum,
    Py_ssize_t n_blocks,
    int n_threads=1,
    Py_ssize_t chunk_size=256,
):
    """Per-cluster counts, raw sums and centred squared norms of the rows, fused with the assignment.

    The labels, counts and sums are those of :func:`lloyd_stats_kernel` (same blocks,
    same order of additions); instead of each row's exact distance, ``qsum[c]`` adds
    ``||x w - mu||^2`` (four partial sums) of the rows of cluster ``c``, from which the
    caller derives the inertia. Rows the screen decides (one candidate) need no exact
    distance. Blocks are as in :func:`lloyd_stats_kernel`, so results do not depend on
    the threads.

    Parameters
    ----------
    X : (n, d) float32/float64, any strides
    ops : tuple
        The round's centre-side operands (see :func:`_fill_round_problem`; ``fastfc._lloyd._round_operands``).
    counts, sums, qsum : (k,), (k, d), (k,) zeroed outputs
    n_blocks : int
    n_threads : int
        OpenMP threads. BLAS must be single-threaded.
    chunk_size : int

    Returns
    -------
    ok : bool
        False when a work buffer could not be allocated (outputs then invalid).
    """
    cdef RoundProblem P
    cdef bint rows_in_place
    cdef int path = <int>_fill_round_problem(&P, ops)
    cdef Py_ssize_t d = P.d
    cdef Py_ssize_t k = P.k
    if not (counts.shape[0] == k and qsum.shape[0] == k and sums.shape[0] == k and sums.shape[1] == d
            and X.shape[1] == d):
        raise ValueError("lloyd_round_kernel: inconsistent shapes")
    # C-contiguous rows are screened in place (else copied chunk by chunk)
    rows_in_place = (d > 0 and X.strides[1] == sizeof(rowfloat)
                     and X.strides[0] == d * <Py_ssize_t>sizeof(rowfloat))
    return _blocked_stats(_ROUND, X, <void*>&P, rows_in_place, path, d, k, counts, sums, qsum, n_blocks, n_threads,
                          chunk_size)


# --------------------------------------------------------------------------------------
# One refinement round over many clients (the in-process runner's path)
# --------------------------------------------------------------------------------------

cdef extern from *:
    """
    #include <time.h>
    static double fastfc_wall_seconds(void) {
        struct timespec ts;
        if (timespec_get(&ts, TIME_UTC) != TIME_UTC) return 0.0;
        return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    """
    double fastfc_wall_seconds() noexcept nogil


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _round_one_client(
    const rowfloat* X,
    Py_ssize_t n,
    Py_ssize_t rs,
    Py_ssize_t cs,
    RoundProblem* P,
    Py_ssize_t B,
    Py_ssize_t chunk_size,
    RoundWork* W,
    long long* counts_part,
    double* sums_part,
    double* extra_part,
    long long* counts,
    double* sums,
    double* qsum,
) noexcept nogil:
    """One client's :func:`lloyd_round_kernel` (its ``B`` blocks in order, then their partials added in
    block order into the zeroed ``counts``, ``sums``, ``qsum``): the same bits as :func:`_blocked_stats`
    with :func:`_round_block`. Block 0 accumulates straight into the outputs: a partial starts at +0.0 and
    never becomes -0.0 (a sum is -0.0 only when both terms are), so ``0.0 + partial`` is the partial
    itself; blocks 1 .. B-1 go through the partial buffers (room for ``B - 1`` blocks) and are added after."""
    cdef Py_ssize_t d = P.d
    cdef Py_ssize_t k = P.k
    cdef Py_ssize_t n_chunks, b, c, j, lo, hi
    cdef bint rows_in_place
    if n == 0 or B < 1:
        return
    rows_in_place = (d > 0 and cs == <Py_ssize_t>sizeof(rowfloat) and rs == d * <Py_ssize_t>sizeof(rowfloat))
    if B > 1:
        memset(counts_part, 0, (B - 1) * k * sizeof(long long))
        memset(sums_part, 0, (B - 1) * k * d * sizeof(double))
        memset(extra_part, 0, (B - 1) * k * sizeof(double))
    n_chunks = (n + chunk_size - 1) // chunk_size
    for b in range(B):
        lo = (b * n_chunks // B) * chunk_size
        hi = ((b + 1) * n_chunks // B) * chunk_size
        if hi > n:
            hi = n
        if b == 0:
            _round_block(X, rs, cs, lo, hi, P, rows_in_place, chunk_size, W, counts, sums, qsum)
        else:
            _round_block(X, rs, cs, lo, hi, P, rows_in_place, chunk_size, W,
                         counts_part + (b - 1) * k, sums_part + (b - 1) * k * d, extra_part + (b - 1) * k)
    for b in range(B - 1):
        for c in range(k):
            counts[c] += counts_part[b * k + c]
            qsum[c] += extra_part[b * k + c]
            for j in range(d):
                sums[c * d + j] += sums_part[(b * k + c) * d + j]


cdef struct ClientRows:
    const long long* addr    # (m,) address of each client's first row
    const Py_ssize_t* n      # (m,) rows
    const Py_ssize_t* rs     # (m,) row strides (bytes)
    const Py_ssize_t* cs     # (m,) column strides (bytes)
    const Py_ssize_t* B      # (m,) blocks
    bint f32                 # float32 rows (else float64)


cdef struct ClientWork:
    RoundWork* W           # one block's work buffers
    long long* cp          # partials of up to max_B blocks
    double* sp
    double* ep


cdef bint _new_client_work(ClientWork* T, Py_ssize_t max_B, Py_ssize_t chunk_size, Py_ssize_t d, Py_ssize_t k,
                           int path) noexcept nogil:
    """One thread's buffers for :func:`_round_client_at`; False on failure (then freed by :func:`_del_client_work`)."""
    T.W = <RoundWork*>_new_work(_ROUND, chunk_size, d, k, path)
    T.cp = <long long*>malloc((max_B * k + 1) * sizeof(long long))
    T.sp = <double*>malloc((max_B * k * d + 1) * sizeof(double))
    T.ep = <double*>malloc((max_B * k + 1) * sizeof(double))
    return T.W != NULL and T.cp != NULL and T.sp != NULL and T.ep != NULL


cdef void _del_client_work(ClientWork* T) noexcept nogil:
    _del_work(_ROUND, T.W)
    free(T.cp)
    free(T.sp)
    free(T.ep)


@cython.cdivision(True)
cdef void _round_client_at(ClientRows* R, Py_ssize_t i, RoundProblem* P, Py_ssize_t chunk_size, ClientWork* T,
                           long long* counts, double* sums, double* qsum, double* seconds) noexcept nogil:
    """Client ``i`` of ``R`` into row ``i`` of the outputs, its wall time into ``seconds[i]``."""
    cdef Py_ssize_t d = P.d
    cdef Py_ssize_t k = P.k
    cdef double t0 = fastfc_wall_seconds()
    if R.f32:
        _round_one_client(<const float*><size_t>R.addr[i], R.n[i], R.rs[i], R.cs[i], P, R.B[i], chunk_size, T.W,
                          T.cp, T.sp, T.ep, counts + i * k, sums + i * k * d, qsum + i * k)
    else:
        _round_one_client(<const double*><size_t>R.addr[i], R.n[i], R.rs[i], R.cs[i], P, R.B[i], chunk_size, T.W,
                          T.cp, T.sp, T.ep, counts + i * k, sums + i * k * d, qsum + i * k)
    seconds[i] = fastfc_wall_seconds() - t0


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
def lloyd_round_clients_kernel(
    const long long[::1] addr,
    const Py_ssize_t[::1] n_rows,
    const Py_ssize_t[::1] row_stride,
    const Py_ssize_t[::1] col_stride,
    bint f32,
    tuple ops,
    long long[:, ::1] counts,
    double[:, :, ::1] sums,
    double[:, ::1] qsum,
    const Py_ssize_t[::1] n_blocks,
    const Py_ssize_t[::1] order,
    double[::1] seconds,
    int n_threads=1,
    Py_ssize_t chunk_size=256,
):
    """:func:`lloyd_round_kernel` for ``m`` clients at once, each client's outputs bit-identical to its own call.

    The centre-side operands (``ops``, as in :func:`lloyd_round_kernel`) are shared; client ``i``'s
    rows are the ``n_rows[i]`` x ``d`` array of the rows' dtype (float32 when ``f32``, else float64) at address
    ``addr[i]`` with byte strides ``row_stride[i]``, ``col_stride[i]`` (the caller keeps the arrays alive),
    cut into ``n_blocks[i]`` blocks. Each client is computed by one thread, block after block, then its
    partials are added in block order: the operations of its own :func:`lloyd_round_kernel` call (whose
    results do not depend on its threads). The ``n_threads`` threads take the clients in ``order`` (a
    schedule only: ``dynamic``), each with one set of work buffers for all its clients.

    Parameters
    ----------
    addr, n_rows, row_stride, col_stride : (m,) the clients' rows
    f32 : bool
    ops : tuple
        The round's operands (see :func:`_fill_round_problem`).
    counts, sums, qsum : (m, k), (m, k, d), (m, k) zeroed outputs, one row per client
    n_blocks : (m,) blocks of each client (``fastfc._lloyd.n_blocks`` of its shape)
    order : (m,) a permutation of the clients: the order in which threads take them
    seconds : (m,) output, each client's wall seconds in the kernel
    n_threads : int
        OpenMP threads over the clients (ignored in a serial build). BLAS must be single-threaded.
    chunk_size : int

    Returns
    -------
    ok : bool
        False when a work buffer could not be allocated (outputs then invalid).
    """
    cdef Py_ssize_t m = addr.shape[0]
    cdef RoundProblem P
    cdef int path = <int>_fill_round_problem(&P, ops)
    cdef Py_ssize_t d = P.d
    cdef Py_ssize_t k = P.k
    cdef Py_ssize_t i, t, max_B = 0
    cdef int failed = 0
    cdef ClientRows R
    cdef ClientWork T
    cdef ClientWork* Tp = NULL
    cdef bint ok_work
    cdef char* client_failed
    if m == 0:
        return True
    if not (n_rows.shape[0] == m and row_stride.shape[0] == m and col_stride.shape[0] == m
            and n_blocks.shape[0] == m and order.shape[0] == m and seconds.shape[0] == m
            and counts.shape[0] == m and sums.shape[0] == m and qsum.shape[0] == m
            and counts.shape[1] == k and qsum.shape[1] == k and sums.shape[1] == k and sums.shape[2] == d):
        raise ValueError("lloyd_round_clients_kernel: inconsistent client or output shapes")
    for i in range(m):
        if order[i] < 0 or order[i] >= m:
            raise ValueError("lloyd_round_clients_kernel: order must be a permutation of the clients")
        if n_blocks[i] > max_B:
            max_B = n_blocks[i]
    if chunk_size < 1:
        chunk_size = 1
    R.addr = &addr[0]
    R.n = &n_rows[0]
    R.rs = &row_stride[0]
    R.cs = &col_stride[0]
    R.B = &n_blocks[0]
    R.f32 = f32
    n_threads = _threads_for(n_threads, m)
    if n_threads == 1:
        with nogil:
            if _new_client_work(&T, max_B, chunk_size, d, k, path):
                for t in range(m):
                    _round_client_at(&R, order[t], &P, chunk_size, &T, &counts[0, 0], &sums[0, 0, 0], &qsum[0, 0],
                                     &seconds[0])
            else:
                failed = 1
            _del_client_work(&T)
    else:
        client_failed = <char*>calloc(m, sizeof(char))
        if client_failed == NULL:
            return False
        with nogil, parallel(num_threads=n_threads):
            # one set of buffers per thread (pointers assigned in the block are thread-private); clients
            # taken in ``order``
            Tp = <ClientWork*>calloc(1, sizeof(ClientWork))
            ok_work = Tp != NULL and _new_client_work(Tp, max_B, chunk_size, d, k, path)
            for t in prange(m, schedule="dynamic"):
                if ok_work:
                    _round_client_at(&R, order[t], &P, chunk_size, Tp, &counts[0, 0], &sums[0, 0, 0], &qsum[0, 0],
                                     &seconds[0])
                else:
                    client_failed[t] = 1
            if Tp != NULL:
                _del_client_work(Tp)
                free(Tp)
        for t in range(m):
            if client_failed[t]:
                failed = 1
        free(client_failed)
    return failed == 0
