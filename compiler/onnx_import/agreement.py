"""How far the accelerator's outputs are from onnxruntime's, in output quantization steps (LSBs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


def onnxruntime_outputs(model: Any, inputs: dict[str, np.ndarray], quiet: bool = False,
                        optimized: bool = True) -> dict[str, np.ndarray]:
    """The model's outputs on onnxruntime's CPU provider, by ONNX name (``quiet``: no log lines, e.g.
    for a kernel onnxruntime lacks, which the caller reports). ``optimized`` False turns its graph
    optimizations off: the graph's literal semantics (its fusions may drop a requantization, e.g. a
    QuantizeLinear/DequantizeLinear pair around an Identity)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # a shared machine: one thread is enough for the small models imported here
    opts.inter_op_num_threads = 1
    if quiet:
        opts.log_severity_level = 4
    # On x86-64 with AVX2 but no VNNI, onnxruntime's uint8 x int8 kernels (QLinearConv, QLinearMatMul and
    # the int8 kernels QDQ graphs are fused into) sum pairs of products in 16 bits with saturation
    # (VPMADDUBSW): up to tens of output steps off the exact int8 arithmetic on such machines only. Its
    # precise mode keeps the reference exact on every CPU; it has no kernel for some operand types
    # (QGemm on int8 activations), which the default mode then runs (they do not saturate).
    precise = ort.SessionOptions()
    precise.intra_op_num_threads, precise.inter_op_num_threads = 1, 1
    precise.log_severity_level = 4  # a refused kernel is not an error here
    precise.add_session_config_entry("session.x64quantprecision", "1")
    if not optimized:
        for o in (opts, precise):
            o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        sess = ort.InferenceSession(model.SerializeToString(), precise, providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime raises its own exception types (NotImplemented, Fail) at creation
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, inputs)))


@dataclass
class Agreement:
    """One output's distance: the largest difference and the share of elements within one step."""

    output: str
    elements: int
    max_lsb: float
    within_one: float   # share of elements at most one step apart
    exact: float        # share of equal elements

    def __str__(self) -> str:
        return (f"output '{self.output}': {self.elements} elements, {100 * self.exact:.2f} % equal, "
                f"{100 * self.within_one:.2f} % within 1 LSB, at most {self.max_lsb:.3g} LSB apart")

    def to_json(self) -> dict[str, Any]:
        """The figures as a JSON object."""
        return {"output": self.output, "elements": self.elements, "max_lsb": self.max_lsb,
                "within_one_lsb": self.within_one, "equal": self.exact}


def agreement(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray], lsb: dict[str, float]) -> list[Agreement]:
    """Per output: ``|ours - theirs| / lsb`` (a float output's lsb is its scale; an integer's is 1)."""
    out = []
    for name, a in ours.items():
        b = np.asarray(theirs[name])
        d = np.abs(np.asarray(a, np.float64) - b.astype(np.float64)) / lsb[name]
        steps = np.rint(d * 1e4) / 1e4  # float32 dequantization leaves ~1e-7 of a step
        out.append(Agreement(name, int(d.size), float(steps.max(initial=0.0)), float(np.mean(steps <= 1)),
                             float(np.mean(steps == 0))))
    return out
