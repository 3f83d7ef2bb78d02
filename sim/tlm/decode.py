"""FETCH's dispatch-time decoder: a 128-bit word -> instruction, or the error code it earns.

The TLM decodes the binary itself (never the kernel). The classification follows
``docs/microarch.md``: unknown opcode, ALU op or buffer, or non-zero reserved bits
-> ERR_BAD_OPCODE; a dependency flag towards a missing stage, STORE padding, STORE
from a buffer other than ACC -> ERR_BAD_FIELD; GEMM or LOAD into INP/WGT ->
ERR_UNSUPPORTED. When a word has several faults the RTL's order decides (``Isa.decode_word``
then ``Isa.check``): opcode, reserved bits, LOAD/STORE flags, buffer 3, STORE buffer,
STORE padding, ALU op, GEMM, LOAD buffer.
"""

from __future__ import annotations

from typing import Any

from hw import csr
from hw.isa import (ALU_OP_NAMES, BUFFER_NAMES, BUFFERS, INSN_BITS, INSN_CLASSES, OPCODE_NAMES, Instruction,
                    Isa)


class Decoder:
    """Decodes and classifies instruction words for one config, caching by word."""

    def __init__(self, isa: Isa):
        self.isa = isa
        # Per class: (used bits, [(name, lo, mask, sign bit or 0, is flag)]), precomputed for speed.
        self._plan: dict[str, tuple[int, list[tuple[str, int, int, int, bool]]]] = {}
        for name, lay in isa.layouts.items():
            items = [(f.name, f.lo, (1 << f.width) - 1, (1 << (f.width - 1)) if f.signed else 0, f.width == 1)
                     for f in lay[1:]]
            self._plan[name] = (isa.used_bits(name), items)
        self._cache: dict[int, tuple[Instruction | None, int, str]] = {}

    def decode(self, word: int) -> tuple[Instruction | None, int, str]:
        """``(insn, ERR_NONE, "")`` for a good word, else ``(None or insn, code, message)``."""
        hit = self._cache.get(word)
        if hit is None:
            hit = self._cache[word] = self._decode(word)
        return hit

    def _decode(self, word: int) -> tuple[Instruction | None, int, str]:
        name = OPCODE_NAMES.get(word & 0x7)
        if name is None:
            return None, csr.ERR_BAD_OPCODE, f"unknown opcode {word & 0x7} (word 0x{word:032x})"
        used, items = self._plan[name]
        if word >> used:
            return None, csr.ERR_BAD_OPCODE, (f"{name} has non-zero reserved bits [{INSN_BITS - 1}:{used}] "
                                              f"(word 0x{word:032x})")
        kw: dict[str, Any] = {}
        for fname, lo, mask, sign, flag in items:
            v = (word >> lo) & mask
            if sign and v & sign:
                v -= sign << 1
            kw[fname] = bool(v) if flag else v
        insn = INSN_CLASSES[name](**kw)
        return insn, *self._classify(insn)

    @staticmethod
    def _classify(insn: Any) -> tuple[int, str]:
        """The RTL's dispatch checks after the opcode and reserved bits, in its order (first
        match wins; docs/microarch.md "FETCH"): LOAD/STORE flags towards a missing stage,
        unknown buffer, STORE buffer, STORE padding, ALU op, GEMM, LOAD into INP/WGT."""
        n = insn.MNEMONIC
        if n == "LOAD" and (insn.pop_prev or insn.push_prev):
            return csr.ERR_BAD_FIELD, "LOAD has no previous stage to pop from or push to"
        if n == "STORE" and (insn.pop_next or insn.push_next):
            return csr.ERR_BAD_FIELD, "STORE has no next stage to pop from or push to"
        if n in ("LOAD", "STORE") and insn.buf not in BUFFER_NAMES:
            return csr.ERR_BAD_OPCODE, f"{n} names unknown buffer {insn.buf}"
        if n == "STORE" and insn.buf != BUFFERS["ACC"]:
            return csr.ERR_BAD_FIELD, f"STORE reads only the accumulator buffer (buf={insn.buf})"
        if n == "STORE" and (insn.y_pad_0 or insn.y_pad_1 or insn.x_pad_0 or insn.x_pad_1):
            return csr.ERR_BAD_FIELD, "STORE cannot pad (padding fields must be zero)"
        if n == "ALU" and insn.alu_op not in ALU_OP_NAMES:
            return csr.ERR_BAD_OPCODE, f"unknown ALU op {insn.alu_op}"
        if n == "GEMM":
            return csr.ERR_UNSUPPORTED, "GEMM is not executed by this hardware yet"
        if n == "LOAD" and insn.buf != BUFFERS["ACC"]:
            return csr.ERR_UNSUPPORTED, f"LOAD into {BUFFER_NAMES[insn.buf]} is not supported yet"
        return csr.ERR_NONE, ""
