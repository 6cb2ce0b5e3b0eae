"""A valid instance of every registered message class, for the protocol tests.

``FACTORIES[cls](rng, k, d, m)`` builds a ``cls`` with ``k >= 1`` centres (or
subclusters), ``d >= 1`` features and ``m >= 0`` entries in its variable-length
arrays (local prototypes, clusterlets, P_b values), honouring the class's
cross-field rules.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import struct

import numpy as np

from fastfc.feca import FeCAModel, FeCAReply, FeCASummary
from fastfc.fed_hire import FedHIREModel, FedHIREReply, FedHIRESummary
from fastfc.fed_kstar_hc import FedKStarHCModel, FedKStarHCReply, FedKStarHCSummary
from fastfc.kfed import KFedModel, KFedReply, KFedSummary
from fastfc._refine import RefineCenters, RefineChainCenters, RefineChainStats, RefineStats
from fastfc.fedcref import (FedCRefFinal, FedCRefGroupModels, FedCRefModels, FedCRefModelSet, FedCRefProceed,
                            FedCRefScores, FedCRefStatus, FedCRefTrainTask, FedCRefTrainUpdate)
from fastfc.protocol import _METHOD_MODULES, Message

for _module in _METHOD_MODULES.values():  # every message class is registered once this module is imported
    importlib.import_module(_module)


def _centers(rng, k, d):
    return rng.normal(size=(k, d))


def _levels(rng, k):
    """Cluster counts of 1-3 hierarchy levels, fine to coarse."""
    return np.sort(rng.integers(1, k + 3, size=int(rng.integers(1, 4))))[::-1].copy()


def _local_to_global(cls):
    return lambda rng, k, d, m: cls(centers=_centers(rng, k, d), local_to_global=rng.integers(0, k, m), n_features=d)


def _fedhire_model(rng, k, d, m):
    sizes = _levels(rng, k)
    return FedHIREModel(centers=_centers(rng, k, d), clusterlet_labels=rng.integers(0, k, m),
                        granular_labels=rng.integers(0, sizes, size=(m, sizes.size)), level_sizes=sizes,
                        n_features=d, n_retries=int(rng.integers(0, 3)))


def _fedhire_reply(rng, k, d, m):
    sizes = _levels(rng, k)
    return FedHIREReply(labels=rng.integers(0, k, m), granular_labels=rng.integers(0, sizes, size=(m, sizes.size)),
                        centers=_centers(rng, k, d), n_features=d)


def _kstar_summary(rng, k, d, m):
    counts = rng.integers(1, 4, k)
    return FedKStarHCSummary(counts=counts, centers=_centers(rng, k, d), radii=rng.random(k),
                             stds=rng.random((k, d)), substitutes=rng.normal(size=(int(counts.sum()), d)), n_features=d)


def _kstar_model(rng, k, d, m):
    labels = rng.permutation(np.concatenate([np.arange(k), rng.integers(0, k, m)]))
    return FedKStarHCModel(centers=_centers(rng, k, d), counts=rng.integers(1, 9, k), radii=rng.random(k),
                           stds=rng.random((k, d)), subcluster_labels=labels, p_curve=rng.random(m),
                           n_nodes=int(rng.integers(1, 50)), b_opt=int(rng.integers(-1, 5)),
                           threshold_t=float(rng.normal()), d_s=float(rng.normal()), estimated=bool(m % 2), n_features=d)


def _refine_stats(rng, k, d, m):
    first = m % 2 == 0  # round-1 uploads carry moments and no inertia
    moments = np.vstack([np.full(d, float(m)), rng.normal(size=d), rng.random(d)]) if first else np.zeros((0, d))
    counts = rng.integers(0, 9, k)
    return RefineStats(counts=counts, sums=rng.normal(size=(k, d)) * (counts > 0)[:, None],  # no rows sum to 0
                       inertia=np.zeros(0) if first else rng.random(k), feature_stats=moments, n_features=d)


def _refine_centers(rng, k, d, m):
    weight = rng.random(d) if m % 2 else None
    return RefineCenters(centers=_centers(rng, k, d), n_features=d, feature_weight=weight, final=bool(m % 3 == 0))


def _chains(rng, m):
    return np.sort(rng.choice(10, size=1 + m % 3, replace=False))


def _refine_chain_stats(rng, k, d, m):
    chains = _chains(rng, m)
    rows = chains.size * k
    counts = rng.integers(0, 9, rows)
    return RefineChainStats(chains=chains, counts=counts, sums=rng.normal(size=(rows, d)) * (counts > 0)[:, None],
                            inertia=rng.random(rows), n_clusters=k, n_features=d)


def _refine_chain_centers(rng, k, d, m):
    final = m % 3 == 0
    chains = _chains(rng, 0 if final else m)
    weight = rng.random(d) if m % 2 else None
    return RefineChainCenters(chains=chains, centers=_centers(rng, chains.size * k, d), n_clusters=k, n_features=d,
                              feature_weight=weight, final=final)


def _fedcref_models(rng, k, d, m):
    sizes = rng.integers(0, 9, k)
    sizes[0] = max(int(sizes[0]), 1)
    clusters = np.flatnonzero(sizes)
    return FedCRefModels(params=rng.normal(size=(clusters.size, d + m)).astype(np.float32), clusters=clusters,
                         sizes=sizes, changed=True, n_features=d)


def _fedcref_task(rng, k, d, m):
    return FedCRefTrainTask(params=rng.normal(size=(k, d + m)).astype(np.float32), groups=rng.integers(0, 5, k),
                            clusters=rng.integers(0, 4, k), epochs=int(rng.integers(0, 8)),
                            fl_round=int(rng.integers(1, 16)), n_features=d)


FACTORIES = {
    KFedSummary: lambda rng, k, d, m: KFedSummary(centers=_centers(rng, k, d), n_features=d),
    KFedModel: lambda rng, k, d, m: KFedModel(centers=_centers(rng, k, d), n_features=d, n_iter=m),
    KFedReply: _local_to_global(KFedReply),
    FeCASummary: lambda rng, k, d, m: FeCASummary(centers=_centers(rng, k, d), radii=rng.random(k), n_features=d),
    FeCAModel: lambda rng, k, d, m: FeCAModel(centers=_centers(rng, k, d), group_sizes=np.sort(rng.integers(1, 9, k))[::-1],
                                              n_groups=k + m, n_features=d),
    FeCAReply: lambda rng, k, d, m: FeCAReply(centers=_centers(rng, k, d), n_features=d),
    FedHIRESummary: lambda rng, k, d, m: FedHIRESummary(centers=_centers(rng, k, d), n_features=d),
    FedHIREModel: _fedhire_model,
    FedHIREReply: _fedhire_reply,
    FedKStarHCSummary: _kstar_summary,
    FedKStarHCModel: _kstar_model,
    FedKStarHCReply: _local_to_global(FedKStarHCReply),
    RefineStats: _refine_stats,
    RefineCenters: _refine_centers,
    RefineChainStats: _refine_chain_stats,
    RefineChainCenters: _refine_chain_centers,
    FedCRefModels: _fedcref_models,
    FedCRefModelSet: lambda rng, k, d, m: FedCRefModelSet(params=rng.normal(size=(k, d + m)).astype(np.float32),
                                                          owners=rng.integers(0, 5, k), clusters=rng.integers(0, 4, k),
                                                          versions=rng.integers(1, 4, k), n_features=d),
    FedCRefScores: lambda rng, k, d, m: FedCRefScores(scores=rng.random((k, m)), oracle_classes=np.zeros(0, np.int64),
                                                      n_features=d),
    FedCRefTrainTask: _fedcref_task,
    FedCRefTrainUpdate: lambda rng, k, d, m: FedCRefTrainUpdate(params=rng.normal(size=(k, d + m)).astype(np.float32),
                                                                counts=rng.integers(0, 99, k), n_features=d),
    FedCRefGroupModels: lambda rng, k, d, m: FedCRefGroupModels(params=rng.normal(size=(m, d + k)).astype(np.float32),
                                                                n_features=d),
    FedCRefStatus: lambda rng, k, d, m: FedCRefStatus(stable=bool(m % 2), frozen=bool(m % 3 == 0), n_refine=m,
                                                      self_acc=float(rng.random()), n_features=d),
    FedCRefProceed: lambda rng, k, d, m: FedCRefProceed(iteration=m + 2, n_features=d),
    FedCRefFinal: lambda rng, k, d, m: FedCRefFinal(cluster_global=rng.integers(-1, k + 3, k), n_groups=k, n_features=d),
}


def example(cls: type[Message], seed: int = 0, k: int = 3, d: int = 2, m: int = 4) -> Message:
    """A valid, addressed ``cls`` message."""
    return FACTORIES[cls](np.random.default_rng(seed), k, d, m).addressed(client=seed % 5, round=seed % 3)


def reseal(body: bytes) -> bytes:
    """Append the digest of ``body``, as someone rewriting a message could."""
    return body + hashlib.sha256(body).digest()


def split_header(data: bytes) -> tuple[bytes, bytes]:
    """The raw header and the payload of well-framed message bytes."""
    (hlen,) = struct.unpack_from("<I", data, 4)
    return data[8:8 + hlen], data[8 + hlen:-32]


def with_header(data: bytes, raw_header: bytes, *, payload: bytes | None = None) -> bytes:
    """``data`` with its header (and optionally payload) replaced, digest recomputed."""
    old_payload = split_header(data)[1]
    body = data[:4] + struct.pack("<I", len(raw_header)) + raw_header + (old_payload if payload is None else payload)
    return reseal(body)


def rewrite_header(data: bytes, edit) -> bytes:
    """``data`` with ``edit(header_dict)`` applied to its parsed header, digest recomputed."""
    header = json.loads(split_header(data)[0])
    edit(header)
    return with_header(data, json.dumps(header).encode())
