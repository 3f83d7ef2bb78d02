"""cocotb bench of hw/rtl/insn_queue.v (the show-ahead FIFO of the three instruction queues)
against a Python deque.

Each falling edge the bench checks ``empty``, ``full``, ``count`` and, while not empty,
``dout`` (the head entry, shown ahead of the pop) against the model, then drives a
random push (with random ``din``) and pop. Unlike the units, it also pushes into a full
queue and pops an empty one: the FIFO must ignore both. Traffic runs in phases that
fill, drain and churn the queue, so both pointers wrap many times; the test fails if
full, empty, an ignored push or pop, a push and pop in one cycle, or a clear of a
non-empty queue never happened.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import cocotb
from cocotb.triggers import FallingEdge

from testbench.units.bench_setup import bench_params, bench_rng, clock_and_reset


class Fifo:
    """The reference: DEPTH entries; a push while full and a pop while empty do nothing."""

    def __init__(self, depth: int):
        self.depth = depth
        self.q: deque[int] = deque()

    def clock(self, push: bool, din: int, pop: bool, clr: bool) -> None:
        if clr:
            self.q.clear()
            return
        full, empty = len(self.q) == self.depth, not self.q
        if pop and not empty:
            self.q.popleft()
        if push and not full:
            self.q.append(din)


def check(dut: Any, m: Fifo, cycle: int) -> None:
    got = (int(dut.empty.value), int(dut.full.value), int(dut.count.value))
    want = (int(not m.q), int(len(m.q) == m.depth), len(m.q))
    assert got == want, f"cycle {cycle}: (empty, full, count) = {got}, the model says {want}"
    if m.q:
        head = int(dut.dout.value)
        assert head == m.q[0], f"cycle {cycle}: dout 0x{head:x}, the head entry is 0x{m.q[0]:x}"


@cocotb.test()
async def random_traffic(dut: Any) -> None:
    prm = bench_params()
    depth, width = prm["DEPTH"], prm["W"]
    rng = bench_rng("random_traffic")
    await clock_and_reset(dut, {"push": 0, "pop": 0, "clr": 0, "din": 0})
    m = Fifo(depth)
    seen = {"full": 0, "empty": 0, "push_ignored": 0, "pop_ignored": 0, "push_pop": 0, "clr_nonempty": 0,
            "wraps": 0}
    pushes = 0
    cycle = 0
    for p_push, p_pop in [(0.9, 0.2), (0.15, 0.9), (0.6, 0.6)] * 15:
        for _ in range(30 + rng.randrange(30)):
            check(dut, m, cycle)
            push, pop, clr = rng.random() < p_push, rng.random() < p_pop, rng.random() < 0.005
            din = rng.getrandbits(width)
            full, empty = len(m.q) == depth, not m.q
            seen["full"] += full
            seen["empty"] += empty
            seen["push_ignored"] += push and full and not clr
            seen["pop_ignored"] += pop and empty and not clr
            seen["push_pop"] += push and pop and not full and not empty and not clr
            seen["clr_nonempty"] += clr and not empty
            pushes += push and not full and not clr
            dut.push.value, dut.pop.value, dut.clr.value, dut.din.value = int(push), int(pop), int(clr), din
            m.clock(push, din, pop, clr)
            await FallingEdge(dut.clk)
            cycle += 1
    check(dut, m, cycle)
    seen["wraps"] = pushes // depth >= 4
    missing = [k for k, v in seen.items() if not v]
    assert not missing, f"random traffic never produced: {missing} ({seen})"


@cocotb.test()
async def order_and_show_ahead(dut: Any) -> None:
    """Fill with DEPTH known entries (empty falls the cycle after the first push), read them back
    in order: each is on dout before its pop."""
    prm = bench_params()
    depth, width = prm["DEPTH"], prm["W"]
    rng = bench_rng("order_and_show_ahead")
    await clock_and_reset(dut, {"push": 0, "pop": 0, "clr": 0, "din": 0})
    entries = [rng.getrandbits(width) for _ in range(depth)]
    for k, e in enumerate(entries):
        assert int(dut.count.value) == k
        dut.push.value, dut.din.value = 1, e
        await FallingEdge(dut.clk)
        assert int(dut.empty.value) == 0 and int(dut.dout.value) == entries[0]
    dut.push.value = 0
    assert int(dut.full.value) == 1
    for k, e in enumerate(entries):
        assert int(dut.dout.value) == e, f"entry {k}: 0x{int(dut.dout.value):x}, pushed 0x{e:x}"
        dut.pop.value = 1
        await FallingEdge(dut.clk)
    dut.pop.value = 0
    assert int(dut.empty.value) == 1 and int(dut.count.value) == 0
