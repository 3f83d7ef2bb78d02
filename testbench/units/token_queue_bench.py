"""cocotb bench of hw/rtl/token_queue.v against a Python model of the token counter.

The bench plays both units around one queue, as the load/compute/store units do: the
producer pushes only while ``!full``, the consumer pops only while ``avail``. Each
falling edge it checks ``count``, ``avail`` and ``full`` against :class:`TokenCounter`
and drives the next cycle's push, pop and clr. Traffic is random (seeded) in phases
that fill, drain and churn the queue, so full, empty, push and pop in one cycle, and a
clear of a non-empty queue all happen; the test fails if one of them never did.
"""

from __future__ import annotations

from typing import Any

import cocotb
from cocotb.triggers import FallingEdge

from testbench.units.bench_setup import bench_config, bench_rng, clock_and_reset


class TokenCounter:
    """The reference: a counter 0..depth; push and pop in one cycle leave it unchanged; clr empties it."""

    def __init__(self, depth: int):
        self.depth = depth
        self.count = 0

    @property
    def avail(self) -> bool:
        return self.count > 0

    @property
    def full(self) -> bool:
        return self.count == self.depth

    def clock(self, push: bool, pop: bool, clr: bool) -> None:
        if clr:
            self.count = 0
        elif push and not pop:
            self.count += 1
        elif pop and not push:
            self.count -= 1


def check(dut: Any, m: TokenCounter, cycle: int) -> None:
    got = (int(dut.count.value), int(dut.avail.value), int(dut.full.value))
    want = (m.count, int(m.avail), int(m.full))
    assert got == want, f"cycle {cycle}: (count, avail, full) = {got}, the model says {want}"


@cocotb.test()
async def random_traffic(dut: Any) -> None:
    """Seeded random pushes and pops in phases (fill, drain, churn), rare clears."""
    depth = bench_config().token_queue_depth
    rng = bench_rng("random_traffic")
    await clock_and_reset(dut, {"push": 0, "pop": 0, "clr": 0})
    m = TokenCounter(depth)
    seen = {"full": 0, "empty": 0, "push_pop": 0, "clr_nonempty": 0, "push_blocked": 0}
    phases = [(0.9, 0.2), (0.2, 0.9), (0.6, 0.6)] * 12
    cycle = 0
    for p_push, p_pop in phases:
        for _ in range(40 + rng.randrange(40)):
            check(dut, m, cycle)
            want_push = rng.random() < p_push
            push = want_push and not m.full          # the producer waits while full
            pop = rng.random() < p_pop and m.avail   # the consumer waits while empty
            clr = rng.random() < 0.004
            seen["full"] += m.full
            seen["empty"] += not m.avail
            seen["push_pop"] += push and pop
            seen["clr_nonempty"] += clr and m.avail
            seen["push_blocked"] += want_push and m.full
            dut.push.value, dut.pop.value, dut.clr.value = int(push), int(pop), int(clr)
            m.clock(push, pop, clr)
            await FallingEdge(dut.clk)
            cycle += 1
    check(dut, m, cycle)
    missing = [k for k, v in seen.items() if not v]
    assert not missing, f"random traffic never produced: {missing} ({seen})"


@cocotb.test()
async def fill_then_drain(dut: Any) -> None:
    """Push every cycle until full (count 1..depth, full exactly at depth), then pop every cycle to
    empty; a push and a pop together keep the count; clr wins over a push."""
    depth = bench_config().token_queue_depth
    await clock_and_reset(dut, {"push": 0, "pop": 0, "clr": 0})
    m = TokenCounter(depth)
    for k in range(depth):
        check(dut, m, k)
        assert not m.full
        dut.push.value = 1
        m.clock(True, False, False)
        await FallingEdge(dut.clk)
    check(dut, m, depth)
    assert int(dut.full.value) == 1
    dut.push.value = 0
    dut.pop.value = 1   # a pop from a full queue
    m.clock(False, True, False)
    await FallingEdge(dut.clk)
    check(dut, m, depth + 1)
    dut.push.value = 1  # push and pop together: no change
    m.clock(True, True, False)
    await FallingEdge(dut.clk)
    check(dut, m, depth + 2)
    dut.push.value = 0
    for k in range(depth - 1):
        m.clock(False, True, False)
        await FallingEdge(dut.clk)
        check(dut, m, depth + 3 + k)
    assert m.count == 0 and int(dut.avail.value) == 0
    dut.pop.value = 0
    dut.push.value = 1
    dut.clr.value = 1   # clear and push in one cycle: the clear wins
    m.clock(True, False, True)
    await FallingEdge(dut.clk)
    check(dut, m, 2 * depth + 3)
    dut.push.value = dut.clr.value = 0
