"""TLM behaviour: outputs, ALU semantics, CSR interface, event counts, speed, trace files."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from hw import csr
from hw.config import load_config, parse_config
from hw.assembler import Assembler, assemble
from hw.isa import ALU_OPS, Alu, Finish, Load
from sim.tlm import TlmModel, run_program
from sim.iss import execute_alu
from sim.tlm.alu import run_alu
from tests.units.programs import vadd_tiled as vadd_program

ADDR = {c.name: c.addr for c in csr.csr_map(16)}


def _eq(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)


# ---- outputs ----------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 7, 40, 333])
def test_vadd_outputs(cfg, n):
    prog = vadd_program(cfg, n, seed=n)
    r = run_program(prog)
    assert r.model == "tlm" and r.error is None
    assert _eq(r.outputs, prog.expected)
    assert set(r.counters) == {c.lower() for c in csr.COUNTERS}
    assert r.counters["dma_rd_bytes"] == 2 * n * cfg.acc_vec_bytes
    assert r.counters["dma_wr_bytes"] == n * cfg.out_vec_bytes
    assert r.counters["fetch_bytes"] == 16 * len(prog.insns)
    assert r.counters["load_insns"] + r.counters["compute_insns"] + r.counters["store_insns"] == len(prog.insns)


def test_store_narrowing_16bit():
    d = load_config("default").to_dict()
    d.update(name="out16", out_width=16)
    cfg = parse_config(d)
    n, lanes = 5, cfg.lanes
    a = (np.arange(n * lanes, dtype=np.int64).reshape(n, lanes) * 40000 - 70000).astype(np.int32)
    asm = Assembler(cfg)
    ta, to = asm.input("a", a), asm.output("out", a.shape, "int16")
    asm.load(ta, x=n, push_next=True)
    asm.add(Alu(pop_prev=True, push_next=True, use_imm=True, iter_in=0))
    asm.store(to, x=n, pop_prev=True)
    asm.finish()
    prog = asm.program()
    r = run_program(prog)
    assert np.array_equal(r.outputs["out"], a.astype(np.int16))


def test_strided_2d_load_store_roundtrip(cfg):
    """LOAD a strided 2-D tile, STORE it to a different stride: a transposition of layouts."""
    lanes = cfg.lanes
    y, x, s_in, s_out = 3, 4, 6, 5
    a = np.random.default_rng(3).integers(-300, 300, size=(y * s_in, lanes), dtype=np.int32)
    od = "int8" if cfg.out_width == 8 else "int16"
    asm = Assembler(cfg)
    ta, to = asm.input("a", a), asm.output("out", (y * s_out, lanes), od)
    asm.load(ta, x=x, y=y, offset=1, stride=s_in, push_next=True)
    asm.add(Alu(pop_prev=True, push_next=True, use_imm=True, iter_in=0))
    asm.store(to, x=x, y=y, stride=s_out, pop_prev=True)
    asm.finish()
    prog = asm.program()
    r = run_program(prog)
    exp = np.zeros((y * s_out, lanes), dtype=od)
    for i in range(y):
        exp[i * s_out:i * s_out + x] = a[1 + i * s_in:1 + i * s_in + x].astype(od)
    assert np.array_equal(r.outputs["out"], exp)


# ---- ALU semantics ---------------------------------------------------------------------------
def _ref_alu(acc: np.ndarray, i: Alu) -> np.ndarray:
    """The ISS's plain ALU (one vector at a time, lane by lane on the scalar reference semantics)."""
    acc = acc.astype(np.int64)
    execute_alu(acc, i)
    return acc.astype(np.int32)


def test_alu_semantics_match_sequential_reference():
    """The numpy engine the TLM (and golden) runs equals the ISS's plain one, hazards and edge values included."""
    rng = np.random.default_rng(7)
    depth, lanes = 64, 4
    specials = np.array([0, 1, -1, 31, 32, -31, -32, 33, -40, 2**31 - 1, -2**31, 12345, -99999], dtype=np.int64)
    for trial in range(400):
        acc = rng.integers(-2**31, 2**31, size=(depth, lanes), dtype=np.int64)
        acc[rng.integers(0, depth, 10)] = rng.choice(specials, size=(10, lanes))
        acc = acc.astype(np.int32)
        io, ii = int(rng.integers(0, 5)), int(rng.integers(0, 6))
        f = lambda: int(rng.integers(0, 4))  # noqa: E731 - small factors make overlaps (hazards) likely
        i = Alu(alu_op=int(rng.integers(0, 8)), use_imm=bool(rng.integers(0, 2)), iter_out=io, iter_in=ii,
                dst_base=int(rng.integers(0, 20)), src_base=int(rng.integers(0, 20)), dst_factor_out=f(),
                dst_factor_in=f(), src_factor_out=f(), src_factor_in=f(),
                imm=int(rng.choice([int(rng.integers(-2**15, 2**15)), -32768, 32767, -1, 0, 31, -33])))
        got = acc.copy()
        run_alu(got, i)
        assert np.array_equal(got, _ref_alu(acc, i)), i


# ---- CSR interface ------------------------------------------------------------------------------
def test_csr_interface(cfg):
    prog = vadd_program(cfg, 20)
    m = TlmModel(cfg)
    assert m.read_csr(ADDR["VERSION"]) == csr.VERSION
    assert m.read_csr(ADDR["CONFIG_ID"]) == cfg.config_id
    assert csr.decode_status(m.read_csr(ADDR["STATUS"]))["busy"] is False
    m.load_dram(prog.dram_image())
    for n, v in prog.regs[:-1]:
        m.write_csr(ADDR[n], v)
    assert m.read_csr(ADDR["INSN_COUNT"]) == len(prog.insns)
    with pytest.raises(RuntimeError):
        m.run()
    m.write_csr(ADDR["CTRL"], csr.CTRL_START)
    assert csr.decode_status(m.read_csr(ADDR["STATUS"]))["busy"] is True
    cycles = m.run()
    st = csr.decode_status(m.read_csr(ADDR["STATUS"]))
    assert st["done"] and not st["busy"] and not st["error"] and m.irq
    assert m.read_csr(ADDR["CYCLES_LO"]) | m.read_csr(ADDR["CYCLES_HI"]) << 32 == cycles > 0
    for name in csr.COUNTERS:
        assert m.read_csr(ADDR[name]) == m.counters()[name.lower()]
    assert _eq(prog.read_outputs(m.dram), prog.expected)
    with pytest.raises(ValueError):
        m.read_csr(0xFFC)
    m.write_csr(ADDR["CTRL"], csr.CTRL_SOFT_RESET)
    st = csr.decode_status(m.read_csr(ADDR["STATUS"]))
    assert not st["done"] and not st["busy"] and m.read_csr(ADDR["CYCLES_LO"]) == 0
    assert m.read_csr(ADDR["LOAD_BUSY"]) == 0
    # the same registers run again after a reset: same cycles
    m.write_csr(ADDR["CTRL"], csr.CTRL_START)
    assert m.run() == cycles


def test_run_program_from_folder(tmp_path):
    cfg = load_config("small")
    prog = vadd_program(cfg, 30)
    d = prog.save(tmp_path / "p")
    r1, r2 = run_program(prog), run_program(d)
    assert r1.cycles == r2.cycles and _eq(r2.outputs, prog.expected)


# ---- events and speed ---------------------------------------------------------------------------
def _single(cfg, insn, nvec):
    """[insn(va), FINISH] over an input of ``nvec`` vectors at vector ``va``."""
    tensors = [("a", "input", (nvec, cfg.lanes), "int32"), ("out", "output", (8, cfg.lanes), "int8")]
    asm = Assembler(cfg)
    for t in tensors:
        asm.tensor(*t)
    va = asm.regions(2)[1].addr // cfg.acc_vec_bytes
    return assemble(cfg, [insn(va), Finish()], tensors, {"a": np.ones((nvec, cfg.lanes), np.int32)})


def test_events_do_not_grow_with_bytes_or_iterations():
    cfg = load_config("default")
    ev = {}
    for n in (10, 1000):
        prog = _single(cfg, lambda va: Load(dram_base=va, y_size=1, x_size=n, x_stride=n), 1000)
        r = run_program(prog)
        ev[n] = r.extra["events"]
        assert r.counters["dma_rd_bytes"] == n * cfg.acc_vec_bytes
    assert ev[1000] == ev[10] <= 20
    ev = {}
    for io, ii in ((1, 1), (100, 100)):
        prog = _single(cfg, lambda va: Alu(use_imm=True, imm=1, iter_out=io, iter_in=ii, dst_base=0), 8)
        r = run_program(prog)
        ev[io * ii] = r.extra["events"]
        assert r.counters["compute_busy"] >= io * ii
    assert ev[10000] == ev[1] <= 20
    # a 2-D load of 200 rows with x padding: a few events per row (request, grant, end), not per byte
    prog = _single(cfg, lambda va: Load(dram_base=va, y_size=200, x_size=4, x_stride=4, x_pad_0=1), 1000)
    assert run_program(prog).extra["events"] <= 20 + 5 * 200


def test_speed_grows_with_instructions():
    cfg = load_config("default")
    prog = vadd_program(cfg, 4000, tile=4)  # ~4000 instructions
    t0 = time.perf_counter()
    r = run_program(prog)
    dt = time.perf_counter() - t0
    assert _eq(r.outputs, prog.expected)
    assert r.extra["events"] < 12 * len(prog.insns)
    assert len(prog.insns) / dt > 2000, f"{len(prog.insns) / dt:.0f} instructions/s"


# ---- traces -----------------------------------------------------------------------------------
def test_vcd_and_perfetto(tmp_path):
    from vcdvcd import VCDVCD

    cfg = load_config("small")
    prog = vadd_program(cfg, 20)
    r = run_program(prog, vcd=tmp_path / "t.vcd", trace=tmp_path / "t.json")
    names = ["dbg_load_busy", "dbg_compute_busy", "dbg_gemm_busy", "dbg_store_busy", "dbg_load_pc", "dbg_compute_pc",
             "dbg_store_pc", "dbg_load_q", "dbg_compute_q", "dbg_store_q", "dbg_dma_rd", "dbg_dma_wr",
             "dbg_cycles", "irq"]
    v = VCDVCD(str(tmp_path / "t.vcd"))
    assert sorted(s.split(".")[-1] for s in v.signals) == sorted(names)
    assert all(s.startswith("accel.") for s in v.signals)
    sig = {s.split(".")[-1]: v[s] for s in v.signals}
    # cycle 0 is START: the counter shows t - 1 in cycle t and stops at CYCLES; irq from DONE + 1
    assert int(sig["dbg_cycles"].tv[-1][1], 2) == r.cycles
    assert sig["irq"].tv[-1] == (r.cycles + 1, "1")
    busy = sig["dbg_load_busy"].tv
    ones = sum(b[0] - a[0] for a, b in zip(busy, busy[1:] + [(r.cycles, "0")]) if a[1] == "1")
    assert ones == r.counters["load_busy"]
    assert int(sig["dbg_load_pc"].tv[0][1], 2) == 0xFFFFFFFF
    assert max(int(x, 2) for _, x in sig["dbg_compute_q"].tv) <= cfg.compute_queue_depth
    tr = json.loads((tmp_path / "t.json").read_text())
    ev = tr["traceEvents"]
    insn_ev = [e for e in ev if e["ph"] == "X" and "#" in e["name"]]
    assert len(insn_ev) == len(prog.insns)
    assert {e["args"]["pc"] for e in insn_ev} == set(range(len(prog.insns)))
    assert any(e["ph"] == "X" and e["name"].startswith("load rd") for e in ev)
    assert any(e["ph"] == "C" for e in ev)


def test_vcd_grows_with_transactions_not_cycles(cfg, tmp_path):
    """A 1 M-cycle run of three instructions (an ALU instruction made 1 M cycles long through
    the timing) writes a VCD of a few time stamps; dbg_cycles has the counter's value at each."""
    from vcdvcd import VCDVCD

    from sim.tlm import Timing

    a = np.ones((4, cfg.lanes), dtype=np.int32)
    tensors = [("a", "input", a.shape, "int32"), ("out", "output", a.shape, "int8")]
    prog = assemble(cfg, [Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=1, iter_out=1, iter_in=4,
                              dst_factor_in=1), Finish()], tensors, {"a": a})
    T = Timing.from_config(cfg, calibration=False, alu_setup_cycles=1_000_000)
    r = run_program(prog, vcd=tmp_path / "long.vcd", timing=T)
    assert r.cycles > 1_000_000
    assert (tmp_path / "long.vcd").stat().st_size < 4000
    v = VCDVCD(str(tmp_path / "long.vcd"))
    cyc = next(v[s] for s in v.signals if s.endswith("dbg_cycles")).tv
    assert len(cyc) < 20 and all(int(n, 2) == max(t - 1, 0) for t, n in cyc)
    assert int(cyc[-1][1], 2) == r.cycles


def test_untraced_run_has_no_tracer(cfg):
    m = TlmModel(cfg)
    assert m.tracer is None and m.port.tracer is None
