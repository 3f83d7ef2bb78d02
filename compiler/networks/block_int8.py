"""int8 post-training quantization of a pre-norm transformer block, shared by the networks built on one.

Per tensor and symmetric: a weight matrix ``W`` as ``round(W / s_w)`` with ``s_w = max|W| / 127``; an
int8 activation at ``s = max|a| / 127`` over the float model's values on calibration data; biases in
int32 at the scale of the accumulator they are added to; the layer norms as the operator's integer
constants (:func:`compiler.layer_norm.layer_norm_constants`). The names are those of
:func:`compiler.networks.transformer.block_forward` under ``block.``, and ``norm3``/``head`` after it.
The model's embedding is each network's own; this module holds what the block and the head share, the
integer helpers of the forward passes, and the file format (integer arrays and a JSON ``meta``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from compiler.fixed_point import rescale
from compiler.layer_norm import layer_norm_constants, layer_norm_reference

NORMS = ("norm1", "norm2", "norm3")
B = "block."
PROJ = ("q", "k", "v", "o")


def qmat(w: np.ndarray) -> tuple[np.ndarray, float]:
    """``(int8 matrix, scale)`` of a float weight matrix."""
    s = float(np.abs(w).max()) / 127
    return np.clip(np.round(w / s), -127, 127).astype(np.int8), s


def act_scale(values: np.ndarray) -> float:
    """The int8 scale of an activation from its calibration values."""
    return max(float(np.abs(values).max()), 1e-6) / 127


def activation_scales(a: dict[str, np.ndarray]) -> dict[str, float]:
    """Every int8 activation's scale from the float model's intermediate values ``a`` (``e`` the
    embedding, the block's under ``block.``, ``r2`` and ``h3`` after it)."""
    y = a["block.r1"] - a["e"]                       # the attention's output before the residual add
    f = a["r2"] - a["block.r1"]
    return {"r0": act_scale(a["e"]), "h1": act_scale(a["block.h1"]), "q": act_scale(a["block.q"]),
            "k": act_scale(a["block.k"]), "v": act_scale(a["block.v"]), "ctx": act_scale(a["block.ctx"]),
            "y": act_scale(y), "r1": act_scale(a["block.r1"]), "h2": act_scale(a["block.h2"]),
            "g": act_scale(a["block.g"]), "f": act_scale(f), "r2": act_scale(a["r2"]), "h3": act_scale(a["h3"])}


def quantize_block(p: dict[str, np.ndarray], s: dict[str, float], dim: int, heads: int,
                   head_in_scale: float) -> dict[str, Any]:
    """The block's and the head's quantized parameters and every scale (the embedding is the caller's).
    ``head_in_scale`` is the scale of what the head multiplies (``h3``'s, or less when it sums tokens)."""
    q: dict[str, Any] = {"scales": s}
    for name in [f"{B}attn.{x}" for x in PROJ] + [f"{B}ffn1", f"{B}ffn2", "head"]:
        q[name], q[f"{name}.s"] = qmat(p[f"{name}.weight"])

    def bias(name: str, s_in: float) -> np.ndarray:  # at its accumulator's scale
        return np.round(p[f"{name}.bias"] / (s_in * q[f"{name}.s"])).astype(np.int64)

    for proj, s_in in (("q", s["h1"]), ("k", s["h1"]), ("v", s["h1"]), ("o", s["ctx"])):
        q[f"{B}attn.{proj}.bias"] = bias(f"{B}attn.{proj}", s_in)
    q[f"{B}ffn1.bias"] = bias(f"{B}ffn1", s["h2"])
    q[f"{B}ffn2.bias"] = bias(f"{B}ffn2", s["g"])
    q["head.bias"] = bias("head", head_in_scale)
    for norm, s_in, s_out in (("norm1", s["r0"], s["h1"]), ("norm2", s["r1"], s["h2"]), ("norm3", s["r2"], s["h3"])):
        key = f"{B}{norm}" if norm != "norm3" else norm
        q[norm] = layer_norm_constants(p[f"{key}.gamma"], p[f"{key}.beta"], s_in, s_out, 128)
    dh = dim // heads
    q["attn_scales"] = {"s_q": s["h1"] * q[f"{B}attn.q.s"] / s["q"], "s_k": s["h1"] * q[f"{B}attn.k.s"] / s["k"],
                        "s_v": s["h1"] * q[f"{B}attn.v.s"] / s["v"],
                        "s_logit": s["q"] * s["k"] / math.sqrt(dh) * 256, "s_ctx": s["v"] / 128 / s["ctx"],
                        "s_out": s["ctx"] * q[f"{B}attn.o.s"] / s["y"]}
    w1 = q[f"{B}ffn1"].astype(np.int64)
    q["ffn1_bound"] = int((np.abs(w1).sum(axis=1) * 128 + np.abs(q[f"{B}ffn1.bias"])).max())
    return q


def r8(x: np.ndarray, scale: float) -> np.ndarray:
    """The ALU's rescale ``R`` to int8 (saturated), as int64."""
    return np.clip(rescale(np.asarray(x, dtype=np.int64), scale), -128, 127).astype(np.int64)


def norm(x: np.ndarray, k: dict[str, Any]) -> np.ndarray:
    """Layer norm of int8 tokens ``(T, D)`` by the operator's reference (features along axis 0)."""
    t = x.shape[0]
    g, b = (np.repeat(np.asarray(k[n])[:, None], t, axis=1) for n in ("G", "Bb"))
    out = layer_norm_reference(x.T, g, b, n=x.shape[1], eps=k["eps"], eps_frac=k["eps_frac"], shift=k["shift"])
    return out.reshape(x.shape[1], t).T.astype(np.int64)


def to_arrays(q: dict[str, Any]) -> dict[str, np.ndarray]:
    """An int8 model as the arrays of its file: integer arrays (int8 weights, int32 biases and layer-norm
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
    """An int8 model (:func:`quantize_block`'s form, with the caller's embedding) from its file's arrays."""
    meta = json.loads(str(arrays["meta"]))
    q: dict[str, Any] = {k: v for k, v in meta.items() if k not in NORMS}
    for key, v in arrays.items():
        if key == "meta" or key.startswith(NORMS):
            continue
        q[key] = v if v.dtype == np.int8 else v.astype(np.int64)
    for n in NORMS:
        q[n] = {**meta[n], "G": arrays[f"{n}.G"].astype(np.int64), "Bb": arrays[f"{n}.Bb"].astype(np.int64)}
    return q


def load(path: str | Path) -> dict[str, Any]:
    """An int8 model from its file."""
    with np.load(path, allow_pickle=False) as z:
        return from_arrays({k: z[k] for k in z.files})


def save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write an int8 model's arrays (OSError when the file cannot be written)."""
    with open(path, "wb") as f:  # a file object: numpy would append .npz to a bare name
        np.savez_compressed(f, **arrays)
