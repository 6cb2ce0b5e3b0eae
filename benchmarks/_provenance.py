"""Provenance header of every results file under ``benchmarks/results/``.

Every benchmark script that writes results takes ``--out FILE`` and writes through
:func:`write_results` (directly or with :func:`tee_results`), so each results file starts
with the same header: the command, the git revision of the repository, the date, the
machine (cores, CPU model, load average when the script started and when it wrote the
file) and the versions of Python, NumPy, SciPy, scikit-learn, Numba and fastfc.
``tests/test_readme.py`` checks that every results file has this header.
"""
from __future__ import annotations

import contextlib
import datetime
import io
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

#: the first line of every results file; the test looks for it
MARKER = "<!-- provenance: written by benchmarks/_provenance.py, do not edit by hand -->"
#: the header fields, in order; the test checks that each is present
FIELDS = ("command", "git revision", "date", "machine", "versions")

_REPO = Path(__file__).resolve().parents[1]
_LOAD_AT_START = os.getloadavg()
# a script run as ``python3 benchmarks/x.py`` has benchmarks/ on its path, not the repository:
# put the repository first so the results measure this checkout's fastfc (and the header says so)
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))


def _git_revision() -> str:
    """Commit of the repository the script runs from, with ``+dirty`` when the code differs.

    Only uncommitted changes to what produces the numbers count (``fastfc/`` and the
    benchmark scripts; not ``benchmarks/results/``, the README or the tests).

    Returns
    -------
    str
        The full commit hash, or ``"unknown"`` outside a git checkout.
    """
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_REPO, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "fastfc", "benchmarks",
                                ":(exclude)benchmarks/results"], cwd=_REPO, capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + (" +dirty (uncommitted changes to fastfc/ or the benchmark scripts)" if dirty else "")


#: the revision whose code the script imported (a long run may end after later commits)
_REV_AT_START = _git_revision()


def _revision_field() -> str:
    """The revision at the script's start, plus the one at its end when a commit came in between."""
    end = _git_revision()
    return _REV_AT_START if end == _REV_AT_START else f"{_REV_AT_START} (at the end of the run: {end})"


def _cpu_model() -> str:
    """CPU model name from ``/proc/cpuinfo``, else :func:`platform.processor`.

    Returns
    -------
    str
        The model name.
    """
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _versions() -> str:
    """Versions of the interpreter and of the numeric libraries fastfc runs on.

    Returns
    -------
    str
        ``"python X, numpy Y, ..."``.
    """
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"python {platform.python_version()}"]
    for dist in ("numpy", "scipy", "scikit-learn", "numba"):
        try:
            parts.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            parts.append(f"{dist} not installed")
    import fastfc

    where = Path(fastfc.__file__).resolve().parent
    note = "" if where == _REPO / "fastfc" else ", NOT this checkout: run with PYTHONPATH=<repository root>"
    parts.append(f"fastfc {getattr(fastfc, '__version__', 'unknown')} (imported from {where}{note})")
    return ", ".join(parts)


def header(argv: list[str] | None = None) -> str:
    """The provenance header of a results file.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments of the script (``sys.argv[1:]`` when omitted).

    Returns
    -------
    str
        Markdown: :data:`MARKER` and one bullet per field of :data:`FIELDS`.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    script = Path(sys.argv[0]).resolve()
    try:
        script_name = str(script.relative_to(_REPO))
    except ValueError:
        script_name = str(script)
    load_now = os.getloadavg()
    cmd = " ".join(shlex.quote(a) for a in ["python3", script_name, *argv])
    lines = [
        MARKER,
        f"- command: `{cmd}`",
        f"- git revision: {_revision_field()}",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {os.cpu_count()} cores, {_cpu_model()}, {platform.system()} {platform.machine()}; "
        f"load average (1/5/15 min) at start {' / '.join(f'{x:.2f}' for x in _LOAD_AT_START)}, "
        f"at the end {' / '.join(f'{x:.2f}' for x in load_now)}",
        f"- versions: {_versions()}",
    ]
    return "\n".join(lines) + "\n"


def run_with_out(parser, argv, body) -> int:
    """Add ``--out FILE`` to a script's parser, parse, and run the script under :func:`tee_results`.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The script's parser, without ``--out``.
    argv : list of str or None
        Arguments (``sys.argv[1:]`` when ``None``).
    body : callable
        ``body(args) -> int``: runs the script and prints its results.

    Returns
    -------
    int
        What ``body`` returns.
    """
    parser.add_argument("--out", default=None,
                        help="also write what is printed to this results file, under the provenance header")
    args = parser.parse_args(argv)
    with tee_results(args.out, argv):
        return body(args)


def write_results(path: str | os.PathLike, body: str, argv: list[str] | None = None) -> None:
    """Write ``body`` to ``path`` under the provenance header.

    Parameters
    ----------
    path : str or path-like
        The results file (parent folders are created).
    body : str
        The results (markdown).
    argv : list of str, optional
        Command-line arguments of the script, recorded in the header (``sys.argv[1:]``
        when omitted).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header(argv) + "\n" + body.rstrip("\n") + "\n")


class _Tee(io.TextIOBase):
    """A text stream that writes to the real stdout and keeps a copy."""

    def __init__(self, stream):
        """Wrap ``stream`` (the real stdout)."""
        self.stream, self.buffer_ = stream, io.StringIO()

    def write(self, s):
        """Write ``s`` to the real stream and to the copy."""
        self.buffer_.write(s)
        return self.stream.write(s)

    def flush(self):
        """Flush the real stream."""
        self.stream.flush()


@contextlib.contextmanager
def tee_results(path: str | os.PathLike | None, argv: list[str] | None = None):
    """Print as usual and, when ``path`` is given, write everything printed to ``path``.

    Parameters
    ----------
    path : str or path-like or None
        The results file (``--out``); ``None`` only prints.
    argv : list of str, optional
        Command-line arguments recorded in the header (``sys.argv[1:]`` when omitted).

    Yields
    ------
    None
        The body of the ``with`` block runs with stdout copied; the file is written only
        when the block finishes without an exception.
    """
    if path is None:
        yield
        return
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield
    write_results(path, tee.buffer_.getvalue(), argv)
    print(f"wrote {path}", file=sys.stderr)
