"""The documentation's walkthrough, run as written in a fresh virtual environment (issue 16).

The code blocks of ``docs/install.rst`` and then ``docs/quickstart.rst`` that carry
``:class: fastfc-walkthrough`` are the steps a new user follows: create a venv and
``pip install "./fastfc[plot]"`` from a clone, write a CSV file with a client column, run every
method on it with ``--save``/``--json``/``--plot``, ``fastfc rerun``, ``fastfc predict`` each
saved model in a new process, fit/save/load/predict from Python, and plot. The Python blocks
are written to the files their ``:caption:`` names; the bash blocks run in order in one bash
session (``set -euo pipefail``) in a temporary directory that holds a copy of this checkout's
files as ``./fastfc`` (``git ls-files``: tracked and new, not ignored ones), so the install
builds the Cython kernels from source as a user's would.

Slow (it builds a venv and compiles fastfc; a few minutes): ``pytest -m slow tests/test_walkthrough.py``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = ("install.rst", "quickstart.rst")  # in the order a user reads them
MARK = "fastfc-walkthrough"
METHODS = ("kfed", "fedhire", "gold", "feca", "fedkstarhc", "fedkmeans", "fedcref")
CENTRES = ("KFed", "FedHIRE", "GOLD", "FeCA", "FedKStarHC", "FedKMeans")

pytestmark = pytest.mark.skipif(not DOCS.is_dir(), reason="no docs/ in this checkout")


def walkthrough_blocks() -> list[tuple[str, str | None, str]]:
    """``(language, caption, code)`` of every marked block of :data:`PAGES`, in reading order."""
    blocks = []
    for page in PAGES:
        lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            m = re.match(r"^(\s*)\.\. code-block::\s*(\S+)", lines[i])
            if not m:
                i += 1
                continue
            indent, lang = len(m.group(1)), m.group(2)
            i += 1
            options = {}
            while i < len(lines) and re.match(r"^\s+:(\w+):\s*(.*)$", lines[i]):
                key, value = re.match(r"^\s+:(\w+):\s*(.*)$", lines[i]).groups()
                options[key] = value.strip()
                i += 1
            body = []
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                body.append(lines[i])
                i += 1
            if MARK in options.get("class", "").split():
                text = "\n".join(body).strip("\n")
                strip = min(len(ln) - len(ln.lstrip()) for ln in text.splitlines() if ln.strip())
                code = "\n".join(ln[strip:] for ln in text.splitlines()) + "\n"
                blocks.append((lang, options.get("caption"), code))
    return blocks


def test_walkthrough_blocks_cover_the_issue_steps():
    """Fast check of the marked blocks: every step of issue 16's acceptance is in them."""
    blocks = walkthrough_blocks()
    assert blocks and blocks[0][0] == "bash"
    assert all(lang in ("bash", "python") for lang, _, _ in blocks)
    assert all(cap and cap.endswith(".py") for lang, cap, _ in blocks if lang == "python")
    shell = "\n".join(code for lang, _, code in blocks if lang == "bash")
    python = "\n".join(code for lang, _, code in blocks if lang == "python")
    assert "python3 -m venv" in shell and 'pip install "./fastfc[plot]"' in shell
    assert "--client-column" in shell and "--save" in shell and "--plot" in shell
    assert "fastfc predict" in shell and "fastfc rerun" in shell
    assert re.search(r"for method in " + " ".join(METHODS) + r"; do", shell), "every method, on the CSV file"
    assert "fastfc.load(" in python and ".save(" in python and "plot_run(" in python
    for lang, cap, _ in blocks:  # every Python file the walkthrough writes is run by a bash step
        if lang == "python":
            assert f"python {cap}" in shell, cap


def _copy_checkout(dest: Path) -> None:
    """This checkout's files as a user's clone would have them (tracked and new files, no build output)."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    for rel in filter(None, out.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


@pytest.mark.slow
def test_walkthrough_runs_as_written_in_a_fresh_venv(tmp_path):
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    work = tmp_path / "walk"
    work.mkdir()
    _copy_checkout(work / "fastfc")
    blocks = walkthrough_blocks()
    script = ["set -euo pipefail"]
    for lang, caption, code in blocks:
        if lang == "python":
            (work / caption).write_text(code, encoding="utf-8")
        else:
            script.append(code)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(MPLBACKEND="Agg", PIP_DISABLE_PIP_VERSION_CHECK="1")
    # the system interpreter that runs this test makes the venv (``python3 -m venv``)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    (work / "walkthrough.sh").write_text("\n".join(script) + "\n", encoding="utf-8")
    done = subprocess.run(["bash", "walkthrough.sh"], cwd=work, env=env, capture_output=True, text=True,
                          timeout=3600)
    assert done.returncode == 0, f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-6000:]}"

    # the venv's fastfc was used, not this checkout's
    venv_py = work / "fastfc-env" / "bin" / "python"
    where = subprocess.run([str(venv_py), "-c", "import fastfc; print(fastfc.__file__)"], cwd="/", env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert "site-packages" in where and str(ROOT) not in where, where

    n_rows = sum(1 for _ in open(work / "vehicles.csv", encoding="utf-8")) - 1
    assert n_rows > 100
    for method in METHODS:
        assert (work / f"{method}.ffc").stat().st_size > 0, method
        report = json.loads((work / f"{method}.json").read_text(encoding="utf-8"))
        assert report["method"] == method and report["split"] is None
        assert len(report["clients"]) == 4 and sum(c["rows"] for c in report["clients"]) == n_rows
        assert report["source"]["client_column"] == "site" and report["source"]["label_column"] == "kind"
    assert "labels identical" in done.stdout  # fastfc rerun gold.json
    for method in METHODS[:-1]:  # FedCRef keeps no global centres to predict with
        labels = np.loadtxt(work / f"{method}-labels.txt", dtype=np.int64)
        report = json.loads((work / f"{method}.json").read_text(encoding="utf-8"))
        assert labels.shape == (n_rows,) and labels.min() >= 0 and labels.max() < report["n_clusters"], method
    # predict.py asserted, in a new process, that each loaded model predicts what it did before saving
    for name in CENTRES:
        assert f"{name} loaded: same predictions for {n_rows} rows" in done.stdout, name
        # and `fastfc predict` on the Python-saved file agrees with the fitting process's predictions
        out = subprocess.run([str(work / "fastfc-env" / "bin" / "fastfc"), "predict", f"{name}.ffc", "--data",
                              "vehicles.csv", "--client-column", "site", "--label-column", "kind"],
                             cwd=work, env=env, capture_output=True, text=True, check=True).stdout
        assert np.array_equal(np.array(out.split(), dtype=np.int64), np.load(work / f"{name}-before.npy")), name
    for png in ("kfed.png", "fedhire.png", "gold.png"):
        data = (work / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, (png, len(data))
