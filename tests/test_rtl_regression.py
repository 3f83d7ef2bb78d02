"""The cocotb regression: every example x config x memory back-end on the RTL.

``make test`` runs a quick slice (the non-default configs, one seed, the protocol back-end on small2 without
the two longest streams; default is in test_rtl_smoke.py; the unit cases of tests/units/ on 'small' with the fast back-end,
cycle-exact to the TLM, and on 'default' with the protocol back-end).
``COSIM_REGRESS=full`` runs the full matrix here: every shipped config x {fast, protocol}
x seeds 0-2 on Verilator, the unit cases on every config and back-end, and every config
on Icarus when installed. All Programs of one (config, back-end, seed) share one simulator
process. ``make regress`` runs the same cells as engine tasks (``cosim regress``, which
calls :func:`check_examples` and :func:`check_unit_cases` and writes the same JUnit names).
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Sequence

import pytest

from hw.config import list_configs, load_config
from hw.toolchain import icarus_available
from testbench.rtl_model import rtl_available, run_programs
from tests.test_rtl_smoke import LONG_STREAMS, check_counters, check_outputs
from tests.units.every_level import check_rtl, run_rtl

FULL = os.environ.get("COSIM_REGRESS", "") == "full"
MEMS = ("fast", "protocol")
pytestmark = pytest.mark.skipif(not rtl_available(), reason="no RTL yet (hw/rtl/sources.txt is missing)")


def example_matrix(configs: Sequence[str], mems: Sequence[str] = MEMS, seeds: Sequence[int] = (0, 1, 2),
                   simulators: Sequence[str] = ("verilator", "icarus")) -> list[tuple[str, str, int, str]]:
    """The (config, back-end, seed, simulator) cells of the full regression: every combination on Verilator;
    on Icarus (2-5x slower) each config's fast back-end and the default config's protocol one, seed 0."""
    rows = [(c, m, s, "verilator") for c in configs for m in mems for s in seeds] if "verilator" in simulators else []
    if "icarus" in simulators:
        rows += [(c, "fast", 0, "icarus") for c in configs if "fast" in mems]
        rows += [("default", "protocol", 0, "icarus")] if "default" in configs and "protocol" in mems else []
    return rows


def unit_matrix(configs: Sequence[str], mems: Sequence[str] = MEMS) -> list[tuple[str, str]]:
    """The (config, back-end) cells of the unit cases: hand-made one-core Programs, so the one-core
    configs among ``configs`` (the examples cover the configs of several cores)."""
    return [(c, m) for c in configs if load_config(c).num_cores == 1 for m in mems]


if FULL:
    MATRIX = example_matrix(list_configs())
else:  # small2: every example compiled for two cores sharing the port. No small-protocol cell: small2 runs
    # the small core on the protocol back-end, default the one-core protocol back-end (test_rtl_smoke, UNITS)
    MATRIX = [("small", "fast", 0, "verilator"), ("wide", "fast", 0, "verilator"),
              ("small2", "protocol", 0, "verilator")]


def _id(t: tuple) -> str:
    return "-".join(str(x) for x in t)


def example_names(mem: str, sim: str) -> list[str]:
    """The examples a cell runs: the protocol back-end (random backpressure, ~30 k cycles/s) and Icarus skip
    the examples of millions of cycles (the ResNet layer); the fast Verilator cells run them all."""
    from compiler import examples

    slow = mem == "protocol" or sim == "icarus"
    return [n for n in examples.list_examples() if not (slow and examples.get_example(n).large)]


def check_examples(cfg_name: str, mem: str, seed: int, sim: str, names: Sequence[str] | None = None) -> dict[str, Any]:
    """One cell: the examples ``names`` (default :func:`example_names`) in one simulator process, their
    outputs and counters checked; AssertionError naming every failure, else ``{example: RTL cycles}``."""
    from compiler import examples

    cfg = load_config(cfg_name)
    cases = [examples.make_case(n, cfg, seed=seed) for n in (names or example_names(mem, sim))]
    res = run_programs([c.program for c in cases], cfg, mem=mem, sim=sim, seed=seed)
    failures = []
    for c, r in zip(cases, res):
        try:
            check_outputs(c.program, r, mem)
            check_counters(c.program, r)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "\n".join(failures)
    return {c.name: r.cycles for c, r in zip(cases, res)}


@pytest.mark.parametrize("cfg_name,mem,seed,sim", MATRIX, ids=[_id(t) for t in MATRIX])
def test_examples(cfg_name: str, mem: str, seed: int, sim: str) -> None:
    if sim == "icarus" and not icarus_available():
        pytest.skip("Icarus Verilog (iverilog) is not installed")
    pytest.importorskip("compiler.examples")
    names = example_names(mem, sim)
    if not FULL and mem == "protocol":  # the quick slice samples the protocol back-end (see LONG_STREAMS)
        names = [n for n in names if n not in LONG_STREAMS]
    check_examples(cfg_name, mem, seed, sim, names)


# the tests/units/ modules whose cases() build hand-made Programs for any config
UNIT_MODULES = ("fetch", "load_unit", "compute_unit", "gemm", "store_unit", "token_queue", "axi_arbiter",
                "csr_block", "errors")
UNITS = unit_matrix(list_configs()) if FULL else [("small", "fast"), ("default", "protocol")]


def unit_cases(cfg) -> list:
    return [c for m in UNIT_MODULES for c in importlib.import_module(f"tests.units.test_{m}").cases(cfg)]


def check_unit_cases(cfg_name: str, mem: str) -> dict[str, Any]:
    """One cell: every unit case of tests/units/ on ``cfg_name`` and back-end ``mem`` in one simulator process:
    the expected outputs and errors; with the fast DRAM model also the TLM's cycles and every counter.
    AssertionError naming every problem, else ``{"cases": count}``."""
    cfg = load_config(cfg_name)
    cases = unit_cases(cfg)
    res = run_rtl(cases, cfg, mem=mem, seed=11)
    assert all(r.extra["mem"] == mem and r.extra["sim"] == "verilator" for r in res)
    check_rtl(cases, res, cycle_exact=mem == "fast")
    return {"cases": len(cases)}


@pytest.mark.parametrize("cfg_name,mem", UNITS, ids=[_id(t) for t in UNITS])
def test_unit_cases(cfg_name: str, mem: str) -> None:
    """Every unit case of tests/units/ on another config or back-end (see :func:`check_unit_cases`)."""
    check_unit_cases(cfg_name, mem)
