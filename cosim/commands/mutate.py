"""`cosim mutate`: the RTL's mutation score (how many single-change mutants the checks kill)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from cosim.cli import UserError, add_json_arg, int_arg
from cosim.cluster.options import add_cluster_args, cluster_kwargs


# Fuzz Programs per mutant at most (each kind): a task holds its Programs in memory (about 17 KB each).
MAX_FUZZ = 10_000

def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("mutate", help="mutation score of the RTL: mutants of hw/rtl against the regression",
                       description="Make --count single-change mutants of hw/rtl (operators, constants, "
                                   "conditions, stuck bits; spread over every module, drawn with --seed), build "
                                   "ONE Verilator model holding them all (mutant schemata, mutant K chosen by "
                                   "+MUT=K), and run the shipped examples and a fuzz slice on each mutant as "
                                   "cluster tasks. A mutant is killed when a Program's outputs, error, cycles or "
                                   "counters differ from the original design's (checked first against the golden "
                                   "outputs and the TLM), or the run hangs. Prints the score, the table by module "
                                   "and kind, and the survivors; exit 1 below --target.")
    p.add_argument("--config", default="small", metavar="NAME",
                   help="hardware config (default: small, the fastest to build and run)")
    p.add_argument("--count", type=int_arg(1), default=200, help="number of mutants (default 200)")
    p.add_argument("--seed", type=int_arg(0), default=1, help="sampling seed, also the fuzz slice's (default 1)")
    p.add_argument("--fuzz", type=int_arg(0, MAX_FUZZ), default=50, metavar="N",
                   help=f"fuzz Programs per mutant (default 50, at most {MAX_FUZZ:,})")
    p.add_argument("--faults", type=int_arg(0, MAX_FUZZ), default=50, metavar="N",
                   help=f"more fuzz Programs per mutant, each with an injected fault (default 50, at most "
                        f"{MAX_FUZZ:,})")
    p.add_argument("--chunk", type=int_arg(1), default=10, metavar="N", help="mutants per task (default 10)")
    p.add_argument("--target", type=float, default=0.95, metavar="SCORE",
                   help="exit 1 when the score is below this (default 0.95)")
    p.add_argument("--only", default=None, metavar="K,K,...",
                   help="run only these mutants of the sample (numbers as --list prints them, e.g. the survivors "
                        "of a previous campaign); the score counts these only")
    p.add_argument("--list", action="store_true", help="only list the sampled mutants (nothing is built)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_arg(p)
    add_cluster_args(p)
    return p


def _table(rep: dict[str, Any]) -> str:
    lines = [f"{'module':<16}{'mutants':>8}{'killed':>8}", "-" * 32]
    for name, d in sorted(rep["by_module"].items()):
        lines.append(f"{name:<16}{d['mutants']:>8}{d['killed']:>8}")
    lines += ["", f"{'kind':<20}{'mutants':>8}{'killed':>8}", "-" * 36]
    for name, d in rep["by_kind"].items():
        lines.append(f"{name:<20}{d['mutants']:>8}{d['killed']:>8}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from hw.config import ConfigError, load_config
    from cosim.mutation import equivalents
    from cosim.mutation.campaign import prepare, repo_rtl, run_campaign, sample, score
    from cosim.mutation.points import scan_rtl

    try:
        load_config(args.config)
    except ConfigError as e:
        raise UserError(str(e)) from None
    if not 0.0 <= args.target <= 1.0:
        raise UserError(f"--target must be between 0 and 1, got {args.target}")
    only = None
    if args.only is not None:
        try:
            only = [int(t) for t in args.only.split(",") if t.strip()]
        except ValueError:
            raise UserError(f"--only takes mutant numbers separated by commas, got '{args.only}'") from None
        if not only:
            raise UserError(f"--only takes mutant numbers separated by commas, got '{args.only}'")
        if min(only) < 1 or max(only) > args.count:
            raise UserError(f"--only: mutant numbers must be 1..{args.count}, got '{args.only}'")
    sampled = sample(scan_rtl(repo_rtl()), args.count, args.seed) if args.list or only is not None else []
    if only is not None and max(only) > len(sampled):  # the RTL has fewer mutants than --count
        raise UserError(f"--only: the RTL has {len(sampled):,} mutants, so mutant numbers are 1..{len(sampled)}, got "
                        f"'{args.only}'")
    if args.list:
        if len(sampled) < args.count:
            print(f"cosim mutate: --count {args.count}: the RTL has {len(sampled):,} mutants; all are listed",
                  file=sys.stderr)
        listed = [(k, m) for k, m in enumerate(sampled, 1) if only is None or k in only]
        if args.json:
            print(json.dumps([m.to_json() for _, m in listed]))
        else:
            for k, m in listed:
                print(f"{k:4d} {m.file}:{m.line} [{m.kind}] {m.change}")
        return 0
    engine = cluster_kwargs(args)
    t0 = time.perf_counter()
    setup = prepare(args.config, args.count, args.seed, fuzz=args.fuzz, faults=args.faults)
    verdicts: dict[int, dict[str, Any]] = {}
    for verdicts in run_campaign(setup, chunk=args.chunk, progress=not args.quiet, only=only, **engine):
        pass
    rep = score(setup, verdicts, equivalents.reasons(setup.config.name), only)
    rep.update(seed=args.seed, fuzz=args.fuzz, faults=args.faults, programs=len(json.loads(setup.expected.read_text())),
               build_s=round(setup.build_s, 1), wall_s=round(time.perf_counter() - t0, 1))
    for s in rep["survivors"]:
        v = verdicts.get(s["k"])
        s["runs"] = v["runs"] if v else 0
    if args.json:
        print(json.dumps(rep))
    else:
        print(_table(rep))
        print()
        for s in rep["survivors"]:
            eq = f"  [equivalent: {s['equivalent']}]" if s["equivalent"] else ""
            why = f"  ({s['why']})" if s["why"] else ""
            print(f"survived  {s['k']:4d} {s['file']}:{s['line']} [{s['kind']}] {s['change']}{eq}{why}")
    chosen = f" chosen by --only of {rep['mutants'] + rep['not_chosen']}" if rep["not_chosen"] else ""
    line = (f"mutation score {rep['score']:.1%} ({rep['killed']} killed of {rep['mutants']} mutants{chosen}, "
            f"{rep['equivalent']} listed equivalent; config {rep['config']}, {rep['programs']} Programs each, "
            f"{rep['wall_s']} s)")
    print(line, file=sys.stderr if args.json else sys.stdout)
    return 0 if rep["score"] >= args.target else 1
