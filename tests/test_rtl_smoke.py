"""RTL through the cocotb testbench on the default config: both memory back-ends.

Hand-built Programs (tests/rtl_programs.py) and every compiler example, compared with
their expected outputs; every error class (STATUS.error + ERR_PC); soft reset; the
watchdog; waves; Icarus as a second simulator when installed. Programs of one test
share one simulator process to pay the startup once.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from hw import csr
from hw.config import load_config
from hw.isa import Load, Store
from hw.program import Program
from hw.result import RunResult
from hw.toolchain import icarus_available
from cosim.mismatch import last_writers
from cosim.models import first_mismatch
from testbench.rtl_model import build, rtl_available, run_program, run_programs
from tests import rtl_programs as rp

pytestmark = pytest.mark.skipif(not rtl_available(), reason="no RTL yet (hw/rtl/sources.txt is missing)")
needs_icarus = pytest.mark.skipif(not icarus_available(), reason="Icarus Verilog (iverilog) is not installed")


@pytest.fixture(scope="module")
def cfg():
    return load_config("default")


def check_outputs(p: Program, r: RunResult, mem: str = "fast") -> None:
    """Outputs equal the expected ones; on a mismatch the message names the first differing
    element, the instructions that last wrote it, and a VCD of the Program re-run with waves."""
    assert r.error is None, f"{p.name}: {r.error}"
    assert p.expected, f"{p.name}: no expected outputs attached"
    mm = first_mismatch(p.expected, r.outputs)
    if mm is None:
        return
    writers = last_writers(p, mm.output, mm.index) if mm.index else ""
    try:
        vcd = run_program(p, mem=mem, waves=True).extra.get("vcd")
    except Exception as e:  # the report must not hide the mismatch behind a second failure
        vcd = f"(re-run with waves failed: {e})"
    raise AssertionError(f"{p.name} on {p.config.name} ({mem}): {mm}; {writers}; waveform: {vcd}")


def check_counters(p: Program, r: RunResult) -> None:
    """Counters that follow from the instruction stream alone."""
    cfg = p.config
    loads = [i for i in p.insns if isinstance(i, Load)]
    stores = [i for i in p.insns if isinstance(i, Store)]
    c = r.counters
    assert set(c) == {n.lower() for n in csr.COUNTERS}
    assert c["load_insns"] == len(loads)
    assert c["store_insns"] == len(stores)
    assert c["compute_insns"] == len(p.insns) - len(loads) - len(stores)
    assert c["dma_rd_bytes"] == sum(i.y_size * i.x_size for i in loads) * cfg.acc_vec_bytes
    assert c["dma_wr_bytes"] == sum(i.y_size * i.x_size for i in stores) * cfg.out_vec_bytes
    assert c["fetch_bytes"] == 16 * len(p.insns)
    assert 0 < r.cycles
    for unit in ("load", "compute", "store"):
        assert c[f"{unit}_busy"] + c[f"{unit}_stall"] <= r.cycles


def hand_programs(cfg) -> list[Program]:
    return [rp.vadd(cfg, n=1, seed=1, name="vadd1"), rp.vadd(cfg, n=7, seed=2, name="vadd7"), rp.alu_ops(cfg),
            rp.pad_stride(cfg), rp.long_program(cfg, reps=6)]


@pytest.mark.parametrize("mem", ["fast", "protocol"])
def test_hand_programs(cfg, mem):
    progs = hand_programs(cfg)
    res = run_programs(progs, cfg, mem=mem, seed=7)
    assert len(res) == len(progs)
    for p, r in zip(progs, res):
        check_outputs(p, r)
        check_counters(p, r)
        assert r.model == "rtl" and r.extra["mem"] == mem and r.extra["sim"] == "verilator"


@pytest.mark.parametrize("mem", ["fast", "protocol"])
def test_examples(cfg, mem):
    examples = pytest.importorskip("compiler.examples")
    cases = [examples.make_case(n, cfg) for n in examples.list_examples()]
    res = run_programs([c.program for c in cases], cfg, mem=mem, seed=3)
    for c, r in zip(cases, res):
        check_outputs(c.program, r)
        check_counters(c.program, r)


def test_fast_cycles_are_deterministic(cfg):
    """Same Program twice in one process, and alone in another: identical cycles and counters."""
    p = rp.alu_ops(cfg)
    a, b = run_programs([p, p], cfg)
    c = run_program(p, cfg)
    assert a.cycles == b.cycles == c.cycles
    assert a.counters == b.counters == c.counters


@pytest.mark.parametrize("mem", ["fast", "protocol"])
def test_errors(cfg, mem):
    """Every error class sets STATUS done+error with the code and ERR_PC; a good run follows."""
    cases = [f(cfg) for f in rp.ERROR_CASES.values()]
    good = rp.vadd(cfg, n=3, name="after_errors")
    res = run_programs([p for p, _, _ in cases] + [good], cfg, mem=mem)
    for (p, name, pc), r in zip(cases, res):
        assert r.error is not None, f"{p.name}: no error reported"
        assert r.error["name"] == name and r.error["pc"] == pc, f"{p.name}: got {r.error}, want {name} at {pc}"
        st = csr.decode_status(r.extra["status"])
        assert st["done"] and st["error"] and not st["busy"], f"{p.name}: STATUS {st}"
    check_outputs(good, res[-1])


def test_dram_range_writes_nothing(cfg):
    """A faulting STORE must not touch DRAM: its output region stays zero."""
    p, _, _ = rp.err_dram_range(cfg)
    r = run_program(p, cfg)
    assert r.error["name"] == "DRAM_RANGE"
    assert not np.any(r.outputs["o"])


def test_soft_reset(cfg):
    """CTRL.SOFT_RESET returns STATUS and every counter to zero, and is enough between Programs."""
    progs = [rp.vadd(cfg, n=2, seed=5, name="s0"), rp.alu_ops(cfg, seed=6, name="s1"),
             rp.vadd(cfg, n=5, seed=7, name="s2")]
    soft = run_programs(progs, cfg, between="soft", soft_reset_check=True)
    hard = run_programs(progs, cfg)
    for p, s, h in zip(progs, soft, hard):
        check_outputs(p, s)
        after = s.extra["after_soft_reset"]
        assert after["status"] == 0 and after["cycles"] == 0 and after["irq"] == 0, after
        assert not any(after["counters"].values()), after
        assert s.cycles == h.cycles and s.counters == h.counters


def test_watchdog_fires_and_next_program_runs(cfg):
    """A watchdog shorter than the run reports TIMEOUT (no hang); the next Program still runs."""
    slow = rp.long_program(cfg, reps=10)
    ok = rp.vadd(cfg, n=2, name="after_timeout")
    r = run_programs([slow, ok], cfg, watchdog=60)
    assert r[0].error is not None and r[0].error["name"] == "TIMEOUT", r[0].error
    assert r[1].error is not None and r[1].error["name"] == "TIMEOUT"  # the override applies to all
    shutil.rmtree(r[0].extra["run_dir"], ignore_errors=True)  # kept for debugging; expected here
    r = run_programs([slow, ok], cfg)
    check_outputs(slow, r[0])
    check_outputs(ok, r[1])


def test_rebuild_is_a_noop(cfg):
    build(cfg, "fast")
    t = time.perf_counter()
    build(cfg, "fast")
    assert time.perf_counter() - t < 0.5


def test_waves(cfg, tmp_path):
    vcd = tmp_path / "vadd.vcd"
    r = run_program(rp.vadd(cfg, n=2), cfg, waves=True, vcd_path=vcd)
    assert r.error is None and vcd.is_file()
    head = vcd.read_text(errors="replace")[:200_000]
    for sig in ("dbg_load_pc", "dbg_cycles", "irq"):
        assert sig in head, f"{sig} not in the VCD"


def test_mismatch_report_names_writer_and_vcd(cfg):
    """A regression mismatch (injected into the outputs read back) names the first differing
    element and the STORE that wrote it, and re-runs the Program with waves for a VCD."""
    p = rp.vadd(cfg, n=2)
    r = run_program(p, cfg)
    name = next(iter(p.expected))
    bad = {k: v.copy() for k, v in r.outputs.items()}
    bad[name].reshape(-1)[5] ^= 1
    store_pc = next(pc for pc, i in enumerate(p.insns) if isinstance(i, Store))
    with pytest.raises(AssertionError) as e:
        check_outputs(p, RunResult("rtl", bad, r.cycles, r.counters))
    msg = str(e.value)
    assert f"output '{name}'" in msg and f"STORE #{store_pc}" in msg, msg
    vcd = msg.rsplit("waveform: ", 1)[1]
    assert vcd.endswith(".vcd") and Path(vcd).is_file(), msg


@needs_icarus
def test_icarus_matches_verilator(cfg):
    """The second simulator: same outputs and the same cycle counts (the RTL is deterministic)."""
    progs = hand_programs(cfg)[:4]
    ica = run_programs(progs, cfg, sim="icarus")
    ver = run_programs(progs, cfg, sim="verilator")
    for p, i, v in zip(progs, ica, ver):
        check_outputs(p, i)
        assert i.extra.get("x_words", 0) == 0
        assert i.cycles == v.cycles and i.counters == v.counters, p.name
