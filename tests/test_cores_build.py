"""Compiling for several cores (compiler/build.py) and running the Programs on the ISS (sim/iss.py).

The kernel is traced once per core; each core gets its own stream (FINISH last, ``S.barrier()`` as
the BARRIER instruction, no dependency token crossing a BARRIER), the streams share one DRAM layout,
and the ISS runs them in phases and agrees with the golden path. A core that skips a barrier is
ERR_BARRIER naming the core; the disassembly shows each core's stream."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import S, build, tensor
from compiler.examples import make_case
from cosim.models import first_mismatch, iss
from hw import csr
from hw.analysis import balance_problem, deadlock_pc, happens_before
from hw.isa import Alu, Barrier, Finish, Load, Store
from hw.program import Program, concat_streams, plan_layout
from tests.test_cores import _cores, exchange, skips_barrier, split_vadd

CONFIGS = [("default", 2), ("default", 4), ("small", 2), ("small", 4)]


def _mnemonics(p: Program, k: int) -> list[str]:
    return [i.MNEMONIC for i in p.core_insns(k)]


def _segments(insns: list) -> list[list]:
    """The stream cut after every BARRIER."""
    out, cur = [], []
    for i in insns:
        cur.append(i)
        if i.MNEMONIC == "BARRIER":
            out.append(cur)
            cur = []
    return out + [cur]


@pytest.mark.parametrize("n", [2, 4])
def test_a_split_kernel_gets_one_stream_per_core_each_ending_with_finish(n: int) -> None:
    p = build(split_vadd, [tensor(16 * 300, "int32"), tensor(16 * 300, "int32"), tensor(16 * 300, "int8")],
              _cores(n))
    assert p.num_cores == n and sum(c for _, c in p.windows) == len(p.insns)
    for k in range(n):
        names = _mnemonics(p, k)
        assert names[-1] == "FINISH" and names.count("FINISH") == 1
        assert names.count("BARRIER") == 1 and names[-2] == "BARRIER"
        # the compiler's own rule: every token is pushed and popped between two barriers
        for seg in _segments(p.core_insns(k)):
            assert balance_problem(seg) is None
    # the same layout for every core: core k's stores go to its share of c
    c = p.region("c")
    per = -(-300 // n)
    firsts = [next(i for i in p.core_insns(k) if i.MNEMONIC == "STORE").dram_base for k in range(n)]
    assert firsts == [c.addr // p.config.out_vec_bytes + k * per for k in range(n)]


def test_one_core_keeps_the_barrier_a_sync_without_a_barrier_instruction() -> None:
    p = build(split_vadd, [tensor(16 * 40, "int32"), tensor(16 * 40, "int32"), tensor(16 * 40, "int8")])
    assert p.windows == [(0, len(p.insns))] and "BARRIER" not in [i.MNEMONIC for i in p.insns]
    assert "core_sections" not in p.meta


@pytest.mark.parametrize("base, n", CONFIGS)
@pytest.mark.parametrize("name", ["vadd", "fused", "matmul", "dense", "conv3x3", "conv3x3_s2", "resnet_block"])
def test_iss_agrees_with_golden_on_several_cores(name: str, base: str, n: int) -> None:
    case = make_case(name, _cores(n, base))
    p = case.program
    assert p.num_cores == n
    for k in range(n):
        names = _mnemonics(p, k)
        assert names[-1] == "FINISH" and names.count("FINISH") == 1
    barriers = {_mnemonics(p, k).count("BARRIER") for k in range(n)}
    assert len(barriers) == 1  # every core meets every barrier
    res = iss(p)
    assert res.error is None
    assert first_mismatch(case.golden(), res.outputs) is None
    assert len(res.extra["cores"]) == n
    assert res.counters["store_insns"] == sum(c["store_insns"] for c in res.extra["cores"])


def test_a_resnet_block_stores_on_every_core_before_any_core_reads_it_back() -> None:
    case = make_case("resnet_block", _cores(2), {"C": 32, "H": 6, "W": 6})
    p = case.program
    assert all(_mnemonics(p, k).count("BARRIER") == 1 for k in range(2))
    assert first_mismatch(case.golden(), iss(p).outputs) is None


@pytest.mark.parametrize("n", [2, 4])
def test_data_one_core_stores_before_the_barrier_another_reads_after_it(n: int) -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(-100, 100, 32 * n).astype(np.int32)
    cfg = _cores(n)
    p = build(exchange, [a, np.zeros(32 * n, np.int8), np.zeros(32 * n, np.int8)], cfg)
    p.set_input("a", a)
    want_c, want_d = np.zeros(32 * n, np.int8), np.zeros(32 * n, np.int8)
    exchange(a, want_c, want_d, config=cfg)
    res = iss(p)
    assert res.error is None and np.array_equal(res.outputs["d"].reshape(-1), want_d)
    # the barrier orders the scratch store and the load after it: no token does (none crosses it)
    for k in range(n):
        assert all(balance_problem(seg) is None for seg in _segments(p.core_insns(k)))


@pytest.mark.parametrize("n", [2, 4])
def test_the_digits_network_compiles_for_several_cores_and_the_iss_gets_the_reference(n: int) -> None:
    from compiler.graph_reference import run_reference
    from compiler.network import compile_network
    from compiler.networks import NETWORKS

    digits = NETWORKS["digits"]
    images = np.asarray(digits.dataset("test")[0][:3])
    net = compile_network(digits.graph(), _cores(n), batch=3)
    p = net.program
    assert p.num_cores == n
    stages = {_mnemonics(p, k).count("BARRIER") for k in range(n)}
    assert len(stages) == 1 and stages.pop() >= 1
    assert len(p.meta["core_sections"]) == n and p.meta["sections"] == p.meta["core_sections"][0]
    net.set_inputs({digits.input_name: images})
    res = iss(p)
    assert res.error is None
    want = run_reference(digits.graph(), {digits.input_name: images})[digits.output_name]
    assert np.array_equal(net.outputs(res.outputs)[digits.output_name], want)


def test_a_core_that_skips_the_barrier_compiles_and_the_iss_reports_err_barrier_naming_the_core() -> None:
    cfg = _cores(4)
    p = build(skips_barrier, [tensor(64, "int32"), tensor(64, "int8")], cfg)
    assert [_mnemonics(p, k).count("BARRIER") for k in range(4)] == [1, 1, 0, 1]
    p.set_input("a", np.zeros(64, np.int32))
    err = iss(p).error
    assert err is not None and err["code"] == csr.ERR_BARRIER and err["core"] == 0
    assert err["pc"] == _mnemonics(p, 0).index("BARRIER")
    assert "core(s) 0, 1, 3 wait at a BARRIER, core(s) 2 finished" in err["message"]


# ---- hand-made streams: the ISS's phases and faults per core ---------------------------------------
def _regions(cfg, n_insns: int) -> list:
    return plan_layout(cfg, [("a", "input", (4, cfg.lanes), "int32"), ("o", "output", (4, cfg.lanes), "int8")],
                       n_insns)


def _program(cfg, streams: list[list]) -> Program:
    insns, windows = concat_streams(streams)
    p = Program.create(cfg, insns, _regions(cfg, len(insns)), windows=windows)
    p.set_input("a", np.arange(4 * cfg.lanes, dtype=np.int32).reshape(4, cfg.lanes))
    return p


def _bases(cfg, n_insns: int) -> tuple[int, int]:
    """The ACC-entry index of ``a`` and the output-vector index of ``o`` in a Program of ``n_insns``."""
    r = {x.name: x for x in _regions(cfg, n_insns)}
    return r["a"].addr // cfg.elem_bytes("ACC"), r["o"].addr // cfg.out_vec_bytes


def test_iss_error_names_the_faulting_core_and_its_own_pc() -> None:
    cfg = _cores(2)
    a, o = _bases(cfg, 8)
    core0 = [Load(dram_base=a, y_size=1, x_size=1, x_stride=1, push_next=True), Alu(use_imm=True, pop_prev=True, push_next=True),
             Store(dram_base=o, y_size=1, x_size=1, x_stride=1, pop_prev=True), Barrier(), Finish()]
    core1 = [Barrier(), Store(dram_base=1 << 20, y_size=1, x_size=1, x_stride=1), Finish()]
    res = iss(_program(cfg, [core0, core1]))
    assert res.error["code"] == csr.ERR_DRAM_RANGE and res.error["core"] == 1 and res.error["pc"] == 1
    assert res.extra["cores"][0]["store_insns"] == 1


def test_iss_runs_the_cores_in_phases_so_a_store_after_a_barrier_comes_last() -> None:
    cfg = _cores(2)
    a, o = _bases(cfg, 10)
    one = dict(y_size=1, x_size=1, x_stride=1)
    # core 1 stores a[1] to o[0] before the barrier, core 0 stores a[2] there after it: core 0's is last
    # (running core 0's whole stream before core 1's would leave core 1's)
    core0 = [Barrier(), Load(dram_base=a + 2, **one, push_next=True), Alu(use_imm=True, pop_prev=True, push_next=True),
             Store(dram_base=o, **one, pop_prev=True), Finish()]
    core1 = [Load(dram_base=a + 1, **one, push_next=True), Alu(use_imm=True, pop_prev=True, push_next=True),
             Store(dram_base=o, **one, pop_prev=True), Barrier(), Finish()]
    res = iss(_program(cfg, [core0, core1]))
    assert res.error is None
    lanes = cfg.lanes
    assert list(res.outputs["o"][0]) == list(np.arange(2 * lanes, 3 * lanes).astype(np.int8))
    assert [c["compute_insns"] for c in res.extra["cores"]] == [3, 3]  # BARRIER and FINISH count


def test_a_token_that_only_an_instruction_after_the_barrier_pushes_deadlocks_before_it() -> None:
    cfg = _cores(2)
    # the load waits for a compute token the ALU after the BARRIER would push: fetch never dispatches it
    stream = [Load(pop_next=True), Barrier(), Alu(push_prev=True), Finish()]
    assert deadlock_pc(stream, cfg) == 0
    with pytest.raises(ValueError, match="cycle"):
        happens_before(stream)
    # without the barrier the same tokens are fine (the ALU runs first)
    assert deadlock_pc([Load(pop_next=True), Alu(push_prev=True), Finish()], cfg) is None
    res = iss(_program(cfg, [stream, [Barrier(), Finish()]]))
    assert res.error["code"] == csr.ERR_DEADLOCK and res.error["core"] == 0 and res.error["pc"] == 0


def test_a_barrier_orders_every_earlier_instruction_before_every_later_one() -> None:
    order = happens_before([Load(), Store(), Barrier(), Load(), Alu(), Store(), Finish()])
    assert order.before(0, 3) and order.before(1, 4) and order.before(1, 5) and order.before(2, 3)
    assert not happens_before([Load(), Store(), Alu(), Load(), Finish()]).before(1, 3)


# ---- sections and the disassembly per core --------------------------------------------------------
@S.kernel
def two_phases(a, c):
    S.section("first")
    for v in S.core_range(8):
        S.load(S.acc[0:1], a, offset=v)
        S.store(c, S.acc[0:1], offset=v)
    S.barrier()
    S.section("second")
    for v in S.core_range(8):
        S.load(S.acc[1:2], a, offset=8 + v)
        S.store(c, S.acc[1:2], offset=8 + v)


def test_sections_are_listed_per_core_with_pcs_of_that_core(tmp_path) -> None:
    p = build(two_phases, [tensor(16 * 16, "int32"), tensor(16 * 16, "int8")], _cores(2))
    secs = p.meta["core_sections"]
    assert [[s["name"] for s in c] for c in secs] == [["first", "second"]] * 2
    for k in range(2):
        names = _mnemonics(p, k)
        first, second = secs[k]
        assert first["first"] == 0 and names[second["first"] - 1] == "BARRIER"
        assert second["first"] + second["count"] == len(names) - 1  # up to FINISH, excluded
    p.save(tmp_path / "p")
    lst = (tmp_path / "p" / "program.lst").read_text()
    assert lst.count("; section second") == 2 and lst.index("; core 1") > lst.index("; section second")


# ---- the tools on several cores ---------------------------------------------------------------------
def _config_file(tmp_path, n: int, base: str = "default"):
    import dataclasses
    import json

    cfg = _cores(n, base)
    path = tmp_path / f"{cfg.name}.json"
    path.write_text(json.dumps({k: v for k, v in dataclasses.asdict(cfg).items() if k != "source"}))
    return path


def test_cosim_compile_disasm_and_run_the_iss_on_several_cores(tmp_path, capsys) -> None:
    import json

    from cosim.cli import main

    cfg = str(_config_file(tmp_path, 4))
    assert main(["compile", "vadd", "--config", cfg, "-o", str(tmp_path / "p")]) == 0
    capsys.readouterr()
    assert main(["disasm", str(tmp_path / "p"), "--config", cfg]) == 0
    text = capsys.readouterr().out
    assert [line for line in text.splitlines() if line.startswith("; core")] == [f"; core {k}" for k in range(4)]
    assert text.count("FINISH") == 4 and text.rstrip() == (tmp_path / "p" / "program.lst").read_text().rstrip()
    assert main(["disasm", str(tmp_path / "p"), "--config", cfg, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [c["first"] for c in d["cores"]] == [0, 6, 12, 18] and len(d["insns"]) == 24
    assert main(["run", "vadd", "--config", cfg, "--model", "iss"]) == 0
    out = capsys.readouterr().out
    assert "vadd" in out and " ok " in out and "core 3: insns l/c/s 2/3/1" in out
    assert main(["run", "vadd", "--config", cfg, "--model", "iss", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["match"] is True and len(d["cores"]) == 4 and d["store_insns"] == 4


def test_cosim_net_runs_golden_and_the_iss_on_several_cores(tmp_path, capsys) -> None:
    import json

    from cosim.cli import main

    cfg = str(_config_file(tmp_path, 2, "small"))
    assert main(["net", "digits", "--config", cfg, "--model", "iss", "--images", "5", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["match"] is True and d["accuracy"]["iss"] == d["accuracy"]["reference"]
    assert len(d["program"]["cores"]) == 2 and len(d["cores"]["iss"]) == 2
    assert main(["net", "digits", "--config", cfg, "--model", "golden", "--images", "5"]) == 0
    assert "on 2 cores" in capsys.readouterr().out


def test_the_mismatch_report_names_the_core_of_the_last_store() -> None:
    from cosim.mismatch import last_writers

    p = make_case("vadd", _cores(4)).program  # 4 tiles of 16 vectors: core 3 stores vectors 48..63
    w = last_writers(p, "C", (0, 50, 0, 5))
    assert w.core == 3 and p.core_insns(3)[w.store_pc].MNEMONIC == "STORE"
    assert "of core 3" in str(w) and w.producer_op == "ALU"
    assert last_writers(make_case("vadd", "default").program, "C", (0, 50, 0, 5)).core is None
