"""The fast vector-ALU engine (numpy), shared by the golden path and the TLM.

One of the two ALU engines, on purpose: this one applies a whole ALU instruction (a
two-level affine loop over accumulator vectors) with as few numpy calls as it can, for
the golden path (``compiler/intrinsics.py``'s Python halves, on ``(depth, lanes)`` or
batched ``(depth, batch, lanes)`` int32 arrays) and the TLM (``sim/tlm``). The other is
the plain, lane-by-lane interpreter in the ISS (``sim/iss.py``), written there on its own; tests
hold this one to it and to the scalar reference semantics of :mod:`hw.isa_semantics`.

Semantics (docs/microarch.md "Data semantics"): ``for i < iter_out: for j < iter_in:
acc[d] = op(acc[d], s)`` with ``d = dst_base + i*dst_factor_out + j*dst_factor_in`` and
``s`` the immediate or ``acc[src_base + i*src_factor_out + j*src_factor_in]``, strictly in
loop order (a write is seen by later reads), every result wrapped to 32 bits. The loop is
vectorised when no iteration reads or rewrites a vector an earlier one wrote (proved by
arithmetic for the usual progressions, by index bookkeeping otherwise), else run in loop
order one vector at a time.

API: ``ALU_NUMPY`` (op name -> ``f(x, s)`` returning the result), ``ALU_INPLACE`` (op name ->
``f(x, s)`` writing ``x``), :func:`alu_op` (by code or name), :func:`apply_imm` (an immediate over a
whole tile, in place), :func:`run_alu_loop` (the engine,
loop given field by field, ``imm`` None for a buffer operand) and :func:`run_alu` (an ISA
``Alu`` instruction).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hw.isa import ALU_OP_NAMES
from hw.isa_semantics import INT32_MIN, affine_indices


# ---- lane-wise semantics: x an int32 array, s an int (immediate) or an int32 array ----------------
def _shr(x: np.ndarray, s: Any) -> np.ndarray:
    """SHR: s >= 0 arithmetic right shift by min(s, 31); s < 0 left shift by -s, 0 from 32 on."""
    if isinstance(s, int):
        if s >= 0:
            return x >> (s if s < 31 else 31)
        return x << -s if -s < 32 else np.zeros_like(x)
    s = np.asarray(s, dtype=np.int32)
    left = np.negative(s)  # wraps for INT_MIN, caught by the s <= -32 test below
    r = np.where(s >= 0, x >> np.clip(s, 0, 31), x << np.clip(left, 0, 31))
    return np.where(s <= -32, 0, r).astype(np.int32, copy=False)


def _clip(x: np.ndarray, s: Any) -> np.ndarray:
    """CLIP: min(max(x, -s), s), with -s wrapping at 32 bits (s = INT_MIN gives INT_MIN)."""
    if isinstance(s, int):
        lo = -s if s != INT32_MIN else s
        return np.minimum(np.maximum(x, lo), s)
    s = np.asarray(s, dtype=np.int32)
    return np.minimum(np.maximum(x, np.negative(s)), s)


def _mov(x: np.ndarray, s: Any) -> np.ndarray:
    return np.broadcast_to(np.asarray(s, dtype=np.int32), x.shape)


def _mulhr(x: np.ndarray, s: Any) -> np.ndarray:
    """MULHR: (x * s + 2**30) >> 31 on the exact 64-bit product, wrapped to 32 bits. |x*s| <= 2**62,
    so the int64 sum cannot overflow."""
    p = np.multiply(x, s, dtype=np.int64)
    p += 1 << 30
    p >>= 31
    return p.astype(np.int32)


def _clz(x: np.ndarray, s: Any) -> np.ndarray:
    """CLZ: the leading zeros of s's 32-bit pattern (32 for 0, 0 for a negative s); x unused. The
    float64 exponent of the unsigned pattern is its bit length (every uint32 is exact in float64)."""
    u = np.asarray(s, dtype=np.int64) & 0xFFFFFFFF
    _, bits = np.frexp(u.astype(np.float64))
    return np.broadcast_to((32 - bits).astype(np.int32), x.shape)


# The numpy semantics of each ALU op on int32 lanes (int32 ufuncs wrap at 32 bits, MUL keeps the low bits).
ALU_NUMPY: dict[str, Callable[[np.ndarray, Any], np.ndarray]] = {
    "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "MIN": np.minimum, "MAX": np.maximum,
    "SHR": _shr, "CLIP": _clip, "MOV": _mov, "MULHR": _mulhr, "CLZ": _clz,
}


# The same, updating the destination ``x`` in place. ``s`` is an int (immediate) or an array that is
# either ``x`` itself or does not overlap it in a way that makes a later iteration read an earlier
# write (the engine checks that).
def _ufunc_inplace(f: np.ufunc) -> Callable[[np.ndarray, Any], None]:
    def run(x: np.ndarray, s: Any) -> None:
        f(x, s, out=x)
    return run


def _shr_inplace(x: np.ndarray, s: Any) -> None:
    if type(s) is int:
        if s >= 0:
            np.right_shift(x, s if s < 31 else 31, out=x)
        elif s > -32:
            np.left_shift(x, -s, out=x)
        else:
            x[...] = 0
    else:
        x[...] = _shr(x, s)


def _clip_inplace(x: np.ndarray, s: Any) -> None:
    if type(s) is int:
        np.maximum(x, -s if s != INT32_MIN else s, out=x)
        np.minimum(x, s, out=x)
    else:
        x[...] = _clip(x, s)  # s may alias x: compute the whole result before writing


def _mov_inplace(x: np.ndarray, s: Any) -> None:
    x[...] = s


def _mulhr_inplace(x: np.ndarray, s: Any) -> None:
    x[...] = _mulhr(x, s)  # s may alias x: compute the whole result before writing


def _clz_inplace(x: np.ndarray, s: Any) -> None:
    x[...] = _clz(x, s)


ALU_INPLACE: dict[str, Callable[[np.ndarray, Any], None]] = {
    "ADD": _ufunc_inplace(np.add), "SUB": _ufunc_inplace(np.subtract), "MUL": _ufunc_inplace(np.multiply),
    "MIN": _ufunc_inplace(np.minimum), "MAX": _ufunc_inplace(np.maximum),
    "SHR": _shr_inplace, "CLIP": _clip_inplace, "MOV": _mov_inplace, "MULHR": _mulhr_inplace,
    "CLZ": _clz_inplace,
}


def alu_op(op: int | str, x: np.ndarray, s: Any) -> np.ndarray:
    """``op(x, s)`` lane-wise on int32 arrays (``s`` an int or an array), wrapped to 32 bits."""
    name = op if isinstance(op, str) else ALU_OP_NAMES.get(op)
    fn = ALU_NUMPY.get(name) if name is not None else None
    if fn is None:
        raise ValueError(f"unknown ALU op {op}")
    return np.asarray(fn(x, s), dtype=np.int32)


# numpy's int32 minimum/maximum against a scalar take a slow loop (several times an ADD's time);
# against an array of the same shape they are as fast as ADD. So with a ``filled`` cache, big tiles of
# MIN, MAX and CLIP with an immediate compare against an array full of it (same semantics).
_FILL_MIN = 4096  # elements; below this the scalar form is as fast
Filled = Callable[[tuple[int, ...], int], np.ndarray]


def _minmax_imm(filled: Filled, opname: str, x: np.ndarray, imm: int) -> None:
    if opname == "MAX":
        np.maximum(x, filled(x.shape, imm), out=x)
    elif opname == "MIN":
        np.minimum(x, filled(x.shape, imm), out=x)
    else:  # CLIP: min(max(x, -imm), imm), -imm wrapping at 32 bits
        np.maximum(x, filled(x.shape, -imm if imm != INT32_MIN else imm), out=x)
        np.minimum(x, filled(x.shape, imm), out=x)


def apply_imm(x: np.ndarray, opname: str, imm: int, filled: Filled | None = None) -> None:
    """``x = op(x, imm)`` in place, every destination vector distinct (a whole tile)."""
    if filled is not None and x.size >= _FILL_MIN and opname in ("MIN", "MAX", "CLIP"):
        _minmax_imm(filled, opname, x, imm)
    else:
        ALU_INPLACE[opname](x, imm)


def _progression(n_out: int, n_in: int, base: int, f_out: int, f_in: int) -> tuple[int, int] | None:
    """``(base, step)`` when the loop's indices, in loop order, are ``base + k*step``; else None."""
    if n_in == 1:
        return base, f_out
    if n_out == 1 or f_out == n_in * f_in:
        return base, f_in
    return None


# ---- the engine ------------------------------------------------------------------------------------
def run_alu_loop(acc: np.ndarray, opname: str, dst_base: int, src_base: int, iter_out: int, iter_in: int,
                 dst_factor_out: int, dst_factor_in: int, src_factor_out: int, src_factor_in: int,
                 imm: int | None, filled: Filled | None = None) -> None:
    """Apply one ALU loop to ``acc`` in place (indices already range checked).

    ``opname`` is the op's name (``"ADD"`` ...), ``imm`` the immediate or None for a buffer
    operand; ``filled(shape, value)``, when given, returns a cached array full of ``value``
    (faster MIN/MAX/CLIP immediates on big tiles).
    """
    n = iter_out * iter_in
    if n == 0:
        return
    dp = _progression(iter_out, iter_in, dst_base, dst_factor_out, dst_factor_in)
    if dp is not None and (dp[1] > 0 or n == 1):  # every destination distinct: a basic slice
        step = dp[1] if n > 1 else 1
        view = acc[dst_base: dst_base + (n - 1) * step + 1: step]  # a view: written in place
        if imm is not None:
            apply_imm(view, opname, imm, filled)
            return
        src = _source_slice(acc, iter_out, iter_in, src_base, src_factor_out, src_factor_in, dst_base, step, n)
        if src is not None:
            ALU_INPLACE[opname](view, src)
            return
    _run_general(acc, opname, dst_base, src_base, iter_out, iter_in, dst_factor_out, dst_factor_in,
                 src_factor_out, src_factor_in, imm)


def _source_slice(acc: np.ndarray, iter_out: int, iter_in: int, s0: int, sfo: int, sfi: int,
                  d0: int, ds: int, n: int) -> np.ndarray | None:
    """The source operand as a view or one broadcast vector when iteration k, reading s_k, cannot see a
    write of an earlier iteration (d_0 .. d_{k-1}, the progression ``d0 + m*ds``); else None."""
    sp = _progression(iter_out, iter_in, s0, sfo, sfi)
    if sp is None:
        return None
    ss = sp[1] if n > 1 else 1
    if ss == 0:  # one vector for every iteration: safe unless it is written before the last read
        k = s0 - d0
        if k >= 0 and k % ds == 0 and k // ds < n - 1:
            return None
        return acc[s0: s0 + 1]
    if ss < 0:
        return None
    s_hi, d_hi = s0 + (n - 1) * ss, d0 + (n - 1) * ds
    # Same step and the source at or after the destination: s_k >= d_k > d_m for every m < k.
    # Else safe only when the source lies wholly before the first write or after the last one.
    if not ((ss == ds and s0 >= d0) or s_hi < d0 or s0 > d_hi):
        return None
    return acc[s0: s_hi + 1: ss]


# Iterations whose indices are held at once: a loop of up to 2**28 iterations keeps its memory bounded.
_CHUNK = 1 << 20
# Applications of one repeated iteration tried before the loop is run as it is (see _repeat).
_REPEAT_TRIES = 64


def _run_general(acc: np.ndarray, opname: str, dst_base: int, src_base: int, iter_out: int, iter_in: int,
                 dst_factor_out: int, dst_factor_in: int, src_factor_out: int, src_factor_in: int,
                 imm: int | None) -> None:
    """Any affine loop: gathered and vectorised when hazard-free, else strictly in loop order; whole outer
    iterations at a time (the chunks run in loop order, so each sees the ones before)."""
    fn = ALU_NUMPY[opname]
    n = iter_out * iter_in
    if (iter_out == 1 or dst_factor_out == 0) and (iter_in == 1 or dst_factor_in == 0) and \
            (imm is not None or (iter_out == 1 or src_factor_out == 0) and (iter_in == 1 or src_factor_in == 0)):
        _repeat(acc, opname, dst_base, src_base, n, imm)  # every iteration the same vectors
        return
    rows = max(1, _CHUNK // iter_in)
    for o in range(0, iter_out, rows):
        n_o = min(rows, iter_out - o)
        d = affine_indices(dst_base + o * dst_factor_out, n_o, iter_in, dst_factor_out, dst_factor_in)
        s = None if imm is not None else \
            affine_indices(src_base + o * src_factor_out, n_o, iter_in, src_factor_out, src_factor_in)
        if _hazard_free(d, s, acc.shape[0]):
            acc[d] = fn(acc[d], imm if s is None else acc[s])
            continue
        for k in range(len(d)):  # each application sees the previous ones
            acc[d[k]] = fn(acc[d[k]], imm if s is None else acc[s[k]])


def _repeat(acc: np.ndarray, opname: str, d: int, s: int, n: int, imm: int | None) -> None:
    """``acc[d] = op(acc[d], acc[s] or imm)`` applied ``n`` times: ADD and SUB of another vector (or an
    immediate) in closed form (``x +- n*y`` wrapped to 32 bits); any op once the vector stops changing (MIN,
    MAX, CLIP, MOV at once, shifts and squarings within a few dozen); else one application after another."""
    fn = ALU_NUMPY[opname]
    y = np.asarray(imm, np.int32) if imm is not None else acc[s]
    if opname in ("ADD", "SUB") and (imm is not None or s != d):
        k = np.uint64(n % (1 << 32)) * y.astype(np.int64).astype(np.uint64)
        x = acc[d].astype(np.int64).astype(np.uint64)
        acc[d] = ((x + k) if opname == "ADD" else (x - k)).astype(np.uint32).view(np.int32)
        return
    for done in range(n):
        x = acc[d].copy()
        new = fn(x, imm if imm is not None else acc[s])
        acc[d] = new
        if done < _REPEAT_TRIES and np.array_equal(new, x):  # a fixed point: the rest change nothing
            return


def _hazard_free(d: np.ndarray, s: np.ndarray | None, depth: int) -> bool:
    """No destination written twice and no source read after the loop wrote it."""
    never = np.iinfo(np.int64).max
    first_write = np.full(depth, never, dtype=np.int64)
    first_write[d[::-1]] = np.arange(len(d) - 1, -1, -1)  # smallest iteration writing each index
    if np.count_nonzero(first_write != never) != len(d):
        return False
    return s is None or bool(np.all(first_write[s] >= np.arange(len(s))))


def run_alu(acc: np.ndarray, insn: Any) -> None:
    """Apply one ISA ``Alu`` instruction to ``acc`` (``(depth, lanes)`` int32) in place (range checked)."""
    run_alu_loop(acc, ALU_OP_NAMES[insn.alu_op], insn.dst_base, insn.src_base, insn.iter_out, insn.iter_in,
                 insn.dst_factor_out, insn.dst_factor_in, insn.src_factor_out, insn.src_factor_in,
                 insn.imm if insn.use_imm else None)
