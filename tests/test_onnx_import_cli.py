"""`cosim import MODEL.onnx -o DIR` and `cosim run DIR`: the Program folder in ONNX's names and dtypes,
every model agreeing with golden, --check against onnxruntime, a stale expected.npz caught, a refused
model in one line (exit 2), the supported ops in --help; one RTL run on the small config."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from compiler.onnx_import.imported import load_npz, save_npz
from cosim.cli import main as cosim_main
from cosim.models import rtl_available
from tests import onnx_models as M


@pytest.fixture(scope="module")
def qmodel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return M.quantize(M.tiny_cnn(), tmp_path_factory.mktemp("onnx"), "QDQ", "QUInt8", per_channel=True)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cosim_main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_import_then_run_on_golden_iss_tlm(qmodel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "m"
    code, out, err = run_cli(capsys, "import", str(qmodel), "-o", str(d), "--check")
    assert code == 0, err
    assert "within 1 LSB" in out and "QuantizeLinear 'x_QuantizeLinear'" in out
    for f in ("insn.bin", "regs.json", "layout.json", "program.lst", "dram.bin", "model.onnx"):
        assert (d / f).is_file(), f
    inputs, expected = load_npz(d / "inputs.npz"), load_npz(d / "expected.npz")
    assert list(inputs) == ["x"] and inputs["x"].dtype == np.float32 and inputs["x"].shape == (2, 3, 8, 8)
    assert list(expected) == ["y"] and expected["y"].dtype == np.float32 and expected["y"].shape == (2, 10)
    for model in ("golden", "iss", "tlm"):
        code, out, err = run_cli(capsys, "run", str(d), "--model", model, "--json")
        assert code == 0, out + err
        rep = json.loads(out)
        assert rep["match"] is True, rep
    code, out, err = run_cli(capsys, "disasm", str(d))
    assert code == 0 and "; section /conv1/Conv" in out
    # an edited expected.npz is caught by the golden re-run, also where golden is not one of the models run
    save_npz(d / "expected.npz", {"y": expected["y"] + np.float32(1.0)})
    code, out, err = run_cli(capsys, "run", str(d), "--model", "golden")
    assert code == 1 and "expected.npz differs from the golden re-run: output 'y'" in out
    code, out, err = run_cli(capsys, "run", str(d), "--model", "tlm")
    assert code == 1 and " ok " in out and len(err.strip().splitlines()) == 1, out + err
    assert "expected.npz differs from the golden re-run: output 'y'" in err, err
    assert "changed since the folder was written" in err, err


def test_the_folder_spares_the_user_s_model_and_files(qmodel: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The folder keeps the model as model.onnx: importing a model.onnx into its own folder, or into a folder
    of the user's that holds another model.onnx, is refused and leaves the file as it was; an earlier
    import's folder is written again. A folder of other files with a Program folder's names is refused by
    import and compile alike."""
    own = tmp_path / "own"
    own.mkdir()
    (own / "model.onnx").write_bytes(qmodel.read_bytes())
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "model.onnx").write_bytes(b"the user's file")
    for src, d, words in ((own / "model.onnx", own, "is the model being imported"),
                          (qmodel, theirs, "not one cosim import wrote")):
        before = (d / "model.onnx").read_bytes()
        code, out, err = run_cli(capsys, "import", str(src), "-o", str(d))
        assert code == 2 and len(err.strip().splitlines()) == 1 and words in err, err
        assert (d / "model.onnx").read_bytes() == before and not (d / "insn.bin").exists()
    again = tmp_path / "again"
    assert run_cli(capsys, "import", str(qmodel), "-o", str(again))[0] == 0
    assert run_cli(capsys, "import", str(qmodel), "-o", str(again), "--seed", "4")[0] == 0
    fw = tmp_path / "firmware"  # a folder of the user's with files of a Program folder's names: refused, untouched
    fw.mkdir()
    (fw / "regs.h").write_text("// the user's registers\n")
    (fw / "inputs.npz").write_bytes(b"the user's data")
    for cmd in (["import", str(qmodel)], ["compile", "vadd"]):
        code, out, err = run_cli(capsys, *cmd, "-o", str(fw))
        assert code == 2 and len(err.strip().splitlines()) == 1 and "regs.h, inputs.npz are there" in err, err
        assert sorted(p.name for p in fw.iterdir()) == ["inputs.npz", "regs.h"]
        assert (fw / "regs.h").read_text() == "// the user's registers\n"


def test_check_that_onnxruntime_cannot_run_says_the_folder_is_written(qmodel: Path, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The per-channel model declared at opset 10 (where DequantizeLinear has no axis): the importer maps it,
    onnxruntime refuses to load it; the one error line says the folder is there, unchecked."""
    import onnx

    m = onnx.load(str(qmodel))
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = 10
    old = tmp_path / "opset10.onnx"
    onnx.save(m, str(old))
    d = tmp_path / "m"
    code, out, err = run_cli(capsys, "import", str(old), "-o", str(d), "--check")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "onnxruntime cannot run" in err and f"the folder {d} is written, unchecked" in err, err
    assert run_cli(capsys, "run", str(d), "--model", "tlm")[0] == 0


@pytest.mark.parametrize("s2", [0.005, 0.08])
def test_check_takes_the_graph_as_written_where_onnxruntime_s_fusions_drop_a_requantization(
        s2: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """conv -> Q/DQ (scale 0.05) -> Identity -> Q/DQ (scale s2): onnxruntime's graph optimizations fuse
    the pairs and skip the first requantization (0.005: many steps off; 0.08: within a step, yet not equal);
    --check also compares with the graph as written (onnxruntime's optimizations off) whenever an output is
    not equal, and before it fails: the import is exact against it (0.08: within a step)."""
    from onnx import TensorProto as T
    from onnx import helper as h

    rng = np.random.default_rng(8)
    q, dq = "QuantizeLinear", "DequantizeLinear"
    nodes = [h.make_node(q, ["x", "sx", "z"], ["xq"]), h.make_node(dq, ["xq", "sx", "z"], ["xf"]),
             h.make_node(dq, ["Wq", "sw", "z"], ["Wf"]), h.make_node("Conv", ["xf", "Wf"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node(q, ["c", "s1", "z"], ["cq"]), h.make_node(dq, ["cq", "s1", "z"], ["cf"]),
             h.make_node("Identity", ["cf"], ["o"]), h.make_node(q, ["o", "s2", "z2"], ["oq"]),
             h.make_node(dq, ["oq", "s2", "z2"], ["y"])]
    inits = {"sx": np.float32(0.02), "z": np.int8(0), "Wq": rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8),
             "sw": np.float32(0.01), "s1": np.float32(0.05), "s2": np.float32(s2), "z2": np.int8(2)}
    path = tmp_path / "identity_requant.onnx"
    onnx.save(M.model(nodes, [("x", T.FLOAT, [1, 3, 6, 6])], [("y", T.FLOAT, [1, 4, 6, 6])], inits), str(path))
    code, out, err = run_cli(capsys, "import", str(path), "-o", str(tmp_path / "d"), "--check", "--json")
    assert code == 0, err
    rep = json.loads(out)
    # onnxruntime as it runs by default: the fused graph
    assert (rep["check"][0]["within_one_lsb"] < 0.99) == (s2 < 0.05) and rep["check"][0]["equal"] < 1, rep
    assert rep["check_unoptimized"][0]["equal" if s2 < 0.05 else "within_one_lsb"] == 1.0, rep


def test_a_model_file_given_to_run_and_a_garbage_input_file(qmodel: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`cosim run MODEL.onnx` says to import it first; an --input file that is no .npz at all says so (numpy
    would advise allow_pickle, which would not help)."""
    code, _, err = run_cli(capsys, "run", str(qmodel), "--model", "tlm")
    assert code == 2 and "an ONNX model; import it into a Program folder first (cosim import" in err, err
    (tmp_path / "bad.npz").write_text("garbage\n")
    code, _, err = run_cli(capsys, "import", str(qmodel), "-o", str(tmp_path / "m"), "--input",
                           str(tmp_path / "bad.npz"))
    assert code == 2 and "not an .npz archive (np.savez writes one" in err and "pickle" not in err, err


def test_a_batch_given_does_not_re_batch_a_fixed_one(qmodel: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """--batch fixes a symbolic batch; on a model whose batch is fixed at 2 it is refused unless it is 2."""
    code, out, err = run_cli(capsys, "import", str(qmodel), "-o", str(tmp_path / "b3"), "--batch", "3")
    assert code == 2 and "batch 3: input 'x' has a fixed batch of 2" in err, err
    assert run_cli(capsys, "import", str(qmodel), "-o", str(tmp_path / "b2"), "--batch", "2")[0] == 0


def test_float64_inputs_are_stored_as_the_model_s_float32(qmodel: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """--input data of float64 for a float32 input is stored as the float32 the model runs (onnxruntime
    takes the folder's inputs.npz as it is)."""
    save_npz(tmp_path / "x.npz", {"x": np.random.default_rng(2).normal(0, 1, (2, 3, 8, 8))})
    assert run_cli(capsys, "import", str(qmodel), "-o", str(tmp_path / "m"), "--input", str(tmp_path / "x.npz"))[0] == 0
    assert load_npz(tmp_path / "m" / "inputs.npz")["x"].dtype == np.float32


def test_import_with_given_inputs_json(qmodel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = np.random.default_rng(9).normal(0, 1, (2, 3, 8, 8)).astype(np.float32)
    save_npz(tmp_path / "x.npz", {"x": x})
    code, out, err = run_cli(capsys, "import", str(qmodel), "-o", str(tmp_path / "m"), "--input",
                             str(tmp_path / "x.npz"), "--check", "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["batch"] == 2 and rep["check"][0]["within_one_lsb"] >= 0.99
    assert [h["op"] for h in rep["host_ops"]] == ["QuantizeLinear", "DequantizeLinear"]
    np.testing.assert_array_equal(load_npz(tmp_path / "m" / "inputs.npz")["x"], x)


def test_refused_model_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    m = M.model([h.make_node("Sigmoid", ["x"], ["y"], name="act/sigmoid")], [("x", T.FLOAT, [1, 4])],
                [("y", T.FLOAT, [1, 4])], {}, "sig")
    onnx.save(m, tmp_path / "s.onnx")
    code, out, err = run_cli(capsys, "import", str(tmp_path / "s.onnx"), "-o", str(tmp_path / "m"))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("cosim import: error: node 'act/sigmoid' (Sigmoid): op Sigmoid is not supported")
    code, out, err = run_cli(capsys, "import", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "m"))
    assert code == 2 and "no such ONNX file" in err and err.count("\n") == 1


def test_help_lists_the_supported_ops(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "import", "--help")
    assert code == 0
    for op in ("QLinearConv", "ConvInteger", "MatMulInteger", "QLinearAdd", "QLinearGlobalAveragePool", "Gemm",
               "GlobalAveragePool", "Concat"):
        assert op in out, op


@pytest.mark.skipif(rtl_available() is not None, reason="no RTL model here")
def test_rtl_runs_an_imported_model_on_the_small_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    q = M.quantize(M.mlp(batch=2), tmp_path, "QOperator", "QInt8")
    d = tmp_path / "m"
    code, out, err = run_cli(capsys, "import", str(q), "-o", str(d), "--config", "small")
    assert code == 0, err
    code, out, err = run_cli(capsys, "run", str(d), "--model", "all", "--json")
    assert code == 0, out + err
    rep = json.loads(out)
    assert rep["match"] is True and [r["model"] for r in rep["results"]] == ["golden", "iss", "tlm", "rtl"]
    tlm, rtl = (next(r for r in rep["results"] if r["model"] == m) for m in ("tlm", "rtl"))
    assert tlm["cycles"] == rtl["cycles"] > 0


def test_net_runs_an_onnx_model_like_a_network(qmodel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "net", str(qmodel), "--images", "4", "--model", "tlm", "--json")
    assert code == 0, out + err
    rep = json.loads(out)
    assert rep["match"] is True and rep["images"] == 4 and rep["cycles"]["tlm"] > 0


def test_symbolic_batch_is_fixed_by_batch(qmodel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An exported model's symbolic batch ('N') is refused in one line that says to give --batch; with
    --batch 3 it imports for 3 samples and runs; `cosim net` takes it as it is (per-sample graph)."""
    import onnx

    from compiler.onnx_import.model import with_batch

    m = onnx.load(str(qmodel))
    for vi in list(m.graph.input) + list(m.graph.output):
        vi.type.tensor_type.shape.dim[0].dim_param = "N"
    path = tmp_path / "dyn.onnx"
    onnx.save(m, str(path))
    code, _, err = run_cli(capsys, "import", str(path), "-o", str(tmp_path / "a"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "dynamic dimension 'N'" in err and "--batch N" in err
    code, out, err = run_cli(capsys, "import", str(path), "-o", str(tmp_path / "b"), "--batch", "3")
    assert code == 0, err
    assert load_npz(tmp_path / "b" / "inputs.npz")["x"].shape[0] == 3
    assert run_cli(capsys, "run", str(tmp_path / "b"), "--model", "tlm")[0] == 0
    assert with_batch(m, 5).graph.output[0].type.tensor_type.shape.dim[0].dim_value == 5
    code, _, err = run_cli(capsys, "import", str(path), "-o", str(tmp_path / "c"), "--batch", "0")
    assert code == 2 and "--batch" in err
    code, out, err = run_cli(capsys, "net", str(path), "--model", "tlm")
    assert code == 0, err


def test_bad_inputs_and_folder_files_name_the_file(qmodel: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """An --input file with a name the model does not have, an imported folder whose inputs.npz does, or
    whose model.onnx is one the importer refuses: one line starting with that file."""
    save_npz(tmp_path / "two.npz", {"a": np.zeros((2, 3, 8, 8), np.float32)})
    code, out, err = run_cli(capsys, "import", str(qmodel), "-o", str(tmp_path / "m"), "--input",
                             str(tmp_path / "two.npz"))
    assert code == 2 and err.strip() == (f"cosim import: error: {tmp_path / 'two.npz'}: 'a' is not an input of the "
                                         f"model (its inputs: x)"), err
    d = tmp_path / "ok"
    assert run_cli(capsys, "import", str(qmodel), "-o", str(d))[0] == 0
    x = load_npz(d / "inputs.npz")
    save_npz(d / "inputs.npz", {**x, "zz": x["x"]})
    code, out, err = run_cli(capsys, "run", str(d), "--model", "iss")
    assert code == 2 and err.strip().startswith(f"cosim run: error: {d / 'inputs.npz'}: 'zz' is not an input"), err
    save_npz(d / "inputs.npz", x)
    m = onnx.load(str(d / "model.onnx"))
    m.graph.node.append(onnx.helper.make_node("Sigmoid", [m.graph.output[0].name], ["s2"], name="sig"))
    m.graph.output[0].name = "s2"
    onnx.save(m, str(d / "model.onnx"))
    code, out, err = run_cli(capsys, "run", str(d), "--model", "iss")
    assert code == 2 and err.strip().startswith(f"cosim run: error: {d / 'model.onnx'}: node 'sig' (Sigmoid)"), err
