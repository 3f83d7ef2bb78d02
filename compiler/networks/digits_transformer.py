"""The digits transformer: a small encoder classifying scikit-learn's 8x8 digits, each image read as 8
tokens (its rows) of 8 pixels.

Data and split are the digits CNN's (:mod:`compiler.networks.digits`: the same int8 images, ``pixel *
7`` with scale ``2**-7``). Model (float, trained by :mod:`compiler.networks.train_digits_transformer`)::

    image (8 tokens x 8 pixels) -> embed (8 -> D) + learned positions (8 x D)
      -> block: x + attention(norm1(x))            (H heads of D/H, softmax over the 8 keys)
                x + ffn(norm2(x))                  (D -> F -> GELU -> D)
      -> norm3 -> mean over the tokens -> classifier (D -> 10)

The nonlinear functions are written with IEEE basic operations only (``+ - * /``, ``sqrt``,
``floor``, ``ldexp``), so training reproduces bit for bit on every machine (numpy's vectorized
``exp`` differs between CPUs), and each has an integer form for the accelerator:

* ``exp`` (:func:`exp`): ``2**n * p(r)``, ``x = n ln 2 + r``, ``0 <= r < ln 2``, ``p`` a degree-12
  Taylor polynomial (relative error below 1e-12);
* GELU (:func:`gelu`): I-BERT's polynomial form, ``x/2 (1 + L(x/sqrt 2))`` with ``L(u) = sign(u)
  (a (min(|u|, -b) + b)**2 + 1)``, ``a = -0.2888``, ``b = -1.769`` (within 0.02 of the exact GELU);
* layer norm: ``(x - mean) / sqrt(var + eps) * gamma + beta`` over the D features of a token.
"""

from __future__ import annotations

import math

import numpy as np

NAME = "digits_transformer"
TOKENS = 8           # the image's rows
TOKEN_PIXELS = 8     # the pixels of a row
DIM = 32             # D: the model width
HEADS = 2            # H: attention heads of DIM // HEADS
FFN = 64             # F: the feed-forward block's hidden width
CLASSES = 10
LN_EPS = 1e-5
GELU_A, GELU_B = -0.2888, -1.769  # I-BERT's polynomial erf

# The parameters: name -> shape (weights (out, in), as the graph's dense layers hold them).
PARAMS: dict[str, tuple[int, ...]] = {
    "embed.weight": (DIM, TOKEN_PIXELS), "embed.bias": (DIM,), "pos": (TOKENS, DIM),
    "norm1.gamma": (DIM,), "norm1.beta": (DIM,),
    "attn.q.weight": (DIM, DIM), "attn.q.bias": (DIM,), "attn.k.weight": (DIM, DIM), "attn.k.bias": (DIM,),
    "attn.v.weight": (DIM, DIM), "attn.v.bias": (DIM,), "attn.o.weight": (DIM, DIM), "attn.o.bias": (DIM,),
    "norm2.gamma": (DIM,), "norm2.beta": (DIM,),
    "ffn1.weight": (FFN, DIM), "ffn1.bias": (FFN,), "ffn2.weight": (DIM, FFN), "ffn2.bias": (DIM,),
    "norm3.gamma": (DIM,), "norm3.beta": (DIM,),
    "head.weight": (CLASSES, DIM), "head.bias": (CLASSES,),
}

_LN2 = math.log(2.0)
_TAYLOR = [1.0 / math.factorial(k) for k in range(13)]


def exp(x: np.ndarray) -> np.ndarray:
    """``e**x`` (float64) from basic operations (module docstring); underflows to 0 below about -745."""
    x = np.asarray(x, dtype=np.float64)
    n = np.floor(x / _LN2)
    r = x - n * _LN2
    p = np.full_like(r, _TAYLOR[-1])
    for c in reversed(_TAYLOR[:-1]):
        p = p * r + c
    return np.ldexp(p, np.clip(n, -1100, 1100).astype(np.int64))


def softmax(s: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, the maximum subtracted first."""
    e = exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def erf_poly(u: np.ndarray) -> np.ndarray:
    """I-BERT's second-order polynomial approximation of ``erf(u)``."""
    c = np.minimum(np.abs(u), -GELU_B) + GELU_B
    return np.sign(u) * (GELU_A * c * c + 1.0)


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU with :func:`erf_poly`: ``x/2 (1 + erf_poly(x / sqrt 2))``."""
    return 0.5 * x * (1.0 + erf_poly(x / math.sqrt(2.0)))


def matmul(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``a @ w.T`` over the last axis of ``a`` (any leading axes) through ``numpy.einsum`` without BLAS:
    a summation order fixed by numpy, so training reproduces bit for bit."""
    return np.einsum("...i,oi->...o", a, w)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y, xhat, 1/sigma)`` of layer norm over the last axis (the last two for the backward pass)."""
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    inv = 1.0 / np.sqrt((d * d).mean(axis=-1, keepdims=True) + LN_EPS)
    xhat = d * inv
    return xhat * gamma + beta, xhat, inv


def tokens(images: np.ndarray) -> np.ndarray:
    """int8 images ``(N, 1, 8, 8)`` -> the float model's tokens ``(N, 8, 8)`` (``int8 * 2**-7``)."""
    return np.asarray(images, dtype=np.float64).reshape(len(images), TOKENS, TOKEN_PIXELS) * 2.0 ** -7


def forward(params: dict[str, np.ndarray], x: np.ndarray) -> dict[str, np.ndarray]:
    """The float model on tokens ``x`` ``(N, 8, 8)``: every intermediate value by name (the training's
    backward pass reads them), ``"logits"`` ``(N, 10)`` among them."""
    p = params
    a: dict[str, np.ndarray] = {"x": x}
    n = len(x)
    dh = DIM // HEADS
    a["e"] = matmul(x, p["embed.weight"]) + p["embed.bias"] + p["pos"]
    a["h1"], a["h1_hat"], a["h1_inv"] = layer_norm(a["e"], p["norm1.gamma"], p["norm1.beta"])

    def heads(t: np.ndarray) -> np.ndarray:  # (N, T, D) -> (N, H, T, dh)
        return t.reshape(n, TOKENS, HEADS, dh).transpose(0, 2, 1, 3)

    for name in ("q", "k", "v"):
        a[name] = heads(matmul(a["h1"], p[f"attn.{name}.weight"]) + p[f"attn.{name}.bias"])
    a["scores"] = np.einsum("nhtd,nhsd->nhts", a["q"], a["k"]) / math.sqrt(dh)
    a["attn"] = softmax(a["scores"])
    a["ctx"] = np.einsum("nhts,nhsd->nhtd", a["attn"], a["v"]).transpose(0, 2, 1, 3).reshape(n, TOKENS, DIM)
    a["r1"] = a["e"] + matmul(a["ctx"], p["attn.o.weight"]) + p["attn.o.bias"]
    a["h2"], a["h2_hat"], a["h2_inv"] = layer_norm(a["r1"], p["norm2.gamma"], p["norm2.beta"])
    a["f1"] = matmul(a["h2"], p["ffn1.weight"]) + p["ffn1.bias"]
    a["g"] = gelu(a["f1"])
    a["r2"] = a["r1"] + matmul(a["g"], p["ffn2.weight"]) + p["ffn2.bias"]
    a["h3"], a["h3_hat"], a["h3_inv"] = layer_norm(a["r2"], p["norm3.gamma"], p["norm3.beta"])
    a["pooled"] = a["h3"].mean(axis=1)
    a["logits"] = matmul(a["pooled"], p["head.weight"]) + p["head.bias"]
    return a


def float_logits(params: dict[str, np.ndarray], images: np.ndarray) -> np.ndarray:
    """The float model's logits of int8 ``images`` ``(N, 1, 8, 8)``."""
    return forward(params, tokens(images))["logits"]
