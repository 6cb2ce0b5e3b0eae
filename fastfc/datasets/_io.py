"""Bundled datasets and the client ``.npz`` file format.

Bundled data: eight UCI datasets shipped in ``fastfc/datasets/data`` (CC BY
4.0, see ``data/ATTRIBUTION.md``) and four that scikit-learn ships itself.

Client files: one ``.npz`` archive of plain arrays, ``X0 .. X{L-1}`` (one
2-D data matrix per client) and optionally ``y0 .. y{L-1}`` (one 1-D integer
label vector per client, used only for scoring). Archives are read with
``allow_pickle=False``: pickled object arrays are refused.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

__all__ = [
    "list_datasets",
    "load_dataset",
    "dataset_info",
    "load_client_npz",
    "save_client_npz",
]


# ---------------------------------------------------------------------------
# bundled datasets
# ---------------------------------------------------------------------------

_UCI_SOURCE = "UCI (CC BY 4.0)"
_SKLEARN_SOURCE = "scikit-learn"


@dataclass(frozen=True)
class _Entry:
    title: str
    n_samples: int
    n_features: int
    n_classes: int
    source: str
    loader: str  # file stem under data/ or the sklearn.datasets.load_* suffix


_REGISTRY: dict[str, _Entry] = {
    "ecoli": _Entry("Ecoli (protein localisation sites)", 336, 7, 8, _UCI_SOURCE, "ecoli"),
    "yeast": _Entry("Yeast (protein localisation sites)", 1484, 8, 10, _UCI_SOURCE, "yeast"),
    "glass": _Entry("Glass Identification", 214, 9, 6, _UCI_SOURCE, "glass"),
    "vehicle": _Entry("Statlog (Vehicle Silhouettes)", 846, 18, 4, _UCI_SOURCE, "vehicle"),
    "winequality_red": _Entry("Wine Quality, red wines", 1599, 11, 6, _UCI_SOURCE, "winequality_red"),
    "landsat": _Entry("Statlog (Landsat Satellite)", 6435, 36, 6, _UCI_SOURCE, "landsat"),
    "pendigits": _Entry("Pen-Based Recognition of Handwritten Digits", 10992, 16, 10, _UCI_SOURCE, "pendigits"),
    "letter": _Entry("Letter Recognition", 20000, 16, 26, _UCI_SOURCE, "letter"),
    "iris": _Entry("Iris", 150, 4, 3, _SKLEARN_SOURCE, "iris"),
    "wine": _Entry("Wine (cultivars)", 178, 13, 3, _SKLEARN_SOURCE, "wine"),
    "breast_cancer": _Entry("Breast Cancer Wisconsin (Diagnostic)", 569, 30, 2, _SKLEARN_SOURCE, "breast_cancer"),
    "digits": _Entry("Optical handwritten digits, 8x8", 1797, 64, 10, _SKLEARN_SOURCE, "digits"),
}


def _lookup(name: Any) -> tuple[str, _Entry]:
    if not isinstance(name, str):
        raise TypeError(f"dataset name must be a string, got {name!r}")
    key = name.strip().lower().replace("-", "_")
    if key not in _REGISTRY:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(list_datasets())}")
    return key, _REGISTRY[key]


def list_datasets() -> list[str]:
    """Names of the bundled datasets, sorted.

    Returns
    -------
    names : list of str
        Valid ``name`` arguments of :func:`load_dataset` and
        :func:`dataset_info`.

    Examples
    --------
    >>> "iris" in list_datasets()
    True
    """
    return sorted(_REGISTRY)


def dataset_info(name: str) -> dict[str, Any]:
    """Size and origin of a bundled dataset, without loading it.

    Parameters
    ----------
    name : str
        A name from :func:`list_datasets` (case-insensitive; ``-`` and ``_``
        are interchangeable).

    Returns
    -------
    info : dict
        ``name`` (canonical), ``title``, ``n_samples``, ``n_features``,
        ``n_classes`` (ints) and ``source`` (``"UCI (CC BY 4.0)"`` for the
        files shipped with fastfc, ``"scikit-learn"`` for those loaded from
        :mod:`sklearn.datasets`).

    Raises
    ------
    ValueError
        If the name is unknown.

    Examples
    --------
    >>> dataset_info("ecoli")["n_classes"]
    8
    """
    key, entry = _lookup(name)
    return {
        "name": key,
        "title": entry.title,
        "n_samples": entry.n_samples,
        "n_features": entry.n_features,
        "n_classes": entry.n_classes,
        "source": entry.source,
    }


def _standardize(X: np.ndarray) -> np.ndarray:
    """Z-score every column in place (float64); constant columns become 0."""
    X -= X.mean(axis=0)
    std = X.std(axis=0)
    std[std == 0] = 1.0
    X /= std
    return X


def load_dataset(
    name: str, *, standardize: bool = False, dtype: DTypeLike = np.float64
) -> tuple[np.ndarray, np.ndarray]:
    """Load a bundled dataset.

    Parameters
    ----------
    name : str
        A name from :func:`list_datasets` (case-insensitive; ``-`` and ``_``
        are interchangeable).
    standardize : bool, default=False
        Z-score every feature over the whole dataset (mean 0, population
        standard deviation 1). Constant features become 0 instead of
        dividing by zero. The papers standardise before splitting the data
        over clients.
    dtype : {np.float64, np.float32}, default=np.float64
        Floating dtype of ``X`` (standardisation is computed in float64
        first).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        C-contiguous feature matrix, a fresh array on every call.
    y : ndarray of int64, shape (n_samples,)
        Class labels ``0..n_classes-1``.

    Raises
    ------
    ValueError
        If the name is unknown (the message lists the valid names).
    TypeError
        If ``dtype`` is not a floating type.

    Examples
    --------
    >>> X, y = load_dataset("ecoli", standardize=True)
    >>> X.shape, int(y.max()) + 1
    ((336, 7), 8)
    """
    key, entry = _lookup(name)
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"dtype must be a floating type (float32 or float64), got {dt}")
    if entry.source == _SKLEARN_SOURCE:
        from sklearn import datasets as sk_datasets

        bunch = getattr(sk_datasets, f"load_{entry.loader}")()
        X = np.array(bunch.data, dtype=np.float64)
        y = np.asarray(bunch.target)
    else:
        ref = resources.files(__package__).joinpath("data", f"{entry.loader}.npz")
        with ref.open("rb") as fh, np.load(fh, allow_pickle=False) as archive:
            X = np.array(archive["X"], dtype=np.float64)
            y = np.asarray(archive["y"])
    _, y = np.unique(y, return_inverse=True)
    y = y.astype(np.int64, copy=False).reshape(-1)
    if standardize:
        X = _standardize(X)
    return np.ascontiguousarray(X, dtype=dt), y


# ---------------------------------------------------------------------------
# client .npz files
# ---------------------------------------------------------------------------

_KEY = re.compile(r"^([Xy])(0|[1-9][0-9]*)$")


def _numbered(keys: list[str], letter: str) -> list[int]:
    return sorted(int(m.group(2)) for k in keys if (m := _KEY.match(k)) and m.group(1) == letter)


def _check_contiguous(indices: list[int], letter: str) -> None:
    expected = list(range(len(indices)))
    if indices != expected:
        missing = sorted(set(range(max(indices) + 1)) - set(indices))
        found = ", ".join(f"{letter}{i}" for i in indices)
        raise ValueError(
            f"client keys must be {letter}0..{letter}{len(indices) - 1} without gaps; "
            f"missing {', '.join(f'{letter}{i}' for i in missing)} (found {found})"
        )


def _read_members(path: str) -> dict[str, np.ndarray] | None:
    """Every array of the ``.npz`` file at ``path``, read at once without pickle (``None``: the file holds a
    single ``.npy`` array). A damaged or hostile file raises ValueError, whatever NumPy or zipfile raised."""
    from .._validation import FILE_READ_ERRORS

    try:
        with open(path, "rb") as fh:
            loaded = np.load(fh, allow_pickle=False)
            if not isinstance(loaded, np.lib.npyio.NpzFile):
                return None
            with loaded:
                return {key: loaded[key] for key in loaded.files}
    except FILE_READ_ERRORS as exc:
        if "Object arrays" in str(exc):  # a member array (junk bytes read as a pickle: "cannot read" below)
            raise ValueError(f"{path!r} holds a pickled object array; only plain numeric arrays are accepted "
                             "(files are read with allow_pickle=False)") from None
        raise ValueError(f"cannot read {path!r} as an .npz archive: {type(exc).__name__}: {exc}") from None



def _check_client_matrix(X: np.ndarray, what: str) -> np.ndarray:
    """One client's matrix of a client file: numeric, 2-D, at least one row."""
    if X.dtype.kind not in "fiub":
        raise ValueError(f"{what} has non-numeric dtype {X.dtype}")
    if X.ndim != 2:
        raise ValueError(f"{what} must be 2-D (n_samples, n_features), got shape {X.shape}")
    if X.shape[0] == 0:
        raise ValueError(f"{what} is empty (0 rows); every client needs at least one row")
    return X


def load_client_npz(path: str | os.PathLike) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Read per-client data from an ``.npz`` archive.

    Parameters
    ----------
    path : str or path-like
        Archive holding ``X0 .. X{L-1}`` (2-D, numeric, one per client, all
        with the same number of columns) and optionally ``y0 .. y{L-1}``
        (1-D integer labels, one per row of the matching ``X``). Other keys
        are ignored.

    Returns
    -------
    X_clients : list of ndarray, length L
        ``X_l`` of shape (n_samples_l, n_features); float32 arrays stay
        float32, everything else becomes float64.
    y_clients : list of ndarray of int64, length L, or None
        The labels, or None when the archive has no ``y`` keys.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not an ``.npz`` archive, holds a pickled object
        array, has no ``X0``, has gaps in the ``X``/``y`` numbering, has
        labels for only some clients, or an array has the wrong shape or
        dtype (empty client, differing feature counts, label count differing
        from row count, non-integer labels).

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "c.npz")
    >>> save_client_npz(path, [np.zeros((2, 3)), np.ones((4, 3))], [[0, 1], [1, 1, 0, 0]])
    >>> Xs, ys = load_client_npz(path)
    >>> [x.shape for x in Xs], ys[1].tolist()
    ([(2, 3), (4, 3)], [1, 1, 0, 0])
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"client file {path!r} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"client file {path!r} is a directory, not an .npz archive")
    archive = _read_members(path)
    if archive is None:
        raise ValueError(f"{path!r} holds a single array, not an .npz archive of X0..Xk / y0..yk")
    keys = list(archive)
    x_idx = _numbered(keys, "X")
    y_idx = _numbered(keys, "y")
    if not x_idx:
        raise ValueError(
            f"{path!r} has no client arrays X0, X1, ...; keys found: {', '.join(keys) or 'none'}"
        )
    _check_contiguous(x_idx, "X")
    if y_idx:
        _check_contiguous(y_idx, "y")
        if len(y_idx) != len(x_idx):
            raise ValueError(
                f"{path!r} has {len(x_idx)} data arrays (X0..X{len(x_idx) - 1}) but "
                f"{len(y_idx)} label arrays (y0..y{len(y_idx) - 1}); give labels for every client or none"
            )
    X_clients: list[np.ndarray] = []
    for i in x_idx:
        X = _check_client_matrix(archive[f"X{i}"], f"X{i} in {path!r}")
        dt = np.float32 if X.dtype == np.float32 else np.float64
        X_clients.append(np.ascontiguousarray(X, dtype=dt))
    widths = [X.shape[1] for X in X_clients]
    if len(set(widths)) > 1:
        detail = ", ".join(f"X{i}: {w}" for i, w in enumerate(widths))
        raise ValueError(f"client arrays in {path!r} have different feature counts ({detail}); all must match")
    if not y_idx:
        return X_clients, None
    y_clients: list[np.ndarray] = []
    for i in y_idx:
        y = archive[f"y{i}"]
        y_clients.append(_check_client_labels(y, X_clients[i].shape[0], f"y{i} in {path!r}"))
    return X_clients, y_clients


def _check_client_labels(y: Any, n_rows: int, name: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {y.shape}")
    if y.shape[0] != n_rows:
        raise ValueError(f"{name} has {y.shape[0]} labels but its client has {n_rows} rows")
    if y.dtype.kind in "iub":
        return y.astype(np.int64, copy=False)
    if y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        return y.astype(np.int64)
    raise ValueError(f"{name} must hold integer labels, got dtype {y.dtype}")


def save_client_npz(
    path: str | os.PathLike,
    X_clients: list[ArrayLike],
    y_clients: list[ArrayLike] | None = None,
    *,
    compress: bool = True,
) -> None:
    """Write per-client data as ``X0 .. X{L-1}`` (and ``y0 .. y{L-1}``) in one ``.npz``.

    Parameters
    ----------
    path : str or path-like
        Output file; NumPy appends ``.npz`` when the name lacks it.
    X_clients : list of array-like, each of shape (n_samples_l, n_features)
        One non-empty numeric matrix per client, all with the same number
        of columns. Stored with their own dtype (float64 if not numeric
        already).
    y_clients : list of array-like of shape (n_samples_l,), optional
        Integer labels per client, stored as int64.
    compress : bool, default=True
        Use :func:`numpy.savez_compressed` rather than :func:`numpy.savez`.

    Raises
    ------
    ValueError
        If there are no clients, a client is empty or not 2-D, feature
        counts differ, or the labels do not match the clients.
    """
    if isinstance(X_clients, np.ndarray):
        raise TypeError("X_clients must be a list of 2-D arrays (one per client), not a single array")
    X_list = list(X_clients)
    if not X_list:
        raise ValueError("X_clients is empty; at least one client is required")
    arrays: dict[str, np.ndarray] = {}
    for i, X in enumerate(X_list):
        arrays[f"X{i}"] = _check_client_matrix(np.asarray(X), f"client {i} data")
    widths = [arrays[f"X{i}"].shape[1] for i in range(len(X_list))]
    if len(set(widths)) > 1:
        detail = ", ".join(f"client {i}: {w}" for i, w in enumerate(widths))
        raise ValueError(f"clients have different feature counts ({detail}); all must match")
    if y_clients is not None:
        y_list = list(y_clients)
        if len(y_list) != len(X_list):
            raise ValueError(f"got {len(X_list)} data arrays but {len(y_list)} label arrays; they must match")
        for i, y in enumerate(y_list):
            arrays[f"y{i}"] = _check_client_labels(y, arrays[f"X{i}"].shape[0], f"client {i} labels")
    saver = np.savez_compressed if compress else np.savez
    saver(os.fspath(path), **arrays)
