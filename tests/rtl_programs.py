"""Hand-built Programs for the RTL tests (independent of the compiler).

Each builder returns a Program with inputs and numpy-computed ``expected`` outputs
(semantics of docs/microarch.md), or, for the error builders, a Program plus the
error name and ERR_PC the RTL must report.
"""

from __future__ import annotations

import numpy as np

from hw.config import HwConfig
from hw.isa import ALU_OPS, Alu, Finish, Gemm, Isa, Load, Store
from hw.program import Program, plan_layout
from testbench.rtl_model import raw_program

I32 = np.int64(1) << 32


def _wrap(v: np.ndarray) -> np.ndarray:
    """Wrap int64 values to int32 two's complement."""
    v = np.asarray(v, dtype=np.int64) & 0xFFFFFFFF
    return np.where(v >= 1 << 31, v - (1 << 32), v).astype(np.int32)


def alu_ref(op: str, x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """One ALU op on int32 lanes, as docs/microarch.md defines it."""
    x = x.astype(np.int64)
    s = np.broadcast_to(np.asarray(s, dtype=np.int64), x.shape)
    if op == "ADD":
        return _wrap(x + s)
    if op == "SUB":
        return _wrap(x - s)
    if op == "MUL":
        return _wrap((x * s) & 0xFFFFFFFF)
    if op == "MIN":
        return _wrap(np.minimum(x, s))
    if op == "MAX":
        return _wrap(np.maximum(x, s))
    if op == "SHR":
        right = x >> np.minimum(np.maximum(s, 0), 31)
        left = np.where(-s >= 32, 0, (x << np.minimum(np.maximum(-s, 0), 63)) & 0xFFFFFFFF)
        return _wrap(np.where(s >= 0, right, left))
    if op == "CLIP":
        neg = _wrap(-s).astype(np.int64)
        return _wrap(np.minimum(np.maximum(x, neg), s))
    if op == "MOV":
        return _wrap(s)
    raise ValueError(op)


def _out(cfg: HwConfig, v: np.ndarray) -> np.ndarray:
    """STORE's narrowing cast."""
    dt = np.int8 if cfg.out_width == 8 else np.int16
    return v.astype(np.int64).astype(dt)


def _out_dtype(cfg: HwConfig) -> str:
    return "int8" if cfg.out_width == 8 else "int16"


def vadd(cfg: HwConfig, n: int = 4, seed: int = 0, name: str = "hand_vadd") -> Program:
    """c = a + b over n vectors (two loads, one ALU, one store, tokens l2c and c2s)."""
    L = cfg.lanes
    rng = np.random.default_rng(seed)
    a = rng.integers(-2**31, 2**31, size=(n, L), dtype=np.int64).astype(np.int32)
    b = rng.integers(-2**31, 2**31, size=(n, L), dtype=np.int64).astype(np.int32)
    regions = plan_layout(cfg, [("a", "input", (n, L), "int32"), ("b", "input", (n, L), "int32"),
                                ("c", "output", (n, L), _out_dtype(cfg))], 5)
    va, vb = regions[1].addr // cfg.acc_vec_bytes, regions[2].addr // cfg.acc_vec_bytes
    vc = regions[3].addr // cfg.out_vec_bytes
    insns = [Load(sram_base=0, dram_base=va, y_size=1, x_size=n, x_stride=n),
             Load(sram_base=n, dram_base=vb, y_size=1, x_size=n, x_stride=n, push_next=True),
             Alu(alu_op=ALU_OPS["ADD"], iter_out=n, dst_base=0, src_base=n, dst_factor_out=1, src_factor_out=1,
                 pop_prev=True, push_next=True),
             Store(sram_base=0, dram_base=vc, y_size=1, x_size=n, x_stride=n, pop_prev=True),
             Finish()]
    return Program.create(cfg, insns, regions, name=name, inputs={"a": a, "b": b},
                          expected={"c": _out(cfg, alu_ref("ADD", a, b))})


IMMS = {"ADD": 1234, "SUB": -77, "MUL": -3, "MIN": -5, "MAX": 7, "SHR": 5, "CLIP": 100, "MOV": -3}


def alu_ops(cfg: HwConfig, seed: int = 0, name: str = "hand_alu_ops") -> Program:
    """Every ALU op with a buffer operand and with an immediate; low and high bytes stored.

    acc[0..n) = a, acc[n..2n) = b; result k (16 of them) lives at acc[2n + k*n ...], then a
    SHR by 24 copy of all results follows, so the stored int8 lanes show both the low and
    the high byte of every 32-bit result.
    """
    L = cfg.lanes
    n = max(1, min(4, cfg.acc_depth // 40))
    rng = np.random.default_rng(seed)
    a = rng.integers(-2**31, 2**31, size=(n, L), dtype=np.int64).astype(np.int32)
    b = np.concatenate([rng.integers(-40, 41, size=(n, L // 2)),
                        rng.integers(-2**31, 2**31, size=(n, L - L // 2), dtype=np.int64)], axis=1).astype(np.int32)
    b[0, :4] = [-2**31, 31, 32, -32]  # edge cases: CLIP INT_MIN, SHR 31/32, SHL 32
    nres = 2 * len(ALU_OPS)
    insns: list = [Load(sram_base=0, dram_base=0, y_size=1, x_size=n, x_stride=n),
                   Load(sram_base=n, dram_base=0, y_size=1, x_size=n, x_stride=n, push_next=True)]
    results = []
    k = 0
    for op in ALU_OPS:
        for use_imm in (False, True):
            d = 2 * n + k * n
            insns.append(Alu(alu_op=ALU_OPS["MOV"], iter_out=n, dst_base=d, src_base=0, dst_factor_out=1,
                             src_factor_out=1, pop_prev=(k == 0)))
            if use_imm:
                insns.append(Alu(alu_op=ALU_OPS[op], use_imm=True, imm=IMMS[op], iter_out=n, dst_base=d,
                                 dst_factor_out=1))
                results.append(alu_ref(op, a, np.int64(IMMS[op])))
            else:
                insns.append(Alu(alu_op=ALU_OPS[op], iter_out=n, iter_in=1, dst_base=d, src_base=n,
                                 dst_factor_out=1, src_factor_out=1))
                results.append(alu_ref(op, a, b))
            k += 1
    hi = 2 * n + nres * n
    # copy + shift with a two-level loop (iter_out over results, iter_in over vectors)
    insns.append(Alu(alu_op=ALU_OPS["MOV"], iter_out=nres, iter_in=n, dst_base=hi, src_base=2 * n,
                     dst_factor_out=n, dst_factor_in=1, src_factor_out=n, src_factor_in=1))
    insns.append(Alu(alu_op=ALU_OPS["SHR"], use_imm=True, imm=24, iter_out=nres, iter_in=n, dst_base=hi,
                     dst_factor_out=n, dst_factor_in=1, push_next=True))
    total = 2 * nres * n
    insns.append(Store(sram_base=2 * n, dram_base=0, y_size=1, x_size=total, x_stride=total, pop_prev=True))
    insns.append(Finish())
    regions = plan_layout(cfg, [("a", "input", (n, L), "int32"), ("b", "input", (n, L), "int32"),
                                ("out", "output", (total, L), _out_dtype(cfg))], len(insns))
    va, vb = regions[1].addr // cfg.acc_vec_bytes, regions[2].addr // cfg.acc_vec_bytes
    insns[0] = Load(sram_base=0, dram_base=va, y_size=1, x_size=n, x_stride=n)
    insns[1] = Load(sram_base=n, dram_base=vb, y_size=1, x_size=n, x_stride=n, push_next=True)
    insns[-2] = Store(sram_base=2 * n, dram_base=regions[3].addr // cfg.out_vec_bytes, y_size=1, x_size=total,
                      x_stride=total, pop_prev=True)
    res = np.concatenate(results)
    exp = np.concatenate([res, alu_ref("SHR", res, np.int64(24))])
    return Program.create(cfg, insns, regions, name=name, inputs={"a": a, "b": b}, expected={"out": _out(cfg, exp)})


def pad_stride(cfg: HwConfig, seed: int = 0, name: str = "hand_pad_stride") -> Program:
    """A 2-D strided LOAD with zero padding on all sides, stored back as a strided 2-D tile."""
    L = cfg.lanes
    y, x, stride = 3, 2, 5
    yp0, yp1, xp0, xp1 = 1, 2, 1, 1
    rows, cols = yp0 + y + yp1, xp0 + x + xp1
    rng = np.random.default_rng(seed)
    src = rng.integers(-300, 300, size=(y * stride, L)).astype(np.int32)
    tile = np.zeros((rows, cols, L), dtype=np.int32)
    for r in range(y):
        tile[yp0 + r, xp0:xp0 + x] = src[r * stride:r * stride + x]
    out_stride = cols + 3
    insns = [Load(sram_base=0, dram_base=0, y_size=y, x_size=x, x_stride=stride, y_pad_0=yp0, y_pad_1=yp1,
                  x_pad_0=xp0, x_pad_1=xp1, push_next=True),
             Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=1, iter_out=rows * cols, dst_base=0, dst_factor_out=1,
                 pop_prev=True, push_next=True),
             Store(sram_base=0, dram_base=0, y_size=rows, x_size=cols, x_stride=out_stride, pop_prev=True),
             Finish()]
    regions = plan_layout(cfg, [("src", "input", (y * stride, L), "int32"),
                                ("dst", "output", (rows * out_stride, L), _out_dtype(cfg))], len(insns))
    insns[0] = Load(sram_base=0, dram_base=regions[1].addr // cfg.acc_vec_bytes, y_size=y, x_size=x,
                    x_stride=stride, y_pad_0=yp0, y_pad_1=yp1, x_pad_0=xp0, x_pad_1=xp1, push_next=True)
    insns[2] = Store(sram_base=0, dram_base=regions[2].addr // cfg.out_vec_bytes, y_size=rows, x_size=cols,
                     x_stride=out_stride, pop_prev=True)
    exp = np.zeros((rows * out_stride, L), dtype=np.int64)
    for r in range(rows):
        exp[r * out_stride:r * out_stride + cols] = tile[r] + 1
    return Program.create(cfg, insns, regions, name=name, inputs={"src": src}, expected={"dst": _out(cfg, exp)})


def long_program(cfg: HwConfig, reps: int = 40, name: str = "hand_long") -> Program:
    """Many load/compute/store rounds with double buffering: a long run for speed measurements."""
    L = cfg.lanes
    n = max(1, min(16, cfg.acc_depth // 4))
    rng = np.random.default_rng(1)
    a = rng.integers(-1000, 1000, size=(n, L)).astype(np.int32)
    regions = plan_layout(cfg, [("a", "input", (n, L), "int32"), ("c", "output", (n, L), _out_dtype(cfg))],
                          3 * reps + 1)
    va, vc = regions[1].addr // cfg.acc_vec_bytes, regions[2].addr // cfg.out_vec_bytes
    insns: list = []
    for r in range(reps):
        base = (r % 2) * n  # ping-pong halves
        insns.append(Load(sram_base=base, dram_base=va, x_size=n, x_stride=n, push_next=True, pop_next=r >= 2))
        insns.append(Alu(alu_op=ALU_OPS["MUL"], use_imm=True, imm=3, iter_out=n, dst_base=base,
                         dst_factor_out=1, pop_prev=True, push_next=True, push_prev=r < reps - 2,
                         pop_next=r >= 2))
        insns.append(Store(sram_base=base, dram_base=vc, x_size=n, x_stride=n, pop_prev=True,
                           push_prev=r < reps - 2))
    insns.append(Finish())
    return Program.create(cfg, insns, regions, name=name, inputs={"a": a},
                          expected={"c": _out(cfg, alu_ref("MUL", a, np.int64(3)))})


# ------------------------------------------------------------------------------ errors
def err_dram_range(cfg: HwConfig) -> tuple[Program, str, int]:
    """Instruction 1 loads the vector just past the end of its input region."""
    n, L = 2, cfg.lanes
    insns = [Load(sram_base=0, dram_base=0, x_size=n, x_stride=n), Load(), Finish()]
    regions = plan_layout(cfg, [("a", "input", (n, L), "int32"), ("o", "output", (1, L), _out_dtype(cfg))],
                          len(insns))
    va = regions[1].addr // cfg.acc_vec_bytes
    insns[:2] = [Load(sram_base=0, dram_base=va, x_size=n, x_stride=n),
                 Load(sram_base=n, dram_base=va + n, x_size=1, x_stride=1)]
    a = np.arange(n * L, dtype=np.int32).reshape(n, L)
    return Program.create(cfg, insns, regions, name="err_dram_range", inputs={"a": a}), "DRAM_RANGE", 1


def err_sram_range(cfg: HwConfig) -> tuple[Program, str, int]:
    """An ALU whose destination walks past ACC_DEPTH (instruction 0)."""
    insns = [Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=1, iter_out=2, dst_base=cfg.acc_depth - 1,
                 dst_factor_out=1), Finish()]
    regions = plan_layout(cfg, [("o", "output", (1, cfg.lanes), _out_dtype(cfg))], len(insns))
    return Program.create(cfg, insns, regions, name="err_sram_range"), "SRAM_RANGE", 0


def err_bad_opcode(cfg: HwConfig) -> tuple[Program, str, int]:
    """Instruction 1 has opcode 7 (unused)."""
    p = vadd(cfg, n=1, name="err_bad_opcode")
    raw = bytearray(p.insn_bytes)
    raw[16] = (raw[16] & ~0x7) | 0x7
    return raw_program(p, bytes(raw)), "BAD_OPCODE", 1


def err_reserved_bits(cfg: HwConfig) -> tuple[Program, str, int]:
    """FINISH (instruction 4) with its top bit set."""
    p = vadd(cfg, n=1, name="err_reserved")
    raw = bytearray(p.insn_bytes)
    raw[4 * 16 + 15] |= 0x80
    return raw_program(p, bytes(raw)), "BAD_OPCODE", 4


def err_unsupported(cfg: HwConfig) -> tuple[Program, str, int]:
    """A GEMM (instruction 0) is decoded but not executed by this hardware."""
    insns = [Gemm(), Finish()]
    regions = plan_layout(cfg, [("o", "output", (1, cfg.lanes), _out_dtype(cfg))], len(insns))
    return Program.create(cfg, insns, regions, name="err_unsupported"), "UNSUPPORTED", 0


def err_deadlock(cfg: HwConfig) -> tuple[Program, str, int]:
    """Compute (instruction 0) pops a load token nobody pushes."""
    insns = [Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=1, pop_prev=True), Finish()]
    regions = plan_layout(cfg, [("o", "output", (1, cfg.lanes), _out_dtype(cfg))], len(insns))
    return Program.create(cfg, insns, regions, name="err_deadlock"), "DEADLOCK", 0


def err_insn_range(cfg: HwConfig) -> tuple[Program, str, int]:
    """INSN_COUNT larger than the instruction region: the window leaves every region."""
    p = vadd(cfg, n=1, name="err_insn_range")
    p.regs = [(n, v + 10_000 if n == "INSN_COUNT" else v) for n, v in p.regs]
    return p, "INSN_RANGE", 0


ERROR_CASES = {"dram_range": err_dram_range, "sram_range": err_sram_range, "bad_opcode": err_bad_opcode,
               "reserved_bits": err_reserved_bits, "unsupported": err_unsupported, "deadlock": err_deadlock,
               "insn_range": err_insn_range}


def isa_of(cfg: HwConfig) -> Isa:
    return Isa(cfg)
