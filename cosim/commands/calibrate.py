"""`cosim calibrate`: fit the TLM's timing overheads to RTL micro-benchmarks (cosim/calibrate.py)."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from hw.config import load_config
from cosim.cli import UserError, add_config_arg, add_json_arg


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("calibrate", help="fit the TLM timing constants to RTL micro-benchmarks",
                       description="Run the calibration micro-benchmarks (DMA size sweep, ALU length sweep, "
                                   "tokens, load/store contention, fetch, error paths) on the RTL (Verilator, "
                                   "fast DRAM model), fit the TLM's overhead constants (sim/tlm/timing.py) to "
                                   "their cycles and counters, and print the fit and its residuals.")
    add_config_arg(p)
    p.add_argument("--write", action="store_true",
                   help="write the fit beside the config's JSON file (my.json: my.timing.json; a shipped config: "
                        "hw/configs/<name>.timing.json) when it differs from the defaults (nothing is "
                        "written when the defaults already fit)")
    p.add_argument("--all", action="store_true", help="print every benchmark, not only those with residuals")
    add_json_arg(p)
    return p


def run(args: argparse.Namespace) -> int:
    from cosim import calibrate as cal
    from cosim.models import calibration_path

    from cosim.models import Timing, TimingError

    cfg = load_config(args.config)
    if cfg.num_cores != 1:  # before the first RTL build: one line
        raise UserError(f"config '{cfg.name}' has {cfg.num_cores} cores; calibrate runs on one-core configs "
                        f"(its micro-benchmarks are one-core Programs)")
    log = (lambda s: print(s, file=sys.stderr, flush=True))
    try:  # the config's calibration file as every other command reads it: the fit below starts from the defaults
        Timing.from_config(cfg)
        unreadable = None
    except TimingError as e:
        unreadable = str(e)
        print(f"note: {unreadable}; every TLM run of this config refuses it until it is fixed or removed; the "
              "fit below starts from the defaults", file=sys.stderr)
    res = cal.calibrate(cfg, log=log)
    written = cal.write_timing(cfg, res) if args.write else None
    if args.json:
        d = res.to_json()
        d["written"] = str(written) if written else None
        d["unreadable_calibration"] = unreadable
        print(json.dumps(d))
        return 0
    print(f"config {cfg.name}: {len(res.names)} micro-benchmarks, {len(res.values)} constants, "
          f"Jacobian rank {res.rank}, {res.iterations} iteration(s), {res.wall_s:.1f} s")
    print(f"{'constant':<22}{'default':>8}{'fitted':>8}")
    for k, v in res.values.items():
        mark = "  *" if v != res.defaults[k] else ""
        print(f"{k:<22}{res.defaults[k]:>8}{v:>8}{mark}")
    if res.rank < len(res.identifiable):
        print(f"note: {len(res.identifiable) - res.rank} combination(s) of constants are only observable as "
              f"sums (e.g. pop/WAIT/PUSH cycles of a unit); the fit keeps their defaults when those fit")
    resid = res.residuals
    err = res.cycle_errors_pct()
    print()
    print(f"{'benchmark':<24}{'RTL cycles':>11}{'TLM cycles':>11}{'error %':>9}  counter residuals (TLM - RTL)")
    for k, name in enumerate(res.names):
        r = resid[k]
        if not args.all and not r.any():
            continue
        cnt = ", ".join(f"{o}{int(v):+d}" for o, v in zip(cal.OBSERVED[1:], r[1:]) if v)
        print(f"{name:<24}{int(res.rtl[k, 0]):>11}{int(res.tlm[k, 0]):>11}{err[k]:>+9.2f}  {cnt or '-'}")
    n_bad = int((resid != 0).any(axis=1).sum())
    print(f"residuals: {n_bad} of {len(res.names)} benchmarks differ; cycles |error| mean "
          f"{np.abs(err).mean():.3f} %, max {np.abs(err).max():.3f} %; sum |residual| {int(np.abs(resid).sum())}")
    path = calibration_path(cfg)
    if args.write:
        if written:
            print(f"wrote {written}")
        else:
            print(f"the defaults fit: nothing written"
                  + (f" ({path} exists and still overrides them{', unreadable' if unreadable else ''}; delete it "
                     "to use the defaults)" if path.is_file() else ""))
    elif res.changed:
        print(f"(use --write to store the fitted values in {path})")
    return 0
