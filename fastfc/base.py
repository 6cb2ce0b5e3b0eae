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
from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils._param_validation import Interval, InvalidParameterError
from sklearn.utils.validation import check_is_fitted

from ._parallel import (
    client_rng, limit_blas_threads, map_clients, phase_entropy, pinned_worker, plan_threads, resolve_entropy,
    server_rng,
)
from ._state import ClientState, StateError
from ._validation import check_client_data, check_client_index, check_clients, split_by_client_ids
from .protocol import Message, MessageError

__all__ = ["BaseFederatedClusterer", "ClientState", "StateError"]

LABEL_DTYPE = np.int32

#: ``progress(phase, done, total)``; see :meth:`BaseFederatedClusterer.fit_clients`
ProgressFn = Callable[[str, int, int], Any]


def _reraise_with_note(exc: Exception, note: str) -> None:
    """Re-raise ``exc`` itself (type and traceback kept) with ``note`` added to its message."""
    if hasattr(exc, "add_note"):  # Python >= 3.11
        exc.add_note(note)
        raise exc
    try:  # Python 3.10: the same class, chained to the original
        wrapped = type(exc)(f"{exc}; {note}")
    except Exception:  # a constructor with other arguments: keep the original as is
        raise exc from None
    raise wrapped from exc


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
        n_total = sum(len(x) for x in X_clients)
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
        """Client phase 2 (the worker callable) on a checked state and reply."""
        with pinned_worker():
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
        return state

    def _check_reply(self, reply, state: ClientState) -> Message:
        if not isinstance(reply, self._reply_cls):
            raise MessageError(f"expected a {self._reply_cls.__name__} reply, got {type(reply).__name__}")
        if reply.client is not None and reply.client != state.client:
            raise MessageError(
                f"the reply is addressed to client {reply.client}, but this is client {state.client} "
                "(per its state): replies were routed to the wrong client"
            )
        return reply

    def _check_summaries(self, summaries: Sequence[Message]) -> list[Message]:
        summaries = list(summaries)
        if not summaries:
            raise ValueError("no client summaries: at least one client is required")
        for i, s in enumerate(summaries):
            if not isinstance(s, self._summary_cls):
                raise MessageError(
                    f"summary {i} is a {type(s).__name__}, expected {self._summary_cls.__name__}"
                )
        clients = [s.client for s in summaries if s.client is not None]
        if len(set(clients)) != len(clients):
            dup = sorted({c for c in clients if clients.count(c) > 1})
            raise MessageError(f"several summaries come from client(s) {dup}: every client summarises once")
        dims = {int(s.n_features) for s in summaries}
        if len(dims) > 1:
            raise ValueError(f"client summaries have different feature counts: {sorted(dims)}")
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
        X = check_client_data(X, estimator=self, reset=True)
        groups, ids = split_by_client_ids(X.shape[0], client_ids)
        self._fit_clients_validated([X[g] for g in groups])
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
            ``labels_`` (their concatenation in client order) and
            ``n_restarts_`` (whole-run restarts).

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
        n_clients = len(X_clients)
        plan = plan_threads(self.n_jobs, n_clients)

        def report(phase: str, done: int, total: int) -> None:
            if progress is not None:
                progress(phase, done, total)

        def tick(phase: str):
            return None if progress is None else (lambda done, total: progress(phase, done, total))

        t0 = time.perf_counter()
        max_restarts = self._max_restarts()
        for restart in range(max_restarts + 1):
            if restart:
                report("restart", restart, max_restarts)
            with limit_blas_threads(plan.per_client):
                client_out = map_clients(
                    lambda i: self._run_summarize(X_clients[i], i, entropy, restart, plan.per_client),
                    n_clients, plan.workers, tick("summarize"),
                )
            t1 = time.perf_counter()
            summaries = [s for s, _ in client_out]
            report("server", 0, 1)
            try:
                with limit_blas_threads(plan.server):
                    model, replies = self._run_aggregate(summaries, entropy, restart, plan.server)
                break
            except self._restart_on as exc:
                if restart == max_restarts:
                    _reraise_with_note(
                        exc, f"the run failed in all {max_restarts + 1} attempt(s) with fresh randomness"
                    )
        report("server", 1, 1)
        self.n_restarts_ = restart
        t2 = time.perf_counter()
        states = [st for _, st in client_out]
        with limit_blas_threads(plan.per_client):
            labels = map_clients(
                lambda i: self._run_assign(X_clients[i], states[i], replies[i], plan.per_client),
                n_clients, plan.workers, tick("assign"),
            )
        t3 = time.perf_counter()
        self.client_summaries_ = summaries
        self.global_model_ = model
        self.client_labels_ = labels
        self.timings_ = {"client": t1 - t0, "server": t2 - t1, "assign": t3 - t2, "total": t3 - t0}
        self._set_model_attributes(model)
        self._set_client_attributes(states, replies)

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
