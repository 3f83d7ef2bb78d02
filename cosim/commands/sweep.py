"""`cosim sweep SPEC`: which config gives the best cycles per area for my workloads.

Runs a design-space sweep (a grid or random sample of config parameters x workloads, written as a
small YAML or JSON spec: docs/sweep.md, sweeps/example.yaml) on the cluster engine, and writes
the table (CSV and JSON), the Pareto front of cycles vs area per workload and its PNG plots.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cosim.cli import UserError, add_json_arg, folder_arg, int_arg
from cosim.cluster.interrupts import interruptible
from cosim.cluster.options import add_cluster_args, cluster_kwargs


def _rtl_arg(text: str) -> str | int:
    if text in ("none", "all"):
        return text
    try:
        return int_arg(1, 1_000_000, "none, all or a positive number of sampled points")(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected none, all or a number of sampled points 1..1000000, not "
                                         f"{text!r}") from None


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("sweep", help="design-space sweep: configs x workloads, cycles, utilization, area, "
                                     "Pareto fronts",
                       description="Sweep the config parameters of a YAML/JSON spec (a grid, or a random sample of "
                                   "it) times its workloads (examples, GEMM operators with shapes, the digits "
                                   "network). Each point runs on the TLM as one engine task (an embedded local "
                                   "cluster, or --scheduler); each config's area comes from yosys synthesis "
                                   "(hw/synth.py, cached per config under build/synth). Writes sweep.csv, "
                                   "sweep.json (rows, fronts, best points) and pareto-<workload>.png in --out. "
                                   "A config that hw/config.py rejects, or a workload that does not fit a config, "
                                   "is an invalid point with its reason. Exit 1 when a model disagrees with the "
                                   "golden path or the RTL's cycles differ from the TLM's. Every task's record is appended to "
                                   "--results (default: <out>/results.jsonl), so running the same sweep again skips "
                                   "the points already done. See docs/sweep.md.")
    p.add_argument("spec", metavar="SPEC", help="the sweep spec (.yaml/.yml, or .json)")
    p.add_argument("--out", type=folder_arg, default=None, metavar="DIR",
                   help="output folder (default: build/sweep/<spec name>)")
    p.add_argument("--fresh", action="store_true", help="delete the results file first (run every point again)")
    p.add_argument("--area", choices=["synth", "cached", "none"], default="synth",
                   help="synth: synthesize the configs not in the cache (default); cached: use only cached areas; "
                        "none: no area (no front)")
    p.add_argument("--rtl", type=_rtl_arg, default=None, metavar="none|all|N",
                   help="also run the RTL on every valid point (all) or on N sampled ones, and report the TLM-vs-RTL "
                        "cycle error (default: the spec's rtl:)")
    add_cluster_args(p)
    add_json_arg(p)
    return p


@interruptible
def run(args: argparse.Namespace) -> int:
    from cosim.sweep.run import all_agree, claim_out_dir, default_out_dir, print_report, run_sweep, sweep_keys
    from cosim.sweep.spec import RtlChoice, load_spec

    cluster = cluster_kwargs(args)  # a bad --scheduler or --results is one line before anything runs
    spec = load_spec(args.spec)
    out = Path(args.out) if args.out else default_out_dir(spec)
    results = Path(cluster["results"]) if cluster["results"] else out / "results.jsonl"
    spec_file = Path(args.spec).resolve()
    if spec_file == results.resolve():
        given = f"--results {cluster['results']}" if cluster["results"] else f"its results file (--out {out})"
        raise UserError(f"{args.spec}: the sweep appends its records there ({given}); give another")
    if spec_file in {(out / "sweep.csv").resolve(), (out / "sweep.json").resolve()}:
        raise UserError(f"{args.spec}: the sweep writes its report there (--out {out}); move the spec or choose "
                        f"another --out")
    claim_out_dir(out)
    if args.fresh and results.exists():
        from cosim.cluster.results_file import ResultsFile

        recs = ResultsFile(results).load()  # a file that is not a results file is refused, not deleted
        if recs and not sweep_keys(recs):  # another campaign's (fuzz, regress, ...): not ours to delete
            raise UserError(f"--fresh: {results} holds another campaign's records (keys like {next(iter(recs))!r}); "
                            f"it is not deleted: give the sweep a results file of its own")
        results.unlink()
    rtl = None
    if args.rtl is not None:
        rtl = RtlChoice(args.rtl) if isinstance(args.rtl, str) else RtlChoice("sample", args.rtl, spec.rtl.seed)
    report = run_sweep(spec, out, results, scheduler=cluster["scheduler"], workers=cluster["workers"],
                       area_mode=args.area, rtl=rtl, task_timeout=cluster["timeout_s"])
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
    return 0 if all_agree(report) else 1
