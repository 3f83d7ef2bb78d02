"""Train charlm (:mod:`compiler.networks.charlm`) in float64 and write its weights file.

``python -m compiler.networks.train_charlm [--out PATH] [--epochs N]``. Deterministic as the other
shipped trainings are: numpy's legacy ``RandomState``, IEEE basic operations only (the softmax's ``exp``
is a polynomial; the loss's gradient, softmax minus the one-hot target, needs no ``log``), products
through ``einsum`` without BLAS, Adam (:func:`compiler.networks.transformer.adam`). The training
windows are :data:`charlm.CONTEXT`-character spans of the training text, each predicting its next
character at every position (softmax cross-entropy).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from compiler.networks import charlm as C
from compiler.networks import transformer as tf
from compiler.networks.script_cli import train_main

SEED = 0
EPOCHS = 24
SAMPLE_EPOCHS = 2    # the short run whose digest the weights file keeps (a quick reproduction check)
BATCH = 16
WINDOW_STEP = 2      # a training window starts every second character (half the cost, as good)
LEARNING_RATE = 0.008
WEIGHT_DECAY = 1e-3
WEIGHTS_PATH = Path(__file__).with_name("charlm.npz")


def windows() -> tuple[np.ndarray, np.ndarray]:
    """``(inputs, targets)`` ``(W, CONTEXT)``: the spans of the training text starting every
    :data:`WINDOW_STEP` characters, and the spans one further."""
    train, _ = C.split()
    toks = C.encode(train)
    starts = np.arange(0, len(toks) - C.CONTEXT, WINDOW_STEP)
    idx = starts[:, None] + np.arange(C.CONTEXT)[None, :]
    return toks[idx], toks[idx + 1]


def loss_and_grads(p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
    """Mean cross-entropy gradient (and the loss's mean of ``1 - p(target)``, a log-free figure) of the
    float model on tokens ``x`` with next tokens ``y``."""
    a = C.forward(p, x)
    probs = tf.softmax(a["logits"])
    n = x.size
    dlogits = probs.copy()
    np.put_along_axis(dlogits, y[..., None], np.take_along_axis(dlogits, y[..., None], -1) - 1.0, -1)
    dlogits /= n
    g: dict[str, np.ndarray] = {}
    dh3, g["head.weight"], g["head.bias"] = tf.linear_backward(dlogits, a["h3"], p["head.weight"])
    dr2, g["norm3.gamma"], g["norm3.beta"] = tf.ln_backward(dh3, a["h3_hat"], a["h3_inv"], p["norm3.gamma"])
    block = {k[len("block."):]: v for k, v in a.items() if k.startswith("block.")}
    de, gb = tf.block_backward(p, C.BLOCK, dr2, block, C.HEADS)
    g.update(gb)
    g["pos"] = np.zeros_like(p["pos"])
    g["pos"][:x.shape[1]] = de.sum(axis=0)
    g["embed.table"] = np.zeros_like(p["embed.table"])
    np.add.at(g["embed.table"], x.reshape(-1), de.reshape(-1, de.shape[-1]))
    miss = float(1.0 - np.take_along_axis(probs, y[..., None], -1).mean())
    return miss, g


def train_float(seed: int = SEED, epochs: int = EPOCHS) -> dict[str, np.ndarray]:
    """Adam over the training windows in shuffled mini-batches: the float parameters."""
    rs = np.random.RandomState(seed)
    p = tf.init_params(C.params(), rs)
    x, y = windows()

    def order(_epoch: int) -> list[np.ndarray]:
        perm = rs.permutation(len(x))
        return [perm[i:i + BATCH] for i in range(0, len(x), BATCH)]

    return tf.adam(p, lambda idx: loss_and_grads(p, x[idx], y[idx])[1], order, epochs, LEARNING_RATE,
                   WEIGHT_DECAY)


def digest(params: dict[str, np.ndarray]) -> str:
    """SHA-256 of the parameters' names, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for k in sorted(params):
        h.update(f"{k}{params[k].shape}".encode())
        h.update(np.ascontiguousarray(params[k], dtype=np.float64).tobytes())
    return h.hexdigest()


def build_weights(seed: int = SEED, epochs: int = EPOCHS) -> dict[str, np.ndarray]:
    """Train and evaluate: the float parameters and ``meta`` (JSON: settings, held-out scores, a sample,
    and the digest of a :data:`SAMPLE_EPOCHS`-epoch run)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # BLAS thread counts change summation orders
        sample = digest(train_float(seed, SAMPLE_EPOCHS))
        p = train_float(seed, epochs)
        acc, ppl = C.held_out_scores(p)
        train, held = C.split()
        meta = {"network": C.NAME, "seed": seed, "epochs": epochs, "batch": BATCH, "learning_rate": LEARNING_RATE,
                "weight_decay": WEIGHT_DECAY, "loss": "softmax cross-entropy", "optimizer": "adam",
                "dim": C.DIM, "heads": C.HEADS, "ffn": C.FFN, "context": C.CONTEXT,
                "vocabulary": C.vocabulary(), "train_chars": len(train), "held_out_chars": len(held),
                "held_out_accuracy_float": acc, "held_out_perplexity_float": round(ppl, 6),
                "sample_float": C.generate(p, "Beautiful is", 32),
                f"digest_{SAMPLE_EPOCHS}_epochs": sample}
    out = {f"{k}_float": v for k, v in p.items()}
    out["meta"] = np.array(json.dumps(meta, sort_keys=True))
    return out


def main(argv: list[str] | None = None) -> int:
    """The command line: train, write the weights file, print a summary. Exit 2 with one line on bad input."""
    return train_main(argv, "python -m compiler.networks.train_charlm", __doc__.splitlines()[0], WEIGHTS_PATH, EPOCHS,
                      lambda epochs: build_weights(epochs=epochs),
                      lambda meta: f"held-out next-character accuracy {meta['held_out_accuracy_float']:.4f}, "
                                   f"perplexity {meta['held_out_perplexity_float']:.3f}; 'Beautiful is' -> "
                                   f"{meta['sample_float']!r}")


if __name__ == "__main__":
    sys.exit(main())
