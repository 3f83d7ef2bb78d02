"""The whole int8 digits transformer as one Program for a batch of images.

The model is :mod:`compiler.networks.digits_transformer_int8`'s (its integer forward pass
``int8_logits`` is the reference, bit for bit); every step runs on the accelerator as the operators'
kernels do it (:mod:`compiler.layer_norm`, :mod:`compiler.attention`, :mod:`compiler.gelu`,
:mod:`compiler.softmax`). ``B`` the block (16), ``T = 8`` tokens, ``D = 32``, ``F = 64``.

Layouts. Activations are token-major matrices, packed ``(1, D/B, rows, 1, B)`` (a column block's rows
one after the other); the residual stream keeps ``B`` rows, the last ``B - T`` zero, because it is
also read as weight blocks. Layer norm works feature-major (one token per lane), so each norm is

* a transpose by the identity: the token-major rows loaded as weight blocks (row o = token o) against
  the identity inputs give ``acc[feature][token]`` (``sum_c I[i][c] W[o][c] = W[o][i]``);
* :func:`compiler.layer_norm.norm_in_acc` on those D vectors, with G and Bb zero on the padding lanes
  (so the padding tokens come out 0), stored feature-major;
* the transpose back (the feature-major rows as weight blocks, the identity as inputs).

The residual adds bring both int8 operands into the accumulator by a GEMM against the identity
block, rescale each (``R`` of :mod:`compiler.fixed_point`), add and clip. GELU runs in place on the
first feed-forward layer's int32 result. The mean pool and the classifier are one GEMM whose loop
adds every token's products into the same output vector (the mean's ``1/T`` is folded into the
classifier's scale), so the logits are int32. A STORE narrows a lane like a C cast, so the logits
leave as four int8 vectors per image, their bytes (``x``, ``x >> 8``, ``x >> 16``, ``x >> 24``),
which the host reassembles exactly: the argmax (the first largest, as ``numpy.argmax``) is the
reference's.

Several cores split the images (each core runs its share layer by layer; the images are
independent, so no barrier). Order: layer by layer, each layer one section (the per-layer table's row) running every image of the
batch: ``embed``, ``norm1``, ``attention`` (Q, K, V^T projections), ``softmax`` (scores and their
integer softmax per head), ``attn_out`` (P V and the output projection), ``residual1``, ``norm2``,
``ffn1_gelu``, ``ffn2_res`` (with the second residual add), ``norm3``, ``pool_head``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from compiler import dsl as S
from compiler import packing as P
from compiler.attention import _gemm, _requant, _UopRing, attention_args, param_layout
from compiler.build import build
from compiler.errors import CompileError, ConfigFitError
from compiler.gelu import NCONSTS, ONE_Q28, _tile, gelu_constants
from compiler.kernel import Kernel
from compiler.layer_norm import norm_constants, norm_in_acc
from compiler.network import check_int8_outputs
from compiler.networks import digits
from compiler.networks import digits_transformer as T
from compiler.networks import digits_transformer_int8 as Q
from compiler.networks.network import Network
from compiler.ops import const_vector
from compiler.softmax import rows_needed as softmax_rows
from compiler.softmax import softmax_in_acc
from compiler.tensor import Tensor, tensor
from hw.config import HwConfig, load_config
from hw.program import Program

LOGIT_BYTES = 4      # an int32 logit leaves as four int8 bytes
SECTIONS = ("embed", "norm1", "attention", "softmax", "attn_out", "residual1", "norm2", "ffn1_gelu",
            "ffn2_res", "norm3", "pool_head")
INPUT_NAME = "image"
OUTPUT_NAME = "logits"


@dataclass
class _Layout:
    """Where the parameters lie (vector offsets in the ``W`` and ``bias`` regions) and the per-image
    scratch parts (vector offset, vectors) inside one image's share of the scratch region."""

    w: dict[str, tuple[int, tuple[int, ...]]]
    b: dict[str, tuple[int, tuple[int, ...]]]
    w_arrays: list[np.ndarray]
    b_arrays: list[np.ndarray]
    parts: dict[str, tuple[int, tuple[int, ...]]]
    per_image: int


def _params(q: dict[str, Any], block: int) -> _Layout:
    """The int8 model's parameters packed for the kernel, and the scratch plan."""
    b, t, d, f = block, T.TOKENS, T.DIM, T.FFN
    db, fb = d // b, f // b
    B = Q.B
    w_list: list[tuple[str, np.ndarray, tuple[int, ...]]] = []
    b_list: list[tuple[str, np.ndarray, tuple[int, ...]]] = []
    w_list.append(("eye", np.eye(b, dtype=np.int8), (b, b)))
    for parity in (0, 1):  # row i picks lane i + 8 parity: the tokens of an image of that parity
        sel = np.zeros((b, b), dtype=np.int8)
        sel[np.arange(t), np.arange(t) + t * parity] = 1
        w_list.append((f"sel{parity}", sel, (b, b)))
    w_list.append(("embed", P.pack_dense_weights(q["embed"], b), (db, 1, 1, 1, b, b)))
    att = {"wq": q[f"{B}attn.q"], "wk": q[f"{B}attn.k"], "wv": q[f"{B}attn.v"], "wo": q[f"{B}attn.o"],
           "bq": q[f"{B}attn.q.bias"], "bk": q[f"{B}attn.k.bias"], "bv": q[f"{B}attn.v.bias"],
           "bo": q[f"{B}attn.o.bias"]}
    packed = attention_args(np.zeros((t, d), dtype=np.int8), att, b)
    w_list.append(("att", packed["W"], (packed["W"].size,)))
    w_list.append(("ffn1", P.pack_dense_weights(q[f"{B}ffn1"], b), (fb, db, 1, 1, b, b)))
    w_list.append(("ffn2", P.pack_dense_weights(q[f"{B}ffn2"], b), (db, fb, 1, 1, b, b)))
    head = np.zeros((b, d), dtype=np.int8)
    head[:T.CLASSES] = q["head"]
    w_list.append(("head", P.pack_dense_weights(head, b), (1, db, 1, 1, b, b)))
    for parity in (0, 1):  # an odd image's tokens lie in rows 8..15 of its residual stream
        emb = np.zeros((b, d), dtype=np.int64)
        emb[t * parity:t * (parity + 1)] = np.broadcast_to(q["embed.bias"], (t, d))
        b_list.append((f"embed_b{parity}", emb.reshape(b, db, b).transpose(1, 0, 2).astype(np.int32), (db * b * b,)))
    b_list.append(("att_b", packed["bias"], (packed["bias"].size,)))
    b_list.append(("ffn1_b", P.pack_bias(np.asarray(q[f"{B}ffn1.bias"], dtype=np.int32), b), (f,)))
    b_list.append(("ffn2_b", P.pack_bias(np.asarray(q[f"{B}ffn2.bias"], dtype=np.int32), b), (d,)))
    hb = np.zeros(b, dtype=np.int32)
    hb[:T.CLASSES] = q["head.bias"]
    b_list.append(("head_b", hb, (b,)))
    for norm in Q.NORMS:
        for key in ("G", "Bb"):
            v = np.zeros((d, b), dtype=np.int32)
            v[:, :2 * t] = np.asarray(q[norm][key], dtype=np.int64)[:, None]  # two images' tokens
            b_list.append((f"{norm}.{key}", v, (d, b)))

    def place(items: list[tuple[str, np.ndarray, tuple[int, ...]]], dtype: Any
              ) -> tuple[dict[str, tuple[int, tuple[int, ...]]], list[np.ndarray]]:
        where, arrays, at = {}, [], 0
        for name, a, shape in items:
            flat = np.asarray(a).astype(dtype).reshape(-1)
            assert flat.size % b == 0 and flat.size == int(np.prod(shape)), name
            where[name] = (at, shape)
            arrays.append(flat)
            at += flat.size // b
        return where, arrays

    w, wa = place(w_list, np.int8)
    bb, ba = place(b_list, np.int32)
    shapes = {"r0": (1, db, b, 1, b), "h1": (1, db, b, 1, b), "fm1": (d, b), "fm2": (d, b), "fm3": (d, b),
              "q": (1, db, b, 1, b), "k": (1, db, b, 1, b), "vt": (1, 1, d, 1, b),
              **{f"pt{h}": (1, 1, b, 1, b) for h in range(T.HEADS)}, "p": (1, 1, t, 1, b),
              "ctx": (1, db, t, 1, b), "y": (1, db, t, 1, b), "r1": (1, db, b, 1, b), "h2": (1, db, t, 1, b),
              "g": (1, fb, t, 1, b), "r2": (1, db, b, 1, b), "h3": (1, db, t, 1, b)}
    parts, at = {}, 0
    for name, shape in shapes.items():
        parts[name] = (at, shape)
        at += -(-int(np.prod(shape)) // (b * b)) * b  # whole weight blocks: every part may be read as weights
    return _Layout(w, bb, wa, ba, parts, at)


def _scales(q: dict[str, Any]) -> dict[str, Any]:
    s = q["scales"]
    B = Q.B
    a = q["attn_scales"]
    return {"embed": Q.INPUT_SCALE * q["embed.s"] / s["r0"],
            "att": tuple(a[k] for k in ("s_q", "s_k", "s_v", "s_logit", "s_ctx", "s_out")),
            "res1": (s["r0"] / s["r1"], s["y"] / s["r1"]),
            "gelu": gelu_constants(s["h2"] * q[f"{B}ffn1.s"], s["g"], q["ffn1_bound"]),
            "ffn2": s["g"] * q[f"{B}ffn2.s"] / s["f"], "res2": (s["r1"] / s["r2"], s["f"] / s["r2"])}


def _body(q: dict[str, Any], lay: _Layout, batch: int) -> Callable[..., None]:
    """The kernel body over the regions image, W, bias, logits (module docstring)."""
    sc = _scales(q)
    t, d, f, heads = T.TOKENS, T.DIM, T.FFN, T.HEADS

    def body(image: Tensor, W: Tensor, bias: Tensor, logits: Tensor) -> None:
        cfg = S.config()
        b = cfg.block
        db, fb, hb = d // b, f // b, d // heads // b
        acc, inp, wgt = S.acc, S.inp, S.wgt
        ring = _UopRing(cfg.uop_depth)
        room = S.scratch((batch * lay.per_image * b,), "int8", "xf_scratch")
        images = S.core_range(batch)  # several cores: each runs its share of the images, layer by layer
        if not images:
            return  # this core has no image: it builds and runs nothing
        wv = {k: W.view(k, off, shp) for k, (off, shp) in lay.w.items()}
        bv = {k: bias.view(k, off, shp) for k, (off, shp) in lay.b.items()}
        att_w, att_b = lay.w["att"][0], lay.b["att_b"][0]
        ap = {k: (W if k.startswith("w") else bias).view(f"att.{k}", off + (att_w if k.startswith("w") else att_b), shp)
              for k, (off, shp) in param_layout(d, b).items()}
        eye = wv["eye"]

        def part(i: int, name: str) -> Tensor:
            off, shp = lay.parts[name]
            return room.view(f"{name}{i}", i * lay.per_image + off, shp)

        def norm(name: str, src: str, dst: str, rows: int) -> None:
            S.section(name)
            norm_constants(d, int(q[name]["eps"]))
            for k in range(2):
                S.load(inp[k * b:(k + 1) * b], eye)
                S.load(inp[(2 + k) * b:(3 + k) * b], wv[f"sel{k}"])
            mine = list(images)
            for pair in (mine[j:j + 2] for j in range(0, len(mine), 2)):
                # two consecutive images (one even, one odd) fill the lanes: their rows add up
                for k, i in enumerate(pair):
                    S.load(wgt[k * db:(k + 1) * db], part(i, src))
                _gemm(ring, f"xf_t{len(pair)}_uops", b, len(pair), db, 1, db)  # acc[feature][token]
                S.load(acc[2 * d:3 * d], bv[f"{name}.G"])
                S.load(acc[3 * d:4 * d], bv[f"{name}.Bb"])
                norm_in_acc(d, int(q[name]["eps_frac"]), int(q[name]["shift"]))
                fm = part(pair[0], "fm" + name[-1])
                S.store(fm, acc[0:d])
                S.load(wgt[0:db], fm)
                for i in pair:  # back to acc[token][feature], the image's lanes picked by sel0 / sel1
                    _gemm(ring, f"xf_tb{rows}_{i % 2}_uops", rows, 1, db, 1, 1, inp_base=(2 + i % 2) * b)
                    S.store(part(i, dst), acc[0:db * rows])

        def residual(i: int, wide: str, wide_in: int, narrow_at: int, scales: tuple[float, float], dst: str) -> None:
            # acc[0 : db*B] = R(wide) (B rows); the narrow operand (T rows) already at acc[narrow_at]
            S.load(inp[wide_in:wide_in + db * b], part(i, wide))
            _gemm(ring, "xf_copy_uops", db * b, 1, 1, 1, 1, inp_base=wide_in)
            _requant(acc[0:db * b], scales[0], narrow_at + db * t, clip=False)
            _requant(acc[narrow_at:narrow_at + db * t], scales[1], narrow_at + db * t, clip=False)
            o = t * (i % 2)  # the image's rows in the residual stream
            S.add(acc[o:db * b], acc[narrow_at:narrow_at + db * t], iters=(db, t), dst_factors=(b, 1),
                  src_factors=(t, 1))
            S.max(acc[0:db * b], -128)
            S.min(acc[0:db * b], 127)
            S.store(part(i, dst), acc[0:db * b])

        # embed: r0 = R(x We^T + be + pos), B token rows (the padding rows' inputs and bias are zero)
        S.section("embed")
        for i in images:
            S.load(inp[0:b], image, offset=i * b)
            S.load(wgt[0:db], wv["embed"])
            S.load(acc[db * b:2 * db * b], bv[f"embed_b{i % 2}"])
            out = _gemm(ring, "xf_embed_uops", b, 1, db, 1, 1)
            S.add(out, acc[db * b:2 * db * b])
            _requant(out, sc["embed"], 2 * db * b)
            S.store(part(i, "r0"), out)
        norm("norm1", "r0", "h1", b)
        # attention, in three sections (the operator's steps, P^T kept per head)
        s_q, s_k, s_v, s_logit, s_ctx, s_out = sc["att"]
        S.section("attention")
        for i in images:
            x = part(i, "h1")
            for w, bb, scale, dst, name in ((ap["wq"], ap["bq"], s_q, "q", "q"), (ap["wk"], ap["bk"], s_k, "k", "k")):
                S.load(inp[0:db * b], x)
                S.load(wgt[0:db * db], w)
                S.load(acc[db * b:db * b + db], bb)
                out = _gemm(ring, f"att_{name}_uops", b, db, db, db, 1)
                S.add(out, acc[db * b:db * b + db], iters=(db, b), dst_factors=(b, 1), src_factors=(1, 0))
                _requant(out, scale, db * b + db)
                S.store(part(i, dst), out)
            S.load(inp[0:db * d], ap["wvt"])
            S.load(wgt[0:db], x)
            S.load(acc[d:2 * d], ap["bvt"])
            out = _gemm(ring, "att_vt_uops", d, db, 1, 1, 1)
            S.add(out, acc[d:2 * d])
            _requant(out, s_v, 2 * d)
            S.store(part(i, "vt"), out)
        S.section("softmax")
        for i in images:
            for head in range(heads):
                pt = part(i, f"pt{head}")
                if t < b:  # P^T's padding rows zero: P's lanes beyond the keys multiply V^T's padding tokens
                    S.mov(acc[0:b - t], 0)
                    S.store(pt, acc[0:b - t], offset=t)
                S.load(inp[0:hb * t], part(i, "k"), offset=head * hb * b, rows=hb, cols=t, stride=b)
                S.load(wgt[0:hb], part(i, "q"), offset=head * hb, cols=hb)
                scores = _gemm(ring, "att_s_uops", t, hb, 1, 1, 1)
                _requant(scores, s_logit, softmax_rows(t), clip=False)
                S.store(pt, softmax_in_acc(0, t))
        S.section("attn_out")
        for i in images:
            ctx = part(i, "ctx")
            for head in range(heads):
                S.load(inp[0:t], eye, cols=t)
                S.load(wgt[0:1], part(i, f"pt{head}"), cols=1)
                S.store(part(i, "p"), _gemm(ring, "att_t_uops", t, 1, 1, 1, 1))
                S.load(inp[0:t], part(i, "p"))
                S.load(wgt[0:hb], part(i, "vt"), offset=head * hb, cols=hb)
                c = _gemm(ring, "att_pv_uops", t, 1, hb, 1, 1)
                _requant(c, s_ctx, hb * t)
                S.store(ctx, c, offset=head * hb * t)
            S.load(inp[0:db * t], ctx)
            S.load(wgt[0:db * db], ap["wo"])
            S.load(acc[db * t:db * t + db], ap["bo"])
            out = _gemm(ring, "att_o_uops", t, db, db, db, 1)
            S.add(out, acc[db * t:db * t + db], iters=(db, t), dst_factors=(t, 1), src_factors=(1, 0))
            _requant(out, s_out, db * t + db)
            S.store(part(i, "y"), out)
        S.section("residual1")
        S.load(wgt[0:1], eye, cols=1)
        for i in images:
            S.load(inp[db * b:db * b + db * t], part(i, "y"))
            _gemm(ring, "xf_copy_y_uops", db * t, 1, 1, 1, 1, acc_base=db * b, inp_base=db * b)
            residual(i, "r0", 0, db * b, sc["res1"], "r1")
        norm("norm2", "r1", "h2", t)
        # ffn1 + GELU in place on the int32 result
        S.section("ffn1_gelu")
        k = sc["gelu"]
        n1 = fb * t
        cb = n1 + fb
        consts = [acc[cb + j] for j in range(NCONSTS)]
        for view, value in zip(consts, (k["BC"], k["K"], ONE_Q28, k["M"], 1 << (k["N"] - 1))):
            const_vector(view, value)
        for i in images:
            S.load(inp[0:db * t], part(i, "h2"))
            S.load(wgt[0:fb * db], wv["ffn1"])
            S.load(acc[n1:n1 + fb], bv["ffn1_b"])
            out = _gemm(ring, "xf_ffn1_uops", t, db, fb, db, 1)
            S.add(out, acc[n1:n1 + fb], iters=(fb, t), dst_factors=(t, 1), src_factors=(1, 0))
            s0 = cb + NCONSTS
            _tile(out, acc[s0:s0 + n1], acc[s0 + n1:s0 + 2 * n1], k, *consts)
            S.store(part(i, "g"), out)
        # ffn2 + the second residual add
        S.section("ffn2_res")
        fat = db * b
        for i in images:
            S.load(inp[0:fb * t], part(i, "g"))
            S.load(wgt[0:db * fb], wv["ffn2"])
            S.load(wgt[db * fb:db * fb + 1], eye, cols=1)
            S.load(acc[fat + db * t:fat + db * t + db], bv["ffn2_b"])
            _gemm(ring, "xf_ffn2_uops", t, fb, db, fb, 1, acc_base=fat)
            f_view = acc[fat:fat + db * t]
            S.add(f_view, acc[fat + db * t:fat + db * t + db], iters=(db, t), dst_factors=(t, 1), src_factors=(1, 0))
            _requant(f_view, sc["ffn2"], fat + db * t + db)
            # the identity for the residual copy is weight block db*fb here
            S.load(inp[fb * t:fb * t + db * b], part(i, "r1"))
            _gemm(ring, "xf_copy2_uops", db * b, 1, 1, 1, 1, inp_base=fb * t, wgt_base=db * fb)
            _requant(acc[0:db * b], sc["res2"][0], fat + db * t + db, clip=False)
            _requant(f_view, sc["res2"][1], fat + db * t + db, clip=False)
            S.add(acc[t * (i % 2):db * b], f_view, iters=(db, t), dst_factors=(b, 1), src_factors=(t, 1))
            S.max(acc[0:db * b], -128)
            S.min(acc[0:db * b], 127)
            S.store(part(i, "r2"), acc[0:db * b])
        norm("norm3", "r2", "h3", t)
        # mean pool + classifier: every token's products into one output vector
        S.section("pool_head")
        S.load(wgt[0:db], wv["head"])
        base = ring.place([(0, c * t, c) for c in range(db)], "xf_head_uops")
        for i in images:
            S.load(inp[0:db * t], part(i, "h3"))
            loops = dict(iters=(1, t), acc_factors=(0, 0), inp_factors=(0, 1), wgt_factors=(0, 0))
            S.gemm(S.uop[base:base + 1], reset=True, **loops)
            S.gemm(S.uop[base:base + db], **loops)
            S.load(acc[1:2], bv["head_b"])
            S.add(acc[0:1], acc[1:2])
            S.mov(acc[1:LOGIT_BYTES], acc[0:1])
            for j in range(1, LOGIT_BYTES):
                S.shr(acc[j:j + 1], 8 * j)
            S.store(logits, acc[0:LOGIT_BYTES], offset=i * LOGIT_BYTES)

    return body


def image_rows(images: np.ndarray, block: int) -> np.ndarray:
    """int8 images ``(N, 1, 8, 8)`` -> the input region: per image ``B`` token rows of ``B`` lanes (the
    8 pixels of a row, then zeros), the tokens in rows 0..7 of an even image and 8..15 of an odd one
    (the other rows zero), ``(N * B, B)``."""
    n, t = len(images), T.TOKENS
    out = np.zeros((n, block, block), dtype=np.int8)
    x = np.asarray(images).reshape(n, t, T.TOKEN_PIXELS)
    out[0::2, :t, :T.TOKEN_PIXELS] = x[0::2]
    out[1::2, t:2 * t, :T.TOKEN_PIXELS] = x[1::2]
    return out.reshape(n * block, block)


def logits_from_bytes(raw: np.ndarray, batch: int, block: int) -> np.ndarray:
    """The int32 logits ``(N, 10)`` (as int64) from the output region's bytes (module docstring)."""
    by = np.asarray(raw).reshape(batch, LOGIT_BYTES, block)[:, :, :T.CLASSES].astype(np.int64)
    out = by[:, LOGIT_BYTES - 1] << (8 * (LOGIT_BYTES - 1))   # the top byte keeps the sign
    for j in range(LOGIT_BYTES - 1):
        out = out + ((by[:, j] & 0xFF) << (8 * j))
    return out


@dataclass
class TransformerProgram:
    """The compiled model: the Program and how images go in and logits come out (the interface of
    :class:`compiler.network.NetworkProgram` that ``cosim net`` uses)."""

    config: HwConfig
    batch: int
    program: Program
    kernel: Kernel
    consts: dict[str, np.ndarray]

    def _images(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        a = np.asarray(inputs.get(INPUT_NAME))
        want = (self.batch, 1, T.TOKENS, T.TOKEN_PIXELS)
        if a.dtype != np.int8 or a.shape != want:
            raise CompileError(f"network '{T.NAME}': input '{INPUT_NAME}' must be int8 of shape {want}, got "
                               f"{a.dtype} {a.shape}")
        return image_rows(a, self.config.block)

    def set_inputs(self, inputs: dict[str, np.ndarray]) -> None:
        """Attach natural ``(batch, 1, 8, 8)`` int8 images to the Program."""
        self.program.set_input(INPUT_NAME, self._images(inputs))

    def outputs(self, regions: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The int32 logits (by output name) from a run's output regions."""
        return {OUTPUT_NAME: logits_from_bytes(regions[OUTPUT_NAME], self.batch, self.config.block)}

    def run_golden(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The golden (PySim) path: the kernel on numpy."""
        b = self.config.block
        args = {INPUT_NAME: self._images(inputs), **self.consts,
                OUTPUT_NAME: np.zeros((self.batch * LOGIT_BYTES, b), dtype=np.int8)}
        out = self.kernel.run_golden(self.config, args)
        return self.outputs({OUTPUT_NAME: out[OUTPUT_NAME].data.reshape(-1)[:args[OUTPUT_NAME].size]})


def compile_transformer(q: dict[str, Any], config: HwConfig | str = "default", batch: int = 1,
                        name: str = "net_digits_transformer") -> TransformerProgram:
    """The int8 model ``q`` (:func:`compiler.networks.digits_transformer_int8.load`) for ``batch`` images
    as one Program."""
    cfg = config if isinstance(config, HwConfig) else load_config(config)
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or not 1 <= batch <= 4096:
        raise CompileError(f"network '{T.NAME}': batch {batch!r} must be an integer 1..4096")
    batch = int(batch)
    check_int8_outputs(cfg, T.NAME)
    b = cfg.block
    if T.DIM % (b * T.HEADS) or T.FFN % b or max(2 * T.TOKENS, T.TOKEN_PIXELS, T.CLASSES) > b:
        raise ConfigFitError(f"network '{T.NAME}': config '{cfg.name}' has a block of {b}; the model needs a "
                           f"block dividing {T.DIM // T.HEADS} and {T.FFN}, of at least "
                           f"{max(2 * T.TOKENS, T.TOKEN_PIXELS, T.CLASSES)}")
    lay = _params(q, b)
    consts = {"W": np.concatenate(lay.w_arrays), "bias": np.concatenate(lay.b_arrays)}
    body = _body(q, lay, batch)
    kernel = Kernel(body, name=name)
    specs = {INPUT_NAME: tensor((batch * b, b), "int8"), "W": tensor(consts["W"].shape, "int8"),
             "bias": tensor(consts["bias"].shape, "int32"), OUTPUT_NAME: tensor((batch * LOGIT_BYTES, b), "int8")}
    try:
        prog = build(kernel, specs, cfg, name=name)
    except CompileError as e:
        raise CompileError(f"network '{T.NAME}': {e}") from None
    for k, a in consts.items():
        prog.set_input(k, a)
    return TransformerProgram(cfg, batch, prog, kernel, consts)



# ---- the shipped network ---------------------------------------------------------------------------
@functools.cache
def model() -> dict[str, Any]:
    """The committed int8 model (cached)."""
    return Q.load()


@functools.cache
def _float_params() -> dict[str, np.ndarray]:
    return Q.float_params()


def reference(images: np.ndarray) -> np.ndarray:
    """The int8 model's int32 logits (int64 ``(N, 10)``) of int8 images ``(N, 1, 8, 8)``."""
    return Q.int8_logits(model(), images)


def float_predict(images: np.ndarray) -> np.ndarray:
    """The float model's labels (int64 ``(N,)``) for int8 images ``(N, 1, 8, 8)``."""
    return np.argmax(T.float_logits(_float_params(), images), axis=1).astype(np.int64)


NETWORK = Network(
    name=T.NAME,
    description=f"8x8 handwritten digits as {T.TOKENS} tokens of {T.TOKEN_PIXELS} pixels: embed, pre-norm "
                f"encoder block ({T.HEADS}-head attention, GELU feed-forward {T.DIM}->{T.FFN}->{T.DIM}), "
                f"layer norm, mean pool, classifier; int8, int32 logits",
    graph=None,
    dataset=digits.dataset,
    float_predict=float_predict,
    input_name=INPUT_NAME,
    output=OUTPUT_NAME,
    compile=lambda cfg, batch, name: compile_transformer(model(), cfg, batch, name),
    reference=reference,
)
