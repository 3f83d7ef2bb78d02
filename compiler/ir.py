"""The operation records intrinsics produce, and the accumulator indices each one touches.

Both halves of an intrinsic receive the same record; the compiler turns the traced
records into ISA instructions once the DRAM layout is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from compiler.tensor import Tensor
from hw.isa_semantics import AccIndex, Accesses, alu_access, load_access, padded_tile_shape, store_access

# An accumulator index set: a contiguous slice or an index array.
Index = AccIndex


@dataclass(slots=True)  # not frozen: frozen __init__ is slow on the golden path's hot loop
class LoadOp:
    """DRAM ``tensor`` vectors -> accumulator, 2-D with stride and zero padding."""

    tensor: Tensor
    offset: int  # first vector of the tile in the tensor
    sram_base: int
    rows: int
    cols: int
    stride: int
    pad: tuple[int, int, int, int]  # y_pad_0, y_pad_1, x_pad_0, x_pad_1

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


@dataclass(slots=True)  # not frozen: frozen __init__ is slow on the golden path's hot loop
class SyncOp:
    """An explicit barrier: everything before completes before anything after starts."""


Op = Union[LoadOp, StoreOp, AluOp, SyncOp]


def op_name(op: "Op") -> str:
    """The intrinsic name of a record (``load``, ``add``, ...)."""
    if isinstance(op, AluOp):
        return op.op.lower()
    return type(op).__name__[:-2].lower()


def broadcast(io: int, ii: int, fo: int, fi: int) -> bool:
    """True when every iteration uses the same vector."""
    return (io == 1 or fo == 0) and (ii == 1 or fi == 0)


def accesses(op: Op) -> Accesses:
    """(reads, writes): the accumulator indices ``op`` reads and writes, those of the instruction it
    lowers to (:mod:`hw.isa_semantics` writes them once, for the models and the compiler)."""
    if isinstance(op, LoadOp):
        return load_access(op.sram_base, *padded_tile_shape(op.rows, op.cols, *op.pad))
    if isinstance(op, StoreOp):
        return store_access(op.sram_base, op.rows, op.cols)
    if isinstance(op, AluOp):
        return alu_access(op.op, op.dst_base, op.src_base, op.iter_out, op.iter_in, op.dst_factor_out,
                          op.dst_factor_in, op.src_factor_out, op.src_factor_in, op.imm is not None)
    return [], []
