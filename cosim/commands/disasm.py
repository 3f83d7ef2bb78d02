"""`cosim disasm DIR`: print a saved Program one instruction per line, a ``; section NAME`` line
before each named section (``S.section``; a network's layers); a Program for several cores shows
each core's stream under a ``; core K`` line, pcs counted per core. A dynamic Program folder holds the
maximum's Program (a first line says so); ``--set NAME=N`` shows the Program of value N."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hw.config import load_config
from hw.dynamic_driver import DRIVER_FILE, Driver
from hw.isa import insn_fields
from hw.program import Program
from cosim.cli import UserError, add_json_arg, config_arg
from cosim.section_report import program_core_sections, program_sections


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("disasm", help="disassemble a Program folder, one line per instruction",
                       description="Disassemble a saved Program folder (insn.bin), one line per instruction; a "
                                   "'; section NAME' line starts each named section (a network's layer).")
    p.add_argument("dir", help="Program folder (written by `cosim compile`)")
    p.add_argument("--config", type=config_arg, default=None, metavar="NAME|PATH",
                   help="check the Program against this config (default: the config it names)")
    p.add_argument("--set", action="append", metavar="NAME=N", dest="set_values",
                   help="a dynamic Program folder: the Program of this value (default: the maximum's, which the "
                        "folder holds)")
    add_json_arg(p)
    return p


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config) if args.config else None
    from compiler.onnx_import.folder import is_imported_folder, load_program

    dynamic = None
    if args.set_values:  # the driver's Program of that value (a folder that is not dynamic is refused)
        from cosim.dynamic_run import dynamic_job

        job = dynamic_job(args.dir, cfg, args.set_values)
        prog, dynamic = job.program, job.meta["dynamic"]
    elif is_imported_folder(args.dir):  # a folder of `cosim import` keeps ONNX-named data files
        prog = load_program(args.dir, cfg)
    else:
        prog = Program.load(args.dir, cfg)
        if (Path(args.dir) / DRIVER_FILE).is_file():
            driver = Driver.load(args.dir)
            dynamic = {driver.name: driver.hi}
    if dynamic is not None and not args.set_values and not args.json:
        ((name, v),) = dynamic.items()
        print(f"; a dynamic Program: the Program of {name}={v} (the maximum); --set {name}=N shows another value")
    try:
        sections = program_sections(prog)
        per_core = program_core_sections(prog)
    except ValueError as e:  # the sections are layout.json's meta: name the file
        raise UserError(f"{Path(args.dir) / 'layout.json'}: {e}") from None
    if args.json:
        d = {"program": prog.name, "config": prog.config.name, "sections": sections,
             "insns": [insn_fields(i) for i in prog.insns]}
        if dynamic is not None:  # the variable and the value shown
            d["dynamic"] = dynamic
        if prog.num_cores > 1:  # insns stays the flat stream; each core's window into it and its sections
            d["cores"] = [{"core": k, "first": first, "count": count, "sections": per_core[k]}
                          for k, (first, count) in enumerate(prog.windows)]
        print(json.dumps(d))
        return 0
    if prog.num_cores == 1:
        print(prog.isa.disasm_stream(prog.insns, sections))
        return 0
    print("\n".join(f"; core {k}\n" + prog.isa.disasm_stream(prog.core_insns(k), per_core[k])
                    for k in range(prog.num_cores)))
    return 0
