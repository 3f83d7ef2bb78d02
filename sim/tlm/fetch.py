"""FETCH (``hw/rtl/fetch.v``): read bursts of whole instructions over the DRAM port, decode
(``sim/tlm/decode.py``), dispatch in order to the instruction queues.

One burst (``min(max_burst // beats_per_insn, remaining, up to the 4 KiB boundary)``
instructions) is one port request; from the cycle the burst ends its instructions are
dispatched one per ``dispatch_cycles``, each to its unit's queue, in one event. The RTL's
queue is full in cycle ``d`` while it holds ``depth`` entries (pushed before ``d``, not
popped before ``d - queue_latency_cycles + 1``); entries this model dispatches ahead of
time (at a later cycle) count as held, since a pop only ever frees room: when the check
says full, FETCH waits for that unit's next pop ``p`` and dispatches at
``max(d, p + queue_latency_cycles)``, which is the cycle-by-cycle stall exactly.

After dispatching a BARRIER, FETCH holds (the RTL's F_BAR: no dispatch, no request) until its
core's compute unit completes the BARRIER in cycle ``p`` (:meth:`Fetch.resume`); it goes on from
``p + 1`` with its buffer, its next burst or nothing.
"""

from __future__ import annotations

from collections import deque
from typing import Callable

import numpy as np

from hw.isa import INSN_BYTES, QUEUE_OF_OPCODE, Isa
from sim.tlm.axi_arbiter import AxiArbiter, Segment
from sim.tlm.burst_calc import PAGE, fetch_burst_insns
from sim.tlm.decode import Decoder
from sim.tlm.dram import Dram
from sim.tlm.insn_queue import InsnQueue
from sim.tlm.scheduler import Scheduler
from sim.tlm.steady_state import StateWalk, Unsupported, steady_event
from sim.tlm.timing import Timing


class Fetch:
    """The fetch unit of one run: instructions ``[0, insn_count)`` from byte ``insn_addr``.

    It reads ``dram`` through ``port``, pushes to ``queues`` (by unit name; it listens to
    their pops) and reports a dispatch fault with ``fault(cycle, code, pc, unit, message)``.
    """

    # the fast-forward's view (``sim/tlm/steady_state.py``); ``next_pc`` is the fast-forward's
    # reference, moved by the instructions of the periods it jumps
    STEADY_STATE = ("buf", "t_next", "stalled_on", "stuck_since", "stopped", "held", "_n", "next_pc")
    STEADY_FIXED = ("sim", "T", "decoder", "port", "dram", "queues", "fault", "addr", "count", "_page_free")

    def __init__(self, sim: Scheduler, timing: Timing, isa: Isa, port: AxiArbiter, dram: Dram,
                 queues: dict[str, InsnQueue], fault: Callable[[int, int, int, str, str], None],
                 insn_addr: int, insn_count: int):
        self.sim = sim
        self.T = timing
        self.decoder = Decoder(isa)
        self.port = port
        self.dram = dram
        self.queues = queues
        for q in queues.values():
            q.on_pop = self.on_pop
        self.fault = fault
        self.addr = insn_addr
        self.count = insn_count
        self.next_pc = 0                      # next instruction to read from DRAM
        self.buf: deque[tuple[int, int]] = deque()  # (pc, word) read, not yet dispatched
        self.t_next = 0                       # earliest cycle of the next dispatch
        self.stalled_on: str | None = None    # unit whose full queue blocks dispatch
        self.stuck_since: int | None = None   # cycle from which FETCH is finished or stalled
        self.stopped = False                  # a dispatch fault: fetch does nothing more
        self.held = False                     # a BARRIER dispatched and not yet completed
        self._n = 0
        # bursts never cut by a 4 KiB page (only the last may be short): burst sizes do not depend on
        # FETCH's address, else the address within its page is part of its timing state
        burst_bytes = timing.insns_per_fetch_burst * INSN_BYTES
        self._page_free = PAGE % burst_bytes == 0 and insn_addr % burst_bytes == 0

    def start(self, t: int) -> None:
        self.sim.now_or_later(t + self.T.fetch_start_cycles, self._request)

    @steady_event
    def _request(self, t: int) -> None:
        if self.stopped or self.sim.stopped or self.next_pc >= self.count:
            return
        addr = self.addr + INSN_BYTES * self.next_pc
        n = fetch_burst_insns(addr, self.count - self.next_pc, self.T.insns_per_fetch_burst, INSN_BYTES)
        self._n = n
        beats = n * self.T.beats_per_insn
        self.port.request(t, Segment("fetch", False, np.array([beats], dtype=np.int64),
                                       np.array([self.T.read_burst_cycles(beats)], dtype=np.int64),
                                       self._burst_done))

    def _burst_done(self, t: int) -> None:
        n, pc0 = self._n, self.next_pc
        addr = self.addr + INSN_BYTES * pc0
        raw = self.dram.mem[addr:addr + INSN_BYTES * n].tobytes()
        self.buf.extend((pc0 + k, int.from_bytes(raw[k * INSN_BYTES:(k + 1) * INSN_BYTES], "little"))
                        for k in range(n))
        self.next_pc += n
        self.t_next = max(self.t_next, t)
        self._dispatch(t)

    def _dispatch(self, t: int) -> None:
        queues = self.queues
        step = self.T.dispatch_cycles
        buf = self.buf
        while buf:
            d = self.t_next
            pc, word = buf[0]
            insn, code, msg = self.decoder.decode(word)
            if code:
                self.stopped = True
                buf.clear()
                self.sim.at(d, self.fault, code, pc, "fetch", msg)
                return
            q = queues[QUEUE_OF_OPCODE[insn.MNEMONIC]]
            free_at = q.room_from(d)
            if free_at is None:  # full until the unit's next pop
                self.stalled_on = q.name
                self.stuck_since = d
                return
            if free_at > d:      # full in d, room from free_at (a pop already seen)
                self.t_next = d = free_at
            self.stalled_on = self.stuck_since = None
            buf.popleft()
            q.push(d, pc, insn)
            self.t_next = d + step
            if insn.MNEMONIC == "BARRIER":
                self.held = True
                self.stuck_since = d + 1  # F_BAR from the cycle after the dispatch
                return
        if self.next_pc < self.count:
            self.sim.now_or_later(self.t_next, self._request)
        else:
            self.stuck_since = self.t_next  # F_DONE from the cycle after the last dispatch

    def resume(self, t: int) -> None:
        """The BARRIER FETCH holds for completed (its PUSH) in cycle ``t``: go on from ``t + 1``."""
        if not self.held or self.stopped:
            return
        self.held = False
        self.stuck_since = None
        self.t_next = max(self.t_next, t + 1)
        self._dispatch(t)

    def on_pop(self, unit: str, t: int) -> None:
        """``unit`` popped its queue at ``t``: resume a dispatch stalled on it."""
        if self.held:
            return
        if self.stalled_on == unit and not self.stopped:
            self.stalled_on = None
            self.t_next = max(self.t_next, t + self.T.queue_latency_cycles)
            self._dispatch(t)

    def walk_state(self, w: StateWalk) -> None:
        """Visit FETCH's timing state: its buffer of words read, its next dispatch, its stall, the
        size of its burst under way (a stopped FETCH: not covered)."""
        if self.stopped:
            raise Unsupported
        w.val((len(self.buf), self.stalled_on, self._n, self.next_pc < self.count, self.held))
        if not self._page_free:
            w.val((self.addr + INSN_BYTES * self.next_pc) % PAGE)
        buf = [(w.pc(pc), w.word(word)) for pc, word in self.buf]
        self.t_next = w.time(self.t_next)  # type: ignore[assignment]
        self.stuck_since = w.time(self.stuck_since)
        if w.shifting:
            self.buf.clear()
            self.buf.extend(buf)  # type: ignore[arg-type]

    @property
    def stalled(self) -> bool:
        return self.stalled_on is not None
