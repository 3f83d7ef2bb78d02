"""Explain an output mismatch: which instruction last wrote the element, statically from the Program.

Given an output element, find the last STORE (in program order) that wrote its
DRAM bytes, the accumulator entry that STORE read, and the last LOAD or ALU before
that STORE which wrote the entry: the instructions to look at in the waveform.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hw.isa import BUFFERS, Alu, Load, Store
from hw.isa_semantics import alu_indices, sram_last_index
from hw.program import Program

_MAX_LOOP = 1 << 20  # iterations enumerated per ALU instruction when tracing a writer


@dataclass
class Writers:
    """The STORE that wrote an output element and the instruction that produced its value (pcs counted in
    the stream of ``core``, None on one core)."""

    store_pc: int | None
    acc_index: int | None
    producer_pc: int | None
    producer_op: str | None
    core: int | None = None

    def __str__(self) -> str:
        if self.store_pc is None:
            return "no STORE writes this element"
        of = f" of core {self.core}" if self.core is not None else ""
        s = f"last written by STORE #{self.store_pc}{of} from acc[{self.acc_index}]"
        if self.producer_pc is not None:
            s += f", which {self.producer_op} #{self.producer_pc} last wrote"
        return s


def _writes_acc(insn: Alu | Load, index: int) -> bool:
    """Does ``insn`` write accumulator entry ``index`` (its footprint, :mod:`hw.isa_semantics`)?"""
    if isinstance(insn, Load):
        top = sram_last_index(insn)
        return insn.buf == BUFFERS["ACC"] and top is not None and insn.sram_base <= index <= top
    n = insn.iter_out * insn.iter_in
    if n == 0 or n > _MAX_LOOP:
        return False
    return bool(np.any(alu_indices(insn)[0] == index))


def last_writers(program: Program, output: str, index: tuple[int, ...]) -> Writers:
    """The instructions behind ``program``'s output element ``output[index]``. On several cores: the last
    STORE of the latest phase (the BARRIERs before it) over every core's stream, and the producer in
    that core's stream."""
    cfg = program.config
    r = program.region(output)
    flat = int(np.ravel_multi_index(index, r.shape)) if index else 0
    addr = r.addr + flat * np.dtype(r.dtype).itemsize
    vec = addr // cfg.out_vec_bytes
    best: tuple[int, int, int, int] | None = None  # (phase, core, pc, acc index)
    for core in range(program.num_cores):
        phase = 0
        for pc, insn in enumerate(program.core_insns(core)):
            if insn.MNEMONIC == "BARRIER":
                phase += 1
            if not isinstance(insn, Store):
                continue
            for y in range(insn.y_size):
                start = insn.dram_base + y * insn.x_stride
                if start <= vec < start + insn.x_size and (best is None or (phase, core) >= best[:2]):
                    best = (phase, core, pc, insn.sram_base + y * insn.x_size + (vec - start))
    if best is None:
        return Writers(None, None, None, None)
    _, core, store_pc, acc = best
    which = core if program.num_cores > 1 else None
    insns = program.core_insns(core)
    for pc in range(store_pc - 1, -1, -1):
        insn = insns[pc]
        if isinstance(insn, (Alu, Load)) and _writes_acc(insn, acc):
            return Writers(store_pc, acc, pc, insn.MNEMONIC, which)
    return Writers(store_pc, acc, None, None, which)
