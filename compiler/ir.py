"""The operation records intrinsics produce, and the buffer entries each one touches.

Both halves of an intrinsic receive the same record; the compiler turns the traced
records into ISA instructions once the DRAM layout is known. An access names a *space*
and an index set in it: an on-chip buffer (``"ACC"``, ``"INP"``, ``"WGT"``, ``"UOP"``,
indices are entries) or a DRAM tensor (``"dram:<region>"``, indices are the tensor's
vectors), so dependences through DRAM (a scratch tensor stored, then loaded back) are
found like those through a buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from compiler.tensor import Tensor
from hw.isa_semantics import AccIndex, alu_access, load_access, padded_tile_shape, store_access

# An index set in one space: a contiguous slice or an index array.
Index = AccIndex
# (space, index set) pairs: what an operation reads (value used) and writes.
SpaceAccess = list[tuple[str, Index]]


@dataclass(slots=True)  # not frozen: frozen __init__ is slow on the golden path's hot loop
class LoadOp:
    """DRAM ``tensor`` entries -> on-chip buffer ``buf``, 2-D with stride and zero padding.

    ``offset``, ``cols`` and ``stride`` count entries of ``buf`` (``HwConfig.elem_bytes``)."""

    tensor: Tensor
    offset: int  # first entry of the tile in the tensor
    sram_base: int
    rows: int
    cols: int
    stride: int
    pad: tuple[int, int, int, int]  # y_pad_0, y_pad_1, x_pad_0, x_pad_1
    buf: str = "ACC"

    @property
    def sram_vectors(self) -> int:
        rows, cols = padded_tile_shape(self.rows, self.cols, *self.pad)
        return rows * cols


@dataclass(slots=True)  # not frozen: frozen __init__ is slow on the golden path's hot loop
class StoreOp:
    """Accumulator vectors -> DRAM ``tensor`` with the narrowing cast, 2-D with stride."""

    tensor: Tensor
    offset: int
    sram_base: int
    rows: int
    cols: int
    stride: int


@dataclass(slots=True)  # not frozen: frozen __init__ is slow on the golden path's hot loop
class AluOp:
    """One ALU instruction: ``op`` over a two-level affine loop; ``imm`` None means a buffer operand."""

    op: str
    dst_base: int
    src_base: int
    iter_out: int
    iter_in: int
    dst_factor_out: int
    dst_factor_in: int
    src_factor_out: int
    src_factor_in: int
    imm: int | None


@dataclass(slots=True)
class GemmOp:
    """One GEMM instruction: micro-ops ``[uop_begin, uop_end)`` in a two-level affine loop (field
    names as :class:`hw.isa.Gemm`, so :mod:`hw.gemm_numpy` reads the record directly)."""

    reset: bool
    uop_begin: int
    uop_end: int
    iter_out: int
    iter_in: int
    acc_factor_out: int
    acc_factor_in: int
    inp_factor_out: int
    inp_factor_in: int
    wgt_factor_out: int
    wgt_factor_in: int


@dataclass(slots=True)  # not frozen: frozen __init__ is slow on the golden path's hot loop
class SyncOp:
    """An explicit barrier: everything before completes before anything after starts."""


@dataclass(slots=True)
class BarrierOp:
    """``S.barrier()`` on several cores: the BARRIER instruction (every core meets there; this core's
    loads and stores drain first, so everything before it completes before anything after starts)."""


Op = Union[LoadOp, StoreOp, AluOp, GemmOp, SyncOp, BarrierOp]


def op_name(op: "Op") -> str:
    """The intrinsic name of a record (``load``, ``add``, ...)."""
    if isinstance(op, AluOp):
        return op.op.lower()
    return type(op).__name__[:-2].lower()


def broadcast(io: int, ii: int, fo: int, fi: int) -> bool:
    """True when every iteration uses the same vector."""
    return (io == 1 or fo == 0) and (ii == 1 or fi == 0)


def dram_rows(tensor: Tensor, offset: int, rows: int, cols: int, stride: int, entry_bytes: int) -> np.ndarray:
    """The tensor's vectors (``lanes`` elements each) a 2-D DMA tile of ``rows`` x ``cols`` entries of
    ``entry_bytes`` bytes touches, row r starting ``offset + r*stride`` entries in (sorted, unique)."""
    vec = tensor.lanes * tensor.bits // 8
    starts = (offset + np.arange(rows, dtype=np.int64) * stride) * entry_bytes
    lo, hi = starts // vec, -(-(starts + cols * entry_bytes) // vec)
    if rows == 0 or cols == 0:
        return np.zeros(0, dtype=np.int64)
    width = int((hi - lo).max())
    idx = lo[:, None] + np.arange(width, dtype=np.int64)[None, :]
    return np.unique(idx[idx < hi[:, None]])


def dram_space(tensor: Tensor) -> str:
    """The dependence space of a DRAM tensor."""
    return f"dram:{tensor.region}"


def accesses(op: Op) -> tuple[SpaceAccess, SpaceAccess]:
    """(reads, writes): the (space, indices) ``op`` reads and writes in the on-chip buffers, those of the
    instruction it lowers to (:mod:`hw.isa_semantics` writes them once, for the models and the compiler).
    DRAM is not included (the trace adds it, :func:`dram_rows`); a GEMM's accesses depend on the micro-op buffer's
    contents and come from the trace (``compiler.trace``)."""
    if isinstance(op, LoadOp):
        r, w = load_access(op.sram_base, *padded_tile_shape(op.rows, op.cols, *op.pad))
        return [], [(op.buf, i) for i in w]
    if isinstance(op, StoreOp):
        r, w = store_access(op.sram_base, op.rows, op.cols)
        return [("ACC", i) for i in r], []
    if isinstance(op, AluOp):
        r, w = alu_access(op.op, op.dst_base, op.src_base, op.iter_out, op.iter_in, op.dst_factor_out,
                          op.dst_factor_in, op.src_factor_out, op.src_factor_in, op.imm is not None)
        return [("ACC", i) for i in r], [("ACC", i) for i in w]
    return [], []
