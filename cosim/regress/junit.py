"""JUnit XML of a regression, shaped as pytest's ``--junitxml`` writes it (CI tooling reads either).

One ``<testsuite name="pytest">`` in ``<testsuites name="pytest tests">``; a ``<testcase
classname=... name=... time=...>`` per testcase with a ``<failure>``, ``<error>`` or
``<skipped>`` child when it did not pass.
"""

from __future__ import annotations

import datetime
import socket
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

OUTCOMES = ("passed", "failed", "error", "skipped")


@dataclass
class Testcase:
    """One testcase's outcome."""

    classname: str
    name: str
    outcome: str          # one of OUTCOMES
    time: float = 0.0
    message: str | None = None


def write_junit(path: str | Path, cases: list[Testcase], wall_s: float) -> Path:
    """Write the XML to ``path`` (folders made as needed); returns the path."""
    counts = {o: sum(c.outcome == o for c in cases) for o in OUTCOMES}
    top = ET.Element("testsuites", name="pytest tests")
    suite = ET.SubElement(top, "testsuite", name="pytest", errors=str(counts["error"]),
                          failures=str(counts["failed"]), skipped=str(counts["skipped"]), tests=str(len(cases)),
                          time=f"{wall_s:.3f}",
                          timestamp=datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat(),
                          hostname=socket.gethostname())
    for c in cases:
        tc = ET.SubElement(suite, "testcase", classname=c.classname, name=c.name, time=f"{c.time:.3f}")
        text = c.message or ""
        first = text.splitlines()[0] if text else ""
        if c.outcome == "failed":
            ET.SubElement(tc, "failure", message=first).text = text
        elif c.outcome == "error":
            ET.SubElement(tc, "error", message=first).text = text
        elif c.outcome == "skipped":
            ET.SubElement(tc, "skipped", type="pytest.skip", message=first).text = text
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text('<?xml version="1.0" encoding="utf-8"?>' + ET.tostring(top, encoding="unicode"), encoding="utf-8")
    return p
