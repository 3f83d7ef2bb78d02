"""DRAM contents, the region windows that guard them, and the AXI burst plan of a 2-D transfer.

Burst rule (docs/microarch.md): each DRAM row (``x_size`` contiguous vectors) is split
into INCR bursts of ``min(MAX_BURST, beats left in the row, beats to the next 4 KiB
boundary)``. Because ``MAX_BURST * bus_bytes`` divides 4096, only a row's first piece
(up to its first 4 KiB boundary) can start off a burst-size multiple, so each row is
at most: full bursts, one short burst, full bursts, one short burst. The plan is
computed with numpy for all rows at once: O(1) Python work per instruction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hw import csr

PAGE = 4096


@dataclass(frozen=True)
class RegionWindow:
    """One REGIONn window as programmed through the CSRs."""

    base: int
    size: int
    attr: int

    def contains(self, lo: int, hi: int) -> bool:
        return self.base <= lo and hi <= self.base + self.size


class Dram:
    """The DRAM byte array (little-endian) with typed vector views and the range check."""

    def __init__(self, nbytes: int, lanes: int, out_width: int):
        self.nbytes = nbytes
        self.mem = np.zeros(nbytes, dtype=np.uint8)
        self.lanes = lanes
        self.acc_vec_bytes = lanes * 4
        self.out_dtype = np.dtype("<i1") if out_width == 8 else np.dtype("<i2")
        self.out_vec_bytes = lanes * self.out_dtype.itemsize
        self.regions: list[RegionWindow] = []

    def load_image(self, image: bytes | bytearray | np.ndarray, addr: int = 0) -> None:
        """Copy ``image`` into DRAM at byte ``addr``."""
        data = np.frombuffer(bytes(image), dtype=np.uint8) if not isinstance(image, np.ndarray) \
            else image.view(np.uint8).ravel()
        if addr < 0 or addr + len(data) > self.nbytes:
            raise ValueError(f"DRAM image of {len(data)} bytes at 0x{addr:x} does not fit {self.nbytes} bytes")
        self.mem[addr:addr + len(data)] = data

    def read_word(self, addr: int) -> int:
        """One 16-byte little-endian instruction word."""
        return int.from_bytes(self.mem[addr:addr + 16].tobytes(), "little")

    # ---- range check ----------------------------------------------------------------------
    def window_ok(self, lo: int, hi: int, attr: int) -> bool:
        """True when bytes [lo, hi) lie inside DRAM and inside one region allowing ``attr``."""
        if lo < 0 or hi > self.nbytes:
            return False
        return any(r.size and (r.attr & attr) == attr and r.contains(lo, hi) for r in self.regions)

    @staticmethod
    def tile_span(dram_base: int, y: int, x: int, stride: int, vb: int) -> tuple[int, int]:
        """Bytes [lo, hi) a 2-D transfer touches (the contract's formula)."""
        lo = dram_base * vb
        return lo, lo + ((y - 1) * stride + x) * vb

    # ---- data movement (numpy) -------------------------------------------------------------
    def _row_index(self, dram_base: int, y: int, x: int, stride: int) -> np.ndarray:
        return (dram_base + np.arange(y, dtype=np.int64)[:, None] * stride
                + np.arange(x, dtype=np.int64)[None, :])

    def read_acc_tile(self, dram_base: int, y: int, x: int, stride: int) -> np.ndarray:
        """``(y, x, lanes)`` int32 accumulator vectors (range already checked)."""
        hi = ((y - 1) * stride + x + dram_base) * self.acc_vec_bytes
        vecs = self.mem[:hi].view("<i4").reshape(-1, self.lanes)
        return vecs[self._row_index(dram_base, y, x, stride)].astype(np.int32)

    def write_out_tile(self, dram_base: int, stride: int, tile: np.ndarray) -> None:
        """Write ``(y, x, lanes)`` narrowed vectors (already of the output dtype)."""
        y, x = tile.shape[:2]
        hi = ((y - 1) * stride + x + dram_base) * self.out_vec_bytes
        vecs = self.mem[:hi].view(self.out_dtype).reshape(-1, self.lanes)
        vecs[self._row_index(dram_base, y, x, stride)] = tile


def csr_regions(regs: dict[int, int], max_regions: int) -> list[RegionWindow]:
    """The region windows currently programmed in the CSR file."""
    out = []
    for i in range(max_regions):
        a = csr.REGION_BASE_ADDR + csr.REGION_STRIDE * i
        out.append(RegionWindow(regs.get(a, 0), regs.get(a + 4, 0), regs.get(a + 8, 0)))
    return out


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
