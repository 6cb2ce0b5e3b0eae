"""Command line: ``fastfc run METHOD --dataset NAME`` (or ``--data FILE``), ``fastfc predict MODEL --data FILE``,
``fastfc rerun RUN.json``, ``fastfc datasets``, ``fastfc warmup`` and ``fastfc flower``.

Errors
    Expected user errors print one line ``fastfc: error: ...`` and exit with
    status 2 (the rule is :func:`_is_user_error`): bad arguments, missing or
    unreadable files, fastfc's own error types (``MessageError``,
    ``ModelFileError``, ``StateError``, ``TableError``) and scikit-learn's
    parameter validation, and a ``ValueError``/``TypeError``/``ImportError``
    that one of fastfc's ``raise`` statements raised or that its input
    validation (:mod:`fastfc._validation`) let through. Anything else is a bug
    in fastfc and shows its traceback (status 1). ``--debug`` always shows
    the traceback. With ``--json`` the error is also a JSON object
    ``{"error": {"type": ..., "message": ...}}`` on stdout.

Warnings
    A warning of the library during a command (a degenerate federation, ...)
    prints one line ``fastfc: warning: Category: message`` on stderr, without
    a source location (the warning filters, ``-W error`` included, apply as usual).
"""
from __future__ import annotations

import argparse
import dis
import json
import os
import sys
import traceback
import warnings as pywarnings
from typing import Any, TextIO

__all__ = ["main"]

#: estimator parameters that have their own option rather than ``--param``:
#: parameter -> ``dest`` of that option (the same table passes them on)
_OWN_OPTIONS: dict[str, str] = {"n_clusters": "n_clusters", "random_state": "seed", "n_jobs": "n_jobs"}

#: split options -> (the split they apply to, their default); given with
#: another split or with a client file they are refused, never ignored
_SPLIT_OPTIONS: dict[str, tuple[str | None, Any]] = {
    "split": (None, "iid"),
    "alpha": ("dirichlet", 0.5),
    "classes_per_client": ("classes", 2),
}

#: errors with a message meant for the user whatever raised them
_FILE_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)
#: error types whose message is for the user whatever raised them: fastfc's own and scikit-learn's
#: parameter validation (``module: class``; a class counts only once its module is loaded -- an
#: exception of it cannot exist before -- so classifying an error imports nothing)
_OWN_ERRORS = (
    ("fastfc.protocol", "MessageError"),
    ("fastfc.saving", "ModelFileError"),
    ("fastfc._state", "StateError"),
    ("fastfc.datasets._table", "TableError"),
    ("sklearn.utils._param_validation", "InvalidParameterError"),
)
#: errors that are user errors when a ``raise`` statement of fastfc raised them or fastfc's input
#: validation let them through (a ValueError from numpy deep inside a kernel is a bug, not a user error)
_CHECK_ERRORS = (ValueError, TypeError, ImportError)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
#: the module whose every verdict is about the input, also those of the validators it calls (scikit-learn's)
_VALIDATION_FILE = os.path.join(_PACKAGE_DIR, "_validation.py")
_RAISE_OPCODE = dis.opmap["RAISE_VARARGS"]


class _UsageError(Exception):
    """Bad command-line arguments (what argparse would report and exit on)."""

    def __init__(self, parser: argparse.ArgumentParser, message: str):
        super().__init__(message)
        self.parser = parser


class _CommandError(Exception):
    """A command failed for a reason its message explains fully (no traceback needed)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors ``main`` formats (as text or as JSON)."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        raise _UsageError(self, message)


class _Progress:
    """Progress of a fit on a text stream: per-client phases, the server phase and restarts.

    Called as ``progress(phase, done, total)`` by ``fit_clients``:
    ``"summarize"``/``"assign"`` after each client finishes, ``("server", 0, 1)``
    before and ``("server", 1, 1)`` after the server phase, ``("restart", r,
    max_restarts)`` when whole-run restart ``r`` begins. Any other phase gets
    a plain bar.

    Parameters
    ----------
    stream : text stream
        Where to write (stderr).
    bars : bool
        Draw the bars and the server phase (on a terminal). Restarts are
        reported either way, one line each.
    """

    width = 30

    def __init__(self, stream: TextIO, bars: bool):
        self.stream = stream
        self.bars = bars
        self._line: str | None = None  # phase of the line still open (no newline yet)

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _end_line(self, tail: str = "") -> None:
        if self._line is not None:
            self._write(tail + "\n")
            self._line = None

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase == "restart":
            self._end_line(" failed" if self._line == "server" else "")
            self._write(f"restart {done}/{total}: server phase failed, rerunning with fresh randomness\n")
            return
        if not self.bars:
            return
        if phase == "server":
            if done < total:
                self._end_line()
                self._write(f"{'server':>9} running ...")
                self._line = "server"
            elif self._line == "server":
                self._end_line(" done")
            else:
                self._end_line()
                self._write(f"{'server':>9} done\n")
            return
        if self._line not in (None, phase):
            self._end_line()
        filled = min(self.width, max(0, self.width * done // max(total, 1)))
        unit = " clients" if phase in ("summarize", "assign") else ""
        self._write(f"\r{phase:>9} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total}{unit}")
        self._line = phase
        if done >= total:
            self._end_line()


def _parse_value(text: str) -> Any:
    """The value of a ``--param KEY=VALUE`` item: None, a bool, an int, a float or the text itself.

    Parameters
    ----------
    text : str

    Returns
    -------
    value : None, bool, int, float or str
    """
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


def _option(parser: argparse.ArgumentParser, dest: str) -> str | None:
    """The option of ``parser`` that sets ``dest``, as the parser spells it.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        A command's parser.
    dest : str
        The attribute the option sets (``seed`` for ``--seed``).

    Returns
    -------
    option : str or None
        Its longest option string, or None when the command has no such option.
    """
    for action in parser._actions:
        if action.dest == dest and action.option_strings:
            return max(action.option_strings, key=len)
    return None


def _estimator_params(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--param KEY=VALUE`` items as a dict of estimator parameters.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments with ``param`` and ``subparser`` (the command's parser).

    Returns
    -------
    params : dict

    Raises
    ------
    ValueError
        For an item without ``=``, or a parameter that has its own option in
        this command (the message names that option, looked up in the parser).
    """
    out = {}
    for item in args.param:
        key, sep, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not key:
            raise ValueError(f"--param expects KEY=VALUE, got {item!r}")
        option = _option(args.subparser, _OWN_OPTIONS[key]) if key in _OWN_OPTIONS else None
        if option is not None:
            raise ValueError(f"{key} is set by its own option: use {option} {raw} instead of --param {item}")
        out[key] = _parse_value(raw)
    return out


def _load_clients(args: argparse.Namespace, default_clients: int) -> tuple[list, list | None, dict[str, Any]]:
    """The clients' data for ``--dataset`` and the split options of the command.

    Split options that cannot apply (to a client file, or to another
    ``--split``) are refused with an error naming them; none is ignored
    silently.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments: ``dataset``, ``seed``, ``subparser``, and those of
        ``clients``, ``split``, ``alpha``, ``classes_per_client`` and
        ``no_standardize`` the command has (None when not given). Warnings
    are printed on stderr and returned.
    default_clients : int
        Number of clients when ``--clients`` is not given.

    Returns
    -------
    X_clients : list of ndarray
    y_clients : list of ndarray or None
    data : dict
        ``split`` (None for a client file), ``split_params``, ``standardize``
        and ``warnings`` (messages for the user, possibly empty).
    """
    from .experiment import dataset_kind, load_federated

    given = {dest: getattr(args, dest, None) for dest in ("clients", *_SPLIT_OPTIONS)}
    given = {dest: value for dest, value in given.items() if value is not None}
    no_standardize = getattr(args, "no_standardize", False)

    def options(dests) -> str:
        return ", ".join(_option(args.subparser, dest) for dest in dests)

    if getattr(args, "data", None) is not None:
        return _load_table_clients(args, given, default_clients, no_standardize, options)
    for dest in ("client_column", "label_column"):
        if getattr(args, dest, None) is not None:
            raise ValueError(f"{_option(args.subparser, dest)} applies to --data FILE, not to --dataset")
    if dataset_kind(args.dataset) == "file":
        X_clients, y_clients = load_federated(args.dataset)
        if given.get("clients") == len(X_clients):
            del given["clients"]
        if given:
            raise ValueError(f"{options(given)} cannot apply to a client file: {args.dataset} holds "
                             f"{len(X_clients)} clients, used as stored (drop {options(given)}, "
                             "or name a bundled dataset to split)")
        warnings = []
        if no_standardize:
            warnings.append("--no-standardize changes nothing: a client file is used as stored (never z-scored)")
        for message in warnings:
            print(f"fastfc: warning: {message}", file=sys.stderr)
        return X_clients, y_clients, {"split": None, "split_params": {}, "standardize": False, "warnings": warnings,
                                      "source": {"dataset": args.dataset, "sha256": _file_sha256(args.dataset)}}
    split = given.get("split", _SPLIT_OPTIONS["split"][1])
    stray = [dest for dest, (applies, _) in _SPLIT_OPTIONS.items() if dest in given and applies not in (None, split)]
    if stray:
        raise ValueError("; ".join(f"{_option(args.subparser, dest)} applies only to --split {_SPLIT_OPTIONS[dest][0]}"
                                   for dest in stray) + f" (this run uses --split {split})")
    split_params = {dest: given.get(dest, default) for dest, (applies, default) in _SPLIT_OPTIONS.items()
                    if applies == split and hasattr(args, dest)}
    X_clients, y_clients = load_federated(
        args.dataset, n_clients=given.get("clients", default_clients), split=split, seed=args.seed,
        standardize=not no_standardize, split_params=split_params,
    )
    return X_clients, y_clients, {"split": split, "split_params": split_params, "standardize": not no_standardize,
                                  "warnings": []}


def _file_sha256(path: str) -> str:
    """SHA-256 (hex) of a file's bytes."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _load_table_clients(args: argparse.Namespace, given: dict[str, Any], default_clients: int, no_standardize: bool,
                        options) -> tuple[list, list | None, dict[str, Any]]:
    """``--data FILE``: the user's table, split by its client column or by a simulated split (used as stored)."""
    from .datasets import load_table, partition

    table = load_table(args.data, client_column=args.client_column, label_column=args.label_column)
    source = {"data": args.data, "sha256": _file_sha256(args.data), "client_column": table.client_column,
              "label_column": table.label_column, "feature_names": table.feature_names}
    if table.classes is not None:
        source["classes"] = table.classes.tolist()
    warnings = []
    if no_standardize:
        warnings.append("--no-standardize changes nothing: --data FILE is used as stored (never z-scored)")
    if table.client_ids is not None:
        X_clients, y_clients, ids = table.clients()
        if given.get("clients") == len(X_clients):
            del given["clients"]
        if given:
            why = "the client column" if table.client_column is not None else "the file's X0..Xk clients"
            raise ValueError(f"{options(given)} cannot apply: {args.data} is split by {why} into "
                             f"{len(X_clients)} clients (drop {options(given)}, or drop the client column to "
                             "simulate a split)")
        for message in warnings:
            print(f"fastfc: warning: {message}", file=sys.stderr)
        return X_clients, y_clients, {"split": None, "split_params": {}, "standardize": False, "warnings": warnings,
                                      "source": source, "client_names": ids}
    split = given.get("split", _SPLIT_OPTIONS["split"][1])
    stray = [dest for dest, (applies, _) in _SPLIT_OPTIONS.items() if dest in given and applies not in (None, split)]
    if stray:
        raise ValueError("; ".join(f"{_option(args.subparser, dest)} applies only to --split {_SPLIT_OPTIONS[dest][0]}"
                                   for dest in stray) + f" (this run uses --split {split})")
    split_params = {dest: given.get(dest, default) for dest, (applies, default) in _SPLIT_OPTIONS.items()
                    if applies == split and hasattr(args, dest)}
    if table.y is None and split != "iid":
        raise ValueError(f"--split {split} needs labels: give --label-column, or --client-column to use the "
                         "file's own clients")
    parts = partition(table.y, given.get("clients", default_clients), split, X=table.X, random_state=args.seed,
                      **split_params)
    for message in warnings:
        print(f"fastfc: warning: {message}", file=sys.stderr)
    y_clients = None if table.y is None else [table.y[p] for p in parts]
    return [table.X[p] for p in parts], y_clients, {"split": split, "split_params": split_params,
                                                    "standardize": False, "warnings": warnings, "source": source}


def _add_split_options(parser: argparse.ArgumentParser, default_clients: int) -> None:
    """Add ``--dataset``, ``--clients``, ``--split``, ``--alpha`` and ``--seed`` to a command.

    The split options default to None so that ``_load_clients`` can tell
    the given ones from the rest; it resolves their defaults.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    default_clients : int
        The command's number of clients when ``--clients`` is not given (for the help).
    """
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset",
                        help="bundled dataset name (see 'fastfc datasets') or a client .npz file (X0..Xk, y0..yk)")
    source.add_argument("--data", metavar="FILE",
                        help="your own table: .csv, .tsv, .npy, .npz or .parquet (see fastfc.datasets.load_table)")
    parser.add_argument("--client-column", metavar="NAME", default=None,
                        help="with --data: the column naming each row's client (string or integer ids); "
                             "without it the rows are split as --split says")
    parser.add_argument("--label-column", metavar="NAME", default=None,
                        help="with --data: a ground-truth column, scored and never clustered")
    parser.add_argument("--clients", type=int, default=None,
                        help=f"number of clients (default {default_clients}; not for a client file)")
    parser.add_argument("--split", default=None, choices=["iid", "dirichlet", "classes", "non-icd"],
                        help="how rows are split over clients (default iid; not for a client file)")
    parser.add_argument("--alpha", type=float, default=None,
                        help="Dirichlet concentration for --split dirichlet (default 0.5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split and of the method (default 0)")


def _add_n_clusters_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--n-clusters`` (a positive integer or ``auto``) to a command.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    """
    parser.add_argument("--n-clusters", type=_n_clusters_arg, default=None,
                        help="number of clusters (default: number of classes); 'auto' lets a method that can "
                             "estimate it do so (fedkstarhc)")


def _build_parser() -> argparse.ArgumentParser:
    """The ``fastfc`` parser.

    Each command sets ``subparser`` (its parser) and ``handler``: its
    ``_cmd_*`` function, called with the parsed arguments, which returns the
    exit status.

    Returns
    -------
    parser : argparse.ArgumentParser
    """
    from . import __version__
    from .experiment import METHODS

    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show the full traceback of any error")
    parser = _Parser(prog="fastfc", description="Fast one-shot federated clustering.")
    parser.add_argument("--version", action="version", version=f"fastfc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", parents=[common], help="run a method on a dataset split over clients and score it")
    run.set_defaults(handler=_cmd_run, subparser=run)
    run.add_argument("method", help=f"one of: {', '.join(sorted(METHODS))}")
    _add_split_options(run, default_clients=8)
    run.add_argument("--classes-per-client", type=int, default=None, help="for --split classes (default 2)")
    _add_n_clusters_option(run)
    run.add_argument("--n-jobs", type=int, default=None, help="threads (default 1; -1 = all cores)")
    run.add_argument("--no-standardize", action="store_true", help="do not z-score the dataset before splitting")
    run.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                     help="extra estimator parameter (repeatable)")
    run.add_argument("--protocol", choices=["client", "centroid"], default="client",
                     help="score the clients' row labels (client) or one nearest-centroid step on the complete "
                          "dataset (centroid, GOLD's centroid inheritance)")
    run.add_argument("--json", action="store_true", help="print one JSON object (also for errors) instead of a table")
    run.add_argument("--plot", metavar="FILE", default=None,
                     help="also draw the run (embeddings, clusters per client, the method's hierarchy or tree) "
                          "to FILE (.png, .pdf, .svg; needs fastfc[plot])")
    run.add_argument("--save", metavar="MODEL", default=None,
                     help="save the fitted model to this file (no pickle; load with fastfc.load or 'fastfc predict')")

    pred = sub.add_parser("predict", parents=[common], help="label the rows of a file with a saved model")
    pred.set_defaults(handler=_cmd_predict, subparser=pred)
    pred.add_argument("model", help="a model file written by 'fastfc run --save' or est.save")
    pred.add_argument("--data", metavar="FILE", required=True, help="the rows to label (as for 'fastfc run --data')")
    pred.add_argument("--client-column", metavar="NAME", default=None, help="a column to leave out of the features")
    pred.add_argument("--label-column", metavar="NAME", default=None,
                      help="a ground-truth column: left out of the features, and the labels are scored (on stderr)")
    pred.add_argument("--out", metavar="FILE", default=None,
                      help="write the labels here (.npy, or text: one per line) instead of to stdout")

    rerun = sub.add_parser("rerun", parents=[common], help="run again the run recorded in a 'fastfc run --json' file")
    rerun.set_defaults(handler=_cmd_rerun, subparser=rerun)
    rerun.add_argument("record", metavar="RUN.json", help="the JSON that 'fastfc run ... --json' printed")
    rerun.add_argument("--data", metavar="FILE", default=None,
                       help="where the run's data file is now (its SHA-256 must match the record)")
    rerun.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    rerun.add_argument("--save", metavar="MODEL", default=None, help="save the refitted model to this file")

    datasets = sub.add_parser("datasets", parents=[common], help="list the bundled datasets")
    datasets.set_defaults(handler=_cmd_datasets, subparser=datasets)

    warm = sub.add_parser("warmup", parents=[common],
                          help="compile and cache every Numba kernel now (run at install or node start)")
    warm.set_defaults(handler=_cmd_warmup, subparser=warm)
    warm.add_argument("--dtype", action="append", choices=["float64", "float32"], default=None,
                      help="input dtype to warm (repeatable; default both)")
    warm.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    warm.add_argument("--json", action="store_true", help="print one JSON object instead of a line")

    fl = sub.add_parser("flower", help="real federated runs on Flower (needs fastfc[flower])")
    flsub = fl.add_subparsers(dest="flower_command", required=True)
    app = flsub.add_parser("app", parents=[common],
                           help="write the Flower app project (pyproject.toml) into a directory")
    app.set_defaults(handler=_cmd_flower_app, subparser=app)
    app.add_argument("directory")
    app.add_argument("--clients", type=int, default=3, help="expected SuperNodes (num-clients, default 3)")
    app.add_argument("--min-clients", type=int, default=None, help="fewest responders to finish (default: all)")
    loc = flsub.add_parser("local", parents=[common],
                           help="run a method over N SuperNodes started on 127.0.0.1, one per client")
    loc.set_defaults(handler=_cmd_flower_local, subparser=loc)
    loc.add_argument("method", help=f"one of: {', '.join(sorted(METHODS))}")
    _add_split_options(loc, default_clients=3)
    _add_n_clusters_option(loc)
    loc.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    loc.add_argument("--workdir", default=None, help="where data, labels, logs and Flower state go (default: a new temp dir)")
    loc.add_argument("--port", type=int, default=29500, help="SuperLink port; SuperNodes use the next N (default 29500)")
    loc.add_argument("--check", action="store_true", help="also fit in-process and check every client's labels are identical")
    return parser


def _param_text(value: Any) -> str:
    """``value`` as ``--param KEY=VALUE`` reads it back (``none``, ``true``, ``false``, numbers, text).

    Parameters
    ----------
    value : object

    Returns
    -------
    text : str
    """
    if value is None or isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _run_argv(args: argparse.Namespace, params: dict[str, Any]) -> list[str]:
    """The ``fastfc run`` arguments that repeat this run (no output options).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``run`` arguments.
    params : dict
        The ``--param`` items, parsed.

    Returns
    -------
    argv : list of str
    """
    argv = [args.method]
    argv += ["--dataset", args.dataset] if args.dataset is not None else ["--data", args.data]
    for dest in ("client_column", "label_column", "clients", "split", "alpha", "classes_per_client", "n_clusters",
                 "n_jobs"):
        value = getattr(args, dest, None)
        if value is not None:
            argv += [_option(args.subparser, dest), str(value)]
    if args.no_standardize:
        argv.append("--no-standardize")
    for key, value in params.items():
        argv += ["--param", f"{key}={_param_text(value)}"]
    return argv + ["--protocol", args.protocol, "--seed", str(args.seed)]


def _fit_and_report(args: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    """Fit as ``fastfc run`` says and build its report (the JSON of ``--json``): (report, fitted estimator)."""
    import shlex

    from .experiment import run_method

    params = _estimator_params(args)
    if args.plot:  # before the fit: a missing matplotlib or output directory is reported at once
        from .plotting import _require

        _require()
        if not os.path.isdir(os.path.dirname(os.path.abspath(args.plot))):
            raise FileNotFoundError(f"--plot {args.plot}: no directory {os.path.dirname(os.path.abspath(args.plot))}")
    X_clients, y_clients, data = _load_clients(args, default_clients=8)
    progress = _Progress(sys.stderr, bars=sys.stderr.isatty() and not args.json)
    client_names = data.pop("client_names", None)
    if args.n_clusters is None and y_clients is None:
        raise ValueError("--n-clusters is required for data without labels (or name a --label-column)")
    res = run_method(
        args.method, X_clients, y_clients, params=params, progress=progress, protocol=args.protocol,
        client_names=client_names, **{param: getattr(args, dest) for param, dest in _OWN_OPTIONS.items()},
    )
    est = res.pop("estimator")
    if args.plot:
        from .plotting import plot_run

        plot_run(est, X_clients, path=args.plot)
        res["plot"] = args.plot
        if not args.json:
            print(f"fastfc: wrote {args.plot}", file=sys.stderr)
    argv = _run_argv(args, params)
    res.update(dataset=args.dataset if args.dataset is not None else args.data, seed=args.seed, **data)
    res["run"] = {"argv": argv, "command": "fastfc run " + shlex.join(argv)}
    if not res["warnings"]:
        del res["warnings"]
    return res, est


#: per-client rows shown in the table (all are in --json)
_TABLE_CLIENTS = 50


def _print_report(res: dict[str, Any]) -> None:
    """The table ``fastfc run`` prints: header line, scores, timings, wire bytes, parameters, clients."""
    split = "from the file" if res["split"] is None else res["split"]
    print(f"{res['method']} on {res['dataset']}: {res['n_samples']} rows x {res['n_features']} features, "
          f"{res['n_clients']} clients ({split}), {res['n_clusters']} clusters, seed {res['seed']}, "
          f"{res['n_restarts']} restart(s)")
    comm = res["communication"]
    wire = {f"round {r}": f"{u:,} / {d:,}" for r, (u, d) in enumerate(zip(comm["bytes_up"], comm["bytes_down"]))}
    n = max(res["n_clients"], 1)
    wire["per client (mean)"] = f"{sum(comm['bytes_up']) // n:,} / {sum(comm['bytes_down']) // n:,}"
    for title, rows, fmt in (("metric", res["metrics"], ".4f"), ("phase", res["timings"], ".4f"),
                             ("bytes up / down", wire, ""), ("parameter", res["params"], "")):
        print()
        head = {"phase": "seconds", "bytes up / down": "all clients"}.get(title, "value")
        print(f"{title:<24}{head:>12}")
        for key, value in rows.items():
            print(f"{key:<24}{format(value, fmt) if fmt else _param_text(value):>12}")
    clients = res["clients"]
    scored = bool(clients) and "purity" in clients[0]
    print()
    print(f"{'client':<16}{'rows':>8}{'uploaded':>10}{'bytes up':>12}{'bytes down':>12}{'seconds':>10}"
          + (f"{'purity':>8}{'ari':>8}" if scored else ""))
    for c in clients[:_TABLE_CLIENTS]:
        up = "-" if c["local_clusters"] is None else c["local_clusters"]
        secs = "-" if c["seconds"] is None else f"{c['seconds']:.4f}"
        line = f"{str(c['client'])[:15]:<16}{c['rows']:>8}{up:>10}{c['bytes_up']:>12,}{c['bytes_down']:>12,}{secs:>10}"
        if scored:
            line += f"{c['purity']:>8.4f}{c['ari']:>8.4f}"
        print(line)
    if len(clients) > _TABLE_CLIENTS:
        print(f"... {len(clients) - _TABLE_CLIENTS} more clients (all are in --json)")
    print()
    print(f"reproduce: {res['run']['command']}")
    if "saved_model" in res:
        print(f"saved the model to {res['saved_model']} (fastfc predict {res['saved_model']} --data FILE)")


def _cmd_run(args: argparse.Namespace) -> int:
    """``fastfc run``: fit a method on clients, print the scores, timings, restarts, parameters and clients."""
    res, est = _fit_and_report(args)
    if args.save is not None:
        est.save(args.save)
        res["saved_model"] = args.save
    if args.json:
        print(json.dumps(res, sort_keys=True))
    else:
        _print_report(res)
    return 0


def _cmd_rerun(args: argparse.Namespace) -> int:
    """``fastfc rerun RUN.json``: repeat a recorded run and check its labels are identical."""
    with open(args.record, encoding="utf-8") as fh:
        try:
            record = json.load(fh)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, a too-long integer
            raise ValueError(f"{args.record} is not a JSON run record: {type(exc).__name__}: {exc}") from None
    run = record.get("run") if isinstance(record, dict) else None
    argv = run.get("argv") if isinstance(run, dict) else None
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"{args.record} holds no run to repeat (no run.argv): give the JSON of 'fastfc run --json'")
    argv = list(argv)
    source = record.get("source") or {}
    if args.data is not None:
        if "--data" not in argv:
            raise ValueError(f"--data FILE: the recorded run used --dataset, not a data file")
        argv[argv.index("--data") + 1] = args.data
    run_args = _build_parser().parse_args(["run", *argv, *(["--json"] if args.json else [])])
    path = run_args.data if run_args.data is not None else run_args.dataset
    if isinstance(source, dict) and isinstance(source.get("sha256"), str):
        digest = _file_sha256(path)
        if digest != source["sha256"]:
            raise _CommandError(f"{path} is not the file of the recorded run (SHA-256 {digest[:12]}..., "
                                f"recorded {source['sha256'][:12]}...)")
    run_args.save = args.save
    res, est = _fit_and_report(run_args)
    if args.save is not None:
        est.save(args.save)
        res["saved_model"] = args.save
    recorded = record.get("labels_sha256")
    res["reproduces"] = {"record": args.record, "labels_sha256": recorded,
                         "identical_labels": recorded == res["labels_sha256"]}
    if args.json:
        print(json.dumps(res, sort_keys=True))
    else:
        _print_report(res)
        print(f"rerun of {args.record}: labels {'identical' if recorded == res['labels_sha256'] else 'DIFFER'}")
    if recorded != res["labels_sha256"]:
        raise _CommandError(f"the rerun's labels differ from those recorded in {args.record} "
                            f"(SHA-256 {res['labels_sha256'][:12]}... vs {str(recorded)[:12]}...)")
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    """``fastfc predict MODEL --data FILE``: label the rows with a saved model (stdout or --out)."""
    import numpy as np

    from .datasets import load_table
    from .saving import load

    est = load(args.model)
    if not hasattr(est, "cluster_centers_"):
        raise ValueError(f"{args.model} holds a {type(est).__name__} model, which keeps no global centres to "
                         "label new rows with")
    table = load_table(args.data, client_column=args.client_column, label_column=args.label_column)
    if table.X.shape[1] != est.n_features_in_:
        raise ValueError(f"{args.data} has {table.X.shape[1]} feature columns ({', '.join(table.feature_names)}), "
                         f"the model was fitted on {est.n_features_in_}")
    labels = est.predict(table.X)
    if table.y is not None:
        from .metrics import evaluate

        scores = evaluate(table.y, labels)
        print("fastfc predict: " + ", ".join(f"{k} {v:.4f}" for k, v in scores.items()), file=sys.stderr)
    if args.out is None:
        sys.stdout.write("".join(f"{v}\n" for v in labels.tolist()))
    elif args.out.lower().endswith(".npy"):
        np.save(args.out, labels)
    else:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write("".join(f"{v}\n" for v in labels.tolist()))
    return 0


def _cmd_datasets(args: argparse.Namespace) -> int:
    """``fastfc datasets``: list the bundled datasets."""
    from .datasets import dataset_info, list_datasets

    print(f"{'name':<18}{'samples':>9}{'features':>10}{'classes':>9}  source")
    for name in list_datasets():
        info = dataset_info(name)
        print(f"{name:<18}{info['n_samples']:>9}{info['n_features']:>10}{info['n_classes']:>9}  {info['source']}")
    return 0


def _cmd_warmup(args: argparse.Namespace) -> int:
    """``fastfc warmup``: compile and cache every Numba kernel, print where the cache is."""
    from .warmup import warmup

    info = warmup(tuple(args.dtype or ("float64", "float32")), stream=None if args.quiet else sys.stderr)
    if args.json:
        print(json.dumps(info))
    else:
        print(f"fastfc warmup: {info['fits']} fits in {info['seconds']:.1f} s, {info['compiled']} kernel "
              f"specialisations compiled, {info['loaded']} loaded from the cache; cache: "
              f"{', '.join(info['cache_dirs']) or 'none (FASTFC_NUMBA_CACHE=0?)'}")
    if info["unwarmed"]:
        print(f"fastfc warmup: not compiled (a first fit that reaches them compiles them): "
              f"{', '.join(info['unwarmed'])}", file=sys.stderr)
    return 0


def _cmd_flower_app(args: argparse.Namespace) -> int:
    """``fastfc flower app``: write the Flower app project."""
    from .flower import write_app_project

    path = write_app_project(args.directory, n_clients=args.clients, min_clients=args.min_clients)
    print(f"wrote {path / 'pyproject.toml'}; run it with: flwr run {path} <federation>")
    return 0


def _cmd_flower_local(args: argparse.Namespace) -> int:
    """``fastfc flower local``: run a method over local SuperNodes, print the report as JSON."""
    import tempfile

    import numpy as np

    from .flower import LocalFederation, write_app_project
    from .metrics import evaluate

    extra = _estimator_params(args)
    X_clients, y_clients, _ = _load_clients(args, default_clients=3)
    k = args.n_clusters
    if k is None and y_clients is not None:
        k = len({int(v) for y in y_clients for v in y})
    if k is None:
        raise ValueError("--n-clusters is required for data without labels")
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
        raise _CommandError(f"the Flower run ended {status}: {details}")
    with open(report) as fh:
        res = json.load(fh)
    got = [lab for lab in labels if lab is not None]
    if y_clients is not None and len(got) == len(y_clients):
        res["metrics"] = {k: round(float(v), 4) for k, v in evaluate(np.concatenate(y_clients),
                                                                     np.concatenate(got)).items()}
    if args.check:
        from .experiment import make_estimator

        ref = make_estimator(args.method, random_state=args.seed, **params).fit_clients(X_clients)
        same = all(lab is not None and np.array_equal(lab, r) for lab, r in zip(labels, ref.client_labels_))
        res["identical_to_fit_clients"] = bool(same)
        if not same:
            print(json.dumps(res, indent=1))
            raise RuntimeError("labels from the Flower run differ from the in-process fit_clients")
    print(json.dumps(res, indent=1))
    return 0


def _own_error_types() -> tuple[type[BaseException], ...]:
    """The loaded classes of :data:`_OWN_ERRORS`."""
    modules = (sys.modules.get(module) for module, _ in _OWN_ERRORS)
    return tuple(getattr(m, name) for m, (_, name) in zip(modules, _OWN_ERRORS) if m is not None)


def _raised_by_fastfc_statement(tb) -> bool:
    """Whether the traceback entry ``tb`` is a ``raise`` statement in fastfc's Python code.

    Read from the bytecode (the instruction that raised), not the source: a
    builtin or numpy call on a fastfc line raises from a call instruction, and
    compiled kernels (Cython, Numba) have no fastfc ``.py`` frame at all.
    """
    code = tb.tb_frame.f_code
    filename = os.path.abspath(code.co_filename)
    if not (filename.startswith(_PACKAGE_DIR + os.sep) and filename.endswith(".py")):
        return False
    return 0 <= tb.tb_lasti < len(code.co_code) and code.co_code[tb.tb_lasti] == _RAISE_OPCODE


def _is_user_error(exc: BaseException) -> bool:
    """Whether ``exc`` is an expected user error (one line) rather than a bug (traceback).

    User errors are:

    - bad arguments, a command's own explained failure, missing or unreadable files;
    - fastfc's own error types (:data:`_OWN_ERRORS`: ``MessageError``, ``ModelFileError``,
      ``StateError``, ``TableError``) and scikit-learn's ``InvalidParameterError`` (a
      ``--param`` value outside the estimator's constraints), raised only to reject input;
    - a ``ValueError``, ``TypeError`` or ``ImportError`` raised by a ``raise`` statement
      in fastfc's Python code (its checks, a missing optional dependency), or raised
      within fastfc's input validation (:mod:`fastfc._validation`), whose calls into
      scikit-learn's validators (NaN, infinity, shape) judge the input.

    The same types raised elsewhere (numpy inside fastfc or a kernel, a wrong call)
    are bugs, and so is everything else.

    Parameters
    ----------
    exc : BaseException

    Returns
    -------
    bool
    """
    if isinstance(exc, (_UsageError, _CommandError, *_FILE_ERRORS, *_own_error_types())):
        return True
    if not isinstance(exc, _CHECK_ERRORS) or exc.__traceback__ is None:
        return False
    tb = exc.__traceback__
    while True:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == _VALIDATION_FILE:
            return True
        if tb.tb_next is None:
            return _raised_by_fastfc_statement(tb)
        tb = tb.tb_next


def _report_error(exc: BaseException, *, status: int, as_json: bool, debug: bool) -> int:
    """Report ``exc`` on stderr (one line, or a traceback for a bug or with ``--debug``) and as JSON on stdout.

    Parameters
    ----------
    exc : BaseException
    status : int
        The exit status to return.
    as_json : bool
        Also print ``{"error": {"type", "message"[, "traceback"]}}`` on stdout
        (then the one-line message is not repeated on stderr).
    debug : bool
        Show the traceback even for a user error.

    Returns
    -------
    status : int
    """
    user = isinstance(exc, KeyboardInterrupt) or _is_user_error(exc)
    kind = "UsageError" if isinstance(exc, _UsageError) else type(exc).__name__
    message = str(exc).strip() or kind
    if isinstance(exc, KeyError):  # str() of a KeyError is the repr of the key
        message = f"KeyError: {message}"
    trace = "".join(traceback.format_exception(exc)) if debug or not user else None
    if trace:
        sys.stderr.write(trace)
    if not user:
        print("fastfc: internal error: this is a bug in fastfc, not in the input; please report it with the "
              "traceback above", file=sys.stderr)
    elif not as_json:
        print(f"fastfc: error: {message}", file=sys.stderr)
    if as_json:
        error = {"type": kind, "message": message, "user_error": user}
        if trace:
            error["traceback"] = trace
        print(json.dumps({"error": error, "exit_status": status}, sort_keys=True))
    return status


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A library warning during a command: ``fastfc: warning: Category: message`` on stderr.

    Without a source location: fastfc attributes its warnings to the caller's
    code (:mod:`fastfc._warnings`), and a command-line user wrote none.
    """
    print(f"fastfc: warning: {category.__name__}: {message}", file=sys.stderr if file is None else file)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fastfc`` command.

    Parameters
    ----------
    argv : list of str, default=None
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    status : int
        0 on success, 2 for a user error, 1 for a bug (with its traceback)
        or when stdout's reader went away, 130 when interrupted.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _build_parser()
    as_json, debug = "--json" in argv, "--debug" in argv
    try:
        args = parser.parse_args(argv)
        as_json, debug = getattr(args, "json", False), args.debug
        with pywarnings.catch_warnings():
            pywarnings.showwarning = _show_warning
            return args.handler(args)
    except _UsageError as exc:
        if not as_json:
            argparse.ArgumentParser.error(exc.parser, str(exc))  # usage and message on stderr, exit 2
        return _report_error(exc, status=2, as_json=True, debug=False)
    except KeyboardInterrupt as exc:
        return _report_error(exc, status=130, as_json=as_json, debug=debug)
    except BrokenPipeError:  # the reader stopped reading (fastfc datasets | head): neither a bug nor worth a message
        try:  # keep the interpreter's final flush of stdout from failing again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except Exception as exc:
        return _report_error(exc, status=2 if _is_user_error(exc) else 1, as_json=as_json, debug=debug)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
