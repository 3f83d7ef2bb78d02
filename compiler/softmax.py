"""Integer softmax on the vector ALU (I-BERT style), with CLZ for the reciprocal of the sum.

The operator ``softmax`` takes int32 logits ``A`` of shape ``(n, lanes)`` in Q8 (value
``A / 256``) and writes ``C = int8(min(round-ish(128 * softmax(A / 256, axis=0)), 127))``:
each lane is one row, its ``n`` vectors the row's elements (the ALU works lane by lane, so a
softmax along the vectors needs no cross-lane step; ``S^T = K Q^T`` gives attention scores in
this layout). Every step is a whole-row ALU instruction; the definition, which the numpy
reference :func:`softmax_reference` restates in plain int64 arithmetic, is:

1. ``x = max(A - max_j A, -CLAMP)``  (exp below ``-16`` rounds to 0 in Q7 anyway);
2. ``z = (-x * ZMUL) >> 22``  (``floor(-x / ln 2)``, ``ZMUL = 2**22 / (256 ln 2)`` truncated);
3. ``q = (x << 22) + z * LN2_Q30 + B_Q30``  (``p + b`` in Q30 with ``p = x + z ln 2`` in
   ``(-ln 2, 0]``; the sum wraps on the way but its true value fits);
4. ``e = (MULHR(MULHR(q, q), A_Q31) + C_Q29) >> (z + 7)``  (I-BERT's ``a (p + b)**2 + c`` in Q29,
   then ``2**-z`` and down to Q22: a row of up to 511 elements sums below ``2**31``);
5. ``s = sum_j e``; ``k = CLZ(s)``; ``m = s << (k - 1)`` in ``[2**30, 2**31)`` (``f = m / 2**31``);
6. ``y0 = Y0_A - MULHR(m, Y0_B)`` (``48/17 - 32/17 f`` in Q29), then three Newton steps
   ``y += MULHR(2**31 - 4 MULHR(m, y), y)`` (``y (2 - f y)``; relative error ``17**-8``);
7. ``r = y >> (23 - k)`` (``2**38 / s``); ``C = min(MULHR(e, r), 127)``.

CLZ is what makes step 5 one instruction: without it the normalizing shift of a value in
``[2**21, 2**31)`` is a search of ten compare-and-shift rounds (docs/microarch.md "Compute").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from compiler import dsl as S
from compiler.ops import Operator, const_vector
from compiler.tensor import AccView, Tensor

IN_FRAC_BITS = 8           # logits in Q8
OUT_SCALE = 128            # probabilities in Q7 (1.0 -> 128, clipped to 127)
CLAMP = 16 << IN_FRAC_BITS  # exp(-16) * 128 < 2**-16: clamped logits lose nothing visible
ZMUL = int(2 ** 22 / (256 * math.log(2)))  # floor(-x / ln 2) = (-x * ZMUL) >> 22 (16-bit immediate)
LN2_Q30 = round(math.log(2) * 2 ** 30)
B_Q30 = round(1.353 * 2 ** 30)    # I-BERT's second-order exp on (-ln 2, 0]: a (p + b)**2 + c
A_Q31 = round(0.3585 * 2 ** 31)
C_Q29 = round(0.344 * 2 ** 29)
Y0_A = round(48 / 17 * 2 ** 29)   # the minimax linear start of 1/f on [0.5, 1), Q29
Y0_B = round(32 / 17 * 2 ** 29)
NEWTON_STEPS = 3
INT_MIN = -(1 << 31)
MAX_ROW = 511              # 511 * 2**22 < 2**31: the Q22 sum cannot overflow

CONSTS = (LN2_Q30, B_Q30, A_Q31, C_Q29, Y0_A, Y0_B, INT_MIN)


NORMALIZE = ("clz", "search")  # how step 5 finds k: the CLZ op, or a pure-ALU binary search (to compare)


def rows_needed(n: int, normalize: str = "clz") -> int:
    """Accumulator vectors the kernel uses for a row of ``n`` elements (three row-long temporaries,
    five one-vector ones, the constants, and two more for the search)."""
    return 3 * n + 5 + len(CONSTS) + (2 if normalize == "search" else 0)


@S.kernel
def softmax(A: Tensor, C: Tensor, n: int = 16, normalize: str = "clz") -> None:
    """C = int8 Q7 softmax of the Q8 logits A along axis 0 (``n`` elements per lane-row); ``normalize``
    "search" finds the sum's leading zeros without CLZ (same outputs, to measure what CLZ buys)."""
    cfg = S.config()
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= MAX_ROW:
        raise S.error("n", f"{n!r} must be an integer 1..{MAX_ROW}")
    n = int(n)
    for t in (A, C):
        if tuple(t.shape) != (n, cfg.lanes):
            raise S.error(t.name, f"shape {tuple(t.shape)} is not (n, lanes) = ({n}, {cfg.lanes})")
    if normalize not in NORMALIZE:
        raise S.error("normalize", f"{normalize!r} is not one of {', '.join(NORMALIZE)}")
    if rows_needed(n, normalize) > cfg.acc_depth:
        raise S.error("n", f"a row of {n} needs {rows_needed(n, normalize)} accumulator vectors, the buffer "
                           f"has {cfg.acc_depth} on config '{cfg.name}'")
    for _ in S.core_range(1):  # several cores: the first does the one row group
        _rows(n, A, C, normalize)


def _clz_by_search(k: AccView, s: AccView, v: AccView, t: AccView) -> None:
    """k = the leading zeros of the positive s without CLZ: five rounds of 16/8/4/2/1 bits, each
    testing the top bits of v (s shifted so far) and shifting them out when zero (9 instructions)."""
    S.mov(v, s)
    S.mov(k, 0)
    for w in (16, 8, 4, 2, 1):
        S.mov(t, v)
        S.shr(t, 32 - w)   # the top w bits (negative once v's top bit is set)
        S.mul(t, t)        # nonzero iff they are; |t| <= 2**15 keeps the square in range
        S.min(t, 1)        # 1: some bit set, 0: all zero
        S.mul(t, -w)
        S.add(t, w)        # w when the top w bits are zero, else 0
        S.add(k, t)
        S.mul(t, -1)
        S.shr(v, t)        # shift them out (a negative amount shifts left)


def _rows(n: int, A: Tensor, C: Tensor, normalize: str) -> None:
    """The softmax of one (n, lanes) row group, from A's DRAM to C's (module docstring steps)."""
    x = softmax_in_acc(0, n, normalize, lambda view: S.load(view, A))
    S.store(C, x)


def softmax_in_acc(base: int, n: int, normalize: str = "clz", fill: Any = None) -> AccView:
    """The softmax steps on the ``n`` Q8 logit vectors at ``acc[base:base+n]`` (one row per lane), using
    ``rows_needed(n, normalize)`` vectors from ``base``; ``fill(view)``, when given, puts the logits
    there after the constants are built (a LOAD overlaps them). Returns the view holding the Q7
    probabilities (int32, in ``[0, 127]``). The logits of a row must lie within ``2**31 - 1`` of each
    other (|logit| < 2**30 is enough): step 1's ``x - max`` is a 32-bit lane subtraction, and wraps
    beyond that."""
    acc = S.acc
    x, z, t = acc[base:base + n], acc[base + n:base + 2 * n], acc[base + 2 * n:base + 3 * n]
    top = base + 3 * n
    mx, sm, mm, y, p = (acc[top + k] for k in range(5))
    ln2, b, a, c, y0a, y0b, imin = (acc[top + 5 + k] for k in range(len(CONSTS)))
    for view, value in zip((ln2, b, a, c, y0a, y0b, imin), CONSTS):
        const_vector(view, value)
    if fill is not None:
        fill(x)
    # 1. subtract the row maximum, clamp
    S.mov(mx, acc[base])
    if n > 1:
        S.max(mx, x, iters=(1, n), dst_factors=(0, 0), src_factors=(0, 1))
    S.sub(x, mx)
    S.max(x, -CLAMP)
    # 2. z = floor(-x / ln 2)
    S.mov(z, x)
    S.mul(z, -ZMUL)
    S.shr(z, 22)
    # 3. q = p + b in Q30 (t), through x = z * ln 2
    S.mov(t, x)
    S.shr(t, -22)
    S.mov(x, z)
    S.mul(x, ln2)
    S.add(t, x)
    S.add(t, b)
    # 4. e = (a q^2 + c) >> (z + 7), in x
    S.mov(x, t)
    S.mulhr(x, t)
    S.mulhr(x, a)
    S.add(x, c)
    S.add(z, 7)
    S.shr(x, z)
    # 5. the sum and its normalization by CLZ
    S.mov(sm, acc[base])
    if n > 1:
        S.add(sm, acc[base + 1:base + n], iters=(1, n - 1), dst_factors=(0, 0), src_factors=(0, 1))
    if normalize == "clz":
        S.clz(y, sm)
    else:
        _clz_by_search(y, sm, acc[top + 5 + len(CONSTS)], acc[top + 6 + len(CONSTS)])
    S.mov(p, y)
    S.mul(p, -1)
    S.add(p, 1)
    S.mov(mm, sm)
    S.shr(mm, p)       # m = s << (k - 1)
    S.mov(sm, y)
    S.mul(sm, -1)
    S.add(sm, 23)      # the final shift 23 - k, kept in the sum's vector
    # 6. y = 1/f in Q29: linear start, Newton steps
    S.mov(y, mm)
    S.mulhr(y, y0b)
    S.mul(y, -1)
    S.add(y, y0a)
    for _ in range(NEWTON_STEPS):
        S.mov(p, mm)
        S.mulhr(p, y)
        S.mul(p, -4)
        S.add(p, imin)
        S.mulhr(p, y)
        S.add(y, p)
    # 7. r = 2**38 / s; C = min(MULHR(e, r), 127)
    S.shr(y, sm)
    S.mulhr(x, y)
    S.min(x, OUT_SCALE - 1)
    return x


def _mulhr(u: np.ndarray, v: np.ndarray | int) -> np.ndarray:
    """(u * v + 2**30) >> 31 on int64 operands whose product fits int64."""
    return (u * v + (1 << 30)) >> 31


def softmax_reference(A: np.ndarray, n: int = 16, normalize: str = "clz", **_: object) -> np.ndarray:
    """The integer softmax of the module docstring in plain int64 numpy (no ALU engine): ``A`` flat
    or ``(n, lanes)``, the result ``(n * lanes,)`` int32 before the int8 cast (either ``normalize``)."""
    x = np.asarray(A, dtype=np.int64).reshape(n, -1)
    x = np.maximum(x - x.max(axis=0), -CLAMP)
    z = (-x * ZMUL) >> 22
    q = x * (1 << 22) + z * LN2_Q30 + B_Q30      # exact: no wrap needed in int64
    e = (_mulhr(_mulhr(q, q), A_Q31) + C_Q29) >> (z + 7)
    s = e.sum(axis=0)
    k = np.array([32 - int(v).bit_length() for v in s], dtype=np.int64)
    m = s << (k - 1)
    y = Y0_A - _mulhr(m, Y0_B)
    for _ in range(NEWTON_STEPS):
        y = y + _mulhr((1 << 31) - 4 * _mulhr(m, y), y)
    r = y >> (23 - k)
    return np.minimum(_mulhr(e, r), OUT_SCALE - 1).astype(np.int32).reshape(-1)


def softmax_float(A: np.ndarray, n: int = 16) -> np.ndarray:
    """The real softmax the kernel approximates, in output LSBs (``128 * softmax(A / 256, axis=0)``)."""
    v = np.asarray(A, dtype=np.float64).reshape(n, -1) / (1 << IN_FRAC_BITS)
    w = np.exp(v - v.max(axis=0))
    return OUT_SCALE * w / w.sum(axis=0)


# Not in compiler.ops.OPERATORS, whose operators are all elementwise (tiled, lockstep): the examples
# reach it by name (compiler.examples.ROW_OPERATORS).
SOFTMAX = Operator("softmax", softmax, ("A",), "C", softmax_reference,
                   doc="C = int8 Q7 softmax of Q8 logits along axis 0 (exp by shift and "
                       "polynomial, 1/sum by CLZ and Newton steps)")
