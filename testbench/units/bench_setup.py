"""What every block bench needs: the config, Verilog parameters and seed it was started with,
a seeded random generator, and a clock with a reset.

``testbench/block_bench.py`` passes UNIT_BENCH_CONFIG (the hardware config as JSON),
UNIT_BENCH_PARAMS (the block's Verilog parameters) and UNIT_BENCH_SEED.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from hw.config import HwConfig, parse_config


def bench_config() -> HwConfig:
    return parse_config(json.loads(os.environ["UNIT_BENCH_CONFIG"]))


def bench_params() -> dict[str, int]:
    return json.loads(os.environ.get("UNIT_BENCH_PARAMS", "{}"))


def bench_rng(test: str) -> random.Random:
    """A generator seeded by UNIT_BENCH_SEED and the test's name (each test its own stream)."""
    seed = int(os.environ.get("UNIT_BENCH_SEED", "1"))
    return random.Random(f"{seed}-{test}")


async def clock_and_reset(dut: Any, inputs: dict[str, int], cycles: int = 3) -> None:
    """Start a 10 ns clock on ``dut.clk``, hold ``dut.rst`` for ``cycles`` cycles with ``inputs``
    driven, and return at the falling edge after the reset (where the benches drive and sample)."""
    for name, value in inputs.items():
        getattr(dut, name).value = value
    dut.rst.value = 1
    Clock(dut.clk, 10, unit="ns").start()
    for _ in range(cycles):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await FallingEdge(dut.clk)
