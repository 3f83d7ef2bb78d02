"""Integer GELU on the vector ALU: I-BERT's second-order polynomial of erf, elementwise.

The float function is the one the shipped transformers are trained with
(:func:`compiler.networks.transformer.gelu`): ``gelu(x) = x/2 (1 + L(x / sqrt 2))``, ``L(u) = sign(u)
(a (min(|u|, -b) + b)**2 + 1)``, ``a = -0.2888``, ``b = -1.769``. The operator ``gelu`` takes int32
values ``A`` (real value ``A * in_scale``, ``|A| <= in_bound``) and writes int8 ``C`` (real value
``C * out_scale``). With the constants of :func:`gelu_constants` (all from the scales and the bound),
the definition, which :func:`gelu_reference` restates in plain int64 numpy, is:

1. ``c = SHR(min(|A|, BC) - BC, CS)``  (``BC = round(-b sqrt 2 / in_scale)``; ``CS`` keeps ``|c|``
   below ``2**15``, a left shift when negative);
2. ``P = MULHR(c * c, K) + 2**28``  (``a (min(|u|, -b) + b)**2 + 1`` in Q28, ``K`` negative);
3. ``g = clip(A, 1) * P + 2**28``  (``1 + L`` in Q28, in ``[0, 2**29]``);
4. ``y = MULHR(A << LX, g)``  (``LX`` puts ``in_bound`` just below ``2**31``);
5. ``C = clip((MULHR(y, M) + 2**(N-1)) >> N, -128, 127)``  (``M * 2**-(31+N)`` the rest of the scale,
   ``in_scale 2**(2-LX) / out_scale``, ``M`` in ``[2**30, 2**31)``).

Twenty ALU instructions a tile, nothing but add, multiply, MULHR, shifts, min, max and clip: no
lookup table.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from compiler import dsl as S
from compiler.ops import Operator, const_vector, my_tiles, spread_tile
from compiler.tensor import Tensor

GELU_A, GELU_B = -0.2888, -1.769   # I-BERT's polynomial erf (compiler.networks.transformer's)
ONE_Q28 = 1 << 28
NCONSTS = 5                        # BC, K, 2**28, M, the rounding term


def gelu_constants(in_scale: float, out_scale: float, in_bound: int) -> dict[str, int]:
    """The integer constants of the module docstring (``BC``, ``CS``, ``K``, ``LX``, ``M``, ``N``) for
    values ``A * in_scale`` with ``|A| <= in_bound`` and outputs ``C * out_scale``; ValueError for
    scales that leave no 31-bit multiplier or shift."""
    if not (in_scale > 0 and out_scale > 0) or isinstance(in_bound, bool) or not 1 <= in_bound < 1 << 30:
        raise ValueError(f"in_scale and out_scale must be positive and in_bound 1..2**30-1, got {in_scale}, "
                         f"{out_scale}, {in_bound}")
    bc = int(round(-GELU_B * math.sqrt(2.0) / in_scale))
    if not 1 <= bc < 1 << 30:
        raise ValueError(f"in_scale {in_scale} puts GELU's knee at {bc} input steps, outside 1..2**30")
    cs = bc.bit_length() - 15
    k = int(round(GELU_A * in_scale ** 2 * 4.0 ** cs * 2.0 ** 58))
    lx = 31 - in_bound.bit_length()
    while True:
        mant, exp = math.frexp(in_scale * 2.0 ** (2 - lx) / out_scale)   # scale = mant * 2**exp
        m, n = int(round(mant * 2 ** 31)), -exp
        if m == 1 << 31:
            m, n = 1 << 30, n - 1
        if n <= 30 or lx == 0:
            break
        lx -= 1
    if not 1 <= n <= 30:
        raise ValueError(f"the output scale {out_scale} against the input's {in_scale} needs a shift of {n}, "
                         f"outside 1..30")
    return {"BC": bc, "CS": cs, "K": k, "LX": lx, "M": m, "N": n}


@S.kernel
def gelu(A: Tensor, C: Tensor, in_scale: float = 1 / 64, out_scale: float = 1 / 32, in_bound: int = 1 << 12,
         tile: int | None = None) -> None:
    """C = int8 GELU of int32 A (I-BERT's polynomial; module docstring), tile by tile through the
    accumulator (two halves of a value slot and a scratch slot, loads overlapping the ALU passes)."""
    cfg = S.config()
    try:
        k = gelu_constants(in_scale, out_scale, in_bound)
    except ValueError as e:
        raise S.error("in_scale", str(e)) from None
    if tuple(A.shape) != tuple(C.shape):
        raise S.error("C", f"shape {tuple(C.shape)} differs from A's {tuple(A.shape)}")
    fit = (cfg.acc_depth - NCONSTS) // 6
    if tile is None:
        tile = spread_tile(cfg, A.nvec, fit)
    if isinstance(tile, bool) or not isinstance(tile, (int, np.integer)) or not 1 <= tile <= fit:
        raise S.error("tile", f"{tile!r} must be an integer 1..{fit} (two halves of three slots fit the "
                              f"{cfg.acc_depth}-vector accumulator on config '{cfg.name}')")
    tile = int(tile)
    acc = S.acc
    bc, kk, one, mm, rnd = (acc[6 * tile + j] for j in range(NCONSTS))
    tiles = range(0, A.nvec, tile)
    mine = my_tiles(cfg, len(tiles))
    if not mine:
        return  # this core builds and runs nothing
    for view, value in zip((bc, kk, one, mm, rnd), (k["BC"], k["K"], ONE_Q28, k["M"], 1 << (k["N"] - 1))):
        const_vector(view, value)
    for i in mine:
        v0, h = tiles[i], i & 1
        t = min(tile, A.nvec - v0)
        x, c, sg = (acc[(3 * h + j) * tile: (3 * h + j) * tile + t] for j in range(3))
        S.load(x, A, offset=v0)
        _tile(x, c, sg, k, bc, kk, one, mm, rnd)
        S.store(C, x, offset=v0)


def _tile(x: Any, c: Any, sg: Any, k: dict[str, int], bc: Any, kk: Any, one: Any, mm: Any, rnd: Any) -> None:
    """The GELU of one tile in place in ``x``; ``c`` and ``sg`` scratch slots (module docstring steps)."""
    # 1. c = (min(|x|, BC) - BC) >> CS
    S.mov(c, x)
    S.mul(c, -1)
    S.max(c, x)
    S.min(c, bc)
    S.sub(c, bc)
    S.shr(c, k["CS"])
    # 2. P = MULHR(c^2, K) + 1
    S.mul(c, c)
    S.mulhr(c, kk)
    S.add(c, one)
    # 3. g = sign(x) P + 1
    S.mov(sg, x)
    S.clip(sg, 1)
    S.mul(c, sg)
    S.add(c, one)
    # 4. y = MULHR(x << LX, g)
    S.shr(x, -k["LX"])
    S.mulhr(x, c)
    # 5. C = clip((MULHR(y, M) + 2**(N-1)) >> N)
    S.mulhr(x, mm)
    S.add(x, rnd)
    S.shr(x, k["N"])
    S.max(x, -128)
    S.min(x, 127)


def _mulhr(u: np.ndarray, v: np.ndarray | int) -> np.ndarray:
    """(u * v + 2**30) >> 31 on int64 operands whose product fits int64."""
    return (u * v + (1 << 30)) >> 31


def gelu_reference(A: np.ndarray, in_scale: float = 1 / 64, out_scale: float = 1 / 32, in_bound: int = 1 << 12,
                   **_: object) -> np.ndarray:
    """The integer GELU of the module docstring in plain int64 numpy (no ALU engine), elementwise, int32."""
    k = gelu_constants(in_scale, out_scale, in_bound)
    x = np.asarray(A, dtype=np.int64)
    c = np.minimum(np.abs(x), k["BC"]) - k["BC"]
    c = c >> k["CS"] if k["CS"] >= 0 else c * (1 << -k["CS"])
    p = _mulhr(c * c, k["K"]) + ONE_Q28
    g = np.sign(x) * p + ONE_Q28
    y = _mulhr(x * (1 << k["LX"]), g)
    out = (_mulhr(y, k["M"]) + (1 << (k["N"] - 1))) >> k["N"]
    return np.clip(out, -128, 127).astype(np.int32)


def gelu_float(x: np.ndarray) -> np.ndarray:
    """I-BERT's GELU of real ``x`` (float64), written from its formula."""
    u = np.asarray(x, dtype=np.float64) / math.sqrt(2.0)
    erf = np.sign(u) * (GELU_A * (np.minimum(np.abs(u), -GELU_B) + GELU_B) ** 2 + 1.0)
    return 0.5 * np.asarray(x, dtype=np.float64) * (1.0 + erf)


GELU = Operator("gelu", gelu, ("A",), "C", gelu_reference,
                doc="C = int8 GELU of int32 A by I-BERT's polynomial erf (in_scale, out_scale, in_bound)")
