"""The raw harness's C++ DRAM model (testbench/raw/dram_model.h) on its own, with several read and
write bursts in flight: built with plain g++ around testbench/raw/dram_model_check.cpp (no
Verilator), which checks AR/AW taken every cycle, the pipelined R beats and B responses and
their IDs, cycle for cycle (the cases testbench/dram_model_bench.py runs on dram_model.v)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from testbench.raw.harness import RAW_DIR

# (bus bytes, read latency, write latency): the latency 1 edge, a default-like config, a wide bus
CASES = [(8, 1, 1), (8, 16, 8), (16, 5, 3)]


@pytest.mark.parametrize("bus,rd_lat,wr_lat", CASES, ids=lambda v: str(v))
def test_cpp_dram_model_pipelines_bursts(tmp_path: Path, bus: int, rd_lat: int, wr_lat: int) -> None:
    exe = tmp_path / "dram_model_check"
    cmd = ["g++", "-std=c++17", "-O0", "-Wall", "-Wextra", "-Werror", f"-DRAW_BUS_BYTES={bus}",
           f"-DRAW_RD_LAT={rd_lat}", f"-DRAW_WR_LAT={wr_lat}", "-DRAW_MEM_BYTES=65536u", "-DRAW_MAX_BURST=16",
           f"-I{RAW_DIR}", str(RAW_DIR / "dram_model_check.cpp"), "-o", str(exe)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    res = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("dram_model_check: ok"), res.stdout
