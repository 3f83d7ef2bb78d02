"""Dependency tokens: which instruction waits for which, derived from buffer and DRAM accesses.

The kernel's trace is a sequential program. The three units run their own
instructions in order, so only cross-unit conflicts need tokens: when an operation
reads or writes entries of a space (an on-chip buffer: accumulator, input, weight,
micro-op; or a DRAM tensor the kernel both stores and loads, e.g. a layer's output
feeding the next layer) that an earlier operation of another unit wrote, or writes
entries it read, it must wait for that operation to complete. So the loads of GEMM
tile i+1 (inputs, weights into the other half of their buffers) wait only for the GEMM
that last read that half, and a GEMM waits for its own loads: loads overlap GEMMs.

:func:`insert_tokens` walks the trace once with a vector clock per instruction (the
last instruction of each unit known complete when it starts) and adds a token only
when the dependence is not already implied. Load and store have no token queue
between them, so a load->store or store->load dependence (a hand-written kernel's, or
a layer loading back from scratch DRAM what the previous layer stored, as in
``resnet_block``; the elementwise operators' tiling never has one) is relayed by a zero-
iteration ALU instruction (a compute no-op, legal by the contract: an ALU with
``iter_out*iter_in == 0`` touches nothing) placed right before the waiting
instruction; it pops from the first unit and pushes to the second, so real compute
work never waits for it.

With the operator library's tiling (separate ping-pong input and output halves, see
:mod:`compiler.ops`) this gives exactly the three-stage pipeline: the load of tile
i+1 waits for the compute of tile i-1 (c2l), the compute of tile i+1 for its loads
(l2c) and, before it writes its output half, for the store of tile i-1 (s2c), the
store of tile i for its compute (c2s); the load of tile i+1, the compute of tile i
and the store of tile i-1 are mutually unordered.

On several cores each core's trace is scheduled on its own. ``S.barrier()`` becomes a BARRIER
(compute queue): fetch dispatches nothing after it until it completes, and it completes only once
this core's loads and stores have drained (their data is in DRAM), so everything before it is
complete when anything after it starts. It is a fence: every later instruction's clock starts at it,
a later wait on an earlier instruction is implied and needs no token, so no token crosses it and it
carries no flags itself (like FINISH).

:func:`check_dependences` re-derives every conflict and proves, from the final
flags alone (:func:`compiler.verify.happens_before`), that each is ordered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.errors import CompileError
from compiler.ir import AluOp, BarrierOp, LoadOp, Op, SpaceAccess, StoreOp, SyncOp, dram_rows, dram_space
from compiler.tensor import Tensor
from compiler.trace import Trace, Traced
from compiler.verify import happens_before
from hw.config import HwConfig
from hw.isa import Instruction
from hw.isa_semantics import DEP_FLAGS, QUEUE_ENDS, QUEUE_OF_OPCODE, UNITS

L, C, S = (UNITS.index(u) for u in ("load", "compute", "store"))
# each operation record's unit: that of the instruction it lowers to
UNIT_OF_OP = {op: UNITS.index(QUEUE_OF_OPCODE[mnemonic])
              for op, mnemonic in (("LoadOp", "LOAD"), ("StoreOp", "STORE"), ("AluOp", "ALU"), ("GemmOp", "GEMM"))}
# (from unit, to unit) -> (queue, push flag on the first, pop flag on the second)
LINKS = {(UNITS.index(p), UNITS.index(c)): (q, pf, cf) for q, (p, pf, c, cf) in QUEUE_ENDS.items()}
FLAGS = DEP_FLAGS
NOP = AluOp("ADD", 0, 0, 0, 0, 0, 0, 0, 0, 0)  # zero iterations: a compute instruction that touches nothing


@dataclass(eq=False)
class Node:
    """One instruction being scheduled: its operation, unit, place in the unit, flags."""

    op: Op | None  # None for FINISH
    unit: int
    seq: int
    line: str
    kind: str = "op"  # "op", "relay" (the compute no-op), "barrier" or "finish"
    flags: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(FLAGS, False))
    vc: list[int] = field(default_factory=lambda: [-1, -1, -1])

    def vc_end(self) -> list[int]:
        v = list(self.vc)
        v[self.unit] = self.seq
        return v


class _Builder:
    def __init__(self, acc_depth: int):
        self.nodes: list[Node] = []
        self.by_unit: list[list[Node]] = [[], [], []]
        self.last_pusher: dict[str, Node | None] = dict.fromkeys(q for q, _, _ in LINKS.values())
        # per unit, the last instruction complete before anything after the latest BARRIER starts
        self.fence = [-1, -1, -1]

    def new(self, op: Op | None, unit: int, line: str, kind: str = "op") -> Node:
        mine = self.by_unit[unit]
        n = Node(op, unit, len(mine), line, kind)
        n.vc = list(self.fence)
        if mine:
            n.vc = [max(x, y) for x, y in zip(n.vc, mine[-1].vc_end())]
        mine.append(n)
        self.nodes.append(n)
        return n

    def barrier(self, line: str) -> Node:
        """A BARRIER (compute queue): fetch dispatches nothing after it until it completes, and it completes
        once this core's loads and stores have drained, so every instruction before it is complete when
        any after it starts: a fence that needs no token (and no token crosses it: every later wait on an
        earlier instruction is implied)."""
        n = self.new(BarrierOp(), C, line, "barrier")
        self.fence = [len(us) - 1 for us in self.by_unit]
        return n

    def require(self, a: Node, b: Node) -> None:
        """Make ``b`` (the newest instruction of its unit) wait for ``a`` to complete."""
        if b.vc[a.unit] >= a.seq:
            return  # already implied
        q, push, pop = LINKS[(a.unit, b.unit)]
        lp = self.last_pusher[q]
        if lp is not None and lp.seq >= a.seq:
            return  # an earlier instruction of b's unit already waited for a later one
        if b.flags[pop]:
            # b already consumes the newest token of q; make that token come from a
            # instead (a is later in its unit, so the wait only gets stronger).
            assert lp is not None
            lp.flags[push] = False
        a.flags[push] = True
        b.flags[pop] = True
        self.last_pusher[q] = a
        b.vc = [max(x, y) for x, y in zip(b.vc, a.vc_end())]


class LastUse:
    """Per space and unit, the last instruction (index within its unit) that read / wrote each entry."""

    def __init__(self, trace: Trace, cfg: HwConfig):
        self.size = {b: cfg.depth_of(b) for b in ("ACC", "INP", "WGT", "UOP")}
        # DRAM tensors the kernel both loads and stores (scratch): their hazards need tokens too (by
        # region: views of one region, e.g. a network's activations reusing memory, share its space)
        self.tracked: dict[str, Tensor] = {t.region: t for t in trace.tensors.values() if t.loaded and t.stored}
        for t in self.tracked.values():
            self.size[dram_space(t)] = t.nvec
        self.cfg = cfg
        self._w: dict[str, np.ndarray] = {}
        self._r: dict[str, np.ndarray] = {}

    def arrays(self, space: str) -> tuple[np.ndarray, np.ndarray]:
        w = self._w.get(space)
        if w is None:
            w = self._w[space] = np.full((3, self.size[space]), -1, dtype=np.int64)
            self._r[space] = np.full((3, self.size[space]), -1, dtype=np.int64)
        return w, self._r[space]

    def accesses(self, t: Traced) -> tuple[SpaceAccess, SpaceAccess]:
        """``t``'s reads and writes, with its DRAM rows when it moves a tracked tensor."""
        op = t.op
        if isinstance(op, (LoadOp, StoreOp)) and op.tensor.region in self.tracked:
            eb = self.cfg.elem_bytes(op.buf) if isinstance(op, LoadOp) else self.cfg.out_vec_bytes
            x = op.tensor
            # rows of the region (a view of it starts region_offset bytes in: views share one space)
            first = x.region_offset // (x.lanes * x.bits // 8)
            rows = (dram_space(x), first + dram_rows(x, op.offset, op.rows, op.cols, op.stride, eb))
            return (t.reads + [rows], t.writes) if isinstance(op, LoadOp) else (t.reads, t.writes + [rows])
        return t.reads, t.writes

    def needs(self, reads: SpaceAccess, writes: SpaceAccess, floor: list[int]) -> list[int]:
        """Per unit, the last instruction (index within that unit) an access set conflicts with."""
        need = np.array(floor, dtype=np.int64)
        for space, r in reads:
            sel = self.arrays(space)[0][:, r]
            if sel.shape[1]:
                np.maximum(need, sel.max(axis=1), out=need)
        for space, w in writes:
            lw, lr = self.arrays(space)
            sel = lw[:, w]
            if sel.shape[1]:
                np.maximum(need, sel.max(axis=1), out=need)
                np.maximum(need, lr[:, w].max(axis=1), out=need)
        return need.tolist()

    def mark(self, unit: int, seq: int, reads: SpaceAccess, writes: SpaceAccess) -> None:
        for space, r in reads:
            self.arrays(space)[1][unit, r] = seq
        for space, w in writes:
            self.arrays(space)[0][unit, w] = seq


def insert_tokens(trace: Trace, cfg: HwConfig, starts: list[int] | None = None) -> list[Node]:
    """The trace as instructions in program order with dependency flags, relays and FINISH.

    ``starts`` (when given) receives, per operation of the trace, the index of the first instruction
    emitted for it (its relay's, if it needs one), so marks in the trace map to instructions."""
    b = _Builder(cfg.acc_depth)
    last = LastUse(trace, cfg)
    floor = [-1, -1, -1]
    for t in trace.ops:
        if starts is not None:
            starts.append(len(b.nodes))
        if isinstance(t.op, SyncOp):
            floor = [len(us) - 1 for us in b.by_unit]
            continue
        if isinstance(t.op, BarrierOp):
            b.barrier(t.line)
            continue
        y = UNIT_OF_OP[type(t.op).__name__]
        reads, writes = last.accesses(t)
        need = last.needs(reads, writes, floor)
        if y != C:
            far = S if y == L else L
            # What y will know about far once its direct waits are in place (they are
            # added below and carry their pushers' knowledge): relay only beyond that.
            known = max(b.by_unit[y][-1].vc_end()[far] if b.by_unit[y] else -1, b.fence[far])
            if need[C] >= 0:
                known = max(known, b.by_unit[C][need[C]].vc_end()[far])
            if need[far] > known:
                relay = b.new(NOP, C, t.line, "relay")
                b.require(b.by_unit[far][need[far]], relay)
                node = b.new(t.op, y, t.line)
                b.require(relay, node)
            else:
                node = b.new(t.op, y, t.line)
        else:
            node = b.new(t.op, y, t.line)
        for x in (L, C, S):
            if x != y and (x, y) in LINKS and need[x] >= 0:
                b.require(b.by_unit[x][need[x]], node)
        last.mark(y, node.seq, reads, writes)
    b.new(None, C, "", "finish")
    return b.nodes


def check_dependences(trace: Trace, nodes: list[Node], insns: list[Instruction], cfg: HwConfig) -> None:
    """Prove every cross-unit conflict of the trace is ordered by the instructions' tokens.

    Raises CompileError naming the first unordered pair (a compiler bug, never a user error).
    """
    vcs = happens_before(insns, f"kernel '{trace.kernel}'")
    last = LastUse(trace, cfg)
    floor = [-1, -1, -1]
    ops = iter(trace.ops)
    count = [0, 0, 0]
    for k, n in enumerate(nodes):
        if n.kind != "op":
            count[n.unit] += 1
            continue
        t = next(ops)
        while isinstance(t.op, (SyncOp, BarrierOp)):
            if isinstance(t.op, SyncOp):
                floor = [c - 1 for c in count]
            t = next(ops)
        reads, writes = last.accesses(t)
        need = last.needs(reads, writes, floor)
        for x in (L, C, S):
            if x != n.unit and need[x] > vcs[k][x]:
                raise CompileError(f"kernel '{trace.kernel}': instruction {k} ({t.line}) may start before "
                                   f"instruction {need[x]} of the {UNITS[x]} unit it "
                                   f"depends on completes (token insertion bug)")
        last.mark(n.unit, n.seq, reads, writes)
        count[n.unit] += 1
