"""Verilator's ``coverage.dat``: read, merge and write back.

The file is text. A header line ``# SystemC::Coverage-3``, then one line per coverage point::

    C '<\\x01>f<\\x02>hw/rtl/fetch.v<\\x01>l<\\x02>42<\\x01>n<\\x02>7 ... <\\x01>h<\\x02>TOP.accel_top.u_fetch' 1234

a quoted list of key/value pairs (each pair starts with byte 0x01, the key and the value are
separated by byte 0x02) and the point's count. The keys this reader uses:

* ``f`` the source file, ``l`` the line, ``S`` the lines a line point spans (``"5-6"``,
  ``"10"``, ``"3,5-7"``; absent on some branch points: then ``l``),
* ``page`` the kind and module, ``v_<kind>/<module>``; kind is one of ``line``, ``branch``,
  ``toggle``, ``fsm_state``, ``fsm_arc`` (FSM pages name ``$root`` as module, so the module of
  a point is taken from the page when it names one, else from the file's stem),
* ``o`` the object: a toggle's ``signal[bit]:0->1``, an FSM's ``var::STATE`` or
  ``var::FROM->TO``, a line point's statement kind (``block``, ``if``, ``case``...),
* ``h`` the hierarchy (instance path); it is **not** part of a point's identity: the same
  point of two instances, of two parameterisations of a module (the page's ``module__<params>``
  is read as ``module``), of two builds (cocotb writes ``*``) or of two back-ends is one point,
  whose counts add up. Every other key (``n`` the column, ``t`` the type, the FSM keys ``Fv``,
  ``Ff``, ``Ft``, ``Fg``...) is kept and is part of the identity.

Files are normalised to a path relative to the repository when they lie inside it, so
coverage files of different checkouts or build folders merge.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

HEADER = "# SystemC::Coverage-3"
KEY_SEP, VALUE_SEP = "\x01", "\x02"
# page prefix -> the metric a point counts in
KINDS = {"v_line": "line", "v_branch": "branch", "v_toggle": "toggle", "v_fsm_state": "fsm_state",
         "v_fsm_arc": "fsm_arc"}
METRICS = ("line", "branch", "toggle", "fsm_state", "fsm_arc")


class CoverageFormatError(ValueError):
    """A coverage file that is not Verilator's format (one line naming the file and line)."""


@dataclass
class Point:
    """One coverage point: its key/value pairs (without ``h``), the instances seen, and its count."""

    fields: tuple[tuple[str, str], ...]
    count: int
    hier: set[str] = field(default_factory=set)

    def get(self, key: str, default: str = "") -> str:
        for k, v in self.fields:
            if k == key:
                return v
        return default

    @property
    def file(self) -> str:
        return self.get("f")

    @property
    def line(self) -> int:
        return int(self.get("l", "0") or 0)

    @property
    def kind(self) -> str | None:
        """``line``, ``branch``, ``toggle``, ``fsm_state``, ``fsm_arc``, or None for another page."""
        return KINDS.get(self.get("page").split("/", 1)[0])

    @property
    def module(self) -> str:
        page = self.get("page")
        mod = page.split("/", 1)[1] if "/" in page else ""
        # Verilator names a parameterised variant module__<params> (sram__W100): one module for the report
        mod = mod.split("__", 1)[0]
        return mod if mod and not mod.startswith("$") else Path(self.file).stem

    @property
    def obj(self) -> str:
        return self.get("o")

    def toggle_signal(self) -> tuple[str, int | None]:
        """A toggle point's ``module:signal`` and bit, its direction dropped: ``g_core[0].pc[12]:0->1`` of
        module ``core`` -> (``core:g_core[0].pc``, 12); a scalar's ``busy:1->0`` -> (``core:busy``, None)."""
        name, bit = self.obj.rsplit(":", 1)[0], None
        if name.endswith("]"):
            head, sep, idx = name[:-1].rpartition("[")
            if sep and idx.isdecimal():
                name, bit = head, int(idx)
        return f"{self.module}:{name}", bit

    def lines(self) -> list[int]:
        """The source lines of the point: its span ``S`` when it has one, else its line ``l``."""
        span = self.get("S")
        if not span:
            return [self.line]
        out: list[int] = []
        for part in span.split(","):
            a, _, b = part.strip().partition("-")
            if a.isdigit():
                out.extend(range(int(a), int(b) + 1) if b.isdigit() else [int(a)])
        return out or [self.line]


def _norm_file(path: str, repo: Path | None, cache: dict[str, str]) -> str:
    got = cache.get(path)
    if got is not None:
        return got
    out = path
    if repo is not None and os.path.isabs(path):
        try:
            out = Path(path).resolve().relative_to(repo).as_posix()
        except ValueError:
            pass
    cache[path] = out
    return out


def _norm_page(page: str) -> str:
    """``v_toggle/sram__W100`` -> ``v_toggle/sram``: the parameterised variants of a module (Verilator
    names them module__<params>) are one module, as its instances are."""
    kind, sep, mod = page.partition("/")
    return f"{kind}{sep}{mod.split('__', 1)[0]}" if sep else page


def parse_point_text(text: str) -> list[tuple[str, str]]:
    """The key/value pairs of one point's quoted text."""
    pairs = []
    for item in text.split(KEY_SEP):
        if not item:
            continue
        k, sep, v = item.partition(VALUE_SEP)
        if not sep:
            raise ValueError(f"pair {item!r} has no value separator")
        pairs.append((k, v))
    return pairs


class CoverageData:
    """Coverage points keyed by identity (every field but ``h``); counts of equal points add up."""

    def __init__(self) -> None:
        self.points: dict[tuple[tuple[str, str], ...], Point] = {}

    def __len__(self) -> int:
        return len(self.points)

    def add(self, pairs: Iterable[tuple[str, str]], count: int) -> None:
        """Add one point's count (merged with an equal point already here)."""
        hier = set()
        fields = []
        for k, v in pairs:
            if k == "h":
                hier.add(v)
            else:
                fields.append((k, v))
        key = tuple(fields)
        p = self.points.get(key)
        if p is None:
            self.points[key] = Point(key, count, hier)
        else:
            p.count += count
            p.hier |= hier

    def merge(self, other: "CoverageData") -> "CoverageData":
        """Add every point of ``other`` into this one (summing counts); returns self."""
        for p in other.points.values():
            mine = self.points.get(p.fields)
            if mine is None:
                self.points[p.fields] = Point(p.fields, p.count, set(p.hier))
            else:
                mine.count += p.count
                mine.hier |= p.hier
        return self

    def write(self, path: str | Path) -> Path:
        """Write the points back in Verilator's format (one instance path per point, the first seen)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(HEADER + "\n")
            for p in self.points.values():
                pairs = list(p.fields) + [("h", h) for h in sorted(p.hier)[:1]]
                text = "".join(f"{KEY_SEP}{k}{VALUE_SEP}{v}" for k, v in pairs)
                f.write(f"C '{text}' {p.count}\n")
        return path

    def of_kind(self, kind: str) -> list[Point]:
        return [p for p in self.points.values() if p.kind == kind]


def read(path: str | Path, repo: Path | None = None, into: CoverageData | None = None) -> CoverageData:
    """Read one ``coverage.dat`` (merged into ``into`` when given). ``repo``: make file paths inside it
    relative to it."""
    path = Path(path)
    data = into if into is not None else CoverageData()
    repo = repo.resolve() if repo is not None else None
    files: dict[str, str] = {}
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            q1, q2 = line.find("'"), line.rfind("'")
            if not line.startswith("C ") or q1 < 0 or q2 <= q1:
                raise CoverageFormatError(f"{path}:{n}: not a coverage point line (C '<pairs>' <count>)")
            try:
                pairs = parse_point_text(line[q1 + 1:q2])
                count = int(line[q2 + 1:].strip())
            except ValueError as e:
                raise CoverageFormatError(f"{path}:{n}: {e}") from None
            data.add([(k, _norm_file(v, repo, files) if k == "f" else _norm_page(v) if k == "page" else v)
                      for k, v in pairs], count)
    return data


def read_all(paths: Iterable[str | Path], repo: Path | None = None) -> CoverageData:
    """Read and merge several coverage files (empty files, from runs that died, are skipped)."""
    data = CoverageData()
    for p in paths:
        if Path(p).stat().st_size:
            read(p, repo, data)
    return data
