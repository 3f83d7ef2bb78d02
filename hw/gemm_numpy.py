"""GEMM's meaning in numpy, written once: the golden path, the ISS and the TLM all run it.

Semantics (``hw/isa.py``, docs/microarch.md "GEMM"): ``for i < iter_out: for j < iter_in: for
u in [uop_begin, uop_end):`` with micro-op ``uop[u] = (acc, inp, wgt)``,
``a = uop.acc + i*acc_factor_out + j*acc_factor_in`` (likewise ``x``, ``w``):
``acc[a] = 0`` when ``reset`` else ``acc[a] += inp[x] . wgt[w]^T`` (int8 x int8 into int32 lanes,
wrapping at 32 bits), in loop order. Because the only read-modify-write is an addition mod
2**32, loop order does not change the result, so one instruction is applied with a handful of
numpy calls whatever its length (``np.add.at`` sums repeated accumulator indices).

Faults, checked per iteration in loop order (the RTL checks iteration k in the cycle it reads
its operands; every model stops at the first): the micro-op was never loaded since START
(``ERR_UNLOADED``); ``a >= ACC_DEPTH``, or without reset ``x >= INP_DEPTH`` or ``w >= WGT_DEPTH``
(``ERR_SRAM_RANGE``); without reset the weight block ``w`` was never loaded (``ERR_UNLOADED``).
The iterations before the faulting one are applied, the faulting one and later are not.

Buffers as the models hold them: ``acc`` (ACC_DEPTH, LANES) int32, ``inp`` (INP_DEPTH, LANES)
int8, ``wgt`` (WGT_DEPTH, BLOCK, BLOCK) int8 (row o = the weights of output lane o), ``uops``
(UOP_DEPTH, 3) int64 (acc, inp, wgt). BATCH is 1 (a config rule), so LANES = BLOCK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hw import csr
from hw.isa_semantics import affine_indices


def gemm_uop_count(insn: Any) -> int:
    """Micro-ops one (i, j) iteration walks: ``max(0, uop_end - uop_begin)``."""
    return max(0, insn.uop_end - insn.uop_begin)


def gemm_iterations(insn: Any) -> int:
    """N = iter_out * iter_in * micro-ops: the blocks a GEMM computes (or zeroes)."""
    return insn.iter_out * insn.iter_in * gemm_uop_count(insn)


def gemm_uop_range_bad(insn: Any, uop_depth: int) -> bool:
    """The static check of a GEMM's WAIT: a non-empty loop names micro-ops past the buffer
    (``uop_end > UOP_DEPTH``) -> ``ERR_SRAM_RANGE`` before anything runs."""
    return gemm_iterations(insn) > 0 and insn.uop_end > uop_depth


def gemm_indices(insn: Any, uops: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(u, a, x, w)``: micro-op, accumulator, input and weight index of every iteration in loop
    order (int64; ``uops`` the whole micro-op buffer, rows (acc, inp, wgt))."""
    n_u = gemm_uop_count(insn)
    u = np.arange(insn.uop_begin, insn.uop_begin + n_u, dtype=np.int64)
    io, ii = insn.iter_out, insn.iter_in
    if n_u == 0 or io * ii == 0:
        e = np.zeros(0, dtype=np.int64)
        return e, e, e, e
    table = uops[u]  # (n_u, 3)
    off = {k: affine_indices(0, io, ii, getattr(insn, f"{k}_factor_out"), getattr(insn, f"{k}_factor_in"))
           for k in ("acc", "inp", "wgt")}
    a = (off["acc"][:, None] + table[None, :, 0]).ravel()
    x = (off["inp"][:, None] + table[None, :, 1]).ravel()
    w = (off["wgt"][:, None] + table[None, :, 2]).ravel()
    return np.tile(u, io * ii), a, x, w


@dataclass(frozen=True)
class GemmFault:
    """The first faulting iteration of a GEMM: its index in loop order, error code and message."""

    iteration: int
    code: int
    message: str


def _first(mask: np.ndarray) -> int:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else -1


def gemm_first_fault(insn: Any, cfg: Any, u: np.ndarray, a: np.ndarray, x: np.ndarray, w: np.ndarray,
                     uop_loaded: np.ndarray, wgt_loaded: np.ndarray) -> GemmFault | None:
    """The first iteration (loop order) that faults, None when none does (module docstring)."""
    if a.size == 0:
        return None
    checks = [(~uop_loaded[u], csr.ERR_UNLOADED, lambda k: f"micro-op {u[k]} was never loaded")]
    if insn.reset:
        checks.append((a >= cfg.acc_depth, csr.ERR_SRAM_RANGE,
                       lambda k: f"accumulator index {a[k]} >= ACC_DEPTH {cfg.acc_depth}"))
    else:
        bad = (a >= cfg.acc_depth) | (x >= cfg.inp_depth) | (w >= cfg.wgt_depth)

        def range_text(k: int) -> str:
            for name, v, depth in (("accumulator", a[k], cfg.acc_depth), ("input", x[k], cfg.inp_depth),
                                   ("weight", w[k], cfg.wgt_depth)):
                if v >= depth:
                    return f"{name} index {v} >= {name.upper()[:3]}_DEPTH {depth}"
            return ""
        checks.append((bad, csr.ERR_SRAM_RANGE, range_text))
        unloaded = np.zeros(a.size, dtype=bool)
        ok = ~bad
        unloaded[ok] = ~wgt_loaded[w[ok]]
        checks.append((unloaded, csr.ERR_UNLOADED, lambda k: f"weight block {w[k]} was never loaded"))
    # per iteration the checks run in this order; across iterations the earliest wins
    best: GemmFault | None = None
    for mask, code, text in checks:
        k = _first(mask)
        if k >= 0 and (best is None or k < best.iteration):
            best = GemmFault(k, code, f"GEMM iteration {k}: {text(k)}")
    return best


# float32 holds a sum of int8 x int8 products exactly while it stays below 2**24 (each product is at
# most 2**14 in magnitude), float64 below 2**53; either runs the products on BLAS, several times
# faster than numpy's integer einsum.
_F32_EXACT_TERMS = 1 << 10
# Below this many iterations the batched products' set-up costs more than it saves (measured).
_BATCHED_MIN = 256
# At most this many weight groups (distinct weight offsets of the (i, j) iterations), each one
# matrix product; more and the weights are gathered per iteration instead.
_MAX_WEIGHT_GROUPS = 64
# Below this many iterations numpy's unbuffered add beats sorting the repeated indices.
_SORTED_SUM_MIN = 128
# OpenBLAS runs a product of M x K by K x N on one thread below M*N*K = 4 * 65536; its threads
# busy-wait, which costs 5-10x on a loaded machine, so large products are cut into a stack of
# single-threaded ones (numpy calls BLAS once per matrix of a stack).
_ONE_THREAD_MNK = 4 * 65536 - 1


def _float_for(terms: int) -> type:
    """The float type whose sums of ``terms`` int8 x int8 products are exact."""
    return np.float32 if terms <= _F32_EXACT_TERMS else np.float64


def gemm_products(inp: np.ndarray, wgt: np.ndarray, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``inp[x[n]] . wgt[w[n]]^T`` for every iteration n: ``(n, BLOCK_OUT)`` int32 (exact)."""
    ft = _float_for(inp.shape[1])
    xs, ws = inp[x].astype(ft), wgt[w].astype(ft)
    return np.matmul(ws, xs[..., None])[..., 0].astype(np.int32)


def _matmul_one_thread(xs: np.ndarray, ws: np.ndarray) -> np.ndarray:
    """``xs @ ws`` (``(M, K) @ (K, N)``) as BLAS products small enough to run on one thread each."""
    m, k = xs.shape
    chunk = max(1, _ONE_THREAD_MNK // (k * ws.shape[1]))
    whole = m // chunk * chunk
    if whole <= chunk:
        return np.matmul(xs, ws)
    out = np.empty((m, ws.shape[1]), dtype=np.result_type(xs, ws))
    out[:whole] = np.matmul(xs[:whole].reshape(-1, chunk, k), ws).reshape(whole, -1)
    if whole < m:
        out[whole:] = np.matmul(xs[whole:], ws)
    return out


def gemm_accumulate(acc: np.ndarray, a: np.ndarray, prod: np.ndarray) -> None:
    """``acc[a[n]] += prod[n]`` for every n, repeated indices summed, wrapping at 32 bits."""
    if np.bincount(a).max() <= 1:
        acc[a] += prod  # int32 arithmetic wraps
        return
    if a.size < _SORTED_SUM_MIN:
        np.add.at(acc, a, prod)
        return
    order = np.argsort(a, kind="stable")
    sa = a[order]
    starts = np.flatnonzero(np.concatenate(([True], sa[1:] != sa[:-1])))
    sums = np.add.reduceat(prod[order].astype(np.int64), starts, axis=0)
    acc[sa[starts]] += (sums & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _apply_rows(acc: np.ndarray, inp: np.ndarray, wgt: np.ndarray, a2: np.ndarray, x2: np.ndarray,
                w2: np.ndarray) -> bool:
    """Whole (i, j) iterations (rows of the micro-op loop, ``(rows, uops)`` index arrays) applied as
    a few batched matrix products; False (nothing done) when their structure does not allow it.

    Rows differ by one offset per (i, j) in each index (:func:`gemm_indices`), so the rows with
    one weight offset (a weight group) read the same weight blocks. The micro-ops of a row form C
    runs of G with one accumulator index per run (a convolution row: one output pixel per run, its
    taps and input channel blocks inside; G = 1 when the indices differ): a weight group is then
    ``(rows * C, G * BLOCK_IN) @ (G * BLOCK_IN, BLOCK_OUT)`` when every run reads the same weight
    blocks (which also sums each run), and with a single weight group, ``(C, rows, G * BLOCK_IN) @
    (C, G * BLOCK_IN, BLOCK_OUT)`` when they differ."""
    rows, row = a2.shape
    if rows * row < _BATCHED_MIN:
        return False
    # G: the longest run length dividing the row with one accumulator index per run
    bounds = np.flatnonzero(a2[0, 1:] != a2[0, :-1]) + 1
    g = int(np.gcd.reduce(np.concatenate(([row], bounds))))
    c = row // g
    wrun = w2[0].reshape(c, g)
    shared = bool((wrun == wrun[:1]).all())  # every run reads the same weight blocks
    woff = w2[:, 0] - w2[0, 0]
    single = bool((woff == 0).all())
    if not (shared or single):
        return False  # a batch of small products per weight group costs more than the gather (measured)
    if not (np.array_equal(w2 - woff[:, None], np.broadcast_to(w2[0], w2.shape)) and
            np.array_equal(a2 - a2[:, :1], np.broadcast_to(a2[0] - a2[0, 0], a2.shape))):
        return False
    keys, group = (woff[:1], None) if single else np.unique(woff, return_inverse=True)
    if len(keys) > _MAX_WEIGHT_GROUPS:
        return False
    blk_in, blk_out = inp.shape[1], wgt.shape[1]
    ft = _float_for(g * blk_in)
    for k, key in enumerate(keys):
        sel = slice(None) if group is None else np.flatnonzero(group == k)
        xk, ak = x2[sel], a2[sel][:, ::g]
        if shared:
            xs = inp[xk].astype(ft).reshape(-1, g * blk_in)                                   # (m*C, G*BLOCK_IN)
            ws = wgt[wrun[0] + key].astype(ft).transpose(0, 2, 1).reshape(g * blk_in, blk_out)
            out, at = _matmul_one_thread(xs, ws), ak.ravel()                                # (m*C, BLOCK_OUT)
        else:
            xs = inp[xk.reshape(-1, c, g).transpose(1, 0, 2)].astype(ft).reshape(c, -1, g * blk_in)  # (C, m, G*BI)
            ws = wgt[w2[0] + key].astype(ft).transpose(0, 2, 1).reshape(c, g * blk_in, blk_out)
            out, at = np.matmul(xs, ws).reshape(-1, blk_out), ak.T.ravel()                  # (C*m, BLOCK_OUT)
        gemm_accumulate(acc, at, out.astype(np.int32))
    return True


def gemm_apply(acc: np.ndarray, inp: np.ndarray, wgt: np.ndarray, reset: bool, a: np.ndarray, x: np.ndarray,
               w: np.ndarray, row: int = 0) -> None:
    """Apply the iterations ``(a, x, w)`` to ``acc`` in place (indices already checked).

    ``row`` > 0 says that they are whole (i, j) iterations of ``row`` micro-ops each, in loop order
    from the first (as :func:`gemm_indices` gives them, possibly cut after any iteration): the
    whole rows then run as a few large matrix products when their structure allows
    (:func:`_apply_rows`), the rest iteration by iteration. The order of the additions does not
    change the result (addition modulo 2**32)."""
    if a.size == 0:
        return
    if reset:
        acc[a] = 0
        return
    done = 0
    rows = a.size // row if row else 0
    if rows:
        n = rows * row
        if _apply_rows(acc, inp, wgt, a[:n].reshape(rows, row), x[:n].reshape(rows, row), w[:n].reshape(rows, row)):
            done = n
    if done < a.size:
        gemm_accumulate(acc, a[done:], gemm_products(inp, wgt, x[done:], w[done:]))


def run_gemm(acc: np.ndarray, inp: np.ndarray, wgt: np.ndarray, uops: np.ndarray, insn: Any, cfg: Any,
             uop_loaded: np.ndarray, wgt_loaded: np.ndarray) -> tuple[int, GemmFault | None]:
    """Execute one GEMM instruction on the buffers: ``(iterations applied, fault or None)``."""
    u, a, x, w = gemm_indices(insn, uops)
    fault = gemm_first_fault(insn, cfg, u, a, x, w, uop_loaded, wgt_loaded)
    stop = a.size if fault is None else fault.iteration
    gemm_apply(acc, inp, wgt, insn.reset, a[:stop], x[:stop], w[:stop], gemm_uop_count(insn))
    return stop, fault
