"""A QDQ model whose requantizations hit exact ties: an AveragePool over 4 positions with equal input and
output scales (scale 0.25) and an Add whose output scale is twice its operands' (0.5 each), then a Gemm
that amplifies a one-step difference. ONNX rounds those ties half to even, and so do we now: the outputs
agree with onnxruntime's (>= 99 % within one step, in practice all equal), and the ISS and TLM equal the
golden path bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h

from compiler.onnx_import import import_onnx
from compiler.onnx_import.agreement import agreement, onnxruntime_outputs
from cosim.onnx_run import run_imported
from tests import onnx_models as M

ACT = np.float32(2.0 ** -4)  # a power of two: onnxruntime's float arithmetic on these values is exact


def tie_model(batch: int = 8, seed: int = 5) -> Any:
    """x -> Q/DQ -> AveragePool 2x2/2 -> Q/DQ (same scale: x*0.25 ties) -> Add(itself, a second pool
    branch) with the output scale doubled (x*0.5 ties) -> Flatten -> Gemm (int8 weights) -> Q/DQ: hand-made QDQ."""
    rng = np.random.default_rng(seed)
    f = np.float32
    s2 = np.float32(2 * ACT)
    w = rng.integers(-127, 128, (10, 32)).astype(np.int8)
    q = h.make_node
    nodes = [
        q("QuantizeLinear", ["x", "s", "z"], ["xq"]), q("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
        q("AveragePool", ["xd"], ["p"], name="/pool/AveragePool", kernel_shape=[2, 2], strides=[2, 2]),
        q("QuantizeLinear", ["p", "s", "z"], ["pq"]), q("DequantizeLinear", ["pq", "s", "z"], ["pd"]),
        q("MaxPool", ["xd"], ["m"], name="/pool2/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        q("QuantizeLinear", ["m", "s", "z"], ["mq"]), q("DequantizeLinear", ["mq", "s", "z"], ["md"]),
        q("Add", ["pd", "md"], ["a"], name="/add/Add"),
        q("QuantizeLinear", ["a", "s2", "z"], ["aq"]), q("DequantizeLinear", ["aq", "s2", "z"], ["ad"]),
        q("Flatten", ["ad"], ["fl"], name="/flat/Flatten"),
        q("DequantizeLinear", ["wq", "ws", "z"], ["wd"]),
        q("Gemm", ["fl", "wd"], ["g"], name="/fc/Gemm", transB=1),
        q("QuantizeLinear", ["g", "so", "z"], ["gq"]), q("DequantizeLinear", ["gq", "so", "z"], ["y"]),
    ]
    inits = {"s": np.array(ACT, f), "s2": np.array(s2, f), "z": np.array(0, np.int8), "wq": w,
             "ws": np.array(0.01, f), "so": np.array(0.05, f)}
    return M.model(nodes, [("x", T.FLOAT, [batch, 8, 4, 4])], [("y", T.FLOAT, [batch, 10])], inits, "ties")


def test_exact_ties_round_half_to_even_like_onnxruntime() -> None:
    imported = import_onnx(tie_model())
    rng = np.random.default_rng(9)
    x = {"x": (rng.integers(-128, 128, (8, 8, 4, 4)) * ACT).astype(np.float32)}  # on the grid: no input rounding
    ours = imported.run_golden(x)
    theirs = onnxruntime_outputs(imported.model, x)
    agr = agreement(ours, theirs, {n: imported.output_lsb(n) for n in ours})
    assert len(agr) == 1 and agr[0].within_one >= 0.99, str(agr[0])
    assert agr[0].exact >= 0.99, str(agr[0])
    golden = imported.run_golden(x)
    ref = imported.run_reference(x)
    np.testing.assert_array_equal(golden["y"], ref["y"])
    for model in ("iss", "tlm"):
        out, res = run_imported(imported, x, model)
        assert res.error is None
        np.testing.assert_array_equal(out["y"], golden["y"], err_msg=model)


def test_the_model_does_hit_ties() -> None:
    """The pool's sums are 2 (mod 4) and the add's operands odd in many places: without half to even the
    Gemm's inputs would differ (the test above would then not be checking ties)."""
    rng = np.random.default_rng(9)
    xq = rng.integers(-128, 128, (8, 8, 4, 4))
    sums = xq.reshape(8, 8, 2, 2, 2, 2).sum(axis=(3, 5))
    assert np.mean(sums % 4 == 2) > 0.2
