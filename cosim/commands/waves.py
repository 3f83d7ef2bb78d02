"""`cosim waves SUBCOMMAND`: read VCDs of the RTL and the TLM (list, show, timeline, diff).

Each subcommand is a pair in :data:`SUBCOMMANDS`: ``add(subparsers)`` builds its
parser and ``run(args) -> int`` executes it. ``cosim waves run KERNEL`` (run a kernel
on RTL and TLM with tracing) belongs to the models and is added the same way: append
``("run", add_run, run_run)`` to SUBCOMMANDS from wherever it is implemented.
"""

from __future__ import annotations

import argparse
import json
from typing import Callable

from cosim.cli import add_json_arg
from cosim.waves import (Trace, VcdFile, WavesError, ascii_waves, detect_clock, diff_text, diff_timelines,
                       diff_values, extract_timeline, read_window, table, timeline_text, to_cycles)
from cosim.waves.timeline import Clock, value_at
from cosim.waves.vcd_reader import fmt_value

DEFAULT_WINDOW = 64  # cycles shown by `show` when --to is not given


def _add_common(p: argparse.ArgumentParser, period: bool = True) -> None:
    p.add_argument("--progress", action="store_true",
                   help="show a progress bar on stderr (default: only when stderr is a terminal)")
    if period:
        p.add_argument("--period", type=int, default=None, metavar="T",
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
    p.add_argument("--from", dest="c_from", type=int, default=0, metavar="C", help="first cycle (default 0)")
    p.add_argument("--to", dest="c_to", type=int, default=None, metavar="C",
                   help=f"last cycle, inclusive (default: --from + {DEFAULT_WINDOW - 1}, or the trace end)")
    p.add_argument("--ascii", action="store_true", help="draw an ASCII waveform instead of a table")
    p.add_argument("--changes", action="store_true", help="table: only rows where a value changes")
    p.add_argument("--cell", type=int, default=None, metavar="N", help="ASCII: characters per cycle")
    add_json_arg(p)
    _add_common(p)
    return p


def _window(vcd: VcdFile, clock: Clock, c0: int, c1: int | None) -> tuple[int, int]:
    if c0 < 0:
        raise WavesError(f"--from must be >= 0, not {c0}")
    end = clock.cycle(vcd.end_time) if vcd.end_time is not None else None
    if c1 is None:
        c1 = c0 + DEFAULT_WINDOW - 1
        if end is not None:
            c1 = max(c0, min(c1, end))
    if c1 < c0:
        raise WavesError(f"empty cycle window: --from {c0} is after --to {c1}")
    return c0, c1


def _traces(vcd: VcdFile, names: list[str], clock: Clock, c0: int, c1: int) -> list[Trace]:
    sigs = []
    for n in names:
        s = vcd.resolve(n)
        if s not in sigs:
            sigs.append(s)
    win = read_window(vcd, sigs, clock, c0, c1)
    return [Trace(s.name, s.width, s.var_type, win[s.name]) for s in sigs]


def run_show(args: argparse.Namespace) -> int:
    vcd = VcdFile(args.file, progress=args.progress)
    for n in args.signals:  # resolve names before any pass over the data
        vcd.resolve(n)
    clock = detect_clock(vcd, args.period)
    c0, c1 = _window(vcd, clock, args.c_from, args.c_to)
    traces = _traces(vcd, args.signals, clock, c0, c1)
    if args.json:
        print(json.dumps({"file": str(vcd.path), "clock": clock.to_dict(), "from": c0, "to": c1,
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


# ---- diff -------------------------------------------------------------------------------
def add_diff(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("diff", help="first instruction where two timelines diverge",
                       description="Compare the timelines of two VCDs (TLM vs RTL, or two RTL runs) and "
                                   "report the first instruction whose start or end differs by more than "
                                   "--tol cycles, then draw both waveforms around it. Exit 1 when they differ.")
    p.add_argument("a", help="first VCD (e.g. the TLM's)")
    p.add_argument("b", help="second VCD (e.g. the RTL's)")
    p.add_argument("--tol", type=int, default=0, metavar="N", help="allowed difference in cycles (default 0)")
    p.add_argument("--align", choices=["auto", "start", "first", "none"], default="auto",
                   help="cycle 0 of each trace: START from dbg_cycles, the first instruction, or none "
                        "(auto: start when both have dbg_cycles, else first)")
    p.add_argument("--values", nargs="+", default=[], metavar="SIG",
                   help="also compare these signals' values cycle by cycle (e.g. dbg_load_q)")
    p.add_argument("--window", type=int, default=12, metavar="N",
                   help="cycles drawn each side of the divergence (0: no waveform)")
    add_json_arg(p)
    _add_common(p, period=False)
    return p


def _around(vcd: VcdFile, clock: Clock, unit: str, c_rel: int, off: int, half: int) -> str:
    names = [s.name for s in (vcd.find_probe(f"dbg_{unit}_{k}") for k in ("busy", "pc", "q")) if s]
    c0 = max(0, c_rel + off - half)
    c1 = c_rel + off + half
    if vcd.end_time is not None:
        c1 = max(c0, min(c1, clock.cycle(vcd.end_time)))
    return ascii_waves(_traces(vcd, names, clock, c0, c1), c0, c1)


def run_diff(args: argparse.Namespace) -> int:
    va, vb = VcdFile(args.a, progress=args.progress), VcdFile(args.b, progress=args.progress)
    ca, cb = detect_clock(va), detect_clock(vb)
    ta, tb = extract_timeline(va, ca), extract_timeline(vb, cb)
    rep = diff_timelines(ta, tb, args.tol, args.align)
    value_diffs = []
    for name in args.values:
        sa, sb = va.resolve(name), vb.resolve(name)
        _, cha = va.stream([sa], label="values")
        _, chb = vb.stream([sb], label="values")
        end = min(ta.end_cycle - rep["offset_a"], tb.end_cycle - rep["offset_b"]) + 1
        la, lb = to_cycles(ca, None, cha[sa.name]), to_cycles(cb, None, chb[sb.name])
        c = diff_values(la, lb, rep["offset_a"], rep["offset_b"], end)
        if c is not None:
            value_diffs.append({"signal": sa.name, "cycle": c,
                                "a": fmt_value(value_at(la, c + rep["offset_a"]), sa.width, sa.var_type),
                                "b": fmt_value(value_at(lb, c + rep["offset_b"]), sb.width, sb.var_type)})
    rep["values"] = value_diffs
    rep["equal"] = rep["equal"] and not value_diffs
    if args.json:
        print(json.dumps(rep))
        return 0 if rep["equal"] else 1
    print(diff_text(rep) if rep["first"] or not value_diffs else diff_text({**rep, "equal": True}))
    for v in value_diffs:
        print(f"values of {v['signal']} first differ at relative cycle {v['cycle']}: "
              f"A {v['a']}  B {v['b']}")
    if args.window > 0 and (rep["first"] or value_diffs):
        first = rep["first"]
        if first is not None:
            unit, c = first["unit"], int(first["cycle"])
        else:
            unit, c = "load", int(value_diffs[0]["cycle"])
        for tag, vcd, clock, off in (("A", va, ca, rep["offset_a"]), ("B", vb, cb, rep["offset_b"])):
            print(f"\n{tag}: {vcd.path.name} around cycle {c + off} (relative {c})")
            print(_around(vcd, clock, unit, c, off, args.window))
    return 0 if rep["equal"] else 1


# Subcommands in the order `cosim waves --help` lists them; `run` is added by the models' side.
SUBCOMMANDS: list[tuple[str, Callable, Callable]] = [
    ("list", add_list, run_list),
    ("show", add_show, run_show),
    ("timeline", add_timeline, run_timeline),
    ("diff", add_diff, run_diff),
]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("waves", help="waveforms: list, show, timeline, diff of RTL/TLM VCDs",
                       description="Read VCD files of the RTL and the TLM (same dbg_* probe names).")
    wsub = p.add_subparsers(dest="waves_command", metavar="SUBCOMMAND")
    for _name, add, run_fn in SUBCOMMANDS:
        add(wsub).set_defaults(_waves_run=run_fn)
    p.set_defaults(_waves_help=p.print_help)
    return p


def run(args: argparse.Namespace) -> int:
    fn = getattr(args, "_waves_run", None)
    if fn is None:
        args._waves_help()
        return 2
    return int(fn(args) or 0)


def _register_run() -> None:
    # `waves run` drives the models; it lives in its own module to keep this one model-free.
    from cosim.commands.waves_run import add_run, run_run

    SUBCOMMANDS.append(("run", add_run, run_run))


_register_run()
