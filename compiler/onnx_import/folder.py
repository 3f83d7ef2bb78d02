"""Reading an imported Program folder back: the Program (without its ONNX-named data files), the
model re-imported from ``model.onnx``, the ONNX inputs and expected outputs, and the Program's
input regions made from those inputs by the host steps.

An imported folder is a Program folder whose ``inputs.npz``/``expected.npz`` are keyed by ONNX names
(the model's own arrays), so :meth:`hw.program.Program.load` reads only its Program files here and
the regions' data comes from the host steps; ``dram.bin`` must still be their image.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler.onnx_import.errors import UnsupportedModel
from compiler.onnx_import.imported import MODEL_FILE, Imported, load_npz, read_meta

PROGRAM_FILES = ("insn.bin", "regs.json", "layout.json")


@dataclass
class ImportedFolder:
    """An imported Program folder, ready to run: ``program`` has its input regions set."""

    path: Path
    program: Any                      # hw.program.Program
    imported: Imported
    inputs: dict[str, np.ndarray]     # ONNX-named
    expected: dict[str, np.ndarray]   # ONNX-named ({} without expected.npz)


def is_imported_folder(folder: str | Path) -> bool:
    """Whether ``folder`` is a Program folder written by ``cosim import``."""
    return read_meta(folder) is not None


def load_program(folder: str | Path, cfg: Any = None) -> Any:
    """The Program of an imported folder, from its Program files only (no data attached)."""
    from hw.program import Program, ProgramError

    d = Path(folder)
    with tempfile.TemporaryDirectory(prefix="cosim-import-") as tmp:
        for f in PROGRAM_FILES:
            if (d / f).is_file():
                os.symlink((d / f).resolve(), Path(tmp) / f)
        try:
            return Program.load(tmp, cfg)
        except ProgramError as e:
            raise ProgramError(str(e).replace(tmp, str(d))) from None


def load_folder(folder: str | Path, cfg: Any = None) -> ImportedFolder:
    """Read an imported Program folder (``cfg`` None: the config it was made for)."""
    from hw.program import ProgramError

    d = Path(folder)
    prog = load_program(d, cfg)
    model = d / MODEL_FILE
    if not model.is_file():
        raise UnsupportedModel(f"{model}: missing (an imported Program folder keeps its model, to run the host "
                               f"steps)")
    from compiler.onnx_import.importer import import_onnx

    try:
        imported = import_onnx(model, prog.config)
    except UnsupportedModel as e:  # the folder's own model: say which file (once)
        raise (e if str(e).startswith(str(model)) else UnsupportedModel(f"{model}: {e}")) from None
    want = [(r.name, r.role, r.shape, r.dtype) for r in imported.network.program.regions]
    got = [(r.name, r.role, r.shape, r.dtype) for r in prog.regions]
    if want != got:
        raise UnsupportedModel(f"{d / 'layout.json'}: its regions are not those of {MODEL_FILE} imported for config "
                               f"'{prog.config.name}' (a stale folder: import the model again)")
    if not (d / "inputs.npz").is_file():
        raise UnsupportedModel(f"{d / 'inputs.npz'}: missing, so the Program cannot be run")
    inputs = load_npz(d / "inputs.npz")
    try:
        gin = imported.graph_inputs(inputs)
    except UnsupportedModel as e:
        raise UnsupportedModel(f"{d / 'inputs.npz'}: {e}") from None
    imported.network.set_inputs(gin)
    for name, a in imported.network.program.inputs.items():  # the packed inputs and the constants
        prog.set_input(name, a)
    image = d / "dram.bin"
    if image.is_file() and image.read_bytes() != bytes(prog.dram_image()):
        raise ProgramError(f"{image}: not the DRAM image of insn.bin and the host steps of inputs.npz (a stale "
                           f"file: import again with --input, or remove it and expected.npz, which holds the "
                           f"outputs of the inputs it was written for)")
    expected = load_npz(d / "expected.npz") if (d / "expected.npz").is_file() else {}
    return ImportedFolder(d, prog, imported, inputs, expected)


def compare_outputs(expected: dict[str, np.ndarray], got: dict[str, np.ndarray], lsb: dict[str, float]) -> str | None:
    """None when ``got`` equals ``expected`` (every output, exactly), else one line on the first that
    differs (in output steps)."""
    for name, e in expected.items():
        g = got.get(name)
        if g is None:
            return f"output '{name}': missing"
        e, g = np.asarray(e), np.asarray(g)
        if e.shape != g.shape or e.dtype != g.dtype:
            return f"output '{name}': {e.dtype}{list(e.shape)} expected, got {g.dtype}{list(g.shape)}"
        diff = np.abs(e.astype(np.float64) - g.astype(np.float64)) / lsb.get(name, 1.0)
        bad = np.argwhere(diff > 1e-6)
        if len(bad):
            idx = tuple(int(i) for i in bad[0])
            return (f"output '{name}'{list(idx)}: expected {e[idx]}, got {g[idx]} ({len(bad)} element(s) differ, "
                    f"by up to {diff.max():.3g} steps)")
    return None
