"""Compile and cache every Numba kernel of the installed fastfc ahead of the first real fit.

fastfc's Numba kernels are compiled on first use and cached on disk (see
:mod:`fastfc._config`): next to the installed package, or in ``NUMBA_CACHE_DIR`` when that
is set, or in Numba's per-user cache directory when the package directory is read-only. On
a fresh install or a fresh node the first fit of a method pays that compilation;
:func:`warmup` (the ``fastfc warmup`` command) pays it once, at install or node start, by
running one tiny fit of every estimator in every configuration that reaches different
kernels, for float64 and float32 input, so that the first real fit only loads the cache.

Run it as the same user, with the same ``NUMBA_CACHE_DIR``, as the processes that will fit
(Flower SuperNodes, workers): the cache is found by the package's path and that setting.
"""
from __future__ import annotations

import sys
import time

import numpy as np

__all__ = ["warmup", "numba_dispatchers", "unwarmed_kernels"]

#: public kernels no fit calls: the tested reference of a faster path, or a probe's building block
_REFERENCE_ONLY = frozenset({"fastfc._kernels._feca.kmeans_plusplus", "fastfc._kernels._fedcref.association_score",
                             "fastfc._kernels._fedcref.ratio_score"})

#: the fits :func:`warmup` runs: (estimator name, keyword arguments, data in [0, 1])
_FITS: tuple[tuple[str, dict, bool], ...] = (
    ("KFed", dict(n_clusters=2), False),
    ("KFed", dict(n_clusters=2, refine_rounds=2), False),
    ("FeCA", dict(n_clusters=2), False),
    ("FeCA", dict(n_clusters=2, radius="theoretical"), False),
    ("FedHIRE", dict(n_clusters=2), False),
    ("FedHIRE", dict(n_clusters=2, semantics="reference"), False),
    ("GOLD", dict(n_clusters=2), False),
    ("GOLD", dict(n_clusters=2, semantics="reference"), False),
    ("FedKStarHC", dict(n_clusters=2), False),
    ("FedKStarHC", dict(n_clusters=None), False),
    ("FedKMeans", dict(n_clusters=2), False),
    ("FedCRef", dict(n_local_clusters=2, hidden_layer_sizes=(4,), local_epochs=1, fl_rounds=1, fl_epochs=1,
                     fl_first_epochs=1, max_iter=1, min_assoc_size=1), True),
)


def _kernel_modules() -> list:
    """Every module of :mod:`fastfc._kernels` that is plain Python (the Numba kernels' homes), imported."""
    import importlib
    import pkgutil

    from . import _kernels

    return [importlib.import_module(f"{_kernels.__name__}.{m.name}")
            for m in sorted(pkgutil.iter_modules(_kernels.__path__), key=lambda m: m.name)
            if m.module_finder.find_spec(m.name).origin.endswith(".py")]


def numba_dispatchers() -> list:
    """Every Numba dispatcher defined in fastfc's kernel modules (importing them).

    Returns
    -------
    list of numba dispatchers
        In module order, each once (a module's re-export of another module's kernel is not
        counted twice).
    """
    from numba.core.registry import CPUDispatcher

    out, seen = [], set()
    for mod in _kernel_modules():
        for obj in vars(mod).values():
            if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == mod.__name__ and id(obj) not in seen:
                seen.add(id(obj))
                out.append(obj)
    return out


def unwarmed_kernels() -> list[str]:
    """Public kernels (no leading underscore) that have no compiled specialisation in this process.

    After :func:`warmup` this is empty: every kernel a fit can call was compiled or loaded
    (helpers with a leading underscore, and ``inline="always"`` ones such as
    :func:`fastfc._kernels._fastexp.exp_nonpos`, are compiled inside their callers). Kernels kept
    only as the tested reference of a faster path are not listed.

    Returns
    -------
    list of str
        Dotted names, ``module.kernel``.
    """
    out = []
    for disp in numba_dispatchers():
        name = f"{disp.py_func.__module__}.{disp.py_func.__name__}"
        inline_only = disp.targetoptions.get("inline") == "always"
        if (not disp.py_func.__name__.startswith("_") and not inline_only and not disp.signatures
                and name not in _REFERENCE_ONLY):
            out.append(name)
    return out


def _warm_large_input_kernels() -> None:
    """Compile the kernels that fits reach only on large inputs or rare paths, by calling them on tiny arrays.

    :func:`fastfc._kernels._cpl.col_moments`, :func:`~fastfc._kernels._cpl.shift_scale_rows`,
    :func:`~fastfc._kernels._cpl.col_sums_rows`, :func:`~fastfc._kernels._cpl.col_sqdev_rows` and
    :func:`~fastfc._kernels._cpl.shift_weight_rows` (federated units and feature moments of large clients) and
    :func:`fastfc._kernels._pieces.pair_window_counts_from_products` (FeCA's piece merging of
    clients of 8192 rows or more) take float64 whatever the input dtype. k-FED's one-start
    seeding and proximity kernels (:mod:`fastfc._kernels._kfed`) run only where the compiled
    all-starts call does not (a start whose seeding runs out of mass on duplicate rows, more than
    128 projected dimensions): one start of :func:`fastfc.kfed._start_init` compiles them.
    """
    from ._kernels._cpl import col_moments, col_sqdev_rows, col_sums_rows, shift_scale_rows, shift_weight_rows
    from ._kernels._pieces import pair_window_counts_from_products
    from .kfed import _start_init

    _start_init(np.ascontiguousarray(np.arange(18.0).reshape(6, 3) % 5), np.eye(3), 2, np.random.default_rng(0))

    X = np.arange(12.0).reshape(4, 3)
    mean, var = np.empty(3), np.empty(3)
    col_moments(X, mean, var)
    shift_scale_rows(X, mean, np.ones(3), np.empty_like(X))
    col_sums_rows(X, 0, 2, mean)  # the two-half moments of large clients (fastfc._units.col_moments_split)
    col_sqdev_rows(X, mean, 2, 4, var)
    shift_weight_rows(X, mean, np.ones(3), np.empty_like(X), 0, 4)  # FeatureScaler.transform of large clients
    C = X[:2].copy()
    cc = C @ C.T
    length2 = np.ones((2, 2))
    pair_window_counts_from_products(X @ C.T, np.array([0, 1, 0, 1], dtype=np.int64), cc, length2, 0.1,
                                     np.zeros((2, 2, 3), dtype=np.int64))


def _clients(dtype, unit: bool) -> list[np.ndarray]:
    """Three clients of 40 rows in 3 features around two well separated centres."""
    rng = np.random.default_rng(0)
    Xc = [rng.normal(size=(40, 3)) + 6.0 * (rng.integers(0, 2, size=(40, 1))) for _ in range(3)]
    if unit:
        Xc = [(x - x.min()) / (x.max() - x.min()) for x in Xc]
    return [np.ascontiguousarray(x, dtype=dtype) for x in Xc]


def warmup(dtypes=("float64", "float32"), *, stream=None) -> dict:
    """Compile (or load from the cache) every Numba kernel a fit of any fastfc method uses.

    Parameters
    ----------
    dtypes : sequence of str, default=("float64", "float32")
        Input dtypes to warm: each estimator's kernels are specialised on the dtype it
        computes in.
    stream : text stream, optional
        Where to write one progress line per fit (nothing when ``None``).

    Returns
    -------
    dict
        ``seconds`` (float, the whole warm-up), ``compiled`` (int, kernel specialisations
        compiled in this process; 0 when the cache was already warm), ``loaded`` (int,
        specialisations loaded from the cache), ``fits`` (int), ``cache_dirs``
        (sorted list of str: where Numba keeps these kernels' cache files) and ``unwarmed``
        (list of str, :func:`unwarmed_kernels`: empty unless a kernel was missed).
    """
    import fastfc

    t0 = time.perf_counter()
    fits = 0
    for name, params, unit in _FITS:
        for dtype in dtypes:
            t = time.perf_counter()
            getattr(fastfc, name)(random_state=0, n_jobs=1, **params).fit_clients(_clients(dtype, unit))
            fits += 1
            if stream is not None:
                args = ", ".join(f"{k}={v!r}" for k, v in params.items())
                stream.write(f"warmup: {name}({args}) {dtype}: {time.perf_counter() - t:.1f} s\n")
                stream.flush()
    _warm_large_input_kernels()
    compiled = loaded = 0
    dirs = set()
    for disp in numba_dispatchers():
        compiled += sum(disp._cache_misses.values())
        loaded += sum(disp._cache_hits.values())
        cache = getattr(disp, "_cache", None)
        path = getattr(cache, "cache_path", None)
        if path and disp.signatures:
            dirs.add(str(path))
    return dict(seconds=time.perf_counter() - t0, compiled=int(compiled), loaded=int(loaded), fits=fits,
                cache_dirs=sorted(dirs), unwarmed=unwarmed_kernels())


if __name__ == "__main__":  # pragma: no cover
    info = warmup(stream=sys.stderr)
    print(info)
