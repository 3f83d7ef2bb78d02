"""`cosim waves diff A B`: the first instruction where two timelines (TLM vs RTL, or two RTL runs) diverge.

Also home of :func:`read_traces` (signals of a VCD over a cycle window), which ``show``
uses too; ``waves run`` prints this diff after its traced runs.
"""

from __future__ import annotations

import argparse
import json

from cosim.cli import MAX_CYCLES, add_json_arg, int_arg
from cosim.waves import Trace, VcdFile, ascii_waves, detect_clock, diff_text, diff_timelines, diff_values, \
    extract_timeline, read_window, to_cycles
from cosim.waves.timeline import Clock, value_at
from cosim.waves.vcd_reader import fmt_value

MAX_DRAWN = 10_000  # cycles drawn each side of a divergence at most (the drawing is a column per cycle)


def read_traces(vcd: VcdFile, names: list[str], clock: Clock, c0: int, c1: int) -> list[Trace]:
    """The signals ``names`` (resolved, duplicates dropped) of ``vcd`` over cycles ``[c0, c1]``."""
    sigs = []
    for n in names:
        s = vcd.resolve(n)
        if s not in sigs:
            sigs.append(s)
    win = read_window(vcd, sigs, clock, c0, c1)
    return [Trace(s.name, s.width, s.var_type, win[s.name]) for s in sigs]


def add_diff(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("diff", help="first instruction where two timelines diverge",
                       description="Compare the timelines of two VCDs (TLM vs RTL, or two RTL runs) and "
                                   "report the first instruction whose start or end differs by more than "
                                   "--tol cycles, then draw both waveforms around it. Exit 1 when they differ.")
    p.add_argument("a", help="first VCD (e.g. the TLM's)")
    p.add_argument("b", help="second VCD (e.g. the RTL's)")
    p.add_argument("--tol", type=int_arg(0, MAX_CYCLES), default=0, metavar="N",
                   help="allowed difference in cycles (default 0)")
    p.add_argument("--align", choices=["auto", "start", "first", "none"], default="auto",
                   help="cycle 0 of each trace: START from dbg_cycles, the first instruction, or none "
                        "(auto: start when both have dbg_cycles, else first)")
    p.add_argument("--values", nargs="+", default=[], metavar="SIG",
                   help="also compare these signals' values cycle by cycle (e.g. dbg_load_q)")
    p.add_argument("--window", type=int_arg(0, MAX_DRAWN), default=12, metavar="N",
                   help=f"cycles drawn each side of the divergence (0: no waveform; at most {MAX_DRAWN:,})")
    add_json_arg(p)
    p.add_argument("--progress", action="store_true",
                   help="show a progress bar on stderr (default: only when stderr is a terminal)")
    return p


def _around(vcd: VcdFile, clock: Clock, unit: str, c_rel: int, off: int, half: int) -> str:
    names = [s.name for s in (vcd.find_probe(f"dbg_{unit}_{k}") for k in ("busy", "pc", "q")) if s]
    c0 = max(0, c_rel + off - half)
    c1 = c_rel + off + half
    if vcd.end_time is not None:
        c1 = max(c0, min(c1, clock.cycle(vcd.end_time)))
    return ascii_waves(read_traces(vcd, names, clock, c0, c1), c0, c1)


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
        start = max(ta.start_cycle - rep["offset_a"], tb.start_cycle - rep["offset_b"])
        la, lb = to_cycles(ca, None, cha[sa.name]), to_cycles(cb, None, chb[sb.name])
        c = diff_values(la, lb, rep["offset_a"], rep["offset_b"], end, start)
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
            print(f"\n{tag}: {vcd.path} around cycle {c + off} (relative {c})")
            print(_around(vcd, clock, unit, c, off, args.window))
    return 0 if rep["equal"] else 1
