"""The README runs as written and its numbers come from committed results files.

* Every ```python block of README.md runs, in order, in one namespace, in a fresh
  interpreter. A block whose fence info carries the tag ``skip-ci`` (```python skip-ci) is
  not run; use it only for blocks that need something CI does not have, and say why in the
  README next to it. (No block needs it today.)
* The README's test command is the one ``.ci/run`` runs.
* Every ``fastfc ...`` command of the README (in shell blocks and in inline code) parses
  with the CLI's own argument parser.
* Every results file under ``benchmarks/results/`` (except ``legacy/``) starts with the
  provenance header of ``benchmarks/_provenance.py``; every results path the README names
  exists; the README cites nothing under ``legacy/``; and every README paragraph or list item
  that states a measured number names the results file it comes from.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "benchmarks" / "results"
FENCE = re.compile(r"^```(\S*)[ \t]*(.*)$")


def readme_blocks() -> list[tuple[str, set[str], str, int]]:
    """Fenced code blocks of the README.

    Returns
    -------
    list of (language, tags, code, line)
        The fence's language, the other words of its info string, the code and the line
        number of the opening fence.
    """
    blocks, lines, i = [], README.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        start, body = i + 1, []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        blocks.append((m.group(1), set(m.group(2).split()), "\n".join(body) + "\n", start))
        i += 1
    return blocks


def prose() -> str:
    """The README without its fenced code blocks.

    Returns
    -------
    str
        The text outside code fences.
    """
    out, inside = [], False
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside:
            out.append(line)
    return "\n".join(out)


def test_python_blocks_run_in_order(tmp_path):
    blocks = [(code, line) for lang, tags, code, line in readme_blocks() if lang == "python" and "skip-ci" not in tags]
    assert len(blocks) >= 5, "the README's Python examples were not found"
    driver = textwrap.dedent(
        """
        import sys, traceback
        ns = {"__name__": "__readme__"}
        for line, code in BLOCKS:
            try:
                exec(compile(code, f"README.md block at line {line}", "exec"), ns)
            except BaseException:
                traceback.print_exc()
                sys.exit(f"README.md: the python block at line {line} failed")
        """
    ).replace("BLOCKS", repr([(line, code) for code, line in blocks]))
    script = tmp_path / "readme_blocks.py"
    script.write_text(driver, encoding="utf-8")
    import fastfc

    env = dict(os.environ)
    # the fresh interpreter imports the same fastfc as this test session
    env["PYTHONPATH"] = os.pathsep.join([str(Path(fastfc.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_readme_test_command_is_the_ci_command():
    """The README's test command is the one ``.ci/run`` runs."""
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip().startswith("python3 -m pytest") and "-m \"not slow\"" in line]
    assert ci, ".ci/run no longer runs the not-slow suite"
    assert any(cmd in code for lang, _, code, _ in readme_blocks() if lang == "bash" for cmd in ci), \
        f"the README's test command differs from .ci/run's: {ci[0]}"


def readme_cli_commands() -> list[str]:
    """Every ``fastfc ...`` command of the README.

    Returns
    -------
    list of str
        Commands from shell blocks (each ``fastfc`` command of a line, also after ``&&``)
        and from inline code spans of the prose.
    """
    cmds = []
    for lang, _, code, _ in readme_blocks():
        if lang not in ("bash", "sh", "shell", "console"):
            continue
        for line in code.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0]
            for part in re.split(r"&&|\|\||;|\|", line):
                part = part.strip()
                if part.startswith("fastfc "):
                    cmds.append(part)
    cmds += [c for c in re.findall(r"`([^`\n]+)`", prose()) if c.startswith("fastfc ")]
    return cmds


def test_readme_cli_commands_parse():
    from fastfc import cli

    cmds = readme_cli_commands()
    assert any(c.startswith("fastfc run") for c in cmds) and any(c.startswith("fastfc flower") for c in cmds)
    for cmd in cmds:
        argv = shlex.split(cmd)[1:]
        if hasattr(cli, "_build_parser"):
            try:
                cli._build_parser().parse_args(argv)
            except SystemExit as exc:  # --help exits 0; a parse error exits 2
                assert exc.code == 0, f"README command does not parse: {cmd}"
        else:  # the parser moved: at least the (sub)command must exist
            with pytest.raises(SystemExit) as exc:
                cli.main([a for a in argv if not a.startswith("-")][:2] + ["--help"])
            assert exc.value.code == 0, f"README command unknown: {cmd}"


def results_files() -> list[Path]:
    """The results files the README may cite (everything but ``legacy/``).

    Returns
    -------
    list of Path
        Markdown files under ``benchmarks/results/`` outside ``legacy/``.
    """
    return sorted(p for p in RESULTS.rglob("*.md") if "legacy" not in p.relative_to(RESULTS).parts)


def test_results_files_have_provenance_header():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from _provenance import FIELDS, MARKER
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    files = results_files()
    assert files, "no results files"
    for path in files:
        head = path.read_text(encoding="utf-8").splitlines()[: len(FIELDS) + 1]
        assert head and head[0] == MARKER, f"{path.name}: no provenance header (write it with a script's --out)"
        for field, line in zip(FIELDS, head[1:]):
            assert line.startswith(f"- {field}: "), f"{path.name}: header field {field!r} missing"
        rev = head[1 + FIELDS.index("git revision")]
        assert re.search(r"[0-9a-f]{40}", rev) and "dirty" not in rev, f"{path.name}: not from a committed revision"
        assert "NOT this checkout" not in head[1 + FIELDS.index("versions")], f"{path.name}: measured another fastfc"


def test_readme_cites_existing_results_only():
    text = README.read_text(encoding="utf-8")
    cited = set(re.findall(r"benchmarks/results/[\w./*-]+\.md", text))
    assert cited, "the README cites no results file"
    for ref in cited:
        assert "legacy" not in ref, f"the README cites a legacy (hand-assembled) file: {ref}"
        assert list(ROOT.glob(ref)), f"the README cites {ref}, which does not exist"


#: a measured number: a time, a speed-up, a percentage, or a score next to its metric
MEASURED = re.compile(
    r"\d(?:[\d.,]*\d)?\s*(?:×|ms\b|s\b(?![-\w])|%)"
    r"|(?:ARI|NMI|F|ℓ2|Purity)\b[^.;:]{0,25}?[−+-]?\d\.\d{2}"
    r"|[−+-]\d\.\d{2,}"
)


def test_every_measured_number_names_its_results_file():
    """Each paragraph / list item with a measured number cites a results file.

    A list item may rely on the results file named by the paragraph that introduces its list.
    """
    missing = []
    for chunk in re.split(r"\n\s*\n", prose()):
        items = re.split(r"\n(?=- )", chunk)
        lead = items[0] if not items[0].startswith("- ") else ""
        lead_cites = "benchmarks/results/" in lead
        for item in items:
            if MEASURED.search(item) and "benchmarks/results/" not in item and not (item is not lead and lead_cites):
                missing.append(item.strip()[:160])
    assert not missing, "README numbers without a results file:\n" + "\n".join(missing)
