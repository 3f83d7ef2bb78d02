"""Dynamic shapes: S.var, one Program for every value, its Python and C drivers, cosim run --set."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from compiler import S
from compiler.build import build
from compiler.dynamic import save_dynamic
from compiler.dynamic_examples import DYNAMIC_EXAMPLES
from compiler.errors import CompileError
from compiler.symbolic import SymbolicError, bind, ceil_div, var
from cosim import models
from cosim.cli import main
from cosim.dynamic_run import dynamic_job, specialize
from hw.config import load_config
from hw.csr import csrs_of
from hw.dynamic_driver import Driver

CFG = load_config("default")
VALUES = {"mvm_token": [1, 15, 16, 17, 100, 511, 512, 1024, 1025, 2048], "vadd_rows": [1, 15, 16, 17, 100, 256]}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name, ex in DYNAMIC_EXAMPLES.items():
        out[name] = save_dynamic(ex.compile(CFG), tmp_path_factory.mktemp(name))
    return out


def test_var_bounds_and_refusals() -> None:
    t = var("token", max=2048)
    e = ceil_div(t * 3 + 5, 16)
    assert (e.lo, e.hi) == (1, (2048 * 3 + 5 + 15) // 16)
    assert bind((t, 16, e), {"token": 17}) == (17, 16, (17 * 3 + 5 + 15) // 16)
    with pytest.raises(SymbolicError, match="give its maximum"):
        var("n")
    with pytest.raises(SymbolicError, match="divisor must be a positive integer constant"):
        _ = 100 // t
    with pytest.raises(SymbolicError, match="cannot bound"):
        _ = t ** 2
    with pytest.raises(SymbolicError, match="out of range 1..2048"):
        t.check(2049)


def test_dsl_spelling() -> None:
    token = S.var("token", max=2048)
    spec = S.tensor((token, 16), "int8")
    assert spec.shape[0] is token and spec.shape[1] == 16
    with pytest.raises(SymbolicError, match="dimension 0 of the tensor: cannot bound '\\(token - 4\\)'"):
        S.tensor((token - 4, 16))
    with pytest.raises(SymbolicError, match="give its maximum"):
        S.var("batch")


def test_unboundable_shape_refused() -> None:
    t = var("token", max=64)
    ex = DYNAMIC_EXAMPLES["vadd_rows"]
    from compiler.dynamic import compile_dynamic
    from compiler.tensor import TensorSpec

    args = {"A": TensorSpec((t - 1, 16), "int32"), "B": TensorSpec((t, 16), "int32"),
            "C": TensorSpec((t, 16), "int8"), "op": "add", "tile": 16}
    with pytest.raises(SymbolicError, match="cannot bound shape dimension '\\(token - 1\\)' to a positive size"):
        compile_dynamic(ex.kernel, args, t, CFG)


def values_to_check(name: str) -> list[int]:
    """1, every tile size +-1 up to the maximum (each unit's tails), 100 and the maximum."""
    hi = DYNAMIC_EXAMPLES[name].var.max
    tiles = {t + d for t in (16, 32, 64, 128, 256, 512, 1024) for d in (-1, 0, 1)}
    return sorted({v for v in {1, 2, 15, 16, 17, 100, hi - 1, hi} | tiles if 1 <= v <= hi})


@pytest.mark.parametrize("name", list(DYNAMIC_EXAMPLES))
def test_driver_equals_static_compile(name: str, folders: dict[str, Path]) -> None:
    """The driver's run of a value IS the static compile of that value: the same instruction words, regions and
    CSR writes; on the TLM the same cycles (every counter) and outputs equal golden, the ISS agrees."""
    ex = DYNAMIC_EXAMPLES[name]
    base = models.Program.load(folders[name])
    drv = Driver.load(folders[name])
    for v in values_to_check(name):
        prog, _ = specialize(base, drv, ex, v)
        static = ex.static(CFG, v)
        assert prog.isa.encode_stream(prog.insns) == static.isa.encode_stream(static.insns), (name, v)
        assert [(r.name, r.addr, r.nbytes) for r in prog.regions] == \
            [(r.name, r.addr, r.nbytes) for r in static.regions], (name, v)
        assert prog.regs == static.regs, (name, v)
        inputs = ex.inputs(CFG, v)
        for n, a in inputs.items():
            static.set_input(n, a.reshape(static.region(n).shape))
        dyn_tlm, st_tlm = models.tlm(prog), models.tlm(static)
        assert dyn_tlm.cycles == st_tlm.cycles, (name, v, dyn_tlm.cycles, st_tlm.cycles)
        assert dyn_tlm.counters == st_tlm.counters, (name, v)
        iss = models.iss(prog)
        for res in (dyn_tlm, iss):
            assert res.error is None, (v, res.error)
            for n, exp in prog.expected.items():
                np.testing.assert_array_equal(res.outputs[n], exp, err_msg=f"{name} {v} {res.model}")
                np.testing.assert_array_equal(st_tlm.outputs[n].reshape(-1), exp.reshape(-1))


@pytest.mark.skipif(shutil.which("cc") is None, reason="no system C compiler (cc) on PATH")
@pytest.mark.parametrize("name", list(DYNAMIC_EXAMPLES))
def test_c_driver_bytes_equal_python(name: str, folders: dict[str, Path], tmp_path: Path) -> None:
    folder = folders[name]
    drv = Driver.load(folder)
    main_c = tmp_path / "main.c"
    main_c.write_text("""
#include <stdio.h>
#include <stdlib.h>
#include "driver.h"
static uint8_t insn[ACCEL_DYN_MAX_INSNS * 16], cst[ACCEL_DYN_CONST_BYTES + 1];
static accel_dyn_reg_write regs[ACCEL_DYN_REG_WRITES];\nstatic uint32_t caddr;
int main(int argc, char **argv) {
    int a;
    for (a = 1; a < argc; a++) {
        size_t n = 0, m = 0, c = 0, i;
        int rc = accel_dyn_driver(atoll(argv[a]), insn, sizeof insn, &n, regs, ACCEL_DYN_REG_WRITES, &m,
                                  cst, sizeof cst, &c, &caddr);
        printf("%s %d %x ", argv[a], rc, (unsigned)caddr);
        for (i = 0; i < n; i++) printf("%02x", insn[i]);
        printf(" ");
        for (i = 0; i < c; i++) printf("%02x", cst[i]);
        printf(" ");
        for (i = 0; i < m; i++) printf("%x:%x,", regs[i].addr, regs[i].value);
        printf("\\n");
    }
    {   /* too small an instruction buffer: an error, nothing written */
        size_t n = 0, m = 0, c = 0;
        printf("small %d\\n", accel_dyn_driver(1, insn, 15, &n, regs, ACCEL_DYN_REG_WRITES, &m, cst, sizeof cst, &c,
                                                &caddr));
    }
    return 0;
}
""")
    exe = tmp_path / "drv"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", f"-I{folder}", str(main_c),
                    str(folder / "driver.c"), "-o", str(exe)], check=True, timeout=120)
    rng = np.random.default_rng(1)
    values = sorted({drv.lo, drv.hi, *range(1, min(40, drv.hi + 1)),
                     *(int(x) for x in rng.integers(drv.lo, drv.hi + 1, 60))})
    lines = subprocess.run([str(exe), *map(str, values), "0", str(drv.hi + 1)], check=True, timeout=60,
                           capture_output=True, text=True).stdout.splitlines()
    addr = {n: c.addr for n, c in csrs_of(CFG).items()}
    for v, line in zip(values, lines):
        val, rc, caddr, insn, cst, regs = (line.split(" ") + [""] * 6)[:6]
        assert (int(val), int(rc)) == (v, 0)
        assert int(caddr, 16) == (drv.const_addr(v) or 0)
        assert bytes.fromhex(insn) == drv.insn_bytes(v)
        assert bytes.fromhex(cst) == drv.const_bytes_of(v)
        assert regs == "".join(f"{addr[n]:x}:{x:x}," for n, x in drv.regs(v))
    assert lines[len(values)].split(" ")[:2] == ["0", "1"]
    assert lines[len(values) + 1].split(" ")[:2] == [str(drv.hi + 1), "1"]
    assert lines[-1] == "small 2"


def test_cli_errors_and_list(folders: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    f = str(folders["mvm_token"])
    for sets, text in ((["token=2049"], "variable 'token': 2049 is out of range 1..2048"),
                       ([], "variable 'token' is not set: give --set token=N (token in 1..2048)"),
                       (["tok=3"], "unknown variable 'tok' (variables: token in 1..2048)"),
                       (["token=x"], "--set 'token=x': expected NAME=INTEGER"),
                       (["token=3", "token=4"], "--set 'token=4': variable 'token' is set twice")):
        argv = ["run", f, "--model", "iss"] + [a for s in sets for a in ("--set", s)]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and text in err[0], err
    assert main(["list", "--json"]) == 0
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)["dynamic"]}
    assert listed["mvm_token"]["variables"] == {"token": {"min": 1, "max": 2048}}
    assert listed["digits_batch"]["variables"] == {"batch": {"min": 1, "max": 32}}
    assert main(["run", str(folders["digits_batch"]), "--set", "batch=33", "--model", "iss"]) == 2
    assert "variable 'batch': 33 is out of range 1..32" in capsys.readouterr().err
    assert main(["run", str(folders["digits_batch"]), "--set", "batch=3", "--model", "tlm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["match"] is True


def test_cli_run_all_models(folders: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """`cosim run DIR --set token=N --model all --json` on golden, ISS, TLM and RTL (Verilator): one small
    value of each example (the RTL build is shared with the rest of the suite)."""
    why = models.rtl_available()
    if why:
        pytest.skip(why)
    for name, v in (("mvm_token", 17), ("vadd_rows", 17)):
        var_name = DYNAMIC_EXAMPLES[name].var.name
        assert main(["run", str(folders[name]), "--set", f"{var_name}={v}", "--model", "all", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["match"] is True
        cyc = {r["model"]: r.get("cycles") for r in out["results"]}
        assert cyc["tlm"] == cyc["rtl"] and cyc["tlm"]


@pytest.mark.parametrize("name", list(DYNAMIC_EXAMPLES))
def test_rtl_runs_every_value_in_one_process(name: str, folders: dict[str, Path]) -> None:
    """Every value of the list (1, tile - 1, tile, tile + 1, 100, max) on the RTL in ONE simulator
    process, separated by CTRL.SOFT_RESET only (no reset pin: the host writes each value's instruction words,
    constants, inputs and CSRs, as a driver would): outputs equal golden, cycles equal the TLM's."""
    why = models.rtl_available()
    if why:
        pytest.skip(why)
    ex = DYNAMIC_EXAMPLES[name]
    base = models.Program.load(folders[name])
    drv = Driver.load(folders[name])
    values = [v for v in (1, 15, 16, 17, 100) if v < drv.hi] + [drv.hi]
    progs = [specialize(base, drv, ex, v)[0] for v in values]
    results = models.rtl(progs, CFG, between="soft")
    for v, prog, res in zip(values, progs, results):
        assert res.error is None, (v, res.error)
        for n, exp in prog.expected.items():
            np.testing.assert_array_equal(res.outputs[n], exp, err_msg=f"{name} {v} rtl")
        assert res.cycles == models.tlm(prog).cycles, (name, v)


@pytest.mark.parametrize("name", list(DYNAMIC_EXAMPLES))
def test_driver_words_equal_static_compiles(name: str, folders: dict[str, Path]) -> None:
    """The driver's words, constants and CSR writes equal a static compile's: every value of vadd_rows
    (1..256), and for mvm_token every piece's ends and seeded random values."""
    ex = DYNAMIC_EXAMPLES[name]
    drv = Driver.load(folders[name])
    if name == "vadd_rows":
        values = list(range(drv.lo, drv.hi + 1))
    elif name == "digits_batch":  # a piece per batch, each checked against its static compile when compiled
        values = [1, 2, 9, drv.hi]
    else:
        ends = {x for p in drv.pieces for x in (p.lo, p.hi, max(drv.lo, p.lo - 1), min(drv.hi, p.hi + 1))}
        values = sorted(ends | {int(x) for x in np.random.default_rng(3).integers(drv.lo, drv.hi + 1, 24)})
    for v in values:
        st = ex.trace(CFG, v)
        assert drv.words(v) == st.words, (name, v)
        assert drv.const_bytes_of(v) == st.pool, (name, v)
        assert drv.regs(v) == st.regs, (name, v)


def test_network_dynamic_batch_is_bit_exact(folders: dict[str, Path]) -> None:
    """The digits CNN with ``batch = S.var("batch", max=32)``, compiled once: for several batches the
    driver's run on golden, ISS and TLM gives the graph reference's int8 logits bit for bit (the images
    unpacked through the static compile's NetworkProgram), with the static compile's cycles."""
    from compiler.graph_reference import run_reference

    ex = DYNAMIC_EXAMPLES["digits_batch"]
    base = models.Program.load(folders["digits_batch"])
    drv = Driver.load(folders["digits_batch"])
    assert drv.name == "batch" and (drv.lo, drv.hi) == (1, 32)
    graph = ex.graph()
    for v in (1, 5, 16, 32):
        prog, _ = specialize(base, drv, ex, v, seed=v)
        netp = ex.compiled(CFG, v)
        want = run_reference(graph, {graph.inputs[0].name: ex.natural(v, seed=v)})
        golden = netp.run_golden({graph.inputs[0].name: ex.natural(v, seed=v)})
        results = [models.iss(prog), models.tlm(prog)]
        for res in results:
            assert res.error is None, (v, res.model, res.error)
            got = netp.outputs({n: np.asarray(a) for n, a in res.outputs.items()})
            for n, a in want.items():
                np.testing.assert_array_equal(got[n], a, err_msg=f"batch {v} {res.model}")
                np.testing.assert_array_equal(golden[n], a, err_msg=f"batch {v} golden")
        static = ex.static(CFG, v)
        for n, a in ex.inputs(CFG, v, seed=v).items():
            static.set_input(n, a.reshape(static.region(n).shape))
        assert results[1].cycles == models.tlm(static).cycles, v
        assert prog.meta["sections"] == static.meta["sections"], v  # the layers, as the static compile names them


def test_pieces_do_not_grow_with_the_layout() -> None:
    """Region bases are relocations, not pieces: mvm_token's 2048 values take a handful of pieces although its
    regions move by the 256-byte alignment every few tokens."""
    dp = DYNAMIC_EXAMPLES["mvm_token"].compile(CFG)
    assert len(dp.pieces) <= 16, [(p.lo, p.hi) for p in dp.pieces]


def test_expression_as_loop_extent() -> None:
    """A constant that is an expression of the variable (here the tile, a loop extent of the kernel:
    ceil(rows / 4) vectors): the kernel is traced at concrete values, the driver still equals every trace."""
    from compiler.dynamic import compile_dynamic
    from compiler.tensor import TensorSpec

    rows = var("rows", max=48)
    ex = DYNAMIC_EXAMPLES["vadd_rows"]
    args = {"A": TensorSpec((rows, CFG.lanes), "int32"), "B": TensorSpec((rows, CFG.lanes), "int32"),
            "C": TensorSpec((rows, CFG.lanes), "int8"), "op": "sub", "tile": ceil_div(rows, 4)}
    dp = compile_dynamic(ex.kernel, args, rows, CFG, name="vsub_rows", verify_all=True)
    for v in range(1, 49):
        bound = {**args, "A": TensorSpec((v, CFG.lanes), "int32"), "B": TensorSpec((v, CFG.lanes), "int32"),
                 "C": TensorSpec((v, CFG.lanes), "int8"), "tile": -(-v // 4)}
        static = build(ex.kernel, bound, CFG, name="vsub_rows")
        assert dp.words(v) == [static.isa.encode_word(i) for i in static.insns], v
    with pytest.raises(SymbolicError, match="out of range 1..48"):
        dp.words(49)


def test_sections_follow_the_value() -> None:
    """A kernel's named sections (one per tile here: their number and ranges change with the variable) are
    those of the static compile of each value, in the dynamic Program and in a Program specialised from it."""
    import sys

    from compiler.dynamic import compile_dynamic, value_meta
    from compiler.tensor import TensorSpec

    sys.path.insert(0, str(Path(__file__).parent / "kernels"))
    from sectioned import sectioned_add

    n = var("n", max=40)
    args = {"X": TensorSpec((n, 16), "int32"), "Y": TensorSpec((n, 16), "int8"), "tile": 8}
    dp = compile_dynamic(sectioned_add, args, n, CFG, name="sectioned_add")
    top = build(sectioned_add, {**args, "X": TensorSpec((40, 16), "int32"), "Y": TensorSpec((40, 16), "int8")}, CFG)
    assert dp.program.meta["sections"] == top.meta["sections"]
    for v in (1, 7, 8, 9, 17, 33):
        static = build(sectioned_add, {**args, "X": TensorSpec((v, 16), "int32"), "Y": TensorSpec((v, 16), "int8")},
                       CFG)
        assert dp.sections_of(v) == static.meta["sections"], v
        meta = value_meta(dp.program.meta, "n", v)
        assert meta["sections"] == static.meta["sections"] and "dynamic_sections" not in meta, v
    assert len(dp.sections_of(1)) == 1 and len(dp.sections_of(33)) == 5


def test_bench_driver_cost_section() -> None:
    """`cosim bench --dynamic`'s driver row on the small example: both drivers timed, the C one built by the
    system's C compiler (when there is one), and the table prints it."""
    from cosim.bench.dynamic import driver_cost, table_lines

    row = driver_cost(CFG, "vadd_rows", reps=5)
    assert row["max"] == 256 and row["pieces"] >= 1 and row["python_us"] > 0 and row["static_compile_us"] > 0
    assert (row["c_us"] is None) == (shutil.which("cc") is None)
    lines = table_lines({"config": CFG.name, "compile_vs_max": [], "driver": [row]})
    assert any(line.startswith("vadd_rows") and "rows<=256" in line for line in lines), lines


def test_driver_refuses_other_formats_and_broken_pieces(folders: dict[str, Path]) -> None:
    """A dynamic.json of another format, or pieces that do not cover the range, is one DriverError line."""
    from hw.dynamic_driver import DriverError

    d = json.loads((folders["vadd_rows"] / "dynamic.json").read_text())
    with pytest.raises(DriverError, match="format 1, this driver reads format 2"):
        Driver.from_json({**d, "format": 1})
    with pytest.raises(DriverError, match="the pieces end at"):
        Driver.from_json({**d, "pieces": d["pieces"][:-1]})
    with pytest.raises(DriverError, match=r"x.json: piece 1\.\.\d+: at rows=1 the regions end at 0x[0-9a-f]+, "
                                          r"past dram_end 0x40"):
        Driver.from_json({**d, "dram_end": 64}, "x.json")
    # each broken field its own line, naming what is wrong
    p0 = d["pieces"][0]
    n = len(p0["base"])
    for change, want in (({"align": 0}, "need align >= 1"),
                         ({"const_region": 0}, "const_region 0 is not a data region"),
                         ({"regions": d["regions"] + 1}, f"{n} base and {n} delta entries, {n + 1} expected"),
                         ({"pieces": [{**p0, "delta": p0["delta"][:-1]}] + d["pieces"][1:]},
                          f"{n} base and {n - 1} delta entries"),
                         ({"pieces": [{**p0, "base": ["1" * 40] + p0["base"][1:]}] + d["pieces"][1:]},
                          "entry 0 of base is not a 128-bit word"),
                         ({"pieces": [{**p0, "relocs": [[10 ** 6, 1, 0, 1]]}] + d["pieces"][1:]},
                          r"relocation \[1000000, 1, 0, 1\]")):
        with pytest.raises(DriverError, match=want):
            Driver.from_json({**d, **change}, "x.json")


def test_vadd_rows_takes_the_tile_the_config_holds() -> None:
    """small's accumulator holds tiles of 10 vectors for two operands: the example's tile follows the config."""
    from cosim.dynamic_run import dynamic_job

    for rows in (1, 11, 256):
        job = dynamic_job("vadd_rows", load_config("small"), [f"rows={rows}"])
        r = models.run_tlm(job)
        assert r.error is None and models.first_mismatch(job.golden, r.outputs) is None, rows


def test_a_driver_of_too_many_pieces_is_refused_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel whose stream changes shape at most values (vadd_rows has 16 pieces on default) is refused
    once the pieces pass the cap, naming the variable and how far they reached."""
    import compiler.dynamic as dyn
    from compiler.errors import ConfigFitError

    monkeypatch.setattr(dyn, "MAX_PIECES", 4)
    with pytest.raises(ConfigFitError, match=r"kernel 'vadd_rows': its instruction stream changes shape at more "
                                             r"than 4 values of 'rows' on config 'default' \(4 pieces cover 1\.\.\d+ "
                                             r"of 1\.\.256\)"):
        DYNAMIC_EXAMPLES["vadd_rows"].compile(CFG)


def test_a_relocation_off_the_dram_base_field_is_one_line(folders: dict[str, Path], tmp_path: Path) -> None:
    """dynamic.json against the folder's Program: a relocation off a LOAD's or STORE's dram_base field is
    refused naming the file (the run would otherwise add a region's address into another field)."""
    from cosim.dynamic_run import DynamicRunError, dynamic_job

    name = next(n for n in folders if any(p["relocs"] for p in
                                          json.loads((folders[n] / "dynamic.json").read_text())["pieces"]))
    d = tmp_path / "field"
    shutil.copytree(folders[name], d)
    doc = json.loads((d / "dynamic.json").read_text())
    doc["pieces"][0]["relocs"][0][2] = 127
    (d / "dynamic.json").write_text(json.dumps(doc))
    var = DYNAMIC_EXAMPLES[name].var
    with pytest.raises(DynamicRunError, match=r"field/dynamic.json: piece \d+\.\.\d+: relocation \[\d+, \d+, 127, "
                                              r"\.\.\.\] is not on the dram_base field of a LOAD or STORE"):
        dynamic_job(str(d), CFG, [f"{var.name}={var.lo}"])


@pytest.mark.parametrize("edit", ["drop", "twice"])
def test_a_dma_word_without_its_one_relocation_is_one_line(folders: dict[str, Path], tmp_path: Path,
                                                           edit: str) -> None:
    """Every LOAD and STORE of a piece moves with its region by one relocation: a dynamic.json whose
    relocation was removed (the word would keep the maximum's address: a fault or another tensor's data)
    or doubled is refused naming the piece and the word."""
    from cosim.dynamic_run import DynamicRunError, dynamic_job

    name = next(n for n in folders if any(p["relocs"] for p in
                                          json.loads((folders[n] / "dynamic.json").read_text())["pieces"]))
    d = tmp_path / edit
    shutil.copytree(folders[name], d)
    doc = json.loads((d / "dynamic.json").read_text())
    relocs = doc["pieces"][0]["relocs"]
    w = relocs[0][0]
    if edit == "drop":
        del relocs[0]
    else:
        relocs.append(list(relocs[0]))
    (d / "dynamic.json").write_text(json.dumps(doc))
    var = DYNAMIC_EXAMPLES[name].var
    with pytest.raises(DynamicRunError, match=rf"{edit}/dynamic.json: piece \d+\.\.\d+: word {w} is a (LOAD|STORE) "
                                              rf"with {0 if edit == 'drop' else 2} relocations"):
        dynamic_job(str(d), CFG, [f"{var.name}={var.lo}"])


def test_a_driver_that_gives_a_bad_word_or_lacks_a_key_is_one_line(folders: dict[str, Path], tmp_path: Path) -> None:
    """dynamic.json whose delta turns a word into one no instruction has (an unknown ALU op) names the file and
    the value; one without its pieces names the key."""
    from cosim.dynamic_run import DynamicRunError, dynamic_job

    name = next(iter(folders))
    var = DYNAMIC_EXAMPLES[name].var
    d = tmp_path / "word"
    shutil.copytree(folders[name], d)
    doc = json.loads((d / "dynamic.json").read_text())
    doc["pieces"][0]["delta"][0] = "f" * 32  # the first word moves to another each value
    (d / "dynamic.json").write_text(json.dumps(doc))
    v = min(var.lo + 1, doc["pieces"][0]["hi"])
    with pytest.raises(DynamicRunError, match=rf"word/dynamic.json: the Program it gives for {var.name}={v} is "
                                              rf"refused: instruction \d+: "):
        dynamic_job(str(d), CFG, [f"{var.name}={v}"])
    del doc["pieces"]
    (d / "dynamic.json").write_text(json.dumps(doc))
    with pytest.raises(DynamicRunError, match=r"word/dynamic.json: not a dynamic driver \(no key 'pieces'\)"):
        dynamic_job(str(d), CFG, [f"{var.name}={v}"])


def test_a_static_program_saved_over_a_dynamic_folder_leaves_no_driver(folders: dict[str, Path], tmp_path: Path,
                                                                      capsys) -> None:
    """The old dynamic.json, driver.h and driver.c go: the folder is the static Program's and runs as it."""
    d = tmp_path / "f"
    shutil.copytree(next(iter(folders.values())), d)
    assert main(["compile", "vadd", "-o", str(d)]) == 0
    assert not any((d / f).exists() for f in ("dynamic.json", "driver.h", "driver.c"))
    capsys.readouterr()
    assert main(["run", str(d), "--model", "tlm"]) == 0, capsys.readouterr().err


def test_disasm_of_a_dynamic_folder_names_the_value(folders: dict[str, Path], capsys) -> None:
    """`cosim disasm DIR` on a dynamic folder says it shows the maximum's Program; `--set` shows the
    Program of that value, which is the static compile's."""
    from hw.isa import insn_fields

    ex = DYNAMIC_EXAMPLES["mvm_token"]
    d = str(folders["mvm_token"])
    assert main(["disasm", d]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"; a dynamic Program: the Program of token={ex.var.max} (the maximum)"), first
    assert main(["disasm", d, "--set", "token=5", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["dynamic"] == {"token": 5}
    assert got["insns"] == [insn_fields(i) for i in ex.static(CFG, 5).insns]
    assert main(["disasm", d, "--set", "token=0"]) == 2
    assert "out of range" in capsys.readouterr().err


def test_a_driver_whose_program_is_refused_names_dynamic_json(folders: dict[str, Path], tmp_path: Path) -> None:
    """A hand-edited dynamic.json whose layout rule misplaces the regions: the Program refused names the
    driver file and the value."""
    d = tmp_path / "ed"
    shutil.copytree(folders["mvm_token"], d)
    data = json.loads((d / "dynamic.json").read_text())
    (d / "dynamic.json").write_text(json.dumps({**data, "align": 3}))
    with pytest.raises(ValueError, match=r"dynamic\.json: the Program it gives for token=7 is refused: .*not aligned"):
        dynamic_job(str(d), None, ["token=7"])


USER_KERNEL = f"{Path(__file__).parent / 'kernels' / 'sectioned.py'}:sectioned_add"


def test_user_kernel_with_a_variable_from_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`cosim compile FILE.py:fn --var n=40 -p X=nx16 ...` writes a dynamic folder; `cosim run DIR --set n=V`
    (from another directory) equals the static compile of V: outputs against golden, cycles, sections."""
    out = tmp_path / "dyn"
    assert main(["compile", USER_KERNEL, "--var", "n=40", "-p", "X=nx16", "-p", "Y=nx16:int8", "-p", "tile=8",
                 "-o", str(out), "--json"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["variable"] == "n" and line["range"] == [1, 40]
    monkeypatch.chdir(tmp_path)
    for v in (1, 9, 40):
        models_arg = "all" if v == 9 and models.rtl_available() is None else "tlm"
        assert main(["run", str(out), "--set", f"n={v}", "--model", models_arg, "--seed", str(v), "--json"]) == 0
        rep = json.loads(capsys.readouterr().out)
        got = rep.get("results", [rep])
        static = models.make_job(USER_KERNEL, CFG, {"X": f"{v}x16", "Y": f"{v}x16:int8", "tile": 8})
        want = models.tlm(static.program).cycles
        assert all(r["match"] is True for r in got), got
        assert [r["cycles"] for r in got if r["model"] in ("tlm", "rtl")] in ([want], [want, want]), (v, got)
        assert dynamic_job(str(out), None, [f"n={v}"]).program.meta["sections"] == static.program.meta["sections"]


def test_user_kernel_with_a_variable_takes_its_inputs_hook(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The file's `<fn>_inputs(rng, **args)` makes the inputs of each value (called with that value's shapes),
    as for a static user kernel; a hook whose array does not fit the value is one line naming it."""
    src = tmp_path / "k.py"
    src.write_text(Path(USER_KERNEL.rsplit(":", 1)[0]).read_text() + textwrap.dedent("""

        def sectioned_add_inputs(rng, X, **params):
            rows = 3 if params.get("tile") == 99 else X.shape[0]  # a hook that ignores the value's shape
            return {"X": (np.arange(rows * X.shape[1]).reshape(rows, X.shape[1]) % 101) - 50}
        """))
    out = tmp_path / "dyn"
    assert main(["compile", f"{src}:sectioned_add", "--var", "n=12", "-p", "X=nx16", "-p", "Y=nx16:int8",
                 "-o", str(out)]) == 0
    for v in (1, 5, 12):
        job = dynamic_job(str(out), None, [f"n={v}"])
        x = job.program.inputs["X"].reshape(-1)[:v * 16]
        assert np.array_equal(x, np.arange(v * 16) % 101 - 50), v
        assert np.array_equal(job.expected["Y"].reshape(-1)[:v * 16], (x + 3).astype(np.int8)), v
    capsys.readouterr()
    assert main(["run", str(out), "--set", "n=5", "--model", "tlm"]) == 0, capsys.readouterr().err
    bad = tmp_path / "bad"
    assert main(["compile", f"{src}:sectioned_add", "--var", "n=12", "-p", "X=nx16", "-p", "Y=nx16:int8",
                 "-p", "tile=99", "-o", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "input 'X' from 'sectioned_add_inputs' has shape (3, 16)" in err and "\n" not in err, err


_ADD = """
    import numpy as np
    from compiler import S

    @S.kernel
    def add3(X, Y):
        n = X.nvec
        acc = S.acc
        S.load(acc[0:n], X)
        S.add(acc[0:n], 3)
        S.store(Y, acc[0:n])

    def add3_reference(X):
        return {"Y": (X.astype(np.int64) + OFFSET).astype(np.int32)}

    @S.kernel
    def zdiv(X, Y):
        k = 8 // (X.nvec - 3)
        acc = S.acc
        S.load(acc[0:X.nvec], X)
        S.store(Y, acc[0:X.nvec])
    """


def _add_file(tmp_path: Path, offset: int) -> Path:
    src = tmp_path / "add.py"
    src.write_text(textwrap.dedent(_ADD).replace("OFFSET", str(offset)))
    return src


def _compile_add(src: Path, out: Path, fn: str = "add3", var: str = "n=12") -> int:
    return main(["compile", f"{src}:{fn}", "--var", var, "-p", "X=nx8", "-p", "Y=nx8:int8", "--config", "small",
                 "-o", str(out)])


def test_user_kernel_with_a_variable_is_checked_against_its_reference(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The file's `<fn>_reference` judges golden at every value, as for a static user kernel: a wrong
    reference is a golden mismatch (exit 1), a right one passes."""
    out = tmp_path / "dyn"
    assert _compile_add(_add_file(tmp_path, 4), out) == 0
    capsys.readouterr()
    assert main(["run", str(out), "--set", "n=5", "--model", "golden"]) == 1
    assert "MISMATCH" in capsys.readouterr().out
    _add_file(tmp_path, 3)  # the kernel is the same: only the reference changed
    assert main(["run", str(out), "--set", "n=5", "--model", "golden"]) == 0, capsys.readouterr()


def test_user_kernel_changed_since_compile_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A kernel file edited after `cosim compile` (or a folder whose record of it was edited) would judge
    the models against another kernel's golden outputs: refused in one line, naming the folder."""
    out = tmp_path / "dyn"
    src = _add_file(tmp_path, 3)
    assert _compile_add(src, out) == 0
    src.write_text(src.read_text().replace("S.add(acc[0:n], 3)", "S.add(acc[0:n], 4)"))
    capsys.readouterr()
    assert main(["run", str(out), "--set", "n=7", "--model", "tlm"]) == 2
    err = capsys.readouterr().err.strip()
    assert "layout.json" in err and "no longer compiles to this folder's Program at n=7" in err and "\n" not in err
    _add_file(tmp_path, 3)
    edit = json.loads((out / "layout.json").read_text())
    edit["meta"]["dynamic_kernel"]["var"] = "n=6"
    (out / "layout.json").write_text(json.dumps(edit))
    assert main(["run", str(out), "--set", "n=5", "--model", "tlm"]) == 2
    assert "gives 'n' 1..6, but" in capsys.readouterr().err


def test_user_kernel_params_defaults_may_use_the_variable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`<fn>_params` defaults written as text (`"X": "nx8"`) take the variable as -p items do; a -p item
    still wins over its default."""
    src = _add_file(tmp_path, 3)
    src.write_text(src.read_text() + '\nadd3_params = {"X": "nx8", "Y": "nx8:int8"}\n')
    out = tmp_path / "dyn"
    assert main(["compile", f"{src}:add3", "--var", "n=12", "--config", "small", "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["range"] == [1, 12]
    assert main(["run", str(out), "--set", "n=5", "--model", "tlm"]) == 0, capsys.readouterr().err
    assert dynamic_job(str(out), None, ["n=5"]).program.region("X").nbytes == 5 * 8 * 4
    wide = tmp_path / "wide"
    assert main(["compile", f"{src}:add3", "--var", "n=6", "-p", "X=nx16", "-p", "Y=nx16:int8", "--config", "small",
                 "-o", str(wide)]) == 0
    assert dynamic_job(str(wide), None, ["n=5"]).program.region("X").nbytes == 5 * 16 * 4


@pytest.mark.parametrize("argv, message", [
    (["--var", "n=12", "-p", "X=nx8x", "-p", "Y=nx8:int8"], "param 'X': 'nx8x' uses 'n' but is neither"),
    (["--var", "n=12", "-p", "X=-nx8", "-p", "Y=nx8:int8"], "param 'X': '-nx8' uses 'n'"),
    (["--var", "X=12", "-p", "X=Xx8", "-p", "Y=Xx8:int8"], "'X' is a parameter of kernel 'add3'"),
    (["--var", "n=12", "--var", "m=9", "-p", "X=nx8", "-p", "Y=mx8:int8"], "--var is given 2 times"),
    (["--var", "n=\u0663\u0664", "-p", "X=nx8", "-p", "Y=nx8:int8"], "expected NAME=MAX or NAME=MIN..MAX"),
    (["--var", "n=0", "-p", "X=nx8", "-p", "Y=nx8:int8"], "--var 'n=0': variable 'n': needs integers"),
])
def test_user_kernel_variable_misuse_is_one_line(argv: list[str], message: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    src = _add_file(tmp_path, 3)
    assert main(["compile", f"{src}:add3", *argv, "--config", "small", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "internal error" not in err, err


def test_user_kernel_that_fails_at_some_values_names_the_value(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A kernel raising at one value of the range (8 // (n - 3) at n=3) is one line naming the kernel's file
    and line and the value, not an internal error; a --set that is not decimal digits is refused."""
    src = _add_file(tmp_path, 3)
    assert _compile_add(src, tmp_path / "z", fn="zdiv") == 2
    err = capsys.readouterr().err.strip()
    assert "kernel 'zdiv'" in err and f"{src}:" in err and "ZeroDivisionError" in err and "(compiling n=3 of 1..12)" in err, err
    assert _compile_add(src, tmp_path / "ok") == 0
    capsys.readouterr()
    for bad in ("n=0x5", "n=\u0665", "n=5_0"):
        assert main(["run", str(tmp_path / "ok"), "--set", bad]) == 2
        assert "expected NAME=INTEGER" in capsys.readouterr().err
    assert main(["run", f"{src}:add3", "-p", "X=5x8", "-p", "Y=5x8:int8", "--set", "n=5"]) == 2
    assert "--set is for a dynamic Program" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--var", "n=40", "-p", "X=16x16", "-p", "Y=16x16:int8"], "--var n: no -p parameter uses 'n'"),
    (["--var", "n", "-p", "X=nx16"], "expected NAME=MAX or NAME=MIN..MAX"),
    (["--var", "n=5..3", "-p", "X=nx16"], "needs integers 1 <= min <= max"),
    (["--var", "n=40", "-p", "X=nx16", "-p", "X=nx16"], "param 'X' is given twice"),
    (["--var", "n=40", "-p", "X=nx0", "-p", "Y=nx16:int8"], "has a dimension <= 0"),
    (["--var", "n=40", "-p", "X=nx16", "-p", "Y=nx16:int8", "--seed", "3"], "draws its inputs when it is run"),
    (["--var", "n=100000000", "-p", "X=nx16", "-p", "Y=nx16:int8"], "does not fit the 16777216-byte DRAM"),
])
def test_user_kernel_variable_refusals(argv: list[str], message: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", USER_KERNEL, *argv, "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err, err
    assert not (tmp_path / "o").exists()


def test_user_folder_whose_kernel_is_gone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "k.py"
    shutil.copy(USER_KERNEL.rsplit(":", 1)[0], src)
    out = tmp_path / "dyn"
    assert main(["compile", f"{src}:sectioned_add", "--var", "n=12", "-p", "X=nx16", "-p", "Y=nx16:int8",
                 "-o", str(out)]) == 0
    src.unlink()
    capsys.readouterr()
    assert main(["run", str(out), "--set", "n=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot re-create the kernel of meta.dynamic_kernel" in err and "no such kernel file" in err
    assert main(["compile", "vadd", "--var", "n=4", "-o", str(tmp_path / "v")]) == 2
    assert "--var is for a dynamic example (a narrower range) or a user kernel" in capsys.readouterr().err


def test_a_dynamic_example_in_a_narrower_range(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """--var narrows a dynamic example's range: mvm_token's 1..2048 needs more than the cap of driver pieces
    on small (256; 6 here, to be quick: the refusal names --var), 2..40 compiles and runs there, by name and as
    a folder whose narrower range the run keeps (a value past it is refused); a range that is not the
    example's own variable, or wider, is one line."""
    import compiler.dynamic as dyn

    small = load_config("small")
    monkeypatch.setattr(dyn, "MAX_PIECES", 6)
    with pytest.raises(CompileError, match=r"changes shape at more than 6 values of 'token' on config 'small' "
                                           r".*give a narrower range \(--var token=MAX or MIN\.\.MAX\)"):
        DYNAMIC_EXAMPLES["mvm_token"].compile(small)
    monkeypatch.undo()
    out = tmp_path / "mvm"
    assert main(["compile", "mvm_token", "--var", "token=2..40", "--config", "small", "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["range"] == [2, 40]
    for kernel, extra in ((str(out), []), ("mvm_token", ["--var", "token=2..40", "--config", "small"])):
        for v in (2, 17, 40):
            assert main(["run", kernel, *extra, "--set", f"token={v}", "--model", "tlm", "--json"]) == 0
            rep = json.loads(capsys.readouterr().out)
            static = DYNAMIC_EXAMPLES["mvm_token"].static(small, v)
            assert rep["match"] is True and rep["cycles"] == models.tlm(static).cycles, (kernel, v, rep)
        for v in (1, 41):
            assert main(["run", kernel, *extra, "--set", f"token={v}", "--model", "tlm"]) == 2
            assert f"{v} is out of range 2..40" in capsys.readouterr().err
    for argv, message in ((["mvm_token", "--var", "rows=9"], "has the variable 'token' (1..2048), not 'rows'"),
                          (["mvm_token", "--var", "token=0..9"], "needs integers 1 <= min <= max"),
                          (["mvm_token", "--var", "token=4096"], "--var can only narrow that range"),
                          ([str(out), "--var", "token=9"], "a Program folder's range was fixed by cosim compile"),
                          (["vadd", "--var", "n=9"], "an example's parameters are fixed when it is compiled"),
                          (["mvm_token", "--var", "token=9", "--var", "token=8"], "--var is given 2 times")):
        assert main(["run", *argv, "--set", "token=3", "--model", "tlm"]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, (argv, err)


def test_a_user_kernel_with_a_variable_runs_without_a_folder(capsys: pytest.CaptureFixture[str]) -> None:
    """`cosim run FILE.py:fn --var n=40 -p X=nx16 ... --set n=V` compiles in memory and runs as the folder does."""
    for v in (1, 23):
        assert main(["run", USER_KERNEL, "--var", "n=40", "-p", "X=nx16", "-p", "Y=nx16:int8", "-p", "tile=8",
                     "--set", f"n={v}", "--model", "tlm", "--json"]) == 0
        rep = json.loads(capsys.readouterr().out)
        static = models.make_job(USER_KERNEL, CFG, {"X": f"{v}x16", "Y": f"{v}x16:int8", "tile": 8})
        assert rep["match"] is True and rep["cycles"] == models.tlm(static.program).cycles, (v, rep)


def test_a_dynamic_network_on_several_cores_is_refused_as_a_kernel_is() -> None:
    cfg = load_config("small2")
    with pytest.raises(CompileError, match="dynamic shapes run on one core; config 'small2' has 2"):
        DYNAMIC_EXAMPLES["digits_batch"].compile(cfg)
