"""Where the time goes, section by section: the per-section (per-layer) report of a traced TLM run.

A Program made by a kernel that calls ``S.section(name)`` (every network layer is one) lists its
sections in ``meta["sections"]``: ``name``, ``first`` instruction and ``count``. From a traced TLM
run (``cosim.models.tlm_traced``: every instruction's pop, execute, end and completion cycles),
each section gets:

* **cycles**, a partition of the run (``Tracer.section_spans``): a section ends when every
  instruction up to its last has completed (the running maximum), the last one at CYCLES, so
  the sections' cycles sum to CYCLES. Instructions before the first section form a
  ``(prologue)`` row; FINISH (after the last section) belongs to no row.
* **counters** of its instructions, with the TLM's own definitions (``sim/tlm/unit_shell.py``,
  ``sim/tlm/compute_unit.py``), so the rows plus what lies outside every row (FINISH) add up to
  the run's counters exactly: ``*_busy`` (EXECUTE cycles), ``*_stall`` (waiting for tokens
  before EXECUTE and for room to push them after), ``*_insns``, ``compute_wait`` (EXECUTE
  cycles of an ALU or GEMM frozen on an accumulator port), ``gemm_busy``, ``gemm_ops``
  (iterations of non-reset GEMMs), ``dma_rd_bytes`` / ``dma_wr_bytes`` (the LOAD / STORE
  tiles' bytes) and ``fetch_bytes`` (the section's instructions).
* **MACs**: the layer's multiply-accumulates from ``meta["network"]`` (natural shapes, the whole
  batch) when the Program is a network, else the GEMM block MACs; **block MACs** (GEMM
  iterations x BATCH x BLOCK x BLOCK: what the core computed, padding included); MACs per cycle
  and their share of the peak (``HwConfig.macs_per_cycle``).

:meth:`SectionReport.mismatches` checks the sums against CYCLES and the run's counters (the
tests and ``cosim net`` call it).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from hw.gemm_numpy import gemm_iterations
from hw.isa import INSN_BYTES
from hw.isa_semantics import buffer_of
from hw.program import Program
from hw.result import byte_size
from cosim.models import TlmTimeline

UNITS = ("load", "compute", "store")
# The run counters a section's instructions add up to (the lower-case names of hw.csr.COUNTERS).
COUNTERS = ("load_busy", "compute_busy", "store_busy", "load_stall", "compute_stall", "store_stall",
            "load_insns", "compute_insns", "store_insns", "compute_wait", "gemm_busy", "gemm_ops",
            "dma_rd_bytes", "dma_wr_bytes", "fetch_bytes")


def program_sections(program: Program) -> list[dict[str, Any]]:
    """The Program's ``meta["sections"]``, checked (a Program folder's ``layout.json`` may have been
    edited): a list of ``{"name", "first", "count"}`` in instruction order, inside the stream, not
    overlapping; ``[]`` when it has none. Raises ValueError (one line) when they are malformed. On
    several cores they are core 0's (its window starts the stream, so its pcs are flat indices)."""
    n = program.windows[0][1] if program.num_cores > 1 else len(program.insns)
    return _checked(program.meta.get("sections"), n, f"Program '{program.name}': meta 'sections'")


def program_core_sections(program: Program) -> list[list[dict[str, Any]]]:
    """Every core's sections (``meta["core_sections"]``, pcs counted in that core's stream), checked like
    :func:`program_sections`; one core: ``[program_sections(program)]``; ``[]`` per core without any."""
    if program.num_cores == 1:
        return [program_sections(program)]
    per = program.meta.get("core_sections")
    where = f"Program '{program.name}': meta 'core_sections'"
    if per is None:
        return [[] for _ in program.windows]
    if not isinstance(per, list) or len(per) != program.num_cores:
        raise ValueError(f"{where} must be a list of {program.num_cores} lists (one per core)")
    return [_checked(secs, count, f"{where}[{k}]") for k, (secs, (_, count)) in enumerate(zip(per, program.windows))]


def _checked(secs: Any, n: int, where: str) -> list[dict[str, Any]]:
    """``secs`` checked against a stream of ``n`` instructions (see :func:`program_sections`)."""
    if secs is None:
        return []
    if not isinstance(secs, list):
        raise ValueError(f"{where} must be a list, got {type(secs).__name__}")
    out, end = [], 0
    for k, s in enumerate(secs):
        if not isinstance(s, dict) or not isinstance(s.get("name"), str) or not s["name"]:
            raise ValueError(f"{where}[{k}] must be an object with a non-empty 'name', 'first' and 'count'")
        first, count = s.get("first"), s.get("count")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (first, count)):
            raise ValueError(f"{where}[{k}] ('{s['name']}'): 'first' and 'count' must be non-negative integers")
        if first < end or first + count > n:
            raise ValueError(f"{where}[{k}] ('{s['name']}'): instructions [{first}, {first + count}) overlap the "
                             f"previous section or run past the {n} instructions")
        out.append({"name": s["name"], "first": first, "count": count})
        end = first + count
    return out


@dataclass
class SectionRow:
    """One section (or the prologue): its instructions ``[first, first + count)``, its cycles
    ``[start, end)`` of the run, its counters and MACs."""

    name: str
    first: int
    count: int
    start: int
    end: int
    counters: dict[str, int]
    block_macs: int
    macs: int
    macs_source: str  # "network" (meta["network"]) or "gemm blocks"

    @property
    def cycles(self) -> int:
        return self.end - self.start

    def macs_per_cycle(self) -> float | None:
        return self.macs / self.cycles if self.cycles else None

    def to_json(self, peak: int) -> dict[str, Any]:
        mpc = self.macs_per_cycle()
        return {"name": self.name, "first_insn": self.first, "insns": self.count, "start": self.start,
                "end": self.end, "cycles": self.cycles, "macs": self.macs, "macs_source": self.macs_source,
                "block_macs": self.block_macs, "macs_per_cycle": mpc,
                "peak_pct": None if mpc is None else 100.0 * mpc / peak, **self.counters}


@dataclass
class SectionReport:
    """The rows of one run, what lies outside every row (FINISH), and the run's CYCLES and counters."""

    program: str
    cycles: int
    peak_macs_per_cycle: int
    rows: list[SectionRow]
    outside: dict[str, int]
    run_counters: dict[str, int] = field(default_factory=dict)

    def totals(self) -> dict[str, int]:
        """The rows' counters plus the outside ones: equal to the run's counters."""
        return {c: sum(r.counters[c] for r in self.rows) + self.outside[c] for c in COUNTERS}

    def mismatches(self) -> list[str]:
        """Every sum that does not match the run: the rows' cycles against CYCLES, each counter's
        total against the run's counter. Empty when the report partitions the run exactly."""
        bad = []
        if self.rows and sum(r.cycles for r in self.rows) != self.cycles:
            bad.append(f"section cycles sum to {sum(r.cycles for r in self.rows)}, CYCLES is {self.cycles}")
        tot = self.totals()
        for c in COUNTERS:
            if c in self.run_counters and tot[c] != self.run_counters[c]:
                bad.append(f"{c}: sections + outside = {tot[c]}, the run's counter = {self.run_counters[c]}")
        return bad

    def to_json(self) -> dict[str, Any]:
        macs = sum(r.macs for r in self.rows)
        return {"program": self.program, "cycles": self.cycles, "peak_macs_per_cycle": self.peak_macs_per_cycle,
                "macs": macs, "macs_per_cycle": macs / self.cycles if self.cycles else None,
                "sections": [r.to_json(self.peak_macs_per_cycle) for r in self.rows], "outside": self.outside,
                "sums_match_counters": not self.mismatches()}

    def table_lines(self, what: str = "section") -> list[str]:
        """The table for people: one row per section, then the total."""
        head = (f"{what:<16}{'cycles':>10}{'%':>6}{'MACs':>11}{'MAC/cyc':>9}{'%peak':>7}{'block MACs':>12}"
                f"{'DMA rd':>10}{'DMA wr':>10}{'load b/s':>15}{'compute b/s':>15}{'store b/s':>15}")
        out = [head, "-" * len(head)]
        peak = self.peak_macs_per_cycle

        def line(name: str, cycles: int, macs: int, block_macs: int, c: dict[str, int]) -> str:
            mpc = macs / cycles if cycles else 0.0
            units = "".join(f"{c[f'{u}_busy']}/{c[f'{u}_stall']}".rjust(15) for u in UNITS)
            return (f"{name[:15]:<16}{cycles:>10}{100 * cycles / max(1, self.cycles):>6.1f}{macs:>11}{mpc:>9.1f}"
                    f"{100 * mpc / peak:>7.1f}{block_macs:>12}{byte_size(c['dma_rd_bytes']):>10}"
                    f"{byte_size(c['dma_wr_bytes']):>10}{units}")

        for r in self.rows:
            out.append(line(r.name, r.cycles, r.macs, r.block_macs, r.counters))
        out.append("-" * len(head))
        out.append(line("total", self.cycles, sum(r.macs for r in self.rows), sum(r.block_macs for r in self.rows),
                        self.totals()))
        return out


def _zero() -> dict[str, int]:
    return {c: 0 for c in COUNTERS}


def section_report(program: Program, timeline: TlmTimeline) -> SectionReport:
    """The per-section report of ``program``'s traced TLM run ``timeline`` (module docstring)."""
    cfg, T, tr, res = program.config, timeline.timing, timeline.tracer, timeline.result
    if program.num_cores > 1:
        raise ValueError(f"Program '{program.name}': no per-section report on {program.num_cores} cores yet (the "
                         f"cores' sections overlap in time; the report partitions one core's run)")
    cycles = int(res.cycles or 0)
    spans = tr.section_spans(program_sections(program), cycles)
    firsts = [first for _, first, _, _, _ in spans]
    rows = [SectionRow(name, first, stop - first, s, e, _zero(), 0, 0, "gemm blocks")
            for name, first, stop, s, e in spans]
    outside = _zero()

    def bucket(pc: int) -> tuple[dict[str, int], SectionRow | None]:
        k = bisect_right(firsts, pc) - 1
        if k >= 0 and pc < rows[k].first + rows[k].count:
            return rows[k].counters, rows[k]
        return outside, None

    frozen = {pc: f for pc, _t0, _t1, _n, f in tr.gemms}
    for (unit, pc, insn, t_pop, t_exec, t_end), t_done in zip(tr.insns, tr.retired):
        c, row = bucket(pc)
        c[f"{unit}_insns"] += 1
        c[f"{unit}_busy"] += t_end - t_exec
        # WAIT from t_pop + insn_pop_cycles until the tokens are taken, EXECUTE token_pop_cycles later;
        # PUSH from t_end until the tokens are pushed (t_done)
        c[f"{unit}_stall"] += (t_exec - T.token_pop_cycles - t_pop - T.insn_pop_cycles) + (t_done - t_end)
        name = insn.MNEMONIC
        if name == "LOAD":
            c["dma_rd_bytes"] += insn.y_size * insn.x_size * cfg.elem_bytes(buffer_of(insn))
        elif name == "STORE":
            c["dma_wr_bytes"] += insn.y_size * insn.x_size * cfg.out_vec_bytes
        elif name == "ALU":
            n = insn.iter_out * insn.iter_in
            if n:  # EXECUTE lasts setup + n + pipeline free cycles; the rest it waited on a port
                c["compute_wait"] += (t_end - t_exec) - (T.alu_setup_cycles + n + T.alu_pipeline_cycles)
        elif name == "GEMM":
            c["gemm_busy"] += t_end - t_exec
            c["compute_wait"] += frozen.get(pc, 0)
            if not insn.reset:
                ops = gemm_iterations(insn)
                c["gemm_ops"] += ops
                if row is not None:
                    row.block_macs += ops * cfg.macs_per_cycle
    for r in rows:
        r.counters["fetch_bytes"] = r.count * INSN_BYTES
    outside["fetch_bytes"] = (len(program.insns) - sum(r.count for r in rows)) * INSN_BYTES
    layers = {ly["name"]: int(ly["macs"]) for ly in (program.meta.get("network") or {}).get("layers", [])}
    for r in rows:
        if r.name in layers:
            r.macs, r.macs_source = layers[r.name], "network"
        else:
            r.macs = r.block_macs
    return SectionReport(program.name, cycles, cfg.macs_per_cycle, rows, outside, dict(res.counters))
