"""A one-line progress bar on stderr for campaigns (tasks, fuzz cases, regression cells).

On a terminal it redraws one line (at most ten times a second) with the count done, the
failures so far and an estimate of the time left; when stderr is a file or a pipe (CI
logs) it writes one line per tenth of the work instead.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _duration(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class ProgressBar:
    """``desc [#####     ] done/total  failing F  ETA``; silent unless ``enabled``."""

    def __init__(self, total: int, desc: str = "tasks", enabled: bool = True, stream: TextIO | None = None):
        self.total, self.desc, self.enabled = total, desc, enabled
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.t0 = time.monotonic()
        self.start_done: int | None = None  # work already done when the bar started (resumed)
        self.last_t, self.last_decile = 0.0, -1
        self.line_open = False  # a terminal line drawn and not yet ended

    def update(self, done: int, failing: int = 0) -> None:
        """Show ``done`` of ``total`` with ``failing`` failures."""
        if not self.enabled:
            return
        if self.start_done is None:
            self.start_done = done
        now = time.monotonic()
        frac = done / max(self.total, 1)
        if self.tty:
            if now - self.last_t < 0.1 and done < self.total:
                return
            self.last_t = now
            bar = "#" * int(30 * frac)
            self.stream.write(f"\r{self.desc} [{bar:<30}] {done}/{self.total}  failing {failing}"
                              f"{self._eta(done, now)}\033[K")
            self.line_open = done < self.total
            if not self.line_open:
                self.stream.write("\n")
            self.stream.flush()
        elif int(frac * 10) > self.last_decile:
            self.last_decile = int(frac * 10)
            self.stream.write(f"{self.desc}: {done}/{self.total} ({int(frac * 100)}%), failing {failing}\n")
            self.stream.flush()

    def _eta(self, done: int, now: float) -> str:
        ran = done - (self.start_done or 0)
        if ran <= 0 or done >= self.total:
            return f"  {_duration(now - self.t0)}" if done >= self.total else ""
        left = (now - self.t0) / ran * (self.total - done)
        return f"  ETA {_duration(left)}"

    def close(self) -> None:
        """End the line on a terminal if the bar stopped short (an interrupted campaign)."""
        if self.line_open:
            self.line_open = False
            self.stream.write("\n")
            self.stream.flush()
