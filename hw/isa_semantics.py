"""The ISA's meaning, written once: topology, token queues, footprints, error order, ALU semantics.

``hw/isa.py`` says how instructions are *encoded*; this module says what they *mean*
to the hardware, and every model, the compiler and the tools import it instead of
restating it. Imports only ``hw.isa``, ``hw.csr`` and numpy (floor 1).

Public API (names are stable; other branches build on them):

Unit topology and dependency tokens (VTA semantics, docs/microarch.md "Control")
    ``UNITS``           the three in-order units ``("load", "compute", "store")``.
    ``DEP_FLAGS``       the four flags ``("pop_prev", "pop_next", "push_prev", "push_next")``;
                        ``POP_FLAGS`` and ``PUSH_FLAGS`` split them.
    ``TOKEN_QUEUES``    ``("l2c", "c2l", "c2s", "s2c")``.
    ``QUEUE_ENDS``      queue -> ``(producer unit, push flag, consumer unit, pop flag)``.
    ``TOKEN_ROUTES``    ``(unit, flag)`` -> queue, for every legal pair.
    ``QUEUE_BETWEEN``   ``(producer unit, consumer unit)`` -> queue.
    ``LEGAL_FLAGS``     unit -> the flags its instructions may set (a flag towards a
                        missing stage is ``ERR_BAD_FIELD``).
    ``QUEUE_OF_OPCODE``, ``unit_of(insn)``   which unit's queue an opcode goes to
                        (re-exported from ``hw.isa``, where the encoder needs it).
    ``pops_of(insn)``, ``pushes_of(insn)``   the queues an instruction pops / pushes.

Footprints (which buffer entries an instruction touches)
    ``affine_indices(base, iter_out, iter_in, factor_out, factor_in)``  loop-order indices;
                        ``affine_index`` the same as a slice when they are a plain run
                        (``affine_is_run``), ``affine_last`` the highest.
    ``alu_indices(insn)``   ``(dst, src)`` index arrays of an ALU in loop order (src None
                        for an immediate).
    ``padded_tile_shape(...)``, ``load_tile_shape(insn)``  ``(rows, cols)`` of a LOAD's
                        padded on-chip tile.
    ``load_access``, ``store_access``, ``alu_access`` (field by field, shared with the
                        compiler's operation records) and ``insn_access(insn)``: ``(reads,
                        writes)`` lists of slices / index arrays in the buffer worked on.
    ``footprint(insn)``     buffer name -> :class:`Access` ``(reads, writes)`` index sets;
                        reads are the entries whose *value* matters (MOV and CLZ do not read
                        their destination: :data:`DST_BLIND_OPS`), writes every entry written.
    ``acc_footprint(insn)`` ``(reads, writes)`` in the accumulator buffer.
    ``alu_last_indices(insn)``  ``(dst_last, src_last or None)`` of an ALU.
    ``sram_last_index(insn)``  the highest buffer index touched (None: touches nothing), the
                        number the SRAM range check compares with the depth.
    ``dram_span(insn, cfg)``  ``(lo, hi)`` DRAM bytes a LOAD/STORE touches (None: nothing).

Error-check order of an instruction word (docs/microarch.md "FETCH"; the TLM's order)
    ``classify_word(isa, word)`` -> ``(insn or None, error code, message)``;
    ``dispatch_fault(insn)`` -> ``(error code, message)`` for the checks after the opcode
    and reserved bits; ``WordClassifier(isa)`` caches ``classify_word`` per word.

Scalar reference semantics of the ALU (Python ints, 32-bit wrap)
    ``INT32_MIN``, ``INT32_MAX``, ``wrap32(v)``, ``ALU_SCALAR`` (op name -> ``f(x, s)``),
    ``alu_scalar(op, x, s)`` (op code or name).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Union

import numpy as np

from hw import csr
from hw.isa import (ALU_OP_NAMES, ALU_OPS, BUFFER_NAMES, BUFFERS, INSN_BITS, OPCODE_NAMES, QUEUE_OF_OPCODE,
                    Instruction, Isa, opcode_of, unit_of)

__all__ = [
    "UNITS", "DEP_FLAGS", "POP_FLAGS", "PUSH_FLAGS", "TOKEN_QUEUES", "QueueEnds", "QUEUE_ENDS", "TOKEN_ROUTES",
    "QUEUE_BETWEEN", "LEGAL_FLAGS", "QUEUE_OF_OPCODE", "unit_of", "pops_of", "pushes_of",
    "AccIndex", "affine_indices", "affine_is_run", "affine_index", "affine_last", "alu_indices",
    "padded_tile_shape", "load_tile_shape", "Accesses", "load_access", "store_access", "alu_access",
    "insn_access", "Access", "footprint", "buffer_of", "acc_footprint", "alu_last_indices", "sram_last_index", "dram_span",
    "dispatch_fault", "classify_word", "WordClassifier",
    "INT32_MIN", "INT32_MAX", "wrap32", "ALU_SCALAR", "alu_scalar", "DST_BLIND_OPS",
]

# ---- unit topology and token queues ----------------------------------------------------------
UNITS: tuple[str, str, str] = ("load", "compute", "store")
POP_FLAGS: tuple[str, str] = ("pop_prev", "pop_next")
PUSH_FLAGS: tuple[str, str] = ("push_prev", "push_next")
DEP_FLAGS: tuple[str, str, str, str] = POP_FLAGS + PUSH_FLAGS
TOKEN_QUEUES: tuple[str, str, str, str] = ("l2c", "c2l", "c2s", "s2c")
# queue -> (producer unit, its push flag, consumer unit, its pop flag). Load's next stage is
# compute; compute's previous is load and next is store; store's previous is compute.
class QueueEnds(NamedTuple):
    """Who pushes a token queue and with which flag, who pops it and with which flag."""

    producer: str
    push_flag: str
    consumer: str
    pop_flag: str


QUEUE_ENDS: dict[str, QueueEnds] = {
    "l2c": QueueEnds("load", "push_next", "compute", "pop_prev"),
    "c2l": QueueEnds("compute", "push_prev", "load", "pop_next"),
    "c2s": QueueEnds("compute", "push_next", "store", "pop_prev"),
    "s2c": QueueEnds("store", "push_prev", "compute", "pop_next"),
}
TOKEN_ROUTES: dict[tuple[str, str], str] = {
    **{(p, pf): q for q, (p, pf, _, _) in QUEUE_ENDS.items()},
    **{(c, cf): q for q, (_, _, c, cf) in QUEUE_ENDS.items()},
}
QUEUE_BETWEEN: dict[tuple[str, str], str] = {(p, c): q for q, (p, _, c, _) in QUEUE_ENDS.items()}
LEGAL_FLAGS: dict[str, tuple[str, ...]] = {
    u: tuple(f for f in DEP_FLAGS if (u, f) in TOKEN_ROUTES) for u in UNITS}


def pops_of(insn: Instruction) -> list[str]:
    """Token queues ``insn`` pops from before it starts (flags towards a missing stage ignored)."""
    u = QUEUE_OF_OPCODE[insn.MNEMONIC]
    return [TOKEN_ROUTES[(u, f)] for f in POP_FLAGS if getattr(insn, f) and (u, f) in TOKEN_ROUTES]


def pushes_of(insn: Instruction) -> list[str]:
    """Token queues ``insn`` pushes to when it ends (flags towards a missing stage ignored)."""
    u = QUEUE_OF_OPCODE[insn.MNEMONIC]
    return [TOKEN_ROUTES[(u, f)] for f in PUSH_FLAGS if getattr(insn, f) and (u, f) in TOKEN_ROUTES]


# ---- footprints --------------------------------------------------------------------------------
# An accumulator index set as the models and the compiler use it: a slice for a contiguous run
# (cheap to index with), else an int64 index array in loop order.
AccIndex = Union[slice, np.ndarray]


def affine_indices(base: int, iter_out: int, iter_in: int, factor_out: int, factor_in: int) -> np.ndarray:
    """``base + i*factor_out + j*factor_in`` for ``i < iter_out, j < iter_in`` in loop order (int64)."""
    i = np.arange(iter_out, dtype=np.int64)[:, None]
    j = np.arange(iter_in, dtype=np.int64)[None, :]
    return (base + i * factor_out + j * factor_in).ravel()


def affine_is_run(iter_out: int, iter_in: int, factor_out: int, factor_in: int) -> bool:
    """True when ``i*factor_out + j*factor_in`` in loop order is 0, 1, 2, ... (a plain run of vectors)."""
    if iter_out * iter_in <= 1:
        return True
    if iter_in == 1:
        return factor_out == 1
    if iter_out == 1:
        return factor_in == 1
    return factor_in == 1 and factor_out == iter_in


def affine_index(base: int, iter_out: int, iter_in: int, factor_out: int, factor_in: int) -> AccIndex:
    """The indices of :func:`affine_indices`, as a slice when they are a plain run."""
    if affine_is_run(iter_out, iter_in, factor_out, factor_in):
        return slice(base, base + iter_out * iter_in)
    return affine_indices(base, iter_out, iter_in, factor_out, factor_in)


def affine_last(base: int, iter_out: int, iter_in: int, factor_out: int, factor_in: int) -> int:
    """The highest index of a non-empty affine loop (factors are unsigned: the last iteration's)."""
    return base + (iter_out - 1) * factor_out + (iter_in - 1) * factor_in


def alu_indices(insn: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """Destination and source accumulator indices of an ALU in loop order; source None for an immediate."""
    dst = affine_indices(insn.dst_base, insn.iter_out, insn.iter_in, insn.dst_factor_out, insn.dst_factor_in)
    if insn.use_imm:
        return dst, None
    return dst, affine_indices(insn.src_base, insn.iter_out, insn.iter_in, insn.src_factor_out,
                               insn.src_factor_in)


def padded_tile_shape(y_size: int, x_size: int, y_pad_0: int, y_pad_1: int, x_pad_0: int,
                      x_pad_1: int) -> tuple[int, int]:
    """``(rows, cols)`` of a LOAD's on-chip tile, padding included (stored contiguously)."""
    return y_pad_0 + y_size + y_pad_1, x_pad_0 + x_size + x_pad_1


def load_tile_shape(insn: Any) -> tuple[int, int]:
    """``(rows, cols)`` of a LOAD instruction's on-chip tile, padding included (stored contiguously)."""
    return padded_tile_shape(insn.y_size, insn.x_size, insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1)


# The accesses of one instruction in its on-chip buffer, given field by field (so the compiler's
# operation records, which carry the same fields, share them): ``(reads, writes)`` lists of
# :data:`AccIndex`. Reads are the entries whose *value* matters.
Accesses = tuple[list[AccIndex], list[AccIndex]]


def load_access(sram_base: int, rows: int, cols: int) -> Accesses:
    """A LOAD writes its padded ``rows x cols`` tile (:func:`padded_tile_shape`) contiguously from
    ``sram_base`` and reads nothing on chip."""
    return [], [slice(sram_base, sram_base + rows * cols)]


def store_access(sram_base: int, y_size: int, x_size: int) -> Accesses:
    """A STORE reads ``y_size*x_size`` vectors contiguously from ``sram_base`` and writes nothing on chip."""
    return [slice(sram_base, sram_base + y_size * x_size)], []


# The ALU ops whose result is a function of the operand alone (the destination's old value unused).
DST_BLIND_OPS: tuple[str, ...] = ("MOV", "CLZ")


def alu_access(op: int | str, dst_base: int, src_base: int, iter_out: int, iter_in: int, dst_factor_out: int,
               dst_factor_in: int, src_factor_out: int, src_factor_in: int, use_imm: bool) -> Accesses:
    """An ALU (``op`` by code or name) writes its destinations; it reads them too, except the ops of
    :data:`DST_BLIND_OPS`, whose result does not depend on the old value, and reads its source
    vectors unless the operand is the immediate. No iterations: nothing."""
    if iter_out * iter_in == 0:
        return [], []
    dst = affine_index(dst_base, iter_out, iter_in, dst_factor_out, dst_factor_in)
    reads = [] if op in DST_BLIND_OPS or ALU_OP_NAMES.get(op) in DST_BLIND_OPS else [dst]
    if not use_imm:
        reads.append(affine_index(src_base, iter_out, iter_in, src_factor_out, src_factor_in))
    return reads, [dst]


def insn_access(insn: Instruction) -> Accesses:
    """``(reads, writes)`` of ``insn`` in the buffer it works on (LOAD: the one it names; STORE, ALU:
    the accumulator); GEMM and the rest: nothing (see :func:`footprint`)."""
    n = insn.MNEMONIC
    if n == "LOAD":
        return load_access(insn.sram_base, *load_tile_shape(insn))
    if n == "STORE":
        return store_access(insn.sram_base, insn.y_size, insn.x_size)
    if n == "ALU":
        return alu_access(insn.alu_op, insn.dst_base, insn.src_base, insn.iter_out, insn.iter_in,
                          insn.dst_factor_out, insn.dst_factor_in, insn.src_factor_out, insn.src_factor_in,
                          insn.use_imm)
    return [], []


@dataclass(frozen=True)
class Access:
    """The entries of one buffer an instruction reads (whose value matters) and writes."""

    reads: frozenset[int]
    writes: frozenset[int]


_NOTHING = frozenset()


def _as_set(indices: list[AccIndex]) -> frozenset[int]:
    out: set[int] = set()
    for idx in indices:
        out.update(range(idx.start, idx.stop) if isinstance(idx, slice) else idx.tolist())
    return frozenset(out)


def footprint(insn: Instruction, uops: np.ndarray | None = None) -> dict[str, Access]:
    """Per buffer name (``"ACC"``, ``"INP"``, ``"WGT"``, ``"UOP"``), the entries ``insn`` reads and writes.

    Buffers it does not touch are absent. LOAD, STORE and ALU as :func:`insn_access` (LOAD in the
    buffer it names). GEMM reads its micro-ops ``[uop_begin, uop_end)``; what it touches in ACC,
    INP and WGT depends on their contents, so those are given only with ``uops`` (the micro-op
    buffer as rows (acc, inp, wgt)): it reads INP and WGT and accumulates into ACC (with
    ``reset`` it only writes ACC). Zero-size instructions touch nothing. Indices are as encoded
    (range checks are separate: :func:`sram_last_index`).
    """
    n = insn.MNEMONIC
    if n in ("LOAD", "STORE", "ALU"):
        reads, writes = insn_access(insn)
        access = Access(_as_set(reads), _as_set(writes))
        if not access.reads and not access.writes:
            return {}
        buf = BUFFER_NAMES.get(insn.buf, str(insn.buf)) if n == "LOAD" else "ACC"
        return {buf: access}
    if n == "GEMM":
        n_u = max(0, insn.uop_end - insn.uop_begin)
        if insn.iter_out * insn.iter_in * n_u == 0:
            return {}
        out = {"UOP": Access(frozenset(range(insn.uop_begin, insn.uop_end)), _NOTHING)}
        if uops is None:
            return out
        io, ii = insn.iter_out, insn.iter_in
        table = np.asarray(uops, dtype=np.int64)[insn.uop_begin:insn.uop_end]

        def walk(col: int, name: str) -> frozenset[int]:
            off = affine_indices(0, io, ii, getattr(insn, f"{name}_factor_out"), getattr(insn, f"{name}_factor_in"))
            return frozenset((off[:, None] + table[None, :, col]).ravel().tolist())
        acc = walk(0, "acc")
        out["ACC"] = Access(_NOTHING if insn.reset else acc, acc)
        if not insn.reset:
            out["INP"] = Access(walk(1, "inp"), _NOTHING)
            out["WGT"] = Access(walk(2, "wgt"), _NOTHING)
        return out
    return {}


def acc_footprint(insn: Instruction) -> tuple[frozenset[int], frozenset[int]]:
    """``(reads, writes)``: the accumulator entries ``insn`` reads (value used) and writes."""
    a = footprint(insn).get("ACC")
    return (a.reads, a.writes) if a is not None else (_NOTHING, _NOTHING)


def alu_last_indices(insn: Any) -> tuple[int | None, int | None]:
    """``(dst_last, src_last)``: the highest destination and source index of an ALU; ``src_last`` is
    None for an immediate operand, both are None when the loop has no iterations."""
    if insn.iter_out * insn.iter_in == 0:
        return None, None
    dst = affine_last(insn.dst_base, insn.iter_out, insn.iter_in, insn.dst_factor_out, insn.dst_factor_in)
    if insn.use_imm:
        return dst, None
    return dst, affine_last(insn.src_base, insn.iter_out, insn.iter_in, insn.src_factor_out, insn.src_factor_in)


def sram_last_index(insn: Instruction) -> int | None:
    """The highest on-chip buffer index ``insn`` touches, None when it touches nothing (or, for
    GEMM, when it depends on the micro-ops: GEMM is checked per iteration, ``hw.gemm_numpy``).

    docs/microarch.md "Data semantics": LOAD ``sram_base + rows*cols - 1`` of its padded tile (in
    the buffer it names), STORE ``sram_base + y_size*x_size - 1``, ALU the highest of
    :func:`alu_last_indices`. An index ``>=`` the buffer's depth is ``ERR_SRAM_RANGE``.
    """
    n = insn.MNEMONIC
    if n in ("LOAD", "STORE"):
        rows, cols = load_tile_shape(insn) if n == "LOAD" else (insn.y_size, insn.x_size)
        return insn.sram_base + rows * cols - 1 if rows * cols else None
    if n == "ALU":
        dst, src = alu_last_indices(insn)
        return dst if src is None else max(dst, src)
    return None


def buffer_of(insn: Instruction) -> str:
    """The buffer name a LOAD writes or a STORE reads (``"ACC"`` for a STORE)."""
    return BUFFER_NAMES.get(insn.buf, str(insn.buf)) if insn.MNEMONIC == "LOAD" else "ACC"


def dram_span(insn: Instruction, cfg: Any) -> tuple[int, int] | None:
    """``(lo, hi)``: the DRAM bytes ``[lo, hi)`` a LOAD or STORE touches (None: nothing).

    ``dram_base`` counts entries of the instruction's DRAM unit (``cfg.elem_bytes(buffer)`` for
    LOAD: an accumulator vector, input vector, weight block or micro-op; ``cfg.out_vec_bytes``
    for STORE); rows are ``x_stride`` entries apart.
    """
    n = insn.MNEMONIC
    if n not in ("LOAD", "STORE") or insn.y_size * insn.x_size == 0:
        return None
    vb = cfg.elem_bytes(buffer_of(insn)) if n == "LOAD" else cfg.out_vec_bytes
    lo = insn.dram_base * vb
    return lo, lo + ((insn.y_size - 1) * insn.x_stride + insn.x_size) * vb


# ---- the error-check order of a word ------------------------------------------------------------
def dispatch_fault(insn: Instruction) -> tuple[int, str]:
    """The dispatch checks after the opcode and reserved bits, first match wins (docs/microarch.md
    "FETCH"): LOAD/STORE flag towards a missing stage -> BAD_FIELD; LOAD/STORE buffer 3 ->
    BAD_OPCODE; STORE buffer other than ACC -> BAD_FIELD; STORE padding -> BAD_FIELD; ALU op above the
    last one defined -> BAD_OPCODE. ``(ERR_NONE, "")`` when the instruction passes (GEMM and LOAD into every buffer
    are executed; ``ERR_UNSUPPORTED`` is kept for future classes)."""
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
    return csr.ERR_NONE, ""


def classify_word(isa: Isa, word: int) -> tuple[Instruction | None, int, str]:
    """``(insn, ERR_NONE, "")`` for a word the hardware executes, else ``(insn or None, code, message)``.

    Order (first match wins): unknown opcode -> BAD_OPCODE (insn None); non-zero reserved bits
    -> BAD_OPCODE (insn None); then :func:`dispatch_fault` on the decoded fields.
    """
    name = OPCODE_NAMES.get(opcode_of(word))
    if name is None:
        return None, csr.ERR_BAD_OPCODE, f"unknown opcode {opcode_of(word)} (word 0x{word:032x})"
    used = isa.used_bits(name)
    if word >> used:
        return None, csr.ERR_BAD_OPCODE, (f"{name} has non-zero reserved bits [{INSN_BITS - 1}:{used}] "
                                          f"(word 0x{word:032x})")
    insn = isa.unpack(name, word)
    code, message = dispatch_fault(insn)
    return insn, code, message


class WordClassifier:
    """:func:`classify_word` for one ISA, cached by word (programs repeat words)."""

    def __init__(self, isa: Isa):
        self.isa = isa
        self._cache: dict[int, tuple[Instruction | None, int, str]] = {}

    def classify(self, word: int) -> tuple[Instruction | None, int, str]:
        """``(insn, code, message)`` as :func:`classify_word`."""
        hit = self._cache.get(word)
        if hit is None:
            hit = self._cache[word] = classify_word(self.isa, word)
        return hit


# ---- scalar reference semantics of the ALU --------------------------------------------------------
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def wrap32(v: int) -> int:
    """``v`` wrapped to 32-bit two's complement."""
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _shr(x: int, s: int) -> int:
    # s >= 0: arithmetic right shift, capped at 31 (the sign fills every bit);
    # s < 0: left shift by -s, 0 once -s >= 32.
    if s >= 0:
        return x >> min(s, 31)
    return 0 if -s >= 32 else wrap32(x << -s)


def _clip(x: int, s: int) -> int:
    # min(max(x, -s), s) with -s wrapping at 32 bits: s = INT_MIN gives INT_MIN.
    return min(max(x, wrap32(-s)), s)


# op name -> f(x, s): x the destination lane, s the operand lane (both 32-bit values); result wrapped.
ALU_SCALAR: dict[str, Callable[[int, int], int]] = {
    "ADD": lambda x, s: wrap32(x + s),
    "SUB": lambda x, s: wrap32(x - s),
    "MUL": lambda x, s: wrap32(x * s),
    "MIN": lambda x, s: min(x, s),
    "MAX": lambda x, s: max(x, s),
    "SHR": _shr,
    "CLIP": _clip,
    "MOV": lambda x, s: s,
    "MULHR": lambda x, s: wrap32((x * s + (1 << 30)) >> 31),
    "CLZ": lambda x, s: 32 - (s & 0xFFFFFFFF).bit_length(),
}
assert set(ALU_SCALAR) == set(ALU_OPS), "every ALU op has a scalar meaning"


def alu_scalar(op: int | str, x: int, s: int) -> int:
    """One lane of one ALU op (code or name) on 32-bit values; raises ValueError for an unknown op."""
    name = op if isinstance(op, str) else ALU_OP_NAMES.get(op)
    f = ALU_SCALAR.get(name) if name is not None else None
    if f is None:
        raise ValueError(f"unknown ALU op {op}")
    return f(x, s)
