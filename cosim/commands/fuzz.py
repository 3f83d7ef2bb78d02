"""`cosim fuzz`: differential fuzzing of random Programs (reference vs TLM, and TLM vs RTL)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from cosim.cli import UserError, add_json_arg, config_arg, float_arg, folder_arg, int_arg
from cosim.cluster.interrupts import interruptible
from cosim.cluster.options import add_cluster_args, cluster_kwargs


# the options of a campaign, which a replay (its case from fuzz.json) does not take
CAMPAIGN_OPTIONS = ("count", "seed", "rtl", "config", "fault_rate", "save_dir", "no_shrink", "batch", "chunk",
                    "coverage", "no_steer", "scheduler", "workers", "results", "task_timeout")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("fuzz", help="differential fuzzing: random Programs on the reference, TLM (and RTL)",
                       description="Generate random valid Programs (and, for a share, Programs with one injected "
                                   "fault), run them on the sequential reference interpreter and the TLM (with "
                                   "--rtl also on the RTL, 1 in 5 on the protocol back-end) and compare outputs, "
                                   "count counters and errors bit-exactly. Failing cases are shrunk and saved. "
                                   "The cases run as tasks (chunks of --chunk cases) on an embedded Dask cluster "
                                   "of this machine's cores, or on a running cluster with --scheduler; the counts "
                                   "are the same either way.")
    p.add_argument("--count", type=int_arg(1, 1_000_000), default=200,
                   help="number of Programs (default 200, at most 1,000,000: each is a task made up front)")
    p.add_argument("--seed", type=int_arg(0), default=1, help="campaign seed (default 1)")
    p.add_argument("--rtl", action="store_true", help="also run every Program on the RTL (Verilator) and compare")
    p.add_argument("--config", type=config_arg, default=None, metavar="NAME|PATH",
                   help="hardware config (default: every shipped one-core config, round-robin); several cores "
                        "(quad, small2, NAME-xN: a shipped config with N cores) get one random stream per core "
                        "with BARRIERs; 'multicore': every config of 2..4 cores derived from default and small, "
                        "round-robin")
    p.add_argument("--fault-rate", type=float_arg(0.0, 1.0, "a probability in [0, 1]"), default=0.2, metavar="P",
                   help="chance that a Program gets one injected fault (default 0.2; a Program with no place for the "
                        "fault drawn stays valid, so 1 gives a few valid ones too)")
    p.add_argument("--save-dir", type=folder_arg, metavar="DIR",
                   help="save each failing case (original and shrunk Program folders)")
    p.add_argument("--no-shrink", action="store_true", help="save failing cases without shrinking them")
    p.add_argument("--batch", type=int_arg(1), default=50, help="Programs per RTL simulator process (default 50)")
    p.add_argument("--chunk", type=int_arg(1), default=None, metavar="N",
                   help="cases per task (default: 50; with --rtl, --batch per config)")
    p.add_argument("--coverage", action="store_true",
                   help="functional coverage of the ISA (cosim/fuzz/bins.py): print hit counts per bin group, the "
                        "empty bins and the unreachable ones with the reason (--json: a \"coverage\" key); the "
                        "generator is steered toward the empty bins after each round of chunks")
    p.add_argument("--no-steer", action="store_true",
                   help="with --coverage: collect the bins without steering (the cases are the unsteered ones)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--replay", metavar="DIR", type=folder_arg,
                   help="replay one failing case saved by --save-dir (its fuzz.json 'rerun'): regenerate it, check "
                        "what the reference expects, run the models; exit 1 while it still fails")
    add_json_arg(p)
    add_cluster_args(p)
    p.set_defaults(campaign_defaults={d: p.get_default(d) for d in CAMPAIGN_OPTIONS})
    return p


@interruptible
def run(args: argparse.Namespace) -> int:
    from cosim.fuzz.campaign import fuzz_configs, replay_failure, rtl_available
    from cosim.fuzz.distributed import run_distributed_campaign

    if args.replay:
        # a replay regenerates its case from fuzz.json: a campaign's options would be silently ignored
        given = [k for k, v in args.campaign_defaults.items() if getattr(args, k) != v]
        if given:
            raise UserError(f"--replay takes its case from fuzz.json: --{given[0].replace('_', '-')} does not go "
                            f"with it")
        r = replay_failure(args.replay)
        if args.json:
            print(json.dumps(r))
        else:
            state = "still fails" if r["still_fails"] else "no longer fails"
            print(f"{args.replay}: {r['kind']} case {state}{': ' if r['problems'] else ''}"
                  f"{'; '.join(r['problems'])} (reference error: {r['got'] or 'none'}"
                  f"{', RTL included' if r['rtl'] else ''})")
        return 1 if r["still_fails"] else 0

    if args.count < 0:
        raise UserError(f"--count must be >= 0, got {args.count}")
    if not 0.0 <= args.fault_rate <= 1.0:
        raise UserError(f"--fault-rate must be between 0 and 1, got {args.fault_rate}")
    if args.no_steer and not args.coverage:
        raise UserError("--no-steer goes with --coverage (without it nothing is steered)")
    if args.batch < 1:
        raise UserError(f"--batch must be >= 1, got {args.batch}")
    if args.no_shrink and not args.save_dir:
        raise UserError("--no-shrink goes with --save-dir (only saved cases are shrunk)")
    if args.batch != args.campaign_defaults["batch"] and not args.rtl:
        raise UserError("--batch goes with --rtl (it counts Programs per RTL simulator process)")
    configs = None
    if args.config:
        fuzz_configs([args.config])  # a bad name fails here with one line
        configs = [args.config]
    if args.rtl:
        why = rtl_available()
        if why:
            raise UserError(f"--rtl: the RTL runner is not available: {why}")
    engine = cluster_kwargs(args)
    if args.save_dir:  # a place that cannot take the cases is one line now, not a lost chunk later
        d = Path(args.save_dir)
        if d.exists() and not d.is_dir():
            raise UserError(f"--save-dir {args.save_dir}: is a file, not a folder")
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"--save-dir {args.save_dir}: cannot make the folder: {e.strerror or e}") from None
        if not os.access(d, os.W_OK):
            raise UserError(f"--save-dir {args.save_dir}: not writable here")
    s = run_distributed_campaign(args.count, args.seed, configs, rtl=args.rtl, fault_rate=args.fault_rate,
                                 save_dir=args.save_dir, do_shrink=not args.no_shrink, batch=args.batch,
                                 chunk=args.chunk, progress=not args.quiet, coverage=args.coverage,
                                 steer=args.coverage and not args.no_steer, **engine)
    if args.json:
        print(json.dumps(s.to_json()))
    else:
        for f in s.failures:
            where = f" -> {f['saved']}" if f.get("saved") else f" (not saved: {f['not_saved']})" \
                if f.get("not_saved") else ""
            if f["kind"] == "task":  # a chunk that did not run as a task: its cases, not one generated case
                print(f"FAIL {f['config']}: {'; '.join(f['problems'])}")
                continue
            print(f"FAIL case {f['index']} ({f['config']}, {f['kind']}, generator seed {f.get('generator_seed')}): "
                  f"{'; '.join(f['problems'])}{where}")
        if args.coverage:
            from cosim.fuzz.bins import report_lines
            print("\n".join(report_lines(s.coverage_report())))
        print(s.line())
    print(s.line(), file=sys.stderr) if args.json else None
    return 0 if not (s.mismatches or s.errors) else 1
