"""Where the shared data lives, for the benchmarks that read it (``../shared`` beside the repo)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

#: the workspace's shared folder (datasets, reference results); ``FASTFC_SHARED`` overrides it
SHARED = Path(os.environ.get("FASTFC_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
#: Fashion-MNIST's IDX files: ``FASTFC_FASHION_MNIST``, else ``SHARED / "datasets" / "fashion_mnist"``
FASHION_MNIST = os.environ.get("FASTFC_FASHION_MNIST", str(SHARED / "datasets" / "fashion_mnist"))


def parse_seeds(text: str) -> list[int]:
    """Seeds from ``"0-9"``, ``"0,3,5"`` or a mix of both.

    Parameters
    ----------
    text : str
        Comma-separated seeds or inclusive ranges ``lo-hi``.

    Returns
    -------
    list of int
        The seeds, in the order given.
    """
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def load_published_split(split: str) -> tuple[list[np.ndarray], int]:
    """One of the authors' 8-client splits.

    Parameters
    ----------
    split : str
        Split name in ``shared/datasets/fedhire_splits`` (``"US"``, ..., ``"LE"``).

    Returns
    -------
    X_clients : list of ndarray
        The clients' matrices.
    n_classes : int
        Number of classes of the split.

    Raises
    ------
    NotImplementedError
        When the data is not there (asv's "skip this benchmark").
    """
    from fastfc.datasets import load_client_npz

    path = SHARED / "datasets" / "fedhire_splits" / f"{split}.npz"
    if not path.exists():
        raise NotImplementedError(f"{path} not found")
    X_clients, y_clients = load_client_npz(str(path))
    return X_clients, int(np.unique(np.concatenate(y_clients)).size)


def proc_status(field: str) -> int:
    """A ``/proc/self/status`` memory field of this process in bytes (``VmRSS``, ``VmHWM``)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak_rss() -> None:
    """Reset this process's resident-set high-water mark (``VmHWM``) to its current size (Linux)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def add_checkout_args(ap) -> None:
    """The ``--old``, ``--old-label`` and ``--new`` options of a script that times two checkouts side by
    side with :func:`checkout_workers` (``ap``: an ``argparse.ArgumentParser``)."""
    ap.add_argument("--old", required=True, help="root of the old checkout (extensions built in place)")
    ap.add_argument("--old-label", default="old", help="what the old checkout is (e.g. its revision)")
    ap.add_argument("--new", default=".", help="root of the new checkout")


@contextmanager
def checkout_workers(old: str, new: str, worker: str):
    """One worker process per checkout, for timing two checkouts side by side.

    Parameters
    ----------
    old, new : str
        Roots of the two checkouts (extensions built in place).
    worker : str
        Python source each process runs (``python -c``) from its checkout's root, with that root as
        ``PYTHONPATH``: it answers every request line on stdin with one JSON line on stdout.

    Yields
    ------
    trees : dict
        ``{"old": root, "new": root}`` (resolved paths).
    ask : callable
        ``ask(request, rounds)`` sends the request line to both workers ``rounds`` times, old first in even
        rounds and new first in odd ones (the order swapped every round), and returns
        ``{"old": [answer, ...], "new": [answer, ...]}`` (the decoded JSON answers, in round order).
    """
    trees = {"old": str(Path(old).resolve()), "new": str(Path(new).resolve())}
    procs = {
        name: subprocess.Popen([sys.executable, "-c", worker], cwd=tree, env={**os.environ, "PYTHONPATH": tree},
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for name, tree in trees.items()
    }

    def ask(request: str, rounds: int) -> dict[str, list]:
        got: dict[str, list] = {"old": [], "new": []}
        for r in range(rounds):
            for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
                procs[name].stdin.write(f"{request}\n")
                procs[name].stdin.flush()
                got[name].append(json.loads(procs[name].stdout.readline()))
        return got

    try:
        yield trees, ask
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait()
