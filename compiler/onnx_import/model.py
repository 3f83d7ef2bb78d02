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
NO_GRAPH = "not an ONNX model (no graph: an empty or foreign file)"


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
            what = "a folder, not an ONNX file" if p.is_dir() else "not a regular file" if p.exists() else \
                "no such ONNX file"
            raise UnsupportedModel(f"{p}: {what}")
        try:
            proto = onnx.load(str(p))
        except Exception as e:  # noqa: BLE001
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise UnsupportedModel(f"{p}: not a readable ONNX model ({first})") from None
        if not proto.HasField("graph"):  # protobuf reads an empty file as an empty message
            raise UnsupportedModel(f"{p}: {NO_GRAPH}")
        return proto
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
    # (node name, line) of an element type onnx's type inference refuses: raised when the importer
    # reaches that node, after the node's own op is known to be supported
    type_error: tuple[str, str] | None = None

    def check_types(self, node: Any) -> None:
        """Raise the model's type error if it is ``node``'s (or names no node)."""
        if self.type_error is not None and self.type_error[0] in ("", node.name):
            raise UnsupportedModel(self.type_error[1])

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

    if not model.HasField("graph"):
        raise model_error(NO_GRAPH)
    for op in model.opset_import:
        if op.domain not in DOMAINS:
            raise model_error(f"opset domain '{op.domain}' is not supported (only the standard ops and "
                              f"com.microsoft)")
    opset = _standard_opset(model)
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
        if any(isinstance(d, int) and d <= 0 for d in shape):
            raise model_error(f"input '{i.name}' has a dimension of size 0 (shape {list(shape)}): an empty tensor")
        bad = [d for d in shape if not isinstance(d, int) or d <= 0]
        if bad:
            hint = "import with --batch N" if bad[0] is shape[0] and len(bad) == 1 else \
                "fix it (e.g. onnxruntime.tools.make_dynamic_shape_fixed)"
            raise model_error(f"input '{i.name}' has a dynamic dimension {bad[0]!r} (shape {list(shape)}); {hint}")
    named: set[str] = set()
    made: set[str] = set(info.consts) | {i.name for i in g.input}
    for n in g.node:
        _check_schema(n, opset)
        if n.name and n.name in named:  # the names the error lines use must say which node
            raise node_error(n, "another node has the same name (node names must be unique in a graph)")
        named.add(n.name)
        for o in n.output:
            if o and o in made:
                raise node_error(n, f"output '{o}' is already produced elsewhere in the graph (each tensor has "
                                    f"one producer)")
            made.add(o)
    try:
        inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except shape_inference.InferenceError as e:
        info.type_error = _type_error(str(e))
        inferred = _lenient_inference(model)
    except Exception:  # noqa: BLE001 - inference of an odd model: shapes come from the nodes instead
        inferred = _lenient_inference(model)
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


# Quantized ops (QuantizeLinear, QLinearConv, ConvInteger, ...) came with opset 10.
MIN_OPSET = 10


def _standard_opset(model: Any) -> int:
    """The model's opset of the standard ops, checked against what the importer and onnx know."""
    from onnx.defs import onnx_opset_version

    versions = [op.version for op in model.opset_import if op.domain in ("", "ai.onnx")]
    if not versions:
        raise model_error("the model imports no opset of the standard ops")
    v, newest = versions[0], onnx_opset_version()
    if not MIN_OPSET <= v <= newest:
        raise model_error(f"opset {v} of the standard ops is not supported ({MIN_OPSET}..{newest}: quantized "
                          f"ops need {MIN_OPSET} or later; convert it with onnx.version_converter)")
    return v


def _check_schema(n: Any, opset: int) -> None:
    """A standard node must exist at the model's opset and have an input and output count its schema allows
    (nodes of com.microsoft are not known to onnx and are checked by their handlers)."""
    from onnx import defs

    if n.domain not in ("", "ai.onnx"):
        return
    try:
        schema = defs.get_schema(n.op_type, opset, "")
    except defs.SchemaError:
        raise node_error(n, f"op {n.op_type} does not exist in opset {opset} of the standard ops") from None
    if schema.deprecated:
        raise node_error(n, f"op {n.op_type} is deprecated in opset {opset}")
    for what, have, lo, hi in (("inputs", len(n.input), schema.min_input, schema.max_input),
                               ("outputs", len(n.output), schema.min_output, schema.max_output)):
        if not lo <= have <= hi:
            span = f"{lo}" if lo == hi else f"{lo}..{hi}" if hi < 2**31 - 1 else f"at least {lo}"
            raise node_error(n, f"has {have} {what}; {n.op_type} (opset {opset}) takes {span}")


def _type_error(message: str) -> tuple[str, str] | None:
    """(node name, error line) of a strict type inference that found operands of mismatched element types
    (onnxruntime would refuse to load the model too); None for other inference failures, whose node
    handlers say more (an integer tensor where a float one belongs, a float output declared int8)."""
    import re

    first = message.strip().splitlines()[0] if message.strip() else message
    m = re.search(r"\(op_type:(\w+), node name: ([^)]*)\): (.*)", first)
    if m and "inconsistent type" in m.group(3):
        return m.group(2), f"node '{m.group(2) or '?'}' ({m.group(1)}): {m.group(3).strip()}"
    return None


def _lenient_inference(model: Any) -> Any:
    from onnx import shape_inference

    try:
        return shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001 - inference of an odd model: shapes come from the nodes instead
        return model


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
