"""Mean +- sd over several ``benchmarks/fedcref_repro.py`` results files, next to the paper's Tables 5 and 6.

``fedcref_repro.py`` writes one results file per invocation (``--seeds`` adds runs as separate files). This
script reads the per-run rows of the given files (it computes nothing new) and writes, per dirtiness,
association test (the ``Setting`` line's ``association test = ...``) and associations mode (learned /
perfect): the number of runs, the mean and sample standard deviation (ddof = 1) of ACC init, ACC end,
|G|, wrong associations, isolated clusters start and end, iterations and wall time, next to the paper's
values. A table lists every input file with its seeds, git revision, date and load, and the per-run rows
are repeated so that the means can be checked by hand. Files whose ``Setting`` lines differ in anything
but the seeds / run count are grouped separately (the setting is part of the group key).

Usage::

    python3 benchmarks/fedcref_repro_summary.py benchmarks/results/fedcref_repro_c25_ratio_d05*.md \\
        --out benchmarks/results/fedcref_repro_c25_ratio_summary.md
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _provenance import run_with_out  # noqa: E402
from fedcref_repro import PAPER, PAPER_PERFECT  # noqa: E402

#: columns of fedcref_repro.py's per-run table that are averaged, with their parsers
_COLS = ("acc_init", "acc_end", "groups", "ideal", "wrong", "iso_start", "iso_end", "iterations", "seconds")


def _field(text: str, name: str) -> str:
    m = re.search(rf"^- {re.escape(name)}: (.*)$", text, re.M)
    return m.group(1).strip() if m else "?"


def parse(path: Path):
    """(meta dict, list of run dicts) of one fedcref_repro.py results file."""
    text = path.read_text()
    setting = re.search(r"^Setting: (.*)$", text, re.M)
    if setting is None:
        raise SystemExit(f"{path}: no 'Setting:' line, not a fedcref_repro.py results file")
    setting = setting.group(1)
    test = re.search(r"association test = ([^,]*?(?:\([^)]*\))?)(?:,|$)", setting)
    # the group key: the setting without the seeds / run count
    key_setting = re.sub(r", (simulation seeds \d+(?:,\d+)*|\d+ run\(s\) per dirtiness)", "", setting)
    load = re.search(r"at start ([\d.]+) / ([\d.]+) / ([\d.]+), at the end ([\d.]+) / ([\d.]+) / ([\d.]+)",
                     _field(text, "machine"))
    meta = dict(file=path.name, revision=_field(text, "git revision")[:12] + ("+dirty" if "dirty" in
                _field(text, "git revision") else ""), date=_field(text, "date"),
                load=f"{load.group(1)} → {load.group(4)}" if load else "?",
                test=test.group(1).strip() if test else "?", setting=key_setting)
    runs = []
    for line in text.splitlines():
        c = [v.strip() for v in line.strip().strip("|").split("|")]
        if len(c) < 10 or not re.fullmatch(r"[0-9.]+", c[0]) or c[1] not in ("learned", "perfect"):
            continue
        g, ideal = (int(v) for v in c[5].split("/"))
        i0, i1 = (int(v) for v in c[7].split("→"))
        runs.append(dict(dirtiness=float(c[0]), mode=c[1], seed=int(c[2]), acc_init=float(c[3]),
                         acc_end=float(c[4]), groups=g, ideal=ideal,
                         wrong=float("nan") if c[6] == "n/a" else float(c[6]), iso_start=i0, iso_end=i1,
                         iterations=int(c[8]), seconds=float(c[9]), file=path.name))
    meta["seeds"] = ",".join(str(r["seed"]) for r in runs)
    return meta, runs


def _ms(vals, fmt):
    v = np.asarray(vals, dtype=float)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return "n/a"
    sd = f" ± {np.std(v, ddof=1):{fmt}}" if v.size > 1 else ""
    return f"{np.mean(v):{fmt}}{sd}"


def run(args) -> int:
    metas, runs = [], []
    for f in args.files:
        m, r = parse(Path(f))
        metas.append(m)
        for x in r:
            x.update(test=m["test"], setting=m["setting"])
        runs.extend(r)
    print("# FedCRef reproduction on Fashion-MNIST: mean ± sd over results files\n")
    print("Read from the per-run rows of `benchmarks/fedcref_repro.py` results files (nothing recomputed); sd = "
          "sample standard deviation (ddof = 1) over runs; wrong ass. = % of the last graph's edges joining "
          "clusters matched to different classes. Paper: Tables 5 and 6 (Fashion-MNIST rows, 5 runs).\n")
    print("## Input files\n")
    print("| file | association test | runs (seeds) | git revision | date | load 1 min (start → end) |")
    print("|---|---|---|---|---|---|")
    for m in metas:
        print(f"| {m['file']} | {m['test']} | {m['seeds']} | {m['revision']} | {m['date']} | {m['load']} |")
    groups = {}
    for r in runs:
        groups.setdefault((r["setting"], r["dirtiness"], r["test"], r["mode"]), []).append(r)
    settings = list(dict.fromkeys(k[0] for k in groups))
    for si, setting in enumerate(settings):
        print(f"\n## Setting {si + 1}\n\n{setting}\n")
        print("| dirtiness | association test | associations | runs | ACC init (ours / paper) | ACC end (ours / paper) | "
              "\\|G\\| (ours / paper) | ideal \\|G\\| | wrong ass. % (ours / paper) | isolated start (ours / paper) | "
              "isolated end (ours / paper) | iterations | time per run (s) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for (s, d, test, mode), rr in sorted(((k, v) for k, v in groups.items() if k[0] == setting),
                                             key=lambda t: (t[0][1], t[0][2], t[0][3])):
            p = PAPER.get(d, ("-",) * 6)
            if mode == "perfect":
                p = (p[0], PAPER_PERFECT.get(d, "-"), "-", "-", "-", "-")
            g = lambda k, fmt: _ms([r[k] for r in rr], fmt)  # noqa: E731
            print(f"| {d:g} | {test} | {mode} | {len(rr)} ({','.join(str(r['seed']) for r in rr)}) | "
                  f"{g('acc_init', '.3f')} / {p[0]} | {g('acc_end', '.3f')} / {p[1]} | {g('groups', '.2f')} / {p[2]} | "
                  f"{g('ideal', '.1f')} | {g('wrong', '.1f')} / {p[3]} | {g('iso_start', '.1f')} / {p[4]} | "
                  f"{g('iso_end', '.1f')} / {p[5]} | {g('iterations', '.1f')} | {g('seconds', '.0f')} |")
    print("\n## Per-run rows\n")
    print("| file | dirtiness | association test | associations | seed | ACC init | ACC end | \\|G\\| / ideal | "
          "wrong ass. (%) | isolated start → end | iterations | time (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(runs, key=lambda r: (r["dirtiness"], r["test"], r["mode"], r["seed"])):
        print(f"| {r['file']} | {r['dirtiness']:g} | {r['test']} | {r['mode']} | {r['seed']} | {r['acc_init']:.3f} | "
              f"{r['acc_end']:.3f} | {r['groups']} / {r['ideal']} | {r['wrong']:.1f} | {r['iso_start']} → "
              f"{r['iso_end']} | {r['iterations']} | {r['seconds']:.0f} |")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="fedcref_repro.py results files")
    return run_with_out(ap, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
