"""The examples of dynamic shape: kernels whose arguments use ``S.var``, compiled once for every value.

* ``mvm_token``: ``(token x K) @ (K x N)`` int8 with an int32 bias, requantized (shift-round, clip to int8):
  the shipped ``dense`` kernel on packed operands, K = 64, N = 32, token in 1..2048;
* ``vadd_rows``: ``C = int8(A + B)`` on ``(rows, lanes)`` int32, tiles of 16 vectors, rows in 1..256.

Each gives its argument template (expressions of its variable), random inputs for a value and the golden
outputs of that value (the kernel called on numpy with the concrete shapes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from compiler import gemm_kernels, ops
from compiler.dynamic import bind_args, compile_dynamic, DynamicProgram
from compiler.errors import CompileError
from compiler.kernel import Kernel
from compiler.symbolic import Var, var
from compiler.tensor import TensorSpec, tensor
from hw.config import HwConfig


@dataclass(frozen=True)
class DynamicExample:
    """A kernel, its argument template on ``cfg`` (``args(cfg)``), its variable and its inputs' ranges."""

    name: str
    description: str
    kernel: Kernel
    var: Var
    args: Callable[[HwConfig], dict[str, Any]]
    ranges: dict[str, tuple[int, int]]

    def bound(self, cfg: HwConfig, v: int) -> dict[str, Any]:
        """The arguments for value ``v``: concrete TensorSpecs and constants."""
        return bind_args(self.args(cfg), {self.var.name: self.var.check(v)})

    def compile(self, cfg: HwConfig, verify_all: bool = False) -> DynamicProgram:
        """The one Program for every value, with its driver; its own inputs and expected outputs are the
        maximum's (seed 0), so the folder is also a complete Program of the maximum. ``verify_all``: see
        :func:`compiler.dynamic.compile_dynamic`."""
        dp = compile_dynamic(self.kernel, self.args(cfg), self.var, cfg, name=self.name,
                             meta={"dynamic_example": self.name}, verify_all=verify_all)
        inputs = self.inputs(cfg, self.var.max)
        for n, a in inputs.items():
            dp.program.set_input(n, a.reshape(dp.program.region(n).shape))
        dp.program.expected = {n: a.reshape(dp.program.region(n).shape)
                               for n, a in self.golden(cfg, self.var.max, inputs).items()}
        return dp

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
        """The golden outputs of value ``v``: the kernel on numpy, flat (nvec * lanes) per output."""
        args = {**self.bound(cfg, v), **inputs}
        tensors = self.kernel.run_golden(cfg, args)
        return {n: tensors[n].data.reshape(-1) for n, a in args.items()
                if isinstance(a, TensorSpec)}


TOKEN = var("token", max=2048)
ROWS = var("rows", max=256)
MVM_K, MVM_N, MVM_SHIFT = 64, 32, 8


def _mvm_args(cfg: HwConfig) -> dict[str, Any]:
    b = cfg.block
    if MVM_K % b or MVM_N % b:
        raise CompileError(f"mvm_token: K={MVM_K} and N={MVM_N} must be multiples of the block {b}")
    out = f"int{cfg.out_width}"
    return {"A": tensor((1, MVM_K // b, 1, 1, b), "int8"), "W": tensor((MVM_N // b, MVM_K // b, 1, 1, b, b), "int8"),
            "bias": tensor((MVM_N,), "int32"), "C": tensor((1, MVM_N // b, 1, 1, b), out),
            "shift": MVM_SHIFT, "relu": False} | {
        "A": TensorSpec((1, MVM_K // b, TOKEN, 1, b), "int8"), "C": TensorSpec((1, MVM_N // b, TOKEN, 1, b), out)}


def _vadd_args(cfg: HwConfig) -> dict[str, Any]:
    out = f"int{cfg.out_width}"
    return {"A": TensorSpec((ROWS, cfg.lanes), "int32"), "B": TensorSpec((ROWS, cfg.lanes), "int32"),
            "C": TensorSpec((ROWS, cfg.lanes), out), "op": "add", "tile": 16}


DYNAMIC_EXAMPLES: dict[str, DynamicExample] = {e.name: e for e in [
    DynamicExample("mvm_token", f"(token x {MVM_K}) @ ({MVM_K} x {MVM_N}) int8 + int32 bias, requantized (>> "
                   f"{MVM_SHIFT}, round, clip to int8): the dense kernel with a run-time token count",
                   gemm_kernels.dense, TOKEN, _mvm_args, {"A": (-128, 127), "W": (-128, 127), "bias": (-2000, 2000)}),
    DynamicExample("vadd_rows", "C = int8(A + B) on (rows x lanes) int32, tiles of 16 vectors, a run-time row count",
                   ops.binary, ROWS, _vadd_args, {"A": (-1000, 1000), "B": (-1000, 1000)}),
]}


def get_dynamic_example(name: str) -> DynamicExample:
    """The dynamic example ``name``; an unknown one is one CompileError line."""
    if name not in DYNAMIC_EXAMPLES:
        raise CompileError(f"unknown dynamic example '{name}' (known: {', '.join(DYNAMIC_EXAMPLES)})")
    return DYNAMIC_EXAMPLES[name]
