"""Multi-head self-attention as one kernel: the Q, K, V projections, ``K Q^T`` per head, the integer
softmax, ``P V``, the output projection, every product a GEMM and every nonlinear step on the ALU.

Layouts (``B`` the block, ``T <= B`` tokens, ``D = H * dh`` features, ``dh`` a multiple of ``B``; a
matrix is the packed ``(1, cols/B, rows, 1, B)`` of :mod:`compiler.packing`):

* ``X`` is ``(B, D)``: the ``T`` tokens and ``B - T`` zero rows, because X is also read as weight blocks;
* ``Q = R(X Wq^T + bq)`` and ``K = R(X Wk^T + bk)`` are ``(B, D)`` (dense layers);
* ``V^T = R(Wv X^T + bv)`` is ``(D, B)``: the projection with the roles swapped (``Wv`` is the input
  matrix, X the weight blocks: :func:`compiler.gemm_kernels.matmul_nt`'s trick), so a head's rows of
  V^T are weight blocks for ``P V``;
* per head ``S^T = K_h Q_h^T`` (``T`` key vectors, one query per lane: Q_h loaded as weight blocks),
  ``R`` to Q8 logits, the softmax of :func:`compiler.softmax.softmax_in_acc` along the keys, stored
  as ``P^T`` (``B`` rows, the last ``B - T`` zero);
* ``P`` (one query per vector, the keys in the lanes) by one GEMM of the identity inputs against
  ``P^T`` loaded as a weight block: ``acc[i][o] = sum_c I[i][c] W[o][c] = P^T[o][i]``, the transpose;
* ``ctx_h = R(P V_h)`` into head h's column blocks of ctx, then ``Y = R(ctx Wo^T + bo)`` ``(T, D)``.

``R(x, scale)`` is :mod:`compiler.fixed_point`'s rescale (MULHR by a Q31 multiplier, a rounding shift),
clipped to int8 except for the logits. :func:`attention_reference` restates the whole composite in
plain numpy on natural matrices.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler import dsl as S
from compiler import packing as P
from compiler.errors import CompileError
from compiler.fixed_point import alu_steps, rescale, scale_ok
from compiler.ops import const_vector
from compiler.softmax import rows_needed as softmax_rows
from compiler.softmax import softmax_in_acc, softmax_reference
from compiler.tensor import AccView, Tensor

SCALES = ("s_q", "s_k", "s_v", "s_logit", "s_ctx", "s_out")
# the kernel's default rescales, for int8 tokens and weights over most of their range (the example's)
DEFAULT_SCALES = {"s_q": 2 ** -9, "s_k": 2 ** -9, "s_v": 2 ** -9, "s_logit": 0.011, "s_ctx": 2 ** -7, "s_out": 0.0037}


class _UopRing:
    """Consecutive micro-op tables in the micro-op buffer, from 0 again when the next does not fit (a
    table load then waits only for the GEMMs that used that part)."""

    def __init__(self, depth: int) -> None:
        self.depth, self.at = depth, 0

    def place(self, table: list[tuple[int, int, int]], name: str) -> int:
        """LOAD ``table`` into the micro-op buffer; returns its first index."""
        if self.at + len(table) > self.depth:
            self.at = 0
        base = self.at
        S.load(S.uop[base:base + len(table)], S.uops(table, name=name))
        self.at += len(table)
        return base


def _gemm(ring: _UopRing, name: str, m: int, kb: int, nb: int, n_stride: int, k_stride: int,
          acc_base: int = 0, inp_base: int = 0, wgt_base: int = 0) -> AccView:
    """acc[acc_base : acc_base + nb*m] = the products of the m input vectors per block
    (inp[inp_base + c*m + i]) against the weight blocks (block (n, c) at ``wgt_base + n*n_stride +
    c*k_stride``): vector ``acc_base + n*m + i``."""
    base = ring.place([(acc_base, inp_base + c * m, wgt_base + c * k_stride) for c in range(kb)], name)
    loops = dict(iters=(nb, m), acc_factors=(m, 1), inp_factors=(0, 1), wgt_factors=(n_stride, 0))
    S.gemm(S.uop[base:base + 1], reset=True, **loops)   # one micro-op visits every output vector
    S.gemm(S.uop[base:base + kb], **loops)
    return S.acc[acc_base:acc_base + nb * m]


def _requant(view: AccView, scale: float, cbase: int, clip: bool = True) -> None:
    """view = R(view, scale) on the ALU, clipped to int8 when ``clip``; wide constants at ``cbase``."""
    k = 0
    for op, v in alu_steps(float(scale)):
        value = int(v[0])
        if -(1 << 15) <= value < 1 << 15:
            getattr(S, op.lower())(view, value)
        else:
            const_vector(S.acc[cbase + k], value)
            getattr(S, op.lower())(view, S.acc[cbase + k])
            k += 1
    if clip:
        S.max(view, -128)
        S.min(view, 127)


def _arg(name: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
        raise S.error(name, f"{v!r} must be an integer {lo}..{hi}")
    return int(v)


def _shape(t: Any, name: str, want: tuple[int, ...], dtype: str) -> None:
    if not isinstance(t, Tensor) or t.dtype != dtype or tuple(t.shape) != want:
        got = f"{t.dtype} {tuple(t.shape)}" if isinstance(t, Tensor) else type(t).__name__
        raise S.error(name, f"must be {dtype} {want}, got {got}")


def param_layout(d: int, block: int) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Where the packed parameters lie: name -> (vector offset, shape) inside ``W`` (int8: wq, wk, wo
    dense blocks, then wvt) and ``bias`` (int32: bq, bk, bo, then bvt)."""
    db = d // block
    blk = db * db * block                         # vectors of one packed (D/B, D/B, 1, 1, B, B)
    wshape = (db, db, 1, 1, block, block)
    return {"wq": (0, wshape), "wk": (blk, wshape), "wo": (2 * blk, wshape), "wvt": (3 * blk, (1, db, d, 1, block)),
            "bq": (0, (d,)), "bk": (db, (d,)), "bo": (2 * db, (d,)), "bvt": (3 * db, (d * block,))}


@S.kernel
def attention(X: Tensor, W: Tensor, bias: Tensor, Y: Tensor, tokens: int = 8, heads: int = 2,
              s_q: float = 2 ** -9, s_k: float = 2 ** -9, s_v: float = 2 ** -9, s_logit: float = 0.011,
              s_ctx: float = 2 ** -7, s_out: float = 0.0037) -> None:
    """Y = multi-head self-attention of the tokens X (module docstring). ``W`` holds the int8 parameters
    and ``bias`` the int32 ones as :func:`param_layout` places them (:func:`attention_args` packs them):
    Wq, Wk, Wo as dense weights, Wv as a matrix, bq, bk, bo per feature and bv per V row repeated over
    the lanes; the ``s_*`` are the rescales."""
    cfg = S.config()
    b = cfg.block
    if cfg.out_width != 8:  # its Q, K, V and context go through int8 DRAM tensors that STOREs write
        raise S.error(None, f"needs a config with int8 outputs (out_width 8); config '{cfg.name}' has out_width "
                            f"{cfg.out_width}")
    if not isinstance(X, Tensor) or len(X.shape) != 5:
        raise S.error("X", "must be the packed int8 matrix (1, D/B, B, 1, B)")
    db = X.shape[1]
    d = db * b
    _shape(X, "X", (1, db, b, 1, b), "int8")
    t = _arg("tokens", tokens, 1, b)
    h = _arg("heads", heads, 1, d)
    if d % h or (d // h) % b:
        raise S.error("heads", f"{h} heads over {d} features, {d / h:g} each: a head must be a whole number "
                               f"of {b}-lane blocks")
    hb = d // h // b
    lay = param_layout(d, b)
    _shape(W, "W", (lay["wvt"][0] * b + db * d * b,), "int8")
    _shape(bias, "bias", (lay["bvt"][0] * b + d * b,), "int32")
    _shape(Y, "Y", (1, db, t, 1, b), f"int{cfg.out_width}")
    for name, sc in zip(SCALES, (s_q, s_k, s_v, s_logit, s_ctx, s_out)):
        if not scale_ok(sc):
            raise S.error(name, f"{sc!r} must be a number in [2**-32, 2**15]")
    need = {"input buffer": (db * d, cfg.inp_depth), "weight buffer": (db * db, cfg.wgt_depth),
            "accumulator": (max(db * b + db, 2 * d, softmax_rows(t)) + 4, cfg.acc_depth)}
    for what, (used, depth) in need.items():
        if used > depth:
            raise S.error(None, f"attention needs {used} entries of the {what}, config '{cfg.name}' has {depth}")
    views = {k: (W if k.startswith("w") else bias).view(k, off, shape) for k, (off, shape) in lay.items()}
    for _ in S.core_range(1):  # several cores: the first does it all
        _attend(X, views, Y, t, h, hb, db, (s_q, s_k, s_v, s_logit, s_ctx, s_out))


def _attend(X: Tensor, p: dict[str, Tensor], Y: Tensor, t: int, heads: int, hb: int, db: int,
            scales: tuple[float, ...]) -> None:
    """The composite's steps (module docstring); ``p`` the parameter views."""
    s_q, s_k, s_v, s_logit, s_ctx, s_out = scales
    cfg = S.config()
    b = cfg.block
    d = db * b
    acc = S.acc
    ring = _UopRing(cfg.uop_depth)
    # the intermediates, views of one scratch tensor (a DRAM region each would exceed the region slots)
    parts = {"att_q": (1, db, b, 1, b), "att_k": (1, db, b, 1, b), "att_vt": (1, 1, d, 1, b),
             "att_pt": (1, 1, b, 1, b), "att_p": (1, 1, t, 1, b), "att_ctx": (1, db, t, 1, b)}
    sizes = [int(np.prod(shape)) // b for shape in parts.values()]
    room = S.scratch((sum(sizes) * b,), "int8", "att_scratch")
    offsets = np.cumsum([0] + sizes)
    qs, ks, vt, pt, ps, ctx = (room.view(name, int(off), shape)
                               for (name, shape), off in zip(parts.items(), offsets))
    eye = S.const(np.eye(b, dtype=np.int8), "att_identity")
    # Q and K: dense layers over all B token rows (Q is read as weight blocks), bias per column block
    for w, bias, scale, dst, name in ((p["wq"], p["bq"], s_q, qs, "q"), (p["wk"], p["bk"], s_k, ks, "k")):
        S.load(S.inp[0:db * b], X)
        S.load(S.wgt[0:db * db], w)
        S.load(acc[db * b:db * b + db], bias)
        out = _gemm(ring, f"att_{name}_uops", b, db, db, db, 1)
        S.add(out, acc[db * b:db * b + db], iters=(db, b), dst_factors=(b, 1), src_factors=(1, 0))
        _requant(out, scale, db * b + db)
        S.store(dst, out)
    # V^T = Wv X^T: Wv the input matrix, X the weight blocks; bias per row
    S.load(S.inp[0:db * d], p["wvt"])
    S.load(S.wgt[0:db], X)
    S.load(acc[d:2 * d], p["bvt"])
    out = _gemm(ring, "att_vt_uops", d, db, 1, 1, 1)
    S.add(out, acc[d:2 * d])
    _requant(out, s_v, 2 * d)
    S.store(vt, out)
    # P^T's padding rows stay zero: P's lanes beyond the keys multiply V^T's padding tokens
    if t < b:
        S.mov(acc[0:b - t], 0)
        S.store(pt, acc[0:b - t], offset=t)
    for head in range(heads):
        # S^T = K_h Q_h^T: T key vectors, the queries in the lanes
        S.load(S.inp[0:hb * t], ks, offset=head * hb * b, rows=hb, cols=t, stride=b)
        S.load(S.wgt[0:hb], qs, offset=head * hb, cols=hb)
        scores = _gemm(ring, "att_s_uops", t, hb, 1, 1, 1)
        _requant(scores, s_logit, softmax_rows(t), clip=False)
        probs = softmax_in_acc(0, t)
        S.store(pt, probs)
        # P = (P^T)^T: the identity inputs against P^T as a weight block
        S.load(S.inp[0:t], eye, cols=t)
        S.load(S.wgt[0:1], pt, cols=1)
        pmat = _gemm(ring, "att_t_uops", t, 1, 1, 1, 1)
        S.store(ps, pmat)
        # ctx_h = R(P V_h): V^T's rows of head h as weight blocks
        S.load(S.inp[0:t], ps)
        S.load(S.wgt[0:hb], vt, offset=head * hb, cols=hb)
        c = _gemm(ring, "att_pv_uops", t, 1, hb, 1, 1)
        _requant(c, s_ctx, hb * t)
        S.store(ctx, c, offset=head * hb * t)
    # Y = R(ctx Wo^T + bo)
    S.load(S.inp[0:db * t], ctx)
    S.load(S.wgt[0:db * db], p["wo"])
    S.load(acc[db * t:db * t + db], p["bo"])
    out = _gemm(ring, "att_o_uops", t, db, db, db, 1)
    S.add(out, acc[db * t:db * t + db], iters=(db, t), dst_factors=(t, 1), src_factors=(1, 0))
    _requant(out, s_out, db * t + db)
    S.store(Y, out)


# ---- host side: packing and the reference ---------------------------------------------------------
def attention_args(x: np.ndarray, weights: dict[str, np.ndarray], block: int) -> dict[str, np.ndarray]:
    """The kernel's packed tensors from natural ones: ``x`` ``(T, D)`` int8, ``weights`` wq, wk, wv, wo
    ``(D, D)`` int8 (out x in) and bq, bk, bv, bo ``(D,)`` int32."""
    t, d = x.shape
    if d % block:  # the packed kernel takes whole lane blocks, one block of tokens
        raise CompileError(f"attention: D={d} features must be a whole number of {block}-lane blocks")
    if not 1 <= t <= block:
        raise CompileError(f"attention: {t} tokens: the kernel takes 1..{block} (one {block}-lane block)")
    xp = np.zeros((block, d), dtype=np.int8)
    xp[:t] = x
    w = np.concatenate([P.pack_dense_weights(weights[k], block).reshape(-1) for k in ("wq", "wk", "wo")]
                       + [P.pack_matrix(weights["wv"], block).reshape(-1)])
    bias = np.concatenate([P.pack_bias(np.asarray(weights[k], dtype=np.int32), block) for k in ("bq", "bk", "bo")]
                          + [np.repeat(np.asarray(weights["bv"], dtype=np.int32), block)])
    return {"X": P.pack_matrix(xp, block), "W": w, "bias": bias}


def attention_reference(x: np.ndarray, weights: dict[str, np.ndarray], heads: int, scales: dict[str, float],
                        block: int | None = None) -> np.ndarray:
    """The composite on natural matrices in int64 numpy: ``(T, D)`` int8 in, ``(T, D)`` int32 out.
    ``block`` pads the tokens as the kernel does (the padding changes no output: default none)."""
    t, d = x.shape
    block = t if block is None else block
    dh = d // heads
    r8 = lambda v, s: np.clip(rescale(v, s), -128, 127)  # noqa: E731
    w = {k: np.asarray(v, dtype=np.int64) for k, v in weights.items()}
    xp = np.zeros((block, d), dtype=np.int64)
    xp[:t] = x
    q = r8(xp @ w["wq"].T + w["bq"], scales["s_q"])
    k = r8(xp @ w["wk"].T + w["bk"], scales["s_k"])
    v = r8(xp @ w["wv"].T + w["bv"], scales["s_v"])            # (B, D): V, the padding tokens too
    ctx = np.zeros((t, d), dtype=np.int64)
    for h in range(heads):
        cols = slice(h * dh, (h + 1) * dh)
        st = k[:t, cols] @ q[:, cols].T                        # (T keys, B queries)
        logits = rescale(st, scales["s_logit"])
        probs = softmax_reference(logits, n=t).reshape(t, block).astype(np.int64)   # P^T
        ctx[:, cols] = r8(probs.T[:t] @ v[:t, cols], scales["s_ctx"])
    return r8(ctx @ w["wo"].T + w["bo"], scales["s_out"]).astype(np.int32)
