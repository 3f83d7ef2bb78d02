"""From coverage files to the reports: merge, waive, summarize, write ``coverage.dat`` (merged),
``coverage.info`` (lcov), ``html/`` and ``summary.json``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable

from cosim.coverage.coverage_data import CoverageData, Point, read_all
from cosim.coverage.html_report import write_html
from cosim.coverage.lcov import write_lcov
from cosim.coverage.summary import Summary, summarize
from cosim.coverage.waivers import apply_waivers, load_waivers

REPO = Path(__file__).resolve().parents[2]
DEFAULT_WAIVERS = REPO / "hw" / "rtl" / "coverage_waivers.json"


def rtl_files_only(repo: Path = REPO) -> Callable[[Point], bool]:
    """Keep the points of the design's files (``hw/rtl``, or env ``COSIM_RTL_DIR`` as for the RTL model),
    not of the test benches' Verilog (the fast back-end's DRAM model and top)."""
    d = Path(os.environ.get("COSIM_RTL_DIR", repo / "hw" / "rtl")).resolve()
    try:
        prefix = d.relative_to(repo.resolve()).as_posix() + "/"
    except ValueError:
        prefix = d.as_posix() + "/"
    return lambda p: p.file.startswith(prefix)


def build_report(dat_files: Iterable[str | Path], out_dir: str | Path, waivers: str | Path | None = DEFAULT_WAIVERS,
                 keep: Callable[[Point], bool] | None = None, repo: Path = REPO,
                 check_stale: bool = True) -> tuple[dict[str, Any], Summary, CoverageData]:
    """Merge ``dat_files`` and write the reports into ``out_dir``; returns (the JSON report, the summary,
    the merged data). The JSON has ``total`` and ``modules`` ({metric: {hit, total, pct, waived}}),
    ``uncovered`` (``file:line``), ``waived`` (per waiver: what, why, points matched, of which hit),
    ``files`` (coverage files merged), ``points``, ``html``, ``lcov``, ``merged``."""
    out = Path(out_dir)
    files = [Path(f) for f in dat_files]
    data = read_all(files, repo)
    if not data.points:
        raise ValueError(f"no coverage points in {len(files)} coverage file(s): nothing ran on a coverage build")
    keep = keep or rtl_files_only(repo)
    wv = load_waivers(waivers, REPO) if waivers is not None else []
    kept = CoverageData()
    kept.points = {k: p for k, p in data.points.items() if keep(p)}
    waived, wreport = apply_waivers(kept, wv, str(waivers), check_stale)
    summary = summarize(kept, waived)
    merged = data.write(out / "coverage.dat")
    lcov = write_lcov(out / "coverage.info", kept, waived)
    html = write_html(out / "html", kept, summary, repo, waived)
    doc = {**summary.as_dict(), "waived": wreport, "files": len(files), "points": len(kept.points),
           "html": str(html), "lcov": str(lcov), "merged": str(merged)}
    (out / "summary.json").write_text(json.dumps(doc, indent=1))
    return doc, summary, kept
