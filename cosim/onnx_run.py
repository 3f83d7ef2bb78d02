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


# Samples `cosim net MODEL.onnx` runs (seeded random values in the input's range, quantized by the host).
NET_SAMPLES = 64


def onnx_network(path: str, seed: int = 0) -> Any:
    """``cosim net MODEL.onnx``: the imported model's graph as a ``compiler.networks.Network`` on
    :data:`NET_SAMPLES` seeded random inputs (quantized by the host steps; no labels), so that
    ``cosim net`` runs it like a shipped network. A model of several inputs or outputs, or one whose
    output is not the accelerator's (an input), is refused in one line."""
    from compiler.networks.network import Network
    from compiler.onnx_import import import_onnx
    from cosim.cli import UserError

    from compiler.onnx_import.model import load_model

    proto = load_model(path)
    dims = [vi.type.tensor_type.shape.dim for vi in proto.graph.input]
    symbolic = any(len(d) and not d[0].HasField("dim_value") for d in dims)
    imported = import_onnx(proto, batch=1 if symbolic else None)  # the graph is per sample: any batch does
    g = imported.graph
    if len(g.inputs) != 1 or len(g.outputs) != 1:
        raise UserError(f"{path}: the accelerator's graph has {len(g.inputs)} input(s) and {len(g.outputs)} "
                        f"output(s); cosim net runs graphs of one input and one output (cosim import runs any)")
    mi = imported.inputs[0]
    samples = mi.steps[0].apply(mi.random(np.random.default_rng(seed), NET_SAMPLES))
    samples.flags.writeable = False
    host = "; ".join(str(op) for op in imported.host_ops) or "none"
    return Network(name=g.name, description=f"ONNX model {path} (seeded random inputs; host ops: {host})",
                   graph=lambda: g, dataset=lambda split: (samples, None), float_predict=None,
                   input_name=g.inputs[0].name, output=g.outputs[0].name)
