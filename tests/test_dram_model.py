"""The fast DRAM model on its own: exact latencies, strobes, SLVERR, bulk load/dump, checker.

Runs testbench/test_dram_model.py (cocotb) with dram_model as the toplevel, so it
needs no RTL. Every parameter set builds once into build/rtl/dram_model-*.
"""

from __future__ import annotations

import json

import pytest

from hw.toolchain import icarus_available
from testbench.rtl_model import HDL_DIR, simulator_sys_path, build_lock, cocotb_runner, build_root

PARAMS = [
    {"DATA_W": 64, "ID_W": 4, "MEM_BYTES": 65536, "RD_LAT": 5, "WR_LAT": 3, "MAX_BURST": 16},
    {"DATA_W": 128, "ID_W": 4, "MEM_BYTES": 65536, "RD_LAT": 1, "WR_LAT": 1, "MAX_BURST": 32},
    {"DATA_W": 64, "ID_W": 4, "MEM_BYTES": 1 << 22, "RD_LAT": 2, "WR_LAT": 2, "MAX_BURST": 4},
]
SIMS = ["verilator", pytest.param("icarus", marks=pytest.mark.skipif(not icarus_available(),
                                                                     reason="Icarus Verilog is not installed"))]


@pytest.mark.parametrize("sim", SIMS)
@pytest.mark.parametrize("prm", PARAMS, ids=lambda p: f"w{p['DATA_W']}-rl{p['RD_LAT']}-wl{p['WR_LAT']}")
def test_dram_model(prm: dict, sim: str) -> None:
    tag = "-".join(f"{v}" for v in prm.values())
    bdir = build_root() / "rtl" / f"dram_model-{tag}-{sim}"
    runner = cocotb_runner(sim)
    with build_lock(bdir.parent / f"{bdir.name}.lock"):
        runner.build(sources=[str(HDL_DIR / "dram_model.v")], hdl_toplevel="dram_model", build_dir=str(bdir),
                     parameters=prm, timescale=("1ns", "1ps"), log_file=str(bdir.parent / f"{bdir.name}.log"))
    with simulator_sys_path():
        runner.test(hdl_toplevel="dram_model", hdl_toplevel_lang="verilog", test_module="testbench.test_dram_model",
                    build_dir=str(bdir), test_dir=str(bdir), extra_env={"DRAM_TEST_PARAMS": json.dumps(prm)},
                    results_xml=str(bdir / "results.xml"), timescale=("1ns", "1ps"),
                    log_file=str(bdir / "sim.log"))
    from cocotb_tools.runner import get_results

    total, failed = get_results(bdir / "results.xml")
    assert total == 1 and failed == 0, (bdir / "sim.log").read_text()[-4000:]
