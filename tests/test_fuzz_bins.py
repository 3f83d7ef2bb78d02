"""Functional coverage bins of the fuzzer (cosim/fuzz/bins.py).

* each group's extractor on hand-built Programs (hw/assembler.py) hits exactly the expected bins;
* the TLM's port observation adds up to COMPUTE_WAIT and changes nothing in the run;
* every reachable bin is hit by some Program (the hand-built ones and a short steered campaign);
* a steered campaign hits more bins than an unsteered one of the same size;
* ``cosim fuzz --coverage --json`` has the documented shape.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from hw import csr
from hw.assembler import Assembler, with_regs
from hw.config import load_config
from hw.isa import Alu, Finish, Load
from cosim import models
from cosim.fuzz import bins as B
from cosim.fuzz import campaign as C

COSIM = [sys.executable, "-m", "cosim.cli"]
DEFAULT = load_config("default")
SMALL = load_config("small")
ONE_CORE = [load_config(n) for n in ("default", "small", "wide")]
HAND_BUILT: list = []  # builders of every hand-built Program below, for the reachability test


def hand_built(fn):
    """Register a builder of hand-built Programs (it returns one Program or a list)."""
    HAND_BUILT.append(fn)
    return fn


def _observe(p, groups=B.GROUPS) -> Counter:
    return B.observe(p, models.iss(p), models.tlm(p, observe_ports=True), groups)


def _group(hits: Counter, g: str) -> dict[str, int]:
    return {k: v for k, v in hits.items() if k.startswith(g + ".")}


def _acc_input(a: Assembler, n: int = 96):
    return a.input("x", np.arange(n * a.cfg.lanes, dtype=np.int32).reshape(n, a.cfg.lanes))


@hand_built
def _insn_program():
    a = Assembler(DEFAULT, "insn")
    x = _acc_input(a)
    y = a.output("y", (4, DEFAULT.lanes))
    a.load(x, 4, push_next=True)
    a.alu("ADD", imm=3, iter_out=1, iter_in=4, dst_factor_in=1, pop_prev=True)
    a.alu("MUL", iter_out=0, iter_in=5, push_next=True)
    a.store(y, 4, pop_prev=True)
    a.finish()
    return a.program()


def test_insn_alu_loop_bins():
    h = _observe(_insn_program())
    assert _group(h, "insn") == {"insn.LOAD.ACC.push_next": 1, "insn.ALU.pop_prev": 1, "insn.ALU.push_next": 1,
                                 "insn.STORE.ACC.pop_prev": 1, "insn.FINISH.none": 1}
    assert _group(h, "alu") == {"alu.ADD.imm": 1, "alu.MUL.vec": 1}
    assert _group(h, "loop") == {"loop.alu.outer.one": 1, "loop.alu.inner.many": 2, "loop.alu.outer.zero": 1}


@hand_built
def _dma_program():
    """default: a 64-byte accumulator vector is 8 beats, MAX_BURST 16 beats = 2 vectors."""
    a = Assembler(DEFAULT, "dma")
    x = _acc_input(a, 160)  # 10 KiB: two 4 KiB boundaries inside
    first = (-a.address(x, insn_count=7) % 4096) // 64  # the vector that starts at a 4 KiB boundary
    a.load(x, 2, offset=first - 1, sram=0)              # split by the boundary: 8 + 8 beats
    a.load(x, 2, offset=first - 2, sram=2)              # ends on it: one burst of 16 beats
    a.load(x, 4, offset=first, sram=4)                  # two full bursts
    a.load(x, 3, 2, offset=first + 8, stride=5, sram=8)  # 16 + 8 beats per row, rows apart
    a.load(x, 2, 2, offset=first + 20, stride=1, sram=16)  # overlapping rows
    a.load(x, 0, 3, sram=20)                            # nothing
    a.finish()
    return a.program()


def test_dma_bins_bursts_and_4k():
    h = _observe(_dma_program(), ("dma",))
    assert dict(h) == {"dma.load.rows.one": 3, "dma.load.rows.many": 2, "dma.load.rows.zero": 1,
                       "dma.load.row.partial_tail": 3, "dma.load.row.split_4k": 1, "dma.load.row.ends_at_4k": 1,
                       "dma.load.row.one_burst": 3, "dma.load.row.full_bursts": 1,
                       "dma.load.stride.gap": 1, "dma.load.stride.overlap": 1}


@hand_built
def _pad_program():
    a = Assembler(DEFAULT, "pad")
    x = _acc_input(a)
    inp = a.input("inp", np.ones((8, DEFAULT.lanes), np.int8))
    a.load(x, 2, 2, sram=0, y_pad_0=1, x_pad_1=2)
    a.load(x, 1, 0, sram=32, y_pad_1=15)
    a.load(inp, 2, buf="INP", sram=0, x_pad_0=1)
    a.finish()
    return a.program()


def test_pad_bins():
    h = _observe(_pad_program(), ("pad",))
    assert dict(h) == {"pad.top": 1, "pad.right": 1, "pad.bottom": 1, "pad.only": 1, "pad.max": 1,
                       "pad.left": 1, "pad.INP": 1}


def _gemm_program(cfg, n_uops: int, gemms: list[dict], alus: list[dict] = ()):
    a = Assembler(cfg, "gemm")
    x = a.input("x", np.zeros((16, cfg.lanes), np.int32))
    inp = a.input("inp", np.ones((4, cfg.lanes), np.int8))
    wgt = a.input("wgt", np.ones((4, cfg.block, cfg.block), np.int8))
    u = a.uops("uop", [(k % 4, k % 4, k % 4) for k in range(n_uops)])
    a.load(x, 16)
    a.load(inp, 4, buf="INP")
    a.load(wgt, 4, buf="WGT")
    a.load(u, n_uops, buf="UOP")
    for g in gemms:
        a.gemm(**g)
    for f in alus:
        a.alu(**f)
    a.finish()
    return a.program()


@hand_built
def _gemm_raw_programs():
    return [_gemm_program(DEFAULT, 4, [
        dict(uop_begin=0, uop_end=1, iter_out=2, iter_in=1),                   # acc[0] twice: distance 1
        dict(uop_begin=1, uop_end=1, reset=True),                              # no micro-op
        dict(uop_begin=0, uop_end=1, iter_out=2, iter_in=3, acc_factor_in=1),  # 0 1 2 0 1 2: distance 3
        dict(uop_begin=0, uop_end=2, iter_out=2, iter_in=1, reset=True)],      # reset reads nothing
        [dict(op="ADD", iter_out=2, iter_in=2, dst_base=8, dst_factor_in=1),   # 8 9 8 9: distance 2
         dict(op="MOV", iter_out=1, iter_in=3, dst_base=4, src_base=3, dst_factor_in=1, src_factor_in=1)]),
        _gemm_program(SMALL, SMALL.uop_depth, [dict(uop_begin=0, uop_end=SMALL.uop_depth)])]


def test_gemm_and_raw_bins():
    p, whole = _gemm_raw_programs()
    h = _observe(p, ("gemm", "raw"))
    assert dict(h) == {"gemm.uops.one": 2, "gemm.uops.empty": 1, "gemm.uops.many": 1, "gemm.reset.off": 2,
                       "gemm.reset.on": 2, "raw.gemm.d1": 1, "raw.gemm.d3plus": 1, "raw.alu_dst.d2": 1,
                       "raw.alu_src.d1": 1}
    assert _observe(whole, ("gemm",))["gemm.uops.whole_buffer"] == 1


@hand_built
def _port_programs():
    cfg = DEFAULT
    p = _gemm_program(cfg, 4, [dict(uop_begin=0, uop_end=1, iter_out=40)], [
        dict(op="ADD", iter_out=1, iter_in=60, dst_base=100, src_base=300, dst_factor_in=1, src_factor_in=1),
        dict(op="ADD", imm=1, iter_out=1, iter_in=60, dst_base=200, dst_factor_in=1)])
    a = Assembler(cfg, "port")
    x = _acc_input(a)
    y = a.output("y", (32, cfg.lanes))
    a.alu("MOV", imm=1, iter_out=1, iter_in=32, dst_base=500, dst_factor_in=1, push_next=True)
    # long enough to cover LOAD's data and trailing padding and then STORE's reads (LOAD has the port first)
    a.alu("ADD", iter_out=1, iter_in=1000, dst_base=1000, src_base=600, dst_factor_in=1, src_factor_in=1)
    a.load(x, 16, sram=0, y_pad_1=2)
    a.store(y, 32, sram=500, pop_prev=True)
    a.finish()
    return [p, a.program()]


def test_port_bins_add_up_to_compute_wait():
    """An ALU (vector operand) runs while LOAD writes and STORE reads the buffer, then one with an
    immediate and a GEMM: the observed port cycles are COMPUTE_WAIT's, and the run is unchanged."""
    for prog in _port_programs():
        plain = models.tlm(prog)
        seen = models.tlm(prog, observe_ports=True)
        assert (seen.cycles, seen.counters) == (plain.cycles, plain.counters)
        h = _observe(prog, ("port",))
        wait = sum(n for k, n in h.items() if k.endswith(("load_data", "load_pad")))
        wait += h["port.alu.store_read"] - h["port.alu.pad_and_read"]
        assert wait == seen.counters["compute_wait"]
    assert h["port.alu.load_data"] > 0 and h["port.alu.load_pad"] > 0 and h["port.alu.store_read"] > 0


@hand_built
def _error_programs():
    return [_error_program(k) for k in ("alu", "load", "deadlock", "opcode")]


def _error_program(kind: str):
    a = Assembler(DEFAULT, f"err-{kind}")
    x = _acc_input(a)
    a.load(x, 4)
    if kind == "alu":
        a.alu("ADD", imm=1, iter_out=1, iter_in=4, dst_base=DEFAULT.acc_depth - 2, dst_factor_in=1)
    elif kind == "load":
        a.load(x, 4, sram=DEFAULT.acc_depth - 1)
    elif kind == "deadlock":
        a.alu("ADD", imm=1, pop_prev=True)
    elif kind == "opcode":
        a.raw(0x7)
    a.finish()
    return a.program()


def test_error_and_core_bins():
    expect = {"alu": "error.SRAM_RANGE.alu.wait", "load": "error.SRAM_RANGE.load.wait",
              "deadlock": "error.DEADLOCK.compute.wait", "opcode": "error.BAD_OPCODE.fetch.dispatch"}
    for kind, name in expect.items():
        h = _observe(_error_program(kind), ("error", "core"))
        assert set(h) == {name, "error.halt.port_idle", "core.c0.fault"} or \
            set(h) == {name, "error.halt.burst_in_flight", "core.c0.fault"}, (kind, h)
    p = with_regs(_error_program("alu"), INSN_COUNT=0)
    assert set(_observe(p, ("error", "insn"))) == {"error.INSN_RANGE.fetch.start", "error.halt.port_idle"}
    clean = _observe(_error_program("none"), ("error", "core"))
    assert not clean


def test_unreachable_bins_depend_on_the_config():
    one = B.unreachable(ONE_CORE)
    assert one["core.c1.fault"] == B.SEVERAL_CORES and one["insn.BARRIER"] == B.SEVERAL_CORES
    two = B.unreachable([load_config("small2")])
    assert "core.c1.fault" not in two and "insn.BARRIER" not in two and "core.c1.barrier" not in two
    quad = B.catalogue([load_config("quad")])
    assert "core.c3.barrier" in quad and "core.c3.barrier" not in B.unreachable([load_config("quad")])
    cat = B.catalogue(ONE_CORE)
    assert set(one) <= set(cat) and all(why for why in one.values())
    assert {b.group for b in cat.values()} == set(B.GROUPS)


def test_coverage_json_shape():
    out = subprocess.run(COSIM + ["fuzz", "--count", "12", "--coverage", "--json", "--workers", "0", "--quiet",
                                  "--seed", "3"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    cov = d["coverage"]
    assert set(cov) == {"bins", "empty", "unreachable"}
    assert all(isinstance(v, int) for v in cov["bins"].values())
    assert set(cov["empty"]) <= set(cov["bins"]) and set(cov["unreachable"]) <= set(cov["bins"])
    assert not set(cov["empty"]) & set(cov["unreachable"])
    assert all(cov["bins"][n] == 0 for n in cov["empty"])
    plain = subprocess.run(COSIM + ["fuzz", "--count", "2", "--json", "--workers", "0", "--quiet"],
                           capture_output=True, text=True, timeout=300)
    assert "coverage" not in json.loads(plain.stdout)


def test_deadlock_phase_push_needs_a_stream_that_breaks_the_depth_rule() -> None:
    """Nine LOADs push to compute (token queue depth 8) before the one ALU that would pop, and that ALU
    also waits for a STORE token that never comes: the lowest blocked pc is the ninth LOAD, in PUSH.
    The bin is out of the campaign's reach (its reason says why), not out of the hardware's."""
    a = Assembler(DEFAULT, "push-deadlock")
    x = _acc_input(a)
    for k in range(DEFAULT.token_queue_depth + 1):
        a.load(x, 1, sram=k, push_next=True)
    a.alu("ADD", imm=1, pop_prev=True, pop_next=True)
    a.finish()
    p = a.program()
    assert models.iss(p).error["code"] == csr.ERR_DEADLOCK
    h = _observe(p, ("error",))
    assert "error.DEADLOCK.load.push" in h and "error.DEADLOCK.load.push" in B.unreachable(ONE_CORE)


@hand_built
def _every_flag_programs():
    return [_every_flag_program("ALU"), _every_flag_program("GEMM"), _store_across_4k()]


def _every_flag_program(compute: str):
    """A LOAD and a STORE hand their tokens to one compute instruction with all four flags, which hands
    tokens back to a second LOAD and STORE."""
    a = Assembler(DEFAULT, f"flags-{compute}")
    x = _acc_input(a)
    y = a.output("y", (4, DEFAULT.lanes))
    inp = a.input("inp", np.ones((4, DEFAULT.lanes), np.int8))
    wgt = a.input("wgt", np.ones((4, DEFAULT.block, DEFAULT.block), np.int8))
    u = a.uops("uop", [(8, 0, 0)])
    a.load(inp, 4, buf="INP")
    a.load(wgt, 4, buf="WGT")
    a.load(u, 1, buf="UOP")
    a.load(x, 16, push_next=True)
    a.store(y, 1, sram=40, push_prev=True)
    flags = dict(pop_prev=True, pop_next=True, push_prev=True, push_next=True)
    if compute == "ALU":
        a.alu("ADD", imm=2, iter_out=1, iter_in=4, dst_base=8, dst_factor_in=1, **flags)
    else:
        a.gemm(uop_begin=0, uop_end=1, **flags)
    a.load(x, 1, sram=20, pop_next=True)
    a.store(y, 4, sram=8, pop_prev=True)
    a.finish()
    return a.program()


def _store_across_4k():
    a = Assembler(DEFAULT, "store-4k")
    x = _acc_input(a, 8)
    y = a.output("y", (600, DEFAULT.lanes))  # 16-byte output vectors: 9.6 KB
    a.load(x, 8)
    first = (-a.address(y, insn_count=3) % 4096) // DEFAULT.out_vec_bytes
    a.store(y, 2, offset=first - 1)
    a.finish()
    return a.program()


FAULTS = [("dram_load", "error.DRAM_RANGE.load.wait"), ("dram_store", "error.DRAM_RANGE.store.wait"),
          ("gemm_wait", "error.SRAM_RANGE.gemm.wait"), ("gemm_exec", "error.SRAM_RANGE.gemm.exec"),
          ("deadlock_load", "error.DEADLOCK.load.wait"), ("deadlock_store", "error.DEADLOCK.store.wait"),
          ("deadlock_finish", "error.DEADLOCK.finish.wait")]


@hand_built
def _faulty_programs():
    return [_faulty(k) for k, _ in FAULTS]


def _faulty(kind: str):
    """One hand-built fault per error bin the short campaign may miss."""
    a = Assembler(DEFAULT, f"fault-{kind}")
    x = _acc_input(a, 8)
    y = a.output("y", (8, DEFAULT.lanes))
    inp = a.input("inp", np.ones((4, DEFAULT.lanes), np.int8))
    wgt = a.input("wgt", np.ones((4, DEFAULT.block, DEFAULT.block), np.int8))
    u = a.uops("uop", [(0, 0, 0)])
    a.load(x, 8)
    a.load(inp, 4, buf="INP")
    a.load(wgt, 4, buf="WGT")
    a.load(u, 1, buf="UOP")
    if kind == "dram_load":
        a.load(1 << 20, 1)
    elif kind == "dram_store":
        a.store(1 << 20, 1)
    elif kind == "gemm_wait":
        a.gemm(uop_begin=DEFAULT.uop_depth - 2, uop_end=DEFAULT.uop_depth + 2)
    elif kind == "gemm_exec":
        a.gemm(uop_begin=0, uop_end=1, iter_out=2, acc_factor_out=DEFAULT.acc_depth - 1, acc_factor_in=1, iter_in=2)
    elif kind == "deadlock_load":
        a.load(x, 1, pop_next=True)
    elif kind == "deadlock_store":
        a.store(y, 1, pop_prev=True)
    if kind == "deadlock_finish":
        a.finish(pop_prev=True)
    else:
        a.finish()
    return a.program()


@pytest.mark.parametrize("kind, name", FAULTS)
def test_error_sites(kind, name):
    h = _observe(_faulty(kind), ("error",))
    assert name in h and len([k for k in h if not k.startswith("error.halt.")]) == 1, h


def test_every_flag_and_store_tail_bins():
    for compute in ("ALU", "GEMM"):
        p = _every_flag_program(compute)
        assert models.iss(p).error is None
        assert _observe(p, ("insn",))[f"insn.{compute}.pop_prev+pop_next+push_prev+push_next"] == 1
    assert _observe(_store_across_4k(), ("dma",))["dma.store.row.split_4k"] == 1


def test_steered_campaign_beats_unsteered_and_every_reachable_bin_is_hit():
    """The same 120 cases unsteered and steered; the steered ones plus the hand-built Programs of this
    file fill every reachable bin of the one-core configs (a bin no Program can hit fails here)."""
    plain = C.run_campaign(120, 5, coverage=True, progress=False)
    steered = C.run_campaign(120, 5, coverage=True, steer=True, progress=False)
    assert (plain.mismatches, plain.errors, steered.mismatches, steered.errors) == (0, 0, 0, 0)
    n_plain = sum(1 for v in plain.coverage.values() if v)
    n_steered = sum(1 for v in steered.coverage.values() if v)
    assert n_steered > n_plain
    hits = dict(steered.coverage)
    for build in HAND_BUILT:
        got = build()
        for p in got if isinstance(got, list) else [got]:
            hits = B.merge(hits, _observe(p))
    left = B.empty_bins(hits, ONE_CORE)
    assert not left, f"bins no Program hit: {left}"


def test_dram_bins_count_reads_in_flight():
    """The ``dram`` bins from real TLM runs: one read at a time on a one-core config, three or more on
    ``quad`` (four cores, ``dram_reads_in_flight`` 4), and a LOAD range error of core 0 raised while
    other cores' reads are in flight; which of them a campaign can reach follows its configs."""
    import copy
    import dataclasses

    quad = load_config("quad")
    assert quad.dram_reads_in_flight >= 3
    one = _observe(_insn_program(), ("dram",))
    assert one == {"dram.reads_in_flight.one": 1}
    p = models.make_job("vadd_large", quad).program
    assert _observe(p, ("dram",))["dram.reads_in_flight.three_plus"] == 1
    k = next(k for k in range(p.windows[0][1]) if p.insns[k].MNEMONIC == "LOAD")
    bad = copy.copy(p)
    bad.insns = list(p.insns)
    bad.insns[k] = dataclasses.replace(p.insns[k], dram_base=(1 << 20) - 1)  # past the input region
    res = models.tlm(bad)
    assert res.error is not None and res.error["code"] == csr.ERR_DRAM_RANGE
    assert res.extra["bursts_in_flight_at_error"] >= 2
    assert B.observe(bad, None, res, ("dram",))["dram.error.several_in_flight"] == 1
    never = B.unreachable(ONE_CORE)
    assert {"dram.reads_in_flight.two", "dram.reads_in_flight.three_plus", "dram.error.several_in_flight"} <= \
        set(never) and "dram.reads_in_flight.one" not in never
    two = B.unreachable([load_config("small2")])
    assert "dram.reads_in_flight.two" not in two and "dram.reads_in_flight.three_plus" in two
    assert not any(b.startswith("dram.") for b in B.unreachable([quad]) if b != "dram.writes_in_flight.three_plus")


def test_dram_bins_count_writes_in_flight():
    """The write side of the ``dram`` bins from real TLM runs on ``quad`` (``dram_writes_in_flight``
    2, posted STOREs): two writes in flight at once, reads granted beside them, and a STORE range
    error of core 0 raised while another core's write awaits its B; a config with one write at a time
    reports none of them, and the campaign's reachable bins follow the configs."""
    import copy
    import dataclasses

    quad = load_config("quad")
    assert quad.dram_writes_in_flight == 2
    p = models.make_job("vadd_large", quad).program
    seen = _observe(p, ("dram",))
    assert seen == {"dram.reads_in_flight.three_plus": 1, "dram.writes_in_flight.two": 1,
                    "dram.read_beside_write": 1}, seen
    assert "dram.writes_in_flight.one" not in _observe(_insn_program(), ("dram",))
    stores = [k for k in range(p.windows[0][1]) if p.insns[k].MNEMONIC == "STORE"]
    hit = 0
    for k in stores[1:8]:
        bad = copy.copy(p)
        bad.insns = list(p.insns)
        bad.insns[k] = dataclasses.replace(p.insns[k], dram_base=(1 << 20) - 1)  # past the output region
        res = models.tlm(bad)
        assert res.error is not None and res.error["code"] == csr.ERR_DRAM_RANGE
        hit += B.observe(bad, None, res, ("dram",)).get("dram.error.write_in_flight", 0)
    assert hit
    gone = B.unreachable([load_config("default")])
    assert {"dram.read_beside_write", "dram.error.write_in_flight", "dram.writes_in_flight.two"} <= set(gone)
    assert "dram.writes_in_flight.three_plus" in B.unreachable([quad])
    assert "dram.writes_in_flight.two" not in B.unreachable([quad])
