"""`cosim disasm DIR`: print a saved Program one instruction per line, a ``; section NAME`` line
before each named section (``S.section``; a network's layers); a Program for several cores shows
each core's stream under a ``; core K`` line, pcs counted per core."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hw.config import load_config
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
    add_json_arg(p)
    return p


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config) if args.config else None
    from compiler.onnx_import.folder import is_imported_folder, load_program

    # a folder of `cosim import` keeps ONNX-named data files: its Program files alone are read
    prog = load_program(args.dir, cfg) if is_imported_folder(args.dir) else Program.load(args.dir, cfg)
    try:
        sections = program_sections(prog)
        per_core = program_core_sections(prog)
    except ValueError as e:  # the sections are layout.json's meta: name the file
        raise UserError(f"{Path(args.dir) / 'layout.json'}: {e}") from None
    if args.json:
        d = {"program": prog.name, "config": prog.config.name, "sections": sections,
             "insns": [insn_fields(i) for i in prog.insns]}
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
