"""The accumulator buffer (``hw/rtl/acc_buffer.v``): ACC_DEPTH vectors of LANES int32 lanes,
and its port plan.

LOAD and COMPUTE write it, COMPUTE and STORE read it; it keeps its contents across runs
(START clears the units, not the SRAM). Every index an instruction touches is checked
against the depth before the instruction moves anything (:meth:`AccBuffer.range_error`).

The RTL builds it from two synchronous SRAM copies with one write port (shared) and one
read port each (docs/microarch.md "The accumulator buffer's ports"): LOAD owns the write
port in every cycle in which it writes a vector, STORE owns copy S's read port in every
cycle in which it reads one, and the ALU's pipeline advances only in the cycles in which
the ports it needs are free. The TLM keeps those cycles as arithmetic progressions
(:class:`PortUse`, one per burst or padding run, registered when the burst is granted or
the padding starts) and finds the ALU's end arithmetically (:meth:`AccPorts.nth_free`), so
the cost stays per transaction, never per cycle.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from typing import Callable

import numpy as np

from hw import csr
from sim.tlm.steady_state import StateWalk

_FEW = 32  # entries up to which plain ints beat numpy in a use's bounds


class PortUse:
    """Cycles ``first[k] + m*step`` for ``m < count[k]``, for every k: one port taken by a
    unit (one entry per burst, or one for a padding run)."""

    __slots__ = ("first", "step", "count", "start", "last", "_lists")
    # the fast-forward's view (``sim/tlm/steady_state.py``): start, last and the lists follow from the rest
    STEADY_STATE = ("first", "step", "count")
    STEADY_FIXED = ("start", "last", "_lists")

    def __init__(self, first: np.ndarray, step: int, count: np.ndarray):
        first = first.astype(np.int64, copy=False)
        count = count.astype(np.int64, copy=False)
        if not count.all():  # the common case, every burst taking the port, skips the masks
            keep = count > 0
            first, count = first[keep], count[keep]
        self.first = first  # never written in place (a cut or a jump makes new arrays)
        self.count = count
        self.step = step
        self._bounds()

    def _bounds(self) -> None:
        self._lists: tuple[list[int], list[int]] | None = None
        n = len(self.first)
        if n > _FEW:
            self.start = int(self.first.min())
            self.last = int((self.first + (self.count - 1) * self.step).max())
            return
        # plain ints: for a few entries numpy's reductions cost more than a loop
        first, count, step = self.first.tolist(), self.count.tolist(), self.step
        self._lists = (first, count)
        self.start = min(first) if n else -1
        self.last = max([f + (c - 1) * step for f, c in zip(first, count)]) if n else -1

    def lists(self) -> tuple[list[int], list[int]]:
        """``(first, count)`` as lists of ints (made once per change of the use)."""
        if self._lists is None:
            self._lists = (self.first.tolist(), self.count.tolist())
        return self._lists

    def walk_state(self, w: StateWalk) -> None:
        """Visit the use's cycles (its shape, its first cycles)."""
        w.val((self.step, tuple(self.count.tolist())))
        firsts = [w.time(x) for x in self.lists()[0]]
        if w.shifting:
            self.first = np.array(firsts, dtype=np.int64)
            self._bounds()

    def keep_before(self, t: int) -> None:
        """Drop the entries starting at or after cycle ``t`` (bursts that will not happen then)."""
        keep = self.first < t
        self.first, self.count = self.first[keep], self.count[keep]
        self._bounds()


class Timeline:
    """The port uses of one kind (LOAD's data writes, LOAD's padding, STORE's reads): the
    units register them in time order and they never overlap one another, so the cycles up
    to ``x`` are counted with one binary search (:meth:`upto`), whatever their number."""

    STEADY_STATE = ("uses",)
    STEADY_FIXED = ("_arrays", "_lists")  # caches of the uses

    def __init__(self) -> None:
        self.uses: list[PortUse] = []
        self._arrays: tuple[np.ndarray, ...] | None = None
        self._lists: tuple[list[int], list[int], list[int], int] | None = None

    def add(self, use: PortUse) -> None:
        self.uses.append(use)
        self.changed()

    def changed(self) -> None:
        self._arrays = None
        self._lists = None

    def forget_before(self, t: int) -> None:
        keep = [u for u in self.uses if u.last >= t]
        if len(keep) != len(self.uses):
            self.uses = keep
            self.changed()

    def walk_state(self, w: StateWalk, horizon: int) -> None:
        """Visit the uses that can still matter from cycle ``horizon`` on (the others are dropped
        when the walk shifts)."""
        live = [u for u in self.uses if u.last >= horizon]
        w.val(len(live))
        for u in live:
            u.walk_state(w)
        if w.shifting:
            self.uses = live
            self.changed()

    def arrays(self) -> tuple[np.ndarray, ...]:
        """``(first, count, last, before, step)`` of every entry in time order; ``before[k]`` =
        the cycles of the entries before k; the step is one per kind (a unit's beats per
        vector, 1 for padding)."""
        if self._arrays is None:
            live = [u for u in self.uses if len(u.first)]
            if live:
                first = np.concatenate([u.first for u in live])
                count = np.concatenate([u.count for u in live])
                step = live[0].step
            else:
                first = count = np.zeros(0, dtype=np.int64)
                step = 1
            last = first + (count - 1) * step
            before = np.concatenate(([0], np.cumsum(count)[:-1])).astype(np.int64) if len(count) else count
            self._arrays = (first, count, last, before, np.int64(step))
        return self._arrays

    def upto(self, x: np.ndarray | int) -> np.ndarray:
        """How many of the kind's cycles are ``<= x`` (elementwise)."""
        first, count, _last, before, step = self.arrays()
        x = np.asarray(x, dtype=np.int64)
        if not len(first):
            return np.zeros_like(x)
        k = np.searchsorted(first, x, side="right") - 1
        kk = np.maximum(k, 0)
        n = before[kk] + np.minimum(count[kk], (x - first[kk]) // step + 1)
        return np.where(k >= 0, n, 0)

    def cycles(self, lo: int, hi: int) -> np.ndarray:
        """The kind's cycles in ``[lo, hi]``, in order."""
        first, _count, last, _before, step = self.arrays()
        inside = (last >= lo) & (first <= hi)
        runs = [np.arange(f, e + 1, step) for f, e in zip(first[inside], last[inside])]
        c = np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64)
        return c[(c >= lo) & (c <= hi)]

    def upto_one(self, x: int) -> int:
        """:meth:`upto` of one cycle, in plain ints (the ALU's port checks ask for one or two
        cycles at a time, far below numpy's cost per call)."""
        lists = self._lists
        if lists is None:
            # from the uses' own lists: concatenating numpy arrays first costs more than this
            first_l: list[int] = []
            count_l: list[int] = []
            step = 1
            for u in self.uses:
                f, c = u.lists()
                if f:
                    if not first_l:
                        step = u.step
                    first_l += f
                    count_l += c
            before_l = [0, *accumulate(count_l)]
            lists = self._lists = (first_l, count_l, before_l, step)
        first_l, count_l, before_l, step_i = lists
        k = bisect_right(first_l, x) - 1
        if k < 0:
            return 0
        return before_l[k] + min(count_l[k], (x - first_l[k]) // step_i + 1)

    def overlaps(self, lo: int, hi: int) -> bool:
        """Some use of the kind may fall in ``[lo, hi]`` (a cheap test before counting)."""
        for u in reversed(self.uses):  # a plain loop: a generator costs more than the few uses
            if u.last >= lo and u.start <= hi:
                return True
        return False

    def count(self, lo: int, hi: int) -> int:
        """The kind's cycles in ``[lo, hi]``."""
        if hi < lo or not self.overlaps(lo, hi):
            return 0
        return self.upto_one(hi) - self.upto_one(lo - 1)


class AccPorts:
    """Who holds the buffer's shared ports when: LOAD's writes (data and padding) take the
    write port, STORE's reads take copy S's read port. ``on_change(t)`` is told when a use
    is added or withdrawn whose cycles start at ``t`` or later."""

    STEADY_STATE = ("writes", "pads", "reads")
    STEADY_FIXED = ("on_change", "writes_meet_reads")

    def __init__(self, writes_meet_reads: bool = False) -> None:
        # with write bursts in flight LOAD's data writes may fall in a cycle of STORE's reads
        self.writes_meet_reads = writes_meet_reads
        self.writes = Timeline()  # LOAD's data vectors (with one write at a time never on STORE's reads)
        self.pads = Timeline()    # LOAD's padding runs (step 1; may fall on STORE's reads)
        self.reads = Timeline()   # STORE's vector reads
        self.on_change: Callable[[int], None] | None = None

    def add(self, kind: str, use: PortUse) -> tuple[Timeline, PortUse]:
        """Register a use of kind ``write``, ``pad`` or ``read``; the handle withdraws it."""
        tl = {"write": self.writes, "pad": self.pads, "read": self.reads}[kind]
        if use.last >= 0:
            tl.add(use)
            if self.on_change is not None:
                self.on_change(use.start)
        return tl, use

    def withdraw(self, handle: tuple[Timeline, PortUse], t: int) -> None:
        """The entries of a use (``add``'s handle) from cycle ``t`` on will not happen (a cut
        burst segment)."""
        tl, use = handle
        if use.last < t:
            return
        use.keep_before(t)
        tl.changed()
        if self.on_change is not None:
            self.on_change(t)

    def walk_state(self, w: StateWalk, horizon: int) -> None:
        """Visit the port uses a present or future ALU can still meet (those from ``horizon`` on)."""
        for tl in (self.writes, self.pads, self.reads):
            tl.walk_state(w, horizon)

    def forget_before(self, t: int) -> None:
        """Uses that end before cycle ``t`` can matter no more."""
        for tl in (self.writes, self.pads, self.reads):
            tl.forget_before(t)

    def blocked(self, lo: int, hi: int, use_src: bool) -> int:
        """Cycles in ``[lo, hi]`` in which the ALU cannot advance: the write port is LOAD's,
        or (``use_src``) copy S's read port is STORE's; a cycle with both counts once."""
        if hi < lo:
            return 0
        n = self.writes.count(lo, hi) + self.pads.count(lo, hi)
        if use_src and self.reads.overlaps(lo, hi):
            n += self.reads.count(lo, hi)
            if self.writes_meet_reads and self.writes.overlaps(lo, hi):
                # a data write's cycle that is also a read cycle was counted twice
                n -= int(np.intersect1d(self.writes.cycles(lo, hi), self.reads.cycles(lo, hi)).size)
            if not self.pads.overlaps(lo, hi):
                return n
            # a padding cycle that is also a read cycle was counted twice
            n -= self.pad_reads(lo, hi)
        return n

    def pad_reads(self, lo: int, hi: int) -> int:
        """Cycles in ``[lo, hi]`` with both a padding write and a STORE read: the reads inside each padding
        run of the window."""
        first, _count, last, _before, _step = self.pads.arrays()
        inside = (last >= lo) & (first <= hi)
        if not inside.any():
            return 0
        a = np.maximum(first[inside], lo)
        b = np.minimum(last[inside], hi)
        return int((self.reads.upto(b) - self.reads.upto(a - 1)).sum())

    def holders(self, lo: int, hi: int) -> dict[str, int]:
        """Who held the shared ports in ``[lo, hi]``, read-only (an observation for coverage, never
        used by the timing): cycles of LOAD's data writes (``load_data``), LOAD's padding writes
        (``load_pad``), STORE's reads (``store_read``) and padding writes in a cycle of a STORE read
        (``pad_and_read``, also counted in the two before)."""
        out = {"load_data": self.writes.count(lo, hi), "load_pad": self.pads.count(lo, hi),
               "store_read": self.reads.count(lo, hi), "pad_and_read": 0}
        if out["load_pad"] and out["store_read"]:
            out["pad_and_read"] = self.pad_reads(lo, hi)
        return out

    def nth_free(self, lo: int, k: int, use_src: bool) -> int:
        """The cycle ``e >= lo`` in which the ALU gets its ``k``-th free cycle counted from ``lo``
        (``k >= 1``) with the uses known now."""
        base = lo + k - 1
        # e = base + blocked(lo, e) has its smallest solution as the answer; iterating it from
        # below never overshoots and settles in a step or two when the ports are seldom taken
        e = step = base
        for _ in range(5):
            nxt = base + self.blocked(lo, e, use_src)
            if nxt == e:
                return e
            e, step = nxt, nxt - e
        # dense uses: free(lo..x) = x - lo + 1 - blocked(lo, x) is non-decreasing in x (and grows
        # by one a cycle past the last use), so gallop from e (a lower bound) in steps doubling
        # from the iteration's last one until enough cycles are free, then binary search between
        lo_e, hi = e, e + step
        while hi - self.blocked(lo, hi, use_src) < base:
            lo_e, step = hi + 1, 2 * step
            hi = e + step
        while lo_e < hi:
            mid = (lo_e + hi) // 2
            if mid - self.blocked(lo, mid, use_src) >= base:
                hi = mid
            else:
                lo_e = mid + 1
        return hi


class AccBuffer:
    """The buffer's contents, ``mem`` (``(depth, lanes)`` int32, written in place by the units),
    and its ports (:class:`AccPorts`)."""

    def __init__(self, depth: int, lanes: int, writes_meet_reads: bool = False):
        self.mem = np.zeros((depth, lanes), dtype=np.int32)
        self.writes_meet_reads = writes_meet_reads  # write bursts in flight (the port rule of AccPorts)
        self.ports = AccPorts(writes_meet_reads)

    def new_run(self) -> None:
        """A run starts (START): the contents stay, no port use is known."""
        self.ports = AccPorts(self.writes_meet_reads)

    @property
    def depth(self) -> int:
        return self.mem.shape[0]

    @property
    def lanes(self) -> int:
        return self.mem.shape[1]

    def range_error(self, last: int, what: str) -> tuple[int, str] | None:
        """``(ERR_SRAM_RANGE, message)`` when index ``last`` is past the depth, else None."""
        if last >= self.depth:
            return csr.ERR_SRAM_RANGE, f"{what} reaches accumulator index {last}, past its depth {self.depth}"
        return None
