"""The DRAM region check (hw/rtl/region_check.v, used by fetch, load and store) alone: its cocotb bench
(testbench/units/region_check_bench.py) against the plain rule, on two region counts. Programs that
leave their regions are checked on every level in tests/units/test_errors.py."""

from __future__ import annotations

import pytest

from hw.config import load_config
from testbench.block_bench import run_block_bench
from tests.units.every_level import needs_rtl


@needs_rtl
@pytest.mark.parametrize("config", ["small", "default"])
def test_block_bench(config):
    run_block_bench("region_check", "testbench.units.region_check_bench", load_config(config))
