"""The instruction-set simulator: a plain, sequential interpreter of the ISA (the oracle of `cosim fuzz`).

It is an *independent* reading of the ISA: written from ``docs/microarch.md`` and the
docstring of ``hw/isa.py``, it shares no meaning with the models it checks. The golden path
and the TLM run the shared semantics modules (``hw/isa_semantics.py``, ``hw/gemm_numpy.py``,
``hw/alu_numpy.py``, ``hw/analysis.py``); this module imports none of them, so a bug planted
there shows up as an ISS-vs-TLM mismatch (``tests/test_iss_independence.py`` proves it by
mutation). It keeps only the encoding (``hw/isa.py``: fields, opcodes, unpacking a word),
the config (``hw/config.py``), the error codes (``hw/csr.py``), the Program
(``hw/program.py``) and :class:`hw.result.RunResult`. Everything else is written here, plainly,
loop by loop:

* the dispatch checks of a word, in the order of docs/microarch.md "FETCH"
  (:func:`check_word`, :func:`decode_words`);
* LOAD and STORE: the DRAM bytes they touch and the region check, the padded tile, the SRAM
  range checks, the narrowing cast (:func:`_load`, :func:`_store`);
* the ALU: one vector at a time in loop order, each lane through :func:`alu_lane` on Python
  ints (:func:`execute_alu`);
* GEMM: the micro-op walk iteration by iteration, each iteration's checks in their order, the
  BLOCK x BLOCK product of one block, 32-bit wrap (:func:`_gemm`);
* the dependency tokens: an untimed run of fetch, the three unit queues, the units and the
  token queues that says which instructions run, whether a stream's FINISH completes and, if
  not, which pc hangs (:func:`token_run`), and the order the run executes them in (:func:`run_order`);
* several cores: phases separated by BARRIERs (:func:`run_reference`).

It executes instructions one at a time, in program order as far as the tokens allow (a STORE
waiting for a later ALU's token runs after it) and only those the tokens let run (one that waits
forever only makes its range checks, where it enters WAIT), and returns a
:class:`hw.result.RunResult` with outputs, the count-type counters and, for a faulting program,
``error`` = {code, name, pc}. It has no notion of time, so ``cycles`` is None and busy/stall
counters are absent.

Buffers: the accumulator (int32), and the GEMM core's input (int8 vectors), weight (int8
BLOCK x BLOCK blocks) and micro-op ((acc, inp, wgt) triples) buffers, which LOAD fills from
DRAM entries of their own size (``HwConfig.elem_bytes``); a micro-op and a weight block are
valid once a LOAD wrote them (data or padding) in this run, and GEMM faults on an invalid one.

Faults are reported in the order instructions run; for a program with one faulting instruction
(what the fuzzer injects) that is the pc every model must report.

Several cores (``num_cores > 1``, one instruction window per core, :attr:`hw.program.Program.windows`)
share the DRAM image; each has its own buffers and counters. They run in phases separated by
BARRIERs (:func:`run_reference`): a core that FINISHes while another waits at a BARRIER is
``ERR_BARRIER``; every error names its core (``error["core"]``, pcs counted in that core's stream).
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from hw import csr
from hw.isa import (ALU_OP_NAMES, BUFFER_NAMES, INSN_BITS, INSN_BYTES, OPCODE_NAMES, UOP_FIELD_BITS, Instruction,
                    Isa, opcode_of)
from hw.program import Program
from hw.result import RunResult


class RefFault(Exception):
    """A fault the hardware reports: code from hw.csr, the instruction index (in its core's stream) and,
    on several cores, the core."""

    def __init__(self, code: int, pc: int, message: str, core: int | None = None):
        where = f"core {core} " if core is not None else ""
        super().__init__(f"{csr.ERROR_NAMES[code]} at {where}instruction {pc}: {message}")
        self.code, self.pc, self.message, self.core = code, pc, message, core


# ---- the scalar ALU ------------------------------------------------------------------------------
def to_int32(v: int) -> int:
    """``v`` cut to its low 32 bits, read as two's complement."""
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v & 0x80000000 else v


def _shr(x: int, s: int) -> int:
    if s >= 0:
        # arithmetic: Python's >> on a negative int rounds towards minus infinity, as the sign fill does
        return x >> (s if s < 31 else 31)
    if s <= -32:
        return 0
    return to_int32(x << -s)


def _clip(x: int, s: int) -> int:
    low = to_int32(-s)  # -INT_MIN wraps to INT_MIN
    y = x if x > low else low
    return y if y < s else s


_HALF = 1 << 31
_ALL = (1 << 32) - 1


def _clz(s: int) -> int:
    """Leading zeros of the 32-bit pattern of ``s``, found by halving the window (as a priority
    encoder does): 32 for 0, 0 for a negative value."""
    v = s & _ALL
    if v == 0:
        return 32
    n = 0
    for width in (16, 8, 4, 2, 1):
        if v >> (32 - width) == 0:
            n += width
            v = (v << width) & _ALL
    return n

# op name -> one lane: x the destination lane, s the operand (32-bit values); docs/microarch.md
# "Data semantics". ADD, SUB and MUL wrap by the same sum as to_int32, written out (the hot path).
LANE_OPS: dict[str, Callable[[int, int], int]] = {
    "ADD": lambda x, s: ((x + s + _HALF) & _ALL) - _HALF,
    "SUB": lambda x, s: ((x - s + _HALF) & _ALL) - _HALF,
    "MUL": lambda x, s: ((x * s + _HALF) & _ALL) - _HALF,
    "MIN": lambda x, s: x if x < s else s,
    "MAX": lambda x, s: x if x > s else s,
    "SHR": _shr,
    "CLIP": _clip,
    "MOV": lambda x, s: s,
    # the exact product, plus half of 2**31, floored by the arithmetic shift, then wrapped
    "MULHR": lambda x, s: ((((x * s + (1 << 30)) >> 31) + _HALF) & _ALL) - _HALF,
    "CLZ": lambda x, s: _clz(s),
}


def alu_lane(name: str, x: int, s: int) -> int:
    """One lane of ALU op ``name`` (:data:`LANE_OPS`); raises ValueError for an unknown op."""
    f = LANE_OPS.get(name)
    if f is None:
        raise ValueError(f"unknown ALU op {name}")
    return f(x, s)


def alu_lanes(op: int, x: list[int], s: list[int]) -> list[int]:
    """One ALU op (by code) lane by lane on 32-bit values (Python ints)."""
    f = LANE_OPS[ALU_OP_NAMES[op]]
    return [f(a, b) for a, b in zip(x, s)]


def execute_alu(acc: np.ndarray, insn: Any) -> None:
    """One ALU instruction on ``acc`` (``(depth, lanes)``), one vector at a time strictly in loop
    order (a write is seen by later reads); indices already range checked."""
    lanes = acc.shape[1]
    for i in range(insn.iter_out):
        for j in range(insn.iter_in):
            d = insn.dst_base + i * insn.dst_factor_out + j * insn.dst_factor_in
            if insn.use_imm:
                s = [insn.imm] * lanes
            else:
                s = acc[insn.src_base + i * insn.src_factor_out + j * insn.src_factor_in].tolist()
            # looked up at call time, so a test can put a broken ALU in (a stand-in for a buggy model)
            acc[d] = alu_lanes(insn.alu_op, acc[d].tolist(), s)


# ---- dispatch checks of a word -------------------------------------------------------------------
_ACC_BUF = 0  # buffer code of the accumulator (hw/isa.py BUFFERS)


def check_word(isa: Isa, word: int) -> tuple[Instruction | None, int, str]:
    """``(insn, ERR_NONE, "")`` for a word the hardware dispatches, else ``(insn or None, code, message)``.

    docs/microarch.md "FETCH", first match wins: unknown opcode; non-zero reserved bits (both
    BAD_OPCODE, no instruction); LOAD popping or pushing towards the previous stage, STORE towards
    the next (BAD_FIELD); LOAD/STORE naming buffer code 4+ (BAD_OPCODE, none exists with 2 bits but
    the check stays); STORE from a buffer other than ACC, STORE with padding (BAD_FIELD); an ALU
    op with no meaning (BAD_OPCODE)."""
    op = opcode_of(word)
    name = OPCODE_NAMES.get(op)
    if name is None:
        return None, csr.ERR_BAD_OPCODE, f"unknown opcode {op} (word 0x{word:032x})"
    top = isa.used_bits(name)
    if word >> top:
        return None, csr.ERR_BAD_OPCODE, (f"{name} has non-zero reserved bits [{INSN_BITS - 1}:{top}] "
                                          f"(word 0x{word:032x})")
    insn = isa.unpack(name, word)
    if name == "LOAD":
        if insn.pop_prev or insn.push_prev:
            return insn, csr.ERR_BAD_FIELD, "LOAD has no previous stage to pop from or push to"
        if insn.buf not in BUFFER_NAMES:
            return insn, csr.ERR_BAD_OPCODE, f"LOAD names unknown buffer {insn.buf}"
    elif name == "STORE":
        if insn.pop_next or insn.push_next:
            return insn, csr.ERR_BAD_FIELD, "STORE has no next stage to pop from or push to"
        if insn.buf not in BUFFER_NAMES:
            return insn, csr.ERR_BAD_OPCODE, f"STORE names unknown buffer {insn.buf}"
        if insn.buf != _ACC_BUF:
            return insn, csr.ERR_BAD_FIELD, f"STORE reads only the accumulator buffer (buf={insn.buf})"
        if insn.y_pad_0 or insn.y_pad_1 or insn.x_pad_0 or insn.x_pad_1:
            return insn, csr.ERR_BAD_FIELD, "STORE cannot pad (padding fields must be zero)"
    elif name == "ALU":
        if insn.alu_op not in ALU_OP_NAMES:
            return insn, csr.ERR_BAD_OPCODE, f"unknown ALU op {insn.alu_op}"
    return insn, csr.ERR_NONE, ""


def decode_words(isa: Isa, words: list[int]) -> list[Instruction]:
    """The dispatch checks of every word in program order (:func:`check_word`); raises RefFault at
    the first word the hardware refuses."""
    insns = []
    for pc, w in enumerate(words):
        insn, code, msg = check_word(isa, w)
        if code:
            raise RefFault(code, pc, msg)
        insns.append(insn)
    return insns


# ---- dependency tokens: the untimed run ----------------------------------------------------------
def _unit(insn: Instruction) -> str:
    """The unit whose queue fetch dispatches ``insn`` to (LOAD, STORE, the rest compute)."""
    if insn.MNEMONIC == "LOAD":
        return "load"
    if insn.MNEMONIC == "STORE":
        return "store"
    return "compute"


def _tokens(insn: Instruction) -> tuple[list[str], list[str]]:
    """``(queues popped, queues pushed)`` by ``insn``: load's next stage is compute, compute's
    previous is load and next is store, store's previous is compute; a flag towards a missing
    stage names nothing."""
    u = _unit(insn)
    pops: list[str] = []
    pushes: list[str] = []
    if u == "load":
        if insn.pop_next:
            pops.append("c2l")
        if insn.push_next:
            pushes.append("l2c")
    elif u == "store":
        if insn.pop_prev:
            pops.append("c2s")
        if insn.push_prev:
            pushes.append("s2c")
    else:
        if insn.pop_prev:
            pops.append("l2c")
        if insn.pop_next:
            pops.append("s2c")
        if insn.push_prev:
            pushes.append("c2l")
        if insn.push_next:
            pushes.append("c2s")
    return pops, pushes


@dataclass
class TokenRun:
    """What the untimed run of one core's tokens (:func:`token_run`) decides.

    ``started[pc]``: the instruction took its tokens and executed (the hardware's units run it);
    ``waited[pc]``: its unit took it off its queue (into WAIT, where its range checks are made);
    ``dispatched``: how many instructions fetch dispatched; ``deadlock``: None when the stream's
    FINISH completes, else the ERR_PC of ``ERR_DEADLOCK`` (the smallest pc a unit holds, or the
    stream's length when none holds one)."""

    started: list[bool]
    waited: list[bool]
    dispatched: int
    deadlock: int | None


def token_run(insns: list[Instruction], cfg: Any) -> TokenRun:
    """An untimed run of one core (docs/microarch.md "Control", "Errors and deadlock"): fetch
    dispatches in order into the unit queues (bounded by the queue depths; after a BARRIER it
    waits until that BARRIER has drained); each unit takes its queue head, waits until every token
    it pops is there (taken together), executes (FINISH and BARRIER wait until load and store are
    idle with empty queues), then pushes its tokens together once none of their queues is full.
    The run goes one step at a time, fetch first, until FINISH has pushed or nothing can move."""
    n = len(insns)
    units = [_unit(i) for i in insns]
    flows = [_tokens(i) for i in insns]
    depth = {"load": cfg.load_queue_depth, "compute": cfg.compute_queue_depth, "store": cfg.store_queue_depth}
    cap = cfg.token_queue_depth
    queue: dict[str, deque[int]] = {u: deque() for u in depth}
    holds: dict[str, int | None] = dict.fromkeys(depth)     # the pc a unit works on
    step: dict[str, str] = dict.fromkeys(depth, "idle")     # idle, wait, exec, push
    tokens = {"l2c": 0, "c2l": 0, "c2s": 0, "s2c": 0}
    started = [False] * n
    waited = [False] * n
    next_pc = 0
    barrier_open = False  # a dispatched BARRIER has not drained yet: fetch waits

    def drained() -> bool:
        return all(step[u] == "idle" and not queue[u] for u in ("load", "store"))

    while True:
        while not barrier_open and next_pc < n and len(queue[units[next_pc]]) < depth[units[next_pc]]:
            queue[units[next_pc]].append(next_pc)
            barrier_open = insns[next_pc].MNEMONIC == "BARRIER"
            next_pc += 1
        moved = False
        for u in ("load", "compute", "store"):
            pc = holds[u]
            if step[u] == "idle":
                if queue[u]:
                    holds[u] = queue[u].popleft()
                    waited[holds[u]] = True
                    step[u] = "wait"
                    moved = True
            elif step[u] == "wait":
                need = flows[pc][0]
                if all(tokens[q] > 0 for q in need):
                    for q in need:
                        tokens[q] -= 1
                    step[u] = "exec"
                    started[pc] = True
                    moved = True
            elif step[u] == "exec":
                if insns[pc].MNEMONIC not in ("FINISH", "BARRIER"):
                    step[u] = "push"
                    moved = True
                elif drained():
                    if insns[pc].MNEMONIC == "BARRIER":
                        barrier_open = False
                    step[u] = "push"
                    moved = True
            else:  # push
                give = flows[pc][1]
                if all(tokens[q] < cap for q in give):
                    for q in give:
                        tokens[q] += 1
                    if insns[pc].MNEMONIC == "FINISH":
                        return TokenRun(started, waited, next_pc, None)
                    step[u] = "idle"
                    holds[u] = None
                    moved = True
            if moved:
                break  # fetch goes first again: what it can dispatch now counts for the drain
        if not moved:
            held = [pc for pc in holds.values() if pc is not None]
            return TokenRun(started, waited, next_pc, min(held) if held else n)


def run_order(insns: list[Instruction], started: list[bool], waited: list[bool] | None = None) -> list[int]:
    """The order the ISS executes the ``started`` instructions in: program order as far as the tokens
    allow, i.e. always the smallest pc whose predecessors are done. An instruction's predecessors: the
    previous instruction of its unit, the instruction whose push each of its pops takes (the k-th push
    of a queue goes to its k-th pop), for FINISH and BARRIER every earlier instruction (they wait for
    the drain), and every earlier BARRIER (fetch holds behind it). A stream whose pops all take
    earlier pushes runs in program order; one whose store waits for a later ALU's token runs that ALU
    first, as the hardware does. An instruction that ``waited`` but never started is placed where it
    enters WAIT (after its unit's previous instruction and the last BARRIER: not its tokens)."""
    n = len(insns)
    preds: list[list[int]] = [[] for _ in range(n)]
    last_of: dict[str, int] = {}
    pushers: dict[str, list[int]] = {"l2c": [], "c2l": [], "c2s": [], "s2c": []}
    pops_seen = dict.fromkeys(pushers, 0)
    waiting_pops: list[tuple[int, str, int]] = []   # (pc, queue, k): the k-th pop of the queue
    barrier = -1
    for pc, insn in enumerate(insns):
        u = _unit(insn)
        if insn.MNEMONIC in ("FINISH", "BARRIER"):
            preds[pc].extend(last_of.values())   # each unit's last: its unit order covers the rest
        elif u in last_of:
            preds[pc].append(last_of[u])
        last_of[u] = pc
        if barrier >= 0:
            preds[pc].append(barrier)
        if insn.MNEMONIC == "BARRIER":
            barrier = pc
        pops, pushes = _tokens(insn)
        for q in pops:
            waiting_pops.append((pc, q, pops_seen[q]))
            pops_seen[q] += 1
        for q in pushes:
            pushers[q].append(pc)
    blocked = [bool(waited and waited[pc] and not started[pc]) for pc in range(n)]
    for pc, q, k in waiting_pops:
        if k < len(pushers[q]) and not blocked[pc]:
            preds[pc].append(pushers[q][k])
    # a started instruction waited for its predecessors, so the walk below places it; all but a FINISH
    # or BARRIER whose drain never came (it took its tokens, but a load or store before it is stuck)
    succs: list[list[int]] = [[] for _ in range(n)]
    missing = [0] * n
    for pc in range(n):
        if started[pc] or blocked[pc]:
            for d in set(preds[pc]):
                succs[d].append(pc)
                missing[pc] += 1
    ready = [pc for pc in range(n) if (started[pc] or blocked[pc]) and not missing[pc]]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        pc = heapq.heappop(ready)
        order.append(pc)
        for s in succs[pc]:
            missing[s] -= 1
            if not missing[s]:
                heapq.heappush(ready, s)
    return order


# ---- buffers -----------------------------------------------------------------------------------
class Buffers:
    """The on-chip buffers of one core: ``acc`` (ACC_DEPTH, LANES) int32, ``inp`` (INP_DEPTH, LANES)
    int8, ``wgt`` (WGT_DEPTH, BLOCK, BLOCK) int8 (row o = the weights of output lane o), ``uops``
    a list of (acc, inp, wgt) triples, and the valid bits of the micro-ops and weight blocks (all
    clear at START)."""

    def __init__(self, cfg: Any) -> None:
        self.acc = np.zeros((cfg.acc_depth, cfg.lanes), dtype=np.int32)
        self.inp = np.zeros((cfg.inp_depth, cfg.lanes), dtype=np.int8)
        self.wgt = np.zeros((cfg.wgt_depth, cfg.block, cfg.block), dtype=np.int8)
        self.uops: list[tuple[int, int, int]] = [(0, 0, 0)] * cfg.uop_depth
        self.uop_valid = [False] * cfg.uop_depth
        self.wgt_valid = [False] * cfg.wgt_depth

    def put(self, buf: str, index: int, raw: bytes) -> None:
        """LOAD writes entry ``index`` of ``buf`` from its raw little-endian DRAM bytes."""
        if buf == "ACC":
            self.acc[index] = np.frombuffer(raw, dtype="<i4")
        elif buf == "INP":
            self.inp[index] = np.frombuffer(raw, dtype=np.int8)
        elif buf == "WGT":
            self.wgt[index] = np.frombuffer(raw, dtype=np.int8).reshape(self.wgt.shape[1:])
            self.wgt_valid[index] = True
        else:  # UOP: three 16-bit fields from bit 0 of the word, the rest ignored
            word = int.from_bytes(raw, "little")
            mask = (1 << UOP_FIELD_BITS) - 1
            self.uops[index] = (word & mask, (word >> UOP_FIELD_BITS) & mask, (word >> 2 * UOP_FIELD_BITS) & mask)
            self.uop_valid[index] = True


COUNTS = ("load_insns", "compute_insns", "store_insns", "dma_rd_bytes", "dma_wr_bytes", "fetch_bytes", "gemm_ops")


@dataclass
class Machine:
    """What every instruction of a run sees: the config, the shared DRAM image (bytes, written by
    STORE) and the region windows ``(base, size, attr)`` from the register config."""

    cfg: Any
    dram: bytearray
    regions: list[tuple[int, int, int]]

    def allows(self, lo: int, hi: int, attr: int) -> bool:
        """The bytes ``[lo, hi)`` lie inside one region whose ATTR has ``attr``."""
        for base, size, a in self.regions:
            if size and a & attr and base <= lo and hi <= base + size:
                return True
        return False


# ---- LOAD, STORE -------------------------------------------------------------------------------
def _load_checks(m: Machine, insn: Any, pc: int) -> None:
    """LOAD's checks in its first WAIT cycle: the DRAM bytes, then the padded tile in the buffer."""
    cfg = m.cfg
    buf = BUFFER_NAMES[insn.buf]
    eb = cfg.elem_bytes(buf)
    if insn.y_size and insn.x_size:
        first = insn.dram_base * eb
        end = first + ((insn.y_size - 1) * insn.x_stride + insn.x_size) * eb
        if not m.allows(first, end, csr.ATTR_READ):
            raise RefFault(csr.ERR_DRAM_RANGE, pc, f"DRAM bytes [0x{first:x}, 0x{end:x}) outside every region")
    rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
    cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
    depth = cfg.depth_of(buf)
    if rows and cols and insn.sram_base + rows * cols - 1 >= depth:
        raise RefFault(csr.ERR_SRAM_RANGE, pc, f"{buf} index {insn.sram_base + rows * cols - 1} >= {depth}")


def _load(m: Machine, bufs: Buffers, insn: Any, pc: int, counters: dict[str, int]) -> None:
    """LOAD: the DRAM bytes it reads must lie in a readable region, its padded tile
    (``rows x cols`` entries from ``sram_base``) inside the buffer it names; then the tile is
    written row by row, padding entries zero, data entries from DRAM row ``r`` starting
    ``r * x_stride`` entries after ``dram_base``."""
    _load_checks(m, insn, pc)
    buf = BUFFER_NAMES[insn.buf]
    eb = m.cfg.elem_bytes(buf)
    rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
    cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
    zero = bytes(eb)
    for r in range(rows):
        for c in range(cols):
            dr, dc = r - insn.y_pad_0, c - insn.x_pad_0
            if 0 <= dr < insn.y_size and 0 <= dc < insn.x_size:
                at = (insn.dram_base + dr * insn.x_stride + dc) * eb
                raw = bytes(m.dram[at:at + eb])
            else:
                raw = zero
            bufs.put(buf, insn.sram_base + r * cols + c, raw)
    counters["load_insns"] += 1
    counters["dma_rd_bytes"] += insn.y_size * insn.x_size * eb


def _store_checks(m: Machine, insn: Any, pc: int) -> None:
    """STORE's checks in its first WAIT cycle: the DRAM bytes, then the accumulator vectors it reads."""
    cfg = m.cfg
    vb = cfg.out_vec_bytes
    if insn.y_size and insn.x_size:
        first = insn.dram_base * vb
        end = first + ((insn.y_size - 1) * insn.x_stride + insn.x_size) * vb
        if not m.allows(first, end, csr.ATTR_WRITE):
            raise RefFault(csr.ERR_DRAM_RANGE, pc, f"DRAM bytes [0x{first:x}, 0x{end:x}) outside every region")
        last = insn.sram_base + insn.y_size * insn.x_size - 1
        if last >= cfg.acc_depth:
            raise RefFault(csr.ERR_SRAM_RANGE, pc, f"ACC index {last} >= {cfg.acc_depth}")


def _store(m: Machine, bufs: Buffers, insn: Any, pc: int, counters: dict[str, int]) -> None:
    """STORE: the DRAM bytes it writes must lie in a writable region, the ``y_size * x_size``
    accumulator vectors it reads (contiguous from ``sram_base``) inside the buffer; then each
    lane is cut to its low OUT_WIDTH bits (a C cast) and written little-endian, DRAM row ``r``
    starting ``r * x_stride`` output vectors after ``dram_base``."""
    _store_checks(m, insn, pc)
    cfg = m.cfg
    vb = cfg.out_vec_bytes
    lane_bytes = cfg.out_width // 8
    mask = (1 << cfg.out_width) - 1
    for r in range(insn.y_size):
        for c in range(insn.x_size):
            vec = bufs.acc[insn.sram_base + r * insn.x_size + c].tolist()
            raw = b"".join((v & mask).to_bytes(lane_bytes, "little") for v in vec)
            at = (insn.dram_base + r * insn.x_stride + c) * vb
            m.dram[at:at + vb] = raw
    counters["store_insns"] += 1
    counters["dma_wr_bytes"] += insn.y_size * insn.x_size * vb


# ---- ALU ---------------------------------------------------------------------------------------
def _alu(m: Machine, bufs: Buffers, insn: Any, pc: int, counters: dict[str, int]) -> None:
    """ALU: with iterations, the last destination index (and the last source index, without the
    immediate) must be inside the accumulator (factors are unsigned, so the last iteration's index
    is the highest); then :func:`execute_alu`."""
    _alu_checks(m, insn, pc)
    counters["compute_insns"] += 1
    execute_alu(bufs.acc, insn)


def _alu_checks(m: Machine, insn: Any, pc: int) -> None:
    """The ALU's check in its first WAIT cycle: the highest accumulator index it touches."""
    if insn.iter_out and insn.iter_in:
        top = insn.dst_base + (insn.iter_out - 1) * insn.dst_factor_out + (insn.iter_in - 1) * insn.dst_factor_in
        if not insn.use_imm:
            src = insn.src_base + (insn.iter_out - 1) * insn.src_factor_out + (insn.iter_in - 1) * insn.src_factor_in
            top = max(top, src)
        if top >= m.cfg.acc_depth:
            raise RefFault(csr.ERR_SRAM_RANGE, pc, f"ACC index {top} >= {m.cfg.acc_depth}")


# ---- GEMM --------------------------------------------------------------------------------------
def _gemm_checks(m: Machine, insn: Any, pc: int) -> None:
    """GEMM's check in its first WAIT cycle: a non-empty walk past the micro-op buffer."""
    if insn.iter_out and insn.iter_in and insn.uop_begin < insn.uop_end > m.cfg.uop_depth:
        raise RefFault(csr.ERR_SRAM_RANGE, pc, f"micro-op {insn.uop_end - 1} >= UOP_DEPTH {m.cfg.uop_depth}")


def _gemm(m: Machine, bufs: Buffers, insn: Any, pc: int, counters: dict[str, int]) -> None:
    """GEMM (docs/microarch.md "GEMM"): ``for i < iter_out: for j < iter_in: for u in [uop_begin,
    uop_end)``. Before anything, a non-empty walk past the micro-op buffer is ERR_SRAM_RANGE. Then
    per iteration, in this order: micro-op not loaded (ERR_UNLOADED); accumulator index out of range,
    or without reset input or weight index (ERR_SRAM_RANGE); without reset weight block not loaded
    (ERR_UNLOADED). The iterations before a faulting one are written; ``gemm_ops`` counts the
    iterations written without reset."""
    cfg = m.cfg
    if insn.iter_out == 0 or insn.iter_in == 0 or insn.uop_end <= insn.uop_begin:
        counters["compute_insns"] += 1
        return
    _gemm_checks(m, insn, pc)
    acc, inp, wgt = bufs.acc, bufs.inp, bufs.wgt
    k = 0  # iteration number in loop order
    for i in range(insn.iter_out):
        for j in range(insn.iter_in):
            for u in range(insn.uop_begin, insn.uop_end):
                if not bufs.uop_valid[u]:
                    raise RefFault(csr.ERR_UNLOADED, pc, f"GEMM iteration {k}: micro-op {u} was never loaded")
                ua, ux, uw = bufs.uops[u]
                a = ua + i * insn.acc_factor_out + j * insn.acc_factor_in
                if insn.reset:
                    if a >= cfg.acc_depth:
                        raise RefFault(csr.ERR_SRAM_RANGE, pc,
                                       f"GEMM iteration {k}: accumulator index {a} >= ACC_DEPTH {cfg.acc_depth}")
                    acc[a] = 0
                else:
                    x = ux + i * insn.inp_factor_out + j * insn.inp_factor_in
                    w = uw + i * insn.wgt_factor_out + j * insn.wgt_factor_in
                    for what, v, depth, tag in (("accumulator", a, cfg.acc_depth, "ACC"),
                                                ("input", x, cfg.inp_depth, "INP"),
                                                ("weight", w, cfg.wgt_depth, "WGT")):
                        if v >= depth:
                            raise RefFault(csr.ERR_SRAM_RANGE, pc,
                                           f"GEMM iteration {k}: {what} index {v} >= {tag}_DEPTH {depth}")
                    if not bufs.wgt_valid[w]:
                        raise RefFault(csr.ERR_UNLOADED, pc, f"GEMM iteration {k}: weight block {w} was never loaded")
                    # one block: output lane o gets sum_k inp[x][k] * wgt[w][o][k], added mod 2**32
                    dots = wgt[w].astype(np.int64) @ inp[x].astype(np.int64)
                    lanes = (acc[a].astype(np.int64) + dots) & 0xFFFFFFFF
                    acc[a] = lanes.astype(np.uint32).view(np.int32)
                    counters["gemm_ops"] += 1
                k += 1
    counters["compute_insns"] += 1


def _other(m: Machine, bufs: Buffers, insn: Any, pc: int, counters: dict[str, int]) -> None:
    """FINISH and BARRIER: nothing to compute here (the run's control handles them); they count as
    compute instructions."""
    counters["compute_insns"] += 1


EXECUTE: dict[str, Callable[[Machine, Buffers, Any, int, dict[str, int]], None]] = {
    "LOAD": _load, "STORE": _store, "ALU": _alu, "GEMM": _gemm, "FINISH": _other, "BARRIER": _other,
}
# the checks made in an instruction's first WAIT cycle, before its tokens (docs/microarch.md "Range
# errors"): an instruction that waits forever for a token still raises them
WAIT_CHECKS: dict[str, Callable[[Machine, Any, int], None]] = {
    "LOAD": _load_checks, "STORE": _store_checks, "ALU": _alu_checks, "GEMM": _gemm_checks,
}


# ---- a run ---------------------------------------------------------------------------------------
@dataclass
class CoreRun:
    """One core of a run: its instruction words, what of them decodes, its buffers, counters and where it is.

    ``insns`` are the words decoded in order up to the first one the hardware refuses (``bad``: that
    word's fault, None when every word decodes); ``deadlock`` the pc where its tokens deadlock (None:
    its FINISH completes; :func:`token_run`, a BARRIER counted as complete once drained); ``order``
    the instructions that run or only enter WAIT (``blocked``: they never get their tokens), in the
    order they do (:func:`run_order`), ``at`` how many of them went; ``dispatched`` how many
    instructions fetch dispatches; ``pc`` the start of the next phase; ``state`` "run", "barrier"
    (arrived at the BARRIER before ``pc``), "stuck" (deadlocked) or "finished"."""

    core: int
    words: list[int]
    insns: list[Instruction]
    bad: RefFault | None
    bufs: Buffers
    counters: dict[str, int]
    order: list[int]
    blocked: set[int] = field(default_factory=set)
    dispatched: int | None = None
    deadlock: int | None = None
    at: int = 0
    pc: int = 0
    state: str = "run"


def run_reference(program: Program, check_tokens: bool = True) -> RunResult:
    """Execute ``program`` and return outputs, counters and the first fault.

    One core: the stream in the order of :func:`run_order`. Several cores (one window each, on the same DRAM): in
    *phases*: in phase p every core in core order runs its stream up to its next BARRIER (arriving
    there) or its FINISH (finishing); the phase ends with every core arrived or finished. Some arrived
    and some finished is ERR_BARRIER (the lowest arrived core, at its BARRIER's pc); all arrived: the
    next phase. Within a core's part of a phase, faults come in this order: a word the hardware refuses
    (dispatch checks, as fetch reaches it), then the instructions' own faults in the order they run;
    a core whose tokens deadlock in the phase is stuck, and the other cores go on (their faults come
    first: the hardware sees a deadlock only once nothing moves anywhere). A deadlock is reported as
    the hardware does: on the lowest core with a unit holding an instruction (its smallest such pc; a
    core at a BARRIER holds it), else on core 0 at its INSN_COUNT. The result's ``error`` carries
    ``core`` and ``extra["cores"]`` the per-core counters (``counters`` is their sum) when the config
    has several cores. With ``check_tokens`` False the tokens are ignored: every instruction runs, in
    program order (a sequential reading, not the hardware's)."""
    t0 = time.perf_counter()
    cfg = program.config
    n = cfg.num_cores
    regs = dict(program.regs)
    regions = [(regs.get(f"REGION{k}_BASE", 0), regs.get(f"REGION{k}_SIZE", 0), regs.get(f"REGION{k}_ATTR", 0))
               for k in range(cfg.max_regions)]
    m = Machine(cfg, bytearray(program.dram_image()), regions)
    cores: list[CoreRun] = []

    def result(err: RefFault | None) -> RunResult:
        e = None
        if err is not None:
            e = {"code": err.code, "name": csr.ERROR_NAMES[err.code], "pc": err.pc, "message": err.message}
            if n > 1:
                e["core"] = err.core if err.core is not None else 0
        per_core = [c.counters for c in cores] + [dict.fromkeys(COUNTS, 0) for _ in range(n - len(cores))]
        total = {k: sum(c[k] for c in per_core) for k in COUNTS}
        img = np.frombuffer(bytes(m.dram), dtype=np.uint8).copy()
        res = RunResult("iss", program.read_outputs(img), None, total, e, time.perf_counter() - t0)
        if n > 1:
            res.extra["cores"] = [dict(c) for c in per_core]
        return res

    isa = Isa(cfg)
    for k in range(n):
        addr = regs.get(csr.core_reg("INSN_ADDR_LO", k, n), 0)
        count = regs.get(csr.core_reg("INSN_COUNT", k, n), 0)
        if (regs.get(csr.core_reg("INSN_ADDR_HI", k, n), 0) or count == 0 or addr % INSN_BYTES
                or not m.allows(addr, addr + INSN_BYTES * count, csr.ATTR_READ)):
            why = f"INSN_ADDR_LO 0x{addr:x} is not a multiple of {INSN_BYTES}" if addr % INSN_BYTES else \
                "instruction window outside every readable region"
            return result(RefFault(csr.ERR_INSN_RANGE, 0, why, k if n > 1 else None))
        words = [int.from_bytes(m.dram[addr + INSN_BYTES * j: addr + INSN_BYTES * (j + 1)], "little")
                 for j in range(count)]
        insns: list[Instruction] = []
        bad = None
        for pc, w in enumerate(words):
            insn, code, msg = check_word(isa, w)
            if code:
                bad = RefFault(code, pc, msg)
                break
            insns.append(insn)
        counters = dict.fromkeys(COUNTS, 0)
        counters["fetch_bytes"] = INSN_BYTES * count
        c = CoreRun(k, words, insns, bad, Buffers(cfg), counters, list(range(len(insns))))
        if check_tokens and (bad is None or insns):
            run = token_run(insns, cfg)
            c.deadlock, c.dispatched = run.deadlock, run.dispatched
            c.order = run_order(insns, run.started, run.waited)
            c.blocked = {pc for pc in range(len(insns)) if run.waited[pc] and not run.started[pc]}
        cores.append(c)
    try:
        while True:
            for c in cores:
                if c.state == "run":
                    _run_phase(m, c, n > 1)
            stuck = [c for c in cores if c.state == "stuck"]
            if stuck:
                raise _deadlock(cores, stuck, n > 1)
            arrived = [c for c in cores if c.state == "barrier"]
            if not arrived:
                return result(None)
            gone = [c.core for c in cores if c.state == "finished"]
            if gone:
                first = arrived[0]
                raise RefFault(csr.ERR_BARRIER, first.pc - 1,
                               f"core(s) {', '.join(str(c.core) for c in arrived)} wait at a BARRIER, core(s) "
                               f"{', '.join(map(str, gone))} finished without reaching it",
                               first.core if n > 1 else None)
            for c in arrived:
                c.state = "run"
    except RefFault as f:
        return result(f)


def _deadlock(cores: list[CoreRun], stuck: list[CoreRun], many: bool) -> RefFault:
    """The ERR_DEADLOCK of a phase in which ``stuck`` cores deadlocked (docs/microarch.md "Several
    cores"): on the lowest core with a unit holding an instruction, else core 0 at its INSN_COUNT."""
    held = [(c.core, c.deadlock) for c in stuck if c.deadlock is not None and c.deadlock < len(c.insns)]
    held += [(c.core, c.pc - 1) for c in cores if c.state == "barrier"]
    core, pc = min(held) if held else (0, len(cores[0].words))
    why = "every unit waits for a token that cannot arrive"
    if many:
        why = (f"core(s) {', '.join(str(c.core) for c in stuck)} deadlocked ({why})"
               + (f"; core {core} waits at its BARRIER" if any(c.core == core for c in cores if c.state == "barrier")
                  else ""))
    return RefFault(csr.ERR_DEADLOCK, pc, why, core if many else None)


def _run_phase(m: Machine, c: CoreRun, many: bool) -> None:
    """Core ``c``'s part of one phase: from its pc up to and including its next BARRIER or FINISH (or the
    end of its stream); faults in the order of :func:`run_reference`; a deadlock in it leaves the core
    "stuck" for the caller to report."""
    core = c.core if many else None
    end = c.pc
    while end < len(c.insns) and c.insns[end].MNEMONIC not in ("BARRIER", "FINISH"):
        end += 1
    # the core's last part: its FINISH, or the end of what decodes (fetch goes on dispatching after a
    # FINISH, but nothing after a BARRIER until it completes)
    last = end >= len(c.insns) or c.insns[end].MNEMONIC == "FINISH"
    # the refused word is dispatched in this part, unless a deadlock stalls fetch before it
    if last and c.bad is not None and (c.dispatched is None or c.dispatched >= len(c.insns)):
        raise RefFault(c.bad.code, c.bad.pc, c.bad.message, core)
    stop = min(end + 1, len(c.insns))
    while c.at < len(c.order) and c.order[c.at] < stop:
        pc = c.order[c.at]
        insn = c.insns[pc]
        try:
            if pc in c.blocked:  # it waits forever for a token, but was checked on entering WAIT
                WAIT_CHECKS.get(insn.MNEMONIC, lambda *_: None)(m, insn, pc)
            else:
                EXECUTE[insn.MNEMONIC](m, c.bufs, insn, pc, c.counters)
        except RefFault as f:
            raise RefFault(f.code, f.pc, f.message, core) from None
        c.at += 1
    c.pc = stop
    if c.deadlock is not None and (last or c.deadlock < stop):
        c.state = "stuck"
    else:
        c.state = "finished" if last else "barrier"
