"""A user kernel whose ALU instructions read what they have just written (tests/test_alu_pipeline.py).

Y[v] = X[0] + X[1] + ... + X[v], lane by lane, wrapping at 32 bits, over the vectors of X.
Per tile, ONE ALU instruction adds each vector to the next (acc[j] += acc[j-1]: every
iteration reads the previous iteration's write, the distance-1 read-after-write hazard of
the ALU's pipeline); the previous tile's last sum is carried into the tile's first vector.
Tiles alternate between two halves of the buffer, so the next tile's LOAD and the last
tile's STORE run while the ALU works: the ALU meets both of them on the buffer's ports.
"""

import numpy as np

from compiler import S


@S.kernel
def prefix_sum(X, Y, tile=8):
    """Y = int8(running sum of X's vectors)."""
    n = X.nvec
    acc = S.acc
    for i, v0 in enumerate(range(0, n, tile)):
        t = min(tile, n - v0)
        base = (i & 1) * tile
        S.load(acc[base:base + t], X, offset=v0)
        if i:  # carry: the previous tile (a full one) ends at its half's last vector
            prev_last = ((i - 1) & 1) * tile + tile - 1
            S.add(acc[base:base + 1], acc[prev_last:prev_last + 1])
        if t > 1:
            S.add(acc[base + 1:base + t], acc[base:base + t - 1])
        S.store(Y, acc[base:base + t], offset=v0)


def prefix_sum_reference(X, tile=8):
    """The running sum along the first axis (X is given as vectors x lanes), wrapped to int32."""
    return {"Y": np.cumsum(X.astype(np.int64), axis=0).astype(np.int32)}
