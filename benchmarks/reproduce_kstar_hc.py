#!/usr/bin/env python
"""Reproduce the Fed-k*-HC paper's Tables 4, 6 and 7 on its nine datasets (spec §6-7).

Runs the paper's setting (``mode="paper"``: the reference for parity with the paper).
Protocol (spec §6.2): per-feature min-max scaling of the whole dataset, IID split
(shuffle, ``np.array_split`` into Z equal parts, seeded), one client phase per
(dataset, seed, micro-partitioner), then several server phases on the same
uploads:

* ``k given``: n_clusters = K with the paper's per-dataset beta (§6.2);
* ``k*`` with t = 35 (the library default) and with every t of Fig. 4, same beta.

Scores are the paper's (``fastfc.metrics.evaluate_kstar_hc``). Writes the raw
numbers to ``--json`` and prints markdown tables next to the paper's values.

Usage::

    python benchmarks/reproduce_kstar_hc.py --seeds 0-4 --micro snp,kmeans --json out.json
    python benchmarks/reproduce_kstar_hc.py --seeds 0-9 --micro kmeans --out benchmarks/results/kstar_repro_kmeans.md

``--out FILE`` also writes the printed tables to FILE under the provenance header of
``benchmarks/_provenance.py``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from _provenance import run_with_out
from _shared import SHARED, parse_seeds

DATASETS = ["pageblock", "yeast", "abalone", "breast", "digits", "gaussian", "ids2", "ids2_22", "ids2_2k22"]
#: merge exponent used for the paper's tables (text and Fig. 6)
PAPER_BETA = {"pageblock": 1.5, "yeast": 0.1, "abalone": 8.0, "breast": 2.0, "ids2_non_iid": 0.4}
#: Table 5 (non-IID "cluster absence", Z = 3, two clusters per client; spec §5 label-skew split)
NON_IID = ["ids2_non_iid", "gaussian_non_iid"]
#: Table 4 / 6, Fed-k*-HC column: (F, Acc, NMI, ARI, DCV) as (mean, std)
PAPER = {
    "pageblock": [(0.9040, 0.0177), (0.9610, 0.0430), (0.1543, 0.0630), (0.2933, 0.1154), (0.1130, 0.0174)],
    "yeast": [(0.5791, 0.0316), (0.7396, 0.0337), (0.3281, 0.0304), (0.2359, 0.0384), (0.5380, 0.0336)],
    "abalone": [(0.6855, 0.0193), (0.7274, 0.0444), (0.3019, 0.0099), (0.2868, 0.0315), (0.0251, 0.0001)],
    "breast": [(0.9517, 0.0069), (0.9356, 0.0129), (0.7243, 0.0262), (0.8384, 0.0149), (0.9640, 0.2366)],
    "digits": [(0.7078, 0.0138), (0.7631, 0.0395), (0.7010, 0.0117), (0.5686, 0.0163), (0.1299, 0.0356)],
    "gaussian": [(0.9863, 0), (0.9860, 0), (0.9229, 0), (0.9682, 0), (0.0225, 0)],
    "ids2": [(0.9935, 0), (0.9934, 0), (0.9669, 0), (0.9814, 0), (0.0173, 0)],
    "ids2_22": [(1.0, 0), (1.0, 0), (1.0, 0), (1.0, 0), (0.0, 0)],
    "ids2_2k22": [(0.9963, 0), (0.9963, 0), (0.9609, 0), (0.9835, 0), (0.0097, 0)],
    "ids2_non_iid": [(0.9984, 0), (0.9984, 0), (0.9917, 0), (0.9952, 0), (0.0041, 0)],
    "gaussian_non_iid": [(0.9960, 0), (0.9960, 0), (0.9761, 0), (0.9914, 0), (0.0060, 0)],
}
#: Table 7 (SNC k*) and Fig. 4 (k* against t)
PAPER_KSTAR = {"pageblock": 3, "yeast": 6, "abalone": 4, "breast": 5, "digits": 9, "ids2_22": 2, "ids2_2k22": 3,
               "ids2": 5, "gaussian": 4, "ids2_non_iid": 5, "gaussian_non_iid": 4}
T_GRID = [20, 22.5, 25, 27.5, 30, 32.5, 35, 37.5, 40]
#: SNC variants reported (spec A6, A13): the literal default, Fig. 2's "mutual" SNN, and mutual SNN
#: counting only components of >= 2 nodes
SNC_CONFIGS = {"default": {},
               "literal": {"snn_mode": "equal_rank", "prune_dead_nodes": False, "min_component_size": 1},
               "mutual_noprune": {"prune_dead_nodes": False},
               "equal_rank_prune_mcs2": {"snn_mode": "equal_rank", "min_component_size": 2},
               "nogcs": {"use_gcs": False}}
METRICS = ["f_measure", "acc_paper", "nmi", "ari", "dcv"]


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    """One of the paper's data sets, min-max scaled per feature.

    Parameters
    ----------
    name : str
        File name (without ``.npz``) in ``shared/datasets/kstar_hc``.

    Returns
    -------
    X : ndarray
        Rows scaled to [0, 1] per feature (a constant feature becomes 0).
    y : ndarray
        True labels.
    """
    with np.load(SHARED / "datasets" / "kstar_hc" / f"{name}.npz", allow_pickle=False) as f:
        X, y = np.array(f["X"], dtype=np.float64), np.asarray(f["y"])
    lo, hi = X.min(0), X.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return (X - lo) / span * (hi > lo), y  # constant feature -> 0 (spec §3.0)


def label_skew(y: np.ndarray, n_clients: int, seed: int, per_client: int = 2) -> list[np.ndarray]:
    """The spec's (§5) label-skew split.

    Client z holds clusters {(2z + i) mod K}; a cluster held by h clients is cut into h
    nearly equal random parts.

    Parameters
    ----------
    y : ndarray
        Labels 0..K-1.
    n_clients : int
        Clients.
    seed : int
        Seed of the random cuts.
    per_client : int, default=2
        Clusters per client.

    Returns
    -------
    list of ndarray
        Sorted row indices of each client.
    """
    K = int(y.max()) + 1
    held = [[(per_client * z + i) % K for i in range(per_client)] for z in range(n_clients)]
    rng = np.random.default_rng(seed)
    parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
    for c in range(K):
        owners = [z for z in range(n_clients) if c in held[z]]
        for z, chunk in zip(owners, np.array_split(rng.permutation(np.flatnonzero(y == c)), len(owners))):
            parts[z].append(chunk)
    return [np.sort(np.concatenate(p)) for p in parts]


def run(name: str, seed: int, micro: str, n_clients: int, micro_scale: float = 0.5, beta: float | None = None,
        snc: bool = True) -> dict:
    """One client phase and the server phases of one (dataset, seed, micro-partitioner).

    Parameters
    ----------
    name : str
        Data set (``*_non_iid``: the label-skew split over 3 clients).
    seed : int
        Seed of the split and of every phase.
    micro : str
        Micro-partitioner (``"kmeans"`` or ``"snp"``).
    n_clients : int
        Clients of the IID split.
    micro_scale : float, default=0.5
        Subcluster budget ``micro_scale * sqrt(n_z)``.
    beta : float or None, default=None
        Merge exponent (``None``: the paper's for this data set).
    snc : bool, default=True
        Also estimate k* with every configuration of :data:`SNC_CONFIGS` and every t.

    Returns
    -------
    dict
        Scores with k given (``"given"``) and, with ``snc``, at the estimated k*.
    """
    from fastfc import FedKStarHC
    from fastfc.metrics import evaluate_kstar_hc

    if name in NON_IID:
        X, y = load(name[: -len("_non_iid")])
        K = int(np.unique(y).size)
        parts = label_skew(y, 3, seed)
        n_clients = 3
    else:
        X, y = load(name)
        K = int(np.unique(y).size)
        parts = np.array_split(np.random.default_rng(seed).permutation(len(X)), n_clients)
    Xc, yc = [X[p] for p in parts], [y[p] for p in parts]
    y_all = np.concatenate(yc)
    beta = PAPER_BETA.get(name, 0.5) if beta is None else beta
    base = FedKStarHC(mode="paper", micro=micro, micro_scale=micro_scale, beta=beta, random_state=seed)
    t0 = time.perf_counter()
    out = [base.client_summarize(x, client_index=i, random_state=seed) for i, x in enumerate(Xc)]
    t_client = time.perf_counter() - t0
    summaries = [s for s, _ in out]

    def server(**params):
        """Server phase with ``params`` and the labels of every client's rows."""
        est = FedKStarHC(mode="paper", micro=micro, micro_scale=micro_scale, beta=beta, random_state=seed, **params)
        t1 = time.perf_counter()
        model, replies = est.server_aggregate(summaries, random_state=seed)
        dt = time.perf_counter() - t1
        labels = np.concatenate([est.client_assign(x, st, r) for x, (_, st), r in zip(Xc, out, replies)])
        return model, labels, dt

    rec = {"dataset": name, "seed": seed, "micro": micro, "micro_scale": micro_scale, "K": K, "beta": beta, "n_clients": n_clients, "k0": int(sum(s.counts.size for s in summaries)),
           "client_seconds": t_client}
    model, labels, dt = server(n_clusters=K)
    rec["given"] = {**evaluate_kstar_hc(y_all, labels), "server_seconds": dt}
    for cname, cparams in (SNC_CONFIGS.items() if snc else ()):
        kstar = {}
        for t in T_GRID:
            model, labels, dt = server(n_clusters=None, t=t, **cparams)
            kstar[str(t)] = int(model.centers.shape[0])
            if t == 35:
                rec[f"estimated_{cname}"] = {
                    **evaluate_kstar_hc(y_all, labels), "k": kstar[str(t)], "n_nodes": model.n_nodes,
                    "b_opt": model.b_opt, "p_curve": [float(v) for v in model.p_curve], "server_seconds": dt}
        rec[f"kstar_by_t_{cname}"] = kstar
    return rec


def report(recs: list[dict]) -> str:
    """Markdown tables of the records of :func:`run` next to the paper's values.

    Parameters
    ----------
    recs : list of dict
        Records of :func:`run`.

    Returns
    -------
    str
        The tables and their summary lines.
    """
    lines = []
    micros = sorted({r["micro"] for r in recs})
    for micro in micros:
        rs = [r for r in recs if r["micro"] == micro]
        seeds = sorted({r["seed"] for r in rs})
        lines.append(f"\n### k given (n_clusters = K), micro={micro}, micro_scale={rs[0].get('micro_scale', 1.0)}, Z={rs[0]['n_clients']} IID (non-IID sets: Z=3 label skew), seeds {seeds[0]}-{seeds[-1]}, paper's beta\n")
        lines.append("| dataset | β | k0 | F ours | F paper | Acc ours | Acc paper | NMI ours | NMI paper | ARI ours | ARI paper | DCV ours | DCV paper |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for name in DATASETS + NON_IID:
            rr = [r for r in rs if r["dataset"] == name]
            if not rr:
                continue
            cells = []
            for m, (pm, ps) in zip(METRICS, PAPER[name]):
                v = [r["given"][m] for r in rr]
                cells.append(f"{np.mean(v):.4f}±{np.std(v):.4f} | {pm:.4f}±{ps:.4f}")
            lines.append(f"| {name} | {rr[0]['beta']} | {np.mean([r['k0'] for r in rr]):.0f} | " + " | ".join(cells) + " |")
        names = [n for n in DATASETS + NON_IID if any(r["dataset"] == n for r in rs)]
        dF = {n: np.mean([r["given"]["f_measure"] for r in rs if r["dataset"] == n]) - PAPER[n][0][0] for n in names}
        lines.append(f"\nmean F within 0.02 of the paper (or above): {sum(v > -0.02 for v in dF.values())}/{len(names)}; "
                     f"mean ARI over all runs {np.mean([r['given']['ari'] for r in rs]):.4f}; "
                     "below by more than 0.02: " + (", ".join(f"{n} {v:+.3f}" for n, v in dF.items() if v <= -0.02) or "none"))
        for cname in [k[len("estimated_"):] for k in rs[0] if k.startswith("estimated_")]:
            cparams = SNC_CONFIGS.get(cname, "settings of an earlier version of this script")
            lines.append(f"\n### k* estimated by SNC ({cname}: {cparams or 'defaults'}), micro={micro}, same beta\n")
            lines.append("| dataset | K | paper k* | ours t=35 (per seed) | F at t=35 | ARI at t=35 | nodes | b_opt | "
                         + " | ".join(f"t={t}" for t in T_GRID) + " |")
            lines.append("|---|---|---|---|---|---|---|---|" + "---|" * len(T_GRID))
            for name in DATASETS + NON_IID:
                rr = [r for r in rs if r["dataset"] == name]
                if not rr:
                    continue
                est = [r[f"estimated_{cname}"] for r in rr]
                lines.append(
                    f"| {name} | {rr[0]['K']} | {PAPER_KSTAR[name]} | {','.join(str(e['k']) for e in est)} | "
                    f"{np.mean([e['f_measure'] for e in est]):.4f} | {np.mean([e['ari'] for e in est]):.4f} | "
                    f"{np.mean([e['n_nodes'] for e in est]):.0f} | {np.median([e['b_opt'] for e in est]):g} | "
                    + " | ".join(f"{np.median([r[f'kstar_by_t_{cname}'][str(t)] for r in rr]):g}" for t in T_GRID) + " |"
                )
            med = {n: {t: np.median([r[f"kstar_by_t_{cname}"][str(t)] for r in rs if r["dataset"] == n]) for t in T_GRID}
                   for n in DATASETS + NON_IID if any(r["dataset"] == n for r in rs)}
            trueK = {n: next(r["K"] for r in rs if r["dataset"] == n) for n in med}
            lines.append("\nmedian k* = paper's Table 7 k*: " + ", ".join(
                f"t={t}: {sum(med[n][t] == PAPER_KSTAR[n] for n in med)}/{len(med)}" for t in T_GRID))
            lines.append("median k* = true K: " + ", ".join(
                f"t={t}: {sum(med[n][t] == trueK[n] for n in med)}/{len(med)}" for t in T_GRID))
            exact = {t: sum(r[f"kstar_by_t_{cname}"][str(t)] == r["K"] for r in rs) for t in T_GRID}
            lines.append("runs with k* = K: " + ", ".join(f"t={t}: {exact[t]}/{len(rs)}" for t in T_GRID))
            est = [r[f"estimated_{cname}"] for r in rs]
            lines.append(f"at t=35: mean |k* - K| {np.mean([abs(e['k'] - r['K']) for e, r in zip(est, rs)]):.2f}, "
                         f"mean ARI {np.mean([e['ari'] for e in est]):.4f}, mean F {np.mean([e['f_measure'] for e in est]):.4f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    """Command line: run the reproduction and print the report (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(DATASETS + NON_IID))
    ap.add_argument("--seeds", default="0-4")
    ap.add_argument("--micro", default="snp,kmeans")
    ap.add_argument("--clients", type=int, default=3, help="clients of the IID splits (the non-IID sets always use 3)")
    ap.add_argument("--beta", type=float, default=None, help="merge exponent for every dataset (default: the paper's per dataset)")
    ap.add_argument("--given-only", action="store_true", help="only the k-given runs (no SNC)")
    ap.add_argument("--micro-scale", type=float, default=0.5, help="subcluster budget micro_scale * sqrt(n_z) (spec: 1.0)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--report-only", action="store_true", help="only print the tables of an existing --json")
    return run_with_out(ap, argv, run_all)


def run_all(args) -> int:
    """Run every (micro-partitioner, dataset, seed) of the parsed command line ``args`` and print the report; returns 0."""
    if args.report_only:
        print(report(json.loads(Path(args.json).read_text())))
        return 0
    recs = []
    for micro in args.micro.split(","):
        for name in args.datasets.split(","):
            for seed in parse_seeds(args.seeds):
                recs.append(run(name, seed, micro, args.clients, args.micro_scale, args.beta, not args.given_only))
                print(f"done {micro} {name} seed {seed} ({recs[-1]['client_seconds']:.1f}s client)", file=sys.stderr, flush=True)
                if args.json:
                    Path(args.json).write_text(json.dumps(recs, indent=1))
    print(report(recs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
