"""`cosim waves list/show`: signal listing, name resolution, tables and ASCII waveforms."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the VCD writers next to this file
from _waves_vcd import sample_program, tlm_vcd, verilator_vcd, write
from cosim.cli import main
from cosim.waves import VcdFile, WavesError, fmt_value
from cosim.waves.vcd_reader import pad_bits


@pytest.fixture
def rtl(tmp_path):
    return write(tmp_path / "rtl.vcd", verilator_vcd(sample_program()))


@pytest.fixture
def tlm(tmp_path):
    return write(tmp_path / "tlm.vcd", tlm_vcd(sample_program()))


def cosim(capsys, *argv):
    rc = main(["waves", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_list_dedupes_rootio(rtl, capsys):
    rc, out, _ = cosim(capsys, "list", rtl, "--json")
    assert rc == 0
    sigs = {s["name"]: s for s in json.loads(out)["signals"]}
    assert not any(n.startswith("$rootio") for n in sigs)  # the $rootio copy of each port is dropped
    assert sigs["accel_top.dbg_load_pc"]["width"] == 32
    assert sigs["accel_top.dbg_cycles"]["width"] == 64
    assert sigs["accel_top.dbg_load_busy"]["width"] == 1
    assert "$rootio.dbg_load_pc" in sigs["accel_top.dbg_load_pc"]["aliases"]
    assert "accel_top.u_load.clk" in sigs and "accel_top.DEPTH" in sigs
    rc, out, _ = cosim(capsys, "list", rtl)
    assert rc == 0 and "accel_top.dbg_store_q" in out and " 16 " in out


def test_list_tlm(tlm, capsys):
    rc, out, _ = cosim(capsys, "list", tlm, "--json")
    names = [s["name"] for s in json.loads(out)["signals"]]
    assert "accel.dbg_compute_pc" in names and "accel.irq" in names


def test_resolve_names(rtl, tlm):
    v = VcdFile(rtl)
    for q in ("dbg_load_pc", "accel_top.dbg_load_pc", "accel_top.dbg_load_pc[31:0]", "$rootio.dbg_load_pc",
              "load_pc"):
        assert v.resolve(q).name == "accel_top.dbg_load_pc", q
    assert VcdFile(tlm).resolve("accel.dbg_load_pc").width == 32
    with pytest.raises(WavesError, match=r"ambiguous.*accel_top\.clk, accel_top\.u_load\.clk"):
        v.resolve("clk")
    with pytest.raises(WavesError, match="ambiguous"):
        v.resolve("_pc")  # three units
    with pytest.raises(WavesError, match="did you mean: dbg_load_pc"):
        v.resolve("dbg_lod_pc")
    # a part of a bus is refused (the tools would show the whole bus under the part's name)
    with pytest.raises(WavesError, match=r"'dbg_load_pc\[3:0\]': a part of accel_top\.dbg_load_pc \(32 bits\)"):
        v.resolve("dbg_load_pc[3:0]")



def test_a_net_is_found_by_a_suffix_of_its_other_scope_s_name(tmp_path):
    """A net seen from two scopes is one signal named by the first; a suffix of the other's name finds it."""
    vcd = tmp_path / "a.vcd"
    vcd.write_text("$timescale 1ns $end\n$scope module tb $end\n$scope module u_accel $end\n"
                   "$var wire 1 ! clk $end\n$scope module u_core $end\n$var wire 1 ! clk $end\n$upscope $end\n"
                   "$upscope $end\n$upscope $end\n$enddefinitions $end\n#0\n0!\n#5\n1!\n")
    v = VcdFile(vcd)
    assert [s.name for s in v.signals] == ["tb.u_accel.clk"]
    assert v.resolve("u_core.clk").name == "tb.u_accel.clk"


def test_user_errors_exit_2(rtl, tmp_path, capsys):
    rc, _, err = cosim(capsys, "show", rtl, "clk")
    assert rc == 2 and err.count("\n") == 1 and "ambiguous" in err
    rc, _, err = cosim(capsys, "list", tmp_path / "missing.vcd")
    assert rc == 2 and "no such VCD file" in err
    rc, _, err = cosim(capsys, "show", rtl, "dbg_load_pc", "--from", "9", "--to", "3")
    assert rc == 2 and "empty cycle window" in err
    bad = write(tmp_path / "bad.vcd", "hello\n")
    rc, _, err = cosim(capsys, "list", bad)
    assert rc == 2 and "not a VCD header" in err
    # a timestamp that is not a number: the line that holds it (a $comment's '#' is text, not time)
    bad = write(tmp_path / "bad_time.vcd", "$comment\n# not a time\n$end\n$var wire 1 ! clk $end\n"
                                           "$enddefinitions $end\n#0\n1!\n#1x\n0!\n")
    rc, _, err = cosim(capsys, "show", bad, "clk")
    assert rc == 2 and err.count("\n") == 1 and "line 8: timestamp '#1x' is not a whole number" in err, err
    # a file cut in the middle of a vector's change (a run killed while writing): the line that holds it
    cut = write(tmp_path / "cut.vcd", "$var wire 4 ! bus $end\n$enddefinitions $end\n#0\nb0001 !\n#1\nb0011")
    rc, _, err = cosim(capsys, "show", cut, "bus")
    assert rc == 2 and err.count("\n") == 1 and "line 6: 'b0011' is not a value change" in err, err


def test_show_table_in_cycles(rtl, tlm, capsys):
    # RTL: period 10000 ps from clk; TLM: 1 unit per cycle. Same cycles, same values.
    rc, out, _ = cosim(capsys, "show", rtl, "dbg_load_pc", "dbg_load_busy", "--from", "4", "--to", "7", "--json")
    d = json.loads(out)
    assert d["clock"]["period"] == 10000 and d["clock"]["source"] == "clk"
    assert d["signals"][0]["values"] == ["ffffffff", "0", "0", "0"]
    assert d["signals"][1]["values"] == ["0", "0", "1", "1"]
    rc, out, _ = cosim(capsys, "show", tlm, "dbg_load_pc", "dbg_load_busy", "--from", "4", "--to", "7", "--json")
    d2 = json.loads(out)
    assert [s["values"] for s in d2["signals"]] == [s["values"] for s in d["signals"]]
    rc, out, _ = cosim(capsys, "show", rtl, "dbg_load_pc", "load_busy", "--from", "4", "--to", "7")
    lines = out.splitlines()
    assert rc == 0 and lines[0].split() == ["cycle", "accel_top.dbg_load_pc", "accel_top.dbg_load_busy"]
    assert lines[2].split() == ["4", "ffffffff", "0"] and lines[5].split() == ["7", "0", "1"]
    rc, out, _ = cosim(capsys, "show", rtl, "dbg_load_pc", "--from", "0", "--to", "30", "--changes")
    assert [ln.split()[0] for ln in out.splitlines()[2:]] == ["0", "5", "21"]


def test_show_ascii(rtl, capsys):
    rc, out, _ = cosim(capsys, "show", rtl, "dbg_load_busy", "dbg_load_pc", "--from", "3", "--to", "24",
                       "--ascii", "--cell", "2")
    assert rc == 0
    lines = out.splitlines()
    label = len("accel_top.dbg_load_busy") + 2
    busy = lines[1][label:]
    # busy 0 for cycles 3..5, 1 for 6..19, 0 for 20, 1 from 22 (instructions 0 and 1)
    assert busy.startswith("______/-") and busy[(20 - 3) * 2] == "\\" and busy[(22 - 3) * 2] == "/"
    pc = lines[2][label:]
    assert pc.startswith(" ff~") and pc[(5 - 3) * 2:(5 - 3) * 2 + 2] == "X0" and "X1" in pc
    assert all(ord(ch) < 128 for ch in out)  # plain ASCII


def test_x_and_z(tmp_path, capsys):
    text = ("$timescale 1ns $end\n$scope module accel $end\n$var wire 8 ! bus $end\n$var wire 1 \" bit $end\n"
            "$upscope $end\n$enddefinitions $end\n#0\nbx !\nx\"\n#2\nb1z !\nz\"\n#3\nb101 !\n1\"\n#4\n")
    vcd = write(tmp_path / "xz.vcd", text)
    rc, out, _ = cosim(capsys, "show", vcd, "bus", "bit", "--from", "0", "--to", "3", "--json", "--period", "1")
    vals = [s["values"] for s in json.loads(out)["signals"]]
    assert vals == [["x", "x", "z", "5"], ["x", "x", "z", "1"]]  # b1z pads with 0: 0000001z -> 0z
    rc, out, _ = cosim(capsys, "show", vcd, "bus", "bit", "--from", "0", "--to", "3", "--ascii", "--cell", "3")
    assert "xxxxxx" in out.splitlines()[2] and "zzz" in out.splitlines()[2]
    assert " x" in out.splitlines()[1] and "Xz" in out.splitlines()[1]


def test_value_formatting():
    assert fmt_value("x" * 32, 32) == "x"
    assert fmt_value("z" * 16, 16) == "z"
    assert fmt_value("1" * 32, 32) == "ffffffff"
    assert fmt_value("101", 32) == "5"  # Icarus drops leading zeros
    assert fmt_value("1x" + "0" * 8, 10) == "x00"
    assert fmt_value("0000", 1) == "0"
    assert pad_bits("x1", 4) == "xxx1" and pad_bits("1", 4) == "0001"


def test_progress_bar(tmp_path, capsys):
    n = 40_000  # > 16 k timestamps: the bar updates
    body = "".join(f"#{c}\nb{c:b} !\n" for c in range(n))
    vcd = write(tmp_path / "p.vcd", "$timescale 1ns $end\n$scope module accel $end\n$var wire 32 ! cnt $end\n"
                "$upscope $end\n$enddefinitions $end\n" + body)
    rc, out, err = cosim(capsys, "show", vcd, "cnt", "--from", str(n - 3), "--to", str(n - 1), "--progress",
                         "--period", "1")
    assert rc == 0 and "%" in err and "[" in err
    rc, out, err = cosim(capsys, "show", vcd, "cnt", "--from", str(n - 3), "--to", str(n - 1), "--period", "1")
    assert err == ""  # stderr is not a terminal under pytest


def test_waves_without_subcommand(capsys):
    rc, out, err = cosim(capsys)  # one error line; the subcommands are listed by --help
    assert rc == 2 and out == "" and err == "cosim waves: error: a command is required (see cosim waves --help)\n"
    rc, out, _ = cosim(capsys, "--help")
    assert rc == 0 and "timeline" in out


HEAD = "$timescale 1ns $end\n$scope module accel $end\n"


@pytest.mark.parametrize("decls, body, words", [
    ("$var wire 1 ! dbg_load_busy $end\n$var wire 32 ! dbg_load_pc $end\n", "#0\nb0 !\n",
     ["line 4", "identifier code '!'", "declared again with width 32 (it was 1)"]),
    ("$var wire 32 \" dbg_load_pc $end\n$var wire 8 # dbg_load_pc $end\n", "#0\nb0 \"\n",
     ["line 4", "'accel.dbg_load_pc' is declared twice"]),
    ("$var wire 0 ! zero $end\n", "#0\n0!\n", ["line 3", "width '0'"]),
    ("$var wire 2000000000 ! huge $end\n", "#0\n0!\n", ["line 3", "width 2,000,000,000, more than the 1,048,576"]),
    ("$var wire 1 ! $end\n", "#0\n0!\n", ["line 3", "a $var of code '!' has no name"]),
])
def test_declarations_the_readers_would_misread(tmp_path, capsys, decls, body, words):
    f = write(tmp_path / "d.vcd", HEAD + decls + "$upscope $end\n$enddefinitions $end\n" + body)
    rc, _, err = cosim(capsys, "list", f)
    assert rc == 2 and err.count("\n") == 1 and all(w in err for w in words), err


def test_time_going_back_is_refused_naming_the_line(tmp_path, capsys):
    f = write(tmp_path / "back.vcd", HEAD + "$var wire 1 ! dbg_load_busy $end\n$var wire 32 \" dbg_load_pc $end\n"
              "$upscope $end\n$enddefinitions $end\n#10\n0!\nb0 \"\n#5\n1!\n")
    rc, _, err = cosim(capsys, "timeline", f)
    assert rc == 2 and err.count("\n") == 1 and "line 10: time 5 goes back from 10" in err, err
    f = write(tmp_path / "neg.vcd", HEAD + "$var wire 1 ! dbg_load_busy $end\n$var wire 32 \" dbg_load_pc $end\n"
              "$upscope $end\n$enddefinitions $end\n#0\n0!\nb0 \"\n#-5\n1!\n")
    rc, _, err = cosim(capsys, "timeline", f)
    assert rc == 2 and err.count("\n") == 1 and "line 10: time -5 is negative" in err, err


def test_show_window_stops_at_the_trace_and_is_bounded(rtl, tmp_path, capsys):
    rc, out, _ = cosim(capsys, "show", rtl, "dbg_load_pc", "--from", "0", "--to", "99999999999", "--changes")
    assert rc == 0 and len(out.splitlines()) < 100  # the changes up to the trace's end, not rows to 1e11
    rc, _, err = cosim(capsys, "show", rtl, "dbg_load_pc", "--from", "99999999999")
    assert rc == 2 and "past the trace's last cycle" in err
    rc, _, err = cosim(capsys, "show", rtl, "")
    assert rc == 2 and "an empty signal name" in err
    rc, _, err = cosim(capsys, "list", tmp_path)
    assert rc == 2 and "not a regular file" in err


def test_diff_window_zero_draws_nothing(rtl, tlm, capsys):
    rc, out, err = cosim(capsys, "diff", tlm, rtl, "--window", "0")
    assert rc in (0, 1) and "Traceback" not in err, err
    rc, _, err = cosim(capsys, "diff", tlm, rtl, "--window", "10001")
    assert rc == 2 and "at most 10,000" in err


def test_a_vector_dumped_bit_by_bit_is_not_a_name_declared_twice(tmp_path):
    """Gate-level and VHDL dumps declare ``q [0]`` and ``q [1]`` under their own codes."""
    f = write(tmp_path / "blast.vcd", HEAD + "$var wire 1 ! clk $end\n$var wire 1 \" q [0] $end\n"
              "$var wire 1 # q [1] $end\n$upscope $end\n$enddefinitions $end\n#0\n0!\n")
    assert {"accel.q[0]", "accel.q[1]"} <= {s.name for s in VcdFile(f).signals}


@pytest.mark.parametrize("scale", ["ns", "", "7furlongs", "1 "])
def test_a_timescale_without_its_number_is_one_line(tmp_path, capsys, scale):
    f = write(tmp_path / "t.vcd", f"$timescale {scale} $end\n$scope module accel $end\n$var wire 1 ! a $end\n"
              "$upscope $end\n$enddefinitions $end\n#0\n0!\n")
    rc, _, err = cosim(capsys, "list", f)
    assert rc == 2 and err.count("\n") == 1 and "line 1: $timescale" in err and "is not 1, 10 or 100" in err, err


def test_diff_of_an_instruction_that_never_ends(tmp_path, capsys):
    """A deadlock's trace leaves an instruction open: the diff says so (it raised on the missing end)."""
    head = ("$timescale 1ns $end\n$scope module accel $end\n$var wire 1 ! dbg_store_busy $end\n"
            "$var wire 32 % dbg_store_pc $end\n$upscope $end\n$enddefinitions $end\n"
            "#0\nb11111111111111111111111111111111 %\n0!\n#1\nb0 %\n1!\n")
    a = write(tmp_path / "a.vcd", head + "#3\n0!\n#5\nb11111111111111111111111111111111 %\n#6\n")
    b = write(tmp_path / "b.vcd", head + "#6\n")
    rc, out, err = cosim(capsys, "diff", a, b)
    assert rc == 1 and "Traceback" not in err and "internal error" not in err, err
    assert "B: store   start 0  end never (still open at the trace's end)  (held 0..the end)" in out, out


@pytest.mark.parametrize("value, cmd", [("b102 \"", "show"), ("r1.5 \"", "timeline"), ("b" + "1" * 40 + " \"", "show")])
def test_a_value_that_is_not_its_signal_s_bits_is_one_line(tmp_path, capsys, value, cmd):
    """Not binary digits, or wider than the signal: named with its time and signal (show and timeline read
    the same changes; the timeline read a 40-bit pc on a 32-bit probe as a huge instruction index)."""
    f = write(tmp_path / "v.vcd", HEAD + "$var wire 1 ! dbg_load_busy $end\n$var wire 32 \" dbg_load_pc $end\n"
              "$upscope $end\n$enddefinitions $end\n#0\n0!\nb0 \"\n#40\n1!\n" + value + "\n#50\n0!\n")
    rc, _, err = cosim(capsys, cmd, f, *(["dbg_load_pc"] if cmd == "show" else []))
    assert rc == 2 and err.count("\n") == 1 and "time 40: value '" in err and "of 'accel.dbg_load_pc' is not 32 " \
        "binary digit(s)" in err, err


def test_show_output_is_bounded_by_cycles_times_signals(rtl, capsys, monkeypatch):
    """The window's cycles x signals (x characters per cycle when drawn) is bounded; a --changes table
    costs its changes only, so it takes any window."""
    from cosim.commands import waves as waves_cmd
    monkeypatch.setattr(waves_cmd, "MAX_CELLS", 100)
    rc, out, _ = cosim(capsys, "show", rtl, "dbg_load_pc", "--from", "0", "--to", "99")
    assert rc == 0 and len(out.splitlines()) == 2 + 70  # the trace ends at cycle 69
    rc, _, err = cosim(capsys, "show", rtl, "dbg_load_pc", "dbg_load_busy", "--from", "0", "--to", "99")
    assert rc == 2 and "70 cycles x 2 signal(s) = 140" in err and err.count("\n") == 1, err
    rc, _, err = cosim(capsys, "show", rtl, "dbg_load_pc", "--ascii", "--cell", "2", "--from", "0", "--to", "99")
    assert rc == 2 and "x 2 character(s) per cycle" in err, err
    rc, _, err = cosim(capsys, "show", rtl, "dbg_load_pc", "dbg_load_busy", "--json", "--from", "0", "--to", "99")
    assert rc == 2 and "at most 100" in err, err
    rc, out, _ = cosim(capsys, "show", rtl, "dbg_load_pc", "dbg_load_busy", "--changes", "--from", "0", "--to", "99")
    rows = [ln.split() for ln in out.splitlines()[2:]]
    assert rc == 0 and [r[0] for r in rows] == ["0", "5", "6", "20", "21", "22", "36", "37"], rows
    assert rows[1] == ["5", "0", "0"] and rows[2] == ["6", "0", "1"]


def test_values_diff_is_the_naive_comparison():
    """diff_values (one merge of two change lists) finds what comparing every cycle finds."""
    import random

    from cosim.waves.timeline import diff_values, value_at
    rng = random.Random(5)
    for _ in range(300):
        def changes() -> list[tuple[int, str]]:
            cs = sorted(rng.sample(range(0, 40), rng.randint(0, 8)))
            return [(c, rng.choice(["0", "1", "x", "10"])) for c in cs]
        a, b = changes(), changes()
        oa, ob, end = rng.randint(0, 5), rng.randint(0, 5), rng.randint(1, 45)
        ra = [(max(0, c - oa), v) for c, v in a]
        rb = [(max(0, c - ob), v) for c, v in b]
        from cosim.waves.vcd_reader import to_int

        def differ(c: int) -> bool:
            x, y = value_at(ra, c), value_at(rb, c)
            return to_int(x) != to_int(y) or (to_int(x) is None and x != y)
        want = next((c for c in range(end) if differ(c)), None)
        assert diff_values(a, b, oa, ob, end) == want, (a, b, oa, ob, end)


def test_a_header_that_does_not_close_is_one_line(tmp_path, capsys):
    big = write(tmp_path / "words.vcd", "$timescale 1ns $end\n$scope module a $end\n$var wire 1 ! x $end\n"
                                        "$upscope $end\n" + "a " * 50 + "\n")
    rc, _, err = cosim(capsys, "list", big)
    assert rc == 2 and "line 5: 'a' stands outside" in err and err.count("\n") == 1, err
    open_decl = write(tmp_path / "open.vcd", "$timescale 1ns $end\n$comment\n" + "word " * 100_001 + "\n")
    rc, _, err = cosim(capsys, "list", open_decl)
    assert rc == 2 and "line 2: $comment runs over 100,000 words" in err, err
    rc, _, err = cosim(capsys, "list", write(tmp_path / "short.vcd", "$timescale 1ns $end\n$var wire 1 ! x\n"))
    assert rc == 2 and "line 2: $var has no $end" in err, err
