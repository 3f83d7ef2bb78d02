"""The vector ALU's semantics on the accumulator buffer, with numpy.

One instruction is applied as a whole: vectorised when the loop has no
read-after-write hazard (every destination index distinct and no source read of a
vector written earlier in the loop), else strictly in loop order (the sequential
semantics the hardware has: a write is visible to the next iteration's reads).
"""

from __future__ import annotations

import numpy as np

from hw.isa import ALU_OPS, Alu

_I32_MIN = -(1 << 31)


def _wrap32(v: np.ndarray) -> np.ndarray:
    return v.astype(np.int32)  # int64 -> int32 keeps the low 32 bits (two's complement)


def alu_op(op: int, x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``op(x, s)`` lane-wise on int32 arrays, wrapped to 32 bits (docs/microarch.md)."""
    x64 = x.astype(np.int64)
    s64 = s.astype(np.int64)
    if op == ALU_OPS["ADD"]:
        r = x64 + s64
    elif op == ALU_OPS["SUB"]:
        r = x64 - s64
    elif op == ALU_OPS["MUL"]:
        r = (x64 * s64) & 0xFFFFFFFF  # low 32 bits (int64 product of two int32 cannot overflow)
    elif op == ALU_OPS["MIN"]:
        r = np.minimum(x64, s64)
    elif op == ALU_OPS["MAX"]:
        r = np.maximum(x64, s64)
    elif op == ALU_OPS["SHR"]:
        right = x64 >> np.minimum(np.maximum(s64, 0), 31)
        left = (x64 << np.minimum(np.maximum(-s64, 0), 32)) & 0xFFFFFFFF
        r = np.where(s64 >= 0, right, left)
    elif op == ALU_OPS["CLIP"]:
        lo = _wrap32(-s64).astype(np.int64)  # -INT_MIN wraps to INT_MIN
        r = np.minimum(np.maximum(x64, lo), s64)
    elif op == ALU_OPS["MOV"]:
        r = np.broadcast_to(s64, x64.shape)
    else:  # rejected at dispatch
        raise ValueError(f"unknown ALU op {op}")
    return _wrap32(r)


def alu_indices(insn: Alu) -> tuple[np.ndarray, np.ndarray]:
    """Destination and source vector indices in loop order."""
    i = np.arange(insn.iter_out, dtype=np.int64)[:, None]
    j = np.arange(insn.iter_in, dtype=np.int64)[None, :]
    d = (insn.dst_base + i * insn.dst_factor_out + j * insn.dst_factor_in).ravel()
    s = (insn.src_base + i * insn.src_factor_out + j * insn.src_factor_in).ravel()
    return d, s


def run_alu(acc: np.ndarray, insn: Alu) -> None:
    """Apply one ALU instruction to ``acc`` (``(depth, lanes)`` int32) in place (range checked)."""
    n = insn.iter_out * insn.iter_in
    if n == 0:
        return
    d, s = alu_indices(insn)
    if insn.use_imm:
        imm = np.full((1, acc.shape[1]), insn.imm, dtype=np.int32)
        if len(np.unique(d)) == n:
            acc[d] = alu_op(insn.alu_op, acc[d], imm)
            return
        for k in range(n):  # repeated destinations: each application sees the previous one
            acc[d[k]] = alu_op(insn.alu_op, acc[d[k]], imm[0])
        return
    if _hazard_free(d, s, acc.shape[0]):
        acc[d] = alu_op(insn.alu_op, acc[d], acc[s])
        return
    for k in range(n):
        acc[d[k]] = alu_op(insn.alu_op, acc[d[k]], acc[s[k]])


def _hazard_free(d: np.ndarray, s: np.ndarray, depth: int) -> bool:
    """No destination written twice and no source read after the loop wrote it."""
    first_write = np.full(depth, np.iinfo(np.int64).max, dtype=np.int64)
    first_write[d[::-1]] = np.arange(len(d) - 1, -1, -1)  # smallest iteration writing each index
    if np.count_nonzero(first_write != np.iinfo(np.int64).max) != len(d):
        return False
    return bool(np.all(first_write[s] >= np.arange(len(s))))
