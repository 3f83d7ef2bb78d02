"""The fuzzer's own parts: generator validity and reproducibility, reference semantics, checkers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hw import csr
from hw.config import load_config
from hw.isa import ALU_OPS, Alu, Finish, Load, Store
from cosim.fuzz.corpus import base_program
from cosim.fuzz.generator import check_program, generate
from hw.alu_numpy import alu_op
from hw.analysis import deadlock_pc as token_deadlock
from hw.isa_semantics import DEP_FLAGS, alu_scalar
from sim.iss import run_reference

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


def test_same_seed_same_program(cfg):
    a, b = generate(cfg, 42), generate(cfg, 42)
    assert a.insn_bytes == b.insn_bytes and a.regs == b.regs
    assert a.inputs.keys() == b.inputs.keys() and all(np.array_equal(a.inputs[k], b.inputs[k]) for k in a.inputs)
    assert generate(cfg, 43).insn_bytes != a.insn_bytes


def test_generated_programs_are_valid(cfg):
    """Balanced, deadlock-free, race-free, initialised, in range: the reference runs them cleanly."""
    for seed in range(60):
        p = generate(cfg, seed)
        assert check_program(p.insns, cfg, dram=p.dram_image()) is None, seed
        r = run_reference(p)
        assert r.error is None, (seed, r.error)
        assert r.counters["fetch_bytes"] == 16 * len(p.insns)


def test_generator_covers_the_isa():
    """Across a few hundred Programs every ALU op, immediates and buffer operands, padding, zero-size
    tiles, overlapping rows and every token flag appear."""
    seen: set[str] = set()
    for name in ("default", "small", "wide"):
        cfg = load_config(name)
        for seed in range(80):
            for i in generate(cfg, seed).insns:
                seen.add(i.MNEMONIC)
                seen |= {f for f in DEP_FLAGS if getattr(i, f)}
                if isinstance(i, Alu):
                    seen.add(f"alu{i.alu_op}{'i' if i.use_imm else 'b'}")
                    seen.add("alu_noop") if i.iter_out * i.iter_in == 0 else None
                    if i.use_imm and i.imm in (-32768, 32767):
                        seen.add("imm_edge")
                if isinstance(i, (Load, Store)):
                    seen.add("zero_tile") if i.y_size * i.x_size == 0 else None
                    seen.add("overlap_rows") if i.y_size > 1 and i.x_stride < i.x_size else None
                if isinstance(i, Load) and (i.y_pad_0 or i.y_pad_1 or i.x_pad_0 or i.x_pad_1):
                    seen.add("pad")
    want = {f"alu{o}{m}" for o in range(len(ALU_OPS)) for m in "ib"} - {"alu7b"} | {
        "LOAD", "STORE", "ALU", "FINISH", "pop_prev", "pop_next", "push_prev", "push_next", "alu_noop", "imm_edge",
        "zero_tile", "overlap_rows", "pad"}
    assert want <= seen, want - seen


@pytest.mark.parametrize("op,x,s,want", [
    ("ADD", INT_MAX, 1, INT_MIN), ("SUB", INT_MIN, 1, INT_MAX), ("MUL", 0x10000, 0x10000, 0),
    ("MUL", INT_MIN, -1, INT_MIN), ("MUL", -3, 7, -21), ("MIN", -5, 3, -5), ("MAX", -5, 3, 3),
    ("SHR", -8, 1, -4), ("SHR", -1, 31, -1), ("SHR", INT_MIN, 32, -1), ("SHR", INT_MAX, 1000, 0),
    ("SHR", 1, -31, INT_MIN), ("SHR", 3, -31, INT_MIN), ("SHR", 1, -32, 0), ("SHR", 5, -33, 0),
    ("SHR", 5, INT_MIN, 0), ("SHR", 0x40000000, -1, INT_MIN),
    ("CLIP", 1000, 127, 127), ("CLIP", -1000, 127, -127), ("CLIP", 5, -3, -3), ("CLIP", 5, INT_MIN, INT_MIN),
    ("CLIP", 0, 0, 0), ("MOV", 9, -7, -7),
    ("CLZ", 9, 0, 32), ("CLZ", 9, 1, 31), ("CLZ", -1, -1, 0), ("CLZ", 0, INT_MIN, 0), ("CLZ", 0, INT_MAX, 1),
    ("CLZ", 0, 0x8000, 16), ("CLZ", 0, 0x7FFF, 17),
])
def test_reference_alu_semantics(op, x, s, want):
    """microarch.md 'Data semantics', edge values included: the scalar reference semantics (the ISS's
    ALU) and the numpy engine (golden's and the TLM's), with the operand as an immediate and as a lane."""
    assert alu_scalar(ALU_OPS[op], x, s) == want
    assert int(alu_op(ALU_OPS[op], np.array([x], dtype=np.int32), s)[0]) == want
    assert int(alu_op(ALU_OPS[op], np.array([x], dtype=np.int32), np.array([s], dtype=np.int32))[0]) == want


def test_reference_runs_base_program(cfg):
    p = base_program(cfg)
    r = run_reference(p)
    assert r.error is None
    assert np.array_equal(r.outputs["C"], p.expected["C"])
    assert r.counters == {"load_insns": 1, "compute_insns": 2, "store_insns": 1, "fetch_bytes": 64,
                          "dma_rd_bytes": 4 * cfg.acc_vec_bytes, "dma_wr_bytes": 4 * cfg.out_vec_bytes, "gemm_ops": 0}


def test_reference_padding_and_overlapping_alu():
    """LOAD zero-pads in tile order; an ALU whose source trails its destination sees its own writes."""
    cfg = load_config("small")
    p = base_program(cfg)
    ld = dataclasses.replace(p.insns[0], y_size=1, x_size=2, x_pad_0=1, x_pad_1=1)  # tile: 0 a0 a1 0
    alu = Alu(alu_op=ALU_OPS["ADD"], iter_out=1, iter_in=3, dst_base=1, dst_factor_in=1, src_base=0,
              src_factor_in=1, pop_prev=True, push_next=True)  # prefix sum: acc[j+1] += acc[j]
    q = dataclasses.replace(p, insns=[ld, alu, p.insns[2], p.insns[3]])
    r = run_reference(q)
    a = p.inputs["A"].astype(np.int64)
    want = np.stack([np.zeros(8), a[0], a[0] + a[1], a[0] + a[1]]).astype(np.int8)
    assert np.array_equal(r.outputs["C"], want)


def test_token_deadlock_decides_like_the_contract():
    cfg = load_config("default")
    p = base_program(cfg)
    assert token_deadlock(p.insns, cfg) is None
    cyc = list(p.insns)
    cyc[0] = dataclasses.replace(cyc[0], pop_next=True)
    cyc[1] = dataclasses.replace(cyc[1], push_prev=True)
    assert token_deadlock(cyc, cfg) == 0
    assert token_deadlock(p.insns[:3], cfg) == 3  # no FINISH: ERR_PC = INSN_COUNT
    r = run_reference(dataclasses.replace(p, insns=cyc))
    assert r.error["code"] == csr.ERR_DEADLOCK and r.error["pc"] == 0


def test_check_program_finds_races_and_bad_tokens():
    cfg = load_config("default")
    p = base_program(cfg)
    assert check_program(p.insns, cfg) is None
    no_tok = [dataclasses.replace(i, push_next=False, pop_prev=False) for i in p.insns]
    assert "race" in check_program(no_tok, cfg)
    extra = list(p.insns)
    extra[2] = dataclasses.replace(extra[2], push_prev=True)
    assert "queue s2c gets 1 push(es)" in check_program(extra, cfg)
    uninit = [Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=1, iter_out=1, iter_in=1), Finish()]
    assert "before anything writes it" in check_program(uninit, cfg)
    many = [Load(y_size=0, push_next=True)] * (cfg.token_queue_depth + 1) + \
        [Alu(iter_out=0, pop_prev=True)] * (cfg.token_queue_depth + 1) + [Finish()]
    assert "more than" in check_program(many, cfg)


def test_injected_faults_are_faults(cfg):
    """Every injected fault is the reference's first and only fault, with the intended code."""
    from cosim.fuzz.faults import FAULT_KINDS, inject

    for seed in range(40):
        p = generate(cfg, seed)
        rng = np.random.default_rng(seed)
        for kind in FAULT_KINDS:
            got = inject(p, kind, rng)
            if got is None:
                continue
            q, code = got
            e = run_reference(q).error
            assert e is not None and e["code"] == code, (seed, kind, e)
