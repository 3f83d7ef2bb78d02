"""RTL through the cocotb testbench on the default config: what the testbench itself adds.

Every compiler example on both memory back-ends; cycles that repeat run after run; the
watchdog; waves; the mismatch report; Icarus as a second simulator when installed.
Programs of one test share one simulator process to pay the startup once. Hand-built
Programs and every error class run on every level in tests/units/ (soft reset in
tests/units/test_csr_block.py), and on the other configs and the protocol back-end in
tests/test_rtl_regression.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hw import csr
from hw.config import load_config
from hw.isa import Store
from hw.program import Program
from hw.result import RunResult
from hw.toolchain import icarus_available
from cosim.mismatch import last_writers
from cosim.models import first_mismatch
from testbench.rtl_model import build, rtl_available, run_program, run_programs
from tests.units import programs as hp
from tests.units.every_level import stream_counters

pytestmark = pytest.mark.skipif(not rtl_available(), reason="no RTL yet (hw/rtl/sources.txt is missing)")
needs_icarus = pytest.mark.skipif(not icarus_available(), reason="Icarus Verilog (iverilog) is not installed")


@pytest.fixture(scope="module")
def cfg():
    return load_config("default")


def check_outputs(p: Program, r: RunResult, mem: str = "fast") -> None:
    """Outputs equal the expected ones; on a mismatch the message names the first differing
    element, the instructions that last wrote it, and a VCD of the Program re-run with waves."""
    assert r.error is None, f"{p.name}: {r.error}"
    assert p.expected, f"{p.name}: no expected outputs attached"
    mm = first_mismatch(p.expected, r.outputs)
    if mm is None:
        return
    writers = last_writers(p, mm.output, mm.index) if mm.index else ""
    try:
        vcd = run_program(p, mem=mem, waves=True).extra.get("vcd")
    except Exception as e:  # the report must not hide the mismatch behind a second failure
        vcd = f"(re-run with waves failed: {e})"
    raise AssertionError(f"{p.name} on {p.config.name} ({mem}): {mm}; {writers}; waveform: {vcd}")


def check_counters(p: Program, r: RunResult) -> None:
    """Counters that follow from the instruction stream alone, and busy + stall within the run."""
    c = r.counters
    assert set(c) == {n.lower() for n in csr.COUNTERS}
    for k, v in stream_counters(p).items():
        assert c[k] == v, (p.name, k, c[k], v)
    assert 0 < r.cycles
    for core in r.extra.get("cores") or [c]:  # each core's units within the run
        for unit in ("load", "compute", "store"):
            assert core[f"{unit}_busy"] + core[f"{unit}_stall"] <= r.cycles


def hand_programs(cfg) -> list[Program]:
    """The hand-built Programs the first RTL tests ran (the second simulator runs four of them)."""
    return [hp.vadd(cfg, n=1, seed=1, name="vadd1"), hp.vadd(cfg, n=7, seed=2, name="vadd7"), hp.alu_ops(cfg),
            hp.pad_stride(cfg), hp.long_program(cfg, reps=6)]


# The two longest plain streams (LOAD, ALU, STORE; no GEMM): about 80 % of the protocol back-end's cycles
# over the examples, with the traffic every other example also puts on the port. The suite's protocol
# cells leave them out; the fast cells and the full regression (COSIM_REGRESS=full, make regress) run them.
LONG_STREAMS = ("vadd_large", "requant")


@pytest.mark.parametrize("mem", ["fast", "protocol"])
def test_examples(cfg, mem):
    examples = pytest.importorskip("compiler.examples")
    # the protocol back-end is ~100x slower: the examples of millions of cycles run on fast only,
    # and the suite samples it without the longest streams
    names = [n for n in examples.list_examples()
             if mem == "fast" or not (examples.get_example(n).large or n in LONG_STREAMS)]
    cases = [examples.make_case(n, cfg) for n in names]
    res = run_programs([c.program for c in cases], cfg, mem=mem, seed=3)
    for c, r in zip(cases, res):
        check_outputs(c.program, r)
        check_counters(c.program, r)


def test_long_streams_are_plain_examples(cfg):
    """The examples the suite's protocol cells leave out exist and are GEMM-free streams (so every
    instruction class still runs on the protocol back-end)."""
    from compiler import examples

    for n in LONG_STREAMS:
        assert n in examples.list_examples(), n
        assert not examples.get_example(n).gemm, n


def test_fast_cycles_are_deterministic(cfg):
    """Same Program twice in one process, and alone in another: identical cycles and counters."""
    p = hp.alu_ops(cfg)
    a, b = run_programs([p, p], cfg)
    c = run_program(p, cfg)
    assert a.cycles == b.cycles == c.cycles
    assert a.counters == b.counters == c.counters


def test_watchdog_fires_and_next_program_runs(cfg):
    """A watchdog shorter than the run reports TIMEOUT (no hang); the next Program still runs."""
    slow = hp.long_program(cfg, reps=10)
    ok = hp.vadd(cfg, n=2, name="after_timeout")
    r = run_programs([slow, ok], cfg, watchdog=60)
    assert r[0].error is not None and r[0].error["name"] == "TIMEOUT", r[0].error
    assert r[1].error is not None and r[1].error["name"] == "TIMEOUT"  # the override applies to all
    shutil.rmtree(r[0].extra["run_dir"], ignore_errors=True)  # kept for debugging; expected here
    r = run_programs([slow, ok], cfg)
    check_outputs(slow, r[0])
    check_outputs(ok, r[1])


def file_times(folder: Path) -> dict[Path, int]:
    """Modification times of a build folder's files (its use stamp and lock aside, which a reuse touches)."""
    return {f: f.stat().st_mtime_ns for f in folder.rglob("*") if f.is_file() and "last_used" not in f.name
            and not f.name.endswith(".lock")}


def test_rebuild_is_a_noop(cfg):
    before = file_times(build(cfg, "fast"))
    assert before and file_times(build(cfg, "fast")) == before  # nothing compiled or written again


def test_waves(cfg, tmp_path):
    vcd = tmp_path / "vadd.vcd"
    r = run_program(hp.vadd(cfg, n=2), cfg, waves=True, vcd_path=vcd)
    assert r.error is None and vcd.is_file()
    head = vcd.read_text(errors="replace")[:200_000]
    for sig in ("dbg_load_pc", "dbg_cycles", "irq"):
        assert sig in head, f"{sig} not in the VCD"


def test_waves_count_cycles_from_start_and_windows_hold_what_they_say(cfg, tmp_path):
    """Relative cycle 0 of a VCD is START's (the cycle CSR START is accepted, as the TLM's VCD and its
    Perfetto trace count); --waves-window FIRST:LAST holds cycles FIRST..LAST after START (FIRST 0 too:
    then from the register writes on), the note says so, and a cut file's note names its last cycle."""
    from cosim.waves import VcdFile, detect_clock, read_window
    prog = hp.vadd(cfg, n=64)

    def relative(vcd: Path, names: list[str]) -> tuple[int, int, dict[str, list]]:
        v = VcdFile(vcd)
        clock = detect_clock(v)
        first, last = clock.cycle(min(t for t, _ in v.stream([v.resolve("clk")])[1]["tb_fast.clk"])), \
            clock.cycle(v.end_time)
        win = read_window(v, [v.resolve(n) for n in names], clock, first, last)
        return first - clock.origin, last - clock.origin, {k: [(c - clock.origin, x) for c, x in ch]
                                                            for k, ch in win.items()}

    full = run_program(prog, cfg, waves=True, vcd_path=tmp_path / "full.vcd")
    first, last, ch = relative(tmp_path / "full.vcd", ["core_start", "dbg_cycles", "irq"])
    assert first < 0 and last == full.extra["waves"]["to_cycle"] == full.cycles + 1, (first, last, full.extra)
    assert (0, "1") in ch["tb_fast.u_accel.core_start"] and (full.cycles + 1, "1") in ch["tb_fast.irq"]
    for window in ((100, 200), (0, 50)):
        r = run_program(prog, cfg, waves=True, vcd_path=tmp_path / "w.vcd", waves_window=window)
        first, last, ch = relative(tmp_path / "w.vcd", ["dbg_cycles"])
        w = r.extra["waves"]
        assert last == window[1] == w["to_cycle"] and first <= window[0] and w["from_cycle"] == first, (window, w)
        assert first == window[0] or window[0] < 16, (window, first)
        values = dict(ch["tb_fast.dbg_cycles"])
        assert int(values[window[1]], 2) == window[1] - 1  # CYCLES reads c - 1 in cycle c after START
    (tmp_path / "w.vcd").write_text("an older run's file\n")
    r = run_program(prog, cfg, waves=True, vcd_path=tmp_path / "w.vcd", waves_window=(10**6, 10**6 + 5))
    assert r.extra["waves"]["from_cycle"] is None and not (tmp_path / "w.vcd").exists() and "vcd" not in r.extra
    r = run_program(prog, cfg, waves=True, vcd_path=tmp_path / "cut.vcd", waves_max_bytes=400_000)
    _, last, _ = relative(tmp_path / "cut.vcd", ["dbg_cycles"])
    assert r.extra["waves"]["capped"] and r.extra["waves"]["to_cycle"] == last < r.cycles, (r.extra["waves"], last)


def test_mismatch_report_names_writer_and_vcd(cfg):
    """A regression mismatch (injected into the outputs read back) names the first differing
    element and the STORE that wrote it, and re-runs the Program with waves for a VCD."""
    p = hp.vadd(cfg, n=2)
    r = run_program(p, cfg)
    name = next(iter(p.expected))
    bad = {k: v.copy() for k, v in r.outputs.items()}
    bad[name].reshape(-1)[5] ^= 1
    store_pc = next(pc for pc, i in enumerate(p.insns) if isinstance(i, Store))
    with pytest.raises(AssertionError) as e:
        check_outputs(p, RunResult("rtl", bad, r.cycles, r.counters))
    msg = str(e.value)
    assert f"output '{name}'" in msg and f"STORE #{store_pc}" in msg, msg
    vcd = msg.rsplit("waveform: ", 1)[1]
    assert vcd.endswith(".vcd") and Path(vcd).is_file(), msg


@needs_icarus
def test_icarus_matches_verilator(cfg):
    """The second simulator: same outputs and the same cycle counts (the RTL is deterministic)."""
    progs = hand_programs(cfg)[:4]
    ica = run_programs(progs, cfg, sim="icarus")
    ver = run_programs(progs, cfg, sim="verilator")
    for p, i, v in zip(progs, ica, ver):
        check_outputs(p, i)
        assert i.extra.get("x_words", 0) == 0
        assert i.cycles == v.cycles and i.counters == v.counters, p.name


def test_default_waveform_names_keep_seeds_apart():
    """Runs of one kernel under other seeds (the protocol back-end's backpressure) do not share a file."""
    from compiler import examples
    from testbench.rtl_model import default_vcd_name

    prog = examples.make_case("vadd", "small").program
    assert default_vcd_name(prog, "protocol", "verilator") == "vadd-small-protocol.vcd"
    assert default_vcd_name(prog, "protocol", "verilator", 2) == "vadd-small-protocol-s2.vcd"
    assert default_vcd_name(prog, "fast", "icarus", 1) == "vadd-small-fast-s1.fst"
