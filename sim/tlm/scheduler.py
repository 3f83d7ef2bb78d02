"""A discrete-event scheduler: a heap of (cycle, phase, sequence) keyed callbacks.

Phases order what happens within one cycle: state changes and requests (0) first,
then the DRAM port's arbitration (1), then end-of-cycle checks such as FINISH's
drain condition (2), then the end of the run (3): error resolution (the lowest pc of
the cycle's faults) and DONE, where an error beats a FINISH completing in its cycle. Time jumps from event to event, so
the cost of a run grows with the number of transactions, never with cycles.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable

PH_STATE = 0
PH_ARB = 1
PH_CHECK = 2
PH_HALT = 3


class Scheduler:
    """The event heap and the current cycle."""

    # the fast-forward's view (``sim/tlm/steady_state.py``): the heap through pending/replace_pending,
    # the clock through advance_clock; the counters move by their delta
    STEADY_STATE = ("_heap", "now", "last_progress")
    STEADY_FIXED = ("events", "_seq", "stopped", "probe", "boundary")

    def __init__(self) -> None:
        self.now = 0
        self.events = 0  # callbacks executed (the O(instructions) measure)
        self._heap: list[tuple[int, int, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = 0
        self.stopped = False
        self.last_progress = 0  # cycle of the last event that changed state (deadlock timing)
        # the fast-forward (``sim/tlm/fast_forward.py``): ``probe(t)`` is called once every event of
        # cycle t has run, when ``boundary`` was set (an instruction retired) during it
        self.probe: Callable[[int], None] | None = None
        self.boundary = False

    def at(self, t: int, fn: Callable[..., Any], *args: Any, phase: int = PH_STATE) -> None:
        """Run ``fn(t, *args)`` at cycle ``t`` (never in the past); ``fn`` returns False when
        the event turned out stale (it changed nothing)."""
        if t < self.now:
            t = self.now
        self._seq += 1
        heapq.heappush(self._heap, (t, phase, self._seq, fn, args))

    def now_or_later(self, t: int, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn(t, *args)`` at once when ``t`` is the current cycle, else schedule it."""
        if t <= self.now:
            fn(self.now, *args)
        else:
            self.at(t, fn, *args)

    def run(self) -> None:
        """Process events until the heap is empty or :meth:`stop` is called."""
        heap = self._heap
        pop = heapq.heappop
        while heap and not self.stopped:
            t, _ph, _s, fn, args = pop(heap)
            self.now = t
            self.events += 1
            if fn(t, *args) is not False:  # a stale event returns False: no progress
                self.last_progress = t
            if self.boundary and (not heap or heap[0][0] > t):
                self.boundary = False
                if self.probe is not None and not self.stopped:
                    self.probe(t)

    def pending(self) -> list[tuple[int, int, int, Callable[..., Any], tuple[Any, ...]]]:
        """The pending events ``(cycle, phase, sequence, fn, args)`` in the order they will run."""
        return sorted(self._heap, key=lambda e: (e[0], e[1], e[2]))

    def replace_pending(self, events: list[tuple[int, int, int, Callable[..., Any], tuple[Any, ...]]]) -> None:
        """Make ``events`` (sorted as :meth:`pending` returns them) the pending events, in place
        (the run loop holds the heap list; a sorted list is a valid heap)."""
        self._heap[:] = events

    def advance_clock(self, dt: int) -> None:
        """Move the current cycle and the last progress on by ``dt`` cycles (a fast-forward jump)."""
        self.now += dt
        self.last_progress += dt

    def stop(self) -> None:
        self.stopped = True
        self._heap.clear()

    @property
    def idle(self) -> bool:
        return not self._heap
