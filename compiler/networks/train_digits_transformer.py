"""Train the digits transformer (:mod:`compiler.networks.digits_transformer`) in float64 and write its
weights file.

``python -m compiler.networks.train_digits_transformer [--out PATH] [--epochs N]``. Deterministic as
the digits CNN's training is (:mod:`compiler.networks.train_digits`): numpy's legacy ``RandomState``
for the initialization and the shuffles, IEEE basic operations only (the model's ``exp`` and GELU are
polynomials), products through ``einsum`` without BLAS, the one-vs-all squared hinge loss (no
``log``), Adam with ``beta**t`` as a running product and a learning rate decaying linearly to 0.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import NoReturn

import numpy as np

from compiler.networks import digits
from compiler.networks import digits_transformer as T

SEED = 0
EPOCHS = 30
BATCH = 32
LEARNING_RATE = 0.005
WEIGHT_DECAY = 1e-3
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
WEIGHTS_PATH = Path(__file__).with_name("digits_transformer.npz")


def init_params(rs: np.random.RandomState) -> dict[str, np.ndarray]:
    """Glorot-uniform weights, small uniform positions, zero biases and betas, unit gammas."""
    params: dict[str, np.ndarray] = {}
    for name, shape in T.PARAMS.items():
        if name.endswith(".gamma"):
            params[name] = np.ones(shape)
        elif name.endswith((".bias", ".beta")):
            params[name] = np.zeros(shape)
        elif name == "pos":
            params[name] = rs.uniform(-0.1, 0.1, size=shape)
        else:
            limit = math.sqrt(6.0 / (shape[0] + shape[1]))
            params[name] = rs.uniform(-limit, limit, size=shape)
    return params


def _ln_backward(dy: np.ndarray, xhat: np.ndarray, inv: np.ndarray, gamma: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dgamma, dbeta) of layer norm over the last axis."""
    lead = tuple(range(dy.ndim - 1))
    dgamma, dbeta = (dy * xhat).sum(axis=lead), dy.sum(axis=lead)
    dxhat = dy * gamma
    dx = inv * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return dx, dgamma, dbeta


def _linear_backward(dy: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dweight, dbias) of ``x @ w.T + b`` over the last axis (any leading axes)."""
    dy2 = dy.reshape(-1, dy.shape[-1])
    dw = np.einsum("no,ni->oi", dy2, x.reshape(-1, x.shape[-1]))
    db = dy2.sum(axis=0)
    return np.einsum("...o,oi->...i", dy, w), dw, db


def _gelu_grad(x: np.ndarray) -> np.ndarray:
    """The derivative of :func:`digits_transformer.gelu`."""
    u = x / math.sqrt(2.0)
    inside = np.abs(u) < -T.GELU_B
    dl = np.where(inside, 2.0 * T.GELU_A * (np.abs(u) + T.GELU_B), 0.0)  # d erf_poly / du (the signs cancel)
    return 0.5 * (1.0 + T.erf_poly(u)) + 0.5 * x * dl / math.sqrt(2.0)


def hinge_loss(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """The one-vs-all squared hinge (mean over the batch) and its gradient by the logits."""
    y = -np.ones_like(logits)
    y[np.arange(len(labels)), labels] = 1.0
    m = np.maximum(0.0, 1.0 - y * logits)
    return float((m * m).sum() / len(labels)), -2.0 * y * m / len(labels)


def loss_and_grads(params: dict[str, np.ndarray], x: np.ndarray, labels: np.ndarray
                   ) -> tuple[float, dict[str, np.ndarray]]:
    """The loss of the float model on tokens ``x`` and its gradient by every parameter (weight decay on
    the matrices included)."""
    p, a = params, T.forward(params, x)
    n, dh = len(x), T.DIM // T.HEADS
    g: dict[str, np.ndarray] = {}
    loss, dlogits = hinge_loss(a["logits"], labels)
    dpooled, g["head.weight"], g["head.bias"] = _linear_backward(dlogits, a["pooled"], p["head.weight"])
    dh3 = np.repeat(dpooled[:, None, :] / T.TOKENS, T.TOKENS, axis=1)
    dr2, g["norm3.gamma"], g["norm3.beta"] = _ln_backward(dh3, a["h3_hat"], a["h3_inv"], p["norm3.gamma"])
    dg, g["ffn2.weight"], g["ffn2.bias"] = _linear_backward(dr2, a["g"], p["ffn2.weight"])
    df1 = dg * _gelu_grad(a["f1"])
    dh2, g["ffn1.weight"], g["ffn1.bias"] = _linear_backward(df1, a["h2"], p["ffn1.weight"])
    dr1_ln, g["norm2.gamma"], g["norm2.beta"] = _ln_backward(dh2, a["h2_hat"], a["h2_inv"], p["norm2.gamma"])
    dr1 = dr2 + dr1_ln
    dctx, g["attn.o.weight"], g["attn.o.bias"] = _linear_backward(dr1, a["ctx"], p["attn.o.weight"])
    dctx_h = dctx.reshape(n, T.TOKENS, T.HEADS, dh).transpose(0, 2, 1, 3)
    dattn = np.einsum("nhtd,nhsd->nhts", dctx_h, a["v"])
    dv = np.einsum("nhts,nhtd->nhsd", a["attn"], dctx_h)
    ds = a["attn"] * (dattn - (dattn * a["attn"]).sum(axis=-1, keepdims=True)) / math.sqrt(dh)
    dq = np.einsum("nhts,nhsd->nhtd", ds, a["k"])
    dk = np.einsum("nhts,nhtd->nhsd", ds, a["q"])
    dh1 = np.zeros_like(a["h1"])
    for name, d in (("q", dq), ("k", dk), ("v", dv)):
        d = d.transpose(0, 2, 1, 3).reshape(n, T.TOKENS, T.DIM)
        dx_part, g[f"attn.{name}.weight"], g[f"attn.{name}.bias"] = _linear_backward(d, a["h1"], p[f"attn.{name}.weight"])
        dh1 = dh1 + dx_part
    de_ln, g["norm1.gamma"], g["norm1.beta"] = _ln_backward(dh1, a["h1_hat"], a["h1_inv"], p["norm1.gamma"])
    de = dr1 + de_ln
    g["pos"] = de.sum(axis=0)
    _, g["embed.weight"], g["embed.bias"] = _linear_backward(de, a["x"], p["embed.weight"])
    for name in g:
        if name.endswith(".weight"):
            g[name] = g[name] + WEIGHT_DECAY * p[name]
    return loss, g


def train_float(images: np.ndarray, labels: np.ndarray, seed: int = SEED, epochs: int = EPOCHS
                ) -> dict[str, np.ndarray]:
    """Adam on mini-batches of the int8 training ``images``, learning rate decaying linearly to 0."""
    rs = np.random.RandomState(seed)
    params = init_params(rs)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(q) for k, q in params.items()}
    b1, b2 = ADAM_BETAS
    b1t = b2t = 1.0
    x = T.tokens(images)
    total = epochs * -(-len(x) // BATCH)
    step = 0
    for _ in range(epochs):
        order = rs.permutation(len(x))
        for start in range(0, len(x), BATCH):
            idx = order[start:start + BATCH]
            _, grads = loss_and_grads(params, x[idx], labels[idx])
            lr = LEARNING_RATE * (total - step) / total
            step += 1
            b1t *= b1
            b2t *= b2
            for key, grad in grads.items():
                m[key] = b1 * m[key] + (1 - b1) * grad
                v[key] = b2 * v[key] + (1 - b2) * grad * grad
                params[key] = params[key] - lr * (m[key] / (1 - b1t)) / (np.sqrt(v[key] / (1 - b2t)) + ADAM_EPS)
    return params


def float_accuracy(params: dict[str, np.ndarray], images: np.ndarray, labels: np.ndarray) -> float:
    """Accuracy of the float model on int8 ``images``."""
    return float(np.mean(np.argmax(T.float_logits(params, images), axis=1) == labels))


def build_weights(seed: int = SEED, epochs: int = EPOCHS) -> dict[str, np.ndarray]:
    """Train and evaluate: the float parameters and ``meta`` (JSON: the settings and accuracies)."""
    from threadpoolctl import threadpool_limits

    train_images, train_labels = digits.dataset("train")
    test_images, test_labels = digits.dataset("test")
    with threadpool_limits(1):  # BLAS thread counts change summation orders
        params = train_float(train_images, train_labels, seed, epochs)
        meta = {"network": T.NAME, "seed": seed, "epochs": epochs, "batch": BATCH, "learning_rate": LEARNING_RATE,
                "weight_decay": WEIGHT_DECAY, "loss": "one-vs-all squared hinge", "optimizer": "adam",
                "dim": T.DIM, "heads": T.HEADS, "ffn": T.FFN, "tokens": T.TOKENS,
                "train_images": int(len(train_labels)), "test_images": int(len(test_labels)),
                "float_accuracy_train": float_accuracy(params, train_images, train_labels),
                "float_accuracy_test": float_accuracy(params, test_images, test_labels)}
    out = {f"{k}_float": v for k, v in params.items()}
    out["meta"] = np.array(json.dumps(meta, sort_keys=True))
    return out


class _OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line (``PROG: error: WHAT``), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def main(argv: list[str] | None = None) -> int:
    """The command line: train, write the weights file, print a summary. Exit 2 with one line on bad input."""
    parser = _OneLineParser(prog="python -m compiler.networks.train_digits_transformer",
                            description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS_PATH, help="the .npz to write (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=EPOCHS, help="training epochs (default: %(default)s; the "
                                                                    "committed file uses the default)")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error(f"--epochs {args.epochs} must be at least 1")
    if not args.out.parent.is_dir():
        parser.error(f"--out {args.out}: folder {args.out.parent} does not exist")
    if args.out.is_dir():
        parser.error(f"--out {args.out} is a folder")
    t0 = time.perf_counter()
    weights = build_weights(epochs=args.epochs)
    try:
        with open(args.out, "wb") as f:  # a file object: numpy would append .npz to a bare name
            np.savez_compressed(f, **weights)
    except OSError as exc:
        parser.error(f"--out {args.out}: cannot write ({exc.strerror or exc})")
    meta = json.loads(str(weights["meta"]))
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f} s: test accuracy float "
          f"{meta['float_accuracy_test']:.4f} (train {meta['float_accuracy_train']:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
