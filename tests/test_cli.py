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
