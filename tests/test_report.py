"""`cosim report`: the page's tables are the result files' contents.

Result files written here in the shapes the producers write (a JUnit XML of a regression, a code
coverage summary with per-module figures and annotated-source pages, a fuzz summary, a mutation
report), one left missing; the page is parsed back with html.parser and every table compared with
the file it came from. With Debian's chromium installed, the page is also rendered headless.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cosim.cli import main
from cosim.report.tables import format_value

REPO = Path(__file__).resolve().parents[1]

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="regress" tests="4" failures="1" errors="1" skipped="1" time="12.5">
<testcase classname="tests.test_rtl_regression" name="test_examples[small-fast-0-verilator]" time="3.25"/>
<testcase classname="tests.test_rtl_regression" name="test_examples[small-protocol-0-verilator]" time="4.5">
<failure message="AssertionError: vadd: outputs differ&#10;second line">detail</failure></testcase>
<testcase classname="tests.test_rtl_regression" name="test_unit_cases[small-fast]" time="1">
<error message="boom"/></testcase>
<testcase classname="tests.test_rtl_regression" name="test_examples[small-fast-0-icarus]" time="0">
<skipped message="Icarus Verilog (iverilog) is not installed"/></testcase>
</testsuite></testsuites>
"""


class Tables(HTMLParser):
    """The page's tables by (data-input, data-table): {"columns": [...], "rows": [[(text, href)]]}, and the
    inputs marked not run."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[tuple[str, str], dict] = {}
        self.missing: dict[str, str] = {}
        self.current: dict | None = None
        self.cell: list[str] | None = None
        self.href: str | None = None
        self.in_head = False
        self.missing_of: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.current = {"columns": [], "rows": []}
            self.tables[(a["data-input"], a["data-table"])] = self.current
        elif tag == "thead":
            self.in_head = True
        elif tag == "tr" and self.current is not None and not self.in_head:
            self.current["rows"].append([])
        elif tag in ("td", "th") and self.current is not None:
            self.cell, self.href = [], None
        elif tag == "a" and self.cell is not None:
            self.href = a.get("href")
        elif tag == "p" and a.get("class") == "missing":
            self.missing_of = a["data-input"]
            self.missing[self.missing_of] = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.current = None
        elif tag == "thead":
            self.in_head = False
        elif tag in ("td", "th") and self.cell is not None and self.current is not None:
            text = "".join(self.cell)
            if tag == "th":
                self.current["columns"].append(text)
            else:
                self.current["rows"][-1].append((text, self.href))
            self.cell = None
        elif tag == "p":
            self.missing_of = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)
        if self.missing_of is not None:
            self.missing[self.missing_of] += data


def _texts(table: dict) -> list[list[str]]:
    return [[t for t, _ in row] for row in table["rows"]]


def _results(tmp_path: Path) -> dict[str, Path]:
    html_dir = tmp_path / "coverage" / "html"
    html_dir.mkdir(parents=True)
    (html_dir / "index.html").write_text("<html>index</html>")
    (html_dir / "hw_rtl_alu.v.html").write_text("<html>alu</html>")
    coverage = {
        "total": {"line": {"hit": 90, "total": 100, "pct": 90.0, "waived": 2},
                  "toggle": {"hit": 400, "total": 512, "pct": 78.125, "waived": 0}},
        "modules": {"alu": {"line": {"hit": 40, "total": 41, "pct": 97.561, "waived": 0},
                            "html": str(html_dir / "hw_rtl_alu.v.html")},
                    "fetch": {"line": {"hit": 50, "total": 59, "pct": 84.746, "waived": 2}}},
        "uncovered": ["hw/rtl/fetch.v:88", "hw/rtl/fetch.v:91"],
        "files": 14, "points": 3021, "html": str(html_dir / "index.html"),
    }
    fuzz = {"count": 1000, "seed": 1, "mismatches": 0, "errors": 0, "faulty": 193, "wall_s": 41.5,
            "by_kind": {"valid": 807, "fault": 193}, "failures": []}
    mutation = {"mutants": 200, "killed": 188, "equivalent": 4, "score": 0.959, "raw_score": 0.94,
                "by_kind": {"arith": {"mutants": 20, "killed": 19}, "stuck_bit": {"mutants": 30, "killed": 27}},
                "survivors": [{"id": "alu.v:12:7:arith:0", "module": "alu", "change": "+ -> -"},
                              {"id": "fetch.v:40:3:constant:0", "module": "fetch", "change": "4 -> 5",
                               "note": "a reviewed survivor"}]}
    paths = {"junit": tmp_path / "regress.xml", "coverage": tmp_path / "coverage" / "summary.json",
             "fuzz": tmp_path / "fuzz.json", "mutation": tmp_path / "mutation.json"}
    paths["junit"].write_text(JUNIT)
    paths["coverage"].write_text(json.dumps(coverage))
    paths["fuzz"].write_text(json.dumps(fuzz))
    paths["mutation"].write_text(json.dumps(mutation))
    return paths


def _report(tmp_path: Path, paths: dict[str, Path], monkeypatch) -> Path:
    """The page of ``paths`` with the bins left at their default path, missing in ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "site" / "report.html"
    argv = ["report", "-o", str(out)]
    for name, p in paths.items():
        argv += [f"--{name}", str(p)]
    assert main(argv) == 0
    return out


def test_tables_are_the_files(tmp_path, capsys, monkeypatch):
    paths = _results(tmp_path)
    out = _report(tmp_path, paths, monkeypatch)
    assert "not run: bins" in capsys.readouterr().out
    # each shown file says when it was written (an old result of an earlier run shows its age)
    import datetime

    day = datetime.datetime.fromtimestamp(paths["fuzz"].stat().st_mtime, datetime.timezone.utc).strftime("%Y-%m-%d")
    assert out.read_text().count(f"</code>, written {day} ") == len(paths)
    page = Tables()
    page.feed(out.read_text())
    t = page.tables

    # JUnit: a row per testcase (name, result, time, first line of the message), and the counts
    assert t[("junit", "testcases")]["columns"] == ["testcase", "result", "time", "message"]
    assert _texts(t[("junit", "testcases")]) == [
        ["tests.test_rtl_regression::test_examples[small-fast-0-verilator]", "passed", "3.25", ""],
        ["tests.test_rtl_regression::test_examples[small-protocol-0-verilator]", "failed", "4.5",
         "AssertionError: vadd: outputs differ"],
        ["tests.test_rtl_regression::test_unit_cases[small-fast]", "error", "1", "boom"],
        ["tests.test_rtl_regression::test_examples[small-fast-0-icarus]", "skipped", "0",
         "Icarus Verilog (iverilog) is not installed"]]
    assert dict(_texts(t[("junit", "summary")])) == {"tests": "4", "passed": "1", "failed": "1", "error": "1",
                                                     "skipped": "1", "time": "8.75"}

    # every JSON: the summary is its top-level numbers, each list/dict of items a table of rows
    for name in ("coverage", "fuzz", "mutation"):
        doc = json.loads(paths[name].read_text())
        numbers = {k: format_value(v) for k, v in doc.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        assert dict(_texts(t[(name, "summary")])) == numbers
        for key, value in doc.items():
            if not isinstance(value, (list, dict)) or not value:
                assert (name, key) not in t
                continue
            table = t[(name, key)]
            if isinstance(value, list) and isinstance(value[0], dict):
                cols = list(dict.fromkeys(k for item in value for k in item))
                assert table["columns"] == cols
                assert _texts(table) == [[format_value(item.get(c)) for c in cols] for item in value]
            elif isinstance(value, list):
                assert _texts(table) == [[format_value(v)] for v in value]
            elif all(isinstance(v, dict) for v in value.values()):
                for (k, item), row in zip(value.items(), _texts(table)):
                    got = dict(zip(table["columns"], row))
                    assert got["key"] == k
                    for k2, v2 in item.items():
                        if isinstance(v2, dict):
                            assert all(got[f"{k2}.{k3}"] == format_value(v3) for k3, v3 in v2.items())
                        else:
                            assert got[k2] == format_value(v2)
                assert len(table["rows"]) == len(value)
            else:
                assert dict(_texts(table)) == {k: format_value(v) for k, v in value.items()}

    # the coverage rows link to their annotated source, relative to the page's folder
    alu = next(r for r in t[("coverage", "modules")]["rows"] if r[0][0] == "alu")
    href = next(h for _, h in alu if h)
    assert (out.parent / href).resolve() == (tmp_path / "coverage" / "html" / "hw_rtl_alu.v.html").resolve()
    assert "fetch" in [r[0][0] for r in t[("coverage", "modules")]["rows"]]
    (_, pages_href), = [c for row in t[("coverage", "pages")]["rows"] for c in row if c[1]]
    assert (out.parent / pages_href).resolve() == (tmp_path / "coverage" / "html" / "index.html").resolve()

    # the missing input: not run, with the command that makes it
    assert set(page.missing) == {"bins"}
    assert "cosim fuzz --coverage --json" in page.missing["bins"]


def test_unreadable_and_missing_inputs(tmp_path, capsys, monkeypatch):
    """At its default path, a file that is not JSON is one line in its section (and in the summary line,
    not among those shown) and a missing one says not run; named by its option, an unreadable file or a
    folder is an error that writes nothing (an existing page stays)."""
    monkeypatch.chdir(tmp_path)
    bad = Path("build/fuzz.json")
    bad.parent.mkdir()
    bad.write_text("{not json")
    out = tmp_path / "r.html"
    assert main(["report", "-o", str(out)]) == 0
    summary = capsys.readouterr().out
    assert summary.startswith(f"{out}: no results; not run: junit, coverage, bins, mutation; unreadable: fuzz ({bad}: "
                              f"not JSON"), summary
    text = out.read_text()
    for given in (tmp_path / bad, tmp_path):
        assert main(["report", "-o", str(out), "--fuzz", str(given)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"cosim report: error: --fuzz {given}: not ") and len(err.splitlines()) == 1, err
        assert out.read_text() == text
    # a file named by its option that is not there (a typo) is not shown as "not run"
    assert main(["report", "-o", str(out), "--fuzz", str(tmp_path / "fuz.json")]) == 2
    err = capsys.readouterr().err
    assert f"--fuzz {tmp_path / 'fuz.json'}: no such file" in err and len(err.splitlines()) == 1, err
    assert out.read_text() == text
    # -o naming an input is refused before the page replaces the input
    good = tmp_path / "fuzz.json"
    good.write_text('{"cases": 3}')
    assert main(["report", "-o", str(good), "--fuzz", str(good)]) == 2
    err = capsys.readouterr().err
    assert "is the --fuzz input" in err and good.read_text() == '{"cases": 3}', err
    assert 'class="bad" data-input="fuzz">unreadable: not JSON' in text
    page = Tables()
    page.feed(text)
    assert set(page.missing) == {"junit", "coverage", "bins", "mutation"} and not page.tables
    assert "make regress" in page.missing["junit"] and "make coverage" in page.missing["coverage"]


def test_chromium_renders_the_tables(tmp_path, monkeypatch):
    """The page in a real browser (Debian's chromium, headless): the DOM it builds has every table."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (Debian package chromium): the page was checked with html.parser only")
    paths = _results(tmp_path)
    out = _report(tmp_path, paths, monkeypatch)
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", out.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = Tables()
    dom.feed(r.stdout)
    page = Tables()
    page.feed(out.read_text())
    assert dom.tables == page.tables and ("junit", "testcases") in dom.tables


def test_cli_help_lists_report():
    r = subprocess.run([sys.executable, "-m", "cosim.cli", "report", "--help"], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "make regress" in r.stdout


def test_nested_groups_get_a_table_each(tmp_path):
    """A fuzz summary with functional coverage: its "coverage" object holds bins (a dict of counts), the
    empty bins (a list) and the unreachable ones (a dict of reasons): a table each, rows as in the file."""
    doc = {"count": 40, "mismatches": 0,
           "coverage": {"bins": {"insn.LOAD.ACC": 12, "loop.gemm.inner.zero": 0},
                        "empty": ["loop.gemm.inner.zero"],
                        "unreachable": {"error.AXI_RESP": "the DRAM model never answers with an error"}}}
    f = tmp_path / "bins.json"
    f.write_text(json.dumps(doc))
    out = tmp_path / "report.html"
    assert main(["report", "-o", str(out), "--bins", str(f)]) == 0
    page = Tables()
    page.feed(out.read_text())
    t = page.tables
    assert dict(_texts(t[("bins", "coverage.bins")])) == {"insn.LOAD.ACC": "12", "loop.gemm.inner.zero": "0"}
    assert _texts(t[("bins", "coverage.empty")]) == [["loop.gemm.inner.zero"]]
    assert dict(_texts(t[("bins", "coverage.unreachable")])) == doc["coverage"]["unreachable"]



def test_an_unwritable_page_is_one_line_naming_it(tmp_path, capsys):
    """A folder path through a file, and a full device: one line naming the path, nothing else."""
    (tmp_path / "afile").write_text("")
    assert main(["report", "-o", str(tmp_path / "afile" / "r.html")]) == 2
    page = tmp_path / "afile" / "r.html"
    want = (f"cosim report: error: argument -o/--out: {page}: {tmp_path / 'afile'} is a file, where a folder is "
            f"needed (see cosim report --help)")
    assert capsys.readouterr().err.strip() == want
    if Path("/dev/full").exists():
        assert main(["report", "-o", "/dev/full"]) == 2
        assert capsys.readouterr().err.strip() == "cosim report: error: /dev/full: No space left on device"


def test_only_page_paths_become_links():
    """A value ending in .html is a link when it is a path or a file:/http(s): address; another scheme
    (javascript:, data:) stays text."""
    from cosim.report.tables import _cell

    for v in ("sub/x.html", "/abs/x.html", "https://e.org/x.html", "FILE:///x.html"):
        assert _cell(v, None).href == v, v
    for v in ("javascript:alert(1)//x.html", "data:text/html,x.html", "JavaScript:x.html"):
        assert _cell(v, None).href is None, v
