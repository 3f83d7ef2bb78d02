"""FETCH: read bursts of whole instructions over the DRAM port, decode, dispatch in order.

One burst (``min(max_burst // beats_per_insn, remaining, up to the 4 KiB boundary)``
instructions) is one port request; from the cycle the burst ends its instructions are
dispatched one per ``dispatch_cycles``, each to its unit's queue, in one event. The RTL's
queue is full in cycle ``d`` while it holds ``depth`` entries (pushed before ``d``, not
popped before ``d - queue_latency_cycles + 1``); entries this model dispatches ahead of
time (at a later cycle) count as held, since a pop only ever frees room: when the check
says full, FETCH waits for that unit's next pop ``p`` and dispatches at
``max(d, p + queue_latency_cycles)``, which is the cycle-by-cycle stall exactly.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from hw.isa import INSN_BYTES, QUEUE_OF_OPCODE
from sim.tlm.axi_port import Segment
from sim.tlm.decode import Decoder
from sim.tlm.dram import PAGE

if TYPE_CHECKING:
    from sim.tlm.model import TlmModel


class Fetch:
    """The fetch unit."""

    def __init__(self, model: "TlmModel", insn_addr: int, insn_count: int):
        self.m = model
        self.sim = model.sim
        self.T = model.timing
        self.decoder = Decoder(model.isa)
        self.addr = insn_addr
        self.count = insn_count
        self.next_pc = 0                      # next instruction to read from DRAM
        self.buf: deque[tuple[int, int]] = deque()  # (pc, word) read, not yet dispatched
        self.t_next = 0                       # earliest cycle of the next dispatch
        self.stalled_on: str | None = None    # unit whose full queue blocks dispatch
        self.stuck_since: int | None = None   # cycle from which FETCH is finished or stalled
        self.stopped = False                  # a dispatch fault: fetch does nothing more
        self._n = 0
        self._pc0 = 0

    @property
    def bytes(self) -> int:
        return self.m.port_beats("fetch") * self.T.bus_bytes

    def start(self, t: int) -> None:
        self.sim.now_or_later(t + self.T.fetch_start_cycles, self._request)

    def _request(self, t: int) -> None:
        if self.stopped or self.m.halted or self.next_pc >= self.count:
            return
        addr = self.addr + INSN_BYTES * self.next_pc
        n = min(self.T.insns_per_fetch_burst, self.count - self.next_pc, (PAGE - addr % PAGE) // INSN_BYTES)
        self._n, self._pc0 = n, self.next_pc
        beats = n * self.T.beats_per_insn
        self.m.port.request(t, Segment("fetch", False, np.array([beats], dtype=np.int64),
                                       np.array([self.T.read_burst_cycles(beats)], dtype=np.int64),
                                       self._burst_done))

    @property
    def burst_pc(self) -> int:
        """The pc of the first instruction of the current (or last) burst."""
        return self._pc0

    def _burst_done(self, t: int) -> None:
        n, pc0 = self._n, self.next_pc
        addr = self.addr + INSN_BYTES * pc0
        raw = self.m.dram_model.mem[addr:addr + INSN_BYTES * n].tobytes()
        self.buf.extend((pc0 + k, int.from_bytes(raw[k * INSN_BYTES:(k + 1) * INSN_BYTES], "little"))
                        for k in range(n))
        self.next_pc += n
        self.t_next = max(self.t_next, t)
        self._dispatch(t)

    def _dispatch(self, t: int) -> None:
        units = self.m.units
        step = self.T.dispatch_cycles
        buf = self.buf
        while buf:
            d = self.t_next
            pc, word = buf[0]
            insn, code, msg = self.decoder.decode(word)
            if code:
                self.stopped = True
                buf.clear()
                self.sim.at(d, self.m.fault_event, code, pc, "fetch", msg)
                return
            unit = units[QUEUE_OF_OPCODE[insn.MNEMONIC]]
            free_at = unit.room_from(d)
            if free_at is None:  # full until the unit's next pop
                self.stalled_on = unit.name
                self.stuck_since = d
                return
            if free_at > d:      # full in d, room from free_at (a pop already seen)
                self.t_next = d = free_at
            self.stalled_on = self.stuck_since = None
            buf.popleft()
            unit.enqueue(d, pc, insn)
            self.t_next = d + step
        if self.next_pc < self.count:
            self.sim.now_or_later(self.t_next, self._request)
        else:
            self.stuck_since = self.t_next  # F_DONE from the cycle after the last dispatch

    def on_pop(self, unit: str, t: int) -> None:
        """``unit`` popped its queue at ``t``: resume a dispatch stalled on it."""
        if self.stalled_on == unit and not self.stopped:
            self.stalled_on = None
            self.t_next = max(self.t_next, t + self.T.queue_latency_cycles)
            self._dispatch(t)

    @property
    def stalled(self) -> bool:
        return self.stalled_on is not None
