"""The wire format: round trips, and every kind of malformed message is rejected with a clear error."""
import dataclasses
import json
import subprocess
import sys
import tracemalloc
from dataclasses import dataclass

import numpy as np
import pytest
from protocol_examples import FACTORIES, example, reseal, rewrite_header, split_header, with_header

from fastfc import protocol
from fastfc.feca import FeCASummary
from fastfc.fed_kstar_hc import FedKStarHCModel
from fastfc.kfed import KFedModel, KFedReply, KFedSummary
from fastfc.protocol import (
    _METHOD_MODULES,
    FORMAT_VERSION,
    ArraySpec,
    Message,
    MessageError,
    _json_depth,
    decode_message,
    peek_header,
)


def _summary(dtype=np.float64):
    rng = np.random.default_rng(0)
    return KFedSummary(centers=rng.normal(size=(3, 4)).astype(dtype), n_features=4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_roundtrip_preserves_arrays_and_dtype(dtype):
    msg = _summary(dtype)
    back = KFedSummary.from_bytes(msg.to_bytes())
    assert back.centers.dtype == dtype
    np.testing.assert_array_equal(back.centers, msg.centers)
    assert back.n_features == 4
    assert not back.centers.flags.writeable


def test_generic_decode_dispatches_on_header():
    reply = KFedReply(centers=np.zeros((2, 3)), local_to_global=np.array([1, 0, 1]), n_features=3)
    back = decode_message(reply.to_bytes())
    assert isinstance(back, KFedReply)
    np.testing.assert_array_equal(back.local_to_global, [1, 0, 1])
    head = peek_header(reply.to_bytes())
    assert (head["method"], head["kind"], head["v"]) == ("kfed", "reply", FORMAT_VERSION)


def test_message_copies_caller_array():
    centers = np.ones((2, 2))
    msg = KFedSummary(centers=centers, n_features=2)
    centers[0, 0] = 5.0
    assert msg.centers[0, 0] == 1.0


def test_no_pickle_in_wire_format():
    data = _summary().to_bytes()
    assert b"\x80\x04" not in data[:16]  # pickle protocol marker
    assert data[:4] == b"FFCM"


@pytest.mark.parametrize("cut", [0, 5, 20, -1, -33])
def test_truncated_message_rejected(cut):
    data = _summary().to_bytes()
    with pytest.raises(MessageError, match="truncated|digest|magic"):
        KFedSummary.from_bytes(data[:cut] if cut else b"")


def test_flipped_payload_byte_detected():
    data = bytearray(_summary().to_bytes())
    data[-40] ^= 0xFF
    with pytest.raises(MessageError, match="digest"):
        KFedSummary.from_bytes(bytes(data))


def test_wrong_version_rejected():
    data = rewrite_header(_summary().to_bytes(), lambda h: h.update(v=99))
    with pytest.raises(MessageError, match="version 99"):
        KFedSummary.from_bytes(data)


def test_wrong_kind_rejected():
    data = KFedModel(centers=np.zeros((2, 3)), n_features=3, n_iter=1).to_bytes()
    with pytest.raises(MessageError, match="expected a 'kfed' 'summary'"):
        KFedSummary.from_bytes(data)


def test_disallowed_dtype_rejected():
    def edit(h):
        h["arrays"][0]["dtype"] = "|O"

    with pytest.raises(MessageError, match="not allowed"):
        KFedSummary.from_bytes(rewrite_header(_summary().to_bytes(), edit))


def test_shape_not_matching_payload_rejected():
    def edit(h):
        h["arrays"][0]["shape"] = [5, 4]

    with pytest.raises(MessageError, match="truncated"):
        KFedSummary.from_bytes(rewrite_header(_summary().to_bytes(), edit))

    def edit_small(h):
        h["arrays"][0]["shape"] = [1, 4]

    with pytest.raises(MessageError, match="trailing"):
        KFedSummary.from_bytes(rewrite_header(_summary().to_bytes(), edit_small))


def test_inconsistent_scalar_rejected():
    with pytest.raises(MessageError, match="n_features=5"):
        KFedSummary.from_bytes(rewrite_header(_summary().to_bytes(), lambda h: h["scalars"].update(n_features=5)))


def test_unknown_and_missing_fields_rejected():
    with pytest.raises(MessageError, match="scalar fields"):
        KFedSummary.from_bytes(rewrite_header(_summary().to_bytes(), lambda h: h["scalars"].update(extra=1)))
    with pytest.raises(MessageError, match="scalar fields"):
        KFedSummary.from_bytes(rewrite_header(_summary().to_bytes(), lambda h: h["scalars"].pop("n_features")))


def test_nan_rejected_on_build_and_read():
    bad = np.zeros((2, 4))
    bad[1, 2] = np.nan
    with pytest.raises(MessageError, match="NaN"):
        KFedSummary(centers=bad, n_features=4)
    # a NaN smuggled into the payload with a recomputed digest
    good = KFedSummary(centers=np.zeros((2, 4)), n_features=4).to_bytes()
    body = bytearray(good[:-32])
    body[-8:] = np.array([np.nan]).tobytes()
    with pytest.raises(MessageError, match="NaN"):
        KFedSummary.from_bytes(reseal(bytes(body)))


def test_out_of_range_index_rejected():
    with pytest.raises(MessageError, match="does not exist"):
        KFedReply(centers=np.zeros((2, 3)), local_to_global=np.array([0, 2]), n_features=3)
    with pytest.raises(MessageError, match=">= 0"):
        KFedReply(centers=np.zeros((2, 3)), local_to_global=np.array([0, -1]), n_features=3)


def test_not_bytes_and_bad_magic():
    with pytest.raises(MessageError, match="expected bytes"):
        KFedSummary.from_bytes("hello")
    with pytest.raises(MessageError, match="magic"):
        KFedSummary.from_bytes(reseal(b"XXXX" + b"\0" * 40))


def test_wrong_field_types_rejected():
    with pytest.raises(MessageError, match="expected int, got list"):
        KFedSummary(centers=np.zeros((1, 2)), n_features=[2])
    with pytest.raises(MessageError, match="float32/float64"):
        KFedSummary(centers=np.array([["a", "b"]]), n_features=2)
    with pytest.raises(MessageError, match="2-D"):
        KFedSummary(centers=np.zeros(3), n_features=3)


def test_messages_are_frozen():
    msg = _summary()
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.n_features = 3
    with pytest.raises(ValueError):
        msg.centers[0, 0] = 1.0


# -- decoding in a process that imported only the protocol ----------------------------------------
_FRESH_DECODE = """
import json, sys
import fastfc.protocol as protocol
modules = set(protocol._METHOD_MODULES.values())
early = sorted(m for m in sys.modules if m in modules)
assert not early, f"importing fastfc.protocol imported {early}"
out = []
for hexdata in json.loads(sys.stdin.read()):
    data = bytes.fromhex(hexdata)
    loaded = protocol._METHOD_MODULES[protocol.peek_header(data)["method"]] in sys.modules
    msg = protocol.decode_message(data)
    out.append([type(msg).__name__, msg.client, msg.round, loaded])
print(json.dumps(out))
"""


def test_every_method_decodes_in_a_process_that_imported_only_the_protocol():
    """A server or relay imports only fastfc.protocol; decode_message must still read every method's messages."""
    classes = sorted(FACTORIES, key=lambda c: c.__name__)
    payload = json.dumps([example(cls, seed=i).to_bytes().hex() for i, cls in enumerate(classes)])
    run = subprocess.run([sys.executable, "-c", _FRESH_DECODE], input=payload, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    # each method's module is imported by the first decode of that method, not before
    loaded = [any(c.METHOD == cls.METHOD for c in classes[:i]) for i, cls in enumerate(classes)]
    assert json.loads(run.stdout) == [[cls.__name__, i % 5, i % 3, loaded[i]] for i, cls in enumerate(classes)]


def test_module_table_names_the_module_of_every_registered_class():
    """_METHOD_MODULES maps each registered METHOD to the module that defines its classes (else decoding misses it)."""
    for (method, _), cls in Message._registry.items():
        if cls.__module__.startswith("fastfc."):  # test modules may register toy methods of their own
            assert _METHOD_MODULES.get(method) == cls.__module__, cls


@pytest.mark.parametrize("method", ["os", "fastfc.cli", "fastfc.experiment", "subprocess", "kfed.x"])
def test_module_named_by_a_header_is_never_imported(method, monkeypatch):
    """An unknown header method is an error; the reader imports only modules from its own fixed table."""
    imported = []
    monkeypatch.setattr(protocol.importlib, "import_module", lambda name, *a: imported.append(name))
    data = rewrite_header(_summary().to_bytes(), lambda h: h.update(method=method))
    with pytest.raises(MessageError, match="unknown message type"):
        decode_message(data)
    assert imported == []


# -- malformed headers ---------------------------------------------------------------------------
def _array(key, value):
    return lambda h: h["arrays"][0].update({key: value})


def _top(key, value):
    return lambda h: h.update({key: value})


#: header edits that every reader (peek_header included) must reject, with the error they must name
STRUCTURAL = {
    "shape product overflows int64": (_array("shape", [2**32, 2**32]), "too large"),
    "shape entry 10**30": (_array("shape", [10**30, 4]), "malformed shape"),
    "shape [0, 2**62]": (_array("shape", [0, 2**62]), "too large"),
    "65 dimensions": (_array("shape", [1] * 65), "malformed shape"),
    "negative dimension": (_array("shape", [-3, -4]), "malformed shape"),
    "float dimension": (_array("shape", [3.0, 4]), "malformed shape"),
    "bool dimension": (_array("shape", [3, True]), "malformed shape"),
    "shape not a list": (_array("shape", 12), "malformed shape"),
    "dtype as list": (_array("dtype", ["<f8"]), "not allowed"),
    "dtype as object": (_array("dtype", {"<f8": 1}), "not allowed"),
    "big-endian dtype": (_array("dtype", ">f8"), "not allowed"),
    "uint8 dtype": (_array("dtype", "|u1"), "not allowed"),
    "name as object": (_array("name", {"a": 1}), "name must be a string"),
    "name as list": (_array("name", ["centers"]), "name must be a string"),
    "array entry with extra key": (_array("order", "F"), "entries must be objects"),
    "array entry not an object": (_top("arrays", [["centers", "<f8", [3, 4]]]), "entries must be objects"),
    "arrays not a list": (_top("arrays", {"centers": {}}), "'arrays' must be a list"),
    "duplicate array name": (lambda h: h["arrays"].append(dict(h["arrays"][0], shape=[0, 4])), "twice"),
    "method as list": (_top("method", ["kfed"]), "'method' must be a string"),
    "kind as object": (_top("kind", {}), "'kind' must be a string"),
    "scalars as list": (_top("scalars", [["n_features", 4]]), "'scalars' must be an object"),
    "version as float": (_top("v", 2.0), "version 2.0"),
    "version as bool": (_top("v", True), "version True"),
    "version as string": (_top("v", "2"), "version '2'"),
    "unknown header key": (_top("signed", True), "header keys"),
    "missing header key": (lambda h: h.pop("round"), "header keys"),
    "client as string": (_top("client", "1"), "client: expected int"),
    "client negative": (_top("client", -1), "client must be None"),
    "round as bool": (_top("round", True), "round: expected int"),
    "round null": (_top("round", None), "round: expected int"),
}


@pytest.mark.parametrize("reader", ["peek_header", "decode_message", "from_bytes"])
@pytest.mark.parametrize("case", list(STRUCTURAL))
def test_malformed_header_rejected_by_every_reader(case, reader):
    """Each malformed header raises MessageError naming the problem, from every reader, despite a valid digest."""
    edit, match = STRUCTURAL[case]
    data = rewrite_header(_summary().to_bytes(), edit)
    read = {"peek_header": peek_header, "decode_message": decode_message, "from_bytes": KFedSummary.from_bytes}[reader]
    with pytest.raises(MessageError, match=match):
        read(data)


@pytest.mark.parametrize(
    "raw, match",
    [
        (b'{"v":2,"v":2}', "repeats the key 'v'"),
        (b'{"v":NaN}', "NaN"),
        (b'{"v":Infinity}', "Infinity"),
        (b'{"v":2', "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[" * 30000 + b"]" * 30000, "nested more than"),
        (b'{"v":' + b"[" * 9 + b"]" * 9 + b"}", "nested more than"),
        (b'"just a string"', "not a JSON object"),
    ],
    ids=["duplicate key", "NaN", "Infinity", "unterminated", "not UTF-8", "30000 deep", "9 deep", "not an object"],
)
def test_malformed_header_json_rejected(raw, match):
    """Invalid, ambiguous (duplicate keys), non-standard (NaN) or deeply nested header JSON raises MessageError."""
    data = with_header(_summary().to_bytes(), raw)
    for read in (peek_header, decode_message):
        with pytest.raises(MessageError, match=match):
            read(data)


def test_header_longer_than_the_cap_rejected():
    """A header over 64 KiB is rejected before it is parsed (deep nesting included)."""
    data = with_header(_summary().to_bytes(), b"[" * 200_000 + b"]" * 200_000)
    with pytest.raises(MessageError, match="header length"):
        peek_header(data)


@pytest.mark.parametrize(
    "text",
    ['{"a":"[[[[[[[[[[["}', '{"a":"\\\\"}', '{"a":"\\"[[[[[[[[[[[[\\\\"}', '[[{"b":[1,{"c":"}}}}]]]"}]}]]', "[]", "1", ""],
)
def test_json_depth_ignores_brackets_inside_strings(text):
    """The nesting pre-scan counts only structural brackets, so string contents cannot fake or hide depth."""
    def depth(x):
        if isinstance(x, dict):
            return 1 + max(map(depth, x.values()), default=0)
        if isinstance(x, list):
            return 1 + max(map(depth, x), default=0)
        return 0

    expected = depth(json.loads(text)) if text else 0
    assert _json_depth(text.encode()) == expected


def test_claimed_size_allocates_nothing():
    """A header claiming a huge array over a tiny payload is rejected without allocating for the claim."""
    data = rewrite_header(_summary().to_bytes(), _array("shape", [2**40, 4]))
    tracemalloc.start()
    try:
        with pytest.raises(MessageError, match="truncated"):
            decode_message(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_non_contiguous_memoryview_read_like_bytes():
    """A strided (non-contiguous) memoryview over valid bytes decodes to the same message as the bytes."""
    data = _summary().to_bytes()
    strided = memoryview(np.frombuffer(data, dtype=np.uint8).repeat(2)[::2])
    assert not strided.c_contiguous
    back = decode_message(strided)
    np.testing.assert_array_equal(back.centers, _summary().centers)
    assert peek_header(strided) == peek_header(data)
    assert decode_message(memoryview(np.frombuffer(data, dtype=np.uint8).reshape(-1, 1))).n_features == 4


def test_released_memoryview_rejected():
    view = memoryview(_summary().to_bytes())
    view.release()
    with pytest.raises(MessageError, match="cannot read"):
        decode_message(view)


# -- scalar field types --------------------------------------------------------------------------
def _kstar_model(**change):
    return dataclasses.replace(example(FedKStarHCModel), **change)


@pytest.mark.parametrize(
    "field, value",
    [
        ("n_features", 4.0), ("n_features", True), ("n_features", "4"), ("n_features", None), ("n_features", 2**63),
        ("threshold_t", True), ("threshold_t", "1.0"), ("threshold_t", None), ("threshold_t", float("inf")),
        ("threshold_t", 10**400), ("estimated", 1), ("estimated", 0.0), ("estimated", "true"), ("estimated", None),
    ],
)
def test_scalar_of_wrong_type_rejected_on_build_and_read(field, value):
    """int fields take only ints within int64, float fields finite floats or ints, bool fields only True/False."""
    with pytest.raises(MessageError, match=field):
        _kstar_model(**{field: value})
    data = rewrite_header(example(FedKStarHCModel).to_bytes(), lambda h: h["scalars"].update({field: value}))
    if value == float("inf"):  # JSON has no inf, but a parser reads 1e400 as one
        data = with_header(data, split_header(data)[0].replace(b"Infinity", b"1e400"))
    with pytest.raises(MessageError, match=field):
        decode_message(data)


def test_scalar_conversions_that_are_allowed():
    """numpy scalars become Python ones and an int for a float field becomes a float, in-process and on the wire."""
    msg = _kstar_model(n_features=np.int64(2), threshold_t=3, d_s=np.float32(0.5), estimated=np.bool_(True))
    assert (type(msg.n_features), type(msg.threshold_t), type(msg.d_s), type(msg.estimated)) == (int, float, float, bool)
    assert msg.threshold_t == 3.0
    data = rewrite_header(msg.to_bytes(), lambda h: h["scalars"].update(threshold_t=-1))
    back = decode_message(data)
    assert type(back.threshold_t) is float and back.threshold_t == -1.0


@dataclass(frozen=True, eq=False)
class _Probe(Message):
    """A test-only message (empty METHOD/KIND: not registered) with an optional scalar and a bool array."""

    ARRAYS = {"mask": ArraySpec("b", 1)}
    mask: np.ndarray
    limit: int | None
    note: str = ""


def test_optional_and_str_scalars():
    """`int | None` takes None or an int; str fields take only strings; both round-trip."""
    assert _Probe(mask=np.ones(2, bool), limit=None).limit is None
    back = _Probe.from_bytes(_Probe(mask=np.ones(2, bool), limit=3, note="x").to_bytes())
    assert (back.limit, back.note) == (3, "x")
    with pytest.raises(MessageError, match="expected int or None"):
        _Probe(mask=np.ones(2, bool), limit=3.5)
    with pytest.raises(MessageError, match="expected str"):
        _Probe(mask=np.ones(2, bool), limit=1, note=b"x")


def test_unsupported_scalar_annotation_is_a_programming_error():
    @dataclass(frozen=True, eq=False)
    class Bad(Message):
        values: list

    with pytest.raises(TypeError, match="not an ArraySpec field or a scalar type"):
        Bad(values=[1])


def test_header_too_long_to_read_is_not_written():
    """A message whose header would exceed the reader's cap cannot be serialised."""
    with pytest.raises(MessageError, match="exceeds"):
        _Probe(mask=np.ones(1, bool), limit=1, note="x" * 70_000).to_bytes()


# -- array dtypes on the wire --------------------------------------------------------------------
def _retype(msg: Message, dtype: str, raw: bytes | None = None) -> bytes:
    """``msg`` bytes with its last array re-declared as ``dtype`` (same shape) over ``raw`` (default: ones)."""
    data = msg.to_bytes()
    header, payload = json.loads(split_header(data)[0]), split_header(data)[1]
    entry = header["arrays"][-1]
    old = getattr(msg, entry["name"])
    entry["dtype"] = dtype
    if raw is None:
        raw = np.ones(old.shape, dtype=dtype).tobytes()
    return with_header(data, json.dumps(header).encode(), payload=payload[:len(payload) - old.nbytes] + raw)


@pytest.mark.parametrize("dtype", ["|b1", "<i8", "<i4"])
def test_float_field_arrives_only_as_float(dtype):
    """A float field (centers) sent as bool or int bytes is rejected, however plausible the values."""
    with pytest.raises(MessageError, match="wire dtype"):
        KFedSummary.from_bytes(_retype(_summary(), dtype))


@pytest.mark.parametrize("dtype", ["<f8", "|b1"])
def test_int_field_arrives_only_as_int(dtype):
    reply = KFedReply(centers=np.zeros((2, 3)), local_to_global=np.array([1, 0]), n_features=3)
    with pytest.raises(MessageError, match="wire dtype"):
        KFedReply.from_bytes(_retype(reply, dtype))


def test_bool_field_arrives_only_as_b1_bytes_0_or_1():
    probe = _Probe(mask=np.array([True, False]), limit=1)
    assert _Probe.from_bytes(_retype(probe, "|b1", b"\x00\x01")).mask.tolist() == [False, True]
    with pytest.raises(MessageError, match="0 or 1"):
        _Probe.from_bytes(_retype(probe, "|b1", b"\x01\x02"))
    for dtype in ("<i4", "<f8"):
        with pytest.raises(MessageError, match="wire dtype"):
            _Probe.from_bytes(_retype(probe, dtype))


def test_in_process_construction_lenient_only_where_unambiguous():
    """In-process, int arrays become float64 for a float field (np.arange etc.); bool arrays are refused."""
    msg = KFedSummary(centers=np.arange(6, dtype=np.uint8).reshape(3, 2), n_features=2)
    assert msg.centers.dtype == np.float64
    with pytest.raises(MessageError, match="float32/float64"):
        KFedSummary(centers=np.ones((3, 2), dtype=bool), n_features=2)
    with pytest.raises(MessageError, match="integer array"):
        KFedReply(centers=np.zeros((2, 3)), local_to_global=np.array([True, False]), n_features=3)


def test_values_checked_on_the_wire_as_on_build():
    """min_value and finiteness hold for arrays read from bytes (a negative radius, an inf centre)."""
    summary = example(FeCASummary)
    radii = -np.ones(summary.radii.shape)
    with pytest.raises(MessageError, match=">= 0.0"):
        decode_message(_retype(summary, "<f8", radii.tobytes()))
    inf = np.full(summary.radii.shape, np.inf, dtype="<f4")
    with pytest.raises(MessageError, match="NaN or inf"):
        decode_message(_retype(summary, "<f4", inf.tobytes()))


def test_wrong_array_ndim_on_the_wire_rejected():
    data = rewrite_header(_summary().to_bytes(), _array("shape", [12]))
    with pytest.raises(MessageError, match="expected 2-D"):
        decode_message(data)


# -- addressing ----------------------------------------------------------------------------------
@pytest.mark.parametrize("client, round", [(-1, 0), (True, 0), (1.0, 0), ("1", 0), (None, -1), (0, False), (0, None), (0, 2**63)])
def test_bad_address_rejected(client, round):
    with pytest.raises(MessageError, match="client|round"):
        _summary().addressed(client=client, round=round)


def test_address_accepts_numpy_integers():
    msg = _summary().addressed(client=np.int64(3), round=np.int32(2))
    assert (type(msg.client), type(msg.round), msg.client, msg.round) == (int, int, 3, 2)


@pytest.mark.parametrize("field", ["n_features", "threshold_t", "estimated"])
def test_int_too_long_to_print_rejected_with_message_error(field):
    """Even an int whose repr Python refuses (over 4300 digits) ends in MessageError, not ValueError from the message."""
    with pytest.raises(MessageError, match=field):
        _kstar_model(**{field: 10**5000})


# -- wire size ------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", list(FACTORIES), ids=lambda c: c.__name__)
def test_wire_size_is_the_length_of_the_encoding(cls):
    """``wire_size`` (the runners' byte accounting) is computed from the arrays' dtypes and shapes without
    converting or serialising them; it must be the exact length of ``to_bytes`` for every message
    class, with empty and larger arrays and with large client numbers and rounds in the header."""
    for seed, (k, d, m) in enumerate([(1, 1, 0), (3, 2, 4), (7, 13, 0), (20, 5, 31)]):
        msg = FACTORIES[cls](np.random.default_rng(seed), k, d, m).addressed(client=seed * 12345, round=seed * 7)
        assert msg.wire_size == len(msg.to_bytes())
