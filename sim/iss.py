"""The instruction-set simulator: a plain, sequential interpreter of the ISA (the oracle of `cosim fuzz`).

It follows ``docs/microarch.md`` and the ISA's meaning in :mod:`hw.isa_semantics`
(the error-check order of a word, footprints and range checks, the scalar ALU
semantics) and :mod:`hw.analysis` (the untimed deadlock run), and nothing of the TLM
or RTL: it reads the instruction words from the Program's DRAM image, executes them
strictly in program order (tokens only decide whether the program can finish), and
returns a :class:`hw.result.RunResult` with outputs, the count-type counters and, for
a faulting program, ``error`` = {code, name, pc}. It has no notion of time, so
``cycles`` is None and busy/stall counters are absent.

Its ALU is the plain engine, on purpose: one vector at a time in loop order, each lane
through :data:`hw.isa_semantics.ALU_SCALAR` on Python ints, so it shares no code with the
numpy engine (``hw/alu_numpy.py``) that the golden path and the TLM run. GEMM's meaning is
written once, in :func:`hw.gemm_numpy.run_gemm` (faults included), which every model calls.

Buffers: the accumulator (int32), and the GEMM core's input (int8 vectors), weight (int8
BLOCK x BLOCK blocks) and micro-op ((acc, inp, wgt) triples) buffers, which LOAD fills from
DRAM entries of their own size (``HwConfig.elem_bytes``); a micro-op and a weight block are
valid once a LOAD wrote them (data or padding) in this run, and GEMM faults on an invalid one.

Faults are reported in program order; for a program with one faulting instruction
(what the fuzzer injects) that is the pc every model must report.

Several cores (``num_cores > 1``, one instruction window per core, :attr:`hw.program.Program.windows`)
share the DRAM image; each has its own buffers and counters. They run in phases separated by
BARRIERs (:func:`run_reference`): a core that FINISHes while another waits at a BARRIER is
``ERR_BARRIER``; every error names its core (``error["core"]``, pcs counted in that core's stream).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from hw import csr
from hw.analysis import deadlock_pc
from hw.gemm_numpy import gemm_uop_range_bad, run_gemm
from hw.isa import ALU_OP_NAMES, INSN_BYTES, UOP_FIELD_BITS, Instruction, Isa
from hw.isa_semantics import ALU_SCALAR, buffer_of, classify_word, dram_span, load_tile_shape, sram_last_index
from hw.program import Program
from hw.result import RunResult


class RefFault(Exception):
    """A fault the hardware reports: code from hw.csr, the instruction index (in its core's stream) and,
    on several cores, the core."""

    def __init__(self, code: int, pc: int, message: str, core: int | None = None):
        where = f"core {core} " if core is not None else ""
        super().__init__(f"{csr.ERROR_NAMES[code]} at {where}instruction {pc}: {message}")
        self.code, self.pc, self.message, self.core = code, pc, message, core


def alu_lanes(op: int, x: list[int], s: list[int]) -> list[int]:
    """One ALU op lane by lane on 32-bit values (Python ints), by the scalar reference semantics."""
    f = ALU_SCALAR[ALU_OP_NAMES[op]]
    return [f(a, b) for a, b in zip(x, s)]


def execute_alu(acc: np.ndarray, insn) -> None:
    """One ALU instruction on ``acc`` (``(depth, lanes)`` int32), one vector at a time strictly in
    loop order (a write is seen by later reads); indices already range checked."""
    lanes = acc.shape[1]
    for a in range(insn.iter_out):
        for b in range(insn.iter_in):
            d = insn.dst_base + a * insn.dst_factor_out + b * insn.dst_factor_in
            s = [insn.imm] * lanes if insn.use_imm else \
                acc[insn.src_base + a * insn.src_factor_out + b * insn.src_factor_in].tolist()
            acc[d] = alu_lanes(insn.alu_op, acc[d].tolist(), s)


def decode_words(isa: Isa, words: list[int]) -> list[Instruction]:
    """The dispatch checks of every word in program order (:func:`hw.isa_semantics.classify_word`);
    raises RefFault at the first word the hardware refuses."""
    insns = []
    for pc, w in enumerate(words):
        i, code, msg = classify_word(isa, w)
        if code:
            raise RefFault(code, pc, msg)
        insns.append(i)
    return insns


def _regs(program: Program) -> dict[str, int]:
    return dict(program.regs)


COUNTS = ("load_insns", "compute_insns", "store_insns", "dma_rd_bytes", "dma_wr_bytes", "fetch_bytes", "gemm_ops")


@dataclass
class CoreRun:
    """One core of a run: its instruction words, what of them decodes, its buffers, counters and where it is.

    ``insns`` are the words decoded in order up to the first one the hardware refuses (``bad``: that
    word's fault, None when every word decodes); ``deadlock`` the pc where its tokens deadlock (None:
    its FINISH completes; :func:`hw.analysis.deadlock_pc`, a BARRIER counted as complete once drained);
    ``pc`` the next instruction to run; ``state`` "run", "barrier" (arrived at the BARRIER before
    ``pc``) or "finished"."""

    core: int
    words: list[int]
    insns: list[Instruction]
    bad: RefFault | None
    bufs: "Buffers"
    counters: dict[str, int]
    deadlock: int | None = None
    pc: int = 0
    state: str = "run"


def run_reference(program: Program, check_tokens: bool = True) -> RunResult:
    """Execute ``program`` and return outputs, counters and the first fault.

    One core: the stream in program order. Several cores (one window each, on the same DRAM): in
    *phases*: in phase p every core in core order runs its stream up to its next BARRIER (arriving
    there) or its FINISH (finishing); the phase ends with every core arrived or finished. Some arrived
    and some finished is ERR_BARRIER (the lowest arrived core, at its BARRIER's pc); all arrived: the
    next phase. Within a core's part of a phase, faults come in this order: a word the hardware refuses
    (dispatch checks, as fetch reaches it), then the instructions' own faults in program order, then a
    token deadlock. The result's ``error`` carries ``core`` and ``extra["cores"]`` the per-core counters
    (``counters`` is their sum) when the config has several cores."""
    t0 = time.perf_counter()
    cfg = program.config
    n = cfg.num_cores
    img = np.frombuffer(bytes(program.dram_image()), dtype=np.uint8).copy()
    regs = _regs(program)
    windows = [(regs.get(f"REGION{k}_BASE", 0), regs.get(f"REGION{k}_SIZE", 0), regs.get(f"REGION{k}_ATTR", 0))
               for k in range(cfg.max_regions)]
    out_dt = np.dtype(f"<i{cfg.out_width // 8}")
    cores: list[CoreRun] = []

    def in_region(lo: int, hi: int, attr: int) -> bool:
        return any(s and b <= lo and hi <= b + s and a & attr for b, s, a in windows)

    def result(err: RefFault | None) -> RunResult:
        e = None
        if err is not None:
            e = {"code": err.code, "name": csr.ERROR_NAMES[err.code], "pc": err.pc, "message": err.message}
            if n > 1:
                e["core"] = err.core if err.core is not None else 0
        per_core = [c.counters for c in cores] + [dict.fromkeys(COUNTS, 0) for _ in range(n - len(cores))]
        total = {k: sum(c[k] for c in per_core) for k in COUNTS}
        res = RunResult("iss", program.read_outputs(img), None, total, e, time.perf_counter() - t0)
        if n > 1:
            res.extra["cores"] = [dict(c) for c in per_core]
        return res

    isa = Isa(cfg)
    for k in range(n):
        addr, count = regs.get(csr.core_reg("INSN_ADDR_LO", k, n), 0), regs.get(csr.core_reg("INSN_COUNT", k, n), 0)
        if (regs.get(csr.core_reg("INSN_ADDR_HI", k, n), 0) or count == 0
                or not in_region(addr, addr + INSN_BYTES * count, csr.ATTR_READ)):
            return result(RefFault(csr.ERR_INSN_RANGE, 0, "instruction window outside every readable region",
                                   k if n > 1 else None))
        words = [int.from_bytes(img[addr + INSN_BYTES * j: addr + INSN_BYTES * (j + 1)].tobytes(), "little")
                 for j in range(count)]
        try:
            insns, bad = decode_words(isa, words), None
        except RefFault as f:
            insns, bad = decode_words(isa, words[:f.pc]), f
        counters = dict.fromkeys(COUNTS, 0)
        counters["fetch_bytes"] = INSN_BYTES * count
        c = CoreRun(k, words, insns, bad, Buffers(cfg), counters)
        if check_tokens and (bad is None or insns):
            c.deadlock = deadlock_pc(insns, cfg)
        cores.append(c)
    try:
        while True:
            for c in cores:
                if c.state != "finished":
                    try:
                        _run_phase(c, cfg, img, in_region, out_dt, check_tokens, n > 1)
                    except RefFault as f:
                        # A deadlock stops every core; the hardware reports the lowest core with a unit
                        # waiting, and a core at a BARRIER waits in its EXEC (microarch "Several cores"):
                        # a lower core that arrived at its BARRIER in this phase is the one named.
                        waiting = [x for x in cores if x.core < c.core and x.state == "barrier"]
                        if f.code != csr.ERR_DEADLOCK or not waiting:
                            raise
                        raise RefFault(csr.ERR_DEADLOCK, waiting[0].pc - 1, f"core {c.core}: {f.message}; core "
                                       f"{waiting[0].core} waits at its BARRIER", waiting[0].core) from None
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


def _run_phase(c: CoreRun, cfg, img: np.ndarray, in_region, out_dt, check_tokens: bool, many: bool) -> None:
    """Core ``c``'s part of one phase: from its pc up to and including its next BARRIER or FINISH (or the
    end of its stream); faults in the order of :func:`run_reference`."""
    core = c.core if many else None
    end = c.pc
    while end < len(c.insns) and c.insns[end].MNEMONIC not in ("BARRIER", "FINISH"):
        end += 1
    # the core's last part: its FINISH, or the end of what decodes (fetch goes on dispatching after a
    # FINISH, but nothing after a BARRIER until it completes)
    last = end >= len(c.insns) or c.insns[end].MNEMONIC == "FINISH"
    if last and c.bad is not None:  # the refused word is dispatched in this part
        raise RefFault(c.bad.code, c.bad.pc, c.bad.message, core)
    stop = min(end + 1, len(c.insns))
    for pc in range(c.pc, stop):
        try:
            _execute(c.insns[pc], pc, cfg, img, c.bufs, c.counters, in_region, out_dt)
        except RefFault as f:
            raise RefFault(f.code, f.pc, f.message, core) from None
    if check_tokens and c.deadlock is not None and (last or c.deadlock < stop):
        raise RefFault(csr.ERR_DEADLOCK, c.deadlock, "every unit waits for a token that cannot arrive", core)
    c.pc = stop
    c.state = "finished" if last else "barrier"


class Buffers:
    """The on-chip buffers of one run: ``acc`` (ACC_DEPTH, LANES) int32, ``inp`` (INP_DEPTH, LANES)
    int8, ``wgt`` (WGT_DEPTH, BLOCK, BLOCK) int8, ``uops`` (UOP_DEPTH, 3) int64, and the valid
    bits of the micro-ops and weight blocks (all clear at START)."""

    def __init__(self, cfg) -> None:
        self.acc = np.zeros((cfg.acc_depth, cfg.lanes), dtype=np.int32)
        self.inp = np.zeros((cfg.inp_depth, cfg.lanes), dtype=np.int8)
        self.wgt = np.zeros((cfg.wgt_depth, cfg.block, cfg.block), dtype=np.int8)
        self.uops = np.zeros((cfg.uop_depth, 3), dtype=np.int64)
        self.uop_valid = np.zeros(cfg.uop_depth, dtype=bool)
        self.wgt_valid = np.zeros(cfg.wgt_depth, dtype=bool)

    def write(self, buf: str, first: int, entries: np.ndarray) -> None:
        """LOAD writes ``entries`` (one row of raw DRAM bytes per entry) from entry ``first`` on."""
        n = len(entries)
        end = first + n
        if buf == "ACC":
            self.acc[first:end] = entries.view("<i4")
        elif buf == "INP":
            self.inp[first:end] = entries.view(np.int8)
        elif buf == "WGT":
            self.wgt[first:end] = entries.view(np.int8).reshape(n, *self.wgt.shape[1:])
            self.wgt_valid[first:end] = True
        else:  # UOP: three little-endian 16-bit fields from bit 0 of each 16-byte word
            for k in range(n):
                word = int.from_bytes(entries[k].tobytes(), "little")
                self.uops[first + k] = [(word >> (f * UOP_FIELD_BITS)) & ((1 << UOP_FIELD_BITS) - 1)
                                        for f in range(3)]
            self.uop_valid[first:end] = True


def _execute(i, pc: int, cfg, img: np.ndarray, bufs: Buffers, counters: dict, in_region, out_dt) -> None:
    """One instruction: range checks first (DRAM, then SRAM; a faulting instruction writes nothing),
    then the data. GEMM checks its micro-op range first, then each iteration in loop order
    (:func:`hw.gemm_numpy.run_gemm`): the iterations before a faulting one are applied."""
    n = i.MNEMONIC
    acc = bufs.acc
    span = dram_span(i, cfg)
    if span is not None and not in_region(*span, csr.ATTR_READ if n == "LOAD" else csr.ATTR_WRITE):
        raise RefFault(csr.ERR_DRAM_RANGE, pc, f"DRAM bytes [0x{span[0]:x}, 0x{span[1]:x}) outside every region")
    buf = buffer_of(i) if n in ("LOAD", "STORE") else "ACC"
    depth = cfg.depth_of(buf)
    top = sram_last_index(i)
    if top is not None and top >= depth:
        raise RefFault(csr.ERR_SRAM_RANGE, pc, f"{buf} index {top} >= {depth}")
    if n == "GEMM" and gemm_uop_range_bad(i, cfg.uop_depth):
        raise RefFault(csr.ERR_SRAM_RANGE, pc, f"micro-op {i.uop_end - 1} >= UOP_DEPTH {cfg.uop_depth}")
    if n == "LOAD":
        eb = cfg.elem_bytes(buf)
        rows, cols = load_tile_shape(i)
        tile = np.zeros((rows, cols, eb), dtype=np.uint8)
        for r in range(i.y_size):
            b = (i.dram_base + r * i.x_stride) * eb
            tile[i.y_pad_0 + r, i.x_pad_0: i.x_pad_0 + i.x_size] = img[b: b + i.x_size * eb].reshape(i.x_size, eb)
        bufs.write(buf, i.sram_base, tile.reshape(rows * cols, eb))
        counters["load_insns"] += 1
        counters["dma_rd_bytes"] += i.y_size * i.x_size * eb
    elif n == "STORE":
        for r in range(i.y_size):
            vals = acc[i.sram_base + r * i.x_size: i.sram_base + (r + 1) * i.x_size].astype(out_dt)  # C cast
            b = (i.dram_base + r * i.x_stride) * cfg.out_vec_bytes
            img[b: b + i.x_size * cfg.out_vec_bytes] = np.frombuffer(vals.tobytes(), dtype=np.uint8)
        counters["store_insns"] += 1
        counters["dma_wr_bytes"] += i.y_size * i.x_size * cfg.out_vec_bytes
    elif n == "GEMM":
        applied, fault = run_gemm(acc, bufs.inp, bufs.wgt, bufs.uops, i, cfg, bufs.uop_valid, bufs.wgt_valid)
        if not i.reset:
            counters["gemm_ops"] += applied
        if fault is not None:
            raise RefFault(fault.code, pc, fault.message)
        counters["compute_insns"] += 1
    else:
        counters["compute_insns"] += 1
        if n == "ALU":
            execute_alu(acc, i)
