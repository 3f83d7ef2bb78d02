"""What the dependency tokens decide, on the ISS, the TLM and the RTL alike: an instruction that waits
for a later instruction's token runs after it (program order is not the order of execution), an
instruction stuck behind a deadlock never runs (its fault never happens), a deadlock on several cores
is reported where the hardware reports it, and anything but a FINISH after the FINISH (whose running
would depend on timing) is refused before any model sees it. All RTL runs of a config in one simulator
process."""

from __future__ import annotations

import numpy as np
import pytest

from cosim import models
from hw.assembler import Assembler
from hw.config import HwConfig, load_config
from hw.isa import Alu, Finish, Load, Store
from hw.program import Program, ProgramError, concat_streams

try:
    from testbench.rtl_model import rtl_available
    HAVE_RTL = rtl_available()
except Exception:  # noqa: BLE001 - no testbench means no RTL
    HAVE_RTL = False


def store_before_its_alu(cfg: HwConfig) -> tuple[Program, dict]:
    """STORE at pc 0 pops the token the ALU at pc 1 pushes: the ALU's result is what is stored."""
    asm = Assembler(cfg, "store_before_its_alu")
    c = asm.output("c", (4, cfg.lanes))
    asm.store(c, x=4, pop_prev=True)
    asm.alu("ADD", imm=3, iter_out=4, dst_factor_out=1, push_next=True)
    asm.finish()
    return asm.program(), {"c": np.full((4, cfg.lanes), 3, np.int8)}


def alu_before_its_load(cfg: HwConfig) -> tuple[Program, dict]:
    """The ALU at pc 0 waits for the LOAD at pc 1: it adds to the loaded data (program order would
    have the LOAD overwrite the sum)."""
    asm = Assembler(cfg, "alu_before_its_load")
    a = np.arange(4 * cfg.lanes, dtype=np.int32).reshape(4, cfg.lanes) % 50
    ta = asm.input("a", a)
    c = asm.output("c", (4, cfg.lanes))
    asm.alu("ADD", imm=7, iter_out=4, dst_factor_out=1, pop_prev=True, push_next=True)
    asm.load(ta, x=4, push_next=True)
    asm.store(c, x=4, pop_prev=True)
    asm.finish()
    return asm.program(), {"c": (a + 7).astype(np.int8)}


def fault_while_waiting(cfg: HwConfig) -> tuple[Program, tuple]:
    """As below, but LOAD 0 itself reads outside DRAM: its range check comes on entering WAIT, before the
    token it waits for forever, so the fault is the error, not the deadlock."""
    asm = Assembler(cfg, "fault_while_waiting")
    ta = asm.input("a", np.zeros((4, cfg.lanes), np.int32))
    c = asm.output("c", (4, cfg.lanes))
    asm.load(ta, x=4, offset=1 << 20, pop_next=True)
    asm.alu("ADD", imm=1, iter_out=4, dst_factor_out=1, pop_prev=True, push_prev=True)
    asm.load(ta, x=4, push_next=True)
    asm.store(c, x=4)
    asm.finish()
    return asm.program(), ("DRAM_RANGE", 0, None)


def fault_behind_a_deadlock(cfg: HwConfig) -> tuple[Program, tuple]:
    """LOAD 0 waits for the ALU, which waits for LOAD 2, queued behind LOAD 0: a deadlock at pc 0. LOAD 3
    reads outside DRAM, but no unit ever reaches it."""
    asm = Assembler(cfg, "fault_behind_a_deadlock")
    ta = asm.input("a", np.zeros((4, cfg.lanes), np.int32))
    c = asm.output("c", (4, cfg.lanes))
    asm.load(ta, x=4, pop_next=True)
    asm.alu("ADD", imm=1, iter_out=4, dst_factor_out=1, pop_prev=True, push_prev=True)
    asm.load(ta, x=4, push_next=True)
    asm.load(ta, x=4, offset=1 << 20)
    asm.store(c, x=4)
    asm.finish()
    return asm.program(), ("DEADLOCK", 0, None)


def _cores_program(cfg: HwConfig, name: str, streams_of) -> Program:
    """A Program of ``cfg.num_cores`` cores, each with 4 vectors of ``a`` and of ``c``; ``streams_of(av, cv)``
    gives the streams from the two regions' vector addresses."""
    n, L = cfg.num_cores, cfg.lanes
    asm = Assembler(cfg, name)
    asm.input("a", np.zeros((4 * n, L), np.int32))
    asm.output("c", (4 * n, L))

    def laid_out(count: int) -> tuple[list, list]:
        regions = asm.regions(count)
        by = {r.name: r for r in regions}
        return regions, streams_of(by["a"].addr // cfg.acc_vec_bytes, by["c"].addr // cfg.out_vec_bytes)

    regions, streams = laid_out(sum(len(s) for s in laid_out(1)[1]))  # the layout depends on the count
    insns, windows = concat_streams(streams)
    return Program.create(cfg, insns, regions, name=name, inputs={"a": asm._data["a"]}, windows=windows,
                          check_tokens=False)


def _copy(av: int, cv: int, k: int) -> list:
    return [Load(dram_base=av + 4 * k, x_size=4, x_stride=4, push_next=True),
            Alu(use_imm=True, imm=1, iter_out=4, dst_factor_out=1, pop_prev=True, push_next=True),
            Store(dram_base=cv + 4 * k, x_size=4, x_stride=4, pop_prev=True)]


def core_without_finish(cfg: HwConfig) -> tuple[Program, tuple]:
    """Core 1's stream has no FINISH: once everything is idle nothing holds a pc, so the hardware names
    core 0 at its INSN_COUNT."""
    def streams(av: int, cv: int) -> list:
        return [_copy(av, cv, k) + ([] if k == 1 else [Finish()]) for k in range(cfg.num_cores)]
    return _cores_program(cfg, "core_without_finish", streams), ("DEADLOCK", 4, 0)


def fault_beside_a_deadlock(cfg: HwConfig) -> tuple[Program, tuple]:
    """Core 0 waits for a token nobody pushes; the last core reads outside DRAM meanwhile. The fault
    happens (a deadlock is only seen when nothing moves anywhere), so it is the error."""
    last = cfg.num_cores - 1

    def streams(av: int, cv: int) -> list:
        out = [_copy(av, cv, k) + [Finish()] for k in range(cfg.num_cores)]
        out[0] = [Alu(iter_out=0, pop_prev=True), Finish()]
        out[last] = [Load(dram_base=av + (1 << 20), x_size=4, x_stride=4), Finish()]
        return out
    return _cores_program(cfg, "fault_beside_a_deadlock", streams), ("DRAM_RANGE", 0, last)


def _key(r) -> tuple | None:
    return r.error and (r.error["name"], r.error["pc"], r.error.get("core"))


ONE_CORE = {"store_before_its_alu": store_before_its_alu, "alu_before_its_load": alu_before_its_load,
            "fault_behind_a_deadlock": fault_behind_a_deadlock, "fault_while_waiting": fault_while_waiting}
SEVERAL = {"core_without_finish": core_without_finish, "fault_beside_a_deadlock": fault_beside_a_deadlock}
CASES = [(c, "small", f) for c, f in ONE_CORE.items()] + [(c, "small2", f) for c, f in SEVERAL.items()] + \
    [(c, "quad", f) for c, f in SEVERAL.items()]


@pytest.fixture(scope="module")
def results() -> dict:
    """Per case: its Program, what it must give, and the ISS's, TLM's and (if built) RTL's results."""
    out, by_cfg = {}, {}
    for case, cname, make in CASES:
        p, want = make(load_config(cname))
        out[case, cname] = [p, want, models.iss(p), models.tlm(p), None]
        by_cfg.setdefault(cname, []).append((case, cname))
    if HAVE_RTL:
        for cname, keys in by_cfg.items():
            for key, r in zip(keys, models.rtl([out[k][0] for k in keys], load_config(cname))):
                out[key][4] = r
    return out


@pytest.mark.parametrize("case,cname", [(c, n) for c, n, _ in CASES])
def test_every_model_runs_what_the_tokens_allow(results, case: str, cname: str) -> None:
    p, want, iss, tlm, rtl = results[case, cname]
    runs = [iss, tlm] + ([rtl] if rtl is not None else [])
    for r in runs:
        if isinstance(want, dict):
            assert r.error is None, (r.model, r.error)
            for k, v in want.items():
                assert np.array_equal(r.outputs[k], v), (r.model, k)
        else:
            assert _key(r) == want, (r.model, r.error)
    if rtl is None:
        pytest.skip("no RTL: the ISS and the TLM checked")
    assert rtl.cycles == tlm.cycles and rtl.counters == tlm.counters


def test_a_load_or_store_after_the_finish_is_refused(tmp_path) -> None:
    cfg = load_config("small")
    asm = Assembler(cfg, "late_store")
    c = asm.output("c", (4, cfg.lanes))
    asm.alu("ADD", imm=1, iter_out=4, dst_factor_out=1, push_next=True)
    asm.finish()
    asm.store(c, x=4, pop_prev=True)
    with pytest.raises(ProgramError, match=r"late_store: instruction 2 \(STORE\) follows the FINISH at instruction 1"):
        asm.program()
    # an ALU there too (how many words after the FINISH are fetched depends on timing)
    late = Assembler(cfg, "late_alu")
    late.finish()
    late.alu("ADD", imm=5, iter_out=4, dst_factor_out=1)
    with pytest.raises(ProgramError, match=r"instruction 1 \(ALU\) follows the FINISH at instruction 0"):
        late.program()
    # FINISHes as padding are never run: accepted
    ok = Assembler(cfg, "padded")
    c = ok.output("c", (4, cfg.lanes))
    ok.alu("ADD", imm=1, iter_out=4, dst_factor_out=1, push_next=True)
    ok.store(c, x=4, pop_prev=True)
    ok.finish()
    ok.finish()
    p = ok.program()
    assert all(np.array_equal(r.outputs["c"], np.ones((4, cfg.lanes), np.int8)) for r in (models.iss(p), models.tlm(p)))
    # a folder whose insn.bin was edited: refused on load, naming the file
    p.save(tmp_path / "late")
    words = p.isa.encode_stream(p.insns[:3] + [Load(dram_base=0, x_size=1, x_stride=1)] + p.insns[4:])
    (tmp_path / "late" / "insn.bin").write_bytes(words)
    with pytest.raises(ProgramError, match=r"insn.bin: instruction 3 \(LOAD\) follows the FINISH at instruction 2"):
        Program.load(tmp_path / "late")


def test_a_waiting_instruction_s_range_fault_comes_where_it_enters_wait() -> None:
    """LOAD 0 waits forever for its token and reads outside DRAM; the ALU after it is out of the
    accumulator: the LOAD's check comes first (on entering WAIT), on the ISS as on the TLM."""
    cfg = load_config("small")
    asm = Assembler(cfg, "two_faults")
    ta = asm.input("a", np.zeros((4, cfg.lanes), np.int32))
    asm.load(ta, x=4, offset=1 << 20, pop_next=True)
    asm.alu("ADD", imm=1, iter_out=4, dst_base=cfg.acc_depth - 2, dst_factor_out=1)
    asm.finish()
    p = asm.program()
    assert _key(models.iss(p)) == _key(models.tlm(p)) == ("DRAM_RANGE", 0, None)


def test_raw_words_do_not_count_as_a_finish() -> None:
    """A raw word lists as FINISH (its stand-in) but is no FINISH: instructions after it are accepted."""
    cfg = load_config("small")
    asm = Assembler(cfg, "raw_first")
    asm.raw(0x7)
    asm.alu("ADD", imm=1, iter_out=1, dst_factor_out=1)
    asm.finish()
    p = asm.program()
    assert _key(models.iss(p)) == _key(models.tlm(p)) == ("BAD_OPCODE", 0, None)
