"""The `cosim` console command.

Each subcommand lives in its own module under ``cosim/commands`` with two functions:
``add_parser(subparsers)`` and ``run(args) -> int``. A user error (bad argument,
bad file, bad config or Program) prints one line on stderr and exits 2; set
``COSIM_DEBUG=1`` to see the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Subcommands in the order `cosim --help` lists them.
COMMANDS = ["list", "compile", "run", "disasm", "sim", "waves", "rtl", "fuzz", "bench", "calibrate"]


class UserError(ValueError):
    """A problem with what the user asked for (reported in one line, exit 2)."""


def add_config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="default", metavar="NAME|PATH",
                   help="hardware config: a name from hw/configs or a JSON path (default: default)")


def add_json_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cosim", description="Co-simulation of a VTA-like tensor accelerator: "
                                 "compile kernels to Programs and run them on golden, TLM and RTL models.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"cosim.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"cosim.commands.{name}":
                raise
            continue  # not built yet
        p = mod.add_parser(sub)
        p.set_defaults(_run=mod.run)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if not getattr(args, "_run", None):
        ap.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print(f"cosim {args.command}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError, LookupError) as e:
        if os.environ.get("COSIM_DEBUG"):
            raise
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, OSError) and e.filename and str(e.filename) not in msg:
            msg = f"{e.filename}: {msg}"
        print(f"cosim {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
