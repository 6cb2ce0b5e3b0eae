"""``.. fastfc-results:: benchmarks/results/FILE.md``: show a committed results file in the docs.

The file is the one a benchmark script wrote (``benchmarks/_provenance.py``): its provenance
header (command, git revision, date, machine and load, library versions), its prose and its
markdown tables are shown as they are, tables as real tables. Nothing is retyped, so the
documentation's numbers are always those of the cited file.
"""
from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList

ROOT = Path(__file__).resolve().parents[2]
_SPECIAL = re.compile(r"([\\`*_|<>\[\]])")


def _esc(text: str) -> str:
    """reStructuredText for one markdown line: `code` as literals, everything else plain text."""
    parts = text.strip().split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: all plain
        parts = [text.strip()]
    out = []
    for i, part in enumerate(parts):
        if i % 2 and part.strip() and "``" not in part:
            out.append(f"\\ ``{part}``\\ ")
        else:
            out.append(_SPECIAL.sub(r"\\\1", part))
    text = "".join(out).strip()
    # the zero-width separators "\\ " around a literal are not needed at the ends of the line
    if text.startswith("\\ ``"):
        text = text[2:]
    if text.endswith("``\\"):
        text = text[:-1]
    # a leading character that would start a list, a directive or a section line
    if text[:1] in "-+#=.:" or re.match(r"^\d+[.)]\s", text):
        text = "\\" + text
    return text


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def markdown_to_rst(md: str, name: str) -> list[str]:
    """The reStructuredText lines that show the markdown results file ``md``."""
    out: list[str] = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("<!--") or not line.strip():
            i += 1
            continue
        if line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(_cells(lines[i]))
                i += 1
            rows = [r for r in block if not set("".join(r)) <= set("-: ")]
            width = len(rows[0])
            out += ["", ".. list-table::", "   :header-rows: 1", "   :class: fastfc-results", ""]
            for r in rows:
                r = (r + [""] * width)[:width]
                out.append(f"   * - {_esc(r[0])}")
                out += [f"     - {_esc(c)}" for c in r[1:]]
            out.append("")
            continue
        if line.startswith("#"):
            out += ["", f".. rubric:: {_esc(line.lstrip('#'))}", ""]
            i += 1
            continue
        if line.startswith("- "):
            out += ["", f"* {_esc(line[2:])}"]
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                out[-1] += " " + _esc(lines[i])
                i += 1
            continue
        para = [line]
        i += 1
        while i < len(lines) and lines[i].strip() and not lines[i].startswith(("|", "#", "- ", "<!--")):
            para.append(lines[i])
            i += 1
        out += ["", " ".join(_esc(p) for p in para), ""]
    return out


class FastfcResults(Directive):
    """Show ``benchmarks/results/FILE.md`` (path relative to the repository root)."""

    required_arguments = 1
    has_content = False
    option_spec = {"title": directives.unchanged}

    def run(self):
        rel = self.arguments[0]
        path = ROOT / rel
        if not path.is_file():
            raise self.error(f"fastfc-results: no file {rel} under {ROOT}")
        env = self.state.document.settings.env
        env.note_dependency(str(path))
        title = self.options.get("title", f"``{rel}``")
        body = [f".. admonition:: Measured: {title}", "   :class: fastfc-measured", ""]
        body += ["   " + line if line else "" for line in markdown_to_rst(path.read_text(encoding="utf-8"), rel)]
        container = nodes.container()
        self.state.nested_parse(StringList(body, source=str(path)), self.content_offset, container)
        return container.children


def setup(app):
    app.add_directive("fastfc-results", FastfcResults)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
