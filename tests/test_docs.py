"""The documentation site (docs/): its commands parse, its numbers come from results files, it builds.

* Every ``fastfc ...`` command in the site's code blocks parses with the CLI's own parser.
* Every ``.. fastfc-results::`` names an existing results file (not ``legacy/``), and the
  directive shows every table row of that file.
* No page states a measured number in its own prose: the numbers are shown from the files.
* ``sphinx-build -W`` (warnings are errors) builds the site with its gallery (slow; CI runs it
  in ``.ci/run``).
"""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
pytestmark = pytest.mark.skipif(not DOCS.is_dir(), reason="no docs/ in this checkout")


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.rst")
                  if not {"_build", "auto_examples", "generated"} & set(p.relative_to(DOCS).parts))


def code_blocks(text: str) -> list[str]:
    """The bodies of the ``.. code-block::`` directives of a reStructuredText page."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].strip().startswith(".. code-block::"):
            indent = len(lines[i]) - len(lines[i].lstrip())
            body = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                body.append(lines[i])
                i += 1
            blocks.append("\n".join(body))
        else:
            i += 1
    return blocks


def shell_commands(block: str) -> list[str]:
    """The ``fastfc ...`` commands of a shell block, ``for VAR in A B; do ... done`` loops unrolled."""
    lines = [ln.split("#")[0].rstrip() for ln in block.replace("\\\n", " ").splitlines()]
    cmds, loop = [], None
    for ln in (ln.strip() for ln in lines):
        m = re.fullmatch(r"for (\w+) in ([^;]+); do", ln)
        if m:
            loop = (m.group(1), m.group(2).split())
        elif ln == "done":
            loop = None
        elif ln.startswith("fastfc "):
            cmds += [ln] if loop is None else [ln.replace("$" + loop[0], v) for v in loop[1]]
    return cmds


def argv_of(cmd: str) -> list[str]:
    """A command's arguments, without the shell's redirections (``> FILE``) and pipes."""
    words = []
    for word in shlex.split(cmd):
        if word in ("|", "&&", ";") or word.startswith((">", "2>", "<")):
            break
        words.append(word)
    return words[1:]


def test_docs_cli_commands_parse():
    from fastfc import cli

    cmds = []
    for page in pages():
        for block in code_blocks(page.read_text(encoding="utf-8")):
            cmds += shell_commands(block)
    assert any(c.startswith("fastfc run") and "--plot" in c for c in cmds)
    assert any(c.startswith("fastfc predict") for c in cmds) and any(c.startswith("fastfc rerun") for c in cmds)
    for cmd in cmds:
        assert "$" not in cmd, f"docs command with an unexpanded variable: {cmd}"
        try:
            args = cli._build_parser().parse_args(argv_of(cmd))
        except SystemExit as exc:
            assert exc.code == 0, f"docs command does not parse: {cmd}"
            continue
        if args.command == "run":  # the method is checked at run time, not by argparse
            from fastfc.experiment import METHODS

            assert args.method in METHODS, f"docs command names no method: {cmd}"


def test_shell_commands_unroll_loops_and_drop_redirections():
    block = "for m in kfed gold; do\n    fastfc run $m --dataset iris --json > $m.json\ndone\nfastfc datasets  # list"
    cmds = shell_commands(block)
    assert cmds == ["fastfc run kfed --dataset iris --json > kfed.json", "fastfc run gold --dataset iris --json > gold.json",
                    "fastfc datasets"]
    assert argv_of(cmds[0]) == ["run", "kfed", "--dataset", "iris", "--json"]


def _cited() -> list[tuple[Path, str]]:
    return [(page, ref) for page in pages()
            for ref in re.findall(r"^\s*\.\. fastfc-results::\s*(\S+)", page.read_text(encoding="utf-8"), re.M)]


def test_results_directives_name_existing_files_and_show_every_row():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        from fastfc_results import markdown_to_rst
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    cited = _cited()
    assert len({ref for _, ref in cited}) >= 15
    for page, ref in cited:
        path = ROOT / ref
        assert ref.startswith("benchmarks/results/") and "legacy" not in ref, f"{page.name}: {ref}"
        assert path.is_file(), f"{page.name} cites {ref}, which does not exist"
        md = path.read_text(encoding="utf-8")
        md_rows = [ln for ln in md.splitlines() if ln.startswith("|") and not set(ln) <= set("|-: ")]
        rst = markdown_to_rst(md, ref)
        assert sum(ln.startswith("   * - ") for ln in rst) == len(md_rows), ref
        # every cell survives (escaped for reStructuredText)
        for row in md_rows[:3]:
            for cell in (c.strip() for c in row.strip().strip("|").split("|")):
                plain = cell.replace("\\", "")
                assert any(plain in ln.replace("\\", "") for ln in rst), (ref, cell)


#: a measured number: a time, a speed-up, a percentage, or a score next to its metric (as tests/test_readme.py)
MEASURED = re.compile(
    r"\d(?:[\d.,]*\d)?\s*(?:×|ms\b|s\b(?![-\w])|%)"
    r"|(?:ARI|NMI|F|Purity)\b[^.;:]{0,25}?[−+-]?\d\.\d{2}"
    r"|[−+-]\d\.\d{2,}"
)


def test_pages_state_no_measured_number_of_their_own():
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for block in code_blocks(text):
            text = text.replace(block, "")
        hits = MEASURED.findall(text)
        assert not hits, f"{page.relative_to(ROOT)} states measured numbers {hits}: show them with .. fastfc-results::"


@pytest.mark.slow
def test_sphinx_build_warnings_are_errors(tmp_path):
    for mod in ("sphinx", "numpydoc", "sphinx_gallery", "matplotlib"):
        pytest.importorskip(mod)
    out = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(DOCS), str(tmp_path / "html")],
                         cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stderr[-4000:]
    html = tmp_path / "html"
    assert (html / "api" / "plotting.html").is_file()
    figures = sorted((html / "_images").glob("sphx_glr_plot_*.png"))
    assert len(figures) >= 8, figures
    page = (html / "user_guide" / "kfed.html").read_text(encoding="utf-8")
    assert "compare_kfed_default.md" in page and "<table" in page
