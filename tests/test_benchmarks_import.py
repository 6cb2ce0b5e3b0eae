"""asv discovers benchmarks by importing every module of ``benchmarks/`` as the package
``benchmarks``: each must import that way (a script that only works as ``python
benchmarks/X.py`` breaks ``asv run`` for every suite)."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODULES = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", MODULES)
def test_benchmark_module_imports_as_asv_does(name):
    code = f"import importlib; importlib.import_module('benchmarks.{name}')"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


ASV_PREFIXES = ("time_", "timeraw_", "mem_", "peakmem_", "track_")


@pytest.mark.parametrize("name", MODULES)
def test_no_module_level_helper_looks_like_an_asv_benchmark(name):
    """asv runs every module-level function whose name starts with an asv prefix as a
    benchmark, with no arguments: a script helper named ``time_fit(make, ...)`` made
    ``asv check`` fail for the whole suite."""
    import ast

    tree = ast.parse((ROOT / "benchmarks" / f"{name}.py").read_text())
    bad = [f.name for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith(ASV_PREFIXES)
           and len(f.args.args) > len(f.args.defaults)]
    assert not bad, f"benchmarks/{name}.py: {bad} would be run by asv as benchmarks with no arguments"
