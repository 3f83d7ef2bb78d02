"""The assembler (hw/assembler.py): layouts, tensor-relative DRAM addresses, raw words, register
overrides and its one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

from hw.assembler import Assembler, PatchedProgram, assemble, patched, set_field, with_regs
from hw.config import load_config
from hw.isa import Alu, Finish, Isa, Load, Store
from hw.program import Program, ProgramError, plan_layout


def test_same_program_as_by_hand(cfg):
    """Tensor-relative LOAD/STORE resolve to the addresses plan_layout gives for the final count."""
    L = cfg.lanes
    a = np.arange(3 * L, dtype=np.int32).reshape(3, L)
    asm = Assembler(cfg, "p")
    ta, tc = asm.input("a", a), asm.output("c", (5, L))
    asm.load(ta, x=2, offset=1, sram=4, push_next=True)
    asm.alu("ADD", imm=-2, iter_out=2, dst_base=4, dst_factor_out=1, pop_prev=True, push_next=True)
    asm.store(tc, x=2, offset=3, sram=4, pop_prev=True)
    asm.finish()
    p = asm.program()
    regions = plan_layout(cfg, [("a", "input", (3, L), "int32"), ("c", "output", (5, L), f"int{cfg.out_width}")], 4)
    va, vc = regions[1].addr // cfg.acc_vec_bytes, regions[2].addr // cfg.out_vec_bytes
    insns = [Load(sram_base=4, dram_base=va + 1, x_size=2, x_stride=2, push_next=True),
             Alu(use_imm=True, imm=-2, iter_out=2, dst_base=4, dst_factor_out=1, pop_prev=True, push_next=True),
             Store(sram_base=4, dram_base=vc + 3, x_size=2, x_stride=2, pop_prev=True), Finish()]
    q = Program.create(cfg, insns, regions, name="p", inputs={"a": a})
    assert p.insns == q.insns and p.regions == q.regions and p.regs == q.regs
    assert p.insn_bytes == q.insn_bytes and p.dram_image() == q.dram_image()
    assert type(p) is Program
    assert asm.address(ta) == regions[1].addr and asm.address(ta, insn_count=1000) > regions[1].addr


def test_absolute_addresses_and_assemble():
    cfg = load_config("default")
    insns = [Load(dram_base=7), Finish()]
    p = assemble(cfg, insns, [("a", "input", (1, cfg.lanes), "int32")], name="abs")
    assert p.insns == insns and p.name == "abs" and not p.inputs
    asm = Assembler(cfg)
    asm.store(12345, x=1)
    assert asm.instructions()[0].dram_base == 12345


def test_raw_words_and_patches():
    cfg = load_config("default")
    isa = Isa(cfg)
    asm = Assembler(cfg, "raw")
    asm.alu("MOV", imm=1)
    k = asm.raw(0x7)
    asm.finish()
    asm.patch(2, lambda w: w | 1 << 127)
    p = asm.program()
    assert isinstance(p, PatchedProgram) and p.patches == {1: 0x7, 2: isa.encode_word(Finish()) | 1 << 127}
    assert k == 1 and p.insns[1] == Finish()  # what the raw word stands for in listings
    words = [int.from_bytes(p.insn_bytes[16 * i:16 * i + 16], "little") for i in range(3)]
    assert words == [isa.encode_word(p.insns[0]), 0x7, isa.encode_word(Finish()) | 1 << 127]
    img = p.dram_image()
    assert img[16:32] == (0x7).to_bytes(16, "little")
    q = patched(p, {0: 0x5})  # patches accumulate
    assert q.patches == {0: 0x5, 1: 0x7, 2: p.patches[2]}
    assert set_field(isa, 0, "ALU", "alu_op", 0x1F) == 0xF << isa.field("ALU", "alu_op").lo  # cut to the width


def test_with_regs_keeps_the_program_and_its_class():
    cfg = load_config("default")
    asm = Assembler(cfg, "r")
    asm.finish()
    asm.raw(0x6)
    p = asm.program()
    q = with_regs(p, INSN_COUNT=1, INSN_ADDR_LO=lambda v: v + 16, name="r2")
    assert isinstance(q, PatchedProgram) and q.patches == p.patches and q.name == "r2"
    regs, old = dict(q.regs), dict(p.regs)
    assert regs["INSN_COUNT"] == 1 and regs["INSN_ADDR_LO"] == old["INSN_ADDR_LO"] + 16
    assert [n for n, _ in q.regs] == [n for n, _ in p.regs] and dict(p.regs)["INSN_COUNT"] == 2
    with pytest.raises(ProgramError, match="writes no TURBO"):
        with_regs(p, TURBO=1)


def test_errors_are_one_line():
    cfg = load_config("default")
    asm = Assembler(cfg, "e")
    t = asm.input("a", np.zeros((2, cfg.lanes), np.int32))
    for call, msg in [(lambda: asm.input("a", shape=(1, 1)), "tensor 'a' is declared twice"),
                      (lambda: asm.tensor("f", "input", (2,), "float32"), "unsupported dtype 'float32'"),
                      (lambda: asm.input("x"), "input 'x' needs data or a shape"),
                      (lambda: asm.add(Alu(), base=t), "only LOAD and STORE address DRAM"),
                      (lambda: asm.patch(3, 0), "no instruction 3 to patch"),
                      (lambda: asm.set_input("zz", np.zeros(1)), "no tensor named 'zz'")]:
        with pytest.raises(ProgramError, match=msg) as e:
            call()
        assert "\n" not in str(e.value)
    asm.load(t, x=3)  # one vector past the tensor: the assembler builds it, the models report it
    asm.finish()
    assert asm.program().insns[0].x_size == 3
