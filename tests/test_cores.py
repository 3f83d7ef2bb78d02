"""The golden path on several cores (compiler/cores.py): one run per core, barriers, the race check,
in both threading modes; Programs with a window per core (compiling for several cores: tests/test_cores_build.py)."""

from __future__ import annotations

import dataclasses
import re
import threading
from pathlib import Path

import numpy as np
import pytest

from compiler import S, build, tensor
from compiler.cores import BarrierError, RaceError
from compiler.errors import CompileError
from hw.config import _KEYS, ConfigError, HwConfig, load_config, parse_config
from hw.program import Program, ProgramError


def _cores(n: int, base: str = "default"):
    data = {k: v for k, v in dataclasses.asdict(load_config(base)).items() if k in _KEYS}
    return parse_config({**data, "num_cores": n, "name": f"{base}x{n}"})


@pytest.fixture(params=["threads", "one thread"])
def mode(request, monkeypatch) -> str:
    monkeypatch.setenv("COSIM_SINGLE_THREAD", "1" if request.param == "one thread" else "0")
    return request.param


@S.kernel
def split_vadd(a, b, c):
    """Each core adds its share of the vectors (split by core id), then all meet at a barrier."""
    n, k = S.num_cores(), S.core_id()
    per = -(-a.nvec // n)
    lo, hi = k * per, min(a.nvec, (k + 1) * per)
    for v0 in range(lo, hi, 64):
        t = min(64, hi - v0)
        S.load(S.acc[0:t], a, offset=v0)
        S.load(S.acc[64:64 + t], b, offset=v0)
        S.add(S.acc[0:t], S.acc[64:64 + t])
        S.store(c, S.acc[0:t], offset=v0)
    S.barrier()


@S.kernel
def exchange(a, c, d, ordered=True):
    """Phase 1: core k writes its two vectors of c. Phase 2 (after the barrier when ``ordered``): it
    reads its neighbour's and writes them to d."""
    k, n = S.core_id(), S.num_cores()
    S.load(S.acc[0:2], a, offset=2 * k)
    S.add(S.acc[0:2], k)
    S.store(c, S.acc[0:2], offset=2 * k)
    if ordered:
        S.barrier()
    # int8 comes back through the input buffer (a GEMM against the identity block)
    S.load(S.wgt[0:1], S.const(np.eye(c.lanes, dtype=np.int8)[None], "identity"), cols=1)
    S.load(S.uop[0:1], S.uops([(0, 0, 0)]), cols=1)
    S.load(S.inp[0:2], c, offset=2 * ((k + 1) % n), cols=2)
    S.mov(S.acc[0:2], 0)
    S.gemm(S.uop[0:1], iters=(2, 1), acc_factors=(1, 0), inp_factors=(1, 0))
    S.store(d, S.acc[0:2], offset=2 * k)


@S.kernel
def double_write(a, c):
    S.load(S.acc[0:4], a)
    S.store(c, S.acc[0:4], offset=2 if S.core_id() == 2 else 8 * S.core_id())
    S.barrier()


@S.kernel
def skips_barrier(a, c):
    if S.core_id() != 2:
        S.barrier()
    S.load(S.acc[0:1], a, offset=S.core_id())
    S.store(c, S.acc[0:1], offset=S.core_id())


@S.kernel
def fails_on_core_3(a, c):
    if S.core_id() == 3:
        raise ValueError("core three is broken")
    S.barrier()


@S.kernel
def who_am_i(a, c):
    S.load(S.acc[0:1], a)
    S.mov(S.acc[0:1], S.core_id() * 10 + len(threading.current_thread().name))
    S.store(c, S.acc[0:1], offset=S.core_id())


def _ints(n: int) -> np.ndarray:
    return (np.arange(n, dtype=np.int32) * 7) % 100


def test_each_core_takes_its_share_and_the_result_is_whole(mode: str) -> None:
    a, b = _ints(16 * 300), np.ones(16 * 300, dtype=np.int32)
    c = np.zeros(16 * 300, dtype=np.int8)
    split_vadd(a, b, c, config=_cores(4))
    assert np.array_equal(c, (a + b).astype(np.int8))


def test_data_written_before_a_barrier_is_read_after_it(mode: str) -> None:
    n = 4
    a = _ints(16 * 2 * n)
    c, d = np.zeros(16 * 2 * n, np.int8), np.zeros(16 * 2 * n, np.int8)
    exchange(a, c, d, config=_cores(n))
    want_c = np.concatenate([(a[32 * k:32 * k + 32] + k) for k in range(n)]).astype(np.int8)
    assert np.array_equal(c, want_c)
    assert np.array_equal(d, np.roll(want_c.reshape(n, 32), -1, axis=0).reshape(-1))


def test_a_write_and_a_read_of_another_core_between_barriers_is_a_race(mode: str) -> None:
    a = _ints(16 * 8)
    with pytest.raises(RaceError) as e:
        exchange(a, np.zeros(16 * 8, np.int8), np.zeros(16 * 8, np.int8), ordered=False, config=_cores(4))
    msg = str(e.value)
    assert "\n" not in msg and "before the first barrier" in msg and "tensor 'c'" in msg
    assert re.search(r"core \d writes \(test_cores.py:\d+\) and core \d reads \(test_cores.py:\d+\)", msg), msg


def test_two_cores_writing_one_element_is_a_race_naming_both_and_the_element(mode: str) -> None:
    line = double_write.fn.__code__.co_firstlineno + 3  # its store (the first line is the decorator)
    with pytest.raises(RaceError, match=rf"core 0 writes \(test_cores.py:{line}\) and core 2 writes "
                                        rf"\(test_cores.py:{line}\) tensor 'c' element \[32\]"):
        double_write(_ints(64), np.zeros(16 * 32, np.int8), config=_cores(4))


def test_a_core_that_skips_the_barrier_is_an_error_naming_the_cores(mode: str) -> None:
    with pytest.raises(BarrierError, match=r"barrier at test_cores.py:\d+: core\(s\) 0, 1, 3 waited, core\(s\) 2 "
                                           r"finished without reaching it"):
        skips_barrier(_ints(64), np.zeros(64, np.int8), config=_cores(4))


def test_an_exception_in_one_core_is_raised_naming_it(mode: str) -> None:
    """On the golden path and in the compile alike: the kernel, the core, the kernel's file and line."""
    line = fails_on_core_3.fn.__code__.co_firstlineno + 3  # its raise (the first line is the decorator)
    where = rf"kernel 'fails_on_core_3': core 3 \(\S+test_cores.py:{line}\) raised ValueError: core three is broken"
    with pytest.raises(CompileError, match=where) as e:
        fails_on_core_3(_ints(64), np.zeros(64, np.int8), config=_cores(4))
    assert type(e.value.__cause__) is ValueError  # the kernel's own exception
    with pytest.raises(CompileError, match=where) as e:
        build(fails_on_core_3, [tensor((64,), "int32"), tensor((64,), "int8")], _cores(4))
    assert type(e.value.__cause__) is ValueError  # the kernel's own exception


def test_threads_are_named_after_their_core_and_one_thread_mode_uses_the_callers(mode: str) -> None:
    c = np.zeros(16 * 4, np.int8)
    who_am_i(_ints(16), c, config=_cores(4))
    names = c.reshape(4, 16)[:, 0] - np.arange(4) * 10
    if mode == "threads":
        assert list(names) == [len(f"core{k}") for k in range(4)]
    else:
        assert list(names) == [len(threading.current_thread().name)] * 4


def test_one_core_barrier_is_a_sync_and_compiles() -> None:
    a, b = _ints(16 * 40), np.ones(16 * 40, dtype=np.int32)
    prog = build(split_vadd, [tensor(a.shape, "int32"), tensor(b.shape, "int32"), tensor(a.shape, "int8")])
    assert len(prog.insns) > 3


def test_config_takes_1_to_16_cores() -> None:
    assert _cores(16).num_cores == 16
    with pytest.raises(ConfigError, match="num_cores"):
        _cores(17)


def _two_core_program(cfg: HwConfig) -> Program:
    from hw.isa import Barrier, Finish, Load, Store
    from hw.program import concat_streams, plan_layout

    core0 = [Load(dram_base=0, push_next=True), Barrier(pop_prev=True), Finish()]
    core1 = [Load(dram_base=1, push_next=True), Barrier(pop_prev=True), Store(), Finish()]
    insns, windows = concat_streams([core0, core1])
    regions = plan_layout(cfg, [("a", "input", (2, cfg.lanes), "int32"), ("o", "output", (1, cfg.lanes), "int8")],
                          len(insns))
    return Program.create(cfg, insns, regions, windows=windows)


def test_program_of_two_cores_has_a_window_per_core_and_round_trips(tmp_path: Path) -> None:
    cfg = _cores(2)
    p = _two_core_program(cfg)
    assert p.windows == [(0, 3), (3, 4)] and [i.MNEMONIC for i in p.core_insns(1)] == ["LOAD", "BARRIER", "STORE",
                                                                                         "FINISH"]
    assert p.core_of(4) == (1, 1)
    regs = dict(p.regs)
    insn = p.region("insn")
    assert regs["CORE1_INSN_ADDR_LO"] == insn.addr + 3 * 16 and regs["CORE1_INSN_COUNT"] == 4
    assert "INSN_COUNT" not in regs and p.regs[-1] == ("CTRL", 1)
    p.save(tmp_path / "p")
    lst = (tmp_path / "p" / "program.lst").read_text()
    assert lst.startswith("; core 0\n") and "; core 1\n     0:  LOAD" in lst
    q = Program.load(tmp_path / "p", cfg)
    assert q.windows == p.windows and q.insns == p.insns and q.regs == p.regs


def test_program_of_two_cores_refuses_bad_windows(tmp_path: Path) -> None:
    import json

    cfg = _cores(2)
    p = _two_core_program(cfg)
    with pytest.raises(ProgramError, match="1 instruction stream\\(s\\), but config '.*' has 2 core"):
        Program.create(cfg, p.insns, p.regions)
    with pytest.raises(ProgramError, match="core 1's instruction window starts at 3 with 0"):
        Program.create(cfg, p.insns, p.regions, windows=[(0, 3), (3, 0)])
    p.save(tmp_path / "p")
    lay = json.loads((tmp_path / "p" / "layout.json").read_text())
    lay["cores"] = [4, 3]
    (tmp_path / "p" / "layout.json").write_text(json.dumps(lay))
    with pytest.raises(ProgramError, match=r"insn.bin \(core 0\): .*token|regs.json: core 0's INSN_ADDR"):
        Program.load(tmp_path / "p", cfg)
    del lay["cores"]
    (tmp_path / "p" / "layout.json").write_text(json.dumps(lay))
    with pytest.raises(ProgramError, match="layout.json: needs 'cores'"):
        Program.load(tmp_path / "p", cfg)


# ---- the operators split their work by core ------------------------------------------------------
def test_elementwise_operator_split_by_tiles_matches_one_core(mode: str) -> None:
    from compiler import ops

    a, b = _ints(16 * 1000) - 50, _ints(16 * 1000)[::-1].copy()
    one, four = np.zeros(a.size, np.int8), np.zeros(a.size, np.int8)
    ops.binary(a, b, one, op="add")
    ops.binary(a, b, four, op="add", config=_cores(4))
    assert np.array_equal(one, four)


@pytest.mark.parametrize("name, params", [
    ("matmul", {"M": 37, "K": 70, "N": 40}),
    ("dense", {"M": 9, "K": 50, "N": 70, "shift": 7, "relu": True}),
    ("conv2d", {"batch": 2, "C": 20, "H": 7, "W": 6, "O": 40, "kernel": 3, "stride": 1, "pad": 1, "shift": 8,
                "relu": True}),
    ("residual_add", {"batch": 1, "C": 40, "H": 9, "W": 9, "shift": 1, "relu": True}),
    ("resnet_block", {"batch": 1, "C": 32, "H": 6, "W": 6, "kernel": 3, "shift1": 8, "shift2": 8}),
])
def test_gemm_operators_split_by_output_channels_match_the_reference(name: str, params: dict, mode: str) -> None:
    from compiler.gemm_ops import GEMM_OPERATORS

    op = GEMM_OPERATORS[name]
    arrays = op.random_inputs(np.random.default_rng(5), params)
    cfg = _cores(3, "small")
    want = op.reference(arrays, params).astype(np.int8)
    assert np.array_equal(op.run(cfg, arrays, params), want)


def test_a_network_runs_on_several_cores_with_a_barrier_between_stages(mode: str) -> None:
    from compiler.graph_reference import run_reference
    from compiler.network import compile_network
    from compiler.networks import NETWORKS

    digits = NETWORKS["digits"]
    images = digits.dataset("test")[0][:7]
    net = compile_network(digits.graph(), "default", batch=7)
    args = {**net.packed_inputs({digits.input_name: images}), **net.consts}
    out = net.program.region(digits.output_name)
    args[digits.output_name] = np.zeros(out.shape, np.int8)
    tensors = net.kernel.run_golden(_cores(4), args)
    got = net.outputs({digits.output_name: tensors[digits.output_name].data.reshape(out.shape)})
    assert np.array_equal(got[digits.output_name], run_reference(digits.graph(), {digits.input_name: images})[
        digits.output_name])
