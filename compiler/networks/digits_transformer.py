"""The digits transformer: a small encoder classifying scikit-learn's 8x8 digits, each image read as 8
tokens (its rows) of 8 pixels.

Data and split are the digits CNN's (:mod:`compiler.networks.digits`: the same int8 images, ``pixel *
7`` with scale ``2**-7``). Model (float, trained by :mod:`compiler.networks.train_digits_transformer`;
the pieces and their integer-friendly nonlinear functions in :mod:`compiler.networks.transformer`)::

    image (8 tokens x 8 pixels) -> embed (8 -> D) + learned positions (8 x D)
      -> block: x + attention(norm1(x))            (H heads of D/H, softmax over the 8 keys)
                x + ffn(norm2(x))                  (D -> F -> GELU -> D)
      -> norm3 -> mean over the tokens -> classifier (D -> 10)
"""

from __future__ import annotations

import numpy as np

from compiler.networks import transformer as tf

NAME = "digits_transformer"
TOKENS = 8           # the image's rows
TOKEN_PIXELS = 8     # the pixels of a row
DIM = 32             # D: the model width
HEADS = 2            # H: attention heads of DIM // HEADS
FFN = 64             # F: the feed-forward block's hidden width
CLASSES = 10
BLOCK = "block."     # the block's parameter prefix

# The parameters: name -> shape (weights (out, in), as the graph's dense layers hold them).
PARAMS: dict[str, tuple[int, ...]] = {
    "embed.weight": (DIM, TOKEN_PIXELS), "embed.bias": (DIM,), "pos": (TOKENS, DIM),
    **tf.block_params(BLOCK, DIM, FFN),
    "norm3.gamma": (DIM,), "norm3.beta": (DIM,),
    "head.weight": (CLASSES, DIM), "head.bias": (CLASSES,),
}


def tokens(images: np.ndarray) -> np.ndarray:
    """int8 images ``(N, 1, 8, 8)`` -> the float model's tokens ``(N, 8, 8)`` (``int8 * 2**-7``)."""
    return np.asarray(images, dtype=np.float64).reshape(len(images), TOKENS, TOKEN_PIXELS) * 2.0 ** -7


def forward(params: dict[str, np.ndarray], x: np.ndarray) -> dict[str, np.ndarray]:
    """The float model on tokens ``x`` ``(N, 8, 8)``: the intermediate values by name (the training's
    backward pass reads them; ``"block"`` holds the block's own), ``"logits"`` ``(N, 10)`` among them."""
    p = params
    a: dict[str, np.ndarray] = {"x": x}
    a["e"] = tf.matmul(x, p["embed.weight"]) + p["embed.bias"] + p["pos"]
    a["r2"], block = tf.block_forward(p, BLOCK, a["e"], HEADS)
    a.update({f"block.{k}": v for k, v in block.items()})
    a["h3"], a["h3_hat"], a["h3_inv"] = tf.layer_norm(a["r2"], p["norm3.gamma"], p["norm3.beta"])
    a["pooled"] = a["h3"].mean(axis=1)
    a["logits"] = tf.matmul(a["pooled"], p["head.weight"]) + p["head.bias"]
    return a


def float_logits(params: dict[str, np.ndarray], images: np.ndarray) -> np.ndarray:
    """The float model's logits of int8 ``images`` ``(N, 1, 8, 8)``."""
    return forward(params, tokens(images))["logits"]
