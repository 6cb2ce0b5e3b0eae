"""Property: whatever bytes arrive, every reader returns a valid message or raises MessageError, quickly.

Inputs start from a valid instance of every registered message class (see
``protocol_examples.FACTORIES``) and are damaged by random header edits,
random shapes and dtypes, truncations and byte flips, with and without the
digest recomputed (an attacker can recompute it).
"""
import json
import struct

import numpy as np
import pytest
from fuzz_harness import (
    apply_mutations, byte_flip, fuzz_settings, json_edit, json_values, reads_or_rejects, truncation,
)
from hypothesis import given
from hypothesis import strategies as st
from protocol_examples import FACTORIES, reseal, split_header, with_header

from fastfc.protocol import _KIND_DTYPES, WIRE_DTYPES, Message, MessageError, _scalar_fields, decode_message, peek_header

CLASSES = sorted(FACTORIES, key=lambda c: c.__name__)

json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.sampled_from([0, 1, -1, 2**63, 2**64, 10**30])
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6)
    | st.sampled_from(["<f8", "<f4", "<i8", "<i4", "|b1", "|u1", ">f8", "|O", "kfed", "summary", "centers"])
)
dimension = st.integers(0, 6) | st.sampled_from([2**31, 2**32, 2**62, 2**63 - 1, 2**63, 10**30, -1])
dtypes = st.sampled_from(sorted(WIRE_DTYPES) + ["|u1", "<u2", ">f8", ">i4", "<f2", "<c16", "|O", "|V8", "<U1"])
#: set, delete or add one entry anywhere in the header to a random JSON value
header_edit = json_edit(json_values(json_scalars)).map(lambda edit: ("header", edit))


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


payload_edit = st.builds(
    lambda cut, extra: ("payload", lambda payload: payload[:len(payload) - cut % (len(payload) + 1)] + extra),
    st.integers(0, 64), st.binary(max_size=24),
)
mutation = header_edit | array_edit() | truncation | byte_flip | payload_edit


def _edit_message(data: bytes, kind: str, fn) -> bytes:
    """Apply a ``"header"`` edit to the parsed header or a ``"payload"`` edit to the payload."""
    try:
        raw, payload = split_header(data)
        header = json.loads(raw)
    except (ValueError, struct.error):
        return data  # an earlier mutation broke the framing: nothing to edit
    if not isinstance(header, dict):
        return data
    if kind == "header":
        fn(header)
    else:
        payload = fn(payload)
    return with_header(data, json.dumps(header).encode(), payload=payload)


def _apply(data: bytes, mutations, recompute_digest: bool) -> bytes:
    data = apply_mutations(data, mutations, _edit_message)
    return reseal(data[:-32]) if recompute_digest and len(data) >= 32 else data


def _assert_well_typed(msg: Message) -> None:
    """Every scalar has exactly its declared type and every array a dtype of its spec's kind."""
    assert isinstance(msg, Message)
    for name, (typ, optional) in _scalar_fields(type(msg)).items():
        value = getattr(msg, name)
        assert type(value) is typ or (optional and value is None), (name, value)
    for name, spec in msg.ARRAYS.items():
        assert getattr(msg, name).dtype.str in _KIND_DTYPES[spec.kind], name


def _check_read(read, out) -> None:
    """A header is a dict; a message is well typed and re-encodes to itself."""
    if read is peek_header:
        assert isinstance(out, dict)
    else:
        _assert_well_typed(out)
        assert type(out).from_bytes(out.to_bytes()).to_bytes() == out.to_bytes()


def _reads_or_rejects(data: bytes, cls: type[Message]) -> None:
    """The property: each reader returns a valid result or raises MessageError, within READ_BUDGET."""
    reads_or_rejects(data, (decode_message, cls.from_bytes, peek_header), MessageError, _check_read)


messages = st.builds(
    lambda cls, seed, k, d, m: FACTORIES[cls](np.random.default_rng(seed), k, d, m).addressed(client=seed % 4, round=m),
    st.sampled_from(CLASSES), st.integers(0, 2**16), st.integers(1, 4), st.integers(1, 3), st.integers(0, 5),
)


def _fuzz(msg, mutations, recompute_digest):
    _reads_or_rejects(_apply(msg.to_bytes(), mutations, recompute_digest), type(msg))


_FUZZ_ARGS = dict(msg=messages, mutations=st.lists(mutation, min_size=1, max_size=3), recompute_digest=st.booleans())


@fuzz_settings(150)
@given(**_FUZZ_ARGS)
def test_damaged_messages_read_or_raise_message_error(msg, mutations, recompute_digest):
    """Random damage to a valid message of any class: readers return a valid message or raise MessageError, fast."""
    _fuzz(msg, mutations, recompute_digest)


@pytest.mark.slow
@fuzz_settings(5000)
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


def test_the_fuzz_property_fails_on_any_other_error_or_a_bad_result():
    """The harness is not vacuous: a reader raising another type, or a result failing its check, fails the property."""
    def check(read, out):
        assert out == "valid"

    reads_or_rejects(b"", (lambda data: "valid", lambda data: decode_message(data)), MessageError, check)
    with pytest.raises(KeyError):
        reads_or_rejects(b"", (lambda data: {}["foreign"],), MessageError, check)
    with pytest.raises(AssertionError):
        reads_or_rejects(b"", (lambda data: "invalid",), MessageError, check)
