"""cocotb bench of hw/rtl/valid_bits.v (one "loaded" flag per buffer entry) against a Python set:
``set`` marks ``set_idx`` at the clock edge, ``clr`` clears every flag at once (and wins over
``set``), ``rd_val`` reads the flag of ``rd_idx`` combinationally.
"""

from __future__ import annotations

from typing import Any

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer

from testbench.units.bench_setup import bench_params, bench_rng


@cocotb.test()
async def random_sets_clears_and_reads(dut: Any) -> None:
    prm = bench_params()
    depth, bits = prm["DEPTH"], prm["IDX_BITS"]
    rng = bench_rng("random_sets_clears_and_reads")
    for name, value in {"clr": 1, "set": 0, "set_idx": 0, "rd_idx": 0}.items():
        getattr(dut, name).value = value
    Clock(dut.clk, 10, unit="ns").start()  # the block has no reset: clr clears it
    await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)
    flags: set[int] = set()
    for cycle in range(3000):
        clr = rng.random() < 0.01
        st = rng.random() < 0.5
        idx = rng.randrange(depth)
        dut.clr.value = int(clr)
        dut.set.value = int(st)
        dut.set_idx.value = idx
        for _ in range(3):  # reads between edges see the flags as they are
            r = rng.randrange(1 << bits)
            dut.rd_idx.value = r
            await Timer(1, unit="ns")
            want = int(r in flags and r < depth)
            assert int(dut.rd_val.value) == want, f"cycle {cycle}: flag {r} reads {dut.rd_val.value}, want {want}"
        await FallingEdge(dut.clk)
        if clr:
            flags.clear()
        elif st:
            flags.add(idx)
