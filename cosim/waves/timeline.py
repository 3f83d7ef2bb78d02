"""Cycles from VCD time, per-instruction timelines from the probes, and timeline diffs.

Time -> cycles. A TLM VCD advances one time unit per cycle; an RTL VCD advances one
clock period per cycle. The period and phase come from the ``clk`` signal (rising
edges), else from ``dbg_cycles`` (time per count), else 1 unit per cycle. A value
stored at a rising edge is the value *after* that edge, i.e. the state during that
cycle; several changes mapped to one cycle keep the last.

Origin. ``dbg_cycles`` counts from the cycle after START (it is 0 at START), so the
START cycle is ``cycle(t) - value`` at its first non-zero value. Diffs align two
traces on it, so an RTL run's reset and CSR programming do not count as divergence.

Timeline. Each unit holds an instruction (``dbg_<unit>_pc`` != 0xFFFFFFFF) from its
pop until it is done, and is executing while ``dbg_<unit>_busy`` is 1. One entry per
held instruction: ``start`` = first executing cycle, ``end`` = the cycle after the
last executing cycle (end - start = busy cycles), ``held_start``/``held_end`` the
same for the holding interval (token waits included). An instruction held but never
executing gets ``start = end = held_end``. Entries still open at the end of the trace
have ``end``/``held_end`` None.
"""

from __future__ import annotations

import math

from bisect import bisect_right
from dataclasses import asdict, dataclass, field

from cosim.waves.vcd_reader import SignalInfo, VcdFile, WavesError, _Stop, to_int

UNITS = ("load", "compute", "store")
PC_NONE = 0xFFFFFFFF


@dataclass(frozen=True)
class Clock:
    """Maps VCD time to cycles: cycle ``k`` starts at ``phase + k * period``."""

    period: int
    phase: int
    source: str  # "clk", "dbg_cycles", "default" or "user"
    origin: int | None = None  # the START cycle from dbg_cycles, when the trace has one

    def cycle(self, t: int) -> int:
        return max(0, (t - self.phase) // self.period)

    def time(self, c: int) -> int:
        """The first VCD time of cycle ``c``."""
        return self.phase + c * self.period

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def detect_clock(vcd: VcdFile, period: int | None = None) -> Clock:
    """Find the clock (and the START origin) with one short pass that stops as soon as
    three rising ``clk`` edges and two non-zero ``dbg_cycles`` values have been seen."""
    clk = vcd.find_probe("clk")
    cyc = vcd.find_probe("dbg_cycles")
    sigs = [s for s in (clk, cyc) if s is not None]
    edges: list[int] = []
    counts: list[tuple[int, int]] = []
    last_clk = ["x"]

    def hook(code: str, t: int, v: str) -> None:
        if clk is not None and code == clk.code and len(edges) < 3:
            if v == "1" and last_clk[0] == "0":
                edges.append(t)
            last_clk[0] = v
        elif cyc is not None and code == cyc.code and len(counts) < 2:
            n = to_int(v)
            if n and (not counts or n > counts[-1][1]):
                counts.append((t, n))
        if (clk is None or len(edges) >= 3) and (cyc is None or len(counts) >= 2):
            raise _Stop

    if sigs:
        vcd.stream(sigs, keep=False, hook=hook, label="clock")
    if period is not None:
        if period < 1:
            raise WavesError(f"--period must be a positive number of time units, not {period}")
        phase, source = (edges[0] % period if edges else 0), "user"
    elif len(edges) >= 2:
        period = edges[-1] - edges[-2]
        phase, source = edges[-1] % period, "clk"
    elif len(counts) >= 2 and (counts[1][0] - counts[0][0]) % (counts[1][1] - counts[0][1]) == 0 \
            and counts[1][0] > counts[0][0]:
        period = (counts[1][0] - counts[0][0]) // (counts[1][1] - counts[0][1])
        phase, source = counts[0][0] % period, "dbg_cycles"
    else:
        period, phase, source = 1, 0, "default"
    origin = None
    if counts:  # the CYCLES counter reads 0 in START's cycle and the next, then c - 1 in cycle c after START
        t, n = counts[0]
        origin = max(0, (t - phase) // period) - n - 1
    return Clock(period, phase, source, origin)


def to_cycles(clock: Clock, initial: str | None, changes: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Changes in VCD time -> changes in cycles, one per cycle (the last wins), with the
    value before the first change (``initial``) placed at cycle 0 when present."""
    out: list[tuple[int, str]] = []
    if initial is not None:
        out.append((0, initial))
    for t, v in changes:
        c = clock.cycle(t)
        if out and out[-1][0] == c:
            out[-1] = (c, v)
        else:
            out.append((c, v))
    # drop repeats so every entry is a real change
    dedup: list[tuple[int, str]] = []
    for c, v in out:
        if not dedup or dedup[-1][1] != v:
            dedup.append((c, v))
    return dedup


def value_at(changes: list[tuple[int, str]], c: int) -> str | None:
    """The value during cycle ``c`` from a cycle change list (None before the first)."""
    k = bisect_right(changes, c, key=lambda cv: cv[0])
    return changes[k - 1][1] if k else None


@dataclass
class Entry:
    """One instruction on one unit."""

    unit: str
    index: int
    start: int | None
    end: int | None
    held_start: int
    held_end: int | None
    # Held already when a windowed trace begins: held_start is the trace's first cycle, and start is None
    # when it was executing there (it began before the trace did).
    open_at_start: bool = False

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class Timeline:
    """Every instruction's execution interval in one trace, ordered by start."""

    path: str
    clock: Clock
    entries: list[Entry] = field(default_factory=list)
    units: list[str] = field(default_factory=list)  # units whose probes were found
    end_cycle: int = 0
    start_cycle: int = 0  # the trace's first cycle (a windowed VCD begins later than cycle 0)

    def to_dict(self) -> dict[str, object]:
        return {"file": self.path, "clock": self.clock.to_dict(), "units": self.units,
                "start_cycle": self.start_cycle, "end_cycle": self.end_cycle,
                "entries": [e.to_dict() for e in self.entries]}


def _unit_entries(unit: str, pc: list[tuple[int, str]], busy: list[tuple[int, str]],
                  first_cycle: int = 0) -> list[Entry]:
    """Sweep the pc and busy change lists (cycles) of one unit into entries.

    Changes of both probes in one cycle are applied together: the held instruction
    closes with the busy state it had, the next one opens with the new busy state. A trace
    that begins after cycle 0 (``first_cycle``: a window) begins inside what it finds held
    there (``open_at_start``)."""
    by_cycle: dict[int, dict[str, str]] = {}
    for c, v in pc:
        by_cycle.setdefault(c, {})["pc"] = v
    for c, v in busy:
        by_cycle.setdefault(c, {})["busy"] = v
    out: list[Entry] = []
    cur: Entry | None = None
    is_busy = began_before = False
    for c in sorted(by_cycle):
        ch = by_cycle[c]
        now = ch["busy"] == "1" if "busy" in ch else is_busy
        if "pc" in ch:
            n = to_int(ch["pc"])
            new_idx = None if n is None or n == PC_NONE else n
            if cur is None or new_idx != cur.index:  # (same index again: only busy may change)
                if cur is not None:  # close the held instruction
                    if is_busy:
                        cur.end = c
                    if cur.start is None and not (cur.open_at_start and began_before):
                        cur.start = cur.end = c
                    cur.held_end = c
                    out.append(cur)
                cur = Entry(unit, new_idx, c if now else None, None, c, None) if new_idx is not None else None
                if cur is not None and 0 < first_cycle == c:
                    cur.open_at_start = True
                    cur.start = None if now else cur.start
                    began_before = now
                is_busy = now
                continue
        if cur is not None and now != is_busy:
            if now:
                if cur.start is None and not (cur.open_at_start and began_before):
                    cur.start = c
                cur.end = None  # executing (again): the end moves on
            else:
                cur.end = c
        is_busy = now
    if cur is not None:
        out.append(cur)
    return out


def extract_timeline(vcd: VcdFile, clock: Clock | None = None) -> Timeline:
    """Read the dbg_<unit>_pc / dbg_<unit>_busy probes (one pass) and build the timeline."""
    clock = clock or detect_clock(vcd)
    probes: dict[str, tuple[SignalInfo, SignalInfo]] = {}
    for u in UNITS:
        pc, busy = vcd.find_probe(f"dbg_{u}_pc"), vcd.find_probe(f"dbg_{u}_busy")
        if pc is not None and busy is not None:
            probes[u] = (pc, busy)
    if not probes:
        raise WavesError(f"{vcd.path.name}: no dbg_<unit>_pc / dbg_<unit>_busy probes "
                         f"(expected e.g. dbg_load_pc and dbg_load_busy)")
    sigs = [s for pair in probes.values() for s in pair]
    _, changes = vcd.stream(sigs, label="timeline")
    tl = Timeline(str(vcd.path), clock, units=list(probes))
    end_time = vcd.end_time
    tl.end_cycle = clock.cycle(end_time) if end_time is not None else 0
    first = min((ch[0][0] for ch in changes.values() if ch), default=0)  # the trace's first time stamp
    tl.start_cycle = clock.cycle(first)
    for u, (pc, busy) in probes.items():
        tl.entries += _unit_entries(u, to_cycles(clock, None, changes[pc.name]),
                                    to_cycles(clock, None, changes[busy.name]), clock.cycle(first))
    tl.entries.sort(key=lambda e: (e.start if e.start is not None else e.held_start, UNITS.index(e.unit), e.index))
    return tl


# ---- diff ------------------------------------------------------------------------------
@dataclass
class Difference:
    """One disagreement between timelines A and B (cycles relative to each one's origin)."""

    kind: str  # "start", "end", "unit", "only_a", "only_b"
    index: int
    unit: str
    a: dict[str, object] | None  # A's entry (relative cycles) or None
    b: dict[str, object] | None
    cycle: int  # the relative cycle where the traces stop agreeing (orders differences)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _shift(e: Entry, off: int) -> dict[str, object]:
    d = e.to_dict()
    for k in ("start", "end", "held_start", "held_end"):
        if d[k] is not None:
            d[k] = d[k] - off
    return d


def alignment(tl: Timeline, mode: str) -> int:
    """The cycle subtracted from ``tl``'s cycles: START origin, first instruction, or 0."""
    if mode == "none":
        return 0
    if mode in ("start", "auto") and tl.clock.origin is not None:
        return tl.clock.origin
    if mode == "start":
        raise WavesError(f"{tl.path}: no dbg_cycles probe to align on (use --align first or none)")
    starts = [e.held_start for e in tl.entries]
    return min(starts) if starts else 0


def _held_span(tl: Timeline, off: int) -> tuple[float, float]:
    """The relative cycles ``tl`` holds: from its first cycle when it began mid-run (a window: a later first
    time stamp, or an instruction open at its start), to its last when it was cut (an instruction still open
    at its end); unbounded on a side where the trace is whole."""
    cut_start = tl.start_cycle > 0 or any(e.open_at_start for e in tl.entries)
    cut_end = any(e.held_end is None for e in tl.entries)
    return (tl.start_cycle - off if cut_start else -math.inf, tl.end_cycle - off if cut_end else math.inf)


def diff_timelines(a: Timeline, b: Timeline, tol: int = 0, align: str = "auto") -> dict[str, object]:
    """Compare two timelines instruction by instruction (matched by index and occurrence).

    ``align`` is "auto" (START origin when both traces have dbg_cycles, else the first
    instruction), "start", "first" or "none". Returns a report dict whose "first" is
    the earliest difference (or None) and "differences" all of them, earliest first.
    """
    if align == "auto" and (a.clock.origin is None or b.clock.origin is None):
        align = "first"
    if tol < 0:
        raise WavesError(f"--tol must be >= 0, not {tol}")
    off_a, off_b = alignment(a, align), alignment(b, align)

    def keyed(tl: Timeline) -> dict[tuple[int, int], Entry]:
        seen: dict[int, int] = {}
        out = {}
        for e in sorted(tl.entries, key=lambda e: e.held_start):
            k = seen.get(e.index, 0)
            seen[e.index] = k + 1
            out[(e.index, k)] = e
        return out

    ka, kb = keyed(a), keyed(b)
    # the relative cycles each trace holds: a windowed or size-capped VCD holds only part of the run, and
    # what the other trace has outside that part is not a difference; a whole trace holds every cycle
    span_a, span_b = _held_span(a, off_a), _held_span(b, off_b)
    diffs: list[Difference] = []
    outside = 0
    for key in sorted(set(ka) | set(kb)):
        ea, eb = ka.get(key), kb.get(key)
        ra = _shift(ea, off_a) if ea else None
        rb = _shift(eb, off_b) if eb else None
        if ea is None or eb is None:
            r = ra or rb
            lo, hi = span_b if eb is None else span_a  # what the trace missing it holds
            held_end = r["held_end"] if r["held_end"] is not None else (span_a if eb is None else span_b)[1]
            if int(held_end) < lo or int(r["held_start"]) > hi:
                outside += 1
                continue
            diffs.append(Difference("only_a" if eb is None else "only_b", key[0], str(r["unit"]), ra, rb,
                                    int(r["start"] if r["start"] is not None else r["held_start"])))
            continue
        if ea.unit != eb.unit:
            diffs.append(Difference("unit", key[0], ea.unit, ra, rb, int(min(ra["held_start"], rb["held_start"]))))
            continue
        for fld in ("start", "end"):
            if fld == "start" and (ea.open_at_start or eb.open_at_start):
                continue  # one trace began inside it: its start is not there to compare
            va, vb = ra[fld], rb[fld]
            if va is None or vb is None:
                if va != vb and int(va if va is not None else vb) > (span_a if va is None else span_b)[1]:
                    continue  # the trace without it stops before the cycle the other one has it at
                if va != vb:  # one trace ended before the instruction did
                    known = va if va is not None else vb
                    diffs.append(Difference(fld, key[0], ea.unit, ra, rb, int(known)))
                    break
                continue
            if abs(int(va) - int(vb)) > tol:
                diffs.append(Difference(fld, key[0], ea.unit, ra, rb, int(min(va, vb))))
                break  # one difference per instruction: the earliest field
    diffs.sort(key=lambda d: (d.cycle, d.index))
    return {"a": a.path, "b": b.path, "align": align, "offset_a": off_a, "offset_b": off_b, "tolerance": tol,
            "compared": len(set(ka) & set(kb)), "outside": outside,
            "span_a": [None if math.isinf(c) else int(c) for c in span_a],
            "span_b": [None if math.isinf(c) else int(c) for c in span_b],
            "equal": not diffs,
            "first": diffs[0].to_dict() if diffs else None, "differences": [d.to_dict() for d in diffs]}


def diff_values(va: list[tuple[int, str]], vb: list[tuple[int, str]], off_a: int, off_b: int,
                end: int, start: int = 0) -> int | None:
    """The first relative cycle (``start`` <= cycle < ``end``: the cycles both traces hold, before START
    too where both have them) where two cycle change lists hold different values after shifting by their
    offsets, or None when they agree."""
    ra = [(max(start, c - off_a), v) for c, v in va]
    rb = [(max(start, c - off_b), v) for c, v in vb]
    points = sorted({c for c, _ in ra} | {c for c, _ in rb})
    i = j = 0
    x = y = None
    for c in points:  # one merge of the two sorted lists: linear in the changes
        if c >= end:
            break
        while i < len(ra) and ra[i][0] <= c:
            x, i = ra[i][1], i + 1
        while j < len(rb) and rb[j][0] <= c:
            y, j = rb[j][1], j + 1
        if to_int(x) != to_int(y) or (to_int(x) is None and x != y):
            return c
    return None


def read_window(vcd: VcdFile, sigs: list[SignalInfo], clock: Clock, c0: int, c1: int) -> dict[str, list[tuple[int, str]]]:
    """Cycle change lists of ``sigs`` for cycles ``c0..c1``: one pass that keeps only
    the window (plus the value entering it) and stops reading at its end."""
    if c1 < c0:
        raise WavesError(f"empty cycle window: --from {c0} is after --to {c1}")
    t0, t1 = clock.time(c0), clock.time(c1 + 1) - 1
    initial, changes = vcd.stream(sigs, t_from=t0, t_to=t1, label="window")
    out = {}
    for s in sigs:
        ch = to_cycles(clock, None, changes[s.name])
        if s.name in initial and (not ch or ch[0][0] > c0):
            ch.insert(0, (c0, initial[s.name]))
        out[s.name] = ch
    return out
