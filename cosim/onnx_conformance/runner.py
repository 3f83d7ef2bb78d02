"""Running a prepared node case: the evaluator's reference, onnxruntime beside it, then the importer
and the accelerator's models (golden, ISS, TLM; RTL for a sample), each compared with the reference.

A case **passes** when every model ran and matched the reference (bit for bit where the case is exact,
else within one output step), is **refused** when it cannot be prepared or imported (one line: why),
and **fails** otherwise (a model disagreed, or something raised an unexpected error).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cosim.onnx_conformance.cases import NodeCase
from cosim.onnx_conformance.prepare import Prepared, Refusal, prepare

DEFAULT_MODELS = ("golden", "iss", "tlm")
# The node cases also run on the RTL with --rtl (one simulator session; a build takes minutes).
RTL_SAMPLE = ("maxpool_2d_precomputed_strides", "basic_conv_with_padding")
PASSED, REFUSED, FAILED = "passed", "refused", "failed"


@dataclass
class Distance:
    """How far one model's outputs are from the reference, in output steps (LSBs), over all outputs."""

    elements: int = 0
    max_lsb: float = 0.0
    off_by_one: int = 0            # elements exactly one step apart

    def to_json(self) -> dict[str, Any]:
        return {"elements": self.elements, "max_lsb": self.max_lsb, "off_by_one": self.off_by_one}


@dataclass
class CaseResult:
    """One case's verdict, reason and distances."""

    case: str
    op_type: str
    form: str = ""
    exact: bool = False
    status: str = FAILED
    reason: str = ""
    distances: dict[str, Distance] = field(default_factory=dict)   # model -> distance to the evaluator
    onnxruntime: Distance | None = None                            # onnxruntime's distance to the evaluator
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "op": self.op_type, "form": self.form, "exact": self.exact, "status": self.status,
                "reason": self.reason, "models": {m: d.to_json() for m, d in self.distances.items()},
                "onnxruntime": self.onnxruntime.to_json() if self.onnxruntime else None,
                "seconds": round(self.seconds, 3)}


def distance(ours: dict[str, np.ndarray], ref: dict[str, np.ndarray], lsb: dict[str, float]) -> Distance:
    """``|ours - ref| / lsb`` summed up over the reference's outputs (a shape mismatch is an infinite distance)."""
    d = Distance()
    for name, r in ref.items():
        a = np.asarray(ours[name])
        r = np.asarray(r)
        if a.shape != r.shape:
            return Distance(int(r.size), float("inf"), 0)
        steps = np.abs(a.astype(np.float64) - r.astype(np.float64)) / lsb.get(name, 1.0)
        steps = np.rint(steps * 1e4) / 1e4  # float32 dequantization leaves ~1e-7 of a step
        d.elements += int(r.size)
        d.max_lsb = max(d.max_lsb, float(steps.max(initial=0.0)))
        d.off_by_one += int(np.count_nonzero(steps == 1))
    return d


def reference(model: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``onnx.reference.ReferenceEvaluator``'s outputs by name."""
    from onnx.reference import ReferenceEvaluator

    ev = ReferenceEvaluator(model)
    names = [o.name for o in model.graph.output]
    # its MaxPool pads an integer input with NaN, which the cast makes 0 (a warning per case): right for
    # uint8, whose minimum it is; a wrong pad elsewhere would show as a failed case, not be hidden
    with np.errstate(invalid="ignore"):
        return dict(zip(names, ev.run(names, inputs)))


def onnxruntime_outputs(model: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime's outputs by name (CPU provider, one thread, its precise int8 mode); a kernel
    onnxruntime lacks is reported in the table, not logged."""
    from compiler.onnx_import.agreement import onnxruntime_outputs as ort_outputs

    return ort_outputs(model, inputs, quiet=True)


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def within(d: Distance, exact: bool) -> bool:
    """Whether a distance is good enough: 0 for an exact case, at most one step otherwise."""
    return d.max_lsb <= (0 if exact else 1)


def run_case(case: NodeCase, models: tuple[str, ...] = DEFAULT_MODELS, config: str = "default",
             imported_out: list[Any] | None = None) -> CaseResult:
    """Prepare, import and run ``case`` on ``models``; never raises for a problem of the case.
    ``imported_out``: when given, the import (and its prepared case) is appended for a later RTL run."""
    t0 = time.perf_counter()
    res = CaseResult(case.name, case.op_type)
    try:
        _run(case, models, config, res, imported_out)
    except Exception as e:  # noqa: BLE001 - any crash is this case's failure, reported in one line
        res.status, res.reason = FAILED, f"{type(e).__name__}: {_one_line(e)}"
    res.seconds = time.perf_counter() - t0
    return res


def _run(case: NodeCase, models: tuple[str, ...], config: str, res: CaseResult, imported_out: list[Any] | None) -> None:
    from compiler.errors import CompileError
    from compiler.onnx_import import import_onnx

    from cosim.onnx_run import run_imported

    try:
        prep = prepare(case)
    except Refusal as e:
        res.status, res.reason = REFUSED, str(e)
        return
    res.form, res.exact = prep.form, prep.exact
    ref = reference(prep.model, prep.inputs)
    if prep.form == "integer":  # the frozen case must still give ONNX's own expected outputs
        d = distance(ref, dict(zip(case.output_names, case.outputs)), prep.lsb)
        if d.max_lsb > 0:
            res.status, res.reason = FAILED, f"the evaluator is {d.max_lsb:g} LSB from the case's expected output"
            return
    try:
        res.onnxruntime = distance(onnxruntime_outputs(prep.model, prep.inputs), ref, prep.lsb)
    except Exception:  # noqa: BLE001 - onnxruntime lacks some kernels (e.g. int8 Add); the column stays empty
        res.onnxruntime = None
    try:
        imported = import_onnx(prep.model, config)
    except CompileError as e:  # UnsupportedModel is one; a graph or compile refusal is also one line
        res.status, res.reason = REFUSED, _one_line(e)
        return
    for m in models:
        ours, _ = run_imported(imported, prep.inputs, m)
        res.distances[m] = distance(ours, ref, prep.lsb)
    bad = [m for m, d in res.distances.items() if not within(d, prep.exact)]
    if bad:
        d = res.distances[bad[0]]
        res.status = FAILED
        res.reason = (f"{', '.join(bad)}: {d.max_lsb:g} LSB from the evaluator "
                      f"({'bit-exact' if prep.exact else 'at most 1 LSB'} required)")
        return
    res.status = PASSED
    if imported_out is not None:
        imported_out.append((imported, prep, ref))


def run_rtl(entries: list[tuple[Any, Prepared, dict[str, np.ndarray]]], results: dict[str, CaseResult]) -> None:
    """Run imported cases on the RTL in one simulator session and add the distances (a case that does
    not match turns failed)."""
    from cosim import models

    if not entries:
        return
    cfg = entries[0][0].config
    programs, gins = [], []
    for imported, prep, _ in entries:
        gin = imported.graph_inputs(prep.inputs)
        imported.network.set_inputs(gin)
        programs.append(imported.network.program)
        gins.append(gin)
    runs = models.rtl(programs, cfg)
    for (imported, prep, ref), gin, run in zip(entries, gins, runs):
        res = results[prep.case]
        if run.error:
            res.status, res.reason = FAILED, f"rtl: stopped with {run.error.get('name')}"
            continue
        d = distance(imported.outputs_from_regions(run.outputs, gin), ref, prep.lsb)
        res.distances["rtl"] = d
        if not within(d, prep.exact):
            res.status, res.reason = FAILED, f"rtl: {d.max_lsb:g} LSB from the evaluator"


def run_suite(cases: list[NodeCase], models: tuple[str, ...] = DEFAULT_MODELS, config: str = "default",
              rtl_sample: tuple[str, ...] = (), progress: Any = None) -> list[CaseResult]:
    """Every case on ``models``; then the passed cases named in ``rtl_sample`` on the RTL too."""
    results: dict[str, CaseResult] = {}
    rtl_entries: list[Any] = []
    for c in cases:
        keep: list[Any] = []
        r = run_case(c, models, config, keep if c.name in rtl_sample else None)
        results[c.name] = r
        rtl_entries += keep
        if progress is not None:
            progress(r)
    run_rtl(rtl_entries, results)
    return list(results.values())
