"""Random Programs of several cores: one stream per core, phases between BARRIERs, shared DRAM
without races; faults in any core; the derived fuzz configs; the shrinker's per-core candidates.

**Generation** (:func:`generate_multicore`). Every core runs ``phases`` segments, each a random
valid one-core stream exactly as :func:`cosim.fuzz.generator.generate` makes it (for the
config's one-core sibling), its FINISH turned into a BARRIER (same token pops) except in the last
phase. A BARRIER drains its core and fetch dispatches nothing past it until every core arrived,
so a segment's buffer traffic is fenced from the segments before it: each core's stream stays
valid (token-balanced, deadlock-free, race-free on its own buffers: ``check_program``).

The segments' DRAM tensors are relocated into the seven shared regions a Program of several
cores may have (``max_regions`` holds for the whole Program): instructions, ``in`` (int32 inputs),
``inp``, ``wgt``, ``uop`` (GEMM data), ``out`` (outputs) and ``mid`` (scratch). Each segment's
output tensor gets its own slot (no other core writes it, in any phase); a later phase's input
tensor may be placed on the ``mid`` slot an earlier phase of any core wrote (what barriers are
for), or share another segment's input slot (read-only sharing). So no two cores touch the same
DRAM bytes in one phase unless all of them only read.

**Race check** (:func:`race_problem`): independent of the construction, from the Program alone:
each core's DRAM footprint per phase (rows of its LOADs and STOREs, fetch's window) and, per phase,
every pair of cores compared with the golden path's interval test
(``compiler.cores.first_overlap``; the golden path's ``Cores.check_phase`` itself works on kernel
tensors recorded while a kernel runs, not on a Program's instructions, so the per-phase walk over
the instructions is written here).

**Faults** (:func:`inject_multicore`): one of ``cosim.fuzz.faults``' kinds in core k, injected into
a one-core view of core k's stream and put back; and ``skip_barrier``: core k misses a BARRIER
(``ERR_BARRIER`` on the lowest other core, at its BARRIER).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np

from compiler.cores import first_overlap
from hw import csr
from hw.assembler import PatchedProgram, patched
from hw.config import ConfigError, HwConfig, list_configs, load_config, parse_config
from hw.isa import INSN_BYTES, Alu, Barrier, Finish, Gemm, Instruction, Load, Store
from hw.isa_semantics import DEP_FLAGS, buffer_of
from hw.program import Program, Region, concat_streams, make_regs, plan_layout
from cosim.fuzz.faults import FAULT_KINDS, inject
from cosim.fuzz.generator import GenOptions, check_program, generate

MULTICORE_FAULT_KINDS = FAULT_KINDS + ("skip_barrier",)
MULTICORE = "multicore"           # the pseudo-config: every derived config of 2..4 cores, round-robin
MULTICORE_BASES = ("small", "default")
MULTICORE_COUNTS = (2, 3, 4)
# Smaller segments than one-core Programs: a core runs several of them and the cores add up.
SEGMENT_OPTIONS = GenOptions(max_body=12)
_DERIVED = re.compile(r"^(?P<base>[A-Za-z0-9_]+)-x(?P<n>[0-9]+)$")

# The shared regions, in layout order: (name, role, buffer whose entries its rows are, dtype).
_REGIONS = (("in", "input", "ACC", "int32"), ("inp", "input", "INP", "int8"), ("wgt", "input", "WGT", "int8"),
            ("uop", "input", "UOP", "int8"), ("out", "output", None, None), ("mid", "scratch", "ACC", "int32"))


# ---- configs ---------------------------------------------------------------------------------------
def one_core(cfg: HwConfig) -> HwConfig:
    """``cfg``'s hardware with one core (a shipped config's name when one has that hardware)."""
    return derived_config(cfg, 1)


def derived_config(base: HwConfig, n: int) -> HwConfig:
    """``base`` with ``n`` cores, named ``<base>-x<n>``, or the shipped config of that hardware (whose RTL
    build is then reused, as ``cosim sweep`` does). The port's bursts in flight are not part of the core:
    a shipped config with the same cores is taken whatever its ``dram_reads_in_flight`` and
    ``dram_writes_in_flight``; else one core gets 1 and several keep the base's (1 above 8 cores)."""
    data = base.to_dict()
    data["num_cores"] = n
    data["dram_reads_in_flight"] = 1 if n == 1 or n > 8 else base.dram_reads_in_flight
    data["dram_writes_in_flight"] = 1 if n == 1 or n > 8 else base.dram_writes_in_flight
    root = base.name.split("-x")[0]
    cfg = parse_config({**data, "name": f"{root}-x{n}", "description": f"{root} with {n} cores (fuzz)"},
                       f"{root}-x{n}")

    def cores(c: HwConfig) -> dict[str, int]:
        return {k: v for k, v in c.hardware_dict().items()
                if k not in ("dram_reads_in_flight", "dram_writes_in_flight")}
    for name in list_configs():
        shipped = load_config(name)
        if cores(shipped) == cores(cfg):
            return shipped
    return cfg


def fuzz_config(name: str) -> HwConfig:
    """A config by name: a shipped one, a JSON path, or ``<shipped>-x<n>`` (that config with ``n`` cores,
    1..``hw.csr.MAX_CORES``). Raises ConfigError in one line."""
    m = _DERIVED.match(name)
    if m and m["base"] in list_configs():
        n = int(m["n"])
        if not 1 <= n <= csr.MAX_CORES:
            raise ConfigError(f"{name}: num_cores must be 1..{csr.MAX_CORES}, got {n}")
        return derived_config(load_config(m["base"]), n)
    return load_config(name)


def expand_configs(names: list[str]) -> list[str]:
    """``names`` checked (a bad one raises ConfigError in one line), ``<shipped>-x<n>`` named as
    :func:`fuzz_config` names it, and the pseudo-config ``multicore`` replaced by every derived config
    of 2..4 cores of the default and small cores (shipped names where the hardware is shipped: small2,
    quad)."""
    out: list[str] = []
    for n in names:
        if n == MULTICORE:
            out += [derived_config(load_config(b), k).name for b in MULTICORE_BASES for k in MULTICORE_COUNTS]
        else:
            cfg = fuzz_config(n)
            out.append(cfg.name if _DERIVED.match(n) else n)
    return out


# ---- generation ------------------------------------------------------------------------------------
@dataclass
class _Segment:
    """One core's phase: a generated one-core Program and where its tensors go."""

    core: int
    phase: int
    program: Program
    place: dict[str, tuple[str, int]] = field(default_factory=dict)  # tensor -> (shared region, slot)


def segment_seed(seed: int, cores: int, core: int, phase: int) -> int:
    """The one-core generator seed of ``core``'s phase ``phase`` in the Program of ``seed`` on ``cores``
    cores (1..16; phases below 16)."""
    return (seed << 13) | (cores << 8) | (core << 4) | phase


def _dma_unit(i: Instruction, cfg: HwConfig) -> int:
    """Bytes of the unit ``i.dram_base`` counts in."""
    return cfg.elem_bytes(buffer_of(i)) if isinstance(i, Load) else cfg.out_vec_bytes


def _touches_dram(i: Instruction) -> bool:
    return isinstance(i, (Load, Store)) and i.y_size * i.x_size > 0


def generate_multicore(cfg: HwConfig, seed: int, name: str | None = None, phases: int | None = None,
                       opts: GenOptions | None = None) -> Program:
    """A random valid, race-free Program for ``cfg`` (several cores): the same seed gives the same Program.
    ``phases`` (default random 1..3) is the number of segments per core: ``phases - 1`` BARRIERs each."""
    n = cfg.num_cores
    # seeded by the cores' hardware, not the port's bursts in flight (they change no Program)
    r = np.random.default_rng([seed, dataclasses.replace(cfg, dram_reads_in_flight=1,
                                                     dram_writes_in_flight=1).config_id, 5])
    nph = int(phases if phases is not None else r.choice([1, 2, 2, 3, 3]))
    if not 1 <= nph <= 15:
        raise ValueError(f"phases must be 1..15, got {nph}")
    one = one_core(cfg)
    o = opts or SEGMENT_OPTIONS
    segs = [[_Segment(k, j, generate(one, segment_seed(seed, n, k, j), o)) for j in range(nph)] for k in range(n)]
    align = cfg.region_align

    sizes: dict[str, list[int]] = {name: [] for name, *_ in _REGIONS}   # slot sizes (bytes) per region
    data: dict[str, list[bytes]] = {name: [] for name, *_ in _REGIONS}
    writer_phase: list[int] = []   # the phase of every segment output (its writer id is its index)

    def new_slot(region: str, nbytes: int, payload: bytes = b"") -> int:
        sizes[region].append(-(-nbytes // align) * align)
        data[region].append(payload)
        return len(sizes[region]) - 1

    # outputs first: each its own slot (in "out"; moved to "mid" when a later phase reads it)
    out_of: dict[tuple[int, int, str], int] = {}
    for k in range(n):
        for s in segs[k]:
            for reg in s.program.regions:
                if reg.role == "output":
                    out_of[(k, s.phase, reg.name)] = len(writer_phase)
                    writer_phase.append(s.phase)
    mid_slot: dict[int, int] = {}
    readers: dict[int, int] = {}   # writer id -> largest reader bytes
    for j in range(nph):
        for s in (segs[k][j] for k in range(n)):
            for reg in s.program.regions:
                if reg.role != "input":
                    continue
                if reg.name in ("inp", "wgt", "uop"):  # GEMM data: each segment its own slot
                    s.place[reg.name] = (reg.name, new_slot(reg.name, reg.nbytes, _bytes(s.program, reg)))
                    continue
                earlier = [w for p in range(j) for w, ph in enumerate(writer_phase) if ph == p]  # by phase
                shared = [i for i, sz in enumerate(sizes["in"]) if sz >= reg.nbytes]
                pick = r.random()
                if earlier and pick < 0.6:  # read what an earlier phase (any core) wrote
                    w = int(r.choice(earlier))
                    readers[w] = max(readers.get(w, 0), reg.nbytes)
                    s.place[reg.name] = ("mid", w)  # a writer id until the mid slots are laid out below
                elif shared and pick < 0.75:  # read-only sharing of another segment's input
                    s.place[reg.name] = ("in", int(r.choice(shared)))
                else:
                    s.place[reg.name] = ("in", new_slot("in", reg.nbytes, _bytes(s.program, reg)))
    for k in range(n):
        for s in segs[k]:
            for reg in s.program.regions:
                if reg.role != "output":
                    continue
                w = out_of[(k, s.phase, reg.name)]
                if w in readers:
                    if w not in mid_slot:  # random initial contents: what nobody stored reads the same everywhere
                        size = max(reg.nbytes, readers[w])
                        init = r.integers(-128, 128, size=-(-size // align) * align, dtype=np.int64)
                        mid_slot[w] = new_slot("mid", size, init.astype(np.int8).tobytes())
                    s.place[reg.name] = ("mid", mid_slot[w])
                else:
                    s.place[reg.name] = ("out", new_slot("out", reg.nbytes))
    for k in range(n):  # readers of a writer's output: its mid slot
        for s in segs[k]:
            for t, (region, slot) in list(s.place.items()):
                if region == "mid" and t.startswith("in"):
                    s.place[t] = ("mid", mid_slot[slot])

    def stream(k: int, addr: dict[str, list[int]]) -> list[Instruction]:
        out: list[Instruction] = []
        for s in segs[k]:
            p = s.program
            for i in p.insns:
                if isinstance(i, Finish) and s.phase < nph - 1:
                    i = Barrier(**{f: getattr(i, f) for f in DEP_FLAGS})
                elif _touches_dram(i):
                    vb = _dma_unit(i, cfg)
                    old = next(reg for reg in p.regions if reg.addr <= i.dram_base * vb < reg.end)
                    region, slot = s.place[old.name]
                    i = dataclasses.replace(i, dram_base=(addr[region][slot] + i.dram_base * vb - old.addr) // vb)
                out.append(i)
        return out

    count = sum(len(s.program.insns) for k in range(n) for s in segs[k])
    tensors = []
    for rname, role, buf, dtype in _REGIONS:
        total = sum(sizes[rname])
        if not total:
            continue
        if rname == "out":
            dtype = f"int{cfg.out_width}"
            tensors.append((rname, role, (total // cfg.out_vec_bytes, cfg.lanes), dtype))
        else:
            unit = cfg.elem_bytes(buf)
            isz = np.dtype(dtype).itemsize
            tensors.append((rname, role, (total // unit, unit // isz), dtype))
    regions = plan_layout(cfg, tensors, count)
    at = {reg.name: reg for reg in regions}
    addr = {rname: list(np.cumsum([0] + sizes[rname][:-1]) + (at[rname].addr if rname in at else 0))
            for rname, *_ in _REGIONS}
    addr = {rn: [int(a) for a in v] for rn, v in addr.items()}
    insns, windows = concat_streams([stream(k, addr) for k in range(n)])
    meta = {"generator": "cosim.fuzz.multicore", "seed": seed, "phases": nph,
            "segments": [[segment_seed(seed, n, k, j) for j in range(nph)] for k in range(n)]}
    prog = Program.create(cfg, insns, regions, name=name or f"fuzz-{cfg.name}-{seed}", meta=meta, windows=windows)
    for rname, role, _, _ in _REGIONS:
        if rname in at and role in ("input", "scratch"):
            blob = b"".join(d.ljust(sz, b"\0") for d, sz in zip(data[rname], sizes[rname]))
            reg = at[rname]
            prog.set_input(rname, np.frombuffer(blob, dtype=np.dtype(reg.dtype).newbyteorder("<"))
                           .astype(reg.dtype).reshape(reg.shape))
    return prog


def _bytes(p: Program, reg: Region) -> bytes:
    """The initial contents of input region ``reg`` of ``p``."""
    a = p.inputs.get(reg.name)
    if a is None:
        return b""
    return np.ascontiguousarray(a, dtype=np.dtype(reg.dtype).newbyteorder("<")).tobytes()


# ---- validity and the race check -------------------------------------------------------------------
@dataclass(frozen=True)
class DmaLabel:
    """One DMA instruction's DRAM rows, the label a race report names."""

    name: str


class PhaseRuns(NamedTuple):
    """One core's DRAM rows in one phase, as ``compiler.cores.first_overlap`` runs."""

    reads: list[tuple[np.ndarray, int, DmaLabel]]
    writes: list[tuple[np.ndarray, int, DmaLabel]]


def phase_footprints(p: Program) -> list[list[PhaseRuns]]:
    """Per core, per phase (BARRIERs passed): ``(reads, writes)`` as ``compiler.cores.first_overlap`` runs
    ``(row start bytes, row length, label)``; fetch reads the core's whole window in every phase."""
    cfg = p.config
    insn = p.region_by_role("insn")
    out = []
    for k, (first, count) in enumerate(p.windows):
        fetch = (np.array([insn.addr + first * INSN_BYTES], dtype=np.int64), count * INSN_BYTES,
                 DmaLabel(f"core {k} fetch"))
        phases: list[PhaseRuns] = [PhaseRuns([fetch], [])]
        for pc, i in enumerate(p.insns[first:first + count]):
            if isinstance(i, Barrier):
                phases.append(PhaseRuns([fetch], []))
                continue
            if not _touches_dram(i):
                continue
            vb = _dma_unit(i, cfg)
            starts = (i.dram_base + np.arange(i.y_size, dtype=np.int64) * i.x_stride) * vb
            run = (starts, i.x_size * vb, DmaLabel(f"core {k} pc {pc} ({i.MNEMONIC})"))
            (phases[-1].writes if isinstance(i, Store) else phases[-1].reads).append(run)
        out.append(phases)
    return out


def race_problem(p: Program) -> str | None:
    """None when no two cores touch the same DRAM bytes between two barriers with one of them writing;
    else one line naming the phase, both cores' instructions and the byte."""
    fps = phase_footprints(p)
    nph = max(len(f) for f in fps)
    for ph in range(nph):
        for a in range(len(fps)):
            if ph >= len(fps[a]):
                continue
            wa = fps[a][ph].writes
            for b in range(len(fps)):
                if b == a or ph >= len(fps[b]):
                    continue
                for other, verb in ((fps[b][ph].writes, "writes"), (fps[b][ph].reads, "reads")):
                    if verb == "writes" and b < a:
                        continue  # reported from b's side
                    hit = first_overlap(wa, other)
                    if hit is not None:
                        byte, who = hit
                        them = next(lab for s, ln, lab in other if np.any((s <= byte) & (byte < s + ln)))
                        when = f"between barriers {ph} and {ph + 1}" if ph else "before the first barrier"
                        return (f"race {when}: {who.name} writes and {them.name} {verb} DRAM byte 0x{byte:x} "
                                f"(no barrier orders them)")
    return None


def check_multicore(p: Program, dram: bytes | bytearray | None = None) -> str | None:
    """None when every core's stream is valid (``check_program``), every stream has the same number of
    BARRIERs and the cores are race-free in DRAM per phase (:func:`race_problem`); else one line."""
    if len(p.windows) != p.config.num_cores:
        return f"{len(p.windows)} streams for {p.config.num_cores} cores"
    image = p.dram_image() if dram is None else dram
    barriers = [sum(isinstance(i, Barrier) for i in p.core_insns(k)) for k in range(p.num_cores)]
    if len(set(barriers)) > 1:
        return f"BARRIERs per core differ: {barriers}"
    for k in range(p.num_cores):
        bad = check_program(p.core_insns(k), p.config, dram=image)
        if bad is not None:
            return f"core {k}: {bad}"
    return race_problem(p)


# ---- one core's view, and back ----------------------------------------------------------------------
def core_view(p: Program, k: int) -> Program:
    """Core ``k``'s stream as a one-core Program of ``p``'s one-core sibling config over the same data
    regions (its instruction region is the core's window; raw words stay patched)."""
    first, count = p.windows[k]
    cfg = one_core(p.config)
    insn = p.region_by_role("insn")
    regions = [Region("insn", "insn", insn.addr + first * INSN_BYTES, (count * INSN_BYTES,), "int8")
               if r.role == "insn" else r for r in p.regions]
    regs = []
    prefix = csr.core_reg("", k, p.config.num_cores)
    for name, v in p.regs:
        if name.startswith(prefix):
            regs.append((name[len(prefix):], v))
        elif not re.match(r"CORE[0-9]+_", name):
            regs.append((name, v))
    view = Program(cfg, list(p.core_insns(k)), regions, regs, p.name, dict(p.meta), dict(p.inputs), {},
                   [(0, count)])
    patches = {j - first: w for j, w in getattr(p, "patches", {}).items() if first <= j < first + count}
    return patched(view, patches) if patches or isinstance(p, PatchedProgram) else view


def replace_core(p: Program, k: int, view: Program, regs: bool = False) -> Program:
    """``p`` with core ``k``'s stream (and its raw words) taken from ``view`` (a :func:`core_view`,
    changed); with ``regs`` also the view's instruction registers, into core ``k``'s bank (a register
    fault). The data regions keep their addresses. Raises ProgramError when a valid Program's
    instructions do not fit before its first data region or no longer encode."""
    first, count = p.windows[k]
    insns = list(p.insns[:first]) + list(view.insns) + list(p.insns[first + count:])
    _, windows = concat_streams([list(view.insns) if j == k else p.core_insns(j) for j in range(p.num_cores)])
    shift = len(view.insns) - count
    pt = {j if j < first else j + shift: w for j, w in getattr(p, "patches", {}).items()
          if not first <= j < first + count}
    pt.update({first + j: w for j, w in getattr(view, "patches", {}).items()})
    regions = [Region(r.name, r.role, r.addr, (len(insns) * INSN_BYTES,), r.dtype) if r.role == "insn" else r
               for r in p.regions]
    faulty = bool(pt) or isinstance(p, PatchedProgram) or isinstance(view, PatchedProgram)
    if not faulty:
        return Program.create(p.config, insns, regions, name=p.name, meta=p.meta, inputs=p.inputs,
                              windows=windows, check_tokens=False)  # a core's fault may unbalance it
    new_regs = make_regs(p.config, regions, windows)
    if regs:
        mine = {csr.core_reg(n, k, p.config.num_cores): v for n, v in view.regs if n.startswith("INSN_")}
        new_regs = [(n, mine.get(n, v)) for n, v in new_regs]
    q = Program(p.config, insns, regions, new_regs, p.name, dict(p.meta), dict(p.inputs), {}, windows)
    return patched(q, pt)


def per_core(gen: Callable[[Program], Iterator[Program]]) -> Callable[[Program], Iterator[Program]]:
    """A one-core candidate generator of the shrinker (``campaign._deletions``, ...) made to walk every
    core of a Program of several cores: each candidate changes one core's stream."""
    def walk(p: Program) -> Iterator[Program]:
        for k in range(p.num_cores):
            for c in gen(core_view(p, k)):
                try:
                    yield replace_core(p, k, c)
                except ValueError:  # ProgramError, IsaError: a candidate that cannot be built is skipped
                    continue
    return walk


# ---- faults ---------------------------------------------------------------------------------------
def inject_multicore(p: Program, kind: str, rng: np.random.Generator) -> tuple[Program, int, int] | None:
    """A copy of ``p`` with one fault of ``kind`` in a random core: ``(program, expected error code, the
    core at fault)``, or None when no core has an instruction this kind fits. ``skip_barrier``: core k
    misses its j-th BARRIER (replaced by a compute no-op with its tokens) and, when its stream would race
    on its own buffers without it, every instruction after it is made a no-op too, so the run is the
    same on every model until some core waits at a BARRIER core k never reaches (``ERR_BARRIER``)."""
    n = p.num_cores
    for k in [int(c) for c in rng.permutation(n)]:
        if kind == "skip_barrier":
            got = _skip_barrier(p, k, rng)
            if got is not None:
                return got, csr.ERR_BARRIER, k
            continue
        view = core_view(p, k)
        got = inject(view, kind, rng)
        if got is not None:
            return replace_core(p, k, got[0], regs=kind == "insn_range"), got[1], k
    return None


def _noop(i: Instruction) -> Instruction:
    """``i`` made to touch nothing (its tokens kept)."""
    if isinstance(i, Load):
        return dataclasses.replace(i, y_size=0, y_pad_0=0, y_pad_1=0, x_pad_0=0, x_pad_1=0)
    if isinstance(i, Store):
        return dataclasses.replace(i, y_size=0)
    if isinstance(i, (Alu, Gemm)):
        return dataclasses.replace(i, iter_out=0)
    if isinstance(i, Barrier):
        return Alu(iter_out=0, **{f: getattr(i, f) for f in DEP_FLAGS})
    return i


def _skip_barrier(p: Program, k: int, rng: np.random.Generator) -> Program | None:
    view = core_view(p, k)
    bars = [j for j, i in enumerate(view.insns) if isinstance(i, Barrier)]
    if not bars:
        return None
    j = int(rng.choice(bars))
    insns = list(view.insns)
    insns[j] = _noop(insns[j])
    if check_program(insns, view.config, dram=view.dram_image()) is not None:
        insns = insns[:j + 1] + [_noop(i) for i in insns[j + 1:]]
    return replace_core(p, k, dataclasses.replace(view, insns=insns))
