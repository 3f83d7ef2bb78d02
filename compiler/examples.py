"""Example kernels registered by name, and the Case API the runners use.

``list_examples()`` names them, ``get_example(name)`` describes one (``.params``
holds its defaults; ``.params_for(cfg)`` the defaults on a config, e.g. vadd's
smaller tile on the small config), ``make_case(name, cfg, params, seed)`` compiles it into a
Program with random inputs and golden ``expected`` outputs attached.

Shapes and padding: a tensor of ``n`` elements occupies ``ceil(n / lanes)`` DRAM
vectors. Its Program region keeps the user's shape when ``n`` is a multiple of the
lane count, else it is the padded vector shape ``(nvec, lanes)``. Everything a Case
returns (``program.inputs``, ``program.expected``, ``golden()``, a shipped example's
``reference()``) is region-shaped, exactly what ``Program.read_outputs`` returns; padding
lanes of inputs are zero and padding lanes of outputs hold the operator applied to that
zero padding. ``Case.unpad(outputs)`` cuts them back to the user's shapes. A user kernel's
reference is in the user's shapes (only those elements are compared), and a tensor it loads
and stores in place is among the outputs of ``golden()`` and ``program.expected``.

GEMM examples (``Example.gemm`` names a :data:`compiler.gemm_ops.GEMM_OPERATORS` entry)
take integer parameters that size the operator's natural inputs (``M``, ``K``, ``N``; ``C``,
``H``, ``W``, ``O``, ``kernel``...), draw them at random (int8 in [-128, 127], int32
biases in their own range) and pack them: the Program's inputs and outputs, and
everything the Case returns, are in the accelerator's packed layout
(:mod:`compiler.packing`); ``Case.reference()`` is the plain numpy reference of the
natural inputs, packed. ``Example.large`` marks the examples whose runs take millions
of cycles on some config (the ResNet layer on ``small``): slow back-ends may skip them.

User kernels: ``KERNEL`` may be ``path/to/file.py:function`` (docs/kernels.md). Each
tensor argument of the function is given as a param ``NAME=DIMxDIM...[:DTYPE]`` (dtype
int32 by default; outputs must be the output width, e.g. ``int8``) or with its data as
``NAME=@file.npy`` / ``NAME=@file.npz:ARRAY``; every other param is a constant (an
integer when it parses as one). Inputs (tensors the kernel loads) without data get
seeded random values of their own dtype in :data:`USER_INPUT_RANGES` (int8: the whole
range; int16 and int32: [-32768, 32767]), unless the file defines
``<function>_inputs(rng, **params)`` (``rng`` a seeded ``numpy.random.Generator``, the
params as the kernel gets them: tensors as :class:`TensorSpec`, constants as values)
returning ``{input: array}`` for some or all inputs. If the file defines
``<function>_reference(**inputs, **constants)`` returning ``{output: array}`` (an
int32 or output-typed array of the user's shape), ``Case.reference()`` uses it;
otherwise ``Case.has_reference`` is False and ``reference()`` returns None. A file
may also define ``<function>_params`` (a dict of default params).
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import sys
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np

from compiler.build import build
from compiler.errors import CompileError, KernelFailure
from compiler.gemm_ops import GEMM_OPERATORS
from compiler.kernel import Kernel, as_kernel, describe_failure, reporting_failures
from compiler.ops import OPERATORS, Operator, tile_fit
from compiler.gelu import GELU
from compiler.layer_norm import LAYER_NORM
from compiler.softmax import SOFTMAX
from compiler.params import ParamError, TensorData, parse_items, parse_user_default
from compiler.tensor import TensorSpec, pad_to_vectors, region_shape, tensor, unpad
from hw.config import ConfigError, HwConfig, load_config
from hw.program import Program, align_up

I32 = (-(1 << 31), (1 << 31) - 1)
# Random inputs of a user kernel, by dtype: int8 spans its range (what a quantized GEMM kernel reads);
# wider ones stay small enough that sums of a few thousand terms do not wrap.
USER_INPUT_RANGES = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-32768, 32767)}


class ExampleError(CompileError):
    """An unknown example, a bad parameter or an unloadable user kernel."""


@dataclass(frozen=True)
class Example:
    """A registered example: an operator, default params (``shape``, ``tile``, constants) and input ranges."""

    name: str
    description: str
    params: dict[str, Any]
    operator: str | None = None
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    user: tuple[str, str] | None = None  # (file, function) of a user kernel
    # a user kernel's parameters whose default (in its signature or ``<fn>_params``) is True or False:
    # ``-p NAME=VALUE`` of these reads true/false/1/0
    user_flags: frozenset[str] = frozenset()
    # config name -> params that replace the defaults on that config (e.g. a smaller tile where the
    # accumulator buffer is smaller); explicit params still win
    per_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    gemm: str | None = None  # a GEMM operator (compiler.gemm_ops), instead of an elementwise one
    large: bool = False  # millions of cycles on some config: slow back-ends may skip it
    # defaults that follow the config or the params given (a row operator's shape follows n and the
    # lanes): (params, the params the user gave, cfg) -> params
    follow: Callable[[dict[str, Any], dict[str, Any], HwConfig], dict[str, Any]] | None = None

    def defaults_on(self, cfg: HwConfig) -> dict[str, Any]:
        """The defaults on ``cfg`` before those that follow the config are resolved: the params with the
        ``per_config`` entry of ``cfg`` (or of a shipped config of the same core) over them."""
        extra = self.per_config.get(cfg.name)
        if extra is None:
            extra = next((p for key, p in self.per_config.items() if _same_core(cfg, key)), {})
        return {**self.params, **extra}

    @property
    def per_config_keys(self) -> list[str]:
        """The params some ``per_config`` entry sets (vadd's tile, ...): a run on another config must be given
        them to do the same work."""
        return [k for k in self.params if any(k in extra for extra in self.per_config.values())]

    def params_for(self, cfg: HwConfig) -> dict[str, Any]:
        """The default params on ``cfg``: a ``per_config`` entry applies to its config and to every
        config of the same core in other numbers (``quad`` = default x4, ``small2`` = small x2)."""
        return self.resolve(self.defaults_on(cfg), {}, cfg)

    def params_with(self, given: dict[str, Any], cfg: HwConfig) -> dict[str, Any]:
        """The params on ``cfg`` with ``given`` (the user's) over the defaults; an unknown one is one line."""
        p = self.defaults_on(cfg)
        for k, v in given.items():
            if k not in p:
                raise ExampleError(f"example '{self.name}' has no param '{k}' (params: {', '.join(p)})")
            p[k] = v
        return self.resolve(p, given, cfg)

    def resolve(self, p: dict[str, Any], given: dict[str, Any], cfg: HwConfig) -> dict[str, Any]:
        """``p`` with the defaults that follow the config and ``given`` (the params the user gave) set."""
        return self.follow(p, given, cfg) if self.follow is not None else p


def _positive_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0


def _rows_follow(p: dict[str, Any], given: dict[str, Any], cfg: HwConfig) -> dict[str, Any]:
    """A row operator's tensors are (n, lanes): the shape follows n and the lanes unless given, and a shape
    given alone sets n (an n that is not a positive integer is left for the kernel to name)."""
    if "shape" not in given and _positive_int(p["n"]):
        return {**p, "shape": (int(p["n"]), cfg.lanes)}
    if "shape" in given and "n" not in given and isinstance(p["shape"], (tuple, list)) and p["shape"]:
        return {**p, "n": p["shape"][0]}
    return p


def _tile_follow(p: dict[str, Any], given: dict[str, Any], cfg: HwConfig) -> dict[str, Any]:
    """A two-operand example's default tile, where it does not fit the config's accumulator (a config of
    the user's with a smaller one), becomes the largest that does; a tile given is left for the kernel."""
    fit = tile_fit(cfg, 2)
    if "tile" not in given and _positive_int(p["tile"]) and p["tile"] > fit >= 1:
        return {**p, "tile": fit}
    return p


def _heads_follow(p: dict[str, Any], given: dict[str, Any], cfg: HwConfig) -> dict[str, Any]:
    """Attention's features default to one block of lanes per head (a head is whole blocks)."""
    if "D" not in given and _positive_int(p["heads"]):
        return {**p, "D": int(p["heads"]) * cfg.lanes}
    return p


# what tells one core from another: every config field but its name, description, core count and the
# shared port's bursts in flight
_CORE_FIELDS = tuple(f.name for f in fields(HwConfig)
                     if f.name not in ("name", "description", "num_cores", "dram_reads_in_flight", "dram_writes_in_flight",
                                       "source"))


@lru_cache(maxsize=None)
def _core_of(name: str) -> tuple[Any, ...] | None:
    try:
        c = load_config(name)
    except ConfigError:
        return None
    return tuple(getattr(c, f) for f in _CORE_FIELDS)


def _same_core(cfg: HwConfig, name: str) -> bool:
    """Whether ``cfg`` has the core of the shipped config ``name`` (any number of them)."""
    return _core_of(name) == tuple(getattr(cfg, f) for f in _CORE_FIELDS)


# The transformer's operators, not in compiler.ops.OPERATORS: softmax and layer norm reduce along axis 0
# (not elementwise), GELU derives its constants from real scales.
ROW_OPERATORS: dict[str, Operator] = {"softmax": SOFTMAX, "layer_norm": LAYER_NORM, "gelu": GELU}


def _ex(name: str, op: str, description: str, ranges: dict[str, tuple[int, int]],
        per_config: dict[str, dict[str, Any]] | None = None,
        follow: Callable[[dict[str, Any], dict[str, Any], HwConfig], dict[str, Any]] | None = None,
        **params: Any) -> Example:
    return Example(name, description, {"tile": None, **params}, op, ranges, per_config=dict(per_config or {}),
                   follow=follow)


def _gx(name: str, op: str, description: str, large: bool = False, **params: Any) -> Example:
    return Example(name, description, params, None, {}, gemm=op, large=large)


EXAMPLES: dict[str, Example] = {e.name: e for e in [
    _ex("vadd", "add", "VTA get-started vector add: C = int8(A + B), 4 tiles of 16 vectors on default "
        "(16 tiles of 8 on small)", {"A": I32, "B": I32}, {"small": {"tile": 8}}, shape=(1, 64, 1, 16), tile=16,
        follow=_tile_follow),
    _ex("vsub_tail", "sub", "C = int8(A - B) on 100 elements (a tail: not a multiple of the lanes)",
        {"A": I32, "B": I32}, shape=(100,)),
    _ex("vmul", "mul", "C = int8(A * B), low 32 bits of the product, 3x37 elements",
        {"A": I32, "B": I32}, shape=(3, 37)),
    _ex("vmulhr", "mulhr", "C = int8(MULHR(A, B)) = int8((A * B + 2^30) >> 31), the rounding multiply-high of "
        "fixed-point requantization, 2x45 elements", {"A": I32, "B": I32}, shape=(2, 45)),
    _ex("vclz", "clz", "C = int8(CLZ(A)), the leading zeros of each 32-bit lane (32 for 0, 0 when negative), "
        "3x41 elements from 0 up to 2^24", {"A": (0, 1 << 24)}, shape=(3, 41)),
    Example("softmax", "integer softmax (I-BERT exp, 1/sum by CLZ and Newton steps) of Q8 logits along axis 0: "
            "16 elements per row, one row per lane, int8 Q7 probabilities (normalize=search: without CLZ)",
            {"n": 16, "shape": (16, 16), "normalize": "clz"}, "softmax", {"A": (-2000, 2000)}, follow=_rows_follow),
    Example("layer_norm", "integer layer norm (mean, variance, 1/sqrt by CLZ and Newton steps, scale G and shift "
            "Bb) of 16 features per token, one token per lane, int8 out (8 features on small)",
            {"n": 16, "shape": (16, 16), "eps": 1000, "eps_frac": 4, "shift": 18}, "layer_norm",
            {"A": (-128, 128), "G": (1 << 20, 1 << 24), "Bb": (-(1 << 22), 1 << 22)},
            per_config={"small": {"n": 8}}, follow=_rows_follow),
    Example("gelu", "integer GELU (I-BERT's polynomial erf) of int32 values in 1/64 steps up to +-64, int8 out "
            "in 1/32 steps, 20x40 elements", {"shape": (20, 40), "in_scale": 1 / 64, "out_scale": 1 / 32,
                                              "in_bound": 4096, "tile": None}, "gelu", {"A": (-4096, 4096)}),
    _ex("vmin", "min", "C = int8(min(A, B)) on a 4-D tensor with a tail",
        {"A": (-300, 300), "B": (-300, 300)}, shape=(2, 5, 7, 3)),
    _ex("vmax_imm", "max_imm", "C = int8(max(A, imm)) with an immediate operand",
        {"A": (-300, 300)}, shape=(257,), imm=-7),
    _ex("relu", "relu", "C = int8(max(A, 0))", {"A": (-1000, 1000)}, shape=(33, 65)),
    _ex("clip", "clip", "C = int8(clip(A, lo, hi)): symmetric CLIP, or MAX/MIN when lo != -hi",
        {"A": (-300, 300)}, shape=(7, 123), lo=-100, hi=100),
    _ex("requant", "shr_round", "int32 -> int8 requantization: (A + 2^(s-1)) >> s, clip to int8; "
        "larger than the accumulator buffer; shift 18 builds the rounding constant with MOV/SHR",
        {"A": (-(1 << 26), 1 << 26)}, shape=(64, 1000), shift=18),
    _ex("requant_real", "requant_scale", "int32 -> int8 requantization by a real scale (0.0123, zero point -5) as "
        "gemmlowp does: MULHR by a Q31 multiplier, a rounding shift, clip", {"A": (-(1 << 20), 1 << 20)},
        shape=(40, 37), scale=0.0123, zero_point=-5),
    _ex("fused", "fused", "fused chain C = int8(relu(clip((A + B) >> s, -127, 127))) on 4-D with a tail",
        {"A": (-3000, 3000), "B": (-3000, 3000)}, shape=(4, 3, 33, 17), shift=3),
    _ex("vshr", "shift", "C = int8(A >> B) per lane with a buffer operand (negative B shifts left)",
        {"A": I32, "B": (-40, 40)}, shape=(50, 3)),
    _ex("vadd_large", "add", "C = int8(A + B) on 128000 elements, many times the accumulator buffer",
        {"A": (-1000, 1000), "B": (-1000, 1000)}, shape=(128, 1000)),
    _gx("matmul", "matmul", "C = int8(A @ B), 37x70 by 70x23 int8: no dimension a multiple of the block",
        M=37, K=70, N=23),
    Example("matmul_nt", "C = requant(A @ X^T) of two int8 activations, 24x32 by (23x32)^T (12x16 by (11x16)^T "
            "on small): X loaded as weight blocks as it lies (Q K^T's transpose for free), shift 6",
            {"M": 24, "K": 32, "N": 23, "shift": 6}, None, {}, gemm="matmul_nt",
            per_config={"small": {"M": 12, "K": 16, "N": 11}}),
    Example("attention", "multi-head self-attention of 8 int8 tokens of 32 features, 2 heads (16 features on "
            "small): Q, K, V projections, K Q^T per head, integer softmax, P V by a transpose GEMM, output "
            "projection, one kernel", {"tokens": 8, "D": 32, "heads": 2}, None, {}, gemm="attention",
            follow=_heads_follow),
    _gx("dense", "dense", "dense layer 10x300 -> 75: + int32 bias, requant (shift-round-clip to int8), ReLU",
        M=10, K=300, N=75, shift=11, relu=True),
    _gx("conv3x3", "conv2d", "3x3 convolution, stride 1, padding 1: 20x13x11 -> 24 channels, bias, requant, ReLU",
        batch=1, C=20, H=13, W=11, O=24, kernel=3, stride=1, pad=1, shift=10, relu=True),
    _gx("conv3x3_s2", "conv2d", "3x3 convolution, stride 2, padding 1: 19x15x14 -> 33 channels, bias, requant",
        batch=1, C=19, H=15, W=14, O=33, kernel=3, stride=2, pad=1, shift=10, relu=False),
    _gx("conv1x1_s2", "conv2d", "1x1 convolution, stride 2 (a ResNet shortcut): 2 images 24x14x14 -> 40 channels",
        batch=2, C=24, H=14, W=14, O=40, kernel=1, stride=2, pad=0, shift=7, relu=False),
    _gx("conv2d_resnet", "conv2d", "the VTA tutorial's ResNet-18 layer: 256x14x14 -> 256 channels, 3x3, padding 1, "
        "bias, requant, ReLU (115.6 M multiply-accumulates)", large=True,
        batch=1, C=256, H=14, W=14, O=256, kernel=3, stride=1, pad=1, shift=12, relu=True),
    _gx("residual_add", "residual_add", "residual add of two int8 activations 2x20x5x7 (GEMM with identity weights "
        "into the accumulator), requant, ReLU", batch=2, C=20, H=5, W=7, shift=1, relu=True),
    _gx("resnet_block", "resnet_block", "ResNet basic block 24x9x10: conv3x3, ReLU, conv3x3, add the input, ReLU "
        "(the first conv's output through scratch DRAM)", batch=1, C=24, H=9, W=10, kernel=3, shift1=10, shift2=10),
]}


def list_examples() -> list[str]:
    """Names of the registered examples."""
    return list(EXAMPLES)


def _is_user(name: str) -> bool:
    return ":" in name and name.split(":", 1)[0].endswith(".py")


def _load_user(name: str) -> tuple[Kernel, Any, str]:
    obj, mod, fn = load_user_object(name, "kernel")
    path = name.rsplit(":", 1)[0]
    if isinstance(obj, type):
        raise ExampleError(f"{path}: '{fn}' is a class, not a kernel function (give path.py:function)")
    if obj is None or not callable(obj):
        raise ExampleError(f"{path}: defines no function '{fn}'")
    return as_kernel(obj), mod, fn


def load_user_object(name: str, what: str = "kernel") -> tuple[Any, Any, str]:
    """Import the user file of ``path.py:NAME`` and return (its attribute NAME or None, the module, NAME);
    a missing file or an import that fails is one ExampleError line (``what`` names the kind of file).
    The file's folder goes at the end of ``sys.path``, so it imports the modules beside it (as a script
    would) without shadowing the project's or the installed ones."""
    path, fn = name.rsplit(":", 1)
    p = Path(path)
    if not p.is_file():
        raise ExampleError(f"{path}: no such {what} file")
    folder = str(p.resolve().parent)
    if folder not in sys.path:
        sys.path.append(folder)
    mod_name = f"_cosim_user_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise ExampleError(f"{path}: cannot be imported")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise ExampleError(f"{path}:{e.lineno}: import failed: SyntaxError: {e.msg}") from e
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # the user's file (sys.exit too): report in one line, do not crash
        raise ExampleError(f"{path}: import failed: {describe_failure(str(spec.origin), e)}") from e
    return getattr(mod, fn, None), mod, fn


def get_example(name: str) -> Example:
    """The example called ``name`` (or a ``file.py:function`` user kernel)."""
    if _is_user(name):
        k, mod, fn = _load_user(name)
        doc = (k.fn.__doc__ or "user kernel").strip().splitlines()[0]
        defaults = getattr(mod, f"{fn}_params", None) or {}
        if not isinstance(defaults, dict):
            raise ExampleError(f"{name.rsplit(':', 1)[0]}: '{fn}_params' must be a dict of the kernel's default "
                               f"parameters, not {type(defaults).__name__}")
        flags = {p.name for p in k.signature.parameters.values() if isinstance(p.default, bool)} | \
            {n for n, v in defaults.items() if isinstance(v, bool)}
        return Example(fn, doc, dict(defaults), None, {}, tuple(name.rsplit(":", 1)), user_flags=frozenset(flags))
    if name not in EXAMPLES:
        if name.lower().endswith(".onnx") and Path(name).is_file():
            raise ExampleError(f"{name}: an ONNX model; import it into a Program folder first (cosim import {name} "
                               f"-o DIR), then run the folder")
        if "/" in name or "\\" in name:  # a path, not an example name: listing examples would not help
            raise ExampleError(f"{name}: no such Program folder, and not a kernel given as path.py:function")
        raise ExampleError(f"unknown example '{name}' (examples: {', '.join(EXAMPLES)}; or give path.py:function "
                           f"or a Program folder)")
    return EXAMPLES[name]


# ---- params ------------------------------------------------------------------------------
def parse_params(name: str, items: list[str] | None) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` strings for kernel ``name`` (:mod:`compiler.params`), typed like its defaults."""
    ex = get_example(name)
    return parse_items(items, None if ex.user is not None else ex.params, name, ex.user_flags)


# ---- cases -------------------------------------------------------------------------------
@dataclass
class Case:
    """A compiled example: the Program (inputs and expected attached) and its two oracles."""

    name: str
    config: HwConfig
    params: dict[str, Any]
    program: Program
    kernel: Kernel
    user_inputs: dict[str, np.ndarray]  # the user-shaped inputs
    consts: dict[str, Any]
    shapes: dict[str, tuple[int, ...]]  # user shape of every tensor
    out_specs: dict[str, TensorSpec]
    _reference: Callable[[], dict[str, np.ndarray]] | None = None
    in_place: tuple[str, ...] = ()  # inputs the kernel also stores: their final values are checked as outputs
    reference_in_user_shapes: bool = False  # a user kernel's reference: the user's shapes, not the regions'

    @property
    def inputs(self) -> dict[str, np.ndarray]:
        """The Program's inputs: region-shaped, zero-padded."""
        return self.program.inputs

    @property
    def expected(self) -> dict[str, np.ndarray]:
        return self.program.expected

    @property
    def has_reference(self) -> bool:
        return self._reference is not None

    def _region(self, name: str, a: np.ndarray) -> np.ndarray:
        return a.reshape(self.program.region(name).shape)

    def golden(self) -> dict[str, np.ndarray]:
        """Outputs of the golden path (the kernel called on numpy), region-shaped like read_outputs.

        An exception of the kernel's own code becomes one KernelFailure line (see compiler.errors)."""
        # a tensor the kernel loads and stores (in place) runs on a copy: its stores must not reach the inputs
        # every other model (and the Program folder) runs on
        inputs = {n: a.copy() if n in self.in_place else a for n, a in self.user_inputs.items()}
        args = {**inputs, **self.out_specs, **self.consts}
        with reporting_failures(self.kernel.fn, f"kernel '{self.kernel.name}'"):
            tensors = self.kernel.run_golden(self.config, args)
        return {n: self._region(n, tensors[n].data) for n in (*self.out_specs, *self.in_place)}

    def reference(self) -> dict[str, np.ndarray] | None:
        """The plain numpy expression of the operator (same keys; region-shaped for a shipped example, the
        user's shapes for a user kernel's reference), or None without one."""
        return None if self._reference is None else self._reference()

    def unpad(self, outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Region-shaped outputs cut back to the user's shapes."""
        return {n: unpad(a, self.shapes[n]) for n, a in outputs.items()}


def _out_dtype(cfg: HwConfig) -> str:
    return f"int{cfg.out_width}"


def _random(rng: np.random.Generator, shape: tuple[int, ...], lo_hi: tuple[int, int]) -> np.ndarray:
    lo, hi = lo_hi
    return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(np.int32)


def check_dram_fits(cfg: HwConfig, specs: dict[str, TensorSpec], what: str) -> None:
    """Refuse, before anything is allocated, tensors that cannot all fit the config's DRAM.

    Counts as the compiler's layout does (each tensor in whole vectors, regions aligned, the
    instruction region first, at least one aligned block); ``what`` names the parameter at fault.
    """
    end = cfg.region_align
    for s in specs.values():
        nvec = -(-math.prod(s.shape) // cfg.lanes)
        end = align_up(end + nvec * cfg.lanes * np.dtype(s.dtype).itemsize, cfg.region_align)
    if end > cfg.dram_bytes:
        names = ", ".join(f"{n} {s.dtype} {'x'.join(map(str, s.shape))}" for n, s in specs.items())
        raise ParamError(f"{what}: the tensors ({names}) need {end:,} bytes of DRAM, config '{cfg.name}' has "
                         f"{cfg.dram_bytes:,}")


def make_case(name: str, cfg: HwConfig | str, params: dict[str, Any] | None = None, seed: int = 0) -> Case:
    """Compile example ``name`` for ``cfg`` with ``params`` over its defaults and seeded random inputs.

    Sizes are checked against the config's DRAM before any array is allocated."""
    cfg = cfg if isinstance(cfg, HwConfig) else load_config(cfg)
    ex = get_example(name)
    if ex.user is not None:
        return _user_case(name, ex, cfg, params or {}, seed)
    if ex.gemm is not None:
        return _gemm_case(ex, cfg, params or {}, seed)
    p = ex.params_with(params or {}, cfg)
    op = OPERATORS[ex.operator] if ex.operator in OPERATORS else ROW_OPERATORS[ex.operator]  # type: ignore[index]
    shape = tuple(p["shape"]) if isinstance(p["shape"], (tuple, list)) else (p["shape"],)
    if not shape or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s <= 0 for s in shape):
        raise ParamError(f"param 'shape': {p['shape']!r} is not a shape of positive integers")
    shape = tuple(int(s) for s in shape)
    consts = {**{k: v for k, v in p.items() if k != "shape"}, **op.fixed}
    out_dt = _out_dtype(cfg)
    out_specs = {op.output: tensor(shape, out_dt)}
    specs = {**{n: tensor(shape, "int32") for n in op.inputs}, **out_specs}
    check_dram_fits(cfg, specs, "param 'shape'")
    with reporting_failures(op.kernel.fn, f"kernel '{ex.name}'"):
        program = build(op.kernel, {**specs, **consts}, cfg, name=ex.name)
    rng = np.random.default_rng(seed)
    user_inputs = {n: _random(rng, shape, ex.ranges.get(n, (-1000, 1000))) for n in op.inputs}
    shapes = {n: shape for n in specs}

    def reference() -> dict[str, np.ndarray]:
        padded = {n: pad_to_vectors(a, cfg.lanes, np.int32).reshape(-1) for n, a in user_inputs.items()}
        ref_consts = {k: v for k, v in consts.items() if k not in ("tile", "op")}
        r = op.reference(**padded, **ref_consts).astype(out_dt)  # the narrowing cast wraps like C
        return {op.output: r.reshape(region_shape(shape, cfg.lanes))}

    case = Case(ex.name, cfg, p, program, op.kernel, user_inputs, consts, shapes, out_specs, reference)
    _attach(case)
    return case


def _attach(case: Case) -> None:
    for n, a in case.user_inputs.items():  # copies: the Program's inputs share memory with nothing else
        dt = np.int32 if a.dtype.kind != "i" else a.dtype
        case.program.set_input(n, np.array(pad_to_vectors(a, case.config.lanes, dt).reshape(
            case.program.region(n).shape)))
    case.program.expected = case.golden()


def check_gemm_params(p: dict[str, Any]) -> None:
    """Refuse (ParamError) a GEMM example's size that is not a positive integer (padding and shifts: non-negative)."""
    for k, v in p.items():
        if isinstance(v, bool) or k in ("relu",):
            continue
        zero_ok = k in ("pad", "shift", "shift1", "shift2")
        if not isinstance(v, (int, np.integer)) or v < (0 if zero_ok else 1):
            raise ParamError(f"param '{k}': {v!r} must be a {'non-negative' if zero_ok else 'positive'} integer")


def _gemm_case(ex: Example, cfg: HwConfig, params: dict[str, Any], seed: int) -> Case:
    """A GEMM example: random natural inputs of the sizes the params give, packed (module docstring)."""
    op = GEMM_OPERATORS[ex.gemm]  # type: ignore[index]
    p = ex.params_with(params, cfg)
    check_gemm_params(p)
    out_shape = op.out_shape(cfg, p)
    if min(out_shape) < 1:
        raise ParamError(f"param 'kernel': a {p['kernel']}x{p['kernel']} kernel with padding {p['pad']} and stride "
                         f"{p['stride']} does not fit the {p['H']}x{p['W']} input (output {out_shape[2:4]})")
    shapes = op.shapes(p)
    specs = {n: tensor(s, op.dtypes[n]) for n, s in shapes.items()}
    check_dram_fits(cfg, {**specs, op.output: tensor(out_shape, op.out_dtype(cfg))}, "the params")
    rng = np.random.default_rng(seed)
    natural = op.random_inputs(rng, p, ex.ranges)
    args = op.kernel_args(cfg, natural, p)
    packed = {n: a for n, a in args.items() if isinstance(a, np.ndarray)}
    out_specs = {op.output: args[op.output]}
    consts = {n: v for n, v in args.items() if n not in packed and n not in out_specs}
    specs = {**{n: tensor(a.shape, a.dtype.name) for n, a in packed.items()}, **out_specs}
    with reporting_failures(op.kernel.fn, f"kernel '{ex.name}'"):
        program = build(op.kernel, {**specs, **consts}, cfg, name=ex.name)
    out_dt = op.out_dtype(cfg)

    def reference() -> dict[str, np.ndarray]:
        r = op.reference(natural, p).astype(out_dt)  # the narrowing cast wraps like C
        return {op.output: op.pack_output(cfg, r, p).reshape(program.region(op.output).shape)}

    case = Case(ex.name, cfg, p, program, op.kernel, packed, consts, {n: s.shape for n, s in specs.items()},
                out_specs, reference)
    _attach(case)
    return case


def _constant_hint(message: str, consts: dict[str, Any], k: Kernel) -> str:
    """What to write instead when a kernel refused a bare number that was meant as a tensor: ``-p NAME=64``
    made NAME the constant 64, and the error names NAME or NAME is a parameter without a default (a
    kernel's tensors have none)."""
    params = k.signature.parameters
    for n, v in consts.items():
        p = params.get(n)
        bare = p is not None and p.default is inspect.Parameter.empty
        if isinstance(v, int) and not isinstance(v, bool) and v > 0 and (f"'{n}'" in message or bare):
            return (f"-p {n}={v} made '{n}' the constant {v}; for a tensor write its shape and dtype, e.g. "
                    f"-p {n}={v}:int32 or -p {n}=1x{v}:int8, or its data as -p {n}=@file.npy")
    return ""


def _user_inputs(mod: Any, fn: str, specs: dict[str, TensorSpec], given: dict[str, np.ndarray],
                 params: dict[str, Any], seed: int, kernel: Kernel | None = None) -> dict[str, np.ndarray]:
    """The inputs of a user kernel: data given with ``@file``, else from ``<fn>_inputs``, else random of each
    input's dtype (module docstring); every array checked against its input's shape and dtype. The hook gets
    ``params`` and, as the reference does, the ``kernel``'s own defaults of the parameters it takes by name."""
    rng = np.random.default_rng(seed)
    hook = getattr(mod, f"{fn}_inputs", None)
    made: dict[str, Any] = {}
    if callable(hook):
        if kernel is not None:
            params = _reference_consts(hook, kernel, params)
        with reporting_failures(hook, f"inputs '{fn}_inputs'"):
            made = hook(rng, **params)
        if not isinstance(made, dict):
            raise ExampleError(f"'{fn}_inputs' returned {type(made).__name__}, not a dict of input arrays")
        extra = sorted(set(made) - set(specs))
        if extra:
            raise ExampleError(f"'{fn}_inputs' returned {', '.join(map(repr, extra))}, which the kernel does not "
                               f"load (inputs: {', '.join(specs) or 'none'})")
    out = {}
    for n, s in specs.items():
        src = f"-p {n}=@..." if n in given else f"'{fn}_inputs'"
        a = given.get(n, made.get(n))
        if a is None:
            lo, hi = USER_INPUT_RANGES[s.dtype]
            out[n] = rng.integers(lo, hi, size=s.shape, endpoint=True, dtype=np.int64).astype(s.dtype)
            continue
        a = np.asarray(a)
        if tuple(a.shape) != tuple(s.shape):
            raise ExampleError(f"input '{n}' from {src} has shape {tuple(a.shape)}, the kernel's is {tuple(s.shape)}")
        info = np.iinfo(s.dtype)
        if a.dtype.kind not in "iu" or (a.size and (a.min() < info.min or a.max() > info.max)):
            raise ExampleError(f"input '{n}' from {src} ({a.dtype}) does not fit {s.dtype}")
        out[n] = a.astype(s.dtype)
    return out


def _reference_consts(ref_fn: Callable[..., Any], k: Kernel, consts: dict[str, Any]) -> dict[str, Any]:
    """The constants a user reference gets: those given, plus the kernel's own defaults of the parameters the
    reference takes by name (``shift=7`` in the kernel's signature reaches ``reference(..., shift)``)."""
    try:
        ps = inspect.signature(ref_fn).parameters
    except (TypeError, ValueError):
        return consts
    takes_all = any(p.kind is p.VAR_KEYWORD for p in ps.values())
    defaults = {n: p.default for n, p in k.signature.parameters.items()
                if p.default is not p.empty and n not in consts and (takes_all or n in ps)}
    return {**defaults, **consts}


def _user_case(name: str, ex: Example, cfg: HwConfig, params: dict[str, Any], seed: int) -> Case:
    k, mod, fn = _load_user(name)
    p = {**ex.params, **params}
    sig = k.signature.parameters
    unknown = [key for key in p if key not in sig]
    if unknown and not any(q.kind is q.VAR_KEYWORD for q in sig.values()):
        raise ParamError(f"kernel '{fn}' has no parameter {unknown[0]!r} (parameters: {', '.join(sig) or 'none'})")
    specs: dict[str, TensorSpec] = {}
    consts: dict[str, Any] = {}
    given: dict[str, np.ndarray] = {}
    for key, v in p.items():
        v = parse_user_default(key, v)
        if isinstance(v, TensorData):
            given[key] = v.array
            v = v.spec
        if isinstance(v, TensorSpec):
            specs[key] = tensor(v.shape, v.dtype)
        else:
            consts[key] = v
    check_dram_fits(cfg, specs, f"kernel '{fn}'")
    try:
        with reporting_failures(k.fn, f"kernel '{fn}'"):
            program = build(k, {**specs, **consts}, cfg, name=fn)
    except CompileError as e:
        hint = _constant_hint(str(e), consts, k)
        if not hint:
            raise
        raise type(e)(f"{e}; {hint}") from e
    roles = {r.name: r.role for r in program.regions}
    for n in given:
        if roles.get(n) not in ("input", "scratch"):
            raise ParamError(f"param '{n}': the kernel writes '{n}' (an output), so it takes no data: give its "
                             f"shape instead, e.g. {n}={'x'.join(map(str, specs[n].shape))}:{specs[n].dtype}")
    in_specs = {n: s for n, s in specs.items() if roles.get(n) in ("input", "scratch")}
    user_inputs = _user_inputs(mod, fn, in_specs, given, {**specs, **consts}, seed, k)
    out_specs = {n: s for n, s in specs.items() if roles.get(n) == "output"}
    in_place = tuple(n for n in specs if roles.get(n) == "scratch")
    checked = {n: specs[n] for n in (*out_specs, *in_place)}
    ref_fn = getattr(mod, f"{fn}_reference", None)

    def reference() -> dict[str, np.ndarray]:
        with reporting_failures(ref_fn, f"reference '{fn}_reference'"):  # type: ignore[arg-type]
            # on copies: a reference that updates its argument (X += 3) must not change the inputs
            r = ref_fn(**{n: a.copy() for n, a in user_inputs.items()},  # type: ignore[misc]
                       **_reference_consts(ref_fn, k, consts))
        return _reference_outputs(r, ref_fn, f"reference '{fn}_reference'", checked)

    case = Case(fn, cfg, p, program, k, user_inputs, consts, {n: s.shape for n, s in specs.items()}, out_specs,
                reference if callable(ref_fn) else None, in_place, reference_in_user_shapes=True)
    _attach(case)
    return case


def _reference_outputs(r: Any, ref_fn: Callable[..., Any], label: str,
                       out_specs: dict[str, TensorSpec]) -> dict[str, np.ndarray]:
    """What a user's reference returned, checked (one line naming the function: an output it does not
    have, another shape, values that are not integers), in the user's shapes (the padding lanes of a
    region are the kernel's business: a run compares the user's elements only); the narrowing to the
    output dtype wraps like the hardware's STORE."""
    code = getattr(inspect.unwrap(ref_fn), "__code__", None)
    where = f"{label} ({code.co_filename}:{code.co_firstlineno})" if code is not None else label
    if not isinstance(r, dict):
        if len(out_specs) != 1:
            raise KernelFailure(f"{where} returned {type(r).__name__}: with several outputs it must return "
                                f"{{output: array}} ({', '.join(out_specs)})")
        r = {next(iter(out_specs)): r}
    out = {}
    for n, a in r.items():
        if n not in out_specs:
            raise KernelFailure(f"{where} returned {n!r}, not an output of the kernel "
                                f"(outputs: {', '.join(out_specs) or 'none'})")
        try:
            arr = np.asarray(a)
        except Exception:  # noqa: BLE001 - a user's object: report what it is
            arr = np.asarray(None)
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.array_equal(arr, np.round(arr)):
            arr = arr.astype(np.int64)  # integers computed in floating point
        if arr.dtype.kind not in "iub":
            what = f"an array of {arr.dtype}" if isinstance(a, np.ndarray) else type(a).__name__
            raise KernelFailure(f"{where} returned {what} for '{n}', not an integer array")
        if tuple(arr.shape) != tuple(out_specs[n].shape):
            raise KernelFailure(f"{where} returned shape {tuple(arr.shape)} for '{n}', the kernel's '{n}' is "
                                f"{tuple(out_specs[n].shape)}")
        out[n] = arr.astype(out_specs[n].dtype)
    return out


# ---- golden outputs of a saved Program ---------------------------------------------------------------
# The project's own top-level packages: kernels recorded as ``package.module:function`` may come from them
# wherever they are installed.
_OWN_PACKAGES = ("compiler", "cosim", "hw", "sim", "tests")


def _kernel_of_module(source: str) -> Kernel:
    """The kernel a saved Program records as ``package.module:function``. A module of the Python
    installation (the standard library, site-packages) is refused before it is imported: importing and
    calling whatever a layout.json names would run code that is no kernel."""
    import sysconfig

    mod, _, fn = source.rpartition(":")
    top = mod.split(".")[0]
    if top not in _OWN_PACKAGES:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        places = [] if spec is None else [spec.origin] if spec.origin else list(spec.submodule_search_locations or [])
        installed = {Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib", "purelib", "platlib")}
        files = [Path(p).resolve() for p in places if p not in ("built-in", "frozen")]
        if not files or any(f.is_relative_to(d) for f in files for d in installed):
            raise ExampleError(f"kernel source '{source}': '{top}' is not a module of kernels (a module of the "
                               f"Python installation, or none)")
    obj = getattr(importlib.import_module(mod), fn, None)
    if not isinstance(obj, Kernel) and not inspect.isfunction(obj):
        raise ExampleError(f"kernel source '{source}': not a kernel function")
    return as_kernel(obj)


def rederive_golden(program: Program) -> tuple[dict[str, np.ndarray] | None, str]:
    """Run the golden path again for a saved Program: its kernel (a shipped one by name, or the user file its
    ``meta["source"]`` names) on its ``inputs.npz`` with the constants it was compiled with. Returns the
    outputs (region-shaped, as ``Program.read_outputs``) and "", or None and why it cannot be re-run."""
    meta = program.meta or {}
    name, args, consts = meta.get("kernel"), meta.get("args"), meta.get("consts")
    if not isinstance(name, str) or not isinstance(args, dict) or not isinstance(consts, dict):
        return None, "the Program does not record its kernel's arguments"
    source = meta.get("source")
    if not isinstance(source, str) or ":" not in source:
        return None, "the Program does not record where its kernel is (compiled before kernels were recorded)"
    try:
        if _is_user(source):
            k = _load_user(source)[0]
        else:
            k = _kernel_of_module(source)
        roles = {r.name: r.role for r in program.regions}
        call: dict[str, Any] = dict(consts)
        for n, spec in args.items():
            shape, dtype = tuple(spec["shape"]), spec["dtype"]
            if roles.get(n) in ("input", "scratch"):
                call[n] = unpad(program.inputs[n], shape).astype(dtype)
            else:
                call[n] = TensorSpec(shape, dtype)
        tensors = k.run_golden(program.config, call)
        outs = {r.name: tensors[r.name].data.reshape(r.shape) for r in program.outputs()}
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - whatever stops the re-run is reported, the run goes on
        first = str(e).splitlines()[0] if str(e) else ""
        return None, f"the golden re-run failed ({type(e).__name__}: {first})"
    return outs, ""
