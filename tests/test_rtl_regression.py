"""The cocotb regression: every example x config x memory back-end on the RTL.

``make test`` runs a quick slice (the non-default configs, one seed; default is in
test_rtl_smoke.py). ``COSIM_REGRESS=full`` (``make regress``) runs the full matrix:
every shipped config x {fast, protocol} x seeds 0-2 on Verilator, the hand-built
Programs and error classes on every config, and every config on Icarus when installed.
All examples of one (config, back-end, seed) share one simulator process.
"""

from __future__ import annotations

import os

import pytest

from hw.config import list_configs, load_config
from hw.toolchain import icarus_available
from testbench.rtl_model import rtl_available, run_programs
from tests import rtl_programs as rp
from tests.test_rtl_smoke import check_counters, check_outputs, hand_programs

FULL = os.environ.get("COSIM_REGRESS", "") == "full"
pytestmark = pytest.mark.skipif(not rtl_available(), reason="no RTL yet (hw/rtl/sources.txt is missing)")

if FULL:
    MATRIX = [(c, m, s, "verilator") for c in list_configs() for m in ("fast", "protocol") for s in (0, 1, 2)]
    MATRIX += [(c, "fast", 0, "icarus") for c in list_configs()] + [("default", "protocol", 0, "icarus")]
else:
    MATRIX = [("small", "fast", 0, "verilator"), ("small", "protocol", 0, "verilator"),
              ("wide", "fast", 0, "verilator")]


def _id(t: tuple) -> str:
    return "-".join(str(x) for x in t)


@pytest.mark.parametrize("cfg_name,mem,seed,sim", MATRIX, ids=[_id(t) for t in MATRIX])
def test_examples(cfg_name: str, mem: str, seed: int, sim: str) -> None:
    if sim == "icarus" and not icarus_available():
        pytest.skip("Icarus Verilog (iverilog) is not installed")
    examples = pytest.importorskip("compiler.examples")
    cfg = load_config(cfg_name)
    cases = [examples.make_case(n, cfg, seed=seed) for n in examples.list_examples()]
    res = run_programs([c.program for c in cases], cfg, mem=mem, sim=sim, seed=seed)
    failures = []
    for c, r in zip(cases, res):
        try:
            check_outputs(c.program, r, mem)
            check_counters(c.program, r)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "\n".join(failures)


HAND = [(c, m) for c in list_configs() for m in ("fast", "protocol")] if FULL else [("small", "fast")]


@pytest.mark.parametrize("cfg_name,mem", HAND, ids=[_id(t) for t in HAND])
def test_hand_programs_and_errors(cfg_name: str, mem: str) -> None:
    cfg = load_config(cfg_name)
    progs = hand_programs(cfg)
    errs = [f(cfg) for f in rp.ERROR_CASES.values()]
    res = run_programs(progs + [p for p, _, _ in errs], cfg, mem=mem, seed=11)
    for p, r in zip(progs, res):
        check_outputs(p, r, mem)
        check_counters(p, r)
    for (p, name, pc), r in zip(errs, res[len(progs):]):
        assert r.error is not None and (r.error["name"], r.error["pc"]) == (name, pc), f"{p.name}: {r.error}"
