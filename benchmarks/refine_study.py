#!/usr/bin/env python
"""Refinement rounds on the ten published 8-client splits: fastfc vs FFCM and centralised k-means (issue 13).

For every split and seed, fits candidate fastfc configurations with at most ``--rounds``
refinement rounds (and the same configuration with 0 rounds, the one-shot method), plus
scikit-learn's ``KMeans(n_init=10, random_state=seed)`` on the pooled rows in the split's
given units, and records ARI and NMI against the ground truth, the refinement rounds used,
and the wire bytes (up + down, all rounds) per client.

The two bars of the issue, per split:

- FFCM: mean ARI of the published federated fuzzy c-means over seeds 0-9
  (``shared/reference_results/ffcm_ref.jsonl``; multi-round, up to 100 rounds). The split
  itself does not depend on the seed (one fixed ``fedhire_splits/<split>.npz`` per split, as
  in ``compare_reference.py``); the seed only sets the method's random state, so the FFCM
  mean over its seeds 0-9 is the bar on any seeds;
- centralised k-means: mean ARI of ``KMeans(n_init=10)`` on the pooled rows over the seeds
  run, minus 0.005.

Modes::

    # selection on seeds 10-19 (every config), then the chosen config reported on seeds 0-9
    python benchmarks/refine_study.py --select 10-19 --seeds 0-9 --out benchmarks/results/refine_study.md
    # report one config only
    python benchmarks/refine_study.py --configs kfed-raw --seeds 0-9

Selection picks the configuration with the most splits whose mean ARI is at least FFCM's,
ties broken by the mean ARI over all splits and seeds. ``--out FILE`` writes what is printed
under the provenance header of ``benchmarks/_provenance.py``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict

import numpy as np

from _provenance import run_with_out
from _shared import SHARED, parse_seeds

SPLITS = ["US", "EC", "YE", "VE", "EP", "CA", "WI", "PE", "LA", "LE"]
KMEANS_SLACK = 0.005


def _configs() -> dict:
    """Candidate configurations: name -> (description, factory(k, seed, rounds) -> estimator)."""
    import fastfc

    def kfed(units, local=1, chains=1, seeding="round1"):
        def make(k, s, r):
            est = fastfc.KFed(n_clusters=k, n_local_clusters=local * k, units=units, refine_rounds=r,
                              refine_n_init=chains, random_state=s, n_jobs=1)
            est._chain_seeding = seeding  # where chains 1..s-1 are seeded (fastfc.base, experimental)
            return est
        return make

    def feca(units):
        return lambda k, s, r: fastfc.FeCA(n_clusters=k, units=units, refine_rounds=r, random_state=s, n_jobs=1)

    def fkm(units, chains=1):
        return lambda k, s, r: fastfc.FedKMeans(n_clusters=k, units=units, max_rounds=r, n_init=chains,
                                                random_state=s, n_jobs=1)

    def fedhire(chains=1):
        return lambda k, s, r: fastfc.FedHIRE(n_clusters=k, refine_rounds=r, refine_n_init=chains, random_state=s,
                                              n_jobs=1)

    return {
        "kfed-raw": ("KFed(units=None, refine_rounds=R)", kfed(None)),
        "kfed-fed": ("KFed(units='federated', refine_rounds=R)", kfed("federated")),
        "kfed-raw-2k": ("KFed(units=None, n_local_clusters=2K, refine_rounds=R)", kfed(None, 2)),
        "kfed-fed-2k": ("KFed(units='federated', n_local_clusters=2K, refine_rounds=R)", kfed("federated", 2)),
        "feca-raw": ("FeCA(units=None, refine_rounds=R)", feca(None)),
        "feca-fed": ("FeCA(units='federated', refine_rounds=R)", feca("federated")),
        "fkm-raw": ("FedKMeans(init='k-means++', units=None, max_rounds=R)", fkm(None)),
        "fkm-fed": ("FedKMeans(init='k-means++', units='federated', max_rounds=R)", fkm("federated")),
        "fedhire": ("FedHIRE(refine_rounds=R) (robust: federation-standardised refinement)", fedhire()),
        "gold": ("GOLD(refine_rounds=R) (robust: federation-standardised refinement)",
                 lambda k, s, r: fastfc.GOLD(n_clusters=k, refine_rounds=r, random_state=s, n_jobs=1)),
        "kstar": ("FedKStarHC(n_clusters=K, refine_rounds=R) (robust: federation-standardised refinement)",
                  lambda k, s, r: fastfc.FedKStarHC(n_clusters=k, refine_rounds=r, random_state=s, n_jobs=1)),
        # parallel refinement chains (refine_n_init / FedKMeans n_init)
        "kfed-raw-c10": ("KFed(units=None, refine_rounds=R, refine_n_init=10)", kfed(None, chains=10)),
        "kfed-fed-c4": ("KFed(units='federated', refine_rounds=R, refine_n_init=4)", kfed("federated", chains=4)),
        "kfed-fed-c10": ("KFed(units='federated', refine_rounds=R, refine_n_init=10)", kfed("federated", chains=10)),
        "kfed-fed-c10-r0": ("KFed(units='federated', refine_rounds=R, refine_n_init=10), chains 1-9 seeded from the "
                            "round-0 local centres", kfed("federated", chains=10, seeding="round0")),
        "kfed-fed-c10-r01": ("KFed(units='federated', refine_rounds=R, refine_n_init=10), chains 1-9 seeded from the "
                             "round-0 local centres and the round-1 cluster means together",
                             kfed("federated", chains=10, seeding="both")),
        "fkm-fed-c4": ("FedKMeans(init='k-means++', units='federated', max_rounds=R, n_init=4)",
                       fkm("federated", chains=4)),
        "fkm-fed-c10": ("FedKMeans(init='k-means++', units='federated', max_rounds=R, n_init=10)",
                        fkm("federated", chains=10)),
        "fedhire-c10": ("FedHIRE(refine_rounds=R, refine_n_init=10) (robust: federation-standardised refinement)",
                        fedhire(chains=10)),
    }


#: the candidates run by default: the first study's chosen config (kfed-fed, refine_study.md of f66cc9f) as the
#: single-chain baseline, and chain configs of the single-chain configs that were not dominated there (kfed-*-2k,
#: feca-*, fkm-raw and kstar were below kfed-fed or fedhire on both bars and in mean ARI on the selection seeds;
#: gold equals fedhire); ``--configs all`` runs every one (about 3x the time)
DEFAULT_CONFIGS = ["kfed-fed", "kfed-raw-c10", "kfed-fed-c4", "kfed-fed-c10", "fkm-fed-c10", "fedhire-c10"]


def load_split(split: str):
    """Clients' rows, pooled labels and number of classes of one published split."""
    from fastfc.datasets import load_client_npz

    X_clients, y_clients = load_client_npz(str(SHARED / "datasets" / "fedhire_splits" / f"{split}.npz"))
    y = np.concatenate(y_clients)
    return X_clients, y, int(np.unique(y).size)


def load_ffcm() -> dict[str, float]:
    """Per split: FFCM mean ARI over the seeds of ``ffcm_ref.jsonl``."""
    ari = defaultdict(list)
    for line in (SHARED / "reference_results" / "ffcm_ref.jsonl").read_text().splitlines():
        rec = json.loads(line)
        ari[rec["dataset"]].append(rec["ari"])
    return {s: float(np.mean(v)) for s, v in ari.items()}


def score(y, labels) -> tuple[float, float]:
    """ARI and NMI (arithmetic normalisation) of ``labels`` against ``y``."""
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    return float(adjusted_rand_score(y, labels)), float(normalized_mutual_info_score(y, labels))


def run_kmeans(split: str, seeds: list[int]) -> dict:
    """Centralised ``KMeans(n_init=10)`` on the pooled rows: ``{"ari": [...], "nmi": [...]}`` per seed."""
    from sklearn.cluster import KMeans

    X_clients, y, k = load_split(split)
    X = np.vstack(X_clients)
    out = defaultdict(list)
    for seed in seeds:
        a, n = score(y, KMeans(n_clusters=k, n_init=10, random_state=seed).fit(X).labels_)
        out["ari"].append(a)
        out["nmi"].append(n)
    return dict(out)


def run_config(name: str, split: str, seeds: list[int], rounds: int, one_shot: bool) -> dict:
    """Fit one configuration on one split for every seed.

    Returns
    -------
    dict
        Lists over seeds: ``ari``, ``nmi``, ``refine_rounds`` (refinement rounds used),
        ``bytes`` (mean over clients of the bytes up + down of all rounds), ``bytes_max``
        (largest client), ``seconds``; with ``one_shot`` also ``ari0``/``nmi0`` of the same
        configuration with 0 refinement rounds.
    """
    factory = _configs()[name][1]
    X_clients, y, k = load_split(split)
    out = defaultdict(list)
    for seed in seeds:
        t0 = time.perf_counter()
        est = factory(k, seed, rounds).fit_clients(X_clients)
        out["seconds"].append(time.perf_counter() - t0)
        a, n = score(y, est.labels_)
        out["ari"].append(a)
        out["nmi"].append(n)
        out["refine_rounds"].append(int(getattr(est, "n_refine_rounds_", 0)))
        per_client = est.bytes_up_.sum(axis=0) + est.bytes_down_.sum(axis=0)
        out["bytes"].append(float(per_client.mean()))
        out["bytes_max"].append(float(per_client.max()))
        if one_shot:
            est0 = factory(k, seed, 0).fit_clients(X_clients)
            a0, n0 = score(y, est0.labels_)
            out["ari0"].append(a0)
            out["nmi0"].append(n0)
    return dict(out)


def run_all(configs: list[str], splits: list[str], seeds: list[int], rounds: int, one_shot: bool):
    """Every config and centralised k-means on every split: ``(res[config][split], km[split])``."""
    res: dict = {c: {} for c in configs}
    km: dict = {}
    for split in splits:
        km[split] = run_kmeans(split, seeds)
        for c in configs:
            res[c][split] = run_config(c, split, seeds, rounds, one_shot)
        print(f"{split} done", file=sys.stderr, flush=True)
    return res, km


def _summary(res_c: dict, km: dict, ffcm: dict, splits: list[str]) -> tuple[int, int, float]:
    """(#splits >= FFCM, #splits >= KMeans - slack, mean ARI over splits and seeds) of one config."""
    n_ffcm = sum(np.mean(res_c[s]["ari"]) >= ffcm[s] for s in splits)
    n_km = sum(np.mean(res_c[s]["ari"]) >= np.mean(km[s]["ari"]) - KMEANS_SLACK for s in splits)
    return int(n_ffcm), int(n_km), float(np.mean([np.mean(res_c[s]["ari"]) for s in splits]))


def print_selection(res: dict, km: dict, ffcm: dict, splits: list[str], seeds: list[int], rounds: int) -> str:
    """Print the selection tables and return the chosen config."""
    print(f"## Selection on seeds {seeds[0]}-{seeds[-1]} (at most {rounds} refinement rounds)\n")
    print("Mean ARI per split over the selection seeds. FFCM: its mean over seeds 0-9 (the split does not depend "
          f"on the seed). KM: centralised KMeans(n_init=10) on the pooled rows, these seeds.\n")
    names = list(res)
    print("| split | FFCM | KM | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for s in splits:
        cells = [f"{np.mean(res[c][s]['ari']):.3f}" for c in names]
        print(f"| {s} | {ffcm[s]:.3f} | {np.mean(km[s]['ari']):.3f} | " + " | ".join(cells) + " |")
    print()
    print("| config | settings | splits >= FFCM | splits >= KM - 0.005 | mean ARI | one-shot mean ARI "
          "| rounds used mean/max | kB per client (mean) |")
    print("|---|---|---|---|---|---|---|---|")
    ranking = []
    desc = _configs()
    for c in names:
        n_ffcm, n_km, mean = _summary(res[c], km, ffcm, splits)
        ranking.append((n_ffcm, mean, c))
        r = np.concatenate([res[c][s]["refine_rounds"] for s in splits])
        b = np.concatenate([res[c][s]["bytes"] for s in splits])
        a0 = np.mean([np.mean(res[c][s]["ari0"]) for s in splits]) if "ari0" in res[c][splits[0]] else float("nan")
        print(f"| {c} | {desc[c][0]} | {n_ffcm}/{len(splits)} | {n_km}/{len(splits)} | {mean:.4f} | {a0:.4f} "
              f"| {r.mean():.1f}/{r.max()} | {b.mean() / 1e3:.1f} |")
    chosen = max(ranking)[2]
    print(f"\nChosen (most splits >= FFCM, then mean ARI): **{chosen}** = `{desc[chosen][0]}`, R = {rounds}\n")
    return chosen


def print_report(name: str, res_c: dict, km: dict, ffcm: dict, splits: list[str], seeds: list[int],
                 rounds: int) -> None:
    """Per-split table of one config against both bars, and the summary line."""
    desc = _configs()[name][0]
    print(f"## Report: {name} = `{desc}`, R = {rounds}, seeds {seeds[0]}-{seeds[-1]}\n")
    print("ARI means over the seeds. Pass FFCM: refined >= FFCM; pass KM: refined >= KM - 0.005. Rounds: "
          "refinement rounds used (after the one-shot round 0). kB: wire bytes up + down over all rounds, "
          "mean over clients (largest client in brackets). FFCM: up to 100 rounds of fuzzy c-means (its rounds "
          "used are not recorded in ffcm_ref.jsonl).\n")
    print("| split | K | FFCM | KM | KM NMI | one-shot ARI | refined ARI | refined NMI | Δ vs FFCM | Δ vs KM "
          "| rounds mean/max | kB per client | pass FFCM | pass KM-0.005 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    n_ffcm = n_km = 0
    all_rounds = []
    for s in splits:
        r = res_c[s]
        a, k_a = float(np.mean(r["ari"])), float(np.mean(km[s]["ari"]))
        p_f, p_k = a >= ffcm[s], a >= k_a - KMEANS_SLACK
        n_ffcm += p_f
        n_km += p_k
        all_rounds += r["refine_rounds"]
        a0 = f"{np.mean(r['ari0']):.3f}" if "ari0" in r else "—"
        k = load_split(s)[2]
        print(f"| {s} | {k} | {ffcm[s]:.3f} | {k_a:.3f} | {np.mean(km[s]['nmi']):.3f} | {a0} | {a:.3f} "
              f"| {np.mean(r['nmi']):.3f} | {a - ffcm[s]:+.3f} | {a - k_a:+.3f} "
              f"| {np.mean(r['refine_rounds']):.1f}/{max(r['refine_rounds'])} "
              f"| {np.mean(r['bytes']) / 1e3:.1f} ({max(r['bytes_max']) / 1e3:.1f}) "
              f"| {'yes' if p_f else 'NO'} | {'yes' if p_k else 'NO'} |")
    print(f"\n**Summary ({name}, seeds {seeds[0]}-{seeds[-1]}):** mean ARI >= FFCM on {n_ffcm}/{len(splits)} "
          f"splits (target >= 9); >= centralised KMeans(n_init=10) - 0.005 on {n_km}/{len(splits)} splits "
          f"(target {len(splits)}); refinement rounds used mean {np.mean(all_rounds):.1f}, max {max(all_rounds)} "
          f"(cap {rounds}).\n")


def print_context(res: dict, km: dict, ffcm: dict, splits: list[str], seeds: list[int]) -> None:
    """All configs on the report seeds (context only: not used for the choice)."""
    print(f"## Context: every candidate on seeds {seeds[0]}-{seeds[-1]} (not used for the choice)\n")
    names = list(res)
    print("| split | FFCM | KM | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for s in splits:
        cells = [f"{np.mean(res[c][s]['ari']):.3f}" for c in names]
        print(f"| {s} | {ffcm[s]:.3f} | {np.mean(km[s]['ari']):.3f} | " + " | ".join(cells) + " |")
    print()
    print("| config | splits >= FFCM | splits >= KM - 0.005 | mean ARI |")
    print("|---|---|---|---|")
    for c in names:
        n_ffcm, n_km, mean = _summary(res[c], km, ffcm, splits)
        print(f"| {c} | {n_ffcm}/{len(splits)} | {n_km}/{len(splits)} | {mean:.4f} |")
    print()


def partition_cost(X: np.ndarray, labels: np.ndarray, weight: np.ndarray | None) -> float:
    """k-means objective of a partition: sum of squared (weighted) distances of rows to their cluster's mean."""
    Xw = X if weight is None else X * weight
    cost = 0.0
    for c in np.unique(labels):
        rows = Xw[labels == c]
        cost += float(((rows - rows.mean(axis=0)) ** 2).sum())
    return cost


def diagnose(name: str, splits: list[str], seeds: list[int], rounds: int, long_rounds: int, n_chains: int,
             ffcm: dict) -> None:
    """Why the chosen config misses a bar: objectives, units, more rounds, one vs ten k-means starts.

    Per split, means over ``seeds``: ARI of centralised KMeans with 10 and 1 starts (raw units) and
    with 10 starts in the config's distance units (rows times its ``feature_weight_``); the config's
    ARI with ``rounds`` and ``long_rounds`` refinement rounds; and the k-means objective of each
    partition in the config's units relative to the 10-start centralised k-means in those units;
    and a simulated multi-start: ``n_chains`` fits of the config (random states
    ``1000 + 10 * seed + j``) with ``rounds`` rounds, keeping the partition of least objective in the
    config's units (a federated server could pick it from the per-cluster inertia every client
    uploads) -- ``n_chains`` times the bytes of one fit, in the same rounds.
    """
    from sklearn.cluster import KMeans

    factory = _configs()[name][1]
    print(f"## Diagnosis: {name} against centralised k-means, seeds {seeds[0]}-{seeds[-1]}\n")
    print("ARI means over the seeds. KM10/KM1: centralised KMeans(n_init=10 / 1) on the pooled rows in the given "
          "units; KM10-w: KMeans(n_init=10) on the pooled rows in the config's distance units (rows x "
          "feature_weight_, the federation-standardised units for units='federated'; = KM10 in raw units). "
          f"cost/KM10-w: k-means objective of the partition in the config's units over that of KM10-w (1.000 = "
          "the 10-start centralised k-means of the same objective; below 1 when that run found a worse local "
          f"optimum). R={long_rounds} shows whether more rounds close the gap (not admissible: the issue caps R at "
          f"10). best-of-{n_chains}: the least-objective partition of {n_chains} fits of the config with "
          f"R={rounds} and other random states (a simulated multi-start: {n_chains}x the bytes in the same rounds; "
          "not a fastfc setting).\n")
    print(f"| split | FFCM | KM10 | KM1 | KM10-w | R={rounds} | R={long_rounds} (rounds mean) | best-of-{n_chains} "
          f"| cost/KM10-w: KM10 | R={rounds} | R={long_rounds} | best-of-{n_chains} |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    km_pass = 0
    for s in splits:
        X_clients, y, k = load_split(s)
        X = np.vstack(X_clients)
        acc = defaultdict(list)
        for seed in seeds:
            est = factory(k, seed, rounds).fit_clients(X_clients)
            est_l = factory(k, seed, long_rounds).fit_clients(X_clients)
            w = getattr(est, "feature_weight_", None)
            km10 = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(X).labels_
            km1 = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(X).labels_
            km10w = km10 if w is None else KMeans(n_clusters=k, n_init=10, random_state=seed).fit(X * w).labels_
            ref = partition_cost(X, km10w, w)
            chains = [factory(k, 1000 + 10 * seed + j, rounds).fit_clients(X_clients).labels_ for j in range(n_chains)]
            costs = [partition_cost(X, lab, w) for lab in chains]
            best = chains[int(np.argmin(costs))]
            for key, lab in (("km10", km10), ("km1", km1), ("km10w", km10w), ("r", est.labels_),
                             ("rl", est_l.labels_), ("best", best)):
                acc[key].append(score(y, lab)[0])
            for key, lab in (("c_km10", km10), ("c_r", est.labels_), ("c_rl", est_l.labels_), ("c_best", best)):
                acc[key].append(partition_cost(X, lab, w) / ref)
            acc["rounds_l"].append(int(getattr(est_l, "n_refine_rounds_", 0)))
        m = {key: float(np.mean(v)) for key, v in acc.items()}
        km_pass += m["km10"] >= ffcm[s]
        print(f"| {s} | {ffcm[s]:.3f} | {m['km10']:.3f} | {m['km1']:.3f} | {m['km10w']:.3f} | {m['r']:.3f} "
              f"| {m['rl']:.3f} ({m['rounds_l']:.1f}) | {m['best']:.3f} | {m['c_km10']:.3f} | {m['c_r']:.3f} "
              f"| {m['c_rl']:.3f} | {m['c_best']:.3f} |")
    print(f"\nCentralised KMeans(n_init=10) itself has mean ARI >= FFCM on {km_pass}/{len(splits)} splits.\n")


def fuzzy_cmeans(X: np.ndarray, k: int, seed: int, *, m: float = 2.0, max_iter: int = 300, tol: float = 1e-6
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Centralised fuzzy c-means (Bezdek) on the pooled rows, k-means++ initial centres.

    Memberships ``u_ij`` proportional to ``d_ij ** (-1 / (m - 1))`` (``d_ij`` the squared distance of row
    ``i`` to centre ``j``, floored at 1e-300), centres the ``u ** m``-weighted means; stops when the largest
    squared centre move is at most ``tol`` times the mean per-feature variance, or after ``max_iter``.

    Returns
    -------
    centers : ndarray of shape (k, n_features)
    labels : ndarray of shape (n_samples,)
        Largest membership of every row.
    """
    from sklearn.cluster import kmeans_plusplus

    C, _ = kmeans_plusplus(X, k, random_state=seed)
    thr = tol * float(np.mean(X.var(axis=0)))
    for _ in range(max_iter):
        D = np.maximum(((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2), 1e-300)
        U = D ** (-1.0 / (m - 1.0))
        U /= U.sum(axis=1, keepdims=True)
        W = U ** m
        new = (W.T @ X) / W.sum(axis=0)[:, None]
        move = float(((new - C) ** 2).sum(axis=1).max())
        C = new
        if move <= thr:
            break
    D = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
    return C, np.argmin(D, axis=1)


def print_fcm_context(splits: list[str], seeds: list[int], ffcm: dict) -> None:
    """Does a centralised objective reproduce FFCM's bar? Fuzzy c-means, k-means and FCM then k-means."""
    from sklearn.cluster import KMeans

    print(f"## Context: centralised fuzzy c-means against FFCM, seeds {seeds[0]}-{seeds[-1]}\n")
    print("ARI means over the seeds, all on the pooled rows in the split's given units (no federation). "
          "FCM: fuzzy c-means, m = 2 (FFCM's), k-means++ initial centres (random_state = seed), labels by largest "
          "membership. FCM->KM: KMeans(n_init=1) started from the FCM centres. KM10: KMeans(n_init=10, "
          "random_state = seed). FFCM: the published federated fuzzy c-means (mean over its seeds 0-9), whose "
          "clients run fuzzy c-means to convergence each round and whose server runs unweighted k-means on their "
          "local centres (see ffcm_repro.md), up to 100 rounds. cost: k-means objective over KM10's.\n")
    print("| split | FFCM | KM10 | FCM | FCM->KM | cost FCM | cost FCM->KM |")
    print("|---|---|---|---|---|---|---|")
    n = defaultdict(int)
    for s in splits:
        X_clients, y, k = load_split(s)
        X = np.vstack(X_clients).astype(np.float64)
        acc = defaultdict(list)
        for seed in seeds:
            km10 = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(X).labels_
            C, fcm = fuzzy_cmeans(X, k, seed)
            fk = KMeans(n_clusters=k, init=C, n_init=1).fit(X).labels_
            ref = partition_cost(X, km10, None)
            acc["km10"].append(score(y, km10)[0])
            acc["fcm"].append(score(y, fcm)[0])
            acc["fk"].append(score(y, fk)[0])
            acc["c_fcm"].append(partition_cost(X, fcm, None) / ref)
            acc["c_fk"].append(partition_cost(X, fk, None) / ref)
        mm = {key: float(np.mean(v)) for key, v in acc.items()}
        for key in ("km10", "fcm", "fk"):
            n[key] += mm[key] >= ffcm[s]
        n["fcm_km"] += mm["fcm"] >= mm["km10"] - KMEANS_SLACK
        n["fk_km"] += mm["fk"] >= mm["km10"] - KMEANS_SLACK
        print(f"| {s} | {ffcm[s]:.3f} | {mm['km10']:.3f} | {mm['fcm']:.3f} | {mm['fk']:.3f} | {mm['c_fcm']:.3f} "
              f"| {mm['c_fk']:.3f} |")
    t = len(splits)
    print(f"\nMean ARI >= FFCM: KM10 on {n['km10']}/{t} splits, FCM on {n['fcm']}/{t}, FCM->KM on {n['fk']}/{t}. "
          f">= KM10 - 0.005: FCM on {n['fcm_km']}/{t}, FCM->KM on {n['fk_km']}/{t}.\n")


def main(argv=None) -> int:
    """Command line; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                    help="comma-separated candidate configs, or 'all' (default: " + ",".join(DEFAULT_CONFIGS)
                    + "); all: " + ", ".join(_configs()))
    ap.add_argument("--splits", default=",".join(SPLITS))
    ap.add_argument("--seeds", default="0-9", help="report seeds ('none': selection only)")
    ap.add_argument("--select", default=None, metavar="SEEDS",
                    help="selection seeds (e.g. 10-19): pick the best config on these, then report it on --seeds")
    ap.add_argument("--rounds", type=int, default=10, help="refinement rounds cap R")
    ap.add_argument("--context", action="store_true",
                    help="also show every candidate on the report seeds (context, not used for the choice)")
    ap.add_argument("--diagnose", type=int, default=0, metavar="R_LONG",
                    help="also diagnose the chosen config on the report seeds, with R and R_LONG rounds")
    ap.add_argument("--chains", type=int, default=10, help="fits in the diagnosis's simulated multi-start")
    ap.add_argument("--select-one-shot", action="store_true",
                    help="also fit every candidate with 0 rounds on the selection seeds (the one-shot column)")
    ap.add_argument("--fcm", action="store_true",
                    help="also print the centralised fuzzy c-means / k-means context table on the report seeds")
    ap.add_argument("--json", default=None, help="also write the raw per-seed numbers here")
    return run_with_out(ap, argv, body)


def body(args) -> int:
    """Run the study the parsed command line asks for; returns 0."""
    configs = list(_configs()) if args.configs == "all" else args.configs.split(",")
    unknown = sorted(set(configs) - set(_configs()))
    if unknown:
        raise SystemExit(f"unknown configs {unknown}; choose from {list(_configs())}")
    splits = args.splits.split(",")
    seeds = [] if args.seeds == "none" else parse_seeds(args.seeds)
    ffcm = load_ffcm()
    raw: dict = {}
    if args.select:
        sel_seeds = parse_seeds(args.select)
        res, km = run_all(configs, splits, sel_seeds, args.rounds, one_shot=args.select_one_shot)
        raw["selection"] = {"seeds": sel_seeds, "configs": res, "kmeans": km}
        chosen = print_selection(res, km, ffcm, splits, sel_seeds, args.rounds)
        report = list(configs) if args.context else [chosen]
        if not seeds:
            return _dump(args.json, raw)
    else:
        if len(configs) != 1 and not args.context:
            raise SystemExit("without --select, name one config (or pass --context)")
        chosen = configs[0]
        report = configs
    res, km = run_all(report, splits, seeds, args.rounds, one_shot=True)
    raw["report"] = {"seeds": seeds, "chosen": chosen, "configs": res, "kmeans": km}
    print_report(chosen, res[chosen], km, ffcm, splits, seeds, args.rounds)
    if args.context:
        print_context(res, km, ffcm, splits, seeds)
    if args.diagnose:
        diagnose(chosen, splits, seeds, args.rounds, args.diagnose, args.chains, ffcm)
    if args.fcm:
        print_fcm_context(splits, seeds, ffcm)
    return _dump(args.json, raw)


def _dump(path: str | None, raw: dict) -> int:
    """Write the raw per-seed numbers to ``path`` (when given); returns 0."""
    if path:
        with open(path, "w") as f:
            json.dump(raw, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
