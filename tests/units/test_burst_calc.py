"""The burst-length block (hw/rtl/burst_calc.v, used by fetch, load and store) alone: its cocotb
bench (testbench/units/burst_calc_bench.py) on two bus widths and MAX_BURSTs. Bursts of whole
Programs crossing 4 KiB pages are checked on every level in tests/units/test_load_unit.py,
test_store_unit.py and test_fetch.py."""

from __future__ import annotations

import pytest

from hw.config import load_config
from testbench.block_bench import run_block_bench
from tests.units.every_level import needs_rtl


@needs_rtl
@pytest.mark.parametrize("config", ["small", "wide"])
def test_block_bench(config):
    """min(MAX_BURST, beats left, beats to the 4 KiB boundary), operand by operand and transfer by transfer."""
    run_block_bench("burst_calc", "testbench.units.burst_calc_bench", load_config(config))
