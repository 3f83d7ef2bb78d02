"""The digits transformer in int8: calibrated scales, quantized parameters, and its integer forward pass
through the accelerator operators' numpy references.

Quantization (post-training, per tensor, symmetric): every weight matrix ``W`` as ``round(W / s_w)``
with ``s_w = max|W| / 127``; every int8 activation with ``s = max|a| / 127`` over the float model's
values on the training split (calibration); biases (and the learned positions) in int32 at the scale of
the accumulator they are added to. The integer forward pass is the composite of the operators whose
kernels are bit-exact with these references (:mod:`compiler.layer_norm`, :mod:`compiler.gelu`,
:mod:`compiler.attention`, :mod:`compiler.fixed_point`'s rescale ``R``)::

    r0 = R(x We^T + be + pos)                       embed, int8
    h1 = layerBQ.norm(r0); y = attention(h1)          int8 (attention: projections, softmax, P V, Wo)
    r1 = clip(R(r0) + R(y))                         the residual, int8
    h2 = layerBQ.norm(r1); g = gelu(h2 W1^T + b1); f = R(g W2^T + b2)
    r2 = clip(R(r1) + R(f)); h3 = layerBQ.norm(r2)
    logits = (sum over the tokens of h3) Wh^T + bh  int32 (the argmax is the class)

It is the model a Program of the whole network would run; this module measures what int8 costs in
accuracy (:func:`evaluate`). ``python -m compiler.networks.digits_transformer_int8 [--out PATH]``
calibrates on the training split and writes the int8 model (``digits_transformer_int8.npz``: the
integer arrays, the scales in ``meta``); tests/test_digits_transformer_int8.py re-runs it and requires
the committed file bit for bit.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from compiler.attention import attention_reference
from compiler.fixed_point import rescale
from compiler.gelu import gelu_reference
from compiler.networks import block_int8 as BQ
from compiler.networks import digits
from compiler.networks import digits_transformer as T
from compiler.networks.script_cli import OneLineParser

INPUT_SCALE = 2.0 ** -7   # the digits' int8 pixels (pixel * 7, scale 2**-7)
T_WEIGHTS_PATH = Path(__file__).with_name("digits_transformer.npz")   # the float model's weights
WEIGHTS_PATH = Path(__file__).with_name("digits_transformer_int8.npz")  # the int8 model this module writes
NORMS = BQ.NORMS
B = BQ.B


def calibrate(params: dict[str, np.ndarray], images: np.ndarray) -> dict[str, float]:
    """The int8 activation scales from the float model's values on ``images`` (N, 1, 8, 8)."""
    return BQ.activation_scales(T.forward(params, T.tokens(images)))


def quantize(params: dict[str, np.ndarray], images: np.ndarray) -> dict[str, Any]:
    """The int8 model: quantized parameters and every scale, calibrated on ``images``. The head sums
    the tokens before its product, so its bias is at ``h3``'s scale over the token count."""
    s = calibrate(params, images)
    q = BQ.quantize_block(params, s, T.DIM, T.HEADS, s["h3"] / T.TOKENS)
    q["embed"], q["embed.s"] = BQ.qmat(params["embed.weight"])
    q["embed.bias"] = np.round((params["embed.bias"] + params["pos"]) / (INPUT_SCALE * q["embed.s"])).astype(np.int64)
    return q


def int8_logits(q: dict[str, Any], images: np.ndarray) -> np.ndarray:
    """The int8 model's int32 logits ``(N, 10)`` of int8 ``images`` ``(N, 1, 8, 8)``."""
    s = q["scales"]
    att = {"wq": q[f"{B}attn.q"], "wk": q[f"{B}attn.k"], "wv": q[f"{B}attn.v"], "wo": q[f"{B}attn.o"],
           "bq": q[f"{B}attn.q.bias"], "bk": q[f"{B}attn.k.bias"], "bv": q[f"{B}attn.v.bias"],
           "bo": q[f"{B}attn.o.bias"]}
    out = np.zeros((len(images), T.CLASSES), dtype=np.int64)
    for i, img in enumerate(np.asarray(images, dtype=np.int64).reshape(len(images), T.TOKENS, T.TOKEN_PIXELS)):
        e = img @ q["embed"].T.astype(np.int64) + q["embed.bias"]
        r0 = BQ.r8(e, INPUT_SCALE * q["embed.s"] / s["r0"])
        h1 = BQ.norm(r0, q["norm1"])
        y = attention_reference(h1.astype(np.int8), att, T.HEADS, q["attn_scales"]).astype(np.int64)
        r1 = np.clip(rescale(r0, s["r0"] / s["r1"]) + rescale(y, s["y"] / s["r1"]), -128, 127)
        h2 = BQ.norm(r1, q["norm2"])
        f1 = h2 @ q[f"{B}ffn1"].T.astype(np.int64) + q[f"{B}ffn1.bias"]
        g = gelu_reference(f1, s["h2"] * q[f"{B}ffn1.s"], s["g"], q["ffn1_bound"]).astype(np.int64)
        f = BQ.r8(g @ q[f"{B}ffn2"].T.astype(np.int64) + q[f"{B}ffn2.bias"], s["g"] * q[f"{B}ffn2.s"] / s["f"])
        r2 = np.clip(rescale(r1, s["r1"] / s["r2"]) + rescale(f, s["f"] / s["r2"]), -128, 127)
        h3 = BQ.norm(r2, q["norm3"])
        out[i] = h3.sum(axis=0) @ q["head"].T.astype(np.int64) + q["head.bias"]
    return out


def evaluate(params: dict[str, np.ndarray], calib_images: np.ndarray, images: np.ndarray,
             labels: np.ndarray) -> tuple[float, float]:
    """(float accuracy, int8 accuracy) on ``images``, the int8 model calibrated on ``calib_images``."""
    q = quantize(params, calib_images)
    f = float(np.mean(np.argmax(T.float_logits(params, images), axis=1) == labels))
    i = float(np.mean(np.argmax(int8_logits(q, images), axis=1) == labels))
    return f, i


# ---- the int8 model's file ------------------------------------------------------------------------
def float_params(path: str | Path = T_WEIGHTS_PATH) -> dict[str, np.ndarray]:
    """The float model's parameters from its weights file."""
    with np.load(path, allow_pickle=False) as z:
        return {k[:-len("_float")]: z[k] for k in z.files if k.endswith("_float")}


to_arrays = BQ.to_arrays
from_arrays = BQ.from_arrays


def build() -> dict[str, np.ndarray]:
    """The committed int8 model's arrays: the float model quantized, calibrated on the training split."""
    train, _ = digits.dataset("train")
    return to_arrays(quantize(float_params(), train))


def load(path: str | Path = WEIGHTS_PATH) -> dict[str, Any]:
    """The int8 model from its file."""
    return BQ.load(path)


def main(argv: list[str] | None = None) -> int:
    """The command line: quantize, write the file, print the test-split accuracies. Exit 2 with one line
    on bad input."""
    parser = OneLineParser(prog="python -m compiler.networks.digits_transformer_int8",
                           description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS_PATH, help="the .npz to write (default: %(default)s)")
    args = parser.parse_args(argv)
    if not args.out.parent.is_dir() or args.out.is_dir():
        parser.error(f"--out {args.out}: not a file in an existing folder")
    t0 = time.perf_counter()
    arrays = build()
    try:
        BQ.save(args.out, arrays)
    except OSError as exc:
        parser.error(f"--out {args.out}: cannot write ({exc.strerror or exc})")
    test, labels = digits.dataset("test")
    acc_f = float(np.mean(np.argmax(T.float_logits(float_params(), test), axis=1) == labels))
    acc_i = float(np.mean(np.argmax(int8_logits(from_arrays(arrays), test), axis=1) == labels))
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f} s: test accuracy int8 {acc_i:.4f}, float {acc_f:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
