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
    # an edited expected.npz is caught by the golden re-run
    save_npz(d / "expected.npz", {"y": expected["y"] + np.float32(1.0)})
    code, out, err = run_cli(capsys, "run", str(d), "--model", "golden")
    assert code == 1 and "expected.npz differs from the golden re-run: output 'y'" in out


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
