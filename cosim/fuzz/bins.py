"""Functional coverage of the ISA: the bins an architect asks a fuzz campaign about, with hit counts.

A bin is a name ``group.rest`` with an extractor that finds its hits in one fuzz case: the
Program the campaign ran (its instruction words decoded again with ``hw.isa``, every core's
stream, up to the faulting instruction when the run stopped on an error) plus what the runs
observed (the reference's error, the TLM's error with its unit and message, and the TLM's
read-only port observation ``extra["acc_ports"]``, ``cosim.models.tlm(observe_ports=True)``).
Groups (:data:`GROUPS`):

* ``insn``  opcode x dependency flags (x buffer for LOAD); ``alu``: ALU op x immediate or vector;
* ``loop``  ALU and GEMM loops of zero, one and many iterations (outer, inner);
* ``dma``   LOAD and STORE tiles: rows zero/one/many, ``x_stride`` equal to, above or below
  ``x_size``, rows of one burst, several, ending on a partial burst, split by or ending on a
  4 KiB boundary (the burst plan of docs/microarch.md "The DRAM port");
* ``pad``   LOAD padding on each side, padding only, the field's maximum, padded GEMM operands;
* ``gemm``  micro-op ranges (empty, one, many, the whole buffer) and the reset flag;
* ``raw``   read-after-write distance 1, 2 and >= 3 inside one ALU (destination and source
  operand) or GEMM instruction: the iteration reads an accumulator entry written that many
  iterations earlier (distance 1 is the forwarded one, docs/microarch.md);
* ``port``  cycles in which LOAD (data or padding write) or STORE (read) held an accumulator port
  during an ALU (vector operand), ALU (immediate) or GEMM EXECUTE: a wait of the compute unit, or
  for STORE's reads under an immediate ALU or a GEMM the overlap the port plan allows for free;
* ``error`` every error kind (``hw.csr.ERROR_NAMES``) on every unit that raises it, in its phase
  (START, dispatch, WAIT's checks, EXEC, a DMA burst), and whether the halt waited for a burst;
* ``core``  faults and BARRIERs per core (they fill on a config of several cores);
* ``dram``  the most read bursts in flight at once on the port in a run (one, two, three or more:
  ``dram_reads_in_flight`` > 1, three needs several cores) and an error raised while two or more
  bursts are in flight (DONE waits for all of them); with ``dram_writes_in_flight`` > 1 the most
  write bursts in flight (one, two, three or more), a read granted while a write was in flight and
  an error raised while a write awaits its B with another burst in flight.

Hits count instructions (``insn``, ``alu``, ``loop``, ``dma``, ``pad``, ``gemm``, ``raw``), DMA rows
(the row bins), cycles (``port``) or runs (``error``, ``core``). :func:`catalogue` lists every bin
for a campaign's configs and :func:`unreachable` the ones no Program of the campaign can hit, with
the reason (by design of the ISA or microarchitecture, or the config). :func:`observe` extracts one
case's hits; :func:`coverage_json` is what ``cosim fuzz --coverage --json`` prints.

The generator (``cosim.fuzz.generator.Steer``) reads empty bin names to bias its choices: the
names of the ``alu``, ``loop``, ``dma``, ``pad``, ``gemm``, ``raw`` and ``port`` bins are a
contract with it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from hw import csr
from hw.config import HwConfig
from hw.analysis import token_matches
from hw.gemm_numpy import gemm_indices, gemm_uop_range_bad
from hw.isa import (ALU_OP_NAMES, ALU_OPS, BUFFER_NAMES, BUFFERS, INSN_BYTES, UOP_BYTES, Instruction, Isa,
                    decode_uops, unit_of)
from hw.isa_semantics import (DEP_FLAGS, DST_BLIND_OPS, LEGAL_FLAGS, POP_FLAGS, TOKEN_QUEUES, affine_indices,
                              classify_word, load_tile_shape)
from hw.program import Program
from hw.result import RunResult

GROUPS = ("insn", "token", "alu", "loop", "dma", "pad", "gemm", "raw", "port", "error", "core", "dram")
IN_FLIGHT = "needs a config with dram_reads_in_flight > 1"
WRITES_IN_FLIGHT = "needs a config with dram_writes_in_flight > 1"
PAGE = 4096            # no DMA burst crosses a 4 KiB boundary (docs/microarch.md "The DRAM port")
RAW_MAX_ITERS = 1 << 16  # longer loops (only injected faults make them) are not searched for hazards
SEVERAL_CORES = "needs a several-core config (the campaign's configs have one core)"


@dataclass(frozen=True)
class Bin:
    """One coverage bin: its name (``group.rest``) and what it means."""

    name: str
    what: str

    @property
    def group(self) -> str:
        """The group, the name's first part."""
        return self.name.split(".", 1)[0]


def _flag_text(flags: Iterable[str]) -> str:
    on = set(flags)
    fs = [f for f in DEP_FLAGS if f in on]
    return "+".join(fs) if fs else "none"


def _flag_combos(legal: Sequence[str]) -> list[str]:
    out = []
    for m in range(1 << len(legal)):
        out.append(_flag_text(f for k, f in enumerate(legal) if m >> k & 1))
    return out


# ---- the catalogue ---------------------------------------------------------------------------------
ERROR_SITES: list[tuple[str, str, str, str]] = [
    # (kind, unit, phase, what)
    ("INSN_RANGE", "fetch", "start", "the instruction window checked at START"),
    ("BAD_OPCODE", "fetch", "dispatch", "an unknown opcode, ALU op or buffer, or reserved bits, at dispatch"),
    ("BAD_FIELD", "fetch", "dispatch", "a flag towards a missing stage, STORE padding or buffer, at dispatch"),
    ("DRAM_RANGE", "load", "wait", "LOAD's DRAM window checked in WAIT"),
    ("DRAM_RANGE", "store", "wait", "STORE's DRAM window checked in WAIT"),
    ("SRAM_RANGE", "load", "wait", "LOAD's buffer range checked in WAIT"),
    ("SRAM_RANGE", "store", "wait", "STORE's accumulator range checked in WAIT"),
    ("SRAM_RANGE", "alu", "wait", "the ALU's destination or source range checked in WAIT"),
    ("SRAM_RANGE", "gemm", "wait", "a GEMM's micro-op range past the buffer, checked in WAIT"),
    ("SRAM_RANGE", "gemm", "exec", "a GEMM index walking out of its buffer, in EXEC"),
    ("UNLOADED", "gemm", "exec_uop", "a GEMM reading a micro-op no LOAD wrote, in EXEC"),
    ("UNLOADED", "gemm", "exec_wgt", "a GEMM reading a weight block no LOAD wrote, in EXEC"),
    ("DEADLOCK", "load", "wait", "the deadlock's pc is a LOAD waiting for a token"),
    ("DEADLOCK", "compute", "wait", "the deadlock's pc is an ALU or GEMM waiting for a token"),
    ("DEADLOCK", "finish", "wait", "the deadlock's pc is FINISH waiting for a token"),
    ("DEADLOCK", "store", "wait", "the deadlock's pc is a STORE waiting for a token"),
    ("DEADLOCK", "load", "push", "the deadlock's pc is a LOAD blocked pushing on a full token queue"),
    ("DEADLOCK", "compute", "push", "the deadlock's pc is an ALU or GEMM blocked pushing on a full queue"),
    ("DEADLOCK", "store", "push", "the deadlock's pc is a STORE blocked pushing on a full token queue"),
    ("AXI_RESP", "fetch", "burst", "DRAM answered SLVERR/DECERR to a FETCH burst"),
    ("AXI_RESP", "load", "burst", "DRAM answered SLVERR/DECERR mid-burst of a LOAD"),
    ("AXI_RESP", "store", "burst", "DRAM answered SLVERR/DECERR to a STORE burst"),
    ("UNSUPPORTED", "fetch", "dispatch", "an instruction this hardware does not execute"),
    ("BARRIER", "compute", "wait", "a core waiting at a BARRIER that a finished core never reaches"),
]

_PUSH_DEADLOCK = ("a push blocked on a full token queue is the lowest blocked pc only in a stream that breaks the "
                  "program-order depth rule (more tokens outstanding than the queue holds); every generated "
                  "stream keeps the rule (a re-interleaved one may break it, but never deadlocks) and an "
                  "injected deadlock only adds a pop whose token never comes")

# Bins no Program of a campaign can hit, whatever the config: the reason is the ISA's or the microarchitecture's.
BY_DESIGN: dict[str, str] = {
    "loop.negative_factor": "loop factors are unsigned fields (hw/isa.py): an affine index only grows",
    "insn.FINISH.push": "a token FINISH pushes has no consumer: the stream is unbalanced, which the generator "
                        "and every Program loader refuse",
    "port.load_data_and_store_read": "LOAD's data writes and STORE's reads belong to different bursts and a "
                                     "write burst never overlaps another: they never share a cycle",
    "port.alu_and_gemm": "the ALU and GEMM are one compute unit: one instruction EXECUTEs at a time",
    "error.AXI_RESP.fetch.burst": "every address a burst reaches is range-checked before it (INSN_RANGE, "
                                  "DRAM_RANGE), and the models' DRAM answers OKAY inside the layout: only a "
                                  "testbench's DRAM fault injection raises AXI_RESP",
    "error.AXI_RESP.load.burst": "a LOAD's whole DRAM window is checked in WAIT (DRAM_RANGE) and the models' "
                                 "DRAM answers OKAY inside the layout",
    "error.AXI_RESP.store.burst": "a STORE's whole DRAM window is checked in WAIT (DRAM_RANGE) and the models' "
                                  "DRAM answers OKAY inside the layout",
    "error.UNSUPPORTED.fetch.dispatch": "no instruction class raises it: every opcode and buffer code is "
                                        "executed (hw/csr.py keeps the code for future classes)",
    **{f"error.DEADLOCK.{u}.push": _PUSH_DEADLOCK for u in ("load", "compute", "store")},
}


def catalogue(cfgs: Sequence[HwConfig]) -> dict[str, Bin]:
    """Every bin of a campaign over ``cfgs``, reachable or not, in report order."""
    bins: list[Bin] = []
    add = lambda n, w: bins.append(Bin(n, w))  # noqa: E731
    for buf in BUFFERS:
        for fl in _flag_combos(LEGAL_FLAGS["load"]):
            add(f"insn.LOAD.{buf}.{fl}", f"a LOAD into {buf} with flags {fl}")
    for fl in _flag_combos(LEGAL_FLAGS["store"]):
        add(f"insn.STORE.ACC.{fl}", f"a STORE with flags {fl}")
    for op in ("ALU", "GEMM"):
        for fl in _flag_combos(LEGAL_FLAGS["compute"]):
            add(f"insn.{op}.{fl}", f"an {op} with flags {fl}")
    for fl in _flag_combos(POP_FLAGS):
        add(f"insn.FINISH.{fl}", f"FINISH with flags {fl}")
    add("insn.FINISH.push", "FINISH pushing a token")
    add("insn.BARRIER", "a BARRIER instruction")
    for q in TOKEN_QUEUES:
        add(f"token.{q}.pop_first", f"a pop of {q} fetched before the push it takes (tokens, not program "
                                    f"order, order the units)")
    for op in ALU_OPS:
        add(f"alu.{op}.imm", f"ALU {op} with an immediate")
        add(f"alu.{op}.vec", f"ALU {op} with a buffer operand")
    for unit in ("alu", "gemm"):
        for lvl in ("outer", "inner"):
            for n in ("zero", "one", "many"):
                add(f"loop.{unit}.{lvl}.{n}", f"{unit} iter_{lvl[:-2] if lvl == 'outer' else 'in'} {n}")
    add("loop.negative_factor", "a negative loop factor")
    for unit in ("load", "store"):
        for n in ("zero", "one", "many"):
            add(f"dma.{unit}.rows.{n}", f"{unit.upper()} of {n} rows (y_size*x_size = 0 is zero)")
        for s in ("equal", "gap", "overlap"):
            add(f"dma.{unit}.stride.{s}", f"{unit.upper()} of several rows with x_stride "
                                          f"{ {'equal': '==', 'gap': '>', 'overlap': '<'}[s]} x_size")
        for r, w in (("one_burst", "a row in one burst"), ("full_bursts", "a row of several full bursts"),
                     ("partial_tail", "a row of several bursts ending on a partial burst"),
                     ("split_4k", "a row split by a 4 KiB boundary"),
                     ("ends_at_4k", "a row ending on a 4 KiB boundary")):
            add(f"dma.{unit}.row.{r}", f"{unit.upper()}: {w}")
    for side in ("top", "bottom", "left", "right"):
        add(f"pad.{side}", f"LOAD padding on the {side}")
    add("pad.only", "a LOAD of padding only (y_size or x_size 0)")
    add("pad.max", "a LOAD padding field at its maximum (15)")
    for buf in ("INP", "WGT"):
        add(f"pad.{buf}", f"a padded LOAD into {buf} (zero GEMM operands)")
    for n in ("empty", "one", "many", "whole_buffer"):
        add(f"gemm.uops.{n}", f"a GEMM over {n.replace('_', ' ')} micro-op(s)")
    add("gemm.reset.on", "a GEMM with reset")
    add("gemm.reset.off", "a GEMM without reset")
    for who in ("alu_dst", "alu_src", "gemm"):
        for d in ("d1", "d2", "d3plus"):
            add(f"raw.{who}.{d}", f"{who}: an iteration reads an accumulator entry written "
                                  f"{ {'d1': '1', 'd2': '2', 'd3plus': '>= 3'}[d]} iteration(s) earlier")
    for unit, what in (("alu", "an ALU with a buffer operand"), ("alu_imm", "an ALU with an immediate"),
                       ("gemm", "a GEMM")):
        for holder, w in (("load_data", "LOAD writing a data vector (a wait)"),
                          ("load_pad", "LOAD writing a padding vector (a wait)"),
                          ("store_read", "STORE reading a vector" + (" (a wait)" if unit == "alu" else
                                                                     " (no wait: the port plan allows it)")),
                          ("pad_and_read", "LOAD padding and STORE reading in one cycle")):
            add(f"port.{unit}.{holder}", f"cycles of {what}'s EXECUTE with {w}")
    add("port.load_data_and_store_read", "LOAD's data write and STORE's read in one cycle")
    add("port.alu_and_gemm", "the ALU and GEMM wanting the write port in one cycle")
    for kind, unit, phase, what in ERROR_SITES:
        add(f"error.{kind}.{unit}.{phase}", what)
    add("error.halt.port_idle", "an error with no burst in flight: DONE the cycle after")
    add("error.halt.burst_in_flight", "an error while a burst is in flight: DONE waits for its end")
    for k in range(_core_bins(cfgs)):
        add(f"core.c{k}.fault", f"a fault of core {k}")
        add(f"core.c{k}.barrier", f"a BARRIER of core {k}")
    add("dram.reads_in_flight.one", "a run whose reads were never in flight together (at most one at a time)")
    add("dram.reads_in_flight.two", "a run with at most two read bursts in flight at once, two reached")
    add("dram.reads_in_flight.three_plus", "a run with three or more read bursts in flight at once")
    add("dram.error.several_in_flight", "an error raised while two or more bursts are in flight")
    add("dram.writes_in_flight.one", "a run with writes in flight allowed whose writes never overlapped")
    add("dram.writes_in_flight.two", "a run with at most two write bursts in flight at once, two reached")
    add("dram.writes_in_flight.three_plus", "a run with three or more write bursts in flight at once")
    add("dram.read_beside_write", "a read granted while a write burst was in flight")
    add("dram.error.write_in_flight", "an error raised while a write awaits its B and another burst is in flight")
    return {b.name: b for b in bins}


def _core_bins(cfgs: Sequence[HwConfig]) -> int:
    return max([2] + [c.num_cores for c in cfgs])


def unreachable(cfgs: Sequence[HwConfig]) -> dict[str, str]:
    """The bins of :func:`catalogue` no Program of a campaign over ``cfgs`` can hit, with the reason."""
    out = dict(BY_DESIGN)
    most = max(c.num_cores for c in cfgs)
    if most == 1:
        out["insn.BARRIER"] = SEVERAL_CORES
        out["error.BARRIER.compute.wait"] = SEVERAL_CORES
    if min(c.num_cores for c in cfgs) > 1:
        for q in TOKEN_QUEUES:
            out[f"token.{q}.pop_first"] = ("needs a one-core config (the campaign re-interleaves one-core "
                                           "streams only)")
    for k in range(_core_bins(cfgs)):
        if k >= most:
            out[f"core.c{k}.fault"] = SEVERAL_CORES if most == 1 else f"needs a config of {k + 1} cores or more"
        if most == 1 or k >= most:
            out[f"core.c{k}.barrier"] = SEVERAL_CORES if most == 1 else f"needs a config of {k + 1} cores or more"
    rif = max(c.dram_reads_in_flight for c in cfgs)
    if rif == 1:
        for b in ("dram.reads_in_flight.two", "dram.reads_in_flight.three_plus", "dram.error.several_in_flight"):
            out[b] = IN_FLIGHT
    elif not any(c.dram_reads_in_flight >= 3 and c.num_cores > 1 for c in cfgs):
        out["dram.reads_in_flight.three_plus"] = ("needs a config with dram_reads_in_flight >= 3 and several cores "
                                                  "(one core has two read clients, FETCH and LOAD)")
    wif = max(c.dram_writes_in_flight for c in cfgs)
    if wif == 1:
        for b in ("one", "two", "three_plus"):
            out[f"dram.writes_in_flight.{b}"] = WRITES_IN_FLIGHT
        out["dram.read_beside_write"] = out["dram.error.write_in_flight"] = WRITES_IN_FLIGHT
    elif wif == 2:
        out["dram.writes_in_flight.three_plus"] = "needs a config with dram_writes_in_flight >= 3"
    return out


# ---- one case's observations -----------------------------------------------------------------------
@dataclass
class Run:
    """What the extractors see of one case: the config, every core's decoded stream (None for a word the
    hardware refuses; cut after the faulting instruction of an errored run), the error and the TLM's
    port observation."""

    cfg: HwConfig
    streams: list[list[Instruction | None]]
    error: dict[str, Any] | None
    tlm_error: dict[str, Any] | None
    tlm_cycles: int | None
    acc_ports: dict[str, int]
    full_streams: list[list[Instruction | None]]
    tlm_extra: dict[str, Any] | None = None  # the TLM's observations (reads in flight)

    def insns(self) -> Iterator[Instruction]:
        """Every instruction that ran (decodable, up to the fault), core after core."""
        for s in self.streams:
            yield from (i for i in s if i is not None)


def decode_streams(p: Program) -> list[list[Instruction | None]]:
    """Every core's stream decoded from the Program's instruction words (``hw.isa``), as the hardware
    sees them: a word the dispatch refuses (BAD_OPCODE, BAD_FIELD) is None."""
    isa = Isa(p.config)
    raw = p.insn_bytes
    words = [int.from_bytes(raw[k:k + INSN_BYTES], "little") for k in range(0, len(raw), INSN_BYTES)]
    out = []
    for first, count in p.windows:
        s: list[Instruction | None] = []
        for w in words[first:first + count]:
            insn, code, _ = classify_word(isa, w)
            s.append(insn if code == csr.ERR_NONE else None)
        out.append(s)
    return out


def make_run(p: Program, ref: RunResult | None, tlm: RunResult | None) -> Run:
    """The :class:`Run` of a case from its Program and results (the reference's error decides where the
    streams are cut; the TLM adds the error's unit, message and cycle and the port observation)."""
    full = decode_streams(p)
    err = ref.error if ref is not None else (tlm.error if tlm is not None else None)
    streams = [list(s) for s in full]
    if err is not None:
        core = int(err.get("core", 0))
        if err["code"] == csr.ERR_INSN_RANGE:
            streams = [[] for _ in full]  # nothing ran
        elif 0 <= core < len(streams):
            streams[core] = streams[core][:max(0, int(err["pc"]) + 1)]
    return Run(p.config, streams, err, tlm.error if tlm is not None else None,
               tlm.cycles if tlm is not None else None,
               dict((tlm.extra or {}).get("acc_ports", {})) if tlm is not None else {}, full,
               dict(tlm.extra or {}) if tlm is not None else None)


# ---- extractors, one per group -----------------------------------------------------------------------
def _many(n: int) -> str:
    return "zero" if n == 0 else ("one" if n == 1 else "many")


def _insn_bins(run: Run) -> Iterator[str]:
    for i in run.insns():
        name = i.MNEMONIC
        flags = _flag_text(f for f in DEP_FLAGS if getattr(i, f, False))
        if name == "LOAD":
            yield f"insn.LOAD.{BUFFER_NAMES[i.buf]}.{flags}"
        elif name == "STORE":
            yield f"insn.STORE.ACC.{flags}"
        elif name in ("ALU", "GEMM"):
            yield f"insn.{name}.{flags}"
        elif name == "FINISH":
            yield "insn.FINISH.push" if (i.push_prev or i.push_next) else f"insn.FINISH.{flags}"
        elif name == "BARRIER":
            yield "insn.BARRIER"


def _token_bins(run: Run) -> Iterator[str]:
    if run.error is not None:  # an injected fault (a deadlock's extra pop) shifts which push a pop takes
        return
    for s in run.streams:
        insns = [i for i in s if i is not None]
        if len(insns) == len(s):  # a refused word stops the dispatch: its stream's pairs are not all there
            yield from (f"token.{q}.pop_first" for q, a, b in token_matches(insns) if b < a)


def _alu_bins(run: Run) -> Iterator[str]:
    names = {v: k for k, v in ALU_OPS.items()}
    for i in run.insns():
        if i.MNEMONIC == "ALU":
            yield f"alu.{names[i.alu_op]}.{'imm' if i.use_imm else 'vec'}"


def _loop_bins(run: Run) -> Iterator[str]:
    for i in run.insns():
        if i.MNEMONIC in ("ALU", "GEMM"):
            u = i.MNEMONIC.lower()
            yield f"loop.{u}.outer.{_many(i.iter_out)}"
            yield f"loop.{u}.inner.{_many(i.iter_in)}"


def row_bursts(addr: int, row_bytes: int, cfg: HwConfig) -> list[int]:
    """Beats of each burst of one DMA row of ``row_bytes`` from byte ``addr``: at most MAX_BURST beats,
    none crossing a 4 KiB boundary (docs/microarch.md "The DRAM port")."""
    out, a, left = [], addr, row_bytes
    cap = cfg.max_burst * cfg.bus_bytes
    while left > 0:
        n = min(cap, left, PAGE - a % PAGE)
        out.append(n // cfg.bus_bytes)
        a, left = a + n, left - n
    return out


def _dma_bins(run: Run) -> Iterator[str]:
    cfg = run.cfg
    for i in run.insns():
        if i.MNEMONIC not in ("LOAD", "STORE"):
            continue
        u = i.MNEMONIC.lower()
        rows = i.y_size if i.x_size else 0
        yield f"dma.{u}.rows.{_many(rows)}"
        if rows == 0:
            continue
        if rows > 1:
            yield f"dma.{u}.stride." + ("equal" if i.x_stride == i.x_size else
                                        "gap" if i.x_stride > i.x_size else "overlap")
        vb = cfg.elem_bytes(BUFFER_NAMES[i.buf]) if u == "load" else cfg.out_vec_bytes
        for r in range(min(rows, 64)):  # rows beyond 64 add no new kind of row
            addr = (i.dram_base + r * i.x_stride) * vb
            size = i.x_size * vb
            bursts = row_bursts(addr, size, cfg)
            if len(bursts) == 1:
                yield f"dma.{u}.row.one_burst"
            elif bursts[-1] < cfg.max_burst:
                yield f"dma.{u}.row.partial_tail"
            else:
                yield f"dma.{u}.row.full_bursts"
            if addr // PAGE != (addr + size - 1) // PAGE:
                yield f"dma.{u}.row.split_4k"
            if (addr + size) % PAGE == 0:
                yield f"dma.{u}.row.ends_at_4k"


def _pad_bins(run: Run) -> Iterator[str]:
    for i in run.insns():
        if i.MNEMONIC != "LOAD":
            continue
        pads = (i.y_pad_0, i.y_pad_1, i.x_pad_0, i.x_pad_1)
        for side, v in zip(("top", "bottom", "left", "right"), pads):
            if v:
                yield f"pad.{side}"
        rows, cols = load_tile_shape(i)
        if any(pads) and i.y_size * i.x_size == 0 and rows * cols > 0:
            yield "pad.only"
        if max(pads) == 15:
            yield "pad.max"
        buf = BUFFER_NAMES[i.buf]
        if any(pads) and buf in ("INP", "WGT"):
            yield f"pad.{buf}"


def _uop_tables(run: Run, dram: bytes | None) -> Iterator[tuple[Instruction, np.ndarray]]:
    """Every GEMM of the run with the micro-op buffer its core's LOADs leave before it (program order)."""
    cfg = run.cfg
    for s in run.streams:
        table = np.zeros((cfg.uop_depth, 3), dtype=np.int64)
        for i in s:
            if i is None:
                continue
            if i.MNEMONIC == "GEMM":
                yield i, table
            elif i.MNEMONIC == "LOAD" and i.buf == BUFFERS["UOP"] and dram is not None:
                rows, cols = load_tile_shape(i)
                k = i.sram_base
                for rr in range(rows):
                    for cc in range(cols):
                        y, x = rr - i.y_pad_0, cc - i.x_pad_0
                        if k < cfg.uop_depth:
                            if 0 <= y < i.y_size and 0 <= x < i.x_size:
                                at = (i.dram_base + y * i.x_stride + x) * UOP_BYTES
                                chunk = bytes(dram[at:at + UOP_BYTES])
                                table[k] = decode_uops(chunk)[0] if len(chunk) == UOP_BYTES else (0, 0, 0)
                            else:
                                table[k] = (0, 0, 0)
                        k += 1


def _gemm_bins(run: Run) -> Iterator[str]:
    cfg = run.cfg
    for i in run.insns():
        if i.MNEMONIC != "GEMM":
            continue
        n = max(0, i.uop_end - i.uop_begin)
        yield "gemm.uops." + ("whole_buffer" if i.uop_begin == 0 and i.uop_end == cfg.uop_depth else
                              "empty" if n == 0 else _many(n))
        yield f"gemm.reset.{'on' if i.reset else 'off'}"


def raw_distances(writes: np.ndarray, reads: np.ndarray) -> set[int]:
    """For loop iterations k that write ``writes[k]`` after reading ``reads[k]``: the distances
    ``k - k'`` to the latest earlier iteration k' that wrote what iteration k reads (capped at 3)."""
    n = len(writes)
    if n < 2:
        return set()
    keys = np.concatenate([writes, reads])
    times = np.concatenate([2 * np.arange(n) + 1, 2 * np.arange(n)])  # a read before its own write
    is_w = np.concatenate([np.ones(n, dtype=bool), np.zeros(n, dtype=bool)])
    order = np.lexsort((times, keys))
    k_s, t_s, w_s = keys[order], times[order], is_w[order]
    pos = np.where(w_s, np.arange(2 * n), -1)
    last = np.maximum.accumulate(pos)
    ok = (~w_s) & (last >= 0)
    ok[ok] = k_s[last[ok]] == k_s[ok]
    if not ok.any():
        return set()
    d = (t_s[ok] - t_s[last[ok]] + 1) // 2
    return {int(min(x, 3)) for x in np.unique(d)}


_DIST = {1: "d1", 2: "d2", 3: "d3plus"}


def _raw_bins(run: Run, dram: bytes | None) -> Iterator[str]:
    for i in run.insns():
        if i.MNEMONIC != "ALU" or not 1 < i.iter_out * i.iter_in <= RAW_MAX_ITERS:
            continue
        d = affine_indices(i.dst_base, i.iter_out, i.iter_in, i.dst_factor_out, i.dst_factor_in)
        if ALU_OP_NAMES[i.alu_op] not in DST_BLIND_OPS:  # MOV and CLZ do not read their destination
            for x in sorted(raw_distances(d, d)):
                yield f"raw.alu_dst.{_DIST[x]}"
        if not i.use_imm:
            s = affine_indices(i.src_base, i.iter_out, i.iter_in, i.src_factor_out, i.src_factor_in)
            for x in sorted(raw_distances(d, s)):
                yield f"raw.alu_src.{_DIST[x]}"
    for g, table in _uop_tables(run, dram):
        n = g.iter_out * g.iter_in * max(0, g.uop_end - g.uop_begin)
        if g.reset or not 1 < n <= RAW_MAX_ITERS or g.uop_end > run.cfg.uop_depth:
            continue
        _, a, _, _ = gemm_indices(g, table)
        for x in sorted(raw_distances(a, a)):
            yield f"raw.gemm.{_DIST[x]}"


def _port_bins(run: Run) -> Iterator[str]:
    for key, n in run.acc_ports.items():
        yield from [f"port.{key}"] * int(n)


def _error_site(run: Run) -> tuple[str, str, str] | None:
    """``(kind, unit, phase)`` of the run's error (:data:`ERROR_SITES`), None without one."""
    err = run.error
    if err is None:
        return None
    kind = csr.ERROR_NAMES.get(int(err["code"]), "?")
    core, pc = int(err.get("core", 0)), int(err["pc"])
    full = run.full_streams[core] if core < len(run.full_streams) else []
    insn = full[pc] if 0 <= pc < len(full) else None
    name = insn.MNEMONIC if insn is not None else None
    if kind == "INSN_RANGE":
        return kind, "fetch", "start"
    if kind in ("BAD_OPCODE", "BAD_FIELD", "UNSUPPORTED"):
        return kind, "fetch", "dispatch"
    if kind == "BARRIER":
        return kind, "compute", "wait"
    if kind == "AXI_RESP":
        unit = (run.tlm_error or {}).get("unit") or (unit_of(insn) if insn is not None else "fetch")
        return kind, unit, "burst"
    if kind == "DEADLOCK":
        if insn is None:
            return kind, "fetch", "no_finish"
        state = "wait"
        msg = (run.tlm_error or {}).get("message", "")
        for part in msg.split("(")[-1].rstrip(")").split(","):
            bits = part.split()  # "<unit> <state> at <pc>", the state as sim/tlm/unit_shell.py names it
            if len(bits) == 4 and bits[2] == "at" and bits[3] == str(pc):
                state = "push" if bits[1] == "token_push" else "wait"
        unit = "finish" if name == "FINISH" else unit_of(insn)
        return kind, unit, state
    if name in ("LOAD", "STORE"):
        return kind, name.lower(), "wait"
    if name == "ALU":
        return kind, "alu", "wait"
    if name == "GEMM":
        if kind == "UNLOADED":
            msg = (run.tlm_error or err).get("message", "") or ""
            return kind, "gemm", "exec_uop" if "micro-op" in msg else "exec_wgt"
        return kind, "gemm", "wait" if gemm_uop_range_bad(insn, run.cfg.uop_depth) else "exec"
    return kind, "fetch", "dispatch"


def _error_bins(run: Run) -> Iterator[str]:
    site = _error_site(run)
    if site is None:
        return
    yield "error." + ".".join(site)
    te = run.tlm_error
    if te is not None and run.tlm_cycles is not None and te.get("cycle") is not None:
        # DONE rises the cycle after the error unless a burst in flight must end first (microarch.md)
        yield "error.halt." + ("burst_in_flight" if run.tlm_cycles > int(te["cycle"]) + 1 else "port_idle")


def _core_bins_of(run: Run) -> Iterator[str]:
    if run.error is not None:
        yield f"core.c{int(run.error.get('core', 0))}.fault"
    for k, s in enumerate(run.streams):
        for i in s:
            if i is not None and i.MNEMONIC == "BARRIER":
                yield f"core.c{k}.barrier"


def _dram_bins(run: Run) -> Iterator[str]:
    extra = run.tlm_extra
    if extra is None:  # no TLM run: nothing observed
        return
    # a config with one read at a time reports nothing: at most one read was in flight
    most = int(extra.get("reads_in_flight_max", 1))
    yield "dram.reads_in_flight." + ("one" if most <= 1 else "two" if most == 2 else "three_plus")
    if int(extra.get("bursts_in_flight_at_error", 0)) >= 2:
        yield "dram.error.several_in_flight"
        if int(extra.get("writes_in_flight_at_error", 0)) >= 1:
            yield "dram.error.write_in_flight"
    if "writes_in_flight_max" in extra:  # a config with writes in flight
        most = int(extra["writes_in_flight_max"])
        yield "dram.writes_in_flight." + ("one" if most <= 1 else "two" if most == 2 else "three_plus")
        if int(extra.get("reads_beside_writes", 0)):
            yield "dram.read_beside_write"


EXTRACTORS: dict[str, Callable[..., Iterator[str]]] = {
    "insn": _insn_bins, "alu": _alu_bins, "loop": _loop_bins, "dma": _dma_bins, "pad": _pad_bins,
    "gemm": _gemm_bins, "raw": _raw_bins, "port": _port_bins, "error": _error_bins, "core": _core_bins_of,
    "dram": _dram_bins, "token": _token_bins,
}


def observe(p: Program, ref: RunResult | None = None, tlm: RunResult | None = None,
            groups: Iterable[str] = GROUPS) -> Counter:
    """The bins one case hits, with their counts: the Program ``p`` the campaign ran, the reference's
    result ``ref`` and the TLM's ``tlm`` (run with ``observe_ports`` for the ``port`` group)."""
    run = make_run(p, ref, tlm)
    dram: bytes | None = None
    hits: Counter = Counter()
    for g in groups:
        if g == "raw":
            if any(i.MNEMONIC == "GEMM" for i in run.insns()):
                dram = bytes(p.dram_image())
            hits.update(_raw_bins(run, dram))
        else:
            hits.update(EXTRACTORS[g](run))
    return hits


# ---- reports ---------------------------------------------------------------------------------------------
def merge(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Bin counts ``a`` + ``b`` (a new dict)."""
    out = dict(a)
    for k, n in b.items():
        out[k] = out.get(k, 0) + int(n)
    return out


def coverage_json(hits: dict[str, int], cfgs: Sequence[HwConfig]) -> dict[str, Any]:
    """``{"bins": {name: hits}, "empty": [names], "unreachable": {name: reason}}``: every bin of the
    catalogue (unreachable ones included, with 0 hits), the reachable bins with no hit, and the reasons."""
    cat = catalogue(cfgs)
    unr = unreachable(cfgs)
    bins = {n: int(hits.get(n, 0)) for n in cat}
    unknown = sorted(set(hits) - set(cat))
    if unknown:  # an extractor and the catalogue disagree: say so rather than drop the hits
        raise ValueError(f"coverage: bins hit that the catalogue lacks: {', '.join(unknown[:5])}")
    return {"bins": bins, "empty": [n for n in cat if n not in unr and bins[n] == 0], "unreachable": unr}


def empty_bins(hits: dict[str, int], cfgs: Sequence[HwConfig]) -> list[str]:
    """The reachable bins of ``cfgs`` that ``hits`` leaves empty."""
    return coverage_json(hits, cfgs)["empty"]


def report_lines(cov: dict[str, Any]) -> list[str]:
    """The text report of :func:`coverage_json`: per group hit bins / reachable bins and hits, then the
    empty bins and the unreachable ones with their reasons."""
    bins, unr = cov["bins"], cov["unreachable"]
    lines = ["coverage: group    bins hit / reachable   hits"]
    for g in GROUPS:
        names = [n for n in bins if n.split(".", 1)[0] == g and n not in unr]
        hit = sum(1 for n in names if bins[n])
        lines.append(f"coverage: {g:<8} {hit:>6} / {len(names):<6}    {sum(bins[n] for n in names)}")
    reach = [n for n in bins if n not in unr]
    lines.append(f"coverage: total    {len(reach) - len(cov['empty'])} / {len(reach)} reachable bins hit")
    lines.append(f"coverage: empty bins ({len(cov['empty'])}): {', '.join(cov['empty']) or 'none'}")
    for n, why in unr.items():
        lines.append(f"coverage: unreachable {n}: {why}")
    return lines


# ---- steering --------------------------------------------------------------------------------------------
STEER_RATE = 0.3  # the share of steerable choices bent toward an empty bin

# empty error bin -> (fault kind of cosim.fuzz.faults, unit aimed at or None)
FAULT_FOR_BIN: dict[str, tuple[str, str | None]] = {
    "error.INSN_RANGE.fetch.start": ("insn_range", None),
    "error.BAD_OPCODE.fetch.dispatch": ("bad_opcode", None),
    "error.BAD_FIELD.fetch.dispatch": ("bad_field", None),
    "error.DRAM_RANGE.load.wait": ("dram_range", None),
    "error.DRAM_RANGE.store.wait": ("dram_range", None),
    "error.SRAM_RANGE.load.wait": ("sram_range", "load"),
    "error.SRAM_RANGE.store.wait": ("sram_range", "store"),
    "error.SRAM_RANGE.alu.wait": ("sram_range", None),
    "error.SRAM_RANGE.gemm.wait": ("sram_range", None),
    "error.SRAM_RANGE.gemm.exec": ("sram_range", None),
    "error.UNLOADED.gemm.exec_uop": ("unloaded", None),
    "error.UNLOADED.gemm.exec_wgt": ("unloaded", None),
    "error.DEADLOCK.load.wait": ("deadlock", None),
    "error.DEADLOCK.compute.wait": ("deadlock", None),
    "error.DEADLOCK.store.wait": ("deadlock", None),
    "error.DEADLOCK.finish.wait": ("deadlock", "finish"),
}


def steer_weights(hits: dict[str, int] | None, cfgs: Sequence[HwConfig], rate: float = STEER_RATE) -> dict[str, Any]:
    """The generator's steering weights (``cosim.fuzz.generator.Steer.to_json``) after ``hits``: the empty
    reachable bins (every reachable bin before the first chunk) and the rate."""
    return {"empty": empty_bins(hits or {}, cfgs), "rate": rate}


def steered_fault(steer: dict[str, Any] | None, rng: np.random.Generator) -> tuple[str, str | None] | None:
    """The fault kind (and unit aimed at) a faulty case should get to fill an empty error bin: with
    probability ``rate`` one of the empty bins :data:`FAULT_FOR_BIN` knows, else None (the usual choice)."""
    if not steer:
        return None
    c = [FAULT_FOR_BIN[n] for n in steer.get("empty", ()) if n in FAULT_FOR_BIN]
    if not c or rng.random() >= float(steer.get("rate", STEER_RATE)):
        return None
    return c[int(rng.integers(0, len(c)))]
