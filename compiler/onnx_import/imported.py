"""An imported model: the compiled network and the host's steps around it, in ONNX's names and
dtypes; its golden run and its Program folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler.onnx_import.errors import UnsupportedModel
from compiler.onnx_import.host import HostOp, ModelInput, OutputStep
from compiler.onnx_import.names import NameTable
from hw.npz_file import NpzError, read_npz

MODEL_FILE = "model.onnx"  # the model's copy in a Program folder (the golden re-run and host steps read it)
META_KEY = "onnx"          # layout.json's meta key that marks an imported Program folder


@dataclass
class Imported:
    """A quantized ONNX model compiled into one Program (``network.program``).

    ``inputs``: the model inputs and the host steps that make the accelerator's inputs from them;
    ``outputs``: how each model output is made from an accelerator output; ``host_ops``: the ONNX
    nodes the host runs (quantizing inputs, dequantizing outputs, reshaping float inputs)."""

    model: Any               # onnx.ModelProto
    config: Any              # hw.config.HwConfig
    network: Any             # compiler.network.NetworkProgram
    graph: Any               # compiler.graph.Graph
    inputs: list[ModelInput]
    outputs: list[OutputStep]
    host_ops: list[HostOp]
    names: NameTable

    @property
    def batch(self) -> int:
        """The batch the Program was compiled for (the inputs' first dimension)."""
        return self.network.batch

    @property
    def input_names(self) -> list[str]:
        """The ONNX input names."""
        return [mi.name for mi in self.inputs]

    @property
    def output_names(self) -> list[str]:
        """The ONNX output names."""
        return [o.name for o in self.outputs]

    def output_lsb(self, name: str) -> float:
        """One quantization step of ONNX output ``name`` (its scale; 1 for an integer output)."""
        o = next(o for o in self.outputs if o.name == name)
        return float(o.scale) if o.scale is not None else 1.0

    # ---- host steps ---------------------------------------------------------------------------
    def graph_inputs(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The accelerator's int8 inputs (graph names, batch first) for ONNX ``inputs``."""
        if not isinstance(inputs, dict):
            raise UnsupportedModel(f"inputs must be a dict of ONNX input name -> array, got {type(inputs).__name__}")
        unknown = [k for k in inputs if k not in self.input_names]
        if unknown:
            raise UnsupportedModel(f"'{unknown[0]}' is not an input of the model (its inputs: "
                                   f"{', '.join(self.input_names)})")
        out = {}
        for mi in self.inputs:
            if mi.name not in inputs:
                raise UnsupportedModel(f"input '{mi.name}': no array given")
            a = mi.check(inputs[mi.name])
            for step in mi.steps:
                out[step.graph_name] = step.apply(a)
        return out

    def onnx_outputs(self, natural: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """ONNX outputs from the accelerator's natural int8 outputs (graph names) or graph inputs."""
        return {o.name: o.apply(natural[o.graph_name]) for o in self.outputs}

    def outputs_from_regions(self, regions: dict[str, np.ndarray], graph_inputs: dict[str, np.ndarray]
                             ) -> dict[str, np.ndarray]:
        """ONNX outputs from a run's output regions (``RunResult.outputs``)."""
        return self.onnx_outputs({**graph_inputs, **self.network.outputs(regions)})

    def random_inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Seeded random inputs in each input's range."""
        rng = np.random.default_rng(seed)
        return {mi.name: mi.random(rng) for mi in self.inputs}

    # ---- runs ---------------------------------------------------------------------------------
    def run_golden(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The golden path with the host steps: ONNX names, dtypes and layouts in and out."""
        gin = self.graph_inputs(inputs)
        return self.onnx_outputs({**gin, **self.network.run_golden(gin)})

    def run_reference(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The same through the plain numpy reference of the graph (compiler.graph_reference)."""
        from compiler.graph_reference import run_reference

        gin = self.graph_inputs(inputs)
        return self.onnx_outputs({**gin, **run_reference(self.graph, gin)})

    def golden_regions(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The golden path's output regions (as ``Program.read_outputs`` gives them) for ONNX ``inputs``:
        what a model's run of the Program is compared with."""
        net = self.network
        args: dict[str, Any] = {**net.packed_inputs(self.graph_inputs(inputs)), **net.consts}
        outs = [r for r in net.program.regions if r.role == "output"]
        for r in outs:
            args[r.name] = np.zeros(r.shape, dtype=r.dtype)
        tensors = net.kernel.run_golden(net.config, args)
        return {r.name: tensors[r.name].data.reshape(-1)[:args[r.name].size].reshape(r.shape) for r in outs}

    # ---- the Program folder -------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """What layout.json's meta records of the import (ONNX names, dtypes, shapes, host ops)."""
        return {"model": MODEL_FILE, "graph": self.graph.name, "batch": self.batch,
                "inputs": [{"name": mi.name, "dtype": mi.dtype, "shape": list(mi.shape)} for mi in self.inputs],
                "outputs": [{"name": o.name, "dtype": o.onnx_dtype, "shape": list(o.shape),
                             "lsb": self.output_lsb(o.name)} for o in self.outputs],
                "host_ops": [str(h) for h in self.host_ops]}

    def write_folder(self, path: str | Path, inputs: dict[str, np.ndarray] | None = None, seed: int = 0) -> Path:
        """Write the Program folder: the Program's files, ``dram.bin`` for these inputs, ``inputs.npz``
        (ONNX input names), ``expected.npz`` (ONNX output names, the outputs' own dtypes and layouts) and
        the model (``model.onnx``). ``inputs`` None: seeded random ones (``seed``)."""
        if inputs is None:
            inputs = self.random_inputs(seed)
        gin = self.graph_inputs(inputs)
        # in the model's own dtypes (float64 data given for a float32 input is stored as the float32 it runs as)
        inputs = {k: self.inputs[i].check(np.asarray(inputs[k])) for i, k in enumerate(self.input_names)}
        expected = self.onnx_outputs({**gin, **self.network.run_golden(gin)})
        prog = self.network.program
        self.network.set_inputs(gin)
        prog.expected = {}
        prog.meta[META_KEY] = self.describe()
        d = prog.save(path)
        save_npz(d / "inputs.npz", inputs)
        save_npz(d / "expected.npz", expected)
        (d / MODEL_FILE).write_bytes(self.model.SerializeToString())
        return d

    def summary(self) -> str:
        """A few lines: inputs, outputs, layers, host ops."""
        ins = ", ".join(f"{mi.name} {mi.dtype}{list(mi.shape)}" for mi in self.inputs)
        outs = ", ".join(f"{o.name} {o.onnx_dtype}{list(o.shape)}" for o in self.outputs)
        lines = [f"inputs: {ins}", f"outputs: {outs}",
                 f"accelerator: {len(self.graph.layers)} layers in {len(self.network.stages)} stages, "
                 f"{len(self.network.program.insns):,} instructions, batch {self.batch}, config {self.config.name}"]
        lines += [f"host: {h}" for h in self.host_ops] or ["host: nothing"]
        return "\n".join(lines)


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An .npz keyed by the given names as they are (ONNX names may hold '/' or ':')."""
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for k, a in arrays.items():
            with z.open(f"{k}.npy", "w") as f:
                np.lib.format.write_array(f, np.asarray(a), allow_pickle=False)


def load_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an .npz by name; one line if it cannot be read."""
    try:
        return read_npz(path)
    except NpzError as e:
        raise UnsupportedModel(str(e)) from None


def read_meta(folder: str | Path) -> dict[str, Any] | None:
    """The import record of a Program folder's layout.json (None: not an imported folder)."""
    p = Path(folder) / "layout.json"
    if not p.is_file():  # a FIFO would block: Program.load names what is wrong
        return None
    try:
        meta = json.loads(p.read_text()).get("meta", {})
    except (OSError, ValueError, AttributeError, RecursionError):
        return None  # Program.load names what is wrong
    rec = meta.get(META_KEY) if isinstance(meta, dict) else None
    return rec if isinstance(rec, dict) else None
