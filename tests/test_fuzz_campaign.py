"""Differential fuzzing regression: a fixed-seed share of `make fuzz`, shrinking, saving, determinism.

* a few hundred Programs, reference vs TLM (valid ones and ones with an injected fault);
* a few dozen on the RTL too (TLM vs RTL, fast and protocol back-ends), when the RTL exists;
* the shrinker, against a deliberately broken model;
* every model gives identical outputs, counters and cycles for the same Program run twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hw.config import load_config
from cosim.fuzz import campaign as C
from sim import iss as R
from cosim.fuzz.generator import generate

COSIM = [sys.executable, "-m", "cosim.cli"]
RTL_MISSING = C.rtl_available()
needs_rtl = pytest.mark.skipif(RTL_MISSING is not None, reason=f"no RTL: {RTL_MISSING}")


def _fail_text(s: C.Summary) -> str:
    return "\n".join(f"{f['config']} case {f['index']} ({f['kind']}): {f['problems']}" for f in s.failures[:5])


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_reference_vs_tlm_fixed_seeds(seed):
    """300 Programs over every config (1 in 5 with an injected fault): no disagreement."""
    s = C.run_campaign(100, seed, progress=False)
    assert (s.mismatches, s.errors) == (0, 0), _fail_text(s)
    assert s.faulty > 5 and len(s.by_kind) > 4


@needs_rtl
@pytest.mark.parametrize("config", ["default", "small"])
def test_tlm_vs_rtl_fixed_seed(config):
    """A few dozen Programs on the RTL (fast back-end, 1 in 5 on the protocol back-end)."""
    s = C.run_campaign(15, 21, [config], rtl=True, progress=False)
    assert (s.mismatches, s.errors) == (0, 0), _fail_text(s)


@needs_rtl
def test_timing_disagreement_is_a_failure(monkeypatch):
    """A TLM whose ALU takes one cycle more than the RTL's fails the campaign on the fast back-end."""
    from cosim.models import tlm
    from sim.tlm.timing import Timing

    slow = Timing.from_config(load_config("small"), calibration=False, alu_pipeline_cycles=2)
    monkeypatch.setattr(C, "_tlm", lambda p: tlm(p, timing=slow))
    s = C.run_campaign(6, 21, ["small"], rtl=True, progress=False, fault_rate=0.0, do_shrink=False)
    assert s.mismatches > 0
    assert any("tlm vs rtl: cycles" in p for f in s.failures for p in f["problems"]), _fail_text(s)


def _broken_tlm(p):
    """The reference with MUL off by one when |x| > 1000: a stand-in for a buggy model."""
    orig = R.alu_lanes

    def buggy(op, x, s):
        r = orig(op, x, s)
        return [v + 1 if op == 2 and abs(a) > 1000 else v for v, a in zip(r, x)]
    R.alu_lanes = buggy
    try:
        res = R.run_reference(p)
    finally:
        R.alu_lanes = orig
    res.model = "tlm"
    return res


def test_shrinks_and_saves_a_reproducer(tmp_path, monkeypatch):
    """A failing case is shrunk to a few instructions that still fail, and saved so `cosim run` re-runs it."""
    monkeypatch.setattr(C, "_tlm", _broken_tlm)
    cfg = load_config("small")
    case = next(c for c in (C.make_case(cfg, 5, i, 0.0) for i in range(40))
                if (C.run_cases([c], rtl=False), not c.ok)[1])
    small = C.shrink(case, C.failure_predicate(case, rtl=False))
    assert len(small.insns) <= 8 < len(case.program.insns) or len(small.insns) < len(case.program.insns)
    assert any(i.MNEMONIC == "ALU" and i.alu_op == 2 for i in small.insns)
    assert C.check_program(small.insns, cfg, dram=small.dram_image()) is None
    d = C.save_failure(case, small, tmp_path, 5)
    info = json.loads((d / "fuzz.json").read_text())
    assert info["min"]["insns"] == len(small.insns) and info["problems"] == case.problems
    # The real TLM agrees with the reference: the saved folder re-runs and matches its expected outputs.
    r = subprocess.run([*COSIM, "run", str(d / "min"), "--model", "tlm", "--config", "small"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and " ok " in r.stdout, r.stdout + r.stderr


def test_cosim_fuzz_cli(tmp_path):
    r = subprocess.run([*COSIM, "fuzz", "--count", "30", "--seed", "1", "--json", "--save-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert {k: j[k] for k in ("count", "mismatches", "errors", "seed", "config")} == \
        {"count": 30, "mismatches": 0, "errors": 0, "seed": 1, "config": "all"}
    assert "fuzz: 30/30" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([*COSIM, "fuzz", "--count", "5", "--config", "small"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "0 mismatches, 0 errors" in r.stdout and "config small" in r.stdout
    r = subprocess.run([*COSIM, "fuzz", "--count", "5", "--config", "nosuch"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "no such config file" in r.stderr and "Traceback" not in r.stderr
    # a config file named relative to the folder cosim starts in: the tasks run elsewhere, and still find it
    (tmp_path / "mine.json").write_text((Path(C.__file__).parents[2] / "hw" / "configs" / "small.json").read_text())
    r = subprocess.run([*COSIM, "fuzz", "--count", "3", "--config", "mine.json"], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0 and "0 mismatches, 0 errors" in r.stdout, r.stdout + r.stderr


def _same(a, b) -> None:
    assert a.cycles == b.cycles and a.counters == b.counters and a.error == b.error
    assert a.outputs.keys() == b.outputs.keys()
    assert all(np.array_equal(a.outputs[k], b.outputs[k]) for k in a.outputs)


def test_determinism_reference_and_tlm(cfg):
    """The same Program twice: identical outputs, counters and cycles."""
    from sim.tlm import run_program

    for seed in (1, 2, 3):
        p = generate(cfg, seed)
        _same(R.run_reference(p), R.run_reference(p))
        _same(run_program(p), run_program(p))


@needs_rtl
def test_determinism_rtl():
    """Twice in one simulator process and once more in another: identical outputs, counters and cycles."""
    from testbench.rtl_model import run_programs

    cfg = load_config("small")
    progs = [generate(cfg, 100 + k) for k in range(3)]
    first = run_programs(progs + progs, cfg)
    again = run_programs(progs, cfg)
    for k in range(3):
        _same(first[k], first[k + 3])
        _same(first[k], again[k])
