"""The conformance table: counts, and one row per case (passed / refused with its reason / failed),
as markdown (for docs/onnx.md) or JSON."""

from __future__ import annotations

from collections import Counter
from typing import Any

from cosim.onnx_conformance.runner import FAILED, PASSED, REFUSED, CaseResult


def counts(results: list[CaseResult]) -> dict[str, int]:
    """``{"cases", "passed", "refused", "failed"}``."""
    c = Counter(r.status for r in results)
    return {"cases": len(results), PASSED: c[PASSED], REFUSED: c[REFUSED], FAILED: c[FAILED]}


def off_by_one(results: list[CaseResult]) -> dict[str, tuple[int, int]]:
    """Per model: (elements one step from the evaluator, elements compared), over the passed cases."""
    out: dict[str, list[int]] = {}
    for r in results:
        if r.status != PASSED:
            continue
        for m, d in r.distances.items():
            acc = out.setdefault(m, [0, 0])
            acc[0] += d.off_by_one
            acc[1] += d.elements
    return {m: (a, b) for m, (a, b) in out.items()}


def to_json(results: list[CaseResult], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole table as one JSON object."""
    return {"counts": counts(results), "off_by_one": {m: {"elements": n, "off_by_one": k}
                                                      for m, (k, n) in off_by_one(results).items()},
            "meta": meta or {}, "cases": [r.to_json() for r in results]}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _distance_cell(r: CaseResult) -> str:
    if not r.distances:
        return ""
    parts = []
    for m, d in r.distances.items():
        if d.max_lsb == 0:
            parts.append(f"{m} =")
        else:
            parts.append(f"{m} {d.off_by_one}/{d.elements} ±1" if d.max_lsb <= 1 else f"{m} {d.max_lsb:g} LSB")
    return ", ".join(parts)


def _ort_cell(r: CaseResult) -> str:
    if r.onnxruntime is None:
        return "no kernel" if r.form else ""
    d = r.onnxruntime
    return "=" if d.max_lsb == 0 else (f"{d.off_by_one}/{d.elements} ±1" if d.max_lsb <= 1 else f"{d.max_lsb:g} LSB")


def markdown(results: list[CaseResult]) -> str:
    """The counts, the off-by-one summary and the per-case table in markdown."""
    c = counts(results)
    lines = [f"**{c['cases']} cases: {c[PASSED]} passed, {c[REFUSED]} refused, {c[FAILED]} failed.**", ""]
    obo = off_by_one(results)
    if obo:
        lines.append("Elements one step (1 LSB) from the evaluator, over the passed cases: " + "; ".join(
            f"{m} {k} of {n}" for m, (k, n) in obo.items()) + ".")
        lines.append("")
    lines += ["| case | op | form | verdict | accelerator vs evaluator | onnxruntime vs evaluator | reason |",
              "|---|---|---|---|---|---|---|"]
    for r in results:
        form = r.form + (" (exact)" if r.exact and r.form else "")
        lines.append(f"| {r.case} | {r.op_type} | {form} | {r.status} | {_distance_cell(r)} | {_ort_cell(r)} | "
                     f"{_cell(r.reason)} |")
    return "\n".join(lines) + "\n"


def summary(results: list[CaseResult]) -> str:
    """One line of counts, then one line per failed case."""
    c = counts(results)
    lines = [f"{c['cases']} cases: {c[PASSED]} passed, {c[REFUSED]} refused, {c[FAILED]} failed"]
    for m, (k, n) in off_by_one(results).items():
        lines.append(f"  {m}: {k} of {n} elements 1 LSB from the evaluator")
    lines += [f"  FAILED {r.case}: {r.reason}" for r in results if r.status == FAILED]
    return "\n".join(lines)
