"""Input validation shared by every estimator, the message readers and the CLI.

Kernels never validate; everything that reaches them passed through here.
"""
from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import numpy as np
import scipy.sparse
from sklearn.utils.validation import check_array, validate_data

__all__ = [
    "check_client_data",
    "check_clients",
    "check_client_index",
    "split_by_client_ids",
]

_FLOAT_DTYPES = (np.float64, np.float32)


def check_client_data(
    X, *, name: str = "X", dtype=_FLOAT_DTYPES, min_samples: int = 1, estimator=None, reset: bool = True
) -> np.ndarray:
    """Validate one data matrix: 2-D, numeric, finite, C-contiguous float.

    float32 and float64 are kept; anything else numeric is converted to
    float64. The caller's array is never modified (a copy is made whenever a
    conversion is needed; kernels never write to their inputs).
    """
    if X is None:
        raise ValueError(f"{name} is None; expected a 2-D array of shape (n_samples, n_features)")
    _reject_sparse(X, name)
    if isinstance(X, (list, tuple)) and X and all(np.ndim(x) == 2 for x in X):
        raise TypeError(
            f"{name} is a list of {len(X)} 2-D arrays; expected one 2-D array. For data held per client "
            "use fit_clients(X_clients), or stack the rows and pass fit(X, client_ids=...)"
        )
    arr = np.asarray(X) if not hasattr(X, "dtype") else X
    if hasattr(arr, "dtype") and arr.dtype.kind in "OUSV" and arr.dtype != object:
        raise TypeError(f"{name} has non-numeric dtype {arr.dtype}; expected real numbers")
    kwargs = dict(dtype=list(dtype), order="C", ensure_all_finite=True, ensure_2d=True, ensure_min_samples=min_samples)
    try:
        if estimator is not None:
            out = validate_data(estimator, X, reset=reset, **kwargs)
        else:
            out = check_array(X, input_name=name, **kwargs)
    except ValueError as exc:
        msg = str(exc)
        if "could not convert" in msg or "Unable to convert" in msg:
            raise TypeError(f"{name} contains non-numeric values: {msg}") from None
        raise
    if out.shape[1] == 0:
        raise ValueError(f"{name} has 0 features; at least one is required")
    return out


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


def split_by_client_ids(n_samples: int, client_ids) -> tuple[list[np.ndarray], np.ndarray]:
    """Group row indices by client id.

    Returns ``(index_per_client, unique_ids)`` with clients in sorted id order
    and each client's rows in input order.
    """
    if client_ids is None:
        return [np.arange(n_samples, dtype=np.intp)], np.zeros(1, dtype=np.int64)
    ids = np.asarray(client_ids)
    if ids.ndim != 1 or ids.shape[0] != n_samples:
        raise ValueError(
            f"client_ids must be 1-D of length n_samples={n_samples}; got shape {ids.shape}"
        )
    if ids.dtype.kind == "f" and not np.all(np.isfinite(ids)):
        raise ValueError("client_ids contains NaN or inf")
    uniq, inverse = np.unique(ids, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
    groups = [order[bounds[i]:bounds[i + 1]].astype(np.intp) for i in range(len(uniq))]
    return groups, uniq
