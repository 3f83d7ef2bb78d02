"""Faulty Programs that reach the models: one injected fault per Program, with the expected error.

``hw.program.Program.load`` decodes ``insn.bin`` strictly, and ``Program.create``
refuses instructions that do not encode, so a Program carrying a bad instruction word
is a :class:`hw.assembler.PatchedProgram`: its instruction binary has some 128-bit
words replaced *after* encoding, and the models read the binary from ``dram_image()``,
so they see the raw word. (Saved with ``save()`` it makes a folder the loader
refuses, which is right.)

:func:`inject` turns a valid generated Program into one whose *only* fault is at one
chosen instruction, so the first fault is unambiguous: the reference interpreter, the
TLM and the RTL must all report the same code and pc.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hw import csr
from hw.assembler import PatchedProgram, patched, set_field
from hw.isa import (ALU_OP_BITS, ALU_OPS, OPCODE_BITS, OPCODE_NAMES, UOP_FIELDS, Alu, Gemm, Load, Store, unit_of,
                    with_opcode)
from cosim.fuzz.generator import uop_table_before
from hw.gemm_numpy import gemm_iterations
from hw.isa_semantics import DEP_FLAGS, LEGAL_FLAGS, POP_FLAGS, affine_last, buffer_of, load_tile_shape
from hw.program import ROLE_ATTR, Program

FAULT_KINDS = ("dram_range", "sram_range", "bad_opcode", "bad_field", "unloaded", "deadlock", "insn_range")


def _replace(p: Program, k: int, insn) -> PatchedProgram:
    insns = list(p.insns)
    insns[k] = insn
    return patched(p, insns=insns)


def _word(p: Program, k: int) -> int:
    return p.isa.encode_word(p.insns[k])


def _set_field(p: Program, word: int, mnemonic: str, name: str, value: int) -> int:
    return set_field(p.isa, word, mnemonic, name, value)


def inject(p: Program, kind: str, rng: np.random.Generator, unit: str | None = None) -> tuple[Program, int] | None:
    """A copy of ``p`` with one fault of ``kind`` and the hw.csr error code expected, or None when
    ``p`` has no instruction this kind of fault fits. ``unit`` (coverage steering; None: the usual random
    choice) puts an ``sram_range`` fault on a ``"load"`` or ``"store"``, a ``deadlock`` on ``"finish"``."""
    cfg, insns = p.config, p.insns
    if unit is not None:
        return _inject_at(p, kind, rng, unit)
    depth = cfg.acc_depth
    idx = lambda pred: [k for k, i in enumerate(insns) if pred(i)]  # noqa: E731
    pick = lambda ks: int(rng.choice(ks)) if ks else None  # noqa: E731
    if kind == "dram_range":
        k = pick(idx(lambda i: isinstance(i, (Load, Store)) and i.y_size * i.x_size > 0))
        if k is None:
            return None
        i = insns[k]
        vb = cfg.elem_bytes(buffer_of(i)) if isinstance(i, Load) else cfg.out_vec_bytes
        ext = (i.y_size - 1) * i.x_stride + i.x_size
        own = next(r for r in p.regions if r.addr <= i.dram_base * vb < r.end)
        # regions whose attribute forbids the access (a scratch region allows both)
        need = csr.ATTR_READ if isinstance(i, Load) else csr.ATTR_WRITE
        wrong = [r for r in p.regions if not ROLE_ATTR[r.role] & need and r.nbytes >= ext * vb]
        mode = int(rng.integers(0, 3))
        if mode == 0 and ext >= 2:  # straddles the end of its own region (into the next one or nowhere)
            base = max(0, own.end // vb - ext + 1)
        elif mode == 1 and wrong:  # a region whose attribute forbids the access (LOAD from an output, ...)
            base = int(rng.choice(wrong).addr) // vb
        else:              # far beyond the layout
            base = min((p.dram_end + int(rng.integers(0, 1 << 20))) // vb, (1 << 32) - 1)
        return _replace(p, k, dataclasses.replace(i, dram_base=base)), csr.ERR_DRAM_RANGE
    if kind == "sram_range":
        gemms = idx(lambda i: isinstance(i, Gemm) and gemm_iterations(i) > 0)
        if gemms and rng.random() < 0.4:
            k = pick(gemms)
            i = insns[k]
            if rng.random() < 0.5:  # micro-ops past the buffer: WAIT
                n = max(2, i.uop_end - i.uop_begin)  # uop_begin < UOP_DEPTH (its field), so two at least
                b = int(rng.integers(max(0, cfg.uop_depth - n + 1), cfg.uop_depth))
                return _replace(p, k, dataclasses.replace(i, uop_begin=b, uop_end=b + n)), csr.ERR_SRAM_RANGE
            # an index walks out of its buffer in EXEC: a factor as large as the field allows
            name = str(rng.choice(["acc"] if i.reset else ["acc", "inp", "wgt"]))
            top = (1 << cfg.sram_index_bits) - 1
            if i.iter_out > 1:
                new = dataclasses.replace(i, **{f"{name}_factor_out": top})
            else:
                new = dataclasses.replace(i, iter_in=max(2, i.iter_in), **{f"{name}_factor_in": top})
            return _replace(p, k, new), csr.ERR_SRAM_RANGE
        ks = idx(lambda i: isinstance(i, Alu) and i.iter_out * i.iter_in > 0)
        k = pick(ks)
        if k is None:
            return None
        i = insns[k]
        if rng.random() < 0.5 or i.use_imm:  # the destination runs one entry past the buffer
            span = affine_last(0, i.iter_out, i.iter_in, i.dst_factor_out, i.dst_factor_in)
            if span >= depth:
                return None
            new = dataclasses.replace(i, dst_base=depth - span)
            if new.dst_base >= 1 << cfg.sram_index_bits:
                new = dataclasses.replace(i, iter_out=max(2, i.iter_out), dst_base=depth - 1,
                                          dst_factor_out=1 + i.dst_factor_out)
        else:
            new = dataclasses.replace(i, iter_in=max(2, i.iter_in), src_factor_in=(1 << cfg.sram_index_bits) - 1,
                                      src_base=max(i.src_base, 1))
        return _replace(p, k, new), csr.ERR_SRAM_RANGE
    if kind == "bad_opcode":
        k = int(rng.integers(0, len(insns)))
        w = _word(p, k)
        name = insns[k].MNEMONIC
        mode = int(rng.integers(0, 3))
        if mode == 0:
            w = with_opcode(w, int(rng.choice([c for c in range(1 << OPCODE_BITS) if c not in OPCODE_NAMES])))
        elif mode == 1 and p.isa.used_bits(name) < 128:
            w |= 1 << int(rng.integers(p.isa.used_bits(name), 128))
        elif name == "ALU":
            w = _set_field(p, w, "ALU", "alu_op", int(rng.integers(len(ALU_OPS), 1 << ALU_OP_BITS)))
        else:
            w = with_opcode(w, 7)
        return patched(p, {k: w}), csr.ERR_BAD_OPCODE
    if kind == "bad_field":
        k = pick(idx(lambda i: isinstance(i, (Load, Store))))
        if k is None:
            return None
        i = insns[k]
        w = _word(p, k)
        towards_missing = [f for f in DEP_FLAGS if f not in LEGAL_FLAGS[unit_of(i)]]
        if isinstance(i, Load):
            w = _set_field(p, w, "LOAD", str(rng.choice(towards_missing)), 1)
        else:
            f = str(rng.choice(towards_missing + ["buf", "x_pad_0", "y_pad_1"]))
            w = _set_field(p, w, "STORE", f, 1 if f.startswith("p") else int(rng.integers(1, 3)))
        return patched(p, {k: w}), csr.ERR_BAD_FIELD
    if kind == "unloaded":  # a GEMM reads micro-ops or a weight block no LOAD wrote
        loaded = _loaded_entries(insns)
        ks = idx(lambda i: isinstance(i, Gemm) and gemm_iterations(i) > 0)
        k = pick(ks)
        if k is None:
            return None
        i = insns[k]
        n = i.uop_end - i.uop_begin
        free = [b for b in range(0, cfg.uop_depth - n + 1)
                if not any(u in loaded["UOP"] for u in range(b, b + n))]
        if free and (i.reset or rng.random() < 0.5):
            b = int(rng.choice(free))
            return _replace(p, k, dataclasses.replace(i, uop_begin=b, uop_end=b + n)), csr.ERR_UNLOADED
        # weights: move the walk onto never-loaded blocks (the first one out of range would be
        # SRAM_RANGE instead, so only a factor whose whole walk stays in the buffer)
        if i.reset:
            return None
        new = _retarget_wgt(p, k, i)
        return None if new is None else (_replace(p, k, new), csr.ERR_UNLOADED)
    if kind == "deadlock":  # a pop whose token never comes (the pc is what the reference computes)
        cands = [(k, f) for k, i in enumerate(insns[:-1]) for f in POP_FLAGS
                 if f in LEGAL_FLAGS[unit_of(i)] and not getattr(i, f)]
        if not cands:
            return None
        k, f = cands[int(rng.integers(0, len(cands)))]
        return _replace(p, k, dataclasses.replace(insns[k], **{f: True})), csr.ERR_DEADLOCK
    if kind == "insn_range":
        regs = list(p.regs)
        at = {n: j for j, (n, _) in enumerate(regs)}
        mode = int(rng.integers(0, 4))
        if mode == 0:
            regs[at["INSN_COUNT"]] = ("INSN_COUNT", 0)
        elif mode == 1:
            regs[at["INSN_ADDR_HI"]] = ("INSN_ADDR_HI", int(rng.integers(1, 1 << 32)))
        elif mode == 2:
            regs[at["INSN_COUNT"]] = ("INSN_COUNT", len(insns) + int(rng.integers(1, 1000)))
        else:
            out = next(r for r in p.regions if r.role == "output")
            regs[at["INSN_ADDR_LO"]] = ("INSN_ADDR_LO", out.addr)
        return patched(p, regs=regs), csr.ERR_INSN_RANGE
    raise ValueError(f"unknown fault kind '{kind}' (kinds: {', '.join(FAULT_KINDS)})")


def _loaded_entries(insns: list) -> dict[str, set[int]]:
    """Per buffer name, every entry some LOAD of ``insns`` writes (padding included)."""
    out: dict[str, set[int]] = {"ACC": set(), "INP": set(), "WGT": set(), "UOP": set()}
    for i in insns:
        if isinstance(i, Load):
            rows, cols = load_tile_shape(i)
            out[buffer_of(i)].update(range(i.sram_base, i.sram_base + rows * cols))
    return out


def _retarget_wgt(p: Program, k: int, g: Gemm) -> Gemm | None:
    """``g`` (at index ``k`` of ``p``) made to read a never-loaded weight block first at iteration
    (i=1, j=0, first micro-op), every other index repeating iteration i=0's (valid); None when no
    never-loaded block lies within one factor step above that micro-op's block."""
    first = int(uop_table_before(p, k)[g.uop_begin][UOP_FIELDS.index("wgt")])
    loaded = _loaded_entries(p.insns)["WGT"]
    reach = min(p.config.wgt_depth, first + (1 << p.config.sram_index_bits))
    holes = [w for w in range(first + 1, reach) if w not in loaded]
    if not holes:
        return None
    return dataclasses.replace(g, iter_out=max(2, g.iter_out), wgt_factor_out=holes[0] - first, wgt_factor_in=0,
                               acc_factor_out=0, inp_factor_out=0)


def _inject_at(p: Program, kind: str, rng: np.random.Generator, unit: str) -> tuple[Program, int] | None:
    """The unit-targeted faults of :func:`inject`: a LOAD's or STORE's tile moved to end one entry past its
    buffer (SRAM_RANGE in WAIT, its DRAM window unchanged), or FINISH popping a token that never comes."""
    insns = p.insns
    if kind == "sram_range" and unit in ("load", "store"):
        cls = Load if unit == "load" else Store
        ks = [k for k, i in enumerate(insns) if isinstance(i, cls) and i.y_size * i.x_size > 0]
        if not ks:
            return None
        k = int(rng.choice(ks))
        i = insns[k]
        rows, cols = load_tile_shape(i) if isinstance(i, Load) else (i.y_size, i.x_size)
        base = p.config.depth_of(buffer_of(i)) - rows * cols + 1
        if not 0 <= base < 1 << p.config.sram_index_bits:
            return None
        return _replace(p, k, dataclasses.replace(i, sram_base=base)), csr.ERR_SRAM_RANGE
    if kind == "deadlock" and unit == "finish":
        k = len(insns) - 1
        free = [f for f in POP_FLAGS if not getattr(insns[k], f)]
        if not free:
            return None
        return _replace(p, k, dataclasses.replace(insns[k], **{str(rng.choice(free)): True})), csr.ERR_DEADLOCK
    raise ValueError(f"no fault '{kind}' aimed at unit '{unit}'")
