"""The AXI arbiter (``hw/rtl/axi_arbiter.v``): the one AXI4 master port of every core, one burst
at a time: round robin between the cores with a request (starting after the core granted last;
core 0 first after START), inside the chosen core FETCH > LOAD > STORE.

A client hands the port a *segment*: bursts it will issue back to back (each
requested at the cycle the previous one ends). The port grants a whole segment with
ONE event at its computed end, and cuts it at a burst boundary only when a client that
would win that boundary requests meanwhile (a higher-priority client of the owner's core, or
any client of another core, since the round robin moves past the owner): the owner's
remaining bursts then go back into arbitration at that boundary, where the other client
wins. A segment granted while another core is already waiting is cut to its first burst.
A request that cannot win a boundary (a lower-priority client of the owner's core) simply
waits for the segment's end. This is exactly burst-granularity arbitration, at the cost of
one event per segment (plus one per cut).

Times: a burst is *granted* in cycle ``g`` (the RTL arbiter's IDLE cycle) and *ends* in
the cycle the port is free again (``g + Timing.read_burst_cycles(n)`` or
``write_burst_cycles(n)``); the owner sees it done in that cycle and, when it has more
bursts, requests (and is granted) in it. The beats moved are counted per client when a
burst is granted (every granted burst completes, even after an error).

A DMA instruction's bursts reach the port through a :class:`DmaJob` (its segments in
order, with the unit's own cycles between them). A job can be told when its bursts are
granted or cut and when its own cycles between segments begin (``on_grant``, ``on_cut``,
``on_gap``): LOAD and STORE use that to tell the accumulator buffer in which cycles they
hold its ports.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from sim.tlm.scheduler import PH_ARB, Scheduler
from sim.tlm.steady_state import StateWalk, steady_event
from sim.tlm.trace import Tracer

PRIORITY = {"fetch": 0, "load": 1, "store": 2}


class Segment:
    """Bursts one client issues back to back; ``on_done(t)`` is called when the last ends."""

    __slots__ = ("client", "write", "beats", "dur", "on_done", "t0", "ends", "cut", "base", "on_grant",
                 "on_cut", "mark", "core")
    # the fast-forward's view (``sim/tlm/steady_state.py``); ``mark`` is a handle into the buffer's port
    # plan, whose uses are walked there
    STEADY_STATE = ("client", "write", "beats", "dur", "on_done", "t0", "ends", "cut", "base", "on_grant",
                    "on_cut", "core")
    STEADY_FIXED = ("mark",)

    def __init__(self, client: str, write: bool, beats: np.ndarray, dur: np.ndarray,
                 on_done: Callable[[int], None], base: int = 0,
                 on_grant: Callable[["Segment"], object] | None = None,
                 on_cut: Callable[["Segment"], None] | None = None, core: int = 0):
        self.core = core          # the requesting client's core
        self.client = client
        self.write = write
        self.beats = beats        # beats of each burst
        self.dur = dur            # cycles each burst holds the port
        self.on_done = on_done
        self.t0 = 0               # grant cycle
        self.ends = dur           # cumulative end offsets from t0 (set at grant)
        self.cut = len(dur)       # bursts granted in this tenure
        self.base = base          # index of the first burst in its DMA job
        self.on_grant = on_grant  # told at the grant (returns a mark kept for on_cut)
        self.on_cut = on_cut      # told when the tenure is cut to `cut` bursts
        self.mark: object = None

    def grants(self) -> np.ndarray:
        """The grant cycle of each burst of the tenure."""
        ends = self.ends
        g = np.empty(len(ends), dtype=np.int64)
        g[:1] = 0
        g[1:] = ends[:-1]
        g += self.t0
        return g

    def walk_state(self, w: StateWalk, granted: bool) -> None:
        """Visit the segment's timing state (``granted``: it holds the port, from ``t0``); a LOAD's
        or STORE's hooks tell the accumulator's port plan, whose uses are walked there."""
        w.val((self.client, self.write, tuple(self.beats.tolist()), tuple(self.dur.tolist()), self.base,
               self.on_grant is not None, self.on_cut is not None,
               granted and (self.cut, tuple(self.ends.tolist()))))
        w.callback(self.on_done)
        if granted:
            self.t0 = w.time(self.t0)  # type: ignore[assignment]


class AxiArbiter:
    """The arbiter and the port's occupancy (``cores`` cores, clients keyed ``(core, client)``)."""

    STEADY_STATE = ("cur", "pending", "last", "_version", "_arb_at", "free_since")
    STEADY_FIXED = ("sim", "tracer", "cores", "on_free", "core_beats")

    def __init__(self, sim: Scheduler, tracer: Tracer | None = None, cores: int = 1):
        self.sim = sim
        self.tracer = tracer
        self.cores = cores
        self.cur: Segment | None = None
        self.pending: dict[tuple[int, str], Segment] = {}
        self.last = cores - 1  # the core granted last (the round robin starts after it)
        self._version = 0
        self._arb_at = -1
        self.on_free: Callable[[int], None] | None = None  # the model's hook (FINISH's drain check)
        # beats of ended tenures, per core and client
        self.core_beats: list[dict[str, int]] = [{"fetch": 0, "load": 0, "store": 0} for _ in range(cores)]
        self.free_since = 0  # cycle the port last became free (deadlock timing)

    @property
    def beats(self) -> dict[str, int]:
        """Core 0's beats per client (the one core's on a one-core config)."""
        return self.core_beats[0]

    @property
    def busy(self) -> bool:
        """A burst occupies the port (or a granted segment is under way)."""
        return self.cur is not None

    def core_busy(self, core: int) -> bool:
        """A burst of ``core`` occupies the port, or ``core`` waits for it (FINISH's drain)."""
        return (self.cur is not None and self.cur.core == core) or any(k[0] == core for k in self.pending)

    def request(self, t: int, seg: Segment) -> None:
        """``seg.client`` of ``seg.core`` requests the port at cycle ``t`` (the current cycle)."""
        self.pending[(seg.core, seg.client)] = seg
        cur = self.cur
        if cur is None:
            if self._arb_at != t:
                self._arb_at = t
                self.sim.at(t, self._arbitrate, phase=PH_ARB)
        elif seg.core != cur.core or PRIORITY[seg.client] < PRIORITY[cur.client]:
            self._cut(t)

    def _cut(self, t: int) -> None:
        """Cut the owner's segment at its first burst boundary >= t (if it has a later one)."""
        cur = self.cur
        assert cur is not None
        if cur.cut <= 1:
            return
        k = int(np.searchsorted(cur.ends, t - cur.t0, side="left"))
        if k + 1 < cur.cut:
            cur.cut = k + 1
            if cur.on_cut is not None:
                cur.on_cut(cur)
            self._version += 1
            self.sim.at(cur.t0 + int(cur.ends[k]), self._end, self._version)

    @steady_event
    def _arbitrate(self, t: int) -> bool:
        self._arb_at = -1
        if self.cur is not None or not self.pending:
            return False
        n = self.cores
        if n == 1:  # one core: the round robin has nothing to choose
            waiting = None
            core = 0
            client = min((c for _k, c in self.pending), key=PRIORITY.__getitem__) if len(self.pending) > 1 \
                else next(iter(self.pending))[1]
        else:
            waiting = {c for c, _ in self.pending}
            core = next((self.last + i) % n for i in range(1, n + 1) if (self.last + i) % n in waiting)
            client = min((c for k, c in self.pending if k == core), key=PRIORITY.__getitem__)
        seg = self.pending.pop((core, client))
        self.last = core
        seg.t0 = t
        seg.ends = np.cumsum(seg.dur)
        seg.cut = len(seg.dur)
        self.cur = seg
        if seg.on_grant is not None:
            seg.mark = seg.on_grant(seg)
        self._version += 1
        self.sim.at(t + int(seg.ends[-1]), self._end, self._version)
        if waiting is not None and len(waiting) > 1:  # another core waits: it wins the first boundary
            self._cut(t)
        return True

    @steady_event(versioned=True)
    def _end(self, t: int, version: int) -> bool:
        if version != self._version:
            return False  # superseded by a cut
        seg = self.cur
        assert seg is not None
        self.cur = None
        self.free_since = t
        n = seg.cut
        self.core_beats[seg.core][seg.client] += int(seg.beats[:n].sum())
        if self.tracer is not None:
            name = seg.client if self.cores == 1 else f"core{seg.core}.{seg.client}"
            self.tracer.dma(name, seg.write, seg.t0, seg.ends[:n], seg.beats[:n])
        if n < len(seg.dur):
            # the owner keeps requesting: its remaining bursts re-enter arbitration now
            self.pending[(seg.core, seg.client)] = Segment(seg.client, seg.write, seg.beats[n:], seg.dur[n:],
                                                           seg.on_done, seg.base + n, seg.on_grant, seg.on_cut,
                                                           seg.core)
        else:
            seg.on_done(t)
        if self.pending and self._arb_at != t:
            self._arb_at = t
            self.sim.at(t, self._arbitrate, phase=PH_ARB)
        if self.on_free is not None:
            self.on_free(t)
        return True

    def walk_state(self, w: StateWalk) -> None:
        """Visit the port's timing state: the burst under way, the requests, its arbitration (one core)."""
        w.val((self.cur is not None, tuple(sorted(self.pending)), self.last))
        if self.cur is not None:
            self.cur.walk_state(w, True)
        for client in sorted(self.pending):
            self.pending[client].walk_state(w, False)
        self._arb_at = w.time(self._arb_at)  # type: ignore[assignment]
        self.free_since = w.time(self.free_since)  # type: ignore[assignment]

    @property
    def event_version(self) -> int:
        """The tenure's version: an end event carrying an older one was superseded by a cut."""
        return self._version

    def advance_event_version(self, n: int) -> None:
        """Move the tenure's version on by ``n`` (a fast-forward jump over ``n`` grants and cuts)."""
        self._version += n

    def inflight(self, t: int) -> tuple[str, int, bool, int] | None:
        """The burst under way in cycle ``t`` (granted at ``<= t``, ending after ``t``) as
        ``(client, end, last, beats)``: ``last`` when it is the segment's last burst, ``beats``
        the beats of the current tenure granted up to ``t``. None when the port is free. Its core
        is ``self.cur.core``."""
        seg = self.cur
        if seg is None:
            return None
        k = int(np.searchsorted(seg.ends[:seg.cut], t - seg.t0, side="right"))
        if k >= seg.cut:
            return None
        return seg.client, seg.t0 + int(seg.ends[k]), k == len(seg.dur) - 1, int(seg.beats[:k + 1].sum())

    def drain_end(self, t: int) -> int:
        """The cycle after the burst under way in cycle ``t`` ends (0 when the port is free)."""
        b = self.inflight(t)
        return 0 if b is None else b[1]

    def inflight_bursts(self, t: int) -> dict[tuple[int, str], tuple[str, int, bool, int]]:
        """:meth:`inflight` keyed by ``(core, client)`` (at most one burst here)."""
        b = self.inflight(t)
        return {} if b is None or self.cur is None else {(self.cur.core, b[0]): b}

    def beats_at_halt(self, t: int) -> list[dict[str, int]]:
        """Beats per core and client of every burst granted up to cycle ``t`` (all of them complete)."""
        out = [dict(b) for b in self.core_beats]
        b = self.inflight(t)
        if b is not None:
            out[self.cur.core][b[0]] += b[3]  # type: ignore[union-attr]
        elif self.cur is not None:  # a tenure whose bursts all ended by t (its end event is later)
            seg = self.cur
            out[seg.core][seg.client] += int(seg.beats[:seg.cut].sum())
        return out


class CorePort:
    """One core's view of the shared arbiter: its FETCH, LOAD and STORE request through it."""

    def __init__(self, arbiter: AxiArbiter, core: int):
        self.arbiter = arbiter
        self.core = core

    def request(self, t: int, seg: Segment) -> None:
        seg.core = self.core
        self.arbiter.request(t, seg)


class DmaJob:
    """The bursts of one DMA instruction, handed to the port segment by segment.

    Segment ``k`` (bursts ``beats[a:b]`` for ``bounds[k] = (a, b)``) is requested
    ``gaps[k]`` cycles after the previous one ended (after :meth:`start` for the first);
    ``on_end(t + trail)`` is called when the last has ended at ``t``. A stopped run
    requests nothing more. ``on_gap(t, n)`` (optional) is told that the unit's own ``n``
    cycles from ``t`` (a gap or the trail) begin; ``on_grant`` / ``on_cut`` are given to
    every segment (:class:`Segment`).
    """

    __slots__ = ("sim", "port", "client", "write", "beats", "dur", "bounds", "gaps", "trail", "on_end", "k",
                 "last", "on_gap", "on_grant", "on_cut")
    STEADY_STATE = ("beats", "dur", "bounds", "gaps", "trail", "k", "last", "on_gap", "on_grant")
    STEADY_FIXED = ("sim", "port", "client", "write", "on_end", "on_cut")

    def __init__(self, sim: Scheduler, port: AxiArbiter, client: str, write: bool, beats: np.ndarray,
                 dur: np.ndarray, bounds: list[tuple[int, int]], gaps: list[int], trail: int,
                 on_end: Callable[[int], None], on_gap: Callable[[int, int], None] | None = None,
                 on_grant: Callable[[Segment], object] | None = None,
                 on_cut: Callable[[Segment], None] | None = None):
        self.sim, self.port, self.client, self.write = sim, port, client, write
        self.beats, self.dur, self.bounds, self.gaps, self.trail = beats, dur, bounds, gaps, trail
        self.on_end = on_end
        self.on_gap, self.on_grant, self.on_cut = on_gap, on_grant, on_cut
        self.k = 0
        self.last = False  # the segment under way is the job's last and nothing follows it

    def start(self, t: int) -> None:
        """The unit starts the job in cycle ``t``."""
        self._next(t)

    def _next(self, t: int) -> None:
        k = self.k
        own = self.trail if k == len(self.bounds) else self.gaps[k]
        if own and self.on_gap is not None:
            self.on_gap(t, own)
        if k == len(self.bounds):
            self.on_end(t + self.trail)
            return
        self.sim.now_or_later(t + self.gaps[k], self._request)

    @steady_event
    def _request(self, t: int) -> None:
        if self.sim.stopped:
            return
        a, b = self.bounds[self.k]
        self.last = self.k == len(self.bounds) - 1 and self.trail == 0
        self.port.request(t, Segment(self.client, self.write, self.beats[a:b], self.dur[a:b], self._segment_done,
                                     a, self.on_grant, self.on_cut))

    def _segment_done(self, t: int) -> None:
        self.k += 1
        self._next(t)

    def walk_state(self, w: StateWalk) -> None:
        """Visit the job's timing state: where it is among its segments (it has no times of its own)."""
        w.val((self.k, self.last, tuple(self.bounds), tuple(self.gaps), self.trail, tuple(self.beats.tolist()),
               tuple(self.dur.tolist()), self.on_gap is not None, self.on_grant is not None))
