"""Compiled numeric kernels of fastfc.

Numeric work only: callers validate their inputs.  Cython extensions
(``_assign``) are built by ``setup.py``; Numba kernels (``_cpl``, ``_feca``) are
JIT-compiled on first use and cached on disk (see :mod:`fastfc._config`).
"""
from __future__ import annotations

import os

#: iterations an idle OpenMP (libgomp) thread spins before it sleeps, when the user set neither
#: ``OMP_WAIT_POLICY`` nor ``GOMP_SPINCOUNT`` (libgomp's own default is 300,000: 5-20 ms on this
#: project's 2-core machine, spent after every parallel region). With one client and ``n_jobs=2``
#: the kernels' second thread then spun through the client's serial sections and shared its core
#: with everything else that ran there -- the Python worker threads of the elementwise passes
#: (:func:`fastfc._units._run_parts`), other processes -- so the other half of that work ran at half
#: speed while the calling thread waited: KFed at 10^5 x 50 took 0.79x the one-thread wall time with
#: 26 % more process CPU (issue 15). 20,000 iterations (about 0.5 ms) still bridge the short Python
#: steps between a loop's parallel regions (a Lloyd iteration's), and the thread sleeps through
#: longer serial sections.
OPENMP_SPIN_COUNT = 20_000


def _load_openmp_runtime() -> None:
    """Load the kernels' OpenMP runtime (through :mod:`._assign`, linked to it) with
    ``GOMP_SPINCOUNT=OPENMP_SPIN_COUNT`` in the environment, then restore the environment.

    libgomp reads its settings once, when it is loaded; the variable is set only for that moment
    (so neither the rest of the process nor child processes see it), and never when the user set
    ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` (theirs then holds). When another library loaded
    the same runtime earlier, its settings stay (nothing changes).
    """
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        from . import _assign  # noqa: F401
        return
    os.environ["GOMP_SPINCOUNT"] = str(OPENMP_SPIN_COUNT)
    try:
        from . import _assign  # noqa: F401  (loads libgomp, which reads GOMP_SPINCOUNT now)
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)


_load_openmp_runtime()


#: name of the file, in the Numba cache directory of the kernels, holding the digest of the kernel sources
CACHE_STAMP = "fastfc-kernels.stamp"


def drop_stale_cache(cache_dir: str, source_dir: str) -> bool:
    """Remove the cached Numba kernels of ``source_dir``'s modules from ``cache_dir`` when any of
    those modules' sources changed since the stamp there was written; then write the stamp.

    Numba checks a cached kernel against its own source file only. A kernel that calls a kernel
    of another file (``_kfed`` calls ``_cpl._pw_sum``) would keep the old callee compiled into it
    after an upgrade that changed only the callee's file, with the cache of an earlier install
    (``fastfc warmup``). With this stamp over every kernel source, any change recompiles them all.
    Returns whether cache files were removed. Errors (a read-only or missing directory) leave
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


def _kernel_cache_dir() -> str | None:
    """The directory Numba caches this package's kernels in (None: no locator, or caching off)."""
    from fastfc._config import NUMBA_CACHE

    if not NUMBA_CACHE:
        return None
    try:
        from numba.core import config
        from numba.core.caching import CacheImpl

        if getattr(config, "CACHE_LOCATOR_CLASSES", None):  # the user's own locators: Numba's checks only
            return None
        for cls in CacheImpl._locator_classes:  # Numba's own order (the kernels' files share one directory)
            locator = cls.from_function(_kernel_cache_dir, __file__)
            if locator is not None:
                return locator.get_cache_path()
    except Exception:  # an older or newer Numba without these internals: its own checks only
        return None
    return None


_cache_dir = _kernel_cache_dir()
if _cache_dir is not None:
    drop_stale_cache(_cache_dir, os.path.dirname(__file__))
