"""Hardening: every bad input is one stderr line and exit 2, long Programs run to DONE on
the RTL, and a failing RTL run never writes an unbounded waveform.

Each test runs the real `cosim` command (``cosim.cli.main`` in-process, a few as a real process)
and checks the exit code, that stderr is exactly one line, and the words that name the problem.
The RTL tests use the cocotb fast back-end on the default config (builds shared with the rest
of the suite) and a cheap long ALU loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cosim.cli import main as cosim_main
from hw.config import load_config
from hw.program import Program, ProgramError
from tests.test_program import small_program

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _plain_errors(monkeypatch):
    for var in ("COSIM_DEBUG", "COSIM_TRACEBACK", "COSIM_WAVES_MAX_BYTES"):
        monkeypatch.delenv(var, raising=False)


def cosim(capsys, *args: str) -> tuple[int, str, str]:
    rc = cosim_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line(rc: int, err: str, *words: str) -> None:
    """Exit 2, exactly one stderr line, no traceback, and every word that names the problem."""
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and err.endswith("\n"), err
    assert "Traceback" not in err and "usage:" not in err, err
    for w in words:
        assert w in err, (w, err)


@pytest.fixture
def folder(tmp_path) -> Path:
    """A valid Program folder (C = int8(A + 1) on the default config)."""
    return small_program(load_config("default")).save(tmp_path / "prog")


def edit_json(path: Path, fn) -> None:
    path.write_text(json.dumps(fn(json.loads(path.read_text())), indent=1))


# ---- 3: layouts that do not describe the Program -------------------------------------------------
def test_layout_negative_dimension(capsys, folder):
    def neg(j):
        j["regions"][2]["shape"] = [-4, -16]  # the same element count, so only the sign can catch it
        return j
    edit_json(folder / "layout.json", neg)
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], "layout.json", "region 'C'", "[-4, -16]",
             "positive integer")


def test_layout_bytes_disagree_with_shape_and_dtype(capsys, folder):
    def grow(j):
        j["regions"][1]["dtype"] = "int16"  # 'bytes' still says int32
        return j
    edit_json(folder / "layout.json", grow)
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], "layout.json", "region 'A'", "256 bytes",
             "int16 [4, 16] is 128 bytes")


def test_output_region_moved_away_from_regs(capsys, folder):
    """The output region moved in layout.json only: regs.json's REGION2 window no longer matches."""
    cfg = load_config("default")

    def move(j):
        j["regions"][2]["addr"] += 16 * cfg.region_align
        return j
    edit_json(folder / "layout.json", move)
    rc, _, err = cosim(capsys, "run", folder, "--model", "tlm")
    one_line(rc, err, "regs.json", "REGION2", "layout region 'C'", "different memory")


def test_regs_open_a_window_the_layout_lacks(capsys, folder):
    edit_json(folder / "regs.json", lambda r: dict(r, writes=[{"csr": "REGION5_BASE", "value": 0x8000},
                                                             {"csr": "REGION5_SIZE", "value": 64},
                                                             {"csr": "REGION5_ATTR", "value": 3}] + r["writes"]))
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], "regs.json", "REGION5", "no layout region")


# ---- 4: dram.bin is checked, not ignored -----------------------------------------------------------
def test_truncated_dram_bin(capsys, folder):
    d = folder / "dram.bin"
    d.write_bytes(d.read_bytes()[:-5])
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], "dram.bin", "bytes", "truncated or stale")


def test_stale_dram_bin(capsys, folder):
    d = folder / "dram.bin"
    img = bytearray(d.read_bytes())
    a = Program.load(folder).region("A")
    img[a.addr + 5] ^= 0xFF
    d.write_bytes(bytes(img))
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], "dram.bin", f"0x{a.addr + 5:x}", "region 'A'")


def test_dram_bin_is_the_image_the_models_run(capsys, folder):
    """A folder without dram.bin runs; a saved one is exactly the image every model loads."""
    assert (folder / "dram.bin").read_bytes() == bytes(Program.load(folder).dram_image())
    (folder / "dram.bin").unlink()
    rc, out, err = cosim(capsys, "run", folder, "--model", "tlm")
    assert rc == 0 and err == "" and " ok " in out


@pytest.mark.parametrize("model", ["tlm", "iss"])
def test_a_stale_expected_npz_fails_a_run_without_golden(capsys, tmp_path, model):
    """A kernel's folder whose inputs.npz was changed (dram.bin removed, as its staleness error advises):
    the models are judged against the golden re-run, and the run still fails naming expected.npz."""
    d = tmp_path / "v"
    assert cosim(capsys, "compile", "vadd", "-o", d)[0] == 0
    with np.load(d / "inputs.npz") as z:
        inputs = {k: z[k] for k in z.files}
    np.savez(d / "inputs.npz", **{**inputs, "A": inputs["A"] + 1})
    (d / "dram.bin").unlink()
    rc, out, err = cosim(capsys, "run", d, "--model", model)
    assert rc == 1 and " ok " in out and len(err.strip().splitlines()) == 1, out + err
    assert "expected.npz differs from the golden re-run" in err and "changed since the folder was written" in err, err
    rc, out, err = cosim(capsys, "run", d, "--model", model, "--json")
    rep = json.loads(out)
    assert rc == 1 and rep["match"] is False and rep["expected_check"].startswith("expected.npz differs"), rep


# ---- 5: a register config that never starts the accelerator ----------------------------------------
@pytest.mark.parametrize("model", ["tlm", "rtl", "iss"])
def test_regs_without_start(capsys, folder, model):
    edit_json(folder / "regs.json", lambda r: dict(r, writes=[w for w in r["writes"] if w["csr"] != "CTRL"]))
    one_line(*cosim(capsys, "run", folder, "--model", model)[::2], "regs.json",
             "never starts the accelerator")


def test_regs_soft_reset_after_start(capsys, folder):
    edit_json(folder / "regs.json", lambda r: dict(r, writes=r["writes"] + [{"csr": "CTRL", "value": 2}]))
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], "regs.json", "never starts the accelerator",
             "SOFT_RESET")


def test_models_refuse_a_program_in_memory_without_start():
    """Programs built in memory (not loaded) meet the same words: the RTL refuses one before any
    simulation (it would only time out), the TLM's run() names the problem."""
    from cosim import models

    p = small_program(load_config("default"))
    p.regs = [(n, v) for n, v in p.regs if n != "CTRL"]
    with pytest.raises(ProgramError, match="never starts the accelerator"):
        models.rtl([p])
    with pytest.raises(RuntimeError, match="never starts the accelerator"):
        models.tlm(p)


# ---- one parameter parser: -p through every command ---------------------------------------
@pytest.mark.parametrize("command", [["run", "--model", "golden"], ["run", "--model", "tlm"], ["compile", "-o", "X"]])
@pytest.mark.parametrize("value", ["64", "4x3x33", "4,3,33", "2x1x64"])
def test_one_shape_parser_for_every_command(capsys, tmp_path, command, value):
    cmd = [c if c != "X" else str(tmp_path / "out") for c in command]
    rc, out, err = cosim(capsys, cmd[0], "vadd", *cmd[1:], "-p", f"shape={value}")
    assert rc == 0 and err == "", err


@pytest.mark.parametrize("value", ["0", "-4", "4x0x3", "4xx3", "abc"])
@pytest.mark.parametrize("command", [["run", "--model", "golden"], ["compile", "-o", "X"], ["waves", "run"]])
def test_bad_shapes_are_one_line(capsys, tmp_path, command, value):
    cmd = [c if c != "X" else str(tmp_path / "out") for c in command]
    head = cmd[:2] if cmd[0] == "waves" else cmd[:1]
    rc, _, err = cosim(capsys, *head, "vadd", *cmd[len(head):], "-p", f"shape={value}")
    one_line(rc, err, "param 'shape'", value)


def test_tile_auto(capsys, tmp_path):
    """`-p tile=auto` lets the compiler choose, on every example, through run and compile alike."""
    for name in ("vadd", "fused"):
        rc, out, err = cosim(capsys, "run", name, "-p", "tile=auto", "--model", "tlm")
        assert rc == 0 and " ok " in out, err
    assert cosim(capsys, "compile", "vadd", "-o", tmp_path / "v", "-p", "tile=none")[0] == 0
    one_line(*cosim(capsys, "run", "vadd", "-p", "tile=big", "--model", "golden")[::2], "param 'tile'", "'big'")
    one_line(*cosim(capsys, "run", "vadd", "-p", "shift=3", "--model", "golden")[::2], "has no param 'shift'")
    one_line(*cosim(capsys, "run", "vadd", "-p", "shape", "--model", "golden")[::2], "'shape'", "KEY=VALUE")


def test_real_params(capsys):
    """A real-valued parameter (requant_real's scale) takes 0.5 or 1e-3; anything else is one line."""
    for v in ("0.5", "1e-3"):
        rc, out, err = cosim(capsys, "run", "requant_real", "-p", f"scale={v}", "--model", "tlm")
        assert rc == 0 and " ok " in out, err
    one_line(*cosim(capsys, "run", "requant_real", "-p", "scale=abc", "--model", "golden")[::2], "param 'scale'",
             "'abc' is not a number")
    one_line(*cosim(capsys, "run", "requant_real", "-p", "scale=1e9", "--model", "golden")[::2], "'scale'",
             "[2**-32, 2**15]")


@pytest.mark.parametrize("shape", ["99999999999", "99999x99999x99999x99999x99999", "1000x1000x8"])
def test_huge_shape_is_refused_before_allocating(capsys, tmp_path, shape):
    rc, _, err = cosim(capsys, "compile", "vadd", "-o", tmp_path / "x", "-p", f"shape={shape}")
    one_line(rc, err, "param 'shape'", "bytes of DRAM", "config 'default' has 16,777,216")
    assert not (tmp_path / "x").exists()


def test_program_folder_takes_no_params(capsys, folder):
    one_line(*cosim(capsys, "run", folder, "-p", "shape=4", "--model", "tlm")[::2], "Program folder",
             "no -p parameters")
    one_line(*cosim(capsys, "run", folder, "--seed", "3", "--model", "tlm")[::2], "Program folder runs its own "
             "inputs (inputs.npz)")


# ---- 8, 9: user kernels -------------------------------------------------------------------------------
KERNELS = textwrap.dedent('''
    from compiler import S


    def _deeper(n):
        return _deeper(n + 1)


    @S.kernel
    def boom(X, Y, kind="runtime"):
        n = X.nvec
        S.load(S.acc[0:n], X)
        if kind == "runtime":
            raise RuntimeError("the kernel gave up")
        if kind == "zero":
            n = n // 0
        if kind == "type":
            n = len(n)
        if kind == "attr":
            S.lod(S.acc[0:n], X)
        if kind == "assert":
            assert n > 1000
        if kind == "recursion":
            _deeper(0)
        if kind == "key":
            n = {}["missing_key"]
        S.store(Y, S.acc[0:n])


    @S.kernel
    def copy(X, Y):
        n = X.nvec
        S.load(S.acc[0:n], X)
        S.store(Y, S.acc[0:n])
''')
RAISES = {"runtime": ("RuntimeError", "the kernel gave up"), "zero": ("ZeroDivisionError", "by zero"),
          "type": ("TypeError", "len()"), "attr": ("AttributeError", "'lod'"), "assert": ("AssertionError", ""),
          "recursion": ("RecursionError", "maximum recursion depth"), "key": ("KeyError", "'missing_key'")}


@pytest.fixture
def kernels(tmp_path) -> Path:
    f = tmp_path / "kern.py"
    f.write_text(KERNELS)
    return f


def _line_of(f: Path, kind: str) -> int:
    """The line of the kernel that raises for ``kind`` (the one after ``if kind == ...``)."""
    lines = f.read_text().splitlines()
    if kind == "recursion":  # the innermost line of the file: where the recursion overflowed
        return next(k for k, t in enumerate(lines, 1) if "return _deeper(n + 1)" in t)
    return next(k for k, t in enumerate(lines, 1) if f'if kind == "{kind}"' in t) + 1


@pytest.mark.parametrize("kind", list(RAISES))
@pytest.mark.parametrize("command", ["run", "compile"])
def test_kernel_exception_is_one_line(capsys, tmp_path, kernels, kind, command):
    extra = ["--model", "golden"] if command == "run" else ["-o", str(tmp_path / "out")]
    rc, _, err = cosim(capsys, command, f"{kernels}:boom", "-p", "X=4x16", "-p", "Y=4x16:int8", "-p",
                       f"kind={kind}", *extra)
    exc, text = RAISES[kind]
    one_line(rc, err, "kernel 'boom'", f"{kernels}:{_line_of(kernels, kind)}", f"raised {exc}", text)


def test_traceback_on_request(capsys, kernels, monkeypatch):
    args = ["run", f"{kernels}:boom", "-p", "X=4x16", "-p", "Y=4x16:int8", "-p", "kind=zero", "--model", "golden"]
    for how in ("flag", "env"):
        if how == "env":
            monkeypatch.setenv("COSIM_TRACEBACK", "1")
        rc, _, err = cosim(capsys, *args, *(["--traceback"] if how == "flag" else []))
        lines = err.strip().splitlines()
        assert rc == 2 and "Traceback" in err and "n = n // 0" in err, err
        assert lines[-1].startswith("cosim run: error: kernel 'boom'")


@pytest.mark.parametrize("spec, words", [("37x16:int9", ["param 'X'", "unknown data type 'int9'", "int8"]),
                                         ("37x16:float32", ["param 'X'", "'float32'"]),
                                         ("37x0", ["param 'X'", "dimension <= 0"]),
                                         ("99999999x99999", ["kernel 'copy'", "bytes of DRAM"])])
def test_user_tensor_params(capsys, tmp_path, kernels, spec, words):
    for command, extra in (("run", ["--model", "golden"]), ("compile", ["-o", str(tmp_path / "o")])):
        rc, _, err = cosim(capsys, command, f"{kernels}:copy", "-p", f"X={spec}", "-p", "Y=37x16:int8", *extra)
        one_line(rc, err, *words)
    rc, out, err = cosim(capsys, "run", f"{kernels}:copy", "-p", "X=37x16:int32", "-p", "Y=37x16:int8",
                         "--model", "tlm")
    assert rc == 0, err


@pytest.mark.parametrize("spec", ["X=\u0663\u0667x16:int32", "X=37x16:int32 N=\u0664"])
def test_digits_of_other_scripts_are_refused(capsys, kernels, spec):
    """int() and the regex \\d read digits of any script; a parameter is written with 0-9 (as --var is)."""
    items = [a for kv in spec.split() for a in ("-p", kv)]
    rc, _, err = cosim(capsys, "run", f"{kernels}:copy", *items, "-p", "Y=37x16:int8", "--model", "golden")
    one_line(rc, err, "has a digit that is not 0-9")
    one_line(*cosim(capsys, "run", "vadd", "-p", "shape=\u0664\u0664", "--model", "golden")[::2], "param 'shape'",
             "not 0-9")


def test_kernel_file_that_fails_to_import(capsys, tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("x = 1\ny = x / 0\n")
    one_line(*cosim(capsys, "run", f"{f}:k", "--model", "golden")[::2], "import failed", "ZeroDivisionError",
             f"{f}:2")


# ---- 10: corrupt .npz files, missing folders ---------------------------------------------------------
@pytest.mark.parametrize("name", ["inputs.npz", "expected.npz"])
@pytest.mark.parametrize("corruption", ["garbage", "truncated", "object"])
def test_corrupt_npz_names_the_file(capsys, folder, name, corruption):
    f = folder / name
    if corruption == "garbage":
        f.write_bytes(b"\x80\x04this is not a zip file")  # starts like a pickle: numpy would try one
    elif corruption == "truncated":
        f.write_bytes(f.read_bytes()[:100])
    else:
        np.savez(f, **{("A" if name == "inputs.npz" else "C"): np.array([object(), 1], dtype=object)})
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], name)


def test_missing_folder_is_not_an_unknown_example(capsys, tmp_path):
    rc, _, err = cosim(capsys, "run", tmp_path / "no" / "such", "--model", "tlm")
    one_line(rc, err, "no such Program folder")
    assert "examples:" not in err
    rc, _, err = cosim(capsys, "run", "vad", "--model", "tlm")  # no slash: a mistyped example name
    one_line(rc, err, "unknown example 'vad'", "vadd")


def test_system_errors_name_the_path_without_errno(capsys, tmp_path):
    """An OSError from the system reads "PATH: reason", not Python's "[Errno N] reason: 'PATH'"."""
    existing = tmp_path / "a_file"
    existing.write_text("")
    rc, _, err = cosim(capsys, "compile", "vadd", "-o", existing)
    one_line(rc, err, f"{existing}: a file, where a folder is needed")
    under_a_file = existing / "prog"
    rc, _, err = cosim(capsys, "compile", "vadd", "-o", under_a_file)
    one_line(rc, err, f"{under_a_file}: Not a directory")
    assert "Errno" not in err


# ---- 11: argparse errors ---------------------------------------------------------------------------
@pytest.mark.parametrize("args, words", [
    (["run", "vadd", "--model", "bogus"], ["cosim run", "invalid choice: 'bogus'", "--help"]),
    (["run"], ["cosim run", "required: kernel"]),
    (["compile", "vadd"], ["cosim compile", "-o/--out"]),
    (["waves", "show", "x.vcd"], ["cosim waves show", "required"]),
    (["run", "vadd", "--seed", "x"], ["--seed", "expected a non-negative integer", "'x'"]),
    (["run", "vadd", "--waves-window", "5:3"], ["--waves-window", "FIRST <= LAST"]),
    (["run", "vadd", "--watchdog", "0"], ["--watchdog", "expected a positive integer"]),
    (["run", "vadd", "--seed", "1_0"], ["--seed", "expected a non-negative integer", "'1_0'"]),
    (["run", "vadd", "--seed", "\uff15"], ["--seed", "expected a non-negative integer"]),
    (["nosuch"], ["cosim", "invalid choice: 'nosuch'"]),
    (["--bogus"], ["unrecognized arguments: --bogus"]),
])
def test_argparse_errors_are_one_line(capsys, args, words):
    rc, out, err = cosim(capsys, *args)
    one_line(rc, err, *words)
    assert out == ""


def test_help_still_shows_the_usage(capsys):
    rc, out, _ = cosim(capsys, "run", "--help")
    assert rc == 0 and out.startswith("usage: cosim run") and "--traceback" in out


@pytest.mark.parametrize("args", [["run", "vadd", "--model", "bogus"], ["run", "vadd", "-p", "shape=-4"],
                                  ["compile", "vadd", "-o", "/tmp/x", "-p", "shape=99999999999"]])
def test_real_process_one_line(args):
    r = subprocess.run([sys.executable, "-m", "cosim.cli", *args], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr


# ---- 1, 2: the RTL watchdog follows the Program; a failing run's waves are bounded ----------------------
def long_alu_program(cfg, iter_out: int, iter_in: int) -> Program:
    """LOAD one vector, ADD 1 to it iter_out x iter_in times (one ALU instruction, as many cycles), STORE."""
    from hw.assembler import Assembler

    L = cfg.lanes
    a = np.arange(L, dtype=np.int32).reshape(1, L) * 3
    asm = Assembler(cfg, "long_alu")
    src, dst = asm.input("a", a), asm.output("c", (1, L))
    asm.load(src, x=1, push_next=True)
    asm.alu("ADD", imm=1, iter_out=iter_out, iter_in=iter_in, pop_prev=True, push_next=True)
    asm.store(dst, x=1, pop_prev=True)
    asm.finish()
    expected = (a.astype(np.int64) + iter_out * iter_in).astype(asm.out_dtype)
    return asm.program(expected={"c": expected})


def test_watchdog_has_no_fixed_cap():
    """A Program of one ALU instruction of 8000 x 8000 iterations (64,000,030 cycles on the TLM and
    the RTL) was stopped by a fixed 50 M-cycle watchdog; the bound now follows the Program, on every config."""
    from testbench.memimg import watchdog_cycles

    for name in ("default", "small"):
        cfg = load_config(name)
        p = long_alu_program(cfg, 8000, 8000)
        assert watchdog_cycles(p) > 64_000_030 and watchdog_cycles(p, "protocol") > 8 * 64_000_000
        longest = long_alu_program(cfg, (1 << 14) - 1, (1 << 14) - 1)  # the largest ALU loop the ISA encodes
        assert watchdog_cycles(longest) > ((1 << 14) - 1) ** 2


def _rtl_missing() -> str | None:
    from cosim.models import rtl_available

    return rtl_available()


@pytest.mark.skipif(_rtl_missing() is not None, reason="no RTL")
def test_long_program_runs_to_done_and_failing_waves_stay_bounded(capsys, tmp_path, monkeypatch):
    """A 2 M-cycle Program runs to DONE on the RTL under its own watchdog; the same Program stopped by a
    lowered watchdog fails, and the traced re-run writes only the last 10,000 cycles, under the cap, and
    says so; a whole-run trace (--waves) with a lower cap (COSIM_WAVES_MAX_BYTES) is cut at it."""
    from cosim import models
    from cosim.commands.run import FAILURE_WINDOW_CYCLES
    from testbench.memimg import watchdog_cycles
    from testbench.rtl_model import WAVES_MAX_BYTES

    cfg = load_config("default")
    p = long_alu_program(cfg, 2000, 1000)
    d = p.save(tmp_path / "long")
    rc, out, err = cosim(capsys, "run", d, "--model", "rtl", "--json")
    r = json.loads(out)
    assert rc == 0 and r["match"] and r["error"] is None, out + err
    assert 2_000_000 < r["cycles"] < watchdog_cycles(p)

    limit = 300_000
    rc, out, err = cosim(capsys, "run", d, "--model", "rtl", "--watchdog", limit)
    assert rc == 1 and "TIMEOUT" in out and "error TIMEOUT" in out, out
    # one error line; a "waiting for <build>" notice may come first when another run holds the build (xdist)
    assert [ln for ln in err.splitlines() if not ln.startswith("waiting for ")] == [
        f"cosim run: long_alu: TIMEOUT on the RTL (no DONE (irq) within {limit} cycles); raise "
        f"the bound with --watchdog CYCLES"], err
    vcd = models.build_root() / "mismatch" / "long_alu-default" / "rtl.vcd"  # beside --waves' files
    size = vcd.stat().st_size
    assert 0 < size <= WAVES_MAX_BYTES
    first = limit - FAILURE_WINDOW_CYCLES
    assert f"waveform: {vcd}" in out and f"cycles {first}..{limit} after START" in out and "MB" in out, out
    head, _, body = vcd.read_bytes().partition(b"$enddefinitions")
    assert b"dbg_compute_pc" in head and not body.lstrip(b" $end\n").startswith(b"#0\n")  # the window, not reset

    # --waves traces the failing run itself, from reset: the cap cuts it (and the run still ends as before)
    cap = 2_000_000
    monkeypatch.setenv("COSIM_WAVES_MAX_BYTES", str(cap))
    rc, out, err = cosim(capsys, "run", d, "--model", "rtl", "--watchdog", limit, "--waves", "--json")
    r = json.loads(out)
    assert rc == 1 and r["error"]["name"] == "TIMEOUT" and r["cycles"] > limit
    w = r["waves"]
    assert w["capped"] and w["max_bytes"] == cap and w["from_cycle"] < 0 < w["to_cycle"] < limit
    full = Path(r["vcd"])
    assert 0 < full.stat().st_size <= cap and full.read_bytes().endswith(b"\n")


def test_long_failing_tlm_run_writes_no_unbounded_timeline(tmp_path, monkeypatch):
    """The TLM's timeline VCD cannot be windowed (it grows with instructions): a failing TLM run of
    a Program over the bound gets a note instead of a file (a short one still gets its VCD)."""
    import argparse

    from cosim import models
    from cosim.commands import run as run_cmd

    monkeypatch.chdir(tmp_path)
    job = models.make_job(str(small_program(load_config("default")).save(tmp_path / "p")), None)
    args = argparse.Namespace(vcd=None, waves_window=None, mem="fast", sim="verilator", watchdog=None)
    monkeypatch.setattr(run_cmd, "TLM_FAILURE_VCD_MAX_INSNS", len(job.program.insns) - 1)
    r = {"model": "tlm", "cycles": 100}
    run_cmd._trace_failure(job, r, args)
    assert "vcd" not in r and "not written" in r["waves_note"] and not (tmp_path / "build").exists()
    monkeypatch.setattr(run_cmd, "TLM_FAILURE_VCD_MAX_INSNS", len(job.program.insns))
    r = {"model": "tlm", "cycles": 100}
    run_cmd._trace_failure(job, r, args)
    assert Path(r["vcd"]).is_file()


@pytest.mark.long("the only user of the protocol back-end's waves build (a Verilator build of its own)")
@pytest.mark.skipif(_rtl_missing() is not None, reason="no RTL")
def test_protocol_back_end_waves_are_windowed_and_capped(capsys, tmp_path, monkeypatch):
    """The protocol back-end (cocotb's GPI clock) traces through the fast main's bounded window too: a
    failing run's re-run writes only the cycles before the failure, and a --waves run from reset is cut
    exactly at a cap smaller than the VCD's header, with the sizes and the true cap in the note."""
    from cosim.commands import run as run_cmd

    cfg = load_config("default")
    p = long_alu_program(cfg, 30, 100)
    p.expected = {k: (v + 1).astype(v.dtype) for k, v in p.expected.items()}  # a data mismatch at the end
    d = p.save(tmp_path / "long")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run_cmd, "FAILURE_WINDOW_CYCLES", 300)
    rc, out, err = cosim(capsys, "run", d, "--model", "rtl", "--mem", "protocol", "--json")
    r = json.loads(out)
    w, end = r["waves"], r["run_sim_cycles"]
    assert rc == 1 and r["mismatch"] and end > 3000, out + err
    assert w["from_cycle"] == end - 300 and end <= w["to_cycle"] <= end + 16 and not w["capped"], w
    assert 0 < Path(r["vcd"]).stat().st_size <= w["max_bytes"]

    cap = 100_000
    monkeypatch.setenv("COSIM_WAVES_MAX_BYTES", str(cap))
    rc, out, err = cosim(capsys, "run", "vadd", "--model", "rtl", "--mem", "protocol", "--waves")
    from testbench.rtl_model import build_root

    vcd = build_root() / "waves" / "vadd-default-protocol.vcd"
    assert rc == 0, out + err  # the cap cuts the file, not the run
    assert 0 < vcd.stat().st_size <= cap
    assert "cut at the 100.0 KB cap" in out and "KB" in out and "MiB" not in out and "None" not in out, out


# ---- review item 2: the type of every field of a folder's JSON -------------------------------------------
def _set_region(k: int, key: str, value):
    def edit(j):
        j["regions"][k][key] = value
        return j
    return edit


def _set_write(key: str, value):
    def edit(j):
        j["writes"][0][key] = value
        return j
    return edit


@pytest.mark.parametrize("file, edit, words", [
    ("layout.json", lambda j: j["regions"], ["layout.json", "must be a JSON object", "not a list"]),
    ("layout.json", lambda j: {**j, "meta": [1]}, ["layout.json", "'meta' must be a JSON object"]),
    ("layout.json", lambda j: {**j, "program": 5}, ["layout.json", "'program' must be a JSON string"]),
    ("layout.json", lambda j: {**j, "config_id": 7}, ["layout.json", "'config_id' must be a JSON string"]),
    ("layout.json", lambda j: {**j, "regions": {}}, ["layout.json", "'regions' must be a JSON list"]),
    ("layout.json", _set_region(1, "shape", [64.7]), ["layout.json", "region 1 ('A')", "'shape'", "64.7"]),
    ("layout.json", _set_region(1, "shape", ["64"]), ["layout.json", "region 1 ('A')", "'shape'", "'64'"]),
    ("layout.json", _set_region(1, "shape", [True, 64]), ["layout.json", "'shape'", "True"]),
    ("layout.json", _set_region(1, "shape", "64"), ["layout.json", "'shape' must be a JSON list"]),
    ("layout.json", _set_region(1, "addr", 640.5), ["layout.json", "'addr' must be a JSON integer", "640.5"]),
    ("layout.json", _set_region(1, "name", 3), ["layout.json", "region 1", "'name' must be a JSON string"]),
    ("layout.json", _set_region(1, "bytes", "256"), ["layout.json", "'bytes' must be a JSON integer"]),
    ("regs.json", _set_write("csr", [1]), ["regs.json", "write 0", "'csr' must be a CSR name", "[1]"]),
    ("regs.json", _set_write("addr", "x"), ["regs.json", "write 0", "'addr' must be a JSON integer", "'x'"]),
    ("regs.json", _set_write("addr", [1]), ["regs.json", "'addr' must be a JSON integer"]),
    ("regs.json", _set_write("addr", -4), ["regs.json", "write 0", "gives address -0x4", "the map says 0x"]),
])
def test_folder_json_field_types(capsys, folder, file, edit, words):
    edit_json(folder / file, edit)
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], *words)


@pytest.mark.parametrize("file", ["layout.json", "regs.json"])
def test_folder_json_not_utf8(capsys, folder, file):
    (folder / file).write_bytes(b'{"config": "\xff\xfe"}')
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], file, "not UTF-8", "0xff")


@pytest.mark.parametrize("file, key", [("layout.json", "regions"), ("layout.json", "meta"), ("regs.json", "writes")])
def test_folder_json_with_a_key_given_twice(capsys, folder, file, key):
    """A key given twice (json would keep the last silently) is refused, as in a config file."""
    text = (folder / file).read_text().rstrip()
    j = json.loads(text)
    (folder / file).write_text(text[:-1] + f', "{key}": {json.dumps(j[key])}}}')
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], file, f"key '{key}' is given twice")


def test_missing_inputs_npz_beside_dram_bin_is_named(capsys, folder):
    """inputs.npz removed while dram.bin stays: the missing inputs are the news, not a stale dram.bin."""
    (folder / "inputs.npz").unlink()
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], "no data for input region(s) 'A'",
             "no inputs.npz")


# ---- review items 3, 5: bounded integer options that name themselves ------------------------------------------
@pytest.mark.parametrize("args, words", [
    (["run", "vadd", "--waves-window", "1:99999999999999999999"], ["--waves-window", "too large", "cycles"]),
    (["run", "vadd", "--watchdog", "99999999999999999999"], ["--watchdog", "too large", "1,000,000,000,000"]),
    (["run", "vadd", "--seed", "-1"], ["--seed", "expected a non-negative integer", "'-1'"]),
    (["run", "vadd", "--seed", "99999999999999999999"], ["--seed", "too large"]),
    (["compile", "vadd", "-o", "X", "--seed", "-1"], ["--seed", "expected a non-negative integer"]),
    (["fuzz", "--count", "0"], ["--count", "expected a positive integer"]),
    (["fuzz", "--fault-rate", "1.5"], ["--fault-rate", "probability"]),
    (["fuzz", "--fault-rate", "nan"], ["--fault-rate", "probability"]),
    (["fuzz", "--batch", "-3"], ["--batch", "expected a positive integer"]),
    (["bench", "--protocol-max-cycles", "-5"], ["--protocol-max-cycles", "expected a positive integer"]),
    (["bench", "--reps", "0"], ["--reps", "expected a positive integer"]),
    (["waves", "run", "vadd", "--window", "0"], ["--window", "expected a positive integer"]),
])
def test_integer_options_are_bounded_and_named(capsys, args, words):
    rc, out, err = cosim(capsys, *args)
    one_line(rc, err, *words)
    assert out == ""


def test_fuzz_options_that_would_do_nothing_or_fail_late_are_one_line(capsys, tmp_path):
    """--save-dir that is a file (it used to lose the chunk of its first failing case, and the mismatch
    with it), --no-shrink without --save-dir, --batch without --rtl: refused before any case runs."""
    f = tmp_path / "notes.txt"
    f.write_text("the user's notes\n")
    for args, words in ((["--save-dir", str(f)], ["--save-dir", "is a file, not a folder"]),
                        (["--save-dir", str(f / "sub")], ["--save-dir", "cannot make the folder"]),
                        (["--no-shrink"], ["--no-shrink goes with --save-dir"]),
                        (["--batch", "7"], ["--batch goes with --rtl"])):
        rc, out, err = cosim(capsys, "fuzz", "--count", "1", "--quiet", *args)
        one_line(rc, err, *words)
    assert f.read_text() == "the user's notes\n"


def test_fuzz_cases_of_a_failed_task_are_counted_as_not_run(capsys):
    """A task over its time bound: its cases are errors, and the summary says they did not run (it read as
    if every case ran, none with a fault)."""
    rc, out, err = cosim(capsys, "fuzz", "--count", "60", "--chunk", "30", "--task-timeout", "0.01", "--quiet")
    assert rc == 1 and "0 run, 60 did not run" in out and "60 errors" in out, out + err


# ---- review item 4: kernels that exit or raise oddly, other exceptions of the tools -----------------------
ODD = textwrap.dedent('''
    import sys

    from compiler import S


    class Bye(BaseException):
        pass


    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no text")


    @S.kernel
    def odd(X, Y, kind="exit0"):
        n = X.nvec
        S.load(S.acc[0:n], X)
        if kind == "exit0":
            sys.exit(0)
        if kind == "exit3":
            sys.exit(3)
        if kind == "exitbye":
            sys.exit("bye")
        if kind == "base":
            raise Bye()
        if kind == "genexit":
            raise GeneratorExit()
        if kind == "unprintable":
            raise Unprintable()
        S.store(Y, S.acc[0:n])


    class NotAKernel:
        pass
''')
ODD_WORDS = {"exit0": "called sys.exit(0)", "exit3": "called sys.exit(3)", "exitbye": "called sys.exit('bye')",
             "base": "raised Bye", "genexit": "raised GeneratorExit", "unprintable": "raised Unprintable"}


@pytest.mark.parametrize("kind", list(ODD_WORDS))
def test_kernel_that_exits_or_raises_oddly(capsys, tmp_path, kind):
    f = tmp_path / "odd.py"
    f.write_text(ODD)
    rc, out, err = cosim(capsys, "run", f"{f}:odd", "-p", "X=4x16", "-p", "Y=4x16:int8", "-p", f"kind={kind}",
                         "--model", "golden")
    one_line(rc, err, "kernel 'odd'", f"{f}:{_line_of(f, kind)}", ODD_WORDS[kind])
    assert out == ""


def test_class_instead_of_kernel(capsys, tmp_path):
    f = tmp_path / "odd.py"
    f.write_text(ODD)
    one_line(*cosim(capsys, "run", f"{f}:NotAKernel", "--model", "golden")[::2], "'NotAKernel' is a class",
             "not a kernel function")


def test_kernel_file_that_exits_on_import(capsys, tmp_path):
    f = tmp_path / "exits.py"
    f.write_text("import sys\nsys.exit(0)\n")
    one_line(*cosim(capsys, "run", f"{f}:k", "--model", "golden")[::2], "import failed", "sys.exit(0)", f"{f}:2")


def test_missing_simulator_is_one_line(tmp_path):
    """A PATH with no tool at all (no make, no C++ compiler: no Verilator build possible) and an empty build
    folder: one line, exit 2, as a real process."""
    env = {"PATH": str(tmp_path / "empty-bin"), "HOME": str(tmp_path), "COSIM_BUILD_DIR": str(tmp_path / "b")}
    r = subprocess.run([sys.executable, "-m", "cosim.cli", "run", "vadd", "--model", "rtl"], capture_output=True,
                       text=True, timeout=300, cwd=ROOT, env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr and "cosim run: error:" in r.stderr, r.stderr


def test_internal_error_is_one_line_with_its_own_exit(capsys, monkeypatch):
    from cosim import models

    def broken(*a, **k):
        raise RuntimeError("a bug\nwith a second line")
    monkeypatch.setattr(models, "run_tlm", broken)
    rc, out, err = cosim(capsys, "run", "vadd", "--model", "tlm")
    assert rc == 3 and err.strip() == ("cosim run: internal error: RuntimeError: a bug (--traceback or "
                                       "COSIM_TRACEBACK=1 shows where)"), err

    def exits(*a, **k):
        raise SystemExit(0)
    monkeypatch.setattr(models, "run_tlm", exits)
    rc, out, err = cosim(capsys, "run", "vadd", "--model", "tlm")
    assert rc == 3 and len(err.strip().splitlines()) == 1 and "sys.exit(0)" in err, err


# ---- review item 6: folders that load but do not describe one runnable, checkable Program -----------------
def _npz_without(path: Path, name: str) -> None:
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files if k != name}
    path.unlink()
    np.savez(path, **arrays)


def test_inputs_npz_missing_an_input(capsys, folder):
    _npz_without(folder / "inputs.npz", "A")
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], "inputs.npz", "no array for input region",
             "'A'")


def test_no_inputs_npz_names_the_inputs(capsys, folder):
    (folder / "inputs.npz").unlink()
    (folder / "dram.bin").unlink()
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], "'A'", "no inputs.npz", "cannot be run")


@pytest.mark.parametrize("how, words", [
    ("extra", ["expected.npz", "'Z'", "no output region"]),
    ("missing", ["expected.npz", "no array for output region", "'C'"]),
    ("shape", ["expected.npz", "array 'C'", "[2, 32]", "[4, 16]"]),
    ("dtype", ["expected.npz", "array 'C'", "int32", "int8"]),
])
def test_expected_npz_must_match_the_outputs(capsys, folder, how, words):
    f = folder / "expected.npz"
    with np.load(f) as z:
        c = z["C"]
    arrays = {"extra": {"C": c, "Z": c}, "missing": {}, "shape": {"C": c.reshape(2, 32)},
              "dtype": {"C": c.astype(np.int32)}}[how]
    f.unlink()
    np.savez(f, **arrays)
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], *words)


def test_no_expected_npz_is_not_a_match(capsys, folder):
    (folder / "expected.npz").unlink()
    rc, out, err = cosim(capsys, "run", folder, "--model", "tlm", "--json")
    r = json.loads(out)
    assert rc == 0 and err == "" and r["match"] is None and "no expected outputs" in r["compared"], out + err
    rc, out, err = cosim(capsys, "run", folder, "--model", "golden")
    assert rc == 0 and "unchecked" in out and " ok " not in out, out


@pytest.mark.parametrize("csr_name, value, words", [("INSN_COUNT", 1, ["INSN_COUNT 1", "instruction region"]),
                                                    ("INSN_ADDR_LO", 64, ["INSN_ADDR 0x40", "instruction region"])])
def test_insn_regs_agree_with_the_layout(capsys, folder, csr_name, value, words):
    def edit(j):
        for w in j["writes"]:
            if w["csr"] == csr_name:
                w["value"] = value
        return j
    edit_json(folder / "regs.json", edit)
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], "regs.json", *words)


def test_dram_bin_that_is_a_directory(capsys, folder):
    (folder / "dram.bin").unlink()
    (folder / "dram.bin").mkdir()
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], "dram.bin", "not a regular file")


@pytest.mark.parametrize("key, value, words", [("config", "small", ["regs.json", "'small'", "'default'"]),
                                              ("config_id", "0x12345678", ["regs.json", "0x12345678"])])
def test_regs_config_agrees_with_layout(capsys, folder, key, value, words):
    edit_json(folder / "regs.json", lambda j: {**j, key: value})
    one_line(*cosim(capsys, "run", folder, "--model", "tlm")[::2], *words)


def test_bare_example_name_beats_a_folder_of_that_name(capsys, tmp_path, monkeypatch):
    small_program(load_config("default")).save(tmp_path / "vadd")
    monkeypatch.chdir(tmp_path)
    rc, out, _ = cosim(capsys, "run", "vadd", "--model", "golden", "--json")
    assert rc == 0 and json.loads(out)["kernel"] == "vadd"  # the example
    rc, out, _ = cosim(capsys, "run", "./vadd", "--model", "golden", "--json")
    assert rc == 0 and json.loads(out)["kernel"] != "vadd"  # the folder (its Program's own name)
    rc, out, _ = cosim(capsys, "run", "--help")
    assert "./NAME" in out


# ---- review item 7: commands without a subcommand, stray arguments, empty names --------------------------
@pytest.mark.parametrize("args, words", [
    ([], ["cosim: error: a command is required (see cosim --help)"]),
    (["waves"], ["cosim waves: error: a command is required (see cosim waves --help)"]),
    (["rtl"], ["cosim rtl: error: a command is required"]),
    (["list", "extra"], ["cosim list: error: unrecognized arguments: extra"]),
    (["rtl", "docs", "-o", "x", "--bogus"], ["cosim rtl docs: error: unrecognized arguments: --bogus"]),
    (["compile", "vadd", "-o", ""], ["cosim compile", "-o/--out", "empty"]),
    (["compile", "vadd", "-o", "  "], ["cosim compile", "-o/--out", "empty"]),
])
def test_commands_need_a_subcommand_and_name_stray_arguments(capsys, args, words):
    rc, out, err = cosim(capsys, *args)
    one_line(rc, err, *words)
    assert out == ""


# ---- review item 8: a saved fuzz case replays, and checks what it expects ------------------------------------
def _saved_fault_case(tmp_path) -> Path:
    from cosim.fuzz.campaign import make_case, save_failure

    cfg = load_config("small")
    case = next(c for c in (make_case(cfg, 1, i, 1.0) for i in range(40)) if c.kind != "valid")
    case.problems = ["tlm vs rtl: made up for the test"]
    return save_failure(case, None, tmp_path, 1, 1.0, rtl=False)


def test_fuzz_case_replays_and_checks_its_expectation(capsys, tmp_path):
    d = _saved_fault_case(tmp_path)
    info = json.loads((d / "fuzz.json").read_text())
    assert info["rerun"] == f"cosim fuzz --replay {d}" and info["orig"]["expect"]["name"], info
    rc, out, err = cosim(capsys, *info["rerun"].split()[1:], "--json")
    r = json.loads(out)
    assert rc == 0 and not r["still_fails"] and r["got"] == info["orig"]["expect"], out + err

    edit_json(d / "fuzz.json", lambda j: {**j, "orig": {**j["orig"], "expect": {"name": "X", "code": 99, "pc": 0}}})
    rc, out, err = cosim(capsys, "fuzz", "--replay", d)
    assert rc == 1 and "still fails" in out and "reference: expected" in out, out + err


@pytest.mark.parametrize("edit, words", [(lambda j: [j], ["fuzz.json", "JSON object"]),
                                         (lambda j: {**j, "index": "3"}, ["fuzz.json", "'index'"]),
                                         (lambda j: {**j, "generator_seed": 5}, ["fuzz.json", "different case"]),
                                         (lambda j: {**j, "index": -5}, ["fuzz.json", "'index'", "non-negative"]),
                                         (lambda j: {**j, "steer": {"empty": [1, "x", None]}},
                                          ["fuzz.json", "'steer'", "bin names"]),
                                         (lambda j: {**j, "orig": 5}, ["fuzz.json", "'orig' must be an object"]),
                                         (lambda j: {**j, "rtl": "no"}, ["fuzz.json", "'rtl' must be true or false"]),
                                         (lambda j: {**j, "rtl_mem": "ddr"}, ["fuzz.json", "'rtl_mem'"]),
                                         (lambda j: {**j, "rtl_mem": "protocol" if j["rtl_mem"] == "fast" else "fast"},
                                          ["fuzz.json", "saved for", "campaign changed"])])
def test_fuzz_replay_of_a_bad_fuzz_json(capsys, tmp_path, edit, words):
    d = _saved_fault_case(tmp_path)
    edit_json(d / "fuzz.json", edit)
    one_line(*cosim(capsys, "fuzz", "--replay", d)[::2], *words)


def test_fuzz_replay_of_a_fuzz_json_cut_short_names_line_and_column(capsys, tmp_path):
    d = _saved_fault_case(tmp_path)
    text = (d / "fuzz.json").read_text()
    (d / "fuzz.json").write_text(text[:text.index("\n", 3) + 1] + '  "index": ,\n}')
    one_line(*cosim(capsys, "fuzz", "--replay", d)[::2], "fuzz.json:3:12: not valid JSON (Expecting value)")


@pytest.mark.parametrize("extra", [["--count", "5"], ["--rtl"], ["--workers", "2"], ["--config", "small"]])
def test_fuzz_replay_refuses_a_campaign_s_options(capsys, tmp_path, extra):
    """The case comes from fuzz.json: an option of a campaign would be silently ignored."""
    d = _saved_fault_case(tmp_path)
    one_line(*cosim(capsys, "fuzz", "--replay", d, *extra)[::2], "--replay takes its case from fuzz.json",
             f"{extra[0]} does not go with it")


# ---- folders and files that are not what they claim ---------------------------------------------------
@pytest.mark.parametrize("source", ["shutil:rmtree", "os:abort", "this:s", "no_such_module_x:f"])
def test_layout_cannot_name_a_module_of_the_installation_as_the_kernel(capsys, tmp_path, source):
    """The golden re-run imports the kernel a layout.json records: a module of the standard library or
    site-packages is refused before it is imported (nothing is deleted, nothing aborts)."""
    d = tmp_path / "vadd"
    assert cosim(capsys, "compile", "vadd", "-o", d)[0] == 0
    victim = tmp_path / "victim"
    victim.mkdir()

    def retarget(j):
        j["meta"].update(source=source, args={}, consts={"path": str(victim)})
        return j
    edit_json(d / "layout.json", retarget)
    rc, out, err = cosim(capsys, "run", d, "--model", "golden")
    assert rc == 0 and victim.is_dir(), err
    assert "not re-run" in out and "is not a module of kernels" in out and "Zen of Python" not in out, out


def test_a_region_whose_size_overflows_int64_is_off_the_dram(capsys, folder):
    def huge(j):
        j["regions"][2]["shape"] = [2 ** 62 + 256, 4]
        j["regions"][2].pop("bytes", None)
        return j
    edit_json(folder / "layout.json", huge)
    for args in (["run", folder, "--model", "iss"], ["disasm", folder]):
        one_line(*cosim(capsys, *args)[::2], "layout.json", "region 'C'", "outside the")


@pytest.mark.parametrize("how", ["fifo", "devzero"])
def test_layout_json_that_is_not_a_regular_file(capsys, folder, how):
    """A FIFO would block the read forever and /dev/zero never ends: both are refused, not read."""
    import os

    (folder / "layout.json").unlink()
    if how == "fifo":
        os.mkfifo(folder / "layout.json")
    else:
        os.symlink("/dev/zero", folder / "layout.json")
    for args in (["run", folder, "--model", "iss"], ["disasm", folder]):
        one_line(*cosim(capsys, *args)[::2], "layout.json", "not a regular file")


def test_an_npy_named_npz_is_one_line(capsys, tmp_path, folder, kernels):
    fake = tmp_path / "fake.npz"
    with open(fake, "wb") as f:
        np.save(f, np.zeros((37, 16), np.int8))
    (folder / "inputs.npz").write_bytes(fake.read_bytes())
    (folder / "dram.bin").unlink(missing_ok=True)
    words = ["fake.npz", "not an .npz archive but a single .npy array"]
    one_line(*cosim(capsys, "run", folder, "--model", "iss")[::2], "inputs.npz", words[1])
    one_line(*cosim(capsys, "run", f"{kernels}:copy", "-p", f"X=@{fake}", "-p", "Y=37x16:int8",
                    "--model", "golden")[::2], "param 'X'", *words)
    one_line(*cosim(capsys, "net", "digits", "--model", "golden", "--input", fake)[::2], "--input", *words)


def test_net_input_advice_is_what_the_option_takes(capsys, tmp_path):
    two = tmp_path / "two.npz"
    np.savez(two, a=np.zeros((1, 64), np.int8), b=np.zeros((1, 64), np.int8))
    rc, _, err = cosim(capsys, "net", "digits", "--model", "golden", "--input", two)
    one_line(rc, err, f"write {two}:NAME")
    assert "@" not in err, err


def test_user_params_must_be_a_dict(capsys, tmp_path):
    f = tmp_path / "k.py"
    f.write_text("from compiler import S\n\n@S.kernel\ndef k(X, Y):\n    S.copy(Y, X)\n\nk_params = [1, 2]\n")
    one_line(*cosim(capsys, "run", f"{f}:k", "--model", "golden")[::2], "'k_params' must be a dict", "list")


def test_bare_number_for_a_tensor_gets_the_hint(capsys):
    """The documented hint, whatever the kernel's own error says (here an AttributeError of A.shape)."""
    kern = ROOT / "docs" / "kernels" / "int8_dense.py"
    for p in ("A=64", "bias=48"):
        name, v = p.split("=")
        one_line(*cosim(capsys, "run", f"{kern}:int8_dense", "--model", "iss", "-p", p)[::2],
                 f"-p {p} made '{name}' the constant {v}", f"-p {name}={v}:int32")


@pytest.mark.parametrize("args, words", [
    (["--model", "iss", "--vcd", "x.vcd"], ["--vcd", "TLM", "--model iss"]),
    (["--model", "golden", "--trace", "t.json"], ["--trace", "TLM"]),
    (["--model", "iss", "--sections"], ["--sections", "TLM"]),
    (["--model", "tlm", "--waves"], ["--waves", "RTL"]),
    (["--model", "tlm", "--watchdog", "100"], ["--watchdog", "RTL"]),
    (["--model", "iss", "--mem", "protocol"], ["--mem", "RTL", "--model iss"]),
    (["--model", "golden", "--sim", "icarus"], ["--sim", "RTL"]),
    (["-p", "shape=17", "-p", "shape=3", "--model", "tlm"], ["param 'shape' is given twice"]),
])
def test_options_that_would_be_ignored_are_refused(capsys, tmp_path, monkeypatch, args, words):
    monkeypatch.chdir(tmp_path)
    one_line(*cosim(capsys, "run", "vadd", *args)[::2], *words)
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("option, file", [("--trace", "layout.json"), ("--vcd", "insn.bin"), ("--trace", "inputs.npz")])
def test_an_output_never_overwrites_the_program_run(capsys, folder, option, file):
    before = {f.name: f.read_bytes() for f in folder.iterdir()}
    one_line(*cosim(capsys, "run", folder, "--model", "tlm", option, folder / file)[::2],
             f"{option} {folder / file}: is a file of the Program folder")
    assert {f.name: f.read_bytes() for f in folder.iterdir()} == before
    assert cosim(capsys, "run", folder, "--model", "tlm", "--trace", folder / "trace.json")[0] == 0


@pytest.mark.parametrize("argv, words", [
    (["generate", "charlm", "--prompt", "B", "--max-new", "1", "--model", "iss", "--sim", "icarus"], ["--sim", "RTL"]),
    (["net", "digits", "--model", "tlm", "--images", "1", "--mem", "protocol"], ["--mem", "RTL"]),
    (["sim", "--kernels", "vadd", "--no-rtl", "--mem", "protocol"], ["--mem protocol", "RTL column", "--no-rtl"]),
    (["sim", "--kernels", "vadd", "--no-rtl", "--net-images", "2"], ["--net-images 2", "network row", "net:NAME"]),
])
def test_rtl_options_without_the_rtl_are_refused(capsys, argv, words):
    one_line(*cosim(capsys, *argv)[::2], *words)


def test_sim_runs_a_kernel_named_twice_once(capsys):
    rc, out, err = cosim(capsys, "sim", "--kernels", "vadd", "vadd", "--no-rtl", "--json")
    assert rc == 0 and [r["kernel"] for r in json.loads(out)["kernels"]] == ["vadd"], out


@pytest.mark.parametrize("argv, words", [
    (["vadd_rows", "--seed", "7"], ["draws its inputs when it is run", "--seed N"]),
    (["vadd", "--verify-all"], ["--verify-all", "not one", "vadd_rows"]),
])
def test_compile_options_that_would_be_ignored_are_refused(capsys, tmp_path, argv, words):
    one_line(*cosim(capsys, "compile", *argv, "-o", tmp_path / "p")[::2], *words)
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("command", [["run", "vadd", "--model", "tlm"], ["generate", "charlm", "--prompt", "B"],
                                     ["net", "digits", "--images", "1"]])
def test_a_trace_into_a_fifo_or_a_folder_is_refused_up_front(capsys, tmp_path, command):
    """Opening a FIFO to write blocks until a reader comes (the run hung); a folder or a path under a file
    failed only when the file was written, after the whole run."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "f").write_text("")
    for target, words in ((fifo, "a FIFO or socket"), (tmp_path, "a folder, not a file"),
                          (tmp_path / "f" / "t.json", "is a file, where a folder is needed")):
        one_line(*cosim(capsys, *command, "--trace", target)[::2], words)


def test_disasm_names_layout_json_for_bad_sections(capsys, folder):
    def bad(j):
        j.setdefault("meta", {})["sections"] = "abc"
        return j
    edit_json(folder / "layout.json", bad)
    one_line(*cosim(capsys, "disasm", folder)[::2], "layout.json", "'sections' must be a list")


@pytest.fixture(scope="module")
def dynamic_folder(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("dyn") / "vadd_rows"
    assert cosim_main(["compile", "vadd_rows", "-o", str(d)]) == 0
    return d


@pytest.mark.parametrize("edit, words", [
    (lambda d: (d / "dynamic.json").write_text("[]"), ["dynamic.json", "not a dynamic driver", "list"]),
    (lambda d: edit_json(d / "layout.json", lambda j: {**j, "meta": {**j["meta"], "dynamic_example": "conv_rows"}}),
     ["layout.json", "'conv_rows'", "variable 'height'", "dynamic.json drives variable 'rows'"]),
])
def test_dynamic_folder_whose_files_disagree(capsys, tmp_path, dynamic_folder, edit, words):
    import shutil

    d = tmp_path / "dyn"
    shutil.copytree(dynamic_folder, d)
    edit(d)
    for value in ("5", "200"):
        one_line(*cosim(capsys, "run", d, "--model", "tlm", "--set", f"rows={value}")[::2], *words)


NESTED = '''\
from compiler import S
from compiler import gemm_kernels as G


@S.kernel
def layer(X, Wts, Out, relu=False):
    G.dense(X, Wts, None, Out, shift=3, relu=relu)


@S.kernel
def named(A, C):
    S.section(42)
'''


def test_a_flag_of_a_user_kernel_reads_true_and_false(tmp_path):
    from compiler.examples import parse_params
    from compiler.params import ParamError

    f = tmp_path / "nested.py"
    f.write_text(NESTED)
    for text, value in (("true", True), ("True", True), ("1", True), ("false", False), ("0", False)):
        assert parse_params(f"{f}:layer", [f"relu={text}"]) == {"relu": value}
    with pytest.raises(ParamError, match="'maybe' is not true or false"):
        parse_params(f"{f}:layer", ["relu=maybe"])


def test_an_operator_refusing_a_user_kernels_call_names_the_call(capsys, tmp_path):
    f = tmp_path / "nested.py"
    f.write_text(NESTED)
    shapes = ["-p", "X=1x1x2x1x16:int8", "-p", "Wts=1x2x1x1x16x16:int8", "-p", "Out=1x1x2x1x16:int8"]
    one_line(*cosim(capsys, "run", f"{f}:layer", "--model", "iss", *shapes)[::2], "kernel 'layer'",
             "(in dense called at nested.py:7)")
    one_line(*cosim(capsys, "run", f"{f}:named", "--model", "iss", "-p", "A=16:int32", "-p", "C=16:int8")[::2],
             "S.section at nested.py:12", "name 42")


@pytest.mark.parametrize("params, words", [
    (["-p", "D=24"], ["attention: D=24 features must be a whole number of 16-lane blocks"]),
    (["-p", "D=8", "-p", "heads=1"], ["attention: D=8 features must be a whole number of 16-lane blocks"]),
    (["-p", "tokens=17"], ["attention: 17 tokens: the kernel takes 1..16"])])
def test_attention_example_names_its_own_parameters(capsys, params, words):
    one_line(*cosim(capsys, "run", "attention", "--model", "iss", *params)[::2], *words)


# ---- the campaign and tool commands: bounded, and files that are not theirs left alone -------------
@pytest.mark.parametrize("args, words", [
    (["fuzz", "--count", "1", "--workers", "100000"], ["--workers", "at most 256"]),
    (["fuzz", "--count", "100000000", "--workers", "0"], ["--count", "at most 1,000,000"]),
    (["regress", "--seeds", "99999999"], ["--seeds", "at most 100,000"]),
    (["bench", "--dynamic", "--decode"], ["--dynamic and --decode"]),
    (["bench", "--decode", "--out", "x"], ["--decode prints its section", "drop --out"]),
    (["bench", "--decode", "--reps", "5", "--workers", "0"], ["--decode runs its one section", "--reps, --workers",
                                                            "drop them"]),
    (["bench", "--dynamic", "--no-synth"], ["--dynamic", "--no-synth would do nothing", "drop it"]),
    (["bench", "--decode", "--configs", "small", "default"], ["--decode runs on one config", "not 2"]),
    (["calibrate", "--config", "quad"], ["config 'quad' has 4 cores", "one-core configs"]),
    (["bench", "--dynamic", "--out", ""], ["--out", "not an empty string"]),
    (["bench", "--dynamic", "--configs", ""], ["--configs", "not an empty string"]),
    (["coverage", "--quick", "--long-log2", "99", "--out", "cv"], ["--long-log2 99", "at most 2^33"]),
    (["mutate", "--list", "--count", "3", "--only", "99"], ["--only", "1..3"]),
    (["mutate", "--count", "1000000", "--only", "999999"],
     ["--only: the RTL has", "mutants, so mutant numbers are 1.."]),
])
def test_campaign_sizes_are_bounded(capsys, tmp_path, monkeypatch, args, words):
    monkeypatch.chdir(tmp_path)
    one_line(*cosim(capsys, *args)[::2], *words)


def test_a_config_file_that_is_not_utf8_names_itself(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xb8\x00garbage")
    one_line(*cosim(capsys, "run", "vadd", "--model", "tlm", "--config", bad)[::2], str(bad), "not UTF-8")


def test_an_output_that_is_a_fifo_is_refused(capsys, tmp_path):
    import os

    fifo = tmp_path / "out.html"
    os.mkfifo(fifo)
    one_line(*cosim(capsys, "report", "-o", fifo)[::2], "a FIFO or socket, not a file to write")


def test_report_of_a_json_nested_too_deep_is_unreadable_not_a_crash(capsys, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200000 + "]" * 200000)
    rc, out, err = cosim(capsys, "report", "--fuzz", deep, "-o", tmp_path / "r.html")
    # named by its option, an unreadable file is an error that writes nothing (at its default path the
    # page shows it as unreadable: tests/test_report.py)
    assert rc == 2 and "internal error" not in err and "nested too deep" in err, err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("text, why", [("my precious notes\n", "not a JSON record"),
                                       ("no newline at the end", "not a JSON record"),
                                       ('{"important": "user data", "n": 1}', "needs a string 'key'"),
                                       ('{"important": "user data", "n": 1', "a record cut short with none before it"),
                                       ('{"key": "a", "ok": true}\n', "record 'a' is ok but has no 'result'"),
                                       ('{"key": "a"}\n', "record 'a' needs 'ok'"),
                                       ('{"key": "a", "ok": false, "error": null}', "failed but has no 'error'")])
def test_a_results_file_that_is_not_one_is_neither_truncated_nor_deleted(capsys, tmp_path, text, why):
    """A file of the user's given as --results (a JSON document without a final newline, a record of
    another shape) is refused with its line, never cut short as if a crash had ended it."""
    from cosim.cluster.results_file import ResultsFile

    notes = tmp_path / "notes.txt"
    notes.write_text(text)
    with pytest.raises(ValueError, match=why) as e:
        ResultsFile(notes).load()
    assert f"{notes}:1: " in str(e.value) and notes.read_text() == text
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\nbase: small\nparameters:\n  dram_read_latency: [8]\nworkloads:\n  - example: vadd\n"
                    "rtl: none\narea: none\n")
    rc, _, err = cosim(capsys, "sweep", spec, "--out", tmp_path / "o", "--results", notes, "--fresh", "--workers",
                       "0", "--area", "none")
    assert rc == 2 and why in err and notes.read_text() == text, err


def test_a_results_file_whose_last_record_lacks_its_newline_keeps_it(tmp_path):
    """A campaign's file saved by an editor without the final newline: its last record is a result, and the
    next one starts a line of its own."""
    from cosim.cluster.results_file import ResultsFile

    f = tmp_path / "r.jsonl"
    f.write_text('{"key": "a", "ok": true, "result": 1}\n{"key": "b", "ok": false, "error": "x"}')
    rf = ResultsFile(f)
    assert set(rf.load()) == {"a", "b"}
    rf.append({"key": "c", "ok": True, "result": 2})
    rf.close()
    assert set(ResultsFile(f).load()) == {"a", "b", "c"} and len(f.read_text().splitlines()) == 3


def test_waves_note_of_a_file_cut_before_start():
    """A size cap so small that it cuts the RTL's waveform before START: the note says the file holds the
    setup only, not a negative cycle after START."""
    from cosim.commands.run import waves_note

    note = waves_note({"from_cycle": -70, "to_cycle": -63, "bytes": 900, "max_bytes": 1000, "capped": True})
    assert "the setup before START only, up to 63 cycles before it" in note and "-63" not in note, note
    assert waves_note({"from_cycle": -70, "to_cycle": 500, "bytes": 900, "max_bytes": 10**6}).startswith(
        "(from reset to cycle 500 after START")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full (a device whose writes fail: disk full)")
def test_a_tlm_output_that_cannot_be_written_is_named(capsys):
    """A full disk under --trace or --vcd: one line naming the option and the path (the OS error names none)."""
    for opt in ("--trace", "--vcd"):
        rc, out, err = cosim(capsys, "run", "vadd", "--model", "tlm", opt, "/dev/full")
        one_line(rc, err, f"{opt} /dev/full: cannot write (No space left on device)")


def test_tlm_waveform_outputs_keep_the_user_s_files(capsys, tmp_path):
    """--vcd and --trace naming one file is refused (the trace would replace the VCD); a GTKWave save
    file beside --vcd that cosim did not write is the user's layout: kept, with a note."""
    rc, out, err = cosim(capsys, "run", "vadd", "--model", "tlm", "--vcd", tmp_path / "x", "--trace", tmp_path / "x")
    one_line(rc, err, "--vcd and --trace name the same file")
    assert not (tmp_path / "x").exists()
    rc, out, err = cosim(capsys, "run", "vadd", "--model", "tlm", "--vcd", tmp_path / "y.vcd", "--trace",
                         tmp_path / "y.gtkw")
    one_line(rc, err, "is the GTKWave save file written beside --vcd")
    assert not (tmp_path / "y.vcd").exists() and not (tmp_path / "y.gtkw").exists()
    (tmp_path / "t.gtkw").write_text("my layout\n")
    rc, out, err = cosim(capsys, "run", "vadd", "--model", "tlm", "--vcd", tmp_path / "t.vcd")
    assert rc == 0 and (tmp_path / "t.gtkw").read_text() == "my layout\n" and "is not one cosim wrote" in out, out
    (tmp_path / "t.gtkw").unlink()
    for _ in range(2):  # cosim's own save file is rewritten
        rc, out, err = cosim(capsys, "run", "vadd", "--model", "tlm", "--vcd", tmp_path / "t.vcd")
        assert rc == 0 and f"gtkwave {tmp_path / 't.gtkw'}" in out, out


@pytest.mark.skipif(_rtl_missing() is not None, reason="no RTL")
def test_calibrate_names_an_unreadable_calibration_file(capsys, tmp_path):
    """`cosim calibrate` of a config whose calibration file is not JSON: the fit runs (from the defaults, on
    the RTL: they fit `small`'s RTL exactly) and one note names the file, which every TLM run refuses; --write
    leaves it and says so."""
    data = {k: v for k, v in load_config("small").to_dict().items() if k != "source"}
    cfg = tmp_path / "mine.json"
    cfg.write_text(json.dumps({**data, "name": "mine"}))
    (tmp_path / "mine.timing.json").write_text("{not json")
    rc, out, err = cosim(capsys, "calibrate", "--config", cfg, "--json", "--write")
    d = json.loads(out)
    assert rc == 0 and d["written"] is None and "mine.timing.json: cannot read timing calibration" in \
        d["unreadable_calibration"], out
    notes = [ln for ln in err.splitlines() if ln.startswith("note:")]
    assert len(notes) == 1 and "mine.timing.json" in notes[0] and "refuses it" in notes[0], err
    assert (tmp_path / "mine.timing.json").read_text() == "{not json"
    rc, out, err = cosim(capsys, "run", "vadd", "--model", "tlm", "--config", cfg)
    assert rc == 2 and "mine.timing.json" in err, err


def test_an_output_naming_an_input_is_refused_and_the_input_kept(capsys, tmp_path):
    """--trace or --vcd naming the kernel's source, a -p tensor file or the --config file would overwrite it."""
    f = tmp_path / "nested.py"
    f.write_text(NESTED)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 1, 2, 1, 16), np.int8))
    cfg = tmp_path / "cfg.json"
    cfg.write_text((ROOT / "hw/configs/default.json").read_text())
    before = {p: p.read_bytes() for p in (f, x, cfg)}
    shapes = ["-p", f"X=@{x}", "-p", "Wts=1x2x1x1x16x16:int8", "-p", "Out=1x1x2x1x16:int8"]
    for opt, out, words in (("--trace", f, "KERNEL"), ("--vcd", x, "-p X="), ("--trace", cfg, "--config")):
        one_line(*cosim(capsys, "run", f"{f}:layer", "--model", "tlm", *shapes, "--config", cfg, opt, out)[::2],
                 f"{opt} {out}: is the file of {words}", "it would be overwritten")
    assert {p: p.read_bytes() for p in before} == before


def test_an_output_folder_that_cannot_be_made_is_said_before_the_run(capsys, tmp_path):
    """The trace of a long run (here a decode of every model) is not lost after the run: its place is checked
    first (a folder under a file cannot be made)."""
    (tmp_path / "notes").write_text("a file, not a folder")
    trace = tmp_path / "notes" / "sub" / "t.json"
    one_line(*cosim(capsys, "generate", "charlm", "--prompt", "Be", "--model", "all", "--trace", trace)[::2],
             f"--trace {trace}: cannot make its folder {trace.parent}")
    one_line(*cosim(capsys, "net", "digits", "--trace", trace)[::2], "--trace", "cannot make its folder")
    assert (tmp_path / "notes").read_text() == "a file, not a folder"


def test_regress_junit_naming_its_results_file_is_refused(capsys, tmp_path):
    """--junit over the --results file would replace what a resume reads: refused before anything runs, an
    existing file or a new one."""
    results = tmp_path / "r.jsonl"
    for exists in (False, True):
        if exists:
            results.write_text("")
        one_line(*cosim(capsys, "regress", "--configs", "small", "--workers", "0", "--junit", results, "--results",
                        results)[::2], f"--results and --junit name the same file {results}")
        assert results.exists() == exists and (not exists or results.read_text() == "")


def test_an_output_named_like_a_shipped_name_is_not_an_input(capsys, tmp_path, monkeypatch):
    """`--trace vadd` writes ./vadd: a second run is not refused as if ./vadd were the example (or ./small the
    config small, whose file is hw/configs/small.json); two outputs on os.devnull are fine."""
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        rc, out, err = cosim(capsys, "run", "vadd", "--model", "tlm", "--config", "small", "--trace", "vadd")
        assert rc == 0 and Path("vadd").is_file(), err
    assert cosim(capsys, "run", "vadd", "--model", "tlm", "--config", "small", "--trace", "small")[0] == 0
    assert cosim(capsys, "run", "vadd", "--model", "tlm", "--trace", os.devnull, "--vcd", os.devnull)[0] == 0


def test_conformance_outputs_naming_one_file_are_refused(capsys, tmp_path):
    out = tmp_path / "r.md"
    one_line(*cosim(capsys, "conformance", "nodes", "--markdown", out, "--out-json", out)[::2],
             f"--markdown and --out-json name the same file {out}")


@pytest.mark.parametrize("text, value", [("05", 5), ("0x10", 16), ("0b11", 3), (" 7 ", 7), ("0", 0)])
def test_an_integer_option_reads_decimal_with_leading_zeros_and_prefixed_bases(text, value):
    from cosim.cli import int_arg

    assert int_arg(0)(text) == value
