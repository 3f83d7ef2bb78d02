"""The instruction set: every class, field, width and opcode, with encode, decode and disassembly.

Instructions are 128-bit little-endian words. Bits [2:0] hold the opcode and bits
[6:3] the four VTA dependency flags (pop prev, pop next, push prev, push next);
the rest of the layout depends on the class. Buffer index fields take their width
from the hardware config (``sram_index_bits``), so an :class:`Isa` is built per
config. This module imports nothing of the project: it only reads attributes of the
config object it is given.

Semantics shared by every model (golden, TLM, RTL):

* LOAD copies a 2-D tile of ``y_size`` rows of ``x_size`` vectors from DRAM (row
  ``r`` starts ``r * x_stride`` vectors after ``dram_base``) into a buffer, surrounded
  by zero padding: the on-chip tile is ``(y_pad_0 + y_size + y_pad_1)`` rows of
  ``(x_pad_0 + x_size + x_pad_1)`` vectors stored contiguously from ``sram_base``.
  ``dram_base`` counts vectors of the destination buffer's DRAM element size.
* STORE copies ``y_size`` x ``x_size`` accumulator vectors from ``sram_base``
  (contiguous) to DRAM (strided by ``x_stride``), narrowing each lane to the output
  width as a C cast would (wrap-around). Padding fields must be zero.
* ALU runs ``for i < iter_out: for j < iter_in:`` ``acc[d] = op(acc[d], s)`` with
  ``d = dst_base + i*dst_factor_out + j*dst_factor_in`` and ``s`` either the
  sign-extended immediate or ``acc[src_base + i*src_factor_out + j*src_factor_in]``,
  strictly in loop order (a write is seen by later reads). Arithmetic wraps at 32 bits.
  MULHR is the rounding multiply-high of fixed-point requantization (gemmlowp, TFLite):
  ``(x * s + 2**30) >> 31`` on the exact 64-bit product (round half up), wrapped to 32 bits.
  CLZ is the leading-zero count of the operand's 32-bit pattern, ``32`` for 0 and ``0`` for a
  negative ``s``; like MOV it ignores the destination's old value. With SHR by a vector operand
  it normalizes a value to ``[2**30, 2**31)``, the start of Newton reciprocal and square-root steps.
* GEMM (VTA semantics, with VTA's micro-op buffer): ``for i < iter_out: for j < iter_in:
  for u in [uop_begin, uop_end):`` with the micro-op ``uop[u] = (acc, inp, wgt)``,
  ``a = uop.acc + i*acc_factor_out + j*acc_factor_in`` (likewise ``x`` from ``uop.inp`` and the
  inp factors, ``w`` from ``uop.wgt`` and the wgt factors): ``acc[a] = 0`` when ``reset``, else
  ``acc[a][n][o] += sum_k inp[x][n][k] * wgt[w][o][k]`` (n < BATCH, o < BLOCK_OUT, k < BLOCK_IN;
  int8 x int8 summed into the int32 lane, wrapping at 32 bits), in loop order (a block written
  is seen by later iterations). The micro-ops name every (acc, inp, wgt) triple of a tile
  once, e.g. every kernel tap of a 3x3 window for one output row; the two affine loop levels
  walk them over more rows and channel blocks, so one instruction covers a whole convolution
  tile. A micro-op is a 16-byte little-endian word (:data:`UOP_BYTES`): ``acc`` index in bits
  [15:0], ``inp`` in [31:16], ``wgt`` in [47:32], the rest ignored; LOAD puts micro-ops into the
  micro-op buffer (``buf=UOP``) from DRAM like any other tile.
* LOAD's DRAM unit is the destination buffer's entry: an accumulator vector (LANES int32), an
  input vector (BATCH x BLOCK_IN int8), a weight block (BLOCK_OUT x BLOCK_IN int8, row o = the
  weights of output lane o) or a micro-op (16 bytes); padding writes zero entries.
* FINISH ends the program (of its core); it travels through the compute queue, as in VTA.
* BARRIER (several cores) travels like FINISH through the compute queue; FETCH dispatches nothing
  after it until it completes. The compute unit waits until its core's loads and stores have
  drained (so DRAM written before it is visible after it on every core), then until every core
  of the accelerator has reached a BARRIER; all of them complete together. A core that FINISHes
  while another waits at a BARRIER is an error (ERR_BARRIER). On one core it only drains.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, Callable, ClassVar, Iterable, Union

INSN_BITS = 128
INSN_BYTES = INSN_BITS // 8

OPCODES: dict[str, int] = {"LOAD": 0, "STORE": 1, "GEMM": 2, "FINISH": 3, "ALU": 4, "BARRIER": 5}
ALU_OPS: dict[str, int] = {"ADD": 0, "SUB": 1, "MUL": 2, "MIN": 3, "MAX": 4, "SHR": 5, "CLIP": 6, "MOV": 7,
                           "MULHR": 8, "CLZ": 9}
BUFFERS: dict[str, int] = {"ACC": 0, "INP": 1, "WGT": 2, "UOP": 3}
# Which unit's queue each opcode is dispatched to.
QUEUE_OF_OPCODE: dict[str, str] = {"LOAD": "load", "STORE": "store", "GEMM": "compute",
                                   "ALU": "compute", "FINISH": "compute", "BARRIER": "compute"}

ALU_OP_NAMES = {v: k for k, v in ALU_OPS.items()}
BUFFER_NAMES = {v: k for k, v in BUFFERS.items()}
OPCODE_NAMES = {v: k for k, v in OPCODES.items()}

# Fixed field widths (the buffer index width comes from the config).
DRAM_BASE_BITS = 32
SIZE_BITS = 16
PAD_BITS = 4
ALU_ITER_BITS = 14
GEMM_ITER_BITS = 14
IMM_BITS = 16
ALU_OP_BITS = 4
BUF_BITS = 2
OPCODE_BITS = 3  # the opcode is the low field of every class, so a word's class is known before decoding

# A micro-op: one 16-byte word in DRAM, three 16-bit index fields from bit 0 (the rest ignored).
UOP_BYTES = 16
UOP_FIELDS: tuple[str, str, str] = ("acc", "inp", "wgt")
UOP_FIELD_BITS = 16


class IsaError(ValueError):
    """An instruction that cannot be encoded, decoded or executed as written."""


@dataclass(frozen=True, kw_only=True)
class Insn:
    """Base of every instruction: the four dependency-token flags."""

    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    MNEMONIC: ClassVar[str] = ""

    def deps_text(self) -> str:
        flags = [n for n in ("pop_prev", "pop_next", "push_prev", "push_next") if getattr(self, n)]
        return ("  [" + " ".join(flags) + "]") if flags else ""


@dataclass(frozen=True, kw_only=True)
class Load(Insn):
    """DRAM -> on-chip buffer, 2-D with stride and zero padding."""

    MNEMONIC: ClassVar[str] = "LOAD"
    buf: int = BUFFERS["ACC"]
    sram_base: int = 0
    dram_base: int = 0
    y_size: int = 1
    x_size: int = 1
    x_stride: int = 1
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0


@dataclass(frozen=True, kw_only=True)
class Store(Insn):
    """Accumulator buffer -> DRAM with the narrowing cast, 2-D with stride."""

    MNEMONIC: ClassVar[str] = "STORE"
    buf: int = BUFFERS["ACC"]
    sram_base: int = 0
    dram_base: int = 0
    y_size: int = 1
    x_size: int = 1
    x_stride: int = 1
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0


@dataclass(frozen=True, kw_only=True)
class Alu(Insn):
    """Vector ALU over the accumulator buffer with a two-level affine loop."""

    MNEMONIC: ClassVar[str] = "ALU"
    alu_op: int = ALU_OPS["ADD"]
    use_imm: bool = False
    iter_out: int = 1
    iter_in: int = 1
    dst_base: int = 0
    src_base: int = 0
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    imm: int = 0


@dataclass(frozen=True, kw_only=True)
class Gemm(Insn):
    """Matrix multiply-accumulate over micro-ops ``[uop_begin, uop_end)`` in a two-level affine loop."""

    MNEMONIC: ClassVar[str] = "GEMM"
    reset: bool = False
    uop_begin: int = 0
    uop_end: int = 1
    iter_out: int = 1
    iter_in: int = 1
    acc_factor_out: int = 0
    acc_factor_in: int = 0
    inp_factor_out: int = 0
    inp_factor_in: int = 0
    wgt_factor_out: int = 0
    wgt_factor_in: int = 0


@dataclass(frozen=True, kw_only=True)
class Finish(Insn):
    """End of program: the accelerator raises DONE once every unit has drained."""

    MNEMONIC: ClassVar[str] = "FINISH"


@dataclass(frozen=True, kw_only=True)
class Barrier(Insn):
    """Wait until this core's loads and stores have drained and every core has reached a BARRIER."""

    MNEMONIC: ClassVar[str] = "BARRIER"


Instruction = Union[Load, Store, Alu, Gemm, Finish, Barrier]
INSN_CLASSES: dict[str, type] = {"LOAD": Load, "STORE": Store, "GEMM": Gemm, "FINISH": Finish, "ALU": Alu,
                                 "BARRIER": Barrier}


@dataclass(frozen=True)
class Field:
    """One bit field of an instruction word."""

    name: str
    lo: int
    width: int
    signed: bool = False

    @property
    def hi(self) -> int:
        return self.lo + self.width - 1

    @property
    def lo_value(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def hi_value(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1


def _layout(spec: Iterable[tuple[str, int] | tuple[str, int, bool]]) -> tuple[Field, ...]:
    out, lo = [], 0
    for item in spec:
        name, width = item[0], item[1]
        signed = bool(item[2]) if len(item) > 2 else False
        out.append(Field(name, lo, width, signed))
        lo += width
    return tuple(out)


def opcode_of(word: int) -> int:
    """The opcode field of a 128-bit instruction word (the low bits of every class)."""
    return word & ((1 << OPCODE_BITS) - 1)


def with_opcode(word: int, opcode: int) -> int:
    """``word`` with its opcode field replaced by ``opcode`` (cut to the field's width)."""
    mask = (1 << OPCODE_BITS) - 1
    return (word & ~mask) | (opcode & mask)


def unit_of(insn: Instruction) -> str:
    """The unit ('load', 'compute' or 'store') whose queue executes ``insn``."""
    return QUEUE_OF_OPCODE[insn.MNEMONIC]


class Isa:
    """Encoder, decoder and disassembler for one hardware config."""

    def __init__(self, cfg: Any):
        s = int(cfg.sram_index_bits)
        self.sram_index_bits = s
        self.config_name = getattr(cfg, "name", "?")
        head = [("opcode", OPCODE_BITS), ("pop_prev", 1), ("pop_next", 1), ("push_prev", 1), ("push_next", 1)]
        mem = head + [("buf", BUF_BITS), ("sram_base", s), ("dram_base", DRAM_BASE_BITS),
                      ("y_size", SIZE_BITS), ("x_size", SIZE_BITS), ("x_stride", SIZE_BITS),
                      ("y_pad_0", PAD_BITS), ("y_pad_1", PAD_BITS), ("x_pad_0", PAD_BITS), ("x_pad_1", PAD_BITS)]
        alu = head + [("alu_op", ALU_OP_BITS), ("use_imm", 1), ("iter_out", ALU_ITER_BITS),
                      ("iter_in", ALU_ITER_BITS), ("dst_base", s), ("src_base", s),
                      ("dst_factor_out", s), ("dst_factor_in", s), ("src_factor_out", s),
                      ("src_factor_in", s), ("imm", IMM_BITS, True)]
        u = max(1, (int(cfg.uop_depth) - 1).bit_length())
        self.uop_index_bits = u
        gemm = head + [("reset", 1), ("uop_begin", u), ("uop_end", u + 1),
                       ("iter_out", GEMM_ITER_BITS), ("iter_in", GEMM_ITER_BITS),
                       ("acc_factor_out", s), ("acc_factor_in", s), ("inp_factor_out", s),
                       ("inp_factor_in", s), ("wgt_factor_out", s), ("wgt_factor_in", s)]
        self.layouts: dict[str, tuple[Field, ...]] = {
            "LOAD": _layout(mem), "STORE": _layout(mem), "ALU": _layout(alu),
            "GEMM": _layout(gemm), "FINISH": _layout(head), "BARRIER": _layout(head),
        }
        for name, lay in self.layouts.items():
            used = lay[-1].hi + 1
            if used > INSN_BITS:
                raise IsaError(f"config '{self.config_name}': {name} needs {used} bits with "
                               f"{s}-bit buffer indices and {u}-bit micro-op indices, more than {INSN_BITS}")
        self._by_name = {name: {f.name: f for f in lay} for name, lay in self.layouts.items()}
        # Per class: [(name, lo, mask, sign bit or 0, is flag)] for every field after the opcode,
        # precomputed because decoding sits on the models' dispatch path.
        # and for encoding (a Program's binary is encoded whenever its DRAM image is built)
        self._pack_plan: dict[str, list[tuple[str, int, int, int, int]]] = {
            name: [(f.name, f.lo, (1 << f.width) - 1, f.lo_value, f.hi_value) for f in lay[1:]]
            for name, lay in self.layouts.items()}
        # every field of a class read in one call (encoding a long stream is mostly attribute reads); each
        # class has the four token flags after the opcode, so the getter always returns a tuple
        self._read_fields: dict[str, Callable[[Any], tuple[Any, ...]]] = {
            name: attrgetter(*[f.name for f in lay[1:]]) for name, lay in self.layouts.items()}
        self._unpack_plan: dict[str, list[tuple[str, int, int, int, bool]]] = {
            name: [(f.name, f.lo, (1 << f.width) - 1, (1 << (f.width - 1)) if f.signed else 0, f.width == 1)
                   for f in lay[1:]]
            for name, lay in self.layouts.items()}

    # ---- encoding ------------------------------------------------------------
    def field(self, mnemonic: str, name: str) -> Field:
        return self._by_name[mnemonic][name]

    def set_field(self, word: int, mnemonic: str, name: str, value: int) -> int:
        """``word`` with field ``name`` of class ``mnemonic`` set to ``value`` (cut to the field's
        width, unchecked): how a malformed word is made from a valid one."""
        f = self.field(mnemonic, name)
        mask = ((1 << f.width) - 1) << f.lo
        return (word & ~mask) | ((value << f.lo) & mask)

    def used_bits(self, mnemonic: str) -> int:
        """Bits of the word a class uses; the bits above must be zero."""
        return self.layouts[mnemonic][-1].hi + 1

    def encode_word(self, insn: Instruction) -> int:
        """Encode one instruction to a 128-bit integer; raises IsaError if a field does not fit."""
        name = insn.MNEMONIC
        word = OPCODES[name]
        for (fname, lo, mask, lo_v, hi_v), v in zip(self._pack_plan[name], self._read_fields[name](insn)):
            v = int(v)
            if not lo_v <= v <= hi_v:
                f = self._by_name[name][fname]
                kind = "signed" if f.signed else "unsigned"
                raise IsaError(f"{name}.{f.name}: value {v} does not fit the {f.width}-bit {kind} field "
                               f"({f.lo_value}..{f.hi_value})")
            word |= (v & mask) << lo
        return word

    def encode(self, insn: Instruction) -> bytes:
        """Encode one instruction to 16 little-endian bytes."""
        return self.encode_word(insn).to_bytes(INSN_BYTES, "little")

    def encode_stream(self, insns: Iterable[Instruction]) -> bytes:
        """The little-endian words of ``insns``; a field out of range is an IsaError naming the instruction."""
        out = []
        for k, insn in enumerate(insns):
            try:
                out.append(self.encode(insn))
            except IsaError as e:
                raise IsaError(f"instruction {k}: {e}") from None
        return b"".join(out)

    # ---- decoding ------------------------------------------------------------
    def decode_word(self, word: int, index: int = 0) -> Instruction:
        """Decode a 128-bit integer; raises IsaError naming ``index`` on an unknown opcode,
        an unknown ALU op or buffer, or reserved bits that are not zero."""
        op = opcode_of(word)
        name = OPCODE_NAMES.get(op)
        if name is None:
            raise IsaError(f"instruction {index}: unknown opcode {op} (word 0x{word:032x})")
        if word >> self.used_bits(name):
            raise IsaError(f"instruction {index}: {name} has non-zero reserved bits "
                           f"[{INSN_BITS - 1}:{self.used_bits(name)}] (word 0x{word:032x})")
        insn = self.unpack(name, word)
        self.check(insn, index)
        return insn

    def unpack(self, mnemonic: str, word: int) -> Instruction:
        """The instruction of class ``mnemonic`` whose fields are the bits of ``word``, unchecked
        (the opcode and reserved bits are the caller's business; values may be illegal)."""
        kw: dict[str, Any] = {}
        for fname, lo, mask, sign, flag in self._unpack_plan[mnemonic]:
            v = (word >> lo) & mask
            if sign and v & sign:
                v -= sign << 1
            kw[fname] = bool(v) if flag else v
        return INSN_CLASSES[mnemonic](**kw)

    def decode(self, data: bytes, index: int = 0) -> Instruction:
        if len(data) != INSN_BYTES:
            raise IsaError(f"instruction {index}: {len(data)} bytes, expected {INSN_BYTES}")
        return self.decode_word(int.from_bytes(data, "little"), index)

    def decode_stream(self, data: bytes) -> list[Instruction]:
        """Decode a whole instruction binary; raises IsaError on a partial word or bad instruction."""
        if len(data) % INSN_BYTES:
            raise IsaError(f"{len(data)} bytes is not a whole number of {INSN_BYTES}-byte instructions "
                           f"(truncated after instruction {len(data) // INSN_BYTES})")
        return [self.decode(data[i:i + INSN_BYTES], i // INSN_BYTES) for i in range(0, len(data), INSN_BYTES)]

    # ---- static checks shared by every model ---------------------------------
    def check(self, insn: Instruction, index: int = 0) -> None:
        """Reject instructions that encode but make no sense for the hardware."""
        name = insn.MNEMONIC
        if name == "LOAD" and (insn.pop_prev or insn.push_prev):
            raise IsaError(f"instruction {index}: LOAD has no previous stage to pop from or push to")
        if name == "STORE" and (insn.pop_next or insn.push_next):
            raise IsaError(f"instruction {index}: STORE has no next stage to pop from or push to")
        if name in ("LOAD", "STORE") and insn.buf not in BUFFER_NAMES:
            raise IsaError(f"instruction {index}: {name} names unknown buffer {insn.buf}")
        if name == "STORE" and insn.buf != BUFFERS["ACC"]:
            raise IsaError(f"instruction {index}: STORE reads only the accumulator buffer (buf={insn.buf})")
        if name == "STORE" and (insn.y_pad_0 or insn.y_pad_1 or insn.x_pad_0 or insn.x_pad_1):
            raise IsaError(f"instruction {index}: STORE cannot pad (padding fields must be zero)")
        if name == "ALU" and insn.alu_op not in ALU_OP_NAMES:
            raise IsaError(f"instruction {index}: unknown ALU op {insn.alu_op}")

    # ---- disassembly ----------------------------------------------------------
    def disasm(self, insn: Instruction, index: int | None = None) -> str:
        """One line of readable assembly."""
        pre = f"{index:6d}:  " if index is not None else ""
        n = insn.MNEMONIC
        if n in ("LOAD", "STORE"):
            buf = BUFFER_NAMES.get(insn.buf, str(insn.buf)).lower()
            pads = (insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1)
            pad = f" pad={','.join(map(str, pads))}" if any(pads) else ""
            arrow = f"{buf}[{insn.sram_base}] <- dram[{insn.dram_base}]" if n == "LOAD" else \
                f"dram[{insn.dram_base}] <- {buf}[{insn.sram_base}]"
            body = f"{n:<6} {arrow} y={insn.y_size} x={insn.x_size} stride={insn.x_stride}{pad}"
        elif n == "ALU":
            op = ALU_OP_NAMES.get(insn.alu_op, str(insn.alu_op))
            dst = f"acc[{insn.dst_base}+{insn.dst_factor_out}i+{insn.dst_factor_in}j]"
            src = f"imm={insn.imm}" if insn.use_imm else \
                f"acc[{insn.src_base}+{insn.src_factor_out}i+{insn.src_factor_in}j]"
            body = f"{n:<6} {op:<4} {dst}, {src} i<{insn.iter_out} j<{insn.iter_in}"
        elif n == "GEMM":
            lhs = f"acc[u.acc+{insn.acc_factor_out}i+{insn.acc_factor_in}j]"
            rhs = "0" if insn.reset else (f"{lhs} + inp[u.inp+{insn.inp_factor_out}i+{insn.inp_factor_in}j] x "
                                         f"wgt[u.wgt+{insn.wgt_factor_out}i+{insn.wgt_factor_in}j]")
            body = (f"{n:<6} {lhs} = {rhs} u<-uop[{insn.uop_begin}:{insn.uop_end}] "
                    f"i<{insn.iter_out} j<{insn.iter_in}")
        else:
            body = n
        return pre + body + insn.deps_text()

    def disasm_stream(self, insns: Iterable[Instruction], sections: Iterable[dict[str, Any]] | None = None) -> str:
        """The listing, one line per instruction; ``sections`` (a Program's ``meta["sections"]``:
        ``name``, ``first``) put a ``; section NAME`` line before each section's first instruction."""
        heads: dict[int, list[str]] = {}
        for s in sections or []:
            heads.setdefault(int(s["first"]), []).append(f"; section {s['name']}")
        lines = []
        for k, i in enumerate(insns):
            lines += heads.get(k, [])
            lines.append(self.disasm(i, k))
        return "\n".join(lines)


def encode_uops(uops: Iterable[tuple[int, int, int]]) -> bytes:
    """Micro-ops ``(acc, inp, wgt)`` as the bytes LOAD reads into the micro-op buffer (16 each);
    raises IsaError when an index does not fit its 16-bit field."""
    out = bytearray()
    for k, uop in enumerate(uops):
        word = 0
        for n, (name, v) in enumerate(zip(UOP_FIELDS, uop)):
            v = int(v)
            if not 0 <= v < (1 << UOP_FIELD_BITS):
                raise IsaError(f"micro-op {k}: {name} index {v} does not fit {UOP_FIELD_BITS} bits")
            word |= v << (n * UOP_FIELD_BITS)
        out += word.to_bytes(UOP_BYTES, "little")
    return bytes(out)


def decode_uops(data: bytes) -> list[tuple[int, int, int]]:
    """The ``(acc, inp, wgt)`` micro-ops of ``data`` (whole 16-byte words; the ignored bits dropped)."""
    if len(data) % UOP_BYTES:
        raise IsaError(f"{len(data)} bytes is not a whole number of {UOP_BYTES}-byte micro-ops")
    mask = (1 << UOP_FIELD_BITS) - 1
    out = []
    for i in range(0, len(data), UOP_BYTES):
        w = int.from_bytes(data[i:i + UOP_BYTES], "little")
        out.append((w & mask, (w >> UOP_FIELD_BITS) & mask, (w >> 2 * UOP_FIELD_BITS) & mask))
    return out


def insn_fields(insn: Instruction) -> dict[str, Any]:
    """The instruction's fields as a dict (for JSON reports)."""
    d = {f.name: getattr(insn, f.name) for f in fields(insn)}
    d["op"] = insn.MNEMONIC
    return d
