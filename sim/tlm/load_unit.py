"""LOAD (``hw/rtl/load_unit.v``): DRAM -> an on-chip buffer (ACC, INP, WGT or UOP), 2-D with
stride and zero padding.

Inside the unit shell: WAIT checks the DRAM bytes (read region) and the indices in the named
buffer; EXECUTE walks the tile in order, a padding entry costing ``pad_vector_cycles`` and
each data row's read bursts running back to back through the arbiter. The unit is the
buffer's entry (``Timing.elem_bytes``: an accumulator vector, an input vector, a weight
block or a 16-byte micro-op; ``Timing.beats_per_elem`` beats each), so the walk and its
timing are the same for every buffer. The data moves in one numpy operation at the end of
EXECUTE, which also sets the valid bits of the weight and micro-op entries written
(``sim/tlm/gemm_buffers.py``). Only a LOAD into ACC shares a port with another unit (the
accumulator's write port, which the compute unit waits for): the cycles in which it writes
a vector (a padding vector; a data vector at its last beat) are registered with the
buffer's port plan as the bursts are granted and the padding starts. A LOAD into INP, WGT
or UOP registers nothing.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hw import csr
from hw.isa_semantics import buffer_of, dram_span, load_tile_shape, sram_last_index
from sim.tlm.acc_buffer import AccBuffer, PortUse
from sim.tlm.axi_arbiter import AxiArbiter, DmaJob
from sim.tlm.burst_calc import row_burst_beats, vector_beats
from sim.tlm.dram import Dram
from sim.tlm.gemm_buffers import GemmBuffers
from sim.tlm.insn_queue import InsnQueue
from sim.tlm.region_check import RegionCheck
from sim.tlm.scheduler import Scheduler
from sim.tlm.timing import Timing
from sim.tlm.token_queue import TokenQueue
from sim.tlm.trace import Tracer
from sim.tlm.unit_shell import DmaUnitShell, Fault


class LoadUnit(DmaUnitShell):
    """DRAM -> the accumulator buffer or a GEMM operand buffer, 2-D with stride and zero padding."""

    name = "load"
    STEADY_FIXED = ("gemm_bufs",)

    def __init__(self, sim: Scheduler, timing: Timing, tracer: Tracer | None, queue: InsnQueue,
                 tokens: dict[str, TokenQueue], fault: Fault, on_idle: Callable[[int], None],
                 port: AxiArbiter, dram: Dram, regions: RegionCheck, acc: AccBuffer, gemm_bufs: GemmBuffers):
        super().__init__(sim, timing, tracer, queue, tokens, fault, on_idle, port, dram, regions, acc)
        self.gemm_bufs = gemm_bufs

    def check(self, i: Any) -> tuple[int, str] | None:
        span = dram_span(i, self.T)
        buf = buffer_of(i)
        if span is not None and not self.regions.ok(*span, csr.ATTR_READ):
            return csr.ERR_DRAM_RANGE, (f"LOAD into {buf} reads DRAM [0x{span[0]:x}, 0x{span[1]:x}), not inside "
                                        f"one readable region")
        last = sram_last_index(i)
        if last is None:
            return None
        if buf == "ACC":
            return self.acc.range_error(last, "LOAD")
        depth = self.gemm_bufs.depth(buf)
        if last >= depth:
            return csr.ERR_SRAM_RANGE, f"LOAD reaches {buf} index {last}, past its depth {depth}"
        return None

    def begin(self, t: int) -> None:
        i, T = self.insn, self.T
        buf = buffer_of(i)
        to_acc = buf == "ACC"
        row_len = i.x_pad_0 + i.x_size + i.x_pad_1
        pad = T.pad_vector_cycles
        pads = self._pads if to_acc else None
        if i.y_size * i.x_size == 0:  # padding only
            n = ((i.y_pad_0 + i.y_size + i.y_pad_1) * row_len - i.y_size * i.x_size) * pad
            if to_acc:
                self._pads(t, n)
            self.end_execute(t + n)
            return
        vb = T.elem_bytes(buf)
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
        granted = cut = None
        if to_acc:
            # a data vector is written at its last beat: beat m of a burst granted at g is at g + lead + m
            bpe = T.beats_per_elem(buf)
            m0, count = vector_beats(beats, per_row, bpe, last=True)
            granted, cut = self.port_uses("write", m0 + (T.rd_burst_overhead + T.read_latency), bpe, count)
        self.dma = DmaJob(self.sim, self.port, self.name, False, beats, dur, bounds, gaps, trail, self.end_execute,
                          pads, granted, cut)
        self.dma.start(t)

    def _pads(self, t: int, n: int) -> None:
        """Padding vectors are written in the ``n`` cycles from ``t`` (one per cycle in the RTL)."""
        if n:
            self.acc.ports.add("pad", PortUse(np.array([t]), 1, np.array([n])))

    def complete(self, t: int) -> None:
        if self.data_log is not None:
            self.data_log.append(("load", self.insn))
        self.move_data(self.insn)

    def move_data(self, i: Any, dram_base: int | None = None) -> None:
        """The data movement of LOAD ``i`` (range already checked): DRAM -> its buffer; from
        ``dram_base`` instead of the instruction's when given (the fast-forward's replay)."""
        base = i.dram_base if dram_base is None else dram_base
        buf = buffer_of(i)
        eb = self.T.elem_bytes(buf)
        rows, cols = load_tile_shape(i)
        if rows * cols == 0:
            return
        if rows * cols == i.y_size * i.x_size:  # no padding: the tile is the DRAM's entries as they are
            entries = self.dram.read_tile(base, i.y_size, i.x_size, i.x_stride, eb).reshape(rows * cols, eb)
            if buf == "ACC":
                self.acc.mem[i.sram_base:i.sram_base + rows * cols] = entries.view("<i4")
            else:
                self.gemm_bufs.write(buf, i.sram_base, entries)
            return
        full = np.zeros((rows, cols, eb), dtype=np.uint8)
        if i.y_size * i.x_size:
            full[i.y_pad_0:i.y_pad_0 + i.y_size, i.x_pad_0:i.x_pad_0 + i.x_size] = \
                self.dram.read_tile(base, i.y_size, i.x_size, i.x_stride, eb)
        entries = full.reshape(rows * cols, eb)
        if buf == "ACC":
            self.acc.mem[i.sram_base:i.sram_base + rows * cols] = entries.view("<i4")
        else:
            self.gemm_bufs.write(buf, i.sram_base, entries)
