"""Plain numpy references of the GEMM operators, written from the mathematics, not from the intrinsics.

Everything here works on the natural layouts (``(M, K)`` matrices, NCHW activations,
``(O, C, KH, KW)`` weights) in int64, with no tiling, no packing, no micro-ops: a matmul
is ``np.matmul``, a convolution is a loop over the kernel taps of strided windows of the
zero-padded input. The accelerator's arithmetic enters only where it is the operator's
definition: the int32 accumulator wraps at 32 bits (so the exact int64 sum is wrapped
once: addition modulo 2**32 does not depend on order), and the requantization epilogue
is the usual shift-round-clip (VTA's): ``(acc + bias + 2**(shift-1)) >> shift`` (arithmetic
shift, int32 wrap), optional ReLU, clip to int8. The final narrowing to the output type is
a C cast (wrap), as STORE does.
"""

from __future__ import annotations

import numpy as np


def wrap32(x: np.ndarray) -> np.ndarray:
    """int64 values wrapped to int32 (two's complement), as the accumulator holds them."""
    return np.asarray(x, dtype=np.int64).astype(np.int32)


def requantize(acc: np.ndarray, shift: int = 0, relu: bool = False, clip: bool = True) -> np.ndarray:
    """The epilogue on an int32 accumulator: round-half-up shift right by ``shift``, ReLU, clip to
    [-128, 127] (when ``clip``); int32 result (cast it to the output type)."""
    a = np.asarray(acc, dtype=np.int32)
    if shift:
        a = wrap32(a.astype(np.int64) + (1 << (shift - 1))) >> shift
    if relu:
        a = np.maximum(a, 0)
    if clip:
        a = np.clip(a, -128, 127)
    return a.astype(np.int32)


def matmul_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``A @ B`` of int8 matrices in int64, wrapped to int32."""
    return wrap32(np.matmul(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)))


def conv2d_ref(x: np.ndarray, w: np.ndarray, stride: int = 1, pad: int = 0) -> np.ndarray:
    """Direct 2-D convolution (cross-correlation, as in deep learning) of NCHW ``x`` with ``(O, C, KH,
    KW)`` ``w``, zero padding ``pad`` on every side: int64 sums wrapped to int32, ``(N, O, Ho, Wo)``."""
    n, c, h, wd = x.shape
    o, c2, kh, kw = w.shape
    assert c == c2, (x.shape, w.shape)
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad), dtype=np.int64)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    ho = (h + 2 * pad - kh) // stride + 1
    wo = (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, ho, wo), dtype=np.int64)
    w64 = np.asarray(w, dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, :, ky:ky + stride * (ho - 1) + 1:stride, kx:kx + stride * (wo - 1) + 1:stride]
            out += np.einsum("nchw,oc->nohw", patch, w64[:, :, ky, kx])
    return wrap32(out)


def add_bias(acc: np.ndarray, bias: np.ndarray | None, axis: int) -> np.ndarray:
    """``acc`` plus the per-channel ``bias`` along ``axis`` (int32 wrap); ``acc`` when there is none."""
    if bias is None:
        return np.asarray(acc, dtype=np.int32)
    shape = [1] * np.ndim(acc)
    shape[axis] = -1
    return wrap32(np.asarray(acc, dtype=np.int64) + np.asarray(bias, dtype=np.int64).reshape(shape))


def dense_ref(a: np.ndarray, w: np.ndarray, bias: np.ndarray | None, shift: int, relu: bool) -> np.ndarray:
    """A quantized dense layer: ``requant(A @ W^T + bias)`` (``W`` is out x in)."""
    return requantize(add_bias(matmul_ref(a, np.asarray(w).T), bias, 1), shift, relu)


def conv2d_layer_ref(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, stride: int, pad: int, shift: int,
                     relu: bool) -> np.ndarray:
    """A quantized convolution layer: ``requant(conv(x, w) + bias)``, NCHW int32 in int8 range."""
    return requantize(add_bias(conv2d_ref(x, w, stride, pad), bias, 1), shift, relu)


def residual_add_ref(x: np.ndarray, y: np.ndarray, shift: int = 0, relu: bool = True) -> np.ndarray:
    """Residual add of two int8 activations: ``requant(x + y)``."""
    return requantize(wrap32(np.asarray(x, dtype=np.int64) + np.asarray(y, dtype=np.int64)), shift, relu)


def resnet_block_ref(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray,
                     shift1: int, shift2: int) -> np.ndarray:
    """A ResNet basic block (no downsampling): ``relu(requant(conv2(relu(requant(conv1(x))))) + x)``,
    3x3 convolutions with padding 1, the sum clipped to int8."""
    pad = w1.shape[2] // 2
    y1 = conv2d_layer_ref(x, w1, b1, 1, pad, shift1, relu=True)
    y2 = conv2d_layer_ref(y1, w2, b2, 1, pad, shift2, relu=False)
    return residual_add_ref(y2, x, 0, relu=True)


def matmul_nt_ref(a: np.ndarray, x: np.ndarray, shift: int = 0) -> np.ndarray:
    """``requantize(A @ X^T, shift)`` of two int8 matrices (A ``(M, K)``, X ``(N, K)``), int32."""
    return requantize(matmul_ref(a, np.asarray(x).T), shift)
