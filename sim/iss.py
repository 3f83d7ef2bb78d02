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
numpy engine (``hw/alu_numpy.py``) that the golden path and the TLM run.

Faults are reported in program order; for a program with one faulting instruction
(what the fuzzer injects) that is the pc every model must report.
"""

from __future__ import annotations

import time

import numpy as np

from hw import csr
from hw.analysis import deadlock_pc
from hw.isa import ALU_OP_NAMES, INSN_BYTES, Instruction, Isa
from hw.isa_semantics import ALU_SCALAR, classify_word, dram_span, load_tile_shape, sram_last_index
from hw.program import Program
from hw.result import RunResult


class RefFault(Exception):
    """A fault the hardware reports: code from hw.csr and the instruction index."""

    def __init__(self, code: int, pc: int, message: str):
        super().__init__(f"{csr.ERROR_NAMES[code]} at instruction {pc}: {message}")
        self.code, self.pc, self.message = code, pc, message


def alu_lanes(op: int, x: list[int], s: list[int]) -> list[int]:
    """One ALU op lane by lane on 32-bit values (Python ints), by the scalar reference semantics."""
    f = ALU_SCALAR[ALU_OP_NAMES[op]]
    return [f(a, b) for a, b in zip(x, s)]


def execute_alu(acc: np.ndarray, insn) -> None:
    """One ALU instruction on ``acc`` (``(depth, lanes)`` int64 holding 32-bit values), one vector at a
    time strictly in loop order (a write is seen by later reads); indices already range checked."""
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


def run_reference(program: Program, check_tokens: bool = True) -> RunResult:
    """Execute ``program`` sequentially and return outputs, counters and the first fault."""
    t0 = time.perf_counter()
    cfg = program.config
    lanes, depth = cfg.lanes, cfg.acc_depth
    img = np.frombuffer(bytes(program.dram_image()), dtype=np.uint8).copy()
    regs = _regs(program)
    acc = np.zeros((depth, lanes), dtype=np.int64)
    counters = {"load_insns": 0, "compute_insns": 0, "store_insns": 0, "dma_rd_bytes": 0, "dma_wr_bytes": 0,
                "fetch_bytes": 0}
    windows = [(regs.get(f"REGION{k}_BASE", 0), regs.get(f"REGION{k}_SIZE", 0), regs.get(f"REGION{k}_ATTR", 0))
               for k in range(cfg.max_regions)]
    out_dt = np.dtype(f"<i{cfg.out_width // 8}")

    def in_region(lo: int, hi: int, attr: int) -> bool:
        return any(s and b <= lo and hi <= b + s and a & attr for b, s, a in windows)

    def result(err: RefFault | None) -> RunResult:
        e = None if err is None else {"code": err.code, "name": csr.ERROR_NAMES[err.code], "pc": err.pc,
                                      "message": err.message}
        return RunResult("iss", program.read_outputs(img), None, counters, e, time.perf_counter() - t0)

    addr, count = regs.get("INSN_ADDR_LO", 0), regs.get("INSN_COUNT", 0)
    if regs.get("INSN_ADDR_HI", 0) or count == 0 or not in_region(addr, addr + INSN_BYTES * count, csr.ATTR_READ):
        return result(RefFault(csr.ERR_INSN_RANGE, 0, "instruction window outside every readable region"))
    isa = Isa(cfg)
    words = [int.from_bytes(img[addr + INSN_BYTES * k: addr + INSN_BYTES * (k + 1)].tobytes(), "little")
             for k in range(count)]
    counters["fetch_bytes"] = INSN_BYTES * count
    try:
        insns = decode_words(isa, words)
        for pc, i in enumerate(insns):
            _execute(i, pc, cfg, img, acc, counters, in_region, out_dt)
            if i.MNEMONIC == "FINISH":
                break
        if check_tokens:
            dl = deadlock_pc(insns, cfg)
            if dl is not None:
                raise RefFault(csr.ERR_DEADLOCK, dl, "every unit waits for a token that cannot arrive")
    except RefFault as f:
        return result(f)
    return result(None)


def _execute(i, pc: int, cfg, img: np.ndarray, acc: np.ndarray, counters: dict, in_region, out_dt) -> None:
    """One instruction: range checks first (DRAM, then SRAM; a faulting instruction writes nothing),
    then the data."""
    lanes, depth = cfg.lanes, cfg.acc_depth
    n = i.MNEMONIC
    span = dram_span(i, cfg)
    if span is not None and not in_region(*span, csr.ATTR_READ if n == "LOAD" else csr.ATTR_WRITE):
        raise RefFault(csr.ERR_DRAM_RANGE, pc, f"DRAM bytes [0x{span[0]:x}, 0x{span[1]:x}) outside every region")
    top = sram_last_index(i)
    if top is not None and top >= depth:
        raise RefFault(csr.ERR_SRAM_RANGE, pc, f"buffer index {top} >= {depth}")
    if n == "LOAD":
        rows, cols = load_tile_shape(i)
        tile = np.zeros((rows, cols, lanes), dtype=np.int64)
        for r in range(i.y_size):
            b = (i.dram_base + r * i.x_stride) * cfg.acc_vec_bytes
            row = img[b: b + i.x_size * cfg.acc_vec_bytes].view("<i4").reshape(i.x_size, lanes)
            tile[i.y_pad_0 + r, i.x_pad_0: i.x_pad_0 + i.x_size] = row
        acc[i.sram_base: i.sram_base + rows * cols] = tile.reshape(rows * cols, lanes)
        counters["load_insns"] += 1
        counters["dma_rd_bytes"] += i.y_size * i.x_size * cfg.acc_vec_bytes
    elif n == "STORE":
        for r in range(i.y_size):
            vals = acc[i.sram_base + r * i.x_size: i.sram_base + (r + 1) * i.x_size].astype(out_dt)  # C cast
            b = (i.dram_base + r * i.x_stride) * cfg.out_vec_bytes
            img[b: b + i.x_size * cfg.out_vec_bytes] = np.frombuffer(vals.tobytes(), dtype=np.uint8)
        counters["store_insns"] += 1
        counters["dma_wr_bytes"] += i.y_size * i.x_size * cfg.out_vec_bytes
    else:
        counters["compute_insns"] += 1
        if n == "ALU":
            execute_alu(acc, i)
