"""charlm: a character-level causal language model of the Zen of Python.

Text: the Zen of Python from the standard library's ``this`` module (``this.s``, ROT13-encoded in the
module since 2004: the same 856 characters on every Python 3), read without importing ``this`` (whose
import prints it). Its first 16 lines train the model; the last 5 (lines 17 to 21) are
held out for evaluation (264 characters with the newline before them). The vocabulary is every
character of the whole text (45), sorted.

Model (float, trained by :mod:`compiler.networks.train_charlm`; the pieces in
:mod:`compiler.networks.transformer`)::

    characters (T <= 128 tokens) -> embed.table (V x D) + learned positions (128 x D)
      -> block: x + causal attention(norm1(x))      (H heads of D/H; a token sees itself and before)
                x + ffn(norm2(x))                   (D -> F -> GELU -> D)
      -> norm3 -> head (D -> V): the next character's logits at every position
"""

from __future__ import annotations

import codecs
import functools
import importlib.util
import math
import re
from pathlib import Path

import numpy as np

from compiler.networks import transformer as tf

NAME = "charlm"
CONTEXT = 128        # the maximum context (tokens)
DIM = 32
HEADS = 2
FFN = 64
HELD_OUT_LINES = 5   # the text's last lines, for evaluation
BLOCK = "block."


@functools.cache
def text() -> str:
    """The Zen of Python (856 characters), decoded from the ``this`` module's source."""
    spec = importlib.util.find_spec("this")
    if spec is None or spec.origin is None:
        raise RuntimeError("the standard library's 'this' module is missing")
    m = re.search(r's = """(.*?)"""', Path(spec.origin).read_text(), re.S)
    if m is None:
        raise RuntimeError(f"{spec.origin}: no text found")
    return codecs.decode(m.group(1), "rot13")


@functools.cache
def vocabulary() -> str:
    """Every character of the text, sorted: a token is its index here."""
    return "".join(sorted(set(text())))


def split() -> tuple[str, str]:
    """``(train, held-out)``: the text without its last :data:`HELD_OUT_LINES` lines, and those lines
    (with the newline before them, so the held-out part starts where the training part ends)."""
    t = text()
    cut = len(t)
    for _ in range(HELD_OUT_LINES):
        cut = t.rindex("\n", 0, cut)
    return t[:cut], t[cut:]


def encode(s: str) -> np.ndarray:
    """Characters -> tokens (int64); ValueError naming the first character outside the vocabulary."""
    index = {c: i for i, c in enumerate(vocabulary())}
    for pos, c in enumerate(s):
        if c not in index:
            raise ValueError(f"character {c!r} at position {pos} is not in {NAME}'s vocabulary")
    return np.array([index[c] for c in s], dtype=np.int64)


def decode(tokens: np.ndarray) -> str:
    """Tokens -> characters."""
    v = vocabulary()
    return "".join(v[int(t)] for t in tokens)


def params() -> dict[str, tuple[int, ...]]:
    """The parameter shapes (weights ``(out, in)``)."""
    v = len(vocabulary())
    return {"embed.table": (v, DIM), "pos": (CONTEXT, DIM), **tf.block_params(BLOCK, DIM, FFN),
            "norm3.gamma": (DIM,), "norm3.beta": (DIM,), "head.weight": (v, DIM), "head.bias": (v,)}


def forward(p: dict[str, np.ndarray], tokens: np.ndarray) -> dict[str, np.ndarray]:
    """The float model on ``tokens`` ``(N, T)``, ``T <= CONTEXT``: the intermediate values by name (the
    block's under ``"block."``), ``"logits"`` ``(N, T, V)`` among them."""
    t = tokens.shape[1]
    if not 1 <= t <= CONTEXT:
        raise ValueError(f"{NAME}: {t} tokens, the context holds 1..{CONTEXT}")
    a: dict[str, np.ndarray] = {"tokens": tokens}
    a["e"] = p["embed.table"][tokens] + p["pos"][:t]
    a["r2"], block = tf.block_forward(p, BLOCK, a["e"], HEADS, causal=True)
    a.update({f"block.{k}": v for k, v in block.items()})
    a["h3"], a["h3_hat"], a["h3_inv"] = tf.layer_norm(a["r2"], p["norm3.gamma"], p["norm3.beta"])
    a["logits"] = tf.matmul(a["h3"], p["head.weight"]) + p["head.bias"]
    return a


def held_out_scores(p: dict[str, np.ndarray]) -> tuple[float, float]:
    """``(next-character accuracy, perplexity)`` on the held-out characters, each predicted from the up to
    :data:`CONTEXT` characters before it (teacher forcing)."""
    train, held = split()
    whole = encode(train + held)
    start = len(train)
    hits, nll = 0, 0.0
    for pos in range(start, len(whole)):
        ctx = whole[max(0, pos - CONTEXT):pos]
        logits = forward(p, ctx[None, :])["logits"][0, -1]
        hits += int(np.argmax(logits) == whole[pos])
        probs = tf.softmax(logits)
        nll -= math.log(float(probs[whole[pos]]))
    n = len(whole) - start
    return hits / n, math.exp(nll / n)


def generate(p: dict[str, np.ndarray], prompt: str, count: int) -> str:
    """Greedy continuation of ``prompt`` by ``count`` characters (the context's last :data:`CONTEXT`)."""
    toks = list(encode(prompt))
    for _ in range(count):
        ctx = np.array(toks[-CONTEXT:], dtype=np.int64)[None, :]
        toks.append(int(np.argmax(forward(p, ctx)["logits"][0, -1])))
    return decode(np.array(toks[len(prompt):]))
