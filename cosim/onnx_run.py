"""An imported ONNX model (``compiler.onnx_import.Imported``) run on a named model, ONNX names in and
out: the host steps make the Program's input regions, the model runs the Program (through
``cosim.models``, as for any Program), and the host steps turn its output regions into the ONNX
outputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from cosim import models

RUN_MODELS = ("golden", "iss", "tlm", "rtl")


def run_imported(imported: Any, inputs: dict[str, np.ndarray], model: str = "tlm", **kw: Any
                 ) -> tuple[dict[str, np.ndarray], Any]:
    """Run ``imported`` on ``model`` (golden, iss, tlm or rtl; ``kw`` go to the RTL runner, e.g.
    ``simulator``, ``mem``) for ONNX ``inputs``. Returns (ONNX outputs, the ``RunResult``; None for
    golden). A model that stops with an error raises RuntimeError naming it."""
    if model not in RUN_MODELS:
        raise ValueError(f"model '{model}': one of {', '.join(RUN_MODELS)}")
    if model == "golden":
        return imported.run_golden(inputs), None
    gin = imported.graph_inputs(inputs)
    net = imported.network
    prog = net.program
    net.set_inputs(gin)
    if model == "iss":
        res = models.iss(prog)
    elif model == "tlm":
        res = models.tlm(prog)
    else:
        res = models.rtl([prog], net.config, **kw)[0]
    if res.error:
        raise RuntimeError(f"{model}: the run stopped with {res.error.get('name')}: {res.error.get('message', '')}")
    return imported.outputs_from_regions(res.outputs, gin), res
