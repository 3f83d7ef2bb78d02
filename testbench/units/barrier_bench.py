"""cocotb bench of hw/rtl/barrier.v (where the cores meet) against its plain rule: ``bar_go`` when
every core has arrived; ``finished`` remembers the cores whose FINISH pulsed since reset or ``clr``;
``all_finish`` when every core has finished, counting this cycle's pulses; ``err`` (ERR_BARRIER)
when some core waits at a BARRIER, every core has arrived or finished and at least one finished,
reported on the lowest arrived core with its pc (core 0 and pc 0 when none has arrived).
"""

from __future__ import annotations

from typing import Any

import cocotb
from cocotb.triggers import FallingEdge, Timer

from testbench.units.bench_setup import bench_params, bench_rng, clock_and_reset


def expected(n: int, arrived: int, finish: int, finished: int, pcs: list[int]) -> dict[str, int]:
    """What the barrier's outputs must be for these inputs and the ``finished`` register."""
    every = (1 << n) - 1
    lowest = next((k for k in range(n) if arrived >> k & 1), None)
    return {"bar_go": int(arrived == every), "all_finish": int((finished | finish) == every),
            "err": int(arrived != 0 and (arrived | finished) == every and finished != 0),
            "err_core": lowest or 0, "err_pc": 0 if lowest is None else pcs[lowest]}


@cocotb.test()
async def random_arrivals_finishes_and_clears(dut: Any) -> None:
    n = bench_params()["N"]
    rng = bench_rng("random_arrivals_finishes_and_clears")
    await clock_and_reset(dut, {"clr": 0, "arrived": 0, "finish": 0, "pc": 0})
    finished = 0
    seen = {"bar_go": 0, "all_finish": 0, "err": 0}
    for cycle in range(4000):
        clr = rng.random() < 0.03
        # arrivals often all-or-most, so bar_go and the error are both reached
        arrived = sum(1 << k for k in range(n) if rng.random() < 0.7)
        finish = sum(1 << k for k in range(n) if rng.random() < 0.08)
        pcs = [rng.randrange(1 << 32) for _ in range(n)]
        dut.clr.value, dut.arrived.value, dut.finish.value = int(clr), arrived, finish
        dut.pc.value = sum(p << (32 * k) for k, p in enumerate(pcs))
        await Timer(1, unit="ns")
        want = expected(n, arrived, finish, finished, pcs)
        got = {name: int(getattr(dut, name).value) for name in want}
        assert got == want, (f"cycle {cycle}: arrived {arrived:b} finish {finish:b} finished {finished:b}: "
                             f"{got} != {want}")
        for name in seen:
            seen[name] += want[name]
        await FallingEdge(dut.clk)
        finished = 0 if clr else finished | finish
    assert all(seen.values()), f"some output never rose: {seen}"
