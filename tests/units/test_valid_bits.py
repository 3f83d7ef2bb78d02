"""The "loaded" flags of the micro-op and weight buffers (hw/rtl/valid_bits.v) alone: its cocotb bench
(testbench/units/valid_bits_bench.py) against a Python set, for a full index range and one wider than
the depth. Reading an entry no LOAD wrote (ERR_UNLOADED) is checked on every level in
tests/units/test_gemm.py."""

from __future__ import annotations

import pytest

from hw.config import load_config
from testbench.block_bench import run_block_bench
from tests.units.every_level import needs_rtl


@needs_rtl
@pytest.mark.parametrize("prm", [{"DEPTH": 16, "IDX_BITS": 4}, {"DEPTH": 12, "IDX_BITS": 4}], ids=["d16", "d12"])
def test_block_bench(prm):
    run_block_bench("valid_bits", "testbench.units.valid_bits_bench", load_config("small"), parameters=prm)
