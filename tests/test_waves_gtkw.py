"""What a GTKWave user expects of the waves tools: a save file beside every VCD, cycles counted from START
in `waves show --relative`, wide buses decoded lane by lane, and no unrelated net presented as an alias."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the VCD writers next to this file
from _waves_vcd import sample_program, tlm_vcd, verilator_vcd, write
from cosim.cli import main
from cosim.waves import VcdFile
from cosim.waves.gtkw import GROUP_BEGIN, GROUP_END, groups, write_gtkw
from cosim.waves.vcd_reader import fmt_decoded


def cosim(capsys, *argv):
    rc = main([*map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_show_relative_counts_from_start(tmp_path, capsys):
    """The sample trace starts at cycle 4 (dbg_cycles): --relative cycle c is absolute cycle c + 4, and a
    trace without dbg_cycles refuses --relative in one line."""
    rtl = write(tmp_path / "rtl.vcd", verilator_vcd(sample_program(), origin=4))
    rc, out, _ = cosim(capsys, "waves", "show", rtl, "dbg_load_busy", "dbg_cycles", "--from", "10", "--to", "20",
                       "--json")
    absolute = json.loads(out)
    rc, out, _ = cosim(capsys, "waves", "show", rtl, "dbg_load_busy", "dbg_cycles", "--from", "6", "--to", "16",
                       "--relative", "--json")
    rel = json.loads(out)
    assert rc == 0 and rel["relative"] and (rel["from"], rel["to"]) == (6, 16)
    assert [s["values"] for s in rel["signals"]] == [s["values"] for s in absolute["signals"]]
    rc, out, _ = cosim(capsys, "waves", "show", rtl, "dbg_cycles", "--from", "0", "--to", "3", "--relative")
    rows = [ln.split() for ln in out.splitlines()[2:]]
    assert [r[0] for r in rows] == ["0", "1", "2", "3"]
    bare = tmp_path / "bare.vcd"
    bare.write_text("$timescale 1ns $end\n$scope module t $end\n$var wire 1 ! a $end\n$upscope $end\n"
                    "$enddefinitions $end\n#0\n0!\n#5\n1!\n")
    rc, out, err = cosim(capsys, "waves", "show", bare, "a", "--relative")
    assert rc == 2 and "no dbg_cycles" in err and len(err.strip().splitlines()) == 1


def test_lanes_signed_decode():
    """A 4-lane bus of 8-bit lanes, lane 0 in the low bits; signed and unsigned; x in a lane; widths the lane
    count does not divide stay hex."""
    v = "".join(format(b & 0xFF, "08b") for b in (-1, 127, -128, 5))  # lanes 3..0 from the high bits
    assert fmt_decoded(v, 32, lanes=4, signed=True) == "5,-128,127,-1"
    assert fmt_decoded(v, 32, lanes=4) == "5,128,127,255"
    assert fmt_decoded("x" * 8 + v[8:], 32, lanes=4, signed=True) == "5,-128,127,x"
    assert fmt_decoded(v, 32, signed=True) == str(int(v, 2) - (1 << 32))
    assert fmt_decoded("101", 3, lanes=2) == "5"  # 2 does not divide 3: hex as before
    assert fmt_decoded("1", 1, lanes=4, signed=True) == "1"


def test_show_lanes_on_a_wide_bus(tmp_path, capsys):
    """`waves show --lanes 16 --signed` on a 512-bit accumulator vector prints 16 signed lanes."""
    lanes = [(-1) ** k * (k * 1000 + 7) for k in range(16)]
    bits = "".join(format(x & 0xFFFFFFFF, "032b") for x in reversed(lanes))
    f = tmp_path / "acc.vcd"
    f.write_text("$timescale 1ns $end\n$scope module t $end\n$var wire 1 ! clk $end\n"
                 "$var wire 512 \" acc_wdata [511:0] $end\n$upscope $end\n$enddefinitions $end\n"
                 f"#0\n1!\nb{bits} \"\n#1\n0!\n#2\n1!\n")
    rc, out, err = cosim(capsys, "waves", "show", f, "acc_wdata", "--from", "0", "--to", "0", "--lanes", "16",
                         "--signed", "--json", "--period", "2")
    assert rc == 0, err
    assert json.loads(out)["signals"][0]["values"] == [",".join(map(str, lanes))]


def test_list_keeps_unrelated_nets_apart(tmp_path, capsys):
    """Verilator gives one identifier code to nets it proved equal: a net seen from two scopes under one leaf
    name is one signal with an alias, two different names are two signals (both readable)."""
    f = tmp_path / "codes.vcd"
    f.write_text("$timescale 1ns $end\n$scope module top $end\n$var wire 1 ! clk $end\n"
                 "$var wire 4 \" busy_count [3:0] $end\n$scope module u $end\n$var wire 1 ! clk $end\n"
                 "$var wire 4 \" spare_bits [3:0] $end\n$upscope $end\n$upscope $end\n$enddefinitions $end\n"
                 "#0\n1!\nb0011 \"\n#1\n0!\n")
    rc, out, _ = cosim(capsys, "waves", "list", f, "--json")
    sigs = {s["name"]: s for s in json.loads(out)["signals"]}
    assert sigs["top.clk"]["aliases"] == ["top.u.clk"]
    assert sigs["top.busy_count"]["aliases"] == [] and "top.u.spare_bits" in sigs
    rc, out, _ = cosim(capsys, "waves", "show", f, "busy_count", "spare_bits", "--from", "0", "--to", "0",
                       "--json", "--period", "2")
    assert [s["values"] for s in json.loads(out)["signals"]] == [["3"], ["3"]]


def _gtkw_signals(path: Path) -> list[str]:
    return [ln for ln in path.read_text().splitlines() if ln and ln[0] not in "[@-*"]


def test_gtkw_groups_and_radixes(tmp_path):
    """The save file names the dump, opens and closes every group, and lists only signals of the VCD, with
    GTKWave's names (a bus the TLM declares without a range gets one)."""
    for vcd in (write(tmp_path / "rtl.vcd", verilator_vcd(sample_program())),
                write(tmp_path / "tlm.vcd", tlm_vcd(sample_program()))):
        g = write_gtkw(vcd)
        text = g.read_text()
        assert g == vcd.with_suffix(".gtkw") and f'[dumpfile] "{vcd.resolve()}"' in text
        assert text.count(GROUP_BEGIN) == text.count(GROUP_END) == len(groups(VcdFile(vcd))) >= 1
        names = _gtkw_signals(g)
        assert any(n.endswith("dbg_load_pc[31:0]") for n in names) and any(n.endswith("dbg_load_busy") for n in names)
        refs = {s.ref for s in VcdFile(vcd).signals} | {f"{s.ref}[{s.width - 1}:0]" for s in VcdFile(vcd).signals}
        assert set(names) <= refs


@pytest.mark.skipif(shutil.which("gtkwave") is None or shutil.which("xvfb-run") is None,
                    reason="GTKWave or xvfb-run is not installed (Debian packages gtkwave, xvfb)")
def test_gtkwave_opens_the_save_file(tmp_path):
    """GTKWave itself (under a virtual X server) loads the VCD with the save file and displays every signal it
    names."""
    vcd = write(tmp_path / "tlm.vcd", tlm_vcd(sample_program()))
    g = write_gtkw(vcd)
    tcl = tmp_path / "q.tcl"
    tcl.write_text('puts "DISPLAYED: [gtkwave::getDisplayedSignals]"\ngtkwave::/File/Quit\n')
    r = subprocess.run(["xvfb-run", "-a", "gtkwave", "-S", str(tcl), str(vcd), str(g)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("DISPLAYED:")), None)
    assert line is not None, r.stdout + r.stderr
    assert set(line.split()[1:]) == set(_gtkw_signals(g)), line
