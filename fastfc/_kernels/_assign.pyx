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
cdef void _assign_rows(
    const floating[:, ::1] X,
    const floating[:, ::1] CT,
    const floating[:, ::1] WT,
    bint weighted,
    Py_ssize_t start,
    Py_ssize_t stop,
    floating* acc,
    int[::1] labels,
    floating[::1] mindist,
) noexcept nogil:
    cdef Py_ssize_t d = CT.shape[0]
    cdef Py_ssize_t k = CT.shape[1]
    cdef Py_ssize_t i, j, c
    cdef floating xj, t, best
    cdef int arg
    for i in range(start, stop):
        for c in range(k):
            acc[c] = 0
        if weighted:
            for j in range(d):
                xj = X[i, j]
                for c in range(k):
                    t = xj - CT[j, c]
                    acc[c] = acc[c] + WT[j, c] * (t * t)
        else:
            for j in range(d):
                xj = X[i, j]
                for c in range(k):
                    t = xj - CT[j, c]
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
                _assign_rows(X, CT, WT, weighted, 0, n, acc, labels, mindist)
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
            _assign_rows(X, CT, WT, weighted, start, stop, acc, labels, mindist)
            free(acc)


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.cdivision(True)
cdef void _assign_rows_gemm(
    const floating[:, ::1] X,
    const floating[:, ::1] C,
    const floating[::1] cn,
    floating cmax,
    Py_ssize_t start,
    Py_ssize_t stop,
    floating* G,
    int[::1] labels,
    floating[::1] mindist,
) noexcept nogil:
    cdef int k = <int>C.shape[0]
    cdef int d = <int>C.shape[1]
    cdef int m = <int>(stop - start)
    cdef char transa = b'T'
    cdef char transb = b'N'
    cdef floating one = 1.0
    cdef floating zero = 0.0
    cdef Py_ssize_t r, i, j, z
    cdef floating a, best_a, thr, xn2, xn, acc, t, best, eps
    cdef floating* row
    cdef int arg
    # column-major view: G (k x m) = C (d x k)^T @ X_chunk (d x m), i.e. row-major
    # G[r, j] = x_{start + r} . c_j
    if floating is double:
        eps = DBL_EPSILON
        dgemm(&transa, &transb, &k, &m, &d, &one, <double*>&C[0, 0], &d,
              <double*>&X[start, 0], &d, &zero, G, &k)
    else:
        eps = FLT_EPSILON
        sgemm(&transa, &transb, &k, &m, &d, &one, <float*>&C[0, 0], &d,
              <float*>&X[start, 0], &d, &zero, G, &k)
    for r in range(m):
        i = start + r
        row = G + r * k
        best_a = cn[0] - 2 * row[0]
        for j in range(1, k):
            a = cn[j] - 2 * row[j]
            if a < best_a:
                best_a = a
        xn2 = 0
        for z in range(d):
            xn2 = xn2 + X[i, z] * X[i, z]
        xn = sqrt(xn2)
        # ||x - c_j||^2 - ||x||^2 = ||c_j||^2 - 2 x.c_j; the screened value and the exact
        # (sequentially summed) distance each err by at most (d + 2) u (||x|| + ||c_j||)^2,
        # u = eps / 2: candidates within twice (d + 4) eps (||x|| + max ||c||)^2 of the
        # smallest screened value contain the exact argmin (and all its ties).
        thr = best_a + 2 * (d + 4) * eps * (xn + cmax) * (xn + cmax)
        best = 0
        arg = -1
        for j in range(k):
            if cn[j] - 2 * row[j] <= thr:
                acc = 0
                for z in range(d):
                    t = X[i, z] - C[j, z]
                    acc = acc + t * t
                if arg < 0 or acc < best:
                    best = acc
                    arg = <int>j
        labels[i] = arg
        mindist[i] = best


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
    cdef Py_ssize_t n_chunks, ch, start, stop, r
    cdef floating* G
    cdef floating cm = <floating>cmax
    if n == 0:
        return
    if chunk_size < 1:
        chunk_size = 1
    n_chunks = (n + chunk_size - 1) // chunk_size
    n_threads = _threads_for(n_threads, n_chunks)
    if n_threads == 1:
        G = <floating*>malloc(chunk_size * k * sizeof(floating))
        if G == NULL:
            raise MemoryError()
        try:
            with nogil:
                for ch in range(n_chunks):
                    start = ch * chunk_size
                    stop = start + chunk_size
                    if stop > n:
                        stop = n
                    _assign_rows_gemm(X, C, cn, cm, start, stop, G, labels, mindist)
        finally:
            free(G)
        return
    for ch in prange(n_chunks, schedule="static", nogil=True, num_threads=n_threads):
        start = ch * chunk_size
        stop = start + chunk_size
        if stop > n:
            stop = n
        G = <floating*>malloc(chunk_size * k * sizeof(floating))
        if G == NULL:
            for r in range(start, stop):
                labels[r] = -1
        else:
            _assign_rows_gemm(X, C, cn, cm, start, stop, G, labels, mindist)
            free(G)
