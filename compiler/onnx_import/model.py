"""Reading and checking an ONNX model: the file, its opsets, its fixed shapes, its constants.

:func:`load_model` takes a ``ModelProto``, a path or bytes; :class:`ModelInfo` gives what the
importer asks of the model: initializers and ``Constant`` nodes as numpy arrays, every tensor's
static shape (from ONNX shape inference), and the nodes the outputs need (dead ones are skipped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compiler.onnx_import.errors import UnsupportedModel, model_error, node_error

# The opset domains whose ops are understood (com.microsoft: what onnxruntime's quantizer writes).
DOMAINS = ("", "ai.onnx", "com.microsoft")


def with_batch(model: Any, batch: int) -> Any:
    """A copy of ``model`` whose inputs' and outputs' first dimension is ``batch`` (most exported models
    leave it symbolic, ``N``); the inferred shapes are dropped, as they would contradict it."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in list(m.graph.input) + list(m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if len(dims):
            dims[0].dim_value = batch
    del m.graph.value_info[:]
    return m


def load_model(model: Any) -> Any:
    """An ``onnx.ModelProto`` from a ModelProto, a path (str or Path) or the model's bytes; one line if
    it cannot be read."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        try:
            return onnx.load_from_string(bytes(model))
        except Exception as e:  # noqa: BLE001 - protobuf's errors vary
            raise model_error(f"not an ONNX model ({type(e).__name__}: {e})") from None
    if isinstance(model, (str, Path)):
        p = Path(model)
        if not p.is_file():
            raise UnsupportedModel(f"{p}: no such ONNX file")
        try:
            return onnx.load(str(p))
        except Exception as e:  # noqa: BLE001
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise UnsupportedModel(f"{p}: not a readable ONNX model ({first})") from None
    raise model_error(f"expected an onnx.ModelProto, a path or bytes, got {type(model).__name__}")


def tensor_array(t: Any) -> np.ndarray:
    """A TensorProto as a numpy array."""
    from onnx import numpy_helper

    return numpy_helper.to_array(t)


@dataclass
class ModelInfo:
    """A checked model and what the importer looks up in it."""

    model: Any
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dtypes: dict[str, Any] = field(default_factory=dict)  # tensor name -> numpy dtype
    nodes: list[Any] = field(default_factory=list)       # the nodes the outputs need, in order

    @property
    def graph(self) -> Any:
        """The model's GraphProto."""
        return self.model.graph

    def inputs(self) -> list[Any]:
        """The graph inputs that are real inputs (not initializers)."""
        return [i for i in self.graph.input if i.name not in self.consts]


def _value_shape(vi: Any) -> tuple[Any, ...] | None:
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim)


def check_model(model: Any) -> ModelInfo:
    """Check ``model`` and collect its constants and shapes: opsets known, inputs of fixed shape,
    constants folded; one :class:`UnsupportedModel` line otherwise."""
    import onnx
    from onnx import helper, shape_inference

    for op in model.opset_import:
        if op.domain not in DOMAINS:
            raise model_error(f"opset domain '{op.domain}' is not supported (only the standard ops and "
                              f"com.microsoft)")
    g = model.graph
    info = ModelInfo(model)
    for t in g.initializer:
        info.consts[t.name] = tensor_array(t)
    if g.sparse_initializer:
        raise model_error("sparse initializers are not supported")
    inputs = [i for i in g.input if i.name not in info.consts]
    if not inputs:
        raise model_error("the model has no input")
    for i in inputs:
        shape = _value_shape(i)
        if shape is None:
            raise model_error(f"input '{i.name}' has no shape")
        bad = [d for d in shape if not isinstance(d, int) or d <= 0]
        if bad:
            hint = "import with --batch N" if bad[0] is shape[0] and len(bad) == 1 else \
                "fix it (e.g. onnxruntime.tools.make_dynamic_shape_fixed)"
            raise model_error(f"input '{i.name}' has a dynamic dimension {bad[0]!r} (shape {list(shape)}); {hint}")
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False)
    except Exception as e:  # noqa: BLE001 - inference of an odd model: shapes come from the nodes instead
        inferred = model
        del e
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        shape = _value_shape(vi)
        if shape is not None and all(isinstance(d, int) and d > 0 for d in shape):
            info.shapes[vi.name] = tuple(int(d) for d in shape)
        et = vi.type.tensor_type.elem_type
        if et:
            info.dtypes[vi.name] = helper.tensor_dtype_to_np_dtype(et)
    for name, a in info.consts.items():
        info.shapes[name] = tuple(a.shape)
        info.dtypes[name] = a.dtype
    # the nodes the outputs need, walking back from them (ONNX lists nodes in a topological order)
    producer = {o: n for n in g.node for o in n.output if o}
    needed: set[str] = set()
    todo = [o.name for o in g.output]
    while todo:
        t = todo.pop()
        if t in needed:
            continue
        needed.add(t)
        n = producer.get(t)
        if n is not None:
            todo.extend(x for x in n.input if x)
            for a in n.attribute:
                if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                    raise node_error(n, "control flow (subgraphs) is not supported")
    for n in g.node:
        if not any(o in needed for o in n.output):
            continue
        if n.domain not in DOMAINS:
            raise node_error(n, f"op domain '{n.domain}' is not supported")
        if n.op_type == "Constant":
            info.consts[n.output[0]] = _constant_value(n)
            info.shapes[n.output[0]] = tuple(info.consts[n.output[0]].shape)
            continue
        info.nodes.append(n)
    return info


def _constant_value(n: Any) -> np.ndarray:
    from onnx import helper

    for a in n.attribute:
        v = helper.get_attribute_value(a)
        if a.name == "value":
            return tensor_array(v)
        if a.name in ("value_float", "value_int"):
            return np.array(v, dtype=np.float32 if a.name == "value_float" else np.int64)
        if a.name in ("value_floats", "value_ints"):
            return np.array(v, dtype=np.float32 if a.name == "value_floats" else np.int64)
    raise node_error(n, "a Constant without a dense value is not supported")


def attrs(node: Any) -> dict[str, Any]:
    """A node's attributes as Python values."""
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}
