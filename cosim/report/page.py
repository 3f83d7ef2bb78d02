"""The verification report's page: one section per result file, "not run" (with the command that
makes it) when the file is missing, "unreadable" with the reason when it cannot be read.

The page is static HTML with its style inline: it opens from the disk, a CI artifact or a mail.
Each table carries ``data-input`` (the input's name) and ``data-table`` (the table's title), so a
test or a script finds it without reading the layout.
"""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from cosim.report.tables import Table, json_tables, junit_tables


@dataclass(frozen=True)
class Input:
    """A result file the report shows."""

    name: str        # the option (--NAME) and the section's id
    title: str
    default: str     # its usual path, relative to the repository
    kind: str        # "junit" or "json"
    how: str         # the command that makes it


INPUTS = (
    Input("junit", "Regression (JUnit)", "build/regress.xml", "junit", "make regress"),
    Input("coverage", "RTL code coverage", "build/coverage/summary.json", "json", "make coverage"),
    Input("bins", "Functional coverage bins", "build/fuzz-bins.json", "json",
          "cosim fuzz --coverage --json > build/fuzz-bins.json"),
    Input("fuzz", "Differential fuzzing", "build/fuzz.json", "json",
          "cosim fuzz --count 1000 --json > build/fuzz.json"),
    Input("mutation", "Mutation score", "build/mutation.json", "json", "cosim mutate --json > build/mutation.json"),
)

STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
caption { text-align: left; font-weight: bold; padding: 0.2em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.passed { color: #060; } td.failed, td.error { color: #b00; font-weight: bold; } td.skipped { color: #888; }
p.missing { color: #a60; } p.bad { color: #b00; } p.more { color: #666; font-size: 0.85em; }
code { background: #f4f4f4; padding: 0 0.3em; }
"""


def read_tables(inp: Input, path: Path, base: Path) -> list[Table]:
    """The tables of one input file (ValueError/OSError when it cannot be read)."""
    if not path.is_file():  # a folder, or a FIFO whose read would block
        raise ValueError("not a regular file")
    if inp.kind == "junit":
        try:
            return junit_tables(path)
        except ET.ParseError as e:
            raise ValueError(f"not JUnit XML ({e})") from None
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e})") from None
    except RecursionError:  # nested deeper than the decoder goes: no report's JSON is
        raise ValueError("not a report's JSON (nested too deep)") from None
    return json_tables(doc, base)


Read = dict[str, "list[Table] | str | None"]  # per input: its tables, why it is unreadable, or None (missing)


def read_inputs(paths: dict[str, Path | None], base: Path) -> Read:
    """Every input's tables (:func:`read_tables`), the reason it cannot be read, or None when it is missing."""
    out: Read = {}
    for inp in INPUTS:
        path = paths.get(inp.name)
        if path is None or not path.exists():
            out[inp.name] = None
            continue
        try:
            out[inp.name] = read_tables(inp, path, base)
        except (ValueError, OSError) as err:
            out[inp.name] = str(err).splitlines()[0] if str(err).strip() else type(err).__name__
    return out


def _table_html(inp: Input, t: Table) -> str:
    e = html.escape
    out = [f'<table data-input="{e(inp.name)}" data-table="{e(t.title)}">', f"<caption>{e(t.title)}</caption>",
           "<thead><tr>" + "".join(f"<th>{e(c)}</th>" for c in t.columns) + "</tr></thead>", "<tbody>"]
    result_col = t.columns.index("result") if inp.kind == "junit" and "result" in t.columns else -1
    for row in t.rows:
        cells = []
        for k, c in enumerate(row):
            cls = f' class="{e(c.text)}"' if k == result_col else ""
            body = f'<a href="{e(c.href)}">{e(c.text)}</a>' if c.href else e(c.text)
            cells.append(f"<td{cls}>{body}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    if t.more:
        out.append(f'<p class="more">{t.more} more row(s) not shown (see the file).</p>')
    return "\n".join(out)


def _written(path: Path) -> str:
    """When ``path`` was last written (UTC), or "at an unknown time"."""
    import datetime

    try:
        t = path.stat().st_mtime
    except OSError:
        return "at an unknown time"
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def render(paths: dict[str, Path | None], base: Path, read: Read | None = None) -> str:
    """The page for the inputs at ``paths`` (name -> path; None or a missing file: not run). Links are
    made relative to ``base``, the page's folder; ``read`` is :func:`read_inputs`'s (made here if None)."""
    read = read_inputs(paths, base) if read is None else read
    e = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>Verification report</title>", f"<style>{STYLE}</style></head><body>",
             "<h1>Verification report</h1>", "<ul>"]
    parts += [f'<li><a href="#{e(i.name)}">{e(i.title)}</a></li>' for i in INPUTS]
    parts.append("</ul>")
    for inp in INPUTS:
        path = paths.get(inp.name)
        parts.append(f'<section id="{e(inp.name)}"><h2>{e(inp.title)}</h2>')
        got = read.get(inp.name)
        if path is None or got is None:
            where = f" (no <code>{e(str(path))}</code>)" if path is not None else ""
            parts.append(f'<p class="missing" data-input="{e(inp.name)}">not run{where}: make it with '
                         f"<code>{e(inp.how)}</code></p></section>")
            continue
        parts.append(f"<p>from <code>{e(str(path))}</code>, written {e(_written(path))}</p>")  # an old file shows
        if isinstance(got, str):
            parts.append(f'<p class="bad" data-input="{e(inp.name)}">unreadable: {e(got)}</p></section>')
            continue
        tables = got
        if not tables:
            parts.append("<p>no numbers or items in this file</p>")
        parts += [_table_html(inp, t) for t in tables]
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(paths: dict[str, Path | None], out: Path, read: Read | None = None) -> Path:
    """Write the page for ``paths`` to ``out`` (its folder made if missing); returns ``out``. ``read``:
    :func:`read_inputs`'s for ``out``'s folder, when the caller has it already."""
    unknown = set(paths) - {i.name for i in INPUTS}
    if unknown:
        raise ValueError(f"no report input named {', '.join(sorted(unknown))}")
    out.parent.mkdir(parents=True, exist_ok=True)
    page = render(paths, out.parent.resolve(), read)
    try:
        out.write_text(page)
    except OSError as e:  # a full disk's error carries no file name
        raise OSError(e.errno, e.strerror, str(out)) from None
    return out
