"""The four dependency-token queues (VTA semantics): counters from 0 to TOKEN_QUEUE_DEPTH.

``l2c``: load push_next -> compute pop_prev; ``c2l``: compute push_prev -> load pop_next;
``c2s``: compute push_next -> store pop_prev; ``s2c``: store push_prev -> compute pop_next.

Like the RTL's registered counter, a change made in cycle ``t`` (a push or a take) is seen
by the other side from ``t + latency`` (``Timing.token_latency_cycles``, 1 on the RTL):
a token pushed at ``p`` is taken at ``p + 1`` at the earliest, and room freed by a take at
``t`` lets the producer push at ``t + 1``. Each queue has one consumer and one producer, so
what one side sees only ever changes in its favour until it acts itself; a blocked side
registers a retry that the other side's action schedules at the cycle it becomes visible.
"""

from __future__ import annotations

from typing import Callable

from hw.isa_semantics import TOKEN_QUEUES, TOKEN_ROUTES  # (unit, flag) -> queue; the queue names
from sim.tlm.steady_state import StateWalk

__all__ = ["TOKEN_QUEUES", "TOKEN_ROUTES", "TokenQueue"]

Retry = Callable[[int], None]
Schedule = Callable[[int, Retry], None]


class TokenQueue:
    """One counter with a waiting consumer and a waiting producer.

    ``count`` is the count after every change processed so far; :meth:`visible` is the
    count the RTL's register shows in a cycle (changes of the last ``latency`` cycles
    excluded). ``schedule(t, fn)`` runs ``fn(t)`` at cycle ``t`` (the model's scheduler).
    """

    __slots__ = ("name", "depth", "latency", "count", "recent", "waiting_pop", "waiting_push", "schedule")
    # the fast-forward's view (``sim/tlm/steady_state.py``)
    STEADY_STATE = ("count", "recent", "waiting_pop", "waiting_push")
    STEADY_FIXED = ("name", "depth", "latency", "schedule")

    def __init__(self, name: str, depth: int, latency: int = 1, schedule: Schedule | None = None):
        self.name = name
        self.depth = depth
        self.latency = latency
        self.count = 0
        self.recent: list[tuple[int, int]] = []  # (cycle, +1/-1) changes possibly not yet visible
        self.waiting_pop: Retry | None = None    # consumer's retry
        self.waiting_push: Retry | None = None   # producer's retry
        self.schedule = schedule

    def visible(self, t: int) -> int:
        """The count as seen in cycle ``t`` (changes made before ``t - latency + 1``)."""
        lat = self.latency
        return self.count - sum(d for c, d in self.recent if c + lat > t)

    def _change(self, t: int, d: int) -> None:
        """A change in cycle ``t`` (the current cycle; queries are never about earlier cycles)."""
        self.count += d
        if self.latency > 0:
            rec = self.recent
            if rec and rec[0][0] + self.latency <= t:
                rec[:] = [c for c in rec if c[0] + self.latency > t]
            rec.append((t, d))

    def push(self, t: int) -> None:
        self._change(t, +1)
        w = self.waiting_pop
        if w is not None:
            self.waiting_pop = None
            self._wake(t, w)

    def take(self, t: int) -> None:
        self._change(t, -1)
        w = self.waiting_push
        if w is not None:
            self.waiting_push = None
            self._wake(t, w)

    def _wake(self, t: int, fn: Retry) -> None:
        if self.latency == 0 or self.schedule is None:
            fn(t)
        else:
            self.schedule(t + self.latency, fn)

    # ---- the two sides' view ------------------------------------------------------------
    def can_take(self, t: int) -> bool:
        return self.visible(t) > 0

    def can_push(self, t: int) -> bool:
        return self.visible(t) < self.depth

    def wait_take(self, t: int, fn: Retry) -> None:
        """The consumer cannot take in cycle ``t``: retry when a token becomes visible."""
        if self.count > 0:  # already pushed, visible later
            self.schedule(self._visible_from(t, lambda v: v > 0), fn)
        else:
            self.waiting_pop = fn

    def wait_push(self, t: int, fn: Retry) -> None:
        """The producer cannot push in cycle ``t``: retry when room becomes visible."""
        if self.count < self.depth:  # already taken, visible later
            self.schedule(self._visible_from(t, lambda v: v < self.depth), fn)
        else:
            self.waiting_push = fn

    def _visible_from(self, t: int, ok: Callable[[int], bool]) -> int:
        """The first cycle > t in which ``ok(visible count)`` holds (given no further changes)."""
        for c in sorted({c + self.latency for c, _ in self.recent if c + self.latency > t}):
            if ok(self.visible(c)):
                return c
        return t + 1  # unreachable when count says so; be safe

    @property
    def full(self) -> bool:
        return self.count >= self.depth

    def walk_state(self, w: StateWalk) -> None:
        """Visit the queue's timing state: the count, the changes not yet visible at the walk's
        cycle, and who waits on each side."""
        live = [(c, d) for c, d in self.recent if c + self.latency > w.t]
        w.val((self.count, tuple(d for _, d in live)))
        w.callback(self.waiting_pop)
        w.callback(self.waiting_push)
        moved = [(w.time(c), d) for c, d in live]
        if w.shifting:
            self.recent[:] = moved  # type: ignore[assignment]
