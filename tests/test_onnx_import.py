"""The ONNX importer (compiler.onnx_import): quantized models from onnxruntime's quantize_static (QDQ and
QOperator, int8 and uint8 activations, per-tensor and per-channel weights) and hand-written QOperator
models agree with onnxruntime within one output step on at least 99 % of the elements; the golden path
equals the graph's numpy reference, and the ISS and TLM equal golden bit for bit; what cannot be
mapped is one line naming the node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from compiler.onnx_import import UnsupportedModel, import_onnx
from compiler.onnx_import.agreement import agreement, onnxruntime_outputs
from cosim.onnx_run import run_imported
from tests import onnx_models as M

WITHIN_ONE = 0.99  # the share of elements within one step of onnxruntime's


@pytest.fixture(scope="module")
def qdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx")


def check_agreement(imported: Any, inputs: dict[str, np.ndarray]) -> list[Any]:
    ours = imported.run_golden(inputs)
    theirs = onnxruntime_outputs(imported.model, inputs)
    agr = agreement(ours, theirs, {n: imported.output_lsb(n) for n in ours})
    for a in agr:
        assert a.within_one >= WITHIN_ONE, str(a)
    return agr


def assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


FORMS = [(fmt, act, pc) for fmt in ("QDQ", "QOperator") for act in ("QInt8", "QUInt8") for pc in (False, True)]


@pytest.mark.parametrize("fmt,act,per_channel", FORMS, ids=[f"{f}-{a}-{'pc' if p else 'pt'}" for f, a, p in FORMS])
def test_quantize_static_cnn_agrees_with_onnxruntime(qdir: Path, fmt: str, act: str, per_channel: bool) -> None:
    imported = import_onnx(M.quantize(M.tiny_cnn(), qdir, fmt, act, per_channel))
    x = imported.random_inputs(seed=1)
    check_agreement(imported, x)
    assert_same(imported.run_golden(x), imported.run_reference(x))
    y = imported.run_golden(x)["y"]
    assert y.dtype == np.float32 and y.shape == (2, 10)
    ops = [(op.op_type, op.node) for op in imported.host_ops]
    assert ops == [("QuantizeLinear", "x_QuantizeLinear"), ("DequantizeLinear", "y_DequantizeLinear")]


@pytest.mark.parametrize("per_channel", [False, True], ids=["pt", "pc"])
def test_float_weights_with_their_own_quantize_node_fold(qdir: Path, per_channel: bool) -> None:
    """quantize_static's AddQDQPairToWeight keeps the float weights and quantizes them with a
    QuantizeLinear of their own (per tensor, or per output channel along axis 0): the importer quantizes
    them at import time, as onnxruntime does at run time, and agrees with it."""
    path = M.quantize(M.tiny_cnn(), qdir, "QDQ", "QInt8", per_channel, extra_options={"AddQDQPairToWeight": True})
    model = onnx.load(str(path))
    axes = [a.i for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] in
            {t.name for t in model.graph.initializer} for a in n.attribute if a.name == "axis"]
    assert bool(axes) == per_channel  # the form this test is about: a float weight's per-axis QuantizeLinear
    imported = import_onnx(path)
    x = imported.random_inputs(seed=5)
    check_agreement(imported, x)
    assert_same(imported.run_golden(x), imported.run_reference(x))


def _single(name: str, nodes: list[Any], inits: dict[str, np.ndarray], x_shape: list[int]) -> Any:
    out = [("y", T.FLOAT, None)]
    return M.model(nodes, [("x", T.FLOAT, x_shape)], out, inits, name)  # type: ignore[arg-type]


def _cases() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    f = np.float32
    w = rng.normal(0, .3, (8, 3, 3, 3)).astype(f)
    w2 = rng.normal(0, .1, (8, 3, 3, 3)).astype(f)
    x = [2, 3, 9, 10]
    conv = h.make_node
    return {
        "asymmetric_pads_stride2": ([conv("Conv", ["x", "w"], ["y"], pads=[0, 1, 2, 1], strides=[2, 2])], {"w": w}),
        "same_upper": ([conv("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])], {"w": w}),
        "same_lower": ([conv("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[2, 2])], {"w": w}),
        "valid": ([conv("Conv", ["x", "w"], ["y"], auto_pad="VALID")], {"w": w}),
        "kernel_1x3": ([conv("Conv", ["x", "w"], ["y"], pads=[0, 1, 0, 1])],
                       {"w": rng.normal(0, .3, (4, 3, 1, 3)).astype(f)}),
        "clip": ([conv("Conv", ["x", "w"], ["c"]), conv("Clip", ["c", "lo", "hi"], ["y"])],
                 {"w": w, "lo": np.array(0, f), "hi": np.array(1, f)}),
        "avgpool_2x2_stride1": ([conv("Conv", ["x", "w"], ["c"]),
                                 conv("AveragePool", ["c"], ["y"], kernel_shape=[2, 2], strides=[1, 1])], {"w": w}),
        "avgpool_3x3_stride2": ([conv("Conv", ["x", "w"], ["c"]),
                                 conv("AveragePool", ["c"], ["y"], kernel_shape=[3, 3], strides=[2, 2])], {"w": w}),
        "concat": ([conv("Conv", ["x", "w"], ["c"]), conv("Conv", ["x", "w3"], ["d"]),
                    conv("Concat", ["c", "d"], ["y"], axis=1)],
                   {"w": w, "w3": rng.normal(0, .1, (4, 3, 3, 3)).astype(f)}),
        "add": ([conv("Conv", ["x", "w"], ["c"]), conv("Conv", ["x", "w2"], ["d"]), conv("Add", ["c", "d"], ["y"])],
                {"w": w, "w2": w2}),
        "add_channel_constant": ([conv("Conv", ["x", "w"], ["c"]), conv("Add", ["c", "k"], ["y"])],
                                 {"w": w, "k": rng.normal(0, .5, (1, 8, 1, 1)).astype(f)}),
        "mul_channel_constant": ([conv("Conv", ["x", "w"], ["c"]), conv("Mul", ["c", "k"], ["y"])],
                                 {"w": w, "k": rng.uniform(.5, 2, (1, 8, 1, 1)).astype(f)}),
        "batchnorm_relu_negative_mul": (
            [conv("Conv", ["x", "w"], ["c"]), conv("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"]),
             conv("Relu", ["bn"], ["r"]), conv("Mul", ["r", "k"], ["y"])],
            {"w": w, "s": rng.normal(0, 1, 8).astype(f), "b": rng.normal(0, .2, 8).astype(f),
             "m": rng.normal(0, .2, 8).astype(f), "v": rng.uniform(.5, 2, 8).astype(f),
             "k": rng.choice([-1.5, -.5, .5, 2], (1, 8, 1, 1)).astype(f)}),
        "maxpool_pads": ([conv("Conv", ["x", "w"], ["c"]),
                          conv("MaxPool", ["c"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                         {"w": w}),
        "maxpool_same_upper": ([conv("Conv", ["x", "w"], ["c"]), conv("MaxPool", ["c"], ["y"], kernel_shape=[2, 2],
                                                                      strides=[2, 2], auto_pad="SAME_UPPER")], {"w": w}),
        "maxpool_ceil": ([conv("Conv", ["x", "w"], ["c"]),
                          conv("MaxPool", ["c"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)], {"w": w}),
        "global_max_pool": ([conv("Conv", ["x", "w"], ["c"], pads=[1, 0, 0, 0]), conv("GlobalMaxPool", ["c"], ["y"])],
                            {"w": w}),
        "global_max_pool_non_square": ([conv("Conv", ["x", "w"], ["c"]), conv("GlobalMaxPool", ["c"], ["y"])],
                                       {"w": w}),  # 7x8: padded to a square with the minimum
        "global_average_pool_non_square": ([conv("Conv", ["x", "w"], ["c"]), conv("GlobalAveragePool", ["c"], ["y"])],
                                           {"w": w}),  # 7x8: padded with the zero point, divided by 56
        "maxpool_relu": ([conv("Conv", ["x", "w"], ["c"]), conv("Relu", ["c"], ["r"]),
                          conv("MaxPool", ["r"], ["y"], kernel_shape=[3, 3], strides=[2, 2])], {"w": w}),
    }, x


CASES, X_SHAPE = _cases()


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_one_op_agrees_with_onnxruntime(qdir: Path, case: str, fmt: str) -> None:
    nodes, inits = CASES[case]
    imported = import_onnx(M.quantize(_single(case, nodes, inits, X_SHAPE), qdir, fmt, "QUInt8" if
                                      fmt == "QOperator" else "QInt8", per_channel=case.startswith("same")))
    x = imported.random_inputs(seed=2)
    check_agreement(imported, x)


def test_hand_written_integer_ops_agree_with_onnxruntime() -> None:
    """ConvInteger (uint8 weights with a zero point, asymmetric pads) -> Cast -> Mul -> Add -> Relu ->
    QuantizeLinear, QLinearMatMul, MatMulInteger -> Cast -> Mul -> QuantizeLinear -> DequantizeLinear."""
    imported = import_onnx(M.qoperator_integer())
    for seed in range(3):
        check_agreement(imported, imported.random_inputs(seed))


def test_iss_and_tlm_equal_golden_bit_for_bit(qdir: Path) -> None:
    non_square = "global_average_pool_non_square"
    for m in (M.quantize(M.tiny_cnn(), qdir, "QOperator", "QUInt8", True), M.quantize(M.geometry_cnn(), qdir),
              M.quantize(M.mlp(), qdir, "QDQ", "QUInt8"),
              M.quantize(_single(non_square, *CASES[non_square], X_SHAPE), qdir, "QDQ", "QUInt8")):
        imported = import_onnx(m)
        x = imported.random_inputs(seed=3)
        golden = imported.run_golden(x)
        assert_same(golden, imported.run_reference(x))
        for model in ("iss", "tlm"):
            out, res = run_imported(imported, x, model)
            assert res.error is None
            assert_same(golden, out)


@pytest.mark.parametrize("fmt,act", [("QDQ", "QInt8"), ("QOperator", "QUInt8")])
def test_tiny_resnet_agrees_with_onnxruntime_and_tlm_equals_golden(qdir: Path, fmt: str, act: str) -> None:
    imported = import_onnx(M.quantize(M.tiny_resnet(), qdir, fmt, act, per_channel=True))
    x = {"input": np.random.default_rng(8).normal(0, 1, (4, 3, 16, 16)).astype(np.float32)}
    check_agreement(imported, x)
    out, res = run_imported(imported, x, "tlm")
    assert res.error is None and res.cycles > 0
    assert_same(imported.run_golden(x), out)


def test_rank3_tensors_and_a_matrix_bias(qdir: Path) -> None:
    """(N, C, L) tensors (held as (C, L, 1)): an Add of two inputs, a Concat, a per-channel constant; a Gemm
    whose C is an (N, O) matrix of equal rows."""
    f = np.float32
    rng = np.random.default_rng(10)
    nodes = [h.make_node("Add", ["a", "b"], ["s"], name="add"), h.make_node("Add", ["s", "k"], ["t"], name="bias"),
             h.make_node("Concat", ["t", "a"], ["y"], name="cat", axis=1)]
    m = M.model(nodes, [("a", T.FLOAT, [3, 4, 5]), ("b", T.FLOAT, [3, 4, 5])], [("y", T.FLOAT, [3, 8, 5])],
                {"k": rng.normal(0, 1, (4, 1)).astype(f)}, "rank3")
    for fmt in ("QDQ", "QOperator"):
        imported = import_onnx(M.quantize(m, qdir, fmt))
        x = imported.random_inputs(seed=11)
        check_agreement(imported, x)
        out, _ = run_imported(imported, x, "tlm")
        assert_same(imported.run_golden(x), out)
    c = np.tile(rng.normal(0, .3, (1, 6)).astype(f), (4, 1))
    gemm = M.model([h.make_node("Gemm", ["x", "w", "c"], ["y"], name="gemm", transB=1)], [("x", T.FLOAT, [4, 9])],
                   [("y", T.FLOAT, [4, 6])], {"w": rng.normal(0, .3, (6, 9)).astype(f), "c": c}, "gemm_matrix_bias")
    imported = import_onnx(M.quantize(gemm, qdir))
    check_agreement(imported, imported.random_inputs(seed=12))
    c[1, 2] += 1
    gemm.graph.initializer[1].CopyFrom(onnx.numpy_helper.from_array(c, "c"))
    with pytest.raises(UnsupportedModel, match="bias differs from sample to sample"):
        import_onnx(M.quantize(gemm, qdir / "varying"))


def test_shape_arithmetic_is_folded(qdir: Path) -> None:
    """An exported torch.flatten: Shape -> Gather -> Unsqueeze -> Concat -> Reshape, folded at import time."""
    rng = np.random.default_rng(13)
    f = np.float32
    nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["r"], name="relu"), h.make_node("Shape", ["r"], ["sh"], name="shape"),
             h.make_node("Gather", ["sh", "zero"], ["n"], name="gather", axis=0),
             h.make_node("Unsqueeze", ["n", "ax"], ["n1"], name="unsqueeze"),
             h.make_node("Concat", ["n1", "minus1"], ["target"], name="concat", axis=0),
             h.make_node("Reshape", ["r", "target"], ["fl"], name="reshape"),
             h.make_node("Gemm", ["fl", "wf"], ["y"], name="fc", transB=1)]
    inits = {"w": rng.normal(0, .3, (4, 3, 3, 3)).astype(f), "zero": np.array(0, np.int64),
             "ax": np.array([0], np.int64), "minus1": np.array([-1], np.int64),
             "wf": rng.normal(0, .1, (5, 4 * 6 * 6)).astype(f)}
    m = M.model(nodes, [("x", T.FLOAT, [2, 3, 6, 6])], [("y", T.FLOAT, [2, 5])], inits, "torch_flatten")
    imported = import_onnx(M.quantize(m, qdir))
    assert [ly.op for ly in imported.graph.layers].count("flatten") == 1
    check_agreement(imported, imported.random_inputs(seed=14))


def test_mlp_reshapes_its_float_input_on_the_host(qdir: Path) -> None:
    imported = import_onnx(M.quantize(M.mlp(), qdir))
    assert [op.op_type for op in imported.host_ops] == ["Flatten", "QuantizeLinear", "DequantizeLinear"]
    check_agreement(imported, imported.random_inputs(seed=4))


def test_integer_inputs_and_outputs_keep_their_dtypes() -> None:
    """A model of uint8 input and output: no host quantization, the shift by 128 only."""
    rng = np.random.default_rng(5)
    nodes = [h.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], name="qconv",
                         pads=[1, 1, 1, 1])]
    inits = {"xs": np.array(0.05, np.float32), "xz": np.array(131, np.uint8),
             "w": rng.integers(-90, 90, (5, 2, 3, 3)).astype(np.int8), "ws": np.array(0.01, np.float32),
             "wz": np.array(0, np.int8), "ys": np.array(0.2, np.float32), "yz": np.array(125, np.uint8)}
    m = M.model(nodes, [("x", T.UINT8, [3, 2, 6, 6])], [("y", T.UINT8, [3, 5, 6, 6])], inits, "int_io")
    imported = import_onnx(m)
    assert imported.host_ops == []
    x = imported.random_inputs(seed=5)
    assert x["x"].dtype == np.uint8
    y = imported.run_golden(x)["y"]
    assert y.dtype == np.uint8 and y.shape == (3, 5, 6, 6)
    check_agreement(imported, x)


# ---- refusals: one line naming the node ----------------------------------------------------------
def _conv_model(**attrs: Any) -> Any:
    rng = np.random.default_rng(6)
    w = rng.normal(0, .3, (4, 2 if attrs.get("group") == 2 else 4, 3, 3)).astype(np.float32)
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
             h.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq"),
             h.make_node("QuantizeLinear", ["w", "ws", "wz"], ["wq"], name="qw"),
             h.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="dqw"),
             h.make_node("Conv", ["xd", "wd"], ["c"], name="/blocks.0/conv:0", **attrs),
             h.make_node("QuantizeLinear", ["c", "s", "z"], ["y"], name="qy")]
    inits = {"s": np.array(0.05, np.float32), "z": np.array(0, np.int8), "w": w,
             "ws": np.array(0.01, np.float32), "wz": np.array(0, np.int8)}
    out = [("y", T.INT8, None)]
    return M.model(nodes, [("x", T.FLOAT, [1, 4, 8, 8])], out, inits, "conv")  # type: ignore[arg-type]


@pytest.mark.parametrize("attrs,reason", [
    ({"group": 2}, "group 2 is not supported"),
    ({"dilations": [2, 2]}, "dilations [2, 2] are not supported"),
    ({"pads": [16, 0, 0, 0]}, "pad"),
])
def test_refused_conv_names_the_node(attrs: dict[str, Any], reason: str) -> None:
    with pytest.raises(UnsupportedModel) as e:
        import_onnx(_conv_model(**attrs))
    msg = str(e.value)
    assert msg.startswith("node '/blocks.0/conv:0' (Conv): ") and reason in msg and "\n" not in msg


def test_refused_op_dynamic_dim_and_float_output() -> None:
    m = _conv_model()
    m.graph.node.append(h.make_node("Sigmoid", ["y"], ["s2"], name="sig"))
    m.graph.output[0].name = "s2"
    with pytest.raises(UnsupportedModel, match=r"^node 'sig' \(Sigmoid\): op Sigmoid is not supported"):
        import_onnx(m)
    m = _conv_model()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    with pytest.raises(UnsupportedModel, match=r"input 'x' has a dynamic dimension 'batch'"):
        import_onnx(m)
    m = _conv_model()
    del m.graph.node[-1]
    m.graph.output[0].name = "c"
    with pytest.raises(UnsupportedModel, match=r"^node '/blocks.0/conv:0' \(Conv\): output 'c' is not a quantized"):
        import_onnx(m)


def test_refusals_name_what_is_wrong(tmp_path: Path) -> None:
    """Nodes out of order (a cycle) say so; an empty dimension is not called dynamic; a requantization
    multiplier out of range names the convolution and the product, not the output's own scale; a folder
    is not an ONNX file."""
    m = _conv_model()
    m.graph.node.insert(0, m.graph.node.pop(4))  # the convolution before the nodes that make its operands
    with pytest.raises(UnsupportedModel, match=r"^node '/blocks.0/conv:0' \(Conv\): input 'xd' is produced by node "
                                               r"'dq' only after it \(ONNX lists nodes in topological order"):
        import_onnx(m)
    m = _conv_model()
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 0
    with pytest.raises(UnsupportedModel, match=r"input 'x' has a dimension of size 0 \(shape \[1, 4, 0, 8\]\)"):
        import_onnx(m)
    m = _conv_model()
    ws = next(t for t in m.graph.initializer if t.name == "ws")
    ws.CopyFrom(onnx.numpy_helper.from_array(np.array(1e-12, np.float32), "ws"))
    with pytest.raises(UnsupportedModel, match=r"^node '/blocks.0/conv:0' \(Conv\): its requantization multiplier "
                                               r"\(input scale x weight scale / output scale 0.05\) is 1e-12"):
        import_onnx(m)
    with pytest.raises(UnsupportedModel, match=r": a folder, not an ONNX file$"):
        import_onnx(tmp_path)


def test_arbitrary_onnx_names_are_kept() -> None:
    """Input and output names that are region names of the compiler, or not identifiers at all."""
    m = _conv_model()
    for n in m.graph.node:
        n.input[:] = ["weights" if i == "x" else i for i in n.input]
        n.output[:] = ["out:0/y" if o == "y" else o for o in n.output]
    m.graph.input[0].name = "weights"
    m.graph.output[0].name = "out:0/y"
    imported = import_onnx(m)
    x = imported.random_inputs(seed=7)
    assert list(x) == ["weights"] and list(imported.run_golden(x)) == ["out:0/y"]
    check_agreement(imported, x)


# ---- what onnx itself forbids: one line, before any handler -----------------------------------------
def _retyped(m: Any, node: str, **what: Any) -> Any:
    n = next(n for n in m.graph.node if n.name == node)
    for k, v in what.items():
        setattr(n, k, v)
    return m


@pytest.mark.parametrize("version", [9, 99])
def test_opset_outside_what_quantized_models_use_is_refused(version: int) -> None:
    m = _conv_model()
    m.opset_import[0].version = version
    with pytest.raises(UnsupportedModel, match=rf"^model: opset {version} of the standard ops is not supported "
                                               rf"\(10\.\.\d+"):
        import_onnx(m)


def test_op_absent_from_the_opset_and_a_wrong_input_count_are_refused() -> None:
    m = _conv_model()
    m.opset_import[0].version = 13
    m.graph.node.append(h.make_node("Gelu", ["y"], ["g"], name="gelu"))  # Gelu came with opset 20
    m.graph.output[0].name = "g"
    with pytest.raises(UnsupportedModel, match=r"^node 'gelu' \(Gelu\): op Gelu does not exist in opset 13"):
        import_onnx(m)
    m = _conv_model()
    n = next(n for n in m.graph.node if n.name == "/blocks.0/conv:0")
    del n.input[1:]
    with pytest.raises(UnsupportedModel, match=r"^node '/blocks.0/conv:0' \(Conv\): has 1 inputs; Conv \(opset 19\) "
                                               r"takes 2\.\.3$"):
        import_onnx(m)


def test_duplicate_node_names_and_producers_are_refused() -> None:
    m = _conv_model()
    m.graph.node[1].name = "q"  # the input's QuantizeLinear and DequantizeLinear share a name
    with pytest.raises(UnsupportedModel, match=r"^node 'q' \(DequantizeLinear\): another node has the same name"):
        import_onnx(m)
    m = _conv_model()
    m.graph.node[3].output[0] = "xd"  # the weight's DequantizeLinear writes the input's tensor again
    with pytest.raises(UnsupportedModel, match=r"^node 'dqw' \(DequantizeLinear\): output 'xd' is already produced"):
        import_onnx(m)


@pytest.mark.parametrize("dtype", [np.int64, np.float16])
def test_operands_of_mismatched_element_types_are_refused(dtype: Any) -> None:
    """onnxruntime refuses to load an Add of a float tensor and an int64 (or float16) constant: so does the
    importer, naming the node, instead of folding the constant in as a float bias."""
    m = _conv_model()
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    conv.output[0] = "c0"
    m.graph.node.insert(5, h.make_node("Add", ["c0", "k"], ["c"], name="k_add"))
    m.graph.initializer.append(onnx.numpy_helper.from_array(np.ones((1, 4, 1, 1), dtype), "k"))
    with pytest.raises(UnsupportedModel, match=r"^node 'k_add' \(Add\): .*inconsistent type"):
        import_onnx(m)


@pytest.mark.parametrize("value", [0.0, -0.01, float("nan"), float("inf")])
@pytest.mark.parametrize("which,node", [("ws", "qw"), ("s", "q")])
def test_a_scale_that_is_not_positive_and_finite_names_its_node(value: float, which: str, node: str) -> None:
    m = _conv_model()
    init = next(t for t in m.graph.initializer if t.name == which)
    init.CopyFrom(onnx.numpy_helper.from_array(np.array(value, np.float32), which))
    with pytest.raises(UnsupportedModel, match=rf"^node '{node}' \(QuantizeLinear\): the scale is {value:g}: a scale "
                                               rf"must be a positive finite number$"):
        import_onnx(m)


def test_a_weight_dequantization_scale_of_zero_names_it() -> None:
    m = _conv_model()
    ws = onnx.numpy_helper.from_array(np.array([0.01, 0.0, 0.01, 0.01], np.float32), "wsd")
    m.graph.initializer.append(ws)
    q = np.random.default_rng(1).integers(-100, 100, (4, 4, 3, 3)).astype(np.int8)
    m.graph.initializer.append(onnx.numpy_helper.from_array(q, "wq8"))
    dqw = next(n for n in m.graph.node if n.name == "dqw")
    dqw.input[:] = ["wq8", "wsd"]
    dqw.attribute.append(h.make_attribute("axis", 0))
    with pytest.raises(UnsupportedModel, match=r"^node 'dqw' \(DequantizeLinear\): the scale is 0: "):
        import_onnx(m)


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_gemm_with_a_negative_alpha_agrees_with_onnxruntime(qdir: Path, fmt: str) -> None:
    """alpha * x @ W with alpha < 0 is |alpha| * x @ (-W): the weights are negated (a bias keeps its sign)."""
    rng = np.random.default_rng(8)
    f = np.float32
    nodes = [h.make_node("Gemm", ["x", "w", "b"], ["y"], name="gemm", alpha=-0.75, beta=0.5, transB=1)]
    m = M.model(nodes, [("x", T.FLOAT, [3, 20])], [("y", T.FLOAT, [3, 6])],
                {"w": rng.normal(0, .3, (6, 20)).astype(f), "b": rng.normal(0, .5, 6).astype(f)}, "neg_alpha")
    imported = import_onnx(M.quantize(m, qdir, fmt, "QInt8"))
    x = imported.random_inputs(seed=3)
    check_agreement(imported, x)


def test_non_finite_float_inputs_quantize_as_onnxruntime_does() -> None:
    """NaN becomes the low end of the range, +-inf saturate; no numpy warning."""
    imported = import_onnx(_conv_model())
    x = imported.random_inputs(seed=4)
    x["x"][0, 0, :3, :] = np.array([np.nan, np.inf, -np.inf], np.float32)[:, None]
    with np.errstate(all="raise"):
        ours = imported.run_golden(x)
    theirs = onnxruntime_outputs(imported.model, x)
    np.testing.assert_array_equal(ours["y"], theirs["y"])


def test_an_empty_file_is_not_an_onnx_model(tmp_path: Path) -> None:
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    with pytest.raises(UnsupportedModel, match=rf"^{p}: not an ONNX model \(no graph"):
        import_onnx(p)
    with pytest.raises(UnsupportedModel, match=r"^model: not an ONNX model \(no graph"):
        import_onnx(b"")


def test_per_axis_scales_of_the_wrong_count_name_the_node() -> None:
    """A per-axis DequantizeLinear with 3 scales for an axis of 4 (onnx forbids it): one line naming the
    node and the counts, not numpy's broadcasting error."""
    m = _conv_model()
    m.graph.initializer.append(onnx.numpy_helper.from_array(np.array([0.01, 0.02, 0.01], np.float32), "ws3"))
    q = np.random.default_rng(1).integers(-100, 100, (4, 4, 3, 3)).astype(np.int8)
    m.graph.initializer.append(onnx.numpy_helper.from_array(q, "wq8"))
    dqw = next(n for n in m.graph.node if n.name == "dqw")
    dqw.input[:] = ["wq8", "ws3"]
    dqw.attribute.append(h.make_attribute("axis", 0))
    with pytest.raises(UnsupportedModel, match=r"^node 'dqw' \(DequantizeLinear\): 3 scales for axis 0 of a "
                                               r"\[4, 4, 3, 3\] constant: per-axis needs one per entry"):
        import_onnx(m)


def test_a_scalar_input_and_unprintable_names_are_one_line() -> None:
    m = _conv_model()
    m.graph.input.append(h.make_tensor_value_info("sy", T.FLOAT, []))
    with pytest.raises(UnsupportedModel, match=r"^model: input 'sy' is a scalar: a model input is a tensor"):
        import_onnx(m)
    m = _conv_model(dilations=[2, 2])
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    conv.name = "bad\nline\x1b[31m"
    with pytest.raises(UnsupportedModel) as e:
        import_onnx(m)
    assert str(e.value).startswith("node 'bad?line?[31m' (Conv): dilations [2, 2] are not supported")
