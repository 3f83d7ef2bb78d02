"""cocotb bench of hw/rtl/sram.v (synchronous SRAM, one write port, one read port).

Checks the contract written at the top of sram.v, cycle by cycle:

* read latency: rdata shows mem[raddr] right after the edge that sampled re, not before;
* re low holds rdata;
* a write is visible to a read issued at the next edge or later;
* read-during-write of the same word: the word is written, rdata is undefined (X on
  4-state Icarus; Verilator is 2-state, so only the written word is checked there);
  a read of another word in a writing cycle returns that word's stored value;
* random traffic (random enables, addresses and data, collisions included) against a
  Python model of the contract.

Parameters come from env ``SRAM_TEST_PARAMS`` (JSON: WIDTH, DEPTH, ADDR_BITS, SEED),
set by tests/units/test_sram.py. Inputs are driven right after a rising edge (cycle n
is the interval after edge n) and outputs sampled in that interval's ReadOnly phase.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge


class SramModel:
    """The contract of sram.v: registered read, undefined read-during-write (None)."""

    def __init__(self) -> None:
        self.mem: dict[int, int] = {}
        self.rdata: int | None = None  # None: undefined

    def edge(self, we: int, waddr: int, wdata: int, re: int, raddr: int) -> None:
        if re:
            self.rdata = None if (we and waddr == raddr) else self.mem.get(raddr)
        if we:
            self.mem[waddr] = wdata


class Sram:
    """Drives the ports of one sram instance and keeps the model in step."""

    def __init__(self, dut: Any, sim: str):
        self.dut = dut
        self.model = SramModel()
        self.four_state = sim != "verilator"
        self.edges = 0
        self.pending = (0, 0, 0, 0, 0)
        self._drive(*self.pending)

    def _drive(self, we: int, waddr: int, wdata: int, re: int, raddr: int) -> None:
        d = self.dut
        d.we.value, d.waddr.value, d.wdata.value, d.re.value, d.raddr.value = we, waddr, wdata, re, raddr
        self.pending = (we, waddr, wdata, re, raddr)

    async def cycle(self, what: str, we: int = 0, waddr: int = 0, wdata: int = 0, re: int = 0,
                    raddr: int = 0) -> int | None:
        """One clock cycle: at its rising edge the design and the model take the inputs
        driven in the previous cycle; then this cycle's inputs are driven, and rdata (the
        result of the edge) is checked against the model and returned (None for X)."""
        await RisingEdge(self.dut.clk)
        self.edges += 1
        self.model.edge(*self.pending)
        self._drive(we, waddr, wdata, re, raddr)
        await ReadOnly()
        v = self.dut.rdata.value
        got = int(v) if v.is_resolvable else None
        want = self.model.rdata
        if want is None:  # undefined by the contract: X where the simulator can show it
            assert not self.four_state or got is None, f"{what} (edge {self.edges}): rdata should be X, got {got}"
        else:
            assert got == want, f"{what} (edge {self.edges}): rdata {got} != expected {want:#x}"
        return got


@cocotb.test()
async def sram_contract(dut: Any) -> None:
    prm = json.loads(os.environ["SRAM_TEST_PARAMS"])
    width, depth = prm["WIDTH"], prm["DEPTH"]
    assert depth >= 2, "the bench needs two words"
    rng = random.Random(prm.get("SEED", 1))
    mask = (1 << width) - 1
    Clock(dut.clk, 10, unit="ns").start()
    s = Sram(dut, prm["SIM"])
    await s.cycle("after start: rdata undefined (no reset)")

    # fill every word, so no read below sees never-written contents; words 0 and 1 differ
    a, b = 0, 1
    for k in range(depth):
        await s.cycle("fill", we=1, waddr=k, wdata=(k + 1) * 0x9E3779B1 & mask if k < 2 else rng.getrandbits(width))
    assert s.model.mem[a] != s.model.mem[b]

    # read latency: rdata shows mem[raddr] after the edge that samples re, not before
    await s.cycle("read b issued", re=1, raddr=b)
    got = await s.cycle("read a issued", re=1, raddr=a)
    assert got == s.model.mem[b], "one edge after re: rdata = mem[b]"
    got = await s.cycle("idle")
    assert got == s.model.mem[a], "one edge after re: rdata = mem[a] (not earlier, checked above)"

    # re low holds rdata over many edges, even while its word is overwritten
    held = got
    await s.cycle("overwrite a", we=1, waddr=a, wdata=~held & mask)
    for _ in range(3):
        assert await s.cycle("hold with re low") == held

    # a write is visible to the read issued at the next edge
    await s.cycle("write a", we=1, waddr=a, wdata=0x5A5A5A5A5A5A5A5A & mask)
    await s.cycle("read a", re=1, raddr=a)
    assert await s.cycle("idle") == 0x5A5A5A5A5A5A5A5A & mask

    # read-during-write: another word reads its stored value; the same word is undefined
    await s.cycle("write a, read b", we=1, waddr=a, wdata=0x0123456789ABCDEF & mask, re=1, raddr=b)
    assert await s.cycle("idle") == s.model.mem[b]
    await s.cycle("write a, read a", we=1, waddr=a, wdata=0x0F0F0F0F0F0F0F0F & mask, re=1, raddr=a)
    await s.cycle("collision result (X on 4-state simulators)")
    await s.cycle("read a", re=1, raddr=a)
    assert await s.cycle("idle") == 0x0F0F0F0F0F0F0F0F & mask, "the colliding write took effect"

    # random traffic, collisions included
    collisions = 0
    for _ in range(prm.get("CYCLES", 2000)):
        we, re = rng.random() < 0.6, rng.random() < 0.7
        waddr = rng.randrange(depth)
        raddr = waddr if rng.random() < 0.1 else rng.randrange(depth)
        collisions += we and re and waddr == raddr
        await s.cycle("random traffic", int(we), waddr, rng.getrandbits(width), int(re), raddr)
    await s.cycle("random traffic, last edge")
    assert collisions > 0, "the random traffic never collided: raise CYCLES"
