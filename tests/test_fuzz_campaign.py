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
    # the same case number saved again (another campaign's options): a folder of its own, never over the first
    again = C.save_failure(case, None, tmp_path, 5)
    assert again == d.with_name(d.name + "-2") and (d / "min").is_dir() and not (again / "min").exists()
    assert json.loads((again / "fuzz.json").read_text())["rerun"].endswith(again.name)
    # a chunk shrinks and saves at most MAX_SAVED_PER_CHUNK failures; the rest are counted and listed
    monkeypatch.setattr(C, "MAX_SAVED_PER_CHUNK", 1)
    monkeypatch.setattr(C, "shrink", lambda case, pred: None)
    out = C.run_chunk([cfg], 5, 0, 40, fault_rate=0.0, save_dir=tmp_path / "chunk")
    assert out["mismatches"] >= 2 and sum("saved" in f for f in out["failures"]) == 1, out["mismatches"]
    assert all("not_saved" in f for f in out["failures"] if "saved" not in f)
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


@pytest.mark.parametrize("result", [None, {"cases": "x"}, "a", {"cases": 20, "faulty": 0, "mismatches": "a",
                                                                  "errors": 0, "by_kind": {}, "failures": []}])
def test_a_results_record_that_is_no_chunk_is_one_line(tmp_path, capsys, result):
    """Resuming from a results file whose record parses but is no chunk's outcome names the file and the
    record (it was an internal error: TypeError, KeyError)."""
    from cosim.cli import main

    res = tmp_path / "r.jsonl"
    argv = ["fuzz", "--config", "small", "--count", "40", "--seed", "4", "--chunk", "20", "--workers", "0",
            "--quiet", "--results", str(res)]
    assert main(argv) == 0
    capsys.readouterr()
    lines = res.read_text().splitlines()
    rec = json.loads(lines[-1])
    rec["result"] = result
    res.write_text("\n".join(lines[:-1] + [json.dumps(rec)]) + "\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{res}: record {rec['key']!r}: " in err and err.count("\n") == 1, err


def test_an_unreadable_timing_calibration_is_one_line_before_the_campaign(tmp_path, capsys):
    """A config whose <name>.timing.json does not read fails the campaign at once, in one line (each case
    failed with it: a line per case)."""
    from cosim.cli import main

    cfg = tmp_path / "mysmall.json"
    cfg.write_text((Path(__file__).resolve().parents[1] / "hw" / "configs" / "small.json").read_text())
    (tmp_path / "mysmall.timing.json").write_text('{"rd_burst_overhead": "x"')
    assert main(["fuzz", "--config", str(cfg), "--count", "2", "--workers", "0", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "mysmall.timing.json: cannot read timing calibration" in err and err.count("\n") == 1, err
