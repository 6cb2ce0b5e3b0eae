"""The kernels' OpenMP runtime is loaded with a short spin (issue 15): ``GOMP_SPINCOUNT`` is set
only while libgomp loads, never left in the environment, and never overrides the user's own
``OMP_WAIT_POLICY`` / ``GOMP_SPINCOUNT``."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import os, sys
import fastfc._kernels as k
# libgomp has been loaded by the import (through _assign); report what it saw and what is left
print('fastfc._kernels._assign' in sys.modules, os.environ.get('GOMP_SPINCOUNT'), k.OPENMP_SPIN_COUNT)
"""


def _run(env_extra):
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_spin_count_not_left_in_the_environment():
    """Importing the kernels loads the runtime and leaves no ``GOMP_SPINCOUNT`` behind."""
    loaded, left, count = _run({})
    assert loaded == "True"
    assert left == "None"
    assert int(count) > 0


@pytest.mark.parametrize("var,value", [("GOMP_SPINCOUNT", "123"), ("OMP_WAIT_POLICY", "active")])
def test_user_setting_is_kept(var, value):
    """A user's own setting stays as it was (and no spin count is added beside it)."""
    env_out = subprocess.run(
        [sys.executable, "-c", "import os, fastfc._kernels; print(os.environ.get('GOMP_SPINCOUNT'), "
                               "os.environ.get('OMP_WAIT_POLICY'))"],
        env={**{k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")},
             var: value, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")},
        capture_output=True, text=True, check=True,
    ).stdout.split()
    expect = [value, "None"] if var == "GOMP_SPINCOUNT" else ["None", value]
    assert env_out == expect


def test_spin_count_reaches_the_runtime(monkeypatch):
    """The loader sets the variable exactly while it imports ``_assign`` (which loads libgomp)."""
    import builtins

    import fastfc._kernels as kernels

    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    seen = []
    orig = builtins.__import__

    def spy(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 1 and fromlist and "_assign" in fromlist:
            seen.append(os.environ.get("GOMP_SPINCOUNT"))
        return orig(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", spy)
    kernels._load_openmp_runtime()
    monkeypatch.setattr(builtins, "__import__", orig)
    assert seen == [str(kernels.OPENMP_SPIN_COUNT)]
    assert "GOMP_SPINCOUNT" not in os.environ
