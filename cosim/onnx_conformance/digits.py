"""The digits CNN quantized by onnxruntime, imported and run on the accelerator's models.

For each form (QDQ, QOperator) of :func:`compiler.networks.digits_onnx.quantized_model`: the test
split's accuracy through onnxruntime (float model and int8 model), through the imported model on
golden and TLM (the whole split as one batch, one Program), and on the RTL too with ``rtl``; and
how the accelerator's logits agree with onnxruntime's int8 logits, in output steps.

Bounds (``ok``): the golden accuracy within :data:`ACCURACY_POINTS` of onnxruntime's int8
accuracy, at least :data:`WITHIN_ONE_SHARE` of the logits within one step of onnxruntime's, and
TLM's (and the RTL's) logits equal to golden's.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

ACCURACY_POINTS = 1.0      # golden accuracy within 1 point of onnxruntime's int8 accuracy
WITHIN_ONE_SHARE = 0.99    # share of logits within 1 LSB of onnxruntime's


def _accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def _steps(a: np.ndarray, b: np.ndarray, lsb: float) -> np.ndarray:
    d = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)) / lsb
    return np.rint(d * 1e4) / 1e4  # float32 dequantization leaves ~1e-7 of a step


def evaluate(config: str = "default", rtl: bool = False, forms: tuple[str, ...] = ("qdq", "qoperator"),
             models: tuple[str, ...] = ("golden", "tlm"), log: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """The report (module docstring) as a JSON-ready dict; ``log`` gets a line per result."""
    from compiler.networks import digits, digits_onnx
    from compiler.onnx_import import import_onnx

    from cosim.onnx_conformance.runner import onnxruntime_outputs
    from cosim.onnx_run import run_imported

    say = log or (lambda s: None)
    images, labels = digits.dataset("test")
    x = digits_onnx.float_inputs(images)
    fm = digits_onnx.float_model()
    rep: dict[str, Any] = {"images": int(len(labels)), "config": config, "forms": {}}
    rep["float_onnxruntime"] = _accuracy(onnxruntime_outputs(fm, {digits_onnx.INPUT: x})[digits_onnx.OUTPUT], labels)
    say(f"digits: {len(labels)} test images; float model on onnxruntime: {100 * rep['float_onnxruntime']:.2f} %")
    ok = True
    for form in forms:
        t0 = time.perf_counter()
        qm = digits_onnx.quantized_model(form, fm)
        theirs = onnxruntime_outputs(qm, {digits_onnx.INPUT: x})[digits_onnx.OUTPUT]
        f: dict[str, Any] = {"int8_onnxruntime": _accuracy(theirs, labels), "ops": sorted({n.op_type for n in qm.graph.node})}
        imported = import_onnx(digits_onnx.with_batch(qm, len(labels)), config)
        lsb = imported.output_lsb(digits_onnx.OUTPUT)
        outs = {}
        for m in models:
            outs[m] = run_imported(imported, {digits_onnx.INPUT: x}, m)[0][digits_onnx.OUTPUT]
            f[m] = _accuracy(outs[m], labels)
        steps = _steps(outs["golden"], theirs, lsb)
        f["agreement"] = {"elements": int(steps.size), "equal": float(np.mean(steps == 0)),
                          "within_one_lsb": float(np.mean(steps <= 1)), "max_lsb": float(steps.max()), "lsb": lsb}
        f["models_equal_golden"] = {m: bool(np.array_equal(outs[m], outs["golden"])) for m in models if m != "golden"}
        if rtl:  # the same Program, the whole split: a few seconds of simulation once the RTL is built
            got = run_imported(imported, {digits_onnx.INPUT: x}, "rtl")[0][digits_onnx.OUTPUT]
            f["rtl"] = _accuracy(got, labels)
            f["models_equal_golden"]["rtl"] = bool(np.array_equal(got, outs["golden"]))
        f["ok"] = (abs(f["golden"] - f["int8_onnxruntime"]) * 100 <= ACCURACY_POINTS
                   and f["agreement"]["within_one_lsb"] >= WITHIN_ONE_SHARE and all(f["models_equal_golden"].values()))
        f["seconds"] = round(time.perf_counter() - t0, 2)
        ok = ok and f["ok"]
        rep["forms"][form] = f
        accs = ", ".join(f"{m} {100 * f[m]:.2f} %" for m in models)
        say(f"  {form}: onnxruntime int8 {100 * f['int8_onnxruntime']:.2f} %, {accs}"
            + (f", rtl {100 * f['rtl']:.2f} %" if rtl else "")
            + f"; logits within 1 LSB of onnxruntime's: {100 * f['agreement']['within_one_lsb']:.2f} % "
              f"(equal {100 * f['agreement']['equal']:.2f} %) -> {'ok' if f['ok'] else 'NOT ok'}")
    rep["ok"] = ok
    return rep
