"""fastfc's user-facing warnings, attributed to the caller's code rather than to fastfc's internals.

A warning raised deep in a phase (a client's summary, the server's merge) would
point, with a hand-set ``stacklevel``, at whichever fastfc frame happened to be
that many levels up (often ``fastfc/_runners.py``), and the count breaks
whenever a call path changes. :func:`warn_caller` instead walks the stack to
the first frame outside the fastfc package -- the user's line that called
``fit``, ``fit_clients`` or a phase method -- and attributes the warning there
(Python 3.11 has no ``skip_file_prefixes``).

Client phases may run on worker threads (``n_jobs > 1``), whose stacks hold
only the thread pool's frames and fastfc's: :func:`carry_caller` wraps the
worker callable so that its warnings are attributed to the line that started
the fit in the submitting thread, as they are with ``n_jobs=1``.
"""
from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable
from typing import TypeVar

__all__ = ["warn_caller", "carry_caller"]

T = TypeVar("T")

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: per thread: the caller's (filename, lineno, module globals) a worker thread warns at
_origin = threading.local()


def _in_package(frame) -> bool:
    return os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR)


def _caller_location(frame):
    """``(filename, lineno, module_globals)`` of the first frame outside fastfc from ``frame`` outwards."""
    location = getattr(_origin, "location", None)
    if location is not None:
        return location
    while frame is not None and _in_package(frame):
        frame = frame.f_back
    if frame is None:
        return None
    return frame.f_code.co_filename, frame.f_lineno, frame.f_globals


def warn_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """Issue ``warnings.warn(message, category)`` attributed to the first frame outside fastfc.

    On the calling thread this is ``warnings.warn`` with the ``stacklevel`` of
    that frame; on a worker thread started by :func:`carry_caller` the warning
    is attributed (``warnings.warn_explicit``, the same filters, registry and
    ``-W error`` behaviour) to the line that started the work. Only when no
    frame outside fastfc exists (fastfc running itself) does it point at the
    outermost frame.

    Parameters
    ----------
    message : str
    category : Warning subclass, default=UserWarning
    """
    if getattr(_origin, "location", None) is not None:
        filename, lineno, module_globals = _origin.location
        warnings.warn_explicit(
            message, category, filename, lineno, module=module_globals.get("__name__", "<string>"),
            registry=module_globals.setdefault("__warningregistry__", {}), module_globals=module_globals,
        )
        return
    frame, level = sys._getframe(1), 2  # level 1 is this function, 2 its caller
    while frame.f_back is not None and _in_package(frame):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def carry_caller(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` wrapped so that, on whatever thread it runs, :func:`warn_caller` points at the current caller.

    Call it on the thread whose stack holds the user's call (the one that
    submits the work); the wrapper then sets that location for the duration of
    each call, on the thread that runs it.
    """
    location = _caller_location(sys._getframe(1))

    def run(*args, **kwargs):
        previous = getattr(_origin, "location", None)
        _origin.location = location
        try:
            return fn(*args, **kwargs)
        finally:
            _origin.location = previous

    return run
