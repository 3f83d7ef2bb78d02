"""Text renderings: signal tables, ASCII waveforms, timelines and diff reports.

Everything here works on cycle change lists ``[(cycle, raw VCD value), ...]`` (see
:func:`cosim.waves.timeline.to_cycles`) and prints plain 7-bit ASCII, so the output
survives any terminal, log file or CI page.
"""

from __future__ import annotations

from dataclasses import dataclass

from cosim.waves.timeline import value_at
from cosim.waves.vcd_reader import fmt_decoded


@dataclass
class Trace:
    """One signal over a cycle window, ready to render."""

    name: str
    width: int
    var_type: str
    changes: list[tuple[int, str]]  # (cycle, raw value), the value before the window at its start
    lanes: int = 0        # decode a bus as this many lanes in decimal (0: hex)
    signed: bool = False  # decimal values (and lanes) as two's complement

    def text(self, raw: str | None) -> str:
        """One raw value as shown ("?" before the first change)."""
        return "?" if raw is None else fmt_decoded(raw, self.width, self.var_type, self.lanes, self.signed)

    def values(self, c0: int, c1: int) -> list[str]:
        """The formatted value for every cycle ``c0..c1`` (inclusive), each change formatted once."""
        out: list[str] = []
        cur, c = None, c0
        for cc, v in self.changes:
            if cc > c1:
                break
            if cc > c:
                out += [self.text(cur)] * (cc - c)
                c = cc
            cur = v
        out += [self.text(cur)] * (c1 + 1 - c)
        return out

    def change_cycles(self, c0: int, c1: int) -> list[int]:
        """The cycles of ``c0..c1`` where this trace's value changes (``c0`` first)."""
        return [c0] + [c for c, _ in self.changes if c0 < c <= c1]

    def value_at(self, c: int) -> str:
        """The formatted value during cycle ``c``."""
        return self.text(value_at(self.changes, c))


def table(traces: list[Trace], c0: int, c1: int, changes_only: bool = False) -> str:
    """One row per cycle, one column per signal; ``changes_only``: a row only where a value changes
    (computed from the change points, so its cost follows the changes, not the window's cycles)."""
    cycles = (sorted({c for t in traces for c in t.change_cycles(c0, c1)}) if changes_only
              else range(c0, c1 + 1))
    rows = [[str(c)] + [t.value_at(c) for t in traces] for c in cycles] if changes_only else \
        [[str(c)] + list(vals) for c, vals in zip(cycles, zip(*(t.values(c0, c1) for t in traces)))]
    heads = ["cycle"] + [t.name for t in traces]
    widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(heads)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(heads, widths)),
             "  ".join("-" * w for w in widths)]
    prev = None
    for r in rows:
        if changes_only and r[1:] == prev:
            continue
        prev = r[1:]
        lines.append("  ".join(s.rjust(w) for s, w in zip(r, widths)))
    return "\n".join(lines)


def _wave_1bit(vals: list[str], cell: int) -> str:
    """``__/---\\__``: low ``_``, high ``-``, edges ``/`` and ``\\``, x and z as letters."""
    out, prev = [], None
    for v in vals:
        fill = {"0": "_", "1": "-"}.get(v, v[:1] or "?")
        if prev is not None and v != prev and v in "01" and prev in "01":
            edge = "/" if v == "1" else "\\"
            out.append(edge + fill * (cell - 1))
        else:
            out.append(fill * cell)
        prev = v
    return "".join(out)


def _wave_bus(vals: list[str], cell: int) -> str:
    """Segments of equal value, each opened by ``X`` at a change and labelled in hex
    (truncated with ``~`` when the segment is too short)."""
    out: list[str] = []
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[i]:
            j += 1
        n = (j - i + 1) * cell
        text = ("X" if i > 0 else " ") + vals[i]
        if len(text) > n:
            text = text[:max(1, n - 1)] + "~" if n > 1 else text[:1]
        out.append(text.ljust(n) if len(text) < n else text[:n])
        i = j + 1
    return "".join(out)


def ascii_waves(traces: list[Trace], c0: int, c1: int, cell: int | None = None, width: int = 110) -> str:
    """An ASCII waveform of ``traces`` over cycles ``c0..c1``, ``cell`` characters per
    cycle (default: as wide as fits ``width`` columns, 1 to 8)."""
    n = c1 - c0 + 1
    label_w = max([len(t.name) for t in traces] + [5]) + 2
    if cell is None:
        cell = max(1, min(8, (width - label_w) // max(1, n)))
    # ruler: a cycle number every few cells so the labels do not collide
    steps = [m * 10 ** e for e in range(12) for m in (1, 2, 5)]
    step = next(s for s in steps if s * cell >= len(str(c1)) + 1)
    ruler = [" "] * (n * cell + len(str(c1)))  # the last label may run past the last cell
    for k in range(n):
        if (c0 + k) % step:
            continue
        s = str(c0 + k)
        for m, ch in enumerate(s):
            if k * cell + m < len(ruler):
                ruler[k * cell + m] = ch
    lines = ["cycle".ljust(label_w) + "".join(ruler).rstrip()]
    for t in traces:
        vals = t.values(c0, c1)
        body = _wave_1bit(vals, cell) if t.width <= 1 and t.var_type != "real" else _wave_bus(vals, cell)
        lines.append(t.name.ljust(label_w) + body.rstrip())
    return "\n".join(lines)


def timeline_text(tl_dict: dict[str, object]) -> str:
    """The timeline as an aligned table (ends are exclusive)."""
    clock = tl_dict["clock"]
    head = (f"# {tl_dict['file']}: period {clock['period']} ({clock['source']}), "
            f"start origin {clock['origin'] if clock['origin'] is not None else 'unknown'}, "
            f"{len(tl_dict['entries'])} instructions, cycles end-exclusive")
    rows = [("unit", "index", "start", "end", "cycles", "held_start", "held_end")]
    for e in tl_dict["entries"]:
        cyc = (e["end"] - e["start"]) if e["end"] is not None and e["start"] is not None else None
        rows.append(tuple("-" if x is None else str(x) for x in
                          (e["unit"], e["index"], e["start"], e["end"], cyc, e["held_start"], e["held_end"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    body = ["  ".join(s.ljust(w) if i == 0 else s.rjust(w) for i, (s, w) in enumerate(zip(r, widths)))
            for r in rows]
    return "\n".join([head] + body)


def diff_text(rep: dict[str, object]) -> str:
    """The headline of a timeline diff: agreement, or the first divergence with both values."""
    lines = [f"A: {rep['a']}  (cycles shifted by {rep['offset_a']})",
             f"B: {rep['b']}  (cycles shifted by {rep['offset_b']})",
             f"align: {rep['align']}, tolerance: {rep['tolerance']} cycles, "
             f"{rep['compared']} instructions in both"]
    if rep.get("outside"):
        def span(s: list[int | None]) -> str:
            return f"{'its start' if s[0] is None else s[0]}..{'its end' if s[1] is None else s[1]}"
        lines.append(f"{rep['outside']} instruction(s) of one trace fall outside the cycles the other holds "
                     f"(A: relative {span(rep['span_a'])}, B: {span(rep['span_b'])}; a windowed or size-capped "
                     f"VCD): not compared")
    if rep["equal"]:
        lines.append("timelines agree")
        return "\n".join(lines)
    d = rep["first"]
    n = len(rep["differences"])
    what = {"start": "starts at a different cycle", "end": "ends at a different cycle",
            "unit": "runs on a different unit", "only_a": "appears only in A",
            "only_b": "appears only in B"}[d["kind"]]
    lines.append(f"first divergence: instruction {d['index']} ({d['unit']}) {what}, at relative cycle "
                 f"{d['cycle']} ({n} difference{'s' if n != 1 else ''} in all)")
    for tag, e in (("A", d["a"]), ("B", d["b"])):
        if e is None:
            lines.append(f"  {tag}: -")
        else:
            end = "never (still open at the trace's end)" if e["end"] is None else e["end"]
            start = e["start"] if e["start"] is not None else \
                "before the trace" if e.get("open_at_start") else "never"
            lines.append(f"  {tag}: {e['unit']:<7} start {start}  end {end}  "
                         f"(held {e['held_start']}..{'the end' if e['held_end'] is None else e['held_end']})")
    if d["a"] and d["b"] and d["kind"] in ("start", "end") and None not in (d["a"][d["kind"]], d["b"][d["kind"]]):
        k = d["kind"]
        lines.append(f"  {k} differs by {int(d['b'][k]) - int(d['a'][k]):+d} cycles (B - A)")
    return "\n".join(lines)
