"""The four dependency-token queues (VTA semantics): counters from 0 to TOKEN_QUEUE_DEPTH.

``l2c``: load push_next -> compute pop_prev; ``c2l``: compute push_prev -> load pop_next;
``c2s``: compute push_next -> store pop_prev; ``s2c``: store push_prev -> compute pop_next.
A unit waiting to pop is woken by a push; a unit blocked pushing into a full queue is
woken by a pop. Both happen at the cycle of the other side's action.
"""

from __future__ import annotations

from typing import Callable

# (unit, flag) -> token queue name
TOKEN_ROUTES: dict[tuple[str, str], str] = {
    ("load", "push_next"): "l2c", ("compute", "pop_prev"): "l2c",
    ("compute", "push_prev"): "c2l", ("load", "pop_next"): "c2l",
    ("compute", "push_next"): "c2s", ("store", "pop_prev"): "c2s",
    ("store", "push_prev"): "s2c", ("compute", "pop_next"): "s2c",
}
TOKEN_QUEUES = ("l2c", "c2l", "c2s", "s2c")


class TokenQueue:
    """One counter with a waiting consumer and a waiting producer."""

    __slots__ = ("name", "depth", "count", "waiting_pop", "waiting_push")

    def __init__(self, name: str, depth: int):
        self.name = name
        self.depth = depth
        self.count = 0
        self.waiting_pop: Callable[[int], None] | None = None   # consumer's retry
        self.waiting_push: Callable[[int], None] | None = None  # producer's retry

    def push(self, t: int) -> None:
        self.count += 1
        w = self.waiting_pop
        if w is not None:
            self.waiting_pop = None
            w(t)

    def take(self, t: int) -> None:
        self.count -= 1
        w = self.waiting_push
        if w is not None:
            self.waiting_push = None
            w(t)

    @property
    def full(self) -> bool:
        return self.count >= self.depth
