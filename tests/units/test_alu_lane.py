"""One lane of the vector ALU (hw/rtl/alu_lane.v) alone: its cocotb bench
(testbench/units/alu_lane_bench.py) checks every op, MULHR included, on edge and random operands
against the scalar meaning (hw.isa_semantics). Whole ALU instructions are checked on every level in
tests/units/test_compute_unit.py."""

from __future__ import annotations

from hw.config import load_config
from testbench.block_bench import run_block_bench
from tests.units.every_level import needs_rtl


@needs_rtl
def test_block_bench():
    run_block_bench("alu_lane", "testbench.units.alu_lane_bench", load_config("small"))
