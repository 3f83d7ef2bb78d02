"""Read VCD files with vcdvcd: the signal list, name resolution and selective streaming.

Large traces are never loaded whole. The header is read once (``only_sigs``), and
value changes are streamed through vcdvcd's callbacks for the selected signals only
(``signals=[...]``, ``store_tvs=False``), keeping just what the caller asked for (a
time window, or every change of a few slow signals). A pass can stop early, either
at a time (vcdvcd's ``to_time``) or when a callback has seen enough.

Signal names: vcdvcd names a bus ``scope.name[31:0]``; here a signal's *name* is the
dotted path without the range. Verilator lists the top ports twice (under ``$rootio``
and under the top module); the ``$rootio`` copy is dropped when the module scope has
the same signal, and names sharing one VCD identifier code are listed once when they
are the same net seen from several scopes (the same leaf name, e.g. ``clk`` in every
module). Verilator also gives one code to unrelated nets whose values it proved equal
(a probe and the register it copies, two constant signals): those stay separate
signals, each listed under its own name.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, TextIO

from vcdvcd import VCDVCD, StreamParserCallbacks

# Scopes that only repeat the top module's ports (Verilator: $rootio; older versions: TOP).
ROOT_ALIAS_SCOPES = ("$rootio", "TOP")
MAX_DECL_WORDS = 100_000  # words of one header declaration (a $comment, a $var) at most
MAX_WIDTH = 1 << 20  # bits of one signal: a value of 2**20 bits is 128 KiB as text, per change
_RANGE_RE = re.compile(r"\[\d+:\d+\]$")


class WavesError(ValueError):
    """A user error about a waveform file or a signal name (one line, exit 2)."""


@dataclass
class SignalInfo:
    """One signal of a VCD file (aliases merged)."""

    name: str  # dotted path without the bus range, e.g. "accel_top.dbg_load_pc"
    ref: str  # vcdvcd's reference, e.g. "accel_top.dbg_load_pc[31:0]"
    width: int
    var_type: str
    code: str  # VCD identifier code
    aliases: list[str] = field(default_factory=list)  # other names with the same data

    @property
    def leaf(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    @property
    def depth(self) -> int:
        return self.name.count(".")

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "width": self.width, "type": self.var_type, "aliases": self.aliases}


def strip_range(ref: str) -> str:
    """``a.b[31:0]`` -> ``a.b`` (bit-selects like ``mem[3]`` are kept: they name elements)."""
    return _RANGE_RE.sub("", ref)


class _Stop(Exception):
    """Raised from a callback to end a pass early."""


class _Backwards(Exception):
    """Raised from a callback when the time goes back."""


class Progress:
    """A one-line text progress bar on stderr, driven by VCD time; silent unless enabled."""

    def __init__(self, label: str, end_time: int | None, enabled: bool, stream: TextIO | None = None):
        self.label = label
        self.end_time = end_time
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._calls = 0
        self._shown = -1

    def update(self, time: int) -> None:
        self._calls += 1
        if not self.enabled or self._calls & 0x3FFF:  # check every 16 k timestamps: cheap
            return
        if self.end_time:
            pct = min(100, int(100 * time / self.end_time))
            if pct != self._shown:
                self._shown = pct
                bar = "#" * (pct // 4)
                self.stream.write(f"\r{self.label} [{bar:<25}] {pct:3d}%")
                self.stream.flush()
        else:
            self.stream.write(f"\r{self.label} t={time}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._calls > 0x3FFF:
            self.stream.write("\r" + " " * (len(self.label) + 40) + "\r")
            self.stream.flush()


def progress_wanted(flag: bool) -> bool:
    """Show progress when asked for, or when stderr is a terminal."""
    return flag or sys.stderr.isatty()


class _BadValue(ValueError):
    """A value change the readers would misread (not binary, or wider than its signal)."""


class _Collector(StreamParserCallbacks):
    """Keeps, per selected identifier code, the last value before ``t_from`` and the
    changes in ``[t_from, t_to]``; an optional hook may raise _Stop to end the pass. A vector's
    value must be binary digits (0, 1, x, z) no wider than its signal: else :class:`_BadValue`."""

    def __init__(self, codes: dict[str, list[SignalInfo]], t_from: int | None, keep: bool,
                 hook: Callable[[str, int, str], None] | None, progress: Progress | None):
        self.signal = {c: group[0] for c, group in codes.items() if group[0].var_type != "real"}
        self.t_from = t_from
        self.keep = keep
        self.hook = hook
        self.progress = progress
        self.initial: dict[str, str] = {}
        self.changes: dict[str, list[tuple[int, str]]] = {c: [] for c in codes}
        self.last_time = -1 << 62

    def time(self, vcd, time, cur_sig_vals):  # noqa: D102 (vcdvcd callback)
        if time < self.last_time:  # every reader of the changes assumes them in time order
            raise _Backwards()
        self.last_time = time
        if self.progress is not None:
            self.progress.update(time)

    def value(self, vcd, time, value, identifier_code, cur_sig_vals):  # noqa: D102
        sg = self.signal.get(identifier_code)
        if sg is not None and (len(value) > sg.width or not value or value.strip("01xzXZ")):
            shown = value if len(value) <= 40 else value[:37] + "..."
            raise _BadValue(f"time {time}: value {shown!r} of '{sg.name}' is not {sg.width} binary digit(s) "
                            f"(0, 1, x, z)")
        if self.hook is not None:
            self.hook(identifier_code, time, value)
        if not self.keep:
            return
        if self.t_from is not None and time < self.t_from:
            self.initial[identifier_code] = value
        else:
            self.changes[identifier_code].append((time, value))


def _last_timestamp(path: Path) -> int | None:
    """The last ``#time`` of a VCD, read from its tail (for the progress bar)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(0, size - 65536))
        tail = f.read()
    found = re.findall(rb"^#(\d+)", tail, re.MULTILINE)
    return int(found[-1]) if found else None


def _lines_outside_comments(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of every line of a VCD outside a ``$comment`` (whose text may look like
    anything, a timestamp included)."""
    in_comment = False
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if b"$comment" in line:
                in_comment = True
            if in_comment:
                in_comment = b"$end" not in line
            else:
                yield n, line


def _timestamp_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of every line of a VCD that starts with ``#`` outside a ``$comment``: the
    timestamps, well formed or not."""
    return ((n, line) for n, line in _lines_outside_comments(path) if line.startswith(b"#"))


def _bad_timestamp(path: Path) -> str | None:
    """Where a VCD's first timestamp that is not a whole number is ("line N: timestamp '#x' ..."),
    or None: the reader's own message then says what it could not read."""
    for n, line in _timestamp_lines(path):
        if not line[1:].strip().isdigit():
            text = line.strip()[:40].decode("utf-8", "replace")
            return f"line {n}: timestamp {text!r} is not a whole number"
    return None


def _bad_change(path: Path) -> str | None:
    """Where the first line of the value changes is neither a timestamp, a keyword nor a value change with
    its signal code ("line N: ..."), or None. A last line cut short (a run killed while writing) is the
    usual one."""
    started = False
    for n, raw in _lines_outside_comments(path):
        line = raw.strip()
        started = started or line.startswith(b"#")
        if not started or not line or line[:1] in (b"#", b"$"):
            continue
        words = line.split()
        vector = line[:1] in b"bBrR"
        if not (len(words) == 2 if vector else line[:1] in b"01xzXZ" and len(words) == 1 and len(line) > 1):
            text = line[:40].decode("utf-8", "replace")
            return f"line {n}: {text!r} is not a value change (a value and a signal code)"
    return None


def _declarations(path: Path) -> Iterator[tuple[int, str, list[str]]]:
    """The header's declarations as ``(line, keyword, words up to $end)``, one at a time (memory bounded
    by one declaration, :data:`MAX_DECL_WORDS` words), up to ``$enddefinitions`` or the first time stamp.
    A word outside a declaration, or a declaration without its ``$end``, is a :class:`WavesError`."""
    decl: tuple[int, str, list[str]] | None = None
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            line = raw.decode("utf-8", "replace").split()
            if line and line[0].startswith("#") and decl is None:  # the value changes: past the header
                return
            for w in line:
                if decl is None:
                    if not w.startswith("$") or w == "$end":
                        raise WavesError(f"line {n}: {w[:40]!r} stands outside a $keyword ... $end declaration "
                                         f"(not a VCD header)")
                    decl = (n, w, [])
                    if w == "$enddefinitions":
                        yield decl
                        return
                elif w == "$end":
                    yield decl
                    decl = None
                else:
                    decl[2].append(w)
                    if len(decl[2]) > MAX_DECL_WORDS:
                        raise WavesError(f"line {decl[0]}: {decl[1]} runs over {MAX_DECL_WORDS:,} words without "
                                         f"its $end (not a VCD header)")
    if decl is not None:
        raise WavesError(f"line {decl[0]}: {decl[1]} has no $end")


def _declaration_problem(path: Path) -> str | None:
    """The first declaration of the header that the readers would misread ("line N: ..."), or None: a
    word outside a declaration, a ``$timescale`` that is not 1, 10 or 100 of a unit, a ``$var`` without
    a name, a width that is not a positive number (or more than :data:`MAX_WIDTH` bits: a row of it would
    not fit in memory), an identifier code declared again with another width (the values of one would
    be read at the other's width), or one name declared under two codes."""
    widths: dict[str, int] = {}
    codes: dict[str, str] = {}
    scopes: list[str] = []
    try:
        for n, kw, words in _declarations(path):
            if kw == "$timescale":
                text = "".join(words)
                if not re.fullmatch(r"(1|10|100)(s|ms|us|ns|ps|fs)", text):
                    return f"line {n}: $timescale {text!r} is not 1, 10 or 100 of s, ms, us, ns, ps or fs"
            elif kw == "$scope" and len(words) >= 2:
                scopes.append(words[1])
            elif kw == "$upscope" and scopes:
                scopes.pop()
            elif kw == "$var" and len(words) >= 3:
                size, code = words[1], words[2]
                if len(words) < 4:
                    return f"line {n}: a $var of code {code!r} has no name"
                # a bit range written as its own word ("q [0]") is part of the name, as vcdvcd reads it
                name = ".".join([*scopes, words[3]]) + "".join(words[4:])
                if not size.isdigit() or int(size) < 1:
                    return f"line {n}: signal '{name}' has width {size!r} (a positive number of bits)"
                if int(size) > MAX_WIDTH:
                    return (f"line {n}: signal '{name}' has width {int(size):,}, more than the {MAX_WIDTH:,} bits "
                            f"read here")
                if widths.setdefault(code, int(size)) != int(size):
                    return (f"line {n}: identifier code {code!r} of '{name}' is declared again with width {size} "
                            f"(it was {widths[code]})")
                if codes.setdefault(name, code) != code:
                    return f"line {n}: signal '{name}' is declared twice (codes {codes[name]!r} and {code!r})"
    except WavesError as e:
        return str(e)
    return None


def _backwards_timestamp(path: Path) -> str | None:
    """Where a VCD's time first goes back ("line N: time 5 goes back from 10"), or None."""
    last = None
    for n, line in _timestamp_lines(path):
        if re.fullmatch(rb"-?\d+", line[1:].strip()):
            t = int(line[1:])
            if t < 0:
                return f"line {n}: time {t} is negative (a VCD's time starts at 0)"
            if last is not None and t < last:
                return f"line {n}: time {t} goes back from {last} (a VCD's timestamps increase)"
            last = t
    return None


class VcdFile:
    """A VCD file's header (signals, timescale) and selective value streaming."""

    def __init__(self, path: str | os.PathLike, progress: bool = False):
        self.path = Path(path)
        if not self.path.is_file():
            what = "not a regular file" if self.path.exists() else "no such VCD file"
            raise WavesError(f"{self.path}: {what}")
        problem = _declaration_problem(self.path)
        if problem is not None:
            raise WavesError(f"{self.path}: {problem}")
        self.show_progress = progress
        try:
            head = VCDVCD(str(self.path), only_sigs=True)
        except (ValueError, IndexError, KeyError) as e:
            raise WavesError(f"{self.path}: not a readable VCD file ({_bad_timestamp(self.path) or e})") from None
        self.timescale = {k: str(v) for k, v in head.timescale.items()}
        self.signals: list[SignalInfo] = self._signals(head)
        if not self.signals:
            raise WavesError(f"{self.path}: no signals declared (is it a VCD file?)")
        self._by_name = {s.name: s for s in self.signals}
        self._end_time: int | None = None

    @staticmethod
    def _signals(head: VCDVCD) -> list[SignalInfo]:
        by_code: dict[str, list[SignalInfo]] = {}
        order: list[SignalInfo] = []
        for ref in head.signals:
            code = head.references_to_ids[ref]
            name = strip_range(ref)
            leaf = name.rsplit(".", 1)[-1]
            same = [s for s in by_code.get(code, []) if s.leaf == leaf]
            if same:  # the same net seen from another scope
                if name != same[0].name and name not in same[0].aliases:
                    same[0].aliases.append(name)
                continue
            sig = head.data[code]
            info = SignalInfo(name=name, ref=ref, width=int(sig.size), var_type=sig.var_type, code=code)
            by_code.setdefault(code, []).append(info)
            order.append(info)
        # Drop the $rootio copy of a top port when a module scope has it with the same width.
        leaves: dict[tuple[str, int], list[SignalInfo]] = {}
        for s in order:
            if s.depth == 1 and s.name.split(".")[0] not in ROOT_ALIAS_SCOPES:
                leaves.setdefault((s.leaf, s.width), []).append(s)
        out = []
        for s in order:
            root = s.name.split(".")[0]
            twins = leaves.get((s.leaf, s.width), [])
            if s.depth == 1 and root in ROOT_ALIAS_SCOPES and twins:
                twins[0].aliases.append(s.name)
                continue
            out.append(s)
        return out

    # ---- names -----------------------------------------------------------------
    def resolve(self, query: str) -> SignalInfo:
        """The one signal a user means by ``query``: an exact dotted name (range optional),
        else a unique suffix (whole path components first, then any suffix)."""
        sig = self._resolve_name(query)
        part = _RANGE_RE.search(query.strip())
        whole = _RANGE_RE.search(sig.ref)
        if part and part.group() != (whole.group() if whole else f"[{sig.width - 1}:0]"):
            raise WavesError(f"signal '{query}': a part of {sig.name} ({sig.width} bits); the waves tools show "
                             f"whole signals: give {sig.name}")
        return sig

    def _resolve_name(self, query: str) -> SignalInfo:
        """:meth:`resolve` without the check of a bus range given with the name."""
        q = strip_range(query.strip())
        if not q:
            raise WavesError(f"an empty signal name (see `cosim waves list {self.path.name}`)")
        if q in self._by_name:
            return self._by_name[q]
        for s in self.signals:
            if q in s.aliases:
                return s
        cands = [s for s in self.signals if any(n.endswith("." + q) for n in (s.name, *s.aliases))]
        if not cands:
            cands = [s for s in self.signals if s.name.endswith(q)]
        if len(cands) == 1:
            return cands[0]
        if len(cands) > 1 and "." not in q and (q.startswith("dbg_") or q == "irq"):
            # A probe is exposed at the top and inside the DUT instance: the top one is meant.
            probe = self.find_probe(q)
            if probe is not None:
                return probe
        if len(cands) > 1:
            names = ", ".join(s.name for s in cands[:12]) + (" ..." if len(cands) > 12 else "")
            raise WavesError(f"signal '{query}' is ambiguous in {self.path.name}: {len(cands)} candidates: {names}")
        close = difflib.get_close_matches(q.rsplit(".", 1)[-1], sorted({s.leaf for s in self.signals}), n=5)
        hint = f" (did you mean: {', '.join(close)}?)" if close else " (see `cosim waves list`)"
        raise WavesError(f"no signal '{query}' in {self.path.name}{hint}")

    def find_probe(self, leaf: str) -> SignalInfo | None:
        """The shallowest signal whose last path component is ``leaf`` (None if absent);
        used for the well-known probes (clk, dbg_*), where the top port is meant."""
        cands = [s for s in self.signals if s.leaf == leaf]
        if not cands:
            return None
        return min(cands, key=lambda s: s.depth)

    # ---- streaming -----------------------------------------------------------------
    @property
    def end_time(self) -> int | None:
        if self._end_time is None:
            self._end_time = _last_timestamp(self.path)
        return self._end_time

    def stream(self, sigs: list[SignalInfo], t_from: int | None = None, t_to: int | None = None,
               keep: bool = True, hook: Callable[[str, int, str], None] | None = None,
               label: str = "reading") -> tuple[dict[str, str], dict[str, list[tuple[int, str]]]]:
        """One pass over the file for ``sigs`` only.

        Returns ``(initial, changes)`` keyed by signal name: the value each had just
        before ``t_from`` (absent if none) and its changes at ``t_from <= t <= t_to``.
        ``hook(code, time, value)`` sees every change and may raise :class:`_Stop`.
        """
        codes: dict[str, list[SignalInfo]] = {}
        for sg in sigs:
            codes.setdefault(sg.code, []).append(sg)
        prog = Progress(f"{label} {self.path.name}", t_to if t_to is not None else self.end_time,
                        progress_wanted(self.show_progress))
        col = _Collector(codes, t_from, keep, hook, prog)
        try:
            # one reference per code: vcdvcd streams a code's changes once whichever name selects it
            VCDVCD(str(self.path), signals=[group[0].ref for group in codes.values()], store_tvs=False,
                   callbacks=col, to_time=t_to)
        except _Stop:
            pass
        except _Backwards:
            raise WavesError(f"{self.path}: {_backwards_timestamp(self.path) or 'a timestamp goes back'}") from None
        except _BadValue as e:
            raise WavesError(f"{self.path}: {e}") from None
        except (ValueError, IndexError) as e:
            where = _bad_timestamp(self.path) or _bad_change(self.path) or e
            raise WavesError(f"{self.path}: malformed value change ({where})") from None
        finally:
            prog.close()
        initial = {sg.name: v for c, v in col.initial.items() for sg in codes[c]}
        changes = {sg.name: lst for c, lst in col.changes.items() for sg in codes[c]}
        return initial, changes


# ---- values -------------------------------------------------------------------------
def pad_bits(value: str, width: int) -> str:
    """Extend a VCD vector value to ``width`` bits (x/z extend themselves, 0/1 extend with 0)."""
    value = value.lower()
    if len(value) >= width:
        return value[-width:]
    fill = value[0] if value and value[0] in "xz" else "0"
    return fill * (width - len(value)) + value


def to_int(value: str | None) -> int | None:
    """The unsigned integer of a VCD value, or None when it holds x or z (or is unknown)."""
    if value is None:
        return None
    try:
        return int(value, 2)
    except ValueError:
        return None


def fmt_value(value: str | None, width: int, var_type: str = "wire") -> str:
    """A value as people read it: 1-bit as 0/1/x/z, buses in hex (x/z per nibble)."""
    if value is None:
        return "?"
    if var_type == "real":
        return value
    if width <= 1:
        return value.lower()[-1:] or "?"
    bits = pad_bits(value, width)
    if all(c == "x" for c in bits):
        return "x"
    if all(c == "z" for c in bits):
        return "z"
    out = []
    first = len(bits) % 4
    chunks = ([bits[:first]] if first else []) + [bits[i:i + 4] for i in range(first, len(bits), 4)]
    for nib in chunks:
        if "x" in nib:
            out.append("x")
        elif "z" in nib:
            out.append("z")
        else:
            out.append(f"{int(nib, 2):x}")
    return "".join(out).lstrip("0") or "0"


def fmt_decoded(value: str | None, width: int, var_type: str = "wire", lanes: int = 0, signed: bool = False) -> str:
    """A bus in decimal: split into ``lanes`` equal lanes (lane 0 = the least significant bits, listed first,
    comma-separated) when ``lanes`` divides the width into lanes of at least 2 bits, each lane ``signed``
    (two's complement) or not; a lane holding x or z prints as x. Anything else is :func:`fmt_value`."""
    if value is None or var_type == "real" or width <= 1 or not (lanes or signed):
        return fmt_value(value, width, var_type)
    n = lanes if lanes and width % lanes == 0 and width // lanes >= 2 else 1
    if n == 1 and not signed:
        return fmt_value(value, width, var_type)
    bits = pad_bits(value, width)
    w = width // n
    out = []
    for k in range(n):
        lane = bits[width - (k + 1) * w:width - k * w]
        if any(c in "xz" for c in lane):
            out.append("x")
            continue
        v = int(lane, 2)
        out.append(str(v - (1 << w) if signed and v >> (w - 1) else v))
    return ",".join(out)
