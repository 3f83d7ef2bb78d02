"""The cocotb regression: every example x config x memory back-end on the RTL.

``make test`` runs a quick slice (the non-default configs, one seed; default is in
test_rtl_smoke.py; the unit cases of tests/units/ on 'small' with the fast back-end,
cycle-exact to the TLM, and on 'default' with the protocol back-end).
``COSIM_REGRESS=full`` (``make regress``) runs the full matrix: every shipped config x
{fast, protocol} x seeds 0-2 on Verilator, the unit cases on every config and back-end,
and every config on Icarus when installed. All Programs of one (config, back-end,
seed) share one simulator process.
"""

from __future__ import annotations

import importlib
import os

import pytest

from hw.config import list_configs, load_config
from hw.toolchain import icarus_available
from testbench.rtl_model import rtl_available, run_programs
from tests.test_rtl_smoke import check_counters, check_outputs
from tests.units.every_level import check_rtl, run_rtl

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
    # the protocol back-end (random backpressure, ~30 k cycles/s) and Icarus skip the examples of
    # millions of cycles (the ResNet layer); the fast Verilator rows run them
    slow = mem == "protocol" or sim == "icarus"
    names = [n for n in examples.list_examples() if not (slow and examples.get_example(n).large)]
    cases = [examples.make_case(n, cfg, seed=seed) for n in names]
    res = run_programs([c.program for c in cases], cfg, mem=mem, sim=sim, seed=seed)
    failures = []
    for c, r in zip(cases, res):
        try:
            check_outputs(c.program, r, mem)
            check_counters(c.program, r)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "\n".join(failures)


# the tests/units/ modules whose cases() build hand-made Programs for any config
UNIT_MODULES = ("fetch", "load_unit", "compute_unit", "gemm", "store_unit", "token_queue", "axi_arbiter",
                "csr_block", "errors")
UNITS = [(c, m) for c in list_configs() for m in ("fast", "protocol")] if FULL else \
    [("small", "fast"), ("default", "protocol")]


def unit_cases(cfg) -> list:
    return [c for m in UNIT_MODULES for c in importlib.import_module(f"tests.units.test_{m}").cases(cfg)]


@pytest.mark.parametrize("cfg_name,mem", UNITS, ids=[_id(t) for t in UNITS])
def test_unit_cases(cfg_name: str, mem: str) -> None:
    """Every unit case of tests/units/ on another config or back-end: the expected outputs and errors;
    with the fast DRAM model also the TLM's cycles and every counter."""
    cfg = load_config(cfg_name)
    cases = unit_cases(cfg)
    res = run_rtl(cases, cfg, mem=mem, seed=11)
    assert all(r.extra["mem"] == mem and r.extra["sim"] == "verilator" for r in res)
    check_rtl(cases, res, cycle_exact=mem == "fast")
