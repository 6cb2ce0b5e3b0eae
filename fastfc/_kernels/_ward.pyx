# cython: language_level=3
"""Ward agglomeration in place on a condensed distance matrix (server-side, Fed-HIRE/GOLD).

Numeric work only; :func:`fastfc._grouping.ward_cut` lays out the input and turns the merges
into labels. Plain NumPy reference: ``tests/reference_ward.py``.

* :func:`ward_chain` - the nearest-neighbour-chain algorithm with the Lance-Williams update of
  Ward's criterion, overwriting the condensed matrix it is given (no second ``n (n-1) / 2``
  buffer).

The merges, their heights and their order are those of ``scipy.cluster.hierarchy.linkage(...,
method="ward")`` bit for bit (the same chain rule, tie rule and update arithmetic; built
without fused multiply-add contraction), which the tests check.
"""
cimport cython
import numpy as np
from libc.math cimport sqrt, INFINITY
from libc.stdint cimport int64_t


cdef inline Py_ssize_t _cidx(Py_ssize_t n, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    """Position of the pair (i, j), i != j, in the condensed (row-major upper triangle) matrix."""
    if i > j:
        i, j = j, i
    return n * i - (i * (i + 1)) // 2 + (j - i - 1)


def ward_chain(double[::1] D, Py_ssize_t n, double[:, ::1] Z):
    """Ward linkage of ``n`` points by nearest-neighbour chains, in place on ``D``.

    Parameters
    ----------
    D : ndarray of shape (n (n - 1) / 2,), float64. INOUT: the condensed Euclidean distances
        (``scipy.spatial.distance.pdist``); overwritten with cluster distances.
    n : int. Number of points (at least 2).
    Z : ndarray of shape (n - 1, 4), float64. OUT: merge ``m`` joins the clusters held in slots
        ``Z[m, 0] < Z[m, 1]`` (a cluster lives in the slot of its highest-index part) at height
        ``Z[m, 2]`` into a cluster of ``Z[m, 3]`` points, in the order the merges are found
        (not sorted by height, slots not yet renumbered).

    Notes
    -----
    A chain starts at the lowest live slot and grows by each end's nearest live slot (scanned
    in increasing index; a strictly smaller distance wins, the previous chain element wins
    ties) until two ends are mutual nearest neighbours, which merge. The merged cluster's
    distance to every other live cluster ``i`` is Ward's Lance-Williams update
    ``sqrt(((n_i + n_x) t) d_xi^2 + ((n_i + n_y) t) d_yi^2 - (n_i t) d_xy^2)``,
    ``t = 1 / (n_x + n_y + n_i)``, products evaluated left to right.
    """
    cdef int64_t[::1] size = np.ones(n, dtype=np.int64)
    cdef int64_t[::1] chain = np.zeros(n, dtype=np.int64)
    cdef Py_ssize_t i, m, a, b, x, y, clen = 0
    cdef int64_t nx, ny, ni
    cdef double best, v, t, dxi, dyi
    with nogil:
        for m in range(n - 1):
            if clen == 0:
                for i in range(n):
                    if size[i] > 0:
                        chain[0] = i
                        break
                clen = 1
            while True:
                a = chain[clen - 1]
                if clen > 1:
                    b = chain[clen - 2]
                    best = D[_cidx(n, a, b)]
                else:
                    b = -1
                    best = INFINITY
                for i in range(n):
                    if size[i] == 0 or i == a:
                        continue
                    v = D[_cidx(n, a, i)]
                    if v < best:
                        best = v
                        b = i
                if clen > 1 and b == chain[clen - 2]:
                    break
                chain[clen] = b
                clen += 1
            clen -= 2
            if a < b:
                x = a
                y = b
            else:
                x = b
                y = a
            nx = size[x]
            ny = size[y]
            Z[m, 0] = <double>x
            Z[m, 1] = <double>y
            Z[m, 2] = best
            Z[m, 3] = <double>(nx + ny)
            size[x] = 0
            size[y] = nx + ny
            for i in range(n):
                ni = size[i]
                if ni == 0 or i == y:
                    continue
                t = 1.0 / <double>(nx + ny + ni)
                dxi = D[_cidx(n, i, x)]
                dyi = D[_cidx(n, i, y)]
                D[_cidx(n, i, y)] = sqrt(<double>(ni + nx) * t * dxi * dxi
                                         + <double>(ni + ny) * t * dyi * dyi
                                         - <double>ni * t * best * best)
