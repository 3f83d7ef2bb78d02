"""Before/after of the TLM's fast-forward (``sim/tlm/fast_forward.py``) on the long Programs, and
the TLM/raw-harness ratio: ``python -m cosim.bench.tlm_fast_forward [config ...] [--no-raw]``.

For each Program: the TLM's wall (RunResult.wall_s: register config to DONE) with the
fast-forward off (``COSIM_TLM_FAST_FORWARD=0``) and on, the raw Verilator harness's wall, and a
check that both TLM runs report the same cycles, counters, outputs and error. GEMM Programs run
on the TLM only when the raw harness cannot run them.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

from cosim import models
from cosim.bench.suite import alu_loop, dma_stream, long_programs, vadd_large_big
from hw.config import load_config
from hw.program import Program


def programs(cfg: Any) -> list[tuple[Program, bool]]:
    """The long Programs fast-forward is for, with whether the raw harness runs them (no GEMM):
    the bench's own long ones (``make bench``'s >= 1 M-cycle rows on small and default), then
    more."""
    from compiler.examples import make_case

    n_vecs = {"small": 60000}.get(cfg.name, 48000)  # about 1 M cycles
    return [(p, True) for p in long_programs(cfg)] + [(vadd_large_big(cfg).program, True)] + [
        (alu_loop(cfg, 1_050_000 // (64 + 3), 64), True), (dma_stream(cfg, n_vecs), True),
        (make_case("vadd_large", cfg).program, True), (make_case("conv2d_resnet", cfg).program, False)]


def _tlm(p: Program, ff: bool) -> Any:
    old = os.environ.get("COSIM_TLM_FAST_FORWARD")
    os.environ["COSIM_TLM_FAST_FORWARD"] = "1" if ff else "0"
    try:
        return models.tlm(p)
    finally:
        if old is None:
            del os.environ["COSIM_TLM_FAST_FORWARD"]
        else:
            os.environ["COSIM_TLM_FAST_FORWARD"] = old


def _same(a: Any, b: Any) -> bool:
    return (a.cycles == b.cycles and a.counters == b.counters and a.error == b.error
            and a.outputs.keys() == b.outputs.keys()
            and all(np.array_equal(a.outputs[k], b.outputs[k]) for k in a.outputs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs", nargs="*", default=["small", "default"])
    ap.add_argument("--no-raw", action="store_true", help="skip the raw Verilator harness")
    ap.add_argument("--gemm-raw", action="store_true", help="also run GEMM Programs on the raw harness")
    args = ap.parse_args(argv)
    ok = True
    print(f"{'config':8} {'program':22} {'cycles':>9} {'tlm off s':>9} {'tlm on s':>9} {'raw s':>7} "
          f"{'raw/off':>7} {'raw/on':>7} same")
    for name in args.configs:
        cfg = load_config(name)
        if not args.no_raw:
            models.raw_build(cfg)
        for p, raw_ok in programs(cfg):
            off, on = _tlm(p, False), _tlm(p, True)
            same = _same(off, on)
            ok &= same
            raw = None
            if not args.no_raw and (raw_ok or args.gemm_raw):
                raw = models.raw(p, cfg).wall_s
            r_off = f"{raw / off.wall_s:7.2f}" if raw else "      -"
            r_on = f"{raw / on.wall_s:7.2f}" if raw else "      -"
            raw_s = f"{raw:7.3f}" if raw else "      -"
            print(f"{name:8} {p.name[:22]:22} {on.cycles:9d} {off.wall_s:9.3f} {on.wall_s:9.3f} {raw_s} "
                  f"{r_off} {r_on} {'yes' if same else 'NO'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
