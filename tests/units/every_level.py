"""One unit's cases on every level: the ISS, the TLM and the RTL, through the model registry.

A :class:`Case` is a hand-built Program (``hw.assembler``) with what every model must
produce: its ``expected`` outputs (when it has any) and, for a faulting Program, the
error name and ERR_PC. The levels are checked as PyMTL3 checks FL, CL and RTL with one
test suite:

* ISS (no time): outputs, error, and the counters that follow from the instruction
  stream (instructions per unit, DMA and fetch bytes);
* TLM: the same, plus a cycle count and every counter of ``hw.csr.COUNTERS``;
* RTL (all cases of a file in ONE simulator process): the same outputs and error, and
  the TLM's cycles and every counter exactly (the TLM is cycle-exact to the RTL with the
  fast DRAM model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import pytest

from hw import csr
from hw.config import HwConfig
from hw.isa import BUFFER_NAMES, INSN_BYTES, Load, Store
from hw.program import Program
from hw.result import RunResult
from cosim import models

COUNTERS = tuple(n.lower() for n in csr.COUNTERS)
needs_rtl = pytest.mark.skipif(models.rtl_available() is not None, reason=f"no RTL: {models.rtl_available()}")


@dataclass
class Case:
    """A Program and what every model must report for it."""

    program: Program
    error: tuple[str, int] | None = None   # (hw.csr error name, ERR_PC), None for a clean run

    @property
    def name(self) -> str:
        return self.program.name


def case_ids(cases: Sequence[Case]) -> list[str]:
    return [c.name for c in cases]


def stream_counters(p: Program) -> dict[str, int]:
    """The counters a clean run of ``p`` must show whatever the timing (the models run the
    first INSN_COUNT instructions of each core's window), summed over the cores."""
    cfg = p.config
    regs, n = dict(p.regs), p.num_cores
    insns = [i for k in range(n) for i in p.core_insns(k)[:regs[csr.core_reg("INSN_COUNT", k, n)]]]
    loads = [i for i in insns if isinstance(i, Load)]
    stores = [i for i in insns if isinstance(i, Store)]
    return {"load_insns": len(loads), "store_insns": len(stores),
            "compute_insns": len(insns) - len(loads) - len(stores),
            "dma_rd_bytes": sum(i.y_size * i.x_size * cfg.elem_bytes(BUFFER_NAMES[i.buf]) for i in loads),
            "dma_wr_bytes": sum(i.y_size * i.x_size for i in stores) * cfg.out_vec_bytes,
            "fetch_bytes": INSN_BYTES * len(insns)}


def problems(case: Case, r: RunResult) -> list[str]:
    """What is wrong with one model's result (empty when it is right); no timing."""
    out = []
    got = r.error and (r.error.get("name"), r.error.get("pc"))
    if got != case.error:
        out.append(f"error {got} (message: {(r.error or {}).get('message')}), expected {case.error}")
    if case.program.expected and (case.error is None or r.error is not None):
        mm = models.first_mismatch(case.program.expected, r.outputs)
        if mm is not None:
            out.append(str(mm))
    if case.error is None and r.error is None:
        for k, v in stream_counters(case.program).items():
            if r.counters.get(k) != v:
                out.append(f"counter {k} = {r.counters.get(k)}, the instruction stream says {v}")
    return [f"{case.name} on {r.model}: {p}" for p in out]


def check_iss(case: Case) -> None:
    """The ISS runs ``case`` to its expected outputs or error."""
    r = models.iss(case.program)
    assert r.cycles is None
    bad = problems(case, r)
    assert not bad, "\n".join(bad)


def check_tlm(case: Case) -> RunResult:
    """The TLM runs ``case`` to its expected outputs or error, with a consistent set of counters."""
    r = models.tlm(case.program)
    bad = problems(case, r)
    assert set(r.counters) == set(COUNTERS), sorted(r.counters)
    assert r.cycles and r.cycles > 0
    for u in ("load", "compute", "store"):
        assert r.counters[f"{u}_busy"] + r.counters[f"{u}_stall"] <= r.cycles, (u, r.counters, r.cycles)
    assert not bad, "\n".join(bad)
    return r


def run_rtl(cases: Sequence[Case], cfg: HwConfig, **kw) -> list[RunResult]:
    """Every case on the RTL in one simulator process (fast DRAM model unless ``mem`` says)."""
    return models.rtl([c.program for c in cases], cfg, **kw)


def check_rtl(cases: Sequence[Case], rtl: Sequence[RunResult], cycle_exact: bool = True) -> None:
    """The RTL's results are right (STATUS as software reads it too), and (``cycle_exact``: fast
    DRAM model) equal the TLM's cycles and every counter. All cases are checked before the test fails."""
    bad: list[str] = []
    assert len(rtl) == len(cases)
    for c, r in zip(cases, rtl):
        assert r.model == "rtl"
        bad += problems(c, r)
        if "status" in r.extra:  # done, not busy, error as expected (no STATUS after a testbench failure)
            st = csr.decode_status(r.extra["status"])
            if not (st["done"] and not st["busy"] and st["error"] == (c.error is not None)):
                bad.append(f"{c.name}: STATUS {st}")
        if not cycle_exact:
            continue
        t = models.tlm(c.program)
        if t.cycles != r.cycles:
            bad.append(f"{c.name}: TLM {t.cycles} cycles, RTL {r.cycles}")
        diff = {k: (t.counters.get(k), v) for k, v in r.counters.items() if t.counters.get(k) != v}
        if diff or set(r.counters) != set(COUNTERS):
            bad.append(f"{c.name}: counters differ (TLM, RTL): {diff}")
    assert not bad, f"{len(bad)} problem(s):\n" + "\n".join(bad)


def level_tests(cases: Sequence[Case], cfg: HwConfig) -> tuple[Any, Any, Any, Any]:
    """The four module-level items every unit file binds, for ``cases`` on ``cfg``:
    ``test_iss, test_tlm, rtl_results, test_rtl_matches_tlm = level_tests(CASES, CFG)``
    (the ISS and TLM one case at a time; the RTL all cases in one simulator process, as a
    module-scoped fixture that other RTL tests of the file may use too)."""

    @pytest.mark.parametrize("case", cases, ids=case_ids(cases))
    def test_iss(case: Case) -> None:
        check_iss(case)

    @pytest.mark.parametrize("case", cases, ids=case_ids(cases))
    def test_tlm(case: Case) -> None:
        check_tlm(case)

    @pytest.fixture(scope="module")
    def rtl_results() -> list[RunResult]:
        return run_rtl(cases, cfg)

    @needs_rtl
    def test_rtl_matches_tlm(rtl_results: list[RunResult]) -> None:
        check_rtl(cases, rtl_results)

    return test_iss, test_tlm, rtl_results, test_rtl_matches_tlm
