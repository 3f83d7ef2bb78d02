"""The cosim command: help, disasm, and one-line user errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

from hw.config import load_config
from tests.test_program import small_program

COSIM = [sys.executable, "-m", "cosim.cli"]


def cosim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*COSIM, *args], capture_output=True, text=True, timeout=120)


def test_help_lists_subcommands():
    r = cosim("--help")
    assert r.returncode == 0 and "disasm" in r.stdout


def test_disasm_prints_one_line_per_instruction(tmp_path):
    d = small_program(load_config("default")).save(tmp_path / "p")
    r = cosim("disasm", str(d))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 4 and "LOAD" in lines[0] and "FINISH" in lines[3]
    j = json.loads(cosim("disasm", str(d), "--json").stdout)
    assert [i["op"] for i in j["insns"]] == ["LOAD", "ALU", "STORE", "FINISH"]


def test_user_errors_are_one_line_exit_2(tmp_path):
    r = cosim("disasm", str(tmp_path / "missing"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such Program folder" in r.stderr
    assert "Traceback" not in r.stderr
    d = small_program(load_config("small")).save(tmp_path / "p")
    (d / "insn.bin").write_bytes((d / "insn.bin").read_bytes()[:-3])
    r = cosim("disasm", str(d))
    assert r.returncode == 2 and "insn.bin" in r.stderr and "Traceback" not in r.stderr
    d2 = small_program(load_config("small")).save(tmp_path / "p2")
    r = cosim("disasm", str(d2), "--config", "default")
    assert r.returncode == 2 and "made for config 'small'" in r.stderr
    r = cosim("disasm", str(d2), "--config", "nosuch")
    assert r.returncode == 2 and "no such config file" in r.stderr
