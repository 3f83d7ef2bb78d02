"""The digits network: a small int8 CNN classifying scikit-learn's 8x8 handwritten digits.

Data: ``sklearn.datasets.load_digits`` (1,797 images of 8x8 pixels 0..16, shipped inside
the scikit-learn wheel: no download), split once and for all into train and test (a
stratified 20 % test split drawn with numpy's legacy ``RandomState``, whose streams numpy
keeps stable across versions). The input quantization is ``pixel * 7``: pixels 0..16 become
int8 0..112 (no overflow, no loss), with the power-of-two scale ``2**-7`` (a pixel is
``7/128`` of a float unit), so every scale in the network is a power of two and every
requantization a shift.

Model (float, trained by :mod:`compiler.networks.train_digits`)::

    image (1, 8, 8) -> conv1 3x3 pad 1, 1 -> 8 channels -> ReLU -> max_pool 2 -> flatten (128)
                    -> fc1 128 -> 32 -> ReLU -> fc2 32 -> 10 (logits)

and its int8 graph (weights, biases and shifts from ``digits.npz``)::

    image -> conv1 -> conv1_q (requantize) -> conv1_relu -> pool1 -> flatten
          -> fc1 -> fc1_q (requantize) -> fc1_relu -> fc2 -> logits (requantize, the output)
"""

from __future__ import annotations

import functools
import json
import zipfile
from pathlib import Path

import numpy as np

from compiler.errors import CompileError
from compiler.graph import SHIFT_MAX, Graph
from compiler.networks.network import Network

NAME = "digits"
WEIGHTS_PATH = Path(__file__).with_name("digits.npz")
INPUT_NAME = "image"
OUTPUT_NAME = "logits"
INPUT_SHAPE = (1, 8, 8)
PIXEL_MAX = 16
PIXEL_MULTIPLIER = 7          # int8 pixel = 7 * pixel: 0..112
INPUT_EXPONENT = 7            # input scale 2**-7: float input = int8 pixel / 128
CONV_CHANNELS = 8
HIDDEN = 32
CLASSES = 10
POOL = 2
TEST_FRACTION = 0.2
SPLIT_SEED = 0
FLAT = CONV_CHANNELS * (INPUT_SHAPE[1] // POOL) * (INPUT_SHAPE[2] // POOL)

# The layers with parameters: (name, weight shape, bias shape).
PARAM_LAYERS = (
    ("conv1", (CONV_CHANNELS, INPUT_SHAPE[0], 3, 3), (CONV_CHANNELS,)),
    ("fc1", (HIDDEN, FLAT), (HIDDEN,)),
    ("fc2", (CLASSES, HIDDEN), (CLASSES,)),
)


# ---- data ------------------------------------------------------------------------------------
def quantize_pixels(pixels: np.ndarray) -> np.ndarray:
    """Pixels 0..16 (any numeric array) -> int8 ``7 * pixel`` (0..112)."""
    p = np.asarray(pixels)
    if p.size and (p.min() < 0 or p.max() > PIXEL_MAX or np.any(p != np.round(p))):
        raise ValueError(f"network '{NAME}': pixels must be integers 0..{PIXEL_MAX}")
    return (p.astype(np.int64) * PIXEL_MULTIPLIER).astype(np.int8)


def dequantize_images(images: np.ndarray) -> np.ndarray:
    """int8 images -> the float model's input (``image * 2**-7``, float64)."""
    return images.astype(np.float64) * 2.0 ** -INPUT_EXPONENT


def split_indices(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The deterministic stratified split: ``(train, test)`` index arrays (sorted), ``TEST_FRACTION``
    of each class in test."""
    rs = np.random.RandomState(SPLIT_SEED)  # legacy generator: its streams are frozen across numpy versions
    train: list[np.ndarray] = []
    test: list[np.ndarray] = []
    for c in range(CLASSES):
        idx = rs.permutation(np.flatnonzero(labels == c))
        n_test = int(round(len(idx) * TEST_FRACTION))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


@functools.cache
def _dataset(split: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits  # imported here: scikit-learn takes a second to import

    data = load_digits()
    labels = data.target.astype(np.int64)
    train, test = split_indices(labels)
    idx = train if split == "train" else test
    images = quantize_pixels(data.data[idx]).reshape((len(idx),) + INPUT_SHAPE)
    out = (images, labels[idx])
    for a in out:
        a.flags.writeable = False
    return out


def dataset(split: str = "test") -> tuple[np.ndarray, np.ndarray]:
    """``(images int8 (N, 1, 8, 8), labels int64 (N,))`` of the ``"train"`` or ``"test"`` split
    (read-only arrays)."""
    if split not in ("train", "test"):
        raise ValueError(f"network '{NAME}': split {split!r} must be 'train' or 'test'")
    return _dataset(split)


# ---- weights ---------------------------------------------------------------------------------
def _file_error(path: Path, reason: str) -> CompileError:
    return CompileError(f"network '{NAME}': weights file {path}: {reason}")


def weight_spec() -> dict[str, tuple[str, tuple[int, ...]]]:
    """Every array the weights file holds: name -> (dtype, shape)."""
    spec: dict[str, tuple[str, tuple[int, ...]]] = {}
    for layer, w, b in PARAM_LAYERS:
        spec[f"{layer}.weight"] = ("int8", w)
        spec[f"{layer}.bias"] = ("int32", b)
        spec[f"{layer}.shift"] = ("int64", ())
        spec[f"{layer}.weight_float"] = ("float64", w)
        spec[f"{layer}.bias_float"] = ("float64", b)
    spec["input_scale"] = ("float64", ())
    spec["meta"] = ("str", ())
    return spec


def load_weights(path: str | Path = WEIGHTS_PATH) -> dict[str, np.ndarray]:
    """Read and check a weights file (as :mod:`compiler.networks.train_digits` writes it): every array
    of :func:`weight_spec` with its dtype and shape, shifts 0..31. One-line
    :class:`compiler.errors.CompileError` naming the file and the array otherwise."""
    path = Path(path)
    if not path.is_file():
        raise _file_error(path, "no such file (re-create it: python -m compiler.networks.train_digits)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise _file_error(path, f"not a readable .npz ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})")
    spec = weight_spec()
    for key, (dtype, shape) in spec.items():
        if key not in arrays:
            raise _file_error(path, f"array '{key}' is missing")
        a = arrays[key]
        ok = a.dtype.kind == "U" if dtype == "str" else a.dtype == np.dtype(dtype)
        if not ok:
            raise _file_error(path, f"array '{key}' is {a.dtype}, expected {dtype}")
        if a.shape != shape:
            raise _file_error(path, f"array '{key}' has shape {a.shape}, expected {shape}")
        if dtype == "float64" and not np.all(np.isfinite(a)):
            raise _file_error(path, f"array '{key}' holds a non-finite value")
    extra = sorted(set(arrays) - set(spec))
    if extra:
        raise _file_error(path, f"unexpected array '{extra[0]}'")
    for layer, _, _ in PARAM_LAYERS:
        shift = int(arrays[f"{layer}.shift"])
        if not 0 <= shift <= SHIFT_MAX:
            raise _file_error(path, f"array '{layer}.shift' is {shift}, expected 0..{SHIFT_MAX}")
    if float(arrays["input_scale"]) != 2.0 ** -INPUT_EXPONENT:
        raise _file_error(path, f"array 'input_scale' is {float(arrays['input_scale'])}, expected "
                                f"2**-{INPUT_EXPONENT} (the input quantization of {NAME})")
    try:
        json.loads(str(arrays["meta"]))
    except ValueError:
        raise _file_error(path, "array 'meta' is not JSON") from None
    return arrays


def build_graph(weights: dict[str, np.ndarray]) -> Graph:
    """The int8 graph of the model (module docstring) with ``weights`` (as :func:`load_weights` returns)."""
    g = Graph(NAME)
    x = g.input(INPUT_NAME, INPUT_SHAPE)
    y = g.conv2d(x, weights["conv1.weight"], weights["conv1.bias"], stride=1, pad=1, name="conv1")
    y = g.relu(g.requantize(y, int(weights["conv1.shift"]), name="conv1_q"), name="conv1_relu")
    y = g.flatten(g.max_pool(y, POOL, name="pool1"), name="flatten")
    y = g.dense(y, weights["fc1.weight"], weights["fc1.bias"], name="fc1")
    y = g.relu(g.requantize(y, int(weights["fc1.shift"]), name="fc1_q"), name="fc1_relu")
    y = g.dense(y, weights["fc2.weight"], weights["fc2.bias"], name="fc2")
    g.output(g.requantize(y, int(weights["fc2.shift"]), name=OUTPUT_NAME))
    g.check()
    return g


@functools.cache
def _committed_weights() -> dict[str, np.ndarray]:
    return load_weights(WEIGHTS_PATH)


@functools.cache
def graph() -> Graph:
    """The int8 graph from the committed ``digits.npz`` (cached: one shared object)."""
    return build_graph(_committed_weights())


# ---- the float model -------------------------------------------------------------------------
def conv3x3_patches(x: np.ndarray) -> np.ndarray:
    """``(N, C, H, W)`` -> the zero-padded (pad 1) 3x3 patches ``(N, H*W, C*9)``, taps in
    ``(C, KY, KX)`` order (the order of a flattened ``(O, C, 3, 3)`` weight's rows)."""
    n, c, h, w = x.shape
    xp = np.zeros((n, c, h + 2, w + 2), dtype=x.dtype)
    xp[:, :, 1:h + 1, 1:w + 1] = x
    taps = np.stack([xp[:, :, ky:ky + h, kx:kx + w] for ky in range(3) for kx in range(3)], axis=2)
    return taps.reshape(n, c * 9, h * w).transpose(0, 2, 1)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in float64 through ``numpy.einsum`` without BLAS: its summation order is fixed by
    numpy, not by the BLAS build or the CPU's vector width, so training reproduces bit for bit."""
    return np.einsum("ij,jk->ik", a, b)


def float_activations(params: dict[str, np.ndarray], x: np.ndarray) -> dict[str, np.ndarray]:
    """The float model on float inputs ``x`` ``(N, 1, 8, 8)``: the value each requantization of the int8
    graph quantizes, by parameter layer: ``"conv1"`` (after ReLU, before pooling, ``(N*64, 8)``),
    ``"fc1"`` (after ReLU, ``(N, 32)``) and ``"fc2"`` (the logits, ``(N, 10)``). ``params`` holds
    ``<layer>.weight_float`` / ``<layer>.bias_float``."""
    n, _, h, w = x.shape
    w1 = params["conv1.weight_float"]
    o = w1.shape[0]
    a1 = np.maximum(matmul(conv3x3_patches(x).reshape(n * h * w, -1), w1.reshape(o, -1).T)
                    + params["conv1.bias_float"], 0)
    pooled = a1.reshape(n, h, w, o).transpose(0, 3, 1, 2).reshape(n, o, h // POOL, POOL, w // POOL, POOL)
    pooled = pooled.max(axis=(3, 5)).reshape(n, -1)
    a2 = np.maximum(matmul(pooled, params["fc1.weight_float"].T) + params["fc1.bias_float"], 0)
    return {"conv1": a1, "fc1": a2, "fc2": matmul(a2, params["fc2.weight_float"].T) + params["fc2.bias_float"]}


def float_logits(params: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The float model's logits ``(N, 10)`` for float inputs ``x`` ``(N, 1, 8, 8)``."""
    return float_activations(params, x)["fc2"]


def float_predict(images: np.ndarray) -> np.ndarray:
    """The float model's labels (int64 ``(N,)``) for int8 images ``(N, 1, 8, 8)`` (dequantized by the
    input scale ``2**-7``)."""
    if not isinstance(images, np.ndarray) or images.dtype != np.int8 or images.shape[1:] != INPUT_SHAPE:
        got = f"{images.dtype} {images.shape}" if isinstance(images, np.ndarray) else type(images).__name__
        raise ValueError(f"network '{NAME}': images must be int8 (N, {', '.join(map(str, INPUT_SHAPE))}), got {got}")
    return np.argmax(float_logits(_committed_weights(), dequantize_images(images)), axis=1).astype(np.int64)


NETWORK = Network(
    name=NAME,
    description="8x8 handwritten digits (scikit-learn load_digits): conv3x3 1->8, ReLU, max-pool 2, "
                "dense 128->32, ReLU, dense 32->10; int8 weights, power-of-two scales",
    graph=graph,
    dataset=dataset,
    float_predict=float_predict,
    input_name=INPUT_NAME,
    output=OUTPUT_NAME,
)
