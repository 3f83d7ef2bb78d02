"""cocotb bench of hw/rtl/sram_tdp.v (true dual-port synchronous SRAM, ports A and B).

Checks the contract written at the top of sram_tdp.v, cycle by cycle, against a
Python model in which None means "undefined" (X on 4-state Icarus; Verilator is
2-state, so undefined values are not compared there):

* a read on either port is registered (one cycle), en low holds rdata;
* a write cycle returns no data (rdata undefined) and the word is written;
* each port reads what the other wrote at an earlier edge;
* a read of a word the other port writes at the same edge is undefined, two writes
  of one word leave it undefined; other words are unaffected;
* random traffic on both ports, collisions included.

Parameters come from env ``SRAM_TEST_PARAMS`` (JSON: WIDTH, DEPTH, ADDR_BITS, SIM,
SEED, CYCLES), set by tests/units/test_sram_tdp.py.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any, NamedTuple

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge


class Op(NamedTuple):
    """What one port is asked to do in one cycle."""

    en: int = 0
    we: int = 0
    addr: int = 0
    wdata: int = 0


IDLE = Op()


class TdpModel:
    """The contract of sram_tdp.v; None is an undefined value."""

    def __init__(self) -> None:
        self.mem: dict[int, int | None] = {}
        self.rdata: list[int | None] = [None, None]

    def edge(self, a: Op, b: Op) -> None:
        ops = (a, b)
        for p, (op, other) in enumerate(((a, b), (b, a))):
            if not op.en:
                continue
            clash = other.en and other.we and other.addr == op.addr
            self.rdata[p] = None if (op.we or clash) else self.mem.get(op.addr)
        if a.en and a.we and b.en and b.we and a.addr == b.addr:
            self.mem[a.addr] = None
            return
        for op in ops:
            if op.en and op.we:
                self.mem[op.addr] = op.wdata


class Tdp:
    """Drives both ports of one sram_tdp instance and keeps the model in step."""

    def __init__(self, dut: Any, sim: str):
        self.dut = dut
        self.model = TdpModel()
        self.four_state = sim != "verilator"
        self.edges = 0
        self.pending = (IDLE, IDLE)
        self._drive(IDLE, IDLE)

    def _drive(self, a: Op, b: Op) -> None:
        for p, op in (("a", a), ("b", b)):
            for name in Op._fields:
                getattr(self.dut, f"{name}_{p}").value = getattr(op, name)
        self.pending = (a, b)

    async def cycle(self, what: str, a: Op = IDLE, b: Op = IDLE) -> tuple[int | None, int | None]:
        """One clock cycle: at its edge the design and the model take the previous
        cycle's operations; then this cycle's are driven, and both rdata (the edge's
        results) are checked against the model and returned (None for X)."""
        await RisingEdge(self.dut.clk)
        self.edges += 1
        self.model.edge(*self.pending)
        self._drive(a, b)
        await ReadOnly()
        out = []
        for p, port in enumerate(("a", "b")):
            v = getattr(self.dut, f"rdata_{port}").value
            got = int(v) if v.is_resolvable else None
            want = self.model.rdata[p]
            if want is None:
                assert not self.four_state or got is None, \
                    f"{what} (edge {self.edges}): rdata_{port} should be X, got {got}"
            else:
                assert got == want, f"{what} (edge {self.edges}): rdata_{port} {got} != expected {want:#x}"
            out.append(got)
        return out[0], out[1]


@cocotb.test()
async def sram_tdp_contract(dut: Any) -> None:
    prm = json.loads(os.environ["SRAM_TEST_PARAMS"])
    width, depth = prm["WIDTH"], prm["DEPTH"]
    assert depth >= 3, "the bench needs three words"
    rng = random.Random(prm.get("SEED", 1))
    mask = (1 << width) - 1
    Clock(dut.clk, 10, unit="ns").start()
    s = Tdp(dut, prm["SIM"])
    await s.cycle("after start: rdata undefined (no reset)")

    # fill: A the even words, B the odd ones, in the same cycles
    for k in range(0, depth, 2):
        b = Op(1, 1, k + 1, rng.getrandbits(width)) if k + 1 < depth else IDLE
        await s.cycle("fill", Op(1, 1, k, rng.getrandbits(width)), b)
    w0, w1, w2 = 0, 1, 2
    mem = s.model.mem

    # registered read on both ports, then en low holds
    await s.cycle("read issued", Op(1, 0, w1), Op(1, 0, w0))
    ra, rb = await s.cycle("idle")
    assert (ra, rb) == (mem[w1], mem[w0]), "one edge after en: rdata = the words"
    for _ in range(2):
        assert await s.cycle("hold") == (ra, rb)

    # each port reads what the other wrote at an earlier edge
    await s.cycle("A writes w2", Op(1, 1, w2, 0x1234567890ABCDEF & mask))
    await s.cycle("B reads w2", b=Op(1, 0, w2))
    assert (await s.cycle("idle"))[1] == 0x1234567890ABCDEF & mask

    # a write cycle returns no data on its port; the other port reads another word
    await s.cycle("A writes w0, B reads w1", Op(1, 1, w0, 0x55 & mask), Op(1, 0, w1))
    assert (await s.cycle("idle"))[1] == mem[w1]

    # B reads the word A writes at the same edge: undefined; the word is written
    await s.cycle("A writes w1, B reads w1", Op(1, 1, w1, 0xA5A5 & mask), Op(1, 0, w1))
    await s.cycle("collision result")
    await s.cycle("B reads w1", b=Op(1, 0, w1))
    assert (await s.cycle("idle"))[1] == 0xA5A5 & mask

    # both write one word: undefined contents; the other words keep theirs
    await s.cycle("both write w2", Op(1, 1, w2, 1), Op(1, 1, w2, 2))
    await s.cycle("read w2 and w1", Op(1, 0, w2), Op(1, 0, w1))
    assert (await s.cycle("idle"))[1] == 0xA5A5 & mask

    # random traffic on both ports, collisions included
    clashes = 0
    for _ in range(prm.get("CYCLES", 2000)):
        a = Op(int(rng.random() < 0.8), int(rng.random() < 0.4), rng.randrange(depth), rng.getrandbits(width))
        addr_b = a.addr if rng.random() < 0.15 else rng.randrange(depth)
        b = Op(int(rng.random() < 0.8), int(rng.random() < 0.4), addr_b, rng.getrandbits(width))
        clashes += a.en and b.en and (a.we or b.we) and a.addr == b.addr
        await s.cycle("random traffic", a, b)
    await s.cycle("random traffic, last edge")
    assert clashes > 0, "the random traffic never collided: raise CYCLES"
