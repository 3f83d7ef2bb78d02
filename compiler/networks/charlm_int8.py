"""charlm in int8: calibrated scales, quantized parameters, and the integer **decode step** with a KV cache.

Quantization follows :mod:`compiler.networks.digits_transformer_int8` (post-training, per tensor,
symmetric): a weight matrix ``W`` as ``round(W / s_w)``, ``s_w = max|W| / 127``; an int8 activation
with ``s = max|a| / 127`` over the float model's values on the training text (calibration: the text in
windows of :data:`compiler.networks.charlm.CONTEXT` characters); biases in int32 at the scale of their
accumulator. The embedding table is int8 at ``s_e = max|table| / 127`` and the learned positions int32
at the same scale (an int8 one-hot row times the table plus a position row is one GEMM and one add).

The **decode step** at position ``p`` (``t = p + 1`` tokens), :func:`decode_step`::

    r0 = clip(R(E[token] + P[p]))                   embed, int8
    h1 = layerBQ.norm(r0); q, k, v = clip(R(h1 W^T + b))
    K[p], V[p] = k, v                               the step appends its own key and value to the cache
    per head: logits_j = R(k_j . q, s_logit) (j = 0..p: the causal mask of decode is the cache's length)
              P = softmax over the t logits (the operator's reference, Q7)
              ctx = clip(R(sum_j P_j v_j, s_ctx))
    y = clip(R(ctx Wo^T + bo))
    r1 = clip(R(r0) + R(y)); h2 = layerBQ.norm(r1); g = gelu(h2 W1^T + b1); f = clip(R(g W2^T + b2))
    r2 = clip(R(r1) + R(f)); h3 = layerBQ.norm(r2)
    logits = h3 Wh^T + bh                           int32 (the argmax is the next character)

``R`` is :func:`compiler.fixed_point.rescale` (no bound: the ALU's ``R``), ``layer_norm``,
``gelu`` and ``softmax`` the operators' references, so a Program computes every step bit for bit.
Prefill is the steps over the prompt one by one (:func:`prefill`); :func:`int8_forward` is the same
arithmetic for every position of a window at once (its rows are the steps' results; a test checks it),
which the held-out evaluation uses. ``python -m compiler.networks.charlm_int8 [--out PATH]`` writes
``charlm_int8.npz``; tests/test_charlm_int8.py re-runs it and requires the committed file bit for bit.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compiler.fixed_point import rescale
from compiler.gelu import gelu_reference
from compiler.networks import block_int8 as BQ
from compiler.networks import charlm as C
from compiler.networks import transformer as tf
from compiler.networks.script_cli import OneLineParser
from compiler.softmax import softmax_reference

F_WEIGHTS_PATH = Path(__file__).with_name("charlm.npz")       # the float model's weights
WEIGHTS_PATH = Path(__file__).with_name("charlm_int8.npz")    # the int8 model this module writes
NORMS = BQ.NORMS
B = BQ.B
PROJ = BQ.PROJ


def calibration_windows() -> np.ndarray:
    """The training text as windows of :data:`charlm.CONTEXT` tokens, each starting at position 0 (as
    the model sees them): consecutive ones, and the text's last ``CONTEXT`` characters (int64 ``(N, CONTEXT)``)."""
    train, _ = C.split()
    toks = C.encode(train)
    n = len(toks) // C.CONTEXT
    return np.concatenate([toks[:n * C.CONTEXT].reshape(n, C.CONTEXT), toks[None, -C.CONTEXT:]])


def calibrate(p: dict[str, np.ndarray], windows: np.ndarray) -> dict[str, float]:
    """The int8 activation scales from the float model's values on ``windows`` ``(N, T)``."""
    return BQ.activation_scales(C.forward(p, windows))


def quantize(p: dict[str, np.ndarray], windows: np.ndarray) -> dict[str, Any]:
    """The int8 model: quantized parameters and every scale, calibrated on ``windows``."""
    s = calibrate(p, windows)
    q = BQ.quantize_block(p, s, C.DIM, C.HEADS, s["h3"])
    q["embed"], q["embed.s"] = BQ.qmat(p["embed.table"])
    q["pos"] = np.round(p["pos"] / q["embed.s"]).astype(np.int64)
    return q


def step_scales(q: dict[str, Any]) -> dict[str, Any]:
    """Every rescale of the step (the Program's ALU constants come from these)."""
    s = q["scales"]
    return {"embed": q["embed.s"] / s["r0"], **q["attn_scales"],
            "res1": (s["r0"] / s["r1"], s["y"] / s["r1"]),
            "ffn2": s["g"] * q[f"{B}ffn2.s"] / s["f"], "res2": (s["r1"] / s["r2"], s["f"] / s["r2"]),
            "gelu": (s["h2"] * q[f"{B}ffn1.s"], s["g"], q["ffn1_bound"])}


def _lin(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    return x @ np.asarray(w, dtype=np.int64).T + np.asarray(b, dtype=np.int64)


def _attend(q_h: np.ndarray, k_h: np.ndarray, v_h: np.ndarray, sc: dict[str, Any]) -> np.ndarray:
    """One query of one head over ``t`` cached keys and values (int8 ``(dh,)``, ``(t, dh)``, ``(t, dh)``):
    the int8 context ``(dh,)``."""
    t = len(k_h)
    logits = rescale(k_h @ q_h, sc["s_logit"])                 # (t,), Q8
    probs = softmax_reference(logits.reshape(t, 1), n=t).astype(np.int64)   # Q7, 0..127
    return BQ.r8(probs @ v_h, sc["s_ctx"])


def _pre(q: dict[str, Any], r0: np.ndarray, sc: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v (int8 ``(T, D)``) of the int8 tokens ``r0``."""
    h1 = BQ.norm(r0, q["norm1"])
    qq, kk, vv = (BQ.r8(_lin(h1, q[f"{B}attn.{x}"], q[f"{B}attn.{x}.bias"]), sc[f"s_{x}"]) for x in "qkv")
    return qq, kk, vv


def _post(q: dict[str, Any], r0: np.ndarray, ctx: np.ndarray, sc: dict[str, Any]) -> np.ndarray:
    """The int32 logits ``(T, V)`` from the int8 tokens ``r0`` and their attention contexts ``ctx``."""
    y = BQ.r8(_lin(ctx, q[f"{B}attn.o"], q[f"{B}attn.o.bias"]), sc["s_out"])
    r1 = np.clip(rescale(r0, sc["res1"][0]) + rescale(y, sc["res1"][1]), -128, 127)
    h2 = BQ.norm(r1, q["norm2"])
    g = gelu_reference(_lin(h2, q[f"{B}ffn1"], q[f"{B}ffn1.bias"]), *sc["gelu"]).astype(np.int64)
    f = BQ.r8(_lin(g, q[f"{B}ffn2"], q[f"{B}ffn2.bias"]), sc["ffn2"])
    r2 = np.clip(rescale(r1, sc["res2"][0]) + rescale(f, sc["res2"][1]), -128, 127)
    h3 = BQ.norm(r2, q["norm3"])
    return _lin(h3, q["head"], q["head.bias"])


def embed(q: dict[str, Any], tokens: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The int8 embedding rows ``r0`` ``(T, D)`` of ``tokens`` at ``positions``."""
    e = np.asarray(q["embed"], dtype=np.int64)[tokens] + q["pos"][positions]
    return BQ.r8(e, step_scales(q)["embed"])


@dataclass
class KVCache:
    """The int8 keys and values of the positions decoded so far (``(CONTEXT, D)`` each; rows ``0..len-1``
    hold data)."""

    k: np.ndarray = field(default_factory=lambda: np.zeros((C.CONTEXT, C.DIM), dtype=np.int64))
    v: np.ndarray = field(default_factory=lambda: np.zeros((C.CONTEXT, C.DIM), dtype=np.int64))
    length: int = 0


def decode_step(q: dict[str, Any], cache: KVCache, token: int) -> np.ndarray:
    """One decode step (module docstring): ``token`` at position ``cache.length``; appends its k, v to
    ``cache`` and returns the int32 logits ``(V,)`` of the next character."""
    p = cache.length
    if not 0 <= p < C.CONTEXT:
        raise ValueError(f"{C.NAME}: the KV cache holds {p} positions, the context {C.CONTEXT}")
    sc = step_scales(q)
    r0 = embed(q, np.array([token]), np.array([p]))
    qq, kk, vv = _pre(q, r0, sc)
    cache.k[p], cache.v[p] = kk[0], vv[0]
    cache.length = p + 1
    dh = C.DIM // C.HEADS
    ctx = np.zeros((1, C.DIM), dtype=np.int64)
    for h in range(C.HEADS):
        cols = slice(h * dh, (h + 1) * dh)
        ctx[0, cols] = _attend(qq[0, cols], cache.k[:p + 1, cols], cache.v[:p + 1, cols], sc)
    return _post(q, r0, ctx, sc)[0]


def prefill(q: dict[str, Any], tokens: np.ndarray) -> tuple[KVCache, np.ndarray]:
    """The prompt's steps one by one from an empty cache: the cache and the last step's logits."""
    cache = KVCache()
    logits = np.zeros(len(C.vocabulary()), dtype=np.int64)
    for tok in tokens:
        logits = decode_step(q, cache, int(tok))
    return cache, logits


def int8_forward(q: dict[str, Any], tokens: np.ndarray) -> np.ndarray:
    """The int32 logits ``(T, V)`` of every position of ``tokens`` ``(T,)``: row ``p`` is the decode step
    at ``p`` after the steps before it (the same arithmetic, all positions at once)."""
    t = len(tokens)
    if not 1 <= t <= C.CONTEXT:
        raise ValueError(f"{C.NAME}: {t} tokens, the context holds 1..{C.CONTEXT}")
    sc = step_scales(q)
    r0 = embed(q, np.asarray(tokens), np.arange(t))
    qq, kk, vv = _pre(q, r0, sc)
    dh = C.DIM // C.HEADS
    ctx = np.zeros((t, C.DIM), dtype=np.int64)
    for h in range(C.HEADS):
        cols = slice(h * dh, (h + 1) * dh)
        for p in range(t):
            ctx[p, cols] = _attend(qq[p, cols], kk[:p + 1, cols], vv[:p + 1, cols], sc)
    return _post(q, r0, ctx, sc)


def generate(q: dict[str, Any], prompt: str, count: int) -> str:
    """Greedy continuation of ``prompt`` by ``count`` characters: prefill, then one step per character
    after the first. The last character is predicted, never fed back, so prompt and continuation take
    ``len(prompt) + count - 1`` positions of the context."""
    toks = C.encode(prompt)
    if not 1 <= len(toks) or len(toks) + count - 1 > C.CONTEXT:
        raise ValueError(f"{C.NAME}: a prompt of {len(toks)} and {count} new characters need "
                         f"{len(toks) + count - 1} positions, more than the context of {C.CONTEXT}")
    cache, logits = prefill(q, toks)
    out = []
    for i in range(count):
        nxt = int(np.argmax(logits))
        out.append(nxt)
        if i + 1 < count:
            logits = decode_step(q, cache, nxt)
    return C.decode(np.array(out))


def held_out_scores(q: dict[str, Any]) -> tuple[float, float]:
    """``(accuracy, perplexity)`` of the int8 model on the held-out characters, as
    :func:`compiler.networks.charlm.held_out_scores` measures the float one (the up to ``CONTEXT``
    characters before each; the perplexity from the softmax of the dequantized logits)."""
    train, held = C.split()
    whole = C.encode(train + held)
    start = len(train)
    s_logit = q["scales"]["h3"] * q["head.s"]
    hits, nll = 0, 0.0
    for pos in range(start, len(whole)):
        logits = int8_forward(q, whole[max(0, pos - C.CONTEXT):pos])[-1]
        hits += int(np.argmax(logits) == whole[pos])
        nll -= math.log(float(tf.softmax(logits * s_logit)[whole[pos]]))
    n = len(whole) - start
    return hits / n, math.exp(nll / n)


# ---- the int8 model's file ------------------------------------------------------------------------
def float_params(path: str | Path = F_WEIGHTS_PATH) -> dict[str, np.ndarray]:
    """The float model's parameters from its weights file."""
    with np.load(path, allow_pickle=False) as z:
        return {k: z[f"{k}_float"] for k in C.params()}


to_arrays = BQ.to_arrays
from_arrays = BQ.from_arrays


def build() -> dict[str, np.ndarray]:
    """The committed int8 model's arrays: the float model quantized, calibrated on the training text."""
    return to_arrays(quantize(float_params(), calibration_windows()))


def load(path: str | Path = WEIGHTS_PATH) -> dict[str, Any]:
    """The int8 model from its file."""
    return BQ.load(path)


def main(argv: list[str] | None = None) -> int:
    """The command line: quantize, write the file, print the held-out scores. Exit 2 with one line on
    bad input."""
    parser = OneLineParser(prog="python -m compiler.networks.charlm_int8", description=__doc__.splitlines()[0])
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
    acc_i, ppl_i = held_out_scores(from_arrays(arrays))
    acc_f, ppl_f = C.held_out_scores(float_params())
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f} s: held-out accuracy int8 {acc_i:.4f} "
          f"(perplexity {ppl_i:.3f}), float {acc_f:.4f} (perplexity {ppl_f:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
