"""The compute unit (hw/rtl/compute_unit.v, the vector ALU) on every level.

Each case LOADs known vectors, runs ALU instructions between two compute no-ops that
take the l2c token and give the c2s one, and STOREs the result: every op with a buffer
operand and an immediate (and their edge cases), the sequential semantics of the loop
nest (a write is seen by the next iteration: a prefix sum; a read ahead of the writes;
a broadcast source), a two-level affine walk (a transpose), loops with no iterations,
back-to-back chains, the last buffer entry, and the bench suite's long ALU loop.
"""

from __future__ import annotations

import numpy as np

from hw.assembler import Assembler
from hw.config import HwConfig, load_config
from cosim.bench.suite import alu_loop
from tests.units.every_level import Case, level_tests
from tests.units.programs import alu_between, alu_ops, alu_reference, narrow, random_vectors, relay


def prefix_sum(cfg: HwConfig) -> Case:
    """acc[d] += acc[d-1] for d = 1..n-1 in loop order: each iteration reads the previous one's write."""
    data = random_vectors(cfg, 8, 31)
    exp = data.copy()
    for d in range(1, len(exp)):
        exp[d] = alu_reference("ADD", exp[d], exp[d - 1])
    return Case(alu_between(cfg, "alu_prefix_sum", data, lambda asm: asm.alu(
        "ADD", iter_out=7, dst_base=1, src_base=0, dst_factor_out=1, src_factor_out=1), exp))


def read_ahead(cfg: HwConfig) -> Case:
    """acc[d] -= acc[d+1]: every source is read before the loop writes it (write after read)."""
    data = random_vectors(cfg, 6, 32)
    exp = data.copy()
    exp[:-1] = alu_reference("SUB", data[:-1], data[1:])
    return Case(alu_between(cfg, "alu_read_ahead", data, lambda asm: asm.alu(
        "SUB", iter_out=5, dst_base=0, src_base=1, dst_factor_out=1, src_factor_out=1), exp))


def broadcast(cfg: HwConfig) -> Case:
    """Every vector times acc[0] (source factors 0: one source vector for the whole loop)."""
    data = random_vectors(cfg, 5, 33, -3000, 3000)
    exp = data.copy()
    exp[1:] = alu_reference("MUL", data[1:], data[0])
    return Case(alu_between(cfg, "alu_broadcast_source", data, lambda asm: asm.alu(
        "MUL", iter_out=2, iter_in=2, dst_base=1, src_base=0, dst_factor_out=2, dst_factor_in=1), exp))


def transpose(cfg: HwConfig, rows: int = 3, cols: int = 4) -> Case:
    """MOV a rows x cols grid of vectors to cols x rows: both loop levels with their own factors."""
    n = rows * cols
    data = random_vectors(cfg, n, 34)
    exp = data.reshape(rows, cols, -1).transpose(1, 0, 2).reshape(n, -1)
    return Case(alu_between(cfg, "alu_transpose", data, lambda asm: asm.alu(
        "MOV", iter_out=rows, iter_in=cols, dst_base=n, src_base=0, dst_factor_out=1, dst_factor_in=rows,
        src_factor_out=cols, src_factor_in=1), exp, out_sram=n))


def no_iterations(cfg: HwConfig) -> Case:
    """Loops with no iterations (either level) touch nothing, wherever their bases point."""
    data = random_vectors(cfg, 3, 35)

    def body(asm: Assembler) -> None:
        asm.alu("ADD", imm=1, iter_out=0, iter_in=5, dst_factor_in=1)
        asm.alu("MOV", iter_out=4, iter_in=0, dst_base=cfg.acc_depth - 1, src_base=cfg.acc_depth - 1,
                dst_factor_out=1, src_factor_out=1)
    return Case(alu_between(cfg, "alu_no_iterations", data, body, data))


CHAIN = [("ADD", 5), ("MUL", -3), ("MAX", -100), ("SHR", 2), ("SUB", 7), ("CLIP", 50), ("MIN", 40)]


def chain(cfg: HwConfig) -> Case:
    """Back-to-back immediate ops on one 2-D tile (the unit's E + 3 period)."""
    data = random_vectors(cfg, 6, 36, -1000, 1000)
    exp = data.copy()
    for op, imm in CHAIN:
        exp = alu_reference(op, exp, imm)

    def body(asm: Assembler) -> None:
        for op, imm in CHAIN:
            asm.alu(op, imm=imm, iter_out=2, iter_in=3, dst_factor_out=3, dst_factor_in=1)
    return Case(alu_between(cfg, "alu_chain", data, body, exp))


EDGE_IMMS = [("ADD", -32768), ("SUB", 32767), ("MUL", -32768), ("SHR", -33), ("SHR", 33), ("SHR", -31),
             ("SHR", 31), ("CLIP", -32768), ("CLIP", 0), ("MIN", 32767), ("MAX", -32768), ("MOV", -1)]


def immediate_edges(cfg: HwConfig) -> Case:
    """The 16-bit immediate's edges, sign-extended: each op on a copy of the input."""
    data = random_vectors(cfg, 1, 37)
    data[0, :3] = [-2**31, 2**31 - 1, -1]
    k = len(EDGE_IMMS)

    def body(asm: Assembler) -> None:
        asm.alu("MOV", iter_out=k, dst_base=1, dst_factor_out=1, src_base=0)
        for j, (op, imm) in enumerate(EDGE_IMMS):
            asm.alu(op, imm=imm, dst_base=1 + j)
    exp = np.concatenate([alu_reference(op, data, imm) for op, imm in EDGE_IMMS])
    return Case(alu_between(cfg, "alu_immediate_edges", data, body, exp, out_sram=1))


def buffer_end(cfg: HwConfig) -> Case:
    """The last accumulator entry, as destination and source."""
    d = cfg.acc_depth - 1
    data = random_vectors(cfg, 1, 38)
    asm = Assembler(cfg, "alu_buffer_end")
    a = asm.input("a", data)
    out = asm.output("out", (1, cfg.lanes))
    asm.load(a, sram=d, push_next=True)
    asm.alu("ADD", iter_out=1, dst_base=d, src_base=d, pop_prev=True, push_next=True)
    asm.store(out, sram=d, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, alu_reference("ADD", data, data))}))


def empty_alus_amid_dma(cfg: HwConfig, seed: int = 41) -> Case:
    """ALU instructions without iterations (one EXEC cycle, no buffer port) among padded LOADs
    and STOREs whose padding runs and grants land in those cycles. Seed 41 on the default
    config puts one in the EXEC cycle of an empty ALU, which once made the TLM replan it and
    end the next instruction (FINISH) at a stale cycle."""
    rng = np.random.default_rng(seed)
    data = random_vectors(cfg, 24, 5, -3000, 3000)
    asm = Assembler(cfg, "alu_empty_amid_dma")
    a = asm.input("a", data)
    out = asm.output("out", (8, cfg.lanes))
    asm.load(a, x=8, push_next=True)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out, x=8, pop_prev=True)
    for k in range(int(rng.integers(2, 7))):
        asm.load(a, x=int(rng.integers(1, 3)), y=int(rng.integers(1, 5)), stride=2, offset=k, sram=16 + 8 * (k % 5),
                 x_pad_0=int(rng.integers(0, 3)), x_pad_1=int(rng.integers(0, 2)))
    for k in range(int(rng.integers(1, 7))):
        asm.store(out, x=1, y=int(rng.integers(1, 9)), stride=1, sram=k)
    for k in range(int(rng.integers(5, 40))):
        relay(asm)
        if rng.random() < 0.2:
            asm.alu("ADD", imm=1, iter_out=int(rng.integers(1, 4)), dst_base=60, dst_factor_out=1)
    asm.finish()
    return Case(asm.program())


def cases(cfg: HwConfig) -> list[Case]:
    return [
        Case(alu_ops(cfg)),
        prefix_sum(cfg),
        read_ahead(cfg),
        broadcast(cfg),
        transpose(cfg),
        no_iterations(cfg),
        chain(cfg),
        immediate_edges(cfg),
        buffer_end(cfg),
        Case(alu_loop(cfg, 8, min(64, cfg.acc_depth), "alu_bench_loop")),
        empty_alus_amid_dma(cfg),
    ]


CFG = load_config("default")
CASES = cases(CFG)
test_iss, test_tlm, rtl_results, test_rtl_matches_tlm = level_tests(CASES, CFG)
