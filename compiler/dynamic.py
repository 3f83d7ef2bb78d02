"""One compiled Program for every value of a run-time dimension: the piecewise-affine host driver.

A kernel's arguments may hold :mod:`compiler.symbolic` expressions of one variable (tensor shapes
``S.tensor((token, 64), "int8")``, constants such as a loop extent). :func:`compile_dynamic` compiles once
and derives the driver: the instruction words, the kernel's constants and the DRAM layout as functions of
the value. The kernel is traced at concrete values (the golden path and the compiler only ever see ints);
each trace is laid out exactly as a static compile of that value lays it out, so a run of value ``v``
is the static compile of ``v``, address for address and cycle for cycle. What makes that one artifact:

* a LOAD/STORE's DRAM address is split into its region's base and the offset inside the region (a
  *relocation*): the words with offsets only, the constants and the regions' sizes are piecewise affine in
  ``v`` (on each piece ``[lo, hi]`` entry i is ``base[i] + (v - lo) * delta[i]`` modulo 2^128);
* the driver places the regions from those sizes by the layout's own rule (instructions first, each region
  at the previous end rounded up to the config's alignment) and adds each relocation's base.

Pieces are found by galloping then bisecting on where the affine prediction stops matching a real trace,
so the number of traces grows with the number of pieces (tile-count changes), not with the maximum (more
than ``MAX_PIECES`` pieces are refused: such a driver is a table of static compiles). Each
piece is then checked against real static compiles at both ends, its middle and one value in from each end
(``verify_all``: every value); the tests check more. DRAM is planned at the maximum (with room for
``INSN_SLACK`` more instructions): a value whose layout would end past it is refused. The driver's data
(``dynamic.json``) is read by :mod:`hw.dynamic_driver` (Python) and by the generated C of
:mod:`compiler.dynamic_c`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from compiler.build import check_dependences, insert_tokens, layout, sections, to_insn, trace_cores, verify_program
from compiler.errors import CompileError, ConfigFitError
from compiler.ir import LoadOp, StoreOp
from compiler.kernel import Kernel, as_kernel, reporting_failures
from compiler.symbolic import Expr, SymbolicError, Var, bind
from compiler.tensor import TensorSpec
from compiler.trace import CONST_REGION
from hw.config import HwConfig
from hw.dynamic_driver import DRIVER_FILE, FORMAT, MASK128, Driver, DriverError, DriverPiece, piece_words
from hw.isa import BUFFERS, INSN_BYTES, Instruction, Load, Store
from hw.program import Program, Region, isa_of, make_regs

# DRAM is planned for the maximum's layout with this many times its instruction count (a smaller value
# may take more instructions, e.g. an extra tail tile); a value whose layout ends past it is refused.
INSN_SLACK = 1.25
# A driver of more pieces than this is a table of static compiles (a kernel whose tiling changes at almost
# every value, e.g. a small config's buffers): refused as the search passes it, before a long compile and a
# dynamic.json of hundreds of megabytes.
MAX_PIECES = 256


@dataclass(frozen=True)
class Piece(DriverPiece):
    """Values ``lo..hi`` share one stream length and relocations; entry i of value v is ``(base[i] + (v - lo)
    * delta[i]) mod 2^128``: the instructions (DRAM fields relative to their regions), the kernel's
    constants, then one size per region (the driver's :class:`hw.dynamic_driver.DriverPiece`, written by
    the compiler)."""

    def to_json(self) -> dict[str, Any]:
        """The piece as ``dynamic.json`` holds it (entries as 32 hex digits)."""
        return {"lo": self.lo, "hi": self.hi, "insns": self.insns, "consts": self.consts,
                "base": [f"{w:032x}" for w in self.base], "delta": [f"{w:032x}" for w in self.delta],
                "relocs": [list(r) for r in self.relocs]}


@dataclass(frozen=True)
class StaticTrace:
    """A kernel compiled statically for one value: its Program's words, constants, regions and CSR writes,
    and the same split for the driver (``entries``: relative words, constant words, region sizes), with its
    named sections (``meta["sections"]`` of the static compile)."""

    words: list[int]
    pool: bytes
    regions: list[Region]
    regs: list[tuple[str, int]]
    entries: list[int]
    insns: int
    consts: int
    relocs: tuple[tuple[int, int, int, int], ...]
    sections: tuple[tuple[str, int, int], ...] = ()  # (name, first, count): one piece has one stream shape


@dataclass
class DynamicProgram:
    """The Program of the maximum (exactly its static compile), the variable and the driver's pieces."""

    program: Program
    var: Var
    pieces: list[Piece]
    dram_end: int
    traces: int  # kernel traces the compile took

    def sections_of(self, v: int) -> list[dict[str, Any]]:
        """The named sections (``S.section``, a network's layers) of value ``v``'s Program, as a static
        compile's ``meta["sections"]`` lists them (empty when the kernel names none)."""
        return sections_of(self.program.meta, v)

    def driver_json(self) -> dict[str, Any]:
        """``dynamic.json``: the variable, the base register writes, the layout rule and the pieces."""
        regions = self.program.regions
        const = next((i for i, r in enumerate(regions) if r.name == CONST_REGION), None)
        return {"format": FORMAT, "var": {"name": self.var.name, **self.var.to_json()},
                "regions": len(regions), "region_names": [r.name for r in regions],
                "insn_base": regions[0].addr, "align": self.program.config.region_align, "dram_end": self.dram_end,
                "const_region": const, "const_bytes": max(p.consts for p in self.pieces) * INSN_BYTES,
                "regs": [[n, v] for n, v in self.program.regs],
                "pieces": [p.to_json() for p in self.pieces]}

    def driver(self) -> Driver:
        """The Python driver of this compile."""
        return Driver.from_json(self.driver_json(), self.program.name)

    def words(self, v: int) -> list[int]:
        """The driver's instruction words for value ``v`` (range checked)."""
        self.var.check(v)
        return self.driver().words(v)


def bind_args(args: Mapping[str, Any], values: Mapping[str, int]) -> dict[str, Any]:
    """The arguments with every expression bound: TensorSpecs of concrete shapes, int constants."""
    out: dict[str, Any] = {}
    for n, a in args.items():
        if isinstance(a, TensorSpec):
            out[n] = TensorSpec(tuple(int(s) for s in bind(a.shape, values)), a.dtype)
        else:
            out[n] = bind(a, values)
    return out


def static_trace(kernel: Kernel, args: Mapping[str, Any], cfg: HwConfig, name: str) -> StaticTrace:
    """The kernel on concrete ``args`` compiled as :func:`compiler.build.build` compiles it on one core (its
    own packed layout, the stream proved), with the driver's split of it (:class:`StaticTrace`)."""
    tr = trace_cores(kernel, args, cfg, name, cores=1)[0]
    starts: list[int] = []
    nodes = insert_tokens(tr, cfg, starts)
    regions = layout(tr, cfg, len(nodes))
    by_name = {r.name: r for r in regions}
    insns = [to_insn(n, by_name, cfg) for n in nodes]
    verify_program(insns, cfg, f"kernel '{name}'")
    check_dependences(tr, nodes, insns, cfg)
    pool = tr.pool.array().tobytes() if tr.pool is not None and tr.pool.count else b""
    index = {r.name: i for i, r in enumerate(regions)}
    targets = [index[n.op.tensor.region] if isinstance(n.op, (LoadOp, StoreOp)) else None for n in nodes]
    return split_static(insns, regions, pool, targets, cfg, name,
                        sections(tr.sections, starts, len(nodes)) if tr.sections else [])


def program_trace(prog: Program, name: str) -> StaticTrace:
    """:class:`StaticTrace` of a compiled one-core Program (e.g. a network's), each LOAD/STORE relocated to
    the region its DRAM address falls in (one CompileError line when it falls in none)."""
    regions = prog.regions
    targets: list[int | None] = []
    for i, insn in enumerate(prog.insns):
        if isinstance(insn, (Load, Store)):
            addr = insn.dram_base * _elem_bytes(insn, prog.config)
            hit = [k for k, r in enumerate(regions) if r.addr <= addr < r.end and r.role != "insn"]
            if len(hit) != 1:
                raise CompileError(f"kernel '{name}': instruction {i} addresses 0x{addr:x}, in no one region")
            targets.append(hit[0])
        else:
            targets.append(None)
    const = prog.inputs.get(CONST_REGION)
    pool = np.asarray(const).tobytes() if const is not None else b""
    return split_static(list(prog.insns), regions, pool, targets, prog.config, name, prog.meta.get("sections", []))


def _elem_bytes(insn: Load | Store, cfg: HwConfig) -> int:
    if isinstance(insn, Store):
        return cfg.out_vec_bytes
    return cfg.elem_bytes(next(b for b, code in BUFFERS.items() if code == insn.buf))


def split_static(insns: list[Instruction], regions: list[Region], pool: bytes, targets: list[int | None],
                 cfg: HwConfig, name: str, secs: list[dict[str, Any]] | None = None) -> StaticTrace:
    """The driver's split of a static compile: each LOAD/STORE's DRAM field made relative to the region
    ``targets[i]`` (a relocation), the constants as 16-byte words, the regions' sizes; ``secs`` its
    ``meta["sections"]``."""
    isa = isa_of(cfg)
    words = [isa.encode_word(i) for i in insns]
    rel = list(words)
    relocs = []
    for i, r in enumerate(targets):  # the DRAM field minus its region's base: an offset inside the region
        if r is None:
            continue
        insn = insns[i]
        assert isinstance(insn, (Load, Store))
        eb = _elem_bytes(insn, cfg)
        lo = isa.field(insn.MNEMONIC, "dram_base").lo
        if regions[r].addr % eb:
            raise CompileError(f"kernel '{name}': region '{regions[r].name}' is not aligned to {eb} bytes")
        rel[i] = (words[i] - ((regions[r].addr // eb) << lo)) & MASK128
        relocs.append((i, r, lo, eb))
    if len(pool) % INSN_BYTES:
        raise CompileError(f"kernel '{name}': its constants ({len(pool)} bytes) are not whole 16-byte words")
    consts = [int.from_bytes(pool[i:i + INSN_BYTES], "little") for i in range(0, len(pool), INSN_BYTES)]
    return StaticTrace(words, pool, regions, make_regs(cfg, regions, [(0, len(insns))]),
                       rel + consts + [r.nbytes for r in regions], len(words), len(consts), tuple(relocs),
                       tuple((s["name"], s["first"], s["count"]) for s in secs or []))


def compile_dynamic(kernel: Any, args: Mapping[str, Any], var: Var, cfg: HwConfig, name: str | None = None,
                    meta: dict[str, Any] | None = None, verify_all: bool = False) -> DynamicProgram:
    """Compile ``kernel`` once for every value of ``var`` (module docstring). ``args`` may hold expressions
    of ``var`` in TensorSpec shapes and constants. ``verify_all`` also compiles every value of the range
    statically and compares it with the driver (a cost that grows with the maximum; the default checks
    samples). Raises CompileError / SymbolicError in one line."""
    k = as_kernel(kernel)
    name = name or k.name
    for n, a in args.items():
        shape = a.shape if isinstance(a, TensorSpec) else ()
        for s in shape:
            if isinstance(s, Expr) and (s.lo < 1 or not s.names <= {var.name}):
                raise SymbolicError(f"argument '{n}': cannot bound shape dimension '{s.text}' "
                                    + (f"to a positive size (it ranges {s.lo}..{s.hi})" if s.lo < 1
                                       else f"(it uses variables other than '{var.name}')"))
    def trace(v: int) -> StaticTrace:
        with reporting_failures(k.fn, f"kernel '{name}'"):
            return static_trace(k, bind_args(args, {var.name: v}), cfg, name)

    return compile_traces(trace, var, cfg, name, meta, verify_all)


def compile_traces(trace_of: Callable[[int], StaticTrace], var: Var, cfg: HwConfig, name: str,
                   meta: dict[str, Any] | None = None, verify_all: bool = False) -> DynamicProgram:
    """The dynamic Program of any static compiler ``trace_of`` (value -> :class:`StaticTrace`): the pieces
    (module docstring), the Program of the maximum, and the driver checked against static compiles."""
    if cfg.num_cores != 1:
        raise CompileError(f"dynamic shapes run on one core; config '{cfg.name}' has {cfg.num_cores}")
    cache: dict[int, StaticTrace] = {}
    traces = 0

    def real(v: int) -> StaticTrace:
        nonlocal traces
        if v not in cache:
            traces += 1
            try:
                st = trace_of(v)
            except (CompileError, SymbolicError) as e:  # the kernel may fail at some values only: say which
                e.args = (f"{e.args[0] if e.args else e} (compiling {var.name}={v} of {var.min}..{var.max})",
                          *e.args[1:])
                raise
            if v != var.max and [r.name for r in st.regions] != names_max:
                raise CompileError(f"kernel '{name}': its DRAM regions at {var.name}={v} "
                                   f"({', '.join(r.name for r in st.regions)}) differ from the maximum's")
            cache[v] = st
        return cache[v]

    names_max: list[str] = []
    top = real(var.max)
    names_max = [r.name for r in top.regions]
    room = int(top.insns * INSN_SLACK) + 8
    # DRAM's plan: the maximum's layout with room for ``room`` instructions; a larger instruction region
    # moves every other region up by the same whole number of alignments (plan_layout packs them)
    a, insn = cfg.region_align, top.regions[0]
    dram_end = top.regions[-1].end + (-(-(insn.addr + room * INSN_BYTES) // a) - -(-insn.end // a)) * a
    pieces: list[Piece] = []
    lo = var.min
    span = 0  # the length of the last piece of several values

    def same_shape(a: StaticTrace, b: StaticTrace) -> bool:
        return (a.insns, a.consts, a.relocs, a.sections) == (b.insns, b.consts, b.relocs, b.sections)

    while lo <= var.max:
        if len(pieces) >= MAX_PIECES:
            raise ConfigFitError(f"kernel '{name}': its instruction stream changes shape at more than {MAX_PIECES} "
                                 f"values of '{var.name}' on config '{cfg.name}' ({MAX_PIECES} pieces cover "
                                 f"{var.min}..{lo - 1} of {var.min}..{var.max}): give a narrower range (--var "
                                 f"{var.name}=MAX or MIN..MAX), or a config whose buffers hold larger tiles where "
                                 f"'{var.name}' is a tensor dimension")
        first = real(lo)
        if lo == var.max or not same_shape(real(lo + 1), first):
            pieces.append(Piece(lo, lo, first.insns, first.consts, tuple(first.entries),
                                tuple(0 for _ in first.entries), first.relocs))
            lo += 1
            continue
        delta = tuple((b - a) & MASK128 for a, b in zip(first.entries, real(lo + 1).entries))

        def fits(v: int) -> bool:
            st = real(v)
            return same_shape(st, first) and st.entries == piece_words(first.entries, delta, v - lo)  # noqa: B023

        good, step = lo + 1, 1
        bad = None
        guess = lo + span - 1  # pieces of a tiled kernel repeat: first try the last piece's length
        if span > 2 and guess < var.max and fits(guess):
            good, step = guess, span
            if not fits(guess + 1):
                bad = guess + 1
        while bad is None and good < var.max:  # gallop: good is the last value known to fit
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
        pieces.append(Piece(lo, good, first.insns, first.consts, tuple(first.entries), delta, first.relocs))
        span = good - lo + 1
        lo = good + 1
    # the sections of each piece (its first value's): meta["dynamic_sections"], [[lo, hi, sections], ...]
    secs = {"sections": _sections_json(top.sections),
            "dynamic_sections": [[p.lo, p.hi, _sections_json(real(p.lo).sections)] for p in pieces]} \
        if any(real(p.lo).sections for p in pieces) else {}
    program = Program.create(cfg, [isa_of(cfg).decode_word(w, i) for i, w in enumerate(top.words)], top.regions,
                             name=name, meta={**(meta or {}), "dynamic": {"var": var.name, **var.to_json()}, **secs},
                             inputs={CONST_REGION: np.frombuffer(top.pool, dtype=np.int8).reshape(
                                 top.regions[names_max.index(CONST_REGION)].shape)} if top.pool else {})
    dp = DynamicProgram(program, var, pieces, dram_end, 0)
    drv = dp.driver()

    def check(v: int) -> None:
        st = real(v)
        try:
            got = drv.layout(v)
        except DriverError as e:
            raise CompileError(f"kernel '{name}': {e}") from None
        if got.words != st.words or drv.const_bytes_of(v) != st.pool or drv.regs(v) != st.regs:
            raise CompileError(f"kernel '{name}': the driver's run of {var.name}={v} differs from its static "
                               f"compile")

    for p in pieces:
        for v in (range(p.lo, p.hi + 1) if verify_all else sorted({p.lo, p.lo + 1, (p.lo + p.hi) // 2,
                                                                    max(p.lo, p.hi - 1), p.hi} & set(
                                                                        range(p.lo, p.hi + 1)))):
            check(v)
            if verify_all and v != var.max:
                cache.pop(v, None)  # keep the memory bounded: a checked value's compile is not needed again
    dp.traces = traces
    return dp


def _sections_json(secs: tuple[tuple[str, int, int], ...]) -> list[dict[str, Any]]:
    return [{"name": n, "first": f, "count": c} for n, f, c in secs]


def sections_of(meta: Mapping[str, Any], v: int) -> list[dict[str, Any]]:
    """The named sections of value ``v`` from a dynamic Program's ``meta`` (its ``dynamic_sections``: each
    piece's, which every value of the piece shares); empty where the Program names none."""
    for lo, hi, secs in meta.get("dynamic_sections") or []:
        if lo <= v <= hi:
            return list(secs)
    return []


def value_meta(meta: Mapping[str, Any], var: str, v: int) -> dict[str, Any]:
    """The ``meta`` of the Program of ``var`` = ``v`` specialised from a dynamic Program's: the value, and
    that value's sections in place of the maximum's."""
    out = {k: x for k, x in meta.items() if k not in ("sections", "dynamic_sections")}
    secs = sections_of(meta, v)
    return {**out, "dynamic_value": {var: v}, **({"sections": secs} if secs else {})}


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
