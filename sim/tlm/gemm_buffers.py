"""The GEMM core's operand buffers: input (INP), weight (WGT) and micro-op (UOP), with the
valid bits of the weight and micro-op entries (the RTL's SRAMs of the same names beside
``hw/rtl/acc_buffer.v``; docs/microarch.md "GEMM").

LOAD writes them (:meth:`GemmBuffers.write`, one numpy assignment per instruction), GEMM
reads them (``sim/tlm/gemm.py`` hands them to ``hw.gemm_numpy.run_gemm``). No other unit
touches them, so none of their ports is shared and they have no port plan: a LOAD into
INP, WGT or UOP never makes the compute unit wait. The contents are kept across runs like
every SRAM; the valid bits (one per micro-op and per weight block) are cleared at START and
soft reset (:meth:`GemmBuffers.new_run`) and set when LOAD writes the entry, data or padding.
INP and ACC have none.

Entries as the models hold them (``hw/gemm_numpy.py``): ``inp`` (INP_DEPTH, LANES) int8,
``wgt`` (WGT_DEPTH, BLOCK, BLOCK) int8 (row o = the weights of output lane o, DRAM byte
order), ``uops`` (UOP_DEPTH, 3) int64 (acc, inp, wgt), from the low 48 bits of each 16-byte
DRAM word.
"""

from __future__ import annotations

import numpy as np

from hw.isa import UOP_FIELD_BITS


class GemmBuffers:
    """INP, WGT and UOP of one accelerator, their contents and valid bits."""

    def __init__(self, cfg) -> None:
        self.inp = np.zeros((cfg.inp_depth, cfg.lanes), dtype=np.int8)
        self.wgt = np.zeros((cfg.wgt_depth, cfg.block, cfg.block), dtype=np.int8)
        self.uops = np.zeros((cfg.uop_depth, 3), dtype=np.int64)
        self.uop_valid = np.zeros(cfg.uop_depth, dtype=bool)
        self.wgt_valid = np.zeros(cfg.wgt_depth, dtype=bool)

    def new_run(self) -> None:
        """START or soft reset: every micro-op and weight block is invalid again (contents stay)."""
        self.uop_valid[:] = False
        self.wgt_valid[:] = False

    def depth(self, buf: str) -> int:
        """Entries of buffer ``buf`` ("INP", "WGT" or "UOP")."""
        return len(self._array(buf))

    def write(self, buf: str, first: int, entries: np.ndarray) -> None:
        """LOAD writes ``entries`` (raw DRAM bytes, one row of ``elem_bytes`` uint8 per entry,
        zeros for padding) into ``buf`` from entry ``first`` on, and marks them valid."""
        n = len(entries)
        if not n:
            return
        raw = np.ascontiguousarray(entries, dtype=np.uint8)
        end = first + n
        if buf == "INP":
            self.inp[first:end] = raw.view(np.int8).reshape(n, -1)
        elif buf == "WGT":
            self.wgt[first:end] = raw.view(np.int8).reshape(self.wgt[first:end].shape)
            self.wgt_valid[first:end] = True
        elif buf == "UOP":
            self.uops[first:end] = uop_fields(raw)
            self.uop_valid[first:end] = True
        else:
            raise ValueError(f"no GEMM operand buffer named {buf!r}")

    def _array(self, buf: str) -> np.ndarray:
        return {"INP": self.inp, "WGT": self.wgt, "UOP": self.uops}[buf]


def uop_fields(raw: np.ndarray) -> np.ndarray:
    """``(n, 3)`` int64 (acc, inp, wgt) of ``n`` micro-op words given as ``(n, 16)`` uint8: the
    three little-endian 16-bit fields from bit 0 (``hw.isa.decode_uops``, vectorised)."""
    nbytes = UOP_FIELD_BITS // 8
    fields = np.ascontiguousarray(raw[:, :3 * nbytes]).view("<u2").reshape(len(raw), 3)
    return fields.astype(np.int64)
