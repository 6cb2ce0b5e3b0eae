"""Client-private state kept between a client's phases, with a pickle-free codec.

A federated method's client phase produces, besides the summary it sends, a state
it keeps (its local labels, counters, ...) that the next client phase needs. The
estimator base wraps that state in a :class:`ClientState`: a typed record naming
the method, the client, the rows it was made for and the protocol round, plus any
dict of numeric arrays and small scalars. Between processes (the Flower
ClientApp runs the phases as separate tasks) it is written to disk with
:meth:`ClientState.save` and read back with :meth:`ClientState.load`: an ``.npz``
archive read with ``allow_pickle=False`` whose JSON header is stored as a byte
array, so nothing is ever unpickled, and the zip CRC detects a damaged file.
"""
from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._npz import read_archive
from ._validation import FILE_READ_ERRORS

__all__ = ["ClientState", "ServerState", "StateError", "STATE_FORMAT", "STATE_VERSION", "require_array",
           "require_int"]

STATE_FORMAT = "fastfc-client-state"
STATE_VERSION = 1
_HEADER_KEY = "__header__"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SCALARS = (bool, int, float, str)


def _unique_keys(pairs: list) -> dict:
    """JSON object hook: a key given twice is an error (a tampered header), not "the last one wins"."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise StateError(f"client state header repeats the key {key!r}")
        out[key] = value
    return out


class StateError(ValueError):
    """A client state is missing, malformed, or not this method's, this client's or these rows' state."""


def _check_count(field: str, value, minimum: int) -> int:
    if isinstance(value, np.integer):
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise StateError(f"client state: {field} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_value(name: str, value) -> Any:
    if not isinstance(name, str) or not _NAME.match(name) or name == _HEADER_KEY:
        raise StateError(f"client state: value name {name!r} is not an identifier")
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, _SCALARS):
        if isinstance(value, float) and not np.isfinite(value):
            raise StateError(f"client state: scalar {name!r} must be finite, got {value}")
        return value
    if not isinstance(value, np.ndarray):
        raise StateError(
            f"client state: value {name!r} must be a numpy array or a bool/int/float/str scalar, "
            f"got {type(value).__name__}"
        )
    if value.dtype.kind not in "biuf":
        raise StateError(f"client state: array {name!r} has dtype {value.dtype}; only bool, int and float are kept")
    out = np.array(value, order="C", copy=True)
    out.setflags(write=False)
    return out


def require_array(state: "ClientState", name: str, kind: str, shape: tuple, *, min_value: float | None = None,
                  max_value: float | None = None) -> np.ndarray:
    """Value ``name`` of ``state`` as its method's phases need it, or :class:`StateError` (a damaged or
    tampered state): an array of dtype kind ``kind`` (``"i"`` integers, ``"f"`` finite floats, ``"b"``
    bools), shape ``shape`` (``None`` entries match any length) and values within ``[min_value,
    max_value]``."""
    value = state[name]
    where = f"the {state.method} client state of client {state.client}: {name!r}"
    kinds = {"i": "iu", "f": "f", "b": "b"}[kind]
    if not isinstance(value, np.ndarray) or value.dtype.kind not in kinds:
        got = value.dtype if isinstance(value, np.ndarray) else type(value).__name__
        raise StateError(f"{where} must be an array of {dict(i='integers', f='floats', b='bools')[kind]}, got {got}")
    if value.ndim != len(shape) or any(s is not None and s != v for s, v in zip(shape, value.shape)):
        shown = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        raise StateError(f"{where} has shape {value.shape}, expected {shown}")
    if kind == "f" and value.size and not np.isfinite(value).all():
        raise StateError(f"{where} holds NaN or inf")
    if value.size and kind != "b":
        if min_value is not None and value.min() < min_value:
            raise StateError(f"{where} holds {value.min()}, below its smallest valid value {min_value}")
        if max_value is not None and value.max() > max_value:
            raise StateError(f"{where} holds {value.max()}, above its largest valid value {max_value}")
    return value


def require_int(state: "ClientState", name: str, min_value: int, max_value: int) -> int:
    """Scalar ``name`` of ``state`` as an int in ``[min_value, max_value]``, or :class:`StateError`."""
    value = state[name]
    if not isinstance(value, int) or isinstance(value, bool) or not min_value <= value <= max_value:
        raise StateError(f"the {state.method} client state of client {state.client}: {name!r} must be an integer in "
                         f"[{min_value}, {max_value}], got {value!r}")
    return value


@dataclass(frozen=True, eq=False)
class ClientState:
    """What one client keeps between its phases (never sent to the server).

    Parameters
    ----------
    method : str
        The estimator class that made the state (e.g. ``"KFed"``).
    client : int
        Index of the client the state belongs to (>= 0).
    n_samples : int
        Rows of the client data the state was made from.
    n_features : int
        Features of that data.
    values : mapping of str to ndarray or scalar
        The method's own state: numeric (bool/int/float) arrays of any shape and
        bool/int/float/str scalars. Arrays are copied and made read-only.
    round : int, default=0
        Protocol round after which the state was made (0 for one-shot methods).
    """

    method: str
    client: int
    n_samples: int
    n_features: int
    values: Mapping[str, Any]
    round: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.method, str) or not self.method:
            raise StateError(f"client state: method must be a non-empty string, got {self.method!r}")
        object.__setattr__(self, "client", _check_count("client", self.client, 0))
        object.__setattr__(self, "n_samples", _check_count("n_samples", self.n_samples, 0))
        object.__setattr__(self, "n_features", _check_count("n_features", self.n_features, 1))
        object.__setattr__(self, "round", _check_count("round", self.round, 0))
        if not isinstance(self.values, Mapping):
            raise StateError(f"client state: values must be a mapping, got {type(self.values).__name__}")
        object.__setattr__(self, "values", {k: _check_value(k, v) for k, v in self.values.items()})

    def __getitem__(self, name: str):
        try:
            return self.values[name]
        except KeyError:
            raise StateError(
                f"the {self.method} client state has no value {name!r} (it holds {', '.join(sorted(self.values)) or 'none'})"
            ) from None

    def describe(self) -> str:
        """One line naming the state: method, client, rows and round."""
        return (f"{self.method} state of client {self.client} ({self.n_samples} rows x {self.n_features} features, "
                f"round {self.round})")

    # ------------------------------------------------------------- codec
    def to_bytes(self) -> bytes:
        """The state as an ``.npz`` archive (arrays plus a JSON header stored as uint8 bytes)."""
        arrays = {k: v for k, v in self.values.items() if isinstance(v, np.ndarray)}
        header = {
            "format": STATE_FORMAT, "v": STATE_VERSION, "method": self.method, "client": self.client,
            "round": self.round, "n_samples": self.n_samples, "n_features": self.n_features,
            "scalars": {k: v for k, v in self.values.items() if not isinstance(v, np.ndarray)},
            "arrays": sorted(arrays),
        }
        raw = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("utf-8")
        buf = io.BytesIO()
        np.savez(buf, **{_HEADER_KEY: np.frombuffer(raw, dtype=np.uint8)}, **arrays)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> ClientState:
        """Read a state written by :meth:`to_bytes` (never unpickles).

        Raises
        ------
        StateError
            Not a fastfc client state, another format version, a damaged archive
            (zip CRC), missing or unexpected arrays, or invalid fields.
        """
        try:
            try:
                z = read_archive(data, StateError, "biuf", what="client state")
            except StateError as exc:
                raise StateError(f"client state cannot be read: {exc}") from None
            files = set(z)
            if _HEADER_KEY not in files:
                raise StateError("not a fastfc client state (no header)")
            header = json.loads(z[_HEADER_KEY].tobytes().decode("utf-8"), object_pairs_hook=_unique_keys)
            if not isinstance(header, dict) or header.get("format") != STATE_FORMAT:
                raise StateError("not a fastfc client state (wrong format tag)")
            if header.get("v") != STATE_VERSION:
                raise StateError(f"client state format version {header.get('v')!r} "
                                 f"(this fastfc reads {STATE_VERSION})")
            names = header.get("arrays")
            if not isinstance(names, list) or set(names) != files - {_HEADER_KEY}:
                raise StateError(f"client state arrays {sorted(files - {_HEADER_KEY})} do not match "
                                 f"its header's {names!r}")
            scalars = header.get("scalars")
            if not isinstance(scalars, dict):
                raise StateError("client state header 'scalars' must be an object")
            if set(scalars) & set(names):
                raise StateError(f"client state names {sorted(set(scalars) & set(names))} both as scalars and arrays")
            values = {**scalars, **{k: z[k] for k in names}}
            return cls(method=header.get("method"), client=header.get("client"),
                       n_samples=header.get("n_samples"), n_features=header.get("n_features"),
                       values=values, round=header.get("round"))
        except StateError:
            raise
        except FILE_READ_ERRORS as exc:
            raise StateError(f"client state cannot be read: {type(exc).__name__}: {exc}") from None

    def save(self, path: str | os.PathLike) -> None:
        """Write the state to ``path`` (see :meth:`to_bytes`)."""
        with open(path, "wb") as fh:
            fh.write(self.to_bytes())

    @classmethod
    def load(cls, path: str | os.PathLike) -> ClientState:
        """Read a state written by :meth:`save`."""
        with open(path, "rb") as fh:
            return cls.from_bytes(fh.read())


@dataclass(frozen=True, eq=False)
class ServerState:
    """What the server keeps between rounds of a multi-round run (never sent).

    It lives in the server's process (the in-process runner or the Flower
    ServerApp), so it may hold the round-0 global model as a message.

    Parameters
    ----------
    method : str
        The estimator class that made the state.
    round : int
        The last round the server completed (>= 0).
    model : Message or None
        The round-0 global model.
    values : mapping of str to object
        The method's own server state (arrays, scalars, small records).
    """

    method: str
    round: int
    model: Any
    values: Mapping[str, Any]

    def __getitem__(self, name: str):
        try:
            return self.values[name]
        except KeyError:
            raise StateError(f"the {self.method} server state has no value {name!r}") from None
