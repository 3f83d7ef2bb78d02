"""The host driver of a dynamic Program, in Python: the variable's value -> instruction words and CSR writes.

It interprets ``dynamic.json`` (written by the compiler, ``compiler.dynamic``): the variable's range, the
register writes of the Program planned at the maximum and the pieces ``{lo, hi, insns, base[], delta[]}``
(the first ``insns`` words are instructions, the rest the kernel's constants: micro-op tables); word i
of value v on its piece is ``(base[i] + (v - lo) * delta[i]) mod 2^128``. The CSR writes are the base ones
with INSN_COUNT and the instruction region's size (REGION0_SIZE) set to the value's instruction count. The
generated C driver (``driver.c``) computes the same bytes; tests compare them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hw.isa import INSN_BYTES

MASK128 = (1 << 128) - 1
DRIVER_FILE = "dynamic.json"


def piece_words(base: tuple[int, ...], delta: tuple[int, ...], k: int) -> list[int]:
    """The words ``k`` values past a piece's first: ``(base[i] + k * delta[i]) mod 2^128`` each."""
    return [(b + k * d) & MASK128 for b, d in zip(base, delta)]


class DriverError(ValueError):
    """A value out of range, an unknown or missing variable, or a bad dynamic.json (one line)."""


@dataclass(frozen=True)
class Driver:
    """The driver's data: variable ``name`` in ``lo..hi``, the base register writes, the pieces (each with its
    instruction count: the words past it are the constants region's)."""

    name: str
    lo: int
    hi: int
    base_regs: tuple[tuple[str, int], ...]
    pieces: tuple[tuple[int, int, int, tuple[int, ...], tuple[int, ...]], ...]  # lo, hi, insns, base, delta
    insn_capacity: int
    const_addr: int | None  # where the kernel's constants go in DRAM (None: the kernel has none)
    const_bytes: int

    @classmethod
    def from_json(cls, d: dict[str, Any], where: str = DRIVER_FILE) -> "Driver":
        """Read and check ``dynamic.json``'s content: pieces in order, covering lo..hi, equal-length words."""
        try:
            var = d["var"]
            pieces = tuple((int(p["lo"]), int(p["hi"]), int(p["insns"]), tuple(int(w, 16) for w in p["base"]),
                            tuple(int(w, 16) for w in p["delta"])) for p in d["pieces"])
            drv = cls(str(var["name"]), int(var["min"]), int(var["max"]),
                      tuple((str(n), int(v)) for n, v in d["regs"]), pieces, int(d["insn_capacity"]),
                      None if d["const_addr"] is None else int(d["const_addr"]), int(d["const_bytes"]))
        except (KeyError, TypeError, ValueError) as e:
            raise DriverError(f"{where}: not a dynamic driver ({type(e).__name__}: {e})") from None
        nxt = drv.lo
        for lo, hi, insns, base, delta in pieces:
            if lo != nxt or hi < lo or len(base) != len(delta) or not 0 < insns <= min(len(base), drv.insn_capacity) \
                    or (len(base) - insns) * INSN_BYTES > drv.const_bytes:
                raise DriverError(f"{where}: piece {lo}..{hi} does not continue the pieces at {nxt}")
            nxt = hi + 1
        if nxt != drv.hi + 1:
            raise DriverError(f"{where}: the pieces end at {nxt - 1}, the variable at {drv.hi}")
        return drv

    @classmethod
    def load(cls, folder: str | Path) -> "Driver":
        """The driver of a Program folder (its ``dynamic.json``)."""
        path = Path(folder) / DRIVER_FILE
        try:
            return cls.from_json(json.loads(path.read_text()), str(path))
        except (OSError, json.JSONDecodeError) as e:
            raise DriverError(f"{path}: cannot read ({e})") from None

    def range_text(self) -> str:
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

    def _piece(self, v: int) -> tuple[int, int, int, tuple[int, ...], tuple[int, ...]]:
        for piece in self.pieces:
            if piece[0] <= v <= piece[1]:
                return piece
        raise DriverError(f"variable '{self.name}': {v} is out of range {self.lo}..{self.hi}")

    def _all_words(self, v: int) -> tuple[int, list[int]]:
        lo, _, insns, base, delta = self._piece(v)
        return insns, piece_words(base, delta, v - lo)

    def words(self, v: int) -> list[int]:
        """The 128-bit instruction words of value ``v`` (already checked)."""
        n, w = self._all_words(v)
        return w[:n]

    def insn_bytes(self, v: int) -> bytes:
        """The instruction stream of value ``v``: 16 little-endian bytes per word."""
        return b"".join(w.to_bytes(INSN_BYTES, "little") for w in self.words(v))

    def const_bytes_of(self, v: int) -> bytes:
        """The bytes of the kernel's constants (micro-op tables...) for value ``v``, written at ``const_addr``
        (empty when the kernel has none; the rest of the constants region stays zero)."""
        n, w = self._all_words(v)
        return b"".join(x.to_bytes(INSN_BYTES, "little") for x in w[n:])

    def regs(self, v: int) -> list[tuple[str, int]]:
        """The ordered CSR writes of value ``v``: the base ones with the instruction count and region size."""
        n = self._piece(v)[2]
        out = []
        for name, val in self.base_regs:
            out.append((name, n if name == "INSN_COUNT" else n * INSN_BYTES if name == "REGION0_SIZE" else val))
        return out
