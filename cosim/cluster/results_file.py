"""The results file of a campaign: one JSON record per line, appended as tasks finish.

Each record is written with a single ``write`` on a descriptor opened for appending,
so it is in the operating system's hands at once (``COSIM_RESULTS_FSYNC=1`` also
syncs it to the disk): a campaign killed at any moment leaves only whole
lines (at worst the last line is cut short by a machine that lost power: it is dropped
when the file is opened again, and that task runs again). Re-opening the file gives the
records already there by key: the resume.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def record_problem(rec: dict[str, Any]) -> str | None:
    """What makes ``rec`` (a dict with a string key) not a task's record, or None: ``ok`` true or false, a
    ``result`` when ok, an ``error`` line when not."""
    if not isinstance(rec.get("ok"), bool):
        return f"record '{rec['key']}' needs 'ok': true or false"
    if rec["ok"] and "result" not in rec:
        return f"record '{rec['key']}' is ok but has no 'result'"
    if not rec["ok"] and not isinstance(rec.get("error"), str):
        return f"record '{rec['key']}' failed but has no 'error' line"
    return None


class ResultsFile:
    """A JSON-lines file of task records, keyed by ``record["key"]``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.fd: int | None = None

    def load(self) -> dict[str, dict[str, Any]]:
        """The records already in the file, by key (the last one of a key wins). A last line cut short (by a
        machine that lost power mid-write) after whole records is removed from the file; any other line that
        is not a record is a ValueError naming the line, and the file is left as it is."""
        if not self.path.exists():
            return {}
        if self.path.is_dir():
            raise IsADirectoryError(f"{self.path}: is a folder, not a results file")
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        out: dict[str, dict[str, Any]] = {}
        lines = data[:end].decode("utf-8", errors="replace").splitlines()
        tail = data[end:].decode("utf-8", errors="replace")
        cut_short = False
        if tail.strip():
            try:
                json.loads(tail)
                lines.append(tail)  # whole, only its newline missing (a file saved by an editor): checked below
            except json.JSONDecodeError:
                cut_short = tail.lstrip().startswith("{") and any(line.strip() for line in lines)
                if not cut_short:  # not the end of a campaign's records: not ours to cut
                    first = tail.lstrip().startswith("{") and not lines
                    why = ("a record cut short with none before it (a crash in the first write? delete the file to "
                           "start afresh)" if first else "not a JSON record (is this a results file?)")
                    raise ValueError(f"{self.path}:{len(lines) + 1}: {why}")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                raise ValueError(f"{self.path}:{n}: not a JSON record (is this a results file?)") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("key"), str):
                raise ValueError(f"{self.path}:{n}: a record needs a string 'key' (is this a results file?)")
            problem = record_problem(rec)
            if problem:
                raise ValueError(f"{self.path}:{n}: {problem} (is this a results file?)")
            out[rec["key"]] = rec
        if cut_short:  # a record cut short by a crash mid-write: not a result (checked the file first)
            with open(self.path, "r+b") as f:
                f.truncate(end)
        elif tail.strip():  # the next record starts on a line of its own
            with open(self.path, "ab") as f:
                f.write(b"\n")
        return out

    def open(self) -> None:
        """Create the file (and its folder) if missing and open it for appending: a campaign stopped before
        its first record still leaves a (valid, empty) results file."""
        if self.fd is None:
            if self.path.parent != Path(""):
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def append(self, record: dict[str, Any]) -> None:
        """Add one record (one line, one write, flushed)."""
        self.open()
        assert self.fd is not None
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        written = os.write(self.fd, line)
        while written < len(line):  # a regular file takes it whole; this is for the odd file system
            written += os.write(self.fd, line[written:])
        if os.environ.get("COSIM_RESULTS_FSYNC"):  # also survive a power cut, at a cost per record
            os.fsync(self.fd)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
