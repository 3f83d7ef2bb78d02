"""The accumulator buffer (hw/rtl/acc_buffer.v: two synchronous SRAM copies and the port plan)
and the ALU's pipeline on it, on every level, on the `small` config (where STORE reads a
vector every beat and LOAD writes one every 4 beats, so the ports are busiest).

Read-after-write hazards of the pipeline (docs/microarch.md "The accumulator buffer's
ports"): a source one iteration behind its destination (forwarded), two behind (from the
SRAM), a destination read back every iteration (accumulation), both operands forwarded,
a 2-D walk whose chain crosses loop rows. Port conflicts: an ALU with a source operand and
one with an immediate running while a STORE reads and a padded LOAD writes other entries;
the ALU freezes, nothing is lost, and the TLM counts the RTL's cycles.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from hw.assembler import Assembler
from hw.config import HwConfig, load_config
from tests.units.every_level import Case, level_tests
from tests.units.programs import alu_between, alu_reference, load_tile, narrow, random_vectors, relay


def sequential(acc: np.ndarray, op: str, n_out: int, n_in: int, dst: tuple[int, int, int],
               src: tuple[int, int, int] | None, imm: int = 0) -> np.ndarray:
    """``hw/isa.py``'s ALU semantics one iteration at a time (the oracle of every hazard)."""
    acc = acc.copy()
    for i in range(n_out):
        for j in range(n_in):
            d = dst[0] + i * dst[1] + j * dst[2]
            s = imm if src is None else acc[src[0] + i * src[1] + j * src[2]]
            acc[d] = alu_reference(op, acc[d], s)
    return acc


def hazard(cfg: HwConfig, name: str, op: str, n_out: int, n_in: int, dst: tuple[int, int, int],
           src: tuple[int, int, int], n: int = 16, seed: int = 0) -> Case:
    """LOAD ``n`` vectors, one ALU instruction, STORE them all."""
    data = random_vectors(cfg, n, seed, -50000, 50000)
    return Case(alu_between(cfg, name, data, lambda asm: asm.alu(
        op, iter_out=n_out, iter_in=n_in, dst_base=dst[0], dst_factor_out=dst[1], dst_factor_in=dst[2],
        src_base=src[0], src_factor_out=src[1], src_factor_in=src[2]), sequential(data, op, n_out, n_in, dst, src)))


def busy_ports(cfg: HwConfig, body: Callable[[Assembler], list[tuple[str, int, int, tuple, tuple | None, int]]],
               name: str) -> Case:
    """ALU work on acc[16..32) while a STORE reads acc[0..16) and a padded LOAD writes acc[36..61);
    ``body`` emits the ALU instructions and returns them as (op, n_out, n_in, dst, src, imm)."""
    a_data = random_vectors(cfg, 32, 1, -3000, 3000)
    b_data = random_vectors(cfg, 8, 2)
    pad = dict(y_pad_0=1, y_pad_1=1, x_pad_0=1, x_pad_1=2)
    b_tile = load_tile(b_data, 0, 2, 3, 2, **pad)
    asm = Assembler(cfg, name)
    a = asm.input("a", a_data)
    b = asm.input("b", b_data)
    out_a = asm.output("out_a", (16, cfg.lanes))
    out_alu = asm.output("out_alu", (16, cfg.lanes))
    out_b = asm.output("out_b", (len(b_tile), cfg.lanes))
    asm.load(a, x=32, push_next=True)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out_a, x=16, pop_prev=True)               # reads acc[0..16) while the ALU runs
    asm.load(b, x=2, y=3, stride=2, sram=36, push_next=True, **pad)  # writes acc[36..61) meanwhile
    ops = body(asm)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out_alu, x=16, sram=16, pop_prev=True)
    relay(asm, push_next=True)
    asm.store(out_b, x=len(b_tile), sram=36, pop_prev=True)
    asm.finish()
    acc = a_data.copy()
    for op, n_out, n_in, dst, src, imm in ops:
        acc = sequential(acc, op, n_out, n_in, dst, src, imm)
    return Case(asm.program(expected={"out_a": narrow(cfg, a_data[:16]), "out_alu": narrow(cfg, acc[16:32]),
                                      "out_b": narrow(cfg, b_tile)}))


def prefix_chains(asm: Assembler) -> list:
    """A long prefix sum over acc[16..32) (src one behind), three times, then an accumulation."""
    ops = [("ADD", 15, 1, (17, 1, 0), (16, 1, 0), 0)] * 3 + [("ADD", 1, 15, (31, 0, 0), (16, 0, 1), 0)]
    for op, n_out, n_in, dst, src, _ in ops:
        asm.alu(op, iter_out=n_out, iter_in=n_in, dst_base=dst[0], dst_factor_out=dst[1], dst_factor_in=dst[2],
                src_base=src[0], src_factor_out=src[1], src_factor_in=src[2])
    return ops


def immediate_chain(asm: Assembler) -> list:
    """Immediate ops (no source read: STORE's reads do not stop them, LOAD's writes do)."""
    ops = [("MUL", 4, 4, (16, 4, 1), None, 3), ("ADD", 16, 1, (16, 1, 0), None, -7)]
    for op, n_out, n_in, dst, _, imm in ops:
        asm.alu(op, imm=imm, iter_out=n_out, iter_in=n_in, dst_base=dst[0], dst_factor_out=dst[1],
                dst_factor_in=dst[2])
    return ops


def fault_while_frozen(cfg: HwConfig) -> Case:
    """A LOAD outside every DRAM region faults while a long ALU chain runs against a STORE's
    reads and a padded LOAD's writes: the run stops cleanly, and every model charges the
    ALU's busy and port-wait cycles up to the halt alike."""
    a_data = random_vectors(cfg, 32, 3, -3000, 3000)
    b_data = random_vectors(cfg, 8, 4)
    asm = Assembler(cfg, "ports_busy_fault")
    a = asm.input("a", a_data)
    b = asm.input("b", b_data)
    out_a = asm.output("out_a", (16, cfg.lanes))
    asm.load(a, x=32, push_next=True)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out_a, x=16, pop_prev=True)
    asm.load(b, x=2, y=3, stride=2, sram=36, y_pad_0=1, y_pad_1=1, x_pad_0=1, x_pad_1=2)
    bad = asm.load(cfg.dram_bytes // cfg.acc_vec_bytes - 1, x=1, sram=62)  # past the DRAM regions
    for _ in range(12):
        asm.alu("ADD", iter_out=15, dst_base=17, src_base=16, dst_factor_out=1, src_factor_out=1)
    asm.finish()
    return Case(asm.program(), error=("DRAM_RANGE", bad))


def cases(cfg: HwConfig) -> list[Case]:
    return [
        hazard(cfg, "raw_distance_1", "ADD", 15, 1, (1, 1, 0), (0, 1, 0)),
        hazard(cfg, "raw_distance_2", "SUB", 14, 1, (2, 1, 0), (0, 1, 0)),
        hazard(cfg, "raw_2d_chain", "ADD", 3, 5, (1, 5, 1), (0, 5, 1)),
        hazard(cfg, "raw_accumulate_dst", "ADD", 1, 15, (15, 0, 0), (0, 0, 1)),
        hazard(cfg, "raw_both_operands", "ADD", 4, 3, (5, 0, 0), (5, 0, 0)),
        hazard(cfg, "raw_max_chain", "MAX", 2, 7, (8, 0, 1), (7, 0, 1)),
        busy_ports(cfg, prefix_chains, "ports_busy_src"),
        busy_ports(cfg, immediate_chain, "ports_busy_imm"),
        fault_while_frozen(cfg),
    ]


CFG = load_config("small")
CASES = cases(CFG)
test_iss, test_tlm, rtl_results, test_rtl_matches_tlm = level_tests(CASES, CFG)


@pytest.mark.parametrize("case", [c for c in CASES if c.program.name.startswith("ports_busy")],
                         ids=lambda c: c.program.name)
def test_ports_are_contended(case: Case, monkeypatch) -> None:
    """Guard: the busy-port cases do make the ALU wait: COMPUTE_WAIT counts it, and without
    the conflicts the TLM's compute unit would be busy for fewer cycles (not exactly that many:
    the rest of the schedule moves too, e.g. FINISH's drain)."""
    from cosim.models import tlm
    from sim.tlm.acc_buffer import AccPorts

    real = tlm(case.program).counters
    assert real["compute_wait"] > 0
    monkeypatch.setattr(AccPorts, "blocked", lambda self, lo, hi, use_src: 0)
    free = tlm(case.program).counters
    assert free["compute_wait"] == 0
    if case.error is None:
        assert free["compute_busy"] < real["compute_busy"]


def test_a_data_write_in_a_read_cycle_counts_once() -> None:
    """With write bursts in flight LOAD's data writes (every BPA cycles) and STORE's vector reads
    (every BPO cycles) can fall in one cycle: the ALU (with a vector operand) waits once for it."""
    from sim.tlm.acc_buffer import AccPorts, PortUse

    ports = AccPorts(writes_meet_reads=True)
    ports.add("write", PortUse(np.array([10]), 8, np.array([2])))   # cycles 10, 18
    ports.add("read", PortUse(np.array([10]), 2, np.array([5])))    # cycles 10, 12, 14, 16, 18
    assert ports.blocked(0, 30, use_src=True) == 5                   # the union
    assert ports.blocked(0, 30, use_src=False) == 2                  # an immediate ALU waits for writes only
    assert ports.blocked(11, 17, use_src=True) == 3
    assert ports.nth_free(10, 3, use_src=True) == 15                 # free: 11, 13, 15


def _random_ports(rng: np.random.Generator) -> tuple[Any, set[int], set[int], set[int]]:
    """An AccPorts with LOAD data writes and STORE reads in separate windows (one burst at a time,
    one step per kind) and padding runs outside the writes, registered in time order; and the
    cycles of each kind."""
    from sim.tlm.acc_buffer import AccPorts, PortUse

    ports = AccPorts()
    cycles: dict[str, set[int]] = {"write": set(), "pad": set(), "read": set()}
    steps = {"write": int(rng.integers(2, 9)), "read": int(rng.integers(1, 5))}  # one per kind, as a config's
    t = int(rng.integers(0, 20))
    for _ in range(int(rng.integers(1, 9))):
        kind = "write" if rng.random() < 0.5 else "read"
        step = steps[kind]
        firsts, counts = [], []
        for _ in range(int(rng.integers(1, 40))):
            c = int(rng.integers(0, 4))
            firsts.append(t)
            counts.append(c)
            cycles[kind].update(t + m * step for m in range(c))
            t += max(c, 1) * step + int(rng.integers(0, 6))
        ports.add(kind, PortUse(np.array(firsts), step, np.array(counts)))
        if rng.random() < 0.4:  # padding after the window, or over the reads just made
            n = int(rng.integers(1, 12))
            p0 = t if kind == "write" else int(rng.integers(firsts[0], t + 1))
            ports.add("pad", PortUse(np.array([p0]), 1, np.array([n])))
            cycles["pad"].update(range(p0, p0 + n))
            t = max(t, p0 + n) + int(rng.integers(0, 5))
        t += int(rng.integers(0, 30))
    return ports, cycles["write"], cycles["pad"], cycles["read"]


def test_port_plan_counts_and_nth_free_match_the_cycles_one_by_one() -> None:
    """The port plan's counts (``blocked``) and the ALU's end (``nth_free``: the fixed-point steps,
    then the gallop and the bisection) equal a walk over the cycles one by one, on random plans
    sparse and dense, with and without a source operand."""
    rng = np.random.default_rng(5)
    for _ in range(150):
        ports, writes, pads, reads = _random_ports(rng)
        end = max(writes | pads | reads | {0}) + 5
        for use_src in (False, True):
            taken = writes | pads | (reads if use_src else set())
            for _ in range(6):
                lo = int(rng.integers(0, end))
                hi = int(rng.integers(lo - 1, end + 3))
                assert ports.blocked(lo, hi, use_src) == sum(lo <= c <= hi for c in taken)
                k = int(rng.integers(1, 200))
                e, free = lo - 1, 0
                while free < k:
                    e += 1
                    free += e not in taken
                assert ports.nth_free(lo, k, use_src) == e, (lo, k, use_src)
