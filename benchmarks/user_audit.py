"""A demanding outside user's audit of every estimator: odd-but-valid inputs, degenerate federations, bad input.

For every estimator in its default mode (and with ``refine_rounds=3`` where offered; FedKMeans is multi-round
itself) and every case below, fits through ``fit(X, client_ids=...)`` and ``fit_clients([...])`` with
``n_jobs=1`` and ``n_jobs=2`` and records:

- the error (type and text) or the warnings raised;
- ARI against the true clusters when the case has well-separated clusters (target 1.0, pass at >= 0.99);
- whether the caller's arrays (X, each client's matrix, client ids) were modified;
- determinism: the same labels for ``n_jobs`` 1 and 2 (same ``random_state``), and for ``fit`` vs
  ``fit_clients`` when the two see the same clients in the same order;
- ``predict(X) == labels_`` (every centre-producing estimator labels rows by the nearest global centre in
  its default mode; a mismatch is reported, not judged, for the methods whose labels come from the merge);
- ``predict`` on new rows of the case's dtype/container.

The bad-input cases (NaN, inf, mismatched feature counts, empty client, too few samples, wrong dtypes) record
the error text only: the check is that it names the problem. FedCRef (no ``n_clusters``; needs features in
[0, 1] and ``n_local_clusters``) runs a reduced set, on min-max scaled data, ``fit`` only.

The script also runs every ``python`` block of README.md (in a scratch directory, in order) and the README's
``fastfc`` CLI commands on a small CSV.

Usage::

    python3 benchmarks/user_audit.py --out benchmarks/results/user_audit.md
    python3 benchmarks/user_audit.py --methods KFed --cases base float16   # a quick look, printed
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's fastfc
from sklearn.metrics import adjusted_rand_score  # noqa: E402
from _provenance import run_with_out  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
METHODS = ["KFed", "FeCA", "FedHIRE", "GOLD", "FedKStarHC", "FedKMeans", "FedCRef"]
REFINABLE = {"KFed", "FeCA", "FedHIRE", "GOLD", "FedKStarHC"}
TARGET = 0.99


# ----------------------------------------------------------------------------------------- data
def blobs(rng, k=3, n=300, d=4, sep=30.0, sizes=None):
    """k well-separated Gaussian clusters (unit noise, centres >= ``sep`` apart on a simplex-like layout)."""
    centres = np.zeros((k, d))
    for j in range(k):  # centre j on axis j mod d, scaled so every pair of centres is >= sep apart
        centres[j, j % d] = sep * (1 + j // d)
    if sizes is None:
        sizes = [n // k + (j < n % k) for j in range(k)]
    y = np.repeat(np.arange(k), sizes)
    X = centres[y] + rng.normal(size=(len(y), d))
    return X, y


@dataclass
class Case:
    """One audit case: stacked data, each row's client and true cluster (None: no truth to score)."""

    name: str
    X: object                     # what the user passes (any container/dtype)
    client_ids: object            # passed to fit(); clients are formed from these for fit_clients
    y: np.ndarray | None
    k: int
    note: str = ""
    bad: bool = False             # an error is expected; record its text
    expect: str = ""              # the words the error should contain (bad cases)
    clients: list | None = None   # fit_clients input when not derivable (bad cases)
    predict_X: object = None      # new rows for predict (default: X)
    kwargs: dict = field(default_factory=dict)  # extra estimator parameters
    hows: tuple = ("fit", "fit_clients")  # the entry points that apply (bad cases: where the problem is)


def _rows_by_client(X, ids):
    """fit_clients' list in fit's client order (sorted id), each client's rows in input order."""
    arr = X
    ids = np.asarray(ids)
    uniq = np.unique(ids)
    out = []
    for u in uniq:
        sel = np.flatnonzero(ids == u)
        if hasattr(arr, "iloc"):
            out.append(arr.iloc[sel])
        elif isinstance(arr, list):
            out.append([arr[i] for i in sel])
        else:
            out.append(arr[sel])
    order = np.concatenate([np.flatnonzero(ids == u) for u in uniq])
    return out, order


def make_cases(rng_seed: int = 0) -> list[Case]:
    rng = np.random.default_rng(rng_seed)
    cases: list[Case] = []
    X, y = blobs(rng)
    ids = np.arange(len(y)) % 3
    cases.append(Case("base", X, ids, y, 3, "3 clusters, 300x4 float64, 3 IID clients"))
    cases.append(Case("int64", np.rint(X).astype(np.int64), ids, y, 3, "rounded to int64"))
    cases.append(Case("int8", np.clip(np.rint(X), -127, 127).astype(np.int8), ids, y, 3, "int8"))
    cases.append(Case("float32", X.astype(np.float32), ids, y, 3))
    cases.append(Case("float16", X.astype(np.float16), ids, y, 3))
    pats = np.array([[1, 0, 0, 1, 1, 0], [0, 1, 1, 0, 0, 1], [1, 1, 0, 0, 0, 0]], dtype=bool)
    yb = np.repeat(np.arange(3), 40)
    cases.append(Case("bool", pats[yb], np.arange(120) % 3, yb, 3, "3 distinct bool rows, 40 copies each"))
    cases.append(Case("list", X.tolist(), ids.tolist(), y, 3, "nested Python lists"))
    try:
        import pandas as pd

        cases.append(Case("DataFrame", pd.DataFrame(X, columns=[f"f{i}" for i in range(4)]), pd.Series(ids), y, 3))
    except ImportError:
        pass
    cases.append(Case("Fortran", np.asfortranarray(X), ids, y, 3))
    wide = np.zeros((X.shape[0], 8))
    wide[:, ::2] = X
    cases.append(Case("strided view", wide[:, ::2], ids, y, 3, "X[:, ::2] of a wider array"))
    cases.append(Case("reversed view", X[::-1], ids, y[::-1], 3, "X[::-1]"))
    ro = X.copy()
    ro.setflags(write=False)
    cases.append(Case("read-only", ro, ids, y, 3))
    cases.append(Case("string ids", X, np.array(["north", "south", "east"])[ids], y, 3))
    cases.append(Case("negative ids", X, ids - 5, y, 3, "ids -5, -4, -3"))
    cases.append(Case("sparse int ids", X, np.array([7, 10**12, 3])[ids], y, 3, "ids 7, 1e12, 3"))
    cases.append(Case("unsorted ids", X, np.array([2, 0, 1])[rng.integers(0, 3, len(y))], y, 3,
                      "random client of each row, interleaved"))
    cases.append(Case("float ids", X, ids * 0.5, y, 3, "ids 0.0, 0.5, 1.0"))
    cases.append(Case("K=1", X, ids, np.zeros(len(y), int), 1))
    Xs, ys = blobs(rng, k=3, n=12, d=2, sep=30.0)
    cases.append(Case("K=n rows", Xs, np.arange(12) % 2, np.arange(12), 12, "12 distinct rows, K=12"))
    X5, y5 = blobs(rng, k=5, n=200, d=4)
    ids5 = np.concatenate([np.zeros(3, int), np.ones(2, int), np.full(195, 2)])
    perm = rng.permutation(200)
    cases.append(Case("clients < K rows", X5[perm], ids5, y5[perm], 5, "clients of 3, 2 and 195 rows, K=5"))
    ids1 = np.arange(len(y)) % 3
    ids1[0] = 3
    cases.append(Case("one-row client", X, ids1, y, 3, "a 4th client of 1 row"))
    Xm, ym = blobs(rng, k=3, n=3000, d=4)
    cases.append(Case("1000x3 rows", Xm, rng.permutation(np.arange(3000) // 3), ym, 3, "1000 clients of 3 rows"))
    big = np.where(rng.random(3000) < 0.01, 1 + rng.integers(0, 3, 3000), 0)
    cases.append(Case("99% one client", Xm, big, ym, 3, "client 0 has ~99% of the rows, 3 tiny clients"))
    cases.append(Case("identical rows", np.ones((200, 4)), np.arange(200) % 4, None, 3,
                      "every row identical: expect 1 cluster + warning"))
    Xd = np.repeat(X[:3], 50, axis=0)
    cases.append(Case("3 distinct rows", Xd, np.arange(150) % 3, np.repeat(np.arange(3), 50), 3,
                      "duplicates only: 3 distinct rows x 50"))
    cases.append(Case("3 distinct rows, K=5", Xd, np.arange(150) % 3, np.repeat(np.arange(3), 50), 5,
                      "duplicates only, n_clusters above the 3 distinct rows: expect 3 clusters + warning"))
    cases.append(Case("constant features", np.hstack([X, np.full((len(y), 2), 7.0)]), ids, y, 3,
                      "2 extra constant columns"))
    X1, y1 = blobs(rng, k=3, n=300, d=1)
    X1[:, 0] = np.array([0.0, 30, 60])[y1] + rng.normal(size=300)
    cases.append(Case("one feature", X1, ids, y1, 3))
    y500 = np.repeat(np.arange(3), 100)
    X500 = rng.normal(scale=3.0, size=(3, 500))[y500] + rng.normal(size=(300, 500))
    cases.append(Case("500 features", X500, ids, y500, 3, "centres N(0, 3^2) in all 500 features, unit noise"))
    X500b, y500b = blobs(rng, k=3, n=300, d=500, sep=30.0)
    cases.append(Case("3 of 500 informative", X500b, ids, y500b, 3, "centres 30 apart in 3 features, 497 noise"))
    cases.append(Case("offset 1e9", X + 1e9, ids, y, 3, "every feature + 1e9 (float64)"))
    scales = np.array([1e-9, 1e-3, 1e3, 1e9])
    cases.append(Case("scales 1e-9..1e9", X * scales, ids, y, 3, "feature j times 1e-9, 1e-3, 1e3, 1e9"))
    X50 = rng.normal(size=(300, 50))
    X50[:, :2] += np.array([[0, 0], [20, 0], [0, 20]])[y]
    cases.append(Case("2 of 50 informative", X50, ids, y, 3, "centres 20 apart in 2 features, 48 noise"))
    Xu, yu = blobs(rng, k=2, n=1000, d=4, sizes=[10, 990])
    cases.append(Case("1% vs 99%", Xu, np.arange(1000) % 4, yu, 2, "cluster sizes 10 and 990"))
    X10, y10 = blobs(rng, k=10, n=1000, d=10)
    cl = y10 // 2  # client c holds clusters 2c and 2c+1
    cases.append(Case("2 of 10 per client", X10, cl, y10, 10, "5 clients, each sees 2 of the 10 clusters"))
    cases.append(Case("one client", X, np.zeros(len(y), int), y, 3, "all rows in one client"))
    from fastfc.datasets import make_gaussian_mixture

    X1c, y1c = make_gaussian_mixture(2000, 10, 10, random_state=int(rng.integers(1 << 30)))
    cases.append(Case("one client, K=10", X1c, np.zeros(2000, int), y1c, 10,
                      "10-cluster Gaussian mixture (fastfc.datasets), 2000x10, one client"))
    cases.append(Case("float32 1e30", (X * 1e30).astype(np.float32), ids, y, 3, "float32, |x| up to ~1e32"))
    cases.append(Case("float64 1e140", X * 1e140, ids, y, 3, "float64, |x| up to ~1e142"))
    cases.append(Case("float32 1e-30", (X * 1e-30).astype(np.float32), ids, y, 3, "float32, tiny values"))
    # found by a fuzz audit of easy data (session of 2026-11-29); their own random stream, so that the cases
    # above keep their data
    rng2 = np.random.default_rng(rng_seed + 1000)
    yl = np.repeat(np.arange(4), 75)
    Xl = np.c_[30.0 * yl, np.zeros(300)] + rng2.normal(size=(300, 2))
    cases.append(Case("line + 1 noise feature", Xl, np.arange(300) % 3, yl, 4,
                      "4 clusters 30 apart on a line in feature 0, feature 1 unit noise"))
    ys5 = np.repeat([0, 1], [50, 950])
    Xs5 = np.array([[0.0, 0, 0], [30, 0, 0]])[ys5] + rng2.normal(size=(1000, 3))
    cases.append(Case("5% vs 95%, one client", Xs5, np.zeros(1000, int), ys5, 2,
                      "cluster sizes 50 and 950, 30 apart in feature 0, features 1-2 unit noise"))
    Xs2, ys2 = blobs(rng2, k=2, n=1000, d=3, sizes=[20, 980])
    cases.append(Case("2% over 50 clients", Xs2, rng2.permutation(np.arange(1000) % 50), ys2, 2,
                      "cluster sizes 20 and 980, 50 IID clients of 20 rows"))
    Xo, yo = blobs(rng2, k=3, n=300, d=3)
    cases.append(Case("offset 3e10", Xo + 3e10, np.arange(300) % 3, yo, 3, "3 clusters 30 apart + 3e10"))
    cases.append(Case("offset 1e12", Xo + 1e12, np.arange(300) % 3, yo, 3, "3 clusters 30 apart + 1e12"))
    # bad input: the error should name the problem
    Xn = X.copy()
    Xn[5, 1] = np.nan
    cases.append(Case("NaN", Xn, ids, None, 3, bad=True, expect="NaN"))
    Xi = X.copy()
    Xi[5, 1] = np.inf
    cases.append(Case("inf", Xi, ids, None, 3, bad=True, expect="infinity"))
    cases.append(Case("feature mismatch", X, ids, None, 3, bad=True, expect="feature",
                      clients=[X[:100], X[100:, :3]], hows=("fit_clients",)))
    cases.append(Case("empty client", X, ids, None, 3, bad=True, expect="empty", clients=[X[:100], X[:0]], hows=("fit_clients",)))
    cases.append(Case("too few samples", X[:2], [0, 1], None, 3, bad=True, expect="n_clusters"))
    cases.append(Case("strings", np.array([["a", "b"]] * 5), np.arange(5) % 2, None, 2, bad=True,
                      expect="non-numeric"))
    cases.append(Case("complex", X.astype(complex), ids, None, 3, bad=True, expect="omplex"))
    cases.append(Case("object complex", np.array([[1 + 2j, 0.0]] + [[1.0, 2.0]] * 9, dtype=object), np.arange(10) % 2,
                      None, 2, bad=True, expect="omplex"))
    cases.append(Case("datetime", np.zeros((10, 2), dtype="datetime64[s]"), np.arange(10) % 2, None, 2,
                      bad=True, expect="dtype"))
    cases.append(Case("None entries", [[1.0, None]] * 10, np.arange(10) % 2, None, 2, bad=True,
                      expect="NaN"))
    cases.append(Case("float64 1e300", X * 1e300, ids, None, 3, "float64, |x| up to ~1e302 (squares overflow)",
                      bad=True, expect="magnitude"))
    cases.append(Case("ids NaN", X, np.where(ids == 0, np.nan, ids), None, 3, bad=True, expect="NaN",
                      hows=("fit",)))
    cases.append(Case("ids 2-D", X, ids[:, None], None, 3, bad=True, expect="client_ids", hows=("fit",)))
    cases.append(Case("predict wrong d", X, ids, y, 3, bad=True, expect="features", predict_X=X[:, :3]))
    return cases


# ------------------------------------------------------------------------------------ estimators
def make_est(method: str, k: int, mode: str, n_jobs: int, seed: int = 0, **extra):
    import fastfc

    if method == "FedCRef":
        return fastfc.FedCRef(n_local_clusters=k, random_state=seed, n_jobs=n_jobs, **extra)
    params = dict(n_clusters=k, random_state=seed, n_jobs=n_jobs, **extra)
    if mode == "refine":
        params["refine_rounds"] = 3
    return getattr(fastfc, method)(**params)


def _snapshot(obj):
    """A deep copy of what the user passed, to detect modification."""
    if hasattr(obj, "copy") and not isinstance(obj, list):
        return obj.copy()
    import copy

    return copy.deepcopy(obj)


def _same(a, b) -> bool:
    if hasattr(a, "equals"):
        return bool(a.equals(b))
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
    except TypeError:
        return bool(np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object)))


def _warn_text(caught) -> list[str]:
    return sorted({f"{w.category.__name__}: {str(w.message)[:160]}" for w in caught})


def _fit(est, how: str, case: Case, clients):
    """Fit; return (labels in stacked row order or None, error text or None, warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if how == "fit":
                est.fit(case.X, client_ids=case.client_ids)
                labels = est.labels_
            else:
                est.fit_clients(clients)
                labels = est.labels_
            err = None
        except Exception as exc:  # a result of the audit
            labels, err = None, f"{type(exc).__name__}: {exc}"
    return labels, err, _warn_text(caught)


def run_case(method: str, mode: str, case: Case, hows=("fit", "fit_clients")) -> dict:
    res = {"method": method, "mode": mode, "case": case.name, "errors": {}, "warnings": set(), "ari": {},
           "modified": [], "nondeterministic": [], "predict": "", "k_found": None}
    if case.clients is not None:
        clients, order = case.clients, None
    else:
        clients, order = _rows_by_client(case.X, case.client_ids)
    y = case.y
    if y is not None and order is not None:
        y_clients = np.asarray(y)[order]
    snaps = {"X": _snapshot(case.X), "client_ids": _snapshot(case.client_ids),
             "clients": [_snapshot(c) for c in clients]}
    labels = {}
    est_keep = None
    for how in hows:
        for n_jobs in (1, 2):
            est = make_est(method, case.k, mode, n_jobs, **case.kwargs)
            lab, err, warns = _fit(est, how, case, clients)
            res["warnings"].update(warns)
            if err is not None:
                res["errors"][f"{how}/{n_jobs}"] = err
                continue
            labels[(how, n_jobs)] = np.asarray(lab)
            if est_keep is None and how == "fit":
                est_keep = est
            if y is not None:
                truth = y if how == "fit" else y_clients
                res["ari"][f"{how}/{n_jobs}"] = float(adjusted_rand_score(truth, lab))
            res["k_found"] = int(len(np.unique(lab)))
    if not _same(case.X, snaps["X"]):
        res["modified"].append("X")
    if case.client_ids is not None and not _same(case.client_ids, snaps["client_ids"]):
        res["modified"].append("client_ids")
    if not all(_same(c, s) for c, s in zip(clients, snaps["clients"])):
        res["modified"].append("clients")
    for how in hows:
        a, b = labels.get((how, 1)), labels.get((how, 2))
        if a is not None and b is not None and not np.array_equal(a, b):
            res["nondeterministic"].append(f"{how} n_jobs 1 vs 2")
    if est_keep is not None and method != "FedCRef":
        px = case.predict_X if case.predict_X is not None else case.X
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                p = est_keep.predict(px)
                if case.predict_X is None:
                    agree = float(np.mean(p == est_keep.labels_))
                    res["predict"] = "==labels_" if agree == 1.0 else f"agree {agree:.3f}"
                else:
                    res["predict"] = f"ok ({len(p)} rows)"
            except Exception as exc:
                res["predict"] = f"{type(exc).__name__}: {exc}"
        res["warnings"].update(f"predict {w}" for w in _warn_text(caught))
    return res


def judge(res: dict, case: Case) -> tuple[str, list[str]]:
    """(cell text, problems) for one result."""
    problems = []
    if case.bad:
        texts = list(res["errors"].values())
        if case.predict_X is not None:
            texts = [res["predict"]]
        if not texts or (case.predict_X is not None and not texts[0].startswith(("ValueError", "TypeError"))):
            problems.append("no error raised")
        n_fits = 2 * len(case.hows) if res["method"] != "FedCRef" else 2
        if case.predict_X is None and len(res["errors"]) < n_fits:
            problems.append(f"only {len(res['errors'])}/{n_fits} fits raised")
        if texts and not all(case.expect.lower() in t.lower() for t in texts):
            problems.append(f"error does not say '{case.expect}'")
        return ("error ok" if not problems else "✗"), problems
    if res["errors"]:
        problems.append("error: " + "; ".join(sorted(set(res["errors"].values())))[:300])
    if res["modified"]:
        problems.append("modified " + ", ".join(res["modified"]))
    if res["nondeterministic"]:
        problems.append("labels differ: " + ", ".join(res["nondeterministic"]))
    aris = list(res["ari"].values())
    cell = ""
    if case.y is None:  # identical rows: one cluster and a warning
        cell = f"k{res['k_found']}"
        if res["k_found"] != 1:
            problems.append(f"{res['k_found']} clusters on identical rows")
        if not res["warnings"]:
            problems.append("no warning on identical rows")
    elif aris:
        cell = f"{min(aris):.3f}"
        if min(aris) < TARGET and res["method"] != "FedCRef":
            problems.append(f"ARI {min(aris):.3f} < {TARGET}")
    if res["predict"] and res["predict"] != "==labels_" and case.predict_X is None:
        if res["predict"].startswith("agree"):
            cell += " p≠"
        problems.append(f"predict: {res['predict'][:200]}")
    if res["warnings"]:
        cell += " W"
    if problems:
        cell += " ✗"
    return cell or "-", problems


# ---------------------------------------------------------------------------------------- README
def readme_blocks() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", text, re.S)]


def run_readme(tmp: Path) -> list[str]:
    """Run README's python blocks in order (one namespace, as a reader pasting them would) and its
    ``fastfc run/predict/rerun/datasets`` commands on the CSV the python blocks wrote."""
    out = []
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    ns: dict = {}
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        for i, (lang, code) in enumerate(readme_blocks()):
            if lang != "python":
                continue
            first = code.strip().splitlines()[0][:60]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t0 = time.perf_counter()
                try:
                    exec(compile(code, f"README block {i}", "exec"), ns)
                    status = "ok"
                except Exception as exc:
                    status = f"**{type(exc).__name__}: {str(exc)[:200]}**"
            w = _warn_text(caught)
            out.append(f"| python block {i} | `{first}` | {status}{' (warned: ' + '; '.join(w)[:200] + ')' if w else ''}"
                       f" | {time.perf_counter() - t0:.1f}s |")
        for i, (lang, code) in enumerate(readme_blocks()):
            if lang not in ("bash", "sh", "console"):
                continue
            for line in code.strip().splitlines():
                line = line.strip()
                if not line.startswith("fastfc ") or "flower" in line or "warmup" in line:
                    continue
                cmd = line.replace("fastfc ", f"{sys.executable} -m fastfc ", 1)
                cmd = cmd.replace("| tee run.json", "> run.json")
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env, timeout=600)
                tail = (proc.stderr.strip().splitlines() or [""])[-1][:200]
                status = "ok" if proc.returncode == 0 else f"**exit {proc.returncode}: {tail}**"
                out.append(f"| bash block {i} | `{line[:90]}` | {status} | {time.perf_counter() - t0:.1f}s |")
    finally:
        os.chdir(cwd)
    return out


def _pooled_kmeans_ari(case: Case, standardize: bool) -> float:
    """ARI of scikit-learn's KMeans on the case's rows pooled (context for the federated cells)."""
    from sklearn.cluster import KMeans
    from sklearn.preprocessing import StandardScaler

    X = np.asarray(case.X, dtype=np.float64)
    if standardize:
        X = StandardScaler().fit_transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate rows: fewer distinct clusters than k
        labels = KMeans(n_clusters=case.k, n_init=10, random_state=0).fit_predict(X)
    return float(adjusted_rand_score(case.y, labels))


# ------------------------------------------------------------------------------------------ main
FEDCREF_CASES = {"base", "float32", "int64", "DataFrame", "read-only", "string ids", "unsorted ids", "NaN",
                 "feature mismatch", "empty client", "identical rows"}


def _for_fedcref(case: Case) -> Case:
    """The case on min-max scaled features (FedCRef's autoencoders need [0, 1]).

    Integer data is scaled into float64, as a user must: an integer array holds only 0 and 1 in
    [0, 1], and casting the scaled values back to it (what the audit did until i20) zeroed 285 of
    the int64 case's 300 rows, which no method could cluster (FedCRef's -0.003 there was that).
    FedCRef's integer input itself (binary features) is tested in tests/test_fedcref.py.
    """
    from dataclasses import replace

    if case.bad or case.y is None:
        return case
    X = case.X
    if hasattr(X, "iloc"):
        X = (X - X.min()) / (X.max() - X.min())
        return replace(case, X=X)
    arr = np.asarray(X)
    scaled = ((arr - arr.min(0)) / (arr.max(0) - arr.min(0))).astype(arr.dtype if arr.dtype.kind == "f" else np.float64)
    if not arr.flags.writeable:
        scaled.setflags(write=False)
    return replace(case, X=scaled)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    parser.add_argument("--cases", nargs="+", help="case names (default: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2],
                        help="data seeds of the cases with a true partition (bad input: the first only)")
    parser.add_argument("--no-readme", action="store_true", help="skip the README blocks and CLI commands")
    return run_with_out(parser, argv, run)


def run(args) -> int:
    """Run the audit the parsed command line ``args`` asks for and print the findings; returns 0."""

    by_seed = {seed: make_cases(seed) for seed in args.seeds}
    cases = by_seed[args.seeds[0]]
    keep = [i for i, c in enumerate(cases) if not args.cases or c.name in args.cases]
    columns = [(m, mode) for m in args.methods for mode in (("default", "refine") if m in REFINABLE else ("default",))]
    rows, notes, n_problems = [], [], 0
    case_notes = [f"- **{cases[i].name}**: {cases[i].note}" for i in keep if cases[i].note]
    for i in keep:
        case = cases[i]
        cells = []
        for method, mode in columns:
            if method == "FedCRef" and case.name not in FEDCREF_CASES:
                cells.append("")
                continue
            label = f"{method}{'' if mode == 'default' else ' refine'}"
            shown, any_problem = None, False
            for seed in (args.seeds[:1] if case.bad or method == "FedCRef" else args.seeds):
                c = by_seed[seed][i]
                c = _for_fedcref(c) if method == "FedCRef" else c
                t0 = time.perf_counter()
                try:
                    hows = ("fit",) if method == "FedCRef" and "fit" in c.hows else c.hows
                    res = run_case(method, mode, c, hows=hows)
                    cell, problems = judge(res, c)
                except Exception:  # the audit itself must not stop on one case
                    cell, problems = "✗", ["audit crashed: " + traceback.format_exc().strip().splitlines()[-1]]
                    res = {"warnings": set(), "errors": {}}
                if shown is None or (problems and not any_problem):
                    shown = cell
                tag = f" (data seed {seed})" if len(args.seeds) > 1 and not case.bad else ""
                if problems:
                    any_problem = True
                    notes.append(f"- ✗ {case.name}{tag}, {label}: " + "; ".join(problems))
                if c.bad:
                    texts = sorted(set(res["errors"].values())) or ([res.get("predict")] if res.get("predict") else [])
                    notes.append(f"- {case.name}, {label}: error text: " + " | ".join(t[:220] for t in texts))
                elif res["warnings"] and seed == args.seeds[0]:
                    notes.append(f"- {case.name}, {label}: warned: " + " | ".join(sorted(res["warnings"]))[:400])
                print(f"{case.name:22s} {label:18s} s{seed} {cell:12s} {time.perf_counter() - t0:6.2f}s "
                      f"{'; '.join(problems)[:150]}", file=sys.stderr, flush=True)
            n_problems += any_problem
            cells.append(shown)
        for standardize in (True, False):  # context: pooled k-means on every row, no federation
            cells.append("" if case.bad or case.y is None else
                         f"{min(_pooled_kmeans_ari(by_seed[seed][i], standardize) for seed in args.seeds):.3f}")
        rows.append(f"| {case.name} | " + " | ".join(cells) + " |")
    headers = [f"{m}{'' if mode == 'default' else ' r3'}" for m, mode in columns] + ["KMeans z", "KMeans raw"]
    readme_rows = []
    if not args.no_readme:
        with tempfile.TemporaryDirectory() as tmp:
            readme_rows = run_readme(Path(tmp))
    body = [
        "# User audit: every estimator on odd, degenerate and bad input",
        "",
        "Cell: lowest ARI over `fit(X, client_ids)` and `fit_clients`, n_jobs 1 and 2 (well-separated clusters, "
        f"data seeds {', '.join(map(str, args.seeds))}: the first seed with a problem is shown, else the first; "
        f"target {TARGET}); `k1` = clusters found on identical rows; `W` = warned; `p≠` = `predict(X)` differs "
        "from `labels_`; `error ok` = bad input raised an error naming the problem; ✗ = a problem listed below. "
        "`r3` = `refine_rounds=3`. FedCRef: `n_local_clusters=K`, min-max scaled data, `fit` only, "
        "not held to the ARI target (no global K). For context, not federated and not judged: `KMeans z` / "
        "`KMeans raw` = lowest ARI over the data seeds of scikit-learn's `KMeans(n_init=10, random_state=0)` on "
        "all rows pooled, per-feature standardised (`StandardScaler`) / as given.",
        "",
        f"Problems: **{n_problems}** cells (a cell has a problem when any data seed has one).",
        "",
        "| case | " + " | ".join(headers) + " |",
        "|---" * (len(headers) + 1) + "|",
        *rows,
        "",
        "## Cases",
        "",
        *case_notes,
        "",
        "## Problems, error texts and warnings",
        "",
        *(notes or ["(none)"]),
    ]
    if readme_rows:
        body += ["", "## README code blocks and CLI commands", "", "| block | first line / command | result | time |",
                 "|---|---|---|---|", *readme_rows]
    print("\n".join(body))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
