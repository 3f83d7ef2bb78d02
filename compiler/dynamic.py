"""One compiled Program for every value of a run-time dimension: the piecewise-affine host driver.

A kernel's arguments may hold :mod:`compiler.symbolic` expressions of one variable (tensor shapes
``S.tensor((token, 64), "int8")``, constants such as a loop extent). :func:`compile_dynamic` plans
DRAM once, at the variable's maximum, and derives the driver: the instruction words as a function of
the value. The kernel is traced at concrete values (the golden path and the compiler only ever see
ints), each trace resolved against the one layout; the words of value ``v`` form a list whose length
and contents are piecewise affine in ``v``: on each piece ``[lo, hi]`` the stream has one length and
word ``i`` is ``base[i] + (v - lo) * delta[i]`` modulo 2^128 (a field that moves by ``d`` per step
moves the 128-bit word by ``d << field_offset``; the word is exact while no field leaves its width,
which the check below sees). Pieces are found by galloping then bisecting on where the affine
prediction stops matching a real trace, so the number of traces grows with the number of pieces
(tile-count changes), not with the maximum. Each piece is then checked against real traces at both
ends, its middle and one value in from each end (``verify_all``: every value); the tests check more.

The run-time CSR values that depend on the value are INSN_COUNT and the instruction region's size
(every other region stays where the maximum put it). The driver's data (``dynamic.json``) is read
by :mod:`hw.dynamic_driver` (Python) and by the generated C of :mod:`compiler.dynamic_c`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler.build import check_dependences, insert_tokens, layout, to_insn, trace_cores, verify_program
from compiler.errors import CompileError
from compiler.kernel import Kernel, as_kernel
from compiler.symbolic import Expr, SymbolicError, Var, bind
from compiler.tensor import TensorSpec
from compiler.trace import CONST_REGION
from hw.config import HwConfig
from hw.dynamic_driver import DRIVER_FILE, MASK128, piece_words
from hw.isa import INSN_BYTES
from hw.program import Program, Region, isa_of

# The instruction region is planned for this many times the maximum's instruction count (a smaller value
# may take more instructions, e.g. an extra tail tile); a value that needs more is refused at compile time.
INSN_SLACK = 1.25


@dataclass(frozen=True)
class Piece:
    """Values ``lo..hi`` share one stream length; word i of value v is ``(base[i] + (v - lo) * delta[i]) mod
    2^128``: the instructions, then the kernel's constants (micro-op tables depend on the value too)."""

    lo: int
    hi: int
    insns: int  # the first ``insns`` words are instructions, the rest the constants region's 16-byte words
    base: tuple[int, ...]
    delta: tuple[int, ...]

    def words(self, v: int) -> list[int]:
        """Every word of value ``v`` (``lo <= v <= hi``): the instructions, then the constants'."""
        return piece_words(self.base, self.delta, v - self.lo)

    def to_json(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "insns": self.insns, "base": [f"{w:032x}" for w in self.base],
                "delta": [f"{w:032x}" for w in self.delta]}


@dataclass
class DynamicProgram:
    """The Program planned at the maximum (its instructions are the maximum's), the variable and the pieces."""

    program: Program
    var: Var
    pieces: list[Piece]
    insn_capacity: int
    traces: int  # kernel traces the compile took

    def words(self, v: int) -> list[int]:
        """The driver's instruction words for value ``v`` (range checked; the constants' words left out)."""
        self.var.check(v)
        for p in self.pieces:
            if p.lo <= v <= p.hi:
                return p.words(v)[:p.insns]
        raise CompileError(f"variable '{self.var.name}': no piece holds {v}")  # pieces cover the range

    def driver_json(self) -> dict[str, Any]:
        """``dynamic.json``: the variable, the base register writes and the pieces (words as 32 hex digits)."""
        insn = self.program.region("insn")
        const = next((r for r in self.program.regions if r.name == CONST_REGION), None)
        return {"format": 1, "const_addr": const.addr if const else None,
                "const_bytes": const.nbytes if const else 0, "var": {"name": self.var.name, **self.var.to_json()},
                "insn_addr": insn.addr, "insn_capacity": self.insn_capacity,
                "regs": [[n, v] for n, v in self.program.regs],
                "pieces": [p.to_json() for p in self.pieces]}


def bind_args(args: Mapping[str, Any], values: Mapping[str, int]) -> dict[str, Any]:
    """The arguments with every expression bound: TensorSpecs of concrete shapes, int constants."""
    out: dict[str, Any] = {}
    for n, a in args.items():
        if isinstance(a, TensorSpec):
            out[n] = TensorSpec(tuple(int(s) for s in bind(a.shape, values)), a.dtype)
        else:
            out[n] = bind(a, values)
    return out


def words_in_layout(kernel: Kernel, args: Mapping[str, Any], cfg: HwConfig, regions: list[Region],
                    name: str) -> tuple[list[int], bytes]:
    """The instruction words of the kernel on concrete ``args``, addresses resolved against ``regions`` (the
    layout planned at the maximum), proved as :func:`compiler.build.build` proves a stream; and the bytes of
    the kernel's constants (micro-op tables, identity weights), empty without any."""
    tr = trace_cores(kernel, args, cfg, name, cores=1)[0]
    nodes = insert_tokens(tr, cfg, [])
    by_name = {r.name: r for r in regions}
    for t in tr.tensors.values():  # a tensor must stay inside the region planned at the maximum
        r = by_name[t.region] if t.region in by_name else None
        if r is not None and t.region_offset + t.nbytes > r.nbytes:
            raise CompileError(f"kernel '{name}': tensor '{t.name}' ({t.nbytes} bytes) outgrows its region "
                               f"planned at the maximum ({r.nbytes} bytes)")
    insns = [to_insn(n, by_name, cfg) for n in nodes]
    verify_program(insns, cfg, f"kernel '{name}'")
    check_dependences(tr, nodes, insns, cfg)
    isa = isa_of(cfg)
    pool = tr.pool.array().tobytes() if tr.pool is not None and tr.pool.count else b""
    return [isa.encode_word(i) for i in insns], pool


def compile_dynamic(kernel: Any, args: Mapping[str, Any], var: Var, cfg: HwConfig, name: str | None = None,
                    meta: dict[str, Any] | None = None, verify_all: bool = False) -> DynamicProgram:
    """Compile ``kernel`` once for every value of ``var`` (module docstring). ``args`` may hold expressions
    of ``var`` in TensorSpec shapes and constants. ``verify_all`` also traces every value of the range and
    compares it with the driver (a cost that grows with the maximum; the default checks samples). Raises
    CompileError / SymbolicError in one line."""
    if cfg.num_cores != 1:
        raise CompileError(f"dynamic shapes run on one core; config '{cfg.name}' has {cfg.num_cores}")
    k = as_kernel(kernel)
    name = name or k.name
    for n, a in args.items():
        shape = a.shape if isinstance(a, TensorSpec) else ()
        for s in shape:
            if isinstance(s, Expr) and (s.lo < 1 or not s.names <= {var.name}):
                raise SymbolicError(f"argument '{n}': cannot bound shape dimension '{s.text}' "
                                    + (f"to a positive size (it ranges {s.lo}..{s.hi})" if s.lo < 1
                                       else f"(it uses variables other than '{var.name}')"))
    at_max = bind_args(args, {var.name: var.max})
    tr_max = trace_cores(k, at_max, cfg, name, cores=1)[0]
    count_max = len(insert_tokens(tr_max, cfg, []))
    capacity = int(count_max * INSN_SLACK) + 8
    regions = layout(tr_max, cfg, capacity)
    cache: dict[int, list[int]] = {}
    traces = 0
    pool_max = b""
    counts: dict[int, int] = {}  # instruction words of each traced value (the rest are constant words)

    def real(v: int) -> list[int]:
        nonlocal traces
        if v not in cache:
            traces += 1
            w, pool = words_in_layout(k, bind_args(args, {var.name: v}), cfg, regions, name)
            if len(w) > capacity:
                raise CompileError(f"kernel '{name}': {var.name}={v} needs {len(w)} instructions, more than the "
                                   f"{capacity} planned from the maximum's {count_max}")
            if v == var.max:
                nonlocal pool_max
                pool_max = pool
            elif len(pool) > len(pool_max):
                raise CompileError(f"kernel '{name}': its constants at {var.name}={v} outgrow the maximum's")
            counts[v] = len(w)
            w = w + [int.from_bytes(pool[i:i + INSN_BYTES], "little") for i in range(0, len(pool), INSN_BYTES)]
            cache[v] = w
        return cache[v]

    real(var.max)  # first: the constants every other value must share
    pieces: list[Piece] = []
    lo = var.min
    while lo <= var.max:
        base = real(lo)
        if lo == var.max or len(real(lo + 1)) != len(base) or counts[lo + 1] != counts[lo]:
            pieces.append(Piece(lo, lo, counts[lo], tuple(base), tuple(0 for _ in base)))
            lo += 1
            continue
        delta = tuple((b - a) & MASK128 for a, b in zip(base, real(lo + 1)))
        piece = Piece(lo, lo + 1, counts[lo], tuple(base), delta)

        def fits(v: int) -> bool:
            return real(v) == piece.words(v) and counts[v] == piece.insns  # noqa: B023 - the piece being grown

        good, step = lo + 1, 1
        bad = None
        while good < var.max:  # gallop: good is the last value known to fit
            nxt = min(var.max, good + step)
            if fits(nxt):
                good, step = nxt, step * 2
            else:
                bad = nxt
                break
        while bad is not None and bad - good > 1:  # bisect between the last fit and the first miss
            mid = (good + bad) // 2
            if fits(mid):
                good = mid
            else:
                bad = mid
        piece = Piece(lo, good, piece.insns, piece.base, piece.delta)
        for v in sorted({lo, lo + 1, (lo + good) // 2, max(lo, good - 1), good}):
            if real(v) != piece.words(v):
                raise CompileError(f"kernel '{name}': the instruction words are not affine in '{var.name}' on "
                                   f"{lo}..{good} (value {v} differs)")
        pieces.append(piece)
        lo = good + 1
    for piece in pieces if verify_all else []:
        for v in range(piece.lo, piece.hi + 1):
            if real(v) != piece.words(v) or counts[v] != piece.insns:
                raise CompileError(f"kernel '{name}': the driver's words for {var.name}={v} differ from a trace "
                                   f"(piece {piece.lo}..{piece.hi} is not affine there)")
        if verify_all:
            cache.clear()  # keep the memory bounded: a verified piece's traces are not needed again
    # the Program of the folder: the maximum's stream in the shared layout (its instruction region is the
    # maximum's length; a run at another value shrinks it, see hw.dynamic_driver)
    words = real(var.max)[:counts[var.max]]
    isa = isa_of(cfg)
    insns = [isa.decode_word(w, i) for i, w in enumerate(words)]
    sized = [Region("insn", "insn", regions[0].addr, (len(insns) * INSN_BYTES,), "int8"), *regions[1:]]
    dyn_meta = {**(meta or {}), "dynamic": {"var": var.name, **var.to_json()}}
    inputs = {}
    if pool_max:
        const = next(r for r in regions if r.name == CONST_REGION)
        inputs[CONST_REGION] = np.frombuffer(pool_max, dtype=np.int8).reshape(const.shape)
    program = Program.create(cfg, insns, sized, name=name, meta=dyn_meta, inputs=inputs)
    return DynamicProgram(program, var, pieces, capacity, traces)


def save_dynamic(dp: DynamicProgram, folder: str | Path) -> Path:
    """Write the Program folder (the maximum's Program, as :meth:`hw.program.Program.save` writes it) with the
    driver: ``dynamic.json`` (the Python driver's data), ``driver.h`` and ``driver.c`` (the C driver)."""
    from compiler.dynamic_c import driver_header, driver_source

    out = dp.program.save(folder)
    d = dp.driver_json()
    (out / DRIVER_FILE).write_text(json.dumps(d) + "\n")
    (out / "driver.h").write_text(driver_header(d, dp.program.name))
    (out / "driver.c").write_text(driver_source(d, dp.program.config))
    return out
