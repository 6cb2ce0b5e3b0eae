"""Real Flower deployment on loopback: a SuperLink and three SuperNodes as separate processes.

Needs Flower's command-line tools and a Python where both flwr and fastfc import: by default
those next to this interpreter; FASTFC_FLWR_BIN names another environment's bin directory
(CI builds one with .ci/flower_env.sh). Skipped when neither exists; an error instead when
FASTFC_FLWR_BIN or CI is set.
"""
import json
import os
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

from fastfc.experiment import make_estimator
from fastfc.flower import LocalFederation, write_app_project

from conftest import in_ci, mixture_clients
from test_flower_protocol import drive_rounds

BIN = os.environ.get("FASTFC_FLWR_BIN") or str(Path(sys.executable).parent)
#: the next port to try: a block of 30 per test process, below Linux's usual ephemeral range (32768 and up),
#: where outgoing connections take their local ports (a SuperNode once found its port 37334 taken that way)
_next_port = [20000 + os.getpid() % 300 * 30]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _fresh_port() -> int:
    """A SuperLink port (its SuperNodes take the next three), all four free now and none used by an
    earlier federation of this process."""
    while True:
        port = _next_port[0]
        _next_port[0] += 4
        if all(_port_free(p) for p in range(port, port + 4)):
            return port


pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _flower_cli():
    """Skip without Flower's CLIs, an optional extra; but fail when they were asked for
    (FASTFC_FLWR_BIN set, as .ci/run does after building them) or under CI, where a skip would
    hide that the real deployment never ran."""
    if (Path(BIN) / "flower-superlink").exists():
        return
    reason = f"Flower CLIs not found: no flower-superlink in {BIN} (pip install 'fastfc[flower]' or set FASTFC_FLWR_BIN)"
    if os.environ.get("FASTFC_FLWR_BIN") or in_ci():
        pytest.fail(f"{reason}; FASTFC_FLWR_BIN or CI is set, so the real Flower tests must run", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def federation(tmp_path):
    X_clients = mixture_clients(3, k=4)[0][:3]  # synthetic: the deployment needs no published data
    app = write_app_project(tmp_path / "app", n_clients=3, min_clients=2)
    with LocalFederation(tmp_path / "fed", X_clients, port=_fresh_port(), bin_dir=BIN) as fed:
        yield fed, app, X_clients


def test_every_method_over_real_supernodes_equals_fit_clients(federation):
    fed, app, X_clients = federation
    fed.wait_online()
    for method, params in (("kfed", {"n_clusters": 4}), ("gold", {"n_clusters": 4}), ("feca", {"n_clusters": 4}),
                           ("fedkstarhc", {"n_clusters": 4, "micro": "kmeans"}), ("fedkstarhc", {"n_clusters": None}),
                           ("kfed", {"n_clusters": 4, "refine_rounds": 3})):
        report = fed.workdir / f"report-{method}-{params['n_clusters']}-{params.get('refine_rounds', 0)}.json"
        status, details = fed.run(app, {"method": method, "params": params, "random-state": 5,
                                        "report-path": str(report)})
        assert status == "finished:completed", details
        rep = json.loads(report.read_text())
        assert rep["missing"] == [] and rep["missing_clients"] == [] and sorted(rep["responders"]) == ["0", "1", "2"]
        ref = make_estimator(method, random_state=5, **params).fit_clients(X_clients)
        for got, lab in zip(fed.labels(), ref.client_labels_):
            np.testing.assert_array_equal(got, lab)
        # rounds and every message's wire bytes, per round and client, as in the in-process fit
        assert rep["rounds"] == ref.n_rounds_ == (4 if "refine_rounds" in params else 1)
        assert [[r["bytes_up"][str(i)] for i in range(3)] for r in rep["per_round"]] == ref.bytes_up_.tolist()
        assert [[r["bytes_down"][str(i)] for i in range(3)] for r in rep["per_round"]] == ref.bytes_down_.tolist()
    # every client removed its state files after labelling
    assert not list(fed.workdir.glob("state*/.fastfc-state-*"))


def test_stopped_supernode_is_reported_missing(federation):
    fed, app, X_clients = federation
    fed.wait_online()
    fed.stop("supernode1")
    report = fed.workdir / "report-missing.json"
    status, details = fed.run(app, {"method": "kfed", "params": {"n_clusters": 4}, "report-path": str(report),
                                    "wait-timeout": 8.0})
    assert status == "finished:completed", details
    rep = json.loads(report.read_text())
    assert rep["missing_clients"] == [1]
    assert "2 of 3 SuperNodes" in rep["missing"][0]["reason"]
    labels = fed.labels()
    assert labels[0] is not None and labels[1] is None and labels[2] is not None
    # with on-missing="fail" the run stops with a clear error instead
    report2 = fed.workdir / "report-fail.json"
    status, _ = fed.run(app, {"method": "kfed", "params": {"n_clusters": 4}, "report-path": str(report2),
                              "wait-timeout": 5.0, "on-missing": "fail"})
    assert status == "finished:failed"
    assert "SuperNodes connected" in json.loads(report2.read_text())["error"]


def _app_with_client(directory, module, source):
    """fastfc's app project whose ClientApp is ``module:app`` (shipped in the app's FAB)."""
    write_app_project(directory, n_clients=3, min_clients=2)
    (directory / f"{module}.py").write_text(source)
    text = (directory / "pyproject.toml").read_text().replace('"fastfc.flower:client_app"', f'"{module}:app"')
    (directory / "pyproject.toml").write_text(text.replace("py-modules = []", f'py-modules = ["{module}"]'))
    return directory


BAD_CLIENT = '''\
"""fastfc's ClientApp with a Flower mod that flips one byte of client 2's summary."""
from flwr.app import Array, ArrayRecord

import fastfc.flower as ff


def tamper(msg, context, call_next):
    reply = call_next(msg, context)
    if int(context.node_config["client-index"]) == 2 and "fastfc" in reply.content:
        arr = reply.content["fastfc"]["msg"].numpy().copy()
        arr[-3] ^= 0xFF
        reply.content["fastfc"] = ArrayRecord({"msg": Array(arr)})
    return reply


app = ff.make_client_app(mods=[tamper])
'''


def test_tampered_summary_from_a_real_node_is_rejected(federation, tmp_path):
    fed, app, X_clients = federation
    bad = _app_with_client(tmp_path / "badapp", "badclient", BAD_CLIENT)
    fed.wait_online()
    report = fed.workdir / "report-bad.json"
    status, details = fed.run(bad, {"method": "kfed", "params": {"n_clusters": 4}, "report-path": str(report)})
    assert status == "finished:completed", details
    rep = json.loads(report.read_text())
    assert rep["missing_clients"] == [2]
    assert "malformed summary rejected" in rep["missing"][0]["reason"] and "digest" in rep["missing"][0]["reason"]


SLOW_CLIENT = '''\
"""fastfc's ClientApp with a mod that makes client 1 announce itself and then hang."""
import time
from pathlib import Path

import fastfc.flower as ff


def hang(msg, context, call_next):
    if int(context.node_config["client-index"]) == 1:
        Path(str(context.node_config["data-path"]) + ".answering").touch()
        time.sleep(600)
    return call_next(msg, context)


app = ff.make_client_app(mods=[hang])
'''


def test_supernode_stopped_while_answering_is_reported_missing(federation, tmp_path):
    import threading
    import time

    fed, app, X_clients = federation
    slow = _app_with_client(tmp_path / "slowapp", "slowclient", SLOW_CLIENT)
    fed.wait_online()
    marker = fed.workdir / "client1.npy.answering"

    def stop_when_answering():
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        fed.stop("supernode1")

    killer = threading.Thread(target=stop_when_answering)
    killer.start()
    report = fed.workdir / "report-died.json"
    status, details = fed.run(slow, {"method": "kfed", "params": {"n_clusters": 4}, "report-path": str(report),
                                     "reply-timeout": 90.0})
    killer.join()
    assert marker.exists(), "client 1 never started answering"
    assert status == "finished:completed", details
    rep = json.loads(report.read_text())
    assert rep["missing_clients"] == [1]
    assert "left" in rep["missing"][0]["reason"] or "unavailable" in rep["missing"][0]["reason"].lower()
    labels = fed.labels()
    assert labels[0] is not None and labels[1] is None and labels[2] is not None


LOST_IN_ROUND_2 = '''\
"""fastfc's ClientApp with a mod: on the round-2 task, client 1 announces that it got the task and
hangs until the test stops its SuperNode."""
import time
from pathlib import Path

import fastfc.flower as ff


def lost_in_round_2(msg, context, call_next):
    task = msg.content["task"]
    if (int(context.node_config["client-index"]) == 1 and str(task["phase"]) == "round"
            and int(task["round"]) == 2):
        Path(str(context.node_config["data-path"]) + ".round2").touch()
        time.sleep(600)
    return call_next(msg, context)


app = ff.make_client_app(mods=[lost_in_round_2])
'''


def test_supernode_lost_between_rounds_is_reported_with_its_round(federation, tmp_path):
    """KFed with refine_rounds=3 (4 rounds on this data): client 1's SuperNode is stopped after it answered
    round 1 (when the round-2 task reaches it). With on-missing="continue" the run completes, the report
    names client 1 and round 2, client 1 writes no labels and the others' labels equal the in-process run
    of the public round API in which client 1's uploads are absent from round 2 on (which differ from the
    labels with client 1 kept). on-missing="fail" in a later round is tested in-process
    (test_flower_protocol.py); the ServerApp's failed-run path is the same as in round 0 (tested above)."""
    import threading
    import time

    fed, app, X_clients = federation
    params = {"n_clusters": 4, "refine_rounds": 3}
    expected, last = drive_rounds(make_estimator("kfed", **params), X_clients, 3, {1: 2})
    full = make_estimator("kfed", random_state=3, **params).fit_clients(X_clients)
    assert last == 3 and full.n_rounds_ == 4
    assert any(not np.array_equal(expected[i], full.client_labels_[i]) for i in (0, 2))
    fed.wait_online()

    hanging = _app_with_client(tmp_path / "hangapp", "hangclient", LOST_IN_ROUND_2)
    marker = fed.workdir / "client1.npy.round2"

    def stop_in_round_2():
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        fed.stop("supernode1")

    killer = threading.Thread(target=stop_in_round_2)
    killer.start()
    report = fed.workdir / "report-continue-round2.json"
    status, details = fed.run(hanging, {"method": "kfed", "params": params, "random-state": 3,
                                        "report-path": str(report), "reply-timeout": 90.0})
    killer.join()
    assert marker.exists(), "client 1 never got the round-2 task"
    assert status == "finished:completed", details
    rep = json.loads(report.read_text())
    assert rep["missing_clients"] == [1] and sorted(rep["responders"]) == ["0", "2"]
    assert [(m["client"], m["round"], m["phase"]) for m in rep["missing"]] == [(1, 2, "round")]
    assert "left" in rep["missing"][0]["reason"] or "unavailable" in rep["missing"][0]["reason"].lower()
    assert rep["rounds"] == last + 1
    assert [sorted(r["bytes_up"]) for r in rep["per_round"]] == [["0", "1", "2"]] * 2 + [["0", "2"]] * (last - 1)
    labels = fed.labels()
    assert labels[1] is None
    for i in (0, 2):
        np.testing.assert_array_equal(labels[i], expected[i])


def test_fedcref_over_real_supernodes_equals_fit_clients(tmp_path):
    """FedCRef (issue 14) over a real SuperLink and three SuperNodes: digits, tiny AEs, one iteration
    (local AEs, association, a FedAvg round, refinement: 4 protocol rounds, as Flower starts a ClientApp
    process per message; two iterations run over the in-process driver in test_flower_protocol.py). Each
    node gets its own dirty initial labels and K_i through its node config (the per-node route, nothing
    per-client in the run parameters); every client's global labels, the rounds and every message's wire
    bytes equal fit_clients with the same values given as lists."""
    from test_flower_protocol import _fedcref_digits_clients

    X_clients, init = _fedcref_digits_clients(per_class=30)
    ks = [2, 3, 2]
    params = {"hidden_layer_sizes": [16, 8, 16], "local_epochs": 20, "fl_rounds": 1, "fl_epochs": 3,
              "fl_first_epochs": 2, "max_iter": 1, "theta": 0.35, "learning_rate": 5e-3}
    ref = make_estimator("fedcref", random_state=4, init_labels=init, n_local_clusters=ks, **params)
    ref.fit_clients(X_clients)
    assert ref.history_["n_groups"].max() >= 1 and ref.n_rounds_ == 4  # a FedAvg round ran
    app = write_app_project(tmp_path / "app", n_clients=3, min_clients=3)
    with LocalFederation(tmp_path / "fed", X_clients, port=_fresh_port(), bin_dir=BIN, init_labels=init,
                         n_local_clusters=ks) as fed:
        fed.wait_online()
        report = fed.workdir / "report-fedcref.json"
        status, details = fed.run(app, {"method": "fedcref", "params": params, "random-state": 4,
                                        "report-path": str(report)})
        assert status == "finished:completed", details
        rep = json.loads(report.read_text())
        assert rep["missing"] == [] and sorted(rep["responders"]) == ["0", "1", "2"]
        assert rep["rounds"] == ref.n_rounds_
        for got, lab in zip(fed.labels(), ref.client_labels_):
            np.testing.assert_array_equal(got, lab)
        assert [[r["bytes_up"][str(i)] for i in range(3)] for r in rep["per_round"]] == ref.bytes_up_.tolist()
        assert [[r["bytes_down"][str(i)] for i in range(3)] for r in rep["per_round"]] == ref.bytes_down_.tolist()
        assert not list(fed.workdir.glob("state*/.fastfc-state-*"))
