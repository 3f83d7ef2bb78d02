"""Run the regression's cells on the engine and join the records into testcases.

A testcase passes when every task of it passed; a failed check is a ``failure``, a task that
could not finish (an exception, its time limit, its worker lost too often) an ``error``, as
pytest would report them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cosim.cluster import run_tasks
from cosim.regress.cells import CLASSNAME, Cell
from cosim.regress.junit import OUTCOMES, Testcase, write_junit

# when one testcase's parts disagree, the worst outcome is the testcase's
SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


@dataclass
class Regression:
    """The outcome of a regression run."""

    testcases: list[Testcase] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)   # testcase -> what its tasks returned (cycles...)
    wall_s: float = 0.0
    junit: str | None = None

    def count(self, outcome: str) -> int:
        return sum(t.outcome == outcome for t in self.testcases)

    @property
    def ok(self) -> bool:
        return not (self.count("failed") or self.count("error"))

    def line(self) -> str:
        parts = ", ".join(f"{self.count(o)} {o if o != 'error' else 'errors'}" for o in OUTCOMES)
        where = f"; JUnit XML: {self.junit}" if self.junit else ""
        return f"regress: {len(self.testcases)} testcases: {parts} in {self.wall_s:.1f} s{where}"

    def to_json(self) -> dict[str, Any]:
        return {"testcases": [{"name": t.name, "outcome": t.outcome, "time": t.time, "message": t.message,
                               "detail": self.details.get(t.name)} for t in self.testcases],
                **{o: self.count(o) for o in OUTCOMES}, "wall_s": round(self.wall_s, 3), "junit": self.junit}


def _outcome(rec: dict[str, Any]) -> tuple[str, float, str | None, Any]:
    """(outcome, time, message, detail) of one task's record."""
    if not rec["ok"]:
        return "error", float(rec.get("wall_s") or 0.0), rec["error"], None
    r = rec["result"]
    return r["outcome"], float(r.get("time") or 0.0), r.get("message"), r.get("detail")


def _result_problem(rec: dict[str, Any]) -> str | None:
    """What makes an ok record not a cell's result (a results file edited by hand, or of another campaign)."""
    r = rec["result"]
    if not isinstance(r, dict):
        return "its result is not a mapping"
    if r.get("outcome") not in SEVERITY:
        return f"outcome {r.get('outcome')!r} is not one of {', '.join(SEVERITY)}"
    t = r.get("time")
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float))):
        return f"time {t!r} is not a number of seconds"
    return None


def run_regression(cells: list[Cell], junit: str | Path | None = None, progress: bool = True,
                   **engine: Any) -> Regression:
    """Run ``cells`` as tasks (``engine``: ``run_tasks``' scheduler, workers, results, timeout_s) and write
    the JUnit XML at the end. Testcases are listed in the order of ``cells``."""
    t0 = time.perf_counter()
    by_key = {c.key: c for c in cells}
    got: dict[str, list[tuple[str, float, str | None, Any]]] = {}
    for rec in run_tasks([c.task() for c in cells], progress=progress, desc="regress", **engine):
        bad = _result_problem(rec) if rec["ok"] else None
        if bad:
            raise ValueError(f"{engine.get('results')}: the record of {rec['key']} is not a regression cell's result "
                             f"({bad}): delete its line (or the file) to run the cell again")
        got.setdefault(by_key[rec["key"]].testcase, []).append(_outcome(rec))
    reg = Regression()
    for name in dict.fromkeys(c.testcase for c in cells):
        parts = got.get(name) or [("error", 0.0, "no result", None)]
        outcome = max((p[0] for p in parts), key=SEVERITY.__getitem__)
        messages = [p[2] for p in parts if p[2] and p[0] == outcome]
        reg.testcases.append(Testcase(CLASSNAME, name, outcome, round(sum(p[1] for p in parts), 3),
                                      "\n".join(messages) or None))
        details = [p[3] for p in parts if p[3]]
        if details:
            reg.details[name] = {k: v for d in details for k, v in d.items()}
    reg.wall_s = time.perf_counter() - t0
    if junit is not None:
        reg.junit = str(write_junit(junit, reg.testcases, reg.wall_s))
    return reg
