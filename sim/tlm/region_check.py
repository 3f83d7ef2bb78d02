"""The DRAM range check (``hw/rtl/region_check.v``): is a byte range inside one region window
whose ATTR allows the access?

The windows are the ``REGIONn_BASE/SIZE/ATTR`` registers (``sim/tlm/csr_block.py`` reads
them at START); a window of size 0 is unused. LOAD and STORE check the bytes their 2-D
transfer touches (``hw.isa_semantics.dram_span``) before they move anything; FETCH checks the
instruction window at START.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RegionWindow:
    """One REGIONn window as programmed through the CSRs."""

    base: int
    size: int
    attr: int

    def contains(self, lo: int, hi: int) -> bool:
        return self.base <= lo and hi <= self.base + self.size


class RegionCheck:
    """The region windows of the current run, and the check against them."""

    def __init__(self, dram_bytes: int):
        self.dram_bytes = dram_bytes
        self.windows: list[RegionWindow] = []

    def ok(self, lo: int, hi: int, attr: int) -> bool:
        """True when bytes [lo, hi) lie inside DRAM and inside one region allowing ``attr``."""
        if lo < 0 or hi > self.dram_bytes:
            return False
        return any(r.size and (r.attr & attr) == attr and r.contains(lo, hi) for r in self.windows)
