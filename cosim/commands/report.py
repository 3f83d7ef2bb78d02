"""`cosim report`: one static HTML page from the verification results that exist."""

from __future__ import annotations

import argparse
from pathlib import Path

from cosim.cli import UserError, folder_arg, output_arg


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from cosim.report import INPUTS

    p = sub.add_parser("report", help="the verification report: one HTML page of regression, coverage, bins, fuzz "
                                      "and mutation results",
                       description="Write one static HTML page from whatever result files exist: the JUnit XML "
                                   "of `make regress` (a row per testcase), and the JSON of code coverage, "
                                   "functional bins, fuzzing and mutation (each: its top-level numbers, and a table "
                                   "per list or dict of items). A missing file at its default path is shown as not run, "
                                   "with the command that makes it (one named by its option must exist); paths are "
                                   "relative to the current folder.")
    for inp in INPUTS:
        p.add_argument(f"--{inp.name}", type=folder_arg, default=inp.default, metavar="FILE",
                       help=f"{inp.title} (default {inp.default}; made by `{inp.how}`)")
    p.add_argument("-o", "--out", type=output_arg, default="build/report.html", metavar="FILE.html",
                   help="the page to write (default build/report.html)")
    return p


def run(args: argparse.Namespace) -> int:
    from cosim.report import INPUTS, write_report
    from cosim.report.page import read_inputs

    paths = {i.name: Path(getattr(args, i.name)) for i in INPUTS}
    out = Path(args.out)
    for i in INPUTS:
        if paths[i.name].resolve() == out.resolve():
            raise UserError(f"-o {args.out}: is the --{i.name} input (the page would replace it)")
    read = read_inputs(paths, out.parent.resolve())
    for i in INPUTS:  # a file named on the command line must be there and readable: else nothing is written
        if getattr(args, i.name) != i.default and read[i.name] is None:
            raise UserError(f"--{i.name} {paths[i.name]}: no such file (without the option, a missing result "
                            f"file is shown as not run)")
        if getattr(args, i.name) != i.default and isinstance(read[i.name], str):
            raise UserError(f"--{i.name} {paths[i.name]}: {read[i.name]}")
    write_report(paths, out, read)
    shown = [i.name for i in INPUTS if isinstance(read[i.name], list)]
    missing = [i.name for i in INPUTS if read[i.name] is None]
    bad = [f"{i.name} ({paths[i.name]}: {read[i.name]})" for i in INPUTS if isinstance(read[i.name], str)]
    print(f"{out}: {', '.join(shown) or 'no results'}{'; not run: ' + ', '.join(missing) if missing else ''}"
          f"{'; unreadable: ' + ', '.join(bad) if bad else ''}")
    return 0
