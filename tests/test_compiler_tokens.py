"""Dependency tokens: the vadd token pattern lets loads, ALU work and stores overlap while the two
ping-pong halves are never used by two tiles at once; hand-made streams that are unbalanced, cyclic or
that deadlock through full instruction/token queues are rejected."""

from __future__ import annotations

import dataclasses
import random

import pytest

from compiler.errors import CompileError, DeadlockError
from compiler.examples import make_case
from compiler.verify import happens_before, simulate, verify_program
from hw.config import load_config
from hw.isa import Alu, Finish, Load, Store, unit_of


def tiles_of(prog):
    """Per tile: its loads, its (non-empty) ALU instructions and its store, as instruction indices;
    plus the ping-pong half each tile uses. Tiles are recognised from the store order."""
    cfg = prog.config
    half = cfg.acc_depth // 2
    tiles, cur = [], {"load": [], "alu": []}
    for k, i in enumerate(prog.insns):
        if i.MNEMONIC == "LOAD":
            cur["load"].append(k)
        elif i.MNEMONIC == "ALU" and i.iter_out * i.iter_in:
            cur["alu"].append(k)
        elif i.MNEMONIC == "STORE":
            tiles.append({**cur, "store": k, "half": i.sram_base // half})
            cur = {"load": [], "alu": []}
    return tiles


def unit_seq(insns):
    seen = {"load": 0, "compute": 0, "store": 0}
    out = []
    for i in insns:
        u = unit_of(i)
        out.append(seen[u])
        seen[u] += 1
    return out


def test_vadd_token_pattern_overlaps_and_ping_pong_is_exclusive():
    prog = make_case("vadd", "default").program
    insns = prog.insns
    tiles = tiles_of(prog)
    assert len(tiles) == 4 and [t["half"] for t in tiles] == [0, 1, 0, 1]
    vc = happens_before(insns)
    seq = unit_seq(insns)
    uix = {"load": 0, "compute": 1, "store": 2}

    def hb(a: int, b: int) -> bool:
        """Instruction a is guaranteed complete before b starts (by unit order and tokens alone)."""
        return vc[b][uix[unit_of(insns[a])]] >= seq[a]

    for i, t in enumerate(tiles):
        assert all(hb(ld, a) for ld in t["load"] for a in t["alu"])  # compute after its loads
        assert all(hb(a, t["store"]) for a in t["alu"])  # store after its compute
        if i + 1 < len(tiles):  # load and compute of tile i+1 may start before the store of tile i
            nxt = tiles[i + 1]
            assert not hb(t["store"], nxt["load"][0]) and not hb(t["store"], nxt["alu"][0])
        if i + 2 < len(tiles):  # the half is reused only after tile i is stored
            assert all(hb(t["store"], ld) and hb(t["alu"][-1], ld) for ld in tiles[i + 2]["load"])

    # An abstract timed schedule with DMA-like durations shows the overlap really happens ...
    dur = [0 if (i.MNEMONIC == "ALU" and not i.iter_out * i.iter_in) or i.MNEMONIC == "FINISH" else
           (i.x_size * 2 if i.MNEMONIC in ("LOAD", "STORE") else i.iter_in) for i in insns]
    sch = simulate(insns, prog.config, dur)
    for i in range(len(tiles) - 1):
        assert sch.start[tiles[i + 1]["load"][0]] < sch.end[tiles[i]["store"]]
    assert sch.start[tiles[1]["load"][0]] < sch.end[tiles[0]["alu"][-1]]  # load while computing
    serial = sum(dur)
    assert sch.time < serial  # overlapped
    # ... and under any durations no half is held by two tiles at once.
    rnd = random.Random(0)
    for _ in range(50):
        d = [rnd.randint(0, 20) for _ in insns]
        s = simulate(insns, prog.config, d)
        for h in (0, 1):
            spans = sorted((s.start[t["load"][0]], s.end[t["store"]]) for t in tiles if t["half"] == h)
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans


@pytest.mark.parametrize("name", ["vadd", "fused", "requant", "vsub_tail"])
def test_examples_verify_on_every_config(cfg, name):
    prog = make_case(name, cfg).program
    verify_program(prog.insns, cfg)


SMALL = load_config("small")  # queue depths 2, token queue depth 4


def test_unbalanced_and_missing_finish_rejected():
    with pytest.raises(CompileError, match="unbalanced tokens on l2c"):
        verify_program([Load(push_next=True), Finish()], SMALL)
    with pytest.raises(CompileError, match="exactly one FINISH"):
        verify_program([Load()], SMALL)
    with pytest.raises(CompileError, match="exactly one FINISH"):
        verify_program([Finish(), Load()], SMALL)


def test_token_cycle_rejected():
    prog = [Load(pop_next=True, push_next=True), Alu(pop_prev=True, push_prev=True), Finish()]
    with pytest.raises(DeadlockError, match="cycle"):
        happens_before(prog)
    with pytest.raises(DeadlockError):
        verify_program(prog, SMALL)


def test_fetch_stall_on_full_instruction_queue_deadlocks():
    # four loads each wait for a token that ALUs fetched after them would push; the load queue
    # holds 2 (+1 in the unit), so fetch stalls at the fourth load and never reaches the ALUs
    prog = [Load(pop_next=True) for _ in range(4)] + [Alu(push_prev=True, iter_out=0) for _ in range(4)] + [Finish()]
    happens_before(prog)  # no cycle: with deep enough queues it would run
    with pytest.raises(DeadlockError, match="fetch stalled at insn 3"):
        simulate(prog, SMALL)
    simulate(prog, dataclasses.replace(SMALL, load_queue_depth=4))


def test_full_token_queue_deadlocks():
    # five c2s pushes before any store is fetched: the fifth push waits (depth 4), the compute queue
    # fills behind it and fetch never reaches the stores
    prog = ([Alu(push_next=True, iter_out=0) for _ in range(5)] + [Alu(iter_out=0) for _ in range(3)]
            + [Store(pop_prev=True) for _ in range(5)] + [Finish()])
    happens_before(prog)
    with pytest.raises(DeadlockError, match="cannot push c2s"):
        verify_program(prog, SMALL)
    verify_program(prog, dataclasses.replace(SMALL, token_queue_depth=5))
