"""`cosim waves run KERNEL`: traced runs of one kernel on the RTL and the TLM, side by side.

Writes ``rtl.vcd`` (Verilator trace of the fast back-end, from reset, cut at the waves cap of
``testbench.rtl_model``), ``tlm.vcd``, a GTKWave save file beside each (``rtl.gtkw``,
``tlm.gtkw``: :mod:`cosim.waves.gtkw`) and ``tlm_trace.json`` (Chrome/Perfetto) into one folder, prints their paths, the
per-unit utilization of both models and the first instruction whose timing differs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hw.config import load_config
from cosim import models
from cosim.cli import MAX_CYCLES, add_config_arg, add_json_arg, folder_arg, int_arg
from cosim.commands.run import waves_note
from cosim.commands.waves_diff import run_diff
from cosim.waves.gtkw import GtkwKept, write_gtkw

UNITS = ("load", "compute", "store")


def add_run(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("run", help="run a kernel on RTL and TLM with tracing and compare the timelines",
                       description="Run KERNEL on the RTL (Verilator, fast memory) and the TLM with tracing, "
                                   "write both VCDs and a Perfetto JSON, print the utilization and the "
                                   "first timing divergence.")
    p.add_argument("kernel", help="example name, path.py:function, or a Program folder")
    add_config_arg(p)
    p.add_argument("-p", "--param", action="append", metavar="KEY=VALUE", help="kernel parameter (repeatable)")
    p.add_argument("--seed", type=int_arg(0), default=0)
    p.add_argument("-o", "--out", type=folder_arg, metavar="DIR",
                   help="output folder (default build/waves/KERNEL-CONFIG)")
    p.add_argument("--tol", type=int_arg(0, MAX_CYCLES), default=0,
                   help="cycles of start/end difference tolerated (default 0)")
    p.add_argument("--window", type=int_arg(1, MAX_CYCLES), default=24,
                   help="cycles of waveform shown around a divergence")
    add_json_arg(p)
    return p


def _utilization(res: dict) -> dict[str, float]:
    cyc = res.get("cycles") or 0
    return {u: round(100.0 * res.get(f"{u}_busy", 0) / cyc, 1) if cyc else 0.0 for u in UNITS}


def run_run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    job = models.make_job(args.kernel, cfg, args.param or [], args.seed)
    name = Path(args.kernel).name.replace(":", "_").replace(".py", "")
    out = Path(args.out or models.build_root() / "waves" / f"{name}-{cfg.name}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    paths = {"rtl_vcd": out / "rtl.vcd", "tlm_vcd": out / "tlm.vcd", "tlm_trace": out / "tlm_trace.json"}
    tlm = models.judge(job, models.run_tlm(job, vcd=paths["tlm_vcd"], trace=paths["tlm_trace"]))
    rtl = models.judge(job, models.run_rtl([job], waves=True, vcd=paths["rtl_vcd"])[0])
    for k, p in paths.items():
        if not p.is_file():
            raise OSError(f"{p}: the {k.replace('_', ' ')} was not written")
    kept = []
    for m in ("rtl", "tlm"):
        try:
            paths[f"{m}_gtkw"] = write_gtkw(paths[f"{m}_vcd"])
        except GtkwKept as e:
            kept.append(str(e))
    report = {"kernel": job.kernel, "config": cfg.name, "match": tlm["match"] and rtl["match"],
              "files": {k: str(p) for k, p in paths.items()},
              "utilization_pct": {"tlm": _utilization(tlm), "rtl": _utilization(rtl)},
              "cycles": {"tlm": tlm["cycles"], "rtl": rtl["cycles"]}, "rtl_waves": rtl.get("waves"),
              "notes": kept}
    if args.json:
        print(json.dumps(report))
        return 0 if report["match"] else 1
    print(f"{job.kernel} on {cfg.name}: outputs {'agree' if report['match'] else 'DIFFER'}")
    for k, p in paths.items():
        note = f" {waves_note(rtl['waves'])}" if k == "rtl_vcd" and rtl.get("waves") else ""
        print(f"  {k:<10} {p}{note}")
    for n in kept:
        print(f"  {n}")
    print(f"  {'':<10} {'cycles':>8} " + " ".join(f"{u + ' busy %':>16}" for u in UNITS))
    for m, r in (("TLM", tlm), ("RTL", rtl)):
        u = _utilization(r)
        print(f"  {m:<10} {r['cycles'] or '-':>8} " + " ".join(f"{u[x]:>16.1f}" for x in UNITS))
    print("\nTimeline comparison (A = TLM, B = RTL):")
    run_diff(argparse.Namespace(a=str(paths["tlm_vcd"]), b=str(paths["rtl_vcd"]), tol=args.tol, align="auto",
                                values=[], window=args.window, json=False, progress=False))
    # A timing divergence is information for the user, not a failure of the command.
    return 0 if report["match"] else 1
