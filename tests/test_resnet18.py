"""ResNet-18 v1 built with onnx.helper, quantized by onnxruntime and imported: a reduced model (ResNet-18
topology at 64x64, width 16, 100 classes) runs bit-exact on golden, ISS and TLM and agrees with
onnxruntime; the full ImageNet-size model compiles to one Program; ``cosim net resnet18`` is registered."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from compiler.networks import NETWORKS, resnet18_onnx as r  # noqa: E402
from compiler.onnx_import import import_onnx  # noqa: E402
from compiler.onnx_import.agreement import agreement, onnxruntime_outputs  # noqa: E402
from cosim.onnx_run import run_imported  # noqa: E402

SMALL = r.Shape(size=64, width=16, classes=100)
IMAGES = 4


@pytest.fixture(scope="module")
def small() -> tuple[Any, Any]:
    q = r.quantized_model(SMALL)
    return q, import_onnx(q, r.config())


def test_small_model_has_resnet18_topology() -> None:
    m = r.float_model(SMALL)
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("Conv") == 20 and ops.count("Add") == 8 and ops.count("MaxPool") == 1
    assert ops.count("GlobalAveragePool") == 1 and ops.count("Gemm") == 1
    conv1 = m.graph.node[0]
    assert {a.name: list(a.ints) for a in conv1.attribute}["kernel_shape"] == [7, 7]


def test_small_golden_iss_tlm_bit_exact_and_close_to_onnxruntime(small: tuple[Any, Any]) -> None:
    q, imp = small
    shares = []
    for i in range(IMAGES):
        x = {r.INPUT: r.random_images(SMALL, 1, seed=500 + i)}
        outs = {m: run_imported(imp, x, m)[0][r.OUTPUT] for m in ("golden", "iss", "tlm")}
        assert np.array_equal(outs["golden"], outs["iss"]) and np.array_equal(outs["golden"], outs["tlm"])
        a = agreement({r.OUTPUT: outs["golden"]}, onnxruntime_outputs(q, x), {r.OUTPUT: imp.output_lsb(r.OUTPUT)})
        assert a[0].max_lsb <= 2, a[0]
        shares.append(a[0].within_one)
    # measured: 99.75 % of the 400 logits within 1 LSB, 76.5 % equal (the requantizations' fixed-point
    # multipliers and the adds' operand scales differ from float arithmetic by less than a step each, and
    # the differences accumulate through 20 requantizations)
    assert np.mean(shares) >= 0.99, shares


@pytest.mark.long("compiles the ImageNet-size network (make resnet18 also runs it on every model)")
def test_full_size_compiles_to_one_program() -> None:
    net = NETWORKS["resnet18"]
    g = net.graph()
    from compiler.network import compile_network

    cfg = r.config()
    assert cfg.dram_bytes == r.DRAM_BYTES and cfg.name == "default-dram64m"
    prog = compile_network(g, cfg, batch=1, name="resnet18").program
    assert len(prog.insns) > 1000
    assert net.output_name == g.outputs[0].name  # derived from the model, not the quantizer's naming
    x = net.dataset("test")[0]
    assert x.shape == (r.SAMPLES, 3, 224, 224) and x.dtype == np.int8


def test_layers_named_by_vta_workload_and_totals() -> None:
    names = {n: r.vta_workload(n) for n in ("conv1", "layer1.1.conv2", "layer2.0.conv1", "layer2.0.downsample",
                                             "layer2.1.conv1", "layer3.0.downsample", "layer4.0.conv1",
                                             "layer4.1.conv2", "layer4.0.add", "fc", "avgpool")}
    assert names == {"conv1": "C1", "layer1.1.conv2": "C2", "layer2.0.conv1": "C3", "layer2.0.downsample": "C4",
                     "layer2.1.conv1": "C5", "layer3.0.downsample": "C7", "layer4.0.conv1": "C9",
                     "layer4.1.conv2": "C11", "layer4.0.add": None, "fc": None, "avgpool": None}
    layers = [{"name": "conv1", "cycles": 10, "macs": 5, "load_busy": 1, "compute_busy": 9, "store_busy": 2},
              {"name": "layer1.0.conv1", "cycles": 20, "macs": 7, "load_busy": 15, "compute_busy": 9, "store_busy": 2},
              {"name": "fc", "cycles": 3, "macs": 1, "load_busy": 1, "compute_busy": 1, "store_busy": 2}]
    s = r.summarize(layers)
    assert s["vta_body"]["cycles"] == 20 and s["whole"]["cycles"] == 33 and s["vta_body"]["macs"] == 7
    assert [row["bound"] for row in s["rows"]] == ["compute", "load", "store"]
    assert s["vta_body"]["vta_cycles"]["pipelined_gemm"] == 7_729_601
    four = r.summarize(layers, 4)  # a batch of 4: the ratio to VTA's one image is per image
    assert four["vta_body"]["cycles"] == 20 and four["vta_body"]["cycles_per_image"] == 5
    assert four["vta_body"]["ratio_to_pipelined"] == 5 / 7_729_601 and four["whole"]["cycles_per_image"] == 33 / 4


def test_script_creates_its_out_folder(tmp_path: Any, capsys: Any) -> None:
    out = tmp_path / "new" / "models"
    assert r.main(["--out", str(out), "--size", "32", "--width", "2", "--classes", "3"]) == 0
    assert (out / "resnet18_float.onnx").is_file() and (out / "resnet18_qdq.onnx").is_file()
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit):
        r.main(["--out", str(tmp_path / "file")])
    assert "not a folder" in capsys.readouterr().err


def test_bench_section_reports_rows_totals_and_scaling() -> None:
    """`make bench`'s ResNet-18 section on the reduced model: rows by VTA workload that sum to the totals,
    the verdicts against the targets, the several-core speed-up, and the table for people."""
    from cosim.bench import resnet18 as bench

    res = bench.measure_resnet18(r.network(SMALL), base="default", several="quad", rtl=False)
    assert res["agree"], res["problems"]
    rows = res["rows"]
    assert sum(x["cycles"] for x in rows) == res["whole_cycles"] == res["cycles"]["tlm"]
    assert res["body_cycles"] == sum(x["cycles"] for x in rows if x["layer"].startswith("layer"))
    assert {x["vta"] for x in rows} >= {f"C{k}" for k in range(1, 12)}
    s = res["several"]
    assert s["cores"] == 4 and s["speedup"] == pytest.approx(res["whole_cycles"] / s["cycles"])
    t = bench.verdicts(res)
    assert set(t) == {"resnet18_body_cycles", "resnet18_whole_cycles", "resnet18_speedup_several_cores"}
    assert t["resnet18_whole_cycles"]["met"] == (res["whole_cycles"] <= bench.WHOLE_TARGET)
    lines = bench.table_lines(res)
    assert any(line.startswith("conv1") and " C1 " in line for line in lines)
    assert any("VTA tsim 7,729,601" in line for line in lines) and lines[-1].startswith("wall per image: TLM")
