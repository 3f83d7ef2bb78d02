"""The operator library: elementwise int32 -> int8 operators built on the intrinsics.

Every operator tiles its tensors (flattened to whole vectors) through four regions of
the accumulator buffer: two ping-pong *input* halves (one slot per operand) and two
ping-pong *output* halves. Tile i loads its operands into input half ``i % 2``,
computes in place in its first operand slot, MOVes the result into output half
``i % 2`` and stores it from there. So the load of tile i+1 (input half (i+1)%2),
the compute of tile i (input half i%2 -> output half i%2) and the store of tile i-1
(output half (i-1)%2) touch disjoint vectors, and the tokens the compiler derives
(:mod:`compiler.deps`) let the three overlap: load i+1 waits only for compute i-1
(c2l), compute i+1 for load i+1 (l2c) and store i-1 (s2c), store i for compute i
(c2s); loads and stores never depend on each other.

Tails (a last tile shorter than the others, a last vector partly padding) need
nothing special: DRAM tensors are whole vectors, zero-padded. Constants wider than
the 16-bit immediate live in vectors at the top of the buffer, built once with
MOV / SHR / ADD.

Each :class:`Operator` pairs the kernel with a plain numpy reference of the same
function, used to check the golden path. An operator that is one ALU op over whole
tensors (``add`` .. ``max``, their ``_imm`` forms, ``shr_imm``, ``clip_imm``, ``mov_imm``,
``shift``) takes that op's lane semantics from :mod:`hw.alu_numpy` rather than restating
them (the ISA's meaning is written once, and tests/test_alu_engines.py holds that engine
to the scalar definition of :mod:`hw.isa_semantics`); its reference then checks the
operator's lowering (tiling, wide constants built from 16-bit immediates, MOV, STORE,
the narrowing cast). Operators with a meaning of their own (relu, clip, requantization,
the fused chain) keep a reference written as that mathematics, not as ALU ops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from compiler import dsl as S
from compiler.fixed_point import alu_steps, rescale, scale_ok
from compiler.kernel import Kernel
from compiler.tensor import AccView, Tensor
from hw.alu_numpy import alu_op as alu_lanes
from hw.isa_semantics import wrap32

IMM_MIN, IMM_MAX = -(1 << 15), (1 << 15) - 1
BINARY_OPS = ("add", "sub", "mul", "min", "max", "mulhr")
IMM_OPS = ("add", "sub", "mul", "min", "max", "shr", "clip", "mov", "mulhr")


def _wrap32(v: int) -> int:
    """A Python or numpy integer wrapped to 32 bits, as the ALU wraps (:func:`hw.isa_semantics.wrap32`)."""
    return wrap32(int(v))


def _fits_imm(v: int) -> bool:
    return IMM_MIN <= v <= IMM_MAX


def const_vector(view: AccView, value: int) -> None:
    """Fill the one-vector ``view`` with the 32-bit ``value`` using 16-bit immediates."""
    v = _wrap32(value)
    if _fits_imm(v):
        S.mov(view, v)
        return
    lo = ((v & 0xFFFF) ^ 0x8000) - 0x8000  # low half, sign-extended
    hi = (((v - lo) >> 16) + (1 << 15)) % (1 << 16) - (1 << 15)  # high half, wrapped to 16 bits
    S.mov(view, hi)
    S.shr(view, -16)  # a negative SHR shifts left
    if lo:
        S.add(view, lo)


def alu_op(name: str) -> Any:
    """The ALU intrinsic called ``name`` (add, sub, ..., mov)."""
    return getattr(S, name)


def tile_fit(cfg: Any, operands: int, consts: int = 0) -> int:
    """The largest tile (vectors) that fits: two input halves of ``operands`` slots and two
    output halves of one slot each, below ``consts`` constant vectors."""
    return (cfg.acc_depth - consts) // (2 * (operands + 1))


def spread_tile(cfg: Any, nvec: int, fit: int) -> int:
    """The default tile (vectors) of an elementwise pass over ``nvec`` vectors whose largest tile is ``fit``:
    ``fit``, or, on several cores whose port has read bursts in flight, a smaller tile that gives every
    core one when ``fit`` would give fewer tiles than cores (their loads then overlap on the port)."""
    cores = cfg.num_cores
    if cores > 1 and cfg.dram_reads_in_flight > 1 and -(-nvec // fit) < cores:
        return max(1, -(-nvec // cores))
    return fit


def my_tiles(cfg: Any, count: int) -> range:
    """This core's tiles of ``count`` independent elementwise tiles: its :func:`compiler.dsl.core_range`
    share. With one read burst at a time on the port and fewer tiles than cores, every tile goes to core 0
    instead, whose loads of one tile overlap the ALU passes of the one before (one tile per core cannot,
    and these port-bound tiles would only queue on the port); with reads in flight the cores' loads overlap
    each other, so the tiles are shared even when some cores get none."""
    if count >= cfg.num_cores or cfg.dram_reads_in_flight > 1:
        return S.core_range(count)
    return range(count) if S.core_id() == 0 else range(0)


def tiled(inputs: Sequence[Tensor], out: Tensor, body: Callable[[list[AccView], list[AccView]], None],
          tile: int | None = None, consts: Sequence[int] = ()) -> None:
    """Run ``body(slots, const_views)`` over every tile of the elementwise operands.

    ``slots[k]`` holds input k's tile in the tile's input half; ``body`` leaves the result
    in ``slots[0]`` (in place), which is then MOVed to the tile's output half and stored
    from there. ``const_views[k]`` is one vector holding ``consts[k]`` in every lane.
    ``tile`` is the number of vectors per tile (default: the largest that fits).

    Layout (``k`` operands, tile ``T``): input half h at ``h*k*T`` (slot j at ``+j*t``
    for a tile of ``t <= T`` vectors), output half h at ``2*k*T + h*T``, constants
    from ``2*(k+1)*T``.
    """
    cfg = S.config()
    for t in inputs:
        if t.shape != out.shape:
            raise S.error(t.name, f"shape {t.shape} differs from output '{out.name}' shape {out.shape} "
                                  f"(elementwise operators do not broadcast)")
    k = len(inputs)
    fit = tile_fit(cfg, k, len(consts))
    if fit < 1:
        raise S.error("tile", f"{k} operands and {len(consts)} constants do not fit the "
                              f"{cfg.acc_depth}-vector accumulator buffer")
    if tile is None:
        tile = spread_tile(cfg, out.nvec, fit)
    if isinstance(tile, bool) or not isinstance(tile, (int, np.integer)) or not 1 <= tile <= fit:
        raise S.error("tile", f"{tile!r} vectors per tile do not fit: the {cfg.acc_depth}-vector accumulator "
                              f"holds two input halves of {k} x {fit} vectors and two output halves of {fit} "
                              f"on config '{cfg.name}' (tile must be 1..{fit})")
    tile = int(tile)
    acc = S.acc
    out_base = 2 * k * tile
    n = out.nvec
    tiles = range(0, n, tile)
    mine = my_tiles(cfg, len(tiles))  # several cores: each its share of the tiles
    if not mine:
        return  # this core builds and runs nothing
    cviews = [acc[2 * (k + 1) * tile + j] for j in range(len(consts))]
    for view, value in zip(cviews, consts):
        const_vector(view, value)
    load, mov, store = S.load, S.mov, S.store
    for i in mine:
        v0 = tiles[i]
        t = min(tile, n - v0)
        h = i & 1
        ib = h * k * tile
        slots = [acc[ib + j * t: ib + (j + 1) * t] for j in range(k)]
        for view, src in zip(slots, inputs):
            load(view, src, offset=v0)
        body(slots, cviews)
        ob = out_base + h * tile
        res = acc[ob: ob + t]
        mov(res, slots[0])
        store(out, res, offset=v0)


# ---- kernels ------------------------------------------------------------------------------------
def _choice(arg: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise S.error(arg, f"{value!r} is not one of {', '.join(allowed)}")
    return value


@S.kernel(elementwise=True)
def binary(A: Tensor, B: Tensor, C: Tensor, op: str = "add", tile: int | None = None) -> None:
    """C = cast(A <op> B) for op in add, sub, mul, min, max, mulhr (ALU with a buffer operand)."""
    f = alu_op(_choice("op", op, BINARY_OPS))
    tiled([A, B], C, lambda s, c: f(s[0], s[1]), tile)


@S.kernel(elementwise=True)
def unary_imm(A: Tensor, C: Tensor, op: str = "add", imm: int = 0, tile: int | None = None) -> None:
    """C = cast(A <op> imm); an immediate wider than 16 bits becomes a constant vector."""
    f = alu_op(_choice("op", op, IMM_OPS))
    if _fits_imm(_wrap32(imm)):
        tiled([A], C, lambda s, c: f(s[0], _wrap32(imm)), tile)
    else:
        tiled([A], C, lambda s, c: f(s[0], c[0]), tile, consts=[imm])


@S.kernel(elementwise=True)
def clz(A: Tensor, C: Tensor, tile: int | None = None) -> None:
    """C = cast(CLZ(A)): the leading zeros of each 32-bit lane (32 for 0, 0 for a negative lane)."""
    tiled([A], C, lambda s, c: S.clz(s[0], s[0]), tile)


@S.kernel(elementwise=True)
def relu(A: Tensor, C: Tensor, tile: int | None = None) -> None:
    """C = cast(max(A, 0))."""
    tiled([A], C, lambda s, c: S.max(s[0], 0), tile)


@S.kernel(elementwise=True)
def clip(A: Tensor, C: Tensor, lo: int = -128, hi: int = 127, tile: int | None = None) -> None:
    """C = cast(min(max(A, lo), hi)): one symmetric CLIP when lo == -hi, else MAX then MIN."""
    for arg, v in (("lo", lo), ("hi", hi)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or _wrap32(v) != v:
            raise S.error(arg, f"{v!r} must be a 32-bit integer")
    if lo > hi:
        raise S.error("lo", f"lo={lo} is above hi={hi}")
    symmetric = lo == -hi and _fits_imm(hi)
    wide = not symmetric and not (_fits_imm(lo) and _fits_imm(hi))

    def body(s: list[AccView], c: list[AccView]) -> None:
        if symmetric:
            S.clip(s[0], hi)
        else:
            S.max(s[0], c[0] if wide else lo)
            S.min(s[0], c[1] if wide else hi)
    tiled([A], C, body, tile, consts=[lo, hi] if wide else [])


def _check_shift(shift: Any) -> int:
    if isinstance(shift, bool) or not isinstance(shift, (int, np.integer)) or not 0 <= shift <= 31:
        raise S.error("shift", f"{shift!r} must be an integer 0..31")
    return int(shift)


@S.kernel(elementwise=True)
def shr_round(A: Tensor, C: Tensor, shift: int = 8, tile: int | None = None) -> None:
    """Requantize: C = int8(clip((A + (1 << (shift-1))) >> shift, -128, 127)), rounding half up."""
    s = _check_shift(shift)
    rnd = (1 << (s - 1)) if s else 0
    consts = [] if _fits_imm(rnd) else [rnd]

    def body(v: list[AccView], c: list[AccView]) -> None:
        if rnd:
            S.add(v[0], c[0] if c else rnd)
        S.shr(v[0], s)
        S.max(v[0], -128)
        S.min(v[0], 127)
    tiled([A], C, body, tile, consts=consts)


@S.kernel(elementwise=True)
def requant_scale(A: Tensor, C: Tensor, scale: float = 0.01, zero_point: int = 0, tile: int | None = None) -> None:
    """Requantize by a real scale: C = int8(clip(R(A, scale) + zero_point, -128, 127)), ``R`` the
    fixed-point scaling of :mod:`compiler.fixed_point` (MULHR by a Q31 multiplier, a rounding shift)."""
    if not scale_ok(scale):
        raise S.error("scale", f"{scale!r} must be a number in [2**-32, 2**15]")
    if isinstance(zero_point, bool) or not isinstance(zero_point, (int, np.integer)) or not -128 <= zero_point <= 127:
        raise S.error("zero_point", f"{zero_point!r} must be an integer -128..127")
    steps = [(op, int(v[0])) for op, v in alu_steps(float(scale))]
    wide = [v for _, v in steps if not _fits_imm(_wrap32(v))]

    def body(s: list[AccView], c: list[AccView]) -> None:
        k = 0
        for op, v in steps:
            if _fits_imm(_wrap32(v)):
                alu_op(op.lower())(s[0], v)
            else:
                alu_op(op.lower())(s[0], c[k])
                k += 1
        if zero_point:
            S.add(s[0], int(zero_point))
        S.max(s[0], -128)
        S.min(s[0], 127)
    tiled([A], C, body, tile, consts=wide)


@S.kernel(elementwise=True)
def fused(A: Tensor, B: Tensor, C: Tensor, shift: int = 3, tile: int | None = None) -> None:
    """The fused chain: C = cast(relu(clip((A + B) >> shift, -127, 127)))."""
    s = _check_shift(shift)

    def body(v: list[AccView], c: list[AccView]) -> None:
        S.add(v[0], v[1])
        S.shr(v[0], s)
        S.clip(v[0], 127)
        S.max(v[0], 0)
    tiled([A, B], C, body, tile)


@S.kernel(elementwise=True)
def shift(A: Tensor, B: Tensor, C: Tensor, tile: int | None = None) -> None:
    """C = cast(A >> B) lane by lane (SHR with a buffer operand; negative B shifts left)."""
    tiled([A, B], C, lambda s, c: S.shr(s[0], s[1]), tile)


# ---- plain numpy references --------------------------------------------------------------------
# See the module docstring: ALU-op operators reuse hw.alu_numpy, the others are written as math.
def _wrap(x: np.ndarray) -> np.ndarray:
    """An int64 intermediate of the operator's int32 arithmetic, wrapped to int32 (modular cast)."""
    return x.astype(np.int64).astype(np.int32)


def _ref_alu(op: str, a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """The ALU op ``op`` (an intrinsic name: add ... mov) lane by lane on int32 ``a`` and ``b``."""
    return alu_lanes(op.upper(), np.asarray(a, dtype=np.int32), b)


def _ref_requant(A: np.ndarray, shift: int = 8, **_: Any) -> np.ndarray:
    """int8 requantization: add half an LSB of the result (round half up), shift right, clip to int8."""
    rnd = (1 << (shift - 1)) if shift else 0
    return np.clip(_wrap(A.astype(np.int64) + rnd) >> shift, -128, 127).astype(np.int32)


@dataclass(frozen=True)
class Operator:
    """A library operator: its kernel, input/output names, fixed constants and numpy reference."""

    name: str
    kernel: Kernel
    inputs: tuple[str, ...]
    output: str
    reference: Callable[..., np.ndarray]  # (inputs..., **params) -> int32 result before the cast
    fixed: dict[str, Any] = field(default_factory=dict)  # constants the operator pins (e.g. op="add")
    doc: str = ""


OPERATORS: dict[str, Operator] = {}


def _register(op: Operator) -> None:
    if op.name in OPERATORS:
        raise ValueError(f"operator '{op.name}' registered twice")
    OPERATORS[op.name] = op


for _op in BINARY_OPS:
    _register(Operator(_op, binary, ("A", "B"), "C", (lambda o: lambda A, B, **p: _ref_alu(o, A, B))(_op),
                       {"op": _op}, f"C = cast(A {_op} B)"))
    _register(Operator(f"{_op}_imm", unary_imm, ("A",), "C",
                       (lambda o: lambda A, imm=0, **p: _ref_alu(o, A, _wrap32(imm)))(_op), {"op": _op},
                       f"C = cast(A {_op} imm)"))
for _op in ("shr", "clip", "mov"):
    _register(Operator(f"{_op}_imm", unary_imm, ("A",), "C",
                       (lambda o: lambda A, imm=0, **p: _ref_alu(o, A, _wrap32(imm)))(_op), {"op": _op},
                       f"C = cast({_op.upper()}(A, imm))"))
_register(Operator("clz", clz, ("A",), "C", lambda A, **p: _ref_alu("clz", A, A),
                   doc="C = cast(CLZ(A)), the leading-zero count of each lane"))
_register(Operator("relu", relu, ("A",), "C", lambda A, **p: np.maximum(A, 0), doc="C = cast(max(A, 0))"))
_register(Operator("clip", clip, ("A",), "C", lambda A, lo=-128, hi=127, **p: np.clip(A, lo, hi).astype(np.int32),
                   doc="C = cast(clip(A, lo, hi))"))
_register(Operator("shr_round", shr_round, ("A",), "C", _ref_requant,
                   doc="requantize int32 -> int8: round, shift right, clip to int8"))
_register(Operator("requant_scale", requant_scale, ("A",), "C",
                   lambda A, scale=0.01, zero_point=0, **p: np.clip(rescale(A, scale) + zero_point, -128, 127)
                   .astype(np.int32),
                   doc="requantize int32 -> int8 by a real scale: clip(R(A, scale) + zero_point) (MULHR)"))
_register(Operator("fused", fused, ("A", "B"), "C",
                   lambda A, B, shift=3, **p: np.maximum(np.clip(_wrap(A.astype(np.int64) + B) >> shift, -127, 127),
                                                         0).astype(np.int32),
                   doc="C = cast(relu(clip((A + B) >> shift, -127, 127)))"))
_register(Operator("shift", shift, ("A", "B"), "C", lambda A, B, **p: _ref_alu("shr", A, B),
                   doc="C = cast(A >> B) per lane, negative B shifts left"))
