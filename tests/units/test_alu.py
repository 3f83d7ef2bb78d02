"""The vector ALU (hw/rtl/alu.v: LANES alu_lane instances, the immediate sign-extended) alone: its
cocotb bench (testbench/units/alu_bench.py), every op lane by lane with an immediate or a source
vector, on two lane counts."""

from __future__ import annotations

import pytest

from hw.config import load_config
from testbench.block_bench import run_block_bench
from tests.units.every_level import needs_rtl


@needs_rtl
@pytest.mark.parametrize("config", ["small", "default"])
def test_block_bench(config):
    run_block_bench("alu", "testbench.units.alu_bench", load_config(config), submodules=("alu_lane",))
