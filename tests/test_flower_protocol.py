"""The distributed driver of fastfc.flower, over an in-memory transport (no Flower needed).

The real Flower deployment (SuperLink + SuperNodes as processes) is tested in test_flower.py;
these tests pin the protocol logic: labels equal to fit_clients, restarts, the missing-client
policy and the rejection of malformed messages.
"""
import numpy as np
import pytest

from fastfc.experiment import make_estimator
from fastfc.flower import ClientFailure, ClientWorker, FederationError, run_server_phases

from conftest import mixture_clients


def _write_clients(tmp_path, X_clients):
    workers = {}
    for i, X in enumerate(X_clients):
        path = tmp_path / f"client{i}.npy"
        np.save(path, X)
        workers[f"node{i}"] = ClientWorker(str(path), client_index=i, state_dir=str(tmp_path / f"state{i}"),
                                          labels_path=str(tmp_path / f"labels{i}.npy"))
    return workers


def _memory_send(workers, *, broken=(), garbage=(), calls=None):
    def send(phase, payloads, task):
        if calls is not None:
            calls.append(phase)
        out = {}
        for node, payload in payloads.items():
            if node in broken:
                out[node] = ClientFailure(node, "connection lost")
                continue
            w = workers[node]
            if phase == "summarize":
                arr = w.summarize(task, run_key="r1")
                if node in garbage:
                    arr = arr.copy()
                    arr[-5] ^= 0xFF  # flip a byte: the digest no longer matches
                out[node] = ({"client-index": w.client_index}, arr)
            else:
                out[node] = ({"n-labelled": w.assign(task, payload, run_key="r1")}, None)
        return out
    return send


@pytest.mark.parametrize("method, params", [
    ("kfed", {"n_clusters": 4}),
    ("fedhire", {"n_clusters": 4}),
    ("gold", {"n_clusters": 4, "mcpl_tol": 1e-3}),
    ("feca", {"n_clusters": 4}),
    ("fedkstarhc", {"n_clusters": 4, "micro": "kmeans"}),
    ("fedkstarhc", {"n_clusters": None}),
])
def test_distributed_labels_equal_fit_clients(tmp_path, method, params):
    """Every method over the in-memory transport labels each client as fit_clients does."""
    X_clients, _ = mixture_clients(3, k=4)
    workers = _write_clients(tmp_path, X_clients)
    task = {"method": method, "params": params, "random_state": 3}
    report = run_server_phases(_memory_send(workers), list(workers), task, min_clients=len(workers))
    ref = make_estimator(method, random_state=3, **params).fit_clients(X_clients)
    assert report.missing == [] and report.n_clusters == ref.n_clusters_
    for i, lab in enumerate(ref.client_labels_):
        np.testing.assert_array_equal(np.load(tmp_path / f"labels{i}.npy"), lab)
        assert report.n_labelled[i] == len(lab)


@pytest.mark.parametrize("method", ["fedhire", "gold"])
def test_whole_run_restarts_match_in_process(tmp_path, monkeypatch, method):
    """A server error in ``_restart_on`` (KModesInitError: the hierarchy has too few distinct
    label rows for k-modes) restarts the whole run with the restart's fresh client and server
    randomness, in fit_clients and in the distributed driver alike. The server phase is made to
    raise on its first attempt of each run, so the restart path runs deterministically."""
    import fastfc.fed_hire as fh

    est_cls = make_estimator(method).__class__
    assert est_cls._restart_on == (fh.KModesInitError,) and make_estimator(method)._max_restarts() >= 1
    X_clients, _ = mixture_clients(4, k=4)
    params = {"n_clusters": 4}
    no_restart = make_estimator(method, random_state=5, **params).fit_clients(X_clients)
    real = fh.server_hierarchy
    attempts = []

    def fails_first(*args, **kwargs):
        attempts.append(1)
        if len(attempts) == 1:
            raise fh.KModesInitError("forced by the test: too few distinct label rows")
        return real(*args, **kwargs)

    monkeypatch.setattr(fh, "server_hierarchy", fails_first)
    ref = make_estimator(method, random_state=5, **params).fit_clients(X_clients)
    assert ref.n_restarts_ == 1 and len(attempts) == 2
    # the restart used other randomness, so equal labels below are not those of attempt 0
    assert any(not np.array_equal(a, b) for a, b in zip(ref.client_labels_, no_restart.client_labels_))
    attempts.clear()
    workers = _write_clients(tmp_path, X_clients)
    calls = []
    report = run_server_phases(_memory_send(workers, calls=calls), list(workers),
                               {"method": method, "params": params, "random_state": 5},
                               min_clients=len(workers))
    assert report.restarts == 1 and calls.count("summarize") == 2 and len(attempts) == 2
    for i, lab in enumerate(ref.client_labels_):
        np.testing.assert_array_equal(np.load(tmp_path / f"labels{i}.npy"), lab)


def test_missing_client_continue_reports_it(tmp_path, federated_blobs):
    X_clients, _ = federated_blobs
    workers = _write_clients(tmp_path, X_clients)
    task = {"method": "kfed", "params": {"n_clusters": 4}, "random_state": 0}
    report = run_server_phases(_memory_send(workers, broken={"node1"}), list(workers), task, min_clients=2)
    assert [f.node for f in report.missing] == ["node1"] and "connection lost" in report.missing[0].reason
    assert sorted(report.responders) == [0, 2]
    assert not (tmp_path / "labels1.npy").exists()
    assert (tmp_path / "labels0.npy").exists() and (tmp_path / "labels2.npy").exists()


def test_missing_client_fail_policy_and_min_clients(tmp_path, federated_blobs):
    X_clients, _ = federated_blobs
    workers = _write_clients(tmp_path, X_clients)
    task = {"method": "kfed", "params": {"n_clusters": 4}, "random_state": 0}
    with pytest.raises(FederationError, match="node1: connection lost"):
        run_server_phases(_memory_send(workers, broken={"node1"}), list(workers), task, min_clients=2,
                          on_missing="fail")
    with pytest.raises(FederationError, match="2 of 3 clients answered .min-clients=3"):
        run_server_phases(_memory_send(workers, broken={"node2"}), list(workers), task, min_clients=3)


def test_tampered_summary_is_rejected_with_a_clear_reason(tmp_path, federated_blobs):
    X_clients, _ = federated_blobs
    workers = _write_clients(tmp_path, X_clients)
    task = {"method": "kfed", "params": {"n_clusters": 4}, "random_state": 0}
    report = run_server_phases(_memory_send(workers, garbage={"node2"}), list(workers), task, min_clients=2)
    assert [f.node for f in report.missing] == ["node2"]
    assert "malformed summary rejected" in report.missing[0].reason


def test_client_worker_errors(tmp_path):
    w = ClientWorker(str(tmp_path / "nope.npy"), client_index=0)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        w.summarize({"method": "kfed", "params": {}, "random_state": 0}, run_key="x")
    np.savez(tmp_path / "d.npz", Y=np.ones((3, 2)))
    w = ClientWorker(str(tmp_path / "d.npz"), client_index=0)
    with pytest.raises(ValueError, match="no array 'X'"):
        w.summarize({"method": "kfed", "params": {}, "random_state": 0}, run_key="x")


def test_client_index_out_of_range_or_duplicate_is_rejected(tmp_path, federated_blobs):
    X_clients, _ = federated_blobs
    workers = _write_clients(tmp_path, X_clients)
    workers["node2"].client_index = 0  # duplicates node0
    task = {"method": "kfed", "params": {"n_clusters": 4}, "random_state": 0}
    report = run_server_phases(_memory_send(workers), list(workers), task, min_clients=2)
    assert [f.node for f in report.missing] == ["node2"] and "duplicate client-index 0" in report.missing[0].reason
    workers["node2"].client_index = 7
    report = run_server_phases(_memory_send(workers), list(workers), task, min_clients=2)
    assert "outside 0..2" in report.missing[0].reason
