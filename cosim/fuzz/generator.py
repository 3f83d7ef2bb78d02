"""Seeded random generator of valid instruction-level Programs, and a validity checker.

A generated Program is *valid by construction*: every instruction is in range for the
config and the layout, every buffer entry (accumulator, input, weight, micro-op) is
written before it is read, and the dependency tokens order every pair of instructions
of different units that touch a common entry of any buffer (RAW, WAR, WAW) in program
order, so the concurrent hardware computes exactly what the sequential reference
computes. GEMMs walk random micro-op ranges with random factors (repeated accumulator
indices make distance-1 and longer read-after-write hazards); the generator keeps a
shadow of the micro-op buffer in program order, which is what a GEMM's footprint
depends on (``hw.isa_semantics.footprint(insn, uops)``). Tokens are also
deadlock-free by construction: every pop is matched (FIFO) by an earlier push, and
in program order no token queue ever holds more than ``token_queue_depth`` tokens,
so every wait of an instruction is on an earlier instruction (see ``check_program``).

How tokens are placed (``_Builder.add``): for a new instruction ``b`` of unit U and an
earlier conflicting instruction ``a`` of unit V not yet ordered before ``b``:

* V is U's neighbour (load-compute, compute-store): drain the token queue V->U with
  no-op instructions of U that pop it until the next unmatched push is at or after
  ``a`` (then ``b`` pops that one) or the queue is empty (then V's last instruction,
  or a new no-op of V when the queue-depth rule forbids, pushes and ``b`` pops);
* else (load-store): a compute no-op bridges: it is ordered after ``a``, ``b`` after it.

On top of that, random extra push/pop pairs make the pattern varied. No-ops are
instructions with a zero loop count or tile size, with random other fields (the
microarch only range-checks instructions that touch something).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from hw.analysis import balance_problem, finish_problem, happens_before, program_order_problem
from hw.config import HwConfig
from hw.isa import (ALU_OP_NAMES, ALU_OPS, BUFFER_NAMES, BUFFERS, UOP_BYTES, Alu, Finish, Gemm, Instruction, Load,
                    Store, decode_uops, encode_uops, unit_of)
from hw.assembler import Assembler
from hw.isa_semantics import (DST_BLIND_OPS, INT32_MAX, INT32_MIN, QUEUE_BETWEEN, TOKEN_QUEUES, UNITS, Access,
                              affine_last, footprint, load_tile_shape)
from hw.isa_semantics import QUEUE_ENDS as QUEUES  # queue -> (producer, push flag, consumer, pop flag)
from hw.program import Program

INT_MIN, INT_MAX = INT32_MIN, INT32_MAX
EDGE_INT32 = [0, 1, -1, 2, -2, INT_MIN, INT_MAX, INT_MIN + 1, INT_MAX - 1, 127, 128, -128, -129, 255, 256,
              32767, -32768, 65535, 65536, 31, 32, 33, -31, -32, -33, 0x55555555, -0x55555556]
EDGE_IMM = [0, 1, -1, 2, -2, -32768, 32767, -32767, 31, 32, 33, 63, -31, -32, -33, -63, 127, -128, 255, 16, -16]


@dataclass
class Item:
    """One instruction under construction: class, mutable fields, DRAM region, acc footprint."""

    cls: type
    fields: dict[str, Any]
    region: str | None = None      # dram_base is relative to this region (vectors) until finalised
    reads: frozenset = frozenset()
    writes: frozenset = frozenset()

    @property
    def unit(self) -> str:
        return unit_of(self.cls)  # type: ignore[arg-type]

    def flag(self, name: str) -> bool:
        return bool(self.fields.get(name, False))


@dataclass
class GenOptions:
    """Knobs of the generator (defaults keep Programs small enough for fast RTL runs)."""

    max_body: int = 24            # random instructions after the initialisation
    max_iters: int = 8            # ALU loop bounds (occasionally up to 4x this)
    gemm_prob: float = 0.4        # share of random body instructions that are GEMM or its buffer loads
    extra_token_prob: float = 0.25
    noop_prob: float = 0.06
    edge_prob: float = 0.1        # zero-size tiles, overlapping rows, edge strides


def conflict(a: Item, b: Item) -> bool:
    return bool(a.writes & (b.reads | b.writes) or a.reads & b.writes)


_KEY_SHIFT = 20  # a footprint key: buffer code << 20 | index (indices stay below 2**16)


class Footprint(NamedTuple):
    """The footprint keys an instruction reads and writes."""

    reads: frozenset[int]
    writes: frozenset[int]


class Window(NamedTuple):
    """A range of buffer entries a generated Program's GEMM operands live in."""

    base: int
    size: int


# a LOAD's padding as the generator keeps it, a list in this order (top, bottom, left, right)
PAD_FIELDS = ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1")
TOP, BOTTOM, LEFT, RIGHT = range(4)


def _padded_entries(pads: list[int], y: int, x: int) -> int:
    """The buffer entries of a ``y`` x ``x`` tile with ``pads`` around it."""
    return (pads[TOP] + y + pads[BOTTOM]) * (pads[LEFT] + x + pads[RIGHT])


def _pad_fields(pads: list[int]) -> dict[str, int]:
    """``pads`` as a LOAD's fields."""
    return dict(zip(PAD_FIELDS, pads, strict=True))


def keyed_footprint(insn: Instruction, uops: np.ndarray | None) -> Footprint:
    """``(reads, writes)`` of ``insn`` over every buffer as keys ``buffer << 20 | index``; a GEMM's
    accumulator, input and weight entries come from the micro-op buffer ``uops`` (rows acc, inp, wgt);
    with ``uops`` None a GEMM conservatively touches every entry below 2**16 of those buffers."""
    fp = footprint(insn, uops)
    if insn.MNEMONIC == "GEMM" and uops is None and fp:
        every = frozenset(range(1 << 16))
        fp = dict(fp)
        for name in ("ACC", "INP", "WGT"):
            fp[name] = Access(every if name != "ACC" or not insn.reset else frozenset(), every if name == "ACC"
                              else frozenset())
    reads: set[int] = set()
    writes: set[int] = set()
    for name, acc in fp.items():
        hi = BUFFERS[name] << _KEY_SHIFT
        reads.update(hi | i for i in acc.reads)
        writes.update(hi | i for i in acc.writes)
    return Footprint(frozenset(reads), frozenset(writes))


def key_text(key: int) -> str:
    """``acc[12]`` for a footprint key."""
    return f"{BUFFER_NAMES[key >> _KEY_SHIFT].lower()}[{key & ((1 << _KEY_SHIFT) - 1)}]"


def load_entries(insn: Load) -> list[tuple[int, int | None]]:
    """``(buffer index, DRAM entry index or None for padding)`` of every entry a LOAD writes, in order."""
    rows, cols = load_tile_shape(insn)
    out, k = [], insn.sram_base
    for rr in range(rows):
        for cc in range(cols):
            y, x = rr - insn.y_pad_0, cc - insn.x_pad_0
            inside = 0 <= y < insn.y_size and 0 <= x < insn.x_size
            out.append((k, insn.dram_base + y * insn.x_stride + x if inside else None))
            k += 1
    return out


class _Builder:
    """Program order under construction, with vector clocks and token bookkeeping."""

    def __init__(self, cfg: HwConfig, rng: np.random.Generator, opts: GenOptions):
        self.cfg, self.rng, self.opts = cfg, rng, opts
        self.items: list[Item] = []
        self.vc: list[dict[str, int]] = []           # per item: unit -> last item of it done before it starts
        self.pushes: dict[str, list[int]] = {q: [] for q in QUEUES}
        self.pops: dict[str, list[int]] = {q: [] for q in QUEUES}
        self.cnt: dict[str, list[int]] = {q: [] for q in QUEUES}  # tokens held after each item, program order
        self.last: dict[str, int] = {u: -1 for u in UNITS}

    # ---- bookkeeping -------------------------------------------------------------
    def vc_end(self, k: int) -> dict[str, int]:
        d = dict(self.vc[k])
        d[self.items[k].unit] = k
        return d

    def outstanding(self, q: str) -> int:
        return len(self.pushes[q]) - len(self.pops[q])

    def clock_for(self, unit: str, pops: set[str]) -> dict[str, int]:
        """The vector clock a new instruction of ``unit`` popping ``pops`` would start with."""
        vc = self.vc_end(self.last[unit]) if self.last[unit] >= 0 else {u: -1 for u in UNITS}
        for q in pops:
            a = self.pushes[q][len(self.pops[q])]
            vc = {u: max(vc[u], v) for u, v in self.vc_end(a).items()}
        return vc

    def append(self, it: Item, pops: set[str], pushes: set[str] = frozenset()) -> int:
        u = it.unit
        for q in pops:
            it.fields[QUEUES[q].pop_flag] = True
        for q in pushes:
            it.fields[QUEUES[q].push_flag] = True
        vc = self.clock_for(u, pops)
        k = len(self.items)
        self.items.append(it)
        self.vc.append(vc)
        for q in QUEUES:
            c = self.cnt[q][-1] if self.cnt[q] else 0
            if q in pops:
                self.pops[q].append(k)
                c -= 1
            if q in pushes:
                self.pushes[q].append(k)
                c += 1
            self.cnt[q].append(c)
        self.last[u] = k
        return k

    def can_add_push(self, q: str, k: int) -> bool:
        """May item ``k`` (the producer's last) push on ``q`` without breaking the depth rule?"""
        it = self.items[k]
        return not it.flag(QUEUES[q].push_flag) and max(self.cnt[q][k:]) + 1 <= self.cfg.token_queue_depth

    def add_push(self, q: str, k: int) -> None:
        self.items[k].fields[QUEUES[q].push_flag] = True
        self.pushes[q].append(k)  # k is the producer's last item, so FIFO order is kept
        self.cnt[q][k:] = [c + 1 for c in self.cnt[q][k:]]

    # ---- no-ops --------------------------------------------------------------------
    def noop(self, unit: str) -> Item:
        """An instruction of ``unit`` that touches nothing (zero loop count or tile size)."""
        r, bits = self.rng, self.cfg.sram_index_bits
        wild = r.random() < 0.5  # random far-away bases: nothing is touched, so nothing is range-checked
        if unit == "compute":
            f = dict(alu_op=int(r.integers(0, 8)), use_imm=bool(r.integers(0, 2)),
                     iter_out=0, iter_in=int(r.integers(0, 4)), imm=int(r.choice(EDGE_IMM)))
            if r.random() < 0.5:
                f["iter_out"], f["iter_in"] = f["iter_in"], 0
            if wild:
                f.update({k: int(r.integers(0, 1 << bits)) for k in
                          ("dst_base", "src_base", "dst_factor_out", "dst_factor_in", "src_factor_out",
                           "src_factor_in")})
            return Item(Alu, f)
        cls = Load if unit == "load" else Store
        y, x = (0, int(r.integers(0, 3))) if r.random() < 0.5 else (int(r.integers(1, 3)), 0)
        f = dict(y_size=y, x_size=x, x_stride=int(r.integers(0, 4)))
        if wild:
            f.update(sram_base=int(r.integers(0, 1 << bits)), dram_base=int(r.integers(0, 1 << 32)))
        return Item(cls, f)

    # ---- ordering ------------------------------------------------------------------
    def order_direct(self, a: int, unit: str, pops: set[str]) -> None:
        """Make the next ``unit`` instruction (popping ``pops``) start after item ``a`` (a neighbour's)."""
        v = self.items[a].unit
        q = QUEUE_BETWEEN[(v, unit)]
        assert q not in pops, "one pop per queue and instruction"
        while True:
            if self.clock_for(unit, pops)[v] >= a:
                return
            if self.outstanding(q) == 0:
                lv = self.last[v]
                if self.can_add_push(q, lv) and self.rng.random() < 0.85:
                    self.add_push(q, lv)
                else:
                    self.append(self.noop(v), set(), {q})
                pops.add(q)
                return
            if self.pushes[q][len(self.pops[q])] >= a:
                pops.add(q)
                return
            self.append(self.noop(unit), {q})  # drain a token pushed before ``a``

    def add(self, it: Item) -> int:
        """Append ``it`` with the tokens that order it after every conflicting earlier instruction."""
        u = it.unit
        pops: set[str] = set()
        others = [v for v in UNITS if v != u]
        others.sort(key=lambda v: (v, u) in QUEUE_BETWEEN)  # the non-neighbour (bridge) first
        for v in others:
            lst = [k for k in range(self.last[v], -1, -1) if self.items[k].unit == v and conflict(self.items[k], it)]
            if not lst or self.clock_for(u, pops)[v] >= lst[0]:
                continue
            a = lst[0]
            if (v, u) in QUEUE_BETWEEN:
                self.order_direct(a, u, pops)
            else:  # load <-> store: a compute no-op after ``a``, then ``it`` after the no-op
                cp: set[str] = set()
                self.order_direct(a, "compute", cp)
                c = self.append(self.noop("compute"), cp)
                self.order_direct(c, u, pops)
        for q, (p, _, c, _) in QUEUES.items():  # random extra pops of outstanding tokens
            if c == u and q not in pops and self.outstanding(q) > 0 and self.rng.random() < 0.5:
                pops.add(q)
        k = self.append(it, pops)
        for q, (p, _, c, _) in QUEUES.items():  # random extra pushes
            if p == u and self.rng.random() < self.opts.extra_token_prob and self.can_add_push(q, k):
                self.add_push(q, k)
        return k

    def finish(self) -> None:
        """Drain every token queue (balanced program), then FINISH (sometimes popping the last tokens)."""
        fin_pops: set[str] = set()
        fin_unit = unit_of(Finish)  # FINISH travels through compute's queue: it may pop compute's tokens
        # The queues FINISH's unit pushes first (drained by the other units' no-ops), then those it pops.
        for q in sorted(TOKEN_QUEUES, key=lambda q: QUEUES[q].producer != fin_unit):
            consumer = QUEUES[q].consumer
            keep = 1 if consumer == fin_unit and self.rng.random() < 0.5 else 0
            while self.outstanding(q) > keep:
                self.append(self.noop(consumer), {q})
            if self.outstanding(q):
                fin_pops.add(q)
        self.append(Item(Finish, {}), fin_pops)


# ---- random instructions ----------------------------------------------------------------
@dataclass
class _Space:
    """Where random instructions may reach: the acc window and the DRAM regions (in vectors), and for
    GEMM the windows of the input, weight and micro-op buffers with their DRAM tensors."""

    wbase: int
    wsize: int
    inputs: dict[str, int] = field(default_factory=dict)   # name -> vectors
    outputs: dict[str, int] = field(default_factory=dict)
    win: dict[str, Window] = field(default_factory=dict)  # INP/WGT/UOP
    uop_data: list[tuple[int, int, int]] = field(default_factory=list)  # the "uops" tensor, entry by entry
    n_inp: int = 0                                          # entries of the "inp" and "wgt" tensors
    n_wgt: int = 0


def _stride_extent(r: np.random.Generator, y: int, x: int, n_vec: int, edge: bool) -> tuple[int, int, int]:
    """(y, stride, dram offset) with ``(y-1)*stride + x <= n_vec``; shrinks y when it cannot fit."""
    stride = x + int(r.integers(0, 4))
    if edge and y > 1:
        stride = int(r.integers(0, x + 1))  # overlapping (or identical) rows
    while y > 1 and (y - 1) * stride + x > n_vec:
        y -= 1
    ext = (y - 1) * stride + x
    return y, stride, int(r.integers(0, n_vec - ext + 1))


def _fit_tile(pads: list[int], y: int, x: int, room: int) -> tuple[int, int]:
    """Shrink the padding (in place, largest first), then y, then x until the padded tile fits ``room``
    entries; the new ``(y, x)``."""
    while _padded_entries(pads, y, x) > room:
        k = int(np.argmax(pads)) if max(pads) else None
        if k is not None:
            pads[k] -= 1
        elif y > 1:
            y -= 1
        else:
            x -= 1
    return y, x


def _rand_load(r: np.random.Generator, sp: _Space, o: GenOptions) -> Item:
    edge = r.random() < o.edge_prob
    name = str(r.choice(list(sp.inputs)))
    n_vec = sp.inputs[name]
    x = int(r.integers(1, min(8, sp.wsize, n_vec) + 1))
    y = int(r.integers(1, 5))
    pads = [int(r.integers(0, 3)) if r.random() < 0.3 else 0 for _ in range(4)]
    if r.random() < 0.03:
        pads = [int(r.integers(0, 16)) for _ in range(4)]  # up to the 4-bit field's maximum
    y, x = _fit_tile(pads, y, x, sp.wsize)
    y, stride, off = _stride_extent(r, y, x, n_vec, edge)
    if edge and r.random() < 0.3:
        y, x = (0, x) if r.random() < 0.5 else (y, 0)  # only padding is written (zeros)
    tile = _padded_entries(pads, y, x)
    base = sp.wbase + int(r.integers(0, sp.wsize - max(tile, 1) + 1))
    f = dict(sram_base=base, dram_base=off, y_size=y, x_size=x, x_stride=stride, **_pad_fields(pads))
    return Item(Load, f, region=name)


def _rand_store(r: np.random.Generator, sp: _Space, o: GenOptions) -> Item:
    edge = r.random() < o.edge_prob
    name = str(r.choice(list(sp.outputs)))
    n_vec = sp.outputs[name]
    x = int(r.integers(1, min(8, sp.wsize, n_vec) + 1))
    y = int(r.integers(1, 5))
    while y * x > sp.wsize:
        y -= 1
    y, stride, off = _stride_extent(r, y, x, n_vec, edge)
    base = sp.wbase + int(r.integers(0, sp.wsize - y * x + 1))
    return Item(Store, dict(sram_base=base, dram_base=off, y_size=y, x_size=x, x_stride=stride), region=name)


def _affine(r: np.random.Generator, io: int, ii: int, sp: _Space) -> tuple[int, int, int]:
    """(base, factor_out, factor_in) whose every index lies in the acc window."""
    room = sp.wsize - 1
    fi = int(r.choice([0, 1, 1, int(r.integers(0, room // max(ii - 1, 1) + 1))])) if ii > 1 else int(r.integers(0, 4))
    fi = min(fi, room // max(ii - 1, 1))
    left = room - (ii - 1) * fi
    fo = int(r.choice([0, ii * fi, int(r.integers(0, left // max(io - 1, 1) + 1))])) if io > 1 else int(r.integers(0, 4))
    fo = min(fo, left // max(io - 1, 1))
    span = affine_last(0, io, ii, fo, fi)
    return sp.wbase + int(r.integers(0, sp.wsize - span)), fo, fi


def _rand_alu(r: np.random.Generator, sp: _Space, o: GenOptions) -> Item:
    cap = o.max_iters * (4 if r.random() < 0.05 else 1)
    io, ii = int(r.integers(1, cap + 1)), int(r.integers(1, cap + 1))
    op = int(r.integers(0, len(ALU_OPS)))
    use_imm = bool(r.random() < 0.5)
    db, dfo, dfi = _affine(r, io, ii, sp)
    sb, sfo, sfi = _affine(r, io, ii, sp)
    if not use_imm and r.random() < 0.2:  # overlapping src/dst: a write must be seen by later reads
        sfo, sfi = dfo, dfi
        shift = int(r.integers(-2, 3))
        span = affine_last(0, io, ii, dfo, dfi)
        sb = min(max(db + shift, sp.wbase), sp.wbase + sp.wsize - 1 - span)
    imm = int(r.choice(EDGE_IMM)) if r.random() < 0.6 else int(r.integers(-32768, 32768))
    return Item(Alu, dict(alu_op=op, use_imm=use_imm, iter_out=io, iter_in=ii, dst_base=db, src_base=sb,
                          dst_factor_out=dfo, dst_factor_in=dfi, src_factor_out=sfo, src_factor_in=sfi, imm=imm))


def _rand_values(r: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    kind = r.integers(0, 4)
    if kind == 0:
        a = r.integers(INT_MIN, INT_MAX + 1, size=shape, dtype=np.int64)
    elif kind == 1:
        a = r.integers(-300, 301, size=shape)
    elif kind == 2:
        a = r.choice(np.array(EDGE_INT32, dtype=np.int64), size=shape)
    else:
        a = np.where(r.random(shape) < 0.3, r.choice(np.array(EDGE_INT32, dtype=np.int64), size=shape),
                     r.integers(-70000, 70000, size=shape))
    return a.astype(np.int32)


def _rand_buffer_load(r: np.random.Generator, sp: _Space, buf: str) -> Item:
    """A LOAD of a random tile (padding sometimes) from the ``buf`` tensor into its window."""
    base, size = sp.win[buf]
    n = {"INP": sp.n_inp, "WGT": sp.n_wgt, "UOP": len(sp.uop_data)}[buf]
    x = int(r.integers(1, min(6, size, n) + 1))
    y = int(r.integers(1, 4))
    # zero micro-ops (padding) would point below the windows: only inputs and weights are padded
    pads = [int(r.integers(0, 2)) if r.random() < 0.3 and buf != "UOP" else 0 for _ in range(4)]
    y, x = _fit_tile(pads, y, x, size)
    y, stride, off = _stride_extent(r, y, x, n, r.random() < 0.1)
    tile = _padded_entries(pads, y, x)
    f = dict(buf=BUFFERS[buf], sram_base=base + int(r.integers(0, size - tile + 1)), dram_base=off, y_size=y,
             x_size=x, x_stride=stride, **_pad_fields(pads))
    return Item(Load, f, region=buf.lower())


def _factors(r: np.random.Generator, io: int, ii: int, room: int) -> tuple[int, int]:
    """(factor_out, factor_in) with ``(io-1)*fo + (ii-1)*fi <= room`` (0 often: repeated indices)."""
    fi = int(r.integers(0, room // (ii - 1) + 1)) if ii > 1 and r.random() < 0.6 else 0
    left = room - (ii - 1) * fi
    fo = int(r.integers(0, left // (io - 1) + 1)) if io > 1 and r.random() < 0.7 else 0
    if io > 1 and r.random() < 0.3 and ii * fi <= left // (io - 1):
        fo = ii * fi  # rows follow each other (a plain walk)
    return fo, fi


def _rand_gemm(r: np.random.Generator, sp: _Space, uops: np.ndarray, loaded: np.ndarray) -> Item | None:
    """A GEMM over loaded micro-ops of the window whose every index stays in its buffer window."""
    ubase, usize = sp.win["UOP"]
    ok = [u for u in range(ubase, ubase + usize) if loaded[u]]
    if not ok:
        return None
    b = int(r.choice(ok))
    e = b
    cap = int(r.integers(1, 9))
    while e < ubase + usize and loaded[e] and e - b < cap:
        e += 1
    io, ii = int(r.integers(1, 5)), int(r.integers(1, 5))
    if r.random() < 0.05:
        io, ii = int(r.integers(8, 33)), int(r.integers(1, 9))  # a long one
    table = uops[b:e]
    f: dict[str, Any] = dict(reset=bool(r.random() < 0.2), uop_begin=b, uop_end=e, iter_out=io, iter_in=ii)
    for col, name, (lo, size) in ((0, "acc", (sp.wbase, sp.wsize)), (1, "inp", sp.win["INP"]),
                                  (2, "wgt", sp.win["WGT"])):
        room = lo + size - 1 - int(table[:, col].max())
        if room < 0 or int(table[:, col].min()) < lo:
            return None
        f[f"{name}_factor_out"], f[f"{name}_factor_in"] = _factors(r, io, ii, room)
    if r.random() < 0.05:
        f["iter_out"] = 0  # no iterations: 1 cycle, touches nothing
    return Item(Gemm, f)


def _rand_uops(r: np.random.Generator, n: int, sp: _Space) -> list[tuple[int, int, int]]:
    """``n`` micro-ops inside the acc, input and weight windows (low indices often: room for factors)."""
    def pick(lo: int, size: int) -> int:
        return lo + int(r.integers(0, max(1, size // 2) if r.random() < 0.7 else size))
    return [(pick(sp.wbase, sp.wsize), pick(*sp.win["INP"]), pick(*sp.win["WGT"])) for _ in range(n)]


def _window(r: np.random.Generator, depth: int, sizes: tuple[int, ...]) -> Window:
    size = int(r.choice([w for w in sizes if w <= depth] or [depth]))
    return Window(int(r.choice([0, depth - size, int(r.integers(0, depth - size + 1))])), size)


def generate(cfg: HwConfig, seed: int, opts: GenOptions | None = None, name: str | None = None,
             steer: "Steer | None" = None) -> Program:
    """A random valid Program for ``cfg`` with random inputs attached; the same seed gives the same Program.
    ``steer`` biases the choices toward empty coverage bins (:class:`Steer`); without it (the default) the
    generation is the unsteered one, unchanged for a given seed."""
    o = opts or GenOptions()
    r = np.random.default_rng([seed, cfg.config_id])
    st = steer.for_program(seed, cfg) if steer is not None else None
    wsizes = [w for w in (8, 16, 32, 64, 128, 256) if w <= cfg.acc_depth]
    wsize = int(r.choice(wsizes))
    wbase = int(r.choice([0, cfg.acc_depth - wsize, int(r.integers(0, cfg.acc_depth - wsize + 1))]))
    sp = _Space(wbase, wsize)
    gemm = r.random() < 0.7 and o.gemm_prob > 0
    # the GEMM tensors take three region slots: fewer accumulator-side tensors then
    n_io = min(4, (cfg.max_regions - 1 - (3 if gemm else 0)) // 2 + 1)
    for k in range(int(r.integers(1, n_io))):
        sp.inputs[f"in{k}"] = (wsize if k == 0 else 1) + int(r.integers(0, 48))
    for k in range(int(r.integers(1, n_io))):
        sp.outputs[f"out{k}"] = int(r.integers(1, 48))
    if gemm:
        sp.win = {"INP": _window(r, cfg.inp_depth, (8, 16, 32)), "WGT": _window(r, cfg.wgt_depth, (4, 8, 16)),
                  "UOP": _window(r, cfg.uop_depth, (4, 8, 16))}
        if st is not None and st.pick("gemm.uops.whole_buffer"):
            sp.win["UOP"] = Window(0, cfg.uop_depth)  # the whole micro-op buffer, loaded at once below
        sp.n_inp = sp.win["INP"].size + int(r.integers(0, 16))
        sp.n_wgt = sp.win["WGT"].size + int(r.integers(0, 8))
        sp.uop_data = _rand_uops(r, sp.win["UOP"].size + int(r.integers(0, 16)), sp)

    b = _Builder(cfg, r, o)
    shadow = np.zeros((cfg.uop_depth, 3), dtype=np.int64)   # the micro-op buffer in program order
    loaded = np.zeros(cfg.uop_depth, dtype=bool)

    def add(it: Item) -> None:
        b.add(_with_footprint(it, cfg, shadow))
        if it.cls is Load and it.fields.get("buf") == BUFFERS["UOP"]:
            for k, uop in _uop_rows(Load(**it.fields), sp.uop_data):
                shadow[k], loaded[k] = uop, True

    # Initialise the whole window (every later read sees defined data): loads, or MOV immediates.
    done = 0
    while done < wsize:
        n = min(wsize - done, int(r.choice([wsize, 8, 16, 64])))
        if r.random() < 0.7:
            it = Item(Load, dict(sram_base=wbase + done, dram_base=int(r.integers(0, sp.inputs["in0"] - n + 1)),
                                 y_size=1, x_size=n, x_stride=n), region="in0")
        else:
            it = Item(Alu, dict(alu_op=ALU_OPS["MOV"], use_imm=True, iter_out=1, iter_in=n, dst_base=wbase + done,
                                dst_factor_in=1, imm=int(r.choice(EDGE_IMM))))
        add(it)
        done += n
    if gemm:  # and the input, weight and micro-op windows, each by one LOAD
        for buf in ("INP", "WGT", "UOP"):
            base, size = sp.win[buf]
            add(Item(Load, dict(buf=BUFFERS[buf], sram_base=base, dram_base=0, y_size=1, x_size=size,
                                x_stride=size), region=buf.lower()))
    for _ in range(int(r.integers(1, o.max_body + 1))):
        if r.random() < o.noop_prob:
            b.add(b.noop(str(r.choice(UNITS))))
            continue
        if gemm and r.random() < o.gemm_prob:
            kind = str(r.choice(["gemm", "gemm", "gemm", "INP", "WGT", "UOP"]))
            it = _rand_gemm(r, sp, shadow, loaded) if kind == "gemm" else _rand_buffer_load(r, sp, kind)
            if it is not None and st is not None:
                it = st.adjust(it, sp, cfg, shadow, loaded)
            if it is not None:
                add(it)
            continue
        kind = r.choice(["load", "alu", "alu", "store"])
        it = {"load": _rand_load, "alu": _rand_alu, "store": _rand_store}[str(kind)](r, sp, o)
        add(st.adjust(it, sp, cfg, shadow, loaded) if st is not None else it)
    for out in sp.outputs:  # mostly make sure each output receives something
        if r.random() < 0.8:
            add(_rand_store_to(r, sp, o, out))
    b.finish()

    tensors = [(n, "input", (v, cfg.lanes), "int32") for n, v in sp.inputs.items()]
    if gemm:
        tensors += [("inp", "input", (sp.n_inp, cfg.lanes), "int8"),
                    ("wgt", "input", (sp.n_wgt, cfg.block, cfg.block), "int8"),
                    ("uop", "input", (len(sp.uop_data), UOP_BYTES), "int8")]
    out_dt = "int8" if cfg.out_width == 8 else "int16"
    tensors += [(n, "output", (v, cfg.lanes), out_dt) for n, v in sp.outputs.items()]
    order = list(r.permutation(len(tensors)))  # random region order in DRAM
    asm = Assembler(cfg, name or f"fuzz-{cfg.name}-{seed}",
                    meta={"generator": "cosim.fuzz.generator", "seed": seed, "window": [wbase, wsize]})
    placed = {t[0]: asm.tensor(*t) for t in (tensors[i] for i in order)}
    for it in b.items:  # a DMA's dram_base is relative to its region until the layout is known
        asm.add(it.cls(**it.fields), base=placed[it.region] if it.region is not None else None)
    inputs = {n: _rand_values(r, (v, cfg.lanes)) for n, v in sp.inputs.items()}
    if gemm:
        inputs["inp"] = _rand_int8(r, (sp.n_inp, cfg.lanes))
        inputs["wgt"] = _rand_int8(r, (sp.n_wgt, cfg.block, cfg.block))
        inputs["uop"] = np.frombuffer(encode_uops(sp.uop_data), dtype=np.int8).reshape(-1, UOP_BYTES)
    return asm.program(inputs=inputs)


def _rand_int8(r: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """int8 data: full range, small values, or the extremes (products that wrap the 32-bit lanes need
    many of those, which the accumulator's random int32 start values supply)."""
    kind = r.integers(0, 3)
    if kind == 0:
        return r.integers(-128, 128, size=shape).astype(np.int8)
    if kind == 1:
        return r.integers(-3, 4, size=shape).astype(np.int8)
    return r.choice(np.array([-128, 127, -1, 0, 1], dtype=np.int8), size=shape)


def _uop_rows(insn: Load, table: list[tuple[int, int, int]]) -> list[tuple[int, tuple[int, int, int]]]:
    """What a LOAD into the micro-op buffer whose ``dram_base`` is relative to the "uop" tensor writes."""
    return [(k, (0, 0, 0) if e is None else table[e]) for k, e in load_entries(insn)]


def _rand_store_to(r: np.random.Generator, sp: _Space, o: GenOptions, out: str) -> Item:
    it = _rand_store(r, _Space(sp.wbase, sp.wsize, sp.inputs, {out: sp.outputs[out]}), o)
    return it


def _with_footprint(it: Item, cfg: HwConfig, uops: np.ndarray | None = None) -> Item:
    it.reads, it.writes = keyed_footprint(it.cls(**it.fields), uops)
    return it


# ---- steering toward empty coverage bins ------------------------------------------------------------
@dataclass(frozen=True)
class Steer:
    """The weights of a steered generation: the coverage bins still empty (``cosim.fuzz.bins`` names) and
    ``rate``, the chance that a steerable choice is bent toward one of them. A random instruction is drawn
    as usual, then adjusted (still valid: the footprint and tokens are computed after) to hit an empty
    bin of its kind: ALU op and operand, loop counts, read-after-write distances, padding, micro-op
    ranges, reset, long padded loads and long compute under the accumulator's ports; the micro-op window
    may be the whole buffer. Steered choices draw from a generator of their own, and only when
    steering: an unsteered ``generate`` is unchanged."""

    empty: frozenset[str] = frozenset()
    rate: float = 0.5

    def to_json(self) -> dict[str, Any]:
        """The weights as JSON (what a chunk task carries and ``fuzz.json`` records)."""
        return {"empty": sorted(self.empty), "rate": self.rate}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> "Steer | None":
        """The weights of :meth:`to_json` (None: no steering)."""
        return None if d is None else cls(frozenset(d.get("empty", ())), float(d.get("rate", 0.5)))

    def for_program(self, seed: int, cfg: HwConfig) -> "_Steering":
        """The steering of the Program of ``seed`` on ``cfg``, with a random generator of its own."""
        return _Steering(self, np.random.default_rng([seed, cfg.config_id, 0x57EE]))


class _Steering:
    """One Program's steering: :class:`Steer` and its own random generator."""

    def __init__(self, steer: Steer, rng: np.random.Generator):
        self.s, self.r = steer, rng
        self._by_prefix: dict[str, list[str]] = {}

    def pick(self, prefix: str) -> str | None:
        """An empty bin named ``prefix...`` with probability ``rate`` (None otherwise or when none is)."""
        c = self._by_prefix.get(prefix)
        if c is None:
            c = self._by_prefix[prefix] = sorted(n for n in self.s.empty if n.startswith(prefix))
        if not c or self.r.random() >= self.s.rate:
            return None
        return str(self.r.choice(c))

    def adjust(self, it: Item, sp: _Space, cfg: HwConfig, uops: np.ndarray, loaded: np.ndarray) -> Item:
        """``it`` bent toward an empty bin of its kind (a new Item; ``it`` itself when nothing applies)."""
        f = dict(it.fields)
        if it.cls is Alu:
            self._alu(f, sp)
        elif it.cls is Load:
            buf = BUFFER_NAMES[f.get("buf", BUFFERS["ACC"])]
            if buf != "UOP":
                self._pad(f, buf, sp.win[buf] if buf != "ACC" else Window(sp.wbase, sp.wsize))
        elif it.cls is Gemm:
            self._gemm(f, sp, cfg, uops, loaded)
        return Item(it.cls, f, it.region)

    def _alu(self, f: dict[str, Any], sp: _Space) -> None:
        r, lo, size = self.r, sp.wbase, sp.wsize
        b = self.pick("alu.")
        if b:
            _, op, kind = b.split(".")
            f["alu_op"], f["use_imm"] = ALU_OPS[op], kind == "imm"
        b = self.pick("loop.alu.")
        if b:
            _, _, lvl, n = b.split(".")
            key = "iter_out" if lvl == "outer" else "iter_in"
            f[key] = {"zero": 0, "one": 1}.get(n, max(2, f[key]))
            if n == "many":  # repeated indices on that level keep every index in the window
                for x in ("dst", "src"):
                    f[f"{x}_factor_{lvl[:-2] if lvl == 'outer' else 'in'}"] = 0
        b = self.pick("raw.alu_")
        if b:
            who, d = b.split(".")[1], {"d1": 1, "d2": 2, "d3plus": 3}[b.split(".")[2]]
            if who == "alu_dst" and size >= d:  # d entries rewritten every d iterations
                f.update(iter_out=2, iter_in=d, dst_factor_out=0, dst_factor_in=1, src_factor_out=0, src_factor_in=0,
                         dst_base=lo + int(r.integers(0, size - d + 1)))
                if ALU_OP_NAMES[f["alu_op"]] in DST_BLIND_OPS:
                    f["alu_op"] = ALU_OPS["ADD"]  # MOV and CLZ do not read their destination
            elif who == "alu_src" and size >= 2 * d + 2:  # acc[j] op= acc[j - d]
                n = d + 2
                db = lo + d + int(r.integers(0, size - n - d + 1))
                f.update(iter_out=1, iter_in=n, dst_base=db, src_base=db - d, dst_factor_out=0, dst_factor_in=1,
                         src_factor_out=0, src_factor_in=1, use_imm=False)
        b = self.pick("port.alu")
        if b:  # a long compute under the ports: more cycles for LOAD and STORE to take them
            f.update(iter_out=int(r.integers(16, 65)), dst_factor_out=0, src_factor_out=0,
                     use_imm=b.startswith("port.alu_imm"))
            if f["iter_in"] == 0:
                f["iter_in"] = 1

    def _pad(self, f: dict[str, Any], buf: str, win: Window) -> None:
        r, (base, size) = self.r, win
        pads = [f.get(k, 0) for k in PAD_FIELDS]
        y, x = f["y_size"], f["x_size"]
        b = self.pick("pad." if buf == "ACC" else f"pad.{buf}")
        if not b and buf == "ACC":
            b = self.pick("port.") and "pad.port"
        if not b:
            return
        side = b.split(".")[1]
        if side in ("top", "bottom", "left", "right", "INP", "WGT"):
            k = ("top", "bottom", "left", "right").index(side) if side not in ("INP", "WGT") else int(r.integers(0, 4))
            pads[k] = max(pads[k], 1)
        elif side == "only":
            pads[TOP], y = max(pads[TOP], 1), 0
        elif side in ("max", "port"):  # a long run of padding (up to the field's 15)
            pads, y, x = [15, 0, 0, 0], 1, 1  # all on top
            while pads[TOP] and (pads[TOP] + 1) > size:
                pads[TOP] -= 1
        tile = _padded_entries(pads, y, x)
        if tile > size or tile == 0:
            return
        f.update(y_size=y, x_size=x, **_pad_fields(pads), sram_base=base + int(r.integers(0, size - tile + 1)))

    def _gemm(self, f: dict[str, Any], sp: _Space, cfg: HwConfig, uops: np.ndarray, loaded: np.ndarray) -> None:
        r = self.r
        ubase, usize = sp.win["UOP"]
        b = self.pick("gemm.uops.")
        if b:
            n = b.split(".")[2]
            if n == "whole_buffer" and (ubase, usize) == (0, cfg.uop_depth) and loaded.all():
                f.update(uop_begin=0, uop_end=cfg.uop_depth, iter_out=1, iter_in=1)
            elif n == "empty":
                f["uop_end"] = f["uop_begin"]
            elif n == "one":
                f["uop_end"] = f["uop_begin"] + 1
        b = self.pick("gemm.reset.")
        if b:
            f["reset"] = b.endswith(".on")
        b = self.pick("loop.gemm.")
        if b:
            _, _, lvl, n = b.split(".")
            key, suf = ("iter_out", "out") if lvl == "outer" else ("iter_in", "in")
            f[key] = {"zero": 0, "one": 1}.get(n, max(2, f[key]))
            if n == "many":
                for x in ("acc", "inp", "wgt"):
                    f[f"{x}_factor_{suf}"] = 0
        b = self.pick("raw.gemm.") or (self.pick("port.gemm") and "raw.gemm.port")
        if b and f["uop_end"] > f["uop_begin"] and f["uop_end"] - f["uop_begin"] <= 8:
            d = {"d1": 1, "d2": 2, "d3plus": 3, "port": 1}[b.split(".")[2]]
            top = int(uops[f["uop_begin"]:f["uop_end"], 0].max())
            if top + d - 1 < sp.wbase + sp.wsize:  # acc + j (j < d) stays in the window
                f.update(uop_end=f["uop_begin"] + 1, reset=False, iter_in=d, acc_factor_in=1 if d > 1 else 0,
                         acc_factor_out=0, inp_factor_out=0, inp_factor_in=0, wgt_factor_out=0, wgt_factor_in=0,
                         iter_out=int(r.integers(16, 65)) if b.endswith("port") else 2)


# ---- validity checker (independent of the builder's incremental bookkeeping) ---------------------
def uop_table_before(p: Program, k: int) -> np.ndarray:
    """The micro-op buffer (rows acc, inp, wgt) as the LOADs of ``p.insns[:k]`` leave it, in program order."""
    dram = p.dram_image()
    table = np.zeros((p.config.uop_depth, 3), dtype=np.int64)
    for i in p.insns[:k]:
        _apply_uop_load(i, table, dram)
    return table


def _apply_uop_load(i: Instruction, table: np.ndarray, dram: bytes | bytearray) -> None:
    if isinstance(i, Load) and i.buf == BUFFERS["UOP"]:
        for k, e in load_entries(i):
            if k < len(table):
                at = e * UOP_BYTES if e is not None else None
                table[k] = (0, 0, 0) if at is None else decode_uops(bytes(dram[at:at + UOP_BYTES]))[0]


def check_program(insns: list[Instruction], cfg: HwConfig, require_init: bool = True,
                  dram: bytes | bytearray | None = None) -> str | None:
    """None when ``insns`` is token-balanced, deadlock-free by the program-order rule, race-free and
    (with ``require_init``) reads no buffer entry before it is written; else one line saying what is
    wrong. A GEMM's footprint comes from the micro-ops its Program loaded (read from ``dram``, the
    Program's DRAM image; without it a GEMM conservatively touches everything). Used to validate
    generated and shrunk Programs."""
    shadow = np.zeros((cfg.uop_depth, 3), dtype=np.int64) if dram is not None else None
    fps = []
    for i in insns:
        fps.append(keyed_footprint(i, shadow))
        if shadow is not None:
            _apply_uop_load(i, shadow, dram)
    if require_init:
        written: set[int] = set()
        for k, (reads, writes) in enumerate(fps):
            loose = reads - written  # MOV and CLZ do not read their destination
            if loose:
                return f"instruction {k}: reads {key_text(min(loose))} before anything writes it"
            written |= writes
    bad = program_order_problem(insns, cfg.token_queue_depth)
    upto = len(insns) if bad is None else bad[0]
    order = happens_before(insns[:upto])  # acyclic: every pop before ``upto`` follows its push
    for k in range(upto):  # every earlier conflicting instruction of another unit must be ordered before k
        u = order.unit[k]
        rd, wr = fps[k]
        for j in range(k):
            if order.unit[j] != u and not order.before(j, k):
                common = fps[j].writes & (rd | wr) | fps[j].reads & wr
                if common:
                    return f"instructions {j} and {k}: race on {key_text(min(common))} (no token path)"
    if bad is not None:
        return bad[1]
    return balance_problem(insns) or finish_problem(insns)
