"""The operation records intrinsics produce, and the accumulator indices each one touches.

Both halves of an intrinsic receive the same record; the compiler turns the traced
records into ISA instructions once the DRAM layout is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from compiler.tensor import Tensor

# An accumulator index set: a contiguous slice or an index array.
Index = Union[slice, np.ndarray]


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
        y0, y1, x0, x1 = self.pad
        return (y0 + self.rows + y1) * (x0 + self.cols + x1)


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


def contiguous(io: int, ii: int, fo: int, fi: int) -> bool:
    """True when ``i*fo + j*fi`` in loop order is 0, 1, 2, ... (a plain run of vectors)."""
    if io * ii <= 1:
        return True
    if ii == 1:
        return fo == 1
    if io == 1:
        return fi == 1
    return fi == 1 and fo == ii


def broadcast(io: int, ii: int, fo: int, fi: int) -> bool:
    """True when every iteration uses the same vector."""
    return (io == 1 or fo == 0) and (ii == 1 or fi == 0)


def affine(base: int, io: int, ii: int, fo: int, fi: int) -> Index:
    """Indices ``base + i*fo + j*fi`` in loop order, as a slice when they are contiguous."""
    if contiguous(io, ii, fo, fi):
        return slice(base, base + io * ii)
    return (base + np.arange(io, dtype=np.int64)[:, None] * fo + np.arange(ii, dtype=np.int64)[None, :] * fi).ravel()


def accesses(op: Op) -> tuple[list[Index], list[Index]]:
    """(reads, writes): the accumulator indices ``op`` reads and writes."""
    if isinstance(op, LoadOp):
        return [], [slice(op.sram_base, op.sram_base + op.sram_vectors)]
    if isinstance(op, StoreOp):
        return [slice(op.sram_base, op.sram_base + op.rows * op.cols)], []
    if isinstance(op, AluOp):
        if op.iter_out * op.iter_in == 0:
            return [], []
        dst = affine(op.dst_base, op.iter_out, op.iter_in, op.dst_factor_out, op.dst_factor_in)
        reads = [] if op.op == "MOV" else [dst]
        if op.imm is None:
            reads.append(affine(op.src_base, op.iter_out, op.iter_in, op.src_factor_out, op.src_factor_in))
        return reads, [dst]
    return [], []
