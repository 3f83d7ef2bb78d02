"""The fast DRAM model on its own: exact latencies, strobes, SLVERR, bulk load/dump, checker.

Runs testbench/dram_model_bench.py (cocotb) with dram_model as the toplevel, so it
needs no RTL. Every parameter set builds once into build/rtl/dram_model-*.
"""

from __future__ import annotations

import json

import pytest

from hw.toolchain import icarus_available
from testbench.block_bench import run_module_bench
from testbench.rtl_model import HDL_DIR

# The 64-bit, 64 KiB, 16-beat model is built once, with its latencies from plusargs (the test below);
# the sets here each need a build of their own (another width, size, burst or queue depth) and keep the
# latencies as parameters.
PARAMS = [
    {"DATA_W": 128, "ID_W": 4, "MEM_BYTES": 65536, "RD_LAT": 1, "WR_LAT": 1, "MAX_BURST": 32},
    {"DATA_W": 64, "ID_W": 4, "MEM_BYTES": 1 << 22, "RD_LAT": 2, "WR_LAT": 2, "MAX_BURST": 4},
    # queues shorter than the bursts the bench keeps in flight: ARREADY / AWREADY drop when full
    {"DATA_W": 64, "ID_W": 4, "MEM_BYTES": 65536, "RD_LAT": 3, "WR_LAT": 2, "MAX_BURST": 16, "RD_QUEUE": 2,
     "WR_QUEUE": 1},
]
SIMS = ["verilator", pytest.param("icarus", marks=pytest.mark.skipif(not icarus_available(),
                                                                     reason="Icarus Verilog is not installed"))]


@pytest.mark.parametrize("sim", SIMS)
def test_dram_model_latencies_from_plusargs(sim: str) -> None:
    """RD_LAT = WR_LAT = 0 (how the fast back-end's shared builds instantiate it): the latencies come from
    +DRAM_READ_LATENCY and +DRAM_WRITE_LATENCY at run time, and hold exactly."""
    build = {"DATA_W": 64, "ID_W": 4, "MEM_BYTES": 65536, "RD_LAT": 0, "WR_LAT": 0, "MAX_BURST": 16}
    run_module_bench(HDL_DIR / "dram_model.v", "dram_model", "testbench.dram_model_bench",
                     "dram_model-" + "-".join(f"{v}" for v in build.values()), parameters=build,
                     env={"DRAM_TEST_PARAMS": json.dumps({**build, "RD_LAT": 7, "WR_LAT": 4})}, sim=sim,
                     plusargs=["+DRAM_READ_LATENCY=7", "+DRAM_WRITE_LATENCY=4"])


@pytest.mark.parametrize("sim", SIMS)
@pytest.mark.parametrize("prm", PARAMS, ids=lambda p: f"w{p['DATA_W']}-rl{p['RD_LAT']}-wl{p['WR_LAT']}")
def test_dram_model(prm: dict, sim: str) -> None:
    tag = "dram_model-" + "-".join(f"{v}" for v in prm.values())
    run_module_bench(HDL_DIR / "dram_model.v", "dram_model", "testbench.dram_model_bench", tag, parameters=prm,
                     env={"DRAM_TEST_PARAMS": json.dumps(prm)}, sim=sim)
