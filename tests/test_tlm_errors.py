"""TLM faults: each stops the run and names the code, the instruction, the unit and the cycle."""

from __future__ import annotations

import numpy as np
import pytest

from hw import csr
from hw.config import load_config
from hw.assembler import assemble
from hw.isa import ALU_OPS, Alu, Finish, Gemm, Isa, Load, Store
from sim.tlm import Timing, TlmError, TlmModel, run_program

ADDR = {c.name: c.addr for c in csr.csr_map(16)}


def _prog(cfg, insns, nvec=16):
    a = np.arange(nvec * cfg.lanes, dtype=np.int32).reshape(nvec, cfg.lanes)
    tensors = [("a", "input", a.shape, "int32"), ("out", "output", a.shape, "int8")]
    prog = assemble(cfg, insns, tensors, {"a": a})
    return prog, prog.regions


def _model(prog, T=None, patch: dict[int, int] | None = None) -> TlmModel:
    """A model with the Program loaded and started; ``patch`` overwrites instruction words."""
    m = TlmModel(prog.config, T or Timing.from_config(prog.config, calibration=False))
    img = prog.dram_image()
    for pc, word in (patch or {}).items():
        img[16 * pc:16 * pc + 16] = word.to_bytes(16, "little")
    m.load_dram(img)
    for n, v in prog.regs:
        m.write_csr(ADDR[n], v)
    m.run()
    return m


@pytest.fixture
def cfg():
    return load_config("default")


@pytest.fixture
def T(cfg):
    return Timing.from_config(cfg, calibration=False)


def _fetch_end(T, n):
    """End of the first fetch burst (``n`` instructions), the cycle instruction 0 is dispatched."""
    return T.fetch_start_cycles + T.read_burst_cycles(n * T.beats_per_insn)


def _wait_entry(T, d):
    """First WAIT cycle of an instruction dispatched at ``d`` to an idle unit (range checks here)."""
    return d + T.queue_latency_cycles + T.insn_pop_cycles


def test_deadlock_token_never_arrives(cfg, T):
    prog, _ = _prog(cfg, [Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=1, pop_prev=True), Finish()])
    r = run_program(prog, timing=T, raise_on_error=False)
    e = _fetch_end(T, 2)
    assert r.error["code"] == csr.ERR_DEADLOCK and r.error["name"] == "DEADLOCK"
    assert r.error["pc"] == 0 and r.error["unit"] == "compute"
    # stuck from the last change: the ALU waiting (from its WAIT entry), FETCH done (the cycle
    # after its last dispatch); raised deadlock_cycles - 1 later, DONE the cycle after
    t = max(_wait_entry(T, e), e + 2 * T.dispatch_cycles)
    assert r.error["cycle"] == t + T.deadlock_cycles - 1 and r.cycles == t + T.deadlock_cycles
    # the ALU stalls in WAIT from its entry through the DONE cycle
    assert r.counters["compute_stall"] == r.cycles - _wait_entry(T, e) + 1
    assert r.counters["compute_insns"] == 0 and r.counters["compute_busy"] == 0
    with pytest.raises(TlmError) as ei:
        run_program(prog, timing=T)
    assert (ei.value.code, ei.value.pc, ei.value.unit, ei.value.name) == (csr.ERR_DEADLOCK, 0, "compute", "DEADLOCK")
    assert "\n" not in ei.value.message


def test_deadlock_without_finish_reports_insn_count(cfg, T):
    prog, regions = _prog(cfg, [Load(dram_base=0, sram_base=0, y_size=0, x_size=0, x_stride=0)])
    # a LOAD of nothing, no FINISH: everything drains, DONE never rises
    r = run_program(prog, timing=T, raise_on_error=False)
    assert r.error["code"] == csr.ERR_DEADLOCK and r.error["pc"] == 1 and r.error["unit"] is None


def test_deadlock_blocked_push(cfg, T):
    """LOAD pushes more l2c tokens than the queue holds and nobody pops them."""
    n = T.token_queue_depth + 1
    prog, regions = _prog(cfg, [Load(dram_base=0, sram_base=0, y_size=0, x_size=0, x_stride=0, push_next=True)] * n
                          + [Alu(pop_prev=True, pop_next=True, use_imm=True), Finish()])
    r = run_program(prog, timing=T, raise_on_error=False)
    assert r.error["code"] == csr.ERR_DEADLOCK
    assert r.error["pc"] == T.token_queue_depth and r.error["unit"] == "load"  # lowest blocked pc


def test_dram_range_load(cfg, T):
    prog, regions = _prog(cfg, [Load(dram_base=0, sram_base=0), Finish()])
    prog2, regions = _prog(cfg, [Load(sram_base=5, dram_base=regions[1].addr // cfg.acc_vec_bytes + 15,
                                      y_size=1, x_size=2, x_stride=2), Finish()])
    m = _model(prog2, T)
    e = _fetch_end(T, 2)
    assert m.error.code == csr.ERR_DRAM_RANGE and m.error.pc == 0 and m.error.unit == "load"
    assert m.error.cycle == _wait_entry(T, e) and m.cycles == m.error.cycle + T.halt_cycles
    assert not m.acc.any()  # nothing written
    st = m.read_csr(ADDR["STATUS"])
    assert csr.decode_status(st) == {"busy": False, "done": True, "error": True, "err_code": csr.ERR_DRAM_RANGE,
                                     "err_name": "DRAM_RANGE", "err_core": 0}
    assert m.read_csr(ADDR["ERR_PC"]) == 0 and m.irq


def test_dram_range_store_into_input_region(cfg, T):
    _, regions = _prog(cfg, [Finish()] * 2)
    va_out = regions[1].addr // cfg.out_vec_bytes  # the (read-only) input region
    prog, _ = _prog(cfg, [Alu(use_imm=True), Store(dram_base=va_out, y_size=1, x_size=1, x_stride=1), Finish()])
    r = run_program(prog, timing=T, raise_on_error=False)
    assert (r.error["code"], r.error["pc"], r.error["unit"]) == (csr.ERR_DRAM_RANGE, 1, "store")
    assert not r.outputs["out"].any()


def test_sram_range_alu_and_load(cfg, T):
    d = cfg.acc_depth
    prog, _ = _prog(cfg, [Alu(use_imm=True, iter_out=2, iter_in=1, dst_base=d - 1, dst_factor_out=1), Finish()])
    r = run_program(prog, timing=T, raise_on_error=False)
    assert (r.error["code"], r.error["pc"], r.error["unit"]) == (csr.ERR_SRAM_RANGE, 0, "compute")
    assert r.error["cycle"] == _wait_entry(T, _fetch_end(T, 2)) == r.cycles - T.halt_cycles
    prog, regions = _prog(cfg, [Finish(), Finish()])
    va = regions[1].addr // cfg.acc_vec_bytes
    prog, _ = _prog(cfg, [Alu(use_imm=True), Load(sram_base=d - 2, dram_base=va, y_size=1, x_size=2, x_stride=2,
                                                  x_pad_1=1), Finish()])
    r = run_program(prog, timing=T, raise_on_error=False)
    assert (r.error["code"], r.error["pc"], r.error["unit"]) == (csr.ERR_SRAM_RANGE, 1, "load")


def test_bad_opcode_at_dispatch(cfg, T):
    prog, _ = _prog(cfg, [Alu(use_imm=True), Alu(use_imm=True), Finish()])
    m = _model(prog, T, patch={1: 0x7})
    e = _fetch_end(T, 3)
    assert (m.error.code, m.error.pc, m.error.unit) == (csr.ERR_BAD_OPCODE, 1, "fetch")
    assert m.error.cycle == e + 1 * T.dispatch_cycles  # dispatched second
    assert m.cycles == m.error.cycle + T.halt_cycles
    isa = Isa(cfg)
    for word, code in [(isa.encode_word(Finish()) | 1 << 100, csr.ERR_BAD_OPCODE),          # reserved bits
                       (isa.set_field(isa.encode_word(Load()), "LOAD", "pop_prev", 1), csr.ERR_BAD_FIELD),
                       (isa.set_field(isa.encode_word(Store()), "STORE", "push_next", 1), csr.ERR_BAD_FIELD),
                       (isa.set_field(isa.encode_word(Alu()), "ALU", "alu_op", len(ALU_OPS)), csr.ERR_BAD_OPCODE),
                       (isa.encode_word(Store(x_pad_0=1)), csr.ERR_BAD_FIELD),
                       (isa.encode_word(Store(buf=1)), csr.ERR_BAD_FIELD),
                       (isa.encode_word(Store(buf=3)), csr.ERR_BAD_FIELD)]:  # buffer 3 is UOP, not STORE's
        m = _model(prog, T, patch={1: word})
        assert (m.error.code, m.error.pc, m.error.unit) == (code, 1, "fetch"), hex(word)
    # GEMM and LOAD into every buffer are dispatched (what they do then is their unit's business)
    for word in [isa.encode_word(Gemm())] + [isa.encode_word(Load(buf=b)) for b in range(4)]:
        m = _model(prog, T, patch={1: word})
        assert m.error is None or m.error.unit != "fetch", (hex(word), m.error)


def test_dispatch_checks_in_rtl_order(cfg, T):
    """A word with several faults reports the first in the RTL's order (docs/microarch.md)."""
    prog, _ = _prog(cfg, [Alu(use_imm=True), Alu(use_imm=True), Finish()])
    isa = Isa(cfg)
    for word, code in [(isa.set_field(isa.encode_word(Load(buf=3)), "LOAD", "pop_prev", 1),  # flags before buffer
                        csr.ERR_BAD_FIELD),
                       (isa.set_field(isa.encode_word(Store(buf=3)), "STORE", "push_next", 1), csr.ERR_BAD_FIELD),
                       (isa.encode_word(Store(buf=3, x_pad_0=1)), csr.ERR_BAD_FIELD),  # not ACC, padding
                       (isa.encode_word(Load(buf=1)) | 1 << 127, csr.ERR_BAD_OPCODE)]:  # reserved bits first
        m = _model(prog, T, patch={1: word})
        assert (m.error.code, m.error.pc) == (code, 1), hex(word)


def test_insn_range_at_start(cfg, T):
    prog, _ = _prog(cfg, [Finish()])
    m = TlmModel(cfg, T)
    m.load_dram(prog.dram_image())
    for n, v in prog.regs:
        if n == "INSN_COUNT":
            v = 1000
        m.write_csr(ADDR[n], v)
    m.run()
    assert (m.error.code, m.error.pc, m.error.unit, m.error.cycle) == \
        (csr.ERR_INSN_RANGE, 0, "fetch", T.start_check_cycles)
    assert m.cycles == T.start_check_cycles + T.halt_cycles == 2  # the RTL's CYCLES = 2
    assert all(v == 0 for v in m.counters().values())


def test_insn_addr_misaligned_at_start(cfg, T):
    """The RTL fetches whole, aligned instructions: INSN_ADDR_LO % 16 != 0 is refused at START."""
    prog, regions = _prog(cfg, [Finish()])
    m = TlmModel(cfg, T)
    m.load_dram(prog.dram_image())
    for n, v in prog.regs:
        m.write_csr(ADDR[n], v + 8 if n == "INSN_ADDR_LO" else v)
    m.run()
    assert (m.error.code, m.error.pc, m.error.cycle) == (csr.ERR_INSN_RANGE, 0, T.start_check_cycles)
    assert "multiple of 16" in m.error.message


def test_lowest_pc_wins_in_one_cycle(cfg):
    """Two range faults raised in the same cycle (dispatch_cycles=0): the lower pc is reported."""
    T0 = Timing.from_config(cfg, calibration=False, dispatch_cycles=0)
    d = cfg.acc_depth
    prog, _ = _prog(cfg, [Alu(use_imm=True, dst_base=d - 1, iter_in=2, dst_factor_in=1),
                          Store(sram_base=d - 1, dram_base=0, y_size=1, x_size=2, x_stride=2), Finish()])
    m = _model(prog, T0)
    assert len(m._faults) == 2 and {f.pc for f in m._faults} == {0, 1}
    assert m._faults[0].cycle == m._faults[1].cycle
    assert (m.error.pc, m.error.unit, m.error.code) == (0, "compute", csr.ERR_SRAM_RANGE)
    # the choice does not depend on the order the faults were raised in
    m2 = TlmModel(cfg, T0)
    m2.write_csr(ADDR["CTRL"], csr.CTRL_START)
    m2.fault(7, csr.ERR_DRAM_RANGE, 5, "store", "x")
    m2.fault(7, csr.ERR_SRAM_RANGE, 3, "compute", "y")
    m2.sim.run()
    assert (m2.error.pc, m2.error.code, m2.error.cycle) == (3, csr.ERR_SRAM_RANGE, 7)


def test_burst_under_way_completes_after_fault(cfg, T):
    """A fault stops every unit, but the DRAM burst under way finishes: CYCLES is its end."""
    d = cfg.acc_depth
    _, regions = _prog(cfg, [Finish()] * 3, 64)
    vo = regions[2].addr // cfg.out_vec_bytes
    prog, _ = _prog(cfg, [Store(sram_base=0, dram_base=vo, y_size=1, x_size=32, x_stride=32),
                          Alu(use_imm=True, dst_base=d - 1, iter_in=2, dst_factor_in=1), Finish()], 64)
    e = _fetch_end(T, 3)
    beats = 32 * cfg.out_vec_bytes // cfg.bus_bytes
    first = min(beats, cfg.max_burst)
    assert beats > first
    r = run_program(prog, timing=T, raise_on_error=False)
    assert (r.error["code"], r.error["pc"], r.error["unit"]) == (csr.ERR_SRAM_RANGE, 1, "compute")
    assert r.error["cycle"] == _wait_entry(T, e + T.dispatch_cycles)
    store_start = _wait_entry(T, e) + T.token_pop_cycles  # granted in its first EXEC cycle
    assert store_start <= r.error["cycle"]
    end = store_start + T.write_burst_cycles(first)
    assert r.cycles == end > r.error["cycle"] + T.halt_cycles
    # the store stays in EXECUTE through its burst and, more bursts pending, the end cycle too
    assert r.counters["store_busy"] == end - store_start + 1
    assert r.counters["dma_wr_bytes"] == first * cfg.bus_bytes


def test_iss_refuses_a_misaligned_insn_addr_as_the_tlm_does(cfg):
    """The plain oracle applies the same START check (it decoded the misaligned words before)."""
    import dataclasses

    from cosim import models

    prog, _ = _prog(cfg, [Finish()] * 4)
    regs = [(n, v + 16 if n == "INSN_ADDR_LO" else v) for n, v in prog.regs]  # aligned: still inside
    bad = [(n, v + 8 if n == "INSN_ADDR_LO" else v) for n, v in prog.regs]
    for r, ok in ((regs, True), (bad, False)):
        p = dataclasses.replace(prog, regs=[(n, v - 1 if n == "INSN_COUNT" else v) for n, v in r])
        iss, tlm = models.iss(p, check_tokens=False), models.tlm(p)
        assert (iss.error is None) == ok and (tlm.error is None) == ok, (iss.error, tlm.error)
        if not ok:
            assert iss.error["name"] == tlm.error["name"] == "INSN_RANGE" and iss.error["pc"] == tlm.error["pc"] == 0
            assert "multiple of 16" in iss.error["message"]
