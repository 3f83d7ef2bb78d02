"""The shell every unit runs its EXEC in (hw/rtl/unit_shell.v) alone: its cocotb bench
(testbench/units/unit_shell_bench.py) against a model of the IDLE -> WAIT -> EXEC -> PUSH rule, with
both stages and with one missing, and a planted break (PUSH ignoring a halt) that the bench must
see. The shell inside each unit, on every level: tests/units/test_load_unit.py, test_compute_unit.py,
test_store_unit.py."""

from __future__ import annotations

import pytest

from hw.config import load_config
from testbench.block_bench import run_block_bench, run_planted_bench
from tests.units.every_level import needs_rtl

BENCH = "testbench.units.unit_shell_bench"


@needs_rtl
@pytest.mark.parametrize("prm", [{"HAS_PREV": 1, "HAS_NEXT": 1}, {"HAS_PREV": 0, "HAS_NEXT": 1},
                                 {"HAS_PREV": 1, "HAS_NEXT": 0}], ids=["both", "no-prev", "no-next"])
def test_block_bench(prm):
    run_block_bench("unit_shell", BENCH, load_config("small"), parameters=prm)


@needs_rtl
def test_block_bench_sees_a_planted_break(tmp_path):
    with pytest.raises(AssertionError, match="insn_done"):
        run_planted_bench("unit_shell", "wire push_go      = (state == U_PUSH) && !halt && !push_blocked;",
                          "wire push_go      = (state == U_PUSH) && !push_blocked;", BENCH, load_config("small"),
                          tmp_path, parameters={"HAS_PREV": 1, "HAS_NEXT": 1})
