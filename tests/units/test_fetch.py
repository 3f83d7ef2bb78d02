"""The fetch unit (hw/rtl/fetch.v) on every level: instruction bursts, in-order dispatch, dispatch checks.

Cases: a lone FINISH; streams of several fetch bursts; a stream that starts off 0 and
crosses a 4 KiB page (the burst is cut there); dispatch stalled by a full compute queue
and by a full load queue (in-order dispatch holds every later instruction); dispatch
alternating between the three queues; and the dispatch checks on raw words, alone and
combined (the first check in the order of docs/microarch.md wins), also while the
instruction's queue is full (a check does not wait for space).
"""

from __future__ import annotations

import numpy as np

from hw.assembler import Assembler, set_field
from hw.config import HwConfig, load_config
from hw.isa import Alu, Finish, Isa, Load, Store, with_opcode
from tests.units.every_level import Case, level_tests
from tests.units.programs import narrow, random_vectors, relay


def counted(cfg: HwConfig, name: str, adds: int, iters: int = 1, insn_base: int = 0) -> Case:
    """MOV 0 into acc[0], then ``adds`` ALUs each adding 1 ``iters`` times in place; STORE acc[0]."""
    asm = Assembler(cfg, name, insn_base=insn_base)
    out = asm.output("out", (1, cfg.lanes))
    asm.alu("MOV", imm=0)
    for _ in range(adds):
        asm.alu("ADD", imm=1, iter_in=iters)
    relay(asm, push_next=True)
    asm.store(out, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, np.full((1, cfg.lanes), adds * iters))}))


def finish_only(cfg: HwConfig) -> Case:
    asm = Assembler(cfg, "fetch_finish_only")
    asm.finish()
    return Case(asm.program())


def mixed_queues(cfg: HwConfig, tiles: int = 4) -> Case:
    """LOAD, ALU, STORE per tile: dispatch alternates between the three queues."""
    data = random_vectors(cfg, 2 * tiles, 41, -1000, 1000)
    asm = Assembler(cfg, "fetch_mixed_queues")
    a = asm.input("a", data)
    out = asm.output("out", (2 * tiles, cfg.lanes))
    for k in range(tiles):
        asm.load(a, x=2, offset=2 * k, sram=2 * k, push_next=True)
        asm.alu("ADD", imm=k, iter_out=2, dst_base=2 * k, dst_factor_out=1, pop_prev=True, push_next=True)
        asm.store(out, x=2, offset=2 * k, sram=2 * k, pop_prev=True)
    asm.finish()
    exp = data.astype(np.int64) + np.repeat(np.arange(tiles), 2)[:, None]
    return Case(asm.program(expected={"out": narrow(cfg, exp)}))


def full_load_queue(cfg: HwConfig) -> Case:
    """More LOADs than the load queue holds, each several bursts long: FETCH waits for a free
    slot, and the ALU and STORE behind them wait in order."""
    n = cfg.load_queue_depth + 2
    x = min(cfg.acc_depth // n, 3 * max(1, cfg.max_burst // cfg.beats_per_acc_vec))
    data = random_vectors(cfg, x, 42)
    asm = Assembler(cfg, "fetch_full_load_queue")
    a = asm.input("a", data)
    out = asm.output("out", (n * x, cfg.lanes))
    for k in range(n):
        asm.load(a, x=x, sram=k * x, push_next=k == n - 1)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out, x=n * x, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, np.tile(data, (n, 1)))}))


def bad_word(cfg: HwConfig, name: str, word: int, error: str, before: int = 1, iters: int = 1) -> Case:
    """``before`` ALUs (``iters`` iterations each), then the raw ``word``, then FINISH."""
    asm = Assembler(cfg, name)
    for _ in range(before):
        asm.alu("ADD", imm=0, iter_in=iters)
    pc = asm.raw(word)
    asm.finish()
    return Case(asm.program(), (error, pc))


def alu_op_word(cfg: HwConfig, op: int) -> int:
    """An ALU word whose op field says ``op`` (ops above 7 do not exist)."""
    isa = Isa(cfg)
    return set_field(isa, isa.encode_word(Alu()), "ALU", "alu_op", op)


def dispatch_checks(cfg: HwConfig) -> list[Case]:
    """One raw word per check, and words with several faults (the first check wins)."""
    isa = Isa(cfg)
    w = isa.encode_word

    def flag(insn, name: str) -> int:  # a dependency flag the encoder would refuse, set in the word
        return isa.set_field(w(insn), insn.MNEMONIC, name, 1)
    words = [("opcode_7", with_opcode(0, 7), "BAD_OPCODE"),
             ("opcode_6", with_opcode(w(Alu()), 6), "BAD_OPCODE"),
             ("reserved_bits", w(Finish()) | 1 << 100, "BAD_OPCODE"),
             ("load_pop_prev", flag(Load(), "pop_prev"), "BAD_FIELD"),
             ("store_push_next", flag(Store(), "push_next"), "BAD_FIELD"),
             ("alu_op_10", alu_op_word(cfg, 10), "BAD_OPCODE"),
             ("store_padding", w(Store(x_pad_0=1)), "BAD_FIELD"),
             ("store_from_inp", w(Store(buf=1)), "BAD_FIELD"),
             ("store_from_uop", w(Store(buf=3)), "BAD_FIELD"),
             # several faults in one word: flags before buffer, buffer before padding, reserved bits first
             ("load_buffer_3_pop_prev", flag(Load(buf=3), "pop_prev"), "BAD_FIELD"),
             ("store_buffer_3_push_next", flag(Store(buf=3), "push_next"), "BAD_FIELD"),
             ("store_buffer_3_padding", w(Store(buf=3, x_pad_0=1)), "BAD_FIELD"),
             ("load_into_inp_reserved_bits", w(Load(buf=1)) | 1 << 127, "BAD_OPCODE")]
    return [bad_word(cfg, f"dispatch_{n}", word, err) for n, word, err in words]


def cases(cfg: HwConfig) -> list[Case]:
    per_burst = max(1, cfg.max_burst // cfg.beats_per_insn)          # instructions per fetch burst
    past_page = 4096 // 16 + per_burst                               # a stream longer than a 4 KiB page
    return [
        finish_only(cfg),
        counted(cfg, "fetch_many_bursts", 3 * per_burst),
        counted(cfg, "fetch_page_crossing_stream", past_page, insn_base=cfg.region_align),
        counted(cfg, "fetch_full_compute_queue", cfg.compute_queue_depth + 3, iters=40),
        full_load_queue(cfg),
        mixed_queues(cfg),
        *dispatch_checks(cfg),
        bad_word(cfg, "dispatch_check_with_full_queue", alu_op_word(cfg, 12), "BAD_OPCODE",
                 before=cfg.compute_queue_depth + 1, iters=30),
    ]


CFG = load_config("default")
CASES = cases(CFG)
test_iss, test_tlm, rtl_results, test_rtl_matches_tlm = level_tests(CASES, CFG)
