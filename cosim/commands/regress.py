"""`cosim regress`: the cocotb regression as engine tasks, with a JUnit XML report at the end."""

from __future__ import annotations

import argparse
import json
import sys

from hw.config import list_configs, load_config
from cosim.cli import add_json_arg, claim_outputs, config_arg, int_arg, output_arg
from cosim.cluster.interrupts import interruptible
from cosim.cluster.options import add_cluster_args, cluster_kwargs

MEMS = ("fast", "protocol")
SIMULATORS = ("verilator", "icarus")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("regress", help="the cocotb regression (examples x configs x back-ends x seeds) as tasks",
                       description="Run the cocotb regression of tests/test_rtl_regression.py over its full matrix: "
                                   "every example on every config x memory back-end x seed (Verilator; Icarus on "
                                   "each config's fast back-end and default's protocol one, seed 0), and the unit "
                                   "cases of tests/units/ per config and back-end. Each cell (one simulator process) "
                                   "is a task on an embedded Dask cluster of this machine's cores, or on a running "
                                   "cluster with --scheduler. The JUnit XML names the testcases as pytest does "
                                   "(test_examples[small-fast-0-verilator], test_unit_cases[small-fast]). Exit 1 "
                                   "when a testcase fails. Needs the repository's tests/ folder (a checkout).")
    p.add_argument("--configs", type=config_arg, nargs="+", metavar="NAME|PATH", default=None,
                   help="hardware configs (default: every shipped config)")
    p.add_argument("--backends", nargs="+", choices=MEMS, default=list(MEMS), help="memory back-ends (default: both)")
    p.add_argument("--seeds", type=int_arg(1, 100_000), default=3, metavar="N",
                   help="seeds 0..N-1 per cell (default 3, at most 100,000)")
    p.add_argument("--simulators", nargs="+", choices=SIMULATORS, default=list(SIMULATORS),
                   help="simulators (default: both; Icarus cells are skipped when it is not installed)")
    p.add_argument("--examples", nargs="+", metavar="NAME", default=None, help="only these examples (default: all)")
    p.add_argument("--no-units", action="store_true", help="leave out the unit cases of tests/units/")
    p.add_argument("--examples-per-task", type=int_arg(0), default=0, metavar="N",
                   help="split each cell's examples into tasks of N (more simulator processes, spread wider; "
                        "default 0: a cell's examples in one simulator process)")
    p.add_argument("--junit", type=output_arg, default=None, metavar="FILE.xml",
                   help="write the JUnit XML here at the end")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_arg(p)
    add_cluster_args(p)
    return p


@interruptible
def run(args: argparse.Namespace) -> int:
    from compiler.examples import list_examples
    from cosim.regress.cells import regression_cells
    from cosim.regress.regression import run_regression

    for option in ("configs", "backends", "simulators", "examples"):  # a repeat would name one result twice
        given = getattr(args, option) or []
        twice = sorted({v for v in given if given.count(v) > 1})
        if twice:
            raise ValueError(f"--{option}: {', '.join(twice)} given twice")
    configs = args.configs or list_configs()
    for c in configs:
        load_config(c)  # a bad name fails here, in one line
    claim_outputs([("--results", args.results), ("--junit", args.junit)], [])  # one file would replace the other
    if args.examples:
        known = list_examples()
        bad = [n for n in args.examples if n not in known]
        if bad:
            raise ValueError(f"--examples: no example named {', '.join(bad)} (see `cosim list`)")
    engine = cluster_kwargs(args)
    cells = regression_cells(configs, list(dict.fromkeys(args.backends)), args.seeds,
                             list(dict.fromkeys(args.simulators)), args.examples, not args.no_units,
                             args.examples_per_task)
    if not cells:
        raise ValueError("nothing to run: the options leave no cell (Icarus runs each config's fast back-end and "
                         "default's protocol one, seed 0; large examples do not run on the protocol back-end or "
                         "Icarus; the unit cases are one-core, on Verilator)")
    reg = run_regression(cells, args.junit, progress=not args.quiet, **engine)
    if args.json:
        print(json.dumps(reg.to_json()))
        print(reg.line(), file=sys.stderr)
    else:
        width = max(len(t.name) for t in reg.testcases)
        for t in reg.testcases:
            why = f"  {t.message.splitlines()[0]}" if t.message and t.outcome != "passed" else ""
            print(f"{t.name:<{width}}  {t.outcome.upper():<7} {t.time:8.1f} s{why}")
        print(reg.line())
    return 0 if reg.ok else 1
