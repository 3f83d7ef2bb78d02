"""`cosim compile KERNEL -o DIR`: compile an example (or file.py:function) into a Program folder."""

from __future__ import annotations

import argparse
import json

from compiler.dynamic import save_dynamic
from compiler.dynamic_examples import DYNAMIC_EXAMPLES, narrowed
from compiler.dynamic_user import compile_user, one_var, user_dynamic, var_refusal
from compiler.examples import make_case, parse_params
from hw.config import load_config
from cosim.cli import add_config_arg, add_json_arg, claim_program_folder, folder_arg, int_arg


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("compile", help="compile a kernel into a Program folder (with inputs and expected outputs)",
                       description="Compile an example kernel (see `cosim list`) or a user kernel given as "
                                   "path/to/file.py:function into a Program folder: insn.bin, regs.json, regs.h, "
                                   "layout.json, program.lst, inputs.npz, dram.bin, expected.npz. For a user "
                                   "kernel, give each tensor argument as -p NAME=DIMxDIM[:DTYPE] and constants "
                                   "as -p NAME=VALUE.")
    p.add_argument("kernel", metavar="KERNEL", help="example name or path/to/file.py:function")
    p.add_argument("-o", "--out", type=folder_arg, required=True, metavar="DIR",
                   help="Program folder to write")
    p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a parameter (repeatable), e.g. -p shape=4x3x33 -p tile=8")
    p.add_argument("--seed", type=int_arg(0), default=None,
                   help="seed of the random inputs (default 0; a dynamic example draws its inputs when it is run: "
                        "cosim run FOLDER --set ... --seed N)")
    p.add_argument("--var", metavar="NAME=MAX", action="append",
                   help="a dynamic example: its variable in a narrower range (fewer driver pieces). A user kernel "
                        "with a run-time dimension: the variable NAME in 1..MAX (or NAME=MIN..MAX), "
                        "used as a -p tensor dimension or constant (-p X=NAMEx16); the folder runs with "
                        "cosim run DIR --set NAME=N")
    p.add_argument("--verify-all", action="store_true",
                   help="a dynamic example or a kernel with --var: trace every value of its variable and check the "
                        "driver against each (the default checks samples of every piece)")
    add_config_arg(p)
    add_json_arg(p)
    return p


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    claim_program_folder(args.out)
    args.var = one_var(args.var)
    if args.var is not None and args.kernel not in DYNAMIC_EXAMPLES and ":" not in args.kernel:
        raise ValueError(var_refusal(args.kernel))
    if args.kernel in DYNAMIC_EXAMPLES or args.var is not None:  # one folder for every value, with its drivers
        what = "a dynamic example" if args.kernel in DYNAMIC_EXAMPLES else "a kernel with --var"
        if args.param and args.kernel in DYNAMIC_EXAMPLES:
            raise ValueError(f"{args.kernel}: a dynamic example takes no -p (its variable is set at run time)")
        if args.seed is not None:
            raise ValueError(f"{args.kernel}: {what} draws its inputs when it is run (cosim run FOLDER "
                             f"--set ... --seed N), not here")
        if args.kernel in DYNAMIC_EXAMPLES:
            ex = DYNAMIC_EXAMPLES[args.kernel]
            dp = (ex if args.var is None else narrowed(ex, args.var)).compile(cfg, verify_all=args.verify_all)
        else:
            dp = compile_user(user_dynamic(args.kernel, args.param, args.var), cfg, verify_all=args.verify_all)
        d = save_dynamic(dp, args.out)
        line = {"kernel": args.kernel, "config": cfg.name, "dir": str(d), "variable": dp.var.name,
                "range": [dp.var.min, dp.var.max], "pieces": len(dp.pieces), "traces": dp.traces}
        print(json.dumps(line) if args.json else f"{args.kernel}: {dp.var.name} in {dp.var.min}..{dp.var.max}, "
              f"{len(dp.pieces)} driver pieces from {dp.traces} traces, config {cfg.name} -> {d}")
        return 0
    if args.verify_all:
        raise ValueError(f"{args.kernel}: --verify-all checks a dynamic Program's driver, and this is not one "
                         f"(dynamic examples: {', '.join(sorted(DYNAMIC_EXAMPLES))}; a user kernel takes --var)")
    args.seed = 0 if args.seed is None else args.seed
    params = parse_params(args.kernel, args.param)
    case = make_case(args.kernel, cfg, params, seed=args.seed)
    prog = case.program
    d = prog.save(args.out)
    summary = {"kernel": case.name, "config": cfg.name, "dir": str(d), "insns": len(prog.insns),
               "regions": [r.to_json() for r in prog.regions], "seed": args.seed}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{case.name}: {len(prog.insns)} instructions, {len(prog.regions)} regions, config {cfg.name} "
              f"-> {d}")
    return 0
