"""The GEMM core on the TLM (``sim/tlm/gemm.py``) and the ISS, against the contract of
docs/microarch.md "GEMM" (semantics, errors, timing, counters, probes).

* Outputs and errors: random GEMM programs (micro-op, input and weight loads with padding,
  reset and accumulate GEMMs with random factors, ALU and STORE) give the same outputs, error
  code, pc and GEMM_OPS on the TLM and the ISS, and the outputs of a plain loop-by-loop numpy
  reference written here, independently of ``hw.gemm_numpy``.
* Timing: a GEMM's EXEC is ``N + 2 + frozen cycles``, the frozen cycles being those in which LOAD
  writes the accumulator, and a faulting iteration k raises its error in the (k+2)-th free cycle.
  The oracle is a cycle-by-cycle simulation of the U -> A -> E pipeline written here; LOAD's
  write cycles come from the TLM's trace (its bursts and its EXEC start) by the documented
  rule (a vector is written at its last beat, a pad vector in its own cycle), not from the
  TLM's port plan. Sweeping the GEMM's start and length across a concurrent LOAD into ACC
  freezes the pipeline at its first and last free cycle, during a fault's A stage and in
  iteration 0.
* Counters and probes: GEMM_BUSY, GEMM_OPS, COMPUTE_WAIT, ``dbg_gemm_busy`` in the VCD and the
  Perfetto slice; LOAD's entry size per buffer; only a LOAD into ACC freezes the compute unit.
* Cost: O(1) scheduler events per GEMM instruction, whatever its loop length.
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest

from hw import csr
from hw.assembler import Assembler, with_insns
from hw.config import load_config
from hw.gemm_numpy import gemm_indices, run_gemm
from hw.isa import Gemm
from hw.program import Program
from sim.iss import run_reference
from sim.tlm import TlmModel, run_program

ADDR = {c.name: c.addr for c in csr.csr_map(16)}


# ---- helpers ------------------------------------------------------------------------------------
def run_traced(prog: Program, model: TlmModel | None = None) -> TlmModel:
    """Run ``prog`` on a traced TLM (a fresh one, or ``model`` again) and return the model."""
    m = model or TlmModel(prog.config, trace=True)
    m.load_dram(prog.dram_image())
    for name, value in prog.regs:
        m.write_csr(csr.csr_by_name(prog.config.max_regions)[name].addr, value)
    m.run()
    return m


def reference_gemm(acc: np.ndarray, inp: np.ndarray, wgt: np.ndarray, uops: list[tuple[int, int, int]],
                   g: dict) -> None:
    """GEMM by the ISA's text, one iteration at a time (int64, wrapped to int32 at each write)."""
    for i in range(g.get("iter_out", 1)):
        for j in range(g.get("iter_in", 1)):
            for u in range(g.get("uop_begin", 0), g.get("uop_end", 1)):
                a0, x0, w0 = uops[u]
                a = a0 + i * g.get("acc_factor_out", 0) + j * g.get("acc_factor_in", 0)
                x = x0 + i * g.get("inp_factor_out", 0) + j * g.get("inp_factor_in", 0)
                w = w0 + i * g.get("wgt_factor_out", 0) + j * g.get("wgt_factor_in", 0)
                if g.get("reset"):
                    acc[a] = 0
                else:
                    v = acc[a].astype(np.int64) + wgt[w].astype(np.int64) @ inp[x].astype(np.int64)
                    acc[a] = ((v + 2**31) % 2**32 - 2**31).astype(np.int32)


def pipeline_oracle(x: int, n: int, taken: set[int], fault_k: int | None = None) -> tuple[str, int, int]:
    """docs/microarch.md "GEMM timing", cycle by cycle from EXEC's first cycle ``x``: the U, A and E
    stages advance together in every cycle not in ``taken`` (LOAD writes the accumulator). Returns
    ``("end", last EXEC cycle, E stages)`` or ``("fault", error cycle, E stages up to it)``."""
    if n == 0:
        return "end", x, 0
    u = a = e = None
    nxt, ops, c = 0, 0, x
    while True:
        if c not in taken:
            e, a, u = a, u, (nxt if nxt < n else None)
            nxt += 1
            ops += e is not None
            if a is not None and a == fault_k:
                return "fault", c, ops
            if e == n - 1:
                return "end", c, ops
        c += 1


def acc_write_cycles(m: TlmModel, insn) -> set[int]:
    """The cycles in which ``insn``, the run's last LOAD (into ACC), writes a vector, from the
    TLM's timeline: its EXEC start (the last rise of ``dbg_load_busy``), then padding in tile
    order (one cycle per pad vector) and a data vector at its last beat (beat b of a burst granted
    at g arrives at g + 1 + Lr + b), for the bursts granted so far (ended ones from the trace, the
    tenure under way at a halt from the port). One data row, no y padding."""
    cfg, T = m.cfg, m.timing
    assert insn.y_size == 1 and insn.y_pad_0 == insn.y_pad_1 == 0
    t_exec = max(t for t, v in m.tracer.busys["load"] if v)
    bpe = cfg.beats_per_elem("ACC")
    taken = set(range(t_exec, t_exec + insn.x_pad_0))
    grants = [(s, n) for client, _w, s, _e, n in m.tracer.bursts() if client == "load" and s >= t_exec]
    seg = m.port.cur
    if seg is not None and seg.client == "load":
        grants += list(zip(seg.grants()[:seg.cut].tolist(), seg.beats[:seg.cut].tolist()))
    arrivals = [g + 1 + T.read_latency + b for g, n in sorted(grants) for b in range(n)]
    taken |= {arrivals[(v + 1) * bpe - 1] for v in range(insn.x_size) if (v + 1) * bpe <= len(arrivals)}
    return taken


def gemm_windows(m: TlmModel) -> list[tuple[int, int]]:
    """``(first, end)`` of every GEMM EXEC from the ``dbg_gemm_busy`` timeline (end exclusive;
    None when the run stopped inside it)."""
    out, start = [], None
    for t, v in m.tracer.busys["gemm"]:
        if v:
            start = t
        else:
            out.append((start, t))
            start = None
    if start is not None:
        out.append((start, None))
    return out


# ---- hand-computed cases --------------------------------------------------------------------------
def _isolated(cfg, n_uop: int, iters: int, reset: bool = False, extra: dict | None = None) -> Program:
    """LOAD micro-ops, inputs, weights and the accumulator, then one GEMM alone (nothing else
    touches the accumulator while it runs), STORE, FINISH."""
    B = cfg.block
    rng = np.random.default_rng(n_uop * 31 + iters)
    asm = Assembler(cfg, "gemm_alone")
    u = asm.uops("u", [(k % 4, k % 4, k % 2) for k in range(n_uop)])
    ti = asm.input("inp", rng.integers(-128, 128, (4, B), dtype=np.int8))
    tw = asm.input("wgt", rng.integers(-128, 128, (2, B, B), dtype=np.int8))
    ta = asm.input("acc", rng.integers(-1000, 1000, (4, B), dtype=np.int32))
    out = asm.output("out", (4, B))
    asm.load(u, x=n_uop, buf="UOP")
    asm.load(ti, x=4, buf="INP")
    asm.load(ta, x=4)
    asm.load(tw, x=2, buf="WGT", push_next=True)
    asm.gemm(pop_prev=True, push_next=True, reset=reset, uop_begin=0, uop_end=n_uop, iter_out=iters,
             **(extra or {}))
    asm.store(out, x=4, pop_prev=True)
    asm.finish()
    return asm.program()


@pytest.mark.parametrize("n_uop,iters,reset", [(1, 1, False), (3, 5, False), (4, 1, True), (2, 50, False)])
def test_exec_is_n_plus_2_when_alone(n_uop, iters, reset):
    cfg = load_config("small")
    m = run_traced(_isolated(cfg, n_uop, iters, reset))
    n = n_uop * iters
    c = m.counters()
    assert m.error is None
    assert c["gemm_busy"] == n + 2 and c["compute_wait"] == 0
    assert c["gemm_ops"] == (0 if reset else n)
    assert (m.read_csr(ADDR["GEMM_BUSY"]), m.read_csr(ADDR["GEMM_OPS"])) == (c["gemm_busy"], c["gemm_ops"])
    (x, end), = gemm_windows(m)
    assert end - x == n + 2
    # the instruction's own EXECUTE slice in the Perfetto data agrees
    t_exec, t_end = next((te, tp) for unit, pc, insn, _p, te, tp in m.tracer.insns if insn.MNEMONIC == "GEMM")
    assert (t_exec, t_end) == (x, end)


@pytest.mark.parametrize("fields", [dict(iter_out=0), dict(iter_in=0), dict(uop_begin=3, uop_end=3),
                                    dict(uop_begin=5, uop_end=2), dict(iter_out=0, uop_end=133)])
def test_no_iterations_is_one_cycle(fields):
    """N = 0: EXEC 1 cycle, no fault even with uop_end past the buffer (small: 128 micro-ops) or
    micro-ops never loaded, nothing written."""
    cfg = load_config("small")
    fields = dict(fields)
    n_uop = 4
    B = cfg.block
    asm = Assembler(cfg, "gemm_empty")
    acc0 = np.arange(4 * B, dtype=np.int32).reshape(4, B)
    ta = asm.input("acc", acc0)
    out = asm.output("out", (4, B))
    asm.load(ta, x=4, push_next=True)
    g = dict(uop_begin=0, uop_end=n_uop)
    g.update(fields)
    asm.gemm(pop_prev=True, push_next=True, **g)
    asm.store(out, x=4, pop_prev=True)
    asm.finish()
    prog = asm.program()
    m = run_traced(prog)
    assert m.error is None
    c = m.counters()
    assert (c["gemm_busy"], c["gemm_ops"], c["compute_wait"]) == (1, 0, 0)
    assert [e - s for s, e in gemm_windows(m)] == [1]
    r = run_reference(prog)
    assert r.error is None and np.array_equal(r.outputs["out"], acc0.astype(np.int8))
    assert np.array_equal(prog.read_outputs(m.dram)["out"], acc0.astype(np.int8))


def test_wait_checks_the_micro_op_range():
    """N > 0 and uop_end > UOP_DEPTH: ERR_SRAM_RANGE in the first WAIT cycle, before EXEC."""
    cfg = load_config("small")
    prog = _isolated(cfg, 2, 1)
    insns = list(prog.insns)
    k = next(i for i, x in enumerate(insns) if x.MNEMONIC == "GEMM")
    bad = with_insns(prog, insns[:k] + [dataclasses.replace(insns[k], uop_begin=cfg.uop_depth - 1,
                                                             uop_end=cfg.uop_depth + 1)] + insns[k + 1:])
    m = run_traced(bad)
    assert (m.error.code, m.error.pc, m.error.unit) == (csr.ERR_SRAM_RANGE, k, "compute")
    assert m.counters()["gemm_busy"] == 0 and gemm_windows(m) == []
    r = run_reference(bad)
    assert (r.error["code"], r.error["pc"]) == (csr.ERR_SRAM_RANGE, k)


# ---- the pipeline against a concurrent LOAD into ACC ------------------------------------------------
def _contended(cfg, n_a: int, n_b: int, pad: int, fault_at: int | None) -> tuple[Program, int]:
    """GEMM A (reset, ``n_a`` iterations) then GEMM B (``n_b`` micro-ops, accumulate; micro-op
    ``fault_at`` names an unloaded weight block), while a LOAD into ACC (``pad`` left pads, then
    3 data vectors) runs with no token between them: B's window slides across LOAD's writes as
    ``n_a`` and ``pad`` vary. Returns the Program and the LOAD's pc."""
    B = cfg.block
    rng = np.random.default_rng(7)
    asm = Assembler(cfg, "gemm_contended")
    uops = [(0, 0, 0)] + [(k % 4, k % 4, (5 if k == fault_at else k % 2)) for k in range(n_b)]
    u = asm.uops("u", uops)
    ti = asm.input("inp", rng.integers(-128, 128, (4, B), dtype=np.int8))
    tw = asm.input("wgt", rng.integers(-128, 128, (2, B, B), dtype=np.int8))
    ta = asm.input("acc", rng.integers(-1000, 1000, (3, B), dtype=np.int32))
    asm.load(u, x=len(uops), buf="UOP")
    asm.load(ti, x=4, buf="INP")
    asm.load(tw, x=2, buf="WGT", push_next=True)
    asm.gemm(pop_prev=True, reset=True, uop_begin=0, uop_end=1, iter_out=n_a)
    asm.gemm(uop_begin=1, uop_end=1 + n_b)
    pc_load = asm.load(ta, x=3, sram=32, x_pad_0=pad)
    asm.finish()
    return asm.program(), pc_load


def test_frozen_cycles_match_the_pipeline_oracle():
    cfg = load_config("small")
    seen = {"first": 0, "last": 0, "after_end": 0, "inside": 0, "fault_frozen": 0, "fault_0_frozen": 0}
    for fault_at in (None, 0, 2):
        for n_a in (1, 2, 3, 5, 7, 8):  # slides B's start across LOAD's writes (pads fall in A)
            for pad in (0, 13):
                for n_b in (1, 2, 3, 4, 6):
                    if fault_at is not None and fault_at >= n_b:
                        continue
                    prog, pc_load = _contended(cfg, n_a, n_b, pad, fault_at)
                    m = run_traced(prog)
                    taken = acc_write_cycles(m, prog.insns[pc_load])
                    (xa, ea), (xb, eb) = gemm_windows(m)
                    kind_a, last_a, _ = pipeline_oracle(xa, n_a, taken)
                    assert kind_a == "end" and ea == last_a + 1
                    kind, c_b, ops_b = pipeline_oracle(xb, n_b, taken, fault_at)
                    frozen_a = sum(1 for c in range(xa, ea) if c in taken)
                    frozen_b = sum(1 for c in range(xb, c_b + 1) if c in taken)
                    cnt = m.counters()
                    if fault_at is None:
                        assert m.error is None and kind == "end" and eb == c_b + 1
                        assert eb - xb == n_b + 2 + frozen_b
                        seen["first"] += xb in taken
                        seen["last"] += (xb + n_b + 1) in taken
                        seen["after_end"] += eb in taken
                        seen["inside"] += any(xb <= c <= c_b for c in taken)
                    else:
                        assert kind == "fault" and eb is None
                        assert (m.error.code, m.error.pc, m.error.cycle) == (csr.ERR_UNLOADED, 4, c_b)
                        assert m.cycles >= c_b + 1
                        seen["fault_frozen"] += (xb + fault_at + 1) in taken  # A would be there unfrozen
                        seen["fault_0_frozen"] += fault_at == 0 and (xb + 1) in taken
                    assert cnt["gemm_busy"] == (ea - xa) + (c_b - xb + 1)
                    assert cnt["compute_wait"] == frozen_a + frozen_b
                    assert cnt["gemm_ops"] == ops_b == (n_b if fault_at is None else fault_at)
    # the sweep froze the pipeline in every corner the contract names
    assert all(v > 0 for v in seen.values()), seen


def _late_pads(cfg, delay: int, n_b: int, fault_at: int | None) -> tuple[Program, int]:
    """GEMM B (``n_b`` iterations, micro-op ``fault_at`` names an unloaded weight block) starts,
    then LOAD, ``delay`` cycles of INP padding later, writes 3 ACC pad vectors: their port use is
    registered in the very cycle it begins, possibly B's planned last free cycle or A stage."""
    B = cfg.block
    asm = Assembler(cfg, "gemm_late_pads")
    uops = [(k % 4, k % 4, (5 if k == fault_at else k % 2)) for k in range(n_b)]
    u = asm.uops("u", uops)
    ti = asm.input("inp", np.ones((4, B), np.int8))
    tw = asm.input("wgt", np.ones((2, B, B), np.int8))
    asm.load(u, x=n_b, buf="UOP")
    asm.load(ti, x=4, buf="INP")
    asm.load(tw, x=2, buf="WGT", push_next=True)
    asm.gemm(pop_prev=True, uop_end=n_b)
    asm.load(0, y=0, x=1, buf="INP", sram=32, y_pad_0=delay)  # padding only: `delay` cycles
    pc = asm.load(0, y=0, x=1, sram=40, y_pad_0=1, x_pad_0=1, x_pad_1=1)  # 3 ACC pad vectors
    asm.finish()
    return asm.program(), pc


def test_port_use_registered_in_the_gemms_own_cycle():
    """LOAD's padding that starts in the cycle of B's last free cycle or of its faulting A stage
    (registered in that cycle) still freezes it: the end and the error move by the pad cycles."""
    cfg = load_config("small")
    hit = {"end": 0, "fault": 0}
    for fault_at in (None, 0, 6):
        for delay in range(0, 12):
            prog, pc = _late_pads(cfg, delay, 8, fault_at)
            m = run_traced(prog)
            (xb, eb), = gemm_windows(m)
            starts = [t for t, v in m.tracer.busys["load"] if v]  # EXEC starts of the 5 LOADs
            if len(starts) < 5 or (m.error is not None and m.error.cycle < starts[4]):
                assert fault_at is not None
                continue  # the error came before the ACC pads started
            x_l = starts[4]
            taken = set(range(x_l, x_l + 3))
            kind, c, ops = pipeline_oracle(xb, 8, taken, fault_at)
            if fault_at is None:
                assert m.error is None and eb == c + 1 and m.counters()["compute_wait"] == len(taken & set(range(xb, eb)))
                hit["end"] += x_l == xb + 8 + 1  # the pads begin in the would-be last free cycle
            else:
                assert (m.error.code, m.error.cycle, m.counters()["gemm_ops"]) == (csr.ERR_UNLOADED, c, ops)
                hit["fault"] += x_l == xb + fault_at + 1  # ... in the would-be A stage of the fault
    assert hit["end"] and hit["fault"], hit


# ---- random programs: TLM = ISS = a plain reference ------------------------------------------------
def random_gemm_program(cfg, rng: np.random.Generator, fault: str | None = None) -> tuple[Program, dict]:
    """A random valid GEMM program (or one with the named fault) and the plain reference's outputs."""
    B = cfg.block
    n_inp = int(rng.integers(2, min(12, cfg.inp_depth // 2)))
    n_wgt = int(rng.integers(1, min(6, cfg.wgt_depth)))
    n_acc = int(rng.integers(2, 12))
    n_uop = int(rng.integers(1, 7))
    uops = [(int(rng.integers(0, n_acc)), int(rng.integers(0, n_inp)), int(rng.integers(0, n_wgt)))
            for _ in range(n_uop)]
    inp = rng.integers(-128, 128, (n_inp, B), dtype=np.int8)
    wgt = rng.integers(-128, 128, (n_wgt, B, B), dtype=np.int8)
    acc0 = rng.integers(-2**31, 2**31, (n_acc, B), dtype=np.int64).astype(np.int32)
    # on chip: the micro-ops after `up` pads (valid (0,0,0) micro-ops), the inputs after `ip` and
    # the weights after `wb` zero pads; the micro-ops' fields point where LOAD puts them
    up, ip, wb = int(rng.integers(0, 3)), int(rng.integers(0, 3)), int(rng.integers(0, 3))
    uops = [(a, x + ip, w + wb) for a, x, w in uops]
    ref_uops = [(0, 0, 0)] * up + uops
    ref_inp = np.concatenate([np.zeros((ip, B), np.int8), inp])
    ref_wgt = np.zeros((wb + n_wgt, B, B), np.int8)
    ref_wgt[wb:] = wgt
    asm = Assembler(cfg, "gemm_random")
    tu, ti, tw, ta = (asm.uops("u", uops), asm.input("inp", inp), asm.input("wgt", wgt), asm.input("acc", acc0))
    out = asm.output("out", (n_acc, B), "int8")
    asm.load(tu, x=n_uop, buf="UOP", x_pad_0=up)
    asm.load(ti, x=n_inp, buf="INP", x_pad_0=ip)
    asm.load(tw, x=n_wgt, buf="WGT", x_pad_0=wb)  # zero blocks before them, valid like data
    asm.load(ta, x=n_acc, push_next=True)
    acc = acc0.copy()
    gemms = []
    for k in range(int(rng.integers(1, 4))):
        # a loop over the micro-ops (whole or a part) that stays inside the loaded tiles
        b0 = int(rng.integers(0, up + n_uop))
        b1 = int(rng.integers(b0 + 1, up + n_uop + 1))
        g = dict(uop_begin=b0, uop_end=b1, iter_out=int(rng.integers(1, 4)), iter_in=int(rng.integers(1, 3)),
                 reset=bool(rng.random() < 0.2))
        sub = ref_uops[b0:b1]
        for name, col, hi in (("acc", 0, n_acc), ("inp", 1, ip + n_inp), ("wgt", 2, wb + n_wgt)):
            room = hi - 1 - max(t[col] for t in sub)
            fo = int(rng.integers(0, room // max(1, g["iter_out"] - 1) + 1)) if g["iter_out"] > 1 else 0
            room -= fo * (g["iter_out"] - 1)
            fi = int(rng.integers(0, room // max(1, g["iter_in"] - 1) + 1)) if g["iter_in"] > 1 else 0
            g[f"{name}_factor_out"], g[f"{name}_factor_in"] = fo, fi
        gemms.append(g)
    if fault == "unloaded_uop":
        gemms[-1].update(uop_end=up + n_uop + 1, uop_begin=min(gemms[-1]["uop_begin"], up + n_uop - 1))
    elif fault == "unloaded_wgt":  # iteration i = 1 reads past the loaded blocks (inside the buffer)
        gemms[-1].update(reset=False, iter_out=2, wgt_factor_out=wb + n_wgt)
    elif fault == "acc_range":
        gemms[-1].update(acc_factor_in=cfg.acc_depth // 2, iter_in=3)
    elif fault == "uop_range":
        gemms[-1].update(uop_end=cfg.uop_depth + 1, uop_begin=cfg.uop_depth - 1)
    for k, g in enumerate(gemms):
        asm.gemm(pop_prev=k == 0, **g)
        if fault is None:
            reference_gemm(acc, ref_inp, ref_wgt, ref_uops, g)
    if rng.random() < 0.5:
        imm = int(rng.integers(-5, 5))
        asm.alu("ADD", imm=imm, iter_out=n_acc, dst_factor_out=1)
        acc = ((acc.astype(np.int64) + imm + 2**31) % 2**32 - 2**31).astype(np.int32)
    asm.alu("ADD", imm=0, iter_out=0, push_next=True)
    asm.store(out, x=n_acc, pop_prev=True)
    asm.finish()
    return asm.program(), {"out": acc.astype(np.int8)}


@pytest.mark.parametrize("config", ["small", "default"])
def test_random_programs_tlm_equals_iss_and_reference(config):
    cfg = load_config(config)
    rng = np.random.default_rng(15)
    ops = 0
    for _ in range(25):
        prog, want = random_gemm_program(cfg, rng)
        t = run_program(prog, raise_on_error=False)
        r = run_reference(prog)
        assert t.error is None and r.error is None, (t.error, r.error)
        assert np.array_equal(t.outputs["out"], want["out"]) and np.array_equal(r.outputs["out"], want["out"])
        assert t.counters["gemm_ops"] == r.counters["gemm_ops"]
        assert t.counters["dma_rd_bytes"] == r.counters["dma_rd_bytes"]
        ops += t.counters["gemm_ops"]
    assert ops > 100


@pytest.mark.parametrize("fault,code", [("unloaded_uop", csr.ERR_UNLOADED), ("unloaded_wgt", csr.ERR_UNLOADED),
                                        ("acc_range", csr.ERR_SRAM_RANGE), ("uop_range", csr.ERR_SRAM_RANGE)])
def test_random_faults_tlm_equals_iss(fault, code):
    cfg = load_config("small")
    rng = np.random.default_rng(hash(fault) % 1000)
    for _ in range(8):
        prog, _ = random_gemm_program(cfg, rng, fault)
        pc = max(k for k, i in enumerate(prog.insns) if i.MNEMONIC == "GEMM")
        t = run_program(prog, raise_on_error=False)
        r = run_reference(prog)
        assert t.error is not None and r.error is not None
        assert (t.error["code"], t.error["pc"]) == (r.error["code"], r.error["pc"]) == (code, pc), (t.error, r.error)
        assert t.error["unit"] == "compute"
        assert t.counters["gemm_ops"] == r.counters["gemm_ops"]


def conv_program(cfg, tw: int, tc: int, th: int, to: int, fault: bool = False,
                 shuffle: bool = False) -> tuple[Program, dict, int]:
    """One 3x3-convolution GEMM as the compiler's engine writes it (micro-ops: output column, input
    channel block, tap; loop: output rows x output channel blocks), thousands of iterations; with
    ``fault`` the last weight block is not loaded, so the GEMM stops inside the first row of the
    last output channel block; with ``shuffle`` the micro-ops are in random order (no run
    structure). Returns the Program, the expected accumulator and the iterations applied."""
    B = cfg.block
    rng = np.random.default_rng(tw * 100 + tc * 10 + th + to)
    c, ci, ky, kx = np.meshgrid(np.arange(tw), np.arange(tc), np.arange(3), np.arange(3), indexing="ij")
    twi = tw + 2
    uops = np.stack([c.ravel(), (ci * (twi * 3) + ky * twi + c + kx).ravel(), ((ci * 3 + ky) * 3 + kx).ravel()], 1)
    if shuffle:
        uops = uops[rng.permutation(len(uops))]
    uops = [tuple(int(v) for v in r) for r in uops]
    n_u, n_w = len(uops), to * tc * 9
    n_inp = tc * 3 * twi + (th - 1) * twi + 1
    inp = rng.integers(-128, 128, (n_inp, B), dtype=np.int8)
    wgt = rng.integers(-128, 128, (n_w, B, B), dtype=np.int8)
    acc0 = rng.integers(-2**20, 2**20, (th * tw * to, B), dtype=np.int32)
    asm = Assembler(cfg, "gemm_conv")
    tu, ti, tw_, ta = asm.uops("u", uops), asm.input("inp", inp), asm.input("wgt", wgt), asm.input("acc", acc0)
    out = asm.output("out", acc0.shape)
    asm.load(tu, x=n_u, buf="UOP")
    asm.load(ti, x=n_inp, buf="INP")
    asm.load(tw_, x=n_w - fault, buf="WGT")
    asm.load(ta, x=len(acc0), push_next=True)
    g = dict(uop_end=n_u, iter_out=th, iter_in=to, acc_factor_out=tw, acc_factor_in=th * tw, inp_factor_out=twi,
             wgt_factor_in=tc * 9)
    asm.gemm(pop_prev=True, push_next=True, **g)
    asm.store(out, x=len(acc0), pop_prev=True)
    asm.finish()
    n = th * to * n_u
    if fault:  # iteration (i=0, j=to-1, u) with the first micro-op reading the last block of its group
        n = (to - 1) * n_u + next(u for u, t in enumerate(uops) if t[2] == tc * 9 - 1)
    acc, k = acc0.copy(), 0
    for i in range(th):
        for j in range(to):
            for a0, x0, w0 in uops:
                if k < n:
                    reference_gemm(acc, inp, wgt, [(a0 + i * tw + j * th * tw, x0 + i * twi, w0 + j * tc * 9)],
                                   dict(uop_end=1))
                k += 1
    return asm.program(), {"out": acc}, n


@pytest.mark.parametrize("shape,shuffle", [((6, 2, 5, 3), False), ((4, 3, 4, 2), True), ((8, 1, 7, 2), False)])
def test_large_gemms_equal_the_plain_reference(shape, shuffle):
    """Thousands of iterations in one GEMM (the batched matrix products of ``hw.gemm_numpy``):
    the TLM and the ISS equal the plain loop; a fault inside a row, after whole rows, leaves
    exactly the iterations before it applied (the accumulator read from the TLM after the error)."""
    cfg = load_config("default")
    prog, want, n = conv_program(cfg, *shape, shuffle=shuffle)
    t, r = run_program(prog), run_reference(prog)
    assert np.array_equal(t.outputs["out"], want["out"].astype(np.int8))
    assert np.array_equal(r.outputs["out"], want["out"].astype(np.int8))
    assert t.counters["gemm_ops"] == r.counters["gemm_ops"] == n >= 256
    prog, want, k = conv_program(cfg, *shape, fault=True, shuffle=shuffle)
    m = run_traced(prog)
    assert m.error.code == csr.ERR_UNLOADED and f"iteration {k}" in m.error.message and k % (shape[0] * shape[1] * 9)
    assert np.array_equal(m.acc[:len(want["out"])], want["out"])
    assert m.counters()["gemm_ops"] == run_reference(prog).counters["gemm_ops"] == k


def test_gemm_data_path_equals_the_iteration_loop():
    """The data path the TLM calls (``hw.gemm_numpy.run_gemm``) on convolution-shaped loops (runs
    of micro-ops into one output, one or several weight groups, broken runs, broken weight
    patterns, a fault cutting the loop anywhere, odd sums past 2**24) equals adding the iterations
    one by one with 32-bit wrap."""
    rng = np.random.default_rng(3)
    for case in range(41):
        B = int(rng.choice([8, 16]))
        tw, tc, th, to = (int(v) for v in rng.integers(1, 6, 4))
        if case == 40:  # runs of 8 x 9 x 16 = 1152 products near 127 x 127: odd sums past 2**24
            B, tw, tc, th, to = 16, 2, 8, 2, 1
        c, ci, tap = np.meshgrid(np.arange(tw), np.arange(tc), np.arange(9), indexing="ij")
        uops = np.stack([c.ravel(), (ci * 40 + tap + c).ravel(), (ci * 9 + tap).ravel()], 1)
        if case % 4 == 1:
            uops[:, 0] = rng.integers(0, 3, len(uops))    # runs broken, accumulator indices repeat
        if case % 4 == 2:
            uops[:, 2] = rng.integers(0, 60, len(uops))   # no weight pattern
        g = Gemm(uop_end=len(uops), iter_out=th, iter_in=to, acc_factor_out=tw * (case % 3 != 0),
                 acc_factor_in=th * tw, inp_factor_out=7, inp_factor_in=case % 2,
                 wgt_factor_out=case % 5 == 4, wgt_factor_in=tc * 9 * (case % 3 != 1))
        _u, a, x, w = gemm_indices(g, uops)
        inp = rng.integers(-128, 128, (512, B), dtype=np.int8)
        wgt = rng.integers(-128, 128, (256, B, B), dtype=np.int8)
        if case % 7 == 0 or case == 40:
            inp[:], wgt[:] = (127, 127) if case % 2 == 0 else (-128, -128)  # the largest sums
            wgt[0, :, 0] = 126  # one even product: an odd sum, which float32 cannot hold past 2**24
        wgt_loaded = np.ones(len(wgt), dtype=bool)
        if not (case % 2 or case == 40):  # the first weight block of a random iteration is missing
            wgt_loaded[w[int(rng.integers(0, a.size))]] = False
        stop = int(np.argmin(wgt_loaded[w])) if not wgt_loaded[w].all() else a.size
        acc0 = rng.integers(-2**31, 2**31, (256, B), dtype=np.int64).astype(np.int32)
        got, want = acc0.copy(), acc0.astype(np.int64)
        depths = SimpleNamespace(acc_depth=256, inp_depth=512, wgt_depth=256)
        applied, fault = run_gemm(got, inp, wgt, uops, g, depths, np.ones(len(uops), dtype=bool), wgt_loaded)
        assert applied == stop and (fault is None) == (stop == a.size)
        for k in range(stop):
            want[a[k]] += wgt[w[k]].astype(np.int64) @ inp[x[k]].astype(np.int64)
        assert np.array_equal(got, ((want + 2**31) % 2**32 - 2**31).astype(np.int32)), case


def test_repeated_gemm_word_over_reloaded_micro_ops():
    """The same GEMM word three times: twice over one micro-op table (indices reused), then over a
    table LOAD rewrote in between (new indices): TLM = ISS = the plain loop."""
    cfg = load_config("small")
    B = cfg.block
    rng = np.random.default_rng(9)
    inp = rng.integers(-128, 128, (8, B), dtype=np.int8)
    wgt = rng.integers(-128, 128, (4, B, B), dtype=np.int8)
    first, second = [(0, 1, 2), (1, 3, 0), (2, 5, 3)], [(2, 0, 1), (0, 7, 3), (1, 2, 2)]
    asm = Assembler(cfg, "gemm_reloaded_uops")
    t1, t2 = asm.uops("u1", first), asm.uops("u2", second)
    ti, tw = asm.input("inp", inp), asm.input("wgt", wgt)
    out = asm.output("out", (4, B))
    g = dict(uop_end=3, iter_out=2, acc_factor_out=1, inp_factor_out=0)
    asm.load(t1, x=3, buf="UOP")
    asm.load(ti, x=8, buf="INP")
    asm.load(tw, x=4, buf="WGT", push_next=True)
    asm.gemm(reset=True, uop_end=1, iter_out=4, acc_factor_out=1, pop_prev=True)
    asm.gemm(**g)
    asm.gemm(**g, push_prev=True)
    asm.load(t2, x=3, buf="UOP", pop_next=True, push_next=True)
    asm.gemm(**g, pop_prev=True, push_next=True)
    asm.store(out, x=4, pop_prev=True)
    asm.finish()
    prog = asm.program()
    acc = np.zeros((4, B), np.int32)
    for uops in (first, first, second):
        reference_gemm(acc, inp, wgt, uops, g)
    t, r = run_program(prog), run_reference(prog)
    want = acc.astype(np.int8)
    assert np.array_equal(t.outputs["out"], want) and np.array_equal(r.outputs["out"], want)


# ---- valid bits, LOAD per buffer, ports, probes, cost ------------------------------------------------
def test_valid_bits_are_cleared_at_start_and_soft_reset():
    """A second run on the same model without its own loads finds the micro-ops and weights
    invalid (the SRAM contents stay), as after a soft reset."""
    cfg = load_config("small")
    full = _isolated(cfg, 2, 3)
    gemm_only = with_insns(full, [dataclasses.replace(i, pop_prev=False) if i.MNEMONIC == "GEMM" else i
                                  for i in full.insns if i.MNEMONIC != "LOAD"])
    m = run_traced(full)
    bufs = m.gemm_buffers
    assert m.error is None and bufs.uop_valid[:2].all() and bufs.wgt_valid[:2].all()
    m.write_csr(ADDR["CTRL"], csr.CTRL_SOFT_RESET)
    assert not bufs.uop_valid.any() and not bufs.wgt_valid.any()
    m = run_traced(full, m)
    assert m.error is None and bufs.uop_valid[:2].all()
    m = run_traced(gemm_only, m)
    assert m.error is not None and m.error.code == csr.ERR_UNLOADED and m.error.unit == "compute"
    assert "micro-op 0" in m.error.message
    assert bufs.uops[1].tolist() == [1, 1, 1]  # contents kept
    r = run_reference(gemm_only)
    assert (r.error["code"], r.error["pc"]) == (csr.ERR_UNLOADED, m.error.pc)


@pytest.mark.parametrize("buf", ["ACC", "INP", "WGT", "UOP"])
def test_load_entry_size_and_timing_per_buffer(buf):
    """LOAD's unit is the buffer's entry: DMA bytes, bursts of min(MAX_BURST, beats left) and
    LOAD_BUSY = pads + sum(Lr + n + 1) by the documented formula, on every buffer."""
    cfg = load_config("small")
    T = TlmModel(cfg).timing
    eb, bpe = cfg.elem_bytes(buf), cfg.beats_per_elem(buf)
    n, pad = 5, 2
    asm = Assembler(cfg, f"load_{buf.lower()}")
    data = np.arange(n * eb, dtype=np.int64).astype(np.uint8).view(np.int8).reshape(n, eb)
    t = asm.input("t", data)
    asm.load(t, x=n, buf=buf, x_pad_0=pad)
    asm.finish()
    prog = asm.program()
    m = run_traced(prog)
    assert m.error is None
    beats, bursts = n * bpe, []
    while beats:
        bursts.append(min(T.max_burst, beats))
        beats -= bursts[-1]
    c = m.counters()
    assert c["dma_rd_bytes"] == n * eb
    assert c["load_busy"] == pad + sum(T.read_latency + b + 1 for b in bursts)
    r = run_reference(prog)
    assert r.counters["dma_rd_bytes"] == n * eb
    if buf == "INP":
        assert np.array_equal(m.gemm_buffers.inp[pad:pad + n], data.reshape(n, cfg.lanes))
        assert not m.gemm_buffers.inp[:pad].any()
    elif buf == "WGT":
        assert np.array_equal(m.gemm_buffers.wgt[pad:pad + n].reshape(n, -1), data)
        assert m.gemm_buffers.wgt_valid[:pad + n].all() and not m.gemm_buffers.wgt_valid[pad + n:].any()
    elif buf == "UOP":
        raw = data.view(np.uint8).astype(np.int64)
        want = np.stack([raw[:, 2 * f] | raw[:, 2 * f + 1] << 8 for f in range(3)], axis=1)
        assert np.array_equal(m.gemm_buffers.uops[pad:pad + n], want)
        assert m.gemm_buffers.uop_valid[:pad + n].all() and not m.gemm_buffers.uop_valid[pad + n:].any()
    else:
        assert np.array_equal(m.acc[pad:pad + n].view(np.uint8).reshape(n, eb), data.view(np.uint8))


@pytest.mark.parametrize("buf,frozen", [("INP", False), ("WGT", False), ("UOP", False), ("ACC", True)])
def test_only_a_load_into_acc_freezes_compute(buf, frozen):
    """A long GEMM with a concurrent LOAD (no token between them): only LOAD into ACC takes the
    accumulator's write port."""
    cfg = load_config("small")
    B = cfg.block
    asm = Assembler(cfg, "gemm_vs_load")
    u = asm.uops("u", [(0, 0, 0)])
    ti = asm.input("inp", np.ones((1, B), np.int8))
    tw = asm.input("wgt", np.ones((1, B, B), np.int8))
    eb = cfg.elem_bytes(buf)
    tx = asm.input("x", np.zeros((6, eb), np.int8))
    asm.load(u, x=1, buf="UOP")
    asm.load(ti, x=1, buf="INP")
    asm.load(tw, x=1, buf="WGT", push_next=True)
    asm.gemm(pop_prev=True, uop_end=1, iter_out=300)
    asm.load(tx, x=6, buf=buf, sram=40, x_pad_0=3)
    asm.finish()
    m = run_traced(asm.program())
    c = m.counters()
    assert m.error is None and c["gemm_ops"] == 300
    assert (c["compute_wait"] > 0) == frozen
    assert c["gemm_busy"] == 302 + c["compute_wait"]
    if frozen:
        assert c["compute_wait"] == 3 + 6  # every pad and data vector falls inside the GEMM's window


def test_vcd_probe_and_perfetto_slice(tmp_path):
    from vcdvcd import VCDVCD

    cfg = load_config("small")
    prog = _isolated(cfg, 3, 4)
    r = run_program(prog, vcd=tmp_path / "g.vcd", trace=tmp_path / "g.json")
    v = VCDVCD(str(tmp_path / "g.vcd"))
    sig = {s.split(".")[-1]: v[s] for s in v.signals}
    tv = sig["dbg_gemm_busy"].tv
    ones = sum(b[0] - a[0] for a, b in zip(tv, tv[1:]) if a[1] == "1")
    assert ones == r.counters["gemm_busy"] == 12 + 2
    ev = json.loads((tmp_path / "g.json").read_text())["traceEvents"]
    core = [e for e in ev if e["name"] == "GEMM core"]
    assert len(core) == 1 and core[0]["dur"] == 14 and core[0]["args"]["iterations"] == 12


def test_events_per_gemm_do_not_grow_with_its_loop():
    cfg = load_config("default")
    short = run_program(_isolated(cfg, 4, 2))
    long = run_program(_isolated(cfg, 4, 441))  # 1764 iterations
    assert long.counters["gemm_ops"] == 1764 and long.counters["gemm_busy"] == 1766
    assert long.extra["events"] == short.extra["events"]
