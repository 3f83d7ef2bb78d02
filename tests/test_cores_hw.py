"""Several cores on the TLM and the RTL: hand-made Programs of 2 and 4 cores (DRAM traffic of every
core through the one port, barriers between phases) give the same outputs, cycles and per-core
counters on both; a core that skips a barrier ends the run with ERR_BARRIER on that barrier's waiting
core; a fault in one core stops every core with STATUS naming the core; each unit's faults on each core
alone; a fault, or a soft reset, while a core's posted writes await their B. All RTL runs of a config
in one simulator process (the soft reset's in the directed coverage job's)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hw import csr
from hw.config import _KEYS, HwConfig, load_config, parse_config
from hw.assembler import patched, with_regs
from hw.isa import ALU_OPS, Alu, Barrier, Finish, Gemm, Instruction, Load, Store
from hw.program import Program, concat_streams, plan_layout

try:
    from testbench.rtl_model import rtl_available
    HAVE_RTL = rtl_available()
except Exception:  # noqa: BLE001 - no testbench means no RTL
    HAVE_RTL = False


def cores(n: int, base: str = "small") -> HwConfig:
    data = {k: v for k, v in dataclasses.asdict(load_config(base)).items() if k in _KEYS}
    return parse_config({**data, "num_cores": n, "name": f"{base}x{n}"})


ROWS = 4  # vectors per core in the first phase (ROWS int8 vectors = one int32 vector: PACK)
PACK = 4


def _stream(cfg: HwConfig, k: int, n: int, addr: dict[str, int], *, barrier: bool = True,
            bad_load: bool = False) -> list[Instruction]:
    """Core k: phase 1 loads its ROWS int32 vectors of `a`, adds k+1, stores them (narrowed to int8)
    to its rows of `o`; a barrier; phase 2 loads the rows its neighbour stored (ROWS int8 vectors
    read as one int32 vector), adds k+2 and stores the result to its row of `o2`.
    ``bad_load``: the phase-2 LOAD reads past the end of DRAM."""
    vec, out = cfg.acc_vec_bytes, cfg.out_vec_bytes
    nb = (k + 1) % n
    src2 = cfg.dram_bytes // vec if bad_load else (addr["o"] + nb * ROWS * out) // vec

    def phase(src: int, rows: int, imm: int, dst: int) -> list[Instruction]:
        return [Load(sram_base=0, dram_base=src, y_size=1, x_size=rows, x_stride=rows, push_next=True),
                Alu(pop_prev=True, alu_op=ALU_OPS["ADD"], use_imm=True, imm=imm, iter_out=1, iter_in=rows,
                    dst_factor_in=1, push_next=True),
                Store(pop_prev=True, sram_base=0, dram_base=dst, y_size=1, x_size=rows, x_stride=rows,
                      push_prev=True),
                Alu(pop_next=True, iter_out=0)]

    s = phase(addr["a"] // vec + k * ROWS, ROWS, k + 1, addr["o"] // out + k * ROWS)
    s += [Barrier()] if barrier else []
    s += phase(src2, 1, k + 2, addr["o2"] // out + k)
    return s + [Finish()]


def program(cfg: HwConfig, name: str, skip: int | None = None, bad_core: int | None = None) -> Program:
    """The Program of :func:`_stream` on every core; ``skip``: that core has no barrier;
    ``bad_core``: that core's phase-2 LOAD reads outside every region."""
    n, L = cfg.num_cores, cfg.lanes
    assert cfg.out_vec_bytes * PACK == cfg.acc_vec_bytes

    def streams(addr: dict[str, int]) -> list[list[Instruction]]:
        return [_stream(cfg, k, n, addr, barrier=k != skip, bad_load=k == bad_core) for k in range(n)]

    count = sum(len(s) for s in streams({"a": 0, "o": 0, "o2": 0}))
    regions = plan_layout(cfg, [("a", "input", (n * ROWS, L), "int32"), ("o", "scratch", (n * ROWS, L), "int8"),
                                ("o2", "output", (n, L), "int8")], count)
    insns, windows = concat_streams(streams({r.name: r.addr for r in regions}))
    p = Program.create(cfg, insns, regions, windows=windows, name=name)
    p.set_input("a", _a(cfg))
    return p


def _a(cfg: HwConfig) -> np.ndarray:
    n, L = cfg.num_cores, cfg.lanes
    return ((np.arange(n * ROWS * L).reshape(n * ROWS, L) * 7919) % 1000 - 500).astype(np.int32)


def expected(cfg: HwConfig) -> dict[str, np.ndarray]:
    """What program(cfg) leaves in `o2` (`o`, read back by the neighbours, is scratch)."""
    n, L = cfg.num_cores, cfg.lanes
    a = _a(cfg).astype(np.int64)
    o = np.concatenate([a[k * ROWS:(k + 1) * ROWS] + k + 1 for k in range(n)]).astype(np.int8)  # C cast
    packed = o.reshape(n, ROWS * L).view("<i4").astype(np.int64)  # each core's rows as one int32 vector
    o2 = np.stack([packed[(k + 1) % n] + k + 2 for k in range(n)]).astype(np.int8)
    return {"o2": o2}


POSTED_STORES = 4  # STOREs of the storing core in posted_stores


def posted_stores(cfg: HwConfig, storing: int, fault: bool) -> Program:
    """Core ``storing`` writes ``POSTED_STORES`` STOREs of ``rows`` x ``x`` accumulator vectors back to back
    (each row one full write burst, posted up to ``dram_writes_in_flight``); the other cores only FINISH.
    ``fault``: another core (0, or 1 when ``storing`` is 0) runs an ALU of about half the STOREs' time,
    then a GEMM whose micro-ops no LOAD wrote: ERR_UNLOADED (at that core's pc 1) while the STOREs' writes
    await their B, which still come (the halt grants nothing new; DONE waits for them). Without a fault,
    a soft reset in the middle of the run orphans the storing core's writes in flight."""
    n, out = cfg.num_cores, cfg.out_vec_bytes
    bad = (1 if storing == 0 else 0) if fault else None
    x = max(1, cfg.max_burst * cfg.bus_bytes // out)  # vectors of one full burst
    rows = max(1, min(16, cfg.acc_depth // x))
    # the STOREs start after the storing core's ALU (rows * x cycles) and take about n + 1 cycles a burst
    delay = rows * x + POSTED_STORES * rows * (x * out // cfg.bus_bytes + 1) // 2

    def streams(o: int) -> list[list[Instruction]]:
        s: list[list[Instruction]] = []
        for k in range(n):
            if k == storing:
                st: list[Instruction] = [Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=k + 1, iter_out=1,
                                             iter_in=rows * x, dst_factor_in=1, push_next=True)]
                st += [Store(pop_prev=j == 0, sram_base=0, dram_base=o // out + j * rows * x, y_size=rows,
                             x_size=x, x_stride=x) for j in range(POSTED_STORES)]
            elif k == bad:  # an ALU on one entry for `delay` cycles, then the GEMM's fault
                st = [Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=1, iter_out=1, iter_in=delay), Gemm(reset=True)]
            else:
                st = []
            s.append(st + [Finish()])
        return s

    count = sum(len(s) for s in streams(0))
    regions = plan_layout(cfg, [("o", "scratch", (POSTED_STORES * rows * x, cfg.lanes), "int8")], count)
    insns, windows = concat_streams(streams(regions[1].addr))
    return Program.create(cfg, insns, regions, windows=windows,
                          name=f"posted_stores_core{storing}" + ("_fault" if fault else ""))


# core k's faulting instruction (the other cores only FINISH), what it raises, and the unit that reports it
FAULTS = {
    "fetch_bad_opcode": ("BAD_OPCODE", "fetch"),       # the word's opcode made 7 (unused)
    "fetch_bad_field": ("BAD_FIELD", "fetch"),         # a LOAD popping from a stage before it (none)
    "load_dram_range": ("DRAM_RANGE", "load"),
    "load_sram_range": ("SRAM_RANGE", "load"),
    "compute_sram_range": ("SRAM_RANGE", "compute"),
    "compute_unloaded": ("UNLOADED", "compute"),
    "compute_deadlock": ("DEADLOCK", "compute"),      # pops a LOAD token nobody pushes
    "store_dram_range": ("DRAM_RANGE", "store"),
    "fetch_insn_range": ("INSN_RANGE", "fetch"),       # the core's window starts at the DRAM's end
}


def fault_on_core(cfg: HwConfig, core: int, kind: str) -> Program:
    """Core ``core`` runs one instruction that faults as ``FAULTS[kind]`` says, then FINISH; the other
    cores only FINISH: the error's code, core and pc (0) must come through that core's lane of every
    error register."""
    vec, out, n = cfg.acc_vec_bytes, cfg.out_vec_bytes, cfg.num_cores

    def insn(a: int) -> Instruction:
        past = cfg.dram_bytes // vec
        return {"fetch_bad_opcode": Alu(iter_out=0),
                "fetch_bad_field": Load(dram_base=a // vec, x_size=1, x_stride=1),  # pop_prev patched in
                "load_dram_range": Load(dram_base=past, x_size=1, x_stride=1),
                "load_sram_range": Load(sram_base=cfg.acc_depth - 1, dram_base=a // vec, x_size=2, x_stride=2),
                "compute_sram_range": Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=1, iter_out=2,
                                          dst_base=cfg.acc_depth - 1, dst_factor_out=1),
                "compute_unloaded": Gemm(),
                "compute_deadlock": Alu(pop_prev=True),
                "store_dram_range": Store(dram_base=cfg.dram_bytes // out, x_size=1, x_stride=1),
                "fetch_insn_range": Finish()}[kind]

    def streams(a: int) -> list[list[Instruction]]:
        return [[insn(a), Finish()] if k == core else [Finish()] for k in range(n)]

    count = sum(len(x) for x in streams(0))
    regions = plan_layout(cfg, [("a", "input", (2, cfg.lanes), "int32")], count)
    insns, windows = concat_streams(streams(regions[1].addr))
    p = Program.create(cfg, insns, regions, windows=windows, name=f"fault_{kind}_core{core}", check_tokens=False)
    p.set_input("a", np.zeros((2, cfg.lanes), np.int32))
    first = windows[core][0]
    if kind == "fetch_bad_opcode":
        return patched(p, {first: (p.isa.encode_word(insns[first]) & ~0x7) | 0x7})
    if kind == "fetch_bad_field":  # a word the ISA's check refuses to build
        return patched(p, {first: p.isa.encode_word(dataclasses.replace(insns[first], pop_prev=True))})
    if kind == "fetch_insn_range":
        return with_regs(p, p.name, **{csr.core_reg("INSN_ADDR_LO", core, n): cfg.dram_bytes})
    return p


# The shipped configs of several cores (read bursts in flight): their RTL builds are the ones the
# examples' TLM-vs-RTL rows and the regression already make, so these runs add no build of their own.
CONFIGS = {"small x2": "small2", "default x4": "quad"}


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[HwConfig, list[Program], list]]:
    """Per config: the Programs (clean, a core skipping its barrier, a fault in core 1, core 1 given an
    empty window) and their (TLM, RTL) results, the RTL ones from one simulator process."""
    from sim.tlm import run_program

    out = {}
    for label, name in CONFIGS.items():
        cfg = load_config(name)
        progs = [program(cfg, "phases"), program(cfg, "skip", skip=1), program(cfg, "fault", bad_core=1),
                 with_regs(program(cfg, "phases"), "empty", CORE1_INSN_COUNT=0)]
        progs += [posted_stores(cfg, k, fault=True) for k in range(cfg.num_cores)] + [program(cfg, "phases_after")]
        progs += [fault_on_core(cfg, k, kind) for k in range(cfg.num_cores) for kind in FAULTS]
        tlm = [run_program(p, raise_on_error=False) for p in progs]
        rtl = None
        if HAVE_RTL:
            from testbench.rtl_model import run_programs
            rtl = run_programs(progs, cfg)
        out[label] = (cfg, progs, tlm, rtl)
    return out


@pytest.mark.parametrize("label", list(CONFIGS))
def test_phases_give_the_neighbours_data_on_every_model(runs, label: str) -> None:
    cfg, progs, tlm, rtl = runs[label]
    assert tlm[0].error is None, tlm[0].error
    want = expected(cfg)
    assert all(np.array_equal(tlm[0].outputs[k], want[k]) for k in want)
    per = tlm[0].extra["cores"]
    assert len(per) == cfg.num_cores and all(c["compute_insns"] == 6 for c in per)  # 2 ALU x 2 + BARRIER + FINISH
    assert {k: sum(c[k] for c in per) for k in per[0]} == tlm[0].counters
    if rtl is None:
        pytest.skip("no RTL")
    for p, t, r in zip(progs, tlm, rtl):
        assert r.cycles == t.cycles, (p.name, t.cycles, r.cycles)
        assert r.counters == t.counters, p.name
        assert r.extra.get("cores") == t.extra.get("cores"), p.name
        assert (r.error or {}).get("name") == (t.error or {}).get("name"), p.name
        if r.error is None:
            assert all(np.array_equal(r.outputs[k], t.outputs[k]) for k in t.outputs), p.name


@pytest.mark.parametrize("label", list(CONFIGS))
def test_a_core_that_skips_the_barrier_is_an_error_not_a_hang(runs, label: str) -> None:
    cfg, progs, tlm, rtl = runs[label]
    for res in [tlm[1]] + ([rtl[1]] if rtl else []):
        e = res.error
        assert e is not None and e["code"] == csr.ERR_BARRIER, (res.model, e)
        # core 1 finished without the barrier: the lowest core waiting at it (core 0) reports it,
        # at its BARRIER's pc (the fifth instruction of its stream)
        assert e["core"] == 0 and e["pc"] == 4, (res.model, e)


@pytest.mark.parametrize("label", list(CONFIGS))
def test_a_fault_in_core_1_stops_every_core(runs, label: str) -> None:
    cfg, progs, tlm, rtl = runs[label]
    for res in [tlm[2]] + ([rtl[2]] if rtl else []):
        e = res.error
        assert e is not None and e["code"] == csr.ERR_DRAM_RANGE and e["core"] == 1, (res.model, e)
        assert e["pc"] == 5, (res.model, e)  # core 1's phase-2 LOAD (after its barrier)
    if rtl:
        assert rtl[2].cycles == tlm[2].cycles


@pytest.mark.parametrize("label", list(CONFIGS))
def test_an_empty_window_is_insn_range_on_every_model(runs, label: str) -> None:
    """A core given no instructions (its INSN_COUNT 0, which the Program format refuses) is not an idle
    core: START's window check fails on that core, ERR_INSN_RANGE at pc 0, on the ISS, TLM and RTL alike
    (a core with nothing to do runs a window holding only its FINISH)."""
    from sim.iss import run_reference

    cfg, progs, tlm, rtl = runs[label]
    for res in [run_reference(progs[3]), tlm[3]] + ([rtl[3]] if rtl else []):
        e = res.error
        assert e is not None and (e["code"], e["core"], e["pc"]) == (csr.ERR_INSN_RANGE, 1, 0), (res.model, e)
    if rtl:
        assert rtl[3].cycles == tlm[3].cycles


@pytest.mark.parametrize("label", list(CONFIGS))
def test_a_fault_while_any_core_has_writes_in_flight(runs, label: str) -> None:
    """An error while core k's STOREs have posted writes awaiting B, for every core k: the halt grants
    nothing new and DONE waits for those B's; the RTL gives the TLM's error, CYCLES and per-core counters,
    and a clean Program after them its outputs."""
    cfg, progs, tlm, rtl = runs[label]
    n = cfg.num_cores
    for k in range(n):
        e = tlm[4 + k].error
        assert e is not None and (e["code"], e["core"], e["pc"]) == (csr.ERR_UNLOADED, int(k == 0), 1), e
        per = tlm[4 + k].extra["writes_in_flight_at_error_per_core"]
        assert per[k] > 0 and sum(per) == per[k], (k, per)  # only the storing core's writes are in flight
    assert tlm[4 + n].error is None
    if rtl is None:
        pytest.skip("no RTL")
    for p, t, r in zip(progs[4:], tlm[4:], rtl[4:]):
        where = [None if x.error is None else (x.error["code"], x.error["core"], x.error["pc"]) for x in (r, t)]
        assert where[0] == where[1], (p.name, where)
        assert r.cycles == t.cycles, (p.name, t.cycles, r.cycles)
        assert r.counters == t.counters, p.name
        assert r.extra.get("cores") == t.extra.get("cores"), p.name
    want = expected(cfg)
    assert all(np.array_equal(rtl[4 + n].outputs[k], want[k]) for k in want)


@pytest.mark.parametrize("label", list(CONFIGS))
def test_every_unit_s_fault_on_every_core(runs, label: str) -> None:
    """Each kind of fault of FETCH, LOAD, compute and STORE raised on each core alone: STATUS and ERR_PC
    name that fault, that core and pc 0 on the TLM and the RTL, in the same cycles."""
    cfg, progs, tlm, rtl = runs[label]
    first = 4 + cfg.num_cores + 1
    for i, (p, t) in enumerate(zip(progs[first:], tlm[first:])):
        core, kind = divmod(i, len(FAULTS))
        name, unit = FAULTS[list(FAULTS)[kind]]
        e = t.error
        assert e is not None and (e["name"], e["core"], e["pc"]) == (name, core, 0), (p.name, e)
        assert e["unit"] == unit, (p.name, e)
        if rtl is not None:
            r = rtl[first + i]
            assert r.error is not None and (r.error["name"], r.error["core"], r.error["pc"]) == (name, core, 0), \
                (p.name, r.error)
            assert r.cycles == t.cycles, (p.name, t.cycles, r.cycles)
    if rtl is None:
        pytest.skip("no RTL")


def test_a_soft_reset_orphans_the_writes_in_flight_of_any_core() -> None:
    """CTRL.SOFT_RESET halfway through a run while core k's posted writes await their B, for every core
    k of quad (the directed coverage job's clear in the middle of the run, fast back-end): the TLM has
    core k's writes in flight all around that cycle; the RTL is busy at the clear and reaches idle within
    the job's bound (the orphaned B's still come and are dropped), and the run from reset after it gives
    the TLM's cycles and counters."""
    from cosim import models
    from sim.tlm import simulate

    if not HAVE_RTL:
        pytest.skip("no RTL")
    cfg = load_config("quad")
    progs = [posted_stores(cfg, k, fault=False) for k in range(cfg.num_cores)]
    tlm = []
    for k, p in enumerate(progs):
        m, _ = simulate(p, trace=True)
        assert m.tracer is not None and m.error is None
        half = (m.cycles or 0) // 2
        writes = [(s, e) for c, w, s, e, _ in m.tracer.bursts() if w and c == f"core{k}.store"]
        assert all(any(s < t <= e for s, e in writes) for t in range(half, half + 64)), (p.name, half)
        tlm.append(models.tlm(p))
    for p, t, r in zip(progs, tlm, models.rtl(progs, cfg, mem="fast", job_module="testbench.coverage_job")):
        clear = r.extra["directed"]["clears"][1]
        assert clear["busy_at_clear"] and clear["idle_after_reads"] is not None, (p.name, clear)
        assert r.error is None and (r.cycles, r.counters) == (t.cycles, t.counters), p.name


def test_one_core_barrier_only_drains() -> None:
    """On one core a BARRIER is FINISH's drain followed by the next instruction."""
    from sim.tlm import run_program

    cfg = load_config("small")
    p = program(cores(1), "one")
    one = Program.create(cfg, p.insns, p.regions, name="one")
    one.set_input("a", p.inputs["a"])
    r = run_program(one)
    want = expected(cores(1))
    assert all(np.array_equal(r.outputs[k], want[k]) for k in want)
    assert r.counters["compute_insns"] == 6


def test_the_port_goes_round_robin_between_cores() -> None:
    """Four cores that all want the port: core 0 first after START, then each core in turn, a burst
    each (a core's second burst of one LOAD waits for the other cores' first)."""
    from sim.tlm import simulate

    m, _ = simulate(program(cores(4, "default"), "phases"), trace=True)
    assert m.tracer is not None
    order = [client for client, _, _, _, _ in m.tracer.bursts()][:12]
    assert order == [f"core{k}.fetch" for k in range(4)] + [f"core{k}.load" for k in range(4)] * 2
    starts = [s for _, _, s, _, _ in m.tracer.bursts()][:12]
    assert starts == sorted(starts) and len(set(starts)) == 12  # one burst at a time
