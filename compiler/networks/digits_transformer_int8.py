"""The digits transformer in int8: calibrated scales, quantized parameters, and its integer forward pass
through the accelerator operators' numpy references.

Quantization (post-training, per tensor, symmetric): every weight matrix ``W`` as ``round(W / s_w)``
with ``s_w = max|W| / 127``; every int8 activation with ``s = max|a| / 127`` over the float model's
values on the training split (calibration); biases (and the learned positions) in int32 at the scale of
the accumulator they are added to. The integer forward pass is the composite of the operators whose
kernels are bit-exact with these references (:mod:`compiler.layer_norm`, :mod:`compiler.gelu`,
:mod:`compiler.attention`, :mod:`compiler.fixed_point`'s rescale ``R``)::

    r0 = R(x We^T + be + pos)                       embed, int8
    h1 = layer_norm(r0); y = attention(h1)          int8 (attention: projections, softmax, P V, Wo)
    r1 = clip(R(r0) + R(y))                         the residual, int8
    h2 = layer_norm(r1); g = gelu(h2 W1^T + b1); f = R(g W2^T + b2)
    r2 = clip(R(r1) + R(f)); h3 = layer_norm(r2)
    logits = (sum over the tokens of h3) Wh^T + bh  int32 (the argmax is the class)

It is the model a Program of the whole network would run; this module measures what int8 costs in
accuracy (:func:`evaluate`). ``python -m compiler.networks.digits_transformer_int8 [--out PATH]``
calibrates on the training split and writes the int8 model (``digits_transformer_int8.npz``: the
integer arrays, the scales in ``meta``); tests/test_digits_transformer_int8.py re-runs it and requires
the committed file bit for bit.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from compiler.attention import attention_reference
from compiler.fixed_point import rescale
from compiler.gelu import gelu_reference
from compiler.layer_norm import layer_norm_constants, layer_norm_reference
from compiler.networks import digits
from compiler.networks import digits_transformer as T
from compiler.networks.script_cli import OneLineParser

INPUT_SCALE = 2.0 ** -7   # the digits' int8 pixels (pixel * 7, scale 2**-7)
T_WEIGHTS_PATH = Path(__file__).with_name("digits_transformer.npz")   # the float model's weights
WEIGHTS_PATH = Path(__file__).with_name("digits_transformer_int8.npz")  # the int8 model this module writes
NORMS = ("norm1", "norm2", "norm3")
B = "block."


def _qmat(w: np.ndarray) -> tuple[np.ndarray, float]:
    s = float(np.abs(w).max()) / 127
    return np.clip(np.round(w / s), -127, 127).astype(np.int8), s


def _scale(values: np.ndarray) -> float:
    return max(float(np.abs(values).max()), 1e-6) / 127


def calibrate(params: dict[str, np.ndarray], images: np.ndarray) -> dict[str, float]:
    """The int8 activation scales from the float model's values on ``images`` (N, 1, 8, 8)."""
    a = T.forward(params, T.tokens(images))
    n, t, d = a["e"].shape
    y = a["block.r1"] - a["e"]                       # the attention's output before the residual add
    f = a["r2"] - a["block.r1"]
    return {"r0": _scale(a["e"]), "h1": _scale(a["block.h1"]), "q": _scale(a["block.q"]),
            "k": _scale(a["block.k"]), "v": _scale(a["block.v"]), "ctx": _scale(a["block.ctx"]),
            "y": _scale(y), "r1": _scale(a["block.r1"]), "h2": _scale(a["block.h2"]), "g": _scale(a["block.g"]),
            "f": _scale(f), "r2": _scale(a["r2"]), "h3": _scale(a["h3"])}


def quantize(params: dict[str, np.ndarray], images: np.ndarray) -> dict[str, Any]:
    """The int8 model: quantized parameters and every scale, calibrated on ``images``."""
    s = calibrate(params, images)
    q: dict[str, Any] = {"scales": s}
    for name in ("embed", f"{B}attn.q", f"{B}attn.k", f"{B}attn.v", f"{B}attn.o", f"{B}ffn1", f"{B}ffn2", "head"):
        q[name], q[f"{name}.s"] = _qmat(params[f"{name}.weight"])
    acc = lambda s_in, name: s_in * q[f"{name}.s"]  # noqa: E731 - an accumulator's scale
    q["embed.bias"] = np.round((params["embed.bias"] + params["pos"]) / acc(INPUT_SCALE, "embed")).astype(np.int64)
    for proj, s_in in (("q", s["h1"]), ("k", s["h1"]), ("v", s["h1"]), ("o", s["ctx"])):
        q[f"{B}attn.{proj}.bias"] = np.round(params[f"{B}attn.{proj}.bias"] / acc(s_in, f"{B}attn.{proj}")).astype(np.int64)
    q[f"{B}ffn1.bias"] = np.round(params[f"{B}ffn1.bias"] / acc(s["h2"], f"{B}ffn1")).astype(np.int64)
    q[f"{B}ffn2.bias"] = np.round(params[f"{B}ffn2.bias"] / acc(s["g"], f"{B}ffn2")).astype(np.int64)
    q["head.bias"] = np.round(params["head.bias"] / acc(s["h3"] / T.TOKENS, "head")).astype(np.int64)
    for norm, s_in, s_out in (("norm1", s["r0"], s["h1"]), ("norm2", s["r1"], s["h2"]), ("norm3", s["r2"], s["h3"])):
        key = f"{B}{norm}" if norm != "norm3" else norm
        q[norm] = layer_norm_constants(params[f"{key}.gamma"], params[f"{key}.beta"], s_in, s_out, 128)
    dh = T.DIM // T.HEADS
    q["attn_scales"] = {"s_q": s["h1"] * q[f"{B}attn.q.s"] / s["q"], "s_k": s["h1"] * q[f"{B}attn.k.s"] / s["k"],
                        "s_v": s["h1"] * q[f"{B}attn.v.s"] / s["v"],
                        "s_logit": s["q"] * s["k"] / math.sqrt(dh) * 256, "s_ctx": s["v"] / 128 / s["ctx"],
                        "s_out": s["ctx"] * q[f"{B}attn.o.s"] / s["y"]}
    w1 = q[f"{B}ffn1"].astype(np.int64)
    q["ffn1_bound"] = int((np.abs(w1).sum(axis=1) * 128 + np.abs(q[f"{B}ffn1.bias"])).max())
    return q


def _r8(x: np.ndarray, scale: float) -> np.ndarray:
    return np.clip(rescale(np.asarray(x, dtype=np.int64), scale), -128, 127).astype(np.int64)


def _norm(x: np.ndarray, k: dict[str, Any]) -> np.ndarray:
    """Layer norm of int8 tokens ``(T, D)`` by the operator's reference (features along axis 0)."""
    t = x.shape[0]
    g, b = (np.repeat(np.asarray(k[n])[:, None], t, axis=1) for n in ("G", "Bb"))
    out = layer_norm_reference(x.T, g, b, n=x.shape[1], eps=k["eps"], eps_frac=k["eps_frac"], shift=k["shift"])
    return out.reshape(x.shape[1], t).T.astype(np.int64)


def int8_logits(q: dict[str, Any], images: np.ndarray) -> np.ndarray:
    """The int8 model's int32 logits ``(N, 10)`` of int8 ``images`` ``(N, 1, 8, 8)``."""
    s = q["scales"]
    att = {"wq": q[f"{B}attn.q"], "wk": q[f"{B}attn.k"], "wv": q[f"{B}attn.v"], "wo": q[f"{B}attn.o"],
           "bq": q[f"{B}attn.q.bias"], "bk": q[f"{B}attn.k.bias"], "bv": q[f"{B}attn.v.bias"],
           "bo": q[f"{B}attn.o.bias"]}
    out = np.zeros((len(images), T.CLASSES), dtype=np.int64)
    for i, img in enumerate(np.asarray(images, dtype=np.int64).reshape(len(images), T.TOKENS, T.TOKEN_PIXELS)):
        e = img @ q["embed"].T.astype(np.int64) + q["embed.bias"]
        r0 = _r8(e, INPUT_SCALE * q["embed.s"] / s["r0"])
        h1 = _norm(r0, q["norm1"])
        y = attention_reference(h1.astype(np.int8), att, T.HEADS, q["attn_scales"]).astype(np.int64)
        r1 = np.clip(rescale(r0, s["r0"] / s["r1"]) + rescale(y, s["y"] / s["r1"]), -128, 127)
        h2 = _norm(r1, q["norm2"])
        f1 = h2 @ q[f"{B}ffn1"].T.astype(np.int64) + q[f"{B}ffn1.bias"]
        g = gelu_reference(f1, s["h2"] * q[f"{B}ffn1.s"], s["g"], q["ffn1_bound"]).astype(np.int64)
        f = _r8(g @ q[f"{B}ffn2"].T.astype(np.int64) + q[f"{B}ffn2.bias"], s["g"] * q[f"{B}ffn2.s"] / s["f"])
        r2 = np.clip(rescale(r1, s["r1"] / s["r2"]) + rescale(f, s["f"] / s["r2"]), -128, 127)
        h3 = _norm(r2, q["norm3"])
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


def to_arrays(q: dict[str, Any]) -> dict[str, np.ndarray]:
    """The int8 model as the arrays of its file: integer arrays (int8 weights, int32 biases and layer-norm
    vectors) and ``meta``, a JSON string of every scale and integer constant."""
    out: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {"scales": q["scales"], "attn_scales": q["attn_scales"], "ffn1_bound": q["ffn1_bound"]}
    for key, v in q.items():
        if key.endswith(".s"):
            meta[key] = v
        elif key in NORMS:
            meta[key] = {k: int(v[k]) for k in ("eps", "eps_frac", "shift")}
            out[f"{key}.G"], out[f"{key}.Bb"] = (np.asarray(v[k], dtype=np.int32) for k in ("G", "Bb"))
        elif isinstance(v, np.ndarray):
            out[key] = v if v.dtype == np.int8 else v.astype(np.int32)
    out["meta"] = np.array(json.dumps(meta, sort_keys=True))
    return out


def from_arrays(arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """The int8 model (:func:`quantize`'s form) from its file's arrays."""
    meta = json.loads(str(arrays["meta"]))
    q: dict[str, Any] = {k: v for k, v in meta.items() if k not in NORMS}
    for key, v in arrays.items():
        if key == "meta" or key.startswith(NORMS):
            continue
        q[key] = v if v.dtype == np.int8 else v.astype(np.int64)
    for norm in NORMS:
        q[norm] = {**meta[norm], "G": arrays[f"{norm}.G"].astype(np.int64), "Bb": arrays[f"{norm}.Bb"].astype(np.int64)}
    return q


def build() -> dict[str, np.ndarray]:
    """The committed int8 model's arrays: the float model quantized, calibrated on the training split."""
    train, _ = digits.dataset("train")
    return to_arrays(quantize(float_params(), train))


def load(path: str | Path = WEIGHTS_PATH) -> dict[str, Any]:
    """The int8 model from its file."""
    with np.load(path, allow_pickle=False) as z:
        return from_arrays({k: z[k] for k in z.files})


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
        with open(args.out, "wb") as f:  # a file object: numpy would append .npz to a bare name
            np.savez_compressed(f, **arrays)
    except OSError as exc:
        parser.error(f"--out {args.out}: cannot write ({exc.strerror or exc})")
    test, labels = digits.dataset("test")
    acc_f = float(np.mean(np.argmax(T.float_logits(float_params(), test), axis=1) == labels))
    acc_i = float(np.mean(np.argmax(int8_logits(from_arrays(arrays), test), axis=1) == labels))
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f} s: test accuracy int8 {acc_i:.4f}, float {acc_f:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
