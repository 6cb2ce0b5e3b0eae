"""fastfc: fast one-shot federated clustering.

Estimators follow scikit-learn conventions (``fit``, ``predict``,
``fit_predict``, ``labels_``) and add ``fit_clients`` for data held per
client. Every method is also available as its three protocol phases
(client summary, server aggregation, client assignment), so the same code
runs in-process or across machines.

Submodules and estimators are imported lazily, so ``import fastfc`` is cheap.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0.dev0"

_ESTIMATORS = {
    "KFed": "fastfc.kfed",
    "FedHIRE": "fastfc.fed_hire",
    "GOLD": "fastfc.gold",
    "FeCA": "fastfc.feca",
    "FedKStarHC": "fastfc.fed_kstar_hc",
    "FedKMeans": "fastfc.fed_kmeans",
    "FedCRef": "fastfc.fedcref",
}
_SUBMODULES = ("datasets", "metrics", "protocol", "base", "kfed", "fed_hire", "gold", "experiment", "feca", "fed_kstar_hc", "fed_kmeans", "fedcref", "saving")

__all__ = sorted(_ESTIMATORS) + list(_SUBMODULES) + ["__version__", "load"]


def load(path, *, method=None):
    """Load a fitted estimator saved with ``est.save(path)`` (no pickle); see :func:`fastfc.saving.load`.

    Parameters
    ----------
    path : str or path-like
    method : estimator class or class name, default=None
        Require this estimator.

    Returns
    -------
    est : fitted estimator, of the class that saved it

    Raises
    ------
    fastfc.saving.ModelFileError
        The file is not a valid model file, is of a newer format, or holds another method's model.
    """
    from .saving import load as _load

    return _load(path, method=method)


def __getattr__(name: str):
    if name in _ESTIMATORS:
        return getattr(importlib.import_module(_ESTIMATORS[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"fastfc.{name}")
    raise AttributeError(f"module 'fastfc' has no attribute {name!r}")


def __dir__():
    return __all__
