"""The convolution engine: one layer (convolution, dense layer or matmul) as DSL calls, from a plan.

:func:`conv_layer` runs inside a kernel (golden path or trace alike) and issues, for the
tiling :func:`compiler.conv_plan.plan_conv` chose: the micro-op tables (one constant,
one LOAD), then per output tile the accumulator's initial value (the bias, plus the
rounding term of the requantization, broadcast by one ALU MOV), per step of input
channels the input window's LOADs (zero padding at the image border), the weight
tile's LOAD (skipped, like the bias's, when that half of the buffer holds that tile
already: the next image or rows of the same output channels) and ONE GEMM, then the
epilogue on the ALU (shift or the real-scale MULHR steps with per-channel vectors held beside the
bias, zero point, ReLU, clip; optionally a residual added through the identity weight block, then
ReLU and clip again; or a quantized add's operands each rescaled, the residual in an accumulator
region of its own, summed and requantized: :class:`ScaledResidual`) and the STOREs. An input zero point meeting padding is corrected at the border
(:class:`BorderFix`) or by a per-position start map. Buffer halves alternate tile by tile (accumulator) and step by
step (inputs, weights), so the dependency tokens the compiler derives let the loads of
step i+1 overlap the GEMM of step i and the stores of one tile the GEMMs of the next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from compiler import dsl as S
from compiler.conv_plan import ConvPlan, ConvShape, core_tiles, window
from compiler.intrinsics import encode_uop_table
from compiler.ops import IMM_MAX, const_vector
from compiler.tensor import AccView, Tensor


@dataclass(frozen=True)
class ScaledResidual:
    """A quantized residual add finished in a convolution's epilogue, exactly as the elementwise stage
    computes it (:func:`compiler.stream_engine.eltwise_layer` with scales): the convolution's int8 result
    ``y`` (still in the accumulator) becomes ``R(y - a_zero_point, a)`` by ``a_steps``; the residual
    ``r`` goes into an accumulator region of its own on top of ``-b_zero_point`` (one GEMM through the
    identity block) and becomes ``R(r - b_zero_point, b)`` by ``b_steps``; their sum gets ``final``
    (the add's requantization: offset, floor, steps, zero point, clip). The steps are per tensor,
    ``(op, value)``: an immediate, or (wider than 16 bits) one constant vector each, built once per
    layer in the accumulator slots the plan reserves (:meth:`wide`)."""

    a_zero_point: int
    a_steps: tuple[tuple[str, int], ...]
    b_zero_point: int
    b_steps: tuple[tuple[str, int], ...]
    final: "Epilogue"

    def wide(self) -> list[int]:
        """The step values the 16-bit immediate cannot hold, one constant vector each (in slot order)."""
        vals = {int(v) for _, v in (*self.a_steps, *self.b_steps, *self.final.steps)}
        return sorted(v for v in vals if not -IMM_MAX - 1 <= v <= IMM_MAX)

    @property
    def alu_passes(self) -> int:
        """ALU instructions over the tile (or the residual's region) after the convolution's epilogue."""
        return ((1 if self.a_zero_point else 0) + len(self.a_steps) + 1 + len(self.b_steps) + 1
                + (1 if self.final.offset else 0) + self.final.alu_passes(False))


@dataclass(frozen=True)
class Epilogue:
    """What happens to the int32 accumulator after the GEMMs: ``offset`` added, ``floor``
    (``max(acc, floor)``, a ReLU before the requantization, in the offset domain), then ``shift``
    (round half up), or with ``steps`` the real-scale requantization
    (:func:`compiler.fixed_point.alu_steps`: ALU ops, ``(op, values)``, the values one per output
    channel on the conv engine, one for the tensor on the stream engine) and ``zero_point`` added;
    then ``relu``, ``clip`` to ``[lo, hi]`` (int8 by default); with a residual, ``acc += residual``
    then ``residual_relu`` and clip again, or with ``scaled_residual`` a quantized add
    (:class:`ScaledResidual`). The conv engine has the offset in the bias."""

    shift: int = 0
    relu: bool = False
    clip: bool = False
    residual_relu: bool = True
    floor: int | None = None
    steps: tuple[tuple[str, Any], ...] = ()
    zero_point: int = 0
    lo: int = -128
    hi: int = 127
    offset: int = 0  # added first (a requantization's -input_zero_point; the conv engine has it in the bias)
    scaled_residual: ScaledResidual | None = field(default=None)

    @property
    def rounding(self) -> int:
        return (1 << (self.shift - 1)) if self.shift else 0

    @property
    def plain(self) -> bool:
        """Whether this is the power-of-two epilogue graphs have always had (no real scale, zero point,
        floor or bounds other than int8's)."""
        return (self.floor is None and not self.steps and not self.zero_point and not self.offset
                and (self.lo, self.hi) == (-128, 127))

    @property
    def consts(self) -> int:
        """Per-channel constant vectors of the real-scale steps (0 without)."""
        return len(self.steps)

    def alu_passes(self, residual: bool) -> int:
        """ALU instructions over the whole tile after the GEMMs."""
        n = (1 if self.shift else 0) + (2 if self.clip else 1 if self.relu else 0)
        n += (1 if self.floor is not None else 0) + len(self.steps) + (1 if self.zero_point else 0)
        n += 1 if self.offset else 0
        if residual and self.scaled_residual is not None:
            return n + self.scaled_residual.alu_passes
        return n + (2 if residual else 0)


@dataclass(frozen=True)
class BorderFix:
    """A padded convolution's input zero point, corrected at the border: the bias holds the interior
    value (``-zx`` times every tap's weights), and an output at the border adds back ``zx`` times the
    weights of its taps outside the input. Those taps depend on the output's row class and column
    class (which kernel rows / columns fall outside; 0: none), so there are few distinct corrections:
    ``kinds[(row class, column class)]`` is the correction's vector index among the bias tensor's
    kinds after the bias and the epilogue's constants."""

    row_class: tuple[int, ...]  # per output row
    col_class: tuple[int, ...]  # per output column
    kinds: tuple[tuple[tuple[int, int], int], ...]

    @property
    def count(self) -> int:
        return len(self.kinds)


def border_adds(tile_base: int, tile_end: int, cls_base: int, fix: BorderFix, to: int, r0: int, th: int, c0: int,
                tw: int) -> None:
    """The ALU ADDs of a tile's border corrections: per border row, one per run of columns of one class;
    per column of a border class, one over the tile's run of interior rows."""
    kind = dict(fix.kinds)
    per = th * tw

    def add(first: int, j: int, n: int, factor: int) -> None:
        S.add(S.acc[first:tile_end], S.acc[cls_base + j * to:cls_base + (j + 1) * to], iters=(to, n),
              dst_factors=(per, factor), src_factors=(1, 0))

    for yi in range(th):
        rc = fix.row_class[r0 + yi]
        if not rc:
            continue
        x = 0
        while x < tw:
            cc = fix.col_class[c0 + x]
            x1 = x
            while x1 < tw and fix.col_class[c0 + x1] == cc:
                x1 += 1
            add(tile_base + yi * tw + x, kind[(rc, cc)], x1 - x, 1)
            x = x1
    yi = 0
    while yi < th:  # runs of interior rows: the border columns' corrections
        if fix.row_class[r0 + yi]:
            yi += 1
            continue
        y1 = yi
        while y1 < th and not fix.row_class[r0 + y1]:
            y1 += 1
        for xi in range(tw):
            cc = fix.col_class[c0 + xi]
            if cc:
                add(tile_base + yi * tw + xi, kind[(0, cc)], y1 - yi, tw)
        yi = y1


def conv_uops(plan: ConvPlan, acc_half: int, in_half: int, tc: int) -> np.ndarray:
    """The micro-ops of one output row of a step with ``tc`` input-channel blocks: ``(acc, inp, wgt)``
    for every output column (outermost, so a narrower tile walks a prefix), channel block, tap."""
    s = plan.shape
    c, ci, ky, kx = np.meshgrid(np.arange(plan.tw), np.arange(tc), np.arange(s.kh), np.arange(s.kw), indexing="ij")
    acc = plan.acc_base(acc_half) + c
    inp = plan.inp_base(in_half) + ci * plan.cb_pitch + ky * plan.tw_in + c * s.stride + kx
    wgt = plan.wgt_base(in_half) + (ci * s.kh + ky) * s.kw + kx
    return np.stack([acc.ravel(), inp.ravel(), wgt.ravel()], axis=1)


def layer_tables(plan: ConvPlan) -> tuple[np.ndarray, dict[tuple[int, int, int], int], dict[int, int]]:
    """A layer's micro-ops as LOAD reads them (int8, 16 bytes each), where each (accumulator half,
    input half, channel blocks) table starts, and where each half's residual micro-op is. Cached on
    the plan (plans are cached per config and shape), so the golden path builds them once."""
    hit = plan.cache.get("tables")
    if hit is not None:
        return hit
    rows: list[np.ndarray] = []
    table: dict[tuple[int, int, int], int] = {}
    for ha in range(plan.acc_halves):
        for hx in range(plan.in_halves):
            for tcv in plan.tc_variants:
                table[(ha, hx, tcv)] = sum(len(r) for r in rows)
                rows.append(conv_uops(plan, ha, hx, tcv))
    res_uop = {}
    if plan.shape.residual:
        for ha in range(plan.acc_halves):
            res_uop[ha] = sum(len(r) for r in rows)
            target = plan.res_acc_base if plan.shape.residual_acc else plan.acc_base(ha)
            rows.append(np.array([[target, plan.res_base(ha), plan.identity_slot]]))
    out = plan.cache["tables"] = (encode_uop_table(np.concatenate(rows)), table, res_uop)
    return out


def uop_span(plan: ConvPlan, tiles: int) -> tuple[int, int]:
    """The micro-ops ``[lo, hi)`` of :func:`layer_tables` that ``tiles`` output tiles use (tile i in
    accumulator half ``i % acc_halves``, step j in input half ``j % in_halves``, as :func:`conv_layer`
    issues them): a core running a few tiles of a layer loads only those tables."""
    _, table, res_uop = layer_tables(plan)
    starts: list[int] = []
    ends: list[int] = []
    step = 0
    for t in range(min(tiles, plan.acc_halves * plan.in_halves * len(plan.c_tiles))):
        ha = t % plan.acc_halves
        for _, tc in plan.c_tiles:
            k = table[(ha, step % plan.in_halves, tc)]
            starts.append(k)
            ends.append(k + plan.tw * tc * plan.shape.taps)
            step += 1
        if plan.shape.residual:
            starts.append(res_uop[ha])
            ends.append(res_uop[ha] + 1)
    return min(starts), max(ends)


def load_identity_block(slot: int) -> None:
    """LOAD the identity weight block into weight entry ``slot``: a GEMM against it copies (or, over
    several micro-ops into one accumulator vector, sums) input vectors exactly."""
    S.load(S.wgt[slot:slot + 1], S.const(np.eye(S.config().block, dtype=np.int8)[None], "identity"), cols=1)


def clamp(tile: AccView, relu: bool, clip: bool, lo: int = -128, hi: int = 127) -> None:
    """ReLU and/or clip to ``[lo, hi]`` (int8 by default) on the ALU (immediates)."""
    if clip:
        S.max(tile, max(lo, 0) if relu else lo)
        S.min(tile, max(hi, 0) if relu else hi)
    elif relu:
        S.max(tile, 0)


def apply_epilogue(tile: AccView, epi: Epilogue, step: Callable[[int, str], None] | None = None) -> None:
    """The epilogue's ALU passes on ``tile`` up to the clip (no residual): floor, shift or the
    real-scale steps (``step(j, op)`` issues step ``j``, whose operand only the caller knows where it
    is) and zero point, then ReLU and clip."""
    if epi.floor is not None:
        S.max(tile, epi.floor)
    if epi.shift:
        S.shr(tile, epi.shift)
    for j, (op, _) in enumerate(epi.steps):
        assert step is not None
        step(j, op)
    if epi.zero_point:
        S.add(tile, epi.zero_point)
    clamp(tile, epi.relu, epi.clip, epi.lo, epi.hi)


def _alu_by_name(op: str) -> Callable[..., Any]:
    return {"SHR": S.shr, "MULHR": S.mulhr, "ADD": S.add}[op]


def broadcast_alu(op: str, tile: AccView, src: AccView, to: int, per: int) -> None:
    """``tile[co*per + i] = op(tile[co*per + i], src[co])``: one vector per output-channel block."""
    _alu_by_name(op)(tile, src, iters=(to, per), dst_factors=(per, 1), src_factors=(1, 0))


def scaled_residual_adds(sr: ScaledResidual, tile: AccView, rtile: AccView, nvec: int, res_gemm: Any,
                         wide_base: int) -> None:
    """The ALU passes and the residual's GEMM of a :class:`ScaledResidual` on a tile of ``nvec`` vectors
    whose convolution epilogue is done (the residual already LOADed for ``res_gemm``, whose destination
    is ``rtile``); the wide step values are one vector each from ``wide_base`` (``sr.wide()`` order)."""
    slot = {v: wide_base + k for k, v in enumerate(sr.wide())}

    def operand(v: int) -> Any:
        return S.acc[slot[v]:slot[v] + 1] if v in slot else v

    def run(view: AccView, steps: tuple[tuple[str, int], ...]) -> None:
        for op, v in steps:
            _alu_by_name(op)(view, operand(int(v)))

    if sr.a_zero_point:
        S.add(tile, -sr.a_zero_point)
    run(tile, sr.a_steps)
    S.mov(rtile, -sr.b_zero_point)
    S.gemm(res_gemm, iters=(nvec, 1), acc_factors=(1, 0), inp_factors=(1, 0))
    run(rtile, sr.b_steps)
    S.add(tile, rtile)
    if sr.final.offset:
        S.add(tile, sr.final.offset)
    apply_epilogue(tile, sr.final, lambda j, op: _alu_by_name(op)(tile, operand(int(sr.final.steps[j][1]))))


def tile_dma(n: int, o0: int, to: int, r0: int, th: int, c0: int, tw: int, ob: int, ho: int,
             wo: int) -> list[tuple[int, int, int, int, int]]:
    """The DMAs of an output tile (co-major, rows ``tw`` apart in the buffer) in a packed
    ``(N, Ob, Ho, Wo, B)`` tensor: ``(buffer offset, tensor offset, rows, cols, stride)``. Whole rows
    of several channel blocks merge into one 2-D transfer."""
    first = ((n * ob + o0) * ho + r0) * wo + c0
    if tw == wo:
        return [(0, first, to, th * wo, ho * wo)]
    return [(co * th * tw, first + co * ho * wo, th, tw, wo) for co in range(to)]


def conv_layer(X: Tensor, Wt: Tensor, Y: Tensor, shape: ConvShape, plan: ConvPlan, epi: Epilogue,
               bias: Tensor | None = None, bias_offset: int = 0, wgt_offset: int = 0,
               residual: Tensor | None = None, uop_base: int = 0, bias_map: Tensor | None = None,
               border: BorderFix | None = None) -> None:
    """One layer: ``Y = epilogue(conv(X, Wt) + bias)`` over the plan's tiles (module docstring).

    ``X`` is ``(N, Cb, H, W, B)``, ``Wt`` holds ``(Ob, Cb, KH, KW, B, B)`` blocks from block
    ``wgt_offset``, ``bias`` (None: no bias and no constants) ``Ob`` int32 vectors from vector
    ``bias_offset`` per kind (the bias unless ``shape.bias_map``, then the epilogue's constants: kind
    ``k`` of block ``o`` at ``k*Ob + o``), ``bias_map`` (``shape.bias_map``) ``(Ob, Ho, Wo, B)`` int32
    start values, ``Y`` and ``residual`` are ``(N, Ob, Ho, Wo, B)``; all int8 but the bias; ``border``
    (``shape.border`` kinds of the bias tensor after the constants) corrects the border positions of a
    padded convolution whose input zero point the bias has for the interior. The micro-op tables go to
    ``S.uop`` from ``uop_base``.
    """
    s, p = shape, plan
    assert (residual is not None) == s.residual, "the plan must make room for the residual exactly when there is one"
    taps, cb, ob, ho, wo = s.taps, s.cb, s.ob, s.ho, s.wo
    whole_planes = p.whole_planes
    mine = core_tiles(p, S.num_cores(), S.core_id())
    if not mine:  # several cores, fewer tiles than cores: this core has nothing of this layer to load or run
        return
    uops, table, res_uop = layer_tables(p)
    lo, hi = uop_span(p, len(mine)) if S.num_cores() > 1 else (0, len(uops))
    S.load(S.uop[uop_base + lo:uop_base + hi], S.const(uops, "conv_uops"), offset=lo, cols=hi - lo)
    if residual is not None:
        load_identity_block(p.identity_slot)
    rnd = epi.rounding
    rnd_view = None
    if rnd > IMM_MAX:  # the 16-bit immediate cannot hold it: a constant vector
        rnd_view = S.acc[p.const_slot:p.const_slot + 1]
        const_vector(rnd_view, rnd)
    if epi.scaled_residual is not None:  # its wide per-tensor step values, built once
        for k, v in enumerate(epi.scaled_residual.wide()):
            const_vector(S.acc[p.wide_base + k:p.wide_base + k + 1], v)
    top, left, _, _ = s.pad_sides
    vec_bias = s.bias and not s.bias_map  # the bias is the first kind of the bias tensor
    kinds = (1 if vec_bias else 0) + epi.consts + s.border
    assert (bias is not None) == (kinds > 0) and (bias_map is not None) == s.bias_map
    assert (border.count if border is not None else 0) == s.border and (border is None or vec_bias)
    t = step = 0
    # what each half of the bias slots and of the weight buffer holds: a tile whose bias or weights are
    # already there (the next image, the next rows of one output-channel tile) does not load them again
    bias_in: dict[int, int] = {}
    wgt_in: dict[int, tuple[int, int, int, int]] = {}
    # several cores: by output-channel tiles, or by rows when those are fewer than the cores (core_tiles)
    for n, o0, to, r0, th, c0, tw in mine:
        rwin = window(r0, th, (th - 1) * s.stride + s.kh, s.stride, top, s.kh, s.h)
        cwin = window(c0, tw, p.tw_in, s.stride, left, s.kw, s.w)
        ha = t % p.acc_halves
        t += 1
        base, nvec = p.acc_base(ha), to * th * tw
        tile = S.acc[base:base + nvec]
        dmas = tile_dma(n, o0, to, r0, th, c0, tw, ob, ho, wo)
        # the accumulator's start: bias (+ rounding) broadcast over the tile, or the rounding;
        # the bias slots also hold the epilogue's per-channel constants
        kbase = p.bias_base(ha)
        if bias is not None and bias_in.get(ha) != o0:
            if kinds == 1:
                S.load(S.acc[kbase:kbase + to], bias, offset=bias_offset + o0)
            else:
                S.load(S.acc[kbase:kbase + kinds * to], bias, offset=bias_offset + o0, rows=kinds,
                       cols=to, stride=ob)
            if rnd and vec_bias:
                S.add(S.acc[kbase:kbase + to], rnd_view if rnd_view is not None else rnd)
            bias_in[ha] = o0
        if bias_map is not None:  # per-position start values (zero point meets padding)
            for sram, off, nrows, ncols, stride in tile_dma(0, o0, to, r0, th, c0, tw, ob, ho, wo):
                S.load(S.acc[base + sram:base + sram + nrows * ncols], bias_map, offset=off, rows=nrows,
                       cols=ncols, stride=stride)
            if rnd:
                S.add(tile, rnd_view if rnd_view is not None else rnd)
        elif vec_bias:
            S.mov(tile, S.acc[kbase:kbase + to], iters=(to, th * tw), dst_factors=(th * tw, 1),
                  src_factors=(1, 0))
            if border is not None:
                border_adds(base, base + nvec, kbase + (1 + epi.consts) * to, border, to, r0, th, c0, tw)
        else:
            S.mov(tile, rnd_view if rnd_view is not None else rnd)
        for ci0, tc in p.c_tiles:
            hx = step % p.in_halves
            step += 1
            xb = p.inp_base(hx)
            first = ((n * cb + ci0) * s.h + rwin.start) * s.w + cwin.start
            if whole_planes:  # the windows are whole channel planes, back to back in DRAM and on chip
                S.load(S.inp[xb:xb + tc * p.cb_pitch], X, offset=first, cols=tc * p.cb_pitch)
            for ci in range(0 if whole_planes else tc):
                lo = xb + ci * p.cb_pitch
                if s.row_skip:  # only the rows the 1x1 kernel reads, packed
                    S.load(S.inp[lo:lo + p.cb_pitch], X, offset=first + ci * s.h * s.w, rows=th,
                           cols=cwin.size, stride=s.w * s.stride, pad=(0, 0, cwin.pad0, cwin.pad1))
                    continue
                if cwin.size == s.w and not (rwin.pad0 or rwin.pad1 or cwin.pad0 or cwin.pad1):
                    # whole rows without padding: one run in DRAM and on chip, one row of bursts (as a
                    # strided LOAD, each row would be a burst of its own, paying the read latency)
                    S.load(S.inp[lo:lo + p.cb_pitch], X, offset=first + ci * s.h * s.w, cols=rwin.size * s.w)
                    continue
                S.load(S.inp[lo:lo + p.cb_pitch], X, offset=first + ci * s.h * s.w, rows=rwin.size,
                       cols=cwin.size, stride=s.w, pad=(rwin.pad0, rwin.pad1, cwin.pad0, cwin.pad1))
            wb = p.wgt_base(hx)
            if wgt_in.get(hx) != (o0, to, ci0, tc):
                S.load(S.wgt[wb:wb + to * tc * taps], Wt, offset=wgt_offset + (o0 * cb + ci0) * taps,
                       rows=to, cols=tc * taps, stride=cb * taps)
                wgt_in[hx] = (o0, to, ci0, tc)
            ub = uop_base + table[(ha, hx, tc)]
            S.gemm(S.uop[ub:ub + tw * tc * taps], iters=(th, to), acc_factors=(tw, th * tw),
                   inp_factors=(s.row_pitch_factor * p.tw_in, 0), wgt_factors=(0, tc * taps))
        first_const = kbase + (to if vec_bias else 0)

        def step_op(j: int, op: str, first: int = first_const, per: int = th * tw,
                    tile: AccView = tile, to: int = to) -> None:
            broadcast_alu(op, tile, S.acc[first + j * to:first + (j + 1) * to], to, per)
        apply_epilogue(tile, epi, step_op)
        if residual is not None:
            rb = p.res_base(ha)
            for sram, off, nrows, ncols, stride in dmas:
                S.load(S.inp[rb + sram:rb + sram + nrows * ncols], residual, offset=off, rows=nrows,
                       cols=ncols, stride=stride)
            res_gemm = S.uop[uop_base + res_uop[ha]:uop_base + res_uop[ha] + 1]
            if epi.scaled_residual is None:
                S.gemm(res_gemm, iters=(nvec, 1), acc_factors=(1, 0), inp_factors=(1, 0))
                clamp(tile, epi.residual_relu, True)
            else:
                rab = p.res_acc_base
                scaled_residual_adds(epi.scaled_residual, tile, S.acc[rab:rab + nvec], nvec, res_gemm,
                                     p.wide_base)
        for sram, off, nrows, ncols, stride in dmas:
            S.store(Y, S.acc[base + sram:base + sram + nrows * ncols], offset=off, rows=nrows,
                    cols=ncols, stride=stride)
