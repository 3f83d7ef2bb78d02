"""LOAD (``hw/rtl/load_unit.v``): DRAM -> accumulator buffer, 2-D with stride and zero padding.

Inside the unit shell: WAIT checks the DRAM bytes (read region) and the accumulator
indices; EXECUTE walks the tile in order, a padding vector costing ``pad_vector_cycles``
and each data row's read bursts running back to back through the arbiter. The data moves
in one numpy operation at the end of EXECUTE. The cycles in which it writes the buffer (a
padding vector; a data vector at its last beat) are registered with the buffer's port
plan as the bursts are granted and the padding starts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hw import csr
from hw.isa_semantics import dram_span, sram_last_index
from sim.tlm.acc_buffer import PortUse
from sim.tlm.axi_arbiter import DmaJob
from sim.tlm.burst_calc import row_burst_beats, vector_beats
from sim.tlm.unit_shell import DmaUnitShell


class LoadUnit(DmaUnitShell):
    """DRAM -> accumulator buffer, 2-D with stride and zero padding."""

    name = "load"

    def check(self, i: Any) -> tuple[int, str] | None:
        span = dram_span(i, self.T)
        if span is not None and not self.regions.ok(*span, csr.ATTR_READ):
            return csr.ERR_DRAM_RANGE, f"LOAD reads DRAM [0x{span[0]:x}, 0x{span[1]:x}), not inside one readable region"
        last = sram_last_index(i)
        return None if last is None else self.acc.range_error(last, "LOAD")

    def begin(self, t: int) -> None:
        i, T = self.insn, self.T
        row_len = i.x_pad_0 + i.x_size + i.x_pad_1
        pad = T.pad_vector_cycles
        if i.y_size * i.x_size == 0:  # padding only
            n = ((i.y_pad_0 + i.y_size + i.y_pad_1) * row_len - i.y_size * i.x_size) * pad
            self._pads(t, n)
            self.end_execute(t + n)
            return
        vb = T.acc_vec_bytes
        addrs = (i.dram_base + np.arange(i.y_size, dtype=np.int64) * i.x_stride) * vb
        beats, per_row = row_burst_beats(addrs, i.x_size * vb, T.bus_bytes, T.max_burst)
        dur = beats + (T.rd_burst_overhead + T.read_latency)
        lead = (i.y_pad_0 * row_len + i.x_pad_0) * pad
        trail = (i.x_pad_1 + i.y_pad_1 * row_len) * pad
        if i.x_pad_0 + i.x_pad_1 == 0:  # rows back to back: one segment
            bounds, gaps = [(0, len(beats))], [lead]
        else:  # padding cycles between rows: one segment per row
            ends = np.cumsum(per_row).tolist()
            bounds = list(zip([0] + ends[:-1], ends))
            gaps = [lead] + [(i.x_pad_1 + i.x_pad_0) * pad] * (len(bounds) - 1)
        # a data vector is written at its last beat: beat m of a burst granted at g is at g + lead + m
        m0, count = vector_beats(beats, per_row, T.acc_vec_bytes // T.bus_bytes, last=True)
        granted, cut = self.port_uses("write", m0 + (T.rd_burst_overhead + T.read_latency),
                                      T.acc_vec_bytes // T.bus_bytes, count)
        self.dma = DmaJob(self.sim, self.port, self.name, False, beats, dur, bounds, gaps, trail, self.end_execute,
                          self._pads, granted, cut)
        self.dma.start(t)

    def _pads(self, t: int, n: int) -> None:
        """Padding vectors are written in the ``n`` cycles from ``t`` (one per cycle in the RTL)."""
        if n:
            self.acc.ports.add("pad", PortUse(np.array([t]), 1, np.array([n])))

    def complete(self, t: int) -> None:
        i = self.insn
        lanes = self.acc.lanes
        rows, cols = i.y_pad_0 + i.y_size + i.y_pad_1, i.x_pad_0 + i.x_size + i.x_pad_1
        if rows * cols == 0:
            return
        full = np.zeros((rows, cols, lanes), dtype=np.int32)
        if i.y_size * i.x_size:
            full[i.y_pad_0:i.y_pad_0 + i.y_size, i.x_pad_0:i.x_pad_0 + i.x_size] = \
                self.dram.read_acc_tile(i.dram_base, i.y_size, i.x_size, i.x_stride)
        self.acc.mem[i.sram_base:i.sram_base + rows * cols] = full.reshape(-1, lanes)
