"""The ONNX importer: a quantized ONNX model (QDQ or QOperator, as onnxruntime's ``quantize_static``
writes it) -> a graph (:mod:`compiler.graph`) -> one Program, with the host steps around it.

``import_onnx(model, config)`` returns an :class:`Imported`: ``network`` (the compiled
:class:`compiler.network.NetworkProgram`), ``run_golden(inputs)`` (ONNX names, dtypes and layouts in
and out, host steps included), ``host_ops`` (the ONNX nodes run on the host) and
``write_folder(path, inputs)`` (the Program folder). What cannot be mapped raises
:class:`UnsupportedModel`, one line: ``node '<name>' (<OpType>): <reason>``.

Modules: ``model`` (reading and checking the model), ``names`` (ONNX names -> graph names),
``values`` (what each ONNX tensor is during the walk), ``builder`` (the quantized operations and the
layers they become), ``geometry`` (pads, strides, auto_pad, kernels), ``qdq`` and ``qoperator`` (the
ops of the two forms), ``host`` (the host's steps), ``importer`` (the walk), ``imported`` (the result
and its folder), ``folder`` (reading a folder back).
"""

from compiler.onnx_import.errors import UnsupportedModel
from compiler.onnx_import.imported import Imported
from compiler.onnx_import.importer import SUPPORTED_OPS, import_onnx

__all__ = ["Imported", "SUPPORTED_OPS", "UnsupportedModel", "import_onnx"]
