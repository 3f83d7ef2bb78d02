"""Crossings replayed by the TLM's fast-forward (``sim/tlm/fast_forward.py``): the event-by-event
stretch between a jump that ended before a DMA cut otherwise by a 4 KiB boundary and the jump
from the same signature after it, recorded once and applied again wherever the same stretch
comes back.

A *segment* goes from a boundary with signature ``K`` (just after a jump) to the next boundary
with the same signature ``K`` (where the run jumped again, with a template of ``K``). Its
future is decided by the signature and the instruction words FETCH reads in between (each DMA's
fields but its address, and where 4 KiB boundaries cut its rows); the DRAM addresses, past times
and pcs only enter arithmetic. So from a later boundary with signature ``K`` whose window of words
matches the segment's (the same words but for DMA addresses, every DMA cut where its counterpart
was), the run ends exactly as the segment did, moved: ``T`` cycles and ``P`` instructions later,
every counter moved by the segment's change, each DMA address by its word's shift from the
recorded window, and the segment's data movements applied with those shifts.

This module holds what a segment keeps and the matching of a window; the fast-forward makes the
move (its walk in shift mode, by one "period" that is the segment).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from hw.isa_semantics import buffer_of
from sim.tlm.burst_calc import row_cut_marks


@dataclasses.dataclass
class Segment:
    """One recorded crossing: from a boundary (cycle ``t0``, FETCH's pc ``ref0``, side vector
    ``vec0``) to the boundary of the same signature ``T`` cycles and ``P`` instructions later
    (side vector ``vec1``); the words read in between (pcs ``ref0 + lo`` .. ``ref0 + hi``, DMA
    addresses masked, with the addresses of the DMAs, and their cut marks by group of equal
    fields); the counters' change, the event versions' steps, the data movements with the window
    rows each LOAD and STORE may be, where the oldest instruction was a period before the end
    (``lo_end``, relative to the end), how many of the movements were the last period's
    (``last_ops``), how many micro-op LOADs had run before it (``uop_loads``: it is replayed only
    with the same micro-ops), and the template the run jumped with from the end (``tpl``)."""

    t0: int
    ref0: int
    T: int
    P: int
    lo: int
    hi: int
    masked: np.ndarray
    dma: np.ndarray
    bases: np.ndarray
    groups: list["DmaGroup"]
    vec0: list[tuple[Any, int]]
    vec1: list[tuple[Any, int]]
    counters: list[int]
    steps: tuple[int, int]
    ops: list[tuple[str, Any]]
    op_rows: list[list[int]]
    lo_end: int
    last_ops: int
    uop_loads: int
    tpl: Any = None


@dataclasses.dataclass
class DmaGroup:
    """The LOADs or STOREs of a window with the same fields but the DRAM address: their ``rows``,
    their shape (``y_size`` rows of ``row_bytes`` bytes, ``stride_bytes`` apart, the address unit
    ``unit`` bytes, ``write``: a STORE) and the cut marks the recorded window had (one row each)."""

    rows: np.ndarray
    y_size: int
    row_bytes: int
    stride_bytes: int
    unit: int
    write: bool
    marks: np.ndarray


def group_dmas(rows_insns: dict[int, Any]) -> list[tuple[list[int], Any]]:
    """The DMA rows of a window grouped by their fields but the address: ``(rows, one instruction)``."""
    by: dict[Any, tuple[list[int], Any]] = {}
    for r, i in rows_insns.items():
        k = dataclasses.replace(i, dram_base=0)
        by.setdefault(k, ([], i))[0].append(r)
    return list(by.values())


def group_marks(g: DmaGroup, bases: np.ndarray, bus_bytes: int, max_burst: int) -> np.ndarray:
    """Where 4 KiB boundaries cut the rows of the group's DMAs at DRAM addresses ``bases``
    (``row_cut_marks``, one line per DMA)."""
    if g.y_size == 0 or g.row_bytes == 0:
        return np.zeros((len(bases), 0), dtype=np.int64)
    addrs = bases[:, None] * g.unit + np.arange(g.y_size, dtype=np.int64)[None, :] * g.stride_bytes
    return row_cut_marks(addrs, g.row_bytes, bus_bytes, max_burst)


def op_rows(ops: list[tuple[str, Any]], rows_insns: dict[int, Any]) -> list[list[int]] | None:
    """For each data movement, the window rows whose instruction it may be (a LOAD's or STORE's:
    the DMA rows with its fields and address; none for the others); None when a LOAD or STORE
    has no row or a LOAD of micro-ops is among them (GEMM's faults depend on their contents)."""
    where: dict[Any, list[int]] = {}
    for r, j in rows_insns.items():
        where.setdefault(j, []).append(r)
    out: list[list[int]] = []
    for kind, i in ops:
        if kind not in ("load", "store"):
            out.append([])
            continue
        if kind == "load" and buffer_of(i) == "UOP":
            return None
        rows = where.get(i, [])
        if not rows:
            return None
        out.append(rows)
    return out


def shift_of(rows: list[int], shifts: np.ndarray) -> int | None:
    """The address shift of one DMA given the rows it may be: theirs if they agree, else None."""
    s = {int(shifts[r]) for r in rows}
    return s.pop() if len(s) == 1 else None


def new_vector(seg: Segment, vec: list[tuple[Any, int]], dt: int, dref: int, shifts: np.ndarray) -> list[int] | None:
    """The side vector at the segment's end, replayed from a boundary with side vector ``vec``
    (``dt`` cycles and ``dref`` instructions after the recorded start; ``shifts``: each window
    row's DRAM address shift). A time or pc of the start stays (a constant) or moves by ``dt`` or
    ``dref``; at the end, one made in the segment moves by ``dt`` or ``dref``, one carried through
    it as its value did at the start; a DMA address moves by its row's shift. None when a value
    cannot be placed (a past value not seen at the start, or seen moving both ways)."""
    if len(vec) != len(seg.vec0):
        return None
    moves: dict[tuple[str, int], set[int]] = {}
    for (kind, v0), (_, v) in zip(seg.vec0, vec):
        if kind in ("t", "p"):
            if v - v0 not in (0, dt if kind == "t" else dref):
                return None
            moves.setdefault((kind, v0), set()).add(v - v0)
        else:
            s = _addr_shift(seg, v0, shifts)
            if s is None or v - v0 != s:
                return None
    out = []
    for kind, v1 in seg.vec1:
        if kind == "t" and v1 > seg.t0 or kind == "p" and v1 >= seg.ref0:
            out.append(v1 + (dt if kind == "t" else dref))  # made in the segment
        elif kind in ("t", "p"):
            m = moves.get((kind, v1))
            if m is None or len(m) != 1:
                return None
            out.append(v1 + next(iter(m)))
        else:
            s = _addr_shift(seg, v1, shifts)
            if s is None:
                return None
            out.append(v1 + s)
    return out


def _addr_shift(seg: Segment, v: int, shifts: np.ndarray) -> int | None:
    """The shift of a DMA address of the side vector: that of the window rows with that address."""
    rows = np.flatnonzero(seg.dma & (seg.bases == v))
    if len(rows) == 0:
        return None
    return shift_of(rows.tolist(), shifts)


__all__ = ["DmaGroup", "Segment", "group_dmas", "group_marks", "new_vector", "op_rows", "shift_of"]
