"""The distributed driver of fastfc.flower, over an in-memory transport (no Flower needed).

The real Flower deployment (SuperLink + SuperNodes as processes) is tested in test_flower.py;
these tests pin the protocol logic: labels equal to fit_clients, restarts, the missing-client
policy and the rejection of malformed messages.
"""
import json

import numpy as np
import pytest

from fastfc.experiment import make_estimator
from fastfc.flower import ClientFailure, ClientWorker, FederationError, encode_payload, run_server_phases

from conftest import mixture_clients


def _write_clients(tmp_path, X_clients):
    workers = {}
    for i, X in enumerate(X_clients):
        path = tmp_path / f"client{i}.npy"
        np.save(path, X)
        workers[f"node{i}"] = ClientWorker(str(path), client_index=i, state_dir=str(tmp_path / f"state{i}"),
                                          labels_path=str(tmp_path / f"labels{i}.npy"))
    return workers


def _memory_send(workers, *, broken=(), garbage=(), calls=None, lose=None, tamper=None):
    """An in-memory transport: ``send(phase, payloads, task)`` calls each node's ClientWorker.

    ``broken``: nodes that never answer; ``garbage``: nodes whose summary gets one byte flipped;
    ``lose={node: r}``: the node is unreachable from round ``r`` on (summarize, round and assign
    tasks); ``tamper={node: (r, fn)}``: the node's round-``r`` upload array is replaced by
    ``fn(upload, history)``, where ``history`` lists its earlier uploads (arrays) of this run.
    """
    lose = lose or {}
    tamper = tamper or {}
    history = {node: [] for node in workers}

    def send(phase, payloads, task):
        if calls is not None:
            calls.append((phase, task.get("round", 0)))
        rnd = task.get("round", 0) if phase in ("summarize", "round") else task.get("round", 0) + 1
        out = {}
        for node, payload in payloads.items():
            if node in broken or rnd >= lose.get(node, np.inf):
                out[node] = ClientFailure(node, "connection lost")
                continue
            w = workers[node]
            if phase in ("summarize", "round"):
                arr = w.summarize(task, run_key="r1") if phase == "summarize" else w.run_round(task, payload,
                                                                                                 run_key="r1")
                if node in garbage:
                    arr = arr.copy()
                    arr[-5] ^= 0xFF  # flip a byte: the digest no longer matches
                if node in tamper and tamper[node][0] == task["round"]:
                    fn = tamper[node][1]
                    arr_out = fn(arr, history[node])
                else:
                    arr_out = arr
                history[node].append(arr)
                out[node] = ({"client-index": w.client_index}, arr_out)
            elif phase == "release":
                out[node] = ({"released": w.release(run_key="r1")}, None)
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
    assert report.restarts == 1 and calls.count(("summarize", 0)) == 2 and len(attempts) == 2
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


# ------------------------------------------------------------------- rounds protocol
def drive_rounds(est, X_clients, seed, absent_from=None):
    """Reference run through the public round API in one process: client ``i`` takes part in
    rounds ``< absent_from[i]`` only (its uploads are absent from later rounds and it labels
    nothing). Returns ({client: labels}, last round)."""
    absent_from = absent_from or {}
    uploads, states = {}, {}
    for i, X in enumerate(X_clients):
        if absent_from.get(i, np.inf) > 0:
            uploads[i], states[i] = est.client_round(X, round=0, client_index=i, random_state=seed)
    bcs, server_state, done = est.server_round([uploads[i] for i in sorted(uploads)], None, round=0,
                                               random_state=seed)
    r = 0
    while not done:
        r += 1
        uploads = {}
        for b in bcs:
            if absent_from.get(b.client, np.inf) > r:
                uploads[b.client], states[b.client] = est.client_round(X_clients[b.client], states[b.client], b,
                                                                       round=r, random_state=seed)
        bcs, server_state, done = est.server_round([uploads[i] for i in sorted(uploads)], server_state, round=r,
                                                   random_state=seed)
    return {b.client: est.client_assign(X_clients[b.client], states[b.client], b) for b in bcs}, r


ROUND_METHODS = [("kfed", {"n_clusters": 4, "refine_rounds": 3}), ("fedkmeans", {"n_clusters": 4, "max_rounds": 5}),
                 ("kfed", {"n_clusters": 4, "refine_rounds": 3, "refine_n_init": 3}),
                 ("fedkmeans", {"n_clusters": 4, "max_rounds": 5, "n_init": 3})]


def _state_files(tmp_path):
    return sorted(p.name for p in tmp_path.glob("state*/.fastfc-state-*"))


@pytest.mark.parametrize("method, params", ROUND_METHODS)
def test_rounds_over_the_driver_equal_fit_clients(tmp_path, method, params):
    """Multi-round methods over the driver: every client's labels, the rounds run and every
    message's wire bytes per round and client equal fit_clients with the same random_state."""
    X_clients, _ = mixture_clients(1, k=4)
    workers = _write_clients(tmp_path, X_clients)
    calls = []
    report = run_server_phases(_memory_send(workers, calls=calls), list(workers),
                               {"method": method, "params": params, "random_state": 3}, min_clients=len(workers))
    ref = make_estimator(method, random_state=3, **params).fit_clients(X_clients)
    assert ref.n_rounds_ >= 3  # refinement really ran several rounds on this data
    assert report.missing == [] and report.missing_clients == [] and report.n_clusters == ref.n_clusters_
    for i, lab in enumerate(ref.client_labels_):
        np.testing.assert_array_equal(np.load(tmp_path / f"labels{i}.npy"), lab)
        assert report.n_labelled[i] == len(lab)
    assert report.rounds == ref.n_rounds_ and len(report.round_seconds) == ref.n_rounds_
    assert calls == [("summarize", 0)] + [("round", r) for r in range(1, ref.n_rounds_)] + \
        [("assign", ref.n_rounds_ - 1)]
    n = len(X_clients)
    assert [[u[i] for i in range(n)] for u in report.bytes_up] == ref.bytes_up_.tolist()
    assert [[d[i] for i in range(n)] for d in report.bytes_down] == ref.bytes_down_.tolist()
    assert _state_files(tmp_path) == []  # every client removed its state after labelling
    rep = json.loads(report.to_json())
    assert rep["rounds"] == ref.n_rounds_ and [p["round"] for p in rep["per_round"]] == list(range(ref.n_rounds_))
    assert rep["per_round"][1]["bytes_up"] == {str(i): int(ref.bytes_up_[1, i]) for i in range(n)}


def test_reference_drive_equals_fit_clients_and_loss_changes_labels():
    """The reference used below is the public round API; with every client present it is fit_clients,
    and without client 1 from round 2 on, the other clients' labels change (so the tests below can
    tell a driver that kept client 1's uploads, or dropped it earlier or later, from a correct one)."""
    X_clients, _ = mixture_clients(1, k=4)
    for method, params in ROUND_METHODS:
        ref = make_estimator(method, random_state=3, **params).fit_clients(X_clients)
        full, _ = drive_rounds(make_estimator(method, **params), X_clients, 3)
        for i, lab in enumerate(ref.client_labels_):
            np.testing.assert_array_equal(full[i], lab)
        lost2, r = drive_rounds(make_estimator(method, **params), X_clients, 3, {1: 2})
        lost3, _ = drive_rounds(make_estimator(method, **params), X_clients, 3, {1: 3})
        assert sorted(lost2) == [0, 2, 3] and r >= 2
        assert any(not np.array_equal(lost2[i], full[i]) for i in lost2)
        assert any(not np.array_equal(lost2[i], lost3[i]) for i in lost2)


@pytest.mark.parametrize("method, params", ROUND_METHODS)
def test_client_lost_in_round_2_continue(tmp_path, method, params):
    """A client lost in round 2 with on-missing=continue: the run completes with the others, the report
    names the client and round 2, it gets no labels, and the others' labels equal the reference run in
    which its uploads are absent from rounds >= 2."""
    X_clients, _ = mixture_clients(1, k=4)
    workers = _write_clients(tmp_path, X_clients)
    report = run_server_phases(_memory_send(workers, lose={"node1": 2}), list(workers),
                               {"method": method, "params": params, "random_state": 3}, min_clients=3)
    expected, last = drive_rounds(make_estimator(method, **params), X_clients, 3, {1: 2})
    assert [(f.node, f.client, f.round, f.phase) for f in report.missing] == [("node1", 1, 2, "round")]
    assert "connection lost" in report.missing[0].reason
    assert report.missing_clients == [1] and sorted(report.responders) == [0, 2, 3]
    assert report.rounds == last + 1
    assert sorted(report.bytes_up[1]) == [0, 1, 2, 3] and sorted(report.bytes_up[2]) == [0, 2, 3]
    assert not (tmp_path / "labels1.npy").exists()
    for i in (0, 2, 3):
        np.testing.assert_array_equal(np.load(tmp_path / f"labels{i}.npy"), expected[i])
    rep = json.loads(report.to_json())
    assert rep["missing"] == [{"node": "node1", "reason": "connection lost", "round": 2, "client": 1,
                               "phase": "round"}]
    assert rep["missing_clients"] == [1]


def test_client_lost_in_round_2_fail_and_min_clients(tmp_path):
    X_clients, _ = mixture_clients(1, k=4)
    workers = _write_clients(tmp_path, X_clients)
    task = {"method": "kfed", "params": {"n_clusters": 4, "refine_rounds": 3}, "random_state": 3}
    with pytest.raises(FederationError, match=r"round 2: 3 of 4 clients answered .*node1 \(client 1\): connection lost"):
        run_server_phases(_memory_send(workers, lose={"node1": 2}), list(workers), task, min_clients=3,
                          on_missing="fail")
    # the clients that answered round 2 were told to drop their state; the lost one keeps its round-1
    # state (unreachable), which a later run of that client removes once it is stale
    assert _state_files(tmp_path) == [".fastfc-state-r1-client1.npz"]
    with pytest.raises(FederationError, match=r"round 2: 2 of 4 clients answered \(min-clients=3"):
        run_server_phases(_memory_send(workers, lose={"node1": 2, "node3": 2}), list(workers), task, min_clients=3)


def _flip(arr, history):
    arr = arr.copy()
    arr[-5] ^= 0xFF
    return arr


def _readdress(arr, history):
    from fastfc.flower import decode_payload, encode_payload
    from fastfc.protocol import decode_message

    msg = decode_message(arr.tobytes())
    return encode_payload(msg.addressed(client=0, round=msg.round))


def _replay_round_1(arr, history):
    return history[1]  # its own valid round-1 upload, stamped round 1


def _summary_again(arr, history):
    return history[0]  # its round-0 summary: another message class than a round-2 upload


def _extra_cluster(arr, history):
    """A well-formed refinement upload (valid digest, right address and round) with one cluster too many."""
    from fastfc._refine import RefineStats
    from fastfc.flower import encode_payload
    from fastfc.protocol import decode_message

    msg = decode_message(arr.tobytes())
    k, d = msg.sums.shape
    bad = RefineStats(counts=np.append(msg.counts, 1), sums=np.vstack([msg.sums, np.zeros((1, d))]),
                      inertia=np.append(msg.inertia, 0.0), feature_stats=msg.feature_stats, n_features=d)
    return encode_payload(bad.addressed(client=msg.client, round=msg.round))


@pytest.mark.parametrize("tamper, reason", [
    (_flip, "malformed round-2 upload rejected: .*digest"),
    (_extra_cluster, "round-2 upload does not fit the run: client 1: its round-2 refinement upload has 5 clusters"),
    (_readdress, "round-2 upload addressed to client 0 but sent as client-index 1"),
    (_replay_round_1, "round-2 upload stamped round 1, but this is round 2"),
    (_summary_again, "malformed round-2 upload rejected: expected a 'refine' message"),
])
def test_bad_round_2_upload_is_that_clients_failure(tmp_path, tamper, reason):
    """A malformed, misaddressed, stale (replayed) or wrong-kind upload in round 2 drops only its sender,
    reported with round 2; the run goes on exactly as if that client had been lost in round 2."""
    import re

    X_clients, _ = mixture_clients(1, k=4)
    workers = _write_clients(tmp_path, X_clients)
    params = {"n_clusters": 4, "refine_rounds": 3}
    report = run_server_phases(_memory_send(workers, tamper={"node1": (2, tamper)}), list(workers),
                               {"method": "kfed", "params": params, "random_state": 3}, min_clients=3)
    assert [(f.node, f.client, f.round) for f in report.missing] == [("node1", 1, 2)]
    assert re.search(reason, report.missing[0].reason), report.missing[0].reason
    expected, _ = drive_rounds(make_estimator("kfed", **params), X_clients, 3, {1: 2})
    assert not (tmp_path / "labels1.npy").exists()
    for i in (0, 2, 3):
        np.testing.assert_array_equal(np.load(tmp_path / f"labels{i}.npy"), expected[i])
    # client 1 answered, so the server told it to drop its state: no state file is left behind
    assert _state_files(tmp_path) == []
    calls = []
    with pytest.raises(FederationError, match="round 2: .*client 1"):
        run_server_phases(_memory_send(workers, tamper={"node1": (2, tamper)}, calls=calls), list(workers),
                          {"method": "kfed", "params": params, "random_state": 3}, min_clients=3, on_missing="fail")
    assert calls[-1] == ("release", 2) and _state_files(tmp_path) == []


def test_client_index_changed_after_round_0_is_rejected(tmp_path):
    X_clients, _ = mixture_clients(1, k=4)
    workers = _write_clients(tmp_path, X_clients)
    send = _memory_send(workers)

    def swapping_send(phase, payloads, task):
        out = send(phase, payloads, task)
        if phase == "round" and task["round"] == 1:
            header, arr = out["node3"]
            out["node3"] = ({"client-index": 2}, arr)
        return out

    report = run_server_phases(swapping_send, list(workers),
                               {"method": "kfed", "params": {"n_clusters": 4, "refine_rounds": 3}, "random_state": 3},
                               min_clients=3)
    assert [(f.node, f.client, f.round) for f in report.missing] == [("node3", 3, 1)]
    assert "client-index 2 in round 1, but 3 in round 0" in report.missing[0].reason


def test_client_worker_reads_broadcasts_strictly(tmp_path):
    """The client rejects a broadcast of another class, addressed to another client or of another round,
    and an assign task whose final broadcast is not the last round's."""
    from fastfc._refine import RefineCenters
    from fastfc.flower import encode_payload
    from fastfc.protocol import MessageError

    X_clients, _ = mixture_clients(1, k=4)
    workers = _write_clients(tmp_path, X_clients)
    w = workers["node0"]
    params = {"n_clusters": 4, "refine_rounds": 3}
    task = {"method": "kfed", "params": params, "random_state": 3, "restart": 0}
    est = make_estimator("kfed", **params)
    summaries = [est.client_round(X, round=0, client_index=i, random_state=3)[0] for i, X in enumerate(X_clients)]
    w.summarize(task, run_key="r1")
    replies, _, _ = est.server_round(summaries, None, round=0, random_state=3)
    with pytest.raises(MessageError, match="round-1 broadcast rejected: expected a 'reply' message, got 'summary'"):
        w.run_round({**task, "round": 1}, encode_payload(summaries[0]), run_key="r1")
    with pytest.raises(MessageError, match="addressed to client 1"):
        w.run_round({**task, "round": 1}, encode_payload(replies[1]), run_key="r1")
    with pytest.raises(MessageError, match="needs the server's broadcast of round 0, got one of round 2"):
        w.run_round({**task, "round": 1}, encode_payload(replies[0].addressed(client=0, round=2)), run_key="r1")
    with pytest.raises(MessageError, match="no round-1 broadcast was sent"):
        w.run_round({**task, "round": 1}, None, run_key="r1")
    up = w.run_round({**task, "round": 1}, encode_payload(replies[0]), run_key="r1")
    assert up.dtype == np.uint8 and len(_state_files(tmp_path)) == 1
    bc = RefineCenters(centers=np.zeros((4, X_clients[0].shape[1])), n_features=X_clients[0].shape[1],
                       final=True).addressed(client=0, round=1)
    with pytest.raises(MessageError, match="stamped round 1, but the run finished in round 2"):
        w.assign({**task, "round": 2}, encode_payload(bc), run_key="r1")
    with pytest.raises(FederationError, match="state is from round 1, but the run finished in round 0"):
        w.assign({**task, "round": 0}, encode_payload(replies[0]), run_key="r1")
    assert w.assign({**task, "round": 1}, encode_payload(bc), run_key="r1") == X_clients[0].shape[0]
    assert _state_files(tmp_path) == []


@pytest.mark.parametrize("method", ["kfed", "feca", "fedhire", "fedkstarhc"])
def test_client_refuses_a_reply_beyond_valid_data(tmp_path, method):
    """A final reply whose centres no valid data can give (x 1e300) is a malformed message to the client
    (MessageError naming the field); before, the client labelled its rows with it without a word."""
    from fastfc.protocol import MessageError

    X_clients, _ = mixture_clients(1, k=4)
    w = _write_clients(tmp_path, X_clients)["node0"]
    task = {"method": method, "params": {"n_clusters": 4}, "random_state": 3, "restart": 0}
    est = make_estimator(method, n_clusters=4)
    summaries = [est.client_round(X, round=0, client_index=i, random_state=3)[0] for i, X in enumerate(X_clients)]
    w.summarize(task, run_key="r1")
    replies, _, _ = est.server_round(summaries, None, round=0, random_state=3)
    bad = _beyond_bound("centers", _big)(encode_payload(replies[0]), [])
    with pytest.raises(MessageError, match=r"\.centers: values of magnitude up to .* exceed .*more than valid client"):
        w.assign({**task, "round": 0}, bad, run_key="r1")
    assert w.assign({**task, "round": 0}, encode_payload(replies[0]), run_key="r1") == X_clients[0].shape[0]


def test_stale_state_files_of_interrupted_runs_are_removed(tmp_path):
    import os
    import time

    X_clients, _ = mixture_clients(1, k=4)
    w = _write_clients(tmp_path, X_clients[:1])["node0"]
    sdir = tmp_path / "state0"
    sdir.mkdir()
    old = sdir / ".fastfc-state-oldrun-client0.npz"
    recent = sdir / ".fastfc-state-otherrun-client0.npz"
    other_client = sdir / ".fastfc-state-oldrun-client5.npz"
    for p in (old, recent, other_client):
        p.write_bytes(b"x")
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    os.utime(other_client, (two_days_ago, two_days_ago))
    w.summarize({"method": "kfed", "params": {"n_clusters": 4}, "random_state": 0}, run_key="new")
    assert sorted(p.name for p in sdir.iterdir()) == sorted([recent.name, other_client.name,
                                                             ".fastfc-state-new-client0.npz"])


def test_fedcref_over_the_driver_equals_fit_clients(tmp_path):
    """FedCRef (multi-round, model-based) over the transport-independent driver: every client's global
    labels, the number of rounds and the bytes of every message equal fit_clients. The task goes through
    JSON as over Flower, so the per-client ``init_labels`` / ``n_local_clusters`` travel as lists."""
    from sklearn.datasets import load_digits

    from fastfc.datasets import dirty_labels

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    rng = np.random.default_rng(0)
    X_clients, init = [], []
    for s in ((0, 1), (0, 1, 2), (1, 2)):
        idx = rng.permutation(np.concatenate([rng.choice(np.flatnonzero(y == c), 40, replace=False) for c in s]))
        X_clients.append(X[idx])
        init.append(dirty_labels(y[idx], 0.3, rng).tolist())
    params = {"init_labels": init, "n_local_clusters": [2, 3, 2], "hidden_layer_sizes": [32, 16, 32],
              "local_epochs": 40, "fl_rounds": 2, "fl_epochs": 5, "fl_first_epochs": 2, "max_iter": 2,
              "theta": 0.35, "learning_rate": 5e-3}
    task = json.loads(json.dumps({"method": "fedcref", "params": params, "random_state": 3}))
    workers = _write_clients(tmp_path, X_clients)
    calls = []
    report = run_server_phases(_memory_send(workers, calls=calls), list(workers), task, min_clients=len(workers))
    ref = make_estimator("fedcref", random_state=3, **params).fit_clients(X_clients)
    assert ref.history_["n_groups"].max() >= 1  # groups formed: FedAvg rounds really ran
    assert ref.n_iter_ == 2 and ref.n_rounds_ >= 8  # 2 iterations of >= 3 rounds, FedAvg in one
    assert report.missing == [] and report.rounds == ref.n_rounds_
    assert calls == [("summarize", 0)] + [("round", r) for r in range(1, ref.n_rounds_)] + \
        [("assign", ref.n_rounds_ - 1)]
    for i, lab in enumerate(ref.client_labels_):
        np.testing.assert_array_equal(np.load(tmp_path / f"labels{i}.npy"), lab)
    n = len(X_clients)
    assert [[u[i] for i in range(n)] for u in report.bytes_up] == ref.bytes_up_.tolist()
    assert [[d[i] for i in range(n)] for d in report.bytes_down] == ref.bytes_down_.tolist()
    assert _state_files(tmp_path) == []


def _fedcref_digits_clients(sets=((0, 1), (0, 1, 2), (1, 2)), per_class=40, seed=0):
    from sklearn.datasets import load_digits

    from fastfc.datasets import dirty_labels

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    rng = np.random.default_rng(seed)
    X_clients, init = [], []
    for s in sets:
        idx = rng.permutation(np.concatenate([rng.choice(np.flatnonzero(y == c), per_class, replace=False) for c in s]))
        X_clients.append(X[idx])
        init.append(dirty_labels(y[idx], 0.3, rng))
    return X_clients, init


def test_fedcref_per_node_init_labels_and_k_equal_fit_clients(tmp_path):
    """The per-node route (issue 14): each node's own initial labels (``init-labels-path``) and K_i
    (``n-local-clusters``) stay on the node -- the run parameters carry neither -- and the labels,
    rounds and bytes equal fit_clients with the same values as per-client lists."""
    X_clients, init = _fedcref_digits_clients()
    ks = [2, 4, 2]  # client 1 has 3 classes but is told K_i = 4 (its labels use 0..2): K_i is not max + 1
    common = {"hidden_layer_sizes": [32, 16, 32], "local_epochs": 40, "fl_rounds": 2, "fl_epochs": 5,
              "fl_first_epochs": 2, "max_iter": 2, "theta": 0.35, "learning_rate": 5e-3}
    workers = _write_clients(tmp_path, X_clients)
    for (node, w), lab, k in zip(workers.items(), init, ks):
        w.init_labels_path = str(tmp_path / f"init{w.client_index}.npy")
        np.save(w.init_labels_path, lab)
        w.n_local_clusters = k
    task = json.loads(json.dumps({"method": "fedcref", "params": common, "random_state": 3}))
    report = run_server_phases(_memory_send(workers), list(workers), task, min_clients=len(workers))
    ref = make_estimator("fedcref", random_state=3, init_labels=init, n_local_clusters=ks, **common)
    ref.fit_clients(X_clients)
    assert ref.history_["n_groups"].max() >= 1 and ref.n_local_clusters_.tolist() == ks
    assert report.missing == [] and report.rounds == ref.n_rounds_
    for i, lab in enumerate(ref.client_labels_):
        np.testing.assert_array_equal(np.load(tmp_path / f"labels{i}.npy"), lab)
    n = len(X_clients)
    assert [[u[i] for i in range(n)] for u in report.bytes_up] == ref.bytes_up_.tolist()
    assert [[d[i] for i in range(n)] for d in report.bytes_down] == ref.bytes_down_.tolist()
    # without the nodes' K_i the run differs (client 1 would have 3 clusters): the node values were used
    other = make_estimator("fedcref", random_state=3, init_labels=init, **common).fit_clients(X_clients)
    assert other.n_local_clusters_.tolist() == [2, 3, 2]


def test_per_node_values_are_checked(tmp_path):
    X_clients, init = _fedcref_digits_clients(per_class=10)
    w = _write_clients(tmp_path, X_clients[:1])["node0"]
    task = {"method": "fedcref", "params": {"hidden_layer_sizes": [4], "local_epochs": 1}, "random_state": 0}
    w.init_labels_path = str(tmp_path / "missing.npy")
    with pytest.raises(FileNotFoundError, match="init labels file"):
        w.summarize(task, run_key="r")
    np.save(tmp_path / "short.npy", init[0][:5])
    w.init_labels_path = str(tmp_path / "short.npy")
    with pytest.raises(ValueError, match="one label per row"):
        w.summarize(task, run_key="r")
    w.init_labels_path = None
    w.n_local_clusters = 0
    with pytest.raises(ValueError, match="n-local-clusters must be an integer >= 1"):
        w.summarize(task, run_key="r")
    w.n_local_clusters = 2
    with pytest.raises(ValueError, match="both by the run parameters and by this node"):
        w.summarize({**task, "params": {**task["params"], "n_local_clusters": [2, 3, 2]}}, run_key="r")
    with pytest.raises(ValueError, match="KFed takes no per-client value"):
        w.summarize({"method": "kfed", "params": {"n_clusters": 2}, "random_state": 0}, run_key="r")
    # an int in the run parameters is a default the node's value overrides
    from fastfc._state import ClientState

    w.summarize({**task, "params": {**task["params"], "n_local_clusters": 3}}, run_key="r")
    assert int(ClientState.load(w._state_file("r"))["K"]) == 2


# ------------------------------------------------ LocalFederation start-up, with stand-in tools
def _fake_tools(directory, superlink: str, supernode: str, flwr: str = 'print(\'{"success": true, "nodes": []}\')'):
    """A bin directory whose Flower tools are small Python scripts (``flower-superlink`` etc.)."""
    import sys

    directory.mkdir()
    for tool, body in (("flower-superlink", superlink), ("flower-supernode", supernode), ("flwr", flwr)):
        path = directory / tool
        path.write_text(f"#!{sys.executable}\nimport socket, sys, time\n{body}\n")
        path.chmod(0o755)
    return directory


def test_superlink_that_exits_is_reported_with_its_log(tmp_path):
    """A SuperLink that dies at start-up stops LocalFederation at once, with its exit code and
    the end of its log, instead of SuperNodes retrying against nothing."""
    from fastfc.flower import LocalFederation

    bin_dir = _fake_tools(tmp_path / "bin", superlink='print("port already in use"); sys.exit(3)',
                          supernode="time.sleep(60)")
    with pytest.raises(FederationError, match=r"(?s)superlink exited with code 3.*port already in use"):
        LocalFederation(tmp_path / "fed", [np.zeros((4, 2))], port=38711, bin_dir=str(bin_dir))


def test_supernodes_start_after_the_superlink_listens_and_an_exit_is_reported(tmp_path):
    """SuperNodes are started only once the SuperLink accepts connections (a SuperNode that finds
    none backs off for up to 20 s a try), and one that exits fails wait_online with its log."""
    from fastfc.flower import LocalFederation

    listen = ("time.sleep(1.0)\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
              "s.bind(('127.0.0.1', int(sys.argv[sys.argv.index('--port') + 1]))); s.listen()\ntime.sleep(60)")
    # the SuperNode checks that the SuperLink listens when it starts, and exits if not
    supernode = ("try:\n    socket.create_connection(('127.0.0.1', int(sys.argv[sys.argv.index('--superlink') + 1]"
                 ".split(':')[1])), timeout=1).close()\nexcept OSError:\n    print('no superlink'); sys.exit(5)\n"
                 "print('bad node config'); sys.exit(4)")
    bin_dir = _fake_tools(tmp_path / "bin", superlink=listen, supernode=supernode)
    with LocalFederation(tmp_path / "fed", [np.zeros((4, 2))], port=38731, bin_dir=str(bin_dir)) as fed:
        with pytest.raises(FederationError, match=r"(?s)supernode0 exited with code 4.*bad node config"):
            fed.wait_online(timeout=30)


# ------------------------------------------------------- well-formed uploads that do not fit the run
def _beyond_bound(field, value):
    """A tamper that sets ``field`` of the upload to ``value(old array)`` and re-encodes it with a valid
    digest, address and round, skipping the construction checks (what a broken or hostile client can send)."""
    def tamper(arr, history):
        import copy

        from fastfc.flower import encode_payload
        from fastfc.protocol import decode_message

        msg = copy.copy(decode_message(arr.tobytes()))
        object.__setattr__(msg, field, value(np.array(getattr(msg, field))))
        return encode_payload(msg)
    return tamper


def _big(a):
    return a * 1e300


def _int62(a):
    return np.full_like(a, 2 ** 62)


#: (method, params, round, field, value, reason): an upload field beyond what valid data can give, which
#: stopped the whole run before (server arithmetic overflowed: inf centres, an int64 wrap, a ValueError)
#: or was silently used
BEYOND_BOUND = [
    ("kfed", {"n_clusters": 4}, 0, "centers", _big, r"KFedSummary.centers: values of magnitude up to .* exceed"),
    ("kfed", {"n_clusters": 4}, 0, "feature_stats", _big, r"KFedSummary: feature_stats: a count of magnitude"),
    ("feca", {"n_clusters": 4}, 0, "radii", _big, r"FeCASummary: radii: a distance of .* exceeds"),
    ("fedhire", {"n_clusters": 4}, 0, "centers", _big, r"FedHIRESummary.centers: values of magnitude"),
    ("gold", {"n_clusters": 4, "mcpl_tol": 1e-3}, 0, "centers", _big, r"FedHIRESummary.centers: values of magnitude"),
    ("fedkstarhc", {"n_clusters": 4}, 0, "counts", _int62, r"FedKStarHCSummary.counts: values of magnitude"),
    ("fedkstarhc", {"n_clusters": None}, 0, "stds", _big, r"FedKStarHCSummary.stds: values of magnitude"),
    ("kfed", {"n_clusters": 4, "refine_rounds": 3}, 1, "sums", _big, r"RefineStats: sums: cluster 0 has a sum"),
    ("kfed", {"n_clusters": 4, "refine_rounds": 3}, 1, "feature_stats", _big, r"RefineStats: feature_stats: a count"),
    ("kfed", {"n_clusters": 4, "refine_rounds": 3}, 2, "counts", _int62, r"RefineStats.counts: values of magnitude"),
]


@pytest.mark.parametrize("method, params, rnd, field, value, reason", BEYOND_BOUND,
                         ids=[f"{m}-{i}-r{r}-{f}" for i, (m, _, r, f, *_) in enumerate(BEYOND_BOUND)])
def test_upload_beyond_valid_data_drops_only_its_sender(tmp_path, method, params, rnd, field, value, reason):
    """A well-formed upload (valid digest, address and round) holding means, spreads, counts or sums that no
    client's valid data can give is that client's failure, reported with its round and the field: the run goes
    on with the others exactly as if the client had been lost in that round (on-missing=continue), or stops
    naming it (fail). Before, each of these stopped the whole run with a server error or was used silently."""
    import re

    X_clients, _ = mixture_clients(1, k=4)
    workers = _write_clients(tmp_path, X_clients)
    task = {"method": method, "params": params, "random_state": 3}
    tamper = {"node1": (rnd, _beyond_bound(field, value))}
    report = run_server_phases(_memory_send(workers, tamper=tamper), list(workers), task, min_clients=3)
    assert [(f.node, f.client, f.round) for f in report.missing] == [("node1", 1, rnd)]
    assert re.search(reason, report.missing[0].reason), report.missing[0].reason
    assert "more than valid client data gives" in report.missing[0].reason
    expected, _ = drive_rounds(make_estimator(method, **params), X_clients, 3, {1: rnd})
    assert not (tmp_path / "labels1.npy").exists()
    for i in (0, 2, 3):
        np.testing.assert_array_equal(np.load(tmp_path / f"labels{i}.npy"), expected[i])
    with pytest.raises(FederationError, match=f"round {rnd}: .*node1 \\(client 1\\): .*more than valid client data"):
        run_server_phases(_memory_send(workers, tamper=tamper), list(workers), task, min_clients=3, on_missing="fail")


@pytest.mark.parametrize("method, params", [
    ("kfed", {"n_clusters": 4}), ("feca", {"n_clusters": 4}), ("fedhire", {"n_clusters": 4}),
    ("fedkstarhc", {"n_clusters": None}), ("kfed", {"n_clusters": 4, "refine_rounds": 2}),
])
def test_client_with_another_feature_count_is_dropped_by_the_majority(tmp_path, method, params):
    """A client whose data file has one column more sends a valid summary for 6 features while three
    clients send 5: the server drops that client (round 0, reason naming both counts) and labels the
    others as without it. Before, the server stopped the whole run ("client summaries have different
    feature counts"). With two against two, no count is the majority: the run stops, naming the counts."""
    X_clients, _ = mixture_clients(1, k=4)
    X_clients = [np.asarray(X) for X in X_clients]
    wide = [X if i != 1 else np.hstack([X, X[:, :1]]) for i, X in enumerate(X_clients)]
    workers = _write_clients(tmp_path, wide)
    task = {"method": method, "params": params, "random_state": 3}
    report = run_server_phases(_memory_send(workers), list(workers), task, min_clients=3)
    assert [(f.node, f.client, f.round) for f in report.missing] == [("node1", 1, 0)]
    assert report.missing[0].reason == "summary is for 6 features, but 3 of 4 clients' are for 5"
    expected, _ = drive_rounds(make_estimator(method, **params), X_clients, 3, {1: 0})
    for i in (0, 2, 3):
        np.testing.assert_array_equal(np.load(tmp_path / f"labels{i}.npy"), expected[i])
    tie = [X if i < 2 else np.hstack([X, X[:, :1]]) for i, X in enumerate(X_clients)]
    workers = _write_clients(tmp_path, tie)
    with pytest.raises(FederationError, match=r"round 0: 0 of 4 clients answered .*no majority \(2 for 5, 2 for 6"):
        run_server_phases(_memory_send(workers), list(workers), task, min_clients=1)


def _fedcref_status_instead(arr, history):
    """A valid FedCRefStatus (right address and round) where the server asked for another upload."""
    from fastfc.fedcref import FedCRefStatus
    from fastfc.flower import encode_payload
    from fastfc.protocol import decode_message

    msg = decode_message(arr.tobytes())
    status = FedCRefStatus(stable=True, frozen=False, n_refine=0, self_acc=1.0, n_features=msg.n_features)
    return encode_payload(status.addressed(client=msg.client, round=msg.round))


def _drop_last_column(a):
    return a[:, :-1]


#: (round, tamper, reason): FedCRef uploads that are well formed but do not fit the run. Round 0 = the local
#: models, 1 = the association scores, 2 = the first FedAvg update (groups form in iteration 1 here)
FEDCREF_MISFITS = [
    (0, _beyond_bound("params", _drop_last_column), r"its models have 2407 parameters each, the run's autoencoder \(64 features, hidden layers \(16, 8, 16\)\) "
                                                           r"has 2408"),
    (1, _beyond_bound("scores", _drop_last_column), r"its scores have shape \(\d, \d+\), expected"),
    (1, _fedcref_status_instead, r"sent a FedCRefStatus in round 1, where the server's last broadcast asked for a "
                                 r"FedCRefScores"),
    (2, _beyond_bound("params", _drop_last_column), r"its train update has parameters of shape"),
]


@pytest.mark.parametrize("rnd, tamper, reason", FEDCREF_MISFITS, ids=["models-width", "scores-shape", "wrong-kind",
                                                                       "update-width"])
def test_fedcref_upload_that_does_not_fit_drops_only_its_sender(tmp_path, rnd, tamper, reason):
    """A FedCRef client whose models have another size, whose scores miss a model, that answers with the
    wrong kind of upload or whose FedAvg update has another size is dropped in that round (reported with
    it); the run goes on exactly as if it had been lost then. Before, the first and last stopped the whole
    run with a ValueError in np.concatenate or a broadcast, the middle two with a MessageError."""
    import re

    X_clients, init = _fedcref_digits_clients(sets=((0, 1), (0, 1, 2), (1, 2), (0, 2)), per_class=30)
    params = {"init_labels": [lab.tolist() for lab in init], "hidden_layer_sizes": [16, 8, 16], "local_epochs": 20,
              "fl_rounds": 2, "fl_epochs": 3, "fl_first_epochs": 2, "max_iter": 2, "theta": 0.35,
              "learning_rate": 5e-3}
    task = json.loads(json.dumps({"method": "fedcref", "params": params, "random_state": 3}))
    workers = _write_clients(tmp_path, X_clients)
    report = run_server_phases(_memory_send(workers, tamper={"node1": (rnd, tamper)}), list(workers), task,
                               min_clients=3)
    assert [(f.node, f.client, f.round) for f in report.missing] == [("node1", 1, rnd)]
    assert re.search(reason, report.missing[0].reason), report.missing[0].reason
    est = make_estimator("fedcref", random_state=3, **params)
    expected, _ = drive_rounds(est, X_clients, 3, {1: rnd})
    whole = make_estimator("fedcref", random_state=3, **params).fit_clients(X_clients)
    assert whole.history_["n_groups"][0] >= 1  # round 2 is a FedAvg round
    assert not (tmp_path / "labels1.npy").exists()
    for i in (0, 2, 3):
        np.testing.assert_array_equal(np.load(tmp_path / f"labels{i}.npy"), expected[i])
