"""One core (hw/rtl/core.v) alone under cocotb (testbench/units/core_bench.py), with the DRAM port,
the DRAM behind it and the CSR block's run control modelled in the bench after their contracts
(docs/microarch.md "The DRAM port (arbiter)", "Several cores").

* Clean Programs (vector add, the ALU ops, padding and strides, a GEMM tile) give on the core
  alone the TLM's outputs (which are their expected outputs) in the TLM's cycles: the bench's port
  has the fast DRAM model's timing, so core.v keeps its share of the cycle contract.
* Faulting Programs (DRAM and SRAM range, bad opcode, unloaded micro-op, instruction window,
  deadlock, a blocked push, a fault during a burst) show the TLM's error and ERR_PC on the core's
  error, deadlock and blocked-pc outputs, at the TLM's cycle of DONE.
* Back-pressure (grants withheld and bursts stretched by seeded random cycles) changes neither
  outputs nor errors nor the bursts asked for, only the cycle count.
* A port that never grants ends on the bench's watchdog: no wait of the bench is unbounded.

All jobs run in one simulator process on one Verilator build of core.v (config ``small``).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from hw.config import load_config
from hw.program import Program
from testbench.block_bench import bench_env, run_module_bench
from testbench.memimg import watchdog_cycles
from testbench.rtl_model import rtl_dir, rtl_sources
from cosim import models
from tests.units.every_level import Case, needs_rtl
from tests.units.programs import alu_ops, pad_stride, vadd
from tests.units.test_errors import (blocked_push, err_bad_opcode, err_deadlock, err_dram_range, err_insn_range,
                                     err_sram_range, err_unloaded, fault_during_burst, misaligned_insn_addr,
                                     store_past_region_writes_nothing)
from tests.units.test_gemm import plain

CFG = load_config("small")
BENCH = "testbench.units.core_bench"
# What accel_top puts around the cores: not part of the core's build.
OUTSIDE_CORE = {"axi_arbiter.v", "csr_block.v", "barrier.v", "accel_top.v"}

CLEAN = [Case(vadd(CFG, n=6)), Case(alu_ops(CFG)), Case(pad_stride(CFG)), Case(plain(CFG).program)]
FAULTS = [f(CFG) for f in (err_dram_range, err_sram_range, err_bad_opcode, err_unloaded, err_insn_range,
                           misaligned_insn_addr, err_deadlock, blocked_push, store_past_region_writes_nothing,
                           fault_during_burst)]
BACKPRESSURE = [(c, seed) for c in CLEAN for seed in (1, 2)] + [(FAULTS[0], 1), (FAULTS[-1], 1)]
NO_GRANT = CLEAN[0]


def jobs() -> list[tuple[Case, str, int]]:
    """(case, port mode, seed) of every run, in the order the bench runs them."""
    return ([(c, "fast", 0) for c in CLEAN + FAULTS] + [(c, "backpressure", s) for c, s in BACKPRESSURE]
            + [(NO_GRANT, "no_grant", 0)])


def job_key(case: Case, mode: str, seed: int) -> str:
    return f"{case.name}-{mode}-{seed}"


def core_sources() -> list[Path]:
    return [p for p in rtl_sources() if p.name not in OUTSIDE_CORE]


@pytest.fixture(scope="module")
def core_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every job on core.v in one simulator process: key -> the bench's result, with the DRAM image
    (``dram``: bytes) of a run that reached DONE."""
    work = tmp_path_factory.mktemp("core_bench")
    spec = []
    for case, mode, seed in jobs():
        key = job_key(case, mode, seed)
        prog = work / f"{key}.pkl"
        prog.write_bytes(pickle.dumps(case.program))
        spec.append({"program": str(prog), "mode": mode, "seed": seed, "result": str(work / f"{key}.json"),
                     "dram": str(work / f"{key}.bin")})
    (work / "jobs.json").write_text(json.dumps(spec))
    run_module_bench(core_sources(), "core", BENCH, f"core-{CFG.name}-{CFG.config_id:08x}", cfg=CFG,
                     env={**bench_env(CFG, {}, 1), "CORE_BENCH_JOBS": str(work / "jobs.json")})
    out = {}
    for (case, mode, seed), j in zip(jobs(), spec):
        res = json.loads(Path(j["result"]).read_text())
        res["dram"] = Path(j["dram"]).read_bytes() if res["watchdog"] is None else None
        out[job_key(case, mode, seed)] = res
    return out


_TLM: dict[str, Any] = {}


def tlm(p: Program) -> Any:
    if p.name not in _TLM:
        _TLM[p.name] = models.tlm(p)
    return _TLM[p.name]


def differences(case: Case, res: dict[str, Any], cycles: bool) -> list[str]:
    """How the core's run differs from the TLM's (and from the case's expected error and outputs)."""
    t = tlm(case.program)
    out = []
    if res["watchdog"] is not None:
        return [f"no DONE within the watchdog's {res['watchdog']} cycles"]
    got = res["error"] and (res["error"]["name"], res["error"]["pc"])
    want = t.error and (t.error["name"], t.error["pc"])
    if got != want or got != case.error:
        out.append(f"error {got}, TLM {want}, expected {case.error}")
    mm = models.first_mismatch(t.outputs, case.program.read_outputs(res["dram"]))
    if mm is not None:
        out.append(f"outputs differ from the TLM's: {mm}")
    if case.program.expected and case.error is None:
        mm = models.first_mismatch(case.program.expected, case.program.read_outputs(res["dram"]))
        if mm is not None:
            out.append(f"outputs differ from the expected: {mm}")
    if cycles and res["cycles"] != t.cycles:
        out.append(f"DONE after {res['cycles']} cycles, TLM {t.cycles}")
    return out


@needs_rtl
@pytest.mark.parametrize("case", CLEAN + FAULTS, ids=[c.name for c in CLEAN + FAULTS])
def test_core_alone_matches_tlm(core_runs, case):
    """Outputs, error and ERR_PC, and cycles of the core with the fast port equal the TLM's."""
    bad = differences(case, core_runs[job_key(case, "fast", 0)], cycles=True)
    assert not bad, f"{case.name}: " + "; ".join(bad)


@needs_rtl
@pytest.mark.parametrize("case,seed", BACKPRESSURE, ids=[f"{c.name}-{s}" for c, s in BACKPRESSURE])
def test_backpressure_changes_only_time(core_runs, case, seed):
    """Grants withheld and bursts stretched: same outputs, error and bursts, more cycles."""
    res, fast = core_runs[job_key(case, "backpressure", seed)], core_runs[job_key(case, "fast", 0)]
    assert res["stretch"] > 0 and fast["stretch"] == 0, (res["stretch"], fast["stretch"])
    bad = differences(case, res, cycles=False)
    assert not bad, f"{case.name} seed {seed}: " + "; ".join(bad)
    if case.error is None:  # a faulting run stops at the fault: its bursts depend on the timing
        assert res["bursts"] == fast["bursts"], (res["bursts"], fast["bursts"])
    assert res["cycles"] > fast["cycles"], (res["cycles"], fast["cycles"])


@needs_rtl
def test_watchdog_bounds_a_port_that_never_grants(core_runs):
    res = core_runs[job_key(NO_GRANT, "no_grant", 0)]
    assert res["watchdog"] == watchdog_cycles(NO_GRANT.program, "fast")
    assert res["cycles"] is None and res["bursts"] == 0 and res["error"] is None


def test_core_build_leaves_out_only_what_accel_top_adds():
    """The bench builds core.v with every RTL file but accel_top's own blocks."""
    names = {p.name for p in core_sources()}
    assert "core.v" in names and not names & OUTSIDE_CORE
    assert OUTSIDE_CORE <= {p.name for p in rtl_dir().glob("*.v")}
