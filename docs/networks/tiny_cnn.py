"""A network of your own for `cosim net` (docs/network.md): a function of no arguments returning a graph.

    cosim net docs/networks/tiny_cnn.py:tiny_cnn --model all --images 4

The weights here are seeded random int8 (a trained model would load its own); the graph has one
input and one output, so `cosim net` runs it on seeded random samples, or on `--input x.npy`.
"""

import numpy as np

from compiler.graph import Graph


def tiny_cnn() -> Graph:
    """conv 3x3 (3 -> 16 channels) + ReLU, 2x2 max pool, flatten, dense 16*4*4 -> 10."""
    rng = np.random.default_rng(7)
    g = Graph("tiny_cnn")
    x = g.input("image", (3, 8, 8))
    y = g.conv2d(x, rng.integers(-64, 64, size=(16, 3, 3, 3)).astype(np.int8),
                 rng.integers(-500, 500, size=16).astype(np.int32), pad=1, name="conv1")
    y = g.relu(g.requantize(y, 8, name="conv1_q"), name="conv1_relu")
    y = g.flatten(g.max_pool(y, 2, name="pool1"), name="flatten")
    y = g.dense(y, rng.integers(-64, 64, size=(10, 16 * 4 * 4)).astype(np.int8),
                rng.integers(-500, 500, size=10).astype(np.int32), name="fc")
    g.output(g.requantize(y, 9, name="logits"))
    return g
