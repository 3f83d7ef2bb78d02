"""cocotb bench of hw/rtl/region_check.v: is the byte range ``[lo, hi)`` inside one DRAM region whose
ATTR allows the access (docs/microarch.md "Regions")? Against the plain rule: some region with a
non-zero SIZE, the READ (or WRITE) attribute, ``base <= lo`` and ``hi <= base + size`` (64-bit, so a
region ending at 2**32 or a range past it never wraps).
"""

from __future__ import annotations

from typing import Any

import cocotb
from cocotb.triggers import Timer

from hw import csr
from testbench.units.bench_setup import bench_config, bench_rng


def allowed(lo: int, hi: int, write: bool, regions: list[tuple[int, int, int]]) -> bool:
    need = csr.ATTR_WRITE if write else csr.ATTR_READ
    return any(size and attr & need and base <= lo and hi <= base + size for base, size, attr in regions)


async def check(dut: Any, lo: int, hi: int, write: bool) -> int:
    dut.lo.value = lo
    dut.hi.value = hi
    dut.need_write.value = int(write)
    await Timer(1, unit="ns")
    return int(dut.ok.value)


@cocotb.test()
async def ranges_against_random_region_tables(dut: Any) -> None:
    n = bench_config().max_regions
    rng = bench_rng("ranges_against_random_region_tables")
    for _ in range(150):
        regions = []
        for _ in range(n):
            base = rng.choice([0, rng.randrange(0, 1 << 32, 64), (1 << 32) - 64, rng.randrange(0, 1 << 20)])
            size = rng.choice([0, 64, rng.randrange(1, 1 << 20), (1 << 32) - base, rng.randrange(0, 1 << 32)])
            size = min(size, (1 << 32) - 1)
            regions.append((base, size, rng.randrange(4)))
        dut.rbase.value = sum(b << (32 * k) for k, (b, _, _) in enumerate(regions))
        dut.rsize.value = sum(s << (32 * k) for k, (_, s, _) in enumerate(regions))
        dut.rattr.value = sum(a << (2 * k) for k, (_, _, a) in enumerate(regions))
        for _ in range(40):
            base, size, _ = rng.choice(regions)
            lo = rng.choice([base, base + size, base + size - 1, max(0, base - 1), rng.randrange(0, 1 << 33),
                             base + rng.randrange(0, size + 1)])
            hi = lo + rng.choice([0, 1, 16, size - (lo - base), size - (lo - base) + 1, rng.randrange(0, 1 << 12),
                                  1 << 32])
            lo, hi = lo % (1 << 64), max(lo, hi) % (1 << 64)
            for write in (False, True):
                got = await check(dut, lo, hi, write)
                want = allowed(lo, hi, write, regions)
                assert got == want, f"[0x{lo:x}, 0x{hi:x}) {'write' if write else 'read'} in {regions}: ok={got}"
