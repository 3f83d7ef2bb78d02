"""The network compiler: a :class:`compiler.graph.Graph` -> ONE Program running every layer.

Steps (:func:`compile_network`):

1. **Stages.** The graph's layers fuse into hardware stages, each one section of the
   instruction stream named after its main layer: a convolution or dense layer with the
   requantize and ReLUs that follow it (the conv engine's epilogue; a convolution also with a
   residual add of an activation already stored, when the sum is only clipped and ReLU'd, as in
   a ResNet basic block), a pooling layer with a following ReLU, an elementwise stage (a
   residual add with its requantize and ReLU, a standalone requantize/ReLU of an int8 value, or
   the copy of an output another layer also reads), a flatten. An int32 value must go through
   exactly one requantize before anything else reads it (one line naming the layer if not).
2. **Layouts.** Activations ``(C, H, W)`` are packed ``(N, C/B, H, W, B)``; a flat value is the
   matrix layout, ``(F/B, N)`` vectors (feature-block major: a dense layer loads many samples per
   weight block). ``flatten`` transposes the packed activation, ``N`` x ``C/B*H*W`` vectors, into
   that layout (one GEMM through the identity block per tile of samples) keeping the packed
   feature order (channel block, row, column, lane); the dense layer that reads it gets its weight
   columns permuted to that order at compile time (zero columns for padding channels).
3. **DRAM.** Regions: one per graph input and output, ``weights`` (every layer's packed int8
   blocks, placed once), ``biases`` (int32), ``act`` (the intermediate activations) and the
   constants. Intermediate activations get offsets in ``act`` by liveness (first fit over the
   stages: a value's memory is free once the last stage reading it is done), so buffers are
   reused; both sizes (with and without reuse) are reported.
4. **Kernel.** One kernel issues the stages in order (the conv engine, :mod:`compiler.stream_engine`)
   on views of those regions; the compiler's dependency tokens track DRAM by address, so the loads
   of a stage wait only for the stores (of the previous stages) they read, and reused memory is
   written only after its last reader is done. Micro-op tables go to consecutive parts of the
   micro-op buffer, so one stage's table load does not wait for the previous stage's GEMMs.

Real scales, zero points and ONNX names (docs/network.md): a requantization by a real scale is
MULHR steps in the epilogue (:func:`compiler.fixed_point.alu_steps`), zero points of a convolution's
or dense layer's input fold into its bias at compile time (with a border correction where they meet
padding), and graph inputs and outputs get regions named by identifiers made from their names
(:func:`region_names`).

The golden path runs the same kernel on numpy (:meth:`NetworkProgram.run_golden`); the reference
is :mod:`compiler.graph_reference`, written from the graph's definitions.
"""

from __future__ import annotations

import inspect
import keyword
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from compiler import dsl as S
from compiler import packing as P
from compiler.build import build
from compiler.conv_engine import BorderFix, Epilogue, ScaledResidual, conv_layer
from compiler.conv_plan import ConvPlan, ConvShape, PlanError, plan_conv
from compiler.errors import CompileError, ConfigFitError
from compiler.fixed_point import alu_steps
from compiler.gemm_reference import wrap32
from compiler.graph import Graph, Layer, Value, rescale_bound
from compiler.kernel import Kernel
from compiler.ops import IMM_MAX, IMM_MIN
from compiler.stream_engine import (Constants, OperandScale, PoolPlan, eltwise_layer, eltwise_tile, eltwise_uops,
                                    plan_pool, pool_layer, stream_constants, transpose_layer, transpose_tile)
from compiler.tensor import Tensor, tensor
from compiler.trace import CONST_REGION
from hw.config import HwConfig, load_config
from hw.program import Program

RESERVED = ("weights", "biases", "act", CONST_REGION, "insn")
# SPATIAL: (C, H, W) packed (N, C/B, H, W, B); BLOCKS: (F,) as (F/B, N) vectors in natural feature order;
# PACKED_BLOCKS: a flattened (C, H, W) as (C/B*H*W, N) vectors, features in packed order
# IM2COL: a graph input read only by a convolution, packed by the host with the window taps in the
# channels, (N, C*K*K/B, Ho, Wo, B), so the convolution is a 1x1 one; shape (C, H, W, K, stride, top, left,
# bottom, right, zero point): the host pads with the input's zero point
SPATIAL, BLOCKS, PACKED_BLOCKS, IM2COL = "spatial", "blocks", "packed_blocks", "im2col"
Layout = tuple[str, tuple[int, ...]]  # (kind, shape; PACKED_BLOCKS: the (C, H, W) it was flattened from)


@dataclass(eq=False)
class Stage:
    """One hardware stage: ``op`` (conv2d, dense, max_pool, avg_pool, eltwise), the graph layers it
    runs (``layers[0]`` the main one, whose name is the stage's), the values it reads and the int8
    value it writes, its epilogue and plan."""

    name: str
    op: str
    layers: list[Layer]
    inputs: list[Value]
    output: Value
    epi: Epilogue
    plan: ConvPlan | PoolPlan | None = None
    shape: ConvShape | None = None
    weight: np.ndarray | None = None  # packed
    bias: np.ndarray | None = None    # packed: the bias and the epilogue's per-channel constants
    bias_map: np.ndarray | None = None  # packed per-position start values (zero point meets padding)
    border: BorderFix | None = None  # or the border's corrections (their vectors in ``bias``)
    scales: list[OperandScale] | None = None  # an elementwise stage's operands rescaled before the sum
    uop_base: int = 0
    uops: int = 0


@dataclass
class Storage:
    """Where a materialized value lives: ``region`` and first vector there, vectors."""

    region: str
    offset: int
    nvec: int
    shape: tuple[int, ...]  # the packed shape of the region (graph inputs and outputs) or view


@dataclass
class NetworkProgram:
    """A compiled network: the Program, and how natural arrays go in and come out."""

    graph: Graph
    config: HwConfig
    batch: int
    program: Program
    kernel: Kernel
    stages: list[Stage]
    layouts: dict[str, tuple[str, tuple[int, ...]]]  # region name -> (layout, per-sample shape as stored)
    consts: dict[str, np.ndarray] = field(default_factory=dict)  # weights, biases
    regions: dict[str, str] = field(default_factory=dict)  # graph input/output name -> its region's name

    def region_name(self, name: str) -> str:
        """The DRAM region (and kernel argument) of the graph input or output ``name``: the name itself
        when it is an identifier, else one made from it."""
        return self.regions.get(name, name)

    def _pack(self, name: str, a: np.ndarray) -> np.ndarray:
        layout, shape = self.layouts[self.region_name(name)]
        want = (self.batch, *next(v.shape for v in self.graph.inputs if v.name == name))
        a = np.asarray(a)
        if a.shape != want or a.dtype != np.int8:
            raise CompileError(f"network '{self.graph.name}': input '{name}' must be int8 of shape {want}, got "
                               f"{a.dtype} {a.shape}")
        return pack_value(a, layout, shape, self.config.block)

    def packed_inputs(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The input regions' arrays (by region name) for natural ``(batch, *shape)`` int8 inputs (by graph
        input name)."""
        missing = [v.name for v in self.graph.inputs if v.name not in inputs]
        if missing:
            raise CompileError(f"network '{self.graph.name}': missing input(s) {', '.join(missing)}")
        return {self.region_name(v.name): self._pack(v.name, inputs[v.name]).reshape(
            self.program.region(self.region_name(v.name)).shape) for v in self.graph.inputs}

    def set_inputs(self, inputs: dict[str, np.ndarray]) -> None:
        """Attach natural ``(batch, *shape)`` int8 inputs to the Program."""
        for name, a in self.packed_inputs(inputs).items():
            self.program.set_input(name, a)

    def outputs(self, regions: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Natural ``(batch, *shape)`` int8 outputs (by graph output name) from a run's output regions (by
        region name)."""
        out = {}
        for v in self.graph.outputs:
            r = self.region_name(v.name)
            layout, shape = self.layouts[r]
            out[v.name] = unpack_value(np.asarray(regions[r]), layout, shape, self.batch, self.config.block)
        return out

    def run_golden(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The golden (PySim) path: the network's kernel called on numpy; natural outputs."""
        args: dict[str, Any] = {**self.packed_inputs(inputs), **self.consts}
        names = [self.region_name(v.name) for v in self.graph.outputs]
        for rn in names:
            r = self.program.region(rn)
            args[rn] = np.zeros(r.shape, dtype=r.dtype)
        tensors = self.kernel.run_golden(self.config, args)
        return self.outputs({rn: tensors[rn].data.reshape(-1)[:args[rn].size].reshape(args[rn].shape)
                             for rn in names})


# ---- layouts ------------------------------------------------------------------------------------
def pack_value(a: np.ndarray, layout: str, shape: tuple[int, ...], block: int) -> np.ndarray:
    """Natural ``(N, *shape)`` -> the layout's packed array."""
    if layout == SPATIAL:
        return P.pack_activation(a, block)
    if layout == BLOCKS:
        return P.pack_matrix(a, block)
    if layout == IM2COL:
        k, stride, top, left, bottom, right, zx = shape[3:]
        return P.pack_activation(im2col(a, k, stride, (top, left, bottom, right), zx), block)
    raise CompileError(f"a network input cannot have layout {layout}")


def im2col(x: np.ndarray, k: int, stride: int, pad: int | tuple[int, int, int, int], fill: int = 0) -> np.ndarray:
    """NCHW ``x`` -> ``(N, C*K*K, Ho, Wo)``: channel ``(c*K + ky)*K + kx`` of output pixel ``(i, j)`` is
    the input at ``(c, i*stride + ky - top, j*stride + kx - left)``, padded with ``fill`` (the input's
    zero point, so that a padded tap contributes ``(fill - zero point) * w = 0``); ``pad`` an int or
    ``(top, left, bottom, right)``."""
    top, left, bottom, right = (pad,) * 4 if isinstance(pad, int) else pad
    n, c, h, w = x.shape
    xp = np.full((n, c, h + top + bottom, w + left + right), fill, dtype=x.dtype)
    xp[:, :, top:top + h, left:left + w] = x
    ho, wo = (h + top + bottom - k) // stride + 1, (w + left + right - k) // stride + 1
    taps = [xp[:, :, ky:ky + stride * (ho - 1) + 1:stride, kx:kx + stride * (wo - 1) + 1:stride]
            for ky in range(k) for kx in range(k)]
    return np.ascontiguousarray(np.stack(taps, axis=2).reshape(n, c * k * k, ho, wo))


def im2col_pays(c: int, k: int, block: int) -> bool:
    """Whether a convolution over ``c`` input channels with a ``k x k`` kernel runs fewer GEMM blocks
    on the host's im2col of its input (a 1x1 convolution over ``c*k*k`` channels)."""
    return P.blocks(c * k * k, block) < P.blocks(c, block) * k * k


def unpack_value(y: np.ndarray, layout: str, shape: tuple[int, ...], batch: int, block: int) -> np.ndarray:
    """The layout's packed array -> natural ``(N, *shape)``."""
    if layout == SPATIAL:
        c, h, w = shape
        return P.unpack_activation(y.reshape(batch, P.blocks(c, block), h, w, block), c)
    if layout == BLOCKS:
        return P.unpack_matrix(y.reshape(1, -1, batch, 1, block), shape[0])
    order = packed_feature_order(shape, block)  # type: ignore[arg-type]  # PACKED_BLOCKS: shape is the origin
    hw = np.ascontiguousarray(y.reshape(-1, batch, block).transpose(1, 0, 2)).reshape(batch, -1)
    out = np.zeros((batch, int(np.prod(shape))), dtype=hw.dtype)
    out[:, order[order >= 0]] = hw[:, order >= 0]
    return out


def packed_feature_order(origin: tuple[int, int, int], block: int) -> np.ndarray:
    """For a flattened packed ``(C, H, W)`` activation: the natural (C, H, W order) index of every
    feature in packed order (channel block, row, column, lane), -1 for padding channels."""
    c, h, w = origin
    cb = P.blocks(c, block)
    kb, y, x, b = np.meshgrid(np.arange(cb), np.arange(h), np.arange(w), np.arange(block), indexing="ij")
    ch = kb * block + b
    return np.where(ch < c, ch * h * w + y * w + x, -1).ravel()


# ---- fusion -------------------------------------------------------------------------------------
def _chain(g: Graph, v: Value) -> tuple[list[Layer], Value]:
    """The ReLUs and (at most one, on an int32 value) requantize that follow ``v`` with nothing else
    reading the values in between: (those layers, the last value)."""
    layers: list[Layer] = []
    cur = v
    while cur not in g.outputs:
        cons = g.consumers(cur)
        if len(cons) != 1:
            break
        c = cons[0]
        if not (c.op == "relu" or (c.op == "requantize" and cur.dtype == "int32")):
            break
        layers.append(c)
        cur = c.output  # type: ignore[assignment]
    return layers, cur


def _fits_imm(v: int) -> bool:
    return IMM_MIN <= v <= IMM_MAX


def _per_tensor(g: Graph, layer: Layer, steps: list[tuple[str, np.ndarray]]) -> tuple[tuple[str, int], ...]:
    """Steps with one value each (an elementwise or pooling stage rescales by one scale)."""
    if any(np.unique(v).size > 1 for _, v in steps):
        raise g.error(layer.name, "a per-channel scale is lowered only on a convolution's or dense layer's "
                                  "accumulators (this value is int8 or a sum: give one scale)")
    return tuple((op, int(v.ravel()[0])) for op, v in steps)


def _rounding_shift(steps: tuple[tuple[str, int], ...], zero_point: int, bound: int
                    ) -> tuple[tuple[tuple[str, int], ...], int]:
    """Per-tensor steps of a power-of-two scale, ``SHR -h``, ``MULHR 2**30``, ``MULHR 2**(31-m)`` (``h >= 1``),
    are the rounding shift ``(x + 2**(s-1)) >> s`` with ``s = m - h + 1`` (the first MULHR halves the even
    ``x << h`` exactly, the second rounds ``x << (h-1)`` by ``2**m``): two passes, ``ADD`` and ``SHR``,
    and the zero point ``z`` added after folds into the ``ADD`` (``((x + c) >> s) + z = (x + c + z*2**s) >> s``).
    Returns the steps and zero point to apply (unchanged unless that holds for every ``|x| <= bound``,
    which is also checked on the ALU's semantics)."""
    from compiler.fixed_point import run_steps

    if len(steps) != 3 or steps[0][0] != "SHR" or steps[1] != ("MULHR", 1 << 30) or steps[2][0] != "MULHR":
        return steps, zero_point
    h, v = -steps[0][1], steps[2][1]
    if h < 1 or v < 1 or v & (v - 1):
        return steps, zero_point
    s = (31 - (v.bit_length() - 1)) - h + 1
    add = (1 << (s - 1)) + zero_point * (1 << s) if s >= 1 else 0
    if s < 1 or bound << h >= 1 << 31 or bound + abs(add) >= 1 << 31 or not _fits_imm(s):
        return steps, zero_point
    short = (("ADD", add), ("SHR", s))
    x = np.unique(np.concatenate([np.linspace(-bound, bound, 4097).astype(np.int64), [-bound, -1, 0, 1, bound]]))
    ops = [(op, np.array([val])) for op, val in steps]
    if not np.array_equal(run_steps(x, ops) + zero_point, run_steps(x, [(op, np.array([val])) for op, val in short])):
        return steps, zero_point
    return short, 0


def _epilogue(g: Graph, layers: list[Layer], channels: int) -> tuple[Epilogue, list[OperandScale] | None]:
    """The epilogue of a stage running ``layers`` (the main layer, then the fused ReLUs and requantize),
    and the rescaling of an elementwise stage's operands (a scaled add), for values of ``channels``
    channels. Graphs without real scales or zero points get exactly the epilogue they always had.

    ReLUs on the int32 value before a requantization become a ``floor`` (a MAX before it), ReLUs after it
    raise the clip's bounds (``max(clip(v, lo, hi), z) = clip(v, max(lo, z), max(hi, z))``)."""
    main = layers[0]
    rq = next((x for x in layers if x.op == "requantize"), None)
    pre: list[int] = []
    post: list[int] = []
    for x in layers:
        if x.op == "relu":
            (post if rq is None or layers.index(x) > layers.index(rq) else pre).append(x.params["zero_point"])
    scaled_add = main.op == "add" and main.params["a_scale"] is not None
    scaled_pool = main.op == "avg_pool" and main.params["scale"] is not None
    shift = rq.params["shift"] if rq is not None else 0
    if shift is not None and not any(pre) and not any(post) and not scaled_add and not scaled_pool:
        return Epilogue(shift, bool(pre or post), clip=True), None  # the power-of-two path, as always
    lo, hi, zp, offset = -128, 127, 0, 0
    steps: tuple = ()
    per_channel = main.op in ("conv2d", "dense")
    if rq is not None and shift is None:
        p = rq.params
        lo, hi, zp, offset = p["lo"], p["hi"], p["zero_point"], -p["input_zero_point"]
        bound = rescale_bound(rq)
        st = alu_steps(np.broadcast_to(np.asarray(p["scale"], dtype=np.float64), (channels,)) if per_channel
                       else np.asarray(p["scale"], dtype=np.float64), bound if per_channel else int(np.max(bound)))
        if np.all(np.asarray(p["scale"]) == 1.0) and int(np.max(bound)) < 1 << 30:
            st = []  # R(x, 1) = x exactly while its doubling cannot wrap: no ALU pass at all
        steps = (tuple((op, tuple(int(x) for x in v)) for op, v in st) if per_channel
                 else _per_tensor(g, rq, st))
        if not per_channel:
            steps, zp = _rounding_shift(steps, zp, int(np.max(bound)))
    if scaled_pool:
        p = main.params
        zp, offset = p["zero_point"], -p["input_zero_point"] * p["kernel"] ** 2
        steps, zp = _rounding_shift(_per_tensor(g, main, alu_steps(p["scale"], rescale_bound(main))), zp,
                                    int(rescale_bound(main)))
    if post:
        lo, hi = max(lo, *post), max(hi, *post)
    floor = None
    if pre:
        # in the accumulator's domain: after the offset, and with the shift's rounding term already added
        floor = max(pre) + offset + ((1 << (shift - 1)) if shift else 0)
        if not _fits_imm(floor):
            raise g.error(rq.name if rq else main.name, f"a ReLU floor of {floor} before the requantization is not "
                                                        f"lowered (the ALU's immediate is 16 bits)")
    epi = Epilogue(shift or 0, False, clip=True, floor=floor, steps=steps, zero_point=zp, lo=lo, hi=hi,
                   offset=offset)
    scales = None
    if scaled_add:
        p = main.params
        scales = [OperandScale(p[f"{k}_zero_point"],
                               _per_tensor(g, main, alu_steps(p[f"{k}_scale"], 128 + abs(p[f"{k}_zero_point"]))))
                  for k in "ab"]
    return epi, scales


def _residual(g: Graph, v: Value, ready: set[Value]) -> tuple[list[Layer], Value, Value, bool] | None:
    """A residual add the convolution whose int8 result is ``v`` can finish in its epilogue (the conv
    engine adds a residual, then ReLU and clip): ``v`` read only by an ``add`` whose other operand is
    already stored (in ``ready``); without scales followed by a requantize by 0 (the clip) and ReLUs (to
    0), with scales (a quantized add) by one real-scale requantize and ReLUs. Returns (the layers, the
    final value, the residual operand, ReLU) or None."""
    cons = g.consumers(v)
    if v in g.outputs or len(cons) != 1 or cons[0].op != "add":
        return None
    add = cons[0]
    other = [u for u in add.inputs if u is not v]
    if len(other) != 1 or other[0] not in ready:
        return None
    layers, end = _chain(g, add.output)  # type: ignore[arg-type]
    rq = [x for x in layers if x.op == "requantize"]
    relus = [x for x in layers if x.op == "relu"]
    if len(rq) != 1 or end.dtype != "int8":
        return None
    if add.params["a_scale"] is not None:
        return ([add, *layers], end, other[0], bool(relus)) if rq[0].params["shift"] is None else None
    if rq[0].params["shift"] != 0 or any(x.params["zero_point"] for x in relus):
        return None
    return [add, *layers], end, other[0], bool(relus)


def _scaled_residual(g: Graph, conv_epi: Epilogue, v: Value, fused: list[Layer]) -> Epilogue | None:
    """The epilogue of a convolution (``conv_epi``, its int8 result ``v``) that also finishes the quantized
    add ``fused[0]`` and its requantization (``fused[1:]``), or None when the immediates do not hold its
    offsets. Exactly the elementwise stage's arithmetic; where the convolution's output zero point is the
    add's zero point of ``v`` (as a quantized model has it) the two cancel: the convolution clips to
    ``[lo - z, hi - z]`` and adds no zero point (``clip(t + z, lo, hi) - z = clip(t, lo - z, hi - z)``)."""
    add = fused[0]
    final, scales = _epilogue(g, fused, v.shape[0])
    assert scales is not None
    mine = 0 if add.inputs[0] is v else 1
    a, b = scales[mine], scales[1 - mine]
    if not all(_fits_imm(x) for x in (final.offset, a.zero_point, b.zero_point)):
        return None
    epi, a_zp = conv_epi, a.zero_point
    if a_zp and a_zp == epi.zero_point and not epi.relu and epi.clip:
        epi = replace(epi, zero_point=0, lo=epi.lo - a_zp, hi=epi.hi - a_zp)
        a_zp = 0
    return replace(epi, scaled_residual=ScaledResidual(a_zp, a.steps, b.zero_point, b.steps, final))


def _weights_fit(cfg: HwConfig | None, layer: Layer) -> bool:
    """Whether a quantized add fused into the convolution ``layer`` pays on ``cfg``: its residual region
    narrows the output tiles, and a layer that streams many times the weight buffer from DRAM then streams
    its weights more often. Measured on ResNet-18 (one image, TLM): fused, the blocks of stages 1 to 3
    (weights up to 2.25 times the weight buffer) take 6 to 67 k cycles fewer than with the add as an
    elementwise stage, those of stage 4 (9 times) 60 to 95 k more; hence at most 4 times."""
    return cfg is None or layer.params["weight"].size <= 4 * cfg.wgt_depth * cfg.block * cfg.block


def _fuse(g: Graph, cfg: HwConfig | None = None) -> list[Stage]:
    """The graph's stages in order (``cfg``: the config the fusions are chosen for)."""
    stages: list[Stage] = []
    absorbed: set[Layer] = set()
    ready: set[Value] = set(g.inputs)  # values stored when the next stage starts
    for layer in g.layers:
        if layer.op == "input" or layer in absorbed:
            continue
        if layer.op == "flatten":
            stages.append(Stage(layer.name, "flatten", [layer], list(layer.inputs), layer.output, Epilogue()))
            ready.add(layer.output)  # type: ignore[arg-type]
            continue
        out = layer.output
        assert out is not None
        chain, cur = _chain(g, out)
        fused = [layer, *chain]
        if cur.dtype != "int8":
            users = [c.name for c in g.consumers(cur)]
            why = (f"feeds {len(users)} layers ({', '.join(users)}); requantize it once and share the int8 value"
                   if len(users) > 1 else f"feeds '{users[0]}' ({g.consumers(cur)[0].op}), which takes int8"
                   if users else "is an output")
            raise g.error(fused[-1].name, f"its int32 result must be requantized before anything else reads it: "
                                          f"it {why}")
        op = layer.op if layer.op in ("conv2d", "dense", "max_pool", "avg_pool") else "eltwise"
        epi, scales = _epilogue(g, fused, out.shape[0])
        inputs = list(layer.inputs)
        res = _residual(g, cur, ready) if op == "conv2d" else None
        if res is not None and res[0][0].params["a_scale"] is not None:  # a quantized add
            scaled = _scaled_residual(g, epi, cur, res[0]) if _weights_fit(cfg, layer) else None
            if scaled is None:
                res = None
            else:
                epi = scaled
        if res is not None:
            more, cur, r, res_relu = res
            fused += more
            inputs.append(r)
            if epi.scaled_residual is None:
                epi = replace(epi, clip=True, residual_relu=res_relu)
        absorbed.update(fused)
        stages.append(Stage(layer.name, op, fused, inputs, cur, epi, scales=scales))
        ready.add(cur)
    return stages


# ---- planning -----------------------------------------------------------------------------------
def _vectors(layout: str, shape: tuple[int, ...], batch: int, block: int) -> int:
    """Vectors of ``batch`` samples of a value stored in ``layout``."""
    if layout == BLOCKS:
        return P.blocks(shape[0], block) * batch
    if layout == IM2COL:
        c, h, w, k, s, top, left, bottom, right, _ = shape
        ho, wo = (h + top + bottom - k) // s + 1, (w + left + right - k) // s + 1
        return batch * P.blocks(c * k * k, block) * ho * wo
    c, h, w = shape[:3]
    return batch * P.blocks(c, block) * h * w


def _without_offset(epi: Epilogue) -> Epilogue:
    return replace(epi, offset=0)


BORDER_KINDS_MAX = 16  # border-correction vectors per channel block beyond which the start map is used


def _outside(n_out: int, stride: int, before: int, k: int, extent: int) -> list[frozenset[int]]:
    """Per output row (or column): the kernel rows (columns) that fall outside the input."""
    return [frozenset(t for t in range(k) if not 0 <= i * stride - before + t < extent) for i in range(n_out)]


def _classes(sets: list[frozenset[int]]) -> tuple[list[int], list[frozenset[int]]]:
    """Class index per entry (0: nothing outside) and the classes' sets (index 0: the empty set)."""
    order = [frozenset()]
    for x in sets:
        if x not in order:
            order.append(x)
    return [order.index(x) for x in sets], order


def _folded_bias(layer: Layer, epi: Epilogue, host_padded: bool
                 ) -> tuple[np.ndarray | None, np.ndarray | None, tuple[BorderFix, list[np.ndarray]] | None]:
    """The int64 bias of a convolution or dense layer with its zero points folded in: the input's
    (``-zx * sum of the weights`` over the taps inside the input) and the requantization's
    (``epi.offset``). Returns ``(bias per channel or None, start map or None, border fix or None)``:

    * no padding (or a dense layer, or ``host_padded``: the host pads an im2col input with the zero
      point) or ``zx == 0``: one bias vector per channel, exact everywhere;
    * a padded convolution with ``zx != 0``: the bias has the interior value and a
      :class:`compiler.conv_engine.BorderFix` (with its correction per kind, ``(O,)`` each) adds
      ``zx`` times the weights of the outside taps at the border; when that needs more than
      :data:`BORDER_KINDS_MAX` kinds, a per-position start map ``(O, Ho, Wo)`` instead."""
    p = layer.params
    wt = p["weight"].astype(np.int64)
    zx = p["input_zero_point"]
    o = wt.shape[0]
    bias = (np.zeros(o, dtype=np.int64) if p["bias"] is None else p["bias"].astype(np.int64)) + epi.offset
    changed = p["bias"] is not None or epi.offset != 0
    if zx:
        bias = bias - zx * wt.reshape(o, -1).sum(axis=1)  # every tap inside: the interior value
        changed = True
    if not (zx and layer.op == "conv2d" and any(p["pads"]) and not host_padded):
        return (bias if changed else None), None, None
    c, h, w = layer.inputs[0].shape
    _, ho, wo = layer.output.shape
    top, left, _, _ = p["pads"]
    s, k = p["stride"], wt.shape[2]
    wsum = wt.sum(axis=1)  # (O, K, K)
    rows, row_sets = _classes(_outside(ho, s, top, k, h))
    cols, col_sets = _classes(_outside(wo, s, left, k, w))
    pairs = sorted({(rc, cc) for rc in set(rows) for cc in set(cols)} - {(0, 0)})

    def correction(rc: int, cc: int) -> np.ndarray:
        out = np.zeros((k, k), dtype=bool)
        out[list(row_sets[rc]), :] = True
        out[:, list(col_sets[cc])] = True
        return zx * (wsum * out).sum(axis=(1, 2))

    if len(pairs) <= BORDER_KINDS_MAX:
        fix = BorderFix(tuple(rows), tuple(cols), tuple((pc, j) for j, pc in enumerate(pairs)))
        return bias, None, (fix, [correction(*pc) for pc in pairs])
    # per position: the interior value plus the border's correction
    start = np.repeat(np.repeat(bias[:, None, None], ho, axis=1), wo, axis=2)
    for i in range(ho):
        for j in range(wo):
            if rows[i] or cols[j]:
                start[:, i, j] += correction(rows[i], cols[j])
    return None, wrap32(start).astype(np.int32), None


def _plan_stage(st: Stage, cfg: HwConfig, batch: int, g: Graph, layouts: dict[Value, Layout]) -> None:
    """The stage's plan, packed weights and layouts; PlanError/CompileError name the layer."""
    block = cfg.block
    main = st.layers[0]
    try:
        if st.op in ("conv2d", "dense"):
            x = st.inputs[0]
            wt, bias = main.params["weight"], main.params["bias"]
            bias, bias_map, border = _folded_bias(main, st.epi, layouts[x][0] == IM2COL)
            consts = [np.array(v, dtype=np.int64) for _, v in st.epi.steps]
            st.border = border[0] if border is not None else None
            st.epi = _without_offset(st.epi)  # the offset is in the bias now
            if st.op == "conv2d":
                c, h, w = x.shape
                k, s, pad = wt.shape[2], main.params["stride"], main.params["pad"]
                pads = main.params["pads"]
                residual = len(st.inputs) > 1
                flags = dict(bias=bias is not None or bias_map is not None, rounding_const=st.epi.rounding > IMM_MAX,
                             residual=residual, residual_acc=st.epi.scaled_residual is not None,
                             wide_consts=len(st.epi.scaled_residual.wide()) if st.epi.scaled_residual else 0,
                             alu_passes=st.epi.alu_passes(residual), bias_map=bias_map is not None,
                             consts=len(consts), border=border[0].count if border is not None else 0)
                o, ho, wo = st.output.shape
                if layouts[x][0] == IM2COL:  # the host put the taps in the channels: a 1x1 convolution
                    shape = ConvShape(batch, P.blocks(c * k * k, block), ho, wo, P.blocks(o, block), 1, 1, 1, 0,
                                      **flags)
                    st.weight = P.pack_conv_weights(wt.reshape(o, c * k * k, 1, 1), block)
                else:
                    sym = isinstance(pad, int)
                    shape = ConvShape(batch, P.blocks(c, block), h, w, P.blocks(o, block), k, k, s,
                                      pad if sym else pads[0], pads=None if sym else tuple(pads), **flags)
                    st.weight = P.pack_conv_weights(wt, block)
                if bias_map is not None:
                    st.bias_map = P.pack_activation(bias_map[None], block).reshape(-1)
            else:
                layout, origin = layouts[x]
                if layout == PACKED_BLOCKS:
                    order = packed_feature_order(origin, block)  # type: ignore[arg-type]
                    full = np.zeros((wt.shape[0], order.size), dtype=np.int8)
                    full[:, order >= 0] = wt[:, order[order >= 0]]
                    kb = order.size // block
                else:
                    full = wt
                    kb = P.blocks(wt.shape[1], block)
                shape = ConvShape(1, kb, batch, 1, P.blocks(wt.shape[0], block), 1, 1, 1, 0, bias=bias is not None,
                                  rounding_const=st.epi.rounding > IMM_MAX, alu_passes=st.epi.alu_passes(False),
                                  consts=len(consts))
                st.weight = P.pack_dense_weights(full, block)
            kinds = ([] if bias is None else [bias]) + consts + (border[1] if border is not None else [])
            st.bias = np.concatenate([P.pack_bias(wrap32(v).astype(np.int32), block) for v in kinds]) if kinds else None
            st.shape = shape
            st.plan = plan_conv(cfg, shape)
            st.uops = st.plan.uop_used()
            layouts[st.output] = (SPATIAL, st.output.shape) if st.op == "conv2d" else (BLOCKS, st.output.shape)
        elif st.op in ("max_pool", "avg_pool"):
            c, h, w = st.inputs[0].shape
            st.plan = plan_pool(cfg, batch, P.blocks(c, block), h, w, main.params["kernel"], main.params["stride"],
                                st.op == "max_pool", Constants.count(stream_constants(st.epi)),
                                main.params.get("pads", (0, 0, 0, 0)))
            st.uops = st.plan.halves * st.plan.uops_per_table
            layouts[st.output] = (SPATIAL, st.output.shape)
        elif st.op == "flatten":
            c, h, w = st.inputs[0].shape
            transpose_tile(cfg, P.blocks(c, block) * h * w)
            st.uops = 2
            layouts[st.output] = (PACKED_BLOCKS, st.inputs[0].shape)
        else:
            found = {layouts[v] for v in st.inputs}
            if len(found) > 1:
                raise g.error(main.name, "its operands order their features differently (a flattened activation "
                                         "and a dense layer's output)")
            scaled = st.scales is not None or not st.epi.plain
            eltwise_tile(cfg, len(st.inputs), st.epi.rounding > IMM_MAX and not scaled,
                         Constants.count(stream_constants(st.epi, st.scales)) if scaled else 0, st.scales is not None)
            st.uops = eltwise_uops(len(st.inputs))
            layouts[st.output] = found.pop()  # elementwise: stored as its operands are
    except PlanError as e:
        # a window of padding only is the layer's geometry, not the config's size: no config would hold it
        kind = CompileError if "are all padding" in str(e) else ConfigFitError
        raise g.error(main.name, f"cannot be tiled on config '{cfg.name}': {e}", kind) from None


def _largest(sizes: list[tuple[str, int]], count: int = 3) -> str:
    """``'a' 1,024 bytes, 'b' 512 bytes`` for the ``count`` largest (name, bytes)."""
    top = sorted(sizes, key=lambda t: -t[1])[:count]
    return ", ".join(f"'{n}' {b:,} bytes" for n, b in top)


def _first_fit(intervals: list[tuple[int, int, int, Any]]) -> tuple[dict[Any, int], int]:
    """Offsets for ``(first stage, last stage, size, key)`` blocks so that blocks alive in overlapping
    stage ranges never overlap; returns the offsets and the total size."""
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, first, last)
    out: dict[Any, int] = {}
    end = 0
    for first, last, size, key in sorted(intervals, key=lambda t: (t[0], -t[2])):
        busy = sorted((o, o + s) for o, s, f, l in placed if not (l < first or last < f))
        off = 0
        for lo, hi in busy:
            if off + size <= lo:
                break
            off = max(off, hi)
        out[key] = off
        placed.append((off, size, first, last))
        end = max(end, off + size)
    return out, end


_PROGRAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")  # the graph names that were always the Program's


def identifier(name: str, taken: set[str]) -> str:
    """An identifier made from ``name`` (a region, kernel argument or Program name), not in ``taken``
    nor a reserved region name: ``name`` itself when it already is one."""
    plain = name.isascii() and name.isidentifier() and not keyword.iskeyword(name)
    base = name if plain else re.sub(r"\W+", "_", name, flags=re.ASCII).strip("_")
    base = base[:48] or "value"
    if not base.isidentifier() or keyword.iskeyword(base):
        base = "v_" + base
    out, k = base, 2
    while out in taken or out in RESERVED:
        out, k = f"{base}_{k}", k + 1
    return out


def region_names(g: Graph) -> dict[str, str]:
    """Graph input and output name -> its DRAM region's name (unique identifiers)."""
    taken: set[str] = set()
    out: dict[str, str] = {}
    for v in [*g.inputs, *g.outputs]:
        out[v.name] = identifier(v.name, taken)
        taken.add(out[v.name])
    return out


def check_int8_outputs(cfg: HwConfig, network: str) -> None:
    """A network's activations between layers are int8 tensors that STOREs write: a config whose outputs
    are wider (``out_width``) is refused in one line naming the network and the config."""
    if cfg.out_width != 8:
        raise CompileError(f"network '{network}': needs a config with int8 outputs (out_width 8); config "
                           f"'{cfg.name}' has out_width {cfg.out_width}")


MAX_BATCH = 65535  # samples of one network Program


def compile_network(graph: Graph, config: HwConfig | str = "default", batch: int = 1,
                    name: str | None = None) -> NetworkProgram:
    """Compile ``graph`` for ``batch`` samples into one Program (module docstring)."""
    cfg = config if isinstance(config, HwConfig) else load_config(config)
    g = graph
    if not isinstance(g, Graph):
        raise CompileError(f"compile_network takes a compiler.graph.Graph, got {type(g).__name__}")
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or not 1 <= batch <= MAX_BATCH:
        raise CompileError(f"network '{g.name}': batch {batch!r} must be an integer 1..{MAX_BATCH}")
    batch = int(batch)
    g.check()
    check_int8_outputs(cfg, g.name)
    for v in g.inputs:  # before any planning, whose cost grows with the tensors
        need = batch * math.prod(v.shape)
        if need > cfg.dram_bytes:
            raise CompileError(f"network '{g.name}': input '{v.name}' ({batch} x {'x'.join(map(str, v.shape))} int8, "
                               f"{need:,} bytes) does not fit the {cfg.dram_bytes:,}-byte DRAM of config "
                               f"'{cfg.name}'")
    rname = region_names(g)
    block = cfg.block
    stages = _fuse(g, cfg)
    layouts: dict[Value, Layout] = {v: (SPATIAL if len(v.shape) == 3 else BLOCKS, v.shape) for v in g.inputs}
    readers: dict[Value, list[Stage]] = {}  # stored value -> the stages reading it
    for st in stages:
        for v in st.inputs:
            readers.setdefault(v, []).append(st)
    for v in g.inputs:  # an input only a convolution reads: the host packs it im2col when that pays
        st = readers[v][0]
        if len(readers[v]) == 1 and st.op == "conv2d" and st.inputs[0] is v and len(st.inputs) == 1:
            k = st.layers[0].params["weight"].shape[2]
            if im2col_pays(v.shape[0], k, block):
                lp = st.layers[0].params
                layouts[v] = (IM2COL, (*v.shape, k, lp["stride"], *lp["pads"], lp["input_zero_point"]))
    for st in stages:
        _plan_stage(st, cfg, batch, g, layouts)
    # An output another stage also reads is copied into its own region right after the stage that
    # makes it (an output region is written only).
    after = {st.output: st for st in stages}
    copies = {after[v]: Stage(f"{v.name}.out", "eltwise", [v.layer], [v], v, Epilogue(0, False, True),
                              uops=eltwise_uops(1)) for v in g.outputs if v in readers}
    stages = [x for st in stages for x in ([st, copies[st]] if st in copies else [st])]
    copy_stages = set(copies.values())
    index = {st: k for k, st in enumerate(stages)}

    # storage: graph inputs and outputs in their own regions, intermediates in 'act' by liveness
    storage: dict[Value, Storage] = {}      # where each stored value lives
    out_storage: dict[Value, Storage] = {}  # the output regions of copied outputs
    region_layouts: dict[str, Layout] = {}
    for v in g.inputs:
        kind, shp = layouts[v]
        nvec = _vectors(kind, shp, batch, block)
        storage[v] = Storage(rname[v.name], 0, nvec, (1, P.blocks(v.shape[0], block), batch, 1, block)
                             if kind == BLOCKS else (batch, nvec // batch, block))
        region_layouts[rname[v.name]] = layouts[v]
    align = cfg.region_align // block  # vectors
    intervals = []
    for st in stages:
        v = st.output
        kind, shp = layouts[v]
        nvec = _vectors(kind, shp, batch, block)
        if st in copy_stages or (v in g.outputs and v not in readers):
            target = out_storage if st in copy_stages else storage
            target[v] = Storage(rname[v.name], 0, nvec, (nvec, block))
            region_layouts[rname[v.name]] = (kind, shp)
            continue
        last = max([index[r] for r in readers.get(v, [])] + [index[copies[st]] if st in copies else index[st]])
        intervals.append((index[st], last, -(-nvec // align) * align, v))
        storage[v] = Storage("act", 0, nvec, (nvec, block))
    offsets, act_vectors = _first_fit(intervals)
    for v, off in offsets.items():
        storage[v].offset = off
    act_without = sum(size for _, _, size, _ in intervals)

    # the micro-op buffer: consecutive tables, from 0 again when the next one does not fit
    cursor = 0
    for st in stages:
        if cursor + st.uops > cfg.uop_depth:
            cursor = 0
        st.uop_base, cursor = cursor, cursor + st.uops

    # weights and biases, each placed once, aligned
    wchunks, bchunks, woff, boff, moff = [], [], {}, {}, {}
    wbytes = bbytes = 0
    for st in stages:
        if st.weight is not None:
            woff[id(st)] = wbytes // block
            flat = st.weight.reshape(-1)
            pad = -(-flat.size // cfg.region_align) * cfg.region_align
            wchunks.append(np.concatenate([flat, np.zeros(pad - flat.size, np.int8)]))
            wbytes += pad
        if st.bias is not None:
            boff[id(st)] = bbytes // (4 * block)
            pad = -(-(st.bias.size * 4) // cfg.region_align) * cfg.region_align // 4
            bchunks.append(np.concatenate([st.bias, np.zeros(pad - st.bias.size, np.int32)]))
            bbytes += pad * 4
        if st.bias_map is not None:  # per-position start values, in the biases region too
            moff[id(st)] = bbytes // (4 * block)
            pad = -(-(st.bias_map.size * 4) // cfg.region_align) * cfg.region_align // 4
            bchunks.append(np.concatenate([st.bias_map, np.zeros(pad - st.bias_map.size, np.int32)]))
            bbytes += pad * 4
    consts: dict[str, np.ndarray] = {}
    if wchunks:
        consts["weights"] = np.concatenate(wchunks)
    if bchunks:
        consts["biases"] = np.concatenate(bchunks)
    regions = 1 + len(g.inputs) + len(g.outputs) + len(consts) + (1 if act_vectors else 0) + 1
    if regions > cfg.max_regions:
        raise CompileError(f"network '{g.name}': {len(g.inputs)} inputs and {len(g.outputs)} outputs need "
                           f"{regions} DRAM regions, config '{cfg.name}' has {cfg.max_regions} region slots")

    def where(v: Value, t: dict[str, Tensor], act: Tensor | None, out: bool = False) -> Tensor:
        s = out_storage[v] if out and v in out_storage else storage[v]
        parent = act if s.region == "act" else t[s.region]
        assert parent is not None
        return parent.view(f"{v.name}@{s.offset}", s.offset, (s.nvec, block)) if s.region == "act" else parent

    tracing: list[str] = []  # the stage being traced, for an error raised inside it

    def body(**t: Tensor) -> None:
        act = S.scratch((act_vectors * block,), "int8", "act") if act_vectors else None
        for k, st in enumerate(stages):
            tracing[:] = [st.name]
            if k and S.num_cores() > 1:  # several cores: a stage reads what every core stored before it
                S.barrier()
            S.section(st.name)
            y = where(st.output, t, act, out=st in copy_stages)
            if st.op in ("conv2d", "dense"):
                assert st.plan is not None and st.shape is not None and st.weight is not None
                wv = t["weights"].view(f"{st.name}.w", woff[id(st)], (st.weight.size // block, block))
                bv = None
                if st.bias is not None:
                    bv = t["biases"].view(f"{st.name}.b", boff[id(st)], (st.bias.size // block, block))
                mv = None
                if st.bias_map is not None:
                    mv = t["biases"].view(f"{st.name}.map", moff[id(st)], (st.bias_map.size // block, block))
                res = where(st.inputs[1], t, act) if len(st.inputs) > 1 else None
                conv_layer(where(st.inputs[0], t, act), wv, y, st.shape, st.plan, st.epi,  # type: ignore[arg-type]
                           bias=bv, residual=res, uop_base=st.uop_base, bias_map=mv, border=st.border)
            elif st.op == "flatten":
                c, h, w = st.inputs[0].shape
                transpose_layer(where(st.inputs[0], t, act), y, batch, P.blocks(c, block) * h * w, st.uop_base)
            elif st.op in ("max_pool", "avg_pool"):
                pool_layer(where(st.inputs[0], t, act), y, st.plan, relu=st.epi.relu,  # type: ignore[arg-type]
                           uop_base=st.uop_base, scaled=None if st.epi.plain else st.epi)
            else:
                eltwise_layer([where(v, t, act) for v in st.inputs], y, st.epi, uop_base=st.uop_base,
                              scales=st.scales)

    params = [rname[v.name] for v in g.inputs] + list(consts) + [rname[v.name] for v in g.outputs]
    body.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])
    pname = name or (g.name if _PROGRAM_NAME.match(g.name) else identifier(g.name, set()))
    kernel = Kernel(body, name=pname)
    specs: dict[str, Any] = {rname[v.name]: tensor(storage[v].shape, "int8") for v in g.inputs}
    specs.update({k: tensor(a.shape, a.dtype.name) for k, a in consts.items()})
    for v in g.outputs:
        specs[rname[v.name]] = tensor((out_storage.get(v) or storage[v]).shape, "int8")
    try:
        prog = build(kernel, specs, cfg, name=pname)
    except CompileError as e:
        msg = str(e)
        if "argument 'weights'" in msg:  # name what fills a region that does not fit
            sizes = [(st.name, st.weight.size) for st in stages if st.weight is not None]
            msg += f" (the largest weights: {_largest(sizes)})"
        elif "argument 'act'" in msg:
            msg += f" (the largest activations: {_largest([(v.name, n * block) for _, _, n, v in intervals])})"
        elif tracing:
            msg += f" (in layer '{tracing[0]}')"
        raise CompileError(f"network '{g.name}': {msg}") from None
    for k, a in consts.items():
        prog.set_input(k, a)
    prog.meta["network"] = {
        "graph": g.name, "batch": batch,
        "layers": [{"name": st.name, "op": st.op, "fused": [x.name for x in st.layers],
                    "macs": sum(x.macs for x in st.layers) * batch if st not in copy_stages else 0,
                    "in_shape": [list(v.shape) for v in st.inputs], "out_shape": list(st.output.shape)}
                   for st in stages],
        "activations": [{"value": v.name, "offset": offsets[v] * block, "bytes": size * block, "first_stage": f,
                         "last_stage": last} for f, last, size, v in intervals],
        "dram": {"weights_bytes": wbytes, "bias_bytes": bbytes,
                 "activation_bytes_with_reuse": act_vectors * block,
                 "activation_bytes_without_reuse": act_without * block,
                 "input_bytes": sum(storage[v].nvec * block for v in g.inputs),
                 "output_bytes": sum(prog.region(rname[v.name]).nbytes for v in g.outputs),
                 "total_bytes": prog.dram_end}}
    prog.meta["network"]["regions"] = {v.name: rname[v.name] for v in [*g.inputs, *g.outputs]}
    return NetworkProgram(g, cfg, batch, prog, kernel, stages, region_layouts, consts, rname)
