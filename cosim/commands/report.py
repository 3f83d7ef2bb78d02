"""`cosim report`: one static HTML page from the verification results that exist."""

from __future__ import annotations

import argparse
from pathlib import Path

from cosim.cli import folder_arg, output_arg


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from cosim.report import INPUTS

    p = sub.add_parser("report", help="the verification report: one HTML page of regression, coverage, bins, fuzz "
                                      "and mutation results",
                       description="Write one static HTML page from whatever result files exist: the JUnit XML "
                                   "of `make regress` (a row per testcase), and the JSON of code coverage, "
                                   "functional bins, fuzzing and mutation (each: its top-level numbers, and a table "
                                   "per list or dict of items). A missing file is shown as not run, with the command "
                                   "that makes it; paths are relative to the current folder.")
    for inp in INPUTS:
        p.add_argument(f"--{inp.name}", type=folder_arg, default=inp.default, metavar="FILE",
                       help=f"{inp.title} (default {inp.default}; made by `{inp.how}`)")
    p.add_argument("-o", "--out", type=output_arg, default="build/report.html", metavar="FILE.html",
                   help="the page to write (default build/report.html)")
    return p


def run(args: argparse.Namespace) -> int:
    from cosim.report import INPUTS, write_report
    from cosim.report.page import read_tables

    paths = {i.name: Path(getattr(args, i.name)) for i in INPUTS}
    out = write_report(paths, Path(args.out))
    shown, missing, bad = [], [], []
    for i in INPUTS:
        if not paths[i.name].is_file():
            missing.append(i.name)
            continue
        try:
            read_tables(i, paths[i.name], out.parent.resolve())
            shown.append(i.name)
        except (ValueError, OSError) as e:  # the page says so too; the summary must not call it shown
            bad.append(f"{i.name} ({paths[i.name]}: {str(e).splitlines()[0] if str(e) else type(e).__name__})")
    print(f"{out}: {', '.join(shown) or 'no results'}{'; not run: ' + ', '.join(missing) if missing else ''}"
          f"{'; unreadable: ' + ', '.join(bad) if bad else ''}")
    return 0
