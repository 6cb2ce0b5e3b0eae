"""The command line: output, JSON, and one-line errors with a non-zero exit."""
import json
import subprocess
import sys

import numpy as np
import pytest

from fastfc.cli import main


def test_datasets_lists_bundled(capsys):
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    for name in ("pendigits", "letter", "iris", "digits"):
        assert name in out


def test_run_json(capsys):
    assert main(["run", "kfed", "--dataset", "iris", "--clients", "3", "--seed", "1", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n_clients"] == 3 and res["n_samples"] == 150 and res["n_clusters"] == 3
    assert set(res["metrics"]) == {"purity", "acc", "ari", "nmi"}
    assert 0.5 < res["metrics"]["purity"] <= 1.0
    assert set(res["timings"]) == {"client", "server", "assign", "total"}


def test_run_table_and_params(capsys):
    code = main(["run", "kfed", "--dataset", "wine", "--clients", "4", "--split", "dirichlet", "--alpha", "0.5",
                 "--param", "assign=nearest", "--param", "server_max_iter=none"])
    assert code == 0
    out = capsys.readouterr().out
    assert "ari" in out and "server" in out and "4 clients (dirichlet)" in out


def test_run_on_client_file(tmp_path, capsys):
    from fastfc.datasets import save_client_npz

    rng = np.random.default_rng(0)
    Xs = [rng.normal(size=(20, 3)) + 4 * i for i in range(3)]
    ys = [np.full(20, i) for i in range(3)]
    path = tmp_path / "clients.npz"
    save_client_npz(str(path), Xs, ys)
    assert main(["run", "kfed", "--dataset", str(path), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n_clients"] == 3 and res["metrics"]["ari"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["run", "nosuch", "--dataset", "iris"], "unknown method 'nosuch'"),
        (["run", "kfed", "--dataset", "nosuch"], "nosuch"),
        (["run", "kfed", "--dataset", "iris", "--param", "bogus=1"], "no parameter"),
        (["run", "kfed", "--dataset", "iris", "--param", "noequals"], "KEY=VALUE"),
        (["run", "kfed", "--dataset", "missing/file.npz"], "does not exist"),
        (["run", "kfed", "--dataset", "iris", "--n-clusters", "1000"], "larger than the number of samples"),
    ],
)
def test_errors_are_one_line(argv, match, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fastfc: error:") and "\n" not in err and "Traceback" not in err
    assert match in err


def test_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "fastfc", "run", "kfed", "--dataset", "iris", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["method"] == "kfed"


def test_run_fedhire_centroid_protocol(capsys):
    assert main(["run", "fedhire", "--dataset", "iris", "--clients", "3", "--protocol", "centroid", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["protocol"] == "centroid" and res["method"] == "fedhire"
    assert {"silhouette", "calinski_harabasz", "ari"} <= set(res["metrics"])
    assert -1.0 <= res["metrics"]["silhouette"] <= 1.0


def test_run_auto_n_clusters_reports_the_estimated_k(capsys):
    """--n-clusters auto: Fed-k*-HC estimates k* and the result reports the k it found."""
    from fastfc import FedKStarHC
    from fastfc.experiment import load_federated

    assert main(["run", "fedkstarhc", "--dataset", "iris", "--clients", "3", "--n-clusters", "auto",
                 "--param", "micro=kmeans", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    X_clients, _ = load_federated("iris", n_clients=3, seed=0)
    direct = FedKStarHC(n_clusters=None, micro="kmeans", random_state=0).fit_clients(X_clients)
    assert res["n_clusters"] == direct.n_clusters_


@pytest.mark.parametrize("argv, message", [
    (["run", "fedkstarhc", "--dataset", "iris", "--param", "n_clusters=3"], "--n-clusters"),
    (["run", "kfed", "--dataset", "iris", "--n-clusters", "auto"], "n_clusters"),
])
def test_run_n_clusters_errors_are_clear(argv, message, capsys):
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert message in err and "multiple values" not in err


@pytest.mark.parametrize("value", ["0", "two"])
def test_run_rejects_bad_n_clusters(value, capsys):
    with pytest.raises(SystemExit):
        main(["run", "kfed", "--dataset", "iris", "--n-clusters", value])
    assert "positive integer or 'auto'" in capsys.readouterr().err


# ---------------------------------------------------------------- issue 11: CLI and progress

def _client_file(tmp_path, n_clients: int = 3) -> str:
    """A tiny client file: ``n_clients`` well separated blobs of 20 rows, one per client, labelled."""
    from fastfc.datasets import save_client_npz

    rng = np.random.default_rng(0)
    path = str(tmp_path / "clients.npz")
    save_client_npz(path, [rng.normal(size=(20, 3)) + 4 * i for i in range(n_clients)],
                    [np.full(20, i) for i in range(n_clients)])
    return path


@pytest.mark.parametrize("key, option", [("random_state", "--seed"), ("n_jobs", "--n-jobs"),
                                         ("n_clusters", "--n-clusters")])
def test_param_hint_names_an_option_the_parser_accepts(key, option, capsys):
    """--param for a parameter with its own option names that option as the parser spells it, with the value."""
    from fastfc.cli import _build_parser

    assert main(["run", "kfed", "--dataset", "iris", "--param", f"{key}=2"]) == 2
    err = capsys.readouterr().err
    assert f"use {option} 2 instead of --param {key}=2" in err and "--random-state" not in err
    args = _build_parser().parse_args(["run", "kfed", "--dataset", "iris", option, "2"])  # a real option
    assert getattr(args, {"random_state": "seed"}.get(key, key)) == 2


def test_unknown_dataset_lists_names_and_file_kinds(capsys):
    """An unknown --dataset (data.csv) says which names and file kinds are accepted, and that .csv is not read."""
    from fastfc.datasets import list_datasets

    assert main(["run", "kfed", "--dataset", "data.csv"]) == 2
    err = capsys.readouterr().err
    assert "unknown dataset 'data.csv'" in err and ".csv files are not read" in err
    assert all(name in err for name in list_datasets()) and ".npz" in err and "X0..Xk" in err


@pytest.mark.parametrize("extra, named", [
    (["--clients", "5"], "--clients"),
    (["--split", "dirichlet", "--alpha", "0.3"], "--split, --alpha"),
    (["--classes-per-client", "1"], "--classes-per-client"),
])
def test_split_options_with_a_client_file_are_refused(extra, named, tmp_path, capsys):
    """With a client file, --clients (other than the file's count), --split and its options are refused by name."""
    assert main(["run", "kfed", "--dataset", _client_file(tmp_path), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"fastfc: error: {named} cannot apply to a client file") and "holds 3 clients" in err


def test_client_file_with_matching_clients_and_no_standardize_warns(tmp_path, capsys):
    """--clients equal to the file's count is accepted; --no-standardize is a no-op on a client file and says so."""
    assert main(["run", "kfed", "--dataset", _client_file(tmp_path), "--clients", "3", "--no-standardize",
                 "--json"]) == 0
    captured = capsys.readouterr()
    assert "fastfc: warning: --no-standardize changes nothing" in captured.err
    res = json.loads(captured.out)
    assert res["split"] is None and res["standardize"] is False and res["n_clients"] == 3
    assert res["warnings"] == ["--no-standardize changes nothing: a client file is used as stored (never z-scored)"]


def test_split_option_for_another_split_is_refused(capsys):
    """--alpha without --split dirichlet is refused, not silently ignored."""
    assert main(["run", "kfed", "--dataset", "iris", "--alpha", "0.3"]) == 2
    assert "--alpha applies only to --split dirichlet (this run uses --split iid)" in capsys.readouterr().err


def _bug(*args, **kwargs):
    """A library bug: numpy raises a ValueError inside fastfc code (not one of fastfc's checks)."""
    from fastfc.experiment import complete_dataset

    return complete_dataset([np.zeros((2, 2)), np.zeros((2, 3))])


@pytest.mark.parametrize("argv, status, kind, user", [
    (["run", "kfed", "--dataset", "data.csv"], 2, "ValueError", True),
    (["run", "kfed", "--dataset", "iris", "--n-clusters", "two"], 2, "UsageError", True),
    (["run", "kfed", "--dataset", "iris", "--clients", "3"], 1, "ValueError", False),
])
def test_json_errors_are_json(argv, status, kind, user, monkeypatch, capsys):
    """With --json every error (user error, bad argument, bug) is one JSON object on stdout with type and message."""
    monkeypatch.setattr("fastfc.experiment.run_method", _bug)
    assert main([*argv, "--json"]) == status
    out = json.loads(capsys.readouterr().out)
    assert out["exit_status"] == status and out["error"]["type"] == kind and out["error"]["message"]
    assert out["error"]["user_error"] is user and ("traceback" in out["error"]) is (not user)


@pytest.mark.parametrize("bug", [_bug, lambda *a, **k: {}["missing"]])
def test_library_bugs_show_a_traceback(bug, monkeypatch, capsys):
    """A library bug (numpy ValueError inside fastfc, KeyError) shows its traceback and exits 1, not a one-liner."""
    monkeypatch.setattr("fastfc.experiment.run_method", bug)
    assert main(["run", "kfed", "--dataset", "iris", "--clients", "3"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "internal error" in err and "fastfc: error:" not in err


def test_user_error_classification(monkeypatch):
    """The rule of ``_is_user_error``, both ways.

    User errors: missing files, fastfc's own error types and scikit-learn's parameter validation wherever
    raised, a check type raised by a ``raise`` statement of fastfc (read from the bytecode,
    so also without source files) or within fastfc's input validation. Bugs: the same check
    types raised by numpy on a fastfc line, by scikit-learn's validators outside fastfc's
    validation, or by a ``raise`` outside fastfc; any other type.
    """
    import linecache

    from sklearn.utils import check_array

    from fastfc import KFed
    from fastfc._validation import check_clients
    from fastfc.cli import _is_user_error
    from fastfc.experiment import make_estimator
    from fastfc.protocol import MessageError, decode_message

    def caught(fn):
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            return exc
        raise AssertionError("no exception")

    def raise_here():
        raise ValueError("a check of someone else's code")

    nan = np.array([[0.0, np.nan], [1.0, 2.0]])
    monkeypatch.setattr(linecache, "getline", lambda *a, **k: "")  # no source: the rule must not need it
    user = {
        "MessageError raised by fastfc": caught(lambda: decode_message(b"not a message")),
        "MessageError raised elsewhere": MessageError("own type, whoever raised it"),
        "invalid parameter": caught(lambda: KFed(n_clusters=3, units="bogus").fit(nan[1:].repeat(5, 0))),
        "fastfc raise statement": caught(lambda: make_estimator("nosuch")),
        "validation's sklearn verdict": caught(lambda: check_clients([nan])),
        "missing file": caught(lambda: open("/nonexistent/fastfc-test")),
    }
    bugs = {
        "numpy on a fastfc line": caught(_bug),
        "sklearn validator outside fastfc": caught(lambda: check_array(nan)),
        "raise outside fastfc": caught(raise_here),
        "builtin outside fastfc": caught(lambda: int("x")),
        "KeyError": caught(lambda: {}["k"]),
        "NotFittedError (the CLI never predicts unfitted)": caught(lambda: KFed(n_clusters=3).predict(nan)),
    }
    assert isinstance(user["MessageError raised by fastfc"], MessageError)
    assert {k: _is_user_error(e) for k, e in user.items()} == dict.fromkeys(user, True)
    assert {k: _is_user_error(e) for k, e in bugs.items()} == dict.fromkeys(bugs, False)


def test_library_warning_is_one_line_without_a_location(tmp_path, capsys):
    """A warning of the fit during a command is one ``fastfc: warning:`` line, not ``<frozen runpy>:88: ...``."""
    X = np.tile([1.0, 2.0], (40, 1))
    path = tmp_path / "identical.npz"
    np.savez(path, X0=X[:20], X1=X[20:], y0=np.zeros(20, int), y1=np.zeros(20, int))
    assert main(["run", "fedhire", "--dataset", str(path), "--n-clusters", "2"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "Warning" in line]
    assert lines == ["fastfc: warning: DegenerateFederationWarning: all rows of all clients are identical: returning 1 "
                     "cluster(s) instead of n_clusters=2 (no clustering structure to split further)"]


@pytest.mark.parametrize("argv", [
    ["run", "kfed", "--dataset", "iris", "--param", "local_n_init=-1"],  # scikit-learn's parameter validation
    ["run", "kfed", "--dataset", "NAN_CLIENTS", "--n-clusters", "2"],  # NaN rejected by fastfc's validation
])
def test_rejected_input_is_a_one_line_user_error(argv, tmp_path, capsys):
    """Input rejected by a validator fastfc calls is the user's error: one line, exit 2, no traceback."""
    X = np.random.default_rng(0).normal(size=(20, 2))
    X[3, 1] = np.nan
    path = tmp_path / "nan_clients.npz"
    np.savez(path, X0=X[:10], X1=X[10:], y0=np.zeros(10, int), y1=np.zeros(10, int))
    assert main([str(path) if a == "NAN_CLIENTS" else a for a in argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("fastfc: error: ")


def test_debug_shows_the_traceback_of_a_user_error(capsys):
    """--debug shows the full traceback even for a user error (and still the one-line message)."""
    assert main(["run", "kfed", "--dataset", "iris", "--param", "bogus=1", "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "make_estimator" in err
    assert err.strip().splitlines()[-1].startswith("fastfc: error: KFed has no parameter(s) bogus")


def _screen(text: str) -> list[str]:
    """The lines a terminal shows for ``text`` (each ``\\r`` returns to the start of the line)."""
    return [line.rsplit("\r", 1)[-1] for line in text.split("\n")]


def test_progress_shows_server_phase_and_restarts():
    """The progress display shows the server phase, says why a run restarts, and draws unknown phases as bars."""
    import io

    from fastfc.cli import _Progress

    events = [("summarize", 1, 2), ("summarize", 2, 2), ("server", 0, 1), ("restart", 1, 3),
              ("summarize", 1, 2), ("summarize", 2, 2), ("server", 0, 1), ("server", 1, 1),
              ("assign", 1, 2), ("assign", 2, 2), ("refine", 1, 4)]
    stream = io.StringIO()
    progress = _Progress(stream, bars=True)
    for event in events:
        progress(*event)
    bar = "#" * 30
    assert _screen(stream.getvalue()) == [
        f"summarize [{bar}] 2/2 clients",
        "   server running ... failed",
        "restart 1/3: server phase failed, rerunning with fresh randomness",
        f"summarize [{bar}] 2/2 clients",
        "   server running ... done",
        f"   assign [{bar}] 2/2 clients",
        f"   refine [{'#' * 7}{'.' * 23}] 1/4",
    ]
    quiet = io.StringIO()
    progress = _Progress(quiet, bars=False)
    for event in events:
        progress(*event)
    assert quiet.getvalue() == "restart 1/3: server phase failed, rerunning with fresh randomness\n"


class _RestartingEstimator:
    """A fake estimator whose fit restarts once and reports it through ``progress`` (the base-class contract)."""

    def __init__(self, **params):
        self.params = params

    def get_params(self, deep: bool = True) -> dict:
        return dict(self.params)

    def fit_clients(self, X_clients, *, progress=None):
        n = len(X_clients)
        for restart in range(2):
            if restart:
                progress("restart", restart, 3)
            for i in range(n):
                progress("summarize", i + 1, n)
            progress("server", 0, 1)
        progress("server", 1, 1)
        for i in range(n):
            progress("assign", i + 1, n)
        self.client_labels_ = [np.zeros(len(x), dtype=np.int32) for x in X_clients]
        self.labels_ = np.concatenate(self.client_labels_)
        self.client_summaries_ = [None] * n
        self.n_clusters_, self.n_restarts_, self.n_rounds_ = 1, 1, 1
        self.bytes_up_ = self.bytes_down_ = np.full((1, n), 100, dtype=np.int64)
        self.timings_ = {"client": 0.0, "server": 0.0, "assign": 0.0, "total": 0.0}
        return self


def test_run_reports_restarts(monkeypatch, capsys):
    """A fit that restarts prints the restart on stderr (even with --json) and reports n_restarts."""
    monkeypatch.setattr("fastfc.experiment.make_estimator", lambda method, **params: _RestartingEstimator(**params))
    assert main(["run", "kfed", "--dataset", "iris", "--clients", "3", "--json"]) == 0
    captured = capsys.readouterr()
    assert "restart 1/3: server phase failed, rerunning with fresh randomness" in captured.err
    assert json.loads(captured.out)["n_restarts"] == 1


def test_output_reproduces_the_run(capsys):
    """The JSON output (params from get_params, split, seed) rebuilds the same fit; the table shows them too."""
    from fastfc.experiment import load_federated, make_estimator
    from fastfc.metrics import evaluate

    argv = ["run", "kfed", "--dataset", "wine", "--clients", "4", "--split", "dirichlet", "--alpha", "0.7",
            "--seed", "3", "--param", "assign=nearest"]
    assert main([*argv, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n_restarts"] == 0 and res["params"]["assign"] == "nearest" and res["params"]["random_state"] == 3
    X_clients, y_clients = load_federated(res["dataset"], n_clients=res["n_clients"], split=res["split"],
                                          seed=res["seed"], standardize=res["standardize"],
                                          split_params=res["split_params"])
    est = make_estimator(res["method"], **res["params"]).fit_clients(X_clients)
    assert evaluate(np.concatenate(y_clients), est.labels_) == pytest.approx(res["metrics"])
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "0 restart(s)" in table
    assert any(line.split() == ["assign", "nearest"] for line in table.splitlines())
    assert any(line.split() == ["random_state", "3"] for line in table.splitlines())


def test_closed_stdout_is_not_reported_as_a_bug(monkeypatch, capsys):
    """When stdout's reader goes away (fastfc datasets | head), fastfc exits 1 without a traceback or message."""
    def closed(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("fastfc.cli._cmd_datasets", closed)
    assert main(["datasets"]) == 1
    assert capsys.readouterr().err == ""


def test_run_reports_rounds_and_bytes(capsys):
    """--json reports the protocol rounds and the wire bytes per round and per client; the table shows them."""
    assert main(["run", "kfed", "--dataset", "iris", "--clients", "3", "--param", "refine_rounds=2", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    comm = res["communication"]
    assert 2 <= comm["rounds"] <= 3  # round 0, then up to 2 refinement rounds (early stop allowed)
    assert len(comm["bytes_up"]) == len(comm["bytes_down"]) == comm["rounds"]
    assert len(comm["bytes_up_per_client"]) == 3
    assert sum(comm["bytes_up"]) == sum(comm["bytes_up_per_client"]) > 0
    assert main(["run", "fedkmeans", "--dataset", "iris", "--clients", "3"]) == 0
    out = capsys.readouterr().out
    assert "bytes up / down" in out and "round 1" in out


def test_run_fedcref_takes_the_label_count_as_each_clients_k(tmp_path, capsys):
    """FedCRef has no global n_clusters: `fastfc run fedcref` passes it as n_local_clusters (unless given)."""
    rng = np.random.default_rng(0)
    rows = ["site,a,b,kind"]
    for i in range(120):
        kind = i % 3
        a, b = np.clip(rng.normal([0.2, 0.5, 0.8][kind], 0.05, 2), 0, 1)
        rows.append(f"s{i % 2},{a:.4f},{b:.4f},{kind}")
    path = tmp_path / "t.csv"
    path.write_text("\n".join(rows) + "\n")
    base = ["run", "fedcref", "--data", str(path), "--client-column", "site", "--label-column", "kind", "--json",
            "--param", "fl_rounds=1", "--param", "local_epochs=2"]
    assert main(base) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["params"]["n_local_clusters"] == 3 and res["n_clients"] == 2
    assert main(base + ["--param", "n_local_clusters=2"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["n_local_clusters"] == 2
