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


def off_by_one(results: list[CaseResult], skip: tuple[str, ...] = ()) -> dict[str, tuple[int, int]]:
    """Per model (but ``skip``): (elements one step from the evaluator, elements compared), over the passed cases."""
    out: dict[str, list[int]] = {}
    for r in results:
        if r.status != PASSED:
            continue
        for m, d in r.distances.items():
            if m in skip:
                continue
            acc = out.setdefault(m, [0, 0])
            acc[0] += d.off_by_one
            acc[1] += d.elements
    return {m: (a, b) for m, (a, b) in out.items()}


def reason_kind(reason: str) -> str:
    """A refusal's reason without its particulars (node and input names, shapes, numbers), to group by."""
    import re

    r = re.sub(r"^node '.*?' \((\S+)\): ", r"\1: ", reason)
    r = re.sub(r"'[^']*'", "X", r)
    r = re.sub(r"\[[-0-9, ]*\]", "[..]", r)
    r = re.sub(r"\(-?\d+\.\.-?\d+\)", "(..)", r)
    r = re.sub(r"\b(u?int(2|4|16|32|64)|float8e4m3fn|float8e5m2|float4e2m1)\b", "T", r)
    r = re.sub(r"batch \d+, another input \d+", "batch n, another input m", r)
    return r


def refusal_groups(results: list[CaseResult]) -> list[tuple[str, int]]:
    """The refusals grouped by :func:`reason_kind`, most frequent first."""
    c = Counter(reason_kind(r.reason) for r in results if r.status == REFUSED)
    return sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))


def to_json(results: list[CaseResult], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole table as one JSON object."""
    return {"counts": counts(results), "off_by_one": {m: {"elements": n, "off_by_one": k}
                                                      for m, (k, n) in off_by_one(results).items()},
            "meta": meta or {}, "cases": [r.to_json() for r in results]}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _distance_cell(r: CaseResult) -> str:
    parts = []
    for m, d in r.distances.items():
        if m in NOT_IN_TABLE:
            continue
        if d.max_lsb == 0:
            parts.append(f"{m} =")
        else:
            parts.append(f"{m} {d.off_by_one}/{d.elements} ±1" if d.max_lsb <= 1 else f"{m} {d.max_lsb:g} LSB")
    return ", ".join(parts)


def _ort_cell(r: CaseResult) -> str:
    if r.onnxruntime is None:
        return "cannot run" if r.form else ""
    d = r.onnxruntime
    return "=" if d.max_lsb == 0 else (f"{d.off_by_one}/{d.elements} ±1" if d.max_lsb <= 1 else f"{d.max_lsb:g} LSB")


# The RTL runs a sample only when asked (--rtl): the table, which the docs hold, leaves it out so that it
# reads the same with or without it (the summary and the JSON keep it).
NOT_IN_TABLE = ("rtl",)


def markdown(results: list[CaseResult]) -> str:
    """The counts, the off-by-one summary and the per-case table in markdown (golden, ISS, TLM)."""
    c = counts(results)
    lines = [f"**{c['cases']} cases: {c[PASSED]} passed, {c[REFUSED]} refused, {c[FAILED]} failed.**", ""]
    obo = off_by_one(results, NOT_IN_TABLE)
    if obo:
        lines.append("Elements one step (1 LSB) from the evaluator, over the passed cases: " + "; ".join(
            f"{m} {k} of {n}" for m, (k, n) in obo.items()) + ".")
        lines.append("")
    groups = refusal_groups(results)
    if groups:
        lines += ["Refusals by reason (X: a name, T: a data type, [..] and (..): numbers):", "",
                  "| reason | cases |", "|---|---|"]
        lines += [f"| {_cell(k)} | {n} |" for k, n in groups]
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


BEGIN = "<!-- conformance table: begin (cosim conformance nodes --markdown writes it) -->"
END = "<!-- conformance table: end -->"


def _between_markers(text: str) -> tuple[str, str] | None:
    """(text before :data:`BEGIN`, text after :data:`END`) when ``text`` has both markers in order, else None."""
    if BEGIN in text and END in text.split(BEGIN, 1)[1]:
        head, rest = text.split(BEGIN, 1)
        return head, rest.split(END, 1)[1]
    return None


def markdown_problem(path: str) -> str | None:
    """Why the table cannot go into ``path`` (None: it can): an existing file that is not empty must have
    the table's markers, or be a table written by this command, so that no other text is replaced."""
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        return None
    if not p.is_file():
        return "not a file"
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        return f"cannot read ({getattr(e, 'strerror', None) or e})"
    if not text.strip() or _between_markers(text) is not None or text.startswith("**") and doc_counts(text):
        return None
    return (f"has no table markers ({BEGIN} ... {END}): its text would be replaced; add the markers where the "
            "table goes, or name a new file")


def write_markdown(path: str, results: list[CaseResult]) -> None:
    """Write the table into ``path``: between the :data:`BEGIN`/:data:`END` markers when the file has
    them (a doc keeps its text around the table), else (a new or empty file, or a table this command
    wrote) the table between the markers. :func:`markdown_problem` says which files are refused."""
    from pathlib import Path

    p = Path(path)
    if (why := markdown_problem(path)) is not None:
        raise ValueError(f"{path}: {why}")
    old = p.read_text() if p.is_file() else ""
    head, tail = _between_markers(old) or ("", "\n")
    p.write_text(f"{head}{BEGIN}\n{markdown(results)}{END}{tail}")


def doc_counts(text: str) -> dict[str, int] | None:
    """The counts line of a table written by :func:`markdown` inside ``text`` (None: no such line)."""
    import re

    m = re.search(r"\*\*(\d+) cases: (\d+) passed, (\d+) refused, (\d+) failed\.\*\*", text)
    if m is None:
        return None
    n, p, r, f = (int(g) for g in m.groups())
    return {"cases": n, PASSED: p, REFUSED: r, FAILED: f}
