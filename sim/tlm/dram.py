"""The DRAM behind the AXI port: its bytes and typed vector views (no RTL block: the testbench's
``testbench/hdl/dram_model.v`` holds it for the RTL).

The TLM moves an instruction's data in one numpy operation; when it happens and what the
port does meanwhile is the units' and the arbiter's business (``sim/tlm/axi_arbiter.py``).
"""

from __future__ import annotations

import numpy as np


class Dram:
    """The DRAM byte array (little-endian) with typed vector views."""

    def __init__(self, nbytes: int, lanes: int, out_width: int):
        self.nbytes = nbytes
        self.mem = np.zeros(nbytes, dtype=np.uint8)
        self.lanes = lanes
        self.acc_vec_bytes = lanes * 4
        self.out_dtype = np.dtype("<i1") if out_width == 8 else np.dtype("<i2")
        self.out_vec_bytes = lanes * self.out_dtype.itemsize

    def load_image(self, image: bytes | bytearray | np.ndarray, addr: int = 0) -> None:
        """Copy ``image`` into DRAM at byte ``addr``."""
        data = np.frombuffer(bytes(image), dtype=np.uint8) if not isinstance(image, np.ndarray) \
            else image.view(np.uint8).ravel()
        if addr < 0 or addr + len(data) > self.nbytes:
            raise ValueError(f"DRAM image of {len(data)} bytes at 0x{addr:x} does not fit {self.nbytes} bytes")
        self.mem[addr:addr + len(data)] = data

    # ---- data movement (numpy) -------------------------------------------------------------
    def _row_index(self, dram_base: int, y: int, x: int, stride: int) -> np.ndarray:
        return (dram_base + np.arange(y, dtype=np.int64)[:, None] * stride
                + np.arange(x, dtype=np.int64)[None, :])

    def read_tile(self, dram_base: int, y: int, x: int, stride: int, elem_bytes: int) -> np.ndarray:
        """``(y, x, elem_bytes)`` uint8: the raw bytes of ``y`` rows of ``x`` entries of
        ``elem_bytes`` each, rows ``stride`` entries apart (range already checked); a view of the
        DRAM when the rows are contiguous, so the caller copies it before the DRAM changes."""
        hi = ((y - 1) * stride + x + dram_base) * elem_bytes
        if y == 1 or stride == x:  # the rows are one run of bytes: a view, no index arrays
            return self.mem[dram_base * elem_bytes:hi].reshape(y, x, elem_bytes)
        entries = self.mem[:hi].reshape(-1, elem_bytes)
        return entries[self._row_index(dram_base, y, x, stride)]

    def write_out_tile(self, dram_base: int, stride: int, tile: np.ndarray) -> None:
        """Write ``(y, x, lanes)`` narrowed vectors (already of the output dtype)."""
        y, x = tile.shape[:2]
        hi = ((y - 1) * stride + x + dram_base) * self.out_vec_bytes
        vecs = self.mem[:hi].view(self.out_dtype).reshape(-1, self.lanes)
        if y == 1 or stride == x:  # the rows are one run of vectors: a slice, no index arrays
            vecs[dram_base:dram_base + y * x] = tile.reshape(y * x, self.lanes)
            return
        vecs[self._row_index(dram_base, y, x, stride)] = tile
