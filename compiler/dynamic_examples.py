"""The examples of dynamic shape: kernels whose arguments use ``S.var``, compiled once for every value.

* ``mvm_token``: ``(token x K) @ (K x N)`` int8 with an int32 bias, requantized (shift-round, clip to int8):
  the shipped ``dense`` kernel on packed operands, K = 64, N = 32, token in 1..2048;
* ``vadd_rows``: ``C = int8(A + B)`` on ``(rows, lanes)`` int32, tiles of 16 vectors, rows in 1..256;
* ``digits_batch``: the digits CNN (``compiler.networks.digits``) through the graph API with a run-time
  batch, 1..32 test images (:func:`compile_network_dynamic`).

Each gives random inputs for a value (packed as its DRAM regions hold them), the golden outputs of that
value (the kernel called on numpy with the concrete shapes), its static compile and the driver's split of
it (:class:`compiler.dynamic.StaticTrace`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import numpy as np

from compiler import gemm_kernels, ops
from compiler.build import build
from compiler.dynamic import DynamicProgram, StaticTrace, bind_args, compile_dynamic, compile_traces, \
    program_trace, static_trace
from compiler.errors import CompileError
from compiler.graph import Graph
from compiler.kernel import Kernel, reporting_failures
from compiler.network import NetworkProgram, compile_network
from compiler.params import ParamError, parse_var
from compiler.symbolic import Var, var
from compiler.tensor import TensorSpec, pad_to_vectors, tensor
from hw.config import HwConfig
from hw.program import Program


@dataclass(frozen=True)
class DynamicExample:
    """A kernel, its argument template on ``cfg`` (``args(cfg)``), its variable and its inputs' ranges."""

    name: str
    description: str
    kernel: Kernel
    var: Var
    args: Callable[[HwConfig], dict[str, Any]]
    ranges: dict[str, tuple[int, int]]
    origin: dict[str, Any] | None = None  # the compiled folder's meta naming it (default: the example's name)
    in_place: tuple[str, ...] = ()  # the tensors it loads and stores (updated in place): outputs too

    def bound(self, cfg: HwConfig, v: int) -> dict[str, Any]:
        """The arguments for value ``v``: concrete TensorSpecs and constants."""
        return bind_args(self.args(cfg), {self.var.name: self.var.check(v)})

    def compile(self, cfg: HwConfig, verify_all: bool = False) -> DynamicProgram:
        """The one Program for every value, with its driver; its own inputs and expected outputs are the
        maximum's (seed 0), so the folder is also a complete Program of the maximum. ``verify_all``: see
        :func:`compiler.dynamic.compile_dynamic`."""
        dp = compile_dynamic(self.kernel, self.args(cfg), self.var, cfg, name=self.name,
                             meta=self.origin or {"dynamic_example": self.name}, verify_all=verify_all)
        return with_maximum_data(dp, self, cfg)

    def static(self, cfg: HwConfig, v: int) -> Program:
        """The Program compiled statically for value ``v`` (no inputs attached)."""
        with reporting_failures(self.kernel.fn, f"kernel '{self.name}' at {self.var.name}={v}"):
            return build(self.kernel, self.bound(cfg, v), cfg, name=self.name)

    def trace(self, cfg: HwConfig, v: int) -> StaticTrace:
        """The static compile of value ``v`` split as the driver holds it."""
        return static_trace(self.kernel, self.bound(cfg, v), cfg, self.name)

    def inputs(self, cfg: HwConfig, v: int, seed: int = 0) -> dict[str, np.ndarray]:
        """Seeded random inputs of value ``v`` in the kernel's shapes (every loaded tensor)."""
        rng = np.random.default_rng(seed)
        out = {}
        for n, a in self.bound(cfg, v).items():
            if isinstance(a, TensorSpec) and n in self.ranges:
                lo, hi = self.ranges[n]
                out[n] = rng.integers(lo, hi, size=a.shape, endpoint=True, dtype=np.int64).astype(a.dtype)
        return out

    def golden(self, cfg: HwConfig, v: int, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The golden outputs of value ``v``: the kernel on numpy, flat (nvec * lanes) per output and per
        tensor updated in place."""
        args = {**self.bound(cfg, v), **{n: np.array(a) for n, a in inputs.items()}}  # copies: in-place stores
        with reporting_failures(self.kernel.fn, f"kernel '{self.name}' at {self.var.name}={v}"):
            tensors = self.kernel.run_golden(cfg, args)
        return {n: tensors[n].data.reshape(-1) for n, a in args.items()
                if isinstance(a, TensorSpec) or n in self.in_place}


def with_maximum_data(dp: DynamicProgram, example: Any, cfg: HwConfig) -> DynamicProgram:
    """``dp`` with ``example``'s inputs (seed 0) and expected outputs of the maximum attached: the folder is
    also a complete Program of the maximum."""
    inputs = example.inputs(cfg, example.var.max)
    for n, a in inputs.items():  # the user's shape: zero-padded to whole vectors of the region
        r = dp.program.region(n)
        dp.program.set_input(n, pad_to_vectors(a, cfg.lanes, r.dtype).reshape(r.shape))
    dp.program.expected = {n: a.reshape(dp.program.region(n).shape)
                           for n, a in example.golden(cfg, example.var.max, inputs).items()}
    return dp


def compile_network_dynamic(graph: Graph, batch: Var, cfg: HwConfig, name: str | None = None,
                            meta: dict[str, Any] | None = None, verify_all: bool = False) -> DynamicProgram:
    """One Program for every batch of ``graph`` up to ``batch.max`` (``batch = S.var("batch", max=32)``):
    the network compiled statically per traced batch (:func:`compiler.network.compile_network`), split into
    the driver's pieces. A network unrolls its batch loop, so each batch is a piece of its own: the compile
    takes one static compile per value (it grows with the maximum, unlike a kernel's tiled loops)."""
    pname = name or graph.name
    return compile_traces(lambda v: program_trace(compile_network(graph, cfg, batch=v, name=pname).program, pname),
                          batch, cfg, pname, meta, verify_all)


@dataclass(frozen=True)
class DynamicNetwork:
    """A network with a run-time batch: its graph, its variable and its images (the test split's)."""

    name: str
    description: str
    graph: Callable[[], Graph]
    var: Var
    images: Callable[[], np.ndarray]  # int8 (N, *input shape), N >= the variable's maximum

    def compiled(self, cfg: HwConfig, v: int) -> NetworkProgram:
        """The network compiled statically for batch ``v`` (range checked)."""
        return compile_network(self.graph(), cfg, batch=self.var.check(v), name=self.name)

    def compile(self, cfg: HwConfig, verify_all: bool = False) -> DynamicProgram:
        """The one Program for every batch, with its driver; inputs and expected outputs are the maximum's."""
        dp = compile_network_dynamic(self.graph(), self.var, cfg, self.name, {"dynamic_example": self.name},
                                     verify_all)
        return with_maximum_data(dp, self, cfg)

    def static(self, cfg: HwConfig, v: int) -> Program:
        """The Program compiled statically for batch ``v`` (its weights attached, no images)."""
        return self.compiled(cfg, v).program

    def trace(self, cfg: HwConfig, v: int) -> StaticTrace:
        """The static compile of batch ``v`` split as the driver holds it."""
        return program_trace(self.static(cfg, v), self.name)

    def natural(self, v: int, seed: int = 0) -> np.ndarray:
        """``v`` test images, a seeded choice (int8 ``(v, *input shape)``)."""
        imgs = self.images()
        return imgs[np.sort(np.random.default_rng(seed).choice(len(imgs), size=v, replace=False))]

    def inputs(self, cfg: HwConfig, v: int, seed: int = 0) -> dict[str, np.ndarray]:
        """The input regions of batch ``v`` (seeded images, packed) and the weights and biases, flat."""
        netp = self.compiled(cfg, v)
        name = netp.graph.inputs[0].name
        packed = netp.packed_inputs({name: self.natural(v, seed)})
        return {n: a.reshape(-1) for n, a in {**packed, **netp.consts}.items()}

    def golden(self, cfg: HwConfig, v: int, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The output regions of batch ``v``, flat: the network's kernel on numpy."""
        netp = self.compiled(cfg, v)
        args: dict[str, Any] = {n: inputs[n].reshape(netp.program.region(n).shape) for n in inputs}
        outs = [netp.region_name(o.name) for o in netp.graph.outputs]
        for rn in outs:
            r = netp.program.region(rn)
            args[rn] = np.zeros(r.shape, dtype=r.dtype)
        tensors = netp.kernel.run_golden(cfg, args)
        return {rn: tensors[rn].data.reshape(-1)[:args[rn].size] for rn in outs}


def _digits_graph() -> Graph:
    from compiler.networks import digits

    return digits.graph()


def _digits_images() -> np.ndarray:
    from compiler.networks import digits

    return digits.dataset("test")[0]


TOKEN = var("token", max=2048)
BATCH = var("batch", max=32)
ROWS = var("rows", max=256)
MVM_K, MVM_N, MVM_SHIFT = 64, 32, 8
HEIGHT = var("height", max=48)
CONV_C, CONV_W, CONV_SHIFT = 32, 14, 10  # channels (in and out), image width, requantization shift


def _mvm_args(cfg: HwConfig) -> dict[str, Any]:
    b = cfg.block
    if MVM_K % b or MVM_N % b:
        raise CompileError(f"mvm_token: K={MVM_K} and N={MVM_N} must be multiples of the block {b}")
    out = f"int{cfg.out_width}"
    return {"A": tensor((1, MVM_K // b, 1, 1, b), "int8"), "W": tensor((MVM_N // b, MVM_K // b, 1, 1, b, b), "int8"),
            "bias": tensor((MVM_N,), "int32"), "C": tensor((1, MVM_N // b, 1, 1, b), out),
            "shift": MVM_SHIFT, "relu": False} | {
        "A": TensorSpec((1, MVM_K // b, TOKEN, 1, b), "int8"), "C": TensorSpec((1, MVM_N // b, TOKEN, 1, b), out)}


def _conv_args(cfg: HwConfig) -> dict[str, Any]:
    b = cfg.block
    if CONV_C % b:
        raise CompileError(f"conv_rows: {CONV_C} channels must be a multiple of the block {b}")
    cb, out = CONV_C // b, f"int{cfg.out_width}"
    return {"X": TensorSpec((1, cb, HEIGHT, CONV_W, b), "int8"), "W": tensor((cb, cb, 3, 3, b, b), "int8"),
            "bias": tensor((CONV_C,), "int32"), "Y": TensorSpec((1, cb, HEIGHT, CONV_W, b), out),
            "stride": 1, "pad": 1, "shift": CONV_SHIFT, "relu": True}


def _vadd_args(cfg: HwConfig) -> dict[str, Any]:
    out = f"int{cfg.out_width}"
    return {"A": TensorSpec((ROWS, cfg.lanes), "int32"), "B": TensorSpec((ROWS, cfg.lanes), "int32"),
            "C": TensorSpec((ROWS, cfg.lanes), out), "op": "add", "tile": min(16, ops.tile_fit(cfg, 2, 0))}


DYNAMIC_EXAMPLES: dict[str, DynamicExample | DynamicNetwork] = {e.name: e for e in [
    DynamicExample("mvm_token", f"(token x {MVM_K}) @ ({MVM_K} x {MVM_N}) int8 + int32 bias, requantized (>> "
                   f"{MVM_SHIFT}, round, clip to int8): the dense kernel with a run-time token count",
                   gemm_kernels.dense, TOKEN, _mvm_args, {"A": (-128, 127), "W": (-128, 127), "bias": (-2000, 2000)}),
    DynamicExample("vadd_rows", "C = int8(A + B) on (rows x lanes) int32, tiles of 16 vectors (fewer where the "
                   "accumulator is smaller), a run-time row count",
                   ops.binary, ROWS, _vadd_args, {"A": (-1000, 1000), "B": (-1000, 1000)}),
    DynamicExample("conv_rows", f"3x3 convolution, stride 1, padding 1, on an image of height x {CONV_W} x "
                   f"{CONV_C} channels -> {CONV_C}: + int32 bias, requantized, ReLU; a run-time image height",
                   gemm_kernels.conv2d, HEIGHT, _conv_args, {"X": (-128, 127), "W": (-128, 127), "bias": (-2000, 2000)}),
    DynamicNetwork("digits_batch", "the digits CNN (conv 3x3, pool, two dense layers; int8 logits) on a run-time "
                   "batch of 8x8 test images", _digits_graph, BATCH, _digits_images),
]}


_Example = TypeVar("_Example", DynamicExample, DynamicNetwork)


def narrowed(example: _Example, var_text: str) -> _Example:
    """``example`` with its variable's range narrowed by ``--var NAME=MAX`` or ``NAME=MIN..MAX`` (the name
    its own, the range within its own): a narrower range needs fewer driver pieces, e.g. on a config whose
    buffers hold small tiles. Anything else is one ParamError line."""
    v, own = parse_var(var_text), example.var
    if v.name != own.name:
        raise ParamError(f"--var {var_text!r}: dynamic example '{example.name}' has the variable '{own.name}' "
                         f"({own.min}..{own.max}), not '{v.name}'")
    if v.min < own.min or v.max > own.max:
        raise ParamError(f"--var {var_text!r}: dynamic example '{example.name}' takes '{own.name}' in "
                         f"{own.min}..{own.max}; --var can only narrow that range")
    return dataclasses.replace(example, var=v)


def narrowed_to(example: _Example, lo: int, hi: int, where: str) -> _Example:
    """``example`` with the range ``lo..hi`` a folder's driver covers (compiled with ``--var``); a range
    outside the example's own is one ParamError line naming ``where``."""
    own = example.var
    if (lo, hi) == (own.min, own.max):
        return example
    if lo < own.min or hi > own.max:
        raise ParamError(f"{where}: covers '{own.name}' {lo}..{hi}, but dynamic example '{example.name}' takes "
                         f"{own.min}..{own.max}")
    return dataclasses.replace(example, var=var(own.name, max=hi, min=lo))


def get_dynamic_example(name: str) -> DynamicExample | DynamicNetwork:
    """The dynamic example ``name``; an unknown one is one CompileError line."""
    if name not in DYNAMIC_EXAMPLES:
        raise CompileError(f"unknown dynamic example '{name}' (known: {', '.join(DYNAMIC_EXAMPLES)})")
    return DYNAMIC_EXAMPLES[name]
