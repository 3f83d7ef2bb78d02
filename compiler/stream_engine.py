"""Layers that stream int8 activations through the input buffer into the accumulator: pooling and
elementwise sums.

A GEMM against the identity weight block copies (or, over several micro-ops into one
accumulator vector, sums) input vectors into the accumulator, exactly: the accumulator is
int32 and the block is the identity. On that:

* :func:`eltwise_layer`: ``Y = epilogue(sum of the inputs)`` vector by vector (a residual add
  of two activations; with one input, a standalone requantize or ReLU of an int8 value); with real
  scales each operand rescaled in its own accumulator region first (a quantized add);
* :func:`pool_layer`: max pooling (every window tap copied into its own accumulator region by
  one GEMM, then one ALU MAX folds the regions) and average pooling (one GEMM sums the taps
  onto the rounding term, then a shift; with a real scale, onto ``-zero point * k*k``, then the
  fixed-point steps: any window), ``k x k`` windows every ``stride``; the maximum over padding
  (:class:`PoolPlan`);
* :func:`transpose_layer`: sample-major vectors to feature-block-major (a flattened activation
  into the layout a dense layer reads), the GEMM's loop factors doing the transposition.

Both work in tiles that alternate between two halves of the buffers when they fit (the
dependency tokens then let the loads of tile i+1 overlap tile i's GEMM and the store of
tile i-1). The identity block sits in the weight buffer's last entry, the micro-op tables
from ``uop_base``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler import dsl as S
from compiler.conv_engine import Epilogue, apply_epilogue, clamp, load_identity_block
from compiler.conv_plan import PlanError
from compiler.ops import IMM_MAX, const_vector
from compiler.tensor import Tensor
from hw.config import HwConfig
from hw.isa import GEMM_ITER_BITS

ITER_MAX = (1 << GEMM_ITER_BITS) - 1


def identity_slot(cfg: HwConfig) -> int:
    """The weight-buffer entry holding the identity block."""
    return cfg.wgt_depth - 1


def load_identity() -> int:
    """LOAD the identity block into its slot; returns the slot."""
    slot = identity_slot(S.config())
    load_identity_block(slot)
    return slot


@dataclass(frozen=True)
class OperandScale:
    """An elementwise operand rescaled before the sum: ``R(x - zero_point, scale)`` as per-tensor ALU
    ``steps`` (:func:`compiler.fixed_point.alu_steps`, one value each)."""

    zero_point: int
    steps: tuple[tuple[str, int], ...]


class Constants:
    """Per-tensor ALU operands of a stream layer: an immediate when the 16-bit field holds it, else a
    constant vector in the accumulator's top slots (filled once per layer)."""

    def __init__(self, values: list[int], top: int):
        wide = sorted({v for v in values if not (-IMM_MAX - 1 <= v <= IMM_MAX)})
        self.slot = {v: top - 1 - k for k, v in enumerate(wide)}

    @staticmethod
    def count(values: list[int]) -> int:
        """Constant vectors ``values`` need."""
        return len({v for v in values if not (-IMM_MAX - 1 <= v <= IMM_MAX)})

    def fill(self) -> None:
        for v, k in self.slot.items():
            const_vector(S.acc[k:k + 1], v)

    def operand(self, v: int) -> "object":
        k = self.slot.get(v)
        return v if k is None else S.acc[k:k + 1]


def stream_constants(epi: Epilogue, scales: list[OperandScale] | None = None) -> list[int]:
    """The per-tensor values the ALU passes of :func:`eltwise_layer` / :func:`pool_layer` read."""
    vals = [int(v) for _, v in epi.steps] + ([epi.offset] if epi.offset else []) + [epi.rounding]
    for sc in scales or []:
        vals += [-sc.zero_point] + [int(v) for _, v in sc.steps]
    return vals


def eltwise_tile(cfg: HwConfig, inputs: int, wide_rounding: bool, consts: int = 0, separate: bool = False) -> int:
    """Vectors per tile of :func:`eltwise_layer`: two accumulator halves (of one region per operand
    when they are rescaled separately), two input halves of every operand's vectors, below ``consts``
    constant vectors."""
    regions = inputs if separate else 1
    tile = min((cfg.acc_depth - (1 if wide_rounding else 0) - consts) // (2 * regions), cfg.inp_depth // (2 * inputs),
               ITER_MAX)
    if tile < 1:
        raise PlanError(f"config '{cfg.name}' has no room for an elementwise tile")
    return tile


def eltwise_uops(inputs: int) -> int:
    """Micro-ops :func:`eltwise_layer` loads."""
    return 2 * inputs


def eltwise_layer(inputs: list[Tensor], Y: Tensor, epi: Epilogue, uop_base: int = 0,
                  scales: list[OperandScale] | None = None) -> None:
    """``Y = epilogue(sum of inputs)`` over all vectors of ``Y``: per tile, the rounding term into the
    accumulator, every input's vectors into the input buffer, one GEMM adding each onto the
    accumulator through the identity block, then shift, ReLU and clip on the ALU, and the STORE.
    With ``scales`` (one per input), every operand goes into its own accumulator region, is rescaled
    there (``R(x - zero_point, scale)``) and the regions are summed by ALU ADDs before the epilogue."""
    if scales is not None or not epi.plain:
        _eltwise_scaled(inputs, Y, epi, uop_base, scales)
        return
    cfg = S.config()
    n = len(inputs)
    wide = epi.rounding > IMM_MAX
    tile = eltwise_tile(cfg, n, wide)
    tiles = range(0, Y.nvec, tile)
    mine = S.core_range(len(tiles))  # several cores: each its share of the tiles
    if not mine:
        return  # several cores, fewer tiles than cores: this core loads and runs nothing of this layer
    ident = load_identity()
    table = [(h * tile, h * n * tile + k * tile, ident) for h in (0, 1) for k in range(n)]
    S.load(S.uop[uop_base:uop_base + len(table)], S.uops(table, "eltwise_uops"), cols=len(table))
    rnd_view = S.acc[2 * tile:2 * tile + 1] if wide else None
    if rnd_view is not None:
        const_vector(rnd_view, epi.rounding)
    for i in mine:
        v0 = tiles[i]
        t = min(tile, Y.nvec - v0)
        h = i & 1
        acc = S.acc[h * tile:h * tile + t]
        S.mov(acc, rnd_view if rnd_view is not None else epi.rounding)
        for k, src in enumerate(inputs):
            lo = h * n * tile + k * tile
            S.load(S.inp[lo:lo + t], src, offset=v0, cols=t)
        ub = uop_base + n * h
        S.gemm(S.uop[ub:ub + n], iters=(t, 1), acc_factors=(1, 0), inp_factors=(1, 0))
        if epi.shift:
            S.shr(acc, epi.shift)
        clamp(acc, epi.relu, True)
        S.store(Y, acc, offset=v0)


def _eltwise_scaled(inputs: list[Tensor], Y: Tensor, epi: Epilogue, uop_base: int,
                    scales: list[OperandScale] | None) -> None:
    """:func:`eltwise_layer` with real scales, zero points or a floor (its docstring)."""
    cfg = S.config()
    n = len(inputs)
    separate = scales is not None
    values = stream_constants(epi, scales)
    consts = Constants(values, cfg.acc_depth)
    tile = eltwise_tile(cfg, n, False, Constants.count(values), separate)
    regions = n if separate else 1
    tiles = range(0, Y.nvec, tile)
    mine = S.core_range(len(tiles))  # several cores: each its share of the tiles
    if not mine:
        return  # several cores, fewer tiles than cores: this core loads and runs nothing of this layer
    ident = load_identity()
    table = [(h * regions * tile + (k * tile if separate else 0), h * n * tile + k * tile, ident)
             for h in (0, 1) for k in range(n)]
    S.load(S.uop[uop_base:uop_base + len(table)], S.uops(table, "eltwise_uops"), cols=len(table))
    consts.fill()
    for i in mine:
        v0 = tiles[i]
        t = min(tile, Y.nvec - v0)
        h = i & 1
        base = h * regions * tile
        acc = S.acc[base:base + t]
        start = consts.operand(epi.rounding) if not separate else 0  # the shift's rounding term (conv: in the bias)
        S.mov(S.acc[base:base + (regions - 1) * tile + t], start)  # type: ignore[arg-type]
        for k, src in enumerate(inputs):
            lo = h * n * tile + k * tile
            S.load(S.inp[lo:lo + t], src, offset=v0, cols=t)
        ub = uop_base + n * h
        S.gemm(S.uop[ub:ub + n], iters=(t, 1), acc_factors=(1, 0), inp_factors=(1, 0))
        for k, sc in enumerate(scales or []):
            part = S.acc[base + k * tile:base + k * tile + t]
            if sc.zero_point:
                S.add(part, -sc.zero_point)
            for op, v in sc.steps:
                _STREAM_ALU[op](part, consts.operand(int(v)))
            if k:
                S.add(acc, part)
        if separate and epi.rounding:
            S.add(acc, consts.operand(epi.rounding))
        if epi.offset:
            S.add(acc, consts.operand(epi.offset))
        apply_epilogue(acc, epi, lambda j, op: _STREAM_ALU[op](acc, consts.operand(int(epi.steps[j][1]))))
        S.store(Y, acc, offset=v0)


_STREAM_ALU = {"SHR": S.shr, "MULHR": S.mulhr, "ADD": S.add}


# ---- pooling --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolPlan:
    """Tiles of a pooling layer over ``batch`` images of ``cb`` channel blocks x ``h`` x ``w``: ``tc``
    channel blocks x ``th`` output rows (whole rows), ``halves`` of the accumulator and input buffers
    (2: double-buffered). ``pads`` (top, left, bottom, right) of a maximum: a tap in the padding reads
    the nearest input pixel instead (its column clamped in the micro-ops, its row loaded twice), which
    lies in the same window, so the maximum is the one over the window's input pixels alone."""

    batch: int
    cb: int
    h: int
    w: int
    k: int
    stride: int
    maximum: bool
    tc: int
    th: int
    halves: int
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)

    @property
    def ho(self) -> int:
        return (self.h + self.pads[0] + self.pads[2] - self.k) // self.stride + 1

    @property
    def wo(self) -> int:
        return (self.w + self.pads[1] + self.pads[3] - self.k) // self.stride + 1

    @property
    def taps(self) -> int:
        return self.k * self.k

    @property
    def th_in(self) -> int:
        return (self.th - 1) * self.stride + self.k

    @property
    def cb_pitch(self) -> int:
        """Input-buffer vectors of one channel block of a tile (its window rows, whole image rows)."""
        return self.th_in * self.w

    @property
    def out_tile(self) -> int:
        return self.tc * self.th * self.wo

    @property
    def acc_tile(self) -> int:
        """Accumulator vectors of a tile: one region per tap for the maximum, one for the average."""
        return self.out_tile * (self.taps if self.maximum else 1)

    @property
    def uops_per_table(self) -> int:
        return self.taps * self.wo


def plan_pool(cfg: HwConfig, batch: int, cb: int, h: int, w: int, k: int, stride: int, maximum: bool,
              consts: int = 0, pads: tuple[int, int, int, int] = (0, 0, 0, 0)) -> PoolPlan:
    """The largest tile (double-buffered if anything fits so) of a pooling layer, below ``consts``
    constant vectors at the top of the accumulator; PlanError if none fits."""
    fmax = (1 << cfg.sram_index_bits) - 1
    if any(pads) and not maximum:
        raise PlanError("only a maximum pools over padding")
    ho = (h + pads[0] + pads[2] - k) // stride + 1
    for halves in (2, 1):
        best = None
        for tc in range(min(cb, ITER_MAX), 0, -1):
            for th in range(ho, 0, -1):
                p = PoolPlan(batch, cb, h, w, k, stride, maximum, tc, th, halves, pads)
                if (halves * p.acc_tile <= cfg.acc_depth - consts and halves * tc * p.cb_pitch <= cfg.inp_depth
                        and halves * p.uops_per_table <= cfg.uop_depth and th <= ITER_MAX
                        and max(p.cb_pitch, stride * w, p.th * p.wo, p.out_tile) <= fmax
                        and p.acc_tile <= ITER_MAX):
                    if best is None or p.out_tile > best.out_tile:
                        best = p
                    break  # smaller th for this tc only shrinks the tile
        if best is not None:
            return best
    one = PoolPlan(batch, cb, h, w, k, stride, maximum, 1, 1, 1, pads)  # the smallest tile: one output row
    short = [f"{need} {what} (the config has {have})" for need, have, what in (
        (one.cb_pitch, cfg.inp_depth, "input vectors"), (one.acc_tile, cfg.acc_depth - consts, "accumulator vectors"),
        (one.uops_per_table, cfg.uop_depth, "micro-ops"), (one.acc_tile, ITER_MAX, "loop iterations"),
        (max(one.cb_pitch, stride * w, one.wo, one.out_tile), fmax, "as the largest buffer index")) if need > have]
    raise PlanError(f"no tiling fits config '{cfg.name}': one output row of the {k}x{k} pooling needs "
                    f"{', '.join(short) or 'more than the buffers hold'}")


def pool_uops(p: PoolPlan, acc_half: int, in_half: int) -> np.ndarray:
    """Micro-ops of one output row and channel block: ``(acc, inp, wgt)`` per tap and output column."""
    t, c = np.meshgrid(np.arange(p.taps), np.arange(p.wo), indexing="ij")
    ky, kx = t // p.k, t % p.k
    region = t * p.out_tile if p.maximum else 0
    acc = acc_half * p.acc_tile + region + c
    col = np.clip(c * p.stride - p.pads[1] + kx, 0, p.w - 1)  # a padding column reads the nearest one
    inp = in_half * p.tc * p.cb_pitch + ky * p.w + col
    return np.stack([acc.ravel(), inp.ravel(), np.zeros(acc.size, dtype=np.int64)], axis=1)


def pool_layer(X: Tensor, Y: Tensor, plan: PoolPlan, relu: bool = False, uop_base: int = 0,
               scaled: Epilogue | None = None) -> None:
    """Max or average pooling of ``X (N, Cb, H, W, B)`` into ``Y (N, Cb, Ho, Wo, B)`` (module docstring),
    then ReLU when ``relu``. With ``scaled`` (an average with a real scale), the window's sum starts at
    ``scaled.offset`` (``-input_zero_point * k*k``) and ``scaled``'s steps, zero point and clip follow."""
    p = plan
    tiles = [(n, c0, r0) for n in range(p.batch) for c0 in range(0, p.cb, p.tc) for r0 in range(0, p.ho, p.th)]
    mine = S.core_range(len(tiles))  # several cores: each its share of the tiles
    if not mine:
        return  # several cores, fewer tiles than cores: this core loads and runs nothing of this layer
    ident = load_identity()
    tables = []
    for h in range(p.halves):  # tile i uses accumulator half and input half i % halves: one table each
        t = pool_uops(p, h, h)
        t[:, 2] = ident
        tables.append(t)
    raw = np.concatenate(tables)
    S.load(S.uop[uop_base:uop_base + len(raw)], S.uops(raw, "pool_uops"), cols=len(raw))
    area = p.taps
    shift = area.bit_length() - 1
    rnd = (area // 2) if (not p.maximum and shift) else 0
    consts = None
    if scaled is not None:
        values = stream_constants(scaled)
        consts = Constants(values, S.config().acc_depth)
        consts.fill()
    for i in mine:
        n, c0, r0 = tiles[i]
        tc = min(p.tc, p.cb - c0)
        th = min(p.th, p.ho - r0)
        h = i % p.halves
        base = h * p.acc_tile
        region = tc * th * p.wo  # this tile's vectors per tap region (a prefix of each region)
        xb = h * p.tc * p.cb_pitch
        rows_in = (th - 1) * p.stride + p.k
        top = r0 * p.stride - p.pads[0]  # the tile's first window row (negative: in the padding)
        lo_r, hi_r = max(top, 0), min(top + rows_in, p.h)  # its rows inside the input
        first = ((n * p.cb + c0) * p.h + top) * p.w
        if rows_in == p.th_in and (lo_r, hi_r) == (top, top + rows_in):
            # the window rows of every channel block, back to back on chip
            S.load(S.inp[xb:xb + tc * p.cb_pitch], X, offset=first, rows=tc, cols=rows_in * p.w,
                   stride=p.h * p.w)
        else:  # a shorter tail or a tile in the padding: each channel block keeps its full pitch on chip
            for ci in range(tc):
                lo = xb + ci * p.cb_pitch
                chan = (n * p.cb + c0 + ci) * p.h * p.w
                S.load(S.inp[lo + (lo_r - top) * p.w:lo + (hi_r - top) * p.w], X, offset=chan + lo_r * p.w,
                       cols=(hi_r - lo_r) * p.w)
                for r in [*range(top, lo_r), *range(hi_r, top + rows_in)]:  # a padding row: the nearest row
                    near = min(max(r, 0), p.h - 1)
                    S.load(S.inp[lo + (r - top) * p.w:lo + (r - top + 1) * p.w], X, offset=chan + near * p.w,
                           cols=p.w)
        scaled_start = consts is not None and scaled is not None and scaled.steps
        start = consts.operand(scaled.offset) if scaled_start else rnd  # type: ignore[union-attr]
        S.mov(S.acc[base:base + (p.acc_tile if p.maximum else region)], start)  # type: ignore[arg-type]
        ub = uop_base + h * p.uops_per_table
        S.gemm(S.uop[ub:ub + p.uops_per_table], iters=(th, tc), acc_factors=(p.wo, th * p.wo),
               inp_factors=(p.stride * p.w, p.cb_pitch))
        out = S.acc[base:base + region]
        if p.maximum:
            if area > 1:
                S.max(out, S.acc[base + p.out_tile:base + p.acc_tile], iters=(area - 1, region),
                      dst_factors=(0, 1), src_factors=(p.out_tile, 1))
        elif shift and (scaled is None or not scaled.steps):
            S.shr(out, shift)
        if consts is not None:
            assert scaled is not None
            apply_epilogue(out, scaled, lambda j, op: _STREAM_ALU[op](out, consts.operand(int(scaled.steps[j][1]))))
        elif relu:
            S.max(out, 0)
        # channel blocks are th*Wo vectors apart on chip, Ho*Wo in Y
        S.store(Y, out, offset=((n * p.cb + c0) * p.ho + r0) * p.wo, rows=tc, cols=th * p.wo,
                stride=p.ho * p.wo)


# ---- transposition ---------------------------------------------------------------------------------
def transpose_tile(cfg: HwConfig, fb: int) -> tuple[int, int]:
    """(samples, feature blocks) per tile of :func:`transpose_layer`: two halves of the input and
    accumulator buffers, whole samples when they fit."""
    fmax = (1 << cfg.sram_index_bits) - 1
    half = min(cfg.inp_depth, cfg.acc_depth) // 2
    f = min(fb, half, ITER_MAX, fmax)
    t = min(half // f, ITER_MAX, fmax)
    if f < 1 or t < 1:
        raise PlanError(f"config '{cfg.name}' has no room for a transposition tile")
    return t, f


def transpose_layer(X: Tensor, Y: Tensor, samples: int, fb: int, uop_base: int = 0) -> None:
    """``X``, ``samples`` x ``fb`` vectors (sample-major: a flattened activation), into ``Y``, the same
    vectors feature-block-major (``fb`` x ``samples``: the layout a dense layer reads many samples
    from). Per tile of samples x feature blocks: one LOAD, one GEMM copying the vectors through the
    identity block into the accumulator in transposed order, one STORE."""
    cfg = S.config()
    t_max, f_max = transpose_tile(cfg, fb)
    half = t_max * f_max
    tiles = [(n0, f0) for n0 in range(0, samples, t_max) for f0 in range(0, fb, f_max)]
    mine = S.core_range(len(tiles))  # several cores: each its share of the tiles
    if not mine:
        return  # several cores, fewer tiles than cores: this core loads and runs nothing of this layer
    ident = load_identity()
    S.load(S.uop[uop_base:uop_base + 2], S.uops([(0, 0, ident), (half, half, ident)], "transpose_uops"), cols=2)
    for i in mine:
        n0, f0 = tiles[i]
        t, f = min(t_max, samples - n0), min(f_max, fb - f0)
        h = i & 1
        base = h * half
        S.load(S.inp[base:base + t * f], X, offset=n0 * fb + f0, rows=t, cols=f, stride=fb)
        acc = S.acc[base:base + t * f]
        S.mov(acc, 0)
        # sample n, feature block j: from input n*f + j to accumulator j*t + n
        S.gemm(S.uop[uop_base + h:uop_base + h + 1], iters=(t, f), acc_factors=(1, t), inp_factors=(f, 1))
        S.store(Y, acc, offset=f0 * samples + n0, rows=f, cols=t, stride=samples)
