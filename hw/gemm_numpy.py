"""GEMM's meaning in numpy, written once for the golden path and the TLM (the ISS walks GEMM on its own,
so a bug here shows up as an ISS-vs-TLM mismatch).

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


def _distinct(a: np.ndarray) -> bool:
    """Whether the indices ``a`` are all different (a set for a few, where sorting costs more)."""
    if a.size <= 64:
        return len(set(a.tolist())) == a.size
    return bool(np.unique(a).size == a.size)


def _scatter_add(acc: np.ndarray, a: np.ndarray, sums: np.ndarray) -> None:
    """``acc[a[n]] += sums[n]`` for every n (repeated indices summed), wrapping at 32 bits; ``sums``
    exact integers in float64 (every partial sum of int8 products stays far below 2**53)."""
    lanes = acc.shape[1]
    if a.size <= acc.shape[0] and _distinct(a):
        total = acc[a].astype(np.int64) + sums.astype(np.int64)
    else:
        flat = (a[:, None] * lanes + np.arange(lanes)).ravel()
        per = np.bincount(flat, weights=sums.ravel(), minlength=acc.size).reshape(acc.shape)
        a = np.unique(a)
        total = acc[a].astype(np.int64) + per[a].astype(np.int64)
    acc[a] = (total & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _apply_structured(acc: np.ndarray, inp: np.ndarray, wgt: np.ndarray, insn: Any, table: np.ndarray) -> None:
    """All iterations of a GEMM whose weight index does not depend on i (``wgt_factor_out == 0``, what
    a tiled matmul or convolution writes), as batched matrix products over the loop structure: per
    micro-op, the j loop and BLOCK_IN are one contraction when the accumulator index does not depend
    on j either (``acc_factor_in == 0``: input-channel blocks summed into one output)."""
    io, ii = insn.iter_out, insn.iter_in
    i = np.arange(io, dtype=np.int64)
    j = np.arange(ii, dtype=np.int64)
    xg = table[:, 1, None, None] + insn.inp_factor_out * i[None, :, None] + insn.inp_factor_in * j[None, None, :]
    wg = table[:, 2, None] + insn.wgt_factor_in * j[None, :]                      # (U, II)
    # gather the int8 entries first: converting whole buffers would cost more than the products
    xf = inp[xg].astype(np.float64)                                                # (U, IO, II, BK)
    wf = wgt[wg].astype(np.float64).transpose(0, 1, 3, 2)                          # (U, II, BK, BO)
    n_u, bk, bo = table.shape[0], wgt.shape[2], wgt.shape[1]
    if insn.acc_factor_in == 0:
        sums = xf.reshape(n_u, io, ii * bk) @ wf.reshape(n_u, ii * bk, bo)         # (U, IO, BO)
        ag = table[:, 0, None] + insn.acc_factor_out * i[None, :]
    else:
        sums = xf.transpose(0, 2, 1, 3) @ wf                                       # (U, II, IO, BO)
        ag = table[:, 0, None, None] + insn.acc_factor_in * j[None, :, None] + insn.acc_factor_out * i[None, None, :]
    _scatter_add(acc, ag.ravel(), sums.reshape(-1, bo))


def gemm_sum_ready(insn: Any, cfg: Any, uops: np.ndarray, uop_loaded: np.ndarray, wgt_loaded: np.ndarray) -> bool:
    """Whether GEMM ``insn`` is what :func:`run_gemm_sum` takes: a non-empty accumulating (no reset)
    tile whose weight index does not depend on i and that cannot fault on these valid bits."""
    if gemm_iterations(insn) == 0 or insn.reset or insn.wgt_factor_out:
        return False
    return _cannot_fault(insn, cfg, uops[insn.uop_begin:insn.uop_end], uop_loaded, wgt_loaded)


def run_gemm_sum(acc: np.ndarray, inps: np.ndarray, wgts: np.ndarray, uops: np.ndarray, insn: Any) -> None:
    """Add to ``acc`` (in place, wrapping at 32 bits) GEMM ``insn`` computed on each of K copies of
    the operand buffers, ``inps`` (K, INP_DEPTH, LANES) and ``wgts`` (K, WGT_DEPTH, BLOCK, BLOCK):
    the result of K :func:`run_gemm` calls, one per copy, when :func:`gemm_sum_ready` holds (the
    additions mod 2**32 commute, so the K copies' products are summed first, exactly in float64)."""
    table = uops[insn.uop_begin:insn.uop_end]
    io, ii = insn.iter_out, insn.iter_in
    i = np.arange(io, dtype=np.int64)
    j = np.arange(ii, dtype=np.int64)
    xg = table[:, 1, None, None] + insn.inp_factor_out * i[None, :, None] + insn.inp_factor_in * j[None, None, :]
    wg = table[:, 2, None] + insn.wgt_factor_in * j[None, :]                      # (U, II)
    xf = inps[:, xg].astype(np.float64)                                            # (K, U, IO, II, BK)
    wf = wgts[:, wg].astype(np.float64).transpose(0, 1, 2, 4, 3)                   # (K, U, II, BK, BO)
    K, n_u, bk, bo = inps.shape[0], table.shape[0], wgts.shape[3], wgts.shape[2]
    if insn.acc_factor_in == 0:
        sums = (xf.reshape(K, n_u, io, ii * bk) @ wf.reshape(K, n_u, ii * bk, bo)).sum(axis=0)  # (U, IO, BO)
        ag = table[:, 0, None] + insn.acc_factor_out * i[None, :]
    else:
        sums = (xf.transpose(0, 1, 3, 2, 4) @ wf).sum(axis=0)                     # (U, II, IO, BO)
        ag = table[:, 0, None, None] + insn.acc_factor_in * j[None, :, None] + insn.acc_factor_out * i[None, None, :]
    _scatter_add(acc, ag.ravel(), sums.reshape(-1, bo))


def gemm_products(inp: np.ndarray, wgt: np.ndarray, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``(N, BLOCK_OUT)`` float64 products ``inp[x[n]] . wgt[w[n]]^T`` of the iterations given flat."""
    return np.einsum("nk,nok->no", inp[x].astype(np.int32), wgt[w].astype(np.int32)).astype(np.float64)


def gemm_apply(acc: np.ndarray, inp: np.ndarray, wgt: np.ndarray, reset: bool, a: np.ndarray, x: np.ndarray,
               w: np.ndarray) -> None:
    """Apply the iterations ``(a, x, w)``, given flat in loop order, to ``acc`` in place (indices
    already checked)."""
    if a.size == 0:
        return
    if reset:
        acc[a] = 0
        return
    _scatter_add(acc, a, gemm_products(inp, wgt, x, w))


def _cannot_fault(insn: Any, cfg: Any, table: np.ndarray, uop_loaded: np.ndarray, wgt_loaded: np.ndarray) -> bool:
    """True when no iteration can fault, decided without walking them: every micro-op loaded, the
    highest index of every buffer (factors are unsigned) in range, and every weight block the walk
    can reach loaded (checked only when ``wgt_factor_out == 0``, the structured case)."""
    if not uop_loaded[insn.uop_begin:insn.uop_end].all():
        return False
    io, ii = insn.iter_out - 1, insn.iter_in - 1
    tops = [("acc", 0, cfg.acc_depth)] + ([] if insn.reset else [("inp", 1, cfg.inp_depth), ("wgt", 2, cfg.wgt_depth)])
    for name, col, depth in tops:
        top = int(table[:, col].max()) + io * getattr(insn, f"{name}_factor_out") + ii * getattr(insn, f"{name}_factor_in")
        if top >= depth:
            return False
    if insn.reset:
        return True
    if insn.wgt_factor_out:
        return False
    wg = table[:, 2, None] + insn.wgt_factor_in * np.arange(insn.iter_in, dtype=np.int64)[None, :]
    return bool(wgt_loaded[wg].all())


def run_gemm(acc: np.ndarray, inp: np.ndarray, wgt: np.ndarray, uops: np.ndarray, insn: Any, cfg: Any,
             uop_loaded: np.ndarray, wgt_loaded: np.ndarray) -> tuple[int, GemmFault | None]:
    """Execute one GEMM instruction on the buffers: ``(iterations applied, fault or None)``.

    The usual tile (no fault possible, weights independent of i) runs as batched matrix products
    over the loop structure without listing the iterations; anything else iteration by iteration
    (vectorised), which also finds the first fault."""
    n = gemm_iterations(insn)
    if n == 0:
        return 0, None
    table = uops[insn.uop_begin:insn.uop_end]
    if _cannot_fault(insn, cfg, table, uop_loaded, wgt_loaded):
        if insn.reset:
            u, a, x, w = gemm_indices(insn, uops)
            acc[a] = 0
        elif insn.wgt_factor_out == 0:
            _apply_structured(acc, inp, wgt, insn, table)
        else:
            u, a, x, w = gemm_indices(insn, uops)
            gemm_apply(acc, inp, wgt, False, a, x, w)
        return n, None
    u, a, x, w = gemm_indices(insn, uops)
    fault = gemm_first_fault(insn, cfg, u, a, x, w, uop_loaded, wgt_loaded)
    stop = a.size if fault is None else fault.iteration
    gemm_apply(acc, inp, wgt, insn.reset, a[:stop], x[:stop], w[:stop])
    return stop, fault
