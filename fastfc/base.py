"""The estimator base class shared by every federated clustering method.

A method is three phases, each a pure function of its inputs and its own
random stream:

1. ``client_summarize(X_l)`` → (summary message, client-private state),
   run on every client;
2. ``server_aggregate(summaries)`` → (global model message, one reply message
   per client), run once on the server;
3. ``client_assign(X_l, state, reply)`` → labels of the client's rows.

Only messages cross between clients and server; the private state (local
labels, local models) never leaves a client. The in-process runner below and
the Flower apps call the same phase methods.
"""
from __future__ import annotations

import time
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils._param_validation import Interval, InvalidParameterError
from sklearn.utils.validation import check_is_fitted

from ._parallel import (
    client_rng, effective_n_jobs, limit_blas_threads, map_clients, phase_entropy, pinned_worker, plan_threads,
    resolve_entropy, server_rng,
)
from ._runners import RunResult, reraise_with_note, run_one_shot, run_rounds
from ._state import ClientState, ServerState, StateError, require_array
from ._validation import (
    ClientRows,
    check_client_data,
    check_client_index,
    check_clients,
    row_counts,
    split_by_client_ids,
)
from .protocol import Message, MessageError

__all__ = ["BaseFederatedClusterer", "ClientState", "ServerState", "StateError"]

LABEL_DTYPE = np.int32

#: ``progress(phase, done, total)``; see :meth:`BaseFederatedClusterer.fit_clients`
ProgressFn = Callable[[str, int, int], Any]


#: kept for code that imported it from here
_reraise_with_note = reraise_with_note


def _refine():
    """The refinement module, imported on first use: a process that runs only one-shot fits (or only decodes
    one method's messages) never loads it."""
    from . import _refine as module

    return module


def _check_batch(messages: Sequence[Message], cls, *, round: int | None = None) -> list[Message]:
    """What the server checks of one round's uploads: at least one, each a ``cls`` (a class or a tuple of
    classes) stamped with ``round`` (when given), no client twice, one feature count."""
    messages = list(messages)
    what = "client summaries" if round is None else f"uploads in round {round}"
    if not messages:
        raise ValueError(f"no {what}: at least one client is required")
    names = cls.__name__ if isinstance(cls, type) else " or ".join(c.__name__ for c in cls)
    for i, m in enumerate(messages):
        if not isinstance(m, cls):
            where = f"summary {i}" if round is None else f"upload {i} of round {round}"
            raise MessageError(f"{where} is a {type(m).__name__}, expected {names}")
        if round is not None and m.round != round:
            raise MessageError(f"upload {i} is stamped round {m.round}, but this is round {round}")
    clients = [m.client for m in messages if m.client is not None]
    if len(set(clients)) != len(clients):
        dup = sorted({c for c in clients if clients.count(c) > 1})
        tail = ": every client summarises once" if round is None else ""
        raise MessageError(f"several {'summaries' if round is None else f'uploads of round {round}'} come from "
                           f"client(s) {dup}{tail}")
    dims = {int(m.n_features) for m in messages}
    if len(dims) > 1:
        by_dim = {d: [m.client if m.client is not None else f"#{i}" for i, m in enumerate(messages)
                      if m.n_features == d] for d in sorted(dims)}
        shown = "; ".join(f"{d} from client(s) {', '.join(map(str, who))}" for d, who in by_dim.items())
        raise ValueError(f"{what} have different feature counts: {shown}")
    return messages


def _check_reply_features(msg: Message, state: ClientState) -> None:
    """A server message for this client describes its feature count (a MessageError, not a shape error deep
    in a kernel, when it does not)."""
    n_features = getattr(msg, "n_features", None)
    if n_features is not None and n_features != state.n_features:
        raise MessageError(f"the server's {type(msg).__name__} is for {n_features} features, but this client's "
                           f"rows have {state.n_features}")


class BaseFederatedClusterer(ClusterMixin, BaseEstimator, metaclass=ABCMeta):
    """Common machinery of fastfc's one-shot federated clusterers.

    Subclasses set the message classes ``_summary_cls`` and ``_reply_cls`` and
    implement the private phase hooks ``_summarize``, ``_aggregate`` and
    ``_assign``, which receive validated data, a ``numpy.random.Generator`` and
    their native thread budget ``n_threads`` (to pass to fastfc's kernels).
    Everything public (validation, seeding, threading, addressing, the client
    state record, timing, fitted attributes) lives here, once. Every hook runs
    inside :func:`~fastfc._parallel.pinned_worker` (OpenMP pinned to one thread
    in the calling thread), so libraries that size their thread teams
    implicitly cannot make labels depend on ``n_jobs``.
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "n_jobs": [None, Integral],
        "refine_rounds": [Interval(Integral, 0, None, closed="left")],
        "refine_tol": [Interval(Real, 0, None, closed="left")],
        "refine_n_init": [Interval(Integral, 1, None, closed="left")],
    }
    _summary_cls: type[Message]
    _reply_cls: type[Message]

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _summarize(self, X: np.ndarray, rng: np.random.Generator, n_threads: int) -> tuple[Message, dict]:
        """Client phase 1 on validated ``X``: (summary, private values: dict of arrays / small scalars)."""

    @abstractmethod
    def _aggregate(
        self, summaries: list[Message], rng: np.random.Generator, n_threads: int
    ) -> tuple[Message, list[Message]]:
        """Server phase on validated summaries: return (global model, one reply per summary, same order)."""

    @abstractmethod
    def _assign(self, X: np.ndarray, state: ClientState, reply: Message, n_threads: int) -> np.ndarray:
        """Client phase 2: labels (int) of the client's rows from its checked state and reply."""

    def _check_clients_vs_params(self, X_clients: list[np.ndarray]) -> None:
        """Raise a clear error when the parameters cannot work with this data (override to add)."""
        n_total = sum(row_counts(X_clients))
        if self.n_clusters > n_total:
            raise ValueError(
                f"n_clusters={self.n_clusters} is larger than the number of samples ({n_total}) over all clients"
            )

    #: exceptions of the server phase after which the in-process runner
    #: reruns the whole one-shot fit (clients and server) with fresh randomness
    _restart_on: tuple[type[Exception], ...] = ()

    def _max_restarts(self) -> int:
        """How many whole-run restarts ``_restart_on`` errors may trigger (override)."""
        return 0

    def _set_client_attributes(self, states: list[ClientState], replies: list[Message]) -> None:
        """Set per-client fitted attributes from private states and replies (override to add)."""

    def _set_model_attributes(self, model: Message) -> None:
        """Copy what the global model defines onto fitted attributes (override to add)."""
        centers = getattr(model, "centers", None)
        if centers is not None:
            self.cluster_centers_ = np.array(centers)
        self.n_clusters_ = int(len(centers)) if centers is not None else int(self.n_clusters)

    # ------------------------------------------------------ parameter checks
    def _validate_params(self) -> None:
        """scikit-learn's parameter validation, plus: a bool is not an integer parameter.

        ``bool`` is an ``Integral``, so scikit-learn's ``Interval(Integral, ...)``
        accepts ``n_clusters=True``; every integer parameter here rejects bools.
        """
        super()._validate_params()
        for name, constraints in self._parameter_constraints.items():
            value = getattr(self, name, None)
            if not isinstance(value, (bool, np.bool_)) or "boolean" in constraints:
                continue
            if any(c is Integral or (isinstance(c, Interval) and c.type is Integral) for c in constraints):
                raise InvalidParameterError(
                    f"The {name!r} parameter of {type(self).__name__} must be an integer, not a bool; got {value!r}."
                )

    # ------------------------------------------- one phase in one worker
    def _state_method(self) -> str:
        return type(self).__name__

    def _run_summarize(
        self, X: np.ndarray, index: int, entropy: int, restart: int, n_threads: int
    ) -> tuple[Message, ClientState]:
        """Client phase 1 of client ``index`` (the worker callable): addressed summary and state record."""
        with pinned_worker():
            summary, private = self._summarize(X, client_rng(entropy, index, restart), n_threads)
        state = ClientState(method=self._state_method(), client=index, n_samples=X.shape[0],
                            n_features=X.shape[1], values=private)
        return summary.addressed(client=index), state

    def _run_aggregate(
        self, summaries: list[Message], entropy: int, restart: int, n_threads: int
    ) -> tuple[Message, list[Message]]:
        """Server phase (the worker callable): reply ``i`` is addressed to the client of summary ``i``."""
        with pinned_worker():
            model, replies = self._aggregate(summaries, server_rng(entropy, restart), n_threads)
        if len(replies) != len(summaries):  # programming error in a method
            raise RuntimeError(f"server produced {len(replies)} replies for {len(summaries)} summaries")
        return model, [r.addressed(client=s.client, round=s.round) for r, s in zip(replies, summaries)]

    def _run_assign(self, X: np.ndarray, state: ClientState, reply: Message, n_threads: int) -> np.ndarray:
        """Client phase 2 (the worker callable) on a checked state and reply (or final refined centres)."""
        with pinned_worker():
            if self._refine_rounds() > 0 and isinstance(reply, _refine().CENTERS_CLASSES):
                from ._units import nearest_weighted

                return nearest_weighted(X, reply.centers, reply.weight, n_jobs=n_threads).astype(LABEL_DTYPE)
            return np.asarray(self._assign(X, state, reply, n_threads), dtype=LABEL_DTYPE)

    # ------------------------------------------------------- public protocol
    def client_summarize(
        self, X, *, client_index: int = 0, random_state: int | None = None, restart: int = 0
    ) -> tuple[Message, ClientState]:
        """Client phase 1: summarise one client's private data.

        Parameters
        ----------
        X : array-like of shape (n_samples_client, n_features)
            The client's rows (dense; float32 and float64 are kept).
        client_index : int, default=0
            Position of this client in the federation (an int >= 0); selects its
            random stream and addresses its summary (``summary.client``).
        random_state : int or None, default=None
            Overrides ``self.random_state`` for this call. The phase API needs an
            int, the same for every party: each derives its stream from it on its
            own. ``None`` (here and in ``self.random_state``) draws fresh entropy
            with a :class:`~fastfc._parallel.RandomStateWarning` (the parties
            will not agree); a ``RandomState`` or ``Generator`` raises ``TypeError``.
        restart : int, default=0
            Whole-run restart number (after a server error in ``_restart_on``);
            ``k > 0`` selects that restart's fresh random stream.

        Returns
        -------
        summary : Message
            What the client sends to the server (validated, serialisable),
            addressed with ``client=client_index``.
        state : ClientState
            Client-private state needed by :meth:`client_assign`; never sent.
            It names the method, the client and the rows it was made for, and
            can be kept on disk with :meth:`ClientState.save` (no pickle).
        """
        entropy = phase_entropy(self.random_state if random_state is None else random_state, "client_summarize")
        self._validate_params()
        client_index = check_client_index(client_index)
        X = check_client_data(X, name=f"client {client_index} data")
        n_threads = plan_threads(self.n_jobs, 1).per_client
        with limit_blas_threads(n_threads):
            return self._run_summarize(X, client_index, entropy, restart, n_threads)

    def server_aggregate(
        self, summaries: Sequence[Message], *, random_state: int | None = None, restart: int = 0
    ) -> tuple[Message, list[Message]]:
        """Server phase: fuse all client summaries into a global model.

        Parameters
        ----------
        summaries : sequence of Message, length n_clients
            One summary per client, in client order (each addressed by its
            client; no client twice).
        random_state : int or None, default=None
            Overrides ``self.random_state`` for this call; an int, as in
            :meth:`client_summarize`.
        restart : int, default=0
            Whole-run restart number, as in :meth:`client_summarize`.

        Returns
        -------
        model : Message
            The global model (e.g. global centres).
        replies : list of Message, length n_clients
            What each client needs to label its rows; ``replies[i].client`` is
            ``summaries[i].client``.
        """
        entropy = phase_entropy(self.random_state if random_state is None else random_state, "server_aggregate")
        self._validate_params()
        summaries = self._check_summaries(summaries)
        n_threads = plan_threads(self.n_jobs, 1).server
        with limit_blas_threads(n_threads):
            return self._run_aggregate(summaries, entropy, restart, n_threads)

    def client_assign(self, X, state: ClientState, reply: Message) -> np.ndarray:
        """Client phase 2: label the client's rows from the server's reply.

        Parameters
        ----------
        X : array-like of shape (n_samples_client, n_features)
            The same rows that were summarised.
        state : ClientState
            The private state returned by :meth:`client_summarize` (or read back
            with :meth:`ClientState.load`).
        reply : Message
            This client's reply from :meth:`server_aggregate`.

        Returns
        -------
        labels : ndarray of shape (n_samples_client,), dtype=int32

        Raises
        ------
        StateError
            ``state`` is missing, not a :class:`ClientState`, another method's,
            or was made for other rows (row or feature count).
        MessageError
            ``reply`` is not this method's reply, or is addressed to another
            client than the state's.
        """
        self._validate_params()
        X = check_client_data(X)
        state = self._check_state(state, X)
        reply = self._check_reply(reply, state)
        n_threads = plan_threads(self.n_jobs, 1).per_client
        with limit_blas_threads(n_threads):
            return self._run_assign(X, state, reply, n_threads)

    # ------------------------------------------------------- rounds protocol
    def _refine_rounds(self) -> int:
        """Refinement rounds asked for (0 without the parameter)."""
        return int(getattr(self, "refine_rounds", 0) or 0)

    #: where the server seeds refinement chains 1..s-1 (``refine_n_init > 1``): "round1" (every client's
    #: per-cluster means of the round-1 uploads), "round0" (the round-0 local centres, see
    #: :meth:`_round0_local_centers`; methods without them fall back to "round1") or "both" (the union)
    _chain_seeding = "round1"

    def _round0_local_centers(self, summaries: list[Message], replies: list[Message]) -> dict | None:
        """Client index -> (local centres (n_local, n_features), local_to_global (n_local,)) from the
        round-0 summaries and replies, or None when the method's messages carry no such pairs (default:
        summaries with ``centers`` and replies with a matching ``local_to_global``)."""
        out = {}
        for s, r in zip(summaries, replies):
            centers, l2g = getattr(s, "centers", None), getattr(r, "local_to_global", None)
            if centers is None or l2g is None or np.shape(l2g) != (np.shape(centers)[0],):
                return None
            out[s.client] = (np.asarray(centers, dtype=np.float64), np.asarray(l2g, dtype=np.int64))
        return out

    def _refine_n_init(self) -> int:
        """Parallel refinement chains asked for (1 without the parameter)."""
        return int(getattr(self, "refine_n_init", 1) or 1)

    def _multi_round(self) -> bool:
        """Whether a fit runs the rounds protocol (more than round 0)."""
        return self._refine_rounds() > 0

    def _max_rounds(self) -> int:
        """Most rounds after round 0 the server may ask for (override for multi-round methods)."""
        return self._refine_rounds()

    def _round_costs(self, X_clients: list, states: list, broadcasts: list) -> list[float] | None:
        """Expected work of each client's next round, for scheduling only (override; None: client order).

        The in-process rounds runner starts the clients with the most work first (longest
        processing time first), so that the threads finish a round together. Results never depend
        on it: every client computes from its own inputs and random stream.
        """
        return None

    def _refine_standardize(self) -> bool:
        """Whether refinement measures distances in the federation's standardised units when the
        round-0 model carries no feature weights (override; False: raw units)."""
        return False

    def _broadcast_cls(self, round: int) -> type[Message]:
        """Class of the server's broadcast that client round ``round`` (>= 1) consumes."""
        refine = _refine()
        if round == 1:
            return self._reply_cls
        return refine.RefineChainCenters if self._refine_n_init() > 1 else refine.RefineCenters

    def _upload_cls(self, round: int) -> type[Message]:
        """Class of the clients' uploads in round ``round``."""
        if round == 0:
            return self._summary_cls
        refine = _refine()
        return refine.RefineChainStats if round >= 2 and self._refine_n_init() > 1 else refine.RefineStats

    def client_round(
        self, X, state: ClientState | None = None, broadcast: Message | None = None, *, round: int = 0,
        client_index: int = 0, random_state: int | None = None, restart: int = 0,
    ) -> tuple[Message, ClientState]:
        """One client's part of protocol round ``round``.

        Round 0 is :meth:`client_summarize` (``state`` and ``broadcast`` are None).
        In round ``r >= 1`` the client reads the broadcast the server sent it in
        round ``r - 1`` and its state from its previous round, and returns its
        upload and its new state. When the server said done, the client labels
        its rows with :meth:`client_assign` and the last broadcast instead.

        Parameters
        ----------
        X : array-like of shape (n_samples_client, n_features)
            The client's rows (the same in every round).
        state : ClientState or None
            The state this client's previous round returned (None in round 0).
        broadcast : Message or None
            What the server sent this client in round ``round - 1`` (None in round 0).
        round : int, default=0
            The protocol round (>= 0).
        client_index : int, default=0
            Position of the client (round 0 only; later rounds take it from ``state``).
        random_state : int or None, default=None
            As in :meth:`client_summarize` (the stream key includes the round).
        restart : int, default=0
            Whole-run restart number of round 0.

        Returns
        -------
        upload : Message
            Addressed with the client and the round.
        state : ClientState
            The client's new private state (``state.round == round``).

        Raises
        ------
        StateError
            ``state`` missing, another method's or rows', or not from round ``round - 1``.
        MessageError
            ``broadcast`` of the wrong kind, for another client or another round.
        """
        if not isinstance(round, (Integral, np.integer)) or isinstance(round, (bool, np.bool_)) or round < 0:
            raise ValueError(f"round must be an integer >= 0, got {round!r}")
        if round == 0:
            if state is not None or broadcast is not None:
                raise ValueError("round 0 takes no state and no broadcast (it is client_summarize)")
            return self.client_summarize(X, client_index=client_index, random_state=random_state, restart=restart)
        if round > self._max_rounds():
            raise ValueError(f"round {round} is beyond this estimator's last round ({self._max_rounds()})")
        entropy = phase_entropy(self.random_state if random_state is None else random_state, "client_round")
        self._validate_params()
        X = check_client_data(X)
        state = self._check_state(state, X)
        if state.round != round - 1:
            raise StateError(f"client_round {round} needs the state of round {round - 1}, got {state.describe()}")
        broadcast = self._check_broadcast(broadcast, state, round)
        n_threads = plan_threads(self.n_jobs, 1).per_client
        with limit_blas_threads(n_threads):
            return self._run_client_round(X, state, broadcast, state.client, entropy, restart, round, n_threads)

    def server_round(
        self, uploads: Sequence[Message], server_state: ServerState | None = None, *, round: int = 0,
        random_state: int | None = None, restart: int = 0,
    ) -> tuple[list[Message], ServerState, bool]:
        """The server's part of protocol round ``round``.

        Parameters
        ----------
        uploads : sequence of Message
            The uploads of round ``round`` of every responding client (client order;
            no client twice). A client lost in a round is simply absent.
        server_state : ServerState or None
            The state the server's previous round returned (None in round 0).
        round : int, default=0
        random_state : int or None, default=None
            As in :meth:`server_aggregate`.
        restart : int, default=0

        Returns
        -------
        broadcasts : list of Message
            One per upload, addressed to its client and stamped with ``round``.
        server_state : ServerState
        done : bool
            True when the run is finished: ``broadcasts`` are then what each client
            labels its rows with (:meth:`client_assign`).
        """
        if not isinstance(round, (Integral, np.integer)) or isinstance(round, (bool, np.bool_)) or round < 0:
            raise ValueError(f"round must be an integer >= 0, got {round!r}")
        entropy = phase_entropy(self.random_state if random_state is None else random_state, "server_round")
        self._validate_params()
        n_threads = plan_threads(self.n_jobs, 1).server
        if round == 0:
            if server_state is not None:
                raise ValueError("round 0 takes no server state")
            summaries = self._check_summaries(uploads)
            with limit_blas_threads(n_threads):
                model, replies = self._run_aggregate(summaries, entropy, restart, n_threads)
                return self._run_server_start(model, replies, summaries, entropy, restart, n_threads)
        if not isinstance(server_state, ServerState) or server_state.method != self._state_method():
            raise StateError(f"server_round {round} needs the {self._state_method()} server state of round "
                             f"{round - 1}, got {type(server_state).__name__}")
        if server_state.round != round - 1:
            raise StateError(f"server_round {round} needs the server state of round {round - 1}, "
                             f"got round {server_state.round}")
        uploads = self._check_uploads(uploads, round)
        with limit_blas_threads(n_threads):
            return self._run_server_round(uploads, server_state, entropy, restart, round, n_threads)

    def _check_round_upload(self, upload: Message, server_state: ServerState | None, round: int) -> None:
        """Raise :class:`MessageError` when one well-formed upload of round ``round`` does not fit the run
        (so a driver can blame its sender alone): in round 0 (``server_state`` None) the estimator's
        parameters, later the server's state. Default: nothing in round 0 (a summary's own checks bound its
        values); a refinement upload must have one entry per global centre, the model's feature count, and
        (round 1) its feature moments."""
        if round == 0:
            return
        refine = _refine()
        who = f"client {upload.client}" if upload.client is not None else "an upload"
        if isinstance(upload, refine.RefineChainStats):
            active = list(server_state.values.get("chain_active", ()))
            k, d = np.shape(server_state.values["chain_centers"][0])
            if upload.chains.tolist() != active:
                raise MessageError(f"{who}: its round-{round} chain upload is for chains {upload.chains.tolist()}, "
                                   f"the server broadcast chains {active}")
            if upload.n_clusters != k or upload.n_features != d:
                raise MessageError(f"{who}: its round-{round} chain upload has {upload.n_clusters} clusters x "
                                   f"{upload.n_features} features per chain, the server has {k} x {d}")
            return
        if not isinstance(upload, refine.RefineStats):
            return
        centers = server_state.values["centers"] if round > 1 else server_state.model.centers
        k, d = np.shape(centers)
        if upload.counts.shape[0] != k or upload.n_features != d:
            raise MessageError(f"{who}: its round-{round} refinement upload has {upload.counts.shape[0]} clusters x "
                               f"{upload.n_features} features, the server has {k} x {d}")
        if round == 1 and upload.feature_stats.shape[0] != 3:
            raise MessageError(f"{who}: its first refinement upload carries no feature moments")

    def _check_broadcast(self, broadcast, state: ClientState, round: int) -> Message:
        cls = self._broadcast_cls(round)
        if not isinstance(broadcast, cls):
            raise MessageError(f"client round {round} expects a {cls.__name__} broadcast, "
                               f"got {type(broadcast).__name__}")
        if broadcast.client is not None and broadcast.client != state.client:
            raise MessageError(f"the broadcast is addressed to client {broadcast.client}, but this is client "
                               f"{state.client} (per its state)")
        if broadcast.round != round - 1:
            raise MessageError(f"client round {round} needs the server's broadcast of round {round - 1}, "
                               f"got one of round {broadcast.round}")
        if getattr(broadcast, "final", False) is True:
            raise MessageError("the broadcast is final: label the rows with client_assign")
        _check_reply_features(broadcast, state)
        return broadcast

    def _check_uploads(self, uploads: Sequence[Message], round: int) -> list[Message]:
        return _check_batch(uploads, self._upload_cls(round), round=round)

    def _run_server_start(self, model: Message, replies: list[Message], summaries: list[Message], entropy: int,
                          restart: int, n_threads: int) -> tuple[list[Message], ServerState, bool]:
        """After the round-0 server phase: (broadcasts, server state, done)."""
        values = {"replies": replies, "clients": [s.client for s in summaries]}
        if self._refine_rounds() > 0 and self._refine_n_init() > 1 and self._chain_seeding in ("round0", "both"):
            local = self._round0_local_centers(summaries, replies)
            if local is not None:
                values["round0_local"] = local
        state = ServerState(method=self._state_method(), round=0, model=model, values=values)
        return replies, state, not self._multi_round()

    def _run_server_round(self, uploads: list[Message], server_state: ServerState, entropy: int, restart: int,
                          round: int, n_threads: int) -> tuple[list[Message], ServerState, bool]:
        for u in uploads:  # one place for the fit of each upload to the server's state (every driver)
            self._check_round_upload(u, server_state, round)
        with pinned_worker():
            broadcasts, values, done = self._server_round(uploads, server_state,
                                                          server_rng(entropy, restart, round), n_threads, round)
        if len(broadcasts) != len(uploads):  # programming error in a method
            raise RuntimeError(f"server produced {len(broadcasts)} broadcasts for {len(uploads)} uploads")
        new_state = ServerState(method=server_state.method, round=round, model=server_state.model, values=values)
        return [b.addressed(client=u.client, round=round) for b, u in zip(broadcasts, uploads)], new_state, done

    def _run_client_round(self, X: np.ndarray, state: ClientState, broadcast: Message, index: int, entropy: int,
                          restart: int, round: int, n_threads: int) -> tuple[Message, ClientState]:
        with pinned_worker():
            upload, values = self._client_round(X, state, broadcast, client_rng(entropy, index, restart, round),
                                                n_threads, round)
        new_state = ClientState(method=state.method, client=index, n_samples=X.shape[0], n_features=X.shape[1],
                                values=values, round=round)
        return upload.addressed(client=index, round=round), new_state

    def _run_client_rounds(self, X_clients: list, states: list, broadcasts: list, round: int, n_threads: int,
                           seconds: list) -> list[tuple[Message, ClientState]] | None:
        """Every client's :meth:`_run_client_round` at once, when the round is the default refinement round
        and every client got the same centres (the in-process runner's many-clients path); None otherwise
        (the runner then runs the clients one by one).

        The (upload, state) pairs are those of :meth:`_run_client_round` for each client (uploads bit for
        bit: :func:`fastfc._refine.clients_stats`); the refinement round draws no randomness, so no
        client stream is made. ``n_threads`` threads in all; each client's seconds are added to
        ``seconds[i]``.
        """
        refine = _refine()
        if type(self)._client_round is not BaseFederatedClusterer._client_round or len(X_clients) < 2:
            return None
        b0 = broadcasts[0]
        if not isinstance(b0, refine.CENTERS_CLASSES):
            return None
        chains = isinstance(b0, refine.RefineChainCenters)

        def same(a, b):  # the same array or the same bytes (the runner hands every client the same arrays)
            return a is b or (a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes())

        for b in broadcasts[1:]:
            if type(b) is not type(b0) or not (
                    same(b.centers, b0.centers) and same(b.feature_weight, b0.feature_weight)
                    and (not chains or (b.n_clusters == b0.n_clusters and same(b.chains, b0.chains)))):
                return None
        secs = np.zeros(len(X_clients))
        with pinned_worker():
            uploads = refine.clients_stats(X_clients, b0, n_threads, secs)
        out = []
        for i, (X, state, upload) in enumerate(zip(X_clients, states, uploads)):
            t = time.perf_counter()
            new_state = ClientState(method=state.method, client=i, n_samples=X.shape[0], n_features=X.shape[1],
                                    values=state.values, round=round)
            out.append((upload.addressed(client=i, round=round), new_state))
            seconds[i] += secs[i] + (time.perf_counter() - t)
        return out

    # refinement (the rounds of every one-shot method; multi-round methods override both)
    def _client_round(self, X: np.ndarray, state: ClientState, broadcast: Message, rng: np.random.Generator,
                      n_threads: int, round: int) -> tuple[Message, dict]:
        """Client round ``round >= 1``: (upload, new private values). Default: a refinement round."""
        upload = _refine().client_stats(X, broadcast, lambda: self._assign(X, state, broadcast, n_threads), n_threads,
                                        moments=state.values.get("feature_moments"))
        return upload, state.values

    def _server_round(self, uploads: list[Message], server_state: ServerState, rng: np.random.Generator,
                      n_threads: int, round: int) -> tuple[list[Message], dict, bool]:
        """Server round ``round >= 1``: (broadcasts, new server values, done). Default: a refinement round."""
        if self._refine_n_init() > 1:
            return self._server_round_chains(uploads, server_state, rng, round)
        values = dict(server_state.values)
        model = server_state.model
        if round == 1:
            setup = _refine().setup_from_moments([u.feature_stats for u in uploads], getattr(model, "feature_weight", None),
                                       self._refine_standardize(), self.refine_tol, who=type(self).__name__)
            centers = np.asarray(model.centers, dtype=np.float64)
            history: list = []
        else:
            setup, centers, history = values["setup"], values["centers"], list(values["history"])
        new, shift, inertia, n_empty = _refine().server_update(uploads, centers, setup)
        history.append((shift, inertia, n_empty, int(sum(int(u.counts.sum()) for u in uploads))))
        done = round >= self._refine_rounds() or shift <= setup.threshold
        values.update(setup=setup, centers=new, history=history)
        bc = _refine().RefineCenters(centers=new, n_features=new.shape[1], feature_weight=setup.weight, final=done)
        return [bc] * len(uploads), values, done

    def _server_round_chains(self, uploads: list[Message], server_state: ServerState, rng: np.random.Generator,
                             round: int) -> tuple[list[Message], dict, bool]:
        """A refinement round with ``refine_n_init > 1`` parallel chains (see :mod:`fastfc._refine`)."""
        refine = _refine()
        values = dict(server_state.values)
        s = self._refine_n_init()
        n_samples = int(sum(int(u.counts.sum()) for u in uploads)) if round == 1 else 0
        if round == 1:
            model = server_state.model
            setup = refine.setup_from_moments([u.feature_stats for u in uploads],
                                              getattr(model, "feature_weight", None), self._refine_standardize(),
                                              self.refine_tol, who=type(self).__name__)
            centers0 = np.asarray(model.centers, dtype=np.float64)
            new0, shift0, inertia0, n_empty0 = refine.server_update(uploads, centers0, setup)
            local = values.get("round0_local")
            points = refine.round0_seed_points(uploads, local) if local is not None else None
            if points is not None and self._chain_seeding == "both":
                extra = refine.round1_seed_points(uploads)
                points = (np.concatenate([points[0], extra[0]]), np.concatenate([points[1], extra[1]]))
            seeded = refine.seed_chains(uploads, setup, s, rng, points=points)
            chain_centers = [new0, *seeded] + [None] * (s - 1 - len(seeded))
            chain_cost = [float("nan")] * s
            chain_rounds = [1] + [0] * (s - 1)
            history = [[] for _ in range(s)]
            history[0].append((shift0, inertia0, n_empty0, n_samples))
            # chain 0 is sent again even if it has converged: its cost needs one pass of labels
            active = [c for c in range(s) if chain_centers[c] is not None]
        else:
            setup = values["setup"]
            chain_centers = list(values["chain_centers"])
            chain_cost = list(values["chain_cost"])
            chain_rounds = list(values["chain_rounds"])
            history = [list(h) for h in values["chain_history"]]
            active = []
            for pos, c in enumerate(values["chain_active"]):
                new, shift, inertia, cost, n_empty, n_rows = refine.chain_update(uploads, pos, chain_centers[c], setup)
                chain_centers[c], chain_cost[c] = new, cost
                chain_rounds[c] += 1
                history[c].append((shift, inertia, n_empty, n_rows))
                if shift > setup.threshold:
                    active.append(c)
        done = round >= self._refine_rounds() or not active
        values.update(setup=setup, chain_centers=chain_centers, chain_cost=chain_cost, chain_rounds=chain_rounds,
                      chain_history=history, chain_active=active, n_refine_rounds=round)
        k, d = chain_centers[0].shape
        if done:
            costs = np.where(np.isnan(chain_cost), np.inf, chain_cost)
            # least cost; chains within rounding of it (the same partition reached twice) tie: the lowest index
            kept = int(np.flatnonzero(costs <= costs.min() * (1 + 1e-12))[0]) if np.isfinite(costs).any() else 0
            values.update(centers=chain_centers[kept], history=history[kept], chain_kept=kept, chain_active=[kept])
            bc = refine.RefineChainCenters(chains=np.array([kept]), centers=chain_centers[kept], n_clusters=k,
                                           n_features=d, feature_weight=setup.weight, final=True)
        else:
            bc = refine.RefineChainCenters(chains=np.array(active), centers=np.concatenate([chain_centers[c] for c in active]),
                                           n_clusters=k, n_features=d, feature_weight=setup.weight)
        return [bc] * len(uploads), values, done

    def _set_rounds_attributes(self, server_state: ServerState) -> None:
        """Fitted attributes of a multi-round run from the server's last state (override to add)."""
        if "centers" not in server_state.values:
            return
        self.cluster_centers_ = np.array(server_state["centers"])
        self.n_clusters_ = int(self.cluster_centers_.shape[0])
        weight = server_state["setup"].weight
        self.feature_weight_ = None if weight is None else np.array(weight)
        hist = np.asarray(server_state["history"], dtype=np.float64).reshape(-1, 4)
        self.n_refine_rounds_ = int(server_state.values.get("n_refine_rounds", hist.shape[0]))
        self.refine_history_ = {
            "center_shift": hist[:, 0], "inertia": hist[:, 1], "n_empty": hist[:, 2].astype(np.int64),
            "n_samples": hist[:, 3].astype(np.int64),
        }
        if "chain_cost" in server_state.values:
            self.refine_chain_ = int(server_state["chain_kept"])
            self.refine_chain_cost_ = np.asarray(server_state["chain_cost"], dtype=np.float64)
            self.refine_chain_rounds_ = np.asarray(server_state["chain_rounds"], dtype=np.int64)

    def _check_state(self, state, X: np.ndarray) -> ClientState:
        if state is None:
            raise StateError(
                "client_assign needs the client state returned by client_summarize (or ClientState.load); got None"
            )
        if not isinstance(state, ClientState):
            raise StateError(f"client_assign needs a ClientState from client_summarize, got {type(state).__name__}")
        method = self._state_method()
        if state.method != method:
            raise StateError(f"the client state is a {state.describe()}, not a {method} state")
        if (state.n_samples, state.n_features) != X.shape:
            raise StateError(
                f"the client state was made for {state.n_samples} rows x {state.n_features} features "
                f"({state.describe()}), but X has shape {X.shape}: pass the rows that were summarised"
            )
        self._check_state_values(state)
        return state

    #: smallest valid per-row local label in a client state (Fed-k*-HC marks rows set aside with -1)
    _min_state_label = 0

    def _check_state_values(self, state: ClientState) -> None:
        """The method's own values in ``state`` have the types, shapes and ranges its phases rely on
        (:class:`StateError` otherwise: a damaged or tampered state file, not an IndexError or silently
        wrong labels later). Default: the per-row local labels ``labels``, when the method keeps them."""
        if "labels" in state.values:
            require_array(state, "labels", "i", (state.n_samples,), min_value=self._min_state_label)

    def _check_reply(self, reply, state: ClientState) -> Message:
        if self._refine_rounds() > 0 and isinstance(reply, _refine().CENTERS_CLASSES):
            if not isinstance(reply, self._broadcast_cls(2)):
                raise MessageError(f"client_assign expected a {self._broadcast_cls(2).__name__} final broadcast, "
                                   f"got a {type(reply).__name__}")
            if not reply.final:
                raise MessageError("client_assign got a refinement broadcast that is not final: run client_round "
                                   "on it (the server has not finished)")
        elif not isinstance(reply, self._reply_cls):
            raise MessageError(f"expected a {self._reply_cls.__name__} reply, got {type(reply).__name__}")
        if reply.client is not None and reply.client != state.client:
            raise MessageError(
                f"the reply is addressed to client {reply.client}, but this is client {state.client} "
                "(per its state): replies were routed to the wrong client"
            )
        _check_reply_features(reply, state)
        return reply

    def _check_summaries(self, summaries: Sequence[Message]) -> list[Message]:
        summaries = _check_batch(summaries, self._summary_cls)
        for s in summaries:
            self._check_round_upload(s, None, 0)
        return summaries

    # ---------------------------------------------------------------- fitting
    def fit(self, X, y=None, *, client_ids=None):
        """Fit on a stacked data matrix whose rows belong to clients.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            All rows of all clients (dense: scipy sparse input raises ``TypeError``).
        y : None
            Ignored; present for API consistency.
        client_ids : array-like of shape (n_samples,), default=None
            The client that owns each row (any sortable labels). ``None``
            means a single client. Clients are ordered by sorted id.

        Returns
        -------
        self : object
            Fitted estimator; ``labels_`` is in input row order.

        Notes
        -----
        ``random_state`` may be None, an int or a ``RandomState`` (drawn from
        once per fit), as in scikit-learn; a ``Generator`` is rejected.
        """
        self._validate_params()
        X = check_client_data(X, estimator=self, reset=True, n_jobs=self.n_jobs)
        groups, ids = split_by_client_ids(X.shape[0], client_ids)
        # each client's rows are gathered only while a phase uses them (views for contiguous clients)
        self._fit_clients_validated(ClientRows(X, groups))
        labels = np.empty(X.shape[0], dtype=LABEL_DTYPE)
        for g, lab in zip(groups, self.client_labels_):
            labels[g] = lab
        self.labels_ = labels
        self.client_ids_ = ids
        return self

    def fit_clients(self, X_clients: Sequence, *, progress: ProgressFn | None = None):
        """Fit on data held per client.

        Parameters
        ----------
        X_clients : list of array-like, each of shape (n_samples_l, n_features)
            One dense matrix per client; all share ``n_features``.
        progress : callable, default=None
            ``progress(phase, done, total)``, called in the calling thread:

            - ``("summarize", done, n_clients)`` after each client's phase 1;
            - ``("server", 0, 1)`` before and ``("server", 1, 1)`` after the
              server phase;
            - ``("assign", done, n_clients)`` after each client's phase 2;
            - ``("restart", r, max_restarts)`` when whole-run restart ``r``
              (1-based) begins, before its ``"summarize"`` calls.

        Returns
        -------
        self : object
            Fitted estimator with ``client_labels_`` (one array per client),
            ``labels_`` (their concatenation in client order),
            ``n_restarts_`` (whole-run restarts) and ``client_seconds_`` (per
            client: seconds of its own phases, in the worker that ran them).

        Notes
        -----
        ``random_state`` may be None, an int or a ``RandomState`` (drawn from
        once per fit); a ``Generator`` is rejected, as in scikit-learn. When the
        last restart fails too, its error is raised with its own type and
        traceback and a note saying how many attempts were made.
        """
        self._validate_params()
        X_clients = check_clients(X_clients)
        self._fit_clients_validated(X_clients, progress=progress)
        self.labels_ = np.concatenate(self.client_labels_).astype(LABEL_DTYPE, copy=False)
        self.client_ids_ = np.arange(len(X_clients))
        self.n_features_in_ = X_clients[0].shape[1]
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return self

    def _fit_clients_validated(self, X_clients: list[np.ndarray], progress: ProgressFn | None = None) -> None:
        self._check_clients_vs_params(X_clients)
        entropy = resolve_entropy(self.random_state)
        plan = plan_threads(self.n_jobs, len(X_clients))
        runner = run_rounds if self._multi_round() else run_one_shot
        result = runner(self, X_clients, entropy, plan, progress)
        self._set_run_attributes(result)

    def _set_run_attributes(self, result: RunResult) -> None:
        """Fitted attributes of a finished run (in-process runners)."""
        self.client_summaries_ = result.summaries
        self.global_model_ = result.model
        self.client_labels_ = result.labels
        self.n_restarts_ = result.restarts
        self.timings_ = dict(result.timings)
        self.n_rounds_ = len(result.bytes_up)
        self.bytes_up_ = np.asarray(result.bytes_up, dtype=np.int64)
        self.bytes_down_ = np.asarray(result.bytes_down, dtype=np.int64)
        self.round_seconds_ = np.asarray(result.round_seconds, dtype=np.float64)
        self.client_seconds_ = np.asarray(result.client_seconds, dtype=np.float64)
        self._set_model_attributes(result.model)
        replies0 = result.replies if result.server_state is None else result.server_state["replies"]
        self._set_client_attributes(result.states, replies0)
        if result.server_state is not None:
            self._set_rounds_attributes(result.server_state)
            self._check_rounds_result(result.labels)

    def _check_rounds_result(self, client_labels: list[np.ndarray] | None) -> None:
        """Warn about what a finished multi-round run left (override); ``client_labels`` is None
        where the server never sees the labels (Flower)."""

    # ------------------------------------------------------------- predicting
    def predict(self, X):
        """Label new rows by their nearest global cluster centre.

        Distances are measured in the units the fit used: raw units, or, when the estimator
        fitted per-feature distance weights (``feature_weight_``, federated units), in those.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,), dtype=int32
        """
        check_is_fitted(self, "cluster_centers_")
        X = check_client_data(X, estimator=self, reset=False)
        from ._units import nearest_weighted

        # float32 rows are compared with the float64 centres in float64: the same labels as float64 input
        return nearest_weighted(X, self.cluster_centers_, getattr(self, "feature_weight_", None), n_jobs=self.n_jobs)

    def fit_predict(self, X, y=None, *, client_ids=None):
        """Fit and return ``labels_`` (input row order).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : None
            Ignored.
        client_ids : array-like of shape (n_samples,), default=None
            The client that owns each row.

        Returns
        -------
        labels : ndarray of shape (n_samples,), dtype=int32
        """
        return self.fit(X, client_ids=client_ids).labels_

    # ----------------------------------------------------------- saved models
    #: private fitted attributes a saved model keeps besides the public ones (names ending in ``_``);
    #: a method that needs one after loading declares it here
    _saved_private_attributes: tuple[str, ...] = ()

    def save(self, path) -> None:
        """Save the fitted estimator to one file, without pickle.

        The file is an ``.npz`` archive holding the parameters and the fitted
        attributes (as JSON), the fitted arrays, a format version and the fastfc
        version (see :mod:`fastfc.saving` for the layout and what can be saved).
        Read it back with :func:`fastfc.load` (or ``type(self).load``).

        Parameters
        ----------
        path : str or path-like
            The file to write (replaced atomically; ``.ffc`` is the convention).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If the estimator is not fitted.
        fastfc.saving.ModelFileError
            If a parameter or attribute cannot be saved without pickle (a callable,
            a ``RandomState`` as ``random_state``, a third-party object); the
            message names it.
        """
        from .saving import save_model

        save_model(self, path)

    @classmethod
    def load(cls, path):
        """Load an estimator of this class saved with :meth:`save`.

        Parameters
        ----------
        path : str or path-like

        Returns
        -------
        est : estimator of this class, fitted

        Raises
        ------
        fastfc.saving.ModelFileError
            The file is not a valid model file, is of a newer format version, or
            holds another method's model.
        """
        from .saving import load

        return load(path, method=cls)

    def _check_loaded(self) -> None:
        """Check what ``predict`` and the fitted attributes rely on after :func:`fastfc.load` (override to add).

        Raises
        ------
        ValueError or TypeError
            Turned into :class:`fastfc.saving.ModelFileError` by the loader.
        """
        def count(name: str, minimum: int) -> int:
            value = getattr(self, name, None)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
            return value

        d = count("n_features_in_", 1)
        labels = getattr(self, "labels_", None)
        if not isinstance(labels, np.ndarray) or labels.ndim != 1 or labels.dtype.kind not in "iu":
            raise ValueError("labels_ must be a 1-D integer array")
        centers = getattr(self, "cluster_centers_", None)
        if centers is None:
            return
        if not isinstance(centers, np.ndarray) or centers.ndim != 2 or centers.dtype.kind != "f" \
                or centers.shape[0] < 1 or centers.shape[1] != d or not np.isfinite(centers).all():
            raise ValueError(f"cluster_centers_ must be a finite float array of shape (n_clusters, {d})")
        if count("n_clusters_", 1) != centers.shape[0]:
            raise ValueError(f"n_clusters_ is {self.n_clusters_} but there are {centers.shape[0]} centres")
        if labels.size and (labels.min() < 0 or labels.max() >= centers.shape[0]):
            raise ValueError(f"labels_ must lie in 0..{centers.shape[0] - 1} (one per centre), found "
                             f"{int(labels.min())}..{int(labels.max())}")
        effective_n_jobs(getattr(self, "n_jobs", None))  # predict's thread count: 0 or a non-integer is refused here
        weight = getattr(self, "feature_weight_", None)
        if weight is not None and (not isinstance(weight, np.ndarray) or weight.shape != (d,) or
                                   weight.dtype.kind != "f" or not np.isfinite(weight).all() or (weight <= 0).any()):
            raise ValueError(f"feature_weight_ must be None or {d} finite positive floats")
