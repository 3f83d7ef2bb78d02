"""Where the cores meet (hw/rtl/barrier.v) alone: its cocotb bench (testbench/units/barrier_bench.py)
against the plain rule for one core and three, and a planted break (``bar_go`` when any core has
arrived) that the bench must see. A BARRIER on every level, several cores: tests/test_cores_hw.py."""

from __future__ import annotations

import pytest

from hw.config import load_config
from testbench.block_bench import bench_env, run_block_bench, run_module_bench
from testbench.rtl_model import rtl_dir
from tests.units.every_level import needs_rtl

BENCH = "testbench.units.barrier_bench"


@needs_rtl
@pytest.mark.parametrize("prm", [{"N": 1, "CB": 1}, {"N": 3, "CB": 2}], ids=["n1", "n3"])
def test_block_bench(prm):
    run_block_bench("barrier", BENCH, load_config("small"), parameters=prm)


@needs_rtl
def test_block_bench_sees_a_planted_break(tmp_path):
    src = (rtl_dir() / "barrier.v").read_text()
    assert src.count("assign bar_go    = &arrived;") == 1
    (tmp_path / "barrier.v").write_text(src.replace("assign bar_go    = &arrived;", "assign bar_go    = |arrived;"))
    cfg = load_config("small")
    prm = {"N": 3, "CB": 2}
    with pytest.raises(AssertionError, match="bar_go"):
        run_module_bench(tmp_path / "barrier.v", "barrier", BENCH, f"barrier-planted-{cfg.config_id:08x}",
                         parameters=prm, cfg=cfg, env=bench_env(cfg, prm, 1))
