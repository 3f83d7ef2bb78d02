"""The GEMM kernels: matmul, dense, conv2d, residual_add and resnet_block on packed int8 tensors.

Each is an ordinary kernel (call it on packed numpy arrays for the golden path, or
``compiler.build`` it), taking its tensors in the accelerator's packed layout
(:mod:`compiler.packing`) and its sizes from their shapes; :mod:`compiler.gemm_ops` wraps
them for natural numpy arrays. The convolution-like ones tile through
:mod:`compiler.conv_plan` and :mod:`compiler.conv_engine`; the residual add streams the
two activations through the input buffer and sums them in the accumulator with a GEMM
against the identity weight block. Arguments they cannot take are one-line errors naming
the kernel, the argument and the problem.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler import dsl as S
from compiler.conv_engine import Epilogue, conv_layer
from compiler.conv_plan import PAD_MAX, ConvPlan, ConvShape, PlanError, plan_conv
from compiler.ops import IMM_MAX, const_vector
from compiler.stream_engine import eltwise_layer
from compiler.tensor import Tensor


def _int_arg(name: str, v: Any, lo: int, hi: int, why: str = "") -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
        raise S.error(name, f"{v!r} must be an integer {lo}..{hi}{why}")
    return int(v)


def _bool_arg(name: str, v: Any) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise S.error(name, f"{v!r} must be True or False")
    return bool(v)


def _packed(t: Any, name: str, dtype: str, ndim: int, what: str) -> Tensor:
    """``t`` must be a DRAM tensor of ``dtype`` with ``ndim`` dimensions, the last BLOCK (``what`` says
    the layout)."""
    block = S.config().block
    if not isinstance(t, Tensor):
        raise S.error(name, f"must be a tensor ({what}), got {type(t).__name__}")
    if t.dtype != dtype:
        raise S.error(name, f"must be {dtype} ({what}), got {t.dtype}")
    if len(t.shape) != ndim or t.shape[-1] != block:
        raise S.error(name, f"must have the packed shape {what} with B = {block}, got {t.shape}")
    return t


def _out_dtype() -> str:
    return f"int{S.config().out_width}"


def _bias(bias: Any, ob: int, offset_blocks: int = 0, name: str = "bias") -> Tensor | None:
    """``bias`` None or an int32 tensor of at least ``offset_blocks + ob`` vectors (one per output block)."""
    if bias is None:
        return None
    if not isinstance(bias, Tensor) or bias.dtype != "int32":
        got = bias.dtype if isinstance(bias, Tensor) else type(bias).__name__
        raise S.error(name, f"must be an int32 tensor (one accumulator vector per output-channel block), got {got}")
    if bias.nvec < offset_blocks + ob:
        raise S.error(name, f"has {bias.nvec} vectors of {bias.lanes} channels, the layer needs "
                            f"{offset_blocks + ob} (output channels padded to blocks)")
    return bias


def _plan(shape: ConvShape) -> ConvPlan:
    try:
        return plan_conv(S.config(), shape)
    except PlanError as e:
        raise S.error(None, str(e)) from None


def layer_shape(X: Tensor, W: Tensor, Y: Tensor, stride: Any, pad: Any, epi: Epilogue, bias: bool,
                residual: bool = False, w_lead: int = 0, names: tuple[str, str, str] = ("X", "W", "Y")) -> ConvShape:
    """The checked :class:`ConvShape` of a layer: ``X (N, Cb, H, W, B)``, ``W (Ob, Cb, KH, KW, B, B)``
    (after ``w_lead`` leading dimensions), ``Y (N, Ob, Ho, Wo, B)``; ``names`` are the kernel's names
    of the three tensors, for the errors."""
    block = S.config().block
    nx, nw, ny = names
    _packed(X, nx, "int8", 5, "(N, C/B, H, W, B)")
    _packed(W, nw, "int8", 6 + w_lead, ("(L, " if w_lead else "(") + "O/B, C/B, KH, KW, B, B)")
    if W.shape[-2] != block:
        raise S.error(nw, f"weight blocks must be {block}x{block}, got {W.shape[-2]}x{W.shape[-1]}")
    stride = _int_arg("stride", stride, 1, 64)
    pad = _int_arg("pad", pad, 0, PAD_MAX, " (LOAD pads at most 15 entries)")
    n, cb, h, w, _ = X.shape
    ob, cb_w, kh, kw = W.shape[w_lead:w_lead + 4]
    if cb_w != cb:
        raise S.error(nw, f"has {cb_w} input-channel blocks, {nx} has {cb} (shapes {W.shape} and {X.shape})")
    if h + 2 * pad < kh or w + 2 * pad < kw:
        raise S.error(nw, f"the {kh}x{kw} kernel does not fit the {h}x{w} input padded by {pad}")
    shape = ConvShape(n, cb, h, w, ob, kh, kw, stride, pad, bias=bias, rounding_const=epi.rounding > IMM_MAX,
                      residual=residual, alu_passes=epi.alu_passes(residual))
    want = (n, ob, shape.ho, shape.wo, block)
    _packed(Y, ny, _out_dtype(), 5, "(N, O/B, Ho, Wo, B)")
    if Y.shape != want:
        raise S.error(ny, f"has shape {Y.shape}, the layer's output is {want} (N, O/B, Ho, Wo, B)")
    return shape


def _epilogue(shift: Any, relu: Any, clip: bool = True) -> Epilogue:
    return Epilogue(_int_arg("shift", shift, 0, 31), _bool_arg("relu", relu), clip)


# ---- kernels ------------------------------------------------------------------------------------
@S.kernel
def conv2d(X: Tensor, W: Tensor, bias: Tensor | None, Y: Tensor, stride: int = 1, pad: int = 0, shift: int = 0,
           relu: bool = False) -> None:
    """Y = requant(conv2d(X, W, stride, pad) + bias): packed NCHW int8 activations, any kernel size,
    shift-round, optional ReLU, clip to int8."""
    epi = _epilogue(shift, relu)
    shape = layer_shape(X, W, Y, stride, pad, epi, bias is not None)
    conv_layer(X, W, Y, shape, _plan(shape), epi, bias=_bias(bias, shape.ob))


def _matrix_shape(A: Tensor, W: Tensor, C: Tensor, epi: Epilogue, bias: bool, wname: str) -> ConvShape:
    """A matmul as a 1x1 convolution over an M x 1 image (:mod:`compiler.packing`)."""
    for name, t in (("A", A), ("C", C)):
        if isinstance(t, Tensor) and (len(t.shape) != 5 or t.shape[0] != 1 or t.shape[3] != 1):
            raise S.error(name, f"must have the packed shape (1, K/B, M, 1, B) (compiler.packing.pack_matrix), "
                                f"got {t.shape}")
    if isinstance(W, Tensor) and len(W.shape) == 6 and W.shape[2:4] != (1, 1):
        raise S.error(wname, f"must have the packed shape (N/B, K/B, 1, 1, B, B), got {W.shape}")
    return layer_shape(A, W, C, 1, 0, epi, bias, names=("A", wname, "C"))


@S.kernel
def matmul(A: Tensor, B: Tensor, C: Tensor) -> None:
    """C = int8(A @ B) (the int32 sums narrowed like a C cast): A (M x K) and B (K x N) int8, packed."""
    epi = Epilogue()
    shape = _matrix_shape(A, B, C, epi, False, "B")
    conv_layer(A, B, C, shape, _plan(shape), epi)


@S.kernel
def dense(A: Tensor, W: Tensor, bias: Tensor | None, C: Tensor, shift: int = 0, relu: bool = False) -> None:
    """C = requant(A @ W^T + bias): a quantized dense layer, A (M x K), W (N x K) int8, bias int32."""
    epi = _epilogue(shift, relu)
    shape = _matrix_shape(A, W, C, epi, bias is not None, "W")
    conv_layer(A, W, C, shape, _plan(shape), epi, bias=_bias(bias, shape.ob))


@S.kernel
def matmul_nt(A: Tensor, X: Tensor, C: Tensor, shift: int = 0) -> None:
    """C = requant(A @ X^T) of two int8 activations (shift-round, clip): A (M x K) packed (1, K/B, M, 1, B),
    X (N x K) packed the same way with N a multiple of B (rows padded), C (1, N/B, M, 1, B).

    The transpose costs nothing: B consecutive rows of X in that layout are B x B bytes whose row o is
    row ``nb*B + o`` of X over columns ``kb*B ..``: the weight block ``(nb, kb)`` of a dense layer with
    weight X. So X is LOADed as it lies into the weight buffer (block ``kb*N/B + nb``), and the GEMM
    walks it with that order. One tile: A, X and C must fit the buffers at once (attention's
    products are small)."""
    cfg = S.config()
    block = cfg.block
    _packed(A, "A", "int8", 5, "(1, K/B, M, 1, B)")
    _packed(X, "X", "int8", 5, "(1, K/B, N, 1, B)")
    _, kb, m, _, _ = A.shape
    if A.shape[0] != 1 or A.shape[3] != 1:
        raise S.error("A", f"must have the packed shape (1, K/B, M, 1, B), got {A.shape}")
    if X.shape[0] != 1 or X.shape[3] != 1 or X.shape[1] != kb:
        raise S.error("X", f"must have the packed shape (1, K/B, N, 1, B) with A's {kb} column blocks, got {X.shape}")
    n = X.shape[2]
    if n % block:
        raise S.error("X", f"has {n} rows: X is loaded as weight blocks, its rows must be padded to a multiple "
                           f"of {block}")
    nb = n // block
    _packed(C, "C", _out_dtype(), 5, "(1, N/B, M, 1, B)")
    if C.shape != (1, nb, m, 1, block):
        raise S.error("C", f"has shape {C.shape}, the product is {(1, nb, m, 1, block)} (1, N/B, M, 1, B)")
    shift = _int_arg("shift", shift, 0, 31)
    need = {"input buffer": (kb * m, cfg.inp_depth), "weight buffer": (kb * nb, cfg.wgt_depth),
            "accumulator": (nb * m + (shift > 15), cfg.acc_depth), "micro-op buffer": (kb, cfg.uop_depth)}
    for what, (used, depth) in need.items():
        if used > depth:
            raise S.error(None, f"the product needs {used} entries of the {what}, config '{cfg.name}' has {depth} "
                                f"(matmul_nt runs one tile)")
    for _ in S.core_range(1):  # several cores: the first does the one tile
        S.load(S.inp[0:kb * m], A)
        S.load(S.wgt[0:kb * nb], X)                       # block (nb, kb) lands at kb * N/B + nb
        S.load(S.uop[0:kb], S.uops([(0, c * m, c * nb) for c in range(kb)], name="matmul_nt_uops"))
        out = S.acc[0:nb * m]
        loops = dict(iters=(nb, m), acc_factors=(m, 1), inp_factors=(0, 1), wgt_factors=(1, 0))
        S.gemm(S.uop[0:1], reset=True, **loops)
        S.gemm(S.uop[0:kb], **loops)
        if shift:
            if shift <= 15:
                S.add(out, 1 << (shift - 1))
            else:  # the rounding term is wider than the 16-bit immediate: a constant vector after the tile
                const_vector(S.acc[nb * m:nb * m + 1], 1 << (shift - 1))
                S.add(out, S.acc[nb * m:nb * m + 1])
            S.shr(out, shift)
        S.max(out, -128)
        S.min(out, 127)
        S.store(C, out)


@S.kernel
def resnet_block(X: Tensor, W: Tensor, bias: Tensor, Y: Tensor, shift1: int = 8, shift2: int = 8) -> None:
    """A ResNet basic block: Y = relu(clip(requant(conv2(relu(requant(conv1(X) + b1))) + b2) + X)).

    ``W`` holds both convolutions' packed weights ``(2, C/B, C/B, K, K, B, B)`` (odd K, padding
    K//2, stride 1), ``bias`` both biases (``2 * C/B`` vectors). The first layer's output goes
    through a scratch DRAM tensor; the second adds the block input in its epilogue (GEMM with the
    identity block) before the final ReLU.
    """
    cfg = S.config()
    if cfg.out_width != 8:  # the first layer's output is an int8 DRAM tensor that a STORE writes
        raise S.error(None, f"needs a config with int8 outputs (out_width 8); config '{cfg.name}' has out_width "
                            f"{cfg.out_width}")
    _packed(X, "X", "int8", 5, "(N, C/B, H, W, B)")
    if isinstance(W, Tensor) and (len(W.shape) != 7 or W.shape[0] != 2):
        raise S.error("W", f"must hold both layers' weights (2, C/B, C/B, K, K, B, B), got {W.shape}")
    _packed(W, "W", "int8", 7, "(2, C/B, C/B, K, K, B, B)")
    k = W.shape[3]
    if W.shape[4] != k or k % 2 == 0:
        raise S.error("W", f"the kernel must be square and odd (padding K//2 keeps the size), got "
                           f"{W.shape[3]}x{W.shape[4]}")
    if W.shape[1] != W.shape[2]:
        raise S.error("W", f"a basic block keeps its channel count (identity shortcut), got {W.shape[2]} -> "
                           f"{W.shape[1]} blocks")
    mid = S.scratch(X.shape, _out_dtype(), "mid")
    e1 = _epilogue(shift1, True)
    e2 = Epilogue(_int_arg("shift2", shift2, 0, 31), relu=False, clip=True, residual_relu=True)
    cb = X.shape[1]
    s1 = layer_shape(X, W, mid, 1, k // 2, e1, True, w_lead=1)
    s2 = layer_shape(mid, W, Y, 1, k // 2, e2, True, residual=True, w_lead=1, names=("mid", "W", "Y"))
    _bias(bias, 2 * cb)
    conv_layer(X, W, mid, s1, _plan(s1), e1, bias=bias)
    if S.num_cores() > 1:  # every core's part of mid is stored before any core reads all of it
        S.barrier()
    conv_layer(mid, W, Y, s2, _plan(s2), e2, bias=bias, bias_offset=cb, wgt_offset=cb * cb * k * k, residual=X)


@S.kernel
def residual_add(X: Tensor, R: Tensor, Y: Tensor, shift: int = 0, relu: bool = True) -> None:
    """Y = requant(X + R) of two int8 activations of one shape: both go through the input buffer and
    one GEMM per tile adds them into the accumulator (two micro-ops against the identity block),
    then shift, ReLU and clip on the ALU."""
    epi = _epilogue(shift, relu)
    for name, t in (("X", X), ("R", R)):
        if not isinstance(t, Tensor) or t.dtype != "int8":
            raise S.error(name, f"must be an int8 tensor, got {getattr(t, 'dtype', type(t).__name__)}")
    if not isinstance(Y, Tensor) or Y.dtype != _out_dtype():
        raise S.error("Y", f"must be an {_out_dtype()} tensor, got {getattr(Y, 'dtype', type(Y).__name__)}")
    for name, t in (("R", R), ("Y", Y)):
        if t.shape != X.shape:
            raise S.error(name, f"has shape {t.shape}, X has {X.shape} (the residual add does not broadcast)")
    try:
        eltwise_layer([X, R], Y, epi)
    except PlanError as e:
        raise S.error(None, str(e)) from None
