"""`cosim waves timeline/diff`: per-instruction timelines from RTL- and TLM-style VCDs,
and the first divergence between two of them."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the VCD writers next to this file
from _waves_vcd import Insn, sample_program, tlm_vcd, verilator_vcd, write
from cosim.cli import main
from cosim.waves import VcdFile, WavesError, detect_clock, diff_timelines, extract_timeline
from cosim.waves.timeline import _unit_entries

ORIGIN = 4  # the RTL trace's START cycle (reset and CSR writes come first)


def shifted(insns: list[Insn], k: int) -> list[Insn]:
    return [Insn(i.unit, i.index, i.held_start + k, i.start + k, i.end + k, i.held_end + k) for i in insns]


def replace(insns: list[Insn], which: int, **kw) -> list[Insn]:
    return [dataclasses.replace(i, **kw) if i.index == which else i for i in insns]


def cosim(capsys, *argv):
    rc = main(["waves", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def rtl(tmp_path):
    return write(tmp_path / "rtl.vcd", verilator_vcd(shifted(sample_program(), ORIGIN), n_cycles=75,
                                                     origin=ORIGIN))


@pytest.fixture
def tlm(tmp_path):
    return write(tmp_path / "tlm.vcd", tlm_vcd(sample_program()))


def as_tuples(entries, off=0):
    return sorted((e["unit"], e["index"], e["held_start"] - off, e["start"] - off, e["end"] - off,
                   e["held_end"] - off) for e in entries)


def test_timeline_rtl_and_tlm_same_format(rtl, tlm, capsys):
    want = sorted((i.unit, i.index, i.held_start, i.start, i.end, i.held_end) for i in sample_program())
    rc, out, _ = cosim(capsys, "timeline", tlm, "--json")
    d = json.loads(out)
    assert rc == 0 and d["clock"]["period"] == 1 and d["clock"]["origin"] == 0
    assert as_tuples(d["entries"]) == want
    rc, out, _ = cosim(capsys, "timeline", rtl, "--json")
    d = json.loads(out)
    assert d["clock"] == {"period": 10000, "phase": 0, "source": "clk", "origin": ORIGIN}
    assert as_tuples(d["entries"], ORIGIN) == want
    rc, out, _ = cosim(capsys, "timeline", rtl, "--json", "--relative")
    assert as_tuples(json.loads(out)["entries"]) == want
    assert set(json.loads(out)["entries"][0]) == {"unit", "index", "start", "end", "held_start", "held_end",
                                                  "open_at_start"}
    rc, out, _ = cosim(capsys, "timeline", rtl)
    lines = out.splitlines()
    assert lines[1].split() == ["unit", "index", "start", "end", "cycles", "held_start", "held_end"]
    assert lines[2].split() == ["load", "0", "10", "24", "14", "9", "25"]


def test_diff_agree(rtl, tlm, tmp_path, capsys):
    rc, out, _ = cosim(capsys, "diff", tlm, rtl)
    assert rc == 0 and "timelines agree" in out and "7 instructions in both" in out
    # two RTL runs at different clock periods agree too
    rtl2 = write(tmp_path / "rtl2.vcd", verilator_vcd(shifted(sample_program(), ORIGIN), n_cycles=75,
                                                      origin=ORIGIN, period=4))
    rc, out, _ = cosim(capsys, "diff", rtl, rtl2, "--json")
    assert rc == 0 and json.loads(out)["equal"]
    # without alignment the RTL's reset shows as a 4-cycle shift of instruction 0
    rc, out, _ = cosim(capsys, "diff", tlm, rtl, "--align", "none", "--json")
    first = json.loads(out)["first"]
    assert rc == 1 and first["index"] == 0 and first["b"]["start"] - first["a"]["start"] == ORIGIN


def test_diff_names_timing_difference(rtl, tlm, tmp_path, capsys):
    # B: compute instruction 3 ends 3 cycles late; store instruction 5 starts 5 cycles late
    prog = replace(sample_program(), 3, end=49, held_end=50)
    prog = replace(prog, 5, start=53)
    late = write(tmp_path / "late.vcd", verilator_vcd(shifted(prog, ORIGIN), n_cycles=75, origin=ORIGIN))
    rc, out, _ = cosim(capsys, "diff", tlm, late, "--json")
    rep = json.loads(out)
    assert rc == 1 and not rep["equal"]
    f = rep["first"]
    assert (f["index"], f["unit"], f["kind"]) == (3, "compute", "end")
    assert (f["a"]["end"], f["b"]["end"]) == (46, 49)
    # FINISH (6) waits for 3 to leave the compute unit, so it starts 3 cycles late too
    assert [(d["index"], d["kind"]) for d in rep["differences"]] == [(3, "end"), (6, "start"), (5, "start")]
    rc, out, _ = cosim(capsys, "diff", tlm, late)
    assert "first divergence: instruction 3 (compute) ends at a different cycle" in out
    assert "A: compute start 38  end 46" in out and "B: compute start 38  end 49" in out
    assert "end differs by +3 cycles (B - A)" in out
    # the waveform window around it, for both traces, in each one's own cycles
    assert f"\nA: {tlm} around cycle 46 (relative 46)" in out and f"\nB: {late} around cycle 50" in out
    assert "accel.dbg_compute_busy" in out and "accel_top.dbg_compute_pc" in out
    # tolerance: 3 cycles hides instruction 3, not instruction 5
    rc, out, _ = cosim(capsys, "diff", tlm, late, "--tol", "3", "--json")
    assert rc == 1 and json.loads(out)["first"]["index"] == 5
    rc, out, _ = cosim(capsys, "diff", tlm, late, "--tol", "5", "--json")
    assert rc == 0 and json.loads(out)["equal"]


def test_diff_names_data_difference(tlm, tmp_path, capsys):
    # B: the store unit runs instruction 7 where A runs 5 (a wrong pc on the probe)
    prog = replace(sample_program(), 5, index=7)
    bad = write(tmp_path / "bad.vcd", verilator_vcd(shifted(prog, ORIGIN), n_cycles=75, origin=ORIGIN))
    rc, out, _ = cosim(capsys, "diff", tlm, bad, "--json")
    rep = json.loads(out)
    assert rc == 1
    assert (rep["first"]["index"], rep["first"]["kind"], rep["first"]["cycle"]) == (5, "only_a", 48)
    assert {(d["index"], d["kind"]) for d in rep["differences"]} == {(5, "only_a"), (7, "only_b")}
    rc, out, _ = cosim(capsys, "diff", tlm, bad)
    assert "instruction 5 (store) appears only in A" in out


def test_diff_values(tlm, tmp_path, capsys):
    # same timeline, but B's load queue occupancy reads 3 at relative cycle 12
    prog = shifted(sample_program(), ORIGIN)
    odd = write(tmp_path / "odd.vcd", verilator_vcd(prog, n_cycles=75, origin=ORIGIN,
                                                    overrides={(12 + ORIGIN, "dbg_load_q"): 3}))
    rc, out, _ = cosim(capsys, "diff", tlm, odd, "--values", "dbg_load_q", "dbg_store_q", "--json")
    rep = json.loads(out)
    assert rc == 1 and rep["first"] is None
    assert rep["values"] == [{"signal": "accel.dbg_load_q", "cycle": 12, "a": "1", "b": "3"}]
    rc, out, _ = cosim(capsys, "diff", tlm, odd, "--values", "dbg_load_q")
    assert "values of accel.dbg_load_q first differ at relative cycle 12: A 1  B 3" in out


def test_diff_align_start_needs_dbg_cycles(tmp_path):
    text = tlm_vcd(sample_program()).replace("dbg_cycles", "other_counter")
    a = VcdFile(write(tmp_path / "a.vcd", text))
    ta = extract_timeline(a, detect_clock(a))
    assert ta.clock.origin is None and ta.clock.source == "default"
    with pytest.raises(WavesError, match="no dbg_cycles"):
        diff_timelines(ta, ta, align="start")
    assert diff_timelines(ta, ta)["equal"]  # auto falls back to the first instruction


def test_no_probes(tmp_path, capsys):
    vcd = write(tmp_path / "x.vcd", "$scope module t $end\n$var wire 1 ! a $end\n$upscope $end\n"
                "$enddefinitions $end\n#0\n0!\n#5\n1!\n")
    rc, _, err = cosim(capsys, "timeline", vcd)
    assert rc == 2 and "no dbg_<unit>_pc" in err


def test_unit_entries_edge_cases():
    N = "1" * 32
    # back to back: busy stays high while pc goes 0 -> 1 at cycle 5
    es = _unit_entries("load", [(0, N), (2, "0"), (5, "1"), (9, N)], [(0, "0"), (3, "1"), (8, "0")])
    assert [(e.index, e.start, e.end, e.held_start, e.held_end) for e in es] == [(0, 3, 5, 2, 5), (1, 5, 8, 5, 9)]
    # pc changes and busy falls in the same cycle; the next starts later
    es = _unit_entries("load", [(0, N), (1, "0"), (4, "1"), (9, N)], [(0, "0"), (2, "1"), (4, "0"), (6, "1"),
                                                                      (8, "0")])
    assert [(e.index, e.start, e.end) for e in es] == [(0, 2, 4), (1, 6, 8)]
    # never busy (e.g. an instruction with nothing to do): start = end = release cycle
    es = _unit_entries("compute", [(0, N), (1, "11"), (3, N)], [(0, "0")])
    assert [(e.index, e.start, e.end) for e in es] == [(3, 3, 3)]
    # still running at the end of the trace
    es = _unit_entries("store", [(0, N), (1, "10")], [(0, "0"), (2, "1")])
    assert [(e.index, e.start, e.end, e.held_end) for e in es] == [(2, 2, None, None)]
    # a windowed trace (its first cycle 100) begins inside what it finds: an instruction executing there
    # has no start (it began before), one only held there starts when it starts
    es = _unit_entries("load", [(100, "0"), (105, "1"), (112, N)], [(100, "1"), (103, "0"), (106, "1"),
                                                                    (110, "0")], first_cycle=100)
    assert [(e.index, e.start, e.end, e.held_start, e.open_at_start) for e in es] == \
        [(0, None, 103, 100, True), (1, 106, 110, 105, False)]
    es = _unit_entries("load", [(100, "0"), (105, N)], [(100, "0"), (102, "1"), (104, "0")], first_cycle=100)
    assert [(e.index, e.start, e.end, e.open_at_start) for e in es] == [(0, 102, 104, True)]


def _window(rtl: Path, out: Path, first: int, last: int | None = None) -> Path:
    """``rtl`` cut to the cycles from ``first`` up to ``last`` (to its end with None), as ``--waves-window``
    writes it."""
    text = rtl.read_text()
    head, _, body = text.partition("$enddefinitions $end\n")
    stamps = body.split("\n#")
    cut = next(k for k, s in enumerate(stamps) if s.startswith(f"{first * 10000}\n"))
    stop = len(stamps) if last is None else next(k for k, s in enumerate(stamps) if s.startswith(f"{last * 10000}\n"))
    v = VcdFile(rtl)
    from cosim.waves import read_window
    vals = read_window(v, v.signals, detect_clock(v), first, first)
    dump = "\n".join(f"{x}{s.code}" if s.width == 1 else f"b{x} {s.code}" for s in v.signals
                     for _c, x in vals[s.name][:1])  # the window's first stamp dumps every value
    return write(out, head + "$enddefinitions $end\n#" + stamps[cut].split("\n", 1)[0] + "\n" + dump + "\n#"
                 + "\n#".join(stamps[cut + 1:stop]) + "\n")


def test_a_window_cut_at_both_ends_compares_only_the_cycles_it_holds(rtl, tlm, tmp_path, capsys):
    """Relative cycles 10..30 of the RTL trace against the whole TLM trace: the instructions outside those
    cycles are not differences (they were 'only in A' and 'never ended'), one inside still is."""
    win = _window(rtl, tmp_path / "mid.vcd", ORIGIN + 10, ORIGIN + 30)
    rc, out, _ = cosim(capsys, "diff", tlm, win, "--json")
    rep = json.loads(out)
    assert rc == 0 and rep["equal"] and rep["outside"] > 0 and rep["span_b"] == [10, 29], out
    assert rep["span_a"] == [None, None]  # the TLM's trace is whole
    rc, out, _ = cosim(capsys, "diff", tlm, win, "--window", "0")
    assert rc == 0 and "fall outside the cycles the other holds" in out and "timelines agree" in out, out
    late = write(tmp_path / "late.vcd", verilator_vcd(replace(shifted(sample_program(), ORIGIN), 2, end=ORIGIN + 27,
                                                             held_end=ORIGIN + 28), n_cycles=75, origin=ORIGIN))
    rc, out, _ = cosim(capsys, "diff", tlm, _window(late, tmp_path / "late_mid.vcd", ORIGIN + 10, ORIGIN + 30),
                       "--json")
    rep = json.loads(out)
    assert rc == 1 and (rep["first"]["index"], rep["first"]["kind"]) == (2, "end"), out


def test_whole_traces_report_an_instruction_past_the_others_end(tmp_path, capsys):
    """Two whole traces (neither windowed nor cut): B runs one more instruction after A's last cycle. That
    is a difference ('only in B'), not a cycle A does not hold."""
    prog = sample_program()
    a = write(tmp_path / "a.vcd", tlm_vcd(prog, n_cycles=62))
    b = write(tmp_path / "b.vcd", tlm_vcd(prog + [Insn("store", 7, 65, 66, 69, 70)], n_cycles=72))
    rc, out, _ = cosim(capsys, "diff", a, b, "--json")
    rep = json.loads(out)
    assert rc == 1 and rep["outside"] == 0 and rep["first"]["kind"] == "only_b" and rep["first"]["index"] == 7, out


def test_values_before_start_are_compared_where_both_traces_hold_them(tmp_path, capsys):
    """Two RTL traces whose register writes differ before START: --values finds it (at a negative relative
    cycle); against the TLM's trace, which begins at START, only the cycles from START on are compared."""
    prog = shifted(sample_program(), ORIGIN)
    a = write(tmp_path / "a.vcd", verilator_vcd(prog, n_cycles=75, origin=ORIGIN))
    b = write(tmp_path / "b.vcd", verilator_vcd(prog, n_cycles=75, origin=ORIGIN, overrides={(1, "dbg_load_q"): 5}))
    rc, out, _ = cosim(capsys, "diff", a, b, "--values", "dbg_load_q", "--json")
    assert rc == 1 and [(v["cycle"], v["b"]) for v in json.loads(out)["values"]] == [(1 - ORIGIN, "5")], out
    tlm = write(tmp_path / "tlm.vcd", tlm_vcd(sample_program()))
    rc, out, _ = cosim(capsys, "diff", tlm, b, "--values", "dbg_load_q", "--json")
    assert rc == 0 and json.loads(out)["values"] == [], out


def test_a_window_diffs_without_a_false_start(rtl, tmp_path, capsys):
    """A trace cut to a window compares the instructions it began inside by their ends only."""
    text = (tmp_path / "rtl.vcd").read_text()
    head, _, body = text.partition("$enddefinitions $end\n")
    stamps = body.split("\n#")
    cut = next(k for k, s in enumerate(stamps) if s.startswith(f"{(ORIGIN + 10) * 10000}\n"))
    # the window's first stamp dumps every value, as a VCD opened mid-run does
    v = VcdFile(rtl)
    clock = detect_clock(v)
    from cosim.waves import read_window
    vals = read_window(v, v.signals, clock, ORIGIN + 10, ORIGIN + 10)
    dump = "\n".join(f"{x}{s.code}" if s.width == 1 else f"b{x} {s.code}" for s in v.signals
                     for _c, x in vals[s.name][:1])
    win = write(tmp_path / "win.vcd", head + "$enddefinitions $end\n#" + stamps[cut].split("\n", 1)[0] + "\n"
                + dump + "\n#" + "\n#".join(stamps[cut + 1:]))
    rc, out, _ = cosim(capsys, "timeline", win, "--json")
    first = [e for e in json.loads(out)["entries"] if e["open_at_start"]]
    assert rc == 0 and first and all(e["held_start"] == ORIGIN + 10 for e in first), out
    rc, out, _ = cosim(capsys, "diff", rtl, win, "--json")
    assert rc == 0 and json.loads(out)["equal"], out
