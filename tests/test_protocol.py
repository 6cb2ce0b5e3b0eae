"""The wire format: round trips, and every kind of malformed message is rejected with a clear error."""
import dataclasses
import hashlib
import json
import struct

import numpy as np
import pytest

from fastfc.kfed import KFedModel, KFedReply, KFedSummary
from fastfc.protocol import FORMAT_VERSION, MessageError, decode_message, peek_header


def _summary(dtype=np.float64):
    rng = np.random.default_rng(0)
    return KFedSummary(centers=rng.normal(size=(3, 4)).astype(dtype), n_features=4)


def _reseal(body: bytes) -> bytes:
    """Recompute the digest, as someone rewriting a message could."""
    return body + hashlib.sha256(body).digest()


def _rewrite_header(data: bytes, edit) -> bytes:
    (hlen,) = struct.unpack_from("<I", data, 4)
    header = json.loads(data[8:8 + hlen])
    edit(header)
    new = json.dumps(header).encode()
    body = data[:4] + struct.pack("<I", len(new)) + new + data[8 + hlen:-32]
    return _reseal(body)


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
    data = _rewrite_header(_summary().to_bytes(), lambda h: h.update(v=99))
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
        KFedSummary.from_bytes(_rewrite_header(_summary().to_bytes(), edit))


def test_shape_not_matching_payload_rejected():
    def edit(h):
        h["arrays"][0]["shape"] = [5, 4]

    with pytest.raises(MessageError, match="truncated"):
        KFedSummary.from_bytes(_rewrite_header(_summary().to_bytes(), edit))

    def edit_small(h):
        h["arrays"][0]["shape"] = [1, 4]

    with pytest.raises(MessageError, match="trailing"):
        KFedSummary.from_bytes(_rewrite_header(_summary().to_bytes(), edit_small))


def test_inconsistent_scalar_rejected():
    with pytest.raises(MessageError, match="n_features=5"):
        KFedSummary.from_bytes(_rewrite_header(_summary().to_bytes(), lambda h: h["scalars"].update(n_features=5)))


def test_unknown_and_missing_fields_rejected():
    with pytest.raises(MessageError, match="scalar fields"):
        KFedSummary.from_bytes(_rewrite_header(_summary().to_bytes(), lambda h: h["scalars"].update(extra=1)))
    with pytest.raises(MessageError, match="scalar fields"):
        KFedSummary.from_bytes(_rewrite_header(_summary().to_bytes(), lambda h: h["scalars"].pop("n_features")))


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
        KFedSummary.from_bytes(_reseal(bytes(body)))


def test_out_of_range_index_rejected():
    with pytest.raises(MessageError, match="does not exist"):
        KFedReply(centers=np.zeros((2, 3)), local_to_global=np.array([0, 2]), n_features=3)
    with pytest.raises(MessageError, match=">= 0"):
        KFedReply(centers=np.zeros((2, 3)), local_to_global=np.array([0, -1]), n_features=3)


def test_not_bytes_and_bad_magic():
    with pytest.raises(MessageError, match="expected bytes"):
        KFedSummary.from_bytes("hello")
    with pytest.raises(MessageError, match="magic"):
        KFedSummary.from_bytes(_reseal(b"XXXX" + b"\0" * 40))


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
