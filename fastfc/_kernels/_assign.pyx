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
"""
cimport cython
from cython.parallel cimport prange
from libc.stdlib cimport malloc, free

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
    if n_threads < 1:
        n_threads = 1
    if n_threads > n_chunks:
        n_threads = <int>n_chunks
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
