# cython: language_level=3
"""Nearest-prototype assignment, optionally under per-prototype diagonal weights.

For every row ``x`` of ``X`` the kernel finds

    argmin_k  sum_j w[k, j] * (x[j] - c[k, j])**2        (w = 1 when unweighted)

and that minimum.  Numeric work only: inputs are validated by
:func:`fastfc._assign.assign_nearest`.

Layout.  Prototypes and weights are passed *transposed*, ``(d, k)`` C-contiguous,
so that the innermost loop runs over prototypes: each prototype's distance has
its own accumulator, the compiler vectorises across prototypes, and every
distance is summed over features in the fixed order ``j = 0 .. d-1``.  Results
therefore do not depend on the number of threads.  Ties go to the lowest
prototype index.

Parallelism.  Rows are cut into fixed chunks; chunks are spread over OpenMP
threads (``prange``, ``nogil``) when the extension was built with OpenMP, and
run one after another otherwise.  Each chunk owns a private accumulator.

Many features and prototypes.  :func:`assign_nearest_gemm_kernel` (unweighted
only) screens the prototypes of a chunk of rows with one BLAS matrix product,
``||c||^2 - 2 x.c``, and then computes the exact distance, exactly as above,
of every prototype that a rigorous rounding-error bound cannot exclude.  Its
labels and distances are therefore identical to the direct kernel's.
"""
cimport cython
from cython.parallel cimport prange
from libc.math cimport sqrt
from libc.float cimport DBL_EPSILON, FLT_EPSILON
from libc.stdlib cimport malloc, free
from scipy.linalg.cython_blas cimport dgemm, sgemm

ctypedef fused floating:
    float
    double


def openmp_enabled():
    """True when this extension was compiled with OpenMP."""
    return _OPENMP


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


cdef inline int _threads_for(int n_threads, Py_ssize_t n_chunks) noexcept:
    """Threads to use: at least 1, at most one per chunk."""
    if n_threads < 1:
        return 1
    if n_threads > n_chunks:
        return <int>n_chunks
    return n_threads


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _nearest_direct(
    const floating* X,
    Py_ssize_t m,
    Py_ssize_t d,
    Py_ssize_t k,
    const floating* CT,
    const floating* WT,
    bint weighted,
    floating* acc,
    int* labels,
    floating* mindist,
) noexcept nogil:
    """Nearest prototype of ``m`` contiguous rows ``X`` (row stride ``d``), directly.

    ``CT``/``WT``: (d, k) C-contiguous prototypes/weights, transposed (``WT`` is read
    only when ``weighted``); ``acc``: k scratch values; writes ``labels[0:m]`` and
    ``mindist[0:m]``. Every distance is summed over features in the order 0 .. d-1.
    """
    cdef Py_ssize_t i, j, c
    cdef const floating* row
    cdef const floating* cj
    cdef const floating* wj
    cdef floating xj, t, best
    cdef int arg
    for i in range(m):
        row = X + i * d
        for c in range(k):
            acc[c] = 0
        if weighted:
            for j in range(d):
                xj = row[j]
                cj = CT + j * k
                wj = WT + j * k
                for c in range(k):
                    t = xj - cj[c]
                    acc[c] = acc[c] + wj[c] * (t * t)
        else:
            for j in range(d):
                xj = row[j]
                cj = CT + j * k
                for c in range(k):
                    t = xj - cj[c]
                    acc[c] = acc[c] + t * t
        best = acc[0]
        arg = 0
        for c in range(1, k):
            if acc[c] < best:
                best = acc[c]
                arg = <int>c
        labels[i] = arg
        mindist[i] = best


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
    mindist : (n,) output, dtype of X
    n_threads : int
        OpenMP threads (ignored in a serial build).
    chunk_size : int
        Rows per chunk.
    """
    cdef Py_ssize_t n = X.shape[0]
    cdef Py_ssize_t d = CT.shape[0]
    cdef Py_ssize_t k = CT.shape[1]
    cdef Py_ssize_t n_chunks, ch, start, stop, r
    cdef floating* acc
    if n == 0:
        return
    if chunk_size < 1:
        chunk_size = 1
    n_chunks = (n + chunk_size - 1) // chunk_size
    n_threads = _threads_for(n_threads, n_chunks)
    if n_threads == 1:
        acc = <floating*>malloc(k * sizeof(floating))
        if acc == NULL:
            raise MemoryError()
        try:
            with nogil:
                _nearest_direct(&X[0, 0], n, d, k, &CT[0, 0], &WT[0, 0], weighted, acc, &labels[0], &mindist[0])
        finally:
            free(acc)
        return
    for ch in prange(n_chunks, schedule="static", nogil=True, num_threads=n_threads):
        start = ch * chunk_size
        stop = start + chunk_size
        if stop > n:
            stop = n
        # one small private accumulator per chunk (k values)
        acc = <floating*>malloc(k * sizeof(floating))
        if acc == NULL:
            # the caller sees -1 and raises MemoryError
            for r in range(start, stop):
                labels[r] = -1
        else:
            _nearest_direct(&X[start, 0], stop - start, d, k, &CT[0, 0], &WT[0, 0], weighted, acc,
                            &labels[start], &mindist[start])
            free(acc)


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

    Three steps: the product ``G = X C^T``; per row, the list of candidate prototypes the
    rounding-error bound cannot exclude (as ``r * k + j`` in ``pidx``, rows and prototypes
    in increasing order); the exact distance of every candidate, each summed over features
    in the order 0 .. d-1 like the direct kernel's, four candidates at a time (independent
    chains, for instruction-level parallelism), written over ``G``.
    """
    cdef char transa = b'T'
    cdef char transb = b'N'
    cdef floating one = 1.0
    cdef floating zero = 0.0
    cdef Py_ssize_t r, j, z, p, n_pairs, q
    cdef floating a, best_a, thr, xn2, s0, s1, s2, s3, t0, t1, t2, t3, a0, a1, a2, a3, eps
    cdef floating* row
    cdef const floating* x
    cdef const floating* x0
    cdef const floating* x1
    cdef const floating* x2
    cdef const floating* x3
    cdef const floating* c0
    cdef const floating* c1
    cdef const floating* c2
    cdef const floating* c3
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
        x = X + r * d
        row = G + r * k
        # the screened values ||c_j||^2 - 2 x.c_j, in place, and their minimum (branch-free)
        for j in range(k):
            row[j] = cn[j] - 2 * row[j]
        best_a = row[0]
        for j in range(1, k):
            a = row[j]
            best_a = a if a < best_a else best_a
        # ||x||^2 in four partial sums (any order of non-negative terms errs by at most (d-1) u)
        s0 = 0
        s1 = 0
        s2 = 0
        s3 = 0
        z = 0
        while z + 4 <= d:
            s0 = s0 + x[z] * x[z]
            s1 = s1 + x[z + 1] * x[z + 1]
            s2 = s2 + x[z + 2] * x[z + 2]
            s3 = s3 + x[z + 3] * x[z + 3]
            z = z + 4
        while z < d:
            s0 = s0 + x[z] * x[z]
            z = z + 1
        xn2 = sqrt((s0 + s1) + (s2 + s3))
        # ||x - c_j||^2 - ||x||^2 = ||c_j||^2 - 2 x.c_j; the screened value and the exact
        # (sequentially summed) distance each err by at most (d + 2) u (||x|| + ||c_j||)^2,
        # u = eps / 2: candidates within twice (d + 4) eps (||x|| + max ||c||)^2 of the
        # smallest screened value contain the exact argmin (and all its ties).
        thr = best_a + 2 * (d + 4) * eps * (xn2 + cmax) * (xn2 + cmax)
        for j in range(k):  # branch-free append (pidx has room for m * k)
            pidx[n_pairs] = <int>(r * k + j)
            n_pairs = n_pairs + (row[j] <= thr)
    # exact distances of the candidates, over G (no longer needed)
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
        G[p] = a0
        G[p + 1] = a1
        G[p + 2] = a2
        G[p + 3] = a3
        p = p + 4
    while p < n_pairs:
        x0 = X + (pidx[p] // k) * d
        c0 = C + (pidx[p] % k) * d
        a0 = 0
        for z in range(d):
            t0 = x0[z] - c0[z]
            a0 = a0 + t0 * t0
        G[p] = a0
        p = p + 1
    # per row, the smallest exact distance; candidates come in increasing index (ties: lowest)
    for r in range(m):
        labels[r] = -1
        mindist[r] = 0
    for p in range(n_pairs):
        r = pidx[p] // k
        if labels[r] < 0 or G[p] < mindist[r]:
            labels[r] = pidx[p] - <int>(r * k)
            mindist[r] = G[p]


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


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _lloyd_block(
    const rowfloat[:, :] X,
    Py_ssize_t row_start,
    Py_ssize_t row_stop,
    const double[:, ::1] C,
    const double[:, ::1] CT,
    const double[::1] cn,
    double cmax,
    const double[::1] w,
    bint weighted,
    bint use_gemm,
    bint direct_rows,
    Py_ssize_t chunk_size,
    double* buf,
    double* work,
    int* pidx,
    int* lab,
    double* dist,
    long long* counts,
    double* sums,
    double* inertia,
) noexcept nogil:
    """Accumulate rows ``row_start:row_stop`` into one block's partial statistics.

    Chunk by chunk: the chunk's rows are copied (upcast, and multiplied by ``w`` when
    ``weighted``) into ``buf`` (chunk_size x d float64) unless ``direct_rows`` (unweighted
    C-contiguous float64 rows, used in place); their nearest prototypes come from
    :func:`_nearest_gemm` or :func:`_nearest_direct`; then each row, in order, adds 1 to
    ``counts[c]``, its raw values to ``sums[c, :]`` and its distance to ``inertia[c]``.
    """
    cdef Py_ssize_t d = C.shape[1]
    cdef Py_ssize_t k = C.shape[0]
    cdef Py_ssize_t start, stop, m, r, j, i
    cdef Py_ssize_t s0 = X.strides[0]
    cdef Py_ssize_t s1 = X.strides[1]
    cdef bint by_column = (s0 if s0 >= 0 else -s0) < (s1 if s1 >= 0 else -s1)
    cdef const double* rows
    cdef double* srow
    cdef double* brow
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
        if use_gemm:
            _nearest_gemm(rows, <int>m, <int>d, <int>k, &C[0, 0], &cn[0], cmax, work, pidx, lab, dist)
        else:
            _nearest_direct(rows, m, d, k, &CT[0, 0], &CT[0, 0], False, work, lab, dist)
        for r in range(m):
            c = lab[r]
            if c < 0:  # a row with NaN: it makes sums[0] NaN, which the caller reports
                c = 0
            counts[c] += 1
            inertia[c] += dist[r]
            srow = sums + c * d
            if weighted:  # sums are in raw units
                i = start + r
                for j in range(d):
                    srow[j] += <double>X[i, j]
            else:
                brow = <double*>rows + r * d
                for j in range(d):
                    srow[j] += brow[j]
        start = stop


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
def lloyd_stats_kernel(
    const rowfloat[:, :] X,
    const double[:, ::1] C,
    const double[:, ::1] CT,
    const double[::1] cn,
    double cmax,
    const double[::1] w,
    bint weighted,
    bint use_gemm,
    long long[:, ::1] counts_part,
    double[:, :, ::1] sums_part,
    double[:, ::1] inertia_part,
    long long[::1] counts,
    double[:, ::1] sums,
    double[::1] inertia,
    int n_threads=1,
    Py_ssize_t chunk_size=256,
):
    """Per-cluster counts, raw sums and inertia of the rows of ``X``, fused with the assignment.

    Rows are cut into ``B = counts_part.shape[0]`` blocks of whole chunks (block ``b`` holds
    chunks ``b * n_chunks // B`` to ``(b + 1) * n_chunks // B``); each block accumulates its
    rows in order into its own partial; the partials are then added in block order. Threads
    only change which thread computes which block, so results do not depend on them.

    Parameters
    ----------
    X : (n, d) float32/float64, any strides
    C : (k, d) C-contiguous float64 prototypes (multiplied by ``w`` when weighted)
    CT : (d, k) C-contiguous, ``C`` transposed (the direct kernel's layout)
    cn : (k,) squared norms of ``C`` (read only when ``use_gemm``)
    cmax : float
        An upper bound of the norms of ``C`` (read only when ``use_gemm``).
    w : (d,) feature weights (read only when ``weighted``)
    weighted : bool
    use_gemm : bool
        BLAS-screened assignment (:func:`_nearest_gemm`) rather than the direct one.
    counts_part, sums_part, inertia_part : (B, k), (B, k, d), (B, k) zeroed partials
    counts, sums, inertia : (k,), (k, d), (k,) zeroed outputs
    n_threads : int
        OpenMP threads (ignored in a serial build). BLAS must be single-threaded.
    chunk_size : int
        Rows per chunk.

    Returns
    -------
    ok : bool
        False when a work buffer could not be allocated (outputs then invalid).
    """
    cdef Py_ssize_t n = X.shape[0]
    cdef Py_ssize_t d = C.shape[1]
    cdef Py_ssize_t k = C.shape[0]
    cdef Py_ssize_t B = counts_part.shape[0]
    cdef Py_ssize_t n_chunks, b, c, j, lo, hi
    cdef bint direct_rows
    cdef int failed = 0
    cdef double* buf
    cdef double* work
    cdef int* pidx
    cdef int* lab
    cdef double* dist
    if n == 0 or B == 0:
        return True
    if chunk_size < 1:
        chunk_size = 1
    n_chunks = (n + chunk_size - 1) // chunk_size
    direct_rows = (rowfloat is double and not weighted and d > 0
                   and X.strides[1] == sizeof(double) and X.strides[0] == d * <Py_ssize_t>sizeof(double))
    n_threads = _threads_for(n_threads, B)
    for b in prange(B, schedule="dynamic", nogil=True, num_threads=n_threads):
        lo = (b * n_chunks // B) * chunk_size
        hi = ((b + 1) * n_chunks // B) * chunk_size
        if hi > n:
            hi = n
        buf = <double*>malloc((chunk_size * d + 1) * sizeof(double))
        work = <double*>malloc(((chunk_size * k if use_gemm else k) + 1) * sizeof(double))
        pidx = <int*>malloc(((chunk_size * k if use_gemm else 0) + 1) * sizeof(int))
        lab = <int*>malloc(chunk_size * sizeof(int))
        dist = <double*>malloc(chunk_size * sizeof(double))
        if buf == NULL or work == NULL or pidx == NULL or lab == NULL or dist == NULL:
            failed += 1
        else:
            _lloyd_block(X, lo, hi, C, CT, cn, cmax, w, weighted, use_gemm, direct_rows, chunk_size,
                         buf, work, pidx, lab, dist, &counts_part[b, 0], &sums_part[b, 0, 0], &inertia_part[b, 0])
        free(buf)
        free(work)
        free(pidx)
        free(lab)
        free(dist)
    if failed:
        return False
    with nogil:
        for b in range(B):
            for c in range(k):
                counts[c] += counts_part[b, c]
                inertia[c] += inertia_part[b, c]
                for j in range(d):
                    sums[c, j] += sums_part[b, c, j]
    return True
