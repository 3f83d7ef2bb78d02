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

The golden path runs the same kernel on numpy (:meth:`NetworkProgram.run_golden`); the reference
is :mod:`compiler.graph_reference`, written from the graph's definitions.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler import dsl as S
from compiler import packing as P
from compiler.build import build
from compiler.conv_engine import Epilogue, conv_layer
from compiler.conv_plan import ConvPlan, ConvShape, PlanError, plan_conv
from compiler.errors import CompileError
from compiler.graph import Graph, Layer, Value
from compiler.kernel import Kernel
from compiler.ops import IMM_MAX
from compiler.stream_engine import (PoolPlan, eltwise_layer, eltwise_tile, eltwise_uops, plan_pool, pool_layer,
                                    transpose_layer, transpose_tile)
from compiler.tensor import Tensor, tensor
from compiler.trace import CONST_REGION
from hw.config import HwConfig, load_config
from hw.program import Program

RESERVED = ("weights", "biases", "act", CONST_REGION, "insn")
# SPATIAL: (C, H, W) packed (N, C/B, H, W, B); BLOCKS: (F,) as (F/B, N) vectors in natural feature order;
# PACKED_BLOCKS: a flattened (C, H, W) as (C/B*H*W, N) vectors, features in packed order
# IM2COL: a graph input read only by a convolution, packed by the host with the window taps in the
# channels, (N, C*K*K/B, Ho, Wo, B), so the convolution is a 1x1 one; shape (C, H, W, K, stride, pad)
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
    bias: np.ndarray | None = None    # packed
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

    def _pack(self, name: str, a: np.ndarray) -> np.ndarray:
        layout, shape = self.layouts[name]
        want = (self.batch, *next(v.shape for v in self.graph.inputs if v.name == name))
        a = np.asarray(a)
        if a.shape != want or a.dtype != np.int8:
            raise CompileError(f"network '{self.graph.name}': input '{name}' must be int8 of shape {want}, got "
                               f"{a.dtype} {a.shape}")
        return pack_value(a, layout, shape, self.config.block)

    def packed_inputs(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The input regions' arrays for natural ``(batch, *shape)`` int8 inputs."""
        missing = [v.name for v in self.graph.inputs if v.name not in inputs]
        if missing:
            raise CompileError(f"network '{self.graph.name}': missing input(s) {', '.join(missing)}")
        return {v.name: self._pack(v.name, inputs[v.name]).reshape(self.program.region(v.name).shape)
                for v in self.graph.inputs}

    def set_inputs(self, inputs: dict[str, np.ndarray]) -> None:
        """Attach natural ``(batch, *shape)`` int8 inputs to the Program."""
        for name, a in self.packed_inputs(inputs).items():
            self.program.set_input(name, a)

    def outputs(self, regions: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Natural ``(batch, *shape)`` int8 outputs from a run's output regions."""
        out = {}
        for v in self.graph.outputs:
            layout, shape = self.layouts[v.name]
            out[v.name] = unpack_value(np.asarray(regions[v.name]), layout, shape, self.batch, self.config.block)
        return out

    def run_golden(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The golden (PySim) path: the network's kernel called on numpy; natural outputs."""
        args: dict[str, Any] = {**self.packed_inputs(inputs), **self.consts}
        for v in self.graph.outputs:
            r = self.program.region(v.name)
            args[v.name] = np.zeros(r.shape, dtype=r.dtype)
        tensors = self.kernel.run_golden(self.config, args)
        return self.outputs({v.name: tensors[v.name].data.reshape(-1)[:args[v.name].size].reshape(args[v.name].shape)
                             for v in self.graph.outputs})


# ---- layouts ------------------------------------------------------------------------------------
def pack_value(a: np.ndarray, layout: str, shape: tuple[int, ...], block: int) -> np.ndarray:
    """Natural ``(N, *shape)`` -> the layout's packed array."""
    if layout == SPATIAL:
        return P.pack_activation(a, block)
    if layout == BLOCKS:
        return P.pack_matrix(a, block)
    if layout == IM2COL:
        return P.pack_activation(im2col(a, *shape[3:]), block)
    raise CompileError(f"a network input cannot have layout {layout}")


def im2col(x: np.ndarray, k: int, stride: int, pad: int) -> np.ndarray:
    """NCHW ``x`` -> ``(N, C*K*K, Ho, Wo)``: channel ``(c*K + ky)*K + kx`` of output pixel ``(i, j)`` is
    the zero-padded input at ``(c, i*stride + ky - pad, j*stride + kx - pad)``."""
    n, c, h, w = x.shape
    xp = np.zeros((n, c, h + 2 * pad, w + 2 * pad), dtype=x.dtype)
    xp[:, :, pad:pad + h, pad:pad + w] = x
    ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
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
def _chain(g: Graph, v: Value) -> tuple[list[Layer], Value, int | None, bool]:
    """The ReLUs and (at most one, on an int32 value) requantize that follow ``v`` with nothing else
    reading the values in between: (those layers, the last value, the requantize's shift or None,
    whether a ReLU is among them). ReLU commutes with the requantization (both are monotone and keep
    0), so their order does not matter."""
    layers: list[Layer] = []
    shift: int | None = None
    relu = False
    cur = v
    while cur not in g.outputs:
        cons = g.consumers(cur)
        if len(cons) != 1:
            break
        c = cons[0]
        if c.op == "relu":
            relu = True
        elif c.op == "requantize" and cur.dtype == "int32":
            shift = c.params["shift"]
        else:
            break
        layers.append(c)
        cur = c.output  # type: ignore[assignment]
    return layers, cur, shift, relu


def _residual(g: Graph, v: Value, ready: set[Value]) -> tuple[list[Layer], Value, Value, bool] | None:
    """A residual add the convolution whose int8 result is ``v`` can finish in its epilogue (the conv
    engine adds a residual, then ReLU and clip): ``v`` read only by an ``add`` whose other operand is
    already stored (in ``ready``), followed by a requantize by 0 (the clip) and ReLUs. Returns (the
    layers, the final value, the residual operand, ReLU) or None."""
    cons = g.consumers(v)
    if v in g.outputs or len(cons) != 1 or cons[0].op != "add":
        return None
    add = cons[0]
    other = [u for u in add.inputs if u is not v]
    if len(other) != 1 or other[0] not in ready:
        return None
    layers, end, shift, relu = _chain(g, add.output)  # type: ignore[arg-type]
    if shift != 0:
        return None
    return [add, *layers], end, other[0], relu


def _fuse(g: Graph) -> list[Stage]:
    """The graph's stages in order."""
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
        chain, cur, shift, relu = _chain(g, out)
        shift = layer.params["shift"] if layer.op == "requantize" else shift
        fused = [layer, *chain]
        if cur.dtype != "int8":
            users = [c.name for c in g.consumers(cur)]
            why = (f"feeds {len(users)} layers ({', '.join(users)}); requantize it once and share the int8 value"
                   if len(users) > 1 else f"feeds '{users[0]}' ({g.consumers(cur)[0].op}), which takes int8"
                   if users else "is an output")
            raise g.error(fused[-1].name, f"its int32 result must be requantized before anything else reads it: "
                                          f"it {why}")
        op = layer.op if layer.op in ("conv2d", "dense", "max_pool", "avg_pool") else "eltwise"
        epi = Epilogue(shift or 0, relu or layer.op == "relu", clip=True)
        inputs = list(layer.inputs)
        res = _residual(g, cur, ready) if op == "conv2d" else None
        if res is not None:
            more, cur, r, res_relu = res
            fused += more
            inputs.append(r)
            epi = Epilogue(epi.shift, epi.relu, True, residual_relu=res_relu)
        absorbed.update(fused)
        stages.append(Stage(layer.name, op, fused, inputs, cur, epi))
        ready.add(cur)
    return stages


# ---- planning -----------------------------------------------------------------------------------
def _vectors(layout: str, shape: tuple[int, ...], batch: int, block: int) -> int:
    """Vectors of ``batch`` samples of a value stored in ``layout``."""
    if layout == BLOCKS:
        return P.blocks(shape[0], block) * batch
    if layout == IM2COL:
        c, h, w, k, s, pad = shape
        return batch * P.blocks(c * k * k, block) * ((h + 2 * pad - k) // s + 1) * ((w + 2 * pad - k) // s + 1)
    c, h, w = shape[:3]
    return batch * P.blocks(c, block) * h * w


def _plan_stage(st: Stage, cfg: HwConfig, batch: int, g: Graph, layouts: dict[Value, Layout]) -> None:
    """The stage's plan, packed weights and layouts; PlanError/CompileError name the layer."""
    block = cfg.block
    main = st.layers[0]
    try:
        if st.op in ("conv2d", "dense"):
            x = st.inputs[0]
            wt, bias = main.params["weight"], main.params["bias"]
            if st.op == "conv2d":
                c, h, w = x.shape
                k, s, pad = wt.shape[2], main.params["stride"], main.params["pad"]
                residual = len(st.inputs) > 1
                flags = dict(bias=bias is not None, rounding_const=st.epi.rounding > IMM_MAX, residual=residual,
                             alu_passes=st.epi.alu_passes(residual))
                o, ho, wo = st.output.shape
                if layouts[x][0] == IM2COL:  # the host put the taps in the channels: a 1x1 convolution
                    shape = ConvShape(batch, P.blocks(c * k * k, block), ho, wo, P.blocks(o, block), 1, 1, 1, 0,
                                      **flags)
                    st.weight = P.pack_conv_weights(wt.reshape(o, c * k * k, 1, 1), block)
                else:
                    shape = ConvShape(batch, P.blocks(c, block), h, w, P.blocks(o, block), k, k, s, pad, **flags)
                    st.weight = P.pack_conv_weights(wt, block)
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
                                  rounding_const=st.epi.rounding > IMM_MAX, alu_passes=st.epi.alu_passes(False))
                st.weight = P.pack_dense_weights(full, block)
            st.bias = None if bias is None else P.pack_bias(bias, block)
            st.shape = shape
            st.plan = plan_conv(cfg, shape)
            st.uops = st.plan.uop_used()
            layouts[st.output] = (SPATIAL, st.output.shape) if st.op == "conv2d" else (BLOCKS, st.output.shape)
        elif st.op in ("max_pool", "avg_pool"):
            c, h, w = st.inputs[0].shape
            st.plan = plan_pool(cfg, batch, P.blocks(c, block), h, w, main.params["kernel"], main.params["stride"],
                                st.op == "max_pool")
            st.uops = st.plan.halves ** 2 * st.plan.uops_per_table
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
            eltwise_tile(cfg, len(st.inputs), st.epi.rounding > IMM_MAX)
            st.uops = eltwise_uops(len(st.inputs))
            layouts[st.output] = found.pop()  # elementwise: stored as its operands are
    except PlanError as e:
        raise g.error(main.name, f"cannot be tiled on config '{cfg.name}': {e}") from None


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


def compile_network(graph: Graph, config: HwConfig | str = "default", batch: int = 1,
                    name: str | None = None) -> NetworkProgram:
    """Compile ``graph`` for ``batch`` samples into one Program (module docstring)."""
    cfg = config if isinstance(config, HwConfig) else load_config(config)
    g = graph
    if not isinstance(g, Graph):
        raise CompileError(f"compile_network takes a compiler.graph.Graph, got {type(g).__name__}")
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or not 1 <= batch <= 65535:
        raise CompileError(f"network '{g.name}': batch {batch!r} must be an integer 1..65535")
    batch = int(batch)
    g.check()
    for v in [*g.inputs, *g.outputs]:
        if v.name in RESERVED:
            raise g.error(v.name, f"the name is reserved for the network's DRAM regions ({', '.join(RESERVED)})")
    block = cfg.block
    stages = _fuse(g)
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
                layouts[v] = (IM2COL, (*v.shape, k, st.layers[0].params["stride"], st.layers[0].params["pad"]))
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
        storage[v] = Storage(v.name, 0, nvec, (1, P.blocks(v.shape[0], block), batch, 1, block)
                             if kind == BLOCKS else (batch, nvec // batch, block))
        region_layouts[v.name] = layouts[v]
    align = cfg.region_align // block  # vectors
    intervals = []
    for st in stages:
        v = st.output
        kind, shp = layouts[v]
        nvec = _vectors(kind, shp, batch, block)
        if st in copy_stages or (v in g.outputs and v not in readers):
            target = out_storage if st in copy_stages else storage
            target[v] = Storage(v.name, 0, nvec, (nvec, block))
            region_layouts[v.name] = (kind, shp)
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
    wchunks, bchunks, woff, boff = [], [], {}, {}
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

    def body(**t: Tensor) -> None:
        act = S.scratch((act_vectors * block,), "int8", "act") if act_vectors else None
        for k, st in enumerate(stages):
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
                res = where(st.inputs[1], t, act) if len(st.inputs) > 1 else None
                conv_layer(where(st.inputs[0], t, act), wv, y, st.shape, st.plan, st.epi,  # type: ignore[arg-type]
                           bias=bv, residual=res, uop_base=st.uop_base)
            elif st.op == "flatten":
                c, h, w = st.inputs[0].shape
                transpose_layer(where(st.inputs[0], t, act), y, batch, P.blocks(c, block) * h * w, st.uop_base)
            elif st.op in ("max_pool", "avg_pool"):
                pool_layer(where(st.inputs[0], t, act), y, st.plan, relu=st.epi.relu,  # type: ignore[arg-type]
                           uop_base=st.uop_base)
            else:
                eltwise_layer([where(v, t, act) for v in st.inputs], y, st.epi, uop_base=st.uop_base)

    params = [v.name for v in g.inputs] + list(consts) + [v.name for v in g.outputs]
    body.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params])
    kernel = Kernel(body, name=name or g.name)
    specs: dict[str, Any] = {v.name: tensor(storage[v].shape, "int8") for v in g.inputs}
    specs.update({k: tensor(a.shape, a.dtype.name) for k, a in consts.items()})
    for v in g.outputs:
        specs[v.name] = tensor((out_storage.get(v) or storage[v]).shape, "int8")
    try:
        prog = build(kernel, specs, cfg, name=name or g.name)
    except CompileError as e:
        raise CompileError(f"network '{g.name}': {e}") from None
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
                 "output_bytes": sum(prog.region(v.name).nbytes for v in g.outputs),
                 "total_bytes": prog.dram_end}}
    return NetworkProgram(g, cfg, batch, prog, kernel, stages, region_layouts, consts)
