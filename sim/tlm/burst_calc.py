"""The burst plan (``hw/rtl/burst_calc.v``): how many beats the next INCR burst moves.

Rule (docs/microarch.md "The DRAM port"): a burst moves ``min(MAX_BURST, beats left,
beats to the next 4 KiB boundary)``, so no burst crosses a 4 KiB page. LOAD and STORE
split each DRAM row (``x_size`` contiguous vectors) this way; FETCH reads whole
instructions. Because ``MAX_BURST * bus_bytes`` divides 4096, only a row's first piece (up
to its first 4 KiB boundary) can start off a burst-size multiple, so each row is at most:
full bursts, one short burst, full bursts, one short burst. The plan of a whole 2-D
transfer is computed with numpy for all rows at once: O(1) Python work per instruction.
"""

from __future__ import annotations

import numpy as np

PAGE = 4096


def fetch_burst_insns(addr: int, remaining: int, max_insns: int, insn_bytes: int) -> int:
    """Instructions FETCH's next burst reads from byte ``addr``: at most ``max_insns`` (what
    MAX_BURST beats hold), the ``remaining`` ones, and none past the 4 KiB boundary."""
    return min(max_insns, remaining, (PAGE - addr % PAGE) // insn_bytes)


def row_burst_beats(row_addrs: np.ndarray, row_bytes: int, bus_bytes: int, max_burst: int) -> tuple[np.ndarray,
                                                                                                     np.ndarray]:
    """Burst lengths (beats) of rows of ``row_bytes`` starting at ``row_addrs``, in order.

    Returns ``(beats, bursts_per_row)``: one int64 entry per burst of all rows
    concatenated, and the number of bursts of each row.
    """
    mb = max_burst * bus_bytes
    if len(row_addrs) == 1:  # the common 1-row case, without numpy's per-call overhead
        a0 = int(row_addrs[0])
        first = min(row_bytes, PAGE - a0 % PAGE)
        rest = row_bytes - first
        out = [max_burst] * (first // mb) + ([(first % mb) // bus_bytes] if first % mb else [])
        out += [max_burst] * (rest // mb) + ([(rest % mb) // bus_bytes] if rest % mb else [])
        return np.array(out, dtype=np.int64), np.array([len(out)], dtype=np.int64)
    a = np.asarray(row_addrs, dtype=np.int64)                       # bytes of a full burst
    first = np.minimum(row_bytes, PAGE - a % PAGE)   # bytes up to the first 4 KiB boundary
    rest = row_bytes - first
    # per row: q1 full + r1 short (first piece), q2 full + r2 short (the rest, page-aligned)
    vals = np.stack([np.full_like(a, max_burst), (first % mb) // bus_bytes,
                     np.full_like(a, max_burst), (rest % mb) // bus_bytes], axis=1)
    cnts = np.stack([first // mb, (first % mb > 0).astype(np.int64), rest // mb,
                     (rest % mb > 0).astype(np.int64)], axis=1)
    return np.repeat(vals.ravel(), cnts.ravel()), cnts.sum(axis=1)


def row_cut_marks(row_addrs: np.ndarray, row_bytes: int, bus_bytes: int, max_burst: int) -> np.ndarray:
    """Per row of ``row_bytes`` starting at byte ``row_addrs``: 0 when its bursts are those of a row
    that no 4 KiB boundary cuts, else where the boundary cuts it (bytes from the row's start). Rows
    with equal marks get equal bursts (:func:`row_burst_beats`): a boundary a whole number of full
    bursts into the row cuts nothing, since the bursts from the row's start end there anyway."""
    a = np.asarray(row_addrs, dtype=np.int64)
    first = np.minimum(row_bytes, PAGE - a % PAGE)
    return np.where((first < row_bytes) & (first % (max_burst * bus_bytes) != 0), first, 0)


def vector_beats(beats: np.ndarray, per_row: np.ndarray, beats_per_vec: int,
                 last: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per burst of a 2-D transfer (``beats`` per burst, ``per_row`` bursts per row, rows made
    of whole vectors): the first beat that is the last (``last``) or the first beat of a
    vector, and how many such beats the burst has (one every ``beats_per_vec``)."""
    if not (beats % beats_per_vec).any():
        # every burst holds whole vectors, so each starts on a vector's first beat
        return np.full(len(beats), beats_per_vec - 1 if last else 0, dtype=np.int64), beats // beats_per_vec
    before = np.cumsum(beats) - beats                        # beats of earlier bursts
    row_first = np.cumsum(per_row) - per_row
    into_row = before - np.repeat(before[row_first], per_row)  # beats of the row before the burst
    m0 = ((beats_per_vec - 1 - into_row) if last else -into_row) % beats_per_vec
    return m0, np.where(m0 < beats, (beats - 1 - m0) // beats_per_vec + 1, 0)
