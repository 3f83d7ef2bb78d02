"""`cosim docs [--check] [--expensive] [FIGURE ...]`: regenerate the measured figures of README.md and
docs/*.md (the marked blocks ``<!-- figures: NAME -->`` ... ``<!-- /figures -->``), or report the stale ones."""

from __future__ import annotations

import argparse
import sys

from cosim.cli import UserError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("docs", help="regenerate (or --check) the figures of README.md and docs/*.md",
                       description="Every measured figure of README.md and docs/*.md stands in a marked block "
                                   "(<!-- figures: NAME --> ... <!-- /figures -->) that this command rewrites from "
                                   "the models. Cheap figures (TLM and golden runs, the ISA) are recomputed in "
                                   "seconds; expensive ones (yosys synthesis, the example sweep) record the hash of "
                                   "their inputs and are recomputed with --expensive. --check rewrites nothing and "
                                   "prints one line per stale block (exit 1).")
    p.add_argument("figures", nargs="*", metavar="FIGURE", help="only these figures (default: all)")
    p.add_argument("--check", action="store_true", help="report stale blocks, one line each; exit 1 if any")
    p.add_argument("--expensive", action="store_true",
                   help="also recompute the expensive figures (synthesis, the example sweep: minutes)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def run(args: argparse.Namespace) -> int:
    from cosim.docfigs.blocks import BlockError
    from cosim.docfigs.refresh import check, regenerate

    def log(msg: str) -> None:
        if not args.quiet:
            print(f"[docs] {msg}", file=sys.stderr, flush=True)

    try:
        if args.check:
            stale = check(args.figures or None, expensive=args.expensive, progress=log)
            for s in stale:
                print(s.line())
            if not stale:
                print("every figures block is current" + ("" if args.expensive else
                                                          " (expensive ones by their recorded inputs)"))
            return 1 if stale else 0
        changed = regenerate(args.figures or None, expensive=args.expensive, progress=log)
    except (BlockError, ValueError) as e:
        raise UserError(str(e).splitlines()[0]) from None
    for page, name in changed:
        print(f"rewrote {page.name}: {name}")
    print(f"{len(changed)} block(s) changed" + ("" if args.expensive else
                                                  "; expensive figures kept (use --expensive to recompute them)"))
    return 0
