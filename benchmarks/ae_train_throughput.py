"""Throughput of FedCRef's autoencoder training (``fastfc._ae.train``) and how the FedAvg phase uses the cores.

Issue 14: the paper-scale FedCRef grid (25 clients, 30 local epochs, 15 FedAvg rounds) spends most of its
time training the paper's AE (784-100-64-32-64-100-784, 174,840 float32 parameters, batch 32, Keras-style
Adam). This script measures, in one process and interleaved so that the machine's load hits both alike,
the training code of this checkout ("after") next to the one of an earlier revision ("before", default
``fec0e4c``, the last commit before issue 14; its ``_ae.py`` and ``_kernels/_fedcref.py`` are read with
``git show`` into a temporary package):

1. one model, batch 32: rows/s and achieved GFLOP/s (counted flops: forward ``2 W``, weight gradients
   ``2 W``, input gradients ``2 (W - W_1)`` per row, ``W`` = weights of all layers, ``W_1`` of the first;
   biases and element-wise work not counted), best and median of the repeats;
2. the share of a step's time: the GEMMs (forward, weight gradients, input gradients), the element-wise
   kernels (bias + ReLU, ReLU mask, fused sigmoid + MSE + delta, bias-gradient sums), Adam, the batch
   (permutation and gather) -- each timed alone at the step's shapes -- and the rest (Python overhead:
   the step time minus the parts);
3. several models trained concurrently (``--models`` models of ``--rows`` rows each), ``n_jobs`` 1 and 2
   (threads, BLAS pinned to one thread each, as FedCRef does): aggregate rows/s;
4. (``--fedavg``) a small FedCRef run (perfect-association baseline, Fashion-MNIST, so groups form)
   with the whole package of the "before" revision (``git archive``; this checkout's compiled Cython
   kernels copied in when their sources are unchanged) and with this checkout, each fit in a child
   process, interleaved: wall time, FedAvg-phase time, whether the labels agree,
   the utilisation of the ``n_jobs`` worker threads in the FedAvg rounds (sum of client seconds /
   (workers x round wall time)); per FedAvg round the tasks (models) per client and their rows; and how
   many groups of an iteration had the same members and the same member rows as a group of the
   previous iteration (FedCRef retrains those from a fresh initialisation: algorithmic, not removable
   without changing the results).

Usage::

    python3 benchmarks/ae_train_throughput.py --out benchmarks/results/ae_train_throughput.md --fedavg
"""
from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import run_with_out  # noqa: E402
from _shared import FASHION_MNIST  # noqa: E402

_REPO = Path(__file__).resolve().parents[1]
HIDDEN = (100, 64, 32, 64, 100)
D = 784


def load_before(rev: str):
    """``fastfc/_ae.py`` and ``fastfc/_kernels/_fedcref.py`` of ``rev`` as a package of their own.

    Returns
    -------
    module
        The ``_ae`` module of ``rev`` (its kernels are the ones of ``rev`` too).
    """
    root = Path(tempfile.mkdtemp(prefix="ae_before_"))
    pkg = root / "ffc_before"
    (pkg / "_kernels").mkdir(parents=True)
    for src, dst in (("fastfc/_ae.py", "_ae.py"), ("fastfc/_kernels/_fedcref.py", "_kernels/_fedcref.py")):
        text = subprocess.run(["git", "show", f"{rev}:{src}"], cwd=_REPO, capture_output=True, text=True,
                              check=True).stdout
        (pkg / dst).write_text(text)
    (pkg / "__init__.py").write_text("")
    (pkg / "_kernels" / "__init__.py").write_text("")
    sys.path.insert(0, str(root))
    return importlib.import_module("ffc_before._ae")


def flops_per_row(lay) -> int:
    """Counted GEMM flops of one training row (see the module docstring)."""
    w = [lay.sizes[i] * lay.sizes[i + 1] for i in range(lay.n_layers)]
    return 2 * sum(w) + 2 * sum(w) + 2 * (sum(w) - w[0])


def _mean_time(fn, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def parts(ae, lay, X, batch: int, reps: int) -> dict:
    """Timers of each part of a training step of ``ae``'s implementation at the step's shapes: name ->
    ``f(n_calls)`` returning seconds per call."""
    kern = importlib.import_module(ae.__name__.rsplit(".", 1)[0] + "._kernels._fedcref")
    rng = np.random.default_rng(3)
    w = ae.glorot_init(lay, rng)
    Ws, bs = lay.views(w)
    Xb = np.ascontiguousarray(X[:batch])
    buffered = hasattr(ae, "_Workspace")
    hs = [Xb]
    for W, b in zip(Ws[:-1], bs[:-1]):
        A = hs[-1] @ W
        kern.bias_relu(A, b)
        hs.append(A)
    outs = [np.empty((batch, W.shape[1]), np.float32) for W in Ws]
    dins = [np.empty((batch, W.shape[0]), np.float32) for W in Ws]
    deltas = [rng.standard_normal((batch, W.shape[1])).astype(np.float32) * 1e-3 for W in Ws]
    gW = [np.empty_like(W) for W in Ws]
    gb = [np.empty_like(b) for b in bs]

    def fwd():
        for h, W, o in zip(hs, Ws, outs):
            np.matmul(h, W, out=o) if buffered else h @ W

    def gw():
        for h, d, g in zip(hs, deltas, gW):
            np.dot(h.T, d, out=g)

    def dx():
        for lyr in range(1, lay.n_layers):
            np.matmul(deltas[lyr], Ws[lyr].T, out=dins[lyr]) if buffered else deltas[lyr] @ Ws[lyr].T

    A_out = (hs[-1] @ Ws[-1]).astype(np.float32)
    tmp = np.empty_like(A_out)

    def elementwise():
        for lyr in range(lay.n_layers - 1):
            kern.bias_relu(outs[lyr], bs[lyr])
        for lyr in range(1, lay.n_layers):
            kern.relu_mask(dins[lyr], hs[lyr])
        np.copyto(tmp, A_out)
        kern.bias_sigmoid_mse_grad(tmp, bs[-1], Xb)
        for d, g in zip(deltas, gb):
            np.sum(d, axis=0, out=g)

    opt = ae.Adam(lay.n_params)
    g = rng.standard_normal(lay.n_params).astype(np.float32) * 1e-3
    n = X.shape[0]
    perm = rng.permutation(n)
    Xbuf = np.empty_like(Xb)
    n_batches = -(-n // batch)

    def batch_work():
        if buffered:
            np.take(X, perm[:batch], axis=0, out=Xbuf)
        else:
            _ = X[perm[:batch]]

    fns = {
        "GEMM forward": fwd,
        "GEMM weight gradients": gw,
        "GEMM input gradients": dx,
        "element-wise kernels + bias sums": elementwise,
        "Adam": lambda: opt.update(w, g),
        "batch (permutation / n_batches + gather)": batch_work,
    }
    extra = {"element-wise kernels + bias sums": lambda r: -_mean_time(lambda: np.copyto(tmp, A_out), r),
             "batch (permutation / n_batches + gather)":
                 lambda r: _mean_time(lambda: rng.permutation(n), max(r // 10, 3)) / n_batches}
    return {name: (lambda r, f=f, e=extra.get(name): _mean_time(f, r) + (e(r) if e else 0.0))
            for name, f in fns.items()}


def measure_parts(impls: dict, lay, X, batch: int, reps: int, rounds: int) -> dict:
    """Seconds per step of each part for every implementation: the minimum over ``rounds`` rounds, each
    round timing every part of every implementation in turn (interleaved, so load swings hit all)."""
    timers = {k: parts(ae, lay, X, batch, reps) for k, ae in impls.items()}
    best = {k: {} for k in impls}
    for _ in range(rounds):
        for name in timers["after"]:
            for k in impls:
                best[k][name] = min(best[k].get(name, np.inf), timers[k][name](reps))
    return best


def train_rate(ae, lay, X, w0, epochs: int, batch: int) -> tuple[float, float]:
    """(rows per second, seconds per step) of ``ae.train`` on ``X`` for ``epochs`` epochs."""
    t = time.perf_counter()
    ae.train(w0, lay, X, epochs, np.random.default_rng(11), batch_size=batch)
    dt = time.perf_counter() - t
    n_steps = epochs * -(-X.shape[0] // batch)
    return X.shape[0] * epochs / dt, dt / n_steps


def concurrent_rate(ae, lay, Xs, w0, epochs: int, batch: int, n_jobs: int) -> float:
    """Aggregate rows per second of training one model per entry of ``Xs`` on ``n_jobs`` threads."""
    def one(i):
        ae.train(w0, lay, Xs[i], epochs, np.random.default_rng(100 + i), batch_size=batch)

    t = time.perf_counter()
    if n_jobs <= 1:
        for i in range(len(Xs)):
            one(i)
    else:
        with ThreadPoolExecutor(max_workers=n_jobs) as ex:
            list(ex.map(one, range(len(Xs))))
    return sum(x.shape[0] for x in Xs) * epochs / (time.perf_counter() - t)


def make_before_tree(rev: str) -> Path:
    """The whole package at ``rev`` (``git archive``) with this checkout's compiled Cython kernels copied in
    (run only when their sources are unchanged since ``rev``)."""
    root = Path(tempfile.mkdtemp(prefix="fastfc_before_"))
    arch = subprocess.run(["git", "archive", rev, "fastfc"], cwd=_REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=arch, check=True)
    for so in (_REPO / "fastfc" / "_kernels").glob("*.so"):
        pyx = so.name.split(".")[0] + ".pyx"
        old = subprocess.run(["git", "show", f"{rev}:fastfc/_kernels/{pyx}"], cwd=_REPO, capture_output=True).stdout
        if old != (_REPO / "fastfc" / "_kernels" / pyx).read_bytes():
            raise SystemExit(f"{pyx} changed since {rev}: build the 'before' tree's kernels first")
        (root / "fastfc" / "_kernels" / so.name).write_bytes(so.read_bytes())
    return root


def fa_worker(tree: str, out: str, cfg: dict) -> None:
    """Run one small perfect-association FedCRef fit with the ``fastfc`` package under ``tree`` (a child
    process of section 4) and write its timings, schedule log and result digests to ``out`` (JSON)."""
    import hashlib
    import json

    sys.path.insert(0, tree)
    import fastfc
    from fastfc import fedcref as fc
    from fastfc._parallel import plan_threads
    from fastfc.datasets import dirty_labels, load_fashion_mnist, simulate_fedcref_clients

    if not str(Path(fastfc.__file__).resolve()).startswith(str(Path(tree).resolve())):
        raise SystemExit(f"imported {fastfc.__file__}, not the package under {tree}")
    X, y = load_fashion_mnist(cfg["data"])
    idx, sets = simulate_fedcref_clients(y, cfg["clients"], samples_per_class=cfg["per_class"], random_state=0)
    rng = np.random.default_rng(1000)
    Xc = [X[i] for i in idx]
    yc = [y[i] for i in idx]
    init = [dirty_labels(yy, cfg["dirtiness"], rng, s) for yy, s in zip(yc, sets)]
    log = []

    class Probe(fc.FedCRef):
        def _run_client_round(self, X, state, broadcast, index, entropy, restart, round, n_threads):
            t = time.perf_counter()
            res = super()._run_client_round(X, state, broadcast, index, entropy, restart, round, n_threads)
            rec = {"round": round, "client": index, "kind": type(broadcast).__name__,
                   "seconds": time.perf_counter() - t}
            if isinstance(broadcast, fc.FedCRefTrainTask):
                labels = np.asarray(state.values["labels"])
                rec.update(tasks=int(broadcast.params.shape[0]), fl_round=int(broadcast.fl_round),
                           rows=int(sum((labels == q).sum() for q in broadcast.clusters)) * int(broadcast.epochs),
                           members=[[int(g), index, int(q), hashlib.sha1(np.flatnonzero(labels == q).tobytes())
                                     .hexdigest()] for g, q in zip(broadcast.groups, broadcast.clusters)])
            log.append(rec)
            return res

    est = Probe(init_labels=init, oracle_labels=yc, theta=0.15, local_epochs=cfg["epochs"],
                fl_rounds=cfg["fl_rounds"], max_iter=cfg["max_iter"], random_state=0, n_jobs=cfg["n_jobs"])
    t0 = time.perf_counter()
    est.fit_clients(Xc)
    total = time.perf_counter() - t0
    digest = hashlib.sha1(b"".join(np.ascontiguousarray(a).tobytes() for a in
                                   [*est.client_labels_, est.group_models_])).hexdigest()
    Path(out).write_text(json.dumps({
        "total": total, "phases": est.phase_seconds_, "round_seconds": [float(v) for v in est.round_seconds_],
        "log": log, "digest": digest, "workers": plan_threads(cfg["n_jobs"], cfg["clients"]).workers}))


def fedavg_schedule(args) -> None:
    """Section 4 (see the module docstring): the whole package of ``--before`` and this checkout, each in a
    child process, interleaved."""
    import json

    cfg = {"data": args.data, "clients": args.fa_clients, "per_class": args.fa_per_class,
           "dirtiness": args.fa_dirtiness, "epochs": args.fa_epochs, "fl_rounds": args.fa_fl_rounds,
           "max_iter": args.fa_max_iter, "n_jobs": args.fa_n_jobs}
    trees = {"before": str(make_before_tree(args.before)), "after": str(_REPO)}
    bench = str(Path(__file__).resolve().parent)
    runs: dict[str, list] = {}
    warm = dict(cfg, clients=2, per_class=20, epochs=1, fl_rounds=1, max_iter=1)
    for rep in range(-1, args.fa_repeats):  # rep -1: a tiny fit per package compiles or loads its kernels
        for name, tree in trees.items():
            out = tempfile.mktemp(suffix=".json")
            code = (f"import sys; sys.path.insert(0, {bench!r}); import ae_train_throughput as b; "
                    f"b.fa_worker({tree!r}, {out!r}, {warm if rep < 0 else cfg!r})")
            subprocess.run([sys.executable, "-c", code], check=True, cwd=tempfile.gettempdir())
            if rep >= 0:
                runs.setdefault(name, []).append(json.loads(Path(out).read_text()))
    workers = runs["after"][0]["workers"]
    print(f"\n## 4. A small FedCRef run, whole package before and after\n\nPerfect-association baseline on "
          f"Fashion-MNIST, {args.fa_clients} clients, {args.fa_per_class} rows per class, dirtiness "
          f"{args.fa_dirtiness}, {args.fa_epochs} local epochs, {args.fa_fl_rounds} FedAvg rounds (2 then 7 local "
          f"epochs), max_iter {args.fa_max_iter}, n_jobs {args.fa_n_jobs} ({workers} client threads, one BLAS "
          f"thread each), {args.fa_repeats} repeat(s) of each, interleaved, each fit in a child process. "
          f"`before` = the whole `fastfc` package of {args.before} (clients started in client order); `after` = "
          "this checkout (clients with the most rows x epochs started first). A tiny fit per package first "
          "compiles its Numba kernels (not timed).\n")
    digests = {r["digest"] for rs in runs.values() for r in rs}
    print(f"Same labels and group-model bits in every fit (one SHA-1 digest of all of them): "
          f"{len(digests) == 1}.\n")
    print("| code | wall (s, median) | FedAvg phase (s, median) | local training (s, median) | "
          "FedAvg worker utilisation (median) |")
    print("|---|---|---|---|---|")
    for name, rs in runs.items():
        util = []
        for r in rs:
            fl = sorted({x["round"] for x in r["log"] if x["kind"] == "FedCRefTrainTask"})
            busy = sum(x["seconds"] for x in r["log"] if x["round"] in fl)
            util.append(busy / (workers * sum(r["round_seconds"][q] for q in fl)))
        med = lambda f: float(np.median([f(r) for r in rs]))  # noqa: E731
        print(f"| {name} | {med(lambda r: r['total']):.1f} | {med(lambda r: r['phases']['fedavg']):.1f} | "
              f"{med(lambda r: r['phases']['local_training']):.1f} | {np.median(util):.0%} |")
    b, a = (float(np.median([r["total"] for r in runs[k]])) for k in ("before", "after"))
    fb, fa = (float(np.median([r["phases"]["fedavg"] for r in runs[k]])) for k in ("before", "after"))
    print(f"\nafter / before: wall **{b / a:.2f}x**, FedAvg phase **{fb / fa:.2f}x** (medians).\n")
    r = runs["after"][0]
    log = r["log"]
    print("FedAvg rounds of the first `after` fit:\n")
    print("| round | FedAvg round | clients with tasks | tasks (models) per client | rows x epochs per client "
          "(min / max) | client seconds (sum / max) | round wall (s) | worker utilisation |")
    print("|---|---|---|---|---|---|---|---|")
    iteration_groups = []
    for q in sorted({x["round"] for x in log if x["kind"] == "FedCRefTrainTask"}):
        recs = [x for x in log if x["round"] == q]
        wall = r["round_seconds"][q]
        with_tasks = [x for x in recs if x["tasks"] > 0]
        secs = [x["seconds"] for x in recs]
        tasks = [x["tasks"] for x in with_tasks]
        rows = [x["rows"] for x in with_tasks]
        print(f"| {q} | {recs[0]['fl_round']} | {len(with_tasks)} / {len(recs)} | {min(tasks, default=0)}-"
              f"{max(tasks, default=0)} (total {sum(tasks)}) | {min(rows, default=0)} / {max(rows, default=0)} | "
              f"{sum(secs):.2f} / {max(secs):.2f} | {wall:.2f} | {sum(secs) / (workers * wall):.0%} |")
        if recs[0]["fl_round"] == 1:
            groups: dict[int, set] = {}
            for x in recs:
                for g, c, cl, h in x["members"]:
                    groups.setdefault(g, set()).add((c, cl, h))
            iteration_groups.append([frozenset(v) for v in groups.values()])
    same_g = [sum(g in set(prev) for g in cur) for prev, cur in zip(iteration_groups, iteration_groups[1:])]
    print("\nGroups per iteration: " + ", ".join(str(len(g)) for g in iteration_groups)
          + "; groups with the same members and member rows as a group of the previous iteration: "
          + (", ".join(str(v) for v in same_g) if same_g else "n/a (one iteration)")
          + " (FedCRef retrains them from a fresh server initialisation every iteration).")


def run(args) -> int:
    from fastfc import _ae as after
    from fastfc._parallel import limit_blas_threads

    before = load_before(args.before)
    impls = {"before": before, "after": after}
    lay = after.layout(D, HIDDEN)
    rng = np.random.default_rng(0)
    X = (rng.random((args.rows, D)) < 0.3).astype(np.float32)
    w0 = after.glorot_init(lay, rng)
    fpr = flops_per_row(lay)
    print("# FedCRef autoencoder training throughput (issue 14)\n")
    print(f"AE {D}-" + "-".join(map(str, HIDDEN)) + f"-{D} ({lay.n_params:,} float32 parameters), batch "
          f"{args.batch}, Keras-style Adam; {fpr / 1e6:.3f} MFLOP counted per training row. `before` = "
          f"`fastfc/_ae.py` + `fastfc/_kernels/_fedcref.py` of revision {args.before}; `after` = this checkout. "
          "BLAS pinned to one thread per model. Timings interleaved (before, after, before, ...) in one "
          "process; the load average is in the header.\n")
    with limit_blas_threads(1):
        for ae in impls.values():  # compile the kernels, build the thread-pool controller
            ae.train(w0, lay, X[:64], 1, np.random.default_rng(0), batch_size=args.batch)
        a = before.train(w0, lay, X, 1, np.random.default_rng(5), batch_size=args.batch)
        b = after.train(w0, lay, X, 1, np.random.default_rng(5), batch_size=args.batch)
        same = all(np.array_equal(p, q) for p, q in ((a[0], b[0]), (a[1].m, b[1].m), (a[1].v, b[1].v))) \
            and a[2] == b[2]
        print(f"Same bits after one epoch on {args.rows} rows (weights, Adam moments, losses): {same}.\n")
        rates = {k: [] for k in impls}
        steps = {k: [] for k in impls}
        for _ in range(args.repeats):
            for k, ae in impls.items():
                r, s = train_rate(ae, lay, X, w0, args.epochs, args.batch)
                rates[k].append(r)
                steps[k].append(s)
        print(f"## 1. One model ({args.rows} rows, {args.epochs} epochs, {args.repeats} repeats)\n")
        print("| code | rows/s (median) | rows/s (best) | GFLOP/s (median) | GFLOP/s (best) | ms per step (median) |")
        print("|---|---|---|---|---|---|")
        for k in impls:
            med, best = float(np.median(rates[k])), max(rates[k])
            print(f"| {k} | {med:,.0f} | {best:,.0f} | {med * fpr / 1e9:.1f} | {best * fpr / 1e9:.1f} | "
                  f"{1e3 * float(np.median(steps[k])):.3f} |")
        ratio = float(np.median(rates["after"])) / float(np.median(rates["before"]))
        print(f"\nafter / before (median rows/s): **{ratio:.2f}x**\n")

        print("## 2. Where a step's time goes (each part timed alone at the step's shapes; best of "
              f"{args.part_rounds} interleaved rounds of {args.part_reps} calls; step = best of section 1)\n")
        print("| part | before (µs) | before (%) | after (µs) | after (%) |")
        print("|---|---|---|---|---|")
        pt = measure_parts(impls, lay, X, args.batch, args.part_reps, args.part_rounds)
        step = {k: float(np.min(steps[k])) for k in impls}
        for name in pt["after"]:
            print(f"| {name} | " + " | ".join(f"{1e6 * pt[k][name]:.0f} | {100 * pt[k][name] / step[k]:.0f}"
                                              for k in impls) + " |")
        for k in impls:
            pt[k]["rest"] = step[k] - sum(pt[k].values())
        print("| rest (Python overhead, allocation, dispatch; step minus the parts) | "
              + " | ".join(f"{1e6 * pt[k]['rest']:.0f} | {100 * pt[k]['rest'] / step[k]:.0f}" for k in impls) + " |")
        print("| **step (best of section 1)** | " + " | ".join(f"{1e6 * step[k]:.0f} | 100" for k in impls) + " |")
        gemm = sum(v for n_, v in pt["after"].items() if n_.startswith("GEMM"))
        print(f"\nGEMMs alone (after): {args.batch * fpr / gemm / 1e9:.1f} GFLOP/s; a step that were GEMMs only "
              f"would train {args.batch / gemm:,.0f} rows/s.\n")

        print(f"## 3. Several models concurrently ({args.models} models x {args.conc_rows} rows, {args.conc_epochs} "
              "epochs; threads, BLAS one thread each)\n")
        Xs = [(np.random.default_rng(50 + i).random((args.conc_rows, D)) < 0.3).astype(np.float32)
              for i in range(args.models)]
        jobs = [int(j) for j in args.n_jobs.split(",")]
        cr = {(k, j): [] for k in impls for j in jobs}
        for _ in range(args.repeats):
            for j in jobs:
                for k, ae in impls.items():
                    cr[(k, j)].append(concurrent_rate(ae, lay, Xs, w0, args.conc_epochs, args.batch, j))
        print("| code | " + " | ".join(f"n_jobs {j}: rows/s (median) | GFLOP/s" for j in jobs)
              + " | speed-up n_jobs " + f"{jobs[-1]} / {jobs[0]} |")
        print("|---|" + "---|---|" * len(jobs) + "---|")
        for k in impls:
            meds = [float(np.median(cr[(k, j)])) for j in jobs]
            print(f"| {k} | " + " | ".join(f"{m:,.0f} | {m * fpr / 1e9:.1f}" for m in meds)
                  + f" | {meds[-1] / meds[0]:.2f} |")
        print("\nafter / before (median aggregate rows/s): " + ", ".join(
            f"n_jobs {j}: **{float(np.median(cr[('after', j)])) / float(np.median(cr[('before', j)])):.2f}x**"
            for j in jobs) + "\n")
    if args.fedavg:
        fedavg_schedule(args)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="fec0e4c", help="git revision of the 'before' training code")
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--part-reps", type=int, default=300)
    ap.add_argument("--part-rounds", type=int, default=5)
    ap.add_argument("--models", type=int, default=4)
    ap.add_argument("--conc-rows", type=int, default=500)
    ap.add_argument("--conc-epochs", type=int, default=2)
    ap.add_argument("--n-jobs", default="1,2")
    ap.add_argument("--fedavg", action="store_true", help="also run section 4 (a small FedCRef run)")
    ap.add_argument("--data", default=FASHION_MNIST)
    ap.add_argument("--fa-clients", type=int, default=6)
    ap.add_argument("--fa-per-class", type=int, default=200)
    ap.add_argument("--fa-dirtiness", type=float, default=0.3)
    ap.add_argument("--fa-epochs", type=int, default=3)
    ap.add_argument("--fa-fl-rounds", type=int, default=3)
    ap.add_argument("--fa-max-iter", type=int, default=3)
    ap.add_argument("--fa-n-jobs", type=int, default=2)
    ap.add_argument("--fa-repeats", type=int, default=1)
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
