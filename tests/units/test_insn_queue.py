"""The instruction queue FIFO (hw/rtl/insn_queue.v) alone: its cocotb bench
(testbench/units/insn_queue_bench.py), for the depths the configs use. The queues inside
the accelerator are exercised on every level by tests/units/test_fetch.py."""

from __future__ import annotations

import pytest

from hw.config import load_config
from testbench.block_bench import run_block_bench
from tests.units.every_level import needs_rtl

WIDTH = 160  # {pc[31:0], insn[127:0]}, as the accelerator instantiates it


@needs_rtl
@pytest.mark.parametrize("depth", [2, 8])
def test_block_bench(depth):
    """Order, show-ahead head, full/empty/count, ignored push-when-full and pop-when-empty, clear."""
    run_block_bench("insn_queue", "testbench.units.insn_queue_bench", load_config("default"),
                    {"DEPTH": depth, "AW": depth.bit_length() - 1, "W": WIDTH})
