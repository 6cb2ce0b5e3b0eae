"""Reading ``.npz`` archives and ``.npy`` members from untrusted bytes, without pickle and without trusting
their headers: shared by the model files (:mod:`fastfc.saving`) and the client states (:mod:`fastfc._state`).

Every member's header is parsed and checked (dtype kind, a shape of non-negative integers that accounts for
exactly the member's bytes) before any array is made, so a damaged or hostile archive never allocates what it
claims; whatever zipfile, zlib, struct or NumPy raise on the way (:data:`fastfc._validation.FILE_READ_ERRORS`)
becomes the caller's one error type.
"""
from __future__ import annotations

import io
import zipfile

import numpy as np

from ._validation import FILE_READ_ERRORS

__all__ = ["read_npy", "read_archive"]


def read_npy(name: str, data: bytes, error: type[Exception], kinds: str) -> np.ndarray:
    """One ``.npy`` member as a C-contiguous array of its own.

    Parameters
    ----------
    name : str
        The member's name, for messages.
    data : bytes
        The member's bytes.
    error : exception class
        Raised (with a message naming the member) for anything malformed.
    kinds : str
        Accepted dtype kinds (e.g. ``"biuf"``); structured, subarray and object dtypes never are.

    Returns
    -------
    ndarray
    """
    fh = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise error(f"member {name!r}: unsupported .npy version {version}")
    except error:
        raise
    except FILE_READ_ERRORS as exc:
        raise error(f"member {name!r} is not a valid .npy array: {type(exc).__name__}: {exc}") from None
    if dtype.hasobject or dtype.kind not in kinds or dtype.fields is not None or dtype.subdtype is not None:
        raise error(f"member {name!r} has dtype {dtype}; only arrays of kinds {kinds!r} are read")
    count = 1
    for n in shape:
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise error(f"member {name!r} has an invalid shape {shape!r}")
        count *= n
    offset = fh.tell()
    if count * dtype.itemsize != len(data) - offset:
        raise error(f"member {name!r} claims shape {shape} of {dtype} ({count * dtype.itemsize} bytes) but "
                    f"holds {len(data) - offset} bytes")
    if count == 0:
        return np.zeros(shape, dtype=dtype)
    arr = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    return arr.reshape(shape, order="F" if fortran else "C").copy(order="C")


def read_archive(data: bytes, error: type[Exception], kinds: str, *, what: str,
                 max_members: int = 1 << 16) -> dict[str, np.ndarray]:
    """Every member of an ``.npz`` archive of stored (uncompressed) ``.npy`` members, by name without ``.npy``.

    Parameters
    ----------
    data : bytes
    error : exception class
        Raised for anything malformed: not a zip archive, too many, compressed, duplicated or non-``.npy``
        members, a member claiming more bytes than the archive, a bad CRC, or a member :func:`read_npy` refuses.
    kinds : str
        Accepted dtype kinds of the members.
    what : str
        What the archive is, for messages (e.g. ``"model archive"``).
    max_members : int, default=65536

    Returns
    -------
    dict of str to ndarray
    """
    try:
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
            infos = zf.infolist()
            if len(infos) > max_members:
                raise error(f"the {what} has {len(infos)} members (at most {max_members})")
            members: dict[str, np.ndarray] = {}
            for info in infos:
                if info.compress_type != zipfile.ZIP_STORED:
                    raise error(f"member {info.filename!r} of the {what} is compressed; members are stored as is")
                if info.file_size > len(data):
                    raise error(f"member {info.filename!r} claims {info.file_size} bytes, more than the {what}")
                if not info.filename.endswith(".npy"):
                    raise error(f"member {info.filename!r} of the {what} is not a .npy array")
                key = info.filename[:-4]
                if key in members:
                    raise error(f"the {what} holds {key!r} twice")
                members[key] = read_npy(key, zf.read(info), error, kinds)
            return members
    except error:
        raise
    except FILE_READ_ERRORS as exc:
        raise error(f"not a readable {what}: {type(exc).__name__}: {exc}") from None
