"""The importer's one error: a model (or one of its nodes) the accelerator cannot run."""

from __future__ import annotations

from typing import Any

from compiler.errors import CompileError


class UnsupportedModel(CompileError):
    """An ONNX model that cannot be mapped; the message is one line,
    ``node '<name>' (<OpType>): <reason>`` (or ``model: <reason>`` for the model as a whole): an ONNX
    name may hold a newline or a terminal escape, so what is not printable shows as ``?``."""

    def __init__(self, message: str) -> None:
        super().__init__("".join(c if c.isprintable() else "?" for c in str(message)))


def node_label(node: Any) -> str:
    """What an error line calls an ONNX node: its name, or its first output's name when it has none."""
    return node.name or (node.output[0] if node.output else node.op_type)


def node_error(node: Any, reason: str) -> UnsupportedModel:
    """The one-line refusal of ``node`` (an ``onnx.NodeProto``)."""
    return UnsupportedModel(f"node '{node_label(node)}' ({node.op_type}): {reason}")


def model_error(reason: str) -> UnsupportedModel:
    """The one-line refusal of the model as a whole (no node to blame)."""
    return UnsupportedModel(f"model: {reason}")
