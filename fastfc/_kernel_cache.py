"""The on-disk Numba cache of :mod:`fastfc._kernels`: a stamp over every kernel source.

Numba checks a cached kernel against its own source file only. A kernel that calls a kernel of
another file (``_kfed`` calls ``_cpl._pw_sum``) would keep the old callee compiled into it after
an upgrade that changed only the callee's file, with the cache of an earlier install
(``fastfc warmup``). :func:`refresh` (run by :mod:`fastfc._kernels` when it is imported, before
any kernel loads) keeps a digest of every kernel source in the cache directory and removes every
cached fastfc kernel there when the digest changed.
"""
from __future__ import annotations

import os

__all__ = ["CACHE_STAMP", "drop_stale_cache", "kernel_cache_dir", "refresh"]

#: name of the file, in the Numba cache directory of the kernels, holding the digest of the kernel sources
CACHE_STAMP = "fastfc-kernels.stamp"


def drop_stale_cache(cache_dir: str, source_dir: str) -> bool:
    """Remove the cached Numba kernels of ``source_dir``'s modules from ``cache_dir`` when any of
    those modules' sources changed since the stamp there was written; then write the stamp.

    With this stamp over every kernel source, any change recompiles them all (see the module's
    docstring for why). Returns whether cache files were removed. Errors (a read-only or missing directory) leave
    the cache as Numba would: nothing is raised.
    """
    import hashlib

    try:
        names = sorted(f for f in os.listdir(source_dir) if f.endswith(".py"))
        digest = hashlib.sha256()
        for name in names:
            with open(os.path.join(source_dir, name), "rb") as fh:
                digest.update(name.encode() + b"\0" + fh.read() + b"\0")
        digest = digest.hexdigest()
        stamp = os.path.join(cache_dir, CACHE_STAMP)
        try:
            with open(stamp) as fh:
                if fh.read().strip() == digest:
                    return False
        except OSError:
            pass
        if not os.path.isdir(cache_dir):
            return False
        modules = tuple(os.path.splitext(n)[0] + "." for n in names)
        removed = False
        for f in os.listdir(cache_dir):
            if f.startswith(modules) and f.endswith((".nbi", ".nbc")):
                try:
                    os.remove(os.path.join(cache_dir, f))
                    removed = True
                except FileNotFoundError:  # another process removed it first
                    pass
        tmp = f"{stamp}.{os.getpid()}"
        with open(tmp, "w") as fh:
            fh.write(digest + "\n")
        os.replace(tmp, stamp)
        return removed
    except OSError:
        return False


def kernel_cache_dir(kernels_file: str) -> str | None:
    """The directory Numba caches the kernels of the package whose ``__init__.py`` is
    ``kernels_file`` in (None: no locator, or caching off)."""
    from fastfc._config import NUMBA_CACHE

    if not NUMBA_CACHE:
        return None
    try:
        from numba.core import config
        from numba.core.caching import CacheImpl

        if getattr(config, "CACHE_LOCATOR_CLASSES", None):  # the user's own locators: Numba's checks only
            return None
        for cls in CacheImpl._locator_classes:  # Numba's own order (the kernels' files share one directory)
            locator = cls.from_function(kernel_cache_dir, kernels_file)
            if locator is not None:
                return locator.get_cache_path()
    except Exception:  # an older or newer Numba without these internals: its own checks only
        return None
    return None


def refresh(kernels_file: str) -> str | None:
    """Apply :func:`drop_stale_cache` to the cache directory of the kernels package whose
    ``__init__.py`` is ``kernels_file``; returns that directory (None: no on-disk cache)."""
    cache_dir = kernel_cache_dir(kernels_file)
    if cache_dir is not None:
        drop_stale_cache(cache_dir, os.path.dirname(kernels_file))
    return cache_dir
