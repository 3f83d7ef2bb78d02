"""Fixed-point scaling: multiplying an int32 by a real scale with integers only, as gemmlowp and TFLite do.

A real ``scale`` becomes a multiplier and a shift, :func:`fixed_point`: ``scale ~= M * 2**-(31+n)``
with ``M`` an integer in ``[2**30, 2**31)`` (``math.frexp``'s mantissa times ``2**31``, rounded to
nearest; a mantissa that rounds up to ``2**31`` is halved and ``n`` decremented). Then
:func:`rescale` (``R(x, scale)`` in the graph's definitions) on int32 ``x``:

1. if ``n < 0``: ``x <<= -n`` (wrapping at 32 bits) and ``n = 0``;
2. ``t = MULHR(x, M) = (x*M + 2**30) >> 31`` on the exact 64-bit product (the ALU op MULHR);
3. if ``n > 0``: ``(t + 2**(n-1)) >> n``, exactly (no 32-bit wrap: ``|t| < 2**31``), an arithmetic
   shift.

Both roundings are half up (toward +infinity on a tie), so ``R`` is within one LSB of
``round(x * scale)``; ONNX's QuantizeLinear rounds half to even, so on an exact tie (``x*scale``
ending in .5 exactly, e.g. ``scale = 0.5``, ``x = 1``) ``R`` gives the larger neighbour where ONNX may
give the even one.

**Headroom.** Step 2 keeps 31 bits of ``x*M`` below the binary point and drops the rest before step 3
rounds again, so on small ``x`` (an int8 value, a sum of a few) the double rounding is often off by
one from ``round(x * scale)``. When a bound ``B >= |x|`` is known (``R_B``; the graph derives it from
the layer's operands and weights), ``x`` is first shifted left by ``k = min(31 - n, 31 -
B.bit_length())`` bits (``k >= 0``; 0 where ``n <= 0``), which cannot wrap, and step 3 shifts right by
``n + k``: the first rounding then errs by at most ``2**-(n+k+1)`` of an output step, so ``R_B`` is
``x*scale`` rounded half up except within that distance of a tie. Where a tie is reachable at all, ``R_B``
rounds half to even instead ("Ties to even" below).

**Ties to even.** ``x*M / 2**(31+n)`` is a dyadic rational: with ``M = Mo * 2**z`` (``Mo`` odd) it is
``x*Mo / 2**e``, ``e = 31 + n - z``, and it is an exact tie (ends in .5) exactly when ``x`` is an odd
multiple of ``2**(e-1)``. So a tie is reachable for ``|x| <= B`` iff ``e >= 1`` and ``2**(e-1) <= B``
(:func:`tie_plan`); float32 scales have at most 24 significant bits, so ``z >= 7`` and ties need
``e`` small, i.e. "round" scales (0.5, 0.25, 0.75, ...). Where one is reachable and the bound leaves
room, ``R_B`` rounds half to even on the exact rational, as ONNX's QuantizeLinear does
(``np.rint``), in as many ALU ops as half up takes. With ``D = 2**P + 1`` (``P >= e + 1``):

1. ``V = MULHR(x << a, C)``, ``C = Mo*D * 2**(30-e-a)`` (``a`` the smallest left shift making ``C`` an
   int32): ``V = floor(w + 1/2)``, ``w = x*Mo*D / 2**(e+1)`` exactly (MULHR's product is exact), so
   ``V = w + 1/2 - sigma`` with ``sigma = frac(x*Mo/2**(e+1) + 1/2)``, which tells the parity of a
   tie's floor (``sigma = 3/4``: even, round down; ``1/4``: odd, round up);
2. ``y = MULHR(V, c)``, ``c = round(2**32 / D)``: ``2V/D + 1/2 = x*Mo/2**e + 1/2 + (1 - 2 sigma)/D``,
   whose floor is ``x*scale`` rounded half to even: the perturbation ``(1 - 2 sigma)/D`` is negative
   on the even ties, positive on the odd ones and smaller than ``2**-e``, the distance of every other
   value from a tie. The fractional part stays in ``[1/(2D), 1 - 1/(2D)]``, so MULHR's error
   ``V*(cD - 2**32) / (D*2**31)`` leaves the floor alone when ``max|V| * |cD - 2**32| < 2**30``
   (checked with integers). ``P`` is the first that passes; ``P`` dividing 16 makes ``D`` a factor
   of ``2**32 - 1`` and ``|cD - 2**32| = 1``, which lets bounds up to about ``2**(e+15)/Mo`` pass.

Where the bound is too large for that (or unknown, ``R``), ``R_B`` keeps rounding half up.

The allowed scales are :data:`SCALE_MIN` to :data:`SCALE_MAX`: ``n <= 31`` (step 3's shift stays
within a word) and ``n >= -16`` (step 1's left shift is at most 16 bits, so an int8 value or a
16-bit-range sum cannot wrap).
"""

from __future__ import annotations

import functools
import math

import numpy as np

SCALE_MIN = 2.0 ** -32  # n = 31
SCALE_MAX = 2.0 ** 15   # n = -16 (M = 2**30)
N_MIN, N_MAX = -16, 31
M_MIN, M_MAX = 1 << 30, (1 << 31) - 1


def scale_ok(scale: float) -> bool:
    """Whether ``scale`` is a finite float in ``[SCALE_MIN, SCALE_MAX]``."""
    return isinstance(scale, (float, int, np.floating, np.integer)) and not isinstance(scale, bool) \
        and math.isfinite(float(scale)) and SCALE_MIN <= float(scale) <= SCALE_MAX


def fixed_point(scale: float) -> tuple[int, int]:
    """``(M, n)`` with ``scale ~= M * 2**-(31+n)``, ``M`` in ``[2**30, 2**31)`` (module docstring).
    Raises ValueError for a scale outside ``[SCALE_MIN, SCALE_MAX]``."""
    if not scale_ok(scale):
        raise ValueError(f"scale {scale!r} must be a finite number in [2**-32, 2**15]")
    m, e = math.frexp(float(scale))  # scale = m * 2**e, m in [0.5, 1)
    big = round(m * (1 << 31))
    if big == 1 << 31:
        big //= 2
        e += 1
    n = -e
    assert M_MIN <= big <= M_MAX and N_MIN <= n <= N_MAX, (scale, big, n)
    return int(big), int(n)


def fixed_point_arrays(scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`fixed_point` of every element: ``(M, n)`` as int64 arrays of ``scale``'s shape."""
    pairs = [fixed_point(float(s)) for s in np.asarray(scale, dtype=np.float64).ravel()]
    shape = np.shape(scale)
    return (np.array([p[0] for p in pairs], dtype=np.int64).reshape(shape),
            np.array([p[1] for p in pairs], dtype=np.int64).reshape(shape))


def _wrap32(v: np.ndarray) -> np.ndarray:
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def headroom(n: np.ndarray, bound: int | np.ndarray | None) -> np.ndarray:
    """The left shift ``k`` of ``R_B`` (module docstring) for shift(s) ``n`` and bound(s) ``B`` of ``|x|``
    (None: no bound known, ``k = 0``); int64, shaped as ``n`` and ``bound`` broadcast."""
    n = np.asarray(n, dtype=np.int64)
    if bound is None:
        return np.zeros_like(n)
    b = np.asarray(bound, dtype=np.int64)
    bits = np.array([int(v).bit_length() for v in b.ravel()], dtype=np.int64).reshape(b.shape)  # a bound per channel
    k = np.minimum(31 - n, 31 - bits)
    return np.where(n > 0, np.maximum(k, 0), 0)


def rescale_fixed(x: np.ndarray, mult: np.ndarray | int, n: np.ndarray | int,
                  k: np.ndarray | int = 0) -> np.ndarray:
    """``R`` (module docstring) of the int32-range integers ``x`` for the given multiplier(s), shift(s)
    and headroom shift(s) ``k`` (broadcast against ``x``); int64 result."""
    v = np.asarray(x, dtype=np.int64)
    m = np.asarray(mult, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    k = np.asarray(k, dtype=np.int64)
    left = np.maximum(-n, 0) + k
    v = _wrap32(v << left)                   # step 1 (with the headroom; a no-op where n >= 0 and k = 0)
    t = (v * m + (1 << 30)) >> 31            # step 2: MULHR; |v*m| < 2**62
    right = np.maximum(n, 0) + k
    half = np.where(right > 0, np.left_shift(1, np.maximum(right - 1, 0)), 0)
    return (t + half) >> right               # step 3, exact in int64


@functools.lru_cache(maxsize=4096)  # a pure function of integers, asked per channel by the steps and golden
def tie_plan(mult: int, n: int, bound: int | None) -> tuple[int, int, int] | None:
    """For multiplier ``mult`` and shift ``n`` (:func:`fixed_point`) and the bound ``B >= |x|`` (None:
    unknown): ``(a, C, c)`` of the half-to-even steps (module docstring, "Ties to even": a left shift
    by ``a``, MULHR ``C``, MULHR ``c``) when an exact tie is reachable and the steps are exact for every
    ``|x| <= B``; None where no tie is reachable or the bound leaves no room (half up then)."""
    if bound is None:
        return None
    bound = int(bound)
    z = (int(mult) & -int(mult)).bit_length() - 1  # trailing zero bits of M
    odd, e = int(mult) >> z, 31 + int(n) - z
    if e < 1 or bound < (1 << (e - 1)) or e > 30:
        return None  # x*scale is an integer, or no |x| <= B is an odd multiple of 2**(e-1)
    for p in sorted(range(e + 1, 31), key=lambda q: (16 % q != 0, q)):  # divisors of 16 first (module docstring)
        d = (1 << p) + 1
        a = max(0, (odd * d).bit_length() - 1 - e)  # C = odd*d * 2**(30-e-a) < 2**31
        if a > 30 - e or (bound << a) >= 1 << 31:
            continue
        big = (odd * d) << (30 - e - a)
        if big >= 1 << 31:
            continue
        v_max = (bound * odd * d + (1 << e)) >> (e + 1)  # floor(B*Mo*D / 2**(e+1) + 1/2)
        c = ((1 << 33) + d) // (2 * d)  # round(2**32 / D)
        if v_max * abs(c * d - (1 << 32)) < 1 << 30:
            return a, big, c
    return None


def round_half_even(x: np.ndarray, mult: np.ndarray | int, n: np.ndarray | int) -> np.ndarray:
    """``x * mult * 2**-(31+n)`` rounded half to even, exactly (int64 arithmetic, ``|x| < 2**31``)."""
    num = np.asarray(x, dtype=np.int64) * np.asarray(mult, dtype=np.int64)
    d = 31 + np.asarray(n, dtype=np.int64)  # 15..62
    q = num >> d
    rem = num - (q << d)
    half = np.left_shift(np.int64(1), d - 1)
    return q + (rem > half) + ((rem == half) & ((q & 1) == 1))


def rescale(x: np.ndarray, scale: float | np.ndarray, bound: int | np.ndarray | None = None) -> np.ndarray:
    """``R_B(x, scale)`` of int32-range integers ``x`` with ``|x| <= bound`` (None: ``R`` without
    headroom); ``scale`` and ``bound`` floats/ints or arrays broadcast against ``x``; int64 result."""
    mult, n = fixed_point_arrays(np.asarray(scale, dtype=np.float64))
    y = rescale_fixed(x, mult, n, headroom(n, bound))
    if bound is None:
        return y
    m_b, n_b, b_b = np.broadcast_arrays(mult, n, np.asarray(bound, dtype=np.int64))
    tie = tie_channels(m_b.ravel(), n_b.ravel(), b_b.ravel()).reshape(m_b.shape)
    if not tie.any():
        return y
    return np.where(tie, round_half_even(x, m_b, n_b), y)  # the half-to-even steps, exact


def tie_channels(mult: np.ndarray, n: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Which channels (1-D multipliers, shifts, bounds) of one layer round half to even: those with a
    :func:`tie_plan`, unless another channel has no rounding shift (``max(n, 0) + k = 0``; the layer
    then rounds half up throughout, :func:`alu_steps`)."""
    tie = np.array([tie_plan(int(m), int(s), int(v)) is not None for m, s, v in zip(mult, n, bound)], dtype=bool)
    right = np.maximum(n, 0) + headroom(n, bound)
    if tie.any() and (right[~tie] < 1).any():
        tie[:] = False
    return tie


# ---- R as ALU steps -------------------------------------------------------------------------------
def alu_steps(scale: float | np.ndarray, bound: int | np.ndarray | None = None) -> list[tuple[str, np.ndarray]]:
    """``R_B(x, scale)`` (``R`` when ``bound`` is None) as a sequence of lane-wise ALU ops ``(op name,
    operand per channel)``, exact for every int32 ``x`` with ``|x| <= bound`` (``scale`` a float, or one
    per channel; ``bound`` an int or one per channel). With ``k`` the headroom and ``s = max(n, 0) + k``:

    * ``SHR`` by ``-L`` (a left shift by ``L = max(-n, 0) + k``), when some channel has ``L > 0``;
    * ``MULHR`` by ``M``;
    * when every channel has ``s >= 1``: ``MULHR`` by ``2**(31-s)``, which is
      ``(t*2**(31-s) + 2**30) >> 31 = (t + 2**(s-1)) >> s`` exactly (one op, no overflow);
      when only some do: ``SHR`` by ``s-1``, ``ADD 1``, ``SHR 1`` (0, 0, 0 where ``s = 0``), which is
      ``((t >> (s-1)) + 1) >> 1 = (t + 2**(s-1)) >> s`` exactly, without the sum's overflow.

    Where :func:`tie_plan` finds an exact tie reachable (and room for the steps), the channel rounds
    half to even instead: SHR by ``-a`` (when some channel shifts), MULHR ``C``, MULHR ``c`` (module
    docstring); the other channels of the layer run the same three ops with their ``-L``, ``M`` and
    ``2**(31-s)``. A layer where some channel ties and another has ``s = 0`` rounds half up throughout.
    """
    mult, n = fixed_point_arrays(np.atleast_1d(np.asarray(scale, dtype=np.float64)))
    b = None if bound is None else np.broadcast_to(np.asarray(bound, dtype=np.int64), n.shape)
    k = headroom(n, b)
    left = np.maximum(-n, 0) + k
    right = np.maximum(n, 0) + k
    plans = [None] * n.size if b is None else [tie_plan(int(m), int(s), int(v)) for m, s, v in zip(mult, n, b)]
    tie = np.zeros(n.shape, dtype=bool) if b is None else tie_channels(mult, n, b)  # a plain channel without a
    # rounding shift has no MULHR to share with the tie channels: then half up for all
    steps: list[tuple[str, np.ndarray]] = []
    if tie.any():  # the tie channels' steps; the others' left shift, MULHR M and MULHR rounding
        a = np.array([p[0] if p is not None else 0 for p in plans], dtype=np.int64)
        shl = np.where(tie, a, left)
        if (shl > 0).any():
            steps.append(("SHR", -shl))
        steps.append(("MULHR", np.where(tie, [p[1] if p is not None else 0 for p in plans], mult)))
        rnd = np.left_shift(1, np.where(tie, 0, 31 - np.maximum(right, 1)))
        steps.append(("MULHR", np.where(tie, [p[2] if p is not None else 0 for p in plans], rnd)))
        return steps
    if (left > 0).any():
        steps.append(("SHR", -left))
    steps.append(("MULHR", mult))
    if (right >= 1).all():
        steps.append(("MULHR", np.left_shift(1, 31 - right)))
    elif (right >= 1).any():
        pos = right >= 1
        steps += [("SHR", np.where(pos, right - 1, 0)), ("ADD", pos.astype(np.int64)),
                  ("SHR", pos.astype(np.int64))]
    return steps


def run_steps(x: np.ndarray, steps: list[tuple[str, np.ndarray]], axis: int = -1) -> np.ndarray:
    """Apply :func:`alu_steps`' ops to int32 ``x`` with the ALU's numpy semantics, each operand
    broadcast along ``axis`` (the channel axis); int32 result."""
    from hw.alu_numpy import ALU_NUMPY  # the ALU's own semantics, for checking the steps

    v = np.asarray(x, dtype=np.int32)
    for op, operand in steps:
        shape = [1] * v.ndim
        shape[axis] = -1
        s = np.broadcast_to(operand.astype(np.int32).reshape(shape) if operand.size > 1 else
                            operand.astype(np.int32).reshape([1] * v.ndim), v.shape)
        v = ALU_NUMPY[op](v, s).astype(np.int32)
    return v
