"""Property: whatever bytes arrive, every reader returns a valid message or raises MessageError, quickly.

Inputs start from a valid instance of every registered message class (see
``protocol_examples.FACTORIES``) and are damaged by random header edits,
random shapes and dtypes, truncations and byte flips, with and without the
digest recomputed (an attacker can recompute it).
"""
import json
import struct
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_examples import FACTORIES, reseal, split_header, with_header

from fastfc.protocol import _KIND_DTYPES, WIRE_DTYPES, Message, MessageError, _scalar_fields, decode_message, peek_header

CLASSES = sorted(FACTORIES, key=lambda c: c.__name__)
#: seconds any one read may take (generous: the machine is shared); a real read takes well under 10 ms
READ_BUDGET = 2.0

json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.sampled_from([0, 1, -1, 2**63, 2**64, 10**30])
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6)
    | st.sampled_from(["<f8", "<f4", "<i8", "<i4", "|b1", "|u1", ">f8", "|O", "kfed", "summary", "centers"])
)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)
dimension = st.integers(0, 6) | st.sampled_from([2**31, 2**32, 2**62, 2**63 - 1, 2**63, 10**30, -1])
dtypes = st.sampled_from(sorted(WIRE_DTYPES) + ["|u1", "<u2", ">f8", ">i4", "<f2", "<c16", "|O", "|V8", "<U1"])


def _paths(node, prefix=()):
    """Every (container, key) path of a parsed header."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        yield prefix + (key,)
        yield from _paths(child, prefix + (key,))


@st.composite
def header_edit(draw):
    """Set, delete or add one entry anywhere in the header to a random JSON value."""
    choice, value, new_key = draw(st.integers(0, 10**6)), draw(json_values), draw(st.text(max_size=6))
    op = draw(st.sampled_from(["set", "delete", "add"]))

    def apply(header):
        paths = list(_paths(header))
        if not paths:
            return
        *parent_path, key = paths[choice % len(paths)]
        parent = header
        for k in parent_path:
            parent = parent[k]
        if op == "set":
            parent[key] = value
        elif op == "delete":
            del parent[key]
        elif isinstance(parent, dict):
            parent[new_key] = value
        else:
            parent.append(value)

    return ("header", apply)


@st.composite
def array_edit(draw):
    """Give one array a random shape and/or dtype (the payload is left as it is)."""
    index = draw(st.integers(0, 10))
    shape = draw(st.none() | st.lists(dimension, max_size=4) | st.just([1] * 70))
    dtype = draw(st.none() | dtypes)

    def apply(header):
        arrays = header.get("arrays")
        if not isinstance(arrays, list) or not arrays or not isinstance(arrays[index % len(arrays)], dict):
            return
        entry = arrays[index % len(arrays)]
        if shape is not None:
            entry["shape"] = shape
        if dtype is not None:
            entry["dtype"] = dtype

    return ("header", apply)


truncation = st.builds(lambda n: ("bytes", lambda data: data[:n % (len(data) + 1)]), st.integers(0, 10**6))


def _flip(pos: int, mask: int):
    def apply(data: bytes) -> bytes:
        if not data:
            return data
        i = pos % len(data)
        return data[:i] + bytes([data[i] ^ mask]) + data[i + 1:]

    return ("bytes", apply)


byte_flip = st.builds(_flip, st.integers(0, 10**6), st.integers(1, 255))
payload_edit = st.builds(
    lambda cut, extra: ("payload", lambda payload: payload[:len(payload) - cut % (len(payload) + 1)] + extra),
    st.integers(0, 64), st.binary(max_size=24),
)
mutation = header_edit() | array_edit() | truncation | byte_flip | payload_edit


def _apply(data: bytes, mutations, recompute_digest: bool) -> bytes:
    for kind, fn in mutations:
        if kind == "bytes":
            data = fn(data)
            continue
        try:
            raw, payload = split_header(data)
            header = json.loads(raw)
        except (ValueError, struct.error):
            continue  # an earlier mutation broke the framing: nothing to edit
        if not isinstance(header, dict):
            continue
        if kind == "header":
            fn(header)
        else:
            payload = fn(payload)
        data = with_header(data, json.dumps(header).encode(), payload=payload)
    return reseal(data[:-32]) if recompute_digest and len(data) >= 32 else data


def _assert_well_typed(msg: Message) -> None:
    """Every scalar has exactly its declared type and every array a dtype of its spec's kind."""
    assert isinstance(msg, Message)
    for name, (typ, optional) in _scalar_fields(type(msg)).items():
        value = getattr(msg, name)
        assert type(value) is typ or (optional and value is None), (name, value)
    for name, spec in msg.ARRAYS.items():
        assert getattr(msg, name).dtype.str in _KIND_DTYPES[spec.kind], name


def _reads_or_rejects(data: bytes, cls: type[Message]) -> None:
    """The property: each reader returns a valid result or raises MessageError, within READ_BUDGET."""
    for read in (decode_message, cls.from_bytes, peek_header):
        start = time.perf_counter()
        try:
            out = read(data)
        except MessageError:
            pass
        else:
            if read is peek_header:
                assert isinstance(out, dict)
            else:
                _assert_well_typed(out)
                assert type(out).from_bytes(out.to_bytes()).to_bytes() == out.to_bytes()
        assert time.perf_counter() - start < READ_BUDGET, read


messages = st.builds(
    lambda cls, seed, k, d, m: FACTORIES[cls](np.random.default_rng(seed), k, d, m).addressed(client=seed % 4, round=m),
    st.sampled_from(CLASSES), st.integers(0, 2**16), st.integers(1, 4), st.integers(1, 3), st.integers(0, 5),
)


def _fuzz(msg, mutations, recompute_digest):
    _reads_or_rejects(_apply(msg.to_bytes(), mutations, recompute_digest), type(msg))


_FUZZ_ARGS = dict(msg=messages, mutations=st.lists(mutation, min_size=1, max_size=3), recompute_digest=st.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**_FUZZ_ARGS)
def test_damaged_messages_read_or_raise_message_error(msg, mutations, recompute_digest):
    """Random damage to a valid message of any class: readers return a valid message or raise MessageError, fast."""
    _fuzz(msg, mutations, recompute_digest)


@pytest.mark.slow
@settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**_FUZZ_ARGS)
def test_damaged_messages_read_or_raise_message_error_long(msg, mutations, recompute_digest):
    """The same property over many more examples."""
    _fuzz(msg, mutations, recompute_digest)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_valid_message_of_every_class_round_trips(cls):
    """The fuzz starts from valid messages: each factory's output reads back identical through every reader."""
    msg = FACTORIES[cls](np.random.default_rng(1), 3, 2, 4).addressed(client=1, round=2)
    data = msg.to_bytes()
    back = decode_message(data)
    assert type(back) is cls and back.to_bytes() == data and cls.from_bytes(data).to_bytes() == data
    assert (peek_header(data)["client"], peek_header(data)["round"]) == (1, 2)


def test_every_registered_message_class_is_fuzzed():
    """A new message class cannot escape the fuzz test: the factories cover the registry exactly."""
    ours = {cls for cls in Message._registry.values() if cls.__module__.startswith("fastfc.")}  # not test toys
    assert set(FACTORIES) == ours
