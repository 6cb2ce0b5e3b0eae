"""In-process runners: drive an estimator's phases over clients held in one process.

Two runners share one result type (:class:`RunResult`):

- :func:`run_one_shot` -- summarize on every client, aggregate once on the
  server (rerun with fresh randomness after a ``_restart_on`` error), assign on
  every client: the published one-shot methods, results unchanged;
- :func:`run_rounds` -- the rounds protocol: ``client_round`` on every client,
  then ``server_round``, until the server says done (or ``max_rounds``), then
  ``client_assign`` with the last broadcast. Round 0 is the method's one-shot
  summarize/aggregate; later rounds are the method's (refinement, FedCRef, ...).

The Flower driver (:mod:`fastfc.flower`) calls the same estimator methods over
the network. Both runners account for every message's wire size.
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ._parallel import ThreadPlan, limit_blas_threads, map_clients, pinned_worker

if TYPE_CHECKING:  # pragma: no cover
    from ._state import ClientState, ServerState
    from .base import BaseFederatedClusterer
    from .protocol import Message

__all__ = ["RunResult", "run_one_shot", "run_rounds", "reraise_with_note"]

Report = Callable[[str, int, int], Any]


def reraise_with_note(exc: Exception, note: str) -> None:
    """Re-raise ``exc`` itself (type and traceback kept) with ``note`` added to its message."""
    if hasattr(exc, "add_note"):  # Python >= 3.11
        exc.add_note(note)
        raise exc
    try:  # Python 3.10: the same class, chained to the original
        wrapped = type(exc)(f"{exc}; {note}")
    except Exception:  # a constructor with other arguments: keep the original as is
        raise exc from None
    raise wrapped from exc


@dataclass
class RunResult:
    """What a run produced (the estimator turns it into fitted attributes).

    Attributes
    ----------
    labels : list of ndarray
        Each client's labels.
    summaries : list of Message
        Round-0 uploads (the method's summaries).
    model : Message
        The round-0 global model.
    states, replies : list
        Each client's last state and the last message the server sent it.
    server_state : ServerState or None
        The server's state after the last round (rounds runner only).
    restarts : int
        Whole-run restarts of round 0.
    bytes_up, bytes_down : list of list of int
        Per round, per client: wire bytes of the client's upload and of the message it received.
    round_seconds : list of float
        Wall time of each round (clients and server).
    timings : dict
        ``client`` (round-0 clients), ``server`` (round-0 server), ``rounds`` (later rounds),
        ``assign`` and ``total`` seconds.
    client_seconds : list of float
        Per client: seconds of its own phases (every round-0 attempt, later rounds, assign),
        measured in the worker that ran them.
    """

    labels: list
    summaries: list
    model: Any
    states: list
    replies: list
    server_state: Any = None
    restarts: int = 0
    bytes_up: list = field(default_factory=list)
    bytes_down: list = field(default_factory=list)
    round_seconds: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    client_seconds: list = field(default_factory=list)


def _timed(fn, seconds: list):
    """``fn`` wrapped to add each call's wall time to ``seconds[i]`` (one slot per client, so threads never share)."""
    def run(i):
        t = time.perf_counter()
        try:
            return fn(i)
        finally:
            seconds[i] += time.perf_counter() - t

    return run


def _tick(progress: Report | None, phase: str):
    return None if progress is None else (lambda done, total: progress(phase, done, total))


def _assign_all(est, X_clients, states, replies, plan: ThreadPlan, progress, seconds: list) -> list:
    with limit_blas_threads(plan.per_client):
        return map_clients(
            _timed(lambda i: est._run_assign(X_clients[i], states[i], replies[i], plan.per_client), seconds),
            len(X_clients), plan.workers, _tick(progress, "assign"),
        )


def _round_zero(est, X_clients, entropy: int, plan: ThreadPlan, progress: Report | None, seconds: list):
    """Round 0 with whole-run restarts: (summaries, states, model, replies, restart, t_clients, t_server)."""
    n_clients = len(X_clients)
    max_restarts = est._max_restarts()
    t_clients = t_server = 0.0
    for restart in range(max_restarts + 1):
        if restart and progress is not None:
            progress("restart", restart, max_restarts)
        t0 = time.perf_counter()
        with limit_blas_threads(plan.per_client):
            client_out = map_clients(
                _timed(lambda i: est._run_summarize(X_clients[i], i, entropy, restart, plan.per_client), seconds),
                n_clients, plan.workers, _tick(progress, "summarize"),
            )
        t1 = time.perf_counter()
        t_clients += t1 - t0
        summaries = [s for s, _ in client_out]
        if progress is not None:
            progress("server", 0, 1)
        try:
            with limit_blas_threads(plan.server):
                model, replies = est._run_aggregate(summaries, entropy, restart, plan.server)
            t_server += time.perf_counter() - t1
            break
        except est._restart_on as exc:
            t_server += time.perf_counter() - t1
            if restart == max_restarts:
                reraise_with_note(exc, f"the run failed in all {max_restarts + 1} attempt(s) with fresh randomness")
    if progress is not None:
        progress("server", 1, 1)
    return summaries, [st for _, st in client_out], model, replies, restart, t_clients, t_server


def run_one_shot(est: BaseFederatedClusterer, X_clients: list[np.ndarray], entropy: int, plan: ThreadPlan,
                 progress: Report | None = None) -> RunResult:
    """Summarize, aggregate (with restarts), assign: the one-shot methods' flow.

    The calling thread is pinned once for the whole run (:func:`~fastfc._parallel.pinned_worker`),
    so the phases it runs itself (every one when the clients run one after the other, the
    server's otherwise) do not each set and restore the OpenMP limit.
    """
    t0 = time.perf_counter()
    seconds = [0.0] * len(X_clients)
    # one BLAS limit for the whole run when every phase wants the same (the phases' own are then no-ops)
    same = plan.per_client == plan.server
    with pinned_worker(), (limit_blas_threads(plan.per_client) if same else nullcontext()):
        summaries, states, model, replies, restart, t_cl, t_sv = _round_zero(est, X_clients, entropy, plan, progress,
                                                                             seconds)
        t2 = time.perf_counter()
        labels = _assign_all(est, X_clients, states, replies, plan, progress, seconds)
    t3 = time.perf_counter()
    return RunResult(
        labels=labels, summaries=summaries, model=model, states=states, replies=replies, restarts=restart,
        bytes_up=[[s.wire_size for s in summaries]], bytes_down=[[r.wire_size for r in replies]],
        round_seconds=[t2 - t0],
        timings={"client": t_cl, "server": t_sv, "assign": t3 - t2, "total": t3 - t0}, client_seconds=seconds,
    )


def run_rounds(est: BaseFederatedClusterer, X_clients: list[np.ndarray], entropy: int, plan: ThreadPlan,
               progress: Report | None = None) -> RunResult:
    """The rounds protocol in one process.

    Round 0 is :func:`run_one_shot`'s first part (with its restarts); then, while the
    server is not done, every client runs ``_run_client_round`` on the broadcast it got
    and the server runs ``_run_server_round`` on the uploads (a default refinement round whose
    broadcast is the same for every client runs all clients in one compiled call,
    ``_run_client_rounds``: the same uploads and states). ``progress`` also gets
    ``("round", r, max_rounds)`` when round ``r >= 1`` begins.
    """
    n_clients = len(X_clients)
    t0 = time.perf_counter()
    seconds = [0.0] * len(X_clients)
    summaries, states, model, replies, restart, t_cl, t_sv = _round_zero(est, X_clients, entropy, plan, progress,
                                                                         seconds)
    with limit_blas_threads(plan.server):
        broadcasts, server_state, done = est._run_server_start(model, replies, summaries, entropy, restart,
                                                               plan.server)
    t1 = time.perf_counter()
    bytes_up = [[s.wire_size for s in summaries]]
    bytes_down = [[b.wire_size for b in broadcasts]]
    round_seconds = [t1 - t0]
    max_rounds = est._max_rounds()
    r = 0
    while not done:
        r += 1
        if r > max_rounds:  # a method's programming error: its server must stop by max_rounds
            raise RuntimeError(f"{type(est).__name__}: the server did not finish within {max_rounds} rounds")
        if progress is not None:
            progress("round", r, max_rounds)
        tr = time.perf_counter()
        with limit_blas_threads(plan.per_client):
            # many clients and one shared refinement broadcast: one call for all (the same uploads and states)
            out = est._run_client_rounds(X_clients, states, broadcasts, r, plan.server, seconds)
            if out is None:
                costs = est._round_costs(X_clients, states, broadcasts) if plan.workers > 1 else None
                order = None if costs is None else sorted(range(n_clients), key=lambda i: -float(costs[i]))
                out = map_clients(
                    _timed(lambda i: est._run_client_round(X_clients[i], states[i], broadcasts[i], i, entropy,
                                                           restart, r, plan.per_client), seconds),
                    n_clients, plan.workers, None, order,
                )
        uploads = [u for u, _ in out]
        states = [s for _, s in out]
        with limit_blas_threads(plan.server):
            broadcasts, server_state, done = est._run_server_round(uploads, server_state, entropy, restart, r,
                                                                   plan.server)
        bytes_up.append([u.wire_size for u in uploads])
        bytes_down.append([b.wire_size for b in broadcasts])
        round_seconds.append(time.perf_counter() - tr)
    t2 = time.perf_counter()
    labels = _assign_all(est, X_clients, states, broadcasts, plan, progress, seconds)
    t3 = time.perf_counter()
    return RunResult(
        labels=labels, summaries=summaries, model=model, states=states, replies=broadcasts,
        server_state=server_state, restarts=restart, bytes_up=bytes_up, bytes_down=bytes_down,
        round_seconds=round_seconds,
        timings={"client": t_cl, "server": t_sv, "rounds": t2 - t0 - t_cl - t_sv, "assign": t3 - t2,
                 "total": t3 - t0},
        client_seconds=seconds,
    )
