"""The entry points that drive every model: `cosim run`, `cosim sim`, `cosim waves run`.

These run real subprocesses of the `cosim` command on the real Verilator build
(the cocotb fast back-end), exactly as a user would.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hw.toolchain import verilator_env

ROOT = Path(__file__).resolve().parents[1]


def cosim(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cosim.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=verilator_env())


def test_run_golden_json():
    r = cosim("run", "vadd", "--model", "golden", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert {"kernel", "model", "match", "wall_s"} <= set(d) and d["match"] is True and d["model"] == "golden"


def test_run_tlm_json_has_counters():
    r = cosim("run", "vadd", "--model", "tlm", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["match"] is True and d["cycles"] > 0
    for k in ("load_busy", "compute_busy", "store_busy", "dma_rd_bytes", "dma_wr_bytes", "load_insns"):
        assert k in d
    # vadd: A and B, 64 vectors of 16 int32 each, are read; C, 64 x 16 int8, is written.
    assert d["dma_rd_bytes"] == 2 * 64 * 16 * 4 and d["dma_wr_bytes"] == 64 * 16


def test_run_all_json_agrees():
    r = cosim("run", "vadd", "--model", "all", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    assert d["match"] is True
    assert [x["model"] for x in d["results"]] == ["golden", "iss", "tlm", "rtl"]
    iss, tlm, rtl = d["results"][1], d["results"][2], d["results"][3]
    assert iss["cycles"] is None  # the ISS gives data and errors, no time
    assert tlm["cycles"] == rtl["cycles"] > 0
    for k in ("load_insns", "compute_insns", "store_insns", "dma_rd_bytes", "dma_wr_bytes", "fetch_bytes"):
        assert tlm[k] == rtl[k], k


def test_run_program_folder_on_its_own_config(tmp_path):
    out = tmp_path / "prog"
    r = cosim("compile", "vsub_tail", "--config", "small", "-o", str(out))
    assert r.returncode == 0, r.stderr
    r = cosim("run", str(out), "--model", "tlm", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["config"] == "small"


def test_sim_table_small_subset():
    r = cosim("sim", "--config", "small", "--kernels", "vadd", "fused")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all models agree" in r.stdout
    rows = [line for line in r.stdout.splitlines() if line.startswith(("vadd", "fused"))]
    assert len(rows) == 2 and all(" yes " in row for row in rows)
    assert "[1/2] vadd" in r.stderr  # a progress line per kernel


def test_waves_run_writes_both_vcds_and_trace(tmp_path):
    r = cosim("waves", "run", "vadd", "-o", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    for f in ("rtl.vcd", "tlm.vcd", "tlm_trace.json"):
        assert (tmp_path / f).stat().st_size > 0, f
    assert "timelines agree" in r.stdout
    assert json.loads((tmp_path / "tlm_trace.json").read_text())["traceEvents"]
    r = cosim("waves", "show", str(tmp_path / "rtl.vcd"), "dbg_load_busy", "dbg_load_pc", "--from", "0", "--to", "40")
    assert r.returncode == 0, r.stderr
    assert "dbg_load_pc" in r.stdout
    # a GTKWave save file beside each VCD, with the units' groups; GTKWave (where installed) shows all it names
    for f in ("rtl.gtkw", "tlm.gtkw"):
        assert str(tmp_path / f) in r.stdout or (tmp_path / f).is_file(), f
    text = (tmp_path / "rtl.gtkw").read_text()
    for group in ("-clock and probes", "-fetch", "-load", "-compute", "-store", "-token queues", "-AXI"):
        assert group in text.splitlines(), group
    if shutil.which("gtkwave") and shutil.which("xvfb-run"):
        tcl = tmp_path / "q.tcl"
        tcl.write_text('puts "DISPLAYED: [gtkwave::getDisplayedSignals]"\ngtkwave::/File/Quit\n')
        g = subprocess.run(["xvfb-run", "-a", "gtkwave", "-S", str(tcl), str(tmp_path / "rtl.vcd"),
                            str(tmp_path / "rtl.gtkw")], capture_output=True, text=True, timeout=180, cwd=tmp_path)
        shown = next(ln for ln in g.stdout.splitlines() if ln.startswith("DISPLAYED:")).split()[1:]
        named = [ln for ln in text.splitlines() if ln and ln[0] not in "[@-*"]
        assert set(shown) == set(named) and len(named) > 50, (len(shown), len(named))


@pytest.mark.parametrize("model", ["tlm", "rtl"])
def test_fault_is_reported_not_raised(tmp_path, model):
    """A Program whose STORE writes into an input region: the model reports DRAM_RANGE, exit 1."""
    from hw.config import load_config
    from hw.assembler import Assembler
    import numpy as np

    cfg = load_config("default")
    asm = Assembler(cfg, "bad_store")
    a = asm.input("A", np.zeros((1, 16), np.int32))
    asm.output("C", (1, 16), "int8")
    asm.store(a, x=1)  # into the (read-only) input region
    asm.finish()
    prog = asm.program(expected={"C": np.zeros((1, 16), np.int8)})
    d = prog.save(tmp_path / "bad")
    r = cosim("run", str(d), "--model", model, "--json")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    rep = json.loads(r.stdout)
    assert rep["match"] is False and rep["error"]["name"] == "DRAM_RANGE" and rep["error"]["pc"] == 0
