"""User kernels with named sections (``S.section``), for the per-section report, the Perfetto
section spans and the disassembly headers (tests/test_section_report.py).

``sectioned_add``: Y = int8(X + 3) in tiles, one section per tile, with a prologue (the first
tile's LOAD comes before the first section). ``two_dense``: two dense layers through the GEMM core
(C = requant(relu(requant(A @ W1^T + b1)) @ W2^T)), one section each, the hidden activation
through a scratch DRAM tensor, so the second layer's loads wait for the first one's stores.
"""

import numpy as np

from compiler import S
from compiler.conv_engine import Epilogue, conv_layer
from compiler.conv_plan import plan_conv
from compiler.gemm_kernels import layer_shape


@S.kernel
def sectioned_add(X, Y, tile=8):
    """Y = int8(X + 3), tile by tile; the first LOAD is the prologue, each tile is a section."""
    n = X.nvec
    acc = S.acc
    S.load(acc[0:min(tile, n)], X)
    for i, v0 in enumerate(range(0, n, tile)):
        S.section(f"tile{i}")
        t = min(tile, n - v0)
        base = (i & 1) * tile
        if i:
            S.load(acc[base:base + t], X, offset=v0)
        S.add(acc[base:base + t], 3)
        S.store(Y, acc[base:base + t], offset=v0)


def sectioned_add_reference(X, tile=8):
    return {"Y": (X.astype(np.int64) + 3).astype(np.int32)}


def _dense(A, W, b, C, shift, relu):
    epi = Epilogue(shift, relu, True)
    shape = layer_shape(A, W, C, 1, 0, epi, b is not None, names=("A", "W", "C"))
    conv_layer(A, W, C, shape, plan_conv(S.config(), shape), epi, bias=b)


@S.kernel
def two_dense(A, W1, b1, W2, C, shift1=7, shift2=6):
    """Packed (compiler.packing) A (1, K/B, M, 1, B), W1 (H/B, K/B, 1, 1, B, B), b1 (H/B, B) int32,
    W2 (N/B, H/B, 1, 1, B, B), C (1, N/B, M, 1, B): two dense layers, sections fc1 and fc2."""
    hidden = S.scratch((1, W1.shape[0], A.shape[2], 1, A.shape[4]), "int8", "hidden")
    S.section("fc1")
    _dense(A, W1, b1, hidden, shift1, True)
    S.section("fc2")
    _dense(hidden, W2, None, C, shift2, False)
