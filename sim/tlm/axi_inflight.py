"""The AXI arbiter with several read bursts in flight (``hw/rtl/axi_arbiter.v`` with
``dram_reads_in_flight`` = RIF > 1) or several write bursts in flight (``dram_writes_in_flight`` =
WIF > 1), burst by burst.

Each cycle in which a client requests, the arbiter picks one requester as with one burst at a
time (the core round robin after the core granted last, inside it FETCH > LOAD > STORE) and
grants it in that cycle when the port can take its burst, else nobody:

* a read when no write is under way and fewer than RIF reads are in flight (a read is in flight
  from its grant to its last R beat; its client sees it done, and may ask again, the cycle after);
* a write when nothing is in flight at all (a write holds the port as with one burst at a time).

With WIF > 1 the read and write sides are independent: a read needs fewer than RIF reads in flight
(whatever the writes do); a write needs the W channel free (no write granted at ``g`` is still in
its W beats: it is free again at ``g + 1 + n``) and fewer than WIF writes in flight (a write is in
flight from its grant to its B at ``g + n + Lw``). The STORE posts its bursts: it asks for its next
burst at ``g + 1 + n``, without waiting for the B, and its segment is done at the cycle after the B
of its last burst (the DRAM answers B in AW order, and every B of a core's bursts comes in order).

A read granted at ``g`` has its AR at ``g+1`` (the fast DRAM model is always ready) and its
``n`` beats back to back from ``max(g + 1 + Lr, the previous read's last beat + 1)``: the DRAM
answers reads in AR order and beats of different bursts never overlap. A client's segment of
bursts is granted one burst at a time; after each the client asks again for the rest.

This model covers the timing of the fast DRAM model; the fast-forward is not used with it (its
state is not walked), so a run goes event by event. Its interface is the one-at-a-time
arbiter's (:class:`sim.tlm.axi_arbiter.AxiArbiter`) as the top and the units use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from sim.tlm.axi_arbiter import PRIORITY, Segment
from sim.tlm.scheduler import PH_ARB, Scheduler
from sim.tlm.steady_state import StateWalk, Unsupported
from sim.tlm.timing import Timing
from sim.tlm.trace import Tracer


@dataclass
class _Burst:
    """A burst granted and not yet ended: its segment (the client's), its index there, times."""

    seg: Segment
    k: int        # index of the burst in ``seg``
    g: int        # grant cycle
    end: int      # the cycle after its last R beat (read) or B (write): the client sees it done
    beats: int
    w_end: int = 0  # a posted write: the cycle after its last W beat (the W channel is free again)


class AxiArbiterInFlight:
    """The port with up to ``reads`` read bursts in flight (``cores`` cores, clients keyed ``(core, client)``)."""

    def __init__(self, sim: Scheduler, timing: Timing, reads: int, tracer: Tracer | None = None, cores: int = 1,
                 writes: int = 1):
        self.sim = sim
        self.writes = writes             # write bursts in flight at most (WIF)
        self.wr_overhead = timing.wr_burst_overhead
        self.w_next = 0                  # WIF > 1: the first cycle the W channel is free
        self.tracer = tracer
        self.cores = cores
        self.reads = reads
        self.read_latency = timing.read_latency
        self.rd_overhead = timing.rd_burst_overhead
        self.pending: dict[tuple[int, str], Segment] = {}
        self.out: list[_Burst] = []      # bursts granted and not ended, in grant order
        self.r_next = 0                  # the first cycle the R channel is free (after the last read's beats)
        self.last = cores - 1            # the core granted last
        self._arb_at: set[int] = set()
        self.on_free: Callable[[int], None] | None = None
        self.core_beats: list[dict[str, int]] = [{"fetch": 0, "load": 0, "store": 0} for _ in range(cores)]
        self.free_since = 0
        self.cur = None                  # no single owner: the one-at-a-time arbiter's field, always None here
        self.max_reads_seen = 0          # the most reads in flight at once in this run
        self.max_writes_seen = 0         # the most writes in flight at once (granted, B not yet)
        self.reads_beside_writes = 0     # reads granted while a write was in flight

    @property
    def beats(self) -> dict[str, int]:
        """Core 0's beats per client."""
        return self.core_beats[0]

    @property
    def busy(self) -> bool:
        """A burst is in flight."""
        return bool(self.out)

    def core_busy(self, core: int) -> bool:
        """A burst of ``core`` is in flight, or ``core`` waits for the port (FINISH's drain)."""
        return any(b.seg.core == core for b in self.out) or any(k[0] == core for k in self.pending)

    def request(self, t: int, seg: Segment) -> None:
        """``seg.client`` of ``seg.core`` requests the port at cycle ``t`` (the current cycle)."""
        self.pending[(seg.core, seg.client)] = seg
        self._arbitrate_at(t)

    def _arbitrate_at(self, t: int) -> None:
        if t not in self._arb_at:
            self._arb_at.add(t)
            self.sim.at(t, self._arbitrate, phase=PH_ARB)

    def _arbitrate(self, t: int) -> None:
        self._arb_at.discard(t)
        if not self.pending or self.sim.stopped:
            return
        n = self.cores
        waiting = {c for c, _ in self.pending}
        core = next((self.last + i) % n for i in range(1, n + 1) if (self.last + i) % n in waiting)
        client = min((c for k, c in self.pending if k == core), key=PRIORITY.__getitem__)
        seg = self.pending[(core, client)]
        live = [b for b in self.out if b.end > t]
        n_wr = sum(1 for b in live if b.seg.write)
        if self.writes > 1:  # the read and write sides are independent
            ok = (self.w_next <= t and n_wr < self.writes) if seg.write else len(live) - n_wr < self.reads
        elif seg.write:
            ok = not live
        else:
            ok = not n_wr and len(live) < self.reads
        if not ok:
            return  # retried when a burst ends (the next request retries too)
        del self.pending[(core, client)]
        self.last = core
        n_beats = int(seg.beats[0])
        w_end = 0
        if seg.write:
            end = t + int(seg.dur[0])
            shift = 0
            if self.writes > 1:  # posted: the W channel (and the STORE) are free after the last W beat
                w_end = self.w_next = t + self.wr_overhead + n_beats
        else:
            first = max(t + self.rd_overhead + self.read_latency, self.r_next)
            self.r_next = first + n_beats
            end = self.r_next
            shift = first - (t + self.rd_overhead + self.read_latency)  # the R channel's delay
        b = _Burst(seg, 0, t, end, n_beats, w_end)
        self.out.append(b)
        self.max_reads_seen = max(self.max_reads_seen, sum(1 for x in self.out if not x.seg.write))
        self.max_writes_seen = max(self.max_writes_seen, n_wr + seg.write)
        self.reads_beside_writes += not seg.write and n_wr > 0
        self.core_beats[seg.core][seg.client] += n_beats
        if seg.on_grant is not None:
            # the hook places the unit's accumulator-port cycles from the grant: a delayed read's
            # beats come ``shift`` cycles later, as if it were granted then
            view = Segment(seg.client, seg.write, seg.beats[:1], seg.dur[:1], seg.on_done, seg.base,
                           seg.on_grant, seg.on_cut, seg.core)
            view.t0 = t + shift
            view.ends = np.array([end - t - shift], dtype=np.int64)
            view.cut = 1
            view.mark = seg.on_grant(view)
        if self.tracer is not None:
            name = seg.client if self.cores == 1 else f"core{seg.core}.{seg.client}"
            self.tracer.dma(name, seg.write, t, np.array([end - t]), np.array([n_beats]))
        self.sim.at(end, self._end, b)
        if w_end:  # the W channel is free again then: a write waiting for it may be granted
            self.sim.at(w_end, self._w_end, b)
        if self.pending:
            self._arbitrate_at(t + 1)  # one grant per cycle

    def _rest(self, seg: Segment) -> None:
        """The client asks again for the rest of its segment."""
        self.pending[(seg.core, seg.client)] = Segment(seg.client, seg.write, seg.beats[1:], seg.dur[1:],
                                                       seg.on_done, seg.base + 1, seg.on_grant, seg.on_cut,
                                                       seg.core)

    def _w_end(self, t: int, b: _Burst) -> None:
        """A posted write's last W beat was at ``t - 1``: its STORE asks for its next burst (if it has
        one), and the W channel is free for any waiting write."""
        if len(b.seg.dur) > 1:
            self._rest(b.seg)
        if self.pending:
            self._arbitrate_at(t)

    def _end(self, t: int, b: _Burst) -> None:
        self.out.remove(b)
        seg = b.seg
        if not self.out:
            self.free_since = t
        if b.w_end:  # a posted write: its segment's rest was asked for at its W end
            if len(seg.dur) == 1:
                seg.on_done(t)
        elif len(seg.dur) > 1:
            self._rest(seg)
        else:
            seg.on_done(t)
        if self.pending:
            self._arbitrate_at(t)
        if self.on_free is not None:
            self.on_free(t)

    def walk_state(self, w: StateWalk) -> None:
        """Not walked: the fast-forward does not cover bursts in flight."""
        raise Unsupported("bursts in flight")

    @property
    def event_version(self) -> int:
        """No superseded events here (kept for the fast-forward's interface)."""
        return 0

    def advance_event_version(self, n: int) -> None:
        """Nothing to move (the fast-forward does not run with bursts in flight)."""
        raise Unsupported("bursts in flight")

    def inflight_bursts(self, t: int) -> dict[tuple[int, str], tuple[str, int, bool, int]]:
        """The bursts under way in cycle ``t`` (granted at ``<= t``, ending after ``t``), by
        ``(core, client)``: ``(client, end, last, beats)`` (``last``: the segment's last burst)."""
        out = {}
        for b in self.out:
            if not b.g <= t < b.end:
                continue
            if not b.w_end:
                out[(b.seg.core, b.seg.client)] = (b.seg.client, b.end, len(b.seg.dur) == 1, b.beats)
            elif t < b.w_end:  # a posted write in its W beats: the STORE stops after them
                out[(b.seg.core, b.seg.client)] = (b.seg.client, b.w_end, False, b.beats)
            elif len(b.seg.dur) == 1 and b.end == t + 1:  # the STORE's last B is at t: it ends its EXEC
                out[(b.seg.core, b.seg.client)] = (b.seg.client, b.end, True, b.beats)
        return out

    def writes_at(self, t: int, core: int | None = None) -> int:
        """Write bursts in flight in cycle ``t`` (granted at ``<= t``, B not before ``t``), of every
        core or of ``core``."""
        return sum(1 for b in self.out if b.seg.write and b.g <= t < b.end and core in (None, b.seg.core))

    def drain_end(self, t: int) -> int:
        """The cycle after the last burst granted up to ``t`` ends (R beat or B): the port is idle then."""
        return max((b.end for b in self.out if b.g <= t), default=0)

    def beats_at_halt(self, t: int) -> list[dict[str, int]]:
        """Beats per core and client of every burst granted up to cycle ``t`` (all of them complete)."""
        out = [dict(x) for x in self.core_beats]
        for b in self.out:
            if b.g > t:
                out[b.seg.core][b.seg.client] -= b.beats
        return out
