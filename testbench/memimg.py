"""DRAM images as $readmemh / $writememh text, and the watchdog bound of a Program.

Kept free of cocotb so the runner (parent process) and the cocotb test module (inside
the simulator) share it.
"""

from __future__ import annotations

import math
import re

import numpy as np

from hw.gemm_numpy import gemm_iterations
from hw.isa import BUFFER_NAMES, Alu, Gemm, Load, Store
from hw.isa_semantics import load_tile_shape
from hw.program import Program


def to_hex_words(img: bytes | bytearray, word_bytes: int) -> str:
    """A little-endian byte image as $readmemh text: one bus word per line, MSB first.

    The image is zero-padded to a whole number of words.
    """
    pad = (-len(img)) % word_bytes
    a = np.frombuffer(bytes(img) + bytes(pad), dtype=np.uint8).reshape(-1, word_bytes)[:, ::-1]
    h = a.tobytes().hex()
    w = 2 * word_bytes
    return "\n".join(h[i:i + w] for i in range(0, len(h), w)) + "\n"


def from_hex_words(text: str, word_bytes: int) -> tuple[bytes, int]:
    """Parse $writememh text back into little-endian bytes.

    Returns (bytes, unknown) where ``unknown`` counts words holding x/z digits (Icarus
    keeps uninitialised memory as X); those digits read as 0. Address markers
    (``@...``) and ``//`` comments are honoured/skipped.

    The common case (one full-width hex word per line, as Verilator and Icarus write it,
    between whole-line ``//`` comments, after an optional ``@0`` marker) is parsed with numpy
    in one pass; anything else (x/z digits, other markers, short or several words per
    line) takes the general line-by-line path.
    """
    fast = _from_hex_words_fast(text, word_bytes)
    if fast is not None:
        return fast, 0
    return _from_hex_words_slow(text, word_bytes)


# ASCII -> nibble; 255 for anything that is not a hex digit (x, z, _, @, /, spaces).
_NIBBLE = np.full(256, 255, dtype=np.uint8)
_NIBBLE[np.frombuffer(b"0123456789", dtype=np.uint8)] = np.arange(10, dtype=np.uint8)
_NIBBLE[np.frombuffer(b"abcdef", dtype=np.uint8)] = np.arange(10, 16, dtype=np.uint8)
_NIBBLE[np.frombuffer(b"ABCDEF", dtype=np.uint8)] = np.arange(10, 16, dtype=np.uint8)


_COMMENT_LINE = re.compile(r"^//[^\n]*(\n|$)", re.M)


def _from_hex_words_fast(text: str, word_bytes: int) -> bytes | None:
    """One word per line, all lines ``2*word_bytes`` hex digits, from address 0; else None."""
    w = 2 * word_bytes
    # Whole-line // comments (Icarus writes an address comment every few lines) go first.
    body = _COMMENT_LINE.sub("", text) if "//" in text else text
    # A leading @0 marker or blank lines, as $writememh may write them.
    while body.startswith("@0\n") or body.startswith("\n"):
        nl = body.find("\n")
        if nl < 0:
            return b""
        body = body[nl + 1:]
    if not body:
        return b""
    raw = body.encode("ascii", "replace")
    if not raw.endswith(b"\n"):
        raw += b"\n"
    if len(raw) % (w + 1):
        return None
    a = np.frombuffer(raw, dtype=np.uint8).reshape(-1, w + 1)
    if not (a[:, w] == 0x0A).all():
        return None
    nib = _NIBBLE[a[:, :w]]
    if (nib == 255).any():
        return None
    byte = (nib[:, 0::2] << 4) | nib[:, 1::2]  # MSB first per word
    return byte[:, ::-1].tobytes()


def _from_hex_words_slow(text: str, word_bytes: int) -> tuple[bytes, int]:
    out = bytearray()
    unknown = 0
    w = 2 * word_bytes
    addr = 0
    for line in text.splitlines():
        line = line.split("//", 1)[0].strip()
        if not line:
            continue
        for tok in line.split():
            if tok.startswith("@"):
                addr = int(tok[1:], 16)
                continue
            tok = tok.replace("_", "")
            low = tok.lower()
            if any(c in "xz" for c in low):
                unknown += 1
                low = "".join("0" if c in "xz" else c for c in low)
            word = bytes.fromhex(low.rjust(w, "0"))[::-1]
            end = (addr + 1) * word_bytes
            if len(out) < end:
                out.extend(bytes(end - len(out)))
            out[addr * word_bytes:end] = word
            addr += 1
    return bytes(out), unknown


def watchdog_cycles(program: Program, mem: str = "fast") -> int:
    """A generous bound on the cycles a correct RTL needs for ``program``: the RTL watchdog.

    Sums, per instruction, the DRAM bursts (latency + beats, rows split at MAX_BURST and
    4 KiB), zero-padding cycles and ALU and GEMM iterations, plus fetch; then x4 and a constant.
    The protocol back-end (random backpressure on every channel) gets x8 more. There is no
    fixed cap: the bound follows the Program, so a valid Program of any length (a network
    of 100 M cycles, one ALU instruction of 2^28 iterations) runs to DONE, and a Program
    that hangs is still stopped within a few times its own length.
    """
    cfg = program.config
    lat = cfg.dram_read_latency + cfg.dram_write_latency + 8
    n = len(program.insns)
    insn_beats = n * cfg.beats_per_insn
    cycles = (math.ceil(insn_beats / cfg.max_burst) + n) * lat + insn_beats + 16 * n
    for i in program.insns:
        if isinstance(i, (Load, Store)):
            vec_beats = cfg.beats_per_elem(BUFFER_NAMES.get(i.buf, "ACC")) if isinstance(i, Load) \
                else cfg.beats_per_out_vec
            row_beats = i.x_size * vec_beats
            bursts = math.ceil(row_beats / cfg.max_burst) + 1
            cycles += i.y_size * (bursts * lat + row_beats)
            rows, cols = load_tile_shape(i) if isinstance(i, Load) else (i.y_size, i.x_size)
            cycles += rows * cols
        elif isinstance(i, Alu):
            cycles += i.iter_out * i.iter_in + 4
        elif isinstance(i, Gemm):
            cycles += gemm_iterations(i) + 4
    bound = 4 * cycles + 2000
    if mem == "protocol":
        bound *= 8
    return bound
