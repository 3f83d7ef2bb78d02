"""The vector ALU's semantics on the accumulator buffer, with numpy.

One instruction is applied as a whole: vectorised when the loop has no
read-after-write hazard (every destination index distinct and no source read of a
vector written earlier in the loop), else strictly in loop order (the sequential
semantics the hardware has: a write is visible to the next iteration's reads).

The usual loop nests (a whole tile, in place or from a disjoint tile) walk each
operand as one arithmetic progression; those are applied with basic slices and
proved hazard-free by arithmetic, so a long ALU instruction costs a few numpy
calls and no index arrays (the TLM's cost per instruction, not per vector).
"""

from __future__ import annotations

import numpy as np

from hw.isa import ALU_OPS, Alu

_I32_MIN = -(1 << 31)


def _wrap32(v: np.ndarray) -> np.ndarray:
    return v.astype(np.int32)  # int64 -> int32 keeps the low 32 bits (two's complement)


def alu_op(op: int, x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``op(x, s)`` lane-wise on int32 arrays, wrapped to 32 bits (docs/microarch.md)."""
    # int32 array arithmetic wraps in numpy as the hardware does (MUL keeps the low 32 bits);
    # only the shifts and CLIP's negation need the wider type.
    if op == ALU_OPS["ADD"]:
        return np.add(x, s, dtype=np.int32)
    if op == ALU_OPS["SUB"]:
        return np.subtract(x, s, dtype=np.int32)
    if op == ALU_OPS["MUL"]:
        return np.multiply(x, s, dtype=np.int32)
    if op == ALU_OPS["MIN"]:
        return np.minimum(x, s, dtype=np.int32)
    if op == ALU_OPS["MAX"]:
        return np.maximum(x, s, dtype=np.int32)
    if op == ALU_OPS["MOV"]:
        return np.broadcast_to(s, np.broadcast_shapes(x.shape, s.shape)).astype(np.int32)
    x64 = x.astype(np.int64)
    s64 = s.astype(np.int64)
    if op == ALU_OPS["SHR"]:
        right = x64 >> np.minimum(np.maximum(s64, 0), 31)
        left = (x64 << np.minimum(np.maximum(-s64, 0), 32)) & 0xFFFFFFFF
        r = np.where(s64 >= 0, right, left)
    elif op == ALU_OPS["CLIP"]:
        lo = _wrap32(-s64).astype(np.int64)  # -INT_MIN wraps to INT_MIN
        r = np.minimum(np.maximum(x64, lo), s64)
    else:  # rejected at dispatch
        raise ValueError(f"unknown ALU op {op}")
    return _wrap32(r)


# Ops whose int32 ufunc is the hardware's op (wrapping), applied in place on a slice.
_IN_PLACE = {ALU_OPS["ADD"]: np.add, ALU_OPS["SUB"]: np.subtract, ALU_OPS["MUL"]: np.multiply,
             ALU_OPS["MIN"]: np.minimum, ALU_OPS["MAX"]: np.maximum}


def alu_indices(insn: Alu) -> tuple[np.ndarray, np.ndarray]:
    """Destination and source vector indices in loop order."""
    i = np.arange(insn.iter_out, dtype=np.int64)[:, None]
    j = np.arange(insn.iter_in, dtype=np.int64)[None, :]
    d = (insn.dst_base + i * insn.dst_factor_out + j * insn.dst_factor_in).ravel()
    s = (insn.src_base + i * insn.src_factor_out + j * insn.src_factor_in).ravel()
    return d, s


def _imm_row(acc: np.ndarray, insn: Alu) -> np.ndarray:
    """The immediate as one vector (every lane), the operand of an immediate ALU op."""
    return np.full((1, acc.shape[1]), insn.imm, dtype=np.int32)


def _progression(n_out: int, n_in: int, base: int, f_out: int, f_in: int) -> tuple[int, int] | None:
    """``(base, step)`` when the loop's indices, in loop order, are ``base + k*step``; else None."""
    if n_in == 1:
        return base, f_out
    if n_out == 1 or f_out == n_in * f_in:
        return base, f_in
    return None


def _as_slice(base: int, step: int, n: int) -> slice:
    return slice(base, base + (n - 1) * step + 1, step)


def _run_sliced(acc: np.ndarray, insn: Alu, n: int) -> bool:
    """The vectorised path for progressions with a positive step (every index distinct);
    False when it does not apply (the general path decides)."""
    dp = _progression(insn.iter_out, insn.iter_in, insn.dst_base, insn.dst_factor_out, insn.dst_factor_in)
    if dp is None or (dp[1] <= 0 and n > 1):
        return False
    dst = _as_slice(dp[0], max(dp[1], 1), n)
    if insn.use_imm:
        src = _imm_row(acc, insn)
    else:
        sp = _progression(insn.iter_out, insn.iter_in, insn.src_base, insn.src_factor_out, insn.src_factor_in)
        if sp is None or (sp[1] < 0 and n > 1):
            return False
        # Iteration k reads s_k and wrote d_0..d_{k-1} before: safe when the source is the
        # destination itself (s_k = d_k, distinct from every earlier d) or lies wholly before
        # the first write or after the last one.
        s_lo, s_hi = sp[0], sp[0] + (n - 1) * sp[1]
        d_lo, d_hi = dp[0], dp[0] + (n - 1) * max(dp[1], 1)
        if sp != dp and not (s_hi < d_lo or s_lo > d_hi):
            return False
        src = acc[_as_slice(sp[0], sp[1], n)] if sp[1] > 0 else acc[sp[0]:sp[0] + 1]
    view = acc[dst]  # a basic slice: a view, so the ufuncs below write acc in place
    ufunc = _IN_PLACE.get(insn.alu_op)
    if ufunc is not None:
        ufunc(view, src, out=view)
    else:
        view[...] = alu_op(insn.alu_op, view, src)
    return True


def run_alu(acc: np.ndarray, insn: Alu) -> None:
    """Apply one ALU instruction to ``acc`` (``(depth, lanes)`` int32) in place (range checked)."""
    n = insn.iter_out * insn.iter_in
    if n == 0 or _run_sliced(acc, insn, n):
        return
    d, s = alu_indices(insn)
    if insn.use_imm:
        imm = _imm_row(acc, insn)
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
