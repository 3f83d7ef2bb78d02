"""`cosim waves SUBCOMMAND`: read VCDs of the RTL and the TLM (list, show, timeline, diff), and run.

Each subcommand is a pair in :data:`SUBCOMMANDS`: ``add(subparsers)`` builds its
parser and ``run(args) -> int`` executes it. ``diff`` lives in ``waves_diff`` (``waves
run`` prints a diff too) and ``run`` (traced runs of a kernel on RTL and TLM) in
``waves_run``, which drives the models; neither imports this module.
"""

from __future__ import annotations

import argparse
import json
from typing import Callable

from cosim.cli import MAX_CYCLES, add_json_arg, int_arg
from cosim.commands.waves_diff import add_diff, read_traces, run_diff
from cosim.commands.waves_run import add_run, run_run
from cosim.waves import VcdFile, WavesError, ascii_waves, detect_clock, extract_timeline, table, timeline_text
from cosim.waves.timeline import Clock

DEFAULT_WINDOW = 64  # cycles shown by `show` when --to is not given
MAX_SHOWN = 1_000_000  # cycles `show` renders at most (a row per cycle, or a column per cycle of --ascii)
MAX_CELLS = 4_000_000  # values (cycles x signals) a table or JSON holds, characters an ASCII drawing holds


def _add_common(p: argparse.ArgumentParser, period: bool = True) -> None:
    p.add_argument("--progress", action="store_true",
                   help="show a progress bar on stderr (default: only when stderr is a terminal)")
    if period:
        p.add_argument("--period", type=int_arg(1), default=None, metavar="T",
                       help="VCD time units per cycle (default: from clk, else dbg_cycles, else 1)")


# ---- list -------------------------------------------------------------------------------
def add_list(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("list", help="list the signals of a VCD with their widths",
                       description="List the signals of a VCD (top ports once, aliases merged) with widths.")
    p.add_argument("file", help="VCD file")
    add_json_arg(p)
    _add_common(p, period=False)
    return p


def run_list(args: argparse.Namespace) -> int:
    vcd = VcdFile(args.file, progress=args.progress)
    if args.json:
        print(json.dumps({"file": str(vcd.path), "timescale": vcd.timescale,
                          "signals": [s.to_dict() for s in vcd.signals]}))
        return 0
    w = max(len(s.name) for s in vcd.signals)
    print(f"# {vcd.path}: {len(vcd.signals)} signals, timescale {vcd.timescale.get('magnitude', '?')}"
          f"{vcd.timescale.get('unit', '')}")
    for s in vcd.signals:
        extra = f"  (also {', '.join(s.aliases)})" if s.aliases else ""
        print(f"{s.name:<{w}}  {s.width:>4}  {s.var_type}{extra}")
    return 0


# ---- show -------------------------------------------------------------------------------
def add_show(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("show", help="print signals over a cycle window (table or ASCII waveform)",
                       description="Print chosen signals over a cycle window. Names may omit the scope "
                                   "and the bus range: dbg_load_pc, accel.dbg_load_pc, load_pc.")
    p.add_argument("file", help="VCD file")
    p.add_argument("signals", nargs="+", metavar="SIG", help="signal names (suffixes allowed)")
    p.add_argument("--from", dest="c_from", type=int_arg(0, MAX_CYCLES), default=0, metavar="C",
                   help="first cycle (default 0)")
    p.add_argument("--to", dest="c_to", type=int_arg(0, MAX_CYCLES), default=None, metavar="C",
                   help=f"last cycle, inclusive (default: --from + {DEFAULT_WINDOW - 1}, or the trace end)")
    p.add_argument("--ascii", action="store_true", help="draw an ASCII waveform instead of a table")
    p.add_argument("--changes", action="store_true", help="table: only rows where a value changes")
    p.add_argument("--cell", type=int_arg(1, 1000), default=None, metavar="N", help="ASCII: characters per cycle")
    p.add_argument("--relative", action="store_true",
                   help="cycles counted from START (dbg_cycles), as `waves timeline --relative` counts them; "
                        "--from/--to are then relative too")
    p.add_argument("--lanes", type=int_arg(1, 4096), default=0, metavar="N",
                   help="show each bus whose width N divides (lanes of 2 bits or more) as N lanes in decimal, "
                        "lane 0 (the low bits) first, e.g. --lanes 16 for a 512-bit accumulator vector")
    p.add_argument("--signed", action="store_true", help="decimal values (and lanes) as two's complement")
    add_json_arg(p)
    _add_common(p)
    return p


def _window(vcd: VcdFile, clock: Clock, c0: int, c1: int | None, off: int = 0) -> tuple[int, int]:
    """The cycles ``c0..c1`` to show: ``--to`` defaults to a window of :data:`DEFAULT_WINDOW` and stops at
    the trace's last cycle; a window past the trace or of more than :data:`MAX_SHOWN` cycles is refused
    (one row per cycle: the output would have no bound). Messages count cycles as the user does: less
    ``off`` (START's cycle, with --relative)."""
    if c0 < 0:
        raise WavesError(f"--from must be >= 0, not {c0 - off}")
    end = clock.cycle(vcd.end_time) if vcd.end_time is not None else None
    if end is not None and c0 > end:
        raise WavesError(f"--from {c0 - off} is past the trace's last cycle {end - off}")
    if c1 is None:
        c1 = c0 + DEFAULT_WINDOW - 1
    if end is not None:
        c1 = min(c1, end)
    if c1 < c0:
        raise WavesError(f"empty cycle window: --from {c0 - off} is after --to {c1 - off}")
    if c1 - c0 + 1 > MAX_SHOWN:
        raise WavesError(f"the window {c0 - off}..{c1 - off} is {c1 - c0 + 1:,} cycles; at most {MAX_SHOWN:,} "
                         f"are shown (narrow --from/--to)")
    return c0, c1


def _bound_output(args: argparse.Namespace, cycles: int) -> None:
    """Refuse a window whose table, JSON or drawing would exceed :data:`MAX_CELLS` (memory and output
    grow with cycles x signals, x characters per cycle when drawn); a ``--changes`` table grows with
    the changes only."""
    if args.changes and not (args.ascii or args.json):
        return
    n = cycles * len(args.signals)
    what = f"{cycles:,} cycles x {len(args.signals)} signal(s)"
    if args.ascii and not args.json:
        n *= args.cell or 1
        what += f" x {args.cell or 1} character(s) per cycle"
    if n > MAX_CELLS:
        hint = "" if args.ascii or args.json else ", or --changes"
        raise WavesError(f"the output would hold {what} = {n:,}; at most {MAX_CELLS:,} "
                         f"(narrow --from/--to, show fewer signals{hint})")


def run_show(args: argparse.Namespace) -> int:
    vcd = VcdFile(args.file, progress=args.progress)
    for n in args.signals:  # resolve names before any pass over the data
        vcd.resolve(n)
    clock = detect_clock(vcd, args.period)
    off = 0
    if args.relative:
        if clock.origin is None:
            raise WavesError(f"{vcd.path.name}: no dbg_cycles probe, so no START to count from (drop --relative)")
        off = clock.origin
    c0, c1 = _window(vcd, clock, args.c_from + off, None if args.c_to is None else args.c_to + off, off)
    _bound_output(args, c1 - c0 + 1)
    traces = read_traces(vcd, args.signals, clock, c0, c1)
    for t in traces:
        t.lanes, t.signed = args.lanes, args.signed
        t.changes = [(c - off, v) for c, v in t.changes]
    c0, c1 = c0 - off, c1 - off
    if args.json:
        print(json.dumps({"file": str(vcd.path), "clock": clock.to_dict(), "from": c0, "to": c1,
                          "relative": bool(args.relative),
                          "signals": [{"name": t.name, "width": t.width, "changes": t.changes,
                                       "values": t.values(c0, c1)} for t in traces]}))
        return 0
    if args.cell is not None and args.cell < 1:
        raise WavesError(f"--cell must be >= 1, not {args.cell}")
    print(ascii_waves(traces, c0, c1, args.cell) if args.ascii else table(traces, c0, c1, args.changes))
    return 0


# ---- timeline ---------------------------------------------------------------------------
def add_timeline(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("timeline", help="per-instruction start/end cycles from the dbg_* probes",
                       description="Extract every instruction's unit, index, start and end cycle (end "
                                   "exclusive) from dbg_<unit>_pc and dbg_<unit>_busy, RTL or TLM VCD alike.")
    p.add_argument("file", help="VCD file")
    p.add_argument("--relative", action="store_true",
                   help="cycles relative to START (from dbg_cycles) instead of the trace's own")
    add_json_arg(p)
    _add_common(p)
    return p


def run_timeline(args: argparse.Namespace) -> int:
    vcd = VcdFile(args.file, progress=args.progress)
    tl = extract_timeline(vcd, detect_clock(vcd, args.period))
    d = tl.to_dict()
    if args.relative:
        if tl.clock.origin is None:
            raise WavesError(f"{vcd.path.name}: no dbg_cycles probe, so no START to count from")
        off = tl.clock.origin
        for e in d["entries"]:
            for k in ("start", "end", "held_start", "held_end"):
                if e[k] is not None:
                    e[k] -= off
    print(json.dumps(d) if args.json else timeline_text(d))
    return 0


# Subcommands in the order `cosim waves --help` lists them.
SUBCOMMANDS: list[tuple[str, Callable, Callable]] = [
    ("list", add_list, run_list),
    ("show", add_show, run_show),
    ("timeline", add_timeline, run_timeline),
    ("diff", add_diff, run_diff),
    ("run", add_run, run_run),
]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("waves", help="waveforms: list, show, timeline, diff of RTL/TLM VCDs",
                       description="Read VCD files of the RTL and the TLM (same dbg_* probe names).")
    wsub = p.add_subparsers(dest="waves_command", metavar="SUBCOMMAND")
    for _name, add, run_fn in SUBCOMMANDS:
        add(wsub).set_defaults(_waves_run=run_fn)
    return p


def run(args: argparse.Namespace) -> int:
    # argparse requires the subcommand (cosim.cli turns its absence into one error line)
    return int(args._waves_run(args) or 0)

