"""Compiled numeric kernels of fastfc.

Numeric work only: callers validate their inputs.  Cython extensions
(``_assign``) are built by ``setup.py``; Numba kernels (``_cpl``, ``_feca``) are
JIT-compiled on first use and cached on disk (see :mod:`fastfc._config` and
:mod:`fastfc._kernel_cache`).
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


# before any kernel module is imported: cached kernels of changed sources go (see fastfc._kernel_cache)
from fastfc._kernel_cache import refresh as _refresh_cache  # noqa: E402

_cache_dir = _refresh_cache(__file__)
