"""ONNX conformance: ONNX's own node test cases through the importer on the accelerator's models,
against ``onnx.reference.ReferenceEvaluator`` (``cases``, ``prepare``, ``runner``, ``table``), and
the digits CNN quantized by onnxruntime against onnxruntime (``digits``). ``cosim conformance``
runs them."""
