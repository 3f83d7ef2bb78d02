"""Coverage waivers: points that no test can reach, each with its reason.

The waiver file is JSON (``hw/rtl/coverage_waivers.json``)::

    {"waivers": [
      {"lines": "hw/rtl/store_unit.v:171-172", "text": "default: state <= S_IDLE;", "reason": "..."},
      {"toggle": "csr_block:region_base*[24:31]", "reason": "..."},
      {"fsm": "fetch:state::*->S_X", "reason": "..."}
    ]}

* ``lines``: ``FILE:LINE`` or ``FILE:FIRST-LAST`` (FILE relative to the repository): every line and
  branch point whose line (``l``) lies in the range. Line numbers move with every edit above them, so a
  line waiver must also carry ``text``: what its first line holds (leading and trailing blanks aside),
  checked against the source when the file is loaded (a mismatch names the waiver and the line found),
  before any coverage run;
* ``toggle``: ``MODULE:SIGNAL`` with ``*`` and ``?`` as wildcards (nothing else is special), and an
  optional bit range ``[HI:LO]`` (or ``[BIT]``) at the end: the toggle points of those bits of the
  matching signals, both directions (without a range: every bit);
* ``fsm``: a glob over ``MODULE:OBJECT`` of FSM state and arc points.

A toggle waiver may add ``"movable": NAME`` (one of ``cosim.coverage.toggle_bounds.MOVABLE``): its reason
is then a bound computed from the config, and the test suite checks that no bit of its range can move
on any shipped config. ``"lane_bits": W`` says the signal is one W-bit lane per core (``{core k-1, ...,
core 0}``): the bound then applies to each bit's index within its lane.

A waived point counts apart: never in a metric's total, never as a hit, whatever its count. A
waiver that matches no point of the merged data is an error (a stale waiver: the code moved), unless
it is a toggle waiver whose signal is there but narrower (the lane of a core that the configs of the
run do not have).
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

from cosim.coverage.coverage_data import CoverageData, Point
from hw.config import DuplicateKeyError, unique_keys

LINES_RE = re.compile(r"^(?P<file>[^:]+):(?P<a>\d+)(?:-(?P<b>\d+))?$")
RANGE_RE = re.compile(r"^(?P<name>.*?)\[(?P<hi>\d+)(?::(?P<lo>\d+))?\]$")


def _glob(pattern: str) -> re.Pattern[str]:
    """``*`` and ``?`` as wildcards, every other character literal."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern) + r"\Z")


def toggle_pattern(pattern: str) -> tuple[re.Pattern[str], tuple[int, int] | None]:
    """A toggle waiver pattern as the glob of the ``module:signal`` names it covers and its bit range
    (``(lo, hi)``; None: every bit)."""
    m = RANGE_RE.match(pattern)
    if not m:
        return _glob(pattern), None
    hi = int(m["hi"])
    lo = int(m["lo"]) if m["lo"] is not None else hi
    return _glob(m["name"]), (min(lo, hi), max(lo, hi))


def _in_bits(bits: tuple[int, int] | None, bit: int | None) -> bool:
    return bits is None or (bit is not None and bits[0] <= bit <= bits[1])


class WaiverError(ValueError):
    """A bad or stale waiver file (one line naming the file and the entry)."""


@dataclass(frozen=True)
class Waiver:
    """One entry: what it matches (``kind`` lines|toggle|fsm, ``pattern``) and why."""

    kind: str
    pattern: str
    reason: str
    index: int
    movable: str | None = None   # the config bound that makes the waived bits unreachable (toggle only)
    lane_bits: int | None = None  # the signal is one lane of this many bits per core: bit b is b % lane_bits

    @cached_property
    def line_range(self) -> tuple[str, int, int]:
        """A ``lines`` waiver's file and its first and last line."""
        m = LINES_RE.match(self.pattern)
        assert m is not None
        a = int(m["a"])
        return m["file"], a, int(m["b"] or a)

    @cached_property
    def toggle(self) -> tuple[re.Pattern[str], tuple[int, int] | None]:
        """A ``toggle`` waiver's name glob and bit range (:func:`toggle_pattern`), compiled once."""
        return toggle_pattern(self.pattern)

    def matches(self, p: Point) -> bool:
        k = p.kind
        if self.kind == "lines":
            f, a, b = self.line_range
            return k in ("line", "branch") and p.file == f and a <= p.line <= b
        if self.kind == "toggle":
            if k != "toggle":
                return False
            name, bit = p.toggle_signal()
            name_re, bits = self.toggle
            return _in_bits(bits, bit) and bool(name_re.match(name))
        return k in ("fsm_state", "fsm_arc") and fnmatch.fnmatchcase(f"{p.module}:{p.obj}", self.pattern)

    def describe(self) -> str:
        return f"{self.kind} {self.pattern}"


def load_waivers(path: str | Path, repo: str | Path | None = None) -> list[Waiver]:
    """Read and check a waiver file; a missing file is no waivers. With ``repo`` (the folder the
    ``lines`` files are relative to), each line waiver's ``text`` is checked against its source."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        doc = json.loads(path.read_text(), object_pairs_hook=unique_keys)
    except DuplicateKeyError as e:
        raise WaiverError(f"{path}: {e}") from None
    except json.JSONDecodeError as e:
        raise WaiverError(f"{path}: not JSON ({e})") from None
    entries = doc.get("waivers") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise WaiverError(f"{path}: expected an object with a list 'waivers'")
    out = []
    for i, e in enumerate(entries):
        kinds = [k for k in ("lines", "toggle", "fsm") if isinstance(e, dict) and k in e]
        if len(kinds) != 1:
            raise WaiverError(f"{path}: waiver {i}: needs exactly one of 'lines', 'toggle', 'fsm'")
        reason = e.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise WaiverError(f"{path}: waiver {i}: needs a 'reason'")
        pat = e[kinds[0]]
        if not isinstance(pat, str) or (kinds[0] == "lines" and not LINES_RE.match(pat)):
            raise WaiverError(f"{path}: waiver {i}: bad {kinds[0]} pattern {pat!r}")
        movable = e.get("movable")
        if movable is not None and (kinds[0] != "toggle" or not isinstance(movable, str)):
            raise WaiverError(f"{path}: waiver {i}: 'movable' names a bound of a toggle waiver")
        lane = e.get("lane_bits")
        if lane is not None and (movable is None or not isinstance(lane, int) or lane <= 0):
            raise WaiverError(f"{path}: waiver {i}: 'lane_bits' is a positive lane width of a 'movable' waiver")
        text = e.get("text")
        if (text is None) != (kinds[0] != "lines") or (text is not None and (not isinstance(text, str)
                                                                            or not text.strip())):
            raise WaiverError(f"{path}: waiver {i}: 'text' (the first line's source) goes with a 'lines' "
                              f"waiver, and only there")
        if repo is not None and text is not None:
            _check_line_text(path, i, pat, text, Path(repo))
        out.append(Waiver(kinds[0], pat, reason.strip(), i, movable, lane))
    return out


def _check_line_text(path: Path, index: int, pattern: str, text: str, repo: Path) -> None:
    """A line waiver's first line must still hold its ``text``: the code above it moves line numbers."""
    m = LINES_RE.match(pattern)
    assert m is not None
    src = repo / m["file"]
    if not src.is_file():
        raise WaiverError(f"{path}: waiver {index} ({pattern}): no such source file {m['file']}")
    lines = src.read_text(errors="replace").splitlines()
    line = int(m["a"])
    found = lines[line - 1].strip() if 1 <= line <= len(lines) else None
    if found != text.strip():
        where = [k + 1 for k, ln in enumerate(lines) if ln.strip() == text.strip()]
        hint = f"; that text is at line {', '.join(map(str, where))}" if where else ""
        raise WaiverError(f"{path}: waiver {index} ({pattern}): line {line} holds {found!r}, not {text.strip()!r}: "
                          f"stale{hint}")


class PointIndex:
    """The points of one data set as waivers look for them: line and branch points by file, toggle
    points by ``module:signal``, FSM points apart. A toggle waiver then tests each signal's name once,
    and :meth:`Waiver.matches` only the points of the signals it names (one small config's run: 59,000
    points, 250 waivers)."""

    def __init__(self, points: Iterable[Point]):
        self.by_file: dict[str, list[Point]] = {}
        self.by_signal: dict[str, list[Point]] = {}
        self.fsm: list[Point] = []
        for p in points:
            k = p.kind
            if k in ("line", "branch"):
                self.by_file.setdefault(p.file, []).append(p)
            elif k == "toggle":
                self.by_signal.setdefault(p.toggle_signal()[0], []).append(p)
            elif k in ("fsm_state", "fsm_arc"):
                self.fsm.append(p)

    def matching(self, w: Waiver) -> list[Point]:
        """The points ``w`` matches (those for which ``w.matches`` holds)."""
        if w.kind == "lines":
            candidates: Iterable[Point] = self.by_file.get(w.line_range[0], ())
        elif w.kind == "toggle":
            name_re = w.toggle[0]
            candidates = [p for name, pts in self.by_signal.items() if name_re.match(name) for p in pts]
        else:
            candidates = self.fsm
        return [p for p in candidates if w.matches(p)]

    def signal_present(self, w: Waiver) -> bool:
        """A toggle waiver whose bit range lies past the signal's width in this data (a lane of a core
        that the configs run here do not have) is not stale while the signal itself is there."""
        if w.kind != "toggle" or w.toggle[1] is None:
            return False
        name_re = w.toggle[0]
        return any(name_re.match(name) for name in self.by_signal)


def apply_waivers(data: CoverageData, waivers: list[Waiver], source: str = "waivers",
                  check_stale: bool = True) -> tuple[set[tuple], list[dict[str, Any]]]:
    """The keys of waived points, and per waiver ``{"waiver", "reason", "points", "hit"}``. A waiver
    matching no point raises WaiverError (stale) when ``check_stale``."""
    waived: set[tuple] = set()
    report = []
    index = PointIndex(data.points.values())
    for w in waivers:
        hits = index.matching(w)
        if not hits and check_stale and not index.signal_present(w):
            raise WaiverError(f"{source}: waiver {w.index} ({w.describe()}) matches no coverage point: stale, "
                              f"remove or fix it")
        waived.update(p.fields for p in hits)
        report.append({"waiver": w.describe(), "reason": w.reason, "points": len(hits),
                       "hit": sum(1 for p in hits if p.count > 0)})
    return waived, report
