"""The three-phase API (client_summarize -> server_aggregate -> client_assign) and the
estimator machinery every method shares (issue 11, "Phase API and estimators").

Each test states its claim in its docstring. Data are small synthetic blobs, so the file
runs in seconds.
"""
from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

import fastfc
from fastfc import FeCA, FedHIRE, FedKStarHC, GOLD, KFed
from fastfc import feca as feca_mod
from fastfc._parallel import RandomStateWarning
from fastfc._state import ClientState, StateError
from fastfc.fed_hire import KModesInitError
from fastfc.flower import ClientFailure, ClientWorker, decode_payload, encode_payload, run_server_phases
from fastfc.protocol import MessageError

ROOT = Path(__file__).resolve().parents[1]

FACTORIES = {
    "kfed": lambda **kw: KFed(n_clusters=3, **kw),
    "kfed-nearest": lambda **kw: KFed(n_clusters=3, assign="nearest", **kw),
    "feca": lambda **kw: FeCA(n_clusters=3, **kw),
    "fedhire": lambda **kw: FedHIRE(n_clusters=3, **kw),
    "gold": lambda **kw: GOLD(n_clusters=3, mcpl_tol=1e-3, **kw),
    "fedkstarhc": lambda **kw: FedKStarHC(n_clusters=3, micro="kmeans", **kw),
}
METHOD_PARAMS = {  # the same estimators as the Flower task dicts
    "kfed": ("kfed", {"n_clusters": 3}),
    "kfed-nearest": ("kfed", {"n_clusters": 3, "assign": "nearest"}),
    "feca": ("feca", {"n_clusters": 3}),
    "fedhire": ("fedhire", {"n_clusters": 3}),
    "gold": ("gold", {"n_clusters": 3, "mcpl_tol": 1e-3}),
    "fedkstarhc": ("fedkstarhc", {"n_clusters": 3, "micro": "kmeans"}),
}
NAMES = list(FACTORIES)


def _clients(n_clients: int = 3, n_per: int = 100, seed: int = 0) -> list[np.ndarray]:
    """``n_clients`` matrices of shape (n_per, 4): three Gaussian blobs, every client holds all three."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0, 0, 0], [6, 0, 0, 0], [0, 6, 0, 0]])
    return [centres[rng.integers(3, size=n_per)] + rng.normal(size=(n_per, 4)) for _ in range(n_clients)]


def _phases(est, X_clients, random_state=0):
    """Run the three phases by hand: (summaries, states, model, replies, labels)."""
    out = [est.client_summarize(X, client_index=i, random_state=random_state) for i, X in enumerate(X_clients)]
    summaries, states = [s for s, _ in out], [st for _, st in out]
    model, replies = est.server_aggregate(summaries, random_state=random_state)
    labels = [est.client_assign(X, st, r) for X, st, r in zip(X_clients, states, replies)]
    return summaries, states, model, replies, labels


# ------------------------------------------------------------------ 1. addressing and state
@pytest.mark.parametrize("name", NAMES)
def test_messages_are_addressed_and_misrouted_replies_rejected(name):
    """Summary i says it comes from client i, reply i is addressed to client i (in-process and
    over bytes), and a client refuses another client's reply (old: silently mislabelled)."""
    X_clients = _clients()
    est = FACTORIES[name]()
    summaries, states, _, replies, labels = _phases(est, X_clients)
    assert [s.client for s in summaries] == [0, 1, 2]
    assert [r.client for r in replies] == [0, 1, 2]
    assert [type(r).from_bytes(r.to_bytes()).client for r in replies] == [0, 1, 2]
    assert [st.client for st in states] == [0, 1, 2]
    fitted = FACTORIES[name](random_state=0).fit_clients(X_clients)
    assert [s.client for s in fitted.client_summaries_] == [0, 1, 2]
    for a, b in zip(labels, fitted.client_labels_):
        np.testing.assert_array_equal(a, b)
    # client 0 is handed client 1's reply: refused, naming both clients (same rows, so only the address differs)
    with pytest.raises(MessageError, match="addressed to client 1, but this is client 0"):
        est.client_assign(X_clients[0], states[0], replies[1])


@pytest.mark.parametrize("name", NAMES)
def test_reply_for_another_feature_count_is_a_message_error(name):
    """A reply that is well formed but describes another feature count than the client's rows is refused
    as a MessageError naming both counts (was a ValueError from deep inside the assignment kernel)."""
    import dataclasses

    X_clients = _clients()
    est = FACTORIES[name]()
    _, states, _, replies, _ = _phases(est, X_clients)
    d = X_clients[0].shape[1]
    fields = {f.name: getattr(replies[0], f.name) for f in dataclasses.fields(replies[0]) if f.init}
    for key, value in list(fields.items()):
        if isinstance(value, np.ndarray) and value.ndim == 2 and value.shape[1] == d:
            fields[key] = value[:, :-1]
        elif isinstance(value, np.ndarray) and value.ndim == 1 and value.shape[0] == d and key != "local_to_global":
            fields[key] = value[:-1]
    fields["n_features"] = d - 1
    narrow = type(replies[0])(**fields).addressed(client=0)
    with pytest.raises(MessageError, match=f"for {d - 1} features, but this client's rows have {d}"):
        est.client_assign(X_clients[0], states[0], narrow)


@pytest.mark.parametrize("name", NAMES)
def test_bad_state_is_named_as_the_state(name):
    """client_assign with no state, a state of other rows, of another method, or a non-state
    object raises StateError naming the state (old: FedHIRE/GOLD AttributeError, others blamed
    the reply or labelled anyway)."""
    X_clients = _clients()
    est = FACTORIES[name]()
    _, states, _, replies, _ = _phases(est, X_clients)
    X0, st0, r0 = X_clients[0], states[0], replies[0]
    with pytest.raises(StateError, match="client state .*got None"):
        est.client_assign(X0, None, r0)
    with pytest.raises(StateError, match="ClientState"):
        est.client_assign(X0, np.zeros(len(X0), dtype=np.int64), r0)
    with pytest.raises(StateError, match="made for 100 rows .* X has shape \\(99, 4\\)"):
        est.client_assign(X0[:99], st0, r0)
    other = "FeCA" if name not in ("feca",) else "KFed"
    foreign = ClientState(method=other, client=0, n_samples=len(X0), n_features=4, values=dict(st0.values))
    with pytest.raises(StateError, match=f"{other} state of client 0.*not a {type(est).__name__} state"):
        est.client_assign(X0, foreign, r0)


def test_server_names_the_clients_of_each_feature_count():
    """Summaries for different feature counts reaching server_aggregate in one process: a ValueError that says
    which clients sent which count (before: only the counts, "[3, 4]")."""
    rng = np.random.default_rng(0)
    est = KFed(n_clusters=2)
    ups = [est.client_summarize(rng.normal(size=(30, d)), client_index=i, random_state=0)[0]
           for i, d in enumerate([3, 4, 3])]
    with pytest.raises(ValueError, match=r"different feature counts: 3 from client\(s\) 0, 2; 4 from client\(s\) 1$"):
        est.server_aggregate(ups, random_state=0)


def _with_value(state, name, value):
    values = dict(state.values)
    values[name] = value
    return ClientState(method=state.method, client=state.client, n_samples=state.n_samples,
                       n_features=state.n_features, values=values, round=state.round)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "feca"])  # FeCA keeps no per-row values
def test_damaged_state_values_are_a_state_error(name):
    """A state whose per-row labels are cut short, negative (below -1 for Fed-k*-HC, whose -1 marks rows set
    aside) or not integers, or whose kept feature spreads have another length or no finite values, raises
    StateError naming the value. Before, FedHIRE/GOLD returned labels for 99 of 100 rows, and a negative
    label silently indexed the reply from its end (KFed, FedHIRE, GOLD)."""
    X_clients = _clients()
    est = FACTORIES[name]()
    _, states, _, replies, labels = _phases(est, X_clients)
    X0, st0, r0 = X_clients[0], states[0], replies[0]
    low = -2 if name == "fedkstarhc" else -1
    lab = st0["labels"]
    bad = {"cut short": (lab[:-1], r"'labels' has shape \(99,\), expected \(100,\)"),
           "negative": (np.where(np.arange(lab.size) == 0, low, lab), f"'labels' holds {low}, below its smallest"),
           "floats": (lab.astype(np.float64), r"'labels' must be an array of integers, got float64")}
    if "local_std" in st0.values:
        bad["local_std short"] = (st0["local_std"][:-1], r"'local_std' has shape \(3,\), expected \(4,\)")
        bad["local_std nan"] = (np.full(4, np.nan), "'local_std' holds NaN or inf")
    for what, (value, match) in bad.items():
        with pytest.raises(StateError, match=match):
            est.client_assign(X0, _with_value(st0, "labels" if what in ("cut short", "negative", "floats") else
                                              "local_std", value), r0)
    np.testing.assert_array_equal(est.client_assign(X0, st0, r0), labels[0])


def test_damaged_fedcref_state_is_a_state_error():
    """Every value a FedCRef client keeps between rounds is checked against K_i, the rows and the run's
    model size when the state is read back: a damaged value is a StateError naming it (before, the
    cross-evaluation round took 9 of these 10 without a word, and K = 0 was blamed on the server's
    model set)."""
    from fastfc import FedCRef

    rng = np.random.default_rng(0)
    X_clients = [rng.uniform(size=(60, 6)) for _ in range(3)]
    est = FedCRef(n_local_clusters=2, hidden_layer_sizes=[4], local_epochs=2, random_state=0)
    out = [est.client_round(X, round=0, client_index=i, random_state=0) for i, X in enumerate(X_clients)]
    bcs, _, _ = est.server_round([u for u, _ in out], None, round=0, random_state=0)
    st0, bc0 = out[0][1], bcs[0]
    cases = {
        "K": (0, r"'K' must be an integer in \[1, "),
        "labels": (np.full(60, 2), r"'labels' holds 2, above its largest valid value 1"),
        "init_labels": (np.zeros(59, np.int64), r"'init_labels' has shape \(59,\), expected \(60,\)"),
        "models": (np.zeros((2, 7), np.float32), r"'models' has shape \(2, 7\), expected \(2, \d+\)"),
        "has_model": (np.ones(2, np.int64), "'has_model' must be an array of bools"),
        "sel_local": (np.array([0, 5]), "'sel_local' holds 5, above"),
        "fl_m": (np.zeros((1, 3), np.float32), r"'fl_m' has shape \(1, 3\), expected \(0, "),
        "ce_table": (np.zeros((60, 2), np.float32), r"'ce_table' has shape \(60, 2\), expected \(60, 0\)"),
        "stable": (1, "'stable' must be a bool"),
        "models_version": (0, r"'models_version' must be an integer in \[1, "),
    }
    for name, (value, match) in cases.items():
        with pytest.raises(StateError, match=match):
            est.client_round(X_clients[0], _with_value(st0, name, value), bc0, round=1, random_state=0)
    est.client_round(X_clients[0], st0, bc0, round=1, random_state=0)  # the undamaged state runs


def test_client_state_codec_roundtrip_and_rejections(tmp_path):
    """ClientState holds any dict of numeric arrays and small scalars, round-trips through
    bytes/files without pickle, and rejects damaged files, object arrays and bad fields."""
    values = {"labels": np.arange(5, dtype=np.int64), "w": np.eye(2, dtype=np.float32),
              "mask": np.array([True, False]), "n_iter": 7, "tol": 0.5, "tag": "x", "ok": True}
    st = ClientState(method="KFed", client=3, n_samples=5, n_features=2, values=values, round=2)
    path = tmp_path / "s.npz"
    st.save(path)
    back = ClientState.load(path)
    assert (back.method, back.client, back.n_samples, back.n_features, back.round) == ("KFed", 3, 5, 2, 2)
    for k, v in values.items():
        if isinstance(v, np.ndarray):
            assert back[k].dtype == v.dtype and np.array_equal(back[k], v) and not back[k].flags.writeable
        else:
            assert back[k] == v and type(back[k]) is type(v)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    with pytest.raises(StateError, match="cannot be read|not a fastfc"):
        ClientState.from_bytes(bytes(raw))
    with pytest.raises(StateError, match="cannot be read"):
        ClientState.from_bytes(b"not an archive")
    np.savez(tmp_path / "plain.npz", labels=np.arange(3))
    with pytest.raises(StateError, match="not a fastfc client state"):
        ClientState.load(tmp_path / "plain.npz")
    with pytest.raises(StateError, match="dtype object"):
        ClientState(method="KFed", client=0, n_samples=1, n_features=1, values={"a": np.array([None])})
    with pytest.raises(StateError, match="client must be an integer >= 0"):
        ClientState(method="KFed", client=-1, n_samples=1, n_features=1, values={})
    with pytest.raises(StateError, match="no value 'nope'"):
        st["nope"]


def _write_workers(tmp_path, X_clients):
    workers = {}
    for i, X in enumerate(X_clients):
        np.save(tmp_path / f"c{i}.npy", X)
        workers[f"node{i}"] = ClientWorker(str(tmp_path / f"c{i}.npy"), client_index=i,
                                          state_dir=str(tmp_path / f"s{i}"), labels_path=str(tmp_path / f"l{i}.npy"))
    return workers


def _send(workers, *, readdress=None, header=None):
    """In-memory transport; ``readdress``/``header`` tamper with one node's summary or header."""
    def send(phase, payloads, task):
        out = {}
        for node, payload in payloads.items():
            w = workers[node]
            if phase == "summarize":
                arr = w.summarize(task, run_key="r")
                if readdress and node in readdress:
                    msg = decode_payload(arr, method=task["method"].replace("gold", "fedhire"), kind="summary")
                    arr = encode_payload(msg.addressed(client=readdress[node]))
                head = {"client-index": w.client_index}
                if header and node in header:
                    head = header[node]
                out[node] = (head, arr)
            elif phase == "release":  # the server tells a client it dropped to discard its state
                out[node] = ({"released": w.release(run_key="r")}, None)
            else:
                out[node] = ({"n-labelled": w.assign(task, payload, run_key="r")}, None)
        return out
    return send


@pytest.mark.parametrize("name", ["kfed", "gold"])
def test_flower_runner_checks_addresses_and_persists_state_records(tmp_path, name):
    """Over the Flower runner the state is a ClientState archive on disk (no bare ndarray), labels
    equal fit_clients, a summary whose address differs from its client-index header is that
    client's fault, and a client refuses a reply addressed to another client."""
    X_clients = _clients()
    method, params = METHOD_PARAMS[name]
    task = {"method": method, "params": params, "random_state": 4}
    workers = _write_workers(tmp_path, X_clients)
    report = run_server_phases(_send(workers), list(workers), task, min_clients=3)
    ref = FACTORIES[name](random_state=4).fit_clients(X_clients)
    assert report.missing == []
    for i, lab in enumerate(ref.client_labels_):
        np.testing.assert_array_equal(np.load(tmp_path / f"l{i}.npy"), lab)

    report = run_server_phases(_send(workers, readdress={"node1": 2}), list(workers), task, min_clients=2)
    assert [f.node for f in report.missing] == ["node1"]
    assert "summary addressed to client 2 but sent as client-index 1" in report.missing[0].reason

    # a misrouted reply: client 0 is given the reply meant for client 1
    w0 = workers["node0"]
    w0.summarize(task, run_key="x")
    assert ClientState.load(w0._state_file("x")).client == 0
    est = FACTORIES[name](random_state=4)
    s1, _ = est.client_summarize(X_clients[1], client_index=1)
    s0, _ = est.client_summarize(X_clients[0], client_index=0)
    _, replies = est.server_aggregate([s0, s1])
    with pytest.raises(MessageError, match="addressed to client 1, but this is client 0"):
        w0.assign(task, encode_payload(replies[1]), run_key="x")


# ------------------------------------------------------------------ 2. threads
@pytest.mark.parametrize("name", NAMES)
def test_labels_do_not_depend_on_n_jobs_in_fit_and_phase_api(name):
    """Labels are identical for n_jobs=1 and n_jobs=2, through fit_clients and through the phase
    API (clients of 300 rows, so scikit-learn's Lloyd could split its sums over two OpenMP
    threads), and the estimator keeps no thread state of its own (old: _kernel_threads)."""
    X_clients = _clients(n_per=300, seed=1)
    runs = [FACTORIES[name](random_state=2, n_jobs=j).fit_clients(X_clients) for j in (1, 2)]
    for a, b in zip(runs[0].client_labels_, runs[1].client_labels_):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(runs[0].cluster_centers_, runs[1].cluster_centers_)
    phase = [_phases(FACTORIES[name](n_jobs=j), X_clients, random_state=2)[4] for j in (1, 2)]
    for a, b, c in zip(phase[0], phase[1], runs[0].client_labels_):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    assert not any("thread" in k for k in vars(runs[1]))


def test_kfed_nearest_assign_works_outside_fit_clients():
    """KFed(assign='nearest').client_assign works on a fresh estimator (old: AttributeError
    '_kernel_threads', set only by fit_clients) and labels rows by their nearest global centre
    (in the reply's federated units: per-feature distance weights)."""
    X_clients = _clients()
    est = KFed(n_clusters=3, assign="nearest", random_state=0)
    s, st = est.client_summarize(X_clients[0], client_index=0)
    _, replies = est.server_aggregate([s])
    labels = KFed(n_clusters=3, assign="nearest", random_state=0).client_assign(X_clients[0], st, replies[0])
    w = replies[0].feature_weight
    assert w.shape == (X_clients[0].shape[1],)  # the default works in federated units
    d = (((X_clients[0][:, None, :] - replies[0].centers[None]) * w) ** 2).sum(-1)
    np.testing.assert_array_equal(labels, d.argmin(1))


def test_every_phase_runs_with_openmp_pinned_to_one_thread():
    """The base pins OpenMP to one thread inside the worker callable of every phase (client
    threads and server), so a method that calls an OpenMP library implicitly cannot get
    thread-count-dependent results: a hook sees one OpenMP thread even with n_jobs=2."""
    from threadpoolctl import threadpool_info

    seen = []

    def openmp_threads():
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "openmp"}

    class Probe(KFed):
        def _summarize(self, X, rng, n_threads):
            seen.append(("summarize", openmp_threads(), n_threads))
            return super()._summarize(X, rng, n_threads)

        def _aggregate(self, summaries, rng, n_threads):
            seen.append(("aggregate", openmp_threads(), n_threads))
            return super()._aggregate(summaries, rng, n_threads)

        def _assign(self, X, state, reply, n_threads):
            seen.append(("assign", openmp_threads(), n_threads))
            return super()._assign(X, state, reply, n_threads)

    Probe(n_clusters=3, random_state=0, n_jobs=2).fit_clients(_clients())
    if not any(s[1] for s in seen):
        pytest.skip("no OpenMP runtime loaded")
    assert {s[0] for s in seen} == {"summarize", "aggregate", "assign"}
    assert all(s[1] == {1} for s in seen), seen
    # 3 clients on 2 threads: each client's kernels get 1 thread, the server 2
    assert {s[2] for s in seen if s[0] != "aggregate"} == {1} and [s[2] for s in seen if s[0] == "aggregate"] == [2]


def test_thread_controller_sees_openmp_even_when_built_first():
    """The cached threadpoolctl controller behind the pins knows scikit-learn's OpenMP runtime
    even when it is built before any module that loads it (e.g. a Fed-HIRE fit first in a
    process), so the OpenMP pin is never a silent no-op."""
    import subprocess

    code = ("from fastfc._parallel import _get_controller\n"
            "print(sum(i['user_api'] == 'openmp' for i in _get_controller().info()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(ROOT / "tests"), env={**__import__("os").environ,
                                                       "PYTHONPATH": str(Path(fastfc.__file__).parents[1])})
    assert int(out.stdout.strip()) >= 1


# ------------------------------------------------------------------ 3. random_state rule
def test_random_state_rule_fit_versus_phase_api():
    """fit/fit_clients accept None, an int or a RandomState (drawn once per fit) and reject a
    Generator; the phase API needs an int: RandomState/Generator raise TypeError asking for an
    int (old: accepted, fresh entropy on every call, so parties disagreed) and None warns that
    the parties will not agree."""
    X_clients = _clients()
    a = KFed(n_clusters=3, random_state=np.random.RandomState(5)).fit_clients(X_clients)
    b = KFed(n_clusters=3, random_state=np.random.RandomState(5)).fit_clients(X_clients)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    with pytest.raises(ValueError, match="random_state"):
        KFed(n_clusters=3, random_state=np.random.default_rng(0)).fit_clients(X_clients)
    for rs in (np.random.RandomState(0), np.random.default_rng(0)):
        with pytest.raises(TypeError, match="must be an int for the phase API"):
            KFed(n_clusters=3).client_summarize(X_clients[0], random_state=rs)
        with pytest.raises(TypeError, match="pass the same int"):
            KFed(n_clusters=3, random_state=rs).client_summarize(X_clients[0])
    s, _ = KFed(n_clusters=3).client_summarize(X_clients[0], random_state=1)
    with pytest.raises(TypeError, match="must be an int"):
        KFed(n_clusters=3).server_aggregate([s], random_state=np.random.RandomState(0))
    with pytest.warns(RandomStateWarning, match="will not agree"):
        KFed(n_clusters=3).client_summarize(X_clients[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KFed(n_clusters=3, random_state=7).client_summarize(X_clients[0])


# ------------------------------------------------------------------ 4. validation
@pytest.mark.parametrize("bad, exc, msg", [
    (1.5, TypeError, "client_index must be an int >= 0, got 1.5"),
    (-1, ValueError, "client_index must be an int >= 0, got -1"),
    (True, TypeError, "client_index must be an int >= 0, got True"),
    ("0", TypeError, "client_index must be an int"),
])
def test_client_index_must_be_a_non_negative_int(bad, exc, msg):
    """client_index is an int >= 0 (numpy ints too); floats, bools, strings and negatives are
    rejected with a message naming the argument (old: 1.5 accepted, -1 unnamed)."""
    X = _clients()[0]
    with pytest.raises(exc, match=re.escape(msg)):
        KFed(n_clusters=3, random_state=0).client_summarize(X, client_index=bad)
    assert KFed(n_clusters=3, random_state=0).client_summarize(X, client_index=np.int64(2))[0].client == 2


@pytest.mark.parametrize("name", NAMES)
def test_bool_is_not_an_integer_parameter(name):
    """n_clusters=True (and every other integer parameter given a bool) is rejected by every
    estimator, in fit and in the phase API (old: bool is an Integral, so it was n_clusters=1)."""
    X_clients = _clients()
    est = FACTORIES[name](random_state=0).set_params(n_clusters=True)
    with pytest.raises(ValueError, match="'n_clusters' parameter .* not a bool"):
        est.fit_clients(X_clients)
    with pytest.raises(ValueError, match="not a bool"):
        est.client_summarize(X_clients[0])
    int_params = [p for p, c in type(est)._parameter_constraints.items()
                  if p not in ("n_clusters", "random_state") and any("Integral" in repr(x) for x in c)]
    for p in int_params:
        with pytest.raises(ValueError, match=f"'{p}' parameter"):
            FACTORIES[name](random_state=0).set_params(**{p: True}).fit_clients(X_clients)


def test_sparse_input_gets_a_clear_type_error():
    """fit, fit_clients, the phase API and predict given scipy sparse matrices raise a TypeError
    that says to pass dense data (old: confusing errors from len() of a sparse matrix)."""
    X_clients = _clients()
    sp = [scipy.sparse.csr_matrix(X) for X in X_clients]
    est = KFed(n_clusters=3, random_state=0)
    with pytest.raises(TypeError, match="client 1 data is a scipy sparse csr matrix.*dense"):
        est.fit_clients([X_clients[0], sp[1]])
    with pytest.raises(TypeError, match="X_clients is a scipy sparse"):
        est.fit_clients(scipy.sparse.vstack(sp))
    with pytest.raises(TypeError, match="sparse.*toarray"):
        est.fit(scipy.sparse.vstack(sp).tocsc())
    with pytest.raises(TypeError, match="sparse"):
        est.client_summarize(sp[0])
    est.fit_clients(X_clients)
    with pytest.raises(TypeError, match="sparse"):
        est.predict(sp[0])


# ------------------------------------------------------------------ 5. restarts and progress
def test_restart_failure_keeps_its_type_and_traceback(monkeypatch):
    """When every whole-run restart fails, the last error is raised with its own type
    (KModesInitError), its traceback and a note with the attempt count (old: a plain ValueError
    'from None')."""
    def never(*args, **kwargs):
        raise KModesInitError("too few distinct label rows")

    monkeypatch.setattr("fastfc.fed_hire.server_hierarchy", never)
    with pytest.raises(KModesInitError) as info:
        FedHIRE(n_clusters=3, max_retries=2, random_state=0).fit_clients(_clients())
    text = str(info.value) + " ".join(getattr(info.value, "__notes__", []))
    assert "too few distinct label rows" in text and "all 3 attempt(s)" in text
    assert any(tb.name == "_aggregate" for tb in info.traceback)  # the frame that raised


def test_progress_reports_phases_and_restarts(monkeypatch):
    """progress(phase, done, total) reports every client's summarize and assign, ("server", 0, 1)
    before and ("server", 1, 1) after the server phase, and ("restart", r, max_restarts) when
    restart r begins; n_restarts_ counts the restarts."""
    from fastfc import fed_hire

    real, calls = fed_hire.server_hierarchy, {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] <= 2:
            raise KModesInitError("not yet")
        return real(*args, **kwargs)

    monkeypatch.setattr(fed_hire, "server_hierarchy", flaky)
    events = []
    est = FedHIRE(n_clusters=3, max_retries=5, random_state=0).fit_clients(
        _clients(), progress=lambda *e: events.append(e))
    assert est.n_restarts_ == 2
    assert [e for e in events if e[0] == "restart"] == [("restart", 1, 5), ("restart", 2, 5)]
    assert events[-4:-3] == [("server", 1, 1)] and events[-3:] == [("assign", d, 3) for d in (1, 2, 3)]
    first = events[:5]
    assert first == [("summarize", 1, 3), ("summarize", 2, 3), ("summarize", 3, 3), ("server", 0, 1),
                     ("restart", 1, 5)]
    assert events.count(("server", 0, 1)) == 3 and events.count(("server", 1, 1)) == 1
    assert sum(e[0] == "summarize" for e in events) == 9


# ------------------------------------------------------------------ 6. server bugs are not missing clients
def test_server_decode_bug_propagates_and_bad_headers_are_the_clients_fault(tmp_path, monkeypatch):
    """In run_server_phases a missing or malformed client-index header is that client's fault,
    but an exception that is not a MessageError on the client's bytes (a server bug) propagates
    instead of being reported as a missing client (old: any ValueError/TypeError/KeyError was)."""
    X_clients = _clients()
    workers = _write_workers(tmp_path, X_clients)
    task = {"method": "kfed", "params": {"n_clusters": 3}, "random_state": 0}
    bad = {"node0": {}, "node1": {"client-index": "1"}}
    report = run_server_phases(_send(workers, header=bad), list(workers), task, min_clients=1)
    assert [f.node for f in report.missing] == ["node0", "node1"]
    assert all("client-index" in f.reason for f in report.missing)

    def buggy(*args, **kwargs):
        raise ValueError("server-side decoding bug")

    monkeypatch.setattr("fastfc.flower.decode_payload", buggy)
    with pytest.raises(ValueError, match="server-side decoding bug"):
        run_server_phases(_send(workers), list(workers), task, min_clients=1)
    assert isinstance(ClientFailure("n", "r"), ClientFailure)


# ------------------------------------------------------------------ 7. float32 versus float64
def _near_ties(rng, n=400, d=5, k=6):
    """Centres (k, d) in float64 and rows (n, d), exactly representable in float32, at a near-tie."""
    C = rng.normal(size=(k, d)) * 3
    a, b = rng.integers(k, size=n), rng.integers(k, size=n)
    mid = (C[a] + C[b]) / 2 + rng.normal(scale=1e-9, size=(n, d))
    rows = np.vstack([mid, rng.normal(size=(n, d)) * 3])
    return C, rows.astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("d, k", [(5, 6), (16, 32)])  # direct kernel and BLAS-screened kernel
def test_float32_and_float64_rows_get_the_same_labels(d, k):
    """predict, FeCA's assignment and KFed-nearest label float32 rows exactly as the same rows in
    float64, near-ties included (old: float32 rows were compared with centres cast to float32)."""
    rng = np.random.default_rng(d)
    C, X64 = _near_ties(rng, d=d, k=k)
    X32 = X64.astype(np.float32)
    from fastfc._assign import assign_nearest

    lab64, d64 = assign_nearest(X64, C, return_distances=True)
    lab32, d32 = assign_nearest(X32, C, return_distances=True)
    np.testing.assert_array_equal(lab32, lab64)
    np.testing.assert_array_equal(d32, d64)
    assert d32.dtype == np.float64
    old = assign_nearest(X32, C.astype(np.float32))  # the all-float32 computation differs on near-ties
    assert (old != lab64).any()

    est = KFed(n_clusters=k, random_state=0).fit(rng.normal(size=(10 * k, d)))
    est.cluster_centers_ = C
    np.testing.assert_array_equal(est.predict(X32), est.predict(X64))
    # the raw-units assignment equals the kernel's; the default federated units (per-feature weights)
    # must give float32 and float64 rows the same labels too
    for cls, kw in ((FeCA, {"units": None}), (KFed, {"assign": "nearest", "units": None}), (FeCA, {}),
                    (KFed, {"assign": "nearest"})):
        e = cls(n_clusters=2, random_state=0, **kw)
        for X in (X64, X32):
            s, st = e.client_summarize(X, client_index=0)
            _, replies = e.server_aggregate([s])
            reply = type(replies[0])(**{**{f: getattr(replies[0], f) for f in replies[0].__dataclass_fields__},
                                        "centers": C})
            reply = reply.addressed(client=0)
            if X is X64:
                ref = e.client_assign(X64, st, reply)
            else:
                np.testing.assert_array_equal(e.client_assign(X32, st, reply), ref)
        if kw.get("units", "federated") is None:
            np.testing.assert_array_equal(ref, lab64)


# ------------------------------------------------------------------ 8. dependency floors, FeCA fallback
def _floors() -> dict[str, str]:
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"^dependencies = \[(.*?)\]", text, re.S | re.M).group(1)
    return {m.group(1).lower(): m.group(2) for m in re.finditer(r'"([A-Za-z0-9_-]+)>=([0-9.]+)', deps)}


def test_dependency_floors_are_the_versions_the_min_versions_leg_installs():
    """Every runtime dependency floor in pyproject.toml is pinned exactly by the CI leg
    .ci/min_versions.sh (which runs tests on those versions), .ci/run runs that leg, and
    scikit-learn's floor is at least 1.6 (validate_data and ensure_all_finite)."""
    floors = _floors()
    assert set(floors) == {"numpy", "scipy", "scikit-learn", "numba", "threadpoolctl"}
    script = (ROOT / ".ci" / "min_versions.sh").read_text()
    pins = dict(re.findall(r"\b([a-z-]+)==([0-9.]+)", script))
    for name, floor in floors.items():
        assert pins.get(name) == floor, (name, floor, pins)
    assert tuple(int(p) for p in floors["scikit-learn"].split(".")[:2]) >= (1, 6)
    assert "min_versions.sh" in (ROOT / ".ci" / "run").read_text()


def test_feca_fallback_without_private_sklearn_lloyd(monkeypatch):
    """Without scikit-learn's private _kmeans_single_lloyd / _is_same_clustering (moved in some
    release), FeCA falls back to the KMeans estimator and a numpy partition test and gets the same
    labels and (to rounding) the same centres, with n_init > 1 exercising the keep-best rule."""
    X_clients = _clients(n_per=150, seed=3)
    fast = FeCA(n_clusters=3, n_init=3, random_state=1).fit_clients(X_clients)
    monkeypatch.setattr(feca_mod, "_HAVE_SKLEARN_LLOYD", False)
    monkeypatch.setattr(feca_mod, "_same_clustering", feca_mod._same_clustering_numpy)
    slow = FeCA(n_clusters=3, n_init=3, random_state=1).fit_clients(X_clients)
    np.testing.assert_array_equal(slow.labels_, fast.labels_)
    np.testing.assert_allclose(slow.cluster_centers_, fast.cluster_centers_, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(slow.client_n_iter_, fast.client_n_iter_)
    from sklearn.cluster._k_means_common import _is_same_clustering

    rng = np.random.default_rng(0)
    for _ in range(50):
        a = rng.integers(3, size=12).astype(np.int32)
        b = rng.permutation(3).astype(np.int32)[a] if rng.random() < 0.5 else rng.integers(3, size=12).astype(np.int32)
        assert feca_mod._same_clustering_numpy(a, b, 3) == bool(_is_same_clustering(a, b, 3))


# ------------------------------------------------------------------ 9. dead code, __all__
def test_public_names_exist_and_dead_code_is_gone():
    """Every name in every fastfc module's __all__ exists; the unused check_n_clusters_vs_data,
    _model_cls and flower.APP_DIR (a path outside the wheel) are gone."""
    for mod in pkgutil.walk_packages(fastfc.__path__, "fastfc."):
        if mod.name.startswith("fastfc._kernels._") or mod.name == "fastfc.__main__":
            continue
        m = importlib.import_module(mod.name)
        for name in getattr(m, "__all__", []):
            assert hasattr(m, name), f"{mod.name}.__all__ lists missing {name!r}"
    from fastfc import _validation, flower

    assert not hasattr(_validation, "check_n_clusters_vs_data")
    assert not hasattr(flower, "APP_DIR") and "APP_DIR" not in flower.__all__
    for cls in (KFed, FeCA, FedHIRE, GOLD, FedKStarHC):
        assert not hasattr(cls, "_model_cls")
    assert "fastfc" in sys.modules
