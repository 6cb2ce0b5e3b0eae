"""Where a many-client Fed-HIRE / GOLD fit spends its CPU time (issue 15, "slope in clients").

For each estimator, one whole fit (``fit_clients``, ``n_jobs=1``, ``n_clusters=10``,
``random_state=0``) of ``--n`` rows x ``--d`` features (10-cluster Gaussian mixture, seed 0) split
at random into ``--clients`` equal clients, profiled with ``cProfile`` on ``time.thread_time`` (CPU
time of the thread that runs the fit: robust to other processes' load; the fit runs on that one
thread). After a warm-up fit on 20 of the clients (compiled kernels warm). Rows of the table:

* ``client phase``: the runner's per-client call (``_run_summarize``), of which ``fcpl_client``
  (the client's CPL, its standardisation and seed draw), of which ``cpl`` (the CPL engine of
  :mod:`fastfc._cpl`); ``runner + messages`` = the client phase less ``fcpl_client`` (random
  streams, validation, the summary message, per-client Python);
* ``server phase``: ``_run_aggregate``, of which ``mcpl`` (the server's CPL levels),
  ``linkage_fusion`` (grouping + Ward), ``weighted_kmodes``;
* ``assign phase``: ``_run_assign``;
* the compiled kernels' own time over the whole fit (client and server): the CPL passes, the
  feature weights, everything else of :mod:`fastfc._kernels`.

Also the number of uploaded centroids and the clients' CPL pass count (mean), which set the work.

Usage::

    python3 benchmarks/hire_clients_phases.py --n 1000000 --d 10 --clients 1000 --out FILE
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np

_PASS = ("_cpl_pass_one", "_cpl_pass_ovd", "_cpl_pass_lists")
_FW = ("_fw_columns", "_fw_columns_par", "_fw_weights")


def _cum(stats, fn, path_part=None) -> float:
    return sum(v[3] for k, v in stats.items() if k[2] == fn and (path_part is None or path_part in k[0]))


def _self(stats, fns, path_part) -> float:
    return sum(v[2] for k, v in stats.items() if k[2] in fns and path_part in k[0])


def _self_all(stats, path_part) -> float:
    return sum(v[2] for k, v in stats.items() if path_part in k[0])


def _callers_cum(stats, fn, caller) -> float:
    """Cumulative time of ``fn`` when called from ``caller``."""
    out = 0.0
    for k, v in stats.items():
        if k[2] == fn and "fastfc" in k[0]:
            for ck, cv in v[4].items():
                if ck[2] == caller:
                    out += cv[3]
    return out


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _provenance import run_with_out

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--estimators", default="FedHIRE,GOLD")
    ap.add_argument("--max-candidates", default="auto",
                    help="the estimators' max_candidates (default: their own default, 'auto'); an int caps "
                         "every client's initial CPL candidates (a labels-changing study)")

    def body(a):
        import fastfc
        from fastfc.datasets import make_gaussian_mixture
        from sklearn.metrics import adjusted_rand_score

        n = int(a.n)
        mc = a.max_candidates if a.max_candidates in ("auto", "none") else int(a.max_candidates)
        params = dict(n_clusters=10, random_state=0, n_jobs=1, max_candidates=None if mc == "none" else mc)
        X, y = make_gaussian_mixture(n, a.d, 10, random_state=0)
        idx = np.array_split(np.random.default_rng(0).permutation(n), a.clients)
        parts = [np.ascontiguousarray(X[p]) for p in idx]
        yy = np.concatenate([y[p] for p in idx])
        print(f"# Fed-HIRE / GOLD over {a.clients} clients: where the fit's CPU time goes\n")
        print(f"{n:,} rows x {a.d} features (10-cluster Gaussian mixture, seed 0), random equal split into "
              f"{a.clients} clients of about {n // a.clients} rows; `fit_clients`, `n_clusters=10`, "
              "`random_state=0`, `n_jobs=1`; one profiled fit after a warm-up fit on 20 clients. CPU seconds of the "
              "fit's thread (`cProfile` on `time.thread_time`; profiling adds some Python overhead). Cumulative "
              "times of the named functions; kernel rows are the compiled kernels' own time (client and server "
              f"together). `max_candidates={mc!r}`.\n")
        for name in a.estimators.split(","):
            Est = getattr(fastfc, name)
            Est(**params).fit_clients(parts[:20])
            pr = cProfile.Profile(time.thread_time)
            t0 = time.thread_time()
            pr.enable()
            est = Est(**params).fit_clients(parts)
            pr.disable()
            total = time.thread_time() - t0
            st = pstats.Stats(pr).stats
            cl = _cum(st, "_run_summarize")
            fc = _cum(st, "fcpl_client")
            cpl_cl = _callers_cum(st, "cpl", "fcpl_client")
            sv = _cum(st, "_run_aggregate")
            asg = _cum(st, "_run_assign")
            n_calls = {k[2]: v[1] for k, v in st.items() if "_cpl.py" in k[0]}
            passes = sum(n_calls.get(f, 0) for f in ("cpl_pass",))
            rows = [
                ("whole fit", total),
                ("client phase (`_run_summarize`)", cl),
                ("&nbsp;&nbsp;`fcpl_client`", fc),
                ("&nbsp;&nbsp;&nbsp;&nbsp;`cpl` (client CPL engine)", cpl_cl),
                ("&nbsp;&nbsp;runner + messages (client phase less `fcpl_client`)", cl - fc),
                ("server phase (`_run_aggregate`)", sv),
                ("&nbsp;&nbsp;`mcpl` (server CPL levels)", _cum(st, "mcpl")),
                ("&nbsp;&nbsp;`linkage_fusion` (grouping + Ward)", _cum(st, "linkage_fusion")),
                ("&nbsp;&nbsp;`weighted_kmodes`", _cum(st, "weighted_kmodes")),
                ("assign phase (`_run_assign`)", asg),
                ("rest of the fit (validation, split, outside the phases)", total - cl - sv - asg),
                ("kernels: CPL passes (own time)", _self(st, _PASS, "_kernels")),
                ("kernels: feature weights (own time)", _self(st, _FW, "_kernels")),
                ("kernels: all of `fastfc/_kernels` (own time)", _self_all(st, "_kernels")),
            ]
            n_s = int(est.client_n_clusterlets_.sum())
            ari = adjusted_rand_score(yy, est.labels_)
            print(f"## {name}\n")
            print(f"uploaded centroids {n_s:,} ({n_s / a.clients:.1f} per client); CPL passes (client and server) "
                  f"{passes:,}, {passes / a.clients:.1f} per client; ARI {ari:.4f}; wall timings_ "
                  + ", ".join(f"{k} {v:.2f} s" for k, v in est.timings_.items()) + "\n")
            print("| part | CPU s | share of the fit |")
            print("|---|---|---|")
            for label, v in rows:
                print(f"| {label} | {v:.3f} | {v / total:.0%} |")
            print(flush=True)
        return 0

    return run_with_out(ap, argv, body)


if __name__ == "__main__":
    raise SystemExit(main())
