"""`cosim run KERNEL --model golden|tlm|rtl|all`: run one kernel or Program folder and check it."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hw.config import load_config
from cosim import models
from cosim.cli import add_json_arg


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("run", help="run a kernel on golden, TLM, RTL or all, and check the outputs",
                       description="Run KERNEL (an example name, path.py:function, or a Program folder) on one "
                                   "model or all of them and compare the outputs with the golden path.")
    p.add_argument("kernel", help="example name (see `cosim list`), path.py:function, or a Program folder")
    p.add_argument("--model", choices=[*models.MODELS, "all"], default="all")
    p.add_argument("--config", default=None, metavar="NAME|PATH",
                   help="hardware config: a name from hw/configs or a JSON path (default: default, or the "
                        "config a Program folder was made for)")
    p.add_argument("-p", "--param", action="append", metavar="KEY=VALUE", help="kernel parameter (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--sim", choices=["verilator", "icarus"], default="verilator", help="RTL simulator")
    p.add_argument("--mem", choices=["fast", "protocol"], default="fast", help="RTL memory back-end")
    p.add_argument("--waves", action="store_true", help="RTL: write a VCD named after kernel, config, back-end")
    p.add_argument("--vcd", metavar="FILE", help="TLM: write the timeline VCD here")
    p.add_argument("--trace", metavar="FILE", help="TLM: write a Chrome/Perfetto trace JSON here")
    add_json_arg(p)
    return p


def run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config) if args.config else None
    job = models.make_job(args.kernel, cfg, args.param or [], args.seed)
    cfg = job.config
    chosen = list(models.MODELS) if args.model == "all" else [args.model]
    reports = []
    for m in chosen:
        t0 = time.perf_counter()
        if m == "golden":
            res = models.run_golden(job)
        elif m == "iss":
            res = models.run_iss(job)
        elif m == "tlm":
            res = models.run_tlm(job, vcd=args.vcd, trace=args.trace)
        else:
            res = models.run_rtl([job], mem=args.mem, simulator=args.sim, waves=args.waves)[0]
        if not res.wall_s:
            res.wall_s = time.perf_counter() - t0
        reports.append(models.judge(job, res))
    ok = all(r["match"] for r in reports)
    for r in reports:
        if not r["match"] and r["model"] in ("tlm", "rtl"):
            r["vcd"] = _trace_failure(job, r["model"], args)
    if args.json:
        out = reports[0] if len(reports) == 1 else {"kernel": job.kernel, "config": cfg.name, "match": ok,
                                                     "results": reports}
        print(json.dumps(out))
    else:
        for r in reports:
            status = "ok" if r["match"] else "MISMATCH"
            cyc = f"{r['cycles']} cycles" if r.get("cycles") else ""
            extra = r.get("mismatch") or (r["error"] and f"error {r['error'].get('name')} at instruction "
                                          f"{r['error'].get('pc')}") or ""
            print(f"{job.kernel:<16} {r['model']:<7} {status:<9} {cyc:<16} {r['wall_s']:.3f} s  {extra}")
            if r.get("vcd"):
                print(f"{'':<16} {'':<7} waveform: {r['vcd']}")
    if not ok and not args.json:
        print(f"cosim run: {job.kernel} does not agree with golden", file=sys.stderr)
    return 0 if ok else 1


def _trace_failure(job: models.Job, model: str, args: argparse.Namespace) -> str:
    """The VCD of a failing model's run: the one already taken, or a traced re-run."""
    if model == "tlm" and args.vcd:
        return str(Path(args.vcd).resolve())
    out = Path("build") / "mismatch" / f"{Path(job.kernel).name}-{job.config.name}"
    out.mkdir(parents=True, exist_ok=True)
    vcd = (out / f"{model}.vcd").resolve()
    if model == "tlm":
        models.run_tlm(job, vcd=vcd)
    else:
        models.run_rtl([job], mem=args.mem, simulator=args.sim, waves=True, vcd=vcd)
    return str(vcd)
