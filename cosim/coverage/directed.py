"""Directed coverage tests: what the examples, unit cases and fuzz never make the RTL do.

* ``barrier_one_core``: a BARRIER on a one-core config (it only drains the loads and stores; FETCH
  dispatches nothing after it until it completes), checked on the ISS, the TLM and the RTL;
* the directed cocotb job (``testbench.coverage_job``) on a few Programs: every CSR read back
  (region registers and each core's bank, by address), the read-write ones written back through
  their own (bank) addresses, a soft clear during the fetch and one mid-run; the Program's final
  run from reset must still give the expected outputs (and, on the fast DRAM model, the TLM's
  cycles and counters).

Backpressure (ARREADY/WREADY waits) comes from the protocol back-end's random pauses, which every
coverage run on that back-end has.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from cosim.cluster import Task

DIRECTED_JOB = "testbench.coverage_job"
JOB_EXAMPLES = ("vadd", "matmul")


def barrier_one_core(cfg: Any) -> Any:
    """LOAD, ALU +3, STORE out, BARRIER, ALU +1, STORE out2, FINISH (a one-core config): a tests.units Case."""
    from hw.assembler import Assembler
    from hw.isa import Barrier
    from tests.units.every_level import Case
    from tests.units.programs import narrow, random_vectors

    data = random_vectors(cfg, 2, 77, -1000, 1000)
    asm = Assembler(cfg, "cov_barrier_one_core")
    a = asm.input("a", data)
    out = asm.output("out", (2, cfg.lanes))
    out2 = asm.output("out2", (2, cfg.lanes))
    asm.load(a, x=2, push_next=True)
    asm.alu("ADD", imm=3, iter_out=2, dst_factor_out=1, src_factor_out=1, pop_prev=True, push_next=True)
    asm.store(out, x=2, pop_prev=True)
    asm.add(Barrier())
    asm.alu("ADD", imm=1, iter_out=2, dst_factor_out=1, src_factor_out=1, push_next=True)
    asm.store(out2, x=2, pop_prev=True)
    asm.finish()
    d = data.astype(np.int64)
    return Case(asm.program(expected={"out": narrow(cfg, d + 3), "out2": narrow(cfg, d + 4)}))


def directed_tasks(configs: Sequence[str], mems: Sequence[str], base: dict[str, Any]) -> list[Task]:
    """One task per (config, back-end) of the cocotb back-ends."""
    return [Task(f"directed {c} {m}", "cosim.coverage.campaign:run_task",
                 {**base, "kind": "directed", "config": c, "mem": m}) for c in configs for m in mems]


def run_directed(args: dict[str, Any]) -> dict[str, Any]:
    """Engine task body: the directed tests of one (config, back-end); AssertionError naming every problem."""
    from compiler import examples
    from cosim import models
    from cosim.regress.cells import regression_module
    from hw.config import load_config
    from testbench.rtl_model import run_programs

    regression_module()  # puts the repository on sys.path: the unit-case helpers live in tests/units
    from tests.units.every_level import check_rtl, run_rtl

    cfg = load_config(args["config"])
    mem = args["mem"]
    bad: list[str] = []
    detail: dict[str, Any] = {}
    if cfg.num_cores == 1:
        case = barrier_one_core(cfg)
        for name in ("iss", "tlm"):
            r = getattr(models, name)(case.program)
            for k, want in case.program.expected.items():
                if r.error is not None or not np.array_equal(r.outputs.get(k), want):
                    bad.append(f"{case.name} on {name}: output {k} or error {r.error} wrong")
        try:
            check_rtl([case], run_rtl([case], cfg, mem=mem), cycle_exact=mem == "fast")
        except AssertionError as e:
            bad.append(str(e))
        detail["barrier_one_core"] = "ok"
    cases = [examples.make_case(n, cfg, seed=0) for n in JOB_EXAMPLES]
    res = run_programs([c.program for c in cases], cfg, mem=mem, job_module=DIRECTED_JOB)
    for c, r in zip(cases, res):
        d = r.extra.get("directed") or {}
        if r.error is not None:
            bad.append(f"{c.name}: error {r.error}")
        for k, want in c.expected.items():
            if not np.array_equal(r.outputs.get(k), want):
                bad.append(f"{c.name}: output {k} differs after the soft clears")
        if mem == "fast":
            t = models.tlm(c.program)
            if t.cycles != r.cycles:
                bad.append(f"{c.name}: TLM {t.cycles} cycles, RTL {r.cycles} after the soft clears")
        rb = d.get("readback") or {}
        if rb.get("answered") != rb.get("read"):
            bad.append(f"{c.name}: CSR readback: {rb}")
        for cl in d.get("clears", []):
            if cl.get("idle_after_reads") is None:
                bad.append(f"{c.name}: a soft clear {cl['after_cycles']} cycles after START never reached idle")
        detail[c.name] = d
    assert not bad, "\n".join(bad)
    return detail
