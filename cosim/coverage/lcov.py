"""lcov tracefile (geninfo's ``.info`` format) of merged coverage data.

Per source file: ``SF:<path>``, a ``DA:<line>,<count>`` per statement line (the smallest count of
the points spanning it, :func:`cosim.coverage.summary.line_counts`),
``BRDA:<line>,0,<n>,<count>`` per branch point (``n`` numbers the branch points of a line in
file order; ``-`` when the count is 0 and no line point of that line ran), ``BRF``/``BRH``,
``LF``/``LH``, ``end_of_record``. Waived points are left out (lcov has no notion of a waiver).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Callable

from cosim.coverage.coverage_data import CoverageData, Point
from cosim.coverage.summary import line_counts


def lcov_text(data: CoverageData, waived: set[tuple] = frozenset(),  # type: ignore[assignment]
              keep: Callable[[Point], bool] = lambda p: True, test_name: str = "cosim") -> str:
    """The tracefile's text."""
    def kept(p: Point) -> bool:
        return keep(p) and p.fields not in waived

    lines = line_counts(data, waived, keep)
    branches: dict[str, list[Point]] = defaultdict(list)
    for p in data.points.values():
        if p.kind == "branch" and kept(p):
            branches[p.file].append(p)
    out = [f"TN:{test_name}"]
    for f in sorted(set(lines) | set(branches)):
        out.append(f"SF:{f}")
        da = lines.get(f, {})
        for ln in sorted(da):
            out.append(f"DA:{ln},{da[ln]}")
        brs = sorted(branches.get(f, []), key=lambda p: (p.line, int(p.get("n", "0") or 0)))
        per_line: dict[int, int] = defaultdict(int)
        for p in brs:
            n = per_line[p.line]
            per_line[p.line] += 1
            taken = str(p.count) if p.count or da.get(p.line, 0) else "-"
            out.append(f"BRDA:{p.line},0,{n},{taken}")
        out.append(f"BRF:{len(brs)}")
        out.append(f"BRH:{sum(1 for p in brs if p.count > 0)}")
        out.append(f"LF:{len(da)}")
        out.append(f"LH:{sum(1 for c in da.values() if c > 0)}")
        out.append("end_of_record")
    return "\n".join(out) + "\n"


def write_lcov(path: str | Path, data: CoverageData, waived: set[tuple] = frozenset(),  # type: ignore[assignment]
               keep: Callable[[Point], bool] = lambda p: True) -> Path:
    """Write the tracefile; returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(lcov_text(data, waived, keep))
    return path
