"""The mutation campaign: sample mutants, build the schemata once, run the regression per mutant.

The regression of a mutant is the shipped examples (the ``large`` ones left out, some with a
BARRIER or a stream starting half a line in), a fuzz slice (random Programs, a share with an
injected fault, some aimed at one unit), the hand-built edge Programs, and the cheapest of these
run twice without a reset, soft-reset midway and restarted, all on the raw Verilator harness with
``+MUT=K``. The expected result of each Program is the run of the same build with ``+MUT=0`` (the
original design), which is first checked against the golden outputs and the TLM (outputs, error
code and pc, cycles, counters), or for the run-twice and reset variants against the single run
of their Program: those checks stand behind every comparison.

A mutant is killed by the first Program whose outputs, error, cycles or counters differ from the
expected ones, that hits the watchdog (the expected cycles plus a margin: any longer run differs
anyway), or that the harness cannot finish; a schemata that does not build kills nothing and
stops the campaign (it is a bug of the generator). The mutants run as cluster tasks
(:func:`cosim.cluster.run_tasks`), a chunk of mutants per task.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from hw.config import HwConfig, load_config
from hw.program import Program
from hw.result import RunResult
from cosim.mutation.edge_programs import edge_programs
from cosim.mutation.points import KINDS, Mutant, MutationError, scan_rtl
from cosim.mutation.schemata import PLUSARG, schemata_id, write_schemata

MEM = "verilog"                   # the raw harness's faster memory variant
WATCHDOG_MARGIN = 2000            # cycles over the expected run before a mutant's run counts as hung
DEFAULT_COUNT = 200
DEFAULT_FUZZ = 50
DEFAULT_FAULTS = 50
DEFAULT_CHUNK = 10
DEFAULT_AIMED = 12                # fuzz Programs with a fault aimed at one unit
AIMED_BASE = 1_000_000            # their case indices: past any campaign's own
DEFAULT_TWICE = 24                # Programs also run twice, reset midway and restarted midway
TWICE_SLACK = 8                   # cycles the second run may be shorter than a run after reset (START's write)
REWRITE_MIN_CYCLES = 200          # the shortest run rewritten midway (still busy at the last START)
RESTART_POINTS = 7                # more soft-reset-and-restart points of each plain run-twice Program
SETTLE_WRITES = 64                # idle writes after a SOFT_RESET (3 cycles each): the aborted burst ends
TWICE_CYCLES = 20000              # the longest Program run twice (its idle writes cost harness time)


def mutation_root() -> Path:
    """``<repo>/build/mutation``, or under ``COSIM_BUILD_DIR`` (the build root every tool uses)."""
    from cosim.models import build_root

    return build_root() / "mutation"


def repo_rtl() -> Path:
    """The RTL folder of this checkout."""
    from hw.introspect.parse import RTL_DIR

    return Path(RTL_DIR)


# ---- choosing mutants ---------------------------------------------------------------------------
def draw_rank(m: Mutant, seed: int) -> str:
    """Where mutant ``m`` comes in the draw with ``seed``: a hash of its stable key, so its place
    depends on what it is, never on how many mutants come before it in the RTL."""
    return hashlib.sha256(f"{seed}\0{m.key}".encode()).hexdigest()


def sample(mutants: list[Mutant], count: int, seed: int) -> list[Mutant]:
    """``count`` mutants drawn with ``seed``: every module's first in the draw (so each module has at
    least one), then the first in the draw over all modules; returned in source order (files as in
    sources.txt).

    The draw ranks each mutant by a hash of its stable key (:func:`draw_rank`), so an RTL edit only
    changes the sample where it changes mutants: those of the edited lines leave or enter it, and
    each one entering (leaving) pushes out (lets in) the last (next) one of the draw, since the count
    is fixed. Nothing else moves."""
    if count >= len(mutants):
        return list(mutants)
    order = {m.key: n for n, m in enumerate(mutants)}
    ranked = sorted(mutants, key=lambda m: draw_rank(m, seed))
    firsts: dict[str, Mutant] = {}
    for m in ranked:
        firsts.setdefault(m.module, m)
    # more modules than mutants asked for: the modules whose first comes earliest in the draw
    chosen = {m.key for m in sorted(firsts.values(), key=lambda m: draw_rank(m, seed))[:count]}
    for m in ranked:
        if len(chosen) >= count:
            break
        chosen.add(m.key)
    return sorted((m for m in mutants if m.key in chosen), key=lambda m: order[m.key])


# ---- the regression's Programs --------------------------------------------------------------------
def with_barrier(p: Program) -> Program | None:
    """``p`` with a BARRIER after its middle STORE (None when the longer stream would not fit before
    the next region). The fuzz generator makes no BARRIER and the compiler emits them only for
    several cores, so without these the BARRIER logic of a one-core config would go unchecked."""
    import dataclasses

    from hw.isa import Barrier, Store
    from hw.program import ProgramError

    ks = [k for k, i in enumerate(p.insns) if isinstance(i, Store)]
    if not ks or p.config.num_cores != 1:
        return None
    k = ks[len(ks) // 2] + 1
    insns = p.insns[:k] + [Barrier()] + p.insns[k:]
    regions = [dataclasses.replace(r, shape=(len(insns) * 16,)) if r.role == "insn" else r for r in p.regions]
    try:
        return Program.create(p.config, insns, regions, name=f"{p.name}-barrier", inputs=p.inputs,
                              expected=p.expected)
    except ProgramError:
        return None


def is_plain(p: Program) -> bool:
    """A one-core Program without an injected fault or a scratch region: a variant of it (another
    start address) must give exactly its results."""
    return not getattr(p, "patches", None) and "fault" not in p.meta and \
        not any(r.role == "scratch" for r in p.regions) and p.config.num_cores == 1


def with_offset_start(p: Program) -> Program | None:
    """``p`` with its instruction window starting one instruction (16 bytes) into its region: a copy
    of the first instruction is put in front and INSN_ADDR_LO points past it (None when the longer
    region would not fit before the next one). Every other Program's stream starts 32-byte aligned,
    so without these the fetch logic's handling of a half-line start would go unchecked."""
    import dataclasses

    from hw.isa import INSN_BYTES
    from hw.program import ProgramError

    if not is_plain(p):
        return None
    insns = [p.insns[0]] + p.insns
    regions = [dataclasses.replace(r, shape=(len(insns) * INSN_BYTES,)) if r.role == "insn" else r
               for r in p.regions]
    try:
        q = Program.create(p.config, insns, regions, name=f"{p.name}-offset", inputs=p.inputs,
                           expected=p.expected)
    except ProgramError:
        return None
    base = p.region_by_role("insn").addr
    q.regs = [(n, base + INSN_BYTES if n == "INSN_ADDR_LO" else len(p.insns) if n == "INSN_COUNT" else v)
              for n, v in q.regs]
    return q


def run_twice(p: Program, cycles: int) -> Program | None:
    """``p`` started, then started again without a reset once the first run is done: the register
    config is written, START, then ``cycles // 2`` idle writes (INSN_COUNT with its own value; an
    AXI4-Lite write takes at least two cycles) and START again. The second run must give what a
    run after reset gives (outputs, error, CYCLES, counters), so every state a run leaves behind
    that START (core_clr) fails to clear shows; the harness resets before every Program, so
    without these the clear paths would go unchecked. Faulty Programs are welcome (an error stops
    the units midway); Programs with a scratch region are not (the second run reads the first's)."""
    if any(r.role == "scratch" for r in p.regions) or p.config.num_cores != 1:
        return None
    setup, start = p.regs[:-1], p.regs[-1]
    count = next(v for n, v in reversed(setup) if n == "INSN_COUNT")
    q = copy_program(p, f"{p.name}-twice")
    q.regs = setup + [start] + [("INSN_COUNT", count)] * (cycles // 2 + 8) + [start]
    return q


def restart_midway(p: Program, cycles: int, at: float = 1 / 3) -> Program | None:
    """``p`` started, soft-reset ``at`` (a fraction) of the way through its run and started again at once (the
    next write), while the port still finishes the burst the reset caught: the aborted burst must
    neither reach the restarted units nor write DRAM (WSTRB 0). Its timing has no model, so only the
    outputs and the error are checked against a run after reset; cycles and counters are compared
    with the original design's run like every other Program's. Same Programs as :func:`run_twice`."""
    from hw import csr

    if any(r.role == "scratch" for r in p.regions) or p.config.num_cores != 1:
        return None
    setup, start = p.regs[:-1], p.regs[-1]
    count = next(v for n, v in reversed(setup) if n == "INSN_COUNT")
    q = copy_program(p, f"{p.name}-restart-midway" + ("" if at == 1 / 3 else f"-{round(at * 100)}"))
    q.regs = setup + [start] + [("INSN_COUNT", count)] * int(cycles * at / 3) + \
        [("CTRL", csr.CTRL_SOFT_RESET), start]
    return q


def reset_midway(p: Program, cycles: int) -> Program | None:
    """``p`` started, soft-reset about halfway through its run (``cycles`` // 6 idle writes after START),
    left ``SETTLE_WRITES`` idle writes for the port to finish the burst it was in, and started again:
    the second run must give what a run after a hardware reset gives. SOFT_RESET may come at any
    point of a run (docs/microarch.md), so every unit's clear path and the port's abort are exercised
    with work under way; the harness never writes it otherwise. Same Programs as :func:`run_twice`."""
    from hw import csr

    if any(r.role == "scratch" for r in p.regions) or p.config.num_cores != 1:
        return None
    setup, start = p.regs[:-1], p.regs[-1]
    count = next(v for n, v in reversed(setup) if n == "INSN_COUNT")
    idle = ("INSN_COUNT", count)
    q = copy_program(p, f"{p.name}-reset-midway")
    q.regs = setup + [start] + [idle] * (cycles // 6) + [("CTRL", csr.CTRL_SOFT_RESET)] + \
        [idle] * SETTLE_WRITES + [start]
    return q


def window_rewritten_midway(p: Program, cycles: int) -> Program | None:
    """``p`` with INSN_ADDR_HI set to 1 a few writes after START, then START written again (START must
    be the last write): the instruction window is checked once, at START (docs/microarch.md
    "Control"), and a START while the accelerator is busy is ignored, so the run must give what it
    gives untouched (but for INSN_ADDR_HI read back). None for a run too short to be still busy
    (under ``REWRITE_MIN_CYCLES``)."""
    if cycles < REWRITE_MIN_CYCLES or p.config.num_cores != 1:
        return None
    setup, start = p.regs[:-1], p.regs[-1]
    count = next(v for n, v in reversed(setup) if n == "INSN_COUNT")
    q = copy_program(p, f"{p.name}-window-rewritten")
    q.regs = setup + [start] + [("INSN_COUNT", count)] * 4 + [("INSN_ADDR_HI", 1), start]
    return q


def reset_with_start(p: Program, cycles: int) -> Program | None:
    """As :func:`reset_midway`, but the midway write sets SOFT_RESET and START together: SOFT_RESET wins
    and the START of that write is ignored (docs/microarch.md), so the Program runs only from the last
    START, as after a hardware reset. Same Programs as :func:`run_twice`."""
    from hw import csr

    q = reset_midway(p, cycles)
    if q is None:
        return None
    q.name = f"{p.name}-reset-with-start"
    k = next(n for n, (r, v) in enumerate(q.regs) if r == "CTRL" and v == csr.CTRL_SOFT_RESET)
    q.regs[k] = ("CTRL", csr.CTRL_SOFT_RESET | csr.CTRL_START)
    return q


def reset_then_finish(p: Program, cycles: int, at: float) -> Program | None:
    """``p`` soft-reset ``at`` (a fraction) of the way through its run, then, after ``SETTLE_WRITES`` idle
    writes, started on a window of its last instruction alone (FINISH): DRAM keeps what the first run
    wrote before the reset and nothing else, so a burst the reset aborted must not write DRAM (its
    remaining W beats go out with WSTRB 0); a restart of the whole Program would rewrite it and hide
    that. The output regions start filled with 0xA5 bytes (an aborted beat carries zeros, which would
    not show on a zeroed region). Only plain Programs ending with FINISH; the outputs have no model
    (they are the original design's), the run must end without an error."""
    from hw import csr
    from hw.isa import INSN_BYTES, Finish

    if not is_plain(p) or not p.insns or not isinstance(p.insns[-1], Finish):
        return None
    setup, start = p.regs[:-1], p.regs[-1]
    count = next(v for n, v in reversed(setup) if n == "INSN_COUNT")
    lo = next(v for n, v in reversed(setup) if n == "INSN_ADDR_LO")
    idle = ("INSN_COUNT", count)
    writes = int(cycles * at / 3)
    q = copy_program(p, f"{p.name}-reset-then-finish-w{writes}")
    q.inputs = dict(p.inputs)
    for r in p.regions:
        if r.role == "output":
            q.inputs[r.name] = np.frombuffer(b"\xa5" * r.nbytes, dtype=r.dtype).reshape(r.shape)
    q.regs = setup + [start] + [idle] * writes + [("CTRL", csr.CTRL_SOFT_RESET)] + \
        [idle] * SETTLE_WRITES + [("INSN_ADDR_LO", lo + (count - 1) * INSN_BYTES), ("INSN_COUNT", 1), start]
    return q


def stalled_restart_sweep(p: Program, cycles: int) -> list[Program]:
    """``p`` on the C++ DRAM model with READY backpressure (no error response), soft-reset and started
    again (:func:`restart_midway`) after each of its first ``cycles * STALL_SWEEP // 3 + 1`` register
    writes (an idle write is 3 cycles; the stalled run is longer than ``cycles``, the plain run's). Some
    reset catches a STORE's W burst with beats left that WREADY stretches past the START written next:
    those beats belong to no unit of the restarted run and must count nowhere (DMA_WR_BYTES). Outputs
    and error must be the plain run's (see :func:`restart_midway`)."""
    stalled = with_dram_mode(p, (DRAM_STALL_SEED, 0, -1, -1), "stall")
    out = []
    for w in range(1, cycles * STALL_SWEEP // 3 + 2):
        q = restart_midway(stalled, cycles, (w + 0.5) * 3 / cycles)
        if q is not None:
            q.name = f"{p.name}-stall-restart-w{w}"
            out.append(q)
    return out


def overlapped_writes(p: Program) -> Program | None:
    """``p`` with every register write but CTRL's as two half-word writes outstanding together
    (``PAIR_CSR_MODE``): the second's W is offered while the CSR block still holds the first's, so a
    W taken without WREADY would overwrite it. The run from START is the same (every check applies)."""
    if not is_plain(p):
        return None
    q = copy_program(p, f"{p.name}-csr-pair")
    q.csr_mode = PAIR_CSR_MODE  # type: ignore[attr-defined]
    return q


def register_probe(p: Program, cycles: int) -> Program | None:
    """``p`` with register writes a driver never makes before its START: a write to each register of the
    region slot one past ``max_regions`` (outside the map: the decoder must ignore it, not alias a
    slot), then the window moved one instruction on and one shorter (INSN_ADDR_LO + 16, INSN_COUNT - 1),
    CTRL with neither START nor SOFT_RESET (it must not start a run of that window) and the window
    back. A wrong start would fetch from the moved address (latched at START) and be busy at the real
    START, which is then ignored. The run must be the Program's own in every respect (all the slave's
    responses are OKAY). None for a one-instruction stream."""
    from hw import csr
    from hw.isa import INSN_BYTES

    setup, start = p.regs[:-1], p.regs[-1]
    count = next(v for n, v in reversed(setup) if n == "INSN_COUNT")
    lo = next(v for n, v in reversed(setup) if n == "INSN_ADDR_LO")
    if count < 2:
        return None
    past = csr.REGION_BASE_ADDR + csr.REGION_STRIDE * int(p.config.max_regions)
    q = copy_program(p, f"{p.name}-register-probe")
    # past-the-end BASE / SIZE / ATTR: an aliased slot would move, shrink and lock a live region
    q.regs = setup + [(past, 0xFFFF0000), (past + 4, 16), (past + 8, 0),  # type: ignore[list-item]
                      ("INSN_ADDR_LO", lo + INSN_BYTES), ("INSN_COUNT", count - 1), ("CTRL", 0),
                      ("INSN_ADDR_LO", lo), ("INSN_COUNT", count), start]
    return q


def region0_writable(p: Program, cycles: int) -> Program | None:
    """``p`` with REGION0_ATTR made writable (ATTR_WRITE added) just before START, for a plain Program
    whose region 0 is not: nothing of a plain Program writes there, so the run must be its own in every
    respect but REGION0_ATTR read back. Every Program puts its instruction region (read-only) first, so
    without these region 0's write bit would always read 0. None when it is writable already."""
    from hw import csr

    if not is_plain(p):
        return None
    setup, start = p.regs[:-1], p.regs[-1]
    attr = next((v for n, v in reversed(setup) if n == "REGION0_ATTR"), None)
    if attr is None or attr & csr.ATTR_WRITE:
        return None
    q = copy_program(p, f"{p.name}-region0-writable")
    q.regs = setup + [("REGION0_ATTR", attr | csr.ATTR_WRITE), start]
    return q


def bank_reads(cfg: HwConfig) -> list[int]:
    """CSR addresses read by address after every run: the three registers of the region slot one past
    ``max_regions`` (outside the map: the decoder must read 0 there, not alias a slot), and on a
    one-core config (whose map names no bank) every word of core 0's bank and of the absent core 1's,
    so the bank read path (hit, miss, offsets past the counters) is checked there too (on several cores
    the banks are in the map)."""
    from hw import csr

    past = csr.REGION_BASE_ADDR + csr.REGION_STRIDE * int(cfg.max_regions)
    out = [past, past + 4, past + 8]
    if cfg.num_cores > 1:
        return out
    return out + [csr.CORE_BANK_BASE + a for a in range(0, 2 * csr.CORE_BANK_STRIDE, 4)]


# AXI4-Lite bus patterns (AW delay, W delay, BREADY delay, split in two half-strobed writes) given in turn
# to every other plain fuzz Program: the register file must take a write however its channels come
# the AXI4-Lite write patterns of every other plain fuzz Program (AW delay, W delay, BREADY delay, split;
# testbench.raw.harness.run); PAIR_CSR_MODE keeps two writes outstanding, the second's W offered while
# the slave still holds the first's (AW three cycles after W)
PAIR_CSR_MODE = (3, 0, 0, 2)
CSR_MODES = ((2, 0, 1, 0), (0, 3, 0, 1), (1, 1, 4, 0), (0, 0, 2, 1), (5, 2, 0, 1), PAIR_CSR_MODE)


def copy_program(p: Program, name: str) -> Program:
    """A shallow copy of ``p`` (its class and extra attributes, such as a fuzz Program's patches) named
    ``name``."""
    import copy

    q = copy.copy(p)
    q.name = name
    q.meta = dict(p.meta)
    q.regs = list(p.regs)
    return q


AIMED_FAULTS = (("sram_range", "load"), ("sram_range", "store"), ("deadlock", "finish"))


def aimed_fault_programs(cfg: HwConfig, count: int, fuzz_seed: int) -> list[Program]:
    """``count`` fuzz Programs (indices past the campaign's) with a fault aimed at one unit, in turn: a
    LOAD's or a STORE's tile one entry past its buffer (the WAIT-time range checks of those units) or
    FINISH popping a token that never comes (the deadlock detector); the fuzz campaign's random faults
    hit these rarely. A Program where the fault does not fit is skipped."""
    from cosim.fuzz.campaign import case_seed
    from cosim.fuzz.faults import inject
    from cosim.fuzz.generator import generate

    out = []
    for n in range(count):
        s = case_seed(fuzz_seed, AIMED_BASE + n)
        kind, unit = AIMED_FAULTS[n % len(AIMED_FAULTS)]
        prog = generate(cfg, s, name=f"aimed-{cfg.name}-s{fuzz_seed}-{n}")
        got = inject(prog, kind, np.random.default_rng([s, 7]), unit)
        if got is not None:
            fp = got[0]
            fp.name, fp.meta = f"{prog.name}-{kind}-{unit}", dict(prog.meta, fault=kind)
            out.append(fp)
    return out


def regression_programs(cfg: HwConfig, fuzz: int, fuzz_seed: int, examples: list[str] | None = None,
                        faults: int = 0, barriers: int = 4, offsets: int = 4, aimed: int = 0,
                        edges: bool = False) -> list[Program]:
    """The shipped examples (not the ``large`` ones; or only ``examples``) compiled for ``cfg``, then
    up to ``barriers`` of them with a BARRIER added (:func:`with_barrier`), up to ``offsets`` with
    the stream starting half a line in (:func:`with_offset_start`), then ``fuzz`` fuzz
    Programs of the campaign seeded ``fuzz_seed`` (a fifth with an injected fault), then ``faults``
    more of that campaign that all carry a fault (the error paths are much of the logic), then ``aimed``
    with a fault aimed at a unit (:func:`aimed_fault_programs`) and, with ``edges``, the hand-built
    edge Programs (:mod:`cosim.mutation.edge_programs`)."""
    from compiler.examples import get_example, list_examples, make_case as example_case
    from cosim.fuzz.campaign import make_case as fuzz_case

    out = []
    for name in list_examples() if examples is None else examples:
        if examples is None and get_example(name).large:
            continue
        p = example_case(name, cfg, seed=0).program
        p.name = f"ex-{name}"
        out.append(p)
    n_ex = len(out)
    for p in out[:n_ex]:
        if len(out) - n_ex >= barriers:
            break
        b = with_barrier(p)
        if b is not None:
            out.append(b)
    n_bar = len(out)
    for p in out[:n_ex]:
        if len(out) - n_bar >= offsets:
            break
        o = with_offset_start(p)
        if o is not None:
            out.append(o)
    for i in range(fuzz):
        q = fuzz_case(cfg, fuzz_seed, i).program
        if i % 2 and is_plain(q):  # write timing only: the run from START is the same (the TLM checks it)
            q.csr_mode = CSR_MODES[(i // 2) % len(CSR_MODES)]  # type: ignore[attr-defined]
        out.append(q)
    for i in range(fuzz, fuzz + faults):
        out.append(fuzz_case(cfg, fuzz_seed, i, fault_rate=1.0).program)
    return out + aimed_fault_programs(cfg, aimed, fuzz_seed) + (edge_programs(cfg) if edges else [])


def run_raw(p: Program, cfg: HwConfig, rtl: Path, k: int, limit: int | None = None) -> RunResult:
    """Mutant ``k``'s run of ``p`` on the raw harness, every CSR read before and after, with the
    Program's harness variation: its AXI4-Lite bus pattern (``csr_mode``) and, for a DRAM variant
    (``dram_mode``: backpressure, injected error responses), the C++ DRAM model (its own build)."""
    from cosim import models

    reads = readable_csrs(cfg)
    dram_mode = getattr(p, "dram_mode", None)
    return models.raw(p, cfg, mem=MEM if dram_mode is None else DRAM_VARIANT_MEM, limit=limit, rtl=rtl,
                      plusargs=[f"+{PLUSARG}={k}"], reads=reads, pre_reads=reads, addr_reads=bank_reads(cfg),
                      csr_mode=getattr(p, "csr_mode", None), dram_mode=dram_mode)


def with_dram_mode(p: Program, mode: tuple[int, int, int, int], tag: str) -> Program:
    """``p`` run on the C++ DRAM model with ``mode`` = (stall seed, error response, read burst, write
    burst) (see :func:`testbench.raw.harness.run`)."""
    q = copy_program(p, f"{p.name}-{tag}")
    q.dram_mode = mode  # type: ignore[attr-defined]
    return q


# the DRAM variants of the plain examples run twice and of the first STALLED fuzz Programs: READY
# backpressure (outputs and error as without), and error responses injected on a chosen burst (the
# first read burst is the instruction fetch's, later ones a LOAD's or the fetch's, the first write
# burst a STORE's): the run must end in AXI_RESP (or no error when the Program has fewer bursts)
DRAM_STALL_SEED = 0x9E3779B9
DRAM_ERRORS = (("err-r0", (0, 2, 0, -1)), ("err-r2", (0, 3, 2, -1)), ("err-r5", (DRAM_STALL_SEED, 2, 5, -1)),
               ("err-w0", (0, 2, -1, 0)), ("err-w1", (DRAM_STALL_SEED, 3, -1, 1)))
STALLED = 10
DRAM_VARIANT_MEM = "cpp"
LATE_ERROR = (0, 2, 1, -1)        # SLVERR on read burst 1 (the fetch's second): after the edge Program's error
ORPHAN_CSR_MODE = (0, 0, 1, False)  # the slow sweep's register writes: BREADY a cycle late (4 cycles a write)
ORPHAN_ERROR = 1                  # the DRAM error of the restart sweep: DECERR on read burst 2 (DRAM_ERRORS)
SWEEP_CYCLES = 1000               # the longest Program soft-reset at every write of its last third
STALL_SWEEP = 2                   # the backpressured restart sweep covers this many times the plain run


def readable_csrs(cfg: HwConfig) -> list[str]:
    """Every readable CSR: read after reset (before the Program's writes) and after each run, so a
    broken register, reset value or read path shows."""
    from hw import csr

    return [n for n, c in csr.csrs_of(cfg).items() if c.access != "wo"]


def signature(r: RunResult) -> dict[str, Any]:
    """What a mutant's run must reproduce: output digests, error (code, pc), cycles, counters."""
    outs = {}
    for n in sorted(r.outputs):
        a = np.ascontiguousarray(r.outputs[n])
        outs[n] = hashlib.sha256(f"{a.dtype}{a.shape}".encode() + a.tobytes()).hexdigest()[:16]
    err = None if r.error is None else [r.error.get("name"), r.error.get("code"), r.error.get("pc")]
    return {"outputs": outs, "error": err, "cycles": r.cycles, "counters": dict(sorted(r.counters.items())),
            "cores": r.extra.get("cores"), "csrs": r.extra.get("csrs"), "csrs_at": r.extra.get("csrs_at"), "csrs_before": r.extra.get("csrs_before"),
            "csr_resp": r.extra.get("csr_resp"), "axi_ids": r.extra.get("axi_ids"),
            "axi_attrs": r.extra.get("axi_attrs")}


def difference(expected: dict[str, Any], got: dict[str, Any]) -> str | None:
    """The first difference of two signatures in words, or None when they are equal."""
    if got["error"] != expected["error"]:
        return f"error {got['error']} != expected {expected['error']}"
    for n, h in expected["outputs"].items():
        if got["outputs"].get(n) != h:
            return f"output {n} differs"
    if got["cycles"] != expected["cycles"]:
        return f"cycles {got['cycles']} != {expected['cycles']}"
    for k, v in expected["counters"].items():
        if got["counters"].get(k) != v:
            return f"counter {k} {got['counters'].get(k)} != {v}"
    if got["cores"] != expected["cores"]:
        return "per-core counters differ"
    if got.get("axi_ids") != expected.get("axi_ids"):
        return f"AXI IDs (ARID | AWID) {got.get('axi_ids')} != {expected.get('axi_ids')}"
    if got.get("axi_attrs") != expected.get("axi_attrs"):
        return f"AXI attributes ({{LOCK, CACHE, PROT}} of AR | AW << 8) {got.get('axi_attrs')} != {expected.get('axi_attrs')}"
    if got.get("csr_resp") != expected.get("csr_resp"):
        return f"AXI4-Lite responses (BRESP, RRESP OR-ed) {got.get('csr_resp')} != {expected.get('csr_resp')}"
    for when in ("csrs_before", "csrs", "csrs_at"):
        for k, v in (expected.get(when) or {}).items():
            if (got.get(when) or {}).get(k) != v:
                at = "after reset" if when == "csrs_before" else "after the run" + (" (by address)" if when == "csrs_at" else "")
                return f"CSR {k} {at} {(got.get(when) or {}).get(k)} != {v}"
    return None


def check_baseline(program: Program, res: RunResult) -> list[str]:
    """How the original design's run (K=0) disagrees with the golden outputs and the TLM (empty: agrees)."""
    from cosim import models
    from cosim.fuzz.campaign import compare, compare_timing

    faulty = bool(getattr(program, "patches", None)) or "fault" in program.meta
    tlm = models.tlm(program)
    probs = compare(tlm, res, faulty)
    if not probs and res.error is None:
        probs += compare_timing(tlm, res)
        if program.expected:
            mm = models.first_mismatch(program.expected, res.outputs)
            if mm:
                probs.append(f"golden vs rtl: {mm}")
    return [f"{program.name}: {p}" for p in probs]


# ---- one campaign's files ---------------------------------------------------------------------------
@dataclass
class Setup:
    """The prepared campaign: the schemata folder, its build and the expected results."""

    config: HwConfig
    mutants: list[Mutant]
    root: Path              # build/mutation/<config>-<id>/
    rtl: Path               # the schemata RTL copy
    programs: Path          # pickled list of Programs (fuzz Programs with faults cannot be saved as folders)
    expected: Path          # JSON: [signature, sim_cycles] per Program
    build_s: float
    baseline_s: float

    def task_args(self, ks: list[int]) -> dict[str, Any]:
        # the file the config came from: a config given by path loads on the workers too
        cfg = self.config.source if Path(self.config.source).is_file() else self.config.name
        return {"config": cfg, "rtl": str(self.rtl), "programs": str(self.programs),
                "expected": str(self.expected), "mutants": ks}


def prepare(config: str, count: int, seed: int, fuzz: int = DEFAULT_FUZZ, faults: int = DEFAULT_FAULTS,
            fuzz_seed: int | None = None, barriers: int = 4, offsets: int = 4, twice: int = DEFAULT_TWICE,
            aimed: int = DEFAULT_AIMED, edges: bool = True,
            rtl_dir: Path | None = None, check: bool = True, mutants: list[Mutant] | None = None,
            examples: list[str] | None = None) -> Setup:
    """Scan, sample, write and build the schemata; compile the Programs; run K=0 for the expected results.

    ``mutants`` skips the scan and sampling (a given list, e.g. in tests); ``examples`` names the
    examples of the regression (default: every shipped one but the large). With ``check`` the K=0
    runs are compared with the golden outputs and the TLM first (a MutationError when they differ).
    """
    from cosim import models

    cfg = load_config(config)
    rtl_dir = Path(rtl_dir or repo_rtl())
    if mutants is None:
        mutants = sample(scan_rtl(rtl_dir), count, seed)
    if not mutants:
        raise MutationError("no mutants to run")
    sid = schemata_id(rtl_dir, mutants)
    root = mutation_root() / f"{cfg.name}-{sid}"
    root.mkdir(parents=True, exist_ok=True)
    rtl = root / "rtl"
    stamp = root / "rtl.stamp"
    if not (stamp.is_file() and stamp.read_text() == sid):
        write_schemata(rtl_dir, rtl, mutants)
        stamp.write_text(sid)
    (root / "mutants.json").write_text(json.dumps([m.to_json() for m in mutants], indent=1) + "\n")
    t0 = time.perf_counter()
    models.raw_build(cfg, MEM, rtl=rtl)   # the C++ DRAM model's build comes with the first DRAM variant's run
    build_s = time.perf_counter() - t0

    fs = seed if fuzz_seed is None else fuzz_seed
    tag = f"f{fuzz}-e{faults}-b{barriers}-o{offsets}-t{twice}r{RESTART_POINTS}wsf3p1s{STALL_SWEEP}o-c{len(DRAM_ERRORS)}d{STALLED}-c{len(CSR_MODES)}-a{aimed}-s{fs}-r4"
    if edges:  # the edge Programs change with their module: their names and instructions name the files
        sig = repr([(p.name, p.insns) for p in edge_programs(cfg)])
        tag += "-x" + hashlib.sha256(sig.encode()).hexdigest()[:8]
    if examples is not None:
        tag += "-" + hashlib.sha256(",".join(examples).encode()).hexdigest()[:8]
    progs_file, exp_file = root / f"programs-{tag}.pkl", root / f"expected-{tag}.json"
    t0 = time.perf_counter()
    if not (progs_file.is_file() and exp_file.is_file()):
        programs = regression_programs(cfg, fuzz, fs, examples, faults, barriers, offsets, aimed, edges)
        expected, problems = [], []

        def baseline(p: Program) -> RunResult:
            r = run_raw(p, cfg, rtl, 0)
            expected.append([signature(r), int(r.extra.get("sim_cycles", 0))])
            return r

        for p in list(programs):
            r = baseline(p)
            if check:
                problems += check_baseline(p, r)
        # run twice without a reset (:func:`run_twice`): the cheapest quarter of the examples, the rest
        # faulty Programs (an error leaves the most state behind); cheapest first, each under TWICE_CYCLES
        cheap = sorted((n for n, p in enumerate(programs) if expected[n][1] <= TWICE_CYCLES),
                       key=lambda n: expected[n][1])
        faulty = [n for n in cheap if getattr(programs[n], "patches", None) or "fault" in programs[n].meta]
        plain = [n for n in cheap if programs[n].name.startswith("ex-")][:twice // 4]
        # the plain ones are also restarted at RESTART_POINTS more points of their runs: a soft reset that
        # catches a burst of each kind under way
        chosen = sorted(plain + faulty[:twice - len(plain)])
        jobs = [(n, v, None) for n in chosen for v in (run_twice, reset_midway, restart_midway, reset_with_start)]
        jobs += [(n, restart_midway, k / (RESTART_POINTS + 1)) for n in plain for k in range(1, RESTART_POINTS + 1)]
        jobs += [(n, window_rewritten_midway, None) for n in plain]
        # the register probe on the same cheapest examples (at least one: a small regression has no plain ones)
        probed = [n for n in cheap if programs[n].name.startswith("ex-")][:max(1, twice // 4)]
        jobs += [(n, register_probe, None) for n in probed]
        jobs += [(n, reset_then_finish, k / (RESTART_POINTS + 1)) for n in plain for k in range(1, RESTART_POINTS + 1)]
        # and, for the two cheapest, at every write of the last third of the run, where their STOREs are: a
        # soft reset that catches a W burst with beats left (an idle write is 3 cycles, a burst longer)
        jobs += [(n, reset_then_finish, (w + 0.5) * 3 / expected[n][1]) for n in [n for n in plain if programs[n].name.count("-") == 1
                                                                    and expected[n][1] <= SWEEP_CYCLES][:2]
                 for w in range(expected[n][1] * 2 // 9, expected[n][1] // 3 + 3)]
        jobs += [(n, region0_writable, None) for n in plain]
        # the cheapest example with an error response on read burst 2, soft-reset and restarted at every
        # write of its run: some reset catches that burst under way, which must go on as an orphan whose
        # error response is not the restarted run's error (and a reset on a cycle a unit requests the idle
        # port must grant it nothing)
        jobs += [(n, "orphan", w) for n in plain[:1] for w in range(1, expected[n][1] // 3 + 2)]
        # and again with the register writes of another length (an AXI4-Lite bus pattern): the reset
        # then lands on the other phases of the run's cycles (the burst timings are multiples of 3 too)
        jobs += [(n, "orphan-slow", w) for n in plain[:1] for w in range(1, expected[n][1] // 4 + 2)]
        # and once more on the C++ DRAM model with backpressure, no error (:func:`stalled_restart_sweep`)
        jobs += [(n, "orphan-stall", q) for n in plain[:1] for q in stalled_restart_sweep(programs[n], expected[n][1])]
        # the plain examples with two register writes outstanding at a time (:func:`overlapped_writes`)
        jobs += [(n, overlapped_writes, None) for n in plain]
        jobs += [(n, "late-error", None) for n, p in enumerate(programs) if p.name == "edge-error-before-fetch-ends"]
        stalled = [n for n, p in enumerate(programs) if is_plain(p) and p.name.startswith("fuzz-")][:STALLED]
        jobs += [(n, "stall", None) for n in plain + stalled]
        jobs += [(n, e, None) for n in plain for e in range(len(DRAM_ERRORS))]
        for n, variant, at in jobs:
            if variant == "stall":
                q = with_dram_mode(programs[n], (DRAM_STALL_SEED, 0, -1, -1), "stall")
            elif variant == "late-error":
                q = with_dram_mode(programs[n], LATE_ERROR, "err-r1")
            elif variant == "orphan-stall":
                q = at
            elif variant is overlapped_writes:
                q = overlapped_writes(programs[n])
            elif variant in ("orphan", "orphan-slow"):
                tag, mode = DRAM_ERRORS[ORPHAN_ERROR]
                q = restart_midway(with_dram_mode(programs[n], mode, tag), expected[n][1], (at + 0.5) * 3 / expected[n][1])
                if q is not None:
                    q.name = f"{programs[n].name}-{tag}-restart-w{at}" + ("-slow" if variant == "orphan-slow" else "")
                    if variant == "orphan-slow":
                        q.csr_mode = ORPHAN_CSR_MODE  # type: ignore[attr-defined]
            elif isinstance(variant, int):
                q = with_dram_mode(programs[n], DRAM_ERRORS[variant][1], DRAM_ERRORS[variant][0])
            else:
                q = variant(programs[n], expected[n][1]) if at is None else variant(programs[n], expected[n][1], at)
            if q is None:
                continue
            programs.append(q)
            baseline(q)
            if variant in ("orphan", "orphan-slow"):
                # burst 2 counts from reset: caught under way by the reset it is an orphan whose error must
                # not reach the restarted run (the plain run's outputs, no error); when the first run made
                # fewer bursts before the reset, it is the restarted run's own and ends it in AXI_RESP
                e, g = expected[n][0], expected[-1][0]
                why = (None if g["error"] is not None and g["error"][0] == "AXI_RESP" else
                       f"error {g['error']} != {e['error']}" if g["error"] != e["error"] else
                       "outputs differ" if g["outputs"] != e["outputs"] else None)
            elif variant in ("stall", "orphan-stall") or variant is restart_midway:
                # outputs and error only: backpressure ends the same run later; see restart_midway
                e, g = expected[n][0], expected[-1][0]
                why = (f"error {g['error']} != {e['error']}" if g["error"] != e["error"] else
                       "outputs differ" if g["outputs"] != e["outputs"] else None)
            elif variant == "late-error":  # the first error stays the error: the whole run is the same
                mem_only = dict(axi_ids=None, axi_attrs=None)   # recorded by the C++ DRAM model only
                why = difference(dict(expected[n][0], **mem_only), dict(expected[-1][0], **mem_only))
            elif isinstance(variant, int):  # an injected error response: AXI_RESP, or no error without that burst
                g = expected[-1][0]
                why = None if g["error"] is None or g["error"][0] == "AXI_RESP" else f"error {g['error']}"
            elif variant is reset_then_finish:  # DRAM is what the reset left: only a clean end is checked
                g = expected[-1][0]
                why = None if g["error"] is None else f"error {g['error']}"
            elif variant is window_rewritten_midway or variant is region0_writable:  # all but the CSRs read after the run
                why = difference(dict(expected[n][0], csrs=None, csrs_at=None), dict(expected[-1][0], csrs=None, csrs_at=None))
            elif (why := difference(expected[n][0], expected[-1][0])) is None and \
                    expected[-1][1] < expected[n][1] - TWICE_SLACK:
                why = f"the last START came {expected[n][1] - expected[-1][1]} cycles into the run before it"
            if check and why:
                problems.append(f"{q.name}: the last run differs from a run after a hardware reset: {why}")
        if problems:
            raise MutationError(f"the original design (+{PLUSARG}=0) disagrees with the golden outputs/TLM on "
                                f"{len(problems)} check(s); first: {problems[0]}")
        with open(progs_file, "wb") as f:
            pickle.dump(programs, f)
        exp_file.write_text(json.dumps(expected) + "\n")
    return Setup(cfg, mutants, root, rtl, progs_file, exp_file, build_s, time.perf_counter() - t0)


# ---- the task ---------------------------------------------------------------------------------------
def run_mutants(args: dict[str, Any]) -> dict[str, Any]:
    """Cluster task: run the regression on each mutant K of ``args["mutants"]``; stop a mutant at its
    first failing Program. Returns {"K": {"killed", "program", "why", "runs"}}."""
    cfg = load_config(args["config"])
    rtl = Path(args["rtl"])
    with open(args["programs"], "rb") as f:
        programs: list[Program] = pickle.load(f)
    expected = json.loads(Path(args["expected"]).read_text())
    # cheapest Programs first: most mutants die early
    order = sorted(range(len(programs)), key=lambda n: expected[n][1])
    out: dict[str, Any] = {}
    for k in args["mutants"]:
        verdict = {"killed": False, "program": None, "why": None, "runs": 0}
        for n in order:
            exp, cycles = expected[n]
            verdict["runs"] += 1
            try:
                r = run_raw(programs[n], cfg, rtl, k, limit=cycles + WATCHDOG_MARGIN)
                why = difference(exp, signature(r))
            except Exception as e:  # noqa: BLE001 - a harness that cannot finish the mutant's run kills it
                why = f"run failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            if why:
                verdict.update(killed=True, program=programs[n].name, why=why)
                break
        out[str(k)] = verdict
    return out


def tasks(setup: Setup, chunk: int = DEFAULT_CHUNK, only: list[int] | None = None) -> list[Any]:
    """The cluster tasks of a prepared campaign: ``chunk`` mutants each (``only``: these mutant numbers K
    of the sample, 1-based, e.g. the survivors of a previous campaign)."""
    from cosim.cluster import Task

    ks = list(range(1, len(setup.mutants) + 1)) if only is None else sorted(set(only))
    tag = f"{setup.root.name}-{setup.programs.stem}"
    return [Task(f"{tag}-m{ks[i]}-{ks[min(i + chunk, len(ks)) - 1]}", "cosim.mutation.campaign:run_mutants",
                 setup.task_args(ks[i:i + chunk])) for i in range(0, len(ks), chunk)]


# ---- the score ----------------------------------------------------------------------------------------
def score(setup: Setup, verdicts: dict[int, dict[str, Any]], equivalents: dict[str, str],
          only: list[int] | None = None) -> dict[str, Any]:
    """The report: counts, score, by module and by kind, survivors (with a reason when listed equivalent).

    ``equivalents`` maps a mutant's stable key to the reason it is equivalent (:func:`equivalents.reasons`).

    ``score`` is killed / (mutants - listed equivalent survivors); ``raw_score`` is killed / mutants.
    With ``only``, the mutants are those numbers (the others were not chosen: ``not_chosen``). A chosen
    mutant without a verdict (its task failed) counts as a survivor with ``why`` "not run".
    """
    by_module: dict[str, dict[str, int]] = {}
    by_kind: dict[str, dict[str, int]] = {k: {"mutants": 0, "killed": 0} for k in KINDS}
    survivors = []
    killed = equivalent = 0
    chosen = set(only) if only is not None else None
    for k, m in enumerate(setup.mutants, 1):
        if chosen is not None and k not in chosen:
            continue
        v = verdicts.get(k)
        dead = bool(v and v["killed"])
        for d in (by_module.setdefault(m.module, {"mutants": 0, "killed": 0}), by_kind[m.kind]):
            d["mutants"] += 1
            d["killed"] += dead
        if dead:
            killed += 1
            continue
        reason = equivalents.get(m.key)
        equivalent += reason is not None
        survivors.append({"k": k, "id": m.id, "key": m.key, "file": m.file, "line": m.line, "module": m.module, "kind": m.kind,
                          "change": m.change, "equivalent": reason, "why": None if v else "not run"})
    n = len(setup.mutants) if chosen is None else len(chosen & set(range(1, len(setup.mutants) + 1)))
    live = n - equivalent
    return {"config": setup.config.name, "mutants": n, "not_chosen": len(setup.mutants) - n,
            "killed": killed, "equivalent": equivalent,
            "score": round(killed / live, 4) if live else 1.0, "raw_score": round(killed / n, 4) if n else 1.0,
            "by_module": by_module, "by_kind": {k: v for k, v in by_kind.items() if v["mutants"]},
            "survivors": survivors}


def run_campaign(setup: Setup, *, chunk: int = DEFAULT_CHUNK, results: str | Path | None = None,
                 progress: bool = True, only: list[int] | None = None,
                 **cluster: Any) -> Iterator[dict[int, dict[str, Any]]]:
    """Run the tasks; yield the verdicts gathered so far after each task (the last yield has all)."""
    from cosim.cluster import run_tasks

    verdicts: dict[int, dict[str, Any]] = {}
    for rec in run_tasks(tasks(setup, chunk, only), results=results, progress=progress, desc="mutants", **cluster):
        if rec["ok"]:
            verdicts.update(_verdicts(rec))
        yield verdicts


def _verdicts(rec: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """A task record's verdicts, checked (a results file read back may hold anything)."""
    res = rec.get("result")
    out = {}
    for k, v in (res.items() if isinstance(res, dict) else [(None, None)]):
        if not (isinstance(k, str) and k.isdigit() and isinstance(v, dict) and isinstance(v.get("killed"), bool)
                and isinstance(v.get("runs", 0), int)):
            raise MutationError(f"results record {rec.get('key')!r}: {k!r}: {str(v)[:80]!r} is not a verdict "
                                f"(a mutant number and {{'killed': true or false, ...}})")
        out[int(k)] = v
    return out
