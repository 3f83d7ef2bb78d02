"""The assembler: the one way to write a Program by hand.

Tests, calibration micro-benchmarks, the bench suite and the fuzzer's corpus all
build their hand-made Programs here::

    asm = Assembler(cfg, "vadd")
    a = asm.input("a", a_data)                     # int32 tensor, placed after the instructions
    c = asm.output("c", (n, cfg.lanes))            # the config's output dtype
    asm.load(a, x=n, push_next=True)               # DRAM address relative to ``a``
    asm.alu("ADD", imm=1, iter_out=n, dst_factor_out=1, pop_prev=True, push_next=True)
    asm.store(c, x=n, pop_prev=True)
    asm.finish()
    prog = asm.program(expected={"c": ...})

The layout is that of :func:`hw.program.plan_layout`: the instruction region at
``insn_base`` (0 by default), then every tensor in the order it was declared, each
aligned. A tensor's address therefore depends on the number of instructions, so a
LOAD or STORE given a tensor keeps its ``dram_base`` relative (in vectors of its own
unit: accumulator vectors for LOAD, output vectors for STORE) until
:meth:`Assembler.program` knows the count. An ``int`` instead of a tensor is an
absolute vector index, for Programs that aim outside their layout on purpose.

Malformed instructions cannot be written as :mod:`hw.isa` objects (they do not
encode), so the assembler also injects raw 128-bit words (:meth:`Assembler.raw`,
:meth:`Assembler.patch`); such a Program is a :class:`PatchedProgram`, whose
instruction bytes (what every model reads, through ``dram_image``) carry the raw
words while ``insns`` lists what each word stands for. :func:`with_regs` changes the
register config of a finished Program (bad instruction windows and the like), and
:func:`with_insns` its instructions over the same data layout (shrinking, mutations).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Union

import numpy as np

from hw.analysis import after_finish_problem
from hw.config import HwConfig
from hw.isa import (ALU_OPS, BUFFER_NAMES, BUFFERS, INSN_BYTES, Alu, Finish, Gemm, Instruction, Isa, Load, Store,
                    encode_uops)
from hw.program import DTYPES, FAULT_META, Program, ProgramError, Region, plan_layout

WORD_MASK = (1 << (8 * INSN_BYTES)) - 1


@dataclass(frozen=True)
class Tensor:
    """A DRAM tensor declared on an :class:`Assembler` (its region once laid out)."""

    name: str
    role: str
    shape: tuple[int, ...]
    dtype: str


@dataclass
class PatchedProgram(Program):
    """A Program whose instruction words at the indices of ``patches`` are raw 128-bit words.

    The models read ``insn_bytes`` (through ``dram_image``), so they see the raw words;
    ``insns`` keeps what each patched word stands for. Saved with ``save()`` it makes a
    folder the loader refuses, which is right.
    """

    patches: dict[int, int] = field(default_factory=dict)

    @property
    def insn_bytes(self) -> bytes:
        b = bytearray(super().insn_bytes)
        for k, w in self.patches.items():
            b[k * INSN_BYTES:(k + 1) * INSN_BYTES] = (w & WORD_MASK).to_bytes(INSN_BYTES, "little")
        return bytes(b)


def patched(p: Program, patches: dict[int, int] | None = None, **changes: Any) -> PatchedProgram:
    """A PatchedProgram copy of ``p`` with ``patches`` added to its own (``changes`` replace
    dataclass fields, e.g. ``insns=`` or ``regs=``)."""
    kw = {f.name: getattr(p, f.name) for f in dataclasses.fields(Program) if f.init}
    kw.update(changes)
    kw["insns"], kw["regs"] = list(kw["insns"]), list(kw["regs"])
    kw["meta"] = dict(kw["meta"])
    old = dict(getattr(p, "patches", {}))
    old.update(patches or {})
    return PatchedProgram(**kw, patches=old)


def with_regs(p: Program, name: str | None = None, **writes: int | Callable[[int], int]) -> Program:
    """A copy of ``p`` whose register writes named in ``writes`` get new values (an int, or a
    function of the old value), e.g. ``with_regs(p, INSN_COUNT=0)``; the Program keeps its
    class (raw words stay patched). Raises ProgramError for a CSR the config never writes."""
    missing = set(writes) - {n for n, _ in p.regs}
    if missing:
        raise ProgramError(f"{p.name}: its register config writes no {', '.join(sorted(missing))}")

    def value(n: str, v: int) -> int:
        w = writes[n]
        return int(w(v)) if callable(w) else int(w)

    regs = [(n, value(n, v) if n in writes else v) for n, v in p.regs]
    # Recorded in layout.json's meta: Program.load accepts such a folder's register config although it
    # no longer matches the layout (the models must then report the fault themselves).
    changed = ", ".join(f"{n}=0x{v:x}" for n, v in regs if n in writes)
    meta = {**p.meta, FAULT_META: f"register writes changed on purpose: {changed}"}
    return dataclasses.replace(p, regs=regs, name=p.name if name is None else name, insns=list(p.insns),
                               meta=meta, inputs=dict(p.inputs), expected=dict(p.expected))


def with_insns(p: Program, insns: list[Instruction], name: str | None = None,
               patches: dict[int, int] | None = None) -> Program:
    """``p`` with other instructions (absolute DRAM addresses, as in ``p.insns``) over the same data
    layout: the instruction region is resized in place and every data region keeps its address, so a
    Program whose instructions were edited, dropped or mutated still reads and writes where ``p`` did.
    Inputs and meta are kept, ``expected`` outputs are not (other instructions compute other things).
    A :class:`PatchedProgram` (or given ``patches``, raw words by new index) stays one. Raises
    ProgramError when the instructions no longer fit before the first data region. Token balance is
    not checked (an edited Program may be broken on purpose; :meth:`Program.load` still refuses it)."""
    regions = [Region(r.name, r.role, r.addr, (len(insns) * INSN_BYTES,), r.dtype) if r.role == "insn" else r
               for r in p.regions]
    q = Program.create(p.config, insns, regions, name=p.name if name is None else name, meta=p.meta,
                       inputs=p.inputs, check_tokens=False)
    return patched(q, patches or {}) if patches or isinstance(p, PatchedProgram) else q


def set_field(isa: Isa, word: int, mnemonic: str, name: str, value: int) -> int:
    """``word`` with field ``name`` of class ``mnemonic`` set to ``value`` (cut to the field's
    width): how a malformed word is made from a valid one (:meth:`hw.isa.Isa.set_field`)."""
    return isa.set_field(word, mnemonic, name, value)


WordPatch = Union[int, Callable[[int], int]]


@dataclass
class _Entry:
    insn: Instruction
    base: Tensor | None                  # dram_base counts vectors from this tensor's first one
    patch: WordPatch | None = None       # a raw word, or a function of the encoded word


class Assembler:
    """Builds one Program: declare tensors, append instructions, then :meth:`program`."""

    def __init__(self, cfg: HwConfig, name: str = "program", meta: dict[str, Any] | None = None,
                 insn_base: int = 0):
        self.cfg = cfg
        self.name = name
        self.meta = dict(meta or {})
        self.insn_base = insn_base
        self.isa = Isa(cfg)
        self._tensors: list[Tensor] = []
        self._data: dict[str, np.ndarray] = {}
        self._entries: list[_Entry] = []

    # ---- DRAM tensors ---------------------------------------------------------------------------
    @property
    def out_dtype(self) -> str:
        """The dtype of an output vector's lanes (STORE narrows to it)."""
        return f"int{self.cfg.out_width}"

    def tensor(self, name: str, role: str, shape: tuple[int, ...], dtype: str,
               data: np.ndarray | None = None) -> Tensor:
        """Declare a tensor of ``role`` (input, output or scratch); its region follows the
        tensors declared before it. ``data`` is its initial contents."""
        if any(t.name == name for t in self._tensors):
            raise ProgramError(f"{self.name}: tensor '{name}' is declared twice")
        if dtype not in DTYPES:
            raise ProgramError(f"{self.name}: tensor '{name}' has unsupported dtype '{dtype}'")
        t = Tensor(name, role, tuple(int(s) for s in shape), dtype)
        self._tensors.append(t)
        if data is not None:
            self._data[name] = np.asarray(data)
        return t

    def input(self, name: str, data: np.ndarray | None = None, shape: tuple[int, ...] | None = None,
              dtype: str | None = None) -> Tensor:
        """An input tensor; its shape and dtype default to those of ``data``."""
        if data is None and shape is None:
            raise ProgramError(f"{self.name}: input '{name}' needs data or a shape")
        arr = None if data is None else np.asarray(data)
        return self.tensor(name, "input", arr.shape if shape is None else shape,
                           dtype or (arr.dtype.name if arr is not None else "int32"), arr)

    def output(self, name: str, shape: tuple[int, ...], dtype: str | None = None) -> Tensor:
        """An output tensor, of the config's output dtype unless ``dtype`` says otherwise."""
        return self.tensor(name, "output", shape, dtype or self.out_dtype)

    def set_input(self, name: str, data: np.ndarray) -> None:
        """Give the tensor ``name`` its contents (after it was declared)."""
        if not any(t.name == name for t in self._tensors):
            raise ProgramError(f"{self.name}: no tensor named '{name}'")
        self._data[name] = np.asarray(data)

    def regions(self, insn_count: int | None = None) -> list[Region]:
        """The layout the Program gets with ``insn_count`` instructions (default: as many as now)."""
        n = len(self._entries) if insn_count is None else insn_count
        return plan_layout(self.cfg, [(t.name, t.role, t.shape, t.dtype) for t in self._tensors], n,
                           base=self.insn_base)

    def address(self, tensor: Tensor, insn_count: int | None = None) -> int:
        """Byte address of ``tensor`` when the Program has ``insn_count`` instructions (default: now)."""
        return next(r.addr for r in self.regions(insn_count) if r.name == tensor.name)

    # ---- instructions ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._entries)

    def add(self, insn: Instruction, base: Tensor | None = None) -> int:
        """Append ``insn`` and return its index. With ``base`` (LOAD/STORE only), ``insn.dram_base``
        counts vectors of the instruction's unit from the first vector of ``base``."""
        if base is not None and not isinstance(insn, (Load, Store)):
            raise ProgramError(f"{self.name}: only LOAD and STORE address DRAM ({insn.MNEMONIC} given a tensor)")
        self._entries.append(_Entry(insn, base))
        return len(self._entries) - 1

    def load(self, src: Tensor | int, x: int = 1, y: int = 1, *, offset: int = 0, stride: int | None = None,
             sram: int = 0, buf: str | int = "ACC", **fields: Any) -> int:
        """LOAD ``y`` rows of ``x`` entries (rows ``stride`` entries apart, default ``x``) from
        ``src`` (a tensor, from its entry ``offset``; or an absolute entry index) into buffer
        ``buf`` (ACC, INP, WGT, UOP: the entry is that buffer's DRAM unit, ``HwConfig.elem_bytes``)
        at ``sram``. ``fields``: padding and dependency flags by their ISA names."""
        return self._dma(Load, src, x, y, offset, stride, sram, buf, fields)

    def store(self, dst: Tensor | int, x: int = 1, y: int = 1, *, offset: int = 0, stride: int | None = None,
              sram: int = 0, **fields: Any) -> int:
        """STORE ``y`` rows of ``x`` accumulator vectors from ``sram`` to ``dst`` (see :meth:`load`)."""
        return self._dma(Store, dst, x, y, offset, stride, sram, "ACC", fields)

    def _dma(self, cls: type, where: Tensor | int, x: int, y: int, offset: int, stride: int | None, sram: int,
             buf: str | int, fields: dict[str, Any]) -> int:
        buf_id = BUFFERS[buf] if isinstance(buf, str) else int(buf)
        if isinstance(where, Tensor):
            base, dram = where, offset
        else:
            base, dram = None, int(where) + offset
        insn = cls(buf=buf_id, sram_base=sram, dram_base=dram, y_size=y, x_size=x,
                   x_stride=x if stride is None else stride, **fields)
        return self.add(insn, base)

    def alu(self, op: str | int, *, imm: int | None = None, **fields: Any) -> int:
        """An ALU instruction: ``op`` by name (``"ADD"``) or number; with ``imm`` the operand is
        that immediate, else the source vectors. ``fields``: loop, base, factor and flag fields
        by their ISA names."""
        code = ALU_OPS[op] if isinstance(op, str) else int(op)
        if imm is not None:
            fields.update(use_imm=True, imm=imm)
        return self.add(Alu(alu_op=code, **fields))

    def uops(self, name: str, uops: list[tuple[int, int, int]]) -> Tensor:
        """An input tensor of micro-ops ``(acc, inp, wgt)`` (16 bytes each, int8 (n, 16)), for a
        LOAD with ``buf="UOP"``."""
        raw = np.frombuffer(encode_uops(uops), dtype=np.int8).reshape(len(uops), -1)
        return self.input(name, raw)

    def gemm(self, **fields: Any) -> int:
        """A GEMM instruction (fields by their ISA names)."""
        return self.add(Gemm(**fields))

    def finish(self, **flags: Any) -> int:
        """FINISH, which ends the Program."""
        return self.add(Finish(**flags))

    def raw(self, word: int, stands_for: Instruction | None = None) -> int:
        """Append a raw 128-bit instruction word (malformed on purpose); ``stands_for`` is what
        ``Program.insns`` lists at its index (default FINISH), the models read the word."""
        self._entries.append(_Entry(stands_for or Finish(), None, word & WORD_MASK))
        return len(self._entries) - 1

    def patch(self, index: int, word: WordPatch) -> None:
        """Replace the word of instruction ``index`` by a raw word, or by ``word(encoded)`` when
        ``word`` is a function (applied to the final encoding, DRAM addresses resolved)."""
        if not 0 <= index < len(self._entries):
            raise ProgramError(f"{self.name}: no instruction {index} to patch ({len(self._entries)} so far)")
        self._entries[index].patch = word

    # ---- the Program ----------------------------------------------------------------------------
    def instructions(self, regions: list[Region] | None = None) -> list[Instruction]:
        """The instructions with every tensor-relative DRAM address resolved on ``regions``."""
        by_name = {r.name: r for r in (regions or self.regions())}
        out = []
        for e in self._entries:
            i = e.insn
            if e.base is not None:
                vb = self.cfg.elem_bytes(BUFFER_NAMES[i.buf]) if isinstance(i, Load) else self.cfg.out_vec_bytes
                i = dataclasses.replace(i, dram_base=i.dram_base + by_name[e.base.name].addr // vb)
            out.append(i)
        return out

    def program(self, expected: dict[str, np.ndarray] | None = None,
                inputs: dict[str, np.ndarray] | None = None) -> Program:
        """Lay out the tensors, resolve DRAM addresses, check and encode: the Program, with the
        tensors' data as inputs (plus ``inputs``) and ``expected`` outputs. A Program with raw
        words is a :class:`PatchedProgram`. Token balance is not checked: the assembler is the tool
        for hand-made edge cases, deadlocks on purpose included (:meth:`Program.load` still refuses
        an unbalanced folder, and compiled and generated Programs are checked when created); an
        instruction after the FINISH, other than a FINISH, is refused (it races the drain: no model
        could say what it does). Raw words are not checked: they are what stands for malformed words."""
        regions = self.regions()
        insns = self.instructions(regions)
        late = after_finish_problem(insns, frozenset(k for k, e in enumerate(self._entries) if e.patch is not None))
        if late:
            raise ProgramError(f"{self.name}: {late}")
        data = dict(self._data)
        data.update(inputs or {})
        p = Program.create(self.cfg, insns, regions, name=self.name, meta=self.meta, inputs=data,
                           expected=expected, check_tokens=False)
        patches: dict[int, int] = {}
        for k, e in enumerate(self._entries):
            if e.patch is not None:
                w = e.patch(self.isa.encode_word(insns[k])) if callable(e.patch) else e.patch
                patches[k] = int(w) & WORD_MASK
        return patched(p, patches) if patches else p


def assemble(cfg: HwConfig, insns: list[Instruction], tensors: list[tuple[str, str, tuple[int, ...], str]],
             inputs: dict[str, np.ndarray] | None = None, expected: dict[str, np.ndarray] | None = None,
             name: str = "program") -> Program:
    """A Program of ready-made ``insns`` (absolute DRAM addresses) over ``tensors`` given as
    (name, role, shape, dtype): the short form of an :class:`Assembler` for tests whose
    instructions are already written."""
    asm = Assembler(cfg, name)
    for t in tensors:
        asm.tensor(*t)
    for i in insns:
        asm.add(i)
    return asm.program(expected=expected, inputs=inputs)
