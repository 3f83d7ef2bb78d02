"""The weight buffer (hw/rtl/wgt_buffer.v, one ``sram`` bank per bus beat of a block) alone: its
cocotb bench (testbench/units/wgt_buffer_bench.py) against a list of blocks on a narrow and a wide
bus, and a planted break (a pad block zeroing only one bank) that the bench must see. GEMM reading
the weights on every level: tests/units/test_gemm.py."""

from __future__ import annotations

import pytest

from hw.config import load_config
from testbench.block_bench import run_block_bench, run_planted_bench
from tests.units.every_level import needs_rtl

BENCH = "testbench.units.wgt_buffer_bench"


@needs_rtl
@pytest.mark.parametrize("config", ["small", "wide"])
def test_block_bench(config):
    run_block_bench("wgt_buffer", BENCH, load_config(config), submodules=("sram",))


@needs_rtl
def test_block_bench_sees_a_planted_break(tmp_path):
    with pytest.raises(AssertionError, match="rdata"):
        run_planted_bench("wgt_buffer", ".we(we && (zero || (bank == B)))", ".we(we && (bank == B))", BENCH,
                          load_config("small"), tmp_path, submodules=("sram",))
