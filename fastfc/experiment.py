"""Experiment runner shared by the CLI and the benchmarks.

It turns a dataset name (or a client ``.npz`` file) and a split into client
matrices, fits a method, and scores the labels of all clients' rows.
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["METHODS", "communication", "make_estimator", "dataset_kind", "load_federated", "run_method", "complete_dataset",
           "client_report", "library_versions", "labels_digest"]

#: method name (as used by the CLI) -> "module:Class"
METHODS: dict[str, str] = {
    "kfed": "fastfc.kfed:KFed",
    "fedhire": "fastfc.fed_hire:FedHIRE",
    "gold": "fastfc.gold:GOLD",
    "feca": "fastfc.feca:FeCA",
    "fedkstarhc": "fastfc.fed_kstar_hc:FedKStarHC",
    "fedkmeans": "fastfc.fed_kmeans:FedKMeans",
    "fedcref": "fastfc.fedcref:FedCRef",
}


def _estimator_class(method: str) -> type:
    """The estimator class registered under ``method`` (case, ``-`` and ``_`` ignored)."""
    key = method.lower().replace("-", "").replace("_", "")
    if key not in METHODS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(sorted(METHODS))}")
    module, cls = METHODS[key].split(":")
    return getattr(importlib.import_module(module), cls)


def make_estimator(method: str, **params):
    """Build the estimator registered under ``method`` with ``params``."""
    est_cls = _estimator_class(method)
    cls = est_cls.__name__
    valid = est_cls().get_params()
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(f"{cls} has no parameter(s) {', '.join(unknown)}; valid: {', '.join(sorted(valid))}")
    return est_cls(**params)


#: the file kinds ``dataset`` may name (client files, see :func:`fastfc.datasets.load_client_npz`)
CLIENT_FILE_KINDS: tuple[str, ...] = (".npz",)


def dataset_kind(dataset: str) -> str:
    """Whether ``dataset`` names a bundled dataset or a client file.

    Parameters
    ----------
    dataset : str
        A bundled dataset name (case-insensitive, see
        :func:`fastfc.datasets.list_datasets`), or the path of a client file:
        a name ending in ``.npz``, or an existing path with a directory part.

    Returns
    -------
    kind : {"bundled", "file"}

    Raises
    ------
    ValueError
        If ``dataset`` is neither; the message lists the accepted dataset
        names and file kinds.

    Examples
    --------
    >>> dataset_kind("iris"), dataset_kind("clients.npz")
    ('bundled', 'file')
    """
    from . import datasets

    try:
        datasets.dataset_info(dataset)
        return "bundled"
    except ValueError:
        pass
    if dataset.lower().endswith(CLIENT_FILE_KINDS) or (os.path.sep in dataset and os.path.exists(dataset)):
        return "file"
    ext = os.path.splitext(dataset)[1]
    what = f"{ext} files are not read; " if ext else ""
    raise ValueError(
        f"unknown dataset {dataset!r}: {what}accepted are a bundled dataset name "
        f"({', '.join(datasets.list_datasets())}) or the path of a client file of kind "
        f"{' or '.join(CLIENT_FILE_KINDS)} (arrays X0..Xk and optionally y0..yk, one pair per client, "
        "as written by fastfc.datasets.save_client_npz)"
    )


def load_federated(
    dataset: str,
    *,
    n_clients: int = 8,
    split: str = "iid",
    seed: int = 0,
    standardize: bool = True,
    split_params: dict[str, Any] | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Client matrices and labels for a bundled dataset or a client file.

    Parameters
    ----------
    dataset : str
        A bundled dataset name (see :func:`fastfc.datasets.list_datasets`) or
        the path of a ``.npz`` file in the ``X0..Xk / y0..yk`` client format
        (see :func:`dataset_kind`). A client file's clients are used as
        stored: ``n_clients``, ``split``, ``split_params`` and
        ``standardize`` do not apply to it (the command line refuses or
        warns about them).
    n_clients : int, default=8
    split : {"iid", "dirichlet", "classes", "non-icd"}, default="iid"
    seed : int, default=0
        Seed of the split.
    standardize : bool, default=True
        z-score the whole dataset before splitting (as the papers do).
    split_params : dict, default=None
        Extra keyword arguments of the partitioner (e.g. ``alpha``).

    Returns
    -------
    X_clients, y_clients : lists of ndarray

    Raises
    ------
    ValueError
        If ``dataset`` is neither a bundled name nor a client file (the
        message lists what is accepted), or the file or split is invalid.
    FileNotFoundError
        If the client file does not exist.
    """
    from . import datasets

    if dataset_kind(dataset) == "file":
        return datasets.load_client_npz(dataset)
    X, y = datasets.load_dataset(dataset, standardize=standardize)
    parts = datasets.partition(y, n_clients, split, X=X, random_state=seed, **(split_params or {}))
    return [X[p] for p in parts], [y[p] for p in parts]


def run_method(
    method: str,
    X_clients: list[np.ndarray],
    y_clients: list[np.ndarray] | None = None,
    *,
    n_clusters: int | str | None = None,
    random_state: int | None = 0,
    n_jobs: int | None = None,
    params: dict[str, Any] | None = None,
    progress: Callable[[str, int, int], Any] | None = None,
    protocol: str = "client",
    X_full: np.ndarray | None = None,
    y_full: np.ndarray | None = None,
    client_names: list | None = None,
) -> dict[str, Any]:
    """Fit ``method`` on the clients and score the result.

    ``n_clusters`` defaults to the number of distinct labels in ``y_clients``;
    ``"auto"`` lets a method that can estimate it do so (``n_clusters=None`` of
    :class:`~fastfc.FedKStarHC`). The result reports the number found. A method
    without a global number of clusters (:class:`~fastfc.FedCRef`) takes it as
    every client's own number of clusters (``n_local_clusters``) unless
    ``params`` gives that.

    Two evaluation protocols (gold.md §6):

    ``protocol="client"`` (default)
        The labels of all clients' rows, concatenated in client order
        (duplicates across clients included), against ``y_clients``.
    ``protocol="centroid"`` (centroid inheritance)
        One nearest-centroid step of the fitted global centres
        (``estimator.predict``) on the complete dataset ``X_full`` scored
        against ``y_full``. Without ``X_full`` the complete dataset is the
        union of the clients' distinct rows (rows repeated across clients are
        kept once, with their label). Silhouette and Calinski–Harabasz are
        added, computed on that dataset.

    Returns
    -------
    result : dict
        ``method``, ``n_clients``, ``n_samples``, ``n_features``, ``n_clusters``,
        ``metrics`` (purity, acc, ari, nmi; empty without labels), ``timings``
        (client, server, assign, total seconds), ``n_restarts`` (whole-run
        restarts of the fit, ``estimator.n_restarts_``), ``communication``
        (``rounds``: protocol rounds run; ``bytes_up`` / ``bytes_down``: wire bytes
        per round, summed over clients; ``bytes_up_per_client`` /
        ``bytes_down_per_client``: per client, summed over rounds), ``params`` (the
        estimator's ``get_params()`` as JSON-serialisable values: with the
        data they reproduce the fit), ``clients`` (one entry per client, see
        :func:`client_report`), ``versions`` (:func:`library_versions`),
        ``labels_sha256`` (:func:`labels_digest` of ``estimator.labels_``) and the
        fitted ``estimator``.

    Other Parameters
    ----------------
    client_names : list, default=None
        The id of each client in the report (default ``0..n_clients-1``).
    """
    from .metrics import evaluate

    params = dict(params or {})
    for key in ("n_clusters", "random_state", "n_jobs"):
        if key in params:
            raise ValueError(f"pass {key} as run_method's own argument {key}=..., not in params")
    if n_clusters is None:
        if y_clients is None:
            raise ValueError("n_clusters is required when no labels are given")
        n_clusters = int(np.unique(np.concatenate(y_clients)).size)
    elif isinstance(n_clusters, str):
        if n_clusters != "auto":
            raise ValueError(f"n_clusters must be an integer or 'auto', got {n_clusters!r}")
        n_clusters = None  # the method estimates it (or rejects None with a clear error)
    if "n_clusters" in _estimator_class(method)().get_params():
        params["n_clusters"] = n_clusters
    elif "n_local_clusters" not in params:
        # FedCRef has no global k: n_clusters is every client's own K_i (unless given as a parameter)
        params["n_local_clusters"] = n_clusters
    est = make_estimator(method, random_state=random_state, n_jobs=n_jobs, **params)
    est.fit_clients(X_clients, progress=progress)
    metrics = {}
    if protocol == "client":
        if y_clients is not None:
            metrics = evaluate(np.concatenate(y_clients), est.labels_)
    elif protocol == "centroid":
        if X_full is None:
            X_full, y_full = complete_dataset(X_clients, y_clients)
        pred = est.predict(X_full)
        if y_full is not None:
            metrics = evaluate(np.asarray(y_full), pred, X_full, random_state=0)
    else:
        raise ValueError(f"protocol must be 'client' or 'centroid', got {protocol!r}")
    return {
        "method": method,
        "n_clients": len(X_clients),
        "n_samples": int(sum(len(x) for x in X_clients)),
        "n_features": int(X_clients[0].shape[1]),
        "n_clusters": int(getattr(est, "n_clusters_", n_clusters)),
        "protocol": protocol,
        "metrics": {k: float(v) for k, v in metrics.items()},
        "timings": dict(est.timings_),
        "n_restarts": int(getattr(est, "n_restarts_", 0)),
        "communication": communication(est),
        "params": {key: _jsonable(value) for key, value in est.get_params().items()},
        "clients": client_report(est, X_clients, y_clients, client_names),
        "versions": library_versions(),
        "labels_sha256": labels_digest(est.labels_),
        "estimator": est,
    }


def _n_uploaded(summary) -> int | None:
    """Local clusters (or models) a client's round-0 summary uploads: the rows of its ``centers`` (``params``)."""
    for name in ("centers", "params"):
        value = getattr(summary, name, None)
        if isinstance(value, np.ndarray) and value.ndim == 2:
            return int(value.shape[0])
    return None


def client_report(est, X_clients: list[np.ndarray], y_clients: list[np.ndarray] | None = None,
                  client_names: list | None = None) -> list[dict[str, Any]]:
    """Per-client facts of a fitted estimator.

    Parameters
    ----------
    est : BaseFederatedClusterer
        Fitted with ``fit_clients(X_clients)``.
    X_clients : list of ndarray
    y_clients : list of ndarray, default=None
        True labels; adds ``purity`` and ``ari`` of each client's own rows.
    client_names : list, default=None
        Each client's id (default: its index).

    Returns
    -------
    clients : list of dict
        One per client, in client order: ``client`` (its id), ``rows``,
        ``local_clusters`` (clusters, or models, its round-0 summary uploaded),
        ``clusters_used`` (distinct global clusters among its labels), ``bytes_up`` /
        ``bytes_down`` (wire bytes over all rounds), ``seconds`` (its own phases,
        ``client_seconds_``) and, with labels, ``purity`` and ``ari``.
    """
    from sklearn.metrics import adjusted_rand_score

    from .metrics import purity_score

    names = list(range(len(X_clients))) if client_names is None else list(client_names)
    up = np.asarray(est.bytes_up_).sum(axis=0)
    down = np.asarray(est.bytes_down_).sum(axis=0)
    secs = getattr(est, "client_seconds_", None)
    out = []
    for i, X in enumerate(X_clients):
        labels = est.client_labels_[i]
        row: dict[str, Any] = {
            "client": _jsonable(names[i]), "rows": int(X.shape[0]),
            "local_clusters": _n_uploaded(est.client_summaries_[i]),
            "clusters_used": int(np.unique(labels).size),
            "bytes_up": int(up[i]), "bytes_down": int(down[i]),
            "seconds": None if secs is None else float(secs[i]),
        }
        if y_clients is not None:
            row["purity"] = float(purity_score(y_clients[i], labels))
            row["ari"] = float(adjusted_rand_score(y_clients[i], labels))
        out.append(row)
    return out


def library_versions() -> dict[str, str | None]:
    """Versions of Python, fastfc and the libraries a run's numbers depend on (None: not installed).

    Returns
    -------
    versions : dict of str to str or None
    """
    import platform
    from importlib import metadata

    from . import __version__

    out: dict[str, str | None] = {"python": platform.python_version(), "fastfc": __version__}
    for dist in ("numpy", "scipy", "scikit-learn", "numba", "threadpoolctl"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def labels_digest(labels: np.ndarray) -> str:
    """SHA-256 (hex) of labels as little-endian int32: equal digests mean identical labels.

    Parameters
    ----------
    labels : ndarray of shape (n_samples,)

    Returns
    -------
    digest : str
    """
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(labels, dtype="<i4").tobytes()).hexdigest()


def communication(est) -> dict[str, Any]:
    """Rounds and wire bytes of a fitted estimator (see :func:`run_method`)."""
    up, down = np.asarray(est.bytes_up_), np.asarray(est.bytes_down_)
    return {
        "rounds": int(est.n_rounds_),
        "bytes_up": up.sum(axis=1).tolist(),
        "bytes_down": down.sum(axis=1).tolist(),
        "bytes_up_per_client": up.sum(axis=0).tolist(),
        "bytes_down_per_client": down.sum(axis=0).tolist(),
    }


def _jsonable(value: Any) -> Any:
    """``value`` as JSON-serialisable data (numpy scalars and arrays to Python, anything else to its repr).

    Parameters
    ----------
    value : object
        An estimator parameter.

    Returns
    -------
    value : None, bool, int, float, str, list or dict
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def complete_dataset(
    X_clients: list[np.ndarray], y_clients: list[np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """The union of the clients' distinct rows (first occurrence order) and their labels.

    Parameters
    ----------
    X_clients : list of ndarray of shape (n_samples_l, n_features)
    y_clients : list of ndarray of shape (n_samples_l,), default=None

    Returns
    -------
    X : ndarray of shape (n_distinct, n_features)
    y : ndarray of shape (n_distinct,) or None
    """
    X = np.concatenate(X_clients)
    _, first = np.unique(X, axis=0, return_index=True)
    first = np.sort(first)
    y = None if y_clients is None else np.concatenate(y_clients)[first]
    return X[first], y
