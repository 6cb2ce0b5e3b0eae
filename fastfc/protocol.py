"""Messages between clients and the server: plain arrays plus a small typed header.

Every method defines its messages as frozen dataclasses deriving from
:class:`Message`. A message is validated when it is built (in-process) and
when it is read from bytes (across machines), so the server never sees a
malformed summary and a client never labels its rows from a malformed model.

Wire format (version 2), all integers little-endian::

    b"FFCM" | u32 header length | header (UTF-8 JSON) | array payload | SHA-256 of all before

The header is a JSON object with exactly the keys ``v`` (the format version),
``method``, ``kind``, ``client`` (the client a summary comes from or a reply
is for; ``null`` for a message meant for everyone), ``round`` (the protocol
round, 0 for one-shot methods), ``scalars`` (``{field: value}``) and
``arrays`` (a list of ``{"name", "dtype", "shape"}``, in payload order). The
payload is the arrays' raw C-order bytes in header order. Nothing is ever
unpickled. The digest detects truncation and accidental or in-transit
corruption; it is not a signature (anyone who can rewrite the message can
recompute it), so everything below is checked whatever the digest says.

What reading checks (:func:`peek_header`, :func:`decode_message` and every
``Cls.from_bytes`` share one reader; every failure is a :class:`MessageError`,
and nothing is allocated in proportion to a size the message claims):

- framing: magic bytes, digest, a header length within the data and at most
  64 KiB, UTF-8 JSON nested at most ``_MAX_DEPTH`` deep (checked before
  parsing), no ``NaN``/``Infinity`` literals, no duplicate object keys;
- header: exactly the keys above; ``v`` the integer :data:`FORMAT_VERSION`;
  ``method``, ``kind`` and every array ``name``/``dtype`` strings; ``client``
  null or an integer >= 0 and ``round`` an integer >= 0; ``scalars`` an
  object; ``arrays`` a list of objects with exactly the keys ``name``,
  ``dtype``, ``shape`` and distinct names; ``dtype`` one of
  :data:`WIRE_DTYPES`; ``shape`` a list of at most ``_MAX_NDIM`` integers >= 0
  describing an array numpy can hold; the shapes account for every payload
  byte (sizes computed with Python integers, before any array is made);
- message class (found in the registry, importing the method's own module
  from the fixed table ``_METHOD_MODULES`` on first use, so a process that
  imported only this module decodes every method; a module name is never
  taken from the header): the array and scalar field names; each array's
  ndim and its wire dtype matching its :class:`ArraySpec` kind exactly
  (``"f"``: ``<f4``/``<f8``, ``"i"``: ``<i4``/``<i8``, ``"b"``: ``|b1`` with
  bytes 0 or 1 only); then everything construction checks: scalar types
  against the field annotations (see :func:`_check_scalar`), finiteness,
  ``min_value`` and the class's cross-field rules.

A memoryview that is not C-contiguous is read from a C-order copy of its
bytes, like any other buffer.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import importlib
import json
import math
import struct
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from ._limits import MAX_ABS_MEAN

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
_PREFIX = len(MAGIC) + 4
#: largest header accepted (a valid one is a few hundred bytes)
_MAX_HEADER = 1 << 16
#: deepest JSON nesting a header may have (a valid one needs 4: header, arrays, entry, shape)
_MAX_DEPTH = 8
#: most dimensions an array may claim (numpy 1.x holds at most 32)
_MAX_NDIM = 32
_INT64_MAX = (1 << 63) - 1
#: the wire dtypes each :class:`ArraySpec` kind accepts (little-endian; no object, structured or unsigned)
_KIND_DTYPES = {"f": ("<f4", "<f8"), "i": ("<i4", "<i8"), "b": ("|b1",)}
#: dtypes that may cross the wire
WIRE_DTYPES = {s: np.dtype(s) for strs in _KIND_DTYPES.values() for s in strs}
#: the module defining each method's messages, imported when a message of that method is first read;
#: a fixed table, so a header can never make the reader import a module of its choosing
_METHOD_MODULES = {
    "kfed": "fastfc.kfed",
    "fedhire": "fastfc.fed_hire",
    "feca": "fastfc.feca",
    "fedkstarhc": "fastfc.fed_kstar_hc",
    "refine": "fastfc._refine",
    "fedcref": "fastfc.fedcref",
}
_HEADER_KEYS = frozenset({"v", "method", "kind", "client", "round", "scalars", "arrays"})
_ARRAY_KEYS = frozenset({"name", "dtype", "shape"})
#: scalar field annotations a message may use (``X | None`` also allowed)
_SCALAR_TYPES = {"bool": bool, "int": int, "float": float, "str": str}


class MessageError(ValueError):
    """A message is malformed, truncated, tampered with or inconsistent."""


class _ArrayRef(NamedTuple):
    """Where one array of a read message lies in its payload (from its validated header entry)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


class _Frame(NamedTuple):
    """A message whose framing and header have been validated, not yet matched to its class."""

    header: dict
    arrays: tuple[_ArrayRef, ...]
    payload: memoryview


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
    max_abs : float or None
        Largest allowed magnitude (checked when the array is not empty): the
        bound of :mod:`fastfc._limits` that no client's valid data can exceed
        (means, spreads, counts), so an upload beyond it is refused by name
        before the server's arithmetic overflows.

    Notes
    -----
    Construction (:meth:`check`) is lenient where the meaning is unambiguous:
    integer arrays are converted to float64 for a ``"f"`` field and other
    integer dtypes to int64 for an ``"i"`` field; bool arrays are accepted only
    for ``"b"`` fields. Reading (:meth:`read`) is strict: the wire dtype must be
    one of the kind's own dtypes (:data:`_KIND_DTYPES`).
    """

    kind: str
    ndim: int
    finite: bool = True
    min_value: float | None = None
    max_abs: float | None = None

    def check(self, cls_name: str, name: str, value: Any) -> np.ndarray:
        """Validate ``value`` for this field; return a read-only C-contiguous copy.

        Raises
        ------
        MessageError
            Wrong dtype kind or ndim, NaN/inf (when ``finite``), a value below ``min_value`` or of
            magnitude above ``max_abs``.
        """
        where = f"{cls_name}.{name}"
        if not isinstance(value, np.ndarray):
            try:
                value = np.asarray(value)
            except Exception as exc:  # pragma: no cover - defensive
                raise MessageError(f"{where}: cannot be read as an array ({exc})") from None
        if value.dtype == object:
            raise MessageError(f"{where}: object arrays are not allowed")
        if self.kind == "f":
            if value.dtype not in (np.float32, np.float64):
                if value.dtype.kind in "iu" or value.size == 0:
                    value = value.astype(np.float64)
                else:
                    raise MessageError(f"{where}: expected float32/float64, got {value.dtype}")
        elif self.kind == "i":
            if value.dtype.kind not in "iu":
                if value.size == 0:
                    value = value.astype(np.int64)
                else:
                    raise MessageError(f"{where}: expected an integer array, got {value.dtype}")
            if value.dtype not in (np.int32, np.int64):
                if value.dtype.kind == "u" and value.size and value.max() > _INT64_MAX:
                    raise MessageError(f"{where}: integer values overflow int64")
                value = value.astype(np.int64)
        elif self.kind == "b":
            if value.dtype != np.bool_:
                raise MessageError(f"{where}: expected a bool array, got {value.dtype}")
        else:  # pragma: no cover - programming error
            raise AssertionError(self.kind)
        if value.ndim != self.ndim:
            raise MessageError(f"{where}: expected {self.ndim}-D array, got shape {value.shape}")
        if self.kind == "f" and self.finite and value.size and not np.isfinite(value).all():
            raise MessageError(f"{where}: contains NaN or inf")
        if self.min_value is not None and value.size and value.min() < self.min_value:
            raise MessageError(f"{where}: values must be >= {self.min_value}, found {value.min()}")
        if self.max_abs is not None and value.size:
            peak = max(float(value.max()), -float(value.min()))
            if peak > self.max_abs:
                raise MessageError(f"{where}: values of magnitude up to {peak:.3g} exceed {self.max_abs:.3g}, more "
                                   "than valid client data gives")
        out = np.array(value, order="C", copy=True)
        out.setflags(write=False)
        return out

    def read(self, cls_name: str, ref: _ArrayRef, payload: memoryview) -> np.ndarray:
        """View the array ``ref`` of a validated frame, after checking its wire dtype and ndim.

        The values themselves are checked by :meth:`check` when the message is built.
        """
        where = f"{cls_name}.{ref.name}"
        if ref.dtype not in _KIND_DTYPES[self.kind]:
            raise MessageError(f"{where}: wire dtype {ref.dtype} does not match the field (expected {' or '.join(_KIND_DTYPES[self.kind])})")
        if len(ref.shape) != self.ndim:
            raise MessageError(f"{where}: expected {self.ndim}-D array, got shape {list(ref.shape)}")
        raw = payload[ref.offset:ref.offset + ref.nbytes]
        if self.kind == "b" and ref.nbytes and np.frombuffer(raw, dtype=np.uint8).max() > 1:
            raise MessageError(f"{where}: bool bytes must be 0 or 1")
        return np.frombuffer(raw, dtype=WIRE_DTYPES[ref.dtype]).reshape(ref.shape)


class Message:
    """Base class of every protocol message.

    Subclasses are frozen dataclasses that set

    - ``METHOD`` (e.g. ``"kfed"``, listed in ``_METHOD_MODULES``) and ``KIND``
      (``"summary"``, ``"model"`` or ``"reply"``);
    - ``ARRAYS``: ``{field name: ArraySpec}`` for their array fields; every other
      field is a scalar annotated ``bool``, ``int``, ``float`` or ``str``
      (optionally ``| None``), checked by :func:`_check_scalar`;
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
        for field, spec in self.ARRAYS.items():
            object.__setattr__(self, field, spec.check(name, field, getattr(self, field)))
        for field, (typ, optional) in _scalar_fields(type(self)).items():
            object.__setattr__(self, field, _check_scalar(f"{name}.{field}", getattr(self, field), typ, optional))
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

        Raises
        ------
        MessageError
            ``client`` is not None or an integer >= 0, or ``round`` is not an integer >= 0.
        """
        client, round = _check_address(type(self).__name__, client, round)
        out = copy.copy(self)
        object.__setattr__(out, "client", client)
        object.__setattr__(out, "round", round)
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
    def _encode(self, with_payload: bool) -> tuple[bytes, list[bytes], int]:
        """(header bytes, array payload chunks (empty unless ``with_payload``), payload size).

        Without the payload nothing is converted: an array's header entry and byte count follow from
        its dtype (little-endian) and shape alone, the same as those of the contiguous little-endian
        copy the payload is written from (tested against :meth:`to_bytes`).
        """
        arrays, scalars = [], {}
        chunks = []
        size = 0
        for name, is_array in _field_plan(type(self)):
            value = getattr(self, name)
            if is_array:
                if with_payload or not isinstance(value, np.ndarray) or value.ndim == 0:
                    value = np.ascontiguousarray(value)  # (at least 1-D)
                dt = value.dtype.newbyteorder("<") if value.dtype.byteorder == ">" else value.dtype
                arrays.append({"name": name, "dtype": dt.str, "shape": list(value.shape)})
                size += value.size * dt.itemsize
                if with_payload:
                    chunks.append(value.astype(dt, copy=False).tobytes(order="C"))
            else:
                scalars[name] = value
        header = _HEADER_ENCODER.encode(
            {"v": FORMAT_VERSION, "method": self.METHOD, "kind": self.KIND, "client": self.client,
             "round": self.round, "scalars": scalars, "arrays": arrays},
        ).encode("utf-8")
        if len(header) > _MAX_HEADER:
            raise MessageError(f"{type(self).__name__}: header of {len(header)} bytes exceeds {_MAX_HEADER}")
        return header, chunks, size

    @property
    def wire_size(self) -> int:
        """Exact length in bytes of :meth:`to_bytes` (framing, header, payload, digest), computed without
        serialising or converting the arrays."""
        header, _, size = self._encode(with_payload=False)
        return _PREFIX + len(header) + size + _DIGEST

    def to_bytes(self) -> bytes:
        """Serialise to the fastfc wire format (see module docstring)."""
        header, chunks, _ = self._encode(with_payload=True)
        body = b"".join([MAGIC, struct.pack("<I", len(header)), header, *chunks])
        return body + hashlib.sha256(body).digest()

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview):
        """Read and validate a message of this class from bytes.

        Raises
        ------
        MessageError
            Anything listed in the module docstring: truncated or corrupted
            data, wrong format version, a malformed header, another method's or
            kind's message, unknown or missing fields, wrong scalar types,
            wrong or disallowed dtypes, shapes that do not match the payload,
            NaN/inf, or inconsistent fields.
        """
        frame = _read(data)
        got = (frame.header["method"], frame.header["kind"])
        if got != (cls.METHOD, cls.KIND):
            raise MessageError(f"expected a {cls.METHOD!r} {cls.KIND!r} message, got {_brief(got[0])} {_brief(got[1])}")
        return cls._from_frame(frame)

    @classmethod
    def _from_frame(cls, frame: _Frame):
        """Build a message of this class from a validated frame of the same method and kind."""
        name = cls.__name__
        got_arrays = {ref.name: ref for ref in frame.arrays}
        if set(got_arrays) != set(cls.ARRAYS):
            raise MessageError(f"{name}: array fields {sorted(got_arrays)} do not match the expected {sorted(cls.ARRAYS)}")
        scalars = frame.header["scalars"]
        expected = _scalar_fields(cls)
        if set(scalars) != set(expected):
            raise MessageError(f"{name}: scalar fields {sorted(scalars)} do not match the expected {sorted(expected)}")
        kwargs = {field: spec.read(name, got_arrays[field], frame.payload) for field, spec in cls.ARRAYS.items()}
        msg = cls(**kwargs, **scalars)
        return msg.addressed(client=frame.header["client"], round=frame.header["round"])


#: the header's JSON encoder (``json.dumps(..., separators=(",", ":"), allow_nan=False)``, built once)
_HEADER_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


@functools.cache
def _field_plan(cls: type[Message]) -> tuple[tuple[str, bool], ...]:
    """``(name, is_array)`` of every dataclass field of a message class, in field order (the wire order)."""
    return tuple((f.name, f.name in cls.ARRAYS) for f in dataclasses.fields(cls))


@functools.cache
def _scalar_fields(cls: type[Message]) -> dict[str, tuple[type, bool]]:
    """``{field: (type, optional)}`` for the scalar fields of a message class, from their annotations.

    Raises
    ------
    TypeError
        A field is neither in ``ARRAYS`` nor annotated with a supported scalar
        type, or ``ARRAYS`` names a field the class does not have (a
        programming error in the message class).
    """
    fields = dataclasses.fields(cls)
    missing = set(cls.ARRAYS) - {f.name for f in fields}
    if missing:
        raise TypeError(f"{cls.__name__}.ARRAYS names fields the class does not have: {sorted(missing)}")
    out = {}
    for f in fields:
        if f.name in cls.ARRAYS:
            continue
        text = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        parts = [p.strip() for p in text.split("|")]
        optional = "None" in parts
        types = [p for p in parts if p != "None"]
        if len(types) != 1 or types[0] not in _SCALAR_TYPES:
            raise TypeError(f"{cls.__name__}.{f.name}: annotation {text!r} is not an ArraySpec field or a scalar type "
                            f"({', '.join(_SCALAR_TYPES)}, optionally '| None')")
        out[f.name] = (_SCALAR_TYPES[types[0]], optional)
    return out


def _check_scalar(where: str, value: Any, typ: type, optional: bool = False) -> Any:
    """Check one scalar field value against its declared type; return it normalised.

    numpy scalars are first converted to Python ones. ``int`` fields accept
    integers (not bools) within int64; ``float`` fields accept finite floats
    and integers (converted to float), not bools; ``bool`` fields only
    ``True``/``False``; ``str`` fields only strings; ``None`` only when the
    annotation is optional.

    Raises
    ------
    MessageError
        The value does not have the declared type or is out of range.
    """
    if isinstance(value, np.generic):
        value = value.item()
    if value is None and optional:
        return None
    if typ is float and type(value) is int:
        try:
            value = float(value)
        except OverflowError:
            raise MessageError(f"{where}: integer too large for a float") from None
    if type(value) is not typ:
        raise MessageError(f"{where}: expected {typ.__name__}{' or None' if optional else ''}, got {type(value).__name__} {_brief(value)}")
    if typ is int and not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise MessageError(f"{where}: integer does not fit in int64")
    if typ is float and not math.isfinite(value):
        raise MessageError(f"{where}: must be finite, got {value}")
    return value


def _brief(value: Any) -> str:
    """A short repr for error messages (never fails, even for ints too long to print)."""
    try:
        text = repr(value)
    except ValueError:
        return f"<{type(value).__name__}>"
    return text if len(text) <= 40 else text[:37] + "..."


def _check_address(cls_name: str, client: Any, round: Any) -> tuple[int | None, int]:
    """Validate the addressing fields (``client``: None or int >= 0, ``round``: int >= 0)."""
    client = _check_scalar(f"{cls_name}: client", client, int, optional=True)
    round = _check_scalar(f"{cls_name}: round", round, int)
    if (client is not None and client < 0) or round < 0:
        raise MessageError(f"{cls_name}: client must be None or an integer >= 0 and round an integer >= 0, "
                           f"got client={client!r}, round={round!r}")
    return client, round


# -- the one reader ------------------------------------------------------------
def _byte_view(data: Any) -> memoryview:
    """``data`` as a flat byte view (a C-order copy when it is a non-contiguous memoryview)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MessageError(f"expected bytes, got {type(data).__name__}")
    try:
        view = memoryview(data)
        return view.cast("B") if view.c_contiguous else memoryview(view.tobytes())
    except (TypeError, ValueError, NotImplementedError) as exc:
        raise MessageError(f"cannot read the message buffer ({exc})") from None


def _json_depth(raw: bytes) -> int:
    """Deepest ``[``/``{`` nesting of JSON text, ignoring brackets inside strings.

    Exact on any prefix of valid JSON, so on everything a parser reads before it
    would fail: a quote preceded by an odd run of backslashes is escaped, every
    other quote opens or closes a string.
    """
    b = np.frombuffer(raw, dtype=np.uint8)
    pos = np.arange(b.size)
    last_plain = np.maximum.accumulate(np.where(b == ord("\\"), -1, pos))  # last non-backslash at or before i
    run = pos - 1 - np.concatenate(([-1], last_plain[:-1]))  # backslashes right before i
    quote = (b == ord('"')) & (run % 2 == 0)
    in_string = (np.cumsum(quote) - quote) % 2 == 1
    step = np.isin(b, (ord("["), ord("{"))).astype(np.int64) - np.isin(b, (ord("]"), ord("}")))
    step[in_string] = 0
    return int(np.cumsum(step).max(initial=0))


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """``json`` object hook: a JSON object as a dict, refusing repeated keys (readers disagree on which wins)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise MessageError(f"message header repeats the key {_brief(key)}")
        out[key] = value
    return out


def _no_constants(token: str):
    """``json`` constant hook: ``NaN``/``Infinity`` are not JSON and never written by :meth:`Message.to_bytes`."""
    raise MessageError(f"message header contains {token}")


def _read(data: Any) -> _Frame:
    """Check the framing and header of a message and locate its arrays (see module docstring)."""
    buf = _byte_view(data)
    if len(buf) < _PREFIX + _DIGEST:
        raise MessageError(f"message is truncated ({len(buf)} bytes)")
    if bytes(buf[:len(MAGIC)]) != MAGIC:
        raise MessageError("not a fastfc message (bad magic bytes)")
    body, digest = buf[:-_DIGEST], bytes(buf[-_DIGEST:])
    if hashlib.sha256(body).digest() != digest:
        raise MessageError("message digest mismatch: the message was truncated or altered")
    (hlen,) = struct.unpack_from("<I", body, len(MAGIC))
    if hlen > _MAX_HEADER or _PREFIX + hlen > len(body):
        raise MessageError("message header length is out of range")
    raw = bytes(body[_PREFIX:_PREFIX + hlen])
    if _json_depth(raw) > _MAX_DEPTH:
        raise MessageError(f"message header is nested more than {_MAX_DEPTH} deep")
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MessageError(f"message header is not valid JSON ({exc})") from None
    payload = body[_PREFIX + hlen:]
    return _Frame(header, _check_header(header, len(payload)), payload)


def _check_header(header: Any, payload_len: int) -> tuple[_ArrayRef, ...]:
    """Validate a parsed header's structure against the payload length; locate the arrays."""
    if not isinstance(header, dict):
        raise MessageError("message header is not a JSON object")
    v = header.get("v")
    if type(v) is not int or v != FORMAT_VERSION:
        raise MessageError(f"unsupported message format version {_brief(v)} (this fastfc reads {FORMAT_VERSION})")
    if set(header) != _HEADER_KEYS:
        raise MessageError(f"message header keys {_brief(sorted(header))} are not {sorted(_HEADER_KEYS)}")
    for key in ("method", "kind"):
        if not isinstance(header[key], str):
            raise MessageError(f"message header '{key}' must be a string, got {type(header[key]).__name__}")
    _check_address("message header", header["client"], header["round"])
    if not isinstance(header["scalars"], dict):
        raise MessageError("message header 'scalars' must be an object")
    if not isinstance(header["arrays"], list):
        raise MessageError("message header 'arrays' must be a list")
    refs, names, offset = [], set(), 0
    for entry in header["arrays"]:
        ref = _array_ref(entry, offset)
        if ref.name in names:
            raise MessageError(f"message header lists array {_brief(ref.name)} twice")
        names.add(ref.name)
        if ref.offset + ref.nbytes > payload_len:
            raise MessageError(f"array {_brief(ref.name)}: payload is truncated ({ref.nbytes} bytes claimed at offset {ref.offset} of {payload_len})")
        refs.append(ref)
        offset += ref.nbytes
    if offset != payload_len:
        raise MessageError(f"{payload_len - offset} unexpected trailing payload bytes")
    return tuple(refs)


def _array_ref(entry: Any, offset: int) -> _ArrayRef:
    """Validate one ``arrays`` entry of a header; its data starts at ``offset``."""
    if not isinstance(entry, dict) or set(entry) != _ARRAY_KEYS:
        raise MessageError(f"message header 'arrays' entries must be objects with keys {sorted(_ARRAY_KEYS)}")
    name, dtype, shape = entry["name"], entry["dtype"], entry["shape"]
    if not isinstance(name, str):
        raise MessageError(f"array name must be a string, got {type(name).__name__}")
    if not isinstance(dtype, str) or dtype not in WIRE_DTYPES:
        raise MessageError(f"array {_brief(name)}: dtype {_brief(dtype)} is not allowed on the wire")
    if (not isinstance(shape, list) or len(shape) > _MAX_NDIM
            or not all(type(s) is int and 0 <= s <= _INT64_MAX for s in shape)):
        raise MessageError(f"array {_brief(name)}: malformed shape {_brief(shape)} (at most {_MAX_NDIM} integers >= 0)")
    itemsize = WIRE_DTYPES[dtype].itemsize
    # numpy's own limit (it ignores zero dimensions), checked on Python integers
    if math.prod(s for s in shape if s) * itemsize > _INT64_MAX:
        raise MessageError(f"array {_brief(name)}: shape {_brief(shape)} is too large for any array")
    return _ArrayRef(name, dtype, tuple(shape), offset, math.prod(shape) * itemsize)


def peek_header(data: bytes | bytearray | memoryview) -> dict:
    """Return the validated header of a message without building the message.

    The header's structure, its addressing and the array shapes against the
    payload are checked (see the module docstring); the fields are not checked
    against the message class, and the method's module is not imported.

    Raises
    ------
    MessageError
        The framing or header is malformed.
    """
    return _read(data).header


def decode_message(data: bytes | bytearray | memoryview, *, method: str | None = None, kind: str | None = None) -> Message:
    """Read any registered message from bytes, optionally requiring its method and kind.

    The message class is looked up in the registry; on a miss, the method's
    module (from the fixed table ``_METHOD_MODULES``) is imported once, so a
    process that imported only :mod:`fastfc.protocol` reads every method.

    Raises
    ------
    MessageError
        The message is malformed (see :meth:`Message.from_bytes`), of another
        method or kind than required, or of an unknown type.
    """
    frame = _read(data)
    key = (frame.header["method"], frame.header["kind"])
    if method is not None and key[0] != method:
        raise MessageError(f"expected a {method!r} message, got {_brief(key[0])}")
    if kind is not None and key[1] != kind:
        raise MessageError(f"expected a {kind!r} message, got {_brief(key[1])}")
    return _message_class(*key)._from_frame(frame)


def _message_class(method: str, kind: str) -> type[Message]:
    """The registered class of ``(method, kind)``, importing its method's module on a registry miss."""
    cls = Message._registry.get((method, kind))
    if cls is None and method in _METHOD_MODULES:
        importlib.import_module(_METHOD_MODULES[method])
        cls = Message._registry.get((method, kind))
    if cls is None:
        raise MessageError(f"unknown message type method={_brief(method)} kind={_brief(kind)}")
    return cls


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

    ARRAYS = {"centers": ArraySpec("f", 2, max_abs=MAX_ABS_MEAN)}
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

    ARRAYS = {"centers": ArraySpec("f", 2, max_abs=MAX_ABS_MEAN), "local_to_global": ArraySpec("i", 1, min_value=0)}
    centers: np.ndarray
    local_to_global: np.ndarray
    n_features: int

    def _check_consistency(self) -> None:
        self._check_centers()
        if self.local_to_global.size and self.local_to_global.max() >= self.centers.shape[0]:
            self._fail("local_to_global refers to a global cluster that does not exist")
