"""The rounds protocol with a toy method: the runner, the public round API, the stop rule,
determinism over ``n_jobs``, and replaying a lost round."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from fastfc.base import BaseFederatedClusterer, ClientState, ServerState, StateError
from fastfc.protocol import ArraySpec, Message, MessageError, decode_message


@dataclass(frozen=True, eq=False)
class ToyUpload(Message):
    """A client's upload: its mean of feature 0 plus one draw of its round's random stream."""

    METHOD = "toyrounds"
    KIND = "up"
    ARRAYS = {"values": ArraySpec("f", 1)}
    values: np.ndarray
    n_features: int


@dataclass(frozen=True, eq=False)
class ToyBroadcast(Message):
    """The server's broadcast: a threshold on feature 0."""

    METHOD = "toyrounds"
    KIND = "down"
    ARRAYS = {"centers": ArraySpec("f", 2)}
    centers: np.ndarray
    n_features: int
    final: bool = False


class ToyRounds(BaseFederatedClusterer):
    """Each round: clients upload (mean of feature 0 + round, a random draw); the server averages
    the means into a threshold and stops after ``stop_after`` rounds; labels = feature 0 above it."""

    _summary_cls = ToyUpload
    _reply_cls = ToyBroadcast

    def __init__(self, n_clusters=2, *, stop_after=3, random_state=None, n_jobs=None):
        self.n_clusters = n_clusters
        self.stop_after = stop_after
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _multi_round(self):
        return True

    def _max_rounds(self):
        return 10

    def _broadcast_cls(self, round):
        return ToyBroadcast

    def _upload_cls(self, round):
        return ToyUpload

    def _summarize(self, X, rng, n_threads):
        return ToyUpload(values=np.array([X[:, 0].mean(), rng.random()]), n_features=X.shape[1]), {"draws": np.zeros(0)}

    def _aggregate(self, summaries, rng, n_threads):
        c = np.array([[np.mean([s.values[0] for s in summaries]) + rng.random() * 0]])
        b = ToyBroadcast(centers=np.repeat(c, 1, axis=1) * np.ones((1, summaries[0].n_features)),
                         n_features=summaries[0].n_features)
        return b, [b] * len(summaries)

    def _client_round(self, X, state, broadcast, rng, n_threads, round):
        draw = rng.random()
        up = ToyUpload(values=np.array([X[:, 0].mean() + round, draw]), n_features=X.shape[1])
        return up, {"draws": np.append(state["draws"], draw)}

    def _server_round(self, uploads, server_state, rng, n_threads, round):
        t = np.mean([u.values[0] for u in uploads]) - round
        done = round >= self.stop_after
        b = ToyBroadcast(centers=np.full((1, uploads[0].n_features), t), n_features=uploads[0].n_features, final=done)
        return [b] * len(uploads), {**server_state.values, "t": t}, done

    def _assign(self, X, state, reply, n_threads):
        return (X[:, 0] > reply.centers[0, 0]).astype(np.int32)


def _clients(seed=0, n_clients=4):
    rng = np.random.default_rng(seed)
    return [np.vstack([rng.normal(-3, 1, (20 + i, 2)), rng.normal(3, 1, (15, 2))]) for i in range(n_clients)]


def _by_hand(est, Xc, seed, *, serialise=True):
    """Drive the public round API as separate parties would, through bytes when ``serialise``."""
    wire = (lambda m: decode_message(m.to_bytes())) if serialise else (lambda m: m)
    keep = (lambda s: ClientState.from_bytes(s.to_bytes())) if serialise else (lambda s: s)
    states, uploads = [], []
    for i, X in enumerate(Xc):
        up, st = est.client_round(X, round=0, client_index=i, random_state=seed)
        uploads.append(wire(up))
        states.append(keep(st))
    broadcasts, sstate, done = est.server_round(uploads, round=0, random_state=seed)
    r, sizes = 0, [[u.wire_size for u in uploads]]
    while not done:
        r += 1
        out = [est.client_round(X, states[i], wire(broadcasts[i]), round=r, random_state=seed) for i, X in enumerate(Xc)]
        uploads = [wire(u) for u, _ in out]
        states = [keep(s) for _, s in out]
        broadcasts, sstate, done = est.server_round(uploads, sstate, round=r, random_state=seed)
        sizes.append([u.wire_size for u in uploads])
    labels = [est.client_assign(X, states[i], wire(broadcasts[i])) for i, X in enumerate(Xc)]
    return labels, states, sstate, sizes


def test_runner_stops_when_the_server_says_done():
    Xc = _clients()
    est = ToyRounds(stop_after=3, random_state=0).fit_clients(Xc)
    assert est.n_rounds_ == 4  # round 0 and rounds 1..3
    assert est.bytes_up_.shape == est.bytes_down_.shape == (4, len(Xc))
    assert (est.bytes_up_ > 0).all() and (est.bytes_down_ > 0).all()
    assert est.round_seconds_.shape == (4,)
    # the labels come from the final broadcast: feature 0 above the last threshold (the pooled means' mean)
    t = np.mean([X[:, 0].mean() for X in Xc])
    for X, lab in zip(Xc, est.client_labels_):
        np.testing.assert_array_equal(lab, (X[:, 0] > t).astype(np.int32))


def test_public_round_api_through_bytes_equals_fit_clients():
    Xc = _clients(1)
    est = ToyRounds(stop_after=2, random_state=11)
    labels, states, sstate, sizes = _by_hand(est, Xc, 11)
    fitted = ToyRounds(stop_after=2, random_state=11).fit_clients(Xc)
    for a, b in zip(labels, fitted.client_labels_):
        np.testing.assert_array_equal(a, b)
    # the byte accounting of the runner is the length of the messages that crossed
    np.testing.assert_array_equal(np.asarray(sizes), fitted.bytes_up_)
    assert isinstance(sstate, ServerState) and sstate.round == 2
    assert all(s.round == 2 for s in states)


def test_random_streams_are_keyed_by_round_and_independent_of_threads():
    Xc = _clients(2, n_clients=5)
    a = ToyRounds(stop_after=4, random_state=3, n_jobs=1)
    b = ToyRounds(stop_after=4, random_state=3, n_jobs=2)
    _, sa, _, _ = _by_hand(a, Xc, 3, serialise=False)
    fa = a.fit_clients(Xc)
    fb = b.fit_clients(Xc)
    for x, y in zip(fa.client_labels_, fb.client_labels_):
        np.testing.assert_array_equal(x, y)
    draws = np.array([s["draws"] for s in sa])  # (clients, rounds)
    assert draws.shape == (5, 4)
    # every (client, round) has its own stream: no two draws coincide
    assert np.unique(draws).size == draws.size


def test_a_lost_round_is_replayed_from_the_saved_state():
    """A client that crashed in round r reruns it from its saved round r-1 state and the same broadcast:
    the upload is the same bytes (each round is a pure function of data, state, broadcast and seed)."""
    Xc = _clients(4)
    est = ToyRounds(stop_after=3, random_state=5)
    ups, states = [], []
    for i, X in enumerate(Xc):
        u, s = est.client_round(X, round=0, client_index=i, random_state=5)
        ups.append(u)
        states.append(s)
    bc, sstate, _ = est.server_round(ups, round=0, random_state=5)
    saved = states[2].to_bytes()
    first, _ = est.client_round(Xc[2], states[2], bc[2], round=1, random_state=5)
    again, _ = est.client_round(Xc[2], ClientState.from_bytes(saved), decode_message(bc[2].to_bytes()), round=1,
                                random_state=5)
    assert first.to_bytes() == again.to_bytes()


def test_round_api_rejects_out_of_order_and_misaddressed_messages():
    Xc = _clients(5)
    est = ToyRounds(stop_after=3, random_state=0)
    ups, states = zip(*[est.client_round(X, round=0, client_index=i, random_state=0) for i, X in enumerate(Xc)])
    bc, sstate, done = est.server_round(list(ups), round=0, random_state=0)
    assert not done
    with pytest.raises(StateError, match="state of round 1"):
        est.client_round(Xc[0], states[0], bc[0], round=2, random_state=0)
    with pytest.raises(MessageError, match="addressed to client 1"):
        est.client_round(Xc[0], states[0], bc[1], round=1, random_state=0)
    with pytest.raises(MessageError, match="broadcast of round 0"):
        est.client_round(Xc[0], states[0], bc[0].addressed(client=0, round=1), round=1, random_state=0)
    with pytest.raises(ValueError, match="round 0 takes no state"):
        est.client_round(Xc[0], states[0], None, round=0, random_state=0)
    out = [est.client_round(X, states[i], bc[i], round=1, random_state=0) for i, X in enumerate(Xc)]
    up1 = [u for u, _ in out]
    with pytest.raises(StateError, match="server_round 2 needs the server state of round 1, got round 0"):
        est.server_round(up1, sstate, round=2, random_state=0)
    with pytest.raises(MessageError, match="stamped round 1"):
        est.server_round(up1, sstate.__class__(sstate.method, 1, sstate.model, sstate.values), round=2,
                         random_state=0)
    with pytest.raises(MessageError, match="come from client"):
        est.server_round([up1[0], up1[0]], sstate, round=1, random_state=0)
    with pytest.raises(ValueError, match="beyond this estimator's last round"):
        est.client_round(Xc[0], states[0], bc[0], round=11, random_state=0)
    # a client lost in a round: the server continues with the others
    bc1, _, _ = est.server_round(up1[1:], sstate, round=1, random_state=0)
    assert [b.client for b in bc1] == [1, 2, 3]
