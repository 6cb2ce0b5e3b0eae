"""``fastfc warmup`` compiles every kernel into the configured Numba cache, and a later process
then fits every method without compiling anything (issue 15, cold start)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_FIT_ALL = """
import json, sys
import fastfc
from fastfc.warmup import _clients, numba_dispatchers
for name, kw, unit in [("KFed", dict(n_clusters=2, refine_rounds=2), False), ("FeCA", dict(n_clusters=2), False),
                       ("FedHIRE", dict(n_clusters=2), False), ("GOLD", dict(n_clusters=2), False),
                       ("FedKMeans", dict(n_clusters=2), False),
                       ("FedCRef", dict(n_local_clusters=2, hidden_layer_sizes=(4,), local_epochs=1, fl_rounds=1,
                                        fl_epochs=1, fl_first_epochs=1, max_iter=1, min_assoc_size=1), True)]:
    getattr(fastfc, name)(random_state=1, **kw).fit_clients(_clients("float64", unit))
ds = numba_dispatchers()
print(json.dumps(dict(compiled=sum(sum(d._cache_misses.values()) for d in ds),
                      loaded=sum(sum(d._cache_hits.values()) for d in ds))))
"""


@pytest.mark.slow
def test_warmup_fills_the_cache_and_a_later_fit_compiles_nothing(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    env.pop("FASTFC_NUMBA_CACHE", None)
    out = subprocess.run([sys.executable, "-m", "fastfc", "warmup", "--quiet", "--json", "--dtype", "float64"],
                         env=env, cwd=str(REPO), capture_output=True, text=True, check=True)
    info = json.loads(out.stdout)
    assert info["compiled"] > 0  # the cache was empty
    assert info["unwarmed"] == []  # every public kernel a fit can call, large-input-only ones included
    assert info["cache_dirs"] and all(d.startswith(str(tmp_path / "cache")) for d in info["cache_dirs"])
    assert any(p.suffix == ".nbi" for p in (tmp_path / "cache").rglob("*"))
    fit = subprocess.run([sys.executable, "-c", _FIT_ALL], env=env, cwd=str(REPO), capture_output=True, text=True,
                         check=True)
    stats = json.loads(fit.stdout.strip().splitlines()[-1])
    assert stats["compiled"] == 0, stats
    assert stats["loaded"] > 0


def test_every_kernel_module_is_counted():
    """The warm-up's bookkeeping sees the kernels of every plain-Python kernel module, k-FED's and
    FeCA's piece merging included (they were missed before), each once."""
    from fastfc._kernels import _kfed, _pieces
    from fastfc.warmup import numba_dispatchers

    names = {f"{d.py_func.__module__}.{d.py_func.__name__}" for d in numba_dispatchers()}
    assert len(names) == len(numba_dispatchers())
    assert f"{_kfed.__name__}.proximity_sums" in names
    assert f"{_pieces.__name__}.pair_window_counts_from_products" in names
    assert {d.py_func.__module__ for d in numba_dispatchers()} == {
        "fastfc._kernels._cpl", "fastfc._kernels._fastexp", "fastfc._kernels._feca", "fastfc._kernels._fedcref",
        "fastfc._kernels._kfed", "fastfc._kernels._pieces"}


def test_a_changed_kernel_source_drops_every_cached_kernel(tmp_path):
    """Numba checks a cached kernel against its own file only, and k-FED's kernels call one of
    _cpl's: after any kernel source changes, the cached kernels of every kernel module are removed
    (other files in the cache directory are kept), and with unchanged sources nothing is."""
    import shutil

    from fastfc import _kernel_cache as KC
    from fastfc import _kernels as K

    src = tmp_path / "src"
    shutil.copytree(Path(K.__file__).parent, src, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c"))
    cache = tmp_path / "cache"
    cache.mkdir()

    def cached(*names):
        for n in names:
            (cache / n).write_bytes(b"x")

    cached("_kfed.proximity_sums-40.py311.nbi", "_cpl._pw_sum-275.py311.nbc", "user_module.f-3.py311.nbi")
    assert KC.drop_stale_cache(str(cache), str(src))  # no stamp yet: an earlier install's cache goes
    assert sorted(p.name for p in cache.iterdir()) == [KC.CACHE_STAMP, "user_module.f-3.py311.nbi"]

    cached("_kfed.proximity_sums-40.py311.nbi")
    assert not KC.drop_stale_cache(str(cache), str(src))  # same sources: kept
    assert (cache / "_kfed.proximity_sums-40.py311.nbi").exists()

    (src / "_cpl.py").write_text((src / "_cpl.py").read_text() + "\n# changed\n")  # only the callee's file
    assert KC.drop_stale_cache(str(cache), str(src))
    assert not (cache / "_kfed.proximity_sums-40.py311.nbi").exists()  # the caller's cache went too
    assert (cache / "user_module.f-3.py311.nbi").exists()
    assert not KC.drop_stale_cache(str(tmp_path / "missing"), str(src))  # no directory: nothing raised


def test_the_stamp_sits_where_numba_caches_the_kernels():
    """The stamp's directory is the one Numba's own locator picked for the kernels."""
    from fastfc import _kernel_cache as KC
    from fastfc import _kernels as K
    from fastfc._config import NUMBA_CACHE
    from fastfc._kernels import _kfed

    if not NUMBA_CACHE:
        pytest.skip("FASTFC_NUMBA_CACHE=0: no on-disk cache")
    assert K._cache_dir is not None
    assert os.path.samefile(_kfed.proximity_sums._cache.cache_path, K._cache_dir)
    assert (Path(K._cache_dir) / KC.CACHE_STAMP).exists()
