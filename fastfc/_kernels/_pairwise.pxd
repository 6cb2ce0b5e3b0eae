# cython: language_level=3
"""NumPy's pairwise summation order, shared by the Cython kernels that must give NumPy's bits
(``cimport``-ed by :mod:`fastfc._kernels._sklloyd` and :mod:`fastfc._kernels._kstar`)."""

ctypedef fused pw_floating:
    float
    double


cdef inline pw_floating pairwise_sum(const pw_floating* a, Py_ssize_t n) noexcept nogil:
    """NumPy's pairwise sum of ``a[:n]`` (the order of ``np.sum`` over a contiguous axis): a plain
    loop from 0 below 8 terms, 8 accumulators up to 128, halves (rounded down to a multiple of 8)
    above."""
    cdef Py_ssize_t i, j, n2
    cdef pw_floating res
    cdef pw_floating r[8]
    if n < 8:
        res = 0
        for i in range(n):
            res = res + a[i]
        return res
    if n <= 128:
        for j in range(8):
            r[j] = a[j]
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] = r[j] + a[i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res = res + a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2)
