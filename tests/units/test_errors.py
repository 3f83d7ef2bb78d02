"""Every error path on every level: the code and ERR_PC each model reports, and (TLM, RTL) the
cycle at which DONE rises with ERROR and every counter up to it.

Cases: one per error class as the first RTL tests had them (DRAM and SRAM range, bad
opcode, reserved bits, an unloaded micro-op, a deadlock, an instruction window
outside the layout); every model-level entry of the fuzzer's invalid-inputs corpus
(cosim/fuzz/corpus.py); a STORE past its region that must write nothing; a range fault
while a multi-burst STORE is under way (the burst completes, CYCLES ends with it); a
misaligned INSN_ADDR; a load unit blocked pushing into a full token queue. A clean
Program runs last in the same RTL process: the hardware recovers from every fault.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hw.assembler import Assembler, patched, with_regs
from hw.config import HwConfig, load_config
from cosim.fuzz.corpus import model_entries
from tests.units.every_level import Case, level_tests
from tests.units.programs import narrow, vadd


def err_dram_range(cfg: HwConfig) -> Case:
    """Instruction 1 loads the vector just past the end of its input region; the output stays zero."""
    n = 2
    asm = Assembler(cfg, "err_dram_range")
    a = asm.input("a", np.arange(n * cfg.lanes, dtype=np.int32).reshape(n, cfg.lanes))
    asm.output("o", (1, cfg.lanes))
    asm.load(a, x=n)
    asm.load(a, offset=n, sram=n)
    asm.finish()
    return Case(asm.program(expected={"o": narrow(cfg, np.zeros((1, cfg.lanes)))}), ("DRAM_RANGE", 1))


def err_sram_range(cfg: HwConfig) -> Case:
    """An ALU whose destination walks past ACC_DEPTH (instruction 0)."""
    asm = Assembler(cfg, "err_sram_range")
    asm.output("o", (1, cfg.lanes))
    asm.alu("ADD", imm=1, iter_out=2, dst_base=cfg.acc_depth - 1, dst_factor_out=1)
    asm.finish()
    return Case(asm.program(), ("SRAM_RANGE", 0))


def err_bad_opcode(cfg: HwConfig) -> Case:
    """Instruction 1 has opcode 7 (unused)."""
    p = _without_expected(vadd(cfg, n=1, name="err_bad_opcode"))
    return Case(patched(p, {1: (p.isa.encode_word(p.insns[1]) & ~0x7) | 0x7}), ("BAD_OPCODE", 1))


def err_reserved_bits(cfg: HwConfig) -> Case:
    """FINISH (instruction 4) with its top bit set."""
    p = _without_expected(vadd(cfg, n=1, name="err_reserved"))
    return Case(patched(p, {4: p.isa.encode_word(p.insns[4]) | 1 << 127}), ("BAD_OPCODE", 4))


def err_unloaded(cfg: HwConfig) -> Case:
    """A GEMM (instruction 0) reads micro-op 0, which no LOAD wrote since START (its first iteration's
    A stage; tests/units/test_gemm.py has every GEMM fault)."""
    asm = Assembler(cfg, "err_unloaded")
    asm.output("o", (1, cfg.lanes))
    asm.gemm()
    asm.finish()
    return Case(asm.program(), ("UNLOADED", 0))


def err_deadlock(cfg: HwConfig) -> Case:
    """Compute (instruction 0) pops a load token nobody pushes."""
    asm = Assembler(cfg, "err_deadlock")
    asm.output("o", (1, cfg.lanes))
    asm.alu("ADD", imm=1, pop_prev=True)
    asm.finish()
    return Case(asm.program(), ("DEADLOCK", 0))


def err_insn_range(cfg: HwConfig) -> Case:
    """INSN_COUNT larger than the instruction region: the window leaves every region."""
    p = _without_expected(vadd(cfg, n=1, name="err_insn_range"))
    return Case(with_regs(p, INSN_COUNT=lambda n: n + 10_000), ("INSN_RANGE", 0))


def store_past_region_writes_nothing(cfg: HwConfig) -> Case:
    """A STORE whose last vector is past its output region: range-checked before it writes, so
    the part inside the region stays zero too."""
    asm = Assembler(cfg, "err_store_past_region")
    out = asm.output("out", (2, cfg.lanes))
    asm.alu("MOV", imm=3, iter_out=3, dst_factor_out=1, push_next=True)
    asm.store(out, x=3, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, np.zeros((2, cfg.lanes)))}), ("DRAM_RANGE", 1))


def fault_during_burst(cfg: HwConfig) -> Case:
    """An SRAM range fault while a multi-burst STORE is under way: the burst in flight completes."""
    x = min(cfg.acc_depth // 2, 4 * max(1, cfg.max_burst // cfg.beats_per_out_vec))
    asm = Assembler(cfg, "err_fault_during_burst")
    out = asm.output("out", (x, cfg.lanes))
    asm.store(out, x=x)
    asm.alu("ADD", imm=1, iter_in=2, dst_base=cfg.acc_depth - 1, dst_factor_in=1)
    asm.finish()
    return Case(asm.program(), ("SRAM_RANGE", 1))


def misaligned_insn_addr(cfg: HwConfig) -> Case:
    """INSN_ADDR_LO not a multiple of 16: refused at START."""
    asm = Assembler(cfg, "err_insn_addr_misaligned")
    asm.finish()
    asm.finish()
    return Case(with_regs(asm.program(), INSN_ADDR_LO=lambda a: a + 8), ("INSN_RANGE", 0))


def blocked_push(cfg: HwConfig) -> Case:
    """One l2c push more than the queue holds, and nobody pops: the load unit waits in PUSH forever."""
    d = cfg.token_queue_depth
    asm = Assembler(cfg, "err_deadlock_blocked_push")
    a = asm.input("a", np.zeros((1, cfg.lanes), np.int32))
    for _ in range(d + 1):
        asm.load(a, x=0, y=0, push_next=True)
    asm.finish()
    return Case(asm.program(), ("DEADLOCK", d))


def _without_expected(p):
    return dataclasses.replace(p, expected={})


def corpus_cases(cfg: HwConfig) -> list[Case]:
    """The model-level entries of the invalid-inputs corpus (their outputs are not the point)."""
    return [Case(_without_expected(dataclasses.replace(e.program, name=f"corpus_{e.name}")), (e.code, e.pc))
            for e in model_entries(cfg)]


def cases(cfg: HwConfig) -> list[Case]:
    return [err_dram_range(cfg), err_sram_range(cfg), err_bad_opcode(cfg), err_reserved_bits(cfg),
            err_unloaded(cfg), err_deadlock(cfg), err_insn_range(cfg), store_past_region_writes_nothing(cfg),
            fault_during_burst(cfg), misaligned_insn_addr(cfg), blocked_push(cfg), *corpus_cases(cfg),
            Case(vadd(cfg, n=3, name="after_errors"))]


CFG = load_config("default")
CASES = cases(CFG)
test_iss, test_tlm, rtl_results, test_rtl_matches_tlm = level_tests(CASES, CFG)
