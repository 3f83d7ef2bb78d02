"""Dependency tokens: vadd's token pattern lets the load of tile i+1, the compute of tile i and the
store of tile i-1 overlap (proved pairwise unordered from the flags alone), while no accumulator half is
ever used by two tiles at once (proved from the flags, and checked on random schedules); hand-made
streams that are unbalanced, cyclic or that deadlock through full instruction/token queues are rejected."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest

from compiler.errors import CompileError, DeadlockError
from compiler.examples import make_case
from compiler.verify import happens_before, simulate, verify_program
from hw import analysis
from hw.config import load_config
from hw.isa import Alu, Finish, Load, Store
from hw.isa_semantics import acc_footprint


def touched(i) -> set[int]:
    """Accumulator vectors an instruction reads or writes, from its ISA fields alone."""
    reads, writes = acc_footprint(i)
    return set(reads | writes)


def tiles_of(prog):
    """Per tile: its loads, its (non-empty) ALU instructions and its store, as instruction indices.
    Tiles are recognised from the store order (vadd has no constants, so every ALU belongs to a tile)."""
    tiles, cur = [], {"load": [], "alu": []}
    for k, i in enumerate(prog.insns):
        if i.MNEMONIC == "LOAD":
            cur["load"].append(k)
        elif i.MNEMONIC == "ALU" and i.iter_out * i.iter_in:
            cur["alu"].append(k)
        elif i.MNEMONIC == "STORE":
            tiles.append({**cur, "store": [k], "all": cur["load"] + cur["alu"] + [k]})
            cur = {"load": [], "alu": []}
    return tiles


def hb_relation(insns):
    """hb(a, b): instruction a is guaranteed complete before b starts, by unit order and tokens alone."""
    return analysis.happens_before(insns).before


@pytest.mark.parametrize("config", ["default", "small"])
def test_vadd_three_way_overlap_and_exclusive_halves(config):
    prog = make_case("vadd", config).program
    insns, cfg = prog.insns, prog.config
    tiles = tiles_of(prog)
    tile = 16 if config == "default" else 8
    assert len(tiles) == 64 * 16 // cfg.lanes // tile >= 4
    # no load<->store relays: every ALU does work, and only the four direct token queues are used
    assert all(i.iter_out * i.iter_in for i in insns if i.MNEMONIC == "ALU")
    hb = hb_relation(insns)

    # The halves: tile i loads into input half i%2 and stores from output half i%2, four disjoint regions.
    ins = [set().union(*(touched(insns[k]) for k in t["load"])) for t in tiles]
    outs = [touched(insns[t["store"][0]]) for t in tiles]
    for i, t in enumerate(tiles):
        assert ins[i] == ins[i % 2] and outs[i] == outs[i % 2]
    assert not ins[0] & ins[1] and not outs[0] & outs[1] and not (ins[0] | ins[1]) & (outs[0] | outs[1])

    for i, t in enumerate(tiles):
        assert all(hb(ld, a) for ld in t["load"] for a in t["alu"])  # compute after its loads
        assert all(hb(a, s) for a in t["alu"] for s in t["store"])  # store after its compute
        # the three stages of consecutive tiles are pairwise unordered: none happens-before another
        if 1 <= i < len(tiles) - 1:
            groups = [tiles[i + 1]["load"], t["alu"], tiles[i - 1]["store"]]
            for g1, g2 in itertools.combinations(groups, 2):
                for a, b in itertools.product(g1, g2):
                    assert not hb(a, b) and not hb(b, a), (i, a, b)

    # No accumulator vector (hence no half) is used by two tiles at once, from the flags alone: for
    # tiles a < b sharing a vector, a's last instruction touching it happens before b's first one.
    uses = [{} for _ in tiles]  # per tile: vector -> (first, last) instruction touching it
    for ti, t in enumerate(tiles):
        for k in sorted(t["all"]):
            for v in touched(insns[k]):
                f, _ = uses[ti].get(v, (k, k))
                uses[ti][v] = (f, k)
    for a, b in itertools.combinations(range(len(tiles)), 2):
        for v in uses[a].keys() & uses[b].keys():
            assert hb(uses[a][v][1], uses[b][v][0]), (a, b, v)

    # A timed abstract schedule where every stage of a tile takes the same time shows the three
    # really run at once ...
    per_tile = {"LOAD": 10, "STORE": 20, "ALU": 10, "FINISH": 0}
    sch = simulate(insns, cfg, [per_tile[i.MNEMONIC] for i in insns])

    def span(ks):
        return min(sch.start[k] for k in ks), max(sch.end[k] for k in ks)

    for i in range(1, len(tiles) - 1):
        spans = [span(tiles[i + 1]["load"]), span(tiles[i]["alu"]), span(tiles[i - 1]["store"])]
        assert max(s for s, _ in spans) < min(e for _, e in spans), (i, spans)
    assert sch.time <= (len(tiles) + 2) * 20  # a full three-stage pipeline: fill, steady state, drain

    # ... and under any durations no half is held by two tiles at once.
    rnd = random.Random(0)
    regions = [ins[0], ins[1], outs[0], outs[1]]
    for _ in range(50):
        d = [rnd.randint(0, 20) for _ in insns]
        s = simulate(insns, cfg, d)
        for r in regions:
            held = sorted((min(s.start[k] for k in t["all"] if touched(insns[k]) & r),
                           max(s.end[k] for k in t["all"] if touched(insns[k]) & r))
                          for t in tiles if any(touched(insns[k]) & r for k in t["all"]))
            assert all(a[1] <= b[0] for a, b in zip(held, held[1:])), held


@pytest.mark.parametrize("name", ["vadd", "fused", "requant", "vsub_tail"])
def test_examples_verify_on_every_config(cfg, name):
    prog = make_case(name, cfg).program
    verify_program(prog.insns, cfg)
    # the operator library's tiling never needs a load<->store relay (a zero-iteration ALU)
    assert all(i.iter_out * i.iter_in for i in prog.insns if i.MNEMONIC == "ALU")


SMALL = load_config("small")  # queue depths 2, token queue depth 4


def test_unbalanced_and_missing_finish_rejected():
    with pytest.raises(CompileError, match="unbalanced dependency tokens: queue l2c"):
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
    with pytest.raises(DeadlockError, match="cannot push c2s") as e:
        verify_program(prog, SMALL)
    # the line names the config's key to raise, and the depth the stream needs
    assert "config 'small': token_queue_depth 4 is too shallow for this stream (it runs with 5)" in str(e.value)
    verify_program(prog, dataclasses.replace(SMALL, token_queue_depth=5))
    with pytest.raises(DeadlockError, match="load_queue_depth 2 is too shallow for this stream \\(it runs with 4\\)"):
        verify_program([Load(pop_next=True) for _ in range(4)] + [Alu(push_prev=True, iter_out=0) for _ in range(4)]
                       + [Finish()], SMALL)


def test_a_kernel_on_a_config_of_one_token_per_queue_names_the_key():
    """A legal config whose token queues hold one token: the compiler's double-buffered loops push two
    ahead, so the proof fails, and its line says which key to raise (not only the stuck instructions)."""
    from compiler.errors import CompileError
    from compiler.examples import make_case

    with pytest.raises(CompileError, match="token_queue_depth 1 is too shallow for this stream \\(it runs with 2\\)"):
        make_case("dense", dataclasses.replace(SMALL, name="small_tq1", token_queue_depth=1))
