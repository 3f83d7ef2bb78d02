"""The accelerator's packed DRAM layouts, and the host functions that pack and unpack them.

As in VTA, the host lays tensors out in blocks of the hardware's BLOCK (= BLOCK_IN =
BLOCK_OUT, batch 1), zero-padding channel tails, so that one LOAD entry is one buffer
entry:

* activations NCHW ``(N, C, H, W)`` -> ``(N, C/B, H, W, B)`` int8: entry ``(n, cb, y, x)``
  holds channels ``cb*B .. cb*B+B-1`` of one pixel (an input-buffer vector);
* convolution weights ``(O, C, KH, KW)`` -> ``(O/B, C/B, KH, KW, B, B)`` int8: entry
  ``(ob, cb, ky, kx)`` is one weight block, row ``o`` holding the weights of output channel
  ``ob*B + o`` over input channels ``cb*B ..`` (stored transposed, as the weight buffer wants);
* biases ``(O,)`` int32 -> ``(O/B * B,)`` int32: one accumulator vector per output block;
* a matrix multiply is a 1x1 convolution over an ``M x 1`` image: ``A (M, K)`` packs as
  the activation of ``A^T`` viewed as ``(1, K, M, 1)``, ``B (K, N)`` as the weights of
  ``B^T`` viewed as ``(N, K, 1, 1)``, and the result ``(1, N/B, M, 1, B)`` unpacks to
  ``(M, N)``; a dense layer's weight ``(N, K)`` (out x in) likewise.

Channel counts need not be multiples of B: the padding is zeros, which add nothing to
any sum, and :func:`unpack_activation` cuts the padded output channels away.
"""

from __future__ import annotations

import numpy as np


def blocks(n: int, block: int) -> int:
    """Blocks of ``block`` needed for ``n`` channels."""
    return -(-n // block)


def pack_activation(x: np.ndarray, block: int) -> np.ndarray:
    """NCHW ``(N, C, H, W)`` (int8; any integer type keeps its type) -> ``(N, C/B, H, W, B)``, channel tail
    zero-padded."""
    n, c, h, w = x.shape
    cb = blocks(c, block)
    out = np.zeros((n, cb * block, h, w), dtype=x.dtype)
    out[:, :c] = x
    return np.ascontiguousarray(out.reshape(n, cb, block, h, w).transpose(0, 1, 3, 4, 2))


def unpack_activation(y: np.ndarray, channels: int) -> np.ndarray:
    """``(N, C/B, H, W, B)`` -> NCHW ``(N, channels, H, W)`` (the padded channels dropped)."""
    n, cb, h, w, b = y.shape
    return np.ascontiguousarray(y.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w)[:, :channels])


def pack_conv_weights(wt: np.ndarray, block: int) -> np.ndarray:
    """``(O, C, KH, KW)`` int8 -> ``(O/B, C/B, KH, KW, B, B)``: block ``[ob, cb, ky, kx]`` row ``o``
    column ``c`` = ``wt[ob*B + o, cb*B + c, ky, kx]``; tails zero."""
    o, c, kh, kw = wt.shape
    ob, cb = blocks(o, block), blocks(c, block)
    full = np.zeros((ob * block, cb * block, kh, kw), dtype=np.int8)
    full[:o, :c] = wt
    return np.ascontiguousarray(full.reshape(ob, block, cb, block, kh, kw).transpose(0, 2, 4, 5, 1, 3))


def pack_bias(b: np.ndarray, block: int) -> np.ndarray:
    """``(O,)`` int32 -> ``(O/B * B,)`` int32, zero-padded: one accumulator vector per output block."""
    out = np.zeros(blocks(b.shape[0], block) * block, dtype=np.int32)
    out[:b.shape[0]] = b
    return out


def pack_matrix(a: np.ndarray, block: int) -> np.ndarray:
    """A matmul's left operand ``(M, K)`` int8 -> ``(1, K/B, M, 1, B)`` (the activation of a 1x1
    convolution over an ``M x 1`` image)."""
    m, k = a.shape
    return pack_activation(np.ascontiguousarray(a.T).reshape(1, k, m, 1), block)


def unpack_matrix(y: np.ndarray, n: int) -> np.ndarray:
    """A matmul's result ``(1, N/B, M, 1, B)`` -> ``(M, n)``."""
    return np.ascontiguousarray(unpack_activation(y, n)[0, :, :, 0].T)


def pack_matmul_weights(b: np.ndarray, block: int) -> np.ndarray:
    """A matmul's right operand ``(K, N)`` int8 -> ``(N/B, K/B, 1, 1, B, B)``."""
    return pack_conv_weights(np.ascontiguousarray(b.T)[:, :, None, None], block)


def pack_dense_weights(w: np.ndarray, block: int) -> np.ndarray:
    """A dense layer's weight ``(N, K)`` (out x in) int8 -> ``(N/B, K/B, 1, 1, B, B)``."""
    return pack_conv_weights(np.asarray(w)[:, :, None, None], block)
