"""ONNX names -> names the graph accepts, and back.

ONNX names are arbitrary strings (``/layer1/layer1.0/conv1/Conv``, ``onnx::Conv_193``, even empty
or with control characters). The graph takes any non-empty printable string of up to
:data:`MAX_NAME` characters and shows it as given in every error line, so an ONNX name passes
unchanged when it is one; otherwise its printable part, cut to length, is used, and a clash (two
names that map to one, or a reserved region name) gets a ``#k`` suffix. :class:`NameTable` keeps
the way back, so a compile error about a graph layer names the ONNX node.
"""

from __future__ import annotations

MAX_NAME = 200
# Region names the network compiler keeps for itself (compiler.network.RESERVED).
RESERVED = ("weights", "biases", "act", "_const", "insn")


def printable(name: str) -> str:
    """``name`` with non-printable characters replaced by ``?``."""
    return "".join(c if c.isprintable() else "?" for c in name)


class NameTable:
    """Unique graph names for ONNX nodes and tensors; remembers which ONNX node each came from."""

    def __init__(self) -> None:
        self.onnx_of: dict[str, tuple[str, str]] = {}  # graph name -> (ONNX name, op type)

    def take(self, onnx_name: str, op_type: str, fallback: str = "node") -> str:
        """A fresh graph name for a layer made for ONNX node/tensor ``onnx_name`` (``op_type``)."""
        base = printable(onnx_name).strip() or fallback
        base = base[:MAX_NAME - 6]
        name, k = base, 1
        while name in self.onnx_of or name in RESERVED:
            k += 1
            name = f"{base} #{k}"
        self.onnx_of[name] = (onnx_name, op_type)
        return name

    def explain(self, message: str) -> str | None:
        """For a graph/compiler error line that names a layer of this table (``layer '<name>': why``),
        the same line naming the ONNX node instead: ``node '<onnx>' (<OpType>): why``; None if none."""
        best = None
        for name, (onnx_name, op) in self.onnx_of.items():
            tag = f"layer '{name}': "
            at = message.find(tag)
            if at >= 0 and (best is None or len(name) > len(best[0])):
                best = (name, f"node '{onnx_name}' ({op}): {message[at + len(tag):]}")
        return None if best is None else best[1]
