"""The ONNX node-case conformance suite (cosim.onnx_conformance): the selection, the Q/DQ wrapping of
float cases, the whole suite on golden/ISS/TLM with its counts held here and in docs/onnx.md, two
cases on the RTL, the table and `cosim conformance`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cosim.cli import main
from cosim.models import rtl_available
from cosim.onnx_conformance import cases, prepare, runner, table

DOC = Path(__file__).resolve().parents[1] / "docs" / "onnx.md"
# The suite's counts on golden, ISS and TLM: a change here is a change of what the accelerator runs.
EXPECTED_COUNTS = {"cases": 118, "passed": 40, "refused": 78, "failed": 0}
# The failing cases by name.
EXPECTED_FAILED: set[str] = set()


@pytest.fixture(scope="module")
def node_cases() -> list[cases.NodeCase]:
    return cases.collect()


@pytest.fixture(scope="module")
def results(node_cases: list[cases.NodeCase]) -> list[runner.CaseResult]:
    return runner.run_suite(node_cases, ("golden", "iss", "tlm"))


def test_selection_is_the_ops_of_the_suite(node_cases: list[cases.NodeCase]) -> None:
    names = [c.name for c in node_cases]
    assert len(names) == len(set(names)) == EXPECTED_COUNTS["cases"]
    for must in ("qlinearconv", "qlinearmatmul_2D_int8_float32", "matmulinteger", "convinteger_with_padding",
                 "quantizelinear", "dequantizelinear_axis", "maxpool_2d_uint8", "averagepool_2d_strides",
                 "globalaveragepool", "globalmaxpool", "relu", "add_int8", "conv_with_autopad_same",
                 "basic_conv_without_padding", "gemm_all_attributes", "matmul_2d", "flatten_axis1", "reshape_zero_dim"):
        assert must in names, must
    assert all(cases.selected(n) for n in names)
    assert not cases.selected("conv_transpose") and not cases.selected("test_maxpool_1d_default")
    assert all(len(c.model.graph.node) == 1 for c in node_cases)


def test_activation_scale_covers_the_data_and_zero() -> None:
    a = np.array([-0.5, 0.25, 3.0], np.float32)
    s, z = prepare.activation_qparams(a)
    q = np.clip(np.rint(a / np.float32(s)) + z, -128, 127)
    assert q.min() == -128 and q.max() == 127
    assert np.all(np.abs((q - z) * s - a) <= s / 2 + 1e-7)
    assert prepare.activation_qparams(np.array([1.0, 2.0], np.float32))[1] == -128  # 0 is in range: zero point at the bottom
    assert prepare.activation_qparams(np.zeros(3, np.float32)) == (1.0, -128)


def test_wrapped_float_cases_stay_close_to_the_float_result(node_cases: list[cases.NodeCase]) -> None:
    """The Q/DQ wrapping changes a float case only by its quantization: the evaluator's result on the
    wrapped model is a few output steps from ONNX's float expected output, and onnxruntime agrees
    with the evaluator within one step."""
    wrapped = 0
    no_kernel: list[str] = []
    for c in node_cases:
        if not prepare.is_float_case(c) or any(a.size == 0 for a in c.inputs):
            continue
        p = prepare.prepare(c)
        assert p.form == "float, wrapped in Q/DQ" and p.model.opset_import[0].version >= 19
        assert set(p.inputs) <= set(c.input_names)
        ref = runner.reference(p.model, p.inputs)
        (name, lsb), = p.lsb.items()
        err = np.abs(ref[name].astype(np.float64) - c.outputs[0]) / lsb
        assert err.max() <= (0.5 if p.exact else 8), (c.name, err.max())  # input rounding adds up
        try:
            ort = runner.onnxruntime_outputs(p.model, p.inputs)
        except Exception:  # noqa: BLE001 - onnxruntime's graph optimizer rejects one case (below)
            no_kernel.append(c.name)
            continue
        assert runner.distance(ort, ref, p.lsb).max_lsb <= 1, c.name
        wrapped += 1
    assert wrapped >= 60
    # onnxruntime fuses Q/DQ around AveragePool into QLinearAveragePool, which has no dilations
    assert no_kernel == ["averagepool_2d_dilations"]


def test_integer_cases_keep_their_expected_outputs(node_cases: list[cases.NodeCase]) -> None:
    """Freezing the parameters of an integer case into initializers leaves ONNX's expected output."""
    frozen = 0
    for c in node_cases:
        if prepare.is_float_case(c) or not cases.numpy_arrays(c.inputs + c.outputs):
            continue
        p = prepare.prepare(c)
        assert p.form == "integer" and len(p.model.graph.input) == len(p.inputs) <= 2
        ref = runner.reference(p.model, p.inputs)
        assert runner.distance(ref, dict(zip(c.output_names, c.outputs)), p.lsb).max_lsb == 0, c.name
        frozen += 1
    assert frozen >= 15


def test_unrepresentable_data_is_refused_before_the_importer(node_cases: list[cases.NodeCase]) -> None:
    c = next(c for c in node_cases if c.name == "quantizelinear_int4")
    with pytest.raises(prepare.Refusal, match="int4"):
        prepare.prepare(c)


def test_suite_counts_are_held(results: list[runner.CaseResult]) -> None:
    assert table.counts(results) == EXPECTED_COUNTS, table.summary(results)
    assert {r.case for r in results if r.status == runner.FAILED} == EXPECTED_FAILED


def test_docs_table_is_the_suite_of_this_tree(results: list[runner.CaseResult]) -> None:
    doc = DOC.read_text()
    stale = "docs/onnx.md is stale: cosim conformance nodes --markdown docs/onnx.md"
    assert table.doc_counts(doc) == table.counts(results), stale
    assert f"{table.BEGIN}\n{table.markdown(results)}{table.END}" in doc, stale


def test_every_verdict_is_one_line_and_passes_are_within_bounds(results: list[runner.CaseResult]) -> None:
    for r in results:
        assert "\n" not in r.reason
        if r.status == runner.PASSED:
            assert r.reason == "" and set(r.distances) == {"golden", "iss", "tlm"}
            assert all(d.max_lsb <= (0 if r.exact else 1) for d in r.distances.values()), r.case
        else:
            assert r.reason, r.case
        if r.status == runner.REFUSED and r.form:  # refused by the importer: its line names the node or the model
            assert r.reason.startswith(("node '", "model: ")), r.reason


def test_reason_kind_drops_the_particulars() -> None:
    a = table.reason_kind("node 'y' (MaxPool): dilations [2, 2] are not supported (only 1)")
    b = table.reason_kind("node '/a/b' (MaxPool): dilations [3, 1] are not supported (only 1)")
    assert a == b == "MaxPool: dilations [..] are not supported (only 1)"
    assert table.reason_kind("model: input 'x' is uint16: float32 only") == "model: input X is T: float32 only"


def test_distance_counts_steps() -> None:
    d = runner.distance({"y": np.array([1.0, 2.5, 3.0], np.float32)}, {"y": np.array([1.0, 2.0, 4.0])}, {"y": 0.5})
    assert (d.elements, d.max_lsb, d.off_by_one) == (3, 2.0, 1)
    d = runner.distance({"y": np.array([3], np.int32)}, {"y": np.array([3], np.int32)}, {"y": 1.0})
    assert (d.max_lsb, d.off_by_one) == (0.0, 0)
    assert runner.distance({"y": np.zeros(2)}, {"y": np.zeros(3)}, {}).max_lsb == float("inf")


def test_table_markdown_and_json(results: list[runner.CaseResult], tmp_path: Path) -> None:
    md = table.markdown(results)
    assert table.doc_counts(md) == table.counts(results)
    groups = table.refusal_groups(results)
    assert sum(n for _, n in groups) == table.counts(results)["refused"]
    assert md.count("\n| ") == 1 + len(groups) + 1 + len(results)  # the groups' header and rows, the cases' too
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{table.BEGIN}\nOLD-TABLE\n{table.END}\noutro\n")
    table.write_markdown(str(doc), results)
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{table.END}\noutro\n") and "OLD-TABLE" not in text
    js = json.loads(json.dumps(table.to_json(results)))
    assert js["counts"] == table.counts(results) and len(js["cases"]) == len(results)
    new = tmp_path / "new.md"  # a new file gets the markers, so the next run writes between them again
    table.write_markdown(str(new), results)
    table.write_markdown(str(new), results)
    assert new.read_text() == f"{table.BEGIN}\n{md}{table.END}\n"


def test_cli_markdown_keeps_a_file_without_markers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--markdown into a file that has other text and no table markers: one line, before any case runs, and
    the file as it was (the whole file was replaced by the table)."""
    notes = tmp_path / "notes.md"
    notes.write_text("my notes\n")
    assert main(["conformance", "nodes", "--case", "add", "--models", "golden", "--markdown", str(notes)]) == 2
    err = capsys.readouterr().err
    assert "has no table markers" in err and err.count("\n") == 1 and notes.read_text() == "my notes\n", err
    with pytest.raises(ValueError, match="has no table markers"):
        table.write_markdown(str(notes), [])


def test_cli_runs_a_pattern_and_writes_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    code = main(["conformance", "nodes", "--case", "maxpool_2d_*", "--models", "golden", "--json", "--out-json", str(out)])
    rep = json.loads(capsys.readouterr().out)
    assert rep == json.loads(out.read_text())
    n = rep["nodes"]["counts"]
    assert n["cases"] == 12 and n["passed"] + n["refused"] + n["failed"] == 12
    assert code == (0 if n["failed"] == 0 else 1)


def test_cli_rtl_lists_the_rtl_only_where_a_sample_case_ran(capsys: pytest.CaptureFixture[str]) -> None:
    # No RTL sample case in the selection: nothing runs on the RTL, so the report must not say it did.
    args = ["conformance", "nodes", "--case", "maxpool_2d_default", "--models", "golden", "--rtl"]
    main(args + ["--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rep["nodes"]["meta"]["models"] == ["golden"]
    main(args)
    err = capsys.readouterr().err
    assert "--rtl: the selection holds none of the RTL sample's node cases" in err


def test_cli_refuses_bad_arguments_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "nodes", "--case", "no_such_case"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no node case of the selection matches" in err and "\n" not in err
    assert main(["conformance", "nodes", "--models", "golden,gpu"]) == 2
    assert "golden,gpu" in capsys.readouterr().err


@pytest.mark.skipif(rtl_available() is not None, reason="no RTL model here")
def test_rtl_sample_matches_the_evaluator(node_cases: list[cases.NodeCase]) -> None:
    sample = [c for c in node_cases if c.name in runner.RTL_SAMPLE]
    got = runner.run_suite(sample, ("golden",), "small", rtl_sample=runner.RTL_SAMPLE)
    for r in got:
        assert r.status == runner.PASSED and "rtl" in r.distances, (r.case, r.reason)
