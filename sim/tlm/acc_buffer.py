"""The accumulator buffer (``hw/rtl/acc_buffer.v``): ACC_DEPTH vectors of LANES int32 lanes.

LOAD and COMPUTE write it, COMPUTE and STORE read it; it keeps its contents across runs
(START clears the units, not the SRAM). Every index an instruction touches is checked
against the depth before the instruction moves anything (:meth:`AccBuffer.range_error`).
"""

from __future__ import annotations

import numpy as np

from hw import csr


class AccBuffer:
    """The buffer's contents, ``mem`` (``(depth, lanes)`` int32, written in place by the units)."""

    def __init__(self, depth: int, lanes: int):
        self.mem = np.zeros((depth, lanes), dtype=np.int32)

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
