"""An instruction queue (``hw/rtl/insn_queue.v``): FETCH pushes ``{pc, instruction}``, one unit pops.

Like the RTL's registered FIFO, a change is seen by the other side ``queue_latency_cycles``
later (``Timing.queue_latency_cycles``, 1 on the RTL): an entry pushed at ``d`` can be
popped from ``d + latency``, and the slot a pop at ``p`` frees counts as room for FETCH from
``p + latency``. FETCH may push an entry ahead of time (at a later cycle ``d``); entries
pushed ahead count as held, since a pop only ever frees room (:meth:`InsnQueue.room_from`).

The two sides are told of each other's moves through callbacks the owners set:
``on_push(visible_cycle)`` (the consumer wakes up) and ``on_pop(name, cycle)`` (FETCH
resumes a dispatch stalled on this queue).
"""

from __future__ import annotations

from collections import deque
from typing import Callable

from hw.isa import Instruction
from sim.tlm.steady_state import StateWalk
from sim.tlm.trace import Tracer


class InsnQueue:
    """One queue; ``name`` is its unit's ("load", "compute", "store")."""

    __slots__ = ("name", "depth", "latency", "tracer", "entries", "recent_pops", "on_push", "on_pop")
    # the fast-forward's view (``sim/tlm/steady_state.py``)
    STEADY_STATE = ("entries", "recent_pops")
    STEADY_FIXED = ("name", "depth", "latency", "tracer", "on_push", "on_pop")

    def __init__(self, name: str, depth: int, latency: int, tracer: Tracer | None = None):
        self.name = name
        self.depth = depth
        self.latency = latency
        self.tracer = tracer
        self.entries: deque[tuple[int, int, Instruction]] = deque()  # (cycle it can be popped, pc, insn)
        self.recent_pops: list[int] = []  # pop cycles whose freed slot FETCH may not see yet
        self.on_push: Callable[[int], None] | None = None      # consumer: an entry is visible from a cycle
        self.on_pop: Callable[[str, int], None] | None = None  # producer: this queue was popped at a cycle

    def __len__(self) -> int:
        return len(self.entries)

    def room_from(self, d: int) -> int | None:
        """The first cycle ``>= d`` in which FETCH sees room in this queue, counting only pops
        already made; None when it needs a pop that has not happened yet."""
        n = len(self.entries)
        if n >= self.depth:
            return None
        vis = sorted(p + self.latency for p in self.recent_pops if p + self.latency > d)
        r = self.depth - 1 - n          # slots that may still look taken
        if len(vis) <= r:
            return d
        return vis[len(vis) - r - 1]

    def push(self, d: int, pc: int, insn: Instruction) -> None:
        """FETCH dispatches ``insn`` at cycle ``d`` (now or later)."""
        vis = d + self.latency
        self.entries.append((vis, pc, insn))
        if self.tracer is not None:
            self.tracer.queue(self.name, vis, +1)
        if self.on_push is not None:
            self.on_push(vis)

    def head(self) -> tuple[int, int, Instruction] | None:
        """``(cycle it can be popped from, pc, insn)`` of the oldest entry, or None."""
        return self.entries[0] if self.entries else None

    def visible_empty(self, t: int) -> bool:
        """The RTL's ``q_empty`` in cycle ``t`` (for FINISH's drain check, after pops of ``t``)."""
        return not self.entries or self.entries[0][0] > t

    def pop(self, t: int) -> None:
        """The unit pops the head at cycle ``t`` (it is visible then); FETCH is told."""
        self.entries.popleft()
        lat = self.latency
        rp = self.recent_pops
        if rp and rp[0] + lat <= t:
            rp[:] = [p for p in rp if p + lat > t]
        rp.append(t)
        if self.tracer is not None:
            self.tracer.queue(self.name, t + lat, -1)
        if self.on_pop is not None:
            self.on_pop(self.name, t)

    def walk_state(self, w: StateWalk) -> None:
        """Visit the queue's timing state: its entries (visible from, pc, insn) and the pops whose
        freed slot FETCH does not see yet at the walk's cycle."""
        w.val(len(self.entries))
        entries = [(w.time(vis), w.pc(pc), w.insn(insn)) for vis, pc, insn in self.entries]
        recent = [w.time(p) for p in self.recent_pops if p + self.latency > w.t]
        if w.shifting:
            self.entries.clear()
            self.entries.extend(entries)  # type: ignore[arg-type]
            self.recent_pops[:] = recent  # type: ignore[assignment]
