"""The host driver of a dynamic Program, in Python: the variable's value -> layout, instruction words, CSR writes.

It interprets ``dynamic.json`` (written by the compiler, ``compiler.dynamic``). For the value ``v`` it
places the DRAM regions exactly where a Program compiled statically for ``v`` has them, so the run is the
static compile's, cycle for cycle (a DMA row crosses a 4 KiB boundary in both or in neither):

* each piece ``{lo, hi, insns, consts, base[], delta[], relocs[]}`` holds entries that are affine in ``v``:
  entry i is ``(base[i] + (v - lo) * delta[i]) mod 2^128``. The first ``insns`` entries are the
  instruction words *relative to their regions* (a LOAD/STORE's ``dram_base`` field holds the offset inside
  its tensor's region), the next ``consts`` the kernel's constants (16-byte words of micro-op tables), the
  last one per region the regions' sizes in bytes (the instruction region first);
* the regions are placed as the compiler's layout places them: the first at ``insn_base``, each next one
  at the previous end rounded up to ``align`` (:func:`place`);
* each relocation ``[word, region, field_lo, elem_bytes]`` adds ``region_base / elem_bytes`` at bit
  ``field_lo`` of that word (the field's value becomes the absolute DRAM address in elements);
* the CSR writes are the base ones with REGIONn_BASE/SIZE and INSN_COUNT set to the value's.

The whole layout must end within ``dram_end`` (DRAM is planned at the maximum). The generated C driver
(``driver.c``) computes the same bytes; tests compare them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hw.isa import INSN_BYTES

MASK128 = (1 << 128) - 1
DRIVER_FILE = "dynamic.json"
FORMAT = 2
_REGION_REG = re.compile(r"REGION(\d+)_(BASE|SIZE)$")


def piece_words(base: tuple[int, ...], delta: tuple[int, ...], k: int) -> list[int]:
    """The entries ``k`` values past a piece's first: ``(base[i] + k * delta[i]) mod 2^128`` each."""
    return [(b + k * d) & MASK128 for b, d in zip(base, delta)]


def place(sizes: list[int], align: int, first: int) -> list[int]:
    """The regions' base addresses: the first at ``first``, each next at the previous end rounded up to
    ``align`` (how :func:`hw.program.plan_layout` packs a static Program)."""
    bases, addr = [], first
    for s in sizes:
        bases.append(addr)
        addr = (addr + s + align - 1) // align * align
    return bases


def relocate(word: int, base: int, field_lo: int, elem_bytes: int) -> int:
    """``word`` with ``base / elem_bytes`` added at bit ``field_lo`` (mod 2^128)."""
    return (word + ((base // elem_bytes) << field_lo)) & MASK128


class DriverError(ValueError):
    """A value out of range, an unknown or missing variable, or a bad dynamic.json (one line)."""


@dataclass(frozen=True)
class DriverPiece:
    """Values ``lo..hi``: ``insns`` instruction words, ``consts`` constant words, then one size per region."""

    lo: int
    hi: int
    insns: int
    consts: int
    base: tuple[int, ...]
    delta: tuple[int, ...]
    relocs: tuple[tuple[int, int, int, int], ...]  # word, region, field_lo, elem_bytes


@dataclass(frozen=True)
class Layout:
    """One value's run: its instruction words, constant words, region bases and sizes."""

    words: list[int]
    consts: list[int]
    bases: list[int]
    sizes: list[int]


@dataclass(frozen=True)
class Driver:
    """The driver's data: variable ``name`` in ``lo..hi``, the base register writes, the layout rule
    (``insn_base``, ``align``, ``dram_end``), the regions' count, the constants' region and the pieces."""

    name: str
    lo: int
    hi: int
    base_regs: tuple[tuple[str, int], ...]
    n_regions: int
    insn_base: int
    align: int
    dram_end: int
    const_region: int | None  # index of the region the constants go to (None: the kernel has none)
    const_bytes: int  # the most constant bytes of any value
    pieces: tuple[DriverPiece, ...]

    @classmethod
    def from_json(cls, d: dict[str, Any], where: str = DRIVER_FILE) -> "Driver":
        """Read and check ``dynamic.json``'s content: pieces in order, covering lo..hi, consistent sizes."""
        if not isinstance(d, dict):
            raise DriverError(f"{where}: not a dynamic driver (a JSON {type(d).__name__}, not an object)")
        try:
            if d.get("format") != FORMAT:
                raise ValueError(f"format {d.get('format')!r}, this driver reads format {FORMAT}")
            var = d["var"]
            pieces = tuple(DriverPiece(int(p["lo"]), int(p["hi"]), int(p["insns"]), int(p["consts"]),
                                       tuple(int(w, 16) for w in p["base"]), tuple(int(w, 16) for w in p["delta"]),
                                       tuple((int(a), int(b), int(c), int(e)) for a, b, c, e in p["relocs"]))
                           for p in d["pieces"])
            drv = cls(str(var["name"]), int(var["min"]), int(var["max"]),
                      tuple((str(n), int(v)) for n, v in d["regs"]), int(d["regions"]), int(d["insn_base"]),
                      int(d["align"]), int(d["dram_end"]),
                      None if d["const_region"] is None else int(d["const_region"]), int(d["const_bytes"]), pieces)
        except KeyError as e:
            raise DriverError(f"{where}: not a dynamic driver (no key {e})") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise DriverError(f"{where}: not a dynamic driver (a field of the wrong type or value: {e})") from None
        if drv.align < 1 or drv.n_regions < 1 or drv.insn_base < 0 or drv.dram_end <= drv.insn_base \
                or drv.const_bytes < 0 or drv.hi < drv.lo:
            raise DriverError(f"{where}: align {drv.align}, regions {drv.n_regions}, insn_base {drv.insn_base}, "
                              f"dram_end {drv.dram_end}, const_bytes {drv.const_bytes}, variable {drv.lo}..{drv.hi}: "
                              f"need align >= 1, regions >= 1, 0 <= insn_base < dram_end, const_bytes >= 0, "
                              f"min <= max")
        if drv.const_region is not None and not 1 <= drv.const_region < drv.n_regions:
            raise DriverError(f"{where}: const_region {drv.const_region} is not a data region (1..{drv.n_regions - 1}; "
                              f"region 0 holds the instructions)")
        nxt = drv.lo
        for p in pieces:
            at = f"{where}: piece {p.lo}..{p.hi}"
            if p.lo != nxt or p.hi < p.lo:
                raise DriverError(f"{at} does not continue the pieces at {nxt}")
            if p.insns < 1 or p.consts < 0 or p.consts * INSN_BYTES > drv.const_bytes:
                raise DriverError(f"{at}: {p.insns} instruction(s) and {p.consts} constant word(s) (need >= 1 "
                                  f"instruction, constants within const_bytes {drv.const_bytes})")
            want = p.insns + p.consts + drv.n_regions
            if len(p.base) != want or len(p.delta) != want:
                raise DriverError(f"{at}: {len(p.base)} base and {len(p.delta)} delta entries, {want} expected "
                                  f"({p.insns} instructions + {p.consts} constants + {drv.n_regions} region sizes)")
            wide = next((k for k, w in enumerate(p.base + p.delta) if not 0 <= w <= MASK128), None)
            if wide is not None:
                raise DriverError(f"{at}: entry {wide % want} of {'base' if wide < want else 'delta'} is not a "
                                  f"128-bit word")
            for w, r, f, e in p.relocs:
                if not (0 <= w < p.insns and 0 <= r < drv.n_regions and 0 <= f < 128 and e > 0):
                    raise DriverError(f"{at}: relocation [{w}, {r}, {f}, {e}] (word 0..{p.insns - 1}, region "
                                      f"0..{drv.n_regions - 1}, bit 0..127, element bytes >= 1)")
            for v in (p.lo, p.hi):  # an early check at the piece's ends (layout() checks each value)
                sizes = piece_words(p.base, p.delta, v - p.lo)[p.insns + p.consts:]
                end = place(sizes, drv.align, drv.insn_base)[-1] + sizes[-1]
                if end > drv.dram_end:
                    raise DriverError(f"{at}: at {drv.name}={v} the regions end at 0x{end:x}, past dram_end "
                                      f"0x{drv.dram_end:x}")
            nxt = p.hi + 1
        if nxt != drv.hi + 1:
            raise DriverError(f"{where}: the pieces end at {nxt - 1}, the variable at {drv.hi}")
        return drv

    @classmethod
    def load(cls, folder: str | Path) -> "Driver":
        """The driver of a Program folder (its ``dynamic.json``)."""
        path = Path(folder) / DRIVER_FILE
        try:
            doc = json.loads(path.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DriverError(f"{path}: cannot read ({e})") from None
        except RecursionError:  # nested deeper than the decoder goes: no driver file is
            raise DriverError(f"{path}: not a driver file (JSON nested too deep)") from None
        return cls.from_json(doc, str(path))

    def range_text(self) -> str:
        """``name in lo..hi``, as errors and listings show the variable."""
        return f"{self.name} in {self.lo}..{self.hi}"

    def check(self, values: dict[str, Any]) -> int:
        """The variable's value from ``values``: unknown, missing or out-of-range is one DriverError line."""
        for n in values:
            if n != self.name:
                raise DriverError(f"unknown variable '{n}' (variables: {self.range_text()})")
        if self.name not in values:
            raise DriverError(f"variable '{self.name}' is not set: give --set {self.name}=N ({self.range_text()})")
        v = values[self.name]
        if isinstance(v, bool) or not isinstance(v, int) or not self.lo <= v <= self.hi:
            raise DriverError(f"variable '{self.name}': {v!r} is out of range {self.lo}..{self.hi}")
        return v

    def piece(self, v: int) -> DriverPiece:
        """The piece holding value ``v``."""
        for p in self.pieces:
            if p.lo <= v <= p.hi:
                return p
        raise DriverError(f"variable '{self.name}': {v} is out of range {self.lo}..{self.hi}")

    def layout(self, v: int) -> Layout:
        """Everything value ``v`` runs with: words relocated to the value's region bases (module docstring)."""
        p = self.piece(v)
        e = piece_words(p.base, p.delta, v - p.lo)
        sizes = e[p.insns + p.consts:]
        bases = place(sizes, self.align, self.insn_base)
        if bases[-1] + sizes[-1] > self.dram_end:
            raise DriverError(f"variable '{self.name}': {v} needs DRAM up to 0x{bases[-1] + sizes[-1]:x}, past the "
                              f"0x{self.dram_end:x} planned at the maximum")
        words = e[:p.insns]
        for w, r, lo, eb in p.relocs:
            words[w] = relocate(words[w], bases[r], lo, eb)
        return Layout(words, e[p.insns:p.insns + p.consts], bases, sizes)

    def words(self, v: int) -> list[int]:
        """The 128-bit instruction words of value ``v`` (already checked)."""
        return self.layout(v).words

    def insn_bytes(self, v: int) -> bytes:
        """The instruction stream of value ``v``: 16 little-endian bytes per word."""
        return b"".join(w.to_bytes(INSN_BYTES, "little") for w in self.words(v))

    def const_addr(self, v: int) -> int | None:
        """Where value ``v``'s constants go in DRAM (None when the kernel has none)."""
        return None if self.const_region is None else self.layout(v).bases[self.const_region]

    def const_bytes_of(self, v: int) -> bytes:
        """The bytes of the kernel's constants (micro-op tables...) for value ``v``, written at
        :meth:`const_addr` (empty when the kernel has none; the rest of the constants region stays zero)."""
        return b"".join(x.to_bytes(INSN_BYTES, "little") for x in self.layout(v).consts)

    def regs(self, v: int) -> list[tuple[str, int]]:
        """The ordered CSR writes of value ``v``: the base ones with the regions and instruction count set."""
        return self._regs(self.layout(v))

    def writes(self, v: int) -> tuple[bytes, bytes, int | None, list[tuple[str, int]]]:
        """All a host writes for value ``v``, from one layout: the instruction stream, the constants, their
        address (None without any) and the CSR writes."""
        lay = self.layout(v)
        return (b"".join(w.to_bytes(INSN_BYTES, "little") for w in lay.words),
                b"".join(x.to_bytes(INSN_BYTES, "little") for x in lay.consts),
                None if self.const_region is None else lay.bases[self.const_region], self._regs(lay))

    def _regs(self, lay: Layout) -> list[tuple[str, int]]:
        out = []
        for name, val in self.base_regs:
            m = _REGION_REG.match(name)
            if name == "INSN_COUNT":
                val = len(lay.words)
            elif m and int(m.group(1)) < self.n_regions:
                val = (lay.bases if m.group(2) == "BASE" else lay.sizes)[int(m.group(1))]
            out.append((name, val))
        return out
