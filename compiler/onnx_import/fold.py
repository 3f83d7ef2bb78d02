"""Constant folding at import time: a node whose inputs are all constants (the shape arithmetic of an
exported ``torch.flatten``: Shape -> Gather -> Unsqueeze -> Concat -> Reshape) is computed once, by
onnx's reference evaluator, and ``Shape`` of a tensor of static shape is a constant."""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.onnx_import.errors import node_error
from compiler.onnx_import.values import Const

# Ops the handlers take constants of themselves (they keep the integers and scales of a quantized weight).
OWN_CONSTANTS = ("QuantizeLinear", "DequantizeLinear")


def shape_of(node: Any, v: Any, at: dict[str, Any]) -> Const:
    """``Shape`` of a tensor the importer knows the static shape of."""
    shape = getattr(v, "shape", None)
    if shape is None:
        raise node_error(node, "the shape of its input is not known")
    start, end = int(at.get("start", 0)), at.get("end")
    return Const(np.array(list(shape)[start:None if end is None else int(end)], np.int64))


def foldable(node: Any, ins: list[Any]) -> bool:
    """Whether ``node`` is computed at import time: every input a constant, and not an op whose handler
    keeps its constants' quantization."""
    return node.op_type not in OWN_CONSTANTS and bool(ins) and all(v is None or isinstance(v, Const) for v in ins)


def fold(node: Any, ins: list[Any], opsets: dict[str, int]) -> list[Const]:
    """The outputs of ``node`` on its constant inputs (onnx.reference); one line if it cannot run."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [f"in{k}" if v is not None else "" for k, v in enumerate(ins)]
    n = helper.make_node(node.op_type, names, [f"out{k}" for k in range(len(node.output))], domain=node.domain)
    n.attribute.extend(node.attribute)
    feeds = {nm: np.asarray(v.value) for nm, v in zip(names, ins) if v is not None}
    inputs = [helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for nm, a in feeds.items()]
    outputs = [helper.make_tensor_value_info(o, 0, None) for o in n.output]
    model = helper.make_model(helper.make_graph([n], "fold", inputs, outputs),
                              opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    try:
        outs = ReferenceEvaluator(model).run(None, feeds)
    except Exception as e:  # noqa: BLE001 - whatever the evaluator cannot do is one refusal line
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise node_error(node, f"its constant inputs cannot be folded ({first})") from None
    return [Const(np.asarray(o)) for o in outs]
