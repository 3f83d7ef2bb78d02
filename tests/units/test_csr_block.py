"""The CSR block (hw/rtl/csr_block.v) on every level: the register config a Program carries.

Cases: every REGIONn slot in use; regions in another order than their tensors' use,
with a scratch region (read and write) that a STORE fills and a LOAD reads back (the
bytes of narrowed output vectors become accumulator lanes); the instruction stream
away from address 0; INSN_COUNT shorter than the instruction region (what follows is
never fetched). The RTL also runs them separated by CTRL.SOFT_RESET only: every
counter and STATUS read zero after it, and the next run's cycles are unchanged.
"""

from __future__ import annotations

import numpy as np

from hw.assembler import Assembler, with_regs
from hw.config import HwConfig, load_config
from tests.units.every_level import Case, level_tests, needs_rtl, problems, run_rtl
from tests.units.programs import narrow, random_vectors, relay


def every_region_slot(cfg: HwConfig) -> Case:
    """The instruction region plus max_regions - 1 tensors: inputs and outputs alternate."""
    n = cfg.max_regions - 1
    ins = (n + 1) // 2
    data = [random_vectors(cfg, 2, 70 + k, -500, 500) for k in range(ins)]
    asm = Assembler(cfg, "csr_every_region_slot")
    tensors = {}
    for k in range(n):
        j = k // 2
        tensors[k] = asm.input(f"in{j}", data[j]) if k % 2 == 0 else asm.output(f"out{j}", (2, cfg.lanes))
    outs = [t for k, t in tensors.items() if k % 2]
    for j in range(ins):
        asm.load(tensors[2 * j], x=2, sram=2 * j, push_next=j == ins - 1)
    relay(asm, pop_prev=True, push_next=True)
    for j, o in enumerate(outs):
        asm.store(o, x=2, sram=2 * ((j + 1) % ins), pop_prev=j == 0)
    asm.finish()
    p = asm.program(expected={o.name: narrow(cfg, data[(j + 1) % ins]) for j, o in enumerate(outs)})
    assert len(p.regions) == cfg.max_regions
    return Case(p)


def scratch_round_trip(cfg: HwConfig) -> Case:
    """STORE to a scratch region, LOAD it back (s2c then c2l order the two), STORE the result: the
    output region is declared first, so regions are not in the order the Program uses them."""
    ratio = cfg.acc_vec_bytes // cfg.out_vec_bytes   # output vectors per accumulator vector
    m = 2
    data = random_vectors(cfg, m * ratio, 75)
    asm = Assembler(cfg, "csr_scratch_round_trip")
    out = asm.output("out", (m, cfg.lanes))
    scratch = asm.tensor("scratch", "scratch", (m * ratio, cfg.lanes), asm.out_dtype)
    a = asm.input("a", data)
    asm.load(a, x=m * ratio, push_next=True)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(scratch, x=m * ratio, pop_prev=True, push_prev=True)
    relay(asm, pop_next=True, push_prev=True)
    asm.load(scratch, x=m, sram=m * ratio, pop_next=True, push_next=True)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out, x=m, sram=m * ratio, pop_prev=True)
    asm.finish()
    lanes = np.frombuffer(narrow(cfg, data).astype(np.dtype(asm.out_dtype).newbyteorder("<")).tobytes(),
                          dtype="<i4").reshape(m, cfg.lanes)
    return Case(asm.program(expected={"out": narrow(cfg, lanes)}))


def stream_not_at_zero(cfg: HwConfig) -> Case:
    """INSN_ADDR_LO points past address 0."""
    data = random_vectors(cfg, 3, 76)
    asm = Assembler(cfg, "csr_insn_addr_not_zero", insn_base=2 * cfg.region_align)
    a = asm.input("a", data)
    out = asm.output("out", (3, cfg.lanes))
    asm.load(a, x=3, push_next=True)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out, x=3, pop_prev=True)
    asm.finish()
    p = asm.program(expected={"out": narrow(cfg, data)})
    assert dict(p.regs)["INSN_ADDR_LO"] == 2 * cfg.region_align
    return Case(p)


def count_shorter_than_region(cfg: HwConfig) -> Case:
    """A garbage word after FINISH, outside INSN_COUNT: never fetched, the run is clean."""
    asm = Assembler(cfg, "csr_insn_count_short")
    out = asm.output("out", (1, cfg.lanes))
    asm.alu("MOV", imm=42, push_next=True)
    asm.store(out, pop_prev=True)
    asm.finish()
    asm.raw((1 << 128) - 1)
    p = asm.program(expected={"out": narrow(cfg, np.full((1, cfg.lanes), 42))})
    return Case(with_regs(p, INSN_COUNT=lambda n: n - 1))


def cases(cfg: HwConfig) -> list[Case]:
    return [every_region_slot(cfg), scratch_round_trip(cfg), stream_not_at_zero(cfg),
            count_shorter_than_region(cfg)]


CFG = load_config("default")
CASES = cases(CFG)
test_iss, test_tlm, rtl_results, test_rtl_matches_tlm = level_tests(CASES, CFG)


@needs_rtl
def test_soft_reset_between_programs(rtl_results):
    """CTRL.SOFT_RESET alone between Programs (the first still gets rst): STATUS, CYCLES, irq and every
    counter read zero after it, and each run gives the outputs, cycles and counters of a run after rst."""
    soft = run_rtl(CASES, CFG, between="soft", soft_reset_check=True)
    for c, s, h in zip(CASES, soft, rtl_results):
        assert not problems(c, s), problems(c, s)
        after = s.extra["after_soft_reset"]
        assert after["status"] == 0 and after["cycles"] == 0 and after["irq"] == 0, (c.name, after)
        assert not any(after["counters"].values()), (c.name, after)
        assert (s.cycles, s.counters) == (h.cycles, h.counters), c.name
