"""Differential fuzzing on several cores: the generator of per-core streams with BARRIER phases over
shared DRAM, its race check, faults in any core (and a skipped BARRIER), short campaigns on quad,
small2 and derived core counts (ISS vs TLM; TLM vs RTL on small2), shrinking and saving."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from hw import csr
from hw.analysis import balance_problem
from hw.config import load_config
from hw.isa import Barrier, Finish, Store
from hw.program import Program
from cosim.fuzz import campaign as C
from cosim.fuzz import multicore as M
from cosim.fuzz.faults import FAULT_KINDS
from sim import iss as R
from tests.test_fuzz_campaign import _broken_tlm  # a buggy TLM stand-in (the one-core campaign's)

COSIM = [sys.executable, "-m", "cosim.cli"]
RTL_MISSING = C.rtl_available()
needs_rtl = pytest.mark.skipif(RTL_MISSING is not None, reason=f"no RTL: {RTL_MISSING}")
CONFIGS = ["small2", "quad", "small-x3", "default-x2"]


def _fail_text(s: C.Summary) -> str:
    return "\n".join(f"{f['config']} case {f['index']} ({f['kind']}): {f['problems']}" for f in s.failures[:5])


def test_derived_configs():
    assert M.fuzz_config("small-x2").name == "small2" and M.fuzz_config("default-x4").name == "quad"
    c3 = M.fuzz_config("small-x3")
    assert c3.name == "small-x3" and c3.num_cores == 3 and c3.lanes == load_config("small").lanes
    assert M.one_core(load_config("quad")).name == "default"
    assert C.fuzz_configs(["multicore"]) == ["small2", "small-x3", "small-x4", "default-x2", "default-x3", "quad"]
    with pytest.raises(ValueError, match="num_cores"):
        M.fuzz_config("small-x17")


@pytest.mark.parametrize("name", CONFIGS)
def test_generated_programs_are_valid_and_race_free(name, tmp_path):
    """Every core's stream is valid (balanced, deadlock-free, initialised, race-free on its buffers), the
    cores have equally many BARRIERs, no two cores race in DRAM within a phase, the ISS runs it cleanly,
    and the Program saves and loads."""
    cfg = M.fuzz_config(name)
    phases_seen, cross = set(), 0
    for seed in range(6):
        p = M.generate_multicore(cfg, seed)
        assert p.num_cores == cfg.num_cores
        assert M.check_multicore(p) is None, (name, seed, M.check_multicore(p))
        bars = [sum(isinstance(i, Barrier) for i in p.core_insns(k)) for k in range(p.num_cores)]
        assert len(set(bars)) == 1 and bars[0] == p.meta["phases"] - 1
        phases_seen.add(p.meta["phases"])
        for k in range(p.num_cores):
            s = p.core_insns(k)
            assert balance_problem(s) is None and isinstance(s[-1], Finish)
        r = R.run_reference(p)
        assert r.error is None and len(r.extra["cores"]) == cfg.num_cores, r.error
        cross += _reads_of_other_cores_writes(p)
        if seed == 0:
            q = Program.load(p.save(tmp_path / f"{name}-{seed}"), cfg)
            assert q.insn_bytes == p.insn_bytes and q.windows == p.windows and q.regs == p.regs
    assert len(phases_seen) > 1
    assert cross > 0  # a later phase reads what another core wrote in an earlier one


def _reads_of_other_cores_writes(p: Program) -> int:
    """How many (writer core and phase, reader core and later phase) pairs share DRAM bytes."""
    fps = M.phase_footprints(p)
    n = 0
    for a, fa in enumerate(fps):
        for b, fb in enumerate(fps):
            if a == b:
                continue
            for i, (_, writes) in enumerate(fa):
                for j in range(i + 1, len(fb)):
                    n += M.first_overlap(writes, fb[j].reads) is not None
    return n


def test_same_seed_same_program():
    cfg = load_config("small2")
    a, b = M.generate_multicore(cfg, 9), M.generate_multicore(cfg, 9)
    assert a.insn_bytes == b.insn_bytes and a.regs == b.regs and a.windows == b.windows
    assert all(np.array_equal(a.inputs[k], b.inputs[k]) for k in a.inputs)
    assert M.generate_multicore(cfg, 10).insn_bytes != a.insn_bytes


def test_a_planted_race_is_rejected():
    """Core 1 made to store where core 0 stores in the same phase: the race check names both; the same
    bytes stored by core 1 after the BARRIER are ordered, no race."""
    cfg = load_config("small2")
    p = next(q for q in (M.generate_multicore(cfg, s, phases=2) for s in range(40))
             if _stores_in_phase(q, 0, 0) and _stores_in_phase(q, 1, 0) and _stores_in_phase(q, 1, 1))
    assert M.race_problem(p) is None
    a = _stores_in_phase(p, 0, 0)[0]
    first1 = p.windows[1][0]

    def moved(pc: int) -> Program:
        insns = list(p.insns)
        insns[first1 + pc] = dataclasses.replace(insns[first1 + pc], dram_base=p.insns[a].dram_base)
        return dataclasses.replace(p, insns=insns)

    bad = M.race_problem(moved(_stores_in_phase(p, 1, 0)[0] - first1))
    assert bad is not None and "before the first barrier" in bad and "core 0 pc" in bad and "core 1 pc" in bad
    assert "writes DRAM byte" in bad
    assert M.check_multicore(moved(_stores_in_phase(p, 1, 0)[0] - first1)) == bad
    # the same bytes written by core 1 after the barrier: ordered, no race
    assert M.race_problem(moved(_stores_in_phase(p, 1, 1)[0] - first1)) is None


def _stores_in_phase(p: Program, core: int, phase: int) -> list[int]:
    """Global indices of core ``core``'s DRAM-writing STOREs in phase ``phase``."""
    first, count = p.windows[core]
    out, ph = [], 0
    for j in range(first, first + count):
        i = p.insns[j]
        ph += isinstance(i, Barrier)
        if ph == phase and isinstance(i, Store) and i.y_size * i.x_size > 0:
            out.append(j)
    return out


@pytest.mark.parametrize("kind", FAULT_KINDS + ("skip_barrier",))
def test_a_fault_in_core_k_names_core_k(kind):
    """Each fault kind lands in some core k; ISS and TLM agree on the error and its core: core k for the
    faults of one instruction or window, the lowest other core (waiting at its BARRIER) for a skipped
    BARRIER."""
    from cosim.models import tlm

    cfg = M.fuzz_config("small-x3")
    cores_hit = set()
    for seed in range(10):
        if len(cores_hit) == 2:
            break
        p = M.generate_multicore(cfg, seed, phases=2)
        got = M.inject_multicore(p, kind, np.random.default_rng([seed, 3]))
        if got is None:
            continue
        fp, code, k = got
        ref, t = R.run_reference(fp), tlm(fp)
        assert ref.error is not None and ref.error["code"] == code, (seed, kind, ref.error)
        assert (t.error["code"], t.error["pc"], t.error["core"]) == \
            (ref.error["code"], ref.error["pc"], ref.error["core"]), (seed, kind, t.error, ref.error)
        if kind == "skip_barrier":
            assert ref.error["core"] == min(c for c in range(cfg.num_cores) if c != k)
        elif kind != "deadlock":
            assert ref.error["core"] == k, (seed, kind, k, ref.error)
        cores_hit.add((seed, k))
    assert cores_hit, kind


@pytest.mark.parametrize("name,count", [("small2", 12), ("quad", 6), ("multicore", 8)])
def test_reference_vs_tlm_campaign(name, count):
    s = C.run_campaign(count, 31, [name], progress=False, fault_rate=0.3)
    assert (s.mismatches, s.errors) == (0, 0), _fail_text(s)
    assert s.faulty > 0


@needs_rtl
def test_tlm_vs_rtl_small2():
    """A handful of small2 Programs on the RTL's fast back-end: outputs, errors with their core, cycles,
    and every counter of every core equal to the TLM's."""
    cfg = load_config("small2")
    cases = [C.make_case(cfg, 41, i, 0.3) for i in range(5)]
    for c in cases:
        c.mem = "fast"
    C.run_cases(cases, rtl=True)
    assert all(c.ok for c in cases), [(c.index, c.kind, c.problems) for c in cases]
    for c in cases:
        r = c.results["rtl"]
        assert len(r.extra["cores"]) == 2 and r.extra["cores"] == c.results["tlm"].extra["cores"]
        assert r.cycles == c.results["tlm"].cycles
    assert any(c.kind != "valid" for c in cases) and any(c.kind == "valid" for c in cases)


def test_shrinks_and_saves_a_multicore_reproducer(tmp_path, monkeypatch):
    """A failing Program of two cores shrinks (one core's stream at a time) to a valid, race-free Program
    that still fails, and saves as Program folders that load and re-run."""
    monkeypatch.setattr(C, "_tlm", _broken_tlm)
    cfg = load_config("small2")
    case = next(c for c in (C.make_case(cfg, 5, i, 0.0) for i in range(40))
                if (C.run_cases([c], rtl=False), not c.ok)[1])
    small = C.shrink(case, C.failure_predicate(case, rtl=False), max_evals=400)
    assert small.num_cores == 2 and len(small.insns) < len(case.program.insns)
    assert M.check_multicore(small) is None
    assert C.failure_predicate(case, rtl=False)([small]) == [True]
    d = C.save_failure(case, small, tmp_path, 5)
    info = json.loads((d / "fuzz.json").read_text())
    assert info["config"] == "small2" and info["min"]["insns"] == len(small.insns)
    q = Program.load(d / "min", cfg)
    assert q.windows == small.windows
    monkeypatch.undo()
    r = C.replay_failure(d)  # the real TLM agrees with the reference
    assert r["still_fails"] is False and r["kind"] == "valid"


def test_cosim_fuzz_cli_on_several_cores():
    r = subprocess.run([*COSIM, "fuzz", "--count", "6", "--config", "small-x3", "--json", "--workers", "0"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert (j["count"], j["mismatches"], j["errors"], j["config"]) == (6, 0, 0, "small-x3")
    r = subprocess.run([*COSIM, "fuzz", "--count", "2", "--config", "nosuch-x3"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "no such config" in r.stderr and "Traceback" not in r.stderr


def test_a_deadlock_names_the_lowest_core_waiting_at_a_barrier():
    """Core 1 waits for a token nobody pushes while core 0 waits at its BARRIER: every model names core 0
    at its BARRIER (the lowest core with a unit waiting; the fuzzer found the ISS naming core 1)."""
    from cosim.models import tlm
    from hw.isa import Alu
    from hw.program import concat_streams, plan_layout

    cfg = load_config("small2")
    streams = [[Alu(iter_out=0), Barrier(), Finish()], [Alu(pop_prev=True, iter_out=0), Barrier(), Finish()]]
    insns, windows = concat_streams(streams)
    p = Program.create(cfg, insns, plan_layout(cfg, [], len(insns)), windows=windows, name="deadlock",
                       check_tokens=False)  # a pop without its push: the deadlock on purpose
    for res in (R.run_reference(p), tlm(p)):
        assert (res.error["name"], res.error["core"], res.error["pc"]) == ("DEADLOCK", 0, 1), (res.model, res.error)
