"""STORE (``hw/rtl/store_unit.v``): accumulator buffer -> DRAM, each lane narrowed to OUT_WIDTH
bits as a C cast would, 2-D with stride.

Inside the unit shell: WAIT checks the DRAM bytes (write region) and the accumulator
indices; EXECUTE runs each row's write bursts back to back through the arbiter, pausing
``b_resp_cycles`` after each B. The data moves in one numpy operation when EXECUTE starts
(tokens keep COMPUTE off those vectors until the store pushes). The cycles in which it
reads the buffer (one cycle before a vector's first W beat) are registered with the
buffer's port plan as the bursts are granted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hw import csr
from hw.isa_semantics import dram_span, sram_last_index
from sim.tlm.axi_arbiter import DmaJob
from sim.tlm.burst_calc import row_burst_beats, vector_beats
from sim.tlm.unit_shell import DmaUnitShell


class StoreUnit(DmaUnitShell):
    """Accumulator buffer -> DRAM with the narrowing cast."""

    name = "store"

    def check(self, i: Any) -> tuple[int, str] | None:
        span = dram_span(i, self.T)
        if span is None:
            return None
        if not self.regions.ok(*span, csr.ATTR_WRITE):
            return csr.ERR_DRAM_RANGE, f"STORE writes DRAM [0x{span[0]:x}, 0x{span[1]:x}), not inside one writable region"
        return self.acc.range_error(sram_last_index(i), "STORE")

    def move_data(self, i: Any, dram_base: int | None = None) -> None:
        """The data movement of STORE ``i`` (range already checked, tile not empty): the buffer's
        vectors narrowed to DRAM, at ``dram_base`` instead of the instruction's when given."""
        dram = self.dram
        tile = self.acc.mem[i.sram_base:i.sram_base + i.y_size * i.x_size].astype(dram.out_dtype)
        dram.write_out_tile(i.dram_base if dram_base is None else dram_base, i.x_stride,
                            tile.reshape(i.y_size, i.x_size, -1))

    def begin(self, t: int) -> None:
        i, T = self.insn, self.T
        if i.y_size * i.x_size == 0:
            self.end_execute(t)
            return
        # The data moves now: the unit reads the buffer as the W beats need them, and tokens
        # keep compute off these vectors until the store pushes.
        if self.data_log is not None:
            self.data_log.append(("store", i))
        self.move_data(i)
        vb = T.out_vec_bytes
        addrs = (i.dram_base + np.arange(i.y_size, dtype=np.int64) * i.x_stride) * vb
        beats, per_row = row_burst_beats(addrs, i.x_size * vb, T.bus_bytes, T.max_burst)
        dur = beats + (T.wr_burst_overhead + T.write_latency)
        if T.b_resp_cycles == 0:
            bounds, gaps, trail = [(0, len(beats))], [0], 0
        else:  # the unit pauses after each B: every burst is its own segment
            bounds = [(k, k + 1) for k in range(len(beats))]
            gaps, trail = [0] + [T.b_resp_cycles] * (len(beats) - 1), T.b_resp_cycles
        # a vector is read the cycle before its first W beat: beat m of a burst granted at g is at g + 1 + m
        m0, count = vector_beats(beats, per_row, vb // T.bus_bytes, last=False)
        granted, cut = self.port_uses("read", m0 + (T.wr_burst_overhead - 1), vb // T.bus_bytes, count)
        self.dma = DmaJob(self.sim, self.port, self.name, True, beats, dur, bounds, gaps, trail, self.end_execute,
                          None, granted, cut)
        self.dma.start(t)
