"""Hand-built Programs for the mutation regression: each aims at one edge of the RTL that generated
Programs rarely reach (a range check at exactly the buffer's depth, a shift by exactly -32, a
micro-op one past the loaded ones, FINISH waiting for a unit that never drains).

Each is written with :class:`hw.assembler.Assembler`; the faulty ones carry ``meta["fault"]`` (the
kind) so the campaign's baseline compares their error code and pc with the TLM, the valid ones
carry their golden outputs.
"""

from __future__ import annotations

import numpy as np

from hw.assembler import Assembler
from hw.config import HwConfig
from hw.program import Program


def shift_edges(cfg: HwConfig) -> Program:
    """SHR by immediates around the shift range's ends (-33, -32, -31, 31, 32, 33), one row each:
    a shift by -32 or less gives 0, by 32 or more the sign; exactly at the bounds both rules meet."""
    imms = [-33, -32, -31, 31, 32, 33]
    n = len(imms)
    rng = np.random.default_rng(5)
    x = rng.integers(-(1 << 31), 1 << 31, size=(n, cfg.lanes), dtype=np.int64).astype(np.int32)
    x[:, 0] = 1                      # a left shift of 1 shows whether anything moved
    asm = Assembler(cfg, "edge-shr")
    a = asm.input("a", x)
    c = asm.output("c", (n, cfg.lanes))
    asm.load(a, x=n, push_next=True)
    for k, imm in enumerate(imms):
        asm.alu("SHR", imm=imm, dst_base=k, pop_prev=(k == 0), push_next=(k == n - 1))
    asm.store(c, x=n, pop_prev=True)
    asm.finish()
    return asm.program(expected={"c": _narrow(cfg, np.stack([_shr(x[k], s) for k, s in enumerate(imms)]))})


def _shr(v: np.ndarray, s: int) -> np.ndarray:
    """The ISA's SHR of int32 lanes by ``s`` (negative: left), shifts past 31 saturating."""
    v64 = v.astype(np.int64)
    if s >= 0:
        return (v64 >> min(s, 31)).astype(np.int32)
    if s < -31:
        return np.zeros_like(v)
    return ((v64 << -s) & 0xFFFFFFFF).astype(np.uint32).astype(np.int32)


def _narrow(cfg: HwConfig, v: np.ndarray) -> np.ndarray:
    """STORE's narrowing: each lane's low OUT_WIDTH bits, as the output dtype."""
    return v.astype(f"int{cfg.out_width}")


def gemm_range_edge(cfg: HwConfig, which: str) -> Program:
    """A GEMM whose second iteration's ``which`` index (acc or inp) is exactly the buffer's depth:
    SRAM_RANGE in EXEC (the first iteration is in range; its weight block is loaded, so a range check
    that lets the index through shows as no error at all)."""
    depth = {"acc": cfg.acc_depth, "inp": cfg.inp_depth}[which]
    uop = {"acc": (depth - 1, 0, 0), "inp": (0, depth - 1, 0)}[which]
    asm = Assembler(cfg, f"edge-gemm-{which}", meta={"fault": "sram_range"})
    u = asm.uops("u", [uop])
    w = asm.input("w", np.ones((1, cfg.elem_bytes("WGT")), dtype=np.int8))
    asm.load(w, x=1, buf="WGT")     # weight block 0 loaded: the fault is the range, not UNLOADED
    asm.load(u, x=1, buf="UOP", push_next=True)
    asm.gemm(uop_begin=0, uop_end=1, iter_out=1, iter_in=2, pop_prev=True, **{f"{which}_factor_in": 1})
    asm.finish()
    return asm.program()


def alu_src_edge(cfg: HwConfig) -> Program:
    """An ALU whose source index reaches exactly the accumulator's depth in its second iteration (its
    destination stays inside): SRAM_RANGE in WAIT."""
    asm = Assembler(cfg, "edge-alu-src", meta={"fault": "sram_range"})
    asm.alu("ADD", iter_in=2, dst_base=0, dst_factor_in=1, src_base=cfg.acc_depth - 2, src_factor_in=2)
    asm.finish()
    return asm.program()


def uop_past_loaded(cfg: HwConfig) -> Program:
    """Two micro-ops loaded at 0 and 1, then a reset GEMM over micro-ops 0..2: the third was never
    loaded (UNLOADED), however the LOAD's write enable behaves after its last entry."""
    asm = Assembler(cfg, "edge-uop-unloaded", meta={"fault": "unloaded"})
    u = asm.uops("u", [(0, 0, 0), (1, 0, 0)])
    asm.load(u, x=2, buf="UOP", push_next=True)
    asm.gemm(reset=True, uop_begin=0, uop_end=3, iter_out=1, iter_in=1, pop_prev=True)
    asm.finish()
    return asm.program()


def finish_waits_for_store(cfg: HwConfig) -> Program:
    """A STORE that pops a token COMPUTE never pushes, and FINISH: FINISH waits in EXEC for the STORE
    to drain, the STORE waits in WAIT for ever; the deadlock check must see COMPUTE's EXEC as stuck."""
    asm = Assembler(cfg, "edge-finish-deadlock", meta={"fault": "deadlock"})
    c = asm.output("c", (1, cfg.lanes))
    asm.store(c, x=1, pop_prev=True)
    asm.finish()
    return asm.program()


def no_iterations(cfg: HwConfig) -> Program:
    """A GEMM and an ALU with no iterations (a zero loop count) whose other fields would be out of range
    (micro-ops past the buffer, indices past the accumulator): no iteration, so no error."""
    asm = Assembler(cfg, "edge-no-iterations")
    asm.gemm(uop_begin=0, uop_end=cfg.uop_depth + 1, iter_out=0, iter_in=1)
    asm.alu("ADD", iter_out=0, iter_in=3, dst_base=cfg.acc_depth - 1, dst_factor_in=5, src_base=cfg.acc_depth - 1,
            src_factor_in=5)
    asm.finish()
    return asm.program()


def alu_back_to_back(cfg: HwConfig) -> Program:
    """Three ALU instructions in a row on different rows (ADD 1 on rows 0-3, ADD 10 on rows 4-7, then
    SUB rows 4-7 from rows 0-3): an instruction's first cycle must not redo the previous one's last
    write (its iteration state cleared at each start), and each must read what the one before wrote."""
    n = 8
    rng = np.random.default_rng(9)
    x = rng.integers(-1000, 1000, size=(n, cfg.lanes)).astype(np.int32)
    y = x.copy()
    y[:4] += 1
    y[4:] += 10
    y[:4] -= y[4:]
    asm = Assembler(cfg, "edge-alu-back-to-back")
    a = asm.input("a", x)
    c = asm.output("c", (n, cfg.lanes))
    asm.load(a, x=n, push_next=True)
    asm.alu("ADD", imm=1, iter_out=4, dst_factor_out=1, pop_prev=True)
    asm.alu("ADD", imm=10, iter_out=4, dst_base=4, dst_factor_out=1)
    asm.alu("SUB", iter_out=4, dst_factor_out=1, src_base=4, src_factor_out=1, push_next=True)
    asm.store(c, x=n, pop_prev=True)
    asm.finish()
    return asm.program(expected={"c": _narrow(cfg, y)})


def clip_wide_bound(cfg: HwConfig) -> Program:
    """CLIP by a register operand above 2**30 of values just above its negative: the lower bound -s
    then has bit 30 clear, so a bit of the negated operand held wrong moves the lower bound and the
    result (row 0 clipped by row 1; the other lanes random, with small and negative bounds)."""
    rng = np.random.default_rng(11)
    x = rng.integers(-(1 << 31), 1 << 31, size=(2, cfg.lanes), dtype=np.int64)
    x[1, :] = np.abs(x[1, :]) % (1 << 31)
    big = (1 << 30) + 5
    x[1, 0], x[0, 0] = big, -big + 1             # inside the bound: stays
    if cfg.lanes > 1:
        x[1, 1], x[0, 1] = big + 7, -big - 100   # below the lower bound: clipped to it
    if cfg.lanes > 2:
        x[1, 2], x[0, 2] = -3, 12                # a negative bound: the result is the bound
    x = x.astype(np.int32)
    lo = -x[1].astype(np.int64)
    y = np.minimum(np.maximum(x[0].astype(np.int64), lo), x[1].astype(np.int64))
    y = ((y + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)
    asm = Assembler(cfg, "edge-clip-wide")
    a = asm.input("a", x)
    c = asm.output("c", (1, cfg.lanes))
    asm.load(a, x=2, push_next=True)
    asm.alu("CLIP", dst_base=0, src_base=1, pop_prev=True, push_next=True)
    asm.store(c, x=1, pop_prev=True)
    asm.finish()
    return asm.program(expected={"c": _narrow(cfg, y[None, :])})


def no_finish(cfg: HwConfig) -> Program:
    """A stream without FINISH (an ALU, then the window ends): every unit idles with an empty queue
    and the fetch has nothing left, so the deadlock check fires with no unit blocked, and ERR_PC is
    INSN_COUNT (docs/microarch.md), not a blocked unit's pc."""
    asm = Assembler(cfg, "edge-no-finish", meta={"fault": "deadlock"})
    asm.alu("ADD", imm=1, dst_base=0)
    asm.alu("ADD", imm=2, dst_base=1)
    return asm.program()


def error_before_fetch_ends(cfg: HwConfig) -> Program:
    """An ALU whose source index is past the accumulator (SRAM_RANGE in WAIT, pc 0), then more ALU
    instructions and FINISH: the error comes while the fetch's second burst is still under way. Run
    with an error response injected on that burst (the campaign's ``late-error`` variant), the later
    AXI error must not replace the first error (only the first error cycle's sources are latched)."""
    asm = Assembler(cfg, "edge-error-before-fetch-ends", meta={"fault": "sram_range"})
    asm.alu("ADD", dst_base=0, src_base=cfg.acc_depth)
    for k in range(5):
        asm.alu("ADD", imm=k + 1, dst_base=k)
    asm.finish()
    return asm.program()


def two_stores_then_finish(cfg: HwConfig) -> Program:
    """Two STOREs back to back, the first waiting for COMPUTE's token, then FINISH: FINISH waits in EXEC
    for the drain while the first STORE runs and the second sits in the store queue; the cycle the
    first one ends, the store unit is idle with that queue not empty, which is not drained."""
    n = 4
    x = np.random.default_rng(13).integers(-100, 100, size=(n, cfg.lanes)).astype(np.int32)
    asm = Assembler(cfg, "edge-two-stores-then-finish")
    a = asm.input("a", x)
    c1 = asm.output("c1", (n, cfg.lanes))
    c2 = asm.output("c2", (n, cfg.lanes))
    asm.load(a, x=n, push_next=True)
    asm.alu("ADD", imm=0, iter_out=n, dst_factor_out=1, pop_prev=True, push_next=True)
    asm.store(c1, x=n, pop_prev=True)
    asm.store(c2, x=n)
    asm.finish()
    return asm.program(expected={"c1": _narrow(cfg, x), "c2": _narrow(cfg, x)})


def edge_programs(cfg: HwConfig) -> list[Program]:
    """Every edge Program that fits ``cfg`` (one core)."""
    if cfg.num_cores != 1:
        return []
    return [shift_edges(cfg), gemm_range_edge(cfg, "acc"), gemm_range_edge(cfg, "inp"), alu_src_edge(cfg),
            uop_past_loaded(cfg), finish_waits_for_store(cfg), no_iterations(cfg), alu_back_to_back(cfg),
            clip_wide_bound(cfg), no_finish(cfg), error_before_fetch_ends(cfg),
            two_stores_then_finish(cfg)]
