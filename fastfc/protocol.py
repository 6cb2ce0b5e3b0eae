"""Messages between clients and the server: plain arrays plus a small typed header.

Every method defines its messages as frozen dataclasses deriving from
:class:`Message`. A message is validated when it is built (in-process) and
when it is read from bytes (across machines), so the server never sees a
malformed summary and a client never labels its rows from a malformed model.

Wire format (version 2), all integers little-endian::

    b"FFCM" | u32 header length | header (UTF-8 JSON) | array payload | SHA-256 of all before

The header names the format version, the method, the message kind, the
addressing fields ``client`` (the client a summary comes from or a reply is
for; ``null`` for a message meant for everyone) and ``round`` (the protocol
round, 0 for one-shot methods), the scalar fields and, for each array, its
name, dtype and shape. The payload is
the arrays' raw C-order bytes in header order. Nothing is ever unpickled:
only the dtypes in :data:`WIRE_DTYPES` are accepted. The digest detects
truncation and accidental or in-transit corruption; it is not a signature
(anyone who can rewrite the message can recompute it).
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

__all__ = [
    "ArraySpec",
    "Message",
    "MessageError",
    "CentersSummary",
    "FORMAT_VERSION",
    "WIRE_DTYPES",
    "decode_message",
    "peek_header",
]

FORMAT_VERSION = 2
MAGIC = b"FFCM"
_DIGEST = 32
_MAX_HEADER = 1 << 20
#: dtypes that may cross the wire (no object, no structured, no big-endian)
WIRE_DTYPES = {"<f4": np.float32, "<f8": np.float64, "<i4": np.int32, "<i8": np.int64, "|u1": np.uint8, "|b1": np.bool_}
_SCALAR_TYPES = (bool, int, float, str)


class MessageError(ValueError):
    """A message is malformed, truncated, tampered with or inconsistent."""


@dataclass(frozen=True)
class ArraySpec:
    """What one array field of a message must look like.

    Parameters
    ----------
    kind : {"f", "i", "b"}
        ``"f"``: float32 or float64; ``"i"``: int32 or int64; ``"b"``: bool.
    ndim : int
        Required number of dimensions.
    finite : bool, default=True
        Float arrays must hold no NaN or inf.
    min_value : float or None
        Smallest allowed value (checked when the array is not empty).
    """

    kind: str
    ndim: int
    finite: bool = True
    min_value: float | None = None

    def check(self, cls_name: str, name: str, value: Any) -> np.ndarray:
        if not isinstance(value, np.ndarray):
            try:
                value = np.asarray(value)
            except Exception as exc:  # pragma: no cover - defensive
                raise MessageError(f"{cls_name}.{name}: cannot be read as an array ({exc})") from None
        if value.dtype == object:
            raise MessageError(f"{cls_name}.{name}: object arrays are not allowed")
        if self.kind == "f":
            if value.dtype not in (np.float32, np.float64):
                if value.dtype.kind in "iub" or value.size == 0:
                    value = value.astype(np.float64)
                else:
                    raise MessageError(f"{cls_name}.{name}: expected float32/float64, got {value.dtype}")
        elif self.kind == "i":
            if value.dtype.kind == "b" or value.dtype.kind not in "iu":
                if value.size == 0:
                    value = value.astype(np.int64)
                else:
                    raise MessageError(f"{cls_name}.{name}: expected an integer array, got {value.dtype}")
            if value.dtype not in (np.int32, np.int64):
                if value.dtype.kind == "u" and value.size and value.max() > np.iinfo(np.int64).max:
                    raise MessageError(f"{cls_name}.{name}: integer values overflow int64")
                value = value.astype(np.int64)
        elif self.kind == "b":
            if value.dtype != np.bool_:
                raise MessageError(f"{cls_name}.{name}: expected a bool array, got {value.dtype}")
        else:  # pragma: no cover - programming error
            raise AssertionError(self.kind)
        if value.ndim != self.ndim:
            raise MessageError(f"{cls_name}.{name}: expected {self.ndim}-D array, got shape {value.shape}")
        if self.kind == "f" and self.finite and value.size and not np.isfinite(value).all():
            raise MessageError(f"{cls_name}.{name}: contains NaN or inf")
        if self.min_value is not None and value.size and value.min() < self.min_value:
            raise MessageError(f"{cls_name}.{name}: values must be >= {self.min_value}, found {value.min()}")
        out = np.array(value, order="C", copy=True)
        out.setflags(write=False)
        return out


class Message:
    """Base class of every protocol message.

    Subclasses are frozen dataclasses that set

    - ``METHOD`` (e.g. ``"kfed"``) and ``KIND`` (``"summary"``, ``"model"`` or
      ``"reply"``);
    - ``ARRAYS``: ``{field name: ArraySpec}`` for their array fields; every other
      field is a scalar (bool, int, float or str);
    - optionally ``_check_consistency(self)`` for cross-field rules (shapes that
      must agree, indices in range), raising :class:`MessageError`.

    Arrays are copied, made C-contiguous and read-only on construction, so a
    message never aliases a caller's buffer.

    Besides its fields every message carries two addressing attributes that
    travel in the header: ``client`` (int or None: the client a summary comes
    from or a reply is meant for) and ``round`` (int >= 0, the protocol round).
    They are set with :meth:`addressed`, which returns a copy.
    """

    client: int | None = None  # set per instance by addressed(); class default: unaddressed
    round: int = 0

    METHOD: ClassVar[str] = ""
    KIND: ClassVar[str] = ""
    ARRAYS: ClassVar[dict[str, ArraySpec]] = {}
    _registry: ClassVar[dict[tuple[str, str], type[Message]]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.METHOD and cls.KIND:
            key = (cls.METHOD, cls.KIND)
            prev = Message._registry.get(key)
            if prev is not None and prev.__qualname__ != cls.__qualname__:
                raise TypeError(f"message type {key} registered twice ({prev.__qualname__}, {cls.__qualname__})")
            Message._registry[key] = cls

    # -- construction-time validation ------------------------------------
    def __post_init__(self) -> None:
        name = type(self).__name__
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in self.ARRAYS:
                object.__setattr__(self, f.name, self.ARRAYS[f.name].check(name, f.name, value))
            else:
                if isinstance(value, np.generic):
                    value = value.item()
                    object.__setattr__(self, f.name, value)
                if not isinstance(value, _SCALAR_TYPES):
                    raise MessageError(f"{name}.{f.name}: expected a scalar (bool/int/float/str), got {type(value).__name__}")
                if isinstance(value, float) and not np.isfinite(value):
                    raise MessageError(f"{name}.{f.name}: must be finite, got {value}")
        self._check_consistency()

    def _check_consistency(self) -> None:
        """Cross-field checks; subclasses override."""

    def addressed(self, *, client: int | None = None, round: int = 0):
        """A copy of this message stamped with the client it concerns and the protocol round.

        Parameters
        ----------
        client : int or None, default=None
            Index of the client the message comes from (a summary) or is meant
            for (a reply); ``None`` for a message addressed to everyone.
        round : int, default=0
            Protocol round (0 for the one-shot methods).
        """
        client = _check_address(type(self).__name__, client, round)
        out = copy.copy(self)
        object.__setattr__(out, "client", client)
        object.__setattr__(out, "round", int(round))
        return out

    # -- helpers for subclasses -------------------------------------------
    def _fail(self, msg: str) -> None:
        raise MessageError(f"{type(self).__name__}: {msg}")

    def _check_shape(self, name: str, expected: tuple, shown: str | None = None) -> None:
        """Fail unless array ``name`` has exactly ``expected`` shape (``shown`` describes it)."""
        got = getattr(self, name).shape
        if got != expected:
            self._fail(f"{name} shape {got} does not match {shown or expected}")

    def _check_centers(self) -> int:
        """``centers`` has at least one row and ``n_features`` columns; returns its row count."""
        k, d = self.centers.shape
        if k < 1 or d != self.n_features:
            self._fail(f"centers shape {(k, d)} does not match (k >= 1, n_features={self.n_features})")
        return k

    @property
    def nbytes(self) -> int:
        """Size of the array payload in bytes (what the message costs on the wire, header aside)."""
        return sum(getattr(self, k).nbytes for k in self.ARRAYS)

    # -- serialisation ------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Serialise to the fastfc wire format (see module docstring)."""
        arrays, scalars = [], {}
        chunks = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in self.ARRAYS:
                value = np.ascontiguousarray(value)
                dt = value.dtype.newbyteorder("<") if value.dtype.byteorder == ">" else value.dtype
                value = value.astype(dt, copy=False)
                arrays.append({"name": f.name, "dtype": dt.str, "shape": list(value.shape)})
                chunks.append(value.tobytes(order="C"))
            else:
                scalars[f.name] = value
        header = json.dumps(
            {"v": FORMAT_VERSION, "method": self.METHOD, "kind": self.KIND, "client": self.client,
             "round": self.round, "scalars": scalars, "arrays": arrays},
            separators=(",", ":"), allow_nan=False,
        ).encode("utf-8")
        body = b"".join([MAGIC, struct.pack("<I", len(header)), header, *chunks])
        return body + hashlib.sha256(body).digest()

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview):
        """Read and validate a message of this class from bytes.

        Raises
        ------
        MessageError
            Truncated or corrupted data, wrong format version, another method's
            or kind's message, unknown or missing fields, disallowed dtypes,
            shapes that do not match the payload, NaN/inf, or inconsistent fields.
        """
        header, payload = _split(data)
        if (header["method"], header["kind"]) != (cls.METHOD, cls.KIND):
            raise MessageError(
                f"expected a {cls.METHOD!r} {cls.KIND!r} message, got {header['method']!r} {header['kind']!r}"
            )
        return cls._from_parts(header, payload)

    @classmethod
    def _from_parts(cls, header: dict, payload: memoryview):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        array_names = [a.get("name") for a in header["arrays"]]
        expected_arrays = set(cls.ARRAYS)
        if set(array_names) != expected_arrays or len(array_names) != len(expected_arrays):
            raise MessageError(
                f"{cls.__name__}: array fields {sorted(map(str, array_names))} do not match the expected {sorted(expected_arrays)}"
            )
        scalars = header["scalars"]
        if not isinstance(scalars, dict):
            raise MessageError(f"{cls.__name__}: header 'scalars' must be an object")
        expected_scalars = set(fields) - expected_arrays
        if set(scalars) != expected_scalars:
            raise MessageError(
                f"{cls.__name__}: scalar fields {sorted(scalars)} do not match the expected {sorted(expected_scalars)}"
            )
        kwargs: dict[str, Any] = dict(scalars)
        offset = 0
        for a in header["arrays"]:
            dt_str, shape = a.get("dtype"), a.get("shape")
            if dt_str not in WIRE_DTYPES:
                raise MessageError(f"{cls.__name__}.{a['name']}: dtype {dt_str!r} is not allowed on the wire")
            if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
                raise MessageError(f"{cls.__name__}.{a['name']}: malformed shape {shape!r}")
            dtype = np.dtype(WIRE_DTYPES[dt_str])
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if offset + nbytes > len(payload):
                raise MessageError(f"{cls.__name__}.{a['name']}: payload is truncated")
            kwargs[a["name"]] = np.frombuffer(payload, dtype=dtype, count=nbytes // dtype.itemsize, offset=offset).reshape(shape)
            offset += nbytes
        if offset != len(payload):
            raise MessageError(f"{cls.__name__}: {len(payload) - offset} unexpected trailing payload bytes")
        try:
            msg = cls(**kwargs)
        except TypeError as exc:
            raise MessageError(f"{cls.__name__}: {exc}") from None
        return msg.addressed(client=header["client"], round=header["round"])


def _check_address(cls_name: str, client, round) -> int | None:
    """Validate the addressing fields (``client``: None or int >= 0, ``round``: int >= 0)."""
    for name, value, optional in (("client", client, True), ("round", round, False)):
        if value is None and optional:
            continue
        if isinstance(value, np.integer):
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise MessageError(f"{cls_name}: {name} must be {'None or ' if optional else ''}an integer >= 0, got {value!r}")
    return None if client is None else int(client)


def _split(data) -> tuple[dict, memoryview]:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MessageError(f"expected bytes, got {type(data).__name__}")
    buf = memoryview(data).cast("B")
    if len(buf) < len(MAGIC) + 4 + _DIGEST:
        raise MessageError(f"message is truncated ({len(buf)} bytes)")
    if bytes(buf[:4]) != MAGIC:
        raise MessageError("not a fastfc message (bad magic bytes)")
    body, digest = buf[:-_DIGEST], bytes(buf[-_DIGEST:])
    if hashlib.sha256(body).digest() != digest:
        raise MessageError("message digest mismatch: the message was truncated or altered")
    (hlen,) = struct.unpack_from("<I", body, 4)
    if hlen > _MAX_HEADER or 8 + hlen > len(body):
        raise MessageError("message header length is out of range")
    try:
        header = json.loads(bytes(body[8:8 + hlen]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MessageError(f"message header is not valid JSON ({exc})") from None
    if not isinstance(header, dict) or not {"v", "method", "kind", "client", "round", "scalars", "arrays"} <= set(header):
        raise MessageError("message header lacks required keys (v, method, kind, client, round, scalars, arrays)")
    if header["v"] != FORMAT_VERSION:
        raise MessageError(f"unsupported message format version {header['v']!r} (this fastfc reads {FORMAT_VERSION})")
    if not isinstance(header["arrays"], list) or not all(isinstance(a, dict) and "name" in a for a in header["arrays"]):
        raise MessageError("message header 'arrays' is malformed")
    return header, body[8 + hlen:]


def peek_header(data) -> dict:
    """Return the validated header of a message (method, kind, fields) without building it."""
    return _split(data)[0]


def decode_message(data, *, method: str | None = None, kind: str | None = None) -> Message:
    """Read any registered message from bytes, optionally requiring its method and kind."""
    header, payload = _split(data)
    key = (header["method"], header["kind"])
    if method is not None and key[0] != method:
        raise MessageError(f"expected a {method!r} message, got {key[0]!r}")
    if kind is not None and key[1] != kind:
        raise MessageError(f"expected a {kind!r} message, got {key[1]!r}")
    cls = Message._registry.get(key)
    if cls is None:
        raise MessageError(f"unknown message type method={key[0]!r} kind={key[1]!r}")
    return cls._from_parts(header, payload)


@dataclass(frozen=True, eq=False)
class CentersSummary(Message):
    """Base of the uploads that are just a block of prototypes (k-FED, Fed-HIRE, GOLD, ...).

    Subclasses set ``METHOD`` and ``KIND``; this class is not registered itself.

    Attributes
    ----------
    centers : ndarray of shape (n_prototypes, n_features)
        At least one prototype.
    n_features : int
    """

    ARRAYS = {"centers": ArraySpec("f", 2)}
    centers: np.ndarray
    n_features: int

    def _check_consistency(self) -> None:
        if self.centers.shape[0] < 1:
            self._fail("a client must upload at least one prototype")
        self._check_centers()


@dataclass(frozen=True, eq=False)
class LocalToGlobalReply(Message):
    """Base of the replies that map each of a client's local prototypes to a global cluster.

    Subclasses set ``METHOD`` and ``KIND``; this class is not registered itself.

    Attributes
    ----------
    centers : ndarray of shape (n_clusters, n_features)
        Global cluster centres.
    local_to_global : ndarray of shape (n_local,), dtype=int64
        Global cluster of each of the client's local prototypes.
    n_features : int
    """

    ARRAYS = {"centers": ArraySpec("f", 2), "local_to_global": ArraySpec("i", 1, min_value=0)}
    centers: np.ndarray
    local_to_global: np.ndarray
    n_features: int

    def _check_consistency(self) -> None:
        self._check_centers()
        if self.local_to_global.size and self.local_to_global.max() >= self.centers.shape[0]:
            self._fail("local_to_global refers to a global cluster that does not exist")
