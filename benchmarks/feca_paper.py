#!/usr/bin/env python
"""Re-run the synthetic experiments of the FeCA paper (Xu et al., TMLR 2024) with fastfc.

Prints markdown tables with our numbers next to the paper's (``shared/specs/feca.md`` §9):

* ``table1``  ℓ2 (×1e4) of recovered centres on S1-S4, IID / Dir(0.3) / Dir(0.1), M = 10,
  FeCA, k-FED (k'=5) and centralised k-means (single k-means++ start), plus Purity / NMI
  of nearest-centre labels of the whole dataset (Table 4);
* ``table5``  MSE (×1e6) on S1 IID with and without one-fit-many removal;
* ``table6``  theoretical (Alg. 3) vs empirical (Alg. 4) radius on S1;
* ``table8``  M clients each holding an independent 5 % of S1 (App. D);
* ``table9``  IID split of S1 over M clients (App. D);
* ``table10`` client k' and output k varied on S1 (MSE ×1e6);
* ``sbm``     the Stochastic Ball Model in Theorem 4.1's regime (exact recovery expected).

Protocol (paper §6 and App. C/D; decisions in the spec's §11): M = 10 clients; Dirichlet
splits per Hsu et al. with ``min_size=10`` and without balancing (A15; ``--balance`` turns
FedBE's balancing on); true centres = per-label
means of ``s*.npz`` (A14: SIPU's ``s*-cb.txt`` files are not available here); ℓ2 = Frobenius
norm after Hungarian matching, MSE = (mean ℓ2)^2 / k as the paper computes it (A12, A20);
Purity = standard weighted purity (A13). Seed s drives both the split and the method.
Tables 8 and 9 score Purity / NMI after one Lloyd step from the recovered centres on the
whole dataset, as App. D does.

Usage::

    python benchmarks/feca_paper.py --seeds 0-9 --tables table1,table5,table6
    python benchmarks/feca_paper.py --tables all --json feca_paper.json
    python benchmarks/feca_paper.py --seeds 0-9 --out benchmarks/results/feca_paper.md

``--out FILE`` also writes the printed tables to FILE under the provenance header of
``benchmarks/_provenance.py``.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from _provenance import run_with_out
from _shared import SHARED, parse_seeds

SPLITS = [("IID", None), ("(0.3)", 0.3), ("(0.1)", 0.1)]

# paper Table 1 (ℓ2 ×1e4, mean, std): FeCA / k-FED / centralised; Table 4 FeCA purity / NMI
PAPER_L2 = {
    "s1": {"FeCA": [(1.0, 0.1), (6.8, 3.7), (22.3, 15.6)], "k-FED": [(84.6, 15.8), (59.4, 12.3), (59.8, 16.9)], "Centralized": [(14.3, 18.7)]},
    "s2": {"FeCA": [(1.9, 0.1), (13.6, 16.1), (38.8, 3.4)], "k-FED": [(75.9, 17.7), (64.1, 13.1), (63.9, 11.6)], "Centralized": [(8.4, 14.7)]},
    "s3": {"FeCA": [(3.6, 0.7), (23.6, 8.8), (33.2, 6.7)], "k-FED": [(73.1, 14.3), (65.6, 15.2), (68.8, 12.8)], "Centralized": [(25.4, 19.1)]},
    "s4": {"FeCA": [(4.7, 0.7), (24.5, 7.2), (31.5, 5.8)], "k-FED": [(52.7, 10.8), (43.4, 6.3), (47.5, 8.6)], "Centralized": [(20.1, 10.0)]},
}
PAPER_PUR_NMI = {
    "s1": [(0.99, 0.99), (0.98, 0.96), (0.96, 0.95)],
    "s2": [(0.97, 0.95), (0.95, 0.94), (0.90, 0.90)],
    "s3": [(0.86, 0.80), (0.80, 0.77), (0.78, 0.75)],
    "s4": [(0.80, 0.72), (0.73, 0.69), (0.65, 0.66)],
}
N_INIT = 1
PAPER_T5 = {"not removing": 12977.2, "removing": 6.7}
PAPER_T6 = {"theoretical": [(1.1, 0.1), (31.8, 23.8), (58.9, 15.1)], "empirical": [(1.0, 0.1), (6.8, 3.7), (22.3, 15.6)]}
PAPER_T8 = {1: (10.7, 14.3), 2: (3.1, 0.6), 3: (2.6, 0.4), 4: (2.1, 0.3), 5: (2.0, 0.3), 10: (1.4, 0.3), 15: (1.2, 0.2), 20: (1.0, 0.1)}
PAPER_T9 = {1: (14.3, 18.7), 2: (1.1, 0.3), 3: (1.2, 0.3), 4: (1.1, 0.2), 5: (1.1, 0.2), 10: (1.0, 0.1), 15: (1.1, 0.1), 20: (1.1, 0.1)}
PAPER_T10 = {
    "undershoot k'=10": (15, 10, [34599.4, 21055.7, 19311.6]),
    "overshoot k'=20": (15, 20, [9.9, 5960.4, 8738.6]),
    "output k=10": (10, 15, [8.4, 551.2, 7532.7]),
    "k=k'=15": (15, 15, [6.7, 308.3, 3315.3]),
}


#: the paper's FeCA and k-FED (fastfc's defaults add federated units, piece merging, k-means++ server seeding)
PAPER_FECA = {"merge_pieces": False, "units": None}
PAPER_KFED = {"server_init": "farthest-first", "server_max_iter": 1, "assign": "induced", "units": None,
              "local_n_init": 1}

def load_sset(name):
    """An S-set and its true centres (per-label means; A14).

    Parameters
    ----------
    name : str
        ``"s1"`` .. ``"s4"``.

    Returns
    -------
    X, y, theta : ndarray
        Rows, labels and the per-label means.
    """
    d = np.load(SHARED / "datasets" / "sipu" / f"{name}.npz")
    X, y = d["X"].astype(np.float64), d["y"]
    theta = np.array([X[y == c].mean(0) for c in np.unique(y)])
    return X, y, theta


BALANCE = False


def split(y, M, alpha, seed):
    """Client row indices: IID, or Hsu et al.'s Dirichlet(alpha) split (``min_size=10``).

    Parameters
    ----------
    y : ndarray
        Labels.
    M : int
        Clients.
    alpha : float or None
        Dirichlet concentration; ``None`` for IID.
    seed : int
        Seed of the split.

    Returns
    -------
    list of ndarray
        Row indices of each client.
    """
    from fastfc.datasets import partition_dirichlet_hsu, partition_iid

    if alpha is None:
        return partition_iid(y, M, random_state=seed)
    return partition_dirichlet_hsu(y, M, alpha=alpha, min_size=10, balance=BALANCE, random_state=seed)


def scores(X, y, C, theta, lloyd_step=False):
    """Centre recovery and label quality of centres ``C``.

    Parameters
    ----------
    X, y : ndarray
        The whole data set and its labels.
    C : ndarray
        Recovered centres.
    theta : ndarray
        True centres.
    lloyd_step : bool, default=False
        Label after one Lloyd step from ``C`` (App. D) instead of by the nearest centre.

    Returns
    -------
    tuple of float
        Hungarian-matched ℓ2, purity, NMI.
    """
    from fastfc._assign import assign_nearest
    from fastfc.metrics import center_recovery_l2, normalized_mutual_info_score, purity_score

    lab = assign_nearest(X, C)
    if lloyd_step:  # App. D: one Lloyd step initialised at the recovered centres
        C2 = np.array([X[lab == j].mean(0) if np.any(lab == j) else C[j] for j in range(len(C))])
        lab = assign_nearest(X, C2)
    return center_recovery_l2(C, theta), purity_score(y, lab), float(normalized_mutual_info_score(y, lab))


def fit_centers(method, X_clients, k, seed, **params):
    """Global centres of FeCA (with ``N_INIT`` local starts) or k-FED.

    Parameters
    ----------
    method : str
        ``"FeCA"`` or ``"k-FED"``.
    X_clients : list of ndarray
        The clients' rows.
    k : int
        Number of global centres.
    seed : int
        ``random_state``.
    **params
        Further estimator parameters.

    Returns
    -------
    ndarray
        The global centres.
    """
    from fastfc import FeCA, KFed

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "FeCA":
            return FeCA(k, random_state=seed, **{"n_init": N_INIT, **PAPER_FECA, **params}).fit_clients(
                X_clients).cluster_centers_
        if method == "k-FED":
            return KFed(k, random_state=seed, **{**PAPER_KFED, **params}).fit_clients(X_clients).cluster_centers_
    raise ValueError(method)


def centralized(X, k, seed):
    """Centres of one k-means++ start of scikit-learn's k-means on all rows.

    Parameters
    ----------
    X : ndarray
        All rows.
    k, seed : int
        Clusters and seed.

    Returns
    -------
    ndarray
        The centres.
    """
    from sklearn.cluster import KMeans

    return KMeans(k, n_init=1, random_state=seed).fit(X).cluster_centers_


def ms(vals, scale=1e4):
    """``mean±std`` of ``vals / scale`` with one decimal.

    Parameters
    ----------
    vals : array-like
        Values over seeds.
    scale : float, default=1e4
        Divisor.

    Returns
    -------
    str
        The table cell.
    """
    v = np.asarray(vals) / scale
    return f"{v.mean():.1f}±{v.std():.1f}"


def paper(p):
    """A paper value ``(mean, std)`` as a table cell.

    Parameters
    ----------
    p : tuple of float
        Mean and std.

    Returns
    -------
    str
        ``mean±std``.
    """
    return f"{p[0]}±{p[1]}"


def table1(seeds, out):
    """Print Table 1 / Table 4 (S-sets, M = 10).

    Parameters
    ----------
    seeds : list of int
        Seeds (split and method).
    out : dict
        Raw numbers are added here (for ``--json``).
    """
    print("\n### Table 1 / Table 4: S-sets, M = 10, ℓ2 ×1e4 (ours | paper), Purity / NMI (ours | paper)\n")
    print("| set | split | FeCA ℓ2 | paper | k-FED(k'=5) ℓ2 | paper | FeCA Purity | paper | FeCA NMI | paper |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in ["s1", "s2", "s3", "s4"]:
        X, y, theta = load_sset(name)
        for j, (lab, alpha) in enumerate(SPLITS):
            fe, kf, pu, nm = [], [], [], []
            for s in seeds:
                parts = split(y, 10, alpha, s)
                Xc = [X[p] for p in parts]
                l2, p_, n_ = scores(X, y, fit_centers("FeCA", Xc, 15, s), theta)
                fe.append(l2), pu.append(p_), nm.append(n_)
                kf.append(scores(X, y, fit_centers("k-FED", Xc, 15, s, n_local_clusters=5), theta)[0])
            out.setdefault("table1", {})[f"{name} {lab}"] = {"feca_l2": fe, "kfed_l2": kf, "purity": pu, "nmi": nm}
            pp = PAPER_PUR_NMI[name][j]
            print(f"| {name.upper()} | {lab} | {ms(fe)} | {paper(PAPER_L2[name]['FeCA'][j])} | {ms(kf)} | "
                  f"{paper(PAPER_L2[name]['k-FED'][j])} | {np.mean(pu):.2f} | {pp[0]} | {np.mean(nm):.2f} | {pp[1]} |")
        ce = [scores(X, y, centralized(X, 15, s), theta)[0] for s in seeds]
        out.setdefault("table1", {})[f"{name} centralized"] = {"l2": ce}
        print(f"| {name.upper()} | centralised k-means | {ms(ce)} | {paper(PAPER_L2[name]['Centralized'][0])} | | | | | | |")


def table5(seeds, out):
    """Print Table 5 (S1 IID, with and without one-fit-many removal); see :func:`table1`."""
    X, y, theta = load_sset("s1")
    print("\n### Table 5: S1 IID, MSE ×1e6 = (mean ℓ2)² / k\n")
    print("| FeCA | ours MSE | paper MSE | ours mean ℓ2 ×1e4 |")
    print("|---|---|---|---|")
    for lab, refine in [("not removing", False), ("removing", True)]:
        l2 = [scores(X, y, fit_centers("FeCA", [X[p] for p in split(y, 10, None, s)], 15, s, refine=refine), theta)[0]
              for s in seeds]
        out.setdefault("table5", {})[lab] = l2
        print(f"| {lab} one-fit-many | {np.mean(l2) ** 2 / 15 / 1e6:.1f} | {PAPER_T5[lab]} | {np.mean(l2) / 1e4:.1f} |")


def table6(seeds, out):
    """Print Table 6 (theoretical vs empirical radius on S1); see :func:`table1`."""
    X, y, theta = load_sset("s1")
    print("\n### Table 6: S1, theoretical vs empirical radius, ℓ2 ×1e4 (ours | paper)\n")
    print("| radius | IID | paper | (0.3) | paper | (0.1) | paper |")
    print("|---|---|---|---|---|---|---|")
    for rad in ["theoretical", "empirical"]:
        cells = []
        for j, (lab, alpha) in enumerate(SPLITS):
            l2 = [scores(X, y, fit_centers("FeCA", [X[p] for p in split(y, 10, alpha, s)], 15, s, radius=rad), theta)[0]
                  for s in seeds]
            out.setdefault("table6", {})[f"{rad} {lab}"] = l2
            cells += [ms(l2), paper(PAPER_T6[rad][j])]
        print(f"| {rad} | " + " | ".join(cells) + " |")


def table89(seeds, out, which):
    """Print Table 8 (independent 5 % subsamples) or 9 (IID split) of S1; see :func:`table1`.

    ``which`` is 8 or 9.
    """
    from fastfc.datasets import partition_iid, partition_subsample

    X, y, theta = load_sset("s1")
    ref = PAPER_T8 if which == 8 else PAPER_T9
    title = "each client an independent 5 % of S1" if which == 8 else "IID split of S1 into M parts"
    print(f"\n### Table {which}: {title}; ℓ2 ×1e4 (ours | paper), Purity/NMI after one Lloyd step\n")
    print("| M | ours ℓ2 | paper ℓ2 | Purity | NMI |")
    print("|---|---|---|---|---|")
    for M in sorted(ref):
        l2, pu, nm = [], [], []
        for s in seeds:
            parts = partition_subsample(y, M, fraction=0.05, random_state=s) if which == 8 else partition_iid(y, M, random_state=s)
            a, b, c = scores(X, y, fit_centers("FeCA", [X[p] for p in parts], 15, s), theta, lloyd_step=True)
            l2.append(a), pu.append(b), nm.append(c)
        out.setdefault(f"table{which}", {})[M] = {"l2": l2, "purity": pu, "nmi": nm}
        print(f"| {M} | {ms(l2)} | {paper(ref[M])} | {np.mean(pu):.2f} | {np.mean(nm):.2f} |")


def table10(seeds, out):
    """Print Table 10 (client k' and output k varied on S1); see :func:`table1`."""
    X, y, theta = load_sset("s1")
    print("\n### Table 10: S1, varying client k' and output k; MSE ×1e6 = (mean ℓ2)² / 15 (ours | paper)\n")
    print("| variant | k | k' | IID | paper | (0.3) | paper | (0.1) | paper |")
    print("|---|---|---|---|---|---|---|---|---|")
    for lab, (k, kc, pap) in PAPER_T10.items():
        cells = []
        for j, (sl, alpha) in enumerate(SPLITS):
            l2 = [scores(X, y, fit_centers("FeCA", [X[p] for p in split(y, 10, alpha, s)], k, s, n_local_clusters=kc), theta)[0]
                  for s in seeds]
            out.setdefault("table10", {})[f"{lab} {sl}"] = l2
            cells += [f"{np.mean(l2) ** 2 / 15 / 1e6:.1f}", str(pap[j])]
        print(f"| {lab} | {k} | {kc} | " + " | ".join(cells) + " |")


def sbm(seeds, out):
    """Print the Stochastic Ball Model run in Theorem 4.1's regime; see :func:`table1`."""
    from fastfc.datasets import make_stochastic_ball, partition_iid, sbm_theorem_separation
    from fastfc.metrics import center_recovery_l2

    print("\n### Stochastic Ball Model in Theorem 4.1's regime (k = 3, r = 1, simplex centres, M = 10)\n")
    print("| radius variant | n | max over seeds of ℓ2 / Δ | bound (4/(5η))·Δ_min/Δ (η=5) | runs returning k centres |")
    print("|---|---|---|---|---|")
    k, d = 3, 3
    delta = sbm_theorem_separation(k, 1.0)
    for rad in ["theoretical", "empirical"]:
        errs, ok = [], 0
        for s in seeds:
            X, yy, th = make_stochastic_ball(3000, d, k, radius=1.0, min_separation="simplex", random_state=s,
                                             return_centers=True)
            from fastfc import FeCA

            est = FeCA(k, radius=rad, random_state=s, **PAPER_FECA).fit_clients([X[p] for p in partition_iid(yy, 10, random_state=s)])
            errs.append(center_recovery_l2(est.cluster_centers_, th) / delta)
            ok += int(est.n_clusters_ == k and np.all(est.group_sizes_ >= 1))
        out.setdefault("sbm", {})[rad] = errs
        print(f"| {rad} | 3000 | {max(errs):.2e} | {4 / 25:.2f} | {ok}/{len(seeds)} |")


def main(argv=None):
    """Command line: run the requested tables (``argv``: arguments, ``sys.argv[1:]`` when omitted); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--tables", default="all")
    ap.add_argument("--json", default=None)
    ap.add_argument("--balance", action="store_true", help="balanced Dirichlet split (FedBE style)")
    ap.add_argument("--n-init", type=int, default=1, help="FeCA's local k-means starts")
    return run_with_out(ap, argv, run_tables)


def run_tables(args) -> int:
    """Run and print the tables the parsed command line ``args`` asks for; returns 0."""
    global BALANCE, N_INIT
    BALANCE, N_INIT = args.balance, args.n_init
    seeds = parse_seeds(args.seeds)
    which = ["table1", "table5", "table6", "table8", "table9", "table10", "sbm"] if args.tables == "all" else args.tables.split(",")
    out: dict = {}
    print(f"FeCA paper re-run with fastfc; seeds {args.seeds} (split and method seeded by the same s); "
          f"Dirichlet balance={BALANCE}; FeCA n_init={N_INIT}")
    for t in which:
        if t == "table8":
            table89(seeds, out, 8)
        elif t == "table9":
            table89(seeds, out, 9)
        else:
            globals()[t](seeds, out)
        sys.stdout.flush()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
