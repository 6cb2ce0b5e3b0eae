"""The optional extras of pyproject.toml agree with what CI installs and tests (issue 16)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")
specifiers = pytest.importorskip("packaging.specifiers")
requirements = pytest.importorskip("packaging.requirements")


def extras() -> dict[str, list]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {k: [requirements.Requirement(r) for r in v] for k, v in meta["project"]["optional-dependencies"].items()}


def test_flower_extra_admits_the_tested_flwr_only():
    script = (ROOT / ".ci" / "flower_env.sh").read_text(encoding="utf-8")
    tested = re.search(r"^FLWR=(\S+)$", script, re.M).group(1)
    (flwr,) = [r for r in extras()["flower"] if r.name == "flwr"]
    assert flwr.specifier.contains(tested), (str(flwr), tested)
    # the 1.41 command-line tools differ: the extra must not let pip fall back to them
    assert not flwr.specifier.contains("1.41.0")


def test_plot_and_docs_extras():
    ex = extras()
    assert {r.name for r in ex["plot"]} == {"matplotlib"}
    assert {"sphinx", "numpydoc", "sphinx-gallery", "matplotlib"} <= {r.name for r in ex["docs"]}
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert '".[docs,plot]"' in ci and re.search(r"sphinx -W .*-b html docs ", ci)
