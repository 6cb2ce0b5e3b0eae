# cython: language_level=3
"""One Lloyd k-means run on one thread, with the arithmetic of scikit-learn's dense Lloyd (same bits).

Numeric work only: callers (:func:`fastfc._local_kmeans.sklearn_lloyd`) check the inputs and
choose this kernel only where it applies (dense C-contiguous float32/float64, one OpenMP
thread, one BLAS thread).

Why.  scikit-learn's ``_kmeans_single_lloyd`` costs about 15-20 us per iteration beyond its
arithmetic (a Python-level loop, per-iteration allocation and an OpenMP region, the row
norms through its array-API dispatch, a thread-limit context per call); on the published
8-client splits (30 to 2,747 rows per client, 5 to 36 features) k-FED's 40 local runs and
FeCA's starts are mostly that overhead (issue 15, "Small data").

What it computes, step by step (each a specification of the operations, so the results are
the same bits as scikit-learn's ``_kmeans_single_lloyd(X, w, init, max_iter, tol=tol_abs,
n_threads=1)``; the equality is tested):

* each iteration: squared centre norms by ``np.einsum("ij,ij->i", C, C)`` (scikit-learn's
  ``row_norms``); the rows in chunks of 256 (one chunk when ``n <= 256``, the last chunk the
  remainder), each chunk's "distances" ``norms[j] - 2 x.c_j`` by one BLAS ``gemm`` call
  (``gemm('t', 'n', k, m, d, -2, C, d, X_chunk, d, 1, D, k)`` on a buffer pre-filled with the
  norms), the label the first index of the strict minimum, and the per-cluster weight and
  weighted row sums accumulated in row order;
* empty clusters: scikit-learn's own ``_relocate_empty_clusters_dense``, passed in by the
  caller (rare, so called through Python);
* the new centres: ``c_j *= 1.0 / w_j`` (the reciprocal in double precision), an empty
  cluster placed at the heaviest one (first maximum);
* the centre shifts ``sqrt(s_j)``, ``s_j`` the squared distance summed four features at a
  time (``((p0 + p1) + p2) + p3`` added to the running sum) then the rest one by one;
* stop when no label changed (strict convergence) or when NumPy's pairwise sum of the
  squared shifts (8 accumulators up to 128 values, halves beyond) is at most ``tol``;
* without strict convergence, one more labelling pass on the final centres; the inertia is
  the row-order sum of each row's squared distance (as above) times its weight.

The per-chunk sums (each row added to its cluster's weight and sums, in row order) run in a
C helper compiled for AVX-512 / AVX2 / baseline (``fastfc_accumulate_*``): the vector width
changes how many features one instruction adds, not any element's single rounding per row.

Compile without floating-point contraction (``-ffp-contract=off``, set in ``setup.py``): a
fused multiply-add would change the roundings.
"""
cimport cython
from libc.math cimport sqrt
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport dgemm, sgemm

from fastfc._kernels._pairwise cimport pairwise_sum

import numpy as np

try:  # np.einsum's C routine itself (the Python wrapper only forwards to it): the same values, less per call
    from numpy._core._multiarray_umath import c_einsum as _einsum
except ImportError:  # pragma: no cover - other NumPy layouts
    _einsum = np.einsum

ctypedef fused floating:
    float
    double

cdef int _CHUNK = 256


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef inline floating _sqdist4(const floating* a, const floating* b, int d) noexcept nogil:
    """Squared distance, four features at a time then the rest (scikit-learn's summation order)."""
    cdef int q = d // 4
    cdef int r = d - 4 * q
    cdef int i
    cdef floating res = 0
    cdef floating t
    for i in range(q):
        t = (a[0] - b[0]) * (a[0] - b[0])
        t = t + (a[1] - b[1]) * (a[1] - b[1])
        t = t + (a[2] - b[2]) * (a[2] - b[2])
        t = t + (a[3] - b[3]) * (a[3] - b[3])
        res = res + t
        a += 4
        b += 4
    for i in range(r):
        res = res + (a[i] - b[i]) * (a[i] - b[i])
    return res


cdef extern from *:
    """
    /* c[f] += x[f] (* w) for f < d; c and x never overlap, so the compiler may use vector
       instructions: each element gets the same single rounding either way */
    static inline void fastfc_add_row_d(double* __restrict c, const double* __restrict x, int d) {
        for (int f = 0; f < d; ++f) c[f] += x[f];
    }
    static inline void fastfc_add_row_s(float* __restrict c, const float* __restrict x, int d) {
        for (int f = 0; f < d; ++f) c[f] += x[f];
    }
    /* D[i, :] = v for i < m: the first row, then copies of the rows filled so far, doubling (a few
       large memcpy calls instead of m small ones or m * k scalar stores) */
    static inline void fastfc_fill_rows_d(double* D, const double* v, int m, int k) {
        int done = 1, cnt;
        if (m <= 0) return;
        for (int j = 0; j < k; ++j) D[j] = v[j];
        while (done < m) {
            cnt = done < m - done ? done : m - done;
            memcpy(D + (size_t)done * k, D, (size_t)cnt * k * sizeof(double));
            done += cnt;
        }
    }
    static inline void fastfc_fill_rows_s(float* D, const float* v, int m, int k) {
        int done = 1, cnt;
        if (m <= 0) return;
        for (int j = 0; j < k; ++j) D[j] = v[j];
        while (done < m) {
            cnt = done < m - done ? done : m - done;
            memcpy(D + (size_t)done * k, D, (size_t)cnt * k * sizeof(float));
            done += cnt;
        }
    }
    static inline void fastfc_add_scaled_row_d(double* __restrict c, const double* __restrict x, double w, int d) {
        for (int f = 0; f < d; ++f) c[f] += x[f] * w;
    }
    static inline void fastfc_add_scaled_row_s(float* __restrict c, const float* __restrict x, float w, int d) {
        for (int f = 0; f < d; ++f) c[f] += x[f] * w;
    }
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(_WIN32)
    #define FASTFC_ACC_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
    #else
    #define FASTFC_ACC_CLONES
    #endif
    /* rows 0..m-1 of a chunk added to their clusters' weights and sums, in row order (each sum element
       gets one rounding per row, whatever the vector width; no fused multiply-adds) */
    FASTFC_ACC_CLONES static void fastfc_accumulate_d(const double* X, const double* w, const int* labels, int m,
                                                      int d, double* C, double* weight) {
        for (int i = 0; i < m; ++i) {
            const int label = labels[i];
            const double wi = w[i];
            double* __restrict c = C + (size_t)label * d;
            const double* __restrict x = X + (size_t)i * d;
            weight[label] += wi;
            if (wi == 1) { for (int f = 0; f < d; ++f) c[f] += x[f]; }
            else { for (int f = 0; f < d; ++f) c[f] += x[f] * wi; }
        }
    }
    FASTFC_ACC_CLONES static void fastfc_accumulate_s(const float* X, const float* w, const int* labels, int m,
                                                      int d, float* C, float* weight) {
        for (int i = 0; i < m; ++i) {
            const int label = labels[i];
            const float wi = w[i];
            float* __restrict c = C + (size_t)label * d;
            const float* __restrict x = X + (size_t)i * d;
            weight[label] += wi;
            if (wi == 1) { for (int f = 0; f < d; ++f) c[f] += x[f]; }
            else { for (int f = 0; f < d; ++f) c[f] += x[f] * wi; }
        }
    }
    """
    void fastfc_add_row_d(double* c, const double* x, int d) noexcept nogil
    void fastfc_add_row_s(float* c, const float* x, int d) noexcept nogil
    void fastfc_fill_rows_d(double* D, const double* v, int m, int k) noexcept nogil
    void fastfc_fill_rows_s(float* D, const float* v, int m, int k) noexcept nogil
    void fastfc_add_scaled_row_d(double* c, const double* x, double w, int d) noexcept nogil
    void fastfc_add_scaled_row_s(float* c, const float* x, float w, int d) noexcept nogil
    void fastfc_accumulate_d(const double* X, const double* w, const int* labels, int m, int d, double* C,
                             double* weight) noexcept nogil
    void fastfc_accumulate_s(const float* X, const float* w, const int* labels, int m, int d, float* C,
                             float* weight) noexcept nogil


cdef inline void _add_row(floating* c, const floating* x, int d) noexcept nogil:
    if floating is double:
        fastfc_add_row_d(c, x, d)
    else:
        fastfc_add_row_s(c, x, d)


cdef inline void _fill_rows(floating* D, const floating* v, int m, int k) noexcept nogil:
    if floating is double:
        fastfc_fill_rows_d(D, v, m, k)
    else:
        fastfc_fill_rows_s(D, v, m, k)


cdef inline void _add_scaled_row(floating* c, const floating* x, floating w, int d) noexcept nogil:
    if floating is double:
        fastfc_add_scaled_row_d(c, x, w, d)
    else:
        fastfc_add_scaled_row_s(c, x, w, d)


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline int _argmin1(const floating* r, int k) noexcept nogil:
    """First index of the strict minimum of ``r[:k]``."""
    cdef floating best = r[0]
    cdef int label = 0
    cdef int j
    for j in range(1, k):
        if r[j] < best:
            best = r[j]
            label = j
    return label


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline void _argmin4(const floating* r, int k, int* out) noexcept nogil:
    """:func:`_argmin1` of four consecutive rows ``r[0:k], r[k:2k], ...`` (interleaved)."""
    cdef const floating* r1 = r + k
    cdef const floating* r2 = r1 + k
    cdef const floating* r3 = r2 + k
    cdef floating b0 = r[0]
    cdef floating b1 = r1[0]
    cdef floating b2 = r2[0]
    cdef floating b3 = r3[0]
    cdef int l0 = 0
    cdef int l1 = 0
    cdef int l2 = 0
    cdef int l3 = 0
    cdef int j
    for j in range(1, k):
        if r[j] < b0:
            b0 = r[j]
            l0 = j
        if r1[j] < b1:
            b1 = r1[j]
            l1 = j
        if r2[j] < b2:
            b2 = r2[j]
            l2 = j
        if r3[j] < b3:
            b3 = r3[j]
            l3 = j
    out[0] = l0
    out[1] = l1
    out[2] = l2
    out[3] = l3


@cython.boundscheck(False)
@cython.wraparound(False)
cdef inline void _argmin8(const floating* r, int k, int* out) noexcept nogil:
    """:func:`_argmin1` of eight consecutive rows (interleaved)."""
    cdef const floating* r1 = r + k
    cdef const floating* r2 = r1 + k
    cdef const floating* r3 = r2 + k
    cdef const floating* r4 = r3 + k
    cdef const floating* r5 = r4 + k
    cdef const floating* r6 = r5 + k
    cdef const floating* r7 = r6 + k
    cdef floating b0 = r[0]
    cdef floating b1 = r1[0]
    cdef floating b2 = r2[0]
    cdef floating b3 = r3[0]
    cdef floating b4 = r4[0]
    cdef floating b5 = r5[0]
    cdef floating b6 = r6[0]
    cdef floating b7 = r7[0]
    cdef int l0 = 0
    cdef int l1 = 0
    cdef int l2 = 0
    cdef int l3 = 0
    cdef int l4 = 0
    cdef int l5 = 0
    cdef int l6 = 0
    cdef int l7 = 0
    cdef int j
    for j in range(1, k):
        if r[j] < b0:
            b0 = r[j]
            l0 = j
        if r1[j] < b1:
            b1 = r1[j]
            l1 = j
        if r2[j] < b2:
            b2 = r2[j]
            l2 = j
        if r3[j] < b3:
            b3 = r3[j]
            l3 = j
        if r4[j] < b4:
            b4 = r4[j]
            l4 = j
        if r5[j] < b5:
            b5 = r5[j]
            l5 = j
        if r6[j] < b6:
            b6 = r6[j]
            l6 = j
        if r7[j] < b7:
            b7 = r7[j]
            l7 = j
    out[0] = l0
    out[1] = l1
    out[2] = l2
    out[3] = l3
    out[4] = l4
    out[5] = l5
    out[6] = l6
    out[7] = l7


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _pass(const floating* X, const floating* w, int n, int d, const floating* C, const floating* norms,
                int k, int* labels, floating* C_new, floating* weight, floating* D, bint update) noexcept nogil:
    """One labelling pass over all rows (chunks of 256); with ``update`` the weights and row sums too."""
    cdef int chunk = _CHUNK if n > _CHUNK else n
    cdef int n_chunks = n // chunk
    cdef int rem = n - n_chunks * chunk
    cdef int c, m, i, start, label
    cdef floating wi
    cdef floating alpha = -2.0
    cdef floating beta = 1.0
    cdef char ta = b't'
    cdef char tb = b'n'
    cdef const floating* x
    if rem:
        n_chunks += 1
    if update:
        memset(C_new, 0, k * d * sizeof(floating))
        memset(weight, 0, k * sizeof(floating))
    for c in range(n_chunks):
        start = c * chunk
        m = rem if (c == n_chunks - 1 and rem > 0) else chunk
        _fill_rows(D, norms, m, k)
        if floating is double:
            dgemm(&ta, &tb, &k, &m, &d, &alpha, <double*>C, &d, <double*>(X + start * d), &d, &beta, D, &k)
        else:
            sgemm(&ta, &tb, &k, &m, &d, &alpha, <float*>C, &d, <float*>(X + start * d), &d, &beta, D, &k)
        # each row's label: the first index of the strict minimum; eight (then four) rows at a time, so their
        # compare-and-select chains overlap (one row's chain is latency-bound), the same labels
        i = 0
        while i + 8 <= m:
            _argmin8(D + i * k, k, labels + start + i)
            i += 8
        while i + 4 <= m:
            _argmin4(D + i * k, k, labels + start + i)
            i += 4
        while i < m:
            labels[start + i] = _argmin1(D + i * k, k)
            i += 1
        if update:  # row by row, in row order: each cluster's weight and sums add up as one pass would
            # (x * 1 == x exactly: rows of weight 1 are added without the products)
            if floating is double:
                fastfc_accumulate_d(X + start * d, w + start, labels + start, m, d, C_new, weight)
            else:
                fastfc_accumulate_s(X + start * d, w + start, labels + start, m, d, C_new, weight)


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
def lloyd_single(const floating[:, ::1] X, const floating[::1] sample_weight, centers_init, int max_iter,
                 double tol, relocate):
    """Lloyd from ``centers_init`` on one thread: ``(labels, inertia, centers, n_iter)``.

    The same values, bit for bit, as scikit-learn's
    ``_kmeans_single_lloyd(X, sample_weight, centers_init, max_iter=max_iter, tol=tol, n_threads=1)``
    (see the module docstring); like it, ``centers_init`` (C-contiguous, X's dtype) is used
    as a work buffer and may be overwritten.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float32 or float64, C-contiguous, n_samples >= 1
    sample_weight : ndarray of shape (n_samples,), X's dtype
    centers_init : ndarray of shape (n_clusters, n_features), X's dtype, C-contiguous
    max_iter : int, >= 1
    tol : float
        Absolute tolerance on the summed squared centre shift.
    relocate : callable
        scikit-learn's ``_relocate_empty_clusters_dense`` (called when a cluster ends empty).

    Returns
    -------
    labels : ndarray of shape (n_samples,), int32
    inertia : float
    centers : ndarray of shape (n_clusters, n_features)
    n_iter : int
    """
    cdef int n = X.shape[0]
    cdef int d = X.shape[1]
    cdef object C_arr = centers_init  # the current centres (Python reference, for einsum and relocation)
    cdef object N_arr = np.zeros_like(centers_init)  # the next centres
    cdef object T_arr
    cdef int k = C_arr.shape[0]
    cdef object labels_arr = np.full(n, -1, dtype=np.int32)
    cdef object weight_arr = np.zeros(k, dtype=C_arr.dtype)
    cdef object norms_arr = np.empty(k, dtype=C_arr.dtype)
    cdef int[::1] labels = labels_arr
    cdef int[::1] labels_old = np.full(n, -1, dtype=np.int32)
    cdef floating[::1] weight = weight_arr
    cdef floating[::1] norms = norms_arr
    cdef floating[::1] shift2 = np.empty(k, dtype=C_arr.dtype)
    # both centre buffers viewed once; the iterations swap raw pointers (and the Python references)
    cdef floating[:, ::1] buf_a = C_arr
    cdef floating[:, ::1] buf_b = N_arr
    cdef floating* c_old = &buf_a[0, 0]
    cdef floating* c_new = &buf_b[0, 0]
    cdef floating* c_tmp
    cdef const floating* x0 = &X[0, 0]
    cdef const floating* w0 = &sample_weight[0]
    cdef int* lab = &labels[0]
    cdef int* lab_old = &labels_old[0]
    cdef floating* wt = &weight[0]
    cdef floating* D
    cdef int it = 0
    cdef int i, j, f, heaviest
    cdef bint strict = False
    cdef bint changed, empty
    cdef floating alpha, s, inertia
    cdef double total
    chunk = _CHUNK if n > _CHUNK else n
    D = <floating*> malloc(chunk * k * sizeof(floating))
    if D == NULL:
        raise MemoryError("Lloyd: could not allocate the distance buffer")
    try:
        for it in range(max_iter):
            _einsum("ij,ij->i", C_arr, C_arr, out=norms_arr)
            with nogil:
                _pass(x0, w0, n, d, c_old, &norms[0], k, lab, c_new, wt, D, True)
                empty = False
                for j in range(k):
                    if wt[j] == 0:
                        empty = True
            if empty:
                relocate(np.asarray(X), np.asarray(sample_weight), C_arr, N_arr, weight_arr,
                         labels_arr)
            with nogil:
                heaviest = 0
                for j in range(1, k):
                    if wt[j] > wt[heaviest]:
                        heaviest = j
                for j in range(k):
                    if wt[j] > 0:
                        alpha = 1.0 / wt[j]
                        for f in range(d):
                            c_new[j * d + f] *= alpha
                    else:
                        for f in range(d):
                            c_new[j * d + f] = c_new[heaviest * d + f]
                for j in range(k):
                    s = <floating>sqrt(_sqdist4(c_new + j * d, c_old + j * d, d))
                    shift2[j] = s * s
                changed = False
                for i in range(n):
                    if lab[i] != lab_old[i]:
                        changed = True
                        break
                c_tmp = c_old
                c_old = c_new
                c_new = c_tmp
            T_arr = C_arr
            C_arr = N_arr
            N_arr = T_arr
            if not changed:
                strict = True
                break
            total = <double>pairwise_sum(&shift2[0], k)
            if total <= tol:
                break
            memcpy(lab_old, lab, n * sizeof(int))
        if not strict:
            _einsum("ij,ij->i", C_arr, C_arr, out=norms_arr)
            with nogil:
                _pass(x0, w0, n, d, c_old, &norms[0], k, lab, NULL, NULL, D, False)
        with nogil:
            inertia = 0
            for i in range(n):
                inertia = inertia + _sqdist4(x0 + i * d, c_old + lab[i] * d, d) * w0[i]
    finally:
        free(D)
    return labels_arr, float(inertia), C_arr, it + 1


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
def kmeanspp_greedy(X_arr, x_squared_norms, sample_weight, int n_clusters, random_state, int n_local_trials,
                    matmul):
    """scikit-learn's greedy k-means++ (``_kmeans_plusplus``) on dense float64 rows: ``(centers, indices)``.

    The same draws from ``random_state`` and the same seeds, bit for bit, as
    ``sklearn.cluster._kmeans._kmeans_plusplus(X, n_clusters, random_state, x_squared_norms,
    sample_weight, n_local_trials)``: the operations that go through BLAS or NumPy's own
    summation loops are NumPy's, called as scikit-learn calls them (each step's candidate
    rows' squared norms by ``np.einsum("ij,ij->i", A, A)``, the products ``A @ X.T`` by
    ``matmul``, each candidate's potential by ``matmul(D, w[:, None])``, the first potential
    by ``matmul(d0, w)``, the first draw by ``random_state.choice``; scikit-learn's per-step
    ``random_state.uniform(size=n_local_trials)`` are the same doubles as one ``random_sample`` of
    all steps' draws, taken here at once);
    the element-wise steps between them are done here in scikit-learn's order
    (``((-2 g) + |a|^2) + |x|^2``, then ``max(., 0)``, then ``min(closest, .)``; the
    cumulative weighted distances ``w * closest`` summed serially, as ``np.cumsum``; each
    candidate the first index whose cumulative sum is at least its draw, as
    ``np.searchsorted``, capped at ``n - 1``; the candidate of lowest potential, the
    first of equal ones, as ``np.argmin``), which is what scikit-learn's per-step NumPy
    calls compute, without their per-call overhead (issue 15: at k = 50 on a 1,000-row
    client those calls were most of the seeding's time).

    Parameters
    ----------
    X_arr : ndarray of shape (n_samples, n_features), float64, C-contiguous, n_samples >= 1
        (scikit-learn's caller passes the centred rows)
    x_squared_norms : ndarray of shape (n_samples,), float64, ``np.einsum("ij,ij->i", X, X)``
    sample_weight : ndarray of shape (n_samples,), float64, C-contiguous
    n_clusters : int, 1 <= n_clusters <= n_samples
    random_state : numpy.random.RandomState
    n_local_trials : int, >= 1
    matmul : callable
        ``numpy.matmul`` (passed in so the BLAS calls are NumPy's own).

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features), float64
    indices : ndarray of shape (n_clusters,), intp
    """
    cdef const double[:, ::1] X = X_arr
    cdef const double[::1] yy = x_squared_norms
    cdef const double[::1] w = sample_weight
    cdef Py_ssize_t n = X.shape[0]
    cdef Py_ssize_t d = X.shape[1]
    cdef int T = n_local_trials
    cdef Py_ssize_t c, i, t, f, lo, hi, mid, best
    cdef double acc, v, cl, target, pot_best
    XT = X_arr.T
    centers_arr = np.empty((n_clusters, d), dtype=np.float64)
    indices_arr = np.full(n_clusters, -1, dtype=np.intp)
    cdef double[:, ::1] centers = centers_arr
    cdef Py_ssize_t[::1] indices = indices_arr
    closest_arr = np.empty(n, dtype=np.float64)
    cum_arr = np.empty(n, dtype=np.float64)
    cdef double[::1] closest = closest_arr
    cdef double[::1] cum = cum_arr
    G_arr = np.empty((T, n), dtype=np.float64)
    cdef double[:, ::1] G = G_arr
    w_col = sample_weight.reshape(-1, 1)
    pot_arr = np.empty((T, 1), dtype=np.float64)
    cdef double[:, ::1] pot = pot_arr
    xx_arr = np.empty(T, dtype=np.float64)
    cdef double[::1] xx = xx_arr
    cdef Py_ssize_t cand[64]
    cdef double[::1] rv
    cdef double[:, ::1] A
    cdef double[::1] one
    cdef double[:, ::1] g0
    if T < 1 or T > 64:
        raise ValueError("n_local_trials must be in 1 .. 64")

    center_id = random_state.choice(n, p=sample_weight / sample_weight.sum())
    best = center_id
    for f in range(d):
        centers[0, f] = X[best, f]
    indices[0] = best
    # the first seed's squared distances: scikit-learn's _euclidean_distances(centers[0, None], X)
    A0_arr = centers_arr[0:1]
    xx0 = _einsum("ij,ij->i", A0_arr, A0_arr)
    one = xx0
    g0_arr = matmul(A0_arr, XT)
    g0 = g0_arr
    with nogil:
        for i in range(n):
            v = -2 * g0[0, i]
            v = v + one[0]
            v = v + yy[i]
            closest[i] = v if v >= 0 else 0.0
    pot0 = matmul(closest_arr.reshape(1, n), sample_weight)
    pot_best = float(pot0[0])
    # every step's draws at once: random_state.uniform(size=T) per step is T consecutive doubles of the
    # stream, each 0 + 1 * u (the same values), so one draw of (k - 1) * T doubles gives them all, in order,
    # and leaves random_state where the per-step draws would
    cdef double[::1] rv_all = random_state.random_sample(size=(n_clusters - 1) * T) if n_clusters > 1 \
        else np.empty(0)
    for c in range(1, n_clusters):
        rv = rv_all[(c - 1) * T:c * T]
        with nogil:
            acc = 0.0
            for i in range(n):
                acc = acc + w[i] * closest[i]
                cum[i] = acc
            for t in range(T):
                target = rv[t] * pot_best
                lo = 0
                hi = n
                while lo < hi:
                    mid = lo + ((hi - lo) >> 1)
                    if cum[mid] < target:
                        lo = mid + 1
                    else:
                        hi = mid
                cand[t] = lo if lo < n - 1 else n - 1
        A_arr = np.empty((T, d), dtype=np.float64)
        A = A_arr
        with nogil:
            for t in range(T):
                for f in range(d):
                    A[t, f] = X[cand[t], f]
        _einsum("ij,ij->i", A_arr, A_arr, out=xx_arr)
        matmul(A_arr, XT, out=G_arr)
        with nogil:
            for t in range(T):
                for i in range(n):
                    v = -2 * G[t, i]
                    v = v + xx[t]
                    v = v + yy[i]
                    v = v if v >= 0 else 0.0
                    cl = closest[i]
                    G[t, i] = cl if cl <= v else v
        matmul(G_arr, w_col, out=pot_arr)
        with nogil:
            best = 0
            for t in range(1, T):
                if pot[t, 0] < pot[best, 0]:
                    best = t
            pot_best = pot[best, 0]
            for i in range(n):
                closest[i] = G[best, i]
            for f in range(d):
                centers[c, f] = X[cand[best], f]
            indices[c] = cand[best]
    return centers_arr, indices_arr
