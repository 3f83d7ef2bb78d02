"""Hand-built Programs shared by the unit tests and the rest of the suite (no compiler needed).

Each is written with the assembler (``hw.assembler``) for any config and carries its
inputs and expected outputs: data movement and the STORE's narrowing cast by numpy,
ALU results by the ISA's scalar reference semantics (:func:`alu_reference`), GEMM results
and faults by a plain loop over the ISA's words (:func:`gemm_reference`, independent of
``hw.gemm_numpy``) in GEMM tiles (:func:`gemm_tile`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from hw import csr
from hw.assembler import Assembler
from hw.config import HwConfig
from hw.isa import ALU_OPS
from hw.isa_semantics import alu_scalar
from hw.program import Program


def alu_reference(op: str, x: np.ndarray, s: np.ndarray | int) -> np.ndarray:
    """``op(x, s)`` lane by lane on 32-bit lanes (``s`` broadcast), by the ISA's scalar reference
    semantics (``hw.isa_semantics.alu_scalar``)."""
    x = np.asarray(x, dtype=np.int64)
    s = np.broadcast_to(np.asarray(s, dtype=np.int64), x.shape)
    lanes = [alu_scalar(op, int(a), int(b)) for a, b in zip(x.ravel(), s.ravel())]
    return np.array(lanes, dtype=np.int64).reshape(x.shape).astype(np.int32)


def alu_between(cfg: HwConfig, name: str, data: np.ndarray, body: Callable[[Assembler], None],
                expected: np.ndarray, out_sram: int = 0) -> Program:
    """LOAD ``data`` to acc[0..); ``body`` between a no-op popping l2c and one pushing c2s; STORE
    ``len(expected)`` vectors from ``out_sram``, which must equal ``expected`` (32-bit, narrowed here)."""
    asm = Assembler(cfg, name)
    a = asm.input("a", data)
    out = asm.output("out", (len(expected), cfg.lanes))
    asm.load(a, x=len(data), push_next=True)
    relay(asm, pop_prev=True)
    body(asm)
    relay(asm, push_next=True)
    asm.store(out, x=len(expected), sram=out_sram, pop_prev=True)
    asm.finish()
    return asm.program(expected={"out": narrow(cfg, expected)})


def narrow(cfg: HwConfig, v: np.ndarray) -> np.ndarray:
    """STORE's narrowing cast of 32-bit lanes to the output width (wrap-around, as a C cast)."""
    return np.asarray(v).astype(np.int64).astype(np.int32).astype(f"int{cfg.out_width}")


def vadd(cfg: HwConfig, n: int = 4, seed: int = 0, name: str = "hand_vadd") -> Program:
    """c = a + b over n vectors (two loads, one ALU, one store, tokens l2c and c2s)."""
    L = cfg.lanes
    rng = np.random.default_rng(seed)
    a_data = rng.integers(-2**31, 2**31, size=(n, L), dtype=np.int64).astype(np.int32)
    b_data = rng.integers(-2**31, 2**31, size=(n, L), dtype=np.int64).astype(np.int32)
    asm = Assembler(cfg, name)
    a, b = asm.input("a", a_data), asm.input("b", b_data)
    c = asm.output("c", (n, L))
    asm.load(a, x=n)
    asm.load(b, x=n, sram=n, push_next=True)
    asm.alu("ADD", iter_out=n, dst_base=0, src_base=n, dst_factor_out=1, src_factor_out=1, pop_prev=True,
            push_next=True)
    asm.store(c, x=n, pop_prev=True)
    asm.finish()
    return asm.program(expected={"c": narrow(cfg, alu_reference("ADD", a_data, b_data))})


def vadd_tiled(cfg: HwConfig, n: int, seed: int = 0, tile: int | None = None) -> Program:
    """out = narrow(a + b) over ``n`` vectors, tiled with double buffering through tokens.

    Tile t loads a and b into one half of the accumulator buffer, adds, stores.
    Tokens: load pushes l2c after b; compute pops l2c, pushes c2s and c2l (buffer free
    for reuse two tiles later); store pops c2s, pushes s2c.
    """
    lanes = cfg.lanes
    rng = np.random.default_rng(seed)
    a_data = rng.integers(-1000, 1000, size=(n, lanes), dtype=np.int32)
    b_data = rng.integers(-1000, 1000, size=(n, lanes), dtype=np.int32)
    asm = Assembler(cfg, f"vadd{n}")
    a, b = asm.input("a", a_data), asm.input("b", b_data)
    out = asm.output("out", (n, lanes))
    half = cfg.acc_depth // 2
    tile = tile or max(1, min(half // 2, n))
    tiles = [(s, min(tile, n - s)) for s in range(0, n, tile)]
    for k, (s, m) in enumerate(tiles):
        base = (k % 2) * half
        asm.load(a, x=m, offset=s, sram=base, pop_next=k >= 2)
        asm.load(b, x=m, offset=s, sram=base + tile, push_next=True)
        asm.alu("ADD", iter_out=1, iter_in=m, dst_base=base, src_base=base + tile, dst_factor_in=1,
                src_factor_in=1, pop_prev=True, pop_next=k >= 1, push_next=True, push_prev=k + 2 < len(tiles))
        asm.store(out, x=m, offset=s, sram=base, pop_prev=True, push_prev=k + 1 < len(tiles))
    asm.finish()
    return asm.program(expected={"out": narrow(cfg, a_data.astype(np.int64) + b_data)})


# Immediates of alu_ops: one per op, chosen to show sign extension and the shift/clip rules.
IMMS = {"ADD": 1234, "SUB": -77, "MUL": -3, "MIN": -5, "MAX": 7, "SHR": 5, "CLIP": 100, "MOV": -3,
        "MULHR": 20000, "CLZ": 300}


def alu_ops(cfg: HwConfig, seed: int = 0, name: str = "hand_alu_ops") -> Program:
    """Every ALU op with a buffer operand and with an immediate; low and high bytes stored.

    acc[0..n) = a, acc[n..2n) = b; result k (16 of them) lives at acc[2n + k*n ...], then a
    SHR by 24 copy of all results follows, so the stored output lanes show both the low and
    the high byte of every 32-bit result.
    """
    L = cfg.lanes
    n = max(1, min(4, cfg.acc_depth // 40))
    rng = np.random.default_rng(seed)
    a_data = rng.integers(-2**31, 2**31, size=(n, L), dtype=np.int64).astype(np.int32)
    b_data = np.concatenate([rng.integers(-40, 41, size=(n, L // 2)),
                             rng.integers(-2**31, 2**31, size=(n, L - L // 2), dtype=np.int64)], axis=1) \
        .astype(np.int32)
    b_data[0, :4] = [-2**31, 31, 32, -32]  # edge cases: CLIP INT_MIN, SHR 31/32, SHL 32
    a_data[0, 0] = -2**31  # with b's INT_MIN: MULHR's one product that wraps (2**62 -> 2**31)
    nres = 2 * len(ALU_OPS)
    total = 2 * nres * n
    asm = Assembler(cfg, name)
    a, b = asm.input("a", a_data), asm.input("b", b_data)
    out = asm.output("out", (total, L))
    asm.load(a, x=n)
    asm.load(b, x=n, sram=n, push_next=True)
    results = []
    k = 0
    for op in ALU_OPS:
        for use_imm in (False, True):
            d = 2 * n + k * n
            asm.alu("MOV", iter_out=n, dst_base=d, src_base=0, dst_factor_out=1, src_factor_out=1, pop_prev=k == 0)
            if use_imm:
                asm.alu(op, imm=IMMS[op], iter_out=n, dst_base=d, dst_factor_out=1)
                results.append(alu_reference(op, a_data, IMMS[op]))
            else:
                asm.alu(op, iter_out=n, iter_in=1, dst_base=d, src_base=n, dst_factor_out=1, src_factor_out=1)
                results.append(alu_reference(op, a_data, b_data))
            k += 1
    hi = 2 * n + nres * n
    # copy + shift with a two-level loop (iter_out over results, iter_in over vectors)
    asm.alu("MOV", iter_out=nres, iter_in=n, dst_base=hi, src_base=2 * n, dst_factor_out=n, dst_factor_in=1,
            src_factor_out=n, src_factor_in=1)
    asm.alu("SHR", imm=24, iter_out=nres, iter_in=n, dst_base=hi, dst_factor_out=n, dst_factor_in=1,
            push_next=True)
    asm.store(out, x=total, sram=2 * n, pop_prev=True)
    asm.finish()
    res = np.concatenate(results)
    exp = np.concatenate([res, alu_reference("SHR", res, 24)])
    return asm.program(expected={"out": narrow(cfg, exp)})


def pad_stride(cfg: HwConfig, seed: int = 0, name: str = "hand_pad_stride") -> Program:
    """A 2-D strided LOAD with zero padding on all sides, stored back as a strided 2-D tile."""
    L = cfg.lanes
    y, x, stride = 3, 2, 5
    yp0, yp1, xp0, xp1 = 1, 2, 1, 1
    rows, cols = yp0 + y + yp1, xp0 + x + xp1
    rng = np.random.default_rng(seed)
    src_data = rng.integers(-300, 300, size=(y * stride, L)).astype(np.int32)
    tile = np.zeros((rows, cols, L), dtype=np.int32)
    for r in range(y):
        tile[yp0 + r, xp0:xp0 + x] = src_data[r * stride:r * stride + x]
    out_stride = cols + 3
    asm = Assembler(cfg, name)
    src = asm.input("src", src_data)
    dst = asm.output("dst", (rows * out_stride, L))
    asm.load(src, x=x, y=y, stride=stride, y_pad_0=yp0, y_pad_1=yp1, x_pad_0=xp0, x_pad_1=xp1, push_next=True)
    asm.alu("ADD", imm=1, iter_out=rows * cols, dst_base=0, dst_factor_out=1, pop_prev=True, push_next=True)
    asm.store(dst, x=cols, y=rows, stride=out_stride, pop_prev=True)
    asm.finish()
    exp = np.zeros((rows * out_stride, L), dtype=np.int64)
    for r in range(rows):
        exp[r * out_stride:r * out_stride + cols] = tile[r] + 1
    return asm.program(expected={"dst": narrow(cfg, exp)})


def long_program(cfg: HwConfig, reps: int = 40, name: str = "hand_long") -> Program:
    """Many load/compute/store rounds with double buffering: a long run for speed measurements."""
    L = cfg.lanes
    n = max(1, min(16, cfg.acc_depth // 4))
    rng = np.random.default_rng(1)
    a_data = rng.integers(-1000, 1000, size=(n, L)).astype(np.int32)
    asm = Assembler(cfg, name)
    a = asm.input("a", a_data)
    c = asm.output("c", (n, L))
    for r in range(reps):
        base = (r % 2) * n  # ping-pong halves
        asm.load(a, x=n, sram=base, push_next=True, pop_next=r >= 2)
        asm.alu("MUL", imm=3, iter_out=n, dst_base=base, dst_factor_out=1, pop_prev=True, push_next=True,
                push_prev=r < reps - 2, pop_next=r >= 2)
        asm.store(c, x=n, sram=base, pop_prev=True, push_prev=r < reps - 2)
    asm.finish()
    return asm.program(expected={"c": narrow(cfg, alu_reference("MUL", a_data, 3))})


# ---- pieces the unit cases share ------------------------------------------------------------------
def relay(asm: Assembler, **flags: bool) -> int:
    """A compute no-op (an ALU with no iterations) that passes tokens on, e.g. l2c -> c2s."""
    return asm.alu("ADD", imm=0, iter_out=0, **flags)


def load_tile(data: np.ndarray, offset: int, x: int, y: int, stride: int, y_pad_0: int = 0, y_pad_1: int = 0,
              x_pad_0: int = 0, x_pad_1: int = 0) -> np.ndarray:
    """The accumulator vectors a LOAD writes, in order: ``y`` rows of ``x`` vectors from ``data``
    (row r at vector ``offset + r*stride``) framed by zero padding (the hw.isa docstring)."""
    rows, cols = y_pad_0 + y + y_pad_1, x_pad_0 + x + x_pad_1
    tile = np.zeros((rows, cols, data.shape[1]), dtype=np.int64)
    for r in range(y):
        tile[y_pad_0 + r, x_pad_0:x_pad_0 + x] = data[offset + r * stride:offset + r * stride + x]
    return tile.reshape(rows * cols, data.shape[1])


def random_vectors(cfg: HwConfig, n: int, seed: int, lo: int = -2**31, hi: int = 2**31) -> np.ndarray:
    """``n`` int32 vectors of random lanes in [lo, hi)."""
    rng = np.random.default_rng(seed)
    return rng.integers(lo, hi, size=(n, cfg.lanes), dtype=np.int64).astype(np.int32)


# ---- GEMM ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GemmFaultRef:
    """The first fault of a GEMM by :func:`gemm_reference`: the faulting iteration (None: the
    micro-op range check of WAIT, before any iteration), its error code, and the GEMM's pc once
    the GEMM is placed in a Program (-1 before)."""

    iteration: int | None
    code: int
    pc: int = -1


@dataclass
class GemmBuffers:
    """The buffers a GEMM reads and writes, as plain numpy arrays with their loaded flags (a
    reference independent of ``hw.gemm_numpy``): acc (ACC_DEPTH, LANES) int64 (wrapped to 32 bits),
    inp (INP_DEPTH, LANES), wgt (WGT_DEPTH, BLOCK, BLOCK), uops (UOP_DEPTH, 3)."""

    acc: np.ndarray
    inp: np.ndarray
    wgt: np.ndarray
    uops: np.ndarray
    uop_loaded: np.ndarray
    wgt_loaded: np.ndarray

    @classmethod
    def empty(cls, cfg: HwConfig) -> "GemmBuffers":
        return cls(np.zeros((cfg.acc_depth, cfg.lanes), dtype=np.int64),
                   np.zeros((cfg.inp_depth, cfg.lanes), dtype=np.int64),
                   np.zeros((cfg.wgt_depth, cfg.block, cfg.block), dtype=np.int64),
                   np.zeros((cfg.uop_depth, 3), dtype=np.int64),
                   np.zeros(cfg.uop_depth, dtype=bool), np.zeros(cfg.wgt_depth, dtype=bool))

    def load(self, buf: str, data: np.ndarray, sram: int = 0, offset: int = 0, x: int | None = None, y: int = 1,
             stride: int | None = None, **pads: int) -> None:
        """What a LOAD of ``data`` (entries along axis 0) writes, padding included (:func:`load_tile`)."""
        x = len(data) if x is None else x
        flat = np.asarray(data, dtype=np.int64).reshape(len(data), -1)
        tile = load_tile(flat, offset, x, y, x if stride is None else stride, **pads)
        target = {"ACC": self.acc, "INP": self.inp, "WGT": self.wgt, "UOP": self.uops}[buf]
        target[sram:sram + len(tile)] = tile.reshape((len(tile),) + target.shape[1:])
        if buf == "UOP":
            self.uop_loaded[sram:sram + len(tile)] = True
        if buf == "WGT":
            self.wgt_loaded[sram:sram + len(tile)] = True


def gemm_reference(cfg: HwConfig, b: GemmBuffers, reset: bool = False, uop_begin: int = 0, uop_end: int = 1,
                   iter_out: int = 1, iter_in: int = 1, acc_factor_out: int = 0, acc_factor_in: int = 0,
                   inp_factor_out: int = 0, inp_factor_in: int = 0, wgt_factor_out: int = 0,
                   wgt_factor_in: int = 0) -> tuple[int, GemmFaultRef | None]:
    """One GEMM on ``b`` by the words of hw/isa.py and docs/microarch.md, iteration by iteration in
    loop order: ``(iterations applied, first fault or None)``; the faulting iteration and later
    ones are not applied."""
    if iter_out * iter_in * max(0, uop_end - uop_begin) > 0 and uop_end > cfg.uop_depth:
        return 0, GemmFaultRef(None, csr.ERR_SRAM_RANGE)
    k = 0
    for i in range(iter_out):
        for j in range(iter_in):
            for u in range(uop_begin, uop_end):
                ua, ux, uw = (int(v) for v in b.uops[u])
                a = ua + i * acc_factor_out + j * acc_factor_in
                x = ux + i * inp_factor_out + j * inp_factor_in
                w = uw + i * wgt_factor_out + j * wgt_factor_in
                if not b.uop_loaded[u]:
                    return k, GemmFaultRef(k, csr.ERR_UNLOADED)
                if a >= cfg.acc_depth or (not reset and (x >= cfg.inp_depth or w >= cfg.wgt_depth)):
                    return k, GemmFaultRef(k, csr.ERR_SRAM_RANGE)
                if not reset and not b.wgt_loaded[w]:
                    return k, GemmFaultRef(k, csr.ERR_UNLOADED)
                if reset:
                    b.acc[a] = 0
                else:
                    b.acc[a] = wrap32_array(b.acc[a] + b.wgt[w] @ b.inp[x])
                k += 1
    return k, None


def wrap32_array(v: np.ndarray) -> np.ndarray:
    """``v`` wrapped to 32-bit two's complement (int64 in, int64 out)."""
    return ((np.asarray(v, dtype=np.int64) + 2**31) % 2**32) - 2**31


def random_int8(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Random int8 values over the whole range (the GEMM operands)."""
    return np.random.default_rng(seed).integers(-128, 128, size=shape).astype(np.int8)


WORD_SHIFTS = (0, 8, 16, 24)  # every byte of a 32-bit accumulator lane, through 8-bit outputs


def store_words(asm: Assembler, out: str, base: int, n: int, spare: int, shifts: tuple[int, ...] = WORD_SHIFTS,
                **flags: bool) -> None:
    """Compute instructions and a STORE that show acc[base .. base+n) in DRAM beyond STORE's narrowing
    cast: one copy per shift at acc[spare ..), each shifted right arithmetically by it, stored as one
    ``len(shifts) * n``-vector output ``out`` (:func:`words_expected`). With ``shifts == (0,)`` the
    vectors are stored as they are (no copy). ``flags`` go to the first compute instruction; the
    last pushes c2s to the STORE."""
    cfg = asm.cfg
    t = asm.output(out, (len(shifts) * n, cfg.lanes))
    if shifts == (0,):
        relay(asm, push_next=True, **flags)
        asm.store(t, x=n, sram=base, pop_prev=True)
        return
    asm.alu("MOV", iter_out=len(shifts), iter_in=n, dst_base=spare, dst_factor_out=n, dst_factor_in=1,
            src_base=base, src_factor_in=1, **flags)
    for k, s in enumerate(shifts):
        if s:
            asm.alu("SHR", imm=s, iter_out=n, dst_base=spare + k * n, dst_factor_out=1)
    relay(asm, push_next=True)
    asm.store(t, x=len(shifts) * n, sram=spare, pop_prev=True)


def words_expected(cfg: HwConfig, words: np.ndarray, shifts: tuple[int, ...] = WORD_SHIFTS) -> np.ndarray:
    """What :func:`store_words` writes for the 32-bit ``words``."""
    w = wrap32_array(words).astype(np.int32)
    return narrow(cfg, np.concatenate([w >> s for s in shifts]))


@dataclass
class GemmTile:
    """A GEMM Program of :func:`gemm_tile` with what the reference made of it: the buffers after it
    (up to a fault) and its first fault (with the GEMM's pc), None for a clean run."""

    program: Program
    buffers: GemmBuffers
    fault: GemmFaultRef | None


def gemm_tile(cfg: HwConfig, name: str, uops: list[tuple[int, int, int]], inp: np.ndarray, wgt: np.ndarray,
              gemms: list[dict], acc: np.ndarray | None = None, out: tuple[int, int] = (0, 4),
              spare: int | None = None, shifts: tuple[int, ...] = WORD_SHIFTS,
              loads: dict[str, dict] | None = None,
              during: Callable[[Assembler, GemmBuffers], int] | None = None) -> GemmTile:
    """LOAD micro-ops, inputs and weights (and accumulators ``acc``), run ``gemms`` (fields by their
    ISA names), then show the ``out = (base, n)`` accumulators in the output ``acc_out`` (all 32 bits
    by default: :func:`store_words`, through ``spare``, default right after them). ``loads`` gives
    each buffer's LOAD its own fields (sram, x, y, stride, offset, padding). ``during`` may add LOADs
    that run while the GEMMs do, apply them to the reference's buffers and return how many l2c tokens
    they push (the accumulators are shown after those LOADs). The expected outputs come from
    :func:`gemm_reference` (a faulting Program has none: it never reaches its STORE)."""
    loads = loads or {}
    asm = Assembler(cfg, name)
    b = GemmBuffers.empty(cfg)
    tensors = [("UOP", asm.uops("uops", uops), np.array(uops, dtype=np.int64)), ("INP", asm.input("inp", inp), inp),
               ("WGT", asm.input("wgt", wgt), wgt)]
    if acc is not None:
        tensors.append(("ACC", asm.input("acc", acc), acc))
    for k, (buf, t, data) in enumerate(tensors):
        f = {"x": len(data), **loads.get(buf, {})}
        asm.load(t, buf=buf, push_next=k == len(tensors) - 1, **f)
        b.load(buf, data, **f)
    tokens = during(asm, b) if during is not None else 0
    fault = None
    for k, g in enumerate(gemms):
        pc = asm.gemm(pop_prev=k == 0, **g)
        if fault is None:
            _, f = gemm_reference(cfg, b, **g)
            fault = None if f is None else GemmFaultRef(f.iteration, f.code, pc)
    for _ in range(tokens):
        relay(asm, pop_prev=True)
    base, n = out
    store_words(asm, "acc_out", base, n, base + n if spare is None else spare, shifts)
    asm.finish()
    if fault is not None:
        return GemmTile(asm.program(), b, fault)
    return GemmTile(asm.program(expected={"acc_out": words_expected(cfg, b.acc[base:base + n], shifts)}), b, None)
