"""Where the cores meet (hw/rtl/barrier.v) alone: its cocotb bench (testbench/units/barrier_bench.py)
against the plain rule for one core and three, and a planted break (``bar_go`` when any core has
arrived) that the bench must see. A BARRIER on every level, several cores: tests/test_cores_hw.py."""

from __future__ import annotations

import pytest

from hw.config import load_config
from testbench.block_bench import run_block_bench, run_planted_bench
from tests.units.every_level import needs_rtl

BENCH = "testbench.units.barrier_bench"


@needs_rtl
@pytest.mark.parametrize("prm", [{"N": 1, "CB": 1}, {"N": 3, "CB": 2}], ids=["n1", "n3"])
def test_block_bench(prm):
    run_block_bench("barrier", BENCH, load_config("small"), parameters=prm)


@needs_rtl
def test_block_bench_sees_a_planted_break(tmp_path):
    with pytest.raises(AssertionError, match="bar_go"):
        run_planted_bench("barrier", "assign bar_go    = &arrived;", "assign bar_go    = |arrived;", BENCH,
                          load_config("small"), tmp_path, parameters={"N": 3, "CB": 2})
