"""The unit shell (``hw/rtl/unit_shell.v``): what LOAD, COMPUTE and STORE share around their
EXECUTE: the queue pop, the token handshakes, the busy/stall/insns counters.

Each unit runs IDLE -> WAIT -> EXEC -> PUSH -> IDLE as the RTL does (docs/microarch.md,
"RTL cycle costs (measured)"; the constants are in ``sim/tlm/timing.py``):

* IDLE: pops the queue head in the first cycle ``p >= idle_from`` in which it is visible
  (``queue_latency_cycles`` after its dispatch);
* WAIT from ``w = p + insn_pop_cycles``: range checks (a fault is raised at ``w``), then
  the named tokens are taken in the first cycle ``tau >= w`` in which all are visible;
  ``tau - w`` cycles are stalls;
* EXEC from ``x = tau + token_pop_cycles`` for E cycles (busy);
* PUSH from ``x + E``: the tokens are pushed in the first cycle ``u`` in which none of the
  named queues is full (``u - (x + E)`` stall cycles); the instruction completes at ``u``;
  IDLE from ``u + token_push_cycles``.

Every transition is one scheduled event (or a direct call when it happens in the current
cycle), so an instruction costs O(1) events whatever its size: a DMA instruction hands its
bursts to the port as segments, an ALU instruction is applied with numpy and its end
computed arithmetically. A state is recorded with the cycle it starts in as soon as that
is known (possibly a cycle ahead), so an error can charge the cycles each unit spends in
its state up to the halt exactly (:meth:`UnitShell.partial_counts`).

A unit (``load_unit.py``, ``compute_unit.py``, ``store_unit.py``) subclasses
:class:`UnitShell` and fills in its part: :meth:`~UnitShell.check` (WAIT's range checks),
:meth:`~UnitShell.begin` (EXECUTE, which ends by calling :meth:`~UnitShell.end_execute`),
:meth:`~UnitShell.complete` and :meth:`~UnitShell.retired`. The shell knows its queue, its
token queues, the scheduler, the timing and the tracer, and reaches the rest of the
accelerator only through the callbacks it is given (``fault``, ``on_idle``). A stopped run
(the scheduler stopped at DONE or an error: the RTL's ``halt``) does nothing more.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hw.isa_semantics import DEP_FLAGS, POP_FLAGS, PUSH_FLAGS, TOKEN_ROUTES
from sim.tlm.acc_buffer import AccBuffer, PortUse
from sim.tlm.axi_arbiter import AxiArbiter, DmaJob, Segment
from sim.tlm.dram import Dram
from sim.tlm.insn_queue import InsnQueue
from sim.tlm.region_check import RegionCheck
from sim.tlm.scheduler import Scheduler
from sim.tlm.steady_state import StateWalk, Unsupported, steady_event
from sim.tlm.timing import Timing
from sim.tlm.token_queue import TokenQueue
from sim.tlm.trace import Tracer

# fault(cycle, error code, pc, unit, message): an error raised in a cycle
Fault = Callable[[int, int, int, str, str], None]

IDLE, WAIT, EXEC, PUSH = "idle", "token_wait", "execute", "token_push"


class UnitShell:
    """The state machine around one unit's EXECUTE (subclassed by each unit).

    ``queue`` is the unit's instruction queue, ``tokens`` the four token queues by name
    (the unit uses those its flags name, ``TOKEN_ROUTES``), ``fault`` raises an error and
    ``on_idle(t)`` is told the cycle from which the unit is IDLE again.
    """

    name = "unit"
    # the fast-forward's view (``sim/tlm/steady_state.py``): what walk_state covers, what is fixed in a run
    STEADY_STATE = ("state", "pc", "insn", "idle_from", "t_pop", "t_wait", "t_exec", "t_push", "t_end", "faulted",
                    "_wake_at", "dma")
    STEADY_FIXED = ("sim", "T", "tr", "queue", "fault", "on_idle", "busy", "stall", "insns", "_pop_qs", "_push_qs",
                    "_routes", "data_log")
    COUNTERS = ("busy", "stall", "insns")

    def __init__(self, sim: Scheduler, timing: Timing, tracer: Tracer | None, queue: InsnQueue,
                 tokens: dict[str, TokenQueue], fault: Fault, on_idle: Callable[[int], None]):
        self.sim = sim
        self.T = timing
        self.tr = tracer
        self.queue = queue
        queue.on_push = self._queued
        self.fault = fault
        self.on_idle = on_idle
        self.state = IDLE
        self.pc: int | None = None
        self.insn: Any = None
        self.busy = self.stall = self.insns = 0
        self.idle_from = 0
        self.t_pop = self.t_wait = self.t_exec = self.t_push = 0
        self.t_end: int | None = None     # planned end of EXEC (the PUSH cycle), once known
        self.faulted = False              # range fault raised in WAIT (it takes no token)
        self._wake_at: int | None = None
        self._pop_qs: list[TokenQueue] = []
        self._push_qs: list[TokenQueue] = []
        self._routes = {flag: tokens[TOKEN_ROUTES[(self.name, flag)]]
                        for flag in DEP_FLAGS if (self.name, flag) in TOKEN_ROUTES}
        self.dma: DmaJob | None = None    # the DMA job of the instruction in EXECUTE (LOAD, STORE)
        # the fast-forward's record of data movements (``sim/tlm/fast_forward.py``): (unit, insn) per
        # change of a buffer or DRAM, in order; None when nobody records
        self.data_log: list[tuple[str, Any]] | None = None

    # ---- queue ----------------------------------------------------------------------------
    def _queued(self, vis: int) -> None:
        """An entry was pushed to the queue, visible from cycle ``vis``."""
        if self.state == IDLE:
            self._wake(max(vis, self.idle_from))

    def _wake(self, t: int) -> None:
        if self._wake_at is None or t < self._wake_at:
            self._wake_at = t
            self.sim.at(t, self._woken)

    @steady_event
    def _woken(self, t: int) -> bool:
        if self._wake_at == t:
            self._wake_at = None
        return self.try_pop(t)

    def try_pop(self, t: int) -> bool:
        head = self.queue.head()
        if self.state != IDLE or head is None or self.sim.stopped:
            return False
        vis, pc, insn = head
        if vis > t or self.idle_from > t:
            self._wake(max(vis, self.idle_from))
            return False
        w = t + self.T.insn_pop_cycles
        self.state, self.pc, self.insn, self.t_pop, self.t_wait = WAIT, pc, insn, t, w
        self.t_end, self.faulted = None, False
        self._pop_qs = [self._routes[f] for f in POP_FLAGS if getattr(insn, f)]
        self._push_qs = [self._routes[f] for f in PUSH_FLAGS if getattr(insn, f)]
        if self.tr is not None:
            self.tr.pc(self.name, w, pc)
        self.queue.pop(t)
        self.sim.now_or_later(w, self._ready)
        return True

    # ---- state machine ---------------------------------------------------------------------
    @steady_event
    def _ready(self, t: int) -> bool:
        """First WAIT cycle: range checks, then the tokens."""
        if self.sim.stopped:
            return False
        bad = self.check(self.insn)
        if bad is not None:
            self.faulted = True
            self.fault(t, bad[0], self.pc, self.name, bad[1])
            return True
        self._try_tokens(t)
        return True

    @steady_event
    def _try_tokens(self, t: int) -> None:
        if self.sim.stopped:
            return
        for q in self._pop_qs:
            if not q.can_take(t):
                q.wait_take(t, self._try_tokens)
                return
        for q in self._pop_qs:
            q.take(t)
        self.stall += t - self.t_wait
        x = t + self.T.token_pop_cycles
        self.state, self.t_exec, self.t_end = EXEC, x, None
        if self.tr is not None:
            self.tr.busy(self.name, x, 1)
        self.sim.now_or_later(x, self._execute)

    @steady_event
    def _execute(self, t: int) -> None:
        if self.sim.stopped:
            return
        self.begin(t)

    def end_execute(self, t: int) -> None:
        """EXECUTE ends at cycle ``t`` (the first PUSH cycle; never before the minimum)."""
        t = max(t, self.t_exec + self.T.min_execute_cycles)
        self.t_end = t
        self.sim.now_or_later(t, self._exec_done)

    @steady_event
    def _exec_done(self, t: int) -> None:
        if self.sim.stopped:
            return
        self.complete(t)
        self.busy += t - self.t_exec
        if self.tr is not None:
            self.tr.busy(self.name, t, 0)
        self.state, self.t_push = PUSH, t
        self._try_push(t)

    @steady_event
    def _try_push(self, t: int) -> None:
        if self.sim.stopped:
            return
        for q in self._push_qs:
            if not q.can_push(t):
                q.wait_push(t, self._try_push)
                return
        for q in self._push_qs:
            q.push(t)
        self.stall += t - self.t_push
        self.insns += 1
        self.sim.boundary = True
        insn = self.insn
        idle = t + self.T.token_push_cycles
        if self.tr is not None:
            self.tr.pc(self.name, idle, None)
            self.tr.insn(self.name, self.pc, insn, self.t_pop, self.t_exec, self.t_push, t)
        self.state, self.pc, self.insn, self.idle_from = IDLE, None, None, idle
        if self.retired(t, insn):
            return
        self.on_idle(idle)
        head = self.queue.head()
        if head is not None:
            self._wake(max(head[0], idle))

    # ---- errors and deadlock ----------------------------------------------------------------
    def partial_counts(self, e: int, c1: int, burst: tuple[str, int, bool, int] | None) -> None:
        """Charge the cycles of the state the unit is stopped in: every cycle up to ``c1``
        (the cycle after the error ``e``, in which the RTL's units still hold their state),
        or, for the owner of the ``burst`` under way (client, end, last, beats), up to the
        burst's end, where it is still in EXECUTE, or in PUSH after its last burst."""
        st = self.state
        if st == WAIT and self.t_wait <= c1:
            lo = self.t_wait
            self.stall += max(0, min(e, c1 + 1) - lo)  # before e: tokens missing (else taken)
            self.stall += sum(1 for c in range(max(lo, e), c1 + 1) if not self._tokens_ok(c))
        elif st == EXEC and self.t_exec <= c1:
            if burst is not None and burst[0] == self.name:
                end = burst[1]
                self.busy += end - self.t_exec
                if burst[2] and self.dma is not None and self.dma.last:
                    self.stall += 0 if self._room_ok(end) else 1
                else:
                    self.busy += 1
            elif self.t_end is not None and self.t_end <= c1:
                self.busy += self.t_end - self.t_exec
                self.stall += sum(1 for c in range(self.t_end, c1 + 1) if not self._room_ok(c))
            else:
                self.busy += c1 + 1 - self.t_exec
        elif st == PUSH and self.t_push <= c1:
            lo = self.t_push
            self.stall += max(0, min(e, c1 + 1) - lo)  # before e: blocked (else pushed)
            self.stall += sum(1 for c in range(max(lo, e), c1 + 1) if not self._room_ok(c))

    def _tokens_ok(self, c: int) -> bool:
        return all(q.can_take(c) for q in self._pop_qs)

    def _room_ok(self, c: int) -> bool:
        return all(q.can_push(c) for q in self._push_qs)

    @property
    def blocked(self) -> bool:
        """Holding an instruction it cannot progress on (a token to take or room to push,
        or FINISH waiting for the drain)."""
        return self.state in (WAIT, PUSH) or (self.state == EXEC and self.exec_stuck())

    def stuck_since(self) -> int:
        """The cycle from which the unit has been in its current (stuck) state."""
        return {IDLE: self.idle_from, WAIT: self.t_wait, PUSH: self.t_push}.get(self.state, self.t_exec)

    # ---- the fast-forward's view --------------------------------------------------------------
    def walk_state(self, w: StateWalk) -> None:
        """Visit the unit's timing state (a snapshot, or an advance by whole periods when
        ``w.shifting``): its state, instruction, pc, the cycles of its state, its DMA job."""
        if self.faulted:
            raise Unsupported
        w.val(self.state)
        self.insn = w.insn(self.insn)
        self.pc = w.pc(self.pc)
        if self.state == IDLE:  # the other times of an IDLE unit are its previous instruction's
            self.idle_from = w.time(self.idle_from)  # type: ignore[assignment]
        else:
            # an active unit's cycles are never None
            self.t_pop, self.t_wait = w.time(self.t_pop), w.time(self.t_wait)  # type: ignore[assignment]
            self.t_exec, self.t_push = w.time(self.t_exec), w.time(self.t_push)  # type: ignore[assignment]
            self.t_end = w.time(self.t_end)
        self._wake_at = w.time(self._wake_at)
        self.walk_execute(w)

    def walk_execute(self, w: StateWalk) -> None:
        """Visit what the unit's EXECUTE holds (a DMA unit: its job, which has no times of its own)."""
        if self.state == EXEC:
            if self.dma is None:
                raise Unsupported
            self.dma.walk_state(w)

    def counter_values(self) -> tuple[int, ...]:
        """The unit's counters (``COUNTERS``), in order."""
        return tuple(getattr(self, n) for n in self.COUNTERS)

    def set_counter_values(self, values: tuple[int, ...]) -> None:
        """Set the counters :meth:`counter_values` returns (a fast-forward jump)."""
        for n, v in zip(self.COUNTERS, values, strict=True):
            setattr(self, n, v)

    # ---- per unit ----------------------------------------------------------------------------
    def check(self, insn: Any) -> tuple[int, str] | None:
        """Range checks before the instruction touches anything: None or (code, message)."""
        return None

    def begin(self, t: int) -> None:
        """Start EXECUTE at ``t``; must eventually call :meth:`end_execute`."""
        self.end_execute(t)

    def complete(self, t: int) -> None:
        """Side effects at the end of EXECUTE."""

    def retired(self, t: int, insn: Any) -> bool:
        """``insn`` completed (its PUSH) in cycle ``t``; True when that ends the run."""
        return False

    def exec_stuck(self) -> bool:
        """In EXECUTE, the instruction cannot progress by itself (FINISH waiting for the drain)."""
        return False


class DmaUnitShell(UnitShell):
    """The shell of a unit that moves data between DRAM and the accumulator buffer (LOAD,
    STORE): besides the shell's own wiring, the AXI port, the DRAM, the region windows and
    the buffer."""

    STEADY_FIXED = ("port", "dram", "regions", "acc")

    def __init__(self, sim: Scheduler, timing: Timing, tracer: Tracer | None, queue: InsnQueue,
                 tokens: dict[str, TokenQueue], fault: Fault, on_idle: Callable[[int], None],
                 port: AxiArbiter, dram: Dram, regions: RegionCheck, acc: AccBuffer):
        super().__init__(sim, timing, tracer, queue, tokens, fault, on_idle)
        self.port = port
        self.dram = dram
        self.regions = regions
        self.acc = acc

    def port_uses(self, kind: str, offset: np.ndarray, step: int,
                  count: np.ndarray) -> tuple[Callable[[Segment], object], Callable[[Segment], None]]:
        """The ``on_grant`` / ``on_cut`` hooks of a DMA job that takes an accumulator port
        (``kind``: LOAD's ``write``, STORE's ``read``) ``count[k]`` times in burst k, every
        ``step`` cycles from ``offset[k]`` cycles after the burst's grant."""
        ports = self.acc.ports

        def granted(seg: Segment) -> object:
            a = seg.base
            n = len(seg.dur)
            return ports.add(kind, PortUse(seg.grants() + offset[a:a + n], step, count[a:a + n]))

        def cut(seg: Segment) -> None:
            ports.withdraw(seg.mark, seg.t0 + int(seg.ends[seg.cut - 1]))

        return granted, cut

