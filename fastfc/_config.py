"""Process-wide switches read once at import time.

``FASTFC_NUMBA_CACHE``
    ``1`` (default) stores compiled Numba kernels on disk next to the package
    (or in ``NUMBA_CACHE_DIR`` when that is set), so a second process does not
    pay JIT time again. ``0`` turns the on-disk cache off.
"""
from __future__ import annotations

import os

__all__ = ["NUMBA_CACHE"]


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() not in {"0", "false", "no", "off"}


NUMBA_CACHE: bool = _env_flag("FASTFC_NUMBA_CACHE", True)
