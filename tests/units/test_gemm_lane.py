"""One output lane of GEMM's multiply-accumulate (hw/rtl/gemm_lane.v) alone: its cocotb bench
(testbench/units/gemm_lane_bench.py) on edge and random int8 vectors, for two block sizes. Whole GEMM
instructions are checked on every level in tests/units/test_gemm.py."""

from __future__ import annotations

import pytest

from hw.config import load_config
from testbench.block_bench import run_block_bench
from tests.units.every_level import needs_rtl


@needs_rtl
@pytest.mark.parametrize("config", ["small", "default"])
def test_block_bench(config):
    run_block_bench("gemm_lane", "testbench.units.gemm_lane_bench", load_config(config))
