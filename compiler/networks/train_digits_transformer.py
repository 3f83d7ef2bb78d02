"""Train the digits transformer (:mod:`compiler.networks.digits_transformer`) in float64 and write its
weights file.

``python -m compiler.networks.train_digits_transformer [--out PATH] [--epochs N]``. Deterministic as
the digits CNN's training is (:mod:`compiler.networks.train_digits`): numpy's legacy ``RandomState``
for the initialization and the shuffles, IEEE basic operations only (the model's ``exp`` and GELU are
polynomials), products through ``einsum`` without BLAS, the one-vs-all squared hinge loss (no
``log``), Adam (:func:`compiler.networks.transformer.adam`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from compiler.networks import digits
from compiler.networks import digits_transformer as T
from compiler.networks import transformer as tf
from compiler.networks.script_cli import train_main

SEED = 0
EPOCHS = 30
BATCH = 32
LEARNING_RATE = 0.005
WEIGHT_DECAY = 1e-3
WEIGHTS_PATH = Path(__file__).with_name("digits_transformer.npz")


def hinge_loss(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """The one-vs-all squared hinge (mean over the batch) and its gradient by the logits."""
    y = -np.ones_like(logits)
    y[np.arange(len(labels)), labels] = 1.0
    m = np.maximum(0.0, 1.0 - y * logits)
    return float((m * m).sum() / len(labels)), -2.0 * y * m / len(labels)


def loss_and_grads(params: dict[str, np.ndarray], x: np.ndarray, labels: np.ndarray
                   ) -> tuple[float, dict[str, np.ndarray]]:
    """The loss of the float model on tokens ``x`` and its gradient by every parameter."""
    p, a = params, T.forward(params, x)
    g: dict[str, np.ndarray] = {}
    loss, dlogits = hinge_loss(a["logits"], labels)
    dpooled, g["head.weight"], g["head.bias"] = tf.linear_backward(dlogits, a["pooled"], p["head.weight"])
    dh3 = np.repeat(dpooled[:, None, :] / T.TOKENS, T.TOKENS, axis=1)
    dr2, g["norm3.gamma"], g["norm3.beta"] = tf.ln_backward(dh3, a["h3_hat"], a["h3_inv"], p["norm3.gamma"])
    block = {k[len("block."):]: v for k, v in a.items() if k.startswith("block.")}
    de, gb = tf.block_backward(p, T.BLOCK, dr2, block, T.HEADS)
    g.update(gb)
    g["pos"] = de.sum(axis=0)
    _, g["embed.weight"], g["embed.bias"] = tf.linear_backward(de, a["x"], p["embed.weight"])
    return loss, g


def train_float(images: np.ndarray, labels: np.ndarray, seed: int = SEED, epochs: int = EPOCHS
                ) -> dict[str, np.ndarray]:
    """Adam on mini-batches of the int8 training ``images`` (:func:`compiler.networks.transformer.adam`)."""
    rs = np.random.RandomState(seed)
    params = tf.init_params(T.PARAMS, rs)
    x = T.tokens(images)

    def order(_epoch: int) -> list[np.ndarray]:
        perm = rs.permutation(len(x))
        return [perm[i:i + BATCH] for i in range(0, len(x), BATCH)]

    return tf.adam(params, lambda idx: loss_and_grads(params, x[idx], labels[idx])[1], order, epochs,
                   LEARNING_RATE, WEIGHT_DECAY)


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


def main(argv: list[str] | None = None) -> int:
    """The command line: train, write the weights file, print a summary. Exit 2 with one line on bad input."""
    return train_main(argv, "python -m compiler.networks.train_digits_transformer", __doc__.splitlines()[0],
                      WEIGHTS_PATH, EPOCHS, lambda epochs: build_weights(epochs=epochs),
                      lambda meta: f"test accuracy float {meta['float_accuracy_test']:.4f} "
                                   f"(train {meta['float_accuracy_train']:.4f})")


if __name__ == "__main__":
    sys.exit(main())
