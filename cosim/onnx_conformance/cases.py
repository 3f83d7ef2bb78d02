"""ONNX's own node test cases, built in memory by the ``onnx`` package, and the selection the
conformance suite runs.

The onnx wheel ships the generators of its node tests (``onnx.backend.test.case.node.<op>``), not
their data files: importing a generator module runs its ``export*`` functions, which build each
case's model and input/output arrays (numpy's global seed is reset before each export, so the
data does not depend on which modules are imported). Only the modules of the selected ops are
imported, which takes a few seconds instead of the ~20 s of ``collect_testcases``.
"""

from __future__ import annotations

import fnmatch
import importlib
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

# The selection: case names without their "test_" prefix, as fnmatch patterns.
PATTERNS = ("qlinearconv", "qlinearmatmul_*", "matmulinteger", "convinteger_*", "quantizelinear*",
            "dequantizelinear*", "maxpool_2d_*", "averagepool_2d_*", "globalaveragepool", "globalmaxpool",
            "relu", "add*", "conv_with_*", "basic_conv_*", "gemm_*", "matmul_*", "flatten_*", "reshape_*")
# The generator modules (onnx.backend.test.case.node.<module>) that export the selected cases.
MODULES = ("qlinearconv", "qlinearmatmul", "matmulinteger", "convinteger", "quantizelinear", "dequantizelinear",
           "maxpool", "averagepool", "globalaveragepool", "globalmaxpool", "relu", "add", "conv", "gemm",
           "matmul", "flatten", "reshape")


@dataclass
class NodeCase:
    """One ONNX node test case: its name (without ``test_``), model and first data set."""

    name: str
    model: Any                      # onnx.ModelProto
    inputs: list[Any]               # numpy arrays (or TensorProto for types numpy lacks), in graph-input order
    outputs: list[Any]              # the expected outputs, in graph-output order

    @property
    def op_type(self) -> str:
        """The op the case tests (its graph's one node)."""
        return self.model.graph.node[0].op_type

    @property
    def input_names(self) -> list[str]:
        return [vi.name for vi in self.model.graph.input]

    @property
    def output_names(self) -> list[str]:
        return [vi.name for vi in self.model.graph.output]


def selected(name: str, patterns: tuple[str, ...] = PATTERNS) -> bool:
    """Whether case ``name`` (with or without ``test_``) matches one of ``patterns``."""
    short = name[5:] if name.startswith("test_") else name
    return any(fnmatch.fnmatchcase(short, p) for p in patterns)


def collect(patterns: tuple[str, ...] = PATTERNS) -> list[NodeCase]:
    """The selected node cases, in the order ONNX exports them, each name once. Cases with more than one
    node (the ``_expanded`` function bodies) are left out: they test a function's expansion, not the op."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # some generators warn on purpose (overflowing casts)
        for m in MODULES:
            importlib.import_module(f"onnx.backend.test.case.node.{m}")
    from onnx.backend.test.case.node import _NodeTestCases

    out: list[NodeCase] = []
    seen: set[str] = set()
    for tc in _NodeTestCases:
        if tc.name in seen or not selected(tc.name, patterns) or len(tc.model.graph.node) != 1 or not tc.data_sets:
            continue
        seen.add(tc.name)
        ins, outs = tc.data_sets[0]
        out.append(NodeCase(tc.name[5:], tc.model, [_array(v) for v in ins], [_array(v) for v in outs]))
    return out


def _array(v: Any) -> Any:
    """A numpy scalar as a 0-d array (cases store scalar scales and zero points as numpy scalars)."""
    return np.asarray(v) if isinstance(v, np.generic) else v


def numpy_arrays(values: list[Any]) -> bool:
    """Whether every value is a numpy array (ONNX stores float8/int4/int2/float4 data as TensorProto)."""
    return all(isinstance(v, np.ndarray) for v in values)
