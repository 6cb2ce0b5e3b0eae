"""Datasets, synthetic data, federated splits and client files.

Bundled data
    :func:`list_datasets`, :func:`dataset_info` and :func:`load_dataset` give
    eight UCI datasets shipped with fastfc (ecoli, yeast, glass, vehicle,
    winequality_red, landsat, pendigits, letter; CC BY 4.0, see
    ``data/ATTRIBUTION.md``) and scikit-learn's iris, wine, breast_cancer and
    digits.

Synthetic data
    :func:`make_gaussian_mixture` samples large isotropic Gaussian mixtures
    (the scalability data of GOLD §IV-E); :func:`make_stochastic_ball` and
    :func:`make_separated_gaussian_mixture` give FeCA's theory models.
    :func:`make_sanity_case` and :func:`sanity_grid` give the sanity suite:
    well-separated clusters over 1 to 1000 clients, in any units.

Federated splits
    :func:`partition` dispatches to :func:`partition_iid`,
    :func:`partition_dirichlet` (label skew), :func:`partition_classes_per_client`
    (a fixed number of classes per client) and :func:`partition_non_icd`
    (GOLD's Non-ICD simulator). All return one sorted ``int64`` index array
    per client and are deterministic for a given ``random_state``.

FedCRef's experiments
    :func:`simulate_fedcref_clients` (whole classes per client, optional overlap),
    :func:`dirty_labels` (dirty-uniform initial labels), :func:`load_fashion_mnist` and
    :func:`load_idx` (IDX files).

Users' own data
    :func:`load_table` reads CSV/TSV, ``.npy``/``.npz`` and Parquet tables into a
    :class:`Table` (features, an optional label column, an optional client column
    split with :meth:`Table.clients`); every problem is a :class:`TableError`
    naming the file, row and column.

Client files
    :func:`save_client_npz` and :func:`load_client_npz` store per-client data
    as ``X0..Xk`` / ``y0..yk`` in one ``.npz`` archive (read without pickle).

Examples
--------
>>> from fastfc.datasets import load_dataset, partition
>>> X, y = load_dataset("iris", standardize=True)
>>> parts = partition(y, 3, "dirichlet", alpha=0.5, random_state=0)
>>> X_clients = [X[p] for p in parts]
"""
from __future__ import annotations

from ._fedcref_sim import dirty_labels, load_fashion_mnist, load_idx, simulate_fedcref_clients
from ._io import dataset_info, list_datasets, load_client_npz, load_dataset, save_client_npz
from ._partition import (
    PARTITION_METHODS,
    partition,
    partition_classes_per_client,
    partition_dirichlet,
    partition_iid,
    partition_non_icd,
)
from ._partition import partition_dirichlet_hsu, partition_subsample
from ._table import TABLE_KINDS, Table, TableError, load_table
from ._sanity import SanityCase, make_sanity_case, sanity_grid
from ._synthetic import make_gaussian_mixture
from ._synthetic import make_separated_gaussian_mixture, make_stochastic_ball, sbm_theorem_separation

__all__ = [
    "list_datasets",
    "dataset_info",
    "load_dataset",
    "make_gaussian_mixture",
    "PARTITION_METHODS",
    "partition",
    "partition_iid",
    "partition_dirichlet",
    "partition_classes_per_client",
    "partition_non_icd",
    "load_client_npz",
    "save_client_npz",
    "load_table",
    "Table",
    "TableError",
    "TABLE_KINDS",
    "make_stochastic_ball",
    "make_separated_gaussian_mixture",
    "sbm_theorem_separation",
    "partition_dirichlet_hsu",
    "partition_subsample",
    "SanityCase",
    "make_sanity_case",
    "sanity_grid",
    "load_idx",
    "load_fashion_mnist",
    "simulate_fedcref_clients",
    "dirty_labels",
]
