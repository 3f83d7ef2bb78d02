"""The ISA: encode/decode round trip (property-based), range errors, unknown opcodes, disassembly."""

from __future__ import annotations

from dataclasses import fields

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hw.config import list_configs, load_config
from hw.isa import (ALU_OPS, INSN_BYTES, INSN_CLASSES, OPCODES, Alu, Finish, Gemm, Isa, IsaError, Load, Store)
from hw.isa_semantics import DEP_FLAGS

CONFIGS = [load_config(n) for n in list_configs()]
# An Isa is a function of the buffer and micro-op index widths alone (the name only appears in its
# errors): the property-based round trip runs once per distinct pair, on the first config that has it.
ISA_CONFIGS = list({(c.sram_index_bits, Isa(c).uop_index_bits): c for c in reversed(CONFIGS)}.values())[::-1]
FLAGS = DEP_FLAGS


def _field_strategy(f):
    if f.width == 1:
        return st.booleans()
    return st.integers(f.lo_value, f.hi_value)


@st.composite
def instructions(draw, isa: Isa, mnemonic: str):
    """Any instruction of a class that passes Isa.check (so that it also decodes)."""
    cls = INSN_CLASSES[mnemonic]
    kw = {}
    for f in isa.layouts[mnemonic]:
        if f.name == "opcode":
            continue
        kw[f.name] = draw(_field_strategy(f))
    if mnemonic == "LOAD":
        kw.update(pop_prev=False, push_prev=False, buf=draw(st.sampled_from([0, 1, 2])))
    if mnemonic == "STORE":
        kw.update(pop_next=False, push_next=False, buf=0, y_pad_0=0, y_pad_1=0, x_pad_0=0, x_pad_1=0)
    if mnemonic == "ALU":
        kw["alu_op"] = draw(st.sampled_from(sorted(ALU_OPS.values())))
    return cls(**kw)


def test_configs_of_one_index_width_pair_have_one_isa():
    """What lets the round trip run on ISA_CONFIGS only: configs with the same index widths encode alike."""
    for c in CONFIGS:
        twin = next(t for t in ISA_CONFIGS if (t.sram_index_bits, Isa(t).uop_index_bits)
                    == (c.sram_index_bits, Isa(c).uop_index_bits))
        assert Isa(c).layouts == Isa(twin).layouts, (c.name, twin.name)
    assert len(ISA_CONFIGS) >= 2  # the shipped configs have more than one ISA


@pytest.mark.parametrize("cfg", ISA_CONFIGS, ids=[c.name for c in ISA_CONFIGS])
@pytest.mark.parametrize("mnemonic", list(OPCODES))
def test_round_trip(cfg, mnemonic):
    isa = Isa(cfg)

    @settings(max_examples=1000, deadline=None, database=None)
    @given(instructions(isa, mnemonic))
    def check(insn):
        raw = isa.encode(insn)
        assert len(raw) == INSN_BYTES
        back = isa.decode(raw, 7)
        assert back == insn
        assert isa.encode(back) == raw
        assert isa.disasm(back, 7).strip().split()[1] == mnemonic

    check()


def test_layouts_fit_and_do_not_overlap():
    for cfg in CONFIGS:
        isa = Isa(cfg)
        for name, lay in isa.layouts.items():
            bits = set()
            for f in lay:
                span = set(range(f.lo, f.hi + 1))
                assert not bits & span, (name, f.name)
                bits |= span
            assert max(bits) < 128
        assert isa.field("LOAD", "sram_base").width == cfg.sram_index_bits


def test_encode_out_of_range_names_field_value_width():
    isa = Isa(load_config("small"))
    with pytest.raises(IsaError) as e:
        isa.encode(Load(sram_base=128))
    assert str(e.value) == "LOAD.sram_base: value 128 does not fit the 7-bit unsigned field (0..127)"
    with pytest.raises(IsaError, match=r"ALU.imm: value 40000 does not fit the 16-bit signed field \(-32768..32767\)"):
        isa.encode(Alu(imm=40000, use_imm=True))
    with pytest.raises(IsaError, match=r"STORE.y_size: value -1 does not fit the 16-bit unsigned"):
        isa.encode(Store(y_size=-1))


def test_decode_unknown_opcode_names_index():
    isa = Isa(load_config("default"))
    stream = isa.encode(Load()) + (7).to_bytes(16, "little")
    with pytest.raises(IsaError, match=r"^instruction 1: unknown opcode 7"):
        isa.decode_stream(stream)


def test_decode_rejects_reserved_bits_and_bad_fields():
    isa = Isa(load_config("default"))
    word = isa.encode_word(Finish()) | (1 << 100)
    with pytest.raises(IsaError, match=r"instruction 3: FINISH has non-zero reserved bits"):
        isa.decode_word(word, 3)
    word = isa.encode_word(Alu()) | (10 << isa.field("ALU", "alu_op").lo)
    with pytest.raises(IsaError, match=r"instruction 0: unknown ALU op 10"):
        isa.decode_word(word)
    with pytest.raises(IsaError, match="LOAD has no previous stage"):
        isa.check(Load(pop_prev=True), 2)
    with pytest.raises(IsaError, match="STORE cannot pad"):
        isa.check(Store(x_pad_0=1), 2)


def test_truncated_stream():
    isa = Isa(load_config("default"))
    with pytest.raises(IsaError, match=r"37 bytes is not a whole number of 16-byte instructions"):
        isa.decode_stream(b"\0" * 37)


def test_disasm_lines():
    isa = Isa(load_config("default"))
    prog = [Load(sram_base=0, dram_base=4, y_size=1, x_size=16, x_stride=16, push_next=True),
            Alu(alu_op=ALU_OPS["SHR"], use_imm=True, imm=-3, iter_out=2, iter_in=8, dst_factor_out=8,
                dst_factor_in=1, pop_prev=True),
            Store(dram_base=0, x_size=16), Finish()]
    text = isa.disasm_stream(prog).splitlines()
    assert len(text) == 4
    assert "LOAD" in text[0] and "acc[0] <- dram[4]" in text[0] and "[push_next]" in text[0]
    assert "SHR" in text[1] and "imm=-3" in text[1] and "i<2 j<8" in text[1]
    assert text[3].split() == ["3:", "FINISH"]


def test_every_field_of_each_class_is_in_its_layout():
    isa = Isa(load_config("default"))
    for cls, name in ((Load, "LOAD"), (Store, "STORE"), (Alu, "ALU"), (Gemm, "GEMM"), (Finish, "FINISH")):
        layout_names = {f.name for f in isa.layouts[name]} - {"opcode"}
        assert layout_names == {f.name for f in fields(cls)}


def test_a_field_out_of_range_names_its_instruction():
    from hw.assembler import Assembler
    from hw.config import load_config
    from hw.isa import IsaError

    asm = Assembler(load_config("small"), "wide_loop")
    asm.output("c", (1, 16))
    for _ in range(5):
        asm.alu("ADD", imm=1)
    asm.alu("ADD", imm=1, iter_out=16384)
    asm.finish()
    with pytest.raises(IsaError, match=r"^wide_loop: instruction 5: ALU.iter_out: value 16384 does not fit the "
                                       r"14-bit unsigned field"):
        asm.program()
