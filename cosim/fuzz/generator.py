"""Seeded random generator of valid instruction-level Programs, and a validity checker.

A generated Program is *valid by construction*: every instruction is in range for the
config and the layout, every accumulator entry is written before it is read, and the
dependency tokens order every pair of instructions of different units that touch a
common accumulator entry (RAW, WAR, WAW) in program order, so the concurrent
hardware computes exactly what the sequential reference computes. Tokens are also
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
from typing import Any

import numpy as np

from hw.analysis import balance_problem, finish_problem, happens_before, program_order_problem
from hw.config import HwConfig
from hw.isa import ALU_OPS, Alu, Finish, Instruction, Load, Store, unit_of
from hw.assembler import Assembler
from hw.isa_semantics import INT32_MAX, INT32_MIN, QUEUE_BETWEEN, TOKEN_QUEUES, UNITS, acc_footprint, affine_last
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
    extra_token_prob: float = 0.25
    noop_prob: float = 0.06
    edge_prob: float = 0.1        # zero-size tiles, overlapping rows, edge strides


def conflict(a: Item, b: Item) -> bool:
    return bool(a.writes & (b.reads | b.writes) or a.reads & b.writes)


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
            it.fields[QUEUES[q][3]] = True
        for q in pushes:
            it.fields[QUEUES[q][1]] = True
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
        return not it.flag(QUEUES[q][1]) and max(self.cnt[q][k:]) + 1 <= self.cfg.token_queue_depth

    def add_push(self, q: str, k: int) -> None:
        self.items[k].fields[QUEUES[q][1]] = True
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
        for q in sorted(TOKEN_QUEUES, key=lambda q: QUEUES[q][0] != fin_unit):
            consumer = QUEUES[q][2]
            keep = 1 if consumer == fin_unit and self.rng.random() < 0.5 else 0
            while self.outstanding(q) > keep:
                self.append(self.noop(consumer), {q})
            if self.outstanding(q):
                fin_pops.add(q)
        self.append(Item(Finish, {}), fin_pops)


# ---- random instructions ----------------------------------------------------------------
@dataclass
class _Space:
    """Where random instructions may reach: the acc window and the DRAM regions (in vectors)."""

    wbase: int
    wsize: int
    inputs: dict[str, int] = field(default_factory=dict)   # name -> vectors
    outputs: dict[str, int] = field(default_factory=dict)


def _stride_extent(r: np.random.Generator, y: int, x: int, n_vec: int, edge: bool) -> tuple[int, int, int]:
    """(y, stride, dram offset) with ``(y-1)*stride + x <= n_vec``; shrinks y when it cannot fit."""
    stride = x + int(r.integers(0, 4))
    if edge and y > 1:
        stride = int(r.integers(0, x + 1))  # overlapping (or identical) rows
    while y > 1 and (y - 1) * stride + x > n_vec:
        y -= 1
    ext = (y - 1) * stride + x
    return y, stride, int(r.integers(0, n_vec - ext + 1))


def _rand_load(r: np.random.Generator, sp: _Space, o: GenOptions) -> Item:
    edge = r.random() < o.edge_prob
    name = str(r.choice(list(sp.inputs)))
    n_vec = sp.inputs[name]
    x = int(r.integers(1, min(8, sp.wsize, n_vec) + 1))
    y = int(r.integers(1, 5))
    pads = [int(r.integers(0, 3)) if r.random() < 0.3 else 0 for _ in range(4)]
    if r.random() < 0.03:
        pads = [int(r.integers(0, 16)) for _ in range(4)]  # up to the 4-bit field's maximum
    while (pads[0] + y + pads[1]) * (pads[2] + x + pads[3]) > sp.wsize:
        k = int(np.argmax(pads)) if max(pads) else None
        if k is not None:
            pads[k] -= 1
        elif y > 1:
            y -= 1
        else:
            x -= 1
    y, stride, off = _stride_extent(r, y, x, n_vec, edge)
    if edge and r.random() < 0.3:
        y, x = (0, x) if r.random() < 0.5 else (y, 0)  # only padding is written (zeros)
    tile = (pads[0] + y + pads[1]) * (pads[2] + x + pads[3])
    base = sp.wbase + int(r.integers(0, sp.wsize - max(tile, 1) + 1))
    f = dict(sram_base=base, dram_base=off, y_size=y, x_size=x, x_stride=stride, y_pad_0=pads[0], y_pad_1=pads[1],
             x_pad_0=pads[2], x_pad_1=pads[3])
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


def generate(cfg: HwConfig, seed: int, opts: GenOptions | None = None, name: str | None = None) -> Program:
    """A random valid Program for ``cfg`` with random inputs attached; the same seed gives the same Program."""
    o = opts or GenOptions()
    r = np.random.default_rng([seed, cfg.config_id])
    wsizes = [w for w in (8, 16, 32, 64, 128, 256) if w <= cfg.acc_depth]
    wsize = int(r.choice(wsizes))
    wbase = int(r.choice([0, cfg.acc_depth - wsize, int(r.integers(0, cfg.acc_depth - wsize + 1))]))
    sp = _Space(wbase, wsize)
    for k in range(int(r.integers(1, 4))):
        sp.inputs[f"in{k}"] = (wsize if k == 0 else 1) + int(r.integers(0, 48))
    for k in range(int(r.integers(1, 4))):
        sp.outputs[f"out{k}"] = int(r.integers(1, 48))

    b = _Builder(cfg, r, o)
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
        b.add(_with_footprint(it, cfg))
        done += n
    for _ in range(int(r.integers(1, o.max_body + 1))):
        if r.random() < o.noop_prob:
            b.add(b.noop(str(r.choice(UNITS))))
            continue
        kind = r.choice(["load", "alu", "alu", "store"])
        it = {"load": _rand_load, "alu": _rand_alu, "store": _rand_store}[str(kind)](r, sp, o)
        b.add(_with_footprint(it, cfg))
    for out in sp.outputs:  # mostly make sure each output receives something
        if r.random() < 0.8:
            b.add(_with_footprint(_rand_store_to(r, sp, o, out), cfg))
    b.finish()

    tensors = [(n, "input", (v, cfg.lanes), "int32") for n, v in sp.inputs.items()]
    out_dt = "int8" if cfg.out_width == 8 else "int16"
    tensors += [(n, "output", (v, cfg.lanes), out_dt) for n, v in sp.outputs.items()]
    order = list(r.permutation(len(tensors)))  # random region order in DRAM
    asm = Assembler(cfg, name or f"fuzz-{cfg.name}-{seed}",
                    meta={"generator": "cosim.fuzz.generator", "seed": seed, "window": [wbase, wsize]})
    placed = {t[0]: asm.tensor(*t) for t in (tensors[i] for i in order)}
    for it in b.items:  # a DMA's dram_base is relative to its region until the layout is known
        asm.add(it.cls(**it.fields), base=placed[it.region] if it.region is not None else None)
    inputs = {n: _rand_values(r, (v, cfg.lanes)) for n, v in sp.inputs.items()}
    return asm.program(inputs=inputs)


def _rand_store_to(r: np.random.Generator, sp: _Space, o: GenOptions, out: str) -> Item:
    it = _rand_store(r, _Space(sp.wbase, sp.wsize, sp.inputs, {out: sp.outputs[out]}), o)
    return it


def _with_footprint(it: Item, cfg: HwConfig) -> Item:
    rd, wr = acc_footprint(it.cls(**it.fields))
    it.reads, it.writes = rd, wr
    return it


# ---- validity checker (independent of the builder's incremental bookkeeping) ---------------------
def check_program(insns: list[Instruction], cfg: HwConfig, require_init: bool = True) -> str | None:
    """None when ``insns`` is token-balanced, deadlock-free by the program-order rule, race-free and
    (with ``require_init``) reads no accumulator entry before it is written; else one line saying
    what is wrong. Used to validate generated and shrunk Programs."""
    fps = [acc_footprint(i) for i in insns]
    if require_init:
        written: set[int] = set()
        for k, (reads, writes) in enumerate(fps):
            loose = reads - written  # MOV does not read its destination
            if loose:
                return f"instruction {k}: reads acc[{min(loose)}] before anything writes it"
            written |= writes
    bad = program_order_problem(insns, cfg.token_queue_depth)
    upto = len(insns) if bad is None else bad[0]
    order = happens_before(insns[:upto])  # acyclic: every pop before ``upto`` follows its push
    for k in range(upto):  # every earlier conflicting instruction of another unit must be ordered before k
        u = order.unit[k]
        rd, wr = fps[k]
        for j in range(k):
            if order.unit[j] != u and not order.before(j, k) and (fps[j][1] & (rd | wr) or fps[j][0] & wr):
                return f"instructions {j} and {k}: race on the accumulator buffer (no token path)"
    if bad is not None:
        return bad[1]
    return balance_problem(insns) or finish_problem(insns)
