"""cocotb bench of hw/rtl/burst_calc.v (the length of the next DMA/fetch burst) against the rule
of docs/microarch.md: ``min(MAX_BURST, beats left, beats to the next 4 KiB boundary)``.

Two tests: seeded random and edge operands checked one by one, and whole transfers
split burst by burst through the block (the address advancing by each burst), which
must give bursts that never cross a 4 KiB page, never exceed MAX_BURST, are each as
long as allowed, and add up to the transfer.
"""

from __future__ import annotations

from typing import Any

import cocotb
from cocotb.triggers import Timer

from testbench.units.bench_setup import bench_config, bench_rng

PAGE = 4096


def reference(page_off: int, beats_left: int, bus_bytes: int, max_burst: int) -> int:
    return min(max_burst, beats_left, (PAGE - page_off) // bus_bytes)


async def burst_len(dut: Any, addr: int, beats_left: int) -> int:
    dut.page_off.value = addr % PAGE
    dut.beats_left.value = beats_left
    await Timer(1, unit="ns")
    return int(dut.len.value)


@cocotb.test()
async def random_and_edge_operands(dut: Any) -> None:
    cfg = bench_config()
    bus, mb = cfg.bus_bytes, cfg.max_burst
    rng = bench_rng("random_and_edge_operands")
    offs = [0, bus, PAGE - bus, PAGE - mb * bus, PAGE - (mb - 1) * bus, PAGE - (mb + 1) * bus, PAGE // 2]
    lefts = [1, 2, mb - 1, mb, mb + 1, PAGE // bus - 1, PAGE // bus, PAGE // bus + 1, (1 << 32) - 1, 1 << 31]
    pairs = [(o, n) for o in offs for n in lefts if n > 0]
    for _ in range(3000):
        n = rng.choice([rng.randint(1, 2 * mb), rng.randint(1, 1 << 12), rng.randint(1, (1 << 32) - 1)])
        pairs.append((rng.randrange(0, PAGE, bus), n))
    for off, left in pairs:
        got = await burst_len(dut, off, left)
        want = reference(off, left, bus, mb)
        assert got == want, f"page_off 0x{off:03x}, beats_left {left}: len {got}, want {want}"


@cocotb.test()
async def transfers_split_at_pages_and_max_burst(dut: Any) -> None:
    cfg = bench_config()
    bus, mb = cfg.bus_bytes, cfg.max_burst
    rng = bench_rng("transfers_split_at_pages_and_max_burst")
    for _ in range(300):
        addr = rng.randrange(0, 1 << 20, bus)
        total = rng.choice([1, mb, mb + 1, rng.randint(1, 3 * PAGE // bus)])
        left, bursts = total, []
        while left:
            n = await burst_len(dut, addr, left)
            assert 1 <= n <= mb, f"burst of {n} beats (MAX_BURST {mb}) at 0x{addr:x}"
            end = addr + n * bus
            assert addr // PAGE == (end - 1) // PAGE, f"burst [0x{addr:x}, 0x{end:x}) crosses a 4 KiB page"
            assert n == mb or n == left or end % PAGE == 0, f"burst of {n} at 0x{addr:x} could be longer"
            bursts.append(n)
            addr, left = end, left - n
        assert sum(bursts) == total
