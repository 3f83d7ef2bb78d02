"""RTL code coverage (cosim/coverage, `cosim coverage`): the reader on real Verilator coverage files of a
tiny design built here with coverage, merging, lcov, waivers, and one small real run of the command."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cosim.coverage.coverage_data import CoverageData, read, read_all
from cosim.coverage.lcov import lcov_text
from cosim.coverage.summary import summarize
from cosim.coverage.waivers import WaiverError, apply_waivers, load_waivers
from hw.toolchain import verilator_bin, verilator_env

# A small FSM with a counter: every kind of point Verilator writes (line, branch, toggle, FSM state/arc).
TINY_V = """\
module tiny(input clk, input rst, input go, output reg [1:0] st, output reg [3:0] cnt);
  localparam S_IDLE = 2'd0, S_RUN = 2'd1, S_DONE = 2'd2;
  always @(posedge clk) begin
    if (rst) begin
      st <= S_IDLE;
      cnt <= 4'd0;
    end else begin
      case (st)
        S_IDLE: if (go) st <= S_RUN;
        S_RUN: begin
          cnt <= cnt + 4'd1;
          if (cnt == 4'd3) st <= S_DONE;
        end
        S_DONE: st <= S_IDLE;
        default: st <= S_IDLE;
      endcase
    end
  end
endmodule
"""
# ``+go=0`` never raises go: the FSM stays in S_IDLE and the S_RUN lines are never run.
TINY_MAIN = """\
#include "Vtiny.h"
#include "verilated.h"
#include "verilated_cov.h"
int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    const char* go = Verilated::commandArgsPlusMatch("go=");
    const bool never = go && go[0] && go[4] == '0';
    Vtiny* top = new Vtiny;
    top->clk = 0; top->rst = 1; top->go = 0;
    for (int i = 0; i < 40; i++) {
        top->clk = !top->clk;
        top->eval();
        if (i == 3) top->rst = 0;
        if (i == 5 && !never) top->go = 1;
    }
    top->final();
    VerilatedCov::write();
    delete top;
    return 0;
}
"""
CYCLES = 20  # rising edges of clk in TINY_MAIN


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    """The tiny design built with every coverage kind, run twice (go raised, go never raised)."""
    d = tmp_path_factory.mktemp("tiny_cov")
    (d / "tiny.v").write_text(TINY_V)
    (d / "main.cpp").write_text(TINY_MAIN)
    env = verilator_env()
    env["MAKEFLAGS"] = "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0"  # a few seconds of g++, not a fast model
    cmd = [str(verilator_bin() / "verilator"), "--cc", "--exe", "--build", "-j", "2", "--coverage-line",
           "--coverage-toggle", "--coverage-fsm", "-Mdir", str(d / "obj"), "tiny.v", "main.cpp", "-o", "tiny_sim"]
    r = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = {}
    for name, go in (("go", "1"), ("idle", "0")):
        f = d / f"{name}.dat"
        subprocess.run([str(d / "obj" / "tiny_sim"), f"+go={go}", f"+verilator+coverage+file+{f}"], cwd=d,
                       check=True, timeout=60)
        out[name] = f
    out["dir"] = d
    return out


def test_reader_classifies_verilators_points(tiny):
    data = read(tiny["go"], tiny["dir"])
    kinds = {p.kind for p in data.points.values()}
    assert {"line", "branch", "toggle", "fsm_state", "fsm_arc"} <= kinds
    assert {p.file for p in data.points.values()} == {"tiny.v"}  # made relative to the folder given
    assert {p.module for p in data.points.values()} == {"tiny"}
    by_obj = {p.obj: p for p in data.of_kind("toggle")}
    assert by_obj["clk:0->1"].count == CYCLES and by_obj["clk:1->0"].count == CYCLES
    assert by_obj["go:0->1"].count == 1 and by_obj["go:1->0"].count == 0
    assert {p.obj for p in data.of_kind("fsm_state")} >= {"st::S_IDLE", "st::S_RUN", "st::S_DONE"}
    # the counter's block (line 11) ran: the FSM went round; every point of the line kind has its lines
    run_lines = [p for p in data.of_kind("line") if 11 in p.lines()]
    assert run_lines and all(p.count > 0 for p in run_lines)


def test_idle_run_leaves_lines_uncovered(tiny):
    s = summarize(read(tiny["idle"], tiny["dir"]))
    assert "tiny.v:11" in s.uncovered and "tiny.v:12" in s.uncovered
    assert s.total["line"].hit < s.total["line"].total
    assert s.modules["tiny"]["toggle"].total == s.total["toggle"].total
    # never moved: the counter's 4 bits and the state's 2 (each bit both ways), and go
    assert {k: s.uncovered_toggles.get(k) for k in ("tiny:cnt", "tiny:st", "tiny:go")} == \
        {"tiny:cnt": 8, "tiny:st": 4, "tiny:go": 2}
    assert list(s.uncovered_toggles)[0] == "tiny:cnt"  # most points first
    assert {"tiny:st::S_RUN", "tiny:st::S_DONE", "tiny:st::S_DONE->S_IDLE"} <= set(s.uncovered_fsm)


def test_merge_sums_counts_and_round_trips(tiny, tmp_path):
    a, b = read(tiny["go"]), read(tiny["idle"])
    m = read_all([tiny["go"], tiny["idle"]])
    assert set(m.points) == set(a.points) | set(b.points)
    for key, p in m.points.items():
        assert p.count == (a.points[key].count if key in a.points else 0) + \
            (b.points[key].count if key in b.points else 0)
    back = read(m.write(tmp_path / "merged.dat"))
    assert {k: p.count for k, p in back.points.items()} == {k: p.count for k, p in m.points.items()}
    assert (tmp_path / "merged.dat").read_text().startswith("# SystemC::Coverage-3\n")
    twice = CoverageData().merge(m).merge(m)
    assert all(twice.points[k].count == 2 * p.count for k, p in m.points.items())


def test_lcov_tracefile(tiny):
    data = read(tiny["idle"], tiny["dir"])
    text = lcov_text(data)
    lines = text.splitlines()
    assert lines[0].startswith("TN:") and lines[1] == "SF:tiny.v" and lines[-1] == "end_of_record"
    da = {int(x[3:].split(",")[0]): int(x.split(",")[1]) for x in lines if x.startswith("DA:")}
    assert da[11] == 0 and da[3] > 0
    lf = int(next(x for x in lines if x.startswith("LF:"))[3:])
    lh = int(next(x for x in lines if x.startswith("LH:"))[3:])
    assert lf == len(da) and lh == sum(1 for c in da.values() if c > 0)
    brda = [x for x in lines if x.startswith("BRDA:")]
    assert brda and all(len(x[5:].split(",")) == 4 for x in brda)
    assert int(next(x for x in lines if x.startswith("BRF:"))[4:]) == len(brda)


def test_waivers_count_apart_and_stale_is_an_error(tiny, tmp_path):
    data = read(tiny["idle"], tiny["dir"])
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"waivers": [
        {"lines": "tiny.v:10-12", "text": "S_RUN: begin", "reason": "the run never raises go"},
        {"toggle": "tiny:c?t[3:2]", "reason": "never counts that far"},
        {"toggle": "tiny:rst", "reason": "covered, still waived: never a hit"}]}))
    waived, report = apply_waivers(data, load_waivers(w))
    s = summarize(data, waived)
    plain = summarize(data)
    assert report[1]["points"] == 4 and report[2]["points"] == 2 and report[2]["hit"] >= 1
    t, p = s.total["toggle"], plain.total["toggle"]
    # rst toggled, yet a waived point is never a hit
    assert t.waived == 6 and t.total == p.total - 6 and t.hit == p.hit - report[1]["hit"] - report[2]["hit"]
    assert "tiny.v:11" not in s.uncovered and "tiny.v:11" in plain.uncovered
    assert s.total["line"].waived >= 2 and s.total["line"].total == plain.total["line"].total - s.total["line"].waived
    assert s.total["branch"].waived == sum(1 for p in data.of_kind("branch") if 10 <= p.line <= 12)
    w.write_text(json.dumps({"waivers": [{"lines": "tiny.v:500", "text": "x", "reason": "gone"}]}))
    with pytest.raises(WaiverError, match="stale"):
        apply_waivers(data, load_waivers(w))
    # bits past a signal's width (another core's lane) are not stale while the signal is there; a signal
    # that is gone is
    w.write_text(json.dumps({"waivers": [{"toggle": "tiny:cnt[63:60]", "reason": "core 15's lane"}]}))
    assert apply_waivers(data, load_waivers(w))[1][0]["points"] == 0
    w.write_text(json.dumps({"waivers": [{"toggle": "tiny:gone[3:0]", "reason": "renamed"}]}))
    with pytest.raises(WaiverError, match="stale"):
        apply_waivers(data, load_waivers(w))
    w.write_text(json.dumps({"waivers": [{"lines": "tiny.v:1"}]}))
    with pytest.raises(WaiverError, match="reason"):
        load_waivers(w)


def test_waiver_index_finds_what_each_waiver_matches(tiny, tmp_path):
    """The index waivers are applied through (signals looked up by name once) picks exactly the points
    of which each waiver's own predicate holds, for every kind and shape of pattern."""
    from cosim.coverage.waivers import PointIndex

    data = read(tiny["idle"], tiny["dir"])
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"waivers": [
        {"lines": "tiny.v:10-12", "text": "S_RUN: begin", "reason": "r"},
        {"lines": "tiny.v:1-400", "text": "module tiny", "reason": "r"},
        {"toggle": "tiny:c?t[3:2]", "reason": "r"}, {"toggle": "tiny:cnt[2]", "reason": "r"},
        {"toggle": "tiny:cnt[1:6]", "reason": "r"}, {"toggle": "tiny:*", "reason": "r"},
        {"toggle": "*:rst", "reason": "r"}, {"toggle": "tiny:c.t", "reason": "r"},
        {"fsm": "*", "reason": "r"}, {"fsm": "nothing:*", "reason": "r"}]}))
    waivers = load_waivers(w)
    points = list(data.points.values())
    index = PointIndex(points)
    counts = []
    for wv in waivers:
        got = sorted(p.fields for p in index.matching(wv))
        assert got == sorted(p.fields for p in points if wv.matches(p)), wv.describe()
        counts.append(len(got))
    assert counts[2:5] == [4, 2, 6] and counts[7] == 0  # two directions a bit; a range past the width; "." is literal
    assert counts[5] > counts[2] and counts[0] > 0 and counts[1] > counts[0]


def test_a_waiver_key_given_twice_is_refused(tmp_path):
    w = tmp_path / "w.json"
    w.write_text('{"waivers": [{"toggle": "tiny:a", "toggle": "tiny:b", "reason": "r"}]}')
    with pytest.raises(WaiverError, match="key 'toggle' is given twice"):
        load_waivers(w)


def test_shipped_waivers_load():
    """The shipped waivers load, and every line waiver's text is still at its line (no coverage run needed)."""
    from cosim.coverage.report import DEFAULT_WAIVERS, REPO

    assert all(w.reason for w in load_waivers(DEFAULT_WAIVERS, REPO))


def test_line_waiver_text_is_checked_against_the_source(tiny, tmp_path):
    """A line waiver names what its line holds: a line that moved is refused when the file is loaded,
    naming the line it now holds and where the text went; 'text' is required on line waivers only."""
    w = tmp_path / "w.json"
    w.write_text(json.dumps({"waivers": [{"lines": "tiny.v:10-12", "text": "  S_RUN: begin ", "reason": "r"}]}))
    assert load_waivers(w, tiny["dir"])[0].pattern == "tiny.v:10-12"
    w.write_text(json.dumps({"waivers": [{"lines": "tiny.v:9", "text": "S_RUN: begin", "reason": "r"}]}))
    with pytest.raises(WaiverError, match=r"waiver 0 \(tiny.v:9\): line 9 holds 'S_IDLE: if \(go\) st <= S_RUN;'.*"
                                          r"stale; that text is at line 10"):
        load_waivers(w, tiny["dir"])
    assert load_waivers(w)[0].kind == "lines"  # without the sources' folder nothing is read
    w.write_text(json.dumps({"waivers": [{"lines": "gone.v:1", "text": "x", "reason": "r"}]}))
    with pytest.raises(WaiverError, match="no such source file gone.v"):
        load_waivers(w, tiny["dir"])
    w.write_text(json.dumps({"waivers": [{"lines": "tiny.v:10", "reason": "r"}]}))
    with pytest.raises(WaiverError, match="'text'"):
        load_waivers(w)
    w.write_text(json.dumps({"waivers": [{"toggle": "tiny:cnt", "text": "x", "reason": "r"}]}))
    with pytest.raises(WaiverError, match="'text'"):
        load_waivers(w)


def test_config_bound_waivers_hold_on_every_shipped_config():
    """Every waiver that names a ``movable`` bound waives only bits that no shipped config can move."""
    from cosim.coverage.report import DEFAULT_WAIVERS
    from cosim.coverage.toggle_bounds import check_waiver_bounds

    waivers = load_waivers(DEFAULT_WAIVERS)
    assert sum(1 for w in waivers if w.movable) >= 50
    assert check_waiver_bounds(waivers) == []


def test_config_bound_check_catches_a_reachable_bit(tmp_path):
    """A bound waiver reaching into bits a config can move (a core's lane only on configs with that core),
    an unknown bound and a bound without a bit range are each reported; 'movable' on a line waiver is
    refused when loading."""
    from cosim.coverage.toggle_bounds import check_waiver_bounds

    w = tmp_path / "w.json"
    w.write_text(json.dumps({"waivers": [
        {"toggle": "fetch:pc[31:18]", "movable": "pc", "reason": "too low: 16 MiB holds 2^20 instructions"},
        {"toggle": "fetch:pc[31:21]", "movable": "pcs", "reason": "no such bound"},
        {"toggle": "fetch:pc", "movable": "pc", "reason": "no range"},
        {"toggle": "fetch:pc[31:21]", "movable": "pc", "reason": "right"},
        {"toggle": "accel_top:f_burst_pc[63:53]", "movable": "pc", "lane_bits": 32, "reason": "core 1, right"},
        {"toggle": "accel_top:f_burst_pc[63:52]", "movable": "pc", "lane_bits": 32, "reason": "core 1: bit 20"}]}))
    bad = check_waiver_bounds(load_waivers(w), ["small", "default", "quad"])
    # core 1's lane exists on quad only (default has one core)
    lanes = [b for b in bad if b.startswith("accel_top")]
    assert lanes == ["accel_top:f_burst_pc[63:52]: bits [20] can move on config quad (pc)"], lanes
    bad = [b for b in bad if not b.startswith("accel_top")]
    assert any("bits [18, 19, 20] can move on config default" in b for b in bad), bad
    assert any("bits [18, 19, 20] can move on config quad" in b for b in bad), bad
    assert any("bits [18] can move on config small" in b for b in bad), bad  # 4 MiB: pc <= 2^18
    assert any("unknown movable bound 'pcs'" in b for b in bad) and any("needs a bit range" in b for b in bad)
    assert len(bad) == 5
    w.write_text(json.dumps({"waivers": [{"lines": "hw/rtl/fetch.v:1", "movable": "pc", "reason": "x"}]}))
    with pytest.raises(WaiverError, match="'movable' names a bound of a toggle waiver"):
        load_waivers(w)


def test_whole_design_verilates_with_fsm_coverage(tmp_path):
    """The FSM coverage build (its Verilator flags on every RTL source) gets past Verilator, which once
    stopped with an internal error on a part-select compared with ``==``, and finds the units' FSM:
    the four states of unit_shell's ``state`` in each of the three units."""
    from testbench.rtl_model import FSM_COVERAGE_FLAGS, rtl_available, rtl_sources
    from hw.config import load_config
    from hw.gen_header import write_header

    if not rtl_available():
        pytest.skip("no RTL")
    inc = write_header(load_config("small2"), tmp_path / "include").parent
    cmd = [str(verilator_bin() / "verilator"), "--cc", "--top-module", "accel_top", "-Wno-fatal", f"-I{inc}",
           *FSM_COVERAGE_FLAGS, "-Mdir", str(tmp_path / "obj"), *[str(p) for p in rtl_sources()]]
    r = subprocess.run(cmd, env=verilator_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    text = "".join(p.read_text() for p in (tmp_path / "obj").glob("*.cpp"))
    for core in (0, 1):
        for unit in ("load", "compute", "store"):
            for st in ("U_IDLE", "U_WAIT", "U_EXEC", "U_PUSH"):
                assert f"g_core[{core}].u_core.u_{unit}.u_shell.state::{st}\"" in text, (core, unit, st)


def test_coverage_kind_picks_flags_and_folder(monkeypatch):
    from testbench.rtl_model import COVERAGE_FLAGS, coverage_flags, coverage_suffix

    monkeypatch.delenv("COSIM_COVERAGE_KIND", raising=False)
    assert (coverage_flags(), coverage_suffix()) == (COVERAGE_FLAGS, "-cov")
    monkeypatch.setenv("COSIM_COVERAGE_KIND", "fsm")
    assert (coverage_flags(), coverage_suffix()) == (("--coverage-fsm",), "-fsm")
    monkeypatch.setenv("COSIM_COVERAGE_KIND", "lines")
    with pytest.raises(ValueError, match="COSIM_COVERAGE_KIND='lines': choose from code, fsm"):
        coverage_flags()


def test_plan_runs_the_examples_on_an_fsm_build_per_config(tmp_path):
    from cosim.coverage.campaign import Plan, plan_tasks

    plan = Plan(("small", "default"), ("fast",), ("vadd",), units=False, directed=False)
    fsm = [t for t in plan_tasks(plan, tmp_path) if t.args["kind"] == "fsm"]
    assert [(t.args["config"], t.args["names"]) for t in fsm] == [("small", ["vadd"]), ("default", ["vadd"])]
    # a record resumes only for the same RTL and configs' hardware
    from cosim.models import design_digest

    assert all(t.key.endswith(f" rtl={design_digest(['small', 'default'])}") for t in plan_tasks(plan, tmp_path))
    off = Plan(("small",), ("fast",), ("vadd",), units=False, directed=False, fsm=False)
    assert not [t for t in plan_tasks(off, tmp_path) if t.args["kind"] == "fsm"]


def test_cosim_coverage_small_run(tmp_path, capsys):
    """One real run: config small, fast back-end, one example, no units, no directed tests; and that
    example on the FSM build of the raw harness: every state of the three units' FSM entered."""
    from cosim.cli import main
    from testbench.rtl_model import rtl_available

    if not rtl_available():
        pytest.skip("no RTL")
    out = tmp_path / "cov"
    (out / "dat").mkdir(parents=True)
    (out / "dat" / "notes.txt").write_text("mine")  # not a coverage file: left alone
    argv = ["coverage", "--configs", "small", "--backends", "fast", "--examples", "vadd", "--no-units",
            "--no-directed", "--workers", "0", "--quiet", "--out", str(out), "--json",
            "--results", str(tmp_path / "cov.jsonl")]
    rc = main(argv)
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0, doc.get("failed_tasks")
    assert (out / "dat" / "notes.txt").read_text() == "mine"
    assert set(doc) >= {"total", "modules", "uncovered", "waived", "html", "lcov"}
    for m in ("line", "branch", "toggle", "fsm_state"):
        f = doc["total"][m]
        assert 0 < f["hit"] <= f["total"] and f["pct"] == round(100 * f["hit"] / f["total"], 2)
    assert doc["modules"]["unit_shell"]["fsm_state"] == {"hit": 12, "total": 12, "pct": 100.0, "waived": 0}
    assert doc["uncovered_fsm"] == [] and doc["total"]["fsm_arc"]["total"] == 0  # no arc: see docs/verification.md
    assert "fetch" in doc["modules"] and "tb_fast" not in doc["modules"]  # the test bench's Verilog is left out
    assert all(":" in u and u.startswith("hw/rtl/") for u in doc["uncovered"])
    assert Path(doc["html"]).is_file() and (Path(doc["html"]).parent / "hw_rtl_fetch.v.html").is_file()
    assert Path(doc["lcov"]).read_text().count("end_of_record") >= 10
    # resumed from its results, every task is read back; one whose coverage file is gone is an error (the
    # figures were lower, silently)
    assert main(argv) == 0 and json.loads(capsys.readouterr().out)["total"] == doc["total"]
    # an earlier run's file (another selection) is neither merged (the figures would be higher) nor kept
    stale = out / "dat" / "earlier-run.dat"
    stale.write_text("# not a file of this run's tasks\n")
    assert main(argv) == 0 and json.loads(capsys.readouterr().out)["total"] == doc["total"]
    assert not stale.exists()
    # the text report prints at most --max-uncovered of each list (the waivers are hundreds)
    assert main([a for a in argv if a != "--json"] + ["--max-uncovered", "2"]) == 0
    text = capsys.readouterr().out
    assert len(doc["waived"]) > 2 and text.count("\nwaived: ") == 2, text
    assert f"  ... {len(doc['waived']) - 2} more in {out / 'summary.json'}" in text, text
    next((out / "dat").glob("*.dat")).unlink()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "its coverage file" in err and "is gone" in err and err.count("\n") == 1, err


def test_directed_cases_agree_on_iss_and_tlm():
    """The directed coverage Programs mean what they say on the two plain models (the RTL runs them in
    `cosim coverage`): a clean BARRIER on one core, and the errors the others are built to raise."""
    from cosim import models
    from cosim.coverage.directed import (abort_after_error, barrier_one_core, gemm_offset_saturates,
                                         halt_while_pushing, widest_fields, window_ends_at_barrier)
    from hw.config import load_config

    cfg = load_config("small")
    cases = [barrier_one_core(cfg), abort_after_error(cfg), halt_while_pushing(cfg), gemm_offset_saturates(cfg),
             window_ends_at_barrier(cfg), *widest_fields(cfg)]
    assert [c.error and c.error[0] for c in cases] == [None, "UNLOADED", "UNLOADED", "SRAM_RANGE", "DEADLOCK",
                                                       *["DRAM_RANGE"] * 6, "INSN_RANGE"]
    for c in cases:
        for r in (models.iss(c.program), models.tlm(c.program)):
            assert (r.error and (r.error["name"], r.error["pc"])) == c.error, (c.name, r.model, r.error)
            for k, want in c.program.expected.items():
                assert (r.outputs[k] == want).all(), (c.name, r.model, k)


def test_top_of_address_space_is_a_slave_error_on_the_rtl():
    """The directed Programs at the last 4 KiB of the 32-bit address space (a LOAD, a STORE, the fetch)
    each end in ERR_AXI_RESP at pc 0 on the RTL with the Verilog DRAM model, and a clean Program after them
    in the same simulator still runs right."""
    from cosim import models
    from cosim.coverage.directed import TOP_REGION, barrier_one_core, top_of_address_space
    from hw.config import load_config
    from testbench.rtl_model import rtl_available

    if not rtl_available():
        pytest.skip("no RTL")
    cfg = load_config("small")
    progs = top_of_address_space(cfg)
    assert all(("REGION1_BASE", TOP_REGION) in p.regs for p in progs)
    clean = barrier_one_core(cfg)
    res = models.rtl([*progs, clean.program], cfg, mem="fast")
    assert [(r.error or {}).get("name") for r in res[:-1]] == ["AXI_RESP"] * 3
    assert [(r.error or {}).get("pc") for r in res[:-1]] == [0] * 3
    assert res[-1].error is None
    for k, want in clean.program.expected.items():
        assert (res[-1].outputs[k] == want).all(), k


@pytest.mark.parametrize("config", ["small", "quad"])
def test_long_counter_program_short_on_every_model(config):
    """The long-counter Program (run with a GEMM of 2^31 block operations by `cosim coverage` on the RTL), at
    2^12: ISS and TLM agree it is clean, and the TLM's and the RTL's counters pass its check on every core
    (GEMM_OPS exact, the busy and stall counters at least that long), the RTL's equal to the TLM's."""
    from cosim import models
    from cosim.coverage.directed import LONG_COUNTERS, check_long, long_counters
    from hw.config import load_config
    from testbench.rtl_model import rtl_available

    cfg = load_config(config)
    p = long_counters(cfg, 12)
    assert p.meta["gemm_ops"] == 1 << 12 and models.iss(p).error is None
    tlm = models.tlm(p)
    assert check_long(p, tlm) == []
    big = long_counters(cfg, 31)   # the campaign's: its loops reach 2^31 block operations per core
    assert big.meta["gemm_ops"] == 1 << 31 and len(big.insns) == 7 * cfg.num_cores
    if config == "small" and rtl_available():   # small's fast build is shared with the other RTL tests
        rtl = models.rtl([p], cfg, mem="fast")[0]
        assert check_long(p, rtl) == [] and rtl.cycles == tlm.cycles
        assert all(rtl.counters[k] == tlm.counters[k] for k in LONG_COUNTERS + ("gemm_ops",))


def test_byte_counter_and_field_bounds():
    """The byte counters' low bits are bound by the bus width (8 bytes or more on every shipped config); the
    DMA row fields' bounds follow the 16-bit fields and the entry sizes."""
    from cosim.coverage import toggle_bounds as tb
    from hw.config import list_configs, load_config

    for c in list_configs():
        cfg = load_config(c)
        assert min(tb.byte_counter(cfg)) == cfg.bus_bytes.bit_length() - 1 >= 3
    small, default = load_config("small"), load_config("default")
    assert tb.load_stride_bytes(small) == set(range(3, 22)) and tb.load_stride_bytes(default) == set(range(4, 24))
    assert tb.store_stride_bytes(default) == set(range(4, 20)) and tb.store_x_beats(default) == set(range(17))
    assert tb.load_x_beats(default) == set(range(21)) and tb.sram_index(default) == set(range(11))
    assert max(tb.fetch_bytes(default)) == 24 and max(tb.fetch_bytes(small)) == 22


def test_directed_job_drives_the_lite_bus_bits():
    """The directed cocotb job on the fast back-end writes a register with every byte strobe and byte offset
    (PROT set): the aligned ones merge their bytes, the register is restored, an unmapped word reads 0, and
    the Program's run after the job's steps is still right."""
    from compiler.examples import make_case
    from cosim import models
    from hw.config import load_config
    from testbench.rtl_model import rtl_available

    if not rtl_available():
        pytest.skip("no RTL")
    cfg = load_config("small")
    case = make_case("vadd", cfg, seed=0)
    r = models.rtl([case.program], cfg, mem="fast", job_module="testbench.coverage_job")[0]
    bus = r.extra["directed"]["readback"]["bus"]
    assert r.error is None and len(bus["strobes"]) == 16 and None not in bus["strobes"]
    assert bus["merged"] and bus["restored"] and bus["unmapped"] == 0
    for k, want in case.expected.items():
        assert (r.outputs[k] == want).all(), k


def test_check_walk_flags_what_it_must():
    """The walk's check: a carry that went wrong, a CSR read that differs and a short CYCLES walk each fail."""
    from cosim.coverage.directed import check_walk

    good = {"low_bit": 8, "carries": {"CYCLES": 57, "GEMM_OPS": 3}, "mismatches": [], "read_back": []}
    assert check_walk(good) == []
    assert check_walk(None) == ["no walk result"]
    assert check_walk({**good, "mismatches": ["GEMM_OPS: preset 0xff, then 0x0, expected 0x100"]})
    assert check_walk({**good, "read_back": ["GEMM_OPS: CSR 0x1, counter 0x100"]})
    assert check_walk({**good, "carries": {"CYCLES": 56}}) == ["CYCLES carried 56 times, expected 57"]


def test_counter_walk_on_every_core():
    """The directed job's counter carry walk on the protocol back-end of `small2` (two cores; the suite's
    own protocol build): the busy-cores Program moves every counter of both cores often enough that each
    is preset below every power of two from 2^32 (2^64 for CYCLES) down to the walk's lowest bit and carries
    into it right, the CSRs read back what the counters hold, and the outputs after the walk are right."""
    from cosim import models
    from cosim.coverage.directed import busy_cores, check_walk
    from hw import csr
    from hw.config import load_config
    from testbench.rtl_model import rtl_available

    if not rtl_available():
        pytest.skip("no RTL")
    cfg = load_config("small2")
    p = busy_cores(cfg)
    tlm = models.tlm(p)
    assert tlm.error is None and all((tlm.outputs[k] == v).all() for k, v in p.expected.items())
    r = models.rtl([p], cfg, mem="protocol", job_module="testbench.coverage_job")[0]
    assert r.error is None and all((r.outputs[k] == v).all() for k, v in p.expected.items())
    walk = r.extra["directed"]["walk"]
    assert check_walk(walk) == []
    want = {n: 32 - walk["low_bit"] + 1 for n in csr.counter_reads(cfg.num_cores)}
    assert {n: walk["carries"][n] for n in want} == want


@pytest.mark.parametrize("config, count, pc", [("small", (1 << 15) + 2, (1 << 15) + 1), ("small2", (1 << 15) + 4, 1 << 14)])
def test_long_window_error_pcs_past_2_to_the_14(config, count, pc):
    """The directed long window, short enough for the suite: ``count`` instructions, the error at ``pc``
    (one core: the malformed last word, and without FINISH a DEADLOCK at ``count``; two: core 0's BARRIER,
    which core 1 never reaches, and a clean run of the whole stream on every core); the RTL (fast
    back-end) reports it at that pc, with the TLM's error, CYCLES and counters: the pcs carry bit 14 or 15
    (the directed coverage run takes windows as long as the DRAM holds)."""
    from cosim import models
    from cosim.coverage.directed import long_window
    from hw.config import load_config
    from testbench.rtl_model import rtl_available

    cfg = load_config(config)
    progs = [long_window(cfg, count)]
    want = [("BAD_OPCODE" if cfg.num_cores == 1 else "BARRIER", pc)]
    if cfg.num_cores == 1:  # no FINISH: every instruction retires, DEADLOCK at INSN_COUNT
        progs.append(long_window(cfg, count, end="none"))
        want.append(("DEADLOCK", count))
    else:  # every core runs the whole stream to one BARRIER and FINISH
        progs.append(long_window(cfg, count, end="finish"))
        want.append(None)
    tlm = [models.tlm(p) for p in progs]
    for t, w in zip(tlm, want):
        assert (t.error and (t.error["name"], t.error["pc"], t.error.get("core", 0))) == (w and (*w, 0)), t.error
    if cfg.num_cores > 1:
        assert [c["compute_insns"] for c in tlm[1].extra["cores"]] == [count] * cfg.num_cores
    if not rtl_available():
        pytest.skip("no RTL")
    for r, t, w in zip(models.rtl(progs, cfg, mem="fast"), tlm, want):
        assert (r.error and (r.error["name"], r.error["pc"])) == w, r.error
        assert r.cycles == t.cycles and r.counters == t.counters


def test_widest_tiles_uop_fields_and_loops_on_every_model():
    """Directed cases on `small` (its 64-entry buffers): a LOAD as tall and one as wide as the accumulator
    holds, 15 pad rows or columns each side, stored back whole (the padded tile), a GEMM on a micro-op
    whose fields are all ones (SRAM_RANGE at the GEMM), GEMM and ALU loops of 2^14 - 1 iterations,
    STOREs filling the store-to-compute token queue, and rows as long as the weight and accumulator buffers
    hold, loaded and stored back: the ISS, the TLM and the RTL (fast back-end) give the
    same error and outputs, the TLM in the RTL's cycles."""
    from cosim import models
    from cosim.coverage.directed import (store_tokens_fill_queue, uop_fields_all_ones, widest_loops, widest_rows,
                                         widest_tiles)
    from hw.config import load_config
    from testbench.rtl_model import rtl_available

    cfg = load_config("small")
    cases = [*widest_tiles(cfg), uop_fields_all_ones(cfg), widest_loops(cfg), store_tokens_fill_queue(cfg),
             widest_rows(cfg)]
    for c in cases[:2]:
        want = c.program.expected["out"]
        assert (want[:15] == 0).all() and (want[-15:] == 0).all() and want[15:-15].any()
    tlm = [models.tlm(c.program) for c in cases]
    rtl = models.rtl([c.program for c in cases], cfg, mem="fast") if rtl_available() else None
    for k, c in enumerate(cases):
        for r in [models.iss(c.program), tlm[k]] + ([rtl[k]] if rtl else []):
            assert (r.error and (r.error["name"], r.error["pc"])) == c.error, (c.program.name, r.model, r.error)
            assert all((r.outputs[n] == v).all() for n, v in c.program.expected.items()), (c.program.name, r.model)
        if rtl:
            assert rtl[k].cycles == tlm[k].cycles, c.program.name
    if rtl is None:
        pytest.skip("no RTL")


def test_a_refused_coverage_run_removes_nothing(tmp_path, capsys):
    """Options that leave no task are refused before OUT/dat is touched (its files were all removed)."""
    from cosim.cli import main

    from cosim.commands.coverage import MARKER

    dat = tmp_path / "cov" / "dat"
    dat.mkdir(parents=True)
    (dat / MARKER).touch()  # a coverage run's folder
    (dat / "a.dat").write_text("kept")
    (dat / "results.csv").write_text("kept")
    assert main(["coverage", "--quick", "--no-examples", "--out", str(tmp_path / "cov")]) == 2
    assert "nothing to run" in capsys.readouterr().err
    assert sorted(f.name for f in dat.iterdir()) == [MARKER, "a.dat", "results.csv"]
    assert main(["coverage", "--quick", "--fuzz", "10001", "--out", str(tmp_path / "cov")]) == 2
    assert "too large (at most 10,000)" in capsys.readouterr().err
    (tmp_path / "f.json").write_text("{}")
    assert main(["coverage", "--report-only", "--out", str(tmp_path / "f.json")]) == 2
    assert "not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("mine", ["dat/scope_capture.dat", "summary.json", "coverage.info"])
def test_coverage_refuses_a_folder_of_someone_else_s_files(tmp_path, capsys, mine):
    """--out naming a folder that holds files of a coverage report's names (or .dat files) that no coverage
    run wrote: refused before anything runs, the files left as they are."""
    from cosim.cli import main

    f = tmp_path / "proj" / mine
    f.parent.mkdir(parents=True)
    f.write_text('{"mine": 1}')
    assert main(["coverage", "--quick", "--examples", "vadd", "--out", str(tmp_path / "proj")]) == 2
    err = capsys.readouterr().err
    assert f"{mine} is there and the folder is not a coverage run's" in err and err.count("\n") == 1, err
    assert f.read_text() == '{"mine": 1}'


def test_coverage_options_that_quick_would_replace(monkeypatch):
    """--quick picks the fast back-end unless --backends names others; a config path is made absolute (the
    tasks run in folders of their own)."""
    import argparse

    from cosim.commands.coverage import add_parser, chosen_backends

    ap = argparse.ArgumentParser()
    add_parser(ap.add_subparsers())
    args = ap.parse_args(["coverage", "--quick", "--backends", "fast", "protocol", "raw", "--configs", "my.json"])
    assert chosen_backends(args) == ["fast", "protocol", "raw"] and Path(args.configs[0]).is_absolute()
    assert chosen_backends(ap.parse_args(["coverage", "--quick"])) == ["fast"]
    assert chosen_backends(ap.parse_args(["coverage"])) == ["fast", "protocol", "raw"]


def test_report_only_reads_a_dat_folder_no_run_marked(tmp_path, capsys):
    """--report-only removes no coverage file: coverage files copied into a folder by hand are reported."""
    from cosim.cli import main

    dat = tmp_path / "cov" / "dat"
    dat.mkdir(parents=True)
    (dat / "copied.dat").write_text("# not a real coverage file\n")
    main(["coverage", "--report-only", "--out", str(tmp_path / "cov")])
    assert "not a coverage run's" not in capsys.readouterr().err
    assert (dat / "copied.dat").exists()
