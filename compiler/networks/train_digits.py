"""Train the digits CNN in float64, quantize it to int8 with power-of-two scales, write ``digits.npz``.

``python -m compiler.networks.train_digits [--out PATH]`` (default: the committed
``compiler/networks/digits.npz``). Deterministic: the same file (every array equal) on every
run and every machine of one architecture, because

* randomness is numpy's legacy ``RandomState`` (frozen streams): uniform initialization and
  the epoch shuffles, nothing drawn through a transcendental function;
* the arithmetic is IEEE basic operations only (``+ - * /``, ``sqrt``, ``max``): the loss is the
  one-vs-all squared hinge (no ``exp``/``log``, whose vectorized numpy versions differ between
  CPUs), the learning rate decays linearly, Adam's ``beta**t`` is a running product;
* products go through :func:`compiler.networks.digits.matmul` (``einsum``, no BLAS), and BLAS
  is held to one thread anyway (``threadpoolctl``).

Quantization (post-training, power-of-two scales, so every requantization is a shift): a
value with exponent ``e`` is stored as ``round(value * 2**e)``. The input's exponent is 7
(int8 pixel = 7 * pixel, float input = int8 / 128). Each layer's weights get the largest
exponent that keeps them in int8; its int32 accumulator then has exponent ``e_in + e_w``, its
bias is ``round(bias * 2**(e_in + e_w))`` and its output gets the largest exponent that keeps
the training set's largest output in int8 (calibration), unless one more bit (clipping the
rare largest values) gives a better int8 accuracy on the training set; the requantization
shift is ``e_in + e_w - e_out``.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from compiler.graph_reference import run_reference
from compiler.graph import SHIFT_MAX
from compiler.networks import digits
from compiler.networks.script_cli import train_main

SEED = 0
EPOCHS = 60
BATCH = 32
LEARNING_RATE = 0.003
WEIGHT_DECAY = 1e-4
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
EXPONENT_RANGE = range(-16, 40)  # weight/activation exponents considered (scales 2**16 .. 2**-39)


# ---- float training ----------------------------------------------------------------------------
def init_params(rs: np.random.RandomState) -> dict[str, np.ndarray]:
    """Glorot-uniform weights, zero biases, keyed like the weights file (``<layer>.weight_float``)."""
    params: dict[str, np.ndarray] = {}
    for layer, wshape, bshape in digits.PARAM_LAYERS:
        fan_in = int(np.prod(wshape[1:]))
        fan_out = wshape[0] * int(np.prod(wshape[2:]))
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        params[f"{layer}.weight_float"] = rs.uniform(-limit, limit, size=wshape)
        params[f"{layer}.bias_float"] = np.zeros(bshape)
    return params


def loss_and_grads(params: dict[str, np.ndarray], x: np.ndarray, labels: np.ndarray
                   ) -> tuple[float, dict[str, np.ndarray]]:
    """The one-vs-all squared hinge loss (mean over the batch) of the float model
    (:func:`compiler.networks.digits.float_logits`, written out here with its backward pass) and
    its gradients."""
    mm = digits.matmul
    n, _, h, w = x.shape
    w1 = params["conv1.weight_float"]
    o = w1.shape[0]
    patches = digits.conv3x3_patches(x).reshape(n * h * w, -1)
    z1 = mm(patches, w1.reshape(o, -1).T) + params["conv1.bias_float"]
    a1 = np.maximum(z1, 0).reshape(n, h, w, o).transpose(0, 3, 1, 2)
    hp, wp, k = h // digits.POOL, w // digits.POOL, digits.POOL
    win = a1.reshape(n, o, hp, k, wp, k).transpose(0, 1, 2, 4, 3, 5).reshape(n, o, hp, wp, k * k)
    arg = np.argmax(win, axis=-1)[..., None]  # the first maximum of each window gets the gradient
    pooled = np.take_along_axis(win, arg, axis=-1).reshape(n, -1)
    z2 = mm(pooled, params["fc1.weight_float"].T) + params["fc1.bias_float"]
    a2 = np.maximum(z2, 0)
    z3 = mm(a2, params["fc2.weight_float"].T) + params["fc2.bias_float"]

    sign = -np.ones_like(z3)
    sign[np.arange(n), labels] = 1.0
    margin = np.maximum(1.0 - sign * z3, 0.0)
    loss = float(np.sum(margin * margin)) / n
    dz3 = -2.0 * sign * margin / n

    g: dict[str, np.ndarray] = {}
    g["fc2.weight_float"] = mm(dz3.T, a2)
    g["fc2.bias_float"] = dz3.sum(axis=0)
    dz2 = mm(dz3, params["fc2.weight_float"]) * (z2 > 0)
    g["fc1.weight_float"] = mm(dz2.T, pooled)
    g["fc1.bias_float"] = dz2.sum(axis=0)
    dpooled = mm(dz2, params["fc1.weight_float"]).reshape(n, o, hp, wp, 1)
    dwin = np.zeros_like(win)
    np.put_along_axis(dwin, arg, dpooled, axis=-1)
    da1 = dwin.reshape(n, o, hp, wp, k, k).transpose(0, 1, 2, 4, 3, 5).reshape(n, o, h, w)
    dz1 = (da1 * (a1 > 0)).transpose(0, 2, 3, 1).reshape(n * h * w, o)
    g["conv1.weight_float"] = mm(dz1.T, patches).reshape(w1.shape)
    g["conv1.bias_float"] = dz1.sum(axis=0)
    for layer, _, _ in digits.PARAM_LAYERS:
        g[f"{layer}.weight_float"] = g[f"{layer}.weight_float"] + WEIGHT_DECAY * params[f"{layer}.weight_float"]
    return loss, g


def train_float(images: np.ndarray, labels: np.ndarray, seed: int = SEED, epochs: int = EPOCHS
                ) -> dict[str, np.ndarray]:
    """Adam on mini-batches of the int8 training ``images`` (dequantized), learning rate decaying
    linearly to 0: the float parameters."""
    rs = np.random.RandomState(seed)
    params = init_params(rs)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    b1, b2 = ADAM_BETAS
    b1t = b2t = 1.0
    x = digits.dequantize_images(images)
    steps_per_epoch = -(-len(x) // BATCH)
    total = epochs * steps_per_epoch
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


# ---- quantization ------------------------------------------------------------------------------
def max_exponent(amax: float, limit: int = 127) -> int:
    """The largest ``e`` with ``round(amax * 2**e) <= limit`` (a power-of-two scale that keeps the
    largest magnitude in int8)."""
    best = None
    for e in EXPONENT_RANGE:
        if np.round(np.ldexp(amax, e)) <= limit:
            best = e
    if best is None:
        raise ValueError(f"no exponent in {EXPONENT_RANGE} fits {amax}")
    return best


def quantize_array(a: np.ndarray, e: int, dtype: type) -> np.ndarray:
    """``round(a * 2**e)`` (half to even) as ``dtype``, checked to fit."""
    q = np.round(np.ldexp(a, e))
    info = np.iinfo(dtype)
    if q.min() < info.min or q.max() > info.max:
        raise ValueError(f"{q.min()}..{q.max()} does not fit {np.dtype(dtype)}")
    return q.astype(dtype)


def quantize(params: dict[str, np.ndarray], out_exponents: dict[str, int]) -> dict[str, np.ndarray]:
    """The int8/int32 arrays and shifts of the weights file, for output exponents ``out_exponents``
    (layer -> exponent of its requantized output)."""
    arrays: dict[str, np.ndarray] = {}
    e_in = digits.INPUT_EXPONENT
    for layer, _, _ in digits.PARAM_LAYERS:
        w = params[f"{layer}.weight_float"]
        e_w = max_exponent(float(np.max(np.abs(w))))
        e_acc = e_in + e_w
        shift = e_acc - out_exponents[layer]
        if not 0 <= shift <= SHIFT_MAX:
            raise ValueError(f"layer {layer}: shift {shift} out of 0..{SHIFT_MAX}")
        arrays[f"{layer}.weight"] = quantize_array(w, e_w, np.int8)
        arrays[f"{layer}.bias"] = quantize_array(params[f"{layer}.bias_float"], e_acc, np.int32)
        arrays[f"{layer}.shift"] = np.array(shift, dtype=np.int64)
        e_in = out_exponents[layer]
    return arrays


def int8_accuracy(weights: dict[str, np.ndarray], images: np.ndarray, labels: np.ndarray) -> float:
    """Accuracy of the int8 graph with ``weights`` (its int arrays and shifts) on ``images``, run through
    :func:`compiler.graph_reference.run_reference`."""
    g = digits.build_graph(weights)
    logits = run_reference(g, {digits.INPUT_NAME: images})[digits.OUTPUT_NAME]
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def float_accuracy(params: dict[str, np.ndarray], images: np.ndarray, labels: np.ndarray) -> float:
    """Accuracy of the float model on int8 ``images`` (dequantized)."""
    logits = digits.float_logits(params, digits.dequantize_images(images))
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def calibrate(params: dict[str, np.ndarray], images: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    """Quantize with output exponents from the training set's maxima, then give each layer in turn one
    more bit when that raises the int8 training accuracy: the weights file's arrays."""
    outs = digits.float_activations(params, digits.dequantize_images(images))
    exps = {layer: max_exponent(float(np.max(np.abs(outs[layer])))) for layer, _, _ in digits.PARAM_LAYERS}
    best = quantize(params, exps)
    best_acc = int8_accuracy(best, images, labels)
    for layer, _, _ in digits.PARAM_LAYERS:
        trial = dict(exps, **{layer: exps[layer] + 1})
        arrays = quantize(params, trial)
        acc = int8_accuracy(arrays, images, labels)
        if acc > best_acc:
            exps, best, best_acc = trial, arrays, acc
    return best


# ---- the file ----------------------------------------------------------------------------------
def build_weights(seed: int = SEED, epochs: int = EPOCHS) -> dict[str, np.ndarray]:
    """Train, quantize and evaluate: every array of the weights file
    (:func:`compiler.networks.digits.weight_spec`)."""
    from threadpoolctl import threadpool_limits

    train_images, train_labels = digits.dataset("train")
    test_images, test_labels = digits.dataset("test")
    with threadpool_limits(1):  # BLAS thread counts change summation orders
        params = train_float(train_images, train_labels, seed, epochs)
        ints = calibrate(params, train_images, train_labels)
        weights = dict(params, **ints)
        weights["input_scale"] = np.array(2.0 ** -digits.INPUT_EXPONENT)
        weights["meta"] = np.array("{}")
        meta = {
            "network": digits.NAME, "seed": seed, "epochs": epochs, "batch": BATCH, "learning_rate": LEARNING_RATE,
            "weight_decay": WEIGHT_DECAY, "loss": "one-vs-all squared hinge", "optimizer": "adam",
            "input": f"int8 = {digits.PIXEL_MULTIPLIER} * pixel (0..{digits.PIXEL_MULTIPLIER * digits.PIXEL_MAX}), "
                     f"scale 2**-{digits.INPUT_EXPONENT}",
            "shifts": {layer: int(ints[f"{layer}.shift"]) for layer, _, _ in digits.PARAM_LAYERS},
            "weight_exponents": {layer: max_exponent(float(np.max(np.abs(params[f"{layer}.weight_float"]))))
                                 for layer, _, _ in digits.PARAM_LAYERS},
            "train_images": int(len(train_labels)), "test_images": int(len(test_labels)),
            "float_accuracy_train": float_accuracy(params, train_images, train_labels),
            "float_accuracy_test": float_accuracy(params, test_images, test_labels),
            "int8_accuracy_train": int8_accuracy(weights, train_images, train_labels),
            "int8_accuracy_test": int8_accuracy(weights, test_images, test_labels),
        }
    weights["meta"] = np.array(json.dumps(meta, sort_keys=True))
    return weights


def main(argv: list[str] | None = None) -> int:
    """The command line: train, write the weights file, print a summary. Exit 2 with one line on bad input."""
    return train_main(argv, "python -m compiler.networks.train_digits", __doc__.splitlines()[0], digits.WEIGHTS_PATH,
                      EPOCHS, lambda epochs: build_weights(epochs=epochs),
                      lambda meta: f"shifts {meta['shifts']}, test accuracy float {meta['float_accuracy_test']:.4f}, "
                                   f"int8 {meta['int8_accuracy_test']:.4f}")


if __name__ == "__main__":
    sys.exit(main())
