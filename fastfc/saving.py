"""Saved models: one pickle-free file per fitted estimator.

:meth:`~fastfc.base.BaseFederatedClusterer.save` writes, and :func:`load` reads,
a fitted estimator as one ``.npz`` archive (readable by
``numpy.load(path, allow_pickle=False)``) of

- ``__header__``: a UTF-8 JSON document stored as a ``uint8`` array: the format
  tag ``"fastfc-model"``, ``format_version`` (:data:`MODEL_FORMAT_VERSION`),
  the ``fastfc_version`` that wrote it, the estimator class (``method``), its
  parameters (``params``), its fitted attributes (``attributes``) and the
  manifest of the arrays (``arrays``: ``{key: {"dtype", "shape"}}``);
- ``a0``, ``a1``, ...: the fitted arrays (numeric, bool or unicode), and every
  message the estimator keeps (``global_model_``, ``client_summaries_``) in the
  protocol's own wire format (a ``uint8`` array read back by
  :func:`fastfc.protocol.decode_message`);
- ``__digest__``: SHA-256 of the header and of every array (dtype, shape,
  bytes), which detects truncation and accidental or in-transit corruption.
  Like the protocol's digest it is not a signature: everything is checked
  whatever it says.

What the file holds
    Everything the fit kept: besides the global model, every client's labels
    and round-0 summary (``client_labels_``, ``client_summaries_``). A model
    fitted in one process on every client's data is therefore the
    federation's record, not only the server's model: share it only where
    those may go.

What can be saved
    Parameters and fitted attributes made of ``None``, bools, ints, floats
    (also NaN and infinities), strings, lists, tuples, dicts, numeric numpy
    arrays (and arrays of strings), protocol messages, and fastfc estimators.
    An estimator given as a parameter (``FedKMeans(init=FeCA(...))``) is saved
    by its class and parameters (never its fitted state: the outer estimator
    clones it anyway). A callable, a ``RandomState``/``Generator`` instance
    (``random_state``), a scikit-learn or other third-party object cannot be
    saved without pickle: :meth:`save` raises :class:`ModelFileError` naming
    the parameter or attribute and what to do instead.

What reading checks (every failure is a :class:`ModelFileError`)
    The archive (a zip of stored, uncompressed members only, so nothing is
    inflated beyond the file's own size), every member's ``.npy`` header
    (dtype among bool/int/uint/float/unicode, the claimed shape accounting
    exactly for the member's bytes, before any array is made), the JSON
    header (at most :data:`_MAX_HEADER` bytes, nested at most ``_MAX_DEPTH``
    deep, no NaN literals, no repeated keys, exactly the expected keys),
    the format tag and version (a newer version is refused with a message
    saying so), the method (one of fastfc's estimators, looked up in a fixed
    table; :meth:`Cls.load <fastfc.base.BaseFederatedClusterer.load>` also
    refuses another method's file), the manifest against the members, the
    digest, every node of the parameters and attributes, the embedded
    messages (the protocol's own reader), the parameters (the estimator's own
    validation) and the attributes ``predict`` uses (shapes, finiteness).
"""
from __future__ import annotations

import hashlib
import importlib
import io
import json
import math
import os
import re
import struct
from typing import Any

import numpy as np

from ._npz import read_archive, read_npy

__all__ = ["ModelFileError", "MODEL_FORMAT", "MODEL_FORMAT_VERSION", "save_model", "load", "model_to_bytes",
           "model_from_bytes"]

MODEL_FORMAT = "fastfc-model"
#: version of the file layout this fastfc writes; it reads versions 1..MODEL_FORMAT_VERSION
MODEL_FORMAT_VERSION = 1
_HEADER_KEY = "__header__"
_DIGEST_KEY = "__digest__"
#: largest JSON header read (a header is a few KiB; the arrays are stored outside it)
_MAX_HEADER = 16 << 20
#: deepest JSON nesting accepted (a saved model needs under 12)
_MAX_DEPTH = 32
#: most members an archive may hold
_MAX_MEMBERS = 1 << 16
_HEADER_KEYS = frozenset({"format", "format_version", "fastfc_version", "method", "params", "attributes", "arrays"})
_ARRAY_KEY = re.compile(r"a(0|[1-9][0-9]{0,8})\Z")
_ATTRIBUTE = re.compile(r"[A-Za-z][A-Za-z0-9_]*_\Z")
_NPY_KINDS = "biufU"
_INT64 = 1 << 63


class ModelFileError(ValueError):
    """A model file cannot be written (an unsaveable parameter or attribute) or read (malformed,
    damaged or tampered with, of a newer format, or of another method than asked for)."""


def _estimator_classes() -> dict[str, str]:
    """Class name -> module of every fastfc estimator (the fixed table of :mod:`fastfc`)."""
    from . import _ESTIMATORS

    return dict(_ESTIMATORS)


def _estimator_class(name: Any) -> type:
    table = _estimator_classes()
    if not isinstance(name, str) or name not in table:
        raise ModelFileError(f"model file names an unknown estimator {_brief(name)}; fastfc's are "
                             f"{', '.join(sorted(table))}")
    return getattr(importlib.import_module(table[name]), name)


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ----------------------------------------------------------------------------- writing
class _Encoder:
    """Turns parameters and attributes into JSON nodes plus a table of arrays."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def _array(self, value: np.ndarray) -> str:
        key = f"a{len(self.arrays)}"
        self.arrays[key] = value
        return key

    def encode(self, value: Any, where: str) -> Any:
        from .base import BaseFederatedClusterer
        from .protocol import Message

        if isinstance(value, np.generic) and not isinstance(value, (np.str_, np.bytes_, np.void)):
            value = value.item()
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            if not -_INT64 <= value < _INT64:
                raise ModelFileError(f"cannot save {where}: the integer {value} does not fit in 64 bits")
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
        if isinstance(value, (list, tuple)):
            return {"t": type(value).__name__, "v": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, dict):
            return {"t": "dict", "v": [[self.encode(k, f"a key of {where}"), self.encode(v, f"{where}[{k!r}]")]
                                       for k, v in value.items()]}
        if isinstance(value, np.ndarray):
            if value.dtype.kind in _NPY_KINDS:
                return {"t": "array", "key": self._array(np.ascontiguousarray(value))}
            if value.dtype == object and all(isinstance(v, str) for v in value.flat):
                return {"t": "array", "key": self._array(value.astype(str)), "object": True}
            raise ModelFileError(f"cannot save {where}: an array of dtype {value.dtype} (only bool, integer, float "
                                 "and string arrays are saved without pickle)")
        if isinstance(value, Message):
            return {"t": "message", "key": self._array(np.frombuffer(value.to_bytes(), dtype=np.uint8))}
        if isinstance(value, BaseFederatedClusterer):
            name = type(value).__name__
            if _estimator_classes().get(name) != type(value).__module__:
                raise ModelFileError(f"cannot save {where}: {name} is not one of fastfc's estimators")
            params = value.get_params(deep=False)
            return {"t": "estimator", "class": name,
                    "params": {k: self.encode(v, f"{where}.{k}") for k, v in sorted(params.items())}}
        if isinstance(value, (np.random.RandomState, np.random.Generator)):
            raise ModelFileError(f"cannot save {where}: a {type(value).__name__} instance cannot be saved without "
                                 "pickle; fit with an int seed or None (or set_params it to one) before saving")
        if callable(value):
            raise ModelFileError(f"cannot save {where}: callables ({_brief(value)}) cannot be saved without pickle; "
                                 "give a named option (a string) or a fastfc estimator instead")
        raise ModelFileError(f"cannot save {where}: a {type(value).__module__}.{type(value).__qualname__} object "
                             "cannot be saved without pickle")


def _digest(header_raw: bytes, arrays: dict[str, np.ndarray]) -> bytes:
    h = hashlib.sha256()
    h.update(struct.pack("<Q", len(header_raw)))
    h.update(header_raw)
    for key in sorted(arrays, key=lambda k: int(k[1:])):
        a = arrays[key]
        meta = json.dumps([key, a.dtype.str, list(a.shape)]).encode("utf-8")
        h.update(struct.pack("<Q", len(meta)))
        h.update(meta)
        data = np.ascontiguousarray(a).tobytes()
        h.update(struct.pack("<Q", len(data)))
        h.update(data)
    return h.digest()


def _saved_attributes(est) -> dict[str, Any]:
    """The fitted attributes ``est`` keeps: public names ending in ``_`` plus the class's declared private ones."""
    private = tuple(getattr(type(est), "_saved_private_attributes", ()))
    return {k: v for k, v in vars(est).items()
            if (k.endswith("_") and not k.startswith("_") and not k.endswith("__")) or k in private}


def model_to_bytes(est) -> bytes:
    """The saved-model archive of a fitted estimator (see the module docstring).

    Parameters
    ----------
    est : BaseFederatedClusterer
        A fitted fastfc estimator.

    Returns
    -------
    data : bytes

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If ``est`` is not fitted.
    ModelFileError
        If a parameter or attribute cannot be saved without pickle (the message
        names it).
    """
    from sklearn.utils.validation import check_is_fitted

    from . import __version__

    check_is_fitted(est, "labels_")
    name = type(est).__name__
    if _estimator_classes().get(name) != type(est).__module__:
        raise ModelFileError(f"cannot save a {name}: only fastfc's estimators are saved")
    enc = _Encoder()
    params = {k: enc.encode(v, f"parameter {k}") for k, v in sorted(est.get_params(deep=False).items())}
    attributes = {k: enc.encode(v, f"attribute {k}") for k, v in sorted(_saved_attributes(est).items())}
    header = {
        "format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, "fastfc_version": __version__,
        "method": name, "params": params, "attributes": attributes,
        "arrays": {k: {"dtype": a.dtype.str, "shape": list(a.shape)} for k, a in enc.arrays.items()},
    }
    raw = json.dumps(header, separators=(",", ":"), allow_nan=False, sort_keys=True).encode("utf-8")
    buf = io.BytesIO()
    np.savez(buf, **{_HEADER_KEY: np.frombuffer(raw, dtype=np.uint8),
                     _DIGEST_KEY: np.frombuffer(_digest(raw, enc.arrays), dtype=np.uint8)}, **enc.arrays)
    return buf.getvalue()


def save_model(est, path: str | os.PathLike) -> None:
    """Write a fitted estimator to ``path`` (see :func:`model_to_bytes`); the file is replaced atomically.

    Parameters
    ----------
    est : BaseFederatedClusterer
        A fitted fastfc estimator.
    path : str or path-like
        The file to write (any name; ``.ffc`` is the convention).
    """
    data = model_to_bytes(est)
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# ----------------------------------------------------------------------------- reading
def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ModelFileError(f"model header repeats the key {_brief(key)}")
        out[key] = value
    return out


def _no_constants(token: str):
    raise ModelFileError(f"model header contains {token}, which is not JSON")


def _read_npy(name: str, data: bytes) -> np.ndarray:
    """One ``.npy`` member (:func:`fastfc._npz.read_npy` raising ModelFileError)."""
    return read_npy(name, data, ModelFileError, _NPY_KINDS)


def _read_archive(data: bytes) -> dict[str, np.ndarray]:
    """Every member of the archive (:func:`fastfc._npz.read_archive` raising ModelFileError)."""
    return read_archive(data, ModelFileError, _NPY_KINDS, what="model archive", max_members=_MAX_MEMBERS)


def _check_depth(raw: bytes) -> None:
    from .protocol import _json_depth

    if _json_depth(raw) > _MAX_DEPTH:
        raise ModelFileError(f"model header is nested more than {_MAX_DEPTH} deep")


def _read_header(members: dict[str, np.ndarray]) -> tuple[dict, bytes]:
    raw_arr = members.get(_HEADER_KEY)
    if raw_arr is None:
        raise ModelFileError("not a fastfc model file (no header)")
    if raw_arr.dtype != np.uint8 or raw_arr.ndim != 1:
        raise ModelFileError("model header must be a 1-D uint8 array")
    if raw_arr.size > _MAX_HEADER:
        raise ModelFileError(f"model header of {raw_arr.size} bytes exceeds {_MAX_HEADER}")
    raw = raw_arr.tobytes()
    _check_depth(raw)
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constants)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ModelFileError(f"model header is not valid UTF-8 JSON ({exc})") from None
    if not isinstance(header, dict) or header.get("format") != MODEL_FORMAT:
        raise ModelFileError("not a fastfc model file (wrong format tag)")
    version = header.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFileError(f"model format version {_brief(version)} is not a positive integer")
    if version > MODEL_FORMAT_VERSION:
        raise ModelFileError(f"the model file has format version {version}, written by fastfc "
                             f"{_brief(header.get('fastfc_version'))}; this fastfc reads up to version "
                             f"{MODEL_FORMAT_VERSION}: upgrade fastfc to load it")
    if set(header) != _HEADER_KEYS:
        raise ModelFileError(f"model header keys {sorted(map(str, header))} are not {sorted(_HEADER_KEYS)}")
    if not isinstance(header["fastfc_version"], str):
        raise ModelFileError("model header 'fastfc_version' must be a string")
    for key in ("params", "attributes", "arrays"):
        if not isinstance(header[key], dict):
            raise ModelFileError(f"model header {key!r} must be an object")
    return header, raw


def _check_manifest(header: dict, members: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    arrays = {k: v for k, v in members.items() if k not in (_HEADER_KEY, _DIGEST_KEY)}
    manifest = header["arrays"]
    if set(manifest) != set(arrays):
        raise ModelFileError(f"the archive's arrays {sorted(arrays)[:8]} do not match its header's "
                             f"{sorted(manifest)[:8]}")
    for key, entry in manifest.items():
        if not _ARRAY_KEY.match(key):
            raise ModelFileError(f"array key {_brief(key)} is not a0, a1, ...")
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape"}:
            raise ModelFileError(f"array {key}: manifest entry must be an object with keys dtype and shape")
        a = arrays[key]
        if entry["dtype"] != a.dtype.str or entry["shape"] != list(a.shape):
            raise ModelFileError(f"array {key}: the header says {_brief(entry['dtype'])} {_brief(entry['shape'])}, "
                                 f"the archive holds {a.dtype.str} {list(a.shape)}")
    return arrays


class _Decoder:
    """Turns JSON nodes back into values, taking each array of the archive at most once."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = arrays
        self.used: set[str] = set()

    def _take(self, node: dict, where: str) -> np.ndarray:
        key = node.get("key")
        if not isinstance(key, str) or key not in self.arrays:
            raise ModelFileError(f"{where}: refers to a missing array {_brief(key)}")
        if key in self.used:
            raise ModelFileError(f"{where}: array {key} is referred to twice")
        self.used.add(key)
        return self.arrays[key]

    def decode(self, node: Any, where: str) -> Any:
        if node is None or isinstance(node, (bool, str)):
            return node
        if isinstance(node, int):
            if not -_INT64 <= node < _INT64:
                raise ModelFileError(f"{where}: integer {_brief(node)} does not fit in 64 bits")
            return node
        if isinstance(node, float):
            return node
        if not isinstance(node, dict):
            raise ModelFileError(f"{where}: unexpected JSON {type(node).__name__}")
        tag = node.get("t")
        expected = {"float": {"t", "v"}, "list": {"t", "v"}, "tuple": {"t", "v"}, "dict": {"t", "v"},
                    "array": ({"t", "key"}, {"t", "key", "object"}), "message": {"t", "key"},
                    "estimator": {"t", "class", "params"}}
        if not isinstance(tag, str) or tag not in expected:
            raise ModelFileError(f"{where}: unknown node type {_brief(tag)}")
        keys = expected[tag]
        if set(node) not in (keys if isinstance(keys, tuple) else (keys,)):
            raise ModelFileError(f"{where}: a {tag} node has keys {sorted(node)}")
        if tag == "float":
            if node["v"] not in ("nan", "inf", "-inf"):
                raise ModelFileError(f"{where}: a float node holds {_brief(node['v'])}")
            return float(node["v"])
        if tag in ("list", "tuple"):
            if not isinstance(node["v"], list):
                raise ModelFileError(f"{where}: a {tag} node must hold a list")
            items = [self.decode(v, f"{where}[{i}]") for i, v in enumerate(node["v"])]
            return items if tag == "list" else tuple(items)
        if tag == "dict":
            if not isinstance(node["v"], list):
                raise ModelFileError(f"{where}: a dict node must hold a list of pairs")
            out = {}
            for pair in node["v"]:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ModelFileError(f"{where}: dict entries must be [key, value] pairs")
                key = self.decode(pair[0], f"a key of {where}")
                if not isinstance(key, (type(None), bool, int, float, str, tuple)) or (
                        isinstance(key, tuple) and not all(isinstance(k, (type(None), bool, int, float, str))
                                                           for k in key)):
                    raise ModelFileError(f"{where}: a dict key must be a scalar or a tuple of scalars")
                if key in out:
                    raise ModelFileError(f"{where}: dict key {_brief(key)} repeats")
                out[key] = self.decode(pair[1], f"{where}[{key!r}]")
            return out
        if tag == "array":
            arr = self._take(node, where)
            if "object" in node:
                if node["object"] is not True or arr.dtype.kind != "U":
                    raise ModelFileError(f"{where}: only a string array can be restored as an object array")
                return arr.astype(object)
            return arr
        if tag == "message":
            from .protocol import MessageError, decode_message

            arr = self._take(node, where)
            if arr.dtype != np.uint8 or arr.ndim != 1:
                raise ModelFileError(f"{where}: a message must be stored as a 1-D uint8 array")
            try:
                return decode_message(arr.tobytes())
            except MessageError as exc:
                raise ModelFileError(f"{where}: {exc}") from exc
        # estimator (a parameter of another estimator): class and parameters, never fitted state
        cls = _estimator_class(node["class"])
        if not isinstance(node["params"], dict):
            raise ModelFileError(f"{where}: estimator parameters must be an object")
        params = {k: self.decode(v, f"{where}.{k}") for k, v in node["params"].items()}
        return _build(cls, params, where)


def _build(cls: type, params: dict, where: str):
    """``cls(**params)``, refusing unknown or missing parameters and values its own validation rejects."""
    valid = set(cls().get_params(deep=False))
    if set(params) != valid:
        extra, missing = sorted(set(params) - valid), sorted(valid - set(params))
        raise ModelFileError(f"{where}: the {cls.__name__} parameters do not match this fastfc's "
                             f"(unknown: {', '.join(extra) or 'none'}; missing: {', '.join(missing) or 'none'})")
    try:
        est = cls(**params)
        est._validate_params()
    except (ValueError, TypeError) as exc:
        raise ModelFileError(f"{where}: invalid {cls.__name__} parameters: {exc}") from exc
    return est


def model_from_bytes(data: bytes | bytearray | memoryview, *, method: type | str | None = None):
    """Read an estimator written by :func:`model_to_bytes` (never unpickles).

    Parameters
    ----------
    data : bytes-like
    method : estimator class or class name, default=None
        Require this estimator (another method's file is refused).

    Returns
    -------
    est : BaseFederatedClusterer
        The fitted estimator; ``predict`` gives the labels it gave before saving.

    Raises
    ------
    ModelFileError
        For anything else than a valid model file of this or an older format
        version (and of ``method``, when given).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ModelFileError(f"expected the bytes of a model file, got {type(data).__name__}")
    data = bytes(data)
    members = _read_archive(data)
    header, raw = _read_header(members)
    arrays = _check_manifest(header, members)
    digest = members.get(_DIGEST_KEY)
    if digest is None or digest.dtype != np.uint8 or digest.shape != (32,) or \
            digest.tobytes() != _digest(raw, arrays):
        raise ModelFileError("model file digest mismatch: the file was truncated or altered")
    name = header["method"]
    cls = _estimator_class(name)
    if method is not None:
        want = method if isinstance(method, str) else method.__name__
        if want != name:
            raise ModelFileError(f"the file holds a {name} model, not a {want}: load it with fastfc.load "
                                 f"or {name}.load")
    dec = _Decoder(arrays)
    params = {k: dec.decode(v, f"parameter {k}") for k, v in header["params"].items()}
    est = _build(cls, params, "the model file")
    private = set(getattr(cls, "_saved_private_attributes", ()))
    for key, node in header["attributes"].items():
        if not (_ATTRIBUTE.match(key) or key in private) or key.endswith("__") or hasattr(cls, key) or key in params:
            raise ModelFileError(f"model file sets an attribute {_brief(key)} that a {name} does not have")
        setattr(est, key, dec.decode(node, f"attribute {key}"))
    unused = set(arrays) - dec.used
    if unused:
        raise ModelFileError(f"the archive holds arrays nothing refers to: {sorted(unused)[:8]}")
    try:
        est._check_loaded()
    except ModelFileError:
        raise
    except (ValueError, TypeError, AttributeError) as exc:
        raise ModelFileError(f"the {name} model's fitted attributes are inconsistent: {exc}") from exc
    return est


def load(path: str | os.PathLike, *, method: type | str | None = None):
    """Load a fitted estimator saved with :meth:`~fastfc.base.BaseFederatedClusterer.save`.

    Parameters
    ----------
    path : str or path-like
    method : estimator class or class name, default=None
        Require this estimator.

    Returns
    -------
    est : BaseFederatedClusterer
        The fitted estimator, of the class that saved it.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ModelFileError
        If the file is not a valid model file (see :func:`model_from_bytes`).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from fastfc import KFed, load
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(m, 0.3, size=(30, 2)) for m in (0, 4)])
    >>> est = KFed(n_clusters=2, random_state=0).fit_clients([X[::2], X[1::2]])
    >>> path = os.path.join(tempfile.mkdtemp(), "model.ffc")
    >>> est.save(path)
    >>> bool((load(path).predict(X) == est.predict(X)).all())
    True
    """
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        return model_from_bytes(data, method=method)
    except ModelFileError as exc:
        raise ModelFileError(f"{os.fspath(path)}: {exc}") from exc.__cause__
