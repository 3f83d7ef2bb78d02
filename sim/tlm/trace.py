"""Timeline recording (only when tracing is on) and the two writers: VCD and Chrome/Perfetto JSON.

The VCD uses the RTL's probe names (output ports of ``accel_top``) under scope
``accel``, timescale 1 ns, one time unit per cycle, cycle 0 = the START cycle (the
TLM's clock, ``sim/tlm/timing.py``); each probe has the value the RTL's has in that
cycle: ``dbg_{load,compute,store}_busy`` (unit in EXECUTE), ``dbg_gemm_busy`` (the compute
unit in EXECUTE of a GEMM), ``dbg_*_pc`` (pc of the
held instruction from WAIT to PUSH, 0xFFFFFFFF when IDLE), ``dbg_*_q`` (queue
occupancy, a registered count), ``dbg_dma_rd``/``dbg_dma_wr`` (a read/write burst
under way: from the cycle after its grant to its last beat / B), ``dbg_cycles`` (the
CYCLES counter) and ``irq`` (from the cycle after DONE). The model calls the recording
hooks only when a tracer exists, so an untraced run pays nothing but a ``None`` test.

A trace costs O(transactions), never O(cycles): the VCD has a time stamp only where a
probe changes. ``dbg_cycles``, which the RTL's counter changes every cycle, is written
only at those stamps (with the counter's value there); the time axis is the cycle
already, and a reader that wants the counter between two stamps computes it from the
time (``t - 1`` in cycle ``t``, see :meth:`Tracer.write_vcd`).
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

UNITS = ("load", "compute", "store")
NO_PC = 0xFFFFFFFF
_TID = {"fetch": 0, "load": 1, "compute": 2, "gemm": 5, "store": 3, "dma": 4, "sections": 6}
PROLOGUE = "(prologue)"  # the row of the instructions before a Program's first section


def section_rows(sections: list[dict[str, Any]] | None) -> list[tuple[str, int, int]]:
    """``(name, first, stop)`` instruction ranges of a Program's ``meta["sections"]`` in order, with a
    :data:`PROLOGUE` row first when instructions come before the first section; ``[]`` without
    sections. Instructions past the last section (FINISH) belong to no row."""
    rows = [(str(s["name"]), int(s["first"]), int(s["first"]) + int(s["count"])) for s in sections or []]
    if rows and rows[0][1] > 0:
        rows.insert(0, (PROLOGUE, 0, rows[0][1]))
    return rows


class Tracer:
    """Collects the timeline of one run."""

    def __init__(self) -> None:
        self.q_deltas: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.pcs: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.busys: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.insns: list[tuple[str, int, Any, int, int, int]] = []
        self.retired: list[int] = []  # per entry of ``insns``: the cycle it completed (its PUSH)
        self.dmas: list[tuple[str, bool, int, np.ndarray, np.ndarray]] = []
        self.gemms: list[tuple[int, int, int, int, int]] = []
        self.done_t: int | None = None

    # ---- hooks ------------------------------------------------------------------------------
    def queue(self, unit: str, t: int, delta: int) -> None:
        self.q_deltas[unit].append((t, delta))

    def pc(self, unit: str, t: int, pc: int | None) -> None:
        self.pcs[unit].append((t, NO_PC if pc is None else pc))

    def busy(self, unit: str, t: int, v: int) -> None:
        self.busys[unit].append((t, v))

    def insn(self, unit: str, pc: int | None, insn: Any, t_pop: int, t_exec: int, t_end: int,
             t_done: int | None = None) -> None:
        """An instruction popped at ``t_pop``, executed from ``t_exec`` to ``t_end`` (exclusive: its
        first PUSH cycle) and completed (pushed its tokens) in cycle ``t_done``."""
        self.insns.append((unit, pc if pc is not None else -1, insn, t_pop, t_exec, t_end))
        self.retired.append(t_end if t_done is None else t_done)

    def gemm(self, pc: int | None, t_exec: int, t_end: int, iterations: int, frozen: int) -> None:
        """A GEMM's EXECUTE ran from ``t_exec`` to ``t_end`` (exclusive): ``iterations`` blocks,
        ``frozen`` cycles waiting for the accumulator's write port."""
        self.gemms.append((pc if pc is not None else -1, t_exec, t_end, iterations, frozen))

    def dma(self, client: str, write: bool, t0: int, ends: np.ndarray, beats: np.ndarray) -> None:
        self.dmas.append((client, write, t0, np.array(ends), np.array(beats)))

    def done(self, t: int) -> None:
        self.done_t = t

    # ---- derived timelines -------------------------------------------------------------------
    def queue_levels(self, unit: str) -> list[tuple[int, int]]:
        """(cycle, occupancy) after every cycle with a net change."""
        out: list[tuple[int, int]] = []
        level = 0
        for t, d in sorted(self.q_deltas.get(unit, []), key=lambda x: x[0]):
            level += d
            if out and out[-1][0] == t:
                out[-1] = (t, level)
            else:
                out.append((t, level))
        return out

    def bursts(self) -> list[tuple[str, bool, int, int, int]]:
        """Every burst as (client, write, start, end, beats)."""
        out = []
        for client, write, t0, ends, beats in self.dmas:
            starts = np.concatenate(([0], ends[:-1])) + t0
            out += [(client, write, int(s), int(e), int(b)) for s, e, b in zip(starts, ends + t0, beats)]
        return out

    def _dma_changes(self, write: bool) -> list[tuple[int, int]]:
        # the RTL's dbg_dma_*: high while a burst is in flight, from the cycle after its grant to its
        # last beat / B; bursts in flight together overlap, so count them
        delta: dict[int, int] = {}
        for client, w, s, e, _b in self.bursts():
            if w == write:
                delta[s + 1] = delta.get(s + 1, 0) + 1
                delta[e] = delta.get(e, 0) - 1
        ch: list[tuple[int, int]] = []
        level = 0
        for t in sorted(delta):
            high = level > 0
            level += delta[t]
            if (level > 0) != high:
                ch.append((t, int(level > 0)))
        return ch

    def section_spans(self, sections: list[dict[str, Any]] | None, end: int) -> list[tuple[str, int, int, int, int]]:
        """``(name, first, stop, start, end)`` per row of :func:`section_rows`: a partition of the run's
        cycles ``[0, end)``. A row ends when every instruction before its ``stop`` has completed (the
        running maximum of their completion cycles), the last row at ``end`` (CYCLES), so the rows'
        cycles sum to CYCLES; a row whose instructions all completed under earlier rows gets 0."""
        rows = section_rows(sections)
        order = sorted(range(len(self.insns)), key=lambda k: self.insns[k][1])
        pcs = [self.insns[k][1] for k in order]
        prefix_max: list[int] = []
        for k in order:
            prefix_max.append(max(self.retired[k], prefix_max[-1] if prefix_max else 0))
        spans = []
        t = 0
        for n, (name, first, stop) in enumerate(rows):
            i = bisect_left(pcs, stop)
            e = max(t, end) if n == len(rows) - 1 else max(t, prefix_max[i - 1] if i else 0)
            spans.append((name, first, stop, t, e))
            t = e
        return spans

    # ---- VCD ----------------------------------------------------------------------------------
    def write_vcd(self, path: str | Path, end: int) -> Path:
        """Write the VCD from cycle 0 (START) to ``end + 1`` (the cycle after DONE, when irq
        is high). ``dbg_cycles`` has the RTL's counter value at every time stamp: 0 in
        START's cycle and the next, then ``t - 1`` in cycle ``t`` (it counts the busy cycles
        1 .. end); it is written only at the stamps another probe has (and at ``end + 1``)."""
        sigs: list[tuple[str, int, list[tuple[int, int]], int]] = []
        for u in UNITS:
            sigs.append((f"dbg_{u}_busy", 1, self.busys.get(u, []), 0))
        sigs.append(("dbg_gemm_busy", 1, self.busys.get("gemm", []), 0))
        for u in UNITS:
            sigs.append((f"dbg_{u}_pc", 32, self.pcs.get(u, []), NO_PC))
        for u in UNITS:
            sigs.append((f"dbg_{u}_q", 16, self.queue_levels(u), 0))
        sigs.append(("dbg_dma_rd", 1, self._dma_changes(False), 0))
        sigs.append(("dbg_dma_wr", 1, self._dma_changes(True), 0))
        sigs.append(("irq", 1, [] if self.done_t is None else [(self.done_t + 1, 1)], 0))
        ids = [_vcd_id(k) for k in range(len(sigs) + 1)]
        cyc_id = ids[-1]

        def fmt(width: int, v: int, ident: str) -> str:
            return f"{v & 1}{ident}" if width == 1 else f"b{v:b} {ident}"

        at: dict[int, dict[int, str]] = defaultdict(dict)  # time -> signal -> text (last wins)
        for k, (_n, w, changes, _init) in enumerate(sigs):
            for t, v in changes:
                if 0 <= t <= end + 1:
                    at[t][k] = fmt(w, v, ids[k])
        lines = ["$date cosim TLM $end", "$version sim.tlm $end", "$timescale 1ns $end", "$scope module accel $end"]
        lines += [f"$var wire {w} {ids[k]} {n} $end" for k, (n, w, _c, _i) in enumerate(sigs)]
        lines += [f"$var wire 64 {cyc_id} dbg_cycles $end", "$upscope $end", "$enddefinitions $end",
                  "#0", "$dumpvars"]
        first = at.pop(0, {})
        for k, (_n, w, _c, init) in enumerate(sigs):
            lines.append(first.get(k, fmt(w, init, ids[k])))
        lines += [f"b0 {cyc_id}", "$end"]
        # Time stamps only where a probe changes (and end + 1, where the counter stops at end):
        # dbg_cycles is sampled there, so the file grows with transactions, not with cycles.
        at.setdefault(end + 1, {})
        for t in sorted(at):
            lines.append(f"#{t}")
            lines.extend(at[t].values())
            if t >= 2:  # the counter is 0 up to cycle 1 ($dumpvars)
                lines.append(f"b{t - 1:b} {cyc_id}")
        lines.append(f"#{end + 2}")
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("\n".join(lines) + "\n")
        return p

    # ---- Chrome / Perfetto ---------------------------------------------------------------------
    def write_perfetto(self, path: str | Path, end: int, isa: Any = None,
                       sections: list[dict[str, Any]] | None = None) -> Path:
        """Write a Chrome trace-event JSON (open in ui.perfetto.dev); ``ts`` and ``dur`` are cycles.
        ``sections`` (a Program's ``meta["sections"]``): one span per section on the "sections"
        track (:meth:`section_spans`)."""
        ev = self.perfetto_events(end, isa, sections)
        if self.done_t is not None:
            ev.append({"name": "DONE", "ph": "i", "s": "g", "pid": 1, "tid": 0, "ts": self.done_t})
        return _dump_perfetto(path, ev, end)

    def perfetto_events(self, end: int, isa: Any = None, sections: list[dict[str, Any]] | None = None,
                        pid: int = 1, process: str = "accel (TLM)", dma: bool = True) -> list[dict[str, Any]]:
        """The trace events of this timeline as one process (track group) ``pid`` named ``process``;
        ``dma``: with the port's bursts on its "dma" track."""
        ev: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": process}}]
        spans = self.section_spans(sections, end)
        for name, tid in _TID.items():
            if (name != "sections" or spans) and (name != "dma" or dma):
                ev.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        for unit, pc, insn, t_pop, t_exec, t_end in self.insns:
            text = isa.disasm(insn) if isa is not None else insn.MNEMONIC
            ev.append({"name": f"{insn.MNEMONIC} #{pc}", "ph": "X", "pid": pid, "tid": _TID[unit], "ts": t_pop,
                       "dur": t_end - t_pop, "args": {"pc": pc, "insn": text, "exec_start": t_exec}})
            ev.append({"name": "EXECUTE", "ph": "X", "pid": pid, "tid": _TID[unit], "ts": t_exec,
                       "dur": t_end - t_exec, "args": {"pc": pc}})
        for pc, t_exec, t_end, n, frozen in self.gemms:
            ev.append({"name": "GEMM core", "ph": "X", "pid": pid, "tid": _TID["gemm"], "ts": t_exec,
                       "dur": t_end - t_exec, "args": {"pc": pc, "iterations": n, "frozen_cycles": frozen,
                                                        "blocks_per_cycle": n / max(1, t_end - t_exec)}})
        if dma:
            ev += self.dma_events(pid)
        levels = {u: dict(self.queue_levels(u)) for u in UNITS}
        cur = {u: 0 for u in UNITS}
        for t in sorted({t for u in UNITS for t in levels[u]}):
            for u in UNITS:
                cur[u] = levels[u].get(t, cur[u])
            ev.append({"name": "queue depth", "ph": "C", "pid": pid, "ts": t, "args": dict(cur)})
        for name, first, stop, s, e in spans:
            ev.append({"name": name, "ph": "X", "pid": pid, "tid": _TID["sections"], "ts": s, "dur": e - s,
                       "args": {"first_insn": first, "insns": stop - first, "cycles": e - s}})
        return ev

    def dma_events(self, pid: int) -> list[dict[str, Any]]:
        """The port's bursts on the "dma" track of process ``pid``."""
        return [{"name": f"{client} {'wr' if write else 'rd'}", "ph": "X", "pid": pid, "tid": _TID["dma"],
                 "ts": s, "dur": e - s, "args": {"client": client, "beats": beats}}
                for client, write, s, e, beats in self.bursts()]


def write_perfetto_cores(path: str | Path, end: int, isa: Any, port: Tracer, cores: list[Tracer]) -> Path:
    """The Perfetto trace of several cores: one process (track group) per core with its units' tracks,
    and one for the shared DRAM port (each burst named ``core<k>.<client>``)."""
    ev: list[dict[str, Any]] = []
    for k, tr in enumerate(cores):
        ev += tr.perfetto_events(end, isa, None, pid=k + 1, process=f"core {k}", dma=False)
    pid = len(cores) + 1
    ev += [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": "DRAM port"}},
           {"name": "thread_name", "ph": "M", "pid": pid, "tid": _TID["dma"], "args": {"name": "dma"}}]
    ev += port.dma_events(pid)
    if port.done_t is not None:
        ev.append({"name": "DONE", "ph": "i", "s": "g", "pid": pid, "tid": 0, "ts": port.done_t})
    return _dump_perfetto(path, ev, end)


def _dump_perfetto(path: str | Path, ev: list[dict[str, Any]], end: int) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"traceEvents": ev, "displayTimeUnit": "ns",
                             "otherData": {"model": "tlm", "time_unit": "cycle", "cycles": end}}))
    return p


def _vcd_id(k: int) -> str:
    """Short printable VCD identifier codes: !, ", #, ..."""
    chars = [chr(c) for c in range(33, 127)]
    s = ""
    k += 0
    while True:
        s = chars[k % len(chars)] + s
        k = k // len(chars) - 1
        if k < 0:
            return s
