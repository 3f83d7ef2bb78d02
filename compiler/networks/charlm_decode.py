"""charlm's decode step as one Program for every context length: the KV cache in DRAM, the token count
``tokens`` (``t = p + 1``, 1..128) the run-time variable (:func:`compiler.dynamic.compile_traces`).

The arithmetic is :func:`compiler.networks.charlm_int8.decode_step`'s, bit for bit, through the
operators' kernels (:mod:`compiler.layer_norm`, :mod:`compiler.softmax`, :mod:`compiler.gelu`,
:mod:`compiler.fixed_point`'s ``R``). ``B = 16`` the block, ``D = 32`` (two blocks), a head is one block.

Layouts. A token's row lives in the accumulator as ``D/B`` vectors (the features in the lanes). The
step handles one token, so it **replicates** instead of transposing: a row copied into the 16 rows of a
weight block (one ALU MOV with a zero source factor, one STORE) and multiplied by the identity inputs
puts feature ``j`` in every lane of vector ``j`` (``acc[i][o] = W[o][i]``), the layout of the layer norm
and of the softmax (one row per lane, all lanes equal); the normalized vectors stored and read back as
weight blocks against the identity's first row give the row again (``acc[n][o] = W_n[o][0]``).

* embed: the token as an int8 one-hot row (``V`` padded to 48) times the int8 table, plus the int32
  position row ``t - 1`` (a LOAD whose offset is affine in ``t``), ``R``, clip;
* q, k, v: dense layers; k and v go to the cache rows ``h * CONTEXT + t - 1`` (STOREs whose offsets are
  affine in ``t``) and, for the host, to the output;
* per head: the first ``t`` key rows against a weight block of 16 copies of ``q_h``: the ``t`` scores in
  every lane; ``R`` to Q8 and the softmax over those ``t`` vectors (only ``t``: the positions past the
  step, whatever the cache holds there, are never read, which is the causal mask of decode and keeps a
  partial last block from leaking); the first ``t`` value rows times the identity weights (int32 in the
  accumulator), multiplied lane-wise by the probabilities and summed over the ``t`` vectors by one ALU
  reduction: ``sum_j P_j v_j``, ``R``, clip;
* the output projection, the residual adds, norm2, the feed-forward layers with GELU in place, norm3,
  the classifier: int32 logits that leave as four int8 vectors per 16 logits (``x >> 8j``; the host
  reassembles them, as the digits transformer's Program does).

The output region: the 12 logit byte vectors, then k of head 0 and 1, then v of head 0 and 1. The models
run one Job per step and keep no DRAM between Jobs, so the host carries the cache: it writes the step's
new k and v rows (from the output) into the next step's cache image, where on hardware they would simply
stay in DRAM (the step itself stores them into the cache and reads them back in its attention).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler import dsl as S
from compiler import packing as P
from compiler.attention import _gemm, _requant, _UopRing
from compiler.dynamic import DynamicProgram, StaticTrace, compile_traces, static_trace, value_meta
from compiler.errors import CompileError, ConfigFitError
from compiler.gelu import NCONSTS, ONE_Q28, _tile, gelu_constants
from compiler.kernel import Kernel
from compiler.layer_norm import norm_constants, norm_in_acc
from compiler.layer_norm import rows_needed as norm_rows
from compiler.network import check_int8_outputs
from compiler.networks import charlm as C
from compiler.networks import charlm_int8 as Q
from compiler.ops import const_vector
from compiler.softmax import rows_needed as softmax_rows
from compiler.softmax import softmax_in_acc
from compiler.symbolic import var
from compiler.tensor import tensor
from hw.config import HwConfig, load_config
from hw.program import Program, Region, isa_of

NAME = "charlm_decode"
TOKENS = var("tokens", max=C.CONTEXT)   # t: the cache's length after the step (position t - 1)
LOGIT_BYTES = 4
SECTIONS = ("embed", "norm1", "qkv", "attention", "attn_out", "norm2", "ffn", "norm3", "head")
B = Q.B


@dataclass(frozen=True)
class StepLayout:
    """Sizes in vectors of ``block`` lanes: the vocabulary's blocks, the output region's rows and where
    the host finds the step's k and v in it, and the cache's rows (K of each head, then V of each)."""

    block: int
    vocab_blocks: int

    @property
    def out_rows(self) -> int:
        """The output region's vectors: the logit bytes, then k and v of every head."""
        return LOGIT_BYTES * self.vocab_blocks + 2 * C.HEADS

    @property
    def kv_row(self) -> int:
        """The output row of head 0's k (then the other heads' k, then each head's v)."""
        return LOGIT_BYTES * self.vocab_blocks

    @property
    def cache_rows(self) -> int:
        """The cache region's rows: ``CONTEXT`` per head for K, then as many for V."""
        return 2 * C.HEADS * C.CONTEXT


def layout_of(cfg: HwConfig) -> StepLayout:
    """The step's layout on ``cfg``; one CompileError line when the block does not fit the model."""
    b = cfg.block
    if C.DIM // C.HEADS != b or C.FFN % b:
        raise ConfigFitError(f"network '{C.NAME}': config '{cfg.name}' has a block of {b}; the decode step needs "
                           f"a head of one block ({C.DIM // C.HEADS}) and a feed-forward width divisible by it")
    if cfg.num_cores != 1:
        raise ConfigFitError(f"network '{C.NAME}': the decode step runs on one core; config '{cfg.name}' has "
                           f"{cfg.num_cores}")
    return StepLayout(b, -(-len(C.vocabulary()) // b))


def _place(items: list[tuple[str, np.ndarray]], dtype: Any, b: int) -> tuple[dict[str, tuple[int, int]], np.ndarray]:
    """Consecutive flat arrays (each whole vectors): name -> (vector offset, vectors), and the region."""
    where, arrays, at = {}, [], 0
    for name, a in items:
        flat = np.asarray(a).astype(dtype).reshape(-1)
        assert flat.size % b == 0, name
        where[name] = (at, flat.size // b)
        arrays.append(flat)
        at += flat.size // b
    return where, np.concatenate(arrays)


@functools.lru_cache(maxsize=4)
def _packed(block: int) -> tuple[dict[str, tuple[int, int]], np.ndarray, dict[str, tuple[int, int]], np.ndarray]:
    """The committed int8 model packed: (W places, W int8, bias places, bias int32)."""
    return pack_params(Q.load(), block)


def pack_params(q: dict[str, Any], b: int) -> tuple[dict[str, tuple[int, int]], np.ndarray,
                                                     dict[str, tuple[int, int]], np.ndarray]:
    """The int8 model's parameters as the two regions ``W`` (int8: identity, weights as dense blocks) and
    ``bias`` (int32: positions, biases, the norms' G and Bb repeated over the lanes)."""
    v, d = len(C.vocabulary()), C.DIM
    vb = -(-v // b)
    table = np.zeros((vb * b, d), dtype=np.int8)
    table[:v] = q["embed"]
    head = np.zeros((vb * b, d), dtype=np.int8)
    head[:v] = q["head"]
    hb = np.zeros(vb * b, dtype=np.int64)
    hb[:v] = q["head.bias"]
    w_items = [("eye", np.eye(b, dtype=np.int8)), ("embed", P.pack_dense_weights(table.T, b))]
    w_items += [(x, P.pack_dense_weights(q[f"{B}attn.{x}"], b)) for x in Q.PROJ]
    w_items += [("ffn1", P.pack_dense_weights(q[f"{B}ffn1"], b)), ("ffn2", P.pack_dense_weights(q[f"{B}ffn2"], b)),
                ("head", P.pack_dense_weights(head, b))]
    b_items = [("pos", np.asarray(q["pos"], dtype=np.int64).reshape(-1))]
    b_items += [(f"b{x}", P.pack_bias(np.asarray(q[f"{B}attn.{x}.bias"], dtype=np.int32), b)) for x in Q.PROJ]
    b_items += [("bffn1", P.pack_bias(np.asarray(q[f"{B}ffn1.bias"], dtype=np.int32), b)),
                ("bffn2", P.pack_bias(np.asarray(q[f"{B}ffn2.bias"], dtype=np.int32), b)), ("bhead", hb)]
    for norm in Q.NORMS:
        for key in ("G", "Bb"):
            b_items.append((f"{norm}.{key}", np.repeat(np.asarray(q[norm][key], dtype=np.int64)[:, None], b, axis=1)))
    w, wa = _place(w_items, np.int8, b)
    bb, ba = _place(b_items, np.int32, b)
    if np.abs(ba.astype(np.int64)).max() >= 1 << 31:
        raise CompileError(f"network '{C.NAME}': a bias does not fit int32")
    return w, wa, bb, ba


# the accumulator's plan (vectors): the softmax's rows first, then the values, then fixed slots
def _acc_plan() -> dict[str, int]:
    v0 = max(softmax_rows(C.CONTEXT), norm_rows(C.DIM), 64)
    rep = v0 + C.CONTEXT
    keep = rep + C.DIM
    return {"v": v0, "rep": rep, "r0": keep, "r1": keep + 2, "ctx": keep + 4, "t": keep + 6, "y": keep + 8,
            "x": keep + 10, "bias": keep + 16, "consts": keep + 24, "wide": keep + 32, "top": keep + 40}


def _body(q: dict[str, Any], lay: StepLayout, w: dict[str, tuple[int, int]], bb: dict[str, tuple[int, int]]) -> Any:
    """The kernel body over ``onehot``, ``W``, ``bias``, ``kv`` (the cache) and ``out``; ``tokens`` the
    cache's length after the step."""
    sc = Q.step_scales(q)
    d, f, heads, ctx_len = C.DIM, C.FFN, C.HEADS, C.CONTEXT
    a = _acc_plan()

    def body(onehot: Any, W: Any, bias: Any, kv: Any, out: Any, tokens: int = 1) -> None:
        cfg = S.config()
        b = cfg.block
        db, fb, vb = d // b, f // b, lay.vocab_blocks
        t = int(tokens)
        acc, inp, wgt = S.acc, S.inp, S.wgt
        if a["top"] > cfg.acc_depth:
            raise S.error(None, f"the decode step needs {a['top']} accumulator vectors, config '{cfg.name}' "
                                f"has {cfg.acc_depth}")
        if ctx_len > cfg.inp_depth:  # the scores and values of a head load one input vector per cached token
            raise S.error(None, f"the decode step needs {ctx_len} input buffer vectors (one per position of the "
                                f"context), config '{cfg.name}' has {cfg.inp_depth}")
        ring = _UopRing(cfg.uop_depth)
        wv = {k: W.view(k, off, (n, b)) for k, (off, n) in w.items()}
        bv = {k: bias.view(k, off, (n, b)) for k, (off, n) in bb.items()}
        # whole weight blocks each: rep, fm and qrep are read as weights
        parts = {n: -(-k // b) * b for n, k in {"rep": d, "fm": d, "qrep": heads * b, "act": max(fb, vb)}.items()}
        room = S.scratch((sum(parts.values()) * b,), "int8", "dec_scratch")
        offs = np.cumsum([0] + list(parts.values()))
        part = {n: room.view(f"dec_{n}", int(o), (k, b)) for (n, k), o in zip(parts.items(), offs)}

        def requant(view: Any, scale: float, clip: bool = True) -> None:
            _requant(view, scale, a["wide"], clip)

        def dense(src: int, kb: int, wname: str, nb: int, bname: str | None, dst: int) -> Any:
            """acc[dst : dst+nb] = acc[src : src+kb] (a row) times the packed weights, plus the bias."""
            S.store(part["act"], acc[src:src + kb], rows=1, cols=kb)
            S.load(inp[0:kb], part["act"], cols=kb)
            S.load(wgt[0:nb * kb], wv[wname], cols=nb * kb)
            o = _gemm(ring, f"dec_{wname}_uops", 1, kb, nb, kb, 1, acc_base=dst)
            if bname is not None:
                S.load(acc[a["bias"]:a["bias"] + nb], bv[bname])
                S.add(o, acc[a["bias"]:a["bias"] + nb])
            return o

        def norm(name: str, src: int, dst: int) -> None:
            """acc[dst : dst+db] = the layer norm of the row acc[src : src+db] (module docstring)."""
            S.section(name)
            S.mov(acc[a["rep"]:a["rep"] + d], acc[src:src + db], iters=(db, b), dst_factors=(b, 1),
                  src_factors=(1, 0))
            S.store(part["rep"], acc[a["rep"]:a["rep"] + d], rows=1, cols=d)
            S.load(wgt[0:db], part["rep"], cols=db)
            S.load(inp[0:b], wv["eye"])
            _gemm(ring, "dec_norm_in_uops", b, 1, db, 1, 1)        # acc[j] = feature j, in every lane
            S.load(acc[2 * d:3 * d], bv[f"{name}.G"])
            S.load(acc[3 * d:4 * d], bv[f"{name}.Bb"])
            norm_constants(d, int(q[name]["eps"]))
            norm_in_acc(d, int(q[name]["eps_frac"]), int(q[name]["shift"]))
            S.store(part["fm"], acc[0:d])
            S.load(wgt[0:db], part["fm"], cols=db)
            _gemm(ring, "dec_norm_out_uops", 1, 1, db, 1, 1, acc_base=dst)  # the row again: W_n[o][0]

        def residual(keep: int, other: int, scales: tuple[float, float], dst: int) -> None:
            """acc[dst] = clip(R(acc[keep]) + R(acc[other])), rows of db vectors."""
            S.mov(acc[dst:dst + db], acc[keep:keep + db])
            requant(acc[dst:dst + db], scales[0], clip=False)
            requant(acc[other:other + db], scales[1], clip=False)
            S.add(acc[dst:dst + db], acc[other:other + db])
            S.max(acc[dst:dst + db], -128)
            S.min(acc[dst:dst + db], 127)

        # embed: the one-hot row times the table, plus the position row t - 1
        S.section("embed")
        S.load(inp[0:vb], onehot)
        S.load(wgt[0:db * vb], wv["embed"], cols=db * vb)
        e = _gemm(ring, "dec_embed_uops", 1, vb, db, vb, 1, acc_base=a["r0"])
        S.load(acc[a["bias"]:a["bias"] + db], bv["pos"], offset=(t - 1) * db, cols=db)
        S.add(e, acc[a["bias"]:a["bias"] + db])
        requant(e, sc["embed"])
        norm("norm1", a["r0"], a["x"])
        # q, k, v; k and v into the cache at row t - 1 of each head, and to the output for the host
        S.section("qkv")
        qv = dense(a["x"], db, "q", db, "bq", a["x"] + 2)
        requant(qv, sc["s_q"])
        S.mov(acc[a["rep"]:a["rep"] + heads * b], acc[a["x"] + 2:a["x"] + 2 + heads], iters=(heads, b),
              dst_factors=(b, 1), src_factors=(1, 0))
        S.store(part["qrep"], acc[a["rep"]:a["rep"] + heads * b], rows=1, cols=heads * b)
        for which, row in (("k", 0), ("v", heads)):
            o = dense(a["x"], db, which, db, f"b{which}", a["x"] + 4)
            requant(o, sc[f"s_{which}"])
            S.store(kv, o, offset=row * ctx_len + t - 1, rows=heads, cols=1, stride=ctx_len)
            S.store(out, o, offset=lay.kv_row + row, rows=1, cols=heads)
        # attention per head over the cache's first t rows
        S.section("attention")
        S.load(wgt[1:2], wv["eye"], cols=1)
        for h in range(heads):
            S.load(inp[0:t], kv, offset=h * ctx_len, cols=t)
            S.load(wgt[0:1], part["qrep"], offset=h, cols=1)
            scores = _gemm(ring, "dec_scores_uops", t, 1, 1, 1, 1)   # score j in every lane of acc[j]
            requant(scores, sc["s_logit"], clip=False)
            probs = softmax_in_acc(0, t)
            S.load(inp[0:t], kv, offset=(heads + h) * ctx_len, cols=t)
            vals = _gemm(ring, "dec_values_uops", t, 1, 1, 1, 1, acc_base=a["v"], wgt_base=1)  # v_j, int32
            S.mul(vals, probs)
            if t > 1:
                S.add(acc[a["v"]:a["v"] + 1], acc[a["v"] + 1:a["v"] + t], iters=(1, t - 1), dst_factors=(0, 0),
                      src_factors=(0, 1))
            requant(acc[a["v"]:a["v"] + 1], sc["s_ctx"])
            S.mov(acc[a["ctx"] + h:a["ctx"] + h + 1], acc[a["v"]:a["v"] + 1])
        S.section("attn_out")
        y = dense(a["ctx"], db, "o", db, "bo", a["y"])
        requant(y, sc["s_out"])
        residual(a["r0"], a["y"], sc["res1"], a["r1"])
        norm("norm2", a["r1"], a["x"])
        # the feed-forward layers, GELU in place on the first's int32 result, the second residual add
        S.section("ffn")
        k = gelu_constants(*sc["gelu"])
        g0 = a["x"] + 2
        f1 = dense(a["x"], db, "ffn1", fb, "bffn1", g0)
        consts = [acc[a["consts"] + j] for j in range(NCONSTS)]
        for view, value in zip(consts, (k["BC"], k["K"], ONE_Q28, k["M"], 1 << (k["N"] - 1))):
            const_vector(view, value)
        _tile(f1, acc[a["v"]:a["v"] + fb], acc[a["v"] + fb:a["v"] + 2 * fb], k, *consts)
        y2 = dense(g0, fb, "ffn2", db, "bffn2", a["y"])
        requant(y2, sc["ffn2"])
        residual(a["r1"], a["y"], sc["res2"], a["r0"])
        norm("norm3", a["r0"], a["x"])
        # the classifier: int32 logits, out as four byte vectors each
        S.section("head")
        lg = a["v"]
        dense(a["x"], db, "head", vb, "bhead", lg)
        S.mov(acc[lg + vb:lg + LOGIT_BYTES * vb], acc[lg:lg + vb], iters=(LOGIT_BYTES - 1, vb),
              dst_factors=(vb, 1), src_factors=(0, 1))
        for j in range(1, LOGIT_BYTES):
            S.shr(acc[lg + j * vb:lg + (j + 1) * vb], 8 * j)
        S.store(out, acc[lg:lg + LOGIT_BYTES * vb], rows=1, cols=LOGIT_BYTES * vb)

    return body


@dataclass
class DecodeStep:
    """The compiled decode step: the Program of the maximum and its driver (one artifact for every ``t``),
    the kernel (the golden path), the packed parameters and the step's layout."""

    config: HwConfig
    dynamic: DynamicProgram
    kernel: Kernel
    consts: dict[str, np.ndarray]
    layout: StepLayout

    def args(self, t: int) -> dict[str, Any]:
        """The kernel's arguments for ``t`` tokens (TensorSpecs and the constant)."""
        return _args(self.config, self.layout, self.consts, t)

    def inputs(self, token: int, kv: np.ndarray) -> dict[str, np.ndarray]:
        """The input regions of a step: the token's one-hot row, the parameters and the cache image."""
        b = self.config.block
        one = np.zeros((self.layout.vocab_blocks * b,), dtype=np.int8)
        one[int(token)] = 1
        return {"onehot": one.reshape(-1, b), **self.consts, "kv": np.asarray(kv, dtype=np.int8)}

    def run_golden(self, t: int, token: int, kv: np.ndarray) -> np.ndarray:
        """The golden path (the kernel on numpy): the output region of the step at ``t`` tokens."""
        b = self.config.block
        res = self.kernel.run_golden(self.config, {**self.args(t), **self.inputs(token, kv),
                                                   "out": np.zeros((self.layout.out_rows, b), dtype=np.int8)})
        return res["out"].data.reshape(self.layout.out_rows, b)

    def logits(self, out: np.ndarray) -> np.ndarray:
        """The int32 logits (int64 ``(V,)``) from an output region (module docstring)."""
        vb, b = self.layout.vocab_blocks, self.config.block
        by = np.asarray(out).reshape(-1, b)[:LOGIT_BYTES * vb].reshape(LOGIT_BYTES, vb * b).astype(np.int64)
        val = by[LOGIT_BYTES - 1] << (8 * (LOGIT_BYTES - 1))   # the top byte keeps the sign
        for j in range(LOGIT_BYTES - 1):
            val = val + ((by[j] & 0xFF) << (8 * j))
        return val[:len(C.vocabulary())]

    def new_kv(self, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The step's k and v rows (int8 ``(D,)`` each) from an output region."""
        rows = np.asarray(out).reshape(-1, self.config.block)[self.layout.kv_row:self.layout.kv_row + 2 * C.HEADS]
        return rows[:C.HEADS].reshape(-1), rows[C.HEADS:].reshape(-1)

    def append(self, kv: np.ndarray, t: int, out: np.ndarray) -> np.ndarray:
        """The cache image with the step at ``t`` tokens appended (row ``t - 1`` of each head's K and V)."""
        k, v = self.new_kv(out)
        img = np.array(kv, dtype=np.int8, copy=True)
        b = self.config.block
        for h in range(C.HEADS):
            img[h * C.CONTEXT + t - 1] = k[h * b:(h + 1) * b]
            img[(C.HEADS + h) * C.CONTEXT + t - 1] = v[h * b:(h + 1) * b]
        return img

    def empty_cache(self) -> np.ndarray:
        """An all-zero cache image (int8 ``(cache rows, B)``)."""
        return np.zeros((self.layout.cache_rows, self.config.block), dtype=np.int8)


def _args(cfg: HwConfig, lay: StepLayout, consts: dict[str, np.ndarray], t: Any) -> dict[str, Any]:
    b = cfg.block
    return {"onehot": tensor((lay.vocab_blocks, b), "int8"), "W": tensor(consts["W"].shape, "int8"),
            "bias": tensor(consts["bias"].shape, "int32"), "kv": tensor((lay.cache_rows, b), "int8"),
            "out": tensor((lay.out_rows, b), "int8"), "tokens": t}


def compile_decode(config: HwConfig | str = "default", q: dict[str, Any] | None = None,
                   verify_all: bool = False) -> DecodeStep:
    """The decode step of the int8 model ``q`` (default: the committed one) compiled once for every
    ``tokens`` in 1..CONTEXT (the driver checked against static compiles at each piece's ends and middle;
    ``verify_all``: at every value)."""
    cfg = config if isinstance(config, HwConfig) else load_config(config)
    check_int8_outputs(cfg, C.NAME)
    lay = layout_of(cfg)
    w, wa, bb, ba = pack_params(q, cfg.block) if q is not None else _packed(cfg.block)
    model = q if q is not None else Q.load()
    consts = {"W": wa.reshape(-1), "bias": ba.reshape(-1)}
    kernel = Kernel(_body(model, lay, w, bb), name=NAME)

    def trace_of(t: int) -> StaticTrace:
        return static_trace(kernel, _args(cfg, lay, consts, t), cfg, NAME)

    try:
        dp = compile_traces(trace_of, TOKENS, cfg, NAME, {"decode_network": C.NAME}, verify_all)
    except CompileError as e:
        raise CompileError(f"network '{C.NAME}': {e}") from None
    for k, arr in consts.items():
        dp.program.set_input(k, arr.reshape(dp.program.region(k).shape))
    return DecodeStep(cfg, dp, kernel, consts, lay)


@functools.lru_cache(maxsize=4)
def decode_step_program(config: str = "default") -> DecodeStep:
    """:func:`compile_decode` of the committed model on a named config (cached per process)."""
    return compile_decode(config)


def step_program(step: DecodeStep, t: int, token: int, kv: np.ndarray) -> Program:
    """The Program of one step (``t`` tokens after it): the driver's words and layout for ``t`` (the
    one artifact specialised, no recompilation) with the step's inputs attached."""
    TOKENS.check(t)
    drv = step.dynamic.driver()
    lay = drv.layout(t)
    base = step.dynamic.program
    cfg = step.config
    isa = isa_of(cfg)
    insns = [isa.decode_word(word, i) for i, word in enumerate(lay.words)]
    regions = [Region(r.name, r.role, addr, (size // np.dtype(r.dtype).itemsize,), r.dtype)
               for r, addr, size in zip(base.regions, lay.bases, lay.sizes)]
    inputs: dict[str, np.ndarray] = {}
    if drv.const_region is not None:
        r = regions[drv.const_region]
        raw = np.frombuffer(drv.const_bytes_of(t), dtype=np.int8)
        flat = np.zeros(int(np.prod(r.shape)), dtype=np.int8)
        flat[:raw.size] = raw
        inputs[r.name] = flat.reshape(r.shape)
    by = {r.name: r for r in regions}
    for n, arr in step.inputs(token, kv).items():
        inputs[n] = np.asarray(arr).reshape(by[n].shape).astype(by[n].dtype)
    return Program.create(cfg, insns, regions, name=f"{NAME}[tokens={t}]",
                          meta=value_meta(base.meta, TOKENS.name, t),
                          inputs=inputs)
