"""Real federated runs on Flower: every fastfc method as a Flower ServerApp / ClientApp.

The apps speak fastfc's own protocol (:mod:`fastfc.protocol`): each Flower message
carries one fastfc message as raw bytes (a ``uint8`` array in an ``ArrayRecord``,
never pickle) plus a small ``ConfigRecord`` header, and every payload is validated
when read. The same estimator rounds run as in-process
(:meth:`~fastfc.base.BaseFederatedClusterer.client_round`,
:meth:`~fastfc.base.BaseFederatedClusterer.server_round`,
:meth:`~fastfc.base.BaseFederatedClusterer.client_assign`), so with the same
``random_state`` every client's labels equal those of ``fit_clients``, for the
one-shot methods and for multi-round runs (``refine_rounds``, ``FedKMeans``) alike.

Flow of one run:

1. The ServerApp waits for the SuperNodes (``num-clients``, at most
   ``wait-timeout`` seconds) and sends each a ``summarize`` task (round 0).
2. Each ClientApp loads *its own* data (node config ``data-path``), runs its
   round, keeps its private state on local disk (a
   :class:`~fastfc._state.ClientState` archive, no pickle, one file per run and
   client) and replies with its upload, addressed with its ``client-index`` (node
   config), which fixes its position, hence its random stream.
3. The server validates the uploads (class of the round, address equal to the
   sender's ``client-index``, round stamp; anything else is that client's fault),
   applies the missing-client policy (``min-clients``, ``on-missing``) and runs
   its round. Round 0 restarts with fresh randomness after a method's restart error.
4. While the server is not done, it sends each client still in the run the
   broadcast it made for it in a ``round`` task (round ``r >= 1``); the client
   checks that the broadcast is the one its method expects in round ``r``,
   addressed to it and stamped ``r - 1``, runs round ``r`` from its stored state
   and uploads. The missing-client policy applies in every round: a client lost
   in round ``r`` is out of the run (no labels) and reported with round ``r``, or
   the run stops with an error naming the round and the client.
5. When done, each client gets its final broadcast in an ``assign`` task, labels
   its rows, writes them locally (node config ``labels-path``) and removes its
   state; only a count goes back. Per-row labels never leave a client.
6. The server writes a JSON report (run config ``report-path``): who answered,
   who was lost in which round and why, the global model's size, the rounds run,
   and per round the seconds and the wire bytes up and down of every client.

The transport-independent parts (:class:`ClientWorker`, :func:`run_server_phases`)
need no Flower and are what the tests exercise in-process; the Flower glue is
:data:`client_app` / :data:`server_app`, built lazily by :func:`make_client_app`
and :func:`make_server_app` (``pip install 'fastfc[flower]'``).
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np

from ._state import ClientState
from .experiment import make_estimator
from .protocol import Message, MessageError, decode_message

__all__ = [
    "ClientWorker",
    "ClientFailure",
    "FederationError",
    "RunReport",
    "encode_payload",
    "decode_payload",
    "run_server_phases",
    "make_client_app",
    "make_server_app",
    "LocalFederation",
    "write_app_project",
]

_APP_PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "fastfc-flower"
version = "0.1.0"
description = "fastfc federated clustering as a Flower app"
license = "BSD-3-Clause"
dependencies = ["fastfc[flower]"]

[tool.setuptools]
py-modules = []

[tool.flwr.app]
publisher = "fastfc"

[tool.flwr.app.components]
serverapp = "fastfc.flower:server_app"
clientapp = "fastfc.flower:client_app"

[tool.flwr.app.config]
method = "kfed"
params = "{{}}"
random-state = 0
num-clients = {n_clients}
min-clients = {min_clients}
on-missing = "continue"
wait-timeout = 60.0
reply-timeout = 120.0
report-path = "fastfc-report.json"
"""


def write_app_project(directory, *, n_clients: int = 3, min_clients: int | None = None) -> Path:
    """Write the Flower app project (a ``pyproject.toml``) that runs fastfc into ``directory``.

    Its components are :data:`server_app` and :data:`client_app` of this module; the
    run config (method, params, random-state, client counts, policy, time-outs,
    report path) can be overridden per run with ``flwr run ... --run-config``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    min_clients = n_clients if min_clients is None else min_clients
    (directory / "pyproject.toml").write_text(_APP_PYPROJECT.format(n_clients=n_clients, min_clients=min_clients))
    return directory

FLWR_MISSING = "fastfc.flower needs Flower (flwr): pip install 'fastfc[flower]'"
#: message type of every fastfc task (Flower's custom "query" messages)
MESSAGE_TYPE = "query"


class FederationError(RuntimeError):
    """A federated run cannot complete (too few clients answered, or a client misbehaved)."""


# -------------------------------------------------------------- wire payloads
def encode_payload(msg: Message) -> np.ndarray:
    """A fastfc message as a read-only ``uint8`` array (its validated wire bytes)."""
    return np.frombuffer(msg.to_bytes(), dtype=np.uint8)


def decode_payload(arr: Any, *, method: str | None, kind: str | None) -> Message:
    """Read and validate a fastfc message from a ``uint8`` array.

    Raises
    ------
    MessageError
        If the array is not ``uint8`` bytes or the message is malformed, of
        another method or kind, truncated or tampered with.
    """
    arr = np.asarray(arr)
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise MessageError(f"payload must be a 1-D uint8 array, got {arr.dtype} with shape {arr.shape}")
    return decode_message(arr.tobytes(), method=method, kind=kind)


# ---------------------------------------------------------------- client side
def _load_client_data(path: str | os.PathLike) -> np.ndarray:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"client data file {str(path)!r} does not exist")
    from ._validation import FILE_READ_ERRORS

    try:
        if path.suffix == ".npy":
            return np.load(path, allow_pickle=False)
        with np.load(path, allow_pickle=False) as z:
            keys = list(z.files)
            if "X" in keys:
                return z["X"]
    except FILE_READ_ERRORS as exc:  # a damaged file: one error type, naming it (the estimator checks the rows)
        raise ValueError(f"client data file {str(path)!r} cannot be read: {type(exc).__name__}: {exc}") from None
    raise ValueError(f"client data file {str(path)!r} has no array 'X' (keys: {', '.join(keys)})")


def _decode_expected(arr: Any, cls: type[Message], what: str) -> Message:
    """Read a payload strictly: it must be a ``cls`` message (raises MessageError otherwise)."""
    if arr is None:
        raise MessageError(f"no {what} was sent with the task")
    # ``cls`` is a registered message class, or the unregistered base of a method's family of
    # messages (no KIND) when the kind depends on the run's state, e.g. FedCRef's uploads.
    msg = decode_payload(arr, method=cls.METHOD or None, kind=cls.KIND or None)
    if not isinstance(msg, cls):
        raise MessageError(f"expected a {cls.__name__} {what}, got {type(msg).__name__}")
    return msg


def _final_cls(est, rnd: int) -> type[Message]:
    """Class of the final broadcast a server sends in round ``rnd`` (the reply after round 0)."""
    return est._broadcast_cls(rnd + 1)


@dataclass
class ClientWorker:
    """One client's side of a distributed run, independent of the transport.

    Parameters
    ----------
    data_path : str
        The client's own data: a ``.npy`` matrix or an ``.npz`` with key ``X``.
    client_index : int
        Position of this client in the federation (selects its random stream;
        must be unique in a run).
    state_dir : str, default=None
        Where the private state between rounds is kept (default: next to the data).
        One file per run and client, replaced after every round and removed when
        the client has labelled its rows; files of this client left by runs that
        never finished are removed once they are ``stale_after`` seconds old.
    labels_path : str, default=None
        Where the labels are written (default: ``<data>.labels.npy``).
    stale_after : float, default=86400
        Age (seconds) after which another run's state file of this client counts
        as left over from an interrupted run and is removed in round 0.
    init_labels_path : str, default=None
        This client's own initial labels (a ``.npy`` of one integer per row), for methods
        with per-client initial labels (FedCRef's ``init_labels``, e.g. the paper's dirty
        initialisation). They stay on the node: the estimator gets them as
        ``{client_index: labels}``, for this client only.
    n_local_clusters : int, default=None
        This client's own K_i (FedCRef's ``n_local_clusters``), set the same way; it
        overrides an int of the run parameters (a per-client list there is an error).
    """

    data_path: str
    client_index: int
    state_dir: str | None = None
    labels_path: str | None = None
    stale_after: float = 86400.0
    init_labels_path: str | None = None
    n_local_clusters: int | None = None

    def _estimator(self, task: dict, n_rows: int):
        """The task's estimator, with this node's own per-client values (``init_labels_path``,
        ``n_local_clusters``) set for this client only."""
        params = dict(task["params"])
        local = {}
        if self.init_labels_path is not None:
            path = Path(self.init_labels_path)
            if not path.is_file():
                raise FileNotFoundError(f"client {self.client_index}: init labels file {str(path)!r} does not exist")
            from ._validation import FILE_READ_ERRORS

            try:
                labels = np.load(path, allow_pickle=False)
            except FILE_READ_ERRORS as exc:
                raise ValueError(f"client {self.client_index}: init labels file {str(path)!r} cannot be read: "
                                 f"{type(exc).__name__}: {exc}") from None
            if not isinstance(labels, np.ndarray):
                raise ValueError(f"client {self.client_index}: init labels file {str(path)!r} is not a .npy array")
            if labels.ndim != 1 or labels.shape[0] != n_rows:
                raise ValueError(f"client {self.client_index}: init labels file {str(path)!r} holds shape "
                                 f"{labels.shape}, expected ({n_rows},) (one label per row of its data)")
            local["init_labels"] = labels
        if self.n_local_clusters is not None:
            k = self.n_local_clusters
            if not isinstance(k, Integral) or isinstance(k, bool) or k < 1:
                raise ValueError(f"client {self.client_index}: n-local-clusters must be an integer >= 1, got {k!r}")
            local["n_local_clusters"] = int(k)
        est = make_estimator(task["method"], **params)
        if local:
            allowed = getattr(est, "_per_client_params", ())
            for name, value in local.items():
                if name not in allowed:
                    raise ValueError(f"client {self.client_index}: the node sets {name}, but {type(est).__name__} "
                                     "takes no per-client value of it")
                if isinstance(params.get(name), (list, tuple, dict)):
                    raise ValueError(f"client {self.client_index}: {name} is given per client both by the run "
                                     "parameters and by this node; give it in one place")
                params[name] = {self.client_index: value}
            est = make_estimator(task["method"], **params)
        return est

    _STATE_PREFIX = ".fastfc-state-"

    def _state_dir(self) -> Path:
        base = Path(self.state_dir) if self.state_dir else Path(self.data_path).resolve().parent
        base.mkdir(parents=True, exist_ok=True)
        return base

    def _state_file(self, run_key: str) -> Path:
        return self._state_dir() / f"{self._STATE_PREFIX}{run_key}-client{self.client_index}.npz"

    def _save_state(self, state: ClientState, run_key: str) -> None:
        """Replace this run's state file atomically (a crash mid-write leaves the previous round's)."""
        path = self._state_file(run_key)
        tmp = path.with_name(path.name + ".tmp")
        state.save(tmp)
        os.replace(tmp, path)

    def _load_state(self, run_key: str, round: int) -> ClientState:
        path = self._state_file(run_key)
        if not path.is_file():
            raise FederationError(f"client {self.client_index}: no state of this run to continue from in round "
                                  f"{round} (did this client take part in round 0?)")
        return ClientState.load(path)

    def _remove_stale_states(self, run_key: str) -> None:
        """Remove this client's state files of other runs older than ``stale_after`` seconds."""
        now = time.time()
        keep = self._state_file(run_key).name
        for path in self._state_dir().glob(f"{self._STATE_PREFIX}*-client{self.client_index}.npz*"):
            try:
                if path.name != keep and now - path.stat().st_mtime > self.stale_after:
                    path.unlink()
            except OSError:  # removed concurrently, or not ours to remove: leave it
                pass

    def summarize(self, task: dict, *, run_key: str) -> np.ndarray:
        """Round 0 (the method's client phase): keep the state locally; return the summary bytes."""
        return self.run_round({**task, "round": 0}, None, run_key=run_key)

    def run_round(self, task: dict, payload: Any, *, run_key: str) -> np.ndarray:
        """Run client round ``task["round"]``; keep the new state locally; return the upload bytes.

        Parameters
        ----------
        task : dict
            ``method``, ``params``, ``random_state``, ``restart`` (round 0's restart number)
            and ``round``.
        payload : uint8 array or None
            The broadcast the server sent this client in round ``round - 1`` (None in round 0).
            It is read strictly: it must be the class the method expects in this round
            (``_broadcast_cls(round)``), addressed to this client and stamped ``round - 1``.
        run_key : str
            Names this run (the state file is keyed by run and client).

        Returns
        -------
        upload : ndarray of uint8
            The client's upload of this round (wire bytes).
        """
        X = _load_client_data(self.data_path)
        est = self._estimator(task, X.shape[0])
        rnd = int(task.get("round", 0))
        restart = int(task.get("restart", 0))
        if rnd == 0:
            self._remove_stale_states(run_key)
            upload, state = est.client_round(X, round=0, client_index=self.client_index,
                                             random_state=task["random_state"], restart=restart)
        else:
            try:
                broadcast = _decode_expected(payload, est._broadcast_cls(rnd), f"round-{rnd} broadcast")
            except MessageError as exc:
                raise MessageError(f"client {self.client_index}: round-{rnd} broadcast rejected: {exc}") from exc
            state = self._load_state(run_key, rnd)
            if state.client != self.client_index:
                raise FederationError(f"the state file of client {self.client_index} holds client "
                                      f"{state.client}'s state")
            upload, state = est.client_round(X, state, broadcast, round=rnd, random_state=task["random_state"],
                                             restart=restart)
        self._save_state(state, run_key)
        return encode_payload(upload)

    def release(self, *, run_key: str) -> bool:
        """Drop this run's state (the server will not continue the run with this client); whether there was one."""
        path = self._state_file(run_key)
        existed = path.is_file()
        path.unlink(missing_ok=True)
        return existed

    def assign(self, task: dict, payload: Any, *, run_key: str) -> int:
        """Label the rows from the server's final broadcast, write them locally, return how many.

        ``task["round"]`` is the round in which the server sent the final broadcast
        (0 for a one-shot run); the broadcast must be the class the method sends then,
        stamped with that round and addressed to this client.
        """
        X = _load_client_data(self.data_path)
        est = self._estimator(task, X.shape[0])
        rnd = int(task.get("round", 0))
        reply = _decode_expected(payload, _final_cls(est, rnd), "final broadcast")
        if reply.round != rnd:
            raise MessageError(f"the final broadcast is stamped round {reply.round}, but the run finished in "
                               f"round {rnd}")
        state_file = self._state_file(run_key)
        if not state_file.is_file():
            raise FederationError(f"client {self.client_index}: no summary state for this run (was it summarized?)")
        state = ClientState.load(state_file)
        if state.round != rnd:
            raise FederationError(f"client {self.client_index}: its state is from round {state.round}, but the "
                                  f"run finished in round {rnd}")
        labels = est.client_assign(X, state, reply)
        out = Path(self.labels_path) if self.labels_path else Path(str(self.data_path) + ".labels.npy")
        out.parent.mkdir(parents=True, exist_ok=True)
        np.save(out, labels, allow_pickle=False)
        state_file.unlink(missing_ok=True)
        return int(labels.shape[0])


# ---------------------------------------------------------------- server side
@dataclass
class ClientFailure:
    """Why one client is missing from a run (or from its end).

    Attributes
    ----------
    node : str
        The node (transport address) that failed.
    reason : str
    round : int or None
        The protocol round in which the client was lost (None: before round 0,
        e.g. a SuperNode that never connected).
    client : int or None
        Its client index, when known (from round 0 on).
    phase : str or None
        ``"summarize"`` (round 0), ``"round"`` (rounds >= 1) or ``"assign"`` (the
        labelling step after the last round, whose ``round`` is the last round).
    """

    node: str
    reason: str
    round: int | None = None
    client: int | None = None
    phase: str | None = None

    def to_dict(self) -> dict:
        return {"node": self.node, "reason": self.reason, "round": self.round, "client": self.client,
                "phase": self.phase}


@dataclass
class RunReport:
    """What a distributed run did (written as JSON by the ServerApp).

    Attributes
    ----------
    method : str
    responders : dict of int to str
        Client index -> node of every client that stayed in the run to the end
        (was sent the final broadcast).
    missing : list of ClientFailure
        Every client lost, with the round it was lost in and why.
    n_labelled : dict of int to int
        Rows each client reported labelling.
    n_clusters : int or None
    missing_clients : list of int
        Client indices ``0..n_clients-1`` that wrote no labels.
    restarts : int
        Whole-run restarts of round 0.
    rounds : int
        Protocol rounds run, round 0 included (1 for a one-shot method).
    round_seconds : list of float
        Wall time of each round (sending the task, the clients, the server's part).
    bytes_up, bytes_down : list of dict of int to int
        Per round: wire bytes of each client's accepted upload, and of the broadcast
        the server made for it in that round (sent with the next round's task, or
        with the final ``assign`` task).
    timings : dict
        ``summarize+server`` (round 0, restarts included), ``rounds`` (rounds >= 1)
        and ``assign`` seconds.
    """

    method: str
    responders: dict[int, str] = field(default_factory=dict)  # client index -> node
    missing: list[ClientFailure] = field(default_factory=list)
    n_labelled: dict[int, int] = field(default_factory=dict)
    n_clusters: int | None = None
    missing_clients: list[int] = field(default_factory=list)
    restarts: int = 0
    rounds: int = 0
    round_seconds: list[float] = field(default_factory=list)
    bytes_up: list[dict[int, int]] = field(default_factory=list)
    bytes_down: list[dict[int, int]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> str:
        def per_client(d):
            return {str(k): v for k, v in sorted(d.items())}

        return json.dumps({
            "method": self.method,
            "responders": per_client(self.responders),
            "missing": [f.to_dict() for f in self.missing],
            "n_labelled": per_client(self.n_labelled),
            "n_clusters": self.n_clusters,
            "missing_clients": self.missing_clients,
            "restarts": self.restarts,
            "rounds": self.rounds,
            "per_round": [{"round": r, "seconds": s, "bytes_up": per_client(u), "bytes_down": per_client(d)}
                          for r, (s, u, d) in enumerate(zip(self.round_seconds, self.bytes_up, self.bytes_down))],
            "timings": self.timings,
        }, indent=1)


#: ``send(phase, {node: payload or None}, task) -> {node: (meta dict, payload array) or ClientFailure}``
SendFn = Callable[[str, dict, dict], dict]


def _read_uploads(out: Mapping, nodes: list[str], est, rnd: int, n_clients: int,
                  known: Mapping[str, int] | None, server_state=None) -> tuple[dict, list[ClientFailure], set[str]]:
    """Validate the replies of round ``rnd``: ``({client: (node, upload, n_bytes)}, failures, answered)``.

    ``answered`` holds every node that replied at all (valid or not): those are reachable.

    Only what a client sent can be its fault (a malformed or missing client-index header, an
    index other than the one it had in round 0, a message that is malformed, of another
    class than the round's upload, addressed to another client or stamped with another round,
    one that does not fit the run (:meth:`_check_round_upload`), or, in round 0, a summary for
    another feature count than the largest group of clients has). Any other exception here is a server bug and
    propagates.
    """
    phase = "summarize" if rnd == 0 else "round"
    cls = est._upload_cls(rnd)
    what = "summary" if rnd == 0 else f"round-{rnd} upload"
    by_index: dict[int, tuple[str, Message, int]] = {}
    failures: list[ClientFailure] = []
    answered: set[str] = set()

    def fail(node, reason, idx=None):
        idx = known.get(node) if idx is None and known is not None else idx
        failures.append(ClientFailure(node, reason, round=rnd, client=idx, phase=phase))

    for node in nodes:
        res = out.get(node, ClientFailure(node, "no reply"))
        if isinstance(res, ClientFailure):
            fail(node, res.reason)
            continue
        header, payload = res
        answered.add(node)
        idx = header.get("client-index") if isinstance(header, Mapping) else None
        if not isinstance(idx, (Integral, np.integer)) or isinstance(idx, (bool, np.bool_)):
            fail(node, f"malformed reply header: client-index {idx!r} is not an integer")
            continue
        idx = int(idx)
        if not 0 <= idx < n_clients:
            fail(node, f"client-index {idx} outside 0..{n_clients - 1}")
            continue
        if known is not None and known[node] != idx:
            fail(node, f"client-index {idx} in round {rnd}, but {known[node]} in round 0")
            continue
        try:
            upload = _decode_expected(payload, cls, what)
        except MessageError as exc:
            fail(node, f"malformed {what} rejected: {exc}", idx)
            continue
        if upload.client != idx:
            fail(node, f"{what} addressed to client {upload.client!r} but sent as client-index {idx}", idx)
            continue
        if upload.round != rnd:
            fail(node, f"{what} stamped round {upload.round}, but this is round {rnd} (stale or replayed)", idx)
            continue
        if idx in by_index:
            fail(node, f"duplicate client-index {idx} (also {by_index[idx][0]})", idx)
            continue
        try:  # well-formed, but does it fit the run (e.g. one entry per global centre)?
            est._check_round_upload(upload, server_state, rnd)
        except MessageError as exc:
            fail(node, f"{what} does not fit the run: {exc}", idx)
            continue
        by_index[idx] = (node, upload, int(np.asarray(payload).size))
    if rnd == 0:
        for idx, reason in _feature_count_outliers({i: v[1] for i, v in by_index.items()}).items():
            fail(by_index.pop(idx)[0], reason, idx)
    return by_index, failures, answered


def _feature_count_outliers(summaries: Mapping[int, Message]) -> dict[int, str]:
    """``{client: reason}`` for the round-0 summaries whose feature count is not the one the largest group of
    clients has (a plurality, not necessarily a majority: with 5, 5, 6, 7 and 8 features the two clients with 5
    stay; the ``min_clients`` policy then decides whether that is enough), or every summary when two counts tie
    for the largest group (nobody can tell which is right)."""
    dims = {i: int(s.n_features) for i, s in summaries.items()}
    tally = Counter(dims.values())
    if len(tally) < 2:
        return {}
    (top, n_top), (_, n_next) = tally.most_common(2)
    shown = ", ".join(f"{n} for {d}" for d, n in sorted(tally.items()))
    if n_top == n_next:
        return {i: f"the summaries disagree on the feature count with no majority ({shown} features); this one is "
                   f"for {d}" for i, d in dims.items()}
    return {i: f"summary is for {d} features, but {n_top} of {len(dims)} clients' are for {top}"
            for i, d in dims.items() if d != top}


def _release(send: SendFn, nodes, task: dict) -> None:
    """Tell reachable clients that the run will not continue with them (they drop their state)."""
    if nodes:
        send("release", {n: None for n in sorted(nodes)}, task)


def _policy(by_index: Mapping, failures: list[ClientFailure], n_asked: int, rnd: int, *, min_clients: int,
            on_missing: str, send: SendFn, answered: set[str], task: dict) -> None:
    """The missing-client policy of one round: raise FederationError (after telling every client that
    answered to drop its state), or let the run go on."""
    if len(by_index) < min_clients or (failures and on_missing == "fail"):
        _release(send, answered, task)
        names = "; ".join(f"{f.node}" + (f" (client {f.client})" if f.client is not None else "") + f": {f.reason}"
                          for f in failures) or "none"
        raise FederationError(
            f"round {rnd}: {len(by_index)} of {n_asked} clients answered (min-clients={min_clients}, "
            f"on-missing={on_missing}); missing: {names}"
        )


def run_server_phases(
    send: SendFn,
    nodes: list[str],
    task: dict,
    *,
    min_clients: int,
    on_missing: str = "continue",
    n_clients: int | None = None,
) -> RunReport:
    """Drive one run of the rounds protocol over ``nodes`` through ``send`` (any transport).

    Round 0 sends every node a ``"summarize"`` task and runs the server's round 0
    (the method's one-shot aggregation), restarting the whole round with fresh
    randomness after a ``_restart_on`` error, as ``fit_clients`` does. While the
    server is not done, round ``r >= 1`` sends each client still in the run a
    ``"round"`` task (``task["round"] = r``) with the broadcast the server made
    for it in round ``r - 1``, validates the uploads and runs the server's round
    ``r``. Finally each client gets an ``"assign"`` task with its final broadcast
    (``task["round"]`` = the last round). The missing-client policy is applied in
    every round; a client lost in a round is out of the run from then on (it
    gets no labels) and is reported with that round.

    Parameters
    ----------
    send : callable
        ``send(phase, payloads, task)`` delivers a task to each listed node
        (``phase`` is ``"summarize"``, ``"round"``, ``"assign"`` or ``"release"``;
        ``payloads`` maps node -> uint8 array or None; ``task`` carries ``round``
        and ``restart``) and returns, per node, ``(header, payload)`` or a
        :class:`ClientFailure`. ``"release"`` (no payload, replies ignored) tells
        clients that answered but that the run goes on without (a rejected upload)
        or stops for (a :class:`FederationError`) to drop their state.
    nodes : list of str
        The nodes of the federation.
    task : dict
        ``method``, ``params`` (dict) and ``random_state`` (int).
    min_clients : int
        Fewest responders with which a round may complete.
    on_missing : {"continue", "fail"}
        When a client is lost in a round (but at least ``min_clients`` answered):
        go on with the responders and report the lost client with its round, or
        stop with :class:`FederationError` naming the round and the client.
    n_clients : int, default=None
        Size of the federation: client indices must lie in ``0..n_clients-1``
        (default ``len(nodes)``).

    Returns
    -------
    RunReport

    Raises
    ------
    FederationError
        Fewer than ``min_clients`` clients answered a round, or one was lost with
        ``on_missing="fail"``.
    """
    if on_missing not in ("continue", "fail"):
        raise ValueError(f"on_missing must be 'continue' or 'fail', got {on_missing!r}")
    est = make_estimator(task["method"], **task["params"])
    report = RunReport(method=task["method"])
    n_clients = len(nodes) if n_clients is None else int(n_clients)
    policy = {"min_clients": min_clients, "on_missing": on_missing}
    seed = task["random_state"]
    t0 = time.perf_counter()
    # round 0, with whole-run restarts
    restart = 0
    while True:
        out = send("summarize", {n: None for n in nodes}, {**task, "restart": restart, "round": 0})
        by_index, failures, answered = _read_uploads(out, nodes, est, 0, n_clients, None)
        _policy(by_index, failures, len(nodes), 0, **policy, send=send, answered=answered,
                task={**task, "restart": restart, "round": 0})
        order = sorted(by_index)
        try:
            broadcasts, server_state, done = est.server_round([by_index[i][1] for i in order], None, round=0,
                                                              random_state=seed, restart=restart)
            break
        except est._restart_on:
            if restart >= est._max_restarts():
                raise
            restart += 1
    report.restarts = restart
    report.missing = failures
    dropped = answered - {v[0] for v in by_index.values()}  # reachable clients the run goes on without
    index_of = {by_index[i][0]: i for i in order}  # node -> client index, fixed from round 0 on
    node_of = {i: n for n, i in index_of.items()}
    t1 = time.perf_counter()
    report.round_seconds.append(t1 - t0)
    report.bytes_up.append({i: by_index[i][2] for i in order})
    rnd = 0
    max_rounds = est._max_rounds()
    while True:
        sent = {b.client: encode_payload(b) for b in broadcasts}
        report.bytes_down.append({i: int(p.size) for i, p in sent.items()})
        if done:
            break
        rnd += 1
        if rnd > max_rounds:  # the method's server must stop by its last round
            raise RuntimeError(f"{type(est).__name__}: the server did not finish within {max_rounds} rounds")
        tr = time.perf_counter()
        asked = [node_of[i] for i in sorted(sent)]
        round_task = {**task, "restart": restart, "round": rnd}
        out = send("round", {node_of[i]: sent[i] for i in sorted(sent)}, round_task)
        by_index, failures, answered = _read_uploads(out, asked, est, rnd, n_clients, index_of, server_state)
        _policy(by_index, failures, len(asked), rnd, **policy, send=send, answered=answered, task=round_task)
        report.missing.extend(failures)
        dropped |= answered - {v[0] for v in by_index.values()}
        order = sorted(by_index)
        broadcasts, server_state, done = est.server_round([by_index[i][1] for i in order], server_state,
                                                          round=rnd, random_state=seed, restart=restart)
        report.round_seconds.append(time.perf_counter() - tr)
        report.bytes_up.append({i: by_index[i][2] for i in order})
    t2 = time.perf_counter()
    report.rounds = rnd + 1
    est._set_model_attributes(server_state.model)
    if rnd > 0:
        est._set_rounds_attributes(server_state)
        est._check_rounds_result(None)
    report.n_clusters = int(est.n_clusters_)
    report.responders = {i: node_of[i] for i in sorted(sent)}
    acks = send("assign", {node_of[i]: sent[i] for i in sorted(sent)}, {**task, "restart": restart, "round": rnd})
    for i in sorted(sent):
        node = node_of[i]
        res = acks.get(node, ClientFailure(node, "no reply"))
        if isinstance(res, ClientFailure):
            report.missing.append(ClientFailure(node, f"assign failed: {res.reason}", round=rnd, client=i,
                                                phase="assign"))
            continue
        report.n_labelled[i] = int(res[0].get("n-labelled", -1))
    report.missing_clients = sorted(set(range(n_clients)) - set(report.n_labelled))
    _release(send, dropped, {**task, "restart": restart, "round": rnd})
    report.timings = {"summarize+server": t1 - t0, "rounds": t2 - t1, "assign": time.perf_counter() - t2}
    return report


# ------------------------------------------------------ local deployments
class LocalFederation:
    """A real Flower deployment on 127.0.0.1: one SuperLink and one SuperNode per client.

    Every process runs in its own session (``flower-superlink``, ``flower-supernode``,
    started from ``bin_dir``), all Flower state lives under ``workdir``, and
    :meth:`close` (or leaving the ``with`` block) stops them. Each SuperNode is given
    only its own client's data file.

    Parameters
    ----------
    workdir : str or Path
        Empty directory for data files, labels, logs and Flower's state.
    X_clients : list of ndarray of shape (n_samples_l, n_features)
        One matrix per client, written to ``workdir/client<i>.npy``.
    port : int, default=29500
        SuperLink port; SuperNode ``i`` uses ``port + 1 + i``.
    bin_dir : str, default=None
        Directory of the Flower command-line tools (default: next to this Python).
    init_labels : list of array-like or None, default=None
        Per-client initial labels, written to ``workdir/init<i>.npy`` and given to SuperNode
        ``i`` only (node config ``init-labels-path``), e.g. FedCRef's dirty initialisation.
    n_local_clusters : list of int or None, default=None
        Per-client K_i, given to SuperNode ``i`` only (node config ``n-local-clusters``).
    superlink_timeout : float, default=120.0
        Seconds to wait for the SuperLink to accept connections before the SuperNodes are
        started; :class:`FederationError` (with the end of its log) if it does not, or if it exits.
    """

    def __init__(self, workdir, X_clients, *, port: int = 29500, bin_dir: str | None = None, init_labels=None,
                 n_local_clusters=None, superlink_timeout: float = 120.0):
        import shutil

        for name, v in (("init_labels", init_labels), ("n_local_clusters", n_local_clusters)):
            if v is not None and len(v) != len(X_clients):
                raise ValueError(f"{name} has {len(v)} entries for {len(X_clients)} clients")

        self.workdir = Path(workdir)
        self.bin_dir = Path(bin_dir) if bin_dir else Path(os.path.dirname(os.path.abspath(sys.executable)))
        for tool in ("flower-superlink", "flower-supernode", "flwr"):
            if not (self.bin_dir / tool).exists() and shutil.which(tool) is None:
                raise ImportError(f"{tool} not found in {self.bin_dir}: {FLWR_MISSING}")
        self.port = int(port)
        self.n_clients = len(X_clients)
        home = self.workdir / "flwr-home"
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "fastfc"\n[superlink.fastfc]\naddress = "127.0.0.1:{self.port}"\ninsecure = true\n'
        )
        self.env = {**os.environ, "FLWR_HOME": str(home), "FLWR_TELEMETRY_ENABLED": "0",
                    "PATH": str(self.bin_dir) + os.pathsep + os.environ.get("PATH", "")}
        self.procs: dict = {}
        self._stopped: set = set()  # stopped on purpose by stop()
        for i, X in enumerate(X_clients):
            np.save(self.workdir / f"client{i}.npy", np.asarray(X))
            if init_labels is not None:
                np.save(self.workdir / f"init{i}.npy", np.asarray(init_labels[i]))
        try:
            self._start("superlink", ["flower-superlink", "--insecure", "--host", "127.0.0.1", "--port",
                                      str(self.port), "--database", str(self.workdir / "superlink.db"),
                                      "--disable-runtime-dependency-installation"])
            # SuperNodes that find no SuperLink retry with a random back-off of up to 20 s per try,
            # so they are started only once the SuperLink accepts connections.
            self._wait_listening("superlink", self.port, superlink_timeout)
            for i in range(self.n_clients):
                cfg = (f'data-path="{self.workdir}/client{i}.npy" client-index={i} '
                       f'labels-path="{self.workdir}/labels{i}.npy" state-dir="{self.workdir}/state{i}"')
                if init_labels is not None:
                    cfg += f' init-labels-path="{self.workdir}/init{i}.npy"'
                if n_local_clusters is not None:
                    cfg += f" n-local-clusters={int(n_local_clusters[i])}"
                self._start(f"supernode{i}", ["flower-supernode", "--insecure", "--superlink",
                                              f"127.0.0.1:{self.port}", "--host", "127.0.0.1",
                                              "--port", str(self.port + 1 + i), "--node-config", cfg])
        except BaseException:
            self.close()
            raise

    def _start(self, name: str, argv: list[str]) -> None:
        import subprocess

        log = open(self.workdir / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def flwr(self, *args: str) -> dict:
        """Run ``flwr ARGS --format json`` against this federation; the parsed JSON."""
        import subprocess

        out = subprocess.run([str(self.bin_dir / "flwr"), *args, "--format", "json"], env=self.env,
                             capture_output=True, text=True, timeout=120)
        try:
            return json.loads(out.stdout)
        except json.JSONDecodeError:
            return {"success": False, "error-message": (out.stdout + out.stderr).strip()}

    def _log_tail(self, name: str, lines: int = 8) -> str:
        try:
            text = (self.workdir / f"{name}.log").read_text(errors="replace").splitlines()
        except OSError:
            return f"{name}: no log"
        return f"{name}.log ends:\n" + "\n".join("    " + line for line in text[-lines:])

    def _check_running(self, names) -> None:
        """:class:`FederationError` with the end of its log if one of ``names`` has exited."""
        for name in names:
            p = self.procs.get(name)
            if name not in self._stopped and p is not None and p.poll() is not None:
                raise FederationError(f"{name} exited with code {p.returncode} ({self._log_tail(name)})")

    def _wait_listening(self, name: str, port: int, timeout: float) -> None:
        """Wait until process ``name`` accepts TCP connections on 127.0.0.1:``port``."""
        import socket

        deadline = time.monotonic() + timeout
        while True:
            self._check_running([name])
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                raise FederationError(f"{name} did not accept connections on port {port} within {timeout:g} s "
                                      f"({self._log_tail(name)})")
            time.sleep(0.2)

    def wait_online(self, n: int | None = None, timeout: float = 180.0) -> None:
        """Wait until ``n`` (default all) SuperNodes are online.

        A SuperNode that exits, or fewer than ``n`` online after ``timeout`` seconds (a loaded
        machine can need a minute to start Python and Flower in every process), raises
        :class:`FederationError` with the end of the SuperNodes' logs.
        """
        n = self.n_clients if n is None else n
        nodes = [name for name in self.procs if name.startswith("supernode")]
        deadline = time.monotonic() + timeout
        online = 0
        while time.monotonic() < deadline:
            self._check_running(["superlink"] + nodes)
            res = self.flwr("supernode", "list", "fastfc")
            online = sum(x.get("status") == "online" for x in res.get("nodes", [])) if res.get("success") else 0
            if online >= n:
                return
            time.sleep(0.5)
        tails = "\n".join(self._log_tail(m, 4) for m in nodes)
        raise FederationError(f"{online} of {n} SuperNodes came online within {timeout:g} s "
                              f"(logs in {self.workdir}):\n{tails}")

    def stop(self, name: str) -> None:
        """Stop one process (``"superlink"`` or ``"supernode<i>"``) with SIGTERM."""
        import signal
        import subprocess

        p = self.procs.get(name)
        self._stopped.add(name)
        if p is not None and p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)

    def run(self, app_dir, run_config: dict, *, timeout: float = 600.0) -> tuple[str, str]:
        """Submit the app with ``run_config`` overrides and wait: ``(status, details)``."""
        items = []
        for key, value in run_config.items():
            if isinstance(value, dict):
                value = json.dumps(value, separators=(",", ":"))
            items.append(f"{key}='{value}'" if isinstance(value, str) else f"{key}={value}")
        res = self.flwr("run", str(app_dir), "fastfc", "--run-config", " ".join(items))
        if not res.get("success"):
            raise FederationError(f"flwr run failed: {res.get('error-message', res)}")
        run_id = str(res["run-id"])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.flwr("ls", "fastfc", "--run-id", run_id)
            if st.get("success") and st["runs"] and str(st["runs"][0]["status"]).startswith("finished:"):
                return str(st["runs"][0]["status"]), str(st["runs"][0].get("status-details", ""))
            time.sleep(0.5)
        raise FederationError(f"run {run_id} did not finish within {timeout:g} s")

    def labels(self) -> list[np.ndarray | None]:
        """The labels each client wrote locally (None where a client wrote none)."""
        out = []
        for i in range(self.n_clients):
            path = self.workdir / f"labels{i}.npy"
            out.append(np.load(path, allow_pickle=False) if path.exists() else None)
        return out

    def close(self) -> None:
        """Stop every process (SuperNodes first)."""
        for name in list(self.procs)[::-1]:
            self.stop(name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --------------------------------------------------------------- Flower glue
def _import_flwr():
    try:
        from flwr.app import Array, ArrayRecord, ConfigRecord, Message as FlwrMessage, RecordDict
        from flwr.clientapp import ClientApp
        from flwr.serverapp import ServerApp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(FLWR_MISSING) from exc
    return Array, ArrayRecord, ConfigRecord, FlwrMessage, RecordDict, ClientApp, ServerApp


def _task_from_config(cfg) -> dict:
    return {
        "method": str(cfg["method"]),
        "params": json.loads(str(cfg.get("params", "{}"))),
        "random_state": int(cfg.get("random-state", 0)),
        "restart": int(cfg.get("restart", 0)),
        "round": int(cfg.get("round", 0)),
    }


def make_client_app(mods: list | None = None):
    """The Flower ClientApp that answers fastfc tasks from this SuperNode's own data.

    Node config: ``data-path`` (required), ``client-index`` (required),
    ``state-dir``, ``labels-path``, ``init-labels-path`` and ``n-local-clusters``
    (optional; the last two are this client's own initial labels and K_i, see
    :class:`ClientWorker`).

    Parameters
    ----------
    mods : list of Flower mods, default=None
        App-wide Flower mods (``mod(msg, context, call_next) -> Message``), e.g.
        for logging or message-size limits.
    """
    Array, ArrayRecord, ConfigRecord, FlwrMessage, RecordDict, ClientApp, _ = _import_flwr()
    app = ClientApp(mods=mods or [])

    @app.query()
    def _answer(msg, context):
        ncfg = context.node_config
        cfg = msg.content["task"]
        phase = str(cfg["phase"])
        worker = ClientWorker(
            data_path=str(ncfg["data-path"]), client_index=int(ncfg["client-index"]),
            state_dir=str(ncfg["state-dir"]) if "state-dir" in ncfg else None,
            labels_path=str(ncfg["labels-path"]) if "labels-path" in ncfg else None,
            init_labels_path=str(ncfg["init-labels-path"]) if "init-labels-path" in ncfg else None,
            n_local_clusters=int(ncfg["n-local-clusters"]) if "n-local-clusters" in ncfg else None,
        )
        task = _task_from_config(cfg)
        run_key = str(context.run_id)
        header = {"client-index": worker.client_index, "phase": phase, "round": task["round"]}
        if phase in ("summarize", "round"):
            if phase == "summarize" and task["round"] != 0:
                raise ValueError(f"a summarize task is round 0, got round {task['round']}")
            incoming = msg.content["fastfc"]["msg"].numpy() if "fastfc" in msg.content else None
            payload = worker.run_round(task, incoming, run_key=run_key)
            content = RecordDict({"header": ConfigRecord(header), "fastfc": ArrayRecord({"msg": Array(payload)})})
        elif phase == "assign":
            n = worker.assign(task, msg.content["fastfc"]["msg"].numpy(), run_key=run_key)
            content = RecordDict({"header": ConfigRecord({**header, "n-labelled": n})})
        elif phase == "release":
            content = RecordDict({"header": ConfigRecord({**header, "released": worker.release(run_key=run_key)})})
        else:
            raise ValueError(f"unknown fastfc phase {phase!r}")
        return FlwrMessage(content=content, reply_to=msg)

    return app


def make_server_app():
    """The Flower ServerApp that drives a fastfc run (see the module docstring).

    Run config: ``method``, ``params`` (JSON object as a string), ``random-state``,
    ``num-clients``, ``min-clients`` (default ``num-clients``), ``on-missing``
    (``continue`` | ``fail``), ``wait-timeout`` and ``reply-timeout`` (seconds),
    ``report-path``.
    """
    Array, ArrayRecord, ConfigRecord, FlwrMessage, RecordDict, _, ServerApp = _import_flwr()
    app = ServerApp()

    @app.main()
    def _main(grid, context):
        cfg = context.run_config
        task = _task_from_config(cfg)
        n_expected = int(cfg["num-clients"])
        min_clients = int(cfg.get("min-clients", n_expected))
        deadline = time.monotonic() + float(cfg.get("wait-timeout", 60.0))
        node_ids = sorted(grid.get_node_ids())
        while len(node_ids) < n_expected and time.monotonic() < deadline:
            time.sleep(0.5)
            node_ids = sorted(grid.get_node_ids())
        reply_timeout = float(cfg.get("reply-timeout", 120.0))
        nodes = [str(n) for n in node_ids]

        def send(phase: str, payloads: dict, task_: dict) -> dict:
            head = {"phase": phase, "method": task_["method"], "params": json.dumps(task_["params"]),
                    "random-state": task_["random_state"], "restart": task_.get("restart", 0),
                    "round": task_.get("round", 0)}
            out_msgs = []
            for node, payload in payloads.items():
                rd = RecordDict({"task": ConfigRecord(head)})
                if payload is not None:
                    rd["fastfc"] = ArrayRecord({"msg": Array(np.ascontiguousarray(payload))})
                out_msgs.append(FlwrMessage(content=rd, dst_node_id=int(node), message_type=MESSAGE_TYPE))
            sent = {m.metadata.message_id: str(m.metadata.dst_node_id) for m in out_msgs}
            result: dict = {}
            t_send = time.monotonic()
            for rep in grid.send_and_receive(out_msgs, timeout=reply_timeout):
                node = sent.get(rep.metadata.reply_to_message_id, str(rep.metadata.src_node_id))
                if rep.has_error():
                    result[node] = ClientFailure(node, f"client error {rep.error.code}: {rep.error.reason}")
                    continue
                try:
                    header = dict(rep.content["header"])
                    payload = rep.content["fastfc"]["msg"].numpy() if "fastfc" in rep.content else None
                except (KeyError, TypeError) as exc:
                    result[node] = ClientFailure(node, f"malformed reply rejected: {exc}")
                    continue
                result[node] = (header, payload)
            waited = time.monotonic() - t_send
            why = (f"no reply within {reply_timeout:g} s" if waited >= reply_timeout
                   else f"no reply: the SuperNode left after {waited:.0f} s without answering")
            for node in payloads:
                result.setdefault(node, ClientFailure(node, why))
            return result

        missing_nodes = []
        if len(nodes) < n_expected:
            missing_nodes = [ClientFailure("(not connected)", f"only {len(nodes)} of {n_expected} SuperNodes "
                                       f"connected within {cfg.get('wait-timeout', 60.0)} s")]
        report_path = str(cfg.get("report-path", "fastfc-report.json"))
        try:
            if len(nodes) < min_clients:
                raise FederationError(f"only {len(nodes)} of {n_expected} SuperNodes connected "
                                      f"(min-clients={min_clients})")
            if missing_nodes and str(cfg.get("on-missing", "continue")) == "fail":
                raise FederationError(missing_nodes[0].reason)
            report = run_server_phases(send, nodes, task, min_clients=min_clients,
                                       on_missing=str(cfg.get("on-missing", "continue")), n_clients=n_expected)
            report.missing = missing_nodes + report.missing
            Path(report_path).write_text(report.to_json())
        except Exception as exc:
            Path(report_path).write_text(json.dumps({"method": task["method"], "error": f"{type(exc).__name__}: {exc}"}))
            raise

    return app


try:  # the Flower app components ``fastfc.flower:client_app`` / ``fastfc.flower:server_app``
    import flwr as _flwr  # noqa: F401
except ImportError:  # without Flower the transport-independent parts still work
    def __getattr__(name: str):
        if name in ("client_app", "server_app"):
            raise ImportError(FLWR_MISSING)
        raise AttributeError(f"module 'fastfc.flower' has no attribute {name!r}")
else:
    client_app = make_client_app()
    server_app = make_server_app()
