"""The float transformer pieces the shipped transformer models are trained with (numpy, float64): the
nonlinear functions, layer norm, one pre-norm block (multi-head self-attention, optionally causal, and a
feed-forward block with GELU) with its backward pass, and Adam.

Everything is written with IEEE basic operations only (``+ - * /``, ``sqrt``, ``floor``, ``ldexp``), so
training reproduces bit for bit on every machine (numpy's vectorized ``exp`` differs between CPUs), and
each nonlinear function has an integer form for the accelerator:

* ``exp`` (:func:`exp`): ``2**n * p(r)``, ``x = n ln 2 + r``, ``0 <= r < ln 2``, ``p`` a degree-12
  Taylor polynomial (relative error below 1e-12);
* GELU (:func:`gelu`): I-BERT's polynomial form, ``x/2 (1 + L(x/sqrt 2))`` with ``L(u) = sign(u)
  (a (min(|u|, -b) + b)**2 + 1)``, ``a = -0.2888``, ``b = -1.769`` (within 0.02 of the exact GELU);
* layer norm: ``(x - mean) / sqrt(var + eps) * gamma + beta`` over the features of a token.

Products go through ``numpy.einsum`` without BLAS (a summation order fixed by numpy). Weights are
``(out, in)``, as the graph's dense layers hold them.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import numpy as np

LN_EPS = 1e-5
GELU_A, GELU_B = -0.2888, -1.769  # I-BERT's polynomial erf
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8

_LN2 = math.log(2.0)
_TAYLOR = [1.0 / math.factorial(k) for k in range(13)]

Params = dict[str, np.ndarray]


# ---- functions -----------------------------------------------------------------------------------
def exp(x: np.ndarray) -> np.ndarray:
    """``e**x`` (float64) from basic operations (module docstring); underflows to 0 below about -745."""
    x = np.maximum(np.asarray(x, dtype=np.float64), -1000.0)  # -inf (a masked score) gives 0, not nan
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


def gelu_grad(x: np.ndarray) -> np.ndarray:
    """The derivative of :func:`gelu`."""
    u = x / math.sqrt(2.0)
    inside = np.abs(u) < -GELU_B
    dl = np.where(inside, 2.0 * GELU_A * (np.abs(u) + GELU_B), 0.0)  # d erf_poly / du (the signs cancel)
    return 0.5 * (1.0 + erf_poly(u)) + 0.5 * x * dl / math.sqrt(2.0)


def matmul(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``a @ w.T`` over the last axis of ``a`` (any leading axes)."""
    return np.einsum("...i,oi->...o", a, w)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y, xhat, 1/sigma)`` of layer norm over the last axis (the last two for the backward pass)."""
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    inv = 1.0 / np.sqrt((d * d).mean(axis=-1, keepdims=True) + LN_EPS)
    xhat = d * inv
    return xhat * gamma + beta, xhat, inv


def ln_backward(dy: np.ndarray, xhat: np.ndarray, inv: np.ndarray, gamma: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dgamma, dbeta) of layer norm over the last axis."""
    lead = tuple(range(dy.ndim - 1))
    dgamma, dbeta = (dy * xhat).sum(axis=lead), dy.sum(axis=lead)
    dxhat = dy * gamma
    dx = inv * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return dx, dgamma, dbeta


def linear_backward(dy: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dweight, dbias) of ``x @ w.T + b`` over the last axis (any leading axes)."""
    dy2 = dy.reshape(-1, dy.shape[-1])
    dw = np.einsum("no,ni->oi", dy2, x.reshape(-1, x.shape[-1]))
    return np.einsum("...o,oi->...i", dy, w), dw, dy2.sum(axis=0)


# ---- one block -----------------------------------------------------------------------------------
def block_params(prefix: str, dim: int, ffn: int) -> dict[str, tuple[int, ...]]:
    """The parameter shapes of one block named ``prefix``."""
    shapes: dict[str, tuple[int, ...]] = {f"{prefix}norm1.gamma": (dim,), f"{prefix}norm1.beta": (dim,)}
    for name in ("q", "k", "v", "o"):
        shapes[f"{prefix}attn.{name}.weight"] = (dim, dim)
        shapes[f"{prefix}attn.{name}.bias"] = (dim,)
    shapes.update({f"{prefix}norm2.gamma": (dim,), f"{prefix}norm2.beta": (dim,),
                   f"{prefix}ffn1.weight": (ffn, dim), f"{prefix}ffn1.bias": (ffn,),
                   f"{prefix}ffn2.weight": (dim, ffn), f"{prefix}ffn2.bias": (dim,)})
    return shapes


def block_forward(p: Params, prefix: str, x: np.ndarray, heads: int, causal: bool = False
                  ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One pre-norm block on ``x`` ``(N, T, D)``: ``x + attention(norm1(x))``, then ``+ ffn(norm2(.))``;
    causal: a token attends to itself and the tokens before it. Returns the output and every
    intermediate value (the backward pass reads them)."""
    n, t, d = x.shape
    dh = d // heads
    a: dict[str, np.ndarray] = {"x": x}
    a["h1"], a["h1_hat"], a["h1_inv"] = layer_norm(x, p[f"{prefix}norm1.gamma"], p[f"{prefix}norm1.beta"])
    for name in ("q", "k", "v"):
        y = matmul(a["h1"], p[f"{prefix}attn.{name}.weight"]) + p[f"{prefix}attn.{name}.bias"]
        a[name] = y.reshape(n, t, heads, dh).transpose(0, 2, 1, 3)
    s = np.einsum("nhtd,nhsd->nhts", a["q"], a["k"]) / math.sqrt(dh)
    if causal:
        s = np.where(np.tril(np.ones((t, t), dtype=bool)), s, -np.inf)
    a["attn"] = softmax(s)
    a["ctx"] = np.einsum("nhts,nhsd->nhtd", a["attn"], a["v"]).transpose(0, 2, 1, 3).reshape(n, t, d)
    a["r1"] = x + matmul(a["ctx"], p[f"{prefix}attn.o.weight"]) + p[f"{prefix}attn.o.bias"]
    a["h2"], a["h2_hat"], a["h2_inv"] = layer_norm(a["r1"], p[f"{prefix}norm2.gamma"], p[f"{prefix}norm2.beta"])
    a["f1"] = matmul(a["h2"], p[f"{prefix}ffn1.weight"]) + p[f"{prefix}ffn1.bias"]
    a["g"] = gelu(a["f1"])
    out = a["r1"] + matmul(a["g"], p[f"{prefix}ffn2.weight"]) + p[f"{prefix}ffn2.bias"]
    return out, a


def block_backward(p: Params, prefix: str, dout: np.ndarray, a: dict[str, np.ndarray], heads: int
                   ) -> tuple[np.ndarray, Params]:
    """The gradient of :func:`block_forward`'s input and parameters, given its output's ``dout``."""
    n, t, d = dout.shape
    dh = d // heads
    g: Params = {}
    dgl, g[f"{prefix}ffn2.weight"], g[f"{prefix}ffn2.bias"] = linear_backward(dout, a["g"], p[f"{prefix}ffn2.weight"])
    df1 = dgl * gelu_grad(a["f1"])
    dh2, g[f"{prefix}ffn1.weight"], g[f"{prefix}ffn1.bias"] = linear_backward(df1, a["h2"], p[f"{prefix}ffn1.weight"])
    dr1_ln, g[f"{prefix}norm2.gamma"], g[f"{prefix}norm2.beta"] = ln_backward(dh2, a["h2_hat"], a["h2_inv"],
                                                                              p[f"{prefix}norm2.gamma"])
    dr1 = dout + dr1_ln
    dctx, g[f"{prefix}attn.o.weight"], g[f"{prefix}attn.o.bias"] = linear_backward(dr1, a["ctx"],
                                                                                   p[f"{prefix}attn.o.weight"])
    dctx_h = dctx.reshape(n, t, heads, dh).transpose(0, 2, 1, 3)
    dattn = np.einsum("nhtd,nhsd->nhts", dctx_h, a["v"])
    dv = np.einsum("nhts,nhtd->nhsd", a["attn"], dctx_h)
    ds = a["attn"] * (dattn - (dattn * a["attn"]).sum(axis=-1, keepdims=True)) / math.sqrt(dh)
    dq = np.einsum("nhts,nhsd->nhtd", ds, a["k"])
    dk = np.einsum("nhts,nhtd->nhsd", ds, a["q"])
    dh1 = np.zeros_like(a["h1"])
    for name, dd in (("q", dq), ("k", dk), ("v", dv)):
        dd = dd.transpose(0, 2, 1, 3).reshape(n, t, d)
        dx_part, g[f"{prefix}attn.{name}.weight"], g[f"{prefix}attn.{name}.bias"] = linear_backward(
            dd, a["h1"], p[f"{prefix}attn.{name}.weight"])
        dh1 = dh1 + dx_part
    dx_ln, g[f"{prefix}norm1.gamma"], g[f"{prefix}norm1.beta"] = ln_backward(dh1, a["h1_hat"], a["h1_inv"],
                                                                             p[f"{prefix}norm1.gamma"])
    return dr1 + dx_ln, g


# ---- training --------------------------------------------------------------------------------------
def init_params(shapes: dict[str, tuple[int, ...]], rs: np.random.RandomState) -> Params:
    """Glorot-uniform matrices (``pos`` and ``embed.table``: uniform in +-0.1), zero biases and betas,
    unit gammas, drawn in the order of ``shapes``."""
    params: Params = {}
    for name, shape in shapes.items():
        if name.endswith(".gamma"):
            params[name] = np.ones(shape)
        elif name.endswith((".bias", ".beta")):
            params[name] = np.zeros(shape)
        elif name in ("pos", "embed.table"):
            params[name] = rs.uniform(-0.1, 0.1, size=shape)
        else:
            limit = math.sqrt(6.0 / (shape[0] + shape[1]))
            params[name] = rs.uniform(-limit, limit, size=shape)
    return params


def adam(params: Params, grads_of: Callable[[np.ndarray], Params], order: Callable[[int], Iterable[np.ndarray]],
         epochs: int, learning_rate: float, weight_decay: float) -> Params:
    """Adam over ``epochs`` of the batches ``order(epoch)`` (index arrays) with ``grads_of(batch)``, the
    learning rate decaying linearly to 0, weight decay on the ``.weight`` matrices; ``params`` updated
    in place and returned."""
    batches = [list(order(e)) for e in range(epochs)]
    total = sum(len(b) for b in batches)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(q) for k, q in params.items()}
    b1, b2 = ADAM_BETAS
    b1t = b2t = 1.0
    step = 0
    for epoch in batches:
        for idx in epoch:
            grads = grads_of(idx)
            lr = learning_rate * (total - step) / total
            step += 1
            b1t *= b1
            b2t *= b2
            for key, grad in grads.items():
                if key.endswith(".weight"):
                    grad = grad + weight_decay * params[key]
                m[key] = b1 * m[key] + (1 - b1) * grad
                v[key] = b2 * v[key] + (1 - b2) * grad * grad
                params[key] = params[key] - lr * (m[key] / (1 - b1t)) / (np.sqrt(v[key] / (1 - b2t)) + ADAM_EPS)
    return params
