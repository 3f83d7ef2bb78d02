"""The Program: what the hardware is given, and the folder format every model reads.

A Program is the instruction stream, the DRAM layout (named regions), the register
config (the ordered CSR writes that point the accelerator at its instructions and
data and start it) and the config's identity. Optional ``inputs`` (and golden
``expected`` outputs) make a folder self-contained, so a Program made once runs on
any model, on any machine.

Folder files: ``insn.bin``, ``regs.json``, ``regs.h``, ``layout.json``,
``program.lst`` and, when inputs are attached, ``inputs.npz``, ``dram.bin`` (the
initial DRAM image from address 0 to the end of the layout, for drivers outside
this project that load it with the writes of ``regs.h``) and ``expected.npz``.

:meth:`Program.load` checks that the files describe one Program: the layout fits
the config (positive shapes, ``bytes`` equal to shape x dtype, aligned, disjoint,
inside DRAM), ``regs.json`` opens exactly the layout's regions as its REGIONn
windows, points INSN_ADDR/INSN_COUNT at the instruction region (unless ``meta`` marks a
deliberate fault, :data:`FAULT_META`) and ends with the ``CTRL.START`` write, every input
region has its array in ``inputs.npz`` (when present), ``expected.npz`` (when present) holds
exactly the output regions' arrays (names, shapes, dtypes), and may hold those of scratch regions that
have their data in ``inputs.npz`` (a tensor updated in place: its final value is checked too), and
``dram.bin``, when present, is
byte for byte the image of ``insn.bin`` and ``inputs.npz`` (so every model runs
exactly ``dram.bin``; a truncated or stale one is refused, never ignored).
"""

from __future__ import annotations

import functools
import io
import json
import math
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from hw import csr
from hw.analysis import after_finish_problem, balance_problem
from hw.config import ConfigError, DuplicateKeyError, HwConfig, load_config, parse_config, unique_keys
from hw.dynamic_driver import DRIVER_FILE
from hw.isa import INSN_BYTES, Instruction, Isa, IsaError
from hw.isa_semantics import dram_span
from hw.npz_file import NpzError, read_npz

ROLES = ("insn", "input", "output", "scratch")
DTYPES = ("int8", "int16", "int32")
ROLE_ATTR = {"insn": csr.ATTR_READ, "input": csr.ATTR_READ, "output": csr.ATTR_WRITE,
             "scratch": csr.ATTR_READ | csr.ATTR_WRITE}
FILES = ("insn.bin", "regs.json", "regs.h", "layout.json", "program.lst")
# What else a Program folder may hold: its data, and a dynamic Program's driver.
DATA_FILES = ("inputs.npz", "expected.npz", "dram.bin", DRIVER_FILE, "driver.h", "driver.c")
# layout.json's ``meta`` key that marks a deliberate fault Program (its text says what was broken): the
# loader then accepts INSN_ADDR/INSN_COUNT that disagree with the layout, for the models to report.
FAULT_META = "deliberate_fault"


class ProgramError(ValueError):
    """A Program or Program folder that is malformed, inconsistent or made for other hardware."""


@dataclass(frozen=True)
class Region:
    """A named DRAM region: byte address, tensor shape and dtype, role."""

    name: str
    role: str
    addr: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize  # Python ints: no int64 wrap-around

    @property
    def end(self) -> int:
        return self.addr + self.nbytes

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "addr": self.addr, "shape": list(self.shape),
                "dtype": self.dtype, "bytes": self.nbytes}


def align_up(v: int, a: int) -> int:
    return (v + a - 1) // a * a


def plan_layout(cfg: HwConfig, tensors: Iterable[tuple[str, str, tuple[int, ...], str]],
                insn_count: int, base: int = 0) -> list[Region]:
    """Place the instruction stream, then each (name, role, shape, dtype) tensor, aligned and disjoint."""
    regions = [Region("insn", "insn", base, (insn_count * INSN_BYTES,), "int8")]
    addr = align_up(regions[0].end, cfg.region_align)
    for name, role, shape, dtype in tensors:
        r = Region(name, role, addr, tuple(int(s) for s in shape), dtype)
        regions.append(r)
        addr = align_up(r.end, cfg.region_align)
    check_layout(cfg, regions, "layout")
    return regions


def concat_streams(streams: list[list[Instruction]]) -> tuple[list[Instruction], list[tuple[int, int]]]:
    """Per-core instruction streams as one flat list (core 0 first) and the cores' windows
    ``(first, count)`` into it: how a Program of several cores holds its instructions."""
    insns: list[Instruction] = []
    windows = []
    for s in streams:
        windows.append((len(insns), len(s)))
        insns += list(s)
    return insns, windows


def check_windows_cover(cfg: HwConfig, windows: list[tuple[int, int]], n_insns: int, where: str) -> None:
    """Raise ProgramError unless ``windows`` gives each of the config's cores a non-empty window and the
    windows follow one another, in core order, over all ``n_insns`` instructions."""
    if len(windows) != cfg.num_cores:
        raise ProgramError(f"{where}: {len(windows)} instruction stream(s), but config '{cfg.name}' has "
                           f"{cfg.num_cores} core(s): one stream per core")
    at = 0
    for k, (first, count) in enumerate(windows):
        if first != at or count < 1:
            raise ProgramError(f"{where}: core {k}'s instruction window starts at {first} with {count} "
                               f"instruction(s); windows must be non-empty and follow one another from 0")
        at += count
    if at != n_insns:
        raise ProgramError(f"{where}: the cores' windows hold {at} instructions, the stream has {n_insns}")


def check_layout(cfg: HwConfig, regions: list[Region], where: str) -> None:
    """Raise ProgramError (naming ``where``) unless the regions fit the config's DRAM and rules."""
    names = set()
    for r in regions:
        if not r.shape or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s <= 0 for s in r.shape):
            raise ProgramError(f"{where}: region '{r.name}' has shape {list(r.shape)}: every dimension must be a "
                               f"positive integer")
        if r.name in names:
            raise ProgramError(f"{where}: region name '{r.name}' is used twice")
        names.add(r.name)
        if r.role not in ROLES:
            raise ProgramError(f"{where}: region '{r.name}' has unknown role '{r.role}' (roles: {', '.join(ROLES)})")
        if r.dtype not in DTYPES:
            raise ProgramError(f"{where}: region '{r.name}' has unsupported dtype '{r.dtype}'")
        if r.addr < 0 or r.end > cfg.dram_bytes:
            raise ProgramError(f"{where}: region '{r.name}' [{hex(r.addr)}, {hex(r.end)}) is outside the "
                               f"{cfg.dram_bytes}-byte DRAM")
        if r.addr % cfg.region_align:
            raise ProgramError(f"{where}: region '{r.name}' at 0x{r.addr:x} is not aligned to "
                               f"{cfg.region_align} bytes")
    ordered = sorted(regions, key=lambda r: r.addr)
    for a, b in zip(ordered, ordered[1:]):
        if b.addr < a.end:
            raise ProgramError(f"{where}: regions '{a.name}' [0x{a.addr:x}, 0x{a.end:x}) and '{b.name}' "
                               f"[0x{b.addr:x}, 0x{b.end:x}) overlap")
    insn = [r for r in regions if r.role == "insn"]
    if len(insn) != 1:
        raise ProgramError(f"{where}: needs exactly one region with role 'insn', found {len(insn)}")
    if len(regions) > cfg.max_regions:
        raise ProgramError(f"{where}: {len(regions)} regions, but config '{cfg.name}' has "
                           f"{cfg.max_regions} region slots")


@functools.lru_cache(maxsize=16)
def isa_of(cfg: HwConfig) -> Isa:
    """The :class:`Isa` of ``cfg``, shared (an Isa holds no state beyond the config's field layout)."""
    return Isa(cfg)


def make_regs(cfg: HwConfig, regions: list[Region], windows: list[tuple[int, int]]) -> list[tuple[str, int]]:
    """The register config: region windows, every core's instruction address and count, then START
    (one core: the fixed map's INSN_* registers; several: each core's ``COREk_INSN_*`` bank)."""
    writes: list[tuple[str, int]] = []
    for i, r in enumerate(regions):
        writes += [(f"REGION{i}_BASE", r.addr), (f"REGION{i}_SIZE", r.nbytes), (f"REGION{i}_ATTR", ROLE_ATTR[r.role])]
    insn = next(r for r in regions if r.role == "insn")
    for k, (first, count) in enumerate(windows):
        addr = insn.addr + first * INSN_BYTES
        writes += [(csr.core_reg("INSN_ADDR_LO", k, cfg.num_cores), addr & 0xFFFFFFFF),
                   (csr.core_reg("INSN_ADDR_HI", k, cfg.num_cores), addr >> 32),
                   (csr.core_reg("INSN_COUNT", k, cfg.num_cores), count)]
    return writes + [("CTRL", csr.CTRL_START)]


@dataclass
class Program:
    """Instructions + DRAM layout + register config for one hardware config.

    ``insns`` is every core's stream, core 0 first; ``windows`` gives each core's ``(first, count)``
    in it (one window on one core). A core's pcs (ERR_PC, traces) count from its window's start.
    """

    config: HwConfig
    insns: list[Instruction]
    regions: list[Region]
    regs: list[tuple[str, int]]
    name: str = "program"
    meta: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    expected: dict[str, np.ndarray] = field(default_factory=dict)
    windows: list[tuple[int, int]] = field(default_factory=list)
    # the last encoding of ``insns``: (its Isa, the instruction objects, the bytes); see ``insn_bytes``
    _encoded: tuple[Isa, list[Instruction], bytes] | None = field(default=None, init=False, repr=False,
                                                                   compare=False)

    def __post_init__(self) -> None:
        if not self.windows:
            self.windows = [(0, len(self.insns))]

    def __getstate__(self) -> dict[str, Any]:
        # a copy elsewhere (a pickle for another process, a deep copy) encodes afresh: its Isa is another object
        return {**self.__dict__, "_encoded": None}

    # ---- construction ----------------------------------------------------------
    @classmethod
    def create(cls, cfg: HwConfig, insns: list[Instruction], regions: list[Region], name: str = "program",
               meta: dict[str, Any] | None = None, inputs: dict[str, np.ndarray] | None = None,
               expected: dict[str, np.ndarray] | None = None,
               windows: list[tuple[int, int]] | None = None, check_tokens: bool = True) -> "Program":
        """Check the layout and instructions (token balance and nothing racing the FINISH too, as
        :meth:`load` does, unless ``check_tokens`` is False: a deliberately broken Program), derive the
        register config.
        ``windows`` (one per core, see :func:`concat_streams`) is needed on a config of several cores."""
        windows = list(windows) if windows is not None else [(0, len(insns))]
        check_windows_cover(cfg, windows, len(insns), name)
        check_layout(cfg, regions, name)
        isa = isa_of(cfg)
        words = []
        for k, i in enumerate(insns):
            try:
                words.append(isa.encode(i))  # raises naming the field that does not fit
            except IsaError as e:
                raise IsaError(f"{name}: instruction {k}: {e}") from None
            isa.check(i, k)
        for k, (first, count) in enumerate(windows if check_tokens else []):
            check_stream(insns[first:first + count], name + (f" (core {k})" if len(windows) > 1 else ""))
        insn_region = next(r for r in regions if r.role == "insn")  # check_layout: exactly one
        if insn_region.nbytes != len(insns) * INSN_BYTES:
            raise ProgramError(f"{name}: instruction region holds {insn_region.nbytes} bytes, "
                               f"{len(insns)} instructions need {len(insns) * INSN_BYTES}")
        p = cls(cfg, list(insns), list(regions), make_regs(cfg, regions, windows), name, dict(meta or {}),
                {}, {}, windows)
        p._encoded = (isa, list(p.insns), b"".join(words))
        for k, v in (inputs or {}).items():
            p.set_input(k, v)
        p.expected = {k: np.asarray(v) for k, v in (expected or {}).items()}
        return p

    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        raise ProgramError(f"{self.name}: no region named '{name}' (regions: {', '.join(r.name for r in self.regions)})")

    def set_input(self, name: str, value: np.ndarray) -> None:
        r = self.region(name)
        if r.role not in ("input", "scratch"):
            raise ProgramError(f"{self.name}: region '{name}' is an {r.role} region, not an input")
        a = np.asarray(value)
        if tuple(a.shape) != r.shape:
            raise ProgramError(f"{self.name}: input '{name}' has shape {tuple(a.shape)}, the layout says {r.shape}")
        if a.dtype != np.dtype(r.dtype):
            if not np.can_cast(a.dtype, r.dtype, "same_kind") or (np.any(a < np.iinfo(r.dtype).min) or
                                                                   np.any(a > np.iinfo(r.dtype).max)):
                raise ProgramError(f"{self.name}: input '{name}' of dtype {a.dtype} does not fit {r.dtype}")
            a = a.astype(r.dtype)
        self.inputs[name] = a

    @property
    def isa(self) -> Isa:
        """The config's instruction set (built once per config: its field tables take a while)."""
        return isa_of(self.config)

    @property
    def num_cores(self) -> int:
        return len(self.windows)

    def core_insns(self, core: int) -> list[Instruction]:
        """Core ``core``'s instruction stream (its pc 0 first)."""
        first, count = self.windows[core]
        return self.insns[first:first + count]

    def core_of(self, index: int) -> tuple[int, int]:
        """The ``(core, pc)`` of flat instruction ``index``."""
        for k, (first, count) in enumerate(self.windows):
            if first <= index < first + count:
                return k, index - first
        raise IndexError(f"{self.name}: instruction {index} is outside every core's window")

    def listing(self) -> str:
        """The disassembly (program.lst): each core's stream under a ``; core k`` header (on several
        cores), pcs counted per core, with the ``; section`` headers."""
        if self.num_cores == 1:
            return self.isa.disasm_stream(self.insns, self.meta.get("sections"))
        per_core = self.meta.get("core_sections") or [[] for _ in self.windows]
        parts = []
        for k in range(self.num_cores):
            parts.append(f"; core {k}\n" + self.isa.disasm_stream(self.core_insns(k), per_core[k]))
        return "\n".join(parts)

    @property
    def insn_bytes(self) -> bytes:
        """The instruction words. ``insns`` is a list callers may edit: the last encoding is reused only
        while the list holds the very same instruction objects (frozen, so their words cannot change)."""
        isa, last = self.isa, self._encoded
        if last is not None and last[0] is isa and len(last[1]) == len(self.insns) \
                and all(map(operator.is_, last[1], self.insns)):
            return last[2]
        words = isa.encode_stream(self.insns)
        self._encoded = (isa, list(self.insns), words)
        return words

    @property
    def dram_end(self) -> int:
        return max(r.end for r in self.regions)

    def in_place(self) -> list[Region]:
        """The tensors updated in place: each scratch region with input data (loaded and stored)."""
        return [r for r in self.regions if r.role == "scratch" and r.name in self.inputs]

    def outputs(self) -> list[Region]:
        """The regions a run is checked on: every output region, and each tensor updated in place
        (:meth:`in_place`) that the expected outputs name."""
        checked = {r.name for r in self.in_place() if r.name in self.expected}
        return [r for r in self.regions if r.role == "output" or r.name in checked]

    def unstored(self) -> dict[str, tuple[int, int]]:
        """Each output region some of whose elements no STORE of any core writes: ``{name: (never stored,
        elements)}``. Such elements keep their initial zeros on every model alike, so the models agree on a
        kernel that forgot part of its output (an operator called from one core only, a short loop)."""
        out = self.config.out_vec_bytes
        written = {r.name: np.zeros(r.nbytes, dtype=bool) for r in self.regions if r.role == "output"}
        spans = [(r.addr, r.end, written[r.name]) for r in self.regions if r.role == "output"]
        for i in self.insns:
            span = dram_span(i, self.config) if i.MNEMONIC == "STORE" else None
            if span is None:
                continue
            # a store's rows, one span when they are contiguous (or the same row again: stride 0)
            rows = [span] if i.y_size == 1 or i.x_stride in (0, i.x_size) else \
                [(lo, lo + i.x_size * out) for lo in range(span[0], span[1], i.x_stride * out)]
            for a, e, mask in spans:
                if span[0] < e and span[1] > a:
                    for lo, hi in rows:
                        if lo < e and hi > a:
                            mask[max(lo, a) - a:min(hi, e) - a] = True
        result = {}
        for r in self.regions:
            if r.role == "output" and not written[r.name].all():
                item = np.dtype(r.dtype).itemsize
                per = written[r.name].reshape(-1, item).any(axis=1)
                result[r.name] = (int((~per).sum()), int(per.size))
        return result

    def dram_image(self, inputs: dict[str, np.ndarray] | None = None) -> bytearray:
        """Initial DRAM bytes from address 0 to the end of the layout: instructions and inputs."""
        img = bytearray(align_up(self.dram_end, self.config.region_align))
        ins = self.region_by_role("insn")
        img[ins.addr:ins.end] = self.insn_bytes
        for name, a in (self.inputs if inputs is None else inputs).items():
            r = self.region(name)
            img[r.addr:r.end] = np.ascontiguousarray(a, dtype=np.dtype(r.dtype).newbyteorder("<")).tobytes()
        return img

    def read_outputs(self, dram: bytes | bytearray | np.ndarray) -> dict[str, np.ndarray]:
        """Cut each output region out of a DRAM image (any buffer indexed from address 0)."""
        buf = bytes(dram[:self.dram_end]) if not isinstance(dram, np.ndarray) else dram[:self.dram_end].tobytes()
        out = {}
        for r in self.outputs():
            out[r.name] = np.frombuffer(buf[r.addr:r.end], dtype=np.dtype(r.dtype).newbyteorder("<")) \
                .astype(r.dtype).reshape(r.shape)
        return out

    def region_by_role(self, role: str) -> Region:
        """The first region of ``role``; ProgramError if there is none."""
        for r in self.regions:
            if r.role == role:
                return r
        raise ProgramError(f"{self.name}: no {role} region (regions: {', '.join(r.name for r in self.regions)})")

    # ---- folder format ---------------------------------------------------------
    def regs_json(self) -> dict[str, Any]:
        by_name = csr.csrs_of(self.config)
        return {"config": self.config.name, "config_id": f"0x{self.config.config_id:08x}",
                "writes": [{"csr": n, "addr": by_name[n].addr, "value": v} for n, v in self.regs]}

    def regs_header(self) -> str:
        by_name = csr.csrs_of(self.config)
        guard = "COSIM_PROGRAM_REGS_H"
        lines = [f"/* Register config of Program '{self.name}' for config '{self.config.name}'.",
                 " * Generated by cosim: write these in order to the accelerator's CSRs. */",
                 f"#ifndef {guard}", f"#define {guard}", "#include <stdint.h>", "",
                 f"#define COSIM_CONFIG_ID 0x{self.config.config_id:08x}u",
                 f"#define COSIM_REG_WRITES {len(self.regs)}", "",
                 "static const struct { uint32_t addr; uint32_t value; } cosim_reg_writes[] = {"]
        for n, v in self.regs:
            lines.append(f"    {{0x{by_name[n].addr:03x}u, 0x{v:08x}u}},  /* {n} */")
        lines += ["};", "", f"#endif /* {guard} */", ""]
        return "\n".join(lines)

    def layout_json(self) -> dict[str, Any]:
        # "hardware" carries the config itself, so a folder made with a config file of the user's own runs
        # without it
        d = {"program": self.name, "meta": self.meta, "config": self.config.name,
             "config_id": f"0x{self.config.config_id:08x}", "hardware": self.config.to_dict(),
             "regions": [r.to_json() for r in self.regions]}
        if self.num_cores > 1:
            d["cores"] = [count for _, count in self.windows]
        return d

    def save(self, folder: str | Path) -> Path:
        """Write the Program folder and return its path. Every file is written aside first and put in place
        only when all are written, so a failed save (a full disk) leaves the folder as it was; the error
        names the folder."""
        d = Path(folder)
        d.mkdir(parents=True, exist_ok=True)
        files: dict[str, bytes] = {
            "insn.bin": self.insn_bytes,
            "regs.json": (json.dumps(self.regs_json(), indent=1) + "\n").encode(),
            "regs.h": self.regs_header().encode(),
            "layout.json": (json.dumps(self.layout_json(), indent=1) + "\n").encode(),
            "program.lst": (self.listing() + "\n").encode(),
        }
        if self.inputs:
            files["inputs.npz"] = _npz_bytes(self.inputs)
            files["dram.bin"] = bytes(self.dram_image())
        if self.expected:
            files["expected.npz"] = _npz_bytes(self.expected)
        staged: list[Path] = []
        try:
            for name, data in files.items():
                staged.append(d / f".{name}.saving")
                staged[-1].write_bytes(data)
        except OSError as e:
            for tmp in staged:
                tmp.unlink(missing_ok=True)
            if e.filename is None:  # a write that failed (no space): say where
                raise OSError(e.errno, e.strerror, str(d)) from None
            raise
        # what an earlier Program in this folder may have left: its data, and a dynamic Program's driver
        for stale in DATA_FILES:
            if stale not in files:
                (d / stale).unlink(missing_ok=True)
        for tmp, name in zip(staged, files):
            tmp.replace(d / name)
        return d

    @classmethod
    def load(cls, folder: str | Path, cfg: HwConfig | None = None) -> "Program":
        """Read a Program folder; with ``cfg``, refuse a Program made for other hardware."""
        d = Path(folder)
        if not d.is_dir():
            if d.is_file() and d.parent.joinpath("insn.bin").is_file():
                raise ProgramError(f"{d}: a file of the Program folder {d.parent}; give the folder")
            raise ProgramError(f"{d}: {'not a folder' if d.exists() else 'no such Program folder'}")
        for f in ("insn.bin", "regs.json", "layout.json"):
            if not (d / f).is_file():
                what = "not a regular file" if (d / f).exists() else "missing"
                raise ProgramError(f"{d / f}: {what} (a Program folder needs insn.bin, regs.json, layout.json)")
        lpath = d / "layout.json"
        layout = _read_json(lpath)
        if not isinstance(layout, dict):
            raise ProgramError(f"{lpath}: must be a JSON object (with 'config', 'config_id', 'regions'), "
                               f"not a {_json_kind(layout)}")
        cfg_name = _field(layout, "config", str, lpath)
        id_text = _field(layout, "config_id", str, lpath)
        try:
            stored_id = int(id_text, 16)
        except ValueError:
            raise ProgramError(f"{lpath}: 'config_id' must be a hex string such as '0x1a8c697b', not "
                               f"{id_text!r}") from None
        region_list = _field(layout, "regions", list, lpath)
        prog_name = _field(layout, "program", str, lpath, d.name)
        meta = _field(layout, "meta", dict, lpath, {})
        own = _hardware_of(layout, cfg_name, stored_id, lpath)
        if cfg is None:
            cfg = _config_of(own, cfg_name, stored_id, lpath)
        if stored_id != cfg.config_id:
            same = " (another config of that name)" if cfg.name == cfg_name else ""
            raise ProgramError(f"{lpath}: Program made for config '{cfg_name}' (id 0x{stored_id:08x}), "
                               f"but this run uses config '{cfg.name}' (id 0x{cfg.config_id:08x}){same}")
        regions = [_region_of(k, entry, lpath) for k, entry in enumerate(region_list)]
        check_layout(cfg, regions, str(d / "layout.json"))
        for r, entry in zip(regions, region_list):
            if "bytes" in entry and entry["bytes"] != r.nbytes:
                raise ProgramError(f"{d / 'layout.json'}: region '{r.name}' says {entry['bytes']!r} bytes, but "
                                   f"{r.dtype} {list(r.shape)} is {r.nbytes} bytes")
        data = (d / "insn.bin").read_bytes()
        try:
            insns = Isa(cfg).decode_stream(data)
        except IsaError as e:
            raise ProgramError(f"{d / 'insn.bin'}: {e}") from None
        windows = _windows_of(layout, cfg, len(insns), lpath)
        for k, (first, count) in enumerate(windows):
            where = str(d / "insn.bin") + (f" (core {k})" if len(windows) > 1 else "")
            check_stream(insns[first:first + count], where)
        insn_region = next(r for r in regions if r.role == "insn")
        if insn_region.nbytes != len(data):
            raise ProgramError(f"{d / 'insn.bin'}: {len(data)} bytes, but the layout's instruction region holds "
                               f"{insn_region.nbytes}")
        regs = _read_regs(d / "regs.json", cfg, cfg_name, stored_id)
        check_starts(regs, str(d / "regs.json"))
        check_windows(cfg, regs, regions, str(d / "regs.json"))
        if FAULT_META not in meta:
            check_insn_regs(regs, insn_region, windows, str(d / "regs.json"))
        p = cls(cfg, insns, regions, regs, prog_name, dict(meta), {}, {}, windows)
        for f in ("inputs.npz", "expected.npz", "dram.bin"):
            if (d / f).exists() and not (d / f).is_file():
                raise ProgramError(f"{d / f}: not a regular file")
        if (d / "inputs.npz").is_file():
            for k, a in _read_npz(d / "inputs.npz").items():
                try:
                    p.set_input(k, a)
                except ProgramError as e:
                    raise ProgramError(f"{d / 'inputs.npz'}: {e}") from None
            missing = [r.name for r in regions if r.role == "input" and r.name not in p.inputs]
            if missing:
                raise ProgramError(f"{d / 'inputs.npz'}: no array for input region(s) "
                                   f"{', '.join(repr(m) for m in missing)} of layout.json")
        if (d / "expected.npz").is_file():
            p.expected = _read_npz(d / "expected.npz")
            check_expected(p, str(d / "expected.npz"))
        if (d / "dram.bin").is_file() and not p.missing_inputs():  # else the missing inputs.npz is the news
            _check_dram_bin(p, d / "dram.bin")
        return p

    def missing_inputs(self) -> list[str]:
        """The input regions that have no data attached (a Program that cannot be run as it is)."""
        return [r.name for r in self.regions if r.role == "input" and r.name not in self.inputs]


def check_insn_regs(regs: list[tuple[str, int]], insn: Region, windows: list[tuple[int, int]], where: str) -> None:
    """Raise ProgramError unless the register config's INSN_ADDR and INSN_COUNT of every core (last write
    wins) point at that core's window of the layout's instruction region."""
    last = dict(regs)
    n_cores = len(windows)
    for k, (first, count) in enumerate(windows):
        lo, hi, cnt = (csr.core_reg(r, k, n_cores) for r in ("INSN_ADDR_LO", "INSN_ADDR_HI", "INSN_COUNT"))
        addr = last.get(lo, 0) | (last.get(hi, 0) << 32)
        n = last.get(cnt, 0)
        want = insn.addr + first * INSN_BYTES
        if addr != want or n != count:
            whose = f"core {k}'s {lo[:-3]} 0x{addr:x} / {cnt} {n}" if n_cores > 1 else \
                f"INSN_ADDR 0x{addr:x} / INSN_COUNT {n}"
            window = f"core {k}'s window of " if n_cores > 1 else ""
            raise ProgramError(f"{where}: {whose}, but {window}layout.json's instruction region '{insn.name}' is at "
                               f"0x{want:x} with {count} instructions (insn.bin)")


def _windows_of(layout: dict[str, Any], cfg: HwConfig, n_insns: int, path: Path) -> list[tuple[int, int]]:
    """The cores' instruction windows from layout.json's ``cores`` (instructions per core; absent on one
    core), checked against the config's core count and insn.bin."""
    if "cores" not in layout and cfg.num_cores == 1:
        return [(0, n_insns)]
    counts = _field(layout, "cores", list, path)
    if any(type(c) is not int for c in counts):
        raise ProgramError(f"{path}: 'cores' must be a list of instruction counts (integers), not {counts!r}"[:300])
    first = [sum(counts[:k]) for k in range(len(counts))]
    windows = list(zip(first, counts))
    check_windows_cover(cfg, windows, n_insns, str(path))
    return windows


def check_expected(p: "Program", where: str) -> None:
    """Raise ProgramError unless the expected outputs are the layout's output regions, and perhaps scratch
    regions (updated in place; a run checks those that have input data, see :meth:`Program.outputs`): same
    names, each of the region's shape and dtype."""
    outs = {r.name: r for r in p.regions if r.role == "output"}
    in_place = {r.name: r for r in p.regions if r.role == "scratch"}  # whose data a run reads from inputs.npz
    extra = sorted(set(p.expected) - set(outs) - set(in_place))
    if extra:
        raise ProgramError(f"{where}: array(s) {', '.join(repr(n) for n in extra)} name no output region of "
                           f"layout.json, nor a scratch region (outputs: {', '.join(outs) or 'none'})")
    missing = sorted(set(outs) - set(p.expected))
    if missing:
        raise ProgramError(f"{where}: no array for output region(s) {', '.join(repr(n) for n in missing)}")
    for name, a in p.expected.items():
        r = outs.get(name) or in_place[name]
        if tuple(a.shape) != r.shape or a.dtype != np.dtype(r.dtype):
            raise ProgramError(f"{where}: array '{name}' is {a.dtype} {list(a.shape)}, but {r.role} region "
                               f"'{name}' is {r.dtype} {list(r.shape)}")


def check_stream(insns: Iterable[Instruction], where: str) -> None:
    """Raise ProgramError unless every dependency-token queue gets as many pushes as pops and only
    FINISHes follow a FINISH.

    Such a Program is rejected before it runs: a surplus push would run silently, a surplus pop
    deadlocks (:func:`hw.analysis.balance_problem`), and a LOAD or STORE after the FINISH runs or
    not depending on timing (:func:`hw.analysis.after_finish_problem`). Program.load applies it.
    """
    stream = list(insns)
    problem = balance_problem(stream) or after_finish_problem(stream)
    if problem:
        raise ProgramError(f"{where}: {problem}")


def check_starts(regs: list[tuple[str, int]], where: str) -> None:
    """Raise ProgramError unless the register config ends by starting the accelerator: its last write is
    CTRL with START set and SOFT_RESET clear (the TLM and the RTL take the writes before it as the run's
    setup; without it neither ever runs)."""
    ctrl = [(k, v) for k, (n, v) in enumerate(regs) if n == "CTRL"]
    if not any(v & csr.CTRL_START for _, v in ctrl):
        raise ProgramError(f"{where}: the register config never starts the accelerator (no CTRL write with START "
                           f"= 0x{csr.CTRL_START:x})")
    k, v = ctrl[-1]
    if v & csr.CTRL_SOFT_RESET or not v & csr.CTRL_START:
        what = "sets SOFT_RESET" if v & csr.CTRL_SOFT_RESET else "clears START"
        raise ProgramError(f"{where}: the register config never starts the accelerator (its last CTRL write, "
                           f"write {k + 1} = 0x{v:x}, {what})")
    if k != len(regs) - 1:
        raise ProgramError(f"{where}: write {k + 1} of {len(regs)} starts the accelerator (CTRL.START) but "
                           f"{regs[k + 1][0]} is written after it: START must be the last write")


def region_windows(regs: list[tuple[str, int]], max_regions: int) -> dict[int, tuple[int, int, int]]:
    """The REGIONn windows a register config programs: slot -> (base, size, attr), last write wins;
    slots never written or of size 0 are closed and left out."""
    slots: dict[int, list[int]] = {}
    for name, value in regs:
        if name.startswith("REGION"):
            i, _, part = name[len("REGION"):].partition("_")
            if i.isdigit() and int(i) < max_regions:
                slots.setdefault(int(i), [0, 0, 0])[("BASE", "SIZE", "ATTR").index(part)] = value
    return {i: (b, s, a) for i, (b, s, a) in sorted(slots.items()) if s}


def check_windows(cfg: HwConfig, regs: list[tuple[str, int]], regions: list[Region], where: str) -> None:
    """Raise ProgramError unless the REGIONn windows of ``regs`` describe the layout's regions:
    window i opens region i exactly (base, size and the role's access), and no other window is open."""
    win = region_windows(regs, cfg.max_regions)
    rw = {csr.ATTR_READ: "read", csr.ATTR_WRITE: "write", csr.ATTR_READ | csr.ATTR_WRITE: "read/write"}
    for i, r in enumerate(regions):
        want = (r.addr, r.nbytes, ROLE_ATTR[r.role])
        got = win.pop(i, None)
        if got is None:
            raise ProgramError(f"{where}: no REGION{i} window for layout region '{r.name}' "
                               f"[0x{r.addr:x}, 0x{r.end:x}): regs.json and layout.json describe different memory")
        if got != want:
            b, sz, a = got
            raise ProgramError(f"{where}: REGION{i} opens [0x{b:x}, 0x{b + sz:x}) {rw.get(a, f'attr 0x{a:x}')}, "
                               f"but layout region '{r.name}' is [0x{r.addr:x}, 0x{r.end:x}) "
                               f"{rw[want[2]]}: regs.json and layout.json describe different memory")
    for i, (b, sz, _) in win.items():
        raise ProgramError(f"{where}: REGION{i} opens [0x{b:x}, 0x{b + sz:x}), which no layout region describes")


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """The integer arrays of an .npz file; one ProgramError line naming the file for anything else."""
    try:
        out = read_npz(path)
    except NpzError as e:
        raise ProgramError(str(e)) from None
    for k, a in out.items():
        if a.dtype.kind not in "iu":
            raise ProgramError(f"{path}: array '{k}' has dtype {a.dtype}, not an integer type")
    return out


def _check_dram_bin(p: "Program", path: Path) -> None:
    """Refuse a ``dram.bin`` that is not the image of the folder's ``insn.bin`` and ``inputs.npz``."""
    got = path.read_bytes()
    want = bytes(p.dram_image())
    if len(got) != len(want):
        raise ProgramError(f"{path}: {len(got)} bytes, but the initial DRAM image of insn.bin and inputs.npz is "
                           f"{len(want)} bytes (truncated or stale: delete it or save the Program again)")
    if got != want:
        at = int(np.flatnonzero(np.frombuffer(got, np.uint8) != np.frombuffer(want, np.uint8))[0])
        where = next((f" (region '{r.name}')" for r in p.regions if r.addr <= at < r.end), "")
        raise ProgramError(f"{path}: differs from the image of insn.bin and inputs.npz at byte 0x{at:x}{where} "
                           f"(stale: delete it or save the Program again)")


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes().decode("utf-8"), object_pairs_hook=unique_keys)
    except DuplicateKeyError as e:  # the last one would silently win
        raise ProgramError(f"{path}: {e}") from None
    except UnicodeDecodeError as e:
        raise ProgramError(f"{path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})") from None
    except json.JSONDecodeError as e:
        raise ProgramError(f"{path}: not valid JSON: {e.msg} at line {e.lineno}") from None
    except RecursionError:  # nested deeper than the decoder goes: no Program file is
        raise ProgramError(f"{path}: not a Program file (JSON nested too deep)") from None


_KINDS = {dict: "object", list: "list", str: "string", int: "integer", float: "number", bool: "true/false",
          type(None): "null"}


def _json_kind(v: Any) -> str:
    """What a JSON value is, in JSON's words (``list``, ``string``, ...)."""
    return _KINDS.get(type(v), type(v).__name__)


def _field(obj: dict[str, Any], key: str, kind: type, path: Path, default: Any = ..., where: str = "") -> Any:
    """``obj[key]``, which must be of JSON type ``kind`` (an int is never a bool or a float); ``default``
    when it is absent and a default is given. One ProgramError line naming the file and the field."""
    if key not in obj:
        if default is not ...:
            return default
        raise ProgramError(f"{path}: {where}needs '{key}' ({_KINDS[kind]})")
    v = obj[key]
    if type(v) is not kind:
        raise ProgramError(f"{path}: {where}'{key}' must be a JSON {_KINDS[kind]}, not {_json_kind(v)} {v!r}"[:300])
    return v


def _region_of(k: int, entry: Any, path: Path) -> Region:
    """Layout region ``k`` from its JSON entry, every field of its exact type (no silent conversion)."""
    if not isinstance(entry, dict):
        raise ProgramError(f"{path}: region {k} must be a JSON object, not {_json_kind(entry)} {entry!r}"[:300])
    name = _field(entry, "name", str, path, where=f"region {k}: ")
    where = f"region {k} ('{name}'): "
    role = _field(entry, "role", str, path, where=where)
    addr = _field(entry, "addr", int, path, where=where)
    shape = _field(entry, "shape", list, path, where=where)
    if any(type(s) is not int for s in shape):
        raise ProgramError(f"{path}: {where}'shape' must be a list of integers, not {shape!r}"[:300])
    dtype = _field(entry, "dtype", str, path, where=where)
    if "bytes" in entry:
        _field(entry, "bytes", int, path, where=where)
    return Region(name, role, addr, tuple(shape), dtype)


def _hardware_of(layout: dict[str, Any], name: str, config_id: int, lpath: Path) -> HwConfig | None:
    """The copy of its config a Program folder's layout.json carries under 'hardware' (None in a folder
    written before it did), checked against the 'config' and 'config_id' it names."""
    if "hardware" not in layout:
        return None
    try:
        own = parse_config(layout["hardware"], f"{lpath}: 'hardware'")
    except ConfigError as e:
        raise ProgramError(str(e)) from None
    if own.name != name:
        raise ProgramError(f"{lpath}: 'hardware' is config '{own.name}', but 'config' says '{name}'")
    if own.config_id != config_id:
        raise ProgramError(f"{lpath}: 'hardware' is config id 0x{own.config_id:08x}, but 'config_id' says "
                           f"0x{config_id:08x} (an edited layout.json)")
    return own


def _config_of(own: HwConfig | None, name: str, config_id: int, lpath: Path) -> HwConfig:
    """The config a Program folder was made for: the shipped config of its name when that is the same
    hardware, else the folder's own copy (a config file of the user's, or a shipped config since changed)."""
    try:
        shipped: HwConfig | None = load_config(name)
    except ConfigError as e:
        shipped, why = None, e
    if shipped is not None and (own is None or shipped.config_id == config_id):
        return shipped  # without a copy, the caller's identity check names any difference
    if own is None:
        raise ProgramError(f"{lpath}: made for config '{name}', which cannot be loaded: {why} (a config file of "
                           f"your own: give it with --config PATH)")
    return own


def _read_regs(path: Path, cfg: HwConfig, layout_cfg: str, layout_id: int) -> list[tuple[str, int]]:
    """The register writes of ``regs.json``; its ``config``/``config_id`` (when given) must be layout.json's."""
    data = _read_json(path)
    writes = data.get("writes") if isinstance(data, dict) else None
    if not isinstance(writes, list):
        raise ProgramError(f"{path}: needs a 'writes' list")
    if "config" in data and _field(data, "config", str, path) != layout_cfg:
        raise ProgramError(f"{path}: made for config '{data['config']}', but layout.json says '{layout_cfg}'")
    if "config_id" in data:
        text = _field(data, "config_id", str, path)
        try:
            rid = int(text, 16)
        except ValueError:
            raise ProgramError(f"{path}: 'config_id' must be a hex string, not {text!r}") from None
        if rid != layout_id:
            raise ProgramError(f"{path}: config_id 0x{rid:08x}, but layout.json says 0x{layout_id:08x} "
                               f"(this run's config '{cfg.name}' is 0x{cfg.config_id:08x})")
    by_name = csr.csrs_of(cfg)
    out = []
    for i, w in enumerate(writes):
        if not isinstance(w, dict) or "csr" not in w or "value" not in w:
            raise ProgramError(f"{path}: write {i} needs 'csr' and 'value'")
        name, value = w["csr"], w["value"]
        if type(name) is not str:
            raise ProgramError(f"{path}: write {i}: 'csr' must be a CSR name (a JSON string), not "
                               f"{_json_kind(name)} {name!r}"[:300])
        if name not in by_name:
            raise ProgramError(f"{path}: write {i} names unknown CSR '{name}'")
        reg = by_name[name]
        if "addr" in w and type(w["addr"]) is not int:
            raise ProgramError(f"{path}: write {i} to {name}: 'addr' must be a JSON integer, not "
                               f"{_json_kind(w['addr'])} {w['addr']!r}"[:300])
        if "addr" in w and w["addr"] != reg.addr:
            raise ProgramError(f"{path}: write {i} to {name} gives address {w['addr']:#x}, the map says {reg.addr:#x}")
        if reg.access == "ro":
            raise ProgramError(f"{path}: write {i} targets read-only CSR {name}")
        if type(value) is not int or not 0 <= value <= 0xFFFFFFFF:
            raise ProgramError(f"{path}: write {i} to {name}: value {value!r} is not a 32-bit unsigned integer")
        out.append((name, value))
    return out
