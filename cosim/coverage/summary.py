"""Coverage figures of merged data: hit/total/percentage per metric, per module and in total, and the
uncovered lines.

Metrics: ``line`` counts source lines (the statement lines of Verilator's v_line points and of the arms
of its v_branch points, each line's count the smallest of the points spanning it, as in lcov's DA);
``branch`` the v_branch points (each arm of an if/case, the implicit else too); ``toggle`` the
v_toggle points (each bit, each direction); ``fsm_state``/``fsm_arc`` the FSM points. Waived points
are counted apart (``waived``): never in ``total``, never in ``hit``; a line is waived when a waived
point spans it. The uncovered lines are ``file:line`` of every non-waived line whose count is 0;
the untaken branch arms are listed apart (``file:line <arm>``), the toggle points never seen grouped
by signal (``module:signal`` -> points, most first) and the FSM points never seen (``module:object``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

from cosim.coverage.coverage_data import METRICS, CoverageData, Point


@dataclass
class Figure:
    """One metric's counts."""

    hit: int = 0
    total: int = 0
    waived: int = 0

    @property
    def pct(self) -> float | None:
        return round(100.0 * self.hit / self.total, 2) if self.total else None

    def as_dict(self) -> dict[str, Any]:
        return {"hit": self.hit, "total": self.total, "pct": self.pct, "waived": self.waived}


@dataclass
class Summary:
    """Figures per module and in total, and the uncovered lines (sorted by file, then line)."""

    total: dict[str, Figure] = field(default_factory=lambda: {m: Figure() for m in METRICS})
    modules: dict[str, dict[str, Figure]] = field(default_factory=dict)
    uncovered: list[str] = field(default_factory=list)
    uncovered_branches: list[str] = field(default_factory=list)
    uncovered_toggles: dict[str, int] = field(default_factory=dict)
    uncovered_fsm: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"total": {m: f.as_dict() for m, f in self.total.items()},
                "modules": {mod: {m: f.as_dict() for m, f in figs.items()} for mod, figs in sorted(self.modules.items())},
                "uncovered": list(self.uncovered), "uncovered_branches": list(self.uncovered_branches),
                "uncovered_toggles": dict(self.uncovered_toggles), "uncovered_fsm": list(self.uncovered_fsm)}


def line_table(data: CoverageData, waived: set[tuple] = frozenset(),  # type: ignore[assignment]
               keep: Callable[[Point], bool] = lambda p: True) -> dict[str, dict[int, list]]:
    """Per file, per source line: ``[count, module, waived]``; count is the smallest count of the line
    points and branch arms (those with a span ``S``) spanning the line, ignoring waived points."""
    out: dict[str, dict[int, list]] = defaultdict(dict)
    for p in data.points.values():
        if not keep(p) or not (p.kind == "line" or (p.kind == "branch" and p.get("S"))):
            continue
        w = p.fields in waived
        lines = out[p.file]
        for ln in p.lines():
            row = lines.setdefault(ln, [None, p.module, False])
            if w:
                row[2] = True
            else:
                row[0] = p.count if row[0] is None else min(row[0], p.count)
    for lines in out.values():
        for row in lines.values():
            if row[0] is None:
                row[0] = 0
    return out


def line_counts(data: CoverageData, waived: set[tuple] = frozenset(),  # type: ignore[assignment]
                keep: Callable[[Point], bool] = lambda p: True) -> dict[str, dict[int, int]]:
    """Per file, per non-waived source line, its count (see :func:`line_table`)."""
    return {f: {ln: row[0] for ln, row in lines.items() if not row[2]}
            for f, lines in line_table(data, waived, keep).items()}


def summarize(data: CoverageData, waived: set[tuple] = frozenset(),  # type: ignore[assignment]
              keep: Callable[[Point], bool] = lambda p: True) -> Summary:
    """The figures of the points that ``keep`` accepts (e.g. only the RTL's files)."""
    s = Summary()

    def figs(mod: str) -> dict[str, Figure]:
        return s.modules.setdefault(mod, {m: Figure() for m in METRICS})

    missed_arms = []
    missed_toggles: dict[str, int] = defaultdict(int)
    missed_fsm = set()
    for p in data.points.values():
        kind = p.kind
        if kind is None or kind == "line" or not keep(p):
            continue
        for fig in (s.total[kind], figs(p.module)[kind]):
            if p.fields in waived:
                fig.waived += 1
            else:
                fig.total += 1
                fig.hit += p.count > 0
        if p.count == 0 and p.fields not in waived:
            if kind == "branch":
                missed_arms.append((p.file, p.line, p.obj))
            elif kind == "toggle":
                missed_toggles[p.toggle_signal()[0]] += 1
            else:
                missed_fsm.add(f"{p.module}:{p.obj}")
    bad = []
    for f, lines in line_table(data, waived, keep).items():
        for ln, (count, mod, w) in lines.items():
            for fig in (s.total["line"], figs(mod)["line"]):
                if w:
                    fig.waived += 1
                else:
                    fig.total += 1
                    fig.hit += count > 0
            if not w and count == 0:
                bad.append((f, ln))
    s.uncovered = [f"{f}:{ln}" for f, ln in sorted(bad)]
    s.uncovered_branches = [f"{f}:{ln} {o}" for f, ln, o in sorted(set(missed_arms))]
    s.uncovered_toggles = dict(sorted(missed_toggles.items(), key=lambda kv: (-kv[1], kv[0])))
    s.uncovered_fsm = sorted(missed_fsm)
    return s


def format_table(s: Summary) -> str:
    """A text table: one row per module and the total, a column per metric (``hit/total pct``)."""
    def cell(f: Figure) -> str:
        return "-" if not f.total else f"{f.hit}/{f.total} {f.pct:.1f}%"

    head = ["module", *METRICS]
    rows = [[mod, *(cell(figs[m]) for m in METRICS)] for mod, figs in sorted(s.modules.items())]
    rows.append(["TOTAL", *(cell(s.total[m]) for m in METRICS)])
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(head, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)
