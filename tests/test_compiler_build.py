"""The compiler: vadd's Program, layout, register config, folder round trip, a functional replay of
the instruction stream (on the ISS), and one-line CompileErrors for kernels that cannot be compiled."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from compiler import S, build
from compiler.errors import CompileError
from compiler.examples import make_case
from compiler.verify import check_finish, token_counts
from hw.config import load_config
from hw.isa import Isa
from hw.program import Program, check_layout
from sim.iss import run_reference

VADD = [S.tensor((1, 64, 1, 16)), S.tensor((1, 64, 1, 16)), S.tensor((1, 64, 1, 16), "int8")]


def execute(prog: Program) -> dict[str, np.ndarray]:
    """The Program's outputs on the ISS: its instructions replayed in order on its DRAM image (the ISA
    semantics, no timing). Program order is a legal schedule (the tokens only relax it), so this is
    what every model must produce; it checks the compiler's addresses and fields, independently of
    the kernel."""
    r = run_reference(prog)
    assert r.error is None, r.error
    return r.outputs


def test_vadd_program_is_clean():
    cfg = load_config("default")
    prog = build_vadd(cfg)
    data = prog.insn_bytes
    assert Isa(cfg).decode_stream(data) == prog.insns  # disassembles cleanly, round trips
    lines = prog.isa.disasm_stream(prog.insns).splitlines()
    assert len(lines) == len(prog.insns) and lines[-1].strip().endswith("FINISH")
    check_finish(prog.insns)
    assert all(pu == po for pu, po in token_counts(prog.insns).values())
    loads = [i for i in prog.insns if i.MNEMONIC == "LOAD"]
    stores = [i for i in prog.insns if i.MNEMONIC == "STORE"]
    assert len(loads) == 8 and len(stores) == 4  # 64 vectors in tiles of 16
    assert prog.regs[-1] == ("CTRL", 1) and ("INSN_COUNT", len(prog.insns)) in prog.regs
    check_layout(cfg, prog.regions, "vadd")
    assert [(r.name, r.role, r.shape, r.dtype) for r in prog.regions[1:]] == [
        ("A", "input", (1, 64, 1, 16), "int32"), ("B", "input", (1, 64, 1, 16), "int32"),
        ("C", "output", (1, 64, 1, 16), "int8")]
    assert all(r.addr % cfg.region_align == 0 for r in prog.regions)


def build_vadd(cfg):
    from compiler.ops import binary
    return build(binary, VADD, cfg, name="vadd", op="add", tile=16)


def test_program_folder_round_trip_and_disasm_cli(tmp_path):
    case = make_case("vadd", "default", seed=3)
    d = case.program.save(tmp_path / "vadd")
    back = Program.load(d)
    assert back.insns == case.program.insns
    assert np.array_equal(back.expected["C"], case.golden()["C"])
    assert np.array_equal(back.inputs["A"], case.inputs["A"])
    r = subprocess.run([sys.executable, "-m", "cosim.cli", "disasm", str(d)], capture_output=True, text=True)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == len(case.program.insns)


def test_replay_of_compiled_vadd_equals_golden(cfg):
    case = make_case("vadd", cfg, seed=1)
    assert np.array_equal(execute(case.program)["C"], case.expected["C"])


# ---- kernels that cannot be compiled --------------------------------------------------------
@S.kernel
def copy(A, C):
    """Load and store, one tile."""
    S.load(S.acc[0:A.nvec], A)
    S.store(C, S.acc[0:A.nvec])


def test_unsupported_dtype():
    with pytest.raises(CompileError, match=r"kernel 'copy': argument 'A': unsupported dtype float32"):
        build(copy, [np.zeros(16, np.float32), S.tensor(16, "int8")], "default")
    with pytest.raises(CompileError, match=r"kernel 'copy': argument 'A':.*int8.*inputs must be int32"):
        build(copy, [S.tensor(16, "int8"), S.tensor(16, "int8")], "default")
    with pytest.raises(CompileError, match=r"argument 'C':.*int32.*outputs must be int8"):
        build(copy, [S.tensor(16), S.tensor(16, "int32")], "default")


def test_tensor_larger_than_dram():
    from compiler.ops import binary
    with pytest.raises(CompileError, match=r"kernel 'binary': argument 'A': tensor of .* does not fit the "
                                           r"4194304-byte DRAM"):
        build(binary, [S.tensor((1100, 1024)), S.tensor((1100, 1024)), S.tensor((1100, 1024), "int8")], "small")


def test_tile_that_cannot_fit():
    from compiler.ops import binary
    with pytest.raises(CompileError, match=r"argument 'tile': 17 vectors per tile do not fit"):
        build(binary, [S.tensor(1000), S.tensor(1000), S.tensor(1000, "int8")], "small", tile=17)
    with pytest.raises(CompileError, match=r"kernel 'copy':.*acc\[64\]|kernel 'copy'.*out of range"):
        build(copy, [S.tensor(65 * 8), S.tensor(65 * 8, "int8")], "small")


def test_a_kernel_outgrowing_the_dram_stops_where_it_does():
    """The trace stops at the first instruction past what the DRAM can hold (not after the whole loop,
    whose trace would grow without a bound), naming the line; a kernel below the bound compiles."""
    from hw.config import parse_config

    tiny = parse_config(dict(load_config("default").to_dict(), name="tiny", dram_bytes=1 << 16))

    def kernel(n: int):
        @S.kernel
        def many(A, C):
            S.load(S.acc[0:1], A)
            for _ in range(n):
                S.add(S.acc[0:1], 1)
            S.store(C, S.acc[0:1])
        return many

    cap = tiny.dram_bytes // 16   # instructions, FINISH included
    with pytest.raises(CompileError, match=rf"kernel 'many': S\.add at test_compiler_build\.py:\d+: the kernel's "
                                           rf"instructions outgrow the 65536-byte DRAM of config 'tiny' \(at most "
                                           rf"{cap:,} instructions"):
        build(kernel(cap), [S.tensor(16), S.tensor(16, "int8")], tiny)
    p = build(kernel(100), [S.tensor(16), S.tensor(16, "int8")], tiny)
    assert len(p.insns) == 103


@pytest.mark.parametrize("view, words", [
    (lambda: S.acc[0:2.5], ["accumulator slice end must be an integer, got float 2.5"]),
    (lambda: S.inp[True], ["input buffer index must be an integer, got bool True"]),
    (lambda: S.acc["1":"3"], ["accumulator slice start must be an integer, got str '1'"]),
    (lambda: S.acc[3:1], ["bad accumulator slice [3:1]"]),
    (lambda: S.wgt[-1], ["negative weight buffer index -1"]),
    (lambda: S.acc[-4:], ["negative accumulator slice start -4 (a slice counts from the view's start)"]),
    (lambda: S.acc[0:4] + 1.5, ["accumulator view offset must be an integer, got float 1.5"]),
])
def test_a_bad_view_is_refused_at_the_kernel_line(view, words):
    """A view's bounds are integers (numpy's too), never cut from a float or parsed from text; inside a
    kernel the error names the kernel and the line, outside one it is the reason alone."""
    @S.kernel
    def viewer(A, C):
        S.load(S.acc[0:1], A)
        view()
        S.store(C, S.acc[0:1])

    with pytest.raises(CompileError) as e:
        build(viewer, [S.tensor(16), S.tensor(16, "int8")], "default")
    assert str(e.value).startswith("kernel 'viewer': S.") and "test_compiler_build.py:" in str(e.value), e.value
    for w in words:
        assert w in str(e.value)
    with pytest.raises(CompileError) as e:
        view()
    assert str(e.value) == words[0]
    assert S.acc[np.int64(2):np.int32(5)] == S.acc[2:5]


def test_read_of_never_written_buffer():
    @S.kernel
    def bad(A, C):
        S.load(S.acc[0:1], A)
        S.add(S.acc[0:1], S.acc[5:6])
        S.store(C, S.acc[0:1])
    with pytest.raises(CompileError, match=r"kernel 'bad': S\.add at test_compiler_build\.py:\d+ reads acc\[5\], "
                                           r"which the kernel never wrote"):
        build(bad, [S.tensor(16), S.tensor(16, "int8")], "default")


def test_unused_tensor_and_shape_mismatch():
    @S.kernel
    def unused(A, B, C):
        S.load(S.acc[0:1], A)
        S.store(C, S.acc[0:1])
    with pytest.raises(CompileError, match="argument 'B': the kernel never loads or stores"):
        build(unused, [S.tensor(16), S.tensor(16), S.tensor(16, "int8")], "default")
    from compiler.ops import binary
    with pytest.raises(CompileError, match=r"argument 'B': shape \(9,\) differs"):
        build(binary, [S.tensor(8), S.tensor(9), S.tensor(8, "int8")], "default")


def test_cli_compile_and_list(tmp_path):
    def cosim(*a):
        return subprocess.run([sys.executable, "-m", "cosim.cli", *a], capture_output=True, text=True, timeout=120)
    r = cosim("compile", "fused", "-o", str(tmp_path / "f"), "-p", "shape=5x7", "-p", "shift=2", "--config", "small",
              "--seed", "4")
    assert r.returncode == 0, r.stderr
    p = Program.load(tmp_path / "f")
    assert p.region("C").shape == (5, 8) and "expected.npz" in {f.name for f in (tmp_path / "f").iterdir()}
    import json
    listing = json.loads(cosim("list", "--json").stdout)
    assert listing["examples"][0]["name"] == "vadd" and listing["examples"][0]["params"]["shape"] == [1, 64, 1, 16]
    r = cosim("compile", "vadd", "-o", str(tmp_path / "x"), "-p", "tile=999", "--config", "small")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "argument 'tile'" in r.stderr
    r = cosim("compile", "nope", "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and "unknown example 'nope'" in r.stderr


def test_user_kernel_file(tmp_path):
    f = tmp_path / "mykern.py"
    f.write_text('''
from compiler import S

@S.kernel
def double(X, Y, k=3):
    """Y = int8(X * k)."""
    n = X.nvec
    S.load(S.acc[0:n], X)
    S.mul(S.acc[0:n], k)
    S.store(Y, S.acc[0:n])

def double_reference(X, k=3):
    return {"Y": X * k}
''')
    case = make_case(f"{f}:double", "default", {"X": "3x5", "Y": "3x5:int8", "k": 5}, seed=2)
    assert case.has_reference
    assert np.array_equal(case.unpad(case.golden())["Y"], case.reference()["Y"])  # the user's shape
    assert np.array_equal(execute(case.program)["Y"], case.expected["Y"])
    assert case.unpad(case.golden())["Y"].shape == (3, 5)
