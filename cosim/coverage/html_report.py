"""HTML coverage report: ``index.html`` (the per-module table and the total) and one annotated source
page per file (hit count per line, uncovered lines in red, waived lines in grey, the toggle points
never seen listed under the source)."""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path
from typing import Callable

from cosim.coverage.coverage_data import METRICS, CoverageData, Point
from cosim.coverage.summary import Summary, line_table

STYLE = """body{font-family:sans-serif;margin:1.5em} table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:right} td:first-child,th:first-child{text-align:left}
pre{margin:0} .src td{border:none;padding:0 6px;font-family:monospace;white-space:pre;text-align:left}
.src td.n,.src td.c{text-align:right;color:#666} tr.miss{background:#fcc} tr.hit{background:#dfd}
tr.waived{background:#ddd} tr.part{background:#ffd} .low{background:#fdd} .full{background:#dfd}"""


def _page_name(file: str) -> str:
    return file.replace("/", "_").replace("\\", "_") + ".html"


def _cell(fig: dict) -> str:
    if not fig["total"]:
        return "<td>-</td>"
    cls = "full" if fig["hit"] == fig["total"] else "low"
    return f'<td class="{cls}">{fig["hit"]}/{fig["total"]} ({fig["pct"]:.1f}%)</td>'


def write_html(folder: str | Path, data: CoverageData, summary: Summary, repo: Path,
               waived: set[tuple] = frozenset(),  # type: ignore[assignment]
               keep: Callable[[Point], bool] = lambda p: True, title: str = "RTL code coverage") -> Path:
    """Write the report into ``folder``; returns the path of ``index.html``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    d = summary.as_dict()
    files_of: dict[str, set[str]] = defaultdict(set)
    for p in data.points.values():
        if p.kind is not None and keep(p):
            files_of[p.module].add(p.file)
    rows = []
    for mod, figs in d["modules"].items():
        links = " ".join(f'<a href="{_page_name(f)}">{html.escape(Path(f).name)}</a>' for f in sorted(files_of[mod]))
        rows.append(f"<tr><td>{html.escape(mod)} {links}</td>{''.join(_cell(figs[m]) for m in METRICS)}</tr>")
    rows.append(f"<tr><th>TOTAL</th>{''.join(_cell(d['total'][m]) for m in METRICS)}</tr>")
    waived_n = {m: d["total"][m]["waived"] for m in METRICS}
    index = [f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title><style>{STYLE}</style>",
             f"<h1>{html.escape(title)}</h1>",
             "<table><tr><th>module</th>" + "".join(f"<th>{m}</th>" for m in METRICS) + "</tr>", *rows, "</table>",
             "<p>Waived points (not counted): " + ", ".join(f"{m} {n}" for m, n in waived_n.items()) + "</p>",
             f"<p>{len(d['uncovered'])} uncovered lines.</p>"]
    (folder / "index.html").write_text("\n".join(index) + "\n")

    table = line_table(data, waived, keep)
    branch_miss: dict[str, set[int]] = defaultdict(set)
    toggles_missed: dict[str, list[str]] = defaultdict(list)
    for p in data.points.values():
        if not keep(p) or p.kind is None or p.fields in waived:
            continue
        if p.kind == "branch" and p.count == 0:
            branch_miss[p.file].add(p.line)
        elif p.kind == "toggle" and p.count == 0:
            toggles_missed[p.file].append(f"{p.module}:{p.obj}")
    for f in sorted({f for fs in files_of.values() for f in fs}):
        src_path = Path(f) if Path(f).is_absolute() else repo / f
        src = src_path.read_text(errors="replace").splitlines() if src_path.is_file() else []
        rows = table.get(f, {})
        body = []
        for n, text in enumerate(src, 1):
            row = rows.get(n)
            c = None if row is None else row[0]
            if row is not None and row[2]:
                cls = "waived"
            elif c == 0:
                cls = "miss"
            elif n in branch_miss[f]:
                cls = "part"
            elif c is not None:
                cls = "hit"
            else:
                cls = ""
            body.append(f'<tr class="{cls}"><td class="n">{n}</td><td class="c">{"" if c is None else c}</td>'
                        f"<td>{html.escape(text)}</td></tr>")
        missed = toggles_missed.get(f, [])
        page = [f"<!doctype html><meta charset=utf-8><title>{html.escape(f)}</title><style>{STYLE}</style>",
                f'<p><a href="index.html">index</a></p><h1>{html.escape(f)}</h1>',
                "<p>Columns: line, hit count (smallest over the blocks on the line); red: never run, yellow: "
                "a branch arm on the line never taken, grey: waived.</p>",
                '<table class="src">', *body, "</table>",
                f"<h2>Toggle points never seen ({len(missed)})</h2><pre>",
                html.escape("\n".join(sorted(missed)[:2000])), "</pre>"]
        (folder / _page_name(f)).write_text("\n".join(page) + "\n")
    return folder / "index.html"
