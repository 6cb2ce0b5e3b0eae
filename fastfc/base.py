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
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from ._parallel import client_rng, effective_n_jobs, limit_native_threads, map_clients, resolve_entropy, server_rng
from ._validation import check_client_data, check_clients, split_by_client_ids
from .protocol import Message, MessageError

__all__ = ["BaseFederatedClusterer"]

LABEL_DTYPE = np.int32


class BaseFederatedClusterer(ClusterMixin, BaseEstimator, metaclass=ABCMeta):
    """Common machinery of fastfc's one-shot federated clusterers.

    Subclasses set the message classes ``_summary_cls``, ``_model_cls`` and
    ``_reply_cls`` and implement the private phase hooks ``_summarize``,
    ``_aggregate`` and ``_assign``, which receive validated data and a
    ``numpy.random.Generator``. Everything public (validation, seeding,
    threading, timing, fitted attributes) lives here, once.
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "n_jobs": [None, Integral],
    }
    _summary_cls: type[Message]
    _model_cls: type[Message]
    _reply_cls: type[Message]

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _summarize(self, X: np.ndarray, rng: np.random.Generator) -> tuple[Message, Any]:
        """Client phase 1 on validated ``X``: return (summary, private state)."""

    @abstractmethod
    def _aggregate(self, summaries: list[Message], rng: np.random.Generator) -> tuple[Message, list[Message]]:
        """Server phase on validated summaries: return (global model, one reply per client)."""

    @abstractmethod
    def _assign(self, X: np.ndarray, state: Any, reply: Message) -> np.ndarray:
        """Client phase 2: labels (int) of the client's rows from its state and the server's reply."""

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

    def _set_client_attributes(self, states: list[Any], replies: list[Message]) -> None:
        """Set per-client fitted attributes from private states and replies (override to add)."""

    def _set_model_attributes(self, model: Message) -> None:
        """Copy what the global model defines onto fitted attributes (override to add)."""
        centers = getattr(model, "centers", None)
        if centers is not None:
            self.cluster_centers_ = np.array(centers)
        self.n_clusters_ = int(len(centers)) if centers is not None else int(self.n_clusters)

    # ------------------------------------------------------- public protocol
    def _phase_setup(self) -> None:
        self._validate_params()

    def client_summarize(
        self, X, *, client_index: int = 0, random_state=None, restart: int = 0
    ) -> tuple[Message, Any]:
        """Client phase 1: summarise one client's private data.

        Parameters
        ----------
        X : array-like of shape (n_samples_client, n_features)
            The client's rows.
        client_index : int, default=0
            Position of this client in the federation; selects its random stream.
        random_state : int, RandomState, Generator or None, default=None
            Overrides ``self.random_state`` for this call. For reproducible
            federated runs give every party the same integer.
        restart : int, default=0
            Whole-run restart number (after a server error in ``_restart_on``);
            ``k > 0`` selects that restart's fresh random stream.

        Returns
        -------
        summary : Message
            What the client sends to the server (validated, serialisable).
        state : object
            Client-private state needed by :meth:`client_assign`; never sent.
        """
        self._phase_setup()
        X = check_client_data(X, name=f"client {client_index} data")
        entropy = resolve_entropy(self.random_state if random_state is None else random_state)
        return self._summarize(X, client_rng(entropy, client_index, restart))

    def server_aggregate(
        self, summaries: Sequence[Message], *, random_state=None, restart: int = 0
    ) -> tuple[Message, list[Message]]:
        """Server phase: fuse all client summaries into a global model.

        Parameters
        ----------
        summaries : sequence of Message, length n_clients
            One summary per client, in client order.
        random_state : int, RandomState, Generator or None, default=None
            Overrides ``self.random_state`` for this call.
        restart : int, default=0
            Whole-run restart number, as in :meth:`client_summarize`.

        Returns
        -------
        model : Message
            The global model (e.g. global centres).
        replies : list of Message, length n_clients
            What each client needs to label its rows.
        """
        self._phase_setup()
        summaries = self._check_summaries(summaries)
        entropy = resolve_entropy(self.random_state if random_state is None else random_state)
        return self._aggregate(summaries, server_rng(entropy, restart))

    def client_assign(self, X, state: Any, reply: Message) -> np.ndarray:
        """Client phase 2: label the client's rows from the server's reply.

        Parameters
        ----------
        X : array-like of shape (n_samples_client, n_features)
            The same rows that were summarised.
        state : object
            The private state returned by :meth:`client_summarize`.
        reply : Message
            This client's reply from :meth:`server_aggregate`.

        Returns
        -------
        labels : ndarray of shape (n_samples_client,), dtype=int32
        """
        self._phase_setup()
        X = check_client_data(X)
        if not isinstance(reply, self._reply_cls):
            raise MessageError(f"expected a {self._reply_cls.__name__} reply, got {type(reply).__name__}")
        return np.asarray(self._assign(X, state, reply), dtype=LABEL_DTYPE)

    def _check_summaries(self, summaries: Sequence[Message]) -> list[Message]:
        summaries = list(summaries)
        if not summaries:
            raise ValueError("no client summaries: at least one client is required")
        for i, s in enumerate(summaries):
            if not isinstance(s, self._summary_cls):
                raise MessageError(
                    f"summary {i} is a {type(s).__name__}, expected {self._summary_cls.__name__}"
                )
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
            All rows of all clients.
        y : None
            Ignored; present for API consistency.
        client_ids : array-like of shape (n_samples,), default=None
            The client that owns each row (any sortable labels). ``None``
            means a single client. Clients are ordered by sorted id.

        Returns
        -------
        self : object
            Fitted estimator; ``labels_`` is in input row order.
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

    def fit_clients(self, X_clients: Sequence, *, progress: Callable[[str, int, int], Any] | None = None):
        """Fit on data held per client.

        Parameters
        ----------
        X_clients : list of array-like, each of shape (n_samples_l, n_features)
            One matrix per client; all share ``n_features``.
        progress : callable, default=None
            ``progress(phase, done, total)`` after each client finishes a phase
            (``phase`` is ``"summarize"`` or ``"assign"``).

        Returns
        -------
        self : object
            Fitted estimator with ``client_labels_`` (one array per client)
            and ``labels_`` (their concatenation in client order).
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

    def _fit_clients_validated(self, X_clients: list[np.ndarray], progress=None) -> None:
        self._check_clients_vs_params(X_clients)
        entropy = resolve_entropy(self.random_state)
        n_jobs = effective_n_jobs(self.n_jobs)
        n_clients = len(X_clients)
        workers = min(n_jobs, n_clients)
        # Threads over clients. Native thread pools (BLAS, OpenMP in scikit-learn
        # and our kernels) get n_jobs // workers threads each, so a fit never
        # uses more than n_jobs cores; results do not depend on the split.
        self._kernel_threads = max(1, n_jobs // max(workers, 1))

        def tick(phase):
            return None if progress is None else (lambda done, total: progress(phase, done, total))

        t0 = time.perf_counter()
        max_restarts = self._max_restarts()
        for restart in range(max_restarts + 1):
            self._kernel_threads = max(1, n_jobs // max(workers, 1))
            with limit_native_threads(self._kernel_threads):
                client_out = map_clients(
                    lambda i: self._summarize(X_clients[i], client_rng(entropy, i, restart)),
                    n_clients, workers, tick("summarize"),
                )
            t1 = time.perf_counter()
            summaries = [s for s, _ in client_out]
            self._kernel_threads = n_jobs
            try:
                with limit_native_threads(n_jobs):
                    model, replies = self._aggregate(summaries, server_rng(entropy, restart))
                break
            except self._restart_on as exc:
                if restart == max_restarts:
                    raise ValueError(
                        f"{exc}; the run failed in all {max_restarts + 1} attempt(s) with fresh randomness"
                    ) from None
        self.n_restarts_ = restart
        if len(replies) != n_clients:  # programming error in a method
            raise RuntimeError(f"server produced {len(replies)} replies for {n_clients} clients")
        t2 = time.perf_counter()
        self._kernel_threads = max(1, n_jobs // max(workers, 1))
        with limit_native_threads(self._kernel_threads):
            labels = map_clients(
                lambda i: np.asarray(self._assign(X_clients[i], client_out[i][1], replies[i]), dtype=LABEL_DTYPE),
                n_clients, workers, tick("assign"),
            )
        t3 = time.perf_counter()
        self._kernel_threads = n_jobs
        self.client_summaries_ = summaries
        self.global_model_ = model
        self.client_labels_ = labels
        self.timings_ = {"client": t1 - t0, "server": t2 - t1, "assign": t3 - t2, "total": t3 - t0}
        self._set_model_attributes(model)
        self._set_client_attributes([out[1] for out in client_out], replies)

    # ------------------------------------------------------------- predicting
    def predict(self, X):
        """Label new rows by their nearest global cluster centre.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,), dtype=int32
        """
        check_is_fitted(self, "cluster_centers_")
        X = check_client_data(X, estimator=self, reset=False)
        from ._assign import assign_nearest

        return assign_nearest(X, self.cluster_centers_, n_jobs=self.n_jobs)

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
