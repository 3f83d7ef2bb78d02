"""cocotb bench of hw/rtl/wgt_buffer.v (the weight buffer, one ``sram`` bank per bus beat of a
block) against a Python list of blocks: a write stores ``wdata`` into beat ``bank`` of block
``waddr`` (every beat zero when ``zero``); a read of ``raddr`` gives the whole block one cycle later,
and the output holds while ``re`` is low.
"""

from __future__ import annotations

from typing import Any

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from testbench.units.bench_setup import bench_config, bench_rng


@cocotb.test()
async def random_beat_writes_pads_and_reads(dut: Any) -> None:
    cfg = bench_config()
    depth, bus_bits = cfg.wgt_depth, cfg.bus_bytes * 8
    beats = cfg.wgt_block_bytes // cfg.bus_bytes
    rng = bench_rng("random_beat_writes_pads_and_reads")
    for name in ("we", "zero", "bank", "waddr", "wdata", "re", "raddr"):
        getattr(dut, name).value = 0
    Clock(dut.clk, 10, unit="ns").start()  # no reset: every block is written before it is read
    await FallingEdge(dut.clk)
    blocks = [[0] * beats for _ in range(depth)]
    for a in range(depth):  # a known start: every block zeroed by a pad write
        dut.we.value, dut.zero.value, dut.waddr.value = 1, 1, a
        await FallingEdge(dut.clk)
    dut.we.value = dut.zero.value = 0
    held: int | None = None  # the block rdata shows (a read registered at the last edge)
    for cycle in range(3000):
        we, zero, re = rng.random() < 0.6, rng.random() < 0.1, rng.random() < 0.5
        bank, waddr, raddr = rng.randrange(beats), rng.randrange(depth), rng.randrange(depth)
        wdata = rng.randrange(1 << bus_bits)
        dut.we.value, dut.zero.value, dut.bank.value = int(we), int(zero), bank
        dut.waddr.value, dut.wdata.value, dut.re.value, dut.raddr.value = waddr, wdata, int(re), raddr
        if re and we and raddr == waddr:  # reading a block while it is written is undefined
            dut.re.value = re = 0
        await FallingEdge(dut.clk)
        if re:
            held = sum(b << (bus_bits * k) for k, b in enumerate(blocks[raddr]))
        if we:
            if zero:
                blocks[waddr] = [0] * beats
            else:
                blocks[waddr][bank] = wdata
        if held is not None:
            assert int(dut.rdata.value) == held, f"cycle {cycle}: rdata {int(dut.rdata.value):x}, want {held:x}"
