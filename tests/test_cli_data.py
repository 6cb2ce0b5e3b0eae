"""The command line on users' own data: run --data / --client-column / --label-column, --save, predict, the
per-client report, and rerun from a run's JSON (identical labels)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import fastfc
from fastfc.cli import main
from fastfc.datasets import load_dataset, load_table
from fastfc.experiment import labels_digest

SPECIES = np.array(["setosa", "versicolor", "virginica"])


@pytest.fixture(scope="module")
def iris_csv(tmp_path_factory):
    """Iris with a string client column (3 sites of uneven size) and a string label column."""
    X, y = load_dataset("iris")
    sites = np.array(["north", "south", "east"])[np.random.default_rng(0).integers(0, 3, len(y))]
    path = tmp_path_factory.mktemp("data") / "iris.csv"
    with open(path, "w") as fh:
        fh.write("site,sepal_length,sepal_width,petal_length,petal_width,species\n")
        for s, row, c in zip(sites, X, y):
            fh.write(f"{s}," + ",".join(repr(float(v)) for v in row) + f",{SPECIES[c]}\n")
    return path, sites, y


@pytest.fixture(scope="module")
def iris_tsv(tmp_path_factory):
    """Iris without a client column, tab-separated, labels last."""
    X, y = load_dataset("iris")
    path = tmp_path_factory.mktemp("data") / "iris.tsv"
    with open(path, "w") as fh:
        fh.write("sepal_length\tsepal_width\tpetal_length\tpetal_width\tspecies\n")
        for row, c in zip(X, y):
            fh.write("\t".join(repr(float(v)) for v in row) + f"\t{SPECIES[c]}\n")
    return path


def _json_run(capsys, argv) -> dict:
    assert main([*argv, "--json"]) == 0, capsys.readouterr()
    return json.loads(capsys.readouterr().out)


def test_run_on_csv_with_client_and_label_columns(iris_csv, capsys):
    """Clients come from the column (sorted ids), the label column is scored and never a feature, and the
    JSON has a per-client section, the source file's digest, the library versions and the reproducing command."""
    path, sites, y = iris_csv
    res = _json_run(capsys, ["run", "kfed", "--data", str(path), "--client-column", "site", "--label-column",
                             "species", "--seed", "2"])
    assert res["n_features"] == 4 and res["n_clients"] == 3 and res["split"] is None
    clients = res["clients"]
    assert [c["client"] for c in clients] == ["east", "north", "south"]
    assert [c["rows"] for c in clients] == [int((sites == s).sum()) for s in ("east", "north", "south")]
    assert sum(c["bytes_up"] for c in clients) == sum(res["communication"]["bytes_up"])
    assert sum(c["bytes_down"] for c in clients) == sum(res["communication"]["bytes_down"])
    for c in clients:
        assert 1 <= c["local_clusters"] and c["seconds"] > 0 and 0 < c["purity"] <= 1 and -1 <= c["ari"] <= 1
    assert res["source"]["feature_names"] == ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    assert res["source"]["classes"] == SPECIES.tolist() and len(res["source"]["sha256"]) == 64
    assert res["versions"]["fastfc"] == fastfc.__version__ and res["versions"]["numpy"] == np.__version__
    assert res["run"]["argv"][:3] == ["kfed", "--data", str(path)] and res["params"]["random_state"] == 2
    assert res["metrics"]["purity"] > 0.5


def test_table_shows_clients_and_the_command(iris_csv, capsys):
    path, _, _ = iris_csv
    assert main(["run", "gold", "--data", str(path), "--client-column", "site", "--label-column", "species"]) == 0
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.split()[1:2] == ["rows"])
    assert head.split() == ["client", "rows", "uploaded", "bytes", "up", "bytes", "down", "seconds", "purity", "ari"]
    assert sum(line.split()[:1] in (["east"], ["north"], ["south"]) for line in out.splitlines()) == 3
    assert f"reproduce: fastfc run gold --data {path} --client-column site" in out


@pytest.mark.parametrize("method", ["kfed", "feca", "fedhire", "gold", "fedkstarhc", "fedkmeans"])
def test_save_then_predict(method, iris_csv, tmp_path, capsys):
    """run --save writes the fitted model (its labels are the run's); predict labels the file's rows with it."""
    path, _, _ = iris_csv
    model = tmp_path / "m.ffc"
    res = _json_run(capsys, ["run", method, "--data", str(path), "--client-column", "site", "--label-column",
                             "species", "--save", str(model)])
    est = fastfc.load(model)
    assert labels_digest(est.labels_) == res["labels_sha256"] and res["saved_model"] == str(model)
    X = load_table(path, client_column="site", label_column="species").X
    assert main(["predict", str(model), "--data", str(path), "--client-column", "site", "--label-column",
                 "species"]) == 0
    captured = capsys.readouterr()
    assert [int(v) for v in captured.out.split()] == est.predict(X).tolist()
    assert captured.err.startswith("fastfc predict: purity ")
    assert main(["predict", str(model), "--data", str(path), "--client-column", "site", "--label-column",
                 "species", "--out", str(tmp_path / "p.npy")]) == 0
    assert np.array_equal(np.load(tmp_path / "p.npy"), est.predict(X))


def test_predict_in_a_new_process(iris_csv, tmp_path, capsys):
    """The documented flow across processes: run --save, then 'python -m fastfc predict' to a text file."""
    path, _, _ = iris_csv
    model = tmp_path / "m.ffc"
    assert main(["run", "fedkmeans", "--data", str(path), "--client-column", "site", "--label-column", "species",
                 "--save", str(model)]) == 0
    capsys.readouterr()
    env = {**os.environ, "PYTHONPATH": str(Path(fastfc.__file__).resolve().parents[1])}
    out = tmp_path / "labels.txt"
    subprocess.run([sys.executable, "-m", "fastfc", "predict", str(model), "--data", str(path), "--client-column",
                    "site", "--label-column", "species", "--out", str(out)], check=True, env=env,
                   capture_output=True)
    X = load_table(path, client_column="site", label_column="species").X
    assert [int(v) for v in out.read_text().split()] == fastfc.load(model).predict(X).tolist()


def test_rerun_from_json_gives_identical_labels(iris_csv, iris_tsv, tmp_path, capsys):
    """The JSON of a run alone repeats it: rerun fits again and gets identical labels (compared in full through
    the saved models, and by the recorded digest)."""
    path, _, _ = iris_csv
    for argv in (["run", "feca", "--data", str(path), "--client-column", "site", "--label-column", "species",
                  "--seed", "5", "--param", "n_init=2"],
                 ["run", "kfed", "--dataset", "wine", "--clients", "4", "--split", "dirichlet", "--alpha", "0.7",
                  "--seed", "3", "--param", "refine_rounds=2"],
                 ["run", "fedhire", "--data", str(iris_tsv), "--label-column", "species", "--clients", "5"]):
        record = tmp_path / "run.json"
        assert main([*argv, "--json", "--save", str(tmp_path / "a.ffc")]) == 0
        record.write_text(capsys.readouterr().out)
        res = _json_run(capsys, ["rerun", str(record), "--save", str(tmp_path / "b.ffc")])
        assert res["reproduces"]["identical_labels"] is True
        first, again = fastfc.load(tmp_path / "a.ffc"), fastfc.load(tmp_path / "b.ffc")
        assert np.array_equal(first.labels_, again.labels_)
        assert np.array_equal(first.cluster_centers_, again.cluster_centers_)
        assert res["params"] == json.loads(record.read_text())["params"]


def test_rerun_checks_the_data_file_and_the_labels(iris_csv, tmp_path, capsys):
    path, _, _ = iris_csv
    record = tmp_path / "run.json"
    no_labels = tmp_path / "no_labels.csv"
    no_labels.write_text("\n".join(line.rsplit(",", 1)[0] for line in path.read_text().splitlines()) + "\n")
    path = no_labels
    res = _json_run(capsys, ["run", "kfed", "--data", str(path), "--client-column", "site", "--n-clusters", "3"])
    assert "purity" not in res["clients"][0] and res["metrics"] == {}  # no labels: nothing scored
    record.write_text(json.dumps(res))
    moved = tmp_path / "moved.csv"
    moved.write_bytes(path.read_bytes())
    assert main(["rerun", str(record), "--data", str(moved)]) == 0
    assert "labels identical" in capsys.readouterr().out
    moved.write_text(path.read_text().replace("north", "nord", 1))
    assert main(["rerun", str(record), "--data", str(moved)]) == 2
    assert "is not the file of the recorded run" in capsys.readouterr().err
    res["labels_sha256"] = "0" * 64
    record.write_text(json.dumps(res))
    assert main(["rerun", str(record)]) == 2
    assert "labels differ from those recorded" in capsys.readouterr().err
    record.write_text(json.dumps({"method": "kfed"}))
    assert main(["rerun", str(record)]) == 2
    assert "no run.argv" in capsys.readouterr().err


def test_simulated_split_of_own_data(iris_csv, iris_tsv, capsys):
    """Without a client column the rows are split as --split says (labels needed for label-skew splits)."""
    path, _, _ = iris_csv
    res = _json_run(capsys, ["run", "kfed", "--data", str(path), "--client-column", "site", "--label-column",
                             "species", "--clients", "3"])
    assert res["n_clients"] == 3  # --clients equal to the file's count is accepted
    res = _json_run(capsys, ["run", "kfed", "--data", str(iris_tsv), "--label-column", "species", "--clients", "4",
                             "--split", "dirichlet"])
    assert res["n_clients"] == 4 and res["split"] == "dirichlet" and res["clients"][0]["client"] == 0


@pytest.mark.parametrize("argv, message", [
    (["--dataset", "iris", "--client-column", "x"], "--client-column applies to --data FILE"),
    (["--data", "{csv}", "--client-column", "site", "--label-column", "species", "--clients", "5"],
     "--clients cannot apply"),
    (["--data", "{bad}"], "non-numeric value 'oops' at row 2, line 3, column 'b'"),
    (["--data", "{csv}", "--client-column", "site", "--label-column", "species", "--split", "classes"],
     "--split cannot apply"),
    (["--data", "{csv}", "--client-column", "sitez"], "no client column 'sitez'"),
    (["--data", "{nolabel}", "--split", "dirichlet"], "--split dirichlet needs labels"),
    (["--data", "{csv}"], "non-numeric value 'east' at row 1, line 2, column 'site' (use it as the client or label"),
])
def test_data_errors_are_one_line(argv, message, iris_csv, tmp_path, capsys):
    path, _, _ = iris_csv
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3,oops\n")
    nolabel = tmp_path / "nolabel.csv"
    nolabel.write_text("a,b\n1,2\n3,4\n5,6\n")
    argv = [a.format(csv=path, bad=bad, nolabel=nolabel) for a in argv]
    assert main(["run", "kfed", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_predict_errors(iris_csv, tmp_path, capsys):
    path, _, _ = iris_csv
    model = tmp_path / "m.ffc"
    assert main(["run", "kfed", "--data", str(path), "--client-column", "site", "--label-column", "species",
                 "--save", str(model)]) == 0
    capsys.readouterr()
    wide = tmp_path / "wide.csv"
    wide.write_text("a,b,c,d,e\n1,2,3,4,5\n")
    assert main(["predict", str(model), "--data", str(wide)]) == 2
    assert "has 5 feature columns (a, b, c, d, e), the model was fitted on 4" in capsys.readouterr().err
    (tmp_path / "junk.ffc").write_bytes(b"not a model")
    assert main(["predict", str(tmp_path / "junk.ffc"), "--data", str(path)]) == 2
    assert "junk.ffc: not a readable model archive" in capsys.readouterr().err


def test_client_npz_and_parquet_through_data(tmp_path, capsys):
    from fastfc.datasets import save_client_npz

    X, y = load_dataset("iris", standardize=True)
    save_client_npz(tmp_path / "c.npz", [X[:70], X[70:]], [y[:70], y[70:]])
    res = _json_run(capsys, ["run", "kfed", "--data", str(tmp_path / "c.npz")])
    assert res["n_clients"] == 2 and [c["rows"] for c in res["clients"]] == [70, 80] and "purity" in res["clients"][0]
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"hospital": np.repeat([3, 1], 75), **{f"f{j}": X[:, j] for j in range(4)},
                             "y": y}), tmp_path / "d.parquet")
    res = _json_run(capsys, ["run", "feca", "--data", str(tmp_path / "d.parquet"), "--client-column", "hospital",
                             "--label-column", "y"])
    assert [c["client"] for c in res["clients"]] == [1, 3] and res["n_features"] == 4


def test_dataset_and_data_are_exclusive(iris_csv, capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "kfed", "--data", str(iris_csv[0]), "--dataset", "iris"])
    assert info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_rerun_of_a_client_file_checks_its_digest(tmp_path, capsys):
    from fastfc.datasets import save_client_npz

    X, y = load_dataset("wine", standardize=True)
    save_client_npz(tmp_path / "c.npz", [X[:90], X[90:]], [y[:90], y[90:]])
    res = _json_run(capsys, ["run", "gold", "--dataset", str(tmp_path / "c.npz")])
    (tmp_path / "run.json").write_text(json.dumps(res))
    assert _json_run(capsys, ["rerun", str(tmp_path / "run.json")])["reproduces"]["identical_labels"] is True
    save_client_npz(tmp_path / "c.npz", [X[:80], X[80:]], [y[:80], y[80:]])
    assert main(["rerun", str(tmp_path / "run.json")]) == 2
    assert "is not the file of the recorded run" in capsys.readouterr().err


def test_predict_with_a_model_without_centres(tmp_path, capsys):
    """A FedCRef model loads, but has no centres to label new rows with: one clear line, status 2."""
    from fastfc import FedCRef

    rng = np.random.default_rng(0)
    X = np.clip(np.vstack([rng.normal(m, 0.05, size=(40, 3)) for m in (0.2, 0.8)]), 0, 1)
    FedCRef(n_local_clusters=2, hidden_layer_sizes=(4,), local_epochs=1, fl_rounds=1, fl_epochs=1,
            fl_first_epochs=1, max_iter=1, random_state=0).fit_clients([X[::2], X[1::2]]).save(tmp_path / "f.ffc")
    np.save(tmp_path / "X.npy", X)
    assert main(["predict", str(tmp_path / "f.ffc"), "--data", str(tmp_path / "X.npy")]) == 2
    assert "holds a FedCRef model, which keeps no global centres" in capsys.readouterr().err


def test_rerun_of_a_damaged_record_is_a_usage_error(tmp_path, capsys):
    """`fastfc rerun` on a record that is not UTF-8 JSON, or nested too deep for the parser, exits 2 with a
    one-line error naming the file (was an 'internal error' traceback, exit 1)."""
    for name, data in [("utf16.json", '{"run": {}}'.encode("utf-16")), ("deep.json", b"[" * 100000),
                       ("bigint.json", b"1" * 5000)]:
        path = tmp_path / name
        path.write_bytes(data)
        assert main(["rerun", str(path)]) == 2
        assert name in capsys.readouterr().err
