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


class ResultsFile:
    """A JSON-lines file of task records, keyed by ``record["key"]``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.fd: int | None = None

    def load(self) -> dict[str, dict[str, Any]]:
        """The records already in the file, by key (the last one of a key wins). A cut-off last line is
        removed from the file; a line in the middle that is not a record is a ValueError naming the line."""
        if not self.path.exists():
            return {}
        if self.path.is_dir():
            raise IsADirectoryError(f"{self.path}: is a folder, not a results file")
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        out: dict[str, dict[str, Any]] = {}
        lines = data[:end].decode("utf-8", errors="replace").splitlines()
        if end < len(data) and not data[end:].lstrip().startswith(b"{"):  # not a record cut short: not ours
            raise ValueError(f"{self.path}:{len(lines) + 1}: not a JSON record (is this a results file?)")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                raise ValueError(f"{self.path}:{n}: not a JSON record (is this a results file?)") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("key"), str):
                raise ValueError(f"{self.path}:{n}: a record needs a string 'key' (is this a results file?)")
            out[rec["key"]] = rec
        if end < len(data):  # a record cut short by a crash mid-write: not a result (checked the file first)
            with open(self.path, "r+b") as f:
                f.truncate(end)
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
