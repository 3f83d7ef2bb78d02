"""A quantized dense layer written with the intrinsics: the kernel that docs/kernels.md walks through.

    C = clip(round_shift(A @ W^T + bias, shift), -128, 127)

A (M x K) and W (N x K) are int8, bias (N) int32, C (M x N) int8. The tensors are in the
accelerator's packed layout (compiler/packing.py): a matrix is a 1 x 1 image of M rows,
A as (1, K/B, M, 1, B) (one input-buffer vector per row and block of B columns), W as
(N/B, K/B, 1, 1, B, B) (one B x B weight block per pair of blocks), C as (1, N/B, M, 1, B).

One tile, no double buffering: everything must fit the buffers at once (the shipped
``compiler.gemm_kernels.dense`` tiles any size; a user kernel may also call it by name).

Run it (from the repository root):

    cosim run docs/kernels/int8_dense.py:int8_dense --model all
"""

import numpy as np

from compiler import S


@S.kernel
def int8_dense(A, W, bias, C, shift=7):
    """C = requant(A @ W^T + bias) for packed int8 A, W and int32 bias, on one tile."""
    _, kb, m, _, _ = A.shape          # K/B blocks of columns, M rows
    nb = W.shape[0]                   # N/B blocks of output channels
    if W.shape[1] != kb or C.shape != (1, nb, m, 1, A.shape[-1]):
        raise S.error("C", f"shapes do not agree: A {A.shape}, W {W.shape}, C {C.shape}")
    # Buffer plan: input vector [cb*m + i], weight block [ob*kb + cb], accumulator: the nb bias
    # vectors first, then the products [nb + ob*m + i] (the order C is stored in).
    S.load(S.inp[0:kb * m], A)
    S.load(S.wgt[0:nb * kb], W)
    S.load(S.acc[0:nb], bias)
    # One micro-op per block of K; the two loops walk output blocks (ob) and rows (i).
    S.load(S.uop[0:kb], S.uops([(nb, cb * m, cb) for cb in range(kb)]))
    out = S.acc[nb:nb + nb * m]
    loops = dict(iters=(nb, m), acc_factors=(m, 1), inp_factors=(0, 1), wgt_factors=(kb, 0))
    S.gemm(S.uop[0:1], reset=True, **loops)      # acc = 0 (one micro-op is enough to visit each entry)
    S.gemm(S.uop[0:kb], **loops)                 # acc += A . W^T over every block of K
    # Epilogue on the ALU: + bias (vector ob for all m rows), round, shift, clip to int8.
    S.add(out, S.acc[0:nb], iters=(nb, m), dst_factors=(m, 1), src_factors=(1, 0))
    if shift:
        S.add(out, 1 << (shift - 1))
        S.shr(out, shift)
    S.max(out, -128)
    S.min(out, 127)
    S.store(C, out)


# The shapes the CLI uses when -p does not give them (M = 24, K = 64, N = 48 on B = 16).
int8_dense_params = {"A": "1x4x24x1x16:int8", "W": "3x4x1x1x16x16:int8", "bias": "48:int32",
                     "C": "1x3x24x1x16:int8", "shift": 7}


def int8_dense_inputs(rng, A, W, bias, C, shift):
    """Inputs like a quantized layer's: activations and weights over the whole int8 range, small biases."""
    return {"A": rng.integers(-128, 128, size=A.shape).astype(np.int8),
            "W": rng.integers(-128, 128, size=W.shape).astype(np.int8),
            "bias": rng.integers(-2000, 2001, size=bias.shape).astype(np.int32)}


def int8_dense_reference(A, W, bias, shift):
    """The same layer in plain numpy on natural matrices (int64, no wrap can happen at these sizes)."""
    _, kb, m, _, b = A.shape
    nb = W.shape[0]
    a = A[0, :, :, 0, :].transpose(1, 0, 2).reshape(m, kb * b).astype(np.int64)                 # (M, K)
    w = W[:, :, 0, 0, :, :].transpose(0, 2, 1, 3).reshape(nb * b, kb * b).astype(np.int64)      # (N, K)
    acc = a @ w.T + bias.astype(np.int64)
    if shift:
        acc = (acc + (1 << (shift - 1))) >> shift
    c = np.clip(acc, -128, 127).astype(np.int8)                                                 # (M, N)
    return {"C": c.reshape(m, nb, b).transpose(1, 0, 2).reshape(1, nb, m, 1, b)}
