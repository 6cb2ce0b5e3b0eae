"""Input validation shared by every estimator, the message readers and the CLI.

Kernels never validate; everything that reaches them passed through here.
"""
from __future__ import annotations

import struct
import tokenize
import zipfile
import zlib
from collections.abc import Sequence
from numbers import Integral

import numpy as np
import scipy.sparse
from sklearn.utils.validation import check_array, validate_data

from ._limits import MAX_ABS_VALUE  # noqa: F401  (the data bound; re-exported)

__all__ = [
    "check_client_data",
    "check_clients",
    "check_client_index",
    "split_by_client_ids",
    "ClientRows",
    "row_counts",
]

_FLOAT_DTYPES = (np.float64, np.float32)



#: what NumPy, zipfile, zlib and gzip raise on a damaged or hostile file (bad archives and CRCs, encrypted or
#: unknown-compression members, .npy headers that do not parse or claim impossible shapes, truncated streams):
#: each file reader turns these into its own one error type (RuntimeError covers NotImplementedError and
#: RecursionError, OSError gzip's BadGzipFile, ValueError UnicodeDecodeError)
FILE_READ_ERRORS = (ValueError, TypeError, KeyError, IndexError, OSError, EOFError, zipfile.BadZipFile,
                    zipfile.LargeZipFile, zlib.error, RuntimeError, MemoryError, OverflowError, SyntaxError,
                    struct.error, tokenize.TokenError)


#: arrays of at least this many values have their extremes taken in two row halves (threaded when
#: ``n_jobs`` allows): each half NumPy reductions that release the GIL
FINITE_SPLIT_MIN = 1 << 18


def check_client_data(
    X, *, name: str = "X", dtype=_FLOAT_DTYPES, min_samples: int = 1, estimator=None, reset: bool = True,
    n_jobs=1,
) -> np.ndarray:
    """Validate one data matrix: 2-D, numeric, finite, C-contiguous float.

    float32 and float64 are kept; anything else numeric is converted to
    float64. The caller's array is never modified (a copy is made whenever a
    conversion is needed; kernels never write to their inputs). ``n_jobs``: threads of the
    finiteness check of a large array already in that form (the result does not depend on it).
    """
    if type(X) is np.ndarray and X.ndim == 2 and X.dtype in dtype and X.flags.c_contiguous \
            and X.shape[0] >= max(min_samples, 1) and X.shape[1] >= 1 and _small_finite(X, n_jobs):
        # already what check_array would return unchanged (itself: no copy); a finite max and min within
        # MAX_ABS_VALUE prove every value finite and in range. Anything else takes the full path and its messages.
        # With an estimator, scikit-learn's feature-count and feature-name bookkeeping without check_array
        # (which would sum X again, on one thread: 40 ms at 10^6 x 50; issue 15)
        if estimator is not None:
            validate_data(estimator, X, reset=reset, skip_check_array=True)
        return X
    if X is None:
        raise ValueError(f"{name} is None; expected a 2-D array of shape (n_samples, n_features)")
    _reject_sparse(X, name)
    if isinstance(X, (list, tuple)) and X and all(np.ndim(x) == 2 for x in X):
        raise TypeError(
            f"{name} is a list of {len(X)} 2-D arrays; expected one 2-D array. For data held per client "
            "use fit_clients(X_clients), or stack the rows and pass fit(X, client_ids=...)"
        )
    try:
        arr = np.asarray(X) if not hasattr(X, "dtype") else X
    except ValueError as exc:  # ragged nested sequences
        raise ValueError(f"{name} is not a rectangular array: {exc}") from None
    if hasattr(arr, "dtype") and arr.dtype.kind in "OUSVmM" and arr.dtype != object:
        # datetime64/timedelta64 would otherwise become their raw integer counts (units since the epoch)
        raise TypeError(f"{name} has non-numeric dtype {arr.dtype}; expected real numbers")
    kwargs = dict(dtype=list(dtype), order="C", ensure_all_finite=True, ensure_2d=True, ensure_min_samples=min_samples)
    try:
        if estimator is not None:
            out = validate_data(estimator, X, reset=reset, **kwargs)
        else:
            out = check_array(X, input_name=name, **kwargs)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        if "Complex data not supported" in msg or "not 'complex'" in msg:  # an ndarray, or inside an object array
            raise ValueError(f"{name}: Complex data not supported; expected real numbers") from None
        if isinstance(exc, TypeError) or "could not convert" in msg or "Unable to convert" in msg:
            raise TypeError(f"{name} contains non-numeric values: {msg}") from None
        if name not in msg:  # scikit-learn's shape messages do not say which array (which client) they are about
            raise ValueError(f"{name}: {msg}") from None
        raise
    if out.shape[1] == 0:
        raise ValueError(f"{name} has 0 features; at least one is required")
    if out.dtype == np.float64 and out.size and not _small_finite(out):
        peak = max(float(out.max()), -float(out.min()))
        raise ValueError(
            f"{name} has values of magnitude up to {peak:.3g}; fastfc computes squared distances and variances "
            f"in float64, which overflow for values beyond about {MAX_ABS_VALUE:.0e}: rescale the data "
            f"(e.g. divide it by 1e{int(np.floor(np.log10(peak)))})"
        )
    return out


def _small_finite(X: np.ndarray, n_jobs=1) -> bool:
    """Every value finite and of magnitude at most :data:`MAX_ABS_VALUE` (max and min, no temporary;
    NaN propagates through both), in two row halves on up to two threads for a large ``X``."""
    def extremes(part):
        hi, lo = float(part.max()), float(part.min())  # Python floats: a float32 compared with 1e150 would cast it down
        return bool(np.isfinite(hi) and np.isfinite(lo) and hi <= MAX_ABS_VALUE and lo >= -MAX_ABS_VALUE)

    if n_jobs is None or n_jobs == 1 or X.size < FINITE_SPLIT_MIN or X.shape[0] < 2:
        return extremes(X)
    from ._units import _row_halves, _run_parts

    return all(_run_parts(lambda sl: extremes(X[sl]), _row_halves(X.shape[0]), n_jobs))


def _reject_sparse(X, name: str) -> None:
    if scipy.sparse.issparse(X):
        raise TypeError(
            f"{name} is a scipy sparse {X.format} matrix; fastfc's methods compute dense centres and need dense "
            "data: pass X.toarray() (or reduce the dimension first, e.g. with TruncatedSVD)"
        )


def check_client_index(client_index) -> int:
    """``client_index`` must be an int >= 0 (numpy integers too; not a bool, not a float)."""
    if isinstance(client_index, (bool, np.bool_)) or not isinstance(client_index, (Integral, np.integer)):
        raise TypeError(f"client_index must be an int >= 0, got {client_index!r} ({type(client_index).__name__})")
    if client_index < 0:
        raise ValueError(f"client_index must be an int >= 0, got {client_index}")
    return int(client_index)


def check_clients(X_clients: Sequence, *, min_samples: int = 1) -> list[np.ndarray]:
    """Validate a list of per-client matrices.

    All clients must be 2-D, finite, non-empty and share one feature count;
    mixed float32/float64 inputs are promoted to float64 so every client and
    the server compute in one precision.
    """
    _reject_sparse(X_clients, "X_clients")
    if isinstance(X_clients, np.ndarray) and X_clients.dtype != object:
        raise TypeError(
            "X_clients must be a list of 2-D arrays (one per client), not a single array; "
            "use fit(X, client_ids=...) for one stacked matrix"
        )
    try:
        items = list(X_clients)
    except TypeError:
        raise TypeError("X_clients must be a list of 2-D arrays, one per client") from None
    if len(items) == 0:
        raise ValueError("X_clients is empty; at least one client is required")
    out = []
    for i, Xi in enumerate(items):
        _reject_sparse(Xi, f"client {i} data")
        if Xi is not None and hasattr(Xi, "__len__") and len(Xi) == 0:
            raise ValueError(f"client {i} is empty (0 samples); every client needs at least one row")
        out.append(check_client_data(Xi, name=f"client {i} data", min_samples=min_samples))
    n_features = {a.shape[1] for a in out}
    if len(n_features) > 1:
        counts = ", ".join(f"client {i}: {a.shape[1]}" for i, a in enumerate(out))
        raise ValueError(f"clients have different feature counts ({counts}); all must match")
    if len({a.dtype for a in out}) > 1:
        out = [a.astype(np.float64) for a in out]
    return out


def split_by_client_ids(n_samples: int, client_ids) -> tuple[list, np.ndarray]:
    """Group row indices by client id, in O(n) for integer ids and short strings.

    Parameters
    ----------
    n_samples : int
        Rows of the stacked matrix.
    client_ids : array-like of shape (n_samples,) or None
        The client of each row (any sortable labels); ``None`` means one client.

    Returns
    -------
    rows_per_client : list of slice or ndarray of intp
        Client ``c``'s rows, in input order: a ``slice`` when they form one contiguous block
        (``X[rows]`` is then a view), else an index array of shape (n_rows_c,).
    unique_ids : ndarray of shape (n_clients,)
        The distinct ids in sorted order; client ``c`` owns the rows whose id is ``unique_ids[c]``.

    Notes
    -----
    Clients come out in sorted id order (the documented order of ``fit(X, client_ids=...)``)
    with each client's rows in input order, as ``np.unique`` and a stable sort would give.
    Integer ids over a compact range are coded with one counting pass (``bincount`` and a
    look-up table); sparse integers, floats and strings of at most 8 bytes are coded through
    a hash-based ``np.unique(sorted=False)`` (numpy >= 2.3) and a binary search over the few
    distinct ids; other labels (objects, long strings) fall back to ``np.unique``, which sorts.
    Rows are then grouped without a comparison sort: each contiguous run of one client is
    a slice; otherwise a stable radix ``argsort`` of 8- or 16-bit codes (up to 65 536
    clients) orders them. ``client_ids`` is never modified.
    """
    if client_ids is None:
        return [slice(0, n_samples)], np.zeros(1, dtype=np.int64)
    ids = np.asarray(client_ids)
    if ids.ndim != 1 or ids.shape[0] != n_samples:
        raise ValueError(
            f"client_ids must be 1-D of length n_samples={n_samples}; got shape {ids.shape}"
        )
    if ids.dtype.kind == "f" and not np.all(np.isfinite(ids)):
        raise ValueError("client_ids contains NaN or inf")
    if n_samples == 0:
        return [], ids[:0].copy()
    uniq, codes, counts = _code_ids(ids)
    n_clients = len(uniq)
    if n_clients == 1:
        return [slice(0, n_samples)], uniq
    differ = codes[1:] != codes[:-1]
    if np.count_nonzero(differ) + 1 == n_clients:  # every client is one contiguous block: views
        starts = np.concatenate(([0], np.flatnonzero(differ) + 1))
        first = codes[starts]
        rows: list = [None] * n_clients
        for s, c in zip(starts.tolist(), first.tolist()):
            rows[c] = slice(s, s + int(counts[c]))
        return rows, uniq
    del differ
    order = np.argsort(codes, kind="stable")  # numpy sorts 8- and 16-bit keys with a radix sort: O(n)
    bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
    return [order[bounds[c]:bounds[c + 1]] for c in range(n_clients)], uniq


def _small_codes(n_codes: int):
    """The narrowest unsigned dtype for codes 0 .. n_codes - 1 (uint8/uint16 are radix-sorted by numpy)."""
    return np.uint8 if n_codes <= 256 else np.uint16 if n_codes <= 65536 else np.intp


def _code_ids(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted distinct ids, code of each row in [0, n_distinct), rows per code) -- see split_by_client_ids."""
    n = ids.shape[0]
    kind = ids.dtype.kind
    if kind in "iub":
        work = ids.astype(np.int64) if kind == "b" else ids
        lo, hi = int(work.min()), int(work.max())
        span = hi - lo + 1
        if span <= 2 * n + 65536 and hi <= np.iinfo(np.intp).max:  # compact range: counting pass + look-up table
            shifted = work.astype(np.intp, copy=False)
            shifted = shifted - lo if lo != 0 else shifted
            counts = np.bincount(shifted, minlength=span)
            present = np.flatnonzero(counts)
            dtype = _small_codes(len(present))
            lut = np.zeros(span, dtype=dtype)
            lut[present] = np.arange(len(present), dtype=dtype)
            uniq = (present + lo).astype(ids.dtype)
            return uniq, lut[shifted], counts[present]
        return _code_by_hash(ids, ids)
    if kind in "SU" and ids.dtype.itemsize in (1, 2, 4, 8):
        # a fixed-width string of 1-8 bytes is one unsigned integer: hash those, sort only the distinct strings
        return _code_by_hash(ids, ids.view(np.dtype(f"u{ids.dtype.itemsize}")))
    if kind == "f":
        return _code_by_hash(ids, ids)
    uniq, inverse = np.unique(ids, return_inverse=True)
    return _finish_codes(uniq, inverse.reshape(-1))


def _finish_codes(uniq: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    codes = codes.astype(np.intp, copy=False)
    counts = np.bincount(codes, minlength=len(uniq))
    return uniq, codes.astype(_small_codes(len(uniq)), copy=False), counts


def _code_by_hash(ids: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes through a hash-based unique of ``keys`` (one key per id) and a binary search."""
    try:
        ukeys = np.unique(keys, sorted=False)
    except TypeError:  # numpy < 2.3: no hash-based unique
        uniq, inverse = np.unique(ids, return_inverse=True)
        return _finish_codes(uniq, inverse.reshape(-1))
    ukeys = np.sort(ukeys)  # few distinct keys: cheap
    codes = np.searchsorted(ukeys, keys).astype(np.intp, copy=False)
    uvals = ukeys.view(ids.dtype) if keys is not ids else ukeys
    order = np.argsort(uvals, kind="stable")  # sorted order of the ids themselves (strings differ from keys)
    if np.array_equal(order, np.arange(len(order))):
        return _finish_codes(uvals, codes)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order), dtype=order.dtype)
    return _finish_codes(uvals[order], rank[codes])


class ClientRows(Sequence):
    """The clients of one stacked matrix, each client's rows gathered only when asked for.

    ``rows[i]`` is ``X[rows_per_client[i]]``: a view for a slice, else a fresh C-contiguous
    copy of that client's rows, made on each access and freed when its user drops it, so a
    fit over ``c`` clients holds about ``size(X) * workers / c`` extra bytes, not ``size(X)``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The validated stacked matrix (never written to).
    rows_per_client : list of slice or ndarray of intp
        From :func:`split_by_client_ids`.
    """

    def __init__(self, X: np.ndarray, rows_per_client: list):
        self._X = X
        self._rows = rows_per_client
        self.row_counts = [
            (r.stop - r.start) if isinstance(r, slice) else int(r.shape[0]) for r in rows_per_client
        ]

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._X[self._rows[i]]


def row_counts(X_clients) -> list[int]:
    """Rows of each client of a list of matrices or a :class:`ClientRows` (without gathering them)."""
    counts = getattr(X_clients, "row_counts", None)
    return list(counts) if counts is not None else [int(x.shape[0]) for x in X_clients]
