"""An independent, sequential reference interpreter of the ISA (the oracle of `cosim fuzz`).

It follows the ``hw/isa.py`` docstring and ``docs/microarch.md`` (data semantics,
range checks, dispatch checks, deadlock) and nothing of the TLM or RTL: it reads the
instruction words from the Program's DRAM image, executes them strictly in program
order on numpy arrays (tokens only decide whether the program can finish), and
returns a :class:`hw.result.RunResult` with outputs, the count-type counters and, for
a faulting program, ``error`` = {code, name, pc}. It has no notion of time, so
``cycles`` is None and busy/stall counters are absent.

Faults are reported in program order; for a program with one faulting instruction
(what the fuzzer injects) that is the pc every model must report.
"""

from __future__ import annotations

import time

import numpy as np

from hw import csr
from hw.isa import ALU_OP_NAMES, BUFFER_NAMES, BUFFERS, INSN_BYTES, INSN_CLASSES, OPCODE_NAMES, Isa
from hw.program import Program
from hw.result import RunResult

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


class RefFault(Exception):
    """A fault the hardware reports: code from hw.csr and the instruction index."""

    def __init__(self, code: int, pc: int, message: str):
        super().__init__(f"{csr.ERROR_NAMES[code]} at instruction {pc}: {message}")
        self.code, self.pc, self.message = code, pc, message


def _wrap(v: np.ndarray) -> np.ndarray:
    """Wrap int64 lanes to 32-bit two's complement."""
    return ((v.astype(np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int64)


def alu_op(op: int, x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """One ALU op on int64 lane arrays holding 32-bit values; returns wrapped int32 values."""
    x, s = x.astype(np.int64), np.broadcast_to(np.asarray(s, dtype=np.int64), x.shape)
    if op == 0:
        r = x + s
    elif op == 1:
        r = x - s
    elif op == 2:
        r = x * s  # |x*s| < 2**62 fits int64; the low 32 bits are what we keep
    elif op == 3:
        r = np.minimum(x, s)
    elif op == 4:
        r = np.maximum(x, s)
    elif op == 5:  # SHR: arithmetic right for s >= 0 (capped at 31), left for s < 0 (0 from 32 on)
        right = x >> np.minimum(np.maximum(s, 0), 31)
        left = np.where(-s >= 32, 0, (x << np.clip(-s, 0, 31)) & 0xFFFFFFFF)
        r = np.where(s >= 0, right, left)
    elif op == 6:  # CLIP: min(max(x, -s), s) with -s wrapping at 32 bits
        r = np.minimum(np.maximum(x, _wrap(-s)), s)
    elif op == 7:
        r = s
    else:
        raise ValueError(f"unknown ALU op {op}")
    return _wrap(r)


def _regs(program: Program) -> dict[str, int]:
    return dict(program.regs)


def token_deadlock(insns: list, cfg) -> int | None:
    """Untimed run of fetch, queues and tokens; the deadlock pc (microarch.md) or None.

    Units, in-order queues and counting token queues form a determinate network, so
    whether and where it deadlocks does not depend on timing: we move any unit that
    can move until FINISH completes or nothing can move.
    """
    depth = {"load": cfg.load_queue_depth, "compute": cfg.compute_queue_depth, "store": cfg.store_queue_depth}
    tq = cfg.token_queue_depth
    # token queue popped by pop_prev / pop_next and pushed by push_prev / push_next, per unit
    links = {"load": (None, "c2l", None, "l2c"), "compute": ("l2c", "s2c", "c2l", "c2s"),
             "store": ("c2s", None, "s2c", None)}
    tok = {"l2c": 0, "c2l": 0, "c2s": 0, "s2c": 0}
    queues: dict[str, list[int]] = {u: [] for u in depth}
    held: dict[str, list] = {u: [] for u in depth}  # [] idle, else [pc, state] with state wait/finish/push
    nxt = 0
    while True:
        moved = False
        if nxt < len(insns):  # fetch dispatches in order, stalling on a full queue
            u = {"LOAD": "load", "STORE": "store"}.get(insns[nxt].MNEMONIC, "compute")
            if len(queues[u]) < depth[u]:
                queues[u].append(nxt)
                nxt, moved = nxt + 1, True
        for u in ("load", "compute", "store"):
            pp, pn, sp, sn = links[u]
            if not held[u] and queues[u]:
                held[u], moved = [queues[u].pop(0), "wait"], True
            if not held[u]:
                continue
            i = insns[held[u][0]]
            if held[u][1] == "wait":
                need = [q for q, f in ((pp, i.pop_prev), (pn, i.pop_next)) if f]
                if all(tok[q] > 0 for q in need):
                    for q in need:
                        tok[q] -= 1
                    held[u][1], moved = ("finish" if i.MNEMONIC == "FINISH" else "push"), True
            if held[u][1] == "finish":
                if not (queues["load"] or queues["store"] or held["load"] or held["store"]):
                    return None  # FINISH completes: DONE
            elif held[u][1] == "push":
                if len(held[u]) == 2:  # the tokens this instruction still has to push
                    held[u].append([q for q, f in ((sp, i.push_prev), (sn, i.push_next)) if f])
                for q in list(held[u][2]):
                    if tok[q] < tq:  # each push waits while its token queue is full
                        tok[q] += 1
                        held[u][2].remove(q)
                        moved = True
                if not held[u][2]:
                    held[u], moved = [], True
        if not moved:
            pcs = [h[0] for h in held.values() if h]
            return min(pcs) if pcs else len(insns)


def classify_word(isa: Isa, word: int):
    """(error code, message, instruction or None) of one word, in the microarch's order of precedence:
    BAD_OPCODE (unknown opcode, reserved bits, unknown ALU op or buffer), then BAD_FIELD (a token flag
    towards a missing stage, STORE from a buffer other than ACC, STORE padding), then UNSUPPORTED."""
    name = OPCODE_NAMES.get(word & 7)
    if name is None:
        return csr.ERR_BAD_OPCODE, f"unknown opcode {word & 7}", None
    if word >> isa.used_bits(name):
        return csr.ERR_BAD_OPCODE, f"{name} has non-zero reserved bits", None
    kw = {}
    for f in isa.layouts[name][1:]:
        v = (word >> f.lo) & ((1 << f.width) - 1)
        if f.signed and v >> (f.width - 1):
            v -= 1 << f.width
        kw[f.name] = bool(v) if f.width == 1 else v
    i = INSN_CLASSES[name](**kw)
    if name == "ALU" and i.alu_op >= len(ALU_OP_NAMES):
        return csr.ERR_BAD_OPCODE, f"unknown ALU op {i.alu_op}", i
    if name in ("LOAD", "STORE") and i.buf not in BUFFER_NAMES:
        return csr.ERR_BAD_OPCODE, f"unknown buffer {i.buf}", i
    if (name == "LOAD" and (i.pop_prev or i.push_prev)) or (name == "STORE" and (i.pop_next or i.push_next)):
        return csr.ERR_BAD_FIELD, f"{name} has a token flag towards a missing stage", i
    if name == "STORE" and (i.buf != BUFFERS["ACC"] or i.y_pad_0 or i.y_pad_1 or i.x_pad_0 or i.x_pad_1):
        return csr.ERR_BAD_FIELD, "STORE reads only ACC and cannot pad", i
    if name == "GEMM" or (name == "LOAD" and i.buf != BUFFERS["ACC"]):
        return csr.ERR_UNSUPPORTED, f"{name} into this buffer is not executed by this hardware", i
    return csr.ERR_NONE, "", i


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
        insns = []
        for pc, w in enumerate(words):
            code, msg, i = classify_word(isa, w)
            if code:
                raise RefFault(code, pc, msg)
            insns.append(i)
        for pc, i in enumerate(insns):
            _execute(i, pc, cfg, img, acc, counters, in_region, out_dt)
            if i.MNEMONIC == "FINISH":
                break
        if check_tokens:
            dl = token_deadlock(insns, cfg)
            if dl is not None:
                raise RefFault(csr.ERR_DEADLOCK, dl, "every unit waits for a token that cannot arrive")
    except RefFault as f:
        return result(f)
    return result(None)


def _execute(i, pc: int, cfg, img: np.ndarray, acc: np.ndarray, counters: dict, in_region, out_dt) -> None:
    """One instruction: range checks first (a faulting instruction writes nothing), then the data."""
    lanes, depth = cfg.lanes, cfg.acc_depth
    n = i.MNEMONIC
    if n in ("LOAD", "STORE"):
        vb = cfg.acc_vec_bytes if n == "LOAD" else cfg.out_vec_bytes
        if i.y_size * i.x_size > 0:
            lo = i.dram_base * vb
            hi = lo + ((i.y_size - 1) * i.x_stride + i.x_size) * vb
            if not in_region(lo, hi, csr.ATTR_READ if n == "LOAD" else csr.ATTR_WRITE):
                raise RefFault(csr.ERR_DRAM_RANGE, pc, f"DRAM bytes [0x{lo:x}, 0x{hi:x}) outside every region")
        rows, cols = (i.y_pad_0 + i.y_size + i.y_pad_1, i.x_pad_0 + i.x_size + i.x_pad_1) if n == "LOAD" \
            else (i.y_size, i.x_size)
        if rows * cols and i.sram_base + rows * cols > depth:
            raise RefFault(csr.ERR_SRAM_RANGE, pc, f"buffer index {i.sram_base + rows * cols - 1} >= {depth}")
        if n == "LOAD":
            tile = np.zeros((rows, cols, lanes), dtype=np.int64)
            for r in range(i.y_size):
                b = (i.dram_base + r * i.x_stride) * cfg.acc_vec_bytes
                row = img[b: b + i.x_size * cfg.acc_vec_bytes].view("<i4").reshape(i.x_size, lanes)
                tile[i.y_pad_0 + r, i.x_pad_0: i.x_pad_0 + i.x_size] = row
            acc[i.sram_base: i.sram_base + rows * cols] = tile.reshape(rows * cols, lanes)
            counters["load_insns"] += 1
            counters["dma_rd_bytes"] += i.y_size * i.x_size * cfg.acc_vec_bytes
        else:
            for r in range(i.y_size):
                vals = acc[i.sram_base + r * i.x_size: i.sram_base + (r + 1) * i.x_size].astype(out_dt)  # C cast
                b = (i.dram_base + r * i.x_stride) * cfg.out_vec_bytes
                img[b: b + i.x_size * cfg.out_vec_bytes] = np.frombuffer(vals.tobytes(), dtype=np.uint8)
            counters["store_insns"] += 1
            counters["dma_wr_bytes"] += i.y_size * i.x_size * cfg.out_vec_bytes
        return
    counters["compute_insns"] += 1
    if n != "ALU" or i.iter_out * i.iter_in == 0:
        return
    span = lambda base, fo, fi: base + (i.iter_out - 1) * fo + (i.iter_in - 1) * fi  # noqa: E731
    top = span(i.dst_base, i.dst_factor_out, i.dst_factor_in)
    if not i.use_imm:
        top = max(top, span(i.src_base, i.src_factor_out, i.src_factor_in))
    if top >= depth:
        raise RefFault(csr.ERR_SRAM_RANGE, pc, f"buffer index {top} >= {depth}")
    for a in range(i.iter_out):
        for b in range(i.iter_in):  # strictly in loop order: a write is seen by later reads
            d = i.dst_base + a * i.dst_factor_out + b * i.dst_factor_in
            s = i.imm if i.use_imm else acc[i.src_base + a * i.src_factor_out + b * i.src_factor_in]
            acc[d] = alu_op(i.alu_op, acc[d], s)
