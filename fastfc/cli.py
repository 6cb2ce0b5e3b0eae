"""Command line: ``fastfc run METHOD --dataset NAME`` and ``fastfc datasets``."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["main"]


class _Progress:
    """A one-line progress bar over clients on stderr (only on a terminal)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._last = None

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(f"\r{phase:>9} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} clients")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _parse_value(text: str) -> Any:
    low = text.lower()
    if low in {"none", "null"}:
        return None
    if low in {"true", "false"}:
        return low == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _n_clusters_arg(text: str) -> int | str:
    """``--n-clusters``: a positive integer or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'auto', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'auto', got {value}")
    return value


def _parse_params(items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--param expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = _parse_value(value.strip())
    return out


def _build_parser() -> argparse.ArgumentParser:
    from . import __version__
    from .experiment import METHODS

    parser = argparse.ArgumentParser(prog="fastfc", description="Fast one-shot federated clustering.")
    parser.add_argument("--version", action="version", version=f"fastfc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a method on a dataset split over clients and score it")
    run.add_argument("method", help=f"one of: {', '.join(sorted(METHODS))}")
    run.add_argument("--dataset", required=True, help="bundled dataset name (see 'fastfc datasets') or a client .npz file (X0..Xk, y0..yk)")
    run.add_argument("--clients", type=int, default=8, help="number of clients (default 8)")
    run.add_argument("--split", default="iid", choices=["iid", "dirichlet", "classes", "non-icd"], help="how rows are split over clients (default iid)")
    run.add_argument("--alpha", type=float, default=0.5, help="Dirichlet concentration for --split dirichlet (default 0.5)")
    run.add_argument("--classes-per-client", type=int, default=2, help="for --split classes (default 2)")
    run.add_argument("--seed", type=int, default=0, help="seed of the split and of the method (default 0)")
    run.add_argument("--n-clusters", type=_n_clusters_arg, default=None,
                     help="number of clusters (default: number of classes); 'auto' lets a method that can "
                          "estimate it do so (fedkstarhc)")
    run.add_argument("--n-jobs", type=int, default=None, help="threads (default 1; -1 = all cores)")
    run.add_argument("--no-standardize", action="store_true", help="do not z-score the dataset before splitting")
    run.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="extra estimator parameter (repeatable)")
    run.add_argument("--protocol", choices=["client", "centroid"], default="client",
                     help="score the clients' row labels (client) or one nearest-centroid step on the complete "
                          "dataset (centroid, GOLD's centroid inheritance)")
    run.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    sub.add_parser("datasets", help="list the bundled datasets")

    fl = sub.add_parser("flower", help="real federated runs on Flower (needs fastfc[flower])")
    flsub = fl.add_subparsers(dest="flower_command", required=True)
    app = flsub.add_parser("app", help="write the Flower app project (pyproject.toml) into a directory")
    app.add_argument("directory")
    app.add_argument("--clients", type=int, default=3, help="expected SuperNodes (num-clients, default 3)")
    app.add_argument("--min-clients", type=int, default=None, help="fewest responders to finish (default: all)")
    loc = flsub.add_parser("local", help="run a method over N SuperNodes started on 127.0.0.1, one per client")
    loc.add_argument("method", help=f"one of: {', '.join(sorted(METHODS))}")
    loc.add_argument("--dataset", required=True, help="bundled dataset name or a client .npz file (X0..Xk, y0..yk)")
    loc.add_argument("--clients", type=int, default=3, help="number of clients / SuperNodes (default 3)")
    loc.add_argument("--split", default="iid", choices=["iid", "dirichlet", "classes", "non-icd"])
    loc.add_argument("--alpha", type=float, default=0.5)
    loc.add_argument("--seed", type=int, default=0, help="seed of the split and of the method (default 0)")
    loc.add_argument("--n-clusters", type=_n_clusters_arg, default=None,
                     help="number of clusters (default: number of classes); 'auto' lets a method that can "
                          "estimate it do so (fedkstarhc)")
    loc.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    loc.add_argument("--workdir", default=None, help="where data, labels, logs and Flower state go (default: a new temp dir)")
    loc.add_argument("--port", type=int, default=29500, help="SuperLink port; SuperNodes use the next N (default 29500)")
    loc.add_argument("--check", action="store_true", help="also fit in-process and check every client's labels are identical")
    return parser


def _cmd_run(args) -> int:
    from .experiment import load_federated, run_method

    split_params: dict[str, Any] = {}
    if args.split == "dirichlet":
        split_params["alpha"] = args.alpha
    elif args.split == "classes":
        split_params["classes_per_client"] = args.classes_per_client
    X_clients, y_clients = load_federated(
        args.dataset, n_clients=args.clients, split=args.split, seed=args.seed,
        standardize=not args.no_standardize, split_params=split_params,
    )
    progress = _Progress(enabled=sys.stderr.isatty() and not args.json and len(X_clients) >= 20)
    res = run_method(
        args.method, X_clients, y_clients, n_clusters=args.n_clusters, random_state=args.seed,
        n_jobs=args.n_jobs, params=_parse_params(args.param), progress=progress, protocol=args.protocol,
    )
    res.pop("estimator")
    res["dataset"] = args.dataset
    res["split"] = args.split
    res["seed"] = args.seed
    if args.json:
        print(json.dumps(res, sort_keys=True))
        return 0
    print(f"{res['method']} on {args.dataset}: {res['n_samples']} rows x {res['n_features']} features, "
          f"{res['n_clients']} clients ({args.split}), {res['n_clusters']} clusters, seed {args.seed}")
    print()
    print(f"{'metric':<12}{'value':>10}")
    for key, value in res["metrics"].items():
        print(f"{key:<12}{value:>10.4f}")
    print()
    print(f"{'phase':<12}{'seconds':>10}")
    for key, value in res["timings"].items():
        print(f"{key:<12}{value:>10.4f}")
    return 0


def _cmd_datasets(args) -> int:
    from .datasets import dataset_info, list_datasets

    print(f"{'name':<18}{'samples':>9}{'features':>10}{'classes':>9}  source")
    for name in list_datasets():
        info = dataset_info(name)
        print(f"{name:<18}{info['n_samples']:>9}{info['n_features']:>10}{info['n_classes']:>9}  {info['source']}")
    return 0


def _cmd_flower(args) -> int:
    import json
    import tempfile

    from .flower import LocalFederation, write_app_project

    if args.flower_command == "app":
        path = write_app_project(args.directory, n_clients=args.clients, min_clients=args.min_clients)
        print(f"wrote {path / 'pyproject.toml'}; run it with: flwr run {path} <federation>")
        return 0
    from .experiment import load_federated
    from .metrics import evaluate

    split_params = {"alpha": args.alpha} if args.split == "dirichlet" else {}
    X_clients, y_clients = load_federated(args.dataset, n_clients=args.clients, split=args.split, seed=args.seed,
                                          split_params=split_params)
    k = args.n_clusters
    if k is None and y_clients is not None:
        k = len({int(v) for y in y_clients for v in y})
    if k is None:
        raise ValueError("--n-clusters is required for data without labels")
    extra = _parse_params(args.param)
    if "n_clusters" in extra:
        raise ValueError("give the number of clusters with --n-clusters, not --param n_clusters=...")
    params = {"n_clusters": None if k == "auto" else int(k), **extra}
    workdir = args.workdir or tempfile.mkdtemp(prefix="fastfc-flower-")
    app = write_app_project(f"{workdir}/app", n_clients=len(X_clients))
    report = f"{workdir}/report.json"
    print(f"fastfc flower: {len(X_clients)} SuperNodes on 127.0.0.1:{args.port}+, state and logs in {workdir}",
          file=sys.stderr)
    with LocalFederation(f"{workdir}/federation", X_clients, port=args.port) as fed:
        fed.wait_online()
        status, details = fed.run(app, {"method": args.method, "params": params, "random-state": args.seed,
                                        "report-path": report})
        labels = fed.labels()
    if status != "finished:completed":
        raise RuntimeError(f"the Flower run ended {status}: {details}")
    res = json.loads(open(report).read())
    got = [lab for lab in labels if lab is not None]
    if y_clients is not None and len(got) == len(y_clients):
        import numpy as np

        res["metrics"] = {k: round(float(v), 4) for k, v in evaluate(np.concatenate(y_clients),
                                                                     np.concatenate(got)).items()}
    if args.check:
        from .experiment import make_estimator
        import numpy as np

        ref = make_estimator(args.method, random_state=args.seed, **params).fit_clients(X_clients)
        same = all(lab is not None and np.array_equal(lab, r) for lab, r in zip(labels, ref.client_labels_))
        res["identical_to_fit_clients"] = bool(same)
        if not same:
            print(json.dumps(res, indent=1))
            raise RuntimeError("labels from the Flower run differ from the in-process fit_clients")
    print(json.dumps(res, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fastfc`` command; returns the exit status."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "flower":
            return _cmd_flower(args)
        return _cmd_datasets(args)
    except KeyboardInterrupt:
        print("fastfc: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, KeyError, OSError, ImportError, RuntimeError) as exc:
        msg = str(exc).strip().strip("'\"") or type(exc).__name__
        print(f"fastfc: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
