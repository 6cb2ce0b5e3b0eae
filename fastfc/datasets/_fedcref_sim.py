"""FedCRef's experimental data: the paper's client simulation, dirty-uniform initial labels, and an
IDX reader for (Fashion-)MNIST files (spec ``shared/specs/fedcref.md`` §3.8, §5, §6.1)."""
from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path

import numpy as np

__all__ = ["load_idx", "load_fashion_mnist", "simulate_fedcref_clients", "dirty_labels"]

_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def load_idx(path) -> np.ndarray:
    """Read one IDX file (gzip-compressed or plain): magic ``0 0 type ndim``, big-endian dims, data.

    Returns
    -------
    array : ndarray of shape given by the file's dimensions

    Raises
    ------
    ValueError
        Bad magic bytes, unknown type code, or a data size that does not match the dimensions.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    if not path.is_file():
        raise FileNotFoundError(f"IDX file {str(path)!r} does not exist")
    try:
        with opener(path, "rb") as f:
            magic = f.read(4)
            if len(magic) < 4 or magic[0] != 0 or magic[1] != 0 or magic[2] not in _IDX_DTYPES:
                raise ValueError(f"{path}: not an IDX file (magic bytes {magic!r})")
            ndim = magic[3]
            head = f.read(4 * ndim)
            if len(head) != 4 * ndim:
                raise ValueError(f"{path}: the header ends before its {ndim} dimensions")
            dims = tuple(int.from_bytes(head[4 * i:4 * i + 4], "big") for i in range(ndim))
            dtype = np.dtype(_IDX_DTYPES[magic[2]])
            size = math.prod(dims) * dtype.itemsize
            # the data the header declares, read in bounded chunks (a lying header costs only the bytes that
            # are really there), plus one byte to detect trailing data
            chunks, got = [], 0
            while got <= size:
                chunk = f.read(min(1 << 24, size + 1 - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
    except (OSError, EOFError, zlib.error) as exc:  # a damaged .gz (gzip.BadGzipFile is an OSError)
        raise ValueError(f"{path}: cannot read the file: {type(exc).__name__}: {exc}") from None
    if got != size:
        raise ValueError(f"{path}: {'more than ' if got > size else ''}{got} data bytes do not match dimensions "
                         f"{dims} ({size} bytes)")
    raw = b"".join(chunks)
    return np.frombuffer(raw, dtype=dtype).reshape(dims).astype(dtype.newbyteorder("="))


def load_fashion_mnist(root=None, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST images flattened and divided by 255 (float32 in [0, 1]), and their labels.

    Parameters
    ----------
    root : path or None
        Folder with the four original ``*-idx?-ubyte.gz`` files. None: ``$FASTFC_FASHION_MNIST``,
        then Debian's ``/usr/share/datasets/fashion-mnist`` (``apt-get install dataset-fashion-mnist``).
    split : {"train", "test"}, default="train"
        The paper uses the training split (60,000 images).

    Returns
    -------
    X : ndarray of shape (n, 784), float32
    y : ndarray of shape (n,), int64
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if root is None:
        root = os.environ.get("FASTFC_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
    root = Path(root)
    prefix = "train" if split == "train" else "t10k"
    img, lab = root / f"{prefix}-images-idx3-ubyte.gz", root / f"{prefix}-labels-idx1-ubyte.gz"
    if not img.exists() or not lab.exists():
        raise FileNotFoundError(f"Fashion-MNIST IDX files not found in {root} (pass root= or set FASTFC_FASHION_MNIST)")
    X = load_idx(img)
    y = load_idx(lab).astype(np.int64)
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"{img.name} has {X.shape[0]} images but {lab.name} has {y.shape[0]} labels")
    return (X.reshape(X.shape[0], -1).astype(np.float32) / 255.0), y


def simulate_fedcref_clients(y, n_clients: int = 25, *, samples_per_class=500, k_range=None, overlap: float = 0.0,
                             random_state=None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The paper's client simulation (spec §5): each client holds K_i whole classes.

    - K_i uniform in ``k_range`` (default ``[2, floor(K_G / 2)]``); the class set uniform without
      replacement, redrawn while it equals another client's set.
    - ``samples_per_class`` rows of each class per client (an int, or ``(low, high)`` drawn
      uniformly in ``[low, high)`` per client and class), without replacement across clients
      (a class's pool is refilled when it runs out).
    - ``overlap`` O: for a class held by ``n_c`` clients with mean count ``q``, each holder puts its
      first ``s = floor(O q / (n_c + O - n_c O))`` rows into a pool, keeps the rest and receives the
      whole pool, so a fraction O of its class rows is shared.
    - Each client's rows are shuffled.

    Parameters
    ----------
    y : array-like of shape (n,)
        Class of every available row (e.g. the training split).
    n_clients : int, default=25
    samples_per_class : int or (int, int), default=500
    k_range : (int, int) or None
        Inclusive range of K_i.
    overlap : float in [0, 1), default=0
    random_state : int, Generator or None

    Returns
    -------
    indices : list of ndarray of int64
        Rows of each client (shared rows appear in several clients under overlap).
    class_sets : list of ndarray of int64
        Sorted classes of each client.
    """
    y = np.asarray(y)
    rng = np.random.default_rng(random_state)
    classes = np.unique(y)
    kg = classes.size
    lo, hi = (2, max(2, kg // 2)) if k_range is None else (int(k_range[0]), int(k_range[1]))
    if not 1 <= lo <= hi <= kg:
        raise ValueError(f"k_range must satisfy 1 <= low <= high <= {kg} classes, got {(lo, hi)}")
    if not 0 <= overlap < 1:
        raise ValueError(f"overlap must be in [0, 1), got {overlap}")
    sets: list[tuple] = []
    for _ in range(n_clients):
        for _attempt in range(1000):
            k = int(rng.integers(lo, hi + 1))
            s = tuple(sorted(rng.choice(classes, size=k, replace=False).tolist()))
            if s not in sets:
                break
        else:
            raise ValueError(f"cannot draw {n_clients} distinct class sets of sizes {lo}..{hi} from {kg} classes")
        sets.append(s)
    pools = {c: rng.permutation(np.flatnonzero(y == c)) for c in classes}
    pos = dict.fromkeys(classes.tolist(), 0)

    def take(c, n):
        out = []
        while n > 0:
            if pos[c] >= pools[c].size:
                pools[c] = rng.permutation(np.flatnonzero(y == c))
                pos[c] = 0
            chunk = pools[c][pos[c]:pos[c] + n]
            pos[c] += chunk.size
            n -= chunk.size
            out.append(chunk)
        return np.concatenate(out)

    per = []  # per client: {class: rows}
    for s in sets:
        rows = {}
        for c in s:
            n = samples_per_class if np.isscalar(samples_per_class) else int(rng.integers(*samples_per_class))
            rows[c] = take(c, int(n))
        per.append(rows)
    if overlap > 0:
        for c in classes.tolist():
            holders = [i for i, s in enumerate(sets) if c in s]
            n_c = len(holders)
            if n_c < 2:
                continue
            q = np.mean([per[i][c].size for i in holders])
            share = int(np.floor(overlap * q / (n_c + overlap - n_c * overlap)))
            pool = np.concatenate([per[i][c][:share] for i in holders])
            for i in holders:
                per[i][c] = np.concatenate([per[i][c][share:], pool])
    indices = [rng.permutation(np.concatenate([rows[c] for c in s])).astype(np.int64) for rows, s in zip(per, sets)]
    return indices, [np.array(s, dtype=np.int64) for s in sets]


def dirty_labels(y_client, dirtiness: float, random_state=None, classes=None) -> np.ndarray:
    """Dirty-uniform initial labels (spec §3.8): true classes renamed ``0..K-1`` (sorted), then each
    row independently, with probability ``dirtiness``, moved to a uniformly drawn *other* cluster.

    Parameters
    ----------
    y_client : array-like of shape (n,)
        True classes of one client's rows.
    dirtiness : float in [0, 1]
    random_state : int, Generator or None
    classes : array-like or None
        The client's classes (default: those present in ``y_client``).

    Returns
    -------
    labels : ndarray of shape (n,), int64
        Initial ACC is about ``1 - dirtiness``.
    """
    y_client = np.asarray(y_client)
    if not 0 <= dirtiness <= 1:
        raise ValueError(f"dirtiness must be in [0, 1], got {dirtiness}")
    rng = np.random.default_rng(random_state)
    classes = np.unique(y_client) if classes is None else np.sort(np.asarray(classes))
    lab = np.searchsorted(classes, y_client).astype(np.int64)
    k = classes.size
    if k < 2:
        return lab
    move = rng.random(lab.size) < dirtiness
    lab[move] = (lab[move] + rng.integers(1, k, size=int(move.sum()))) % k
    return lab
