"""The shipped networks: trained, quantized models with their data sets, by name.

``NETWORKS[name]`` is a :class:`Network`: its integer :class:`compiler.graph.Graph` (built from
weights committed next to it), its data set already quantized to the graph input's int8
layout, and the float model it was quantized from (for the float-vs-int8 accuracy
comparison). ``cosim net NAME`` looks networks up here.
"""

from __future__ import annotations

from compiler.networks import digits, digits_transformer_program, resnet18_onnx
from compiler.networks.network import Network

NETWORKS: dict[str, Network] = {net.name: net for net in (digits.NETWORK, digits_transformer_program.NETWORK, resnet18_onnx.network())}

__all__ = ["NETWORKS", "Network"]
