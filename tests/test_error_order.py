"""The error-check order of a malformed instruction word: the TLM, the ISS and the encoder agree with
docs/microarch.md ("FETCH": first match wins) for EVERY combination of the four dependency flags, the
buffer field, the opcode and the ALU op field (plus padding and reserved bits), on every config.

Decode level for all combinations (the TLM's dispatch decoder, the ISS's dispatch checks and
``Isa.decode_word``), then a handful of words whose faults compete, run as whole Programs through the
TLM and the ISS (and the RTL when it is built), which must report the same code and ERR_PC.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from cosim import models
from cosim.fuzz.corpus import base_program
from cosim.fuzz.faults import patched
from hw import csr
from hw.config import load_config
from hw.isa import ALU_OP_BITS, ALU_OPS, BUF_BITS, INSN_BITS, INSN_CLASSES, OPCODE_NAMES, Isa, IsaError, with_opcode
from hw.isa_semantics import DEP_FLAGS
from sim.iss import RefFault, decode_words
from sim.tlm.decode import Decoder
from tests.conftest import SINGLE_CORE as CONFIG_NAMES

DOC = Path(__file__).resolve().parents[1] / "docs" / "microarch.md"
OK, OPC, FLD = csr.ERR_NONE, csr.ERR_BAD_OPCODE, csr.ERR_BAD_FIELD


# ---- the documented order, as a spec (docs/microarch.md "FETCH", first match wins) ------------------
def _spec(w: dict) -> list[tuple[str, bool, int]]:
    """(check, does it match, code) in the documented order, for a word given by its raw fields.
    Every buffer code names a buffer (3 is the micro-op buffer) and GEMM and LOAD into every
    buffer are executed, so no word is ERR_UNSUPPORTED."""
    n = OPCODE_NAMES.get(w["opcode"])
    return [
        ("unknown opcode", n is None, OPC),
        ("non-zero reserved bits", w["reserved"], OPC),
        ("LOAD with pop_prev/push_prev", n == "LOAD" and (w["pop_prev"] or w["push_prev"]), FLD),
        ("STORE with pop_next/push_next", n == "STORE" and (w["pop_next"] or w["push_next"]), FLD),
        ("STORE buffer other than ACC", n == "STORE" and w["buf"] != 0, FLD),
        ("STORE padding", n == "STORE" and w["pad"], FLD),
        ("ALU op above CLZ", n == "ALU" and w["alu_op"] > ALU_OPS["CLZ"], OPC),
    ]


def expected_code(w: dict) -> int:
    return next((code for _, hit, code in _spec(w) if hit), OK)


def test_spec_is_the_documented_order():
    """The codes of the spec above, in order, are those of the docs' "Order of checks" sentence."""
    text = DOC.read_text()
    para = text[text.index("Order of checks"):]
    para = para[:para.index("\n* ")]
    documented = [getattr(csr, name) for name in re.findall(r"→ `(ERR_\w+)`", para)]
    assert documented == [code for _, _, code in _spec(dict.fromkeys(
        ("opcode", "reserved", "buf", "pad", "alu_op", *DEP_FLAGS), 0))]


# ---- every combination -----------------------------------------------------------------------------
def _set(isa: Isa, mnemonic: str, word: int, name: str, value: int) -> int:
    return isa.set_field(word, mnemonic, name, value)


def malformed_words(isa: Isa):
    """(raw fields, word) for every opcode x flags x buffer x padding x ALU op x reserved bits."""
    for opcode, flags, reserved in itertools.product(range(8), range(16), (False, True)):
        name = OPCODE_NAMES.get(opcode)
        base = isa.encode_word(INSN_CLASSES[name]()) if name else 0x5A5A << 40  # stray bits in an unknown opcode
        base = with_opcode(base, opcode)
        for k, f in enumerate(DEP_FLAGS):  # the flags follow the opcode in every class (FINISH is just them)
            base = _set(isa, "FINISH", base, f, flags >> k & 1)
        if reserved:
            base |= 1 << (INSN_BITS - 1)
        fl = {f: bool(flags >> k & 1) for k, f in enumerate(DEP_FLAGS)}
        bufs = range(1 << BUF_BITS) if name in ("LOAD", "STORE") else (0,)
        pads = (False, True) if name in ("LOAD", "STORE") else (False,)
        ops = range(1 << ALU_OP_BITS) if name == "ALU" else (0,)
        for buf, pad, alu_op in itertools.product(bufs, pads, ops):
            w = base
            if name in ("LOAD", "STORE"):
                w = _set(isa, name, _set(isa, name, w, "buf", buf), "x_pad_1", int(pad))
            if name == "ALU":
                w = _set(isa, name, w, "alu_op", alu_op)
            fields = dict(opcode=opcode, reserved=reserved, buf=buf, pad=pad, alu_op=alu_op, **fl)
            yield fields, w


def _iss(isa: Isa, word: int) -> tuple[int, str]:
    try:
        decode_words(isa, [word])
    except RefFault as f:
        return f.code, f.message
    return OK, ""


@pytest.mark.parametrize("config", CONFIG_NAMES)
def test_tlm_iss_and_encoder_agree_on_every_combination(config):
    isa = Isa(load_config(config))
    tlm = Decoder(isa)
    seen: dict[int, int] = {}
    for fields, word in malformed_words(isa):
        want = expected_code(fields)
        insn, code, msg = tlm.decode(word)
        assert (code, _iss(isa, word)) == (want, (code, msg)), (fields, hex(word), msg)
        # the encoder refuses exactly the words the hardware calls malformed, with the same message
        if want in (OPC, FLD):
            with pytest.raises(IsaError) as e:
                isa.decode_word(word)
            assert str(e.value) == f"instruction 0: {msg}"
        else:
            assert isa.decode_word(word) == insn
        seen[want] = seen.get(want, 0) + 1
    assert set(seen) == {OK, OPC, FLD} and sum(seen.values()) > 1000


# ---- competing faults, whole Programs ---------------------------------------------------------------
# (what, opcode, fields set on top of the opcode's default instruction, expected code)
COMPETING = [
    ("LOAD pop_prev into UOP", "LOAD", dict(pop_prev=1, buf=3), FLD),
    ("LOAD push_prev into INP", "LOAD", dict(push_prev=1, buf=1), FLD),
    ("STORE push_next + buffer 3 + padding", "STORE", dict(push_next=1, buf=3, y_pad_0=1), FLD),
    ("STORE from UOP + padding", "STORE", dict(buf=3, x_pad_1=2), FLD),
    ("STORE from WGT + padding", "STORE", dict(buf=2, x_pad_0=1), FLD),
    ("ALU op 12 with every flag", "ALU", dict(alu_op=12, pop_prev=1, pop_next=1, push_prev=1, push_next=1), OPC),
]


def _competing_programs(cfg):
    p = base_program(cfg)
    out = []
    for what, name, fields, code in COMPETING:
        w = p.isa.encode_word(INSN_CLASSES[name]())
        for f, v in fields.items():
            w = _set(p.isa, name, w, f, v)
        out.append((what, patched(p, {0: w}), code))
    isa = p.isa
    w = _set(isa, "ALU", isa.encode_word(INSN_CLASSES["ALU"]()), "alu_op", 10) | 1 << (INSN_BITS - 1)
    out.append(("ALU op 10 + reserved bit", patched(p, {1: w}), OPC))
    w = isa.encode_word(INSN_CLASSES["GEMM"](pop_next=True, push_prev=True)) | 1 << (INSN_BITS - 1)
    out.append(("GEMM with flags + reserved bit", patched(p, {1: w}), OPC))
    every_flag = isa.encode_word(INSN_CLASSES["FINISH"](**dict.fromkeys(DEP_FLAGS, True)))
    out.append(("unknown opcode 6 with flags", patched(p, {2: with_opcode(every_flag, 6)}), OPC))
    return out


@pytest.mark.parametrize("config", CONFIG_NAMES)
def test_competing_faults_on_tlm_and_iss(config):
    for what, prog, code in _competing_programs(load_config(config)):
        pc = next(iter(prog.patches))
        for r in (models.iss(prog), models.tlm(prog)):
            assert r.error is not None and (r.error["code"], r.error["pc"]) == (code, pc), (what, r.model, r.error)


RTL_MISSING = models.rtl_available()


@pytest.mark.skipif(RTL_MISSING is not None, reason=f"no RTL: {RTL_MISSING}")
def test_competing_faults_on_rtl():
    """The RTL, the TLM's truth, in one simulator process."""
    cfg = load_config("default")
    cases = _competing_programs(cfg)
    for (what, prog, code), r in zip(cases, models.rtl([p for _, p, _ in cases], cfg)):
        assert r.error is not None and (r.error["code"], r.error["pc"]) == (code, next(iter(prog.patches))), \
            (what, r.error)
