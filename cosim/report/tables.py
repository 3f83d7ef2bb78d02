"""Result files to tables: the JUnit XML of a regression, and any JSON document, generically.

A JSON document becomes:

* a **summary** table of its top-level numbers (``name``, ``value``);
* one table per top-level list or dict of items: a list of objects gives a row per object
  (columns: every key, in order of first appearance); a dict of objects a row per key (first
  column the key), nested objects flattened one level into ``outer.inner`` columns; a list of
  plain values one column; a dict of plain values two columns (``key``, ``value``); an object
  holding several such lists or dicts, one table each (``outer.inner``).

A cell whose value is a string ending in ``.html`` is a link to that file (an annotated-source page
of a coverage report), relative to the report's folder when it can be.
"""

from __future__ import annotations

import json
import math
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The most rows a table shows (a list of every uncovered line can be long); the rest are counted.
MAX_ROWS = 1000
# The longest text a cell shows of a nested value (JSON).
MAX_CELL = 200


@dataclass
class Cell:
    """What a table cell shows, and where it links to (or None)."""

    text: str
    href: str | None = None


@dataclass
class Table:
    """A titled table of text cells; ``more`` rows were left out (:data:`MAX_ROWS`)."""

    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    more: int = 0


def format_value(v: Any) -> str:
    """The text of a JSON value in a cell: numbers as Python writes them (floats to 6 significant
    digits), ``null`` as empty, nested values as compact JSON (cut at :data:`MAX_CELL` characters)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.6g}" if math.isfinite(v) else str(v)
    if isinstance(v, str):
        return v
    text = json.dumps(v, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= MAX_CELL else text[:MAX_CELL - 3] + "..."


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _cell(v: Any, base: Path | None) -> Cell:
    text = format_value(v)
    # a path to a page (relative, absolute, file: or http(s):); any other scheme (javascript:, data:) is text
    if isinstance(v, str) and v.endswith(".html") and (not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", v)
                                                       or re.match(r"^(https?|file):", v, re.I)):
        href = v
        if base is not None and os.path.isabs(v):
            try:
                href = os.path.relpath(v, base)
            except ValueError:  # another drive
                href = Path(v).as_uri()
        return Cell(text, href)
    return Cell(text)


def _flatten(item: dict[str, Any]) -> dict[str, Any]:
    """One level of nested objects as ``outer.inner`` keys."""
    out: dict[str, Any] = {}
    for k, v in item.items():
        if isinstance(v, dict) and v and all(not isinstance(x, (dict, list)) for x in v.values()):
            for k2, v2 in v.items():
                out[f"{k}.{k2}"] = v2
        else:
            out[k] = v
    return out


def _columns(items: list[dict[str, Any]]) -> list[str]:
    cols: dict[str, None] = {}
    for it in items:
        cols.update(dict.fromkeys(it))
    return list(cols)


def _bounded(t: Table, rows: list[list[Cell]]) -> Table:
    t.rows, t.more = rows[:MAX_ROWS], max(0, len(rows) - MAX_ROWS)
    return t


def items_table(title: str, value: Any, base: Path | None = None, key_name: str = "key") -> Table | None:
    """The table of a list or dict of items (see the module's rules); None for anything else."""
    if isinstance(value, list) and value:
        if all(isinstance(x, dict) for x in value):
            flat = [_flatten(x) for x in value]
            cols = _columns(flat)
            return _bounded(Table(title, cols), [[_cell(it.get(c), base) for c in cols] for it in flat])
        return _bounded(Table(title, [title]), [[_cell(x, base)] for x in value])
    if isinstance(value, dict) and value:
        if all(isinstance(x, dict) for x in value.values()):
            flat = {k: _flatten(x) for k, x in value.items()}
            cols = _columns(list(flat.values()))
            return _bounded(Table(title, [key_name, *cols]),
                            [[Cell(str(k)), *[_cell(it.get(c), base) for c in cols]] for k, it in flat.items()])
        if all(not isinstance(x, (dict, list)) for x in value.values()):
            return _bounded(Table(title, [key_name, "value"]),
                            [[Cell(str(k)), _cell(x, base)] for k, x in value.items()])
    return None


def json_tables(doc: Any, base: Path | None = None) -> list[Table]:
    """The tables of a JSON document: its summary of top-level numbers, then one per list/dict of items."""
    if not isinstance(doc, dict):
        t = items_table("items", doc, base)
        return [t] if t is not None else []
    tables = []
    numbers = [(k, v) for k, v in doc.items() if is_number(v)]
    if numbers:
        tables.append(Table("summary", ["name", "value"], [[Cell(k), Cell(format_value(v))] for k, v in numbers]))
    links = [(k, v) for k, v in doc.items() if isinstance(v, str) and v.endswith(".html")]
    if links:
        tables.append(Table("pages", ["name", "page"], [[Cell(k), _cell(v, base)] for k, v in links]))
    for k, v in doc.items():
        t = items_table(k, v, base)
        if t is not None:
            tables.append(t)
        elif isinstance(v, dict):  # an object of several kinds of items (e.g. the fuzz summary's "coverage")
            for k2, v2 in v.items():
                t2 = items_table(f"{k}.{k2}", v2, base)
                if t2 is not None:
                    tables.append(t2)
    return tables


def junit_tables(path: Path) -> list[Table]:
    """The summary (tests, passed, failed, errors, skipped, time) and a row per testcase (testcase,
    result, time, message) of a JUnit XML file."""
    root = ET.parse(path).getroot()
    rows, counts, total_time = [], {"passed": 0, "failed": 0, "error": 0, "skipped": 0}, 0.0
    for tc in root.iter("testcase"):
        result, message = "passed", ""
        for tag, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            el = tc.find(tag)
            if el is not None:
                result = name
                message = (el.get("message") or el.text or "").strip().splitlines()[0:1]
                message = message[0] if message else ""
                break
        counts[result] += 1
        name = tc.get("name", "")
        try:
            t = float(tc.get("time") or 0.0)
        except ValueError:
            raise ValueError(f"testcase {name!r}: time={tc.get('time')!r} is not a number of seconds") from None
        total_time += t
        cls = tc.get("classname")
        rows.append([Cell(f"{cls}::{name}" if cls else name), Cell(result), Cell(format_value(round(t, 3))),
                     Cell(message)])
    summary = [["tests", len(rows)], *[[k, v] for k, v in counts.items()], ["time", round(total_time, 3)]]
    return [Table("summary", ["name", "value"], [[Cell(str(k)), Cell(format_value(v))] for k, v in summary]),
            _bounded(Table("testcases", ["testcase", "result", "time", "message"]), rows)]
