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
