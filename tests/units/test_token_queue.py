"""The dependency-token queues (hw/rtl/token_queue.v: l2c, c2l, c2s, s2c) on every level, and the
block's own cocotb bench (testbench/units/token_queue_bench.py).

Program cases: the l2c/c2s chain of a vector add; double buffering through all four
queues; two loads whose tokens let compute overlap the second load; each of the four
queues filled to TOKEN_QUEUE_DEPTH so its producer blocks in PUSH (a stall the busy and
stall counters show) until the consumer pops; a long ping-pong run.
"""

from __future__ import annotations

import numpy as np

from hw.assembler import Assembler
from hw.config import HwConfig, load_config
from testbench.block_bench import run_block_bench
from tests.units.every_level import Case, level_tests, needs_rtl
from tests.units.programs import long_program, narrow, random_vectors, relay, vadd, vadd_tiled


def l2c_full(cfg: HwConfig) -> Case:
    """Short LOADs push l2c faster than slow ALUs pop it: the load unit blocks on a full queue."""
    n = cfg.token_queue_depth + 2
    data = random_vectors(cfg, n, 51, -1000, 1000)
    asm = Assembler(cfg, "tokens_l2c_full")
    a = asm.input("a", data)
    out = asm.output("out", (n, cfg.lanes))
    for k in range(n):
        asm.load(a, offset=k, sram=k, push_next=True)
    for k in range(n):
        asm.alu("ADD", imm=k, iter_in=40, dst_base=k, pop_prev=True, push_next=k == n - 1)
    asm.store(out, x=n, pop_prev=True)
    asm.finish()
    exp = data.astype(np.int64) + 40 * np.arange(n)[:, None]
    return Case(asm.program(expected={"out": narrow(cfg, exp)}))


def c2s_full(cfg: HwConfig) -> Case:
    """One-vector ALUs push c2s faster than multi-burst STOREs pop it: compute blocks in PUSH."""
    n = cfg.token_queue_depth + 2
    x = min(cfg.acc_depth // n, 4)
    data = random_vectors(cfg, n * x, 52, -1000, 1000)
    asm = Assembler(cfg, "tokens_c2s_full")
    a = asm.input("a", data)
    out = asm.output("out", (n * x, cfg.lanes))
    asm.load(a, x=n * x, push_next=True)
    for k in range(n):
        asm.alu("ADD", imm=k, iter_out=x, dst_base=k * x, dst_factor_out=1, pop_prev=k == 0, push_next=True)
    for k in range(n):
        asm.store(out, x=x, offset=k * x, sram=k * x, pop_prev=True)
    asm.finish()
    exp = data.astype(np.int64) + np.repeat(np.arange(n), x)[:, None]
    return Case(asm.program(expected={"out": narrow(cfg, exp)}))


def s2c_full(cfg: HwConfig) -> Case:
    """STOREs push s2c (compute frees nothing yet) until the queue is full; compute pops them late."""
    n = cfg.token_queue_depth + 2
    asm = Assembler(cfg, "tokens_s2c_full")
    out = asm.output("out", (n, cfg.lanes))
    asm.alu("MOV", imm=-5, push_next=True)
    for k in range(n):
        asm.store(out, offset=k, pop_prev=k == 0, push_prev=True)
    for k in range(n):
        asm.alu("ADD", imm=1, iter_in=20, dst_base=1, pop_next=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, np.full((n, cfg.lanes), -5))}))


def c2l_full(cfg: HwConfig) -> Case:
    """ALUs push c2l faster than multi-burst LOADs pop it: compute blocks on a full queue."""
    n = cfg.token_queue_depth + 2
    x = min(cfg.acc_depth // (2 * n), 3)
    data = random_vectors(cfg, n * x, 53)
    asm = Assembler(cfg, "tokens_c2l_full")
    a = asm.input("a", data)
    out = asm.output("out", (n * x, cfg.lanes))
    for _ in range(n):
        asm.alu("MOV", imm=3, iter_out=x, dst_base=n * x, dst_factor_out=1, push_prev=True)
    for k in range(n):
        asm.load(a, x=x, offset=k * x, sram=k * x, pop_next=True, push_next=k == n - 1)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out, x=n * x, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, data)}))


def overlap(cfg: HwConfig, x: int = 4) -> Case:
    """L0, L1 push l2c; A0 pops it and runs while L1 is still loading; A1 pops the second token."""
    data = random_vectors(cfg, 2 * x, 54, -1000, 1000)
    asm = Assembler(cfg, "tokens_compute_overlaps_load")
    a = asm.input("a", data)
    out = asm.output("out", (2 * x, cfg.lanes))
    asm.load(a, x=x, push_next=True)
    asm.load(a, x=x, offset=x, sram=x, push_next=True)
    asm.alu("MUL", imm=3, iter_out=3, iter_in=x, dst_base=0, dst_factor_in=1, pop_prev=True)
    asm.alu("MUL", imm=3, iter_out=3, iter_in=x, dst_base=x, dst_factor_in=1, pop_prev=True, push_next=True)
    asm.store(out, x=2 * x, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, data.astype(np.int64) * 27)}))


def cases(cfg: HwConfig) -> list[Case]:
    return [
        Case(vadd(cfg, n=1, seed=1, name="vadd1")),
        Case(vadd(cfg, n=7, seed=2, name="vadd7")),
        Case(vadd_tiled(cfg, 40, seed=40)),
        Case(vadd_tiled(cfg, 33, seed=1, tile=4)),
        overlap(cfg),
        l2c_full(cfg),
        c2s_full(cfg),
        s2c_full(cfg),
        c2l_full(cfg),
        Case(long_program(cfg, reps=6)),
    ]


CFG = load_config("default")
CASES = cases(CFG)
test_iss, test_tlm, rtl_results, test_rtl_matches_tlm = level_tests(CASES, CFG)


@needs_rtl
def test_block_bench():
    """token_queue.v alone against a Python counter: push/pop protocol, full, empty, clear ('small':
    a queue of 4 tokens fills and drains often)."""
    run_block_bench("token_queue", "testbench.units.token_queue_bench", load_config("small"))


@needs_rtl
def test_block_bench_rebuilds_a_folder_built_from_other_sources(tmp_path, monkeypatch):
    """A block bench's build folder left by another checkout (a shared build folder, a moved tree) is
    rebuilt: its objects and make's dependency lists, which name the other checkout's files, are dropped
    (else make stops on a missing source); a folder built from these sources is reused as it is."""
    from testbench.rtl_model import build_root

    monkeypatch.setenv("COSIM_BUILD_DIR", str(tmp_path / "build"))
    cfg = load_config("small")
    run_block_bench("token_queue", "testbench.units.token_queue_bench", cfg)
    bdir = next((build_root() / "rtl" / "units").glob("token_queue-small-*-verilator"))
    objs = sorted(bdir.glob("*.o"))
    assert objs and (bdir / "sources.stamp").is_file()
    before = {o: o.stat().st_mtime_ns for o in objs}
    run_block_bench("token_queue", "testbench.units.token_queue_bench", cfg)
    assert {o: o.stat().st_mtime_ns for o in objs} == before  # nothing rebuilt
    # what another checkout leaves: a dependency list naming a file that is not here, another stamp
    gone = tmp_path / "elsewhere" / "hw" / "rtl" / "token_queue.v"
    for d in bdir.glob("*.d"):
        d.write_text(d.read_text().replace(":", f": {gone}", 1))
    (bdir / "sources.stamp").write_text("another checkout")
    run_block_bench("token_queue", "testbench.units.token_queue_bench", cfg)
    assert all(gone.as_posix() not in d.read_text() for d in bdir.glob("*.d"))
