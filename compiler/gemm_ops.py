"""The GEMM operators for natural numpy arrays, and their registry.

``matmul(a, b)``, ``dense(a, w, bias)``, ``conv2d(x, w, bias)``, ``residual_add(x, r)`` and
``resnet_block(x, w1, b1, w2, b2)`` take int8 arrays in their natural layouts (matrices,
NCHW activations, ``(O, C, KH, KW)`` weights, int32 biases), pack them
(:mod:`compiler.packing`), run the kernel of :mod:`compiler.gemm_kernels` on the golden path
and return the natural result (int8, or the config's output type). ``compile_operator``
builds the same kernel into a Program with the packed inputs attached.

Each operator is a :class:`GemmOperator` in :data:`GEMM_OPERATORS`: its kernel, its natural
inputs (shapes from a few integer parameters, so examples and tests can make random
cases of any size), packing, unpacking and a plain numpy reference
(:mod:`compiler.gemm_reference`) written without the intrinsics. Bad arguments are one
CompileError line naming the operator, the argument and the problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from compiler import attention as ATT
from compiler import gemm_kernels as K
from compiler import gemm_reference as ref
from compiler import packing as P
from compiler.build import build
from compiler.conv_plan import PAD_MAX
from compiler.errors import CompileError
from compiler.kernel import Kernel
from compiler.tensor import tensor
from hw.config import HwConfig, load_config
from hw.program import Program

Params = dict[str, Any]
I8 = (-128, 127)


@dataclass(frozen=True)
class GemmOperator:
    """A GEMM operator: kernel, natural inputs, packing, reference.

    ``shapes(params)`` gives the natural shape of every input (names in ``inputs``, dtypes in
    ``dtypes``), ``pack(cfg, arrays, params)`` the kernel's packed tensor arguments,
    ``out_shape(cfg, params)`` the packed output's shape, ``unpack(cfg, packed, params)`` the
    natural output, ``reference(arrays, params)`` the natural int32 result (before the cast to the
    output type), ``kernel_params`` the params passed to the kernel as constants.
    """

    name: str
    kernel: Kernel
    doc: str
    inputs: tuple[str, ...]
    dtypes: dict[str, str]
    shapes: Callable[[Params], dict[str, tuple[int, ...]]]
    pack: Callable[[HwConfig, dict[str, np.ndarray], Params], dict[str, np.ndarray | None]]
    output: str
    out_shape: Callable[[HwConfig, Params], tuple[int, ...]]
    unpack: Callable[[HwConfig, np.ndarray, Params], np.ndarray]
    pack_output: Callable[[HwConfig, np.ndarray, Params], np.ndarray]
    reference: Callable[[dict[str, np.ndarray], Params], np.ndarray]
    kernel_params: tuple[str, ...] = ()
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)

    def out_dtype(self, cfg: HwConfig) -> str:
        return f"int{cfg.out_width}"

    def kernel_args(self, cfg: HwConfig, arrays: dict[str, np.ndarray], params: Params) -> dict[str, Any]:
        """The kernel's arguments: packed inputs, the output's spec, the constants."""
        return {**self.pack(cfg, arrays, params),
                self.output: tensor(self.out_shape(cfg, params), self.out_dtype(cfg)),
                **{k: params[k] for k in self.kernel_params}}

    def run(self, cfg: HwConfig, arrays: dict[str, np.ndarray], params: Params) -> np.ndarray:
        """The golden path on natural arrays: pack, run the kernel, unpack."""
        args = self.kernel_args(cfg, arrays, params)
        tensors = self.kernel.run_golden(cfg, args)
        out = tensors[self.output].data.reshape(self.out_shape(cfg, params))
        return self.unpack(cfg, out, params)

    def compile(self, cfg: HwConfig, arrays: dict[str, np.ndarray], params: Params,
                name: str | None = None) -> Program:
        """A Program of the operator with the packed ``arrays`` attached as its inputs."""
        args = self.kernel_args(cfg, arrays, params)
        specs = {k: (tensor(v.shape, v.dtype.name) if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        prog = build(self.kernel, specs, cfg, name=name or self.name)
        for k, v in args.items():
            if isinstance(v, np.ndarray):
                prog.set_input(k, v.reshape(prog.region(k).shape))
        return prog

    def random_inputs(self, rng: np.random.Generator, params: Params,
                      ranges: dict[str, tuple[int, int]] | None = None) -> dict[str, np.ndarray]:
        """Random natural inputs of the shapes ``params`` give, in each input's range."""
        out = {}
        for name, shape in self.shapes(params).items():
            lo, hi = (ranges or {}).get(name) or self.ranges.get(name) or I8
            out[name] = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(self.dtypes[name])
        return out


# ---- the operators ------------------------------------------------------------------------------
def _conv_out(p: Params) -> tuple[int, int]:
    ho = (p["H"] + 2 * p["pad"] - p["kernel"]) // p["stride"] + 1
    wo = (p["W"] + 2 * p["pad"] - p["kernel"]) // p["stride"] + 1
    return ho, wo


def _opt_bias(b: np.ndarray | None, block: int) -> np.ndarray | None:
    return None if b is None else P.pack_bias(b, block)


MATMUL = GemmOperator(
    "matmul", K.matmul, "C = int8(A @ B): A (M x K), B (K x N) int8, the int32 sums narrowed like a C cast",
    ("A", "B"), {"A": "int8", "B": "int8"},
    lambda p: {"A": (p["M"], p["K"]), "B": (p["K"], p["N"])},
    lambda c, a, p: {"A": P.pack_matrix(a["A"], c.block), "B": P.pack_matmul_weights(a["B"], c.block)},
    "C", lambda c, p: (1, P.blocks(p["N"], c.block), p["M"], 1, c.block),
    lambda c, y, p: P.unpack_matrix(y, p["N"]), lambda c, r, p: P.pack_matrix(r, c.block),
    lambda a, p: ref.matmul_ref(a["A"], a["B"]))

DENSE = GemmOperator(
    "dense", K.dense, "C = requant(A @ W^T + bias): a quantized dense layer (W is out x in), shift-round, "
    "optional ReLU, clip to int8",
    ("A", "W", "bias"), {"A": "int8", "W": "int8", "bias": "int32"},
    lambda p: {"A": (p["M"], p["K"]), "W": (p["N"], p["K"]), "bias": (p["N"],)},
    lambda c, a, p: {"A": P.pack_matrix(a["A"], c.block), "W": P.pack_dense_weights(a["W"], c.block),
                     "bias": _opt_bias(a.get("bias"), c.block)},
    "C", lambda c, p: (1, P.blocks(p["N"], c.block), p["M"], 1, c.block),
    lambda c, y, p: P.unpack_matrix(y, p["N"]), lambda c, r, p: P.pack_matrix(r, c.block),
    lambda a, p: ref.dense_ref(a["A"], a["W"], a.get("bias"), p["shift"], p["relu"]),
    ("shift", "relu"), {"bias": (-20000, 20000)})

CONV2D = GemmOperator(
    "conv2d", K.conv2d, "Y = requant(conv2d(X, W) + bias): NCHW int8, any channels, KxK kernel, stride, zero "
    "padding, shift-round, optional ReLU, clip to int8",
    ("X", "W", "bias"), {"X": "int8", "W": "int8", "bias": "int32"},
    lambda p: {"X": (p["batch"], p["C"], p["H"], p["W"]), "W": (p["O"], p["C"], p["kernel"], p["kernel"]),
               "bias": (p["O"],)},
    lambda c, a, p: {"X": P.pack_activation(a["X"], c.block), "W": P.pack_conv_weights(a["W"], c.block),
                     "bias": _opt_bias(a.get("bias"), c.block)},
    "Y", lambda c, p: (p["batch"], P.blocks(p["O"], c.block), *_conv_out(p), c.block),
    lambda c, y, p: P.unpack_activation(y, p["O"]), lambda c, r, p: P.pack_activation(r, c.block),
    lambda a, p: ref.conv2d_layer_ref(a["X"], a["W"], a.get("bias"), p["stride"], p["pad"], p["shift"], p["relu"]),
    ("stride", "pad", "shift", "relu"), {"bias": (-20000, 20000)})

RESIDUAL_ADD = GemmOperator(
    "residual_add", K.residual_add, "Y = requant(X + R) of two int8 activations (GEMM against the identity "
    "block sums them in the accumulator), shift-round, optional ReLU, clip to int8",
    ("X", "R"), {"X": "int8", "R": "int8"},
    lambda p: {"X": (p["batch"], p["C"], p["H"], p["W"]), "R": (p["batch"], p["C"], p["H"], p["W"])},
    lambda c, a, p: {"X": P.pack_activation(a["X"], c.block), "R": P.pack_activation(a["R"], c.block)},
    "Y", lambda c, p: (p["batch"], P.blocks(p["C"], c.block), p["H"], p["W"], c.block),
    lambda c, y, p: P.unpack_activation(y, p["C"]), lambda c, r, p: P.pack_activation(r, c.block),
    lambda a, p: ref.residual_add_ref(a["X"], a["R"], p["shift"], p["relu"]),
    ("shift", "relu"))

RESNET_BLOCK = GemmOperator(
    "resnet_block", K.resnet_block, "ResNet basic block: relu(requant(conv(relu(requant(conv(X))))) + X), KxK "
    "convolutions with padding K//2, C -> C channels",
    ("X", "W1", "b1", "W2", "b2"), {"X": "int8", "W1": "int8", "b1": "int32", "W2": "int8", "b2": "int32"},
    lambda p: {"X": (p["batch"], p["C"], p["H"], p["W"]), "W1": (p["C"], p["C"], p["kernel"], p["kernel"]),
               "b1": (p["C"],), "W2": (p["C"], p["C"], p["kernel"], p["kernel"]), "b2": (p["C"],)},
    lambda c, a, p: {"X": P.pack_activation(a["X"], c.block),
                     "W": np.stack([P.pack_conv_weights(a["W1"], c.block), P.pack_conv_weights(a["W2"], c.block)]),
                     "bias": np.concatenate([P.pack_bias(a["b1"], c.block), P.pack_bias(a["b2"], c.block)])},
    "Y", lambda c, p: (p["batch"], P.blocks(p["C"], c.block), p["H"], p["W"], c.block),
    lambda c, y, p: P.unpack_activation(y, p["C"]), lambda c, r, p: P.pack_activation(r, c.block),
    lambda a, p: ref.resnet_block_ref(a["X"], a["W1"], a["b1"], a["W2"], a["b2"], p["shift1"], p["shift2"]),
    ("shift1", "shift2"), {"b1": (-20000, 20000), "b2": (-20000, 20000)})

def _pad_rows(x: np.ndarray, block: int) -> np.ndarray:
    """``x`` with zero rows appended up to a multiple of ``block`` rows."""
    out = np.zeros((P.blocks(x.shape[0], block) * block, x.shape[1]), dtype=x.dtype)
    out[:x.shape[0]] = x
    return out


MATMUL_NT = GemmOperator(
    "matmul_nt", K.matmul_nt, "C = requant(A @ X^T) of two int8 activations (Q K^T): X LOADed as it lies "
    "into the weight buffer, shift-round, clip to int8",
    ("A", "X"), {"A": "int8", "X": "int8"},
    lambda p: {"A": (p["M"], p["K"]), "X": (p["N"], p["K"])},
    lambda c, a, p: {"A": P.pack_matrix(a["A"], c.block), "X": P.pack_matrix(_pad_rows(a["X"], c.block), c.block)},
    "C", lambda c, p: (1, P.blocks(p["N"], c.block), p["M"], 1, c.block),
    lambda c, y, p: P.unpack_matrix(y, p["N"]), lambda c, r, p: P.pack_matrix(r, c.block),
    lambda a, p: ref.matmul_nt_ref(a["A"], a["X"], p["shift"]), ("shift",))

_ATT_MATS = ("wq", "wk", "wv", "wo")
_ATT_BIASES = ("bq", "bk", "bv", "bo")

ATTENTION = GemmOperator(
    "attention", ATT.attention, "Y = multi-head self-attention of T int8 tokens (Q, K, V projections, K Q^T per "
    "head, integer softmax, P V, output projection) at the kernel's default rescales",
    ("x", *_ATT_MATS, *_ATT_BIASES), {"x": "int8", **{k: "int8" for k in _ATT_MATS}, **{k: "int32" for k in _ATT_BIASES}},
    lambda p: {"x": (p["tokens"], p["D"]), **{k: (p["D"], p["D"]) for k in _ATT_MATS},
               **{k: (p["D"],) for k in _ATT_BIASES}},
    lambda c, a, p: ATT.attention_args(a["x"], a, c.block),
    "Y", lambda c, p: (1, P.blocks(p["D"], c.block), p["tokens"], 1, c.block),
    lambda c, y, p: P.unpack_matrix(y, p["D"]), lambda c, r, p: P.pack_matrix(r, c.block),
    lambda a, p: ATT.attention_reference(a["x"], a, p["heads"], ATT.DEFAULT_SCALES),
    ("tokens", "heads"), {"x": (-100, 100), **{k: (-60, 60) for k in _ATT_MATS}, **{k: (-3000, 3000) for k in _ATT_BIASES}})

GEMM_OPERATORS: dict[str, GemmOperator] = {op.name: op for op in (MATMUL, DENSE, CONV2D, RESIDUAL_ADD, RESNET_BLOCK,
                                                                  MATMUL_NT, ATTENTION)}


# ---- natural-array entry points -------------------------------------------------------------------
def _config(config: HwConfig | str) -> HwConfig:
    return config if isinstance(config, HwConfig) else load_config(config)


def _array(op: str, name: str, a: Any, dtype: str, ndim: int, what: str) -> np.ndarray:
    """``a`` as an array of ``dtype`` with ``ndim`` dimensions, else one CompileError line."""
    if not isinstance(a, np.ndarray):
        raise CompileError(f"operator '{op}': argument '{name}' must be a numpy array ({what}), got "
                           f"{type(a).__name__}")
    if a.dtype != np.dtype(dtype):
        raise CompileError(f"operator '{op}': argument '{name}' must be {dtype} ({what}), got {a.dtype}")
    if a.ndim != ndim or 0 in a.shape:
        raise CompileError(f"operator '{op}': argument '{name}' must be a non-empty {what}, got shape {a.shape}")
    return a


def _same(op: str, name: str, got: int, want: int, what: str) -> None:
    if got != want:
        raise CompileError(f"operator '{op}': argument '{name}' has {got} {what}, expected {want}")


def _matmul_params(a: Any, b: Any) -> tuple[dict[str, np.ndarray], Params]:
    a = _array("matmul", "a", a, "int8", 2, "M x K matrix")
    b = _array("matmul", "b", b, "int8", 2, "K x N matrix")
    _same("matmul", "b", b.shape[0], a.shape[1], "rows (K)")
    return {"A": a, "B": b}, {"M": a.shape[0], "K": a.shape[1], "N": b.shape[1]}


def _dense_params(a: Any, w: Any, bias: Any, shift: int, relu: bool) -> tuple[dict[str, np.ndarray], Params]:
    a = _array("dense", "a", a, "int8", 2, "M x K matrix")
    w = _array("dense", "w", w, "int8", 2, "N x K weight (out x in)")
    _same("dense", "w", w.shape[1], a.shape[1], "input features (K)")
    arrays = {"A": a, "W": w}
    if bias is not None:
        arrays["bias"] = _array("dense", "bias", bias, "int32", 1, "vector of N int32")
        _same("dense", "bias", bias.shape[0], w.shape[0], "entries (N)")
    return arrays, {"M": a.shape[0], "K": a.shape[1], "N": w.shape[0], "shift": shift, "relu": relu}


def _int_param(op: str, name: str, v: Any, lo: int, hi: int, why: str = "") -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
        raise CompileError(f"operator '{op}': argument '{name}': {v!r} must be an integer {lo}..{hi}{why}")
    return int(v)


def _conv_params(x: Any, w: Any, bias: Any, stride: int, pad: int, shift: int,
                 relu: bool) -> tuple[dict[str, np.ndarray], Params]:
    x = _array("conv2d", "x", x, "int8", 4, "NCHW activation")
    w = _array("conv2d", "w", w, "int8", 4, "(O, C, KH, KW) weight")
    _same("conv2d", "w", w.shape[1], x.shape[1], "input channels")
    if w.shape[2] != w.shape[3]:
        raise CompileError(f"operator 'conv2d': argument 'w' has a {w.shape[2]}x{w.shape[3]} kernel; square "
                           f"kernels only")
    stride = _int_param("conv2d", "stride", stride, 1, 64)
    pad = _int_param("conv2d", "pad", pad, 0, PAD_MAX, " (LOAD pads at most 15 entries)")
    k, (h, wd) = w.shape[2], x.shape[2:]
    if h + 2 * pad < k or wd + 2 * pad < k:
        raise CompileError(f"operator 'conv2d': argument 'w': the {k}x{k} kernel does not fit the {h}x{wd} input "
                           f"padded by {pad}")
    arrays = {"X": x, "W": w}
    if bias is not None:
        arrays["bias"] = _array("conv2d", "bias", bias, "int32", 1, "vector of O int32")
        _same("conv2d", "bias", bias.shape[0], w.shape[0], "entries (output channels)")
    n, c, h, wd = x.shape
    return arrays, {"batch": n, "C": c, "H": h, "W": wd, "O": w.shape[0], "kernel": w.shape[2], "stride": stride,
                    "pad": pad, "shift": shift, "relu": relu}


def matmul(a: np.ndarray, b: np.ndarray, *, config: HwConfig | str = "default") -> np.ndarray:
    """``int8(a @ b)`` of int8 matrices on the golden path (M x K by K x N, any sizes)."""
    arrays, p = _matmul_params(a, b)
    return MATMUL.run(_config(config), arrays, p)


def dense(a: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, *, shift: int = 0, relu: bool = False,
          config: HwConfig | str = "default") -> np.ndarray:
    """A quantized dense layer ``requant(a @ w.T + bias)`` (``w`` is out x in) on the golden path."""
    arrays, p = _dense_params(a, w, bias, shift, relu)
    return DENSE.run(_config(config), arrays, p)


def conv2d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, *, stride: int = 1, pad: int = 0,
           shift: int = 0, relu: bool = False, config: HwConfig | str = "default") -> np.ndarray:
    """A quantized 2-D convolution ``requant(conv(x, w) + bias)`` of NCHW int8 ``x`` and ``(O, C, K, K)``
    int8 ``w`` on the golden path; NCHW result."""
    arrays, p = _conv_params(x, w, bias, stride, pad, shift, relu)
    return CONV2D.run(_config(config), arrays, p)


def residual_add(x: np.ndarray, r: np.ndarray, *, shift: int = 0, relu: bool = True,
                 config: HwConfig | str = "default") -> np.ndarray:
    """``requant(x + r)`` of two NCHW int8 activations of one shape on the golden path."""
    x = _array("residual_add", "x", x, "int8", 4, "NCHW activation")
    r = _array("residual_add", "r", r, "int8", 4, "NCHW activation")
    if r.shape != x.shape:
        raise CompileError(f"operator 'residual_add': argument 'r' has shape {r.shape}, x has {x.shape}")
    n, c, h, w = x.shape
    return RESIDUAL_ADD.run(_config(config), {"X": x, "R": r},
                            {"batch": n, "C": c, "H": h, "W": w, "shift": shift, "relu": relu})


def resnet_block(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray, *,
                 shift1: int = 8, shift2: int = 8, config: HwConfig | str = "default") -> np.ndarray:
    """A ResNet basic block on NCHW int8 ``x`` with ``(C, C, K, K)`` weights and int32 biases."""
    x = _array("resnet_block", "x", x, "int8", 4, "NCHW activation")
    n, c, h, wd = x.shape
    arrays = {"X": x}
    for name, a in (("w1", w1), ("w2", w2)):
        a = _array("resnet_block", name, a, "int8", 4, "(C, C, K, K) weight")
        if a.shape[:2] != (c, c) or a.shape[2] != a.shape[3] or a.shape != w1.shape:
            raise CompileError(f"operator 'resnet_block': argument '{name}' has shape {a.shape}, expected "
                               f"({c}, {c}, K, K) like w1")
        arrays[name.upper()] = a
    for name, b in (("b1", b1), ("b2", b2)):
        arrays[name] = _array("resnet_block", name, b, "int32", 1, "vector of C int32")
        _same("resnet_block", name, b.shape[0], c, "entries (channels)")
    return RESNET_BLOCK.run(_config(config), arrays, {"batch": n, "C": c, "H": h, "W": wd,
                                                      "kernel": w1.shape[2], "shift1": shift1, "shift2": shift2})


def compile_operator(name: str, config: HwConfig | str, arrays: dict[str, np.ndarray], params: Params,
                     program_name: str | None = None) -> Program:
    """The Program of operator ``name`` on natural ``arrays`` (packed and attached as inputs)."""
    if name not in GEMM_OPERATORS:
        raise CompileError(f"unknown GEMM operator '{name}' (operators: {', '.join(GEMM_OPERATORS)})")
    return GEMM_OPERATORS[name].compile(_config(config), arrays, params, program_name)
