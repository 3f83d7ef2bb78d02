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

from typing import Callable

import numpy as np

from hw import csr


class PortUse:
    """Cycles ``first[k] + m*step`` for ``m < count[k]``, for every k: one port taken by a
    unit (one entry per burst, or one for a padding run)."""

    __slots__ = ("first", "step", "count", "last")

    def __init__(self, first: np.ndarray, step: int, count: np.ndarray):
        keep = count > 0
        self.first = first[keep].astype(np.int64)
        self.count = count[keep].astype(np.int64)
        self.step = step
        self.last = int((self.first + (self.count - 1) * step).max()) if len(self.first) else -1

    def keep_before(self, t: int) -> None:
        """Drop the entries starting at or after cycle ``t`` (bursts that will not happen then)."""
        keep = self.first < t
        self.first, self.count = self.first[keep], self.count[keep]
        self.last = int((self.first + (self.count - 1) * self.step).max()) if len(self.first) else -1

    def within(self, lo: int, hi: int) -> np.ndarray:
        """Per entry, how many of its cycles lie in ``[lo, hi]``."""
        s = self.step
        k_lo = np.maximum(0, -((self.first - lo) // s))          # ceil((lo - first) / s), >= 0
        k_hi = np.minimum(self.count - 1, (hi - self.first) // s)
        return np.maximum(0, k_hi - k_lo + 1)


class AccPorts:
    """Who holds the buffer's shared ports when: LOAD's writes (data and padding) take the
    write port, STORE's reads take copy S's read port. ``on_change(t)`` is told when a use
    is added or withdrawn whose cycles start at ``t`` or later."""

    def __init__(self) -> None:
        self.writes: list[PortUse] = []   # LOAD's data vectors (never overlap STORE's reads)
        self.pads: list[PortUse] = []     # LOAD's padding runs (step 1; may overlap STORE's reads)
        self.reads: list[PortUse] = []    # STORE's vector reads
        self.on_change: Callable[[int], None] | None = None

    def add(self, kind: str, use: PortUse) -> PortUse:
        """Register a use of kind ``write``, ``pad`` or ``read``."""
        if use.last >= 0:
            {"write": self.writes, "pad": self.pads, "read": self.reads}[kind].append(use)
            if self.on_change is not None:
                self.on_change(int(use.first.min()))
        return use

    def withdraw(self, use: PortUse, t: int) -> None:
        """The entries of ``use`` from cycle ``t`` on will not happen (a cut burst segment)."""
        before = use.last
        use.keep_before(t)
        if use.last != before and self.on_change is not None:
            self.on_change(t)

    def forget_before(self, t: int) -> None:
        """Uses that end before cycle ``t`` can matter no more."""
        self.writes = [u for u in self.writes if u.last >= t]
        self.pads = [u for u in self.pads if u.last >= t]
        self.reads = [u for u in self.reads if u.last >= t]

    def blocked(self, lo: int, hi: int, use_src: bool) -> int:
        """Cycles in ``[lo, hi]`` in which the ALU cannot advance: the write port is LOAD's,
        or (``use_src``) copy S's read port is STORE's; a cycle with both counts once."""
        n = sum(int(u.within(lo, hi).sum()) for u in self.writes + self.pads if u.last >= lo)
        if use_src:
            reads = [u for u in self.reads if u.last >= lo]
            n += sum(int(u.within(lo, hi).sum()) for u in reads)
            for p in self.pads:  # a padding cycle that is also a read cycle was counted twice
                if p.last < lo:
                    continue
                for a, c in zip(p.first.tolist(), p.count.tolist()):
                    a0, a1 = max(a, lo), min(a + c - 1, hi)
                    if a0 <= a1:
                        n -= sum(int(u.within(a0, a1).sum()) for u in reads)
        return n

    def nth_free(self, lo: int, k: int, use_src: bool) -> int:
        """The cycle ``e >= lo`` in which the ALU gets its ``k``-th free cycle counted from ``lo``
        (``k >= 1``) with the uses known now."""
        e = lo + k - 1
        b = self.blocked(lo, e, use_src)
        if b == 0:
            return e
        # free(lo..e) = e - lo + 1 - blocked(lo, e) is non-decreasing in e: binary search
        # between lo + k - 1 and lo + k - 1 + (every registered cycle after lo)
        hi = e + self.blocked(lo, max(self._horizon(), e), use_src)
        lo_e = e + b  # free(lo..e) <= k - b, so at least b more cycles
        while lo_e < hi:
            mid = (lo_e + hi) // 2
            if mid - lo + 1 - self.blocked(lo, mid, use_src) >= k:
                hi = mid
            else:
                lo_e = mid + 1
        return hi

    def _horizon(self) -> int:
        return max((u.last for u in self.writes + self.pads + self.reads), default=-1)


class AccBuffer:
    """The buffer's contents, ``mem`` (``(depth, lanes)`` int32, written in place by the units),
    and its ports (:class:`AccPorts`)."""

    def __init__(self, depth: int, lanes: int):
        self.mem = np.zeros((depth, lanes), dtype=np.int32)
        self.ports = AccPorts()

    def new_run(self) -> None:
        """A run starts (START): the contents stay, no port use is known."""
        self.ports = AccPorts()

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
