"""The fuzz harness shared by the reader fuzz tests (``test_protocol_fuzz.py``, ``test_saving.py``).

A fuzz case is a valid encoding damaged by a list of mutations, each a pair
``(kind, fn)``: ``("bytes", fn)`` edits the raw bytes (:data:`truncation`,
:data:`byte_flip`); any other kind is a structured edit that the test's own
``edit`` callback applies to the decoded container (a message's header or
payload, a model file's members), often a random JSON edit
(:func:`json_edit`). The property (:func:`reads_or_rejects`) is every
reader's contract: it returns a result, which the test checks, or raises the
reader's one error type -- and does either within :data:`READ_BUDGET`.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

#: CPU seconds of this process any one read may take, the check included (a real read takes well under
#: 10 ms); CPU, not wall time, so that other load on a shared machine does not count (a wall-clock budget
#: failed once at load 10 with nothing wrong)
READ_BUDGET = 2.0


def fuzz_settings(max_examples: int):
    """Hypothesis settings of a fuzz test: ``max_examples`` cases, no deadline (a shared machine)."""
    return settings(max_examples=max_examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def json_values(scalars, *, keys=st.text(max_size=4), max_leaves: int = 6):
    """JSON values: ``scalars``, and lists and objects (keys from ``keys``) of them, nested."""
    return st.recursive(
        scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
        max_leaves=max_leaves)


def json_paths(node, prefix=()):
    """Every (container, key) path of a parsed JSON document."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        yield prefix + (key,)
        yield from json_paths(child, prefix + (key,))


@st.composite
def json_edit(draw, values):
    """An in-place edit of a parsed JSON document: set, delete or add one entry anywhere to a value of ``values``.

    A document without entries is left as it is.
    """
    choice, value, new_key = draw(st.integers(0, 10**6)), draw(values), draw(st.text(max_size=6))
    op = draw(st.sampled_from(["set", "delete", "add"]))

    def apply(doc) -> None:
        paths = list(json_paths(doc))
        if not paths:
            return
        *parent_path, key = paths[choice % len(paths)]
        parent = doc
        for k in parent_path:
            parent = parent[k]
        if op == "set":
            parent[key] = value
        elif op == "delete":
            del parent[key]
        elif isinstance(parent, dict):
            parent[new_key] = value
        else:
            parent.append(value)

    return apply


def _flip(pos: int, mask: int):
    def apply(data: bytes) -> bytes:
        if not data:
            return data
        i = pos % len(data)
        return data[:i] + bytes([data[i] ^ mask]) + data[i + 1:]

    return ("bytes", apply)


#: cut the bytes anywhere (to nothing, or not at all)
truncation = st.builds(lambda n: ("bytes", lambda data: data[:n % (len(data) + 1)]), st.integers(0, 10**6))
#: XOR one byte anywhere with a non-zero mask
byte_flip = st.builds(_flip, st.integers(0, 10**6), st.integers(1, 255))


def apply_mutations(data: bytes, mutations, edit: Callable[[bytes, str, Callable], bytes]) -> bytes:
    """``data`` after each mutation in turn.

    ``"bytes"`` mutations edit the raw bytes; any other is passed to
    ``edit(data, kind, fn)``, which returns the re-encoded bytes, or ``data``
    itself when an earlier mutation broke the framing or the edit does not apply.
    """
    for kind, fn in mutations:
        data = fn(data) if kind == "bytes" else edit(data, kind, fn)
    return data


def reads_or_rejects(data: bytes, readers: Iterable[Callable], error: type[Exception],
                     check: Callable[[Callable, object], None]) -> None:
    """The property: each reader returns a result passing ``check(reader, result)`` or raises ``error``.

    Either way within :data:`READ_BUDGET` CPU seconds, the check included; any other
    exception fails the test.
    """
    for read in readers:
        start = time.process_time()
        try:
            out = read(data)
        except error:
            pass
        else:
            check(read, out)
        assert time.process_time() - start < READ_BUDGET, read
