"""hw/rtl/sram.v and sram_tdp.v on their own: latency, hold, read-during-write and random
traffic (cocotb benches testbench/units/sram_bench.py and sram_tdp_bench.py).

Run on Verilator and (when installed) Icarus, whose 4-state values show the undefined
read-during-write results as X. Every parameter set builds once into build/rtl/units/<module>-*.
"""

from __future__ import annotations

import json

import pytest

from hw.toolchain import icarus_available
from testbench.block_bench import run_module_bench
from testbench.rtl_model import rtl_dir

PARAMS = [
    {"WIDTH": 64, "DEPTH": 16, "ADDR_BITS": 4},  # a power-of-two depth
    {"WIDTH": 40, "DEPTH": 5, "ADDR_BITS": 3},  # a depth below 2**ADDR_BITS, an odd width
]
NO_ICARUS = pytest.mark.skipif(not icarus_available(), reason="Icarus Verilog is not installed")
# Icarus compiles in milliseconds: every set; a Verilator build takes seconds: the odd set only
CASES = [pytest.param(PARAMS[1], "verilator", id="w40-d5-verilator")] + \
    [pytest.param(p, "icarus", id=f"w{p['WIDTH']}-d{p['DEPTH']}-icarus", marks=NO_ICARUS) for p in PARAMS]


def run_bench(module: str, prm: dict, sim: str) -> None:
    """Build ``hw/rtl/<module>.v`` with ``prm`` and run ``testbench.units.<module>_bench``."""
    env = {"SRAM_TEST_PARAMS": json.dumps({**prm, "SIM": sim, "SEED": 7, "CYCLES": 2000})}
    run_module_bench(rtl_dir() / f"{module}.v", module, f"testbench.units.{module}_bench",
                     f"{module}-" + "-".join(str(v) for v in prm.values()), parameters=prm, env=env, sim=sim)


@pytest.mark.parametrize("prm,sim", CASES)
def test_sram(prm: dict, sim: str) -> None:
    run_bench("sram", prm, sim)


@pytest.mark.parametrize("prm,sim", CASES)
def test_sram_tdp(prm: dict, sim: str) -> None:
    run_bench("sram_tdp", prm, sim)
